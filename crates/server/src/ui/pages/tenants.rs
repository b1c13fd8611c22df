//! The tenants mirrors serve and doors ask for, with how many mirrors name each.

use super::*;

#[derive(Debug)]
struct TenantRow {
    name: String,
    note: String,
    mirrors: usize,
    fallback_to_degraded: bool,
    fallback_url: Option<String>,
    /// How doors choose among its mirrors: by weight, or each region's order by latency.
    choice: Vec<String>,
    /// Its fields as the API takes them, for the form that edits it.
    values: String,
}

#[derive(Template)]
#[template(path = "tenants.html")]
struct TenantsPage {
    frame: Frame,
    tab: &'static str,
    tenants: Vec<TenantRow>,
}

pub(in crate::ui) async fn tenants(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let list: Items<views::Tenant> = client(&ui, &v).get("/v1/tenants").await?;
    let page = TenantsPage {
        frame: Frame::new(&v, "Tenants", "mirrors", 0),
        tab: "tenants",
        tenants: list
            .items
            .into_iter()
            .map(|t| TenantRow {
                values: serde_json::json!({
                    "name": t.name,
                    "note": t.note,
                    "fallback_to_degraded": t.fallback_to_degraded,
                    "fallback_url": t.fallback_url,
                    "order_by_latency": t.order_by_latency,
                })
                .to_string(),
                choice: if t.order_by_latency {
                    let mut lines = vec!["fastest in the visitor's region".to_owned()];
                    lines.extend(
                        t.latency_order.iter().map(|(r, hosts)| format!("{r}: {}", hosts.join(" → "))),
                    );
                    lines
                } else {
                    vec!["by weight".to_owned()]
                },
                name: t.name,
                note: t.note,
                mirrors: t.mirrors,
                fallback_to_degraded: t.fallback_to_degraded,
                fallback_url: t.fallback_url,
            })
            .collect(),
    };
    Ok(render(&page))
}
