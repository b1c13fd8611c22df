//! `vantage ctl` as an incident needs it, against a real server: names where ids go (flags,
//! arguments and the fields that name other objects) with refusals that name the flag; node and
//! revision tables in names; window strips that tell an empty slot from a failed attempt; each
//! prober's last round kept apart from its endpoint checks and confirmations.

use std::time::{Duration, Instant};

use crate::harness::{LabFleet, ServerProcess};

/// `ctl ARGS` (split on spaces): exit code, standard output, standard error.
async fn run(s: &ServerProcess, args: &str) -> (Option<i32>, String, String) {
    let args: Vec<&str> = args.split_whitespace().collect();
    let out = s.ctl(&args).await;
    let (stdout, stderr) = crate::text(&out);
    (out.status.code(), stdout, stderr)
}

/// The `id` of the object a `--json` command printed.
fn id(json: &str) -> i64 {
    serde_json::from_str::<serde_json::Value>(json).unwrap()["id"].as_i64().unwrap()
}

/// `ctl ARGS` that must succeed: its standard output.
async fn ok(s: &ServerProcess, args: &str) -> String {
    let (code, out, err) = run(s, args).await;
    assert_eq!(code, Some(0), "ctl {args}: {err}{out}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_stand_for_ids_everywhere_and_unknown_or_ambiguous_ones_name_the_flag() {
    let s = ServerProcess::start().await;
    ok(&s, "regions create code=ap-sg name=Singapore").await;
    let video = id(&ok(&s, "--json clusters create name=video domain=cdn.names.example").await);
    ok(&s, "clusters create name=audio domain=audio.names.example").await;
    // Groups by their region's code, lines by their groups' names, nodes by cluster and group.
    ok(&s, "groups --cluster video create name=sin-1 region=ap-sg").await;
    ok(&s, "groups --cluster video create name=sin-2 region=Singapore").await;
    ok(&s, "groups --cluster audio create name=sin-1").await;
    let line =
        ok(&s, r#"--json lines --cluster video create name=default group=sin-1 backup_groups=["sin-2"]"#)
            .await;
    let line: serde_json::Value = serde_json::from_str(&line).unwrap();
    let (_, groups) = s.call(reqwest::Method::GET, &format!("/v1/clusters/{video}/groups"), None).await;
    let id_of = |name: &str| {
        groups["items"].as_array().unwrap().iter().find(|g| g["name"] == name).unwrap()["id"].clone()
    };
    assert_eq!((&line["group"], &line["backup_groups"][0]), (&id_of("sin-1"), &id_of("sin-2")), "{line}");
    let sin_1a = id(&ok(&s, "--json nodes create cluster=video group=sin-1 name=sin-1a").await);
    ok(&s, "nodes create cluster=audio group=sin-1 name=sin-1b").await;
    ok(&s, "nodes set-addresses sin-1a 203.0.113.10").await;
    // A group given by name when changing a node is the node's cluster's group.
    let node = ok(&s, "--json nodes update sin-1a group=sin-2").await;
    assert_eq!(serde_json::from_str::<serde_json::Value>(&node).unwrap()["group"], id_of("sin-2"), "{node}");
    ok(&s, r#"rules --cluster video create name=hot line=default conditions=[{"metric":"cpu","comparison":">","threshold":90}]"#)
        .await;
    assert!(ok(&s, "rules --cluster video get hot").await.contains("hot"));
    assert!(ok(&s, "regions get Singapore").await.contains("ap-sg"));
    assert!(ok(&s, "clusters get cdn.names.example").await.contains("video"));
    let (code, out, err) = run(&s, "probers token --name sg-1 --region ap-sg").await;
    assert!(code == Some(0) && out.starts_with("vtp_"), "{err}");

    // `nodes list` in names, with the state.
    let list = ok(&s, "nodes list").await;
    let header = list.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("ID  CLUSTER  GROUP  NAME")
            && header.split_whitespace().rev().take(3).eq(["METRICS", "CONNECTS_FROM", "STATE"]),
        "{list}"
    );
    assert!(list.lines().any(|l| l.contains(" video    sin-2  sin-1a ")), "{list}");
    assert!(list.lines().any(|l| l.contains(" audio    sin-1  sin-1b ")), "{list}");

    // The refusals say which flag or field gave the name, and what it could have been.
    let (code, _, err) = run(&s, "groups --cluster vdeo list").await;
    assert_eq!(code, Some(1));
    assert!(err.contains(r#"--cluster: no cluster named "vdeo" (known: video, audio)"#), "{err}");
    let (code, _, err) = run(&s, "lines --cluster video create name=other group=sin-9").await;
    assert_eq!(code, Some(1));
    assert!(err.contains(r#"group=: no group named "sin-9" (known: sin-1, sin-2)"#), "{err}");
    let other = id(&ok(&s, "--json nodes create cluster=audio group=sin-1 name=sin-1a").await);
    let (code, _, err) = run(&s, "nodes addresses sin-1a").await;
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!(
            r#"NODE: "sin-1a" names 2 nodes: {sin_1a} in cluster video, {other} in cluster audio; give the id"#
        )),
        "{err}"
    );
    assert!(ok(&s, &format!("nodes addresses {sin_1a}")).await.contains("203.0.113.10"));

    // Revisions show each line's records, by the line's name.
    s.wait_for(&format!("/v1/clusters/{video}/dns"), Duration::from_secs(10), |v| {
        v["lines"][0]["records"][0] == "203.0.113.10"
    })
    .await;
    let revisions = ok(&s, "clusters revisions video").await;
    assert!(revisions.starts_with("NUMBER  AT"), "{revisions}");
    let header: Vec<&str> = revisions.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NUMBER", "AT", "LINE", "RECORDS", "REASON"], "{revisions}");
    assert!(revisions.lines().any(|l| l.contains(" default  203.0.113.10 ")), "{revisions}");
    assert!(ok(&s, "status --cluster video").await.contains("cluster   video"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn window_strips_tell_empty_slots_from_failed_attempts_with_a_legend() {
    let LabFleet { s, edges, probers: _probers, temp: _temp, .. } =
        LabFleet::start("cdn.strips.example", 130).await;
    // edge-2's only address stops answering: its next rounds are refused.
    edges[3].stop().await;
    let started = Instant::now();
    let table = loop {
        let out = ok(&s, "nodes results edge-2").await;
        if out.lines().filter(|l| l.contains(" 127.0.0.133 ") && l.contains(" refused ")).count() == 3
            || started.elapsed() > Duration::from_secs(20)
        {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let strips: Vec<&str> = table
        .lines()
        .filter(|l| l.contains(" refused "))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(strips.len(), 3, "each prober's result:\n{table}");
    for strip in strips {
        // A few rounds in: most slots are still empty; the assumed and the good attempts are
        // `H`, the refused ones `-`.
        assert_eq!(strip.chars().count(), 64, "{table}");
        assert!(strip.starts_with("....") && strip.contains('H') && strip.ends_with('-'), "{table}");
        let (empty, rest) = strip.split_at(strip.rfind('.').map_or(0, |i| i + 1));
        assert!(empty.chars().all(|c| c == '.') && !rest.contains('.'), "empty slots come first: {strip}");
    }
    assert_eq!(
        table.lines().last(),
        Some("strip: oldest to newest; H good attempt, - failed attempt, . no attempt yet"),
        "{table}"
    );
    // JSON carries the strips, without the legend.
    let json = ok(&s, "--json nodes results edge-2").await;
    assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok(), "{json}");
}

/// The cells of a `ctl` table row (cells are two or more spaces apart, words within one).
fn cells(row: &str) -> Vec<&str> {
    row.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probers_show_the_last_round_apart_from_endpoint_checks_and_confirmations() {
    let LabFleet { s, edges, probers: _probers, temp: _temp, .. } =
        LabFleet::start("cdn.kinds.example", 170).await;
    // A monitor of prober-0's region whose endpoint refuses, checked every second.
    let closed = vantage_testkit::closed_port().unwrap();
    let check = serde_json::json!({"method": "hls", "interval_s": 1, "timeout_ms": 900});
    let endpoint = format!("http://{closed}/live.m3u8");
    let monitor = serde_json::json!({"name": "live", "check": check,
        "regions": [{"region": "ap-sg", "weight": 1, "endpoints": [endpoint]}]});
    s.create("/v1/monitors", monitor).await;
    // edge-2's only address stops answering: the first prober to see it has the others confirm.
    edges[3].stop().await;

    // Every look at the list: a last round is a whole round of the four addresses, whatever
    // came in between.
    let refused_one = |r: &serde_json::Value| {
        r["targets"] == 1 && r["unreachable"] == 1 && r["loss_pct"].as_f64() == Some(100.0)
    };
    let started = Instant::now();
    let probers = loop {
        let (_, v) = s.call(reqwest::Method::GET, "/v1/probers", None).await;
        let items = v["items"].as_array().unwrap().clone();
        for p in &items {
            assert_eq!(p["last_round"]["targets"], 4, "{p}");
        }
        let p0 = items.iter().find(|p| p["name"] == "prober-0").unwrap();
        if refused_one(&p0["last_endpoint_checks"])
            && items.iter().any(|p| refused_one(&p["last_confirmation"]))
            && items.iter().all(|p| p["last_round"]["unreachable"] == 1)
        {
            break items;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let others_endpoints: Vec<_> =
        probers.iter().filter(|p| p["name"] != "prober-0").map(|p| &p["last_endpoint_checks"]).collect();
    assert!(
        others_endpoints.iter().all(|e| e.is_null()),
        "no monitor in their regions: {others_endpoints:?}"
    );

    // `ctl probers list`: the three figures in their columns.
    let list = ok(&s, "probers list").await;
    let header = cells(list.lines().next().unwrap());
    assert_eq!(
        header[header.len() - 3..],
        ["LAST_ROUND", "LAST_ENDPOINT_CHECKS", "LAST_CONFIRMATION"],
        "{list}"
    );
    let row = |name: &str| cells(list.lines().find(|l| cells(l).get(1) == Some(&name)).unwrap());
    let p0 = row("prober-0");
    let refused = "loss 100.0 %, -, 1 of 1 unreachable";
    assert!(p0[p0.len() - 3].ends_with(", 1 of 4 unreachable"), "{list}");
    assert_eq!(p0[p0.len() - 2], refused, "{list}");
    let confirming =
        probers.iter().find(|p| refused_one(&p["last_confirmation"])).unwrap()["name"].as_str().unwrap();
    let c = row(confirming);
    assert!(c[c.len() - 3].ends_with(", 1 of 4 unreachable"), "{list}");
    assert_eq!(c[c.len() - 1], refused, "{list}");

    // The prober page says the same.
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let login = s.ui_login(&client).await;
    let cookie = login.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let id = probers.iter().find(|p| p["name"] == "prober-0").unwrap()["id"].as_i64().unwrap();
    let page = client
        .get(format!("{}/ui/probers/{id}", s.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let fact = |id: &str| {
        let from = page.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("{id}: {page}"));
        page[from..from + page[from..].find("</dd>").unwrap()].to_owned()
    };
    assert!(fact("last-round").contains("4 targets · loss"), "{}", fact("last-round"));
    let checks = fact("last-endpoint-checks");
    assert!(checks.contains("1 target · loss 100") && checks.contains("1 target unreachable"), "{checks}");
}
