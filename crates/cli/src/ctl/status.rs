//! `vantage ctl status`: one screen for the worst minute — what is broken, since when, and
//! what DNS answers now — read from the same routes as the web UI, so it shows nothing the
//! server did not decide.

use serde::Serialize;
use vantage_control::alerts::Alert;
use vantage_control::observe::ProberStatus;
use vantage_core::reachability::Condition;
use vantage_server::views::{Alerts, ClusterView, DnsView, Items, NodeView, ProberView};

use super::client::Client;
use super::print;
use super::table::{age, cell, condition};

/// What `status` shows, also its `--json` output.
#[derive(Debug, Serialize)]
struct Status {
    /// Why the server is not ready (its store is away: changes wait for it, reads answer
    /// from memory); absent when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    unready: Option<String>,
    probers: Vec<ProberView>,
    alerts: Vec<Alert>,
    /// The firing alerts whose notification a silence or a maintenance window holds: key →
    /// what holds it.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    held: std::collections::BTreeMap<String, vantage_control::alerts::Hold>,
    clusters: Vec<ClusterStatus>,
}

/// One cluster: what DNS answers, why, and the nodes that are not healthy.
#[derive(Debug, Serialize)]
struct ClusterStatus {
    cluster: ClusterView,
    dns: DnsView,
    /// Why the revision DNS answers was cut.
    reason: Option<String>,
    /// Lines that answer by their all-down policy: name, and which and why.
    held: Vec<(String, String)>,
    /// Nodes with an address that is not plainly reachable, or that DNS leaves out.
    troubled: Vec<NodeView>,
    /// The others.
    healthy: usize,
}

/// A node DNS answers on its primaries with every address reachable and none failing.
fn healthy(n: &NodeView) -> bool {
    n.enabled
        && n.serving == Some(true)
        && n.addresses.iter().all(|a| a.condition.is_none_or(|c| c == Condition::Reachable))
}

/// Prints the status of every cluster, or of `only`.
pub(super) async fn status(c: &Client, only: Option<i64>, json: bool) -> anyhow::Result<()> {
    let unready = c.unready().await?;
    let probers: Items<ProberView> = c.get("/v1/probers").await?;
    let alerts: Alerts = c.get("/v1/alerts").await?;
    let clusters: Items<ClusterView> = c.get("/v1/clusters").await?;
    let nodes: Items<NodeView> = c.get("/v1/nodes").await?;
    let mut out = Status {
        unready,
        probers: probers.items,
        alerts: alerts.open,
        held: alerts.held,
        clusters: Vec::new(),
    };
    for cluster in clusters.items.into_iter().filter(|x| only.is_none_or(|id| id == x.id)) {
        let dns: DnsView = c.get(&format!("/v1/clusters/{}/dns", cluster.id)).await?;
        // Read from the published revision, as DNS answers it.
        let held = dns
            .lines
            .iter()
            .filter_map(|l| Some((l.name.clone(), l.held.as_ref()?.describe(&l.name))))
            .collect();
        let (troubled, fine): (Vec<_>, Vec<_>) =
            nodes.items.iter().filter(|n| n.cluster.0 == cluster.id).cloned().partition(|n| !healthy(n));
        out.clusters.push(ClusterStatus {
            reason: dns.reason.clone(),
            held,
            troubled,
            healthy: fine.len(),
            cluster,
            dns,
        });
    }
    if json {
        print(&out, true);
    } else {
        show(&out);
    }
    Ok(())
}

fn show(s: &Status) {
    let online = s.probers.iter().filter(|p| p.status == ProberStatus::Online).count();
    let enabled = s.probers.iter().filter(|p| p.enabled).count();
    if let Some(why) = &s.unready {
        println!("store     {why}: changes wait for it; what follows is from memory");
    }
    println!("probers   {online} of {enabled} online");
    for p in s.probers.iter().filter(|p| p.enabled && p.status != ProberStatus::Online) {
        let seen =
            p.last_seen.map_or_else(|| "never seen".to_owned(), |t| format!("last seen {} ago", age(t)));
        println!("          {} ({}) offline, {seen}", p.name, p.region_code.as_deref().unwrap_or("-"));
    }
    println!("alerts    {} firing", s.alerts.len());
    for a in &s.alerts {
        let held = s.held.get(&a.key).map(|by| format!("  (notification held by {by})"));
        println!("          {}  {} ago  {}{}", a.kind, age(a.fired_at), a.summary, held.unwrap_or_default());
    }
    for c in &s.clusters {
        println!();
        let revision = match (c.dns.revision, c.dns.at) {
            (Some(n), Some(at)) => {
                format!("revision {n}, {} ago: {}", age(at), c.reason.as_deref().unwrap_or("-"))
            }
            _ => "no revision yet".to_owned(),
        };
        println!("cluster   {} ({})  {revision}", c.cluster.name, c.dns.domain);
        for l in &c.dns.lines {
            let records: Vec<String> = l.records.iter().map(ToString::to_string).collect();
            let since = l.since.map(|t| format!("  since {} ago", age(t))).unwrap_or_default();
            println!(
                "  line    {}  {}{since}",
                l.name,
                if records.is_empty() { "-".to_owned() } else { records.join(" ") }
            );
        }
        for (_, what) in &c.held {
            println!("  note    {what}");
        }
        for n in &c.troubled {
            let drained = |d: &vantage_control::drain::Drain| if d.drained { "drained" } else { "draining" };
            let serving = match (n.enabled, n.serving, &n.drain) {
                (false, _, _) => "  (disabled)".to_owned(),
                (_, _, Some(d)) => {
                    format!("  ({}: {})", drained(d), n.drain_cause.as_deref().unwrap_or_default())
                }
                (_, Some(false), _) => "  (left out of DNS)".to_owned(),
                _ => String::new(),
            };
            println!("  node    {}{serving}", n.name);
            for a in n.addresses.iter().filter(|a| a.condition.is_some_and(|c| c != Condition::Reachable)) {
                // How long it has been in its condition; beside a deadline (`failing —
                // unreachable in 2s`) as a phrase of its own, so that neither reads as the other.
                let since = match (a.since, a.changes_at) {
                    (Some(t), Some(_)) => format!(", {} for {}", cell(&a.condition), age(t)),
                    (Some(t), None) => format!(" since {} ago", age(t)),
                    (None, _) => String::new(),
                };
                let seen = a
                    .probers
                    .map_or_else(String::new, |v| format!(", {} of {} failing", v.failing, v.counting));
                let used = if a.in_use { ", in DNS" } else { "" };
                println!("          {} {}  {}{since}{seen}{used}", a.ip, cell(&a.level), condition(a));
            }
        }
        let other = if c.troubled.is_empty() { "" } else { "other " };
        match c.healthy {
            0 => println!("  no {other}node healthy"),
            1 => println!("  1 {other}node healthy"),
            n => println!("  {n} {other}nodes healthy"),
        }
    }
}
