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

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, DictionaryArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{ArrowDictionaryKeyType, DataType, Schema};
use arrow::downcast_dictionary_array;
use rustc_hash::FxHashMap;

use crate::codes::CodesBuilder;
use crate::error::{Error, Result};
use crate::hierarchy::{Hierarchy, NodeId};
use crate::number::{numbers, printer, Exact, Number};

pub use crate::classes::{EquivalenceClasses, NO_CLASS};
use crate::spec::{AttributeSpec, GeneralisationSpec, JobSpec, Kind, NullPolicy, Role};
pub use crate::table::{QiColumn, QiTable, SensitiveColumn};

/// How one column's values become provisional codes while batches stream in.
#[derive(Debug)]
enum Dictionary {
    /// Values are the leaves of a given hierarchy.
    Leaves(Arc<Hierarchy>),
    /// Distinct strings in order of first appearance (sorted at the end).
    Strings(FxHashMap<String, u32>, Vec<String>),
    /// Distinct numbers, by their exact value, in order of first appearance
    /// (sorted at the end), with the label Arrow prints for decimals and
    /// temporal values.
    Numbers(FxHashMap<Exact, u32>, Vec<(Number, Option<String>)>),
}

#[derive(Debug)]
struct ColumnEncoder {
    spec: AttributeSpec,
    kind: Kind,
    generalisation: GeneralisationSpec,
    dict: Dictionary,
    /// A quasi-identifier (NaN is a missing value, like null), not a
    /// sensitive column (NaN is a value of its own, missing for l).
    is_qi: bool,
    codes: CodesBuilder,
    nulls: usize,
    missing: usize,
    unparsable: usize,
}

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
    n_rows: usize,
    excluded: Vec<u32>,
    missing_is_value: bool,
}

fn is_numeric(dt: &DataType) -> bool {
    dt.is_numeric()
}

/// The text of a float column as a release prints its values (`25`, not
/// `25.0`; `-0` is `0`), so categorical floats, numeric floats and
/// hierarchy leaves written for the values agree; NaN is missing (null);
/// `None` for other types.
fn float_text(column: &str, array: &ArrayRef) -> Result<Option<ArrayRef>> {
    if !matches!(
        array.data_type(),
        DataType::Float16 | DataType::Float32 | DataType::Float64
    ) {
        return Ok(None);
    }
    let text: arrow::array::StringArray = numbers(column, array, &mut 0)?
        .into_iter()
        .map(|n| n.filter(|n| !n.value.is_nan()).map(|n| n.label()))
        .collect();
    Ok(Some(Arc::new(text)))
}

/// The positions of NaN values of a float array (plain or dictionary), if
/// any: a NaN quasi-identifier is a missing value, like a null.
fn nan_rows(array: &ArrayRef) -> Option<Vec<usize>> {
    let value_type = match array.data_type() {
        DataType::Dictionary(_, v) => v.as_ref(),
        other => other,
    };
    if !matches!(
        value_type,
        DataType::Float16 | DataType::Float32 | DataType::Float64
    ) {
        return None;
    }
    let floats = cast(array, &DataType::Float64).ok()?;
    let rows: Vec<usize> = floats
        .as_primitive::<arrow::datatypes::Float64Type>()
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.is_some_and(f64::is_nan).then_some(i))
        .collect();
    (!rows.is_empty()).then_some(rows)
}

impl Encoder {
    /// Prepares encoding for batches of `schema`.
    ///
    /// `hierarchies` maps each hierarchy file path of the spec to its parsed
    /// hierarchy.
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
            Ok(ColumnEncoder {
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
        Ok(Encoder {
            columns,
            sensitive,
            n_rows: 0,
            excluded: Vec::new(),
            missing_is_value: spec.privacy.missing_sensitive
                == crate::spec::MissingSensitive::Value,
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
        let columns = self
            .columns
            .into_iter()
            .map(|c| c.finish(true))
            .collect::<Result<Vec<_>>>()?;
        let sensitive = self
            .sensitive
            .into_iter()
            .map(|c| {
                let q = c.finish(false)?;
                let missing: Arc<[bool]> = if self.missing_is_value {
                    Arc::from(Vec::new())
                } else {
                    q.labels
                        .iter()
                        .enumerate()
                        .map(|(code, label)| {
                            label.trim().is_empty()
                                || q.values.as_ref().is_some_and(|v| v[code].is_nan())
                        })
                        .collect()
                };
                Ok(SensitiveColumn {
                    name: q.name,
                    codes: q.codes,
                    labels: q.labels,
                    missing,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(QiTable {
            columns,
            sensitive,
            n_rows: self.n_rows,
            excluded: self.excluded,
        })
    }
}

const NULL_CODE: u32 = crate::codes::NULL;

/// What a column's dictionary becomes when encoding finishes: the label and
/// numeric value of every final code, the hierarchy, and the rank that turns
/// provisional codes (order of first appearance) into final ones (value
/// order); no rank when they are final already (hierarchy leaves).
type Dictionaries = (
    Arc<[String]>,
    Option<Arc<[f64]>>,
    Option<Arc<Hierarchy>>,
    Option<Vec<u32>>,
);

impl ColumnEncoder {
    fn encode(&mut self, array: &ArrayRef) -> Result<()> {
        // A NaN quasi-identifier is missing: coded as a null, so it enters
        // no dictionary, domain or bound ([`Encoder::push`] counts it).
        let nan_free;
        let array = match nan_rows(array).filter(|_| self.is_qi) {
            Some(rows) => {
                let mut mask = vec![false; array.len()];
                for i in rows {
                    mask[i] = true;
                }
                nan_free = arrow::compute::nullif(array, &mask.into())?;
                &nan_free
            }
            None => array,
        };
        if let DataType::Dictionary(_, _) = array.data_type() {
            downcast_dictionary_array!(
                array => return self.encode_dictionary(array),
                _ => unreachable!()
            );
        }
        let codes = self.provisional_codes(array)?;
        self.codes.extend(&codes);
        Ok(())
    }

    fn encode_dictionary<K: ArrowDictionaryKeyType>(
        &mut self,
        array: &DictionaryArray<K>,
    ) -> Result<()> {
        // Only the dictionary values some row uses are data: unused values
        // must not enter the domain, the bounds or the hierarchy checks.
        let mut slot = vec![u32::MAX; array.values().len()];
        let mut used: Vec<u32> = Vec::new();
        for i in 0..array.len() {
            if array.is_valid(i) {
                let k = arrow::datatypes::ArrowNativeType::as_usize(array.keys().value(i));
                if slot[k] == u32::MAX {
                    slot[k] = used.len() as u32;
                    used.push(k as u32);
                }
            }
        }
        let used_values = arrow::compute::take(
            array.values().as_ref(),
            &arrow::array::UInt32Array::from(used),
            None,
        )?;
        let value_codes = self.provisional_codes(&used_values)?;
        let codes: Vec<u32> = (0..array.len())
            .map(|i| {
                if array.is_null(i) {
                    NULL_CODE
                } else {
                    let k = arrow::datatypes::ArrowNativeType::as_usize(array.keys().value(i));
                    value_codes[slot[k] as usize]
                }
            })
            .collect();
        self.codes.extend(&codes);
        Ok(())
    }

    /// Provisional code per element of a plain (non-dictionary) array.
    fn provisional_codes(&mut self, array: &ArrayRef) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(array.len());
        match &mut self.dict {
            Dictionary::Numbers(map, values) => {
                let printed = printer(array.as_ref())?;
                for (i, n) in numbers(&self.spec.name, array, &mut self.unparsable)?
                    .into_iter()
                    .enumerate()
                {
                    match n {
                        None => out.push(NULL_CODE),
                        Some(n) if !self.is_qi && n.value.is_nan() => out.push(NULL_CODE),
                        Some(n) => {
                            let next = values.len() as u32;
                            let code = *map.entry(n.exact).or_insert_with(|| {
                                let label = printed.as_ref().map(|p| p.value(i).to_string());
                                values.push((n, label));
                                next
                            });
                            out.push(code);
                        }
                    }
                }
            }
            Dictionary::Strings(map, values) => {
                let strings =
                    float_text(&self.spec.name, array)?.unwrap_or(cast(array, &DataType::Utf8)?);
                for s in strings.as_string::<i32>().iter() {
                    match s {
                        None => out.push(NULL_CODE),
                        Some(s) if !self.is_qi && s.trim().is_empty() => out.push(NULL_CODE),
                        Some(s) => {
                            let code = match map.get(s) {
                                Some(&c) => c,
                                None => {
                                    let c = values.len() as u32;
                                    map.insert(s.to_string(), c);
                                    values.push(s.to_string());
                                    c
                                }
                            };
                            out.push(code);
                        }
                    }
                }
            }
            Dictionary::Leaves(h) => {
                // A float is looked up as the release prints it (`25`) and,
                // failing that, as Arrow prints it (`25.0`): a hierarchy file
                // may be written either way.
                let printed = float_text(&self.spec.name, array)?;
                let strings = cast(array, &DataType::Utf8)?;
                for (i, s) in strings.as_string::<i32>().iter().enumerate() {
                    let first = printed.as_ref().and_then(|p| {
                        p.as_string::<i32>()
                            .is_valid(i)
                            .then(|| p.as_string::<i32>().value(i))
                    });
                    match s {
                        None => out.push(NULL_CODE),
                        Some(s) => match first
                            .and_then(|f| h.leaf(f))
                            .or_else(|| h.leaf(s))
                            .or_else(|| h.leaf(s.trim()))
                        {
                            Some(NodeId(c)) => out.push(c),
                            None => {
                                self.missing += 1;
                                out.push(NULL_CODE);
                            }
                        },
                    }
                }
            }
        }
        Ok(out)
    }

    fn finish(self, is_qi: bool) -> Result<QiColumn> {
        let name = self.spec.name.clone();
        if self.nulls > 0 {
            return Err(Error::data(
                &name,
                format!(
                    "{} rows are null (or NaN); fill them, drop them, or set `nulls = \"suppress\"` on the attribute to suppress those rows",
                    self.nulls
                ),
            ));
        }
        if self.unparsable > 0 {
            return Err(Error::data(
                &name,
                format!(
                    "{} rows are not numbers although the attribute is numeric; fix the data or set `type = \"categorical\"`",
                    self.unparsable
                ),
            ));
        }
        if self.missing > 0 {
            let source = match &self.dict {
                Dictionary::Leaves(h) => h.source().to_string(),
                _ => String::new(),
            };
            return Err(Error::data(
                &name,
                format!(
                    "{} rows hold values that are not leaves of the hierarchy {source}; add those values to the hierarchy file",
                    self.missing
                ),
            ));
        }
        let (labels, values, hierarchy, rank): Dictionaries = match self.dict {
            Dictionary::Leaves(h) => {
                let labels: Vec<String> = (0..h.leaf_count() as u32)
                    .map(|l| h.label(NodeId(l)).to_string())
                    .collect();
                (labels.into(), None, Some(h), None)
            }
            Dictionary::Numbers(_, numbers) => {
                let mut order: Vec<u32> = (0..numbers.len() as u32).collect();
                order.sort_by(|&a, &b| {
                    let (a, b) = (&numbers[a as usize].0, &numbers[b as usize].0);
                    a.exact.cmp_with(a.value, &b.exact, b.value)
                });
                let mut rank = vec![0u32; numbers.len()];
                for (r, &o) in order.iter().enumerate() {
                    rank[o as usize] = r as u32;
                }
                let sorted: Vec<f64> = order.iter().map(|&o| numbers[o as usize].0.value).collect();
                let exact_labels: Vec<String> = order
                    .iter()
                    .map(|&o| match &numbers[o as usize] {
                        (_, Some(printed)) => printed.clone(),
                        (n, None) => n.label(),
                    })
                    .collect();
                let hierarchy = match (&self.generalisation, is_qi) {
                    (GeneralisationSpec::Intervals(levels), true) => Some(Arc::new(levels.build(
                        &format!("intervals of `{name}`"),
                        &sorted,
                        &exact_labels,
                    )?)),
                    _ => None,
                };
                let labels: Vec<String> = match &hierarchy {
                    Some(h) => (0..sorted.len() as u32)
                        .map(|c| h.label(NodeId(c)).to_string())
                        .collect(),
                    None => exact_labels,
                };
                (labels.into(), Some(sorted.into()), hierarchy, Some(rank))
            }
            Dictionary::Strings(_, values) => {
                let mut order: Vec<u32> = (0..values.len() as u32).collect();
                order.sort_by(|&a, &b| values[a as usize].cmp(&values[b as usize]));
                let mut rank = vec![0u32; values.len()];
                for (r, &o) in order.iter().enumerate() {
                    rank[o as usize] = r as u32;
                }
                let sorted: Vec<String> =
                    order.iter().map(|&o| values[o as usize].clone()).collect();
                let hierarchy = match (&self.generalisation, is_qi) {
                    (GeneralisationSpec::Masking, true) => Some(Arc::new(Hierarchy::masking(
                        &format!("masking of `{name}`"),
                        &sorted,
                        '*',
                    )?)),
                    _ => None,
                };
                // Masking sorts its leaves the same way, so leaf code == rank.
                (sorted.into(), None, hierarchy, Some(rank))
            }
        };
        // Every missing sensitive value (NULL, NaN, a blank string) is one
        // code of its own, shown empty: folding it into code 0 would merge
        // it with a real value, and keeping NULL and "" apart would count
        // "missing" twice under `missing_sensitive = "value"`. (Null QIs are
        // excluded rows, handled above.)
        let null_code = (!is_qi && self.codes.has_nulls()).then_some(labels.len() as u32);
        let (labels, values) = if null_code.is_some() {
            let mut labels = labels.to_vec();
            labels.push(String::new());
            let values = values.map(|v| {
                let mut v = v.to_vec();
                v.push(f64::NAN);
                Arc::from(v)
            });
            (Arc::from(labels), values)
        } else {
            (labels, values)
        };
        // Final codes, counted, in the column's final width; a null QI
        // (an excluded row) holds code 0 and is not counted.
        let mut counts = vec![0u32; labels.len()];
        let codes = self.codes.finish(labels.len(), |provisional| {
            let code = match (provisional, null_code) {
                (Some(p), _) => rank.as_ref().map_or(p, |rank| rank[p as usize]),
                (None, Some(null)) => null,
                (None, None) => return 0,
            };
            counts[code as usize] += 1;
            code
        });
        let mut min = f64::INFINITY;
        let mut max = f64::NEG_INFINITY;
        if let Some(v) = &values {
            for (c, &n) in counts.iter().enumerate() {
                if n > 0 {
                    min = min.min(v[c]);
                    max = max.max(v[c]);
                }
            }
        }
        if !min.is_finite() {
            min = 0.0;
            max = 0.0;
        }
        let mut observed_before = Vec::with_capacity(counts.len());
        let mut seen = 0u32;
        for &n in &counts {
            observed_before.push(seen);
            seen += (n > 0) as u32;
        }
        Ok(QiColumn {
            name,
            kind: self.kind,
            weight: self.spec.weight(),
            codes,
            hierarchy,
            labels,
            values,
            counts,
            observed_before,
            distinct: seen as usize,
            min,
            max,
        })
    }
}

/// Formats a number as the release shows it: integers without a fraction.
pub fn format_number(v: f64) -> String {
    crate::number::format_float(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{DictionaryArray, Int64Array, StringArray};
    use arrow::datatypes::{Field, Int32Type};

    fn spec(json: &str) -> JobSpec {
        serde_json::from_str(json).unwrap()
    }

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
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

    #[test]
    fn errors_count_rows_and_hide_values() {
        let s = spec(r#"{"attributes": [{"name": "sex", "role": "qi", "hierarchy": "sex.csv"}]}"#);
        let h = Arc::new(Hierarchy::from_csv("sex.csv", "M;*\nF;*\n", ';').unwrap());
        let hs: FxHashMap<String, Arc<Hierarchy>> =
            [("sex.csv".to_string(), h)].into_iter().collect();
        let b = batch(vec![(
            "sex",
            Arc::new(StringArray::from(vec![
                Some("M"),
                Some("Secret"),
                Some("Secret2"),
            ])),
        )]);
        let mut e = Encoder::try_new(&s, &hs, &b.schema()).unwrap();
        e.push(&b).unwrap();
        let err = e.finish().unwrap_err().to_string();
        assert!(
            err.contains("`sex`") && err.contains("2 rows") && err.contains("sex.csv"),
            "{err}"
        );
        assert!(!err.contains("Secret"), "{err}");

        let b = batch(vec![(
            "sex",
            Arc::new(StringArray::from(vec![Some("M"), None])),
        )]);
        let mut e = Encoder::try_new(&s, &hs, &b.schema()).unwrap();
        e.push(&b).unwrap();
        let err = e.finish().unwrap_err().to_string();
        assert!(
            err.contains("1 rows are null") && err.contains("nulls = \\\"suppress\\\"")
                || err.contains("nulls = \"suppress\""),
            "{err}"
        );

        let s2 = spec(
            r#"{"attributes": [{"name": "sex", "role": "qi", "hierarchy": "sex.csv", "nulls": "suppress"}]}"#,
        );
        let mut e = Encoder::try_new(&s2, &hs, &b.schema()).unwrap();
        e.push(&b).unwrap();
        let t = e.finish().unwrap();
        assert_eq!(t.excluded(), &[1]);
        assert_eq!(t.active_rows(), vec![0]);

        let err = Encoder::try_new(
            &spec(r#"{"attributes": [{"name": "nope", "role": "qi"}]}"#),
            &hs,
            &b.schema(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`nope`") && err.contains("not found") && err.contains("[sex]"),
            "{err}"
        );

        let s3 = spec(r#"{"attributes": [{"name": "sex", "role": "qi", "type": "numeric"}]}"#);
        let b = batch(vec![("sex", Arc::new(StringArray::from(vec!["1", "x"])))]);
        let mut e = Encoder::try_new(&s3, &hs, &b.schema()).unwrap();
        e.push(&b).unwrap();
        let err = e.finish().unwrap_err().to_string();
        assert!(err.contains("1 rows are not numbers"), "{err}");
    }

    /// Classes by brute force: rows with equal codes on every QI, numbered
    /// by first row.
    fn classes_by_brute_force(t: &QiTable) -> Vec<u32> {
        let mut seen: Vec<Vec<u32>> = Vec::new();
        (0..t.n_rows() as u32)
            .map(|r| {
                let tuple: Vec<u32> = t.row(r).collect();
                match seen.iter().position(|s| *s == tuple) {
                    Some(c) => c as u32,
                    None => {
                        seen.push(tuple);
                        seen.len() as u32 - 1
                    }
                }
            })
            .collect()
    }

    #[test]
    fn classes_group_equal_rows_with_packed_and_wide_keys() {
        // 8 QIs of 3 bits pack into one u128; 50 QIs need a key per class.
        for n_qi in [8, 50] {
            let names: Vec<String> = (0..n_qi).map(|q| format!("q{q}")).collect();
            let attributes: Vec<String> = names
                .iter()
                .map(|n| format!(r#"{{"name": "{n}", "role": "qi"}}"#))
                .collect();
            let s = spec(&format!(r#"{{"attributes": [{}]}}"#, attributes.join(",")));
            // Few distinct rows, more than one chunk of keys.
            let values: Vec<Vec<String>> = (0..n_qi)
                .map(|q| {
                    (0..2_500usize)
                        .map(|r| format!("v{}", (r * 7 + q) % 5 * ((r / 3) % 4)))
                        .collect()
                })
                .collect();
            let columns: Vec<(&str, Vec<&str>)> = names
                .iter()
                .zip(&values)
                .map(|(n, v)| (n.as_str(), v.iter().map(String::as_str).collect()))
                .collect();
            let t = QiTable::from_string_columns(&s, &Default::default(), &columns).unwrap();
            let expected = classes_by_brute_force(&t);
            let classes = EquivalenceClasses::of(&t);
            assert_eq!(classes.class_of_row(), expected.as_slice(), "{n_qi} QIs");
            let n_classes = *expected.iter().max().unwrap() as usize + 1;
            assert_eq!(classes.len(), n_classes);
            for c in 0..n_classes {
                let first = classes.rows(c)[0];
                assert!(classes.tuple(c).iter().copied().eq(t.row(first)));
            }
        }
    }

    #[test]
    fn heap_bytes_count_the_narrow_codes() {
        let s = spec(
            r#"{"attributes": [{"name": "q", "role": "qi"}, {"name": "d", "role": "sensitive"}]}"#,
        );
        let q: Vec<String> = (0..1_000).map(|i| format!("{}", i % 300)).collect();
        let d: Vec<String> = (0..1_000).map(|i| format!("{}", i % 3)).collect();
        let t = QiTable::from_string_columns(
            &s,
            &Default::default(),
            &[
                ("q", q.iter().map(String::as_str).collect()),
                ("d", d.iter().map(String::as_str).collect()),
            ],
        )
        .unwrap();
        assert_eq!(t.columns()[0].codes().width(), 2);
        assert_eq!(t.sensitive()[0].codes().width(), 1);
        assert_eq!(t.heap_bytes(), 1_000 * 2 + 1_000);
        let sub = t.restrict(&[3, 1, 4]);
        assert_eq!(sub.heap_bytes(), 3 * 2 + 3);
        assert_eq!(
            sub.columns()[0].codes().get(0),
            t.columns()[0].codes().get(3)
        );
    }

    #[test]
    fn null_sensitive_values_are_a_value_of_their_own() {
        let s = spec(
            r#"{"attributes": [{"name": "q", "role": "qi"}, {"name": "d", "role": "sensitive"}]}"#,
        );
        let b = batch(vec![
            ("q", Arc::new(StringArray::from(vec!["x", "x", "x"]))),
            (
                "d",
                Arc::new(StringArray::from(vec![Some("a"), None, Some("b")])),
            ),
        ]);
        let mut e = Encoder::try_new(&s, &Default::default(), &b.schema()).unwrap();
        e.push(&b).unwrap();
        let t = e.finish().unwrap();
        let d = &t.sensitive()[0];
        assert_eq!(d.distinct(), 3);
        let codes = d.codes().to_vec();
        assert!(codes[0] != codes[1] && codes[1] != codes[2] && codes[0] != codes[2]);
        assert!(t.excluded().is_empty());
    }
}
