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
    /// `n{node}/{ip}/{port}`. A key of an IPv4 address is put together on the stack and written
    /// at once, not through `write!`: each work names every target it gives by its key (39,643
    /// per prober and round at 10,000 nodes), as does every result stored, and formatting them
    /// was about two fifths of making a work (issue 32).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let IpAddr::V4(v4) = self.ip else {
            return write!(f, "n{}/{}/{}", self.node, self.ip, self.port);
        };
        let mut text = KeyText::default();
        text.push(b'n');
        text.decimal(self.node.0);
        text.push(b'/');
        for (i, octet) in v4.octets().into_iter().enumerate() {
            if i > 0 {
                text.push(b'.');
            }
            text.decimal(i64::from(octet));
        }
        text.push(b'/');
        text.decimal(i64::from(self.port));
        f.write_str(text.as_str())
    }
}

/// An IPv4 key's text on the stack: `n`, a node id of up to 20 characters, `/`, an address of
/// up to 15, `/`, a port of up to 5.
struct KeyText {
    bytes: [u8; 48],
    len: usize,
}

impl Default for KeyText {
    fn default() -> Self {
        KeyText { bytes: [0; 48], len: 0 }
    }
}

impl KeyText {
    fn push(&mut self, b: u8) {
        debug_assert!(self.len < self.bytes.len(), "an IPv4 key fits");
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    /// `n` in decimal.
    fn decimal(&mut self, n: i64) {
        if n < 0 {
            self.push(b'-');
        }
        let (mut digits, mut from, mut rest) = ([0u8; 20], 20, n.unsigned_abs());
        loop {
            from -= 1;
            digits[from] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        for d in &digits[from..] {
            self.push(*d);
        }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
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

    /// The text put together on the stack is what `write!` makes, at every width of every part.
    #[test]
    fn a_key_written_on_the_stack_is_the_formatted_one() {
        let nodes = [0, 7, 12, 999, 1_000, i64::from(u32::MAX), i64::MAX, -1, -40, i64::MIN];
        let ips = ["0.0.0.0", "10.0.0.4", "203.0.113.10", "255.255.255.255", "2001:db8::10", "::1"];
        for node in nodes {
            for ip in ips {
                for port in [0, 80, 443, 8_080, u16::MAX] {
                    let key = TargetKey { node: NodeId(node), ip: ip.parse().unwrap(), port };
                    assert_eq!(key.to_string(), format!("n{}/{}/{}", key.node, key.ip, key.port));
                }
            }
        }
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
