//! Datafly (Sweeney, "Achieving k-anonymity privacy protection using
//! generalization and suppression", 2002; the baseline of the SBC thesis,
//! section 2.4): greedy full-domain generalisation with suppression.
//!
//! Starting from the leaves, while the rows in classes the privacy models
//! reject exceed the suppression limit, the QI with the most distinct values
//! in the current (generalised) table goes up one level of its hierarchy
//! (ties: the first QI in job order). The rows still in rejected classes
//! are then suppressed and counted. Each step's classes are rolled up from
//! the previous step's counts on the shared lattice (`algorithms/lattice.rs`).
//!
//! Sweeney's original stops once at most k rows remain to suppress. kanon
//! honours the job's `privacy.suppression_limit` instead (default 0, so no
//! row is suppressed unless the job allows it); a job reproduces the
//! original with a limit of `k / rows`.

use serde::{Deserialize, Serialize};

use crate::algorithms::lattice::{Key, Lattice, Wide};
use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::error::{Error, Result};

/// Datafly's parameters.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DataflyParams {
    /// Cell-level local suppression (sdcMicro's `localSuppression`): the
    /// records of classes the models reject keep their row and lose only
    /// the cells needed (`*`), instead of being suppressed whole; the
    /// suppression limit then bounds the records of the rejected classes.
    #[serde(default)]
    pub cell_suppression: bool,
}

/// The Datafly algorithm.
#[derive(Debug, Clone, Default)]
pub struct Datafly {
    params: DataflyParams,
}

impl Datafly {
    /// Datafly with the given parameters.
    pub fn from_params(params: DataflyParams) -> Self {
        Datafly { params }
    }
}

#[derive(Debug, Serialize)]
struct DataflyDetails {
    /// The chosen node: hierarchy level per QI (0 = unchanged).
    chosen: serde_json::Map<String, serde_json::Value>,
    /// Sum of the chosen levels.
    chosen_height: usize,
    /// QIs generalised, in order, one level each.
    steps: Vec<String>,
    /// Nodes whose classes were tested.
    nodes_evaluated: usize,
    /// Nodes of the whole lattice.
    lattice_size: u64,
    /// Rows suppressed (classes the models reject), nulls excluded.
    suppressed_rows: usize,
    /// Rows the suppression limit allows.
    max_suppressed: usize,
    /// Cells suppressed instead of rows (`cell_suppression`).
    suppressed_cells: usize,
    /// Records that lost a cell (`cell_suppression`): those of the
    /// rejected classes (`suppressed_rows`, bounded by the suppression
    /// limit) and those of accepted classes folded into the all-`*` class
    /// as a last resort.
    records_with_suppressed_cells: usize,
}

impl Algorithm for Datafly {
    fn name(&self) -> &'static str {
        "datafly"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        if self.params.cell_suppression && ctx.privacy.has_shield_requirements() {
            return Err(Error::spec(
                "algorithm.cell_suppression",
                "places records by their classes, not by the projections `privacy.requirements` shield: drop `cell_suppression` or the requirements",
            ));
        }
        ctx.privacy.check_feasible(ctx.table)?;
        let lattice = Lattice::new(ctx, self.name())?;
        let attrs: Vec<usize> = (0..lattice.n_qi()).collect();
        let bits = lattice.key_bits(&attrs);
        let (levels, steps) = if u64::holds(bits) {
            climb::<u64>(ctx, &lattice)?
        } else if u128::holds(bits) {
            climb::<u128>(ctx, &lattice)?
        } else {
            climb::<Wide>(ctx, &lattice)?
        };
        let evaluated = steps.len() + 1;
        let (partition, verdict, (suppressed_cells, records_with_suppressed_cells)) =
            lattice.partition(&levels, self.params.cell_suppression)?;
        let lattice_size = lattice
            .heights()
            .iter()
            .fold(1u64, |n, &h| n.saturating_mul(h as u64 + 1));
        Ok(Outcome {
            details: details(&DataflyDetails {
                chosen: lattice.describe(&levels),
                chosen_height: levels.iter().map(|&l| l as usize).sum(),
                steps,
                nodes_evaluated: evaluated,
                lattice_size,
                suppressed_rows: verdict.suppressed,
                max_suppressed: lattice.max_suppressed(),
                suppressed_cells,
                records_with_suppressed_cells,
            })?,
            partition,
        })
    }
}

/// Datafly's walk up the lattice: returns the first accepted node and the
/// QIs generalised on the way.
fn climb<K: Key>(ctx: &Context<'_>, lattice: &Lattice<'_>) -> Result<(Vec<u8>, Vec<String>)> {
    let attrs: Vec<usize> = (0..lattice.n_qi()).collect();
    let mut levels = vec![0u8; lattice.n_qi()];
    let mut fs = lattice.frequency_set::<K>(&attrs, &levels, None, false);
    let mut steps = Vec::new();
    // A node that suppresses every row publishes nothing: it is never the
    // answer, whatever the suppression limit allows.
    let active = ctx.table.active_weight();
    let publishes = |v: &super::lattice::Verdict| v.accepted && v.suppressed < active;
    while !publishes(&lattice.verdict(&fs)) {
        ctx.cancel.check()?;
        let next = attrs
            .iter()
            .filter(|&&q| levels[q] < lattice.heights()[q])
            .map(|&q| (lattice.distinct_at(q, levels[q]), q))
            // Most distinct values; ties to the first QI.
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let Some((_, q)) = next else {
            return Err(Error::Unsatisfiable(format!(
                "even with every quasi-identifier at the root of its hierarchy, more rows than the \
                 suppression limit allows ({}) are in classes that {} rejects, or no row would be \
                 published; raise privacy.suppression_limit or relax the model",
                lattice.max_suppressed(),
                ctx.privacy.describe()
            )));
        };
        levels[q] += 1;
        steps.push(ctx.table.columns()[q].name().to_string());
        fs = lattice.frequency_set(&attrs, &levels, Some(&fs), false);
    }
    Ok((levels, steps))
}
