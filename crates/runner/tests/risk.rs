//! `kanon inspect`'s risk measures on the bundled Adult data: journalist and
//! marketer risk against a population table, checked against a count of
//! the population made here from the raw values; every requirement of the
//! job judged on its projection; and no record value in the output.

use std::collections::HashMap;

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;

mod common;
use common::*;

const QIS: [&str; 3] = ["age", "sex", "education"];

/// The tuple of `qis` of every row, as text.
fn tuples(batch: &arrow::array::RecordBatch, qis: &[&str]) -> Vec<String> {
    let cols: Vec<_> = qis
        .iter()
        .map(|q| cast(batch.column_by_name(q).unwrap(), &DataType::Utf8).unwrap())
        .collect();
    (0..batch.num_rows())
        .map(|r| {
            cols.iter()
                .map(|c| c.as_string::<i32>().value(r).to_string())
                .collect::<Vec<_>>()
                .join("\u{1f}")
        })
        .collect()
}

#[test]
fn journalist_and_marketer_risk_use_the_population_classes() {
    let dir = tempfile::tempdir().unwrap();
    let population = adult();
    let sample = population.slice(0, 3000);
    let sample_path = dir.path().join("sample.parquet");
    write_parquet(&sample_path, std::slice::from_ref(&sample));

    let out = run(kanon()
        .args([
            "inspect",
            "--json",
            "--qi",
            &QIS.join(","),
            "--msu-size",
            "2",
        ])
        .arg(&sample_path)
        .args(["--population", "data/adult/adult.parquet"]));
    assert!(out.status.success(), "{}", show(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let profile = &json["risk"]["profile"];

    // Independent count: F_j and f_j by joined raw values.
    let mut big_f: HashMap<String, f64> = HashMap::new();
    for t in tuples(&population, &QIS) {
        *big_f.entry(t).or_default() += 1.0;
    }
    let mut small_f: HashMap<String, f64> = HashMap::new();
    let sample_tuples = tuples(&sample, &QIS);
    for t in &sample_tuples {
        *small_f.entry(t.clone()).or_default() += 1.0;
    }
    let n = sample_tuples.len() as f64;
    let journalist_avg = sample_tuples.iter().map(|t| 1.0 / big_f[t]).sum::<f64>() / n;
    let journalist_max = sample_tuples
        .iter()
        .map(|t| 1.0 / big_f[t])
        .fold(0.0, f64::max);
    let marketer = small_f.iter().map(|(t, f)| f / big_f[t]).sum::<f64>() / n;
    let above = sample_tuples
        .iter()
        .filter(|t| 1.0 / big_f[*t] > 0.2)
        .count();

    let j = &profile["journalist"];
    assert!((j["average"].as_f64().unwrap() - journalist_avg).abs() < 1e-12);
    assert!((j["highest"].as_f64().unwrap() - journalist_max).abs() < 1e-12);
    assert_eq!(j["records_above_threshold"], above);
    assert!((profile["marketer"].as_f64().unwrap() - marketer).abs() < 1e-12);
    // The population is about ten times the sample: the journalist's risk is
    // the lower one.
    assert!(j["average"].as_f64().unwrap() < profile["prosecutor"]["average"].as_f64().unwrap());
    // N defaults to the population's records.
    assert_eq!(
        profile["population_uniqueness"]["population_size"],
        population.num_rows()
    );
    assert_eq!(profile["msus"]["max_size"], 2);

    // Names and counts only: no raw education value appears.
    let text = stdout(&out);
    let education = sample
        .column_by_name("education")
        .unwrap()
        .as_string::<i32>();
    for r in 0..education.len() {
        assert!(
            !text.contains(&format!("\"{}\"", education.value(r))),
            "a raw value reached the output"
        );
    }
}

#[test]
fn inspect_judges_every_requirement_of_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |s| {
        s.replace(
            "[privacy]\nk = 10",
            "[privacy]\nk = 10\nrequirements = [{ shield = [\"sex\", \"race\"], k = 500 }]",
        )
    });
    let out = run(kanon()
        .args(["inspect", "--json", "--msu-size", "0", "-c"])
        .arg(&job)
        .arg("data/adult/adult.parquet"));
    assert!(out.status.success(), "{}", show(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let reqs = json["risk"]["requirements"].as_array().unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1]["requirement"], "<{sex, race}, 500>");

    // Independent count of (sex, race) pairs below 500.
    let adult = adult();
    let col = |n: &str| {
        cast(adult.column_by_name(n).unwrap(), &DataType::Utf8)
            .unwrap()
            .as_string::<i32>()
            .clone()
    };
    let (sex, race) = (col("sex"), col("race"));
    let mut pairs: HashMap<(String, String), usize> = HashMap::new();
    for r in 0..adult.num_rows() {
        *pairs
            .entry((sex.value(r).to_string(), race.value(r).to_string()))
            .or_default() += 1;
    }
    let below: Vec<usize> = pairs.values().copied().filter(|&c| c < 500).collect();
    assert_eq!(reqs[1]["tuples"], pairs.len());
    assert_eq!(reqs[1]["tuples_below_k"], below.len());
    assert_eq!(reqs[1]["records_below_k"], below.iter().sum::<usize>());
    assert_eq!(
        reqs[1]["achieved_k"],
        pairs.values().copied().min().unwrap()
    );
    assert!(
        json["risk"]["profile"]["msus"].is_null(),
        "--msu-size 0 skips the search"
    );
}

#[test]
fn the_metrics_json_and_the_report_hold_the_risk_before_and_after() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |s| s + "\n[risk]\npopulation_size = 301620\n");
    let metrics = dir.path().join("metrics.json");
    let report = dir.path().join("report.html");
    let out = run(kanon()
        .args(["anonymize", "-q", "-c"])
        .arg(&job)
        .args(["-i", "data/adult/adult.parquet", "-o"])
        .arg(dir.path().join("release.parquet"))
        .arg("--metrics-json")
        .arg(&metrics)
        .arg("--report")
        .arg(&report));
    assert!(out.status.success(), "{}", show(&out));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&metrics).unwrap()).unwrap();
    let (before, after) = (&json["risk"]["before"], &json["risk"]["after"]);

    // Before: the raw classes of Adult's eight QIs, counted here.
    let adult = adult();
    let mut classes: HashMap<String, usize> = HashMap::new();
    for t in tuples(&adult, &ADULT_QIS) {
        *classes.entry(t).or_default() += 1;
    }
    let uniques = classes.values().filter(|&&n| n == 1).count();
    assert_eq!(before["classes"], classes.len());
    assert_eq!(before["sample_uniques"]["records"], uniques);
    assert!(
        before["population_uniqueness"]["dankar"]["share"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(before["msus"]["msus"].as_u64().unwrap() > 0);

    // After: a k = 10 release has no record above risk 1/10 and no unique.
    assert_eq!(after["records"], adult.num_rows());
    assert!(after["prosecutor"]["highest"].as_f64().unwrap() <= 0.1);
    assert_eq!(after["sample_uniques"]["records"], 0);
    assert_eq!(after["population_uniqueness"]["dankar"]["share"], 0.0);

    let page = std::fs::read_to_string(&report).unwrap();
    for row in [
        "population uniques, Dankar et al.",
        "minimal sample uniques (input",
        "riskiest QI combination (input)",
    ] {
        assert!(page.contains(row), "the report shows {row}");
    }
}

#[test]
fn the_job_population_gives_the_inputs_journalist_risk_in_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let population = adult();
    let sample = population.slice(0, 3000);
    let sample_path = dir.path().join("sample.parquet");
    write_parquet(&sample_path, std::slice::from_ref(&sample));
    let adult_path = root().join("data/adult/adult.parquet");
    let job = adult_job(dir.path(), |s| {
        format!(
            "{s}\n[risk]\npopulation = \"{}\"\nmsu_max_size = 0\n",
            adult_path.canonicalize().unwrap().display()
        )
    });
    let metrics = dir.path().join("metrics.json");
    let out = run(
        anonymize_cmd(&job, &sample_path, &dir.path().join("release.parquet"))
            .args(["--k", "2", "--weaken-privacy", "--metrics-json"])
            .arg(&metrics),
    );
    assert!(out.status.success(), "{}", show(&out));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&metrics).unwrap()).unwrap();
    let journalist = &json["risk"]["before"]["journalist"];

    // Independent count of F_j on all eight QIs.
    let mut big_f: HashMap<String, f64> = HashMap::new();
    for t in tuples(&population, &ADULT_QIS) {
        *big_f.entry(t).or_default() += 1.0;
    }
    let sample_keys = tuples(&sample, &ADULT_QIS);
    let average = sample_keys.iter().map(|t| 1.0 / big_f[t]).sum::<f64>() / 3000.0;
    assert!(
        (journalist["average"].as_f64().unwrap() - average).abs() < 1e-12,
        "{journalist} vs {average}"
    );
    assert!(json["risk"]["after"]["journalist"].is_null());
}
