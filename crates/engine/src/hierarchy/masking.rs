//! Digit masking hierarchies ([`Hierarchy::masking`]) for equal-length
//! strings such as zip codes: `4351 -> 435* -> 43** -> 4*** -> *`, built
//! from the column's distinct values.

use super::Hierarchy;
use crate::error::{Error, Result};

impl Hierarchy {
    /// Builds a masking hierarchy for equal-length strings such as zip codes:
    /// `4351 -> 435* -> 43** -> 4*** -> *`. Leaves are the given distinct
    /// values.
    ///
    /// # Errors
    /// [`Error::Hierarchy`] when the values are empty or of different lengths
    /// (values are not shown: they come from records).
    pub fn masking(source: &str, values: &[String], mask: char) -> Result<Self> {
        let mut values: Vec<&String> = values.iter().collect();
        values.sort();
        values.dedup();
        let Some(first) = values.first() else {
            return Err(Error::hierarchy(
                source,
                None,
                "no values to build a masking hierarchy from",
            ));
        };
        let len = first.chars().count();
        let wrong = values.iter().filter(|v| v.chars().count() != len).count();
        if wrong > 0 {
            return Err(Error::hierarchy(
                source,
                None,
                format!(
                    "masking needs values of equal length; {wrong} distinct values differ in length from the others \
                     (pad them, or use a hierarchy file)"
                ),
            ));
        }
        let paths = values
            .iter()
            .map(|v| {
                let chars: Vec<char> = v.chars().collect();
                let mut path = vec![v.to_string()];
                for masked in 1..len {
                    let mut s: String = chars[..len - masked].iter().collect();
                    s.extend(std::iter::repeat_n(mask, masked));
                    path.push(s);
                }
                path.push("*".to_string());
                path
            })
            .collect();
        Self::from_paths(source, paths, None, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masking() {
        let v: Vec<String> = ["4351", "4350", "4362"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let h = Hierarchy::masking("zip", &v, '*').unwrap();
        assert_eq!(h.height(), 4);
        let a = h.leaf("4351").unwrap();
        let b = h.leaf("4350").unwrap();
        let c = h.leaf("4362").unwrap();
        assert_eq!(h.label(h.lca(a, b)), "435*");
        assert_eq!(h.label(h.lca(a, c)), "43**");
        assert!(Hierarchy::masking("zip", &["1".into(), "22".into()], '*').is_err());
    }
}
