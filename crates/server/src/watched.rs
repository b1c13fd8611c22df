//! Files watched for changes by hand or by a tool (the mirror registry, the geo databases):
//! a watch of their directories, whose relevant events arrive as bursts — a reload waits until
//! the directory has been quiet for a moment, for editors and updaters write in several steps.

use std::path::Path;
use std::time::Duration;

use notify::{EventKind, RecommendedWatcher, Watcher};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// How quiet the directory must be before a reload.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// A directory watch: held as long as changes are wanted.
pub(crate) struct Watched {
    _watcher: RecommendedWatcher,
    /// Another way in: a change to look for at once (a file written before the watch began).
    pub(crate) poke: UnboundedSender<()>,
    changes: UnboundedReceiver<()>,
}

impl Watched {
    /// Watches `dirs` (not their subdirectories) for files created, changed or removed whose
    /// paths `ours` picks; a failed or overflowed watch counts as a change (it may have missed
    /// one). `None`, logged with `what` is watched, when the system cannot watch them.
    pub(crate) fn dirs(
        dirs: &[&Path],
        what: &str,
        ours: impl Fn(&Path) -> bool + Send + 'static,
    ) -> Option<Watched> {
        let (tx, rx) = unbounded_channel();
        let poke = tx.clone();
        let handler = move |event: notify::Result<notify::Event>| {
            let relevant = match &event {
                Ok(e) => changes(e, &ours),
                Err(_) => true,
            };
            if relevant {
                // The receiver goes only at shutdown.
                let _ = tx.send(());
            }
        };
        let mut watcher = match notify::recommended_watcher(handler) {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(error = %e, "cannot watch the {what}; changes made by hand need a restart");
                return None;
            }
        };
        for dir in dirs {
            if let Err(e) = watcher.watch(dir, notify::RecursiveMode::NonRecursive) {
                tracing::error!(dir = %dir.display(), error = %e, "cannot watch the {what}; changes made by hand need a restart");
                return None;
            }
        }
        Some(Watched { _watcher: watcher, poke, changes: rx })
    }

    /// Waits for a burst of changes ([`burst`]); false once the watch is gone.
    pub(crate) async fn burst(&mut self) -> bool {
        burst(&mut self.changes).await
    }
}

/// Whether `e` changes a file `ours` picks: created, changed or removed (reading one is no
/// change — the reload's own reading would otherwise be one).
pub(crate) fn changes(e: &notify::Event, ours: impl Fn(&Path) -> bool) -> bool {
    matches!(e.kind, EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any)
        && e.paths.iter().any(|p| ours(p))
}

/// Waits for a change, then until the directories have been quiet for [`DEBOUNCE`]; false
/// once the watch is gone.
async fn burst(changes: &mut UnboundedReceiver<()>) -> bool {
    if changes.recv().await.is_none() {
        return false;
    }
    while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, changes.recv()).await {}
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst of changes is one reload, taken once the directory has been quiet for the
    /// debounce window after the last change, however long the burst.
    #[tokio::test(start_paused = true)]
    async fn a_burst_of_changes_is_taken_once_quiet() {
        let (tx, mut rx) = unbounded_channel();
        let start = tokio::time::Instant::now();
        let writer = tokio::spawn(async move {
            for _ in 0..5 {
                tx.send(()).unwrap();
                tokio::time::sleep(DEBOUNCE / 2).await;
            }
            // Quiet for longer than the window, then one more change; then gone.
            tokio::time::sleep(DEBOUNCE * 3).await;
            tx.send(()).unwrap();
            tokio::time::sleep(DEBOUNCE * 2).await;
        });
        assert!(burst(&mut rx).await);
        // The last change came at 4 × DEBOUNCE/2; quiet from then for the window.
        assert_eq!(start.elapsed(), DEBOUNCE * 2 + DEBOUNCE);
        assert!(burst(&mut rx).await, "the change after the quiet is a burst of its own");
        assert_eq!(start.elapsed(), DEBOUNCE * 5 / 2 + DEBOUNCE * 3 + DEBOUNCE);
        writer.await.unwrap();
        assert!(!burst(&mut rx).await, "the watch is gone");
    }
}
