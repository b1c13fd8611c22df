//! `run_agent`: heartbeats with metrics, addresses, capabilities and links; probing while
//! the server says `also_probes`.

use std::net::IpAddr;
use std::time::Duration;

use vantage_agent::metrics::MetricsSource;
use vantage_agent::{AgentOptions, CAP_METRICS, CAP_PROBE_HEALTH, Error, host, run_agent};
use vantage_core::Timestamp;
use vantage_core::check::{Check, CheckInput, Listener, Protocol};
use vantage_core::settings::{ProbeSettings, ProbeSettingsInput};
use vantage_core::wire::{self, HostMetrics, Role, Target, Work};
use vantage_testkit::{EdgeServer, any_loopback};

use crate::options;
use crate::prober::Running;
use crate::support::{ChannelServer, eventually};

fn heartbeats(server: &ChannelServer) -> Vec<wire::Heartbeat> {
    server.log.heartbeats.lock().unwrap().clone()
}

#[tokio::test]
async fn heartbeats_carry_the_metrics_file_addresses_and_links() {
    vantage_testkit::init_tracing();
    let server = ChannelServer::start(Role::Node, "vtn_good").await;
    let dir = tempfile::tempdir().unwrap();
    let metrics_path = dir.path().join("metrics.json");
    let m = HostMetrics {
        cpu_pct: 12.5,
        load1: 0.5,
        memory_used_bytes: 1,
        memory_total_bytes: 2,
        ..Default::default()
    };
    std::fs::write(&metrics_path, serde_json::to_string(&m).unwrap()).unwrap();
    let state = dir.path().join("state");
    let link = host::parse_link("wg0=2026-01-02T03:04:05Z").unwrap();
    let opts = AgentOptions {
        metrics: MetricsSource::File(metrics_path.clone()),
        addresses: vec!["192.0.2.10".parse().unwrap(), "2001:db8::10".parse().unwrap()],
        links: vec![link.clone()],
        heartbeat_interval: Duration::from_millis(100),
        ..AgentOptions::new(options(&state, server.url(), "vtn_good", server.ca.fingerprint()))
    };
    let running = Running::start(move |stop| run_agent(opts, stop));

    eventually(10, "a heartbeat", || !heartbeats(&server).is_empty()).await;
    let hb = heartbeats(&server)[0].clone();
    assert_eq!(hb.metrics, Some(m));
    assert_eq!(hb.capabilities, [CAP_METRICS, CAP_PROBE_HEALTH]);
    assert_eq!(hb.addresses, ["192.0.2.10".parse::<IpAddr>().unwrap(), "2001:db8::10".parse().unwrap()]);
    assert_eq!(hb.links, [link]);
    assert_eq!(hb.hostname, "probe-host-1");
    assert_eq!(hb.version, vantage_agent::VERSION);
    let beat = server.requests_to(wire::NODE_HEARTBEAT)[0].clone();
    assert!(beat.client.is_some(), "heartbeats show the node's certificate");

    // The file is re-read at every heartbeat.
    let hot = HostMetrics { cpu_pct: 97.0, ..m };
    std::fs::write(&metrics_path, serde_json::to_string(&hot).unwrap()).unwrap();
    eventually(10, "a heartbeat with the new CPU", || {
        heartbeats(&server).last().unwrap().metrics == Some(hot)
    })
    .await;
    // An unreadable file: heartbeats go on, without metrics and without metrics-v1.
    std::fs::write(&metrics_path, "{").unwrap();
    eventually(10, "a heartbeat without metrics", || heartbeats(&server).last().unwrap().metrics.is_none())
        .await;
    assert_eq!(heartbeats(&server).last().unwrap().capabilities, [CAP_PROBE_HEALTH]);
    // Paced by the interval, not flooding.
    let beats = server.requests_to(wire::NODE_HEARTBEAT);
    let span = beats.last().unwrap().at - beats[0].at;
    let n = u32::try_from(beats.len()).unwrap();
    assert!(
        span >= (Duration::from_millis(100) * (n - 1)).saturating_sub(Duration::from_millis(100)),
        "{n} heartbeats in {span:?}"
    );
    assert!(server.requests_to(wire::NODE_WORK).is_empty(), "no probing unless asked");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn proc_metrics_and_discovered_addresses() {
    let server = ChannelServer::start(Role::Node, "vtn_good").await;
    let dir = tempfile::tempdir().unwrap();
    let opts = AgentOptions {
        heartbeat_interval: Duration::from_millis(200),
        ..AgentOptions::new(options(dir.path(), server.url(), "vtn_good", server.ca.fingerprint()))
    };
    let running = Running::start(move |stop| run_agent(opts, stop));
    eventually(10, "two heartbeats", || heartbeats(&server).len() >= 2).await;
    let hb = heartbeats(&server);
    let first = hb[0].metrics.expect("this machine has /proc");
    assert_eq!((first.cpu_pct, first.egress_mbps), (0.0, 0.0), "rates are 0 in the first heartbeat");
    assert!(first.memory_total_bytes > 0);
    assert!(hb[0].capabilities.iter().any(|c| c == CAP_METRICS));
    assert!(hb[0].addresses.iter().all(|ip| host::is_reportable(*ip)), "{:?}", hb[0].addresses);
    assert!(hb[0].addresses.iter().all(|ip| !ip.is_loopback()));
    running.stop().await.unwrap();
}

#[tokio::test]
async fn also_probes_starts_and_stops_the_prober_loop() {
    let edge = EdgeServer::start(any_loopback()).await.unwrap();
    let server = ChannelServer::start(Role::Node, "vtn_good").await;
    let settings = ProbeSettings::parse(ProbeSettingsInput {
        interval_s: 5,
        timeout_ms: 500,
        attempts: 1,
        ..Default::default()
    })
    .unwrap();
    server.script().work = Work {
        id: 42,
        settings,
        checks: vec![Check::parse(CheckInput::default()).unwrap()],
        targets: vec![Target {
            key: "peer".into(),
            ip: "127.0.0.1".parse().unwrap(),
            listener: Listener { port: edge.addr().port(), protocol: Protocol::Http, proxy_protocol: false },
            check: 0,
        }],
        endpoints: Vec::new(),
        check_now: false,
        renew_in_s: 86_400,
        phase_ms: None,
        fetch: vantage_core::fetch::FetchPolicy::any_address(),
    };
    server.script().reply.also_probes = true;
    let dir = tempfile::tempdir().unwrap();
    let opts = AgentOptions {
        metrics: MetricsSource::File(dir.path().join("absent.json")),
        addresses: vec!["192.0.2.10".parse().unwrap()],
        heartbeat_interval: Duration::from_millis(100),
        ..AgentOptions::new(options(dir.path(), server.url(), "vtn_good", server.ca.fingerprint()))
    };
    let running = Running::start(move |stop| run_agent(opts, stop));
    eventually(10, "a node report", || !server.log.reports.lock().unwrap().is_empty()).await;
    let (path, report) = server.log.reports.lock().unwrap()[0].clone();
    assert_eq!(path, wire::NODE_REPORT);
    assert_eq!(report.results.len(), 1);
    assert_eq!((report.results[0].sent(), report.results[0].lost()), (1, 0));
    assert!(server.requests_to(wire::PROBER_WORK).is_empty(), "a node uses the node endpoints");

    // Turned off: the loop stops; no second round comes 5 s after the first.
    server.script().reply.also_probes = false;
    let asked = server.requests_to(wire::NODE_WORK).len();
    let beats = heartbeats(&server).len();
    eventually(10, "a heartbeat that turns probing off", || heartbeats(&server).len() > beats + 1).await;
    tokio::time::sleep(Duration::from_millis(5500)).await;
    assert_eq!(server.requests_to(wire::NODE_WORK).len(), asked);
    assert!(running.is_running());
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_node_enrolls_with_a_node_token_only() {
    let server = ChannelServer::start(Role::Node, "vtn_good").await;
    let dir = tempfile::tempdir().unwrap();
    let opts =
        AgentOptions::new(options(dir.path(), server.url(), "vtp_wrong_kind", server.ca.fingerprint()));
    let e = run_agent(opts, std::future::pending()).await.unwrap_err();
    assert!(matches!(e, Error::Config { option: "--token", .. }), "{e}");
    assert_eq!(server.connections(), 0);
}

#[test]
fn links_parse_from_the_command_line_forms() {
    let l = host::parse_link("wg0=1767323045").unwrap();
    assert_eq!((l.name.as_str(), l.last_handshake), ("wg0", Some(Timestamp::from_secs(1_767_323_045))));
    let l = host::parse_link("wg1=2026-01-02T03:04:05Z").unwrap();
    assert_eq!(l.last_handshake, Some("2026-01-02T03:04:05Z".parse().unwrap()));
    assert_eq!(host::parse_link("wg2=never").unwrap().last_handshake, None);
    for bad in ["wg0", "=1", "wg0=yesterday"] {
        assert!(host::parse_link(bad).is_err(), "{bad}");
    }
}

#[test]
fn reportable_addresses() {
    for ok in ["192.0.2.1", "10.0.0.1", "2001:db8::1", "fd00::1"] {
        assert!(host::is_reportable(ok.parse().unwrap()), "{ok}");
    }
    for no in ["127.0.0.1", "::1", "169.254.1.1", "fe80::1", "224.0.0.1", "0.0.0.0", "::", "255.255.255.255"]
    {
        assert!(!host::is_reportable(no.parse().unwrap()), "{no}");
    }
    let found = host::discover_addresses().unwrap();
    assert!(found.iter().all(|ip| host::is_reportable(*ip)), "{found:?}");
}
