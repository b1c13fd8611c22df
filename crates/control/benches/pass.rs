//! The control core's passes over a large cluster, as its owner runs them: `--nodes N` nodes
//! (10,000 unless told) × 3 addresses × 2 listeners, 50 probers each reporting every target of
//! its work (the probe budget gives each target 33 of them, so about 2 million latest results
//! are held at 10,000 nodes, not 3: the count is printed), and a rule that takes out a node its
//! probers lose (`probe_loss >= 90` for 30 s).
//!
//! Prints, for the steady fleet — every prober's round, then a pass, every 10 s — the median
//! and worst of the passes, how long one report of 10,000 results takes — the first reports
//! (every target new) and the later rounds' (each result replacing the one before), and of the
//! latter the part the core's owner takes once a handler has checked the report — how long
//! making a prober's work takes (each prober asks for it every round), and the peak memory
//! per latest result;
//! then, with 1 % of the primaries failing for every prober (and so 1 % of the nodes under the
//! acting rule), the passes of the rounds that follow and the revisions they cut.
//!
//! `cargo bench -p vantage-control --bench pass` (or `-- --nodes 1000`, `-- --nodes 100000`).
// A benchmark stops at its first failure.
#![allow(clippy::expect_used)]

use std::time::{Duration, Instant};

use vantage_control::config::{Object, RuleRecord};
use vantage_control::fixtures::{good_round, large_fleet};
use vantage_control::identity::Caller;
use vantage_control::{Control, Output, Start, check_report};
use vantage_core::Timestamp;
use vantage_core::ids::ClusterId;
use vantage_core::result::{Attempt, ErrorCode, Stages};
use vantage_core::wire;

const PROBERS: i64 = 50;
const PASSES: usize = 10;
/// Rounds with the failing primaries: enough for the addresses to go down and the rule to act.
const FAILING_ROUNDS: usize = 8;
/// A prober's round, the default probe interval.
const ROUND_S: u64 = 10;

/// How long each of a round's reports and works took.
#[derive(Default)]
struct Took {
    reports: Vec<Duration>,
    /// The part of each report the core's owner takes (`handle_checked`): in the server the
    /// check against the work runs on the channel's worker, from the published view.
    owned: Vec<Duration>,
    works: Vec<Duration>,
}

/// Every prober's full round at `now` — its work asked for, then reports of at most
/// [`wire::MAX_RESULTS`] results, each passed through `alter` — timed.
fn round(
    control: &mut Control,
    probers: &[Caller],
    now: Timestamp,
    alter: &dyn Fn(&mut wire::Report),
) -> Took {
    let mut took = Took::default();
    for p in probers {
        let t = Instant::now();
        let work = control.handle_work(*p, now);
        took.works.push(t.elapsed());
        // What a handler checks a report against: the work in the published view.
        let given = control.view(now).probers.get(p).map(|r| r.given.clone());
        for mut report in good_round(&work, now) {
            alter(&mut report);
            // `handle_report`, in its two parts.
            let t = Instant::now();
            let checked = check_report(given.as_ref(), &report).expect("a report of its work");
            let owner = Instant::now();
            control.handle_checked(*p, &report, checked, now).expect("report");
            took.owned.push(owner.elapsed());
            took.reports.push(t.elapsed());
        }
        while control.poll_output().is_some() {}
    }
    took
}

/// A pass at `now`, timed; why each revision it cut was cut (`health`, `scheduling`, …).
fn pass(control: &mut Control, now: Timestamp) -> (Duration, Vec<&'static str>) {
    let t = Instant::now();
    control.handle_timeout(now);
    let took = t.elapsed();
    let mut causes = Vec::new();
    while let Some(o) = control.poll_output() {
        if let Output::Revision(r) = o {
            causes.push(r.cause());
        }
    }
    (took, causes)
}

/// The primary address (the first of each node's three) of every hundredth node, as the
/// fixture numbers them, is lost by every prober.
fn fails(target: &str) -> bool {
    let Some(ip) = target.split('/').nth(1).and_then(|ip| ip.parse::<std::net::Ipv4Addr>().ok()) else {
        return false;
    };
    let n = u32::from(ip) - 0x0a00_0000;
    n % 4 == 0 && (n / 4) % 100 == 0
}

/// This process's peak resident memory, bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()));
    kib.unwrap_or(0) * 1024
}

fn median_worst(mut d: Vec<Duration>) -> String {
    d.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!("median {:.1} ms, worst {:.1} ms", ms(d[d.len() / 2]), ms(d[d.len() - 1]))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes: u32 = args
        .iter()
        .position(|a| a == "--nodes")
        .and_then(|i| args.get(i + 1))
        .map_or(10_000, |n| n.parse().expect("--nodes N"));
    let mut now = Timestamp::from_secs(1_800_000_000);
    let mut control = Control::new(Start::default(), now);
    let mut fleet = large_fleet(nodes, PROBERS);
    let rule = serde_json::json!({"name": "lost", "conditions": [
        {"metric": "probe_loss", "comparison": ">=", "threshold": 90, "for_s": 30, "aggregate": "avg"}]});
    let rule = serde_json::from_value(rule).expect("a valid rule");
    fleet.puts.push((4, Object::Rule(RuleRecord { cluster: ClusterId(2), rule })));
    control.handle_change(fleet.puts, Vec::new(), now);
    // Every prober asks for work before the first round, so that every work is trimmed to the
    // probe budget as in operation (probers that come online one by one each probe every
    // target until enough of them are online to share the fleet).
    for p in &fleet.probers {
        control.handle_work(*p, now);
    }
    let feed = round(&mut control, &fleet.probers, now, &|_| {});
    let results: usize = control.addresses().results().iter().count();
    let targets = control.handle_work(fleet.probers[0], now).targets.len();
    let (mut passes, mut steady, mut views, mut works) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut owned = Vec::new();
    for _ in 0..PASSES {
        now = now.plus_secs(ROUND_S);
        // Every result replaces its prober's last one.
        let took = round(&mut control, &fleet.probers, now, &|_| {});
        steady.extend(took.reports);
        owned.extend(took.owned);
        works.extend(took.works);
        passes.push(pass(&mut control, now).0);
        // What the owner publishes after the pass, the figures for `/metrics` with it.
        let t = Instant::now();
        drop(control.view(now));
        views.push(t.elapsed());
    }
    // A configuration change shortly after a pass, no report between (as when nodes are
    // created one after the other): a node renamed, and the pass it causes.
    let first = *control.config().nodes.keys().next().expect("nodes");
    let mut changes = Vec::new();
    for i in 0..PASSES {
        now = now.plus_millis(100);
        let mut renamed = (*control.view(now).config.nodes[&first].value).clone();
        renamed.node.name = format!("renamed-{i}");
        control.handle_change(vec![(first, Object::Node(renamed))], Vec::new(), now);
        changes.push(pass(&mut control, now).0);
    }
    let peak = peak_rss();
    println!("{nodes} nodes × 3 addresses × 2 listeners, {PROBERS} probers: {results} latest results held");
    println!(
        "steady pass (evaluate + snapshot + the sweeps of every 10 s), {PASSES} passes: {}",
        median_worst(passes)
    );
    println!("the view published after each pass (the figures for /metrics made): {}", median_worst(views));
    println!(
        "a change's pass (a node renamed 100 ms after the last pass, no report between), {PASSES} passes: {}",
        median_worst(changes)
    );
    let n = wire::MAX_RESULTS;
    println!("handle_report of {n} results, first reports: {}", median_worst(feed.reports));
    println!("handle_report of {n} results, later rounds: {}", median_worst(steady));
    println!(
        "  of which the core's owner's part (handle_checked; the server checks on the channel's worker): {}",
        median_worst(owned)
    );
    println!("handle_work (a prober's work of {targets} targets), later rounds: {}", median_worst(works));
    println!(
        "peak resident memory: {:.2} GiB, {} bytes per latest result",
        peak as f64 / f64::from(1 << 30),
        peak / results.max(1) as u64
    );
    println!(
        "one latest result's record: {} bytes, of which its observation {} (the parts alone, beside their share of the tables)",
        vantage_control::addresses::RECORD_BYTES,
        size_of::<vantage_core::reachability::Observation>()
    );

    // 1 % of the primaries fail for every prober, round after round.
    let lost = Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(ErrorCode::Timeout) };
    let fail = |report: &mut wire::Report| {
        for r in report.results.iter_mut().filter(|r| fails(&r.target)) {
            r.attempts = vec![lost; r.attempts.len()];
        }
    };
    let (mut failing, mut revisions) = (Vec::new(), std::collections::BTreeMap::new());
    for _ in 0..FAILING_ROUNDS {
        now = now.plus_secs(ROUND_S);
        round(&mut control, &fleet.probers, now, &fail);
        let (took, causes) = pass(&mut control, now);
        failing.push(took);
        for cause in causes {
            *revisions.entry(cause).or_insert(0) += 1;
        }
    }
    println!(
        "1 % of the primaries failing ({} nodes), the rule acting: {FAILING_ROUNDS} passes, {}; revisions cut: {revisions:?}",
        nodes.div_ceil(100),
        median_worst(failing)
    );
    assert!(revisions.contains_key("health"), "the failing primaries cut revisions");
    assert!(revisions.contains_key("scheduling"), "the rule acted");
}
