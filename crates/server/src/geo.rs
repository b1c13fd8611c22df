//! The operator's geo databases (`geo_databases`): read at the start — a file that does not
//! read stops it, naming the file — then watched. A change is read again once the file's
//! directory has been quiet (a database is replaced by a rename, or written in steps), and from
//! then on the DNS answers and the doors place clients with it. A file that no longer reads
//! leaves the last good databases in use: logged, and counted in
//! `vantage_geo_database_reload_failures`.

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

/// Reads `paths` as one set of databases (`None` for none), on a blocking thread; an error
/// names the file.
pub(crate) async fn read(paths: &[PathBuf]) -> Result<Option<Arc<GeoDb>>, String> {
    if paths.is_empty() {
        return Ok(None);
    }
    let paths = paths.to_vec();
    let read = tokio::task::spawn_blocking(move || {
        let files = paths
            .iter()
            .map(|p| read_file(p).map(|b| (p.display().to_string(), b)))
            .collect::<Result<_, _>>()?;
        GeoDb::open(files).map(|db| Some(Arc::new(db)))
    });
    read.await.map_err(|e| format!("the geo databases' reading stopped: {e}"))?
}

/// One file, refused beyond [`MAX_FILE`].
fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1).read_to_end(&mut bytes).map_err(|e| format!("{name}: {e}"))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!("{name}: larger than {MAX_FILE} bytes, the most a geo database may be"));
    }
    Ok(bytes)
}

/// Watches the directories of the configured files until `stop`, reading the databases again
/// after each change to one of them.
pub(crate) async fn watch(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    let paths = app.settings().geo_databases.clone();
    if paths.is_empty() {
        return;
    }
    // Events name files by the directory watched joined with their name: compared so.
    let watched: Vec<PathBuf> =
        paths.iter().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())).collect();
    let mut dirs: Vec<&Path> = watched.iter().filter_map(|p| p.parent()).collect();
    dirs.sort();
    dirs.dedup();
    let ours = watched.clone();
    let Some(mut changes) = Watched::dirs(&dirs, "geo databases", move |p| ours.iter().any(|o| o == p))
    else {
        return;
    };
    loop {
        tokio::select! {
            burst = changes.burst() => {
                if !burst {
                    return;
                }
                match read(&paths).await {
                    Ok(db) => {
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
