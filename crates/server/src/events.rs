//! The live half of the event stream: every event the driver carries out is handed to the
//! open streams (`GET /v1/events/stream`, server-sent events) as well as stored. Streams are
//! bounded in number; one that falls behind the channel re-reads what it missed from storage.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast};
use vantage_control::events::FleetEvent;

/// Events held for streams that are slow to read, before a stream must re-read storage.
const BUFFERED: usize = 1024;
/// Streams open at once; more are refused with 503.
pub(crate) const MAX_STREAMS: usize = 64;

/// Hands events to the open streams.
#[derive(Debug)]
pub(crate) struct EventHub {
    tx: broadcast::Sender<Arc<FleetEvent>>,
    streams: Arc<Semaphore>,
}

impl Default for EventHub {
    fn default() -> Self {
        EventHub { tx: broadcast::Sender::new(BUFFERED), streams: Arc::new(Semaphore::new(MAX_STREAMS)) }
    }
}

impl EventHub {
    /// Hands `e` to every open stream (none open: nothing to do).
    pub(crate) fn publish(&self, e: FleetEvent) {
        let _ = self.tx.send(Arc::new(e));
    }

    /// A place for one more stream, with every event published from now on; `None` when
    /// [`MAX_STREAMS`] are open.
    pub(crate) fn open(&self) -> Option<(OwnedSemaphorePermit, broadcast::Receiver<Arc<FleetEvent>>)> {
        let permit = self.streams.clone().try_acquire_owned().ok()?;
        Some((permit, self.tx.subscribe()))
    }
}
