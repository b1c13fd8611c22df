//! Monitors through `vantage ctl` against a real `vantage serve`, without probers: created
//! from flags and from a file, listed, shown, their unknown verdict and empty history, the
//! API's refusals by field, deletes.

use serde_json::json;

use crate::ctl_mirrors::{ctl, field, json};
use crate::harness::ServerProcess;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitors_through_ctl() {
    let s = ServerProcess::start_lab().await;
    for (code, name) in [("eu-de", "Frankfurt"), ("us-va", "Virginia")] {
        s.create("/v1/regions", json!({"code": code, "name": name})).await;
    }

    // One monitor from flags: two regions, one with two endpoints and a pathway of its own.
    let (code, out, err) = ctl(
        &s,
        &[
            "--json",
            "monitors",
            "create",
            "live",
            "--region",
            "eu-de=60=https://a.example.net/live.m3u8@cdn-a",
            "--region",
            "us-va=40=https://b.example.net/live.m3u8,https://c.example.net/live.m3u8",
            "--quorum",
            "2/4",
            "--max-segment-age-s",
            "20",
            "--check-interval-s",
            "10",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let live = json(&out);
    let m = &live["monitor"];
    assert_eq!((m["failure_quorum"].as_u64(), m["quorum_window"].as_u64()), (Some(2), Some(4)), "{out}");
    assert_eq!((m["max_segment_age_s"].as_u64(), m["steering_ttl_s"].as_u64()), (Some(20), Some(30)));
    assert_eq!((m["check"]["method"].as_str(), m["check"]["interval_s"].as_u64()), (Some("hls"), Some(10)));
    assert_eq!(m["regions"][0]["pathway"], "cdn-a");
    assert_eq!(m["regions"][1]["endpoints"][1], "https://c.example.net/live.m3u8");
    assert!(live["verdict"].is_null(), "{out}");
    let live_id = live["id"].as_i64().unwrap().to_string();

    // Another from a JSON file, which sets what flags do not.
    let file = s.dir.join("vod.json");
    let body = json!({
        "name": "vod",
        "regions": [{"region": "us-va", "weight": 1, "endpoints": ["http://127.0.0.1:9/vod.m3u8"]}],
        "down_weight_budget_pct": 50,
        "steering_ttl_s": 60,
    });
    std::fs::write(&file, body.to_string()).unwrap();
    let (code, out, err) = ctl(&s, &["monitors", "create", "--file", file.to_str().unwrap()]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(field(&out, "name") == Some("vod") && field(&out, "verdict") == Some("unknown"), "{out}");
    assert!(
        field(&out, "steering_ttl_s") == Some("60") && field(&out, "down_weight_budget_pct") == Some("50.0")
    );
    assert!(
        out.contains(
            "REGION  WEIGHT  PATHWAY  ENDPOINTS\nus-va   1.0     us-va    http://127.0.0.1:9/vod.m3u8"
        ),
        "{out}"
    );
    let vod_id = field(&out, "id").unwrap().to_owned();

    // Listed as a table and as the API's body.
    let (code, out, err) = ctl(&s, &["monitors", "list"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("ID  NAME  VERDICT  SINCE  REGIONS\n"), "{out}");
    assert!(out.contains(&format!("{live_id}   live  unknown  -      eu-de,us-va")), "{out}");
    assert!(out.contains(&format!("{vod_id}   vod   unknown  -      us-va")), "{out}");
    let (_, out, _) = ctl(&s, &["--json", "monitors", "list"]).await;
    let list = json(&out);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{out}");
    assert_eq!(list["items"][1]["monitor"]["name"], "vod", "{out}");

    // One shown: its fields, then its regions.
    let (code, out, err) = ctl(&s, &["monitors", "get", &live_id]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(field(&out, "failure_quorum") == Some("2") && field(&out, "since") == Some("-"), "{out}");
    assert!(out.contains("eu-de   60.0    cdn-a    https://a.example.net/live.m3u8\n"), "{out}");
    assert!(out.contains(
        "us-va   40.0    us-va    https://b.example.net/live.m3u8,https://c.example.net/live.m3u8"
    ));

    // No prober, so no verdict: every region unknown, no weight down or stale, steering in order.
    let (code, out, err) = ctl(&s, &["monitors", "verdict", &live_id]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with(&format!("live (id {live_id}): unknown since -\n")), "{out}");
    assert!(out.contains("weight down 0.0 %, stale 0.0 %\n"), "{out}");
    assert!(out.contains("steering cdn-a > us-va\n"), "{out}");
    assert!(out.contains("eu-de   60.0    cdn-a    unknown  0/0       -"), "{out}");
    let (_, out, _) = ctl(&s, &["--json", "monitors", "verdict", &live_id]).await;
    let v = json(&out);
    assert!(v["global"].is_null() && v["regions"][1]["health"] == "unknown", "{out}");
    assert_eq!(v["down_weight"], 0.0);

    // Nothing probed yet: an empty history for every region.
    let (code, out, err) = ctl(&s, &["monitors", "history", &live_id, "--range", "24h"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("range 24h, 300 s buckets\n"), "{out}");
    assert!(out.contains("eu-de: no probes\n") && out.contains("us-va: no probes\n"), "{out}");
    assert!(out.trim_end().ends_with("no verdict change"), "{out}");
    let (_, out, _) = ctl(&s, &["--json", "monitors", "history", &live_id]).await;
    let h = json(&out);
    assert_eq!((h["range"].as_str(), h["bucket_s"].as_i64()), (Some("1h"), Some(20)), "{out}");
    assert_eq!(h["regions"][0]["points"], json!([]));
    let (code, out, err) = ctl(&s, &["monitors", "history", &live_id, "--range", "15m"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("range 15m, 5 s buckets\n"), "{out}");

    // The API's refusals name the field, and create nothing: a region the server does not
    // know (from a YAML file), a negative weight, a quorum larger than its window.
    let file = s.dir.join("bad.yaml");
    std::fs::write(
        &file,
        "name: bad\nregions:\n  - region: ap-sg\n    weight: 1\n    endpoints: [https://a.example.net/x.m3u8]\n",
    )
    .unwrap();
    let (code, out, err) = ctl(&s, &["monitors", "create", "--file", file.to_str().unwrap()]).await;
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert!(err.contains(r#"regions[0].region: no region with code "ap-sg" (400 Bad Request)"#), "{err}");
    let (code, _, err) =
        ctl(&s, &["monitors", "create", "bad", "--region", "eu-de=-1=https://a.example.net/x"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("regions[0].weight: must be at least 0, got -1 (400 Bad Request)"), "{err}");
    let (code, _, err) = ctl(
        &s,
        &["monitors", "create", "bad", "--region", "eu-de=1=https://a.example.net/x", "--quorum", "6/5"],
    )
    .await;
    assert_eq!(code, Some(1));
    assert!(err.contains("failure_quorum: ") && err.contains("(400 Bad Request)"), "{err}");
    let (code, _, err) = ctl(&s, &["monitors", "verdict", "999"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("(404 Not Found)"), "{err}");
    let (_, out, _) = ctl(&s, &["--json", "monitors", "list"]).await;
    assert_eq!(json(&out)["items"].as_array().map(Vec::len), Some(2), "{out}");

    // Deletes.
    for id in [&live_id, &vod_id] {
        let (code, out, err) = ctl(&s, &["monitors", "delete", id]).await;
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out.trim(), format!("deleted monitor {id}"));
    }
    let (_, out, _) = ctl(&s, &["--json", "monitors", "list"]).await;
    assert_eq!(json(&out)["items"], json!([]));
}
