//! RFC 2136 UPDATE signed with TSIG (RFC 8945): replaces the A and AAAA RRsets of a cluster's
//! names on an external primary server (Knot, BIND, PowerDNS…) with a revision's records.
//!
//! One UPDATE per publication, over TCP, so the change is atomic on the server and its size
//! is not bounded by UDP. For each of the domain, the aliases inside the target zone and
//! `all.<domain>`: delete the A RRset, delete the AAAA RRset, add the new records. Servers
//! have no lines, so the domain and aliases get [`ZoneAnswers::default_records`] and
//! `all.<domain>` gets the union. Names outside the target zone are left out (logged).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hickory_proto::op::{Message, OpCode, Query, ResponseCode, UpdateMessage};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, TSigner};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{AttemptError, PublishFuture, Publisher, RetryPolicy, with_retries};
use crate::error::Error;
use crate::table::{ZoneAnswers, parse_name};

/// TSIG algorithms accepted: HMAC-SHA256 and stronger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsigAlgorithm {
    /// `hmac-sha256`.
    HmacSha256,
    /// `hmac-sha384`.
    HmacSha384,
    /// `hmac-sha512`.
    HmacSha512,
}

impl TsigAlgorithm {
    /// The algorithm's name as DNS servers spell it (`hmac-sha256`).
    pub fn as_str(self) -> &'static str {
        match self {
            TsigAlgorithm::HmacSha256 => "hmac-sha256",
            TsigAlgorithm::HmacSha384 => "hmac-sha384",
            TsigAlgorithm::HmacSha512 => "hmac-sha512",
        }
    }

    fn hickory(self) -> hickory_proto::rr::rdata::tsig::TsigAlgorithm {
        use hickory_proto::rr::rdata::tsig::TsigAlgorithm as H;
        match self {
            TsigAlgorithm::HmacSha256 => H::HmacSha256,
            TsigAlgorithm::HmacSha384 => H::HmacSha384,
            TsigAlgorithm::HmacSha512 => H::HmacSha512,
        }
    }
}

impl fmt::Display for TsigAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TsigAlgorithm {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().trim_end_matches('.').to_ascii_lowercase().as_str() {
            "hmac-sha256" => Ok(TsigAlgorithm::HmacSha256),
            "hmac-sha384" => Ok(TsigAlgorithm::HmacSha384),
            "hmac-sha512" => Ok(TsigAlgorithm::HmacSha512),
            other => Err(Error::invalid(
                "key.algorithm",
                format!("{other:?} is not one of hmac-sha256, hmac-sha384, hmac-sha512"),
            )),
        }
    }
}

/// A TSIG key shared with the target server. `Debug` does not show the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct TsigKey {
    name: Name,
    algorithm: TsigAlgorithm,
    secret: Vec<u8>,
}

impl TsigKey {
    /// A key from its name, algorithm and secret bytes (at least 16 bytes).
    pub fn new(name: &str, algorithm: TsigAlgorithm, secret: Vec<u8>) -> Result<Self, Error> {
        let name = parse_name(name).map_err(|e| Error::invalid("key.name", e))?;
        if secret.len() < 16 {
            return Err(Error::invalid("key.secret", "must be at least 16 bytes"));
        }
        Ok(TsigKey { name, algorithm, secret })
    }

    /// A key whose secret is given in base64, as in Knot's and BIND's configuration.
    pub fn from_base64(name: &str, algorithm: TsigAlgorithm, secret: &str) -> Result<Self, Error> {
        let bytes = data_encoding::BASE64
            .decode(secret.trim().as_bytes())
            .map_err(|e| Error::invalid("key.secret", format!("not base64: {e}")))?;
        TsigKey::new(name, algorithm, bytes)
    }

    /// The key's name.
    pub fn name(&self) -> String {
        self.name.to_ascii()
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> TsigAlgorithm {
        self.algorithm
    }
}

impl fmt::Debug for TsigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TsigKey")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

/// Where and how to send updates.
#[derive(Debug, Clone)]
pub struct Rfc2136Config {
    /// The primary server accepting updates.
    pub server: SocketAddr,
    /// The zone to update; `None`: each cluster's domain is the zone.
    pub zone: Option<String>,
    /// The TSIG key the server allows updates with.
    pub key: TsigKey,
    /// Bound on one attempt (connect, send, answer).
    pub timeout: Duration,
    /// Retries.
    pub retry: RetryPolicy,
}

/// Publishes to one RFC 2136 server.
pub struct Rfc2136Publisher {
    config: Rfc2136Config,
    zone: Option<Name>,
    target: String,
    signer: TSigner,
}

impl fmt::Debug for Rfc2136Publisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rfc2136Publisher")
            .field("target", &self.target)
            .field("config", &self.config)
            .finish()
    }
}

/// Allowed clock difference with the server, s (RFC 8945 §10 recommends 300).
const FUDGE: u16 = 300;

impl Rfc2136Publisher {
    /// A publisher for `config`.
    pub fn new(config: Rfc2136Config) -> Result<Self, Error> {
        let zone = match &config.zone {
            Some(z) => Some(parse_name(z).map_err(|e| Error::invalid("zone", e))?),
            None => None,
        };
        let key = &config.key;
        let signer = TSigner::new(key.secret.clone(), key.algorithm.hickory(), key.name.clone(), FUDGE)
            .map_err(|e| Error::invalid("key", e.to_string()))?;
        let target = match &zone {
            Some(z) => format!("rfc2136://{}/{}", config.server, z.to_ascii().trim_end_matches('.')),
            None => format!("rfc2136://{}", config.server),
        };
        Ok(Rfc2136Publisher { config, zone, target, signer })
    }

    /// The signed UPDATE for `zone`, or why there is none to send.
    fn update(&self, answers: &ZoneAnswers) -> Result<Message, AttemptError> {
        let domain =
            parse_name(&answers.domain).map_err(|e| AttemptError::permanent(format!("domain: {e}")))?;
        let origin = self.zone.clone().unwrap_or_else(|| domain.clone());
        let default = answers.default_records();
        if default.is_empty() {
            // Sending it would delete every address of the domain on the target.
            return Err(AttemptError::permanent(format!(
                "no records to publish for {}: refusing to delete every address",
                answers.domain
            )));
        }
        let ttl = answers.default_ttl();
        let mut names: Vec<(Name, &[IpAddr], u32)> = vec![(domain.clone(), default, ttl)];
        for alias in &answers.aliases {
            match parse_name(alias) {
                Ok(a) => names.push((a, default, ttl)),
                Err(e) => tracing::warn!(alias, error = %e, "alias left out of the update"),
            }
        }
        if let Ok(all) = domain.prepend_label("all") {
            names.push((all, answers.all.as_slice(), answers.ttl));
        }
        names.retain(|(n, _, _)| {
            let inside = origin.zone_of(n);
            if !inside {
                tracing::warn!(name = %n, zone = %origin, target = %self.target, "name outside the target zone left out");
            }
            inside
        });
        if names.is_empty() {
            return Err(AttemptError::permanent(format!(
                "no name of {} lies in zone {origin}",
                answers.cluster
            )));
        }

        let mut m = Message::query();
        m.metadata.op_code = OpCode::Update;
        m.metadata.recursion_desired = false;
        let mut zone = Query::query(origin, RecordType::SOA);
        zone.set_query_class(DNSClass::IN);
        m.add_zone(zone);
        for (name, ips, ttl) in names {
            for rtype in [RecordType::A, RecordType::AAAA] {
                // RFC 2136 §2.5.2: delete an RRset = class ANY, TTL 0, no RDATA.
                let mut delete = Record::from_rdata(name.clone(), 0, RData::Update0(rtype));
                delete.dns_class = DNSClass::ANY;
                m.add_update(delete);
            }
            for ip in ips {
                let rdata = match ip.to_canonical() {
                    IpAddr::V4(v4) => RData::A(A(v4)),
                    IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
                };
                m.add_update(Record::from_rdata(name.clone(), ttl, rdata));
            }
        }
        Ok(m)
    }

    async fn attempt(&self, answers: &ZoneAnswers) -> Result<(), AttemptError> {
        let mut m = self.update(answers)?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let verifier = m
            .finalize(&self.signer, now)
            .map_err(|e| AttemptError::permanent(format!("cannot sign: {e}")))?;
        let bytes =
            m.to_vec().map_err(|e| AttemptError::permanent(format!("cannot encode the update: {e}")))?;
        let id = m.metadata.id;
        let server = self.config.server;
        let reply = tokio::time::timeout(self.config.timeout, exchange(server, &bytes))
            .await
            .map_err(|_| {
                AttemptError::transient(format!("{server}: no answer within {:?}", self.config.timeout))
            })?
            .map_err(|e| AttemptError::transient(format!("{server}: {e}")))?;
        let response = Message::from_vec(&reply)
            .map_err(|e| AttemptError::transient(format!("{server}: unreadable answer: {e}")))?;
        if response.metadata.id != id {
            return Err(AttemptError::transient(format!("{server}: answer to another message")));
        }
        let rcode = response.metadata.response_code;
        if rcode != ResponseCode::NoError {
            let tsig = response
                .signature()
                .and_then(|s| s.data.error)
                .map(|e| format!(" (TSIG error {})", tsig_error_name(e)))
                .unwrap_or_default();
            let reason = format!("{server} answered {}{tsig}", rcode_name(rcode));
            // SERVFAIL is the server's own trouble; every other refusal repeats itself.
            return Err(if rcode == ResponseCode::ServFail {
                AttemptError::transient(reason)
            } else {
                AttemptError::permanent(reason)
            });
        }
        // The answer must carry the server's signature: anyone can forge a bare NOERROR.
        match verifier {
            Some(mut v) => v.verify(&reply).map(|_| ()).map_err(|e| {
                AttemptError::permanent(format!("{server} answered NOERROR without a valid signature: {e}"))
            }),
            None => Ok(()),
        }
    }
}

impl Publisher for Rfc2136Publisher {
    fn target(&self) -> &str {
        &self.target
    }

    fn publish<'a>(&'a self, zone: &'a ZoneAnswers) -> PublishFuture<'a> {
        Box::pin(with_retries(&self.target, &self.config.retry, move |_| self.attempt(zone)))
    }
}

/// One DNS exchange over TCP (two-byte length prefix, RFC 1035 §4.2.2).
async fn exchange(server: SocketAddr, message: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(server).await?;
    let len = u16::try_from(message.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "update larger than 64 KiB"))?;
    let mut framed = Vec::with_capacity(message.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(message);
    stream.write_all(&framed).await?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).await?;
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut reply).await?;
    Ok(reply)
}

fn rcode_name(rcode: ResponseCode) -> String {
    match rcode {
        ResponseCode::FormErr => "FORMERR".into(),
        ResponseCode::ServFail => "SERVFAIL".into(),
        ResponseCode::NXDomain => "NXDOMAIN".into(),
        ResponseCode::NotImp => "NOTIMP".into(),
        ResponseCode::Refused => "REFUSED".into(),
        ResponseCode::YXDomain => "YXDOMAIN".into(),
        ResponseCode::YXRRSet => "YXRRSET".into(),
        ResponseCode::NXRRSet => "NXRRSET".into(),
        ResponseCode::NotAuth => "NOTAUTH".into(),
        ResponseCode::NotZone => "NOTZONE".into(),
        other => format!("RCODE {}", u16::from(other)),
    }
}

fn tsig_error_name(e: hickory_proto::rr::rdata::tsig::TsigError) -> String {
    use hickory_proto::rr::rdata::tsig::TsigError;
    match e {
        TsigError::BadSig => "BADSIG".into(),
        TsigError::BadKey => "BADKEY".into(),
        TsigError::BadTime => "BADTIME".into(),
        TsigError::BadTrunc => "BADTRUNC".into(),
        TsigError::Unknown(c) => format!("{c}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::LineAnswers;

    fn zone(lines: Vec<LineAnswers>) -> ZoneAnswers {
        ZoneAnswers {
            cluster: "video".into(),
            domain: "cdn.example.test".into(),
            aliases: vec!["www.cdn.example.test".into(), "video.elsewhere.test".into()],
            ttl: 30,
            serial: 7,
            lines,
            all: vec![
                "192.0.2.1".parse().unwrap(),
                "192.0.2.2".parse().unwrap(),
                "2001:db8::1".parse().unwrap(),
            ],
        }
    }

    fn publisher() -> Rfc2136Publisher {
        Rfc2136Publisher::new(Rfc2136Config {
            server: "127.0.0.1:53".parse().unwrap(),
            zone: None,
            key: TsigKey::new("vantage", TsigAlgorithm::HmacSha256, vec![7; 32]).unwrap(),
            timeout: Duration::from_secs(1),
            retry: RetryPolicy::default(),
        })
        .unwrap()
    }

    #[test]
    fn update_replaces_both_rrsets_of_each_name_in_the_zone_with_the_default_line() {
        let z = zone(vec![
            LineAnswers {
                name: "asia".into(),
                client_networks: vec!["198.51.100.0/24".parse().unwrap()],
                places: Default::default(),
                records: vec!["192.0.2.9".parse().unwrap()],
                ttl: None,
            },
            LineAnswers {
                name: "default".into(),
                client_networks: vec![],
                places: Default::default(),
                records: vec!["192.0.2.2".parse().unwrap()],
                ttl: None,
            },
        ]);
        let m = publisher().update(&z).unwrap();
        assert_eq!(m.metadata.op_code, OpCode::Update);
        assert_eq!(m.queries[0].name().to_ascii(), "cdn.example.test.");
        let text: Vec<String> = m
            .authorities
            .iter()
            .map(|r| format!("{} {} {} {}", r.name, r.dns_class, r.record_type(), r.ttl))
            .collect();
        // The alias outside the zone is left out; the line with client networks is not published.
        assert_eq!(
            text,
            [
                "cdn.example.test. ANY A 0",
                "cdn.example.test. ANY AAAA 0",
                "cdn.example.test. IN A 30",
                "www.cdn.example.test. ANY A 0",
                "www.cdn.example.test. ANY AAAA 0",
                "www.cdn.example.test. IN A 30",
                "all.cdn.example.test. ANY A 0",
                "all.cdn.example.test. ANY AAAA 0",
                "all.cdn.example.test. IN A 30",
                "all.cdn.example.test. IN A 30",
                "all.cdn.example.test. IN AAAA 30",
            ]
        );
    }

    #[test]
    fn without_a_default_line_the_union_is_published_and_nothing_is_never_published() {
        let z = zone(vec![]);
        let m = publisher().update(&z).unwrap();
        let domain_adds = m
            .authorities
            .iter()
            .filter(|r| r.name.to_ascii() == "cdn.example.test." && r.dns_class == DNSClass::IN)
            .count();
        assert_eq!(domain_adds, 3);
        let mut empty = zone(vec![]);
        empty.all.clear();
        let e = publisher().update(&empty).unwrap_err();
        assert!(!e.retryable && e.reason.contains("refusing"), "{e:?}");
    }

    #[test]
    fn keys_need_a_known_algorithm_and_a_real_secret() {
        assert_eq!("HMAC-SHA512".parse::<TsigAlgorithm>().unwrap(), TsigAlgorithm::HmacSha512);
        assert!("hmac-md5".parse::<TsigAlgorithm>().is_err());
        assert!(TsigKey::from_base64("k", TsigAlgorithm::HmacSha256, "c2hvcnQ=").is_err());
        assert!(TsigKey::from_base64("k", TsigAlgorithm::HmacSha256, "not base64!").is_err());
        let k = TsigKey::from_base64(
            "k.",
            TsigAlgorithm::HmacSha384,
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        )
        .unwrap();
        assert!(!format!("{k:?}").contains("MDEy"));
        assert_eq!(k.name(), "k.");
    }
}
