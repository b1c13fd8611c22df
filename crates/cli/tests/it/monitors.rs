//! Video monitors end to end: `vantage serve`, one `vantage probe` per region, and an HLS
//! origin per region on loopback whose manifest keeps answering 200 while its segments go
//! stale or missing — the incident a single health check cannot see.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::harness::ServerProcess;

/// What an origin's newest segment looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segments {
    /// Made 2 s ago.
    Fresh,
    /// Made 10 minutes ago.
    Stale,
    /// 404.
    Missing,
    /// Neither `Last-Modified` nor `Date`.
    Undated,
}

type Mode = Arc<Mutex<Segments>>;

/// An HLS origin on 127.0.0.1: `/master.m3u8` (one variant, `live.m3u8`), `/live.m3u8` (three
/// segments) and `/seg/N.ts`, answering as `mode` says.
async fn origin(mode: Mode) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else { return };
            let mode = *mode.lock().unwrap();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 2048];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&seen).lines().next().unwrap_or_default().to_owned();
                let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
                let date = |age: u64| httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(age));
                let (status, headers, body) = match path.as_str() {
                    "/master.m3u8" => (
                        200,
                        String::new(),
                        "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000\nlive.m3u8\n".to_owned(),
                    ),
                    "/live.m3u8" => {
                        let mut b = String::from(
                            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:1\n",
                        );
                        for n in 1..=3 {
                            b.push_str(&format!("#EXTINF:6.000,\nseg/{n}.ts\n"));
                        }
                        (200, String::new(), b)
                    }
                    _ => match mode {
                        Segments::Missing => (404, String::new(), "gone".to_owned()),
                        Segments::Fresh => (206, format!("Last-Modified: {}\r\n", date(2)), "x".repeat(1024)),
                        Segments::Stale => {
                            (206, format!("Last-Modified: {}\r\n", date(600)), "x".repeat(1024))
                        }
                        Segments::Undated => (206, String::new(), "x".repeat(1024)),
                    },
                };
                let reason = match status {
                    200 => "OK",
                    206 => "Partial Content",
                    _ => "Not Found",
                };
                let head = format!(
                    "HTTP/1.1 {status} {reason}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(format!("{head}{body}").as_bytes()).await;
            });
        }
    });
    addr
}

fn region_of<'a>(verdict: &'a Value, code: &str) -> &'a Value {
    verdict["regions"].as_array().unwrap().iter().find(|r| r["region"] == code).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_region_degrades_missing_segments_go_down_and_steering_follows() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    let (st, v) = s
        .call(
            Method::PUT,
            "/v1/settings/probes",
            Some(json!({"interval_s": 5, "timeout_ms": 1000, "attempts": 1})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    // Audience: ap 50 %, eu 30 %, us 20 %.
    let mut modes = Vec::new();
    let mut regions = Vec::new();
    let mut monitor_regions = Vec::new();
    for (code, weight, first, path, pathway) in [
        ("ap", 50, Segments::Fresh, "/master.m3u8", "cdn-ap"),
        ("eu", 30, Segments::Fresh, "/live.m3u8", "cdn-eu"),
        ("us", 20, Segments::Undated, "/live.m3u8", "cdn-us"),
    ] {
        let r = s.create("/v1/regions", json!({"code": code, "name": code})).await;
        regions.push(r["id"].as_i64().unwrap());
        let mode: Mode = Arc::new(Mutex::new(first));
        let addr = origin(mode.clone()).await;
        modes.push(mode);
        monitor_regions.push(json!({"region": code, "weight": weight, "endpoints": [format!("http://{addr}{path}")], "pathway": pathway}));
    }
    // An unknown region is refused by name.
    let (st, v) = s
        .call(Method::POST, "/v1/monitors", Some(json!({"name": "x", "regions": [{"region": "mars", "weight": 1, "endpoints": ["http://127.0.0.1:1/a.m3u8"]}]})))
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("regions[0].region")), "{v}");
    let check = json!({"method": "hls", "interval_s": 1, "timeout_ms": 900});
    let m = s
        .create("/v1/monitors", json!({"name": "live", "check": check, "regions": monitor_regions, "max_segment_age_s": 30, "steering_ttl_s": 5}))
        .await;
    let id = m["id"].as_i64().unwrap();
    let verdict_path = format!("/v1/monitors/{id}/verdict");
    let mut probers = Vec::new();
    for (i, r) in regions.iter().enumerate() {
        probers.push(s.start_prober(&format!("p{i}"), *r, temp.path()).await);
    }
    s.wait_for(&verdict_path, Duration::from_secs(30), |v| {
        v["global"] == "healthy"
            && v["regions"].as_array().unwrap().iter().all(|r| r["probes"].as_u64() >= Some(1))
    })
    .await;
    let (_, v) = s.call(Method::GET, &verdict_path, None).await;
    let ap = region_of(&v, "ap");
    assert_eq!(
        (ap["manifest_valid"].as_bool(), ap["segment_fetchable"].as_bool()),
        (Some(true), Some(true)),
        "the master playlist is followed: {v}"
    );
    assert!(ap["segment_age_s"].as_f64().unwrap() < 30.0, "{v}");
    assert!(region_of(&v, "us")["segment_age_s"].is_null(), "undated: unknown age, not stale: {v}");
    assert_eq!(region_of(&v, "us")["health"], "healthy");
    let steer =
        reqwest::get(format!("{}/steer/live?session=abc&_HLS_pathway=cdn-ap&_HLS_throughput=5000000", s.url))
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
    let keys: Vec<&String> = steer.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 4, "{steer}");
    assert_eq!((steer["VERSION"].as_u64(), steer["TTL"].as_u64()), (Some(1), Some(5)), "{steer}");
    assert_eq!(steer["RELOAD-URI"], "/steer/live?session=abc", "{steer}");
    assert_eq!(steer["PATHWAY-PRIORITY"].as_array().unwrap().len(), 3, "{steer}");

    // eu (30 %) serves ten-minute-old segments with a 200 manifest: degraded within two
    // check intervals.
    *modes[1].lock().unwrap() = Segments::Stale;
    let took = s.wait_for(&verdict_path, Duration::from_secs(10), |v| v["global"] == "degraded").await;
    eprintln!("stale eu seen as degraded after {took:?}");
    assert!(took < Duration::from_secs(4), "two 1 s intervals and a report: {took:?}");
    let (_, v) = s.call(Method::GET, &verdict_path, None).await;
    assert_eq!(region_of(&v, "eu")["health"], "stale", "{v}");
    assert!((v["stale_weight"].as_f64().unwrap() - 0.3).abs() < 1e-9, "{v}");
    let metrics = s.metrics().await;
    assert!(metrics.contains(r#"vantage_monitor_verdict{monitor="live"} 1"#), "{metrics}");
    let age_line = metrics
        .lines()
        .find(|l| l.starts_with(r#"vantage_segment_age_seconds{monitor="live",region="eu"}"#))
        .unwrap();
    assert!(age_line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() >= 590.0, "{age_line}");
    assert!(
        metrics.contains(r#"vantage_monitor_ttfb_seconds_count{monitor="live",region="ap"}"#),
        "{metrics}"
    );
    *modes[1].lock().unwrap() = Segments::Fresh;
    s.wait_for(&verdict_path, Duration::from_secs(15), |v| v["global"] == "healthy").await;

    // ap (50 %) loses its segments: down at the failure quorum (3 of 5), alerted as critical,
    // and the steering manifest moves cdn-ap last.
    *modes[0].lock().unwrap() = Segments::Missing;
    s.wait_for(&verdict_path, Duration::from_secs(10), |v| v["global"] == "down").await;
    let (_, v) = s.call(Method::GET, &verdict_path, None).await;
    assert_eq!(region_of(&v, "ap")["health"], "down", "{v}");
    assert_eq!(region_of(&v, "ap")["segment_fetchable"], false);
    assert!(region_of(&v, "ap")["failures"].as_u64().unwrap() >= 3);
    let steer = reqwest::get(format!("{}/steer/live", s.url)).await.unwrap().json::<Value>().await.unwrap();
    assert_eq!(steer["PATHWAY-PRIORITY"].as_array().unwrap().last().unwrap(), "cdn-ap", "{steer}");
    let (_, alerts) = s.call(Method::GET, "/v1/alerts", None).await;
    let text = alerts.to_string();
    assert!(text.contains("monitor live is down") && text.contains("critical"), "{alerts}");
    assert!(text.contains("monitor live is degraded"), "the earlier stale incident alerted too: {alerts}");

    // The history: ap's failures and eu's stale ages, from the time series; the verdict changes.
    // The results are written as they arrive, the verdict taken from memory: the time series
    // holds the third failure a moment after the verdict.
    let history = format!("/v1/monitors/{id}/history?range=1h");
    s.wait_for(&history, Duration::from_secs(5), |h| {
        h["regions"].as_array().and_then(|r| r.iter().find(|r| r["region"] == "ap")).is_some_and(|r| {
            r["points"]
                .as_array()
                .is_some_and(|p| p.iter().filter_map(|p| p["failures"].as_u64()).sum::<u64>() >= 3)
        })
    })
    .await;
    let (_, h) = s.call(Method::GET, &history, None).await;
    let series = |code: &str| {
        h["regions"].as_array().unwrap().iter().find(|r| r["region"] == code).unwrap()["points"].clone()
    };
    let failures: u64 =
        series("ap").as_array().unwrap().iter().map(|p| p["failures"].as_u64().unwrap()).sum();
    assert!(failures >= 3, "{h}");
    let worst =
        series("eu").as_array().unwrap().iter().filter_map(|p| p["max_age_s"].as_f64()).fold(0.0, f64::max);
    assert!(worst >= 590.0, "{h}");
    let verdicts: Vec<&str> =
        h["verdicts"].as_array().unwrap().iter().map(|v| v["verdict"]["global"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["healthy", "degraded", "healthy", "down"], "{h}");
    for p in probers {
        p.kill().await;
    }
}
