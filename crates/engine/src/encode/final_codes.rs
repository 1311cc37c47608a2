//! Finishing a column ([`ColumnEncoder::finish`]): counted problems
//! (nulls, unparsable numbers, values missing from the hierarchy) become
//! errors, and provisional codes are ranked into the final code order
//! (numbers by value, strings by byte order, hierarchy leaves as they are),
//! with the generated hierarchy (intervals, masking), labels, values, counts
//! and bounds of the [`QiColumn`].

use std::sync::Arc;

use super::column::{ColumnEncoder, Dictionary};
use crate::encode::QiColumn;
use crate::error::{Error, Result};
use crate::hierarchy::{Hierarchy, NodeId};
use crate::spec::GeneralisationSpec;

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
    pub(super) fn finish(self, is_qi: bool) -> Result<QiColumn> {
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
                    (GeneralisationSpec::Intervals(levels), true) => {
                        Some(Arc::new(levels.build_coded(
                            &format!("intervals of `{name}`"),
                            &sorted,
                            &exact_labels,
                            self.coding.and_then(|c| c.bottom),
                            self.coding.and_then(|c| c.top),
                        )?))
                    }
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
            windows: self.spec.windows.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::StringArray;
    use rustc_hash::FxHashMap;

    use crate::encode::tests::{batch, spec};
    use crate::encode::Encoder;
    use crate::hierarchy::Hierarchy;

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
}
