//! The algorithm of a job and its parameters ([`AlgorithmSpec`]): a name
//! from the registry and a free-form table that the algorithm itself
//! deserialises ([`AlgorithmSpec::params`]), so adding an algorithm needs
//! no change here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The algorithm and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlgorithmSpec {
    /// Registered algorithm name, e.g. `mondrian`.
    pub name: String,
    /// Seed of every randomised choice; the same seed gives the same release.
    #[serde(default)]
    pub seed: u64,
    /// Algorithm-specific parameters (each algorithm rejects unknown ones).
    #[serde(flatten)]
    pub params: BTreeMap<String, serde_json::Value>,
}

impl Default for AlgorithmSpec {
    fn default() -> Self {
        AlgorithmSpec {
            name: "mondrian".into(),
            seed: 0,
            params: BTreeMap::new(),
        }
    }
}

impl AlgorithmSpec {
    /// Deserialises the algorithm-specific parameters into `P`.
    ///
    /// # Errors
    /// [`Error::Spec`] naming the bad parameter.
    pub fn params<P: serde::de::DeserializeOwned>(&self) -> Result<P> {
        let map: serde_json::Map<String, serde_json::Value> = self
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        serde_json::from_value(serde_json::Value::Object(map))
            .map_err(|e| Error::spec(format!("algorithm ({})", self.name), e.to_string()))
    }
}
