//! The byte stream of an attempt (plain TCP or TLS over it) and the counters that say what
//! crossed it: request bytes written and response bytes read, with the time of the first of
//! each. The counters live outside the attempt's future, so a timeout that drops the future
//! still leaves them readable.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A connection to a target.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

impl Stream {
    /// Waits until a plain connection has something to read (bytes, a close or an error), so
    /// that a read buffer can be allocated only then. A TLS stream returns at once: its
    /// readiness is rustls's, and its buffers exist anyway.
    pub(crate) async fn readable(&self) {
        if let Stream::Plain(s) = self {
            // An error shows again, with its detail, in the read that follows.
            let _ = s.readable().await;
        }
    }
}

/// What crossed the wire in one attempt.
#[derive(Debug)]
pub(crate) struct Wire {
    start: Instant,
    written: AtomicU64,
    read: AtomicU64,
    /// Nanoseconds after `start` plus one; zero while nothing happened.
    first_write: AtomicU64,
    first_read: AtomicU64,
}

impl Wire {
    pub(crate) fn new() -> Self {
        Wire {
            start: Instant::now(),
            written: AtomicU64::new(0),
            read: AtomicU64::new(0),
            first_write: AtomicU64::new(0),
            first_read: AtomicU64::new(0),
        }
    }

    /// When the attempt started.
    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    pub(crate) fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Time from the start of the attempt to the first byte read.
    pub(crate) fn first_read(&self) -> Option<Duration> {
        at(&self.first_read)
    }

    /// Time from the first request byte written to the first response byte read.
    pub(crate) fn first_byte(&self) -> Option<Duration> {
        Some(at(&self.first_read)?.saturating_sub(at(&self.first_write)?))
    }

    /// Counts `n` request bytes written.
    pub(crate) fn wrote(&self, n: usize) {
        self.mark(&self.written, &self.first_write, n);
    }

    /// Counts `n` response bytes read.
    pub(crate) fn got(&self, n: usize) {
        self.mark(&self.read, &self.first_read, n);
    }

    fn mark(&self, counter: &AtomicU64, first: &AtomicU64, n: usize) {
        if n == 0 {
            return;
        }
        counter.fetch_add(n as u64, Ordering::Relaxed);
        let ns = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        let _ = first.compare_exchange(0, ns + 1, Ordering::Relaxed, Ordering::Relaxed);
    }
}

fn at(cell: &AtomicU64) -> Option<Duration> {
    match cell.load(Ordering::Relaxed) {
        0 => None,
        ns => Some(Duration::from_nanos(ns - 1)),
    }
}

/// A stream that counts into a [`Wire`].
#[derive(Debug)]
pub(crate) struct Counted<'w> {
    inner: Stream,
    wire: &'w Wire,
}

impl<'w> Counted<'w> {
    pub(crate) fn new(inner: Stream, wire: &'w Wire) -> Self {
        Counted { inner, wire }
    }
}

impl AsyncRead for Counted<'_> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let n = buf.filled().len() - before;
            this.wire.got(n);
        }
        r
    }
}

impl AsyncWrite for Counted<'_> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.wire.wrote(n);
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            this.wire.wrote(n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
