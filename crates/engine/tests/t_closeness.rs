//! t-closeness (Li, Li and Venkatasubramanian, ICDE 2007) and the risk
//! threshold, named under `[privacy.models]`: job validation, releases of
//! Adult made through the release path (both verifiers) with each ground
//! distance, an independent check of the equal distance on the released
//! labels, the published distribution as the verifiers' reference,
//! refusal of algorithms without the capability, and the mean-risk part of
//! the risk threshold in both verifiers.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::privacy::Privacy;
use kanon_engine::spec::{JobSpec, Role};
use kanon_engine::verify::{verify_release, ReleaseVerifier};
use kanon_engine::Error;
use rustc_hash::FxHashMap;

/// The Adult job (8 QIs, `salary-class` sensitive) with `models` as its
/// `[privacy.models]` and `algorithm`.
fn adult_with(models: &str, algorithm: &str) -> JobSpec {
    let (mut spec, _) = common::adult_job(&[]);
    let extra: JobSpec = toml::from_str(&format!(
        "[privacy]\nk = {}\n{models}\n[[attributes]]\nname = \"x\"\nrole = \"qi\"\n",
        spec.privacy.k
    ))
    .unwrap();
    spec.privacy.models = extra.privacy.models;
    spec.algorithm.name = algorithm.into();
    spec
}

/// The first `rows` Adult rows as one batch.
fn adult_input(rows: usize) -> RecordBatch {
    let batches = common::first_rows(common::adult_batches(), rows);
    arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
}

/// Equal-distance EMD of a class from a reference, both as value lists:
/// `1/2 sum |p - q|`, computed here from the labels alone.
fn equal_emd(class: &[String], reference: &[String]) -> f64 {
    fn share(values: &[String]) -> HashMap<&str, f64> {
        let mut m: HashMap<&str, f64> = HashMap::new();
        for v in values {
            *m.entry(v.as_str()).or_default() += 1.0 / values.len() as f64;
        }
        m
    }
    let (p, q) = (share(class), share(reference));
    let keys: std::collections::HashSet<&str> = p.keys().chain(q.keys()).copied().collect();
    0.5 * keys
        .iter()
        .map(|k| (p.get(k).unwrap_or(&0.0) - q.get(k).unwrap_or(&0.0)).abs())
        .sum::<f64>()
}

#[test]
fn job_settings_are_validated_naming_the_setting() {
    let err = |models: &str| {
        adult_with(models, "mondrian")
            .validate()
            .unwrap_err()
            .to_string()
    };
    for t in ["0", "-0.1", "1.5", "2"] {
        let e = err(&format!("[privacy.models.t-closeness]\nt = {t}"));
        assert!(
            e.contains("`privacy.models.t-closeness.t`") && e.contains("(0, 1]"),
            "{t}: {e}"
        );
    }
    let e = err("[privacy.models.t-closeness]\ncolumn = \"salary-class\"");
    assert!(
        e.contains("privacy.models.t-closeness") && e.contains("`t`"),
        "{e}"
    );
    let e = err("[privacy.models.t-closeness]\nt = 0.2\ndistance = \"manhattan\"");
    assert!(e.contains("manhattan") && e.contains("hierarchical"), "{e}");
    let e = err("[privacy.models.t-closeness]\nt = 0.2\ndistance = \"hierarchical\"");
    assert!(
        e.contains("`privacy.models.t-closeness.distance`") && e.contains("`salary-class`"),
        "{e}"
    );
    let e = err("[privacy.models.t-closeness]\nt = 0.2\ncolumn = \"age\"");
    assert!(
        e.contains("`privacy.models.t-closeness.column`") && e.contains("`age`"),
        "{e}"
    );
    let e = err("[privacy.models.t-closeness]\nt = 0.2\nl = 3");
    assert!(e.contains("unknown field `l`"), "{e}");
    let e = err("[privacy.models.risk-threshold]\nk = 1\nmean = 0.1");
    assert!(e.contains("`privacy.models.risk-threshold.k`"), "{e}");
    let e = err("[privacy.models.risk-threshold]\nk = 5\nmean = 0");
    assert!(e.contains("`privacy.models.risk-threshold.mean`"), "{e}");
    // Valid settings describe themselves.
    let spec = adult_with("[privacy.models.t-closeness]\nt = 0.2", "mondrian");
    let described = Privacy::from_spec(&spec).unwrap().describe();
    assert!(
        described.contains("t-closeness (t = 0.2, distance by column) on `salary-class`"),
        "{described}"
    );
    assert!(kanon_engine::privacy::registry::lookup("t-closeness").is_ok());
    assert!(kanon_engine::privacy::registry::lookup("risk-threshold").is_ok());
}

#[test]
fn algorithms_without_the_capability_are_refused() {
    for model in [
        "[privacy.models.t-closeness]\nt = 0.2",
        "[privacy.models.risk-threshold]\nk = 10\nmean = 0.5",
    ] {
        let spec = adult_with(model, "heuristic-min");
        let err = kanon_engine::algorithms::by_name(&spec)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`privacy.models`")
                && err.contains("does not honour privacy models beyond k")
                && err.contains("mondrian"),
            "{err}"
        );
    }
}

#[test]
fn equal_distance_release_of_adult_passes_both_verifiers() {
    let t = 0.1;
    let spec = adult_with(
        &format!("[privacy.models.t-closeness]\ncolumn = \"salary-class\"\nt = {t}\ndistance = \"equal\""),
        "mondrian",
    );
    let hierarchies = common::load_hierarchies(&spec);
    let input = adult_input(8000);
    let (release, suppressed) = common::release(&spec, &hierarchies, &input, 1 << 20).unwrap();
    assert_eq!(suppressed, 0);
    assert_eq!(release.num_rows(), input.num_rows());
    // Independently of the engine: every class of the released labels is
    // within t of the released distribution.
    let classes = common::released_classes(&spec, &release, "salary-class");
    let all: Vec<String> = classes.iter().flatten().cloned().collect();
    let farthest = classes
        .iter()
        .map(|c| equal_emd(c, &all))
        .fold(0.0, f64::max);
    assert!(farthest <= t + 1e-9, "{farthest}");
    // t-closeness is more than k-anonymity here: plain k = 10 Mondrian has
    // classes far from the overall distribution.
    let plain = adult_with("", "mondrian");
    let (plain_release, _) = common::release(&plain, &hierarchies, &input, 1 << 20).unwrap();
    let plain_classes = common::released_classes(&plain, &plain_release, "salary-class");
    let plain_farthest = plain_classes
        .iter()
        .map(|c| equal_emd(c, &all))
        .fold(0.0, f64::max);
    assert!(plain_farthest > t, "{plain_farthest}");
    // The verifier of labels refuses the plain release under t-closeness,
    // by counts, without values.
    let privacy = Privacy::from_spec(&spec).unwrap();
    let err = verify_release(&spec, std::slice::from_ref(&plain_release), &privacy).unwrap_err();
    assert!(matches!(err, Error::VerificationFailed(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(
            "published classes violate t-closeness (t = 0.1, equal distance) on `salary-class`"
        ),
        "{msg}"
    );
    assert!(!msg.contains(">50K") && !msg.contains("<=50K"), "{msg}");
    verify_release(&spec, std::slice::from_ref(&release), &privacy).unwrap();
}

#[test]
fn local_recoding_algorithms_release_t_close_adult() {
    let spec = adult_with("[privacy.models.t-closeness]\nt = 0.15", "mondrian");
    let hierarchies = common::load_hierarchies(&spec);
    let input = adult_input(3000);
    for algorithm in ["kaca", "l-clustering", "sbc"] {
        let mut spec = spec.clone();
        spec.algorithm.name = algorithm.into();
        let (release, suppressed) = common::release(&spec, &hierarchies, &input, 1 << 20)
            .unwrap_or_else(|e| panic!("{algorithm}: {e}"));
        assert_eq!(release.num_rows() + suppressed, input.num_rows());
        let classes = common::released_classes(&spec, &release, "salary-class");
        let all: Vec<String> = classes.iter().flatten().cloned().collect();
        for c in &classes {
            assert!(equal_emd(c, &all) <= 0.15 + 1e-9, "{algorithm}");
        }
    }
}

/// Adult with `occupation` sensitive, under its hierarchy, and the other
/// eight attributes quasi-identifiers.
fn occupation_job(models: &str) -> JobSpec {
    let text =
        std::fs::read_to_string(common::repo_root().join("configs/adult-occupation.toml")).unwrap();
    let mut spec: JobSpec = toml::from_str(&text).unwrap();
    spec.privacy.l = None;
    spec.privacy.diversity = None;
    spec.privacy.k = 5;
    spec.algorithm.name = "mondrian".into();
    for a in &mut spec.attributes {
        if a.name == "occupation" {
            a.hierarchy = Some("data/adult/hierarchies/occupation.csv".into());
        }
    }
    let extra: JobSpec = toml::from_str(&format!("[privacy]\nk = 5\n{models}\n")).unwrap();
    spec.privacy.models = extra.privacy.models;
    spec
}

#[test]
fn hierarchical_distance_release_of_adult_passes_both_verifiers() {
    let spec = occupation_job("[privacy.models.t-closeness]\nt = 0.2");
    let described = Privacy::from_spec(&spec).unwrap().describe();
    assert!(
        described.contains("t-closeness (t = 0.2, hierarchical distance) on `occupation`"),
        "{described}"
    );
    // The sensitive attribute's hierarchy file is read like the QIs'.
    let hierarchies = common::load_hierarchies(&spec);
    assert!(hierarchies.contains_key("data/adult/hierarchies/occupation.csv"));
    let input = adult_input(3000);
    let (release, suppressed) = common::release(&spec, &hierarchies, &input, 1 << 20).unwrap();
    assert_eq!(release.num_rows() + suppressed, input.num_rows());
    let privacy = Privacy::from_spec(&spec).unwrap();
    // Verified again by its labels, with the hierarchy.
    let mut v =
        ReleaseVerifier::try_with_hierarchies(&spec, &hierarchies, &release.schema()).unwrap();
    v.push(&release).unwrap();
    v.finish(&privacy).unwrap();
    // Without the hierarchy the verifier cannot measure: it refuses (fail
    // closed) and says why.
    let err = verify_release(&spec, std::slice::from_ref(&release), &privacy)
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs the attribute's hierarchy"), "{err}");
    // The hierarchical distance is at most the equal one (no two values
    // are farther than 1), so the same job under the equal distance is a
    // stricter requirement on these classes: a smaller t refuses.
    let strict = occupation_job("[privacy.models.t-closeness]\nt = 0.01");
    let strict_privacy = Privacy::from_spec(&strict).unwrap();
    let mut v =
        ReleaseVerifier::try_with_hierarchies(&strict, &hierarchies, &release.schema()).unwrap();
    v.push(&release).unwrap();
    let err = v.finish(&strict_privacy).unwrap_err().to_string();
    assert!(err.contains("published classes violate"), "{err}");
}

#[test]
fn a_sensitive_value_outside_the_hierarchy_is_an_error_by_count() {
    let spec = occupation_job("[privacy.models.t-closeness]\nt = 0.2");
    let mut hierarchies: FxHashMap<String, Arc<Hierarchy>> = common::load_hierarchies(&spec);
    // A hierarchy that lacks every occupation but two.
    hierarchies.insert(
        "data/adult/hierarchies/occupation.csv".into(),
        Arc::new(Hierarchy::from_csv("occupation.csv", "Sales;*\nTech-support;*\n", ';').unwrap()),
    );
    let input = adult_input(500);
    let mut enc =
        kanon_engine::encode::Encoder::try_new(&spec, &hierarchies, &input.schema()).unwrap();
    enc.push(&input).unwrap();
    let err = enc.finish().unwrap_err().to_string();
    assert!(
        err.starts_with("column `occupation`: ")
            && err.contains(
                "rows hold sensitive values that are not leaves of the hierarchy occupation.csv"
            ),
        "{err}"
    );
    assert!(!err.contains("Exec-managerial"), "{err}");
}

#[test]
fn ordered_distance_release_of_adult_passes_both_verifiers() {
    // Age as a numeric sensitive attribute, the other seven QIs.
    let mut spec = adult_with("[privacy.models.t-closeness]\nt = 0.2", "mondrian");
    spec.attributes.retain(|a| a.name != "salary-class");
    for a in &mut spec.attributes {
        if a.name == "age" {
            a.role = Role::Sensitive;
            a.intervals = None;
            a.windows.clear();
        }
    }
    let described = Privacy::from_spec(&spec).unwrap().describe();
    assert!(described.contains("on `age`"), "{described}");
    let hierarchies = common::load_hierarchies(&spec);
    // The job no longer lists `salary-class`: the input leaves it out, as
    // the column policy requires.
    let input = adult_input(3000);
    let kept: Vec<usize> = (0..input.num_columns())
        .filter(|&i| input.schema().field(i).name() != "salary-class")
        .collect();
    let input = input.project(&kept).unwrap();
    let (release, suppressed) = common::release(&spec, &hierarchies, &input, 1 << 20).unwrap();
    assert_eq!(release.num_rows() + suppressed, input.num_rows());
    let table = common::encode(&spec, &hierarchies, std::slice::from_ref(&input));
    // The column is numeric: the default distance is the ordered one.
    assert!(table.sensitive()[0].numeric_order().is_some());
    let privacy = Privacy::from_spec(&spec).unwrap();
    verify_release(&spec, std::slice::from_ref(&release), &privacy).unwrap();
    // Explicitly ordered: the same; a tiny t refuses the release.
    let strict = adult_with(
        "[privacy.models.t-closeness]\nt = 0.001\ndistance = \"ordered\"",
        "mondrian",
    );
    let mut strict_spec = spec.clone();
    strict_spec.privacy.models = strict.privacy.models;
    let err = verify_release(
        &strict_spec,
        std::slice::from_ref(&release),
        &Privacy::from_spec(&strict_spec).unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("ordered distance) on `age`"), "{err}");
}

#[test]
fn incognito_releases_t_close_adult_with_global_recoding() {
    let spec = adult_with("[privacy.models.t-closeness]\nt = 0.2", "incognito");
    let hierarchies = common::load_hierarchies(&spec);
    let input = adult_input(2000);
    let (release, suppressed) = common::release(&spec, &hierarchies, &input, 1 << 20).unwrap();
    assert_eq!(release.num_rows() + suppressed, input.num_rows());
    let classes = common::released_classes(&spec, &release, "salary-class");
    let all: Vec<String> = classes.iter().flatten().cloned().collect();
    assert!(classes.iter().all(|c| equal_emd(c, &all) <= 0.2 + 1e-9));
}

#[test]
fn risk_threshold_mean_is_checked_by_both_verifiers() {
    let hierarchies = {
        let spec = adult_with("", "mondrian");
        common::load_hierarchies(&spec)
    };
    let input = adult_input(3000);
    // k = 5: Mondrian's classes hold 5 to 9 rows, a mean risk well above
    // 0.05. The algorithm does not aim at the mean; the pipeline runs it
    // again with larger classes (issue 36) until the mean is below 0.05,
    // at most classes of 1/mean + 1 = 21 rows, and says which size it took.
    let strict = adult_with(
        "[privacy.models.risk-threshold]\nk = 5\nmean = 0.05",
        "mondrian",
    );
    let table = common::encode(&strict, &hierarchies, std::slice::from_ref(&input));
    let run = kanon_engine::anonymize(&strict, &table).unwrap();
    let raised = run.details["raised_class_size"]["size"].as_u64().unwrap() as usize;
    assert!((6..=21).contains(&raised), "{raised}");
    assert!(run.report.smallest_class >= raised);
    assert!((run.report.classes as f64 / 3000.0) < 0.05);
    // Raising k above 1/mean = 20 meets it at once: no second run.
    let raised = adult_with(
        "[privacy.models.risk-threshold]\nk = 21\nmean = 0.05",
        "mondrian",
    );
    let run = kanon_engine::anonymize(&raised, &table).unwrap();
    assert!(run.report.smallest_class >= 21);
    assert!(run.details.get("raised_class_size").is_none());
    // A mean no release of these rows reaches is out of reach (exit 3).
    let impossible = adult_with(
        "[privacy.models.risk-threshold]\nk = 5\nmean = 0.0001",
        "mondrian",
    );
    let err = kanon_engine::anonymize(&impossible, &table).unwrap_err();
    assert!(matches!(err, Error::Unsatisfiable(_)), "{err}");
    assert!(err.to_string().contains("raise `mean`"), "{err}");
    // A loose mean passes through the whole release path; the verifier of
    // labels then refuses the same release under the strict mean.
    let loose = adult_with(
        "[privacy.models.risk-threshold]\nk = 5\nmean = 0.5",
        "mondrian",
    );
    let (release, _) = common::release(&loose, &hierarchies, &input, 1 << 20).unwrap();
    let v = verify_release(
        &loose,
        std::slice::from_ref(&release),
        &Privacy::from_spec(&loose).unwrap(),
    )
    .unwrap();
    let mean = v.classes as f64 / v.published_rows as f64;
    assert!(mean < 0.5 && mean > 0.05, "{mean}");
    let err = verify_release(
        &strict,
        std::slice::from_ref(&release),
        &Privacy::from_spec(&strict).unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&format!(
            "{} classes / {} rows",
            v.classes, v.published_rows
        )),
        "{err}"
    );
}

#[test]
fn block_wise_runs_measure_every_block_against_the_whole_table() {
    // KACA block by block: each block's sub-table keeps the whole table's
    // reference, so the union of the blocks' classes is t-close to the
    // whole input, and both verifiers accept the release.
    let mut spec = adult_with("[privacy.models.t-closeness]\nt = 0.15", "kaca");
    spec.algorithm
        .params
        .insert("block_size".into(), serde_json::json!(800));
    let hierarchies = common::load_hierarchies(&spec);
    let input = adult_input(4000);
    let table = common::encode(&spec, &hierarchies, std::slice::from_ref(&input));
    let run = kanon_engine::anonymize(&spec, &table).unwrap();
    let blocks = run.details["partitioned"]["blocks"].as_u64().unwrap();
    assert!(blocks > 1, "{blocks}");
    let (release, suppressed) = common::release(&spec, &hierarchies, &input, 1 << 20).unwrap();
    assert_eq!(release.num_rows() + suppressed, input.num_rows());
    let classes = common::released_classes(&spec, &release, "salary-class");
    let all: Vec<String> = classes.iter().flatten().cloned().collect();
    assert!(classes.iter().all(|c| equal_emd(c, &all) <= 0.15 + 1e-9));
}
