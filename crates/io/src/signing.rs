//! Signed certificates (issue 31, item 3): a certificate that `kanon verify`
//! recomputes cannot claim figures the data does not achieve, but anybody
//! who can write the table can write a new certificate with true figures
//! for other data. A signature says who vouches for it.
//!
//! `kanon anonymize` (and every [`crate::publish::Publisher`]) signs each
//! certificate with the Ed25519 key (RFC 8032, `ed25519-dalek`) in
//! [`KEY_ENV`] when it is set: 64 hex digits, the key's 32-byte secret
//! seed (`openssl rand -hex 32`). The signature covers the certificate's
//! JSON without its signature (files and their sha256 included), so it
//! vouches for every byte of the release. `kanon verify --trusted-key
//! PUBLIC` fails a release whose certificates are not all signed by that
//! key. The secret never appears in a message, a log or the release.

use anyhow::Result;
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};

use crate::certificate::{hex, Certificate, Signature};
use crate::exit::Failure;

/// The environment variable holding the signing key's secret seed (named
/// with the job's other variables, [`crate::config`]).
pub use crate::config::SIGNING_KEY_ENV as KEY_ENV;

/// What the message signed starts with (domain separation).
const CONTEXT: &[u8] = b"kanon certificate v1\0";

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let s = s.trim();
    if s.len() != 2 * N || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The signing key in [`KEY_ENV`], or `None` when it is unset.
///
/// # Errors
/// Bad input naming the variable when it is not 64 hex digits (never the
/// key).
pub(crate) fn signing_key() -> Result<Option<SigningKey>> {
    let Ok(text) = std::env::var(KEY_ENV) else {
        return Ok(None);
    };
    let seed = unhex::<32>(&text).ok_or_else(|| {
        Failure::bad_input(format!(
            "{KEY_ENV} must hold an Ed25519 secret key as 64 hex digits (e.g. `export {KEY_ENV}=$(openssl rand -hex 32)`); it holds {} characters that are not one",
            text.trim().len()
        ))
    })?;
    let distinct = seed.iter().collect::<std::collections::BTreeSet<_>>().len();
    if distinct < 8 {
        return Err(Failure::bad_input(format!(
            "{KEY_ENV} holds a key of only {distinct} distinct bytes: use a random key (`openssl rand -hex 32`)"
        ))
        .into());
    }
    Ok(Some(SigningKey::from_bytes(&seed)))
}

/// The public key of the process's signing key (`KANON_SIGNING_KEY`) as
/// 64 hex digits, when one is set: what a run prints for its readers. The
/// secret key never leaves this crate.
///
/// # Errors
/// As the key's reading: bad input naming the variable (never the key).
pub fn public_key_hex() -> Result<Option<String>> {
    Ok(signing_key()?.map(|k| public_hex(&k)))
}

/// The public key of `key`, as 64 hex digits (what readers pass to
/// `kanon verify --trusted-key`).
pub fn public_hex(key: &SigningKey) -> String {
    hex(key.verifying_key().as_bytes())
}

/// The trusted public key of `--trusted-key`: 64 hex digits, or a file
/// holding them.
///
/// # Errors
/// Bad input when it is neither, or not a valid Ed25519 public key.
pub fn trusted_key(arg: &str) -> Result<VerifyingKey> {
    let text = match unhex::<32>(arg) {
        Some(_) => arg.to_string(),
        None => std::fs::read_to_string(arg).map_err(|e| {
            Failure::bad_input(format!(
                "--trusted-key {arg}: neither 64 hex digits (an Ed25519 public key) nor a readable file ({e})"
            ))
        })?,
    };
    let bytes = unhex::<32>(&text).ok_or_else(|| {
        Failure::bad_input(format!(
            "--trusted-key {arg}: an Ed25519 public key is 64 hex digits"
        ))
    })?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| {
        Failure::bad_input(format!(
            "--trusted-key {arg}: not a valid Ed25519 public key"
        ))
        .into()
    })
}

/// The bytes signed: the certificate without its signature, as JSON.
fn message(certificate: &Certificate) -> Vec<u8> {
    let mut unsigned = certificate.clone();
    unsigned.signature = None;
    let mut m = CONTEXT.to_vec();
    m.extend(serde_json::to_vec(&unsigned).unwrap_or_default());
    m
}

/// Signs `certificate` with `key`.
pub fn sign(certificate: &mut Certificate, key: &SigningKey) {
    let signature = key.sign(&message(certificate));
    certificate.signature = Some(Signature {
        public_key: public_hex(key),
        ed25519: hex(&signature.to_bytes()),
    });
}

/// Checks that `certificate` is signed by `trusted`. `Err` says why not
/// (no signature, another key, or a certificate changed after it was
/// signed).
pub fn check(certificate: &Certificate, trusted: &VerifyingKey) -> std::result::Result<(), String> {
    let Some(s) = &certificate.signature else {
        return Err("its certificate is not signed, and --trusted-key asks for a signature".into());
    };
    if unhex::<32>(&s.public_key) != Some(*trusted.as_bytes()) {
        return Err(format!(
            "its certificate is signed by key {}, not by the trusted key",
            s.public_key
        ));
    }
    let Some(bytes) = unhex::<64>(&s.ed25519) else {
        return Err("its certificate's signature is not 128 hex digits".into());
    };
    trusted
        .verify_strict(
            &message(certificate),
            &ed25519_dalek::Signature::from_bytes(&bytes),
        )
        .map_err(|_| {
            "its certificate's signature does not match it: the certificate was changed after it was signed".to_string()
        })
}
