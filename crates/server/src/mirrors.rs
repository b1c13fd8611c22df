//! The mirror registry's files: reading the directory, writing one record atomically, and
//! watching the directory so that an edit by hand is picked up like one through the API. Every
//! reload hands the whole directory to the control core, which validates it and swaps it in
//! or keeps the old registry; this module only moves bytes and reports the outcome.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use vantage_control::mirrors::LoadError;
use vantage_control::mirrors::registry::{Changes, is_registry_file};

use crate::app::App;
use crate::support::{now, stopped};

/// Largest registry file read; a bigger one fails the reload with a plain reason.
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most files read from the directory.
const MAX_FILES: usize = 10_000;
/// Editors write a file in several steps; a reload waits until the directory is this quiet.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// Why the directory could not be read as a registry.
fn io_failure(file: &str, e: &std::io::Error) -> LoadError {
    LoadError { file: file.to_owned(), field: "body".into(), reason: format!("cannot read: {e}") }
}

/// Every registry file of `dir`: (file name, text).
pub(crate) fn read_dir(dir: &Path) -> Result<Vec<(String, String)>, LoadError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_failure(".", &e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_failure(".", &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_registry_file(&name) {
            continue;
        }
        if files.len() == MAX_FILES {
            return Err(LoadError {
                file: name,
                field: "body".into(),
                reason: format!("the directory holds more than {MAX_FILES} registry files"),
            });
        }
        let len = entry.metadata().map_err(|e| io_failure(&name, &e))?.len();
        if len > MAX_FILE_BYTES {
            return Err(LoadError {
                file: name,
                field: "body".into(),
                reason: format!("{len} bytes; at most {MAX_FILE_BYTES}"),
            });
        }
        let text = std::fs::read_to_string(entry.path()).map_err(|e| io_failure(&name, &e))?;
        files.push((name, text));
    }
    files.sort();
    Ok(files)
}

/// Writes `text` to `dir/name` atomically: a hidden temporary file (which the registry
/// ignores), then a rename, so a reload never reads half a record.
pub(crate) fn write_file(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(name))
}

/// Removes `dir/name` (gone already is fine).
pub(crate) fn remove_file(dir: &Path, name: &str) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(name)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Writes (`Some`) or removes (`None`) `dir/name`, as [`write_file`] and [`remove_file`].
pub(crate) fn put_file(dir: &Path, name: &str, text: Option<&str>) -> std::io::Result<()> {
    match text {
        Some(text) => write_file(dir, name, text),
        None => remove_file(dir, name),
    }
}

/// Reloads the registry from its directory: the control core validates the whole set. A
/// failure is logged with its file and field and counted; the old registry keeps serving.
pub(crate) fn reload(app: &App) -> Result<Changes, LoadError> {
    let files = read_dir(&app.mirrors_dir());
    let outcome = app.feed(|c| match files {
        Ok(files) => c.handle_registry(&files, now()),
        Err(e) => Err(e),
    });
    match &outcome {
        Ok(ch) if !ch.is_empty() => {
            tracing::info!(added = ?ch.added, changed = ?ch.changed, removed = ?ch.removed, tenants = ch.tenants, "mirror registry reloaded")
        }
        Ok(_) => {}
        Err(e) => {
            app.metrics().mirror_reload_failed();
            tracing::error!(file = %e.file, field = %e.field, reason = %e.reason, "mirror registry reload refused; the previous registry keeps serving");
        }
    }
    app.sync_config();
    outcome
}

/// Whether a file-system event may change the registry: creating, writing, renaming or
/// removing a registry file. Reads are not changes: a reload reads every file, and counting
/// those would reload forever.
fn changes_registry(e: &notify::Event) -> bool {
    use notify::EventKind;
    matches!(e.kind, EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any)
        && e.paths.iter().any(|p| p.file_name().is_some_and(|n| is_registry_file(&n.to_string_lossy())))
}

/// Watches the registry directory until `stop`, reloading once after each burst of changes
/// (editors write a file in several steps). A watch that cannot start is logged: the API
/// still reloads after its own writes.
pub(crate) async fn watch(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    use notify::Watcher;
    let dir: PathBuf = app.mirrors_dir();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let handler = move |event: notify::Result<notify::Event>| {
        let relevant = match &event {
            Ok(e) => changes_registry(e),
            // An overflowed or failed watch may have missed a change.
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
            tracing::error!(error = %e, "cannot watch the mirror registry; edits by hand need a restart");
            return;
        }
    };
    if let Err(e) = watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
        tracing::error!(dir = %dir.display(), error = %e, "cannot watch the mirror registry; edits by hand need a restart");
        return;
    }
    loop {
        tokio::select! {
            first = rx.recv() => {
                if first.is_none() {
                    return;
                }
                // The burst: wait until the directory has been quiet for the debounce window.
                while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {}
                // After any API write in progress: its own reload is the newer reading.
                let outcome = {
                    let _one_at_a_time = app.mirrors_write().await;
                    reload(&app)
                };
                if let Ok(ch) = outcome && !ch.is_empty() {
                    app.audit_system("mirror.reload", "mirrors", serde_json::to_value(&ch).unwrap_or_default()).await;
                }
            }
            () = stopped(&mut stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, Event, EventKind};

    #[test]
    fn reading_the_files_is_no_change() {
        let on = |kind, name: &str| Event::new(kind).add_path(PathBuf::from("/d").join(name));
        assert!(changes_registry(&on(EventKind::Create(CreateKind::File), "m.example.net.yaml")));
        assert!(!changes_registry(&on(EventKind::Access(AccessKind::Read), "m.example.net.yaml")));
        assert!(!changes_registry(&on(EventKind::Create(CreateKind::File), ".m.example.net.yaml.tmp")));
    }
}
