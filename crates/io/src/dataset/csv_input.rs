//! Opening CSV input: the job's delimiter, quote, escape and comment
//! settings, type inference from the first rows, error messages that name
//! the column and line but never a value, and the reader that hashes the
//! bytes for the input fingerprint.

use std::cell::RefCell;
use std::io::Read;
use std::rc::Rc;
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::datatypes::Schema;
use arrow::error::ArrowError;
use kanon_engine::spec::InputSpec;
use sha2::{Digest, Sha256};

use super::{Dataset, Format, InputFile};
use crate::exit::Failure;
use crate::storage::{FileMeta, Location, Storage};

fn one_char(setting: &str, v: &Option<String>) -> Result<Option<u8>> {
    match v.as_deref() {
        None => Ok(None),
        Some("\\t") | Some("tab") => Ok(Some(b'\t')),
        Some(s) if s.len() == 1 => Ok(Some(s.as_bytes()[0])),
        Some(_) => Err(Failure::bad_input(format!(
            "`input.{setting}` must be one ASCII character, e.g. \";\""
        ))
        .into()),
    }
}

impl Dataset {
    pub(super) fn open_csv(
        storage: &Storage,
        metas: Vec<FileMeta>,
        bytes: u64,
        spec: &InputSpec,
    ) -> Result<Dataset> {
        let mut format = arrow_csv::reader::Format::default()
            .with_delimiter(one_char("delimiter", &spec.delimiter)?.unwrap_or(b','))
            .with_header(spec.header.unwrap_or(true));
        if let Some(q) = one_char("quote", &spec.quote)? {
            format = format.with_quote(q);
        }
        if let Some(e) = one_char("escape", &spec.escape)? {
            format = format.with_escape(e);
        }
        if let Some(c) = one_char("comment", &spec.comment)? {
            format = format.with_comment(c);
        }
        let first = &metas[0];
        let infer_rows = spec.infer_rows.unwrap_or(10_000).max(1);
        let reader = storage.open_read(&first.location)?;
        let (schema, _) = format
            .infer_schema(reader, Some(infer_rows))
            .map_err(|e| csv_error(e, &first.location, None, 0))
            .with_context(|| {
                format!(
                    "cannot read the CSV header and types of {} (check `input.delimiter`, `input.header`, `input.quote`)",
                    first.location
                )
            })?;
        let schema = keep_identities(storage, first, &format, schema, spec, infer_rows)?;
        Ok(Dataset {
            format: Format::Csv,
            schema: Arc::new(schema),
            rows: None,
            bytes,
            files: metas
                .into_iter()
                .map(|meta| InputFile {
                    meta,
                    parquet: None,
                })
                .collect(),
            csv: Some(format),
            csv_header: spec.header.unwrap_or(true),
            csv_infer_rows: infer_rows,
            footer_hash: None,
            delta_version: None,
            memory: None,
        })
    }
}

/// The inferred schema with every column whose values would change
/// identity as numbers or booleans read as text instead (issue 32, item 5):
/// the job's identifying and pseudonymised columns always
/// ([`InputSpec::text_columns`]), and any column whose sampled values
/// (the rows type inference read) are not all in a form that reading as
/// the type keeps: `007`, `+7` or `TRUE` would be read as `7`, `7` and
/// `true`, so four patients `007`, `07`, `7` and `0007` would become one.
/// (Rows past the sample are not checked: an identifier column is
/// declared `identifying` or `pseudonymised` and always read as text.)
fn keep_identities(
    storage: &Storage,
    first: &FileMeta,
    format: &arrow_csv::reader::Format,
    schema: Schema,
    spec: &InputSpec,
    infer_rows: usize,
) -> Result<Schema> {
    use arrow::array::{Array, StringArray};
    use arrow::datatypes::{DataType, Field};
    let typed: Vec<usize> = schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| !matches!(f.data_type(), DataType::Utf8 | DataType::Null))
        .map(|(i, _)| i)
        .collect();
    let mut text: Vec<bool> = schema
        .fields()
        .iter()
        .map(|f| spec.text_columns.iter().any(|c| c == f.name()))
        .collect();
    let sampled: Vec<usize> = typed.iter().copied().filter(|&i| !text[i]).collect();
    if !sampled.is_empty() {
        // The same rows again, every column as text.
        let as_text = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| Field::new(f.name(), DataType::Utf8, true))
                .collect::<Vec<_>>(),
        ));
        let reader = arrow_csv::ReaderBuilder::new(as_text.clone())
            .with_format(format.clone())
            .with_projection(sampled.clone())
            .build(storage.open_read(&first.location)?)
            .map_err(|e| csv_error(e, &first.location, Some(&as_text), 0))?;
        let mut seen = 0usize;
        for batch in reader {
            let batch = batch.map_err(|e| csv_error(e, &first.location, Some(&as_text), 0))?;
            let take = batch.num_rows().min(infer_rows - seen);
            for (j, &i) in sampled.iter().enumerate() {
                if text[i] {
                    continue;
                }
                let values = batch
                    .column(j)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .expect("read as Utf8");
                let ty = schema.field(i).data_type();
                text[i] = (0..take)
                    .filter(|&r| values.is_valid(r))
                    .any(|r| !prints_back(values.value(r), ty));
            }
            seen += take;
            if seen >= infer_rows {
                break;
            }
        }
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(&text)
        .map(|(f, &as_text)| match as_text {
            true if f.data_type() != &DataType::Utf8 => {
                tracing::info!(column = %f.name(), inferred = %f.data_type(), "CSV column read as text: an identifier, or values a number would change");
                Field::new(f.name(), DataType::Utf8, true)
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    Ok(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Whether a CSV column of type `ty` is read as text and converted by
/// [`typed`]: the types whose reading can change a value's identity.
fn read_as_text(ty: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType;
    matches!(ty, DataType::Int64 | DataType::Float64 | DataType::Boolean)
}

/// The schema the CSV reader reads `schema` with: numbers and booleans as
/// text, converted by [`typed`].
pub(super) fn as_read(schema: &Schema) -> Arc<Schema> {
    use arrow::datatypes::{DataType, Field};
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| match read_as_text(f.data_type()) {
                true => Field::new(f.name(), DataType::Utf8, f.is_nullable()),
                false => f.as_ref().clone(),
            })
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    ))
}

/// A batch read with [`as_read`] in the dataset's (projected) `schema`:
/// every number and boolean converted from its text, after checking that
/// the text is the one form the value prints as (issue 32, item 5: type
/// inference never changes a value's identity). A value past the rows type
/// inference read (`infer_rows`) that would change (`007` in a column of
/// numbers) stops the job: the column's type was decided on the first
/// rows, and both passes must read it alike. `first_line` is the file's
/// line of the batch's first row.
///
/// # Errors
/// A bad-input failure naming the column, file and line, never the value.
pub(super) fn typed(
    batch: arrow::array::RecordBatch,
    schema: &arrow::datatypes::SchemaRef,
    file: &Location,
    first_line: u64,
    infer_rows: usize,
) -> Result<arrow::array::RecordBatch> {
    use arrow::array::{Array, StringArray};
    let mut columns = batch.columns().to_vec();
    for (i, f) in schema.fields().iter().enumerate() {
        let ty = f.data_type();
        if !read_as_text(ty) {
            continue;
        }
        let Some(text) = columns[i].as_any().downcast_ref::<StringArray>() else {
            continue;
        };
        let name = f.name();
        if let Some(r) =
            (0..text.len()).find(|&r| text.is_valid(r) && !prints_back(text.value(r), ty))
        {
            let line = first_line + r as u64;
            let message = match parses(text.value(r), ty) {
                false => format!(
                    "malformed CSV in {file}: a value of column `{name}` on line {line} is not of type {ty} (inferred from the first {infer_rows} rows); fix the data, or raise `input.infer_rows` so that the type is inferred from more rows"
                ),
                true => format!(
                    "CSV column `{name}` of {file} was read as {ty} (inferred from the first {infer_rows} rows), but line {line} holds a value that reading as {ty} would change (a leading zero, a plus sign or another spelling, as `007` would become 7); nothing was written: raise `input.infer_rows` to cover the file so that the column is read as text"
                ),
            };
            return Err(Failure::bad_input(message).into());
        }
        let options = arrow::compute::CastOptions {
            safe: false,
            ..Default::default()
        };
        columns[i] = arrow::compute::cast_with_options(&columns[i], ty, &options).map_err(|_| {
            Failure::bad_input(format!(
                "malformed CSV in {file}: a value of column `{name}` is not of type {ty} (inferred from the first {infer_rows} rows); fix the data, or raise `input.infer_rows` so that the type is inferred from more rows"
            ))
        })?;
    }
    arrow::array::RecordBatch::try_new(schema.clone(), columns)
        .with_context(|| format!("{file} does not match the dataset schema"))
}

/// Whether `text` reads as a value of `ty` at all.
fn parses(text: &str, ty: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType;
    match ty {
        DataType::Int64 => text.parse::<i64>().is_ok(),
        DataType::Float64 => text.parse::<f64>().is_ok(),
        DataType::Boolean => {
            text.eq_ignore_ascii_case("true") || text.eq_ignore_ascii_case("false")
        }
        _ => true,
    }
}

/// Whether `text` is the one form a value of `ty` prints as, so reading it
/// as `ty` keeps its identity. Empty text is null.
fn prints_back(text: &str, ty: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType;
    if text.is_empty() {
        return true;
    }
    match ty {
        DataType::Int64 => text.parse::<i64>().is_ok_and(|v| v.to_string() == text),
        DataType::Float64 => {
            // A quantity may be written `1.50` or `1.5e0`; a leading zero
            // or plus sign says the text is a code (`007.5`, `+33.1`).
            let digits = text.strip_prefix('-').unwrap_or(text);
            let leading_zero =
                digits.len() > 1 && digits.starts_with('0') && !digits[1..].starts_with('.');
            !(digits.starts_with('+') || leading_zero)
        }
        DataType::Boolean => text == "true" || text == "false",
        // Dates and timestamps: arrow reads the ISO forms it infers.
        _ => true,
    }
}

/// A CSV error without record values: arrow's parse errors quote the value
/// and the whole row, so only the column and line are kept.
pub fn csv_error(
    e: ArrowError,
    file: &Location,
    schema: Option<&Schema>,
    header_lines: usize,
) -> anyhow::Error {
    let text = e.to_string();
    let message = if let Some(pos) = text.find(" as type '") {
        let rest = &text[pos + 10..];
        let ty = rest.split('\'').next().unwrap_or("?");
        let column = rest
            .split("for column ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|c| c.parse::<usize>().ok());
        // arrow counts data rows from 1; the file has the header above them.
        let line = rest
            .split(" at line ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|l| l.parse::<usize>().ok())
            .map_or("?".to_string(), |l| (l + header_lines).to_string());
        let name = match (column, schema) {
            (Some(c), Some(s)) if c < s.fields().len() => format!("`{}`", s.field(c).name()),
            (Some(c), _) => format!("number {c}"),
            _ => "?".into(),
        };
        format!(
            "malformed CSV in {file}: a value of column {name} on line {line} is not of type {ty} (inferred from the first rows); fix the data, or raise `input.infer_rows` so that the type is inferred from more rows"
        )
    } else if text.contains("Row data") || text.contains("value '") {
        format!("malformed CSV in {file} (details withheld: they would show record values)")
    } else {
        format!("malformed CSV in {file}: {text}")
    };
    anyhow::Error::new(Failure::bad_input(message))
}

pub(super) fn csv_read_error(
    e: ArrowError,
    loc: &Location,
    schema: &Schema,
    header: usize,
) -> anyhow::Error {
    match e {
        ArrowError::IoError(msg, io) => anyhow::Error::new(io).context(format!(
            "cannot read {loc}: {}",
            msg.split(" value '").next().unwrap_or("")
        )),
        ArrowError::ExternalError(inner) => {
            anyhow::anyhow!(inner).context(format!("cannot read {loc}"))
        }
        e => csv_error(e, loc, Some(schema), header),
    }
}

/// A CSV `Read` that hashes the bytes it passes on.
pub(super) struct Hashing<R> {
    pub(super) inner: R,
    pub(super) hasher: Rc<RefCell<Sha256>>,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.borrow_mut().update(&buf[..n]);
        Ok(n)
    }
}
