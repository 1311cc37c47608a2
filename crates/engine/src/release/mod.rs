//! The one path from an input to a verified release, shared by every front
//! end (`kanon anonymize`, the DataFusion plan node of `anonymize()`,
//! `kanon report`, the engine's tests and benchmarks), driven through one
//! [`Session`]:
//!
//! ```text
//! Session::new       the input's columns against the job's column policy
//! Session::push      pass one, batch by batch: QI and sensitive codes,
//!                    identifying columns counted (crate::identities)
//! Session::encode    -> Encoded: the encoded table and who the input names
//! Encoded::anonymise -> Prepared: feasibility, the algorithm, the partition
//!                    verified, the recoder (pseudonyms keyed per release)
//! Releaser::new      the release's schema, order and buckets
//! Release::push      pass two, batch by batch: recoded, kept by bucket in
//!                    a BucketStore (memory, or the runner's spill files)
//! Release::drain     bucket by bucket in release order, each row checked
//!                    by its labels as it leaves
//! Release::finish    the whole release verified, every input row
//!                    published or counted as suppressed
//! ```
//!
//! The release is checked twice, fail closed: the partition against the
//! privacy models ([`crate::pipeline`]), then the rows as published, by
//! their labels ([`ReleaseVerifier`]), which must agree with the partition
//! row for row. Rows leave in release order ([`crate::order`]), never in
//! input order. A front end keeps only what is its own: where input
//! batches come from (files, an execution plan), how it shows progress and
//! stops ([`SessionOptions`]), where buckets of rows wait (a
//! [`BucketStore`]) and where the release goes and how it is committed.
//! Nothing may be committed before [`Release::finish`] returned.

mod session;

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};

use crate::algorithms::partitioned::BlockExecutor;
use crate::cancel::Cancellation;
use crate::encode::QiTable;
use crate::entity::{people_of_release, Entities};
use crate::error::{Error, Result};
use crate::order::{Buckets, Ordered, ReleaseOrder};
use crate::partition::SUPPRESSED;
use crate::pipeline::{anonymize_cancellable, anonymize_people, Anonymization};
use crate::privacy::Privacy;
use crate::progress::Progress;
use crate::recode::{Pseudonymiser, Recoder};
use crate::spec::JobSpec;
use crate::verify::{ReleaseVerifier, Verified};

pub use session::{BucketStore, Encoded, MemoryBuckets, Release, Session, SessionOptions};

/// An anonymised table: the verified partition and what recodes the input.
#[derive(Debug)]
pub struct Prepared {
    /// The algorithm's verified partition, its metrics and details.
    pub anonymization: Anonymization,
    /// Recodes input batches into released batches.
    pub recoder: Recoder,
}

/// Runs the job's algorithm on `table` under `cancel` (reporting to
/// `progress`, clustering the blocks of a block-wise run with `blocks`),
/// verifies the
/// partition, and prepares the recoder (with the keys of the pseudonymised
/// columns). With `entities` (the job names `privacy.entity`), the person
/// is the unit ([`crate::entity`]): the algorithm runs on people, and the
/// release is verified by people too.
///
/// # Errors
/// As [`crate::pipeline::anonymize`]; [`Error::Spec`] when the job names
/// an entity column and `entities` is `None`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare(
    spec: &JobSpec,
    table: &QiTable,
    entities: Option<Arc<Entities>>,
    privacy: &Privacy,
    cancel: &Cancellation,
    progress: &dyn Progress,
    blocks: &dyn BlockExecutor,
    pseudonymiser: Pseudonymiser,
) -> Result<Prepared> {
    let anonymization = match (&entities, spec.entity_column()) {
        (Some(people), _) => {
            anonymize_people(spec, table, people, privacy, cancel, progress, blocks)?
        }
        (None, Some(column)) => {
            return Err(Error::spec(
                "privacy.entity",
                format!(
                "the people of `{column}` were not counted by this front end: nothing was released"
            ),
            ))
        }
        (None, None) => anonymize_cancellable(spec, table, privacy, cancel, progress, blocks)?,
    };
    let recoder = Recoder::new(spec, table, &anonymization.partition)
        .with_pseudonymiser(pseudonymiser)
        .with_entities(entities);
    Ok(Prepared {
        anonymization,
        recoder,
    })
}

/// Rows of one input batch as released, with the group of each.
#[derive(Debug)]
pub struct Recoded {
    /// The released rows (suppressed rows withheld), in input order.
    pub batch: RecordBatch,
    /// The group of every released row.
    pub groups: Vec<u32>,
}

/// The second half of a release: recodes the input batch by batch, puts
/// the rows in release order bucket by bucket, verifies them by their
/// labels and accounts for every row.
#[derive(Debug)]
pub struct Releaser {
    recoder: Recoder,
    order: ReleaseOrder,
    buckets: Buckets,
    schema: SchemaRef,
    verifier: ReleaseVerifier,
    /// The check by people ([`crate::entity`]): the released rows in input
    /// order, by their labels, and the person of each.
    people: Option<(ReleaseVerifier, Vec<u32>)>,
    /// The people of the release as a table's history keeps them.
    ledger: Option<crate::history::Ledger>,
    offset: usize,
}

impl Releaser {
    /// Prepares the release of input batches of `input` schema, in buckets
    /// of classes of at most `bucket_rows` rows (`u64::MAX`: one bucket),
    /// ordered under the job's seed.
    ///
    /// # Errors
    /// [`Error::Data`] when the release lacks a QI or sensitive column.
    pub fn new(spec: &JobSpec, recoder: Recoder, input: &Schema, bucket_rows: u64) -> Result<Self> {
        let schema = recoder.output_schema(input);
        let verifier =
            ReleaseVerifier::try_with_hierarchies(spec, recoder.sensitive_hierarchies(), &schema)?;
        let order = recoder.release_order(spec.algorithm.seed);
        let buckets = order.buckets(bucket_rows.max(1));
        let people = match recoder.entities() {
            Some(_) => Some((
                ReleaseVerifier::try_with_hierarchies(
                    spec,
                    recoder.sensitive_hierarchies(),
                    &schema,
                )?,
                Vec::new(),
            )),
            None => None,
        };
        Ok(Releaser {
            recoder,
            order,
            buckets,
            schema,
            verifier,
            people,
            ledger: None,
            offset: 0,
        })
    }

    /// Records the people of the release in `ledger` as rows are recoded
    /// ([`crate::history`]), for a front end that checks a table's history.
    pub fn with_ledger(mut self, ledger: crate::history::Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The people recorded by the ledger ([`Releaser::with_ledger`]), once
    /// every row was recoded.
    ///
    /// # Errors
    /// As [`crate::history::Ledger::finish`].
    pub fn take_ledger(&mut self) -> Result<Option<Vec<crate::history::Published>>> {
        self.ledger.take().map(|l| l.finish()).transpose()
    }

    /// The schema of the release.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The number of buckets.
    pub fn n_buckets(&self) -> usize {
        self.buckets.ranges().len()
    }

    /// Published rows of every bucket.
    pub fn bucket_rows(&self) -> Vec<u64> {
        self.buckets
            .ranges()
            .iter()
            .map(|r| self.order.rows_of(r.clone()))
            .collect()
    }

    /// The bucket of every group (the rows of group `g` go to bucket
    /// `[g]`).
    pub fn bucket_of_groups(&self) -> Vec<usize> {
        (0..self.order.n_groups() as u32)
            .map(|g| self.bucket_of(g))
            .collect()
    }

    /// The bucket that the rows of `group` belong to.
    pub fn bucket_of(&self, group: u32) -> usize {
        self.buckets.of(self.order.rank(group))
    }

    /// Input rows recoded so far.
    pub fn rows_recoded(&self) -> usize {
        self.offset
    }

    /// Input rows the partition covers.
    pub fn rows_expected(&self) -> usize {
        self.recoder.n_rows()
    }

    /// Recodes the next input batch (its rows follow those of the batches
    /// before it).
    ///
    /// # Errors
    /// [`Error::Data`] when the input holds more rows than the partition
    /// (it changed since it was encoded); recoding failures.
    pub fn recode(&mut self, batch: &RecordBatch) -> Result<Recoded> {
        let n = batch.num_rows();
        if self.offset + n > self.recoder.n_rows() {
            return Err(changed(self.recoder.n_rows(), self.offset + n));
        }
        let released = self.recoder.recode(batch, self.offset)?;
        let range = self.offset..self.offset + n;
        let groups = self.recoder.group_of_row()[range.clone()]
            .iter()
            .copied()
            .filter(|&g| g != SUPPRESSED)
            .collect();
        if let Some(ledger) = &mut self.ledger {
            let kept: Vec<bool> = self.recoder.group_of_row()[range.clone()]
                .iter()
                .map(|&g| g != SUPPRESSED)
                .collect();
            ledger.observe(batch, &kept, &released)?;
        }
        if let (Some((verifier, ids)), Some(entities)) = (&mut self.people, self.recoder.entities())
        {
            verifier.push(&released)?;
            ids.extend(
                self.recoder.group_of_row()[range.clone()]
                    .iter()
                    .zip(&entities.of_row()[range])
                    .filter(|(&g, _)| g != SUPPRESSED)
                    .map(|(_, &p)| p),
            );
        }
        self.offset += n;
        Ok(Recoded {
            batch: released,
            groups,
        })
    }

    /// The rows of one bucket (every released row whose group is in it, any
    /// order) in release order, taken chunk by chunk
    /// ([`ReleasedRows::next_chunk`]), each chunk added to the check by
    /// labels as it is taken. Buckets must be released in bucket order, and
    /// every chunk taken before the next bucket: rows not taken are missing
    /// from the check, and [`Releaser::finish`] then fails.
    ///
    /// # Errors
    /// Arrow failures.
    pub fn release(
        &mut self,
        batches: Vec<RecordBatch>,
        groups: &[u32],
    ) -> Result<ReleasedRows<'_>> {
        let ordered = self.order.order(&self.schema, batches, groups)?;
        Ok(ReleasedRows {
            ordered,
            verifier: &mut self.verifier,
            taken: 0,
        })
    }

    /// Verifies the whole release by its labels against `privacy`, and that
    /// it holds exactly the rows the partition publishes: every input row
    /// recoded, and published or counted as suppressed.
    ///
    /// # Errors
    /// [`Error::Data`] when the input had fewer rows than the partition;
    /// [`Error::VerificationFailed`] when a published class violates a
    /// model; [`Error::Internal`] when the rows do not add up.
    pub fn finish(self, privacy: &Privacy, anonymization: &Anonymization) -> Result<Verified> {
        self.finish_with_labels(privacy, anonymization)
            .map(|(checked, _)| checked)
    }

    /// The end of one share of a release whose other shares are written
    /// elsewhere (a worker's part, issue 35): every input row of the share
    /// must have been recoded, and the share's rows, encoded by their
    /// labels, are handed back unverified. A share alone need not satisfy
    /// the models: whoever holds every share's classes verifies their
    /// union ([`crate::verify::verify_sizes`]).
    ///
    /// # Errors
    /// [`Error::Data`] when the input had fewer rows than the share's
    /// groups; [`Error::Spec`] for a job whose person is the unit (a
    /// person's rows may be in several shares).
    pub fn finish_share(self) -> Result<QiTable> {
        if self.people.is_some() {
            return Err(Error::spec(
                "privacy.entity",
                "a release written in shares cannot count a person whose rows are in several shares; run the job on one machine",
            ));
        }
        let rows_in = self.recoder.n_rows();
        if self.offset != rows_in {
            return Err(changed(rows_in, self.offset));
        }
        self.verifier.into_table()
    }

    /// [`Releaser::finish`], also handing back the release encoded by its
    /// labels (what the verifier checked), for front ends that report on the
    /// release without encoding it a second time.
    ///
    /// # Errors
    /// As [`Releaser::finish`].
    pub fn finish_with_labels(
        self,
        privacy: &Privacy,
        anonymization: &Anonymization,
    ) -> Result<(Verified, QiTable)> {
        let rows_in = self.recoder.n_rows();
        if self.offset != rows_in {
            return Err(changed(rows_in, self.offset));
        }
        let table = self.verifier.into_table()?;
        let (checked, table) = match self.people {
            // By people: the rows in input order, collapsed to one per
            // person (which fails when a person's rows carry two label
            // tuples), against the models; the rows in release order must
            // form the same classes. The release's labels handed back are
            // then one row per person, as every figure of the job counts.
            Some((verifier, ids)) => {
                let rows = verifier.into_table()?;
                if !crate::verify::same_classes(&rows, &table) {
                    return Err(Error::Internal(
                        "the release in release order does not hold the classes of the recoded rows (a bug in kanon; nothing was released)".into(),
                    ));
                }
                let people = people_of_release(&rows, &ids)?;
                let mut checked = crate::verify::verify_labels(&people, privacy)?;
                checked.people = Some(checked.published_rows);
                checked.published_rows = rows.n_rows();
                (checked, people)
            }
            None => (crate::verify::verify_labels(&table, privacy)?, table),
        };
        let suppressed = anonymization.report.suppressed_rows;
        if checked.published_rows != anonymization.verified.published_rows
            || checked.published_rows + suppressed != rows_in
        {
            return Err(Error::Internal(format!(
                "the release holds {} rows and {suppressed} are suppressed, but the input has {rows_in} and the partition publishes {} (a bug in kanon; nothing was released)",
                checked.published_rows, anonymization.verified.published_rows
            )));
        }
        Ok((checked, table))
    }
}

/// The rows of one bucket in release order ([`Releaser::release`]).
#[derive(Debug)]
pub struct ReleasedRows<'a> {
    ordered: Ordered,
    verifier: &'a mut ReleaseVerifier,
    taken: usize,
}

impl ReleasedRows<'_> {
    /// Rows not taken yet.
    pub fn remaining(&self) -> usize {
        self.ordered.num_rows() - self.taken
    }

    /// The next `len` rows (fewer at the end) in release order, as one
    /// batch, added to the check by labels; `None` once every row was
    /// taken.
    ///
    /// # Errors
    /// Arrow failures; [`Error::Data`] for a null QI label (never in a
    /// release).
    pub fn next_chunk(&mut self, len: usize) -> Result<Option<RecordBatch>> {
        let len = len.min(self.remaining());
        if len == 0 {
            return Ok(None);
        }
        let chunk = self.ordered.chunk(self.taken, len)?;
        self.verifier.push(&chunk)?;
        self.taken += len;
        Ok(Some(chunk))
    }

    /// Every remaining row, as one batch.
    ///
    /// # Errors
    /// As [`ReleasedRows::next_chunk`].
    pub fn all(mut self) -> Result<RecordBatch> {
        let schema = self.ordered.schema().clone();
        Ok(self
            .next_chunk(self.remaining())?
            .unwrap_or_else(|| RecordBatch::new_empty(schema)))
    }
}

fn changed(expected: usize, seen: usize) -> Error {
    Error::Data {
        column: "*".into(),
        message: format!(
            "the input changed while it was read: {seen} rows now, {expected} when it was encoded; nothing was released, run the job again"
        ),
    }
}
