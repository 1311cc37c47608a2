//! Pass 1's engine part: encoding record batches into the QI working set.
//! The bundled Adult job (8 QIs: age numeric with intervals, 7 with
//! hierarchy files) and one million generated rows of three numeric QIs
//! (Int64, Float64 with fractions, Decimal128) encoded flexibly.
//!
//! `cargo bench -p kanon-benches --bench encode -- --warm-up-time 1 --measurement-time 3`

use kanon_benches as common;

use std::sync::Arc;

use arrow::array::{ArrayRef, Decimal128Array, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use criterion::{criterion_group, criterion_main, Criterion};
use kanon_engine::encode::Encoder;
use kanon_engine::spec::JobSpec;

fn numeric_batches(rows: usize) -> Vec<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, false),
        Field::new("b", DataType::Float64, false),
        Field::new("c", DataType::Decimal128(12, 2), false),
    ]));
    (0..rows)
        .step_by(65_536)
        .map(|start| {
            let n = 65_536.min(rows - start);
            let idx = (start..start + n).map(|i| (i as u64).wrapping_mul(2_654_435_761) % 10_000);
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values(idx.clone().map(|v| v as i64)))
                        as ArrayRef,
                    Arc::new(Float64Array::from_iter_values(
                        idx.clone().map(|v| v as f64 / 7.0),
                    )),
                    Arc::new(
                        Decimal128Array::from_iter_values(idx.map(|v| v as i128 * 3))
                            .with_precision_and_scale(12, 2)
                            .unwrap(),
                    ),
                ],
            )
            .unwrap()
        })
        .collect()
}

fn encode(
    spec: &JobSpec,
    hierarchies: &rustc_hash::FxHashMap<String, Arc<kanon_engine::hierarchy::Hierarchy>>,
    batches: &[RecordBatch],
) -> usize {
    let mut e = Encoder::try_new(spec, hierarchies, &batches[0].schema()).unwrap();
    for b in batches {
        e.push(b).unwrap();
    }
    e.finish().unwrap().n_rows()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode");
    group.sample_size(10);
    let (spec, hierarchies) = common::adult_job(&[]);
    let adult = common::adult_batches();
    group.bench_function("adult-8qi", |b| {
        b.iter(|| encode(&spec, &hierarchies, &adult))
    });
    let numeric: JobSpec = toml::from_str(
        "[privacy]\nk = 2\n[[attributes]]\nname = \"a\"\nrole = \"qi\"\n[[attributes]]\nname = \"b\"\nrole = \"qi\"\n[[attributes]]\nname = \"c\"\nrole = \"qi\"\n",
    )
    .unwrap();
    let batches = numeric_batches(1_000_000);
    group.bench_function("1m-rows-int-float-decimal", |b| {
        b.iter(|| encode(&numeric, &Default::default(), &batches))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
