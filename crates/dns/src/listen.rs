//! Bounds shared by every TCP listener of `vantage serve` (DNS over TCP here, and the admin API
//! and the agent channel in `vantage-server`): at most so many connections at once, and so many
//! from one source address, so one client cannot take every slot; and an accept loop that
//! waits when accepting fails (out of file descriptors, typically) instead of spinning.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use vantage_core::net::IpNet;

/// How many connections a listener holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// At once, from everyone.
    pub total: usize,
    /// At once, from one source address.
    pub per_source: usize,
}

/// Connections open on one listener, by source.
#[derive(Debug)]
pub struct Gate {
    limits: Limits,
    /// Sources that stand for many clients (a TCP load balancer in front of several
    /// replicas): their connections count against the total only.
    trusted: Vec<IpNet>,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// A connection the gate let in; dropping it frees its slot.
#[derive(Debug)]
pub struct Admitted {
    gate: Arc<Gate>,
    source: IpAddr,
}

impl Gate {
    /// A gate with these limits (each at least one).
    pub fn new(limits: Limits) -> Arc<Gate> {
        Self::trusting(limits, Vec::new())
    }

    /// A gate with these limits whose per-source limit does not apply to sources in `trusted`
    /// (load balancers in front of several replicas).
    pub fn trusting(limits: Limits, trusted: Vec<IpNet>) -> Arc<Gate> {
        let limits = Limits { total: limits.total.max(1), per_source: limits.per_source.max(1) };
        Arc::new(Gate { limits, trusted, open: Mutex::new((0, HashMap::new())) })
    }

    /// Lets a connection from `source` in, unless the listener or that source is full. An
    /// IPv6 source counts by its /64 (one host's usual allocation), an IPv4-mapped one as IPv4.
    pub fn admit(self: &Arc<Self>, source: IpAddr) -> Option<Admitted> {
        let canonical = source.to_canonical();
        let trusted = self.trusted.iter().any(|n| n.contains(canonical) || n.contains(source));
        // A trusted source counts on its own, so that it never fills its /64's share.
        let source = match canonical {
            IpAddr::V6(v6) if !trusted => {
                IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1)))
            }
            other => other,
        };
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, by_source) = &mut *open;
        let mine = by_source.get(&source).copied().unwrap_or(0);
        if *total >= self.limits.total || (mine >= self.limits.per_source && !trusted) {
            return None;
        }
        *total += 1;
        by_source.insert(source, mine + 1);
        Some(Admitted { gate: self.clone(), source })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).0
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.gate.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, by_source) = &mut *open;
        *total = total.saturating_sub(1);
        if let Some(n) = by_source.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                by_source.remove(&self.source);
            }
        }
    }
}

/// The first wait after a failed accept; it doubles up to [`MAX_BACKOFF`] while accepting
/// keeps failing.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The next connection `gate` admits. A failed accept (no descriptor left, most often) waits
/// before the next try, longer each time, so the loop never spins a core; a connection over
/// the limits is closed at once.
pub async fn accept(
    listener: &TcpListener,
    gate: &Arc<Gate>,
    what: &str,
) -> (TcpStream, SocketAddr, Admitted) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                backoff = FIRST_BACKOFF;
                match gate.admit(peer.ip()) {
                    Some(admitted) => return (stream, peer, admitted),
                    None => tracing::debug!(%peer, listener = what, "connection limit reached; closing"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, listener = what, retry_in_ms = backoff.as_millis(), "accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// When bytes last moved on a connection, for idle timeouts that outlast a request.
#[derive(Debug, Clone)]
pub struct Activity {
    base: Instant,
    last_ms: Arc<AtomicU64>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity { base: Instant::now(), last_ms: Arc::new(AtomicU64::new(0)) }
    }
}

impl Activity {
    /// Bytes moved now.
    pub fn touch(&self) {
        let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Resolves once no byte has moved for `limit`.
    pub async fn idle_for(&self, limit: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let quiet = self.base.elapsed().saturating_sub(last);
            if quiet >= limit {
                return;
            }
            tokio::time::sleep(limit - quiet).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_caps_everyone_and_each_source() {
        let gate = Gate::new(Limits { total: 3, per_source: 2 });
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let a1 = gate.admit(a).unwrap();
        let _a2 = gate.admit(a).unwrap();
        assert!(gate.admit(a).is_none(), "two per source");
        let _b1 = gate.admit(b).unwrap();
        assert!(gate.admit(b).is_none(), "three in all");
        drop(a1);
        let _b2 = gate.admit(b).expect("a slot freed by a closed connection");
        assert_eq!(gate.open(), 3);
        // One IPv6 host: its /64.
        let gate = Gate::new(Limits { total: 10, per_source: 1 });
        let _h = gate.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        assert!(gate.admit("2001:db8:1:2:ffff::9".parse().unwrap()).is_none(), "same /64");
        assert!(gate.admit("2001:db8:1:3::1".parse().unwrap()).is_some());
    }

    #[test]
    fn a_trusted_balancer_is_held_only_to_the_total() {
        let lb: IpAddr = "10.0.0.5".parse().unwrap();
        let gate = Gate::trusting(Limits { total: 4, per_source: 1 }, vec!["10.0.0.4/30".parse().unwrap()]);
        let held: Vec<_> =
            (0..3).map(|_| gate.admit(lb).expect("a trusted source passes the per-source limit")).collect();
        let _other = gate.admit("192.0.2.1".parse().unwrap()).unwrap();
        assert!(gate.admit(lb).is_none(), "the total still holds");
        drop(held);
        assert!(gate.admit("192.0.2.1".parse().unwrap()).is_none(), "others keep theirs");
        assert!(
            gate.admit("::ffff:10.0.0.5".parse().unwrap()).is_some(),
            "its IPv4-mapped form is the same source"
        );
        // An IPv6 balancer does not use up the share of its /64's other hosts.
        let gate =
            Gate::trusting(Limits { total: 8, per_source: 1 }, vec!["2001:db8::5/128".parse().unwrap()]);
        let _lb: Vec<_> = (0..3).map(|_| gate.admit("2001:db8::5".parse().unwrap()).unwrap()).collect();
        assert!(gate.admit("2001:db8::6".parse().unwrap()).is_some(), "its neighbour keeps its share");
    }
}
