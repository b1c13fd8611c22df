//! A node agent's heartbeat as the agent channel decodes it (`Json<wire::Heartbeat>`:
//! serde_json), handed to the control core as the channel does, and the evaluation it
//! triggers run: no heartbeat panics the decoder, the core, or the passes after it. The node
//! has no configured addresses, so the heartbeat's own become its scheduling addresses.
//!
//! Also: a decoded heartbeat encodes to JSON that decodes again to the same addresses,
//! capabilities and links (floats aside, as in the report target).
#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use vantage_core::wire::Heartbeat;
use vantage_fuzz::{REPORTING_NODE, T0, control, run_for};

fuzz_target!(|data: &[u8]| {
    let Ok(hb) = serde_json::from_slice::<Heartbeat>(data) else { return };
    let again: Heartbeat = serde_json::to_vec(&hb)
        .ok()
        .and_then(|json| serde_json::from_slice(&json).ok())
        .expect("a decoded heartbeat encodes and decodes again");
    assert_eq!(exact(&again), exact(&hb));
    let mut c = control();
    let now = T0.plus_secs(5);
    let from: IpAddr = [203, 0, 113, 60].into();
    c.handle_heartbeat(REPORTING_NODE, hb.clone(), from, now);
    run_for(&mut c, now, 30);
    // The next beat: its addresses and the agent's state are compared with the first one's.
    let later = now.plus_secs(15);
    c.handle_heartbeat(REPORTING_NODE, hb, from, later);
    run_for(&mut c, later, 30);
});

/// Everything in a heartbeat but its floats.
fn exact(h: &Heartbeat) -> impl PartialEq + std::fmt::Debug + '_ {
    let ints = h.metrics.map(|m| (m.memory_used_bytes, m.memory_total_bytes, m.connections));
    (&h.version, &h.hostname, ints, &h.addresses, &h.capabilities, &h.links)
}
