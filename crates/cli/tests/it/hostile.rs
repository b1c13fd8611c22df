//! Hostile files and bodies (issue 30) against a real `vantage serve`: what a named pipe or a
//! symbolic link in the mirror registry's directory does to the server, what a YAML body of
//! aliases costs it, and the lenient writes it used to accept.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::ServerProcess;

/// Starts measuring process `pid`'s peak resident memory from what it holds now (writing 5 to
/// `clear_refs` resets `VmHWM` to the current RSS).
fn reset_peak_rss(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

/// The peak resident memory of process `pid`, KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Asks `/healthz` and `/v1/mirrors` in turn for `span`: each must answer within a second.
///
/// A stall here is unbounded (nobody ever writes to the pipe), so a second tells one apart
/// from a 2-core machine busy with the other end-to-end tests, where 100 ms was once missed.
async fn answers_promptly(s: &ServerProcess, span: Duration) {
    let started = Instant::now();
    for round in 0..1_000 {
        if started.elapsed() > span {
            return;
        }
        for path in ["/healthz", "/v1/mirrors"] {
            let asked = Instant::now();
            let r = tokio::time::timeout(Duration::from_secs(5), s.req(Method::GET, path).send()).await;
            let took = asked.elapsed();
            let status = r.expect("answered within 5 s").unwrap().status();
            assert_eq!(status, 200, "{path}");
            assert!(took < Duration::from_secs(1), "{path} took {took:?} (round {round})");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipe_and_a_link_in_the_registry_are_skipped_and_listed_without_stalling() {
    let s = ServerProcess::start().await;
    let dir = s.dir.join("mirrors");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("m1.example.net.yaml"), "host: m1.example.net\n").unwrap();
    s.wait_for("/v1/mirrors", Duration::from_secs(10), |v| v["count"] == 1).await;

    // A named pipe nobody writes to, and a link to the admin token.
    let fifo = dir.join("pipe.example.net.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink(s.dir.join("admin-token"), dir.join("link.example.net.yaml")).unwrap();
    std::fs::write(dir.join("big.example.net.yaml"), vec![b'#'; 65 * 1024]).unwrap();
    std::fs::write(dir.join("latin.example.net.yaml"), b"host: caf\xe9.example.net\n").unwrap();
    answers_promptly(&s, Duration::from_secs(1)).await;
    s.wait_for("/v1/mirrors", Duration::from_secs(10), |v| {
        v["reload"]["skipped"].as_array().is_some_and(|a| a.len() == 4)
    })
    .await;
    answers_promptly(&s, Duration::from_millis(500)).await;
    let (_, list) = s.call(Method::GET, "/v1/mirrors", None).await;
    let skipped: Vec<(&str, &str)> = list["reload"]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["file"].as_str().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        skipped,
        [
            ("big.example.net.yaml", "larger than 65536 bytes"),
            ("latin.example.net.yaml", "not UTF-8"),
            ("link.example.net.yaml", "a symbolic link"),
            ("pipe.example.net.yaml", "a named pipe, not a regular file"),
        ],
        "{list}"
    );
    assert_eq!(list["reload"]["error"]["file"], "big.example.net.yaml", "{list}");
    assert!(!list.to_string().contains(&s.token), "no file's content is shown: {list}");
    // The registry that loaded keeps serving.
    assert_eq!(list["count"], 1, "{list}");

    // Without them the next reload passes and lists nothing.
    for f in ["pipe", "link", "big", "latin"] {
        std::fs::remove_file(dir.join(format!("{f}.example.net.yaml"))).unwrap();
    }
    std::fs::write(dir.join("m2.example.net.yaml"), "host: m2.example.net\n").unwrap();
    s.wait_for("/v1/mirrors", Duration::from_secs(10), |v| v["count"] == 2).await;
    let (_, list) = s.call(Method::GET, "/v1/mirrors", None).await;
    assert!(list["reload"]["error"].is_null(), "{list}");
    assert_eq!(list["reload"]["skipped"], json!([]), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yaml_body_of_aliases_is_refused_before_it_costs_memory() {
    let s = ServerProcess::start().await;
    let list = vec!["1"; 2_500].join(",");
    let refs = vec!["*a"; 2_500].join(",");
    let body = format!("x: &a [{list}]\ny: [{refs}]\n");
    assert!(body.len() < 13 * 1024);
    // Warm up the route (its first answer allocates what every later one reuses).
    let (st, _) = s.call(Method::PUT, "/v1/mirrors/m.example.net", Some(json!({"weight": "x"}))).await;
    assert_eq!(st, 400);
    reset_peak_rss(s.pid());
    let before = peak_rss_kib(s.pid());
    let r = s
        .req(Method::PUT, "/v1/mirrors/m.example.net")
        .header("content-type", "application/yaml")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    let grown = peak_rss_kib(s.pid()) - before;
    assert_eq!(v["error"]["field"], "body", "{v}");
    assert_eq!(v["error"]["reason"], "the YAML expands to more than 100000 nodes through aliases", "{v}");
    assert!(grown < 16 * 1024, "the server's peak RSS grew by {grown} KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lenient_writes_are_refused_naming_the_field() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    std::fs::create_dir_all(s.dir.join("mirrors")).unwrap();
    std::fs::write(s.dir.join("mirrors/m1.example.net.yaml"), "host: m1.example.net\n").unwrap();
    s.wait_for("/v1/mirrors", Duration::from_secs(10), |v| v["count"] == 1).await;
    s.create("/v1/regions", json!({"code": "eu", "name": "Europe"})).await;
    let (_, tokens) = s.call(Method::GET, "/v1/admin-tokens", None).await;
    let tokens_before = tokens["items"].as_array().map(Vec::len);
    let raw = |method: Method, path: &str, body: &str| {
        s.req(method, path).header("content-type", "application/json").body(body.to_owned()).send()
    };
    for (method, path, body, field) in [
        (Method::POST, "/v1/admin-tokens", r#"["x"]"#, "body"),
        (Method::POST, "/v1/probers/tokens", r#"["p", 1]"#, "body"),
        (Method::POST, "/v1/mirrors/m1.example.net/unblock", r#"["x"]"#, "body"),
        (Method::POST, "/v1/mirrors/m1.example.net/force-block", r#"["x"]"#, "body"),
        (Method::POST, "/v1/mirrors/check", r#"[["eu"]]"#, "body"),
        (Method::PUT, "/v1/settings/mirrors", "[]", "body"),
        (Method::POST, "/v1/regions", r#"["eu2", "Europe"]"#, "body"),
        (Method::PUT, "/v1/mirrors/m2.example.net", r#"{"host": ["a"]}"#, "host"),
        (Method::PUT, "/v1/tenants/t", r#"{"name": ["a"]}"#, "name"),
    ] {
        let r = raw(method.clone(), path, body).await.unwrap();
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap();
        assert_eq!((status, v["error"]["field"].as_str()), (400, Some(field)), "{method} {path} {body}: {v}");
    }
    let (_, tokens) = s.call(Method::GET, "/v1/admin-tokens", None).await;
    assert_eq!(tokens["items"].as_array().map(Vec::len), tokens_before, "no token was made: {tokens}");

    // A 10,000-byte monitor endpoint is refused by its length.
    let long = format!("http://127.0.0.1:1/{}", "a".repeat(10_000));
    let (st, v) = s
        .call(
            Method::POST,
            "/v1/monitors",
            Some(json!({"name": "m", "regions": [{"region": "eu", "weight": 1, "endpoints": [long]}]})),
        )
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("regions[0].endpoints[0]")), "{v}");
    assert!(v.to_string().len() < 500, "the URL is not quoted back: {v}");

    // The steering reload URI is built percent-encoded.
    let endpoint = "http://127.0.0.1:1/live.m3u8";
    s.create(
        "/v1/monitors",
        json!({"name": "sec live#1", "regions": [{"region": "eu", "weight": 1, "endpoints": [endpoint]}]}),
    )
    .await;
    let steer: Value = reqwest::get(format!("{}/steer/sec%20live%231?x=%&_HLS_pathway=eu", s.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(steer["RELOAD-URI"], "/steer/sec%20live%231?x=%25", "{steer}");
}
