//! δ-presence (issue 36; Nergiz, Atzori, Clifton, SIGMOD 2007): releases of
//! random populations are recounted by an oracle that matches every
//! population record to the published labels through the hierarchy files
//! alone; the refusals name their setting; the partition verifier rejects a
//! release that misses stricter bounds.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::partition::SUPPRESSED;
use kanon_engine::privacy::{DeltaPresence, Privacy};
use kanon_engine::spec::JobSpec;
use kanon_engine::Error;
use proptest::prelude::*;
use rustc_hash::FxHashMap;

/// Two QIs with hierarchy files: `a` (8 values, 3 levels above) and `b`
/// (4 values, 2 levels above).
const A: &str = "a0;p0;q0;*\na1;p0;q0;*\na2;p1;q0;*\na3;p1;q0;*\na4;p2;q1;*\na5;p2;q1;*\na6;p3;q1;*\na7;p3;q1;*\n";
const B: &str = "b0;x;*\nb1;x;*\nb2;y;*\nb3;y;*\n";

fn hierarchies() -> FxHashMap<String, Arc<Hierarchy>> {
    [("a.csv", A), ("b.csv", B)]
        .into_iter()
        .map(|(n, t)| {
            (
                n.to_string(),
                Arc::new(Hierarchy::from_csv(n, t, ';').unwrap()),
            )
        })
        .collect()
}

/// Every ancestor of each leaf (itself included), from the file's text.
fn ancestors(text: &str) -> HashMap<String, Vec<String>> {
    text.lines()
        .map(|l| {
            let cells: Vec<String> = l.split(';').map(String::from).collect();
            (cells[0].clone(), cells)
        })
        .collect()
}

fn spec(algorithm: &str, k: usize, limit: f64, presence: &str) -> JobSpec {
    toml::from_str(&format!(
        r#"
[privacy]
k = {k}
suppression_limit = {limit}

[privacy.models.delta-presence]
{presence}

[algorithm]
name = "{algorithm}"

[[attributes]]
name = "in"
role = "identifying"

[[attributes]]
name = "a"
role = "quasi-identifier"
hierarchy = "a.csv"

[[attributes]]
name = "b"
role = "quasi-identifier"
hierarchy = "b.csv"

[[attributes]]
name = "s"
role = "sensitive"
"#
    ))
    .unwrap()
}

fn batch(a: &[String], b: &[String], flags: &[Option<bool>]) -> RecordBatch {
    let s: Vec<String> = (0..a.len()).map(|i| format!("s{}", i % 3)).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(BooleanArray::from(flags.to_vec())),
        Arc::new(StringArray::from(a.to_vec())),
        Arc::new(StringArray::from(b.to_vec())),
        Arc::new(StringArray::from(s)),
    ];
    let schema = Schema::new(vec![
        Field::new("in", DataType::Boolean, true),
        Field::new("a", DataType::Utf8, false),
        Field::new("b", DataType::Utf8, false),
        Field::new("s", DataType::Utf8, false),
    ]);
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

/// The oracle: per published class (equal labels), its research records
/// and the population records whose values the labels cover, each label
/// being one of the value's ancestors in the hierarchy file; and the
/// population records no class covers.
fn recount(release: &RecordBatch, a: &[String], b: &[String]) -> (Vec<(usize, usize)>, usize) {
    let (up_a, up_b) = (ancestors(A), ancestors(B));
    let (la, lb) = (common::strings(release, "a"), common::strings(release, "b"));
    let mut research: HashMap<(String, String), usize> = HashMap::new();
    for (x, y) in la.into_iter().zip(lb) {
        *research.entry((x, y)).or_default() += 1;
    }
    let covers = |x: &str, y: &str, va: &String, vb: &String| {
        up_a[va].iter().any(|l| l == x) && up_b[vb].iter().any(|l| l == y)
    };
    let classes = research
        .iter()
        .map(|((x, y), &r)| {
            let p = a
                .iter()
                .zip(b)
                .filter(|(va, vb)| covers(x, y, va, vb))
                .count();
            (r, p)
        })
        .collect();
    let unmatched = a
        .iter()
        .zip(b)
        .filter(|(va, vb)| !research.keys().any(|(x, y)| covers(x, y, va, vb)))
        .count();
    (classes, unmatched)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever the population, subset, bounds and algorithm: a release
    /// publishes research records only, every class has at least k of them
    /// and a share of the population it covers within the bounds, by the
    /// oracle's count; or the job is refused as unsatisfiable, never as a
    /// failed verification.
    #[test]
    fn releases_keep_every_share_within_the_bounds(
        rows in prop::collection::vec((0usize..8, 0usize..4, 0u32..100), 20..160),
        share in prop::sample::select(vec![20u32, 50, 80]),
        k in 2usize..4,
        bounds in prop::sample::select(vec![(0.0, 0.5), (0.1, 0.6), (0.2, 0.9), (0.0, 0.3)]),
        limit in prop::sample::select(vec![0.0, 0.1, 0.5]),
        algorithm in prop::sample::select(vec!["datafly", "incognito"]),
    ) {
        let a: Vec<String> = rows.iter().map(|r| format!("a{}", r.0)).collect();
        let b: Vec<String> = rows.iter().map(|r| format!("b{}", r.1)).collect();
        let flags: Vec<Option<bool>> = rows.iter().map(|r| Some(r.2 < share)).collect();
        let research = flags.iter().filter(|f| **f == Some(true)).count();
        let (d_min, d_max) = bounds;
        let spec = spec(
            algorithm,
            k,
            limit,
            &format!("subset = \"in\"\nd_min = {d_min}\nd_max = {d_max}"),
        );
        let input = batch(&a, &b, &flags);
        let hs = hierarchies();
        match common::release(&spec, &hs, &input, 1 << 20) {
            Ok((release, withheld)) => {
                prop_assert!(release.column_by_name("in").is_none(), "the subset column was published");
                prop_assert_eq!(release.num_rows() + withheld, rows.len());
                prop_assert!(release.num_rows() <= research);
                // At most the limit of the research records suppressed.
                let suppressed = research - release.num_rows();
                prop_assert!(suppressed as f64 <= limit * research as f64 + 1e-9);
                let (classes, unmatched) = recount(&release, &a, &b);
                // The people no class covers hold the suppressed research
                // records: their share is bounded too.
                if unmatched > 0 {
                    let share = suppressed as f64 / unmatched.max(suppressed) as f64;
                    prop_assert!(share >= d_min - 1e-9 && share <= d_max + 1e-9,
                        "{} suppressed among {} unmatched", suppressed, unmatched);
                }
                for (r, p) in classes {
                    prop_assert!(r >= k, "a class of {} research records", r);
                    prop_assert!(p >= r);
                    let delta = r as f64 / p as f64;
                    prop_assert!(delta >= d_min - 1e-9 && delta <= d_max + 1e-9,
                        "share {} outside [{}, {}]", delta, d_min, d_max);
                }
                // The records outside the subset are never in a class.
                let table = common::encode(&spec, &hs, std::slice::from_ref(&input));
                let done = kanon_engine::pipeline::anonymize(&spec, &table).unwrap();
                for (row, flag) in flags.iter().enumerate() {
                    if *flag == Some(false) {
                        prop_assert_eq!(done.partition.group_of_row()[row], SUPPRESSED);
                    }
                }
            }
            Err(Error::Unsatisfiable(_)) => {}
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}

/// A release made under loose bounds fails the partition verifier under
/// stricter ones: the verifier recounts the population itself.
#[test]
fn the_verifier_refuses_a_release_outside_stricter_bounds() {
    let n = 400;
    let a: Vec<String> = (0..n).map(|i| format!("a{}", (i * 7) % 8)).collect();
    let b: Vec<String> = (0..n).map(|i| format!("b{}", (i * 3) % 4)).collect();
    let flags: Vec<Option<bool>> = (0..n).map(|i| Some((i * 13) % 10 < 6)).collect();
    let spec = spec("incognito", 2, 0.0, "subset = \"in\"\nd_max = 0.9");
    let hs = hierarchies();
    let table = common::encode(&spec, &hs, &[batch(&a, &b, &flags)]);
    let done = kanon_engine::pipeline::anonymize(&spec, &table).unwrap();
    let check = done
        .verified
        .models
        .iter()
        .find(|m| m.model.starts_with("delta-presence"))
        .expect("the verifier reports delta-presence");
    assert!(check
        .achieved
        .as_deref()
        .unwrap()
        .starts_with("delta from 0.6"));
    let stricter = Privacy::from_spec(&spec)
        .unwrap()
        .with_presence(DeltaPresence {
            subset: "in".into(),
            d_min: 0.0,
            d_max: 0.5,
        });
    let err =
        kanon_engine::verify::verify_partition(&table, &done.partition, &stricter).unwrap_err();
    assert!(
        matches!(&err, Error::VerificationFailed(m) if m.contains("violate delta-presence")),
        "{err}"
    );
}

#[test]
fn jobs_that_cannot_hold_delta_presence_are_refused_naming_the_setting() {
    let ok = "subset = \"in\"\nd_max = 0.5";
    let cases: Vec<(JobSpec, &str, &str)> = vec![
        (
            spec("mondrian", 2, 0.0, ok),
            "algorithm.name",
            "datafly, incognito",
        ),
        (
            spec(
                "incognito",
                2,
                0.0,
                "subset = \"in\"\nd_min = 0.6\nd_max = 0.5",
            ),
            "privacy.models.delta-presence.d_min",
            "above d_max",
        ),
        (
            spec("incognito", 2, 0.0, "subset = \"in\"\nd_max = 1.0"),
            "privacy.models.delta-presence.d_max",
            "bound nothing",
        ),
        (
            spec("incognito", 2, 0.0, "subset = \"s\"\nd_max = 0.5"),
            "privacy.models.delta-presence.subset",
            "role = \"identifying\"",
        ),
        (
            {
                let mut s = spec("datafly", 2, 0.1, ok);
                s.algorithm
                    .params
                    .insert("cell_suppression".into(), serde_json::json!(true));
                s
            },
            "algorithm.cell_suppression",
            "drop `cell_suppression`",
        ),
    ];
    for (spec, setting, hint) in cases {
        let err = Privacy::from_spec(&spec).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(setting) && msg.contains(hint),
            "{setting}: {msg}"
        );
    }
}

#[test]
fn a_population_must_say_who_is_in_the_subset() {
    let spec = spec("incognito", 2, 0.0, "subset = \"in\"\nd_max = 0.5");
    let hs = hierarchies();
    let a: Vec<String> = (0..6).map(|i| format!("a{i}")).collect();
    let b: Vec<String> = (0..6).map(|i| format!("b{}", i % 4)).collect();
    let mut flags = vec![Some(true); 6];
    flags[2] = None;
    let input = batch(&a, &b, &flags);
    let mut enc =
        kanon_engine::encode::Encoder::try_new(&spec, &hs, input.schema().as_ref()).unwrap();
    let err = enc.push(&input).unwrap_err().to_string();
    assert!(err.contains("`in`") && err.contains("1 nulls"), "{err}");
    // A subset column of another type is refused before any row is read.
    let schema = Schema::new(vec![
        Field::new("in", DataType::Utf8, false),
        Field::new("a", DataType::Utf8, false),
        Field::new("b", DataType::Utf8, false),
        Field::new("s", DataType::Utf8, false),
    ]);
    let err = kanon_engine::encode::Encoder::try_new(&spec, &hs, &schema)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not boolean"), "{err}");
}
