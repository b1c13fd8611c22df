//! The fast path: recognises the common query shape by hand and answers from the table's
//! pre-encoded templates, patching in the message ID, the flags copied from the query, the
//! question as the client spelled it, and the OPT record (EDNS size, DO, ECS with its scope).
//!
//! The common shape is: a query (QR clear, opcode QUERY), one question of class IN with an
//! uncompressed name, no answer or authority records, and at most one additional record, an
//! EDNS(0) OPT with any options (a Client Subnet option is read strictly). Anything else —
//! and anything this module is unsure about — is handed to [`crate::slow`], which parses
//! with hickory-proto. Every read is bounds-checked: no input can make this module panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::metrics::Rcode;
use crate::table::{AnswerTable, Template};

/// How the answer travels: UDP answers are truncated to the client's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// What was answered, for the counters. Opaque outside this crate: two are compared, not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    pub(crate) zone: Option<u32>,
    /// The line a steered address answer gave whole (not truncated).
    pub(crate) line: Option<LineGiven>,
    pub(crate) rcode: Rcode,
    pub(crate) truncated: bool,
}

/// The line a steered address answer gave, and who it was chosen for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineGiven {
    /// The steering of the table (a cluster's names).
    pub(crate) steering: u32,
    /// The line within it.
    pub(crate) choice: u32,
    /// The address that chose it — the client subnet's, else the sender's — when the answer
    /// counts as demand: an A (or ANY) query, once per resolution, as a dual-stack resolver
    /// asks A and AAAA alike.
    pub(crate) demand: Option<IpAddr>,
}

impl Answered {
    /// An answer on `zone` (a steered address answer: on `line` too). The line counts only
    /// for an answer given whole: a truncated one gave no records, and the client's retry over
    /// TCP is the one counted.
    pub(crate) fn new(zone: Option<u32>, line: Option<LineGiven>, rcode: Rcode, truncated: bool) -> Self {
        let line = line.filter(|_| rcode == Rcode::NoError && !truncated);
        Answered { zone, line, rcode, truncated }
    }
}

/// Answers a query into `out`: the fast path when it recognises the query, else the full
/// path. `None`: drop it (not a query, or too short to answer).
pub(crate) fn respond(
    table: &AnswerTable,
    query: &[u8],
    client: IpAddr,
    transport: Transport,
    out: &mut Vec<u8>,
) -> Option<Answered> {
    match fast(table, query, client, transport, out) {
        Some(a) => Some(a),
        None => crate::slow::respond(table, query, client, transport, out),
    }
}

/// Which path [`answer_on`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// What the server does: the fast path, else the full path.
    Server,
    /// The fast path only (`None` where it does not recognise the query).
    Fast,
    /// The full path only, whatever the query.
    Full,
}

/// Answers `query` into `out` on the chosen path, as the server would for `client` over
/// `transport`; `None`: dropped (or, for [`Path::Fast`], not recognised). It exists for the
/// fuzz targets in `fuzz/`, which check from outside this crate that no datagram panics either
/// path and that wherever the fast path answers, the full path answers alike.
pub fn answer_on(
    table: &AnswerTable,
    query: &[u8],
    client: IpAddr,
    transport: Transport,
    path: Path,
    out: &mut Vec<u8>,
) -> Option<Answered> {
    match path {
        Path::Server => respond(table, query, client, transport, out),
        Path::Fast => fast(table, query, client, transport, out),
        Path::Full => crate::slow::respond(table, query, client, transport, out),
    }
}

/// The client's EDNS Client Subnet option, validated (RFC 7871 §6).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ecs {
    /// The address, host bits clear.
    pub(crate) addr: IpAddr,
    pub(crate) source: u8,
}

#[derive(Debug, Clone, Copy)]
struct Opt {
    udp_size: u16,
    dnssec_ok: bool,
    ecs: Option<Ecs>,
}

const TYPE_A: u16 = 1;
const TYPE_NS: u16 = 2;
const TYPE_SOA: u16 = 6;
const TYPE_AAAA: u16 = 28;
const TYPE_OPT: u16 = 41;
const CLASS_IN: u16 = 1;
const OPTION_ECS: u16 = 8;

/// Types the fast path leaves to the full path: meta and transfer types, and ANY.
fn needs_full_path(qtype: u16) -> bool {
    matches!(qtype, 0 | TYPE_OPT | 249..=255)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The fast path. `None`: not the common shape, or not sure — use the full path.
pub(crate) fn fast(
    table: &AnswerTable,
    query: &[u8],
    client: IpAddr,
    transport: Transport,
    out: &mut Vec<u8>,
) -> Option<Answered> {
    let header = query.get(..12)?;
    // QR clear and opcode QUERY; exactly one question; nothing but an optional OPT after it.
    if header[2] & 0xf8 != 0 || u16_at(header, 4)? != 1 || u16_at(header, 6)? != 0 || u16_at(header, 8)? != 0
    {
        return None;
    }
    let additionals = u16_at(header, 10)?;
    if additionals > 1 {
        return None;
    }

    let mut lower = [0u8; 255];
    let mut pos = 12usize;
    let mut n = 0usize;
    loop {
        let len = usize::from(*query.get(pos)?);
        if len & 0xc0 != 0 || n + len + 1 > lower.len() {
            return None;
        }
        let label = query.get(pos..=pos + len)?;
        for (d, s) in lower[n..=n + len].iter_mut().zip(label) {
            *d = s.to_ascii_lowercase();
        }
        n += len + 1;
        pos += len + 1;
        if len == 0 {
            break;
        }
    }
    let qtype = u16_at(query, pos)?;
    if u16_at(query, pos + 2)? != CLASS_IN || needs_full_path(qtype) {
        return None;
    }
    let question = query.get(12..pos + 4)?;
    pos += 4;

    let opt = if additionals == 1 {
        Some(read_opt(query, pos)?)
    } else if pos == query.len() {
        None
    } else {
        return None;
    };

    let lname = &lower[..n];
    let limit = match transport {
        Transport::Tcp => usize::from(u16::MAX),
        Transport::Udp => match &opt {
            Some(o) => usize::from(o.udp_size.clamp(512, table.max_udp_payload)),
            None => 512,
        },
    };
    let reply = Reply { query: header, question, opt: opt.as_ref(), limit, advertise: table.max_udp_payload };

    if let Some(node) = table.lookup(lname) {
        let mut scope = 0u8;
        let mut line = None;
        let template: &Template = match qtype {
            TYPE_A | TYPE_AAAA => {
                let set = if qtype == TYPE_A { &node.a } else { &node.aaaa };
                let ecs = opt.and_then(|o| o.ecs);
                let chooser = client_address(ecs, client);
                let (choice, s) = table.choose(node, chooser).unwrap_or((0, 0));
                if ecs.is_some_and(|e| e.source > 0) {
                    scope = s;
                }
                line = AnswerTable::line_of(node, choice, (qtype == TYPE_A).then_some(chooser));
                set.get(choice as usize)?
            }
            TYPE_SOA => &node.soa,
            TYPE_NS => &node.ns,
            _ => &node.nodata,
        };
        let truncated = reply.write(
            out,
            template.aa,
            template.rcode,
            template.answers,
            template.authorities,
            &[&template.body],
            scope,
        );
        let rcode = if template.rcode == 0 { Rcode::NoError } else { Rcode::ServFail };
        return Some(Answered::new(Some(node.zone), line, rcode, truncated));
    }
    match table.enclosing_zone(lname) {
        Some(z) => {
            let zone = table.zones.get(z as usize)?;
            let apex_at = 12 + n.checked_sub(zone.apex_len)?;
            let pointer = (0xc000u16 | u16::try_from(apex_at).ok()?).to_be_bytes();
            let truncated = reply.write(out, true, 3, 0, 1, &[&pointer, &zone.soa_tail], 0);
            Some(Answered { zone: Some(z), line: None, rcode: Rcode::NxDomain, truncated })
        }
        None => {
            let truncated = reply.write(out, false, 5, 0, 0, &[], 0);
            Some(Answered { zone: None, line: None, rcode: Rcode::Refused, truncated })
        }
    }
}

/// Reads the OPT record at `pos`, which must end the message. `None`: not the plain EDNS(0)
/// shape (other version, extended RCODE set, malformed or duplicate ECS, trailing bytes).
fn read_opt(query: &[u8], pos: usize) -> Option<Opt> {
    if *query.get(pos)? != 0 || u16_at(query, pos + 1)? != TYPE_OPT {
        return None;
    }
    let udp_size = u16_at(query, pos + 3)?;
    if *query.get(pos + 5)? != 0 || *query.get(pos + 6)? != 0 {
        return None;
    }
    let dnssec_ok = *query.get(pos + 7)? & 0x80 != 0;
    let rdlen = usize::from(u16_at(query, pos + 9)?);
    let start = pos + 11;
    if start + rdlen != query.len() {
        return None;
    }
    let mut at = start;
    let mut ecs = None;
    while at < query.len() {
        let code = u16_at(query, at)?;
        let len = usize::from(u16_at(query, at + 2)?);
        let data = query.get(at + 4..at + 4 + len)?;
        if code == OPTION_ECS {
            if ecs.is_some() {
                return None;
            }
            ecs = Some(parse_ecs(data)?);
        }
        at += 4 + len;
    }
    Some(Opt { udp_size, dnssec_ok, ecs })
}

/// Whether every Client Subnet option in `query`'s OPT records passes [`parse_ecs`]. The full
/// path's parser reads only the address bytes an option's prefix needs and drops the rest, so
/// an option with more (RFC 7871 §7.1.1: FORMERR) is found here, in the raw bytes. `query`
/// has parsed already; anything unexpected in it counts as malformed.
pub(crate) fn ecs_options_exact(query: &[u8]) -> bool {
    ecs_options_exact_at(query).unwrap_or(false)
}

fn ecs_options_exact_at(query: &[u8]) -> Option<bool> {
    let count = |at: usize| u16_at(query, at).map(usize::from);
    let mut at = 12;
    for _ in 0..count(4)? {
        at = skip_name(query, at)? + 4;
    }
    for _ in 0..count(6)? + count(8)? {
        at = skip_name(query, at)?;
        at += 10 + usize::from(u16_at(query, at + 8)?);
    }
    for _ in 0..count(10)? {
        at = skip_name(query, at)?;
        let rtype = u16_at(query, at)?;
        let rdata = at + 10;
        let end = rdata + usize::from(u16_at(query, at + 8)?);
        if rtype == TYPE_OPT {
            let mut o = rdata;
            while o < end {
                let len = usize::from(u16_at(query, o + 2)?);
                if u16_at(query, o)? == OPTION_ECS && parse_ecs(query.get(o + 4..o + 4 + len)?).is_none() {
                    return Some(false);
                }
                o += 4 + len;
            }
        }
        at = end;
    }
    Some(true)
}

/// The offset just past the (possibly compressed) name at `at`.
fn skip_name(m: &[u8], mut at: usize) -> Option<usize> {
    // Each step moves forward, so a name ends within the message's length.
    for _ in 0..=m.len() {
        let len = *m.get(at)?;
        match len & 0xc0 {
            0xc0 => return Some(at + 2),
            0 if len == 0 => return Some(at + 1),
            0 => at += 1 + usize::from(len),
            _ => return None,
        }
    }
    None
}

/// A Client Subnet option's data, strictly: known family, prefix within the family, exactly
/// the address bytes the prefix needs, no bits set beyond the prefix.
pub(crate) fn parse_ecs(data: &[u8]) -> Option<Ecs> {
    let family = u16_at(data, 0)?;
    let source = *data.get(2)?;
    let max = match family {
        1 => 32,
        2 => 128,
        _ => return None,
    };
    if source > max {
        return None;
    }
    let bytes = usize::from(source).div_ceil(8);
    let raw = data.get(4..)?;
    if raw.len() != bytes {
        return None;
    }
    let mut full = [0u8; 16];
    full[..bytes].copy_from_slice(raw);
    let addr = if family == 1 {
        IpAddr::V4(Ipv4Addr::new(full[0], full[1], full[2], full[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(full))
    };
    if vantage_core::net::mask(addr, source) != addr {
        return None;
    }
    Some(Ecs { addr, source })
}

/// The address that picks the line: the client subnet's when it names one (source prefix
/// above 0), else the sender's.
pub(crate) fn client_address(ecs: Option<Ecs>, sender: IpAddr) -> IpAddr {
    match ecs {
        Some(e) if e.source > 0 => e.addr,
        _ => sender,
    }
}

/// What every answer to one query shares.
struct Reply<'q> {
    query: &'q [u8],
    question: &'q [u8],
    opt: Option<&'q Opt>,
    limit: usize,
    advertise: u16,
}

impl Reply<'_> {
    /// Writes header, question, `body` and OPT into `out`; when that exceeds the limit,
    /// writes the truncated form (TC, no records but the OPT). Returns whether it truncated.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        out: &mut Vec<u8>,
        aa: bool,
        rcode: u8,
        an: u16,
        ns: u16,
        body: &[&[u8]],
        scope: u8,
    ) -> bool {
        let body_len: usize = body.iter().map(|b| b.len()).sum();
        let opt_len = self.opt.map_or(0, |o| 11 + o.ecs.map_or(0, |e| 8 + usize::from(e.source).div_ceil(8)));
        let truncated = 12 + self.question.len() + body_len + opt_len > self.limit;
        out.clear();
        out.extend_from_slice(&self.query[..2]);
        // QR, AA, TC; RD and CD copied from the query (RFC 1035 §4.1.1, RFC 6840 §5.9).
        let mut flags = 0x80 | (self.query[2] & 0x01);
        if aa {
            flags |= 0x04;
        }
        if truncated {
            flags |= 0x02;
        }
        out.push(flags);
        out.push((self.query[3] & 0x10) | (rcode & 0x0f));
        let (an, ns) = if truncated { (0, 0) } else { (an, ns) };
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&an.to_be_bytes());
        out.extend_from_slice(&ns.to_be_bytes());
        out.extend_from_slice(&u16::from(self.opt.is_some()).to_be_bytes());
        out.extend_from_slice(self.question);
        if !truncated {
            for b in body {
                out.extend_from_slice(b);
            }
        }
        if let Some(o) = self.opt {
            write_opt(out, o, scope, self.advertise);
        }
        truncated
    }
}

/// Our OPT record: the size we accept, DO echoed (RFC 3225), and the client's subnet with the
/// scope the answer holds for (RFC 7871 §7.2.1).
fn write_opt(out: &mut Vec<u8>, opt: &Opt, scope: u8, size: u16) {
    out.extend_from_slice(&[0, 0, 41]);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(&[0, 0, if opt.dnssec_ok { 0x80 } else { 0 }, 0]);
    match opt.ecs {
        None => out.extend_from_slice(&[0, 0]),
        Some(ecs) => {
            let bytes = usize::from(ecs.source).div_ceil(8);
            let rdlen = (8 + bytes) as u16;
            out.extend_from_slice(&rdlen.to_be_bytes());
            out.extend_from_slice(&OPTION_ECS.to_be_bytes());
            out.extend_from_slice(&((4 + bytes) as u16).to_be_bytes());
            let (family, octets): (u16, [u8; 16]) = match ecs.addr {
                IpAddr::V4(a) => {
                    let mut o = [0u8; 16];
                    o[..4].copy_from_slice(&a.octets());
                    (1, o)
                }
                IpAddr::V6(a) => (2, a.octets()),
            };
            out.extend_from_slice(&family.to_be_bytes());
            out.push(ecs.source);
            out.push(scope);
            out.extend_from_slice(&octets[..bytes]);
        }
    }
}
