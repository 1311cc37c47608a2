//! What a run is asked to do, checked before any data is read.

use anyhow::{Context, Result};
use kanon_engine::recode::Pseudonymiser;
use kanon_engine::Error;

use super::AnonymizeArgs;
use crate::memory::Budget;
use kanon_io::config::JobFile;
use kanon_io::dataset::Dataset;
use kanon_io::delta::series::{LeaveOut, Policy};
use kanon_io::delta::{DeltaOutput, Mode, Table};
use kanon_io::exit::Failure;
use kanon_io::guard::Reads;
use kanon_io::publish::Target;
use kanon_io::release::{parse_size, ReleaseOptions};
use kanon_io::storage::{Location, Storage};

/// Bytes of released rows held in memory before pass 2 spills
/// (`output.buffer_memory`).
pub(crate) const DEFAULT_BUFFER_BYTES: u64 = 2 << 30;

/// What a job reads: stored files, or a table in memory.
#[derive(Debug)]
pub(super) enum Input {
    Stored(Location),
    Memory(kanon_io::dataset::MemoryTable),
}

impl std::fmt::Display for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Stored(l) => l.fmt(f),
            Input::Memory(t) => f.write_str(&t.label),
        }
    }
}

/// What a run is asked to do, checked before any data is read: the job,
/// where it reads and writes, and how the release is written.
pub(super) struct Plan {
    pub(super) job: JobFile,
    pub(super) storage: Storage,
    pub(super) input: Input,
    pub(super) output: Location,
    pub(super) options: ReleaseOptions,
    pub(super) pseudonymiser: Pseudonymiser,
    /// A Delta release: where and how, and the table.
    pub(super) delta: Option<(DeltaOutput, Table)>,
    /// How a Delta release meets the table's readable versions.
    pub(super) series: Option<Policy>,
    /// The public key that signs the certificate (`KANON_SIGNING_KEY`),
    /// read before any work so that a malformed key stops the job first.
    pub(super) signed_by: Option<String>,
    /// `--dry-run`: pass 1 only, which then keeps nothing for pass 2.
    pub(super) dry_run: bool,
    /// `output.buffer_memory`: the bytes of rows pass 2 holds in memory
    /// (after pass 1: at most what the memory budget leaves).
    pub(super) buffer_memory: u64,
    /// The job's memory budget (`resources.memory`, the cgroup's limit or
    /// a share of physical memory).
    pub(super) budget: Option<Budget>,
}

impl Plan {
    /// Where the release is published.
    pub(super) fn target(&self) -> Target {
        match &self.delta {
            Some((d, table)) => Target::Delta(d.clone(), table.clone()),
            None => Target::Parquet(self.output.clone()),
        }
    }

    /// Loads the job and fails before any reading when the release may not
    /// be written (an output inside the input, an existing release without
    /// `--overwrite`, a missing pseudonym key).
    pub(super) fn new(args: &AnonymizeArgs) -> Result<Plan> {
        if let Some(t) = args.timeout {
            if !(t > 0.0 && t.is_finite()) {
                return Err(Failure::bad_input(format!(
                    "--timeout {t}: give a number of seconds > 0"
                ))
                .into());
            }
            kanon_io::ops::set_timeout(t);
        }
        let mut job_args = args.job.clone();
        if let Some(s) = &args.max_file_size {
            job_args.set.push(format!("output.max_file_size={s:?}"));
        }
        if let Some(s) = &args.memory {
            job_args.set.push(format!("resources.memory={s:?}"));
        }
        let job = JobFile::load(&job_args.request())?;
        let spec = job.spec();
        let storage = Storage::new(&spec.storage);
        let input = match &args.table {
            Some(t) => Input::Memory(t.clone()),
            None => Input::Stored(job.input(args.input.as_deref())?),
        };
        let output = job.output(args.output.as_deref())?;
        // Nothing the run writes may land on what it reads (the job file,
        // the hierarchies, the population), nor on another of its outputs.
        let mut reads = Reads::of_job(&job)?;
        if let Input::Stored(input) = &input {
            if output.overlaps(input) {
                return Err(Failure::bad_input(format!(
                    "output {output} is, contains or lies inside the input {input}: writing it could overwrite the input or be read back as input by the next run; choose an --output outside the input"
                ))
                .into());
            }
            reads.add("the input", input.clone());
        }
        reads.claim("the release (--output, output.path)", output.clone())?;
        for (flag, path) in [
            ("the metrics JSON (--metrics-json)", &args.metrics_json),
            ("the report (--report)", &args.report),
        ] {
            if let Some(path) = path {
                reads.claim(flag, Location::Local(path.clone()))?;
            }
        }
        let overwrite = args.overwrite || spec.output.overwrite.unwrap_or(false);
        let max_file_bytes = spec
            .output
            .max_file_size
            .as_deref()
            .map(|s| parse_size("output.max_file_size", s))
            .transpose()?;
        // Workers that write their own parts (a full-domain algorithm on
        // `--workers`) publish a directory of parts.
        let by_workers = !args.workers.workers.is_empty()
            && kanon_engine::counts::ALGORITHMS.contains(&spec.algorithm.name.as_str());
        let max_file_bytes = max_file_bytes.or(by_workers.then_some(u64::MAX));
        let delta = DeltaOutput::of_spec(&spec.output, &output, args.overwrite)?;
        // A single-file release's manifest lies beside it, outside the
        // release's own path.
        if delta.is_none() && max_file_bytes.is_none() {
            reads.claim(
                "the release's manifest",
                kanon_io::release::manifest_location(&output, false),
            )?;
        }
        let options = ReleaseOptions {
            max_file_bytes,
            row_group_rows: spec.output.row_group_rows.unwrap_or(1 << 20),
            zstd_level: spec.output.compression_level.unwrap_or(3),
            overwrite,
            metadata: Vec::new(),
            direct: delta.as_ref().map(|_| kanon_io::delta::run_token()),
        };
        let series = match &delta {
            Some(d) => Some(Policy::of(&job, &d.location)?),
            None if spec.output.history.is_some() => {
                return Err(Failure::bad_input(
                    "`output.history` applies to Delta tables, whose versions readers can time-travel to: set `output.format = \"delta\"` to publish a checked series, or remove it (a Parquet release is replaced, not versioned)",
                )
                .into())
            }
            None => None,
        };
        if let Some(Policy::Checked { state, .. }) = &series {
            reads.claim("the table history (output.history)", state.clone())?;
        }
        let delta = match delta {
            None => {
                kanon_io::release::check_destination(
                    &storage,
                    &output,
                    max_file_bytes.is_some(),
                    overwrite,
                )?;
                None
            }
            Some(d) => {
                let table = Table::at(&storage, &d.location)?;
                Some((d, table))
            }
        };
        // Publication without --overwrite and Delta commits rely on the
        // store's conditional writes: probe them before any work.
        if delta.is_some() || !overwrite {
            storage.check_conditional_writes(&output)?;
        }
        let pseudonymiser = job.pseudonymiser()?;
        let signed_by = kanon_io::signing::public_key_hex()?;
        let buffer_memory = match &spec.output.buffer_memory {
            Some(s) => parse_size("output.buffer_memory", s)?,
            None => DEFAULT_BUFFER_BYTES,
        };
        let budget = Budget::of(spec)?;
        Ok(Plan {
            job,
            storage,
            input,
            output,
            options,
            pseudonymiser,
            delta,
            series,
            signed_by,
            dry_run: args.dry_run,
            buffer_memory,
            budget,
        })
    }

    /// A Parquet release replaced by a release of the same job on another
    /// input is a series: readers who kept the first can diff the two
    /// (issue 31, item 2). Refused (exit 3) unless the job file accepts it
    /// (`output.unchecked_series = true`); the same input again gives the
    /// same bytes, and another job's release is not this job's series.
    pub(super) fn refuse_parquet_series(&self, fingerprint: Option<&str>) -> Result<()> {
        if !self.options.overwrite || self.job.spec().output.unchecked_series == Some(true) {
            return Ok(());
        }
        let split = self.options.max_file_bytes.is_some();
        let at = kanon_io::release::manifest_location(&self.output, split);
        if self.storage.head(&at)?.is_none() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut self.storage.open_read(&at)?, &mut bytes)
            .with_context(|| format!("cannot read the manifest {at}"))?;
        let Ok(manifest) = serde_json::from_slice::<kanon_io::release::Manifest>(&bytes) else {
            return Ok(());
        };
        let c = &manifest.certificate;
        let same_job = c.job_hash == kanon_io::certificate::job_hash(&self.job);
        let other_input = c.input.fingerprint.as_deref() != fingerprint || fingerprint.is_none();
        if same_job && other_input {
            return Err(Failure::new(
                kanon_io::exit::UNSATISFIABLE,
                format!(
                    "{} holds this job's release of another input: replacing it publishes a series, and whoever kept the first release can diff the two class by class and single out the people added, removed or relabelled; nothing was written. Publish each release to a new location, publish the series to a Delta table with `output.history` (checked, each person published once), or, if readers comparing releases is acceptable, say so in the job file with `output.unchecked_series = true`",
                    self.output
                ),
            )
            .into());
        }
        Ok(())
    }

    /// With `output.history`, the people the table's readable versions
    /// publish (loaded before any reading, so that a history kanon cannot
    /// check stops the job first): left out of an `append` release.
    pub(super) fn leave_out(&self) -> Result<Option<LeaveOut>> {
        let (Some((d, table)), Some(policy @ Policy::Checked { .. })) = (&self.delta, &self.series)
        else {
            return Ok(None);
        };
        let people =
            kanon_io::delta::series::before_work(&self.storage, table, policy)?.unwrap_or_default();
        if d.mode != Mode::Append {
            return Ok(None);
        }
        let column = self
            .job
            .spec()
            .entity_column()
            .context("output.history without privacy.entity (a bug in kanon)")?;
        let fingerprinter = self.pseudonymiser.fingerprinter(column)?;
        Ok(Some(LeaveOut::new(fingerprinter, people)))
    }

    /// Whether pass 1 keeps the input's batches for pass 2 (and within
    /// which budget): when the columns the release reads from the input
    /// (all but `unread`) likely fit in `output.buffer_memory`, reading
    /// every column once costs less than reading the QI columns, then every
    /// column again. The estimate (twice the Parquet data's uncompressed
    /// size, or twice the CSV bytes) only chooses; pass 1 stops holding
    /// when the batches outgrow the budget.
    pub(super) fn hold(&self, dataset: &Dataset, unread: &[usize], budget: u64) -> Option<u64> {
        if self.dry_run {
            return None;
        }
        let estimate = dataset.uncompressed_bytes(unread).unwrap_or(dataset.bytes);
        (estimate.saturating_mul(2) <= budget).then_some(budget)
    }

    /// `e` of the engine, with the job's settings that decide whether a
    /// release is possible.
    pub(super) fn unsatisfiable(&self, e: Error) -> anyhow::Error {
        let spec = self.job.spec();
        let hint = matches!(e, Error::Unsatisfiable(_)).then(|| {
            format!(
                " (settings `privacy.k` = {}, `privacy.suppression_limit` = {} in {})",
                spec.privacy.k,
                spec.suppression_limit(),
                self.job.path.display()
            )
        });
        anyhow::Error::new(e).context(format!(
            "anonymising {} with {}{}",
            self.input,
            spec.algorithm.name,
            hint.unwrap_or_default()
        ))
    }

    /// The context of an input that does not fit the job.
    pub(super) fn misfit(&self) -> String {
        format!(
            "input {} does not fit job {}",
            self.input,
            self.job.path.display()
        )
    }
}
