//! What `kanon anonymize` reports: the summary on stdout, the log lines,
//! the metrics JSON (written before the commit), the release's provenance
//! metadata and the dry run's check list. Sizes and figures only, never a
//! value of a record.

use anyhow::Result;
use kanon_engine::metrics::risk::RiskProfile;
use kanon_engine::privacy::Privacy;
use kanon_engine::spec::JobSpec;
use kanon_engine::verify::Verified;
use kanon_engine::Anonymization;

use super::pass_one::PassOne;
use super::plan::Plan;
use crate::memory::Phases;
use kanon_io::artefact::Artefact;
use kanon_io::ops::Ui;
use kanon_io::storage::Location;

/// A finished run, before its commit: what the summary, the logs and the
/// metrics JSON say.
pub(super) struct Run<'a> {
    pub(super) plan: &'a Plan,
    pub(super) privacy: &'a Privacy,
    pub(super) result: &'a Anonymization,
    pub(super) release_check: &'a Verified,
    pub(super) fingerprint: Option<&'a str>,
    pub(super) rows_in: u64,
    pub(super) bytes_out: u64,
    pub(super) read_s: f64,
    pub(super) write_s: f64,
    pub(super) total_s: f64,
    pub(super) memory: Memory,
    /// The risk profiles of the input and of the release, when measured
    /// (`--metrics-json`, `--report`).
    pub(super) risk: Option<(&'a RiskProfile, &'a RiskProfile)>,
    /// Rows, and people, of the input that the Delta table's readable
    /// versions already publish, left out of this `append`
    /// (`output.history`).
    pub(super) left_out: (u64, usize),
}

impl Run<'_> {
    /// Every metric, both verifications, the timings and the memory.
    pub(super) fn metrics_json(&self, files: &[Location]) -> serde_json::Value {
        let (plan, result) = (self.plan, self.result);
        serde_json::json!({
            "input": plan.input.to_string(),
            "output": plan.output.to_string(),
            "files": files.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
            "input_fingerprint": self.fingerprint,
            "history_left_out": { "rows": self.left_out.0, "people": self.left_out.1 },
            "algorithm": result.algorithm,
            "privacy": self.privacy.describe(),
            "seed": plan.job.spec().algorithm.seed,
            "report": result.report,
            "verified": result.verified,
            "release_verified": self.release_check,
            "details": result.details,
            "memory": self.memory,
            "risk": self.risk.map(|(before, after)| serde_json::json!({
                "before": before,
                "after": after,
            })),
            "timings_s": {
                "pass1_read_encode": self.read_s,
                "classes": result.timings.classes.as_secs_f64(),
                "algorithm": result.timings.algorithm.as_secs_f64(),
                "verify": result.timings.verify.as_secs_f64(),
                "metrics": result.timings.metrics.as_secs_f64(),
                "pass2_recode_verify_write": self.write_s,
                "total": self.total_s,
            },
        })
    }

    /// The log lines of a committed release.
    pub(super) fn log_committed(&self, files: usize, rows_out: u64) {
        let r = &self.result.report;
        let memory = &self.memory;
        tracing::info!(
            output = %self.plan.output,
            files = files,
            rows_in = self.rows_in,
            rows_out = rows_out,
            suppressed = r.suppressed_rows,
            k_achieved = r.smallest_class,
            ncp = r.ncp,
            bytes = self.bytes_out,
            seconds = self.total_s,
            "release committed"
        );
        tracing::info!(
            working_set_bytes = memory.working_set_bytes,
            working_set_bytes_per_row = memory.working_set_bytes_per_row,
            peak_rss_bytes = memory.peak_rss_bytes,
            peak_rss_bytes_per_row = memory.peak_rss_bytes_per_row,
            estimate_before_reading_bytes = memory.estimate_before_reading_bytes,
            estimate_bytes = memory.estimate_bytes,
            budget_bytes = memory.budget_bytes,
            "memory"
        );
    }

    /// The summary on stdout.
    pub(super) fn print_summary(&self, files: usize) {
        let (plan, result) = (self.plan, self.result);
        let r = &result.report;
        outln!("kanon anonymize: {} -> {}", plan.input, plan.output);
        outln!(
            "  algorithm     {} ({})",
            result.algorithm,
            self.privacy.describe()
        );
        outln!(
            "  rows          {} in, {} out, {} suppressed",
            r.rows_in,
            r.rows_out,
            r.suppressed_rows
        );
        // SafePub's sample: the rows it left out are among the suppressed.
        if let (Some(sampled), Some(left)) = (
            result.details.get("sampled_rows"),
            result.details.get("rows_not_sampled"),
        ) {
            outln!(
                "  sample        {sampled} rows drawn (probability {}), {left} left out; draws {}",
                result.details["beta"],
                result.details["randomness"].as_str().unwrap_or_default()
            );
        }
        // δ-presence: the population outside the research subset is
        // withheld, and counted among the suppressed.
        let outside = result.verified.outside_rows;
        if outside > 0 {
            outln!(
                "  population    {outside} rows outside the research subset withheld (delta-presence), {} suppressed",
                r.suppressed_rows.saturating_sub(outside)
            );
        }
        if self.left_out.0 > 0 {
            outln!(
                "  history       {} rows of {} people the table already publishes left out (output.history)",
                self.left_out.0,
                self.left_out.1
            );
        }
        match result.details.get("entity") {
            Some(e) => {
                outln!(
                    "  people        {} by `{}`, {} published: k and l count people",
                    e["people"],
                    e["column"].as_str().unwrap_or_default(),
                    result.verified.people.unwrap_or_default()
                );
                outln!(
                    "  classes       {} (smallest {}, largest {} people), k achieved {} people",
                    r.classes,
                    r.smallest_class,
                    r.largest_class,
                    r.smallest_class
                );
            }
            None => outln!(
                "  classes       {} (smallest {}, largest {}), k achieved {}",
                r.classes,
                r.smallest_class,
                r.largest_class,
                r.smallest_class
            ),
        }
        if let Some(raised) = result.details.get("raised_class_size") {
            outln!(
                "  class size    raised to {} for the risk models ({} more runs of the algorithm)",
                raised["size"],
                raised["runs"]
            );
        }
        outln!(
            "  loss          NCP {:.4}, granularity {:.4}, distortion ratio {:.4}",
            r.ncp,
            r.granularity,
            r.distortion_ratio
        );
        if let Some(p) = result.details.get("partitioned") {
            let f = |key: &str| p.get(key).and_then(|v| v.as_f64()).unwrap_or(0.0);
            outln!(
                "  blocks        {} of {}-{} rows (partition {:.3} s, blocks {:.3} s, union {:.3} s)",
                f("blocks"),
                f("block_rows_min"),
                f("block_rows_max"),
                f("partition_s"),
                f("blocks_s"),
                f("union_s")
            );
            if let Some(e) = p.get("executor").filter(|e| e.is_object()) {
                let g = |key: &str| e.get(key).and_then(|v| v.as_f64()).unwrap_or(0.0);
                outln!(
                    "  workers       {} ({} tasks; {:.1} MiB sent, {:.1} MiB back; {:.3} s)",
                    g("workers"),
                    g("tasks"),
                    g("bytes_to_workers") / 1048576.0,
                    g("bytes_from_workers") / 1048576.0,
                    g("distributed_s")
                );
            }
        }
        if files > 1 {
            outln!("  files         {} ({} bytes)", files, self.bytes_out);
        }
        outln!(
            "  time          {:.3} s (pass 1 {:.3}, algorithm {:.3}, verify {:.3}, pass 2 {:.3})",
            self.total_s,
            self.read_s,
            result.timings.algorithm.as_secs_f64(),
            result.timings.verify.as_secs_f64(),
            self.write_s
        );
    }
}

/// The dry run's report: pass 1 read the input and every check before the
/// algorithm passed; nothing was written.
pub(super) fn dry_run(ui: &Ui, plan: &Plan, first: &PassOne, privacy: &Privacy) {
    let spec = plan.job.spec();
    if !ui.quiet {
        outln!(
            "kanon anonymize --dry-run: {} -> {}",
            plan.input,
            plan.output
        );
        let files = match first.dataset.is_in_memory() {
            true => String::new(),
            false => format!("{} file(s), ", first.dataset.n_files()),
        };
        outln!(
            "  input         {files}{}, {} rows, {} columns",
            first.dataset.format.name(),
            first.rows_in,
            first.dataset.schema.fields().len()
        );
        outln!(
            "  job           {} ({}), {} quasi-identifiers checked against their hierarchies",
            spec.algorithm.name,
            privacy.describe(),
            first.encoded.table().n_qi()
        );
        let m = &first.memory;
        outln!("  memory        {}", m.estimate.describe());
        if let Some(b) = &m.budget {
            outln!("  budget        {}", b.describe());
        }
        outln!("  ok            nothing was written");
    }
    tracing::info!(input = %plan.input, rows = first.rows_in, "dry run passed");
}

/// Memory of a run: the encoded working set, the process's peak resident
/// set (Linux only), in bytes and per input row, each phase's peak, and the
/// estimate and budget the run was checked against before reading. Sizes
/// only, never data.
#[derive(Debug, serde::Serialize)]
pub(super) struct Memory {
    working_set_bytes: u64,
    working_set_bytes_per_row: f64,
    peak_rss_bytes: Option<u64>,
    peak_rss_bytes_per_row: Option<f64>,
    /// Peak RSS of each phase (`pass1`, `algorithm`, `pass2`, ...).
    phases: Vec<PhasePeak>,
    /// The estimate of the peak made before reading.
    estimate_before_reading_bytes: Option<u64>,
    /// The estimate again after pass 1 (exact rows and code widths).
    estimate_bytes: Option<u64>,
    /// The job's memory budget.
    budget_bytes: Option<u64>,
}

/// One phase's peak RSS.
#[derive(Debug, serde::Serialize)]
struct PhasePeak {
    phase: &'static str,
    peak_rss_bytes: u64,
}

impl Memory {
    /// The memory of a run over `rows` rows, at its end.
    pub(super) fn of_run(
        working_set_bytes: u64,
        rows: u64,
        phases: &Phases,
        estimates: Option<(u64, u64)>,
        budget_bytes: Option<u64>,
    ) -> Memory {
        let per_row = |bytes: u64| bytes as f64 / rows.max(1) as f64;
        let peak_rss_bytes = phases.peak();
        Memory {
            working_set_bytes,
            working_set_bytes_per_row: per_row(working_set_bytes),
            peak_rss_bytes,
            peak_rss_bytes_per_row: peak_rss_bytes.map(per_row),
            phases: match phases.separate() {
                true => phases
                    .peaks()
                    .iter()
                    .map(|&(phase, peak_rss_bytes)| PhasePeak {
                        phase,
                        peak_rss_bytes,
                    })
                    .collect(),
                false => Vec::new(),
            },
            estimate_before_reading_bytes: estimates.map(|e| e.0),
            estimate_bytes: estimates.map(|e| e.1),
            budget_bytes,
        }
    }
}

/// The metrics JSON of a run, written in full before the release is
/// committed (so its failure publishes nothing) and removed again if the
/// commit fails.
pub(super) fn write_metrics(path: &std::path::Path, json: &serde_json::Value) -> Result<Artefact> {
    Artefact::write(
        path,
        serde_json::to_string_pretty(json)?.as_bytes(),
        "metrics",
        "--metrics-json",
    )
}

/// kanon's provenance for the release's key-value metadata. Deterministic:
/// no times, no host names, no paths.
pub(super) fn provenance(
    spec: &JobSpec,
    result: &Anonymization,
    rows_in: u64,
    fingerprint: Option<&str>,
    delta_version: Option<i64>,
) -> Vec<(String, String)> {
    let r = &result.report;
    let mut out = vec![
        ("kanon.version".into(), env!("CARGO_PKG_VERSION").into()),
        ("kanon.algorithm".into(), result.algorithm.clone()),
        (
            "kanon.algorithm.params".into(),
            serde_json::to_string(&spec.algorithm).unwrap_or_default(),
        ),
        (
            "kanon.privacy".into(),
            serde_json::to_string(&spec.privacy).unwrap_or_default(),
        ),
        ("kanon.seed".into(), spec.algorithm.seed.to_string()),
        ("kanon.k_achieved".into(), r.smallest_class.to_string()),
        ("kanon.rows_in".into(), rows_in.to_string()),
        (
            "kanon.rows_suppressed".into(),
            r.suppressed_rows.to_string(),
        ),
        ("kanon.ncp".into(), format!("{:.6}", r.ncp)),
        ("kanon.granularity".into(), format!("{:.6}", r.granularity)),
        (
            "kanon.quasi_identifiers".into(),
            spec.quasi_identifiers()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
        (
            "kanon.sensitive".into(),
            spec.sensitive()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
    ];
    // l achieved per sensitive column (distinct and entropy l-diversity).
    for d in &r.sensitive {
        out.push((
            format!("kanon.l_achieved.{}", d.name),
            format!(
                "{{\"distinct_l\":{},\"entropy_l\":{:.6}}}",
                d.distinct_l, d.entropy_l
            ),
        ));
    }
    if let Some(f) = fingerprint {
        out.push(("kanon.input.fingerprint".into(), f.to_string()));
    }
    if let Some(v) = delta_version {
        out.push(("kanon.input.delta_version".into(), v.to_string()));
    }
    out
}
