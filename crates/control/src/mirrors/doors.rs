//! Doors (SPEC §6): which mirror a visitor is sent to. A [`Doors`] snapshot holds what a
//! choice needs — each mirror's record, verdict and failing regions, the regions' client
//! networks and places, and the settings — so that the redirect endpoint chooses from the published view
//! without waiting for the control core, which rebuilds it whenever any of that changes.

use std::collections::BTreeMap;
use std::net::IpAddr;

use vantage_core::geo::{Place, Places, claimant};
use vantage_core::mirror::{Candidate, DoorQuery, Mirror, MirrorSettings, MirrorVerdict, RegionObservation};
use vantage_core::net::IpNet;

use super::Tenant;

/// One mirror as a door sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct DoorMirror {
    /// The record.
    pub mirror: Mirror,
    pub verdict: MirrorVerdict,
    /// Region statuses.
    pub regions: BTreeMap<String, RegionObservation>,
    /// Behind its reference by more than its freshness check allows: out of rotation.
    pub stale: bool,
    /// In an open maintenance window: out of rotation.
    pub in_maintenance: bool,
}

/// What every door choice reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Doors {
    /// Every mirror, by host.
    pub mirrors: Vec<DoorMirror>,
    /// Tenants that exist, by name (whether each takes degraded mirrors when no live one is
    /// left).
    pub tenants: BTreeMap<String, Tenant>,
    /// Client networks and their region codes, longest prefix first.
    pub networks: Vec<(IpNet, String)>,
    /// The places regions claim and their codes, in the regions' order (by code).
    pub places: Vec<(Places, String)>,
    /// Mirror settings (scheme, trusted proxies, the client-region default).
    pub settings: MirrorSettings,
    /// For the tenants that order their mirrors by latency: each (tenant, region)'s mirrors
    /// by host, preferred first.
    pub latency: BTreeMap<(String, String), Vec<String>>,
}

/// Why no mirror was chosen. The words reveal nothing of the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoMirror {
    /// The tenant does not exist.
    UnknownTenant,
    /// No mirror passes the filters.
    NoneEligible,
}

impl NoMirror {
    /// What the visitor is told.
    pub fn reason(self) -> &'static str {
        match self {
            // A tenant's name is in every URL its visitors use: saying it does not exist
            // reveals nothing, and tells a mistyped link from an outage.
            NoMirror::UnknownTenant => "no such tenant",
            NoMirror::NoneEligible => "no mirror is available for this tenant now",
        }
    }
}

/// A visitor's request at a door.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Visit {
    /// The tenant asked for (`None`: any mirror).
    pub tenant: Option<String>,
    /// Regions in which the chosen mirror must not be failing.
    pub exclude_regions: Vec<String>,
    /// The visitor's address, when known.
    pub client: Option<IpAddr>,
    /// Where the geo database places the visitor (`None`: no database, or no address).
    pub place: Option<Place>,
}

impl Doors {
    /// The region of a client at `ip`, placed at `place`: the one whose client networks hold
    /// `ip` (the longest prefix wins), else the one claiming the place most specifically (an
    /// AS, a country, a continent; the first region by code among equals).
    pub fn region_of(&self, ip: IpAddr, place: Option<&Place>) -> Option<&str> {
        // A dual-stack listener or a proxy may give an IPv4 visitor as IPv4-mapped IPv6.
        let ip = ip.to_canonical();
        if let Some((_, r)) = self.networks.iter().find(|(n, _)| n.contains(ip)) {
            return Some(r);
        }
        claimant(self.places.iter().map(|(p, r)| (r.as_str(), p)), place?)
    }

    /// The filter stack in its order — verdict live (or degraded, when none is and the
    /// tenant opted in), tenant allowed, weight above 0, not failing in an excluded region
    /// (with the visitor's own region added unless the settings say otherwise) — then a
    /// weighted choice by `roll` (any uniform u64). A stale mirror is no candidate at all: it
    /// answers, with old files; nor is one in maintenance. A visit for no tenant in particular takes live mirrors only:
    /// there is no tenant to have opted in.
    pub fn choose(&self, v: &Visit, roll: u64) -> Result<&Mirror, NoMirror> {
        let tenant = match &v.tenant {
            Some(t) => Some(self.tenants.get(t).ok_or(NoMirror::UnknownTenant)?),
            None => None,
        };
        let mut exclude = v.exclude_regions.clone();
        let region = v.client.and_then(|ip| self.region_of(ip, v.place.as_ref()));
        if self.settings.exclude_client_region()
            && let Some(r) = region
        {
            exclude.push(r.to_owned());
        }
        let candidates: Vec<Candidate<'_>> = self
            .mirrors
            .iter()
            .filter(|m| !m.stale && !m.in_maintenance)
            .map(|m| Candidate { mirror: &m.mirror, verdict: m.verdict, regions: &m.regions })
            .collect();
        let q = DoorQuery {
            tenant: v.tenant.clone(),
            exclude_regions: exclude,
            fallback_to_degraded: tenant.is_some_and(|t| t.fallback_to_degraded),
        };
        let survivors = vantage_core::mirror::door_filter(&candidates, &q);
        // By latency where the tenant asks and the visitor's region has an order: the first
        // survivor of that order.
        let order = (v.tenant.as_ref().zip(region))
            .filter(|_| tenant.is_some_and(|t| t.order_by_latency))
            .and_then(|(t, r)| self.latency.get(&(t.clone(), r.to_owned())));
        if let Some(first) = order
            .into_iter()
            .flatten()
            .find_map(|host| survivors.iter().map(|i| candidates[*i].mirror).find(|m| &m.host == host))
        {
            return Ok(first);
        }
        let weights: Vec<u32> = survivors.iter().map(|i| candidates[*i].mirror.weight).collect();
        let pick = vantage_core::mirror::choose_weighted(&weights, roll).ok_or(NoMirror::NoneEligible)?;
        Ok(candidates[survivors[pick]].mirror)
    }

    /// Where a redirect sends the visitor: the mirror with `path` (and the query) appended.
    pub fn location(&self, m: &Mirror, path: &str, query: Option<&str>) -> String {
        join(&m.base(self.settings.scheme()), path, query)
    }

    /// Where a tenant's visitors go when no mirror may serve them: its fallback origin joined
    /// with `path` and `query`, when it has one.
    pub fn fallback(&self, tenant: &str, path: &str, query: Option<&str>) -> Option<String> {
        let base = self.tenants.get(tenant)?.fallback_url.as_deref()?;
        Some(join(base, path, query))
    }
}

/// `base` (ending in `/`) joined with `path` with one slash, and the visitor's query: an empty
/// path is the base itself.
fn join(base: &str, path: &str, query: Option<&str>) -> String {
    let mut url = format!("{base}{}", path.trim_start_matches('/'));
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(q);
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use vantage_core::Timestamp;
    use vantage_core::mirror::{MirrorInput, RegionStatus};

    fn mirror(host: &str, tenants: &[&str], weight: i64) -> Mirror {
        Mirror::try_from(MirrorInput {
            host: host.into(),
            tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
            weight,
            ..Default::default()
        })
        .unwrap()
    }

    fn regions(list: &[(&str, RegionStatus)]) -> BTreeMap<String, RegionObservation> {
        list.iter()
            .map(|(r, s)| {
                ((*r).to_owned(), RegionObservation { status: *s, latency: 10, at: Timestamp::EPOCH })
            })
            .collect()
    }

    fn tenant(name: &str, fallback_to_degraded: bool) -> Tenant {
        Tenant {
            name: name.into(),
            note: String::new(),
            fallback_to_degraded,
            fallback_url: None,
            order_by_latency: false,
        }
    }

    fn doors() -> Doors {
        let ok = regions(&[("us1", RegionStatus::Ok), ("ru1", RegionStatus::Ok)]);
        let live = |m: Mirror, r: &BTreeMap<String, RegionObservation>| DoorMirror {
            mirror: m,
            verdict: MirrorVerdict::Live,
            regions: r.clone(),
            stale: false,
            in_maintenance: false,
        };
        Doors {
            mirrors: vec![
                live(mirror("a.example.net", &[], 1), &ok),
                live(mirror("b.example.net", &["t2"], 1), &ok),
                live(mirror("c.example.net", &[], 0), &ok),
                live(
                    mirror("d.example.net", &[], 3),
                    &regions(&[("us1", RegionStatus::Ok), ("ru1", RegionStatus::Refused)]),
                ),
                DoorMirror { verdict: MirrorVerdict::Degraded, ..live(mirror("e.example.net", &[], 5), &ok) },
            ],
            tenants: [tenant("t1", false), tenant("t2", false), tenant("t3", true)]
                .into_iter()
                .map(|t| (t.name.clone(), t))
                .collect(),
            networks: vec![("198.51.100.0/24".parse().unwrap(), "ru1".to_owned())],
            places: vec![(
                Places::new(vec!["RU".parse().unwrap()], Vec::new(), Vec::new()).unwrap(),
                "ru1".to_owned(),
            )],
            settings: MirrorSettings::default(),
            latency: BTreeMap::new(),
        }
    }

    fn hosts(d: &Doors, v: &Visit) -> BTreeSet<String> {
        (0..64).filter_map(|roll| d.choose(v, roll).ok()).map(|m| m.host.clone()).collect()
    }

    #[test]
    fn the_filter_stack_and_the_visitors_region() {
        let d = doors();
        let t1 = Visit { tenant: Some("t1".into()), ..Visit::default() };
        assert_eq!(hosts(&d, &t1), ["a.example.net".to_owned(), "d.example.net".to_owned()].into());
        let from_ru = Visit { client: Some("198.51.100.9".parse().unwrap()), ..t1.clone() };
        assert_eq!(
            hosts(&d, &from_ru),
            ["a.example.net".to_owned()].into(),
            "d fails in the visitor's region"
        );
        let placed = |country: &str| Place { country: Some(country.parse().unwrap()), ..Place::default() };
        let from_moscow =
            Visit { client: Some("203.0.113.5".parse().unwrap()), place: Some(placed("RU")), ..t1.clone() };
        assert_eq!(hosts(&d, &from_moscow), ["a.example.net".to_owned()].into(), "the region by country");
        let elsewhere = Visit { place: Some(placed("US")), ..from_moscow.clone() };
        assert_eq!(hosts(&d, &elsewhere).len(), 2, "a place no region claims");
        // The network before the place, for a visitor given as IPv4-mapped IPv6 too.
        let mapped: IpAddr = "::ffff:198.51.100.9".parse().unwrap();
        assert_eq!(d.region_of(mapped, Some(&placed("US"))), Some("ru1"));
        assert_eq!(d.region_of("198.51.100.9".parse().unwrap(), Some(&placed("US"))), Some("ru1"));
        let excluded = Visit { exclude_regions: vec!["ru1".into()], ..t1.clone() };
        assert_eq!(hosts(&d, &excluded), ["a.example.net".to_owned()].into());
        assert_eq!(
            d.choose(&Visit { tenant: Some("nobody".into()), ..Visit::default() }, 0),
            Err(NoMirror::UnknownTenant)
        );
        let off = Doors {
            settings: MirrorSettings::parse(vantage_core::mirror::MirrorSettingsInput {
                exclude_client_region: false,
                ..Default::default()
            })
            .unwrap(),
            ..d.clone()
        };
        assert_eq!(hosts(&off, &from_ru).len(), 2, "the default can be turned off");
        let mut stale = d.clone();
        stale.mirrors[0].stale = true;
        assert_eq!(hosts(&stale, &from_ru), BTreeSet::new(), "a stale mirror leaves rotation");
        let t3_from_ru = Visit { tenant: Some("t3".into()), ..from_ru.clone() };
        assert_eq!(
            hosts(&stale, &t3_from_ru),
            ["e.example.net".to_owned()].into(),
            "without a live one, the degraded one serves the tenant that opted in"
        );
        let none = Doors { mirrors: Vec::new(), ..d };
        assert_eq!(none.choose(&t1, 0), Err(NoMirror::NoneEligible));
    }

    #[test]
    fn a_tenant_ordered_by_latency_sends_each_region_to_its_first_eligible_mirror() {
        let mut d = doors();
        d.tenants.get_mut("t1").unwrap().order_by_latency = true;
        let order = |hosts: &[&str]| hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>();
        d.latency.insert(("t1".into(), "ru1".into()), order(&["d.example.net", "a.example.net"]));
        let from_ru = Visit {
            tenant: Some("t1".into()),
            client: Some("198.51.100.9".parse().unwrap()),
            ..Visit::default()
        };
        // d leads the order but fails in the visitor's region: the next eligible one, every time.
        assert_eq!(hosts(&d, &from_ru), ["a.example.net".to_owned()].into());
        let anywhere = MirrorSettings::parse(vantage_core::mirror::MirrorSettingsInput {
            exclude_client_region: false,
            ..d.settings.clone().into()
        })
        .unwrap();
        let off = Doors { settings: anywhere, ..d.clone() };
        assert_eq!(hosts(&off, &from_ru), ["d.example.net".to_owned()].into(), "the first of the order");
        // A visitor of no known region, and a tenant that does not ask: by weight.
        let nowhere = Visit { client: Some("192.0.2.1".parse().unwrap()), ..from_ru.clone() };
        assert_eq!(hosts(&off, &nowhere).len(), 2);
        let mut by_weight = off.clone();
        by_weight.tenants.get_mut("t1").unwrap().order_by_latency = false;
        assert_eq!(hosts(&by_weight, &from_ru).len(), 2);
    }

    #[test]
    fn the_redirect_appends_path_and_query() {
        let d = doors();
        let m = &d.mirrors[0].mirror;
        assert_eq!(
            d.location(m, "pool/main/x.deb", Some("a=1")),
            "https://a.example.net/pool/main/x.deb?a=1"
        );
        assert_eq!(d.location(m, "", None), "https://a.example.net/");
        let based = Mirror::try_from(MirrorInput {
            host: "b.example.net".into(),
            base_url: Some("http://b.example.net:8080/debian".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            d.location(&based, "/pool/x.deb", Some("a=1")),
            "http://b.example.net:8080/debian/pool/x.deb?a=1"
        );
        assert_eq!(d.location(&based, "", Some("a=1")), "http://b.example.net:8080/debian/?a=1");
    }

    #[test]
    fn a_tenant_without_an_eligible_mirror_falls_back_to_its_origin_only_if_it_has_one() {
        let mut d = doors();
        let origin =
            Tenant { fallback_url: Some("https://origin.example.net/debian/".into()), ..tenant("t9", false) };
        d.tenants.insert("t9".into(), origin);
        assert_eq!(
            d.fallback("t9", "pool/x.deb", None).as_deref(),
            Some("https://origin.example.net/debian/pool/x.deb")
        );
        assert_eq!(d.fallback("t1", "pool/x.deb", None), None);
        assert_eq!(d.fallback("nosuch", "x", None), None);
        assert_eq!(NoMirror::UnknownTenant.reason(), "no such tenant");
    }
}
