//! Partition, then cluster (issue 10) on the bundled Adult job: block-wise
//! runs verify through the pipeline and cost little information.

mod common;

use kanon_engine::anonymize;
use kanon_engine::spec::JobSpec;

fn blockwise(spec: &JobSpec, algorithm: &str, block_size: Option<usize>) -> JobSpec {
    let mut s = spec.clone();
    s.algorithm.name = algorithm.to_string();
    s.privacy.k = 10;
    if let Some(b) = block_size {
        s.algorithm
            .params
            .insert("block_size".into(), serde_json::json!(b));
    }
    s
}

#[test]
fn adult_in_blocks_verifies_and_keeps_the_ncp() {
    let (spec, table) = common::adult_table(&[]);
    for algorithm in ["sbc", "mondrian"] {
        let whole = anonymize(&blockwise(&spec, algorithm, None), &table).unwrap();
        for block_size in [5_000, 10_000] {
            let run = anonymize(&blockwise(&spec, algorithm, Some(block_size)), &table)
                .unwrap_or_else(|e| panic!("{algorithm}, {block_size}: {e}"));
            let d = &run.details["partitioned"];
            assert!(d["blocks"].as_u64().unwrap() >= 3, "{d}");
            assert!(d["block_rows_max"].as_u64().unwrap() <= block_size as u64);
            assert_eq!(run.algorithm, algorithm);
            assert!(run.report.smallest_class >= 10);
            assert_eq!(run.report.rows_out, table.n_rows());
            // Issue 10: at most 5 % (relative) above the whole-table NCP.
            // Measured (RESULTS.md, "Cost of partitioning"): SBC 0.0639 / 0.0630 and
            // Mondrian 0.1105 / 0.1061 against 0.0657 and 0.1068; Mondrian
            // at 5,000 is the one above, by 3.5 %.
            assert!(
                run.report.ncp <= whole.report.ncp * 1.05,
                "{algorithm}, {block_size}: NCP {} against {} unpartitioned",
                run.report.ncp,
                whole.report.ncp
            );
        }
    }
}

/// The default block size keeps KACA and L-clustering within 5 % of their
/// whole-table NCP on Adult at k = 10 too (the measurement behind
/// `DEFAULT_BLOCK_SIZE`; RESULTS.md has KACA at +0.7 % with the bundled
/// settings, -1.3 % with the paper's, L-clustering at -2.0 %).
#[test]
fn the_default_block_size_keeps_kaca_and_l_clustering_within_five_percent() {
    use kanon_engine::algorithms::partitioned::DEFAULT_BLOCK_SIZE;
    let (spec, table) = common::adult_table(&[]);
    for algorithm in ["kaca", "l-clustering"] {
        let mut whole = blockwise(&spec, algorithm, Some(0));
        if algorithm == "l-clustering" {
            whole.privacy.l = Some(2);
        }
        let mut blocked = whole.clone();
        blocked
            .algorithm
            .params
            .insert("block_size".into(), serde_json::json!(DEFAULT_BLOCK_SIZE));
        let whole = anonymize(&whole, &table).unwrap();
        let run = anonymize(&blocked, &table).unwrap();
        assert!(run.details["partitioned"]["blocks"].as_u64().unwrap() >= 3);
        assert!(
            run.report.ncp <= whole.report.ncp * 1.05,
            "{algorithm}: NCP {} in blocks against {} whole",
            run.report.ncp,
            whole.report.ncp
        );
    }
}

/// Records every progress report.
#[derive(Debug, Default)]
struct Recorder(std::sync::Mutex<Vec<(&'static str, u64, u64)>>);

impl kanon_engine::progress::Progress for Recorder {
    fn update(&self, phase: &'static str, done: u64, total: u64) {
        self.0.lock().unwrap().push((phase, done, total));
    }
}

#[test]
fn a_block_wise_run_reports_each_block_done() {
    let (spec, table) = common::adult_table(&[]);
    let spec = blockwise(&spec, "mondrian", Some(5_000));
    let privacy = kanon_engine::privacy::Privacy::from_spec(&spec).unwrap();
    let recorder = Recorder::default();
    let run = kanon_engine::pipeline::anonymize_cancellable(
        &spec,
        &table,
        &privacy,
        kanon_engine::cancel::Cancellation::never(),
        &recorder,
        kanon_engine::algorithms::partitioned::LocalBlocks::get(),
    )
    .unwrap();
    let blocks = run.details["partitioned"]["blocks"].as_u64().unwrap();
    assert!(blocks > 1);
    let reports = recorder.0.into_inner().unwrap();
    assert_eq!(reports.len() as u64, blocks + 1, "{reports:?}");
    assert!(reports
        .iter()
        .all(|&(p, _, t)| p == "blocks" && t == blocks));
    let mut done: Vec<u64> = reports.iter().map(|r| r.1).collect();
    done.sort_unstable();
    assert_eq!(done, (0..=blocks).collect::<Vec<_>>());
}

/// Clusters on this machine, then corrupts what comes back as a lost,
/// buggy or hostile worker might.
#[derive(Debug)]
struct Corrupting(Corruption);

/// Changes the blocks' partitions.
type Corruption = fn(&mut Vec<kanon_engine::partition::Partition>);

impl kanon_engine::algorithms::partitioned::BlockExecutor for Corrupting {
    fn run(
        &self,
        blocks: &kanon_engine::algorithms::partitioned::Blocks<'_>,
    ) -> kanon_engine::Result<kanon_engine::algorithms::partitioned::BlocksRun> {
        use kanon_engine::algorithms::partitioned::LocalBlocks;
        let mut run = LocalBlocks::get().run(blocks)?;
        (self.0)(&mut run.partitions);
        Ok(run)
    }
}

/// Whatever a block executor returns is checked before it is used: a block
/// missing, blocks swapped or a block's rows each published alone fail the
/// run (no panic, no release).
#[test]
fn partitions_from_an_executor_are_checked_before_anything_is_released() {
    let (spec, table) = common::adult_table(&[]);
    let spec = blockwise(&spec, "mondrian", Some(2_000));
    let privacy = kanon_engine::privacy::Privacy::from_spec(&spec).unwrap();
    let corruptions: [(&str, Corruption); 3] = [
        ("a block lost", |p| {
            p.pop();
        }),
        ("two blocks swapped", |p| p.swap(0, 1)),
        ("a row published in a class of its own", |p| {
            let mut v = serde_json::to_value(&p[0]).unwrap();
            let n_qi = v["n_qi"].as_u64().unwrap() as usize;
            let groups = v["group_of_row"].as_array_mut().unwrap();
            let (row, g) = groups
                .iter()
                .enumerate()
                .find_map(|(r, g)| Some((r, g.as_u64().filter(|&g| g != u64::from(u32::MAX))?)))
                .unwrap();
            let cells = v["cells"].as_array().unwrap();
            let n_groups = cells.len() / n_qi;
            let mut own: Vec<serde_json::Value> =
                cells[g as usize * n_qi..(g as usize + 1) * n_qi].to_vec();
            own[0] = serde_json::json!("Suppressed");
            v["group_of_row"][row] = serde_json::json!(n_groups);
            v["cells"].as_array_mut().unwrap().extend(own);
            p[0] = serde_json::from_value(v).unwrap();
        }),
    ];
    for (what, corrupt) in corruptions {
        let result = kanon_engine::pipeline::anonymize_cancellable(
            &spec,
            &table,
            &privacy,
            kanon_engine::cancel::Cancellation::never(),
            kanon_engine::progress::Silent::sink(),
            &Corrupting(corrupt),
        );
        let err = result.err().unwrap_or_else(|| panic!("{what}: accepted"));
        eprintln!("{what}: {err}");
    }
}
