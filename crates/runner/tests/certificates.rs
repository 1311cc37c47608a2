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

/// Item 3, optional signing: with `KANON_SIGNING_KEY`, the certificate (a
/// Parquet release's manifest, a Delta commit's info) is signed with
/// Ed25519; `kanon verify --trusted-key` passes only releases whose
/// certificates that key signed and nobody changed since. Before, there
/// was no way to tell who wrote a certificate.
#[test]
fn signed_certificates_verify_only_with_the_trusted_key() {
    const SECRET: &str = "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddccbbaa99887766554433221100";
    // RFC 8032's first test public key: valid, and not ours.
    const OTHER: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let signed = |out: &Path, sets: &[&str]| {
        let mut c = kanon();
        c.args(["anonymize", "-c", "configs/adult.toml", "-o"])
            .arg(out)
            .env("KANON_SIGNING_KEY", SECRET);
        for s in sets {
            c.args(["--set", s]);
        }
        run(&mut c)
    };
    let out = d.join("s.parquet");
    let o = signed(&out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(!stdout(&o).contains(SECRET) && !stderr(&o).contains(SECRET));
    let public = stdout(&o)
        .split("signed by Ed25519 key ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("the summary names the public key")
        .to_string();
    assert_eq!(public.len(), 64);
    let verify_with = |release: &Path, key: &str| {
        run(kanon()
            .args([
                "verify",
                "-c",
                "configs/adult.toml",
                "--trusted-key",
                key,
                "-i",
            ])
            .arg(release))
    };
    let o = verify_with(&out, &public);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = verify_with(&out, OTHER);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("not by the trusted key"),
        "{}",
        show(&o)
    );
    // The key may come from a file.
    let key_file = d.join("trusted.pub");
    std::fs::write(&key_file, format!("{public}\n")).unwrap();
    let o = verify_with(&out, key_file.to_str().unwrap());
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // A signed certificate changed afterwards (a field no other check
    // reads).
    let manifest = d.join("_s.parquet.kanon_release.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
    m["certificate"]["kanon_version"] = serde_json::json!("9.9.9");
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let o = verify_with(&out, &public);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("changed after it was signed"),
        "{}",
        show(&o)
    );
    std::fs::write(&manifest, &text).unwrap();
    // An unsigned release fails with a trusted key.
    let unsigned = d.join("u.parquet");
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-q", "-o"])
        .arg(&unsigned));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = verify_with(&unsigned, &public);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(stdout(&o).contains("not signed"), "{}", show(&o));
    // A Delta commit's certificate is signed the same way.
    let table = d.join("t");
    let o = signed(&table, &["output.format=delta"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = verify_with(&table, &public);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = verify_with(&table, OTHER);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    // A malformed key stops the job before any work, naming the variable.
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-o"])
        .arg(d.join("bad.parquet"))
        .env("KANON_SIGNING_KEY", "not-a-key"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("KANON_SIGNING_KEY"), "{}", show(&o));
    assert!(!d.join("bad.parquet").exists());
}
