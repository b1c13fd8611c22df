//! The key of a cluster target inside the control plane: node, address and port, typed. The
//! agent channel and the store keep its text form `n{node}/{ip}/{port}`; it is parsed once, at
//! the edge, and a report naming a key that does not parse was never given out.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use vantage_core::ids::NodeId;

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
}
