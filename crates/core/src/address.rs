//! Scheduling addresses (§5.2): the unicast IPs of a node, each with a level.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ids::LineId;

/// Level of a scheduling address. Lower levels are preferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Used while reachable.
    Primary,
    /// Used when no primary is reachable.
    Backup1,
    /// Used when neither a primary nor a backup1 is reachable.
    Backup2,
}

impl Level {
    /// Every level, lowest (preferred) first.
    pub const ALL: [Level; 3] = [Level::Primary, Level::Backup1, Level::Backup2];

    /// The API name of the level.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Primary => "primary",
            Level::Backup1 => "backup1",
            Level::Backup2 => "backup2",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Level {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "primary" => Ok(Level::Primary),
            "backup1" => Ok(Level::Backup1),
            "backup2" => Ok(Level::Backup2),
            _ => Err(Error::invalid("level", format!("must be primary, backup1 or backup2, got {s:?}"))),
        }
    }
}

/// Where a node's scheduling addresses come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AddressSource {
    /// The public addresses in the node's heartbeat, all primary.
    Reported,
    /// Set by the operator; while any exist only they are used.
    Configured,
}

/// One scheduling address of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct SchedulingAddress {
    /// A single unicast IP.
    #[cfg_attr(feature = "schema", schema(value_type = String))]
    pub ip: IpAddr,
    /// Its level.
    pub level: Level,
    /// Marked by the operator to serve at once: DNS answers with it before any prober has
    /// seen it answer (others wait for a strict majority of the counting probers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trusted: bool,
    /// A target address of this line: on it the node answers with its target addresses
    /// instead of its scheduling ones, and switches no level (they are probed and gated by
    /// reachability like any other). `None`: a scheduling address, for every line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schema(value_type = Option<i64>))]
    pub line: Option<LineId>,
}

/// Which addresses the validation accepts beyond public and private unicast ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Accept 127.0.0.0/8 and ::1 (labs, demos and tests on one machine; off in production).
    pub allow_loopback: bool,
}

/// The most scheduling addresses a node may have.
pub const MAX_ADDRESSES: usize = 8;

/// A node's validated scheduling addresses: at most 8, no duplicates, at least one primary,
/// each a single unicast IP.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct AddressList(Vec<SchedulingAddress>);

/// One row of an address list as entered by an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AddressInput {
    /// The address text.
    pub ip: String,
    /// Its level (primary when absent).
    #[serde(default = "primary")]
    pub level: Level,
    /// Serve it at once, without waiting for the probers to see it answer.
    #[serde(default)]
    pub trusted: bool,
    /// The line it is a target address of (by id); absent: a scheduling address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schema(value_type = Option<i64>))]
    pub line: Option<LineId>,
}

/// A saved address as a row of the list it came from, so a list is edited without losing
/// anything of its rows.
impl From<SchedulingAddress> for AddressInput {
    fn from(a: SchedulingAddress) -> Self {
        AddressInput { ip: a.ip.to_string(), level: a.level, trusted: a.trusted, line: a.line }
    }
}

fn primary() -> Level {
    Level::Primary
}

/// Parses one address: a single unicast IP, refusing CIDR, host names, loopback (unless the
/// policy allows it), link-local, multicast, unspecified and broadcast addresses.
pub fn parse_unicast(text: &str, policy: AddressPolicy) -> Result<IpAddr> {
    let refuse = || Error::invalid("ip", format!("Not a single unicast IP address: {text}"));
    // An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is that IPv4 address.
    let ip = text.trim().parse::<IpAddr>().map_err(|_| refuse())?.to_canonical();
    if is_unicast(ip, policy) { Ok(ip) } else { Err(refuse()) }
}

/// True for an address DNS may answer with under `policy`.
pub fn is_unicast(ip: IpAddr, policy: AddressPolicy) -> bool {
    if ip.is_loopback() {
        return policy.allow_loopback;
    }
    if ip.is_unspecified() || ip.is_multicast() {
        return false;
    }
    match ip {
        IpAddr::V4(v4) => !(v4.is_link_local() || v4.is_broadcast()),
        IpAddr::V6(v6) => {
            // fe80::/10 link-local; IPv4-mapped addresses go through the IPv4 rules.
            if (v6.segments()[0] & 0xffc0) == 0xfe80 {
                return false;
            }
            match v6.to_ipv4_mapped() {
                Some(v4) => is_unicast(IpAddr::V4(v4), policy),
                None => true,
            }
        }
    }
}

impl AddressList {
    /// Validates an operator's list.
    pub fn parse(rows: &[AddressInput], policy: AddressPolicy) -> Result<Self> {
        if rows.len() > MAX_ADDRESSES {
            return Err(Error::invalid(
                "addresses",
                format!("at most {MAX_ADDRESSES} addresses, got {}", rows.len()),
            ));
        }
        let mut out: Vec<SchedulingAddress> = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let ip = parse_unicast(&row.ip, policy).map_err(|e| e.within(&format!("addresses[{i}]")))?;
            if out.iter().any(|a| a.ip == ip) {
                return Err(Error::invalid(
                    format!("addresses[{i}].ip"),
                    format!("Not a single unicast IP address: {} (duplicate)", row.ip.trim()),
                ));
            }
            if row.line.is_some() && row.level != Level::Primary {
                return Err(Error::invalid(
                    format!("addresses[{i}].level"),
                    "a line's target address has no level: leave it out, or primary",
                ));
            }
            out.push(SchedulingAddress { ip, level: row.level, trusted: row.trusted, line: row.line });
        }
        if !out.is_empty() && !out.iter().any(|a| a.level == Level::Primary && a.line.is_none()) {
            return Err(Error::invalid("addresses", "a primary address is required"));
        }
        Ok(AddressList(out))
    }

    /// The reported addresses of a heartbeat: every valid unicast one, all primary, deduplicated,
    /// at most 8. Invalid ones are skipped, since a node reports what it has.
    pub fn reported(ips: &[IpAddr], policy: AddressPolicy) -> Self {
        let mut out: Vec<SchedulingAddress> = Vec::new();
        for ip in ips.iter().map(|ip| ip.to_canonical()) {
            if out.len() == MAX_ADDRESSES {
                break;
            }
            if is_unicast(ip, policy) && !out.iter().any(|a| a.ip == ip) {
                out.push(SchedulingAddress { ip, level: Level::Primary, trusted: false, line: None });
            }
        }
        AddressList(out)
    }

    /// The addresses, in the order entered.
    pub fn as_slice(&self) -> &[SchedulingAddress] {
        &self.0
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de> Deserialize<'de> for AddressList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        // Stored lists were validated when saved; loopback stays allowed here so a lab
        // configuration can be read back.
        let rows = Vec::<AddressInput>::deserialize(d)?;
        AddressList::parse(&rows, AddressPolicy { allow_loopback: true }).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(list: &[(&str, Level)]) -> Vec<AddressInput> {
        list.iter()
            .map(|(ip, level)| AddressInput { ip: (*ip).into(), level: *level, trusted: false, line: None })
            .collect()
    }

    fn reason(list: &[(&str, Level)]) -> String {
        AddressList::parse(&rows(list), AddressPolicy::default()).unwrap_err().to_string()
    }

    #[test]
    fn scheduling_address_must_be_a_single_unicast_ip() {
        for bad in [
            "203.0.113.0/24",
            "edge.example.net",
            "127.0.0.1",
            "::1",
            "169.254.1.1",
            "fe80::1",
            "224.0.0.1",
            "ff02::1",
            "0.0.0.0",
            "::",
            "255.255.255.255",
            "::ffff:127.0.0.1",
            "",
        ] {
            let r = reason(&[(bad, Level::Primary)]);
            assert_eq!(r, format!("addresses[0].ip: Not a single unicast IP address: {bad}"), "{bad}");
        }
        // Private and documentation addresses are fine: they may be private.
        for good in ["10.1.2.3", "192.168.1.1", "203.0.113.10", "2001:db8::10"] {
            assert!(AddressList::parse(&rows(&[(good, Level::Primary)]), AddressPolicy::default()).is_ok());
        }
    }

    #[test]
    fn scheduling_address_duplicates_are_refused() {
        let r = reason(&[("203.0.113.10", Level::Primary), ("203.0.113.10", Level::Backup1)]);
        assert_eq!(r, "addresses[1].ip: Not a single unicast IP address: 203.0.113.10 (duplicate)");
    }

    #[test]
    fn an_ipv4_address_and_its_mapped_form_are_one_address() {
        let r = reason(&[("203.0.113.10", Level::Primary), ("::ffff:203.0.113.10", Level::Backup1)]);
        assert_eq!(r, "addresses[1].ip: Not a single unicast IP address: ::ffff:203.0.113.10 (duplicate)");
        let list =
            AddressList::parse(&rows(&[("::ffff:203.0.113.10", Level::Primary)]), AddressPolicy::default())
                .unwrap();
        assert_eq!(list.as_slice()[0].ip.to_string(), "203.0.113.10", "stored as the IPv4 address");
        let reported = AddressList::reported(
            &["::ffff:203.0.113.1".parse().unwrap(), "203.0.113.1".parse().unwrap()],
            AddressPolicy::default(),
        );
        assert_eq!(reported.as_slice().len(), 1);
    }

    #[test]
    fn scheduling_addresses_at_most_eight() {
        let many: Vec<(String, Level)> =
            (1..=9).map(|i| (format!("203.0.113.{i}"), Level::Primary)).collect();
        let refs: Vec<(&str, Level)> = many.iter().map(|(s, l)| (s.as_str(), *l)).collect();
        assert_eq!(reason(&refs), "addresses: at most 8 addresses, got 9");
        assert!(AddressList::parse(&rows(&refs[..8]), AddressPolicy::default()).is_ok());
    }

    #[test]
    fn scheduling_addresses_require_a_primary() {
        assert_eq!(reason(&[("198.51.100.10", Level::Backup1)]), "addresses: a primary address is required");
        // An empty list clears configured addresses (reported ones are used again).
        assert!(AddressList::parse(&[], AddressPolicy::default()).unwrap().is_empty());
    }

    #[test]
    fn loopback_addresses_only_in_lab_mode() {
        let lab = AddressPolicy { allow_loopback: true };
        assert!(AddressList::parse(&rows(&[("127.0.0.2", Level::Primary)]), lab).is_ok());
    }

    #[test]
    fn reported_addresses_are_primary_unicast_and_deduplicated() {
        let ips: Vec<IpAddr> = ["203.0.113.1", "127.0.0.1", "203.0.113.1", "fe80::1", "2001:db8::1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let list = AddressList::reported(&ips, AddressPolicy::default());
        let got: Vec<String> = list.as_slice().iter().map(|a| a.ip.to_string()).collect();
        assert_eq!(got, ["203.0.113.1", "2001:db8::1"]);
        assert!(list.as_slice().iter().all(|a| a.level == Level::Primary));
    }
}
