//! The admin API against its own OpenAPI document: schemathesis (property-based testing, from
//! PyPI; `.ci/run` installs it) generates requests for every operation of `/v1/openapi.json`,
//! valid and not, and checks that none gets a 5xx, that every answer matches the status, the
//! content type and the schema the document declares for it, and that every refusal has the
//! error shape in plain words (the `error_shape` check of `schemathesis_hooks.py`).
//!
//! The server and schemathesis run in a network namespace of their own with nothing but
//! loopback: the bodies schemathesis makes up include publishers, webhooks and mirrors with
//! made-up addresses, and the server would otherwise send DNS updates, alerts and freshness
//! checks to them. In the namespace every such packet stays on this machine's 127.0.0.1.

use std::path::PathBuf;
use std::time::Instant;

use reqwest::Method;
use serde_json::json;

use crate::harness::ServerProcess;

/// Where the schemathesis command is: `$VANTAGE_VENV/bin/schemathesis`, the virtual
/// environment `.ci/run` makes (by default `~/.cache/vantage-venv`).
fn schemathesis() -> PathBuf {
    let venv = std::env::var_os("VANTAGE_VENV").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/vantage-venv")
    });
    let cli = venv.join("bin/schemathesis");
    assert!(
        cli.is_file(),
        "{} is missing: install it with `python3 -m venv {venv} && {venv}/bin/pip install \
         schemathesis=={SCHEMATHESIS}` (what .ci/run does)",
        cli.display(),
        venv = venv.display(),
    );
    cli
}

/// The version `.ci/run` installs.
const SCHEMATHESIS: &str = "4.32.5";

/// Objects of every kind, so that the ids schemathesis tries in paths (small numbers, as ids
/// are) reach real objects, not only 404s.
async fn seed(s: &ServerProcess) {
    let region = s.create("/v1/regions", json!({"code": "ap-sg", "name": "Singapore"})).await["id"].clone();
    s.create(
        "/v1/regions",
        json!({"code": "eu-de", "name": "Frankfurt", "client_networks": ["192.0.2.0/24"]}),
    )
    .await;
    let cluster = s
        .create(
            "/v1/clusters",
            json!({"name": "video", "domain": "cdn.example.net",
                   "listeners": [{"port": 80, "protocol": "http"}, {"port": 443, "protocol": "https"}]}),
        )
        .await["id"]
        .clone();
    let group = s
        .create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "sg-1", "region": region}))
        .await["id"]
        .clone();
    let backup =
        s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "sg-2"})).await["id"].clone();
    let line = s
        .create(
            &format!("/v1/clusters/{cluster}/lines"),
            json!({"name": "default", "group": group, "backup_groups": [backup], "min_healthy": 1}),
        )
        .await["id"]
        .clone();
    let node =
        s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": "edge-1"})).await["id"]
            .clone();
    s.create("/v1/nodes", json!({"cluster": cluster, "group": backup, "name": "edge-2"})).await;
    let (st, v) = s
        .call(
            Method::PUT,
            &format!("/v1/nodes/{node}/addresses"),
            Some(json!([{"ip": "203.0.113.10", "level": "primary"}, {"ip": "198.51.100.10", "level": "backup1"}])),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    s.create(
        &format!("/v1/clusters/{cluster}/rules"),
        json!({"name": "cpu-high", "line": line,
               "conditions": [{"metric": "cpu", "comparison": ">", "threshold": 90, "for_s": 60}]}),
    )
    .await;
    s.create("/v1/probers/tokens", json!({"name": "p1", "region": region})).await;
    s.create("/v1/nodes/tokens", json!({"node": node})).await;
    s.create("/v1/webhooks", json!({"name": "ops", "url": "http://127.0.0.1:9/hook"})).await;
    s.create("/v1/checks", json!({"name": "default", "method": "http", "path": "/"})).await;
    let (st, v) = s.call(Method::PUT, "/v1/tenants/t1", Some(json!({"note": "tenant one"}))).await;
    assert!(st == 200 || st == 201, "{v}");
    let (st, v) = s
        .call(
            Method::PUT,
            "/v1/mirrors/m1.example.net",
            Some(json!({"tenants": ["t1"], "address": "127.0.0.1:9"})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    s.create(
        "/v1/monitors",
        json!({"name": "live", "regions": [{"region": "ap-sg", "weight": 1,
                                            "endpoints": ["http://127.0.0.1:9/live.m3u8"]}]}),
    )
    .await;
}

/// Runs schemathesis against a seeded server; the exit code and what it printed.
async fn run(cli: PathBuf) -> (Option<i32>, String) {
    let s = ServerProcess::start_lab().await;
    seed(&s).await;
    // The only admin token yet is the one the run uses: `schemathesis_hooks.py` keeps it.
    let (_, tokens) = s.call(Method::GET, "/v1/admin-tokens", None).await;
    let [own] = tokens["items"].as_array().unwrap().as_slice() else { panic!("one admin token: {tokens}") };
    let work = tempfile::tempdir().unwrap();
    let hooks = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/schemathesis_hooks.py");
    let out = tokio::process::Command::new(cli)
        .arg("--config-file")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/schemathesis.toml"))
        .arg("run")
        .arg(format!("{}/v1/openapi.json", s.url))
        .args(["--header", &format!("Authorization: Bearer {}", s.token)])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_schema_conformance,error_shape",
        ])
        // Bounded and reproducible: the same cases every run, a few minutes on two cores.
        .args(["--max-examples", "20", "--seed", "20260101", "--request-timeout", "10"])
        .args(["--workers", "2", "--generation-database", "none", "--no-color"])
        .env("SCHEMATHESIS_HOOKS", hooks)
        .env("VANTAGE_RUN_TOKEN_ID", own["id"].to_string())
        .env("NO_COLOR", "1")
        .current_dir(work.path())
        .kill_on_drop(true)
        .output();
    // A server that stops answering must fail the run, not hold CI until its own limit.
    let out = tokio::time::timeout(std::time::Duration::from_secs(600), out)
        .await
        .expect("schemathesis finished within 10 minutes")
        .expect("schemathesis runs");
    let log = std::fs::read_to_string(s.dir.with_extension("log")).unwrap_or_default();
    let text = format!(
        "{}{}\n--- vantage serve's log ---\n{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn schemathesis_finds_nothing_wrong() {
    let cli = schemathesis();
    // Its own thread, which alone enters the new namespace; the server and schemathesis are
    // started from it and inherit it.
    let run = std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("a network namespace (needs root)");
        let lo = std::process::Command::new("ip").args(["link", "set", "lo", "up"]).status().unwrap();
        assert!(lo.success(), "loopback is up in the namespace");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let started = Instant::now();
        let (code, text) = rt.block_on(run(cli));
        (code, text, started.elapsed())
    });
    let (code, text, took) = run.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
    println!("{text}\nschemathesis ran for {took:?}");
    assert_eq!(code, Some(0), "schemathesis found failures (run of {took:?}):\n{text}");
}
