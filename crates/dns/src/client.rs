//! One DNS question over UDP, the way `dig +short NAME A` asks it, from the loopback address of
//! the server's family (as a `dig` on the same machine): the demo watches its own DNS server
//! with it, and the failover benchmark the built-in server and its RFC 2136 peer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RData, RecordType};
use tokio::net::UdpSocket;

/// The A records `server` answers for `name`, sorted; an error names what went wrong.
pub async fn query_a(server: SocketAddr, name: &str, timeout: Duration) -> Result<Vec<IpAddr>, String> {
    query_a_with_ttl(server, name, timeout).await.map(|(ips, _)| ips)
}

/// The same, with the TTL of the answer (the lowest of its A records; 0 without any): how
/// long a resolver may hand it out.
pub async fn query_a_with_ttl(
    server: SocketAddr,
    name: &str,
    timeout: Duration,
) -> Result<(Vec<IpAddr>, u32), String> {
    let name = Name::from_ascii(name).map_err(|e| format!("{name}: {e}"))?;
    let id: u16 = rand::random();
    let mut q = Message::new(id, MessageType::Query, OpCode::Query);
    q.add_query(Query::query(name, RecordType::A));
    let bytes = q.to_vec().map_err(|e| e.to_string())?;
    let local = if server.is_ipv4() {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)
    } else {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 0)
    };
    let socket = UdpSocket::bind(local).await.map_err(|e| e.to_string())?;
    socket.connect(server).await.map_err(|e| e.to_string())?;
    socket.send(&bytes).await.map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 4096];
    let answer = tokio::time::timeout(timeout, async {
        loop {
            let n = socket.recv(&mut buf).await.map_err(|e| e.to_string())?;
            match Message::from_vec(&buf[..n]) {
                Ok(m) if m.metadata.id == id => return Ok::<_, String>(m),
                // A stray or late datagram: keep waiting for ours.
                _ => continue,
            }
        }
    })
    .await
    .map_err(|_| format!("no answer from {server} within {timeout:?}"))??;
    let (mut ips, mut ttl) = (Vec::new(), None::<u32>);
    for r in &answer.answers {
        if let RData::A(a) = &r.data {
            ips.push(IpAddr::V4(a.0));
            ttl = Some(ttl.map_or(r.ttl, |t| t.min(r.ttl)));
        }
    }
    ips.sort();
    Ok((ips, ttl.unwrap_or(0)))
}
