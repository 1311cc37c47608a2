//! Pseudonyms: the keys of a job's pseudonymised columns
//! ([`Pseudonymiser`], never printed nor serialised), the keyed
//! HMAC-SHA256 (RFC 2104) a value is replaced by, and the check that a
//! released column holds only pseudonyms ([`check_pseudonymised`]).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::DataType;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Error, Result};
use crate::spec::{JobSpec, Role};

/// The shortest key accepted for pseudonyms, in bytes: a shorter key could
/// be guessed from one known value and its pseudonym.
pub const MIN_KEY_BYTES: usize = 16;

/// The fewest distinct bytes a pseudonym key may hold: 16 × `a`, or a
/// word repeated, is the first key an attacker tries (a random hex key of
/// 32 bytes holds about 16).
pub const MIN_DISTINCT_KEY_BYTES: usize = 8;

fn distinct_bytes(key: &str) -> usize {
    let mut seen = [false; 256];
    key.bytes().for_each(|b| seen[b as usize] = true);
    seen.iter().filter(|&&s| s).count()
}

/// The keys of a job's pseudonymised columns. The engine reads no
/// environment: the front end looks the variables up and hands the values
/// over ([`Pseudonymiser::from_lookup`]). The keys are never printed
/// (`Debug` shows the column names only) nor serialised.
#[derive(Clone, Default)]
pub struct Pseudonymiser {
    keys: Vec<(String, Arc<[u8]>)>,
}

impl std::fmt::Debug for Pseudonymiser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pseudonymiser")
            .field(
                "columns",
                &self
                    .keys
                    .iter()
                    .map(|(c, _)| c.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("keys", &"<redacted>")
            .finish()
    }
}

impl Pseudonymiser {
    /// The keys of every pseudonymised column of `spec`, each read from its
    /// `key_env` variable through `lookup` (the front end's access to the
    /// environment; `None` when the variable is unset).
    ///
    /// # Errors
    /// [`Error::Spec`] naming the attribute and the variable when it is
    /// unset, empty or shorter than [`MIN_KEY_BYTES`] (the message gives the
    /// key's length, never the key).
    pub fn from_lookup(
        spec: &JobSpec,
        mut lookup: impl FnMut(&str) -> Option<String>,
    ) -> Result<Self> {
        let mut keys = Vec::new();
        for a in spec
            .attributes
            .iter()
            .filter(|a| a.role == Role::Pseudonymised)
        {
            let var = a.key_env();
            let setting = format!("attributes.{}.key_env", a.name);
            let key = match lookup(var) {
                None => {
                    return Err(Error::spec(
                        setting,
                        format!(
                            "the pseudonym key of column `{}` is read from the environment variable {var}, which is not set; set it to a secret of at least {MIN_KEY_BYTES} bytes (e.g. `export {var}=$(openssl rand -hex 32)`) and keep it: the same key gives the same pseudonyms",
                            a.name
                        ),
                    ))
                }
                Some(k) if k.is_empty() => {
                    return Err(Error::spec(
                        setting,
                        format!(
                            "the environment variable {var} (pseudonym key of column `{}`) is empty; set it to a secret of at least {MIN_KEY_BYTES} bytes",
                            a.name
                        ),
                    ))
                }
                Some(k) if k.len() < MIN_KEY_BYTES => {
                    return Err(Error::spec(
                        setting,
                        format!(
                            "the pseudonym key in {var} (column `{}`) is {} bytes; use at least {MIN_KEY_BYTES} (e.g. `openssl rand -hex 32`)",
                            a.name,
                            k.len()
                        ),
                    ))
                }
                Some(k) if distinct_bytes(&k) < MIN_DISTINCT_KEY_BYTES => {
                    return Err(Error::spec(
                        setting,
                        format!(
                            "the pseudonym key in {var} (column `{}`) has only {} distinct bytes: a key like `aaaa...` or a short word repeated is guessed first; use a random key (e.g. `openssl rand -hex 32`)",
                            a.name,
                            distinct_bytes(&k)
                        ),
                    ))
                }
                Some(k) => k,
            };
            keys.push((a.name.clone(), Arc::from(key.into_bytes())));
        }
        Ok(Pseudonymiser { keys })
    }

    /// The keys of one release (issue 31, item 4): unless the job asks for
    /// joinable pseudonyms, each column's key is replaced by
    /// HMAC-SHA256(key, job ‖ identifiers), with the job's settings (its
    /// input, output and storage left out) and the digest of the input's
    /// identifiers ([`crate::identities::Identities`]). Two releases of
    /// other jobs or other people then share no pseudonym, and the same job
    /// on the same input gives the same ones.
    pub fn for_release(
        &self,
        spec: &JobSpec,
        identities: &crate::identities::Identities,
    ) -> Pseudonymiser {
        if spec.privacy.joinable_pseudonyms || self.keys.is_empty() {
            return self.clone();
        }
        let mut salt = b"kanon per-release pseudonym key\0".to_vec();
        salt.extend(serde_json::to_vec(&spec.without_io()).unwrap_or_default());
        salt.extend(identities.digest.to_le_bytes());
        salt.extend(identities.distinct.to_le_bytes());
        Pseudonymiser {
            keys: self
                .keys
                .iter()
                .map(|(column, key)| {
                    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
                        .expect("HMAC takes keys of any length");
                    mac.update(&salt);
                    let derived = mac.finalize().into_bytes().to_vec();
                    (column.clone(), Arc::from(derived))
                })
                .collect(),
        }
    }

    fn key(&self, column: &str) -> Option<&[u8]> {
        self.keys
            .iter()
            .find(|(c, _)| c == column)
            .map(|(_, k)| k.as_ref())
    }

    /// The pseudonyms of `array` under `column`'s key: the HMAC-SHA256 of
    /// each value's canonical bytes (the UTF-8 text of its Arrow display
    /// form; raw bytes for binary columns), as 64 lowercase hex digits.
    /// Nulls stay null. The same key and value always give the same
    /// pseudonym, whatever the column's type or name (releases join only
    /// when their keys are the same: see [`Pseudonymiser::for_release`]).
    ///
    /// # Errors
    /// [`Error::Spec`] when the column has no key (the front end did not
    /// hand one over); [`Error::Data`] for a type that has no text form.
    pub fn pseudonymise(&self, column: &str, array: &dyn Array) -> Result<ArrayRef> {
        let key = self.key(column).ok_or_else(|| {
            Error::spec(
                format!("attributes.{column}"),
                "a pseudonymised column needs its key; this front end did not provide one",
            )
        })?;
        let mac = Keyed::new(key);
        let mut out = Vec::with_capacity(array.len());
        canonical_bytes(column, array, |v| out.push(v.map(|b| mac.hex(b))))?;
        Ok(Arc::new(StringArray::from(out)))
    }

    /// The keyed fingerprints that recognise the people of `column` (the
    /// job's `privacy.entity`) across a table's releases
    /// ([`crate::history`]): HMAC-SHA256 of each value's canonical bytes
    /// under a key derived from the column's own key, never its per-release
    /// key, so that the same person has the same fingerprint in every
    /// release, while the fingerprint is no pseudonym any release
    /// publishes (it is kept out of the table, in the job's history).
    ///
    /// # Errors
    /// [`Error::Spec`] when the column has no key.
    pub fn fingerprinter(&self, column: &str) -> Result<Fingerprinter> {
        let key = self.key(column).ok_or_else(|| {
            Error::spec(
                "output.history",
                format!("the people of `{column}` are recognised by a key derived from its pseudonym key, which this front end did not provide"),
            )
        })?;
        let mut derive =
            <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
        derive.update(b"kanon history fingerprint v1\0");
        Ok(Fingerprinter {
            column: column.to_string(),
            mac: Keyed::new(&derive.finalize().into_bytes()),
        })
    }
}

/// Recognises a person across releases by a keyed fingerprint of their
/// identifier ([`Pseudonymiser::fingerprinter`]). `Debug` shows the column
/// only.
#[derive(Clone)]
pub struct Fingerprinter {
    column: String,
    mac: Keyed,
}

impl std::fmt::Debug for Fingerprinter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fingerprinter")
            .field("column", &self.column)
            .field("key", &"<redacted>")
            .finish()
    }
}

impl Fingerprinter {
    /// The identifier column.
    pub fn column(&self) -> &str {
        &self.column
    }

    /// The fingerprint of every value of `array` (`None` for nulls): the
    /// first 128 bits of its keyed HMAC.
    ///
    /// # Errors
    /// [`Error::Data`] for a type that has no text form.
    pub fn of(&self, array: &dyn Array) -> Result<Vec<Option<u128>>> {
        let mut out = Vec::with_capacity(array.len());
        canonical_bytes(&self.column, array, |v| {
            out.push(v.map(|b| {
                let mut mac = self.mac.0.clone();
                mac.update(b);
                let d = mac.finalize().into_bytes();
                u128::from_le_bytes(d[..16].try_into().expect("16 bytes"))
            }))
        })?;
        Ok(out)
    }
}

/// Calls `f` with the canonical bytes of every value of `array` (the UTF-8
/// text of its Arrow display form; raw bytes for binary columns), `None`
/// for nulls, in row order.
fn canonical_bytes(
    column: &str,
    array: &dyn Array,
    mut f: impl FnMut(Option<&[u8]>),
) -> Result<()> {
    match array.data_type() {
        DataType::Binary => array.as_binary::<i32>().iter().for_each(&mut f),
        DataType::LargeBinary => array.as_binary::<i64>().iter().for_each(&mut f),
        _ => {
            let text = arrow::compute::cast(array, &DataType::Utf8).map_err(|_| {
                Error::data(
                    column,
                    format!(
                        "has type {}, which cannot be pseudonymised; cast it to a string first",
                        array.data_type()
                    ),
                )
            })?;
            text.as_string::<i32>()
                .iter()
                .for_each(|v| f(v.map(str::as_bytes)));
        }
    }
    Ok(())
}

/// HMAC-SHA256 (RFC 2104, the `hmac` crate) under one column's key: the
/// keyed state is prepared once per column and cloned per value.
#[derive(Clone)]
struct Keyed(Hmac<Sha256>);

impl Keyed {
    fn new(key: &[u8]) -> Self {
        Keyed(Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length"))
    }

    fn hex(&self, message: &[u8]) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut mac = self.0.clone();
        mac.update(message);
        let mut s = String::with_capacity(64);
        for b in mac.finalize().into_bytes() {
            s.push(HEX[usize::from(b >> 4)] as char);
            s.push(HEX[usize::from(b & 15)] as char);
        }
        s
    }
}

/// Whether `value` has the form of a pseudonym: 64 lowercase hex digits.
pub fn is_pseudonym(value: &str) -> bool {
    value.len() == 64
        && value
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Checks a released pseudonymised column: a string column whose every
/// non-null value is a pseudonym ([`is_pseudonym`]). Anything else is a raw
/// value that was published by mistake.
///
/// # Errors
/// [`Error::VerificationFailed`] naming the column and how many values are
/// not pseudonyms (never the values).
pub fn check_pseudonymised(column: &str, array: &dyn Array) -> Result<()> {
    let fail = |what: String| {
        Err(Error::VerificationFailed(format!(
            "pseudonymised column `{column}` {what}: raw values are published; re-run kanon anonymize with the job's key"
        )))
    };
    let text = match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            arrow::compute::cast(array, &DataType::Utf8)?
        }
        DataType::Null => return Ok(()),
        DataType::Dictionary(_, v)
            if matches!(v.as_ref(), DataType::Utf8 | DataType::LargeUtf8) =>
        {
            arrow::compute::cast(array, &DataType::Utf8)?
        }
        other => return fail(format!("has type {other}, not the hex text of a pseudonym")),
    };
    let bad = text
        .as_string::<i32>()
        .iter()
        .filter(|v| v.is_some_and(|v| !is_pseudonym(v)))
        .count();
    if bad > 0 {
        return fail(format!(
            "holds {bad} value(s) that are not pseudonyms (64 hex digits)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::Encoder;
    use crate::partition::Partition;
    use crate::recode::{release_schema, Recoder};
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{Field, Schema};

    #[test]
    fn hmac_matches_rfc_4231() {
        let hex = |key: &[u8], msg: &[u8]| Keyed::new(key).hex(msg);
        assert_eq!(
            hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            ),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    const KEY: &str = "0123456789abcdef-secret";

    fn pseudonym_job() -> JobSpec {
        serde_json::from_str(
            r#"{"attributes": [{"name": "age", "role": "qi"},
                {"name": "id", "role": "pseudonymised", "key_env": "TEST_KEY"}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn pseudonymised_columns_are_keyed_hashes() {
        let spec = pseudonym_job();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("age", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![Some(7), None, Some(7), Some(8)])) as ArrayRef,
                Arc::new(Int64Array::from(vec![30, 30, 40, 40])),
            ],
        )
        .unwrap();
        let mut enc = Encoder::try_new(&spec, &Default::default(), &schema).unwrap();
        enc.push(&batch).unwrap();
        let table = enc.finish().unwrap();
        let partition = Partition::tightest(&table, vec![0, 0, 1, 1]);
        let recoder = Recoder::new(&spec, &table, &partition);
        // No key handed over: refused, never the raw value.
        let err = recoder.recode(&batch, 0).unwrap_err().to_string();
        assert!(err.contains("attributes.id"), "{err}");
        let keys =
            Pseudonymiser::from_lookup(&spec, |v| (v == "TEST_KEY").then(|| KEY.into())).unwrap();
        assert!(!format!("{keys:?}").contains(KEY));
        let recoder = recoder.with_pseudonymiser(keys.clone());
        assert!(!format!("{recoder:?}").contains(KEY));
        let out = recoder.recode(&batch, 0).unwrap();
        assert_eq!(out.schema(), release_schema(&spec, &schema));
        let ids = out.column_by_name("id").unwrap().as_string::<i32>().clone();
        assert!(ids.is_null(1));
        assert_eq!(ids.value(0), ids.value(2));
        assert_ne!(ids.value(0), ids.value(3));
        assert!(is_pseudonym(ids.value(0)));
        assert_eq!(ids.value(0), Keyed::new(KEY.as_bytes()).hex(b"7"));
        // The same value as text has the same pseudonym (releases join).
        let text = keys
            .pseudonymise("id", &StringArray::from(vec!["7"]))
            .unwrap();
        assert_eq!(text.as_string::<i32>().value(0), ids.value(0));
        check_pseudonymised("id", &ids).unwrap();
        let raw = check_pseudonymised("id", batch.column(0).as_ref())
            .unwrap_err()
            .to_string();
        assert!(raw.contains("`id`"), "{raw}");
        let raw = check_pseudonymised("id", &StringArray::from(vec![Some("7"), None]))
            .unwrap_err()
            .to_string();
        assert!(
            raw.contains("1 value(s)") && !raw.contains("\"7\""),
            "{raw}"
        );
    }

    #[test]
    fn a_missing_or_short_key_names_the_variable_not_the_key() {
        let spec = pseudonym_job();
        let err = Pseudonymiser::from_lookup(&spec, |_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("TEST_KEY") && err.contains("not set"), "{err}");
        let err = Pseudonymiser::from_lookup(&spec, |_| Some(String::new()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("TEST_KEY") && err.contains("empty"), "{err}");
        let err = Pseudonymiser::from_lookup(&spec, |_| Some("short-key".into()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("9 bytes") && !err.contains("short-key"),
            "{err}"
        );
    }
}
