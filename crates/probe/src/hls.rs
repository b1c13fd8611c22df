//! Reading an HLS manifest and a segment's answer: which URI is the newest media segment,
//! and how old the segment is.
//!
//! Public for the fuzz target in `fuzz/`, which feeds [`newest`] every manifest body it can
//! make: the body is what an edge sends, so nothing in it may panic the prober.

use std::time::{Duration, SystemTime};

use hyper::HeaderMap;
use hyper::header::{DATE, LAST_MODIFIED};
use m3u8_rs::Playlist;

/// What a valid manifest points to next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// A media playlist: its newest (last) media segment.
    Segment(String),
    /// A master playlist: the variant playlist to read instead (the first that is not an
    /// I-frame-only variant, which is where players start).
    Variant(String),
}

/// Reads a manifest body. `Err` says why it is not a usable playlist.
pub fn newest(body: &[u8]) -> Result<Next, String> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    if !body.starts_with(b"#EXTM3U") {
        let shown = String::from_utf8_lossy(&body[..body.len().min(24)]).into_owned();
        return Err(format!("does not start with #EXTM3U (starts with {shown:?})"));
    }
    let next = match m3u8_rs::parse_playlist_res(body) {
        Ok(Playlist::MediaPlaylist(p)) => p
            .segments
            .last()
            .map(|s| Next::Segment(s.uri.clone()))
            .ok_or_else(|| "media playlist without segments".to_owned())?,
        Ok(Playlist::MasterPlaylist(p)) => p
            .variants
            .iter()
            .find(|v| !v.is_i_frame)
            .map(|v| Next::Variant(v.uri.clone()))
            .ok_or_else(|| "master playlist without variants".to_owned())?,
        Err(e) => return Err(format!("not a valid playlist: {e:?}").chars().take(200).collect()),
    };
    // An empty URI resolves to the playlist itself: the check would fetch the manifest again
    // as its segment (or variant) and call it fetchable.
    match &next {
        Next::Segment(u) | Next::Variant(u) if u.trim().is_empty() => {
            Err("names an empty URI for its newest segment or first variant".to_owned())
        }
        _ => Ok(next),
    }
}

/// Age of a segment at `now`: from `Last-Modified`, else `Date`. `None` when neither is there
/// or parses; a date in the future counts as age zero.
pub(crate) fn age(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let when = |name| {
        headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| httpdate::parse_http_date(v).ok())
    };
    let made = when(LAST_MODIFIED).or_else(|| when(DATE))?;
    Some(now.duration_since(made).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn newest_segment_is_the_last_uri() {
        let m = b"#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXTINF:6.0,\na.ts\n#EXTINF:6.0,\nb.ts\n";
        assert_eq!(newest(m), Ok(Next::Segment("b.ts".into())));
        let bom = [b"\xEF\xBB\xBF".as_slice(), m].concat();
        assert_eq!(newest(&bom), Ok(Next::Segment("b.ts".into())));
    }

    #[test]
    fn master_playlist_points_to_its_first_variant() {
        let m = b"#EXTM3U\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1000,URI=\"i.m3u8\"\n#EXT-X-STREAM-INF:BANDWIDTH=1280000\nlow.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=2560000\nhigh.m3u8\n";
        assert_eq!(newest(m), Ok(Next::Variant("low.m3u8".into())));
    }

    #[test]
    fn invalid_and_empty_manifests() {
        assert!(newest(b"<html>").unwrap_err().contains("#EXTM3U"));
        assert!(newest(b" #EXTM3U\n").is_err(), "must start with the tag");
        let empty = b"#EXTM3U\n#EXT-X-TARGETDURATION:6\n";
        assert_eq!(newest(empty), Err("media playlist without segments".into()));
        // Found by fuzzing (fuzz/fuzz_targets/hls_manifest.rs): m3u8-rs reads this master
        // playlist's first variant with an empty URI, which would send the check back to the
        // master playlist itself.
        let blank = b"#EXTM3U\n#EXT-X-I-FRAME-STREAM-INF:BANTWIDTH=UR1,000I=\"iframe.m3u8\"\n#EXT-X-STREAM-INF:BANDWIDTH=1280000,R\xb9SOLUTION=640x360,CODECS=\"avc1.4d401e,mp4a.40.2\"\nlow/index.m3u8\n#EXT-X-STREAM-INF:BADTH=UR1,000I=\"iframe.m3dex.m3u8\n";
        assert!(newest(blank).unwrap_err().contains("empty URI"));
    }

    #[test]
    fn age_prefers_last_modified_then_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let date = |t: SystemTime| HeaderValue::from_str(&httpdate::fmt_http_date(t)).unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(age(&h, now), None, "unknown age");
        h.insert(DATE, date(now - Duration::from_secs(5)));
        assert_eq!(age(&h, now), Some(Duration::from_secs(5)));
        h.insert(LAST_MODIFIED, date(now - Duration::from_secs(40)));
        assert_eq!(age(&h, now), Some(Duration::from_secs(40)));
        h.insert(LAST_MODIFIED, date(now + Duration::from_secs(40)));
        assert_eq!(age(&h, now), Some(Duration::ZERO), "clock skew is not age");
        h.insert(LAST_MODIFIED, HeaderValue::from_static("yesterday"));
        assert_eq!(age(&h, now), Some(Duration::from_secs(5)), "unparsable: Date");
    }
}
