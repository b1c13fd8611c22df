//! What changed between two revisions of a cluster (`/v1/clusters/{id}/revisions/{from}/diff/{to}`):
//! each line's records with what came and went, and the revisions in between.

use super::*;
use crate::views::RevisionDiff;

/// Which two revisions, as written in the address: `to` defaults to the one after `from`, and
/// without either the page shows the newest change. Read as text, so that a bad number is
/// refused in words rather than by the query parser.
#[derive(Debug, Deserialize)]
pub(in crate::ui) struct DiffQuery {
    from: Option<String>,
    to: Option<String>,
}

/// A revision number from the address, or why it is not one.
fn revision(name: &str, v: Option<&str>) -> Result<Option<u32>, PageError> {
    v.map(|v| {
        v.trim().parse::<u32>().map_err(|_| {
            PageError::Failed(
                StatusCode::BAD_REQUEST,
                format!("{name}: a revision number, such as {name}=3; got {v:?}"),
            )
        })
    })
    .transpose()
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
    let c: views::Cluster = api.get(&format!("/v1/clusters/{id}")).await?;
    let (from, to) = match (revision("from", q.from.as_deref())?, revision("to", q.to.as_deref())?) {
        (Some(from), to) => (from, to.unwrap_or(from.saturating_add(1))),
        (None, to) => {
            // The newest change: the revision before the newest (or before `to`), and it.
            let dns: views::Dns = api.get(&format!("/v1/clusters/{id}/dns")).await?;
            let to = to.or(dns.revision).ok_or_else(|| {
                PageError::NotFound(format!("{} has no revision yet: nothing to compare", c.name))
            })?;
            (to.saturating_sub(1).max(1), to)
        }
    };
    let d: RevisionDiff = api.get(&format!("/v1/clusters/{id}/revisions/{from}/diff/{to}")).await?;
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
