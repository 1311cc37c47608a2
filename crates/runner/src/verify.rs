//! `kanon verify`: re-check a published release against the job's privacy
//! model, by the published labels alone. Exit 0 when it holds, 1 when not.
//!
//! The release may be a file, a directory or glob of parts, an s3://
//! object or prefix, or a Delta table (at its latest version or
//! `--version`); only its QI and sensitive columns are read. On a Delta
//! table the privacy certificate of every kanon commit still in the table is
//! re-checked too: the rows that commit added must achieve what its
//! certificate claims.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use kanon_engine::encode::QiTable;
use kanon_engine::privacy::Privacy;
use kanon_engine::spec::InputSpec;

use crate::{exit, JobArgs};
use kanon_io::config::JobFile;
use kanon_io::dataset::Dataset;
use kanon_io::ops::{check_interrupt, Ui};
use kanon_io::release_check::{check_presence, check_with_labels, Checked};
use kanon_io::storage::{Location, Storage};

/// Arguments of `kanon verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    job: JobArgs,
    /// The release to check (Parquet or CSV; a path, directory, glob or
    /// s3:// URL).
    #[arg(long, short = 'i')]
    input: String,
    /// The version of a Delta table to check (default its latest); its
    /// certificates are re-checked against the data of their commits too.
    #[arg(long, value_name = "N")]
    version: Option<i64>,
    /// Fail unless every certificate of the release is signed by this
    /// Ed25519 public key (64 hex digits, or a file holding them): the key
    /// `kanon anonymize` printed when it signed with `KANON_SIGNING_KEY`.
    #[arg(long, value_name = "HEX|FILE")]
    trusted_key: Option<String>,
}

/// Runs `kanon verify`.
pub fn run(args: &VerifyArgs, ui: &Ui) -> Result<ExitCode> {
    let job = JobFile::load(&args.job.request())?;
    let trusted = args
        .trusted_key
        .as_deref()
        .map(kanon_io::signing::trusted_key)
        .transpose()?;
    let privacy = Privacy::from_spec(job.spec())?;
    let storage = Storage::new(&job.spec().storage);
    let location = Location::parse(&args.input)?;
    let delta = args.version.is_some() || kanon_io::dataset::is_delta_table(&storage, &location)?;
    let dataset = match delta {
        true => Dataset::open_delta(&storage, &location, args.version, true)?,
        false => Dataset::open(&storage, &location, &InputSpec::default())?,
    };
    let label = match dataset.delta_version {
        Some(v) => format!("{location} (Delta version {v})"),
        None => location.to_string(),
    };
    let mut verified = None;
    let (mut checked, labels) = check_with_labels(&job, &privacy, &storage, &dataset, &label, ui)?;
    // δ-presence is a property of the release and the population together:
    // the labels alone cannot show it.
    let mut presence_line = None;
    if let (Some(presence), Checked::Holds(_), Some(release)) =
        (privacy.presence(), &checked, labels.as_ref())
    {
        let population = job.input(None).context(
            "delta-presence is verified against the population the release was drawn from: set `input.path` in the job to it",
        )?;
        match check_presence(&job, presence, &storage, &population, release, ui)? {
            Ok(line) => presence_line = Some(line),
            Err(problem) => checked = Checked::Fails(problem),
        }
    }
    let mut failed = match checked {
        Checked::Holds(v) => {
            if !ui.quiet {
                outln!(
                    "{label}: satisfies {} ({} rows in {} classes, smallest {})",
                    privacy.describe(),
                    v.published_rows,
                    v.classes,
                    v.smallest_class
                );
            }
            if let (Some(line), false) = (&presence_line, ui.quiet) {
                outln!("  population recounted: {line}");
            }
            tracing::info!(release = %label, rows = v.published_rows, classes = v.classes, smallest = v.smallest_class, "release verified");
            verified = Some(v);
            false
        }
        Checked::Fails(msg) => {
            outln!("{label}: does NOT satisfy the job: {msg}");
            tracing::warn!(release = %label, "release does not satisfy the job");
            true
        }
    };
    if let Some(version) = dataset.delta_version {
        failed |=
            !kanon_io::delta::check_certificates(&storage, &job, &location, version, trusted, ui)?;
        failed |= !check_series(&storage, &job, &location, version, ui)?;
    } else {
        let found = Found {
            verified: verified.as_ref(),
            labels: labels.as_ref(),
        };
        failed |= !check_manifest(&storage, &job, &location, &dataset, found, trusted, ui)?;
        failed |= !check_footers(&job, &dataset, found, ui);
    }
    Ok(match failed {
        true => ExitCode::from(exit::VERIFY_FAILED),
        false => ExitCode::SUCCESS,
    })
}

/// Checks what the footers of a Parquet release claim (`kanon.*` keys,
/// written by `kanon anonymize`) against what its rows achieve: k and l
/// per sensitive column, the rows published, and the job's privacy
/// settings. A footer whose claims were edited, or a file of another job's
/// release, fails. Prints each mismatch, naming the file and the key;
/// returns whether every claim held.
fn check_footers(job: &JobFile, dataset: &Dataset, found: Found<'_>, ui: &Ui) -> bool {
    let footers = dataset.kanon_footers();
    if footers.is_empty() {
        return true;
    }
    let privacy = serde_json::to_value(&job.spec().privacy).ok();
    let diversity = found
        .labels
        .map(kanon_engine::metrics::release_diversity)
        .unwrap_or_default();
    let mut problems = Vec::new();
    for (file, claims) in &footers {
        let claim = |key: &str| {
            claims
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let mut differs = |key: &str, claimed: &str, found: String| {
            problems.push(format!(
                "file {file}: its footer claims {key} = {claimed}, the rows achieve {found}"
            ));
        };
        if let Some(v) = found.verified {
            if let Some(k) = claim("kanon.k_achieved") {
                if k != v.smallest_class.to_string() {
                    differs("kanon.k_achieved", k, v.smallest_class.to_string());
                }
            }
            if let (Some(rows_in), Some(suppressed)) =
                (claim("kanon.rows_in"), claim("kanon.rows_suppressed"))
            {
                let published = rows_in
                    .parse::<u64>()
                    .ok()
                    .zip(suppressed.parse::<u64>().ok());
                if published.map(|(i, s)| i.saturating_sub(s)) != Some(v.published_rows as u64) {
                    differs(
                        "kanon.rows_in - kanon.rows_suppressed",
                        &format!("{rows_in} - {suppressed}"),
                        format!("{} rows", v.published_rows),
                    );
                }
            }
        }
        for (key, value) in claims {
            let Some(column) = key.strip_prefix("kanon.l_achieved.") else {
                continue;
            };
            let claimed = serde_json::from_str::<serde_json::Value>(value)
                .ok()
                .and_then(|j| j["distinct_l"].as_u64());
            match diversity.iter().find(|d| d.name == column) {
                Some(d) if claimed == Some(d.distinct_l as u64) => {}
                Some(d) => differs(key, value, format!("distinct l {}", d.distinct_l)),
                None if found.labels.is_some() => {
                    differs(key, value, "no such sensitive column".to_string())
                }
                None => {}
            }
        }
        if let (Some(claimed), Some(job_privacy)) = (claim("kanon.privacy"), &privacy) {
            let same =
                serde_json::from_str::<serde_json::Value>(claimed).is_ok_and(|c| &c == job_privacy);
            if !same {
                problems.push(format!(
                    "file {file}: its footer's kanon.privacy is not this job's privacy settings (a release of another job, or an edited footer): verify it with the job that made it"
                ));
            }
        }
    }
    if problems.is_empty() {
        if !ui.quiet {
            outln!(
                "  footers hold: the claims of {} file(s) match the rows",
                footers.len()
            );
        }
        return true;
    }
    for p in &problems {
        outln!("  footer: {p}");
    }
    false
}

/// Checks a Delta table's readable versions up to `version` as one
/// release, when the job names `output.history` (issue 31, item 2): prints
/// what a reader holding them all would learn beyond the job. Returns
/// whether the series held.
///
/// # Errors
/// A history that cannot be read or that misses readable versions (exit 3).
fn check_series(
    storage: &Storage,
    job: &JobFile,
    location: &Location,
    version: i64,
    ui: &Ui,
) -> Result<bool> {
    use kanon_io::delta::series::{check_table, Policy};
    let table = kanon_io::delta::Table::at(storage, location)?;
    let policy = Policy::of(job, location)?;
    let Some((breaches, versions)) = check_table(storage, &table, &policy, version)? else {
        if matches!(policy, Policy::Refused) && !ui.quiet {
            outln!("  the table's versions are not checked as one release (the job names no output.history)");
        }
        return Ok(true);
    };
    if breaches.is_empty() {
        if !ui.quiet {
            outln!("  history: the {versions} readable version(s) up to {version} hold as one release (no person relabelled, every group added, removed or changed between them at least k people)");
        }
        return Ok(true);
    }
    for b in &breaches {
        outln!("  history: {b}");
    }
    Ok(false)
}

/// What the rows of a release achieve, when they satisfy the job.
#[derive(Clone, Copy)]
struct Found<'a> {
    verified: Option<&'a kanon_engine::verify::Verified>,
    /// The release's labels, encoded.
    labels: Option<&'a QiTable>,
}

/// Checks a Parquet release against its manifest, when it has one: the
/// files it lists are the release's files with their sizes, and the
/// certificate's claims are what the rows achieve (`verified`, when they
/// satisfy the job). Prints what it found; returns whether it held.
///
/// # Errors
/// A manifest that cannot be read or parsed.
#[allow(clippy::too_many_arguments)]
fn check_manifest(
    storage: &Storage,
    job: &JobFile,
    location: &Location,
    dataset: &Dataset,
    found: Found<'_>,
    trusted: Option<ed25519_dalek::VerifyingKey>,
    ui: &Ui,
) -> Result<bool> {
    let Found { verified, labels } = found;
    let split = match location {
        Location::Local(p) => p.is_dir(),
        Location::S3 { key, .. } => key.is_empty() || key.ends_with('/') || dataset.n_files() > 1,
    };
    let at = kanon_io::release::manifest_location(location, split);
    if storage.head(&at)?.is_none() {
        // A release kanon wrote always has its manifest: one without it was
        // copied in part, or had its certificate removed.
        if trusted.is_some() {
            outln!(
                "  manifest {at} is missing: --trusted-key asks for a signed certificate, and there is none"
            );
            return Ok(false);
        }
        if dataset.written_by_kanon() {
            outln!(
                "  manifest {at} is missing, but kanon wrote the release (its files carry kanon's metadata): a partial copy, or a certificate removed; copy the release with its manifest"
            );
            return Ok(false);
        }
        if !ui.quiet {
            outln!("  no manifest ({at} is missing): the files were not checked against one");
        }
        return Ok(true);
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut storage.open_read(&at)?, &mut bytes)
        .with_context(|| format!("cannot read the manifest {at}"))?;
    let manifest: kanon_io::release::Manifest = serde_json::from_slice(&bytes)
        .with_context(|| format!("{at} is not a kanon release manifest"))?;
    let mut listed: Vec<(String, u64)> = manifest
        .files
        .iter()
        .map(|f| (location_of(location, split, &f.name).to_string(), f.bytes))
        .collect();
    let mut found: Vec<(String, u64)> = dataset
        .file_sizes()
        .into_iter()
        .map(|(l, size)| (l.to_string(), size))
        .collect();
    listed.sort();
    found.sort();
    let mut problems = Vec::new();
    if listed != found {
        problems.push(format!(
            "its files are not the {} file(s) the manifest lists with their sizes (missing, extra, or of another size: a partial copy or a changed release)",
            manifest.files.len()
        ));
    }
    // Same names and sizes are not the same bytes: a file whose values
    // were replaced keeps its size often enough.
    if problems.is_empty() {
        for f in &manifest.files {
            let Some(want) = &f.sha256 else { continue };
            check_interrupt()?;
            let at = location_of(location, split, &f.name);
            if &kanon_io::certificate::file_sha256(storage, &at)? != want {
                problems.push(format!(
                    "file {} is not the file the manifest lists: its sha256 differs (rewritten after it was published)",
                    f.name
                ));
            }
        }
    }
    if let Some(v) = verified {
        problems.extend(kanon_io::certificate::discrepancies(
            v,
            &manifest.certificate.verified,
        ));
        if let Some(table) = labels {
            problems.extend(kanon_io::certificate::diversity_discrepancies(
                &kanon_engine::metrics::release_diversity(table),
                &manifest.certificate.l_achieved,
            ));
        }
    }
    if let Some(key) = &trusted {
        if let Err(why) = kanon_io::signing::check(&manifest.certificate, key) {
            problems.push(why);
        }
    }
    if manifest.certificate.job_hash != kanon_io::certificate::job_hash(job) {
        problems.push(
            "its certificate was made by another job (the job hash differs from this job's): verify it with the job that made it"
                .to_string(),
        );
    }
    if problems.is_empty() {
        if !ui.quiet {
            outln!(
                "  manifest holds: {} file(s), {} rows, the certificate's figures match (kanon {}, {} seed {})",
                manifest.files.len(),
                manifest.rows,
                manifest.certificate.kanon_version,
                manifest.certificate.algorithm,
                manifest.certificate.seed
            );
        }
        return Ok(true);
    }
    outln!(
        "  manifest {at} does NOT match the release: {}",
        problems.join("; ")
    );
    Ok(false)
}

fn location_of(release: &Location, split: bool, name: &str) -> Location {
    match split {
        true => release.join(name),
        false => release.clone(),
    }
}
