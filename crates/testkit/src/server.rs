//! [`EdgeServer`]: one loopback listener with a scripted behaviour, which can be stopped and
//! restarted on the same address, and which records what it saw (requests, PROXY headers,
//! SNI) for assertions.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use crate::hls;
use crate::tls::TlsIdentity;

/// What a server does with each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    /// A health endpoint: every request gets the current status (see
    /// [`EdgeServer::set_status`]) and the current body (`ok` unless set, see
    /// [`EdgeServer::set_body`]) with a `Content-Length`.
    Health,
    /// An HLS origin: the playlists of [`crate::hls_paths`] and their segments.
    Hls,
    /// Reads the first bytes of the request, then resets the connection (SO_LINGER 0).
    Reset,
    /// Accepts and never answers; holds the connection until the peer closes it.
    Silent,
    /// Answers whatever arrives (a TLS ClientHello, say) with a plain-text HTTP 400 and
    /// closes: a TLS handshake against it fails.
    NotTls,
    /// Answers `200 ok` with a `Content-Length` and then keeps the connection open, ignoring
    /// `Connection: close`.
    KeepOpen,
    /// Answers the current status and body as [`Behavior::Health`] does, but chunked
    /// (`Transfer-Encoding: chunked`): the body in two chunks split at its middle, written
    /// apart with a pause between so that they arrive in separate reads; then closes.
    Chunked,
}

/// How an [`EdgeServer`] is set up.
#[derive(Debug, Clone)]
pub struct EdgeOptions {
    /// What each connection gets.
    pub behavior: Behavior,
    /// Status of [`Behavior::Health`] answers at start.
    pub status: u16,
    /// Serve TLS with this identity ([`Behavior::Health`] and [`Behavior::Hls`]).
    pub tls: Option<TlsIdentity>,
    /// Require a PROXY v1 header whose addresses match the connection; connections without
    /// one are closed and counted in [`EdgeServer::rejected`].
    pub proxy_v1: bool,
    /// Listen backlog (the kernel caps it at `net.core.somaxconn`).
    pub backlog: u32,
    /// Body of [`Behavior::Health`] and [`Behavior::Chunked`] answers at start.
    pub body: Bytes,
}

impl EdgeOptions {
    /// Plain TCP, status 200, body `ok`, no PROXY header, backlog 1024.
    pub fn new(behavior: Behavior) -> Self {
        EdgeOptions {
            behavior,
            status: 200,
            tls: None,
            proxy_v1: false,
            backlog: 1024,
            body: Bytes::from_static(b"ok\n"),
        }
    }
    /// With TLS.
    pub fn with_tls(mut self, identity: TlsIdentity) -> Self {
        self.tls = Some(identity);
        self
    }
    /// With TLS over a fresh self-signed certificate.
    pub fn with_self_signed_tls(self) -> io::Result<Self> {
        Ok(self.with_tls(TlsIdentity::self_signed(&["edge.vantage.test", "localhost"])?))
    }
    /// Requiring a PROXY v1 header.
    pub fn with_proxy_v1(mut self) -> Self {
        self.proxy_v1 = true;
        self
    }
    /// With a first status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
    /// With a listen backlog.
    pub fn with_backlog(mut self, backlog: u32) -> Self {
        self.backlog = backlog;
        self
    }
    /// With a first body (a block page, say).
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Headers in arrival order, names lower-case.
    pub headers: Vec<(String, String)>,
}

impl SeenRequest {
    /// The first value of a header (name compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A PROXY v1 header the server accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxySeen {
    /// Source address the header claimed (equal to the connection's peer).
    pub source: SocketAddr,
    /// Destination address the header claimed (equal to the server's address).
    pub destination: SocketAddr,
}

/// Requests (and peers) kept for [`EdgeServer::requests`]; older ones are dropped.
const KEPT_REQUESTS: usize = 10_000;

/// Appends to a record, dropping the oldest past [`KEPT_REQUESTS`].
fn keep<T>(record: &Mutex<Vec<T>>, seen: T) {
    let mut record = lock(record);
    if record.len() >= KEPT_REQUESTS {
        record.remove(0);
    }
    record.push(seen);
}

struct Shared {
    opts: EdgeOptions,
    acceptor: Option<TlsAcceptor>,
    status: AtomicU16,
    body: Mutex<Bytes>,
    connections: AtomicU64,
    peers: Mutex<Vec<SocketAddr>>,
    rejected: AtomicU64,
    requests: Mutex<Vec<SeenRequest>>,
    proxy: Mutex<Vec<ProxySeen>>,
    sni: Mutex<Vec<Option<String>>>,
    /// How long an HTTP answer waits, ms, and by how much it varies either way, %.
    delay: Mutex<(u64, u64)>,
    /// The state of the variation's number sequence.
    noise: AtomicU64,
}

impl Shared {
    /// The wait of the next answer: the delay, moved by up to its variation either way.
    fn next_delay(&self) -> Duration {
        let (ms, pct) = *lock(&self.delay);
        if ms == 0 {
            return Duration::ZERO;
        }
        // A linear congruential sequence: spread enough for a test's noise, no dependency.
        let x = self.noise.fetch_add(1, Ordering::Relaxed).wrapping_mul(6_364_136_223_846_793_005);
        let unit = ((x >> 33) as f64 / f64::from(1u32 << 31)) * 2.0 - 1.0; // [-1, 1)
        Duration::from_micros((ms as f64 * 1000.0 * (1.0 + unit * pct as f64 / 100.0)).max(0.0) as u64)
    }
}

/// A poisoned lock only means another test thread panicked; the data is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A server on a loopback address. Dropping it stops it.
pub struct EdgeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl EdgeServer {
    /// A [`Behavior::Health`] server answering 200 on `addr` (port 0 picks a free port).
    pub async fn start(addr: SocketAddr) -> io::Result<EdgeServer> {
        EdgeServer::start_with(addr, EdgeOptions::new(Behavior::Health)).await
    }

    /// A server with `opts` on `addr` (port 0 picks a free port). Only loopback addresses and
    /// those of the benchmarking network 198.18.0.0/15 (RFC 2544; the interfaces and network
    /// namespaces a test makes for itself) are accepted.
    pub async fn start_with(addr: SocketAddr, opts: EdgeOptions) -> io::Result<EdgeServer> {
        let lab = matches!(addr.ip(), std::net::IpAddr::V4(v4) if v4.octets()[0] == 198 && v4.octets()[1] & 0xfe == 18);
        if !addr.ip().is_loopback() && !lab {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("test servers bind loopback or 198.18.0.0/15 addresses only, not {addr}"),
            ));
        }
        let acceptor = match &opts.tls {
            Some(id) => Some(TlsAcceptor::from(id.server_config()?)),
            None => None,
        };
        let listener = bind(addr, opts.backlog)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            status: AtomicU16::new(opts.status),
            body: Mutex::new(opts.body.clone()),
            opts,
            acceptor,
            connections: AtomicU64::new(0),
            peers: Mutex::new(Vec::new()),
            rejected: AtomicU64::new(0),
            requests: Mutex::new(Vec::new()),
            proxy: Mutex::new(Vec::new()),
            sni: Mutex::new(Vec::new()),
            delay: Mutex::new((0, 0)),
            noise: AtomicU64::new(1),
        });
        let task = tokio::spawn(serve(listener, shared.clone()));
        Ok(EdgeServer { addr, shared, task: Mutex::new(Some(task)) })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://addr/path` or `https://addr/path`.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.shared.opts.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// Changes the status of [`Behavior::Health`] answers from now on.
    pub fn set_status(&self, status: u16) {
        self.shared.status.store(status, Ordering::Relaxed);
    }

    /// From now on every HTTP answer waits `ms` milliseconds, varied by up to `jitter_pct` %
    /// either way (a slow or distant edge, with noise).
    pub fn set_delay(&self, ms: u64, jitter_pct: u64) {
        *lock(&self.shared.delay) = (ms, jitter_pct);
    }

    /// Changes the body of [`Behavior::Health`] and [`Behavior::Chunked`] answers from now on.
    pub fn set_body(&self, body: impl Into<Bytes>) {
        *lock(&self.shared.body) = body.into();
    }

    /// Connections accepted since start.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// The peer address of each connection accepted, oldest first (the newest 10,000).
    pub fn peers(&self) -> Vec<SocketAddr> {
        lock(&self.shared.peers).clone()
    }

    /// Connections closed for lacking a valid PROXY v1 header.
    pub fn rejected(&self) -> u64 {
        self.shared.rejected.load(Ordering::Relaxed)
    }

    /// HTTP requests served, oldest first (the newest 10,000).
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The newest HTTP request served.
    pub fn last_request(&self) -> Option<SeenRequest> {
        lock(&self.shared.requests).last().cloned()
    }

    /// PROXY v1 headers accepted, oldest first.
    pub fn proxy_headers(&self) -> Vec<ProxySeen> {
        lock(&self.shared.proxy).clone()
    }

    /// The SNI of each TLS handshake, oldest first (`None`: the client sent none).
    pub fn sni(&self) -> Vec<Option<String>> {
        lock(&self.shared.sni).clone()
    }

    /// True while the listener is open.
    pub fn is_running(&self) -> bool {
        lock(&self.task).as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Closes the listener and every open connection; the port refuses connections until
    /// [`EdgeServer::restart`].
    pub async fn stop(&self) {
        let task = lock(&self.task).take();
        if let Some(task) = task {
            task.abort();
            // Waiting for the task to end makes sure the listener is closed on return.
            let _ = task.await;
        }
    }

    /// Opens the listener again on the same address (after [`EdgeServer::stop`]; a running
    /// server is stopped first).
    pub async fn restart(&self) -> io::Result<()> {
        self.stop().await;
        let listener = bind(self.addr, self.shared.opts.backlog)?;
        let task = tokio::spawn(serve(listener, self.shared.clone()));
        *lock(&self.task) = Some(task);
        Ok(())
    }
}

impl std::fmt::Debug for EdgeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeServer")
            .field("addr", &self.addr)
            .field("behavior", &self.shared.opts.behavior)
            .field("tls", &self.shared.opts.tls.is_some())
            .field("proxy_v1", &self.shared.opts.proxy_v1)
            .finish_non_exhaustive()
    }
}

impl Drop for EdgeServer {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }
}

fn bind(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // A restart binds the port again while old connections sit in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    // Owning the connections here means aborting this task closes all of them.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    shared.connections.fetch_add(1, Ordering::Relaxed);
                    keep(&shared.peers, peer);
                    conns.spawn(handle(stream, peer, shared.clone()));
                }
                Err(e) => {
                    // Out of descriptors, typically: back off instead of spinning.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn handle(mut stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    if shared.opts.proxy_v1 {
        match read_proxy_v1(&mut stream, peer).await {
            Ok(seen) => lock(&shared.proxy).push(seen),
            Err(e) => {
                tracing::debug!(%peer, error = %e, "connection without a valid PROXY v1 header");
                shared.rejected.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
    match shared.opts.behavior {
        Behavior::Health | Behavior::Hls => match shared.acceptor.clone() {
            Some(acceptor) => {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let sni = tls.get_ref().1.server_name().map(str::to_owned);
                lock(&shared.sni).push(sni);
                serve_http(tls, shared).await;
            }
            None => serve_http(stream, shared).await,
        },
        Behavior::Silent => drain(&mut stream).await,
        Behavior::Reset => {
            let mut buf = [0u8; 512];
            let _ = stream.read(&mut buf).await;
            // Linger 0 turns the close into an RST: what a crashing or filtering peer sends.
            let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            drop(stream);
        }
        Behavior::NotTls => {
            let mut buf = [0u8; 512];
            let _ = stream.read(&mut buf).await;
            let _ = stream
                .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await;
            let _ = stream.shutdown().await;
        }
        Behavior::KeepOpen => {
            if read_head(&mut stream).await.is_ok() {
                // Written by hand on purpose: a conforming server (hyper) would honour the
                // client's `Connection: close`, and this one must not.
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n").await;
                drain(&mut stream).await;
            }
        }
        Behavior::Chunked => {
            if read_head(&mut stream).await.is_ok() {
                let _ = write_chunked(&mut stream, &shared).await;
            }
        }
    }
}

/// The current status and body in two chunks, flushed apart (see [`Behavior::Chunked`]).
async fn write_chunked(stream: &mut TcpStream, shared: &Shared) -> io::Result<()> {
    let status = shared.status.load(Ordering::Relaxed);
    let body = lock(&shared.body).clone();
    let head = format!("HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    let (first, second) = body.split_at(body.len() / 2);
    for chunk in [first, second] {
        if chunk.is_empty() {
            continue;
        }
        // A chunk extension, as a chunked body may carry.
        stream.write_all(format!("{:x};part=1\r\n", chunk.len()).as_bytes()).await?;
        stream.write_all(chunk).await?;
        stream.write_all(b"\r\n").await?;
        stream.flush().await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stream.write_all(b"0\r\n\r\n").await?;
    stream.shutdown().await
}

/// Reads until the peer closes or fails.
async fn drain(stream: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}

/// Reads a request head (up to the blank line), 16 KiB at most.
async fn read_head(stream: &mut TcpStream) -> io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() > 16 * 1024 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(())
}

/// Reads a PROXY v1 header byte by byte (so nothing after it is consumed) and checks that
/// it names this connection's real addresses.
async fn read_proxy_v1(stream: &mut TcpStream, peer: SocketAddr) -> io::Result<ProxySeen> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let mut line = Vec::with_capacity(108);
    // 107 bytes is the longest v1 header.
    while !line.ends_with(b"\r\n") {
        if line.len() >= 107 {
            return Err(invalid("no CRLF within 107 bytes".into()));
        }
        line.push(stream.read_u8().await?);
    }
    let header = ppp::v1::Header::try_from(line.as_slice())
        .map_err(|e| invalid(format!("not a PROXY v1 header: {e:?}")))?;
    let (source, destination) = match header.addresses {
        ppp::v1::Addresses::Tcp4(a) => (
            SocketAddr::from((a.source_address, a.source_port)),
            SocketAddr::from((a.destination_address, a.destination_port)),
        ),
        ppp::v1::Addresses::Tcp6(a) => (
            SocketAddr::from((a.source_address, a.source_port)),
            SocketAddr::from((a.destination_address, a.destination_port)),
        ),
        ppp::v1::Addresses::Unknown => return Err(invalid("PROXY UNKNOWN".into())),
    };
    let local = stream.local_addr()?;
    if source != peer || destination != local {
        return Err(invalid(format!(
            "header says {source} -> {destination}, connection is {peer} -> {local}"
        )));
    }
    Ok(ProxySeen { source, destination })
}

async fn serve_http<I>(io: I, shared: Arc<Shared>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = http1::Builder::new();
    // The HLS origin sets `Date` itself: some segments must have none, some an old one.
    builder.auto_date_header(shared.opts.behavior != Behavior::Hls);
    let svc = service_fn(move |req: Request<Incoming>| {
        let shared = shared.clone();
        async move {
            let wait = shared.next_delay();
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            Ok::<_, Infallible>(respond(&shared, &req))
        }
    });
    let _ = builder.serve_connection(TokioIo::new(io), svc).await;
}

fn respond(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let seen = SeenRequest {
        method: req.method().as_str().to_owned(),
        target: req.uri().path_and_query().map_or_else(|| req.uri().to_string(), |p| p.as_str().to_owned()),
        headers: req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
    };
    keep(&shared.requests, seen);
    match shared.opts.behavior {
        Behavior::Hls => {
            let range = req.headers().get(hyper::header::RANGE).and_then(|v| v.to_str().ok());
            hls::respond(req.uri().path(), range, SystemTime::now())
        }
        _ => {
            let mut r = Response::new(Full::new(lock(&shared.body).clone()));
            let status = shared.status.load(Ordering::Relaxed);
            *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            r
        }
    }
}
