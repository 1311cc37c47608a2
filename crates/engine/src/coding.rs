//! Top and bottom coding of numeric columns (Hundepool et al.,
//! *Statistical Disclosure Control*, 2012, §3.4.4; sdcMicro's
//! `topBotCoding`): the values beyond a bound are published as the bound,
//! so a rare large income or a great age stops singling its record out.
//!
//! A quasi-identifier is coded when it is encoded (its bound becomes one
//! leaf labelled `>=T` or `<=B`, and the intervals and ranges that hold it
//! read open-ended); a sensitive or insensitive column is coded when the
//! release is recoded ([`code_array`]). [`check_published`] is the
//! verifier's side: a release whose coded column shows a value beyond its
//! bounds fails, whoever wrote it.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, Scalar};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type};

use crate::error::{Error, Result};
use crate::spec::{AttributeSpec, Role};

/// The bounds of one coded column of a job.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Coded {
    pub(crate) name: String,
    pub(crate) bottom: Option<f64>,
    pub(crate) top: Option<f64>,
    /// A quasi-identifier: published as labels, not as numbers.
    pub(crate) labels: bool,
}

impl Coded {
    /// The coded columns of a job's attributes.
    pub(crate) fn of<'a>(attributes: impl IntoIterator<Item = &'a AttributeSpec>) -> Vec<Coded> {
        attributes
            .into_iter()
            .filter(|a| a.top_code.is_some() || a.bottom_code.is_some())
            .map(|a| Coded {
                name: a.name.clone(),
                bottom: a.bottom_code,
                top: a.top_code,
                labels: a.role == Role::QuasiIdentifier,
            })
            .collect()
    }
}

/// `array` (a column of integers or floats, possibly dictionary-encoded)
/// with every value above `top` replaced by `top` and every value below
/// `bottom` by `bottom` (an integer column's bounds rounded inwards); nulls
/// and NaN stay as they are. A dictionary column comes back plain.
///
/// # Errors
/// [`Error::Data`] naming the column for any other type.
pub(crate) fn code_array(coded: &Coded, array: &ArrayRef) -> Result<ArrayRef> {
    let array = match array.data_type() {
        DataType::Dictionary(_, value) => cast(array, value)?,
        _ => array.clone(),
    };
    let dt = array.data_type().clone();
    let integer = dt.is_integer();
    if !integer && !dt.is_floating() {
        return Err(Error::data(
            &coded.name,
            format!(
                "has type {dt}, and top_code/bottom_code code integers or floats: cast the column to a number, or remove the coding"
            ),
        ));
    }
    let numbers = cast(&array, &DataType::Float64)?;
    let numbers = numbers.as_primitive::<Float64Type>();
    let mut out = array;
    let bounds = [
        (coded.top.map(|t| if integer { t.floor() } else { t }), true),
        (
            coded.bottom.map(|b| if integer { b.ceil() } else { b }),
            false,
        ),
    ];
    for (bound, above) in bounds {
        let Some(bound) = bound else { continue };
        let beyond: BooleanArray = numbers
            .iter()
            .map(|v| v.map(|v| if above { v > bound } else { v < bound }))
            .collect();
        if beyond.true_count() == 0 {
            continue;
        }
        let value = cast(
            &(Arc::new(Float64Array::from(vec![bound])) as ArrayRef),
            &dt,
        )?;
        out = arrow::compute::kernels::zip::zip(&beyond, &Scalar::new(value), &out)?;
    }
    Ok(out)
}

/// Checks a released column of a coded attribute: numbers (sensitive and
/// insensitive columns) must lie within the bounds; a quasi-identifier's
/// labels may show no number beyond them (`[80-84]` under `top_code = 80`
/// says someone is 84). Counts, never values, in the message.
///
/// # Errors
/// [`Error::VerificationFailed`] naming the column and the bound.
pub(crate) fn check_published(coded: &Coded, array: &ArrayRef) -> Result<()> {
    let beyond = |v: f64| coded.top.is_some_and(|t| v > t) || coded.bottom.is_some_and(|b| v < b);
    let count = if coded.labels {
        let labels = match array.data_type() {
            // Every label of the dictionary: the recoder's dictionaries hold
            // only labels of published classes.
            DataType::Dictionary(_, _) => {
                let dict = array.as_any_dictionary();
                cast(dict.values(), &DataType::Utf8)?
            }
            _ => cast(array, &DataType::Utf8)?,
        };
        labels
            .as_string::<i32>()
            .iter()
            .flatten()
            .filter(|l| numbers_in(l).into_iter().any(beyond))
            .count()
    } else {
        let numbers = cast(array, &DataType::Float64).map_err(|_| {
            Error::VerificationFailed(format!(
                "`{}` is top- or bottom-coded but the release holds it as {}, not as numbers",
                coded.name,
                array.data_type()
            ))
        })?;
        numbers
            .as_primitive::<Float64Type>()
            .iter()
            .flatten()
            .filter(|&v| beyond(v))
            .count()
    };
    if count == 0 {
        return Ok(());
    }
    let bounds = match (coded.bottom, coded.top) {
        (Some(b), Some(t)) => format!("bottom_code = {b}, top_code = {t}"),
        (Some(b), None) => format!("bottom_code = {b}"),
        (None, Some(t)) => format!("top_code = {t}"),
        (None, None) => String::new(),
    };
    Err(Error::VerificationFailed(format!(
        "{count} published {} of `{}` show a value beyond its coding ({bounds}): the release was not coded as the job says",
        if coded.labels { "labels" } else { "values" },
        coded.name
    )))
}

/// The numbers a published label of a numeric column shows: `42`,
/// `[40-49]`, `[40-50)`, `>=80`, `<25`, `{17,>=80}`; a `-` right after a
/// digit separates a range's ends, elsewhere it is a sign.
fn numbers_in(label: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous: Option<char> = None;
    let flush = |current: &mut String, out: &mut Vec<f64>| {
        if let Ok(v) = current.parse::<f64>() {
            out.push(v);
        }
        current.clear();
    };
    for ch in label.chars() {
        let digit_before = previous.is_some_and(|p| p.is_ascii_digit() || p == '.');
        match ch {
            '0'..='9' | '.' => current.push(ch),
            '-' if !digit_before => {
                flush(&mut current, &mut out);
                current.push('-');
            }
            _ => flush(&mut current, &mut out),
        }
        previous = Some(ch);
    }
    flush(&mut current, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray};

    use super::*;

    fn coded(labels: bool) -> Coded {
        Coded {
            name: "income".into(),
            bottom: Some(10.5),
            top: Some(100.5),
            labels,
        }
    }

    #[test]
    fn values_beyond_the_bounds_become_the_bounds_and_nulls_stay() {
        let array: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(5),
            Some(11),
            None,
            Some(100),
            Some(101),
            Some(900),
        ]));
        let out = code_array(&coded(false), &array).unwrap();
        let out = out.as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(
            out.iter().collect::<Vec<_>>(),
            vec![Some(11), Some(11), None, Some(100), Some(100), Some(100)],
            "integer bounds rounded inwards: 10.5 -> 11, 100.5 -> 100"
        );
        assert!(check_published(&coded(false), &(Arc::new(out.clone()) as ArrayRef)).is_ok());
        let err = check_published(&coded(false), &array)
            .unwrap_err()
            .to_string();
        assert!(err.contains("3 published values of `income`"), "{err}");
        assert!(!err.contains("900"), "no value in the message: {err}");
    }

    #[test]
    fn strings_cannot_be_coded() {
        let array: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        let err = code_array(&coded(false), &array).unwrap_err().to_string();
        assert!(
            err.contains("income") && err.contains("integers or floats"),
            "{err}"
        );
    }

    #[test]
    fn labels_are_read_for_their_numbers() {
        assert_eq!(numbers_in("[40-49]"), vec![40.0, 49.0]);
        assert_eq!(numbers_in("[-5--1]"), vec![-5.0, -1.0]);
        assert_eq!(numbers_in(">=80"), vec![80.0]);
        assert_eq!(numbers_in("{17,<=20,2.5}"), vec![17.0, 20.0, 2.5]);
        assert!(numbers_in("*").is_empty());
        let ok: ArrayRef = Arc::new(StringArray::from(vec!["[40-49]", ">=100", "<=11", "*"]));
        assert!(check_published(&coded(true), &ok).is_ok());
        let leaked: ArrayRef = Arc::new(StringArray::from(vec!["[100-104]", "9", "50"]));
        let err = check_published(&coded(true), &leaked)
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 published labels"), "{err}");
    }
}
