//! The HLS origin behaviour: a set of live playlists, each exercising one outcome of an
//! `hls` check, and their segments.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CACHE_CONTROL, CONTENT_RANGE, CONTENT_TYPE, DATE, HeaderValue, LAST_MODIFIED};
use hyper::{Response, StatusCode};

/// Manifest paths served by [`crate::Behavior::Hls`].
pub mod paths {
    /// Three segments; the newest was made 2 s ago (`Last-Modified`).
    pub const FRESH: &str = "/live/fresh.m3u8";
    /// The newest segment was made 10 minutes ago (`Last-Modified`).
    pub const STALE: &str = "/live/stale.m3u8";
    /// Segments carry neither `Last-Modified` nor `Date`: their age is unknown.
    pub const UNDATED: &str = "/live/undated.m3u8";
    /// Segments carry no `Last-Modified`, and a `Date` 10 minutes old.
    pub const DATE_ONLY: &str = "/live/dated.m3u8";
    /// A valid playlist without any media segment.
    pub const EMPTY: &str = "/live/empty.m3u8";
    /// Not a playlist at all (an HTML page).
    pub const INVALID: &str = "/live/invalid.m3u8";
    /// The newest segment answers 404.
    pub const MISSING_SEGMENT: &str = "/live/missing.m3u8";
    /// A master playlist whose only variant is [`FRESH`].
    pub const MASTER: &str = "/live/master.m3u8";
}

/// Age of the newest fresh segment.
const FRESH_AGE: Duration = Duration::from_secs(2);
/// Age of stale segments and of the old `Date`.
const STALE_AGE: Duration = Duration::from_secs(600);
/// Size of every segment.
const SEGMENT_LEN: usize = 4096;

type Resp = Response<Full<Bytes>>;

/// Answers one request of the origin.
pub(crate) fn respond(path: &str, range: Option<&str>, now: SystemTime) -> Resp {
    let playlist = |kind: &str| {
        let mut body =
            String::from("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:1\n");
        for n in 1..=3 {
            body.push_str(&format!("#EXTINF:6.000,\n{kind}/{n}.ts\n"));
        }
        manifest(body, now)
    };
    match path {
        paths::FRESH => playlist("fresh"),
        paths::STALE => playlist("stale"),
        paths::UNDATED => playlist("undated"),
        paths::DATE_ONLY => playlist("dated"),
        paths::MISSING_SEGMENT => playlist("missing"),
        paths::EMPTY => manifest("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n".to_owned(), now),
        paths::INVALID => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"<html><body>Welcome</body></html>\n")));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
            r
        }
        paths::MASTER => manifest(
            "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000,RESOLUTION=1280x720\nfresh.m3u8\n".to_owned(),
            now,
        ),
        other => segment(other, range, now),
    }
}

fn manifest(body: String, now: SystemTime) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/vnd.apple.mpegurl"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(DATE, http_date(now));
    r
}

/// `/live/<kind>/<n>.ts`.
fn segment(path: &str, range: Option<&str>, now: SystemTime) -> Resp {
    let Some((kind, n)) =
        path.strip_prefix("/live/").and_then(|p| p.strip_suffix(".ts")).and_then(|p| p.split_once('/'))
    else {
        return not_found();
    };
    let (last_modified, date) = match kind {
        "fresh" => (Some(now - FRESH_AGE), Some(now)),
        "stale" => (Some(now - STALE_AGE), Some(now)),
        "undated" => (None, None),
        "dated" => (None, Some(now - STALE_AGE)),
        "missing" if n == "3" => return not_found(),
        "missing" => (Some(now), Some(now)),
        _ => return not_found(),
    };
    let data = vec![0x47u8; SEGMENT_LEN];
    let mut r = match range.and_then(parse_range) {
        Some((first, last)) if first < SEGMENT_LEN => {
            let last = last.min(SEGMENT_LEN - 1);
            let mut r = Response::new(Full::new(Bytes::copy_from_slice(&data[first..=last])));
            *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            let cr = format!("bytes {first}-{last}/{SEGMENT_LEN}");
            // Digits, spaces, a dash and a slash: always a valid header value.
            r.headers_mut().insert(CONTENT_RANGE, HeaderValue::from_str(&cr).expect("ASCII"));
            r
        }
        _ => Response::new(Full::new(Bytes::from(data))),
    };
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("video/mp2t"));
    if let Some(t) = last_modified {
        h.insert(LAST_MODIFIED, http_date(t));
    }
    if let Some(t) = date {
        h.insert(DATE, http_date(t));
    }
    r
}

fn not_found() -> Resp {
    let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")));
    *r.status_mut() = StatusCode::NOT_FOUND;
    r
}

/// `bytes=a-b` (the only form a prober sends).
fn parse_range(v: &str) -> Option<(usize, usize)> {
    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
    let first = a.trim().parse().ok()?;
    let last = b.trim().parse().ok()?;
    (first <= last).then_some((first, last))
}

fn http_date(t: SystemTime) -> HeaderValue {
    // An IMF-fixdate is letters, digits, spaces, commas and colons: a valid header value.
    HeaderValue::from_str(&httpdate::fmt_http_date(t)).expect("ASCII")
}
