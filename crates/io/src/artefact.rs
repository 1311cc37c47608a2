//! Files a command writes beside a release: the metrics JSON
//! (`--metrics-json`) and the report (`--report`, `kanon report -o`).
//! Each is written in full under a temporary name next to its destination
//! and renamed into place, so a reader never sees half a file; `kanon
//! anonymize` writes them before the release's commit and removes them
//! again if the commit does not happen.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::exit::Failure;

/// A written file, removed again with [`Artefact::remove`].
pub struct Artefact(PathBuf);

impl Artefact {
    /// Writes `bytes` to `path`. `what` names the file and `flag` the option
    /// that asked for it, for errors.
    ///
    /// # Errors
    /// A bad-input failure when the directory does not exist; an I/O error
    /// when the file cannot be written.
    pub fn write(path: &Path, bytes: &[u8], what: &str, flag: &str) -> Result<Artefact> {
        let parent = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let context = || format!("cannot write {what} to {} ({flag})", path.display());
        if !parent.is_dir() {
            return Err(Failure::bad_input(format!(
                "cannot write {what} to {} ({flag}): directory {} does not exist",
                path.display(),
                parent.display()
            ))
            .into());
        }
        let prefix = what.split_whitespace().last().unwrap_or("artefact");
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!("{}{prefix}-", crate::release::tmp_prefix()))
            .tempfile_in(parent)
            .with_context(context)?;
        std::io::Write::write_all(&mut tmp, bytes).with_context(context)?;
        tmp.persist(path)
            .map_err(|e| e.error)
            .with_context(context)?;
        Ok(Artefact(path.to_path_buf()))
    }

    /// Deletes the file (its release was not committed).
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
