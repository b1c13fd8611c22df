//! Public status pages: each with what it shows and where it is served, and the form that
//! makes or edits one (clusters, monitors, tenants; private details only when asked).

use super::*;

#[derive(Template)]
#[template(path = "status_pages.html")]
struct StatusPagesPage {
    frame: Frame,
    pages: Vec<StatusPageRow>,
    /// What the form offers: (id, name) of every cluster and monitor, and every tenant.
    clusters: Vec<(i64, String)>,
    monitors: Vec<(i64, String)>,
    tenants: Vec<String>,
}

/// One page as the list shows it.
#[derive(Debug)]
struct StatusPageRow {
    id: i64,
    slug: String,
    title: String,
    path: String,
    /// What it shows, by name.
    shows: String,
    details: bool,
    /// Its fields as the API takes them, for the form that edits it.
    values: String,
}

pub(in crate::ui) async fn status_pages(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let api = client(&ui, &v);
    let list: Items<views::StatusPage> = api.get("/v1/status-pages").await?;
    let clusters: Items<views::Cluster> = api.get("/v1/clusters").await?;
    let monitors: Items<views::Monitor> = api.get("/v1/monitors").await?;
    let tenants: Items<views::Tenant> = api.get("/v1/tenants").await?;
    let cluster_names: HashMap<i64, &str> = clusters.items.iter().map(|c| (c.id, c.name.as_str())).collect();
    let monitor_names: HashMap<i64, &str> =
        monitors.items.iter().map(|m| (m.id, m.monitor.name.as_str())).collect();
    let named = |names: &HashMap<i64, &str>, id: i64| {
        names.get(&id).map_or_else(|| format!("#{id}"), |n| (*n).to_owned())
    };
    let pages = list
        .items
        .into_iter()
        .map(|p| {
            let page = &p.page;
            let shows: Vec<String> =
                (page.clusters.iter().map(|c| format!("cluster {}", named(&cluster_names, c.0))))
                    .chain(page.monitors.iter().map(|m| format!("monitor {}", named(&monitor_names, m.0))))
                    .chain(page.tenants.iter().map(|t| format!("tenant {t}")))
                    .collect();
            StatusPageRow {
                id: p.id,
                values: serde_json::to_string(page).unwrap_or_default(),
                slug: page.slug.clone(),
                title: page.title.clone(),
                shows: shows.join(", "),
                details: page.details,
                path: p.path,
            }
        })
        .collect();
    let page = StatusPagesPage {
        frame: Frame::new(&v, "Status pages", "status-pages", 0),
        pages,
        clusters: clusters.items.iter().map(|c| (c.id, c.name.clone())).collect(),
        monitors: monitors.items.iter().map(|m| (m.id, m.monitor.name.clone())).collect(),
        tenants: tenants.items.into_iter().map(|t| t.name).collect(),
    };
    Ok(render(&page))
}
