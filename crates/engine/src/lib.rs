//! kanon's engine: k-anonymity and l-diversity over Arrow record batches.
//!
//! The data flows one way, and the modules follow it:
//!
//! ```text
//! spec -> encode -> algorithms -> partition -> verify -> recode
//!  (what)  (codes,   (groups of    (one type    (privacy   (labels
//!          classes)   rows)         for all)     models)    per row)
//!                                      └──────► metrics
//! ```
//!
//! [`release`] is the one path every front end takes from an encoded table
//! to a verified release in release order ([`order`]).
//!
//! No I/O, no async: front ends read files and hand over record batches and
//! parsed hierarchies.
#![warn(missing_docs)]

pub mod algorithms;
pub mod cancel;
pub mod classes;
pub mod codes;
mod coding;
pub mod columns;
pub mod counts;
pub mod encode;
pub mod entity;
pub mod error;
pub mod generalise;
pub mod hierarchy;
pub mod history;
pub mod identities;
pub mod job;
pub mod memory;
pub mod metrics;
mod microaggregation;
pub(crate) mod number;
pub mod order;
pub mod partition;
pub mod pipeline;
pub mod population;
pub mod privacy;
pub mod progress;
pub mod recode;
mod registry;
pub mod release;
pub mod spec;
pub mod table;
pub mod verify;

pub use error::{Error, Result};
pub use pipeline::{anonymize, Anonymization};
