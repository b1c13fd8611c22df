//! What the demo prints while it runs: one line per event, stamped with the time since the
//! demo started. The narrator follows the server's event stream (what `vantage ctl events
//! --follow` prints), asks the built-in DNS server what `dig` on this machine would get, and
//! says what changed.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use vantage_control::events::{EventKind, FleetEvent};
use vantage_dns::query_a;

use super::fleet::{self, Api};

/// Standard output with a clock.
#[derive(Debug)]
pub(crate) struct Out {
    start: Instant,
    /// The latest scripted event (what happened, when), for "N s after …".
    event: Mutex<Option<(Instant, String)>>,
}

impl Out {
    pub(crate) fn new() -> Out {
        Out { start: Instant::now(), event: Mutex::new(None) }
    }

    /// When the demo started.
    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    /// Prints `[+  12.3s] line`.
    pub(crate) fn say(&self, line: &str) {
        print_line(&format!("[+{:>6.1}s] {line}", self.start.elapsed().as_secs_f64()));
    }

    /// Prints a continuation line, indented under the stamp.
    pub(crate) fn more(&self, line: &str) {
        print_line(&format!("{:11}{line}", ""));
    }

    /// Remembers a scripted event.
    pub(crate) fn event(&self, what: String) {
        *lock(&self.event) = Some((Instant::now(), what));
    }

    fn since_event(&self) -> Option<String> {
        lock(&self.event)
            .as_ref()
            .map(|(at, what)| format!("{:.1} s after {what}", at.elapsed().as_secs_f64()))
    }
}

/// One line on standard output; a closed output (`vantage demo | head`) is not an error of
/// the demo, so failures to write are ignored.
fn print_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// A poisoned lock only means a panic elsewhere; the value is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn join(ips: &[IpAddr]) -> String {
    if ips.is_empty() {
        "nothing".into()
    } else {
        ips.iter().map(IpAddr::to_string).collect::<Vec<_>>().join(" ")
    }
}

/// What the narrator remembers of the stream.
#[derive(Debug, Default)]
struct Story {
    probers_online: BTreeSet<String>,
}

impl Story {
    /// Says one event, with what a newcomer needs to read it.
    fn tell(&mut self, e: &FleetEvent, out: &Out) {
        out.say(&e.summary);
        match e.kind {
            EventKind::ProberOnline => {
                let name = e.details["prober"].as_str().unwrap_or_default().to_owned();
                if self.probers_online.insert(name) && self.probers_online.len() == fleet::PROBERS.len() {
                    out.more("All three report now: an address fails when a strict majority (2 of 3) sees it fail.");
                }
            }
            EventKind::AddressFailing => out.more(&format!(
                "A majority sees it fail: it leaves DNS once that has lasted {} s.",
                fleet::FAILING_BEFORE_UNREACHABLE_S
            )),
            EventKind::AddressRecovering => out.more(&format!(
                "A majority sees it answer: it returns to DNS once that has lasted {} s.",
                fleet::ANSWERING_BEFORE_REACHABLE_S
            )),
            EventKind::Revision => {
                if let Some(held) = e.details["held"].as_object() {
                    for (line, hold) in held {
                        let reason = hold["reason"].as_str().unwrap_or_default();
                        out.more(&match hold["policy"].as_str() {
                            Some("hold") => format!("line {line} kept its records: {reason}"),
                            policy => format!(
                                "line {line} answers by its all-down policy {}: {reason}",
                                policy.unwrap_or_default()
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
}

/// Narrates until `stop`: first what the set-up did, then each event as it comes, and each
/// change of what DNS answers.
pub(crate) async fn run(api: Api, dns: SocketAddr, out: Arc<Out>, mut stop: watch::Receiver<bool>) {
    let mut story = Story::default();
    let after = match api.events("/v1/events?limit=1000").await {
        Ok(stored) => set_up(&mut story, &stored, &out),
        Err(e) => {
            tracing::debug!(error = %e, "demo narrator: cannot read the stored events");
            None
        }
    };
    let src = api.source();
    let follow = crate::follow::follow(
        &src,
        after,
        |s| match s {
            crate::follow::Streamed::Event(e) => story.tell(&e, &out),
            crate::follow::Streamed::Gap(g) => {
                tracing::debug!(reason = %g.reason, "demo narrator: events missing")
            }
        },
        |e| {
            tracing::debug!(error = %e, "demo narrator: event stream dropped");
        },
    );
    tokio::select! {
        e = follow => tracing::warn!(error = %e, "demo narrator: the server refuses the event stream"),
        () = watch_dns(dns, &out) => {}
        _ = stop.wait_for(|s| *s) => {}
    }
}

/// The events of the set-up: probers that came online are told, the revisions it cut (one
/// per change) summed up in one line and the last one told. Returns the last event's id.
fn set_up(story: &mut Story, stored: &[FleetEvent], out: &Out) -> Option<u64> {
    let revisions: Vec<&FleetEvent> = stored.iter().filter(|e| e.kind == EventKind::Revision).collect();
    if revisions.len() > 1 {
        out.say(&format!(
            "revisions 1–{} were cut while the fleet was set up, one per change",
            revisions.len() - 1
        ));
    }
    for e in stored {
        let last_revision = revisions.last().is_some_and(|r| r.id == e.id);
        if e.kind == EventKind::ProberOnline || last_revision {
            story.tell(e, out);
        }
    }
    stored.last().map(|e| e.id)
}

/// Asks the built-in DNS server four times a second and says when its answer changes.
async fn watch_dns(dns: SocketAddr, out: &Out) {
    let mut said: Option<Result<Vec<IpAddr>, String>> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = query_a(dns, fleet::DOMAIN, Duration::from_secs(1)).await;
        if said.as_ref() == Some(&now) {
            continue;
        }
        match &now {
            Ok(ips) => {
                let when = if said.is_none() { None } else { out.since_event() };
                let tail = when.map(|w| format!(" ({w})")).unwrap_or_default();
                out.say(&format!("DNS: {} answers {} to this machine{tail}", fleet::DOMAIN, join(ips)));
            }
            Err(e) => out.say(&format!("DNS: no answer for {}: {e}", fleet::DOMAIN)),
        }
        said = Some(now);
    }
}
