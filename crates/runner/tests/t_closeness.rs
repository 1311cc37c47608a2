//! t-closeness through the command line: a job whose sensitive attribute
//! has a hierarchy (hierarchical ground distance) is anonymised, passes
//! `kanon verify` (which reads the sensitive hierarchy too), and its report
//! shows the distance achieved; a stricter t on the same release fails
//! `kanon verify`.

mod common;
use common::*;

/// The Adult job with occupation as the sensitive attribute (its hierarchy
/// gives the ground distance) and t-closeness at `t`.
fn job(dir: &std::path::Path, t: &str) -> std::path::PathBuf {
    adult_job(dir, |s| {
        s.replace(
            "name = \"occupation\"\nrole = \"quasi-identifier\"",
            "name = \"occupation\"\nrole = \"sensitive\"",
        )
        .replace(
            "name = \"salary-class\"\nrole = \"sensitive\"",
            "name = \"salary-class\"\nrole = \"insensitive\"",
        )
        .replace(
            "[privacy]\nk = 10",
            &format!("[privacy]\nk = 5\n\n[privacy.models.t-closeness]\nt = {t}"),
        )
    })
}

#[test]
fn hierarchical_t_closeness_releases_verify_and_report_the_distance() {
    let dir = tempfile::tempdir().unwrap();
    let loose = job(dir.path(), "0.25");
    let release = dir.path().join("release.parquet");
    let report = dir.path().join("report.html");
    let out = run(
        anonymize_cmd(&loose, &root().join("data/adult/adult.parquet"), &release)
            .arg("--report")
            .arg(&report),
    );
    assert!(out.status.success(), "{}", show(&out));
    assert!(stdout(&out).contains("t-closeness (t = 0.25, hierarchical distance) on `occupation`"));

    let verify = |job: &std::path::Path| {
        run(kanon()
            .args(["verify", "-c"])
            .arg(job)
            .arg("-i")
            .arg(&release))
    };
    let ok = verify(&loose);
    assert!(ok.status.success(), "{}", show(&ok));

    let page = std::fs::read_to_string(&report).unwrap();
    let achieved = page
        .split("largest distance ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|d| d.parse::<f64>().ok())
        .expect("the report shows the largest distance");
    assert!(achieved <= 0.25 && achieved > 0.0, "{achieved}");

    // The same release against a t below what it achieves.
    let strict_dir = tempfile::tempdir().unwrap();
    let strict = job(strict_dir.path(), &format!("{}", achieved / 2.0));
    let refused = verify(&strict);
    assert_eq!(refused.status.code(), Some(1), "{}", show(&refused));
    assert!(
        stdout(&refused).contains("violate t-closeness"),
        "{}",
        show(&refused)
    );
}
