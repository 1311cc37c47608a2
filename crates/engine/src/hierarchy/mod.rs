//! Value generalisation hierarchies (taxonomy trees).
//!
//! A [`Hierarchy`] is a tree whose leaves are an attribute's values and whose
//! root is the fully generalised value (`*`). In code, levels count up from
//! the leaves: level 0 is the leaf level, level [`Hierarchy::height`] is the
//! root. The KACA paper (the KACA paper) numbers levels the other way (1 = root,
//! h = leaves); metrics convert at that edge.
//!
//! Leaves are numbered in depth-first order, so the leaves under any node form
//! one contiguous range of leaf codes: "is this leaf under that node" and
//! "how many leaves under that node" are O(1), ancestors are O(1) through a
//! per-level lookup table, and the lowest common ancestor is O(height).
//!
//! Hierarchies come from three builders, all funnelled through one validating
//! constructor ([`Hierarchy::from_paths`]): the common CSV form
//! (`leaf;parent;...;*`, one row per leaf, as ARX writes it), numeric
//! intervals ([`IntervalLevels`]) and digit masking ([`Hierarchy::masking`]).
//!
//! This module holds the tree and its navigation; the builders are apart:
//! `paths` (the validating constructor and the CSV form), `masking` and
//! `intervals` ([`IntervalLevels`]).

mod intervals;
mod masking;
mod paths;

pub use intervals::{IntervalLevels, MAX_INTERVALS};

use std::ops::Range;

use rustc_hash::FxHashMap;

/// A node of a hierarchy. Leaves are nodes `0..leaf_count` in depth-first
/// order; internal nodes follow.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct NodeId(pub u32);

/// A level of a hierarchy: 0 is the leaf level, `height` the root.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Level(pub u8);

/// A validated value generalisation hierarchy.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Hierarchy {
    source: String,
    height: u8,
    labels: Vec<String>,
    level: Vec<u8>,
    parent: Vec<u32>,
    /// Leaf range of every node: `first_leaf[n]..first_leaf[n] + leaf_count[n]`.
    first_leaf: Vec<u32>,
    leaf_count: Vec<u32>,
    children: Vec<Vec<u32>>,
    /// `ancestors[level][leaf]`: the node above `leaf` at `level`.
    ancestors: Vec<Vec<u32>>,
    /// Nodes of each level in leaf order.
    nodes_at_level: Vec<Vec<u32>>,
    leaf_by_label: FxHashMap<String, u32>,
}

impl Hierarchy {
    /// Where this hierarchy came from (file name or builder description).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Number of generalisation steps from a leaf to the root.
    pub fn height(&self) -> u8 {
        self.height
    }

    /// Number of leaves (values the hierarchy knows).
    pub fn leaf_count(&self) -> usize {
        self.ancestors[0].len()
    }

    /// Number of nodes of all levels.
    pub fn node_count(&self) -> usize {
        self.labels.len()
    }

    /// The root node.
    pub fn root(&self) -> NodeId {
        NodeId(self.nodes_at_level[self.height as usize][0])
    }

    /// The leaf whose label is `label`, if any.
    pub fn leaf(&self, label: &str) -> Option<NodeId> {
        self.leaf_by_label.get(label).map(|&l| NodeId(l))
    }

    /// The label of a node (`*` for the usual root).
    pub fn label(&self, node: NodeId) -> &str {
        &self.labels[node.0 as usize]
    }

    /// The level of a node (0 = leaf).
    pub fn level(&self, node: NodeId) -> Level {
        Level(self.level[node.0 as usize])
    }

    /// The parent of a node (the root is its own parent).
    pub fn parent(&self, node: NodeId) -> NodeId {
        NodeId(self.parent[node.0 as usize])
    }

    /// The children of a node, in leaf order.
    pub fn children(&self, node: NodeId) -> impl ExactSizeIterator<Item = NodeId> + '_ {
        self.children[node.0 as usize].iter().map(|&c| NodeId(c))
    }

    /// The ancestor of `leaf` at `level` (O(1)).
    pub fn ancestor(&self, leaf: NodeId, level: Level) -> NodeId {
        NodeId(self.ancestors[level.0 as usize][leaf.0 as usize])
    }

    /// The lookup table leaf code -> node at `level`, as used for full-domain
    /// recoding.
    pub fn level_table(&self, level: Level) -> &[u32] {
        &self.ancestors[level.0 as usize]
    }

    /// The ancestor of any node at a level at or above its own.
    pub fn ancestor_of_node(&self, node: NodeId, level: Level) -> NodeId {
        debug_assert!(level >= self.level(node));
        self.ancestor(NodeId(self.first_leaf[node.0 as usize]), level)
    }

    /// The leaves under `node`, as a range of leaf codes (O(1)).
    pub fn leaves(&self, node: NodeId) -> Range<u32> {
        let f = self.first_leaf[node.0 as usize];
        f..f + self.leaf_count[node.0 as usize]
    }

    /// Whether `node` is `other` or one of its ancestors.
    pub fn covers(&self, node: NodeId, other: NodeId) -> bool {
        let a = self.leaves(node);
        let b = self.leaves(other);
        a.start <= b.start && b.end <= a.end && self.level(node) >= self.level(other)
    }

    /// The lowest common ancestor of two nodes (O(height)).
    pub fn lca(&self, a: NodeId, b: NodeId) -> NodeId {
        if a == b {
            return a;
        }
        let (la, lb) = (self.level(a), self.level(b));
        let start = la.max(lb);
        let leaf_a = NodeId(self.first_leaf[a.0 as usize]);
        let rb = self.leaves(b);
        for l in start.0..=self.height {
            let anc = self.ancestor(leaf_a, Level(l));
            let r = self.leaves(anc);
            if r.start <= rb.start && rb.end <= r.end {
                return anc;
            }
        }
        self.root()
    }

    /// The nodes of a level, in leaf order.
    pub fn nodes_at(&self, level: Level) -> impl ExactSizeIterator<Item = NodeId> + '_ {
        self.nodes_at_level[level.0 as usize]
            .iter()
            .map(|&n| NodeId(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GENDER: &str = "male;*\nfemale;*\n";

    #[test]
    fn parses_and_navigates() {
        let h = Hierarchy::from_csv(
            "edu.csv",
            "9th;High;Any\n10th;High;Any\nBSc;Uni;Any\n12th;High;Any\n",
            ';',
        )
        .unwrap();
        assert_eq!(h.height(), 2);
        assert_eq!(h.leaf_count(), 4);
        let n9 = h.leaf("9th").unwrap();
        let n12 = h.leaf("12th").unwrap();
        let bsc = h.leaf("BSc").unwrap();
        let high = h.parent(n9);
        assert_eq!(h.label(high), "High");
        assert_eq!(h.leaves(high).len(), 3);
        assert_eq!(h.lca(n9, n12), high);
        assert_eq!(h.label(h.lca(n9, bsc)), "Any");
        assert_eq!(h.lca(high, n12), high);
        assert!(h.covers(high, n12));
        assert!(!h.covers(high, bsc));
        assert_eq!(h.nodes_at(Level(1)).len(), 2);
        assert_eq!(h.children(h.root()).len(), 2);
        let g = Hierarchy::from_csv("sex.csv", GENDER, ';').unwrap();
        assert_eq!(g.height(), 1);
    }
}
