//! The check of a release against its job, shared by `kanon verify`, the
//! publisher's read-back, `kanon sql --output` and a Delta table's history:
//! by the published labels ([`ReleaseCheck`]), and for δ-presence against
//! the population the release was drawn from ([`check_presence`]).

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use kanon_engine::encode::QiTable;
use kanon_engine::privacy::Privacy;
use kanon_engine::verify::ReleaseVerifier;
use kanon_engine::Error;

use crate::config::JobFile;
use crate::dataset::Dataset;
use crate::ops::{check_interrupt, Ui};
use crate::storage::{Location, Storage};

/// Recounts δ-presence: reads the population the release was drawn from
/// (`input`, the job's input, encoded as `kanon anonymize` encodes it) and matches
/// every population record to the published class whose labels cover its
/// values (`DeltaPresence::count_release`). Returns what the release
/// achieves, or why it fails.
///
/// # Errors
/// Read and encoding failures.
pub fn check_presence(
    job: &JobFile,
    presence: &kanon_engine::privacy::DeltaPresence,
    storage: &Storage,
    input: &Location,
    release: &QiTable,
    ui: &Ui,
) -> Result<std::result::Result<String, String>> {
    let dataset = Dataset::open(storage, input, &job.spec().input_spec())
        .with_context(|| format!("cannot read the population {input} to verify delta-presence"))?;
    let mut encoder =
        kanon_engine::encode::Encoder::try_new(job.spec(), job.hierarchies(), &dataset.schema)?;
    let columns = job.spec().encoded_columns();
    let bar = ui.bar("verify: population", dataset.rows);
    for batch in dataset.scan(storage, Some(dataset.projection(&columns)), false) {
        check_interrupt()?;
        let batch = batch?;
        encoder.push(&batch)?;
        bar.inc(batch.num_rows() as u64);
    }
    bar.finish_and_clear();
    let population = encoder.finish()?;
    let count = match presence.count_release(&population, release) {
        Ok(count) => count,
        Err(Error::VerificationFailed(problem)) => return Ok(Err(problem)),
        Err(e) => return Err(e.into()),
    };
    Ok(match presence.check(&count) {
        Some(problem) => Err(problem),
        None => Ok(format!(
            "{} ({} records of {input})",
            kanon_engine::privacy::DeltaPresence::achieved(&count),
            population.n_rows()
        )),
    })
}

/// What [`check`] found.
pub enum Checked {
    /// The release satisfies the job.
    Holds(kanon_engine::verify::Verified),
    /// It does not: why, by counts and column names.
    Fails(String),
}

/// Checks a release (read as `dataset`, named `label` in messages) against
/// the job by its published labels ([`ReleaseCheck`]).
///
/// # Errors
/// Read failures; a release whose columns do not fit the job.
pub fn check(
    job: &JobFile,
    privacy: &Privacy,
    storage: &Storage,
    dataset: &Dataset,
    label: &str,
    ui: &Ui,
) -> Result<Checked> {
    Ok(check_with_labels(job, privacy, storage, dataset, label, ui)?.0)
}

/// [`check`], with the release's labels encoded when it holds (what the
/// certificate's l per column is recomputed from).
///
/// # Errors
/// As [`check`].
pub fn check_with_labels(
    job: &JobFile,
    privacy: &Privacy,
    storage: &Storage,
    dataset: &Dataset,
    label: &str,
    ui: &Ui,
) -> Result<(Checked, Option<QiTable>)> {
    let mut release = ReleaseCheck::new(job, &dataset.schema, label)?;
    let bar = ui.bar("verify", dataset.rows);
    let projection = dataset.projection(release.columns());
    for batch in dataset.scan(storage, Some(projection), false) {
        check_interrupt()?;
        let batch = batch?;
        release.push(&batch)?;
        bar.inc(batch.num_rows() as u64);
    }
    bar.finish_and_clear();
    release.finish(privacy)
}

/// The check of a release against its job by the published labels, batch
/// by batch as the release streams by (read back from storage by
/// `kanon verify`, or a SQL query's result before `kanon sql` publishes
/// it): no identifying column, pseudonyms only in pseudonymised columns,
/// every privacy model on the classes the labels form.
pub struct ReleaseCheck {
    /// The QI, sensitive and pseudonymised columns the check reads.
    columns: Vec<String>,
    /// The pseudonymised columns of the release.
    pseudonymised: Vec<String>,
    verifier: Option<ReleaseVerifier>,
    /// When the job's unit is the person: the entity column and the person
    /// of every row pushed so far, by pseudonym.
    people: Option<People>,
    /// Why the release fails, once found.
    failed: Option<String>,
    label: String,
}

/// The people of a release, recounted from the pseudonyms of its entity
/// column (one per person within a release).
struct People {
    column: String,
    ids: rustc_hash::FxHashMap<String, u32>,
    of_row: Vec<u32>,
}

impl ReleaseCheck {
    /// Prepares the check of a release of `schema` (named `label` in
    /// messages).
    ///
    /// # Errors
    /// A release whose QI or sensitive columns are missing.
    pub fn new(job: &JobFile, schema: &arrow::datatypes::Schema, label: &str) -> Result<Self> {
        // Pseudonymised columns must hold pseudonyms only (64 hex digits):
        // anything else is a raw identifier published by mistake.
        let pseudonymised: Vec<String> = job
            .spec()
            .attributes
            .iter()
            .filter(|a| {
                a.role == kanon_engine::spec::Role::Pseudonymised
                    && schema.index_of(&a.name).is_ok()
            })
            .map(|a| a.name.clone())
            .collect();
        // A job whose unit is the person is recounted in people, from the
        // entity column's pseudonyms: a release without them cannot be.
        let people = job.spec().entity_column().map(|c| People {
            column: c.to_string(),
            ids: Default::default(),
            of_row: Vec::new(),
        });
        let missing_people = people
            .as_ref()
            .filter(|p| schema.index_of(&p.column).is_err())
            .map(|p| {
                format!(
                    "the job counts people by `{}`, which the release does not hold: its k in people cannot be recounted (publish the column's pseudonyms)",
                    p.column
                )
            });
        let mut columns: Vec<String> = job
            .spec()
            .quasi_identifiers()
            .chain(job.spec().sensitive())
            .map(|a| a.name.clone())
            .chain(pseudonymised.iter().cloned())
            // Top- and bottom-coded columns are checked for values beyond
            // their bounds, whatever their role.
            .chain(
                job.spec()
                    .attributes
                    .iter()
                    .filter(|a| {
                        (a.top_code.is_some() || a.bottom_code.is_some())
                            && schema.index_of(&a.name).is_ok()
                    })
                    .map(|a| a.name.clone()),
            )
            .collect();
        columns.sort_unstable();
        columns.dedup();
        // Direct identifiers must be gone: an identifying column (or, under
        // `[columns] unlisted = "identifying"`, any column the job does not
        // list) in the release is a violation, whatever the classes.
        let leaked = identifying_columns(job.spec(), schema);
        let failed = (!leaked.is_empty())
            .then(|| {
                format!(
                    "it holds identifying column(s) {}, which a release must drop",
                    leaked.join(", ")
                )
            })
            .or(missing_people);
        let verifier = match failed {
            Some(_) => None,
            None => Some(
                ReleaseVerifier::try_with_hierarchies(job.spec(), job.hierarchies(), schema)
                    .with_context(|| format!("cannot check release {label}"))?,
            ),
        };
        Ok(ReleaseCheck {
            columns,
            pseudonymised,
            verifier,
            people,
            failed,
            label: label.to_string(),
        })
    }

    /// The columns the check reads: push batches that hold them (others
    /// are ignored).
    pub(crate) fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Records a violation a check of a batch found (the release fails and
    /// the check stops reading); any other error stops the check. Returns
    /// whether the release failed.
    fn violated(&mut self, checked: kanon_engine::Result<()>) -> Result<bool> {
        match checked {
            Ok(()) => Ok(false),
            Err(Error::VerificationFailed(msg)) => {
                self.failed = Some(msg);
                self.verifier = None;
                Ok(true)
            }
            Err(e) => Err(e).with_context(|| format!("cannot check release {}", self.label)),
        }
    }

    /// Adds one batch of the release.
    ///
    /// # Errors
    /// A batch the check cannot read (a null QI label).
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        if self.failed.is_some() {
            return Ok(());
        }
        for i in 0..self.pseudonymised.len() {
            let name = &self.pseudonymised[i];
            let Some(array) = batch.column_by_name(name) else {
                continue;
            };
            let checked = kanon_engine::recode::check_pseudonymised(name, array.as_ref());
            if self.violated(checked)? {
                return Ok(());
            }
        }
        let pushed = match &mut self.verifier {
            Some(v) => v.push(batch),
            None => Ok(()),
        };
        if self.violated(pushed)? {
            return Ok(());
        }
        if let Some(p) = &mut self.people {
            let Some(array) = batch.column_by_name(&p.column) else {
                self.failed = Some(format!(
                    "a batch of the release lacks the entity column `{}`",
                    p.column
                ));
                return Ok(());
            };
            let text = arrow::compute::cast(array, &arrow::datatypes::DataType::Utf8)
                .with_context(|| format!("cannot check release {}", self.label))?;
            let text = text
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .expect("cast to Utf8");
            for v in text.iter() {
                // Nulls failed the pseudonym check above.
                let v = v.unwrap_or_default();
                let next = p.ids.len() as u32;
                let id = *p.ids.entry(v.to_string()).or_insert(next);
                p.of_row.push(id);
            }
        }
        Ok(())
    }

    /// What the check found, with the release's labels encoded when it
    /// holds (for the certificate's figures).
    ///
    /// # Errors
    /// A check that could not run.
    pub fn finish(self, privacy: &Privacy) -> Result<(Checked, Option<QiTable>)> {
        if let Some(msg) = self.failed {
            return Ok((Checked::Fails(msg), None));
        }
        let Some(verifier) = self.verifier else {
            return Err(anyhow::anyhow!(
                "cannot check release {}: the check stopped early (a bug in kanon)",
                self.label
            ));
        };
        let label = &self.label;
        let table = verifier
            .into_table()
            .with_context(|| format!("cannot check release {label}"))?;
        // By people: one row per person (their rows must carry one label
        // tuple), and every figure counts them.
        let (table, rows) = match &self.people {
            Some(p) => match kanon_engine::entity::people_of_release(&table, &p.of_row) {
                Ok(people) => (people, table.n_rows()),
                Err(Error::VerificationFailed(msg)) => return Ok((Checked::Fails(msg), None)),
                Err(e) => return Err(e).with_context(|| format!("cannot check release {label}")),
            },
            None => {
                let rows = table.n_rows();
                (table, rows)
            }
        };
        match kanon_engine::verify::verify_labels(&table, privacy).map(|mut v| {
            if self.people.is_some() {
                v.people = Some(v.published_rows);
                v.published_rows = rows;
            }
            v
        }) {
            Ok(v) => Ok((Checked::Holds(v), Some(table))),
            Err(Error::VerificationFailed(msg)) => Ok((
                Checked::Fails(format!("{}: {msg}", privacy.describe())),
                None,
            )),
            Err(e) => Err(e).with_context(|| format!("cannot check release {label}")),
        }
    }
}

/// The release's columns that are identifying for `spec` (by role, or as
/// unlisted columns under `[columns] unlisted = "identifying"`), each as
/// `` `name` ``: a release must have dropped them all.
pub fn identifying_columns(
    spec: &kanon_engine::spec::JobSpec,
    schema: &arrow::datatypes::Schema,
) -> Vec<String> {
    schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .filter(|n| {
            kanon_engine::columns::role_of(spec, n) == Some(kanon_engine::spec::Role::Identifying)
        })
        .map(|n| format!("`{n}`"))
        .collect()
}
