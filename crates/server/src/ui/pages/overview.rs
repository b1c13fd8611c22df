//! The overview: what is broken — nodes, mirrors, monitors — recent revisions, open alerts.

use vantage_core::mirror::MirrorVerdict;
use vantage_core::monitor::GlobalVerdict;

use super::*;

#[derive(Debug)]
struct RevisionRow {
    cluster: String,
    cluster_id: i64,
    number: u32,
    at: Markup,
    reason: String,
}

#[derive(Debug)]
struct ProblemRow {
    id: i64,
    name: String,
    cluster: String,
    health: Markup,
    detail: String,
}

/// A mirror or a monitor that is not as it should be.
#[derive(Debug)]
struct ServiceRow {
    kind: &'static str,
    name: String,
    href: String,
    verdict: Markup,
    since: Markup,
}

/// How many mirrors, or monitors, read each way.
#[derive(Debug, Default)]
struct Tally {
    total: usize,
    good: usize,
    warn: usize,
    bad: usize,
    unknown: usize,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    frame: Frame,
    clusters: Vec<ClusterRow>,
    nodes_total: usize,
    nodes_healthy: usize,
    nodes_unhealthy: usize,
    nodes_disabled: usize,
    /// Drained by an operator or a maintenance window.
    nodes_drained: usize,
    probers_total: usize,
    probers_online: usize,
    probers_offline: usize,
    probers_disabled: usize,
    alerts: Vec<AlertRow>,
    revisions: Vec<RevisionRow>,
    problems: Vec<ProblemRow>,
    mirrors: Tally,
    monitors: Tally,
    services: Vec<ServiceRow>,
}

pub(in crate::ui) async fn overview(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let clusters: Items<views::Cluster> = api.get("/v1/clusters").await?;
    let nodes: Items<views::Node> = api.get("/v1/nodes").await?;
    let probers: Items<views::Prober> = api.get("/v1/probers").await?;
    let alerts: views::Alerts = api.get("/v1/alerts").await?;
    let mirror_list: views::MirrorList = api.get("/v1/mirrors").await?;
    let monitor_list: Items<views::Monitor> = api.get("/v1/monitors").await?;
    let (mut mirrors, mut monitors, mut services) = (Tally::default(), Tally::default(), Vec::new());
    for m in &mirror_list.mirrors {
        mirrors.total += 1;
        match m.verdict {
            MirrorVerdict::Live => mirrors.good += 1,
            MirrorVerdict::Degraded => mirrors.warn += 1,
            MirrorVerdict::Blocked => mirrors.bad += 1,
            MirrorVerdict::Unknown => mirrors.unknown += 1,
        }
        if matches!(m.verdict, MirrorVerdict::Degraded | MirrorVerdict::Blocked) {
            services.push(ServiceRow {
                kind: "mirror",
                name: m.host.clone(),
                href: format!("/ui/mirrors/{}", urlencode(&m.host)),
                // An operator's block reads as one (it raises no alert: it was meant).
                verdict: if m.manual_block {
                    badge(Tone::Bad, "blocked by operator")
                } else {
                    format::verdict(&m.verdict.to_string())
                },
                since: time_or(m.verdict_since, at, ""),
            });
        }
    }
    for m in &monitor_list.items {
        monitors.total += 1;
        match m.verdict {
            Some(GlobalVerdict::Healthy) => monitors.good += 1,
            Some(GlobalVerdict::Degraded) => monitors.warn += 1,
            Some(GlobalVerdict::Down) => monitors.bad += 1,
            None => monitors.unknown += 1,
        }
        if matches!(m.verdict, Some(GlobalVerdict::Degraded | GlobalVerdict::Down)) {
            services.push(ServiceRow {
                kind: "monitor",
                name: m.monitor.name.clone(),
                href: format!("/ui/monitors/{}", m.id),
                verdict: format::monitor_verdict(m.verdict.map(|g| g.to_string()).as_deref()),
                since: time_or(m.since, at, ""),
            });
        }
    }
    let healths: Vec<(views::Node, Health)> = nodes
        .items
        .into_iter()
        .map(|n| {
            let h = health(&n);
            (n, h)
        })
        .collect();
    let cluster_names: HashMap<i64, String> = clusters.items.iter().map(|c| (c.id, c.name.clone())).collect();
    let mut rows = Vec::new();
    let mut revisions = Vec::new();
    for c in &clusters.items {
        let stored: views::Revisions =
            api.get_stored(&format!("/v1/clusters/{}/revisions?limit=5", c.id)).await?;
        let latest = match stored.items.first() {
            Some(r) => Some((r.number, r.reason.clone(), r.at)),
            // The store is away: the revision DNS answers, from memory.
            None if api.store_away().is_some() => {
                let dns: views::Dns = api.get(&format!("/v1/clusters/{}/dns", c.id)).await?;
                dns.revision.zip(dns.reason).zip(dns.at).map(|((n, reason), at)| (n, reason, at))
            }
            None => None,
        };
        revisions.extend(stored.items.into_iter().map(|r| (r.at, c.id, r)));
        rows.push(ClusterRow::new(
            c,
            healths.iter().filter(|(n, _)| n.cluster.0 == c.id).map(|(_, h)| h),
            latest
                .as_ref()
                .map(|(n, reason, _)| format!("#{n} {reason}"))
                .unwrap_or_else(|| "none yet".into()),
            time_or(latest.map(|(_, _, at)| at), at, ""),
        ));
    }
    revisions.sort_by_key(|r| std::cmp::Reverse(r.0));
    let revisions = revisions
        .into_iter()
        .take(10)
        .map(|(_, cid, r)| RevisionRow {
            cluster: cluster_names.get(&cid).cloned().unwrap_or_default(),
            cluster_id: cid,
            number: r.number,
            at: time(r.at, at),
            reason: r.reason,
        })
        .collect();
    // A drained node is out by the operator's word, like a disabled one: no problem.
    let out = |n: &views::Node| !n.enabled || n.drain.is_some();
    let problems = healths
        .iter()
        .filter(|(n, h)| !out(n) && !h.healthy())
        .map(|(n, h)| ProblemRow {
            id: n.id,
            name: n.name.clone(),
            cluster: cluster_names.get(&n.cluster.0).cloned().unwrap_or_default(),
            health: h.badge(),
            detail: h.detail.clone(),
        })
        .collect();
    let count = |s: ProberStatus| probers.items.iter().filter(|p| p.status == s).count();
    let page = OverviewPage {
        frame: Frame::new(&v, "Overview", "overview", 10).reading(&api),
        nodes_total: healths.len(),
        nodes_healthy: healths.iter().filter(|(_, h)| h.healthy()).count(),
        nodes_disabled: healths.iter().filter(|(n, _)| !n.enabled).count(),
        nodes_drained: healths.iter().filter(|(n, _)| n.enabled && n.drain.is_some()).count(),
        nodes_unhealthy: healths.iter().filter(|(n, h)| !out(n) && !h.healthy()).count(),
        probers_total: probers.items.len(),
        probers_online: count(ProberStatus::Online),
        probers_offline: count(ProberStatus::Offline),
        probers_disabled: count(ProberStatus::Disabled),
        alerts: alerts.open.iter().map(|a| alert_row(a, at)).collect(),
        clusters: rows,
        revisions,
        problems,
        mirrors,
        monitors,
        services,
    };
    Ok(render(&page))
}
