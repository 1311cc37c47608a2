//! The privacy-model registry: a model defined in this file, registered
//! through the public API and named under `[privacy.models]`, holds in
//! every class of a release made through the release path (both
//! verifications); the built-in l-diversity models can be named the same
//! way; unknown names and algorithms that do not honour models are refused
//! before any work.

mod common;

use kanon_engine::privacy::registry::{self, ModelRegistration};
use kanon_engine::privacy::{ClassView, PrivacyModel};
use kanon_engine::spec::JobSpec;

/// Every class holds at least `m` rows (a stand-in for any class model).
#[derive(Debug)]
struct AtLeast {
    m: usize,
}

impl PrivacyModel for AtLeast {
    fn describe(&self) -> String {
        format!("at least {} rows", self.m)
    }
    fn min_class_size(&self) -> usize {
        self.m
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        class.rows.len() >= self.m
    }
}

fn register_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        registry::register(ModelRegistration {
            name: "at-least",
            summary: "every class holds at least m rows (a test)",
            build: |_, params| {
                let m = params["m"].as_u64().ok_or_else(|| {
                    kanon_engine::Error::spec("privacy.models.at-least.m", "give m")
                })? as usize;
                Ok(vec![Box::new(AtLeast { m })])
            },
        })
        .unwrap();
    });
}

fn adult_with(extra: &str) -> JobSpec {
    let (mut spec, _) = common::adult_job(&[]);
    let extra: JobSpec = toml::from_str(&format!(
        "[privacy]\nk = {}\n{extra}\n[[attributes]]\nname = \"x\"\nrole = \"qi\"\n",
        spec.privacy.k
    ))
    .unwrap();
    spec.privacy.models = extra.privacy.models;
    spec
}

#[test]
fn a_registered_model_holds_in_every_class_of_a_release() {
    register_once();
    let spec = adult_with("[privacy.models.at-least]\nm = 25");
    let hierarchies = common::load_hierarchies(&spec);
    let input = arrow::compute::concat_batches(
        &common::adult_batches()[0].schema(),
        &common::adult_batches(),
    )
    .unwrap();
    let (release, suppressed) = common::release(&spec, &hierarchies, &input, 1 << 20).unwrap();
    assert_eq!(release.num_rows() + suppressed, input.num_rows());
    let table = common::encode(&spec, &hierarchies, &[input]);
    let run = kanon_engine::anonymize(&spec, &table).unwrap();
    assert!(
        run.report.smallest_class >= 25,
        "{}",
        run.report.smallest_class
    );
    assert!(kanon_engine::privacy::Privacy::from_spec(&spec)
        .unwrap()
        .describe()
        .contains("at least 25 rows"));
}

#[test]
fn built_in_l_diversity_can_be_named_as_a_model() {
    let spec =
        adult_with("[privacy.models.distinct-l-diversity]\ncolumn = \"salary-class\"\nl = 2");
    let (_, table) = common::adult_table(&[]);
    let run = kanon_engine::anonymize(&spec, &table).unwrap();
    let salary = &run.report.sensitive[0];
    assert_eq!(salary.distinct_l, 2, "{salary:?}");
    // Entropy l = 2 is out of reach on this column (75 % one value): the
    // model says so before any work.
    let spec = adult_with("[privacy.models.entropy-l-diversity]\ncolumn = \"salary-class\"\nl = 2");
    let err = kanon_engine::anonymize(&spec, &table)
        .unwrap_err()
        .to_string();
    assert!(err.contains("entropy l-diversity (l = 2)"), "{err}");
}

#[test]
fn unknown_models_and_algorithms_without_the_capability_are_refused() {
    let err = adult_with("[privacy.models.t-closenes]\nt = 0.2")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown privacy model `t-closenes`"), "{err}");
    assert!(err.contains("entropy-l-diversity"), "{err}");
    let err = adult_with("[privacy.models.distinct-l-diversity]\ncolumn = \"age\"\nl = 2")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("not an attribute with `role = \"sensitive\"`"),
        "{err}"
    );
    let mut spec = adult_with("[privacy.models.distinct-l-diversity]\nl = 2");
    spec.algorithm.name = "heuristic-min".into();
    let err = kanon_engine::algorithms::by_name(&spec)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("does not honour privacy models beyond k"),
        "{err}"
    );
}
