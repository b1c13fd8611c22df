//! [`SourceAddresses`]: the local addresses a prober's connections leave from, one per
//! family. A multi-homed probe host has several paths to the fleet; the operator picks the
//! one the probes must measure, as a real client of that network would reach the edges.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

/// At most one source address per family; a family without one lets the kernel choose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SourceAddresses {
    /// Source of connections to IPv4 targets.
    pub v4: Option<Ipv4Addr>,
    /// Source of connections to IPv6 targets.
    pub v6: Option<Ipv6Addr>,
}

/// Why a list of source addresses was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("source addresses: {0}")]
pub struct SourceAddressesError(String);

impl SourceAddresses {
    /// None: the kernel picks for every family.
    pub const NONE: SourceAddresses = SourceAddresses { v4: None, v6: None };

    /// From a list, at most one address per family. Unspecified addresses (`0.0.0.0`,
    /// `::`) are refused: they would say nothing the default does not.
    pub fn from_list(addrs: &[IpAddr]) -> Result<Self, SourceAddressesError> {
        let mut s = SourceAddresses::default();
        for addr in addrs {
            if addr.is_unspecified() {
                return Err(SourceAddressesError(format!("{addr} is not an address of this host")));
            }
            let taken = match addr {
                IpAddr::V4(a) => s.v4.replace(*a).map(IpAddr::V4),
                IpAddr::V6(a) => s.v6.replace(*a).map(IpAddr::V6),
            };
            if let Some(first) = taken {
                return Err(SourceAddressesError(format!("{first} and {addr}: one address per family")));
            }
        }
        Ok(s)
    }

    /// The source for a connection to `peer`, when one is set for its family.
    pub fn for_peer(&self, peer: SocketAddr) -> Option<IpAddr> {
        match peer {
            SocketAddr::V4(_) => self.v4.map(IpAddr::V4),
            SocketAddr::V6(_) => self.v6.map(IpAddr::V6),
        }
    }

    /// True when neither family has one.
    pub fn is_empty(&self) -> bool {
        self.v4.is_none() && self.v6.is_none()
    }
}

impl FromStr for SourceAddresses {
    type Err = SourceAddressesError;

    /// A comma-separated list, like `192.0.2.10,2001:db8::10`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let addrs = s
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| a.parse().map_err(|e| SourceAddressesError(format!("{a:?}: {e}"))))
            .collect::<Result<Vec<IpAddr>, _>>()?;
        SourceAddresses::from_list(&addrs)
    }
}

impl fmt::Display for SourceAddresses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> =
            self.v4.map(|a| a.to_string()).into_iter().chain(self.v6.map(|a| a.to_string())).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_per_family_and_picked_by_the_peer() {
        let s: SourceAddresses = "127.0.0.2, ::1".parse().unwrap();
        assert_eq!(s.for_peer("127.0.0.1:80".parse().unwrap()), Some("127.0.0.2".parse().unwrap()));
        assert_eq!(s.for_peer("[::1]:80".parse().unwrap()), Some("::1".parse().unwrap()));
        assert_eq!(s.to_string(), "127.0.0.2,::1");
        let v4: SourceAddresses = "10.0.0.1".parse().unwrap();
        assert_eq!(v4.for_peer("[::1]:80".parse().unwrap()), None, "the kernel picks for IPv6");
        assert!(SourceAddresses::default().is_empty() && !v4.is_empty());
        assert_eq!("".parse::<SourceAddresses>().unwrap(), SourceAddresses::default());
    }

    #[test]
    fn two_of_a_family_or_unspecified_are_refused() {
        let e = "10.0.0.1,10.0.0.2".parse::<SourceAddresses>().unwrap_err();
        assert!(e.to_string().contains("one address per family"), "{e}");
        assert!("0.0.0.0".parse::<SourceAddresses>().is_err());
        assert!("::".parse::<SourceAddresses>().is_err());
        assert!("10.0.0.300".parse::<SourceAddresses>().is_err());
    }
}
