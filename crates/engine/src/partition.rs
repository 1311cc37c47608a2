//! The result of every algorithm: which rows form which group, each group's
//! generalised tuple, and which rows are suppressed.
//!
//! Every algorithm returns a [`Partition`]; verification, recoding and the
//! metrics all read it, so no algorithm writes output or computes metrics of
//! its own.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::codes::with_codes;
use crate::encode::QiTable;
use crate::generalise::{Cell, GeneralisedTuple};
use crate::spec::Kind;

/// Marks a suppressed row in [`Partition::group_of_row`].
pub const SUPPRESSED: u32 = u32::MAX;

/// How local recoding publishes numeric QIs that have an interval hierarchy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NumericCells {
    /// The lowest common ancestor in the hierarchy, e.g. `[20-39]`.
    #[default]
    Hierarchy,
    /// The group's own `[min-max]` range, e.g. `[31-35]` (tighter).
    Ranges,
}

/// Groups of rows with their published tuples, plus suppressed rows. The
/// default is the partition of no rows.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Partition {
    n_qi: usize,
    group_of_row: Vec<u32>,
    cells: Vec<Cell>,
}

impl Partition {
    /// A partition from each row's group (or [`SUPPRESSED`]), publishing every
    /// group as the tightest generalisation of its rows (lowest common
    /// ancestors, ranges, value sets): what local recoding publishes.
    ///
    /// Rows the table excludes (null policy) are suppressed whatever
    /// `group_of_row` says.
    pub fn tightest(table: &QiTable, group_of_row: Vec<u32>) -> Self {
        Self::tightest_with(table, group_of_row, NumericCells::Hierarchy)
    }

    /// [`Partition::tightest`], choosing how numeric QIs with an interval
    /// hierarchy are published.
    pub fn tightest_with(
        table: &QiTable,
        mut group_of_row: Vec<u32>,
        numeric: NumericCells,
    ) -> Self {
        for &r in table.excluded() {
            group_of_row[r as usize] = SUPPRESSED;
        }
        let n_groups = group_of_row
            .iter()
            .filter(|&&g| g != SUPPRESSED)
            .map(|&g| g as usize + 1)
            .max()
            .unwrap_or(0);
        let n_qi = table.n_qi();
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); n_groups];
        for (r, &g) in group_of_row.iter().enumerate() {
            if g != SUPPRESSED {
                members[g as usize].push(r as u32);
            }
        }
        let cells: Vec<Cell> = members
            .par_iter()
            .flat_map_iter(|rows| {
                table.columns().iter().map(move |col| {
                    if rows.is_empty() {
                        return Cell::Suppressed;
                    }
                    with_codes!(col.codes(), |c| {
                        let codes = rows.iter().map(|&r| u32::from(c[r as usize]));
                        match (numeric, col.kind()) {
                            (NumericCells::Ranges, Kind::Numeric) => col.flexible_cell_of(codes),
                            _ => col.cell_of(codes),
                        }
                    })
                })
            })
            .collect();
        Partition {
            n_qi,
            group_of_row,
            cells,
        }
    }

    /// A partition from groups given as row lists; rows in no list are
    /// suppressed. Groups are published as in [`Partition::tightest`].
    pub fn from_groups(table: &QiTable, groups: &[Vec<u32>]) -> Self {
        let mut group_of_row = vec![SUPPRESSED; table.n_rows()];
        for (g, rows) in groups.iter().enumerate() {
            for &r in rows {
                group_of_row[r as usize] = g as u32;
            }
        }
        Self::tightest(table, group_of_row)
    }

    /// A partition with explicit published tuples (global recoding publishes
    /// a fixed level, not the tightest cell). `tuples[g]` is group `g`'s tuple.
    ///
    /// # Panics
    /// When a tuple does not have one cell per QI.
    pub fn with_tuples(
        table: &QiTable,
        mut group_of_row: Vec<u32>,
        tuples: Vec<GeneralisedTuple>,
    ) -> Self {
        for &r in table.excluded() {
            group_of_row[r as usize] = SUPPRESSED;
        }
        let n_qi = table.n_qi();
        let mut cells = Vec::with_capacity(tuples.len() * n_qi);
        for t in tuples {
            assert_eq!(t.len(), n_qi, "one cell per quasi-identifier");
            cells.extend(t);
        }
        Partition {
            n_qi,
            group_of_row,
            cells,
        }
    }

    /// Each row's group, or [`SUPPRESSED`].
    pub fn group_of_row(&self) -> &[u32] {
        &self.group_of_row
    }

    /// Number of groups.
    pub fn n_groups(&self) -> usize {
        self.cells.len().checked_div(self.n_qi).unwrap_or(0)
    }

    /// The published tuple of a group.
    pub fn tuple(&self, group: usize) -> &[Cell] {
        &self.cells[group * self.n_qi..(group + 1) * self.n_qi]
    }

    /// The published cell of a row for QI `qi` (`Suppressed` for suppressed rows).
    pub fn cell(&self, row: usize, qi: usize) -> &Cell {
        match self.group_of_row[row] {
            SUPPRESSED => &Cell::Suppressed,
            g => &self.cells[g as usize * self.n_qi + qi],
        }
    }

    /// Number of rows in each group.
    pub fn group_sizes(&self) -> Vec<usize> {
        let mut sizes = vec![0usize; self.n_groups()];
        for &g in &self.group_of_row {
            if g != SUPPRESSED {
                sizes[g as usize] += 1;
            }
        }
        sizes
    }

    /// Number of suppressed rows.
    pub fn suppressed(&self) -> usize {
        self.group_of_row
            .iter()
            .filter(|&&g| g == SUPPRESSED)
            .count()
    }

    /// Published classes: groups whose tuples are identical form one class
    /// of the release. Returns each group's class and the number of classes.
    pub fn published_classes(&self) -> (Vec<u32>, usize) {
        let mut class_of_tuple: FxHashMap<&[Cell], u32> = FxHashMap::default();
        let class_of_group = (0..self.n_groups())
            .map(|g| {
                let next = class_of_tuple.len() as u32;
                *class_of_tuple.entry(self.tuple(g)).or_insert(next)
            })
            .collect();
        (class_of_group, class_of_tuple.len())
    }

    /// Number of rows, suppressed or not.
    pub fn n_rows(&self) -> usize {
        self.group_of_row.len()
    }

    /// The same groups and tuples over the rows of `table`, each row in the
    /// group `group_of_row` gives (rows the table excludes suppressed):
    /// how a partition of people becomes one of their rows
    /// ([`crate::entity`]). In the QI columns `widen`, a group with a row
    /// its cell does not cover (a person whose value differs between rows)
    /// publishes the tightest cell of all its rows instead, so every cell
    /// stays true.
    pub(crate) fn over_rows(
        &self,
        table: &QiTable,
        mut group_of_row: Vec<u32>,
        widen: &[usize],
    ) -> Partition {
        for &r in table.excluded() {
            group_of_row[r as usize] = SUPPRESSED;
        }
        let mut cells = self.cells.clone();
        if !widen.is_empty() {
            let mut members: Vec<Vec<u32>> = vec![Vec::new(); self.n_groups()];
            for (r, &g) in group_of_row.iter().enumerate() {
                if g != SUPPRESSED {
                    members[g as usize].push(r as u32);
                }
            }
            for &q in widen {
                let col = &table.columns()[q];
                for (g, rows) in members.iter().enumerate() {
                    let cell = &mut cells[g * self.n_qi + q];
                    let codes = || rows.iter().map(|&r| col.codes().get(r as usize));
                    if codes().any(|c| !col.covers(cell, c)) {
                        *cell = col.cell_of(codes());
                    }
                }
            }
        }
        Partition {
            n_qi: self.n_qi,
            group_of_row,
            cells,
        }
    }
}
