//! The full path: every query the fast path does not recognise, parsed and answered with
//! hickory-proto. It gives the same answers as the fast path (the tests compare them) and
//! owns the unusual cases: malformed messages (FORMERR), other opcodes (NOTIMP), several
//! questions, EDNS versions other than 0 (BADVERS), other classes (REFUSED), zone transfers
//! (REFUSED: the table is not offered for transfer), ANY, and meta types.

use std::net::IpAddr;

use hickory_proto::op::{Edns, Message, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::{DNSClass, Record, RecordType};

use crate::metrics::Rcode;
use crate::table::{AnswerTable, address_records, wire};
use crate::wire::{Answered, Ecs, LineGiven, Transport, client_address};

/// Answers `query` into `out`; `None` to drop it (shorter than a header, or a response).
pub(crate) fn respond(
    table: &AnswerTable,
    query: &[u8],
    client: IpAddr,
    transport: Transport,
    out: &mut Vec<u8>,
) -> Option<Answered> {
    let header = query.get(..12)?;
    // Answering responses could start a loop between two servers.
    if header[2] & 0x80 != 0 {
        return None;
    }
    let Ok(msg) = Message::from_vec(query) else {
        header_only(out, header, Rcode::FormErr);
        return Some(Answered { zone: None, line: None, rcode: Rcode::FormErr, truncated: false });
    };
    let mut reply = Reply::new(&msg, table, transport);
    if msg.metadata.op_code != OpCode::Query {
        return Some(reply.finish(out, Rcode::NotImp));
    }
    if let Some(e) = &msg.edns
        && e.version() != 0
    {
        return Some(reply.finish(out, Rcode::BadVers));
    }
    let ecs = match client_subnet(&msg, query) {
        Ok(ecs) => ecs,
        Err(()) => return Some(reply.finish(out, Rcode::FormErr)),
    };
    let [query] = msg.queries.as_slice() else {
        return Some(reply.finish(out, Rcode::FormErr));
    };
    reply.ecs = ecs;
    if query.query_class() != DNSClass::IN {
        return Some(reply.finish(out, Rcode::Refused));
    }
    let qtype = query.query_type();
    match u16::from(qtype) {
        // Zone transfers are not offered: the table is the control plane's, not a zone file.
        251 | 252 => return Some(reply.finish(out, Rcode::Refused)),
        0 | 41 | 249 | 250 => return Some(reply.finish(out, Rcode::FormErr)),
        253 | 254 => return Some(reply.finish(out, Rcode::NotImp)),
        _ => {}
    }

    let lname = wire(&query.name().to_lowercase());
    let Some(node) = table.lookup(&lname) else {
        return Some(
            match table.enclosing_zone(&lname).and_then(|z| table.zones.get(z as usize).map(|zone| (z, zone)))
            {
                Some((z, zone)) => {
                    reply.zone = Some(z);
                    reply.authorities.push(zone.soa.clone());
                    reply.finish(out, Rcode::NxDomain)
                }
                None => reply.finish(out, Rcode::Refused),
            },
        );
    };
    let zone = table.zones.get(node.zone as usize)?;
    reply.zone = Some(node.zone);
    let owner = query.name().clone();
    let ecs = reply.ecs;
    let chooser = client_address(ecs, client);
    let steered = |scope: &mut u8| -> u32 {
        let (choice, s) = table.choose(node, chooser).unwrap_or((0, 0));
        if ecs.is_some_and(|e| e.source > 0) {
            *scope = s;
        }
        choice
    };
    let mut scope = 0;
    let mut answers: Vec<Record> = Vec::new();
    match qtype {
        RecordType::A | RecordType::AAAA | RecordType::ANY => {
            let choice = steered(&mut scope);
            reply.line = AnswerTable::line_of(node, choice, (qtype != RecordType::AAAA).then_some(chooser));
            let (ips, ttl) = table.addresses(node, choice, zone.ttl);
            if qtype != RecordType::AAAA {
                answers.extend(address_records(&owner, ttl, ips, RecordType::A));
            }
            if qtype != RecordType::A {
                answers.extend(address_records(&owner, ttl, ips, RecordType::AAAA));
            }
            if qtype == RecordType::ANY && node.apex {
                answers.push(zone.soa.clone());
                answers.extend(zone.ns.iter().cloned());
            }
        }
        RecordType::SOA if node.apex => answers.push(zone.soa.clone()),
        RecordType::NS if node.apex => answers.extend(zone.ns.iter().cloned()),
        _ => {}
    }
    reply.scope = scope;
    if answers.is_empty() {
        reply.authorities.push(zone.soa.clone());
    }
    reply.answers = answers;
    Some(reply.finish(out, Rcode::NoError))
}

/// The validated Client Subnet option, if any; `Err` for a malformed or repeated one
/// (RFC 7871 §7.1.1: FORMERR), its raw bytes in `query` checked too.
fn client_subnet(msg: &Message, query: &[u8]) -> Result<Option<Ecs>, ()> {
    let Some(edns) = &msg.edns else { return Ok(None) };
    let all = edns.options().get_all(EdnsCode::Subnet);
    match all.as_slice() {
        [] => Ok(None),
        [EdnsOption::Subnet(cs)] => {
            let max = if cs.addr().is_ipv4() { 32 } else { 128 };
            let source = cs.source_prefix();
            if source > max
                || vantage_core::net::mask(cs.addr(), source) != cs.addr()
                || !crate::wire::ecs_options_exact(query)
            {
                return Err(());
            }
            Ok(Some(Ecs { addr: cs.addr(), source }))
        }
        _ => Err(()),
    }
}

/// A 12-byte answer for a message that could not be parsed: the ID, opcode and RD echoed.
fn header_only(out: &mut Vec<u8>, header: &[u8], rcode: Rcode) {
    out.clear();
    out.extend_from_slice(&header[..2]);
    out.push(0x80 | (header[2] & 0x79));
    out.push(rcode.value() as u8 & 0x0f);
    out.extend_from_slice(&[0; 8]);
}

struct Reply<'m> {
    msg: &'m Message,
    max_udp: u16,
    transport: Transport,
    zone: Option<u32>,
    /// The line an address answer gave.
    line: Option<LineGiven>,
    ecs: Option<Ecs>,
    scope: u8,
    answers: Vec<Record>,
    authorities: Vec<Record>,
}

impl<'m> Reply<'m> {
    fn new(msg: &'m Message, table: &AnswerTable, transport: Transport) -> Self {
        Reply {
            msg,
            max_udp: table.max_udp_payload,
            transport,
            zone: None,
            line: None,
            ecs: None,
            scope: 0,
            answers: Vec::new(),
            authorities: Vec::new(),
        }
    }

    fn finish(self, out: &mut Vec<u8>, rcode: Rcode) -> Answered {
        let mut m = Message::response(self.msg.metadata.id, self.msg.metadata.op_code);
        m.metadata.authoritative = self.zone.is_some() && matches!(rcode, Rcode::NoError | Rcode::NxDomain);
        m.metadata.recursion_desired = self.msg.metadata.recursion_desired;
        m.metadata.checking_disabled = self.msg.metadata.checking_disabled;
        m.metadata.response_code = ResponseCode::from((rcode.value() >> 4) as u8, rcode.value() as u8 & 0x0f);
        m.add_queries(self.msg.queries.iter().take(1).cloned().collect::<Vec<Query>>());
        m.add_answers(self.answers);
        m.add_authorities(self.authorities);
        if let Some(e) = &self.msg.edns {
            let mut o = Edns::new();
            o.set_max_payload(self.max_udp).set_version(0).set_dnssec_ok(e.flags().dnssec_ok);
            if let Some(ecs) = self.ecs {
                o.options_mut()
                    .insert(EdnsOption::Subnet(ClientSubnet::new(ecs.addr, ecs.source, self.scope)));
            }
            m.set_edns(o);
        }
        let limit = match (self.transport, &self.msg.edns) {
            (Transport::Tcp, _) => usize::from(u16::MAX),
            (Transport::Udp, Some(e)) => usize::from(e.max_payload().clamp(512, self.max_udp)),
            (Transport::Udp, None) => 512,
        };
        let zone = if matches!(rcode, Rcode::NoError | Rcode::NxDomain) { self.zone } else { None };
        match m.to_vec() {
            Ok(bytes) if bytes.len() <= limit => {
                *out = bytes;
                Answered::new(zone, self.line, rcode, false)
            }
            Ok(_) => match m.truncate().to_vec() {
                Ok(bytes) => {
                    *out = bytes;
                    Answered::new(zone, self.line, rcode, true)
                }
                Err(_) => servfail(out, self.msg),
            },
            Err(_) => servfail(out, self.msg),
        }
    }
}

/// SERVFAIL when our own answer cannot be encoded (not expected: RRsets are bounded), built
/// by hand so it cannot fail in turn.
fn servfail(out: &mut Vec<u8>, msg: &Message) -> Answered {
    out.clear();
    out.extend_from_slice(&msg.metadata.id.to_be_bytes());
    let opcode = u8::from(msg.metadata.op_code) & 0x0f;
    out.push(0x80 | (opcode << 3) | u8::from(msg.metadata.recursion_desired));
    out.push(Rcode::ServFail.value() as u8);
    out.extend_from_slice(&[0; 8]);
    Answered { zone: None, line: None, rcode: Rcode::ServFail, truncated: false }
}
