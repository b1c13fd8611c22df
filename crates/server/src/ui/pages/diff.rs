//! What changed between two revisions of a cluster (`/v1/clusters/{id}/revisions/{from}/diff/{to}`):
//! each line's records with what came and went, and the revisions in between.

use super::*;
use crate::views::RevisionDiff;

/// Which two revisions; `to` defaults to the one after `from`.
#[derive(Debug, Deserialize)]
pub(in crate::ui) struct DiffQuery {
    from: u32,
    to: Option<u32>,
}

#[derive(Debug)]
struct LineRow {
    name: String,
    records: String,
    added: String,
    removed: String,
}

#[derive(Debug)]
struct Between {
    number: u32,
    at: Markup,
    reason: String,
}

#[derive(Template)]
#[template(path = "diff.html")]
struct DiffPage {
    frame: Frame,
    cluster_id: i64,
    cluster: String,
    from: u32,
    to: u32,
    from_at: Markup,
    to_at: Markup,
    lines: Vec<LineRow>,
    revisions: Vec<Between>,
}

fn ips(v: &[std::net::IpAddr]) -> String {
    v.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
}

pub(in crate::ui) async fn diff(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Path(id): Path<i64>,
    Query(q): Query<DiffQuery>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let to = q.to.unwrap_or(q.from.saturating_add(1));
    let c: views::Cluster = api.get(&format!("/v1/clusters/{id}")).await?;
    let d: RevisionDiff = api.get(&format!("/v1/clusters/{id}/revisions/{}/diff/{to}", q.from)).await?;
    let page = DiffPage {
        frame: Frame::new(&v, format!("{}: revision {} → {}", c.name, d.from, d.to), "clusters", 0),
        cluster_id: id,
        cluster: c.name,
        from: d.from,
        to: d.to,
        from_at: stamp(d.from_at, at),
        to_at: stamp(d.to_at, at),
        lines: d
            .lines
            .iter()
            .map(|l| LineRow {
                name: l.name.clone(),
                records: ips(&l.records),
                added: ips(&l.added),
                removed: ips(&l.removed),
            })
            .collect(),
        revisions: d
            .revisions
            .into_iter()
            .map(|r| Between { number: r.number, at: time(r.at, at), reason: r.reason })
            .collect(),
    };
    Ok(render(&page))
}
