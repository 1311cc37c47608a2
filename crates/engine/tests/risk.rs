//! Re-identification risk measures (`metrics::risk`) checked against
//! independent computations: Zayatz's estimate from exact hypergeometric
//! probabilities, Pitman's from a derivative-free maximisation of the
//! Pitman likelihood, SNB from bisection on its moment equations, reference
//! values of ARX 3.9.2, and MSUs and population matching on the bundled
//! Adult data by plain string counting.
// ARX's reference values are pinned with all 17 digits ARX printed.
#![allow(clippy::excessive_precision)]

mod common;

use std::collections::HashMap;

use arrow::array::{Array, RecordBatch};
use kanon_engine::metrics::risk::{
    class_size_histogram, encode_labels, minimal_sample_uniques, population_class_sizes,
    population_uniqueness, risk_profile, RiskOptions, UniquenessModel,
};

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}

/// `ln k!` for `k = 0..=n`, by summing logarithms.
fn log_factorials(n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n + 1];
    for k in 1..=n {
        out[k] = out[k - 1] + (k as f64).ln();
    }
    out
}

#[test]
fn zayatz_matches_exact_hypergeometric_probabilities() {
    let profiles: [&[(usize, usize)]; 3] = [
        &[(1, 7), (2, 4), (3, 2), (6, 1)],
        &[(1, 20), (2, 9), (4, 5), (10, 2)],
        &[(1, 3), (5, 3), (9, 1)],
    ];
    for profile in profiles {
        let n: usize = profile.iter().map(|&(s, c)| s * c).sum();
        for big_n in [n + 1, 2 * n, 10 * n, 40 * n] {
            let lf = log_factorials(big_n);
            let ln_choose = |a: usize, b: usize| lf[a] - lf[b] - lf[a - b];
            // P(X = 1) for a population class of size s, a sample of n of N:
            // C(s, 1) C(N-s, n-1) / C(N, n).
            let p = |s: usize| -> f64 {
                if big_n - s < n - 1 {
                    return 0.0;
                }
                s as f64 * (ln_choose(big_n - s, n - 1) - ln_choose(big_n, n)).exp()
            };
            let c1 = profile.iter().find(|e| e.0 == 1).map_or(0, |e| e.1) as f64;
            let u: f64 = profile.iter().map(|e| e.1 as f64).sum();
            let denominator: f64 = profile.iter().map(|&(s, c)| c as f64 / u * p(s)).sum();
            let conditional = c1 / u * p(1) / denominator;
            let expected = c1 * conditional / (n as f64 / big_n as f64);
            let got = population_uniqueness(profile, big_n as u64).unwrap();
            let z = got.zayatz.population_uniques.unwrap();
            assert!(
                close(z, expected, 1e-10),
                "{profile:?} N={big_n}: {z} vs {expected}"
            );
            assert!(close(
                got.zayatz.share.unwrap(),
                expected / big_n as f64,
                1e-10
            ));
        }
    }
}

/// Pitman's log-likelihood as written in Hoshino (2001), eq. (2), by
/// explicit sums.
fn pitman_log_likelihood(profile: &[(usize, usize)], theta: f64, alpha: f64) -> f64 {
    let n: usize = profile.iter().map(|&(s, c)| s * c).sum();
    let u: usize = profile.iter().map(|&(_, c)| c).sum();
    let mut l = 0.0;
    for i in 1..u {
        l += (theta + i as f64 * alpha).ln();
    }
    for i in 1..n {
        l -= (theta + i as f64).ln();
    }
    for &(s, c) in profile {
        for k in 1..s {
            l += c as f64 * (k as f64 - alpha).ln();
        }
    }
    l
}

/// Maximum of a unimodal function on `[lo, hi]` by golden-section search.
fn golden_max(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let mut a = hi - g * (hi - lo);
    let mut b = lo + g * (hi - lo);
    let (mut fa, mut fb) = (f(a), f(b));
    for _ in 0..90 {
        if fa < fb {
            lo = a;
            a = b;
            fa = fb;
            b = lo + g * (hi - lo);
            fb = f(b);
        } else {
            hi = b;
            b = a;
            fb = fa;
            a = hi - g * (hi - lo);
            fa = f(a);
        }
    }
    (lo + hi) / 2.0
}

/// `ln Γ(x)` by the recurrence up to 30 and Stirling's series: another
/// route than the engine's Lanczos approximation.
fn ln_gamma_stirling(mut x: f64) -> f64 {
    let mut shift = 0.0;
    while x < 30.0 {
        shift -= x.ln();
        x += 1.0;
    }
    let r = 1.0 / (x * x);
    shift + (x - 0.5) * x.ln() - x
        + 0.5 * (2.0 * std::f64::consts::PI).ln()
        + (1.0 / 12.0 - r * (1.0 / 360.0 - r * (1.0 / 1260.0 - r / 1680.0))) / x
}

/// The `(θ, α)` maximising Pitman's likelihood: the profile likelihood
/// (θ maximised in ln θ for each α), maximised over α.
fn pitman_mle_by_search(profile: &[(usize, usize)]) -> (f64, f64) {
    let best_theta = |alpha: f64| {
        golden_max(
            |t| pitman_log_likelihood(profile, t.exp(), alpha),
            -12.0,
            12.0,
        )
        .exp()
    };
    let alpha = golden_max(
        |a| pitman_log_likelihood(profile, best_theta(a), a),
        1e-6,
        1.0 - 1e-6,
    );
    (best_theta(alpha), alpha)
}

#[test]
fn pitman_is_the_maximum_of_the_pitman_likelihood() {
    // Heavy-tailed profiles (many uniques, a few large classes): the
    // likelihood has its maximum inside 0 < α < 1.
    let profiles: [&[(usize, usize)]; 2] = [
        &[
            (1, 600),
            (2, 150),
            (3, 60),
            (5, 30),
            (10, 15),
            (30, 5),
            (100, 2),
        ],
        &[
            (1, 400),
            (2, 60),
            (3, 30),
            (4, 20),
            (8, 10),
            (20, 6),
            (50, 4),
            (200, 1),
        ],
    ];
    for profile in profiles {
        let (theta, alpha) = pitman_mle_by_search(profile);
        assert!(alpha > 0.5 && alpha < 0.9, "{alpha}");
        for big_n in [20_000u64, 1_000_000] {
            let expected = (ln_gamma_stirling(theta + 1.0) - ln_gamma_stirling(theta + alpha)
                + alpha * (big_n as f64).ln())
            .exp();
            let got = population_uniqueness(profile, big_n).unwrap();
            let p = got.pitman.population_uniques.unwrap();
            assert!(
                close(p, expected, 1e-5),
                "{profile:?} N={big_n}: {p} vs {expected} (θ={theta}, α={alpha})"
            );
            // pi <= 0.1: Dankar's rule takes Pitman.
            assert_eq!(got.dankar_model, Some(UniquenessModel::Pitman));
            assert_eq!(got.dankar.population_uniques, Some(p));
        }
    }
}

#[test]
fn pitman_without_an_inner_maximum_gives_no_estimate() {
    // Light-tailed profiles: the likelihood rises towards α = 0, so there is
    // no maximum with 0 < α < 1. ARX 3.9.2 still reports numbers here, from
    // whatever stationary point its solver reaches: 0.229 uniques for the
    // last profile at N = 1000, and 347.6 (N = 10,000) but 436.6 (N = 2000)
    // for the first, which no single (θ, α) can give.
    let profiles: [&[(usize, usize)]; 3] = [
        &[
            (1, 300),
            (2, 100),
            (3, 50),
            (4, 30),
            (5, 20),
            (6, 10),
            (10, 5),
        ],
        &[(1, 100), (2, 40), (3, 20)],
        &[(1, 10), (2, 5), (3, 3), (5, 2)],
    ];
    for profile in profiles {
        let (_, alpha) = pitman_mle_by_search(profile);
        assert!(alpha < 1e-4, "{profile:?}: the search found α = {alpha}");
        let got = population_uniqueness(profile, 100_000).unwrap();
        assert_eq!(got.pitman.population_uniques, None);
        assert!(got.pitman.note.as_deref().unwrap().contains("no maximum"));
        // Dankar falls back on Zayatz.
        assert_eq!(got.dankar_model, Some(UniquenessModel::Zayatz));
        assert_eq!(got.dankar, got.zayatz);
    }
}

/// Class-size frequencies of the bundled Adult data on `qis`, read as
/// labels.
fn adult_frequencies(qis: &[&str]) -> Vec<(usize, usize)> {
    let (spec, _) = common::adult_job(qis);
    let batches = common::adult_batches();
    let table = encode_labels(&spec, batches[0].schema().as_ref(), &batches).unwrap();
    let classes = kanon_engine::encode::EquivalenceClasses::of(&table);
    let sizes: Vec<usize> = (0..classes.len()).map(|c| classes.size(c)).collect();
    class_size_histogram(&sizes)
        .iter()
        .map(|b| (b.size, b.classes))
        .collect()
}

const ADULT_8: [&str; 8] = [
    "sex",
    "age",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
];
const ADULT_5: [&str; 5] = ["age", "education", "sex", "race", "marital-status"];

#[test]
fn estimates_match_arx_3_9_2_on_adult() {
    // Reference values: ARX 3.9.2 (commit aacd487f of arx-deidentifier/arx,
    // built from source), `new RiskModelPopulationUniqueness(
    // ARXPopulationModel.create(N), new RiskModelHistogram(h),
    // ARXSolverConfiguration.create())` with `h` the class-size histogram
    // below, then getNumUniqueTuples{Zayatz,Pitman,Dankar}() and
    // getPopulationUniquenessModel().
    let h8 = adult_frequencies(&ADULT_8);
    // The 8-QI histogram of Adult: 18,109 classes, 14,021 of them unique.
    assert_eq!(h8.iter().map(|e| e.1).sum::<usize>(), 18_109);
    assert_eq!(h8[..3], [(1, 14_021), (2, 2026), (3, 796)]);
    let h5 = adult_frequencies(&ADULT_5);
    assert_eq!(h5.iter().map(|e| e.1).sum::<usize>(), 6072);
    assert_eq!(h5[..2], [(1, 3187), (2, 908)]);
    // (histogram, N, Zayatz, Pitman, Dankar's model)
    let cases = [
        (
            &h8,
            301_620,
            82637.151663379950,
            72139.034675608430,
            UniquenessModel::Pitman,
        ),
        (
            &h8,
            3_016_200,
            674264.16416766270,
            361577.91902222000,
            UniquenessModel::Pitman,
        ),
        (
            &h8,
            60_324,
            23198.999762168965,
            23381.332284320460,
            UniquenessModel::Zayatz,
        ),
        (
            &h8,
            40_000,
            17163.860932596624,
            17537.291555532283,
            UniquenessModel::Zayatz,
        ),
        (
            &h5,
            301_620,
            9717.5932177840750,
            9489.7533575993950,
            UniquenessModel::Pitman,
        ),
        (
            &h5,
            100_000,
            5463.9982264252890,
            5692.6548587393145,
            UniquenessModel::Zayatz,
        ),
    ];
    for (h, big_n, zayatz, pitman, model) in cases {
        let u = population_uniqueness(h, big_n).unwrap();
        let z = u.zayatz.population_uniques.unwrap();
        let p = u.pitman.population_uniques.unwrap();
        assert!(
            close(z, zayatz, 1e-12),
            "N={big_n}: Zayatz {z} vs ARX {zayatz}"
        );
        // ARX stops Newton-Raphson at a gradient of 1e-6, so does kanon,
        // from different iterates.
        assert!(
            close(p, pitman, 1e-8),
            "N={big_n}: Pitman {p} vs ARX {pitman}"
        );
        assert_eq!(u.dankar_model, Some(model), "N={big_n}");
        // ARX's SNB fails on all of these (see the module docs); kanon's
        // SNB has no root either where pi > 0.1 and Dankar took Zayatz.
        if model == UniquenessModel::Zayatz {
            assert!(u.snb.population_uniques.is_none_or(|s| s >= z), "N={big_n}");
        }
    }
}

/// Shlosser's estimate as ARX's ModelSNB writes it.
fn shlosser(profile: &[(usize, usize)], pi: f64) -> f64 {
    let (mut a, mut b, mut c, mut d) = (0.0, 0.0, 0.0, 0.0);
    for &(s, n) in profile {
        let (s, n) = (s as f64, n as f64);
        a += s * pi * pi * (1.0 - pi * pi).powf(s - 1.0) * n;
        b += (1.0 - pi * pi).powf(s) * n - 1.0;
        c += (1.0 - pi).powf(s) * n;
        d += s * pi * (1.0 - pi).powf(s - 1.0) * n;
    }
    let u: f64 = profile.iter().map(|e| e.1 as f64).sum();
    u + profile[0].1 as f64 * (a / b) * (c / d).powi(2)
}

/// Bisection for a sign change of `f` on `[lo, hi]`.
fn bisect(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let flo = f(lo);
    assert!(
        flo.signum() != f(hi).signum(),
        "no sign change on [{lo}, {hi}]"
    );
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if f(mid).signum() == flo.signum() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[test]
fn snb_solves_its_moment_equations() {
    // Adult on 5 QIs, N = 50,000 (pi = 0.603). The slide negative binomial's
    // chance of one and of two sampled records of a class, written from the
    // negative binomial's and the binomial's probabilities (sum over the
    // population class size F = 1 + m):
    let h = adult_frequencies(&ADULT_5);
    let n: usize = h.iter().map(|&(s, c)| s * c).sum();
    let big_n = 50_000u64;
    let pi = n as f64 / big_n as f64;
    let moments = |alpha: f64, beta: f64| -> (f64, f64) {
        let (mut p1, mut p2) = (0.0, 0.0);
        let mut nb = beta.powf(alpha);
        for m in 0..5000 {
            let f = (m + 1) as f64;
            p1 += nb * f * pi * (1.0 - pi).powf(f - 1.0);
            p2 += nb * f * (f - 1.0) / 2.0 * pi * pi * (1.0 - pi).powf(f - 2.0);
            nb *= (m as f64 + alpha) / (m as f64 + 1.0) * (1.0 - beta);
        }
        (p1, p2)
    };
    let k = shlosser(&h, pi);
    let (c1, c2) = (h[0].1 as f64, h[1].1 as f64);
    // For each α the β with K P1 = c1 (P1 rises with β here), then the α
    // with K P2 = c2.
    let beta_of = |alpha: f64| bisect(|b| k * moments(alpha, b).0 - c1, 1e-6, 1.0 - 1e-9);
    let alpha = bisect(|a| k * moments(a, beta_of(a)).1 - c2, 0.05, 3.0);
    let expected = k * beta_of(alpha).powf(alpha);
    let u = population_uniqueness(&h, big_n).unwrap();
    let snb = u.snb.population_uniques.unwrap();
    assert!(
        close(snb, expected, 1e-6),
        "SNB {snb} vs {expected} (α={alpha})"
    );
    // pi > 0.1: Dankar takes the smaller of Zayatz (3981.24, as ARX) and SNB.
    let z = u.zayatz.population_uniques.unwrap();
    assert!(close(z, 3981.2399753551176, 1e-12));
    assert_eq!(u.dankar.population_uniques, Some(snb.min(z)));
    assert_eq!(u.dankar_model, Some(UniquenessModel::Snb));
}

/// The labels of `qis` in `batches`, one string per column and row.
fn labels(batches: &[RecordBatch], qis: &[&str]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for b in batches {
        let cols: Vec<_> = qis
            .iter()
            .map(|q| {
                let c = b.column_by_name(q).unwrap();
                arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8).unwrap()
            })
            .collect();
        for r in 0..b.num_rows() {
            rows.push(
                cols.iter()
                    .map(|c| {
                        c.as_any()
                            .downcast_ref::<arrow::array::StringArray>()
                            .unwrap()
                            .value(r)
                            .to_string()
                    })
                    .collect(),
            );
        }
        assert!(cols.iter().all(|c| c.null_count() == 0));
    }
    rows
}

fn key(row: &[String], set: &[usize]) -> String {
    set.iter()
        .map(|&a| row[a].as_str())
        .collect::<Vec<_>>()
        .join("\u{1f}")
}

#[test]
fn msus_on_adult_match_string_counting() {
    let (spec, _) = common::adult_job(&ADULT_8);
    let batches = common::first_rows(common::adult_batches(), 3000);
    let table = encode_labels(&spec, batches[0].schema().as_ref(), &batches).unwrap();
    let names: Vec<&str> = table.columns().iter().map(|c| c.name()).collect();
    let rows = labels(&batches, &names);
    let q = names.len();
    // Unique rows of every set of up to 3 QIs, by counting joined labels.
    let sets: Vec<Vec<usize>> = (1u32..1 << q)
        .filter(|m| m.count_ones() <= 3)
        .map(|m| (0..q).filter(|&a| m & (1 << a) != 0).collect())
        .collect();
    let mut unique: HashMap<Vec<usize>, Vec<bool>> = HashMap::new();
    for set in &sets {
        let mut count: HashMap<String, usize> = HashMap::new();
        for row in &rows {
            *count.entry(key(row, set)).or_default() += 1;
        }
        unique.insert(
            set.clone(),
            rows.iter().map(|row| count[&key(row, set)] == 1).collect(),
        );
    }
    // An MSU: unique on the set, on no proper non-empty subset.
    let mut by_size = [0usize; 3];
    let mut per_attr = vec![0usize; q];
    let mut with_msu = vec![false; rows.len()];
    let mut per_set: HashMap<Vec<usize>, usize> = HashMap::new();
    for set in &sets {
        for r in 0..rows.len() {
            let proper_unique = sets
                .iter()
                .filter(|s| s.len() < set.len() && s.iter().all(|a| set.contains(a)))
                .any(|s| unique[s][r]);
            if unique[set][r] && !proper_unique {
                by_size[set.len() - 1] += 1;
                for &a in set {
                    per_attr[a] += 1;
                }
                with_msu[r] = true;
                *per_set.entry(set.clone()).or_default() += 1;
            }
        }
    }
    let report = minimal_sample_uniques(&table, 3, 5).unwrap();
    assert_eq!(report.by_size, by_size);
    assert_eq!(
        report.attributes.iter().map(|a| a.msus).collect::<Vec<_>>(),
        per_attr
    );
    assert_eq!(
        report.records_with_msu,
        with_msu.iter().filter(|&&b| b).count()
    );
    let top = &report.top_combinations[0];
    let top_set: Vec<usize> = top
        .attributes
        .iter()
        .map(|n| names.iter().position(|m| m == n).unwrap())
        .collect();
    assert_eq!(top.records, per_set[&top_set]);
    assert_eq!(top.records, *per_set.values().max().unwrap());
    assert!(report.msus > 0 && by_size[0] > 0 && by_size[2] > 0);
}

#[test]
fn journalist_risk_of_an_adult_sample_in_adult() {
    let qis = ["age", "sex", "race", "education"];
    let (spec, _) = common::adult_job(&qis);
    let all = common::adult_batches();
    let sample_batches = common::first_rows(all.clone(), 3000);
    let sample = encode_labels(&spec, all[0].schema().as_ref(), &sample_batches).unwrap();
    let population = encode_labels(&spec, all[0].schema().as_ref(), &all).unwrap();
    let f = population_class_sizes(&sample, &population).unwrap();
    // F_j by counting joined labels over all 30,162 rows.
    let pop_rows = labels(&all, &qis);
    let mut count: HashMap<String, u64> = HashMap::new();
    for row in &pop_rows {
        *count.entry(key(row, &[0, 1, 2, 3])).or_default() += 1;
    }
    let sample_rows = labels(&sample_batches, &qis);
    let classes = kanon_engine::encode::EquivalenceClasses::of(&sample);
    let mut expected_marketer = 0.0;
    for c in 0..classes.len() {
        let row = &sample_rows[classes.rows(c)[0] as usize];
        let pop = count[&key(row, &[0, 1, 2, 3])];
        assert_eq!(f[c], pop);
        expected_marketer += classes.size(c) as f64 / pop as f64;
    }
    expected_marketer /= 3000.0;
    let options = RiskOptions {
        threshold: 0.1,
        ..Default::default()
    };
    let profile = risk_profile(&sample, Some(&population), &options).unwrap();
    let j = profile.journalist.as_ref().unwrap();
    assert!(close(j.average, expected_marketer, 1e-12));
    assert!(close(profile.marketer, expected_marketer, 1e-12));
    assert_eq!(j.highest, 1.0 / *f.iter().min().unwrap() as f64);
    // The journalist never sees more risk than the prosecutor.
    assert!(j.average <= profile.prosecutor.average);
    assert!(j.records_above_threshold <= profile.prosecutor.records_above_threshold);
    // N defaults to the population table's records: pi = 3000 / 30162.
    let u = profile.population_uniqueness.as_ref().unwrap();
    assert_eq!(u.population_size, 30_162);
}

#[test]
fn adult_profile_by_class_sizes_and_without_values() {
    let (spec, _) = common::adult_job(&ADULT_8);
    let batches = common::adult_batches();
    let profile = kanon_engine::metrics::risk::risk_profile_of_batches(
        &spec,
        batches[0].schema().as_ref(),
        &batches,
        None,
        &RiskOptions {
            population_size: Some(301_620),
            ..Default::default()
        },
    )
    .unwrap();
    // Figures from a plain count of the 8-QI tuples of Adult.
    assert_eq!((profile.records, profile.classes), (30_162, 18_109));
    assert_eq!(profile.sample_uniques.records, 14_021);
    assert!(close(
        profile.prosecutor.average,
        18_109.0 / 30_162.0,
        1e-15
    ));
    assert_eq!(profile.prosecutor.highest, 1.0);
    assert!(close(profile.marketer, 18_109.0 / 30_162.0, 1e-15));
    // Risk > 0.2: classes of sizes 1 to 4.
    let above: usize = [(1, 14_021), (2, 2026), (3, 796), (4, 379)]
        .iter()
        .map(|&(s, c)| s * c)
        .sum();
    assert_eq!(profile.prosecutor.records_above_threshold, above);
    assert_eq!(profile.risk_bands[0].records, 14_021 + 2 * 2026);
    let u = profile.population_uniqueness.as_ref().unwrap();
    assert!(close(
        u.dankar.population_uniques.unwrap(),
        72139.034675608430,
        1e-8
    ));
    assert_eq!(profile.msus.as_ref().unwrap().attributes.len(), 8);
    assert!(profile.msus.as_ref().unwrap().top_combinations.len() <= 10);
    let json = serde_json::to_string(&profile).unwrap();
    for value in [
        "Male",
        "Female",
        "White",
        "Bachelors",
        "United-States",
        "Never-married",
    ] {
        assert!(!json.contains(value), "{value} in the profile");
    }
}
