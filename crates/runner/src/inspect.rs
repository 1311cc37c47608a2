//! `kanon inspect`: a dataset's schema and row count and, given its
//! quasi-identifiers, its re-identification risk before anonymisation: the
//! equivalence classes of the raw QI values, the smallest one, the unique
//! rows, and the rows in classes smaller than k.
//!
//! Prints names, types and counts only, never a record value.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use kanon_engine::encode::{Encoder, EquivalenceClasses, QiTable};
use kanon_engine::metrics::risk::{requirement_risk, risk_profile, RequirementRisk, RiskProfile};
use kanon_engine::privacy::{Privacy, Requirement};
use kanon_engine::spec::RiskSpec;
use kanon_engine::spec::{InputSpec, JobSpec, StorageSpec};
use serde::Serialize;

use crate::StorageArgs;
use kanon_io::config::{JobFile, JobRequest};
use kanon_io::dataset::Dataset;
use kanon_io::exit::Failure;
use kanon_io::ops::{check_interrupt, Ui};
use kanon_io::storage::{Location, Storage};

/// Arguments of `kanon inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The dataset: a Parquet or CSV file, a directory, a glob, or an s3://
    /// object or prefix.
    file: String,
    /// Quasi-identifiers to measure the risk of (comma-separated).
    #[arg(long, value_delimiter = ',')]
    qi: Vec<String>,
    /// A table in memory to inspect instead of `file` (which then only
    /// names it): the Python package's `kanon.risk(table, ...)`.
    #[arg(skip)]
    pub(crate) table: Option<kanon_io::dataset::MemoryTable>,
    /// Take the quasi-identifiers, CSV and storage settings from this job.
    #[arg(long, short = 'c')]
    config: Option<std::path::PathBuf>,
    /// k for "rows at risk" (rows in classes smaller than k); default the
    /// job's k, else 2, 5 and 10.
    #[arg(long)]
    k: Vec<usize>,
    /// Input format (`parquet`, `csv` or `delta`), default from the file
    /// extension (a directory with a `_delta_log` is a Delta table).
    #[arg(long)]
    format: Option<String>,
    /// The version of a Delta table to read (default its latest).
    #[arg(long, value_name = "N")]
    version: Option<i64>,
    /// CSV delimiter, e.g. ';'.
    #[arg(long)]
    delimiter: Option<String>,
    /// The CSV file has no header row.
    #[arg(long)]
    no_header: bool,
    /// A table of the whole population the dataset was drawn from (same QI
    /// columns; same format settings), for journalist and marketer risk
    /// (`risk.population`).
    #[arg(long, value_name = "PATH")]
    population: Option<String>,
    /// Records of the population (N), for the population-uniqueness
    /// estimates (`risk.population_size`).
    #[arg(long, value_name = "N")]
    population_size: Option<u64>,
    /// Records whose risk is above this count as at risk, 0..1
    /// (`risk.threshold`, default 0.2).
    #[arg(long, value_name = "RISK")]
    threshold: Option<f64>,
    /// Largest QI set searched for minimal sample uniques, 0 for none
    /// (`risk.msu_max_size`; default 3, none above 1M rows).
    #[arg(long, value_name = "N")]
    msu_size: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Have these `kanon worker`s read the dataset (Parquet files or a
    /// Delta table, local or on S3, with their own credentials) and count
    /// its QI tuples: this process lists the files and merges the counts,
    /// and never opens a data file. Addresses as for `kanon anonymize
    /// --workers`. Needs `--qi` or `--config`; measures everything but the
    /// minimal sample uniques (a population table is read by the workers
    /// too).
    #[arg(long, value_delimiter = ',', value_name = "URL")]
    workers: Vec<String>,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Serialize)]
struct Column {
    name: String,
    #[serde(rename = "type")]
    data_type: String,
    nullable: bool,
}

#[derive(Debug, Serialize)]
struct AtRisk {
    k: usize,
    classes: usize,
    rows: usize,
    share: f64,
}

#[derive(Debug, Serialize)]
struct Risk {
    quasi_identifiers: Vec<String>,
    /// With the job's `privacy.entity`: its column and the people counted
    /// (every figure below then counts people, not rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    entity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    people: Option<usize>,
    classes: usize,
    smallest_class: usize,
    unique_rows: usize,
    rows_with_null_qi: usize,
    at_risk: Vec<AtRisk>,
    /// The job's anonymity requirements (with `--config` and its QIs).
    requirements: Vec<RequirementRisk>,
    profile: RiskProfile,
}

#[derive(Debug, Serialize)]
struct Inspection {
    input: String,
    /// With `--workers`: the workers that read the files.
    #[serde(skip_serializing_if = "Option::is_none")]
    workers: Option<Vec<String>>,
    format: &'static str,
    files: usize,
    bytes: u64,
    rows: u64,
    columns: Vec<Column>,
    risk: Option<Risk>,
    /// A Delta table: the version read and every version with its
    /// certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    delta_version: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta_history: Option<Vec<kanon_io::delta::Release>>,
}

/// Runs `kanon inspect`.
pub fn run(args: &InspectArgs, ui: &Ui) -> Result<ExitCode> {
    let settings = Settings::of(args)?;
    let storage = Storage::new(&settings.storage);
    let location = Location::parse(&args.file)?;
    let report = match args.workers.is_empty() {
        true => inspect_here(args, &settings, &storage, &location, ui)?,
        false => on_workers(args, &settings, &storage, &location, ui)?,
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report.0)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_text(&report.0, report.1.as_ref());
    Ok(ExitCode::SUCCESS)
}

/// The inspection of a dataset read by this process.
fn inspect_here(
    args: &InspectArgs,
    settings: &Settings,
    storage: &Storage,
    location: &Location,
    ui: &Ui,
) -> Result<(Inspection, Option<History>)> {
    let (dataset, history) = open(args, &settings.input, storage, location)?;
    let columns = dataset
        .schema
        .fields()
        .iter()
        .map(|f| Column {
            name: f.name().clone(),
            data_type: f.data_type().to_string(),
            nullable: f.is_nullable(),
        })
        .collect();
    let (rows, risk) = measure(settings, storage, &dataset, location, ui)?;
    let report = Inspection {
        input: location.to_string(),
        workers: None,
        format: dataset.format.name(),
        files: dataset.n_files(),
        bytes: dataset.bytes,
        rows,
        columns,
        risk,
        delta_version: dataset.delta_version,
        delta_history: history.as_ref().map(|(_, h)| h.clone()),
    };
    Ok((report, history))
}

/// The inspection of a dataset read by workers (issue 35): the files are
/// listed here and counted there ([`crate::cluster::census`]).
#[cfg(feature = "distributed")]
fn on_workers(
    args: &InspectArgs,
    s: &Settings,
    storage: &Storage,
    location: &Location,
    ui: &Ui,
) -> Result<(Inspection, Option<History>)> {
    let refuse = |what: &str| -> Result<(Inspection, Option<History>)> {
        Err(Failure::bad_input(format!(
            "--workers: {what} is measured on one machine only for now; run without --workers"
        ))
        .into())
    };
    if args.table.is_some() {
        return refuse("a table in memory");
    }
    if s.qis.is_empty() {
        return Err(Failure::bad_input(
            "--workers counts the quasi-identifiers' tuples: name them with --qi or --config",
        )
        .into());
    }
    if s.entity.is_some() {
        return refuse("a job with privacy.entity (people are counted across every file)");
    }
    let cluster = crate::cluster::WorkersArg {
        workers: args.workers.clone(),
    }
    .cluster()?
    .ok_or_else(|| anyhow::anyhow!("--workers names no worker"))?;
    let spec = JobSpec::raw_categories(&s.qis);
    let census = crate::cluster::census::gather(
        &cluster,
        &s.storage,
        storage,
        location,
        &s.input,
        &spec,
        ui,
        "workers reading",
    )?;
    let population = match &s.risk.population {
        Some(p) => {
            let at = Location::parse(p)?;
            let population = crate::cluster::census::gather(
                &cluster,
                &s.storage,
                storage,
                &at,
                &s.input,
                &spec,
                ui,
                "workers reading the population",
            )
            .with_context(|| {
                format!("the population table (risk.population, --population) {at}")
            })?;
            let sizes = census.population_sizes(&population)?;
            Some((sizes, population.rows - population.excluded))
        }
        None => None,
    };
    let (tuples, sizes) = census.classes();
    let excluded = census.excluded as usize;
    let active = sizes.iter().sum::<usize>();
    let profile = kanon_engine::metrics::risk::risk_profile_of_sizes(
        &sizes,
        excluded,
        population.as_ref().map(|(p, n)| (p.as_slice(), *n)),
        &s.risk.options(active),
    )?;
    let requirements = kanon_engine::metrics::risk::standing_of_classes(
        s.qis.len(),
        &tuples,
        &sizes,
        &s.requirements,
    )
    .0;
    let risk = risk_of(&s.qis, None, &sizes, excluded, &s.ks, requirements, profile);
    let report = Inspection {
        input: location.to_string(),
        workers: Some(cluster.workers().iter().map(|u| u.to_string()).collect()),
        format: kanon_io::dataset::Format::Parquet.name(),
        files: census.files,
        bytes: census.bytes,
        rows: census.rows,
        columns: census
            .columns
            .into_iter()
            .map(|c| Column {
                name: c.name,
                data_type: c.data_type,
                nullable: c.nullable,
            })
            .collect(),
        risk: Some(risk),
        delta_version: None,
        delta_history: None,
    };
    Ok((report, None))
}

#[cfg(not(feature = "distributed"))]
fn on_workers(
    args: &InspectArgs,
    _: &Settings,
    _: &Storage,
    _: &Location,
    _: &Ui,
) -> Result<(Inspection, Option<History>)> {
    match crate::cluster::connect(&args.workers)? {}
}

/// What `kanon inspect` measures and where it reads: the job file's
/// settings (`--config`), then the flags.
struct Settings {
    input: InputSpec,
    storage: StorageSpec,
    qis: Vec<String>,
    ks: Vec<usize>,
    risk: RiskSpec,
    /// The job's requirements, when the QIs are the job's.
    requirements: Vec<Requirement>,
    /// The job's `privacy.entity` column.
    entity: Option<String>,
}

impl Settings {
    fn of(args: &InspectArgs) -> Result<Settings> {
        let (
            mut input_spec,
            mut storage_spec,
            mut qis,
            mut ks,
            mut risk_spec,
            job_requirements,
            entity,
        ) = match &args.config {
            Some(c) => {
                let job = JobFile::load(&JobRequest::file(c.clone(), args.storage.overrides()))?;
                let qis: Vec<String> = job
                    .spec()
                    .quasi_identifiers()
                    .map(|a| a.name.clone())
                    .collect();
                let requirements = Privacy::from_spec(job.spec())?.requirements().to_vec();
                let entity = job.spec().entity_column().map(String::from);
                (
                    job.spec().input_spec(),
                    job.spec().storage.clone(),
                    qis,
                    vec![job.spec().privacy.k],
                    job.spec().risk.clone(),
                    requirements,
                    entity,
                )
            }
            None => (
                InputSpec::default(),
                StorageSpec::default(),
                Vec::new(),
                Vec::new(),
                RiskSpec::default(),
                Vec::new(),
                None,
            ),
        };
        if let Some(p) = &args.population {
            risk_spec.population = Some(p.clone());
        }
        if args.population_size.is_some() {
            risk_spec.population_size = args.population_size;
        }
        if args.threshold.is_some() {
            risk_spec.threshold = args.threshold;
        }
        if args.msu_size.is_some() {
            risk_spec.msu_max_size = args.msu_size;
        }
        risk_spec.validate()?;
        if args.config.is_none() {
            // As with a job: `KANON_STORAGE_*` first, then the flags.
            let mut overrides: Vec<_> = kanon_io::config::env_overrides(std::env::vars())
                .0
                .into_iter()
                .filter(|o| o.section() == "storage")
                .collect();
            overrides.extend(args.storage.overrides());
            let mut doc = toml::Table::new();
            kanon_io::config::apply_overrides(&mut doc, &overrides)?;
            if let Some(t) = doc.remove("storage") {
                storage_spec = t.try_into().context("storage settings")?;
            }
        }
        // The requirements' shields index the job's QIs: other QIs have none.
        let mut requirements: Vec<Requirement> = job_requirements;
        if !args.qi.is_empty() {
            let given: Vec<String> = args.qi.iter().map(|q| q.trim().to_string()).collect();
            if given != qis {
                requirements.clear();
            }
            qis = given;
        }
        if !args.k.is_empty() {
            ks = args.k.clone();
        }
        if ks.is_empty() {
            ks = vec![2, 5, 10];
        }
        if ks.contains(&0) {
            return Err(Failure::bad_input("--k must be at least 1").into());
        }
        if args.format.is_some() {
            input_spec.format = args.format.clone();
        }
        if args.version.is_some() {
            input_spec.version = args.version;
        }
        if args.delimiter.is_some() {
            input_spec.delimiter = args.delimiter.clone();
        }
        if args.no_header {
            input_spec.header = Some(false);
        }
        Ok(Settings {
            input: input_spec,
            storage: storage_spec,
            qis,
            ks,
            risk: risk_spec,
            requirements,
            entity,
        })
    }
}

/// A Delta table and every version of it, with its certificate.
type History = (kanon_io::delta::Table, Vec<kanon_io::delta::Release>);

/// The input (a table given in memory, a Delta table with its history,
/// or files).
fn open(
    args: &InspectArgs,
    input_spec: &InputSpec,
    storage: &Storage,
    location: &Location,
) -> Result<(Dataset, Option<History>)> {
    let delta = match input_spec.format.as_deref() {
        _ if args.table.is_some() => false,
        Some("delta") => true,
        None => kanon_io::dataset::is_delta_table(storage, location)?,
        Some(_) => false,
    };
    Ok(match (&args.table, delta) {
        (Some(t), _) => (Dataset::in_memory(t)?, None),
        (None, true) => {
            let table = kanon_io::delta::Table::at(storage, location)?;
            let history = kanon_io::delta::history(storage, &table)?;
            let dataset = Dataset::open_delta(storage, location, input_spec.version, true)?;
            (dataset, Some((table, history)))
        }
        (None, false) => (Dataset::open(storage, location, input_spec)?, None),
    })
}

/// The rows of the input, and with QIs its risk: classes, rows at risk per
/// k, the job's requirements and the risk profile.
fn measure(
    s: &Settings,
    storage: &Storage,
    dataset: &Dataset,
    location: &Location,
    ui: &Ui,
) -> Result<(u64, Option<Risk>)> {
    let Settings {
        input: input_spec,
        qis,
        ks,
        risk: risk_spec,
        requirements,
        entity,
        ..
    } = s;
    let mut risk = None;
    let rows;
    if qis.is_empty() {
        rows = match dataset.rows {
            Some(r) => r,
            None => {
                // CSV: count by scanning the narrowest projection.
                let mut n = 0;
                for b in dataset.scan(storage, Some(vec![0]), false) {
                    check_interrupt()?;
                    n += b?.num_rows() as u64;
                }
                n
            }
        };
    } else {
        let spec = JobSpec::raw_categories(qis);
        let (table, read) = read_qis(
            &spec,
            storage,
            dataset,
            location,
            qis,
            entity.as_deref(),
            ui,
            "inspect",
        )?;
        rows = read;
        let population = match &risk_spec.population {
            Some(p) => {
                let location = Location::parse(p)?;
                let dataset = Dataset::open(storage, &location, input_spec).with_context(|| {
                    format!("the population table (risk.population, --population) {location}")
                })?;
                Some(
                    read_qis(
                        &spec,
                        storage,
                        &dataset,
                        &location,
                        qis,
                        None,
                        ui,
                        "population",
                    )?
                    .0,
                )
            }
            None => None,
        };
        let active = table.n_rows() - table.excluded().len();
        let profile = risk_profile(&table, population.as_ref(), &risk_spec.options(active))?;
        let requirements = requirement_risk(&table, requirements);
        let classes = EquivalenceClasses::of(&table);
        let sizes: Vec<usize> = (0..classes.len()).map(|c| classes.size(c)).collect();
        let people = entity.as_ref().map(|e| (e.clone(), table.n_rows()));
        risk = Some(risk_of(
            qis,
            people,
            &sizes,
            table.excluded().len(),
            ks,
            requirements,
            profile,
        ));
    }
    Ok((rows, risk))
}

/// The risk figures from the classes' sizes: `people` is the entity
/// column and the people counted, when counting people.
fn risk_of(
    qis: &[String],
    people: Option<(String, usize)>,
    sizes: &[usize],
    excluded: usize,
    ks: &[usize],
    requirements: Vec<RequirementRisk>,
    profile: RiskProfile,
) -> Risk {
    let active = sizes.iter().sum::<usize>().max(1) as f64;
    Risk {
        quasi_identifiers: qis.to_vec(),
        people: people.as_ref().map(|p| p.1),
        entity: people.map(|p| p.0),
        classes: sizes.len(),
        smallest_class: sizes.iter().copied().min().unwrap_or(0),
        unique_rows: sizes.iter().filter(|&&s| s == 1).count(),
        rows_with_null_qi: excluded,
        at_risk: ks
            .iter()
            .map(|&k| {
                let small: Vec<usize> = sizes.iter().copied().filter(|&s| s < k).collect();
                let rows: usize = small.iter().sum();
                AtRisk {
                    k,
                    classes: small.len(),
                    rows,
                    share: rows as f64 / active,
                }
            })
            .collect(),
        requirements,
        profile,
    }
}

/// The inspection as text.
fn print_text(report: &Inspection, history: Option<&History>) {
    if let Some((table, history)) = history {
        kanon_io::delta::print_history(table, history);
        if let Some(v) = report.delta_version {
            outln!("Version {v} read below.");
        }
    }
    outln!(
        "{}: {} file(s), {}, {} bytes, {} rows, {} columns",
        report.input,
        report.files,
        report.format,
        report.bytes,
        report.rows,
        report.columns.len()
    );
    let width = report
        .columns
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for c in &report.columns {
        outln!(
            "  {:width$}  {}{}",
            c.name,
            c.data_type,
            if c.nullable { "" } else { " not null" }
        );
    }
    if let Some(workers) = &report.workers {
        outln!(
            "read by {} worker(s): {} (minimal sample uniques are not measured with --workers)",
            workers.len(),
            workers.join(", ")
        );
    }
    if let Some(r) = &report.risk {
        outln!(
            "risk for quasi-identifiers [{}]:",
            r.quasi_identifiers.join(", ")
        );
        let units = match (&r.entity, r.people) {
            (Some(column), Some(people)) => {
                outln!(
                    "  people {people} by `{column}` (the job's privacy.entity): every figure below counts people, not rows"
                );
                people
            }
            _ => report.rows as usize,
        };
        outln!(
            "  classes {}, smallest {}, unique rows {} ({:.2} %)",
            r.classes,
            r.smallest_class,
            r.unique_rows,
            100.0 * r.unique_rows as f64 / (units as f64).max(1.0)
        );
        if r.rows_with_null_qi > 0 {
            outln!(
                "  rows with a null quasi-identifier: {}",
                r.rows_with_null_qi
            );
        }
        for a in &r.at_risk {
            outln!(
                "  k = {:<4} {} rows at risk ({:.2} %) in {} classes smaller than k",
                a.k,
                a.rows,
                100.0 * a.share,
                a.classes
            );
        }
        for q in &r.requirements {
            outln!(
                "  {}: achieved k {}, {} rows at risk in {} of {} projected tuples",
                q.requirement,
                q.achieved_k,
                q.records_below_k,
                q.tuples_below_k,
                q.tuples
            );
        }
        print_profile(&r.profile);
    }
}

/// Reads the QI columns of `dataset` as raw categories (nulls apart).
/// The QIs of `dataset` encoded, and the rows read. With `entity` (the
/// job's `privacy.entity`), the rows of each person collapse to one, as
/// the verifier counts them: every figure then counts people.
#[allow(clippy::too_many_arguments)]
fn read_qis(
    spec: &JobSpec,
    storage: &Storage,
    dataset: &Dataset,
    location: &Location,
    qis: &[String],
    entity: Option<&str>,
    ui: &Ui,
    what: &str,
) -> Result<(QiTable, u64)> {
    let mut encoder = Encoder::try_new(spec, &Default::default(), &dataset.schema)
        .with_context(|| format!("the quasi-identifiers do not fit {location}"))?;
    let bar = ui.bar(what, dataset.rows);
    let mut columns = qis.to_vec();
    columns.extend(entity.map(String::from));
    let mut people = kanon_engine::entity::PersonIds::default();
    for b in dataset.scan(storage, Some(dataset.projection(&columns)), false) {
        check_interrupt()?;
        let b = b?;
        encoder.push(&b)?;
        if let Some(column) = entity {
            people.push(column, &b).map_err(|e| {
                Failure::bad_input(format!("{location}: {e} (the job's privacy.entity)"))
            })?;
        }
        bar.inc(b.num_rows() as u64);
    }
    bar.finish_and_clear();
    let table = encoder.finish()?;
    let rows = table.n_rows() as u64;
    let Some(column) = entity else {
        return Ok((table, rows));
    };
    let people = kanon_engine::entity::people_of_release(&table, &people.finish()).map_err(|e| {
        Failure::bad_input(format!(
            "kanon inspect counts the people of `{column}` (the job's privacy.entity) by their quasi-identifiers, and {e}; inspect the release instead (there a person's rows share one class), or count rows with a job whose `entity = \"row\"`"
        ))
    })?;
    Ok((people, rows))
}

/// The risk measures in text: attacker models, uniqueness, and the QI
/// combinations that single records out (attribute names only).
fn print_profile(p: &RiskProfile) {
    let t = p.prosecutor.threshold;
    outln!(
        "  prosecutor risk: highest {:.4}, average {:.4}, {} records ({:.2} %) above {t}",
        p.prosecutor.highest,
        p.prosecutor.average,
        p.prosecutor.records_above_threshold,
        100.0 * p.prosecutor.share_above_threshold
    );
    if let Some(j) = &p.journalist {
        outln!(
            "  journalist risk: highest {:.4}, average {:.4}, {} records ({:.2} %) above {t}",
            j.highest,
            j.average,
            j.records_above_threshold,
            100.0 * j.share_above_threshold
        );
    }
    outln!("  marketer risk: {:.4}", p.marketer);
    if let Some(u) = &p.population_uniqueness {
        let est = |e: &kanon_engine::metrics::risk::UniquenessEstimate| match e.share {
            Some(s) => format!("{:.4} %", 100.0 * s),
            None => "n/a".to_string(),
        };
        outln!(
            "  population uniques (N = {}, sampling fraction {:.4}): Dankar {}{}, Pitman {}, Zayatz {}, SNB {}",
            u.population_size,
            u.sampling_fraction,
            est(&u.dankar),
            u.dankar_model
                .map(|m| format!(" ({m:?})"))
                .unwrap_or_default(),
            est(&u.pitman),
            est(&u.zayatz),
            est(&u.snb)
        );
    }
    if let Some(m) = &p.msus {
        outln!(
            "  minimal sample uniques (QI sets of up to {}): {} in {} records",
            m.max_size,
            m.msus,
            m.records_with_msu
        );
        for a in m.attributes.iter().filter(|a| a.msus > 0) {
            outln!("    {:<20} in {} MSUs", a.attribute, a.msus);
        }
        for c in m.top_combinations.iter().take(5) {
            outln!(
                "    [{}] makes {} records unique",
                c.attributes.join(", "),
                c.records
            );
        }
    }
}
