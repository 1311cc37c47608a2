//! The manifest of a Parquet release: its privacy certificate (the one a
//! Delta commit carries) and its files with their rows and sizes, so that a
//! reader other than kanon can check what a release claims, and tell a
//! finished release from a half-copied one.
//!
//! A release split into parts has `_kanon_release.json` in its directory,
//! then an empty `_SUCCESS` marker (Spark's): on S3 both are written after
//! every part was published, so a reader that finds `_SUCCESS` finds every
//! part the manifest lists. A single-file release `x.parquet` has
//! `_x.parquet.kanon_release.json` beside it, written before the file is
//! moved into place. Readers skip all three: names starting with `_` are
//! metadata to Spark, Hive, pyarrow and kanon alike.

use serde::{Deserialize, Serialize};

use crate::certificate::Certificate;
use crate::storage::Location;

/// The manifest's name in a split release's directory.
pub const MANIFEST: &str = "_kanon_release.json";
/// The commit marker of a split release, written after the manifest.
pub const SUCCESS: &str = "_SUCCESS";
/// The suffix of a single-file release's manifest (`_<name><suffix>`).
pub const SIDECAR_SUFFIX: &str = ".kanon_release.json";

/// One file of a release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Its name, relative to the release (the directory of a split
    /// release; the file's own name for a single file).
    pub name: String,
    pub rows: u64,
    pub bytes: u64,
    /// `sha256:` of its bytes (missing in manifests of kanon before 0.1's
    /// issue 31): `kanon verify` recomputes it, so a file rewritten with
    /// the same size (every diagnosis replaced) is caught.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// The manifest of a release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// `parquet`.
    pub format: String,
    /// Rows published, over all files.
    pub rows: u64,
    pub files: Vec<ManifestFile>,
    pub certificate: Certificate,
}

impl Manifest {
    /// The manifest of `files` (with their rows, bytes and `sha256:`)
    /// under `dest`.
    pub fn new(
        dest: &Location,
        files: &[(Location, u64, u64, String)],
        certificate: Certificate,
    ) -> Manifest {
        let files: Vec<ManifestFile> = files
            .iter()
            .map(|(l, rows, bytes, sha256)| ManifestFile {
                name: relative_name(dest, l),
                rows: *rows,
                bytes: *bytes,
                sha256: Some(sha256.clone()),
            })
            .collect();
        Manifest {
            format: "parquet".into(),
            rows: files.iter().map(|f| f.rows).sum(),
            files,
            certificate,
        }
    }

    /// Pretty JSON.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = serde_json::to_vec_pretty(self).expect("a manifest serialises");
        b.push(b'\n');
        b
    }
}

/// The name of file `l` relative to the release (or table) at `root`: its
/// path under `root`, or its own name when it is `root`.
pub fn relative_name(root: &Location, l: &Location) -> String {
    let root = root.to_string();
    l.to_string()
        .strip_prefix(root.trim_end_matches('/'))
        .map(|n| n.trim_start_matches('/').to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| file_name(l))
}

fn file_name(l: &Location) -> String {
    match l {
        Location::Local(p) => p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        Location::S3 { key, .. } => key.rsplit('/').next().unwrap_or_default().to_string(),
    }
}

/// Where the manifest of the release at `dest` is.
pub fn manifest_location(dest: &Location, split: bool) -> Location {
    if split {
        return dest.join(MANIFEST);
    }
    match dest {
        Location::Local(p) => {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            Location::Local(p.with_file_name(format!("_{name}{SIDECAR_SUFFIX}")))
        }
        Location::S3 { bucket, key } => {
            let (dir, name) = match key.rsplit_once('/') {
                Some((d, n)) => (format!("{d}/"), n),
                None => (String::new(), key.as_str()),
            };
            Location::S3 {
                bucket: bucket.clone(),
                key: format!("{dir}_{name}{SIDECAR_SUFFIX}"),
            }
        }
    }
}
