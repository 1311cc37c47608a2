//! Recoding: a partition applied to the original record batches, batch by
//! batch, in input order.
//!
//! QI columns are replaced by their published labels as dictionary-encoded
//! strings (one shared dictionary per column, so every batch only writes
//! keys); identifying columns are dropped; pseudonymised columns become the
//! keyed HMAC-SHA256 of their values ([`Pseudonymiser`]); suppressed rows are
//! withheld; every other column passes through untouched (type,
//! nullability, metadata).
//!
//! Pseudonyms (keys, HMAC, and the check that a released column holds
//! only pseudonyms) are their own concept, in `pseudonym`.

mod pseudonym;

pub use pseudonym::{
    check_pseudonymised, is_pseudonym, Fingerprinter, Pseudonymiser, MIN_KEY_BYTES,
};

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, DictionaryArray, Int32Array, RecordBatch, StringArray,
};
use arrow::compute::filter;
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use rustc_hash::FxHashMap;

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
        sensitive_hierarchies: FxHashMap::default(),
        entities: None,
        coded: coded_columns(spec),
    };
    recoder.output_schema(input)
}

/// The input columns whose values a release never reads: the QIs (published
/// as their class's labels, recoded from the partition alone) and the
/// dropped columns. A front end that keeps input batches until they are
/// recoded may replace these by [`unread_placeholder`]s.
pub fn unread_columns(spec: &JobSpec, input: &Schema) -> Vec<usize> {
    let dropped = Dropped::of(spec);
    input
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            dropped.contains(f.name()) || spec.quasi_identifiers().any(|a| &a.name == f.name())
        })
        .map(|(i, _)| i)
        .collect()
}

/// `batch` with its `unread` columns ([`unread_columns`]) replaced by
/// all-null columns of type `Null` (no memory), keeping their names and
/// metadata: [`Recoder::recode`] releases the same rows from it.
///
/// # Errors
/// Arrow failures.
pub fn unread_placeholder(batch: &RecordBatch, unread: &[usize]) -> Result<RecordBatch> {
    if unread.is_empty() {
        return Ok(batch.clone());
    }
    let schema = batch.schema();
    let mut fields: Vec<Field> = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (i, (f, c)) in schema.fields().iter().zip(batch.columns()).enumerate() {
        if unread.contains(&i) {
            fields.push(
                Field::new(f.name(), DataType::Null, true).with_metadata(f.metadata().clone()),
            );
            columns.push(arrow::array::new_null_array(
                &DataType::Null,
                batch.num_rows(),
            ));
        } else {
            fields.push(f.as_ref().clone());
            columns.push(c.clone());
        }
    }
    Ok(RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// The coded columns of a job that the recoder codes (not the
/// quasi-identifiers, coded when they are encoded).
fn coded_columns(spec: &JobSpec) -> Vec<crate::coding::Coded> {
    crate::coding::Coded::of(
        spec.attributes
            .iter()
            .filter(|a| matches!(a.role, Role::Sensitive | Role::Insensitive)),
    )
}

/// The label every group of `partition` publishes, per QI column of
/// `table`: its cell's label, or the aggregate of its values when the
/// column names `microaggregation`. What the release shows, and so what
/// its classes are ([`crate::metrics::classes_by_labels`]).
pub(crate) fn group_labels(
    spec: &JobSpec,
    table: &QiTable,
    partition: &Partition,
) -> Vec<Vec<String>> {
    table
        .columns()
        .iter()
        .enumerate()
        .map(|(q, col)| {
            let aggregated = spec
                .attributes
                .iter()
                .find(|a| a.name == col.name())
                .and_then(|a| a.microaggregation);
            match aggregated {
                Some(m) => crate::microaggregation::labels(m, col, q, partition),
                None => (0..partition.n_groups())
                    .map(|g| col.cell_label(&partition.tuple(g)[q]))
                    .collect(),
            }
        })
        .collect()
}

/// The pseudonymised columns of a job.
fn pseudonymised_columns(spec: &JobSpec) -> Vec<String> {
    spec.attributes
        .iter()
        .filter(|a| a.role == Role::Pseudonymised)
        .map(|a| a.name.clone())
        .collect()
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
    /// The hierarchies of the sensitive attributes that name one, by the
    /// path written in the job: the release verifier needs them for
    /// hierarchical-distance t-closeness.
    sensitive_hierarchies: FxHashMap<String, Arc<crate::hierarchy::Hierarchy>>,
    /// The person of every row, when the person is the job's unit.
    entities: Option<Arc<crate::entity::Entities>>,
    /// The top- and bottom-coded columns that are not quasi-identifiers
    /// (a quasi-identifier is coded when it is encoded).
    coded: Vec<crate::coding::Coded>,
}

/// What to do with one input column.
enum Action {
    Keep,
    Drop,
    Recode(usize),
    Pseudonymise,
    /// Top and bottom coding of `coded[i]`.
    Code(usize),
}

impl Recoder {
    /// Prepares the labels of every group.
    pub fn new(spec: &JobSpec, table: &QiTable, partition: &Partition) -> Self {
        let names: Vec<&str> = table.columns().iter().map(|c| c.name()).collect();
        let mut recoder = Self::from_labels(
            spec,
            &names,
            group_labels(spec, table, partition),
            partition.group_of_row().to_vec(),
        );
        recoder.sensitive_hierarchies = spec
            .sensitive()
            .filter_map(|a| {
                let path = a.hierarchy.as_ref()?;
                let column = table.sensitive().iter().find(|c| c.name() == a.name)?;
                Some((path.clone(), column.hierarchy()?.hierarchy().clone()))
            })
            .collect();
        recoder
    }

    /// The recoder of rows whose groups were decided elsewhere (a worker
    /// applying a coordinator's plan, issue 35): `labels[q][g]` is what
    /// group `g` publishes in QI `names[q]`, and `group_of_row` the group
    /// of every input row (or [`SUPPRESSED`]).
    pub fn from_labels(
        spec: &JobSpec,
        names: &[&str],
        labels: Vec<Vec<String>>,
        group_of_row: Vec<u32>,
    ) -> Self {
        let labels = names
            .iter()
            .zip(labels)
            .map(|(name, labels)| {
                let mut index: FxHashMap<String, i32> = FxHashMap::default();
                let mut values: Vec<String> = Vec::new();
                let mut key_of_group: Vec<i32> = labels
                    .into_iter()
                    .map(|label| {
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
                    name: name.to_string(),
                    values: Arc::new(StringArray::from(values)),
                    key_of_group,
                }
            })
            .collect();
        Recoder {
            labels,
            group_of_row: group_of_row.into(),
            dropped: Dropped::of(spec),
            pseudonymised: pseudonymised_columns(spec),
            pseudonymiser: Pseudonymiser::default(),
            sensitive_hierarchies: FxHashMap::default(),
            entities: None,
            coded: coded_columns(spec),
        }
    }

    /// The hierarchies of the job's sensitive attributes, by the path
    /// written in the job (for [`crate::verify::ReleaseVerifier::try_with_hierarchies`]).
    pub fn sensitive_hierarchies(&self) -> &FxHashMap<String, Arc<crate::hierarchy::Hierarchy>> {
        &self.sensitive_hierarchies
    }

    /// Makes the person of every row known to the release's verifier
    /// ([`crate::release::Releaser`]), when the person is the job's unit.
    pub fn with_entities(mut self, entities: Option<Arc<crate::entity::Entities>>) -> Self {
        self.entities = entities;
        self
    }

    /// The person of every row, when the person is the job's unit
    /// ([`crate::entity`]).
    pub fn entities(&self) -> Option<&crate::entity::Entities> {
        self.entities.as_deref()
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
        } else if let Some(i) = self.coded.iter().position(|c| c.name == name) {
            Action::Code(i)
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
                // A dictionary of numbers is published plain once coded.
                Action::Code(_) => Some(match f.data_type() {
                    DataType::Dictionary(_, value) => {
                        Field::new(f.name(), value.as_ref().clone(), f.is_nullable())
                            .with_metadata(f.metadata().clone())
                    }
                    _ => f.as_ref().clone(),
                }),
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
                Action::Code(i) => {
                    let kept = match &keep {
                        Some(k) => filter(array, k)?,
                        None => array.clone(),
                    };
                    columns.push(crate::coding::code_array(&self.coded[i], &kept)?);
                }
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
            .with_class_columns(self.labels.iter().map(|l| l.name.clone()).collect())
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
}
