//! Opening Parquet input: each file's footer is read (a few objects at a
//! time on S3) and decoded, the schemas are unified into the dataset's, and
//! the footers hashed into the input fingerprint. [`ObjectReader`] then
//! serves the async reader's byte ranges of an object during the scan.

use std::sync::Arc;

use anyhow::Result;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::file::metadata::{FooterTail, ParquetMetaDataReader};
use sha2::{Digest, Sha256};

use super::{Dataset, Format, InputFile};
use crate::exit::Failure;
use crate::storage::{FileMeta, Location, Storage};

impl Dataset {
    pub(super) fn open_parquet(
        storage: &Storage,
        location: &Location,
        metas: Vec<FileMeta>,
        bytes: u64,
    ) -> Result<Dataset> {
        let footers: Vec<(FileMeta, Vec<u8>)> = if location.is_remote() {
            // Footers of many objects: a few requests in flight at once.
            storage.block_on(
                futures::stream::iter(metas.into_iter().map(|m| async move {
                    let footer = remote_footer(storage, &m).await?;
                    Ok::<_, anyhow::Error>((m, footer))
                }))
                .buffered(8)
                .try_collect(),
            )?
        } else {
            metas
                .into_iter()
                .map(|m| {
                    let footer = read_footer(storage, &m)?;
                    Ok((m, footer))
                })
                .collect::<Result<_>>()?
        };
        let opened = footers.into_iter().map(|(m, footer)| {
            let md = ParquetMetaDataReader::decode_metadata(&footer).map_err(|e| {
                Failure::bad_input(format!(
                    "{} is not a readable Parquet file (corrupt footer: {e})",
                    m.location
                ))
            })?;
            let arrow = ArrowReaderMetadata::try_new(Arc::new(md), ArrowReaderOptions::new())
                .map_err(|e| {
                    Failure::bad_input(format!(
                        "{} has a Parquet schema kanon cannot read: {e}",
                        m.location
                    ))
                })?;
            let mut h = Sha256::new();
            h.update(m.size.to_le_bytes());
            h.update(&footer);
            Ok::<_, anyhow::Error>((
                InputFile {
                    meta: m,
                    parquet: Some(arrow),
                },
                h.finalize().to_vec(),
            ))
        });
        let opened: Vec<(InputFile, Vec<u8>)> = opened.collect::<Result<_>>()?;
        let mut hasher = Sha256::new();
        let mut files = Vec::with_capacity(opened.len());
        for (f, h) in opened {
            hasher.update(h);
            files.push(f);
        }
        let schema = unify_schemas(files.iter().map(|f| {
            (
                &f.meta.location,
                f.parquet.as_ref().expect("parquet").schema(),
            )
        }))?;
        // Files whose strings are stored otherwise (dictionary-encoded or
        // plain) are read in the dataset's type.
        for f in &mut files {
            let arrow = f.parquet.as_ref().expect("parquet");
            let differs = arrow
                .schema()
                .fields()
                .iter()
                .zip(schema.fields())
                .any(|(a, b)| a.data_type() != b.data_type());
            if differs {
                let fields: Vec<Field> = arrow
                    .schema()
                    .fields()
                    .iter()
                    .zip(schema.fields())
                    .map(|(a, b)| a.as_ref().clone().with_data_type(b.data_type().clone()))
                    .collect();
                let as_dataset = Arc::new(Schema::new_with_metadata(
                    fields,
                    arrow.schema().metadata().clone(),
                ));
                let reread = ArrowReaderMetadata::try_new(
                    arrow.metadata().clone(),
                    ArrowReaderOptions::new().with_schema(as_dataset),
                )
                .map_err(|e| {
                    Failure::bad_input(format!(
                        "{} cannot be read with the dataset's schema: {e}",
                        f.meta.location
                    ))
                })?;
                f.parquet = Some(reread);
            }
        }
        let rows = files
            .iter()
            .map(|f| {
                f.parquet
                    .as_ref()
                    .expect("parquet")
                    .metadata()
                    .file_metadata()
                    .num_rows() as u64
            })
            .sum();
        Ok(Dataset {
            format: Format::Parquet,
            schema,
            rows: Some(rows),
            bytes,
            files,
            csv: None,
            csv_header: false,
            csv_infer_rows: 0,
            footer_hash: Some(hasher.finalize().into()),
            delta_version: None,
            memory: None,
        })
    }
}

fn not_parquet(m: &FileMeta, why: &str) -> anyhow::Error {
    Failure::bad_input(format!(
        "{} is not a readable Parquet file ({why}); check the file, or set `input.format = \"csv\"` if it is CSV",
        m.location
    ))
    .into()
}

/// The footer length from a file's last 8 bytes.
fn footer_len(m: &FileMeta, tail: &[u8]) -> Result<u64> {
    if m.size < 12 {
        return Err(not_parquet(m, "too short"));
    }
    let tail =
        FooterTail::try_from(tail).map_err(|_| not_parquet(m, "no Parquet magic at its end"))?;
    if tail.is_encrypted_footer() {
        return Err(not_parquet(m, "its footer is encrypted"));
    }
    let len = tail.metadata_length() as u64;
    if len + 12 > m.size {
        return Err(not_parquet(m, "footer length beyond the file"));
    }
    Ok(len)
}

/// The bytes of a local Parquet file's footer (the Thrift metadata).
fn read_footer(storage: &Storage, m: &FileMeta) -> Result<Vec<u8>> {
    if m.size < 12 {
        return Err(not_parquet(m, "too short"));
    }
    let tail = storage.read_range(&m.location, m.size - 8..m.size)?;
    let len = footer_len(m, &tail)?;
    Ok(storage
        .read_range(&m.location, m.size - 8 - len..m.size - 8)?
        .to_vec())
}

/// [`read_footer`] of an object, async (many in flight).
async fn remote_footer(storage: &Storage, m: &FileMeta) -> Result<Vec<u8>> {
    use object_store::ObjectStoreExt;
    if m.size < 12 {
        return Err(not_parquet(m, "too short"));
    }
    let Location::S3 { bucket, .. } = &m.location else {
        unreachable!("remote footer of a local file")
    };
    let store = storage.s3(bucket)?;
    let path = m.location.object_path().expect("s3 path");
    // One request for the usual footer sizes, a second for larger ones.
    let guess = m.size.min(64 * 1024);
    let tail = store
        .get_range(&path, m.size - guess..m.size)
        .await
        .map_err(|e| crate::storage::s3_error(e, &m.location))?;
    let len = footer_len(m, &tail[tail.len() - 8..])?;
    if len + 8 <= guess {
        let start = (guess - 8 - len) as usize;
        return Ok(tail[start..tail.len() - 8].to_vec());
    }
    Ok(store
        .get_range(&path, m.size - 8 - len..m.size - 8)
        .await
        .map_err(|e| crate::storage::s3_error(e, &m.location))?
        .to_vec())
}

/// The dataset schema: every file must have the same column names and
/// types, except that strings may be dictionary-encoded in some files and
/// plain in others (Delta tables written by several engines), which the
/// dataset reads as plain strings; a column is nullable when it is in any
/// file; metadata is the first file's.
fn unify_schemas<'a>(
    mut schemas: impl Iterator<Item = (&'a Location, &'a SchemaRef)>,
) -> Result<SchemaRef> {
    let (first_loc, first) = schemas.next().expect("at least one file");
    let mut fields: Vec<Field> = first.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (loc, s) in schemas {
        let same = s.fields().len() == fields.len()
            && s.fields()
                .iter()
                .zip(&fields)
                .all(|(a, b)| a.name() == b.name() && same_values(a.data_type(), b.data_type()));
        if !same {
            let describe =
                |fs: &mut dyn Iterator<Item = (&String, &arrow::datatypes::DataType)>| {
                    fs.map(|(n, t)| format!("{n}: {t}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
            return Err(Failure::bad_input(format!(
                "input files have different schemas: {first_loc} has [{}] but {loc} has [{}]; a dataset's files must share one schema",
                describe(&mut fields.iter().map(|f| (f.name(), f.data_type()))),
                describe(&mut s.fields().iter().map(|f| (f.name(), f.data_type())))
            ))
            .into());
        }
        for (f, g) in fields.iter_mut().zip(s.fields()) {
            if g.is_nullable() && !f.is_nullable() {
                *f = f.clone().with_nullable(true);
            }
            if f.data_type() != g.data_type() {
                *f = f.clone().with_data_type(DataType::Utf8);
            }
        }
    }
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        first.metadata().clone(),
    )))
}

/// Whether two column types hold the same values: equal, or both strings
/// (`Utf8`, `LargeUtf8`, `Utf8View`, plain or dictionary-encoded).
fn same_values(a: &DataType, b: &DataType) -> bool {
    // Every Arrow string type: another engine's DELETE or OPTIMIZE of a
    // Delta release rewrites kanon's dictionary columns as Utf8View or
    // LargeUtf8 (issue 32, item 9).
    fn plain(t: &DataType) -> bool {
        matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
    }
    let string = |t: &DataType| match t {
        DataType::Dictionary(_, v) => plain(v),
        t => plain(t),
    };
    a == b || (string(a) && string(b))
}

/// Byte ranges of one object for the async Parquet reader; the footer was
/// already read by [`Dataset::open`]. Written here on purpose: parquet 59
/// deprecates its `ParquetObjectReader` in favour of implementing
/// `AsyncFileReader` directly over `object_store` (apache/arrow-rs#10308).
pub(super) struct ObjectReader {
    pub(super) store: Arc<dyn object_store::ObjectStore>,
    pub(super) path: object_store::path::Path,
    pub(super) metadata: Arc<parquet::file::metadata::ParquetMetaData>,
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<bytes::Bytes>> {
        use object_store::ObjectStoreExt;
        Box::pin(async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
        })
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<Vec<bytes::Bytes>>> {
        Box::pin(async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
        })
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> futures::future::BoxFuture<
        'a,
        parquet::errors::Result<Arc<parquet::file::metadata::ParquetMetaData>>,
    > {
        let m = self.metadata.clone();
        Box::pin(async move { Ok(m) })
    }
}
