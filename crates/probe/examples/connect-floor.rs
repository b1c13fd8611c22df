//! The kernel's share of a silent round: what the attempts of `round-bench`'s silent phase
//! cost with no runtime, no futures and no timers around them, on loopback only.
//!
//! ```sh
//! cargo run --release -p vantage-probe --example connect-floor
//! ```
//!
//! 10,000 attempts a wave (`--targets N`), 3 waves, against 200 listeners on 127.3.0.x that
//! never accept, like `round-bench`'s silent ones. Each attempt is the engine's system calls
//! for a silent `http` target: a non-blocking socket with SO_LINGER 0, connect, the
//! connect's result (SO_ERROR), the request written; at the wave's end every socket is closed
//! (the RST). Run by one thread, then by two threads splitting the targets (the bench's two
//! tokio workers). A wave's open-and-send time is the least time in which a round's targets
//! can all start their attempts on this machine, so a silent round cannot end before
//! `attempts × timeout` plus it (plus the closes, when they stand between two attempts).
//!
//! Every load is bounded by the count; the listeners close when the example ends.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Listeners: 100 addresses × 2 ports.
const ADDRESSES: u8 = 100;
const PORTS: u16 = 2;
const PORT: u16 = 40_190;
const WAVES: usize = 3;

/// Time spent in each step of the attempts of one thread.
#[derive(Debug, Default, Clone, Copy)]
struct Steps {
    socket: Duration,
    connect: Duration,
    send: Duration,
    close: Duration,
}

impl Steps {
    fn add(&mut self, o: Steps) {
        self.socket += o.socket;
        self.connect += o.connect;
        self.send += o.send;
        self.close += o.close;
    }
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let n = match args.iter().position(|a| a == "--targets") {
        Some(i) => args.get(i + 1).ok_or("missing value")?.parse()?,
        None => 10_000_usize,
    };
    let nofile = vantage_probe::raise_nofile_limit();
    println!("cpus: {}, open files: soft {}", std::thread::available_parallelism()?, nofile.soft);
    let addrs: Vec<SocketAddr> = (1..=ADDRESSES)
        .flat_map(|a| {
            (0..PORTS).map(move |p| SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 3, 0, a)), PORT + p))
        })
        .collect();
    // The request of `round-bench`'s targets (the default check), as the engine writes it.
    let spec = vantage_core::check::Check::default().request_spec();
    let mut request = format!("{} {} HTTP/1.1\r\n", spec.method, spec.target);
    for (name, value) in &spec.headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    for threads in [1, 2] {
        // Fresh listeners per run: their accept queues start empty, as in `round-bench`.
        let held = listeners(&addrs)?;
        println!("\n## {threads} thread(s), {n} attempts a wave, {WAVES} waves");
        let mut total = Steps::default();
        for wave in 1..=WAVES {
            let started = Instant::now();
            let opened: Vec<(Vec<Socket>, Steps)> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..threads)
                    .map(|t| {
                        let addrs = &addrs;
                        let request = request.as_bytes();
                        s.spawn(move || {
                            open_and_send((t..n).step_by(threads).map(|i| addrs[i % addrs.len()]), request)
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|w| w.join().map_err(|_| "a thread panicked")?)
                    .collect::<Result<_, BoxError>>()
            })?;
            let open_wall = started.elapsed();
            let started = Instant::now();
            let closes: Vec<Steps> = std::thread::scope(|s| {
                let workers: Vec<_> = opened
                    .into_iter()
                    .map(|(socks, steps)| s.spawn(move || close_all(socks, steps)))
                    .collect();
                workers
                    .into_iter()
                    .map(|w| w.join().map_err(|_| "a thread panicked".into()))
                    .collect::<Result<_, BoxError>>()
            })?;
            let close_wall = started.elapsed();
            for steps in closes {
                total.add(steps);
            }
            println!(
                "wave {wave}: open and send {:.0} ms, close {:.0} ms (wall)",
                open_wall.as_secs_f64() * 1e3,
                close_wall.as_secs_f64() * 1e3
            );
        }
        let per = |d: Duration| d.as_secs_f64() * 1e6 / (n * WAVES) as f64;
        println!(
            "CPU per attempt (sum over threads): socket + SO_LINGER {:.1} µs, connect {:.1} µs, SO_ERROR + send {:.1} µs, close {:.1} µs; total {:.1} µs",
            per(total.socket),
            per(total.connect),
            per(total.send),
            per(total.close),
            per(total.socket + total.connect + total.send + total.close)
        );
        drop(held);
    }
    Ok(())
}

/// Opens a connection to each address and writes the request on it, as an attempt does.
fn open_and_send(
    addrs: impl Iterator<Item = SocketAddr>,
    request: &[u8],
) -> Result<(Vec<Socket>, Steps), BoxError> {
    let mut steps = Steps::default();
    let mut out = Vec::new();
    for addr in addrs {
        let t0 = Instant::now();
        let s = Socket::new(Domain::IPV4, Type::STREAM.nonblocking().cloexec(), None)?;
        s.set_linger(Some(Duration::ZERO))?;
        let t1 = Instant::now();
        match s.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EINPROGRESS as i32) => {}
            Err(e) => return Err(e.into()),
        }
        let t2 = Instant::now();
        if let Some(e) = s.take_error()? {
            return Err(e.into());
        }
        s.send_with_flags(request, nix::sys::socket::MsgFlags::MSG_NOSIGNAL.bits())?;
        let t3 = Instant::now();
        steps.socket += t1 - t0;
        steps.connect += t2 - t1;
        steps.send += t3 - t2;
        out.push(s);
    }
    Ok((out, steps))
}

fn close_all(socks: Vec<Socket>, mut steps: Steps) -> Steps {
    let t = Instant::now();
    drop(socks);
    steps.close += t.elapsed();
    steps
}

/// Listeners that never call accept() (see `round-bench`).
fn listeners(addrs: &[SocketAddr]) -> Result<Vec<Socket>, BoxError> {
    addrs
        .iter()
        .map(|addr| {
            let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
            s.set_reuse_address(true)?;
            s.bind(&(*addr).into())?;
            s.listen(4096)?;
            Ok(s)
        })
        .collect()
}
