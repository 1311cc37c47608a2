//! (ε, δ)-differential privacy for microdata by SafePub (Bild, Kuhn and
//! Prasser, "SafePub: A Truthful Data Anonymization Algorithm With Strong
//! Privacy Guarantees", PoPETs 2018(1); ARX 3.9.2's
//! `criteria/EDDifferentialPrivacy.java` and `dp/ParameterCalculation.java`).
//!
//! Li, Qardaji and Su ("On sampling, anonymization, and differential
//! privacy", ASIACCS 2012, Theorem 5; SafePub section 4) show that a
//! mechanism which (1) keeps each record with probability `β`, (2)
//! generalises the sample with a transformation chosen independently of it
//! and (3) suppresses every record whose class has fewer than `k` records
//! is (ε, δ)-differentially private when
//!
//! * `β = 1 - e^(-ε)`, and
//! * `δ >= d(k, β, ε) = max_{n >= n_m} Σ_{j > γ n}^{n} f(j; n, β)`, with
//!   `γ = (e^ε - 1 + β) / e^ε`, `n_m = ⌈k / γ - 1⌉` and `f` the binomial
//!   probability; the maximum is taken until the Chernoff bound
//!   `c(n) = e^(-n (γ ln(γ / β) - (γ - β)))` falls below the running maximum.
//!
//! k is derived as ARX derives it, one more than the smallest k with
//! `d(k) < δ` (ARX's loop increments after its last test; a larger k only
//! publishes less). SafePub's data-dependent search spends `search_budget`
//! of ε on choosing the transformation with the exponential mechanism
//! ([`crate::algorithms::safepub`]), so k and β then come from `ε - budget`.
//!
//! On a release, the model is k-anonymity with the derived k: what both
//! verifiers can check from the published rows. The sampling and the
//! data-independence of the transformation are properties of how the
//! release was made, which the algorithm `safepub` guarantees and the
//! certificate records (ε, δ, β, k, the search budget).

use serde::Deserialize;

use crate::encode::QiTable;

use super::{ClassView, PrivacyModel};

/// How SafePub chooses the transformation without spending privacy on the
/// data, or by spending part of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DpSearch {
    /// A data-independent transformation: every QI at
    /// `round(factor * height)` of its hierarchy (ARX's
    /// `DataGeneralizationScheme`).
    Fixed(GeneralisationDegree),
    /// SafePub's search: `steps` expansions from the top of the lattice,
    /// each choosing the next node with the exponential mechanism and
    /// `budget / steps` of ε (ARX's `DataDependentEDDPAlgorithm`).
    Exponential {
        /// The part of ε spent on the search.
        budget: f64,
        /// Expansions of the search.
        steps: usize,
    },
}

/// ARX's generalisation degrees (`DataGeneralizationScheme`): the share of
/// each hierarchy's height a data-independent transformation goes up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GeneralisationDegree {
    /// 0.2 of the height.
    Low,
    /// 0.4.
    LowMedium,
    /// 0.5.
    Medium,
    /// 0.6.
    MediumHigh,
    /// 0.8.
    High,
}

impl GeneralisationDegree {
    /// The share of the height, as ARX's `GeneralizationDegree.getFactor`.
    pub fn factor(self) -> f64 {
        match self {
            GeneralisationDegree::Low => 0.2,
            GeneralisationDegree::LowMedium => 0.4,
            GeneralisationDegree::Medium => 0.5,
            GeneralisationDegree::MediumHigh => 0.6,
            GeneralisationDegree::High => 0.8,
        }
    }

    /// The level of a hierarchy of `height` (ARX rounds half up).
    pub fn level(self, height: u8) -> u8 {
        ((self.factor() * height as f64).round() as u8).min(height)
    }
}

/// (ε, δ)-differential privacy by SafePub: a release is the β-sample of the
/// input, generalised and with every class below k suppressed.
#[derive(Debug, Clone, PartialEq)]
pub struct DifferentialPrivacy {
    /// The whole privacy budget ε (> 0).
    pub epsilon: f64,
    /// δ in (0, 1).
    pub delta: f64,
    /// How the transformation is chosen.
    pub search: DpSearch,
    /// The sampling probability, `1 - e^(-ε_anon)`.
    pub beta: f64,
    /// The derived smallest class.
    pub k: usize,
}

impl DifferentialPrivacy {
    /// The model for ε, δ and a search, with β and k derived from the ε
    /// left after the search.
    pub fn new(epsilon: f64, delta: f64, search: DpSearch) -> Self {
        let anon = match search {
            DpSearch::Fixed(_) => epsilon,
            DpSearch::Exponential { budget, .. } => epsilon - budget,
        };
        let (beta, k) = parameters(anon, delta);
        DifferentialPrivacy {
            epsilon,
            delta,
            search,
            beta,
            k,
        }
    }
}

/// `ln n!` for every `n` asked so far, grown on demand.
struct LnFactorials(Vec<f64>);

impl LnFactorials {
    fn get(&mut self, n: usize) -> f64 {
        while self.0.len() <= n {
            let i = self.0.len();
            let last = *self.0.last().unwrap_or(&0.0);
            self.0
                .push(if i == 0 { 0.0 } else { last + (i as f64).ln() });
        }
        self.0[n]
    }
}

/// `Σ_{j = from}^{n} f(j; n, β)`, each term in log space.
fn binomial_tail(from: usize, n: usize, beta: f64, lf: &mut LnFactorials) -> f64 {
    let (lb, lq) = (beta.ln(), (1.0 - beta).ln());
    let ln_n = lf.get(n);
    (from..=n)
        .map(|j| {
            let ln = ln_n - lf.get(j) - lf.get(n - j) + j as f64 * lb + (n - j) as f64 * lq;
            ln.exp()
        })
        .sum()
}

/// `d(k, β, ε)` of the module docs.
fn delta_of(k: usize, beta: f64, gamma: f64, lf: &mut LnFactorials) -> f64 {
    let n_m = ((k as f64 / gamma - 1.0).ceil()).max(0.0) as usize;
    let exponent = gamma * (gamma / beta).ln() - (gamma - beta);
    let mut delta = f64::MIN;
    let mut bound = f64::MAX;
    let mut n = n_m;
    while delta <= bound {
        let from = (n as f64 * gamma).floor() as usize + 1;
        delta = delta.max(binomial_tail(from, n, beta, lf));
        bound = (-(n as f64) * exponent).exp();
        n += 1;
    }
    delta
}

/// β and k for `epsilon` and `delta`, as ARX's `ParameterCalculation`.
pub(crate) fn parameters(epsilon: f64, delta: f64) -> (f64, usize) {
    let beta = 1.0 - (-epsilon).exp();
    let power = epsilon.exp();
    let gamma = (power - 1.0 + beta) / power;
    let mut lf = LnFactorials(Vec::new());
    let mut k = 1;
    loop {
        let d = delta_of(k, beta, gamma, &mut lf);
        k += 1;
        if d < delta {
            return (beta, k);
        }
    }
}

impl PrivacyModel for DifferentialPrivacy {
    fn describe(&self) -> String {
        let search = match self.search {
            DpSearch::Fixed(d) => format!("data-independent generalisation {d:?}"),
            DpSearch::Exponential { budget, steps } => {
                format!("search ε = {budget} over {steps} steps")
            }
        };
        format!(
            "({}, {})-differential privacy (SafePub: sampling β = {:.6}, k = {}, {search})",
            self.epsilon, self.delta, self.beta, self.k
        )
    }
    fn min_class_size(&self) -> usize {
        self.k
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        class.rows.len() >= self.k
    }
    fn is_monotone(&self) -> bool {
        true
    }
    fn is_monotone_with_suppression(&self) -> bool {
        true
    }
    fn needs_rows(&self) -> bool {
        false
    }
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(Vec::new())
    }
    fn protects_alone(&self) -> bool {
        true
    }
    fn achieved(&self, _table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        Some(format!(
            "ε = {}, δ = {}, sampling β = {:.6}, derived k = {}, smallest class {}",
            self.epsilon,
            self.delta,
            self.beta,
            self.k,
            classes.iter().map(|c| c.len()).min().unwrap_or(0)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// β and k as ARX 3.9.2's `ParameterCalculation` gives them (run with
    /// `arx-core.jar` from the peers kit).
    #[test]
    fn parameters_match_arx() {
        for (epsilon, delta, beta, k) in [
            (1.0, 1e-5, 0.6321205588285574, 62),
            (2.0, 1e-6, 0.8646647167633871, 132),
            (0.5, 1e-4, 0.3934693402873664, 40),
            (3.0, 1e-6, 0.9502129316321359, 272),
            (1.9, 1e-6, 0.8504313807773648, 119),
            (0.9, 1e-5, 0.5934303402594007, 59),
            (0.1, 1e-3, 0.09516258196404025, 27),
        ] {
            let (b, kk) = parameters(epsilon, delta);
            assert!((b - beta).abs() < 1e-12, "β for ε = {epsilon}: {b}");
            assert_eq!(kk, k, "k for ε = {epsilon}, δ = {delta}");
        }
    }

    #[test]
    fn a_search_spends_its_budget_before_k_is_derived() {
        let dp = DifferentialPrivacy::new(
            2.0,
            1e-6,
            DpSearch::Exponential {
                budget: 0.1,
                steps: 100,
            },
        );
        assert_eq!(dp.k, 119);
        assert!((dp.beta - 0.8504313807773648).abs() < 1e-12);
    }

    #[test]
    fn degrees_pick_arx_levels() {
        assert_eq!(GeneralisationDegree::Medium.level(4), 2);
        assert_eq!(GeneralisationDegree::Medium.level(3), 2);
        assert_eq!(GeneralisationDegree::Low.level(2), 0);
        assert_eq!(GeneralisationDegree::High.level(1), 1);
    }
}
