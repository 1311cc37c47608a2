//! Tests of block-wise runs: the cuts, the union and the release.

use super::*;
use crate::algorithms::by_name;
use crate::encode::{EquivalenceClasses, QiTable};
use crate::privacy::PrivacyModel;
use crate::privacy::{ClassView, Privacy};
use crate::verify::verify_partition;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A random table: two numeric QIs, two categorical QIs (flexible), a
/// sensitive column.
fn random_table(seed: u64, n: usize) -> (JobSpec, QiTable) {
    let spec: JobSpec = serde_json::from_str(
        r#"{"attributes": [
            {"name": "age", "role": "qi", "type": "numeric"},
            {"name": "zip", "role": "qi", "type": "numeric"},
            {"name": "job", "role": "qi"},
            {"name": "city", "role": "qi"},
            {"name": "disease", "role": "sensitive"}],
           "algorithm": {"name": "mondrian", "seed": 3}}"#,
    )
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut cols: Vec<Vec<String>> = vec![Vec::new(); 5];
    for _ in 0..n {
        cols[0].push(rng.gen_range(17..90).to_string());
        cols[1].push((10_000 + rng.gen_range(0..60) * 7).to_string());
        cols[2].push(format!("job{}", rng.gen_range(0..12)));
        cols[3].push(format!("city{}", rng.gen_range(0..30)));
        cols[4].push(format!("d{}", rng.gen_range(0..5)));
    }
    let names = ["age", "zip", "job", "city", "disease"];
    let columns: Vec<(&str, Vec<&str>)> = names
        .iter()
        .zip(&cols)
        .map(|(n, c)| (*n, c.iter().map(String::as_str).collect()))
        .collect();
    let table = QiTable::from_string_columns(&spec, &Default::default(), &columns).unwrap();
    (spec, table)
}

fn with(spec: &JobSpec, algorithm: &str, block_size: Option<usize>) -> JobSpec {
    let mut s = spec.clone();
    s.algorithm.name = algorithm.to_string();
    if let Some(b) = block_size {
        s.algorithm
            .params
            .insert(BLOCK_SIZE.into(), serde_json::json!(b));
    }
    s
}

fn run(spec: &JobSpec, table: &QiTable, privacy: &Privacy) -> Result<Outcome> {
    let classes = EquivalenceClasses::of(table);
    by_name(spec)?.run(&Context::local(table, &classes, privacy, spec))
}

/// Distinct l-diversity on the first sensitive column (a local copy, so
/// these tests do not depend on which models are registered).
#[derive(Debug)]
struct DistinctL(usize);

impl PrivacyModel for DistinctL {
    fn is_monotone(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        format!("distinct {}-diversity", self.0)
    }
    fn min_class_size(&self) -> usize {
        self.0
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        let codes = class.table.sensitive()[0].codes();
        let mut seen: Vec<u32> = class.rows.iter().map(|&r| codes.get(r as usize)).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len() >= self.0
    }
}

#[test]
fn partitioned_output_verifies_on_random_tables() {
    for (i, (n, k, block)) in [
        (3_000, 2, 100),
        (3_000, 5, 300),
        (5_000, 10, 1_000),
        (2_000, 25, 120),
        (4_000, 3, 7),
    ]
    .into_iter()
    .enumerate()
    {
        let (spec, table) = random_table(i as u64, n);
        let mut spec = with(&spec, "mondrian", Some(block));
        spec.privacy.k = k;
        let privacy = Privacy::k_anonymity(k);
        let out = run(&spec, &table, &privacy).unwrap();
        verify_partition(&table, &out.partition, &privacy)
            .unwrap_or_else(|e| panic!("case {i}: {e}"));
        let d = &out.details["partitioned"];
        let blocks = d["blocks"].as_u64().unwrap();
        assert!(blocks > 1, "case {i}: one block");
        assert!(d["block_rows_min"].as_u64().unwrap() >= k as u64);
        if block >= 2 * k {
            // Cuts stay within the middle half, so blocks are at most
            // about the block size once they can be cut.
            assert!(blocks as usize >= n / block / 2, "case {i}: {d}");
        }
        assert_eq!(out.partition.suppressed(), 0);
    }
}

#[test]
fn partitioned_output_is_l_diverse_when_asked() {
    for (i, (n, l, block)) in [(3_000, 3, 200), (2_000, 4, 100)].into_iter().enumerate() {
        let (spec, table) = random_table(10 + i as u64, n);
        let spec = with(&spec, "mondrian", Some(block));
        let privacy = Privacy::k_anonymity(2).with_model(Box::new(DistinctL(l)));
        let out = run(&spec, &table, &privacy).unwrap();
        verify_partition(&table, &out.partition, &privacy)
            .unwrap_or_else(|e| panic!("case {i}: {e}"));
        assert!(out.details["partitioned"]["blocks"].as_u64().unwrap() > 1);
        // Every group, not only every published class, is l-diverse.
        let mut members = vec![Vec::new(); out.partition.n_groups()];
        for (r, &g) in out.partition.group_of_row().iter().enumerate() {
            if g != SUPPRESSED {
                members[g as usize].push(r as u32);
            }
        }
        for rows in members.iter().filter(|m| !m.is_empty()) {
            assert!(privacy.accepts(ClassView {
                table: &table,
                rows
            }));
        }
    }
}

#[test]
fn small_tables_agree_with_the_unpartitioned_run() {
    let (spec, table) = random_table(4, 1_500);
    let privacy = Privacy::k_anonymity(5);
    for algorithm in ["mondrian", "sbc"] {
        let plain = run(&with(&spec, algorithm, None), &table, &privacy).unwrap();
        let blocked = run(&with(&spec, algorithm, Some(1_500)), &table, &privacy).unwrap();
        assert_eq!(plain.partition, blocked.partition, "{algorithm}");
        assert_eq!(blocked.details["partitioned"]["blocks"], 1);
        assert_eq!(
            blocked.details["partitioned"]["inner_details"],
            plain.details
        );
    }
}

#[test]
fn a_sub_table_of_every_row_behaves_as_the_table() {
    let (spec, table) = random_table(5, 1_200);
    let privacy = Privacy::k_anonymity(4);
    let all: Vec<u32> = (0..table.n_rows() as u32).collect();
    let sub = table.restrict(&all);
    for algorithm in ["mondrian", "sbc"] {
        let spec = with(&spec, algorithm, None);
        let a = run(&spec, &table, &privacy).unwrap();
        let b = run(&spec, &sub, &privacy).unwrap();
        assert_eq!(a.partition, b.partition, "{algorithm}");
        // And through the union, as one block of a larger run.
        let u = union(&table, vec![(all.clone(), b.partition)]).unwrap();
        assert_eq!(u.group_of_row(), a.partition.group_of_row());
        for g in 0..u.n_groups() {
            assert_eq!(u.tuple(g), a.partition.tuple(g));
        }
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let (spec, table) = random_table(6, 6_000);
    let privacy = Privacy::k_anonymity(5);
    for algorithm in ["mondrian", "sbc"] {
        let spec = with(&spec, algorithm, Some(400));
        let on = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| run(&spec, &table, &privacy).unwrap().partition)
        };
        let one = on(1);
        assert_eq!(one, on(2), "{algorithm}");
        assert_eq!(one, on(4), "{algorithm}");
        verify_partition(&table, &one, &privacy).unwrap();
    }
}

/// Every group as its sorted rows and published cells, in a canonical
/// order: partitions equal up to the numbering of their groups compare
/// equal.
fn canonical(p: &Partition) -> Vec<(Vec<u32>, String)> {
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); p.n_groups()];
    for (r, &g) in p.group_of_row().iter().enumerate() {
        if g != SUPPRESSED {
            members[g as usize].push(r as u32);
        }
    }
    let mut groups: Vec<(Vec<u32>, String)> = members
        .into_iter()
        .enumerate()
        .map(|(g, rows)| (rows, format!("{:?}", p.tuple(g))))
        .collect();
    groups.sort();
    groups
}

#[test]
fn mondrian_in_blocks_publishes_the_whole_table_partition() {
    for (seed, k, block) in [(31, 5, 400), (32, 3, 97), (33, 8, 1_000)] {
        let (spec, table) = random_table(seed, 6_000);
        let privacy = Privacy::k_anonymity(k);
        for cut in ["least-loss", "widest"] {
            let mut spec = with(&spec, "mondrian", None);
            spec.algorithm
                .params
                .insert("cut".into(), serde_json::json!(cut));
            let whole = run(&spec, &table, &privacy).unwrap();
            assert!(whole.details.get("partitioned").is_none());
            spec.algorithm
                .params
                .insert(BLOCK_SIZE.into(), serde_json::json!(block));
            let blocked = run(&spec, &table, &privacy).unwrap();
            let blocks = blocked.details["partitioned"]["blocks"].as_u64().unwrap();
            assert!(blocks >= 6, "seed {seed}: {blocks} blocks");
            assert_eq!(
                canonical(&whole.partition),
                canonical(&blocked.partition),
                "seed {seed}, k {k}, block {block}, cut {cut}"
            );
        }
    }
}

#[test]
fn table_wide_passes_run_whole_at_any_size() {
    let (spec, _) = random_table(34, 10);
    let hierarchy_bound = crate::algorithms::mondrian::HIERARCHY_BOUND;
    let registration = crate::algorithms::registry::get(hierarchy_bound).unwrap();
    let wrapped = wrap(
        &with(&spec, hierarchy_bound, None),
        registration.capabilities,
    )
    .unwrap()
    .unwrap();
    assert_eq!(wrapped.name(), hierarchy_bound);
    assert!(wrapped.top_down_cuts().is_some(), "not wrapped in blocks");
    let mut s = with(&spec, hierarchy_bound, None);
    s.algorithm
        .params
        .insert(BLOCK_CUT.into(), serde_json::json!("widest"));
    let err = by_name(&s).unwrap_err().to_string();
    assert!(err.contains("algorithm.block_cut"), "{err}");
    // Plain Mondrian has no such pass: it is wrapped, and runs in blocks
    // above the threshold (the same partition, see above).
    let mondrian = crate::algorithms::registry::get("mondrian").unwrap();
    let wrapped = wrap(&with(&spec, "mondrian", None), mondrian.capabilities)
        .unwrap()
        .unwrap();
    assert!(wrapped.top_down_cuts().is_none(), "wrapped in blocks");
}

#[test]
fn few_distinct_tuples_run_whole_whatever_the_rows() {
    // 3,000 rows with at most 4 x 3 distinct QI tuples.
    let spec: JobSpec = serde_json::from_str(
        r#"{"attributes": [
            {"name": "a", "role": "qi"},
            {"name": "b", "role": "qi"}],
           "algorithm": {"name": "kaca", "seed": 3}}"#,
    )
    .unwrap();
    let a: Vec<String> = (0..3_000).map(|i| format!("a{}", i % 4)).collect();
    let b: Vec<String> = (0..3_000).map(|i| format!("b{}", i % 3)).collect();
    let columns = vec![
        ("a", a.iter().map(String::as_str).collect::<Vec<_>>()),
        ("b", b.iter().map(String::as_str).collect()),
    ];
    let table = QiTable::from_string_columns(&spec, &Default::default(), &columns).unwrap();
    let privacy = Privacy::k_anonymity(5);
    let classes = EquivalenceClasses::of(&table);
    let run_with = |tuples: usize| {
        let blockwise = Partitioned::new(whole_table(&spec).unwrap(), spec.clone(), 500)
            .whole_table_up_to(1_000)
            .whole_table_up_to_tuples(tuples);
        run_on(&blockwise, &spec, &table, &classes, &privacy)
    };
    let whole = run_with(12);
    assert!(whole.details.get("partitioned").is_none(), "run whole");
    let blocks = run_with(11);
    assert!(blocks.details["partitioned"]["blocks"].as_u64().unwrap() >= 2);
    verify_partition(&table, &blocks.partition, &privacy).unwrap();
    let kaca = crate::algorithms::registry::get("kaca")
        .unwrap()
        .capabilities;
    assert_eq!(kaca.whole_up_to_tuples, KACA_WHOLE_TUPLES);
    let cover = crate::algorithms::registry::get("cover")
        .unwrap()
        .capabilities;
    assert_eq!(cover.whole_up_to_tuples, COVER_WHOLE_TUPLES);
    let sbc = crate::algorithms::registry::get("sbc")
        .unwrap()
        .capabilities;
    assert_eq!(sbc.whole_up_to_tuples, 0);
}

#[test]
fn sbc_in_blocks_verifies() {
    let (spec, table) = random_table(7, 4_000);
    let privacy = Privacy::k_anonymity(6);
    let out = run(&with(&spec, "sbc", Some(500)), &table, &privacy).unwrap();
    verify_partition(&table, &out.partition, &privacy).unwrap();
    assert!(out.details["partitioned"]["blocks"].as_u64().unwrap() >= 4);
}

#[test]
fn bad_block_sizes_and_global_recoding_are_refused() {
    let (spec, _) = random_table(8, 10);
    for bad in [
        serde_json::json!(1.5),
        serde_json::json!(-5),
        serde_json::json!("big"),
    ] {
        let mut s = with(&spec, "mondrian", None);
        s.algorithm.params.insert(BLOCK_SIZE.into(), bad.clone());
        let err = by_name(&s).unwrap_err().to_string();
        assert!(err.contains("algorithm.block_size"), "{bad}: {err}");
    }
    for global in ["datafly", "incognito"] {
        let err = by_name(&with(&spec, global, Some(1000)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("global-recoding"), "{err}");
    }
    // The inner algorithm still rejects parameters it does not know.
    let mut s = with(&spec, "mondrian", Some(1000));
    s.algorithm
        .params
        .insert("bogus".into(), serde_json::json!(1));
    assert!(by_name(&s).is_err());
}

#[test]
fn both_cut_rules_verify_and_bad_rules_are_refused() {
    let (spec, table) = random_table(9, 3_000);
    let privacy = Privacy::k_anonymity(5);
    for rule in ["least-loss", "widest"] {
        let mut s = with(&spec, "mondrian", Some(250));
        s.algorithm
            .params
            .insert(BLOCK_CUT.into(), serde_json::json!(rule));
        let out = run(&s, &table, &privacy).unwrap();
        verify_partition(&table, &out.partition, &privacy).unwrap();
        assert_eq!(out.details["partitioned"]["block_cut"], rule);
        assert!(out.details["partitioned"]["blocks"].as_u64().unwrap() >= 6);
    }
    let mut s = with(&spec, "mondrian", Some(250));
    s.algorithm
        .params
        .insert(BLOCK_CUT.into(), serde_json::json!("random"));
    let err = by_name(&s).unwrap_err().to_string();
    assert!(err.contains("algorithm.block_cut"), "{err}");
}

#[test]
fn a_region_that_cannot_be_cut_stays_one_block() {
    // Every row identical: no QI has width, the table is one block.
    let spec: JobSpec = serde_json::from_str(
        r#"{"attributes": [{"name": "a", "role": "qi"}],
            "algorithm": {"name": "mondrian", "block_size": 10}}"#,
    )
    .unwrap();
    let values = vec!["x"; 100];
    let table = QiTable::from_string_columns(&spec, &Default::default(), &[("a", values)]).unwrap();
    let privacy = Privacy::k_anonymity(3);
    let out = run(&spec, &table, &privacy).unwrap();
    assert_eq!(out.details["partitioned"]["blocks"], 1);
    assert_eq!(out.details["partitioned"]["block_rows_max"], 100);
    verify_partition(&table, &out.partition, &privacy).unwrap();
}

#[test]
fn the_default_runs_small_tables_whole_and_large_ones_in_blocks() {
    let (spec, table) = random_table(21, 3_000);
    let privacy = Privacy::k_anonymity(5);
    for algorithm in ["mondrian", "sbc"] {
        // No block_size: the whole table, exactly as the bare algorithm.
        let default = run(&with(&spec, algorithm, None), &table, &privacy).unwrap();
        assert!(default.details.get("partitioned").is_none(), "{algorithm}");
        let zero = run(&with(&spec, algorithm, Some(0)), &table, &privacy).unwrap();
        let named = spec_named(&spec, algorithm);
        let bare = run_on(
            whole_table(&named).unwrap().as_ref(),
            &named,
            &table,
            &EquivalenceClasses::of(&table),
            &privacy,
        );
        assert_eq!(default.partition, bare.partition, "{algorithm}");
        assert_eq!(zero.partition, bare.partition, "{algorithm}");
    }
    // Above the threshold the default cuts into blocks of the default
    // size (a smaller threshold and size stand in for the constants).
    let inner = whole_table(&spec).unwrap();
    let auto = Partitioned::new(inner, spec.clone(), 1_000).whole_table_up_to(2_000);
    let classes = EquivalenceClasses::of(&table);
    let out = run_on(&auto, &spec, &table, &classes, &privacy);
    verify_partition(&table, &out.partition, &privacy).unwrap();
    assert!(out.details["partitioned"]["blocks"].as_u64().unwrap() >= 3);
    // Global recoding without block_size is not wrapped; 0 is accepted
    // (this table lacks the hierarchies Incognito needs: its own error).
    let incognito = crate::algorithms::registry::get("incognito")
        .unwrap()
        .capabilities;
    assert!(wrap(&with(&spec, "incognito", None), incognito)
        .unwrap()
        .is_none());
    let err = run(&with(&spec, "incognito", Some(0)), &table, &privacy)
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs a hierarchy"), "{err}");
}

/// Runs `algorithm` on `table` as the pipeline would, with `spec` as its
/// job; panics on error.
fn run_on(
    algorithm: &dyn Algorithm,
    spec: &JobSpec,
    table: &QiTable,
    classes: &EquivalenceClasses,
    privacy: &Privacy,
) -> Outcome {
    algorithm
        .run(&Context::local(table, classes, privacy, spec))
        .unwrap()
}

fn spec_named(spec: &JobSpec, algorithm: &str) -> JobSpec {
    let mut s = spec.clone();
    s.algorithm.name = algorithm.to_string();
    s
}
