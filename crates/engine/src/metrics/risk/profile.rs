//! [`RiskProfile`]: every re-identification risk measure of a table in one
//! serialisable value, for the front ends to print (`kanon inspect`,
//! `kanon_risk()`, the metrics JSON, reports). ARX gathers the same figures
//! in its `RiskEstimateBuilder`.
//!
//! A sample is matched to its population by the labels of the QIs, so the
//! two tables may come from different encoders.

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use rustc_hash::FxHashMap;
use serde::Serialize;

use super::msu::{minimal_sample_uniques, MsuReport};
use super::sample::{
    class_size_histogram, journalist_risk, marketer_risk, prosecutor_risk, risk_bands,
    sample_uniques, AttackerRisk, ClassSizeCount, RiskBand, SampleUniques, QI_COLUMNS,
};
use crate::encode::{Encoder, EquivalenceClasses, QiTable};
use crate::error::{Error, Result};
use crate::population::{population_uniqueness, PopulationUniqueness};
use crate::spec::{JobSpec, Role};

/// Options of a [`RiskProfile`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RiskOptions {
    /// Records whose risk is strictly above this count as at risk (ARX's
    /// default highlights 0.2; `1/k` asks "which records break k").
    pub threshold: f64,
    /// Records of the population the sample was drawn from, `N`, for the
    /// population-uniqueness estimates; `None` takes the population table's
    /// records when one is given, and skips the estimates otherwise.
    pub population_size: Option<u64>,
    /// Largest QI set searched for minimal sample uniques; 0 skips the
    /// search (it costs a pass over the table per QI set: front ends skip
    /// it on large tables unless asked).
    pub max_msu_size: usize,
    /// Combinations listed in [`MsuReport::top_combinations`].
    pub top_combinations: usize,
}

impl Default for RiskOptions {
    fn default() -> Self {
        RiskOptions {
            threshold: 0.2,
            population_size: None,
            max_msu_size: 3,
            top_combinations: 10,
        }
    }
}

/// The re-identification risk of a table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RiskProfile {
    /// Records assessed (rows not excluded by a null policy), `n`.
    pub records: usize,
    /// Rows left out because a QI is null (under `nulls = "suppress"`).
    pub excluded_records: usize,
    /// Classes (distinct QI tuples), `J`.
    pub classes: usize,
    /// Prosecutor risk: record risk `1/f_j`.
    pub prosecutor: AttackerRisk,
    /// Journalist risk, record risk `1/F_j`, when a population table is
    /// given.
    pub journalist: Option<AttackerRisk>,
    /// Marketer risk: `(1/n) Σ f_j/F_j` with a population table, else `J/n`.
    pub marketer: f64,
    /// Records alone in their class.
    pub sample_uniques: SampleUniques,
    /// Classes per class size, ascending.
    pub class_sizes: Vec<ClassSizeCount>,
    /// Records per prosecutor risk band, highest risk first.
    pub risk_bands: Vec<RiskBand>,
    /// Population-uniqueness estimates, when a population size is known and
    /// the table has records.
    pub population_uniqueness: Option<PopulationUniqueness>,
    /// Minimal sample uniques: the QI combinations that single records out
    /// (`None` when [`RiskOptions::max_msu_size`] is 0).
    pub msus: Option<MsuReport>,
}

/// The risk profile of `sample`, judged by its QI codes (encode labels with
/// [`encode_labels`] to judge a release by what it shows).
///
/// With a `population` table (the same QIs, by name), the journalist and
/// marketer risks use the size of each sample class in the population
/// ([`population_class_sizes`]).
///
/// # Errors
/// [`Error::Spec`] for a threshold outside `[0, 1]`, a maximum MSU size of
/// 0 or too large, or a population smaller than the sample;
/// [`Error::Data`] when the population lacks a QI or sample classes
/// (by count, never by value).
pub fn risk_profile(
    sample: &QiTable,
    population: Option<&QiTable>,
    options: &RiskOptions,
) -> Result<RiskProfile> {
    check_threshold(options)?;
    let classes = EquivalenceClasses::of(sample);
    let sizes: Vec<usize> = (0..classes.len()).map(|c| classes.size(c)).collect();
    let pop_sizes = population
        .map(|p| population_class_sizes(sample, p))
        .transpose()?;
    let big_n = options
        .population_size
        .or_else(|| population.map(|p| (p.n_rows() - p.excluded().len()) as u64));
    let mut profile = profile_of(
        &sizes,
        sample.excluded().len(),
        pop_sizes.as_deref(),
        big_n,
        options.threshold,
    )?;
    profile.msus = match options.max_msu_size {
        0 => None,
        max => Some(minimal_sample_uniques(
            sample,
            max,
            options.top_combinations,
        )?),
    };
    Ok(profile)
}

/// [`risk_profile`] from the sizes of the classes alone (the records of
/// each distinct QI tuple), as workers that count a table's tuples report
/// them: every measure but the minimal sample uniques (`msus` is `None`:
/// they need the tuples' values). With `population`, the size of each
/// class in the population table (as [`population_class_sizes`]) and the
/// population's records, for the journalist and marketer risks.
///
/// # Errors
/// As [`risk_profile`].
pub fn risk_profile_of_sizes(
    sizes: &[usize],
    excluded_records: usize,
    population: Option<(&[u64], u64)>,
    options: &RiskOptions,
) -> Result<RiskProfile> {
    check_threshold(options)?;
    profile_of(
        sizes,
        excluded_records,
        population.map(|p| p.0),
        options.population_size.or(population.map(|p| p.1)),
        options.threshold,
    )
}

/// [`Error::Spec`] for a risk threshold outside `[0, 1]`.
fn check_threshold(options: &RiskOptions) -> Result<()> {
    if !(0.0..=1.0).contains(&options.threshold) {
        return Err(Error::spec(
            "threshold",
            format!("must be between 0 and 1, not {}", options.threshold),
        ));
    }
    Ok(())
}

/// The profile of classes of `sizes`, without minimal sample uniques.
fn profile_of(
    sizes: &[usize],
    excluded_records: usize,
    pop_sizes: Option<&[u64]>,
    big_n: Option<u64>,
    threshold: f64,
) -> Result<RiskProfile> {
    let records: usize = sizes.iter().sum();
    let journalist = pop_sizes
        .map(|p| journalist_risk(sizes, p, threshold))
        .transpose()?;
    let marketer = marketer_risk(sizes, pop_sizes)?;
    let histogram = class_size_histogram(sizes);
    let population_uniqueness = match big_n {
        Some(big_n) if records > 0 => Some(population_uniqueness(
            &histogram
                .iter()
                .map(|b| (b.size, b.classes))
                .collect::<Vec<_>>(),
            big_n,
        )?),
        _ => None,
    };
    Ok(RiskProfile {
        records,
        excluded_records,
        classes: sizes.len(),
        prosecutor: prosecutor_risk(sizes, threshold),
        journalist,
        marketer,
        sample_uniques: sample_uniques(sizes),
        class_sizes: histogram,
        risk_bands: risk_bands(sizes),
        population_uniqueness,
        msus: None,
    })
}

/// [`risk_profile`] of record batches: the QIs of `spec` are read as labels
/// ([`encode_labels`]) in the sample and, when given, in the population.
///
/// # Errors
/// As [`encode_labels`] and [`risk_profile`].
pub fn risk_profile_of_batches(
    spec: &JobSpec,
    schema: &Schema,
    batches: &[RecordBatch],
    population: Option<(&Schema, &[RecordBatch])>,
    options: &RiskOptions,
) -> Result<RiskProfile> {
    let sample = encode_labels(spec, schema, batches)?;
    let population = population
        .map(|(s, b)| encode_labels(spec, s, b))
        .transpose()?;
    risk_profile(&sample, population.as_ref(), options)
}

/// Encodes the QIs of `spec` in `batches` as plain labels (no hierarchy,
/// intervals or masking; the spec's null policies apply), so classes are
/// rows with equal shown values: the view of a reader of the table.
/// Columns other than the QIs are not read.
///
/// # Errors
/// [`Error::Data`] when a QI column is missing, has a type kanon cannot
/// read, or holds nulls under `nulls = "error"`.
pub fn encode_labels(spec: &JobSpec, schema: &Schema, batches: &[RecordBatch]) -> Result<QiTable> {
    let mut labels = spec.labels_only();
    labels
        .attributes
        .retain(|a| a.role == Role::QuasiIdentifier);
    // Sensitive settings name columns the QI-only view does not hold.
    labels.privacy = Default::default();
    labels.privacy.k = spec.privacy.k;
    let mut enc = Encoder::try_new(&labels, &FxHashMap::default(), schema)?;
    for b in batches {
        enc.push(b)?;
    }
    enc.finish()
}

/// The size `F_j` of the population class of every sample class `j`
/// (in the order of [`EquivalenceClasses::of`] on `sample`), matching QI
/// columns by name and codes by label, so the tables may have been encoded
/// separately.
///
/// # Errors
/// [`Error::Data`] when the population lacks a QI column of the sample, or
/// when sample classes do not occur in the population (the sample must be
/// drawn from it), by count.
pub fn population_class_sizes(sample: &QiTable, population: &QiTable) -> Result<Vec<u64>> {
    // Per sample QI: its population column and the population code of each
    // sample code (None: a label the population lacks).
    let mut matched = Vec::with_capacity(sample.n_qi());
    for col in sample.columns() {
        let Some(pop) = population.columns().iter().find(|c| c.name() == col.name()) else {
            return Err(Error::data(
                col.name(),
                "the population table has no such column; give it every QI of the sample",
            ));
        };
        let by_label: FxHashMap<&str, u32> = (0..pop.domain_size() as u32)
            .map(|c| (pop.label(c), c))
            .collect();
        let translate: Vec<Option<u32>> = (0..col.domain_size() as u32)
            .map(|c| by_label.get(col.label(c)).copied())
            .collect();
        matched.push((pop, translate));
    }
    let mut counts: FxHashMap<Vec<u32>, u64> = FxHashMap::default();
    for r in population.active_rows() {
        let key: Vec<u32> = matched
            .iter()
            .map(|(pop, _)| pop.codes().get(r as usize))
            .collect();
        *counts.entry(key).or_insert(0) += 1;
    }
    let classes = EquivalenceClasses::of(sample);
    let mut missing = (0usize, 0usize);
    let sizes: Vec<u64> = (0..classes.len())
        .map(|c| {
            let key: Option<Vec<u32>> = classes
                .tuple(c)
                .iter()
                .zip(&matched)
                .map(|(&code, (_, translate))| translate[code as usize])
                .collect();
            match key.and_then(|k| counts.get(&k).copied()) {
                Some(size) => size,
                None => {
                    missing.0 += 1;
                    missing.1 += classes.size(c);
                    0
                }
            }
        })
        .collect();
    if missing.0 > 0 {
        return Err(Error::data(
            QI_COLUMNS,
            format!(
                "{} sample classes ({} records) do not occur in the population; the sample must be drawn from the population",
                missing.0, missing.1
            ),
        ));
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{ArrayRef, StringArray};
    use arrow::datatypes::{DataType, Field};

    fn spec() -> JobSpec {
        serde_json::from_str(
            r#"{"privacy": {"k": 2}, "attributes": [
                {"name": "age", "role": "qi"}, {"name": "zip", "role": "qi"},
                {"name": "disease", "role": "sensitive"}]}"#,
        )
        .unwrap()
    }

    fn batch(columns: &[(&str, Vec<&str>)]) -> (Arc<Schema>, RecordBatch) {
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .map(|(n, _)| Field::new(*n, DataType::Utf8, false))
                .collect::<Vec<_>>(),
        ));
        let arrays: Vec<ArrayRef> = columns
            .iter()
            .map(|(_, v)| Arc::new(StringArray::from(v.clone())) as ArrayRef)
            .collect();
        (
            schema.clone(),
            RecordBatch::try_new(schema, arrays).unwrap(),
        )
    }

    /// A sample and its population. Sample classes: (30,a) x1, (30,b) x2,
    /// (40,a) x3: n = 6, J = 3. Population (no sensitive column, other
    /// column order, extra class): (30,a) x2, (30,b) x2, (40,a) x6,
    /// (50,c) x2 = 12 records.
    fn sample_and_population() -> ((Arc<Schema>, RecordBatch), (Arc<Schema>, RecordBatch)) {
        let sample = batch(&[
            ("age", vec!["30", "30", "30", "40", "40", "40"]),
            ("zip", vec!["a", "b", "b", "a", "a", "a"]),
            ("disease", vec!["x", "y", "x", "x", "y", "y"]),
        ]);
        let mut age = vec!["30"; 4];
        age.extend(["40"; 6]);
        age.extend(["50"; 2]);
        let zip = vec!["a", "a", "b", "b", "a", "a", "a", "a", "a", "a", "c", "c"];
        (sample, batch(&[("zip", zip), ("age", age)]))
    }

    #[test]
    fn profile_of_a_sample_and_its_population_by_hand() {
        let ((s_schema, s), (p_schema, p)) = sample_and_population();
        let options = RiskOptions {
            threshold: 0.3,
            ..Default::default()
        };
        let r = risk_profile_of_batches(
            &spec(),
            &s_schema,
            std::slice::from_ref(&s),
            Some((&p_schema, std::slice::from_ref(&p))),
            &options,
        )
        .unwrap();
        assert_eq!((r.records, r.classes, r.excluded_records), (6, 3, 0));
        // Prosecutor: risks 1, 1/2, 1/3; mean 3/6; above 0.3: all 6.
        assert_eq!(r.prosecutor.highest, 1.0);
        assert_eq!(r.prosecutor.average, 0.5);
        assert_eq!(r.prosecutor.records_above_threshold, 6);
        // Journalist: F = 2, 2, 6: risks 1/2, 1/2, 1/6; above 0.3: 3 records.
        let j = r.journalist.as_ref().unwrap();
        assert_eq!(j.highest, 0.5);
        assert_eq!(j.records_above_threshold, 3);
        // Marketer = (1/2 + 2/2 + 3/6) / 6 = 2/6.
        assert!((r.marketer - 2.0 / 6.0).abs() < 1e-15);
        assert!((j.average - r.marketer).abs() < 1e-15);
        assert_eq!(r.sample_uniques.records, 1);
        let sizes: Vec<(usize, usize)> =
            r.class_sizes.iter().map(|c| (c.size, c.classes)).collect();
        assert_eq!(sizes, [(1, 1), (2, 1), (3, 1)]);
        // N = 12 from the population table; pi = 1/2.
        let u = r.population_uniqueness.as_ref().unwrap();
        assert_eq!((u.population_size, u.sample_size), (12, 6));
        // MSUs: age 30/40 and zip a/b are all shared; (30, a) is unique.
        assert_eq!(r.msus.as_ref().unwrap().by_size, [0, 1]);
        let json = serde_json::to_string(&r).unwrap();
        for value in ["\"30\"", "\"40\"", "\"a\"", "\"b\"", "\"x\""] {
            assert!(!json.contains(value), "{value} in {json}");
        }
    }

    #[test]
    fn the_profile_of_class_sizes_is_the_profile_of_the_rows() {
        // `sample_and_population` as the sizes a census of their tuples
        // gives: (30,a) 1 of 2, (30,b) 2 of 2, (40,a) 3 of 6, in a
        // population of 12 records.
        let options = RiskOptions {
            threshold: 0.3,
            max_msu_size: 0,
            ..Default::default()
        };
        let by_sizes =
            risk_profile_of_sizes(&[1, 2, 3], 0, Some((&[2, 2, 6], 12)), &options).unwrap();
        let ((s_schema, s), (p_schema, p)) = sample_and_population();
        let by_rows = risk_profile_of_batches(
            &spec(),
            &s_schema,
            std::slice::from_ref(&s),
            Some((&p_schema, std::slice::from_ref(&p))),
            &options,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&by_sizes).unwrap(),
            serde_json::to_value(&by_rows).unwrap()
        );
        let bad = RiskOptions {
            threshold: 2.0,
            ..Default::default()
        };
        assert!(risk_profile_of_sizes(&[1], 0, None, &bad).is_err());
    }

    #[test]
    fn samples_outside_the_population_are_errors_by_count() {
        let (s_schema, s) = batch(&[
            ("age", vec!["30", "31", "31"]),
            ("zip", vec!["a", "a", "a"]),
        ]);
        let (p_schema, p) = batch(&[("age", vec!["30", "31"]), ("zip", vec!["a", "a"])]);
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "age", "role": "qi"}, {"name": "zip", "role": "qi"}]}"#,
        )
        .unwrap();
        let sample = encode_labels(&spec, &s_schema, &[s]).unwrap();
        let pop = encode_labels(&spec, &p_schema, std::slice::from_ref(&p)).unwrap();
        // (31, a): 2 in the sample, 1 in the population.
        let e = risk_profile(&sample, Some(&pop), &RiskOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1 sample classes are larger") && !e.contains("31"),
            "{e}"
        );
        // A label the population lacks.
        let (o_schema, o) = batch(&[("age", vec!["30", "32"]), ("zip", vec!["a", "a"])]);
        let other = encode_labels(&spec, &o_schema, &[o]).unwrap();
        let e = population_class_sizes(&other, &pop)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1 sample classes (1 records) do not occur"),
            "{e}"
        );
        assert!(!e.contains("32"), "{e}");
        // A QI the population lacks.
        let (z_schema, z) = batch(&[("age", vec!["30"])]);
        let spec_age: JobSpec =
            serde_json::from_str(r#"{"attributes": [{"name": "age", "role": "qi"}]}"#).unwrap();
        let only_age = encode_labels(&spec_age, &z_schema, &[z]).unwrap();
        let e = population_class_sizes(&sample, &only_age)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`zip`"), "{e}");
        // Bad options.
        let bad = RiskOptions {
            threshold: 1.5,
            ..Default::default()
        };
        assert!(risk_profile(&sample, None, &bad).is_err());
        let small = RiskOptions {
            population_size: Some(2),
            ..Default::default()
        };
        assert!(risk_profile(&sample, None, &small).is_err());
    }
}
