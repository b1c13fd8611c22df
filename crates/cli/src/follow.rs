//! Following the server's event stream (`GET /v1/events/stream`, server-sent events):
//! `vantage ctl events --follow` and the demo's narrator read it the same way, and resume
//! after the last event they saw whenever the connection drops or goes quiet.

use std::time::Duration;

use anyhow::{Context, bail};
use vantage_control::events::FleetEvent;

/// The server sends a keep-alive every 15 s: this long without a byte means the connection
/// is gone, whatever TCP thinks.
const QUIET: Duration = Duration::from_secs(45);
/// A dropped stream is opened again after this long.
const RETRY: Duration = Duration::from_secs(1);

/// Where the stream comes from.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    /// A client without a whole-request timeout (a stream has no end).
    pub(crate) http: reqwest::Client,
    /// `http://127.0.0.1:7070`.
    pub(crate) base: String,
    pub(crate) token: String,
    /// Filters, already encoded (`cluster=3&kind=revision`), or empty.
    pub(crate) query: String,
}

/// Calls `each` with every event after `after`, in order, for ever: a stream that fails is
/// opened again from the last event seen, and `dropped` hears why.
pub(crate) async fn follow(
    src: &Source,
    mut after: Option<u64>,
    mut each: impl FnMut(FleetEvent),
    mut dropped: impl FnMut(&anyhow::Error),
) {
    loop {
        if let Err(e) = read(src, &mut after, &mut each).await {
            dropped(&e);
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// One connection: reads events until it ends, and keeps `after` at the last one read.
async fn read(
    src: &Source,
    after: &mut Option<u64>,
    each: &mut impl FnMut(FleetEvent),
) -> anyhow::Result<()> {
    let url = format!("{}/v1/events/stream?{}", src.base, src.query);
    let mut req = src.http.get(&url).bearer_auth(&src.token).header("accept", "text/event-stream");
    if let Some(id) = *after {
        req = req.header("last-event-id", id.to_string());
    }
    let mut resp = req.send().await.with_context(|| format!("cannot reach the server at {}", src.base))?;
    if !resp.status().is_success() {
        let status = resp.status();
        bail!("{status}: {}", resp.text().await.unwrap_or_default());
    }
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(QUIET, resp.chunk()).await {
            Err(_) => bail!("the stream was quiet for {} s", QUIET.as_secs()),
            Ok(chunk) => chunk.context("the stream broke off")?,
        };
        let Some(chunk) = chunk else { bail!("the server closed the stream") };
        buf.extend_from_slice(&chunk);
        while let Some(end) = find_blank_line(&buf) {
            let block: Vec<u8> = buf.drain(..end).collect();
            if let Some(e) = parse_block(&block) {
                *after = Some(e.id);
                each(e);
            }
        }
        if buf.len() > 1 << 20 {
            bail!("an event of more than 1 MiB");
        }
    }
}

/// Where the first event block ends (after its blank line).
fn find_blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2)
}

/// The event in one block: its `data:` lines joined (comments and other fields ignored).
fn parse_block(block: &[u8]) -> Option<FleetEvent> {
    let text = std::str::from_utf8(block).ok()?;
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() {
        return None;
    }
    serde_json::from_str(&data.join("\n")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_on_blank_lines_and_comments_carry_no_event() {
        let e = r#"{"id":7,"at":"2026-12-01T20:00:00Z","kind":"revision","cluster":3,"node":null,"summary":"revision 4","details":{}}"#;
        let text = format!(": keep-alive\n\nid: 7\nevent: revision\ndata: {e}\n\nid: 8\n");
        let buf = text.as_bytes();
        let first = find_blank_line(buf).unwrap();
        assert!(parse_block(&buf[..first]).is_none(), "a comment is no event");
        let second = first + find_blank_line(&buf[first..]).unwrap();
        let ev = parse_block(&buf[first..second]).unwrap();
        assert_eq!((ev.id, ev.summary.as_str()), (7, "revision 4"));
        assert!(find_blank_line(&buf[second..]).is_none(), "an unfinished block waits for more");
    }
}
