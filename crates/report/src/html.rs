//! The report as one self-contained HTML page: inline CSS, inline SVG, no
//! script and no external resource, so it opens offline, prints, and can be
//! archived beside the release it signs off.

use std::fmt::Write;

use super::data::{percent, Measure, ReportData, Risk};
use super::svg::{self, count, esc, Series};

/// Colours of the "before" and "after" series.
const BEFORE: &str = "#9e9e9e";
const AFTER: &str = "#2b6cb0";

const CSS: &str = r#"
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0; background: #fafafa; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 2px solid #2b6cb0; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p.sub { color: #555; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top; border-bottom: 1px solid #eee; }
th { color: #444; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.verdict { display: inline-block; padding: 4px 12px; border-radius: 4px; font-weight: 700; }
.ok { background: #e6f4ea; color: #1e6b34; }
.bad { background: #fdecea; color: #a61b1b; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 8px 24px; }
.card { border: 1px solid #e3e3e3; border-radius: 6px; padding: 8px 12px; }
.note { color: #555; font-size: 13px; }
svg.chart { max-width: 100%; height: auto; display: block; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
svg text.legend { font-size: 11px; }
svg text.head { font-weight: 600; }
svg text.cell { font-size: 10px; }
code { font-size: 12px; background: #f3f3f3; padding: 1px 4px; border-radius: 3px; word-break: break-all; }
@media print { body { background: #fff; } main { padding: 0; } }
"#;

/// Renders the report as an HTML document.
pub(crate) fn render(r: &ReportData) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>kanon release report: {}</title><style>{CSS}</style></head><body><main>",
        esc(&r.release)
    );
    let _ = write!(
        h,
        "<h1>Release report</h1><p class=\"sub\">Release <code>{}</code>, job <code>{}</code>, kanon {}. Every value shown is a published (generalised) label or a count; no input value appears in this report.</p>",
        esc(&r.release),
        esc(&r.job.config),
        esc(&r.provenance.kanon_version)
    );
    job(&mut h, r);
    achieved(&mut h, r);
    risk(&mut h, r);
    information(&mut h, r);
    provenance(&mut h, r);
    h.push_str("</main></body></html>\n");
    h
}

fn row(h: &mut String, name: &str, value: &str) {
    let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(name), esc(value));
}

fn job(h: &mut String, r: &ReportData) {
    let j = &r.job;
    h.push_str("<h2>1. The job</h2><table>");
    row(h, "privacy models", &j.models.join("; "));
    for (name, params) in &j.other_models {
        row(h, &format!("privacy.models.{name}"), params);
    }
    row(h, "algorithm", &j.algorithm);
    row(h, "seed", &j.seed.to_string());
    row(
        h,
        "suppression limit",
        &format!("{} of the rows", percent(j.suppression_limit)),
    );
    row(
        h,
        "sensitive attributes",
        &if j.sensitive.is_empty() {
            "none".to_string()
        } else {
            j.sensitive.join(", ")
        },
    );
    h.push_str("</table><h3>Quasi-identifiers</h3><table><tr><th>attribute</th><th>generalisation</th></tr>");
    for (name, how) in &j.quasi_identifiers {
        let _ = write!(h, "<tr><td>{}</td><td>{}</td></tr>", esc(name), esc(how));
    }
    h.push_str("</table>");
}

fn opt_count(v: Option<u64>) -> String {
    v.map_or("unknown".into(), count)
}

fn achieved(h: &mut String, r: &ReportData) {
    let a = &r.achieved;
    let _ = write!(
        h,
        "<h2>2. What was achieved</h2><p><span class=\"verdict {}\">{}</span> {}</p>",
        if a.verified { "ok" } else { "bad" },
        if a.verified {
            "verified"
        } else {
            "NOT verified"
        },
        esc(&a.verification)
    );
    h.push_str(
        "<table><tr><th>rows in</th><th>published</th><th>suppressed</th><th>classes</th></tr>",
    );
    let _ = write!(
        h,
        "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr></table>",
        opt_count(a.rows_in),
        count(a.rows_published),
        opt_count(a.rows_suppressed),
        count(a.classes as u64)
    );
    if !a.requirements.is_empty() {
        h.push_str("<h3>Anonymity requirements</h3><table><tr><th>requirement</th><th>k asked</th><th>k achieved</th><th>met</th></tr>");
        for q in &a.requirements {
            let _ = write!(
                h,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                esc(&q.requirement),
                q.k,
                q.achieved_k,
                if q.achieved_k >= q.k { "yes" } else { "no" }
            );
        }
        h.push_str("</table>");
    }
    if !a.models.is_empty() {
        h.push_str("<h3>Privacy models</h3><table><tr><th>model</th><th>achieved</th></tr>");
        for m in &a.models {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td></tr>",
                esc(&m.model),
                esc(&m.achieved)
            );
        }
        h.push_str("</table>");
    }
    if !a.diversity.is_empty() {
        h.push_str("<h3>l-diversity per sensitive column</h3><table><tr><th>column</th><th>asked</th><th>distinct l achieved</th><th>entropy l achieved</th></tr>");
        for d in &a.diversity {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.3}</td></tr>",
                esc(&d.column),
                esc(d.required.as_deref().unwrap_or("not asked")),
                d.distinct_l,
                d.entropy_l
            );
        }
        h.push_str("</table>");
    }
}

fn measures(h: &mut String, rows: &[Measure]) {
    h.push_str("<table><tr><th>measure</th><th>value</th><th>meaning</th></tr>");
    for m in rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"note\">{}</td></tr>",
            esc(&m.name),
            esc(&m.value),
            esc(&m.explanation)
        );
    }
    h.push_str("</table>");
}

fn risk(h: &mut String, r: &ReportData) {
    let s = &r.risk;
    h.push_str("<h2>3. Risk before and after</h2><p class=\"note\">Before: the input's records grouped by their raw quasi-identifier values. After: the release's records grouped by their published labels. A record in a class of n records is re-identified with probability 1/n by an attacker who knows it is in the data and knows its quasi-identifiers (prosecutor risk).</p>");
    if let Some(note) = &s.before_note {
        let _ = write!(
            h,
            "<p class=\"note\"><strong>Before:</strong> {}</p>",
            esc(note)
        );
    }
    let before = s.before.as_ref();
    h.push_str("<table><tr><th></th>");
    if before.is_some() {
        h.push_str("<th>before</th>");
    }
    h.push_str("<th>after</th></tr>");
    let line = |h: &mut String, name: &str, f: &dyn Fn(&Risk) -> String| {
        let _ = write!(h, "<tr><th>{}</th>", esc(name));
        if let Some(b) = before {
            let _ = write!(h, "<td class=\"num\">{}</td>", f(b));
        }
        let _ = write!(h, "<td class=\"num\">{}</td></tr>", f(&s.after));
    };
    line(h, "records", &|x| count(x.records));
    line(h, "classes", &|x| count(x.classes as u64));
    line(h, "highest prosecutor risk", &|x| percent(x.highest_risk));
    line(h, "mean prosecutor risk", &|x| percent(x.mean_risk));
    line(h, "sample uniques (records alone in their class)", &|x| {
        count(x.sample_uniques)
    });
    line(h, "records in classes smaller than k", &|x| {
        count(x.below_k)
    });
    h.push_str("</table><div class=\"grid\">");
    let series = |pick: &dyn Fn(&Risk) -> Vec<u64>| {
        let mut v = Vec::new();
        if let Some(b) = before {
            v.push(Series {
                name: "before",
                colour: BEFORE,
                values: pick(b),
            });
        }
        v.push(Series {
            name: "after",
            colour: AFTER,
            values: pick(&s.after),
        });
        v
    };
    let labels =
        |bars: &[super::data::Bar]| bars.iter().map(|b| b.label.clone()).collect::<Vec<_>>();
    let _ = write!(
        h,
        "<div class=\"card\"><h3>Classes by size</h3>{}</div>",
        svg::bars(
            "classes by size, before and after",
            &labels(&s.after.class_sizes),
            &series(&|x| x.class_sizes.iter().map(|b| b.count).collect()),
        )
    );
    let _ = write!(
        h,
        "<div class=\"card\"><h3>Records by prosecutor risk</h3>{}</div></div>",
        svg::bars(
            "records by prosecutor-risk band, before and after",
            &labels(&s.after.bands),
            &series(&|x| x.bands.iter().map(|b| b.count).collect()),
        )
    );
    h.push_str("<h3>Further risk measures</h3>");
    measures(h, &s.further);
}

fn information(h: &mut String, r: &ReportData) {
    let i = &r.information;
    h.push_str("<h2>4. Information kept</h2><h3>Utility metrics</h3>");
    measures(h, &i.utility);
    h.push_str("<h3>Per attribute</h3><p class=\"note\">For each quasi-identifier: the published cells by generalisation step, the most frequent published labels, and the shape of the input's distribution (its distinct values' frequencies, most frequent first, without the values).</p><div class=\"grid\">");
    for a in &i.attributes {
        let _ = write!(
            h,
            "<div class=\"card\"><h3>{}</h3><p class=\"note\">mean NCP {:.3}; {} distinct published labels</p>",
            esc(&a.name),
            a.ncp,
            count(a.released_distinct as u64)
        );
        let _ = write!(
            h,
            "<p class=\"note\">cells by generalisation</p>{}",
            svg::bar_list(
                &format!("{}: published cells by generalisation step", a.name),
                &a.steps,
                "#6b8e23"
            )
        );
        let _ = write!(
            h,
            "<p class=\"note\">after: most frequent published labels</p>{}",
            svg::bar_list(
                &format!("{}: most frequent published labels", a.name),
                &a.released,
                AFTER
            )
        );
        match &a.input_shape {
            Some(f) => {
                let _ = write!(
                    h,
                    "<p class=\"note\">before: input value frequencies, ranked (first {} values)</p>{}",
                    f.len(),
                    svg::shape(
                        &format!("{}: input value frequencies, ranked, without values", a.name),
                        f,
                        BEFORE
                    )
                );
            }
            None => h.push_str("<p class=\"note\">before: input not read</p>"),
        }
        h.push_str("</div>");
    }
    h.push_str("</div>");
    let _ = write!(
        h,
        "<h3>Generalisation by class and attribute</h3><p class=\"note\">The {} largest and smallest published classes (rows), each cell its published label, coloured by the cell's NCP.</p>{}{}",
        i.heatmap.rows.len(),
        svg::heat_legend(),
        svg::heatmap("generalisation of the largest and smallest classes", &i.heatmap)
    );
}

fn provenance(h: &mut String, r: &ReportData) {
    let p = &r.provenance;
    h.push_str("<h2>5. Provenance and certificate</h2><table>");
    row(h, "kanon version", &p.kanon_version);
    if let Some(i) = &p.input {
        row(h, "input", i);
    }
    row(
        h,
        "input fingerprint",
        p.input_fingerprint.as_deref().unwrap_or("not recorded"),
    );
    row(h, "release", &r.release);
    h.push_str("</table><h3>Files</h3><table>");
    for f in &p.files {
        let _ = write!(h, "<tr><td><code>{}</code></td></tr>", esc(f));
    }
    h.push_str("</table><h3>Release metadata (<code>kanon.*</code> keys)</h3><table>");
    for (k, v) in &p.metadata {
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td><code>{}</code></td></tr>",
            esc(k),
            esc(v)
        );
    }
    h.push_str("</table>");
}
