//! Cancellation: a flag (and an optional deadline) every algorithm checks in
//! its inner loops, so an interrupt, a job timeout or a dropped SQL stream
//! stops the work within a fraction of a second instead of when the
//! algorithm happens to finish.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::error::{Error, Result};

/// A cancellation flag shared between the caller and the algorithm, with
/// an optional deadline. Cheap to clone and to check.
#[derive(Debug, Clone, Default)]
pub struct Cancellation {
    flag: Arc<AtomicBool>,
    deadline: Option<Instant>,
}

impl Cancellation {
    /// A token that fires only when [`Cancellation::cancel`] is called.
    pub fn new() -> Self {
        Self::default()
    }

    /// A token that fires when `flag` is set (e.g. by a signal handler).
    pub fn from_flag(flag: Arc<AtomicBool>) -> Self {
        Cancellation {
            flag,
            deadline: None,
        }
    }

    /// The same token, also firing at `deadline`.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// A token that never fires (for callers without cancellation).
    pub fn never() -> &'static Cancellation {
        static NEVER: OnceLock<Cancellation> = OnceLock::new();
        NEVER.get_or_init(Cancellation::new)
    }

    /// Asks the work to stop.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// Whether the work should stop (cancelled, or past the deadline).
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether the deadline (not the flag) stopped the work.
    pub fn timed_out(&self) -> bool {
        !self.flag.load(Ordering::Relaxed) && self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// `Err(Error::Cancelled)` once cancelled or past the deadline.
    ///
    /// # Errors
    /// [`Error::Cancelled`].
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::Cancelled(if self.timed_out() {
                "the job's time limit passed".into()
            } else {
                "the job was interrupted".into()
            }))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn fires_on_cancel_and_on_the_deadline() {
        let c = Cancellation::new();
        assert!(c.check().is_ok());
        let clone = c.clone();
        clone.cancel();
        assert!(matches!(c.check(), Err(Error::Cancelled(_))));
        let d = Cancellation::new().with_deadline(Instant::now() - Duration::from_millis(1));
        assert!(d.timed_out());
        assert!(d.check().unwrap_err().to_string().contains("time limit"));
        assert!(Cancellation::never().check().is_ok());
    }
}
