//! The built-in server answering `dig` over UDP and TCP.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use prometheus_client::registry::Registry;
use vantage_dns::{
    AnswerTable, Answers, DnsConfig, DnsMetrics, DnsServer, DnsSettings, LineAnswers, ZoneAnswers,
};

use crate::support::{dig, ip, short, video};

/// The header flags dig shows (`qr aa rd`).
fn flags(out: &str) -> Vec<&str> {
    out.lines()
        .find_map(|l| l.strip_prefix(";; flags: "))
        .and_then(|l| l.split(';').next())
        .map(|f| f.split(' ').collect())
        .unwrap_or_default()
}

fn many() -> ZoneAnswers {
    ZoneAnswers {
        cluster: "many".into(),
        domain: "many.test".into(),
        aliases: vec![],
        ttl: 60,
        serial: 3,
        lines: vec![LineAnswers {
            name: "default".into(),
            client_networks: vec![],
            places: Default::default(),
            records: (1..=120).map(|i| std::net::IpAddr::from([10, 0, 1, i])).collect(),
            ttl: None,
        }],
        all: vec![],
    }
}

/// A server answering `zones` on a port `dig` is never given as its own (see `free_port`).
/// The port was free when asked, but nothing holds it until the server binds it, and once in
/// CI another process had taken it by then: a port taken is given up for the next one.
fn start(zones: Vec<ZoneAnswers>) -> (DnsServer, Arc<Answers>, Arc<DnsMetrics>) {
    let table = AnswerTable::build(zones, &DnsSettings::default());
    assert!(table.problems().is_empty(), "{:?}", table.problems());
    let answers = Arc::new(Answers::new(table));
    let metrics = Arc::new(DnsMetrics::new());
    let server = (0..5)
        .find_map(|_| {
            let listen = SocketAddr::from(([127, 0, 0, 1], vantage_testkit::free_port().unwrap()));
            let config = DnsConfig { listen, udp_workers: 2, ..DnsConfig::default() };
            match DnsServer::start(config, answers.clone(), metrics.clone()) {
                Ok(server) => Some(server),
                Err(vantage_dns::Error::Bind { source, .. }) if source.kind() == ErrorKind::AddrInUse => None,
                Err(e) => panic!("{e}"),
            }
        })
        .expect("one of five free ports still free when the server binds it");
    assert_ne!(server.local_addr().port(), 0);
    (server, answers, metrics)
}

#[test]
fn dig_sees_every_answer_kind() {
    let (server, _answers, metrics) = start(vec![video(42, &["192.0.2.1", "2001:db8::1"]), many()]);
    let s = server.local_addr();

    // From the first query on: the loopback line for a client on 127.0.0.1.
    assert_eq!(short(s, &["cdn.example.test", "A"]), ["192.0.2.1"]);
    assert_eq!(short(s, &["cdn.example.test", "AAAA"]), ["2001:db8::1"]);
    // TTL of the cluster, AA set, no recursion offered.
    let full = dig(s, &["cdn.example.test", "A", "+norec"]);
    assert!(full.contains("status: NOERROR") && flags(&full) == ["qr", "aa"], "{full}");
    assert!(full.contains("cdn.example.test.\t30\tIN\tA\t192.0.2.1"), "{full}");

    // EDNS Client Subnet: the subnet's line, and the scope in the reply.
    let ecs = dig(s, &["cdn.example.test", "A", "+subnet=198.51.100.0/24"]);
    assert!(ecs.contains("CLIENT-SUBNET: 198.51.100.0/24/24"), "{ecs}");
    assert!(ecs.contains("IN\tA\t192.0.2.2"), "{ecs}");
    let ecs6 = dig(s, &["cdn.example.test", "AAAA", "+subnet=2001:db8:1:2::/64"]);
    assert!(ecs6.contains("CLIENT-SUBNET: 2001:db8:1:2::/64/48") && ecs6.contains("2001:db8::2"), "{ecs6}");
    let other = dig(s, &["cdn.example.test", "A", "+subnet=203.0.113.0/24"]);
    assert!(other.contains("IN\tA\t192.0.2.3"), "{other}");

    // all.<domain>, aliases (inside the zone, and a zone of its own).
    assert_eq!(short(s, &["all.cdn.example.test", "A"]), ["192.0.2.1", "192.0.2.2", "192.0.2.3"]);
    assert_eq!(short(s, &["all.cdn.example.test", "AAAA"]), ["2001:db8::1", "2001:db8::2", "2001:db8::3"]);
    assert_eq!(short(s, &["WWW.cdn.example.test", "A"]), ["192.0.2.1"]);
    assert_eq!(short(s, &["video.other.test", "A", "+subnet=198.51.100.0/24"]), ["192.0.2.2"]);

    // SOA (serial = revision) and NS at the apex.
    assert_eq!(
        short(s, &["cdn.example.test", "SOA"]),
        ["ns1.cdn.example.test. hostmaster.cdn.example.test. 42 3600 600 1209600 30"]
    );
    assert_eq!(short(s, &["cdn.example.test", "NS"]), ["ns1.cdn.example.test."]);
    assert_eq!(short(s, &["video.other.test", "NS"]), ["ns1.video.other.test."]);

    // NXDOMAIN inside the zone, with the SOA for negative caching.
    let nx = dig(s, &["nope.cdn.example.test", "A"]);
    assert!(nx.contains("status: NXDOMAIN") && flags(&nx) == ["qr", "aa", "rd"], "{nx}");
    assert!(nx.contains("AUTHORITY SECTION:\ncdn.example.test.\t30\tIN\tSOA"), "{nx}");
    // NODATA: the name exists, the type does not.
    let nodata = dig(s, &["cdn.example.test", "MX"]);
    assert!(nodata.contains("status: NOERROR") && nodata.contains("ANSWER: 0, AUTHORITY: 1"), "{nodata}");
    // REFUSED outside every zone.
    let refused = dig(s, &["example.org", "A"]);
    assert!(refused.contains("status: REFUSED") && !flags(&refused).contains(&"aa"), "{refused}");

    // Truncation over UDP (no TCP retry), the whole answer over TCP.
    let udp = dig(s, &["many.test", "A", "+ignore", "+notcp"]);
    assert!(flags(&udp).contains(&"tc") && udp.contains("ANSWER: 0"), "{udp}");
    let plain = dig(s, &["many.test", "A", "+ignore", "+noedns"]);
    assert!(flags(&plain).contains(&"tc"), "{plain}");
    let tcp = short(s, &["many.test", "A", "+tcp"]);
    assert_eq!(tcp.len(), 120);
    let tcp_full = dig(s, &["many.test", "A", "+tcp"]);
    assert!(
        tcp_full.contains("many.test.\t\t60\tIN\tA") || tcp_full.contains("many.test.\t60\tIN\tA"),
        "{tcp_full}"
    );
    // Everything else over TCP too.
    assert_eq!(short(s, &["cdn.example.test", "A", "+tcp"]), ["192.0.2.1"]);
    let tcp_ecs = dig(s, &["cdn.example.test", "A", "+tcp", "+subnet=198.51.100.0/24"]);
    assert!(
        tcp_ecs.contains("CLIENT-SUBNET: 198.51.100.0/24/24") && tcp_ecs.contains("192.0.2.2"),
        "{tcp_ecs}"
    );
    assert!(dig(s, &["nope.cdn.example.test", "A", "+tcp"]).contains("status: NXDOMAIN"));

    // Counters by zone and rcode, exposed through a registry.
    assert!(metrics.queries("cdn.example.test", "NOERROR") >= 10);
    assert!(metrics.queries("cdn.example.test", "NXDOMAIN") >= 2);
    assert!(metrics.queries("", "REFUSED") >= 1);
    assert!(metrics.truncated() >= 2);
    // Address answers by cluster and line, over UDP and TCP alike: the four asked from the
    // asia subnet (none for `all.`, which has no line choice, nor for a negative answer), and
    // of `many.test` only the two answered whole over TCP (the truncated UDP answers gave no
    // records).
    assert_eq!(metrics.line_answers("video", "asia"), 4);
    assert_eq!(metrics.line_answers("video", "default"), 1);
    assert!(metrics.line_answers("video", "local") >= 3);
    assert_eq!(metrics.line_answers("many", "default"), 2);
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(r#"vantage_dns_queries_total{zone="cdn.example.test",rcode="NXDOMAIN"}"#),
        "{text}"
    );
    assert!(text.contains("vantage_dns_truncated_total"), "{text}");
    assert!(text.contains(r#"vantage_dns_line_answers_total{cluster="video",line="asia"}"#), "{text}");

    server.shutdown();
}

#[test]
fn a_swapped_table_answers_from_the_next_query_and_shutdown_frees_the_port() {
    let (server, answers, _metrics) = start(vec![video(1, &["192.0.2.1"])]);
    let s = server.local_addr();
    assert_eq!(short(s, &["cdn.example.test", "A"]), ["192.0.2.1"]);
    answers.store(AnswerTable::build(vec![video(2, &["192.0.2.77"])], &DnsSettings::default()));
    assert_eq!(short(s, &["cdn.example.test", "A"]), ["192.0.2.77"]);
    assert_eq!(short(s, &["cdn.example.test", "A", "+tcp"]), ["192.0.2.77"]);
    assert!(short(s, &["cdn.example.test", "SOA"])[0].contains(" 2 3600 "));
    // A table without the cluster: REFUSED from then on.
    answers.store(AnswerTable::empty(&DnsSettings::default()));
    assert!(dig(s, &["cdn.example.test", "A"]).contains("status: REFUSED"));

    server.shutdown();
    // Every socket is closed: the same port binds again, for UDP and TCP. Another test that
    // starts a process (`dig`) at that moment forks a copy of every descriptor, the server's
    // sockets with them, which its child holds until it executes `dig` (they close on exec):
    // a copy goes within moments, the server's own never would, so the binds get a short while.
    let bind = || UdpSocket::bind(s).map(drop).and_then(|()| std::net::TcpListener::bind(s).map(drop));
    let freed = crate::support::wait_until(std::time::Duration::from_secs(2), || bind().is_ok());
    assert!(freed, "the port stays taken: {:?}", bind());
}

#[test]
fn ipv6_clients_get_their_line_too() {
    let table = AnswerTable::build(vec![video(5, &["192.0.2.1", "2001:db8::1"])], &DnsSettings::default());
    let answers = Arc::new(Answers::new(table));
    let config = DnsConfig { listen: "[::1]:0".parse().unwrap(), udp_workers: 1, ..DnsConfig::default() };
    let server = match DnsServer::start(config, answers, Arc::new(DnsMetrics::new())) {
        Ok(s) => s,
        // Some sandboxes have no IPv6 loopback at all; IPv4 is covered above.
        Err(e) if UdpSocket::bind("[::1]:0").is_err() => {
            eprintln!("skipping: no ::1 here ({e})");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let s: SocketAddr = server.local_addr();
    assert_eq!(s.ip(), ip("::1"));
    // ::1/128 belongs to the loopback line.
    assert_eq!(short(s, &["cdn.example.test", "AAAA"]), ["2001:db8::1"]);
    assert_eq!(short(s, &["cdn.example.test", "A", "+tcp"]), ["192.0.2.1"]);
}

/// A query for `name` type A, without EDNS, as raw bytes.
fn raw_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

#[test]
fn junk_gets_formerr_responses_are_dropped_and_tcp_queries_can_be_pipelined() {
    use std::io::{Read, Write};
    use std::time::Duration;

    let (server, _answers, metrics) = start(vec![video(1, &["192.0.2.1"])]);
    let s = server.local_addr();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut buf = [0u8; 512];

    // A header and then nonsense: FORMERR with the ID echoed.
    client.send_to(&[0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff], s).unwrap();
    let (n, _) = client.recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..2], buf[2] & 0x80, buf[3] & 0x0f), (&[0xab, 0xcd][..], 0x80, 1), "{:?}", &buf[..n]);
    // A response (QR set) and a runt get no answer at all, and are counted as dropped.
    let mut response = raw_query(7, "cdn.example.test");
    response[2] |= 0x80;
    client.send_to(&response, s).unwrap();
    client.send_to(&[1, 2, 3], s).unwrap();
    assert!(client.recv_from(&mut buf).is_err(), "no answer expected");
    assert!(crate::support::wait_until(Duration::from_secs(2), || metrics.dropped() >= 2));

    // Two queries written at once on one TCP connection: two answers, in order.
    let mut tcp = std::net::TcpStream::connect(s).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut both = Vec::new();
    for (id, name) in [(1u16, "cdn.example.test"), (2, "nope.cdn.example.test")] {
        let q = raw_query(id, name);
        both.extend_from_slice(&(q.len() as u16).to_be_bytes());
        both.extend_from_slice(&q);
    }
    tcp.write_all(&both).unwrap();
    for (id, rcode) in [(1u16, 0u8), (2, 3)] {
        let mut len = [0u8; 2];
        tcp.read_exact(&mut len).unwrap();
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        tcp.read_exact(&mut msg).unwrap();
        assert_eq!((u16::from_be_bytes([msg[0], msg[1]]), msg[3] & 0x0f), (id, rcode));
    }
}

#[test]
fn idle_tcp_connections_are_closed() {
    use std::io::Read;
    use std::time::{Duration, Instant};

    let answers =
        Arc::new(Answers::new(AnswerTable::build(vec![video(1, &["192.0.2.1"])], &DnsSettings::default())));
    let config = DnsConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        udp_workers: 1,
        tcp_idle_timeout: Duration::from_millis(300),
        ..DnsConfig::default()
    };
    let server = DnsServer::start(config, answers, Arc::new(DnsMetrics::new())).unwrap();
    let mut tcp = std::net::TcpStream::connect(server.local_addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 16];
    // The server closes the silent connection: end of stream, well before our own timeout.
    assert_eq!(tcp.read(&mut buf).unwrap(), 0);
    assert!(start.elapsed() < Duration::from_secs(3));
}
