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
            // Measured (docs/results/gen.md): SBC 0.0639 / 0.0630 and
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
