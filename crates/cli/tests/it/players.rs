//! Real players following `/steer`: headless Chromium plays a live stream that `ffmpeg` makes
//! during the test, served by two local origins as the pathways `cdn-a` and `cdn-b`, with
//! hls.js from npm (`crates/cli/tests/players`, installed by `.ci/run`) reading Vantage's
//! steering manifest from another origin.
//!
//! The player's own manifest names `cdn-a` its default pathway; Vantage, whose probers see
//! only `cdn-b` so far, puts `cdn-b` first, and the player plays from there — it follows the
//! steering manifest, not its own errors (`cdn-a` serves it well). Then both are healthy and nothing moves; `cdn-b` stops, and
//! playback is on `cdn-a` within one TTL and a segment of Vantage's order changing, without
//! stalling longer than the player's buffer. (That two healthy pathways with TTFB noise keep
//! their order for five minutes is `vantage_core::steering`'s test, on a virtual clock.)

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::harness::ServerProcess;
use crate::ui::{BROWSER, Browser};

/// The steering manifest's TTL, s: how often players reload it.
const TTL_S: u64 = 2;
/// The stream's segment duration, s.
const SEGMENT_S: u64 = 1;
/// A whole scenario may take this long at most.
const SCENARIO: Duration = Duration::from_secs(180);

/// Milliseconds since the epoch (the page logs `Date.now()`).
fn epoch_ms() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

/// A static file server on 127.0.0.1 with CORS open to every origin, as a CDN serving a
/// player on another site is; while `down`, it resets every connection.
struct Files {
    addr: SocketAddr,
    down: Arc<AtomicBool>,
}

/// A manifest served with some elements added after its root element's opening tag: what a
/// packager's live MPD becomes once its pathways and steering server are known.
#[derive(Clone)]
struct Amended {
    /// The path it is served at (without the leading `/`).
    path: String,
    /// The file `ffmpeg` keeps rewriting.
    file: PathBuf,
    insert: String,
}

impl Files {
    async fn start(root: PathBuf) -> Files {
        Files::start_amending(root, None).await
    }

    async fn start_amending(root: PathBuf, amended: Option<Amended>) -> Files {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let down = Arc::new(AtomicBool::new(false));
        let is_down = down.clone();
        tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else { return };
                if is_down.load(Ordering::Relaxed) {
                    let _ = socket2::SockRef::from(&conn).set_linger(Some(Duration::ZERO));
                    continue;
                }
                let (root, amended) = (root.clone(), amended.clone());
                tokio::spawn(async move {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), answer(conn, &root, amended.as_ref()))
                            .await;
                });
            }
        });
        Files { addr, down }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// `text` with `insert` after the opening tag of its root element.
fn amend(text: &str, insert: &str) -> Option<String> {
    let root = text.find("<MPD")?;
    let end = root + text[root..].find('>')? + 1;
    Some(format!("{}\n{insert}{}", &text[..end], &text[end..]))
}

/// Answers one request on `conn` from the files under `root` (or the amended manifest),
/// then closes.
async fn answer(mut conn: tokio::net::TcpStream, root: &Path, amended: Option<&Amended>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 16 << 10 {
            return;
        }
    }
    let line = String::from_utf8_lossy(head.split(|b| *b == b'\r').next().unwrap_or_default()).into_owned();
    let target = line.split(' ').nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/").trim_start_matches('/');
    let file = (!path.split('/').any(|p| p == "..")).then(|| root.join(path));
    let amended = amended.filter(|a| a.path == path).and_then(|a| {
        amend(&std::fs::read_to_string(&a.file).ok()?, &a.insert).map(|t| (200, t.into_bytes(), None))
    });
    let (status, body, modified) = match (amended, file) {
        (Some(answer), _) => answer,
        (None, file) => match file {
            Some(f) => match tokio::fs::read(&f).await {
                Ok(body) => (200, body, std::fs::metadata(&f).and_then(|m| m.modified()).ok()),
                Err(_) => (404, b"not found".to_vec(), None),
            },
            None => (404, b"not found".to_vec(), None),
        },
    };
    let kind = match path.rsplit('.').next() {
        Some("m3u8") => "application/vnd.apple.mpegurl",
        Some("ts") => "video/mp2t",
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("mpd") => "application/dash+xml",
        Some("m4s") => "video/iso.segment",
        _ => "application/octet-stream",
    };
    let modified =
        modified.map(|t| format!("Last-Modified: {}\r\n", httpdate::fmt_http_date(t))).unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{modified}\
         Access-Control-Allow-Origin: *\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
        if status == 200 { "OK" } else { "Not Found" },
        body.len()
    );
    let _ = conn.write_all(head.as_bytes()).await;
    let _ = conn.write_all(&body).await;
}

/// The encoding of every output: H.264 baseline, one key frame per segment.
const H264: [&str; 20] = [
    "-map",
    "0:v",
    "-c:v",
    "libx264",
    "-preset",
    "ultrafast",
    "-tune",
    "zerolatency",
    "-profile:v",
    "baseline",
    "-pix_fmt",
    "yuv420p",
    "-g",
    "25",
    "-keyint_min",
    "25",
    "-sc_threshold",
    "0",
    "-b:v",
    "300k",
];

/// `ffmpeg` making a live stream in real time, as HLS in `dir/hls` and as DASH in `dir/dash`
/// (1 s segments, six in the playlist and the MPD's window); ended when dropped.
async fn live_stream(dir: &Path) -> tokio::process::Child {
    std::fs::create_dir_all(dir.join("hls")).unwrap();
    std::fs::create_dir_all(dir.join("dash")).unwrap();
    let segment = SEGMENT_S.to_string();
    let child = tokio::process::Command::new("ffmpeg")
        .current_dir(dir)
        .args([
            "-hide_banner",
            "-loglevel",
            "error",
            "-re",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=320x180:rate=25",
        ])
        .args(H264)
        .args(["-f", "hls", "-hls_time", &segment, "-hls_list_size", "6"])
        .args(["-hls_flags", "delete_segments+independent_segments"])
        .args(["-hls_segment_filename", "hls/seg%05d.ts", "hls/live.m3u8"])
        .args(H264)
        .args(["-f", "dash", "-seg_duration", &segment, "-window_size", "6", "-extra_window_size", "4"])
        .args(["-use_template", "1", "-use_timeline", "0", "-init_seg_name", "init-$RepresentationID$.m4s"])
        .args(["-media_seg_name", "chunk-$RepresentationID$-$Number%05d$.m4s", "dash/live.mpd"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("ffmpeg.log")).unwrap())
        .kill_on_drop(true)
        .spawn()
        .expect("ffmpeg runs (Debian package ffmpeg, in .ci/packages)");
    let started = Instant::now();
    let segments = |dir: &Path| std::fs::read_dir(dir).map_or(0, |d| d.filter(|e| e.is_ok()).count());
    while std::fs::read_to_string(dir.join("hls/live.m3u8")).map_or(0, |p| p.matches("#EXTINF").count()) < 3
        || segments(&dir.join("dash")) < 4
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "ffmpeg made no stream: {}",
            std::fs::read_to_string(dir.join("ffmpeg.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    child
}

/// A player's page: `script` (the player) playing muted what `player` (JavaScript) sets up,
/// logging to `window.log` (`note`) the steering manifests and fragments it loads and, every
/// 200 ms, the playback position and the buffer ahead of it.
fn page(script: &str, player: &str) -> String {
    format!(
        r#"<!doctype html>
<html><body>
<video id="v" muted autoplay playsinline width="320" height="180"></video>
<script src="{script}"></script>
<script>
window.log = [];
const note = (kind, detail) => window.log.push({{t: Date.now(), kind, detail}});
const v = document.getElementById('v');
{player}
setInterval(() => {{
  const b = v.buffered;
  const ahead = b.length ? b.end(b.length - 1) - v.currentTime : 0;
  note('tick', {{time: v.currentTime, ahead}});
}}, 200);
</script>
</body></html>
"#
    )
}

/// hls.js playing `master.m3u8`, as shipped, with the video attached once the first steering
/// manifest is in: the page's way of asking the steering server before the first segment, as
/// the MPD's `queryBeforeStart` does for dash.js. (Attached at once, hls.js 1.7.4 fetched the
/// default pathway's first segment while the steering manifest was on its way; in about one
/// run in ten, the switch to `cdn-b` landing during that fetch left it loading nothing more.)
/// Its own log lines about pathways and level switches go to the page's log (the failure
/// message prints its tail).
const HLS_PLAYER: &str = r#"const keep = (...a) => {
  const m = a.map(String).join(' ');
  // Not the live playlist's reload every second, nor each steering request (its load is
  // noted): they would push what matters out of the tail a failure prints.
  if (/Pathway|Switching to level|steering/i.test(m) && !/ age [0-9.]+ |Requesting steering/.test(m)) {
    note('hls', m);
  }
};
const hls = new Hls({debug: {debug: keep, log: keep, info: keep, warn: keep, error: keep}});
hls.on(Hls.Events.LEVEL_SWITCHING, (e, d) => note('switching', d.level + ' ' + d.url));
hls.on(Hls.Events.STEERING_MANIFEST_LOADED, (e, d) =>
  note('steer', d.steeringManifest['PATHWAY-PRIORITY'].join(',')));
hls.on(Hls.Events.FRAG_LOADED, (e, d) => note('frag', d.frag.url));
hls.on(Hls.Events.LEVEL_LOADED, (e, d) => note('level', d.details.url));
hls.on(Hls.Events.BUFFER_APPENDED, (e, d) => note('appended', d.type));
hls.on(Hls.Events.ERROR, (e, d) => note('error', d.details + (d.fatal ? ' (fatal)' : '')));
// Once hls.js has taken up the manifest's order, which it does just after firing the event.
hls.once(Hls.Events.STEERING_MANIFEST_LOADED, () => setTimeout(() => {
  hls.attachMedia(v);
  v.play().catch(e => note('error', String(e)));
}, 0));
hls.loadSource('master.m3u8');"#;

/// dash.js playing `live.mpd`. Its clock is the machine's (no time server is asked: nothing
/// leaves loopback). It plays four segments behind the live edge, as hls.js does three target
/// durations by default (dash.js's own default hugs the edge of a stream with 1 s segments,
/// with no buffer to ride out any origin's failure).
const DASH_PLAYER: &str = r#"const player = dashjs.MediaPlayer().create();
player.updateSettings({streaming: {
  utcSynchronization: {enabled: false,
    defaultTimingSource: {scheme: 'urn:mpeg:dash:utc:direct:2014', value: new Date().toISOString()}},
  delay: {liveDelay: 4},
}});
const E = dashjs.MediaPlayer.events;
player.on(E.CONTENT_STEERING_REQUEST_COMPLETED, e =>
  note('steer', ((e.currentSteeringResponseData || {}).pathwayPriority || []).join(',')));
player.on(E.FRAGMENT_LOADING_COMPLETED, e => {
  if (e.request && e.request.type === 'MediaSegment') note('frag', e.request.url);
});
player.on(E.ERROR, e => note('error', JSON.stringify(e.error && (e.error.message || e.error.code))));
player.initialize(v, 'live.mpd', true);"#;

/// A player under test, and how its page and manifest are made.
#[derive(Clone, Copy)]
enum Player {
    HlsJs,
    DashJs,
}

impl Player {
    fn name(self) -> &'static str {
        match self {
            Player::HlsJs => "hls.js",
            Player::DashJs => "dash.js",
        }
    }

    /// The player's script in `node_modules`, and the name the page loads it by.
    fn script(self) -> (&'static str, &'static str) {
        match self {
            Player::HlsJs => ("hls.js/dist/hls.min.js", "hls.min.js"),
            Player::DashJs => ("dashjs/dist/modern/umd/dash.all.min.js", "dash.all.min.js"),
        }
    }

    /// The page's site, serving the page, the player and the manifest that starts it on
    /// `cdn-a` (origin `a`) with `cdn-b` (origin `b`) beside it and Vantage's steering.
    async fn site(self, dir: &Path, media: &Path, steer: &str, a: &Files, b: &Files) -> Files {
        std::fs::create_dir_all(dir).unwrap();
        let (module, file) = self.script();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/players/node_modules").join(module);
        std::fs::copy(&script, dir.join(file)).unwrap_or_else(|e| {
            panic!("{}: {e} (npm ci in crates/cli/tests/players, as .ci/run does)", script.display())
        });
        let player = if matches!(self, Player::HlsJs) { HLS_PLAYER } else { DASH_PLAYER };
        std::fs::write(dir.join("player.html"), page(file, player)).unwrap();
        match self {
            Player::HlsJs => {
                let variant = |origin: &Files, pathway: &str| {
                    format!(
                        "#EXT-X-STREAM-INF:BANDWIDTH=400000,RESOLUTION=320x180,CODECS=\"avc1.42c00d\",PATHWAY-ID=\"{pathway}\"\n{}\n",
                        origin.url("/hls/live.m3u8")
                    )
                };
                let master = format!(
                    "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-INDEPENDENT-SEGMENTS\n\
                     #EXT-X-CONTENT-STEERING:SERVER-URI=\"{steer}\",PATHWAY-ID=\"cdn-a\"\n{}{}",
                    variant(a, "cdn-a"),
                    variant(b, "cdn-b")
                );
                std::fs::write(dir.join("master.m3u8"), master).unwrap();
                Files::start(dir.to_owned()).await
            }
            Player::DashJs => {
                let insert = format!(
                    "\t<BaseURL serviceLocation=\"cdn-a\">{}</BaseURL>\n\t<BaseURL serviceLocation=\"cdn-b\">{}</BaseURL>\n\
                     \t<ContentSteering defaultServiceLocation=\"cdn-a\" queryBeforeStart=\"true\">{steer}/dash</ContentSteering>\n",
                    a.url("/dash/"),
                    b.url("/dash/")
                );
                let amended = Amended { path: "live.mpd".into(), file: media.join("dash/live.mpd"), insert };
                Files::start_amending(dir.to_owned(), Some(amended)).await
            }
        }
    }
}

/// One line of the page's log.
struct Noted {
    t: i64,
    kind: String,
    detail: Value,
}

async fn page_log(b: &Browser) -> Vec<Noted> {
    let v = b.client.execute("return JSON.stringify(window.log || [])", vec![]).await.unwrap();
    let entries: Vec<Value> = serde_json::from_str(v.as_str().unwrap()).unwrap();
    entries
        .into_iter()
        .map(|e| Noted {
            t: e["t"].as_i64().unwrap(),
            kind: e["kind"].as_str().unwrap().to_owned(),
            detail: e["detail"].clone(),
        })
        .collect()
}

/// When the player first loaded a fragment from `origin` after `since` (ms since the epoch).
fn first_fragment_from(log: &[Noted], origin: &Files, since: i64) -> Option<i64> {
    let prefix = origin.url("/");
    log.iter()
        .find(|n| {
            n.t >= since && n.kind == "frag" && n.detail.as_str().is_some_and(|u| u.starts_with(&prefix))
        })
        .map(|n| n.t)
}

/// Waits (at most `limit`) until the page's log satisfies `f`; the log then.
async fn until_logged(b: &Browser, limit: Duration, what: &str, f: impl Fn(&[Noted]) -> bool) -> Vec<Noted> {
    let started = Instant::now();
    loop {
        let log = page_log(b).await;
        if f(&log) {
            return log;
        }
        if started.elapsed() > limit {
            // Without the ticks, and the playlist loads and appends of every segment.
            let tail: Vec<String> = log
                .iter()
                .filter(|n| !["tick", "level", "appended"].contains(&n.kind.as_str()))
                .rev()
                .take(60)
                .map(|n| format!("{} {} {}", n.t, n.kind, n.detail))
                .collect();
            panic!("{what}: not within {limit:?}; the page's last entries:\n{}", tail.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The steering manifest's pathway order now.
async fn order(s: &ServerProcess) -> Vec<String> {
    let r = reqwest::Client::new().get(format!("{}/steer/live", s.url)).timeout(Duration::from_secs(5));
    let v: Value = r.send().await.unwrap().json().await.unwrap();
    v["PATHWAY-PRIORITY"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_owned()).collect()
}

/// Waits (at most 30 s) until the steering order is `want`; when it was first seen so.
async fn until_order(s: &ServerProcess, want: &[&str]) -> i64 {
    let started = Instant::now();
    loop {
        let now = order(s).await;
        if now == want {
            return epoch_ms();
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the order stays {now:?}, not {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hls_js_follows_the_steering_manifest_and_moves_off_a_failed_origin_without_stalling() {
    play(Player::HlsJs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dash_js_follows_the_steering_manifest_and_moves_off_a_failed_origin_without_stalling() {
    play(Player::DashJs).await;
}

/// [`scenario`] with the machine's one browser, within [`SCENARIO`].
async fn play(player: Player) {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, scenario(player))
        .await
        .unwrap_or_else(|_| panic!("{}: the scenario took longer than {SCENARIO:?}", player.name()));
}

/// The whole story for one player (module documentation).
async fn scenario(player: Player) {
    let temp = tempfile::tempdir().unwrap();
    let media = temp.path().join("media");
    let _ffmpeg = live_stream(&media).await;
    let (a, b) = (Files::start(media.clone()).await, Files::start(media.clone()).await);

    let s = ServerProcess::start_lab().await;
    let mut regions = Vec::new();
    for code in ["ap", "eu"] {
        regions
            .push(s.create("/v1/regions", json!({"code": code, "name": code})).await["id"].as_i64().unwrap());
    }
    let check = json!({"method": "hls", "interval_s": 1, "timeout_ms": 900});
    let monitor = s
        .create(
            "/v1/monitors",
            json!({"name": "live", "check": check, "steering_ttl_s": TTL_S, "regions": [
                {"region": "ap", "weight": 1, "endpoints": [a.url("/hls/live.m3u8")], "pathway": "cdn-a"},
                {"region": "eu", "weight": 1, "endpoints": [b.url("/hls/live.m3u8")], "pathway": "cdn-b"},
            ]}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    // Only eu is probed at first: cdn-b is healthy, cdn-a not known yet.
    let _eu = s.start_prober("eu-1", regions[1], temp.path()).await;
    until_order(&s, &["cdn-b", "cdn-a"]).await;

    // The page on an origin of its own; its manifest names cdn-a the default pathway.
    let steer = format!("{}/steer/live", s.url);
    let site = player.site(&temp.path().join("page"), &media, &steer, &a, &b).await;

    let browser = Browser::start().await;
    let opened = epoch_ms();
    browser.client.goto(&site.url("/player.html")).await.unwrap();
    // The player reads the steering manifest and plays from cdn-b, which nothing else told it
    // to.
    until_logged(&browser, Duration::from_secs(30), "the player plays from cdn-b", |log| {
        log.iter().any(|n| n.kind == "steer" && n.detail == "cdn-b,cdn-a")
            && first_fragment_from(log, &b, opened).is_some()
            && log
                .iter()
                .rev()
                .find(|n| n.kind == "frag")
                .is_some_and(|n| n.detail.as_str().is_some_and(|u| u.starts_with(&b.url("/"))))
    })
    .await;

    // Both healthy: the order holds (the TTFBs of two loopback origins are within the margin).
    let _ap = s.start_prober("ap-1", regions[0], temp.path()).await;
    s.wait_for(&format!("/v1/monitors/{monitor}/verdict"), Duration::from_secs(30), |v| {
        v["regions"].as_array().is_some_and(|r| r.iter().all(|r| r["health"] == "healthy"))
    })
    .await;
    assert_eq!(order(&s).await, ["cdn-b", "cdn-a"]);

    // cdn-b fails: Vantage puts cdn-a first, and the player follows within a TTL and a segment.
    let log = page_log(&browser).await;
    let ahead =
        log.iter().rev().find(|n| n.kind == "tick").map_or(0.0, |n| n.detail["ahead"].as_f64().unwrap());
    let stopped = epoch_ms();
    b.down.store(true, Ordering::Relaxed);
    let moved = until_order(&s, &["cdn-a", "cdn-b"]).await;
    let log = until_logged(&browser, Duration::from_secs(30), "the player plays from cdn-a", |log| {
        first_fragment_from(log, &a, stopped).is_some_and(|t| t + 5_000 < epoch_ms())
    })
    .await;
    let on_a = first_fragment_from(&log, &a, stopped).unwrap();
    let bound = i64::try_from((TTL_S + SEGMENT_S) * 1000).unwrap();
    assert!(
        on_a - moved <= bound,
        "on cdn-a {} ms after the order changed (origin stopped {} ms before that); at most {bound} ms",
        on_a - moved,
        moved - stopped
    );
    // Playback went on: the position never stood still longer than the buffer held at the stop.
    let ticks: Vec<(i64, f64)> = log
        .iter()
        .filter(|n| n.kind == "tick" && n.t >= stopped)
        .map(|n| (n.t, n.detail["time"].as_f64().unwrap()))
        .collect();
    let mut longest = 0;
    let mut since = ticks.first().map_or(stopped, |t| t.0);
    for w in ticks.windows(2) {
        if w[1].1 > w[0].1 {
            since = w[1].0;
        }
        longest = longest.max(w[1].0 - since);
    }
    let advanced = ticks.last().map_or(0.0, |t| t.1) - ticks.first().map_or(0.0, |t| t.1);
    assert!(
        (longest as f64) <= ahead * 1000.0 && advanced > 4.0,
        "stood still {longest} ms with {ahead:.1} s buffered at the stop; advanced {advanced:.1} s"
    );
    // A negative figure: the player left the stopped origin on its own errors first.
    eprintln!(
        "{}: origin stopped, order changed after {} ms, player on cdn-a {} ms later; longest stall {longest} ms, {ahead:.1} s buffered",
        player.name(),
        moved - stopped,
        on_a - moved
    );
}
