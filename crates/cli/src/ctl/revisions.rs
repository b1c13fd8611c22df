//! `vantage ctl clusters diff`: what changed between two revisions of a cluster, line by line,
//! and the revisions in between with their reasons.

use std::net::IpAddr;

use vantage_server::views::RevisionDiff;

use super::client::Client;

pub(super) async fn diff(c: &Client, id: i64, from: u32, to: u32, json: bool) -> anyhow::Result<()> {
    let d: RevisionDiff = c.get(&format!("/v1/clusters/{id}/revisions/{from}/diff/{to}")).await?;
    if json {
        super::print(&d, true);
        return Ok(());
    }
    print!("{}", render(&d));
    Ok(())
}

fn ips(v: &[IpAddr]) -> String {
    if v.is_empty() {
        "nothing".to_owned()
    } else {
        v.iter().map(IpAddr::to_string).collect::<Vec<_>>().join(" ")
    }
}

/// The diff as text: a heading, one row per line (`+` gained, `−` lost), then the revisions.
fn render(d: &RevisionDiff) -> String {
    let mut out = format!(
        "revision {} → {}: {} → {} ({}), {} → {} records\n",
        d.from,
        d.to,
        d.from_at,
        d.to_at,
        vantage_core::time::span(d.to_at.millis_since(d.from_at)),
        d.records_before,
        d.records_after
    );
    let width = d.lines.iter().map(|l| l.name.chars().count()).max().unwrap_or(0);
    for l in &d.lines {
        let mut change: Vec<String> = l.added.iter().map(|ip| format!("+{ip}")).collect();
        change.extend(l.removed.iter().map(|ip| format!("−{ip}")));
        let change = if change.is_empty() { "unchanged".to_owned() } else { change.join(" ") };
        out.push_str(&format!("line {:<width$}  {}  ({change})\n", l.name, ips(&l.records)));
    }
    for r in &d.revisions {
        out.push_str(&format!("  {:>5}  {}  {}\n", r.number, r.at, r.reason));
    }
    out
}
