//! SafePub (Bild, Kuhn and Prasser, "SafePub: A Truthful Data Anonymization
//! Algorithm With Strong Privacy Guarantees", PoPETs 2018(1), Algorithm 1;
//! ARX 3.9.2's `DataDependentEDDPAlgorithm`): the mechanism behind the
//! `differential-privacy` model ([`crate::privacy::DifferentialPrivacy`]).
//!
//! 1. **Sampling.** Every row is kept with probability β, drawn from a
//!    ChaCha20 stream ([`MechanismRandomness`]).
//! 2. **Transformation.** One full-domain node of the generalisation
//!    lattice, chosen without reading the data (`generalisation`: every QI
//!    at `round(factor * height)`, ARX's `DataGeneralizationScheme`) or by
//!    SafePub's search: starting at the top of the lattice, each of `steps`
//!    expansions adds the predecessors of the current node to the candidates
//!    and draws the next node with the exponential mechanism
//!    (`P ∝ exp(ε_step · score / 2)`), the score being SafePub's
//!    granularity score: minus the summed loss of the sample (a cell's NCP,
//!    a suppressed record 1 per QI), divided by the number of QIs and by
//!    `k - 1`, its sensitivity (SafePub section 6; ARX's
//!    `MetricMDNMLoss.getScore`).
//! 3. **Suppression.** Every sampled record whose class has fewer than k
//!    records is suppressed, whatever their number (the suppression limit
//!    is 1).
//!
//! ARX returns the best-scoring node the search visited, comparing the
//! exact scores. An exact comparison reads the data without noise, so kanon
//! draws the result among the visited nodes with the exponential mechanism
//! as well, with nine tenths of the search budget (the steps share the
//! other tenth), and the guarantee follows from sequential composition
//! alone.

use hmac::{Hmac, Mac};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::algorithms::lattice::{Key, Lattice, Loss, Wide};
use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::classes::EquivalenceClasses;
use crate::error::{Error, Result};
use crate::privacy::{DifferentialPrivacy, DpSearch};
use crate::spec::JobSpec;

/// SafePub takes its parameters from `[privacy.models.differential-privacy]`;
/// `[algorithm]` holds only the name and the seed.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SafePubParams {}

/// The SafePub algorithm.
#[derive(Debug, Clone, Default)]
pub struct SafePub;

impl SafePub {
    /// SafePub (no parameters of its own).
    pub fn from_params(_: SafePubParams) -> Self {
        SafePub
    }
}

/// The environment variable holding the secret of the mechanism's
/// randomness.
pub const KEY_ENV: &str = "KANON_DP_KEY";

/// Where the mechanism's random draws come from. Differential privacy
/// holds only while they are secret, and the job's seed is not: the
/// certificate, the Parquet footer and the job file carry it. So the draws
/// come from `SHA-256(secret || seed)` when `KANON_DP_KEY` holds a secret
/// (the same secret, seed and input give the same release), and from the
/// operating system otherwise (a fresh release each run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MechanismRandomness {
    /// Keyed by `KANON_DP_KEY` and the seed: reproducible by its holder.
    Keyed,
    /// Fresh from the operating system: not reproducible.
    Fresh,
}

/// The mechanism's random stream, and where it came from.
///
/// # Errors
/// [`Error::Spec`] naming `KANON_DP_KEY` when it is set but shorter than 32
/// characters (a short secret can be guessed, and with it every draw).
fn mechanism_rng(seed: u64) -> Result<(ChaCha20Rng, MechanismRandomness)> {
    match std::env::var(KEY_ENV) {
        Ok(key) if !key.trim().is_empty() => {
            let key = key.trim();
            if key.len() < 32 {
                return Err(Error::spec(
                    KEY_ENV,
                    format!(
                        "the secret of differential privacy's random draws has {} characters; give at least 32 (e.g. `openssl rand -hex 32`), or unset it for fresh draws each run",
                        key.len()
                    ),
                ));
            }
            let mut h = Sha256::new();
            h.update(b"kanon safepub\0");
            h.update(key.as_bytes());
            h.update(seed.to_le_bytes());
            Ok((
                ChaCha20Rng::from_seed(h.finalize().into()),
                MechanismRandomness::Keyed,
            ))
        }
        _ => {
            let mut bytes = [0u8; 32];
            rand::rngs::OsRng.fill_bytes(&mut bytes);
            Ok((ChaCha20Rng::from_seed(bytes), MechanismRandomness::Fresh))
        }
    }
}

/// What a release of `spec` may publish as its input's fingerprint
/// (certificate, Parquet footer, Delta transaction id, report).
///
/// A fingerprint is a deterministic function of the input, so whoever
/// knows every record but one can compute it for each candidate of the
/// last and tell which input was used: differential privacy must not allow
/// that. A job under `differential-privacy` therefore publishes the
/// fingerprint keyed with `KANON_DP_KEY` (HMAC-SHA-256, so that reruns on
/// the same input still match and a Delta append stays idempotent), or
/// none without the key. Other jobs publish it as it is.
pub fn published_fingerprint(spec: &JobSpec, fingerprint: Option<String>) -> Option<String> {
    if !spec.privacy.models.contains_key("differential-privacy") {
        return fingerprint;
    }
    let key = std::env::var(KEY_ENV).ok()?;
    let key = key.trim();
    if key.is_empty() {
        return None;
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).ok()?;
    mac.update(b"kanon input fingerprint\0");
    mac.update(fingerprint?.as_bytes());
    let tag: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(format!("hmac-sha256:{tag}"))
}

#[derive(Debug, Serialize)]
struct SafePubDetails {
    /// The chosen node: hierarchy level per QI.
    chosen: serde_json::Map<String, serde_json::Value>,
    epsilon: f64,
    delta: f64,
    /// The sampling probability.
    beta: f64,
    /// The derived smallest class.
    k: usize,
    /// ε spent on the search (0 with a fixed generalisation).
    search_budget: f64,
    /// Exponential-mechanism draws of the search (its steps and the final
    /// choice).
    draws: usize,
    /// Nodes whose classes were scored.
    nodes_evaluated: usize,
    /// Rows the sampling kept.
    sampled_rows: usize,
    /// Rows the sampling left out (suppressed).
    rows_not_sampled: usize,
    /// Sampled rows suppressed in classes below k.
    suppressed_rows: usize,
    /// Whether the draws can be reproduced (`keyed`) or not (`fresh`).
    randomness: MechanismRandomness,
}

impl Algorithm for SafePub {
    fn name(&self) -> &'static str {
        "safepub"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        let Some(dp) = crate::privacy::registry::differential_privacy_of(ctx.spec)? else {
            return Err(Error::spec(
                "privacy.models.differential-privacy",
                "`safepub` is the mechanism of differential privacy: give `[privacy.models.differential-privacy]` with epsilon and delta (e.g. epsilon = 2.0, delta = 1e-6), or choose another algorithm",
            ));
        };
        let (mut rng, randomness) = mechanism_rng(ctx.spec.algorithm.seed)?;
        let active = ctx.table.active_rows();
        let sampled: Vec<u32> = active
            .iter()
            .copied()
            .filter(|_| rng.gen::<f64>() < dp.beta)
            .collect();
        let classes = EquivalenceClasses::of_rows(ctx.table, &sampled);
        let sub = Context {
            classes: &classes,
            ..*ctx
        };
        let lattice = Lattice::new(&sub, self.name())?;
        let attrs: Vec<usize> = (0..lattice.n_qi()).collect();
        let bits = lattice.key_bits(&attrs);
        let (levels, draws, evaluated) = match dp.search {
            DpSearch::Fixed(degree) => (
                lattice.heights().iter().map(|&h| degree.level(h)).collect(),
                0,
                1,
            ),
            DpSearch::Exponential { .. } if u64::holds(bits) => {
                search::<u64>(&sub, &lattice, &dp, &mut rng)?
            }
            DpSearch::Exponential { .. } if u128::holds(bits) => {
                search::<u128>(&sub, &lattice, &dp, &mut rng)?
            }
            DpSearch::Exponential { .. } => search::<Wide>(&sub, &lattice, &dp, &mut rng)?,
        };
        let (partition, verdict, _) = lattice.partition(&levels, false)?;
        if verdict.suppressed >= sampled.len() {
            return Err(Error::Unsatisfiable(format!(
                "the sample of {} rows has no class of k = {} records at the chosen generalisation, so the release would be empty; raise epsilon (a larger sample, a smaller k), give a coarser `generalisation`, or anonymise more rows",
                sampled.len(),
                dp.k
            )));
        }
        Ok(Outcome {
            details: details(&SafePubDetails {
                chosen: lattice.describe(&levels),
                epsilon: dp.epsilon,
                delta: dp.delta,
                beta: dp.beta,
                k: dp.k,
                search_budget: match dp.search {
                    DpSearch::Fixed(_) => 0.0,
                    DpSearch::Exponential { budget, .. } => budget,
                },
                draws,
                nodes_evaluated: evaluated,
                sampled_rows: sampled.len(),
                rows_not_sampled: active.len() - sampled.len(),
                suppressed_rows: verdict.suppressed,
                randomness,
            })?,
            partition,
        })
    }
}

/// The share of the search budget spent on the final choice among the
/// visited nodes; the rest is split over the steps.
const FINAL_SHARE: f64 = 0.9;

/// SafePub's search over the lattice of the sample: returns the chosen
/// node, the draws made and the nodes scored.
fn search<K: Key>(
    ctx: &Context<'_>,
    lattice: &Lattice<'_>,
    dp: &DifferentialPrivacy,
    rng: &mut ChaCha20Rng,
) -> Result<(Vec<u8>, usize, usize)> {
    let DpSearch::Exponential { budget, steps } = dp.search else {
        return Err(Error::Internal("search without a search budget".into()));
    };
    let attrs: Vec<usize> = (0..lattice.n_qi()).collect();
    let costs = lattice.cell_costs(Loss::Ncp);
    let n_qi = lattice.n_qi().max(1) as f64;
    let sensitivity = (dp.k.max(2) - 1) as f64;
    let mut evaluated = 0usize;
    let mut score_of = |levels: &[u8]| -> f64 {
        evaluated += 1;
        let fs = lattice.frequency_set::<K>(&attrs, levels, None, false);
        let verdict = lattice.verdict(&fs);
        -lattice.score(&fs, &verdict, &costs).loss / n_qi / sensitivity
    };
    // At the budgets SafePub is used with, each step's draw is close to
    // uniform (ε / steps on a score divided by k - 1): the walk gathers
    // candidates, and the final choice among them decides the loss. So a
    // tenth of the budget goes to the steps and nine tenths to that choice
    // (measured on Adult: mean granularity 0.62 against 0.70 with half).
    let epsilon_step = budget * (1.0 - FINAL_SHARE) / steps as f64;
    let epsilon_final = budget * FINAL_SHARE;
    let top = lattice.heights().to_vec();
    let top_score = score_of(&top);
    let mut pivot = (top, top_score);
    // The candidates in the order they were found (draws over a map's
    // order would not be reproducible), with their scores.
    let mut candidates: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut known: FxHashMap<Vec<u8>, ()> = FxHashMap::default();
    known.insert(pivot.0.clone(), ());
    // The pivots, each drawn by the exponential mechanism (the top first).
    let mut visited: Vec<(Vec<u8>, f64)> = Vec::new();
    for _ in 0..steps {
        ctx.cancel.check()?;
        for q in 0..pivot.0.len() {
            if pivot.0[q] == 0 {
                continue;
            }
            let mut below = pivot.0.clone();
            below[q] -= 1;
            if known.insert(below.clone(), ()).is_none() {
                let s = score_of(&below);
                candidates.push((below, s));
            }
        }
        if candidates.is_empty() {
            break;
        }
        let next = candidates.remove(exponential(&candidates, epsilon_step, rng));
        visited.push(std::mem::replace(&mut pivot, next));
    }
    visited.push(pivot);
    let draws = visited.len();
    let chosen = exponential(&visited, epsilon_final, rng);
    Ok((visited.swap_remove(chosen).0, draws, evaluated))
}

/// The exponential mechanism over `options`: index `i` with probability
/// proportional to `exp(epsilon · score_i / 2)` (scores already divided by
/// their sensitivity), shifted by the largest exponent so nothing
/// overflows.
fn exponential(options: &[(Vec<u8>, f64)], epsilon: f64, rng: &mut ChaCha20Rng) -> usize {
    let exponents: Vec<f64> = options.iter().map(|(_, s)| 0.5 * epsilon * s).collect();
    let shift = exponents.iter().copied().fold(f64::MIN, f64::max);
    let weights: Vec<f64> = exponents.iter().map(|e| (e - shift).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut draw = rng.gen::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if draw < *w {
            return i;
        }
        draw -= w;
    }
    options.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exponential_mechanism_favours_better_scores() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let options = vec![(vec![0], -10.0), (vec![1], 0.0)];
        let picks = (0..2000)
            .filter(|_| exponential(&options, 1.0, &mut rng) == 1)
            .count();
        // e^5 : 1, so about 99.3 % pick the better option.
        assert!(picks > 1950, "{picks}");
        let even = (0..2000)
            .filter(|_| exponential(&options, 0.0, &mut rng) == 1)
            .count();
        assert!((800..1200).contains(&even), "{even}");
    }
}
