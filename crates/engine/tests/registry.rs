//! An algorithm defined here, registered through the public API, runs end to
//! end through the release path every front end takes
//! ([`kanon_engine::release`], the path of `kanon anonymize`), with both
//! verifications; one that breaks k is refused, and capabilities it does not
//! declare are never used.

mod common;

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use kanon_engine::algorithms::registry::{self, Capabilities, Registration};
use kanon_engine::algorithms::{Algorithm, Context, Outcome};
use kanon_engine::partition::Partition;
use kanon_engine::spec::JobSpec;
use kanon_engine::{Error, Result};

/// Publishes the whole table as one class: the coarsest local recoding.
#[derive(Debug)]
struct OneClass;

impl Algorithm for OneClass {
    fn name(&self) -> &'static str {
        "one-class"
    }
    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        ctx.cancel.check()?;
        Ok(Outcome {
            partition: Partition::tightest(ctx.table, vec![0; ctx.table.n_rows()]),
            details: serde_json::json!({ "classes": 1 }),
        })
    }
}

/// Publishes every row as a class of its own: breaks k on purpose.
#[derive(Debug)]
struct EveryRowAlone;

impl Algorithm for EveryRowAlone {
    fn name(&self) -> &'static str {
        "every-row-alone"
    }
    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        Ok(Outcome {
            partition: Partition::tightest(ctx.table, (0..ctx.table.n_rows() as u32).collect()),
            details: serde_json::Value::Null,
        })
    }
}

fn register_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        registry::register(Registration {
            name: "one-class",
            summary: "every row in one class (a test)",
            capabilities: Capabilities::NONE,
            build: |_| Ok(Box::new(OneClass)),
        })
        .unwrap();
        registry::register(Registration {
            name: "every-row-alone",
            summary: "every row a class (a broken test algorithm)",
            capabilities: Capabilities::NONE,
            build: |_| Ok(Box::new(EveryRowAlone)),
        })
        .unwrap();
    });
}

fn job(algorithm: &str, extra: &str) -> JobSpec {
    toml::from_str(&format!(
        r#"
        [privacy]
        k = 3
        {extra}
        [algorithm]
        name = "{algorithm}"
        [[attributes]]
        name = "age"
        role = "quasi-identifier"
        [[attributes]]
        name = "city"
        role = "quasi-identifier"
        [[attributes]]
        name = "disease"
        role = "sensitive"
        "#
    ))
    .unwrap()
}

fn input() -> RecordBatch {
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("age", DataType::Int64, false),
            Field::new("city", DataType::Utf8, false),
            Field::new("disease", DataType::Utf8, false),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![30, 41, 52, 33, 47])) as ArrayRef,
            Arc::new(StringArray::from(vec![
                "Lyon", "Nice", "Lyon", "Paris", "Nice",
            ])),
            Arc::new(StringArray::from(vec![
                "flu", "cold", "gout", "flu", "ulcer",
            ])),
        ],
    )
    .unwrap()
}

/// The release path of every front end, as `kanon anonymize` takes it.
fn release(spec: &JobSpec) -> Result<RecordBatch> {
    common::release(spec, &Default::default(), &input(), u64::MAX).map(|(out, _)| out)
}

#[test]
fn a_registered_algorithm_runs_through_the_release_path() {
    register_once();
    assert!(registry::names().contains(&"one-class"));
    let out = release(&job("one-class", "")).unwrap();
    assert_eq!(out.num_rows(), 5);
    let ages = arrow::compute::cast(out.column_by_name("age").unwrap(), &DataType::Utf8).unwrap();
    assert!(ages.as_string::<i32>().iter().all(|a| a == Some("[30-52]")));
}

#[test]
fn a_registered_algorithm_that_breaks_k_is_refused() {
    register_once();
    let err = release(&job("every-row-alone", "")).unwrap_err();
    assert!(matches!(err, Error::VerificationFailed(_)), "{err}");
}

#[test]
fn undeclared_capabilities_are_never_used() {
    register_once();
    // No l-diversity capability: a job with l is refused before any work.
    let err = release(&job("one-class", "l = 2")).unwrap_err().to_string();
    assert!(
        err.contains("privacy.l") && err.contains("does not honour l-diversity"),
        "{err}"
    );
    // Not block-wise: block_size is refused.
    let mut spec = job("one-class", "");
    spec.algorithm
        .params
        .insert("block_size".into(), serde_json::json!(2));
    let err = release(&spec).unwrap_err().to_string();
    assert!(err.contains("does not run block by block"), "{err}");
    // A name is registered once.
    let err = registry::register(Registration {
        name: "one-class",
        summary: "",
        capabilities: Capabilities::NONE,
        build: |_| Ok(Box::new(OneClass)),
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("exists"), "{err}");
}
