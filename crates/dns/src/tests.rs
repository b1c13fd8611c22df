//! Answer semantics, checked on both paths: every query the fast path answers must get the
//! same answer from the full (hickory-proto) path.

use std::net::IpAddr;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use proptest::prelude::*;

use crate::metrics::Rcode;
use crate::settings::DnsSettings;
use crate::table::{AnswerTable, LineAnswers, ZoneAnswers};
use crate::wire::{Transport, fast};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn line(name: &str, nets: &[&str], records: &[&str]) -> LineAnswers {
    LineAnswers {
        name: name.into(),
        client_networks: nets.iter().map(|n| n.parse().unwrap()).collect(),
        places: Default::default(),
        records: records.iter().map(|r| ip(r)).collect(),
        ttl: None,
    }
}

fn table() -> AnswerTable {
    let video = ZoneAnswers {
        cluster: "video".into(),
        domain: "cdn.example.test".into(),
        aliases: vec![
            "www.cdn.example.test".into(),
            "a.b.cdn.example.test".into(),
            "video.other.test".into(),
        ],
        ttl: 30,
        serial: 42,
        lines: vec![
            line("local", &["127.0.0.0/8"], &["192.0.2.1"]),
            line("asia", &["198.51.100.0/24", "2001:db8:1::/48"], &["192.0.2.2", "2001:db8::2"]),
            line("default", &[], &["192.0.2.3", "2001:db8::3"]),
        ],
        all: ["192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::2", "2001:db8::3"]
            .iter()
            .map(|s| ip(s))
            .collect(),
    };
    let plain = ZoneAnswers {
        cluster: "plain".into(),
        domain: "plain.test".into(),
        aliases: vec![],
        ttl: 300,
        serial: 7,
        lines: vec![line("eu", &["203.0.113.0/24"], &["192.0.2.10"])],
        all: vec![ip("192.0.2.10"), ip("192.0.2.11")],
    };
    let many = ZoneAnswers {
        cluster: "many".into(),
        domain: "many.test".into(),
        aliases: vec![],
        ttl: 30,
        serial: 1,
        lines: vec![LineAnswers {
            name: "default".into(),
            client_networks: vec![],
            places: Default::default(),
            records: (1..=100).map(|i| IpAddr::from([10, 0, 0, i])).collect(),
            ttl: None,
        }],
        all: vec![],
    };
    let t = AnswerTable::build(vec![video, plain, many], &DnsSettings::default());
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    t
}

#[derive(Clone, Copy, Default)]
struct Ask<'a> {
    edns: Option<u16>,
    dnssec_ok: bool,
    ecs: Option<(&'a str, u8)>,
}

fn query(name: &str, qtype: RecordType, ask: Ask<'_>) -> Vec<u8> {
    let mut m = Message::new(0x1234, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    if let Some(size) = ask.edns {
        let mut e = Edns::new();
        e.set_max_payload(size).set_dnssec_ok(ask.dnssec_ok);
        if let Some((addr, source)) = ask.ecs {
            e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(ip(addr), source, 0)));
        }
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

/// Both paths' answers; asserts the fast path took it and both agree.
fn ask(t: &AnswerTable, q: &[u8], client: &str, transport: Transport) -> Message {
    let mut fast_out = Vec::new();
    let a = fast(t, q, ip(client), transport, &mut fast_out).expect("fast path declined");
    let mut slow_out = Vec::new();
    let b = crate::slow::respond(t, q, ip(client), transport, &mut slow_out).unwrap();
    assert_eq!(a, b, "outcomes differ");
    let fm = Message::from_vec(&fast_out).unwrap();
    let sm = Message::from_vec(&slow_out).unwrap();
    assert_eq!(fm, sm, "fast and full paths disagree");
    fm
}

fn addrs(m: &Message) -> Vec<String> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            RData::AAAA(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

fn scope(m: &Message) -> Option<u8> {
    match m.edns.as_ref()?.option(EdnsCode::Subnet)? {
        EdnsOption::Subnet(cs) => Some(cs.scope_prefix()),
        _ => None,
    }
}

#[test]
fn the_line_follows_the_client_address_or_its_subnet() {
    let t = table();
    let udp = Transport::Udp;
    let q = query("cdn.example.test.", RecordType::A, Ask::default());
    let m = ask(&t, &q, "127.0.0.1", udp);
    assert_eq!(addrs(&m), ["192.0.2.1"]);
    assert!(m.metadata.authoritative && m.metadata.recursion_desired && !m.metadata.recursion_available);
    assert_eq!(m.metadata.id, 0x1234);
    assert_eq!(m.answers[0].ttl, 30);
    assert_eq!(addrs(&ask(&t, &q, "10.9.8.7", udp)), ["192.0.2.3"]);
    // The client's subnet wins over the resolver's address, and the scope is the line's network.
    let q = query(
        "cdn.example.test.",
        RecordType::A,
        Ask { edns: Some(1232), ecs: Some(("198.51.100.0", 24)), ..Ask::default() },
    );
    let m = ask(&t, &q, "127.0.0.1", udp);
    assert_eq!((addrs(&m), scope(&m)), (vec!["192.0.2.2".to_string()], Some(24)));
    let q = query(
        "cdn.example.test.",
        RecordType::AAAA,
        Ask { edns: Some(1232), ecs: Some(("2001:db8:1::", 56)), ..Ask::default() },
    );
    let m = ask(&t, &q, "127.0.0.1", udp);
    assert_eq!((addrs(&m), scope(&m)), (vec!["2001:db8::2".to_string()], Some(48)));
    // A /0 subnet asks for an answer for everyone: the resolver's own address decides, scope 0.
    let q = query(
        "cdn.example.test.",
        RecordType::A,
        Ask { edns: Some(1232), ecs: Some(("0.0.0.0", 0)), ..Ask::default() },
    );
    let m = ask(&t, &q, "127.0.0.1", udp);
    assert_eq!((addrs(&m), scope(&m)), (vec!["192.0.2.1".to_string()], Some(0)));
    // Aliases answer like the domain; an alias outside every zone is a zone of its own.
    assert_eq!(
        addrs(&ask(&t, &query("WWW.cdn.Example.test.", RecordType::A, Ask::default()), "127.0.0.1", udp)),
        ["192.0.2.1"]
    );
    assert_eq!(
        addrs(&ask(&t, &query("a.b.cdn.example.test.", RecordType::AAAA, Ask::default()), "10.0.0.1", udp)),
        ["2001:db8::3"]
    );
    let m = ask(&t, &query("video.other.test.", RecordType::SOA, Ask::default()), "10.0.0.1", udp);
    assert!(matches!(&m.answers[0].data, RData::SOA(s) if s.serial == 42));
    // No line matches and there is no default line: the union.
    assert_eq!(
        addrs(&ask(&t, &query("plain.test.", RecordType::A, Ask::default()), "10.0.0.1", udp)),
        ["192.0.2.10", "192.0.2.11"]
    );
    assert_eq!(
        addrs(&ask(&t, &query("plain.test.", RecordType::A, Ask::default()), "203.0.113.9", udp)),
        ["192.0.2.10"]
    );
    // A name that is not steered carries scope 0.
    let q = query(
        "all.cdn.example.test.",
        RecordType::A,
        Ask { edns: Some(1232), ecs: Some(("198.51.100.0", 24)), ..Ask::default() },
    );
    let m = ask(&t, &q, "127.0.0.1", udp);
    assert_eq!(
        (addrs(&m), scope(&m)),
        (vec!["192.0.2.1".to_string(), "192.0.2.2".into(), "192.0.2.3".into()], Some(0))
    );
}

#[test]
fn a_line_with_a_suspect_record_answers_with_its_shorter_ttl_on_both_paths() {
    let suspect = |ttl: u32| {
        let mut input = table_input();
        input[0]
            .lines
            .insert(0, LineAnswers { ttl: Some(ttl), ..line("local", &["127.0.0.0/8"], &["192.0.2.1"]) });
        AnswerTable::build(input, &DnsSettings::default())
    };
    let t = suspect(12);
    for (qtype, client) in
        [(RecordType::A, "127.0.0.1"), (RecordType::AAAA, "127.0.0.1"), (RecordType::A, "10.0.0.1")]
    {
        let m = ask(&t, &query("cdn.example.test.", qtype, Ask::default()), client, Transport::Udp);
        let want = if client == "127.0.0.1" { 12 } else { 30 };
        assert!(m.answers.iter().all(|r| r.ttl == want), "{qtype} from {client}: {:?}", m.answers);
        if qtype == RecordType::AAAA {
            // No AAAA record on that line: the negative answer keeps the zone's SOA TTL.
            assert_eq!(m.authorities[0].ttl, 30);
        }
    }
    let m =
        ask(&t, &query("all.cdn.example.test.", RecordType::A, Ask::default()), "127.0.0.1", Transport::Udp);
    assert!(m.answers.iter().all(|r| r.ttl == 30), "all.<domain> keeps the zone's TTL");
    // A line's own TTL never exceeds the zone's.
    let t = suspect(3600);
    let m = ask(&t, &query("cdn.example.test.", RecordType::A, Ask::default()), "127.0.0.1", Transport::Udp);
    assert_eq!(m.answers[0].ttl, 30);
}

#[test]
fn apex_records_and_negative_answers() {
    let t = table();
    let udp = Transport::Udp;
    let m = ask(&t, &query("cdn.example.test.", RecordType::SOA, Ask::default()), "127.0.0.1", udp);
    let RData::SOA(soa) = &m.answers[0].data else { panic!("{m:?}") };
    assert_eq!((soa.serial, soa.minimum), (42, 30));
    assert_eq!(soa.mname.to_ascii(), "ns1.cdn.example.test.");
    assert_eq!(soa.rname.to_ascii(), "hostmaster.cdn.example.test.");
    let m = ask(&t, &query("cdn.example.test.", RecordType::NS, Ask::default()), "127.0.0.1", udp);
    assert!(matches!(&m.answers[0].data, RData::NS(ns) if ns.0.to_ascii() == "ns1.cdn.example.test."));

    let nx = ask(
        &t,
        &query("nope.CDN.example.test.", RecordType::A, Ask { edns: Some(1232), ..Ask::default() }),
        "127.0.0.1",
        udp,
    );
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
    assert!(nx.metadata.authoritative && nx.answers.is_empty());
    assert_eq!(nx.authorities[0].name.to_ascii().to_lowercase(), "cdn.example.test.");
    assert!(matches!(nx.authorities[0].data, RData::SOA(_)));
    // Below a leaf, and below an alias zone.
    for name in ["x.all.cdn.example.test.", "x.video.other.test."] {
        assert_eq!(
            ask(&t, &query(name, RecordType::A, Ask::default()), "127.0.0.1", udp).metadata.response_code,
            ResponseCode::NXDomain
        );
    }
    // Existing names with another type, an empty non-terminal, and the in-zone name server: NODATA.
    for (name, qtype) in [
        ("cdn.example.test.", RecordType::MX),
        ("all.cdn.example.test.", RecordType::SOA),
        ("b.cdn.example.test.", RecordType::A),
        ("ns1.cdn.example.test.", RecordType::A),
        ("plain.test.", RecordType::AAAA),
    ] {
        let m = ask(&t, &query(name, qtype, Ask::default()), "127.0.0.1", udp);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{name}");
        assert!(m.answers.is_empty(), "{name}");
        assert!(matches!(m.authorities[0].data, RData::SOA(_)), "{name}");
    }
    let refused = ask(
        &t,
        &query("example.org.", RecordType::A, Ask { edns: Some(1232), ..Ask::default() }),
        "127.0.0.1",
        udp,
    );
    assert_eq!(refused.metadata.response_code, ResponseCode::Refused);
    assert!(!refused.metadata.authoritative && refused.edns.is_some());
    assert_eq!(
        ask(&t, &query("test.", RecordType::A, Ask::default()), "127.0.0.1", udp).metadata.response_code,
        ResponseCode::Refused
    );
}

#[test]
fn udp_answers_are_truncated_to_the_clients_limit_and_tcp_answers_are_not() {
    let t = table();
    let q = query("many.test.", RecordType::A, Ask::default());
    let m = ask(&t, &q, "127.0.0.1", Transport::Udp);
    assert!(m.metadata.truncation && m.answers.is_empty());
    let m = ask(&t, &q, "127.0.0.1", Transport::Tcp);
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 100);
    // 100 A records are about 1,650 bytes: over our 1,232 even when the client offers 4,096.
    let q = query("many.test.", RecordType::A, Ask { edns: Some(4096), dnssec_ok: true, ..Ask::default() });
    let m = ask(&t, &q, "127.0.0.1", Transport::Udp);
    assert!(m.metadata.truncation);
    let e = m.edns.unwrap();
    assert_eq!((e.max_payload(), e.flags().dnssec_ok), (1232, true));
    let big = AnswerTable::build(vec![], &DnsSettings { max_udp_payload: 4096, ..DnsSettings::default() });
    assert_eq!(big.max_udp_payload, 4096);
}

#[test]
fn unusual_queries_take_the_full_path() {
    let t = table();
    let mut out = Vec::new();
    let full = |q: &[u8], out: &mut Vec<u8>| {
        assert!(fast(&t, q, ip("127.0.0.1"), Transport::Udp, out).is_none());
        let a = crate::wire::respond(&t, q, ip("127.0.0.1"), Transport::Udp, out);
        (a, out.clone())
    };
    // ANY: every RRset of the name.
    let (a, bytes) = full(&query("cdn.example.test.", RecordType::ANY, Ask::default()), &mut out);
    let m = Message::from_vec(&bytes).unwrap();
    assert_eq!(a.unwrap().rcode, Rcode::NoError);
    // The local line has no IPv6 record: its A, then SOA and NS.
    assert_eq!(m.answers.len(), 3, "{m:?}");

    // EDNS version 1: BADVERS.
    let mut m = Message::from_vec(&query(
        "cdn.example.test.",
        RecordType::A,
        Ask { edns: Some(1232), ..Ask::default() },
    ))
    .unwrap();
    m.edns.as_mut().unwrap().set_version(1);
    let (a, bytes) = full(&m.to_vec().unwrap(), &mut out);
    assert_eq!(a.unwrap().rcode, Rcode::BadVers);
    // 16 is BADVERS in a response to a query (hickory names the shared value BADSIG).
    assert_eq!(u16::from(Message::from_vec(&bytes).unwrap().metadata.response_code), 16);

    // NOTIFY and other opcodes: NOTIMP. Class CH: REFUSED. AXFR: REFUSED.
    let mut m = Message::from_vec(&query("cdn.example.test.", RecordType::SOA, Ask::default())).unwrap();
    m.metadata.op_code = OpCode::Notify;
    assert_eq!(full(&m.to_vec().unwrap(), &mut out).0.unwrap().rcode, Rcode::NotImp);
    let mut m = Message::from_vec(&query("version.bind.", RecordType::TXT, Ask::default())).unwrap();
    m.queries[0].set_query_class(DNSClass::CH);
    assert_eq!(full(&m.to_vec().unwrap(), &mut out).0.unwrap().rcode, Rcode::Refused);
    assert_eq!(
        full(&query("cdn.example.test.", RecordType::AXFR, Ask::default()), &mut out).0.unwrap().rcode,
        Rcode::Refused
    );

    // A subnet with bits beyond its prefix is malformed (RFC 7871 §7.1.1).
    let q = query(
        "cdn.example.test.",
        RecordType::A,
        Ask { edns: Some(1232), ecs: Some(("198.51.101.0", 23)), ..Ask::default() },
    );
    assert_eq!(full(&q, &mut out).0.unwrap().rcode, Rcode::FormErr);

    // So is one with more address bytes than its prefix needs (a /24 with four).
    let mut q = query(
        "cdn.example.test.",
        RecordType::A,
        Ask { edns: Some(1232), ecs: Some(("198.51.100.0", 24)), ..Ask::default() },
    );
    let n = q.len();
    q[n - 8] += 1; // the option's length
    q[n - 12] += 1; // the OPT record's data length
    q.push(0);
    assert!(Message::from_vec(&q).is_ok(), "the message itself parses");
    assert_eq!(full(&q, &mut out).0.unwrap().rcode, Rcode::FormErr);

    // Garbage after a header: FORMERR with the ID; responses and runts are dropped.
    let mut junk = query("cdn.example.test.", RecordType::A, Ask::default());
    junk.truncate(20);
    let (a, bytes) = full(&junk, &mut out);
    assert_eq!(a.unwrap().rcode, Rcode::FormErr);
    assert_eq!(&bytes[..2], &[0x12, 0x34]);
    let mut response = query("cdn.example.test.", RecordType::A, Ask::default());
    response[2] |= 0x80;
    assert!(crate::wire::respond(&t, &response, ip("127.0.0.1"), Transport::Udp, &mut out).is_none());
    assert!(crate::wire::respond(&t, &[0; 11], ip("127.0.0.1"), Transport::Udp, &mut out).is_none());
}

#[test]
fn names_claimed_twice_go_to_the_first_cluster_and_bad_names_are_reported() {
    let mk = |cluster: &str, domain: &str, aliases: &[&str], a: &str| ZoneAnswers {
        cluster: cluster.into(),
        domain: domain.into(),
        aliases: aliases.iter().map(|s| s.to_string()).collect(),
        ttl: 30,
        serial: 1,
        lines: vec![line("d", &[], &[a])],
        all: vec![ip(a)],
    };
    let t = AnswerTable::build(
        vec![
            mk("one", "one.test", &["shared.one.test"], "192.0.2.1"),
            mk("two", "two.test", &["shared.one.test", "bad name!"], "192.0.2.2"),
            mk("three", "one.test", &[], "192.0.2.3"),
        ],
        &DnsSettings::default(),
    );
    assert_eq!(t.problems().len(), 3, "{:?}", t.problems());
    let m = ask(&t, &query("shared.one.test.", RecordType::A, Ask::default()), "127.0.0.1", Transport::Udp);
    assert_eq!(addrs(&m), ["192.0.2.1"]);
    assert_eq!(t.zone_names(), ["one.test", "two.test"]);
}

#[test]
fn name_servers_and_contact_are_configurable() {
    let settings = DnsSettings {
        nameservers: vec!["ns-a.cdn.example.test".into(), "ns.provider.test".into()],
        nameserver_addresses: vec![ip("192.0.2.53")],
        hostmaster: Some("dns.example.test".into()),
        ..DnsSettings::default()
    };
    let mut zones = vec![];
    if let Some(z) = table_input().into_iter().next() {
        zones.push(z);
    }
    let t = AnswerTable::build(zones, &settings);
    let m = ask(&t, &query("cdn.example.test.", RecordType::NS, Ask::default()), "127.0.0.1", Transport::Udp);
    let names: Vec<String> = m.answers.iter().map(|r| r.data.to_string()).collect();
    assert_eq!(names, ["ns-a.cdn.example.test.", "ns.provider.test."]);
    let m =
        ask(&t, &query("ns-a.cdn.example.test.", RecordType::A, Ask::default()), "127.0.0.1", Transport::Udp);
    assert_eq!(addrs(&m), ["192.0.2.53"]);
    let m =
        ask(&t, &query("cdn.example.test.", RecordType::SOA, Ask::default()), "127.0.0.1", Transport::Udp);
    assert!(
        matches!(&m.answers[0].data, RData::SOA(s) if s.rname.to_ascii() == "dns.example.test." && s.mname.to_ascii() == "ns-a.cdn.example.test.")
    );
}

#[test]
fn invalid_name_server_settings_fall_back_to_the_default_and_are_reported() {
    let settings = DnsSettings { nameservers: vec!["not a name!".into()], ..DnsSettings::default() };
    let t = AnswerTable::build(table_input(), &settings);
    assert_eq!(t.problems().len(), 1, "{:?}", t.problems());
    let m = ask(&t, &query("cdn.example.test.", RecordType::NS, Ask::default()), "127.0.0.1", Transport::Udp);
    assert_eq!(m.answers[0].data.to_string(), "ns1.cdn.example.test.");
    let m =
        ask(&t, &query("ns1.cdn.example.test.", RecordType::A, Ask::default()), "127.0.0.1", Transport::Udp);
    assert_eq!((m.metadata.response_code, m.answers.len()), (ResponseCode::NoError, 0));
}

fn table_input() -> Vec<ZoneAnswers> {
    vec![ZoneAnswers {
        cluster: "video".into(),
        domain: "cdn.example.test".into(),
        aliases: vec![],
        ttl: 30,
        serial: 1,
        lines: vec![line("default", &[], &["192.0.2.3"])],
        all: vec![ip("192.0.2.3")],
    }]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// No input panics, and every answer the server sends is a well-formed DNS message.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), tcp in any::<bool>()) {
        let t = table();
        let mut out = Vec::new();
        let transport = if tcp { Transport::Tcp } else { Transport::Udp };
        if crate::wire::respond(&t, &bytes, ip("127.0.0.1"), transport, &mut out).is_some() {
            prop_assert!(out.len() >= 12);
            prop_assert!(out[2] & 0x80 != 0);
        }
    }

    /// Valid queries with random names, types, case and EDNS: both paths agree.
    #[test]
    fn fast_and_full_paths_agree(
        label in "[a-zA-Z0-9]{1,12}",
        pick in 0usize..6,
        qtype in prop::sample::select(vec![1u16, 2, 6, 15, 16, 28, 33, 65]),
        edns in prop::option::of(prop::sample::select(vec![512u16, 1232, 4096])),
        ecs in prop::option::of((any::<[u8; 4]>(), 0u8..=32)),
        client in any::<[u8; 4]>(),
    ) {
        let t = table();
        let names = ["cdn.example.test.", "all.cdn.example.test.", "plain.test.", "many.test.", "video.other.test.", "example.org."];
        let name = if pick == 5 { format!("{label}.{}", names[0]) } else { names[pick].to_string() };
        let mut m = Message::new(7, MessageType::Query, OpCode::Query);
        m.add_query(Query::query(Name::from_ascii(&name).unwrap(), RecordType::from(qtype)));
        if let Some(size) = edns {
            let mut e = Edns::new();
            e.set_max_payload(size);
            if let Some((a, src)) = ecs {
                let addr = vantage_core::net::mask(IpAddr::from(a), src);
                e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(addr, src, 0)));
            }
            m.set_edns(e);
        }
        let q = m.to_vec().unwrap();
        let client = IpAddr::from(client).to_string();
        ask(&t, &q, &client, Transport::Udp);
        ask(&t, &q, &client, Transport::Tcp);
    }
}
