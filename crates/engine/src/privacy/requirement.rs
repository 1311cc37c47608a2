//! Anonymity requirements `<S, k>` ([`Requirement`]): k-anonymity of the
//! release's projection on a shield `S` of QIs (HeuristicMin). Not a
//! per-class model: the verifier checks them on the whole release.

/// An anonymity requirement `<S, k>` (HeuristicMin, the HeuristicMin paper section 3.1;
/// `docs/SPEC.md` section 1): the projection of the release on the shield `S` (a
/// set of QIs) holds every tuple at least `k` times. Plain k-anonymity is
/// `<all QIs, k>`.
///
/// A requirement on a strict subset of the QIs is not a property of one
/// class: a projected tuple gathers every published class that agrees on the
/// shield. It is therefore not a [`PrivacyModel`](super::PrivacyModel); the verifier checks it on
/// the projection of the whole release ([`crate::verify`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// QI indices (job order, ascending), `None` for all QIs.
    columns: Option<Vec<usize>>,
    names: Vec<String>,
    k: usize,
}

impl Requirement {
    /// `<all QIs, k>`: k-anonymity.
    pub fn all(k: usize) -> Self {
        Requirement {
            columns: None,
            names: Vec::new(),
            k,
        }
    }

    /// `<S, k>` on the QIs at the given indices (job order) with their names.
    /// A shield naming every one of `n_qi` QIs is `<all QIs, k>`.
    pub fn on(shield: impl IntoIterator<Item = (usize, String)>, k: usize, n_qi: usize) -> Self {
        let mut cols: Vec<(usize, String)> = shield.into_iter().collect();
        cols.sort();
        cols.dedup_by_key(|(q, _)| *q);
        if cols.len() == n_qi {
            return Requirement::all(k);
        }
        Requirement {
            columns: Some(cols.iter().map(|(q, _)| *q).collect()),
            names: cols.into_iter().map(|(_, n)| n).collect(),
            k,
        }
    }

    /// The anonymity degree.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Whether the shield is every QI (plain k-anonymity, a per-class check).
    pub fn is_all(&self) -> bool {
        self.columns.is_none()
    }

    /// The shield's QI indices among `n_qi` QIs, ascending.
    pub fn columns(&self, n_qi: usize) -> Vec<usize> {
        match &self.columns {
            Some(c) => c.clone(),
            None => (0..n_qi).collect(),
        }
    }

    /// Whether QI `q` is in the shield.
    pub fn contains(&self, q: usize) -> bool {
        self.columns
            .as_ref()
            .is_none_or(|c| c.binary_search(&q).is_ok())
    }

    /// `<{age, sex}, 10>`, or `k-anonymity (k = 10)` for all QIs.
    pub fn describe(&self) -> String {
        match &self.columns {
            None => format!("k-anonymity (k = {})", self.k),
            Some(_) => format!("<{{{}}}, {}>", self.names.join(", "), self.k),
        }
    }

    /// Whether every release satisfying `other` satisfies `self`: `other`'s
    /// shield contains this one and its k is at least this k (a projection on
    /// fewer attributes only merges tuples).
    pub fn is_implied_by(&self, other: &Requirement) -> bool {
        other.k >= self.k
            && match (&self.columns, &other.columns) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(b)) => a.iter().all(|q| b.binary_search(q).is_ok()),
            }
    }
}
