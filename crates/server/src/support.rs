//! Leaf helpers every driver uses: the wall clock (the only place the control plane reads
//! it), waiting for shutdown, locking, and private files. They depend on nothing else here, so
//! they stay out of the module cycle.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use vantage_core::Timestamp;

/// The wall clock, as the core's time: the server's one reading of it (`clippy.toml`).
#[allow(clippy::disallowed_methods)]
pub fn now() -> Timestamp {
    Timestamp::from_system(SystemTime::now())
}

/// This host's name, from the kernel (`None` when it cannot be read).
pub(crate) fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_owned()).filter(|n| !n.is_empty())
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

/// Keys whose values are secrets wherever they appear in an audit entry's metadata.
const SECRET_KEYS: [&str; 3] = ["key_secret", "secret", "password"];

/// `v` with every secret value replaced by `(hidden)`: audit entries are read through the API
/// and the UI, which must not show what `GET` hides (a cluster's TSIG secrets, say).
pub(crate) fn redact(mut v: serde_json::Value) -> serde_json::Value {
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, x) in map.iter_mut() {
                    if SECRET_KEYS.contains(&k.as_str()) && !x.is_null() {
                        *x = serde_json::Value::String("(hidden)".into());
                    } else {
                        walk(x);
                    }
                }
            }
            serde_json::Value::Array(list) => list.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hidden_at_any_depth() {
        let v = serde_json::json!({"name": "c", "publishers": [{"key_name": "k", "key_secret": "c2VjcmV0"}], "secret": null});
        let r = redact(v);
        assert_eq!(r["publishers"][0]["key_secret"], "(hidden)");
        assert_eq!(r["publishers"][0]["key_name"], "k");
        assert!(r["secret"].is_null(), "nothing to hide");
        assert!(!r.to_string().contains("c2VjcmV0"));
    }
}
