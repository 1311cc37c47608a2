//! Finding the files of a dataset location: one file, a directory walked
//! recursively (hidden `.`/`_` entries skipped), a local glob, an S3 object,
//! prefix or key glob; in path order, with an error that names the setting
//! to check when nothing matches.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::Format;
use crate::exit::Failure;
use crate::storage::{FileMeta, Location, Storage};

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn is_hidden(name: &str) -> bool {
    name.starts_with('.') || name.starts_with('_')
}

pub(super) fn location_name(l: &Location) -> String {
    match l {
        Location::Local(p) => p.display().to_string(),
        Location::S3 { key, .. } => key.clone(),
    }
}

fn matches_format(name: &str, format: Option<Format>) -> bool {
    match (Format::of_path(name), format) {
        (Some(f), Some(want)) => f == want,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The files of a dataset location, sorted by path.
pub(super) fn list_files(
    storage: &Storage,
    loc: &Location,
    format: Option<Format>,
) -> Result<Vec<FileMeta>> {
    let not_found = |what: String| -> anyhow::Error {
        Failure::bad_input(format!("{what}; check `input.path` in the job or --input")).into()
    };
    let mut files: Vec<FileMeta> = match loc {
        Location::Local(p) => {
            let s = p.to_string_lossy();
            if has_glob(&s) {
                let mut out = Vec::new();
                for entry in glob::glob(&s).map_err(|e| {
                    Failure::bad_input(format!("input pattern `{s}` is not a valid glob: {e}"))
                })? {
                    let path = entry.context("cannot list the input files")?;
                    if path.is_file() {
                        out.push(local_meta(&path)?);
                    }
                }
                if out.is_empty() {
                    return Err(not_found(format!("no file matches the input pattern {s}")));
                }
                out
            } else if p.is_dir() {
                let mut out = Vec::new();
                walk(p, &mut out)?;
                let out: Vec<FileMeta> = out
                    .into_iter()
                    .filter(|m| matches_format(&location_name(&m.location), format))
                    .collect();
                if out.is_empty() {
                    return Err(not_found(format!(
                        "input directory {} holds no Parquet or CSV files",
                        p.display()
                    )));
                }
                out
            } else if p.exists() {
                vec![local_meta(p)?]
            } else {
                return Err(not_found(format!("input {} does not exist", p.display())));
            }
        }
        Location::S3 { bucket, key } => {
            if has_glob(key) {
                let cut = key[..key.find(['*', '?', '[']).unwrap_or(key.len())]
                    .rfind('/')
                    .map_or(0, |i| i + 1);
                let prefix = Location::S3 {
                    bucket: bucket.clone(),
                    key: key[..cut].to_string(),
                };
                let pattern = glob::Pattern::new(key).map_err(|e| {
                    Failure::bad_input(format!("input pattern `{loc}` is not a valid glob: {e}"))
                })?;
                let opts = glob::MatchOptions {
                    case_sensitive: true,
                    require_literal_separator: true,
                    require_literal_leading_dot: true,
                };
                let out: Vec<FileMeta> = storage
                    .list(&prefix)?
                    .into_iter()
                    .filter(|m| pattern.matches_with(&location_name(&m.location), opts))
                    .collect();
                if out.is_empty() {
                    return Err(not_found(format!(
                        "no object matches the input pattern {loc}"
                    )));
                }
                out
            } else if let Some(m) = storage.head(loc)? {
                vec![m]
            } else {
                let out: Vec<FileMeta> = storage
                    .list(loc)?
                    .into_iter()
                    .filter(|m| {
                        let name = location_name(&m.location);
                        let base = name.rsplit('/').next().unwrap_or(&name);
                        !is_hidden(base) && matches_format(&name, format)
                    })
                    .collect();
                if out.is_empty() {
                    return Err(not_found(format!(
                        "input {loc} does not exist (no object and no Parquet or CSV objects under that prefix)"
                    )));
                }
                out
            }
        }
    };
    files.sort_by_key(|m| location_name(&m.location));
    Ok(files)
}

fn local_meta(p: &Path) -> Result<FileMeta> {
    let m = std::fs::metadata(p).with_context(|| format!("cannot look at {}", p.display()))?;
    Ok(FileMeta {
        location: Location::Local(p.to_path_buf()),
        size: m.len(),
        version: m.modified().ok().and_then(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_nanos().to_string())
        }),
    })
}

fn walk(dir: &Path, out: &mut Vec<FileMeta>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list input directory {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if is_hidden(name) {
            continue;
        }
        if p.is_dir() {
            walk(&p, out)?;
        } else {
            out.push(local_meta(&p)?);
        }
    }
    Ok(())
}
