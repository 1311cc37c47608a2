//! [`Location`]: what a path or URL given to kanon names, a local file or
//! directory or an S3 object or prefix, and whether writing one could touch
//! what reading another reads. Parsing and comparing locations needs no
//! store, so it lives apart from the I/O in [`super::Storage`].

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Result;
use object_store::path::Path as ObjectPath;

use crate::exit::Failure;

/// A place to read or write: a local path or an object in a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local file or directory.
    Local(PathBuf),
    /// An S3 object or prefix.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key (no leading `/`; may be empty or end with `/`).
        key: String,
    },
}

impl Location {
    /// Parses a path or URL: `s3://bucket/key` (also `s3a://`),
    /// `file:///path`, or a local path.
    ///
    /// # Errors
    /// A bad-input failure for other schemes and URLs without a bucket.
    pub fn parse(s: &str) -> Result<Location> {
        if let Some(rest) = s.strip_prefix("s3://").or_else(|| s.strip_prefix("s3a://")) {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(Failure::bad_input(format!(
                    "`{s}` names no bucket; write s3://BUCKET/KEY"
                ))
                .into());
            }
            return Ok(Location::S3 {
                bucket: bucket.to_string(),
                key: key.trim_start_matches('/').to_string(),
            });
        }
        if let Some(p) = s.strip_prefix("file://") {
            return Ok(Location::Local(PathBuf::from(p)));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(Failure::bad_input(format!(
                    "`{s}`: kanon reads local paths and s3:// URLs, not {scheme}://"
                ))
                .into());
            }
        }
        Ok(Location::Local(PathBuf::from(s)))
    }

    /// Whether writing `self` could touch what reading `input` reads:
    /// the same file or object, or one inside the other (a release inside
    /// an input directory or prefix is read back by the next run; an output
    /// directory around the input replaces it). Local paths are compared by
    /// the real path of their nearest existing ancestor (so `dir/../in`,
    /// `./in` and symlinks are seen through), S3 keys by path segment after
    /// collapsing `//` and `./`. Globs count from their first wildcard's
    /// directory.
    pub fn overlaps(&self, input: &Location) -> bool {
        match (self, input) {
            (Location::Local(out), Location::Local(inp)) => {
                let (a, b) = (canonical(out), canonical(&glob_root(inp)));
                a.starts_with(&b) || b.starts_with(&a)
            }
            (
                Location::S3 {
                    bucket: ob,
                    key: ok,
                },
                Location::S3 {
                    bucket: ib,
                    key: ik,
                },
            ) => {
                let root = glob_root_key(ik);
                let (a, b) = (key_segments(ok), key_segments(&root));
                ob == ib && (a.starts_with(&b) || b.starts_with(&a))
            }
            _ => false,
        }
    }

    /// Whether this is an object store location.
    pub fn is_remote(&self) -> bool {
        matches!(self, Location::S3 { .. })
    }

    /// The location of `name` inside this directory or prefix.
    pub fn join(&self, name: &str) -> Location {
        match self {
            Location::Local(p) => Location::Local(p.join(name)),
            Location::S3 { bucket, key } => Location::S3 {
                bucket: bucket.clone(),
                key: if key.is_empty() {
                    name.to_string()
                } else {
                    format!("{}/{name}", key.trim_end_matches('/'))
                },
            },
        }
    }

    /// The object path of an S3 location.
    pub fn object_path(&self) -> Option<ObjectPath> {
        match self {
            Location::S3 { key, .. } => Some(ObjectPath::from(key.trim_end_matches('/'))),
            Location::Local(_) => None,
        }
    }
}

/// `path` made absolute through the real path of its nearest existing
/// ancestor, with `.` and `..` of the rest resolved by name.
fn canonical(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut base = absolute.as_path();
    let resolved = loop {
        if let Ok(real) = base.canonicalize() {
            break real;
        }
        // The last component, `..` included: `dir/absent/../in.parquet`
        // is `dir/in.parquet` once a writer creates `absent` (issue 32).
        match (base.parent(), base.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last.as_os_str().to_os_string());
                base = parent;
            }
            _ => break base.to_path_buf(),
        }
    };
    let mut out = resolved;
    for part in rest.iter().rev() {
        match part.to_str() {
            Some(".") => {}
            Some("..") => {
                out.pop();
            }
            _ => out.push(part),
        }
    }
    // `absent/../link` is `link` once resolved by name: resolve what now
    // exists again (a symbolic link after the detour). The path has no
    // `..` left, so this recurses once.
    if rest.iter().any(|p| p == "..") {
        return canonical(&out);
    }
    out
}

/// The directory a glob starts from (the path itself when it has none).
fn glob_root(path: &Path) -> PathBuf {
    let mut root = PathBuf::new();
    for c in path.components() {
        if c.as_os_str().to_string_lossy().contains(['*', '?', '[']) {
            break;
        }
        root.push(c);
    }
    root
}

/// An S3 key up to its first wildcard.
fn glob_root_key(key: &str) -> String {
    match key.find(['*', '?', '[']) {
        Some(i) => key[..i]
            .rsplit_once('/')
            .map_or(String::new(), |(d, _)| d.to_string()),
        None => key.to_string(),
    }
}

/// The segments of an S3 key, without empty and `.` segments.
fn key_segments(key: &str) -> Vec<&str> {
    key.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect()
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_locations_are_seen_through_aliases() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("in.parquet"), b"x").unwrap();
        let local = |p: PathBuf| Location::Local(p);
        let input = local(d.join("in.parquet"));
        for alias in [
            d.join("sub/../in.parquet"),
            d.join("./in.parquet"),
            d.join("sub/../sub/./../in.parquet"),
        ] {
            assert!(local(alias.clone()).overlaps(&input), "{}", alias.display());
        }
        std::os::unix::fs::symlink(d.join("in.parquet"), d.join("link.parquet")).unwrap();
        assert!(local(d.join("link.parquet")).overlaps(&input));
        assert!(!local(d.join("out.parquet")).overlaps(&input));
        // Containment both ways: a release inside an input directory or
        // glob, an output directory around the input.
        assert!(local(d.join("sub/out.parquet")).overlaps(&local(d.join("sub"))));
        assert!(local(d.join("sub/out.parquet")).overlaps(&local(d.join("sub/*.parquet"))));
        assert!(local(d.to_path_buf()).overlaps(&input));
        let s3 = |s: &str| Location::parse(s).unwrap();
        assert!(s3("s3://lake/adult/r.parquet").overlaps(&s3("s3://lake/adult/")));
        assert!(s3("s3://lake//adult/./r.parquet").overlaps(&s3("s3://lake/adult")));
        assert!(s3("s3://lake/adult").overlaps(&s3("s3://lake/adult/part-0.parquet")));
        assert!(s3("s3://lake/adult/x.parquet").overlaps(&s3("s3://lake/adult/*.parquet")));
        assert!(!s3("s3://lake/adult-k10.parquet").overlaps(&s3("s3://lake/adult/")));
        assert!(!s3("s3://other/adult/r.parquet").overlaps(&s3("s3://lake/adult/")));
        assert!(!s3("s3://lake/adult/r.parquet").overlaps(&local(d.join("adult"))));
    }

    #[test]
    fn parses_locations() {
        assert_eq!(
            Location::parse("s3://b/data/x.parquet").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                key: "data/x.parquet".into()
            }
        );
        assert_eq!(
            Location::parse("s3a://b").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                key: String::new()
            }
        );
        assert_eq!(
            Location::parse("data/x.csv").unwrap(),
            Location::Local("data/x.csv".into())
        );
        assert_eq!(
            Location::parse("file:///tmp/x").unwrap(),
            Location::Local("/tmp/x".into())
        );
        assert!(Location::parse("gs://b/x")
            .unwrap_err()
            .to_string()
            .contains("gs://"));
        assert!(Location::parse("s3:///x").is_err());
        let l = Location::parse("s3://b/out/").unwrap();
        assert_eq!(
            l.join("part-00000.parquet").to_string(),
            "s3://b/out/part-00000.parquet"
        );
        assert_eq!(l.object_path().unwrap().as_ref(), "out");
    }
}
