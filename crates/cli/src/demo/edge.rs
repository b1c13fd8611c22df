//! The demo's edge servers: a small HTTP server per loopback address that answers the health
//! check (`GET /.vantage/health` → `200 ok`, any `Host`) and can be stopped and started again
//! on the same address, so the probers see refused connections in between.

use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The path every edge answers (the cluster's default check path).
pub(crate) const HEALTH_PATH: &str = "/.vantage/health";

/// One edge: a listener on `addr` while it runs.
#[derive(Debug)]
pub(crate) struct Edge {
    addr: SocketAddr,
    task: Option<JoinHandle<()>>,
}

impl Edge {
    /// Listens on `addr` (port 0: a free port) and serves.
    pub(crate) fn start(addr: SocketAddr) -> io::Result<Edge> {
        let listener = bind(addr)?;
        let addr = listener.local_addr()?;
        Ok(Edge { addr, task: Some(tokio::spawn(serve(listener))) })
    }

    /// The address it listens on (and listens on again after [`Edge::restart`]).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// True while the listener is open.
    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Closes the listener and every open connection: from now on connections are refused.
    pub(crate) async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            // Once the aborted task has ended, the listener and its connections are closed.
            let _ = task.await;
        }
    }

    /// Listens on the same address again.
    pub(crate) async fn restart(&mut self) -> io::Result<()> {
        self.stop().await;
        let listener = bind(self.addr)?;
        self.task = Some(tokio::spawn(serve(listener)));
        Ok(())
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Starts one edge on each of `ips`, all on one port that is free on every address.
pub(crate) fn start_all(ips: &[IpAddr]) -> io::Result<Vec<Edge>> {
    let Some(first) = ips.first() else { return Ok(Vec::new()) };
    let mut last_error = None;
    for _ in 0..32 {
        let mut edges = vec![Edge::start(SocketAddr::new(*first, 0))?];
        let port = edges[0].addr().port();
        let mut complete = true;
        for ip in &ips[1..] {
            match Edge::start(SocketAddr::new(*ip, port)) {
                Ok(e) => edges.push(e),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                    // Someone holds this port on another address: try another port.
                    last_error = Some(e);
                    complete = false;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if complete {
            return Ok(edges);
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no port is free on every edge address")))
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // A restart binds the address again while old connections sit in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn serve(listener: TcpListener) {
    // The connections belong to this task: aborting it closes every one of them.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    conns.spawn(connection(stream));
                }
                Err(e) => {
                    // Out of file descriptors, typically: back off instead of spinning.
                    tracing::debug!(error = %e, "edge accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn connection(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let svc = service_fn(|req: Request<Incoming>| async move { Ok::<_, Infallible>(respond(&req)) });
    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
}

/// `GET`/`HEAD /.vantage/health` → 200 `ok` whatever the `Host`; anything else → 404.
fn respond(req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let health = req.uri().path() == HEALTH_PATH && matches!(*req.method(), Method::GET | Method::HEAD);
    let (status, body) = if health {
        (StatusCode::OK, &b"ok\n"[..])
    } else {
        (StatusCode::NOT_FOUND, &b"this demo edge only answers GET /.vantage/health\n"[..])
    };
    let mut r = Response::new(Full::new(Bytes::from_static(body)));
    *r.status_mut() = status;
    r
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    fn get(addr: SocketAddr, path: &str) -> io::Result<String> {
        let mut s = std::net::TcpStream::connect(addr)?;
        write!(s, "GET {path} HTTP/1.1\r\nHost: anything.example\r\nConnection: close\r\n\r\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_health_refuses_when_stopped_and_comes_back() {
        let ips: Vec<IpAddr> = (31..34).map(|i| IpAddr::from([127, 0, 0, i])).collect();
        let mut edges = start_all(&ips).unwrap();
        let port = edges[0].addr().port();
        assert!(edges.iter().all(|e| e.addr().port() == port && e.is_running()));
        let addr = edges[1].addr();
        let ok = tokio::task::spawn_blocking(move || get(addr, HEALTH_PATH)).await.unwrap().unwrap();
        assert!(ok.starts_with("HTTP/1.1 200") && ok.ends_with("ok\n"), "{ok}");
        let other = tokio::task::spawn_blocking(move || get(addr, "/")).await.unwrap().unwrap();
        assert!(other.starts_with("HTTP/1.1 404"), "{other}");

        edges[1].stop().await;
        assert!(!edges[1].is_running());
        let refused = std::net::TcpStream::connect(addr).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);

        edges[1].restart().await.unwrap();
        let ok = tokio::task::spawn_blocking(move || get(addr, HEALTH_PATH)).await.unwrap().unwrap();
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    }
}
