//! The classes KACA has not merged yet, in the order of the chosen
//! next-class strategy.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};

use rand_chacha::ChaCha8Rng;

/// Total order on f64 keys for the heap of the keyed strategies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Key(pub(super) f64);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The classes not yet accepted, ordered by the strategy.
pub(super) enum Pending {
    /// A list to draw from with the seeded generator, and each class's
    /// position in it (for removal).
    Random {
        rng: Box<ChaCha8Rng>,
        list: Vec<u32>,
        pos: Vec<u32>,
    },
    /// `(size, class)` in order, and the size each class was queued with.
    Smallest {
        set: BTreeSet<(u32, u32)>,
        key: Vec<u32>,
    },
    /// A max-heap of `sign * distance` (stale keys are re-evaluated).
    Keyed {
        heap: BinaryHeap<(Key, Reverse<u32>)>,
        member: Vec<bool>,
        sign: f64,
    },
}

impl Pending {
    /// Queues a class of `size` rows; `key` is its heap priority for the
    /// keyed strategies (`INFINITY`: evaluate it next).
    pub(super) fn add(&mut self, class: u32, size: u32, key: f64) {
        let c = class as usize;
        match self {
            Pending::Random { list, pos, .. } => {
                if pos.len() <= c {
                    pos.resize(c + 1, u32::MAX);
                }
                pos[c] = list.len() as u32;
                list.push(class);
            }
            Pending::Smallest { set, key: k } => {
                if k.len() <= c {
                    k.resize(c + 1, u32::MAX);
                }
                k[c] = size;
                set.insert((size, class));
            }
            Pending::Keyed { heap, member, .. } => {
                if member.len() <= c {
                    member.resize(c + 1, false);
                }
                member[c] = true;
                heap.push((Key(key), Reverse(class)));
            }
        }
    }

    /// Unqueues a class (merged, accepted or suppressed); a no-op when it
    /// is not queued. Keyed strategies drop its heap entry lazily.
    pub(super) fn remove(&mut self, class: u32) {
        let c = class as usize;
        match self {
            Pending::Random { list, pos, .. } => {
                let Some(&p) = pos.get(c).filter(|&&p| p != u32::MAX) else {
                    return;
                };
                list.swap_remove(p as usize);
                if let Some(&moved) = list.get(p as usize) {
                    pos[moved as usize] = p;
                }
                pos[c] = u32::MAX;
            }
            Pending::Smallest { set, key } => {
                if let Some(&s) = key.get(c).filter(|&&s| s != u32::MAX) {
                    set.remove(&(s, class));
                    key[c] = u32::MAX;
                }
            }
            Pending::Keyed { member, .. } => {
                if let Some(m) = member.get_mut(c) {
                    *m = false;
                }
            }
        }
    }
}
