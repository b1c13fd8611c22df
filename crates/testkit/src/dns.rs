//! DNS peers for tests: `dig` with the user's settings kept out, ports free for both UDP and
//! TCP, and a real Knot DNS that accepts RFC 2136 updates signed with a TSIG key.

use std::fmt::Write as _;
use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// An empty home directory, so `dig` reads no `~/.digrc` of the user running the tests.
fn empty_home() -> io::Result<&'static Path> {
    static HOME: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    HOME.get_or_init(|| tempfile::tempdir().ok())
        .as_ref()
        .map(|d| d.path())
        .ok_or_else(|| io::Error::other("no temporary directory for dig's HOME"))
}

/// Runs `dig @server -p port ARGS` (one try, 2 s) and returns its output.
pub fn dig(server: SocketAddr, args: &[&str]) -> io::Result<String> {
    let out = Command::new("dig")
        .arg("-r")
        .arg(format!("@{}", server.ip()))
        .arg("-p")
        .arg(server.port().to_string())
        .args(["+time=2", "+tries=1"])
        .args(args)
        .env("HOME", empty_home()?)
        .stdin(Stdio::null())
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `dig +short ARGS`, lines sorted (empty when nothing answers).
pub fn dig_short(server: SocketAddr, args: &[&str]) -> Vec<String> {
    let mut a = vec!["+short"];
    a.extend_from_slice(args);
    let mut lines: Vec<String> =
        dig(server, &a).unwrap_or_default().lines().map(str::to_owned).filter(|l| !l.is_empty()).collect();
    lines.sort();
    lines
}

/// A port free on 127.0.0.1 for both UDP and TCP (at the time of asking), outside the kernel's
/// ephemeral range, for a DNS server a test asks with `dig`.
///
/// Why not a port the kernel picks: `dig` binds its source port with SO_REUSEPORT, as our
/// server and Knot bind theirs, so the kernel may hand `dig` the very port of the server it
/// asks. The query then goes to `dig`'s own connected socket and is read back as an answer
/// with QR clear ("query response not set"), about once in 28,000 queries. No client is given
/// a port outside the ephemeral range, and each call in a process moves on to the next port,
/// so two servers of one test run are not handed the same one.
pub fn free_port() -> io::Result<u16> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = outside_ephemeral();
    let span = u32::from(high - low);
    // Test binaries that run one after another start at different places.
    let start = std::process::id().wrapping_mul(7_919);
    for _ in 0..200 {
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        let Ok(port) = u16::try_from(u32::from(low) + start.wrapping_add(i) % span) else { continue };
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(io::Error::other("no port free for both UDP and TCP on 127.0.0.1"))
}

/// The ports [`free_port`] picks from: outside the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`, 32768–60999 by default): the half below it, or the ports
/// above it where fewer than 1024 lie below; never below 1024.
fn outside_ephemeral() -> (u16, u16) {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = range.split_whitespace().map(|w| w.parse::<u16>().ok());
    let first = bounds.next().flatten().unwrap_or(32_768);
    let last = bounds.next().flatten().unwrap_or(60_999);
    if first >= 2_048 {
        (first / 2, first)
    } else if last <= 65_535 - 1_024 {
        (last + 1, 65_535)
    } else {
        // The whole range is ephemeral: nothing is safe, so take the top.
        (64_511, 65_535)
    }
}

/// A running `knotd` (Debian package `knot`) in a temporary directory, killed when dropped.
#[derive(Debug)]
pub struct KnotServer {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    process: Child,
}

/// The initial A record of a Knot zone, answered until the first update.
pub const KNOT_INITIAL_A: &str = "192.0.2.250";

impl KnotServer {
    /// Starts Knot on 127.0.0.1 and a free port, serving `zone` with an initial A record
    /// ([`KNOT_INITIAL_A`]), and accepting updates signed with `key_name` / `algorithm`
    /// (`hmac-sha256`…) / `secret` (base64). Returns once it answers.
    pub fn start(zone: &str, key_name: &str, algorithm: &str, secret: &str) -> io::Result<KnotServer> {
        let dir = tempfile::tempdir()?;
        let d = dir.path().display();
        let port = free_port()?;
        let mut conf = String::new();
        let _ = write!(
            conf,
            r#"server:
    rundir: "{d}"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: info
database:
    storage: "{d}/db"
key:
  - id: {key_name}
    algorithm: {algorithm}
    secret: {secret}
acl:
  - id: vantage-update
    key: {key_name}
    action: update
control:
    listen: "{d}/knot.sock"
zone:
  - domain: {zone}
    storage: "{d}"
    file: "{zone}.zone"
    acl: vantage-update
    zonefile-sync: -1
"#
        );
        std::fs::write(dir.path().join("knot.conf"), conf)?;
        // Knot keeps the journal of updates there and does not create it.
        std::fs::create_dir(dir.path().join("db"))?;
        std::fs::write(
            dir.path().join(format!("{zone}.zone")),
            format!(
                "$ORIGIN {zone}.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 1209600 300\n@ NS ns1\nns1 A 127.0.0.1\n@ A {KNOT_INITIAL_A}\n"
            ),
        )?;
        let log = std::fs::File::create(dir.path().join("knot.log"))?;
        let process = Command::new("knotd")
            .arg("-c")
            .arg(dir.path().join("knot.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let knot = KnotServer { addr: SocketAddr::from(([127, 0, 0, 1], port)), dir, process };
        let started = Instant::now();
        while dig_short(knot.addr, &[zone, "A"]) != [KNOT_INITIAL_A] {
            if started.elapsed() > Duration::from_secs(10) {
                return Err(io::Error::other(format!("knotd did not come up: {}", knot.log())));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(knot)
    }

    /// Where it answers (UDP and TCP).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("knot.log")).unwrap_or_default()
    }
}

impl Drop for KnotServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
