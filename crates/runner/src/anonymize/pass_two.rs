//! Pass two: every column recoded, bucketed, put in release order, checked
//! and written (not yet committed).

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use kanon_engine::encode::QiTable;
use kanon_engine::privacy::Privacy;
use kanon_engine::release::{Release, Releaser};
use kanon_engine::verify::Verified;
use kanon_engine::Anonymization;

use super::buckets::ReleaseBuckets;
use super::buffer;
use super::plan::{Input, Plan};
use kanon_io::dataset::Dataset;
use kanon_io::delta::series::{LeaveOut, Policy};
use kanon_io::exit::Failure;
use kanon_io::ops::{barrier, check_interrupt, Ui};
use kanon_io::publish::Publisher;
use kanon_io::release::ReleaseOptions;

/// Rows of a spilled bucket, sorted in memory at once (`output.buffer_rows`).
pub(crate) const DEFAULT_BUFFER_ROWS: u64 = 2_000_000;

/// Rows per batch handed to the release writer, at most: a bucket's rows
/// (about `buffer::SORT_ROWS`) go in batches of their own, and the buckets
/// are the same whatever the memory, so the file's bytes are too.
pub(crate) const WRITE_ROWS: usize = 65_536;

/// Pass 2: every column, recoded batch by batch, put in release order,
/// checked by its published labels and written (not yet committed).
///
/// Rows are written class by class in a seeded order, never in input order
/// (kanon_engine::order). A release that fits in `output.buffer_memory` is
/// ordered in memory; a larger one is spilled to disk in buckets of classes
/// (kanon_io::spill) from the moment it outgrows the buffer, and each bucket
/// is ordered in memory: one scan of the input, bounded memory, the same
/// bytes.
#[allow(clippy::too_many_arguments)]
pub(super) fn pass_two<'p>(
    plan: &'p Plan,
    dataset: &Dataset,
    held_input: Option<Vec<RecordBatch>>,
    rows_in: u64,
    leave_out: Option<&LeaveOut>,
    recoder: kanon_engine::recode::Recoder,
    options: ReleaseOptions,
    privacy: &Privacy,
    result: &Anonymization,
    report: bool,
    ui: &Ui,
) -> Result<(Publisher<'p>, Verified, Option<QiTable>)> {
    let spec = plan.job.spec();
    let budget = plan.buffer_memory;
    let buffer_rows = spec.output.buffer_rows.unwrap_or(DEFAULT_BUFFER_ROWS);
    let mut releaser = Releaser::new(
        spec,
        recoder,
        &dataset.schema,
        buffer::SORT_ROWS.min(buffer_rows),
    )
    .context("cannot check the release")?;
    // With a table history, the people of the release are recorded.
    if let Some(Policy::Checked { .. }) = &plan.series {
        let column = spec
            .entity_column()
            .context("output.history without privacy.entity (a bug in kanon)")?;
        let ledger =
            kanon_engine::history::Ledger::new(spec, plan.pseudonymiser.fingerprinter(column)?)?;
        releaser = releaser.with_ledger(ledger);
    }
    let out_schema = releaser.schema().clone();
    dataset.check_unchanged(&plan.storage)?;
    barrier("between-passes")?;
    let mut writer = Publisher::create(&plan.storage, plan.target(), out_schema, options)?;
    let store = ReleaseBuckets::new(&releaser, budget, buffer_rows);
    let mut release = Release::new(releaser, store);
    let bar = ui.bar("pass 2/2", Some(rows_in));
    let from_pass_one = held_input.is_some();
    let mut recode_all = |batches: &mut dyn Iterator<Item = Result<RecordBatch>>| -> Result<()> {
        for batch in batches {
            check_interrupt()?;
            let batch = batch?;
            bar.inc(batch.num_rows() as u64);
            // Batches held from pass 1 were left out of already.
            let batch = match leave_out.filter(|_| !from_pass_one) {
                Some(l) => l.apply(batch)?.0,
                None => batch,
            };
            let recoded = release.releaser().rows_recoded() + batch.num_rows();
            if recoded > release.releaser().rows_expected() {
                return Err(changed(&plan.input, rows_in, recoded));
            }
            release.push(&batch)?;
        }
        Ok(())
    };
    match held_input {
        Some(batches) => recode_all(&mut batches.into_iter().map(Ok))?,
        None => {
            dataset
                .with_read_ahead(&plan.storage, None, false, recode_all)
                .0?
        }
    }
    if release.releaser().rows_recoded() as u64 != rows_in {
        return Err(changed(
            &plan.input,
            rows_in,
            release.releaser().rows_recoded(),
        ));
    }
    // The writer sees each bucket's rows in batches of their own: the
    // buckets, and so the file's pages and bytes, are the same whether the
    // release was held in memory or spilled. Ordering and gathering the
    // next rows overlaps encoding the last ones: a thread writes while this
    // one produces.
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(2);
        let writer = &mut writer;
        let writing = scope.spawn(move || -> Result<()> {
            for batch in rx {
                writer.write(&batch)?;
            }
            Ok(())
        });
        let produced = release.drain(WRITE_ROWS, |chunk| {
            check_interrupt()?;
            // A closed channel: the writer failed, and says why.
            Ok(tx.send(chunk).is_ok())
        });
        drop(tx);
        let written = writing.join().unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "the release writer failed (a bug in kanon); nothing was written"
            ))
        });
        written.and(produced)
    })?;
    bar.finish_and_clear();
    // The report and the metrics read the labels the verifier encoded.
    // The file's footer is written while the labels are checked; the
    // release is committed only after both.
    writer.set_people(
        release
            .releaser()
            .take_ledger()
            .context("the release's people could not be recorded; nothing was written")?,
    );
    let (checked, closed) = rayon::join(|| release.finish(privacy, result), || writer.close());
    let (release_check, labels) =
        checked.context("the recoded release failed verification; nothing was written")?;
    closed?;
    Ok((writer, release_check, report.then_some(labels)))
}

pub(super) fn changed(input: &Input, pass1: u64, pass2: usize) -> anyhow::Error {
    Failure::bad_input(format!(
        "input {input} changed between the passes: pass 1 read {pass1} rows, pass 2 found {pass2} or more; nothing was written, run the job again"
    ))
    .into()
}
