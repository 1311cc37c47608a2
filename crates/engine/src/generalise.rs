//! Published cells: what a generalised QI value is, what it covers, and how
//! it is labelled in a release.
//!
//! A [`Cell`] is one of the generalisation models of `docs/SPEC.md` section 2:
//! a hierarchy node (leaves included: an unchanged value is its own leaf), a
//! numeric range of a flexible column, a value set of a flexible categorical
//! column, or a suppressed cell. All of them are expressed in the column's
//! codes (see [`crate::encode`]).

use std::sync::Arc;

use crate::encode::QiColumn;
use crate::hierarchy::{Level, NodeId};
use crate::spec::Kind;

/// One published QI cell.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Cell {
    /// A hierarchy node; a leaf is the unchanged value.
    Node(NodeId),
    /// Codes `lo..=hi` of a flexible numeric column (`[min-max]`).
    Range {
        /// Smallest code covered.
        lo: u32,
        /// Largest code covered.
        hi: u32,
    },
    /// A set of codes of a flexible categorical column, ascending.
    Set(Arc<[u32]>),
    /// The cell is withheld (`*`).
    Suppressed,
}

/// A generalised tuple: one cell per QI, in job order.
pub type GeneralisedTuple = Vec<Cell>;

impl QiColumn {
    /// The tightest cell of this column covering all of `codes`: their lowest
    /// common ancestor with a hierarchy, else their `[min-max]` range
    /// (numeric) or value set (categorical).
    ///
    /// # Panics
    /// When `codes` is empty.
    pub fn cell_of(&self, codes: impl IntoIterator<Item = u32>) -> Cell {
        let mut codes = codes.into_iter();
        let first = codes.next().expect("a cell covers at least one value");
        match (self.hierarchy(), self.kind()) {
            (Some(h), _) => {
                let mut node = NodeId(first);
                for c in codes {
                    node = h.lca(node, NodeId(c));
                }
                Cell::Node(node)
            }
            (None, _) => self.flexible_cell_of(std::iter::once(first).chain(codes)),
        }
    }

    /// The tightest cell ignoring any hierarchy: the `[min-max]` range of a
    /// numeric column, the value set of a categorical one. Local recoding
    /// publishes numeric QIs this way even when they have an interval
    /// hierarchy (which full-domain algorithms need).
    pub fn flexible_cell_of(&self, codes: impl IntoIterator<Item = u32>) -> Cell {
        let mut codes = codes.into_iter();
        let first = codes.next().expect("a cell covers at least one value");
        match self.kind() {
            Kind::Numeric => {
                let (lo, hi) = codes.fold((first, first), |(lo, hi), c| (lo.min(c), hi.max(c)));
                Cell::Range { lo, hi }
            }
            Kind::Categorical => {
                let mut set: Vec<u32> = std::iter::once(first).chain(codes).collect();
                set.sort_unstable();
                set.dedup();
                Cell::Set(set.into())
            }
        }
    }

    /// The cell of an unchanged value.
    pub fn leaf_cell(&self, code: u32) -> Cell {
        match (self.hierarchy(), self.kind()) {
            (Some(_), _) => Cell::Node(NodeId(code)),
            (None, Kind::Numeric) => Cell::Range { lo: code, hi: code },
            (None, Kind::Categorical) => Cell::Set(Arc::from(vec![code])),
        }
    }

    /// The fully generalised cell (the root, or everything observed).
    pub fn root_cell(&self) -> Cell {
        match self.hierarchy() {
            Some(h) => Cell::Node(h.root()),
            None => Cell::Suppressed,
        }
    }

    /// Whether `cell` covers the value with code `code`.
    pub fn covers(&self, cell: &Cell, code: u32) -> bool {
        match cell {
            Cell::Node(n) => self
                .hierarchy()
                .is_some_and(|h| h.leaves(*n).contains(&code)),
            Cell::Range { lo, hi } => (*lo..=*hi).contains(&code),
            Cell::Set(s) => s.binary_search(&code).is_ok(),
            Cell::Suppressed => true,
        }
    }

    /// Number of the column's distinct observed values the cell covers
    /// (`m` of NCP and granularity).
    pub fn covered(&self, cell: &Cell) -> usize {
        match cell {
            Cell::Node(n) => {
                let r = self.hierarchy().map_or(0..0, |h| h.leaves(*n));
                self.observed_in(r.start, r.end)
            }
            Cell::Range { lo, hi } => self.observed_in(*lo, hi + 1),
            Cell::Set(s) => s.iter().filter(|&&c| self.is_observed(c)).count(),
            Cell::Suppressed => self.distinct(),
        }
    }

    /// The numeric extent `(lo, hi)` of a cell over the observed values of a
    /// numeric column, `None` for categorical columns.
    pub fn extent(&self, cell: &Cell) -> Option<(f64, f64)> {
        if self.kind() != Kind::Numeric {
            return None;
        }
        let (lo, hi) = match cell {
            Cell::Node(n) => {
                let r = self.hierarchy()?.leaves(*n);
                let first = (r.start..r.end).find(|&c| self.is_observed(c))?;
                let last = (r.start..r.end).rev().find(|&c| self.is_observed(c))?;
                (first, last)
            }
            Cell::Range { lo, hi } => (*lo, *hi),
            Cell::Set(s) => (*s.first()?, *s.last()?),
            Cell::Suppressed => return Some(self.min_max()),
        };
        Some((self.value(lo)?, self.value(hi)?))
    }

    /// The hierarchy level of the cell (0 = unchanged leaf), for columns with
    /// a hierarchy; `None` for flexible columns.
    pub fn level(&self, cell: &Cell) -> Option<Level> {
        match (cell, self.hierarchy()) {
            (Cell::Node(n), Some(h)) => Some(h.level(*n)),
            (Cell::Suppressed, Some(h)) => Some(Level(h.height())),
            _ => None,
        }
    }

    /// Whether the cell publishes the value unchanged.
    pub fn is_unchanged(&self, cell: &Cell) -> bool {
        match cell {
            Cell::Node(n) => self.hierarchy().is_some_and(|h| h.level(*n) == Level(0)),
            Cell::Range { lo, hi } => lo == hi,
            Cell::Set(s) => s.len() == 1,
            Cell::Suppressed => false,
        }
    }

    /// The label a release shows for the cell: the node's label, the value,
    /// `[lo-hi]`, `{a,b}`, or `*`, in the grammar of [`escape_value`]: a
    /// value from the data that would read as a set, a range or `*` is
    /// escaped, so every label parses one way. A hierarchy's labels are
    /// the job's own vocabulary and are published as written.
    pub fn cell_label(&self, cell: &Cell) -> String {
        match cell {
            Cell::Node(n) => match self.hierarchy() {
                Some(h) => h.label(*n).to_string(),
                None => escape_value(self.label(n.0)),
            },
            Cell::Range { lo, hi } if lo == hi => escape_value(self.label(*lo)),
            Cell::Range { lo, hi } => {
                let (lo, hi) = (self.label(*lo), self.label(*hi));
                // A top- or bottom-coded end (`>=80`, `<=20`, the only
                // labels of a numeric column that are not numbers) makes
                // the range open on that side.
                let numeric = self.kind() == Kind::Numeric;
                match (
                    numeric && lo.starts_with("<="),
                    numeric && hi.starts_with(">="),
                ) {
                    (true, true) => "*".to_string(),
                    (true, false) => format!("<={hi}"),
                    (false, true) => format!(">={lo}"),
                    (false, false) => format!("[{lo}-{hi}]"),
                }
            }
            Cell::Set(s) if s.len() == 1 => escape_value(self.label(s[0])),
            Cell::Set(s) => {
                let labels: Vec<String> =
                    s.iter().map(|&c| escape_element(self.label(c))).collect();
                format!("{{{}}}", labels.join(","))
            }
            Cell::Suppressed => "*".to_string(),
        }
    }
}

/// A value from the data as a published label: as written, unless it would
/// read as something else (a value set `{...}`, a range `[...]`, the
/// suppressed `*`, or an escaped label `\...`), which is published with a
/// `\` in front. So `{a,b}` as a raw category is `\{a,b}`, while the set
/// of `a` and `b` is `{a,b}` (issue 32, item 11). A reader strips one
/// leading `\` and reads the rest as the value.
pub fn escape_value(value: &str) -> String {
    if value == "*" || value.starts_with(['{', '[', '\\']) {
        format!("\\{value}")
    } else {
        value.to_string()
    }
}

/// A value from the data as an element of a published set `{a,b}`: `\`,
/// `,`, `{` and `}` escaped with `\`, so `{Rome,\{a\,b\}}` is the set of
/// `Rome` and `{a,b}`.
pub fn escape_element(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        if matches!(ch, '\\' | ',' | '{' | '}') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// The elements of a published set's inside (`a,b\,c` is `a` and `b,c`),
/// unescaped: the inverse of [`escape_element`] joined by commas.
pub fn split_set(inner: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = inner.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.last_mut().expect("non-empty").push(next);
                }
            }
            ',' => out.push(String::new()),
            _ => out.last_mut().expect("non-empty").push(ch),
        }
    }
    out
}

#[cfg(test)]
mod label_tests {
    use super::*;

    /// Issue 32, item 11: every label parses one way.
    #[test]
    fn labels_read_one_way() {
        assert_eq!(escape_value("{a,b}"), "\\{a,b}");
        assert_eq!(escape_value("[1-2]"), "\\[1-2]");
        assert_eq!(escape_value("*"), "\\*");
        assert_eq!(escape_value("\\x"), "\\\\x");
        assert_eq!(escape_value("Rome"), "Rome");
        assert_eq!(escape_value("a,b"), "a,b");
        let set = format!("{{{},{}}}", escape_element("Rome"), escape_element("{a,b}"));
        assert_eq!(set, "{Rome,\\{a\\,b\\}}");
        let inner = &set[1..set.len() - 1];
        assert_eq!(
            split_set(inner),
            vec!["Rome".to_string(), "{a,b}".to_string()]
        );
        assert_eq!(split_set("a,b"), vec!["a".to_string(), "b".to_string()]);
    }
}
