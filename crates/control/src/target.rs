//! What a probe result is about, typed: a cluster target (node, address and port), a mirror or
//! a monitor's endpoint — one [`Subject`] per kind of book. The agent channel and the store keep
//! their text forms (`n{node}/{ip}/{port}`, `m/{host}`, `v{monitor}/{region}/{k}`); a report's
//! are parsed once, where the core takes it, and carried typed from there (to the metrics too).
//! A report naming a key that does not parse was never given out.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use vantage_core::ids::NodeId;

use crate::monitors::EndpointKey;

/// One scheduling address × listener port of a cluster node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetKey {
    pub node: NodeId,
    /// The scheduling address.
    pub ip: IpAddr,
    /// The listener port.
    pub port: u16,
}

impl fmt::Display for TargetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}/{}/{}", self.node, self.ip, self.port)
    }
}

/// A text that is not a cluster target key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotATarget;

impl FromStr for TargetKey {
    type Err = NotATarget;
    fn from_str(s: &str) -> Result<Self, NotATarget> {
        let rest = s.strip_prefix('n').ok_or(NotATarget)?;
        let (node, rest) = rest.split_once('/').ok_or(NotATarget)?;
        let (ip, port) = rest.rsplit_once('/').ok_or(NotATarget)?;
        Ok(TargetKey {
            node: node.parse().map_err(|_| NotATarget)?,
            ip: ip.parse().map_err(|_| NotATarget)?,
            port: port.parse().map_err(|_| NotATarget)?,
        })
    }
}

/// What one probe result is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// A cluster node's address on a listener's port.
    Address(TargetKey),
    /// A mirror, by host.
    Mirror(String),
    /// One endpoint of a monitor in one region.
    Endpoint(EndpointKey),
}

/// The prefix of a mirror's key.
const MIRROR: &str = "m/";

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Address(k) => k.fmt(f),
            Subject::Mirror(host) => write!(f, "{MIRROR}{host}"),
            Subject::Endpoint(k) => k.fmt(f),
        }
    }
}

impl FromStr for Subject {
    type Err = NotATarget;
    fn from_str(s: &str) -> Result<Self, NotATarget> {
        if let Some(host) = s.strip_prefix(MIRROR) {
            return Ok(Subject::Mirror(host.to_owned()));
        }
        if s.starts_with('v') {
            return s.parse().map(Subject::Endpoint).map_err(|()| NotATarget);
        }
        s.parse().map(Subject::Address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_keys_round_trip() {
        for ip in ["203.0.113.10", "2001:db8::10"] {
            let key = TargetKey { node: NodeId(12), ip: ip.parse().unwrap(), port: 443 };
            assert_eq!(key.to_string().parse::<TargetKey>(), Ok(key));
        }
        assert_eq!("m/mirror.example.net".parse::<TargetKey>(), Err(NotATarget));
        assert_eq!("n1/203.0.113.10/99999".parse::<TargetKey>(), Err(NotATarget));
    }

    #[test]
    fn subjects_round_trip_by_kind() {
        let address = TargetKey { node: NodeId(12), ip: "203.0.113.10".parse().unwrap(), port: 443 };
        let endpoint = EndpointKey {
            monitor: vantage_core::ids::MonitorId(7),
            region: "ap-sg".into(),
            index: 2,
            from: None,
        };
        for s in [
            Subject::Address(address),
            Subject::Mirror("mirror.example.net".into()),
            Subject::Endpoint(endpoint),
        ] {
            assert_eq!(s.to_string().parse::<Subject>(), Ok(s));
        }
        assert_eq!(Subject::Mirror("mirror.example.net".into()).to_string(), "m/mirror.example.net");
        for bad in ["", "x/1", "v7/ap-sg", "n1/203.0.113.10"] {
            assert_eq!(bad.parse::<Subject>(), Err(NotATarget), "{bad}");
        }
    }
}
