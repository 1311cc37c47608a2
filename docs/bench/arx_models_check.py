#!/usr/bin/env python3
"""Check a release (ARX ';' CSV or kanon parquet) against the models' definitions from the published labels."""
import sys, math
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
    if model in ("k-map", "average-risk", "population-uniqueness"):
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
if __name__ == "__main__":
    print(sys.argv[1], check(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None))
