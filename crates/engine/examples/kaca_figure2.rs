//! The KACA paper's experiment (section 6, Figure 2) on the bundled Adult data:
//! distortion ratio and time versus the number of QIs (the first 1..8 in
//! the paper's order), for k = 2 and 10, with uniform and height weights
//! (beta = 1), KACA against the least-distortion full-domain generalisation.
//!
//! ```text
//! cargo run --release -p kanon-engine --example kaca_figure2 [runs]
//! ```
//! Prints one Markdown table per weight scheme. KACA runs with the paper's
//! settings (random order, seed 1, no suppression) and with the tuned ones
//! (least-distortion-first, refinement); times are the best of `runs`
//! (default 3) algorithm times. The full-domain side is the engine's
//! Incognito (`loss = "distortion"`, uniform weights; no suppression, as in
//! the paper). Incognito has no height-weighted loss, so the
//! height-weighted optimum is found here by testing every node of the
//! full-domain lattice in order of cost: without suppression every row of a
//! full-domain release climbs the same levels, so a node's distortion ratio
//! is `(1/m) * sum_q WHD_q(level_q)`, whatever the data. The same
//! enumeration under uniform weights must agree with Incognito (checked).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use kanon_engine::algorithms::kaca::hierarchical_distance::LevelWeights;
use kanon_engine::encode::{EquivalenceClasses, QiTable};
use kanon_engine::hierarchy::Level;
use kanon_engine::spec::JobSpec;
use rustc_hash::FxHashMap;

/// The paper's QI order (Table 2; salary class is not a QI here).
const QIS: [&str; 8] = [
    "age",
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "race",
    "sex",
    "native-country",
];

struct Run {
    ratio: f64,
    ratio_height: f64,
    time: Duration,
}

fn run(spec: &JobSpec, table: &QiTable, runs: usize) -> Run {
    let mut best: Option<Run> = None;
    for _ in 0..runs {
        let out = kanon_engine::anonymize(spec, table).unwrap_or_else(|e| panic!("{e}"));
        let r = Run {
            ratio: out.report.distortion_ratio,
            ratio_height: out.report.distortion_ratio_height,
            time: out.timings.algorithm,
        };
        if best.as_ref().is_none_or(|b| r.time < b.time) {
            best = Some(r);
        }
    }
    best.expect("at least one run")
}

/// The least distortion ratio of a k-anonymous full-domain generalisation
/// under `weights`, by testing the lattice's nodes in order of cost.
fn full_domain_optimum(table: &QiTable, k: usize, weights: LevelWeights) -> (f64, Vec<u8>) {
    let cols = table.columns();
    let m = cols.len();
    let heights: Vec<u8> = cols
        .iter()
        .map(|c| c.hierarchy().expect("Adult QIs have hierarchies").height())
        .collect();
    let mut nodes: Vec<(f64, Vec<u8>)> = vec![(0.0, Vec::new())];
    for &h in &heights {
        nodes = nodes
            .into_iter()
            .flat_map(|(cost, levels)| {
                (0..=h).map(move |l| {
                    let mut v = levels.clone();
                    v.push(l);
                    (cost + weights.share(h, l), v)
                })
            })
            .collect();
    }
    nodes.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let classes = EquivalenceClasses::of(table);
    let tables: Vec<Vec<&[u32]>> = cols
        .iter()
        .zip(&heights)
        .map(|(c, &h)| {
            let hier = c.hierarchy().expect("hierarchies");
            (0..=h).map(|l| hier.level_table(Level(l))).collect()
        })
        .collect();
    for (cost, levels) in nodes {
        let mut counts: FxHashMap<Vec<u32>, usize> = FxHashMap::default();
        for c in 0..classes.len() {
            let key: Vec<u32> = classes
                .tuple(c)
                .iter()
                .enumerate()
                .map(|(q, &code)| tables[q][levels[q] as usize][code as usize])
                .collect();
            *counts.entry(key).or_default() += classes.size(c);
        }
        if counts.values().all(|&n| n >= k) {
            return (cost / m as f64, levels);
        }
    }
    unreachable!("the root is k-anonymous when the table has k rows")
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(3, |a| a.parse().expect("runs is a number"));
    let batches = common::adult_batches();
    let paper = serde_json::json!({});
    let tuned = serde_json::json!({"strategy": "least-distortion-first", "refine": true});
    for (name, weights, params_w) in [
        ("uniform", LevelWeights::Uniform, serde_json::json!({})),
        (
            "height (beta = 1)",
            LevelWeights::Height { beta: 1.0 },
            serde_json::json!({"weights": "height", "beta": 1.0}),
        ),
    ] {
        println!("\n### Weights: {name}\n");
        println!("| k | QIs | KACA (paper) ratio | KACA (tuned) ratio | full-domain ratio | full-domain / KACA (paper) | KACA (paper) s | KACA (tuned) s | Incognito s |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        // (k, full-domain ratio, KACA paper ratio, KACA tuned ratio) per point.
        let mut points: Vec<(usize, f64, f64, f64)> = Vec::new();
        for k in [2usize, 10] {
            for n in 1..=QIS.len() {
                let (mut spec, h) = common::adult_job(&QIS[..n]);
                spec.privacy.k = k;
                let table = common::encode(&spec, &h, &batches);
                let kaca = |extra: &serde_json::Value| {
                    let mut s = spec.clone();
                    s.algorithm.name = "kaca".into();
                    s.algorithm.seed = 1;
                    s.algorithm.params.clear();
                    for p in [&params_w, extra] {
                        if let serde_json::Value::Object(p) = p {
                            s.algorithm.params.extend(p.clone());
                        }
                    }
                    run(&s, &table, runs)
                };
                let pick = |r: &Run| match weights {
                    LevelWeights::Uniform => r.ratio,
                    _ => r.ratio_height,
                };
                let kp = kaca(&paper);
                let kt = kaca(&tuned);
                let mut inc = spec.clone();
                inc.algorithm.name = "incognito".into();
                inc.algorithm.params.clear();
                inc.algorithm
                    .params
                    .insert("loss".into(), serde_json::json!("distortion"));
                let ir = run(&inc, &table, runs);
                let (optimum, _) = full_domain_optimum(&table, k, weights);
                if weights == LevelWeights::Uniform {
                    assert!(
                        (optimum - ir.ratio).abs() < 1e-9,
                        "lattice enumeration {optimum} disagrees with Incognito {}",
                        ir.ratio
                    );
                } else {
                    assert!(optimum <= ir.ratio_height + 1e-9);
                }
                points.push((k, optimum, pick(&kp), pick(&kt)));
                println!(
                    "| {k} | {n} | {:.4} | {:.4} | {:.4} | {:.2} | {:.3} | {:.3} | {:.3} |",
                    pick(&kp),
                    pick(&kt),
                    optimum,
                    if pick(&kp) > 0.0 {
                        optimum / pick(&kp)
                    } else {
                        f64::NAN
                    },
                    kp.time.as_secs_f64(),
                    kt.time.as_secs_f64(),
                    ir.time.as_secs_f64(),
                );
            }
        }
        summarise(&points);
    }
}

/// How many times lower KACA's distortion ratio is than the full-domain
/// one "on average" (the KACA paper reports 5.57), read three ways, over the
/// points where KACA distorts at all: the mean of the per-point quotients,
/// their geometric mean, and the quotient of the mean ratios.
fn summarise(points: &[(usize, f64, f64, f64)]) {
    println!("\n| points | KACA | mean of quotients | geometric mean | quotient of means |");
    println!("|---|---|---:|---:|---:|");
    for (label, filter) in [("k = 2", Some(2)), ("k = 10", Some(10)), ("both", None)] {
        for (name, pick) in [
            ("paper", (|p: &(usize, f64, f64, f64)| p.2) as fn(&_) -> f64),
            ("tuned", |p| p.3),
        ] {
            let sel: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| filter.is_none_or(|k| p.0 == k) && pick(p) > 0.0)
                .map(|p| (p.1, pick(p)))
                .collect();
            let n = sel.len() as f64;
            let mean = sel.iter().map(|(f, k)| f / k).sum::<f64>() / n;
            let geo = (sel.iter().map(|(f, k)| (f / k).ln()).sum::<f64>() / n).exp();
            let of_means =
                sel.iter().map(|p| p.0).sum::<f64>() / sel.iter().map(|p| p.1).sum::<f64>();
            println!(
                "| {label} ({} points) | {name} | {mean:.2} | {geo:.2} | {of_means:.2} |",
                sel.len()
            );
        }
    }
}
