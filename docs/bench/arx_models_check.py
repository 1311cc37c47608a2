#!/usr/bin/env python3
"""Check a release (ARX ';' CSV or kanon parquet) against the models' definitions from the published labels.

  arx_models_check.py RELEASE MODEL [k']                  the five privacy models (k' for k-map)
  arx_models_check.py RELEASE differential-privacy K       the release part of SafePub: every class
      (by published labels) at least the derived K; rows published and suppressed (a kanon release
      omits the rows its sample left out and the suppressed ones; ARX publishes them as '*')
  arx_models_check.py RELEASE top-bottom-coding --original ADULT_CSV [--normalized OUT_CSV]
      k by labels, published age labels beyond the codes (80/20, as kanon verify reads them); with
      --normalized, writes the release with open-ended age labels (>=80, <25, <=20) as closed
      intervals over the input's ages ([80-90], [17-25), [17-20]) for the peers kit's granularity.py,
      which reads only closed or half-open intervals
  arx_models_check.py RELEASE microaggregation --original ADULT_CSV
      error of the published age against the input: SSE, mean absolute error, SSE/SST; whether
      each class (by published labels) publishes its mean. Rows are matched by position for an
      ARX release (ARX keeps the input's order; checked on salary-class) and by `row_id` for a
      kanon release made with --with-id
  arx_models_check.py RELEASE cell-suppression            suppressed cells ('*' outside the QIs
      generalised to their root '*' everywhere) per QI, rows with any / all QIs '*', classes by
      labels ('*' a value of its own)
  arx_models_check.py RELEASE delta-presence --original ADULT_CSV --hier-dir DIR [--k K --dmin A --dmax B]
      per class (by published labels; all-'*' rows are suppressed and left out) its research records r
      and the records p of the population ADULT_CSV whose values it covers, every label one of the
      value's ancestors in DIR/adult_hierarchy_<qi>.csv ('*' covers all): the range of r/p and the
      classes with r < K or r/p outside [A, B] (defaults 5, 0.05, 0.5: configs/adult-delta-presence.toml);
      population records covered by two classes are counted apart; with STUDY_ROWS=N in the environment,
      also the share of suppressed research records (N - published) among the population no class covers
  arx_models_check.py --with-id CONFIG OUT_DIR            a copy of the kanon job CONFIG whose input
      (OUT_DIR/adult-id.parquet) has a pass-through `row_id` column (insensitive) and whose output
      is OUT_DIR/<job>-id.parquet, to match kanon's reordered release to the input
"""
import sys, math, os, re
import pandas as pd
QI = ["age","sex","race","marital-status","education","native-country","workclass","occupation"]
S = "salary-class"; SUPP = {"*", "", "nan", "None"}
def read(p):
    if p.endswith(".parquet"): return pd.read_parquet(p).astype(str)
    return pd.read_csv(p, sep=";", dtype=str, keep_default_na=False)
def check(path, model, kprime=None):
    d = read(path)
    supp = d[QI].isin(SUPP).all(axis=1)
    pub = d[~supp]
    sizes = pub.groupby(QI, observed=True).size()
    n = len(pub); out = {"rows": len(d), "suppressed": int(supp.sum()), "classes": len(sizes), "min_class": int(sizes.min())}
    if model == "differential-privacy":
        out["ok"] = out["min_class"] >= kprime
    elif model in ("k-map", "average-risk", "population-uniqueness"):
        out["mean_risk"] = round(len(sizes) / n, 5)
        out["share_in_classes_lt5"] = round(float(sizes[sizes < 5].sum()) / n, 5)
        out["sample_uniques"] = int((sizes == 1).sum())
        if model == "average-risk":
            out["ok"] = out["mean_risk"] <= 0.05 and out["share_in_classes_lt5"] <= 0.02
        if model == "k-map":
            out["ok"] = out["min_class"] >= kprime
    else:
        q = d[S].value_counts(normalize=True)          # the release's overall distribution
        vals = list(q.index)
        worst_arx = worst_kanon = 0.0; bad_arx = bad_kanon = 0; missing = 0
        for key, g in pub.groupby(QI, observed=True):
            p = g[S].value_counts(normalize=True)
            if model == "beta-likeness":
                worst = 0.0; ok = True
                for v in vals:
                    pv = p.get(v, 0.0)
                    if pv > q[v]:
                        r = (pv - q[v]) / q[v] / min(1.0, -math.log(q[v]))   # gain / bound
                        worst = max(worst, r); ok &= r <= 1 + 1e-12
                # absent values (p = 0 < q) never violate: both readings coincide
                worst_arx = max(worst_arx, worst); worst_kanon = worst_arx
                bad_arx += not ok; bad_kanon += not ok
            else:
                vals_c = [v for v in vals if p.get(v, 0.0) > 0]
                a = max(abs(math.log2(p[v] / q[v])) for v in vals_c)
                worst_arx = max(worst_arx, a); bad_arx += not (a < 1.2)
                if len(vals_c) < len(vals):
                    missing += 1; bad_kanon += 1; worst_kanon = math.inf
                else:
                    worst_kanon = max(worst_kanon, a); bad_kanon += not (a < 1.2)
        out["q"] = {k: round(v, 4) for k, v in q.items()}
        out["k10_ok"] = out["min_class"] >= 10
        if model == "beta-likeness":
            out["max_gain_over_bound"] = round(worst_arx, 7)
        else:
            out["max_abs_log2_present_values"] = round(worst_arx, 7)
            out["classes_missing_a_value"] = missing
        out["violating_classes_arx_reading"] = bad_arx
        out["violating_classes_kanon_reading"] = bad_kanon
    return out

TOP, BOTTOM = 80, 20           # configs/adult-top-bottom-coding.toml
def numbers_in(label):
    """The numbers a published age label shows, as kanon's verifier reads them (crates/engine/src/coding.rs)."""
    return [float(x) for x in re.findall(r"(?<![0-9.])-?[0-9]+(?:\.[0-9]+)?|(?<=[0-9])-(?=[0-9])", label) if x != "-"]
def classes(d):
    sizes = d.groupby(QI, observed=True).size()
    return {"classes": len(sizes), "min_class": int(sizes.min()), "k10_ok": bool(sizes.min() >= 10)}
def original_ages(path):
    return pd.read_csv(path, sep=";", dtype=str, keep_default_na=False)["age"].astype(int)
def top_bottom(path, original, normalized=None):
    d = read(path); ages = original_ages(original)
    lo, hi = int(ages.min()), int(ages.max())
    supp = d[QI].isin(SUPP).all(axis=1)
    out = {"rows": len(d), "suppressed": int(supp.sum())}
    out.update(classes(d[~supp]))
    labels = d["age"].value_counts()
    beyond = {l: int(c) for l, c in labels.items() if any(v > TOP or v < BOTTOM for v in numbers_in(l))}
    out["rows_beyond_codes"] = sum(beyond.values()); out["labels_beyond_codes"] = sorted(beyond)[:10]
    out["age_labels"] = len(labels)
    out["open_ended_rows"] = int(d["age"].str.match(r"^(<|>)").sum())
    if normalized:
        def close(l):
            m = re.fullmatch(r"(>=|<=|<|>)(-?\d+)", l)
            if not m: return l
            op, v = m.group(1), int(m.group(2))
            return {">=": f"[{v}-{hi}]", ">": f"[{v + 1}-{hi}]", "<=": f"[{lo}-{v}]", "<": f"[{lo}-{v})"}[op]
        n = d.copy(); n["age"] = n["age"].map(close)
        n.to_csv(normalized, sep=";", index=False)
        out["normalized"] = normalized
    return out
def micro(path, original):
    d = read(path); o = pd.read_csv(original, sep=";", dtype=str, keep_default_na=False)
    if "row_id" in d.columns:
        d = d.assign(row_id=d["row_id"].astype(int)).set_index("row_id").sort_index()
        assert list(d.index) == list(range(len(o))), "row_id does not cover the input once"
        matched = "row_id"
    else:
        assert len(d) == len(o) and (d["salary-class"].values == o["salary-class"].values).all(), \
            "release not in the input's order"
        matched = "position"
    supp = d[QI].isin(SUPP).all(axis=1).values
    a = o["age"].astype(float).values[~supp]
    pub = pd.to_numeric(d["age"].values[~supp])
    err = a - pub
    sst = float(((a - a.mean()) ** 2).sum())
    out = {"rows": len(d), "suppressed": int(supp.sum()), "matched_by": matched}
    out.update(classes(d[~supp]))
    out.update({"sse": round(float((err ** 2).sum()), 1), "mae": round(float(abs(err).mean()), 4),
                "sst": round(sst, 1), "sse_over_sst": round(float((err ** 2).sum()) / sst, 5),
                "distinct_published_ages": int(pd.Series(pub).nunique())})
    # does each class (published labels) publish the mean of its input ages?
    g = pd.DataFrame({"k": d[~supp][QI].astype(str).agg("|".join, axis=1).values, "a": a, "p": pub})
    dev = (g.groupby("k")["a"].transform("mean") - g["p"]).abs()
    out["max_abs_dev_from_class_mean"] = round(float(dev.max()), 6)
    out["rows_dev_gt_1e-4"] = int((dev > 1e-4 + 1e-9).sum())
    return out
def cells(path):
    d = read(path)
    star = d[QI].isin(SUPP)
    supp = star.all(axis=1)
    root = [q for q in QI if star[q].all()]       # generalised to the hierarchy's root: not suppression
    cols = [q for q in QI if q not in root]
    out = {"rows": len(d), "rows_all_star": int(supp.sum()), "qis_at_root": root,
           "suppressed_cells": int(star[cols].values.sum()),
           "rows_with_suppressed_cell": int(star[cols].any(axis=1).sum()),
           "suppressed_cells_in_rows_kept": int(star[cols][~supp].values.sum()),
           "suppressed_cells_per_qi": {q: int(star[q].sum()) for q in cols if star[q].any()}}
    out.update(classes(d[~supp]))
    return out
def presence(path, original, hier_dir, k=5, dmin=0.05, dmax=0.5):
    d = read(path)
    pub = d[~d[QI].isin(SUPP).all(axis=1)]
    pop = read(original)
    up = {}
    for q in QI:
        anc = {}
        for line in open(os.path.join(hier_dir, f"adult_hierarchy_{q}.csv"), encoding="utf-8"):
            cells = line.rstrip("\r\n").split(";")
            if cells and cells[0]:
                anc[cells[0]] = set(cells) | {"*"}
        up[q] = anc
    research = pub.groupby(QI, observed=True).size()
    keys = list(research.index)
    covered = [0] * len(keys); ambiguous = 0
    # Per QI, the classes whose label covers each value.
    match = {q: {} for q in QI}
    for q_i, q in enumerate(QI):
        for v in pop[q].unique():
            match[q][v] = {i for i, key in enumerate(keys) if key[q_i] in up[q].get(v, {v, "*"})}
    for row in pop[QI].itertuples(index=False):
        hit = set.intersection(*(match[q][v] for q, v in zip(QI, row)))
        if len(hit) > 1: ambiguous += 1
        for i in hit: covered[i] += 1
    shares = [r / max(p, r) for r, p in zip(research.values, covered)]
    # The population no class covers holds the suppressed research records.
    study = int(opt_study) if (opt_study := os.environ.get("STUDY_ROWS")) else None
    unmatched = len(pop) - sum(covered) - ambiguous
    bad = sum(1 for r, p, s in zip(research.values, covered, shares) if r < k or p < r or not (dmin - 1e-12 <= s <= dmax + 1e-12))
    return {"rows": len(d), "published": len(pub), "classes": len(keys), "delta_min": round(min(shares), 4),
            "delta_max": round(max(shares), 4), "violating_classes": bad, "ambiguous_population_records": ambiguous,
            "unmatched_population_records": unmatched,
            "unmatched_share": round((study - len(pub)) / unmatched, 4) if study is not None and unmatched else None,
            "ok": bad == 0 and ambiguous == 0}
def with_id(config, out_dir):
    import tomllib
    os.makedirs(out_dir, exist_ok=True)
    job = os.path.splitext(os.path.basename(config))[0]
    with open(config, "rb") as fh: cfg = tomllib.load(fh)
    src = cfg["input"]["path"]
    t = pd.read_parquet(src)
    t.insert(0, "row_id", range(len(t)))
    data = os.path.join(os.path.abspath(out_dir), "adult-id.parquet")
    t.to_parquet(data, index=False)
    text = open(config).read()
    text = text.replace(f'path = "{src}"', f'path = "{data}"', 1)
    text = text.replace(f'path = "{cfg["output"]["path"]}"', f'path = "{os.path.join(os.path.abspath(out_dir), job + "-id.parquet")}"', 1)
    text += '\n[[attributes]]\nname = "row_id"\nrole = "insensitive"\n'
    cfg_out = os.path.join(out_dir, job + "-id.toml")
    open(cfg_out, "w").write(text)
    print(cfg_out)
if __name__ == "__main__":
    a = sys.argv[1:]
    opt = lambda name: a[a.index(name) + 1] if name in a else None
    if a[0] == "--with-id":
        with_id(a[1], a[2])
    elif a[1] == "top-bottom-coding":
        print(a[0], top_bottom(a[0], opt("--original"), opt("--normalized")))
    elif a[1] == "microaggregation":
        print(a[0], micro(a[0], opt("--original")))
    elif a[1] == "delta-presence":
        f = lambda name, d: float(opt(name)) if opt(name) else d
        print(a[0], presence(a[0], opt("--original"), opt("--hier-dir"), int(f("--k", 5)), f("--dmin", 0.05), f("--dmax", 0.5)))
    elif a[1] == "cell-suppression":
        print(a[0], cells(a[0]))
    else:
        print(a[0], check(a[0], a[1], int(a[2]) if len(a) > 2 else None))
