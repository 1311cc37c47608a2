//! People, not rows (issue 31, item 1): the privacy unit of a job whose
//! `privacy.entity` names the column that identifies a person.
//!
//! An attacker targets a person, who may have several rows (a patient's
//! visits). With the person as the unit:
//!
//! - **k counts people.** Every published class holds the rows of at least
//!   k distinct people, and **all rows of one person share one class**, so
//!   an attacker who knows every quasi-identifier value of someone's rows
//!   finds one class of at least k people, never a class of their rows
//!   alone, and no pair of classes to intersect.
//! - **l counts each person once.** A person with two diagnoses does not
//!   make a class 2-diverse: distinct l-diversity asks that no fewer than l
//!   values cover every person of the class (the smallest hitting set of
//!   the people's value sets; [`crate::table::ValueSets`]). With one value
//!   per person every model (entropy, recursive, t-closeness, the risk
//!   threshold) counts people exactly as it counts rows; a model that
//!   cannot count people holding several values is refused for such a
//!   column, naming it.
//!
//! How: the algorithm runs on a table of **one row per person** (their
//! first row's quasi-identifiers; their sensitive value, or the set of
//! them), so every algorithm of the registry supports people unchanged and
//! the suppression limit counts people. Its partition of people becomes a
//! partition of rows (`Partition::over_rows`). When a person's
//! quasi-identifiers vary between rows (age at each visit), their group
//! publishes, in that column, the tightest cell of all its rows: the
//! entity is treated as one record whose value is the set of its values,
//! generalised to cover the set (the 1:M setting of Gong et al.,
//! "Anonymizing 1:M microdata with high utility", Knowledge-Based Systems
//! 115, 2017, with the person as the unit of k and l; `docs/PAPERS.md`).
//! Both verifiers check people: the partition on the table of people, and
//! the release by its labels, collapsed to people again
//! ([`people_of_release`]), which also checks that no person's rows carry
//! two label tuples.
//!
//! A row whose quasi-identifiers the null policy excludes takes all of
//! that person's rows with it: publishing the others would publish part of
//! a person under a class they were never counted in.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::codes::with_codes;
use crate::encode::{QiTable, SensitiveColumn};
use crate::error::{Error, Result};
use crate::partition::Partition;
use crate::privacy::Privacy;
use crate::table::ValueSets;

/// The person of every row of a table: dense ids `0..count`, numbered in
/// order of first appearance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entities {
    column: String,
    of_row: Arc<[u32]>,
    count: usize,
}

impl Entities {
    /// The people of rows given by any ids (equal ids, same person),
    /// renumbered densely in order of first appearance.
    pub fn new(column: impl Into<String>, ids: &[u32]) -> Self {
        let mut dense: FxHashMap<u32, u32> = FxHashMap::default();
        let of_row: Arc<[u32]> = ids
            .iter()
            .map(|&id| {
                let next = dense.len() as u32;
                *dense.entry(id).or_insert(next)
            })
            .collect();
        Entities {
            column: column.into(),
            of_row,
            count: dense.len(),
        }
    }

    /// People already numbered densely (`0..count`, in order of first
    /// appearance).
    pub(crate) fn from_dense(column: &str, of_row: Vec<u32>, count: usize) -> Self {
        debug_assert!(of_row.iter().all(|&p| (p as usize) < count));
        Entities {
            column: column.to_string(),
            of_row: of_row.into(),
            count,
        }
    }

    /// The column that names the people.
    pub fn column(&self) -> &str {
        &self.column
    }

    /// Number of people.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The person of every row.
    pub fn of_row(&self) -> &[u32] {
        &self.of_row
    }

    /// The table of one row per person, refusing models that cannot count
    /// people who hold several values of a column they read.
    ///
    /// # Errors
    /// [`Error::Internal`] when the table has another number of rows;
    /// [`Error::Spec`] for such a model.
    pub(crate) fn collapse(&self, table: &QiTable, privacy: &Privacy) -> Result<People> {
        if table.n_rows() != self.of_row.len() {
            return Err(Error::Internal(format!(
                "{} rows were encoded but {} were assigned to people",
                table.n_rows(),
                self.of_row.len()
            )));
        }
        let people = one_row_per_person(table, &self.of_row, self.count);
        for column in &people.table.sensitive {
            let Some(sets) = column.value_sets() else {
                continue;
            };
            let several = (0..people.table.n_rows() as u32)
                .filter(|&p| sets.of(p).len() > 1)
                .count();
            for model in privacy.class_models() {
                let reads = model
                    .sensitive_columns()
                    .is_none_or(|c| c.contains(&column.name()));
                if reads && !model.counts_value_sets() {
                    return Err(Error::spec(
                        "privacy.entity",
                        format!(
                            "{several} people hold several values of `{}`, and {} counts one value per row, not the values of a person: use distinct l-diversity (`diversity = \"distinct\"` under [privacy]), which counts each person once, or publish one value of `{}` per person",
                            column.name(),
                            model.describe(),
                            column.name()
                        ),
                    ));
                }
            }
        }
        Ok(people)
    }

    /// The partition of rows that publishes every row in its person's
    /// group of `partition` (a partition of `people.table`).
    pub(crate) fn expand(
        &self,
        table: &QiTable,
        people: &People,
        partition: &Partition,
    ) -> Partition {
        let groups = partition.group_of_row();
        let group_of_row = self.of_row.iter().map(|&p| groups[p as usize]).collect();
        partition.over_rows(table, group_of_row, &people.varying)
    }
}

/// A table of one row per person.
#[derive(Debug)]
pub(crate) struct People {
    /// Row `p` is person `p`: the quasi-identifiers of their first row,
    /// their sensitive value (or values); excluded when any of their rows
    /// is.
    pub(crate) table: QiTable,
    /// The QI columns whose value differs between the rows of a person.
    pub(crate) varying: Vec<usize>,
}

/// The rows of each person, grouped: `rows[start[p]..start[p + 1]]`.
struct RowsByPerson {
    start: Vec<u32>,
    rows: Vec<u32>,
}

impl RowsByPerson {
    fn of(of_row: &[u32], count: usize) -> Self {
        let mut start = vec![0u32; count + 1];
        for &p in of_row {
            start[p as usize + 1] += 1;
        }
        for i in 0..count {
            start[i + 1] += start[i];
        }
        let mut next = start.clone();
        let mut rows = vec![0u32; of_row.len()];
        for (r, &p) in of_row.iter().enumerate() {
            rows[next[p as usize] as usize] = r as u32;
            next[p as usize] += 1;
        }
        RowsByPerson { start, rows }
    }

    fn rows(&self, p: usize) -> &[u32] {
        &self.rows[self.start[p] as usize..self.start[p + 1] as usize]
    }
}

/// The table of one row per person of `table`, whose row `r` belongs to
/// person `of_row[r]` (dense, `0..count`).
fn one_row_per_person(table: &QiTable, of_row: &[u32], count: usize) -> People {
    let by_person = RowsByPerson::of(of_row, count);
    let first: Vec<u32> = (0..count).map(|p| by_person.rows(p)[0]).collect();
    let mut people = table.restrict(&first);
    let excluded_row = {
        let mut e = vec![false; table.n_rows()];
        for &r in table.excluded() {
            e[r as usize] = true;
        }
        e
    };
    people.excluded = (0..count as u32)
        .filter(|&p| {
            by_person
                .rows(p as usize)
                .iter()
                .any(|&r| excluded_row[r as usize])
        })
        .collect();
    let is_excluded = |p: usize| people.excluded.binary_search(&(p as u32)).is_ok();
    let varying = table
        .columns()
        .iter()
        .enumerate()
        .filter(|(_, col)| {
            with_codes!(col.codes(), |c| (0..count).any(|p| {
                let rows = by_person.rows(p);
                !is_excluded(p) && rows.iter().any(|&r| c[r as usize] != c[rows[0] as usize])
            }))
        })
        .map(|(q, _)| q)
        .collect();
    let sensitive = table
        .sensitive
        .iter()
        .map(|s| person_values(s, &by_person, count, &is_excluded))
        .collect();
    people.sensitive = sensitive;
    People {
        table: people,
        varying,
    }
}

/// One sensitive column of the table of people: each person's value, or,
/// when some person holds several, the set of each person's values.
fn person_values(
    column: &SensitiveColumn,
    by_person: &RowsByPerson,
    count: usize,
    is_excluded: &dyn Fn(usize) -> bool,
) -> SensitiveColumn {
    let codes = column.codes();
    let mut sets: Vec<Vec<u32>> = Vec::with_capacity(count);
    // The row whose code stands for the person: their first row with a
    // value (their first row when they have none).
    let mut chosen = Vec::with_capacity(count);
    let mut several = false;
    for p in 0..count {
        let rows = by_person.rows(p);
        let mut set: Vec<u32> = rows
            .iter()
            .map(|&r| codes.get(r as usize))
            .filter(|&c| !column.is_missing(c))
            .collect();
        set.sort_unstable();
        set.dedup();
        chosen.push(
            rows.iter()
                .copied()
                .find(|&r| !column.is_missing(codes.get(r as usize)))
                .unwrap_or(rows[0]),
        );
        several |= set.len() > 1;
        sets.push(set);
    }
    let codes = codes.gather(&chosen);
    // The reference distribution of t-closeness counts people.
    let mut reference = vec![0u32; column.labels.len()];
    for p in (0..count).filter(|&p| !is_excluded(p)) {
        if several {
            for &v in &sets[p] {
                reference[v as usize] += 1;
            }
        } else {
            reference[codes.get(p) as usize] += 1;
        }
    }
    SensitiveColumn {
        name: column.name.clone(),
        codes,
        labels: column.labels.clone(),
        missing: column.missing.clone(),
        reference: reference.into(),
        numeric_order: column.numeric_order.clone(),
        hierarchy: column.hierarchy.clone(),
        folded: column.folded,
        sets: several.then(|| Arc::new(ValueSets::from_sets(sets.iter().map(Vec::as_slice)))),
    }
}

/// The person of each row, numbered densely by the text of the entity
/// column's value, batch after batch: how a table that was read (not
/// encoded by pass 1) is recounted in people (`kanon_risk()`, `kanon
/// inspect`).
#[derive(Debug, Default)]
pub struct PersonIds {
    ids: FxHashMap<String, u32>,
    of_row: Vec<u32>,
}

impl PersonIds {
    /// Adds the rows of `batch`, whose column `column` names the person.
    ///
    /// # Errors
    /// [`Error::Data`] when the column is missing or holds a null.
    pub fn push(&mut self, column: &str, batch: &arrow::array::RecordBatch) -> Result<()> {
        use arrow::array::AsArray;
        let values = batch.column_by_name(column).ok_or_else(|| {
            Error::data(
                column,
                "is not in the table: the people of `privacy.entity` cannot be counted",
            )
        })?;
        let text = arrow::compute::cast(values, &arrow::datatypes::DataType::Utf8)?;
        for v in text.as_string::<i32>().iter() {
            let v = v.ok_or_else(|| {
                Error::data(
                    column,
                    "holds a null: a row without a person cannot be counted",
                )
            })?;
            let next = self.ids.len() as u32;
            self.of_row
                .push(*self.ids.entry(v.to_string()).or_insert(next));
        }
        Ok(())
    }

    /// The person of every row added.
    pub fn finish(self) -> Vec<u32> {
        self.of_row
    }
}

/// A release by its labels ([`crate::verify::ReleaseVerifier::into_table`])
/// as one row per person, for the people of its rows (`of_row`, any ids):
/// what the verifier checks the models on.
///
/// # Errors
/// [`Error::VerificationFailed`] when a person's rows carry different QI
/// labels (they would be in two classes), or when the ids do not match the
/// rows.
pub fn people_of_release(labels: &QiTable, of_row: &[u32]) -> Result<QiTable> {
    if labels.n_rows() != of_row.len() {
        return Err(Error::VerificationFailed(format!(
            "the release holds {} rows but {} were assigned to people",
            labels.n_rows(),
            of_row.len()
        )));
    }
    let entities = Entities::new("", of_row);
    let people = one_row_per_person(labels, &entities.of_row, entities.count);
    if let Some(&q) = people.varying.first() {
        let by_person = RowsByPerson::of(&entities.of_row, entities.count);
        let col = &labels.columns()[q];
        let split = (0..entities.count)
            .filter(|&p| {
                let rows = by_person.rows(p);
                rows.iter()
                    .any(|&r| col.codes().get(r as usize) != col.codes().get(rows[0] as usize))
            })
            .count();
        return Err(Error::VerificationFailed(format!(
            "{split} people have rows published under different labels of `{}`: their rows are in different classes, which an attacker who knows them intersects",
            col.name()
        )));
    }
    Ok(people.table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    fn spec() -> JobSpec {
        serde_json::from_str(
            r#"{"attributes": [{"name": "age", "role": "qi", "intervals": [10, 100]},
                               {"name": "dx", "role": "sensitive"}]}"#,
        )
        .unwrap()
    }

    fn table(age: &[&str], dx: &[&str]) -> QiTable {
        QiTable::from_string_columns(
            &spec(),
            &Default::default(),
            &[("age", age.to_vec()), ("dx", dx.to_vec())],
        )
        .unwrap()
    }

    #[test]
    fn people_are_numbered_densely_in_order_of_first_appearance() {
        let e = Entities::new("id", &[70, 3, 70, 9, 3]);
        assert_eq!(e.of_row(), &[0, 1, 0, 2, 1]);
        assert_eq!(e.count(), 3);
    }

    #[test]
    fn a_person_is_one_row_with_the_set_of_their_values() {
        let t = table(&["30", "31", "30", "50"], &["flu", "cold", "flu", "flu"]);
        let e = Entities::new("id", &[1, 1, 1, 2]);
        let people = e.collapse(&t, &Privacy::k_anonymity(2)).unwrap();
        assert_eq!(people.table.n_rows(), 2);
        assert_eq!(people.varying, vec![0], "age varies within person 0");
        let sets = people.table.sensitive()[0].value_sets().expect("sets");
        assert_eq!(sets.of(0).len(), 2);
        assert_eq!(sets.of(1).len(), 1);
        // Reference counts people per value: flu 2, cold 1.
        let mut reference = people.table.sensitive()[0].reference_counts().to_vec();
        reference.sort_unstable();
        assert_eq!(reference, vec![1, 2]);
    }

    #[test]
    fn models_that_count_rows_are_refused_for_people_with_several_values() {
        let t = table(&["30", "30"], &["flu", "cold"]);
        let e = Entities::new("id", &[1, 1]);
        let privacy =
            Privacy::k_anonymity(1).with_model(Box::new(crate::privacy::EntropyLDiversity {
                column: "dx".into(),
                l: 2,
            }));
        let err = e.collapse(&t, &privacy).unwrap_err().to_string();
        assert!(
            err.contains("1 people hold several values of `dx`") && err.contains("distinct"),
            "{err}"
        );
        assert!(!err.contains("flu"), "no value: {err}");
    }

    #[test]
    fn a_release_that_splits_a_person_fails() {
        let t = table(&["30", "31", "50"], &["flu", "cold", "flu"]);
        let err = people_of_release(&t, &[7, 7, 8]).unwrap_err();
        assert!(matches!(err, Error::VerificationFailed(_)), "{err}");
        assert!(err.to_string().contains("1 people"), "{err}");
        let ok = people_of_release(&t, &[7, 8, 9]).unwrap();
        assert_eq!(ok.n_rows(), 3);
    }
}
