//! Maintenance windows: those planned, open and closed, with what each drains and the alerts
//! it holds, and the form that plans one (nodes, groups, mirrors, monitors; now or later).

use super::*;

#[derive(Template)]
#[template(path = "maintenance.html")]
struct MaintenancePage {
    frame: Frame,
    windows: Vec<WindowRow>,
    /// What the form offers: (id, label) of every node and group, and every monitor.
    nodes: Vec<(i64, String)>,
    groups: Vec<(i64, String)>,
    monitors: Vec<(i64, String)>,
}

/// One window as the page lists it.
#[derive(Debug)]
struct WindowRow {
    id: i64,
    name: String,
    state: &'static str,
    starts: Markup,
    ends: Markup,
    targets: String,
    holds: usize,
    by: String,
    comment: String,
}

pub(in crate::ui) async fn maintenance(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let at = now();
    let api = client(&ui, &v);
    let windows: Items<views::MaintenanceWindow> = api.get("/v1/maintenance").await?;
    let nodes: Items<views::Node> = api.get("/v1/nodes").await?;
    let clusters: Items<views::Cluster> = api.get("/v1/clusters").await?;
    let monitors: Items<views::Monitor> = api.get("/v1/monitors").await?;
    let mut groups = Vec::new();
    for c in &clusters.items {
        let some: Items<views::Group> = api.get(&format!("/v1/clusters/{}/groups", c.id)).await?;
        groups.extend(some.items.into_iter().map(|g| (g.id, format!("{} / {}", c.name, g.name))));
    }
    let page = MaintenancePage {
        frame: Frame::new(&v, "Maintenance", "maintenance", 10),
        windows: (windows.items.into_iter())
            .map(|w| WindowRow {
                id: w.id,
                state: match w.state {
                    views::MaintenanceState::Planned => "planned",
                    views::MaintenanceState::Open => "open",
                    views::MaintenanceState::Closed => "closed",
                },
                starts: time(w.maintenance.starts_at, at),
                ends: time(w.maintenance.ends_at, at),
                targets: w.targets.join(", "),
                holds: w.holds.len(),
                by: w.maintenance.created_by,
                comment: w.maintenance.comment,
                name: w.maintenance.name,
            })
            .collect(),
        nodes: nodes.items.into_iter().map(|n| (n.id, format!("{} / {}", n.cluster_name, n.name))).collect(),
        groups,
        monitors: monitors.items.into_iter().map(|m| (m.id, m.monitor.name)).collect(),
    };
    Ok(render(&page))
}
