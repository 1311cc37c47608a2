//! The columns that identify people, checked on the input before anything
//! is anonymised (issue 31): k, l and every risk measure count **rows**,
//! while an attacker targets **people**.
//!
//! - **Repeated identifiers.** An identifying or pseudonymised column that
//!   holds one value on several rows (a patient's visits) says that a person
//!   may have several rows: a class of 5 rows can then be one patient, and
//!   whoever knows that patient's quasi-identifiers learns all of their
//!   sensitive values. Unless the job says the row is the unit
//!   (`privacy.entity = "row"`: repeats are not people), such a job is
//!   refused, naming the column and how many values repeat, never a value.
//! - **Pseudonyms too few to hide.** A pseudonymised column with fewer
//!   distinct values than rows / k publishes pseudonyms that many rows
//!   share: ranking them by frequency against public counts (a zip code's
//!   population) maps them back to their values, whatever the key. Such a
//!   column is a quasi-identifier to generalise, or an identifying column to
//!   drop, and the job is refused saying so.
//!
//! Values are compared by a 64-bit hash of their Arrow row encoding: a
//! collision can only make two values look alike, which refuses a job,
//! never publishes one.

use std::hash::Hasher;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::row::{RowConverter, SortField};
use rustc_hash::{FxHashSet, FxHasher};

use crate::entity::Entities;
use crate::error::{Error, Result};
use crate::spec::{JobSpec, Role, ENTITY_ROW};

/// One identifying or pseudonymised column being counted.
#[derive(Debug)]
struct Tracked {
    name: String,
    role: Role,
    /// Hashes of the values seen.
    seen: FxHashSet<u64>,
    /// Non-null values seen.
    values: usize,
    /// Whether any batch held the column.
    present: bool,
    /// The row encoder of the column's type, made with its first batch.
    converter: Option<(arrow::datatypes::DataType, RowConverter)>,
}

/// Who an input's identifying and pseudonymised columns name, as a digest
/// of their distinct values (order-independent): what makes each release's
/// pseudonyms its own ([`crate::recode::Pseudonymiser::for_release`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identities {
    /// Wrapping sum of the mixed hashes of every distinct value, by column.
    pub digest: u64,
    /// Distinct values, over the columns.
    pub distinct: u64,
    /// The person of every row, when the job's `privacy.entity` names a
    /// column ([`crate::entity`]).
    pub entities: Option<Arc<Entities>>,
}

/// Counts the values of a job's identifying and pseudonymised columns over
/// the input's batches, then refuses what would publish people as rows (see
/// the module docs).
#[derive(Debug)]
pub struct IdentityCheck {
    columns: Vec<Tracked>,
    /// The column naming each row's person, the hash of each row's value
    /// (0 for a null) and the number of nulls, when the job names one.
    entity: Option<(String, Vec<u64>, usize)>,
    /// Repeats are allowed: the job's privacy unit is the row.
    row_is_unit: bool,
    k: usize,
    rows: usize,
}

impl IdentityCheck {
    /// The check of `spec`'s identifying and pseudonymised columns.
    pub fn new(spec: &JobSpec) -> IdentityCheck {
        let k = spec.strictest_k();
        IdentityCheck {
            columns: spec
                .attributes
                .iter()
                .filter(|a| matches!(a.role, Role::Identifying | Role::Pseudonymised))
                // A δ-presence job's research subset is a flag, not a
                // person's name: it is identifying only to be dropped.
                .filter(|a| spec.presence_subset() != Some(a.name.as_str()))
                .map(|a| Tracked {
                    name: a.name.clone(),
                    role: a.role,
                    seen: FxHashSet::default(),
                    values: 0,
                    present: false,
                    converter: None,
                })
                .collect(),
            entity: spec.entity_column().map(|c| (c.to_string(), Vec::new(), 0)),
            row_is_unit: spec.privacy.entity.as_deref() == Some(ENTITY_ROW),
            k,
            rows: 0,
        }
    }

    /// The columns the check reads: a front end that projects its input
    /// reads these too.
    pub fn columns(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|c| c.name.as_str())
    }

    /// Counts one batch of the input. A column the batch does not hold is
    /// skipped (the column check reports a listed column the input lacks).
    ///
    /// # Errors
    /// [`Error::Data`] for a column whose values cannot be compared.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        self.rows += batch.num_rows();
        for c in &mut self.columns {
            let Some(array) = batch.column_by_name(&c.name) else {
                continue;
            };
            c.present = true;
            let name = &c.name;
            let fresh = |dt: &arrow::datatypes::DataType| {
                RowConverter::new(vec![SortField::new(dt.clone())])
                    .map_err(|e| Error::data(name, format!("its values cannot be compared: {e}")))
            };
            // One encoder per column, again only if a batch's type differs.
            let converter = match &mut c.converter {
                Some((dt, conv)) if dt == array.data_type() => conv,
                slot => {
                    &mut slot
                        .insert((array.data_type().clone(), fresh(array.data_type())?))
                        .1
                }
            };
            let rows = converter
                .convert_columns(std::slice::from_ref(array))
                .map_err(|e| Error::data(&c.name, format!("its values cannot be compared: {e}")))?;
            let nulls = array.logical_nulls();
            let mut of_row = match &mut self.entity {
                Some((column, of_row, nulls)) if column == name => Some((of_row, nulls)),
                _ => None,
            };
            for i in 0..array.len() {
                if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                    if let Some((of_row, nulls)) = of_row.as_mut() {
                        of_row.push(0);
                        **nulls += 1;
                    }
                    continue;
                }
                let mut h = FxHasher::default();
                h.write(rows.row(i).as_ref());
                let h = h.finish();
                c.seen.insert(h);
                c.values += 1;
                if let Some((of_row, _)) = of_row.as_mut() {
                    of_row.push(h);
                }
            }
        }
        Ok(())
    }

    /// Refuses repeated identifiers (unless the row is the unit) and
    /// pseudonymised columns too few to hide; returns the digest of the
    /// identifiers seen.
    ///
    /// # Errors
    /// [`Error::Data`] naming the column, the counts and the fix.
    pub fn finish(self) -> Result<Identities> {
        let entities = match &self.entity {
            Some((column, of_row, nulls)) => {
                Some(Arc::new(people(column, of_row, *nulls, self.rows)?))
            }
            None => None,
        };
        for c in self.columns.iter().filter(|c| c.present) {
            // The person's own rows repeat their identifier: the person is
            // the unit, and the column is one pseudonym per person.
            if entities.is_some() {
                continue;
            }
            let distinct = c.seen.len();
            let repeated = c.values - distinct;
            let role = match c.role {
                Role::Pseudonymised => "pseudonymised",
                _ => "identifying",
            };
            if repeated > 0 && !self.row_is_unit {
                return Err(Error::data(
                    &c.name,
                    format!(
                        "this {role} column holds {distinct} distinct values on {} rows ({repeated} rows repeat a value of another row): if a person can have several rows, k counts their rows, not them, and one person's rows can form a class alone, whose sensitive values anyone who knows the person's quasi-identifiers learns. Publish one row per person (aggregate their rows first); if the repeated values are not people (a hospital code, a batch number), add `entity = \"row\"` under [privacy]",
                        c.values
                    ),
                ));
            }
            if c.role == Role::Pseudonymised
                && self.k >= 2
                && distinct > 0
                && distinct.saturating_mul(self.k) < self.rows
            {
                return Err(Error::data(
                    &c.name,
                    format!(
                        "this pseudonymised column has {distinct} distinct values on {} rows, fewer than rows / k = {}: pseudonyms that many rows share are re-identified by their frequency alone (the most frequent pseudonym is the most frequent value), whatever the key. Make it a quasi-identifier with a hierarchy to generalise it, or `identifying` to drop it",
                        self.rows,
                        self.rows / self.k
                    ),
                ));
            }
        }
        let mut out = Identities {
            entities,
            ..Identities::default()
        };
        for (i, c) in self.columns.iter().enumerate() {
            for &h in &c.seen {
                // splitmix64 of the value's hash and its column.
                let mut z = h ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                out.digest = out.digest.wrapping_add(z ^ (z >> 31));
            }
            out.distinct += c.seen.len() as u64;
        }
        Ok(out)
    }
}

/// The person of every row from the hashes of the entity column's values,
/// refusing a null (a row of nobody known) and a column the input lacks.
fn people(column: &str, of_row: &[u64], nulls: usize, rows: usize) -> Result<Entities> {
    if of_row.len() != rows {
        return Err(Error::data(
            column,
            "`privacy.entity` names this column but the input does not hold it; name the column that identifies a person",
        ));
    }
    if nulls > 0 {
        return Err(Error::data(
            column,
            format!(
                "`privacy.entity` names this column but {nulls} of its {rows} rows are null: a row of nobody known cannot be counted as a person (it could be anyone's, including someone already in its class). Fill in the person or remove those rows"
            ),
        ));
    }
    // Dense ids by hash: equal values, one person. Two people whose values
    // collide in 64 bits would count as one, which publishes less.
    let mut dense: rustc_hash::FxHashMap<u64, u32> = rustc_hash::FxHashMap::default();
    let ids: Vec<u32> = of_row
        .iter()
        .map(|h| {
            let next = dense.len() as u32;
            *dense.entry(*h).or_insert(next)
        })
        .collect();
    Ok(Entities::from_dense(column, ids, dense.len()))
}

#[cfg(test)]
mod tests {

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn spec(role: &str, entity: Option<&str>) -> JobSpec {
        let entity = entity
            .map(|e| format!("entity = \"{e}\"\n"))
            .unwrap_or_default();
        toml::from_str(&format!(
            "[privacy]\nk = 2\n{entity}[algorithm]\nname = \"mondrian\"\n\
             [[attributes]]\nname = \"id\"\nrole = \"{role}\"\n\
             [[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n"
        ))
        .unwrap()
    }

    fn batch(ids: &[Option<&str>]) -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Utf8, true),
                Field::new("age", DataType::Int64, false),
            ])),
            vec![
                Arc::new(StringArray::from(ids.to_vec())),
                Arc::new(Int64Array::from(vec![30; ids.len()])),
            ],
        )
        .unwrap()
    }

    fn check(spec: &JobSpec, batches: &[RecordBatch]) -> Result<Identities> {
        let mut c = IdentityCheck::new(spec);
        for b in batches {
            c.push(b)?;
        }
        c.finish()
    }

    #[test]
    fn the_digest_names_the_set_of_identifiers_in_any_order() {
        let s = spec("identifying", None);
        let a = check(&s, &[batch(&[Some("a"), Some("b")]), batch(&[Some("c")])]).unwrap();
        let b = check(
            &s,
            &[batch(&[Some("c"), None]), batch(&[Some("b"), Some("a")])],
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.distinct, 3);
        let c = check(&s, &[batch(&[Some("a"), Some("b"), Some("d")])]).unwrap();
        assert_ne!(a.digest, c.digest);
    }

    #[test]
    fn repeated_identifiers_are_refused_across_batches_unless_the_row_is_the_unit() {
        let one = batch(&[Some("a"), Some("b"), None]);
        let two = batch(&[Some("c"), Some("a"), None]);
        for role in ["identifying", "pseudonymised"] {
            let e = check(&spec(role, None), &[one.clone(), two.clone()]).unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains("`id`") && text.contains("1 rows repeat"),
                "{text}"
            );
            assert!(text.contains("entity = \"row\""), "{text}");
            assert!(!text.contains("\"a\""), "no value: {text}");
            check(&spec(role, Some("row")), &[one.clone(), two.clone()]).unwrap();
        }
        // Distinct values and nulls are no repeat.
        check(
            &spec("identifying", None),
            &[one, batch(&[Some("d"), None])],
        )
        .unwrap();
    }

    #[test]
    fn pseudonyms_shared_by_more_than_k_rows_are_refused() {
        let ids: Vec<Option<&str>> = (0..20).map(|i| Some(["x", "y"][i % 2])).collect();
        let e = check(&spec("pseudonymised", Some("row")), &[batch(&ids)]).unwrap_err();
        assert!(e.to_string().contains("frequency"), "{e}");
        // As an identifying column it is dropped: nothing to rank.
        check(&spec("identifying", Some("row")), &[batch(&ids)]).unwrap();
    }

    #[test]
    fn an_entity_column_must_identify_people() {
        spec("pseudonymised", Some("id")).validate().unwrap();
        let e = spec("identifying", Some("id")).validate().unwrap_err();
        assert!(e.to_string().contains("recount"), "{e}");
        let e = spec("pseudonymised", Some("age")).validate().unwrap_err();
        assert!(e.to_string().contains("identifies a person"), "{e}");
        spec("pseudonymised", Some("row")).validate().unwrap();
    }

    #[test]
    fn the_entity_column_numbers_people_and_refuses_nulls() {
        let s = spec("pseudonymised", Some("id"));
        let people = check(&s, &[batch(&[Some("a"), Some("b")]), batch(&[Some("a")])])
            .unwrap()
            .entities
            .expect("people");
        assert_eq!(people.of_row(), &[0, 1, 0]);
        assert_eq!(people.count(), 2);
        let e = check(&s, &[batch(&[Some("a"), None])]).unwrap_err();
        assert!(e.to_string().contains("1 of its 2 rows are null"), "{e}");
    }
}
