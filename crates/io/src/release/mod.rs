//! Writing a release: Parquet (zstd, dictionary-encoded labels, bounded row
//! groups, optionally split into files of a target size) with kanon's
//! provenance in the key-value metadata, committed atomically.
//!
//! Nothing appears at the destination before [`ReleaseWriter::commit`]:
//! - a local file is written to a hidden temporary file next to the
//!   destination (`.kanon-*.tmp`) and renamed into place;
//! - a local split release is written to a hidden temporary directory that
//!   is renamed into place;
//! - on S3 every file is a multipart upload that is completed only at
//!   commit, after all its parts were uploaded and the release verified;
//!   without `--overwrite` it is uploaded to a hidden `.kanon-tmp-*` key
//!   and published by a copy that S3 completes only if the destination key
//!   is still free (`If-None-Match: *`), so of two concurrent runs exactly
//!   one publishes.
//!
//! Dropping an uncommitted writer (an error, a failed verification, an
//! interrupt) removes the temporary files and aborts the uploads.
//!
//! The data files of a Delta release are the exception: they are written
//! in place under names no other run uses ([`ReleaseOptions::direct`]),
//! because the table's log, not their presence, publishes them; an
//! uncommitted writer removes them too. Every release also gets its
//! certificate in a manifest (`manifest`), written before it is published.
//!
//! A process killed outright (SIGKILL, OOM killer, power loss) never leaves
//! a partial release, but can leave, next to the destination:
//! - a hidden local file or directory `.kanon-tmp-<host>-<pid>-*`; the next
//!   run writing next to it removes it once its process is gone (same host,
//!   no such pid), or after `STALE_LOCAL`
//!   whatever its origin;
//! - a spill directory `.kanon-spill-<host>-<pid>-*` in the system temporary
//!   directory (`crate::spill`), removed the same way by the next job that
//!   spills;
//! - on S3, a staged object `.kanon-tmp-*` (killed between upload and
//!   commit); the next run writing to the same prefix removes those older
//!   than `STALE_S3`;
//! - on S3, an incomplete multipart upload (invisible, billed as storage).
//!   `object_store` cannot list pending uploads, so kanon cannot clean them:
//!   use a bucket lifecycle rule (`AbortIncompleteMultipartUpload`) or
//!   `aws s3api list-multipart-uploads`.
//!
//! The module is split by concept: the temporary names and their cleanup in
//! `temporaries`, the checks on the destination and the local rename into
//! place in `destination`, the S3 multipart upload and byte sink in
//! `upload`, and [`ReleaseWriter`] itself in `writer`; this file holds the
//! options and the size parser shared by the commands.

use anyhow::Result;

use crate::exit::Failure;

mod adopt;
mod destination;
mod manifest;
mod parallel;
mod temporaries;
mod upload;
mod writer;

pub use adopt::{adopt, remove_staging, staging_location, StagedPart};
pub use destination::check_destination;
pub use manifest::{manifest_location, relative_name, Manifest};
pub use temporaries::remove_stale_local;
pub(crate) use temporaries::{spill_prefix, tmp_prefix};
pub use writer::ReleaseWriter;

/// How to write a release.
#[derive(Debug, Clone)]
pub struct ReleaseOptions {
    /// Split into files of about this many bytes (the destination is then a
    /// directory or prefix of `part-NNNNN.parquet` files).
    pub max_file_bytes: Option<u64>,
    /// Rows per row group.
    pub row_group_rows: usize,
    /// zstd level.
    pub zstd_level: i32,
    /// Replace an existing release.
    pub overwrite: bool,
    /// Key-value metadata of every file (provenance).
    pub metadata: Vec<(String, String)>,
    /// Write the files straight into the destination directory as
    /// `part-NNNNN-<token>.zstd.parquet`, names no other run uses, with
    /// nothing renamed on commit: the data files of a Delta table, which
    /// its log publishes (crate::delta). Uncommitted, they are removed.
    pub direct: Option<String>,
}

/// Row groups are also closed at this estimated size.
pub const ROW_GROUP_BYTES: usize = 128 << 20;

/// Parses a size: `1048576`, `512k`, `256MB`, `1 GiB`. Units k, M, G, T
/// are powers of 1024 with or without `i`/`B` (`256MB` = 256 MiB).
///
/// # Errors
/// A bad-input failure naming the setting.
pub fn parse_size(setting: &str, s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let mult: u64 = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => 0,
    };
    let v: f64 = num.parse().unwrap_or(-1.0);
    if mult == 0 || v.is_nan() || v <= 0.0 {
        return Err(Failure::bad_input(format!(
            "`{setting} = \"{s}\"` is not a size; write e.g. \"256MB\" or \"1GB\""
        ))
        .into());
    }
    Ok((v * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("s", "1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("s", "256MB").unwrap(), 256 << 20);
        assert_eq!(parse_size("s", "1 GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("s", "512k").unwrap(), 512 << 10);
        assert_eq!(parse_size("s", "1.5G").unwrap(), 3 << 29);
        let e = parse_size("output.max_file_size", "lots").unwrap_err();
        assert!(e.to_string().contains("output.max_file_size"), "{e}");
        assert!(parse_size("s", "0").is_err());
        assert!(parse_size("s", "5 parsecs").is_err());
    }
}
