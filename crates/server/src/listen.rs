//! How the admin API and the agent channel hold their connections, so that no unauthenticated
//! client can wear the server down: each listener admits at most so many connections, and so
//! many per source address (`vantage_dns::listen::Gate`); a connection must send its request
//! head within [`HEADER_TIMEOUT`] into a head buffer of at most [`MAX_HEAD`]; one on which no
//! byte moves for the listener's idle timeout is closed; every request must be done within its
//! deadline (a slow body gets a 408). The caps come from the open-file limit, raised to the
//! hard limit at start, less a reserve for the database, the DNS sockets and the runtime.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use vantage_dns::listen::{Activity, Limits};

use crate::error::ApiError;

/// A request head must arrive within this long of the connection opening (or of the previous
/// response, on a kept-alive connection).
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A TLS handshake must be done within this long of the connection opening.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head read (hyper's buffer; a longer head gets 431).
pub(crate) const MAX_HEAD: usize = 16 << 10;
/// Descriptors kept back from the listeners for everything else.
const RESERVED_FDS: u64 = 128;
/// After a stop, connections get this long to finish what they are doing.
const DRAIN: Duration = Duration::from_secs(5);

/// What one listener allows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HttpLimits {
    pub(crate) gate: Limits,
    /// No byte moved for this long: the connection is closed.
    pub(crate) idle: Duration,
    /// A request must be answered within this long (the body read included).
    pub(crate) deadline: Duration,
}

/// The limits of every listener, shared out of the open-file limit `nofile`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListenerLimits {
    pub(crate) api: HttpLimits,
    pub(crate) channel: HttpLimits,
    pub(crate) dns_tcp: Limits,
}

impl ListenerLimits {
    /// A quarter of the descriptors left after the reserve for the admin API, half for the
    /// agent channel, a quarter for DNS over TCP, each under a fixed ceiling; one source may
    /// hold at most a quarter of a listener's connections (and a fixed number).
    pub(crate) fn of(nofile: u64) -> ListenerLimits {
        let budget = usize::try_from(nofile.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX).max(16);
        let limits = |share: usize, ceiling: usize, per_source: usize| {
            let total = share.min(ceiling);
            Limits { total, per_source: per_source.min(total / 4).max(1) }
        };
        ListenerLimits {
            api: HttpLimits {
                gate: limits(budget / 4, 4096, 64),
                idle: Duration::from_secs(30),
                deadline: Duration::from_secs(30),
            },
            // Longer than a held-open recheck request (25 s), during which nothing moves.
            channel: HttpLimits {
                gate: limits(budget / 2, 16_384, 256),
                idle: Duration::from_secs(60),
                deadline: Duration::from_secs(60),
            },
            dns_tcp: limits(budget / 4, 1024, 64),
        }
    }
}

/// Raises the open-file limit to the hard limit and returns the soft limit in force.
pub(crate) fn raise_nofile() -> u64 {
    let limit = vantage_probe::raise_nofile_limit();
    match &limit.error {
        Some(e) => tracing::warn!(soft = limit.soft, hard = limit.hard, "{e}"),
        None => tracing::info!(before = limit.before, soft = limit.soft, "open-file limit"),
    }
    limit.soft
}

/// Serves one connection with `svc` until it ends, goes idle, or `stop` turns true (then it
/// gets [`DRAIN`] to finish). `activity` must be the one `io` touches.
pub(crate) async fn serve<I, S>(
    io: I,
    activity: Activity,
    svc: S,
    limits: HttpLimits,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: ConnectionService,
{
    // HTTP/1.1 only (the channel's TLS offers nothing else, browsers speak it to a plain
    // listener): guessing the version would read the first bytes with no timeout at all.
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD);
    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended");
            }
        }
        () = activity.idle_for(limits.idle) => tracing::debug!("idle connection closed"),
        () = crate::support::stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN, conn).await;
        }
    }
}

/// `router` with every request bounded by `deadline` (see [`deadline`](fn@deadline)).
pub(crate) fn bounded(router: axum::Router, deadline: Duration) -> axum::Router {
    router.layer(axum::middleware::from_fn(move |req, next| self::deadline(deadline, req, next)))
}

/// What serves one HTTP connection: hyper's service over axum's responses, which never fails
/// (a refusal is a response).
pub(crate) trait ConnectionService:
    hyper::service::Service<
        hyper::Request<hyper::body::Incoming>,
        Response = Response,
        Error = Infallible,
        Future: Send + 'static,
    > + Send
    + 'static
{
}

impl<S> ConnectionService for S where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = Response,
            Error = Infallible,
            Future: Send + 'static,
        > + Send
        + 'static
{
}

/// `router` as a connection's service, each request carrying `ext` (who is on the other end).
pub(crate) fn with_extension<T: Clone + Send + Sync + 'static>(
    router: axum::Router,
    ext: T,
) -> impl ConnectionService {
    hyper::service::service_fn(move |req| routed(&router, req, ext.clone()))
}

/// `req` answered by `router`, carrying `ext`.
pub(crate) fn routed<T: Clone + Send + Sync + 'static>(
    router: &axum::Router,
    mut req: hyper::Request<hyper::body::Incoming>,
    ext: T,
) -> impl Future<Output = Result<Response, Infallible>> + Send + use<T> {
    req.extensions_mut().insert(ext);
    tower::ServiceExt::oneshot(router.clone(), req.map(axum::body::Body::new))
}

/// Middleware: a request not answered within `deadline` (a body trickling in, most often) is
/// refused with 408.
pub(crate) async fn deadline(
    deadline: Duration,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match tokio::time::timeout(deadline, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::TimedOut(format!(
            "the request was not complete within {} s; send it again, faster",
            deadline.as_secs()
        ))
        .into_response(),
    }
}

/// A stream that notes in an [`Activity`] whenever bytes move.
#[derive(Debug)]
pub(crate) struct Watched<S> {
    inner: S,
    activity: Activity,
}

impl<S> Watched<S> {
    /// `inner`, noting in `activity`.
    pub(crate) fn new(inner: S, activity: Activity) -> Self {
        activity.touch();
        Watched { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
