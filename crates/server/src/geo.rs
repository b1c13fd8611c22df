//! The operator's geo databases (`geo_databases`): read at the start — a file that does not
//! read stops it, naming the file — then watched. A change is read again once the file's
//! directory has been quiet (a database is replaced by a rename, or written in steps), and from
//! then on the DNS answers and the doors place clients with it. A file that no longer reads
//! leaves the last good databases in use: logged, and counted in
//! `vantage_geo_database_reload_failures_total`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use vantage_dns::GeoDb;

use crate::app::App;
use crate::support::stopped;
use crate::watched::Watched;

/// The largest database file read, bytes (GeoLite2-City is about 60 MB, DB-IP's city lite
/// 130 MB).
const MAX_FILE: u64 = 1 << 30;

/// What the files were when read (size, modification time, inode of each; `None` where it
/// could not be told): a watch that starts later reads them again if they have changed since.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Stamp(Vec<Option<(u64, std::time::SystemTime, u64)>>);

impl Stamp {
    /// The files as they are now (on the calling thread: a blocking one).
    fn now(paths: &[PathBuf]) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp(
            paths
                .iter()
                .map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.len(), m.modified().ok()?, m.ino()))))
                .collect(),
        )
    }
}

/// Reads `paths` as one set of databases (`None` for none), on a blocking thread, with their
/// stamp; an error names the file.
pub(crate) async fn read(paths: &[PathBuf]) -> Result<(Option<Arc<GeoDb>>, Stamp), String> {
    if paths.is_empty() {
        return Ok((None, Stamp::default()));
    }
    let paths = paths.to_vec();
    let read = tokio::task::spawn_blocking(move || {
        let stamp = Stamp::now(&paths);
        let files = paths
            .iter()
            .map(|p| read_file(p).map(|b| (p.display().to_string(), b)))
            .collect::<Result<_, _>>()?;
        GeoDb::open(files).map(|db| (Some(Arc::new(db)), stamp))
    });
    read.await.map_err(|e| format!("the geo databases' reading stopped: {e}"))?
}

/// One file: a regular file (a pipe would hold the reading forever), refused beyond
/// [`MAX_FILE`].
fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let name = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{name}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{name}: not a regular file"));
    }
    if meta.len() > MAX_FILE {
        return Err(format!("{name}: larger than {MAX_FILE} bytes, the most a geo database may be"));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE + 1).read_to_end(&mut bytes).map_err(|e| format!("{name}: {e}"))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!("{name}: larger than {MAX_FILE} bytes, the most a geo database may be"));
    }
    Ok(bytes)
}

/// Warns when lines or regions claim places and no geo database is configured: they then claim
/// no client, though they list places.
pub(crate) fn warn_unplaced(app: &App) {
    if !app.settings().geo_databases.is_empty() {
        return;
    }
    let c = app.config();
    let lines = c.lines.values().filter(|l| !l.value.line.places.is_empty()).count();
    let regions = c.regions.values().filter(|r| !r.value.places.is_empty()).count();
    if lines + regions > 0 {
        tracing::warn!(
            lines,
            regions,
            "lines or regions claim countries, continents or ASNs, but no geo_databases are configured: they claim no client by place"
        );
    }
}

/// Watches the directories of the configured files (and of the files their links point to)
/// until `stop`, reading the databases again after each change to one of them; `read` is what
/// the start read.
pub(crate) async fn watch(app: Arc<App>, read_at_start: Stamp, mut stop: watch::Receiver<bool>) {
    let paths = app.settings().geo_databases.clone();
    if paths.is_empty() {
        return;
    }
    // Events name files by the directory watched joined with their name: compared so. A link
    // is watched where it is and where it points (found on a blocking thread).
    let files = paths.clone();
    let Ok(watched) = tokio::task::spawn_blocking(move || {
        let mut watched: Vec<PathBuf> =
            files.iter().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())).collect();
        watched.extend(files.iter().filter_map(|p| std::fs::canonicalize(p).ok()));
        watched.sort();
        watched.dedup();
        watched
    })
    .await
    else {
        return;
    };
    let mut dirs: Vec<&Path> = watched.iter().filter_map(|p| p.parent()).collect();
    dirs.sort();
    dirs.dedup();
    let ours = watched.clone();
    let Some(mut changes) = Watched::dirs(&dirs, "geo databases", move |p| ours.iter().any(|o| o == p))
    else {
        return;
    };
    // A file replaced between the start's reading and this watch raised no event.
    let files = paths.clone();
    if tokio::task::spawn_blocking(move || Stamp::now(&files)).await.ok() != Some(read_at_start) {
        let _ = changes.poke.send(());
    }
    loop {
        tokio::select! {
            burst = changes.burst() => {
                if !burst {
                    return;
                }
                match read(&paths).await {
                    Ok((db, _)) => {
                        tracing::info!(files = paths.len(), "geo databases read again");
                        app.set_geo(db);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "a geo database changed and does not read; the last good ones stay in use");
                        app.metrics().geo_reload_failed();
                    }
                }
            }
            () = stopped(&mut stop) => return,
        }
    }
}
