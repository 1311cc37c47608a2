//! Population uniqueness (reported by [`crate::metrics::risk`], bounded by
//! the `population-uniqueness` privacy model): how many records of the population are alone in
//! their class, estimated from the class-size frequencies of a sample and the
//! sampling fraction `π = n/N`, with the models ARX 3.9.2 offers
//! (`org.deidentifier.arx.risk.RiskModelPopulationUniqueness`):
//!
//! - **Pitman** (Hoshino, "Applying Pitman's sampling formula to microdata
//!   disclosure risk assessment", J. Official Statistics 17(4), 2001): the
//!   class sizes follow Pitman's sampling formula with parameters `(θ, α)`,
//!   fitted by maximum likelihood; the population has
//!   `Γ(θ+1)/Γ(θ+α) · N^α` uniques.
//! - **Zayatz** ("Estimation of the percent of unique population elements on
//!   a microdata file using the sample", US Census Bureau SRD 91/08, 1991):
//!   the chance that a sample unique is a population unique is the share of
//!   sample uniques among the classes that would show one record under
//!   hypergeometric sampling.
//! - **SNB** (Chen & McNulty, "Estimation of the number of sample uniques",
//!   Proc. Section on Survey Research Methods, ASA 1994): population class
//!   sizes minus one follow a negative binomial `NB(α, β)`; `α, β` are fitted
//!   to the numbers of sample classes of size 1 and 2, the number of
//!   non-empty population classes `K` is Shlosser's estimate (Haas et al.
//!   1995) as ARX computes it, and the population has `K β^α` uniques.
//! - **Dankar** (Dankar, El Emam, Neisa & Roffey, "Estimating the
//!   re-identification risk of clinical data sets", BMC Med Inform Decis Mak
//!   12:66, 2012): Pitman when `π <= 0.1` (Zayatz if Pitman fails);
//!   otherwise the smaller of Zayatz and SNB (Zayatz if SNB fails). As in
//!   ARX, the rule reads only the sampling fraction, not the number of QIs.
//!
//! An estimator that does not converge, or whose result is not a number of
//! uniques between 0 and `N`, gives no estimate and says why.
//!
//! One deliberate difference from ARX: ARX's SNB objective multiplies the
//! size-2 moment by `(1 - (1-π)(1-β))^(α+2)` where the model (and ARX's own
//! Jacobian) divides by it; kanon solves the model's equations (see
//! `snb_moments`), so its SNB estimates differ from ARX's.

mod special;

use serde::Serialize;

use crate::error::{Error, Result};
use special::{digamma, ln_gamma, trigamma};

/// The statistical model behind an estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UniquenessModel {
    /// Hoshino's fit of Pitman's sampling formula.
    Pitman,
    /// Zayatz's hypergeometric model.
    Zayatz,
    /// Chen & McNulty's slide negative binomial.
    Snb,
}

/// One estimate of the population uniques.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UniquenessEstimate {
    /// Estimated number of population records alone in their class; `None`
    /// when the model gave no usable estimate (see `note`).
    pub population_uniques: Option<f64>,
    /// `population_uniques / N`: the share of the population that is unique.
    pub share: Option<f64>,
    /// Why there is no estimate (`None` when there is one).
    pub note: Option<String>,
}

/// Population-uniqueness estimates of a sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PopulationUniqueness {
    /// Records of the population, `N`.
    pub population_size: u64,
    /// Records of the sample, `n`.
    pub sample_size: usize,
    /// `π = n / N`.
    pub sampling_fraction: f64,
    /// Sample classes of size 1 (records alone in the sample).
    pub sample_uniques: usize,
    /// Pitman's estimate.
    pub pitman: UniquenessEstimate,
    /// Zayatz's estimate.
    pub zayatz: UniquenessEstimate,
    /// The SNB estimate.
    pub snb: UniquenessEstimate,
    /// Dankar et al.'s choice among the three.
    pub dankar: UniquenessEstimate,
    /// The model Dankar's rule chose; `None` when no model was needed (no
    /// sample uniques, or `π = 1` where the sample is the population).
    pub dankar_model: Option<UniquenessModel>,
}

/// Estimates the population uniques of a sample from its class-size
/// frequencies: `(size, number of classes of that size)` pairs, any order
/// (pairs of equal size add up; sizes or counts of 0 are ignored).
///
/// Without sample uniques every estimate is 0; at `π = 1` the sample is the
/// population and every estimate is the number of sample uniques.
///
/// # Errors
/// [`Error::Spec`] (`population_size`) when `π = n/N` is outside `(0, 1]`:
/// an empty sample, `N = 0`, or `N < n`.
///
/// # Example
/// ```
/// use kanon_engine::metrics::risk::population_uniqueness;
/// // 100 sample uniques, 40 pairs, 20 triples: 240 records of 10,000.
/// let u = population_uniqueness(&[(1, 100), (2, 40), (3, 20)], 10_000).unwrap();
/// assert_eq!(u.sample_uniques, 100);
/// assert!(u.dankar.population_uniques.is_some());
/// ```
pub fn population_uniqueness(
    frequencies: &[(usize, usize)],
    population_size: u64,
) -> Result<PopulationUniqueness> {
    let profile = Profile::new(frequencies);
    let n = profile.records;
    if n == 0 || population_size == 0 || population_size < n as u64 {
        return Err(Error::spec(
            "population_size",
            format!(
                "the sampling fraction must be in (0, 1], but the sample has {n} records and the population {population_size}; give a population at least as large as the sample"
            ),
        ));
    }
    let big_n = population_size as f64;
    let pi = n as f64 / big_n;
    let c1 = profile.classes_of_size(1);
    let exact = |v: f64| UniquenessEstimate::of(Ok(v), big_n);
    if c1 == 0 || population_size == n as u64 {
        let v = c1 as f64;
        return Ok(PopulationUniqueness {
            population_size,
            sample_size: n,
            sampling_fraction: pi,
            sample_uniques: c1,
            pitman: exact(v),
            zayatz: exact(v),
            snb: exact(v),
            dankar: exact(v),
            dankar_model: None,
        });
    }
    // A population unique is a sample unique when it was sampled, and one
    // of the N - n records not sampled otherwise: an estimate above
    // c1 + (N - n) is impossible, the model does not fit (issue 32).
    let bound = c1 as f64 + (big_n - n as f64);
    let possible = |e: std::result::Result<f64, String>| {
        e.and_then(|v| {
            if v > bound * (1.0 + 1e-9) {
                Err(format!(
                    "the model's estimate ({v:.1}) is above what is possible: {c1} sample uniques plus the {} records not sampled; the model does not fit this sample",
                    population_size - n as u64
                ))
            } else {
                Ok(v)
            }
        })
    };
    let zayatz = UniquenessEstimate::of(possible(zayatz(&profile, big_n)), big_n);
    let pitman = UniquenessEstimate::of(possible(pitman(&profile, big_n)), big_n);
    let snb = UniquenessEstimate::of(possible(snb(&profile, big_n)), big_n);
    let usable = |e: &UniquenessEstimate| e.population_uniques.filter(|&v| v > 0.0);
    let (dankar, model) = if pi <= 0.1 {
        match usable(&pitman) {
            Some(_) => (pitman.clone(), UniquenessModel::Pitman),
            None => (zayatz.clone(), UniquenessModel::Zayatz),
        }
    } else {
        match (usable(&snb), zayatz.population_uniques) {
            (Some(s), Some(z)) if z < s => (zayatz.clone(), UniquenessModel::Zayatz),
            (Some(_), _) => (snb.clone(), UniquenessModel::Snb),
            (None, _) => (zayatz.clone(), UniquenessModel::Zayatz),
        }
    };
    Ok(PopulationUniqueness {
        population_size,
        sample_size: n,
        sampling_fraction: pi,
        sample_uniques: c1,
        pitman,
        zayatz,
        snb,
        dankar,
        dankar_model: Some(model),
    })
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    /// Issue 32, item 11: a population barely larger than the sample
    /// (1,023 records of 1,073) cannot hold more uniques than the sample's
    /// 1,000 plus the 50 records not sampled; Pitman's fit says 1,212 here,
    /// which is omitted with its reason instead of shown.
    #[test]
    fn impossible_estimates_are_omitted() {
        let u = population_uniqueness(&[(1, 1000), (2, 10), (3, 1)], 1073).unwrap();
        assert_eq!(u.pitman.population_uniques, None);
        assert!(
            u.pitman
                .note
                .as_deref()
                .is_some_and(|n| n.contains("above what is possible")),
            "{:?}",
            u.pitman.note
        );
        for e in [&u.pitman, &u.zayatz, &u.snb, &u.dankar] {
            if let Some(v) = e.population_uniques {
                assert!(v <= 1050.0 + 1e-6, "{v}");
            }
        }
    }
}

impl UniquenessEstimate {
    /// An estimate, or the reason there is none; a value that is not a
    /// number of uniques in `[0, N]` is no estimate.
    fn of(value: std::result::Result<f64, String>, big_n: f64) -> Self {
        let checked = value.and_then(|v| {
            if v.is_finite() && (0.0..=big_n * (1.0 + 1e-12)).contains(&v) {
                Ok(v.min(big_n))
            } else {
                Err(
                    "the estimate is not a number of records between 0 and the population size"
                        .into(),
                )
            }
        });
        match checked {
            Ok(v) => UniquenessEstimate {
                population_uniques: Some(v),
                share: Some(v / big_n),
                note: None,
            },
            Err(note) => UniquenessEstimate {
                population_uniques: None,
                share: None,
                note: Some(note),
            },
        }
    }
}

/// Class-size frequencies, merged and sorted by size.
struct Profile {
    /// `(size, classes)`, ascending by size, no zeros.
    sizes: Vec<(usize, usize)>,
    /// `n`: records.
    records: usize,
    /// `u`: classes.
    classes: usize,
}

impl Profile {
    fn new(frequencies: &[(usize, usize)]) -> Self {
        let mut sizes: Vec<(usize, usize)> = frequencies
            .iter()
            .copied()
            .filter(|&(s, c)| s > 0 && c > 0)
            .collect();
        sizes.sort_unstable();
        sizes.dedup_by(|b, a| {
            if a.0 == b.0 {
                a.1 += b.1;
                true
            } else {
                false
            }
        });
        Profile {
            records: sizes.iter().map(|&(s, c)| s * c).sum(),
            classes: sizes.iter().map(|&(_, c)| c).sum(),
            sizes,
        }
    }

    fn classes_of_size(&self, size: usize) -> usize {
        self.sizes
            .iter()
            .find(|&&(s, _)| s == size)
            .map_or(0, |&(_, c)| c)
    }
}

/// Zayatz's estimate `c₁ · P(unique | sample unique) / π`, where
/// `P(unique | sample unique) = c₁ P₁ / Σ_s c_s P_s` and `P_s` is the
/// hypergeometric chance that a population class of size `s` shows exactly
/// one record in a sample of `n` of `N`: `P_s = s C(N-s, n-1) / C(N, n)`.
///
/// Only the ratios `P_s / P₁ = s Π_{i=1}^{s-1} (N-n+1-i)/(N-i)` matter,
/// computed as products so that no binomial coefficient of `N` is formed.
fn zayatz(p: &Profile, big_n: f64) -> std::result::Result<f64, String> {
    let n = p.records as f64;
    let c1 = p.classes_of_size(1) as f64;
    let mut weighted = 0.0;
    for &(s, c) in &p.sizes {
        let mut ratio = s as f64;
        for i in 1..s {
            let i = i as f64;
            ratio *= ((big_n - n + 1.0 - i) / (big_n - i)).max(0.0);
            if ratio < 1e-300 {
                ratio = 0.0;
                break;
            }
        }
        weighted += c as f64 * ratio;
    }
    Ok(c1 * (c1 / weighted) * big_n / n)
}

/// Newton-Raphson settings (ARX's solver defaults: accuracy 1e-6, 1000
/// iterations per start value).
const ACCURACY: f64 = 1e-6;
const ITERATIONS: usize = 1000;

/// Pitman's estimate (Hoshino 2001): the maximum-likelihood `(θ, α)` of
/// Pitman's sampling formula given the class sizes, then
/// `Γ(θ+1)/Γ(θ+α) · N^α` population uniques.
///
/// The log-likelihood of `u` classes of sizes `f_j` among `n` records is
/// `Σ_{i=1}^{u-1} ln(θ+iα) - Σ_{i=1}^{n-1} ln(θ+i) + Σ_j Σ_{k=1}^{f_j-1} ln(k-α)`;
/// its gradient is set to zero by Newton-Raphson, from the moment-based
/// start of ARX's `ModelPitman`, then from a grid of start values.
fn pitman(p: &Profile, big_n: f64) -> std::result::Result<f64, String> {
    let n = p.records as f64;
    let u = p.classes as f64;
    let c1 = p.classes_of_size(1) as f64;
    let c2 = match p.classes_of_size(2) {
        0 => 1.0, // as ARX: overestimates rather than divides by 0
        c => c as f64,
    };
    if u < 2.0 {
        return Err("Pitman's model needs at least two classes".into());
    }
    let c = c1 * (c1 - 1.0) / c2;
    let theta0 = (n * u * c - c1 * (n - 1.0) * (2.0 * u + c)) / (2.0 * c1 * u + c1 * c - n * c);
    let alpha0 = (theta0 * (c1 - n) + (n - 1.0) * c1) / (n * u);
    let grid = [0.01, 0.33, 0.66, 0.99];
    let starts = std::iter::once((theta0, alpha0)).chain(
        grid.iter()
            .flat_map(|&t| grid.iter().map(move |&a| (t * u, a))),
    );
    for (theta, alpha) in starts {
        if let Some((t, a)) = pitman_mle(p, theta, alpha) {
            let log = ln_gamma(t + 1.0) - ln_gamma(t + a) + a * big_n.ln();
            return Ok(log.exp());
        }
    }
    Err("the Pitman likelihood has no maximum the solver could find with 0 < alpha < 1 (with few large classes it grows towards alpha = 0)".into())
}

/// Newton-Raphson on the gradient of Pitman's log-likelihood from
/// `(θ, α)`, within `θ >= 0` (ARX's constraint) and `0 < α < 1`; steps
/// that leave it are halved. Only a maximum counts: ARX accepts any
/// stationary point, which on profiles without large classes (where the
/// likelihood rises towards `α = 0`) gives estimates that change with the
/// start value.
fn pitman_mle(p: &Profile, mut theta: f64, mut alpha: f64) -> Option<(f64, f64)> {
    let inside = |t: f64, a: f64| t.is_finite() && t >= 0.0 && a > 0.0 && a < 1.0;
    if !inside(theta, alpha) {
        return None;
    }
    for _ in 0..ITERATIONS {
        let (g, h) = pitman_gradient(p, theta, alpha)?;
        let det = h[0][0] * h[1][1] - h[0][1] * h[1][0];
        if g[0].abs() < ACCURACY && g[1].abs() < ACCURACY {
            // A maximum, not a saddle or a minimum: negative definite.
            return (h[0][0] < 0.0 && det > 0.0).then_some((theta, alpha));
        }
        if det == 0.0 || !det.is_finite() {
            return None;
        }
        let mut dt = -(h[1][1] * g[0] - h[0][1] * g[1]) / det;
        let mut da = -(h[0][0] * g[1] - h[1][0] * g[0]) / det;
        let mut halvings = 0;
        while !inside(theta + dt, alpha + da) {
            dt /= 2.0;
            da /= 2.0;
            halvings += 1;
            if halvings > 60 {
                return None;
            }
        }
        theta += dt;
        alpha += da;
    }
    None
}

/// The gradient `(∂L/∂θ, ∂L/∂α)` and Hessian of Pitman's log-likelihood, in
/// closed form with digamma and trigamma (the sums over `i` and `k` of the
/// likelihood telescope: `Σ_{i=1}^{u-1} 1/(θ+iα) = (ψ(θ/α+u) - ψ(θ/α+1))/α`,
/// `Σ_{k=1}^{s-1} 1/(k-α) = ψ(s-α) - ψ(1-α)`).
fn pitman_gradient(p: &Profile, t: f64, a: f64) -> Option<([f64; 2], [[f64; 2]; 2])> {
    let n = p.records as f64;
    let u = p.classes as f64;
    let r = t / a;
    // Σ 1/(θ+iα), Σ 1/(θ+iα)², i = 1..u-1
    let s1 = (digamma(r + u) - digamma(r + 1.0)) / a;
    let s2 = (trigamma(r + 1.0) - trigamma(r + u)) / (a * a);
    // Σ i/(θ+iα), Σ i/(θ+iα)², Σ i²/(θ+iα)²
    let i1 = ((u - 1.0) - t * s1) / a;
    let i2 = (s1 - t * s2) / a;
    let ii2 = ((u - 1.0) - 2.0 * t * s1 + t * t * s2) / (a * a);
    // Σ_j Σ_{k<f_j} 1/(k-α) and its square terms
    let (mut k1, mut k2) = (0.0, 0.0);
    let (d1, t1) = (digamma(1.0 - a), trigamma(1.0 - a));
    for &(s, c) in p.sizes.iter().filter(|&&(s, _)| s > 1) {
        k1 += c as f64 * (digamma(s as f64 - a) - d1);
        k2 += c as f64 * (t1 - trigamma(s as f64 - a));
    }
    let g = [s1 - (digamma(t + n) - digamma(t + 1.0)), i1 - k1];
    let h = [
        [-s2 + (trigamma(t + 1.0) - trigamma(t + n)), -i2],
        [-i2, -ii2 - k2],
    ];
    let finite = g.iter().chain(h.iter().flatten()).all(|v| v.is_finite());
    finite.then_some((g, h))
}

/// The expected numbers of sample classes of size 1 and 2 per non-empty
/// population class under the slide negative binomial (Chen & McNulty
/// 1994): population class sizes `F = 1 + NB(α, β)`, each record sampled
/// with probability `π`. With `d = (1-π)(1-β)`:
///
/// - `P(f = 1) = π (β/(1-d))^α (1 + α d/(1-d))`
/// - `P(f = 2) = π² α (1-β) β^α (2 - (1-α) d) / (2 (1-d)^(α+2))`
///
/// (the first and second derivatives at 0 of the sample size's generating
/// function `w (β/(1-(1-β)w))^α`, `w = 1-π+πz`).
pub(crate) fn snb_moments(alpha: f64, beta: f64, pi: f64) -> (f64, f64) {
    let d = (1.0 - pi) * (1.0 - beta);
    let p1 = pi * (beta / (1.0 - d)).powf(alpha) * (1.0 + alpha * d / (1.0 - d));
    let p2 = pi * pi * alpha * (1.0 - beta) * beta.powf(alpha) * (2.0 - (1.0 - alpha) * d)
        / (2.0 * (1.0 - d).powf(alpha + 2.0));
    (p1, p2)
}

/// Shlosser's estimate of the non-empty population classes `K`, as ARX's
/// `ModelSNB` writes it (Haas et al. 1995's variant):
/// `u + c₁ (A/B) (C/D)²` with `A = Σ_s s π² (1-π²)^(s-1) c_s`,
/// `B = Σ_s ((1-π)^s (1+π)^s c_s - 1)`, `C = Σ_s (1-π)^s c_s`,
/// `D = Σ_s s π (1-π)^(s-1) c_s`.
fn shlosser(p: &Profile, pi: f64) -> f64 {
    let (mut a, mut b, mut c, mut d) = (0.0, 0.0, 0.0, 0.0);
    for &(s, count) in &p.sizes {
        let (s, count) = (s as f64, count as f64);
        let q = (1.0 - pi).powf(s) * count;
        a += s * pi * pi * (1.0 - pi * pi).powf(s - 1.0) * count;
        b += q * (1.0 + pi).powf(s) - 1.0;
        c += q;
        d += s * pi * (1.0 - pi).powf(s - 1.0) * count;
    }
    p.classes as f64 + p.classes_of_size(1) as f64 * (a / b) * (c / d) * (c / d)
}

/// The SNB estimate `K β^α`: `α > 0` and `0 < β < 1` solve
/// `K P(f=1) = c₁`, `K P(f=2) = c₂` ([`snb_moments`]), by Newton-Raphson in
/// `(ln α, logit β)` with step halving, from a grid of start values
/// (ARX's grid, widened in `α`).
///
/// The two equations can have several roots (one with a small `α`, others
/// with a large `α` and next to no population uniques); kanon takes the
/// root with the most population uniques, the cautious reading.
fn snb(p: &Profile, big_n: f64) -> std::result::Result<f64, String> {
    let pi = p.records as f64 / big_n;
    let c1 = p.classes_of_size(1) as f64;
    let c2 = p.classes_of_size(2) as f64;
    if c2 == 0.0 {
        return Err("the SNB model needs sample classes of size 2".into());
    }
    let k = shlosser(p, pi);
    if !(k.is_finite() && k > 0.0) {
        return Err("Shlosser's estimate of the population classes is not a number".into());
    }
    let residual = |x: f64, y: f64| -> Option<[f64; 2]> {
        let (alpha, beta) = (x.exp(), 1.0 / (1.0 + (-y).exp()));
        let (p1, p2) = snb_moments(alpha, beta, pi);
        let r = [k * p1 / c1 - 1.0, k * p2 / c2 - 1.0];
        r.iter().all(|v| v.is_finite()).then_some(r)
    };
    let norm = |r: [f64; 2]| r[0].abs().max(r[1].abs());
    // Newton-Raphson from one start; the root's estimate, if it converges.
    let solve = |mut x: f64, mut y: f64| -> Option<f64> {
        let mut r = residual(x, y)?;
        for _ in 0..ITERATIONS {
            if norm(r) < 1e-12 {
                let (alpha, beta) = (x.exp(), 1.0 / (1.0 + (-y).exp()));
                return Some(k * beta.powf(alpha));
            }
            // Jacobian by central differences.
            let h = 1e-7;
            let (rx1, rx0) = (residual(x + h, y)?, residual(x - h, y)?);
            let (ry1, ry0) = (residual(x, y + h)?, residual(x, y - h)?);
            let j = [
                [(rx1[0] - rx0[0]) / (2.0 * h), (ry1[0] - ry0[0]) / (2.0 * h)],
                [(rx1[1] - rx0[1]) / (2.0 * h), (ry1[1] - ry0[1]) / (2.0 * h)],
            ];
            let det = j[0][0] * j[1][1] - j[0][1] * j[1][0];
            if det == 0.0 || !det.is_finite() {
                return None;
            }
            let mut dx = -(j[1][1] * r[0] - j[0][1] * r[1]) / det;
            let mut dy = -(j[0][0] * r[1] - j[1][0] * r[0]) / det;
            let mut next = None;
            for _ in 0..40 {
                let (nx, ny) = (x + dx, y + dy);
                if nx.abs() <= 15.0 && ny.abs() <= 50.0 {
                    if let Some(rn) = residual(nx, ny).filter(|&rn| norm(rn) < norm(r)) {
                        next = Some((nx, ny, rn));
                        break;
                    }
                }
                dx /= 2.0;
                dy /= 2.0;
            }
            (x, y, r) = next?;
        }
        None
    };
    let mut best: Option<f64> = None;
    for alpha in [0.1f64, 0.33, 0.66, 0.99, 2.0, 5.0] {
        for beta in [0.01f64, 0.1, 0.33, 0.66, 0.99] {
            if let Some(v) = solve(alpha.ln(), (beta / (1.0 - beta)).ln()) {
                best = Some(best.map_or(v, |b| b.max(v)));
            }
        }
    }
    if let Some(v) = best {
        return Ok(v);
    }
    Err("the SNB moment equations have no solution the solver could find".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_uniques_and_full_population_are_exact() {
        let u = population_uniqueness(&[(2, 10), (5, 3)], 1000).unwrap();
        assert_eq!(u.sample_uniques, 0);
        for e in [&u.pitman, &u.zayatz, &u.snb, &u.dankar] {
            assert_eq!(e.population_uniques, Some(0.0));
        }
        assert_eq!(u.dankar_model, None);
        // pi = 1: 4 + 2*3 + 5 = 15 records, the sample is the population.
        let u = population_uniqueness(&[(1, 4), (2, 3), (5, 1)], 15).unwrap();
        assert_eq!(u.sampling_fraction, 1.0);
        assert_eq!(u.dankar.population_uniques, Some(4.0));
        assert_eq!(u.pitman.share, Some(4.0 / 15.0));
    }

    #[test]
    fn sampling_fraction_outside_the_unit_interval_is_an_error() {
        for (f, big_n) in [
            (&[(1usize, 5usize)][..], 4u64),
            (&[(1, 5)][..], 0),
            (&[][..], 10),
        ] {
            let e = population_uniqueness(f, big_n).unwrap_err();
            assert!(matches!(e, Error::Spec { .. }), "{e}");
        }
    }

    #[test]
    fn frequencies_merge_and_ignore_zeros() {
        let a = population_uniqueness(&[(1, 30), (2, 10), (3, 4), (0, 9), (4, 0)], 5000).unwrap();
        let b = population_uniqueness(&[(3, 4), (1, 20), (2, 10), (1, 10)], 5000).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.sample_size, 30 + 20 + 12);
    }

    #[test]
    fn zayatz_by_hand() {
        // c1 = 2, c2 = 1; n = 4, N = 8. P_2/P_1 = 2 (N-n)/(N-1) = 2*4/7.
        // P(unique | sample unique) = 2 / (2 + 8/7) = 14/22; estimate
        // 2 * 14/22 / (4/8) = 28/11.
        let u = population_uniqueness(&[(1, 2), (2, 1)], 8).unwrap();
        let z = u.zayatz.population_uniques.unwrap();
        assert!((z - 28.0 / 11.0).abs() < 1e-12, "{z}");
        // pi = 0.5 > 0.1: Dankar takes the smaller of Zayatz and SNB.
        let chosen = u.dankar.population_uniques.unwrap();
        match u.snb.population_uniques {
            Some(s) => assert_eq!(chosen, s.min(z)),
            None => assert_eq!(chosen, z),
        }
    }

    #[test]
    fn snb_moments_are_the_generating_function_derivatives() {
        // Direct sum over population class sizes F of P(F) * P(f | F):
        // P(F = 1+m) = C(m+α-1, m) β^α (1-β)^m, f | F ~ Binomial(F, π).
        let (alpha, beta, pi) = (1.7f64, 0.3f64, 0.2f64);
        let (mut p1, mut p2) = (0.0, 0.0);
        let mut nb = beta.powf(alpha); // m = 0
        for m in 0..2000 {
            let big_f = (m + 1) as f64;
            p1 += nb * big_f * pi * (1.0 - pi).powf(big_f - 1.0);
            p2 += nb * big_f * (big_f - 1.0) / 2.0 * pi * pi * (1.0 - pi).powf(big_f - 2.0);
            nb *= (m as f64 + alpha) / (m as f64 + 1.0) * (1.0 - beta);
        }
        let (q1, q2) = snb_moments(alpha, beta, pi);
        assert!(
            (p1 - q1).abs() < 1e-12 && (p2 - q2).abs() < 1e-12,
            "{p1} {q1} {p2} {q2}"
        );
    }
}
