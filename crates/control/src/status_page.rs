//! Public status pages: what a fleet's users may see of it — per cluster, monitor or tenant,
//! its state now, 90 days of bars, its open incidents and its maintenance — and nothing private
//! (no address, no node or prober name, no incident cause) unless the page opts in. A page is
//! a configuration object; what it shows is made here from the availability ledger and the
//! configuration, so the page, the API and the admin views say the same.

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::ids::{ClusterId, MonitorId};

use crate::availability::{self, Change, Day, Health, Ledger, Tracked};
use crate::config::Config;

/// Days of bars a page shows.
pub const DAYS: u32 = 90;
const MAX_TITLE: usize = 100;
const MAX_SUBJECTS: usize = 50;

/// A status page as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StatusPage {
    /// Its address: `/status/{slug}` (lower-case letters, digits and `-`, 1–63).
    pub slug: String,
    /// Its heading.
    pub title: String,
    /// Clusters shown, each as one component (its lines together).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterId>,
    /// Monitors shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monitors: Vec<MonitorId>,
    /// Tenants shown, each as the mirrors that may serve it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// Opt in to what is private: incident causes and maintenance comments.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub details: bool,
}

impl StatusPage {
    /// Validates its own fields (what it names is checked against the configuration apart).
    pub fn check(mut self) -> Result<StatusPage, vantage_core::Error> {
        use vantage_core::Error;
        let ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
        if self.slug.is_empty()
            || self.slug.len() > 63
            || !self.slug.bytes().all(ok)
            || self.slug.starts_with('-')
        {
            return Err(Error::invalid(
                "slug",
                "1 to 63 lower-case letters, digits and -, not starting with -",
            ));
        }
        let title = self.title.trim();
        if title.is_empty() || title.chars().count() > MAX_TITLE || title.chars().any(char::is_control) {
            return Err(Error::invalid("title", format!("1 to {MAX_TITLE} printable characters")));
        }
        self.title = title.to_owned();
        let n = self.clusters.len() + self.monitors.len() + self.tenants.len();
        if n == 0 || n > MAX_SUBJECTS {
            return Err(Error::invalid(
                "clusters",
                format!("1 to {MAX_SUBJECTS} clusters, monitors and tenants in all"),
            ));
        }
        Ok(self)
    }
}

/// What a component is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PublicState {
    Operational,
    Maintenance,
    Degraded,
    Outage,
    /// Nothing known yet.
    Unknown,
}

impl PublicState {
    fn of(h: Option<Health>) -> PublicState {
        match h {
            Some(Health::Up) => PublicState::Operational,
            Some(Health::Degraded) => PublicState::Degraded,
            Some(Health::Down) => PublicState::Outage,
            Some(Health::Maintenance) => PublicState::Maintenance,
            Some(Health::Unknown) | None => PublicState::Unknown,
        }
    }

    /// In words, for the page and the badge.
    pub fn words(self) -> &'static str {
        match self {
            PublicState::Operational => "operational",
            PublicState::Maintenance => "maintenance",
            PublicState::Degraded => "degraded",
            PublicState::Outage => "outage",
            PublicState::Unknown => "unknown",
        }
    }
}

/// An incident as a page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct PublicIncident {
    pub since: Timestamp,
    /// Only on a page with `details`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

/// A maintenance window as a page shows it: open or planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct PublicMaintenance {
    pub name: String,
    pub starts_at: Timestamp,
    pub ends_at: Timestamp,
    /// Only on a page with `details`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// One component of a page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Component {
    pub name: String,
    pub state: PublicState,
    /// Availability over the days shown, % (`None`: nothing counted).
    pub availability_pct: Option<f64>,
    /// One per day, oldest first.
    pub days: Vec<Day>,
    pub incidents: Vec<PublicIncident>,
    pub maintenance: Vec<PublicMaintenance>,
}

/// A page as its visitors see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct PublicPage {
    pub title: String,
    /// The worst of its components.
    pub state: PublicState,
    pub components: Vec<Component>,
    pub at: Timestamp,
}

/// The component made of `subjects` (a cluster's lines, a tenant's mirrors, one monitor):
/// `all` says whether every one must serve (a cluster's lines) or any one is enough (a
/// tenant's mirrors, any of which a visitor may be sent to).
fn component(
    name: String,
    subjects: &[&[Change]],
    all: bool,
    (details, maintenance): (bool, Vec<PublicMaintenance>),
    now: Timestamp,
) -> Component {
    let states: Vec<PublicState> =
        subjects.iter().map(|c| PublicState::of(c.last().map(|l| l.health))).collect();
    // Of what is known: the worst when every one must serve, the best when any one may.
    let known = states.iter().copied().filter(|s| *s != PublicState::Unknown);
    let state = if all { known.max() } else { known.min() }.unwrap_or(PublicState::Unknown);
    let pick = |xs: Vec<f64>| {
        if all { xs.into_iter().reduce(f64::min) } else { xs.into_iter().reduce(f64::max) }
    };
    let per_subject: Vec<Vec<Day>> = subjects.iter().map(|c| availability::days(c, DAYS, now)).collect();
    let days = (availability::days(&[], DAYS, now).into_iter().enumerate())
        .map(|(d, day)| Day {
            availability_pct: pick(per_subject.iter().filter_map(|s| s.get(d)?.availability_pct).collect()),
            ..day
        })
        .collect();
    let since = now.plus_millis(-i64::from(DAYS) * 86_400_000);
    let availability_pct = pick(
        subjects.iter().filter_map(|c| availability::window(c, since, now, None).availability_pct).collect(),
    );
    // Open incidents: the subjects down now, since when (a tenant's only when every mirror is).
    let down: Vec<PublicIncident> = (subjects.iter())
        .filter_map(|c| c.last().filter(|l| l.health == Health::Down))
        .map(|l| PublicIncident { since: l.at, cause: details.then(|| l.why.clone()) })
        .collect();
    let incidents = if state == PublicState::Outage { down } else { Vec::new() };
    Component { name, state, availability_pct, days, incidents, maintenance }
}

impl StatusPage {
    /// The page at `now`, from the configuration and the availability ledger.
    pub fn public(&self, c: &Config, ledger: &Ledger, now: Timestamp) -> PublicPage {
        let windows = |covers: &dyn Fn(&crate::maintenance::Maintenance) -> bool| -> Vec<PublicMaintenance> {
            (c.maintenance.values())
                .map(|m| &m.value)
                .filter(|m| m.ends_at > now && covers(m))
                .map(|m| PublicMaintenance {
                    // Its name is the operator's words, which may name a node: with details.
                    name: if self.details { m.name.clone() } else { "Scheduled maintenance".to_owned() },
                    starts_at: m.starts_at,
                    ends_at: m.ends_at,
                    comment: (self.details && !m.comment.is_empty()).then(|| m.comment.clone()),
                })
                .collect()
        };
        let mut components = Vec::new();
        for id in &self.clusters {
            let Some(cl) = c.clusters.get(&id.0) else { continue };
            let mut lines: Vec<Tracked> = c.lines_of(*id).map(|(l, _)| Tracked::Line(*id, l)).collect();
            if lines.is_empty() {
                lines.push(Tracked::Line(*id, vantage_core::evaluate::DEFAULT_LINE));
            }
            let changes: Vec<&[Change]> = lines.iter().map(|t| ledger.changes(t)).collect();
            let covers = |m: &crate::maintenance::Maintenance| m.clusters(c).contains(id);
            components.push(component(
                cl.value.name.clone(),
                &changes,
                true,
                (self.details, windows(&covers)),
                now,
            ));
        }
        for id in &self.monitors {
            let Some(m) = c.monitors.get(&id.0) else { continue };
            let changes = [ledger.changes(&Tracked::Monitor(*id))];
            let covers = |w: &crate::maintenance::Maintenance| w.monitors.contains(id);
            components.push(component(
                m.value.name.clone(),
                &changes,
                true,
                (self.details, windows(&covers)),
                now,
            ));
        }
        for tenant in self.tenants.iter().filter(|t| c.mirrors.tenants.contains_key(*t)) {
            // The mirrors a door may send its visitors to.
            let hosts: Vec<&String> =
                (c.mirrors.mirrors.values()).filter(|m| m.may_serve(tenant)).map(|m| &m.host).collect();
            let changes: Vec<&[Change]> =
                hosts.iter().map(|h| ledger.changes(&Tracked::Mirror((*h).clone()))).collect();
            let covers = |w: &crate::maintenance::Maintenance| hosts.iter().any(|h| w.takes_mirror(h));
            components.push(component(
                tenant.clone(),
                &changes,
                false,
                (self.details, windows(&covers)),
                now,
            ));
        }
        let state = components.iter().map(|x| x.state).filter(|s| *s != PublicState::Unknown).max();
        PublicPage {
            title: self.title.clone(),
            state: state.unwrap_or(PublicState::Unknown),
            components,
            at: now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + s * 1000)
    }

    #[test]
    fn a_cluster_is_as_bad_as_its_worst_line_and_a_tenant_as_good_as_its_best_mirror() {
        let up = [Change { at: at(0), health: Health::Up, why: String::new() }];
        let down = [
            Change { at: at(0), health: Health::Up, why: String::new() },
            Change { at: at(50), health: Health::Down, why: "every address unreachable".into() },
        ];
        let c = component("video".into(), &[&up, &down], true, (false, Vec::new()), at(100));
        assert_eq!(c.state, PublicState::Outage);
        assert_eq!(c.incidents, [PublicIncident { since: at(50), cause: None }], "no cause without details");
        assert_eq!(c.availability_pct, Some(50.0), "its worst line");
        let t = component("t".into(), &[&up, &down], false, (true, Vec::new()), at(100));
        assert_eq!(
            (t.state, t.incidents.len(), t.availability_pct),
            (PublicState::Operational, 0, Some(100.0))
        );
        let d = component("video".into(), &[&down], true, (true, Vec::new()), at(100));
        assert_eq!(d.incidents[0].cause.as_deref(), Some("every address unreachable"));
        assert_eq!(d.days.len(), DAYS as usize);
    }

    #[test]
    fn a_page_is_checked_field_by_field() {
        let page = StatusPage {
            slug: "video".into(),
            title: " Video ".into(),
            clusters: vec![ClusterId(1)],
            monitors: Vec::new(),
            tenants: Vec::new(),
            details: false,
        };
        assert_eq!(page.clone().check().unwrap().title, "Video");
        for (bad, field) in [
            (StatusPage { slug: "Video".into(), ..page.clone() }, "slug"),
            (StatusPage { slug: "-v".into(), ..page.clone() }, "slug"),
            (StatusPage { title: "".into(), ..page.clone() }, "title"),
            (StatusPage { clusters: Vec::new(), ..page.clone() }, "clusters"),
        ] {
            assert_eq!(bad.check().unwrap_err().field(), field);
        }
    }
}
