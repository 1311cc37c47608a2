//! `kanon generate` on the real binary: determinism, row count, schema,
//! atomic output, bad arguments, and that a generated file goes through
//! `kanon anonymize` and `kanon verify` with the bundled Adult job.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow::datatypes::{DataType, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn kanon() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kanon"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("kanon runs");
    eprintln!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn generate(dest: &Path, rows: u64, seed: u64, extra: usize, more: &[&str]) -> Output {
    run(kanon()
        .arg("generate")
        .args(["--like", "adult"])
        .args(["--rows", &rows.to_string()])
        .args(["--seed", &seed.to_string()])
        .args(["--extra-columns", &extra.to_string()])
        .args(more)
        .arg(dest))
}

/// Files left in `dir` other than `keep`.
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

#[test]
fn same_arguments_give_byte_identical_files_whatever_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c, d) = (
        dir.path().join("a.parquet"),
        dir.path().join("b.parquet"),
        dir.path().join("c.parquet"),
        dir.path().join("d.parquet"),
    );
    let args = ["--row-group-rows", "100000", "-q"];
    assert!(generate(&a, 150_000, 42, 6, &args).status.success());
    assert!(generate(&b, 150_000, 42, 6, &args).status.success());
    let one_thread = run(kanon()
        .env("RAYON_NUM_THREADS", "1")
        .args(["generate", "--rows", "150000", "--seed", "42"])
        .args(["--extra-columns", "6"])
        .args(args)
        .arg(&c));
    assert!(one_thread.status.success());
    assert!(generate(&d, 150_000, 43, 6, &args).status.success());
    let bytes = |p: &Path| std::fs::read(p).unwrap();
    assert!(bytes(&a) == bytes(&b), "two runs differ");
    assert!(bytes(&a) == bytes(&c), "1 thread and the default differ");
    assert!(bytes(&a) != bytes(&d), "seeds 42 and 43 give the same file");
}

#[test]
fn row_count_row_groups_and_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/g.parquet");
    let out = generate(&path, 200_001, 1, 9, &["--row-group-rows", "65536"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("200001 rows like adult"));
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
    let meta = reader.metadata().clone();
    assert_eq!(meta.file_metadata().num_rows(), 200_001);
    let groups: Vec<i64> = meta.row_groups().iter().map(|g| g.num_rows()).collect();
    assert_eq!(groups, [65_536, 65_536, 65_536, 3_393]);
    let kv = meta.file_metadata().key_value_metadata().unwrap();
    let generate = kv.iter().find(|kv| kv.key == "kanon.generate").unwrap();
    assert!(generate.value.as_deref().unwrap().contains("\"seed\":1"));

    let schema = reader.schema().clone();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names[..9],
        [
            "sex",
            "age",
            "race",
            "marital-status",
            "education",
            "native-country",
            "workclass",
            "occupation",
            "salary-class"
        ]
    );
    for (i, f) in schema.fields().iter().enumerate() {
        let expected = match i {
            1 => DataType::Int64,
            0..=8 => DataType::Utf8,
            _ => match (i - 9) % 4 {
                0 => DataType::Int64,
                1 => DataType::Float64,
                2 => DataType::Utf8,
                _ => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            },
        };
        assert_eq!(f.data_type(), &expected, "column {}", f.name());
        if i >= 9 {
            assert_eq!(f.name(), &format!("extra_{}", i - 9));
        }
    }
    // Adult columns are complete; extras with a null share have nulls.
    let mut nulls = vec![0usize; schema.fields().len()];
    let mut rows = 0;
    for batch in reader.build().unwrap() {
        let batch = batch.unwrap();
        rows += batch.num_rows();
        for (n, c) in nulls.iter_mut().zip(batch.columns()) {
            *n += c.null_count();
        }
    }
    assert_eq!(rows, 200_001);
    assert!(nulls[..9].iter().all(|&n| n == 0));
    for (i, &n) in nulls[9..].iter().enumerate() {
        assert_eq!(n == 0, i % 3 == 0, "extra_{i} has {n} nulls");
    }
    assert_eq!(
        leftovers(path.parent().unwrap(), &["g.parquet"]),
        Vec::<String>::new()
    );
}

#[test]
fn generated_file_anonymises_and_verifies_with_the_adult_job() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("gen.parquet");
    let release = dir.path().join("release.parquet");
    assert!(generate(&input, 20_000, 7, 3, &["-q"]).status.success());
    let job = repo().join("configs/adult.toml");
    let out = run(kanon()
        .arg("anonymize")
        .arg("-c")
        .arg(&job)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&release)
        // The generated extra columns are published unchanged, on purpose.
        .args([
            "--set",
            "columns.unlisted=\"insensitive\"",
            "--weaken-privacy",
        ]));
    assert!(out.status.success(), "anonymize failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("20000 in"), "{stdout}");
    // Verified with the job that made it (a certificate of another job
    // fails verify).
    let out = run(kanon()
        .arg("verify")
        .arg("-c")
        .arg(&job)
        .arg("--input")
        .arg(&release)
        .args([
            "--set",
            "columns.unlisted=\"insensitive\"",
            "--weaken-privacy",
        ]));
    assert!(out.status.success(), "verify failed");
    // The extra columns pass through.
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&release).unwrap()).unwrap();
    assert!(reader.schema().field_with_name("extra_2").is_ok());
    assert_eq!(reader.metadata().file_metadata().num_rows(), 20_000);
}

#[test]
fn existing_output_is_kept_without_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.parquet");
    std::fs::write(&path, b"keep me").unwrap();
    let out = generate(&path, 1_000, 1, 0, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already exists") && err.contains("--overwrite"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"keep me");

    let out = generate(&path, 1_000, 1, 0, &["--overwrite"]);
    assert!(out.status.success());
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
    assert_eq!(reader.metadata().file_metadata().num_rows(), 1_000);
    assert_eq!(leftovers(dir.path(), &["g.parquet"]), Vec::<String>::new());
}

#[test]
fn bad_arguments_fail_clearly_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.parquet");
    for (rows, more, expected) in [
        (0, vec![], "--rows must be at least 1"),
        (10, vec!["--noise", "1.5"], "--noise"),
        (10, vec!["--row-group-rows", "0"], "--row-group-rows"),
        (10, vec!["--extra-columns", "20000"], "--extra-columns"),
    ] {
        let out = run(kanon()
            .arg("generate")
            .args(["--rows", &rows.to_string()])
            .args(&more)
            .arg(&path));
        assert_eq!(out.status.code(), Some(2), "{more:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(expected),
            "{more:?}"
        );
    }
    let out = generate(dir.path(), 10, 1, 0, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a directory"));
    let out = run(kanon()
        .args(["generate", "--like", "census", "--rows", "10"])
        .arg(&path));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("adult"));
    // A parent that is a file: an I/O error, nothing written.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let out = generate(&blocker.join("g.parquet"), 10, 1, 0, &[]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot create output directory"));
    assert_eq!(leftovers(dir.path(), &["file"]), Vec::<String>::new());
}
