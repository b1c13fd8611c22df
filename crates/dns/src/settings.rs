//! Settings that shape the zone data every answer table is built with (SOA, NS, UDP size).
//!
//! These are values handed in by the control plane; nothing here reads files or the
//! environment.

use std::net::IpAddr;

/// How the apex records of every served zone look, and how large UDP answers may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSettings {
    /// Names of the authoritative name servers, for the NS records of every zone and the SOA
    /// MNAME (the first). Empty: `ns1.<zone>` for each zone.
    pub nameservers: Vec<String>,
    /// Addresses answered for a name server name that lies inside a served zone (in-zone
    /// glue), so `ns1.<zone>` resolves. Empty: such a name exists but has no address records.
    pub nameserver_addresses: Vec<IpAddr>,
    /// SOA RNAME, the zone contact as a DNS name (`hostmaster.example.net` stands for
    /// `hostmaster@example.net`). `None`: `hostmaster.<zone>`.
    pub hostmaster: Option<String>,
    /// SOA REFRESH, s.
    pub soa_refresh: u32,
    /// SOA RETRY, s.
    pub soa_retry: u32,
    /// SOA EXPIRE, s.
    pub soa_expire: u32,
    /// Largest UDP answer sent and advertised in EDNS, bytes (512–4096). The 2020 DNS flag
    /// day value 1232 avoids IP fragmentation on every common path.
    pub max_udp_payload: u16,
}

impl Default for DnsSettings {
    fn default() -> Self {
        DnsSettings {
            nameservers: Vec::new(),
            nameserver_addresses: Vec::new(),
            hostmaster: None,
            soa_refresh: 3600,
            soa_retry: 600,
            soa_expire: 1_209_600,
            max_udp_payload: 1232,
        }
    }
}
