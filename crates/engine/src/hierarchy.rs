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

use std::ops::Range;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};

/// A node of a hierarchy. Leaves are nodes `0..leaf_count` in depth-first
/// order; internal nodes follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct NodeId(pub u32);

/// A level of a hierarchy: 0 is the leaf level, `height` the root.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Level(pub u8);

/// A validated value generalisation hierarchy.
#[derive(Debug, Clone)]
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
    /// Parses the common CSV form: one row per leaf, `leaf;parent;...;root`,
    /// no header, every row with the same number of levels and the same root.
    ///
    /// `source` names the file in error messages.
    ///
    /// # Errors
    /// [`Error::Hierarchy`] naming the file and line when the text is empty,
    /// rows have different lengths, a leaf occurs twice, a node has two
    /// different parents, a cell is empty, or the roots differ.
    pub fn from_csv(source: &str, text: &str, delimiter: char) -> Result<Self> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut paths = Vec::new();
        let mut lines = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            paths.push(
                line.split(delimiter)
                    .map(|c| c.trim().to_string())
                    .collect::<Vec<_>>(),
            );
            lines.push(i + 1);
        }
        Self::from_paths(source, paths, Some(&lines), true)
    }

    /// Builds a hierarchy from one path per leaf (`[leaf, parent, ..., root]`).
    ///
    /// `lines` gives the source line of every path for error messages;
    /// `show_labels` says whether labels may appear in errors (true for
    /// hierarchy files, false for hierarchies derived from record values).
    ///
    /// # Errors
    /// [`Error::Hierarchy`] as described on [`Hierarchy::from_csv`].
    pub fn from_paths(
        source: &str,
        paths: Vec<Vec<String>>,
        lines: Option<&[usize]>,
        show_labels: bool,
    ) -> Result<Self> {
        let line_of = |i: usize| Some(lines.map_or(i + 1, |l| l[i]));
        let shown = |label: &str| {
            if show_labels {
                format!(" `{label}`")
            } else {
                String::new()
            }
        };
        let Some(first) = paths.first() else {
            return Err(Error::hierarchy(
                source,
                None,
                "is empty: it needs one row per leaf value, `leaf;parent;...;*`",
            ));
        };
        let depth = first.len();
        if depth < 2 {
            return Err(Error::hierarchy(
                source,
                line_of(0),
                "a row needs at least a leaf and a root (`value;*`); check the delimiter (`;` expected)",
            ));
        }
        if depth > u8::MAX as usize {
            return Err(Error::hierarchy(source, None, "more than 255 levels"));
        }
        let root = first[depth - 1].clone();
        // (level, label) -> parent label; label -> first row index per level.
        let mut parent_of: Vec<FxHashMap<&str, &str>> = vec![FxHashMap::default(); depth];
        for (i, path) in paths.iter().enumerate() {
            if path.len() != depth {
                return Err(Error::hierarchy(
                    source,
                    line_of(i),
                    format!(
                        "has {} levels but the first row has {depth}; every leaf needs the same number of levels up to the root",
                        path.len()
                    ),
                ));
            }
            if let Some(j) = path.iter().position(|c| c.is_empty()) {
                return Err(Error::hierarchy(
                    source,
                    line_of(i),
                    format!("level {j} is empty"),
                ));
            }
            if path[depth - 1] != root {
                return Err(Error::hierarchy(
                    source,
                    line_of(i),
                    format!(
                        "ends in a different root{} than the first row{}; a hierarchy has exactly one root",
                        shown(&path[depth - 1]),
                        shown(&root)
                    ),
                ));
            }
            for j in 0..depth - 1 {
                match parent_of[j].get(path[j].as_str()) {
                    None => {
                        parent_of[j].insert(&path[j], &path[j + 1]);
                    }
                    Some(p) if *p == path[j + 1] => {
                        if j == 0 {
                            return Err(Error::hierarchy(
                                source,
                                line_of(i),
                                format!(
                                    "leaf{} occurs more than once; list every leaf exactly once",
                                    shown(&path[0])
                                ),
                            ));
                        }
                    }
                    Some(_) => {
                        return Err(Error::hierarchy(
                            source,
                            line_of(i),
                            format!(
                                "value{} at level {j} has two different parents; a node must have one parent",
                                shown(&path[j])
                            ),
                        ));
                    }
                }
            }
        }
        // Children of each (level, label) in order of first appearance.
        let height = depth - 1;
        let mut child_lists: Vec<FxHashMap<&str, Vec<&str>>> = vec![FxHashMap::default(); depth];
        for path in &paths {
            for j in (1..depth).rev() {
                let list = child_lists[j].entry(path[j].as_str()).or_default();
                if !list.contains(&path[j - 1].as_str()) {
                    list.push(path[j - 1].as_str());
                }
            }
        }
        // Depth-first numbering: leaves first (0..n_leaves), then internal nodes.
        let n_leaves = paths.len();
        let mut labels: Vec<String> = Vec::with_capacity(n_leaves * 2);
        let mut level = Vec::with_capacity(n_leaves * 2);
        let mut leaf_order: Vec<&str> = Vec::with_capacity(n_leaves);
        let mut internal: Vec<(u8, &str)> = Vec::new();
        fn visit<'a>(
            j: usize,
            label: &'a str,
            child_lists: &[FxHashMap<&'a str, Vec<&'a str>>],
            leaves: &mut Vec<&'a str>,
            internal: &mut Vec<(u8, &'a str)>,
        ) {
            if j == 0 {
                leaves.push(label);
                return;
            }
            internal.push((j as u8, label));
            for c in &child_lists[j][label] {
                visit(j - 1, c, child_lists, leaves, internal);
            }
        }
        visit(height, &root, &child_lists, &mut leaf_order, &mut internal);
        // Internal node ids: by level, then in depth-first order.
        internal.sort_by_key(|(l, _)| *l);
        let mut id_of: Vec<FxHashMap<&str, u32>> = vec![FxHashMap::default(); depth];
        for (i, leaf) in leaf_order.iter().enumerate() {
            id_of[0].insert(leaf, i as u32);
            labels.push(leaf.to_string());
            level.push(0u8);
        }
        for (l, label) in &internal {
            id_of[*l as usize].insert(label, labels.len() as u32);
            labels.push(label.to_string());
            level.push(*l);
        }
        let n = labels.len();
        let mut parent = vec![0u32; n];
        let mut children = vec![Vec::new(); n];
        for (j, map) in parent_of.iter().enumerate().take(height) {
            for (child, par) in map {
                let c = id_of[j][child];
                let p = id_of[j + 1][par];
                parent[c as usize] = p;
            }
        }
        let root_id = id_of[height][root.as_str()];
        parent[root_id as usize] = root_id;
        for (j, lists) in child_lists.iter().enumerate().skip(1) {
            for (par, kids) in lists {
                let p = id_of[j][par] as usize;
                children[p] = kids.iter().map(|k| id_of[j - 1][k]).collect();
            }
        }
        let mut ancestors = vec![(0..n_leaves as u32).collect::<Vec<_>>()];
        for j in 1..=height {
            let prev = &ancestors[j - 1];
            ancestors.push(prev.iter().map(|&a| parent[a as usize]).collect());
        }
        let mut first_leaf = vec![u32::MAX; n];
        let mut leaf_count = vec![0u32; n];
        for leaf in 0..n_leaves {
            for anc in ancestors.iter() {
                let a = anc[leaf] as usize;
                first_leaf[a] = first_leaf[a].min(leaf as u32);
                leaf_count[a] += 1;
            }
        }
        let mut nodes_at_level = vec![Vec::new(); depth];
        for (j, anc) in ancestors.iter().enumerate() {
            let mut nodes: Vec<u32> = Vec::new();
            for &a in anc {
                if nodes.last() != Some(&a) {
                    nodes.push(a);
                }
            }
            nodes_at_level[j] = nodes;
        }
        let leaf_by_label = leaf_order
            .iter()
            .enumerate()
            .map(|(i, l)| (l.to_string(), i as u32))
            .collect();
        Ok(Hierarchy {
            source: source.to_string(),
            height: height as u8,
            labels,
            level,
            parent,
            first_leaf,
            leaf_count,
            children,
            ancestors,
            nodes_at_level,
            leaf_by_label,
        })
    }

    /// Builds a masking hierarchy for equal-length strings such as zip codes:
    /// `4351 -> 435* -> 43** -> 4*** -> *`. Leaves are the given distinct
    /// values.
    ///
    /// # Errors
    /// [`Error::Hierarchy`] when the values are empty or of different lengths
    /// (values are not shown: they come from records).
    pub fn masking(source: &str, values: &[String], mask: char) -> Result<Self> {
        let mut values: Vec<&String> = values.iter().collect();
        values.sort();
        values.dedup();
        let Some(first) = values.first() else {
            return Err(Error::hierarchy(
                source,
                None,
                "no values to build a masking hierarchy from",
            ));
        };
        let len = first.chars().count();
        let wrong = values.iter().filter(|v| v.chars().count() != len).count();
        if wrong > 0 {
            return Err(Error::hierarchy(
                source,
                None,
                format!(
                    "masking needs values of equal length; {wrong} distinct values differ in length from the others \
                     (pad them, or use a hierarchy file)"
                ),
            ));
        }
        let paths = values
            .iter()
            .map(|v| {
                let chars: Vec<char> = v.chars().collect();
                let mut path = vec![v.to_string()];
                for masked in 1..len {
                    let mut s: String = chars[..len - masked].iter().collect();
                    s.extend(std::iter::repeat_n(mask, masked));
                    path.push(s);
                }
                path.push("*".to_string());
                path
            })
            .collect();
        Self::from_paths(source, paths, None, false)
    }

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

/// The most intervals one level of an interval hierarchy may have: a width
/// that cuts a column's range into more (an outlier, a typo in the width)
/// is an error, not hours of work and gigabytes of labels.
pub const MAX_INTERVALS: usize = 1 << 20;

/// Levels of a numeric interval hierarchy, finest first; the root `*` is
/// added on top.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntervalLevels {
    /// Equal-width intervals aligned to multiples of the width, e.g. `[5, 10, 20]`
    /// gives `[25-29]`, `[20-29]`, `[20-39]`. Each width must divide the next.
    Widths(Vec<f64>),
    /// Explicit cut points per level; each level's cuts must be a subset of the
    /// finer level's. Intervals are `[cut_i, cut_{i+1})`.
    Cuts(Vec<Vec<f64>>),
}

impl IntervalLevels {
    /// Builds the interval hierarchy over the given distinct values (sorted
    /// ascending). Leaf `i` is `values[i]`, labelled `leaf_labels[i]` (the
    /// exact value as the input holds it).
    ///
    /// # Errors
    /// [`Error::Hierarchy`] when widths are not positive or do not nest,
    /// when a value is infinite, NaN or beyond 2^53 (no exact interval
    /// bounds), or when a width cuts the column's range into more than
    /// [`MAX_INTERVALS`] intervals. The message never shows a value.
    pub fn build(&self, source: &str, values: &[f64], leaf_labels: &[String]) -> Result<Hierarchy> {
        let Some((&min, &max)) = values.first().zip(values.last()) else {
            return Err(Error::hierarchy(
                source,
                None,
                "no values to build an interval hierarchy from",
            ));
        };
        debug_assert_eq!(values.len(), leaf_labels.len());
        if values.iter().any(|v| !v.is_finite()) {
            return Err(Error::hierarchy(
                source,
                None,
                "the column holds infinite or NaN values, which no interval covers; filter them out, or generalise the column with a hierarchy file or as ranges (no `intervals`/`cuts`)",
            ));
        }
        if values
            .iter()
            .any(|v| v.abs() > crate::number::MAX_EXACT_F64_INTEGER)
        {
            return Err(Error::hierarchy(
                source,
                None,
                "the column holds values beyond 2^53, whose interval bounds cannot be computed exactly; set `type = \"categorical\"`, or use a hierarchy file",
            ));
        }
        let integral = values.iter().all(|v| v.fract() == 0.0);
        let levels: Vec<Vec<f64>> = match self {
            IntervalLevels::Widths(widths) => {
                let mut out = Vec::new();
                for (i, &w) in widths.iter().enumerate() {
                    if !(w > 0.0 && w.is_finite()) {
                        return Err(Error::hierarchy(
                            source,
                            None,
                            format!("interval width {i} must be positive"),
                        ));
                    }
                    if i > 0 {
                        let ratio = w / widths[i - 1];
                        if (ratio - ratio.round()).abs() > 1e-9 || ratio < 1.0 {
                            return Err(Error::hierarchy(
                                source,
                                None,
                                format!(
                                    "interval widths must nest: {w} is not a multiple of {}; use e.g. 5, 10, 20",
                                    widths[i - 1]
                                ),
                            ));
                        }
                    }
                    let start = (min / w).floor() * w;
                    let count = (max - start) / w + 2.0;
                    if count.is_nan() || count > MAX_INTERVALS as f64 {
                        return Err(Error::hierarchy(
                            source,
                            None,
                            format!(
                                "interval width {w} cuts the column's range into more than {MAX_INTERVALS} intervals; use wider intervals, explicit `cuts`, or remove the outliers"
                            ),
                        ));
                    }
                    let mut cuts = Vec::new();
                    let mut c = start;
                    while c <= max {
                        cuts.push(c);
                        c += w;
                    }
                    cuts.push(c);
                    out.push(cuts);
                }
                out
            }
            IntervalLevels::Cuts(levels) => {
                for (i, cuts) in levels.iter().enumerate() {
                    if cuts.windows(2).any(|w| w[0] >= w[1]) || cuts.is_empty() {
                        return Err(Error::hierarchy(
                            source,
                            None,
                            format!(
                                "cut points of level {} must be non-empty and strictly increasing",
                                i + 1
                            ),
                        ));
                    }
                    if i > 0 && !cuts.iter().all(|c| levels[i - 1].contains(c)) {
                        return Err(Error::hierarchy(
                            source,
                            None,
                            format!(
                                "cut points of level {} must be a subset of level {}'s",
                                i + 1,
                                i
                            ),
                        ));
                    }
                }
                levels.clone()
            }
        };
        let fmt = |v: f64| {
            if integral {
                format!("{}", v as i64)
            } else {
                format!("{v}")
            }
        };
        let label = |cuts: &[f64], v: f64| -> String {
            let i = cuts.partition_point(|&c| c <= v);
            if i == 0 {
                format!("<{}", fmt(cuts[0]))
            } else if i == cuts.len() {
                format!(">={}", fmt(cuts[i - 1]))
            } else if integral && cuts[i - 1].fract() == 0.0 && cuts[i].fract() == 0.0 {
                format!("[{}-{}]", fmt(cuts[i - 1]), fmt(cuts[i] - 1.0))
            } else {
                format!("[{}-{})", fmt(cuts[i - 1]), fmt(cuts[i]))
            }
        };
        let paths = values
            .iter()
            .zip(leaf_labels)
            .map(|(&v, leaf)| {
                let mut path = vec![leaf.clone()];
                path.extend(levels.iter().map(|cuts| label(cuts, v)));
                path.push("*".to_string());
                path
            })
            .collect();
        Hierarchy::from_paths(source, paths, None, false)
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

    #[test]
    fn errors_name_file_and_line() {
        let err = Hierarchy::from_csv("h.csv", "a;x;*\nb;*\n", ';')
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("h.csv")
                && err.contains("line 2")
                && err.contains("same number of levels"),
            "{err}"
        );
        let err = Hierarchy::from_csv("h.csv", "a;x;*\na;x;*\n", ';')
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("more than once"),
            "{err}"
        );
        let err = Hierarchy::from_csv("h.csv", "a;x;*\nb;y;*\n\nc;x;R\n", ';')
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 4") && err.contains("one root"), "{err}");
        let err = Hierarchy::from_csv("h.csv", "a;x;p;*\nb;x;q;*\n", ';')
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("two different parents"),
            "{err}"
        );
        let err = Hierarchy::from_csv("h.csv", "", ';')
            .unwrap_err()
            .to_string();
        assert!(err.contains("empty"), "{err}");
        let err = Hierarchy::from_csv("h.csv", "a,*\n", ';')
            .unwrap_err()
            .to_string();
        assert!(err.contains("delimiter"), "{err}");
        let err = Hierarchy::from_csv("h.csv", "a;;*\n", ';')
            .unwrap_err()
            .to_string();
        assert!(err.contains("empty"), "{err}");
    }

    fn labels_of(values: &[f64]) -> Vec<String> {
        values
            .iter()
            .map(|&v| crate::number::format_float(v))
            .collect()
    }

    #[test]
    fn intervals_from_widths() {
        let values: Vec<f64> = vec![17.0, 23.0, 25.0, 29.0, 30.0, 90.0];
        let h = IntervalLevels::Widths(vec![5.0, 10.0, 20.0])
            .build("age", &values, &labels_of(&values))
            .unwrap();
        assert_eq!(h.height(), 4);
        let l25 = h.leaf("25").unwrap();
        assert_eq!(h.label(h.ancestor(l25, Level(1))), "[25-29]");
        assert_eq!(h.label(h.ancestor(l25, Level(2))), "[20-29]");
        assert_eq!(h.label(h.ancestor(l25, Level(3))), "[20-39]");
        assert_eq!(h.label(h.ancestor(l25, Level(4))), "*");
        let l30 = h.leaf("30").unwrap();
        assert_eq!(h.label(h.lca(l25, l30)), "[20-39]");
        assert!(IntervalLevels::Widths(vec![5.0, 7.0])
            .build("age", &values, &labels_of(&values))
            .is_err());
    }

    #[test]
    fn interval_building_ends_with_an_error_on_inf_nan_huge_and_absurd_values() {
        for values in [
            vec![1.0, f64::INFINITY],
            vec![1.0, f64::NAN],
            vec![1.0, 2f64.powi(60)],
            vec![0.0, 1e15],
        ] {
            let err = IntervalLevels::Widths(vec![5.0])
                .build("x", &values, &labels_of(&values))
                .unwrap_err()
                .to_string();
            assert!(err.contains("x"), "{err}");
            assert!(!err.contains("1000000000000000"), "no value: {err}");
        }
    }

    #[test]
    fn intervals_from_cuts() {
        let values = vec![10.0, 20.0, 40.0, 70.0];
        let h = IntervalLevels::Cuts(vec![vec![18.0, 30.0, 65.0], vec![30.0]])
            .build("age", &values, &labels_of(&values))
            .unwrap();
        let l = |s| h.leaf(s).unwrap();
        assert_eq!(h.label(h.ancestor(l("10"), Level(1))), "<18");
        assert_eq!(h.label(h.ancestor(l("20"), Level(1))), "[18-29]");
        assert_eq!(h.label(h.ancestor(l("70"), Level(1))), ">=65");
        assert_eq!(h.label(h.ancestor(l("20"), Level(2))), "<30");
        assert!(IntervalLevels::Cuts(vec![vec![18.0, 30.0], vec![25.0]])
            .build("age", &values, &labels_of(&values))
            .is_err());
    }

    #[test]
    fn masking() {
        let v: Vec<String> = ["4351", "4350", "4362"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let h = Hierarchy::masking("zip", &v, '*').unwrap();
        assert_eq!(h.height(), 4);
        let a = h.leaf("4351").unwrap();
        let b = h.leaf("4350").unwrap();
        let c = h.leaf("4362").unwrap();
        assert_eq!(h.label(h.lca(a, b)), "435*");
        assert_eq!(h.label(h.lca(a, c)), "43**");
        assert!(Hierarchy::masking("zip", &["1".into(), "22".into()], '*').is_err());
    }
}
