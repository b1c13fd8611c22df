//! The answer table: every name the server answers, with its answers pre-encoded, built whole
//! from the control plane's revisions and swapped whole ([`Answers::store`]).
//!
//! This module owns the zone semantics of SPEC §9 (which names exist, which zone encloses
//! them, which records and negative answers each gets, which line a client sees). It does no
//! I/O and never fails to build: a name that cannot be served is left out and reported in
//! [`AnswerTable::problems`], so a bad revision never leaves the server without a table.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use foldhash::fast::FixedState;
use hickory_proto::op::{Message, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, NS, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
use vantage_core::geo::Places;
use vantage_core::net::IpNet;

use crate::geo::GeoDb;

use crate::lines::LineChooser;
use crate::memo;
use crate::settings::DnsSettings;
use crate::wire::LineGiven;

/// One cluster's records in one revision: the input of [`AnswerTable::build`], and of
/// [`crate::Publisher::publish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneAnswers {
    /// The cluster's name, for logs and problems.
    pub cluster: String,
    /// The DNS domain (`cdn.example.net`); it is a zone apex.
    pub domain: String,
    /// Further names answered like the domain. An alias inside a served zone is a name of that
    /// zone; any other alias is the apex of a zone of its own.
    pub aliases: Vec<String>,
    /// TTL of the address records and of negative answers, s.
    pub ttl: u32,
    /// The revision number; the SOA serial.
    pub serial: u32,
    /// The lines in priority order (a network claimed by two lines belongs to the first).
    pub lines: Vec<LineAnswers>,
    /// The union of every line, answered at `all.<domain>` and to clients no line matches
    /// when there is no default line.
    pub all: Vec<IpAddr>,
}

impl ZoneAnswers {
    /// The records for a consumer that cannot tell clients apart (a provider without lines):
    /// the default line's (the first with no client networks), else `all`.
    pub fn default_records(&self) -> &[IpAddr] {
        self.default_line().map_or(self.all.as_slice(), |l| l.records.as_slice())
    }

    /// The TTL of [`default_records`](Self::default_records).
    pub fn default_ttl(&self) -> u32 {
        self.default_line().and_then(|l| l.ttl).unwrap_or(self.ttl)
    }

    fn default_line(&self) -> Option<&LineAnswers> {
        self.lines.iter().find(|l| l.is_default())
    }
}

/// One line of a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineAnswers {
    /// The line's name.
    pub name: String,
    /// The client networks it answers; with no network and no place: the default line.
    pub client_networks: Vec<IpNet>,
    /// The places whose clients it answers (by the geo database) when no line's network
    /// holds them.
    pub places: Places,
    /// Its records (IPv4 and IPv6 together).
    pub records: Vec<IpAddr>,
    /// A TTL of its own, shorter than the zone's (while one of its records is suspect);
    /// `None`: the zone's.
    pub ttl: Option<u32>,
}

impl LineAnswers {
    /// The line for clients no other line claims.
    pub fn is_default(&self) -> bool {
        self.client_networks.is_empty() && self.places.is_empty()
    }
}

/// What one cluster answers one client ([`AnswerTable::answers_for`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAnswer {
    /// The cluster's name.
    pub cluster: String,
    /// The line chosen (`all`: no line claims the client and there is no default line).
    pub line: String,
    /// Its records.
    pub records: Vec<IpAddr>,
    /// The ECS scope prefix the choice holds for.
    pub scope: u8,
}

/// Bounds every RRset so the largest answer (with OPT and ECS) fits a 65,535-byte TCP
/// message: 2,000 AAAA records take 56,000 bytes.
const MAX_RRSET: usize = 2000;

/// A response pre-encoded for one (name, type, line): everything after the question, and the
/// header fields that are not copied from the query.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub(crate) aa: bool,
    pub(crate) rcode: u8,
    pub(crate) answers: u16,
    pub(crate) authorities: u16,
    /// Answer and authority sections. Names in it point into the question (offset 12), which
    /// every matching query repeats with the same length, so the bytes stay valid whatever
    /// the query's letter case.
    pub(crate) body: Box<[u8]>,
}

/// Where a name's address records come from.
#[derive(Debug, Clone)]
pub(crate) enum Addresses {
    /// The line chosen for the client, of this cluster (index into `steering`).
    Steered(u32),
    /// The same for everyone (`all.<domain>`, in-zone name servers, empty non-terminals).
    Fixed(Vec<IpAddr>),
}

/// A name that exists.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) zone: u32,
    pub(crate) apex: bool,
    pub(crate) addresses: Addresses,
    /// A and AAAA answers by line choice (one entry when not steered).
    pub(crate) a: Box<[Template]>,
    pub(crate) aaaa: Box<[Template]>,
    /// SOA and NS answers at an apex, NODATA elsewhere.
    pub(crate) soa: Template,
    pub(crate) ns: Template,
    /// NOERROR with no answer, for every other type.
    pub(crate) nodata: Template,
}

/// A zone: its apex records and what negative answers carry.
#[derive(Debug, Clone)]
pub(crate) struct Zone {
    /// The apex as text without the final dot, the `zone` label of the metrics.
    pub(crate) label: String,
    pub(crate) soa: Record,
    pub(crate) ns: Vec<Record>,
    pub(crate) ttl: u32,
    /// Wire length of the apex name.
    pub(crate) apex_len: usize,
    /// The SOA record after its owner name, uncompressed: an NXDOMAIN body is a pointer to
    /// the apex inside the question followed by these bytes.
    pub(crate) soa_tail: Box<[u8]>,
}

/// The line choice and records of a cluster.
#[derive(Debug, Clone)]
pub(crate) struct Steering {
    /// The cluster's name, the `cluster` label of the line counters.
    pub(crate) cluster: String,
    /// The choices' names, the `line` label: each line's, then `all` (no line matched and
    /// there is no default line).
    pub(crate) line_names: Vec<String>,
    pub(crate) chooser: LineChooser,
    /// Records and their TTL per choice: each line, then `all`.
    pub(crate) choices: Vec<(Vec<IpAddr>, u32)>,
}

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// Every answer the server gives, for one state of every cluster.
#[derive(Debug)]
pub struct AnswerTable {
    generation: u64,
    names: HashMap<Box<[u8]>, u32, FixedState>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) zones: Vec<Zone>,
    pub(crate) steering: Vec<Steering>,
    pub(crate) max_udp_payload: u16,
    problems: Vec<String>,
    /// Where clients are, for lines that claim places (`None`: no database; such lines then
    /// answer no client by place).
    geo: Option<Arc<GeoDb>>,
}

/// A name being collected, before templates.
struct Pending {
    name: Name,
    wire: Vec<u8>,
    addresses: Addresses,
    apex: Option<u32>,
}

impl AnswerTable {
    /// A table that serves nothing (every query is REFUSED).
    pub fn empty(settings: &DnsSettings) -> Self {
        AnswerTable::build(Vec::new(), settings)
    }

    /// Builds the table for `clusters` (their order breaks ties: a name claimed twice belongs
    /// to the first claimant).
    pub fn build(clusters: Vec<ZoneAnswers>, settings: &DnsSettings) -> Self {
        let mut problems = Vec::new();
        let mut names = Collector::default();

        // Zones first: every domain, then aliases that no served zone encloses (shortest
        // first, so an alias below another alias joins that alias's zone).
        let mut zone_names: Vec<(Name, usize)> = Vec::new();
        let mut domains: Vec<Option<Name>> = Vec::new();
        for c in &clusters {
            let domain = match parse_name(&c.domain) {
                Ok(n) => n,
                Err(e) => {
                    problems
                        .push(format!("cluster {}: domain {:?}: {e}; cluster left out", c.cluster, c.domain));
                    domains.push(None);
                    continue;
                }
            };
            if zone_names.iter().any(|(z, _)| *z == domain) {
                problems
                    .push(format!("cluster {}: domain {domain} is served for an earlier cluster", c.cluster));
                domains.push(None);
                continue;
            }
            zone_names.push((domain.clone(), domains.len()));
            domains.push(Some(domain));
        }
        let mut aliases: Vec<(Name, usize)> = Vec::new();
        for (ci, c) in clusters.iter().enumerate() {
            if domains[ci].is_none() {
                continue;
            }
            for a in &c.aliases {
                match parse_name(a) {
                    Ok(n) => aliases.push((n, ci)),
                    Err(e) => problems.push(format!("cluster {}: alias {a:?}: {e}; left out", c.cluster)),
                }
            }
        }
        aliases.sort_by_key(|(n, _)| n.num_labels());
        for (alias, ci) in &aliases {
            if !zone_names.iter().any(|(z, _)| z.zone_of(alias)) {
                zone_names.push((alias.clone(), *ci));
            }
        }

        // One steering per served cluster.
        let mut steering = Vec::new();
        let mut steering_of = vec![u32::MAX; clusters.len()];
        for (ci, c) in clusters.iter().enumerate() {
            if domains[ci].is_none() {
                continue;
            }
            steering_of[ci] = steering.len() as u32;
            let mut choices: Vec<(Vec<IpAddr>, u32)> =
                c.lines.iter().map(|l| (canonical(&l.records), l.ttl.unwrap_or(c.ttl).min(c.ttl))).collect();
            choices.push((canonical(&c.all), c.ttl));
            let line_names = c.lines.iter().map(|l| l.name.clone()).chain(["all".to_owned()]).collect();
            steering.push(Steering {
                cluster: c.cluster.clone(),
                line_names,
                chooser: LineChooser::new(&c.lines),
                choices,
            });
        }

        // The apexes, with SOA and NS.
        let mut zones: Vec<Zone> = Vec::new();
        for (apex, ci) in &zone_names {
            let c = &clusters[*ci];
            let (soa, ns) = match apex_records(apex, c, settings) {
                Ok(r) => r,
                Err(e) => {
                    problems.push(format!("zone {apex}: {e}; left out"));
                    continue;
                }
            };
            let zi = zones.len() as u32;
            zones.push(Zone {
                label: apex.to_ascii().trim_end_matches('.').to_owned(),
                ttl: c.ttl,
                apex_len: wire(apex).len(),
                soa_tail: record_tail(&soa),
                soa,
                ns,
            });
            names.claim(apex.clone(), Addresses::Steered(steering_of[*ci]), Some(zi), &mut problems);
        }
        // `all.<domain>`, then aliases inside zones, then in-zone name servers.
        for (ci, c) in clusters.iter().enumerate() {
            let Some(domain) = &domains[ci] else { continue };
            match domain.prepend_label("all") {
                Ok(all) => names.claim(all, Addresses::Fixed(canonical(&c.all)), None, &mut problems),
                Err(e) => problems.push(format!("cluster {}: all.{domain}: {e}", c.cluster)),
            }
        }
        for (alias, ci) in &aliases {
            if zone_names.iter().any(|(z, c)| z == alias && c == ci) {
                continue; // the apex of its own zone, claimed above
            }
            names.claim(alias.clone(), Addresses::Steered(steering_of[*ci]), None, &mut problems);
        }
        for ns in nameserver_names(&zone_names, settings, &mut problems) {
            if zone_names.iter().any(|(z, _)| z.zone_of(&ns)) && !names.contains(&ns) {
                names.claim(
                    ns,
                    Addresses::Fixed(canonical(&settings.nameserver_addresses)),
                    None,
                    &mut problems,
                );
            }
        }
        // Empty non-terminals: the ancestors of a name, up to its zone's apex, exist too.
        let mut i = 0;
        while i < names.pending.len() {
            if names.pending[i].apex.is_none() {
                let mut up = names.pending[i].name.base_name();
                while up.num_labels() > 0 && !names.contains(&up) {
                    names.claim(up.clone(), Addresses::Fixed(Vec::new()), None, &mut problems);
                    up = up.base_name();
                }
            }
            i += 1;
        }

        // Each name's zone is its closest enclosing apex.
        let apex_of: HashMap<Vec<u8>, u32, FixedState> =
            names.pending.iter().filter_map(|p| p.apex.map(|z| (p.wire.clone(), z))).collect();
        let mut table = AnswerTable {
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
            names: HashMap::default(),
            nodes: Vec::with_capacity(names.pending.len()),
            zones,
            steering,
            max_udp_payload: settings.max_udp_payload.clamp(512, 4096),
            problems,
            geo: None,
        };
        for p in names.pending {
            let Some(zone) = p.apex.or_else(|| enclosing(&p.wire, &apex_of)) else { continue };
            let node = table.node(p.name, zone, p.apex.is_some(), p.addresses);
            table.names.insert(p.wire.into_boxed_slice(), table.nodes.len() as u32);
            table.nodes.push(node);
        }
        table
    }

    /// The table placing clients with `geo` (for the lines that claim places).
    pub fn with_geo(mut self, geo: Option<Arc<GeoDb>>) -> Self {
        self.geo = geo;
        // Choices made with the table's former databases are not this table's.
        self.generation = GENERATION.fetch_add(1, Ordering::Relaxed);
        self
    }

    /// Names that could not be served, and why. Empty for a table built from valid input.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The zones served, by apex (no final dot).
    pub fn zone_names(&self) -> Vec<&str> {
        self.zones.iter().map(|z| z.label.as_str()).collect()
    }

    /// Each steered cluster's name and its choices' names, by steering index.
    pub(crate) fn line_names(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.steering.iter().map(|s| (s.cluster.as_str(), s.line_names.as_slice()))
    }

    /// The cluster and line names of a (steering, choice).
    pub(crate) fn line_name(&self, steering: u32, choice: u32) -> Option<(&str, &str)> {
        let s = self.steering.get(steering as usize)?;
        Some((s.cluster.as_str(), s.line_names.get(choice as usize)?.as_str()))
    }

    /// The line choice of a steered node as the counters name it, with the address it counts
    /// as demand for (`None`: it does not).
    pub(crate) fn line_of(node: &Node, choice: u32, demand: Option<IpAddr>) -> Option<LineGiven> {
        match node.addresses {
            Addresses::Steered(steering) => Some(LineGiven { steering, choice, demand }),
            Addresses::Fixed(_) => None,
        }
    }

    /// Changes with every table built; workers refresh their per-table state when it changes.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The node of an exact name, given as lower-case wire format.
    pub(crate) fn lookup(&self, lower_wire: &[u8]) -> Option<&Node> {
        self.names.get(lower_wire).and_then(|i| self.nodes.get(*i as usize))
    }

    /// The zone enclosing a name that does not exist (lower-case wire format): the zone of its
    /// closest existing ancestor. `None`: outside every zone.
    pub(crate) fn enclosing_zone(&self, lower_wire: &[u8]) -> Option<u32> {
        let mut off = 0usize;
        while let Some(&len) = lower_wire.get(off) {
            if len == 0 {
                return None;
            }
            off += usize::from(len) + 1;
            if let Some(node) = lower_wire.get(off..).and_then(|s| self.lookup(s)) {
                return Some(node.zone);
            }
        }
        None
    }

    /// Address records of a node for a line choice and their TTL (for the full path); a
    /// fixed node's records carry the zone's TTL.
    pub(crate) fn addresses<'a>(&'a self, node: &'a Node, choice: u32, zone_ttl: u32) -> (&'a [IpAddr], u32) {
        match &node.addresses {
            Addresses::Fixed(a) => (a, zone_ttl),
            Addresses::Steered(s) => self
                .steering
                .get(*s as usize)
                .and_then(|s| s.choices.get(choice as usize))
                .map_or((&[][..], zone_ttl), |(ips, ttl)| (ips.as_slice(), *ttl)),
        }
    }

    /// What each cluster answers a client at `client` (its ECS address, or a resolver's): the
    /// line chosen, its records and the ECS scope, as a query would be answered now.
    pub fn answers_for(&self, client: IpAddr) -> Vec<ClientAnswer> {
        let locate = |ip| self.geo.as_ref().map(|g| g.locate(ip));
        (self.steering.iter())
            .map(|s| {
                let (choice, scope) = s.chooser.choose(client, locate);
                let choice = choice as usize;
                ClientAnswer {
                    cluster: s.cluster.clone(),
                    line: s.line_names.get(choice).cloned().unwrap_or_default(),
                    records: s.choices.get(choice).map(|(r, _)| r.clone()).unwrap_or_default(),
                    scope,
                }
            })
            .collect()
    }

    /// The line choice and ECS scope for a client address, for a steered node.
    /// Remembered by the thread for the next queries of the same client (`memo`).
    pub(crate) fn choose(&self, node: &Node, client: IpAddr) -> Option<(u32, u8)> {
        let Addresses::Steered(i) = node.addresses else { return None };
        let s = self.steering.get(i as usize)?;
        Some(memo::remembered(self.generation, i, client, || {
            s.chooser.choose(client, |ip| self.geo.as_ref().map(|g| g.locate(ip)))
        }))
    }

    fn node(&self, name: Name, zone: u32, apex: bool, addresses: Addresses) -> Node {
        let Some(z) = self.zones.get(zone as usize) else {
            // Unreachable by construction (zone indices come from `self.zones`); an empty
            // node keeps the build infallible.
            return self.bare_node(&name, zone, apex, addresses);
        };
        let negative = std::slice::from_ref(&z.soa);
        let nodata = encode(&name, RecordType::NULL, ResponseCode::NoError, &[], negative);
        let choices: Vec<(Vec<IpAddr>, u32)> = match &addresses {
            Addresses::Fixed(a) => vec![(a.clone(), z.ttl)],
            Addresses::Steered(s) => {
                self.steering.get(*s as usize).map(|s| s.choices.clone()).unwrap_or_default()
            }
        };
        let a = choices
            .iter()
            .map(|(ips, ttl)| {
                let rrs = address_records(&name, *ttl, ips, RecordType::A);
                let auth = if rrs.is_empty() { negative } else { &[] };
                encode(&name, RecordType::A, ResponseCode::NoError, &rrs, auth)
            })
            .collect();
        let aaaa = choices
            .iter()
            .map(|(ips, ttl)| {
                let rrs = address_records(&name, *ttl, ips, RecordType::AAAA);
                let auth = if rrs.is_empty() { negative } else { &[] };
                encode(&name, RecordType::AAAA, ResponseCode::NoError, &rrs, auth)
            })
            .collect();
        let (soa, ns) = if apex {
            (
                encode(&name, RecordType::SOA, ResponseCode::NoError, negative, &[]),
                encode(&name, RecordType::NS, ResponseCode::NoError, &z.ns, &[]),
            )
        } else {
            (nodata.clone(), nodata.clone())
        };
        Node { zone, apex, addresses, a, aaaa, soa, ns, nodata }
    }

    fn bare_node(&self, name: &Name, zone: u32, apex: bool, addresses: Addresses) -> Node {
        let t = encode(name, RecordType::NULL, ResponseCode::ServFail, &[], &[]);
        Node {
            zone,
            apex,
            addresses,
            a: Box::new([t.clone()]),
            aaaa: Box::new([t.clone()]),
            soa: t.clone(),
            ns: t.clone(),
            nodata: t,
        }
    }
}

/// The current table, swapped whole. Readers (the server's workers) never wait for writers.
#[derive(Debug)]
pub struct Answers(ArcSwap<AnswerTable>);

impl Answers {
    /// A handle serving `table` from the first query on.
    pub fn new(table: AnswerTable) -> Self {
        Answers(ArcSwap::from_pointee(table))
    }

    /// Replaces the table; queries already being answered finish with the old one.
    pub fn store(&self, table: AnswerTable) {
        self.0.store(Arc::new(table));
    }

    /// The current table.
    pub fn load(&self) -> Arc<AnswerTable> {
        self.0.load_full()
    }

    /// The current table without touching its reference count (the hot path).
    pub(crate) fn guard(&self) -> arc_swap::Guard<Arc<AnswerTable>> {
        self.0.load()
    }
}

/// Names collected for a table; the first claim of a name wins.
#[derive(Default)]
struct Collector {
    pending: Vec<Pending>,
    index: HashMap<Vec<u8>, usize, FixedState>,
}

impl Collector {
    fn contains(&self, name: &Name) -> bool {
        self.index.contains_key(&wire(name))
    }

    fn claim(&mut self, name: Name, addresses: Addresses, apex: Option<u32>, problems: &mut Vec<String>) {
        let w = wire(&name);
        if self.index.contains_key(&w) {
            problems.push(format!("{name} is already answered for an earlier claimant; left out here"));
            return;
        }
        self.index.insert(w.clone(), self.pending.len());
        self.pending.push(Pending { name, wire: w, addresses, apex });
    }
}

fn enclosing(wire: &[u8], apexes: &HashMap<Vec<u8>, u32, FixedState>) -> Option<u32> {
    let mut off = 0usize;
    while let Some(&len) = wire.get(off) {
        if let Some(z) = wire.get(off..).and_then(|s| apexes.get(s)) {
            return Some(*z);
        }
        if len == 0 {
            return None;
        }
        off += usize::from(len) + 1;
    }
    None
}

fn canonical(records: &[IpAddr]) -> Vec<IpAddr> {
    records.iter().map(|ip| ip.to_canonical()).collect()
}

/// A lower-case fully qualified name from text, or why not.
pub(crate) fn parse_name(text: &str) -> Result<Name, String> {
    let t = text.trim().trim_end_matches('.');
    if t.is_empty() {
        return Err("empty name".into());
    }
    let mut n = Name::from_ascii(t).map_err(|e| e.to_string())?.to_lowercase();
    n.set_fqdn(true);
    Ok(n)
}

/// Lower-case wire format of a name (labels, then the root).
pub(crate) fn wire(name: &Name) -> Vec<u8> {
    let mut w = Vec::with_capacity(name.len() + 2);
    for label in name.iter() {
        w.push(label.len() as u8);
        w.extend(label.iter().map(u8::to_ascii_lowercase));
    }
    w.push(0);
    w
}

/// Every name-server name of the served zones: the configured ones, or `ns1.<zone>` when
/// none is configured (or none of the configured ones is valid, as `apex_records` does).
fn nameserver_names(
    zones: &[(Name, usize)],
    settings: &DnsSettings,
    problems: &mut Vec<String>,
) -> Vec<Name> {
    let configured: Vec<Name> = settings
        .nameservers
        .iter()
        .filter_map(|n| match parse_name(n) {
            Ok(n) => Some(n),
            Err(e) => {
                problems.push(format!("name server {n:?}: {e}"));
                None
            }
        })
        .collect();
    if configured.is_empty() {
        zones.iter().filter_map(|(z, _)| z.prepend_label("ns1").ok()).collect()
    } else {
        configured
    }
}

fn apex_records(apex: &Name, c: &ZoneAnswers, s: &DnsSettings) -> Result<(Record, Vec<Record>), String> {
    // Invalid configured names are reported by `nameserver_names`; with none left, the
    // default keeps the zone served.
    let mut nameservers: Vec<Name> = s.nameservers.iter().filter_map(|n| parse_name(n).ok()).collect();
    if nameservers.is_empty() {
        nameservers.push(apex.prepend_label("ns1").map_err(|e| e.to_string())?);
    }
    let Some(mname) = nameservers.first().cloned() else {
        return Err("no name server name".into());
    };
    let rname = match &s.hostmaster {
        Some(h) => parse_name(h)?,
        None => apex.prepend_label("hostmaster").map_err(|e| e.to_string())?,
    };
    // The SOA's own TTL bounds negative caching together with MINIMUM (RFC 2308), so both
    // are the cluster's TTL: a name that appears is seen within one TTL.
    let soa = SOA::new(
        mname,
        rname,
        c.serial,
        clamp_i32(s.soa_refresh),
        clamp_i32(s.soa_retry),
        clamp_i32(s.soa_expire),
        c.ttl,
    );
    let soa = Record::from_rdata(apex.clone(), c.ttl, RData::SOA(soa));
    let ns =
        nameservers.into_iter().map(|n| Record::from_rdata(apex.clone(), c.ttl, RData::NS(NS(n)))).collect();
    Ok((soa, ns))
}

fn clamp_i32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

pub(crate) fn address_records(name: &Name, ttl: u32, ips: &[IpAddr], rtype: RecordType) -> Vec<Record> {
    ips.iter()
        .filter_map(|ip| match (ip, rtype) {
            (IpAddr::V4(v4), RecordType::A) => Some(RData::A(A(*v4))),
            (IpAddr::V6(v6), RecordType::AAAA) => Some(RData::AAAA(AAAA(*v6))),
            _ => None,
        })
        .take(MAX_RRSET)
        .map(|rd| Record::from_rdata(name.clone(), ttl, rd))
        .collect()
}

/// Pre-encodes a response to (`name`, `qtype`) with hickory-proto, keeping what follows the
/// question. Encoding can only fail on a message over 64 KiB, which [`MAX_RRSET`] prevents;
/// a failure still yields a valid (SERVFAIL) template rather than a panic.
fn encode(
    name: &Name,
    qtype: RecordType,
    rcode: ResponseCode,
    answers: &[Record],
    authorities: &[Record],
) -> Template {
    let mut m = Message::response(0, OpCode::Query);
    m.metadata.authoritative = true;
    m.metadata.response_code = rcode;
    m.add_query(Query::query(name.clone(), qtype));
    m.add_answers(answers.iter().cloned());
    m.add_authorities(authorities.iter().cloned());
    let question_end = 12 + wire(name).len() + 4;
    match m.to_vec() {
        Ok(bytes) if bytes.len() >= question_end => Template {
            aa: true,
            rcode: rcode.low(),
            answers: answers.len() as u16,
            authorities: authorities.len() as u16,
            body: bytes[question_end..].into(),
        },
        _ => Template {
            aa: false,
            rcode: ResponseCode::ServFail.low(),
            answers: 0,
            authorities: 0,
            body: Box::new([]),
        },
    }
}

/// A record's bytes after its owner name (type, class, TTL, length, RDATA), without name
/// compression so they can follow any owner.
fn record_tail(record: &Record) -> Box<[u8]> {
    let mut bytes = Vec::with_capacity(128);
    let mut enc = BinEncoder::new(&mut bytes);
    enc.set_canonical_form(true);
    if record.emit(&mut enc).is_err() {
        return Box::new([]);
    }
    let owner = wire(&record.name).len();
    bytes.get(owner..).map(Into::into).unwrap_or_default()
}
