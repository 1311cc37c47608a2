//! `kanon anonymize --workers` for full-domain generalisation (issue 35):
//! the workers read and write, this process only plans, verifies and
//! commits, and never opens a data file of the input.
//!
//! 1. **Census.** The coordinator lists the input's files (a listing or a
//!    Delta log, no data file opened) and spreads them over the workers;
//!    each counts its share's distinct QI tuples ([`census`]).
//! 2. **Plan.** The merged counts become a table of counted tuples
//!    ([`QiTable::with_weights`](kanon_engine::encode::QiTable::with_weights)),
//!    encoded with the job's hierarchies, on which Datafly or Incognito
//!    choose exactly the node, and suppress exactly the classes, they
//!    choose on the rows ([`kanon_engine::counts`]); the plan is verified
//!    from the counts and sent to the workers as a small message (per QI,
//!    the value each raw value publishes; per group, its values).
//! 3. **Parts.** Each worker reads its files again, writes its parts to a
//!    staging prefix beside the release and reports the rows of every
//!    group ([`part`]).
//! 4. **Commit.** The rows reported must be the plan's, group by group;
//!    the union is verified again from them (k of every requirement, the
//!    suppression limit), a part of every worker is read back and its
//!    hash compared, and the parts are published once, with the manifest
//!    carrying the certificate and `_SUCCESS` ([`kanon_io::release::adopt`]).
//!    Whatever fails, nothing is published and the staged parts are
//!    removed (or named).
//!
//! The release is the single-machine release of the same job, up to the
//! order of its rows (each worker orders its own share's classes) and the
//! split into files: it is always a directory of parts.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;

use super::plan::Plan;
use super::AnonymizeArgs;
use kanon_io::ops::Ui;

/// Whether the job runs by the workers reading and writing: `--workers`
/// with a full-domain algorithm (the others send blocks to the workers,
/// or run here).
pub(super) fn applies(args: &AnonymizeArgs, plan: &Plan) -> bool {
    !args.workers.workers.is_empty()
        && kanon_engine::counts::ALGORITHMS.contains(&plan.job.spec().algorithm.name.as_str())
}

#[cfg(not(feature = "distributed"))]
pub(super) fn run(_: &AnonymizeArgs, _: Plan, _: &Ui, _: Instant) -> Result<ExitCode> {
    anyhow::bail!("--workers needs a kanon built with the `distributed` feature")
}

#[cfg(feature = "distributed")]
pub(super) use distributed::run;

#[cfg(feature = "distributed")]
mod distributed {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, RecordBatch, StringArray, UInt32Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use kanon_engine::encode::Encoder;
    use kanon_engine::partition::SUPPRESSED;
    use kanon_engine::privacy::Privacy;
    use kanon_engine::spec::{JobSpec, NullPolicy, Role};
    use kanon_io::certificate::{Certificate, InputIdentity};
    use kanon_io::delta::series::Policy;
    use kanon_io::exit::Failure;
    use kanon_io::ops::{barrier, check_interrupt, SpinnerProgress};
    use kanon_io::release::{adopt, remove_staging, staging_location, StagedPart};
    use kanon_io::storage::Location;

    use super::*;
    use crate::anonymize::plan::Input;
    use crate::cluster::census::{self, Census};
    use crate::cluster::part::{self, PartOptions, PartPlan, PartReport, PartTask, WITHHELD};
    use anyhow::Context;

    /// The size of the parts the workers write, unless the job sets
    /// `output.max_file_size`.
    const PART_BYTES: u64 = 256 << 20;

    /// Refuses, before any work, what a run from counts cannot do yet.
    fn refuse(what: &str) -> anyhow::Error {
        Failure::bad_input(format!(
            "--workers with a full-domain algorithm has the workers read and write the release: {what}; run without --workers"
        ))
        .into()
    }

    /// Runs the job on the workers (see the module docs).
    pub(in crate::anonymize) fn run(
        args: &AnonymizeArgs,
        plan: Plan,
        ui: &Ui,
        start: Instant,
    ) -> Result<ExitCode> {
        let spec = plan.job.spec().clone();
        let privacy = Privacy::from_spec(&spec)?;
        let input = match &plan.input {
            Input::Stored(l) => l.clone(),
            Input::Memory(_) => {
                return Err(refuse(
                    "a table in memory is not on storage the workers can read",
                ))
            }
        };
        if spec.entity_column().is_some() {
            return Err(refuse("privacy.entity counts a person's rows across every file, which one worker does not see"));
        }
        // Whether a person has several rows is counted over the whole
        // input (kanon_engine::identities), which no worker sees: the job
        // must say that each row is a different person.
        if let Some(a) = spec.attributes.iter().find(|a| a.role == Role::Identifying) {
            if spec.privacy.entity.as_deref() != Some(kanon_engine::spec::ENTITY_ROW) {
                return Err(refuse(&format!(
                    "`{}` is identifying, and whether one value is on several rows (a person with several rows) is checked over the whole input, which no worker sees; if every row is a different person, say so with `privacy.entity = \"row\"`",
                    a.name
                )));
            }
        }
        if let Some(a) = spec
            .attributes
            .iter()
            .find(|a| a.role == Role::Pseudonymised)
        {
            return Err(refuse(&format!(
                "`{}` is pseudonymised, and the workers do not hold the key",
                a.name
            )));
        }
        if args.report.is_some() || args.dry_run {
            return Err(refuse("--report and --dry-run read the input here"));
        }
        kanon_engine::counts::check(&spec, &privacy).map_err(|e| plan.unsatisfiable(e))?;
        let cluster = args
            .workers
            .cluster()?
            .ok_or_else(|| anyhow::anyhow!("--workers names no worker"))?;
        // A Delta table: refused before any work when its readable
        // versions would make the release a series nobody checks. A
        // Parquet release of several workers is a directory of parts (the
        // plan made it one), and no series either.
        match &plan.delta {
            Some((d, table)) => {
                if let kanon_io::delta::Prepared::AlreadyReleased { version } =
                    kanon_io::delta::prepare(&plan.storage, table, d, None)?
                {
                    anyhow::bail!("{} already holds this release (version {version}) without an idempotence key (a bug in kanon)", d.location);
                }
                if let Some(policy @ Policy::Refused) = &plan.series {
                    kanon_io::delta::series::before_work(&plan.storage, table, policy)?;
                }
            }
            None => plan.refuse_parquet_series(None)?,
        }

        // 1. The census.
        let qis: Vec<String> = spec.quasi_identifiers().map(|a| a.name.clone()).collect();
        let raw_spec = JobSpec::raw_categories(&qis);
        let files = kanon_io::dataset::parquet_files(&plan.storage, &input, &spec.input_spec())?;
        let shares = census::tasks(
            &spec.storage,
            &input,
            files,
            &raw_spec,
            cluster.tasks_per_run(),
        );
        let census =
            census::gather_tasks(&cluster, &input, &shares, ui, "workers counting the input")
                .with_context(|| {
                    format!("anonymising {input} on the workers; nothing was published")
                })?;
        let read_s = start.elapsed().as_secs_f64();
        // The job's column policy, on the columns the workers found (each
        // worker checks its own files again before writing).
        kanon_engine::columns::check(&spec, &census_schema(&census)?, &input.to_string())
            .map_err(|e| anyhow::Error::new(e).context(plan.misfit()))?;
        if census.excluded > 0 {
            let strict: Vec<&str> = spec
                .quasi_identifiers()
                .filter(|a| a.nulls == NullPolicy::Error)
                .map(|a| a.name.as_str())
                .collect();
            if !strict.is_empty() {
                return Err(Failure::bad_input(format!(
                    "{} rows of {input} have a null quasi-identifier, and `nulls` is `error` for {}: set `nulls = \"suppress\"` on those attributes in {} to suppress the rows",
                    census.excluded,
                    strict.join(", "),
                    plan.job.path.display()
                ))
                .into());
            }
        }

        // 2. The plan, from the counts.
        let planning = Instant::now();
        let what = format!(
            "{} on {} rows from counts",
            spec.algorithm.name, census.rows
        );
        let spinner = ui.spinner("algorithm", what.clone());
        let counted = counted_table(&plan.job, &qis, &census)?;
        let decided = kanon_engine::counts::plan(
            &spec,
            &counted,
            &privacy,
            &kanon_io::ops::cancellation(),
            &SpinnerProgress::new(spinner.clone(), what),
        );
        spinner.finish_and_clear();
        let decided = decided.map_err(|e| plan.unsatisfiable(e))?;
        check_interrupt()?;
        drop(counted);
        let (part_plan, expected) = part_plan(&qis, &census, &decided)?;
        let plan_s = planning.elapsed().as_secs_f64();
        tracing::info!(
            tuples = census.counts.len(),
            groups = expected.len(),
            "plan computed from counts and verified"
        );

        // 3. The parts, staged beside the release.
        // Parquet parts wait beside the release; a Delta table's go to a
        // prefix of the run in its data directory, where the commit
        // references them (no copy) and nothing else ever does.
        let token = kanon_io::delta::run_token();
        let staging = match &plan.delta {
            Some((d, _)) => d.data_dir().join(&format!("kanon-run-{token}")),
            None => staging_location(&plan.output, &token),
        };
        let options = PartOptions {
            row_group_rows: plan.options.row_group_rows,
            zstd_level: plan.options.zstd_level,
            // Parts of about 256 MB unless the job says otherwise.
            max_file_bytes: Some(
                plan.options
                    .max_file_bytes
                    .filter(|&b| b < u64::MAX)
                    .unwrap_or(PART_BYTES),
            ),
            // The buffer is the worker's: its tasks run at once.
            buffer_memory: plan.buffer_memory
                / shares.len().div_ceil(cluster.workers().len()).max(1) as u64,
            metadata: vec![("kanon.algorithm".into(), spec.algorithm.name.clone())],
        };
        let tasks: Vec<PartTask> = shares
            .iter()
            .enumerate()
            .map(|(i, share)| PartTask {
                storage: spec.storage.clone(),
                dataset: input.to_string(),
                files: share.files().to_vec(),
                spec: spec.clone(),
                plan: part_plan.clone(),
                staging: staging.to_string(),
                token: format!("{token}-{i}"),
                options: options.clone(),
            })
            .collect();
        let committed = stage(&plan, &cluster, &tasks, &staging, &token, ui, |reports| {
            verify_reports(&census, &part_plan, &expected, reports, &privacy)
        })
        .and_then(|Staged { parts, verified, parts_s, workers, schema }| {
            // Every artefact is written before the commit, and taken back
            // when the release is not published.
            let metrics = match &args.metrics_json {
                Some(path) => {
                    let json = serde_json::json!({
                        "algorithm": spec.algorithm.name,
                        "workers": cluster.workers().iter().map(|w| w.to_string()).collect::<Vec<_>>(),
                        "rows_in": census.rows,
                        "tuples": census.counts.len(),
                        "verification": verified,
                        "details": decided.details,
                        "files": parts.len(),
                        "bytes_out": parts.iter().map(|p| p.bytes).sum::<u64>(),
                        "census": {"files": census.files, "bytes": census.bytes},
                        "tasks": workers,
                        "timings": {
                            "census_s": read_s,
                            "plan_s": plan_s,
                            "parts_s": parts_s,
                            "before_commit_s": start.elapsed().as_secs_f64(),
                        },
                    });
                    Some(super::super::report::write_metrics(path, &json)?)
                }
                None => None,
            };
            let certificate = Certificate::of_counts(
                &plan.job,
                spec.algorithm.name.clone(),
                &verified,
                census.rows,
                InputIdentity::default(),
            );
            let published = barrier("before-commit")
                .and_then(|()| check_interrupt())
                .and_then(|()| match &plan.delta {
                    None => adopt(
                        &plan.storage,
                        &parts,
                        &staging,
                        &plan.output,
                        certificate,
                        plan.options.overwrite,
                    )
                    .map(|files| (files, None)),
                    Some((d, table)) => {
                        let policy = plan.series.as_ref().unwrap_or(&Policy::Refused);
                        match kanon_io::publish::commit_parts(
                            &plan.storage,
                            d,
                            table,
                            &schema,
                            &parts,
                            &certificate,
                            policy,
                        )? {
                            kanon_io::delta::Outcome::Committed { version } => Ok((
                                parts.iter().map(|p| p.location.clone()).collect(),
                                Some(version),
                            )),
                            kanon_io::delta::Outcome::AlreadyReleased { version } => {
                                anyhow::bail!("{} already holds this release (version {version}) without an idempotence key (a bug in kanon)", d.location)
                            }
                        }
                    }
                });
            match published {
                Ok((files, version)) => Ok((files, verified, version)),
                Err(e) => {
                    if let Some(m) = metrics {
                        m.remove();
                    }
                    Err(e)
                }
            }
        });
        let (files, verified, delta_version) = match committed {
            Ok(p) => p,
            Err(e) => {
                let left = remove_staging(&plan.storage, &staging);
                let note = match left.is_empty() {
                    true => "nothing was published and the staged parts were removed".to_string(),
                    false => format!(
                        "nothing was published; remove the staged parts left under {staging}"
                    ),
                };
                return Err(e.context(note));
            }
        };
        let rows_out = verified.published_rows;
        tracing::info!(files = files.len(), rows = rows_out, "release committed");
        if !ui.quiet {
            outln!(
                "kanon anonymize: {} rows -> {} ({} rows in {} files by {} workers; {} classes, smallest {}, {} suppressed, {} with a null QI)",
                census.rows,
                plan.output,
                rows_out,
                files.len(),
                cluster.workers().len(),
                verified.classes,
                verified.smallest_class,
                verified.suppressed_rows,
                verified.excluded_rows
            );
            outln!(
                "  timings       census {:.2} s, plan {:.2} s, total {:.2} s",
                read_s,
                plan_s,
                start.elapsed().as_secs_f64()
            );
            if let (Some((d, _)), Some(version)) = (&plan.delta, delta_version) {
                outln!(
                    "  Delta table   {} version {version} ({})",
                    d.location,
                    d.mode.name()
                );
            }
            if let Some(key) = &plan.signed_by {
                outln!("  signed        certificate signed by Ed25519 key {key} (kanon verify --trusted-key {key})");
            }
        }
        Ok(ExitCode::SUCCESS)
    }

    /// The census's distinct tuples as a table of counted tuples, encoded
    /// with the job's QIs (hierarchies, intervals, coding): each QI's raw
    /// labels are cast back to the input column's type, so that the job
    /// reads the values it would read from the files.
    fn counted_table(
        job: &kanon_io::config::JobFile,
        qis: &[String],
        census: &Census,
    ) -> Result<kanon_engine::encode::QiTable> {
        let n_qi = qis.len();
        let n = census.counts.len();
        let mut fields = Vec::with_capacity(n_qi);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(n_qi);
        for (q, name) in qis.iter().enumerate() {
            let info = census
                .columns
                .iter()
                .find(|c| &c.name == name)
                .ok_or_else(|| {
                    anyhow::anyhow!("the input has no column `{name}` (attributes.{name})")
                })?;
            let data_type: DataType = info.data_type.parse().map_err(|e| {
                anyhow::anyhow!("column `{name}` has a type kanon cannot name ({e})")
            })?;
            let labels = StringArray::from_iter_values(census.labels[q].iter());
            let values = arrow::compute::cast(&labels, &data_type).with_context(|| {
                format!(
                    "the values of `{name}` do not read back as {data_type} (attributes.{name})"
                )
            })?;
            let codes = UInt32Array::from_iter_values((0..n).map(|t| census.codes[t * n_qi + q]));
            columns.push(arrow::compute::take(&values, &codes, None)?);
            fields.push(Field::new(name, data_type, false));
        }
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new_with_options(
            schema.clone(),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        let mut qi_only = job.spec().clone();
        qi_only
            .attributes
            .retain(|a| a.role == Role::QuasiIdentifier);
        let mut encoder = Encoder::try_new(&qi_only, job.hierarchies(), &schema)?;
        encoder.push(&batch)?;
        let weights = census
            .counts
            .iter()
            .map(|&c| u32::try_from(c))
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|_| anyhow::anyhow!("a QI tuple of more than 4,294,967,295 rows"))?;
        Ok(encoder
            .finish()?
            .with_weights(weights, census.excluded as usize)?)
    }

    /// The plan the workers apply, and the rows the plan publishes in each
    /// group.
    ///
    /// # Errors
    /// A raw value published as two values (not a full-domain
    /// generalisation: a bug).
    fn part_plan(
        qis: &[String],
        census: &Census,
        decided: &kanon_engine::counts::CountedPlan,
    ) -> Result<(PartPlan, Vec<u64>)> {
        let n_qi = qis.len();
        let groups = decided.partition.group_of_row();
        let n_groups = decided.partition.n_groups();
        let mut values: Vec<Vec<String>> = vec![Vec::new(); n_qi];
        let mut value_of: Vec<std::collections::HashMap<&str, u32>> =
            vec![Default::default(); n_qi];
        let mut group_values = vec![0u32; n_groups * n_qi];
        for g in 0..n_groups {
            for q in 0..n_qi {
                let label = decided.labels[q][g].as_str();
                let next = values[q].len() as u32;
                let v = *value_of[q].entry(label).or_insert_with(|| {
                    values[q].push(label.to_string());
                    next
                });
                group_values[g * n_qi + q] = v;
            }
        }
        let mut publishes: Vec<Vec<u32>> = census
            .labels
            .iter()
            .map(|l| vec![WITHHELD; l.len()])
            .collect();
        let mut expected = vec![0u64; n_groups];
        for (t, &g) in groups.iter().enumerate() {
            if g == SUPPRESSED {
                continue;
            }
            expected[g as usize] += census.counts[t];
            for q in 0..n_qi {
                let raw = census.codes[t * n_qi + q] as usize;
                let v = group_values[g as usize * n_qi + q];
                match publishes[q][raw] {
                    WITHHELD => publishes[q][raw] = v,
                    w if w == v => {}
                    _ => anyhow::bail!(
                        "`{}`: a value published as two values (not a full-domain generalisation; a bug in kanon)",
                        qis[q]
                    ),
                }
            }
        }
        Ok((
            PartPlan {
                qis: qis.to_vec(),
                raw: census.labels.clone(),
                publishes,
                values,
                groups: group_values,
            },
            expected,
        ))
    }

    /// The workers' reports checked against the plan and the census, group
    /// by group, and the union verified from them: every class (the
    /// groups publishing one tuple) against the requirements, the rows
    /// withheld against the suppression limit.
    fn verify_reports(
        census: &Census,
        part_plan: &PartPlan,
        expected: &[u64],
        reports: &[PartReport],
        privacy: &Privacy,
    ) -> Result<kanon_engine::verify::Verified> {
        let mut rows = vec![0u64; expected.len()];
        let (mut read, mut suppressed, mut excluded) = (0u64, 0u64, 0u64);
        for r in reports {
            if r.group_rows.len() != expected.len() {
                anyhow::bail!(
                    "a worker reported {} groups, the plan has {} (a worker of another kanon version?)",
                    r.group_rows.len(),
                    expected.len()
                );
            }
            for (a, b) in rows.iter_mut().zip(&r.group_rows) {
                *a += b;
            }
            read += r.rows;
            suppressed += r.suppressed;
            excluded += r.excluded;
        }
        if read != census.rows || excluded != census.excluded || rows != expected {
            let differ = rows.iter().zip(expected).filter(|(a, b)| a != b).count();
            return Err(Failure::bad_input(format!(
                "the input changed between the census and the writing: {read} rows read (counted {}), {excluded} with a null QI (counted {}), {differ} groups with other rows than planned; nothing was published, run the job again",
                census.rows, census.excluded
            ))
            .into());
        }
        let n_qi = part_plan.qis.len().max(1);
        let mut classes: std::collections::BTreeMap<&[u32], usize> = Default::default();
        for (t, &n) in part_plan.groups.chunks(n_qi).zip(&rows) {
            if n > 0 {
                *classes.entry(t).or_default() += n as usize;
            }
        }
        let (tuples, sizes): (Vec<&[u32]>, Vec<usize>) = classes.into_iter().unzip();
        Ok(kanon_engine::verify::verify_sizes(
            &tuples,
            &sizes,
            suppressed as usize,
            excluded as usize,
            privacy,
        )?)
    }

    /// The input's schema, as the workers' census names its columns.
    fn census_schema(census: &Census) -> Result<Schema> {
        schema_of(&census.columns)
    }

    /// The schema of columns a worker named.
    fn schema_of(columns: &[crate::cluster::census::ColumnInfo]) -> Result<Schema> {
        let fields = columns
            .iter()
            .map(|c| {
                let t: DataType = c.data_type.parse().map_err(|e| {
                    anyhow::anyhow!("column `{}` has a type kanon cannot name ({e})", c.name)
                })?;
                Ok(Field::new(&c.name, t, c.nullable))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Schema::new(fields))
    }

    /// The parts' schema: the same columns from every worker that wrote.
    fn parts_schema(reports: &[PartReport]) -> Result<arrow::datatypes::SchemaRef> {
        let mut wrote = reports.iter().filter(|r| !r.columns.is_empty());
        let Some(first) = wrote.next() else {
            return Ok(Arc::new(Schema::empty()));
        };
        if wrote.any(|r| r.columns != first.columns) {
            anyhow::bail!("the workers wrote parts of different columns (workers of different kanon versions?)");
        }
        Ok(Arc::new(schema_of(&first.columns)?))
    }

    /// Reads the parts back, without reading the release through this
    /// process: every part's footer (together they must hold the rows the
    /// workers reported), and one part, chosen by the run's token, whole
    /// (its bytes must hash as its worker said).
    fn spot_check(
        storage: &kanon_io::storage::Storage,
        staging: &Location,
        parts: &[StagedPart],
        rows: u64,
        token: &str,
    ) -> Result<()> {
        if parts.is_empty() {
            return Ok(());
        }
        let locations: Vec<Location> = parts.iter().map(|p| p.location.clone()).collect();
        let back = kanon_io::dataset::Dataset::open_files(storage, staging, &locations)
            .context("the parts the workers wrote cannot be read back")?;
        if back.rows != Some(rows) {
            anyhow::bail!(
                "the parts' footers hold {:?} rows, the workers reported {rows}",
                back.rows
            );
        }
        let pick = u64::from_str_radix(&token[..token.len().min(12)], 16).unwrap_or(0) as usize
            % parts.len();
        let part = &parts[pick];
        let found = kanon_io::certificate::file_sha256(storage, &part.location)?;
        if found != part.sha256 {
            anyhow::bail!(
                "{} does not hold the bytes its worker wrote (its hash differs)",
                part.location
            );
        }
        Ok(())
    }

    /// The parts of a release, written, reported, verified and read back.
    struct Staged {
        parts: Vec<StagedPart>,
        verified: kanon_engine::verify::Verified,
        /// Seconds from sending the tasks to the last report.
        parts_s: f64,
        /// Per task: its worker, rows, parts, bytes and seconds.
        workers: Vec<serde_json::Value>,
        /// The parts' schema, as every worker reported it.
        schema: arrow::datatypes::SchemaRef,
    }

    /// Runs the part tasks, verifies their reports with `verify`, and reads
    /// back a part of every worker: the parts, ready to publish.
    fn stage(
        plan: &Plan,
        cluster: &kanon_datafusion::distributed::Cluster,
        tasks: &[PartTask],
        staging: &Location,
        token: &str,
        ui: &Ui,
        verify: impl FnOnce(&[PartReport]) -> Result<kanon_engine::verify::Verified>,
    ) -> Result<Staged> {
        let payloads = tasks
            .iter()
            .map(|t| t.to_bytes())
            .collect::<Result<Vec<_>>>()?;
        let sent = Instant::now();
        let spinner = ui.bar("workers writing", None);
        let results = cluster
            .run_tasks(part::KIND, payloads, &kanon_io::ops::cancellation())
            .context("the workers did not write the release")?;
        spinner.finish_and_clear();
        let parts_s = sent.elapsed().as_secs_f64();
        let reports = results
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let worker = cluster.workers()[i % cluster.workers().len()].to_string();
                postcard::from_bytes::<PartReport>(bytes).with_context(|| {
                    format!("the report of {worker} is not readable (a worker of another kanon version?)")
                })
            })
            .collect::<Result<Vec<_>>>()?;
        drop(results);
        let verified = verify(&reports)?;
        let mut parts = Vec::new();
        for r in &reports {
            for (l, rows, bytes, sha256) in &r.parts {
                let location = Location::parse(l)?;
                if !location.to_string().starts_with(&staging.to_string()) {
                    anyhow::bail!(
                        "a worker wrote {location}, outside the staging prefix {staging}"
                    );
                }
                parts.push(StagedPart {
                    location,
                    rows: *rows,
                    bytes: *bytes,
                    sha256: sha256.clone(),
                });
            }
        }
        let written: u64 = parts.iter().map(|p| p.rows).sum();
        if written != verified.published_rows as u64 {
            anyhow::bail!(
                "the parts hold {written} rows, the groups {} (a bug in kanon)",
                verified.published_rows
            );
        }
        spot_check(&plan.storage, staging, &parts, written, token)?;
        let workers = reports
            .iter()
            .enumerate()
            .map(|(i, r)| {
                serde_json::json!({
                    "worker": cluster.workers()[i % cluster.workers().len()].to_string(),
                    "rows": r.rows,
                    "parts": r.parts.len(),
                    "bytes_out": r.parts.iter().map(|p| p.2).sum::<u64>(),
                    "read_s": r.seconds.0,
                    "write_s": r.seconds.1,
                })
            })
            .collect();
        let schema = parts_schema(&reports)?;
        Ok(Staged {
            parts,
            verified,
            parts_s,
            workers,
            schema,
        })
    }
}
