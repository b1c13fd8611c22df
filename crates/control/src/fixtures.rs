//! The large fleet the benchmarks share (the control core's pass, the server's contention):
//! one cluster of N nodes × 3 addresses (primary, backup1, backup2) × 2 listeners, one group,
//! P probers in one region, and every target of a prober's work answered good. Built as the
//! store would hand it over: objects under ids, each prober with the certificate fingerprint
//! `fp-{n}`.
// A fixture: its objects are valid by construction, and a benchmark stops at its first failure.
#![allow(clippy::expect_used)]

use vantage_core::Timestamp;
use vantage_core::address::{AddressInput, AddressList, AddressPolicy, Level};
use vantage_core::ids::{ClusterId, GroupId, ProberId};
use vantage_core::result::{Attempt, ProbeResult, Stages};
use vantage_core::wire;

use crate::config::{GroupRecord, NodeRecord, Object, ProberRecord};
use crate::identity::Caller;

/// The objects of the fleet, and its probers.
#[derive(Debug)]
pub struct LargeFleet {
    /// Every object under its id: region 1, cluster 2, group 3, probers from 101, then nodes.
    pub puts: Vec<(i64, Object)>,
    /// The probers, in order.
    pub probers: Vec<Caller>,
}

/// `nodes` nodes (addresses from 10.0.0.0, four apart) seen by `probers` probers.
pub fn large_fleet(nodes: u32, probers: i64) -> LargeFleet {
    let cluster = ClusterId(2);
    let mut puts = vec![
        (1, Object::Region(value(serde_json::json!({"code": "eu", "name": "Europe"})))),
        (
            2,
            Object::Cluster(value(serde_json::json!({
                "name": "video", "domain": "cdn.example.net",
                "listeners": [{"port": 80, "protocol": "http"}, {"port": 443, "protocol": "https"}],
            }))),
        ),
    ];
    let group = GroupRecord { cluster, group: value(serde_json::json!({"name": "g", "region": 1})) };
    puts.push((3, Object::Group(group)));
    let mut id = 100;
    let mut callers = Vec::new();
    for p in 0..probers {
        id += 1;
        let rec = ProberRecord {
            name: format!("p{p}"),
            region: vantage_core::ids::RegionId(1),
            enabled: true,
            cert_sha256: Some(format!("fp-{p}")),
            cert_issued_at: None,
        };
        puts.push((id, Object::Prober(rec)));
        callers.push(Caller::Prober(ProberId(id)));
    }
    let levels = [Level::Primary, Level::Backup1, Level::Backup2];
    for n in 0..nodes {
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
            node: value(serde_json::json!({"group": GroupId(3), "name": format!("edge-{n}")})),
            addresses: AddressList::parse(&rows, AddressPolicy::default()).expect("addresses"),
            cert_sha256: None,
            cert_issued_at: None,
            enrolled_from: None,
        };
        puts.push((id, Object::Node(rec)));
    }
    LargeFleet { puts, probers: callers }
}

/// An object of the fleet from its JSON, which is valid by construction.
fn value<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}

/// Every target of `work` answered good (3 attempts of 10 ms) at `at`, in reports of at most
/// [`wire::MAX_RESULTS`] results, as a prober sends one round.
pub fn good_round(work: &wire::Work, at: Timestamp) -> Vec<wire::Report> {
    let good = Attempt { stages: Stages::ALL, rtt_us: 10_000, error: None };
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
    results
        .chunks(wire::MAX_RESULTS)
        .map(|chunk| wire::Report {
            started_at: at,
            finished_at: at,
            version: "bench".into(),
            results: chunk.to_vec(),
            confirmation: false,
        })
        .collect()
}
