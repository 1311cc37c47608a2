//! The report's data model ([`ReportData`]): everything the HTML shows, as
//! plain serialisable figures, built from a job, the release's tally and,
//! when it was read, the input's tally.
//!
//! Every text in it is a job setting, a column name, a published label or a
//! figure: raw input values never enter it ([`super::tally::InputTally`]
//! holds counts only), so the HTML cannot show one.

use kanon_engine::metrics::risk::{PopulationUniqueness, RiskProfile};
use kanon_engine::metrics::Report;
use kanon_engine::privacy::Privacy;
use kanon_engine::verify::Verified;
use serde::Serialize;

use super::tally::{ClassSizes, InputTally, ReleaseTally};
use kanon_io::config::JobFile;

/// One row of a table of measures: a name, its value as shown, and what it
/// means. The further risk measures ([`risk_measures`]) and the utility
/// metrics are such rows.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Measure {
    pub name: String,
    pub value: String,
    pub explanation: String,
}

impl Measure {
    pub(crate) fn new(name: &str, value: impl Into<String>, explanation: &str) -> Measure {
        Measure {
            name: name.into(),
            value: value.into(),
            explanation: explanation.into(),
        }
    }
}

/// A bar of a chart: a category and its count.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Bar {
    pub(crate) label: String,
    pub(crate) count: u64,
}

/// Everything a release report shows, section by section.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReportData {
    /// Where the release is (as given on the command line or in the job).
    pub(crate) release: String,
    /// 1. The job.
    pub(crate) job: JobSection,
    /// 2. What was achieved, per requirement.
    pub(crate) achieved: Achieved,
    /// 3. Risk before and after.
    pub(crate) risk: RiskSection,
    /// 4. Information kept.
    pub(crate) information: Information,
    /// 5. Provenance and certificate.
    pub(crate) provenance: Provenance,
}

/// The job's settings.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct JobSection {
    pub(crate) config: String,
    /// Each privacy model with its parameters, e.g. `k-anonymity (k = 10)`.
    pub(crate) models: Vec<String>,
    /// `[privacy.models]` entries with their parameters as JSON.
    pub(crate) other_models: Vec<(String, String)>,
    /// QIs with how each is generalised.
    pub(crate) quasi_identifiers: Vec<(String, String)>,
    pub(crate) sensitive: Vec<String>,
    pub(crate) algorithm: String,
    pub(crate) seed: u64,
    pub(crate) suppression_limit: f64,
}

/// What the release achieves.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Achieved {
    pub(crate) verified: bool,
    /// What verification said (counts only).
    pub(crate) verification: String,
    /// Each requirement `<shield, k>` (the all-QI one included).
    pub(crate) requirements: Vec<RequirementRow>,
    /// l achieved per sensitive column.
    pub(crate) diversity: Vec<DiversityRow>,
    /// Every per-class model (l-diversity, t-closeness, risk threshold,
    /// registered ones) and what the release achieves under it.
    pub(crate) models: Vec<ModelRow>,
    pub(crate) rows_in: Option<u64>,
    pub(crate) rows_published: u64,
    pub(crate) rows_suppressed: Option<u64>,
    pub(crate) classes: usize,
}

/// One anonymity requirement and the k achieved.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RequirementRow {
    pub(crate) requirement: String,
    pub(crate) k: usize,
    pub(crate) achieved_k: usize,
}

/// A per-class model the release passed, and what it achieves.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ModelRow {
    pub(crate) model: String,
    pub(crate) achieved: String,
}

/// l achieved in one sensitive column.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DiversityRow {
    pub(crate) column: String,
    pub(crate) required: Option<String>,
    pub(crate) distinct_l: usize,
    pub(crate) entropy_l: f64,
}

/// Re-identification risk of a table's records by their QIs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Risk {
    pub(crate) records: u64,
    pub(crate) classes: usize,
    /// Classes by size (buckets `1`, `2`, `3-4`, ...).
    pub(crate) class_sizes: Vec<Bar>,
    /// Records by prosecutor-risk band.
    pub(crate) bands: Vec<Bar>,
    /// `1 / smallest class`.
    pub(crate) highest_risk: f64,
    /// `classes / records`.
    pub(crate) mean_risk: f64,
    /// Records alone in their class.
    pub(crate) sample_uniques: u64,
    /// Records in classes smaller than the job's k.
    pub(crate) below_k: u64,
    /// The largest class.
    pub(crate) largest_class: usize,
}

/// Risk before (the input's raw QI classes) and after (the release's).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RiskSection {
    pub(crate) before: Option<Risk>,
    /// Why there is no "before", or a caveat about it.
    pub(crate) before_note: Option<String>,
    pub(crate) after: Risk,
    /// Further measures (journalist and marketer risk, population
    /// uniqueness, riskiest QI combinations, ...), as rows.
    pub(crate) further: Vec<Measure>,
}

/// What a QI keeps.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AttributeKept {
    pub(crate) name: String,
    /// Cells by generalisation step (hierarchy level, interval width, ...).
    pub(crate) steps: Vec<Bar>,
    /// Mean NCP of the published cells.
    pub(crate) ncp: f64,
    /// The most frequent published labels.
    pub(crate) released: Vec<Bar>,
    /// Distinct published labels.
    pub(crate) released_distinct: usize,
    /// The input's value frequencies, most frequent first, without values.
    pub(crate) input_shape: Option<Vec<u64>>,
}

/// The heatmap: the largest and smallest classes by QI, each cell the
/// published label and its NCP.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Heatmap {
    pub(crate) attributes: Vec<String>,
    pub(crate) rows: Vec<HeatRow>,
}

/// One class of the heatmap.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HeatRow {
    pub(crate) size: usize,
    pub(crate) cells: Vec<(String, f64)>,
}

/// Information kept by the release.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Information {
    pub(crate) attributes: Vec<AttributeKept>,
    pub(crate) utility: Vec<Measure>,
    pub(crate) heatmap: Heatmap,
}

/// Provenance of the release.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Provenance {
    pub(crate) kanon_version: String,
    pub(crate) input: Option<String>,
    pub(crate) input_fingerprint: Option<String>,
    pub(crate) files: Vec<String>,
    /// The `kanon.*` key-values of the release's metadata.
    pub(crate) metadata: Vec<(String, String)>,
}

/// What a report is made of.
pub struct Sources<'a> {
    pub job: &'a JobFile,
    pub privacy: &'a Privacy,
    pub release: String,
    pub input: Option<String>,
    pub before: Option<&'a InputTally>,
    pub before_note: Option<String>,
    pub after: &'a ReleaseTally,
    /// Verification of the published labels: what it found, or why it failed.
    pub verified: Result<&'a Verified, String>,
    pub rows_in: Option<u64>,
    /// The engine's metrics, when the report is made by the run itself.
    pub metrics: Option<&'a Report>,
    pub metadata: Vec<(String, String)>,
    pub files: Vec<String>,
    /// Further risk measures beyond kanon's own, shown after them.
    pub further: Vec<Measure>,
}

/// Bars shown of a QI's published labels.
const TOP_LABELS: usize = 12;

/// Input frequencies kept for a QI's "before" shape.
const SHAPE_VALUES: usize = 60;

impl ReportData {
    /// Builds the report of `s`.
    pub(crate) fn build(s: &Sources) -> ReportData {
        let spec = s.job.spec();
        let qis: Vec<_> = spec.quasi_identifiers().collect();
        let k = s.privacy.class_min_size();
        let after = risk(&s.after.sizes, k);
        let before = s.before.map(|b| risk(&b.sizes, k));
        let rows_published = s.after.rows as u64;
        let rows_in = s.rows_in.or(s.before.map(|b| b.rows as u64));
        let (verified, verification, requirements, models) = match &s.verified {
            Ok(v) => (
                true,
                format!(
                    "the published labels satisfy {} ({} rows in {} classes, smallest {})",
                    s.privacy.describe(),
                    v.published_rows,
                    v.classes,
                    v.smallest_class
                ),
                v.requirements
                    .iter()
                    .map(|r| RequirementRow {
                        requirement: r.requirement.clone(),
                        k: r.k,
                        achieved_k: r.achieved_k,
                    })
                    .collect(),
                v.models
                    .iter()
                    .map(|m| ModelRow {
                        model: m.model.clone(),
                        achieved: m.achieved.clone().unwrap_or_else(|| "passed".into()),
                    })
                    .collect(),
            ),
            Err(msg) => (false, msg.clone(), Vec::new(), Vec::new()),
        };
        let required_l = spec.privacy.l.map(|l| {
            let mut d = format!("{:?} l = {l}", spec.diversity()).to_lowercase();
            if let Some(c) = spec.privacy.c {
                d.push_str(&format!(", c = {c}"));
            }
            d
        });
        let diversity_columns = spec.diversity_columns();
        let diversity = s
            .after
            .diversity
            .iter()
            .map(|(column, distinct_l, entropy_l)| DiversityRow {
                column: column.clone(),
                required: required_l
                    .clone()
                    .filter(|_| diversity_columns.contains(column)),
                distinct_l: *distinct_l,
                entropy_l: *entropy_l,
            })
            .collect();
        let job = JobSection {
            config: s
                .job
                .path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            models: s
                .privacy
                .requirements()
                .iter()
                .map(|r| r.describe())
                .chain(s.privacy.class_models().iter().map(|m| m.describe()))
                .collect(),
            other_models: spec
                .privacy
                .models
                .iter()
                .map(|(n, p)| (n.clone(), p.to_string()))
                .collect(),
            quasi_identifiers: qis
                .iter()
                .map(|a| (a.name.clone(), generalisation_of(a)))
                .collect(),
            sensitive: spec.sensitive().map(|a| a.name.clone()).collect(),
            algorithm: spec.algorithm.name.clone(),
            seed: spec.algorithm.seed,
            suppression_limit: spec.suppression_limit(),
        };
        let attributes = qis
            .iter()
            .enumerate()
            .map(|(q, a)| attribute_kept(&a.name, q, s))
            .collect();
        let heatmap = Heatmap {
            attributes: qis.iter().map(|a| a.name.clone()).collect(),
            rows: s
                .after
                .extremes
                .iter()
                .map(|(size, codes)| HeatRow {
                    size: *size,
                    cells: codes
                        .iter()
                        .zip(&s.after.labels)
                        .map(|(&c, labels)| {
                            let l = &labels[c as usize];
                            (l.text.clone(), l.ncp)
                        })
                        .collect(),
                })
                .collect(),
        };
        let fingerprint = s
            .metadata
            .iter()
            .find(|(k, _)| k == "kanon.input.fingerprint")
            .map(|(_, v)| v.clone());
        ReportData {
            release: s.release.clone(),
            job,
            achieved: Achieved {
                verified,
                verification,
                requirements,
                diversity,
                models,
                rows_in,
                rows_published,
                rows_suppressed: rows_in.map(|r| r.saturating_sub(rows_published)),
                classes: s.after.sizes.classes(),
            },
            risk: RiskSection {
                further: further_risk(&after)
                    .into_iter()
                    .chain(s.further.iter().cloned())
                    .collect(),
                before,
                before_note: s.before_note.clone(),
                after,
            },
            information: Information {
                attributes,
                utility: utility(s),
                heatmap,
            },
            provenance: Provenance {
                kanon_version: s
                    .metadata
                    .iter()
                    .find(|(k, _)| k == "kanon.version")
                    .map_or(env!("CARGO_PKG_VERSION").to_string(), |(_, v)| v.clone()),
                input: s.input.clone(),
                input_fingerprint: fingerprint,
                files: s.files.clone(),
                metadata: s.metadata.clone(),
            },
        }
    }
}

/// How a QI is generalised, in words.
fn generalisation_of(a: &kanon_engine::spec::AttributeSpec) -> String {
    if let Some(h) = &a.hierarchy {
        let file = std::path::Path::new(h)
            .file_name()
            .map_or(h.clone(), |f| f.to_string_lossy().into_owned());
        return format!("hierarchy {file}");
    }
    let numbers = |v: &[f64]| {
        v.iter()
            .map(|&x| kanon_engine::encode::format_number(x))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(i) = &a.intervals {
        return format!("intervals of widths {}", numbers(i));
    }
    if let Some(c) = &a.cuts {
        let levels: Vec<String> = c.iter().map(|l| format!("[{}]", numbers(l))).collect();
        return format!("cuts at {}", levels.join(" then "));
    }
    if a.masking {
        return "masking".into();
    }
    match a.kind {
        Some(kanon_engine::spec::Kind::Numeric) => "numeric ranges".into(),
        _ => "flexible (ranges or value sets)".into(),
    }
}

/// The class-size buckets of the histogram, as `(from, to)` sizes.
const SIZE_BUCKETS: [(usize, usize); 9] = [
    (1, 1),
    (2, 2),
    (3, 4),
    (5, 9),
    (10, 19),
    (20, 49),
    (50, 99),
    (100, 999),
    (1000, usize::MAX),
];

/// Prosecutor-risk bands `1/size` by the class sizes they hold:
/// 100 % (size 1), 50-100 % (2), 20-50 % (3-5), 10-20 % (6-10),
/// 5-10 % (11-20), under 5 % (21 or more).
const RISK_BANDS: [(&str, usize, usize); 6] = [
    ("100 %", 1, 1),
    ("50-100 %", 2, 2),
    ("20-50 %", 3, 5),
    ("10-20 %", 6, 10),
    ("5-10 %", 11, 20),
    ("< 5 %", 21, usize::MAX),
];

/// The risk figures of a table with `sizes`, for the job's k.
fn risk(sizes: &ClassSizes, k: usize) -> Risk {
    let records = sizes.rows() as u64;
    let classes = sizes.classes();
    let in_range = |lo: usize, hi: usize, weight: fn(usize, usize) -> u64| -> u64 {
        sizes
            .by_size
            .iter()
            .filter(|(s, _)| (lo..=hi).contains(s))
            .map(|&(s, n)| weight(s, n))
            .sum()
    };
    let class_sizes = SIZE_BUCKETS
        .iter()
        .map(|&(lo, hi)| Bar {
            label: match (lo, hi) {
                (l, h) if l == h => l.to_string(),
                (l, usize::MAX) => format!("{l}+"),
                (l, h) => format!("{l}-{h}"),
            },
            count: in_range(lo, hi, |_, n| n as u64),
        })
        .collect();
    let bands = RISK_BANDS
        .iter()
        .map(|&(label, lo, hi)| Bar {
            label: label.into(),
            count: in_range(lo, hi, |s, n| (s * n) as u64),
        })
        .collect();
    let smallest = sizes.smallest();
    Risk {
        records,
        classes,
        class_sizes,
        bands,
        highest_risk: if smallest == 0 {
            0.0
        } else {
            1.0 / smallest as f64
        },
        mean_risk: if records == 0 {
            0.0
        } else {
            classes as f64 / records as f64
        },
        sample_uniques: in_range(1, 1, |s, n| (s * n) as u64),
        below_k: in_range(1, k.saturating_sub(1), |s, n| (s * n) as u64),
        largest_class: sizes.largest(),
    }
}

/// The further risk measure the tallies give: how coarse the release gets.
fn further_risk(after: &Risk) -> Vec<Measure> {
    vec![Measure::new(
        "largest class (release)",
        after.largest_class.to_string(),
        "records in the largest published class: how coarse the release gets at its coarsest",
    )]
}

/// The engine's risk measures ([`RiskProfile`]) of the input (`before`,
/// when read) and of the release, as rows `before -> after`: the attacker
/// models of El Emam & Dankar, the population-uniqueness estimates (Pitman,
/// Zayatz, SNB, Dankar et al.'s rule) and the QI combinations that single
/// records out (SUDA's minimal sample uniques, attribute names only).
pub fn risk_measures(before: Option<&RiskProfile>, after: &RiskProfile) -> Vec<Measure> {
    let pair = |f: &dyn Fn(&RiskProfile) -> Option<String>| -> String {
        let a = f(after).unwrap_or_else(|| "-".into());
        match before {
            Some(b) => format!("{} \u{2192} {a}", f(b).unwrap_or_else(|| "-".into())),
            None => a,
        }
    };
    let threshold = after.prosecutor.threshold;
    let mut rows = vec![
        Measure::new(
            &format!("records above prosecutor risk {threshold}"),
            pair(&|p| Some(percent(p.prosecutor.share_above_threshold))),
            "share of records in classes so small that an attacker who knows a person is in the data re-identifies them with a probability above the threshold (risk.threshold)",
        ),
        Measure::new(
            "marketer risk",
            pair(&|p| Some(percent(p.marketer))),
            "expected share of records re-identified by linking every record to an identified table with the same QIs (classes / records, or with a population table the sum of f/F over records)",
        ),
    ];
    if before.is_some_and(|b| b.journalist.is_some()) || after.journalist.is_some() {
        rows.push(Measure::new(
            "journalist risk (highest, average)",
            pair(&|p| {
                p.journalist
                    .as_ref()
                    .map(|j| format!("{:.4}, {:.4}", j.highest, j.average))
            }),
            "risk of a record when the attacker only knows the person is in the population (risk.population): 1 / the size of its class in the population",
        ));
    }
    let estimate = |p: &RiskProfile, pick: &dyn Fn(&PopulationUniqueness) -> Option<f64>| {
        p.population_uniqueness.as_ref().and_then(pick).map(percent)
    };
    if before.is_some_and(|b| b.population_uniqueness.is_some())
        || after.population_uniqueness.is_some()
    {
        let model = before
            .and_then(|b| b.population_uniqueness.as_ref())
            .or(after.population_uniqueness.as_ref())
            .and_then(|u| u.dankar_model)
            .map(|m| format!(" ({m:?})"))
            .unwrap_or_default();
        rows.push(Measure::new(
            &format!("population uniques, Dankar et al.{model}"),
            pair(&|p| estimate(p, &|u| u.dankar.share)),
            "estimated share of records unique in the whole population (risk.population_size), by the model Dankar et al.'s rule picks for the sampling fraction, as ARX does",
        ));
        for (name, pick) in [
            (
                "Pitman",
                (|u: &PopulationUniqueness| u.pitman.share)
                    as fn(&PopulationUniqueness) -> Option<f64>,
            ),
            ("Zayatz", |u| u.zayatz.share),
            ("SNB", |u| u.snb.share),
        ] {
            rows.push(Measure::new(
                &format!("population uniques, {name}"),
                pair(&|p| estimate(p, &pick)),
                "the same estimate by one model (- when the model does not converge on these class sizes)",
            ));
        }
    }
    let msus = before.and_then(|b| b.msus.as_ref());
    if let Some(m) = msus {
        rows.push(Measure::new(
            &format!("minimal sample uniques (input, QI sets of up to {})", m.max_size),
            format!("{} in {} records", m.msus, m.records_with_msu),
            "combinations of QIs whose values single a record out while no smaller combination does (SUDA): the attributes that drive the risk",
        ));
        let mut attributes: Vec<_> = m.attributes.iter().filter(|a| a.msus > 0).collect();
        attributes.sort_by_key(|a| std::cmp::Reverse(a.msus));
        rows.push(Measure::new(
            "attributes in most minimal sample uniques (input)",
            attributes
                .iter()
                .take(4)
                .map(|a| format!("{} ({})", a.attribute, a.msus))
                .collect::<Vec<_>>()
                .join(", "),
            "the QIs that take part in the most minimal sample uniques: generalise these first",
        ));
        for c in m.top_combinations.iter().take(3) {
            rows.push(Measure::new(
                &format!(
                    "riskiest QI combination (input): {}",
                    c.attributes.join(", ")
                ),
                format!("{} records", c.records),
                "records this combination makes unique in the input",
            ));
        }
    }
    if let Some(m) = &after.msus {
        rows.push(Measure::new(
            "minimal sample uniques (release)",
            format!("{} in {} records", m.msus, m.records_with_msu),
            "the same search on the published labels",
        ));
    }
    rows
}

/// A share as a percentage.
pub(crate) fn percent(share: f64) -> String {
    format!("{:.2} %", 100.0 * share)
}

/// What one QI keeps.
fn attribute_kept(name: &str, q: usize, s: &Sources) -> AttributeKept {
    let labels = &s.after.labels[q];
    let mut steps: Vec<(f64, String, u64)> = Vec::new();
    for l in labels.iter().filter(|l| l.count > 0) {
        match steps.iter_mut().find(|(_, step, _)| *step == l.step) {
            Some(e) => e.2 += l.count,
            None => steps.push((l.step_rank, l.step.clone(), l.count)),
        }
    }
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut released: Vec<&super::tally::Label> = labels.iter().filter(|l| l.count > 0).collect();
    released.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.text.cmp(&b.text)));
    AttributeKept {
        name: name.into(),
        steps: steps
            .into_iter()
            .map(|(_, label, count)| Bar { label, count })
            .collect(),
        ncp: s.after.ncp[q],
        released_distinct: released.len(),
        released: released
            .iter()
            .take(TOP_LABELS)
            .map(|l| Bar {
                label: l.text.clone(),
                count: l.count,
            })
            .collect(),
        input_shape: s.before.map(|b| {
            b.frequencies[q]
                .iter()
                .copied()
                .take(SHAPE_VALUES)
                .collect()
        }),
    }
}

/// The utility metrics: the run's own when the run writes the report, else
/// the release's metadata and what the labels and classes give.
fn utility(s: &Sources) -> Vec<Measure> {
    let mut out = Vec::new();
    if let Some(r) = s.metrics {
        let f = |v: f64| {
            if v.abs() >= 1000.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.4}")
            }
        };
        out.extend([
            Measure::new("NCP", f(r.ncp), "normalised certainty penalty: mean share of each QI's domain a published cell covers (0 = exact values, 1 = all suppressed)"),
            Measure::new("utility", f(r.utility), "1 - NCP"),
            Measure::new("granularity", f(r.granularity), "mean share of the hierarchy's leaves a cell covers"),
            Measure::new("precision", f(r.precision), "Sweeney's precision: 1 - mean generalisation height"),
            Measure::new("discernibility", format!("{:.0}", r.discernibility), "sum over records of their class size (suppressed records count the table size)"),
            Measure::new("AECS", f(r.aecs), "average equivalence class size"),
            Measure::new("distortion ratio", f(r.distortion_ratio), "distortion over the distortion of the fully generalised table"),
            Measure::new("modification rate", f(r.modification_rate), "share of QI cells changed"),
            Measure::new("O/I ratio", f(r.oi_ratio), "distinct published tuples over distinct input tuples"),
        ]);
        // The built-in registered metrics repeat the rows above (whd is the
        // distortion ratio, precision-loss 1 - precision) but for the
        // normalised AECS; metrics a library user registered are listed.
        for m in &r.utility_metrics {
            match m.metric.as_str() {
                "ncp" | "granularity" | "precision-loss" | "whd" | "discernibility" => {}
                "aecs" => out.push(Measure::new(
                    "normalised AECS",
                    f(m.loss),
                    "records / (classes x k): 1 when every class has exactly k records",
                )),
                name => out.push(Measure::new(
                    &format!("{name} (registered metric)"),
                    f(m.loss),
                    "loss under a metric registered with the utility registry; lower keeps more",
                )),
            }
        }
        return out;
    }
    let meta = |key: &str| {
        s.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    if let Some(v) = meta("kanon.ncp") {
        out.push(Measure::new(
            "NCP (run)",
            v,
            "NCP the run reported, suppressed rows included (release metadata kanon.ncp)",
        ));
    }
    if let Some(v) = meta("kanon.granularity") {
        out.push(Measure::new(
            "granularity (run)",
            v,
            "granularity the run reported (release metadata kanon.granularity)",
        ));
    }
    let cells: f64 = s.after.ncp.len() as f64;
    let ncp = if cells == 0.0 {
        0.0
    } else {
        s.after.ncp.iter().sum::<f64>() / cells
    };
    out.push(Measure::new(
        "NCP (published labels)",
        format!("{ncp:.4}"),
        "mean NCP of the published cells, read back from their labels",
    ));
    let sizes = &s.after.sizes;
    let published = sizes.rows() as f64;
    let suppressed = s.rows_in.map_or(0.0, |r| (r as f64 - published).max(0.0));
    let dm: f64 = sizes
        .by_size
        .iter()
        .map(|&(sz, n)| (sz * sz * n) as f64)
        .sum::<f64>()
        + suppressed * (published + suppressed);
    out.push(Measure::new(
        "discernibility",
        format!("{dm:.0}"),
        "sum over records of their class size (suppressed records count the table size)",
    ));
    let aecs = if sizes.classes() == 0 {
        0.0
    } else {
        published / sizes.classes() as f64
    };
    out.push(Measure::new(
        "AECS",
        format!("{aecs:.4}"),
        "average equivalence class size",
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_fall_in_risk_bands_by_class_size() {
        let sizes = ClassSizes {
            by_size: vec![(1, 2), (2, 1), (4, 1), (25, 1)],
        };
        let r = risk(&sizes, 3);
        let bands: Vec<u64> = r.bands.iter().map(|b| b.count).collect();
        assert_eq!(bands, [2, 2, 4, 0, 0, 25]);
        assert_eq!((r.sample_uniques, r.below_k, r.records), (2, 4, 33));
        assert_eq!(r.highest_risk, 1.0);
        assert!((r.mean_risk - 5.0 / 33.0).abs() < 1e-12);
    }
}
