//! Cell-level local suppression of a full-domain release (sdcMicro's
//! `localSuppression`; Templ, Kowarik and Meindl, "Statistical Disclosure
//! Control for Micro-Data Using the R Package sdcMicro", JSS 67(4), 2015,
//! §3.3): the records of the classes the models reject keep their row and
//! lose only some cells (published `*`) instead of the whole row.
//!
//! Greedy, as sdcMicro's: the quasi-identifiers are ordered by how many
//! distinct values they have at the chosen node (the most identifying
//! first; ties by job order). Round `j` suppresses the first `j` of them in
//! every record still unplaced, groups those records by what they still
//! show, and keeps every group the models accept as a class of its own. A
//! `*` is a value of its own, never a wildcard: a record whose cell is
//! suppressed joins only records suppressed in the same cells, so the
//! release's classes, read from its labels, are exactly these groups (or
//! unions of them, when a `*` meets a hierarchy root's `*`).
//!
//! The records left after every cell is suppressed form one class; when
//! the models reject it, whole accepted classes (smallest first) are
//! suppressed into it until they accept it, so no record is ever dropped
//! for want of a class.

use std::collections::BTreeMap;

use crate::encode::QiTable;
use crate::generalise::{Cell, GeneralisedTuple};
use crate::privacy::{ClassView, Privacy};

/// The rows of one class the lattice node rejected, with its dense codes
/// (one per QI at the node's levels).
pub(crate) struct Rejected {
    pub(crate) key: Vec<u32>,
    pub(crate) rows: Vec<u32>,
}

/// What cell suppression published for the rejected rows.
pub(crate) struct Placed {
    /// New groups: each suppressed QI `None`, the others their dense code.
    pub(crate) groups: Vec<(Vec<Option<u32>>, Vec<u32>)>,
    /// Accepted groups (by index) whose every cell is suppressed into the
    /// last class of `groups`.
    pub(crate) absorbed: Vec<u32>,
}

/// Places the rows of the `rejected` classes: see the module docs.
/// `distinct[q]` is the number of distinct values of QI `q` at the node;
/// `accepted` lists the accepted groups' rows (for the last resort).
///
/// Returns `None` when not even the whole table as one class satisfies the
/// models (no release exists).
pub(crate) fn place(
    table: &QiTable,
    privacy: &Privacy,
    distinct: &[usize],
    rejected: Vec<Rejected>,
    accepted: &[Vec<u32>],
) -> Option<Placed> {
    let n_qi = distinct.len();
    let mut order: Vec<usize> = (0..n_qi).collect();
    order.sort_by_key(|&q| (std::cmp::Reverse(distinct[q]), q));
    let accepts = |rows: &[u32]| privacy.accepts(ClassView { table, rows });
    let mut open: Vec<Rejected> = rejected;
    let mut groups = Vec::new();
    for round in 1..=n_qi {
        if open.is_empty() {
            break;
        }
        let suppressed = &order[..round];
        let mut by_key: BTreeMap<Vec<Option<u32>>, Vec<u32>> = BTreeMap::new();
        for r in open.drain(..) {
            let key = (0..n_qi)
                .map(|q| (!suppressed.contains(&q)).then_some(r.key[q]))
                .collect();
            by_key.entry(key).or_default().extend(r.rows);
        }
        for (key, mut rows) in by_key {
            rows.sort_unstable();
            if round < n_qi && !accepts(&rows) {
                let kept: Vec<u32> = key.iter().map(|c| c.unwrap_or(u32::MAX)).collect();
                open.push(Rejected { key: kept, rows });
            } else {
                groups.push((key, rows));
            }
        }
    }
    // The last round's group, every cell suppressed, may still fail: fold
    // in whole accepted classes, smallest first, until it holds.
    let mut absorbed = Vec::new();
    if let Some((key, rows)) = groups
        .last_mut()
        .filter(|(k, _)| k.iter().all(Option::is_none))
    {
        debug_assert!(key.iter().all(Option::is_none));
        if !accepts(rows) {
            let mut by_size: Vec<u32> = (0..accepted.len() as u32).collect();
            by_size.sort_by_key(|&g| (accepted[g as usize].len(), g));
            for g in by_size {
                rows.extend_from_slice(&accepted[g as usize]);
                rows.sort_unstable();
                absorbed.push(g);
                if accepts(rows) {
                    break;
                }
            }
            if !accepts(rows) {
                return None;
            }
        }
    }
    Some(Placed { groups, absorbed })
}

/// The published tuple of a placed group: its dense codes as hierarchy
/// nodes through `node(q, code)`, each suppressed QI [`Cell::Suppressed`].
pub(crate) fn tuple(key: &[Option<u32>], node: impl Fn(usize, u32) -> Cell) -> GeneralisedTuple {
    key.iter()
        .enumerate()
        .map(|(q, c)| match c {
            Some(code) => node(q, *code),
            None => Cell::Suppressed,
        })
        .collect()
}
