//! The fetch policy: which destinations Vantage may connect to when it fetches something —
//! a prober's checks and HLS chains, the control plane's freshness reads and webhook
//! deliveries.
//!
//! Whoever writes a URL Vantage fetches (an operator's monitor endpoint, a mirror's host, a
//! playlist's segment URI) could otherwise aim probers or the control plane at the cloud's
//! metadata service, a loopback port or the control plane itself. The policy judges the
//! address a connection is about to reach, after resolution, never the text of a host name:
//! `0x7f.1`, `2852039166` and a name that resolves to `169.254.169.254` are refused alike.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::net::IpNet;

/// Where fetches may go. The default refuses every special-purpose address class; the
/// operator opens networks explicitly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchPolicy {
    /// Loopback addresses are allowed (labs, demos and tests on one machine:
    /// `--allow-loopback-addresses`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_loopback: bool,
    /// Networks allowed although their class is refused (a private fleet's link-local
    /// probes, say). Public and private unicast addresses need none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_networks: Vec<IpNet>,
    /// The control plane's own listeners: never fetched, whatever is allowed (a wildcard or
    /// loopback listener is also refused through every loopback address, as `localhost`
    /// resolves to either family).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own_listeners: Vec<SocketAddr>,
}

/// The classes of address refused unless allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Loopback,
    /// `169.254.0.0/16` and `fe80::/10`, where cloud metadata services answer.
    LinkLocal,
    /// A cloud metadata address outside the link-local ranges (`fd00:ec2::254`).
    Metadata,
    Unspecified,
    Multicast,
    Broadcast,
}

impl Class {
    /// The class of `ip`, when it is special-purpose.
    pub fn of(ip: IpAddr) -> Option<Class> {
        // An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) is that IPv4 address.
        let ip = ip.to_canonical();
        if ip.is_loopback() {
            return Some(Class::Loopback);
        }
        if ip.is_unspecified() {
            return Some(Class::Unspecified);
        }
        if ip.is_multicast() {
            return Some(Class::Multicast);
        }
        match ip {
            IpAddr::V4(v4) if v4.is_link_local() => Some(Class::LinkLocal),
            IpAddr::V4(v4) if v4.is_broadcast() => Some(Class::Broadcast),
            // 0.0.0.0/8 reaches this host on Linux as 0.0.0.0 does.
            IpAddr::V4(v4) if v4.octets()[0] == 0 => Some(Class::Unspecified),
            IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => Some(Class::LinkLocal),
            IpAddr::V6(v6) if v6 == AWS_METADATA_V6 => Some(Class::Metadata),
            _ => None,
        }
    }

    fn words(self) -> &'static str {
        match self {
            Class::Loopback => "a loopback address",
            Class::LinkLocal => "a link-local address, where cloud metadata services answer",
            Class::Metadata => "a cloud metadata address",
            Class::Unspecified => "an unspecified address",
            Class::Multicast => "a multicast address",
            Class::Broadcast => "the broadcast address",
        }
    }
}

/// EC2's metadata service over IPv6.
const AWS_METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);

/// Why the policy refuses a destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The address is of a refused class.
    Address { addr: SocketAddr, class: Class },
    /// The address is one of the control plane's own listeners.
    OwnListener(SocketAddr),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Address { addr, class } => write!(
                f,
                "the fetch policy refuses {addr}: {} (allow its network with allow_networks)",
                class.words()
            ),
            Refusal::OwnListener(addr) => {
                write!(f, "the fetch policy refuses {addr}: a listener of the control plane itself")
            }
        }
    }
}

impl std::error::Error for Refusal {}

impl FetchPolicy {
    /// A policy that allows every address: for a check the operator runs by hand against
    /// what they name (`vantage check`), and for tests.
    pub fn any_address() -> FetchPolicy {
        let all = |a: IpAddr| IpNet::new(a, 0).ok();
        FetchPolicy {
            allow_loopback: true,
            allow_networks: [IpAddr::from([0u8; 4]), IpAddr::from([0u8; 16])]
                .into_iter()
                .filter_map(all)
                .collect(),
            own_listeners: Vec::new(),
        }
    }

    /// Whether a connection to `addr` may be opened.
    pub fn check(&self, addr: SocketAddr) -> Result<(), Refusal> {
        let ip = addr.ip().to_canonical();
        let own = |l: &SocketAddr| {
            let local = l.ip().is_unspecified() || l.ip().to_canonical().is_loopback();
            l.port() == addr.port()
                && (l.ip().to_canonical() == ip || (local && (ip.is_loopback() || ip.is_unspecified())))
        };
        if self.own_listeners.iter().any(own) {
            return Err(Refusal::OwnListener(addr));
        }
        let Some(class) = Class::of(ip) else { return Ok(()) };
        if (class == Class::Loopback && self.allow_loopback)
            || self.allow_networks.iter().any(|n| n.contains(ip))
        {
            return Ok(());
        }
        Err(Refusal::Address { addr, class })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(p: &FetchPolicy, addr: &str) -> Option<String> {
        p.check(addr.parse().unwrap()).err().map(|r| r.to_string())
    }

    #[test]
    fn special_purpose_addresses_are_refused_by_default() {
        let p = FetchPolicy::default();
        for a in [
            "127.0.0.1:80",
            "127.9.9.9:80",
            "[::1]:80",
            "[::ffff:127.0.0.1]:80",
            "169.254.169.254:80",
            "[fe80::1]:80",
            "[fd00:ec2::254]:80",
            "0.0.0.0:80",
            "0.1.2.3:80",
            "[::]:80",
            "224.0.0.1:80",
            "[ff02::1]:80",
            "255.255.255.255:80",
        ] {
            assert!(refused(&p, a).is_some(), "{a} should be refused");
        }
        for a in ["192.0.2.10:443", "10.1.2.3:80", "[2001:db8::1]:443", "[fd00::1]:80"] {
            assert_eq!(refused(&p, a), None, "{a} should be allowed");
        }
        assert_eq!(
            refused(&p, "169.254.169.254:80").unwrap(),
            "the fetch policy refuses 169.254.169.254:80: a link-local address, where cloud metadata \
             services answer (allow its network with allow_networks)"
        );
    }

    #[test]
    fn the_operator_opens_networks_and_loopback_explicitly() {
        let p = FetchPolicy {
            allow_loopback: true,
            allow_networks: vec!["169.254.10.0/24".parse().unwrap()],
            own_listeners: vec![],
        };
        assert_eq!(refused(&p, "127.0.0.1:8080"), None);
        assert_eq!(refused(&p, "169.254.10.7:80"), None);
        assert!(refused(&p, "169.254.169.254:80").is_some());
        let any = FetchPolicy::any_address();
        assert_eq!(refused(&any, "169.254.169.254:80"), None);
        assert_eq!(refused(&any, "[fd00:ec2::254]:80"), None);
    }

    #[test]
    fn the_control_planes_own_listeners_are_never_fetched() {
        let p = FetchPolicy {
            own_listeners: vec!["0.0.0.0:8080".parse().unwrap(), "127.0.0.1:9443".parse().unwrap()],
            ..FetchPolicy::any_address()
        };
        assert!(refused(&p, "127.0.0.1:8080").unwrap().contains("control plane itself"));
        assert!(refused(&p, "127.0.0.2:8080").is_some(), "a wildcard listener through loopback");
        assert!(refused(&p, "127.0.0.1:9443").is_some());
        assert!(refused(&p, "[::1]:9443").is_some(), "a loopback listener through the other family");
        assert_eq!(refused(&p, "127.0.0.1:9444"), None);
        assert_eq!(refused(&p, "192.0.2.1:8080"), None, "another host on the same port");
    }
}
