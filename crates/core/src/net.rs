//! IP networks (CIDR) for the client networks of a line.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// An IP network such as `198.51.100.0/24` or `2001:db8::/32`, host bits zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// The network of `addr` with `prefix` bits, host bits cleared.
    pub fn new(addr: IpAddr, prefix: u8) -> Result<Self> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(Error::invalid("", format!("prefix length {prefix} is longer than {max}")));
        }
        Ok(IpNet { addr: mask(addr, prefix), prefix })
    }

    /// The first address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// True when `ip` is inside this network (an IPv4 network never contains an IPv6 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }
}

/// `ip` with all but the first `prefix` bits cleared.
pub fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let m = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix.min(32))) };
            IpAddr::V4((bits & m).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let m = if prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix.min(128))) };
            IpAddr::V6((bits & m).into())
        }
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for IpNet {
    type Err = Error;

    /// `addr/prefix`; a bare address is a host network (/32 or /128). An address with bits
    /// set past the prefix is refused, not widened: `10.0.0.1/8` is more likely a typo for
    /// `10.0.0.1/32` than a wish for all of `10.0.0.0/8`, so the operator says which.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::invalid("", format!("{s:?} is not an IP network like 198.51.100.0/24"));
        let (a, p) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = a.parse().map_err(|_| bad())?;
        let prefix = match p {
            Some(p) => p.parse::<u8>().map_err(|_| bad())?,
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        let net = IpNet::new(addr, prefix).map_err(|_| bad())?;
        if net.addr != addr {
            return Err(Error::invalid(
                "",
                format!("{addr}/{prefix} has host bits set: did you mean {net}?"),
            ));
        }
        Ok(net)
    }
}

impl Serialize for IpNet {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IpNet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        // The reason alone: the deserialiser's path names the field.
        s.parse().map_err(|e: Error| serde::de::Error::custom(e.reason()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_clear_host_bits_and_contain_their_addresses() {
        let n: IpNet = "198.51.100.0/24".parse().unwrap();
        assert_eq!(n.to_string(), "198.51.100.0/24");
        assert_eq!(IpNet::new("198.51.100.77".parse().unwrap(), 24).unwrap(), n);
        assert!(n.contains("198.51.100.1".parse().unwrap()));
        assert!(!n.contains("198.51.101.1".parse().unwrap()));
        assert!(!n.contains("2001:db8::1".parse().unwrap()));
        let v6: IpNet = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.9".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<IpNet>().is_err());
        assert!("example.com/8".parse::<IpNet>().is_err());
        let e = "10.0.0.1/8".parse::<IpNet>().unwrap_err();
        assert_eq!(e.reason(), "10.0.0.1/8 has host bits set: did you mean 10.0.0.0/8?");
        let e = "2001:db8::1/32".parse::<IpNet>().unwrap_err();
        assert_eq!(e.reason(), "2001:db8::1/32 has host bits set: did you mean 2001:db8::/32?");
    }

    /// In a body the refusal names the field and quotes what was sent.
    #[test]
    fn a_bad_network_in_a_body_names_its_field() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Body {
            nets: Vec<IpNet>,
        }
        let ok = crate::from_value::<Body>(serde_json::json!({"nets": ["192.0.2.0/24"]})).unwrap();
        assert_eq!(ok.nets[0].to_string(), "192.0.2.0/24");
        let e = crate::from_value::<Body>(serde_json::json!({"nets": ["x|y"]})).unwrap_err();
        assert_eq!(
            (e.field(), e.reason()),
            ("nets[0]", r#""x|y" is not an IP network like 198.51.100.0/24"#)
        );
        let e = crate::from_value::<Body>(serde_json::json!({"nets": [], "": 1})).unwrap_err();
        assert_eq!((e.field(), e.reason()), ("body", "an empty key is not a field"));
    }
}
