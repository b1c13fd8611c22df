//! One evaluation pass of a large cluster: 10,000 nodes × 3 addresses × 2 listeners seen by
//! 50 probers, with 20 rules. `cargo bench -p vantage-core --bench evaluation`.
// A benchmark stops at its first failure.
#![allow(clippy::expect_used)]

use std::borrow::Cow;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use vantage_core::Timestamp;
use vantage_core::address::{Level, SchedulingAddress};
use vantage_core::answer::LineSpec;
use vantage_core::evaluate::{AddressView, ClusterState, ClusterView, NodeMetrics, NodeView, evaluate};
use vantage_core::ids::{GroupId, LineId, NodeId, RegionId, RuleId};
use vantage_core::model::Cluster;
use vantage_core::reachability::{Observation, Observations, ProberView};
use vantage_core::rules::Rule;
use vantage_core::settings::ProbeSettings;

const NODES: u32 = 10_000;
const PROBERS: u32 = 50;
const LISTENERS: u32 = 2;
const GROUPS: i64 = 10;

struct World {
    settings: ProbeSettings,
    detection: vantage_core::detection::DetectionSettings,
    cluster: Cluster,
    lines: Vec<LineSpec>,
    nodes: Vec<NodeView<'static>>,
    probers: Vec<ProberView>,
    rules: Vec<(RuleId, Rule)>,
}

fn world(now: Timestamp, failing_every: u32) -> World {
    let probers: Vec<ProberView> =
        (0..PROBERS).map(|p| ProberView { region: RegionId(i64::from(p % 5) + 1), active: true }).collect();
    let lines = (1..=GROUPS)
        .map(|g| LineSpec {
            id: LineId(g),
            name: format!("line-{g}"),
            group: Some(GroupId(g)),
            backup_groups: vec![GroupId(g % GROUPS + 1)],
            min_healthy: 2,
            all_down: vantage_core::model::AllDown::Hold,
            latency: None,
        })
        .collect();
    let levels = [Level::Primary, Level::Backup1, Level::Backup2];
    let nodes = (0..NODES)
        .map(|n| {
            let addresses = (0..3u32)
                .map(|k| {
                    let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n * 4 + k));
                    // Every `failing_every`-th primary is lost by most probers.
                    let failing = failing_every > 0 && k == 0 && n % failing_every == 0;
                    let obs = (0..PROBERS)
                        .flat_map(|p| {
                            (0..LISTENERS).map(move |_| Observation {
                                prober: p,
                                sent: 3,
                                lost: if failing && p % 4 != 0 { 3 } else { 0 },
                                rtt_us: Some(10_000 + (p % 7) * 1000),
                                reported_at: now,
                                failed_at: None,
                            })
                        })
                        .collect();
                    AddressView {
                        expected_probers: 0,
                        address: SchedulingAddress {
                            ip,
                            level: levels[k as usize],
                            trusted: true,
                            line: None,
                        },
                        observations: Cow::Owned(Observations::new(obs)),
                    }
                })
                .collect();
            NodeView {
                id: NodeId(i64::from(n) + 1),
                name: format!("edge-{n}"),
                group: GroupId(i64::from(n) % GROUPS + 1),
                enabled: true,
                last_heartbeat: Some(now),
                links: Vec::new(),
                metrics: Some(NodeMetrics {
                    at: now,
                    cpu_pct: f64::from(n % 100),
                    load1: 1.0,
                    memory_used_bytes: 4 << 30,
                    memory_total_bytes: 16 << 30,
                    egress_mbps: f64::from(n % 1000),
                    connections: u64::from(n),
                    ..Default::default()
                }),
                addresses,
            }
        })
        .collect();
    let metrics = ["cpu", "memory", "egress_mbps", "load1", "connections"];
    let rules = (0..20)
        .map(|i| {
            let json = if i % 2 == 0 {
                format!(
                    r#"{{"name":"rule-{i}","line":{},"conditions":[{{"metric":"{}","comparison":">","threshold":1000000,"for_s":60}}]}}"#,
                    if i % 4 == 0 { "null".to_owned() } else { (i % 10 + 1).to_string() },
                    metrics[i % metrics.len()]
                )
            } else {
                format!(
                    r#"{{"name":"rule-{i}","match":"any","conditions":[
                        {{"metric":"probe_loss","comparison":">=","threshold":90,"for_s":30,"aggregate":"avg","region":{}}},
                        {{"metric":"probe_latency_ms","comparison":">","threshold":500,"for_s":30,"aggregate":"max"}}]}}"#,
                    i % 5 + 1
                )
            };
            (RuleId(i as i64 + 1), serde_json::from_str(&json).expect("bench rules are valid"))
        })
        .collect();
    World {
        settings: ProbeSettings::default(),
        detection: Default::default(),
        cluster: serde_json::from_str(r#"{"name":"big","domain":"cdn.example.net","listeners":[{"port":80,"protocol":"http"},{"port":443,"protocol":"https"}]}"#)
            .expect("bench cluster is valid"),
        lines,
        nodes,
        probers,
        rules,
    }
}

fn view(w: &World) -> ClusterView<'_> {
    ClusterView {
        settings: &w.settings,
        detection: &w.detection,
        cluster: &w.cluster,
        lines: &w.lines,
        nodes: &w.nodes,
        probers: &w.probers,
        rules: &w.rules,
        reason: None,
        statuses: None,
    }
}

fn bench(c: &mut Criterion) {
    let now = Timestamp::from_secs(1_800_000_000);
    let steady = world(now, 0);
    let mut state = ClusterState::default();
    evaluate(&view(&steady), &mut state, now.plus_millis(-10_000));
    let mut g = c.benchmark_group("evaluate");
    g.sample_size(20);
    g.bench_function("10k_nodes_3_addresses_2_listeners_50_probers_20_rules", |b| {
        b.iter_batched(
            || state.clone(),
            |mut s| black_box(evaluate(&view(&steady), &mut s, now)),
            BatchSize::LargeInput,
        )
    });
    // The same with 1 % of the primaries becoming unreachable in this pass: the state is the
    // steady one, the failing results arrive, and the pass cuts a revision (checked here, so
    // that the case measures what it says).
    let failing = world(now, 100);
    let primed = state.clone();
    let cut = evaluate(&view(&failing), &mut primed.clone(), now);
    assert!(!cut.revisions.is_empty(), "the failing case cuts a revision");
    println!("1 % failing: {} revision(s) cut in the timed pass", cut.revisions.len());
    g.bench_function("same_with_1pct_of_primaries_switching_level", |b| {
        b.iter_batched(
            || primed.clone(),
            |mut s| black_box(evaluate(&view(&failing), &mut s, now)),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
