//! What the fuzz targets share: a small fleet for the control core to take reports,
//! heartbeats and mirror files against, built the way the server builds its configuration
//! (objects through `handle_change`, the registry through `handle_registry`).
//!
//! Ids are fixed, so the seeds can name real targets: the prober is [`PROBER`], the nodes
//! [`NODE`] (203.0.113.10 primary, 198.51.100.10 backup, 2001:db8::10 primary) and
//! [`REPORTING_NODE`] (no configured addresses: its heartbeats' addresses count), the cluster
//! listens on 80 (http) and 443 (https), and the mirror `m1.example.net` serves tenant `t`.
//! So `n5/203.0.113.10/80` and `m/m1.example.net` are keys of the prober's work.

use std::sync::{Arc, LazyLock};

use vantage_control::config::{Config, GroupRecord, NodeRecord, Object, ProberRecord, RuleRecord};
use vantage_control::identity::Caller;
use vantage_control::{Control, Start};
use vantage_core::Timestamp;
use vantage_core::address::{AddressInput, AddressList, AddressPolicy, Level};
use vantage_core::ids::{ClusterId, NodeId, ProberId, RegionId};

/// The virtual clock's start.
pub const T0: Timestamp = Timestamp::from_secs(1_800_000_000);
/// The prober the reports come from.
pub const PROBER: Caller = Caller::Prober(ProberId(2));
/// A node with configured addresses.
pub const NODE: NodeId = NodeId(5);
/// A node without configured addresses (its heartbeats report them) that also probes.
pub const REPORTING_NODE: NodeId = NodeId(6);

/// The registry's files: one tenant and one mirror.
pub const MIRROR_FILES: [(&str, &str); 2] =
    [("tenants.yaml", "- name: t\n"), ("m1.example.net.yaml", "host: m1.example.net\ntenants: [t]\n")];

static CONFIG: LazyLock<Arc<Config>> = LazyLock::new(|| {
    let mut c = Control::new(Start::default(), T0);
    let region =
        serde_json::from_value(serde_json::json!({"code": "eu", "name": "Europe"})).expect("a valid region");
    let cluster = serde_json::from_str(
        r#"{"name":"video","domain":"cdn.example.net","listeners":[{"port":80,"protocol":"http"},{"port":443,"protocol":"https"}]}"#,
    )
    .expect("a valid cluster");
    let group =
        serde_json::from_value(serde_json::json!({"name": "fra-1", "region": 1})).expect("a valid group");
    let node = |name: &str, rows: &[(&str, Level)], also_probes: bool| {
        let rows: Vec<AddressInput> =
            rows.iter().map(|(ip, level)| AddressInput { ip: (*ip).into(), level: *level, trusted: false, line: None }).collect();
        Object::Node(NodeRecord {
            cluster: ClusterId(3),
            node: serde_json::from_value(
                serde_json::json!({"group": 4, "name": name, "also_probes": also_probes}),
            )
            .expect("a valid node"),
            addresses: AddressList::parse(&rows, AddressPolicy::default()).expect("valid addresses"),
            cert_sha256: None,
            cert_issued_at: None,
            enrolled_from: None,
        })
    };
    let rule = serde_json::from_str(
        r#"{"name":"lossy","action":"remove_node","hold_s":0,"recover_s":0,"conditions":[{"metric":"probe_loss","comparison":">=","threshold":50,"for_s":0}]}"#,
    )
    .expect("a valid rule");
    let objects = vec![
        (1, Object::Region(region)),
        (
            2,
            Object::Prober(ProberRecord {
                name: "fra".into(),
                region: RegionId(1),
                enabled: true,
                cert_sha256: Some("fp-fra".into()),
                cert_issued_at: Some(T0),
            }),
        ),
        (3, Object::Cluster(cluster)),
        (4, Object::Group(GroupRecord { cluster: ClusterId(3), group })),
        (
            5,
            node(
                "edge-1",
                &[
                    ("203.0.113.10", Level::Primary),
                    ("198.51.100.10", Level::Backup1),
                    ("2001:db8::10", Level::Primary),
                ],
                false,
            ),
        ),
        (6, node("edge-2", &[], true)),
        (7, Object::Rule(RuleRecord { cluster: ClusterId(3), rule })),
    ];
    for (id, o) in objects {
        c.handle_change(vec![(id, o)], Vec::new(), T0);
    }
    c.config()
});

/// A fresh control core over the fleet, with the registry loaded and the prober's work
/// handed out (so its reports may name the work's targets).
pub fn control() -> Control {
    let start = Start {
        config: Config::clone(&CONFIG),
        mirror_files: MIRROR_FILES.iter().map(|(f, t)| ((*f).to_owned(), (*t).to_owned())).collect(),
        ..Start::default()
    };
    let mut c = Control::new(start, T0);
    c.handle_work(PROBER, T0);
    c.handle_work(Caller::Node(REPORTING_NODE), T0);
    c
}

/// Runs the core's timers from `from` for `seconds`, as the driver does, and drops what it
/// decided; the targets look for panics on the way. Each wake must leave the next one later
/// than itself, or the driver would spin.
pub fn run_for(c: &mut Control, from: Timestamp, seconds: i64) {
    let until = from.plus_millis(seconds * 1000);
    while let Some(t) = c.poll_timeout().filter(|t| *t <= until) {
        let now = t.max(from);
        c.handle_timeout(now);
        while c.poll_output().is_some() {}
        if let Some(next) = c.poll_timeout() {
            assert!(next > now, "woken at {now}, the core asks to be woken again at {next}");
        }
    }
    c.handle_timeout(until);
    while c.poll_output().is_some() {}
}
