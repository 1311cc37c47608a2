//! The privacy-model registry: models a job names under `[privacy.models]`,
//! built in or added by a library user ([`register`]), each with its name,
//! a one-line summary and how to build it from the job and its parameters
//! (ARX keeps its criteria the same way: `criteria/*.java`, one class per
//! model). k-anonymity, the `<shield, k>` requirements and `privacy.l` keep
//! their own settings; a registered model adds to them. Every model built
//! here is checked by both verifiers like the built-in ones, and only
//! algorithms that declare `l_diversity` (they honour models beyond k) run a
//! job with one.
//!
//! ```toml
//! [privacy.models.entropy-l-diversity]
//! column = "occupation"
//! l = 3
//!
//! [privacy.models.t-closeness]
//! column = "salary-class"   # default: every sensitive attribute
//! t = 0.2
//! distance = "equal"         # or "hierarchical", "ordered"
//!
//! [privacy.models.beta-likeness]
//! column = "occupation"     # default: every sensitive attribute
//! beta = 1.0
//! variant = "enhanced"      # default; or "basic"
//!
//! [privacy.models.delta-disclosure]
//! column = "salary-class"
//! delta = 1.2               # |log2 p/q| < delta for every value
//!
//! [privacy.models.risk-threshold]
//! k = 10        # no record's prosecutor risk above 1/10
//! mean = 0.05   # mean prosecutor risk below 5 %
//!
//! [privacy.models.average-risk]  # ARX's average re-identification risk
//! average = 0.05                 # mean prosecutor risk at most 5 %
//! highest = 0.2                  # records above risk 1/5 are at risk ...
//! records_at_risk = 0.01         # ... and at most 1 % of them may be
//!
//! [privacy.models.population-uniqueness]
//! threshold = 0.01          # at most 1 % of the population unique
//! model = "dankar"          # or "pitman", "zayatz", "snb"
//! population_size = 240000000  # default: `[risk] population_size`
//!
//! [privacy.models.sample-uniqueness]
//! threshold = 0.01          # at most 1 % of the release alone in its class
//!
//! [privacy.models.k-map]    # estimated from the sampling fraction, as ARX
//! k = 10
//! population_size = 240000000  # default: `[risk] population_size`
//! significance = 0.01       # default
//! estimator = "poisson"     # or "zero-truncated-poisson"
//!
//! [privacy.models.delta-presence]  # the input is the population
//! subset = "in_study"       # boolean column: the research subset, published
//! d_min = 0.0               # share of research records a class covers ...
//! d_max = 0.5               # ... among the population it covers
//!
//! [privacy.models.differential-privacy]  # SafePub; algorithm "safepub"
//! epsilon = 2.0
//! delta = 1e-6
//! search_budget = 0.1       # default; or generalisation = "medium"
//! steps = 100               # default
//! ```

use serde::Deserialize;

use super::average_risk::AverageRisk;
use super::delta_presence::DeltaPresence;
use super::differential_privacy::{DifferentialPrivacy, DpSearch, GeneralisationDegree};
use super::k_map::{CellSizeEstimator, KMap};
use super::l_diversity::{DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity};
use super::likeness::{BetaLikeness, DeltaDisclosure};
use super::risk_threshold::RiskThreshold;
use super::t_closeness::{GroundDistance, TCloseness};
use super::uniqueness::{UniquenessThreshold, UniquenessThresholdModel};
use super::PrivacyModel;
use crate::error::{Error, Result};
use crate::registry::{Named, Registry};
use crate::spec::{JobSpec, Kind, Role};

/// Builds a model's instances (none, one per column, ...) from the job and
/// the parameters written under `[privacy.models.NAME]`, or says which
/// parameter is wrong ([`Error::Spec`]).
pub type Build = fn(&JobSpec, &serde_json::Value) -> Result<Vec<Box<dyn PrivacyModel>>>;

/// One registered privacy model.
#[derive(Debug, Clone, Copy)]
pub struct ModelRegistration {
    /// The name jobs use under `[privacy.models]`, lower case with hyphens.
    pub name: &'static str,
    /// One line for help texts and tables.
    pub summary: &'static str,
    /// How to build it.
    pub build: Build,
}

impl Named for ModelRegistration {
    fn name(&self) -> &'static str {
        self.name
    }
}

/// A model's parameters as `T`, or an error naming `setting` (the model's
/// `privacy.models.NAME`) and what serde found wrong (an unknown field, a
/// missing one, a value of the wrong type).
fn parse<T: serde::de::DeserializeOwned>(setting: &str, params: &serde_json::Value) -> Result<T> {
    serde_json::from_value(params.clone()).map_err(|e| Error::spec(setting, e.to_string()))
}

/// Parameters of the l-diversity models when named under
/// `[privacy.models]`: one sensitive `column` (default: every column
/// `privacy.sensitive` names), `l`, and `c` for recursive (c,l).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LParams {
    column: Option<String>,
    l: usize,
    c: Option<f64>,
}

fn l_params(
    name: &str,
    spec: &JobSpec,
    params: &serde_json::Value,
) -> Result<(Vec<String>, LParams)> {
    let p: LParams = parse(&format!("privacy.models.{name}"), params)?;
    if p.l < 2 {
        return Err(Error::spec(
            format!("privacy.models.{name}.l"),
            format!("l = {} protects nothing; give l >= 2", p.l),
        ));
    }
    let columns = match &p.column {
        Some(c) => vec![c.clone()],
        None => spec.diversity_columns(),
    };
    if columns.is_empty() {
        return Err(Error::spec(
            format!("privacy.models.{name}.column"),
            "no sensitive column: set `column` or give an attribute role = \"sensitive\""
                .to_string(),
        ));
    }
    for c in &columns {
        if spec.role_of(c) != Role::Sensitive {
            return Err(Error::spec(
                format!("privacy.models.{name}.column"),
                format!("`{c}` is not an attribute with `role = \"sensitive\"`"),
            ));
        }
    }
    Ok((columns, p))
}

/// Parameters of `[privacy.models.t-closeness]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TParams {
    column: Option<String>,
    t: f64,
    distance: Option<GroundDistance>,
}

/// One t-closeness model per sensitive column (`column`, or every sensitive
/// attribute), its ground distance decided from the attribute where the job
/// says enough: `distance` when given (hierarchical needs the attribute's
/// `hierarchy`; ordered needs numbers, which the data says: checked before
/// any work by [`PrivacyModel::check_feasible`]), else hierarchical when the attribute names a `hierarchy`, ordered for
/// `type = "numeric"`, equal for `type = "categorical"`, and otherwise by
/// the column's data (ordered for numbers, else equal).
fn t_closeness(spec: &JobSpec, params: &serde_json::Value) -> Result<Vec<Box<dyn PrivacyModel>>> {
    const NAME: &str = "privacy.models.t-closeness";
    let p: TParams = parse(NAME, params)?;
    if !(p.t > 0.0 && p.t <= 1.0) {
        return Err(Error::spec(
            format!("{NAME}.t"),
            format!(
                "t = {} is not in (0, 1]: t bounds the Earth Mover's Distance between a class's sensitive values and the whole table's, a share between 0 (identical) and 1; give e.g. t = 0.2",
                p.t
            ),
        ));
    }
    let columns: Vec<String> = match &p.column {
        Some(c) => vec![c.clone()],
        None => spec.sensitive().map(|a| a.name.clone()).collect(),
    };
    if columns.is_empty() {
        return Err(Error::spec(
            format!("{NAME}.column"),
            "no sensitive column: set `column` or give an attribute role = \"sensitive\"",
        ));
    }
    columns
        .into_iter()
        .map(|column| {
            let Some(a) = spec
                .sensitive()
                .find(|a| a.name == column)
            else {
                return Err(Error::spec(
                    format!("{NAME}.column"),
                    format!("`{column}` is not an attribute with `role = \"sensitive\"`"),
                ));
            };
            let distance = match (p.distance, a.hierarchy.is_some(), a.kind) {
                (Some(GroundDistance::Hierarchical), false, _) => {
                    return Err(Error::spec(
                        format!("{NAME}.distance"),
                        format!("the hierarchical distance needs the hierarchy of `{column}`: give `hierarchy = \"file.csv\"` on that attribute, or choose `distance = \"equal\"`"),
                    ))
                }
                (Some(d), _, _) => Some(d),
                (None, true, _) => Some(GroundDistance::Hierarchical),
                (None, false, Some(Kind::Numeric)) => Some(GroundDistance::Ordered),
                (None, false, Some(Kind::Categorical)) => Some(GroundDistance::Equal),
                (None, false, None) => None,
            };
            Ok(Box::new(TCloseness {
                column,
                t: p.t,
                distance,
            }) as Box<dyn PrivacyModel>)
        })
        .collect()
}

/// Parameters of `[privacy.models.risk-threshold]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RiskParams {
    k: usize,
    mean: f64,
}

fn risk_threshold(_: &JobSpec, params: &serde_json::Value) -> Result<Vec<Box<dyn PrivacyModel>>> {
    const NAME: &str = "privacy.models.risk-threshold";
    let p: RiskParams = parse(NAME, params)?;
    if p.k < 2 {
        return Err(Error::spec(
            format!("{NAME}.k"),
            format!(
                "k = {} allows a prosecutor risk of 1 (a record alone in its class); give k >= 2",
                p.k
            ),
        ));
    }
    if !(p.mean > 0.0 && p.mean <= 1.0) {
        return Err(Error::spec(
            format!("{NAME}.mean"),
            format!("mean = {} is not in (0, 1]: it bounds the mean prosecutor risk (classes / rows), e.g. mean = 0.05", p.mean),
        ));
    }
    Ok(vec![Box::new(RiskThreshold {
        k: p.k,
        mean: p.mean,
    })])
}

/// A share parameter in `(0, 1]` (or `[0, 1]` when `zero` is allowed),
/// or an error naming the setting and what it bounds.
fn share(name: &str, setting: &str, v: f64, zero: bool, what: &str) -> Result<f64> {
    let ok = if zero {
        (0.0..=1.0).contains(&v)
    } else {
        v > 0.0 && v <= 1.0
    };
    if ok {
        Ok(v)
    } else {
        Err(Error::spec(
            format!("privacy.models.{name}.{setting}"),
            format!(
                "{setting} = {v} is not in {}: it is {what}",
                if zero { "[0, 1]" } else { "(0, 1]" }
            ),
        ))
    }
}

/// Parameters of `[privacy.models.average-risk]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AverageRiskParams {
    average: f64,
    highest: Option<f64>,
    records_at_risk: Option<f64>,
}

fn average_risk(_: &JobSpec, params: &serde_json::Value) -> Result<Vec<Box<dyn PrivacyModel>>> {
    const NAME: &str = "average-risk";
    let p: AverageRiskParams = parse(&format!("privacy.models.{NAME}"), params)?;
    let average = share(
        NAME,
        "average",
        p.average,
        false,
        "the largest mean prosecutor risk (classes / rows), e.g. average = 0.05",
    )?;
    let highest = p
        .highest
        .map(|h| {
            share(
                NAME,
                "highest",
                h,
                false,
                "the risk above which a record is at risk, e.g. highest = 0.2 (classes of 5)",
            )
        })
        .transpose()?;
    if p.records_at_risk.is_some() && highest.is_none() {
        return Err(Error::spec(
            format!("privacy.models.{NAME}.records_at_risk"),
            "records_at_risk is the share of records above `highest`: give `highest` too (e.g. highest = 0.2)",
        ));
    }
    let records_at_risk = share(
        NAME,
        "records_at_risk",
        p.records_at_risk.unwrap_or(0.0),
        true,
        "the largest share of records whose risk is above `highest`, e.g. 0.01",
    )?;
    Ok(vec![Box::new(AverageRisk {
        average,
        highest,
        records_at_risk,
    })])
}

/// `population_size`, or the job's `[risk] population_size`.
fn population_size_of(name: &str, spec: &JobSpec, given: Option<u64>) -> Result<u64> {
    match given.or(spec.risk.population_size) {
        Some(0) => Err(Error::spec(
            format!("privacy.models.{name}.population_size"),
            "must be the number of records of the population (at least the input's)",
        )),
        Some(n) => Ok(n),
        None => Err(Error::spec(
            format!("privacy.models.{name}.population_size"),
            "give the size of the population the data was drawn from (here or as `[risk] population_size`), e.g. population_size = 240000000",
        )),
    }
}

/// Parameters of `[privacy.models.population-uniqueness]` and
/// `[privacy.models.sample-uniqueness]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UniquenessParams {
    threshold: f64,
    model: Option<UniquenessThresholdModel>,
    population_size: Option<u64>,
}

fn population_uniqueness(
    spec: &JobSpec,
    params: &serde_json::Value,
) -> Result<Vec<Box<dyn PrivacyModel>>> {
    const NAME: &str = "population-uniqueness";
    let p: UniquenessParams = parse(&format!("privacy.models.{NAME}"), params)?;
    let model = p.model.unwrap_or_default();
    if model == UniquenessThresholdModel::Sample {
        return Err(Error::spec(
            format!("privacy.models.{NAME}.model"),
            "the sample's uniques are `[privacy.models.sample-uniqueness]`; choose model = \"dankar\", \"pitman\", \"zayatz\" or \"snb\"",
        ));
    }
    Ok(vec![Box::new(UniquenessThreshold {
        threshold: share(
            NAME,
            "threshold",
            p.threshold,
            false,
            "the largest share of the population estimated to be unique, e.g. 0.01",
        )?,
        model,
        population_size: Some(population_size_of(NAME, spec, p.population_size)?),
    })])
}

fn sample_uniqueness(
    _: &JobSpec,
    params: &serde_json::Value,
) -> Result<Vec<Box<dyn PrivacyModel>>> {
    const NAME: &str = "sample-uniqueness";
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Params {
        threshold: f64,
    }
    let p: Params = parse(&format!("privacy.models.{NAME}"), params)?;
    Ok(vec![Box::new(UniquenessThreshold {
        threshold: share(
            NAME,
            "threshold",
            p.threshold,
            false,
            "the largest share of the release's records alone in their class, e.g. 0.01",
        )?,
        model: UniquenessThresholdModel::Sample,
        population_size: None,
    })])
}

/// Parameters of `[privacy.models.k-map]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KMapParams {
    k: usize,
    population_size: Option<u64>,
    significance: Option<f64>,
    estimator: Option<CellSizeEstimator>,
}

fn k_map(spec: &JobSpec, params: &serde_json::Value) -> Result<Vec<Box<dyn PrivacyModel>>> {
    const NAME: &str = "k-map";
    let p: KMapParams = parse(&format!("privacy.models.{NAME}"), params)?;
    if p.k < 2 {
        return Err(Error::spec(
            format!("privacy.models.{NAME}.k"),
            format!("k = {} protects nobody: every class must match at least k >= 2 people of the population", p.k),
        ));
    }
    let significance = p.significance.unwrap_or(0.01);
    if !(0.0..1.0).contains(&significance) {
        return Err(Error::spec(
            format!("privacy.models.{NAME}.significance"),
            format!("significance = {significance} is not in [0, 1): it is the largest accepted chance that a class matches fewer than k people, e.g. 0.01"),
        ));
    }
    Ok(vec![Box::new(KMap {
        k: p.k,
        population_size: population_size_of(NAME, spec, p.population_size)?,
        significance,
        estimator: p.estimator.unwrap_or_default(),
        sample_rows: None,
    })])
}

/// The sensitive columns a per-column model reads: `column`, or every
/// sensitive attribute; each must be an attribute with `role =
/// "sensitive"`.
fn sensitive_columns_of(
    name: &str,
    spec: &JobSpec,
    column: Option<&String>,
) -> Result<Vec<String>> {
    let columns: Vec<String> = match column {
        Some(c) => vec![c.clone()],
        None => spec.sensitive().map(|a| a.name.clone()).collect(),
    };
    if columns.is_empty() {
        return Err(Error::spec(
            format!("privacy.models.{name}.column"),
            "no sensitive column: set `column` or give an attribute role = \"sensitive\"",
        ));
    }
    for c in &columns {
        if !spec.sensitive().any(|a| &a.name == c) {
            return Err(Error::spec(
                format!("privacy.models.{name}.column"),
                format!("`{c}` is not an attribute with `role = \"sensitive\"`"),
            ));
        }
    }
    Ok(columns)
}

/// Which β-likeness: the paper's basic (bound β) or enhanced (bound
/// `min(β, -ln q)`, which protects rare values more).
#[derive(Debug, Default, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum BetaVariant {
    Basic,
    /// The default: the stricter of the two.
    #[default]
    Enhanced,
}

/// Parameters of `[privacy.models.beta-likeness]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BetaParams {
    column: Option<String>,
    beta: f64,
    #[serde(default)]
    variant: BetaVariant,
}

fn beta_likeness(spec: &JobSpec, params: &serde_json::Value) -> Result<Vec<Box<dyn PrivacyModel>>> {
    const NAME: &str = "privacy.models.beta-likeness";
    let p: BetaParams = parse(NAME, params)?;
    if !(p.beta > 0.0 && p.beta.is_finite()) {
        return Err(Error::spec(
            format!("{NAME}.beta"),
            format!("beta = {} is not above 0: it bounds the relative gain (p - q) / q of a value's frequency in a class over the table's; give e.g. beta = 1.0", p.beta),
        ));
    }
    Ok(
        sensitive_columns_of("beta-likeness", spec, p.column.as_ref())?
            .into_iter()
            .map(|column| {
                Box::new(BetaLikeness {
                    column,
                    beta: p.beta,
                    enhanced: p.variant == BetaVariant::Enhanced,
                }) as Box<dyn PrivacyModel>
            })
            .collect(),
    )
}

/// Parameters of `[privacy.models.delta-disclosure]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeltaParams {
    column: Option<String>,
    delta: f64,
}

fn delta_disclosure(
    spec: &JobSpec,
    params: &serde_json::Value,
) -> Result<Vec<Box<dyn PrivacyModel>>> {
    const NAME: &str = "privacy.models.delta-disclosure";
    let p: DeltaParams = parse(NAME, params)?;
    if !(p.delta > 0.0 && p.delta.is_finite()) {
        return Err(Error::spec(
            format!("{NAME}.delta"),
            format!("delta = {} is not above 0: every value's |log2(p / q)| in a class must be below it; give e.g. delta = 1.2", p.delta),
        ));
    }
    Ok(
        sensitive_columns_of("delta-disclosure", spec, p.column.as_ref())?
            .into_iter()
            .map(|column| {
                Box::new(DeltaDisclosure {
                    column,
                    delta: p.delta,
                }) as Box<dyn PrivacyModel>
            })
            .collect(),
    )
}

/// Parameters of `[privacy.models.delta-presence]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresenceParams {
    subset: String,
    #[serde(default)]
    d_min: f64,
    d_max: f64,
}

/// The algorithms that publish one cell per value and QI (global recoding),
/// so that every person of the population is covered by at most one class.
const PRESENCE_ALGORITHMS: [&str; 2] = ["datafly", "incognito"];

/// δ-presence adds no per-class model: it lives apart in [`super::Privacy`]
/// ([`delta_presence_of`]); this entry checks its settings.
fn delta_presence(
    spec: &JobSpec,
    params: &serde_json::Value,
) -> Result<Vec<Box<dyn PrivacyModel>>> {
    presence_model(spec, params)?;
    Ok(Vec::new())
}

/// The job's `[privacy.models.delta-presence]`, checked; `None` when the
/// job names no such model.
///
/// # Errors
/// As the model's builder.
pub(crate) fn delta_presence_of(spec: &JobSpec) -> Result<Option<DeltaPresence>> {
    spec.privacy
        .models
        .get("delta-presence")
        .map(|params| presence_model(spec, params))
        .transpose()
}

fn presence_model(spec: &JobSpec, params: &serde_json::Value) -> Result<DeltaPresence> {
    const NAME: &str = "privacy.models.delta-presence";
    let p: PresenceParams = parse(NAME, params)?;
    let bound = |setting: &str, v: f64| -> Result<f64> {
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(Error::spec(
                format!("{NAME}.{setting}"),
                format!("{setting} = {v} is not in [0, 1]: it bounds the share of research records among the population records a published class covers, e.g. d_max = 0.5"),
            ))
        }
    };
    let (d_min, d_max) = (bound("d_min", p.d_min)?, bound("d_max", p.d_max)?);
    if d_min > d_max {
        return Err(Error::spec(
            format!("{NAME}.d_min"),
            format!("d_min = {d_min} is above d_max = {d_max}: no class can meet both; give d_min <= d_max"),
        ));
    }
    if d_min == 0.0 && d_max >= 1.0 {
        return Err(Error::spec(
            format!("{NAME}.d_max"),
            "d_min = 0 and d_max = 1 bound nothing: give d_max below 1 (e.g. 0.5: no class tells more than even odds that a person of the population is in the data)".to_string(),
        ));
    }
    let subset = p.subset.trim();
    let listed = spec.attributes.iter().find(|a| a.name == subset);
    let dropped = match listed {
        Some(a) => a.role == crate::spec::Role::Identifying,
        None => spec.columns.unlisted == crate::columns::Unlisted::Identifying,
    };
    if subset.is_empty() || !dropped {
        return Err(Error::spec(
            format!("{NAME}.subset"),
            format!(
                "the research subset column `{subset}` must be a boolean input column that is never published (it tells who is in the data): list it as an attribute with role = \"identifying\""
            ),
        ));
    }
    if !PRESENCE_ALGORITHMS.contains(&spec.algorithm.name.as_str()) {
        return Err(Error::spec(
            "algorithm.name",
            format!(
                "`{}` does not support delta-presence: a person of the population must be covered by one published class, so choose a global recoding: {}",
                spec.algorithm.name,
                PRESENCE_ALGORITHMS.join(", ")
            ),
        ));
    }
    if spec
        .algorithm
        .params
        .get("cell_suppression")
        .is_some_and(|v| v.as_bool() != Some(false))
    {
        return Err(Error::spec(
            "algorithm.cell_suppression",
            "a record with suppressed cells is covered by several classes' cells, so its presence has no one class's share: drop `cell_suppression` under delta-presence",
        ));
    }
    if spec.privacy.entity.is_some() {
        return Err(Error::spec(
            "privacy.entity",
            "delta-presence counts records of the population, one per person: publish one row per person and drop `privacy.entity`",
        ));
    }
    if let Some(a) = spec
        .attributes
        .iter()
        .find(|a| a.microaggregation.is_some())
    {
        return Err(Error::spec(
            format!("attributes.{}.microaggregation", a.name),
            "microaggregation publishes values computed from the research records, not cells the population can be matched to: remove it under delta-presence",
        ));
    }
    Ok(DeltaPresence {
        subset: subset.to_string(),
        d_min,
        d_max,
    })
}

/// Parameters of `[privacy.models.differential-privacy]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DpParams {
    epsilon: f64,
    delta: f64,
    generalisation: Option<GeneralisationDegree>,
    search_budget: Option<f64>,
    steps: Option<usize>,
}

/// The most expansions SafePub's search may make: each spends
/// `search_budget / steps`, so more steps only flatten the choice.
const MAX_DP_STEPS: usize = 10_000;

/// (ε, δ)-differential privacy by SafePub. The guarantee holds only for
/// the whole mechanism (sampling, a transformation chosen without looking
/// at the data or by the exponential mechanism, suppression of every class
/// below k), so the job must be exactly that: the algorithm `safepub`, no
/// other model, every row allowed to be suppressed, no transformation that
/// publishes values computed from the data, and one row per person.
fn differential_privacy(
    spec: &JobSpec,
    params: &serde_json::Value,
) -> Result<Vec<Box<dyn PrivacyModel>>> {
    Ok(vec![Box::new(dp_model(spec, params)?)])
}

/// The job's `[privacy.models.differential-privacy]`, checked as its
/// registry entry checks it; `None` when the job names no such model.
///
/// # Errors
/// As the model's builder.
pub(crate) fn differential_privacy_of(spec: &JobSpec) -> Result<Option<DifferentialPrivacy>> {
    spec.privacy
        .models
        .get("differential-privacy")
        .map(|params| dp_model(spec, params))
        .transpose()
}

fn dp_model(spec: &JobSpec, params: &serde_json::Value) -> Result<DifferentialPrivacy> {
    const NAME: &str = "privacy.models.differential-privacy";
    let p: DpParams = parse(NAME, params)?;
    if !(p.epsilon.is_finite() && p.epsilon > 0.0 && p.epsilon <= 20.0) {
        return Err(Error::spec(
            format!("{NAME}.epsilon"),
            format!("epsilon = {} is not in (0, 20]: it is the privacy budget, e.g. epsilon = 1 (smaller protects more)", p.epsilon),
        ));
    }
    if !(p.delta > 0.0 && p.delta < 1.0) {
        return Err(Error::spec(
            format!("{NAME}.delta"),
            format!("delta = {} is not in (0, 1): it is the chance the guarantee fails, far below 1 / rows, e.g. delta = 1e-6", p.delta),
        ));
    }
    let search = match (p.generalisation, p.search_budget, p.steps) {
        (Some(degree), None, None) => DpSearch::Fixed(degree),
        (Some(_), _, _) => {
            return Err(Error::spec(
                format!("{NAME}.generalisation"),
                "a fixed `generalisation` spends no budget on a search: drop `search_budget` and `steps`, or drop `generalisation` to let SafePub search",
            ))
        }
        (None, budget, steps) => {
            let budget = budget.unwrap_or(0.1);
            if !(budget > 0.0 && budget < p.epsilon) {
                return Err(Error::spec(
                    format!("{NAME}.search_budget"),
                    format!("search_budget = {budget} is not in (0, epsilon = {}): the search spends it and the sampling the rest; give e.g. search_budget = 0.1, or `generalisation = \"medium\"` to spend none", p.epsilon),
                ));
            }
            let steps = steps.unwrap_or(100);
            if !(1..=MAX_DP_STEPS).contains(&steps) {
                return Err(Error::spec(
                    format!("{NAME}.steps"),
                    format!("steps = {steps} is not in 1..={MAX_DP_STEPS}: the search makes that many expansions, e.g. steps = 100"),
                ));
            }
            DpSearch::Exponential { budget, steps }
        }
    };
    let refuse = |setting: &str, why: &str| -> Result<DifferentialPrivacy> {
        Err(Error::spec(
            setting.to_string(),
            format!("differential privacy holds only for SafePub's whole mechanism: {why}"),
        ))
    };
    if spec.algorithm.name != "safepub" {
        return refuse(
            "algorithm.name",
            &format!("choose name = \"safepub\" (not `{}`): it samples the rows, chooses the generalisation without reading them (or by the exponential mechanism) and suppresses every class below the derived k", spec.algorithm.name),
        );
    }
    if let Some(other) = spec
        .privacy
        .models
        .keys()
        .find(|m| *m != "differential-privacy")
    {
        return refuse(
            &format!("privacy.models.{other}"),
            "another model would choose the release by reading the data; remove it",
        );
    }
    if spec.privacy.l.is_some() {
        return refuse("privacy.l", "l-diversity reads the data; remove `l`");
    }
    if !spec.privacy.requirements.is_empty() {
        return refuse(
            "privacy.requirements",
            "requirements choose the release by reading the data; remove them",
        );
    }
    if spec.privacy.entity.is_some() {
        return refuse(
            "privacy.entity",
            "its guarantee is per record, and a person with several rows would be protected by less than epsilon; publish one row per person",
        );
    }
    if spec.suppression_limit() < 1.0 {
        return refuse(
            "privacy.suppression_limit",
            "every class below k is suppressed whatever its size, or the choice would depend on the data; set suppression_limit = 1.0",
        );
    }
    if let Some(a) = spec
        .attributes
        .iter()
        .find(|a| a.microaggregation.is_some())
    {
        return refuse(
            &format!("attributes.{}.microaggregation", a.name),
            "microaggregation publishes values computed from the records; remove it",
        );
    }
    Ok(DifferentialPrivacy::new(p.epsilon, p.delta, search))
}

const BUILT_IN: &[ModelRegistration] = &[
    ModelRegistration {
        name: "distinct-l-diversity",
        summary: "at least l distinct sensitive values per class (Machanavajjhala et al., ICDE 2006)",
        build: |spec, params| {
            let (columns, p) = l_params("distinct-l-diversity", spec, params)?;
            Ok(columns
                .into_iter()
                .map(|column| Box::new(DistinctLDiversity { column, l: p.l }) as Box<dyn PrivacyModel>)
                .collect())
        },
    },
    ModelRegistration {
        name: "entropy-l-diversity",
        summary: "the entropy of a class's sensitive values is at least ln l",
        build: |spec, params| {
            let (columns, p) = l_params("entropy-l-diversity", spec, params)?;
            Ok(columns
                .into_iter()
                .map(|column| Box::new(EntropyLDiversity { column, l: p.l }) as Box<dyn PrivacyModel>)
                .collect())
        },
    },
    ModelRegistration {
        name: "recursive-cl-diversity",
        summary: "recursive (c,l): the most frequent value occurs fewer than c times the l-th and rarer ones",
        build: |spec, params| {
            let (columns, p) = l_params("recursive-cl-diversity", spec, params)?;
            let c = p.c.ok_or_else(|| {
                Error::spec(
                    "privacy.models.recursive-cl-diversity.c",
                    "recursive (c,l)-diversity needs c (e.g. c = 3)".to_string(),
                )
            })?;
            Ok(columns
                .into_iter()
                .map(|column| {
                    Box::new(RecursiveCLDiversity { column, c, l: p.l }) as Box<dyn PrivacyModel>
                })
                .collect())
        },
    },
    ModelRegistration {
        name: "t-closeness",
        summary: "each class's sensitive distribution is within Earth Mover's Distance t of the whole table's (Li et al., ICDE 2007)",
        build: t_closeness,
    },
    ModelRegistration {
        name: "beta-likeness",
        summary: "no value's frequency in a class exceeds the table's by more than the share beta (enhanced: min(beta, -ln q)) (Cao and Karras, PVLDB 2012)",
        build: beta_likeness,
    },
    ModelRegistration {
        name: "delta-disclosure",
        summary: "every value's frequency p in a class has |log2(p / q)| < delta against the table's q (Brickell and Shmatikov, KDD 2008)",
        build: delta_disclosure,
    },
    ModelRegistration {
        name: "average-risk",
        summary: "the mean prosecutor risk is at most `average`; optionally at most the share `records_at_risk` of records above risk `highest` (ARX's average re-identification risk)",
        build: average_risk,
    },
    ModelRegistration {
        name: "population-uniqueness",
        summary: "at most the share `threshold` of the population is estimated unique from the release (Pitman, Zayatz, SNB or Dankar's rule, as ARX)",
        build: population_uniqueness,
    },
    ModelRegistration {
        name: "sample-uniqueness",
        summary: "at most the share `threshold` of the release's records are alone in their class",
        build: sample_uniqueness,
    },
    ModelRegistration {
        name: "k-map",
        summary: "every class matches at least k people of the population, estimated from the sampling fraction with a significance level as ARX (Sweeney 2001)",
        build: k_map,
    },
    ModelRegistration {
        name: "delta-presence",
        summary: "the input is a population and the boolean column `subset` its research subset, the rows published: every published class covers population records of which a share in [d_min, d_max] are research records (Nergiz et al., SIGMOD 2007)",
        build: delta_presence,
    },
    ModelRegistration {
        name: "differential-privacy",
        summary: "(epsilon, delta)-differential privacy by SafePub: random sampling, a generalisation chosen without reading the data or by the exponential mechanism, and classes below the derived k suppressed (Bild, Kuhn and Prasser, PoPETs 2018)",
        build: differential_privacy,
    },
    ModelRegistration {
        name: "risk-threshold",
        summary: "no record's prosecutor risk above 1/k and the mean risk (classes / rows) below `mean`",
        build: risk_threshold,
    },
];

/// The built-in models and those registered at run time.
static REGISTRY: Registry<ModelRegistration> =
    Registry::new("a privacy model", "privacy.models", BUILT_IN);

/// Adds a model for every job of this process.
///
/// # Errors
/// [`Error::Spec`] when the name is empty, not lower case with hyphens, or
/// taken.
pub fn register(model: ModelRegistration) -> Result<()> {
    REGISTRY.register(model)
}

/// Every registered model: the built-in ones, then those added by
/// [`register`].
pub fn all() -> Vec<ModelRegistration> {
    REGISTRY.all()
}

/// The model of that name, or an error listing the registered ones.
///
/// # Errors
/// [`Error::Spec`] naming `privacy.models.NAME`.
pub fn lookup(name: &str) -> Result<ModelRegistration> {
    REGISTRY.get(name).ok_or_else(|| {
        Error::spec(
            format!("privacy.models.{name}"),
            format!(
                "unknown privacy model `{name}`; choose one of: {}",
                all().iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
            ),
        )
    })
}

/// The models of the job's `[privacy.models]`, built.
///
/// # Errors
/// As [`lookup`] and the models' builders.
pub(crate) fn build_all(spec: &JobSpec) -> Result<Vec<Box<dyn PrivacyModel>>> {
    let mut out = Vec::new();
    for (name, params) in &spec.privacy.models {
        out.extend((lookup(name)?.build)(spec, params)?);
    }
    Ok(out)
}
