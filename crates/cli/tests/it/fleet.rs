//! Fleet as code against a real server: `vantage ctl plan` and `apply` from files, what DNS
//! answers after them (`dig`), the plan's DNS outlook, one audited change made once, a change
//! between plan and apply refused, bad files named by file, line and field, secrets read from
//! references and never shown, and the export valid against the published JSON Schema.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::harness::{ServerProcess, dig};

const FLEET: &str = r#"# The whole fleet, by name.
regions:
  - code: eu
    name: Europe
    countries: [DE, NL]
clusters:
  - name: www
    domain: www.fleet.example
    listeners: [{port: 80, protocol: http}]
    groups:
      - name: fra
        region: eu
      - name: ams
        region: eu
    lines:
      - name: default
        group: fra
        backup_groups: [ams]
        latency_region: eu
    nodes:
      - name: fra-1
        group: fra
        addresses: [{ip: 192.0.2.10, trusted: true}]
      - name: fra-2
        group: fra
        addresses: [{ip: 192.0.2.11, trusted: true}]
      - name: ams-1
        group: ams
        addresses: [{ip: 192.0.2.20, trusted: true}]
    rules:
      - name: hot
        line: default
        conditions: [{metric: cpu, comparison: ">", threshold: 90}]
"#;

/// `vantage ctl ARGS` against `s` with `env` set: exit code, standard output, standard error.
async fn ctl(s: &ServerProcess, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .arg("ctl")
        .args(args)
        .env("VANTAGE_DATA_DIR", &s.dir)
        .env_remove("VANTAGE_URL")
        .env_remove("VANTAGE_ADMIN_TOKEN")
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = crate::text(&out);
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Polls `dig` until the name answers `want`.
async fn answers(s: &ServerProcess, want: &[&str]) {
    let started = Instant::now();
    loop {
        let got = dig(s.dns(), "www.fleet.example").await;
        if got == want {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "www answered {got:?}, not {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The audit entries of `action`.
async fn audited(s: &ServerProcess, action: &str) -> Vec<Value> {
    let (_, v) = s.call(Method::GET, &format!("/v1/audit?action={action}"), None).await;
    v["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_from_files_is_planned_applied_once_and_answered_and_pruned() {
    let s = ServerProcess::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "fleet.yaml", FLEET);
    let f = file.to_str().unwrap();

    // The plan: every object, field by field, and what DNS would answer. Nothing is made yet.
    let (code, out, err) = ctl(&s, &["plan", "-f", f], &[]).await;
    assert_eq!(code, 2, "changes exit 2: {out}{err}");
    for want in [
        "9 to create, 0 to change, 0 to delete",
        "+ region eu",
        "+ cluster www",
        "+ node www/fra-1",
        "+ rule www/hot",
        r#"    group: "fra""#,
        "What DNS would answer after the change:",
        "  www line default: 192.0.2.10 192.0.2.11 (now nothing)",
    ] {
        assert!(out.contains(want), "no {want:?} in:\n{out}");
    }
    assert!(s.call(Method::GET, "/v1/clusters", None).await.1["items"].as_array().unwrap().is_empty());

    // Applied in one change, audited once; DNS answers it.
    let (code, out, err) = ctl(&s, &["apply", "-f", f], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Applied 9 changes as one"), "{out}");
    answers(&s, &["192.0.2.10", "192.0.2.11"]).await;
    // A bulk change is one revision: the cluster, its lines, nodes and rule, cut together.
    let (_, clusters) = s.call(Method::GET, "/v1/clusters", None).await;
    let cluster = &clusters["items"][0]["id"];
    // DNS answers before the revision is stored: wait for the store, then count.
    let path = format!("/v1/clusters/{cluster}/revisions");
    s.wait_for(&path, Duration::from_secs(5), |v| v["items"].as_array().is_some_and(|i| !i.is_empty())).await;
    let (_, revisions) = s.call(Method::GET, &path, None).await;
    assert_eq!(revisions["items"].as_array().unwrap().len(), 1, "{revisions}");
    let entries = audited(&s, "fleet.apply").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["metadata"]["changes"].as_array().unwrap().len(), 9, "{}", entries[0]);

    // Again: nothing to do, nothing written.
    let (code, out, _) = ctl(&s, &["apply", "-f", f], &[]).await;
    assert!(code == 0 && out.starts_with("No changes"), "{out}");
    let (code, _, _) = ctl(&s, &["plan", "-f", f], &[]).await;
    assert_eq!(code, 0, "no change exits 0");
    assert_eq!(audited(&s, "fleet.apply").await.len(), 1);

    // The export applies back as no change, and validates against the published schema.
    let exported = dir.path().join("export.yaml");
    let (code, _, err) = ctl(&s, &["export", "-o", exported.to_str().unwrap()], &[]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = ctl(&s, &["plan", "-f", exported.to_str().unwrap()], &[]).await;
    assert!(code == 0 && out.starts_with("No changes"), "{out}{err}");
    let (_, schema) = s.call(Method::GET, "/v1/fleet.schema.json", None).await;
    let (_, export) = s.call(Method::GET, "/v1/fleet", None).await;
    validate(&schema, &export, true);
    assert_eq!(export["clusters"][0]["lines"][0]["latency_region"], "eu", "{export}");
    let mut wrong = export.clone();
    wrong["clusters"][0]["nodes"][0]["grop"] = json!("fra");
    validate(&schema, &wrong, false);

    // A node gone from the file is left, and listed, unless --prune.
    let without = FLEET.replace(
        "      - name: fra-2\n        group: fra\n        addresses: [{ip: 192.0.2.11, trusted: true}]\n",
        "",
    );
    write(dir.path(), "fleet.yaml", &without);
    let (code, out, _) = ctl(&s, &["plan", "-f", f], &[]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("Left as they are (not in the files; --prune deletes them): node www/fra-2"),
        "{out}"
    );
    let (code, out, _) = ctl(&s, &["plan", "-f", f, "--prune"], &[]).await;
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("- node www/fra-2"), "{out}");
    assert!(out.contains("  www line default: 192.0.2.10 (now 192.0.2.10 192.0.2.11)"), "{out}");
    let (code, out, err) = ctl(&s, &["apply", "-f", f, "--prune"], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    answers(&s, &["192.0.2.10"]).await;
    let (_, nodes) = s.call(Method::GET, "/v1/nodes", None).await;
    assert_eq!(nodes["items"].as_array().unwrap().len(), 2, "{nodes}");

    // A line pruned with its group and that group's nodes takes no one by surprise: no --force.
    let second = without
        .replace("    lines:\n", "    lines:\n      - name: second\n        group: lon\n        client_networks: [10.0.0.0/8]\n        countries: [gb]\n        asns: [64500]\n")
        .replace("    groups:\n", "    groups:\n      - name: lon\n")
        .replace("    nodes:\n", "    nodes:\n      - name: lon-1\n        group: lon\n        addresses: [{ip: 192.0.2.30, trusted: true}]\n");
    write(dir.path(), "fleet.yaml", &second);
    let (code, out, err) = ctl(&s, &["apply", "-f", f], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    write(dir.path(), "fleet.yaml", &without);
    let (code, out, err) = ctl(&s, &["apply", "-f", f, "--prune"], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    for gone in ["- line www/second", "- group www/lon", "- node www/lon-1"] {
        assert!(out.contains(gone), "no {gone:?} in:\n{out}");
    }
}

/// Validates `doc` against `schema` with the JSON Schema validator schemathesis brings
/// (`jsonschema_rs`, in the virtual environment `.ci/run` makes).
fn validate(schema: &Value, doc: &Value, valid: bool) {
    let venv = std::env::var_os("VANTAGE_VENV").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/vantage-venv")
    });
    let dir = tempfile::tempdir().unwrap();
    let (s, d) = (
        write(dir.path(), "schema.json", &schema.to_string()),
        write(dir.path(), "doc.json", &doc.to_string()),
    );
    let out = std::process::Command::new(venv.join("bin/python"))
        .args(["-c", "import json, sys, jsonschema_rs\njsonschema_rs.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))"])
        .args([&s, &d])
        .output()
        .expect("the virtual environment of .ci/run (schemathesis and jsonschema_rs) is installed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.success(), valid, "valid: {valid}; {err}");
}

/// Tenants and mirrors in a fleet file: their registry files are written with the rest of the
/// change, the registry reloads, and what the files no longer hold is left, or pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_and_mirrors_join_the_change_and_their_registry_files() {
    let s = ServerProcess::start().await;
    let dir = tempfile::tempdir().unwrap();
    let fleet = "checks:\n  - name: debian\n    method: https\n    path: /debian/\ntenants:\n  - name: debian\n    note: Debian archive\nmirrors:\n  - host: m1.example.net\n    tenants: [debian]\n    check: debian\n    weight: 2\n  - host: m2.example.net\n    tenants: [debian]\n";
    let f = write(dir.path(), "fleet.yaml", fleet);
    let f = f.to_str().unwrap();
    let (code, out, _) = ctl(&s, &["plan", "-f", f], &[]).await;
    assert_eq!(code, 2, "{out}");
    for want in ["+ check debian", "+ tenant debian", "+ mirror m1.example.net", "    weight: 2"] {
        assert!(out.contains(want), "no {want:?} in:\n{out}");
    }
    let (code, out, err) = ctl(&s, &["apply", "-f", f], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Applied 4 changes as one"), "{out}");
    // The registry's files hold them, and the registry serves them.
    let file = std::fs::read_to_string(s.dir.join("mirrors/m1.example.net.yaml")).unwrap();
    assert!(file.contains("host: m1.example.net") && file.contains("check: debian"), "{file}");
    let (_, mirrors) = s.call(Method::GET, "/v1/mirrors", None).await;
    assert_eq!(mirrors["count"], 2, "{mirrors}");
    let (code, out, _) = ctl(&s, &["apply", "-f", f], &[]).await;
    assert!(code == 0 && out.starts_with("No changes"), "{out}");

    // A tenant a mirror still names cannot be pruned; a mirror can.
    write(dir.path(), "fleet.yaml", &fleet.replace("  - host: m2.example.net\n    tenants: [debian]\n", ""));
    let (code, out, _) = ctl(&s, &["plan", "-f", f], &[]).await;
    assert!(
        code == 0
            && out
                .contains("Left as they are (not in the files; --prune deletes them): mirror m2.example.net"),
        "{out}"
    );
    let (code, out, err) = ctl(&s, &["apply", "-f", f, "--prune"], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("- mirror m2.example.net"), "{out}");
    assert!(!s.dir.join("mirrors/m2.example.net.yaml").exists());
    assert_eq!(s.call(Method::GET, "/v1/mirrors", None).await.1["count"], 1);
    write(dir.path(), "fleet.yaml", "tenants: []\n");
    let (code, _, err) = ctl(&s, &["plan", "-f", f, "--prune"], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("mirror m1.example.net would be left naming tenants[0]"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_between_plan_and_apply_is_refused_and_a_read_only_token_may_only_plan() {
    let s = ServerProcess::start().await;
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "fleet.yaml", FLEET);
    let f = f.to_str().unwrap();
    assert_eq!(ctl(&s, &["apply", "-f", f], &[]).await.0, 0);
    write(
        dir.path(),
        "fleet.yaml",
        &FLEET.replace("backup_groups: [ams]", "backup_groups: [ams]\n        min_healthy: 2"),
    );
    let (code, plan, _) = ctl(&s, &["--json", "plan", "-f", f], &[]).await;
    assert_eq!(code, 2);
    let plan: Value = serde_json::from_str(&plan).unwrap();
    let revision = plan["revision"].as_str().unwrap().to_owned();
    assert_eq!(plan["changes"][0]["fields"][0], json!({"field": "min_healthy", "before": 1, "after": 2}));

    // Someone changes the line through the API meanwhile: the reviewed plan no longer holds.
    let (_, clusters) = s.call(Method::GET, "/v1/clusters", None).await;
    let www = clusters["items"][0]["id"].as_i64().unwrap();
    let (_, lines) = s.call(Method::GET, &format!("/v1/clusters/{www}/lines"), None).await;
    let line = lines["items"][0]["id"].as_i64().unwrap();
    let path = format!("/v1/clusters/{www}/lines/{line}");
    let (status, _) = s.call(Method::PATCH, &path, Some(json!({"all_down": "online"}))).await;
    assert_eq!(status, 200);
    let (code, out, err) = ctl(&s, &["apply", "-f", f, "--expect", &revision], &[]).await;
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("the configuration changed since the plan") && err.contains("409"), "{err}");
    let (_, now) = s.call(Method::GET, &path, None).await;
    assert_eq!((now["min_healthy"].as_u64(), now["all_down"].as_str()), (Some(1), Some("online")), "{now}");

    // A read-only token plans (a review job) and applies nothing.
    let (status, token) =
        s.call(Method::POST, "/v1/admin-tokens", Some(json!({"name": "review", "read_only": true}))).await;
    assert_eq!(status, 201, "{token}");
    let token = token["token"].as_str().unwrap();
    let (code, _, err) = ctl(&s, &["--token", token, "plan", "-f", f], &[]).await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = ctl(&s, &["--token", token, "apply", "-f", f], &[]).await;
    assert!(code == 1 && err.contains("read-only"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_is_named_by_file_line_and_field_and_changes_nothing() {
    let s = ServerProcess::start().await;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a-regions.yaml", "regions:\n  - code: eu\n    name: Europe\n");
    let cluster = "clusters:\n  - name: www\n    domain: www.fleet.example\n    groups:\n      - name: fra\n        region: eu\n    nodes:\n      - name: fra-1\n        group: frx\n";
    write(dir.path(), "b-www.yaml", cluster);
    let d = dir.path().to_str().unwrap();
    let b = dir.path().join("b-www.yaml").display().to_string();
    let refused = |err: &str, want: &str| assert!(err.contains(want), "no {want:?} in {err}");

    let (code, _, err) = ctl(&s, &["plan", "-f", d], &[]).await;
    assert_eq!(code, 1);
    refused(
        &err,
        &format!(r#"{b}:9: clusters[0].nodes[0].group: the cluster has no node group named "frx""#),
    );

    write(dir.path(), "b-www.yaml", &cluster.replace("group: frx", "group: fra\n        grop: fra"));
    let (_, _, err) = ctl(&s, &["plan", "-f", d], &[]).await;
    refused(&err, &format!("{b}:10: clusters[0].nodes[0].grop: unknown field"));

    write(
        dir.path(),
        "b-www.yaml",
        &cluster.replace("group: frx", "group: fra").replace("    groups:", "    ttl: soon\n    groups:"),
    );
    let (_, _, err) = ctl(&s, &["plan", "-f", d], &[]).await;
    refused(&err, &format!("{b}:4: clusters[0].ttl:"));

    write(
        dir.path(),
        "b-www.yaml",
        &cluster.replace(
            "group: frx",
            "group: fra\n        addresses:\n          - ip: 192.0.2.1\n          - ip: 300.1.1.1",
        ),
    );
    let (_, _, err) = ctl(&s, &["plan", "-f", d], &[]).await;
    refused(&err, &format!("{b}:12: clusters[0].nodes[0].addresses[1].ip: Not a single unicast IP address"));

    write(dir.path(), "b-www.yaml", "clusters:\n  - name: www\n   domain: [\n");
    let (_, _, err) = ctl(&s, &["plan", "-f", d], &[]).await;
    refused(&err, &format!("{b}:3:"));

    write(dir.path(), "b-www.yaml", "nodes: []\n");
    let (_, _, err) = ctl(&s, &["plan", "-f", d], &[]).await;
    refused(&err, &format!("{b}:1: nodes: unknown key"));

    let publisher = "clusters:\n  - name: www\n    domain: www.fleet.example\n    publishers:\n      - name: primary\n        server: 127.0.0.1:9\n        key_name: vantage\n        key_secret: c2VjcmV0c2VjcmV0c2VjcmV0\n";
    write(dir.path(), "b-www.yaml", publisher);
    let (_, _, err) = ctl(&s, &["plan", "-f", d], &[]).await;
    refused(
        &err,
        &format!("{b}:8: clusters[0].publishers[0].key_secret: a secret is never written in a fleet file"),
    );
    assert!(!err.contains("c2VjcmV0"), "{err}");

    // Nothing of it was applied.
    let (code, _, _) = ctl(&s, &["apply", "-f", d], &[]).await;
    assert_eq!(code, 1);
    assert!(s.call(Method::GET, "/v1/regions", None).await.1["items"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_come_from_references_and_are_never_shown() {
    let s = ServerProcess::start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret = "c2VjcmV0c2VjcmV0c2VjcmV0";
    write(dir.path(), "tsig.key", &format!("{secret}\n"));
    // A notification channel's secret (a PagerDuty routing key) goes the same way.
    let routing = "R0UT1NGKEYR0UT1NGKEY";
    write(dir.path(), "pd.key", routing);
    let fleet = "clusters:\n  - name: www\n    domain: www.fleet.example\n    publishers:\n      - name: primary\n        server: 127.0.0.1:9\n        key_name: vantage\n        key_secret: file:tsig.key\n\
                 webhooks:\n  - name: pd\n    format: pagerduty\n    secret: file:pd.key\n";
    let f = write(dir.path(), "fleet.yaml", fleet);
    let f = f.to_str().unwrap();
    let (code, out, err) = ctl(&s, &["apply", "-f", f], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(r#""(secret)""#) && !out.contains(secret), "{out}");

    // The export keeps the secret on the server; applied back it changes nothing.
    let (_, export, _) = ctl(&s, &["export"], &[]).await;
    assert!(export.contains("key_secret: stored") && !export.contains(secret), "{export}");
    assert!(export.contains("secret: stored") && !export.contains(routing), "{export}");
    let (_, hooks) = s.call(Method::GET, "/v1/webhooks", None).await;
    assert_eq!(hooks["items"][0]["secret"], "(hidden)", "{hooks}");
    // The stored routing key goes only where it went: sent elsewhere, it must be given again.
    let moved = export
        .replace(vantage_control::alerts::PAGERDUTY_EVENTS_URL, "https://collector.example.net/collect");
    assert_ne!(moved, export);
    let moved = write(dir.path(), "moved.yaml", &moved);
    let (code, _, err) = ctl(&s, &["apply", "-f", moved.to_str().unwrap()], &[]).await;
    assert!(code == 1 && err.contains("webhooks[0].secret") && err.contains("delivers elsewhere"), "{err}");
    let exported = write(dir.path(), "export.yaml", &export);
    let (code, out, _) = ctl(&s, &["plan", "-f", exported.to_str().unwrap()], &[]).await;
    assert!(code == 0 && out.starts_with("No changes"), "{out}");

    // A new secret, from the environment this time: the plan says it changes, not what to.
    let new = "bmV3c2VjcmV0bmV3c2VjcmV0";
    write(dir.path(), "fleet.yaml", &fleet.replace("file:tsig.key", "env:FLEET_TSIG"));
    let (code, out, _) = ctl(&s, &["plan", "-f", f], &[("FLEET_TSIG", new)]).await;
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(r#"publishers (a secret): "(secret)" → "(new secret)""#), "{out}");
    // A read-only token's plan never compares a secret it is given: it could test guesses.
    let (status, token) =
        s.call(Method::POST, "/v1/admin-tokens", Some(json!({"name": "review", "read_only": true}))).await;
    assert_eq!(status, 201, "{token}");
    let (code, out, _) =
        ctl(&s, &["--token", token["token"].as_str().unwrap(), "plan", "-f", f], &[("FLEET_TSIG", new)])
            .await;
    assert!(code == 0 && out.starts_with("No changes"), "{out}");
    let (code, _, err) = ctl(&s, &["apply", "-f", f], &[]).await;
    assert!(code == 1 && err.contains("the environment has no FLEET_TSIG"), "{err}");
    let (code, out, _) = ctl(&s, &["apply", "-f", f], &[("FLEET_TSIG", new)]).await;
    assert_eq!(code, 0, "{out}");
    let (_, audit, _) = ctl(&s, &["--json", "audit"], &[]).await;
    assert!(audit.contains("fleet.apply") && !audit.contains(secret) && !audit.contains(new), "{audit}");
    assert!(!audit.contains(routing), "{audit}");
}

/// The example of `deploy/fleet/` (the README's fleet) plans and applies on a fresh server,
/// DNS answers it, and it then plans as no change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_fleet_file_plans_and_applies() {
    let s = ServerProcess::start().await;
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/fleet");
    let (code, out, err) = ctl(&s, &["plan", "-f", example], &[]).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("  video line default: 203.0.113.10 (now nothing)"), "{out}");
    let (code, out, err) = ctl(&s, &["apply", "-f", example], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = ctl(&s, &["plan", "-f", example], &[]).await;
    assert!(code == 0 && out.starts_with("No changes"), "{out}");
    let (_, mirrors) = s.call(Method::GET, "/v1/mirrors", None).await;
    assert_eq!(mirrors["count"], 1, "{mirrors}");
}
