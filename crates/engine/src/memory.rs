//! The engine's working set, estimated from a job and a row count before
//! any row is read, so that a front end can refuse a job that would not fit
//! its memory budget (issue 38) instead of being killed by the operating
//! system halfway through.
//!
//! A run holds, besides its input and output buffers (the front end's):
//!
//! - **codes**: one code per row for every QI and sensitive column,
//!   [`crate::codes`]'s narrowest width (1, 2 or 4 bytes by the column's
//!   number of values), through pass 1 and the algorithm;
//! - **the algorithm's working set**: the partition (a group per row), the
//!   row order of the cuts and the blocks being clustered, the metrics and
//!   the verification's classes; per row, by algorithm family;
//! - **the release check** in pass 2: the group of every row (the
//!   recoder's), the published labels encoded as codes for the check by
//!   labels ([`crate::verify::ReleaseVerifier`]), the group of every held
//!   row, and with `privacy.entity` the person of every row.
//!
//! The bytes per row are upper figures measured on 1M to 100M generated
//! rows (BENCHMARKS.md, "Memory a scheduler can trust"), counting what the
//! allocator keeps as well as what is live.

use crate::spec::JobSpec;

/// Bytes per row the algorithm holds beyond the codes, by family: the
/// partition (4), the cut order and block tables (row ids, 4 to 8), the
/// classes and the metrics' per-row figures.
const ALGORITHM_BYTES_PER_ROW: f64 = 24.0;

/// Extra bytes per row and QI for algorithms that copy their block's QI
/// codes into wider types while clustering (KACA, SBC, L-clustering).
const CLUSTERING_BYTES_PER_ROW_AND_QI: f64 = 1.0;

/// Bytes per row of the release check: the recoder's group of the row (4),
/// the group of every held row (4) and the verifier's row-to-class map (4).
const RELEASE_BYTES_PER_ROW: f64 = 12.0;

/// Bytes per row and column of the release check's label codes (two-byte
/// codes: a column's labels outnumber its leaves only with intervals).
const LABEL_BYTES_PER_ROW_AND_COLUMN: f64 = 2.0;

/// Bytes per row of the person of every row with `privacy.entity`.
const ENTITY_BYTES_PER_ROW: f64 = 8.0;

/// The engine's working set of one run, in bytes, by phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkingSet {
    /// The encoded QI and sensitive columns (pass 1 and the algorithm).
    pub codes: u64,
    /// What the algorithm holds beyond the codes.
    pub algorithm: u64,
    /// What pass 2 holds beyond the rows it buffers.
    pub release: u64,
}

impl WorkingSet {
    /// The working set of `spec` on `rows` rows whose codes take
    /// `code_bytes_per_row` bytes (the sum of each encoded column's width:
    /// estimated from a sample before reading, exact after pass 1).
    pub fn estimate(spec: &JobSpec, rows: u64, code_bytes_per_row: f64) -> WorkingSet {
        let rows_f = rows as f64;
        let qis = spec.quasi_identifiers().count() as f64;
        let columns = qis + spec.sensitive().count() as f64;
        let clustering = matches!(
            spec.algorithm.name.as_str(),
            "kaca" | "sbc" | "l-clustering"
        );
        let algorithm = ALGORITHM_BYTES_PER_ROW
            + if clustering {
                CLUSTERING_BYTES_PER_ROW_AND_QI * qis
            } else {
                0.0
            };
        let entity = match spec.entity_column() {
            Some(_) => ENTITY_BYTES_PER_ROW,
            None => 0.0,
        };
        let release = RELEASE_BYTES_PER_ROW + LABEL_BYTES_PER_ROW_AND_COLUMN * columns + entity;
        WorkingSet {
            codes: (rows_f * (code_bytes_per_row + entity)) as u64,
            algorithm: (rows_f * algorithm) as u64,
            release: (rows_f * release) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(algorithm: &str, entity: bool) -> JobSpec {
        let mut text = format!(
            "[algorithm]\nname = \"{algorithm}\"\n[privacy]\nk = 5\n\
             [[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n\
             [[attributes]]\nname = \"zip\"\nrole = \"quasi-identifier\"\n\
             [[attributes]]\nname = \"disease\"\nrole = \"sensitive\"\n"
        );
        if entity {
            text.push_str("[[attributes]]\nname = \"person\"\nrole = \"pseudonymised\"\n");
            text = text.replace(
                "[privacy]\nk = 5\n",
                "[privacy]\nk = 5\nentity = \"person\"\n",
            );
        }
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn grows_with_rows_columns_and_people() {
        let spec = job("mondrian", false);
        let per_row = 3.0;
        let small = WorkingSet::estimate(&spec, 1_000, per_row);
        let large = WorkingSet::estimate(&spec, 1_000_000, per_row);
        assert_eq!(large.codes, 1000 * small.codes);
        assert!(large.algorithm > 0 && large.release > 0);
        let kaca = WorkingSet::estimate(&job("kaca", false), 1_000_000, per_row);
        assert!(kaca.algorithm > large.algorithm);
        let people = WorkingSet::estimate(&job("mondrian", true), 1_000_000, per_row);
        assert!(people.codes > large.codes && people.release > large.release);
    }
}
