//! Re-identification risk of a table as it stands: an input before
//! anonymisation, or a release after it, judged by the values (labels) its
//! quasi-identifiers show.
//!
//! - [`table_risk`]: the job's view (classes below k, l achieved, NCP).
//! - [`risk_profile`]: the attacker models of El Emam & Dankar 2008
//!   (`sample`: prosecutor, journalist, marketer, sample uniques and
//!   histograms), population-uniqueness estimates (`uniqueness`: Pitman,
//!   Zayatz, SNB and Dankar's rule, as ARX 3.9.2) and the riskiest QI
//!   combinations (`msu`: SUDA's minimal sample uniques), in one
//!   serialisable [`RiskProfile`].
//! - [`requirement_risk`]: the table against every anonymity requirement
//!   `<shield, k>` of a job, on its projections.
//!
//! Everything here reports counts, shares and attribute names, never the
//! values of records.
//!
//! Rows with identical QI labels form a class. A record in a class of size
//! `s` is re-identified with probability `1/s` by an attacker who knows its
//! QIs (prosecutor model; El Emam & Dankar 2008): the largest risk is
//! `1/smallest class`, the average risk over records is `classes / rows`.
//! Distinct l-diversity (Machanavajjhala et al. 2007) is the smallest number
//! of distinct sensitive values in a class.
//!
//! NCP (Xu et al. 2006; the SBC thesis) is read back from the labels: a label that
//! is a node of the QI's hierarchy costs `m/D` (its `m` leaves of the
//! hierarchy's `D`; 0 for a leaf), a numeric range `[a-b]` costs
//! `(b-a)/(max-min)` over the column's observed bounds, a value set `{a,b}`
//! costs `m/D` over the column's distinct values, `*` costs 1, a plain value
//! 0. An input that was never generalised therefore has NCP 0.

mod msu;
mod profile;
mod requirements;
mod sample;

pub use crate::population::{
    population_uniqueness, PopulationUniqueness, UniquenessEstimate, UniquenessModel,
};
pub use msu::{minimal_sample_uniques, AttributeMsus, MsuReport, RiskyCombination};
pub use profile::{
    encode_labels, population_class_sizes, risk_profile, risk_profile_of_batches,
    risk_profile_of_sizes, RiskOptions, RiskProfile,
};
pub use requirements::{
    records_below_any_requirement, requirement_risk, requirement_standing, standing_of_classes,
    RequirementRisk,
};
pub use sample::{
    class_size_histogram, journalist_risk, marketer_risk, prosecutor_risk, risk_bands,
    sample_uniques, AttackerRisk, ClassSizeCount, RiskBand, SampleUniques,
};

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::encode::{Encoder, EquivalenceClasses, QiColumn, QiTable};
use crate::error::{Error, Result};
use crate::hierarchy::{Hierarchy, Level};
use crate::spec::{JobSpec, Kind};

/// Risk and loss of a table for the QIs of a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableRisk {
    /// Rows of the table.
    pub rows: usize,
    /// Rows left out because a QI is null (under `nulls = "suppress"`).
    pub excluded_rows: usize,
    /// Classes (distinct QI tuples).
    pub classes: usize,
    /// Smallest class: the k the table achieves (0 for an empty table).
    pub smallest_class: usize,
    /// Largest class.
    pub largest_class: usize,
    /// Classes smaller than the job's k.
    pub classes_below_k: usize,
    /// Rows in classes smaller than the job's k.
    pub rows_below_k: usize,
    /// Largest re-identification risk of a record, `1/smallest class`.
    pub max_risk: f64,
    /// Average re-identification risk of a record, `classes/rows`.
    pub avg_risk: f64,
    /// Distinct l-diversity achieved (smallest number of distinct sensitive
    /// values in a class, over all sensitive attributes); `None` without a
    /// sensitive attribute.
    pub l_achieved: Option<usize>,
    /// Mean NCP over all QI cells, read from the labels.
    pub ncp: f64,
    /// Every anonymity requirement of the job (plain k is the requirement
    /// on all QIs), on the table's projection on its shield.
    pub requirements: Vec<RequirementRisk>,
    /// Records at risk under any requirement.
    pub rows_below_requirements: usize,
    /// Every risk measure of the table ([`RiskProfile`]), with the job's
    /// `[risk]` settings.
    pub profile: RiskProfile,
    /// Every privacy model of the job beyond its requirements (l-diversity,
    /// `[privacy.models]`), judged on the table's classes as the release
    /// verifier judges them.
    pub models: Vec<ModelStanding>,
}

/// Whether a table meets one privacy model, by counts only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelStanding {
    /// The model with its parameters.
    pub model: String,
    /// Whether the table's classes satisfy it.
    pub met: bool,
    /// What the table achieves under it, or what violates it.
    pub detail: String,
}

/// Computes the risk and loss of `batches` (all of `schema`) for the QIs and
/// sensitive attributes of `spec`, with the job's k. With `privacy.entity`
/// every figure counts people (the entity column's distinct values), not
/// rows: `rows` stays the rows read, the classes, k, l, the risks and the
/// figures "below k" are of people.
///
/// `hierarchies` maps each hierarchy file path of the spec to its parsed
/// hierarchy (used for NCP only).
///
/// # Errors
/// [`Error::Data`] when a QI or sensitive column is missing or has a type
/// kanon cannot read, or when labels of a QI with a hierarchy are not nodes
/// of that hierarchy (by count, never by value).
pub fn table_risk(
    spec: &JobSpec,
    hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
    schema: &Schema,
    batches: &[RecordBatch],
) -> Result<TableRisk> {
    let labels = spec.labels_only();
    let mut enc = Encoder::try_new(&labels, &FxHashMap::default(), schema)?;
    for b in batches {
        enc.push(b)?;
    }
    let table = enc.finish()?;
    let rows_read = table.n_rows();
    // With `privacy.entity`, the unit is the person (crate::entity): the
    // rows of each person collapse to one, and every figure below counts
    // people, as the verifier does.
    let table = match spec.entity_column() {
        Some(column) => {
            let mut people = crate::entity::PersonIds::default();
            for b in batches {
                people.push(column, b)?;
            }
            crate::entity::people_of_release(&table, &people.finish())?
        }
        None => table,
    };
    let classes = EquivalenceClasses::of(&table);
    let k = spec.privacy.k;
    let sizes: Vec<usize> = (0..classes.len()).map(|c| classes.size(c)).collect();
    let rows = table.n_rows();
    let active = rows - table.excluded().len();
    let smallest = sizes.iter().copied().min().unwrap_or(0);
    let below: Vec<usize> = sizes.iter().copied().filter(|&s| s < k).collect();
    let l_achieved = table
        .sensitive()
        .iter()
        .map(|s| {
            (0..classes.len())
                .map(|c| {
                    let distinct = crate::privacy::frequencies(s, classes.rows(c)).len();
                    // People holding several values: the fewest values
                    // that cover every person (distinct l per person).
                    match s.value_sets() {
                        Some(sets) => crate::privacy::hitting_number_of(
                            classes.rows(c).iter().map(|&r| sets.of(r)).collect(),
                            distinct,
                        ),
                        None => distinct,
                    }
                })
                .min()
                .unwrap_or(0)
        })
        .min();
    let mut ncp_sum = 0.0;
    for (col, attr) in table.columns().iter().zip(spec.quasi_identifiers()) {
        let hierarchy = attr.hierarchy.as_ref().and_then(|p| hierarchies.get(p));
        let numeric = attr.kind == Some(Kind::Numeric)
            || attr.intervals.is_some()
            || attr.cuts.is_some()
            || schema
                .field_with_name(&attr.name)
                .is_ok_and(|f| f.data_type().is_numeric());
        ncp_sum += column_ncp_sum(&table, col, hierarchy.map(|h| h.as_ref()), numeric)?;
    }
    let cells = (active * table.n_qi()).max(1) as f64;
    let privacy = crate::privacy::Privacy::from_spec(spec)?;
    let requirements = privacy.requirements().to_vec();
    let class_rows: Vec<&[u32]> = (0..classes.len()).map(|c| classes.rows(c)).collect();
    let mut models: Vec<ModelStanding> = privacy
        .class_models()
        .iter()
        .map(|m| {
            let violation = m.check_release(&table, &class_rows);
            ModelStanding {
                model: m.describe(),
                met: violation.is_none(),
                detail: violation
                    .or_else(|| m.achieved(&table, &class_rows))
                    .unwrap_or_else(|| "met".to_string()),
            }
        })
        .collect();
    // δ-presence is a share of the population each class covers: rows of a
    // release cannot show it, so it is not shown met (fail closed).
    if let Some(presence) = privacy.presence() {
        models.push(ModelStanding {
            model: presence.describe(),
            met: false,
            // An unmet model's detail stands alone: it names the model.
            detail: format!(
                "{} is not known from these rows alone: it is a share of the population each class covers; `kanon verify` and `kanon report` recount it from the job's input",
                presence.describe()
            ),
        });
    }
    let profile = risk_profile(&table, None, &spec.risk.options(active))?;
    let (standing_of_requirements, rows_below_requirements) =
        requirement_standing(&table, &requirements);
    Ok(TableRisk {
        requirements: standing_of_requirements,
        models,
        rows_below_requirements,
        profile,
        rows: rows_read,
        excluded_rows: table.excluded().len(),
        classes: sizes.len(),
        smallest_class: smallest,
        largest_class: sizes.iter().copied().max().unwrap_or(0),
        classes_below_k: below.len(),
        rows_below_k: below.iter().sum(),
        max_risk: if smallest == 0 {
            0.0
        } else {
            1.0 / smallest as f64
        },
        avg_risk: if active == 0 {
            0.0
        } else {
            sizes.len() as f64 / active as f64
        },
        l_achieved,
        ncp: ncp_sum / cells,
    })
}

/// What a label says about the values it covers.
enum Parsed {
    Suppressed,
    Number(f64),
    Range(f64, f64),
    Set(Vec<String>),
    Value,
}

fn parse_label(label: &str, numeric: bool) -> Parsed {
    let l = label.trim();
    if l == "*" {
        return Parsed::Suppressed;
    }
    // An escaped value from the data (`\{a,b}`, `\*`): a value, whatever
    // it looks like ([`crate::generalise::escape_value`]).
    if l.starts_with('\\') {
        return Parsed::Value;
    }
    if numeric {
        if let Ok(v) = l.parse::<f64>() {
            return Parsed::Number(v);
        }
        if let Some(inner) = l
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']').or_else(|| s.strip_suffix(')')))
        {
            // `a-b` where either bound may be negative: split at a `-` that
            // follows a digit.
            let bytes = inner.as_bytes();
            if let Some(i) = (1..bytes.len()).find(|&i| {
                bytes[i] == b'-' && (bytes[i - 1].is_ascii_digit() || bytes[i - 1] == b'.')
            }) {
                if let (Ok(a), Ok(b)) = (
                    inner[..i].trim().parse::<f64>(),
                    inner[i + 1..].trim().parse::<f64>(),
                ) {
                    return Parsed::Range(a, b);
                }
            }
        }
        if let Some(v) = l.strip_prefix(">=").and_then(|s| s.trim().parse().ok()) {
            return Parsed::Range(v, f64::INFINITY);
        }
        if let Some(v) = l.strip_prefix('<').and_then(|s| s.trim().parse().ok()) {
            return Parsed::Range(f64::NEG_INFINITY, v);
        }
    }
    if let Some(inner) = l.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        return Parsed::Set(
            crate::generalise::split_set(inner)
                .into_iter()
                .map(|s| s.trim().to_string())
                .collect(),
        );
    }
    Parsed::Value
}

/// The sum over the column's active rows of each cell's NCP.
fn column_ncp_sum(
    table: &QiTable,
    col: &QiColumn,
    hierarchy: Option<&Hierarchy>,
    numeric: bool,
) -> Result<f64> {
    let counts = col.counts();
    let used: Vec<(u32, f64)> = (0..col.domain_size() as u32)
        .filter(|&c| counts[c as usize] > 0)
        .map(|c| (c, counts[c as usize] as f64))
        .collect();
    // Rows excluded by a null policy hold code 0 but publish nothing.
    let excluded_on = |code: u32| -> f64 {
        if code == 0 {
            table
                .excluded()
                .iter()
                .filter(|&&r| col.codes().get(r as usize) == 0)
                .count() as f64
        } else {
            0.0
        }
    };
    if let Some(h) = hierarchy {
        let mut node_by_label: FxHashMap<&str, usize> = FxHashMap::default();
        for level in (0..=h.height()).rev() {
            for n in h.nodes_at(Level(level)) {
                node_by_label.insert(h.label(n), h.leaves(n).len());
            }
        }
        let d = h.leaf_count().max(1) as f64;
        let mut sum = 0.0;
        let mut unknown = 0.0;
        for &(c, n) in &used {
            let n = n - excluded_on(c);
            match node_by_label.get(col.label(c)) {
                Some(&m) if m > 1 => sum += n * m as f64 / d,
                Some(_) => {}
                None if col.label(c) == "*" => sum += n,
                None => unknown += n,
            }
        }
        if unknown > 0.0 {
            return Err(Error::data(
                col.name(),
                format!(
                    "{unknown} values are not nodes of the column's hierarchy ({}); give the hierarchy the table was generalised with",
                    h.source()
                ),
            ));
        }
        return Ok(sum);
    }
    let parsed: Vec<(Parsed, f64)> = used
        .iter()
        .map(|&(c, n)| (parse_label(col.label(c), numeric), n - excluded_on(c)))
        .collect();
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut singles: FxHashSet<&str> = FxHashSet::default();
    for ((p, _), &(c, _)) in parsed.iter().zip(&used) {
        match p {
            Parsed::Number(v) => {
                min = min.min(*v);
                max = max.max(*v);
            }
            Parsed::Range(a, b) => {
                for v in [a, b] {
                    if v.is_finite() {
                        min = min.min(*v);
                        max = max.max(*v);
                    }
                }
            }
            Parsed::Set(items) => singles.extend(items.iter().map(|s| s.as_str())),
            Parsed::Value => {
                singles.insert(col.label(c));
            }
            Parsed::Suppressed => {}
        }
    }
    let width = if max > min { max - min } else { 0.0 };
    let d = singles.len().max(1) as f64;
    Ok(parsed
        .iter()
        .map(|(p, n)| {
            n * match p {
                Parsed::Suppressed => 1.0,
                Parsed::Number(_) | Parsed::Value => 0.0,
                Parsed::Range(a, b) if width > 0.0 => (b.min(max) - a.max(min)).max(0.0) / width,
                Parsed::Range(..) => 0.0,
                Parsed::Set(items) if items.len() > 1 => items.len() as f64 / d,
                Parsed::Set(_) => 0.0,
            }
        })
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field};

    fn spec(json: &str) -> JobSpec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn risk_of_an_input_and_a_release() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("age", DataType::Int64, false),
            Field::new("zip", DataType::Utf8, false),
            Field::new("disease", DataType::Utf8, false),
        ]));
        let input = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![21, 22, 23, 41, 42, 42])) as ArrayRef,
                Arc::new(StringArray::from(vec!["a", "b", "b", "c", "c", "c"])),
                Arc::new(StringArray::from(vec!["x", "y", "x", "x", "x", "y"])),
            ],
        )
        .unwrap();
        let job = spec(
            r#"{"privacy": {"k": 3}, "attributes": [
                {"name": "age", "role": "qi"}, {"name": "zip", "role": "qi"},
                {"name": "disease", "role": "sensitive"}]}"#,
        );
        let r = table_risk(&job, &FxHashMap::default(), &schema, &[input]).unwrap();
        assert_eq!((r.rows, r.classes, r.smallest_class), (6, 5, 1));
        assert_eq!((r.classes_below_k, r.rows_below_k), (5, 6));
        assert_eq!(r.l_achieved, Some(1));
        assert_eq!(r.max_risk, 1.0);
        assert_eq!(r.ncp, 0.0);

        let release_schema = Arc::new(Schema::new(vec![
            Field::new("age", DataType::Utf8, false),
            Field::new("zip", DataType::Utf8, false),
            Field::new("disease", DataType::Utf8, false),
        ]));
        let release = RecordBatch::try_new(
            release_schema.clone(),
            vec![
                Arc::new(StringArray::from(vec![
                    "[21-23]", "[21-23]", "[21-23]", "[41-42]", "[41-42]", "[41-42]",
                ])) as ArrayRef,
                Arc::new(StringArray::from(vec![
                    "{a,b}", "{a,b}", "{a,b}", "c", "c", "c",
                ])),
                Arc::new(StringArray::from(vec!["x", "y", "x", "x", "x", "y"])),
            ],
        )
        .unwrap();
        let mut job = job;
        job.attributes[0].kind = Some(Kind::Numeric);
        let r = table_risk(&job, &FxHashMap::default(), &release_schema, &[release]).unwrap();
        assert_eq!((r.classes, r.smallest_class, r.rows_below_k), (2, 3, 0));
        assert_eq!(r.l_achieved, Some(2));
        assert!((r.avg_risk - 2.0 / 6.0).abs() < 1e-12);
        // age: widths 2 and 1 over [21, 42]; zip: {a,b} covers 2 of 3 values.
        let age = (3.0 * 2.0 / 21.0 + 3.0 * 1.0 / 21.0) / 6.0;
        let zip = (3.0 * 2.0 / 3.0) / 6.0;
        assert!((r.ncp - (age + zip) / 2.0).abs() < 1e-12, "{}", r.ncp);
    }

    #[test]
    fn hierarchy_labels_cost_their_leaves() {
        let h = Hierarchy::from_csv("sex.csv", "Male;*\nFemale;*\n", ';').unwrap();
        let mut hs = FxHashMap::default();
        hs.insert("sex.csv".to_string(), Arc::new(h));
        let schema = Arc::new(Schema::new(vec![Field::new("sex", DataType::Utf8, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(StringArray::from(vec!["*", "*", "Male", "Female"])) as ArrayRef],
        )
        .unwrap();
        let job = spec(
            r#"{"privacy": {"k": 2}, "attributes": [
                {"name": "sex", "role": "qi", "hierarchy": "sex.csv"}]}"#,
        );
        let r = table_risk(&job, &hs, &schema, std::slice::from_ref(&batch)).unwrap();
        assert!((r.ncp - 0.5).abs() < 1e-12);
        assert_eq!(r.l_achieved, None);
        let bad = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(StringArray::from(vec!["Person", "*"])) as ArrayRef],
        )
        .unwrap();
        let e = table_risk(&job, &hs, &schema, &[bad])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1 values are not nodes") && !e.contains("Person"),
            "{e}"
        );
    }
}
