//! HeuristicMin: the generalised table with the most distinct rows that
//! satisfies every anonymity requirement `<shield, k>` (Arca and Hewett,
//! "Data privacy with heuristic anonymisation", 2023; the HeuristicMin paper sections 3-5,
//! Fig. 2; `docs/SPEC.md` sections 1 and 4, worked examples 6 and 7).
//!
//! **States** are attribute-wise generalisations (`problem`): per shield
//! attribute a cut of its hierarchy. A lift of a shown value replaces it
//! *and its siblings* by their parent, in every row (the HeuristicMin paper section 3.2).
//! States are hashed by their cut, so identical states are expanded once.
//!
//! **The paper's search** (`search`): children come from the violating
//! rows (distinct rows whose projection on some requirement's shield has
//! fewer than k records). Best first: expand the open state with the most
//! rows, ties to fewer violating rows, then fewer generalisation steps,
//! then the first generated (Fig. 2 line 6). A satisfying state is never
//! expanded; the search stops when no open state has more rows than the
//! best satisfying one (line 12: generalisation never increases rows). Ties
//! between satisfying states go to fewer generalisation steps (levels
//! climbed summed over the distinct input rows, as Fig. 10 counts them),
//! then to the first found. Two successor functions:
//! - `attribute` (default, Fig. 2 as written): one child per shield
//!   attribute, lifting every value of every violating row at once;
//! - `value`: one child per attribute of a violated shield and per parent of
//!   a value of a violating row. This one is complete: if `C*` satisfies the
//!   requirements and a violating state `C` is finer, some violating row `v`
//!   has, on an attribute `B` of a shield it violates, a value strictly below
//!   its value in `C*` (otherwise every row matching `v` in `C*` would match
//!   it in `C`, with the same count); lifting it stays finer than `C*`. So
//!   the search is exact, but it explores far more states.
//!
//! The paper's `attribute` successors can miss the optimum (unit test
//! `attribute_successors_can_miss_the_optimum`), so its answer is only
//! called optimal after **the proof** (`exact`, `prove = true`, default):
//! an exact best-first search over the cuts of all shield attributes but the
//! one with the largest hierarchy, which is solved by dynamic programming
//! over its tree. It starts from the paper's answer, prunes with it, and
//! replaces it if it finds a larger table. Its size is exponential in the
//! number of those attributes; it is tried only when their cuts number at
//! most `proof_limit` (default one million), so a job without a budget
//! always ends.
//!
//! **Bounds.** The paper prunes with a state's rows. With a requirement on
//! all QIs of degree `k`, `bound = "classes"` (default) uses the tighter
//! `min(rows, big + small_records / k)`: every class of a satisfying
//! descendant either contains one of the state's classes of at least `k`
//! records or gathers `k` records from the smaller ones.
//!
//! **Budget.** `budget_nodes` (expanded states, both phases) or
//! `budget_seconds` stop the search early; the best satisfying table found
//! so far is returned with `proven_optimal = false`. A greedy dive
//! (`dive = true`, default) first follows the child with the fewest
//! violating rows to a satisfying state, so even a tiny budget has an
//! answer. A seconds budget makes the answer depend on the machine's speed;
//! use `budget_nodes` for reproducible results.
//!
//! The release publishes every shield attribute as its cut node (a
//! hierarchy node, [`Partition::with_tuples`](crate::partition::Partition::with_tuples));
//! QIs outside every shield are published unchanged. HeuristicMin does not
//! suppress rows (rows excluded by a null policy are suppressed as always).

mod exact;
mod problem;
mod search;

use serde::{Deserialize, Serialize};

use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::error::{Error, Result};
use crate::privacy::Requirement;

use exact::{Exact, ProofCounters};
use problem::{AttributeCut, Budget, Found, Problem, Stop};
use search::{Counters, PaperSearch};

/// How the children of a state are formed in the paper's search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Successors {
    /// One child per attribute lifting every value of every violating row
    /// (the HeuristicMin paper Fig. 2); may miss the optimum, which the proof then finds.
    #[default]
    Attribute,
    /// One child per attribute of a violated shield and lifted parent:
    /// exact over all attribute-wise states, but slow on large inputs.
    Value,
}

/// The upper bound on the rows of satisfying descendants used for pruning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// `min(rows, big + small_records / k)` for a requirement on all QIs;
    /// the state's rows otherwise.
    #[default]
    Classes,
    /// The state's rows (the paper's monotonicity argument).
    Rows,
}

fn yes() -> bool {
    true
}

fn default_proof_limit() -> f64 {
    1e6
}

/// HeuristicMin's parameters (`[algorithm]` keys of the job).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HeuristicMinParams {
    /// Successor function of the paper's search: `attribute` (default) or
    /// `value`.
    #[serde(default)]
    pub successors: Successors,
    /// Pruning bound of the paper's search: `classes` (default) or `rows`.
    #[serde(default)]
    pub bound: Bound,
    /// Start with a greedy dive to a satisfying state (default true).
    #[serde(default = "yes")]
    pub dive: bool,
    /// Prove the answer optimal over all attribute-wise states, improving it
    /// if needed (default true; not needed with `successors = "value"`).
    #[serde(default = "yes")]
    pub prove: bool,
    /// Try the proof only when the cuts of the shield attributes other than
    /// the largest number at most this many (default 1,000,000), so a job
    /// without a budget always ends.
    #[serde(default = "default_proof_limit")]
    pub proof_limit: f64,
    /// Stop after expanding this many states (both phases together).
    #[serde(default)]
    pub budget_nodes: Option<u64>,
    /// Stop after this many seconds of search (machine dependent).
    #[serde(default)]
    pub budget_seconds: Option<f64>,
}

impl Default for HeuristicMinParams {
    fn default() -> Self {
        HeuristicMinParams {
            successors: Successors::default(),
            bound: Bound::default(),
            dive: true,
            prove: true,
            proof_limit: default_proof_limit(),
            budget_nodes: None,
            budget_seconds: None,
        }
    }
}

/// The HeuristicMin algorithm.
#[derive(Debug, Clone, Default)]
pub struct HeuristicMin {
    params: HeuristicMinParams,
}

impl HeuristicMin {
    /// HeuristicMin with the given parameters.
    ///
    /// # Errors
    /// [`Error::Spec`] for a budget that is not a positive number of seconds.
    pub fn from_params(params: HeuristicMinParams) -> Result<Self> {
        if let Some(s) = params.budget_seconds {
            if !(s > 0.0 && s.is_finite()) {
                return Err(Error::spec(
                    "algorithm.budget_seconds",
                    "must be a positive number of seconds",
                ));
            }
        }
        if params.proof_limit.is_nan() || params.proof_limit < 0.0 {
            return Err(Error::spec(
                "algorithm.proof_limit",
                "must be a number of states, at least 0",
            ));
        }
        Ok(HeuristicMin { params })
    }
}

#[derive(Debug, Serialize)]
struct HeuristicMinDetails {
    successors: Successors,
    bound: Bound,
    requirements: Vec<String>,
    /// No attribute-wise generalisation satisfying the requirements has
    /// more rows.
    proven_optimal: bool,
    stopped_by: Stop,
    /// `paper-search` or `proof`.
    found_by: &'static str,
    #[serde(flatten)]
    search: Counters,
    proof: Option<ProofCounters>,
    rows_in: u32,
    violating_rows_in: u32,
    rows_out: u32,
    generalisation_steps: u64,
    /// Lifts from the input to the answer in the paper's search.
    depth: Option<u32>,
    /// Per shield attribute, the nodes values were lifted to.
    cut: Vec<AttributeCut>,
}

/// What both phases found.
struct Phases {
    answer: Found,
    details: HeuristicMinDetails,
}

impl Algorithm for HeuristicMin {
    fn name(&self) -> &'static str {
        "heuristic-min"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        let privacy = ctx.privacy;
        if !privacy.class_models().is_empty() {
            return Err(Error::spec(
                "algorithm.name",
                format!(
                    "heuristic-min enforces anonymity requirements <shield, k> only, not {}; choose another algorithm",
                    privacy
                        .class_models()
                        .iter()
                        .map(|m| m.describe())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        privacy.check_feasible(ctx.table)?;
        let problem = Problem::new(ctx.table, ctx.classes, privacy.requirements())?;
        let params = &self.params;
        let phases = match problem.layout.words {
            1 => run_phases::<1>(&problem, params, ctx.cancel),
            2 => run_phases::<2>(&problem, params, ctx.cancel),
            3 | 4 => run_phases::<4>(&problem, params, ctx.cancel),
            5..=8 => run_phases::<8>(&problem, params, ctx.cancel),
            _ => {
                return Err(Error::ResourcesExhausted(format!(
                    "heuristic-min packs a generalised row into 512 bits but this job needs {}; \
                     use fewer quasi-identifiers or smaller hierarchies",
                    problem.layout.bits
                )))
            }
        };
        ctx.cancel.check()?;
        let mut d = phases.details;
        d.requirements = privacy
            .requirements()
            .iter()
            .map(Requirement::describe)
            .collect();
        Ok(Outcome {
            partition: problem.partition(ctx.table, ctx.classes, &phases.answer.bits),
            details: details(&d)?,
        })
    }
}

/// The paper's search, then the proof.
fn run_phases<const N: usize>(
    p: &Problem<'_>,
    params: &HeuristicMinParams,
    cancel: &crate::cancel::Cancellation,
) -> Phases {
    let mut budget = Budget::new(params.budget_nodes, params.budget_seconds, cancel.clone());
    let paper = PaperSearch::<N>::new(p, params).run(&mut budget);
    let root_satisfies = paper.root.violating == 0;
    let counters = paper.counters;
    let mut best = paper.best.or_else(|| {
        // Unreachable without a dive only if the search space were empty;
        // dive from the input to stay total.
        let mut s = PaperSearch::<N>::new(p, params);
        Some(s.dive(vec![0u64; p.words], paper.root))
    });
    let exact_search = root_satisfies
        || (params.successors == Successors::Value && paper.stop == Stop::SearchComplete);
    let mut stop = paper.stop;
    let mut proof = None;
    let from_paper = best.as_ref().map(|b| (b.rows, b.steps, b.depth));
    if !exact_search && params.prove && paper.stop == Stop::SearchComplete {
        let exact = Exact::<N>::new(p);
        let c = if exact.rest_states() > params.proof_limit {
            exact.skipped()
        } else {
            exact.run(&mut budget, &mut best)
        };
        stop = c.stopped_by;
        proof = Some(c);
    }
    let answer = best.expect("a satisfying state: the dive always reaches one");
    let proven = stop == Stop::SearchComplete && (exact_search || proof.is_some());
    let found_by = if from_paper == Some((answer.rows, answer.steps, answer.depth)) {
        "paper-search"
    } else {
        "proof"
    };
    Phases {
        details: HeuristicMinDetails {
            successors: params.successors,
            bound: params.bound,
            requirements: Vec::new(),
            proven_optimal: proven,
            stopped_by: stop,
            found_by,
            search: counters,
            proof,
            rows_in: paper.root.rows,
            violating_rows_in: paper.root.violating,
            rows_out: answer.rows,
            generalisation_steps: answer.steps,
            depth: answer.depth,
            cut: p.describe_cut(&answer.bits),
        },
        answer,
    }
}

#[cfg(test)]
mod tests;
