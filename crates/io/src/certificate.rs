//! The privacy certificate of a release: what was asked (model and
//! parameters, algorithm and seed, the job's hash), what the verified
//! release achieves (k and l per requirement and model, rows suppressed) and
//! what it was made from (the input's fingerprint, and its table version
//! when the input is a Delta table), with the kanon version.
//!
//! One certificate is written with every release: in the commit info of a
//! Delta commit (under [`COMMIT_INFO_KEY`]), and in `_kanon_release.json`
//! beside a Parquet release, so that readers other than kanon can check a
//! release's claims. `kanon verify` re-checks it against the data.
//!
//! The certificate names attributes, never values of records.

use kanon_engine::metrics::SensitiveDiversity;
use kanon_engine::spec::JobSpec;
use kanon_engine::verify::Verified;
use kanon_engine::Anonymization;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::JobFile;

/// A certificate's signature ([`crate::signing`] makes and checks it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    /// The signer's Ed25519 public key, 64 hex digits.
    pub public_key: String,
    /// The Ed25519 signature, 128 hex digits.
    pub ed25519: String,
}

/// The key of the certificate in a Delta commit's `commitInfo`.
pub const COMMIT_INFO_KEY: &str = "kanon.certificate";

/// The certificate of one release (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Certificate {
    /// The kanon version that made the release.
    pub kanon_version: String,
    /// `sha256:` of the job: its settings after overrides and the contents
    /// of its hierarchy files ([`job_hash`]).
    pub job_hash: String,
    /// The algorithm, its parameters and its seed.
    pub algorithm: String,
    pub algorithm_params: serde_json::Value,
    pub seed: u64,
    /// The privacy model and its parameters, as the job states them.
    pub privacy: serde_json::Value,
    /// The quasi-identifiers and sensitive attributes, by name.
    pub quasi_identifiers: Vec<String>,
    pub sensitive: Vec<String>,
    /// Rows read, published, and withheld (by the algorithm and for nulls
    /// in quasi-identifiers).
    pub rows_in: u64,
    pub rows_published: u64,
    pub rows_suppressed: u64,
    /// What the verification of the released rows found: k achieved per
    /// requirement, every per-class model with what it achieves.
    pub verified: Verified,
    /// The l-diversity achieved in each sensitive column.
    pub l_achieved: Vec<LAchieved>,
    /// What the release was made from.
    pub input: InputIdentity,
    /// Every file the release published, with its rows and `sha256:`
    /// (relative to the release's directory, or to the Delta table's
    /// root): `kanon verify` recomputes the hashes, so data rewritten
    /// under the same names and sizes is caught. Empty in certificates of
    /// kanon before issue 31.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<CertifiedFile>,
    /// The Ed25519 signature of everything above, when the release was
    /// signed (`KANON_SIGNING_KEY`; [`crate::signing`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

/// One file a certificate vouches for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertifiedFile {
    /// Its path relative to the release or table.
    pub path: String,
    pub rows: u64,
    /// `sha256:` of its bytes.
    pub sha256: String,
}

/// The l-diversity achieved in one sensitive column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LAchieved {
    pub column: String,
    pub distinct_l: usize,
    pub entropy_l: f64,
}

/// The input of a release, without its location.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InputIdentity {
    /// `sha256:` of the Parquet footers or of the CSV bytes.
    pub fingerprint: Option<String>,
    /// The version of the input Delta table read.
    pub delta_version: Option<i64>,
}

impl Certificate {
    /// The certificate of a verified release of `job`.
    pub fn new(
        job: &JobFile,
        result: &Anonymization,
        verified: &Verified,
        rows_in: u64,
        input: InputIdentity,
    ) -> Certificate {
        // The labels show what was published; the partition's verification
        // also counted what was withheld (suppressed, excluded for nulls,
        // outside a δ-presence subset) and checked what the labels alone
        // cannot show (δ-presence, against the population).
        let mut verified = verified.clone();
        verified.suppressed_rows = result.verified.suppressed_rows;
        verified.excluded_rows = result.verified.excluded_rows;
        verified.outside_rows = result.verified.outside_rows;
        for m in &result.verified.models {
            if !verified.models.iter().any(|v| v.model == m.model) {
                verified.models.push(m.clone());
            }
        }
        Certificate::of(
            job,
            result.algorithm.clone(),
            &result.report.sensitive,
            &verified,
            rows_in,
            input,
        )
    }

    /// The certificate of a release kanon verified by its labels only (a
    /// SQL query's result over `anonymize()`): the l-diversity is what the
    /// published classes achieve, and every row read but not published is
    /// counted as suppressed, whether the algorithm or the query withheld
    /// it.
    pub fn of_labels(
        job: &JobFile,
        verified: &Verified,
        diversity: &[SensitiveDiversity],
        rows_in: u64,
    ) -> Certificate {
        let mut verified = verified.clone();
        verified.suppressed_rows = (rows_in as usize).saturating_sub(verified.published_rows);
        verified.excluded_rows = 0;
        Certificate::of(
            job,
            job.spec().algorithm.name.clone(),
            diversity,
            &verified,
            rows_in,
            InputIdentity::default(),
        )
    }

    /// The certificate of a release verified from its classes' counts
    /// (a release whose parts workers wrote, issue 35): `verified` counts
    /// every withheld row itself.
    pub fn of_counts(
        job: &JobFile,
        algorithm: String,
        verified: &Verified,
        rows_in: u64,
        input: InputIdentity,
    ) -> Certificate {
        Certificate::of(job, algorithm, &[], verified, rows_in, input)
    }

    fn of(
        job: &JobFile,
        algorithm: String,
        diversity: &[SensitiveDiversity],
        verified: &Verified,
        rows_in: u64,
        input: InputIdentity,
    ) -> Certificate {
        let spec = job.spec();
        let names = |it: &mut dyn Iterator<Item = &kanon_engine::spec::AttributeSpec>| {
            it.map(|a| a.name.clone()).collect::<Vec<_>>()
        };
        Certificate {
            kanon_version: env!("CARGO_PKG_VERSION").into(),
            job_hash: job_hash(job),
            algorithm,
            algorithm_params: serde_json::to_value(&spec.algorithm).unwrap_or_default(),
            seed: spec.algorithm.seed,
            privacy: serde_json::to_value(&spec.privacy).unwrap_or_default(),
            quasi_identifiers: names(&mut spec.quasi_identifiers()),
            sensitive: names(&mut spec.sensitive()),
            rows_in,
            rows_published: verified.published_rows as u64,
            rows_suppressed: (verified.suppressed_rows + verified.excluded_rows) as u64,
            verified: verified.clone(),
            l_achieved: diversity
                .iter()
                .map(|d| LAchieved {
                    column: d.name.clone(),
                    distinct_l: d.distinct_l,
                    entropy_l: d.entropy_l,
                })
                .collect(),
            input,
            files: Vec::new(),
            signature: None,
        }
    }
}

/// `sha256:` of the bytes of the file at `location`.
///
/// # Errors
/// Read failures.
pub fn file_sha256(
    storage: &crate::storage::Storage,
    location: &crate::storage::Location,
) -> anyhow::Result<String> {
    use anyhow::Context;
    let mut reader = storage.open_read(location)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut reader, &mut buf)
            .with_context(|| format!("cannot read {location}"))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("sha256:{}", hex(&h.finalize())))
}

/// How the figures a release's rows achieve (`found`) differ from those its
/// certificate claims: rows, classes, the smallest class, the k of each
/// requirement. Empty when the certificate holds.
pub fn discrepancies(found: &Verified, claimed: &Verified) -> Vec<String> {
    let mut out = Vec::new();
    if found.published_rows != claimed.published_rows {
        out.push(format!(
            "{} rows published, the certificate says {}",
            found.published_rows, claimed.published_rows
        ));
    }
    if found.classes != claimed.classes || found.smallest_class != claimed.smallest_class {
        out.push(format!(
            "{} classes, smallest {}; the certificate says {} classes, smallest {}",
            found.classes, found.smallest_class, claimed.classes, claimed.smallest_class
        ));
    }
    for (f, k) in found.requirements.iter().zip(&claimed.requirements) {
        if f.requirement == k.requirement && f.achieved_k != k.achieved_k {
            out.push(format!(
                "{} achieves k = {}, the certificate says {}",
                f.requirement, f.achieved_k, k.achieved_k
            ));
        }
    }
    out
}

/// How the l-diversity a release's rows achieve (`found`, from its labels)
/// differs from what its certificate claims, per sensitive column. Empty
/// when the certificate holds.
pub fn diversity_discrepancies(found: &[SensitiveDiversity], claimed: &[LAchieved]) -> Vec<String> {
    let mut out = Vec::new();
    for c in claimed {
        let Some(f) = found.iter().find(|f| f.name == c.column) else {
            out.push(format!(
                "the certificate claims l for `{}`, which the release does not hold",
                c.column
            ));
            continue;
        };
        if f.distinct_l != c.distinct_l {
            out.push(format!(
                "`{}` is distinct {}-diverse, the certificate says {}",
                c.column, f.distinct_l, c.distinct_l
            ));
        }
        let tolerance = 1e-9 * f.entropy_l.abs().max(1.0);
        if (f.entropy_l - c.entropy_l).abs() > tolerance {
            out.push(format!(
                "`{}` is entropy {:.4}-diverse, the certificate says {:.4}",
                c.column, f.entropy_l, c.entropy_l
            ));
        }
    }
    out
}

/// `sha256:` of a job: its settings after every override (the input,
/// output and storage settings excluded, so a job's identity does not
/// depend on where it reads or writes) and the bytes of its hierarchy
/// files, in name order.
pub fn job_hash(job: &JobFile) -> String {
    spec_hash(job.spec(), |path| {
        job.hierarchies()
            .get(path)
            .map(|h| tree_text(h))
            .unwrap_or_default()
    })
}

fn spec_hash(spec: &JobSpec, hierarchy: impl Fn(&str) -> String) -> String {
    // Where a job reads and writes is not what it publishes (the input's
    // identity is the certificate's fingerprint).
    let spec = spec.without_io();
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(&spec).expect("a job serialises"));
    let mut paths: Vec<&str> = spec
        .attributes
        .iter()
        .filter_map(|a| a.hierarchy.as_deref())
        .collect();
    paths.sort_unstable();
    paths.dedup();
    for p in paths {
        h.update(p.as_bytes());
        h.update(hierarchy(p).as_bytes());
    }
    format!("sha256:{}", hex(&h.finalize()))
}

/// Every node of a hierarchy with its parent, level by level: its content,
/// whatever the file's layout.
fn tree_text(h: &kanon_engine::hierarchy::Hierarchy) -> String {
    let mut out = String::new();
    for level in 0..=h.height() {
        for node in h.nodes_at(kanon_engine::hierarchy::Level(level)) {
            out.push_str(h.label(node));
            out.push('\u{1f}');
            out.push_str(h.label(h.parent(node)));
            out.push('\u{1e}');
        }
    }
    out
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
