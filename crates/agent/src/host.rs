//! What a node tells about its host besides metrics: its name, its addresses and its links.

use std::collections::BTreeSet;
use std::net::IpAddr;

use vantage_core::Timestamp;
use vantage_core::evaluate::LinkState;

/// This host's name (`/proc/sys/kernel/hostname`), or `unknown`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// True for an address a node may report as its own: not loopback, link-local, multicast or
/// unspecified. Private addresses are reported: the server decides what to do with them.
pub fn is_reportable(ip: IpAddr) -> bool {
    if ip.is_loopback() || ip.is_multicast() || ip.is_unspecified() {
        return false;
    }
    match ip {
        IpAddr::V4(v4) => !v4.is_link_local() && !v4.is_broadcast(),
        IpAddr::V6(v6) => !v6.is_unicast_link_local() && v6.to_ipv4_mapped().is_none(),
    }
}

/// The reportable addresses of the host's interfaces that are up, sorted, without repeats.
pub fn discover_addresses() -> std::io::Result<Vec<IpAddr>> {
    use nix::net::if_::InterfaceFlags;
    let mut out = BTreeSet::new();
    for ifa in nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)? {
        if !ifa.flags.contains(InterfaceFlags::IFF_UP) || ifa.flags.contains(InterfaceFlags::IFF_LOOPBACK) {
            continue;
        }
        let Some(addr) = ifa.address else {
            continue;
        };
        let ip = if let Some(v4) = addr.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        if is_reportable(ip) {
            out.insert(ip);
        }
    }
    Ok(out.into_iter().collect())
}

/// Parses `NAME=WHEN`: a link and its last handshake, `WHEN` an RFC 3339 time, Unix seconds,
/// or `never`.
pub fn parse_link(s: &str) -> Result<LinkState, String> {
    let (name, when) =
        s.split_once('=').ok_or_else(|| format!("{s:?}: expected NAME=RFC3339|UNIX-SECONDS|never"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("{s:?}: the link name is empty"));
    }
    let when = when.trim();
    let last_handshake = if when == "never" {
        None
    } else if let Ok(secs) = when.parse::<i64>() {
        Some(Timestamp::from_secs(secs))
    } else {
        Some(when.parse::<Timestamp>().map_err(|e| format!("{s:?}: {e}"))?)
    };
    Ok(LinkState { name: name.to_owned(), last_handshake })
}
