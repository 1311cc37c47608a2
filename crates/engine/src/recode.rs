//! Recoding: a partition applied to the original record batches, batch by
//! batch, in input order.
//!
//! QI columns are replaced by their published labels as dictionary-encoded
//! strings (one shared dictionary per column, so every batch only writes
//! keys); identifying columns are dropped; pseudonymised columns become the
//! keyed HMAC-SHA256 of their values ([`Pseudonymiser`]); suppressed rows are
//! withheld; every other column passes through untouched (type,
//! nullability, metadata).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, DictionaryArray, Int32Array, RecordBatch, StringArray,
};
use arrow::compute::filter;
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use hmac::{Hmac, Mac};
use rustc_hash::FxHashMap;
use sha2::Sha256;

use crate::columns::Unlisted;
use crate::encode::QiTable;
use crate::error::{Error, Result};
use crate::partition::{Partition, SUPPRESSED};
use crate::spec::{JobSpec, Role};

/// The labels of one QI column: a shared dictionary and each group's key.
#[derive(Debug, Clone)]
struct ColumnLabels {
    name: String,
    values: ArrayRef,
    key_of_group: Vec<i32>,
}

/// The schema a job's release will have for an input schema, known before
/// any data is read (for planners): what [`Recoder::output_schema`] returns.
pub fn release_schema(spec: &JobSpec, input: &Schema) -> SchemaRef {
    let recoder = Recoder {
        labels: spec
            .quasi_identifiers()
            .map(|a| ColumnLabels {
                name: a.name.clone(),
                values: Arc::new(StringArray::from(Vec::<String>::new())),
                key_of_group: Vec::new(),
            })
            .collect(),
        group_of_row: Arc::from(Vec::new()),
        dropped: Dropped::of(spec),
        pseudonymised: pseudonymised_columns(spec),
        pseudonymiser: Pseudonymiser::default(),
    };
    recoder.output_schema(input)
}

/// The pseudonymised columns of a job.
fn pseudonymised_columns(spec: &JobSpec) -> Vec<String> {
    spec.attributes
        .iter()
        .filter(|a| a.role == Role::Pseudonymised)
        .map(|a| a.name.clone())
        .collect()
}

/// The shortest key accepted for pseudonyms, in bytes: a shorter key could
/// be guessed from one known value and its pseudonym.
pub const MIN_KEY_BYTES: usize = 16;

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
                Some(k) => k,
            };
            keys.push((a.name.clone(), Arc::from(key.into_bytes())));
        }
        Ok(Pseudonymiser { keys })
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
    /// pseudonym, whatever the column's type or name, so releases join.
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
        let out: StringArray = match array.data_type() {
            DataType::Binary => array
                .as_binary::<i32>()
                .iter()
                .map(|v| v.map(|b| mac.hex(b)))
                .collect(),
            DataType::LargeBinary => array
                .as_binary::<i64>()
                .iter()
                .map(|v| v.map(|b| mac.hex(b)))
                .collect(),
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
                    .map(|v| v.map(|t| mac.hex(t.as_bytes())))
                    .collect()
            }
        };
        Ok(Arc::new(out))
    }
}

/// HMAC-SHA256 (RFC 2104, the `hmac` crate) under one column's key: the
/// keyed state is prepared once per column and cloned per value.
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

/// The columns left out of the release: identifying attributes, and every
/// unlisted column under `[columns] unlisted = "identifying"`.
#[derive(Debug, Clone)]
struct Dropped {
    identifying: Vec<String>,
    listed: Vec<String>,
    unlisted: Unlisted,
}

impl Dropped {
    fn of(spec: &JobSpec) -> Self {
        Dropped {
            identifying: spec
                .attributes
                .iter()
                .filter(|a| a.role == Role::Identifying)
                .map(|a| a.name.clone())
                .collect(),
            listed: spec.attributes.iter().map(|a| a.name.clone()).collect(),
            unlisted: spec.columns.unlisted,
        }
    }

    fn contains(&self, name: &str) -> bool {
        self.identifying.iter().any(|d| d == name)
            || (self.unlisted == Unlisted::Identifying && !self.listed.iter().any(|l| l == name))
    }
}

/// Applies a partition to the input batches.
#[derive(Debug, Clone)]
pub struct Recoder {
    labels: Vec<ColumnLabels>,
    group_of_row: Arc<[u32]>,
    dropped: Dropped,
    pseudonymised: Vec<String>,
    pseudonymiser: Pseudonymiser,
}

/// What to do with one input column.
enum Action {
    Keep,
    Drop,
    Recode(usize),
    Pseudonymise,
}

impl Recoder {
    /// Prepares the labels of every group.
    pub fn new(spec: &JobSpec, table: &QiTable, partition: &Partition) -> Self {
        let labels = table
            .columns()
            .iter()
            .enumerate()
            .map(|(q, col)| {
                let mut index: FxHashMap<String, i32> = FxHashMap::default();
                let mut values: Vec<String> = Vec::new();
                let mut key_of_group: Vec<i32> = (0..partition.n_groups())
                    .map(|g| {
                        let label = col.cell_label(&partition.tuple(g)[q]);
                        *index.entry(label.clone()).or_insert_with(|| {
                            values.push(label);
                            values.len() as i32 - 1
                        })
                    })
                    .collect();
                // Dictionary values in label order, not in the order groups
                // (numbered in input order) first use them: the dictionary
                // of a released batch says nothing about input positions.
                let mut sorted: Vec<usize> = (0..values.len()).collect();
                sorted.sort_unstable_by(|&a, &b| values[a].cmp(&values[b]));
                let mut new_key = vec![0i32; values.len()];
                for (k, &old) in sorted.iter().enumerate() {
                    new_key[old] = k as i32;
                }
                for k in &mut key_of_group {
                    *k = new_key[*k as usize];
                }
                let values: Vec<String> = sorted.into_iter().map(|i| values[i].clone()).collect();
                ColumnLabels {
                    name: col.name().to_string(),
                    values: Arc::new(StringArray::from(values)),
                    key_of_group,
                }
            })
            .collect();
        let dropped = Dropped::of(spec);
        Recoder {
            labels,
            group_of_row: partition.group_of_row().into(),
            dropped,
            pseudonymised: pseudonymised_columns(spec),
            pseudonymiser: Pseudonymiser::default(),
        }
    }

    /// Uses the keys of `pseudonymiser` for the pseudonymised columns.
    /// Without it, recoding a batch holding a pseudonymised column fails:
    /// a raw value is never published for want of a key.
    pub fn with_pseudonymiser(mut self, pseudonymiser: Pseudonymiser) -> Self {
        self.pseudonymiser = pseudonymiser;
        self
    }

    fn action(&self, name: &str) -> Action {
        if self.dropped.contains(name) {
            Action::Drop
        } else if self.pseudonymised.iter().any(|p| p == name) {
            Action::Pseudonymise
        } else if let Some(i) = self.labels.iter().position(|l| l.name == name) {
            Action::Recode(i)
        } else {
            Action::Keep
        }
    }

    /// The schema of the release for an input schema: QI columns become
    /// `Dictionary(Int32, Utf8)`, identifying columns disappear,
    /// pseudonymised columns become `Utf8` (nullable as the input), the rest
    /// is unchanged. The same as [`release_schema`] of the job.
    ///
    /// The input's schema-level metadata is not carried over: it describes
    /// the input (pandas' metadata names dropped columns and an index that
    /// encodes input row positions), not the release.
    pub fn output_schema(&self, input: &Schema) -> SchemaRef {
        let fields: Vec<Field> = input
            .fields()
            .iter()
            .filter_map(|f| match self.action(f.name()) {
                Action::Drop => None,
                Action::Keep => Some(f.as_ref().clone()),
                Action::Pseudonymise => Some(
                    Field::new(f.name(), DataType::Utf8, f.is_nullable())
                        .with_metadata(f.metadata().clone()),
                ),
                Action::Recode(_) => Some(
                    Field::new(
                        f.name(),
                        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                        false,
                    )
                    .with_metadata(f.metadata().clone()),
                ),
            })
            .collect();
        Arc::new(Schema::new(fields))
    }

    /// Recodes one input batch whose first row is input row `row_offset`.
    ///
    /// # Errors
    /// [`Error::Internal`] when the batch runs past the partition's rows.
    pub fn recode(&self, batch: &RecordBatch, row_offset: usize) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let groups = self
            .group_of_row
            .get(row_offset..row_offset + n)
            .ok_or_else(|| {
                Error::Internal(format!(
                    "batch rows {row_offset}..{} beyond the partition",
                    row_offset + n
                ))
            })?;
        let keep: Option<BooleanArray> = groups
            .contains(&SUPPRESSED)
            .then(|| groups.iter().map(|&g| Some(g != SUPPRESSED)).collect());
        let schema = self.output_schema(batch.schema().as_ref());
        let mut columns = Vec::with_capacity(schema.fields().len());
        for (f, array) in batch.schema().fields().iter().zip(batch.columns()) {
            match self.action(f.name()) {
                Action::Drop => {}
                Action::Keep => columns.push(match &keep {
                    Some(k) => filter(array, k)?,
                    None => array.clone(),
                }),
                Action::Pseudonymise => {
                    let kept = match &keep {
                        Some(k) => filter(array, k)?,
                        None => array.clone(),
                    };
                    columns.push(self.pseudonymiser.pseudonymise(f.name(), &kept)?);
                }
                Action::Recode(i) => {
                    let l = &self.labels[i];
                    let keys: Int32Array = groups
                        .iter()
                        .filter(|&&g| g != SUPPRESSED)
                        .map(|&g| l.key_of_group[g as usize])
                        .collect();
                    let dict = DictionaryArray::<Int32Type>::try_new(keys, l.values.clone())?;
                    columns.push(Arc::new(dict) as ArrayRef);
                }
            }
        }
        let rows = keep.as_ref().map_or(n, |k| k.true_count());
        Ok(RecordBatch::try_new_with_options(
            schema,
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    /// The number of input rows the recoder expects.
    pub fn n_rows(&self) -> usize {
        self.group_of_row.len()
    }

    /// The group of every input row ([`SUPPRESSED`] for withheld rows).
    pub fn group_of_row(&self) -> &[u32] {
        &self.group_of_row
    }

    /// The number of groups.
    pub fn n_groups(&self) -> usize {
        self.labels.first().map_or_else(
            || {
                self.group_of_row
                    .iter()
                    .filter(|&&g| g != SUPPRESSED)
                    .max()
                    .map_or(0, |&g| g as usize + 1)
            },
            |l| l.key_of_group.len(),
        )
    }

    /// The release order of this recoding's groups under `seed`, from the
    /// labels each group publishes (see [`crate::order`]).
    pub fn release_order(&self, seed: u64) -> crate::order::ReleaseOrder {
        let label_of_group: Vec<Vec<u8>> = (0..self.n_groups())
            .map(|g| {
                let mut bytes = Vec::new();
                for l in &self.labels {
                    let values = l.values.as_any().downcast_ref::<StringArray>();
                    let label = l
                        .key_of_group
                        .get(g)
                        .zip(values)
                        .map_or("", |(&k, v)| v.value(k as usize));
                    bytes.extend_from_slice(&(label.len() as u64).to_le_bytes());
                    bytes.extend_from_slice(label.as_bytes());
                }
                bytes
            })
            .collect();
        crate::order::ReleaseOrder::new(&self.group_of_row, &label_of_group, seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::Encoder;
    use arrow::array::Int64Array;

    #[test]
    fn release_schema_is_known_before_the_data() {
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "age", "role": "qi"},
                {"name": "name", "role": "identifying"}]}"#,
        )
        .unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8, false),
            Field::new("age", DataType::Int64, true),
            Field::new("note", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
                Arc::new(Int64Array::from(vec![30, 40])),
                Arc::new(StringArray::from(vec![Some("x"), None])),
            ],
        )
        .unwrap();
        let mut enc = Encoder::try_new(&spec, &Default::default(), &schema).unwrap();
        enc.push(&batch).unwrap();
        let table = enc.finish().unwrap();
        let partition = Partition::tightest(&table, vec![0, 0]);
        let recoder = Recoder::new(&spec, &table, &partition);
        let planned = release_schema(&spec, &schema);
        assert_eq!(planned, recoder.output_schema(&schema));
        assert_eq!(planned, recoder.recode(&batch, 0).unwrap().schema());
        assert_eq!(planned.fields().len(), 2);
    }

    #[test]
    fn label_dictionaries_do_not_follow_input_order() {
        let spec: JobSpec =
            serde_json::from_str(r#"{"attributes": [{"name": "age", "role": "qi"}]}"#).unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("age", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![50, 30, 40])) as ArrayRef],
        )
        .unwrap();
        let mut enc = Encoder::try_new(&spec, &Default::default(), &schema).unwrap();
        enc.push(&batch).unwrap();
        let table = enc.finish().unwrap();
        // Group ids in input order, as the algorithms number them.
        let partition = Partition::tightest(&table, vec![0, 1, 2]);
        let out = Recoder::new(&spec, &table, &partition)
            .recode(&batch, 0)
            .unwrap();
        let dict = out
            .column(0)
            .as_any()
            .downcast_ref::<DictionaryArray<Int32Type>>()
            .unwrap();
        let values = dict
            .values()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let values: Vec<&str> = values.iter().map(|v| v.unwrap()).collect();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        assert_eq!(values, sorted);
        assert_eq!(values.len(), 3);
    }

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
