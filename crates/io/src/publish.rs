//! The one way kanon publishes a release: [`Publisher`] owns the writer, the
//! manifest with the certificate, the read-back verification of Delta data
//! files and the atomic commit, for every destination (a Parquet file or a
//! split directory, locally or on S3, and a Delta table).
//!
//! `kanon anonymize`, `kanon sql --output` and `kanon sql`'s `INSERT INTO`
//! a Delta table all publish through it, so every release kanon writes
//! carries a certificate that `kanon verify` re-checks, and none is
//! committed before it was verified (issue 32, item 10; issue 33, item 3).
//!
//! The caller verifies the rows it writes (the engine's release check, or
//! [`crate::release_check::ReleaseCheck`] on a query's result) and hands the
//! [`Verified`] figures and the certificate to [`Publisher::publish`]:
//! - a Parquet release gets its manifest (`release::Manifest`) and is
//!   renamed or copied into place (`release::ReleaseWriter::commit`);
//! - a Delta release's data files are completed in place, read back and
//!   verified again against the job (they must be the release verified),
//!   and only then committed with the certificate in the commit's info.
//!
//! Whatever fails, nothing is published: the temporary files and uploads
//! are removed, and a Delta table stays at its version.

use std::time::Instant;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use kanon_engine::privacy::Privacy;
use kanon_engine::verify::Verified;

use crate::certificate::{Certificate, CertifiedFile};
use crate::config::JobFile;
use crate::dataset::Dataset;
use crate::delta::{DeltaOutput, Outcome, Table, WrittenFile};
use crate::exit::Failure;
use crate::ops::{barrier, check_interrupt, Ui};
use crate::release::{relative_name, Manifest, ReleaseOptions, ReleaseWriter};
use crate::release_check::Checked;
use crate::storage::{Location, Storage};

/// Where a release is published.
pub enum Target {
    /// A Parquet file, or a directory or prefix of parts.
    Parquet(Location),
    /// A Delta table: where and how, and the table.
    Delta(DeltaOutput, Table),
}

impl Target {
    /// Where the writer puts the files: the release itself, or the data
    /// directory of a Delta table.
    fn destination(&self) -> Location {
        match self {
            Target::Parquet(l) => l.clone(),
            Target::Delta(d, _) => d.data_dir(),
        }
    }
}

/// What [`Publisher::publish`] did.
#[derive(Debug)]
pub enum Published {
    /// The release is published: its files, and the Delta table's version.
    Committed {
        files: Vec<Location>,
        delta_version: Option<i64>,
    },
    /// The Delta table already held this job's release of this input (a
    /// concurrent run committed it): nothing was added; the table is at
    /// `version`.
    AlreadyReleased { version: i64 },
}

/// A release being written, then published (see the module docs).
///
/// # Example
///
/// Publishing rows that were anonymised elsewhere, as `kanon sql --output`
/// does: every batch goes both to the check and to the writer, and the
/// release is committed (here a Parquet file with its manifest) only when
/// the check holds. Before [`Publisher::publish`], nothing is at the
/// destination.
///
/// ```
/// use std::sync::Arc;
///
/// use arrow::array::{RecordBatch, StringArray};
/// use arrow::datatypes::{DataType, Field, Schema};
/// use kanon_engine::privacy::Privacy;
/// use kanon_io::certificate::Certificate;
/// use kanon_io::config::JobFile;
/// use kanon_io::ops::Ui;
/// use kanon_io::publish::{Published, Publisher, Target};
/// use kanon_io::release::{manifest_location, ReleaseOptions};
/// use kanon_io::release_check::{Checked, ReleaseCheck};
/// use kanon_io::storage::{Location, Storage};
///
/// # fn main() -> anyhow::Result<()> {
/// // The job the rows must satisfy: 2-anonymous on age and zip, with two
/// // distinct diagnoses in each class.
/// let doc: toml::Table = r#"
///     [privacy]
///     k = 2
///     l = 2
///     [[attributes]]
///     name = "age"
///     role = "quasi-identifier"
///     [[attributes]]
///     name = "zip"
///     role = "quasi-identifier"
///     [[attributes]]
///     name = "diagnosis"
///     role = "sensitive"
/// "#
/// .parse()?;
/// let spec = kanon_engine::job::overrides::spec_of(doc)?;
/// // No hierarchy files to read: every value is published as it is.
/// let job = kanon_engine::job::Job::new(spec, |_| -> Result<_, std::io::Error> {
///     unreachable!("the job names no hierarchy file")
/// })?;
/// let job = JobFile::new(job, Default::default());
/// let privacy = Privacy::from_spec(job.spec())?;
///
/// // Rows already generalised: two classes of two rows each.
/// let schema = Arc::new(Schema::new(
///     ["age", "zip", "diagnosis"].map(|n| Field::new(n, DataType::Utf8, false)).to_vec(),
/// ));
/// let column = |v: [&str; 4]| Arc::new(StringArray::from(v.to_vec())) as _;
/// let batch = RecordBatch::try_new(schema.clone(), vec![
///     column(["[20-29]", "[20-29]", "[30-39]", "[30-39]"]),
///     column(["130**", "130**", "148**", "148**"]),
///     column(["flu", "asthma", "flu", "ulcer"]),
/// ])?;
///
/// let dir = tempfile::tempdir()?;
/// let destination = Location::Local(dir.path().join("release.parquet"));
/// let storage = Storage::new(&job.spec().storage);
/// let options = ReleaseOptions {
///     max_file_bytes: None,
///     row_group_rows: 1024,
///     zstd_level: 3,
///     overwrite: false,
///     metadata: Vec::new(),
///     direct: None,
/// };
/// let mut check = ReleaseCheck::new(&job, &schema, "the example's rows")?;
/// let mut publisher =
///     Publisher::create(&storage, Target::Parquet(destination.clone()), schema, options)?;
/// check.push(&batch)?;
/// publisher.write(&batch)?;
/// assert!(!dir.path().join("release.parquet").exists(), "nothing is visible yet");
///
/// let (Checked::Holds(verified), Some(labels)) = check.finish(&privacy)? else {
///     panic!("the rows do not satisfy the job: nothing is published");
/// };
/// let diversity = kanon_engine::metrics::release_diversity(&labels);
/// let certificate = Certificate::of_labels(&job, &verified, &diversity, 4);
/// let published =
///     publisher.publish(&job, &privacy, &verified, &certificate, None, &Ui::embedded())?;
///
/// let Published::Committed { files, .. } = published else { unreachable!() };
/// assert_eq!(files, vec![destination.clone()]);
/// let Location::Local(manifest) = manifest_location(&destination, false) else { unreachable!() };
/// assert!(manifest.exists(), "the manifest carries the certificate");
/// # Ok(())
/// # }
/// ```
pub struct Publisher<'a> {
    storage: &'a Storage,
    target: Target,
    writer: ReleaseWriter<'a>,
    /// The release's people, for a table's history (`output.history`).
    people: Option<Vec<kanon_engine::history::Published>>,
}

impl<'a> Publisher<'a> {
    /// Starts a release of `schema` at `target`. Nothing is visible there
    /// before [`Publisher::publish`]; a dropped publisher leaves nothing.
    ///
    /// # Errors
    /// Storage failures starting the writer.
    pub fn create(
        storage: &'a Storage,
        target: Target,
        schema: SchemaRef,
        options: ReleaseOptions,
    ) -> Result<Self> {
        let writer = ReleaseWriter::create(storage, target.destination(), schema, options)?;
        Ok(Publisher {
            storage,
            target,
            writer,
            people: None,
        })
    }

    /// The people of the release, recorded as they were released
    /// ([`kanon_engine::history::Ledger`]): a Delta commit checks them with
    /// the table's readable versions and keeps them in `output.history`
    /// ([`crate::delta::series`]).
    pub fn set_people(&mut self, people: Option<Vec<kanon_engine::history::Published>>) {
        self.people = people;
    }

    /// Writes one batch of the release.
    ///
    /// # Errors
    /// Write failures; a batch of another schema.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.writer.write(batch)
    }

    /// Closes the file being written (the next batch starts a new one).
    ///
    /// # Errors
    /// Write failures.
    pub fn close(&mut self) -> Result<()> {
        self.writer.close()
    }

    /// The files written so far, where they will be published.
    pub fn files(&self) -> &[Location] {
        self.writer.files()
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.writer.rows()
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.writer.bytes()
    }

    /// Publishes the release of `job`, whose written rows were verified as
    /// `verified` and are certified by `certificate`: with its manifest
    /// (Parquet), or read back, verified again, checked with the table's
    /// readable versions ([`Publisher::set_people`]; [`crate::delta::series`])
    /// and committed with the
    /// certificate (Delta, with `app_id` as its idempotence key).
    ///
    /// # Errors
    /// Exit 1 when the Delta data files read back are not the verified
    /// release; commit and storage failures. Nothing is published then.
    pub fn publish(
        self,
        job: &JobFile,
        privacy: &Privacy,
        verified: &Verified,
        certificate: &Certificate,
        app_id: Option<&str>,
        ui: &Ui,
    ) -> Result<Published> {
        let Publisher {
            storage,
            target,
            mut writer,
            people,
        } = self;
        // The last file's footer, so that every file has its size.
        writer.close()?;
        if writer.file_sizes().len() != writer.files().len()
            || writer.file_hashes().len() != writer.files().len()
        {
            return Err(anyhow::anyhow!(
                "{} files written but {} sized (a bug in kanon); nothing was published",
                writer.files().len(),
                writer.file_sizes().len()
            ));
        }
        // The certificate vouches for every file by its hash, relative to
        // the release (Parquet) or to the table's root (Delta).
        let root = match &target {
            Target::Parquet(dest) => dest.clone(),
            Target::Delta(_, table) => table.location.clone(),
        };
        let certificate = &certify(
            certificate,
            &root,
            writer
                .files()
                .iter()
                .zip(writer.file_sizes())
                .zip(writer.file_hashes())
                .map(|((l, &(rows, _)), sha256)| (l, rows, sha256.as_str())),
        )?;
        match target {
            Target::Parquet(dest) => {
                let files: Vec<(Location, u64, u64, String)> = writer
                    .files()
                    .iter()
                    .zip(writer.file_sizes())
                    .zip(writer.file_hashes())
                    .map(|((l, &(rows, bytes)), sha256)| (l.clone(), rows, bytes, sha256.clone()))
                    .collect();
                writer.set_manifest(&Manifest::new(&dest, &files, certificate.clone()));
                let files = writer.commit()?;
                Ok(Published::Committed {
                    files,
                    delta_version: None,
                })
            }
            Target::Delta(output, table) => {
                let schema = writer.schema().clone();
                let sizes = writer.file_sizes().to_vec();
                let files = writer.commit()?;
                let delta = Delta {
                    storage,
                    output: &output,
                    table: &table,
                    files: &files,
                    sizes: &sizes,
                    schema: &schema,
                };
                let published =
                    crate::delta::series::Policy::of(job, &table.location).and_then(|policy| {
                        let series = crate::delta::series::Series {
                            policy: &policy,
                            people: people.as_deref(),
                        };
                        delta.verify_and_commit(
                            job,
                            privacy,
                            verified,
                            certificate,
                            app_id,
                            series,
                            ui,
                        )
                    });
                let remove = || {
                    for f in &files {
                        if let Err(e) = storage.delete(f) {
                            tracing::warn!(file = %f, error = %e, "cannot remove a data file no version references; VACUUM removes it");
                        }
                    }
                };
                match published {
                    Ok(Outcome::Committed { version }) => {
                        tracing::info!(output = %table.location, table_version = version, "Delta version committed");
                        Ok(Published::Committed {
                            files,
                            delta_version: Some(version),
                        })
                    }
                    Ok(Outcome::AlreadyReleased { version }) => {
                        remove();
                        Ok(Published::AlreadyReleased { version })
                    }
                    Err(e) => {
                        remove();
                        Err(e)
                    }
                }
            }
        }
    }
}

/// `certificate` vouching for every file by its path relative to `root`
/// (the release, or the table's root), its rows and its hash, then signed
/// with `KANON_SIGNING_KEY` when set (last: the signature covers the
/// hashes).
///
/// # Errors
/// A malformed signing key.
pub(crate) fn certify<'l>(
    certificate: &Certificate,
    root: &Location,
    files: impl Iterator<Item = (&'l Location, u64, &'l str)>,
) -> Result<Certificate> {
    let mut certificate = certificate.clone();
    certificate.files = files
        .map(|(l, rows, sha256)| CertifiedFile {
            path: relative_name(root, l),
            rows,
            sha256: sha256.to_string(),
        })
        .collect();
    if let Some(key) = crate::signing::signing_key()? {
        crate::signing::sign(&mut certificate, &key);
    }
    Ok(certificate)
}

/// Commits parts that other processes wrote into the table's data
/// directory (workers, issue 35) as one Delta version carrying
/// `certificate` (its files filled in, signed when a key is set), under
/// the table's history `policy`. The caller verified the release the parts
/// hold and compared their hashes; without an input fingerprint there is
/// no idempotence key, so every run commits.
///
/// # Errors
/// As [`crate::delta::commit`]. The parts are not removed: the caller
/// removes them (they are under its run's prefix).
pub fn commit_parts(
    storage: &Storage,
    output: &DeltaOutput,
    table: &Table,
    schema: &SchemaRef,
    parts: &[crate::release::StagedPart],
    certificate: &Certificate,
    policy: &crate::delta::series::Policy,
) -> Result<Outcome> {
    let certificate = certify(
        certificate,
        &table.location,
        parts
            .iter()
            .map(|p| (&p.location, p.rows, p.sha256.as_str())),
    )?;
    let written: Vec<WrittenFile> = parts
        .iter()
        .map(|p| WrittenFile {
            location: p.location.clone(),
            rows: p.rows,
            bytes: p.bytes,
        })
        .collect();
    barrier("delta-commit")?;
    check_interrupt()?;
    crate::delta::commit(
        storage,
        table,
        output,
        schema,
        &written,
        &certificate,
        None,
        crate::delta::series::Series {
            policy,
            people: None,
        },
    )
}

/// The data files of a Delta release, completed in place and not yet
/// referenced by the table's log.
struct Delta<'p> {
    storage: &'p Storage,
    output: &'p DeltaOutput,
    table: &'p Table,
    files: &'p [Location],
    sizes: &'p [(u64, u64)],
    schema: &'p SchemaRef,
}

impl Delta<'_> {
    /// Reads the data files back, checks they are the release that was
    /// verified, and commits them with the certificate.
    #[allow(clippy::too_many_arguments)]
    fn verify_and_commit(
        &self,
        job: &JobFile,
        privacy: &Privacy,
        verified: &Verified,
        certificate: &Certificate,
        app_id: Option<&str>,
        series: crate::delta::series::Series<'_>,
        ui: &Ui,
    ) -> Result<Outcome> {
        let storage = self.storage;
        barrier("delta-verify")?;
        check_interrupt()?;
        let t = Instant::now();
        let dataset = Dataset::open_files(storage, &self.table.location, self.files)?;
        let label = format!("the data files written to {}", self.table.location);
        let failed = |msg: String| -> anyhow::Error {
            Failure::new(
                crate::exit::VERIFY_FAILED,
                format!("{label} {msg}; nothing was committed"),
            )
            .into()
        };
        match crate::release_check::check(job, privacy, storage, &dataset, &label, ui)? {
            Checked::Holds(v)
                if v.published_rows == verified.published_rows
                    && v.classes == verified.classes
                    && v.smallest_class == verified.smallest_class => {}
            Checked::Holds(v) => {
                return Err(failed(format!(
                    "are not the release kanon verified ({} rows in {} classes read back, {} in {} verified)",
                    v.published_rows, v.classes, verified.published_rows, verified.classes
                )))
            }
            Checked::Fails(msg) => return Err(failed(format!("fail verification: {msg}"))),
        }
        tracing::info!(
            files = self.files.len(),
            seconds = t.elapsed().as_secs_f64(),
            "Delta data files read back and verified"
        );
        check_interrupt()?;
        let t = Instant::now();
        let written: Vec<WrittenFile> = self
            .files
            .iter()
            .zip(self.sizes)
            .map(|(location, &(rows, bytes))| WrittenFile {
                location: location.clone(),
                rows,
                bytes,
            })
            .collect();
        let outcome = crate::delta::commit(
            storage,
            self.table,
            self.output,
            self.schema,
            &written,
            certificate,
            app_id,
            series,
        )?;
        tracing::info!(seconds = t.elapsed().as_secs_f64(), "Delta log commit done");
        Ok(outcome)
    }
}
