//! The built-in DNS server with a fixed table, for `bench/dns/run.sh` (dnsperf against it
//! and against Knot, gdnsd and PowerDNS serving the same records).
//!
//! `dns_bench_server LISTEN WORKERS SECONDS [lines | geo FILE…]`: serves `bench.test` (4 A
//! records) on LISTEN with WORKERS UDP threads, and exits after SECONDS (a bounded run). With
//! `lines`, the cluster also has 200 client networks over 3 lines, so line choice is part of
//! the work; with `geo`, also 3 lines claiming an AS, a country and a continent, placed by the
//! MaxMind DB FILEs, so a client no network holds is looked up in them.
// A benchmark fixture stops at its first failure.
#![allow(clippy::expect_used)]

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use vantage_core::geo::{Continent, Places};
use vantage_dns::{
    AnswerTable, Answers, DnsConfig, DnsMetrics, DnsServer, DnsSettings, GeoDb, LineAnswers, ZoneAnswers,
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(listen), Some(workers), Some(seconds)) = (
        args.get(1).and_then(|a| a.parse::<SocketAddr>().ok()),
        args.get(2).and_then(|a| a.parse::<usize>().ok()),
        args.get(3).and_then(|a| a.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: dns_bench_server LISTEN WORKERS SECONDS [lines | geo FILE…]");
        return ExitCode::from(2);
    };
    let with_geo = args.get(4).is_some_and(|a| a == "geo");
    let with_lines = with_geo || args.get(4).is_some_and(|a| a == "lines");
    let geo = with_geo.then(|| {
        let files =
            args[5..].iter().map(|f| (f.clone(), std::fs::read(f).expect("a geo database"))).collect();
        Arc::new(GeoDb::open(files).expect("a geo database"))
    });
    let records: Vec<_> = (11..=14).map(|i| std::net::IpAddr::from([127, 0, 0, i])).collect();
    let mut lines = Vec::new();
    if with_lines {
        for l in 0..3u8 {
            // Always a valid network: two octets below 256 and a /24 with the host octet zero.
            let nets = (0..67u8).map(|i| format!("10.{l}.{i}.0/24").parse().expect("network")).collect();
            lines.push(LineAnswers {
                name: format!("line{l}"),
                client_networks: nets,
                places: Default::default(),
                records: records[..2].to_vec(),
                ttl: None,
            });
        }
    }
    if with_geo {
        let claims = [
            Places::new(Vec::new(), Vec::new(), vec![64500]),
            Places::new(vec!["DE".parse().expect("a country")], Vec::new(), Vec::new()),
            Places::new(Vec::new(), vec![Continent::EU], Vec::new()),
        ];
        for (l, places) in claims.into_iter().enumerate() {
            lines.push(LineAnswers {
                name: format!("place{l}"),
                client_networks: vec![],
                places: places.expect("places"),
                records: records[2..].to_vec(),
                ttl: None,
            });
        }
    }
    lines.push(LineAnswers {
        name: "default".into(),
        client_networks: vec![],
        places: Default::default(),
        records: records.clone(),
        ttl: None,
    });
    let zone = ZoneAnswers {
        cluster: "bench".into(),
        domain: "bench.test".into(),
        aliases: vec![],
        ttl: 30,
        serial: 1,
        lines,
        all: records,
    };
    let answers =
        Arc::new(Answers::new(AnswerTable::build(vec![zone], &DnsSettings::default()).with_geo(geo)));
    let config = DnsConfig { listen, udp_workers: workers, ..DnsConfig::default() };
    let server = match DnsServer::start(config, answers, Arc::new(DnsMetrics::new())) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("listening on {}", server.local_addr());
    std::thread::sleep(Duration::from_secs(seconds));
    server.shutdown();
    ExitCode::SUCCESS
}
