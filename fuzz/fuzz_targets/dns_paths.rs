//! The DNS server's answer to one datagram: no input panics either path, every answer is a
//! well-formed response within the transport's limit, and wherever the fast path answers,
//! the full (hickory-proto) path gives the same answer.
//!
//! The input's first byte picks the transport (bit 0: TCP) and the sender (the rest, among
//! `CLIENTS`, so lines and client subnets are exercised); the remaining bytes are the query.
//!
//! "The same answer" is compared as parsed messages, not bytes: the fast path writes
//! pre-encoded records whose names point into the question, while hickory-proto compresses
//! names its own way, so equal answers may differ in bytes. The outcome the counters see
//! (zone, response code, truncation) must be equal too.
#![no_main]

use std::net::IpAddr;
use std::sync::LazyLock;

use hickory_proto::op::Message;
use libfuzzer_sys::fuzz_target;
use vantage_dns::{AnswerTable, LineAnswers, Path, Transport, ZoneAnswers, answer_on};

const CLIENTS: [&str; 8] = [
    "127.0.0.1",
    "198.51.100.7",
    "203.0.113.9",
    "10.9.8.7",
    "2001:db8:1::5",
    "2001:db8:2::1",
    "::1",
    "192.0.2.200",
];

fn ip(s: &str) -> IpAddr {
    s.parse().expect("a valid address")
}

fn line(name: &str, nets: &[&str], records: &[&str], ttl: Option<u32>) -> LineAnswers {
    LineAnswers {
        name: name.into(),
        client_networks: nets.iter().map(|n| n.parse().expect("a valid network")).collect(),
        places: Default::default(),
        records: records.iter().map(|r| ip(r)).collect(),
        ttl,
    }
}

/// Zones with aliases (inside and outside the domain), lines by IPv4 and IPv6 networks, a
/// line with a TTL of its own, a cluster without a default line, and one whose answer does
/// not fit 512 bytes.
static TABLE: LazyLock<AnswerTable> = LazyLock::new(|| {
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
            line("local", &["127.0.0.0/8"], &["192.0.2.1"], Some(5)),
            line("asia", &["198.51.100.0/24", "2001:db8:1::/48"], &["192.0.2.2", "2001:db8::2"], None),
            line("default", &[], &["192.0.2.3", "2001:db8::3"], None),
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
        lines: vec![line("eu", &["203.0.113.0/24"], &["192.0.2.10"], None)],
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
            records: (1..=60u16)
                .flat_map(|i| {
                    [IpAddr::from([10, 0, 0, i as u8]), IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, i])]
                })
                .collect(),
            ttl: None,
        }],
        all: vec![],
    };
    let t = AnswerTable::build(vec![video, plain, many], &vantage_dns::DnsSettings::default());
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    t
});

fuzz_target!(|data: &[u8]| {
    let Some((&pick, query)) = data.split_first() else { return };
    let transport = if pick & 1 == 1 { Transport::Tcp } else { Transport::Udp };
    let client = ip(CLIENTS[usize::from(pick >> 1) % CLIENTS.len()]);
    let table = &*TABLE;

    let mut served = Vec::new();
    let answered = answer_on(table, query, client, transport, Path::Server, &mut served);
    if answered.is_some() {
        well_formed(query, &served, transport);
    }

    let mut fast = Vec::new();
    let Some(fast_answered) = answer_on(table, query, client, transport, Path::Fast, &mut fast) else {
        return;
    };
    assert_eq!(Some(fast_answered), answered, "the server takes the fast path where it answers");
    assert_eq!(fast, served);

    let mut full = Vec::new();
    let full_answered = answer_on(table, query, client, transport, Path::Full, &mut full)
        .expect("the full path answers every query the fast path answers");
    assert_eq!(fast_answered, full_answered, "the paths' outcomes differ");
    let f = Message::from_vec(&fast).expect("checked above");
    let s = Message::from_vec(&full).expect("the full path's answer parses");
    assert_eq!(f, s, "the fast and the full path disagree");
});

/// An answer parses, is a response with the query's ID and fits the transport: a TCP
/// message, the client's EDNS size (between 512 and the server's 1,232), or 512 without EDNS.
fn well_formed(query: &[u8], answer: &[u8], transport: Transport) {
    let m = Message::from_vec(answer).expect("every answer parses");
    assert_eq!(answer[..2], query[..2], "the answer carries the query's ID");
    assert_eq!(m.metadata.message_type, hickory_proto::op::MessageType::Response);
    let limit = match (transport, Message::from_vec(query).ok().and_then(|q| q.edns)) {
        (Transport::Tcp, _) => usize::from(u16::MAX),
        (Transport::Udp, Some(e)) => usize::from(e.max_payload().clamp(512, 1232)),
        (Transport::Udp, None) => 512,
    };
    assert!(answer.len() <= limit, "{} bytes over a limit of {limit}", answer.len());
}
