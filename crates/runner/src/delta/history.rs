//! The release history of a Delta table: every version still in its log,
//! with its operation, time, the files and rows it added or removed, and
//! the privacy certificate of the releases kanon committed.

use anyhow::{Context, Result};
use serde::Serialize;

use kanon_engine::privacy::Privacy;

use super::Table;
use crate::certificate::{discrepancies, job_hash, Certificate, COMMIT_INFO_KEY};
use crate::config::Job;
use crate::dataset::Dataset;
use crate::ops::Ui;
use crate::storage::{Location, Storage};
use crate::verify::{check, Checked};

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
        } else if action.get("remove").is_some() {
            r.files_removed += 1;
        }
    }
    Ok(r)
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
fn percent_decode(p: &str) -> String {
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
    job: &Job,
    privacy: &Privacy,
    location: &Location,
    version: i64,
    ui: &Ui,
) -> Result<bool> {
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
    for r in history_to(storage, &table, version)? {
        let Some(c) = &r.certificate else { continue };
        if r.added.is_empty() || !r.added.iter().all(|p| active.contains(p)) {
            if !ui.quiet {
                outln!(
                    "  version {}: certificate not re-checked, its rows were replaced later",
                    r.version
                );
            }
            continue;
        }
        let files: Vec<Location> = r.added.iter().map(|p| location.join(p)).collect();
        let label = format!("{location} (rows of version {})", r.version);
        let dataset = Dataset::open_files(storage, location, &files)?;
        let found = match check(job, privacy, storage, &dataset, &label, ui)? {
            Checked::Holds(v) => v,
            Checked::Fails(msg) => {
                outln!("  version {}: does NOT satisfy the job: {msg}", r.version);
                all_hold = false;
                continue;
            }
        };
        let differs = discrepancies(&found, &c.verified);
        if differs.is_empty() {
            if !ui.quiet {
                let job_note = match c.job_hash == this_job {
                    true => "this job",
                    false => "another job (its hash differs from this job's)",
                };
                outln!(
                    "  version {}: certificate holds ({} rows, smallest class {}, made by {job_note})",
                    r.version, found.published_rows, found.smallest_class
                );
            }
        } else {
            outln!(
                "  version {}: certificate does NOT match the data: {}",
                r.version,
                differs.join("; ")
            );
            all_hold = false;
        }
    }
    Ok(all_hold)
}
