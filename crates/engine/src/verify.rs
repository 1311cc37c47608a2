//! Verification: a release is checked against the job's privacy models
//! before anything is written (fail closed).
//!
//! [`verify_partition`] checks an algorithm's [`Partition`] against the
//! encoded table: every row is published or suppressed, every published cell
//! covers the row's true value, every published class (rows with identical
//! published tuples, across groups) satisfies every model, and suppression
//! stays within the limit, and every anonymity requirement `<shield, k>`
//! holds on the projection of the release on its shield.
//! [`verify_release`] checks released record batches by their labels alone,
//! as `kanon verify` does for a published file.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::codes::with_codes;
use crate::encode::{Encoder, EquivalenceClasses, QiTable};
use crate::error::{Error, Result};
use crate::generalise::Cell;
use crate::hierarchy::Hierarchy;
use crate::partition::{Partition, SUPPRESSED};
use crate::privacy::{Privacy, Requirement};
use crate::spec::{JobSpec, Kind};

/// What verification found for one anonymity requirement `<shield, k>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequirementCheck {
    /// The requirement, e.g. `<{age, sex}, 10>`.
    pub requirement: String,
    /// The k asked for.
    pub k: usize,
    /// The k achieved: the fewest published rows sharing one projected tuple
    /// (0 when nothing is published).
    pub achieved_k: usize,
    /// Distinct tuples of the release projected on the shield.
    pub projected_tuples: usize,
    /// Projected tuples with fewer than k rows (0 for a valid release).
    pub violating_tuples: usize,
}

/// A per-class model (l-diversity, t-closeness, ...) the release passed,
/// with what it achieves ([`PrivacyModel::achieved`]).
///
/// [`PrivacyModel::achieved`]: crate::privacy::PrivacyModel::achieved
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCheck {
    /// The model, e.g. `t-closeness (t = 0.2, equal distance) on `salary``.
    pub model: String,
    /// What the release achieves under it, when the model says.
    pub achieved: Option<String>,
}

/// What verification found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verified {
    /// Published classes (distinct published tuples).
    pub classes: usize,
    /// Size of the smallest published class (the k achieved); 0 when every
    /// row is suppressed.
    pub smallest_class: usize,
    /// Rows published.
    pub published_rows: usize,
    /// Rows suppressed by the algorithm.
    pub suppressed_rows: usize,
    /// Rows suppressed because of nulls in QIs.
    pub excluded_rows: usize,
    /// Every anonymity requirement with the k it achieved.
    pub requirements: Vec<RequirementCheck>,
    /// Every per-class model the release passed.
    pub models: Vec<ModelCheck>,
    /// People published, when the job's unit is the person
    /// (`privacy.entity`, [`crate::entity`]): `classes`, `smallest_class`,
    /// the requirements and the models then count people, while the `_rows`
    /// fields count rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub people: Option<usize>,
    /// Of the excluded rows, those of the population outside the research
    /// subset of a δ-presence job ([`crate::privacy::DeltaPresence`]):
    /// never published, counted in the population a class covers.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outside_rows: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Checks a partition against the privacy models.
///
/// # Errors
/// [`Error::VerificationFailed`] describing the violation by counts only.
pub fn verify_partition(
    table: &QiTable,
    partition: &Partition,
    privacy: &Privacy,
) -> Result<Verified> {
    check_structure(table, partition)?;
    let fail = |m: String| Err(Error::VerificationFailed(m));
    let groups = partition.group_of_row();
    // Published classes: groups with identical tuples are one class.
    let (class_of_group, n_classes) = partition.published_classes();
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); n_classes];
    for (r, &g) in groups.iter().enumerate() {
        if g != SUPPRESSED {
            members[class_of_group[g as usize] as usize].push(r as u32);
        }
    }
    members.retain(|m| !m.is_empty());
    let mut models = check_classes(table, members.iter().map(|m| m.as_slice()), privacy)?;
    // δ-presence, recounted from the published cells: every population
    // record is matched to the classes whose cells cover its values.
    if let Some(presence) = privacy.presence() {
        let (count, problem) = presence.check_partition(table, partition);
        if let Some(problem) = problem {
            return fail(problem);
        }
        models.push(ModelCheck {
            model: presence.describe(),
            achieved: Some(crate::privacy::DeltaPresence::achieved(&count)),
        });
    }
    let sizes = partition.group_sizes();
    let requirements = check_requirements(privacy, table.n_qi(), |columns| {
        let mut counts: FxHashMap<Vec<&Cell>, usize> = FxHashMap::default();
        for (g, &size) in sizes.iter().enumerate() {
            if size > 0 {
                let tuple = partition.tuple(g);
                *counts
                    .entry(columns.iter().map(|&q| &tuple[q]).collect())
                    .or_default() += size;
            }
        }
        counts.into_values().collect()
    })?;
    let suppressed = partition.suppressed() - table.excluded().len();
    let allowed = privacy.max_suppressed(table.rows_in_scope());
    if suppressed > allowed {
        return fail(format!(
            "{suppressed} rows suppressed but the suppression limit allows {allowed}"
        ));
    }
    Ok(Verified {
        classes: members.len(),
        smallest_class: members.iter().map(|m| m.len()).min().unwrap_or(0),
        published_rows: members.iter().map(|m| m.len()).sum(),
        suppressed_rows: suppressed,
        excluded_rows: table.excluded().len(),
        requirements,
        models,
        people: None,
        outside_rows: table.outside().len(),
    })
}

/// Checks a release known only by its classes' sizes: every class (its
/// published tuple as one code per QI, equal codes for equal labels;
/// tuples distinct) against the anonymity requirements, and the suppressed
/// rows against the suppression limit. What a coordinator that never sees
/// the rows checks (issue 35), exact for jobs whose models only count rows
/// ([`sizes_suffice`]).
///
/// # Errors
/// [`Error::Spec`] for a job with models that need more than sizes;
/// [`Error::VerificationFailed`] describing a violation by counts only.
pub fn verify_sizes(
    tuples: &[&[u32]],
    sizes: &[usize],
    suppressed: usize,
    excluded: usize,
    privacy: &Privacy,
) -> Result<Verified> {
    sizes_suffice(privacy)?;
    let n_qi = tuples.first().map_or(0, |t| t.len());
    let requirements = check_requirements(privacy, n_qi, |columns| {
        let mut counts: FxHashMap<Vec<u32>, usize> = FxHashMap::default();
        for (tuple, &size) in tuples.iter().zip(sizes) {
            *counts
                .entry(columns.iter().map(|&q| tuple[q]).collect())
                .or_default() += size;
        }
        counts.into_values().collect()
    })?;
    let published: usize = sizes.iter().sum();
    let allowed = privacy.max_suppressed(published + suppressed + excluded);
    if suppressed > allowed {
        return Err(Error::VerificationFailed(format!(
            "{suppressed} rows suppressed but the suppression limit allows {allowed}"
        )));
    }
    Ok(Verified {
        classes: tuples.len(),
        smallest_class: sizes.iter().copied().min().unwrap_or(0),
        published_rows: published,
        suppressed_rows: suppressed,
        excluded_rows: excluded,
        requirements,
        models: Vec::new(),
        people: None,
        outside_rows: 0,
    })
}

/// Whether the job's models are met exactly when its classes are large
/// enough ([`verify_sizes`]): anonymity requirements and a suppression
/// limit, no per-class model (l-diversity, t-closeness, risk), no
/// δ-presence.
///
/// # Errors
/// [`Error::Spec`] naming the first model sizes cannot check.
pub fn sizes_suffice(privacy: &Privacy) -> Result<()> {
    let model = privacy
        .class_models()
        .first()
        .map(|m| m.describe())
        .or_else(|| privacy.presence().map(|p| p.describe()));
    match model {
        None => Ok(()),
        Some(m) => Err(Error::spec(
            "privacy",
            format!("{m} needs the values of every class, which a run from counts does not hold; only anonymity requirements (k, privacy.requirements) and a suppression limit are checked from counts"),
        )),
    }
}

/// [`verify_partition`] of a table of counted tuples
/// ([`QiTable::with_weights`]): the structure and truthfulness of the
/// partition over the table's rows, then [`verify_sizes`] with every
/// class's size the sum of its rows' weights.
///
/// # Errors
/// As [`verify_sizes`] and [`verify_partition`].
pub fn verify_counted(
    table: &QiTable,
    partition: &Partition,
    privacy: &Privacy,
) -> Result<Verified> {
    check_structure(table, partition)?;
    let (class_of_group, n_classes) = partition.published_classes();
    let mut sizes = vec![0usize; n_classes];
    let mut first_group = vec![usize::MAX; n_classes];
    let mut suppressed = 0usize;
    for (r, &g) in partition.group_of_row().iter().enumerate() {
        if g == SUPPRESSED {
            suppressed += table.weight(r as u32);
            continue;
        }
        let c = class_of_group[g as usize] as usize;
        sizes[c] += table.weight(r as u32);
        first_group[c] = first_group[c].min(g as usize);
    }
    // Published tuples as codes: equal cells, equal codes.
    let mut code_of: Vec<FxHashMap<&Cell, u32>> = vec![FxHashMap::default(); table.n_qi()];
    let mut tuples: Vec<Vec<u32>> = Vec::new();
    let mut kept = Vec::new();
    for (c, &g) in first_group.iter().enumerate() {
        if g == usize::MAX {
            continue;
        }
        tuples.push(
            partition
                .tuple(g)
                .iter()
                .zip(&mut code_of)
                .map(|(cell, codes)| {
                    let next = codes.len() as u32;
                    *codes.entry(cell).or_insert(next)
                })
                .collect(),
        );
        kept.push(sizes[c]);
    }
    // The partition suppresses the excluded rows it holds; they are
    // counted as excluded, not as suppressed by the algorithm.
    let held_excluded: usize = table.excluded().iter().map(|&r| table.weight(r)).sum();
    let tuples: Vec<&[u32]> = tuples.iter().map(Vec::as_slice).collect();
    verify_sizes(
        &tuples,
        &kept,
        suppressed - held_excluded,
        table.excluded_rows(),
        privacy,
    )
}

/// The part of [`verify_partition`] that needs no model: the partition
/// covers the table's rows, publishes no excluded row, points to existing
/// groups, and every published cell covers its row's value.
///
/// # Errors
/// [`Error::VerificationFailed`] describing the fault by counts only.
pub(crate) fn check_structure(table: &QiTable, partition: &Partition) -> Result<()> {
    let fail = |m: String| Err(Error::VerificationFailed(m));
    if partition.n_rows() != table.n_rows() {
        return fail(format!(
            "the partition covers {} rows but the input has {}",
            partition.n_rows(),
            table.n_rows()
        ));
    }
    let groups = partition.group_of_row();
    let unsuppressed_excluded = table
        .excluded()
        .iter()
        .filter(|&&r| groups[r as usize] != SUPPRESSED)
        .count();
    if unsuppressed_excluded > 0 {
        return fail(format!(
            "{unsuppressed_excluded} rows with null QIs were published"
        ));
    }
    let n_groups = partition.n_groups();
    if let Some(bad) = groups
        .iter()
        .find(|&&g| g != SUPPRESSED && g as usize >= n_groups)
    {
        return fail(format!("a row points to group {bad} of {n_groups}"));
    }
    // Truthfulness: every published cell covers the row's value (the
    // columns on every core).
    let untrue: Vec<usize> = table
        .columns()
        .par_iter()
        .enumerate()
        .map(|(q, col)| {
            with_codes!(col.codes(), |codes| groups
                .iter()
                .zip(codes)
                .filter(|(&g, &c)| {
                    g != SUPPRESSED && !col.covers(&partition.tuple(g as usize)[q], c.into())
                })
                .count())
        })
        .collect();
    for (col, &untrue) in table.columns().iter().zip(&untrue) {
        if untrue > 0 {
            return fail(format!(
                "{untrue} published cells of `{}` do not cover the row's value",
                col.name()
            ));
        }
    }
    Ok(())
}

/// Checks every requirement on the projection of a release. `projected`
/// returns the number of published rows of every distinct tuple projected on
/// the given QI columns.
fn check_requirements(
    privacy: &Privacy,
    n_qi: usize,
    mut projected: impl FnMut(&[usize]) -> Vec<usize>,
) -> Result<Vec<RequirementCheck>> {
    let checks: Vec<RequirementCheck> = privacy
        .requirements()
        .iter()
        .map(|r: &Requirement| {
            let counts = projected(&r.columns(n_qi));
            RequirementCheck {
                requirement: r.describe(),
                k: r.k(),
                achieved_k: counts.iter().copied().min().unwrap_or(0),
                projected_tuples: counts.len(),
                violating_tuples: counts.iter().filter(|&&c| c < r.k()).count(),
            }
        })
        .collect();
    let problems: Vec<String> = checks
        .iter()
        .filter(|c| c.violating_tuples > 0)
        .map(|c| {
            format!(
                "{} of {} projected tuples violate {} (fewest rows {})",
                c.violating_tuples, c.projected_tuples, c.requirement, c.achieved_k
            )
        })
        .collect();
    if problems.is_empty() {
        Ok(checks)
    } else {
        Err(Error::VerificationFailed(problems.join("; ")))
    }
}

/// Asks every model about the whole release ([`PrivacyModel::check_release`]):
/// per-class models check each class, models with a table-level part (the
/// mean risk of a risk threshold, the reference distribution of
/// t-closeness) check it over all published classes.
///
/// [`PrivacyModel::check_release`]: crate::privacy::PrivacyModel::check_release
fn check_classes<'a>(
    table: &QiTable,
    classes: impl Iterator<Item = &'a [u32]>,
    privacy: &Privacy,
) -> Result<Vec<ModelCheck>> {
    let classes: Vec<&[u32]> = classes.collect();
    let problems: Vec<String> = privacy
        .class_models()
        .iter()
        .filter_map(|m| m.check_release(table, &classes))
        .collect();
    if !problems.is_empty() {
        return Err(Error::VerificationFailed(problems.join("; ")));
    }
    Ok(privacy
        .class_models()
        .iter()
        .map(|m| ModelCheck {
            model: m.describe(),
            achieved: m.achieved(table, &classes),
        })
        .collect())
}

/// Checks released batches by their published labels: rows with identical
/// QI labels form a class, every class must satisfy every model, and the
/// labels projected on every requirement's shield must occur at least k
/// times.
///
/// The QI and sensitive columns are found by the names in `spec`. A front
/// end that streams the release uses [`ReleaseVerifier`] instead.
///
/// # Errors
/// [`Error::Data`] when a column is missing; [`Error::VerificationFailed`]
/// when a class violates a model.
pub fn verify_release(
    spec: &JobSpec,
    batches: &[RecordBatch],
    privacy: &Privacy,
) -> Result<Verified> {
    let Some(first) = batches.first() else {
        return Ok(Verified {
            classes: 0,
            smallest_class: 0,
            published_rows: 0,
            suppressed_rows: 0,
            excluded_rows: 0,
            requirements: check_requirements(privacy, 0, |_| Vec::new())?,
            models: Vec::new(),
            people: None,
            outside_rows: 0,
        });
    };
    let mut verifier = ReleaseVerifier::try_new(spec, first.schema().as_ref())?;
    for b in batches {
        verifier.push(b)?;
    }
    verifier.finish(privacy)
}

/// [`verify_release`] for a release that streams by: push every released
/// batch before it is committed, then [`ReleaseVerifier::finish`]. Only the
/// QI and sensitive columns are kept (as codes of their labels), so memory
/// is the working set of the check, not the release.
#[derive(Debug)]
pub struct ReleaseVerifier {
    encoder: Encoder,
    /// What the release's labels cannot say: whether each sensitive
    /// column's values are numbers (as in the input: its `type`, or its
    /// data type), which orders them for ordered-distance t-closeness.
    numeric: Vec<bool>,
    /// The job's top- and bottom-coded columns: a release showing a value
    /// beyond a bound fails ([`crate::coding::check_published`]).
    coded: Vec<crate::coding::Coded>,
}

impl ReleaseVerifier {
    /// Prepares the check of a release of `schema` (or of projections of it
    /// that keep the QI and sensitive columns).
    ///
    /// Without the hierarchies of the sensitive attributes, a
    /// hierarchical-distance t-closeness model rejects the release (fail
    /// closed); use [`ReleaseVerifier::try_with_hierarchies`] for such jobs.
    ///
    /// # Errors
    /// [`Error::Data`] when a QI or sensitive column is missing.
    pub fn try_new(spec: &JobSpec, schema: &arrow::datatypes::Schema) -> Result<Self> {
        Self::try_with_hierarchies(spec, &FxHashMap::default(), schema)
    }

    /// [`ReleaseVerifier::try_new`] with the parsed hierarchies of the job
    /// by path ([`crate::job::Job::hierarchies`]): those of the sensitive
    /// attributes give hierarchical-distance t-closeness its ground
    /// distance (the quasi-identifiers are read as labels whatever is
    /// given).
    ///
    /// # Errors
    /// As [`ReleaseVerifier::try_new`].
    pub fn try_with_hierarchies(
        spec: &JobSpec,
        hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
        schema: &arrow::datatypes::Schema,
    ) -> Result<Self> {
        // The labels-only job names no QI hierarchy: only the sensitive
        // attributes' are looked up (and attached when given).
        let encoder = Encoder::try_new(&spec.labels_only(), hierarchies, schema)?;
        let numeric = spec
            .sensitive()
            .map(|a| match a.kind {
                Some(kind) => kind == Kind::Numeric,
                None => schema
                    .field_with_name(&a.name)
                    .is_ok_and(|f| match f.data_type() {
                        DataType::Dictionary(_, v) => v.is_numeric(),
                        other => other.is_numeric(),
                    }),
            })
            .collect();
        Ok(ReleaseVerifier {
            encoder,
            numeric,
            coded: crate::coding::Coded::of(&spec.attributes),
        })
    }

    /// Adds one released batch.
    ///
    /// # Errors
    /// [`Error::Data`] for a null QI label (a release never has one);
    /// [`Error::VerificationFailed`] for a coded column showing a value
    /// beyond its bounds.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        for coded in &self.coded {
            // A projection without the column (an insensitive one) leaves
            // it to whoever reads it.
            if let Some(array) = batch.column_by_name(&coded.name) {
                crate::coding::check_published(coded, array)?;
            }
        }
        self.encoder.push(batch)
    }

    /// The columns besides the quasi-identifiers and sensitive ones that
    /// the check reads when a batch holds them: the coded columns.
    pub fn coded_columns(&self) -> impl Iterator<Item = &str> {
        self.coded.iter().map(|c| c.name.as_str())
    }

    /// Checks every published class against the models.
    ///
    /// # Errors
    /// [`Error::VerificationFailed`] when a class violates a model.
    pub fn finish(self, privacy: &Privacy) -> Result<Verified> {
        verify_labels(&self.into_table()?, privacy)
    }

    /// The release's labels as pushed, encoded: what [`verify_labels`]
    /// checks, and what a front end that also reports on the release (its
    /// risk, its labels) reads instead of encoding the release again.
    ///
    /// # Errors
    /// As [`Encoder::finish`].
    pub fn into_table(self) -> Result<QiTable> {
        let mut table: QiTable = self.encoder.finish()?;
        for (column, &numeric) in table.sensitive.iter_mut().zip(&self.numeric) {
            if numeric {
                column.order_labels_as_numbers();
            }
        }
        Ok(table)
    }
}

/// Whether two releases encoded by their labels form the same classes
/// (the same QI label tuples with the same numbers of rows), whatever
/// their row order and codes.
pub(crate) fn same_classes(a: &QiTable, b: &QiTable) -> bool {
    fn sizes(t: &QiTable) -> FxHashMap<Vec<&str>, usize> {
        let classes = EquivalenceClasses::of(t);
        (0..classes.len())
            .map(|c| {
                let tuple = classes.tuple(c);
                let labels = t
                    .columns()
                    .iter()
                    .zip(tuple)
                    .map(|(col, &code)| col.label(code))
                    .collect();
                (labels, classes.size(c))
            })
            .collect()
    }
    a.n_rows() == b.n_rows() && a.n_qi() == b.n_qi() && sizes(a) == sizes(b)
}

/// Checks a release encoded by its labels ([`ReleaseVerifier::into_table`]):
/// every published class against the models, every requirement on its
/// projection.
///
/// # Errors
/// [`Error::VerificationFailed`] when a class violates a model.
pub fn verify_labels(table: &QiTable, privacy: &Privacy) -> Result<Verified> {
    let classes = EquivalenceClasses::of(table);
    let models = check_classes(table, (0..classes.len()).map(|c| classes.rows(c)), privacy)?;
    let requirements = check_requirements(privacy, table.n_qi(), |columns| {
        let mut counts: FxHashMap<Vec<u32>, usize> = FxHashMap::default();
        for c in 0..classes.len() {
            let tuple = classes.tuple(c);
            *counts
                .entry(columns.iter().map(|&q| tuple[q]).collect())
                .or_default() += classes.size(c);
        }
        counts.into_values().collect()
    })?;
    Ok(Verified {
        classes: classes.len(),
        smallest_class: (0..classes.len())
            .map(|c| classes.size(c))
            .min()
            .unwrap_or(0),
        published_rows: table.n_rows(),
        suppressed_rows: 0,
        excluded_rows: 0,
        requirements,
        models,
        people: None,
        outside_rows: 0,
    })
}

#[cfg(test)]
mod tests {
    use arrow::array::{ArrayRef, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    fn release(sex: &[&str], age: &[&str]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("sex", DataType::Utf8, false),
            Field::new("age", DataType::Utf8, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(sex.to_vec())) as ArrayRef,
                Arc::new(StringArray::from(age.to_vec())) as ArrayRef,
            ],
        )
        .unwrap()
    }

    #[test]
    fn streaming_verifier_sees_classes_across_batches() {
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "sex", "role": "qi"}, {"name": "age", "role": "qi", "intervals": [10]}]}"#,
        )
        .unwrap();
        let privacy = Privacy::k_anonymity(2);
        // Each batch alone has classes of size 1; together every class has 2.
        let a = release(&["M", "F"], &["[30-40[", "[20-30["]);
        let b = release(&["F", "M"], &["[20-30[", "[30-40["]);
        let mut v = ReleaseVerifier::try_new(&spec, &a.schema()).unwrap();
        v.push(&a).unwrap();
        v.push(&b).unwrap();
        let ok = v.finish(&privacy).unwrap();
        assert_eq!(
            (ok.classes, ok.smallest_class, ok.published_rows),
            (2, 2, 4)
        );
        assert_eq!(
            verify_release(&spec, &[a.clone(), b], &privacy).unwrap(),
            ok
        );
        let mut v = ReleaseVerifier::try_new(&spec, &a.schema()).unwrap();
        v.push(&a).unwrap();
        let err = v.finish(&privacy).unwrap_err();
        assert!(matches!(err, Error::VerificationFailed(_)), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("violate") && msg.contains("k = 2"), "{msg}");
    }
}
