//! The encoded working set of a job: [`QiTable`], one dense code per QI
//! cell ([`QiColumn`], with its labels, values, hierarchy and statistics)
//! and per sensitive value ([`SensitiveColumn`]). [`crate::encode`] builds
//! it from record batches; algorithms, verification and metrics read it.

use std::sync::Arc;

use crate::codes::{with_codes, Codes};
use crate::error::Result;
use crate::hierarchy::Hierarchy;
use crate::spec::Kind;

/// One encoded quasi-identifier.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QiColumn {
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) weight: f64,
    pub(crate) codes: Codes,
    pub(crate) hierarchy: Option<Arc<Hierarchy>>,
    /// Label of every code (the hierarchy's leaf labels, or the distinct values).
    pub(crate) labels: Arc<[String]>,
    /// Numeric value of every code (numeric QIs only), ascending with the code
    /// for flexible and interval columns.
    pub(crate) values: Option<Arc<[f64]>>,
    /// Rows per code.
    pub(crate) counts: Vec<u32>,
    /// `observed_before[c]`: number of distinct observed codes below `c`.
    pub(crate) observed_before: Vec<u32>,
    pub(crate) distinct: usize,
    pub(crate) min: f64,
    pub(crate) max: f64,
    /// The windows the job declares for this QI
    /// ([`crate::spec::AttributeSpec::windows`]).
    pub(crate) windows: Vec<usize>,
}

impl QiColumn {
    /// Column name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Numeric or categorical.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Weight of the attribute in weighted distances and losses.
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// The code of every row (rows excluded by a null policy hold code 0).
    pub fn codes(&self) -> &Codes {
        &self.codes
    }

    /// The hierarchy, when the column has one.
    pub fn hierarchy(&self) -> Option<&Arc<Hierarchy>> {
        self.hierarchy.as_ref()
    }

    /// Number of codes (hierarchy leaves, or distinct values).
    pub fn domain_size(&self) -> usize {
        self.labels.len()
    }

    /// The label of a code.
    pub fn label(&self, code: u32) -> &str {
        &self.labels[code as usize]
    }

    /// The numeric value of a code (numeric columns only).
    pub fn value(&self, code: u32) -> Option<f64> {
        self.values.as_ref().map(|v| v[code as usize])
    }

    /// Number of rows holding each code.
    pub fn counts(&self) -> &[u32] {
        &self.counts
    }

    /// Number of distinct values that occur in the data (`D` of NCP and
    /// granularity).
    pub fn distinct(&self) -> usize {
        self.distinct
    }

    /// Smallest and largest value of a numeric column (0, 0 otherwise).
    pub fn min_max(&self) -> (f64, f64) {
        (self.min, self.max)
    }

    /// Number of distinct observed values among codes `lo..hi`.
    pub fn observed_in(&self, lo: u32, hi: u32) -> usize {
        let end = |c: u32| {
            if (c as usize) < self.observed_before.len() {
                self.observed_before[c as usize]
            } else {
                self.distinct as u32
            }
        };
        (end(hi) - end(lo)) as usize
    }

    /// Whether code `c` occurs in the data.
    pub fn is_observed(&self, c: u32) -> bool {
        self.counts[c as usize] > 0
    }
}

/// A sensitive attribute, encoded as dense codes of its distinct values.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SensitiveColumn {
    pub(crate) name: String,
    pub(crate) codes: Codes,
    pub(crate) labels: Arc<[String]>,
    /// `missing[code]`: the code stands for a missing value (NULL, NaN,
    /// `""`) that does not count toward l; empty under
    /// `missing_sensitive = "value"`.
    pub(crate) missing: Arc<[bool]>,
    /// Rows per code over the active rows of the table the column was
    /// encoded from (missing codes included; readers skip them): the
    /// reference distribution of t-closeness. [`QiTable::restrict`] keeps it,
    /// so a block of a block-wise run compares with the whole table.
    pub(crate) reference: Arc<[u32]>,
    /// The non-missing codes in ascending numeric order, when the column's
    /// values are numbers (a numeric column, or a released column whose
    /// labels all read as numbers): the order of ordered-distance
    /// t-closeness.
    pub(crate) numeric_order: Option<Arc<[u32]>>,
    /// The attribute's hierarchy (`hierarchy = "file.csv"` on a sensitive
    /// attribute) and the leaf of every code, for hierarchical-distance
    /// t-closeness.
    pub(crate) hierarchy: Option<SensitiveHierarchy>,
    /// How many of the column's texts differ from another only by case or
    /// surrounding whitespace, and so count as that value (the encoder's
    /// folding): a front end warns about them.
    #[serde(default)]
    pub(crate) folded: usize,
    /// Every value of each row, when a row stands for a person with
    /// several values (the one-row-per-person table of
    /// [`crate::entity`]); `codes` then holds one of them. `None`: each
    /// row has the one value of `codes`. Always serialised: a block task
    /// travels to workers in postcard, which cannot skip a field.
    pub(crate) sets: Option<Arc<ValueSets>>,
}

/// The non-missing values (codes, ascending, distinct) of each row of a
/// sensitive column whose rows stand for people with several values.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ValueSets {
    /// `values[offsets[r]..offsets[r + 1]]` are row `r`'s values.
    offsets: Vec<u32>,
    values: Vec<u32>,
}

impl ValueSets {
    /// The sets of rows given one by one, in row order.
    pub(crate) fn from_sets<'a>(sets: impl IntoIterator<Item = &'a [u32]>) -> Self {
        let mut offsets = vec![0u32];
        let mut values = Vec::new();
        for set in sets {
            values.extend_from_slice(set);
            offsets.push(values.len() as u32);
        }
        ValueSets { offsets, values }
    }

    /// The values of row `row`.
    pub fn of(&self, row: u32) -> &[u32] {
        let r = row as usize;
        &self.values[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }

    /// The sets of `rows`, in the given order.
    pub(crate) fn gather(&self, rows: &[u32]) -> Self {
        Self::from_sets(rows.iter().map(|&r| self.of(r)))
    }
}

/// The hierarchy of a sensitive attribute and the leaf of each of its codes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SensitiveHierarchy {
    pub(crate) hierarchy: Arc<Hierarchy>,
    /// `leaf_of_code[code]`: the hierarchy leaf of the code's value;
    /// [`SensitiveHierarchy::NO_LEAF`] for missing values.
    pub(crate) leaf_of_code: Arc<[u32]>,
}

impl SensitiveHierarchy {
    /// The leaf of a code that has none (a missing value).
    pub const NO_LEAF: u32 = u32::MAX;

    /// The hierarchy.
    pub fn hierarchy(&self) -> &Arc<Hierarchy> {
        &self.hierarchy
    }

    /// The hierarchy leaf of a code ([`SensitiveHierarchy::NO_LEAF`] for a
    /// missing value).
    pub fn leaf(&self, code: u32) -> u32 {
        self.leaf_of_code
            .get(code as usize)
            .copied()
            .unwrap_or(Self::NO_LEAF)
    }
}

impl SensitiveColumn {
    /// How many of the column's texts differ from another only by case or
    /// surrounding whitespace: they count toward l as that one value
    /// (`Cancer`, `cancer`, `Cancer `), while the release publishes them
    /// as written. A front end warns so the data can be normalised.
    pub fn case_or_space_variants(&self) -> usize {
        self.folded
    }

    /// Builds a column from its parts, computing its reference counts over
    /// the rows not in `excluded` (ascending) and, when `numbers` holds the
    /// value of every code, its numeric order.
    pub(crate) fn new(
        name: String,
        codes: Codes,
        labels: Arc<[String]>,
        missing: Arc<[bool]>,
        numbers: Option<&[f64]>,
        excluded: &[u32],
    ) -> Self {
        let mut reference = vec![0u32; labels.len()];
        with_codes!(&codes, |c| {
            for &code in c {
                reference[u32::from(code) as usize] += 1;
            }
        });
        for &r in excluded {
            reference[codes.get(r as usize) as usize] -= 1;
        }
        let mut column = SensitiveColumn {
            name,
            codes,
            labels,
            missing,
            reference: reference.into(),
            numeric_order: None,
            hierarchy: None,
            folded: 0,
            sets: None,
        };
        if let Some(values) = numbers {
            column.numeric_order = column.order_by(|c| Some(values[c as usize]));
        }
        column
    }

    /// The non-missing codes ascending by `value`, or `None` when a
    /// non-missing code has no finite value.
    fn order_by(&self, value: impl Fn(u32) -> Option<f64>) -> Option<Arc<[u32]>> {
        let mut keyed = Vec::with_capacity(self.labels.len());
        for c in 0..self.labels.len() as u32 {
            if self.is_missing(c) {
                continue;
            }
            match value(c) {
                Some(v) if v.is_finite() => keyed.push((v, c)),
                _ => return None,
            }
        }
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        Some(keyed.into_iter().map(|(_, c)| c).collect())
    }

    /// Reads the column's labels as numbers (a released column, read as
    /// labels): sets the numeric order when every non-missing label is a
    /// number. Returns whether it did.
    pub(crate) fn order_labels_as_numbers(&mut self) -> bool {
        self.numeric_order = self.order_by(|c| self.labels[c as usize].trim().parse::<f64>().ok());
        self.numeric_order.is_some()
    }

    /// Attaches the attribute's hierarchy: every non-missing value must be a
    /// leaf of it.
    ///
    /// # Errors
    /// [`Error::Data`](crate::error::Error::Data) naming the column, the
    /// hierarchy file and the number of rows whose value is not a leaf
    /// (never the values).
    pub(crate) fn attach_hierarchy(&mut self, hierarchy: Arc<Hierarchy>) -> Result<()> {
        let mut rows_per_code = vec![0usize; self.labels.len()];
        with_codes!(&self.codes, |c| {
            for &code in c {
                rows_per_code[u32::from(code) as usize] += 1;
            }
        });
        let mut unknown = 0usize;
        let leaf_of_code: Arc<[u32]> = (0..self.labels.len() as u32)
            .map(|c| {
                if self.is_missing(c) {
                    return SensitiveHierarchy::NO_LEAF;
                }
                let label = &self.labels[c as usize];
                match hierarchy
                    .leaf(label)
                    .or_else(|| hierarchy.leaf(label.trim()))
                {
                    Some(leaf) => leaf.0,
                    None => {
                        unknown += rows_per_code[c as usize];
                        SensitiveHierarchy::NO_LEAF
                    }
                }
            })
            .collect();
        if unknown > 0 {
            return Err(crate::error::Error::data(
                &self.name,
                format!(
                    "{unknown} rows hold sensitive values that are not leaves of the hierarchy {}; add those values to the hierarchy file",
                    hierarchy.source()
                ),
            ));
        }
        self.hierarchy = Some(SensitiveHierarchy {
            hierarchy,
            leaf_of_code,
        });
        Ok(())
    }

    /// Column name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Code of every row.
    pub fn codes(&self) -> &Codes {
        &self.codes
    }
    /// Number of distinct values.
    pub fn distinct(&self) -> usize {
        self.labels.len()
    }
    /// Whether `code` is a missing value, left out of l-diversity
    /// (`privacy.missing_sensitive = "ignore"`).
    pub fn is_missing(&self, code: u32) -> bool {
        self.missing.get(code as usize).copied().unwrap_or(false)
    }
    /// Whether any code is a missing value.
    pub fn has_missing(&self) -> bool {
        self.missing.iter().any(|&m| m)
    }
    /// Rows per code over the active rows of the table the column was
    /// encoded from (for a block of a block-wise run: of the whole table),
    /// missing codes included: the reference distribution of t-closeness.
    pub fn reference_counts(&self) -> &[u32] {
        &self.reference
    }
    /// The non-missing codes in ascending numeric order, when the column's
    /// values are numbers.
    pub fn numeric_order(&self) -> Option<&[u32]> {
        self.numeric_order.as_deref()
    }
    /// The attribute's hierarchy, when the job gives one.
    pub fn hierarchy(&self) -> Option<&SensitiveHierarchy> {
        self.hierarchy.as_ref()
    }
    /// Every value of each row, when rows stand for people with several
    /// values ([`crate::entity`]).
    pub fn value_sets(&self) -> Option<&ValueSets> {
        self.sets.as_deref()
    }
}

/// The encoded working set of a job: QI codes and sensitive codes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QiTable {
    pub(crate) columns: Vec<QiColumn>,
    pub(crate) sensitive: Vec<SensitiveColumn>,
    pub(crate) n_rows: usize,
    /// Rows that must be suppressed whatever the algorithm does (null QIs
    /// under `nulls = "suppress"`), ascending; with a research subset
    /// ([`crate::privacy::DeltaPresence`]), also every row of
    /// [`QiTable::outside`].
    pub(crate) excluded: Vec<u32>,
    /// Rows of the population outside the research subset of a δ-presence
    /// job, ascending: never published, they only count in the population
    /// a class covers. Empty for every other job.
    #[serde(default)]
    pub(crate) outside: Vec<u32>,
    /// When each row stands for several input rows (a table of distinct
    /// tuples counted elsewhere: [`QiTable::with_weights`]), how many.
    #[serde(default)]
    pub(crate) weights: Option<Arc<Weights>>,
}

/// The input rows each row of a table of distinct tuples stands for
/// ([`QiTable::with_weights`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Weights {
    /// The input rows of every row.
    of_row: Vec<u32>,
    /// Input rows excluded by a null policy that have no row in the table.
    absent_excluded: usize,
    /// Input rows in all: the sum of `of_row` and `absent_excluded`.
    total: usize,
}

impl QiTable {
    /// The QI columns, in job order.
    pub fn columns(&self) -> &[QiColumn] {
        &self.columns
    }
    /// The sensitive columns, in job order.
    pub fn sensitive(&self) -> &[SensitiveColumn] {
        &self.sensitive
    }
    /// Number of input rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    /// Number of QIs.
    pub fn n_qi(&self) -> usize {
        self.columns.len()
    }
    /// Rows excluded by a null policy, or outside the research subset of a
    /// δ-presence job (never published).
    pub fn excluded(&self) -> &[u32] {
        &self.excluded
    }
    /// Rows of the population outside the research subset of a δ-presence
    /// job (a subset of [`QiTable::excluded`]).
    pub fn outside(&self) -> &[u32] {
        &self.outside
    }
    /// Rows a suppression limit is a share of: every row but those outside
    /// the research subset (which are not the data being published).
    pub fn rows_in_scope(&self) -> usize {
        match &self.weights {
            Some(w) => w.total,
            None => self.n_rows - self.outside.len(),
        }
    }

    /// This table as a table of distinct tuples counted elsewhere (issue
    /// 35: the census of a table too large for one machine): row `r`
    /// stands for `weights[r]` input rows, and `absent_excluded` more
    /// input rows were excluded by a null policy without a row here.
    ///
    /// Only the algorithms that never look at rows one by one take such a
    /// table (the full-domain lattice of Datafly and Incognito, through
    /// the engine's `counts` module): their equivalence classes count
    /// weights (`EquivalenceClasses::size`), and the suppression
    /// limit is a share of [`QiTable::rows_in_scope`], the input rows.
    ///
    /// # Errors
    /// [`Error::Internal`](crate::error::Error::Internal) for a weight per row
    /// missing, a zero weight, or a δ-presence table (its population is
    /// not counted that way).
    pub fn with_weights(mut self, weights: Vec<u32>, absent_excluded: usize) -> Result<QiTable> {
        if weights.len() != self.n_rows || weights.contains(&0) || !self.outside.is_empty() {
            return Err(crate::error::Error::Internal(format!(
                "weights of {} rows (none zero, no research subset) for a table of {} rows (a bug in kanon)",
                weights.len(),
                self.n_rows
            )));
        }
        let total = weights.iter().map(|&w| w as usize).sum::<usize>() + absent_excluded;
        self.weights = Some(Arc::new(Weights {
            of_row: weights,
            absent_excluded,
            total,
        }));
        Ok(self)
    }

    /// The input rows row `row` stands for: 1, unless the table is a table
    /// of counted tuples ([`QiTable::with_weights`]).
    pub fn weight(&self, row: u32) -> usize {
        self.weights
            .as_ref()
            .map_or(1, |w| w.of_row[row as usize] as usize)
    }

    /// Whether rows stand for several input rows ([`QiTable::with_weights`]).
    pub fn is_weighted(&self) -> bool {
        self.weights.is_some()
    }

    /// The input rows excluded by a null policy (and, under δ-presence,
    /// outside the research subset): [`QiTable::excluded`], counted by
    /// weight, and the excluded rows the table has no row for.
    pub fn excluded_rows(&self) -> usize {
        match &self.weights {
            Some(w) => {
                self.excluded
                    .iter()
                    .map(|&r| w.of_row[r as usize] as usize)
                    .sum::<usize>()
                    + w.absent_excluded
            }
            None => self.excluded.len(),
        }
    }

    /// The input rows the algorithms work on: every row but the excluded
    /// ones, counted by weight.
    pub fn active_weight(&self) -> usize {
        match &self.weights {
            Some(w) => w.total - self.excluded_rows(),
            None => self.n_rows - self.excluded.len(),
        }
    }
    /// Rows the algorithms work on (all rows but the excluded ones).
    pub fn active_rows(&self) -> Vec<u32> {
        let mut ex = self.excluded.iter().peekable();
        (0..self.n_rows as u32)
            .filter(|r| {
                if ex.peek() == Some(&r) {
                    ex.next();
                    false
                } else {
                    true
                }
            })
            .collect()
    }
    /// The codes of one row, one per QI.
    pub fn row(&self, row: u32) -> impl Iterator<Item = u32> + '_ {
        self.columns.iter().map(move |c| c.codes.get(row as usize))
    }

    /// Heap bytes of the table's per-row data: the QI and sensitive codes
    /// and the excluded rows, i.e. what grows with the number of rows
    /// (per-code data such as labels, counts and hierarchies is left out).
    /// The size of the working set that front ends report.
    pub fn heap_bytes(&self) -> usize {
        self.columns
            .iter()
            .map(|c| c.codes.heap_bytes())
            .chain(self.sensitive.iter().map(|s| s.codes.heap_bytes()))
            .sum::<usize>()
            + self.excluded.capacity() * std::mem::size_of::<u32>()
    }
}

impl QiTable {
    /// The sub-table of `rows` (of this table), renumbered `0..rows.len()`
    /// in the given order: what a block-wise run
    /// ([`crate::algorithms::partitioned`]) hands to the algorithm of one
    /// block.
    ///
    /// Each column keeps its codes' meaning (labels, values, hierarchy) and
    /// the statistics of the whole table (distinct values, range, counts), so
    /// the losses and distances an algorithm computes on the sub-table, and
    /// the cells it publishes, are those of the whole table. Excluded rows
    /// among `rows` stay excluded.
    ///
    /// # Panics
    /// When a row is out of range.
    pub fn restrict(&self, rows: &[u32]) -> QiTable {
        let columns = self
            .columns
            .iter()
            .map(|c| QiColumn {
                name: c.name.clone(),
                kind: c.kind,
                weight: c.weight,
                codes: c.codes.gather(rows),
                hierarchy: c.hierarchy.clone(),
                labels: c.labels.clone(),
                values: c.values.clone(),
                counts: c.counts.clone(),
                observed_before: c.observed_before.clone(),
                distinct: c.distinct,
                min: c.min,
                max: c.max,
                windows: c.windows.clone(),
            })
            .collect();
        let sensitive = self
            .sensitive
            .iter()
            .map(|s| SensitiveColumn {
                name: s.name.clone(),
                codes: s.codes.gather(rows),
                labels: s.labels.clone(),
                missing: s.missing.clone(),
                // The whole table's distribution, not the block's: every
                // block compares its classes with the same reference.
                reference: s.reference.clone(),
                numeric_order: s.numeric_order.clone(),
                hierarchy: s.hierarchy.clone(),
                folded: s.folded,
                sets: s.sets.as_ref().map(|v| Arc::new(v.gather(rows))),
            })
            .collect();
        // Positions in `rows` of the rows of a sorted list of this table's.
        let within = |list: &[u32]| -> Vec<u32> {
            if list.is_empty() {
                return Vec::new();
            }
            (0..rows.len() as u32)
                .filter(|&i| list.binary_search(&rows[i as usize]).is_ok())
                .collect()
        };
        let (excluded, outside) = (within(&self.excluded), within(&self.outside));
        let weights = self.weights.as_ref().map(|w| {
            let of_row: Vec<u32> = rows.iter().map(|&r| w.of_row[r as usize]).collect();
            Arc::new(Weights {
                total: of_row.iter().map(|&w| w as usize).sum(),
                of_row,
                absent_excluded: 0,
            })
        });
        QiTable {
            columns,
            sensitive,
            n_rows: rows.len(),
            excluded,
            outside,
            weights,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    fn spec(json: &str) -> JobSpec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn heap_bytes_count_the_narrow_codes() {
        let s = spec(
            r#"{"attributes": [{"name": "q", "role": "qi"}, {"name": "d", "role": "sensitive"}]}"#,
        );
        let q: Vec<String> = (0..1_000).map(|i| format!("{}", i % 300)).collect();
        let d: Vec<String> = (0..1_000).map(|i| format!("{}", i % 3)).collect();
        let t = QiTable::from_string_columns(
            &s,
            &Default::default(),
            &[
                ("q", q.iter().map(String::as_str).collect()),
                ("d", d.iter().map(String::as_str).collect()),
            ],
        )
        .unwrap();
        assert_eq!(t.columns()[0].codes().width(), 2);
        assert_eq!(t.sensitive()[0].codes().width(), 1);
        assert_eq!(t.heap_bytes(), 1_000 * 2 + 1_000);
        let sub = t.restrict(&[3, 1, 4]);
        assert_eq!(sub.heap_bytes(), 3 * 2 + 3);
        assert_eq!(
            sub.columns()[0].codes().get(0),
            t.columns()[0].codes().get(3)
        );
    }
}
