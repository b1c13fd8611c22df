//! `/metrics` of a running fleet (server, three probers, edges): the fleet's figures are there
//! with their labels, `promtool check metrics` finds nothing wrong with the exposition, and the
//! Grafana dashboard of `deploy/grafana/` asks only for metrics the server has, in PromQL that
//! promtool parses.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::harness::{LabFleet, ServerProcess};

/// Runs `promtool ARGS…` with `stdin`, returning its exit success and its output.
async fn promtool(args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = tokio::process::Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("promtool runs (Debian package prometheus, in .ci/packages)");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let out = child.wait_with_output().await.unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// The families of an exposition (`# TYPE name type`), with their types.
pub(crate) fn families(exposition: &str) -> Vec<(String, String)> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_owned(), kind.to_owned()))
        .collect()
}

/// promtool reads the older text format, where a counter's `# HELP` and `# TYPE` name the
/// family with its `_total`; OpenMetrics names it without. So for each counter whose samples
/// are `name_total` and whose help is given as `name`, promtool says "name_total no help
/// text". Those lines, and only those, are the formats differing, not a fault.
fn faults(lint: &str, exposition: &str) -> Vec<String> {
    let counters: BTreeSet<String> = families(exposition)
        .into_iter()
        .filter(|(name, kind)| kind == "counter" && exposition.contains(&format!("# HELP {name} ")))
        .map(|(name, _)| format!("{name}_total no help text"))
        .collect();
    lint.lines().filter(|l| !l.trim().is_empty() && !counters.contains(l.trim())).map(str::to_owned).collect()
}

/// Every expression of the dashboard `deploy/grafana/vantage.json`, its variables' queries
/// included.
pub(crate) fn dashboard_expressions() -> Vec<String> {
    let mut exprs = Vec::new();
    expressions(&dashboard(), &mut exprs);
    exprs
}

/// The dashboard `deploy/grafana/vantage.json`.
pub(crate) fn dashboard() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/grafana/vantage.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every string under an `expr` key, and the dashboard variables' queries.
fn expressions(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr" | "definition", Value::String(s)) => out.push(s.clone()),
                    _ => expressions(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| expressions(x, out)),
        _ => {}
    }
}

/// The metric names an expression uses: ours all start with `vantage_` or `process_`.
pub(crate) fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
        let word_len =
            rest[at..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len() - at);
        let word = &rest[at..at + word_len];
        let after_letter = at > 0 && rest.as_bytes()[at - 1].is_ascii_alphanumeric();
        if !after_letter && (word.starts_with("vantage_") || word.starts_with("process_")) {
            names.push(word.to_owned());
        }
        rest = &rest[at + word_len..];
    }
    names
}

/// Whether `name` is a sample name the exposition offers: a family, or a counter's `_total`,
/// or a histogram's `_bucket`, `_sum` or `_count`.
pub(crate) fn offered(name: &str, families: &[(String, String)]) -> bool {
    families.iter().any(|(family, kind)| {
        let suffixes: &[&str] = match kind.as_str() {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        suffixes.iter().any(|s| name == format!("{family}{s}"))
    })
}

/// The exposition once a line starting with each of `ready` is there and not zero, and one
/// starting with each of `present` is there (whatever its value), or after 30 s.
async fn scrape_until(s: &ServerProcess, ready: &[&str], present: &[&str]) -> String {
    let started = Instant::now();
    loop {
        let text = s.metrics().await;
        if (ready.iter().all(|m| text.lines().any(|l| l.starts_with(m) && !l.ends_with(" 0")))
            && present.iter().all(|m| text.lines().any(|l| l.starts_with(m))))
            || started.elapsed() > Duration::from_secs(30)
        {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_pass_promtool_and_the_dashboard_asks_only_for_what_the_server_has() {
    let LabFleet { s, cluster, edges, probers: _probers, temp, .. } =
        LabFleet::start("cdn.metrics.example", 120).await;
    // The fleet is up: probe and evaluation figures have series once reports were evaluated.
    let text = scrape_until(
        &s,
        &[
            "vantage_probe_rtt_seconds_count{",
            "vantage_evaluation_lag_seconds{",
            "vantage_evaluation_duration_seconds_count ",
        ],
        // Tallied by the cluster's pass, which follows the results the RTT series already
        // count by the report spacing.
        &[
            "vantage_probe_loss_ratio{cluster=\"video\",region=\"ap-sg\"} ",
            "vantage_probe_loss_ratio{cluster=\"video\",region=\"eu-de\"} ",
            "vantage_probe_loss_ratio{cluster=\"video\",region=\"us-va\"} ",
        ],
    )
    .await;
    for region in ["ap-sg", "eu-de", "us-va"] {
        let labels = format!("{{cluster=\"video\",region=\"{region}\"}}");
        // Healthy edges on loopback: at most a stray attempt lost on a loaded machine.
        let loss = text.lines().find_map(|l| l.strip_prefix(&format!("vantage_probe_loss_ratio{labels} ")));
        let loss: f64 = loss.and_then(|v| v.parse().ok()).unwrap_or(-1.0);
        assert!((0.0..0.2).contains(&loss), "{region}: {loss}\n{text}");
        assert!(text.contains(&format!("vantage_probe_rtt_seconds_count{labels} ")), "{region}:\n{text}");
    }
    let lag = text.lines().find(|l| l.starts_with("vantage_evaluation_lag_seconds{cluster=\"video\"} "));
    let lag: f64 = lag.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(-1.0);
    // A report waits at most the 2 s report spacing, and a pass on a loaded machine a little
    // longer.
    assert!((0.0..=4.0).contains(&lag), "a report waits about the 2 s report spacing at most: {lag}\n{text}");
    for m in [
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_start_time_seconds ",
    ] {
        assert!(text.lines().any(|l| l.starts_with(m)), "{m}missing:\n{text}");
    }
    assert!(text.contains("vantage_build_info{version=\""), "{text}");
    // Every result acknowledged is stored: a store keeping up leaves little waiting, and
    // refuses none.
    assert!(text.lines().any(|l| l.starts_with("vantage_results_waiting ")), "{text}");
    assert!(text.contains("vantage_results_unstored_total 0\n"), "{text}");

    // A webhook, a publisher (to a port nobody listens on) and an outage give the counters of
    // deliveries and publications their series, from 0, and an alert that fires.
    s.create("/v1/webhooks", serde_json::json!({"name": "ops", "url": "http://127.0.0.1:9/hook"})).await;
    let closed = vantage_testkit::free_port().unwrap();
    let publishers = serde_json::json!({"publishers": [{"name": "secondary", "server": format!("127.0.0.1:{closed}"),
        "key_name": "vantage", "key_algorithm": "hmac-sha256", "key_secret": "c2VjcmV0LXNlY3JldC1zZWNyZXQ="}]});
    let (st, v) = s.call(reqwest::Method::PATCH, &format!("/v1/clusters/{cluster}"), Some(publishers)).await;
    assert_eq!(st, 200, "{v}");
    edges[3].stop().await;
    let text = scrape_until(&s, &["vantage_alerts_firing{kind=\"address_unreachable\"}"], &[]).await;
    assert!(text.contains("vantage_alerts_firing{kind=\"address_unreachable\"} 1"), "{text}");
    assert!(text.contains("vantage_webhook_deliveries_total{webhook=\"ops\",outcome=\"failed\"} "), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("vantage_publications_total{cluster=\"video\",")
            && l.contains("outcome=\"failed\"")),
        "{text}"
    );

    // promtool lints the exposition: nothing but the formats' one known difference.
    let (_, lint) = promtool(&["check", "metrics"], &text).await;
    let faults = faults(&lint, &text);
    assert!(faults.is_empty(), "promtool check metrics:\n{}\n\nof:\n{text}", faults.join("\n"));

    // The dashboard: every expression is PromQL (that every metric it names is offered, and
    // every panel has data, is `dashboard.rs`'s, on a fleet with mirrors and monitors too).
    let exprs = dashboard_expressions();
    assert!(exprs.len() >= 20, "{exprs:?}");
    let used: BTreeSet<String> = exprs.iter().flat_map(|e| metric_names(e)).collect();
    for want in
        ["vantage_probe_rtt_seconds_bucket", "vantage_evaluation_lag_seconds", "vantage_address_reachable"]
    {
        assert!(used.contains(want), "the dashboard charts {want}: {used:?}");
    }
    // Grafana's variables stand for a range and a regular expression; promtool parses the
    // rest as recording rules.
    let rules: Vec<String> = exprs
        .iter()
        .filter(|e| !e.starts_with("label_values("))
        .enumerate()
        .map(|(i, e)| {
            let e = e.replace("$__rate_interval", "5m").replace("$cluster", ".*");
            format!(
                "      - record: dashboard:expr_{i}\n        expr: {}\n",
                serde_json::to_string(&e).unwrap()
            )
        })
        .collect();
    let file = temp.path().join("dashboard-rules.yml");
    std::fs::write(&file, format!("groups:\n  - name: dashboard\n    rules:\n{}", rules.concat())).unwrap();
    let (ok, out) = promtool(&["check", "rules", file.to_str().unwrap()], "").await;
    assert!(ok, "promtool check rules:\n{out}");
}

#[test]
fn metric_names_are_read_out_of_expressions() {
    let e = r#"histogram_quantile(0.95, sum by (le) (rate(vantage_probe_rtt_seconds_bucket{cluster=~"$c"}[5m]))) / process_open_fds"#;
    assert_eq!(metric_names(e), ["vantage_probe_rtt_seconds_bucket", "process_open_fds"]);
    let fam = vec![("vantage_revisions".to_owned(), "counter".to_owned())];
    assert!(offered("vantage_revisions_total", &fam) && !offered("vantage_revisions", &fam));
}
