//! Delta Lake tables (issue 17): releases committed as one Delta
//! transaction carrying the privacy certificate, and Delta tables read as
//! input at a version.
//!
//! A release to Delta is written like any other (pass 2 of `anonymize`),
//! its data files straight into the table's directory under names no other
//! run uses; they are read back and verified against the job, and only then
//! does one commit add them to the table ([`commit`]). Until that commit no
//! reader sees them; a run that fails before it removes them (a killed run
//! leaves files that no version references, which `VACUUM` removes).
//!
//! The table is reached through kanon's own storage: a local directory, or
//! an S3 prefix through the same object store (endpoint, credentials,
//! retries) as every other kanon object, with delta-rs's default log store,
//! whose commits are conditional puts (`If-None-Match: *`): of two writers
//! of one version, exactly one wins and the other retries on the next
//! version, with no lock table (DynamoDB) needed.
//!
//! The module is split by concept: opening a table in this file, the
//! commit and its idempotency in `commit`, and the history of releases in
//! `history`.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result};
use deltalake_core::logstore::{default_logstore, LogStoreRef, StorageConfig};
use deltalake_core::{DeltaTable, DeltaTableBuilder};
use kanon_engine::spec::OutputSpec;
use object_store::prefix::PrefixStore;
use object_store::ObjectStore;
use url::Url;

use crate::exit::Failure;
use crate::storage::{Location, Storage};

mod commit;
mod history;
pub mod series;

pub use commit::{app_id, commit, prepare, Outcome, Prepared, WrittenFile};
pub use history::{check_certificates, history, print_history, Release};

/// How a release meets an existing table (`output.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The table must not exist (the default, as a Parquet release without
    /// `--overwrite`).
    Create,
    /// Add the release's rows to the table (created when missing).
    Append,
    /// Replace every row of the table.
    Overwrite,
    /// Replace the rows of the release's partition.
    ReplacePartition,
}

impl Mode {
    fn parse(s: &str) -> Result<Mode> {
        Ok(match s {
            "create" => Mode::Create,
            "append" => Mode::Append,
            "overwrite" => Mode::Overwrite,
            "replace-partition" => Mode::ReplacePartition,
            other => {
                return Err(Failure::bad_input(format!(
                    "`output.mode = \"{other}\"` is not a Delta write mode: use \"create\", \"append\", \"overwrite\" or \"replace-partition\""
                ))
                .into())
            }
        })
    }

    /// Its name in the job file.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Create => "create",
            Mode::Append => "append",
            Mode::Overwrite => "overwrite",
            Mode::ReplacePartition => "replace-partition",
        }
    }
}

/// Where and how a Delta release is written.
#[derive(Debug, Clone)]
pub struct DeltaOutput {
    /// The table's root.
    pub location: Location,
    pub mode: Mode,
    /// Constant partition columns of the release and their values.
    pub partition: BTreeMap<String, String>,
}

impl DeltaOutput {
    /// The Delta output of a job's `[output]`, or `None` for Parquet.
    /// `--overwrite` is `mode = "overwrite"`; with another mode it is an
    /// error, as the two disagree.
    ///
    /// # Errors
    /// Bad-input failures naming the setting.
    pub fn of_spec(
        spec: &OutputSpec,
        location: &Location,
        overwrite_flag: bool,
    ) -> Result<Option<DeltaOutput>> {
        match spec.format.as_deref() {
            None | Some("parquet") => {
                if spec.mode.is_some() || spec.partition.is_some() {
                    return Err(Failure::bad_input(
                        "`output.mode` and `output.partition` apply to Delta tables: set `output.format = \"delta\"`, or remove them",
                    )
                    .into());
                }
                return Ok(None);
            }
            Some("delta") => {}
            Some(other) => {
                return Err(Failure::bad_input(format!(
                    "`output.format = \"{other}\"` is not a format kanon writes: use \"parquet\" or \"delta\""
                ))
                .into())
            }
        }
        if spec.max_file_size.is_none() && spec.overwrite == Some(true) && spec.mode.is_some() {
            return Err(Failure::bad_input(
                "`output.overwrite` and `output.mode` both set: keep `output.mode` only",
            )
            .into());
        }
        let declared = spec.mode.as_deref().map(Mode::parse).transpose()?;
        let overwrite = overwrite_flag || spec.overwrite == Some(true);
        let mode = match (declared, overwrite) {
            (None, false) => Mode::Create,
            (None, true) | (Some(Mode::Overwrite), _) => Mode::Overwrite,
            (Some(m), false) => m,
            (Some(m), true) => {
                return Err(Failure::bad_input(format!(
                    "--overwrite replaces the whole Delta table but `output.mode = \"{}\"`: drop one of them",
                    m.name()
                ))
                .into())
            }
        };
        let partition = spec.partition.clone().unwrap_or_default();
        if mode == Mode::ReplacePartition && partition.is_empty() {
            return Err(Failure::bad_input(
                "`output.mode = \"replace-partition\"` needs the partition to replace: set `output.partition`, e.g. `{ release_date = \"2026-11-24\" }`",
            )
            .into());
        }
        for (column, value) in &partition {
            if column.is_empty() || value.is_empty() || column.contains(['/', '=']) {
                return Err(Failure::bad_input(format!(
                    "`output.partition`: `{column}` = \"{value}\" is not a partition: give a column name without `/` or `=` and a non-empty value"
                ))
                .into());
            }
        }
        Ok(Some(DeltaOutput {
            location: location.clone(),
            mode,
            partition,
        }))
    }

    /// Where the release's data files go: the partition's directory.
    pub fn data_dir(&self) -> Location {
        let mut dir = self.location.clone();
        for (c, v) in &self.partition {
            dir = dir.join(&format!("{c}={}", escape_partition_value(v)));
        }
        dir
    }
}

/// The version of a loaded table (-1 when it has none).
pub fn version_of(table: &DeltaTable) -> i64 {
    table.version().map_or(-1, |v| v as i64)
}

/// A name part no other run uses: time, process and a counter, hashed.
pub fn run_token() -> String {
    use sha2::{Digest, Sha256};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = Sha256::new();
    h.update(now.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    h.update(crate::release::tmp_prefix().as_bytes());
    crate::certificate::hex(&h.finalize()[..16])
}

/// A partition value as Hive-style directory names write it.
fn escape_partition_value(v: &str) -> String {
    v.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c.to_string(),
            c => {
                let mut b = [0u8; 4];
                c.encode_utf8(&mut b)
                    .bytes()
                    .map(|x| format!("%{x:02X}"))
                    .collect()
            }
        })
        .collect()
}

/// A Delta table at a location, reached through kanon's storage.
#[derive(Clone)]
pub struct Table {
    pub location: Location,
    log_store: LogStoreRef,
}

impl Table {
    /// The table at `location` (which may not exist yet).
    ///
    /// # Errors
    /// A location delta-rs cannot address; S3 client failures.
    pub fn at(storage: &Storage, location: &Location) -> Result<Table> {
        let log_store = match location {
            Location::Local(p) => {
                let abs = std::path::absolute(p)
                    .with_context(|| format!("cannot resolve the table path {}", p.display()))?;
                let url = Url::from_directory_path(&abs).map_err(|()| {
                    Failure::bad_input(format!("{} is not a table path", abs.display()))
                })?;
                DeltaTableBuilder::from_url(url)
                    .and_then(|b| b.build_storage())
                    .with_context(|| format!("cannot open the Delta table {location}"))?
            }
            Location::S3 { bucket, key } => {
                let root: Arc<dyn ObjectStore> = storage.s3(bucket)?;
                let key = key.trim_end_matches('/');
                let url = Url::parse(&format!("s3://{bucket}/{key}/"))
                    .with_context(|| format!("{location} is not a table URL"))?;
                let prefixed: Arc<dyn ObjectStore> =
                    Arc::new(PrefixStore::new(root.clone(), key.to_string()));
                default_logstore(prefixed, root, &url, &StorageConfig::default())
            }
        };
        Ok(Table {
            location: location.clone(),
            log_store,
        })
    }

    /// Whether a Delta table (a `_delta_log` with a commit) is there.
    ///
    /// # Errors
    /// Storage failures.
    pub fn exists(&self, storage: &Storage) -> Result<bool> {
        storage
            .block_on(self.log_store.is_delta_table_location())
            .with_context(|| format!("cannot read the Delta log of {}", self.location))
    }

    /// The table at `version` (the latest when `None`), or `None` when
    /// there is no table.
    ///
    /// # Errors
    /// A version the table does not have; storage failures.
    pub fn load(&self, storage: &Storage, version: Option<i64>) -> Result<Option<DeltaTable>> {
        if !self.exists(storage)? {
            return Ok(None);
        }
        let mut table = DeltaTable::new(self.log_store.clone());
        let loaded = match version {
            None => storage.block_on(table.load()),
            Some(v) if v < 0 => {
                return Err(Failure::bad_input(format!(
                "Delta version {v} of {}: versions start at 0 (check `input.version` or --version)",
                self.location
            ))
                .into())
            }
            Some(v) => storage.block_on(table.load_version(v as u64)),
        };
        match loaded {
            Ok(()) => Ok(Some(table)),
            Err(e) => {
                let latest = storage
                    .block_on(table.get_latest_version())
                    .ok()
                    .map(|v| v as i64);
                match (version, latest) {
                    (Some(v), Some(latest)) if v > latest => Err(Failure::bad_input(format!(
                        "Delta table {} has no version {v}: its latest is {latest} (check `input.version`)",
                        self.location
                    ))
                    .into()),
                    _ => Err(anyhow::Error::new(e)
                        .context(format!("cannot load the Delta table {}", self.location))),
                }
            }
        }
    }

    /// The table that must exist.
    ///
    /// # Errors
    /// As [`Table::load`]; a bad-input failure when there is no table.
    pub fn load_existing(&self, storage: &Storage, version: Option<i64>) -> Result<DeltaTable> {
        self.load(storage, version)?.ok_or_else(|| {
            Failure::bad_input(format!(
                "{} is not a Delta table (it has no `_delta_log`): check the path, or read it as Parquet with `input.format = \"parquet\"`",
                self.location
            ))
            .into()
        })
    }

    pub(crate) fn log_store(&self) -> LogStoreRef {
        self.log_store.clone()
    }
}

/// The data files of a loaded table version, in path order, as locations
/// kanon reads; refused when the table has features kanon cannot read
/// faithfully (deletion vectors hide rows, column mapping renames them) or,
/// unless `partitioned`, partition columns (their values are not in the
/// files): failing here publishes nothing wrong.
///
/// # Errors
/// Bad-input failures naming the table and the feature.
pub fn data_files(
    table: &DeltaTable,
    location: &Location,
    partitioned: bool,
) -> Result<Vec<Location>> {
    let snapshot = table
        .snapshot()
        .with_context(|| format!("cannot read the Delta table {location}"))?;
    let partitions = snapshot.metadata().partition_columns();
    if !partitioned && !partitions.is_empty() {
        return Err(Failure::bad_input(format!(
            "Delta input {location} is partitioned by {}: kanon reads unpartitioned Delta tables only (the partition values are not in the data files); select the rows with `kanon sql` into a Parquet file first",
            partitions.join(", ")
        ))
        .into());
    }
    // Column mapping renames columns in the data files (physical names):
    // read by those names, a dropped column comes back and a renamed one
    // is read under another name. It is set by a table property under
    // reader version 2 (no reader features to list), so the property
    // decides, whatever the protocol (issue 32, item 3).
    let mapping = snapshot
        .metadata()
        .configuration()
        .get("delta.columnMapping.mode")
        .map(|m| m.trim().to_ascii_lowercase())
        .filter(|m| m != "none");
    if let Some(mode) = mapping {
        return Err(Failure::bad_input(format!(
            "Delta input {location} uses column mapping (delta.columnMapping.mode = {mode}): its data files name columns by physical names, so a dropped or renamed column could be read as another; nothing is read. Copy the table without column mapping first (e.g. `kanon sql` or another engine writing Parquet)"
        ))
        .into());
    }
    let protocol = snapshot.protocol();
    if let Some(features) = protocol.reader_features() {
        let unreadable: Vec<String> = features
            .iter()
            .map(|f| f.to_string())
            .filter(|f| f != "timestampNtz" && f != "v2Checkpoint" && f != "vacuumProtocolCheck")
            .collect();
        if !unreadable.is_empty() {
            return Err(Failure::bad_input(format!(
                "Delta input {location} uses reader features kanon does not read ({}): rows could be read wrongly, so nothing is read",
                unreadable.join(", ")
            ))
            .into());
        }
    }
    let mut files: Vec<String> = snapshot
        .log_data()
        .iter()
        .map(|f| f.path().to_string())
        .collect();
    files.sort_unstable();
    files
        .into_iter()
        .map(|p| {
            if p.contains("://") {
                Location::parse(&p)
            } else {
                Ok(location.join(&p))
            }
        })
        .collect()
}
