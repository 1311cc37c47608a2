//! A table's history as one release (issue 31, item 2): what a reader who
//! holds every readable version of a table learns, checked before a new
//! version is committed.
//!
//! A reader keeps every version they can read (time travel, old
//! partitions) and compares them. Two attacks follow, and the check
//! refuses both:
//!
//! - **Linking.** A person published in two versions under two label
//!   tuples is narrowed, by anyone who links their rows across versions
//!   (pass-through columns, sensitive values, joinable pseudonyms), to the
//!   people who share *both* tuples. The check demands **label
//!   invariance**: a person carries the same quasi-identifier labels in
//!   every readable version they appear in. This is the "same signature in
//!   every release" idea of m-invariance (Xiao and Tao, "m-Invariance:
//!   Towards Privacy Preserving Re-publication of Dynamic Datasets",
//!   SIGMOD 2007), made stricter: the whole label tuple, not only the
//!   class's sensitive signature, stays the same.
//! - **Differencing.** Whoever diffs two versions class by class sees who
//!   was added, removed or changed (a class that grew by one row gives
//!   that row away). Within one label tuple, the people are split by
//!   their *pattern* over the versions (absent, present, present with other
//!   rows than before): every such group (an atom of the versions' Venn
//!   diagram, which covers every difference of any set of versions) must
//!   hold at least k people and at least l distinct sensitive values
//!   counted per person ([`crate::entity`]). One version alone is its own
//!   classes, so the check of a first release is the release's k and l.
//!
//! A person is recognised across versions by a keyed fingerprint of their
//! identifier (the job's `privacy.entity`;
//! [`crate::recode::Fingerprinter`]), which no release publishes: the
//! front end keeps the [`Published`] records of every release in a
//! location the job names, out of the table. Rows have no identity of
//! their own across versions, so a series is checked only with an entity
//! column. This module does no I/O: it records a release
//! ([`Ledger`]) and checks versions ([`check`]).

use std::hash::Hasher;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::recode::Fingerprinter;
use crate::spec::{JobSpec, Role};

/// One person of one release, as a table's history keeps them: no value,
/// only keyed fingerprints and hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The keyed fingerprint of the person's identifier.
    pub person: u128,
    /// A hash of the person's published quasi-identifier labels.
    pub labels: u64,
    /// A hash of the multiset of the person's published rows (every
    /// column but the pseudonymised ones, whose pseudonyms are new in
    /// each release).
    pub rows: u64,
    /// Hashes of the person's sensitive values (column and normalised
    /// value; missing values left out), sorted.
    pub values: Vec<u64>,
}

/// Records the people of a release as its rows are recoded.
#[derive(Debug)]
pub struct Ledger {
    fingerprinter: Fingerprinter,
    qi: Vec<String>,
    sensitive: Vec<String>,
    pseudonymised: Vec<String>,
    people: FxHashMap<u128, Published>,
    /// People whose rows carried two label tuples.
    split: usize,
}

impl Ledger {
    /// A ledger of the people of `spec`'s entity column, recognised by
    /// `fingerprinter`.
    ///
    /// # Errors
    /// [`Error::Spec`] when the job names no entity column, or another one.
    pub fn new(spec: &JobSpec, fingerprinter: Fingerprinter) -> Result<Self> {
        match spec.entity_column() {
            Some(c) if c == fingerprinter.column() => {}
            _ => {
                return Err(Error::spec(
                    "output.history",
                    "a table's history recognises people by `privacy.entity`: set it to the column that identifies a person (rows have no identity of their own across releases)",
                ))
            }
        }
        Ok(Ledger {
            fingerprinter,
            qi: spec.quasi_identifiers().map(|a| a.name.clone()).collect(),
            sensitive: spec.diversity_columns(),
            pseudonymised: spec
                .attributes
                .iter()
                .filter(|a| a.role == Role::Pseudonymised)
                .map(|a| a.name.clone())
                .collect(),
            people: FxHashMap::default(),
            split: 0,
        })
    }

    /// The fingerprint of each row of `input` (nulls refused: a row
    /// without a person cannot be recognised).
    ///
    /// # Errors
    /// [`Error::Data`] when the entity column is missing or null.
    pub fn people_of(&self, input: &RecordBatch) -> Result<Vec<u128>> {
        fingerprints(&self.fingerprinter, input)
    }

    /// Adds the released rows `released` of the input rows `input` whose
    /// `kept` flag is set (in order: the released rows are the kept input
    /// rows).
    ///
    /// # Errors
    /// [`Error::Data`] for a missing column; [`Error::Internal`] when the
    /// rows do not match.
    pub fn observe(
        &mut self,
        input: &RecordBatch,
        kept: &[bool],
        released: &RecordBatch,
    ) -> Result<()> {
        let people = self.people_of(input)?;
        let people: Vec<u128> = people
            .into_iter()
            .zip(kept)
            .filter(|(_, &k)| k)
            .map(|(p, _)| p)
            .collect();
        if people.len() != released.num_rows() {
            return Err(Error::Internal(format!(
                "{} rows released of {} kept (a bug in kanon; nothing was released)",
                released.num_rows(),
                people.len()
            )));
        }
        let labels = row_hashes(released, |name| self.qi.iter().any(|q| q == name))?;
        let rows = row_hashes(released, |name| {
            !self.pseudonymised.iter().any(|p| p == name)
        })?;
        let mut values: Vec<Vec<u64>> = vec![Vec::new(); people.len()];
        for (c, name) in self.sensitive.iter().enumerate() {
            let column = column(released, name)?;
            let text = arrow::compute::cast(column.as_ref(), &DataType::Utf8)?;
            for (r, v) in text.as_string::<i32>().iter().enumerate() {
                let Some(v) = v.map(|v| v.trim().to_lowercase()) else {
                    continue;
                };
                if v.is_empty() {
                    continue;
                }
                let mut h = FxHasher::default();
                h.write_usize(c);
                h.write(v.as_bytes());
                values[r].push(h.finish());
            }
        }
        for (r, (person, values)) in people.into_iter().zip(values).enumerate() {
            let p = self.people.entry(person).or_insert_with(|| Published {
                person,
                labels: labels[r],
                rows: 0,
                values: Vec::new(),
            });
            if p.labels != labels[r] {
                self.split += 1;
            }
            p.rows = p.rows.wrapping_add(mix(rows[r]));
            p.values.extend(values);
        }
        Ok(())
    }

    /// The people of the release, in fingerprint order.
    ///
    /// # Errors
    /// [`Error::VerificationFailed`] when a person's rows carried two
    /// label tuples.
    pub fn finish(self) -> Result<Vec<Published>> {
        if self.split > 0 {
            return Err(Error::VerificationFailed(format!(
                "{} row(s) carry other labels than the first row of their person (a bug in kanon; nothing was released)",
                self.split
            )));
        }
        let mut out: Vec<Published> = self
            .people
            .into_values()
            .map(|mut p| {
                p.values.sort_unstable();
                p.values.dedup();
                p
            })
            .collect();
        out.sort_unstable_by_key(|p| p.person);
        Ok(out)
    }
}

/// The fingerprint of every row's person in `batch`.
///
/// # Errors
/// [`Error::Data`] when the entity column is missing or holds a null.
pub fn fingerprints(fingerprinter: &Fingerprinter, batch: &RecordBatch) -> Result<Vec<u128>> {
    let name = fingerprinter.column();
    let values = fingerprinter.of(column(batch, name)?.as_ref())?;
    let nulls = values.iter().filter(|v| v.is_none()).count();
    if nulls > 0 {
        return Err(Error::data(
            name,
            format!("holds {nulls} null(s): a row without a person cannot be recognised across releases"),
        ));
    }
    Ok(values.into_iter().flatten().collect())
}

fn column(batch: &RecordBatch, name: &str) -> Result<arrow::array::ArrayRef> {
    batch
        .column_by_name(name)
        .cloned()
        .ok_or_else(|| Error::data(name, "is not in the release"))
}

/// A hash of each row over the columns `take` accepts (by name), from
/// their text form: the same values hash the same whatever the column's
/// Arrow type (a plain or dictionary string).
fn row_hashes(batch: &RecordBatch, take: impl Fn(&str) -> bool) -> Result<Vec<u64>> {
    let mut hashers: Vec<FxHasher> = vec![FxHasher::default(); batch.num_rows()];
    for (i, field) in batch.schema().fields().iter().enumerate() {
        if !take(field.name()) {
            continue;
        }
        let text = arrow::compute::cast(batch.column(i).as_ref(), &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        for (r, h) in hashers.iter_mut().enumerate() {
            h.write(field.name().as_bytes());
            match text.is_null(r) {
                true => h.write_u8(0),
                false => {
                    h.write_u8(1);
                    h.write_usize(text.value(r).len());
                    h.write(text.value(r).as_bytes());
                }
            }
        }
    }
    Ok(hashers.into_iter().map(|h| h.finish()).collect())
}

/// splitmix64: row hashes summed into a multiset hash must not cancel.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What a reader can read at one point: one version of a table, as the
/// people of the releases its files hold.
#[derive(Debug, Clone)]
pub struct View<'a> {
    /// The version (a Delta table's version number).
    pub version: i64,
    /// The people of every release whose files the version holds.
    pub releases: Vec<&'a [Published]>,
}

/// Why a series of versions would tell a reader more than the job allows.
/// Messages name versions and counts, never a value. (Each variant's doc
/// names its fields.)
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breach {
    /// People published under two label tuples in one version.
    TwoLabelsInOneVersion { version: i64, people: usize },
    /// People published under other labels in `then` than in `first`.
    Relabelled {
        first: i64,
        then: i64,
        people: usize,
    },
    /// Groups of people of one class whose pattern over the versions
    /// (present, absent, changed) is shared by fewer than `k` people: the
    /// smallest holds `smallest`, present in `present`, changed in
    /// `changed`.
    Small {
        groups: usize,
        smallest: usize,
        k: usize,
        present: Vec<i64>,
        changed: Vec<i64>,
    },
    /// Groups of at least k people with fewer than `l` distinct sensitive
    /// values (counting each person once).
    Undiverse {
        groups: usize,
        lowest: usize,
        l: usize,
        present: Vec<i64>,
    },
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[i64]| {
            v.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Breach::TwoLabelsInOneVersion { version, people } => write!(
                f,
                "version {version} publishes {people} person(s) under two label tuples (in two releases it holds): linking their rows narrows them to both classes"
            ),
            Breach::Relabelled { first, then, people } => write!(
                f,
                "{people} person(s) published in version {first} carry other labels in version {then}: whoever links their rows across the two versions narrows them to the people of both classes"
            ),
            Breach::Small {
                groups,
                smallest,
                k,
                present,
                changed,
            } => write!(
                f,
                "{groups} group(s) of people added, removed or changed between readable versions hold fewer than {k} people (the smallest: {smallest}, present in version(s) {}{}): whoever diffs the versions class by class singles them out",
                list(present),
                match changed.is_empty() {
                    true => String::new(),
                    false => format!(", their rows changed in version(s) {}", list(changed)),
                }
            ),
            Breach::Undiverse {
                groups,
                lowest,
                l,
                present,
            } => write!(
                f,
                "{groups} group(s) of people added, removed or changed between readable versions hold fewer than {l} distinct sensitive values (the lowest: {lowest}, present in version(s) {}): whoever diffs the versions learns their values",
                list(present)
            ),
        }
    }
}

/// The people published in any of `views` (those a new release of the
/// same people would publish again).
pub fn published_people(views: &[View<'_>]) -> FxHashSet<u128> {
    views
        .iter()
        .flat_map(|v| v.releases.iter())
        .flat_map(|r| r.iter().map(|p| p.person))
        .collect()
}

/// Checks that a reader holding every one of `views` (oldest first) learns
/// no more than k people per class and l values per group (see the module
/// docs). Returns every breach found; none means the series holds.
pub fn check(views: &[View<'_>], k: usize, l: usize) -> Vec<Breach> {
    struct Track {
        labels: u64,
        labels_from: usize,
        /// Per view: 0 absent, else 1 + the index of the person's rows
        /// among the distinct rows they were published with.
        pattern: Vec<u8>,
        contents: Vec<u64>,
        values: Vec<u64>,
        /// The last view the person was seen in, and their rows there
        /// (summed over the releases of that view that hold them).
        last_view: usize,
        view_rows: u64,
    }
    let n = views.len();
    let mut breaches = Vec::new();
    let largest = views
        .iter()
        .map(|v| v.releases.iter().map(|r| r.len()).sum::<usize>())
        .max()
        .unwrap_or(0);
    let mut people: FxHashMap<u128, Track> =
        FxHashMap::with_capacity_and_hasher(largest, Default::default());
    let mut relabelled: std::collections::BTreeMap<(usize, usize), usize> = Default::default();
    // The pattern entry of a person's rows `rows` in view `vi`.
    let place = |t: &mut Track, vi: usize, rows: u64, values: &[u64]| {
        let at = match t.contents.iter().position(|&c| c == rows) {
            Some(i) => i,
            None => {
                t.contents.push(rows);
                // Values are gathered once per distinct content.
                t.values.extend_from_slice(values);
                t.contents.len() - 1
            }
        };
        t.pattern[vi] = (at + 1).min(u8::MAX as usize) as u8;
    };
    for (vi, view) in views.iter().enumerate() {
        let mut two_labels = 0;
        for p in view.releases.iter().flat_map(|r| r.iter()) {
            let t = people.entry(p.person).or_insert_with(|| Track {
                labels: p.labels,
                labels_from: vi,
                pattern: vec![0; n],
                contents: Vec::new(),
                values: Vec::new(),
                last_view: usize::MAX,
                view_rows: 0,
            });
            if t.labels != p.labels {
                match t.last_view == vi {
                    // One version holding a person twice (two releases
                    // of theirs) under two label tuples.
                    true => two_labels += 1,
                    false => *relabelled.entry((t.labels_from, vi)).or_default() += 1,
                }
            }
            if t.last_view == vi {
                // Their rows in this version are those of both releases.
                t.view_rows = t.view_rows.wrapping_add(p.rows);
                t.values.extend_from_slice(&p.values);
            } else {
                t.last_view = vi;
                t.view_rows = p.rows;
            }
            let rows = t.view_rows;
            place(t, vi, rows, &p.values);
        }
        if two_labels > 0 {
            breaches.push(Breach::TwoLabelsInOneVersion {
                version: view.version,
                people: two_labels,
            });
        }
    }
    for ((first, then), count) in relabelled {
        breaches.push(Breach::Relabelled {
            first: views[first].version,
            then: views[then].version,
            people: count,
        });
    }
    // The atoms: people of one label tuple with one pattern.
    let mut atoms: FxHashMap<(u64, &[u8]), Vec<&[u64]>> = FxHashMap::default();
    for t in people.values_mut() {
        t.values.sort_unstable();
        t.values.dedup();
    }
    for t in people.values() {
        atoms
            .entry((t.labels, &t.pattern))
            .or_default()
            .push(&t.values);
    }
    let versions = |pattern: &[u8]| -> (Vec<i64>, Vec<i64>) {
        let present = (0..n)
            .filter(|&i| pattern[i] > 0)
            .map(|i| views[i].version)
            .collect();
        let mut last = 0;
        let mut changed = Vec::new();
        for (i, &p) in pattern.iter().enumerate() {
            if p > 0 {
                if last > 0 && p != last {
                    changed.push(views[i].version);
                }
                last = p;
            }
        }
        (present, changed)
    };
    let mut small: Option<(usize, usize, &[u8])> = None;
    let mut undiverse: Option<(usize, usize, &[u8])> = None;
    // Atoms in a fixed order, so that the same history gives the same
    // message.
    let mut ordered: Vec<_> = atoms.iter().collect();
    ordered.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for ((_, pattern), members) in ordered {
        if members.len() < k {
            let s = small.get_or_insert((0, usize::MAX, pattern));
            s.0 += 1;
            if members.len() < s.1 {
                *s = (s.0, members.len(), pattern);
            }
            continue;
        }
        if l > 1 {
            let found = distinct_per_person(members, l);
            if found < l {
                let u = undiverse.get_or_insert((0, usize::MAX, pattern));
                u.0 += 1;
                if found < u.1 {
                    *u = (u.0, found, pattern);
                }
            }
        }
    }
    if let Some((groups, smallest, pattern)) = small {
        let (present, changed) = versions(pattern);
        breaches.push(Breach::Small {
            groups,
            smallest,
            k,
            present,
            changed,
        });
    }
    if let Some((groups, lowest, pattern)) = undiverse {
        breaches.push(Breach::Undiverse {
            groups,
            lowest,
            l,
            present: versions(pattern).0,
        });
    }
    breaches
}

/// Distinct values of a group, each person counted once (the smallest
/// hitting set of their value sets), counted no further than `stop`.
fn distinct_per_person(members: &[&[u64]], stop: usize) -> usize {
    let mut codes: FxHashMap<u64, u32> = FxHashMap::default();
    let sets: Vec<Vec<u32>> = members
        .iter()
        .map(|vs| {
            vs.iter()
                .map(|v| {
                    let next = codes.len() as u32;
                    *codes.entry(*v).or_insert(next)
                })
                .collect()
        })
        .collect();
    crate::privacy::hitting_number_of(sets.iter().map(Vec::as_slice).collect(), stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(id: u128, labels: u64, rows: u64, values: &[u64]) -> Published {
        Published {
            person: id,
            labels,
            rows,
            values: values.to_vec(),
        }
    }

    /// A class of `n` people from `from`, labels `labels`, value `i % l`.
    fn class(from: u128, n: usize, labels: u64, l: u64) -> Vec<Published> {
        (0..n as u128)
            .map(|i| person(from + i, labels, from as u64 + i as u64, &[i as u64 % l]))
            .collect()
    }

    #[test]
    fn one_version_is_its_own_classes() {
        let day1 = [class(0, 5, 1, 2), class(100, 5, 2, 2)].concat();
        let views = [View {
            version: 0,
            releases: vec![&day1],
        }];
        assert!(check(&views, 5, 2).is_empty());
        assert!(matches!(
            check(&views, 6, 2)[0],
            Breach::Small { smallest: 5, .. }
        ));
        assert!(matches!(
            check(&views, 5, 3)[0],
            Breach::Undiverse { lowest: 2, .. }
        ));
    }

    #[test]
    fn appending_k_new_people_holds_and_fewer_is_singled_out() {
        let day1 = [class(0, 5, 1, 2), class(100, 5, 2, 2)].concat();
        let new5 = class(200, 5, 1, 2);
        let views = [
            View {
                version: 0,
                releases: vec![&day1],
            },
            View {
                version: 1,
                releases: vec![&day1, &new5],
            },
        ];
        assert!(check(&views, 5, 2).is_empty());
        // One new person in an old class: the class grew by one.
        let new1 = class(300, 1, 1, 2);
        let views = [
            View {
                version: 0,
                releases: vec![&day1],
            },
            View {
                version: 1,
                releases: vec![&day1, &new1],
            },
        ];
        let b = check(&views, 5, 2);
        assert_eq!(
            b,
            vec![Breach::Small {
                groups: 1,
                smallest: 1,
                k: 5,
                present: vec![1],
                changed: vec![]
            }]
        );
        assert!(b[0].to_string().contains("fewer than 5 people"));
    }

    #[test]
    fn relabelled_people_and_changed_rows_are_caught() {
        let day1 = class(0, 6, 1, 2);
        // The same people re-anonymised under other labels.
        let day2 = class(0, 6, 2, 2);
        let views = [
            View {
                version: 3,
                releases: vec![&day1],
            },
            View {
                version: 4,
                releases: vec![&day2],
            },
        ];
        assert!(check(&views, 5, 1).contains(&Breach::Relabelled {
            first: 3,
            then: 4,
            people: 6
        }));
        // One person's rows changed (a new visit), labels kept.
        let mut day2 = day1.clone();
        day2[0].rows ^= 1;
        let views = [
            View {
                version: 3,
                releases: vec![&day1],
            },
            View {
                version: 4,
                releases: vec![&day2],
            },
        ];
        assert_eq!(
            check(&views, 5, 1),
            vec![Breach::Small {
                groups: 1,
                smallest: 1,
                k: 5,
                present: vec![3, 4],
                changed: vec![4]
            }]
        );
    }

    #[test]
    fn removing_a_whole_class_holds_removing_one_person_does_not() {
        let day1 = [class(0, 5, 1, 2), class(100, 5, 2, 2)].concat();
        let without_class = class(100, 5, 2, 2);
        let views = [
            View {
                version: 0,
                releases: vec![&day1],
            },
            View {
                version: 1,
                releases: vec![&without_class],
            },
        ];
        assert!(check(&views, 5, 2).is_empty());
        let without_one: Vec<Published> = day1[1..].to_vec();
        let views = [
            View {
                version: 0,
                releases: vec![&day1],
            },
            View {
                version: 1,
                releases: vec![&without_one],
            },
        ];
        assert!(matches!(
            check(&views, 5, 2)[0],
            Breach::Small { smallest: 1, .. }
        ));
    }

    #[test]
    fn values_count_per_person() {
        // Five new people who all hold value 7 besides another: 1 value.
        let day: Vec<Published> = (0..5u128)
            .map(|i| person(i, 1, i as u64, &[7, 10 + i as u64]))
            .collect();
        let views = [View {
            version: 0,
            releases: vec![&day],
        }];
        assert!(matches!(
            check(&views, 5, 2)[0],
            Breach::Undiverse { lowest: 1, .. }
        ));
    }
}
