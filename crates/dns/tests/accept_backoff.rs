//! The accept loop when accepting itself fails. Out of file descriptors, the kernel keeps the
//! connection queued and `accept` fails at once each time it is called, so a loop that retries
//! straight away spins a core (it did: the DNS TCP loop once went to 100 %). Its own test
//! binary, so that lowering this process's open-file limit touches no other test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use rlimit::Resource;
use tokio::net::TcpListener;
use vantage_dns::listen::{Gate, Limits, accept};

/// CPU seconds this process has used (user + system), read from `stat`, `/proc/self/stat`
/// opened before the descriptors ran out.
fn cpu_seconds(stat: &std::fs::File) -> f64 {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 1024];
    let n = stat.read_at(&mut buf, 0).unwrap();
    let stat = String::from_utf8_lossy(&buf[..n]);
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // The kernel's USER_HZ is 100 on every Linux this runs on.
    ticks as f64 / 100.0
}

#[tokio::test(flavor = "current_thread")]
async fn out_of_descriptors_the_accept_loop_waits_and_accepts_once_one_is_free() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = Gate::new(Limits { total: 16, per_source: 16 });
    let (tx, mut accepted) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            let (stream, _, admitted) = accept(&listener, &gate, "test").await;
            if tx.send((stream, admitted)).await.is_err() {
                return;
            }
        }
    });

    let stat = std::fs::File::open("/proc/self/stat").unwrap();
    // Every descriptor this process may open taken, but one for the client's socket.
    let (_, hard) = rlimit::getrlimit(Resource::NOFILE).unwrap();
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    rlimit::setrlimit(Resource::NOFILE, open + 16, hard).unwrap();
    let mut filler = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        filler.push(f);
    }
    drop(filler.pop());
    // The handshake completes in the kernel; the listener cannot take the connection.
    let _client = std::net::TcpStream::connect(addr).unwrap();

    let before = cpu_seconds(&stat);
    let stuck = tokio::time::timeout(Duration::from_secs(2), accepted.recv()).await;
    let used = cpu_seconds(&stat) - before;
    assert!(stuck.is_err(), "accepted with no descriptor free");
    assert!(used < 0.2, "the failing accept loop used {used:.2} s of CPU in 2 s");

    // A descriptor comes free: the queued connection is taken at the next try (the longest
    // wait is 1 s; the bound leaves room for a loaded machine).
    drop(filler.pop());
    let got = tokio::time::timeout(Duration::from_secs(5), accepted.recv()).await;
    assert!(matches!(got, Ok(Some(_))), "not accepted once a descriptor was free");
}
