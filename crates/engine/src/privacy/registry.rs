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
//! ```

use serde::Deserialize;

use super::l_diversity::{DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity};
use super::PrivacyModel;
use crate::error::{Error, Result};
use crate::registry::{Named, Registry};
use crate::spec::{JobSpec, Role};

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
    let p: LParams = serde_json::from_value(params.clone())
        .map_err(|e| Error::spec(format!("privacy.models.{name}"), e.to_string()))?;
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
