//! Tests of job loading and overrides.

use super::*;
use kanon_engine::spec::MissingSensitive;

fn args(config: &Path) -> JobRequest {
    JobRequest::file(config.to_path_buf(), Vec::new())
}

fn job_file(dir: &Path) -> PathBuf {
    let p = dir.join("job.toml");
    std::fs::write(
        &p,
        "[privacy]\nk = 10\n[algorithm]\nname = \"mondrian\"\n[[attributes]]\nname = \"age\"\nrole = \"qi\"\n",
    )
    .unwrap();
    p
}

#[test]
fn overrides_may_not_weaken_the_job_files_privacy() {
    let dir = tempfile::tempdir().unwrap();
    let p = job_file(dir.path());
    let env = vec![("KANON_PRIVACY_K".to_string(), "1".to_string())];
    let err = JobFile::load_with_env(&args(&p), env.clone().into_iter())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("KANON_PRIVACY_K")
            && err.contains("from 10 to 1")
            && err.contains("--weaken-privacy"),
        "{err}"
    );
    for (key, value) in [
        ("KANON_PRIVACY_SUPPRESSION_LIMIT", "0.5"),
        ("KANON_PRIVACY_K", "9"),
    ] {
        let env = vec![(key.to_string(), value.to_string())];
        assert!(
            JobFile::load_with_env(&args(&p), env.into_iter()).is_err(),
            "{key}={value}"
        );
    }
    let mut a = args(&p);
    a.set = vec!["privacy.k=3".into()];
    assert!(JobFile::load_with_env(&a, std::iter::empty()).is_err());
    // Stronger is always fine.
    let env = vec![("KANON_PRIVACY_K".to_string(), "12".to_string())];
    assert_eq!(
        JobFile::load_with_env(&args(&p), env.into_iter())
            .unwrap()
            .spec()
            .privacy
            .k,
        12
    );
    // k < 2 stays an error even on purpose.
    let mut a = args(&p);
    a.weaken_privacy = true;
    a.flags = vec![Override::parse("privacy.k", "1", "--k")];
    let err = JobFile::load_with_env(&a, std::iter::empty())
        .unwrap_err()
        .to_string();
    assert!(err.contains("k >= 2"), "{err}");
}

#[test]
fn weakenings_name_every_weaker_setting() {
    let file: JobSpec = toml::from_str(
        "[privacy]\nk = 5\nl = 3\nsuppression_limit = 0.01\nrequirements = [{ shield = [\"age\"], k = 8 }]\n[[attributes]]\nname = \"age\"\nrole = \"qi\"\n[[attributes]]\nname = \"s\"\nrole = \"sensitive\"\n",
    )
    .unwrap();
    assert!(file.weakenings(&file).is_empty());
    let mut weaker = file.clone();
    weaker.privacy.k = 4;
    weaker.privacy.l = Some(2);
    weaker.privacy.suppression_limit = Some(0.1);
    weaker.privacy.requirements.clear();
    weaker.privacy.missing_sensitive = MissingSensitive::Value;
    let w = file.weakenings(&weaker);
    assert_eq!(w.len(), 5, "{w:?}");
    assert!(w.iter().any(|w| w.contains("missing_sensitive")), "{w:?}");
    let mut stronger = file.clone();
    stronger.privacy.k = 9;
    stronger.privacy.requirements.clear();
    assert!(
        file.weakenings(&stronger).is_empty(),
        "k 9 covers the requirement of 8"
    );
    // A registered model the file names may be neither dropped nor changed.
    let mut with_model = file.clone();
    with_model.privacy.models.insert(
        "entropy-l-diversity".into(),
        serde_json::json!({ "column": "s", "l": 3 }),
    );
    let mut changed = with_model.clone();
    changed.privacy.models.insert(
        "entropy-l-diversity".into(),
        serde_json::json!({ "column": "s", "l": 2 }),
    );
    assert_eq!(with_model.weakenings(&changed).len(), 1);
    assert_eq!(with_model.weakenings(&file).len(), 1);
    assert!(file.weakenings(&with_model).is_empty());
}

#[test]
fn environment_then_command_line_override_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = job_file(dir.path());
    let env = vec![
        ("KANON_PRIVACY_K".to_string(), "5".to_string()),
        (
            "KANON_PRIVACY_SUPPRESSION_LIMIT".to_string(),
            "0.02".to_string(),
        ),
        (
            "KANON_STORAGE_ENDPOINT".to_string(),
            "http://127.0.0.1:1".to_string(),
        ),
        ("KANON_TEST_BARRIER".to_string(), "ignored".to_string()),
        ("OTHER".to_string(), "x".to_string()),
    ];
    let mut weaken = args(&p);
    weaken.weaken_privacy = true;
    let job = JobFile::load_with_env(&weaken, env.clone().into_iter()).unwrap();
    assert_eq!(job.spec().privacy.k, 5);
    assert_eq!(job.spec().privacy.suppression_limit, Some(0.02));
    assert_eq!(
        job.spec().storage.endpoint.as_deref(),
        Some("http://127.0.0.1:1")
    );
    let mut a = args(&p);
    a.weaken_privacy = true;
    a.flags = vec![Override::parse("privacy.k", "7", "--k")];
    a.set = vec!["algorithm.seed=42".into(), "output.path=out.parquet".into()];
    let job = JobFile::load_with_env(&a, env.into_iter()).unwrap();
    assert_eq!(job.spec().privacy.k, 7);
    assert_eq!(job.spec().algorithm.seed, 42);
    assert_eq!(job.spec().output.path.as_deref(), Some("out.parquet"));
}

#[test]
fn bad_overrides_name_their_source() {
    let dir = tempfile::tempdir().unwrap();
    let p = job_file(dir.path());
    let env = vec![("KANON_PRIVACY_KK".to_string(), "5".to_string())];
    let err = JobFile::load_with_env(&args(&p), env.into_iter())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("KANON_PRIVACY_KK") && err.contains("kk"),
        "{err}"
    );
    let env = vec![("KANON_PRIVACY_K".to_string(), "many".to_string())];
    let err = JobFile::load_with_env(&args(&p), env.into_iter())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("KANON_PRIVACY_K") && err.contains("privacy.k"),
        "{err}"
    );
    let mut a = args(&p);
    a.set = vec!["k=5".into()];
    let err = JobFile::load_with_env(&a, std::iter::empty())
        .unwrap_err()
        .to_string();
    assert!(err.contains("privacy.k"), "{err}");
}

#[test]
fn values_are_toml_or_strings() {
    let toml_value = |v: &str| Override::parse("a.b", v, "--set").value;
    assert_eq!(toml_value("5"), toml::Value::Integer(5));
    assert_eq!(toml_value("true"), toml::Value::Boolean(true));
    assert_eq!(
        toml_value("mondrian"),
        toml::Value::String("mondrian".into())
    );
    assert_eq!(
        toml_value("2024-01-01"),
        toml::Value::String("2024-01-01".into())
    );
    assert_eq!(toml_value(";"), toml::Value::String(";".into()));
    assert!(matches!(toml_value("[5, 10]"), toml::Value::Array(_)));
}

/// Issue 32, item 9: a malformed `KANON_*` name is refused, naming the
/// override it most likely meant; a `key_env` the job names is not.
#[test]
fn malformed_kanon_variables_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = job_file(dir.path());
    let env = vec![("KANON_PRIVACYK".to_string(), "50".to_string())];
    let err = JobFile::load_with_env(&args(&p), env.into_iter())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`KANON_PRIVACYK`") && err.contains("did you mean `KANON_PRIVACY_K`"),
        "{err}"
    );
    assert!(!err.contains("50"), "the value is not shown: {err}");
    // kanon-job's own variables, and the test hooks, are no settings.
    let env = vec![
        ("KANON_JOB".to_string(), "/etc/kanon/job.toml".to_string()),
        ("KANON_OUTPUT".to_string(), "s3://b/k/".to_string()),
        ("KANON_TEST_BARRIER".to_string(), "x".to_string()),
    ];
    JobFile::load_with_env(&args(&p), env.into_iter()).unwrap();
    // A pseudonym key named by the job.
    std::fs::write(
        &p,
        "[privacy]\nk = 10\n[[attributes]]\nname = \"age\"\nrole = \"qi\"\n[[attributes]]\nname = \"id\"\nrole = \"pseudonymised\"\nkey_env = \"KANON_ID_KEY\"\n",
    )
    .unwrap();
    let env = vec![("KANON_ID_KEY".to_string(), "k".repeat(32))];
    JobFile::load_with_env(&args(&p), env.into_iter()).unwrap();
}

/// Issue 32, items 1 and 8: a forgotten `role`, a generalisation on a
/// column that is not generalised, a job without `[privacy]`, and `l = 1`
/// are refused, each naming the setting.
#[test]
fn roles_and_privacy_are_never_defaulted() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("job.toml");
    let load = |text: &str| {
        std::fs::write(&p, text).unwrap();
        JobFile::load_with_env(&args(&p), std::iter::empty()).map(|_| ())
    };
    let qi = "[[attributes]]\nname = \"age\"\nrole = \"qi\"\n";
    let err = load(&format!(
        "[privacy]\nk = 5\n{qi}[[attributes]]\nname = \"zip\"\nmasking = true\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("`zip` has no `role`") && err.contains("quasi-identifier"),
        "{err}"
    );
    let err = load(&format!(
        "[privacy]\nk = 5\n{qi}[[attributes]]\nname = \"zip\"\nrole = \"insensitive\"\nmasking = true\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("attributes.zip.masking") && err.contains("role = \"quasi-identifier\""),
        "{err}"
    );
    let err = load(qi).unwrap_err().to_string();
    assert!(
        err.contains("privacy.k") && err.contains("no default k"),
        "{err}"
    );
    let err = load(&format!(
        "[privacy]\nk = 5\nl = 1\n{qi}[[attributes]]\nname = \"d\"\nrole = \"sensitive\"\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("privacy.l") && err.contains("l = 1"), "{err}");
    // A sensitive column may name a hierarchy (t-closeness' ground distance).
    load(&format!(
        "[privacy]\nk = 5\n{qi}[[attributes]]\nname = \"d\"\nrole = \"sensitive\"\n"
    ))
    .unwrap();
}

/// Issue 33, item 2: `--set` names an attribute by its name, as SQL's role
/// options do (one loader, kanon_engine::job::overrides), and a role that
/// publishes more is a weakening refused unless asked for on purpose.
#[test]
fn set_names_attributes_and_their_roles_are_held_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = job_file(dir.path());
    let mut a = args(&p);
    a.set = vec!["attributes.age.role=insensitive".into()];
    let err = JobFile::load_with_env(&a, std::iter::empty())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("attributes.age.role (--set)") && err.contains("--weaken-privacy"),
        "{err}"
    );
    // A new attribute, named with a dot, is added with its role.
    a.set = vec!["attributes.visit.date.role=identifying".into()];
    let job = JobFile::load_with_env(&a, std::iter::empty());
    // `visit.date` is two keys on the command line: attribute `visit`,
    // setting `date.role`, which no attribute has.
    assert!(job.is_err());
    a.set = vec!["attributes.zip.role=identifying".into()];
    let job = JobFile::load_with_env(&a, std::iter::empty()).unwrap();
    let zip = job
        .spec()
        .attributes
        .iter()
        .find(|a| a.name == "zip")
        .unwrap();
    assert_eq!(zip.role, kanon_engine::spec::Role::Identifying);
    a.set = vec![
        "attributes.age.role=insensitive".into(),
        "attributes.zip.role=qi".into(),
    ];
    a.weaken_privacy = true;
    let job = JobFile::load_with_env(&a, std::iter::empty()).unwrap();
    assert_eq!(
        job.spec().attributes[0].role,
        kanon_engine::spec::Role::Insensitive
    );
}
