//! Streaming one column into provisional codes ([`ColumnEncoder`]): each
//! batch's values are looked up in (or added to) the column's
//! [`Dictionary`] and appended as codes in order of first appearance, so no
//! batch is kept; [`super::final_codes`] ranks them when encoding finishes.
//! Floats print as a release prints them and a NaN quasi-identifier is
//! missing, like a null.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, DictionaryArray};
use arrow::compute::cast;
use arrow::datatypes::{ArrowDictionaryKeyType, DataType};
use arrow::downcast_dictionary_array;
use rustc_hash::FxHashMap;

use crate::codes::CodesBuilder;
use crate::error::Result;
use crate::hierarchy::{Hierarchy, NodeId};
use crate::number::{numbers, printer, Exact, Number};
use crate::spec::{AttributeSpec, GeneralisationSpec, Kind};

/// How one column's values become provisional codes while batches stream in.
#[derive(Debug)]
pub(super) enum Dictionary {
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
pub(super) struct ColumnEncoder {
    pub(super) spec: AttributeSpec,
    pub(super) kind: Kind,
    pub(super) generalisation: GeneralisationSpec,
    pub(super) dict: Dictionary,
    /// A quasi-identifier (NaN is a missing value, like null), not a
    /// sensitive column (NaN is a value of its own, missing for l).
    pub(super) is_qi: bool,
    pub(super) codes: CodesBuilder,
    /// Top and bottom coding ([`AttributeSpec::top_code`]), when given.
    pub(super) coding: Option<Coding>,
    pub(super) nulls: usize,
    pub(super) missing: usize,
    pub(super) unparsable: usize,
}

/// The bounds of a top- and bottom-coded numeric column, as numbers of the
/// column (an integer column's bounds rounded inwards): every value at or
/// beyond a bound is that bound, labelled `>=T` or `<=B`, so the values it
/// stands for are one code and read "this or more" (or less).
#[derive(Debug, Clone, Copy)]
pub(super) struct Coding {
    pub(super) bottom: Option<f64>,
    pub(super) top: Option<f64>,
}

impl Coding {
    /// The coding of `spec` for a column of `value_type`, if it codes.
    ///
    /// # Errors
    /// [`crate::error::Error::Data`] for a column that is not integer or float.
    pub(super) fn of(spec: &AttributeSpec, value_type: &DataType) -> Result<Option<Coding>> {
        if spec.top_code.is_none() && spec.bottom_code.is_none() {
            return Ok(None);
        }
        let integer = value_type.is_integer();
        if !integer && !value_type.is_floating() {
            return Err(crate::error::Error::data(
                &spec.name,
                format!(
                    "has type {value_type}, and top_code/bottom_code code integers or floats: cast the column to a number, or remove the coding"
                ),
            ));
        }
        let round = |v: f64, up: bool| match (integer, up) {
            (false, _) => v,
            (true, true) => v.ceil(),
            (true, false) => v.floor(),
        };
        Ok(Some(Coding {
            bottom: spec.bottom_code.map(|b| round(b, true)),
            top: spec.top_code.map(|t| round(t, false)),
        }))
    }

    /// `n` coded: the bound and its label when it is at or beyond one.
    fn apply(&self, n: Number) -> Option<(Number, String)> {
        if let Some(t) = self.top.filter(|&t| n.value >= t) {
            let t = Number::float(t);
            return Some((t, format!(">={}", t.label())));
        }
        if let Some(b) = self.bottom.filter(|&b| n.value <= b) {
            let b = Number::float(b);
            return Some((b, format!("<={}", b.label())));
        }
        None
    }
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
pub(super) fn nan_rows(array: &ArrayRef) -> Option<Vec<usize>> {
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

const NULL_CODE: u32 = crate::codes::NULL;

impl ColumnEncoder {
    pub(super) fn encode(&mut self, array: &ArrayRef) -> Result<()> {
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
                            let coded = self.coding.as_ref().and_then(|c| c.apply(n));
                            let n = coded.as_ref().map_or(n, |(bound, _)| *bound);
                            let next = values.len() as u32;
                            let code = *map.entry(n.exact).or_insert_with(|| {
                                let label = match coded {
                                    Some((_, label)) => Some(label),
                                    None => printed.as_ref().map(|p| p.value(i).to_string()),
                                };
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
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::StringArray;

    use crate::encode::tests::{batch, spec};
    use crate::encode::Encoder;

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
