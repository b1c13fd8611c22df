//! Faults injected into real processes: probers' networks cut in their own network namespaces,
//! the database on a file system that fills up, and probers whose clocks jump an hour. In each,
//! the fleet's verdicts follow only what the edges really do, and DNS keeps answering.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{LabFleet, LabSpec, Place, ServerProcess, all_answers, dig};
use crate::netlab::NetLab;

/// Every scheduling address of every node in a `GET /v1/nodes` body.
fn addresses(nodes: &Value) -> Vec<Value> {
    nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["addresses"].as_array().unwrap().clone())
        .collect()
}

/// The number of the revision DNS serves.
async fn revision(s: &ServerProcess, cluster: i64) -> i64 {
    let (_, dns) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/dns"), None).await;
    dns["revision"].as_i64().unwrap()
}

/// Waits (at most `limit`) until every address's verdict satisfies `done`, checking on every
/// look that no address left *reachable*, that the newest revision is still `number` and that
/// the built-in DNS still answers `want`.
async fn hold_until(
    s: &ServerProcess,
    cluster: i64,
    number: i64,
    (domain, want): (&str, &[String]),
    limit: Duration,
    done: impl Fn(&[Value]) -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        let (_, nodes) = s.call(Method::GET, "/v1/nodes", None).await;
        let all = addresses(&nodes);
        for a in &all {
            assert_eq!(a["reachability"], "reachable", "a verdict flipped: {a}");
        }
        assert_eq!(revision(s, cluster).await, number, "a revision was cut");
        assert_eq!(dig(s.dns(), domain).await, want, "DNS changed");
        if done(&all) {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "not done within {limit:?}: {nodes}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn counting(a: &Value) -> i64 {
    a["probers"]["counting"].as_i64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prober_cut_off_goes_stale_and_a_fleet_wide_cut_is_held_with_one_alert() {
    let net = NetLab::new(3);
    let domain = "cut.test.example";
    let LabFleet { s, cluster, dns_path, probers: _probers, edges: _edges, temp: _temp, .. } =
        LabFleet::start_with(domain, LabSpec { net: Place::Lab(&net), ..LabSpec::default() }).await;
    let (_, v) = s.call(Method::GET, &dns_path, None).await;
    let want = all_answers(&v);
    assert_eq!(want.len(), 3, "{v}");
    let number = revision(&s, cluster).await;
    let all_three = |all: &[Value]| all.iter().all(|a| counting(a) == 3);
    hold_until(&s, cluster, number, (domain, &want), Duration::from_secs(15), all_three).await;

    // One prober's own network goes: it reaches neither edges nor server. Its results stop
    // counting after 3 intervals (15 s); the two others' say every address answers.
    net.cut(0);
    let stale = hold_until(&s, cluster, number, (domain, &want), Duration::from_secs(30), |all| {
        all.iter().all(|a| counting(a) == 2)
    })
    .await;
    println!("faults: a cut prober's results stopped counting after {:.1} s", stale.as_secs_f64());
    // Its last report came up to an interval (5 s) before the cut, and counts for 15 s.
    assert!(stale >= Duration::from_secs(9), "its results stopped counting too soon: {stale:?}");
    net.restore(0);
    // A report caught by the cut waits out TCP's retransmissions before the next one goes.
    hold_until(&s, cluster, number, (domain, &want), Duration::from_secs(60), all_three).await;

    // Every prober loses its way to the edges at once but still reports: every address is
    // failing for all three. Removing every record is more than the mass-removal limit, so
    // the line keeps its records, and one alert says so.
    for p in 0..3 {
        net.cut_edges(p);
    }
    let cut = Instant::now();
    s.wait_for("/v1/alerts", Duration::from_secs(40), |v| {
        v["open"].as_array().is_some_and(|o| o.iter().any(|a| a["kind"] == "revision_held"))
    })
    .await;
    println!(
        "faults: every prober cut from the edges → records held in {:.1} s",
        cut.elapsed().as_secs_f64()
    );
    let (_, nodes) = s.call(Method::GET, "/v1/nodes", None).await;
    for a in addresses(&nodes) {
        assert_eq!(a["reachability"], "unreachable", "{a}");
        assert_eq!(a["probers"]["failing"], 3, "{a}");
    }
    assert_eq!(dig(s.dns(), domain).await, want, "the held records are still served");
    let (_, alerts) = s.call(Method::GET, "/v1/alerts", None).await;
    let held: Vec<&Value> =
        alerts["open"].as_array().unwrap().iter().filter(|a| a["kind"] == "revision_held").collect();
    assert_eq!(held.len(), 1, "one alert for the one line: {alerts}");
    let (_, revs) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    assert_eq!(revs["items"][0]["records"]["all"], json!(want), "{revs}");

    // The way back: the addresses answer again, the hold ends and its alert resolves, and the
    // same records stay in DNS throughout.
    for p in 0..3 {
        net.restore_edges(p);
    }
    s.wait_for("/v1/alerts", Duration::from_secs(40), |v| {
        v["open"].as_array().is_some_and(|o| o.iter().all(|a| a["kind"] != "revision_held"))
    })
    .await;
    s.wait_for("/v1/nodes", Duration::from_secs(40), |v| {
        addresses(v).iter().all(|a| a["reachability"] == "reachable")
    })
    .await;
    assert_eq!(dig(s.dns(), domain).await, want);
}

/// A tmpfs of a few MiB mounted for the test and unmounted when dropped.
struct Tmpfs(PathBuf);

/// Where the tests mount their file systems: `/tmp/vantage-tmpfs-<pid>/<name>`, so that the
/// mounts of a test process killed before it unmounted them are known and undone.
const MOUNTS: &str = "/tmp/vantage-tmpfs-";

impl Tmpfs {
    /// Mounts `mib` MiB at `<MOUNTS><pid>/<name>`, after unmounting those of processes that are
    /// gone.
    fn mount(name: &str, mib: u32) -> Tmpfs {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        for point in mounts.lines().filter_map(|l| l.split_whitespace().nth(1)) {
            let Some(pid) = point.strip_prefix(MOUNTS).and_then(|r| r.split('/').next()) else { continue };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = Command::new("umount").arg("-l").arg(point).status();
                let _ = std::fs::remove_dir_all(format!("{MOUNTS}{pid}"));
            }
        }
        let at = PathBuf::from(format!("{MOUNTS}{}/{name}", std::process::id()));
        std::fs::create_dir_all(&at).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m,mode=0700"), "tmpfs"])
            .arg(&at)
            .status()
            .expect("mount runs");
        assert!(status.success(), "mount -t tmpfs {} (the tests run as root)", at.display());
        Tmpfs(at)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// Fills it to the last byte with `filler`; returns the file's path.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        // What is left is smaller than a block.
        while f.write_all(&block[..512]).is_ok() {}
        while f.write_all(&[0]).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Detached at once (lazily, should anything still hold a file), then the directory with
        // the server's log beside the mount point goes.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        if let Some(parent) = self.0.parent() {
            let _ = std::fs::remove_dir_all(parent);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_refuses_changes_with_503_keeps_dns_and_loses_nothing_acknowledged() {
    let disk = Tmpfs::mount("full-disk", 24);
    let dir = disk.path().to_owned();
    let domain = "full.test.example";
    let LabFleet { s, probers: _probers, edges: _edges, temp: _temp, .. } = LabFleet::start_with(
        domain,
        LabSpec { net: Place::Loopback(80), server_dir: Some(dir.clone()), ..LabSpec::default() },
    )
    .await;
    let want: Vec<String> = ["127.0.0.80", "127.0.0.82", "127.0.0.83"].map(String::from).to_vec();
    assert_eq!(dig(s.dns(), domain).await, want);

    let filler = disk.fill();
    // Changes until one is refused: the database may still have room in its free pages for the
    // first few. Every answer is an acknowledgement (201) or a refusal in the error shape (503).
    let (mut acknowledged, mut refused) = (Vec::new(), Vec::new());
    for i in 0..200 {
        let code = format!("full-{i}");
        let (status, v) = s
            .call(Method::POST, "/v1/regions", Some(json!({"code": code, "name": format!("Full {i}")})))
            .await;
        match status {
            201 => acknowledged.push(code),
            503 => {
                assert_eq!(v["error"]["status"], 503, "{v}");
                assert!(v["error"]["reason"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
                refused.push(code);
            }
            other => panic!("{code}: {other} {v}"),
        }
        if refused.len() >= 3 {
            break;
        }
    }
    assert_eq!(refused.len(), 3, "a full disk refused no change ({} acknowledged)", acknowledged.len());
    println!("faults: full disk: {} changes acknowledged before the first refusal", acknowledged.len());
    // Reads, the built-in DNS and the probers' reports (held in memory) go on for a few rounds.
    for _ in 0..4 {
        let (status, v) = s.call(Method::GET, "/v1/nodes", None).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(dig(s.dns(), domain).await, want);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (status, _) = s.call(Method::GET, "/readyz", None).await;
    println!("faults: full disk: /readyz answers {status}");

    // Room again: changes go through, and after a restart every acknowledged change is there
    // and no refused one is.
    std::fs::remove_file(&filler).unwrap();
    let started = Instant::now();
    loop {
        let (status, v) =
            s.call(Method::POST, "/v1/regions", Some(json!({"code": "after", "name": "After"}))).await;
        if status == 201 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no change accepted after the disk emptied: {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    acknowledged.push("after".to_owned());
    s.stop().await;
    let s = ServerProcess::start_in(&dir, &["--allow-loopback-addresses"]).await;
    let (_, regions) = s.call(Method::GET, "/v1/regions", None).await;
    let codes: Vec<&str> =
        regions["items"].as_array().unwrap().iter().map(|r| r["code"].as_str().unwrap()).collect();
    for code in &acknowledged {
        assert!(codes.contains(&code.as_str()), "{code} was acknowledged and is lost: {codes:?}");
    }
    for code in &refused {
        assert!(!codes.contains(&code.as_str()), "{code} was refused and is there: {codes:?}");
    }
    assert_eq!(dig(s.dns(), domain).await, want, "the last revision survives the restart");
    // The server lets go of its files before they are unmounted.
    s.stop().await;
    drop(disk);
}

/// Where Debian's libfaketime is (package `faketime`).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probers_whose_clocks_jump_an_hour_change_no_verdict_and_still_count() {
    assert!(Path::new(LIBFAKETIME).exists(), "{LIBFAKETIME} is missing: apt-get install faketime");
    let clock = tempfile::tempdir().unwrap();
    let offset = clock.path().join("offset");
    std::fs::write(&offset, "+0\n").unwrap();
    // Wall-clock time (what reports carry) follows the file; monotonic time (the prober's
    // timers) stays true, as when NTP steps a clock.
    let faked = vec![
        ("LD_PRELOAD".to_owned(), LIBFAKETIME.to_owned()),
        ("FAKETIME_TIMESTAMP_FILE".to_owned(), offset.display().to_string()),
        ("FAKETIME_DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned()),
        ("FAKETIME_NO_CACHE".to_owned(), "1".to_owned()),
    ];
    let domain = "clock.test.example";
    let LabFleet { s, cluster, edges, probers: _probers, temp: _temp, .. } = LabFleet::start_with(
        domain,
        LabSpec {
            net: Place::Loopback(90),
            prober_env: [faked.clone(), faked, Vec::new()],
            ..LabSpec::default()
        },
    )
    .await;
    let want: Vec<String> = ["127.0.0.90", "127.0.0.92", "127.0.0.93"].map(String::from).to_vec();
    let number = revision(&s, cluster).await;

    // Two of the three probers' clocks jump an hour ahead: for three rounds nothing changes,
    // and their results keep counting.
    std::fs::write(&offset, "+3600\n").unwrap();
    let jumped = Instant::now();
    hold_until(&s, cluster, number, (domain, &want), Duration::from_secs(30), |all| {
        jumped.elapsed() > Duration::from_secs(15) && all.iter().all(|a| counting(a) == 3)
    })
    .await;

    // Their evidence is still what decides: the primary's edge stops, and the failover needs
    // them (one prober alone is no majority). The failure is dated by the server's clock.
    edges[0].stop().await;
    let stopped = vantage_core::Timestamp::from_system(std::time::SystemTime::now());
    let want_backup: Vec<String> = ["127.0.0.91", "127.0.0.92", "127.0.0.93"].map(String::from).to_vec();
    let started = Instant::now();
    while dig(s.dns(), domain).await != want_backup {
        assert!(started.elapsed() < Duration::from_secs(20), "no failover with the clocks an hour ahead");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("faults: clocks an hour ahead: failover in {:.1} s", started.elapsed().as_secs_f64());
    let (_, nodes) = s.call(Method::GET, "/v1/nodes", None).await;
    let primary = addresses(&nodes).into_iter().find(|a| a["ip"] == "127.0.0.90").unwrap();
    assert_eq!(primary["probers"]["failing"], 3, "{primary}");
    let from: vantage_core::Timestamp =
        serde_json::from_value(primary["probers"]["failing_from"].clone()).unwrap();
    let now = vantage_core::Timestamp::from_system(std::time::SystemTime::now());
    assert!(from.millis_since(stopped) >= -1000 && from <= now, "failing from {from}, stopped at {stopped}");

    // The clocks jump back an hour while the edge is still down, then it returns: it comes
    // back after answering before reachable (5 s), as with true clocks.
    std::fs::write(&offset, "+0\n").unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(dig(s.dns(), domain).await, want_backup, "a jump back changes nothing");
    edges[0].restart().await.unwrap();
    let back = Instant::now();
    while dig(s.dns(), domain).await != want {
        assert!(back.elapsed() < Duration::from_secs(30), "the primary never came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(back.elapsed() >= Duration::from_secs(5), "back before answering-before-reachable");
}
