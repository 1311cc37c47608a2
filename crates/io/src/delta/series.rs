//! A Delta table's history is one release (issue 31, item 2): before a
//! version is committed, it is checked with every earlier version a reader
//! can still read ([`kanon_engine::history`] says what is checked).
//!
//! - **Readable versions**: every version still in the log whose data
//!   files all still exist (time travel; a version whose files VACUUM
//!   removed can no longer be read).
//! - **The history state** (`output.history`, a directory or S3 prefix
//!   the job names, never inside the table): one file per release kanon
//!   committed, named by its data files, holding the keyed fingerprints of
//!   its people and hashes of their labels, rows and sensitive values
//!   ([`kanon_engine::history::Published`]). It is written before the
//!   commit (a release whose commit fails leaves a file no version
//!   references, which is ignored) and never published: the fingerprints
//!   link people across releases, which the table must not let readers do.
//! - **Without `output.history`**, a commit onto a table that a reader can
//!   already read rows of is refused (exit 3), unless the job file says
//!   `output.unchecked_series = true`: nothing can tell who was published
//!   before.
//!
//! A version of the table whose files kanon has no history of (written
//! before `output.history` was set, or by another engine) makes the series
//! uncheckable: refused too, naming the versions and the remedies.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use kanon_engine::history::{self, Published, View};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Table;
use crate::certificate::hex;
use crate::config::JobFile;
use crate::exit::{Failure, UNSATISFIABLE};
use crate::storage::{Location, Storage};

/// What a commit publishes into a table's series: the job's policy and the
/// people of the release (recorded by `kanon anonymize` only).
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    pub policy: &'a Policy,
    pub people: Option<&'a [Published]>,
}

/// The version of the state files' format.
const FORMAT: u32 = 1;
/// The state files' extension.
const EXTENSION: &str = ".kanon-history";

/// How a job's commits meet the versions a reader can already read.
#[derive(Debug, Clone)]
pub enum Policy {
    /// `output.history`: every commit is checked against the readable
    /// versions, people recognised through the state at `state`.
    Checked { state: Location, k: usize, l: usize },
    /// `output.unchecked_series = true`: the job file accepts that readers
    /// compare versions (each release is still k-anonymous on its own).
    Unchecked,
    /// Neither: a commit onto a table with readable rows is refused.
    Refused,
}

impl Policy {
    /// The policy of `job`'s `[output]` for the table at `table`.
    ///
    /// # Errors
    /// Bad input: both settings, a state inside the table, a history
    /// without `privacy.entity`, an unreadable state location.
    pub fn of(job: &JobFile, table: &Location) -> Result<Policy> {
        let spec = job.spec();
        let output = &spec.output;
        match (&output.history, output.unchecked_series == Some(true)) {
            (Some(_), true) => Err(Failure::bad_input(
                "`output.history` checks the table's versions and `output.unchecked_series = true` skips the check: keep one",
            )
            .into()),
            (None, true) => Ok(Policy::Unchecked),
            (None, false) => Ok(Policy::Refused),
            (Some(state), false) => {
                let state = Location::parse(state)
                    .with_context(|| format!("`output.history = \"{state}\"` is not a location"))?;
                if state.overlaps(table) || table.overlaps(&state) {
                    return Err(Failure::bad_input(format!(
                        "`output.history` ({state}) is inside or around the Delta table {table}: the history links people across releases and must never be published; name a directory outside the table"
                    ))
                    .into());
                }
                if spec.entity_column().is_none() {
                    return Err(Failure::bad_input(
                        "`output.history` recognises people across releases by `privacy.entity`: set it to the (pseudonymised) column that identifies a person; rows have no identity of their own across releases",
                    )
                    .into());
                }
                // The check of a series counts people per atom for k and
                // distinct l only: a model of `[privacy.models]` (a mean
                // risk, t-closeness, k-map, ...) across versions is not
                // checked, so such a series is not certified (fail closed).
                if !spec.privacy.models.is_empty() {
                    let names: Vec<&str> =
                        spec.privacy.models.keys().map(String::as_str).collect();
                    return Err(Failure::bad_input(format!(
                        "`output.history` checks a table's versions as one release for k and distinct l only, not for the job's `[privacy.models]` ({}); a reader comparing versions is not bound by them. Remove `output.history` to publish this job as the table's only release (a commit onto readable rows is then refused), or drop the models and state k (and l)",
                        names.join(", ")
                    ))
                    .into());
                }
                Ok(Policy::Checked {
                    state,
                    k: spec.strictest_k(),
                    l: spec.privacy.l.unwrap_or(1),
                })
            }
        }
    }
}

/// One release of the state: its data files (relative to the table) and
/// its people.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    format: u32,
    /// The table's root, as kanon names it.
    table: String,
    files: Vec<String>,
    people: Vec<Published>,
}

/// The directory of one table's releases under the state.
fn table_dir(state: &Location, table: &Location) -> Location {
    let id = hex(&Sha256::digest(
        table.to_string().trim_end_matches('/').as_bytes(),
    ));
    state.join(&id[..16])
}

fn entry_name(files: &[String]) -> String {
    let mut h = Sha256::new();
    for f in files {
        h.update(f.as_bytes());
        h.update([0]);
    }
    format!("{}{EXTENSION}", &hex(&h.finalize())[..32])
}

/// Every release of `table` recorded under `state`.
fn load_entries(storage: &Storage, state: &Location, table: &Location) -> Result<Vec<Entry>> {
    let dir = table_dir(state, table);
    let names: Vec<Location> = match &dir {
        Location::Local(p) => match std::fs::read_dir(p) {
            Ok(rd) => {
                let mut v = Vec::new();
                for e in rd {
                    let e = e.with_context(|| format!("cannot list the history {dir}"))?;
                    v.push(Location::Local(e.path()));
                }
                v
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).with_context(|| format!("cannot list the history {dir}")),
        },
        Location::S3 { .. } => storage
            .list(&dir)?
            .into_iter()
            .map(|m| m.location)
            .collect(),
    };
    let mut entries = Vec::new();
    for at in names {
        if !at.to_string().ends_with(EXTENSION) {
            continue;
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut storage.open_read(&at)?, &mut bytes)
            .with_context(|| format!("cannot read the history file {at}"))?;
        let entry: Entry = postcard::from_bytes(&bytes).map_err(|e| {
            Failure::new(
                UNSATISFIABLE,
                format!("the history file {at} cannot be read ({e}): it was not written by this kanon, or was damaged; nothing was committed"),
            )
        })?;
        if entry.format != FORMAT {
            return Err(Failure::new(
                UNSATISFIABLE,
                format!(
                    "the history file {at} has format {}, this kanon reads {FORMAT}",
                    entry.format
                ),
            )
            .into());
        }
        if entry.table.trim_end_matches('/') == table.to_string().trim_end_matches('/') {
            entries.push(entry);
        }
    }
    Ok(entries)
}

/// A `%XX`-escaped Delta path decoded.
fn decoded(p: &str) -> String {
    super::history::percent_decode(p)
}

/// Every readable version of the table up to `latest`, oldest first, with
/// its active data files (decoded paths relative to the table).
fn readable_versions(
    storage: &Storage,
    table: &Table,
    latest: i64,
) -> Result<Vec<(i64, BTreeSet<String>)>> {
    let mut exists: BTreeMap<String, bool> = BTreeMap::new();
    let mut out = Vec::new();
    for r in super::history(storage, table)? {
        if r.version > latest {
            break;
        }
        let dt = match table.load(storage, Some(r.version)) {
            Ok(Some(dt)) => dt,
            // A version the log can no longer rebuild cannot be read.
            Ok(None) | Err(_) => continue,
        };
        let files: BTreeSet<String> = dt
            .snapshot()
            .context("cannot read the Delta table")?
            .log_data()
            .iter()
            .map(|f| decoded(f.path().as_ref()))
            .collect();
        let mut readable = true;
        for f in &files {
            let present = match exists.get(f) {
                Some(&p) => p,
                None => {
                    let p = storage.head(&table.location.join(f))?.is_some();
                    exists.insert(f.clone(), p);
                    p
                }
            };
            readable &= present;
        }
        if readable {
            out.push((r.version, files));
        }
    }
    Ok(out)
}

/// The remedies named by every refusal.
const REMEDIES: &str = "publish to a new table (or a new location); or make the old versions unreadable (VACUUM with a retention that removes their files, and a short delta.logRetentionDuration); or publish a consistent incremental series: `output.mode = \"append\"` with `output.history` set from the table's first version, so that people already published are left out of each new release";

/// A table's readable versions as the people of their releases.
struct Views {
    entries: Vec<Entry>,
    /// Each readable version and the entries its files hold.
    versions: Vec<(i64, Vec<usize>)>,
}

impl Views {
    /// The readable versions of `table` up to `latest` (none for a new
    /// table), each as the recorded releases its files hold.
    ///
    /// # Errors
    /// Exit 3 when a readable version holds files no recorded release
    /// holds, or part of one only.
    fn load(
        storage: &Storage,
        table: &Table,
        state: &Location,
        latest: Option<i64>,
    ) -> Result<Views> {
        let entries = load_entries(storage, state, &table.location)?;
        let mut of_file: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            for f in &e.files {
                of_file.insert(f.as_str(), i);
            }
        }
        let mut versions = Vec::new();
        let mut unknown: Vec<i64> = Vec::new();
        let mut partial: Vec<i64> = Vec::new();
        if let Some(latest) = latest {
            for (version, files) in readable_versions(storage, table, latest)? {
                let mut held: BTreeMap<usize, usize> = BTreeMap::new();
                let mut foreign = false;
                for f in &files {
                    match of_file.get(f.as_str()) {
                        Some(&i) => *held.entry(i).or_default() += 1,
                        None => foreign = true,
                    }
                }
                if foreign {
                    unknown.push(version);
                }
                if held.iter().any(|(&i, &n)| n != entries[i].files.len()) {
                    partial.push(version);
                }
                versions.push((version, held.into_keys().collect()));
            }
        }
        let list = |v: &[i64]| {
            v.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !unknown.is_empty() {
            return Err(Failure::new(
                UNSATISFIABLE,
                format!(
                    "Delta table {}: readable version(s) {} hold data files the history {state} has no record of (written before `output.history` was set, with another history, or by another engine): kanon cannot tell who they publish, so it cannot check a new version against them; nothing was committed. Remedies: {REMEDIES}",
                    table.location,
                    list(&unknown)
                ),
            )
            .into());
        }
        if !partial.is_empty() {
            return Err(Failure::new(
                UNSATISFIABLE,
                format!(
                    "Delta table {}: readable version(s) {} hold part of a kanon release only (some of its files were removed by another writer): the rows removed are a difference kanon never checked; nothing was committed. Remedies: {REMEDIES}",
                    table.location,
                    list(&partial)
                ),
            )
            .into());
        }
        Ok(Views { entries, versions })
    }

    /// The views of the readable versions, and of `next` (a new version's
    /// releases, plus the recorded ones it keeps) when given.
    fn views<'a>(&'a self, next: Option<(i64, Vec<&'a [Published]>)>) -> Vec<View<'a>> {
        let mut views: Vec<View<'a>> = self
            .versions
            .iter()
            .map(|(version, held)| View {
                version: *version,
                releases: held
                    .iter()
                    .map(|&i| self.entries[i].people.as_slice())
                    .collect(),
            })
            .collect();
        if let Some((version, releases)) = next {
            views.push(View { version, releases });
        }
        views
    }

    /// The people every readable version publishes.
    fn people(&self) -> rustc_hash::FxHashSet<u128> {
        history::published_people(&self.views(None))
    }
}

/// Refuses, before any work, a commit the policy forbids outright: onto a
/// table with readable rows and neither `output.history` nor
/// `output.unchecked_series`. With a history, returns the people already
/// published (left out of an `append` release).
///
/// # Errors
/// Exit 3 naming the versions and the remedies; storage failures.
pub fn before_work(
    storage: &Storage,
    table: &Table,
    policy: &Policy,
) -> Result<Option<rustc_hash::FxHashSet<u128>>> {
    let Some(dt) = table.load(storage, None)? else {
        return Ok(match policy {
            Policy::Checked { .. } => Some(Default::default()),
            _ => None,
        });
    };
    let latest = super::version_of(&dt);
    match policy {
        Policy::Unchecked => Ok(None),
        Policy::Refused => {
            refuse_unchecked(storage, table, latest)?;
            Ok(None)
        }
        Policy::Checked { state, .. } => {
            let started = std::time::Instant::now();
            let people = Views::load(storage, table, state, Some(latest))?.people();
            tracing::info!(
                people = people.len(),
                seconds = started.elapsed().as_secs_f64(),
                "people the table's readable versions publish loaded from the history"
            );
            Ok(Some(people))
        }
    }
}

fn refuse_unchecked(storage: &Storage, table: &Table, latest: i64) -> Result<()> {
    let with_rows: Vec<i64> = readable_versions(storage, table, latest)?
        .into_iter()
        .filter(|(_, files)| !files.is_empty())
        .map(|(v, _)| v)
        .collect();
    if with_rows.is_empty() {
        return Ok(());
    }
    let (first, last) = (with_rows[0], with_rows[with_rows.len() - 1]);
    Err(Failure::new(
        UNSATISFIABLE,
        format!(
            "Delta table {} already publishes rows a reader can read ({} readable version(s), {first} to {last}): a new version lets readers diff the versions class by class and link rows across them, which can single out people added, removed or relabelled; nothing was committed. Set `output.history` (with `privacy.entity`) to check the series, or, if readers comparing versions is acceptable (each release is still checked on its own), say so in the job file with `output.unchecked_series = true`. Remedies: {REMEDIES}",
            table.location,
            with_rows.len()
        ),
    )
    .into())
}

/// A state file written for a release not committed yet: removed unless
/// [`Recorded::keep`] is called.
pub struct Recorded<'a> {
    storage: &'a Storage,
    at: Option<Location>,
}

impl Recorded<'_> {
    /// The release was committed: its state file stays.
    pub fn keep(mut self) {
        self.at = None;
    }
}

impl Drop for Recorded<'_> {
    fn drop(&mut self) {
        if let Some(at) = self.at.take() {
            if let Err(e) = self.storage.delete(&at) {
                tracing::warn!(file = %at, error = %e, "cannot remove the history file of a release that was not committed (no version references it; it is ignored)");
            }
        }
    }
}

/// Checks the version about to be committed onto `existing` (the table as
/// loaded for the commit), which removes the data files `removed` and adds
/// `added` (paths relative to the table) holding `people`, against every
/// readable version, and records the release in the state. Returns the
/// record to keep once the commit succeeded.
///
/// # Errors
/// Exit 3 naming the versions, what a reader would learn and the
/// remedies; storage failures.
pub fn before_commit<'a>(
    storage: &'a Storage,
    table: &Table,
    policy: &Policy,
    existing: Option<i64>,
    removed: &[String],
    added: &[String],
    people: Option<&[Published]>,
) -> Result<Option<Recorded<'a>>> {
    let (state, k, l) = match policy {
        Policy::Unchecked => return Ok(None),
        Policy::Refused => {
            if let Some(latest) = existing {
                refuse_unchecked(storage, table, latest)?;
            }
            return Ok(None);
        }
        Policy::Checked { state, k, l } => (state, *k, *l),
    };
    let started = std::time::Instant::now();
    let Some(people) = people else {
        return Err(Failure::new(
            UNSATISFIABLE,
            "`output.history` records the people of each release, which this command does not: publish the series with `kanon anonymize`; nothing was committed",
        )
        .into());
    };
    let views = Views::load(storage, table, state, existing)?;
    let removed: BTreeSet<String> = removed.iter().map(|p| decoded(p)).collect();
    let next_version = existing.map_or(0, |v| v + 1);
    // The new version keeps the releases of the latest version whose files
    // it does not remove.
    let mut kept: Vec<&[Published]> = Vec::new();
    if let (Some(latest), Some((version, held))) = (existing, views.versions.last()) {
        if *version == latest {
            for &i in held {
                let files = &views.entries[i].files;
                let gone = files.iter().filter(|f| removed.contains(*f)).count();
                if gone == 0 {
                    kept.push(views.entries[i].people.as_slice());
                } else if gone != files.len() {
                    return Err(Failure::new(
                        UNSATISFIABLE,
                        format!(
                            "the new version of Delta table {} would remove part of an earlier kanon release only; nothing was committed",
                            table.location
                        ),
                    )
                    .into());
                }
            }
        }
    }
    kept.push(people);
    let all = views.views(Some((next_version, kept)));
    let breaches = history::check(&all, k, l);
    if !breaches.is_empty() {
        let versions: Vec<String> = all.iter().map(|v| v.version.to_string()).collect();
        return Err(Failure::new(
            UNSATISFIABLE,
            format!(
                "the new version {next_version} of Delta table {} would let a reader who holds its readable versions ({}) learn more than k = {k}{}: {}; nothing was committed. Remedies: {REMEDIES}",
                table.location,
                versions.join(", "),
                match l > 1 {
                    true => format!(", l = {l}"),
                    false => String::new(),
                },
                breaches
                    .iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
        .into());
    }
    // Recorded before the commit: a commit that fails leaves a file no
    // version references.
    let mut files: Vec<String> = added.iter().map(|p| decoded(p)).collect();
    files.sort();
    let entry = Entry {
        format: FORMAT,
        table: table.location.to_string().trim_end_matches('/').to_string(),
        people: people.to_vec(),
        files,
    };
    let bytes = postcard::to_allocvec(&entry).context("cannot serialise the history")?;
    let dir = table_dir(state, &table.location);
    if let Location::Local(p) = &dir {
        std::fs::create_dir_all(p)
            .with_context(|| format!("cannot create the history directory {dir}"))?;
    }
    let at = dir.join(&entry_name(&entry.files));
    storage
        .put(&at, &bytes, true)
        .with_context(|| format!("cannot write the history file {at}; nothing was committed"))?;
    tracing::info!(
        history = %at,
        people = people.len(),
        versions = all.len(),
        seconds = started.elapsed().as_secs_f64(),
        "table history checked and recorded"
    );
    Ok(Some(Recorded {
        storage,
        at: Some(at),
    }))
}

/// Checks the readable versions of `table` up to `version` as one release,
/// as `kanon verify` does. Returns the breaches (empty: the series holds)
/// and how many versions were checked.
///
/// # Errors
/// Exit 3 when the versions cannot be recognised (see [`before_commit`]);
/// storage failures.
pub fn check_table(
    storage: &Storage,
    table: &Table,
    policy: &Policy,
    version: i64,
) -> Result<Option<(Vec<String>, usize)>> {
    let Policy::Checked { state, k, l } = policy else {
        return Ok(None);
    };
    let views = Views::load(storage, table, state, Some(version))?;
    let all = views.views(None);
    let breaches = history::check(&all, *k, *l)
        .into_iter()
        .map(|b| b.to_string())
        .collect();
    Ok(Some((breaches, all.len())))
}

/// The people a table's readable versions already publish, left out of a
/// new `append` release (a person is published once; their later rows
/// would be a difference of one person).
pub struct LeaveOut {
    fingerprinter: kanon_engine::recode::Fingerprinter,
    people: rustc_hash::FxHashSet<u128>,
}

impl LeaveOut {
    /// Leaves out `people`, recognised by `fingerprinter`.
    pub fn new(
        fingerprinter: kanon_engine::recode::Fingerprinter,
        people: rustc_hash::FxHashSet<u128>,
    ) -> Self {
        LeaveOut {
            fingerprinter,
            people,
        }
    }

    /// `batch` without the rows of people already published, and the
    /// fingerprints of the people whose rows were left out (one per row).
    ///
    /// # Errors
    /// A missing or null entity column; Arrow failures.
    pub fn apply(
        &self,
        batch: arrow::array::RecordBatch,
    ) -> Result<(arrow::array::RecordBatch, Vec<u128>)> {
        if self.people.is_empty() {
            return Ok((batch, Vec::new()));
        }
        let fps = kanon_engine::history::fingerprints(&self.fingerprinter, &batch)?;
        let mut left = Vec::new();
        let keep: arrow::array::BooleanArray = fps
            .iter()
            .map(|p| {
                let out = self.people.contains(p);
                if out {
                    left.push(*p);
                }
                Some(!out)
            })
            .collect();
        if left.is_empty() {
            return Ok((batch, left));
        }
        let kept = arrow::compute::filter_record_batch(&batch, &keep)?;
        Ok((kept, left))
    }
}
