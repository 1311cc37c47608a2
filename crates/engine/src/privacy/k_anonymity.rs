//! k-anonymity ([`KAnonymity`]), the model every job starts from: a class
//! is accepted when it has at least k rows, which needs no row data and is
//! monotone under generalisation and suppression.

use super::{ClassView, PrivacyModel};

/// k-anonymity (Sweeney; the KACA paper Def. 1): every class has at least k rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KAnonymity {
    /// The smallest allowed class size.
    pub k: usize,
}

impl PrivacyModel for KAnonymity {
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(Vec::new())
    }
    fn is_monotone(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        format!("k-anonymity (k = {})", self.k)
    }
    fn min_class_size(&self) -> usize {
        self.k
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        class.rows.len() >= self.k
    }
    fn is_monotone_with_suppression(&self) -> bool {
        true
    }
    fn needs_rows(&self) -> bool {
        false
    }
}
