//! The engine's path from an encoded table to a verified release:
//! `algorithm -> partition -> verify -> metrics`, timed per phase. Every
//! front end (CLI, DataFusion plan node, library users) calls
//! [`anonymize`]; recoding of the original batches follows with
//! [`crate::recode::Recoder`].

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::algorithms::partitioned::{BlockExecutor, LocalBlocks};
use crate::algorithms::{self, Context};
use crate::cancel::Cancellation;
use crate::encode::{EquivalenceClasses, QiTable};
use crate::entity::Entities;
use crate::error::Result;
use crate::metrics::{self, Report, ReportOptions};
use crate::partition::Partition;
use crate::privacy::Privacy;
use crate::progress::{Progress, Silent};
use crate::spec::JobSpec;
use crate::verify::{check_structure, verify_partition, Verified};

/// Wall time of each phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Grouping into equivalence classes.
    pub classes: Duration,
    /// The algorithm.
    pub algorithm: Duration,
    /// Verification of the partition.
    pub verify: Duration,
    /// Metrics.
    pub metrics: Duration,
}

/// A verified anonymisation of a table.
#[derive(Debug, Clone)]
pub struct Anonymization {
    /// The algorithm that ran.
    pub algorithm: String,
    /// Its partition, verified against the privacy models.
    pub partition: Partition,
    /// What verification found.
    pub verified: Verified,
    /// Every metric of the release.
    pub report: Report,
    /// Algorithm-specific facts.
    pub details: serde_json::Value,
    /// Time per phase.
    pub timings: Timings,
}

/// Runs the job's algorithm on an encoded table, verifies the partition
/// (fail closed) and computes the metrics.
///
/// A job with anonymity requirements `<shield, k>` is verified against every
/// one of them by projection, whatever the algorithm. Algorithms that
/// understand a single k (all but `heuristic-min`) meet such a job through
/// [`Privacy`]'s stand-in: k-anonymity with the largest k on all QIs.
///
/// # Errors
/// [`crate::error::Error::Spec`] for a bad algorithm or parameters,
/// [`crate::error::Error::Unsatisfiable`] when the model cannot be met,
/// [`crate::error::Error::VerificationFailed`] when the algorithm's output violates
/// the model (a bug: nothing may be released).
pub fn anonymize(spec: &JobSpec, table: &QiTable) -> Result<Anonymization> {
    let privacy = Privacy::from_spec(spec)?;
    anonymize_with(spec, table, &privacy)
}

/// [`anonymize`] with explicit privacy models.
///
/// # Errors
/// As [`anonymize`].
pub fn anonymize_with(spec: &JobSpec, table: &QiTable, privacy: &Privacy) -> Result<Anonymization> {
    anonymize_cancellable(
        spec,
        table,
        privacy,
        Cancellation::never(),
        Silent::sink(),
        LocalBlocks::get(),
    )
}

/// [`anonymize_with`] under a cancellation token that every algorithm
/// checks in its inner loops, reporting how far it got to `progress`, the
/// blocks of a block-wise run clustered by `blocks` (on this machine:
/// [`LocalBlocks`]).
///
/// # Errors
/// As [`anonymize`], and [`crate::error::Error::Cancelled`] once `cancel` fires.
pub fn anonymize_cancellable(
    spec: &JobSpec,
    table: &QiTable,
    privacy: &Privacy,
    cancel: &Cancellation,
    progress: &dyn Progress,
    blocks: &dyn BlockExecutor,
) -> Result<Anonymization> {
    cancel.check()?;
    let algorithm = algorithms::by_name(spec)?;
    // An empty input would publish an empty release certified for nobody
    // (issue 32: `anonymize()` over a 0-row subquery): bad input, as the
    // command line says of an empty file.
    if table.n_rows() == 0 {
        return Err(crate::error::Error::spec(
            "input",
            "the input has no rows: there is nothing to anonymise, and an empty release would hide that the table or query selected nothing; check the input path or the query's filter",
        ));
    }
    // Models whose threshold depends on the sample (estimated k-map) are
    // bound to the rows anonymised here.
    let active = table.n_rows() - table.excluded().len();
    let privacy = &privacy.for_sample(active);
    // Fail before any work when no release can satisfy the models (too few
    // rows for k, too few distinct sensitive values for l, ...).
    privacy.check_feasible(table)?;
    let mut timings = Timings::default();
    let t = Instant::now();
    let classes = EquivalenceClasses::of(table);
    timings.classes = t.elapsed();
    let t = Instant::now();
    let run = |privacy: &Privacy| {
        algorithm.run(&Context {
            table,
            classes: &classes,
            privacy,
            spec,
            cancel,
            progress,
            blocks,
        })
    };
    let mut outcome = run(privacy)?;
    cancel.check()?;
    // A whole-release target the algorithm does not aim at (a mean risk,
    // a share of uniques) and missed: larger classes reach it, so search
    // for the smallest class size that does; when none does, the model is
    // out of reach (exit 3), not a bug in the algorithm.
    if let Err(missed) = privacy.check_reached(&outcome.partition) {
        let Some(upper) = privacy.reached_with_classes_of() else {
            return Err(missed);
        };
        let Some((size, runs, raised)) =
            raise_class_size(privacy, privacy.min_class_size(), upper.min(active), &run)?
        else {
            return Err(missed);
        };
        outcome = raised;
        let note = serde_json::json!({ "size": size, "runs": runs });
        match &mut outcome.details {
            serde_json::Value::Object(map) => {
                map.insert("raised_class_size".into(), note);
            }
            other => {
                *other =
                    serde_json::json!({ "algorithm": other.take(), "raised_class_size": note });
            }
        }
    }
    timings.algorithm = t.elapsed();
    // Only the algorithm reads the classes: free them (a class per row and
    // every class's rows) before verification and the metrics, which build
    // what they need.
    let distinct_rows_in = classes.len();
    drop(classes);
    // Verification and the metrics read the partition side by side; the
    // metrics are dropped if verification fails.
    let (verified, (report, metrics_time)) = rayon::join(
        || {
            let t = Instant::now();
            (
                verify_partition(table, &outcome.partition, privacy),
                t.elapsed(),
            )
        },
        || {
            let t = Instant::now();
            let report = metrics::report(
                table,
                &outcome.partition,
                ReportOptions {
                    k: privacy.class_min_size(),
                    distinct_rows_in: Some(distinct_rows_in),
                    ..Default::default()
                },
            );
            (report, t.elapsed())
        },
    );
    let (verified, verify_time) = verified;
    let verified = verified?;
    // Where the algorithm's classes may publish labels that differ from
    // their cells' (a microaggregated column's aggregates; a suppressed
    // cell's `*` beside a hierarchy root's `*`), the release's classes are
    // those of the labels, and its certificate states them (as `kanon
    // verify` recounts them).
    let mut report = report;
    let cells_suppressed =
        spec.algorithm.params.get("cell_suppression") == Some(&serde_json::Value::Bool(true));
    if cells_suppressed || spec.attributes.iter().any(|a| a.microaggregation.is_some()) {
        let labels = crate::recode::group_labels(spec, table, &outcome.partition);
        let members = metrics::classes_by_labels(&labels, &outcome.partition);
        metrics::set_class_figures(&mut report, table, &members, privacy.class_min_size());
    }
    if verified.published_rows == 0 && table.n_rows() > 0 {
        return Err(crate::error::Error::Unsatisfiable(format!(
            "{} would suppress all {} rows and publish an empty release; lower k or l, \
             or give the quasi-identifiers coarser generalisations",
            algorithm.name(),
            table.n_rows()
        )));
    }
    timings.verify = verify_time;
    timings.metrics = metrics_time;
    Ok(Anonymization {
        algorithm: algorithm.name().to_string(),
        partition: outcome.partition,
        verified,
        report,
        details: outcome.details,
        timings,
    })
}

/// Searches the smallest class size in `(failed, upper]` with which the
/// algorithm's release meets every whole-release part
/// ([`Privacy::check_reached`]), by bisection: `failed` missed, and classes
/// of `upper` rows meet the parts by the models' own bound
/// ([`crate::privacy::PrivacyModel::reached_with_classes_of`]), which the
/// search still checks. Returns the size, the number of runs and the
/// algorithm's outcome at that size. Bisection assumes that larger classes
/// do not raise the mean risk or the uniques; for a heuristic that is
/// usual rather than certain, so the size found meets the models but may
/// not be the least that would.
///
/// `None` when `upper` is no larger than `failed`, or misses too.
///
/// # Errors
/// The algorithm's errors (a probe that cannot run stops the search with
/// its own reason).
fn raise_class_size(
    privacy: &Privacy,
    failed: usize,
    upper: usize,
    run: &dyn Fn(&Privacy) -> Result<algorithms::Outcome>,
) -> Result<Option<(usize, usize, algorithms::Outcome)>> {
    if upper <= failed {
        return Ok(None);
    }
    let (mut lo, mut hi) = (failed, upper);
    let mut runs = 0;
    let mut best: Option<algorithms::Outcome> = None;
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        let outcome = run(&privacy.with_class_floor(mid))?;
        runs += 1;
        if privacy.check_reached(&outcome.partition).is_ok() {
            hi = mid;
            best = Some(outcome);
        } else {
            lo = mid;
        }
    }
    let outcome = match best {
        Some(outcome) => outcome,
        None => {
            let outcome = run(&privacy.with_class_floor(hi))?;
            runs += 1;
            if privacy.check_reached(&outcome.partition).is_err() {
                return Ok(None);
            }
            outcome
        }
    };
    Ok(Some((hi, runs, outcome)))
}

/// [`anonymize_cancellable`] with the person as the unit
/// ([`crate::entity`]): the algorithm runs on one row per person of
/// `entities`, its partition is verified there (k, l, the requirements and
/// the suppression limit count people), then spread over the rows, whose
/// cells are checked to cover every row's values. The report's figures are
/// those of the rows.
///
/// # Errors
/// As [`anonymize`]; [`crate::error::Error::Spec`] for a model that cannot count
/// people holding several values of a column.
pub fn anonymize_people(
    spec: &JobSpec,
    table: &QiTable,
    entities: &Entities,
    privacy: &Privacy,
    cancel: &Cancellation,
    progress: &dyn Progress,
    blocks: &dyn BlockExecutor,
) -> Result<Anonymization> {
    let people = entities.collapse(table, privacy)?;
    let mut anonymization =
        anonymize_cancellable(spec, &people.table, privacy, cancel, progress, blocks)?;
    let t = Instant::now();
    let partition = entities.expand(table, &people, &anonymization.partition);
    check_structure(table, &partition)?;
    anonymization.timings.verify += t.elapsed();
    // The loss of the rows as published; the classes, their sizes and
    // their diversity as people (what the job's k and l count).
    let t = Instant::now();
    let mut report = metrics::report(
        table,
        &partition,
        ReportOptions {
            k: privacy.class_min_size(),
            ..Default::default()
        },
    );
    // Counted as `kanon verify` recounts the release: people per published
    // label tuple. The people partition's own classes can differ: cells
    // widened over a person's rows, or distinct cells that render the
    // same labels, join classes the algorithm kept apart.
    let labels = crate::recode::group_labels(spec, table, &partition);
    let members = metrics::classes_by_labels(&labels, &anonymization.partition);
    metrics::set_class_figures(
        &mut report,
        &people.table,
        &members,
        privacy.class_min_size(),
    );
    anonymization.report = report;
    anonymization.timings.metrics += t.elapsed();
    let verified = &mut anonymization.verified;
    verified.people = Some(verified.published_rows);
    verified.published_rows = partition.n_rows() - partition.suppressed();
    verified.excluded_rows = table.excluded().len();
    verified.suppressed_rows = partition.suppressed() - verified.excluded_rows;
    let entity = serde_json::json!({
        "column": entities.column(),
        "people": entities.count(),
        "rows": table.n_rows(),
        "varying_quasi_identifiers": people
            .varying
            .iter()
            .map(|&q| table.columns()[q].name())
            .collect::<Vec<_>>(),
    });
    match &mut anonymization.details {
        serde_json::Value::Object(details) => {
            details.insert("entity".into(), entity);
        }
        other => *other = serde_json::json!({ "algorithm": other.take(), "entity": entity }),
    }
    anonymization.partition = partition;
    Ok(anonymization)
}
