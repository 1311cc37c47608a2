//! The finished clusters, indexed for the search of the cluster nearest
//! a leftover or a cluster too small to stand.

use super::*;

/// The finished clusters in slots, with column-wise copies of their losses
/// and of the packed spans of a few QIs, so a scan can bound `DS` for every
/// cluster without touching the clusters themselves.
#[derive(Debug, Default)]
pub(super) struct Finished {
    pub(super) slots: Vec<Option<Cluster>>,
    /// Free slots, reused last-freed first.
    pub(super) free: Vec<usize>,
    /// Per slot: the cluster's loss, infinite for a free slot.
    pub(super) loss: Vec<f64>,
    /// Per slot: the cluster's number of rows.
    pub(super) size: Vec<f64>,
    /// The QIs whose spans are copied (`keys`, `key_loss`): all whose spans
    /// pack into a word, in the trie's order.
    pub(super) indexed: Vec<usize>,
    /// Whether every QI is indexed (the bound is then the exact distance).
    pub(super) exact: bool,
    /// Per indexed QI, per slot: the packed span and its loss.
    pub(super) keys: Vec<Vec<u64>>,
    pub(super) key_loss: Vec<Vec<f64>>,
    pub(super) live: usize,
}

impl Finished {
    pub(super) fn new(loss: &UncertaintyLoss, order: &[usize]) -> Self {
        let indexed: Vec<usize> = order.iter().copied().filter(|&q| loss.keyed(q)).collect();
        Finished {
            exact: indexed.len() == order.len(),
            keys: vec![Vec::new(); indexed.len()],
            key_loss: vec![Vec::new(); indexed.len()],
            indexed,
            ..Default::default()
        }
    }

    pub(super) fn insert(&mut self, c: Cluster) -> usize {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(None);
                self.loss.push(f64::INFINITY);
                self.size.push(0.0);
                for (k, l) in self.keys.iter_mut().zip(&mut self.key_loss) {
                    k.push(0);
                    l.push(0.0);
                }
                self.slots.len() - 1
            }
        };
        self.put_back(id, c);
        id
    }

    /// Takes cluster `id` out (to change it, or for good: its slot is freed
    /// unless [`Finished::put_back`] refills it).
    pub(super) fn remove(&mut self, id: usize) -> Cluster {
        let c = self.slots[id].take().expect("a live cluster");
        self.loss[id] = f64::INFINITY;
        self.free.push(id);
        self.live -= 1;
        c
    }

    /// Puts a (changed) cluster into slot `id`, freed by [`Finished::remove`].
    pub(super) fn put_back(&mut self, id: usize, c: Cluster) {
        if let Some(i) = self.free.iter().rposition(|&f| f == id) {
            self.free.remove(i);
        }
        self.loss[id] = c.loss;
        self.size[id] = c.rows.len() as f64;
        for (k, &q) in self.indexed.iter().enumerate() {
            self.keys[k][id] = UncertaintyLoss::key(&c.spans[q]).unwrap_or(0);
            self.key_loss[k][id] = c.attr_loss[q];
        }
        self.slots[id] = Some(c);
        self.live += 1;
    }

    pub(super) fn get(&self, id: usize) -> &Cluster {
        self.slots[id].as_ref().expect("a live cluster")
    }

    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Live clusters by slot.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &Cluster)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i, c)))
    }
}
