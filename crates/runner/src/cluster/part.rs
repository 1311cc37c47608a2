//! Workers write (issue 35): each worker reads its share of the table's
//! files again, puts every row in the group the coordinator's plan gives
//! its QI tuple, recodes, orders and writes the share's release parts to
//! the staging prefix, and reports what it wrote: the rows of every
//! group, the rows withheld, and each part's rows, bytes and `sha256:`.
//!
//! The plan ([`PartPlan`]) is small: per QI, the raw labels the census
//! found and the value each publishes (a full-domain generalisation
//! publishes one value per raw value), and per group the published values
//! of its tuple. A row whose tuple is in no group is suppressed. Rows are
//! written with the engine's release path ([`kanon_engine::release`]): in
//! the job's seeded release order, each row checked by its labels, which
//! the worker matches with the groups it counted before reporting them.
//! A share alone is not verified against the models: the coordinator
//! verifies the union of every share's counts before it publishes.

use std::collections::HashMap;

use anyhow::{Context, Result};
use kanon_engine::cancel::Cancellation;
use kanon_engine::encode::{Encoder, EquivalenceClasses};
use kanon_engine::partition::SUPPRESSED;
use kanon_engine::recode::Recoder;
use kanon_engine::release::{Release, Releaser};
use kanon_engine::spec::{JobSpec, StorageSpec};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::anonymize::buckets::ReleaseBuckets;
use crate::anonymize::pass_two::{DEFAULT_BUFFER_ROWS, WRITE_ROWS};
use kanon_io::dataset::Dataset;
use kanon_io::release::{ReleaseOptions, ReleaseWriter};
use kanon_io::storage::{Location, Storage};

/// The kind of a part task, as workers register it.
pub const KIND: &str = "kanon.part.1";

/// Published value of a raw label found only in suppressed tuples.
pub const WITHHELD: u32 = u32::MAX;

/// What every worker applies to its rows (see the module docs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartPlan {
    /// The QIs, in the job's order.
    pub qis: Vec<String>,
    /// Per QI: the raw labels of the census.
    pub raw: Vec<Vec<String>>,
    /// Per QI, per raw label: the index of the value it publishes in
    /// `values`, or [`WITHHELD`].
    pub publishes: Vec<Vec<u32>>,
    /// Per QI: the published values.
    pub values: Vec<Vec<String>>,
    /// Every group's published values, one index per QI (flattened).
    pub groups: Vec<u32>,
}

impl PartPlan {
    fn n_groups(&self) -> usize {
        self.groups.len() / self.qis.len().max(1)
    }
}

/// How the parts are written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartOptions {
    pub row_group_rows: usize,
    pub zstd_level: i32,
    pub max_file_bytes: Option<u64>,
    /// Bytes of released rows held in memory before they spill.
    pub buffer_memory: u64,
    pub metadata: Vec<(String, String)>,
}

/// One worker's share: its files, the plan, and where to write.
#[derive(Debug, Serialize, Deserialize)]
pub struct PartTask {
    pub storage: StorageSpec,
    pub dataset: String,
    pub files: Vec<String>,
    /// The job: which columns the release keeps, codes and drops, and the
    /// seed of the release order.
    pub spec: JobSpec,
    pub plan: PartPlan,
    /// The staging prefix the parts are written under.
    pub staging: String,
    /// Unique to the task: in the names of its parts.
    pub token: String,
    pub options: PartOptions,
}

/// What a worker wrote.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct PartReport {
    /// Rows read.
    pub rows: u64,
    /// Rows withheld for a null QI.
    pub excluded: u64,
    /// Rows whose tuple is in no group (suppressed).
    pub suppressed: u64,
    /// Rows published in every group.
    pub group_rows: Vec<u64>,
    /// The parts written: location, rows, bytes, `sha256:`.
    pub parts: Vec<(String, u64, u64, String)>,
    /// Seconds reading the QIs, then recoding and writing.
    pub seconds: (f64, f64),
    /// The parts' columns (a Delta commit declares them).
    pub columns: Vec<crate::cluster::census::ColumnInfo>,
}

impl PartTask {
    /// The task's bytes (JSON, as a census task's).
    ///
    /// # Errors
    /// When it cannot be encoded (a bug).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).context("encoding a part task (a bug in kanon)")
    }
}

/// Runs a part task on a worker: what `kanon worker` registers as
/// [`KIND`]. Errors travel to the coordinator as text and name files and
/// columns, never values.
pub fn run(payload: &[u8], cancel: &Cancellation) -> std::result::Result<Vec<u8>, String> {
    let written = || -> Result<PartReport> {
        let task: PartTask = serde_json::from_slice(payload)
            .context("not a part task (workers of another kanon version?)")?;
        write(&task, cancel)
    };
    let report = written().map_err(|e| format!("{e:#}"))?;
    postcard::to_stdvec(&report).map_err(|e| format!("encoding a part report: {e}"))
}

/// Reads the task's files, applies the plan and writes the parts.
fn write(task: &PartTask, cancel: &Cancellation) -> Result<PartReport> {
    let plan = &task.plan;
    let n_qi = plan.qis.len();
    if task.files.is_empty() {
        return Ok(PartReport {
            group_rows: vec![0; plan.n_groups()],
            ..Default::default()
        });
    }
    let storage = Storage::new(&task.storage);
    let name = Location::parse(&task.dataset)?;
    let files = task
        .files
        .iter()
        .map(|f| Location::parse(f))
        .collect::<Result<Vec<_>>>()?;
    let start = std::time::Instant::now();
    let dataset = Dataset::open_files(&storage, &name, &files)?;
    // The job's column policy on this share's files: no column is
    // published by accident.
    kanon_engine::columns::check(&task.spec, &dataset.schema, &name.to_string())?;
    // The raw QI values, encoded as the census encoded them.
    let raw_spec = JobSpec::raw_categories(&plan.qis);
    let mut encoder = Encoder::try_new(&raw_spec, &Default::default(), &dataset.schema)
        .with_context(|| format!("the quasi-identifiers do not fit {name}"))?;
    for b in dataset.scan(&storage, Some(dataset.projection(&plan.qis)), false) {
        cancel.check()?;
        encoder.push(&b?)?;
    }
    let table = encoder.finish()?;
    let changed = |what: &str| {
        anyhow::anyhow!(
            "{name} changed since the workers counted it ({what}); nothing was published, run the job again"
        )
    };
    // Per QI: this share's code -> the published value's index.
    let publishes: Vec<Vec<u32>> = table
        .columns()
        .iter()
        .zip(&plan.raw)
        .zip(&plan.publishes)
        .map(|((col, raw), publishes)| {
            let index: HashMap<&str, u32> = raw
                .iter()
                .enumerate()
                .map(|(i, l)| (l.as_str(), publishes[i]))
                .collect();
            (0..col.domain_size() as u32)
                .map(|c| {
                    index.get(col.label(c)).copied().ok_or_else(|| {
                        changed(&format!(
                            "`{}` holds a value the census did not see",
                            col.name()
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<_>>()?;
    let group_of: FxHashMap<&[u32], u32> = plan
        .groups
        .chunks(n_qi.max(1))
        .enumerate()
        .map(|(g, t)| (t, g as u32))
        .collect();
    let mut report = PartReport {
        rows: table.n_rows() as u64,
        group_rows: vec![0; plan.n_groups()],
        ..Default::default()
    };
    let excluded = table.excluded();
    let mut key = vec![0u32; n_qi];
    let group_of_row: Vec<u32> = (0..table.n_rows() as u32)
        .map(|r| {
            if excluded.binary_search(&r).is_ok() {
                report.excluded += 1;
                return SUPPRESSED;
            }
            for ((k, code), publishes) in key.iter_mut().zip(table.row(r)).zip(&publishes) {
                *k = publishes[code as usize];
            }
            match group_of.get(key.as_slice()) {
                Some(&g) if !key.contains(&WITHHELD) => {
                    report.group_rows[g as usize] += 1;
                    g
                }
                _ => {
                    report.suppressed += 1;
                    SUPPRESSED
                }
            }
        })
        .collect();
    drop(table);
    let read_s = start.elapsed().as_secs_f64();
    let labels: Vec<Vec<String>> = (0..n_qi)
        .map(|q| {
            plan.groups
                .chunks(n_qi)
                .map(|t| plan.values[q][t[q] as usize].clone())
                .collect()
        })
        .collect();
    let names: Vec<&str> = plan.qis.iter().map(String::as_str).collect();
    let recoder = Recoder::from_labels(&task.spec, &names, labels, group_of_row);
    let buffer_rows = task.spec.output.buffer_rows.unwrap_or(DEFAULT_BUFFER_ROWS);
    let releaser = Releaser::new(
        &task.spec,
        recoder,
        &dataset.schema,
        crate::anonymize::buffer::SORT_ROWS.min(buffer_rows),
    )?;
    let schema = releaser.schema().clone();
    report.columns = schema
        .fields()
        .iter()
        .map(|f| crate::cluster::census::ColumnInfo {
            name: f.name().clone(),
            data_type: f.data_type().to_string(),
            nullable: f.is_nullable(),
        })
        .collect();
    let store = ReleaseBuckets::new(&releaser, task.options.buffer_memory, buffer_rows);
    let mut release = Release::new(releaser, store);
    for b in dataset.scan(&storage, None, false) {
        cancel.check()?;
        let b = b?;
        if release.releaser().rows_recoded() + b.num_rows() > release.releaser().rows_expected() {
            return Err(changed("more rows than in the first read"));
        }
        release.push(&b)?;
    }
    if release.releaser().rows_recoded() != release.releaser().rows_expected() {
        return Err(changed("fewer rows than in the first read"));
    }
    let o = &task.options;
    let mut writer = ReleaseWriter::create(
        &storage,
        Location::parse(&task.staging)?,
        schema,
        ReleaseOptions {
            max_file_bytes: o.max_file_bytes,
            row_group_rows: o.row_group_rows,
            zstd_level: o.zstd_level,
            overwrite: false,
            metadata: o.metadata.clone(),
            direct: Some(task.token.clone()),
        },
    )?;
    release.drain(WRITE_ROWS, |chunk| {
        cancel.check()?;
        writer.write(&chunk)?;
        Ok(true)
    })?;
    writer.close()?;
    let parts: Vec<(String, u64, u64, String)> = writer
        .files()
        .iter()
        .zip(writer.file_sizes())
        .zip(writer.file_hashes())
        .map(|((l, (rows, bytes)), h)| (l.to_string(), *rows, *bytes, h.clone()))
        .collect();
    // The rows written, by their labels: the groups counted.
    let written = release.finish_share()?;
    check_written(&written, plan, &report.group_rows)?;
    // A coordinator that gave up (an interrupt, a lost worker) removes the
    // staging prefix: complete no upload after that.
    cancel.check()?;
    writer.commit()?;
    report.parts = parts;
    report.seconds = (read_s, start.elapsed().as_secs_f64() - read_s);
    tracing::info!(
        rows = report.rows,
        parts = report.parts.len(),
        read_s,
        write_s = report.seconds.1,
        "part written"
    );
    kanon_io::ops::barrier("part-written")?;
    Ok(report)
}

/// Checks that the rows written, encoded by their labels, form exactly the
/// groups counted: each class's labels are a group's, with its rows.
fn check_written(
    written: &kanon_engine::encode::QiTable,
    plan: &PartPlan,
    group_rows: &[u64],
) -> Result<()> {
    let n_qi = plan.qis.len();
    let by_labels: HashMap<Vec<&str>, usize> = plan
        .groups
        .chunks(n_qi.max(1))
        .enumerate()
        .map(|(g, t)| {
            (
                t.iter()
                    .enumerate()
                    .map(|(q, &v)| plan.values[q][v as usize].as_str())
                    .collect(),
                g,
            )
        })
        .collect();
    let classes = EquivalenceClasses::of(written);
    let mut seen = vec![0u64; group_rows.len()];
    for c in 0..classes.len() {
        let labels: Vec<&str> = classes
            .tuple(c)
            .iter()
            .zip(written.columns())
            .map(|(&code, col)| col.label(code))
            .collect();
        let g = by_labels.get(&labels).ok_or_else(|| {
            anyhow::anyhow!(
                "a class written is no group of the plan (a bug in kanon; nothing was published)"
            )
        })?;
        seen[*g] += classes.size(c) as u64;
    }
    if seen != group_rows {
        anyhow::bail!(
            "the rows written do not form the groups counted (a bug in kanon; nothing was published)"
        );
    }
    Ok(())
}
