//! One pass of the control core over a large cluster, as its owner runs it: 10,000 nodes × 3
//! addresses × 2 listeners, 50 probers each reporting every target of its work (the probe
//! budget trims the work, so about 2.8 million latest results are held, not 3: the count is
//! printed). Prints the median and worst of the passes, and how long one report of 10,000
//! results takes — the first reports (every target new) and a later round's (each result
//! replacing the one before, as in steady operation). `cargo bench -p vantage-control --bench
//! pass`.
// A benchmark stops at its first failure.
#![allow(clippy::expect_used)]

use std::time::{Duration, Instant};

use vantage_control::fixtures::{good_round, large_fleet};
use vantage_control::identity::Caller;
use vantage_control::{Control, Start};
use vantage_core::Timestamp;
use vantage_core::wire;

const NODES: u32 = 10_000;
const PROBERS: i64 = 50;
const PASSES: usize = 15;

/// Every prober's full round at `now`, as reports of at most [`wire::MAX_RESULTS`] results;
/// how long each report took to handle.
fn round(control: &mut Control, probers: &[Caller], now: Timestamp) -> Vec<Duration> {
    let mut took = Vec::new();
    for p in probers {
        let work = control.handle_work(*p, now);
        for report in good_round(&work, now) {
            let t = Instant::now();
            control.handle_report(*p, &report, now).expect("report");
            took.push(t.elapsed());
        }
        while control.poll_output().is_some() {}
    }
    took
}

fn main() {
    let mut now = Timestamp::from_secs(1_800_000_000);
    let mut control = Control::new(Start::default(), now);
    let fleet = large_fleet(NODES, PROBERS);
    control.handle_change(fleet.puts, Vec::new(), now);
    let mut feed = round(&mut control, &fleet.probers, now);
    let results: usize = control.addresses().results().values().map(|per| per.len()).sum();
    let mut passes: Vec<Duration> = Vec::new();
    for _ in 0..PASSES {
        now = now.plus_secs(10);
        let t = Instant::now();
        control.handle_timeout(now);
        passes.push(t.elapsed());
        while control.poll_output().is_some() {}
    }
    // A later round: every result replaces its prober's last one.
    let mut steady = round(&mut control, &fleet.probers, now);
    passes.sort();
    feed.sort();
    steady.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("latest results held: {results}");
    println!(
        "pass (evaluate + snapshot + the sweeps of every 10 s), {PASSES} passes: median {:.1} ms, worst {:.1} ms",
        ms(passes[PASSES / 2]),
        ms(passes[PASSES - 1])
    );
    println!(
        "handle_report of {} results, first reports: median {:.1} ms, worst {:.1} ms",
        wire::MAX_RESULTS,
        ms(feed[feed.len() / 2]),
        ms(feed[feed.len() - 1])
    );
    println!(
        "handle_report of {} results, a later round: median {:.1} ms, worst {:.1} ms",
        wire::MAX_RESULTS,
        ms(steady[steady.len() / 2]),
        ms(steady[steady.len() - 1])
    );
}
