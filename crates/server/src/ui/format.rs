//! How values read on a page: times relative with the absolute time on hover, numbers with
//! their units, status words with a colour class, and the few labels the API gives as codes.

use std::fmt;

use vantage_core::Timestamp;

/// HTML that this module built (every text in it escaped); the templates print it as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Markup(pub String);

impl fmt::Display for Markup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl askama::filters::HtmlSafe for Markup {}

/// Escapes text for HTML content and attribute values.
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

/// `2026-11-30 04:30:45 UTC`.
pub(super) fn absolute(t: Timestamp) -> String {
    let s = t.to_string();
    format!("{} {} UTC", &s[..10], &s[11..19])
}

/// `just now`, `12 s ago`, `3 min ago`, `5 h ago`, `2 d ago`; for the future `in 3 s`, `in 4
/// min` (to the second: a countdown to a verdict is read as one).
pub(super) fn relative(t: Timestamp, now: Timestamp) -> String {
    let d = now.millis_since(t) / 1000;
    let (n, future) = if d < 0 { (-d, true) } else { (d, false) };
    if n < 5 && !future {
        return "just now".into();
    }
    let amount = match n {
        n if n < 60 => format!("{n} s"),
        n if n < 3600 => format!("{} min", n / 60),
        n if n < 86_400 => format!("{} h", n / 3600),
        n => format!("{} d", n / 86_400),
    };
    if future { format!("in {amount}") } else { format!("{amount} ago") }
}

pub(super) use vantage_core::time::span;

/// A `<time>` element: relative text, absolute on hover; the page's script keeps the relative
/// text current.
pub(super) fn time(t: Timestamp, now: Timestamp) -> Markup {
    Markup(format!("<time datetime=\"{}\" title=\"{}\">{}</time>", t, absolute(t), esc(&relative(t, now))))
}

/// An absolute time with its age beside it, for a log read after the fact (`2026-12-01
/// 20:31:07 UTC · 3 min ago`): the age alone cannot be lined up with other records.
pub(super) fn stamp(t: Timestamp, now: Timestamp) -> Markup {
    Markup(format!(
        "<span class=\"stamp\">{}</span> <span class=\"muted small\">· {}</span>",
        absolute(t),
        time(t, now)
    ))
}

/// A time, or `never`.
pub(super) fn time_or(t: Option<Timestamp>, now: Timestamp, none: &str) -> Markup {
    match t {
        Some(t) => time(t, now),
        None => Markup(format!("<span class=\"muted\">{}</span>", esc(none))),
    }
}

/// `12.3 ms`, or `—` without a value.
pub(super) fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0} ms"),
        Some(v) => format!("{v:.1} ms"),
        None => "—".into(),
    }
}

/// `0 %`, `33.3 %`. A negative zero (an empty `f64` sum is one) reads `0 %`, not `-0 %`.
pub(super) fn pct(v: f64) -> String {
    let v = v + 0.0;
    if (v - v.round()).abs() < 0.05 { format!("{v:.0} %") } else { format!("{v:.1} %") }
}

/// The node list's Metrics column: `CPU 42.5 % · Memory 25 %`.
pub(super) fn usage(u: &crate::views::NodeUsage) -> String {
    let mem = u.memory_pct.map_or_else(|| "—".to_owned(), pct);
    format!("CPU {} · Memory {mem}", pct(u.cpu_pct))
}

/// A number without needless decimals.
pub(super) fn num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 { format!("{v:.0}") } else { format!("{v:.2}") }
}

/// The colour of a status word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tone {
    /// Healthy, online, reachable.
    Good,
    /// Worth a look: on a backup, pending, held.
    Warn,
    /// Down, offline, unreachable, firing.
    Bad,
    /// Disabled, idle, no data.
    Neutral,
}

impl Tone {
    fn class(self) -> &'static str {
        match self {
            Tone::Good => "good",
            Tone::Warn => "warn",
            Tone::Bad => "bad",
            Tone::Neutral => "neutral",
        }
    }
}

/// A status word in its colour.
pub(super) fn badge(tone: Tone, text: &str) -> Markup {
    Markup(format!("<span class=\"badge {}\">{}</span>", tone.class(), esc(text)))
}

/// A prober's status (`online`, `offline`, `disabled`).
pub(super) fn prober_status(s: &str) -> Markup {
    match s {
        "online" => badge(Tone::Good, "Online"),
        "offline" => badge(Tone::Bad, "Offline"),
        "disabled" => badge(Tone::Neutral, "Disabled"),
        other => badge(Tone::Neutral, other),
    }
}

/// An address's reachability.
pub(super) fn reachability(r: Option<&str>) -> Markup {
    match r {
        Some("reachable") => badge(Tone::Good, "Reachable"),
        Some("unreachable") => badge(Tone::Bad, "Unreachable"),
        Some(other) => badge(Tone::Neutral, other),
        None => badge(Tone::Neutral, "Not evaluated"),
    }
}

/// A rule's state for a node.
pub(super) fn rule_status(s: &str) -> Markup {
    match s {
        "idle" => badge(Tone::Neutral, "Idle"),
        "pending" => badge(Tone::Warn, "Pending"),
        "active" => badge(Tone::Bad, "Active"),
        "recovering" => badge(Tone::Warn, "Recovering"),
        other => badge(Tone::Neutral, other),
    }
}

/// A mirror's verdict in its colour: live green, degraded amber, blocked red, unknown grey.
pub(super) fn verdict(v: &str) -> Markup {
    let tone = match v {
        "live" => Tone::Good,
        "degraded" => Tone::Warn,
        "blocked" => Tone::Bad,
        _ => Tone::Neutral,
    };
    badge(tone, v)
}

/// The colour of a region's status of a mirror: `error` is the prober's own trouble and
/// counts neither way, so it is grey, not red.
fn region_tone(status: &str) -> Tone {
    match status {
        "ok" => Tone::Good,
        "timeout" | "refused" | "blocked-inferred" => Tone::Bad,
        _ => Tone::Neutral,
    }
}

/// A region's status of a mirror in its colour.
pub(super) fn region_status(status: &str) -> Markup {
    badge(region_tone(status), status)
}

/// One cell of the region × mirror matrix: `ok · 42 ms · 3 s ago` in the status's colour. A
/// latency of 0 means none was measured (a timeout, say), so it is left out rather than shown
/// as an impossibly fast answer.
pub(super) fn region_cell(status: &str, latency_ms: u32, at: Timestamp, now: Timestamp) -> Markup {
    let latency = if latency_ms > 0 { format!(" · {latency_ms} ms") } else { String::new() };
    Markup(format!(
        "<span class=\"badge {}\">{}{latency} · {}</span>",
        region_tone(status).class(),
        esc(status),
        time(at, now)
    ))
}

/// A monitor's global verdict in its colour: healthy green, degraded amber, down red, and
/// unknown grey before the first probe (the API gives no verdict then).
pub(super) fn monitor_verdict(v: Option<&str>) -> Markup {
    match v {
        Some("healthy") => badge(Tone::Good, "healthy"),
        Some("degraded") => badge(Tone::Warn, "degraded"),
        Some("down") => badge(Tone::Bad, "down"),
        Some(other) => badge(Tone::Neutral, other),
        None => badge(Tone::Neutral, "unknown"),
    }
}

/// A monitor region's health in its colour: stale is amber because it degrades the monitor
/// without failing it; down is red.
pub(super) fn region_health(h: &str) -> Markup {
    let tone = match h {
        "healthy" => Tone::Good,
        "stale" => Tone::Warn,
        "down" => Tone::Bad,
        _ => Tone::Neutral,
    };
    badge(tone, h)
}

/// One element of a probe's health tuple: `yes` green, `no` red, `—` before any probe.
pub(super) fn yes_no(v: Option<bool>) -> Markup {
    match v {
        Some(true) => badge(Tone::Good, "yes"),
        Some(false) => badge(Tone::Bad, "no"),
        None => Markup("<span class=\"muted\">—</span>".into()),
    }
}

/// A span of seconds as people read an age or a lag: `4.2 s`, `42 s`, `10 min`, `3 h`,
/// `2 d`; `—` when unknown (an undated segment, a lag never read).
pub(super) fn seconds(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if !v.is_finite() => "—".into(),
        Some(v) if v < 10.0 => format!("{v:.1} s"),
        Some(v) if v < 120.0 => format!("{v:.0} s"),
        Some(v) if v < 7200.0 => format!("{:.0} min", v / 60.0),
        Some(v) if v < 172_800.0 => format!("{:.0} h", v / 3600.0),
        Some(v) => format!("{:.0} d", v / 86_400.0),
    }
}

/// A weighted share of the audience against its budget, `30 % · budget 10 %`: green while
/// the budget holds, in `tone` once it is spent (the caller says when, by the §7 rule).
pub(super) fn against_budget(share_pct: f64, budget_pct: f64, spent: bool, tone: Tone) -> Markup {
    badge(if spent { tone } else { Tone::Good }, &format!("{} · budget {}", pct(share_pct), pct(budget_pct)))
}

/// A mirror's freshness: `stale` amber (out of door rotation until a fresh check), `fresh`
/// green, or `unknown` grey when no check has read a lag (unknown is not stale), with the lag
/// when one was read.
pub(super) fn freshness(stale: bool, lag_s: Option<i64>) -> Markup {
    let lag = lag_s.map(|l| format!(" · lag {}", seconds(Some(l as f64)))).unwrap_or_default();
    match (stale, lag_s) {
        (true, _) => badge(Tone::Warn, &format!("stale{lag}")),
        (false, Some(_)) => badge(Tone::Good, &format!("fresh{lag}")),
        (false, None) => badge(Tone::Neutral, "unknown"),
    }
}

/// `primary`, `backup1`, `backup2` as people say them.
pub(super) fn level(l: &str) -> String {
    match l {
        "primary" => "Primary".into(),
        "backup1" => "Backup 1".into(),
        "backup2" => "Backup 2".into(),
        other => other.into(),
    }
}

/// A rule action as people say it.
pub(super) fn action(a: &str) -> String {
    match a {
        "remove_node" => "Remove the node".into(),
        "backup_groups" => "Switch to backup groups".into(),
        "backup_ip" => "Switch to backup IP".into(),
        other => other.into(),
    }
}

/// A rule metric's label and unit.
pub(super) fn metric(m: &str) -> (&str, &'static str) {
    match m {
        "cpu" => ("CPU", " %"),
        "load1" => ("Load (1 min)", ""),
        "memory" => ("Memory", " %"),
        "egress_mbps" => ("Egress", " Mbps"),
        "connections" => ("Connections", ""),
        "probe_loss" => ("Probe loss", " %"),
        "probe_latency_ms" => ("Probe latency", " ms"),
        other => (other, ""),
    }
}

/// `≥` for `>=`, and so on.
pub(super) fn comparison(c: &str) -> &str {
    match c {
        ">=" => "≥",
        "<=" => "≤",
        other => other,
    }
}

/// A value's word on the wire (`backup1`, `online`, `remove_node`), for the helpers that
/// read words.
pub(super) fn word<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// A day's bar: its class (green at 99.9 % and above, amber from 99 %, red below, grey where
/// nothing was counted) and its figure.
pub(crate) fn bar(day: Option<f64>) -> (&'static str, String) {
    match day {
        None => ("none", "no data".to_owned()),
        Some(p) if p >= 99.9 => ("good", format!("{p:.2}%")),
        Some(p) if p >= 99.0 => ("warn", format!("{p:.2}%")),
        Some(p) => ("bad", format!("{p:.2}%")),
    }
}

/// An availability report as history bars, one per day (oldest first), as Uptime Kuma shows
/// them: green at 99.9 % and above, amber from 99 %, red below, grey where nothing was counted;
/// each day's figure on hover, and the 30 days' figure beside them.
pub(super) fn bars(r: &vantage_control::availability::Report) -> Markup {
    let mut out = String::from("<span class=\"bars\">");
    for day in &r.days {
        let (class, said) = bar(day.availability_pct);
        out.push_str(&format!("<i class=\"bar {class}\" title=\"{} {}\"></i>", esc(&day.date), esc(&said)));
    }
    out.push_str("</span>");
    let month = r.windows.iter().find(|w| w.window == "30d").and_then(|w| w.times.availability_pct);
    match month {
        Some(p) => {
            out.push_str(&format!(" <span class=\"small\">{p:.2}% <span class=\"muted\">30 d</span></span>"))
        }
        None => out.push_str(" <span class=\"muted small\">no data yet</span>"),
    }
    Markup(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_relative_and_absolute() {
        let now = Timestamp::from_secs(1_800_000_000);
        assert_eq!(relative(now, now), "just now");
        assert_eq!(relative(Timestamp::from_secs(1_800_000_000 - 12), now), "12 s ago");
        assert_eq!(relative(Timestamp::from_secs(1_800_000_000 - 185), now), "3 min ago");
        assert_eq!(relative(Timestamp::from_secs(1_800_000_000 - 7200), now), "2 h ago");
        assert_eq!(relative(Timestamp::from_secs(1_800_000_000 + 240), now), "in 4 min");
        assert_eq!(relative(Timestamp::from_secs(1_800_000_000 + 3), now), "in 3 s");
        assert_eq!(span(42_900), "42 s");
        assert_eq!(span(185_000), "3 min 5 s");
        assert_eq!(span(7_800_000), "2 h 10 min");
        assert_eq!(span(-5), "0 s");
        assert_eq!(absolute(Timestamp::from_secs(0)), "1970-01-01 00:00:00 UTC");
        let t = time(Timestamp::from_secs(0), Timestamp::from_secs(86_400 * 2));
        assert_eq!(
            t.0,
            "<time datetime=\"1970-01-01T00:00:00.000Z\" title=\"1970-01-01 00:00:00 UTC\">2 d ago</time>"
        );
        let s = stamp(Timestamp::from_secs(0), Timestamp::from_secs(86_400 * 2));
        assert_eq!(
            s.0,
            format!(
                "<span class=\"stamp\">1970-01-01 00:00:00 UTC</span> <span class=\"muted small\">· {t}</span>"
            )
        );
    }

    #[test]
    fn text_is_escaped_and_numbers_keep_their_units() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(badge(Tone::Bad, "<b>").0, "<span class=\"badge bad\">&lt;b&gt;</span>");
        assert_eq!(ms(Some(1.234)), "1.2 ms");
        assert_eq!(ms(Some(123.4)), "123 ms");
        assert_eq!(ms(None), "—");
        assert_eq!(pct(0.0), "0 %");
        assert_eq!(pct(33.333), "33.3 %");
        assert_eq!(pct(-0.0), "0 %");
        assert_eq!(num(90.0), "90");
        assert_eq!(num(0.5), "0.50");
    }

    #[test]
    fn verdicts_and_region_statuses_read_in_their_colours() {
        assert_eq!(verdict("live").0, "<span class=\"badge good\">live</span>");
        assert_eq!(verdict("degraded").0, "<span class=\"badge warn\">degraded</span>");
        assert_eq!(verdict("blocked").0, "<span class=\"badge bad\">blocked</span>");
        assert_eq!(verdict("unknown").0, "<span class=\"badge neutral\">unknown</span>");
        assert_eq!(region_status("blocked-inferred").0, "<span class=\"badge bad\">blocked-inferred</span>");
        assert_eq!(
            region_status("error").0,
            "<span class=\"badge neutral\">error</span>",
            "counts neither way"
        );
    }

    #[test]
    fn monitor_verdicts_and_region_health_read_in_their_colours() {
        assert_eq!(monitor_verdict(Some("healthy")).0, "<span class=\"badge good\">healthy</span>");
        assert_eq!(monitor_verdict(Some("degraded")).0, "<span class=\"badge warn\">degraded</span>");
        assert_eq!(monitor_verdict(Some("down")).0, "<span class=\"badge bad\">down</span>");
        assert_eq!(monitor_verdict(None).0, "<span class=\"badge neutral\">unknown</span>");
        assert_eq!(region_health("stale").0, "<span class=\"badge warn\">stale</span>");
        assert_eq!(region_health("down").0, "<span class=\"badge bad\">down</span>");
        assert_eq!(region_health("unknown").0, "<span class=\"badge neutral\">unknown</span>");
        assert_eq!(yes_no(Some(true)).0, "<span class=\"badge good\">yes</span>");
        assert_eq!(yes_no(Some(false)).0, "<span class=\"badge bad\">no</span>");
        assert_eq!(yes_no(None).0, "<span class=\"muted\">—</span>");
    }

    #[test]
    fn ages_and_lags_read_in_their_largest_unit() {
        assert_eq!(seconds(None), "—");
        assert_eq!(seconds(Some(f64::NAN)), "—");
        assert_eq!(seconds(Some(4.23)), "4.2 s");
        assert_eq!(seconds(Some(42.4)), "42 s");
        assert_eq!(seconds(Some(600.0)), "10 min");
        assert_eq!(seconds(Some(3.0 * 3600.0)), "3 h");
        assert_eq!(seconds(Some(5.0 * 86_400.0)), "5 d");
    }

    #[test]
    fn budgets_colour_once_spent() {
        assert_eq!(
            against_budget(0.0, 15.0, false, Tone::Bad).0,
            "<span class=\"badge good\">0 % · budget 15 %</span>"
        );
        assert_eq!(
            against_budget(30.0, 10.0, true, Tone::Warn).0,
            "<span class=\"badge warn\">30 % · budget 10 %</span>"
        );
    }

    #[test]
    fn freshness_reads_stale_fresh_or_unknown() {
        assert_eq!(freshness(true, Some(7200)).0, "<span class=\"badge warn\">stale · lag 2 h</span>");
        assert_eq!(
            freshness(true, None).0,
            "<span class=\"badge warn\">stale</span>",
            "kept until a fresh check"
        );
        assert_eq!(freshness(false, Some(12)).0, "<span class=\"badge good\">fresh · lag 12 s</span>");
        assert_eq!(
            freshness(false, None).0,
            "<span class=\"badge neutral\">unknown</span>",
            "unknown is not stale"
        );
    }

    #[test]
    fn a_matrix_cell_has_status_latency_and_age() {
        let now = Timestamp::from_secs(1_800_000_000);
        let at = Timestamp::from_secs(1_800_000_000 - 12);
        let cell = region_cell("ok", 42, at, now);
        assert_eq!(
            cell.0,
            format!(
                "<span class=\"badge good\">ok · 42 ms · <time datetime=\"{at}\" title=\"{}\">12 s ago</time></span>",
                absolute(at)
            )
        );
        let timeout = region_cell("timeout", 0, at, now);
        assert!(timeout.0.starts_with("<span class=\"badge bad\">timeout · <time "), "no latency: {timeout}");
        assert!(region_cell("<b>", 1, at, now).0.contains("&lt;b&gt; · 1 ms"), "escaped");
    }
}
