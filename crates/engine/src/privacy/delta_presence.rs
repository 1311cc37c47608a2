//! δ-presence ([`DeltaPresence`]): bounds what a release tells about
//! whether a person of a population is in the data at all.
//!
//! Nergiz, Atzori and Clifton ("Hiding the Presence of Individuals from
//! Shared Databases", SIGMOD 2007, Definition 3): the input is a population
//! `P` and a research subset `T ⊆ P`, only `T` is published, and for every
//! record `t` of `P` the release `T*` must keep
//! `δ_min <= P(t ∈ T | T*) <= δ_max`. With a global recoding, a person of
//! the population is matched by the one published class whose cells cover
//! their values, and that probability is the class's share of research
//! records among the population records it covers: `δ = |T ∩ C| / |P ∩ C|`
//! (ARX 3.9.2: `criteria/DPresence.java`, on a `DataSubset`).
//!
//! The model is not a per-class model ([`super::PrivacyModel`]): a class's
//! rows are research records, and its population count depends on the
//! cells published for it, which only the partition holds. So it lives
//! apart, like the requirements ([`super::Privacy::presence`]):
//!
//! - the lattice (Datafly, Incognito) counts the population records of each
//!   generalised tuple beside its research records;
//! - [`DeltaPresence::check_partition`] recounts them from the published
//!   cells alone, for the verifier; a population record covered by two
//!   published classes (overlapping cells) is refused, fail closed, since
//!   its probability is then no one class's share;
//! - `kanon verify` recounts them from the published labels and the
//!   population it re-reads.
//!
//! Research records whose class is suppressed are not published, but they
//! still belong to the population: they count in `|P ∩ C|` of any class
//! covering them, as ARX counts them.
//!
//! # Where kanon publishes less than ARX
//!
//! The population records no published class covers (those of suppressed
//! classes and of classes without research records) are one more group to
//! an attacker who knows the population, the labels and how many research
//! records were suppressed (the certificate says it): their share of
//! suppressed research records must be within `[d_min, d_max]` too
//! ([`DeltaPresence::accepts_unmatched`]). ARX checks published classes
//! only, so with `d_min > 0` and nothing suppressed it publishes releases
//! that show some people of the population are certainly not in the data.

use rustc_hash::FxHashMap;

use crate::encode::QiTable;
use crate::error::{Error, Result};
use crate::generalise::Cell;
use crate::hierarchy::NodeId;
use crate::partition::{Partition, SUPPRESSED};

/// Tolerance of the share comparisons (the bounds are written in decimal).
const EPS: f64 = 1e-12;

/// δ-presence of a research subset within the population of the input.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaPresence {
    /// The boolean input column saying which population records are in the
    /// research subset (the rows published).
    pub subset: String,
    /// The least share of research records among the population records a
    /// published class covers.
    pub d_min: f64,
    /// The largest such share.
    pub d_max: f64,
}

/// What a release achieves under δ-presence, recounted.
#[derive(Debug, Clone, PartialEq)]
pub struct PresenceCount {
    /// Published classes.
    pub classes: usize,
    /// Classes whose share is outside `[d_min, d_max]`.
    pub violating: usize,
    /// The least and largest share of a published class.
    pub range: Option<(f64, f64)>,
    /// Population records (with a value in every QI) covered by a published
    /// class.
    pub covered: usize,
    /// Population records covered by more than one published class.
    pub ambiguous: usize,
    /// Population records (with a value in every QI) that no published
    /// class covers: those of suppressed classes and those of no class.
    pub unmatched: usize,
    /// Research records (with a value in every QI) not published.
    pub suppressed: usize,
}

impl DeltaPresence {
    /// Whether a class of `research` records among `population` records of
    /// the population (the research ones included) may be published. A
    /// class without research records is not published and always passes.
    pub fn accepts(&self, research: usize, population: usize) -> bool {
        if research == 0 {
            return true;
        }
        let share = research as f64 / population.max(research) as f64;
        share + EPS >= self.d_min && share <= self.d_max + EPS
    }

    /// Whether the population records no published class covers may hold
    /// `suppressed` research records among `unmatched`: to whoever counts
    /// them (the certificate says how many were suppressed, the population
    /// and the labels say who is covered) they are one more class, whose
    /// share must be within the bounds too. With no suppressed record and
    /// `d_min > 0` they are not: the release would show those people are
    /// not in the data.
    pub fn accepts_unmatched(&self, suppressed: usize, unmatched: usize) -> bool {
        if unmatched == 0 {
            return true;
        }
        let share = suppressed as f64 / unmatched.max(suppressed) as f64;
        share + EPS >= self.d_min && share <= self.d_max + EPS
    }

    /// A readable name with parameters.
    pub fn describe(&self) -> String {
        format!(
            "delta-presence (delta in [{}, {}], research subset `{}`)",
            self.d_min, self.d_max, self.subset
        )
    }

    /// What a count achieves, in one line of figures (never a value).
    pub fn achieved(count: &PresenceCount) -> String {
        match count.range {
            Some((lo, hi)) => format!(
                "delta from {lo:.4} to {hi:.4} over {} classes covering {} population records; the {} they leave uncovered hold {} suppressed research records",
                count.classes, count.covered, count.unmatched, count.suppressed
            ),
            None => "nothing published".to_string(),
        }
    }

    /// Recounts the release of `partition` over `table` (whose rows are the
    /// population; [`QiTable::outside`] are those outside the research
    /// subset): [`DeltaPresence::count_classes`] of its published classes.
    pub fn count(&self, table: &QiTable, partition: &Partition) -> PresenceCount {
        let (class_of_group, n_classes) = partition.published_classes();
        let mut research = vec![0usize; n_classes];
        let mut tuple_of_class: Vec<Option<&[Cell]>> = vec![None; n_classes];
        for (g, &c) in class_of_group.iter().enumerate() {
            tuple_of_class[c as usize].get_or_insert(partition.tuple(g));
        }
        for &g in partition.group_of_row() {
            if g != SUPPRESSED {
                research[class_of_group[g as usize] as usize] += 1;
            }
        }
        let classes: Vec<(&[Cell], usize)> = tuple_of_class
            .into_iter()
            .zip(research)
            .filter_map(|(tuple, r)| Some((tuple?, r)))
            .collect();
        self.count_classes(table, &classes)
    }

    /// Counts, for each published class (its cells, one per QI of `table`,
    /// and its research records), the population records of `table` whose
    /// values its cells cover: every row with a value in every QI (rows
    /// excluded for a null QI are not matched), the research ones
    /// included. A record covered by several classes is counted as
    /// ambiguous, in none.
    pub fn count_classes(&self, table: &QiTable, classes: &[(&[Cell], usize)]) -> PresenceCount {
        let published: Vec<&(&[Cell], usize)> = classes.iter().filter(|(_, r)| *r > 0).collect();
        // Per QI, the published cells covering each code: one, none, or
        // several (overlapping cells).
        const NONE: u32 = u32::MAX;
        const MANY: u32 = u32::MAX - 1;
        let n_qi = table.n_qi();
        let mut cell_ids: Vec<Vec<&Cell>> = vec![Vec::new(); n_qi];
        let class_cells: Vec<Vec<u32>> = published
            .iter()
            .map(|(tuple, _)| {
                tuple
                    .iter()
                    .enumerate()
                    .map(
                        |(q, cell)| match cell_ids[q].iter().position(|x| *x == cell) {
                            Some(i) => i as u32,
                            None => {
                                cell_ids[q].push(cell);
                                (cell_ids[q].len() - 1) as u32
                            }
                        },
                    )
                    .collect()
            })
            .collect();
        let cover: Vec<Vec<u32>> = table
            .columns()
            .iter()
            .zip(&cell_ids)
            .map(|(column, cells)| {
                (0..column.domain_size() as u32)
                    .map(|code| {
                        let mut found = NONE;
                        for (i, cell) in cells.iter().enumerate() {
                            if column.covers(cell, code) {
                                found = if found == NONE { i as u32 } else { MANY };
                            }
                        }
                        found
                    })
                    .collect()
            })
            .collect();
        let index: FxHashMap<&[u32], usize> = class_cells
            .iter()
            .enumerate()
            .map(|(i, cells)| (cells.as_slice(), i))
            .collect();
        let mut population = vec![0usize; published.len()];
        let (mut covered, mut ambiguous) = (0, 0);
        let outside = table.outside();
        let nulls: Vec<u32> = table
            .excluded()
            .iter()
            .copied()
            .filter(|r| outside.binary_search(r).is_err())
            .collect();
        let mut key = vec![0u32; n_qi];
        let mut next_null = nulls.iter().peekable();
        'rows: for row in 0..table.n_rows() as u32 {
            if next_null.peek() == Some(&&row) {
                next_null.next();
                continue;
            }
            for (q, column) in table.columns().iter().enumerate() {
                match cover[q][column.codes().get(row as usize) as usize] {
                    NONE => continue 'rows,
                    MANY => {
                        ambiguous += 1;
                        continue 'rows;
                    }
                    i => key[q] = i,
                }
            }
            if let Some(&i) = index.get(key.as_slice()) {
                population[i] += 1;
                covered += 1;
            }
        }
        let nonnull = table.n_rows() - nulls.len();
        let study = table.n_rows() - table.excluded().len();
        let published_research: usize = published.iter().map(|(_, r)| *r).sum();
        let unmatched = nonnull.saturating_sub(covered + ambiguous);
        let suppressed = study.saturating_sub(published_research);
        let mut violating = 0;
        let mut range: Option<(f64, f64)> = None;
        for ((_, r), &p) in published.iter().zip(&population) {
            let share = *r as f64 / p.max(*r) as f64;
            if p < *r || !self.accepts(*r, p) {
                violating += 1;
            }
            range = Some(range.map_or((share, share), |(lo, hi)| (lo.min(share), hi.max(share))));
        }
        PresenceCount {
            classes: published.len(),
            violating,
            range,
            covered,
            ambiguous,
            unmatched,
            suppressed,
        }
    }

    /// Recounts a release read back by its labels (`release`, the classes of
    /// equal published labels; [`crate::verify::ReleaseVerifier`]) over the
    /// population it was drawn from (`population`, the job's input encoded
    /// with its hierarchies): each published label of a QI is the node of
    /// that QI's hierarchy with that label, and [`DeltaPresence::count_classes`]
    /// matches the population to them. What `kanon verify` checks.
    ///
    /// # Errors
    /// [`Error::VerificationFailed`] when the release and the population do
    /// not have the same QIs, when a QI of the population has no hierarchy,
    /// or when a published label is no node of its hierarchy or names
    /// nodes that cover different values (the release cannot be matched to
    /// the population; never a value in the message).
    pub fn count_release(&self, population: &QiTable, release: &QiTable) -> Result<PresenceCount> {
        let fail = |m: String| Err(Error::VerificationFailed(m));
        if population.n_qi() != release.n_qi() {
            return fail(format!(
                "the release has {} quasi-identifiers and the population {}",
                release.n_qi(),
                population.n_qi()
            ));
        }
        // Per QI, the cell of each published label's code.
        let mut cells: Vec<Vec<Cell>> = Vec::with_capacity(release.n_qi());
        for (pop, rel) in population.columns().iter().zip(release.columns()) {
            let Some(h) = pop.hierarchy() else {
                return fail(format!(
                    "`{}` has no hierarchy over the population, so its published labels cannot be matched to the population's values",
                    pop.name()
                ));
            };
            let mut by_label: FxHashMap<&str, Vec<NodeId>> = FxHashMap::default();
            for n in 0..h.node_count() as u32 {
                by_label
                    .entry(h.label(NodeId(n)))
                    .or_default()
                    .push(NodeId(n));
            }
            let mut column = Vec::with_capacity(rel.domain_size());
            for code in 0..rel.domain_size() as u32 {
                let nodes = by_label.get(rel.label(code)).map_or(&[][..], |v| &v[..]);
                let Some(&first) = nodes.first() else {
                    return fail(format!(
                        "a published label of `{}` is no value or group of its hierarchy over the population: the release was not drawn from this population",
                        rel.name()
                    ));
                };
                if nodes.iter().any(|&n| h.leaves(n) != h.leaves(first)) {
                    return fail(format!(
                        "a published label of `{}` names groups of its hierarchy that cover different values, so the population cannot be matched to it",
                        rel.name()
                    ));
                }
                column.push(Cell::Node(first));
            }
            cells.push(column);
        }
        let mut research: FxHashMap<Vec<u32>, usize> = FxHashMap::default();
        for row in 0..release.n_rows() as u32 {
            *research.entry(release.row(row).collect()).or_default() += 1;
        }
        let tuples: Vec<(Vec<Cell>, usize)> = research
            .into_iter()
            .map(|(codes, r)| {
                let tuple = codes
                    .iter()
                    .enumerate()
                    .map(|(q, &c)| cells[q][c as usize].clone())
                    .collect();
                (tuple, r)
            })
            .collect();
        let classes: Vec<(&[Cell], usize)> =
            tuples.iter().map(|(t, r)| (t.as_slice(), *r)).collect();
        Ok(self.count_classes(population, &classes))
    }

    /// Checks a release: what violates the model, by counts only, or `None`
    /// when every published class keeps its share within the bounds.
    pub fn check(&self, count: &PresenceCount) -> Option<String> {
        let mut problems = Vec::new();
        if count.ambiguous > 0 {
            problems.push(format!(
                "{} population records are covered by more than one published class, so their presence has no one class's share; {} needs one cell per value and QI (global recoding: `datafly` or `incognito`)",
                count.ambiguous,
                self.describe()
            ));
        }
        if !self.accepts_unmatched(count.suppressed, count.unmatched) {
            problems.push(format!(
                "the {} population records no published class covers hold {} of the research records (suppressed), a share outside [{}, {}]: whoever counts them learns more of those people's presence than {} allows",
                count.unmatched,
                count.suppressed,
                self.d_min,
                self.d_max,
                self.describe()
            ));
        }
        if count.violating > 0 {
            problems.push(format!(
                "{} of {} published classes violate {} ({})",
                count.violating,
                count.classes,
                self.describe(),
                Self::achieved(count)
            ));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    /// [`DeltaPresence::count`] and [`DeltaPresence::check`] on a partition.
    pub fn check_partition(
        &self,
        table: &QiTable,
        partition: &Partition,
    ) -> (PresenceCount, Option<String>) {
        let count = self.count(table, partition);
        let problem = self.check(&count);
        (count, problem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_within_the_bounds_is_accepted() {
        let m = DeltaPresence {
            subset: "s".into(),
            d_min: 0.2,
            d_max: 0.5,
        };
        assert!(m.accepts(0, 0));
        assert!(m.accepts(0, 7));
        assert!(m.accepts(1, 2));
        assert!(m.accepts(1, 5));
        assert!(!m.accepts(1, 6));
        assert!(!m.accepts(3, 5));
        // Never fewer population records than research ones.
        assert!(!m.accepts(3, 1));
    }

    #[test]
    fn the_uncovered_population_is_a_group_of_its_own() {
        let m = DeltaPresence {
            subset: "s".into(),
            d_min: 0.2,
            d_max: 0.5,
        };
        // Everyone covered: nothing to bound.
        assert!(m.accepts_unmatched(0, 0));
        // Uncovered people and nothing suppressed: they are certainly
        // not in the data, below d_min.
        assert!(!m.accepts_unmatched(0, 10));
        assert!(m.accepts_unmatched(3, 10));
        assert!(!m.accepts_unmatched(6, 10));
        let loose = DeltaPresence { d_min: 0.0, ..m };
        assert!(loose.accepts_unmatched(0, 10));
    }
}
