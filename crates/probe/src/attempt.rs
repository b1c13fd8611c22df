//! One attempt against one target (§3.1): connect (from the source address, then PROXY
//! header, then TLS), send the check's request, judge the answer (the `health` exchange for
//! `http` and `https`); for `hls`, through hyper, the manifest, the newest segment and its
//! age. Every failure becomes exactly one [`ErrorCode`]; the stages reached and the time of
//! each stage are kept even when the timeout cuts the attempt short.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper::{HeaderMap, Request};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use url::Url;
use vantage_core::Timestamp;
use vantage_core::check::{Method, RequestSpec};
use vantage_core::fetch::FetchPolicy;
use vantage_core::result::{Attempt, ErrorCode, HlsDetail, Stages};

use crate::classify::{Phase, code_for_hyper, code_for_io, io_source};
use crate::error::Error;
use crate::health;
use crate::hls::{self, Next};
use crate::source::SourceAddresses;
use crate::target::{ProbeTarget, authority, resolve};
use crate::tls;
use crate::wire::{Counted, Stream, Wire};

/// Largest manifest read; a live playlist is a few KiB.
const MANIFEST_LIMIT: usize = 4 * 1024 * 1024;
/// The part of the newest segment fetched: enough to prove the edge serves it.
const SEGMENT_RANGE: &str = "bytes=0-1023";
const SEGMENT_LIMIT: usize = 1024;

/// How long each stage of an attempt took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timings {
    /// The TCP connect.
    pub connect: Option<Duration>,
    /// The TLS handshake (after the connect and any PROXY header).
    pub tls: Option<Duration>,
    /// From the first request byte written to the first response byte read.
    pub first_byte: Option<Duration>,
    /// From the start of the attempt to its verdict.
    pub total: Duration,
}

/// The newest segment an `hls` attempt fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentReport {
    /// Its URL, resolved against the manifest's.
    pub url: String,
    /// The status it answered, when it answered.
    pub status: Option<u16>,
}

/// Everything one attempt found out; [`AttemptReport::attempt`] is what a round reports.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptReport {
    /// Stages reached.
    pub stages: Stages,
    /// Why the attempt failed; `None` exactly when it was good.
    pub error: Option<ErrorCode>,
    /// The failure in words, for people.
    pub detail: Option<String>,
    /// Stage timings.
    pub timings: Timings,
    /// Status of the answer (the manifest's for `hls`).
    pub status: Option<u16>,
    /// The HLS tuple, for `hls` targets.
    pub hls: Option<HlsDetail>,
    /// The newest segment, for `hls` targets that got that far.
    pub segment: Option<SegmentReport>,
    /// TLS targets: when the certificate of the (first) completed handshake expires.
    pub cert_not_after: Option<Timestamp>,
}

impl AttemptReport {
    /// The attempt as a round reports it: stages, RTT (the total time) and error code.
    pub fn attempt(&self) -> Attempt {
        Attempt {
            stages: self.stages,
            rtt_us: u32::try_from(self.timings.total.as_micros()).unwrap_or(u32::MAX),
            error: self.error,
        }
    }

    /// True when the attempt was good.
    pub fn good(&self) -> bool {
        self.error.is_none()
    }
}

/// Makes one attempt against `target`, bounded by `timeout` as a whole, from the addresses
/// the kernel picks.
pub async fn attempt(target: &ProbeTarget, timeout: Duration) -> AttemptReport {
    attempt_from(target, timeout, SourceAddresses::default()).await
}

/// [`attempt`], leaving from `source` for the target's family when it has one.
pub async fn attempt_from(target: &ProbeTarget, timeout: Duration, source: SourceAddresses) -> AttemptReport {
    attempt_with(target, None, timeout, source).await
}

/// The request of an `http`/`https` target as bytes on the wire, encoded once for all its
/// attempts of a round.
pub(crate) fn prepare(target: &ProbeTarget) -> Option<Bytes> {
    match target.method {
        Method::Http | Method::Https => request_bytes(target).ok(),
        Method::Tcp | Method::Hls => None,
    }
}

/// The bytes an `http`/`https` attempt sends: the check's raw request exactly as written
/// (`Check::raw_request`), else its request built and encoded.
fn request_bytes(target: &ProbeTarget) -> Result<Bytes, Error> {
    match target.check.raw_request() {
        Some(raw) => Ok(Bytes::from(raw)),
        None => health::encode(&target.request_spec()),
    }
}

/// [`attempt`], with the request already built by [`prepare`] when there is one.
pub(crate) async fn attempt_with(
    target: &ProbeTarget,
    prepared: Option<&Bytes>,
    timeout: Duration,
    source: SourceAddresses,
) -> AttemptReport {
    let wire = Wire::new();
    let mut p = Progress {
        doing: "connecting",
        hls: (target.method == Method::Hls).then(HlsDetail::default),
        ..Progress::default()
    };
    let outcome = tokio::time::timeout(timeout, run(target, prepared, source, &mut p, &wire)).await;
    let total = wire.start().elapsed();
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(f)) => Some(f),
        Err(_) => Some(Failure::new(
            ErrorCode::Timeout,
            format!("no verdict within {} ms, {}", timeout.as_millis(), p.doing),
        )),
    };
    let mut stages = Stages::empty();
    for (reached, stage) in [
        (p.connected, Stages::CONNECTED),
        (wire.written() > 0, Stages::SENT),
        (wire.read() > 0, Stages::RECEIVED),
        (failure.is_none(), Stages::GOOD),
    ] {
        if reached {
            stages = stages.with(stage);
        }
    }
    let (error, detail) = match failure {
        Some(f) => (Some(f.code), Some(f.detail)),
        None => (None, None),
    };
    AttemptReport {
        stages,
        error,
        detail,
        timings: Timings { connect: p.connect, tls: p.tls, first_byte: wire.first_byte(), total },
        status: p.status,
        hls: p.hls,
        segment: p.segment,
        cert_not_after: p.cert_not_after,
    }
}

/// What an attempt has reached so far. It lives outside the attempt's future so that a
/// timeout, which drops the future, leaves it readable.
#[derive(Debug, Default)]
struct Progress {
    connected: bool,
    connect: Option<Duration>,
    tls: Option<Duration>,
    status: Option<u16>,
    hls: Option<HlsDetail>,
    segment: Option<SegmentReport>,
    cert_not_after: Option<Timestamp>,
    /// What the attempt is doing, for the timeout's detail.
    doing: &'static str,
}

impl Progress {
    fn hls(&mut self) -> &mut HlsDetail {
        self.hls.get_or_insert_with(HlsDetail::default)
    }
}

/// A failed attempt: its one code and what happened.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: ErrorCode,
    detail: String,
}

impl Failure {
    pub(crate) fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Failure { code, detail: detail.into() }
    }

    pub(crate) fn io(e: &std::io::Error, phase: Phase, what: &str) -> Self {
        Failure::new(code_for_io(e, phase), format!("{what}: {e}"))
    }

    fn hyper(e: &hyper::Error) -> Self {
        let detail = match io_source(e) {
            Some(io) => format!("{e}: {io}"),
            None => e.to_string(),
        };
        Failure::new(code_for_hyper(e), detail)
    }

    /// A failure while fetching the segment is a `segment` failure, except a timeout, which
    /// bounds the attempt as a whole, and a fetch the policy refused, which was never made.
    fn in_segment(self) -> Self {
        match self.code {
            ErrorCode::Timeout | ErrorCode::Policy => self,
            _ => Failure::new(ErrorCode::Segment, format!("segment: {}", self.detail)),
        }
    }

    /// The same for the variant playlist of a master playlist, which is part of the manifest.
    fn in_variant(self) -> Self {
        match self.code {
            ErrorCode::Timeout | ErrorCode::Policy => self,
            _ => Failure::new(ErrorCode::Manifest, format!("variant playlist: {}", self.detail)),
        }
    }
}

/// Where and how to connect.
#[derive(Debug, Clone)]
struct Endpoint {
    addr: SocketAddr,
    proxy_v1: bool,
    /// TLS with this SNI.
    tls: Option<ServerName<'static>>,
    /// Verify the certificate (the check's `verify`).
    verify: bool,
    /// Where connections leave from (for this and any other host an attempt reaches).
    sources: SourceAddresses,
    /// Where connections may go.
    fetch: Arc<FetchPolicy>,
}

impl Endpoint {
    fn of(t: &ProbeTarget, sources: SourceAddresses) -> Self {
        Endpoint {
            addr: t.addr,
            proxy_v1: t.proxy_v1,
            tls: t.uses_tls().then(|| tls::server_name(t.host(), t.addr.ip())),
            verify: t.check.verify(),
            sources,
            fetch: t.fetch.clone(),
        }
    }
}

async fn run(
    t: &ProbeTarget,
    prepared: Option<&Bytes>,
    sources: SourceAddresses,
    p: &mut Progress,
    wire: &Wire,
) -> Result<(), Failure> {
    let ep = Endpoint::of(t, sources);
    match t.method {
        Method::Tcp => connect(&ep, p).await.map(drop),
        Method::Http | Method::Https => http(t, prepared, &ep, p, wire).await,
        // Boxed: its state is the largest, and would otherwise size every attempt's future.
        Method::Hls => Box::pin(hls(t, &ep, p, wire)).await,
    }
}

async fn http(
    t: &ProbeTarget,
    prepared: Option<&Bytes>,
    ep: &Endpoint,
    p: &mut Progress,
    wire: &Wire,
) -> Result<(), Failure> {
    let expected = (!t.any_status).then(|| t.check.expected_response());
    let encoded;
    let request = match prepared {
        Some(req) => req,
        None => {
            encoded = request_bytes(t).map_err(invalid_request)?;
            &encoded
        }
    };
    let mut stream = connect(ep, p).await?;
    let expect = health::Expect {
        status: expected,
        close: t.check.expect_close(),
        block_pattern: t.check.block_pattern().map(str::as_bytes).filter(|p| !p.is_empty()),
        block_statuses: t.check.block_statuses(),
    };
    let status = health::exchange(&mut stream, request, &expect, &mut p.doing, &mut p.status, wire).await?;
    match expected {
        Some(expected) if status != expected => {
            Err(Failure::new(ErrorCode::Status, format!("status {status}, expected {expected}")))
        }
        _ => Ok(()),
    }
}

async fn hls(t: &ProbeTarget, ep: &Endpoint, p: &mut Progress, wire: &Wire) -> Result<(), Failure> {
    let expected = t.check.expected_response();
    let spec = t.request_spec();
    let req = build_request(&spec, &[("Cache-Control", "no-cache")]).map_err(invalid_request)?;
    let manifest_url = request_url(t, &spec).ok_or_else(|| {
        Failure::new(
            ErrorCode::Manifest,
            format!("no URL can be formed from the request target {:?}", spec.target),
        )
    })?;
    let stream = connect(ep, p).await?;
    p.hls().reachable = true;
    let reply = exchange(stream, req, MANIFEST_LIMIT, &mut p.doing, &mut p.status, wire).await?;
    p.hls().ttfb_ms = wire.first_read().map(ms);
    // A mirror's manifest is an answer whatever its status; its content is judged below.
    if reply.status != expected && !t.any_status {
        return Err(Failure::new(
            ErrorCode::Status,
            format!("manifest status {}, expected {expected}", reply.status),
        ));
    }
    if reply.truncated {
        return Err(Failure::new(
            ErrorCode::Manifest,
            format!("manifest larger than {MANIFEST_LIMIT} bytes"),
        ));
    }
    let manifest_error = |e: String| Failure::new(ErrorCode::Manifest, format!("manifest {e}"));
    let (segment_uri, playlist_url) = match hls::newest(&reply.body).map_err(manifest_error)? {
        Next::Segment(uri) => (uri, manifest_url.clone()),
        Next::Variant(uri) => {
            let variant_url = join(&manifest_url, &uri).map_err(manifest_error)?;
            p.doing = "fetching the variant playlist";
            let mut status = None;
            let reply = fetch(
                ep,
                (&manifest_url, &t.allowed_hosts),
                &variant_url,
                &[("Cache-Control", "no-cache")],
                MANIFEST_LIMIT,
                &mut p.doing,
                &mut status,
                wire,
            )
            .await
            .map_err(Failure::in_variant)?;
            if reply.status != expected {
                return Err(Failure::new(
                    ErrorCode::Manifest,
                    format!("variant playlist {variant_url} answered {}", reply.status),
                ));
            }
            match hls::newest(&reply.body).map_err(|e| manifest_error(format!("variant {e}")))? {
                Next::Segment(uri) => (uri, variant_url),
                Next::Variant(_) => {
                    return Err(Failure::new(
                        ErrorCode::Manifest,
                        "a variant playlist is itself a master playlist",
                    ));
                }
            }
        }
    };
    let segment_url = join(&playlist_url, &segment_uri).map_err(manifest_error)?;
    p.hls().manifest_valid = true;

    p.doing = "fetching the newest segment";
    p.segment = Some(SegmentReport { url: segment_url.to_string(), status: None });
    let mut status = None;
    let result = fetch(
        ep,
        (&manifest_url, &t.allowed_hosts),
        &segment_url,
        &[("Range", SEGMENT_RANGE)],
        SEGMENT_LIMIT,
        &mut p.doing,
        &mut status,
        wire,
    )
    .await;
    let now = SystemTime::now();
    if let Some(s) = &mut p.segment {
        s.status = status;
    }
    let reply = result.map_err(Failure::in_segment)?;
    if !matches!(reply.status, 200 | 206) {
        return Err(Failure::new(
            ErrorCode::Segment,
            format!("segment {segment_url} answered {}", reply.status),
        ));
    }
    p.hls().segment_fetchable = true;
    let age = hls::age(&reply.headers, now);
    p.hls().segment_age_s = age.map(|a| a.as_secs_f64());
    if let (Some(age), Some(max)) = (age, t.check.max_age_s())
        && age > Duration::from_secs(u64::from(max))
    {
        return Err(Failure::new(
            ErrorCode::Stale,
            format!("newest segment is {:.1} s old, more than {max} s", age.as_secs_f64()),
        ));
    }
    Ok(())
}

/// `GET url` for the HLS steps after the manifest: at the target (`ep`) when `url` has the
/// manifest's origin, else at the URL's own host (no PROXY header there).
#[allow(clippy::too_many_arguments)]
async fn fetch(
    ep: &Endpoint,
    (origin, allowed_hosts): (&Url, &[String]),
    url: &Url,
    extra: &[(&str, &str)],
    limit: usize,
    doing: &mut &'static str,
    status: &mut Option<u16>,
    wire: &Wire,
) -> Result<Reply, Failure> {
    let ep = if same_origin(origin, url) {
        ep.clone()
    } else {
        if !allowed_hosts
            .iter()
            .any(|h| url.host_str() == Some(h.as_str()) || authority(url).as_deref() == Some(h.as_str()))
        {
            return Err(Failure::new(
                ErrorCode::Policy,
                format!(
                    "{url} is not on the playlist's origin {}: not fetched (list its host in the monitor's allowed_hosts)",
                    &origin[..url::Position::BeforePath]
                ),
            ));
        }
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        let addr = resolve(host.trim_start_matches('[').trim_end_matches(']'), port)
            .await
            .map_err(|e| Failure::new(ErrorCode::Unreachable, e.to_string()))?;
        Endpoint {
            addr,
            proxy_v1: false,
            tls: (url.scheme() == "https").then(|| tls::server_name(host, addr.ip())),
            verify: ep.verify,
            sources: ep.sources,
            fetch: ep.fetch.clone(),
        }
    };
    let spec = RequestSpec {
        method: "GET".into(),
        target: url[url::Position::BeforePath..url::Position::AfterQuery].to_owned(),
        headers: vec![
            ("Host".into(), authority(url).unwrap_or_default()),
            ("User-Agent".into(), concat!("vantage-probe/", env!("CARGO_PKG_VERSION")).into()),
            ("Connection".into(), "close".into()),
        ],
    };
    let req = build_request(&spec, extra).map_err(invalid_request)?;
    let mut p = Progress::default();
    let stream = connect(&ep, &mut p).await?;
    exchange(stream, req, limit, doing, status, wire).await
}

/// Opens the connection: TCP, then the PROXY v1 header when asked, then TLS when asked.
async fn connect(ep: &Endpoint, p: &mut Progress) -> Result<Stream, Failure> {
    p.doing = "connecting";
    let started = Instant::now();
    let mut tcp = open(ep).await?;
    p.connect.get_or_insert(started.elapsed());
    // The attempt ends by closing with an RST rather than a FIN: no TIME_WAIT is left on the
    // prober for each attempt of each round (30,000 a round at 10,000 targets), and the close
    // costs one packet instead of four. By then the peer has answered and closed (or the
    // attempt has failed), so nothing of value is cut off.
    let _ = socket2::SockRef::from(&tcp).set_linger(Some(Duration::ZERO));
    if ep.proxy_v1 || ep.tls.is_some() {
        // More than one write goes out before the answer (PROXY header, TLS flights): do not
        // let Nagle hold the later ones back for the peer's delayed ACK.
        let _ = tcp.set_nodelay(true);
    }
    if ep.proxy_v1 {
        p.doing = "sending the PROXY header";
        let local = tcp.local_addr().map_err(|e| Failure::io(&e, Phase::Exchange, "PROXY header"))?;
        let header = ppp::v1::Addresses::from((local, ep.addr)).to_string();
        tcp.write_all(header.as_bytes())
            .await
            .map_err(|e| Failure::io(&e, Phase::Exchange, "PROXY header"))?;
    }
    let stream = match &ep.tls {
        None => Stream::Plain(tcp),
        Some(name) => {
            p.doing = "in the TLS handshake";
            let connector = tls::connector(ep.verify).map_err(|e| Failure::new(ErrorCode::Tls, e))?;
            let started = Instant::now();
            // Boxed: a handshake's state is large and plain connections should not carry it.
            let tls = Box::pin(connector.connect(name.clone(), tcp))
                .await
                .map_err(|e| Failure::io(&e, Phase::Tls, "TLS handshake"))?;
            p.tls.get_or_insert(started.elapsed());
            if p.cert_not_after.is_none() {
                p.cert_not_after = tls::not_after(tls.get_ref().1);
            }
            Stream::Tls(Box::new(tls))
        }
    };
    p.connected = true;
    Ok(stream)
}

/// The TCP connection, from the source address of the peer's family when there is one, to
/// an address the fetch policy allows (judged here, on the address about to be connected).
async fn open(ep: &Endpoint) -> Result<TcpStream, Failure> {
    ep.fetch.check(ep.addr).map_err(|r| Failure::new(ErrorCode::Policy, r.to_string()))?;
    let connect = |e: std::io::Error| Failure::io(&e, Phase::Connect, "connect");
    let socket =
        if ep.addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(connect)?;
    if let Some(source) = ep.sources.for_peer(ep.addr) {
        // Bind the address only: the kernel then picks the port at connect time, per
        // destination, so 10,000 bound sockets do not use up the ephemeral ports as a plain
        // bind to port 0 would. Without it (older kernels) the bind still works.
        #[cfg(target_os = "linux")]
        let _ = nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::IpBindAddressNoPort, &true);
        socket
            .bind(SocketAddr::new(source, 0))
            .map_err(|e| Failure::io(&e, Phase::Connect, &format!("binding the source address {source}")))?;
    }
    socket.connect(ep.addr).await.map_err(connect)
}

/// An answer.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: HeaderMap,
    /// The body, at most the limit.
    body: Bytes,
    /// The body was longer than the limit.
    truncated: bool,
}

/// The HTTP/1 client settings of every exchange.
fn client() -> http1::Builder {
    let mut b = http1::Builder::new();
    // Raw request lines are written in title case; keep the look of what the operator wrote.
    b.title_case_headers(true);
    b
}

/// Sends `req` over `stream` through hyper and reads the answer (up to `limit` body bytes).
async fn exchange(
    stream: Stream,
    req: Request<Empty<Bytes>>,
    limit: usize,
    doing: &mut &'static str,
    status: &mut Option<u16>,
    wire: &Wire,
) -> Result<Reply, Failure> {
    *doing = "sending the request";
    let io = TokioIo::new(Counted::new(stream, wire));
    let (mut sender, conn) =
        client().handshake::<_, Empty<Bytes>>(io).await.map_err(|e| Failure::hyper(&e))?;
    // The connection is driven here, not spawned, so that dropping the attempt (timeout)
    // drops the socket with it.
    let mut conn = pin!(conn);
    let reply = {
        let mut response = pin!(async {
            *doing = "waiting for the response";
            let resp = sender.send_request(req).await?;
            *status = Some(resp.status().as_u16());
            *doing = "reading the response body";
            let (parts, mut body) = resp.into_parts();
            let mut buf = BytesMut::new();
            let mut truncated = false;
            while let Some(frame) = body.frame().await {
                let frame = frame?;
                if let Some(data) = frame.data_ref() {
                    let room = limit.saturating_sub(buf.len());
                    if data.len() > room {
                        buf.extend_from_slice(&data[..room]);
                        truncated = true;
                        break;
                    }
                    buf.extend_from_slice(data);
                }
            }
            Ok::<_, hyper::Error>(Reply {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body: buf.freeze(),
                truncated,
            })
        });
        let mut finished = false;
        loop {
            tokio::select! {
                r = &mut response => break r,
                // A connection that ends first leaves the response to report why.
                _ = &mut conn, if !finished => finished = true,
            }
        }
    };
    reply.map_err(|e| Failure::hyper(&e))
}

/// The HTTP request of a spec, with `extra` headers the spec does not already have.
pub(crate) fn build_request(
    spec: &RequestSpec,
    extra: &[(&str, &str)],
) -> Result<Request<Empty<Bytes>>, Error> {
    let mut b = Request::builder().method(spec.method.as_str()).uri(spec.target.as_str());
    for (k, v) in &spec.headers {
        b = b.header(k.as_str(), v.as_str());
    }
    for (k, v) in extra {
        if !spec.headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(k)) {
            b = b.header(*k, *v);
        }
    }
    b.body(Empty::new())
        .map_err(|e| Error::Request(format!("{e} (method {:?}, target {:?})", spec.method, spec.target)))
}

/// A request that cannot be built is refused when the target is made
/// ([`ProbeTarget::validate`]); a target changed by hand afterwards fails its attempts with
/// `status`, the code of "this listener cannot give the expected answer".
fn invalid_request(e: Error) -> Failure {
    Failure::new(ErrorCode::Status, e.to_string())
}

/// The URL the request of `spec` names: its absolute target, or the target's scheme with the
/// `Host` header and the target path.
fn request_url(t: &ProbeTarget, spec: &RequestSpec) -> Option<Url> {
    if let Ok(u) = Url::parse(&spec.target)
        && u.has_host()
    {
        return Some(u);
    }
    let scheme = if t.uses_tls() { "https" } else { "http" };
    let host = spec
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map_or_else(|| t.host(), |(_, v)| v.as_str());
    Url::parse(&format!("{scheme}://{host}{}", spec.target)).ok()
}

fn join(base: &Url, reference: &str) -> Result<Url, String> {
    let url = base.join(reference).map_err(|e| format!("names {reference:?}, which is not a URL: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!("names {reference:?}, a {other} URL")),
    }
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_uris_resolve_against_the_playlist() {
        let base = Url::parse("http://edge.test:8080/live/a/index.m3u8?token=1").unwrap();
        assert_eq!(join(&base, "seg/3.ts").unwrap().as_str(), "http://edge.test:8080/live/a/seg/3.ts");
        assert_eq!(join(&base, "../b/3.ts").unwrap().as_str(), "http://edge.test:8080/live/b/3.ts");
        assert_eq!(join(&base, "/abs/3.ts").unwrap().as_str(), "http://edge.test:8080/abs/3.ts");
        let other = join(&base, "https://cdn.test/3.ts").unwrap();
        assert!(!same_origin(&base, &other));
        assert!(same_origin(&base, &join(&base, "x.ts").unwrap()));
        assert!(join(&base, "data:,hello").is_err());
    }

    #[test]
    fn extra_headers_do_not_duplicate_the_spec() {
        let spec = RequestSpec {
            method: "GET".into(),
            target: "/m.m3u8".into(),
            headers: vec![("cache-control".into(), "max-age=0".into())],
        };
        let req = build_request(&spec, &[("Cache-Control", "no-cache"), ("Range", "bytes=0-1")]).unwrap();
        let cc: Vec<_> = req.headers().get_all("cache-control").iter().collect();
        assert_eq!(cc, ["max-age=0"]);
        assert_eq!(req.headers()["range"], "bytes=0-1");
    }

    #[test]
    fn report_maps_to_the_core_attempt() {
        let r = AttemptReport {
            stages: Stages::ALL,
            error: None,
            detail: None,
            timings: Timings { total: Duration::from_micros(1234), ..Timings::default() },
            status: Some(200),
            hls: None,
            segment: None,
            cert_not_after: None,
        };
        let a = r.attempt();
        assert!(a.good());
        assert_eq!(a.rtt_us, 1234);
        let slow = AttemptReport {
            timings: Timings { total: Duration::from_secs(10_000), ..Timings::default() },
            ..r
        };
        assert_eq!(slow.attempt().rtt_us, u32::MAX, "saturates");
    }
}
