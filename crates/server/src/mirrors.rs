//! The mirror registry's files: reading the directory, writing one record atomically, and
//! watching the directory so that an edit by hand is picked up like one through the API. Every
//! reload hands the whole directory to the control core, which validates it and swaps it in
//! or keeps the old registry; this module only moves bytes and reports the outcome.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use vantage_control::mirrors::LoadError;
use vantage_control::mirrors::registry::{Changes, is_registry_file};

use crate::app::App;
use crate::owner::Input;
use crate::support::stopped;
use crate::watched::Watched;

/// Largest registry file read; a bigger one fails the reload with a plain reason.
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most files read from the directory.
const MAX_FILES: usize = 10_000;

/// Why the directory could not be listed.
fn io_failure(file: &str, e: &std::io::Error) -> LoadError {
    LoadError { file: file.to_owned(), field: "body".into(), reason: format!("cannot read: {e}") }
}

/// Every registry file of `dir`: (file name, text), or every file left out with why (then
/// the reload is refused: see [`read_file`]). Read on a blocking thread: a file system can
/// stall, and an async worker held by it would stall `/healthz` and the API with it.
pub(crate) async fn read_dir(dir: PathBuf) -> Result<Vec<(String, String)>, Vec<LoadError>> {
    tokio::task::spawn_blocking(move || read_dir_now(&dir)).await.unwrap_or_else(|e| {
        Err(vec![LoadError {
            file: ".".into(),
            field: "body".into(),
            reason: format!("the reading stopped: {e}"),
        }])
    })
}

fn read_dir_now(dir: &Path) -> Result<Vec<(String, String)>, Vec<LoadError>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(vec![io_failure(".", &e)]),
    };
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| vec![io_failure(".", &e)])?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_registry_file(&name) {
            continue;
        }
        let skip = |reason: String| LoadError { file: name.clone(), field: "body".into(), reason };
        if files.len() + skipped.len() == MAX_FILES {
            skipped.push(skip(format!("the directory holds more than {MAX_FILES} registry files")));
            break;
        }
        match read_file(&entry.path()) {
            Ok(Some(text)) => files.push((name, text)),
            // Removed since the listing: not part of the registry.
            Ok(None) => {}
            Err(reason) => skipped.push(skip(reason)),
        }
    }
    if !skipped.is_empty() {
        skipped.sort_by(|a, b| a.file.cmp(&b.file));
        return Err(skipped);
    }
    files.sort();
    Ok(files)
}

/// One registry file's text (`None`: gone), or why it is left out, in words that never quote
/// it. It is opened without following a symbolic link (a link could point at any file the
/// server may read, such as its admin token) and without blocking (a named pipe opens at
/// once instead of waiting for a writer); the open descriptor must be a regular file, and at
/// most one byte past the cap is read from it, so what was checked is what is read, however
/// the file changes meanwhile.
fn read_file(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let file = match std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err("a symbolic link".into());
        }
        Err(e) => return Err(unreadable(&e)),
    };
    let kind = file.metadata().map_err(|e| unreadable(&e))?.file_type();
    let what = if kind.is_file() {
        None
    } else if kind.is_fifo() {
        Some("a named pipe")
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("something else")
    };
    if let Some(what) = what {
        return Err(format!("{what}, not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| unreadable(&e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    String::from_utf8(bytes).map(Some).map_err(|_| "not UTF-8".into())
}

/// What a reading that left `skipped` out refuses the reload with: its first file.
pub(crate) fn first_skipped(skipped: &[LoadError]) -> LoadError {
    skipped.first().cloned().unwrap_or_else(|| io_failure(".", &std::io::Error::other("nothing read")))
}

/// Why a file could not be opened or read, by its kind only (`permission denied`).
fn unreadable(e: &std::io::Error) -> String {
    format!("unreadable: {}", e.kind())
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
/// failure (a file that fails validation, or any file that cannot be read) is logged with its
/// file and field and counted; the old registry keeps serving.
pub(crate) async fn reload(app: &App) -> Result<Changes, LoadError> {
    let files = read_dir(app.mirrors_dir()).await;
    let outcome = match app.owner().ask(|reply| Input::Registry { files, reply }).await {
        Ok(outcome) => outcome,
        Err(e) => Err(LoadError { file: ".".into(), field: "body".into(), reason: e.to_string() }),
    };
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
    outcome
}

/// Whether `p` names a registry file (a change to any other file of the directory is none of
/// the registry's).
fn registry_path(p: &Path) -> bool {
    p.file_name().is_some_and(|n| is_registry_file(&n.to_string_lossy()))
}

/// Watches the registry directory until `stop`, reloading once after each burst of changes
/// (editors write a file in several steps). A watch that cannot start is logged: the API
/// still reloads after its own writes.
pub(crate) async fn watch(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    let dir: PathBuf = app.mirrors_dir();
    let Some(mut watched) = Watched::dirs(&[&dir], "mirror registry", registry_path) else { return };
    // A file written between the start's reading of the directory and this watch raised no
    // event: the directory is read once more now that every later change will.
    let _ = watched.poke.send(());
    loop {
        tokio::select! {
            burst = watched.burst() => {
                if !burst {
                    return;
                }
                // After any API write in progress: its own reload is the newer reading.
                let outcome = {
                    let _one_at_a_time = app.mirrors_write().await;
                    reload(&app).await
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

    /// A link, a pipe, a directory, an oversized and a non-UTF-8 file are each left out with
    /// a reason that quotes nothing; a pipe does not block the reading.
    #[test]
    fn only_regular_files_are_read_and_every_other_is_listed() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        std::fs::write(dir.join("secret"), "token-1234").unwrap();
        std::fs::write(dir.join("m.example.net.yaml"), "host: m.example.net\n").unwrap();
        assert_eq!(
            read_dir_now(dir).unwrap(),
            [("m.example.net.yaml".to_owned(), "host: m.example.net\n".to_owned())]
        );
        std::os::unix::fs::symlink(dir.join("secret"), dir.join("link.yaml")).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(dir.join("pipe.yaml")).status().unwrap().success());
        std::fs::create_dir(dir.join("sub.yaml")).unwrap();
        std::fs::write(dir.join("big.yaml"), vec![b'#'; 64 * 1024 + 1]).unwrap();
        std::fs::write(dir.join("edge.yaml"), vec![b'#'; 64 * 1024]).unwrap();
        std::fs::write(dir.join("latin.yaml"), b"note: caf\xe9\n").unwrap();
        let skipped = read_dir_now(dir).unwrap_err();
        let got: Vec<(&str, &str)> = skipped.iter().map(|e| (e.file.as_str(), e.reason.as_str())).collect();
        assert_eq!(
            got,
            [
                ("big.yaml", "larger than 65536 bytes"),
                ("latin.yaml", "not UTF-8"),
                ("link.yaml", "a symbolic link"),
                ("pipe.yaml", "a named pipe, not a regular file"),
                ("sub.yaml", "a directory, not a regular file"),
            ]
        );
        assert!(skipped.iter().all(|e| e.field == "body" && !e.reason.contains("token")));
    }

    #[test]
    fn reading_the_files_is_no_change() {
        let on = |kind, name: &str| Event::new(kind).add_path(PathBuf::from("/d").join(name));
        let changes_registry = |e: &Event| crate::watched::changes(e, registry_path);
        assert!(changes_registry(&on(EventKind::Create(CreateKind::File), "m.example.net.yaml")));
        assert!(!changes_registry(&on(EventKind::Access(AccessKind::Read), "m.example.net.yaml")));
        assert!(!changes_registry(&on(EventKind::Create(CreateKind::File), ".m.example.net.yaml.tmp")));
    }
}
