//! Mirror freshness checks, carried out: fetch a mirror's trace file and its reference's, read
//! the time each holds, and hand both readings to the control core, which decides whether the
//! mirror is stale. Nothing here compares the times.

use std::sync::Arc;
use std::time::Duration;

use vantage_control::mirrors::FreshnessCheck;
use vantage_control::mirrors::book::FreshnessReading;
use vantage_core::Timestamp;
use vantage_core::fetch::FetchPolicy;

use crate::app::App;
use crate::owner::Input;

/// Most of a trace file read: its time is on the first line.
const MAX_TRACE_BYTES: usize = 4096;

/// Runs each check in its own task.
pub(crate) fn spawn(app: &Arc<App>, checks: Vec<FreshnessCheck>) {
    for check in checks {
        let app = app.clone();
        tokio::spawn(async move {
            let timeout = Duration::from_secs(u64::from(check.timeout_s.max(1)));
            let policy = app.fetch_policy();
            let (mirror, reference) = tokio::join!(
                fetch(policy, &check.url, check.address, timeout),
                fetch(policy, &check.reference, None, timeout),
            );
            if let Err(e) = &mirror {
                tracing::info!(host = %check.host, error = %e, "mirror freshness: cannot read the trace file");
            }
            let reading = FreshnessReading { mirror, reference };
            app.relay(crate::support::now(), || vantage_control::Relayed::Freshness {
                host: check.host.clone(),
                reading: reading.clone(),
            });
            // Stopping: a reading is no longer wanted.
            let _ = app.owner().tell(Input::Freshness { host: check.host, reading }).await;
        });
    }
}

/// The time a trace file at `url` says, connecting to `pinned` for its host when given, and
/// only where the fetch policy allows (a trace file is fetched where it is: no redirect).
async fn fetch(
    policy: &FetchPolicy,
    url: &str,
    pinned: Option<std::net::SocketAddr>,
    timeout: Duration,
) -> Result<Timestamp, String> {
    let b = reqwest::Client::builder()
        .timeout(timeout)
        .user_agent(concat!("vantage-freshness/", env!("CARGO_PKG_VERSION")));
    let (client, url) = crate::fetch::client_for(policy, url, pinned, b).await?;
    let mut resp =
        client.get(url).header("cache-control", "no-cache").send().await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("status {}", resp.status().as_u16()));
    }
    let last_modified = resp
        .headers()
        .get(reqwest::header::LAST_MODIFIED)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok());
    let mut body = Vec::new();
    while body.len() < MAX_TRACE_BYTES {
        match resp.chunk().await.map_err(|e| e.to_string())? {
            Some(c) => body.extend_from_slice(&c),
            None => break,
        }
    }
    body.truncate(MAX_TRACE_BYTES);
    let text = String::from_utf8_lossy(&body);
    trace_time(&text)
        .or_else(|| last_modified.map(Timestamp::from_system))
        .ok_or_else(|| "neither the body's first line nor Last-Modified is a time".to_owned())
}

/// The time on a trace file's first line: Unix seconds, RFC 3339, an HTTP date, or what
/// `date -u` prints (the Debian mirror trace: `Sat Dec  1 12:00:01 UTC 2026`).
fn trace_time(text: &str) -> Option<Timestamp> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    if let Ok(s) = line.parse::<i64>() {
        return Some(Timestamp::from_secs(s));
    }
    if let Ok(t) = line.parse::<Timestamp>() {
        return Some(t);
    }
    if let Ok(t) = httpdate::parse_http_date(line) {
        return Some(Timestamp::from_system(t));
    }
    let parts: Vec<&str> = line.split_whitespace().collect();
    if let [wday, month, day, time, "UTC" | "GMT", year] = parts.as_slice() {
        let http = format!("{wday}, {day:0>2} {month} {year} {time} GMT");
        return httpdate::parse_http_date(&http).ok().map(Timestamp::from_system);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_times_in_the_formats_mirrors_write() {
        let t = Timestamp::from_secs(1_796_126_401);
        assert_eq!(trace_time("1796126401\n"), Some(t));
        assert_eq!(trace_time("2026-12-01T12:00:01Z\nextra"), Some(t));
        assert_eq!(trace_time("Tue, 01 Dec 2026 12:00:01 GMT"), Some(t));
        assert_eq!(trace_time("\nTue Dec  1 12:00:01 UTC 2026\nDate: ...\n"), Some(t));
        assert_eq!(trace_time("hello"), None);
        assert_eq!(trace_time(""), None);
    }
}
