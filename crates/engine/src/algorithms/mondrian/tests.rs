//! The counting cuts against the comparison-sort cuts they replaced:
//! the same boundaries, parts and rows, cut by cut and over whole runs,
//! so releases stay byte-identical.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;

use super::*;
use crate::hierarchy::Hierarchy;
use crate::privacy::{DistinctLDiversity, EntropyLDiversity};
use crate::spec::JobSpec;

/// The sort-based cuts as they were before counting (reference only).
mod reference {
    use super::*;

    pub fn try_cut(cutter: &Cutter<'_>, rows: &mut [u32], q: usize) -> Option<Cut> {
        if cutter.by_children(&cutter.table.columns()[q]) {
            cut_by_children(cutter, rows, q)
        } else {
            cut_at_median(cutter, rows, q)
        }
    }

    fn cut_at_median(cutter: &Cutter<'_>, rows: &mut [u32], q: usize) -> Option<Cut> {
        let mut boundaries =
            with_codes!(cutter.table.columns()[q].codes(), |c| sort_by_code(rows, c))?;
        let n = rows.len();
        let mid = n / 2;
        boundaries.sort_by_key(|&b| (b.abs_diff(mid), b));
        for b in boundaries {
            let (left, right) = rows.split_at(b);
            if cutter.accepts(left) && cutter.accepts(right) {
                return Some(Cut {
                    parts: vec![b, n - b],
                    relaxed: false,
                });
            }
        }
        if cutter.params.relaxed {
            let (left, right) = rows.split_at(mid);
            if cutter.accepts(left) && cutter.accepts(right) {
                return Some(Cut {
                    parts: vec![mid, n - mid],
                    relaxed: true,
                });
            }
        }
        None
    }

    fn cut_by_children(cutter: &Cutter<'_>, rows: &mut [u32], q: usize) -> Option<Cut> {
        let col = &cutter.table.columns()[q];
        let h = col.hierarchy()?;
        let codes = col.codes();
        let (lo, hi) = with_codes!(codes, |c| min_max(rows, c));
        let node = h.lca(NodeId(lo), NodeId(hi));
        let starts: Vec<u32> = h.children(node).map(|c| h.leaves(c).start).collect();
        if starts.len() < 2 {
            return None;
        }
        let runs = with_codes!(codes, |c| runs_by_child(rows, c, &starts));
        let (big, small): (Vec<_>, Vec<_>) = runs
            .iter()
            .partition(|&&(a, b)| cutter.accepts(&rows[a..b]));
        let mut groups: Vec<Vec<(usize, usize)>> = big.into_iter().map(|r| vec![r]).collect();
        if !small.is_empty() {
            let pool: Vec<u32> = small
                .iter()
                .flat_map(|&(a, b)| rows[a..b].iter().copied())
                .collect();
            if cutter.accepts(&pool) {
                groups.push(small);
            } else {
                let size = |g: &Vec<(usize, usize)>| g.iter().map(|(a, b)| b - a).sum::<usize>();
                let smallest = (0..groups.len()).min_by_key(|&i| (size(&groups[i]), i))?;
                groups[smallest].extend(small);
                let merged: Vec<u32> = groups[smallest]
                    .iter()
                    .flat_map(|&(a, b)| rows[a..b].iter().copied())
                    .collect();
                if !cutter.accepts(&merged) {
                    return None;
                }
            }
        }
        if groups.len() < 2 {
            return None;
        }
        let reordered: Vec<u32> = groups
            .iter()
            .flat_map(|g| g.iter().flat_map(|&(a, b)| rows[a..b].iter().copied()))
            .collect();
        rows.copy_from_slice(&reordered);
        Some(Cut {
            parts: groups
                .iter()
                .map(|g| g.iter().map(|(a, b)| b - a).sum())
                .collect(),
            relaxed: false,
        })
    }

    fn sort_by_code<T: Code>(rows: &mut [u32], codes: &[T]) -> Option<Vec<usize>> {
        rows.sort_unstable_by_key(|&r| (codes[r as usize], r));
        let n = rows.len();
        if codes[rows[0] as usize] == codes[rows[n - 1] as usize] {
            return None;
        }
        Some(
            (1..n)
                .filter(|&i| codes[rows[i] as usize] != codes[rows[i - 1] as usize])
                .collect(),
        )
    }

    fn runs_by_child<T: Code>(
        rows: &mut [u32],
        codes: &[T],
        starts: &[u32],
    ) -> Vec<(usize, usize)> {
        let child_of = |r: u32| starts.partition_point(|&s| s <= codes[r as usize].into()) - 1;
        rows.sort_unstable_by_key(|&r| (child_of(r), r));
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut s = 0;
        for i in 1..=rows.len() {
            if i == rows.len() || child_of(rows[i]) != child_of(rows[i - 1]) {
                runs.push((s, i));
                s = i;
            }
        }
        runs
    }

    /// `Cutter::best_cut` with the reference cuts.
    fn best_cut(cutter: &Cutter<'_>, rows: &mut [u32]) -> Option<Cut> {
        let n_qi = cutter.table.n_qi();
        let mut widths: Vec<(f64, usize)> = (0..n_qi)
            .map(|q| (cutter.width(rows, q), q))
            .filter(|(w, _)| *w > 0.0)
            .collect();
        widths.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        match cutter.params.cut {
            CutChoice::GainPerBit => unreachable!("the reference predates the per-bit cut"),
            CutChoice::Widest => widths
                .into_iter()
                .find_map(|(_, q)| try_cut(cutter, rows, q)),
            CutChoice::LeastLoss => {
                let mut best: Option<(f64, usize)> = None;
                for &(_, q) in &widths {
                    if let Some(cut) = try_cut(cutter, rows, q) {
                        let mut loss = 0.0;
                        let mut s = 0;
                        for len in cut.parts {
                            let part = &rows[s..s + len];
                            loss += (0..n_qi).map(|c| cutter.column_loss(part, c)).sum::<f64>()
                                * len as f64;
                            s += len;
                        }
                        if best.is_none_or(|(b, _)| loss < b - 1e-9) {
                            best = Some((loss, q));
                        }
                    }
                }
                let (_, q) = best?;
                try_cut(cutter, rows, q)
            }
        }
    }

    /// `Cutter::split` with the reference cuts, on one thread.
    pub fn split(cutter: &Cutter<'_>, rows: &mut [u32]) -> Vec<(usize, usize)> {
        let Some(cut) = best_cut(cutter, rows) else {
            return vec![(0, rows.len())];
        };
        let mut out = Vec::new();
        let mut offset = 0;
        for len in cut.parts {
            let part = &mut rows[offset..offset + len];
            out.extend(shift(split(cutter, part), offset));
            offset += len;
        }
        out
    }
}

/// Leaves `c0..c{n}` under groups of three, under halves, under `*`.
fn hierarchy(n: usize) -> Arc<Hierarchy> {
    let csv: String = (0..n)
        .map(|i| format!("c{i};g{};h{};*\n", i / 3, i / 6))
        .collect();
    Arc::new(Hierarchy::from_csv("h.csv", &csv, ';').unwrap())
}

/// A random table: numeric QIs with and without intervals, a categorical
/// QI without and two with a hierarchy, skewed so that some hierarchy
/// children are rare, and a sensitive column.
fn random_table(rng: &mut ChaCha8Rng, n: usize, numeric: &str) -> QiTable {
    let spec: JobSpec = serde_json::from_str(&format!(
        r#"{{"attributes": [
            {{"name": "age", "role": "qi", "type": "numeric", "intervals": [5, 10]}},
            {{"name": "zip", "role": "qi", "type": "numeric"}},
            {{"name": "job", "role": "qi"}},
            {{"name": "city", "role": "qi", "hierarchy": "city.csv"}},
            {{"name": "land", "role": "qi", "hierarchy": "land.csv"}},
            {{"name": "disease", "role": "sensitive"}}],
           "algorithm": {{"name": "mondrian", "params": {{"numeric": "{numeric}"}}}}}}"#
    ))
    .unwrap();
    let hierarchies: FxHashMap<String, Arc<Hierarchy>> = [
        ("city.csv".to_string(), hierarchy(14)),
        ("land.csv".to_string(), hierarchy(5)),
    ]
    .into_iter()
    .collect();
    let ages = rng.gen_range(2..60);
    let ages = if rng.gen_bool(0.5) {
        ages
    } else {
        ages % 4 + 1
    };
    let jobs = rng.gen_range(2..9);
    let mut cols: Vec<Vec<String>> = vec![Vec::new(); 6];
    for _ in 0..n {
        let skewed = |rng: &mut ChaCha8Rng, d: usize| {
            let x: f64 = rng.gen();
            ((x * x * x) * d as f64) as usize
        };
        cols[0].push((17 + skewed(rng, ages)).to_string());
        cols[1].push((10_000 + skewed(rng, 40) * 7).to_string());
        cols[2].push(format!("job{}", skewed(rng, jobs)));
        cols[3].push(format!("c{}", skewed(rng, 14)));
        cols[4].push(format!("c{}", rng.gen_range(0..5)));
        cols[5].push(format!("d{}", skewed(rng, 6)));
    }
    let names = ["age", "zip", "job", "city", "land", "disease"];
    let columns: Vec<(&str, Vec<&str>)> = names
        .iter()
        .zip(&cols)
        .map(|(n, c)| (*n, c.iter().map(String::as_str).collect()))
        .collect();
    QiTable::from_string_columns(&spec, &hierarchies, &columns).unwrap()
}

/// k up to 11, or (for many relaxed cuts) up to half the rows.
fn privacy(rng: &mut ChaCha8Rng, n: usize) -> Privacy {
    let k = if rng.gen_bool(0.5) {
        rng.gen_range(1..12)
    } else {
        rng.gen_range(1..=n / 2 + 1)
    };
    let column = "disease".to_string();
    match rng.gen_range(0..3) {
        0 => Privacy::k_anonymity(k),
        1 => Privacy::k_anonymity(k).with_model(Box::new(DistinctLDiversity {
            column,
            l: rng.gen_range(2..4),
        })),
        _ => Privacy::k_anonymity(k).with_model(Box::new(EntropyLDiversity {
            column,
            l: rng.gen_range(2..4),
        })),
    }
}

fn params(rng: &mut ChaCha8Rng) -> MondrianParams {
    MondrianParams {
        cut: if rng.gen_bool(0.5) {
            CutChoice::LeastLoss
        } else {
            CutChoice::Widest
        },
        relaxed: rng.gen_bool(0.5),
        numeric: if rng.gen_bool(0.5) {
            NumericCells::Ranges
        } else {
            NumericCells::Hierarchy
        },
        top_up: false,
        tidy: false,
        residue: false,
    }
}

fn cutter<'a>(table: &'a QiTable, privacy: &'a Privacy, params: &'a MondrianParams) -> Cutter<'a> {
    Cutter {
        table,
        privacy,
        params,
        cuts: AtomicUsize::new(0),
        relaxed_cuts: AtomicUsize::new(0),
        cancel: crate::cancel::Cancellation::never(),
        stop_at: 0,
    }
}

/// The parts of a cut as sets of rows.
fn parts(rows: &[u32], cut: &Cut) -> Vec<Vec<u32>> {
    let mut s = 0;
    cut.parts
        .iter()
        .map(|&len| {
            let mut part = rows[s..s + len].to_vec();
            part.sort_unstable();
            s += len;
            part
        })
        .collect()
}

fn regions(rows: &[u32], regions: &[(usize, usize)]) -> Vec<Vec<u32>> {
    regions
        .iter()
        .map(|&(a, b)| {
            let mut r = rows[a..b].to_vec();
            r.sort_unstable();
            r
        })
        .collect()
}

#[test]
fn every_cut_matches_the_sorting_cut() {
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let (mut cuts, mut relaxed, mut children) = (0, 0, 0);
    for case in 0..1000 {
        let params = params(&mut rng);
        let numeric = if params.numeric == NumericCells::Hierarchy {
            "hierarchy"
        } else {
            "ranges"
        };
        let n = rng.gen_range(2..300);
        let table = random_table(&mut rng, n, numeric);
        let privacy = privacy(&mut rng, n);
        let cutter = cutter(&table, &privacy, &params);
        for _ in 0..5 {
            // A region: some rows in a shuffled order.
            let mut rows: Vec<u32> = (0..n as u32).filter(|_| rng.gen_bool(0.7)).collect();
            if rows.len() < 2 {
                continue;
            }
            for i in (1..rows.len()).rev() {
                rows.swap(i, rng.gen_range(0..=i));
            }
            for q in 0..table.n_qi() {
                let mut old = rows.clone();
                let mut new = rows.clone();
                let want = reference::try_cut(&cutter, &mut old, q);
                let got = cutter.try_cut(&mut new, q);
                match (want, got) {
                    (None, None) => {}
                    (Some(w), Some(g)) => {
                        assert_eq!(w.parts, g.parts, "case {case}, QI {q}");
                        assert_eq!(w.relaxed, g.relaxed, "case {case}, QI {q}");
                        assert_eq!(parts(&old, &w), parts(&new, &g), "case {case}, QI {q}");
                        cuts += 1;
                        relaxed += g.relaxed as usize;
                        children += g.parts.len().saturating_sub(2).min(1);
                    }
                    (w, g) => panic!(
                        "case {case}, QI {q}: reference {:?}, counting {:?}",
                        w.map(|c| c.parts),
                        g.map(|c| c.parts)
                    ),
                }
            }
        }
    }
    // The cases reach every kind of cut.
    assert!(
        cuts > 1000 && relaxed > 100 && children > 100,
        "{cuts} {relaxed} {children}"
    );
}

#[test]
fn whole_runs_match_the_sorting_cuts() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for case in 0..150 {
        let params = params(&mut rng);
        let numeric = if params.numeric == NumericCells::Hierarchy {
            "hierarchy"
        } else {
            "ranges"
        };
        let n = rng.gen_range(2..6000);
        let table = random_table(&mut rng, n, numeric);
        let privacy = privacy(&mut rng, n);
        let cutter = cutter(&table, &privacy, &params);
        let mut rows: Vec<u32> = (0..n as u32).collect();
        if !cutter.accepts(&rows) {
            continue;
        }
        let mut old = rows.clone();
        let want = reference::split(&cutter, &mut old);
        let got = cutter.split(&mut rows);
        assert_eq!(regions(&old, &want), regions(&rows, &got), "case {case}");
    }
}
