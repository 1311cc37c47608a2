//! Encoding: record batches to a columnar [`QiTable`] of dense codes
//! ([`crate::table`]; its [`EquivalenceClasses`] are in [`crate::classes`]).
//!
//! Every QI becomes one code per row, stored as `u8`, `u16` or `u32` by the
//! column's number of codes ([`crate::codes::Codes`]; narrow already while
//! batches stream in, so encoding never holds `u32` columns it does not
//! need):
//! - with a hierarchy (file, intervals or masking) the code is the value's
//!   leaf in the hierarchy, so hierarchy operations apply to codes directly;
//! - without one (flexible generalisation) the code is the value's rank among
//!   the column's distinct values (numbers by value, strings by byte order),
//!   so a numeric range is a code range and a set is a set of codes.
//!
//! Numeric QIs keep their values: [`QiColumn::value`] gives the number behind
//! a code. Encoding is incremental ([`Encoder::push`] per batch), so a front
//! end can stream pass 1; dictionary-encoded strings are mapped through their
//! dictionary once per batch rather than hashed per row.
//!
//! Per column, `column` turns each batch into provisional codes (order of
//! first appearance) and `final_codes` sorts them into the final code
//! order and builds the [`QiColumn`] when encoding finishes.

mod column;
mod final_codes;

use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{DataType, Schema};
use rustc_hash::FxHashMap;

use crate::codes::CodesBuilder;
use crate::error::{Error, Result};
use crate::hierarchy::Hierarchy;
use column::{nan_rows, ColumnEncoder, Dictionary};

pub use crate::classes::{EquivalenceClasses, NO_CLASS};
use crate::spec::{AttributeSpec, GeneralisationSpec, JobSpec, Kind, NullPolicy, Role};
pub use crate::table::{QiColumn, QiTable, SensitiveColumn, SensitiveHierarchy};

/// Streams record batches into a [`QiTable`].
///
/// # Example
/// ```
/// # use std::sync::Arc;
/// # use arrow::array::{RecordBatch, StringArray, Int64Array};
/// # use arrow::datatypes::{Schema, Field, DataType};
/// use kanon_engine::{encode::Encoder, spec::JobSpec};
/// let spec: JobSpec = serde_json::from_str(r#"{"attributes": [
///     {"name": "age", "role": "quasi-identifier"},
///     {"name": "sex", "role": "quasi-identifier"}]}"#).unwrap();
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("age", DataType::Int64, false), Field::new("sex", DataType::Utf8, false)]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![
///     Arc::new(Int64Array::from(vec![30, 41, 30])), Arc::new(StringArray::from(vec!["F", "M", "F"]))]).unwrap();
/// let mut enc = Encoder::try_new(&spec, &Default::default(), &schema).unwrap();
/// enc.push(&batch).unwrap();
/// let table = enc.finish().unwrap();
/// assert_eq!(table.n_rows(), 3);
/// assert_eq!(table.columns()[0].distinct(), 2);
/// ```
#[derive(Debug)]
pub struct Encoder {
    columns: Vec<ColumnEncoder>,
    sensitive: Vec<ColumnEncoder>,
    /// The hierarchy of each sensitive attribute that names one
    /// (hierarchical-distance t-closeness), in the order of `sensitive`.
    sensitive_hierarchies: Vec<Option<Arc<Hierarchy>>>,
    n_rows: usize,
    excluded: Vec<u32>,
    /// The research subset column of a δ-presence job, and the rows
    /// outside it so far.
    subset: Option<String>,
    outside: Vec<u32>,
    missing_is_value: bool,
    /// The placeholders of a missing sensitive value, trimmed, lower case
    /// ([`crate::spec::PrivacySpec::missing_placeholders`]).
    missing_placeholders: Vec<String>,
}

/// Makes the texts of a sensitive value that differ only by case or
/// surrounding whitespace (`Cancer`, `cancer`, `Cancer `) one value, and
/// every missing one (NULL, blank, `N/A`, `?`, ...) one value: each row's
/// code becomes the first code of its kind, so l-diversity, t-closeness and
/// the risk measures count `Cancer` once (issue 32, item 7). The published
/// values are untouched. Returns how many codes were folded into another.
fn fold_variants(codes: &mut crate::codes::Codes, labels: &[String], missing: &[bool]) -> usize {
    let mut first: FxHashMap<String, u32> = FxHashMap::default();
    let mut folded = 0;
    let map: Vec<u32> = labels
        .iter()
        .enumerate()
        .map(|(code, label)| {
            let key = if missing[code] {
                "\0missing".to_string()
            } else {
                label.trim().to_lowercase()
            };
            let to = *first.entry(key).or_insert(code as u32);
            if to != code as u32 && !missing[code] {
                folded += 1;
            }
            to
        })
        .collect();
    if map.iter().enumerate().any(|(c, &to)| to != c as u32) {
        codes.remap(&map);
    }
    folded
}

fn is_numeric(dt: &DataType) -> bool {
    dt.is_numeric()
}

impl Encoder {
    /// Prepares encoding for batches of `schema`.
    ///
    /// `hierarchies` maps each hierarchy file path of the spec to its parsed
    /// hierarchy (a sensitive attribute's is optional: see
    /// [`SensitiveColumn::hierarchy`]).
    ///
    /// # Errors
    /// [`Error::Data`] when a QI or sensitive column is missing from the
    /// schema or has a type that cannot be encoded; [`Error::Spec`] when a
    /// hierarchy file was not provided.
    pub fn try_new(
        spec: &JobSpec,
        hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
        schema: &Schema,
    ) -> Result<Self> {
        spec.validate()?;
        let make = |a: &AttributeSpec| -> Result<ColumnEncoder> {
            let (_, field) = schema.column_with_name(&a.name).ok_or_else(|| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                Error::data(
                    &a.name,
                    format!(
                        "not found in the input; the input has columns [{}]; fix the attribute name in the job",
                        names.join(", ")
                    ),
                )
            })?;
            let dt = field.data_type();
            let value_type = match dt {
                DataType::Dictionary(_, v) => v.as_ref(),
                other => other,
            };
            let supported = is_numeric(value_type)
                || matches!(
                    value_type,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean
                )
                || value_type.is_temporal();
            if !supported {
                return Err(Error::data(
                    &a.name,
                    format!("has type {dt}, which kanon cannot anonymise; cast it to a string or number first"),
                ));
            }
            let generalisation = if a.role == Role::QuasiIdentifier {
                a.generalisation()?
            } else {
                GeneralisationSpec::Flexible
            };
            let kind = match (a.kind, &generalisation) {
                (Some(k), _) => k,
                (None, GeneralisationSpec::Intervals(_)) => Kind::Numeric,
                (None, GeneralisationSpec::HierarchyFile(_) | GeneralisationSpec::Masking) => {
                    Kind::Categorical
                }
                (None, GeneralisationSpec::Flexible) if is_numeric(value_type) => Kind::Numeric,
                (None, GeneralisationSpec::Flexible) => Kind::Categorical,
            };
            if kind == Kind::Numeric
                && matches!(
                    generalisation,
                    GeneralisationSpec::HierarchyFile(_) | GeneralisationSpec::Masking
                )
                && a.kind.is_some()
            {
                return Err(Error::spec(
                    format!("attributes.{}.type", a.name),
                    "a numeric QI is generalised by `intervals`, `cuts` or ranges; drop `type = \"numeric\"` to use a hierarchy file or masking",
                ));
            }
            let dict = match &generalisation {
                GeneralisationSpec::HierarchyFile(path) => {
                    Dictionary::Leaves(hierarchies.get(path).cloned().ok_or_else(|| {
                        Error::spec(
                            format!("attributes.{}.hierarchy", a.name),
                            format!("hierarchy file `{path}` was not loaded"),
                        )
                    })?)
                }
                _ if kind == Kind::Numeric => Dictionary::Numbers(FxHashMap::default(), Vec::new()),
                _ => Dictionary::Strings(FxHashMap::default(), Vec::new()),
            };
            let coding = column::Coding::of(a, value_type)?;
            Ok(ColumnEncoder {
                coding,
                spec: a.clone(),
                kind,
                generalisation,
                dict,
                is_qi: a.role == Role::QuasiIdentifier,
                codes: CodesBuilder::default(),
                nulls: 0,
                missing: 0,
                unparsable: 0,
            })
        };
        let columns = spec
            .quasi_identifiers()
            .map(make)
            .collect::<Result<Vec<_>>>()?;
        let sensitive = spec.sensitive().map(make).collect::<Result<Vec<_>>>()?;
        // A sensitive attribute is never generalised: its hierarchy only
        // gives t-closeness its ground distance (attached when encoding
        // finishes). One that was not given is left out: hierarchical
        // t-closeness then refuses the table (fail closed), and nothing else
        // reads it (a reader of a release, e.g. the risk of a release, needs
        // no hierarchy).
        let sensitive_hierarchies = spec
            .sensitive()
            .map(|a| {
                a.hierarchy
                    .as_ref()
                    .and_then(|path| hierarchies.get(path).cloned())
            })
            .collect();
        let subset = spec.presence_subset().map(String::from);
        if let Some(name) = &subset {
            match schema.column_with_name(name) {
                Some((_, f)) if f.data_type() == &DataType::Boolean => {}
                Some((_, f)) => {
                    return Err(Error::data(
                        name,
                        format!(
                            "is the research subset of `privacy.models.delta-presence` but has type {}, not boolean; cast it to a boolean (true: the record is in the data published)",
                            f.data_type()
                        ),
                    ))
                }
                None => {
                    return Err(Error::data(
                        name,
                        "is the research subset of `privacy.models.delta-presence` but is not in the input; add a boolean column saying which records of the population are in the data published",
                    ))
                }
            }
        }
        Ok(Encoder {
            columns,
            sensitive,
            sensitive_hierarchies,
            n_rows: 0,
            excluded: Vec::new(),
            subset,
            outside: Vec::new(),
            missing_is_value: spec.privacy.missing_sensitive
                == crate::spec::MissingSensitive::Value,
            missing_placeholders: spec.privacy.missing_placeholders(),
        })
    }

    /// Encodes one batch (of the schema given to [`Encoder::try_new`], or a
    /// projection that keeps the QI and sensitive columns by name).
    ///
    /// # Errors
    /// [`Error::Data`] for a null under `nulls = "error"`; other problems
    /// (values missing from a hierarchy) are counted and reported by
    /// [`Encoder::finish`].
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        // Row ids are u32 (u32::MAX marks suppression): a larger table is a
        // clear error, never a silent wrap.
        if self.n_rows + batch.num_rows() >= u32::MAX as usize {
            return Err(Error::ResourcesExhausted(format!(
                "more than {} rows in one table; kanon's row ids are 32-bit: split the input into several jobs",
                u32::MAX - 1
            )));
        }
        let offset = self.n_rows as u32;
        if let Some(name) = &self.subset {
            let flags = batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<arrow::array::BooleanArray>())
                .ok_or_else(|| {
                    Error::data(
                        name,
                        "is missing from a batch of the input or is not boolean there (its schema changed while reading); nothing was published",
                    )
                })?;
            // Unknown membership would make the population's count a
            // guess: fail closed.
            if flags.null_count() > 0 {
                return Err(Error::data(
                    name,
                    format!(
                        "holds {} nulls, but every record of the population must say whether it is in the research subset; fill them with true or false",
                        flags.null_count()
                    ),
                ));
            }
            self.outside.extend(
                flags
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| *f == Some(false))
                    .map(|(i, _)| offset + i as u32),
            );
        }
        for (is_qi, col) in self
            .columns
            .iter_mut()
            .map(|c| (true, c))
            .chain(self.sensitive.iter_mut().map(|c| (false, c)))
        {
            // By name only: a batch without the column is an error, never
            // another column that happens to stand at the same index.
            let array = match batch.schema().index_of(&col.spec.name) {
                Ok(i) => batch.column(i).clone(),
                Err(_) => {
                    return Err(Error::data(
                        &col.spec.name,
                        "is missing from a batch of the input (its schema changed while reading); nothing was published",
                    ))
                }
            };
            let before = col.codes.len();
            col.encode(&array)?;
            // Logical nulls: a dictionary key pointing at a null value is a
            // null too.
            if let Some(nulls) = array
                .logical_nulls()
                .filter(|n| is_qi && n.null_count() > 0)
            {
                if col.spec.nulls == NullPolicy::Error {
                    col.nulls += nulls.null_count();
                } else {
                    for i in 0..array.len() {
                        if nulls.is_null(i) {
                            self.excluded.push(offset + i as u32);
                        }
                    }
                }
            }
            // NaN is no value a quasi-identifier can publish: missing, as null.
            if let Some(nan) = nan_rows(&array).filter(|_| is_qi) {
                if col.spec.nulls == NullPolicy::Error {
                    col.nulls += nan.len();
                } else {
                    self.excluded
                        .extend(nan.into_iter().map(|i| offset + i as u32));
                }
            }
            debug_assert_eq!(col.codes.len() - before, batch.num_rows());
        }
        self.n_rows += batch.num_rows();
        Ok(())
    }

    /// Finishes encoding: assigns final codes, builds data-derived
    /// hierarchies (intervals, masking) and reports data problems.
    ///
    /// # Errors
    /// [`Error::Data`] naming the column and the number of affected rows for
    /// nulls, values missing from a hierarchy, or unparsable numbers.
    pub fn finish(mut self) -> Result<QiTable> {
        self.excluded.sort_unstable();
        self.excluded.dedup();
        // Rows outside the research subset are never published: excluded.
        // Those with a null QI have no value to match a class with, and
        // stay excluded only.
        let outside: Vec<u32> = self
            .outside
            .iter()
            .copied()
            .filter(|r| self.excluded.binary_search(r).is_err())
            .collect();
        if !outside.is_empty() {
            self.excluded.extend_from_slice(&outside);
            self.excluded.sort_unstable();
        }
        let columns = self
            .columns
            .into_iter()
            .map(|c| c.finish(true))
            .collect::<Result<Vec<_>>>()?;
        let excluded = &self.excluded;
        let sensitive = self
            .sensitive
            .into_iter()
            .zip(self.sensitive_hierarchies)
            .map(|(c, hierarchy)| {
                let mut q = c.finish(false)?;
                let is_missing: Vec<bool> = q
                    .labels
                    .iter()
                    .enumerate()
                    .map(|(code, label)| {
                        let text = label.trim();
                        text.is_empty()
                            || q.values.as_ref().is_some_and(|v| v[code].is_nan())
                            || (q.values.is_none()
                                && self
                                    .missing_placeholders
                                    .iter()
                                    .any(|m| *m == text.to_lowercase()))
                    })
                    .collect();
                let folded = match q.values {
                    Some(_) => 0,
                    None => fold_variants(&mut q.codes, &q.labels, &is_missing),
                };
                let missing: Arc<[bool]> = if self.missing_is_value {
                    Arc::from(Vec::new())
                } else {
                    is_missing.into()
                };
                let mut column = SensitiveColumn::new(
                    q.name,
                    q.codes,
                    q.labels,
                    missing,
                    q.values.as_deref(),
                    excluded,
                );
                column.folded = folded;
                if let Some(h) = hierarchy {
                    column.attach_hierarchy(h)?;
                }
                Ok(column)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(QiTable {
            columns,
            sensitive,
            n_rows: self.n_rows,
            excluded: self.excluded,
            outside,
            weights: None,
        })
    }
}

/// Formats a number as the release shows it: integers without a fraction.
pub fn format_number(v: f64) -> String {
    crate::number::format_float(v)
}

/// A table from plain vectors, built by the encoder (here, so that the
/// table module needs no encoder).
impl QiTable {
    /// Builds a table directly from columns of values (tests, examples, and
    /// library users who already hold plain vectors). Each entry is the column
    /// spec and its values as strings; numeric columns must parse as numbers.
    ///
    /// # Errors
    /// As [`Encoder`].
    pub fn from_string_columns(
        spec: &JobSpec,
        hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
        columns: &[(&str, Vec<&str>)],
    ) -> Result<QiTable> {
        use arrow::array::{ArrayRef, RecordBatch, StringArray};
        use arrow::datatypes::Schema;
        let fields: Vec<arrow::datatypes::Field> = columns
            .iter()
            .map(|(n, _)| arrow::datatypes::Field::new(*n, DataType::Utf8, false))
            .collect();
        let arrays: Vec<ArrayRef> = columns
            .iter()
            .map(|(_, v)| Arc::new(StringArray::from(v.clone())) as ArrayRef)
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?;
        let mut enc = Encoder::try_new(spec, hierarchies, batch.schema().as_ref())?;
        enc.push(&batch)?;
        enc.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::NodeId;
    use arrow::array::{ArrayRef, DictionaryArray, Int64Array, StringArray};
    use arrow::datatypes::{Field, Int32Type};

    /// A job spec from JSON (shared by the encoding tests).
    pub(super) fn spec(json: &str) -> JobSpec {
        serde_json::from_str(json).unwrap()
    }

    /// A record batch of nullable columns (shared by the encoding tests).
    pub(super) fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = cols
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            cols.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    #[test]
    fn encodes_strings_numbers_and_dictionaries() {
        let s = spec(
            r#"{"attributes": [{"name": "age", "role": "qi"}, {"name": "sex", "role": "qi"},
                 {"name": "zip", "role": "qi", "masking": true}, {"name": "d", "role": "sensitive"}]}"#,
        );
        let dict: DictionaryArray<Int32Type> = vec!["M", "F", "M"].into_iter().collect();
        let b = batch(vec![
            ("age", Arc::new(Int64Array::from(vec![40, 30, 40]))),
            ("sex", Arc::new(dict)),
            (
                "zip",
                Arc::new(StringArray::from(vec!["4351", "4350", "4362"])),
            ),
            ("d", Arc::new(StringArray::from(vec!["x", "y", "x"]))),
        ]);
        let mut e = Encoder::try_new(&s, &Default::default(), &b.schema()).unwrap();
        e.push(&b).unwrap();
        e.push(&b).unwrap();
        let t = e.finish().unwrap();
        assert_eq!(t.n_rows(), 6);
        let age = &t.columns()[0];
        assert_eq!(age.kind(), Kind::Numeric);
        assert_eq!(age.codes().to_vec(), [1, 0, 1, 1, 0, 1]);
        assert_eq!(age.codes().width(), 1);
        assert_eq!(age.value(1), Some(40.0));
        assert_eq!(age.min_max(), (30.0, 40.0));
        let sex = &t.columns()[1];
        assert_eq!(sex.kind(), Kind::Categorical);
        assert_eq!(sex.label(sex.codes().get(0)), "M");
        assert_eq!(sex.distinct(), 2);
        let zip = &t.columns()[2];
        let h = zip.hierarchy().unwrap();
        assert_eq!(
            h.label(h.lca(NodeId(zip.codes().get(0)), NodeId(zip.codes().get(1)))),
            "435*"
        );
        assert_eq!(t.sensitive()[0].distinct(), 2);
        let classes = EquivalenceClasses::of(&t);
        assert_eq!(classes.len(), 3);
        assert_eq!(classes.rows(0), &[0, 3]);
        assert_eq!(classes.size(1), 2);
    }
}
