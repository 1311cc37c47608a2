//! Metrics of a release (`docs/SPEC.md` section 3), all computed from the encoded
//! table and the partition: information loss (WHD distortion, NCP,
//! granularity, precision, discernibility, AECS, modification rate, O/I,
//! L-clustering's uncertainty loss) and risk (smallest class, rows in classes
//! below k, l-diversity achieved per sensitive column), and the loss under
//! every metric of the utility registry ([`utility`]).

pub mod distortion;
pub mod loss;
pub mod risk;
pub mod utility;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::encode::{EquivalenceClasses, QiTable};
use crate::generalise::Cell;
use crate::partition::Partition;

pub use distortion::Weights;

/// Loss figures of one QI.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttributeLoss {
    /// Column name.
    pub name: String,
    /// Mean NCP of the column's cells.
    pub ncp: f64,
    /// Mean granularity of the column's cells.
    pub granularity: f64,
    /// Mean WHD (uniform weights) of the column's cells.
    pub distortion: f64,
}

/// Every metric of a release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Input rows.
    pub rows_in: usize,
    /// Published rows.
    pub rows_out: usize,
    /// Rows suppressed (withheld), nulls included.
    pub suppressed_rows: usize,
    /// Published classes (distinct published tuples).
    pub classes: usize,
    /// Smallest published class: the k achieved (0 when nothing is published).
    pub smallest_class: usize,
    /// Largest published class.
    pub largest_class: usize,
    /// Average published class size (AECS).
    pub aecs: f64,
    /// Published classes smaller than the requested k (0 for a valid release).
    pub classes_below_k: usize,
    /// Rows in published classes smaller than k.
    pub rows_below_k: usize,
    /// Mean NCP over all QI cells, suppressed rows included (cost 1).
    pub ncp: f64,
    /// `1 - ncp`.
    pub utility: f64,
    /// Mean granularity over all QI cells.
    pub granularity: f64,
    /// Sweeney's precision `1 - sum(l/h)/(n*m)`.
    pub precision: f64,
    /// Table distortion, uniform WHD weights (sum over rows).
    pub distortion: f64,
    /// Distortion over the distortion of the fully generalised table.
    pub distortion_ratio: f64,
    /// Table distortion with height weights (`beta` of the report options).
    pub distortion_height: f64,
    /// Distortion ratio with height weights.
    pub distortion_ratio_height: f64,
    /// Attribute-weighted distortion (Han et al. 2014), sum over rows.
    pub weighted_distortion: f64,
    /// Discernibility metric `DM`.
    pub discernibility: f64,
    /// Share of QI cells changed.
    pub modification_rate: f64,
    /// Distinct QI tuples in the input.
    pub distinct_rows_in: usize,
    /// Distinct published tuples.
    pub distinct_rows_out: usize,
    /// `distinct_rows_out / distinct_rows_in` (HeuristicMin's objective).
    pub oi_ratio: f64,
    /// Per-QI loss.
    pub attributes: Vec<AttributeLoss>,
    /// L-clustering's uncertainty loss `L(D, D*)` (the L-clustering paper): the sum over
    /// rows of `L(t, t*)`, each cell weighted by its attribute's `weight`;
    /// a suppressed row costs the sum of the weights.
    pub uncertainty_loss: f64,
    /// The l-diversity achieved in each sensitive column.
    pub sensitive: Vec<SensitiveDiversity>,
    /// The loss under every registered utility metric
    /// ([`utility::all`]), in registry order; lower keeps more.
    pub utility_metrics: Vec<UtilityLoss>,
}

/// A release's loss under one registered utility metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilityLoss {
    /// The metric's registered name.
    pub metric: String,
    /// Its value; lower keeps more information.
    pub loss: f64,
}

/// The l-diversity a release achieves in one sensitive column: the worst
/// published class under each variant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SensitiveDiversity {
    /// Column name.
    pub name: String,
    /// Fewest distinct values in a published class (distinct l achieved).
    pub distinct_l: usize,
    /// Smallest entropy (natural log) of a published class.
    pub min_entropy: f64,
    /// `exp(min_entropy)`: the largest l for which the release is entropy
    /// l-diverse.
    pub entropy_l: f64,
    /// Largest share of one value within a published class: an attacker's
    /// best chance of guessing a member's value.
    pub max_share: f64,
}

/// Options of a report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportOptions {
    /// The requested k (for rows and classes below k, and DM).
    pub k: usize,
    /// beta of the height weights.
    pub beta: f64,
    /// Distinct QI tuples of the input, when the caller counted them
    /// already (counted again otherwise).
    pub distinct_rows_in: Option<usize>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            k: 2,
            beta: 1.0,
            distinct_rows_in: None,
        }
    }
}

/// Computes every metric of a partition.
pub fn report(table: &QiTable, partition: &Partition, options: ReportOptions) -> Report {
    let n = table.n_rows();
    let m = table.n_qi();
    let (class_of_group, n_classes) = partition.published_classes();
    let mut class_size = vec![0usize; n_classes];
    let group_sizes = partition.group_sizes();
    for (g, &c) in class_of_group.iter().enumerate() {
        class_size[c as usize] += group_sizes[g];
    }
    class_size.retain(|&s| s > 0);
    let suppressed = partition.suppressed();
    let rows_out = n - suppressed;
    // The losses are the data's: under δ-presence the population outside
    // the research subset is withheld but is not the data, so it costs
    // nothing (`rows_in` and `suppressed_rows` still count it: every input
    // row is accounted for).
    let scope = table.rows_in_scope();
    let lost = suppressed - table.outside().len();
    let height = Weights::Height { beta: options.beta };
    // Per group and column cell costs, weighted by group size.
    let mut sums = Sums::default();
    let mut per_attr = vec![Sums::default(); m];
    for (g, &size) in group_sizes.iter().enumerate().take(partition.n_groups()) {
        let size = size as f64;
        if size == 0.0 {
            continue;
        }
        for (q, (col, cell)) in table.columns().iter().zip(partition.tuple(g)).enumerate() {
            let s = CellCosts::of(col, cell, height);
            sums.add(&s, size);
            per_attr[q].add(&s, size);
            if !col.is_unchanged(cell) {
                sums.changed += size;
            }
        }
    }
    // Suppressed rows publish nothing: every cell costs its maximum.
    if lost > 0 {
        for (q, col) in table.columns().iter().enumerate() {
            let s = CellCosts::of(col, &Cell::Suppressed, height);
            sums.add(&s, lost as f64);
            per_attr[q].add(&s, lost as f64);
        }
        sums.changed += (lost * m) as f64;
    }
    let cells = (scope * m).max(1) as f64;
    let k = options.k;
    let below: Vec<usize> = class_size.iter().copied().filter(|&s| s < k).collect();
    let dm = class_size
        .iter()
        .map(|&s| {
            if s >= k {
                (s * s) as f64
            } else {
                (scope * s) as f64
            }
        })
        .sum::<f64>()
        + (lost * scope) as f64;
    let distinct_in = options
        .distinct_rows_in
        .unwrap_or_else(|| EquivalenceClasses::of(table).len());
    let uncertainty_loss = (0..partition.n_groups())
        .map(|g| {
            group_sizes[g] as f64
                * table
                    .columns()
                    .iter()
                    .zip(partition.tuple(g))
                    .map(|(col, cell)| loss::cell_uncertainty_loss(col, cell))
                    .sum::<f64>()
        })
        .sum::<f64>()
        + lost as f64 * table.columns().iter().map(|c| c.weight()).sum::<f64>();
    let sensitive = sensitive_diversity(table, partition, &class_of_group, n_classes);
    let distinct_out = class_size.len();
    Report {
        rows_in: n,
        rows_out,
        suppressed_rows: suppressed,
        classes: class_size.len(),
        smallest_class: class_size.iter().copied().min().unwrap_or(0),
        largest_class: class_size.iter().copied().max().unwrap_or(0),
        aecs: if class_size.is_empty() {
            0.0
        } else {
            rows_out as f64 / class_size.len() as f64
        },
        classes_below_k: below.len(),
        rows_below_k: below.iter().sum(),
        ncp: sums.ncp / cells,
        utility: 1.0 - sums.ncp / cells,
        granularity: sums.granularity / cells,
        precision: 1.0 - sums.precision / cells,
        distortion: sums.whd,
        distortion_ratio: sums.whd / cells,
        distortion_height: sums.whd_height,
        distortion_ratio_height: sums.whd_height / cells,
        weighted_distortion: sums.weighted,
        discernibility: dm,
        modification_rate: sums.changed / cells,
        distinct_rows_in: distinct_in,
        distinct_rows_out: distinct_out,
        oi_ratio: if distinct_in == 0 {
            0.0
        } else {
            distinct_out as f64 / distinct_in as f64
        },
        attributes: table
            .columns()
            .iter()
            .zip(&per_attr)
            .map(|(c, s)| AttributeLoss {
                name: c.name().to_string(),
                ncp: s.ncp / scope.max(1) as f64,
                granularity: s.granularity / scope.max(1) as f64,
                distortion: s.whd / scope.max(1) as f64,
            })
            .collect(),
        uncertainty_loss,
        sensitive,
        utility_metrics: utility::measure_all(&utility::ReleaseView {
            table,
            partition,
            k,
        })
        .into_iter()
        .map(|(metric, loss)| UtilityLoss { metric, loss })
        .collect(),
    }
}

/// The achieved l-diversity of every sensitive column over the published
/// classes (groups with identical tuples form one class).
fn sensitive_diversity(
    table: &QiTable,
    partition: &Partition,
    class_of_group: &[u32],
    n_classes: usize,
) -> Vec<SensitiveDiversity> {
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); n_classes];
    for (r, &g) in partition.group_of_row().iter().enumerate() {
        if g != crate::partition::SUPPRESSED {
            members[class_of_group[g as usize] as usize].push(r as u32);
        }
    }
    members.retain(|m| !m.is_empty());
    diversity_of(table, members.iter().map(Vec::as_slice))
}

/// The l-diversity a release achieves in every sensitive column, from its
/// published labels alone ([`crate::verify::ReleaseVerifier::into_table`]):
/// each distinct published tuple is a class. What a front end that streams
/// a release it did not compute itself (a SQL query's result) certifies.
pub fn release_diversity(table: &QiTable) -> Vec<SensitiveDiversity> {
    let classes = EquivalenceClasses::of(table);
    diversity_of(table, (0..classes.len()).map(|c| classes.rows(c)))
}

/// The published class of every group of a partition, from the labels
/// each group shows (`labels[q][g]`, [`crate::recode::group_labels`]): two
/// groups whose labels agree (distinct cells that render alike, cells
/// widened over a person's rows, equal class means of a microaggregated
/// column) are one class, as `kanon verify` reads the release. Returns the
/// class of each group and the number of classes.
fn class_of_group(labels: &[Vec<String>], n_groups: usize) -> (Vec<usize>, usize) {
    let mut class_of_labels: FxHashMap<Vec<&str>, usize> = FxHashMap::default();
    let classes = (0..n_groups)
        .map(|g| {
            let tuple = labels.iter().map(|column| column[g].as_str()).collect();
            let next = class_of_labels.len();
            *class_of_labels.entry(tuple).or_insert(next)
        })
        .collect();
    (classes, class_of_labels.len())
}

/// The members of each published class ([`class_of_group`]): the rows of
/// `partition` (a partition of one row per person, for a release by
/// people, whose groups are those `labels` describe) in the class of their
/// group. None empty.
pub(crate) fn classes_by_labels(labels: &[Vec<String>], partition: &Partition) -> Vec<Vec<u32>> {
    let (class_of, n) = class_of_group(labels, partition.n_groups());
    let mut members = vec![Vec::new(); n];
    for (row, &g) in partition.group_of_row().iter().enumerate() {
        if g != crate::partition::SUPPRESSED {
            members[class_of[g as usize]].push(row as u32);
        }
    }
    members.retain(|m| !m.is_empty());
    members
}

/// The class figures of a [`Report`] (classes, their sizes, those below
/// `k`, their l-diversity in `table`'s sensitive columns) over classes
/// given by their rows of `table` ([`classes_by_labels`]).
pub(crate) fn set_class_figures(
    report: &mut Report,
    table: &QiTable,
    members: &[Vec<u32>],
    k: usize,
) {
    let sizes = members.iter().map(Vec::len);
    let published: usize = sizes.clone().sum();
    report.classes = members.len();
    report.smallest_class = sizes.clone().min().unwrap_or(0);
    report.largest_class = sizes.clone().max().unwrap_or(0);
    report.aecs = match members.len() {
        0 => 0.0,
        n => published as f64 / n as f64,
    };
    report.classes_below_k = sizes.filter(|&s| s < k).count();
    report.sensitive = diversity_of(table, members.iter().map(Vec::as_slice));
}

/// The worst class under each l-diversity variant, over the classes given
/// by their rows (none empty).
fn diversity_of<'r>(
    table: &QiTable,
    members: impl Iterator<Item = &'r [u32]> + Clone,
) -> Vec<SensitiveDiversity> {
    table
        .sensitive()
        .iter()
        .map(|col| {
            let mut out = SensitiveDiversity {
                name: col.name().to_string(),
                distinct_l: usize::MAX,
                min_entropy: f64::INFINITY,
                entropy_l: 0.0,
                max_share: 0.0,
            };
            let mut any = false;
            for rows in members.clone() {
                any = true;
                let counts = crate::privacy::frequencies(col, rows);
                let top = counts.iter().copied().max().unwrap_or(0);
                out.distinct_l = out.distinct_l.min(counts.len());
                out.min_entropy = out.min_entropy.min(crate::privacy::entropy(&counts));
                out.max_share = out.max_share.max(top as f64 / rows.len() as f64);
            }
            if !any {
                out.distinct_l = 0;
                out.min_entropy = 0.0;
            }
            out.entropy_l = out.min_entropy.exp();
            out
        })
        .collect()
}

#[derive(Debug, Clone, Copy, Default)]
struct CellCosts {
    ncp: f64,
    granularity: f64,
    precision: f64,
    whd: f64,
    whd_height: f64,
    weighted: f64,
}

impl CellCosts {
    fn of(col: &crate::encode::QiColumn, cell: &Cell, height: Weights) -> Self {
        CellCosts {
            ncp: loss::cell_ncp(col, cell),
            granularity: loss::cell_granularity(col, cell),
            precision: loss::cell_precision_loss(col, cell),
            whd: distortion::cell_whd(col, cell, Weights::Uniform),
            whd_height: distortion::cell_whd(col, cell, height),
            weighted: distortion::cell_weighted_distortion(col, cell),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    ncp: f64,
    granularity: f64,
    precision: f64,
    whd: f64,
    whd_height: f64,
    weighted: f64,
    changed: f64,
}

impl Sums {
    fn add(&mut self, c: &CellCosts, times: f64) {
        self.ncp += c.ncp * times;
        self.granularity += c.granularity * times;
        self.precision += c.precision * times;
        self.whd += c.whd * times;
        self.whd_height += c.whd_height * times;
        self.weighted += c.weighted * times;
    }
}
