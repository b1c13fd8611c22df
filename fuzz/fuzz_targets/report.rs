//! A prober's report as the agent channel decodes it (`Json<wire::Report>`: serde_json), then
//! handed to the control core as the channel does, and the evaluation it triggers run: no
//! report panics the decoder, the core, or the passes after it.
//!
//! Also: a decoded report encodes to JSON that decodes again to the same times, targets and
//! attempts (floats aside: serde_json reads them back within an ULP), since what the server
//! accepts it must be able to write and read back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vantage_core::wire::{MAX_RESULTS, Report};
use vantage_fuzz::{PROBER, T0, control, run_for};

fuzz_target!(|data: &[u8]| {
    let Ok(report) = serde_json::from_slice::<Report>(data) else { return };
    let again: Report = serde_json::to_vec(&report)
        .ok()
        .and_then(|json| serde_json::from_slice(&json).ok())
        .expect("a decoded report encodes and decodes again");
    assert_eq!(exact(&again), exact(&report));
    // The channel refuses larger reports before the core sees them.
    if report.results.len() > MAX_RESULTS {
        return;
    }
    let mut c = control();
    let now = T0.plus_secs(5);
    if c.handle_report(PROBER, &report, now).is_ok() {
        run_for(&mut c, now, 30);
    }
});

/// Everything in a report but its floats.
fn exact(r: &Report) -> impl PartialEq + std::fmt::Debug + '_ {
    let results: Vec<_> = r
        .results
        .iter()
        .map(|p| (&p.target, &p.attempts, p.cert_not_after, p.failed_at, p.hls.is_some()))
        .collect();
    (r.started_at, r.finished_at, &r.version, r.confirmation, results)
}
