//! Frequency sets of lattice nodes ([`FrequencySet`]): building them from
//! the input classes, rolling them up to more general nodes, and testing
//! their classes against the privacy models ([`Verdict`]).
//!
//! The rollup property (Incognito, section 3) lets a more general node's
//! classes be computed from a more specific node's classes alone, never
//! from rows; [`group_by`] merges the rolled-up keys in a small
//! open-addressing table.

use super::{Key, Lattice};
use crate::privacy::ClassView;

/// The classes of one node (its frequency set): per class the generalised
/// tuple and the number of rows.
#[derive(Debug, Clone)]
pub(crate) struct FrequencySet<K> {
    pub(super) levels: Vec<u8>,
    pub(super) keys: Vec<K>,
    pub(super) counts: Vec<u32>,
    /// Per class, the population records outside the research subset it
    /// covers (δ-presence); empty for every other job.
    pub(super) outside: Vec<u32>,
    /// The class of every input class (the research classes, then under
    /// δ-presence the population's), kept only when row lists are needed.
    pub(super) members: Option<Vec<u32>>,
}

impl<K> FrequencySet<K> {
    /// Number of classes.
    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }
}

/// Which classes of a node the privacy models accept.
#[derive(Debug, Clone)]
pub(crate) struct Verdict {
    /// Whether the rejected classes fit the suppression limit.
    pub(crate) accepted: bool,
    /// Rows in rejected classes (suppressed if the node is chosen).
    pub(crate) suppressed: usize,
    pub(super) ok: Vec<bool>,
}

impl Lattice<'_> {
    /// The frequency set of the node `levels` over the QIs `attrs`, rolled
    /// up from `from` (the frequency set of a node of the same QIs with
    /// every level at most `levels`): only the QIs whose level differs are
    /// mapped, one level at a time, through their parent tables. Without
    /// `from` it is grouped from the input classes. Row lists are tracked
    /// when a model needs them or `members` asks for them (to build a
    /// partition).
    ///
    /// `K` must hold [`Lattice::key_bits`] of `attrs`.
    pub(crate) fn frequency_set<K: Key>(
        &self,
        attrs: &[usize],
        levels: &[u8],
        from: Option<&FrequencySet<K>>,
        members: bool,
    ) -> FrequencySet<K> {
        debug_assert!(K::holds(self.key_bits(attrs)));
        let layout = self.layout(attrs);
        let members = members || self.needs_rows;
        let (keys, counts, outside, remap) = match from {
            None => {
                let tables: Vec<(usize, &[u32])> = attrs
                    .iter()
                    .zip(levels)
                    .map(|(&q, &l)| (q, &self.dense[q][l as usize][..]))
                    .collect();
                let key_of = |t: &[u32]| {
                    let mut key = K::zeros(attrs.len());
                    for (j, &(q, table)) in tables.iter().enumerate() {
                        key.set(&layout, j, table[t[q] as usize]);
                    }
                    key
                };
                let classes = self.classes;
                let research = (0..classes.len())
                    .map(|c| (key_of(classes.tuple(c)), classes.size(c) as u32, 0));
                match &self.outside {
                    None => group_by(research, classes.len(), members, false),
                    // The population outside the research subset: keys of
                    // their own (no research record) stay, since a more
                    // general node may merge them into a published class.
                    Some(outside) => group_by(
                        research.chain(
                            (0..outside.len())
                                .map(|c| (key_of(outside.tuple(c)), 0, outside.size(c) as u32)),
                        ),
                        classes.len() + outside.len(),
                        members,
                        true,
                    ),
                }
            }
            Some(src) => {
                debug_assert!(src.levels.iter().zip(levels).all(|(a, b)| a <= b));
                // Per changed QI, one table from the source's level to ours.
                let changed: Vec<(usize, Vec<u32>)> = attrs
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| src.levels[j] != levels[j])
                    .map(|(j, &q)| {
                        let (from, to) = (src.levels[j] as usize, levels[j] as usize);
                        let table = (0..self.nodes[q][from].len() as u32)
                            .map(|c| (from..to).fold(c, |c, l| self.up[q][l][c as usize]))
                            .collect();
                        (j, table)
                    })
                    .collect();
                let outside = |g: usize| src.outside.get(g).copied().unwrap_or(0);
                let pairs = src
                    .keys
                    .iter()
                    .zip(&src.counts)
                    .enumerate()
                    .map(|(g, (key, count))| (key, count, outside(g)));
                let track = !src.outside.is_empty();
                match &changed[..] {
                    // The common case: a direct specialisation, one QI differs.
                    [(j, table)] => group_by(
                        pairs.map(|(key, &count, outside)| {
                            let mut key = key.clone();
                            key.set(&layout, *j, table[key.get(&layout, *j) as usize]);
                            (key, count, outside)
                        }),
                        src.len(),
                        members,
                        track,
                    ),
                    _ => group_by(
                        pairs.map(|(key, &count, outside)| {
                            let mut key = key.clone();
                            for (j, table) in &changed {
                                key.set(&layout, *j, table[key.get(&layout, *j) as usize]);
                            }
                            (key, count, outside)
                        }),
                        src.len(),
                        members,
                        track,
                    ),
                }
            }
        };
        let members = members.then(|| match from {
            None => remap,
            Some(src) => src
                .members
                .as_ref()
                .expect("row lists are tracked from the input classes on")
                .iter()
                .map(|&g| remap[g as usize])
                .collect(),
        });
        FrequencySet {
            levels: levels.to_vec(),
            keys,
            counts,
            outside,
            members,
        }
    }

    /// Tests every class of a node against the privacy models.
    pub(crate) fn verdict<K>(&self, fs: &FrequencySet<K>) -> Verdict {
        let mut ok: Vec<bool> = fs
            .counts
            .iter()
            .map(|&c| c as usize >= self.min_size)
            .collect();
        // δ-presence: the share of research records among the population
        // records of each class (a class without research records is no
        // class of the release: it is never accepted, and costs nothing).
        if let Some(presence) = self.privacy.presence() {
            for (g, (flag, &c)) in ok.iter_mut().zip(&fs.counts).enumerate() {
                let o = fs.outside.get(g).copied().unwrap_or(0);
                *flag = *flag && c > 0 && presence.accepts(c as usize, (c + o) as usize);
            }
        }
        if self.needs_rows {
            let members = fs
                .members
                .as_ref()
                .expect("frequency sets keep members when a model needs rows");
            // Row lists of the classes that pass the size test, in one buffer.
            let mut offsets = Vec::with_capacity(fs.len() + 1);
            let mut acc = 0usize;
            for (g, &c) in fs.counts.iter().enumerate() {
                offsets.push(acc);
                if ok[g] {
                    acc += c as usize;
                }
            }
            offsets.push(acc);
            let mut fill = offsets.clone();
            let mut rows = vec![0u32; acc];
            // The research classes only (the population's follow them).
            for (base, &g) in members.iter().enumerate().take(self.classes.len()) {
                if ok[g as usize] {
                    let src = self.classes.rows(base);
                    let at = fill[g as usize];
                    rows[at..at + src.len()].copy_from_slice(src);
                    fill[g as usize] += src.len();
                }
            }
            for (g, flag) in ok.iter_mut().enumerate() {
                if *flag {
                    *flag = self.privacy.accepts(ClassView {
                        table: self.table,
                        rows: &rows[offsets[g]..offsets[g + 1]],
                    });
                }
            }
        }
        let suppressed = fs
            .counts
            .iter()
            .zip(&ok)
            .filter(|(_, &ok)| !ok)
            .map(|(&c, _)| c as usize)
            .sum();
        // δ-presence: the population no accepted class covers holds the
        // suppressed research records, a group of its own to an attacker.
        let unmatched_ok = self.privacy.presence().is_none_or(|presence| {
            let unmatched: usize = fs
                .counts
                .iter()
                .zip(&ok)
                .enumerate()
                .filter(|(_, (_, &ok))| !ok)
                .map(|(g, (&c, _))| (c + fs.outside.get(g).copied().unwrap_or(0)) as usize)
                .sum();
            presence.accepts_unmatched(suppressed, unmatched)
        });
        Verdict {
            accepted: suppressed <= self.max_suppressed && unmatched_ok,
            suppressed,
            ok,
        }
    }
}

/// Groups `(key, count, outside)` triples by key: returns the distinct keys
/// and their summed counts (in order of first occurrence, so the result
/// depends only on the input order), their summed `outside` counts when
/// `outside` is asked for (δ-presence) and, when `remap` is asked for, the
/// new class of every input triple.
///
/// An open-addressing table of class numbers (4 bytes a slot, linear
/// probing, at most half full) keeps the hot data small: rollups of large
/// frequency sets are bound by this table's cache misses.
fn group_by<K: Key>(
    items: impl Iterator<Item = (K, u32, u32)>,
    len: usize,
    remap: bool,
    outside: bool,
) -> (Vec<K>, Vec<u32>, Vec<u32>, Vec<u32>) {
    const EMPTY: u32 = u32::MAX;
    let bits = (2 * len.max(1)).next_power_of_two().trailing_zeros().max(4);
    let mask = (1usize << bits) - 1;
    let mut slots = vec![EMPTY; mask + 1];
    let mut keys: Vec<K> = Vec::with_capacity(len);
    let mut counts: Vec<u32> = Vec::with_capacity(len);
    let mut outsides: Vec<u32> = Vec::with_capacity(if outside { len } else { 0 });
    let mut class_of = Vec::with_capacity(if remap { len } else { 0 });
    for (key, c, o) in items {
        let mut at = (key.hash64() >> (64 - bits)) as usize;
        let g = loop {
            match slots[at] {
                EMPTY => {
                    let g = keys.len() as u32;
                    slots[at] = g;
                    keys.push(key);
                    counts.push(0);
                    if outside {
                        outsides.push(0);
                    }
                    break g;
                }
                g if keys[g as usize] == key => break g,
                _ => at = (at + 1) & mask,
            }
        };
        counts[g as usize] += c;
        if outside {
            outsides[g as usize] += o;
        }
        if remap {
            class_of.push(g);
        }
    }
    (keys, counts, outsides, class_of)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustc_hash::FxHashMap;

    use super::*;
    use crate::hierarchy::Hierarchy;
    use crate::spec::JobSpec;

    use crate::algorithms::lattice::{Space, Wide};
    use crate::algorithms::Context;
    use crate::encode::{EquivalenceClasses, QiTable};
    use crate::privacy::Privacy;

    fn fixture() -> (JobSpec, QiTable) {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({"attributes": [
            {"name": "a", "role": "qi", "hierarchy": "a.csv"},
            {"name": "z", "role": "qi", "masking": true},
            {"name": "n", "role": "qi", "intervals": [2, 4]},
        ]}))
        .unwrap();
        let h = Hierarchy::from_csv("a.csv", "a0;p;*\na1;p;*\na2;q;*\na3;q;*\n", ';').unwrap();
        let hs: FxHashMap<String, Arc<Hierarchy>> =
            [("a.csv".to_string(), Arc::new(h))].into_iter().collect();
        let rows = 60;
        let a: Vec<String> = (0..rows).map(|i| format!("a{}", (i * 7) % 4)).collect();
        let z: Vec<String> = (0..rows)
            .map(|i| format!("{}", 4350 + (i * 5) % 9))
            .collect();
        let n: Vec<String> = (0..rows).map(|i| format!("{}", (i * 3) % 11)).collect();
        fn col(v: &[String]) -> Vec<&str> {
            v.iter().map(|s| s.as_str()).collect()
        }
        let table = QiTable::from_string_columns(
            &spec,
            &hs,
            &[("a", col(&a)), ("z", col(&z)), ("n", col(&n))],
        )
        .unwrap();
        (spec, table)
    }

    fn sorted<K: Key + Ord>(fs: &FrequencySet<K>) -> Vec<(K, u32)> {
        let mut v: Vec<(K, u32)> = fs
            .keys
            .iter()
            .cloned()
            .zip(fs.counts.iter().copied())
            .collect();
        v.sort();
        v
    }

    /// Rolling up from any more specific node gives the same classes as
    /// grouping the input classes directly, for every key type.
    fn rollup_matches_grouping<K: Key + Ord + std::fmt::Debug>() {
        let (spec, table) = fixture();
        let classes = EquivalenceClasses::of(&table);
        let privacy = Privacy::k_anonymity(3);
        let ctx = Context::local(&table, &classes, &privacy, &spec);
        let lattice = Lattice::new(&ctx, "test").unwrap();
        let attrs = [0usize, 2];
        let space = Space::new(attrs.to_vec(), lattice.heights()).unwrap();
        for to in 0..space.size() {
            let target = space.decode(to);
            let direct = lattice.frequency_set::<K>(&attrs, &target, None, true);
            assert_eq!(direct.counts.iter().sum::<u32>(), 60);
            for from in 0..space.size() {
                let source = space.decode(from);
                if source.iter().zip(&target).any(|(s, t)| s > t) {
                    continue;
                }
                let src = lattice.frequency_set::<K>(&attrs, &source, None, true);
                let rolled = lattice.frequency_set(&attrs, &target, Some(&src), true);
                assert_eq!(sorted(&rolled), sorted(&direct), "{source:?} -> {target:?}");
                // Every input class lands in the class holding its tuple.
                let members = rolled.members.as_ref().unwrap();
                let mut sizes = vec![0u32; rolled.len()];
                for (c, &g) in members.iter().enumerate() {
                    sizes[g as usize] += classes.size(c) as u32;
                }
                assert_eq!(sizes, rolled.counts);
            }
        }
    }

    #[test]
    fn rollups_match_direct_grouping_for_every_key_type() {
        rollup_matches_grouping::<u64>();
        rollup_matches_grouping::<u128>();
        rollup_matches_grouping::<Wide>();
    }

    #[test]
    fn the_root_node_has_one_class_and_the_leaves_the_input_classes() {
        let (spec, table) = fixture();
        let classes = EquivalenceClasses::of(&table);
        let privacy = Privacy::k_anonymity(61);
        let ctx = Context::local(&table, &classes, &privacy, &spec);
        let lattice = Lattice::new(&ctx, "test").unwrap();
        let attrs = [0usize, 1, 2];
        assert_eq!(lattice.heights(), &[2, 4, 3]);
        let leaves = lattice.frequency_set::<u64>(&attrs, &[0, 0, 0], None, false);
        assert_eq!(leaves.len(), classes.len());
        let root = lattice.frequency_set(&attrs, &[2, 4, 3], Some(&leaves), false);
        assert_eq!(root.counts, vec![60]);
        // k = 61 > 60 rows: even the root is rejected, all rows counted.
        let v = lattice.verdict(&root);
        assert!(!v.accepted);
        assert_eq!(v.suppressed, 60);
        assert_eq!(lattice.distinct_at(0, 0), 4);
        assert_eq!(lattice.distinct_at(0, 1), 2);
        assert_eq!(lattice.distinct_at(1, 4), 1);
    }
}
