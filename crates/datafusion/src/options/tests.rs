//! Tests of the options of anonymize() and kanon_risk().

use super::*;

#[test]
fn inline_toml_with_shorthands() {
    let job = job_from_options(
        r#"k = 3, qi = ["age", "zip"], sensitive = "disease", algorithm = "datafly", seed = 7"#,
        "anonymize",
        &FileAccess::default(),
    )
    .unwrap();
    let s = job.spec();
    assert_eq!(s.privacy.k, 3);
    assert_eq!(s.algorithm.name, "datafly");
    assert_eq!(s.algorithm.seed, 7);
    assert_eq!(s.quasi_identifiers().count(), 2);
    assert_eq!(s.sensitive().next().unwrap().name, "disease");
}

#[test]
fn json_and_multi_line_toml() {
    let json = job_from_options(
        r#"{"privacy": {"k": 4}, "attributes": [{"name": "age", "role": "qi"}]}"#,
        "anonymize",
        &FileAccess::default(),
    )
    .unwrap();
    let toml = job_from_options(
        "[privacy]\nk = 4\n[[attributes]]\nname = \"age\"\nrole = \"qi\"\n",
        "anonymize",
        &FileAccess::default(),
    )
    .unwrap();
    assert_eq!(json.settings(), toml.settings());
    assert_eq!(json.spec().privacy.k, 4);
}

#[test]
fn config_file_is_loaded_then_overridden() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cfg = root.join("configs/adult.toml");
    let repo = FileAccess::new(std::slice::from_ref(&root)).unwrap();
    let job = job_from_options(
        &format!(
            r#"config = "{}", k = 5, algorithm.name = "datafly", privacy.suppression_limit = 0.01, weaken_privacy = true"#,
            cfg.display()
        ),
        "anonymize",
        &repo,
    )
    .unwrap();
    assert_eq!(job.spec().privacy.k, 5);
    assert_eq!(job.spec().privacy.suppression_limit, Some(0.01));
    assert_eq!(job.spec().algorithm.name, "datafly");
    assert_eq!(job.spec().algorithm.seed, 1);
    assert_eq!(job.spec().quasi_identifiers().count(), 8);
    assert_eq!(job.hierarchies().len(), 7);
    let json = job.settings().to_json().unwrap();
    assert_eq!(
        &AnonymizeSettings::from_json(&json).unwrap(),
        job.settings()
    );
}

#[test]
fn errors_name_the_option() {
    let e = job_from_options(
        "k = 3, qi = [\"a\"], colour = 1",
        "anonymize",
        &FileAccess::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("unknown field `colour`"), "{e}");
    let e = job_from_options("k = ", "anonymize", &FileAccess::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not valid TOML key/values"), "{e}");
    let e = job_from_options("k = 0, qi = \"a\"", "anonymize", &FileAccess::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("privacy.k"), "{e}");
    let e = job_from_options(
        "config = \"nope.toml\"",
        "anonymize",
        &FileAccess::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cannot read job file nope.toml"), "{e}");
}

#[test]
fn files_outside_the_allowed_directories_are_refused() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let configs = FileAccess::new(&[root.join("configs")]).unwrap();
    let data = FileAccess::new(&[root.join("data")]).unwrap();
    let cfg = root.join("configs/adult.toml");
    let opts = format!(r#"config = "{}""#, cfg.display());
    // The job file is allowed, its hierarchies (under data/) are not.
    let e = job_from_options(&opts, "anonymize", &configs)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("option `attributes.age.hierarchy`") || e.contains(".hierarchy`) is outside"),
        "{e}"
    );
    assert!(
        e.contains("--allow-dir") && e.contains("register_with"),
        "{e}"
    );
    // `..` and a symbolic link do not escape.
    let sneaky = root.join("data/../configs/adult.toml");
    let e = job_from_options(
        &format!(r#"config = "{}""#, sneaky.display()),
        "anonymize",
        &data,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("option `config`") && e.contains("outside"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("link.toml");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&cfg, &link).unwrap();
        let inside = FileAccess::new(&[dir.path().to_path_buf()]).unwrap();
        let e = job_from_options(
            &format!(r#"config = "{}""#, link.display()),
            "anonymize",
            &inside,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("option `config`") && e.contains("outside"),
            "{e}"
        );
    }
    // A missing file outside says the same as an existing one.
    let e = job_from_options(r#"config = "/nonexistent/x.toml""#, "anonymize", &data)
        .unwrap_err()
        .to_string();
    assert!(e.contains("outside"), "{e}");
    // Both allowed: fine.
    let both = FileAccess::new(&[root.join("configs"), root.join("data")]).unwrap();
    job_from_options(&opts, "anonymize", &both).unwrap();
    assert!(FileAccess::new(&[root.join("no-such-dir")]).is_err());
}

/// Issue 32, item 10: SQL options may not weaken the `config` job file's
/// privacy without `weaken_privacy = true`, as on the command line; a
/// population table, which SQL never reads, is refused instead of ignored.
#[test]
fn options_may_not_weaken_the_job_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cfg = root.join("configs/adult.toml");
    let repo = FileAccess::new(std::slice::from_ref(&root)).unwrap();
    let call = |extra: &str| {
        job_from_options(
            &format!(r#"config = "{}", {extra}"#, cfg.display()),
            "anonymize",
            &repo,
        )
    };
    for weaker in [
        "k = 2",
        "privacy.suppression_limit = 0.5",
        r#"sensitive = "occupation""#,
        r#"unlisted = "insensitive""#,
    ] {
        let err = call(weaker).unwrap_err().to_string();
        assert!(
            err.contains("would weaken the privacy") && err.contains("weaken_privacy = true"),
            "{weaker}: {err}"
        );
        call(&format!("{weaker}, weaken_privacy = true")).unwrap();
    }
    // Stronger is fine.
    assert_eq!(call("k = 20").unwrap().spec().privacy.k, 20);
    let err = call(r#"risk.population = "/elsewhere.parquet""#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("risk.population"), "{err}");
    // No privacy model at all is no default k = 2.
    let err = job_from_options(r#"qi = ["age"]"#, "anonymize", &FileAccess::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("privacy.k"), "{err}");
}
