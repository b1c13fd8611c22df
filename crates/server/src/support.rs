//! Leaf helpers every driver uses: the wall clock (the only place the control plane reads
//! it), waiting for shutdown, locking, and private files. They depend on nothing else here, so
//! they stay out of the module cycle.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use vantage_core::Timestamp;

/// The wall clock, as the core's time.
pub fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// Resolves once `stop` is true. (The guard `wait_for` returns is dropped here, so a task
/// that awaits this stays `Send`.)
pub(crate) async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Locks a mutex, recovering the data of a holder that panicked: every critical section here
/// leaves the data consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes `text` to `path` readable by the owner only.
pub(crate) fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(text.as_bytes())
}
