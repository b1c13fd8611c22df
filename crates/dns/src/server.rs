//! The listeners: UDP sockets each served by a dedicated thread with blocking batched receive
//! and send (`recvmmsg` through nix and `sendmmsg` through rustix, both safe APIs; the hot path
//! has no async runtime, and allocates a few small vectors per batch, not per query), and a
//! TCP listener on a small tokio runtime of its own.
//!
//! The server only reads the [`Answers`] handle; it never touches storage, so it keeps
//! answering the last table whatever happens elsewhere, and it answers from the table it is
//! given at start (no window with empty answers).

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrStorage, recvmmsg};
use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags, SocketAddrAny, sendmmsg};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::AsRawFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use crate::error::Error;
use crate::listen::{Gate, Limits, accept};
use crate::metrics::{DnsMetrics, TableCounters};
use crate::table::Answers;
use crate::wire::{Transport, respond};

/// Where and how the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsConfig {
    /// UDP and TCP address (port 0: one free port for both, see [`DnsServer::local_addr`]).
    pub listen: SocketAddr,
    /// UDP sockets (SO_REUSEPORT), each with its own thread; 0: one per CPU.
    pub udp_workers: usize,
    /// A TCP connection with no complete query for this long is closed.
    pub tcp_idle_timeout: Duration,
    /// Concurrent TCP connections; further ones are closed at once.
    pub tcp_max_connections: usize,
    /// Concurrent TCP connections from one source address, so that one client holding idle
    /// connections cannot lock the others out.
    pub tcp_max_per_source: usize,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 8053)),
            udp_workers: 0,
            tcp_idle_timeout: Duration::from_secs(10),
            tcp_max_connections: 1024,
            tcp_max_per_source: 64,
        }
    }
}

/// How often an idle UDP worker looks at the stop flag.
const UDP_POLL: Duration = Duration::from_millis(200);
/// Kernel receive buffer per UDP socket: absorbs bursts while a worker is busy.
const UDP_RCVBUF: usize = 4 << 20;

/// A running server. [`shutdown`](Self::shutdown) (or dropping it) stops every thread.
#[derive(Debug)]
pub struct DnsServer {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    udp: Vec<JoinHandle<()>>,
    tcp: Option<JoinHandle<()>>,
    tcp_stop: Option<watch::Sender<bool>>,
}

impl DnsServer {
    /// Binds UDP and TCP on `config.listen` and starts answering from `answers`.
    pub fn start(
        config: DnsConfig,
        answers: Arc<Answers>,
        metrics: Arc<DnsMetrics>,
    ) -> Result<DnsServer, Error> {
        let workers = match config.udp_workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        // With port 0 the UDP port is chosen first and TCP must get the same one; another
        // program may hold that TCP port, so try a few ports.
        let attempts = if config.listen.port() == 0 { 8 } else { 1 };
        let mut last_err = None;
        let mut bound = None;
        for _ in 0..attempts {
            match bind_all(config.listen, workers) {
                Ok(b) => {
                    bound = Some(b);
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        let Some((udp_sockets, tcp_listener, local_addr)) = bound else {
            return Err(last_err.unwrap_or_else(|| Error::invalid("listen", "no address to bind")));
        };

        let stop = Arc::new(AtomicBool::new(false));
        let mut server =
            DnsServer { local_addr, stop: stop.clone(), udp: Vec::new(), tcp: None, tcp_stop: None };
        for (i, socket) in udp_sockets.into_iter().enumerate() {
            let name = format!("dns-udp-{i}");
            let (answers, metrics, stop) = (answers.clone(), metrics.clone(), stop.clone());
            let handle = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || udp_worker(&socket, &answers, &metrics, &stop))
                .map_err(|source| Error::Thread { name, source })?;
            server.udp.push(handle);
        }

        let (tx, rx) = watch::channel(false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| Error::Thread { name: "dns-tcp".into(), source })?;
        let tcp_config = config.clone();
        let handle = std::thread::Builder::new()
            .name("dns-tcp".into())
            .spawn(move || runtime.block_on(tcp_serve(tcp_listener, answers, metrics, tcp_config, rx)))
            .map_err(|source| Error::Thread { name: "dns-tcp".into(), source })?;
        server.tcp = Some(handle);
        server.tcp_stop = Some(tx);
        tracing::info!(addr = %local_addr, udp_workers = workers, "DNS server listening");
        Ok(server)
    }

    /// The bound address (with the port chosen when the configuration said 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops every thread and waits for them (at most a fraction of a second).
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(tx) = self.tcp_stop.take() {
            let _ = tx.send(true);
        }
        for h in self.udp.drain(..) {
            let _ = h.join();
        }
        if let Some(h) = self.tcp.take() {
            let _ = h.join();
        }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

type Bound = (Vec<UdpSocket>, std::net::TcpListener, SocketAddr);

fn bind_all(listen: SocketAddr, workers: usize) -> Result<Bound, Error> {
    let err = |source: io::Error| Error::Bind { addr: listen, source };
    let mut udp = Vec::with_capacity(workers);
    let first = udp_socket(listen).map_err(err)?;
    let addr = first.local_addr().map_err(err)?;
    udp.push(first);
    for _ in 1..workers {
        udp.push(udp_socket(addr).map_err(err)?);
    }
    let tcp = tcp_listener(addr).map_err(err)?;
    Ok((udp, tcp, addr))
}

fn udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Several sockets on one port: the kernel spreads datagrams over them by flow hash, so
    // each worker thread has its own socket and nothing is shared on the hot path.
    s.set_reuse_port(true)?;
    // Best effort: the kernel caps it at net.core.rmem_max.
    let _ = s.set_recv_buffer_size(UDP_RCVBUF);
    s.bind(&addr.into())?;
    let s: UdpSocket = s.into();
    s.set_read_timeout(Some(UDP_POLL))?;
    Ok(s)
}

fn tcp_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

/// Datagrams taken per system call. Under load the socket queue holds many queries: one
/// `recvmmsg` and one `sendmmsg` per batch replace two system calls per query. When idle a
/// batch is one query and nothing waits for the batch to fill (MSG_WAITFORONE).
const BATCH: usize = 32;
/// Receive buffer per datagram: a larger query is truncated and answered FORMERR.
const MAX_QUERY: usize = 4096;

fn udp_worker(socket: &UdpSocket, answers: &Answers, metrics: &DnsMetrics, stop: &AtomicBool) {
    let fd = socket.as_raw_fd();
    let mut bufs: Box<[[u8; MAX_QUERY]; BATCH]> = Box::new([[0u8; MAX_QUERY]; BATCH]);
    let mut outs: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(1232)).collect();
    let mut received: [(usize, Option<SocketAddr>); BATCH] = [(0, None); BATCH];
    let mut replies: Vec<SocketAddrAny> = Vec::with_capacity(BATCH);
    let mut recv_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut counters = TableCounters::new(metrics, &answers.guard());
    while !stop.load(Ordering::Relaxed) {
        let count = {
            let mut iovs = bufs.each_mut().map(|b| [IoSliceMut::new(b)]);
            match recvmmsg(fd, &mut recv_headers, iovs.iter_mut(), MsgFlags::MSG_WAITFORONE, None) {
                Ok(results) => {
                    let mut n = 0;
                    for (slot, msg) in received.iter_mut().zip(results) {
                        *slot = (msg.bytes, msg.address.as_ref().and_then(to_socket_addr));
                        n += 1;
                    }
                    n
                }
                // The receive timeout (UDP_POLL) expired: look at the stop flag.
                Err(Errno::EAGAIN | Errno::EINTR) => {
                    counters.merge_demand(metrics);
                    continue;
                }
                Err(e) => {
                    // ICMP errors of earlier sends surface here (ECONNREFUSED); nothing to do.
                    tracing::debug!(error = %e, "UDP receive error");
                    continue;
                }
            }
        };

        let table = answers.guard();
        if table.generation() != counters.generation() {
            counters = counters.renew(metrics, &table);
        }
        let mut ready = 0;
        replies.clear();
        for i in 0..count {
            let (len, src) = received[i];
            // A reply to port 0 (or to an address the kernel did not give) cannot be delivered.
            let Some(src) = src.filter(|s| s.port() != 0) else {
                counters.count_dropped();
                continue;
            };
            let query = bufs[i].get(..len).unwrap_or_default();
            // Answers are built in slot `ready` so the ones to send are contiguous.
            let Some(a) = respond(&table, query, src.ip(), Transport::Udp, &mut outs[ready]) else {
                counters.count_dropped();
                continue;
            };
            counters.count(&a, metrics);
            replies.push(SocketAddrAny::from(src));
            ready += 1;
        }
        drop(table);
        send_all(socket, &outs[..ready], &replies);
        counters.merge_demand(metrics);
    }
}

/// Sends `outs[i]` to `to[i]` with as few `sendmmsg` calls as the kernel allows; a datagram
/// the kernel refuses is skipped (UDP offers no delivery anyway).
fn send_all(socket: &UdpSocket, outs: &[Vec<u8>], to: &[SocketAddrAny]) {
    let mut sent = 0;
    while sent < outs.len() {
        let rest = &outs[sent..];
        let iovs: Vec<[IoSlice<'_>; 1]> = rest.iter().map(|o| [IoSlice::new(o)]).collect();
        let mut controls: Vec<SendAncillaryBuffer<'_, '_, '_>> =
            rest.iter().map(|_| SendAncillaryBuffer::default()).collect();
        let mut msgs: Vec<MMsgHdr<'_>> = controls
            .iter_mut()
            .zip(&iovs)
            .zip(&to[sent..])
            .map(|((control, iov), addr)| MMsgHdr::new_with_addr(addr, iov, control))
            .collect();
        match sendmmsg(socket, &mut msgs, SendFlags::empty()) {
            Ok(n) => sent += n.max(1),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                tracing::debug!(error = %e, "UDP send failed");
                sent += 1;
            }
        }
    }
}

fn to_socket_addr(s: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    s.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
}

async fn tcp_serve(
    listener: std::net::TcpListener,
    answers: Arc<Answers>,
    metrics: Arc<DnsMetrics>,
    config: DnsConfig,
    mut stop: watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "DNS TCP listener unusable");
            return;
        }
    };
    let gate = Gate::new(Limits { total: config.tcp_max_connections, per_source: config.tcp_max_per_source });
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            (stream, peer, permit) = accept(&listener, &gate, "dns") => {
                let (answers, metrics) = (answers.clone(), metrics.clone());
                let idle = config.tcp_idle_timeout;
                connections.spawn(async move {
                    let _permit = permit;
                    tcp_connection(stream, peer.ip(), &answers, &metrics, idle).await;
                });
                while connections.try_join_next().is_some() {}
            }
        }
    }
    // Dropping the set aborts the connections still open.
    connections.abort_all();
}

async fn tcp_connection(
    mut stream: tokio::net::TcpStream,
    peer: IpAddr,
    answers: &Answers,
    metrics: &DnsMetrics,
    idle: Duration,
) {
    let _ = stream.set_nodelay(true);
    // Grown to the largest query seen: an idle connection holds no 64 KiB buffer.
    let mut buf = Vec::new();
    let mut out = Vec::with_capacity(4096);
    loop {
        let mut len = [0u8; 2];
        let read = async {
            stream.read_exact(&mut len).await?;
            let n = usize::from(u16::from_be_bytes(len));
            if buf.len() < n {
                buf.resize(n, 0);
            }
            stream.read_exact(&mut buf[..n]).await?;
            Ok::<usize, io::Error>(n)
        };
        let n = match tokio::time::timeout(idle, read).await {
            Ok(Ok(n)) => n,
            _ => return,
        };
        let table = answers.guard();
        let Some(a) = respond(&table, &buf[..n], peer, Transport::Tcp, &mut out) else {
            // Not a query: a TCP peer that sends responses is not a DNS client.
            metrics.dropped_counter().inc();
            return;
        };
        metrics.count(&table, &a);
        let Ok(len) = u16::try_from(out.len()) else { return };
        let mut framed = Vec::with_capacity(out.len() + 2);
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(&out);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
    }
}
