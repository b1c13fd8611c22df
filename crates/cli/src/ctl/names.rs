//! Names wherever an id is: `--cluster video` as well as `--cluster 3`, `group=sin-1`,
//! `nodes get sin-1a`. One resolver for every command: a name is looked up in the list route
//! of its kind, fetched once per run, and one that is unknown or stands for several objects
//! is refused with the flag or field that gave it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::str::FromStr;

use anyhow::anyhow;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use vantage_server::views::{
    AdminTokenView, CheckView, ClusterView, GroupView, Items, LineView, MaintenanceView, MonitorView,
    NodeView, ProberView, RegionView, RuleView, SilenceView, StatusPageView, WebhookView,
};

use super::client::Client;

/// An object as a command line gives it: its id, or a name it goes by. A name of digits only
/// reads as an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ref {
    Id(i64),
    Name(String),
}

impl FromStr for Ref {
    type Err = Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(s.parse().map_or_else(|_| Ref::Name(s.to_owned()), Ref::Id))
    }
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ref::Id(id) => write!(f, "{id}"),
            Ref::Name(n) => f.write_str(n),
        }
    }
}

/// What a name stands for; groups, lines and rules are named within their cluster (by id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Region,
    Cluster,
    Group(i64),
    Line(i64),
    Rule(i64),
    Node,
    Prober,
    Webhook,
    Silence,
    Maintenance,
    StatusPage,
    Monitor,
    Check,
    AdminToken,
}

impl Kind {
    /// One of them, as a sentence names it.
    pub(super) fn noun(self) -> &'static str {
        match self {
            Kind::Region => "region",
            Kind::Cluster => "cluster",
            Kind::Group(_) => "group",
            Kind::Line(_) => "line",
            Kind::Rule(_) => "rule",
            Kind::Node => "node",
            Kind::Prober => "prober",
            Kind::Webhook => "webhook",
            Kind::Silence => "silence",
            Kind::Maintenance => "maintenance window",
            Kind::StatusPage => "status page",
            Kind::Monitor => "monitor",
            Kind::Check => "check",
            Kind::AdminToken => "admin token",
        }
    }

    /// Where they are listed.
    fn path(self) -> String {
        match self {
            Kind::Region => "/v1/regions".into(),
            Kind::Cluster => "/v1/clusters".into(),
            Kind::Group(c) => format!("/v1/clusters/{c}/groups"),
            Kind::Line(c) => format!("/v1/clusters/{c}/lines"),
            Kind::Rule(c) => format!("/v1/clusters/{c}/rules"),
            Kind::Node => "/v1/nodes".into(),
            Kind::Prober => "/v1/probers".into(),
            Kind::Webhook => "/v1/webhooks".into(),
            Kind::Silence => "/v1/silences".into(),
            Kind::Maintenance => "/v1/maintenance".into(),
            Kind::StatusPage => "/v1/status-pages".into(),
            Kind::Monitor => "/v1/monitors".into(),
            Kind::Check => "/v1/checks".into(),
            Kind::AdminToken => "/v1/admin-tokens".into(),
        }
    }
}

/// One object a name may stand for.
#[derive(Debug, Clone)]
struct Candidate {
    id: i64,
    /// The names it goes by (a region by its code and its name, a cluster by its name and
    /// its domain).
    names: Vec<String>,
    /// What tells it from another of the same name (a node's cluster).
    whose: Option<String>,
}

/// The objects of one list route as candidates.
async fn list<V: DeserializeOwned>(
    c: &Client,
    kind: Kind,
    f: impl Fn(V) -> Candidate,
) -> anyhow::Result<Vec<Candidate>> {
    Ok(c.get::<Items<V>>(&kind.path()).await?.items.into_iter().map(f).collect())
}

fn plain(id: i64, name: String) -> Candidate {
    Candidate { id, names: vec![name], whose: None }
}

/// Names to ids for one run of `ctl`, each kind's list fetched at most once.
#[derive(Debug)]
pub(super) struct Names<'a> {
    client: &'a Client,
    lists: HashMap<Kind, Vec<Candidate>>,
}

impl<'a> Names<'a> {
    pub(super) fn new(client: &'a Client) -> Self {
        Names { client, lists: HashMap::new() }
    }

    /// The connection names are looked up on.
    pub(super) fn client(&self) -> &'a Client {
        self.client
    }

    async fn candidates(&mut self, kind: Kind) -> anyhow::Result<&[Candidate]> {
        if !self.lists.contains_key(&kind) {
            let c = self.client;
            let found = match kind {
                Kind::Region => {
                    list(c, kind, |r: RegionView| Candidate {
                        id: r.id,
                        names: vec![r.code, r.name],
                        whose: None,
                    })
                    .await?
                }
                Kind::Cluster => {
                    list(c, kind, |x: ClusterView| Candidate {
                        id: x.id,
                        names: vec![x.name, x.domain],
                        whose: None,
                    })
                    .await?
                }
                Kind::Group(_) => list(c, kind, |g: GroupView| plain(g.id, g.name)).await?,
                Kind::Line(_) => list(c, kind, |l: LineView| plain(l.id, l.name)).await?,
                Kind::Rule(_) => list(c, kind, |r: RuleView| plain(r.id, r.rule.name)).await?,
                Kind::Node => {
                    list(c, kind, |n: NodeView| Candidate {
                        id: n.id,
                        names: vec![n.name],
                        whose: Some(format!("in cluster {}", n.cluster_name)),
                    })
                    .await?
                }
                Kind::Prober => list(c, kind, |p: ProberView| plain(p.id, p.name)).await?,
                Kind::Webhook => list(c, kind, |w: WebhookView| plain(w.id, w.webhook.name)).await?,
                // A silence has no name: its id is how it is named.
                Kind::Silence => list(c, kind, |s: SilenceView| plain(s.id, s.id.to_string())).await?,
                Kind::Maintenance => {
                    list(c, kind, |m: MaintenanceView| plain(m.id, m.maintenance.name)).await?
                }
                Kind::StatusPage => list(c, kind, |p: StatusPageView| plain(p.id, p.page.slug)).await?,
                Kind::Monitor => list(c, kind, |m: MonitorView| plain(m.id, m.monitor.name)).await?,
                Kind::Check => list(c, kind, |x: CheckView| plain(x.id, x.name)).await?,
                Kind::AdminToken => list(c, kind, |t: AdminTokenView| plain(t.id, t.name)).await?,
            };
            self.lists.insert(kind, found);
        }
        Ok(self.lists.get(&kind).map_or(&[], Vec::as_slice))
    }

    /// The id `r` stands for as a `kind`; `what` is the flag or field that gave it, for the
    /// refusal. An id is taken as it is: the server says whether it exists.
    pub(super) async fn id(&mut self, kind: Kind, what: &str, r: &Ref) -> anyhow::Result<i64> {
        let name = match r {
            Ref::Id(id) => return Ok(*id),
            Ref::Name(n) => n,
        };
        let all = self.candidates(kind).await?;
        let matching: Vec<&Candidate> =
            all.iter().filter(|c| c.names.iter().any(|n| n.eq_ignore_ascii_case(name))).collect();
        match matching.as_slice() {
            [one] => Ok(one.id),
            [] => {
                let known: Vec<&str> =
                    all.iter().filter_map(|c| c.names.first().map(String::as_str)).collect();
                let known = match known.len() {
                    0 => "there is none".to_owned(),
                    1..=10 => format!("known: {}", known.join(", ")),
                    n => format!("{n} known, among them {}", known[..10].join(", ")),
                };
                Err(anyhow!("{what}: no {} named {name:?} ({known})", kind.noun()))
            }
            several => {
                let ids: Vec<String> = several
                    .iter()
                    .map(|c| c.whose.as_ref().map_or_else(|| c.id.to_string(), |w| format!("{} {w}", c.id)))
                    .collect();
                Err(anyhow!(
                    "{what}: {name:?} names {} {}s: {}; give the id",
                    several.len(),
                    kind.noun(),
                    ids.join(", ")
                ))
            }
        }
    }

    /// Resolves the fields of a body for a `kind` that refer to other objects by id, when
    /// given by name: a group's `region`, a line's `group`, `backup_groups` and `latency_region`, a rule's
    /// `line`, a node's `cluster` and `group` (in the node's cluster: the one given, else
    /// the one of `existing`, the node being changed).
    pub(super) async fn fields(
        &mut self,
        kind: Kind,
        existing: Option<i64>,
        body: &mut Value,
    ) -> anyhow::Result<()> {
        let Value::Object(m) = body else { return Ok(()) };
        match kind {
            Kind::Group(_) | Kind::Prober => self.field(m, "region", Kind::Region).await,
            Kind::Line(c) => {
                self.field(m, "group", Kind::Group(c)).await?;
                self.field(m, "backup_groups", Kind::Group(c)).await?;
                self.field(m, "latency_region", Kind::Region).await
            }
            Kind::Rule(c) => self.field(m, "line", Kind::Line(c)).await,
            Kind::StatusPage => {
                self.field(m, "clusters", Kind::Cluster).await?;
                self.field(m, "monitors", Kind::Monitor).await
            }
            // Groups are named within a cluster: a window names them by id.
            Kind::Maintenance => {
                self.field(m, "nodes", Kind::Node).await?;
                self.field(m, "monitors", Kind::Monitor).await
            }
            Kind::Node => {
                self.field(m, "cluster", Kind::Cluster).await?;
                let cluster = match (m.get("cluster").and_then(Value::as_i64), existing) {
                    (Some(c), _) => Some(c),
                    (None, Some(id)) if m.get("group").is_some_and(Value::is_string) => {
                        Some(self.client.get::<NodeView>(&format!("/v1/nodes/{id}")).await?.cluster.0)
                    }
                    _ => None,
                };
                match cluster {
                    Some(c) => self.field(m, "group", Kind::Group(c)).await,
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// Replaces a name (or a list of names) in `m[key]` with the id of that `kind`.
    async fn field(&mut self, m: &mut Map<String, Value>, key: &str, kind: Kind) -> anyhow::Result<()> {
        let what = format!("{key}=");
        match m.get(key) {
            Some(Value::String(name)) => {
                let id = self.id(kind, &what, &Ref::Name(name.clone())).await?;
                m.insert(key.to_owned(), Value::from(id));
            }
            Some(Value::Array(items)) => {
                let mut ids = Vec::with_capacity(items.len());
                for item in items.iter() {
                    ids.push(match item {
                        Value::String(name) => {
                            Value::from(self.id(kind, &what, &Ref::Name(name.clone())).await?)
                        }
                        other => other.clone(),
                    });
                }
                m.insert(key.to_owned(), Value::Array(ids));
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_an_id_and_anything_else_a_name() {
        assert_eq!("42".parse::<Ref>(), Ok(Ref::Id(42)));
        assert_eq!("sin-1".parse::<Ref>(), Ok(Ref::Name("sin-1".into())));
        assert_eq!("4a".parse::<Ref>(), Ok(Ref::Name("4a".into())));
    }
}
