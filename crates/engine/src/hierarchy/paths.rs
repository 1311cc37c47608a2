//! Building a [`Hierarchy`] from one path per leaf
//! (`[leaf, parent, ..., root]`): the common CSV form
//! ([`Hierarchy::from_csv`], one row per leaf as ARX writes it) and the one
//! validating constructor every builder goes through
//! ([`Hierarchy::from_paths`]), which numbers leaves depth-first and builds
//! the per-level lookup tables. Errors name the file and line, and show
//! labels only when they come from a hierarchy file, never from records.

use rustc_hash::FxHashMap;

use super::Hierarchy;
use crate::error::{Error, Result};

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
        check_labels_read_one_way(
            source,
            &paths,
            &labels,
            &level,
            &first_leaf,
            &leaf_count,
            &line_of,
            &shown,
        )?;
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
}

/// Refuses a label that names different sets of leaves at different
/// levels (`Married;Single;*` beside the leaf `Single`, or `x;a;*` beside
/// `a;a;*`): a reader of a release could not tell the generalised value from
/// the leaf, so Datafly would publish every `Married` row as `Single`.
///
/// A label repeated up a chain of single children (`2;11;11;12` beside
/// `3;11;11;12`: ARX's way to keep a node for one more level, as in its
/// benchmark hierarchies) names the same leaves at every level and reads
/// one way, so it is accepted.
///
/// # Errors
/// [`Error::Hierarchy`] naming the lines where the label appears at two
/// levels.
#[allow(clippy::too_many_arguments)]
fn check_labels_read_one_way(
    source: &str,
    paths: &[Vec<String>],
    labels: &[String],
    level: &[u8],
    first_leaf: &[u32],
    leaf_count: &[u32],
    line_of: &dyn Fn(usize) -> Option<usize>,
    shown: &dyn Fn(&str) -> String,
) -> Result<()> {
    let mut first: FxHashMap<&str, usize> = FxHashMap::default();
    for (node, label) in labels.iter().enumerate() {
        let Some(&other) = first.get(label.as_str()) else {
            first.insert(label, node);
            continue;
        };
        if (first_leaf[other], leaf_count[other]) == (first_leaf[node], leaf_count[node]) {
            continue;
        }
        let (a, b) = (level[other] as usize, level[node] as usize);
        let row_with = |j: usize| {
            paths
                .iter()
                .position(|p| p[j] == *label)
                .and_then(line_of)
                .map_or_else(String::new, |l| format!("line {l}"))
        };
        return Err(Error::hierarchy(
            source,
            None,
            format!(
                "the value{} is a node at level {a} ({}) and a different node at level {b} ({}): a published label must read one way, or a generalised value would pass for a leaf; rename one of them (e.g. `{}` at level {b})",
                shown(label),
                row_with(a),
                row_with(b),
                if shown(label).is_empty() { "X (group)".to_string() } else { format!("{label} (group)") }
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Issue 32, item 6: a label that is a leaf and a group of other leaves.
    #[test]
    fn a_label_reads_one_way() {
        let err = Hierarchy::from_csv("m.csv", "Married;Single;*\nSingle;Alone;*\n", ';')
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("m.csv")
                && err.contains("`Single`")
                && err.contains("line 1")
                && err.contains("line 2")
                && err.contains("read one way"),
            "{err}"
        );
        // Its own parent, with another child: `a` at level 1 covers `x` too.
        let err = Hierarchy::from_csv("h.csv", "x;a;*\na;a;*\n", ';')
            .unwrap_err()
            .to_string();
        assert!(err.contains("`a`") && err.contains("level 0"), "{err}");
        // The root named like a leaf.
        assert!(Hierarchy::from_csv("h.csv", "*;x;*\ny;x;*\n", ';').is_err());
        // A chain of single children names the same leaves at every level
        // (ARX's benchmark hierarchies): accepted.
        let h =
            Hierarchy::from_csv("pay.csv", "2;11;11;12\n3;11;11;12\n0;13;14;12\n", ';').unwrap();
        assert_eq!(h.height(), 3);
        let h = Hierarchy::from_csv("h.csv", "a;a;*\nb;c;*\n", ';').unwrap();
        assert_eq!(h.leaf_count(), 2);
    }
}
