//! The session of a release: pass one ([`Session`], [`Encoded`]) and pass
//! two ([`Release`] over a [`BucketStore`]); the walk is in the docs of
//! [`crate::release`].

use std::sync::Arc;

use arrow::array::{RecordBatch, UInt32Array};
use arrow::datatypes::Schema;
use rustc_hash::FxHashMap;

use super::{prepare, Prepared, Releaser};
use crate::algorithms::partitioned::BlockExecutor;
use crate::cancel::Cancellation;
use crate::encode::{Encoder, QiTable};
use crate::error::Result;
use crate::hierarchy::Hierarchy;
use crate::identities::{Identities, IdentityCheck};
use crate::pipeline::Anonymization;
use crate::privacy::Privacy;
use crate::progress::Progress;
use crate::recode::Pseudonymiser;
use crate::spec::JobSpec;
use crate::verify::Verified;

/// How a front end runs the algorithm: what stops it, where its progress
/// goes, where the blocks of a block-wise run are clustered, and the keys
/// of the pseudonymised columns (made per release by
/// [`Pseudonymiser::for_release`]).
#[derive(Debug, Clone, Copy)]
pub struct SessionOptions<'a> {
    /// Checked by the algorithm's inner loops.
    pub cancel: &'a Cancellation,
    /// Where the algorithm reports how much is done.
    pub progress: &'a dyn Progress,
    /// Where the blocks of a block-wise run are clustered.
    pub blocks: &'a dyn BlockExecutor,
    /// The job's keys, before they are made the release's own.
    pub pseudonymiser: &'a Pseudonymiser,
}

/// Pass one of a release: the input checked against the job's column
/// policy, then encoded and counted batch by batch.
///
/// A whole release, as a front end makes it (here in memory, with no
/// display and nothing to stop it):
///
/// ```
/// use std::sync::Arc;
/// use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
/// use arrow::datatypes::{DataType, Field, Schema};
/// use kanon_engine::algorithms::partitioned::LocalBlocks;
/// use kanon_engine::release::{MemoryBuckets, Prepared, Release, Releaser, Session, SessionOptions};
/// use kanon_engine::{cancel::Cancellation, privacy::Privacy, progress::Silent, spec::JobSpec};
///
/// let spec: JobSpec = serde_json::from_str(r#"{
///     "privacy": {"k": 2},
///     "algorithm": {"name": "mondrian"},
///     "attributes": [{"name": "age", "role": "quasi-identifier"},
///                    {"name": "disease", "role": "sensitive"},
///                    {"name": "name", "role": "identifying"}]}"#)?;
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("age", DataType::Int64, false),
///     Field::new("disease", DataType::Utf8, false),
///     Field::new("name", DataType::Utf8, false),
/// ]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![
///     Arc::new(Int64Array::from(vec![30, 41, 52, 33])) as ArrayRef,
///     Arc::new(StringArray::from(vec!["flu", "cold", "flu", "asthma"])),
///     Arc::new(StringArray::from(vec!["Ann", "Bob", "Cy", "Di"])),
/// ])?;
///
/// // Pass one: every batch of the input, then the algorithm.
/// let mut session = Session::new(&spec, &Default::default(), &schema, "the example")?;
/// session.push(&batch)?;
/// let encoded = session.encode()?;
/// let privacy = Privacy::from_spec(&spec)?;
/// let Prepared { anonymization, recoder } = encoded.anonymise(&privacy, SessionOptions {
///     cancel: Cancellation::never(),
///     progress: Silent::sink(),
///     blocks: LocalBlocks::get(),
///     pseudonymiser: &Default::default(),
/// })?;
///
/// // Pass two: the input again, recoded, then drained in release order.
/// let releaser = Releaser::new(&spec, recoder, &schema, u64::MAX)?;
/// let store = MemoryBuckets::new(&releaser);
/// let mut release = Release::new(releaser, store);
/// release.push(&batch)?;
/// let mut published = Vec::new();
/// release.drain(1024, |rows| {
///     published.push(rows);
///     Ok(true)
/// })?;
/// let (verified, _labels) = release.finish(&privacy, &anonymization)?;
/// assert_eq!(verified.smallest_class, 2);
/// // The names are identifying: dropped from the release.
/// assert!(published[0].column_by_name("name").is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Session {
    spec: JobSpec,
    encoder: Encoder,
    identities: IdentityCheck,
    rows: usize,
}

impl Session {
    /// A session of `spec` (kept with the session) over input batches of `input` (named `source`
    /// in messages), with the parsed hierarchy files of the job.
    ///
    /// # Errors
    /// [`crate::Error::Spec`] for a listed column the input lacks, or an
    /// input column the job gives no role (under `columns.unlisted =
    /// "error"`), as [`crate::columns::check`]; [`crate::Error::Data`] for
    /// a QI or sensitive column of a type kanon cannot read.
    pub fn new(
        spec: &JobSpec,
        hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
        input: &Schema,
        source: &str,
    ) -> Result<Self> {
        crate::columns::check(spec, input, source)?;
        Session::projected(spec, hierarchies, input)
    }

    /// A session over a projection of an input whose columns the front end
    /// checked already against the job's column policy ([`Session::new`]):
    /// e.g. a plan node whose input the planner projected to the columns
    /// the release needs (at least [`Session::columns`]).
    ///
    /// # Errors
    /// [`crate::Error::Data`] for a QI or sensitive column missing from
    /// `input` or of a type kanon cannot read.
    pub fn projected(
        spec: &JobSpec,
        hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
        input: &Schema,
    ) -> Result<Self> {
        Ok(Session {
            spec: spec.clone(),
            encoder: Encoder::try_new(spec, hierarchies, input)?,
            identities: IdentityCheck::new(spec),
            rows: 0,
        })
    }

    /// The columns pass one reads (QIs, sensitive attributes, the research
    /// subset, and the identifying and pseudonymised columns the identity
    /// check counts): a front end that projects its input reads these.
    pub fn columns(&self) -> Vec<String> {
        let mut columns = self.spec.encoded_columns();
        columns.extend(self.identities.columns().map(String::from));
        columns
    }

    /// Encodes and counts one batch of the input (all its columns, or a
    /// projection holding [`Session::columns`]).
    ///
    /// # Errors
    /// As [`Encoder::push`] and [`IdentityCheck::push`].
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        self.encoder.push(batch)?;
        self.identities.push(batch)?;
        self.rows += batch.num_rows();
        Ok(())
    }

    /// Input rows pushed so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Ends pass one: refuses what would publish people as rows (see
    /// [`crate::identities`]), then assigns the final codes.
    ///
    /// # Errors
    /// As [`IdentityCheck::finish`] and [`Encoder::finish`].
    pub fn encode(self) -> Result<Encoded> {
        let identities = self.identities.finish()?;
        let table = self.encoder.finish()?;
        Ok(Encoded {
            spec: self.spec,
            table,
            identities,
        })
    }
}

/// The input after pass one: its encoded table and who it names.
#[derive(Debug)]
pub struct Encoded {
    spec: JobSpec,
    table: QiTable,
    identities: Identities,
}

impl Encoded {
    /// The encoded table (raw QI values, for the report's "before").
    pub fn table(&self) -> &QiTable {
        &self.table
    }

    /// Who the input's identifying columns name.
    pub fn identities(&self) -> &Identities {
        &self.identities
    }

    /// Runs the job's algorithm under `options` and verifies its partition
    /// ([`crate::pipeline`]), then prepares the recoder of pass two: with
    /// the people of an entity job as the unit ([`crate::entity`]), and the
    /// pseudonyms keyed for this release.
    ///
    /// # Errors
    /// As [`crate::pipeline::anonymize`].
    pub fn anonymise(&self, privacy: &Privacy, options: SessionOptions<'_>) -> Result<Prepared> {
        prepare(
            &self.spec,
            &self.table,
            self.identities.entities.clone(),
            privacy,
            options.cancel,
            options.progress,
            options.blocks,
            options
                .pseudonymiser
                .for_release(&self.spec, &self.identities),
        )
    }
}

/// Where the recoded rows of each bucket wait between pass two's recoding
/// and their ordering ([`Release::drain`]): in memory ([`MemoryBuckets`]),
/// or on disk when the release outgrows a buffer (the runner's spill).
/// Which store held a bucket never changes the bytes released.
pub trait BucketStore {
    /// The store's errors, which the engine's convert into (a front end's
    /// own error type, so that its I/O failures keep their kind).
    type Error: From<crate::Error>;

    /// Keeps recoded rows, `groups[i]` being the group of row `i`.
    ///
    /// # Errors
    /// The store's own failures (I/O, Arrow).
    fn put(&mut self, rows: RecordBatch, groups: Vec<u32>) -> Result<(), Self::Error>;

    /// Every row kept for `bucket` (any order) and the group of each; asked
    /// once per bucket, in bucket order, after every row was put.
    ///
    /// # Errors
    /// The store's own failures.
    fn take(&mut self, bucket: usize) -> Result<(Vec<RecordBatch>, Vec<u32>), Self::Error>;
}

/// Buckets held in memory, split by group as rows arrive.
#[derive(Debug)]
pub struct MemoryBuckets {
    bucket_of: Vec<usize>,
    held: Vec<(Vec<RecordBatch>, Vec<u32>)>,
}

impl MemoryBuckets {
    /// The buckets of `releaser`'s release.
    pub fn new(releaser: &Releaser) -> Self {
        MemoryBuckets {
            bucket_of: releaser.bucket_of_groups(),
            held: (0..releaser.n_buckets())
                .map(|_| Default::default())
                .collect(),
        }
    }
}

impl BucketStore for MemoryBuckets {
    type Error = crate::Error;

    fn put(&mut self, rows: RecordBatch, groups: Vec<u32>) -> Result<()> {
        if self.held.len() == 1 {
            let (batches, g) = &mut self.held[0];
            batches.push(rows);
            g.extend(groups);
            return Ok(());
        }
        let mut rows_of: Vec<Vec<u32>> = vec![Vec::new(); self.held.len()];
        for (i, &g) in groups.iter().enumerate() {
            rows_of[self.bucket_of[g as usize]].push(i as u32);
        }
        for (bucket, at) in rows_of.into_iter().enumerate() {
            if at.is_empty() {
                continue;
            }
            let (batches, g) = &mut self.held[bucket];
            g.extend(at.iter().map(|&i| groups[i as usize]));
            batches.push(arrow::compute::take_record_batch(
                &rows,
                &UInt32Array::from(at),
            )?);
        }
        Ok(())
    }

    fn take(&mut self, bucket: usize) -> Result<(Vec<RecordBatch>, Vec<u32>)> {
        Ok(std::mem::take(&mut self.held[bucket]))
    }
}

/// Pass two of a release: input batches recoded into a [`BucketStore`],
/// then drained bucket by bucket in release order, each row checked by its
/// labels as it leaves.
#[derive(Debug)]
pub struct Release<S> {
    releaser: Releaser,
    store: S,
}

impl<S: BucketStore> Release<S> {
    /// Pass two through `releaser`, its buckets waiting in `store`.
    pub fn new(releaser: Releaser, store: S) -> Self {
        Release { releaser, store }
    }

    /// The releaser: its schema, buckets, rows recoded and expected, and
    /// the people recorded for a table's history.
    pub fn releaser(&mut self) -> &mut Releaser {
        &mut self.releaser
    }

    /// Recodes the next input batch and keeps its rows in their buckets.
    ///
    /// # Errors
    /// As [`Releaser::recode`] and the store's `put`.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), S::Error> {
        let recoded = self.releaser.recode(batch)?;
        self.store.put(recoded.batch, recoded.groups)
    }

    /// Hands `sink` every released row in release order, in batches of at
    /// most `chunk_rows` rows, bucket by bucket, each batch added to the
    /// check by labels; stops early when `sink` returns `false` (the
    /// release is then incomplete, and [`Release::finish`] fails).
    ///
    /// # Errors
    /// The store's and `sink`'s failures; as [`Releaser::release`].
    pub fn drain(
        &mut self,
        chunk_rows: usize,
        mut sink: impl FnMut(RecordBatch) -> Result<bool, S::Error>,
    ) -> Result<(), S::Error> {
        for bucket in 0..self.releaser.n_buckets() {
            let (batches, groups) = self.store.take(bucket)?;
            let mut rows = self.releaser.release(batches, &groups)?;
            drop(groups);
            while let Some(chunk) = rows.next_chunk(chunk_rows.max(1))? {
                if !sink(chunk)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The end of one share of a release written in shares
    /// ([`Releaser::finish_share`]): the share's rows by their labels,
    /// unverified.
    ///
    /// # Errors
    /// As [`Releaser::finish_share`].
    pub fn finish_share(self) -> Result<QiTable> {
        self.releaser.finish_share()
    }

    /// Verifies the whole release ([`Releaser::finish_with_labels`]): the
    /// check, and the release encoded by its labels.
    ///
    /// # Errors
    /// As [`Releaser::finish`].
    pub fn finish(
        self,
        privacy: &Privacy,
        anonymization: &Anonymization,
    ) -> Result<(Verified, QiTable)> {
        self.releaser.finish_with_labels(privacy, anonymization)
    }
}
