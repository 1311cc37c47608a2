//! Workers read (issue 35): each worker scans its share of a table's
//! Parquet files straight from storage and counts the distinct tuples of
//! the quasi-identifiers; the coordinator lists the files, hands them out
//! and merges the counts, and never opens a data file.
//!
//! What comes back is a [`Census`]: the rows read, the rows left out for a
//! null QI, the files' columns, each QI's labels, and every distinct tuple
//! of QI codes with its rows. Labels are the encoder's (the same as `kanon
//! inspect` reads on one machine); the coordinator merges each QI's labels
//! into global codes and the tuples by those codes, so merged counts equal
//! a single machine's, and its memory grows with the distinct tuples (a
//! code per QI and a count each), not the rows.
//!
//! Only storage settings travel (endpoint, region, profile name: no secret
//! is in a [`StorageSpec`]); each worker reads with its own credentials.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use anyhow::{Context, Result};
use kanon_engine::cancel::Cancellation;
use kanon_engine::encode::{Encoder, EquivalenceClasses};
use kanon_engine::spec::{JobSpec, StorageSpec};
use serde::{Deserialize, Serialize};

use kanon_io::dataset::Dataset;
use kanon_io::exit::Failure;
use kanon_io::storage::{Location, Storage};

/// The kind of a census task, as workers register it.
pub const KIND: &str = "kanon.census.1";

/// One worker's share: its files and what to count in them.
#[derive(Debug, Serialize, Deserialize)]
pub struct CensusTask {
    /// How to reach the files (settings only; credentials are the
    /// worker's own).
    storage: StorageSpec,
    /// The dataset the files belong to, for messages.
    dataset: String,
    /// The files, in the order they are read.
    files: Vec<String>,
    /// The job of raw QI values (`kanon inspect`'s): its QIs are counted.
    spec: JobSpec,
}

/// A column of the files: name, type and nullability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnInfo {
    pub name: String,
    pub data_type: String,
    pub nullable: bool,
}

/// The counts of one share, or of a whole table once merged.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Census {
    /// Files read.
    pub files: usize,
    /// Bytes of the files read.
    pub bytes: u64,
    /// Rows read.
    pub rows: u64,
    /// Rows left out because a QI is null.
    pub excluded: u64,
    /// The files' columns (empty for a share without files).
    pub columns: Vec<ColumnInfo>,
    /// Per QI (in the job's order): the labels its codes stand for.
    pub labels: Vec<Vec<String>>,
    /// Every distinct tuple as one code per QI, flattened (`labels.len()`
    /// codes a tuple).
    pub codes: Vec<u32>,
    /// The rows of every tuple.
    pub counts: Vec<u64>,
}

impl Census {
    /// The size in `population` (a census of the same QIs) of each of this
    /// census's tuples, matched by labels, in the order of
    /// [`Census::classes`].
    ///
    /// # Errors
    /// Tuples the population lacks (the sample must be drawn from it),
    /// counted, never shown.
    pub fn population_sizes(&self, population: &Census) -> Result<Vec<u64>> {
        // Per QI: this census's code -> the population's (None: a label
        // the population lacks).
        let translate: Vec<Vec<Option<u32>>> = self
            .labels
            .iter()
            .zip(
                population
                    .labels
                    .iter()
                    .chain(std::iter::repeat(&Vec::new())),
            )
            .map(|(mine, theirs)| {
                let by_label: HashMap<&str, u32> = theirs
                    .iter()
                    .enumerate()
                    .map(|(c, l)| (l.as_str(), c as u32))
                    .collect();
                mine.iter()
                    .map(|l| by_label.get(l.as_str()).copied())
                    .collect()
            })
            .collect();
        let (theirs, their_sizes) = population.classes();
        let counts: HashMap<&[u32], u64> = theirs
            .into_iter()
            .zip(their_sizes)
            .map(|(t, n)| (t, n as u64))
            .collect();
        let (tuples, sizes) = self.classes();
        let mut missing = (0usize, 0usize);
        let found = tuples
            .iter()
            .zip(&sizes)
            .map(|(t, &n)| {
                let key: Option<Vec<u32>> = t
                    .iter()
                    .zip(&translate)
                    .map(|(&c, tr)| tr.get(c as usize).copied().flatten())
                    .collect();
                match key.and_then(|k| counts.get(k.as_slice()).copied()) {
                    Some(size) => size,
                    None => {
                        missing.0 += 1;
                        missing.1 += n;
                        0
                    }
                }
            })
            .collect();
        if missing.0 > 0 {
            return Err(Failure::bad_input(format!(
                "{} sample classes ({} records) do not occur in the population table (--population, risk.population); the sample must be drawn from the population",
                missing.0, missing.1
            ))
            .into());
        }
        Ok(found)
    }

    /// The tuples (one code per QI; equal codes for equal labels) and their
    /// sizes: what the engine's risk measures take.
    pub fn classes(&self) -> (Vec<&[u32]>, Vec<usize>) {
        let n_qi = self.labels.len().max(1);
        let tuples = self.codes.chunks(n_qi).collect();
        let sizes = self.counts.iter().map(|&n| n as usize).collect();
        (tuples, sizes)
    }
}

/// Shares of a census merged one by one as they are read, so that only
/// the merged tuples and the share at hand are held: each QI's labels
/// become global codes (in the order shares first name them), and the
/// tuples are counted by those codes.
pub struct Merge<'a> {
    dataset: &'a Location,
    all: Census,
    /// The worker whose share set the columns.
    first: Option<String>,
    /// Per QI: label -> global code.
    global: Vec<HashMap<String, u32>>,
    counts: FxHashMap<Box<[u32]>, u64>,
}

impl<'a> Merge<'a> {
    /// An empty merge of the census of `dataset`.
    pub fn new(dataset: &'a Location) -> Self {
        Merge {
            dataset,
            all: Census::default(),
            first: None,
            global: Vec::new(),
            counts: FxHashMap::default(),
        }
    }

    /// Adds `worker`'s share.
    ///
    /// # Errors
    /// A share whose files have other columns than the first share's.
    pub fn add(&mut self, worker: String, share: Census) -> Result<()> {
        if share.files == 0 {
            return Ok(());
        }
        let all = &mut self.all;
        match &self.first {
            None => {
                all.columns = share.columns;
                all.labels = vec![Vec::new(); share.labels.len()];
                self.global = vec![HashMap::new(); share.labels.len()];
                self.first = Some(worker.clone());
            }
            Some(w) if all.columns != share.columns || share.labels.len() != self.global.len() => {
                return Err(Failure::bad_input(format!(
                    "the files of {} read by {worker} have other columns (names, types or nullability) than those read by {w}: every file of a table must have the same schema",
                    self.dataset
                ))
                .into())
            }
            Some(_) => {}
        }
        all.files += share.files;
        all.bytes += share.bytes;
        all.rows += share.rows;
        all.excluded += share.excluded;
        // The share's codes, as global codes.
        let remap: Vec<Vec<u32>> = share
            .labels
            .into_iter()
            .zip(self.global.iter_mut())
            .zip(all.labels.iter_mut())
            .map(|((labels, global), names)| {
                labels
                    .into_iter()
                    .map(|label| {
                        let next = names.len() as u32;
                        *global.entry(label.clone()).or_insert_with(|| {
                            names.push(label);
                            next
                        })
                    })
                    .collect()
            })
            .collect();
        let n_qi = remap.len().max(1);
        for (tuple, n) in share.codes.chunks(n_qi).zip(share.counts) {
            let key: Box<[u32]> = tuple
                .iter()
                .zip(&remap)
                .map(|(&c, r)| r.get(c as usize).copied())
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "the census from {worker} names a code it has no label for (a bug in kanon)"
                    )
                })?;
            *self.counts.entry(key).or_default() += n;
        }
        Ok(())
    }

    /// The merged census, its tuples sorted by code.
    pub fn finish(self) -> Census {
        let mut all = self.all;
        let mut tuples: Vec<(Box<[u32]>, u64)> = self.counts.into_iter().collect();
        tuples.sort_unstable();
        all.codes = tuples.iter().flat_map(|(t, _)| t.iter().copied()).collect();
        all.counts = tuples.into_iter().map(|(_, n)| n).collect();
        all
    }
}

/// The census of the dataset at `location` (read with `storage_spec`'s
/// settings, as `input` says) by the cluster's workers: the coordinator
/// lists its files without opening any, the workers count their shares,
/// and the shares are merged one by one as they are decoded. `what` is the
/// progress line.
///
/// # Errors
/// A listing that fails; a worker that fails or is lost (named); shares
/// with other columns.
#[allow(clippy::too_many_arguments)]
pub fn gather(
    cluster: &kanon_datafusion::distributed::Cluster,
    storage_spec: &StorageSpec,
    storage: &Storage,
    location: &Location,
    input: &kanon_engine::spec::InputSpec,
    spec: &JobSpec,
    ui: &kanon_io::ops::Ui,
    what: &str,
) -> Result<Census> {
    let files = kanon_io::dataset::parquet_files(storage, location, input)?;
    let tasks = tasks(storage_spec, location, files, spec, cluster.tasks_per_run());
    gather_tasks(cluster, location, &tasks, ui, what)
}

/// [`gather`] with the tasks made: each share's files are those of its
/// task.
///
/// # Errors
/// As [`gather`].
pub fn gather_tasks(
    cluster: &kanon_datafusion::distributed::Cluster,
    location: &Location,
    tasks: &[CensusTask],
    ui: &kanon_io::ops::Ui,
    what: &str,
) -> Result<Census> {
    let payloads = tasks
        .iter()
        .map(|t| t.to_bytes())
        .collect::<Result<Vec<_>>>()?;
    let spinner = ui.bar(what, None);
    let cancel = kanon_io::ops::cancellation();
    let results = cluster
        .run_tasks(KIND, payloads, &cancel)
        .context("the workers did not count the table; nothing was measured")?;
    spinner.finish_and_clear();
    let mut merge = Merge::new(location);
    for (i, bytes) in results.into_iter().enumerate() {
        let worker = cluster.workers()[i % cluster.workers().len()].to_string();
        let share: Census = postcard::from_bytes(&bytes).with_context(|| {
            format!("a census from {worker} is not readable (a worker of another kanon version?)")
        })?;
        drop(bytes);
        merge.add(worker, share)?;
    }
    Ok(merge.finish())
}

/// The tasks of a census of `files` on `tasks` workers: the files spread
/// so that each share holds about the same bytes (the largest file first
/// to the lightest share; ties by name), each share's files in name order.
pub fn tasks(
    storage: &StorageSpec,
    dataset: &Location,
    files: Vec<(Location, u64)>,
    spec: &JobSpec,
    tasks: usize,
) -> Vec<CensusTask> {
    let mut files: Vec<(String, u64)> = files
        .into_iter()
        .map(|(l, size)| (l.to_string(), size))
        .collect();
    files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut shares: Vec<(u64, Vec<String>)> = vec![(0, Vec::new()); tasks];
    for (name, size) in files {
        // Unknown sizes (a Delta table's) count as one byte: equal counts.
        let lightest = (0..tasks)
            .min_by_key(|&i| (shares[i].0, shares[i].1.len(), i))
            .expect("at least one task");
        shares[lightest].0 += size.max(1);
        shares[lightest].1.push(name);
    }
    shares
        .into_iter()
        .map(|(_, mut names)| {
            names.sort();
            CensusTask {
                storage: storage.clone(),
                dataset: dataset.to_string(),
                files: names,
                spec: spec.clone(),
            }
        })
        .collect()
}

impl CensusTask {
    /// The files of the share, in the order they are read.
    pub fn files(&self) -> &[String] {
        &self.files
    }

    /// The task's bytes.
    ///
    /// # Errors
    /// When it cannot be encoded (a bug).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        // JSON: a job spec has optional and flattened fields, which
        // postcard cannot carry.
        serde_json::to_vec(self).context("encoding a census task (a bug in kanon)")
    }
}

/// Runs a census task on a worker: what `kanon worker` registers as
/// [`KIND`]. Errors are returned as text (they travel to the coordinator),
/// and name files and columns, never values.
pub fn run(payload: &[u8], cancel: &Cancellation) -> std::result::Result<Vec<u8>, String> {
    let counted = || -> Result<Census> {
        let task: CensusTask = serde_json::from_slice(payload)
            .context("not a census task (workers of another kanon version?)")?;
        count(&task, cancel)
    };
    let census = counted().map_err(|e| format!("{e:#}"))?;
    postcard::to_stdvec(&census).map_err(|e| format!("encoding a census: {e}"))
}

/// Reads the task's files and counts their QI tuples.
fn count(task: &CensusTask, cancel: &Cancellation) -> Result<Census> {
    if task.files.is_empty() {
        return Ok(Census::default());
    }
    let storage = Storage::new(&task.storage);
    let dataset_name = Location::parse(&task.dataset)?;
    let files = task
        .files
        .iter()
        .map(|f| Location::parse(f))
        .collect::<Result<Vec<_>>>()?;
    let dataset = Dataset::open_files(&storage, &dataset_name, &files)?;
    let qis: Vec<String> = task
        .spec
        .quasi_identifiers()
        .map(|a| a.name.clone())
        .collect();
    let mut encoder = Encoder::try_new(&task.spec, &Default::default(), &dataset.schema)
        .with_context(|| format!("the quasi-identifiers do not fit {dataset_name}"))?;
    for b in dataset.scan(&storage, Some(dataset.projection(&qis)), false) {
        cancel.check()?;
        encoder.push(&b?)?;
    }
    let table = encoder.finish()?;
    let classes = EquivalenceClasses::of(&table);
    let mut codes = Vec::with_capacity(classes.len() * table.n_qi());
    let mut counts = Vec::with_capacity(classes.len());
    for c in 0..classes.len() {
        codes.extend_from_slice(classes.tuple(c));
        counts.push(classes.size(c) as u64);
    }
    let labels = table
        .columns()
        .iter()
        .map(|col| {
            (0..col.domain_size() as u32)
                .map(|c| col.label(c).to_string())
                .collect()
        })
        .collect();
    Ok(Census {
        files: files.len(),
        bytes: dataset.bytes,
        rows: table.n_rows() as u64,
        excluded: table.excluded().len() as u64,
        columns: dataset
            .schema
            .fields()
            .iter()
            .map(|f| ColumnInfo {
                name: f.name().clone(),
                data_type: f.data_type().to_string(),
                nullable: f.is_nullable(),
            })
            .collect(),
        labels,
        codes,
        counts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A share of one file over QIs (a, b) with `labels` and `tuples`.
    fn share(
        files: usize,
        rows: u64,
        labels: [&[&str]; 2],
        tuples: &[([u32; 2], u64)],
    ) -> (String, Census) {
        (
            format!("w{files}"),
            Census {
                files,
                bytes: 10,
                rows,
                excluded: 1,
                columns: vec![ColumnInfo {
                    name: "a".into(),
                    data_type: "Utf8".into(),
                    nullable: true,
                }],
                labels: labels
                    .iter()
                    .map(|l| l.iter().map(|s| s.to_string()).collect())
                    .collect(),
                codes: tuples.iter().flat_map(|(t, _)| *t).collect(),
                counts: tuples.iter().map(|(_, n)| *n).collect(),
            },
        )
    }

    /// The census of the shares, merged in order.
    fn merge(shares: Vec<(String, Census)>, at: &Location) -> Result<Census> {
        let mut merge = Merge::new(at);
        for (worker, share) in shares {
            merge.add(worker, share)?;
        }
        Ok(merge.finish())
    }

    #[test]
    fn shares_merge_by_labels_whatever_their_codes() {
        let at = Location::parse("/tmp/t").unwrap();
        // Share 1 codes x=0, y=1 and "1"=0; share 2 codes x=1, "2"=0, "1"=1.
        let merged = merge(
            vec![
                share(1, 4, [&["x", "y"], &["1"]], &[([0, 0], 2), ([1, 0], 1)]),
                (String::from("empty"), Census::default()),
                share(
                    2,
                    5,
                    [&["z", "x"], &["2", "1"]],
                    &[([1, 1], 3), ([1, 0], 1)],
                ),
            ],
            &at,
        )
        .unwrap();
        assert_eq!(
            (merged.files, merged.rows, merged.excluded, merged.bytes),
            (3, 9, 2, 20)
        );
        assert_eq!(merged.labels, [vec!["x", "y", "z"], vec!["1", "2"]]);
        let (tuples, sizes) = merged.classes();
        // (x, 1) x 5, (x, 2) x 1, (y, 1) x 1.
        assert_eq!(tuples, [&[0, 0][..], &[0, 1], &[1, 0]]);
        assert_eq!(sizes, [5, 1, 1]);
        let mut other = share(3, 1, [&[], &[]], &[]);
        other.1.columns[0].data_type = "Int64".into();
        let err = merge(vec![share(1, 1, [&[], &[]], &[]), other], &at)
            .unwrap_err()
            .to_string();
        assert!(err.contains("w3") && err.contains("w1"), "{err}");
    }

    #[test]
    fn files_spread_by_size_then_name() {
        let spec = JobSpec::default();
        let at = Location::parse("/d").unwrap();
        let files = [("/d/a", 10), ("/d/b", 30), ("/d/c", 20), ("/d/e", 5)]
            .iter()
            .map(|(f, s)| (Location::parse(f).unwrap(), *s))
            .collect();
        let t = tasks(&StorageSpec::default(), &at, files, &spec, 2);
        // b (30) to share 0, c (20) and a (10) to share 1, then e (5) to
        // the share with fewer files at equal bytes.
        assert_eq!(t[0].files, ["/d/b", "/d/e"]);
        assert_eq!(t[1].files, ["/d/a", "/d/c"]);
    }
}
