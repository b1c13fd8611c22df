//! The exchange of an `http` or `https` health check: one request per connection, so no
//! HTTP client is needed, only a small state machine over the stream — write the request
//! (encoded once per target), read until `httparse` sees a complete response head; then, for
//! a status the check names as a block page, stop there; for an answer of the expected status
//! (any status, for a mirror), search its body when the check has a block-page pattern (the
//! `block` module) and, with `expect_close`, read on until the peer closes.
//!
//! Why not hyper here: a hyper connection carries read and write buffers and a dispatch
//! channel (about 24 KiB in flight per connection), which at 10,000 silent targets is most of
//! a prober's memory, and its per-connection set-up is most of its CPU at high rates. A
//! health answer needs none of it: the verdict is the status line. The read buffer is
//! allocated only when the first bytes arrive, so a target that never answers costs the
//! socket and this future and nothing more. `hls` keeps hyper (bodies, headers, chunking).

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vantage_core::check::RequestSpec;
use vantage_core::result::ErrorCode;

use crate::attempt::{Failure, build_request};
use crate::block::{Framing, Scan, Scanned};
use crate::classify::Phase;
use crate::error::Error;
use crate::wire::{Stream, Wire};

/// Longest response head read; a longer one is not a health answer (`status`).
const HEAD_LIMIT: usize = 64 * 1024;
/// Room made before each read: a typical health answer's head fits the first read.
const READ_ROOM: usize = 1024;
/// Headers parsed on the stack; a head with more is parsed again on the heap.
const STACK_HEADERS: usize = 32;
/// Headers accepted at most.
const MAX_HEADERS: usize = 1024;

/// The request of a spec as bytes on the wire: `METHOD target HTTP/1.1`, then the headers
/// as written (names keep the operator's case), then the blank line. Validated first with
/// the same rules as every other request of the engine ([`build_request`]), so a spec that
/// could not be sent is refused here too.
pub(crate) fn encode(spec: &RequestSpec) -> Result<Bytes, Error> {
    build_request(spec, &[])?;
    let mut out = Vec::with_capacity(
        spec.method.len()
            + spec.target.len()
            + 16
            + spec.headers.iter().map(|(k, v)| k.len() + v.len() + 4).sum::<usize>(),
    );
    for part in [spec.method.as_bytes(), b" ", spec.target.as_bytes(), b" HTTP/1.1\r\n"] {
        out.extend_from_slice(part);
    }
    for (name, value) in &spec.headers {
        for part in [name.as_bytes(), b": ", value.as_bytes(), b"\r\n"] {
            out.extend_from_slice(part);
        }
    }
    out.extend_from_slice(b"\r\n");
    Ok(Bytes::from(out))
}

/// What a health check expects of the answer beyond its head.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect<'a> {
    /// The expected status: only an answer of it is read past its head. `None`: any status is
    /// an answer (a mirror), and every answer is read on.
    pub(crate) status: Option<u16>,
    /// Read on until the peer closes (the check's `expect_close`).
    pub(crate) close: bool,
    /// The check's block-page pattern (never empty).
    pub(crate) block_pattern: Option<&'a [u8]>,
    /// Statuses that are a block page by themselves, sorted (the check's `block_statuses`).
    pub(crate) block_statuses: &'a [u16],
}

/// Sends `request` over `stream` and reads the answer's status into `status`.
///
/// An answer of one of the check's block statuses fails as `blocked` at its head: a block
/// page says what it is by its status, and its body adds nothing.
///
/// An answer of the expected status is read on: with a block-page pattern, its body (within
/// the `block` module's bound), and a body containing the pattern fails as `blocked` at once;
/// with `expect_close`, until the peer closes the connection, as Varnish's `expect_close`
/// does (a peer that keeps it open runs into the attempt's timeout). Without either the
/// verdict is taken at the end of the head: the body of a health answer says nothing the
/// status does not.
pub(crate) async fn exchange(
    stream: &mut Stream,
    request: &[u8],
    expect: &Expect<'_>,
    doing: &mut &'static str,
    status: &mut Option<u16>,
    wire: &Wire,
) -> Result<u16, Failure> {
    *doing = "sending the request";
    let sending = |e: std::io::Error| Failure::io(&e, Phase::Exchange, "sending the request");
    let mut sent = 0;
    while sent < request.len() {
        let n = stream.write(&request[sent..]).await.map_err(sending)?;
        if n == 0 {
            return Err(Failure::new(ErrorCode::Reset, "the connection closed while sending the request"));
        }
        wire.wrote(n);
        sent += n;
    }
    stream.flush().await.map_err(sending)?;

    *doing = "waiting for the response";
    let reading = |e: std::io::Error| Failure::io(&e, Phase::Exchange, "reading the response");
    // No buffer until the peer has something to say (see the module docs).
    stream.readable().await;
    let mut buf = Vec::new();
    let code = loop {
        match parse_head(&buf)? {
            Head::Final(code) => break code,
            Head::Interim(len) => {
                buf.drain(..len);
                continue;
            }
            Head::Partial if buf.len() >= HEAD_LIMIT => {
                return Err(Failure::new(
                    ErrorCode::Status,
                    format!("response head longer than {HEAD_LIMIT} bytes"),
                ));
            }
            Head::Partial => {}
        }
        let n = read_some(stream, &mut buf).await.map_err(reading)?;
        if n == 0 {
            let when = if buf.is_empty() { "without answering" } else { "within the response head" };
            return Err(Failure::new(ErrorCode::Reset, format!("the peer closed the connection {when}")));
        }
        wire.got(n);
    };
    *status = Some(code);
    if expect.block_statuses.binary_search(&code).is_ok() {
        return Err(Failure::new(
            ErrorCode::Blocked,
            format!("status {code} is one of the check's block statuses"),
        ));
    }
    if expect.status.is_some_and(|s| s != code) {
        return Ok(code);
    }
    let mut closed = false;
    if let Some(pattern) = expect.block_pattern {
        *doing = "reading the response body";
        let (head_len, framing) = body_start(&buf, request.starts_with(b"HEAD "));
        let mut scan = Scan::new(pattern, framing);
        let mut scanned = scan.feed(buf.get(head_len..).unwrap_or_default());
        while scanned == Scanned::More {
            buf.clear();
            match read_some(stream, &mut buf).await {
                Ok(n) if n > 0 => {
                    wire.got(n);
                    scanned = scan.feed(&buf);
                }
                // A close ends the body; so does an error after a complete head, as below.
                Ok(_) | Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        if scanned == Scanned::Found {
            return Err(Failure::new(
                ErrorCode::Blocked,
                format!(
                    "the response body contains the block-page pattern {:?}",
                    String::from_utf8_lossy(pattern)
                ),
            ));
        }
    }
    if expect.close && !closed {
        *doing = "waiting for the peer to close the connection";
        buf.clear();
        // An error after a complete answer also ends the connection: that is a close.
        while let Ok(n) = read_some(stream, &mut buf).await {
            if n == 0 {
                break;
            }
            wire.got(n);
            buf.clear();
        }
    }
    Ok(code)
}

/// Reads what is there into the spare room of `buf`, making room first.
async fn read_some(stream: &mut Stream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < READ_ROOM / 4 {
        buf.reserve(READ_ROOM.max(buf.len()));
    }
    stream.read_buf(buf).await
}

/// How far the bytes read so far go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    /// Not a complete head yet.
    Partial,
    /// A complete interim (1xx other than 101) head of this many bytes: the answer follows.
    Interim(usize),
    /// A complete final head with this status.
    Final(u16),
}

/// Parses the response head at the start of `buf`. Bytes that are not an HTTP/1 response
/// mean something other than the expected listener answers: `status`, as for any answer
/// that is not the expected one.
fn parse_head(buf: &[u8]) -> Result<Head, Failure> {
    parse(buf, |parsed, response| match parsed {
        httparse::Status::Partial => Ok(Head::Partial),
        httparse::Status::Complete(len) => match response.code {
            Some(code) if (100..200).contains(&code) && code != 101 => Ok(Head::Interim(len)),
            Some(code) => Ok(Head::Final(code)),
            // A complete parse always has a status; treat the impossible as not HTTP.
            None => Err(httparse::Error::Status),
        },
    })
    .and_then(std::convert::identity)
    .map_err(|e| Failure::new(ErrorCode::Status, format!("not an HTTP response: {e}")))
}

/// Where the body of the final head at the start of `buf` begins, and how it ends. Parsed
/// again rather than kept from [`parse_head`], so that checks without a block-page pattern
/// never look at the headers.
fn body_start(buf: &[u8], head_request: bool) -> (usize, Framing) {
    let parsed = parse(buf, |parsed, response| match parsed {
        httparse::Status::Complete(len) => {
            Some((len, Framing::of(response.code.unwrap_or_default(), response.headers, head_request)))
        }
        httparse::Status::Partial => None,
    });
    // The head parsed complete a moment ago; should it not now, no byte of it is body.
    parsed.ok().flatten().unwrap_or((buf.len(), Framing::UntilClose))
}

/// Parses a response head with its headers on the stack, or on the heap when there are more,
/// and reads it with `read`.
fn parse<T>(
    buf: &[u8],
    read: impl Fn(httparse::Status<usize>, &httparse::Response<'_, '_>) -> T,
) -> Result<T, httparse::Error> {
    let mut stack = [httparse::EMPTY_HEADER; STACK_HEADERS];
    let mut response = httparse::Response::new(&mut stack);
    match response.parse(buf) {
        Err(httparse::Error::TooManyHeaders) => {
            let mut heap = vec![httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut heap);
            let parsed = response.parse(buf)?;
            Ok(read(parsed, &response))
        }
        other => other.map(|parsed| read(parsed, &response)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_encoded_as_written() {
        let spec = RequestSpec {
            method: "HEAD".into(),
            target: "/raw?x=1".into(),
            headers: vec![("Host".into(), "example.com".into()), ("x-Magic".into(), "yes".into())],
        };
        let bytes = encode(&spec).unwrap();
        assert_eq!(&bytes[..], b"HEAD /raw?x=1 HTTP/1.1\r\nHost: example.com\r\nx-Magic: yes\r\n\r\n");
        let bad = RequestSpec { method: "G T".into(), ..spec };
        assert!(matches!(encode(&bad), Err(Error::Request(_))));
    }

    #[test]
    fn heads_partial_interim_final_and_garbage() {
        assert_eq!(parse_head(b"").unwrap(), Head::Partial);
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap(), Head::Partial);
        assert_eq!(parse_head(b"HTTP/1.1 503 Busy\r\nA: b\r\n\r\nbody").unwrap(), Head::Final(503));
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
        assert_eq!(parse_head(interim).unwrap(), Head::Interim(interim.len()));
        assert_eq!(parse_head(b"HTTP/1.1 101 Switching\r\n\r\n").unwrap(), Head::Final(101));
        assert_eq!(parse_head(b"HTTP/1.0 204 \r\n\r\n").unwrap(), Head::Final(204));
        let e = parse_head(b"SSH-2.0-OpenSSH_9.6\r\n").unwrap_err();
        assert_eq!(e.code, ErrorCode::Status);
        assert!(parse_head(b"\x16\x03\x01\x02\x00").is_err(), "a TLS record is not HTTP");
    }

    #[test]
    fn many_headers_are_parsed_on_the_heap_and_too_many_refused() {
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..100 {
            head.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        assert_eq!(parse_head(&head).unwrap(), Head::Final(200));
        let mut huge = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            huge.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        huge.extend_from_slice(b"\r\n");
        assert_eq!(parse_head(&huge).unwrap_err().code, ErrorCode::Status);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for len in 0..400 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    if seed.is_multiple_of(3) {
                        b"HTTP/1.1 200\r\n:"[(seed % 15) as usize]
                    } else {
                        seed as u8
                    }
                })
                .collect();
            let _ = parse_head(&bytes);
        }
    }
}
