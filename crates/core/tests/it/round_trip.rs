//! Every validated type reads back what it writes: stored objects must load again.

use serde::Serialize;
use serde::de::DeserializeOwned;
use vantage_core::check::Check;
use vantage_core::mirror::Mirror;
use vantage_core::model::{Cluster, Line, Node, NodeGroup, Region};
use vantage_core::monitor::Monitor;
use vantage_core::rules::Rule;
use vantage_core::settings::ProbeSettings;
use vantage_core::wire::Report;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(json: &str) {
    let v: T = serde_json::from_str(json).unwrap();
    let text = serde_json::to_string(&v).unwrap();
    let back: T = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(back, v);
}

#[test]
fn validated_types_read_back_what_they_write() {
    round_trip::<ProbeSettings>(r#"{"interval_s":5,"timeout_ms":1000}"#);
    round_trip::<Check>(
        r#"{"method":"hls","path":"/live.m3u8","max_age_s":30,"request":["GET / HTTP/1.1","Connection: close"]}"#,
    );
    round_trip::<Region>(r#"{"code":"ap-sg","name":"Singapore"}"#);
    round_trip::<Cluster>(
        r#"{"name":"c","domain":"cdn.example.net","aliases":["a.example.net"],"dns_mode":"manual","ttl":60,
            "listeners":[{"port":443,"protocol":"https","proxy_protocol":true}],"check":{"path":"/up"},
            "mass_removal_pct":40,"agent_required":true,"required_links":["wg0"],
            "publishers":[{"name":"knot","server":"192.0.2.53:53","key_name":"vantage-key","key_secret":"c2VjcmV0c2VjcmV0c2VjcmV0"}]}"#,
    );
    round_trip::<NodeGroup>(r#"{"name":"g","region":3}"#);
    round_trip::<Line>(
        r#"{"name":"l","group":1,"backup_groups":[2,3],"min_healthy":2,"client_networks":["10.0.0.0/8","2001:db8::/32"]}"#,
    );
    round_trip::<Node>(r#"{"group":1,"name":"n","enabled":false,"also_probes":true}"#);
    round_trip::<Rule>(
        r#"{"name":"r","line":4,"action":"backup_ip","match":"any","hold_s":0,"recover_s":10,"enabled":false,
            "conditions":[{"metric":"memory","comparison":"<=","threshold":5},{"metric":"probe_latency_ms","aggregate":"min","region":2}]}"#,
    );
    round_trip::<Mirror>(
        r#"{"host":"m.example.net","tenants":["t1"],"weight":0,"manual_block":true,"manual_note":"ticket 1"}"#,
    );
    round_trip::<Monitor>(
        r#"{"name":"live","regions":[{"region":"jp","weight":0.3,"endpoints":["https://e.example.net/a.m3u8"]}],"failure_quorum":2,"quorum_window":4}"#,
    );
}

/// A report from an agent before `confirmation` reads as a round, and a round is written as
/// before it: older agents and servers keep reading each other's reports.
#[test]
fn a_report_without_the_confirmation_field_is_a_round_and_a_round_is_written_without_it() {
    let old = r#"{"started_at":"2026-12-03T09:00:00Z","finished_at":"2026-12-03T09:00:01Z","version":"0.1.0","results":[]}"#;
    let round: Report = serde_json::from_str(old).unwrap();
    assert!(!round.confirmation);
    let written = serde_json::to_string(&round).unwrap();
    assert!(!written.contains("confirmation"), "{written}");
    let marked = old.replace(r#""results":[]"#, r#""results":[],"confirmation":true"#);
    assert!(serde_json::from_str::<Report>(&marked).unwrap().confirmation);
    round_trip::<Report>(&marked);
}
