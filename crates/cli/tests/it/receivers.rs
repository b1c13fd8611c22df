//! What alerts are delivered to, on 127.0.0.1: an HTTP receiver keeping every JSON body by
//! path (webhooks, Slack, PagerDuty), and an SMTP server keeping every message.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A webhook receiver on 127.0.0.1: every JSON body it gets, by path.
pub(crate) struct Receiver {
    pub(crate) url: String,
    pub(crate) got: Arc<Mutex<Vec<(String, Value)>>>,
}

pub(crate) async fn receiver() -> Receiver {
    let got: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let sink = got.clone();
    let app = axum::Router::new().route(
        "/{kind}",
        post(move |axum::extract::Path(kind): axum::extract::Path<String>, Json(v): Json<Value>| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push((kind, v));
                "ok"
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await });
    Receiver { url, got }
}

impl Receiver {
    /// Waits (at most `limit`) until the bodies satisfy `f`.
    pub(crate) async fn wait(&self, limit: Duration, f: impl Fn(&[(String, Value)]) -> bool) {
        until_got(&self.got, limit, "the webhooks", f).await;
    }
}

/// Waits (at most `limit`) until what `what` got satisfies `f`.
async fn until_got<T: std::fmt::Debug>(
    got: &Mutex<Vec<T>>,
    limit: Duration,
    what: &str,
    f: impl Fn(&[T]) -> bool,
) {
    let started = Instant::now();
    loop {
        if f(&got.lock().unwrap()) {
            return;
        }
        assert!(started.elapsed() < limit, "{what} got: {:?}", got.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An SMTP server on 127.0.0.1 that takes every message (plain, no authentication), as a
/// local relay would, and keeps each one's text (headers and body).
pub(crate) struct SmtpSink {
    pub(crate) addr: SocketAddr,
    pub(crate) got: Arc<Mutex<Vec<String>>>,
}

impl SmtpSink {
    pub(crate) async fn start() -> SmtpSink {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let got: Arc<Mutex<Vec<String>>> = Arc::default();
        let keep = got.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = l.accept().await {
                tokio::spawn(session(conn, keep.clone()));
            }
        });
        SmtpSink { addr, got }
    }

    /// Waits (at most `limit`) until the messages satisfy `f`.
    pub(crate) async fn wait(&self, limit: Duration, f: impl Fn(&[String]) -> bool) {
        until_got(&self.got, limit, "the SMTP sink", f).await;
    }
}

/// One SMTP session (RFC 5321's commands a client sends one message with), bounded: a line
/// of at most 64 KiB, a message of at most 1 MiB.
async fn session(conn: tokio::net::TcpStream, got: Arc<Mutex<Vec<String>>>) {
    let (r, mut w) = conn.into_split();
    let mut r = BufReader::new(r);
    let _ = w.write_all(b"220 sink.test ESMTP\r\n").await;
    let mut line = String::new();
    loop {
        line.clear();
        match tokio::time::timeout(Duration::from_secs(30), r.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 && line.len() <= 65_536 => {}
            _ => return,
        }
        let verb = line.get(..4).unwrap_or_default().to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" | "HELO" => b"250 sink.test\r\n",
            "MAIL" | "RCPT" | "RSET" | "NOOP" => b"250 OK\r\n",
            "QUIT" => {
                let _ = w.write_all(b"221 bye\r\n").await;
                return;
            }
            "DATA" => {
                let _ = w.write_all(b"354 end with <CRLF>.<CRLF>\r\n").await;
                let mut message = String::new();
                loop {
                    line.clear();
                    match r.read_line(&mut line).await {
                        Ok(n) if n > 0 && message.len() < 1 << 20 => {}
                        _ => return,
                    }
                    if line == ".\r\n" {
                        break;
                    }
                    message.push_str(&line);
                }
                got.lock().unwrap().push(message);
                b"250 queued\r\n"
            }
            _ => b"502 not here\r\n",
        };
        if w.write_all(reply).await.is_err() {
            return;
        }
    }
}
