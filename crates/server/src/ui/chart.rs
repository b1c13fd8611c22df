//! Line charts as inline SVG, drawn here from the history series: no script and nothing
//! fetched. A gap of more than two buckets without data breaks the line; colours come from
//! the style sheet (`.s0` … `.s7`), so the same series has the same colour in the legend.

use std::fmt::Write as _;

use vantage_core::Timestamp;

use super::format::{Markup, esc};

const W: f64 = 640.0;
const H: f64 = 190.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 26.0;
/// Distinct colours in the style sheet.
pub(super) const COLOURS: usize = 8;

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Line {
    /// Legend text.
    pub label: String,
    /// Points, oldest first; `None` values are left out.
    pub points: Vec<(Timestamp, Option<f64>)>,
}

/// Something that happened, marked on a chart: an instant (`until` is `None`: a revision) or
/// a span (an outage; one still going on ends at the chart's end).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Mark {
    pub at: Timestamp,
    pub until: Option<Timestamp>,
    /// What it was (its tooltip).
    pub label: String,
}

/// What a chart shows.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Chart<'a> {
    /// Title (also the SVG's accessible name).
    pub title: &'a str,
    /// Unit after each value (`%`, `ms`).
    pub unit: &'a str,
    /// Start and end of the time axis.
    pub since: Timestamp,
    pub until: Timestamp,
    /// Bucket width, s (a larger gap breaks the line).
    pub bucket_s: i64,
    /// A fixed top of the value axis (100 for loss), else from the data.
    pub max: Option<f64>,
    pub lines: &'a [Line],
    /// Revisions (instants) and outages (spans) drawn behind the lines.
    pub marks: &'a [Mark],
}

/// A round axis top at or above `v`: 1, 2, 2.5 or 5 × 10ⁿ.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let exp = v.log10().floor();
    let base = 10f64.powf(exp);
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * base >= v {
            return m * base;
        }
    }
    10.0 * base
}

/// Grid lines of the value axis: five steps of a round top are round too (0.2, 0.4, 0.5, 1, 2
/// × 10ⁿ).
const STEPS: u32 = 5;

/// A value-axis label with as many decimals as its step needs.
fn axis_label(v: f64, step: f64, unit: &str) -> String {
    let decimals =
        if step >= 1.0 { 0 } else { usize::try_from((-step.log10().floor()) as i64).unwrap_or(0).min(3) };
    format!("{v:.decimals$} {unit}")
}

/// `HH:MM` within a day, `MM-DD` beyond (UTC).
fn time_label(t: Timestamp, span_ms: i64) -> String {
    let s = t.to_string();
    if span_ms > 2 * 86_400_000 { s[5..10].to_owned() } else { s[11..16].to_owned() }
}

impl Chart<'_> {
    /// The chart as an `<svg>` element, or a short note when there is nothing to draw.
    pub(super) fn render(&self) -> Markup {
        let values = self.lines.iter().flat_map(|l| l.points.iter().filter_map(|(_, v)| *v));
        let data_max = values.clone().fold(f64::NAN, f64::max);
        if data_max.is_nan() {
            return Markup(format!(
                "<p class=\"muted chart-empty\">{}: no data in this range yet.</p>",
                esc(self.title)
            ));
        }
        let top = self.max.unwrap_or_else(|| nice_ceiling(data_max * 1.05));
        let span = self.until.millis_since(self.since).max(1);
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let x = |t: Timestamp| LEFT + pw * (t.millis_since(self.since) as f64 / span as f64);
        let y = |v: f64| TOP + ph * (1.0 - (v / top).clamp(0.0, 1.0));
        let mut svg = String::new();
        let _ = write!(
            svg,
            "<svg class=\"chart\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{t}\"><title>{t}</title>",
            t = esc(self.title)
        );
        // Value grid and labels.
        let step = top / f64::from(STEPS);
        for i in 0..=STEPS {
            let v = step * f64::from(i);
            let gy = y(v);
            let _ = write!(
                svg,
                "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{gy:.1}\" y2=\"{gy:.1}\"/><text class=\"tick\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                W - RIGHT,
                LEFT - 6.0,
                gy + 3.5,
                esc(&axis_label(v, step, self.unit))
            );
        }
        // Time labels.
        for i in 0..=4 {
            let t = Timestamp::from_millis(self.since.millis() + span * i / 4);
            let anchor = match i {
                0 => "start",
                4 => "end",
                _ => "middle",
            };
            let _ = write!(
                svg,
                "<text class=\"tick\" x=\"{:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
                x(t),
                H - 8.0,
                esc(&time_label(t, span))
            );
        }
        // Marks behind the lines, clipped to the time axis.
        for m in self.marks {
            let x0 = x(m.at.max(self.since));
            let label = esc(&m.label);
            match m.until {
                None if m.at < self.since => {}
                None => {
                    let _ = write!(
                        svg,
                        "<line class=\"mark\" x1=\"{x0:.1}\" x2=\"{x0:.1}\" y1=\"{TOP}\" y2=\"{:.1}\"><title>{label}</title></line>",
                        TOP + ph
                    );
                }
                Some(end) => {
                    let x1 = x(end.min(self.until));
                    let _ = write!(
                        svg,
                        "<rect class=\"outage\" x=\"{x0:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{ph:.1}\"><title>{label}</title></rect>",
                        (x1 - x0).max(1.0)
                    );
                }
            }
        }
        let gap = self.bucket_s.max(1) * 2500;
        for (n, line) in self.lines.iter().enumerate() {
            let mut d = String::new();
            let mut last: Option<Timestamp> = None;
            for (t, v) in &line.points {
                let Some(v) = v else {
                    last = None;
                    continue;
                };
                let joined = last.is_some_and(|l| t.millis_since(l) <= gap);
                let _ = write!(d, "{}{:.1},{:.1}", if joined { " L" } else { " M" }, x(*t), y(*v));
                if !joined {
                    // A lone point shows as a dot (round caps on a zero-length segment).
                    d.push_str(" l0,0");
                }
                last = Some(*t);
            }
            if !d.is_empty() {
                let _ = write!(
                    svg,
                    "<path class=\"s{}\" d=\"{}\"><title>{}</title></path>",
                    n % COLOURS,
                    d.trim(),
                    esc(&line.label)
                );
            }
        }
        svg.push_str("</svg>");
        Markup(svg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_tops_and_labels_are_round() {
        assert_eq!(axis_label(0.4, 0.2, "ms"), "0.4 ms");
        assert_eq!(axis_label(40.0, 20.0, "%"), "40 %");
        assert_eq!(axis_label(0.04, 0.02, "ms"), "0.04 ms");
        assert_eq!(nice_ceiling(0.7), 1.0);
        assert_eq!(nice_ceiling(1.3), 2.0);
        assert_eq!(nice_ceiling(2.2), 2.5);
        assert_eq!(nice_ceiling(37.0), 50.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
    }

    #[test]
    fn lines_break_at_gaps_and_labels_are_escaped() {
        let t = |s: i64| Timestamp::from_secs(1_800_000_000 + s);
        let lines = [Line {
            label: "<a>".into(),
            points: vec![(t(0), Some(10.0)), (t(20), Some(20.0)), (t(200), Some(5.0)), (t(220), None)],
        }];
        let c = Chart {
            marks: &[],
            title: "Loss",
            unit: "%",
            since: t(0),
            until: t(3600),
            bucket_s: 20,
            max: Some(100.0),
            lines: &lines,
        };
        let svg = c.render().0;
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches(" M").count() + svg.matches("\"M").count(), 2, "two runs: {svg}");
        assert!(svg.contains("<title>&lt;a&gt;</title>"));
        let empty = Chart { lines: &[], ..c };
        assert!(empty.render().0.contains("no data"));
    }
}
