//! Following the server's event stream (`GET /v1/events/stream`, server-sent events):
//! `vantage ctl events --follow` and the demo's narrator read it the same way, and resume
//! after the last event they saw whenever the connection drops or goes quiet.

use std::time::Duration;

use anyhow::{Context, anyhow};
use vantage_control::events::FleetEvent;
use vantage_server::views::EventGap;

/// The server sends a keep-alive every 15 s: this long without a byte means the connection
/// is gone, whatever TCP thinks.
const QUIET: Duration = Duration::from_secs(45);
/// Connecting and the answer's head: the stream's body may last for ever, not these.
const HEAD: Duration = Duration::from_secs(15);
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

/// What the stream brings.
#[derive(Debug)]
pub(crate) enum Streamed {
    Event(FleetEvent),
    /// Events may be missing before the next one.
    Gap(EventGap),
}

/// Calls `each` with every event after `after`, in order: a stream that fails is opened
/// again from the last event seen, and `dropped` hears why. Ends only when the server refuses
/// the token (revoked), with why.
pub(crate) async fn follow(
    src: &Source,
    mut after: Option<u64>,
    mut each: impl FnMut(Streamed),
    mut dropped: impl FnMut(&anyhow::Error),
) -> anyhow::Error {
    loop {
        match read(src, &mut after, &mut each).await {
            Err(Ended::Refused(e)) => return e,
            Err(Ended::Dropped(e)) => dropped(&e),
            Ok(()) => {}
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Why a connection ended.
enum Ended {
    /// Opening it again may work.
    Dropped(anyhow::Error),
    /// The server refuses the token: opening it again will not work.
    Refused(anyhow::Error),
}

impl From<anyhow::Error> for Ended {
    fn from(e: anyhow::Error) -> Ended {
        Ended::Dropped(e)
    }
}

/// One connection: reads events until it ends, and keeps `after` at the last one read.
async fn read(src: &Source, after: &mut Option<u64>, each: &mut impl FnMut(Streamed)) -> Result<(), Ended> {
    let url = format!("{}/v1/events/stream?{}", src.base, src.query);
    let mut req = src.http.get(&url).bearer_auth(&src.token).header("accept", "text/event-stream");
    if let Some(id) = *after {
        req = req.header("last-event-id", id.to_string());
    }
    let reach = || format!("cannot reach the server at {}", src.base);
    let mut resp = match tokio::time::timeout(HEAD, req.send()).await {
        Err(_) => return Err(anyhow!("{}: no answer in {} s", reach(), HEAD.as_secs()).into()),
        Ok(r) => r.with_context(reach)?,
    };
    let status = resp.status();
    if !status.is_success() {
        let body =
            tokio::time::timeout(HEAD, resp.text()).await.ok().and_then(Result::ok).unwrap_or_default();
        let e = anyhow!("{status}: {body}");
        return Err(match status.as_u16() {
            401 | 403 => Ended::Refused(e),
            _ => Ended::Dropped(e),
        });
    }
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(QUIET, resp.chunk()).await {
            Err(_) => return Err(anyhow!("the stream was quiet for {} s", QUIET.as_secs()).into()),
            Ok(chunk) => chunk.context("the stream broke off")?,
        };
        let Some(chunk) = chunk else { return Err(anyhow!("the server closed the stream").into()) };
        buf.extend_from_slice(&chunk);
        while let Some(end) = find_blank_line(&buf) {
            let block: Vec<u8> = buf.drain(..end).collect();
            if let Some(s) = parse_block(&block) {
                *after = Some(match &s {
                    Streamed::Event(e) => e.id,
                    Streamed::Gap(g) => g.resume,
                });
                each(s);
            }
        }
        if buf.len() > 1 << 20 {
            return Err(anyhow!("an event of more than 1 MiB").into());
        }
    }
}

/// Where the first event block ends (after its blank line).
fn find_blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2)
}

/// The event in one block: its `data:` lines joined, a `gap` by its `event:` field (comments
/// and other fields ignored).
fn parse_block(block: &[u8]) -> Option<Streamed> {
    let text = std::str::from_utf8(block).ok()?;
    let field = |name: &'static str| {
        text.lines().filter_map(move |l| l.strip_prefix(name)).map(|d| d.strip_prefix(' ').unwrap_or(d))
    };
    let data: Vec<&str> = field("data:").collect();
    if data.is_empty() {
        return None;
    }
    let data = data.join("\n");
    if field("event:").any(|k| k == "gap") {
        return serde_json::from_str(&data).ok().map(Streamed::Gap);
    }
    serde_json::from_str(&data).ok().map(Streamed::Event)
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
        let Some(Streamed::Event(ev)) = parse_block(&buf[first..second]) else { panic!("an event") };
        assert_eq!((ev.id, ev.summary.as_str()), (7, "revision 4"));
        assert!(find_blank_line(&buf[second..]).is_none(), "an unfinished block waits for more");
        let gap =
            "id: 40\nevent: gap\ndata: {\"after\":12,\"resume\":40,\"reason\":\"past the retention\"}\n\n";
        let Some(Streamed::Gap(g)) = parse_block(gap.as_bytes()) else { panic!("a gap") };
        assert_eq!((g.after, g.resume), (12, 40));
    }
}
