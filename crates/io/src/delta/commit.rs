//! Committing a verified release to a Delta table as one transaction, with
//! its privacy certificate in the commit info and an application
//! transaction (`txn`) that makes a rerun a no-op.
//!
//! The `txn` application id is derived from the job's hash, the input's
//! fingerprint and the release's partition ([`app_id`]): the same job on
//! the same input names the same id, so a rerun finds it committed and
//! publishes nothing ([`prepare`] before the algorithm runs, and
//! [`commit`] again at the commit). Two runs racing to commit one id are
//! settled by Delta's conflict checker: a commit whose id a concurrent
//! commit recorded fails, and is then found committed.

use std::collections::HashMap;

use anyhow::{Context, Result};
use arrow::datatypes::SchemaRef;
use deltalake_core::kernel::engine::arrow_conversion::TryFromArrow;
use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties, TableReference};
use deltalake_core::kernel::{
    new_metadata, Action, Add, DataType, Protocol, StructField, StructType, Transaction,
};
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::DeltaTable;
use sha2::{Digest, Sha256};

use super::{DeltaOutput, Mode, Table};
use crate::certificate::{hex, Certificate, COMMIT_INFO_KEY};
use crate::exit::{Failure, OUTPUT_EXISTS};
use crate::storage::{Location, Storage};

/// One data file of a release, written and closed.
#[derive(Debug, Clone)]
pub struct WrittenFile {
    pub location: Location,
    pub rows: u64,
    pub bytes: u64,
}

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The release is the table's version `version`.
    Committed { version: i64 },
    /// The same job on the same input was committed before (by an earlier
    /// run, or by a concurrent one): nothing was added. The table is at
    /// `version`.
    AlreadyReleased { version: i64 },
}

/// What [`prepare`] found before the release was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prepared {
    /// Go on: the release is new to the table (which may not exist yet).
    New,
    /// This release is in the table already, at table version `version`.
    AlreadyReleased { version: i64 },
}

/// The application id of a release: `kanon-` and a hash of the job, the
/// input's fingerprint and the partition written. `None` without a
/// fingerprint: then every run commits.
pub fn app_id(job_hash: &str, fingerprint: Option<&str>, output: &DeltaOutput) -> Option<String> {
    let fingerprint = fingerprint?;
    let mut h = Sha256::new();
    for part in [job_hash, fingerprint] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for (c, v) in &output.partition {
        h.update(c.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    Some(format!("kanon-{}", &hex(&h.finalize())[..32]))
}

/// The version of the application transaction kanon records: 1 (the id,
/// not the version, names the release).
const TXN_VERSION: i64 = 1;

fn released(
    storage: &Storage,
    table: &Table,
    dt: &DeltaTable,
    app_id: Option<&str>,
) -> Result<bool> {
    let Some(id) = app_id else { return Ok(false) };
    let snapshot = dt.snapshot().context("cannot read the Delta table")?;
    let v = storage
        .block_on(snapshot.transaction_version(table.log_store().as_ref(), id))
        .with_context(|| format!("cannot read the transactions of {}", table.location))?;
    Ok(v.is_some())
}

fn version(dt: &DeltaTable) -> i64 {
    super::version_of(dt)
}

/// Checks, before any work, that the release may be committed: a release
/// already in the table ends the run as a no-op; `mode = "create"` on an
/// existing table fails.
///
/// # Errors
/// Exit code 5 when the table exists and the mode is `create`; storage
/// failures.
pub fn prepare(
    storage: &Storage,
    table: &Table,
    output: &DeltaOutput,
    app_id: Option<&str>,
) -> Result<Prepared> {
    let Some(dt) = table.load(storage, None)? else {
        return Ok(Prepared::New);
    };
    if released(storage, table, &dt, app_id)? {
        return Ok(Prepared::AlreadyReleased {
            version: version(&dt),
        });
    }
    if output.mode == Mode::Create {
        return Err(exists(table));
    }
    Ok(Prepared::New)
}

fn exists(table: &Table) -> anyhow::Error {
    Failure::new(
        OUTPUT_EXISTS,
        format!(
            "Delta table {} exists and `output.mode` is \"create\": nothing was written (set `output.mode = \"append\"` to add this release, or \"overwrite\" / --overwrite to replace the table)",
            table.location
        ),
    )
    .into()
}

/// The table's schema: the release's columns (dictionary-encoded labels as
/// strings), then the partition columns as strings.
fn table_schema(schema: &SchemaRef, output: &DeltaOutput) -> Result<StructType> {
    let data = StructType::try_from_arrow(schema.as_ref())
        .context("the release's columns have no Delta type")?;
    let mut fields: Vec<StructField> = data.fields().cloned().collect();
    for c in output.partition.keys() {
        if schema.index_of(c).is_ok() {
            return Err(Failure::bad_input(format!(
                "`output.partition` names `{c}`, a column of the release: choose another partition column name"
            ))
            .into());
        }
        fields.push(StructField::new(c.clone(), DataType::STRING, true));
    }
    StructType::try_new(fields).context("cannot build the Delta schema of the release")
}

/// Fails when the release does not fit the existing table: other columns or
/// types, or other partition columns.
fn check_fits(
    dt: &DeltaTable,
    table: &Table,
    wanted: &StructType,
    output: &DeltaOutput,
) -> Result<()> {
    let snapshot = dt.snapshot().context("cannot read the Delta table")?;
    let have = snapshot.schema();
    let partitions: Vec<String> = output.partition.keys().cloned().collect();
    let have_partitions = snapshot.metadata().partition_columns().to_vec();
    let fits_columns = have.fields().len() == wanted.fields().len()
        && have
            .fields()
            .zip(wanted.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    if !fits_columns || have_partitions != partitions {
        let names = |s: &StructType| {
            s.fields()
                .map(|f| f.name().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(Failure::bad_input(format!(
            "the release does not fit Delta table {}: the table has columns [{}] partitioned by [{}], the release [{}] partitioned by [{}]; write to a new table, or replace it with `output.mode = \"overwrite\"`",
            table.location,
            names(&have),
            have_partitions.join(", "),
            names(wanted),
            partitions.join(", ")
        ))
        .into());
    }
    Ok(())
}

/// The table's metadata with another schema and partitioning, for an
/// overwrite that changes them: the table keeps its id (readers and
/// streams know a table by it), name, description and configuration.
fn replaced_schema(
    current: &deltalake_core::kernel::Metadata,
    schema: &StructType,
    partition_by: &[String],
) -> Result<deltalake_core::kernel::Metadata> {
    let mut value = serde_json::to_value(current).context("cannot read the table's metadata")?;
    value["schemaString"] = serde_json::Value::String(serde_json::to_string(schema)?);
    value["partitionColumns"] = serde_json::json!(partition_by);
    serde_json::from_value(value).context("cannot build the table's new metadata")
}

fn add_action(table: &Table, output: &DeltaOutput, f: &WrittenFile) -> Result<Action> {
    let path = relative(&table.location, &f.location)?;
    Ok(Action::Add(Add {
        path,
        partition_values: output
            .partition
            .iter()
            .map(|(c, v)| (c.clone(), Some(v.clone())))
            .collect(),
        size: f.bytes as i64,
        modification_time: now_ms(),
        data_change: true,
        stats: Some(format!("{{\"numRecords\":{}}}", f.rows)),
        ..Default::default()
    }))
}

fn relative(root: &Location, file: &Location) -> Result<String> {
    let (root, file) = (root.to_string(), file.to_string());
    let root = root.trim_end_matches('/');
    file.strip_prefix(root)
        .map(|p| p.trim_start_matches('/').to_string())
        .with_context(|| format!("data file {file} is not inside the table {root}"))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Commits the written, verified data files of a release as one
/// transaction (creating the table with them when it does not exist).
///
/// # Errors
/// Exit code 5 for a `create` onto an existing table; a bad-input failure
/// when the release does not fit the table; commit failures (the table is
/// then unchanged; the caller removes the data files).
#[allow(clippy::too_many_arguments)]
pub fn commit(
    storage: &Storage,
    table: &Table,
    output: &DeltaOutput,
    schema: &SchemaRef,
    files: &[WrittenFile],
    certificate: &Certificate,
    app_id: Option<&str>,
    series: super::series::Series<'_>,
) -> Result<Outcome> {
    let wanted = table_schema(schema, output)?;
    let partition_by: Vec<String> = output.partition.keys().cloned().collect();
    let adds = files
        .iter()
        .map(|f| add_action(table, output, f))
        .collect::<Result<Vec<_>>>()?;
    let certified =
        serde_json::to_value(certificate).context("cannot serialise the certificate")?;
    let checked = matches!(series.policy, super::series::Policy::Checked { .. });
    let properties = || {
        let p = CommitProperties::default()
            .with_metadata([(COMMIT_INFO_KEY.to_string(), certified.clone())]);
        // The history was checked against the version loaded: a version
        // another writer commits meanwhile fails this commit instead of
        // being resolved around it.
        let p = match checked {
            true => p.with_max_retries(0),
            false => p,
        };
        match app_id {
            Some(id) => p.with_application_transaction(Transaction::new(id, TXN_VERSION)),
            None => p,
        }
    };
    let existing = table.load(storage, None)?;
    let added: Vec<String> = adds
        .iter()
        .filter_map(|a| match a {
            Action::Add(a) => Some(a.path.clone()),
            _ => None,
        })
        .collect();
    let mut removed: Vec<String> = Vec::new();
    let (operation, actions, snapshot_of) = match &existing {
        Some(dt) => {
            if released(storage, table, dt, app_id)? {
                return Ok(Outcome::AlreadyReleased {
                    version: version(dt),
                });
            }
            if output.mode == Mode::Create {
                return Err(exists(table));
            }
            let snapshot = dt.snapshot().context("cannot read the Delta table")?;
            let mut actions = Vec::new();
            match (output.mode, check_fits(dt, table, &wanted, output)) {
                (_, Ok(())) => {}
                (Mode::Overwrite, Err(_)) => {
                    actions.push(Action::Metadata(replaced_schema(
                        snapshot.metadata(),
                        &wanted,
                        &partition_by,
                    )?));
                }
                (_, Err(e)) => return Err(e),
            }
            let wanted_partition: HashMap<String, Option<String>> = output
                .partition
                .iter()
                .map(|(c, v)| (c.clone(), Some(v.clone())))
                .collect();
            for f in snapshot.log_data().iter() {
                let replace = match output.mode {
                    Mode::Overwrite => true,
                    Mode::ReplacePartition => f.partition_values_map() == wanted_partition,
                    Mode::Append | Mode::Create => false,
                };
                if replace {
                    removed.push(f.path().to_string());
                    actions.push(Action::Remove(f.remove_action(true)));
                }
            }
            actions.extend(adds);
            let operation = DeltaOperation::Write {
                mode: match output.mode {
                    Mode::Append | Mode::Create => SaveMode::Append,
                    Mode::Overwrite | Mode::ReplacePartition => SaveMode::Overwrite,
                },
                partition_by: (!partition_by.is_empty()).then(|| partition_by.clone()),
                predicate: (output.mode == Mode::ReplacePartition).then(|| {
                    output
                        .partition
                        .iter()
                        .map(|(c, v)| format!("{c} = '{}'", v.replace('\'', "''")))
                        .collect::<Vec<_>>()
                        .join(" AND ")
                }),
            };
            (operation, actions, true)
        }
        None => {
            let protocol: Protocol = serde_json::from_value(serde_json::json!({
                "minReaderVersion": 1,
                "minWriterVersion": 2
            }))
            .context("cannot build the Delta protocol")?;
            let metadata = new_metadata(
                &wanted,
                partition_by.clone(),
                HashMap::<String, String>::new(),
            )?;
            let url = table.log_store().root_url().clone();
            let operation = DeltaOperation::Create {
                mode: SaveMode::ErrorIfExists,
                location: url,
                protocol: protocol.clone(),
                metadata: metadata.clone(),
            };
            let mut actions = vec![Action::Protocol(protocol), Action::Metadata(metadata)];
            actions.extend(adds);
            (operation, actions, false)
        }
    };
    // The new version against every version a reader can read.
    let recorded = super::series::before_commit(
        storage,
        table,
        series.policy,
        existing.as_ref().map(version),
        &removed,
        &added,
        series.people,
    )?;
    // Tests hold concurrent runs here, each with the version it loaded and
    // checked, to see exactly one commit (inert otherwise).
    crate::ops::barrier("delta-commit")?;
    let snapshot = match (&existing, snapshot_of) {
        (Some(dt), true) => {
            Some(dt.snapshot().context("cannot read the Delta table")? as &dyn TableReference)
        }
        _ => None,
    };
    let committed = storage.block_on(async {
        CommitBuilder::from(properties())
            .with_actions(actions)
            .build(snapshot, table.log_store(), operation)
            .await
    });
    match committed {
        Ok(c) => {
            if let Some(r) = recorded {
                r.keep();
            }
            Ok(Outcome::Committed {
                version: c.version() as i64,
            })
        }
        Err(e) => {
            drop(recorded);
            // A concurrent run may have committed this very release (same
            // job, same input): then this run is a no-op.
            if let Ok(Some(dt)) = table.load(storage, None) {
                if released(storage, table, &dt, app_id).unwrap_or(false) {
                    return Ok(Outcome::AlreadyReleased {
                        version: version(&dt),
                    });
                }
                // Another run created the table first: commit onto it.
                if existing.is_none() && output.mode != Mode::Create {
                    return commit(
                        storage,
                        table,
                        output,
                        schema,
                        files,
                        certificate,
                        app_id,
                        series,
                    );
                }
            }
            Err(anyhow::Error::new(e).context(format!(
                "cannot commit the release to Delta table {}; the table is unchanged{}",
                table.location,
                match checked {
                    true => " (with `output.history`, a version another writer committed while this run checked the history fails the commit: run the job again)",
                    false => "",
                }
            )))
        }
    }
}
