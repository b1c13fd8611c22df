//! An HLS manifest body as an edge sends it to the `hls` check (`vantage_probe::hls::newest`,
//! over m3u8-rs): no body panics the prober, and what it reads holds to what the check relies
//! on — only a body that starts with `#EXTM3U` (after a byte-order mark) is a playlist, and a
//! playlist's next URI is text of the body, never empty.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vantage_probe::hls::{Next, newest};

fuzz_target!(|data: &[u8]| {
    let Ok(next) = newest(data) else { return };
    let body = data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data);
    assert!(body.starts_with(b"#EXTM3U"), "read a playlist from a body without the tag");
    let uri = match &next {
        Next::Segment(u) | Next::Variant(u) => u,
    };
    assert!(!uri.is_empty(), "{next:?}");
    let text = String::from_utf8_lossy(body);
    assert!(text.contains(uri.as_str()), "{next:?} is not in the body");
});
