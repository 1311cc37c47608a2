//! The `[risk]` settings of a job: how the re-identification risk of the
//! input and of the release is measured for the metrics JSON, the report,
//! `kanon inspect` and `kanon_risk()` ([`crate::metrics::risk`]). They
//! never change what is published.
//!
//! ```toml
//! [risk]
//! threshold = 0.2            # a record is "at risk" above this risk
//! population_size = 301620   # N: records of the population the data was sampled from
//! population = "census.parquet"  # or the population table itself (journalist risk)
//! msu_max_size = 3           # QI sets searched for minimal sample uniques (0: none)
//! ```

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::metrics::risk::RiskOptions;

/// Tables with more records than this skip the minimal-sample-unique search
/// unless `msu_max_size` is set: it reads the table once per QI set.
pub const MSU_DEFAULT_MAX_RECORDS: usize = 1_000_000;

/// How risk is measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RiskSpec {
    /// Records whose prosecutor (and journalist) risk is above this share
    /// count as at risk; default 0.2 (ARX's default).
    pub threshold: Option<f64>,
    /// Records of the population the input was drawn from (`N`), for the
    /// population-uniqueness estimates (Pitman, Zayatz, SNB, Dankar et
    /// al.'s rule); without it (and without `population`) they are not
    /// estimated.
    pub population_size: Option<u64>,
    /// A table of the whole population with the same QI columns (read by
    /// the front end), for journalist and marketer risk.
    pub population: Option<String>,
    /// The largest QI set searched for minimal sample uniques (SUDA); 0
    /// skips the search. Default 3, and 0 for tables of more than
    /// [`MSU_DEFAULT_MAX_RECORDS`] records.
    pub msu_max_size: Option<usize>,
}

impl RiskSpec {
    /// Checks the settings that need no data.
    ///
    /// # Errors
    /// [`Error::Spec`] naming `risk.threshold` or `risk.population_size`.
    pub fn validate(&self) -> Result<()> {
        if let Some(t) = self.threshold {
            if !(0.0..=1.0).contains(&t) {
                return Err(Error::spec(
                    "risk.threshold",
                    format!("must be a risk between 0 and 1 (e.g. 0.2 for 1 in 5), not {t}"),
                ));
            }
        }
        if self.population_size == Some(0) {
            return Err(Error::spec(
                "risk.population_size",
                "must be the number of records of the population (at least the input's)",
            ));
        }
        Ok(())
    }

    /// The engine's options for a table of `records` records.
    pub fn options(&self, records: usize) -> RiskOptions {
        let default = RiskOptions::default();
        RiskOptions {
            threshold: self.threshold.unwrap_or(default.threshold),
            population_size: self.population_size,
            max_msu_size: self
                .msu_max_size
                .unwrap_or(if records > MSU_DEFAULT_MAX_RECORDS {
                    0
                } else {
                    default.max_msu_size
                }),
            top_combinations: default.top_combinations,
        }
    }
}
