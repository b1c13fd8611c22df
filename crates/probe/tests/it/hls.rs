//! The `hls` method against the testkit's HLS origin: every outcome of a manifest, a segment
//! and its age.

use std::time::Duration;

use vantage_core::check::CheckInput;
use vantage_core::result::{ErrorCode, HlsDetail, Stages};
use vantage_probe::{AttemptReport, Method, ProbeTarget, attempt};
use vantage_testkit::{Behavior, EdgeOptions, EdgeServer, any_loopback, hls_paths};

use crate::check;

const T: Duration = Duration::from_secs(2);

async fn origin() -> EdgeServer {
    EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Hls)).await.unwrap()
}

async fn probe(server: &EdgeServer, path: &str, max_age_s: Option<u32>) -> AttemptReport {
    let c = check(CheckInput { method: Some(Method::Hls), max_age_s, ..Default::default() });
    let t = ProbeTarget::from_url("m", &server.url(path), c).await.unwrap();
    assert_eq!(t.method, Method::Hls);
    attempt(&t, T).await
}

fn age(r: &AttemptReport) -> f64 {
    r.hls.unwrap().segment_age_s.expect("known age")
}

#[tokio::test]
async fn fresh_segment_is_good_with_its_age() {
    let server = origin().await;
    let r = probe(&server, hls_paths::FRESH, Some(30)).await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.stages, Stages::ALL);
    let h = r.hls.unwrap();
    assert!(h.reachable && h.manifest_valid && h.segment_fetchable);
    assert!((1.0..=10.0).contains(&age(&r)), "{h:?}");
    assert!(h.ttfb_ms.unwrap() > 0.0);
    let seg = r.segment.unwrap();
    assert!(seg.url.ends_with("/live/fresh/3.ts"), "newest = last URI: {seg:?}");
    assert_eq!(seg.status, Some(206));

    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].target, hls_paths::FRESH);
    assert_eq!(seen[0].header("cache-control"), Some("no-cache"));
    assert_eq!(seen[1].target, "/live/fresh/3.ts");
    assert_eq!(seen[1].header("range"), Some("bytes=0-1023"));
    let host = server.addr().to_string();
    assert_eq!(seen[1].header("host"), Some(host.as_str()));
}

#[tokio::test]
async fn old_segment_is_stale_only_with_a_max_age() {
    let server = origin().await;
    let r = probe(&server, hls_paths::STALE, Some(30)).await;
    assert_eq!(r.error, Some(ErrorCode::Stale), "{r:?}");
    assert_eq!(r.stages, Stages::CONNECTED.with(Stages::SENT).with(Stages::RECEIVED));
    assert!((590.0..=700.0).contains(&age(&r)));
    assert!(r.hls.unwrap().segment_fetchable);
    let r = probe(&server, hls_paths::STALE, None).await;
    assert_eq!(r.error, None, "no max age: age is reported, not judged");
    assert!(age(&r) >= 590.0);
}

#[tokio::test]
async fn age_falls_back_to_date_and_unknown_age_is_not_a_failure() {
    let server = origin().await;
    let r = probe(&server, hls_paths::DATE_ONLY, Some(30)).await;
    assert_eq!(r.error, Some(ErrorCode::Stale), "{r:?}");
    assert!((590.0..=700.0).contains(&age(&r)));

    let r = probe(&server, hls_paths::UNDATED, Some(30)).await;
    assert_eq!(r.error, None, "{r:?}");
    let h = r.hls.unwrap();
    assert_eq!(h.segment_age_s, None);
    assert!(h.segment_fetchable);
}

#[tokio::test]
async fn manifests_without_segments_or_not_playlists_are_manifest() {
    for path in [hls_paths::EMPTY, hls_paths::INVALID] {
        let server = origin().await;
        let r = probe(&server, path, Some(30)).await;
        assert_eq!(r.error, Some(ErrorCode::Manifest), "{path}: {r:?}");
        let h = r.hls.unwrap();
        assert!(h.reachable && !h.manifest_valid && !h.segment_fetchable, "{h:?}");
        assert!(r.stages.contains(Stages::RECEIVED));
        assert_eq!(server.requests().len(), 1, "no segment request");
    }
}

#[tokio::test]
async fn missing_segment_is_segment() {
    let server = origin().await;
    let r = probe(&server, hls_paths::MISSING_SEGMENT, Some(30)).await;
    assert_eq!(r.error, Some(ErrorCode::Segment), "{r:?}");
    let h = r.hls.unwrap();
    assert!(h.manifest_valid && !h.segment_fetchable);
    assert_eq!(r.segment.unwrap().status, Some(404));
}

#[tokio::test]
async fn manifest_with_a_bad_status_is_status() {
    let server = origin().await;
    let r = probe(&server, "/live/nothing-here.m3u8", Some(30)).await;
    assert_eq!(r.error, Some(ErrorCode::Status), "{r:?}");
    assert_eq!(r.status, Some(404));
}

#[tokio::test]
async fn master_playlist_is_followed_to_its_variant() {
    let server = origin().await;
    let r = probe(&server, hls_paths::MASTER, Some(30)).await;
    assert_eq!(r.error, None, "{r:?}");
    assert!(r.segment.unwrap().url.ends_with("/live/fresh/3.ts"));
    let targets: Vec<String> = server.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(targets, [hls_paths::MASTER, hls_paths::FRESH, "/live/fresh/3.ts"]);
}

#[tokio::test]
async fn hls_over_tls_and_behind_proxy_protocol() {
    let server = EdgeServer::start_with(
        any_loopback(),
        EdgeOptions::new(Behavior::Hls).with_self_signed_tls().unwrap().with_proxy_v1(),
    )
    .await
    .unwrap();
    let c = check(CheckInput { method: Some(Method::Hls), max_age_s: Some(30), ..Default::default() });
    let mut t = ProbeTarget::from_url("m", &server.url(hls_paths::FRESH), c).await.unwrap();
    assert!(t.uses_tls());
    t.proxy_v1 = true;
    let r = attempt(&t, T).await;
    assert_eq!(r.error, None, "{r:?}");
    assert!(r.timings.tls.is_some());
    assert_eq!(server.proxy_headers().len(), 2, "manifest and segment connections");
    assert_eq!(server.sni().len(), 2);
}

#[tokio::test]
async fn silent_edge_times_out_with_the_tuple_so_far() {
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Silent)).await.unwrap();
    let c = check(CheckInput { method: Some(Method::Hls), ..Default::default() });
    let t = ProbeTarget::from_url("m", &server.url(hls_paths::FRESH), c).await.unwrap();
    let r = attempt(&t, Duration::from_millis(300)).await;
    assert_eq!(r.error, Some(ErrorCode::Timeout), "{r:?}");
    assert_eq!(r.hls, Some(HlsDetail { reachable: true, ..HlsDetail::default() }));
}

/// A playlist served from one origin that names a segment on another (here another port of
/// the same host, an internal service, say): the prober does not fetch it unless the monitor
/// lists that host, and says why.
#[tokio::test]
async fn a_playlist_cannot_send_the_prober_to_another_origin() {
    let internal = EdgeServer::start(any_loopback()).await.unwrap();
    let playlist = format!(
        "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:1\n#EXTINF:2,\n{}\n",
        internal.url("/internal/secret.ts")
    );
    let options = EdgeOptions { body: playlist.into(), ..EdgeOptions::new(Behavior::Health) };
    let origin = EdgeServer::start_with(any_loopback(), options).await.unwrap();
    let r = probe(&origin, "/live.m3u8", None).await;
    assert_eq!(r.error, Some(ErrorCode::Policy), "{r:?}");
    let detail = r.detail.unwrap();
    assert!(
        detail.contains("is not on the playlist's origin") && detail.contains("allowed_hosts"),
        "{detail}"
    );
    assert!(internal.requests().is_empty(), "the other origin got {:?}", internal.requests());

    // Listed (a CDN's segment host): fetched.
    let c = check(CheckInput { method: Some(Method::Hls), ..Default::default() });
    let t = ProbeTarget::from_url("m", &origin.url("/live.m3u8"), c).await.unwrap();
    let t = ProbeTarget { allowed_hosts: vec![internal.addr().to_string()], ..t };
    let r = attempt(&t, T).await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(internal.requests().len(), 1);
}
