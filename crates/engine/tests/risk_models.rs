//! The risk-based models named under `[privacy.models]` (issue 36):
//! `average-risk`, `sample-uniqueness`, `population-uniqueness` and
//! estimated `k-map`, as ARX 3.9.2 offers them. Job validation, and
//! releases of Adult at k = 1 (the model alone protects) by every algorithm
//! that honours models beyond k, made through the release path (both
//! verifiers) and checked here from the released labels alone: class sizes
//! computed from the published QI values, the mean risk, the records at
//! risk, the uniques, and k-map's derived k from an independent Poisson
//! quantile.

mod common;

use kanon_engine::metrics::risk::population_uniqueness;
use kanon_engine::privacy::Privacy;
use kanon_engine::spec::JobSpec;
use kanon_engine::Error;

/// The Adult job (8 QIs) at k = `k` with `models` as its
/// `[privacy.models]` (and `[risk]` when given) and `algorithm`.
fn adult_with(k: usize, models: &str, algorithm: &str) -> JobSpec {
    let (mut spec, _) = common::adult_job(&[]);
    let extra: JobSpec = toml::from_str(&format!("[privacy]\nk = {k}\n{models}\n")).unwrap();
    spec.privacy.k = k;
    spec.privacy.models = extra.privacy.models;
    spec.risk = extra.risk;
    spec.algorithm.name = algorithm.into();
    spec
}

/// The smallest x with P(X <= x) >= 1 - alpha, X ~ Poisson(lambda), by
/// summing the probabilities with f64 factorials.
fn poisson_quantile(lambda: f64, alpha: f64) -> usize {
    let (mut cdf, mut fact) = (0.0, 1.0);
    for x in 0..170usize {
        if x > 0 {
            fact *= x as f64;
        }
        cdf += (-lambda).exp() * lambda.powi(x as i32) / fact;
        if cdf >= 1.0 - alpha {
            return x;
        }
    }
    170
}

#[test]
fn job_settings_are_validated_naming_the_setting() {
    for (models, setting, says) in [
        (
            "[privacy.models.average-risk]\naverage = 0",
            "privacy.models.average-risk.average",
            "not in (0, 1]",
        ),
        (
            "[privacy.models.average-risk]\naverage = 0.1\nrecords_at_risk = 0.1",
            "privacy.models.average-risk.records_at_risk",
            "give `highest` too",
        ),
        (
            "[privacy.models.average-risk]\naverage = 0.1\nhighest = 1.5",
            "privacy.models.average-risk.highest",
            "not in (0, 1]",
        ),
        (
            "[privacy.models.population-uniqueness]\nthreshold = 0.01",
            "privacy.models.population-uniqueness.population_size",
            "give the size of the population",
        ),
        (
            "[privacy.models.population-uniqueness]\nthreshold = 0.01\npopulation_size = 1000000\nmodel = \"sample\"",
            "privacy.models.population-uniqueness.model",
            "sample-uniqueness",
        ),
        (
            "[privacy.models.population-uniqueness]\nthreshold = 0.01\npopulation_size = 1000000\nmodel = \"guess\"",
            "privacy.models.population-uniqueness",
            "unknown variant",
        ),
        (
            "[privacy.models.sample-uniqueness]\nthreshold = 2",
            "privacy.models.sample-uniqueness.threshold",
            "not in (0, 1]",
        ),
        (
            "[privacy.models.k-map]\nk = 1\npopulation_size = 1000000",
            "privacy.models.k-map.k",
            "protects nobody",
        ),
        (
            "[privacy.models.k-map]\nk = 5\npopulation_size = 1000000\nsignificance = 1",
            "privacy.models.k-map.significance",
            "not in [0, 1)",
        ),
        (
            "[privacy.models.k-map]\nk = 5",
            "privacy.models.k-map.population_size",
            "`[risk] population_size`",
        ),
    ] {
        let err = Privacy::from_spec(&adult_with(2, models, "mondrian")).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Spec { .. }), "{models}: {msg}");
        assert!(msg.contains(setting) && msg.contains(says), "{models}: {msg}");
    }
    // k = 1 stands only beside a model that bounds the risk on its own.
    let err = Privacy::from_spec(&adult_with(1, "", "mondrian")).unwrap_err();
    assert!(err.to_string().contains("average-risk"), "{err}");
    let err = Privacy::from_spec(&adult_with(
        1,
        "[privacy.models.average-risk]\naverage = 1",
        "mondrian",
    ))
    .unwrap_err();
    assert!(err.to_string().contains("protects nobody"), "{err}");
    // The population size of `[risk]` is the default.
    let p = Privacy::from_spec(&adult_with(
        1,
        "[privacy.models.k-map]\nk = 10\n[risk]\npopulation_size = 301620",
        "mondrian",
    ))
    .unwrap();
    assert!(
        p.describe().contains("population 301620"),
        "{}",
        p.describe()
    );
}

/// The class sizes of a release, from its labels.
fn class_sizes(spec: &JobSpec, release: &arrow::array::RecordBatch) -> Vec<usize> {
    common::released_classes(spec, release, "salary-class")
        .iter()
        .map(Vec::len)
        .collect()
}

#[test]
fn every_algorithm_with_the_capability_releases_adult_that_holds_by_the_labels() {
    let batches = common::first_rows(common::adult_batches(), 3000);
    let input = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    let n = input.num_rows();
    type Holds = Box<dyn Fn(&[usize]) -> Result<(), String>>;
    let cases: Vec<(&str, Holds)> =
        vec![
        (
            "[privacy.models.average-risk]\naverage = 0.1\nhighest = 0.25\nrecords_at_risk = 0.05",
            Box::new(|sizes: &[usize]| {
                let rows: usize = sizes.iter().sum();
                let mean = sizes.len() as f64 / rows as f64;
                let at_risk: usize = sizes.iter().filter(|&&s| s < 4).sum();
                if mean > 0.1 + 1e-12 {
                    return Err(format!("mean risk {mean}"));
                }
                if at_risk as f64 > 0.05 * rows as f64 {
                    return Err(format!("{at_risk} records at risk"));
                }
                Ok(())
            }),
        ),
        (
            "[privacy.models.sample-uniqueness]\nthreshold = 0.01",
            Box::new(|sizes: &[usize]| {
                let rows: usize = sizes.iter().sum();
                let uniques = sizes.iter().filter(|&&s| s == 1).count();
                (uniques as f64 <= 0.01 * rows as f64)
                    .then_some(())
                    .ok_or(format!("{uniques} uniques"))
            }),
        ),
        (
            "[privacy.models.population-uniqueness]\nthreshold = 0.002\npopulation_size = 30000",
            Box::new(|sizes: &[usize]| {
                let mut freq = std::collections::BTreeMap::new();
                for &s in sizes {
                    *freq.entry(s).or_insert(0) += 1;
                }
                let freq: Vec<(usize, usize)> = freq.into_iter().collect();
                let u = population_uniqueness(&freq, 30_000).unwrap();
                let share = u.dankar.share.ok_or("no estimate")?;
                (share <= 0.002).then_some(()).ok_or(format!("share {share}"))
            }),
        ),
        (
            "[privacy.models.k-map]\nk = 10\npopulation_size = 30000\nsignificance = 0.05",
            Box::new(move |sizes: &[usize]| {
                // λ = π k = 3000/30000 * 10 = 1; ARX's k' is the 95 %
                // quantile plus 2, at most k.
                let derived = (poisson_quantile(n as f64 / 30_000.0 * 10.0, 0.05) + 2).min(10);
                let smallest = *sizes.iter().min().unwrap();
                (smallest >= derived)
                    .then_some(())
                    .ok_or(format!("a class of {smallest} < k' = {derived}"))
            }),
        ),
    ];
    for (models, holds) in &cases {
        for algorithm in [
            "mondrian",
            "cover",
            "kaca",
            "l-clustering",
            "sbc",
            "datafly",
            "incognito",
        ] {
            let spec = adult_with(1, models, algorithm);
            let hierarchies = common::load_hierarchies(&spec);
            let (release, suppressed) = common::release(&spec, &hierarchies, &input, 1 << 20)
                .unwrap_or_else(|e| panic!("{algorithm}, {models}: {e}"));
            assert_eq!(release.num_rows() + suppressed, n);
            let sizes = class_sizes(&spec, &release);
            if let Err(why) = holds(&sizes) {
                panic!("{algorithm}, {models}: {why}");
            }
        }
    }
}

/// A loose threshold the raw data already meets is not tightened: the
/// release keeps classes of one record (no class floor was needed), and a
/// strict one raises the class size only as far as the model needs.
#[test]
fn the_class_size_is_raised_only_when_the_release_needs_it() {
    let batches = common::first_rows(common::adult_batches(), 3000);
    let input = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    let loose = adult_with(
        1,
        "[privacy.models.sample-uniqueness]\nthreshold = 1.0",
        "mondrian",
    );
    // threshold 1.0 protects nobody alone: k must be given.
    assert!(Privacy::from_spec(&loose).is_err());
    let loose = adult_with(
        1,
        "[privacy.models.average-risk]\naverage = 0.9",
        "mondrian",
    );
    let hierarchies = common::load_hierarchies(&loose);
    let (release, _) = common::release(&loose, &hierarchies, &input, 1 << 20).unwrap();
    let sizes = class_sizes(&loose, &release);
    assert!(sizes.contains(&1), "no class of one record at average 0.9");
    // A mean of at most 0.1 needs classes of 10 on average; the search
    // stops at the first size that reaches it, never above 1/0.1 = 10.
    let strict = adult_with(
        1,
        "[privacy.models.average-risk]\naverage = 0.1",
        "mondrian",
    );
    let (release, _) = common::release(&strict, &hierarchies, &input, 1 << 20).unwrap();
    let sizes = class_sizes(&strict, &release);
    let smallest = *sizes.iter().min().unwrap();
    assert!((2..=10).contains(&smallest), "smallest class {smallest}");
    assert!(sizes.len() as f64 / 3000.0 <= 0.1);
}

#[test]
fn heuristic_min_is_refused_naming_the_algorithms_that_can() {
    let spec = adult_with(
        2,
        "[privacy.models.average-risk]\naverage = 0.2",
        "heuristic-min",
    );
    let hierarchies = common::load_hierarchies(&spec);
    let batches = common::first_rows(common::adult_batches(), 200);
    let err = common::release(&spec, &hierarchies, &batches[0], 1 << 20).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("heuristic-min") && msg.contains("mondrian"),
        "{msg}"
    );
}
