//! The release history of a Delta table: every version still in its log,
//! with its operation, time, the files and rows it added or removed, and
//! the privacy certificate of the releases kanon committed.

use anyhow::{Context, Result};
use serde::Serialize;

use kanon_engine::privacy::Privacy;

use super::Table;
use crate::certificate::{
    discrepancies, diversity_discrepancies, job_hash, Certificate, COMMIT_INFO_KEY,
};
use crate::config::JobFile;
use crate::dataset::Dataset;
use crate::ops::Ui;
use crate::release_check::{check_with_labels, Checked};
use crate::storage::{Location, Storage};

/// One version of a table.
#[derive(Debug, Clone, Serialize)]
pub struct Release {
    pub version: i64,
    /// Milliseconds since the epoch, from the commit info.
    pub timestamp: Option<i64>,
    /// `CREATE TABLE`, `WRITE`, ... as the writer named it.
    pub operation: Option<String>,
    pub files_added: usize,
    pub files_removed: usize,
    /// Rows added, from the files' statistics when they have them.
    pub rows_added: Option<u64>,
    /// kanon's certificate, when kanon committed the version.
    pub certificate: Option<Certificate>,
    /// The paths of the files added, relative to the table.
    #[serde(skip)]
    pub added: Vec<String>,
    /// Whether the version changed the table's rows: an add or remove with
    /// `dataChange` (a compaction such as OPTIMIZE rewrites files without).
    #[serde(skip)]
    pub changes_data: bool,
    /// Whether kanon wrote the version: its transaction's application id
    /// is kanon's (`kanon-...`), whatever its commit info says.
    #[serde(skip)]
    pub kanon_txn: bool,
}

/// Every version of the table still in its log, oldest first (versions
/// removed by log cleanup are left out).
///
/// # Errors
/// No table at the location; storage failures; a commit that is not JSON.
pub fn history(storage: &Storage, table: &Table) -> Result<Vec<Release>> {
    let dt = table.load_existing(storage, None)?;
    let latest = super::version_of(&dt);
    history_to(storage, table, latest)
}

fn history_to(storage: &Storage, table: &Table, latest: i64) -> Result<Vec<Release>> {
    let log = table.log_store();
    let mut out = Vec::new();
    for version in 0..=latest {
        let Some(bytes) = storage
            .block_on(log.read_commit_entry(version as u64))
            .with_context(|| format!("cannot read version {version} of {}", table.location))?
        else {
            continue;
        };
        out.push(parse_commit(version, &bytes).with_context(|| {
            format!(
                "version {version} of Delta table {} is not a Delta commit",
                table.location
            )
        })?);
    }
    Ok(out)
}

fn parse_commit(version: i64, bytes: &[u8]) -> Result<Release> {
    let mut r = Release {
        version,
        timestamp: None,
        operation: None,
        files_added: 0,
        files_removed: 0,
        rows_added: Some(0),
        certificate: None,
        added: Vec::new(),
        changes_data: false,
        kanon_txn: false,
    };
    for line in std::str::from_utf8(bytes)?
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let action: serde_json::Value = serde_json::from_str(line)?;
        if let Some(info) = action.get("commitInfo") {
            r.timestamp = info.get("timestamp").and_then(|t| t.as_i64());
            r.operation = info
                .get("operation")
                .and_then(|o| o.as_str())
                .map(String::from);
            if let Some(c) = info.get(COMMIT_INFO_KEY) {
                r.certificate = Some(
                    serde_json::from_value(c.clone())
                        .context("its kanon certificate cannot be read")?,
                );
            }
        } else if let Some(add) = action.get("add") {
            r.files_added += 1;
            r.changes_data |= data_change(add);
            if let Some(p) = add.get("path").and_then(|p| p.as_str()) {
                r.added.push(percent_decode(p));
            }
            let rows = add
                .get("stats")
                .and_then(|s| s.as_str())
                .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                .and_then(|s| s.get("numRecords").and_then(|n| n.as_u64()));
            r.rows_added = match (r.rows_added, rows) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        } else if let Some(txn) = action.get("txn") {
            r.kanon_txn |= txn
                .get("appId")
                .and_then(|a| a.as_str())
                .is_some_and(|a| a.starts_with("kanon-"));
        } else if let Some(remove) = action.get("remove") {
            r.files_removed += 1;
            r.changes_data |= data_change(remove);
        }
    }
    Ok(r)
}

/// An add or remove action's `dataChange` (true when missing: fail closed).
fn data_change(action: &serde_json::Value) -> bool {
    action
        .get("dataChange")
        .and_then(|d| d.as_bool())
        .unwrap_or(true)
}

/// Prints the history as `kanon inspect` does.
pub fn print_history(table: &Table, releases: &[Release]) {
    outln!(
        "Delta table {}: {} version(s) in its log",
        table.location,
        releases.len()
    );
    for r in releases {
        let rows = r
            .rows_added
            .map(|n| n.to_string())
            .unwrap_or_else(|| "?".into());
        outln!(
            "  version {:>4}  {:<14} +{} files (-{})  {} rows added",
            r.version,
            r.operation.as_deref().unwrap_or("?"),
            r.files_added,
            r.files_removed,
            rows
        );
        match &r.certificate {
            Some(c) => {
                let reqs: Vec<String> = c
                    .verified
                    .requirements
                    .iter()
                    .map(|q| format!("{} achieved k = {}", q.requirement, q.achieved_k))
                    .collect();
                outln!(
                    "                kanon {} {} seed {}: k achieved {}, {} published, {} suppressed; {}",
                    c.kanon_version,
                    c.algorithm,
                    c.seed,
                    c.verified.smallest_class,
                    c.rows_published,
                    c.rows_suppressed,
                    reqs.join("; ")
                );
                for l in &c.l_achieved {
                    outln!(
                        "                l achieved on {}: distinct {}, entropy {:.3}",
                        l.column,
                        l.distinct_l,
                        l.entropy_l
                    );
                }
                for m in &c.verified.models {
                    outln!(
                        "                {}{}",
                        m.model,
                        m.achieved
                            .as_deref()
                            .map(|a| format!(": {a}"))
                            .unwrap_or_default()
                    );
                }
                outln!(
                    "                job {} input {}{}",
                    c.job_hash,
                    c.input.fingerprint.as_deref().unwrap_or("?"),
                    c.input
                        .delta_version
                        .map(|v| format!(" (Delta version {v})"))
                        .unwrap_or_default()
                );
            }
            None => outln!("                no kanon certificate (not a kanon release)"),
        }
    }
}

/// `%XX` escapes of a Delta path decoded.
pub(crate) fn percent_decode(p: &str) -> String {
    let b = p.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(x) = u8::from_str_radix(&p[i + 1..i + 3], 16) {
                out.push(x);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Re-checks the certificate of every kanon commit up to `version` whose
/// files are all still in the table at `version`: the rows that commit
/// added are verified against the job, and what they achieve must be what
/// the certificate claims (rows, classes, smallest class, k per
/// requirement). Prints one line per commit. Returns whether every
/// certificate held.
///
/// # Errors
/// Read failures.
pub fn check_certificates(
    storage: &Storage,
    job: &JobFile,
    location: &Location,
    version: i64,
    trusted: Option<ed25519_dalek::VerifyingKey>,
    ui: &Ui,
) -> Result<bool> {
    let privacy = &Privacy::from_spec(job.spec())?;
    let table = Table::at(storage, location)?;
    let dt = table.load_existing(storage, Some(version))?;
    let active: std::collections::HashSet<String> = dt
        .snapshot()
        .context("cannot read the Delta table")?
        .log_data()
        .iter()
        .map(|f| f.path().to_string())
        .collect();
    let this_job = job_hash(job);
    let mut all_hold = true;
    let mut certified_before: Option<i64> = None;
    let fail = |version: i64, msg: String| {
        outln!("  version {version}: {msg}");
    };
    for r in history_to(storage, &table, version)? {
        let Some(c) = &r.certificate else {
            if r.kanon_txn {
                fail(
                    r.version,
                    "kanon committed it (its transaction is kanon's) but it carries no certificate: the certificate was removed from the log".to_string(),
                );
                all_hold = false;
                continue;
            }
            // After kanon certified the table, a version that changes its
            // rows without a certificate (another engine's INSERT, DELETE
            // or UPDATE) publishes rows nobody verified as a release.
            if let (Some(first), true) = (certified_before, r.changes_data) {
                fail(
                    r.version,
                    format!(
                        "changes the rows of a table kanon certified (version {first}) without a certificate ({} file(s) added, {} removed by {}): its rows were never verified as a release",
                        r.files_added,
                        r.files_removed,
                        r.operation.as_deref().unwrap_or("an unnamed operation")
                    ),
                );
                all_hold = false;
            }
            continue;
        };
        certified_before.get_or_insert(r.version);
        // Every certificate in the log, whatever became of its rows, must
        // be signed by the trusted key.
        if let Some(key) = &trusted {
            if let Err(why) = crate::signing::check(c, key) {
                fail(r.version, why);
                all_hold = false;
                continue;
            }
        }
        if r.added.is_empty() || !r.added.iter().all(|p| active.contains(p)) {
            if !ui.quiet {
                outln!(
                    "  version {}: certificate not re-checked, its rows were replaced later",
                    r.version
                );
            }
            continue;
        }
        // A certificate whose rows are still in the table must be this
        // job's (a job's change that overwrote the table leaves the old
        // job's certificates on replaced rows only).
        if c.job_hash != this_job {
            fail(
                r.version,
                "its certificate was made by another job (the job hash differs from this job's): verify the table with the job that made it".to_string(),
            );
            all_hold = false;
            continue;
        }
        let files: Vec<Location> = r.added.iter().map(|p| location.join(p)).collect();
        // The certificate vouches for each file by its hash: the same
        // names and sizes with other bytes (values replaced) fail.
        if !c.files.is_empty() {
            let mut certified: Vec<String> =
                c.files.iter().map(|f| percent_decode(&f.path)).collect();
            let mut added = r.added.clone();
            certified.sort();
            added.sort();
            if certified != added {
                fail(
                    r.version,
                    format!(
                        "adds {} file(s), its certificate vouches for {} other or more",
                        added.len(),
                        certified.len()
                    ),
                );
                all_hold = false;
                continue;
            }
            let mut rewritten = Vec::new();
            for f in &c.files {
                crate::ops::check_interrupt()?;
                let at = location.join(&percent_decode(&f.path));
                if crate::certificate::file_sha256(storage, &at)? != f.sha256 {
                    rewritten.push(percent_decode(&f.path));
                }
            }
            if !rewritten.is_empty() {
                fail(
                    r.version,
                    format!(
                        "file(s) {} are not the files its certificate vouches for: their sha256 differs (rewritten after the commit)",
                        rewritten.join(", ")
                    ),
                );
                all_hold = false;
                continue;
            }
        }
        let label = format!("{location} (rows of version {})", r.version);
        let dataset = Dataset::open_files(storage, location, &files)?;
        let (found, labels) = match check_with_labels(job, privacy, storage, &dataset, &label, ui)?
        {
            (Checked::Holds(v), labels) => (v, labels),
            (Checked::Fails(msg), _) => {
                fail(r.version, format!("does NOT satisfy the job: {msg}"));
                all_hold = false;
                continue;
            }
        };
        let mut differs = discrepancies(&found, &c.verified);
        if let Some(labels) = &labels {
            differs.extend(diversity_discrepancies(
                &kanon_engine::metrics::release_diversity(labels),
                &c.l_achieved,
            ));
        }
        if differs.is_empty() {
            if !ui.quiet {
                outln!(
                    "  version {}: certificate holds ({} rows, smallest class {}{})",
                    r.version,
                    found.published_rows,
                    found.smallest_class,
                    match c.files.is_empty() {
                        true => ", no file hashes to check",
                        false => ", file hashes match",
                    }
                );
            }
        } else {
            fail(
                r.version,
                format!(
                    "certificate does NOT match the data: {}",
                    differs.join("; ")
                ),
            );
            all_hold = false;
        }
    }
    Ok(all_hold)
}
