//! One pass of the control core over a large cluster, as the driver runs it under the core's
//! lock: 10,000 nodes × 3 addresses × 2 listeners, every target reported by 50 probers (3
//! million latest results). Prints the median and worst of the passes, and how long feeding
//! one prober's full report takes. `cargo bench -p vantage-control --bench pass`.
// A benchmark stops at its first failure.
#![allow(clippy::expect_used)]

use std::time::{Duration, Instant};

use vantage_control::config::{GroupRecord, NodeRecord, Object, ProberRecord};
use vantage_control::identity::Caller;
use vantage_control::{Control, Start};
use vantage_core::Timestamp;
use vantage_core::address::{AddressInput, AddressList, AddressPolicy, Level};
use vantage_core::ids::{ClusterId, GroupId, ProberId, RegionId};
use vantage_core::result::{Attempt, ProbeResult, Stages};
use vantage_core::wire;

const NODES: u32 = 10_000;
const PROBERS: i64 = 50;
const PASSES: usize = 15;

fn json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

fn main() {
    let mut now = Timestamp::from_secs(1_800_000_000);
    let mut control = Control::new(Start::default(), now);
    let mut puts = Vec::new();
    let region = RegionId(1);
    puts.push((1, Object::Region(json(serde_json::json!({"code": "eu", "name": "Europe"})))));
    let cluster = ClusterId(2);
    puts.push((
        2,
        Object::Cluster(json(serde_json::json!({
            "name": "video", "domain": "cdn.example.net",
            "listeners": [{"port": 80, "protocol": "http"}, {"port": 443, "protocol": "https"}],
        }))),
    ));
    let group = GroupId(3);
    puts.push((
        3,
        Object::Group(GroupRecord { cluster, group: json(serde_json::json!({"name": "g", "region": 1})) }),
    ));
    let mut id = 100;
    let mut probers = Vec::new();
    for p in 0..PROBERS {
        id += 1;
        let rec = ProberRecord {
            name: format!("p{p}"),
            region,
            enabled: true,
            cert_sha256: None,
            cert_issued_at: None,
        };
        puts.push((id, Object::Prober(rec)));
        probers.push(Caller::Prober(ProberId(id)));
    }
    let levels = [Level::Primary, Level::Backup1, Level::Backup2];
    for n in 0..NODES {
        id += 1;
        let rows: Vec<AddressInput> = (0..3u32)
            .map(|k| AddressInput {
                ip: std::net::Ipv4Addr::from(0x0a00_0000 + n * 4 + k).to_string(),
                level: levels[k as usize],
                trusted: true,
                line: None,
            })
            .collect();
        let rec = NodeRecord {
            cluster,
            node: json(serde_json::json!({"group": group, "name": format!("edge-{n}")})),
            addresses: AddressList::parse(&rows, AddressPolicy::default()).expect("addresses"),
            cert_sha256: None,
            cert_issued_at: None,
            enrolled_from: None,
        };
        puts.push((id, Object::Node(rec)));
    }
    control.handle_change(puts, Vec::new(), now);
    let good = Attempt { stages: Stages::ALL, rtt_us: 10_000, error: None };
    let mut feed = Vec::new();
    for p in &probers {
        let work = control.handle_work(*p, now);
        let results: Vec<ProbeResult> = work
            .targets
            .iter()
            .map(|t| ProbeResult {
                target: t.key.clone(),
                attempts: vec![good; 3],
                hls: None,
                cert_not_after: None,
                failed_at: None,
            })
            .collect();
        for chunk in results.chunks(wire::MAX_RESULTS) {
            let report = wire::Report {
                started_at: now,
                finished_at: now,
                version: "bench".into(),
                results: chunk.to_vec(),
                confirmation: false,
            };
            let t = Instant::now();
            control.handle_report(*p, &report, now).expect("report");
            feed.push(t.elapsed());
        }
    }
    let results: usize = control.observations().results.values().map(|per| per.len()).sum();
    let mut passes: Vec<Duration> = Vec::new();
    for _ in 0..PASSES {
        now = now.plus_secs(10);
        let t = Instant::now();
        control.handle_timeout(now);
        passes.push(t.elapsed());
        while control.poll_output().is_some() {}
    }
    passes.sort();
    feed.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("latest results held: {results}");
    println!(
        "pass (gather + evaluate + snapshot), {PASSES} passes: median {:.1} ms, worst {:.1} ms",
        ms(passes[PASSES / 2]),
        ms(passes[PASSES - 1])
    );
    println!(
        "handle_report of {} results: median {:.1} ms, worst {:.1} ms",
        wire::MAX_RESULTS,
        ms(feed[feed.len() / 2]),
        ms(feed[feed.len() - 1])
    );
}
