//! Mirrors, tenants, checks, doors and the mirror settings through `vantage ctl` against a real
//! `vantage serve`, without probers: records, manual blocks, check runs and the API's refusals.

use serde_json::Value;

use crate::harness::ServerProcess;

/// `vantage ctl ARGS…`: (exit code, standard output, standard error).
pub(crate) async fn ctl(s: &ServerProcess, args: &[&str]) -> (Option<i32>, String, String) {
    let out = s.ctl(args).await;
    let (stdout, stderr) = crate::text(&out);
    (out.status.code(), stdout, stderr)
}

/// The value of `name` in FIELD  VALUE lines, whatever the alignment.
pub(crate) fn field<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.split_once(char::is_whitespace).filter(|(k, _)| *k == name).map(|(_, v)| v.trim()))
}

pub(crate) fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_tenants_and_checks_through_ctl() {
    let s = ServerProcess::start().await;

    // A tenant for the mirrors to serve.
    let (code, out, err) = ctl(&s, &["tenants", "put", "acme", "--note", "Acme video"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Acme video"), "{out}");
    let (code, out, err) =
        ctl(&s, &["--json", "tenants", "put", "beta", "--note", "Beta", "--fallback-to-degraded"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(json(&out)["fallback_to_degraded"], true, "{out}");

    // One mirror from a YAML file, one from flags.
    let file = s.dir.join("m1.yaml");
    std::fs::write(&file, "host: m1.example.net\ntenants: [acme]\nweight: 3\n").unwrap();
    let (code, out, err) =
        ctl(&s, &["mirrors", "put", "m1.example.net", "--file", file.to_str().unwrap()]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(field(&out, "weight") == Some("3") && out.contains("no region has reported"), "{out}");
    let (code, out, err) = ctl(
        &s,
        &[
            "--json",
            "mirrors",
            "put",
            "m2.example.net",
            "--weight",
            "2",
            "--tenant",
            "acme",
            "--address",
            "127.0.0.1:9",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let m2 = json(&out);
    assert_eq!((m2["weight"].as_u64(), m2["address"].as_str()), (Some(2), Some("127.0.0.1:9")), "{out}");
    assert_eq!(m2["tenants"], serde_json::json!(["acme"]));

    // Listed as a table and as the API's body.
    let (code, out, _) = ctl(&s, &["mirrors", "list"]).await;
    assert_eq!(code, Some(0));
    assert!(out.starts_with("HOST            VERDICT  SINCE"), "{out}");
    assert!(out.contains("m1.example.net  unknown") && out.contains("0/0      3       acme     no"), "{out}");
    let (_, out, _) = ctl(&s, &["--json", "mirrors", "list"]).await;
    let list = json(&out);
    assert_eq!(list["count"], 2, "{out}");
    assert_eq!(list["mirrors"][1]["host"], "m2.example.net", "{out}");
    let (_, out, _) = ctl(&s, &["tenants", "list"]).await;
    assert!(out.contains("acme  Acme video  2"), "{out}");

    // A manual block, which a record put from flags keeps, and its lifting.
    let (code, out, err) = ctl(&s, &["mirrors", "block", "m2.example.net", "--note", "TICKET-7"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(field(&out, "verdict") == Some("blocked"), "{out}");
    let (code, _, err) =
        ctl(&s, &["mirrors", "put", "m2.example.net", "--weight", "4", "--tenant", "acme"]).await;
    assert_eq!(code, Some(0), "{err}");
    let (_, out, _) = ctl(&s, &["mirrors", "list"]).await;
    assert!(out.contains("blocked") && out.contains("4       acme     yes: TICKET-7"), "{out}");
    let (code, out, err) = ctl(&s, &["mirrors", "unblock", "m2.example.net", "--note", "fixed"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        field(&out, "manual_block") == Some("false") && field(&out, "verdict") == Some("unknown"),
        "{out}"
    );
    let (_, out, _) = ctl(&s, &["mirrors", "get", "m2.example.net"]).await;
    assert!(field(&out, "host") == Some("m2.example.net") && out.contains("no prober has reported"), "{out}");

    // One check run per 60 s: the second is refused with the wait and a non-zero exit. A region
    // the server does not know is refused by name.
    let (code, _, err) = ctl(&s, &["mirrors", "check", "--region", "ap-sg"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains(r#"regions[0]: no region with code "ap-sg" (400 Bad Request)"#), "{err}");
    let (code, _, err) = ctl(&s, &["regions", "create", "code=ap-sg", "name=Singapore"]).await;
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = ctl(&s, &["mirrors", "check", "--region", "ap-sg"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("check run started at ") && out.contains(" in ap-sg: 0 probers to check 2 mirrors"),
        "{out}"
    );
    let (code, out, err) = ctl(&s, &["mirrors", "check"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.contains("no check run started; retry in ") && err.contains("(429 Too Many Requests)"),
        "{err}"
    );
    let (_, out, _) = ctl(&s, &["--json", "mirrors", "check"]).await;
    assert_eq!(out, "", "a refusal prints nothing on standard output");

    // A named check: created with flags, named by a mirror, deleted by id once no mirror uses it.
    let (code, out, err) = ctl(
        &s,
        &[
            "--json",
            "checks",
            "create",
            "edge",
            "--method",
            "https",
            "--path",
            "/ok",
            "--interval-s",
            "10",
            "--block-status",
            "451",
            "--block-status",
            "403",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let check = json(&out);
    assert_eq!(
        (check["check"]["method"].as_str(), check["check"]["interval_s"].as_u64()),
        (Some("https"), Some(10))
    );
    assert_eq!(check["check"]["block_statuses"], serde_json::json!([403, 451]), "{out}");
    let id = check["id"].as_i64().unwrap().to_string();
    let (code, _, err) = ctl(&s, &["mirrors", "put", "m1.example.net", "--check", "edge"]).await;
    assert_eq!(code, Some(0), "{err}");
    let (_, out, _) = ctl(&s, &["checks", "list"]).await;
    // The last three columns count the mirrors, clusters and monitors that name it.
    let row: Vec<&str> = out.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert!(
        out.starts_with("ID") && out.contains("edge  https   /ok") && row.ends_with(&["1", "0", "0"]),
        "{out}"
    );
    // A mirror's probe sends the mirror's own host, not the check's placeholder.
    assert!(out.contains("the target's") && !out.contains("health.vantage.invalid"), "{out}");
    let (code, _, err) = ctl(&s, &["mirrors", "put", "m1.example.net", "--tenant", "acme"]).await;
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = ctl(&s, &["checks", "delete", &id]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), format!("deleted check {id}"));
    let (_, out, _) = ctl(&s, &["--json", "checks", "list"]).await;
    assert_eq!(json(&out)["items"], serde_json::json!([]));

    // The API's refusals name the field, and change nothing.
    let (code, _, err) = ctl(&s, &["mirrors", "put", "m3.example.net", "--weight", "-1"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("weight: must be a whole number of at least 0, got -1 (400 Bad Request)"), "{err}");
    let (code, _, err) = ctl(&s, &["mirrors", "put", "m3.example.net", "--tenant", "nobody"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("tenants[0]: no tenant \"nobody\""), "{err}");
    let (code, _, err) = ctl(&s, &["tenants", "delete", "acme"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("(409 Conflict)"), "{err}");
    let (_, out, _) = ctl(&s, &["--json", "mirrors", "list"]).await;
    assert_eq!(json(&out)["count"], 2, "{out}");

    // Deletes.
    for host in ["m1.example.net", "m2.example.net"] {
        let (code, out, err) = ctl(&s, &["mirrors", "delete", host]).await;
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out.trim(), format!("deleted mirror {host}"));
    }
    for tenant in ["acme", "beta"] {
        let (code, _, err) = ctl(&s, &["tenants", "delete", tenant]).await;
        assert_eq!(code, Some(0), "{err}");
    }
    let (_, out, _) = ctl(&s, &["--json", "tenants", "list"]).await;
    assert_eq!(json(&out)["items"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_settings_and_doors_through_ctl() {
    let s = ServerProcess::start().await;

    let (code, out, err) = ctl(&s, &["settings", "mirrors"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(field(&out, "threshold_pct") == Some("50"), "{out}");
    let (code, out, err) = ctl(
        &s,
        &["--json", "settings", "mirrors", "set", "threshold_pct=60", r#"trusted_proxies=["10.0.0.0/8"]"#],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let v = json(&out);
    assert_eq!((v["threshold_pct"].as_u64(), v["scheme"].as_str()), (Some(60), Some("https")), "{out}");
    assert_eq!(v["trusted_proxies"], serde_json::json!(["10.0.0.0/8"]));
    let (code, _, err) = ctl(&s, &["settings", "mirrors", "set", "threshold_pct=0"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("threshold_pct: must be between 1 and 100, got 0"), "{err}");
    // The probe settings keep their own shape.
    let (code, out, _) = ctl(&s, &["settings", "get"]).await;
    assert_eq!(code, Some(0));
    assert!(out.contains("interval_s"), "{out}");

    // A mirror no prober has seen is not live, so no door can choose it.
    let (code, _, err) = ctl(&s, &["mirrors", "put", "m1.example.net"]).await;
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = ctl(
        &s,
        &[
            "doors",
            "select",
            "--exclude-region",
            "ap-sg",
            "--exclude-region",
            "eu-de",
            "--client",
            "192.0.2.1",
        ],
    )
    .await;
    assert_eq!(code, Some(1));
    assert!(err.contains("(503 Service Unavailable)"), "{err}");
}
