//! Regenerates the l-diversity tables of `docs/results/ldiv.md`: Adult with
//! occupation sensitive (`configs/adult-occupation.toml`), information loss
//! against l and against the number of QIs, L-clustering (the L-clustering paper) against
//! l-diverse Mondrian and l-diverse Incognito (full domain), all verified by
//! the pipeline.
//!
//! ```text
//! cargo run --release -p kanon-engine --example ldiv_results [-- seeds=3]
//! ```
//! Prints Markdown. L-clustering is randomised: its figures are the mean
//! over `seeds` seeds (1..=seeds), with the spread of its loss shown apart.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use kanon_engine::spec::{JobSpec, Role};

/// The paper's QI order (the L-clustering paper, section 5): Age, Gender, Race, Marital
/// Status, Education, Native Country, Work Class, Salary Class.
const QIS: [&str; 8] = [
    "age",
    "sex",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "salary-class",
];

/// An algorithm column: name in the tables, algorithm, parameters.
struct Variant {
    label: &'static str,
    algorithm: &'static str,
    params: &'static [(&'static str, &'static str)],
    randomised: bool,
    /// `privacy.suppression_limit`.
    suppression: f64,
}

const VARIANTS: [Variant; 6] = [
    Variant {
        label: "L-clustering",
        algorithm: "l-clustering",
        params: &[],
        randomised: true,
        suppression: 0.0,
    },
    Variant {
        label: "L-clustering (class DS)",
        algorithm: "l-clustering",
        params: &[("distance", "class")],
        randomised: true,
        suppression: 0.0,
    },
    Variant {
        label: "L-clustering (hierarchies)",
        algorithm: "l-clustering",
        params: &[("generalisation", "hierarchy")],
        randomised: true,
        suppression: 0.0,
    },
    Variant {
        label: "l-Mondrian",
        algorithm: "mondrian",
        params: &[],
        randomised: false,
        suppression: 0.0,
    },
    Variant {
        label: "l-Incognito",
        algorithm: "incognito",
        params: &[("loss", "ncp")],
        randomised: false,
        suppression: 0.0,
    },
    Variant {
        label: "l-Incognito, 2 % suppressed",
        algorithm: "incognito",
        params: &[("loss", "ncp")],
        randomised: false,
        suppression: 0.02,
    },
];

#[derive(Default, Clone, Copy)]
struct Figures {
    ncp: f64,
    granularity: f64,
    /// `L(D, D*) / |D|`: the L-clustering paper's uncertainty loss per row.
    loss: f64,
    seconds: f64,
    classes: f64,
    min_loss: f64,
    max_loss: f64,
}

fn job(base: &JobSpec, qis: usize, l: usize, v: &Variant, seed: u64) -> JobSpec {
    let mut spec = base.clone();
    spec.privacy.l = Some(l);
    spec.privacy.suppression_limit = Some(v.suppression);
    spec.algorithm.name = v.algorithm.into();
    spec.algorithm.seed = seed;
    spec.algorithm.params.clear();
    for (k, val) in v.params {
        spec.algorithm
            .params
            .insert((*k).into(), serde_json::Value::String((*val).into()));
    }
    for a in &mut spec.attributes {
        if let Some(i) = QIS.iter().position(|q| *q == a.name) {
            a.role = if i < qis {
                Role::QuasiIdentifier
            } else {
                Role::Insensitive
            };
        }
    }
    spec
}

fn run(
    base: &JobSpec,
    batches: &[arrow::array::RecordBatch],
    qis: usize,
    l: usize,
    v: &Variant,
    seeds: u64,
) -> Figures {
    let seeds = if v.randomised { seeds } else { 1 };
    let mut f = Figures {
        min_loss: f64::INFINITY,
        max_loss: 0.0,
        ..Default::default()
    };
    for seed in 1..=seeds {
        let spec = job(base, qis, l, v, seed);
        let hierarchies = common::load_hierarchies(&spec);
        let table = common::encode(&spec, &hierarchies, batches);
        let t = Instant::now();
        let result = kanon_engine::anonymize(&spec, &table)
            .unwrap_or_else(|e| panic!("{} qis={qis} l={l}: {e}", v.label));
        let seconds = t.elapsed().as_secs_f64();
        assert!(result.report.sensitive[0].distinct_l >= l);
        let r = &result.report;
        let loss = r.uncertainty_loss / r.rows_in as f64;
        f.ncp += r.ncp;
        f.granularity += r.granularity;
        f.loss += loss;
        f.seconds += seconds;
        f.classes += r.classes as f64;
        f.min_loss = f.min_loss.min(loss);
        f.max_loss = f.max_loss.max(loss);
    }
    let n = seeds as f64;
    Figures {
        ncp: f.ncp / n,
        granularity: f.granularity / n,
        loss: f.loss / n,
        seconds: f.seconds / n,
        classes: f.classes / n,
        ..f
    }
}

fn table(title: &str, key: &str, rows: &[(String, Vec<Figures>)]) {
    println!("\n#### {title}\n");
    let header: Vec<&str> = VARIANTS.iter().map(|v| v.label).collect();
    println!("| {key} | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(header.len()));
    for (label, figures) in rows {
        let cells: Vec<String> = figures
            .iter()
            .map(|f| format!("{:.4} / {:.4} / {:.3}", f.ncp, f.granularity, f.loss))
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
    }
    println!(
        "\nEach cell: NCP / granularity / L(D,D*)/n, the L-clustering paper's uncertainty loss per row \
         (at most the number of QIs). Suppressed rows count fully in all three."
    );
    println!("\n| {key} | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(header.len()));
    for (label, figures) in rows {
        let cells: Vec<String> = figures
            .iter()
            .map(|f| format!("{:.2} s, {:.0} classes", f.seconds, f.classes))
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
    }
}

fn main() {
    let mut seeds = 3u64;
    for arg in std::env::args().skip(1) {
        match arg.split_once('=') {
            Some(("seeds", v)) => seeds = v.parse().expect("seeds is a number"),
            _ => panic!("usage: ldiv_results [seeds=N]"),
        }
    }
    let text = std::fs::read_to_string(common::repo_root().join("configs/adult-occupation.toml"))
        .expect("configs/adult-occupation.toml");
    let base: JobSpec = toml::from_str(&text).expect("valid job");
    let batches = common::adult_batches();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    println!(
        "Adult, {rows} rows, occupation sensitive, k = 1, distinct l-diversity, no suppression unless said; \
         L-clustering figures are means over seeds 1..={seeds}. Times are wall \
         clock of one run on the shared 2-core machine (noisy)."
    );

    let mut by_l = Vec::new();
    for l in [2, 4, 6, 8, 10] {
        let figures = VARIANTS
            .iter()
            .map(|v| run(&base, &batches, 8, l, v, seeds))
            .collect();
        eprintln!("l = {l} done");
        by_l.push((l.to_string(), figures));
    }
    table("Information loss against l (8 QIs)", "l", &by_l);

    let mut by_qi = Vec::new();
    for d in 2..=8 {
        let figures = VARIANTS
            .iter()
            .map(|v| run(&base, &batches, d, 4, v, seeds))
            .collect();
        eprintln!("|QI| = {d} done");
        by_qi.push((format!("{d} (+{})", QIS[d - 1]), figures));
    }
    table(
        "Information loss against the number of QIs (l = 4; the first d of the paper's order)",
        "QIs",
        &by_qi,
    );

    println!("\n#### Effect of L-clustering's random start (8 QIs, l = 4, seeds 1..={seeds})\n");
    println!("| variant | L(D,D*)/n mean | min | max |");
    println!("|---|---|---|---|");
    for (i, v) in VARIANTS.iter().enumerate().filter(|(_, v)| v.randomised) {
        let f = by_l[1].1[i];
        println!(
            "| {} | {:.4} | {:.4} | {:.4} |",
            v.label, f.loss, f.min_loss, f.max_loss
        );
    }
}
