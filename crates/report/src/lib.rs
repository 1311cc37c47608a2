//! The HTML release report a data owner signs off: `kanon report` on a
//! published release, and `kanon anonymize --report` beside the release it
//! writes, both in the `kanon` command line; this crate builds and writes it.
//!
//! One self-contained HTML file (inline CSS and SVG, no script, no network):
//! the job, what the release achieves per requirement, the risk before and
//! after, the information kept, and the provenance. It shows published
//! labels and counts only: the input is read for counts ([`InputTally`]),
//! never for values.
//!
//! The crate follows the data: `tally` counts encoded tables, `data` turns
//! the counts into the serialisable `ReportData`,
//! `svg` draws charts and `html` lays out the page.

mod data;
mod html;
mod svg;
mod tally;

use std::path::Path;

use anyhow::{Context, Result};
use arrow::datatypes::Schema;
use kanon_engine::encode::QiTable;
use kanon_engine::metrics::risk::{encode_labels, risk_profile, RiskProfile};
use kanon_engine::release::Session;

pub use data::{risk_measures, Measure, Sources};
pub use tally::{InputTally, ReleaseTally};

use kanon_io::artefact::Artefact;
use kanon_io::config::JobFile;
use kanon_io::dataset::Dataset;
use kanon_io::exit::Failure;
use kanon_io::ops::{check_interrupt, Ui};
use kanon_io::storage::{Location, Storage};

/// The tally of a release encoded by its published labels (what the
/// verifier checked, [`ReleaseVerifier::into_table`](kanon_engine::verify::ReleaseVerifier::into_table)), and its risk profile
/// with the job's `[risk]` settings.
pub fn release_view(job: &JobFile, table: &QiTable) -> Result<(ReleaseTally, RiskProfile)> {
    let qis: Vec<_> = job.spec().quasi_identifiers().collect();
    let risk = risk_profile(table, None, &job.spec().risk.options(table.n_rows()))
        .context("cannot measure the release's risk (the job's [risk] settings)")?;
    Ok((
        tally::ReleaseTally::of(table, &qis, job.hierarchies()),
        risk,
    ))
}

/// Builds the report of `sources` and writes it to `path` in full (a
/// temporary file renamed into place), so a reader never sees half a
/// report. `flag` names the option that asked for it, for errors.
pub fn write(path: &Path, sources: &Sources, flag: &str) -> Result<Artefact> {
    let data = data::ReportData::build(sources);
    let page = html::render(&data);
    Artefact::write(path, page.as_bytes(), "the report", flag)
}

/// The release's `kanon.*` metadata (the provenance written into each
/// Parquet footer), sorted by key.
pub fn provenance_of(schema: &Schema) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = schema
        .metadata()
        .iter()
        .filter(|(k, _)| k.starts_with("kanon."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.sort();
    out
}

/// The job's input, encoded as pass 1 of `kanon anonymize` encodes it, and
/// counted; with its fingerprint.
pub fn read_input(
    job: &JobFile,
    storage: &Storage,
    input: &Location,
    ui: &Ui,
) -> Result<(InputTally, RiskProfile, Option<String>)> {
    let spec = job.spec();
    let dataset = Dataset::open(storage, input, &spec.input_spec())?;
    let mut session = Session::new(
        spec,
        job.hierarchies(),
        &dataset.schema,
        &format!("input {input}"),
    )?;
    let bar = ui.bar("report: input", dataset.rows);
    let mut scan = dataset.scan(storage, Some(dataset.projection(&session.columns())), true);
    for batch in scan.by_ref() {
        check_interrupt()?;
        let batch = batch?;
        session.push(&batch)?;
        bar.inc(batch.num_rows() as u64);
    }
    bar.finish_and_clear();
    // Compared with the release's, so computed as the release published it.
    let fingerprint = kanon_engine::algorithms::safepub::published_fingerprint(
        job.spec(),
        dataset.fingerprint(scan.csv_hash()),
    );
    drop(scan);
    let encoded = session.encode()?;
    let risk = input_risk(job, storage, encoded.table())?;
    Ok((InputTally::of(encoded.table()), risk, fingerprint))
}

/// The risk profile of the encoded input (its raw QI values), with the
/// job's `[risk]` settings; with `risk.population`, the population table is
/// read for journalist and marketer risk.
pub fn input_risk(job: &JobFile, storage: &Storage, table: &QiTable) -> Result<RiskProfile> {
    let active = table.n_rows() - table.excluded().len();
    let population = match job.population()? {
        Some(location) => Some(read_population(job, storage, &location).with_context(|| {
            format!("cannot read the population table {location} (risk.population)")
        })?),
        None => None,
    };
    risk_profile(table, population.as_ref(), &job.spec().risk.options(active))
        .context("cannot measure the input's risk (the job's [risk] settings)")
}

/// The QI columns of a population table, read as labels.
fn read_population(job: &JobFile, storage: &Storage, location: &Location) -> Result<QiTable> {
    let dataset = Dataset::open(storage, location, &job.spec().input_spec())?;
    let qis: Vec<String> = job
        .spec()
        .quasi_identifiers()
        .map(|a| a.name.clone())
        .collect();
    let mut batches = Vec::new();
    for batch in dataset.scan(storage, Some(dataset.projection(&qis)), false) {
        check_interrupt()?;
        batches.push(batch?);
    }
    let Some(schema) = batches.first().map(|b| b.schema()) else {
        return Err(Failure::bad_input("the population table has no rows").into());
    };
    Ok(encode_labels(job.spec(), &schema, &batches)?)
}
