//! The peak resident set of each phase of a run, measured by resetting the
//! kernel's high-water mark (`VmHWM`) at every phase boundary.

use serde::Serialize;

/// Peak RSS per phase, in the order the phases ran.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct Phases {
    /// `(phase, peak RSS in bytes during it)`.
    peaks: Vec<(&'static str, u64)>,
    /// Whether the high-water mark could be reset between phases; without
    /// it each figure is the peak since the process started.
    separate: bool,
}

impl Phases {
    /// Starts measuring: the phases before (loading the job, opening the
    /// input) count toward the first.
    pub fn start() -> Phases {
        Phases {
            peaks: Vec::new(),
            separate: true,
        }
    }

    /// Ends `phase`: records the peak since the last boundary and resets
    /// the mark for the next.
    pub fn end(&mut self, phase: &'static str) {
        let Some(peak) = kanon_io::ops::peak_rss_bytes() else {
            return;
        };
        self.peaks.push((phase, peak));
        give_back_freed();
        self.separate &= reset_peak();
        tracing::debug!(phase, peak_rss_bytes = peak, "memory: phase done");
    }

    /// The peak of the whole run so far (the phases' and the current one).
    pub fn peak(&self) -> Option<u64> {
        let now = kanon_io::ops::peak_rss_bytes();
        self.peaks.iter().map(|&(_, p)| p).chain(now).max()
    }

    /// The phases and their peaks, for the metrics JSON.
    pub fn peaks(&self) -> &[(&'static str, u64)] {
        &self.peaks
    }

    /// Whether each phase's figure is its own (the mark was reset).
    pub fn separate(&self) -> bool {
        self.separate
    }
}

/// Hands the heap pages freed by the phase just ended back to the
/// operating system: glibc's allocator keeps them for reuse, and the
/// next phase's allocations (of other sizes) would stack on top of them.
fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's
    // own arenas; it takes no pointer and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Resets the process's `VmHWM` to its current RSS (`5` to
/// `/proc/self/clear_refs`, Linux 4.0 and later).
fn reset_peak() -> bool {
    #[cfg(target_os = "linux")]
    {
        std::fs::write("/proc/self/clear_refs", "5").is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}
