//! The live half of the event stream: every event the driver carries out is handed to the
//! open streams (`GET /v1/events/stream`, server-sent events) and kept among the recent ones,
//! as well as stored. The saves task stores an event after it went live, so a stream that
//! opens or falls behind reads the recent ones here first and storage only for older ones.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast};
use vantage_control::events::FleetEvent;

use crate::support::lock;

/// Events held for streams that are slow to read, and kept as the recent ones: a stream that
/// fell behind the channel finds what it missed among them (they are as many).
const RECENT: usize = 1024;
/// Streams open at once; more are refused with 503.
pub(crate) const MAX_STREAMS: usize = 64;

/// Hands events to the open streams and keeps the recent ones.
#[derive(Debug)]
pub(crate) struct EventHub {
    tx: broadcast::Sender<Arc<FleetEvent>>,
    streams: Arc<Semaphore>,
    held: Mutex<Held>,
}

/// The recent events, and where this process's numbering stands.
#[derive(Debug)]
struct Held {
    events: VecDeque<Arc<FleetEvent>>,
    /// The id this process numbers after: older ids were made before the start.
    base: u64,
    /// The newest id published (`base` before any).
    newest: u64,
}

/// What the hub holds after an id, and what it no longer holds.
#[derive(Debug)]
pub(crate) struct Recent {
    /// The held events after the id asked for, oldest first.
    pub(crate) events: Vec<Arc<FleetEvent>>,
    /// The oldest id held, or the next one to be (none held): older ones are in storage, or
    /// were lost.
    pub(crate) held_from: u64,
    /// The newest id published, or the one numbering continues after.
    pub(crate) newest: u64,
    /// The id this process numbers after: ids up to it were made before this start, and
    /// whether they were all stored cannot be known.
    pub(crate) base: u64,
}

impl Recent {
    /// Every event after `after` is held (or none was made after it).
    pub(crate) fn covers(&self, after: u64) -> bool {
        after.saturating_add(1) >= self.held_from
    }
}

impl EventHub {
    /// A hub for a process whose numbering continues after `base`.
    pub(crate) fn new(base: u64) -> EventHub {
        EventHub {
            tx: broadcast::Sender::new(RECENT),
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
            held: Mutex::new(Held { events: VecDeque::with_capacity(RECENT), base, newest: base }),
        }
    }

    /// Keeps `e` among the recent events, then hands it to every open stream.
    pub(crate) fn publish(&self, e: FleetEvent) {
        let e = Arc::new(e);
        {
            let mut held = lock(&self.held);
            held.newest = held.newest.max(e.id);
            if held.events.len() == RECENT {
                held.events.pop_front();
            }
            held.events.push_back(e.clone());
        }
        let _ = self.tx.send(e);
    }

    /// The held events after `after`. A stream subscribes (`open`) before it asks, so that
    /// what is published in between reaches it one way or both (it skips ids it sent).
    pub(crate) fn recent(&self, after: u64) -> Recent {
        let held = lock(&self.held);
        let start = held.events.partition_point(|e| e.id <= after);
        Recent {
            events: held.events.range(start..).cloned().collect(),
            held_from: held.events.front().map_or(held.newest.saturating_add(1), |e| e.id),
            newest: held.newest,
            base: held.base,
        }
    }

    /// A place for one more stream, with every event published from now on; `None` when
    /// [`MAX_STREAMS`] are open.
    pub(crate) fn open(&self) -> Option<(OwnedSemaphorePermit, broadcast::Receiver<Arc<FleetEvent>>)> {
        let permit = self.streams.clone().try_acquire_owned().ok()?;
        Some((permit, self.tx.subscribe()))
    }
}
