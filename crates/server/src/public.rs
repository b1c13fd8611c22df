//! The public face's listener (`/go`, `/steer`, `/healthz`): one thread per core, each with a
//! runtime of its own and its own socket on the shared port (`SO_REUSEPORT`: the kernel
//! spreads connections over them by flow). A visitor's connection lives on one thread from
//! accept to close, as in nginx's worker processes, so the hot path of a mirror network has
//! no wake-ups between the workers of a shared runtime — which is where a redirect spent most
//! of its time (docs/BENCHMARKS.md, "Door redirects"). The admin API and the agent channel
//! stay on the main runtime: they are not where the visitors are. A door's `GET` is answered
//! straight from the doors snapshot, without the router and its layers (a redirect reads no
//! body, so the request deadline has nothing to bound); every other request goes through the
//! router.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use futures_util::future::Either;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::doors;
use crate::app::App;
use crate::listen::{ConnectionService, HttpLimits};

/// The listening sockets, one per thread, all on one address.
#[derive(Debug)]
pub(crate) struct Bound {
    sockets: Vec<std::net::TcpListener>,
    /// Where they listen (the port chosen when the settings said 0).
    pub(crate) addr: SocketAddr,
}

/// Binds one socket per core on `addr`.
pub(crate) fn bind(addr: SocketAddr) -> io::Result<Bound> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let first = socket(addr)?;
    let addr = first.local_addr()?;
    let mut sockets = vec![first];
    for _ in 1..threads {
        sockets.push(socket(addr)?);
    }
    Ok(Bound { sockets, addr })
}

fn socket(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    // Only sockets of the same user can join the group on Linux.
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

/// Serves the public face (`router` behind the doors' own path) on every socket of `bound`,
/// each on a thread of its own, until `stop` turns true; the task returned ends once every
/// thread has drained its connections.
pub(crate) fn serve(
    bound: Bound,
    app: &Arc<App>,
    router: axum::Router,
    limits: HttpLimits,
    gate: Arc<vantage_dns::listen::Gate>,
    stop: watch::Receiver<bool>,
) -> io::Result<JoinHandle<()>> {
    let mut threads = Vec::with_capacity(bound.sockets.len());
    for (i, socket) in bound.sockets.into_iter().enumerate() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (app, router, gate, stop) = (app.clone(), router.clone(), gate.clone(), stop.clone());
        let thread = std::thread::Builder::new().name(format!("public-{i}")).spawn(move || {
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(socket) {
                    Ok(listener) => {
                        let service = move |peer| face(app.clone(), router.clone(), peer);
                        crate::server::serve_http(service, listener, None, (limits, gate), stop).await
                    }
                    Err(e) => tracing::error!(error = %e, "public listener: cannot use the socket"),
                }
            })
        })?;
        threads.push(thread);
    }
    Ok(tokio::task::spawn_blocking(move || {
        for t in threads {
            let _ = t.join();
        }
    }))
}

/// A connection's service: doors answered here, the rest by `router`.
fn face(app: Arc<App>, router: axum::Router, peer: SocketAddr) -> impl ConnectionService {
    hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        match doors::route_of(req.method(), req.uri().path()) {
            Some(route) => {
                let answer = doors::redirect(&app, req.uri(), req.headers(), peer);
                app.metrics().request(route.into(), "GET", answer.status().as_u16());
                Either::Left(std::future::ready(Ok(answer)))
            }
            None => Either::Right(crate::listen::routed(&router, req, ConnectInfo(peer))),
        }
    })
}
