//! Hand-written inline SVG charts of the report: horizontal bars (one or
//! more series), an unlabelled rank-frequency shape and a heatmap. No
//! script, no external resource: each chart is one `<svg>` element sized by
//! its `viewBox`, readable in any browser and printable.

use std::fmt::Write;

use super::data::{Bar, Heatmap};

/// Escapes text for HTML and SVG (element content and quoted attributes).
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A count with thousands separated by commas.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `s` cut to `max` characters, with an ellipsis when cut.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// One series of a bar chart.
pub(crate) struct Series<'a> {
    pub(crate) name: &'a str,
    pub(crate) colour: &'a str,
    pub(crate) values: Vec<u64>,
}

/// Width of every chart, in SVG units (CSS scales it down on narrow pages).
const WIDTH: f64 = 520.0;
/// Left margin holding the category labels.
const LABEL_W: f64 = 150.0;
/// Right margin holding the values.
const VALUE_W: f64 = 70.0;
/// Height of one bar.
const BAR_H: f64 = 14.0;

/// Horizontal bars, one group per category with a bar per series, a legend
/// when there is more than one series. `title` is the accessible name.
pub(crate) fn bars(title: &str, categories: &[String], series: &[Series]) -> String {
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let legend_h = if series.len() > 1 { 22.0 } else { 0.0 };
    let group_h = BAR_H * series.len() as f64 + 6.0;
    let height = legend_h + group_h * categories.len() as f64 + 4.0;
    let plot_w = WIDTH - LABEL_W - VALUE_W;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    if series.len() > 1 {
        let mut x = LABEL_W;
        for se in series {
            let _ = write!(
                s,
                r#"<rect x="{x}" y="4" width="12" height="12" fill="{}"/><text x="{}" y="14" class="legend">{}</text>"#,
                se.colour,
                x + 16.0,
                esc(se.name)
            );
            x += 24.0 + 7.0 * se.name.len() as f64;
        }
    }
    for (i, cat) in categories.iter().enumerate() {
        let y0 = legend_h + group_h * i as f64;
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" class="cat" text-anchor="end">{}</text>"#,
            LABEL_W - 6.0,
            y0 + group_h / 2.0 + 1.0,
            esc(&clip(cat, 24))
        );
        for (j, se) in series.iter().enumerate() {
            let v = se.values.get(i).copied().unwrap_or(0);
            let w = if v == 0 {
                0.0
            } else {
                (plot_w * v as f64 / max).max(1.5)
            };
            let y = y0 + BAR_H * j as f64;
            let _ = write!(
                s,
                r#"<rect class="bar" x="{LABEL_W}" y="{y}" width="{w:.1}" height="{}" fill="{}"><title>{}: {}</title></rect><text x="{:.1}" y="{}" class="val">{}</text>"#,
                BAR_H - 2.0,
                se.colour,
                esc(se.name),
                count(v),
                LABEL_W + w + 4.0,
                y + BAR_H - 4.0,
                count(v)
            );
        }
    }
    let _ = write!(
        s,
        r##"<line x1="{LABEL_W}" y1="{legend_h}" x2="{LABEL_W}" y2="{}" stroke="#555"/></svg>"##,
        height - 2.0
    );
    s
}

/// Horizontal bars of one series.
pub(crate) fn bar_list(title: &str, bars_: &[Bar], colour: &str) -> String {
    let categories: Vec<String> = bars_.iter().map(|b| b.label.clone()).collect();
    bars(
        title,
        &categories,
        &[Series {
            name: "records",
            colour,
            values: bars_.iter().map(|b| b.count).collect(),
        }],
    )
}

/// Height of the rank-frequency shape.
const SHAPE_H: f64 = 90.0;

/// The frequencies of a column's distinct values, most frequent first, as
/// unlabelled columns: the shape of a distribution without its values.
pub(crate) fn shape(title: &str, frequencies: &[u64], colour: &str) -> String {
    let max = frequencies.iter().copied().max().unwrap_or(0).max(1) as f64;
    let n = frequencies.len().max(1) as f64;
    let w = 260.0;
    let step = w / n;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart shape" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{t}"><title>{t}</title>"#,
        h = SHAPE_H + 2.0,
        t = esc(title)
    );
    for (i, &f) in frequencies.iter().enumerate() {
        let bh = (SHAPE_H * f as f64 / max).max(1.0);
        let _ = write!(
            s,
            r#"<rect class="bar" x="{:.2}" y="{:.2}" width="{:.2}" height="{bh:.2}" fill="{colour}"/>"#,
            step * i as f64,
            SHAPE_H - bh,
            (step * 0.85).max(0.8)
        );
    }
    let _ = write!(
        s,
        r##"<line x1="0" y1="{SHAPE_H}" x2="{w}" y2="{SHAPE_H}" stroke="#555"/></svg>"##
    );
    s
}

/// The colour of an NCP between 0 (kept, pale) and 1 (suppressed, dark).
fn heat(ncp: f64) -> String {
    let t = ncp.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(247.0, 166.0),
        mix(244.0, 54.0),
        mix(235.0, 3.0)
    )
}

/// The heatmap: a row per class, a column per QI, each cell coloured by its
/// NCP and showing its published label.
pub(crate) fn heatmap(title: &str, h: &Heatmap) -> String {
    let (cell_w, cell_h, head_h, left) = (112.0, 18.0, 20.0, 70.0);
    let width = left + cell_w * h.attributes.len() as f64;
    let height = head_h + cell_h * h.rows.len() as f64 + 2.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart heatmap" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    for (j, a) in h.attributes.iter().enumerate() {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="14" class="head" text-anchor="middle">{}</text>"#,
            left + cell_w * (j as f64 + 0.5),
            esc(&clip(a, 16))
        );
    }
    for (i, row) in h.rows.iter().enumerate() {
        let y = head_h + cell_h * i as f64;
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.1}" class="cat" text-anchor="end">{} rows</text>"#,
            left - 6.0,
            y + cell_h - 5.0,
            count(row.size as u64)
        );
        for (j, (label, ncp)) in row.cells.iter().enumerate() {
            let x = left + cell_w * j as f64;
            let fg = if *ncp > 0.55 { "#fff" } else { "#222" };
            let _ = write!(
                s,
                r##"<rect class="cell" x="{x:.1}" y="{y:.1}" width="{}" height="{}" fill="{}" stroke="#fff"><title>{}: {} (NCP {ncp:.2})</title></rect><text x="{:.1}" y="{:.1}" class="cell" fill="{fg}" text-anchor="middle">{}</text>"##,
                cell_w - 1.0,
                cell_h - 1.0,
                heat(*ncp),
                esc(&h.attributes[j]),
                esc(label),
                x + cell_w / 2.0,
                y + cell_h - 5.0,
                esc(&clip(label, 16))
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// The heatmap's colour scale, from NCP 0 to 1.
pub(crate) fn heat_legend() -> String {
    let mut s = String::from(
        r#"<svg class="chart legend" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 300 30" width="300" height="30" role="img" aria-label="colour scale: NCP from 0 to 1"><title>colour scale: NCP from 0 to 1</title>"#,
    );
    for i in 0..20 {
        let _ = write!(
            s,
            r#"<rect x="{}" y="2" width="10" height="12" fill="{}"/>"#,
            30 + i * 10,
            heat(i as f64 / 19.0)
        );
    }
    s.push_str(r#"<text x="24" y="12" class="cat" text-anchor="end">NCP 0</text><text x="236" y="12" class="cat">1 (suppressed)</text><text x="30" y="27" class="legend">exact value</text><text x="230" y="27" class="legend" text-anchor="end">whole domain</text></svg>"#);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_counts_grouped() {
        let svg = bar_list(
            "t",
            &[Bar {
                label: "<=50K & \"more\"".into(),
                count: 1234567,
            }],
            "#123",
        );
        assert!(svg.contains("&lt;=50K &amp; &quot;more&quot;"), "{svg}");
        assert!(svg.contains(">1,234,567<"), "{svg}");
        assert!(!svg.contains("<=50K"));
    }

    #[test]
    fn the_heat_scale_runs_from_pale_to_dark() {
        assert_eq!(heat(0.0), "#f7f4eb");
        assert_eq!(heat(1.0), "#a63603");
    }
}
