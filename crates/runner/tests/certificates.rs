//! Issue 31, item 3, "certificates that cannot lie", for Parquet releases:
//! `kanon verify` recomputes what a manifest's certificate claims and fails
//! (exit 1) on a file rewritten with the same size, an inflated l, a
//! certificate of another job and a removed manifest. Each passed with
//! exit 0 before. (The Delta cases are in `delta.rs`.)

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// The bundled job's release in `dir`: (release, manifest).
fn release(dir: &Path) -> (PathBuf, PathBuf) {
    let out = dir.join("r.parquet");
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-q", "-o"])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    (out, dir.join("_r.parquet.kanon_release.json"))
}

fn verify(release: &Path, sets: &[&str]) -> std::process::Output {
    let mut c = kanon();
    c.args(["verify", "-c", "configs/adult.toml", "-i"])
        .arg(release);
    for s in sets {
        c.args(["--set", s]);
    }
    run(&mut c)
}

#[test]
fn verify_recomputes_what_a_manifest_claims() {
    let dir = tempfile::tempdir().unwrap();
    let (out, manifest) = release(dir.path());
    let o = verify(&out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("manifest holds"), "{}", show(&o));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    assert!(
        m["files"][0]["sha256"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{m}"
    );
    assert_eq!(
        m["certificate"]["files"][0]["sha256"], m["files"][0]["sha256"],
        "{m}"
    );
    let original = std::fs::read(&out).unwrap();

    // The same size, other bytes.
    rewrite_same_size(&out, b"sha256:");
    assert_eq!(std::fs::read(&out).unwrap().len(), original.len());
    let o = verify(&out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(stdout(&o).contains("sha256 differs"), "{}", show(&o));
    std::fs::write(&out, &original).unwrap();

    // An l the rows do not achieve.
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut forged = m.clone();
    let l = forged["certificate"]["l_achieved"][0]["distinct_l"]
        .as_u64()
        .unwrap();
    forged["certificate"]["l_achieved"][0]["distinct_l"] = serde_json::json!(l + 7);
    std::fs::write(&manifest, serde_json::to_vec(&forged).unwrap()).unwrap();
    let o = verify(&out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("-diverse, the certificate says"),
        "{}",
        show(&o)
    );
    std::fs::write(&manifest, &text).unwrap();

    // A certificate of another job (another seed).
    let o = verify(&out, &["algorithm.seed=7"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(stdout(&o).contains("another job"), "{}", show(&o));

    // A footer whose claims were edited: the file rewritten with the same
    // rows and k_achieved and l_achieved inflated (the manifest's hash
    // catches the rewrite; the footer check names the claims).
    let claims = parquet_metadata(original.clone());
    assert!(
        claims.iter().any(|(k, _)| k == "kanon.k_achieved"),
        "{claims:?}"
    );
    let forged: Vec<parquet::file::metadata::KeyValue> = claims
        .iter()
        .map(|(k, v)| {
            let v = match k.as_str() {
                "kanon.k_achieved" => "500".to_string(),
                k if k.starts_with("kanon.l_achieved.") => {
                    "{\"distinct_l\":9,\"entropy_l\":9.0}".to_string()
                }
                _ => v.clone(),
            };
            parquet::file::metadata::KeyValue::new(k.clone(), v)
        })
        .collect();
    let rows = read_parquet(&out);
    write_parquet_with(
        &out,
        &[rows],
        Some(
            parquet::file::properties::WriterProperties::builder()
                .set_key_value_metadata(Some(forged))
                .build(),
        ),
    );
    let o = verify(&out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("its footer claims kanon.k_achieved = 500"),
        "{}",
        show(&o)
    );
    assert!(
        stdout(&o).contains("kanon.l_achieved.salary-class"),
        "{}",
        show(&o)
    );
    std::fs::write(&out, &original).unwrap();
    let o = verify(&out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("footers hold"), "{}", show(&o));

    // The manifest removed.
    std::fs::remove_file(&manifest).unwrap();
    let o = verify(&out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(stdout(&o).contains("is missing"), "{}", show(&o));
}
