//! The audit log, filtered.

use super::*;

#[derive(Debug, Deserialize, Default)]
pub(in crate::ui) struct AuditQuery {
    #[serde(default)]
    action: String,
    #[serde(default)]
    actor: String,
    #[serde(default)]
    object: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
    #[serde(default)]
    limit: String,
}

#[derive(Debug)]
struct AuditRow {
    at: Markup,
    actor: String,
    action: String,
    object: String,
    object_href: String,
    metadata: String,
    metadata_full: String,
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    frame: Frame,
    q: AuditQuery,
    rows: Vec<AuditRow>,
    error: String,
}

fn object_href(object: &str) -> String {
    match object.split_once(':') {
        Some(("node", id)) => format!("/ui/nodes/{id}"),
        Some(("cluster", id)) => format!("/ui/clusters/{id}"),
        Some(("prober", id)) => format!("/ui/probers/{id}"),
        Some(("region", _)) => "/ui/regions".into(),
        _ => String::new(),
    }
}

pub(in crate::ui) async fn audit(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Query(q): Query<AuditQuery>,
) -> PageResult {
    let at = now();
    let filters: Vec<String> = [
        ("action", &q.action),
        ("actor", &q.actor),
        ("object", &q.object),
        ("since", &q.since),
        ("until", &q.until),
        ("limit", &q.limit),
    ]
    .iter()
    .filter(|(_, v)| !v.trim().is_empty())
    .map(|(k, v)| format!("{k}={}", urlencode(v.trim())))
    .collect();
    let path =
        if filters.is_empty() { "/v1/audit".to_owned() } else { format!("/v1/audit?{}", filters.join("&")) };
    let (rows, error) = match client(&ui, &v).get::<Items<views::AuditEntry>>(&path).await {
        Ok(items) => (items.items, String::new()),
        Err(PageError::Failed(StatusCode::BAD_REQUEST, m)) => (Vec::new(), m),
        Err(e) => return Err(e),
    };
    let rows = rows
        .into_iter()
        .map(|e| {
            let full =
                if e.metadata.as_object().is_some_and(serde_json::Map::is_empty) || e.metadata.is_null() {
                    String::new()
                } else {
                    e.metadata.to_string()
                };
            let short = if full.chars().count() > 160 {
                format!("{}…", full.chars().take(160).collect::<String>())
            } else {
                full.clone()
            };
            AuditRow {
                at: stamp(e.at, at),
                actor: e.actor,
                action: e.action,
                object_href: object_href(&e.object),
                object: e.object,
                metadata: short,
                metadata_full: full,
            }
        })
        .collect();
    let page = AuditPage { frame: Frame::new(&v, "Audit", "audit", 0), q, rows, error };
    Ok(render(&page))
}
