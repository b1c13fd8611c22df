//! Enrollment and renewal, decided from the configuration: which token, whether it may still
//! be used, who enrolls, and the change that saves it once its certificate is issued; whether
//! a renewing caller still exists, and the change that records its new certificate. The server
//! hashes the token and issues the certificate between the two steps ([`Config::admit`] then
//! [`Admission::enrolled`]; [`Config::renewal`] then [`Renewal::renewed`]), and commits what
//! the second returns; it decides nothing.

use std::fmt;
use std::net::IpAddr;

use serde_json::{Value, json};
use vantage_core::Timestamp;
use vantage_core::ids::{NodeId, ProberId, RegionId};

use crate::config::{Config, EnrollToken, NodeRecord, Object, ProberRecord, Role, TokenState};
use crate::identity::Caller;

/// At most this many characters of an enrolling host's name are kept (a DNS name's length).
const MAX_HOSTNAME: usize = 253;

/// Why an enrollment is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No token has this hash.
    UnknownToken,
    /// The token was used (tokens are single use).
    Used { at: Timestamp },
    /// The token's validity ran out.
    Expired { at: Timestamp },
    /// Another prober took the token's name since the token was made.
    NameTaken { name: String },
    /// The token's node was deleted since the token was made.
    NodeGone { node: NodeId },
    /// A token without what its role needs (the API never makes one).
    Malformed(&'static str),
}

impl Refusal {
    /// Whether the caller's token is to blame (401), rather than the configuration (409).
    pub fn is_token(&self) -> bool {
        matches!(self, Refusal::UnknownToken | Refusal::Used { .. } | Refusal::Expired { .. })
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::UnknownToken => f.write_str("unknown enrollment token"),
            Refusal::Used { at } => write!(f, "this enrollment token was already used at {at}"),
            Refusal::Expired { at } => write!(f, "this enrollment token expired at {at}"),
            Refusal::NameTaken { name } => write!(f, "a prober named {name:?} already exists"),
            Refusal::NodeGone { node } => write!(f, "node {node} no longer exists"),
            Refusal::Malformed(what) => f.write_str(what),
        }
    }
}

/// Who enrolls.
#[derive(Debug, Clone)]
enum Enrollee {
    /// A new prober, under an id allocated for it.
    Prober { id: ProberId, region: RegionId },
    /// An existing node, enrolled (again).
    Node { id: NodeId, record: Box<NodeRecord> },
}

/// An enrollment the configuration admits: its token and who enrolls.
#[derive(Debug, Clone)]
pub struct Admission {
    token_id: i64,
    token: EnrollToken,
    enrollee: Enrollee,
}

/// What an admitted enrollment saves, and its audit entry, whose actor is the enrollee.
#[derive(Debug, Clone, PartialEq)]
pub struct Enrolled {
    pub caller: Caller,
    /// The prober's or node's name.
    pub name: String,
    /// The token, now used, and the prober or node with its certificate.
    pub puts: Vec<(i64, Object)>,
    /// `prober:{id}` or `node:{id}`.
    pub actor: String,
    /// `probe.enroll` or `node.enroll`.
    pub action: &'static str,
    /// The same as the actor: the enrollee enrolls itself.
    pub object: String,
    /// Name, host name, version, the token's prefix and where it connected from.
    pub metadata: Value,
}

impl Config {
    /// Decides an enrollment with the token whose SHA-256 (hex) is `sha256`, at `at`. A prober
    /// is given its id here, so its certificate can name it.
    pub fn admit(&mut self, sha256: &str, at: Timestamp) -> Result<Admission, Refusal> {
        let (token_id, token) = self
            .enroll_tokens
            .iter()
            .find(|(_, t)| t.value.sha256 == sha256)
            .map(|(id, t)| (*id, EnrollToken::clone(&t.value)))
            .ok_or(Refusal::UnknownToken)?;
        match token.state(at) {
            TokenState::Valid => {}
            TokenState::Used => return Err(Refusal::Used { at: token.used_at.unwrap_or(at) }),
            TokenState::Expired => return Err(Refusal::Expired { at: token.expires_at }),
        }
        let enrollee = match token.role {
            Role::Prober => {
                let region = token.region.ok_or(Refusal::Malformed("prober token without region"))?;
                if self.prober_named(&token.name).is_some() {
                    return Err(Refusal::NameTaken { name: token.name.clone() });
                }
                Enrollee::Prober { id: ProberId(self.allocate()), region }
            }
            Role::Node => {
                let node = token.node.ok_or(Refusal::Malformed("node token without node"))?;
                let record =
                    NodeRecord::clone(&self.nodes.get(&node.0).ok_or(Refusal::NodeGone { node })?.value);
                Enrollee::Node { id: node, record: Box::new(record) }
            }
        };
        Ok(Admission { token_id, token, enrollee })
    }
}

impl Admission {
    /// Who enrolls.
    pub fn caller(&self) -> Caller {
        match &self.enrollee {
            Enrollee::Prober { id, .. } => Caller::Prober(*id),
            Enrollee::Node { id, .. } => Caller::Node(*id),
        }
    }

    /// The change that saves the enrollment: the token used at `at`, the prober (new) or the
    /// node with the certificate whose SHA-256 is `cert_sha256`, and the audit entry of the
    /// enrollee, which connected from `from` on a host called `hostname` running `version`.
    pub fn enrolled(
        self,
        cert_sha256: String,
        from: IpAddr,
        hostname: &str,
        version: &str,
        at: Timestamp,
    ) -> Enrolled {
        let caller = self.caller();
        let (name, object) = match self.enrollee {
            Enrollee::Prober { region, .. } => {
                let name = self.token.name.clone();
                let rec = ProberRecord {
                    name: name.clone(),
                    region,
                    enabled: true,
                    cert_sha256: Some(cert_sha256),
                    cert_issued_at: Some(at),
                };
                (name, Object::Prober(rec))
            }
            Enrollee::Node { mut record, .. } => {
                record.cert_sha256 = Some(cert_sha256);
                record.cert_issued_at = Some(at);
                record.enrolled_from = Some(from.to_canonical());
                (record.node.name.clone(), Object::Node(*record))
            }
        };
        let who = format!("{}:{}", caller.kind(), caller.id());
        let metadata = json!({"name": name, "hostname": hostname, "version": version,
                              "token": self.token.prefix, "from": from});
        let mut used = self.token;
        used.used_at = Some(at);
        Enrolled {
            caller,
            name,
            puts: vec![(self.token_id, Object::EnrollToken(used)), (caller.id(), object)],
            actor: who.clone(),
            action: if let Caller::Prober(_) = caller { "probe.enroll" } else { "node.enroll" },
            object: who,
            metadata,
        }
    }
}

/// A renewal the configuration admits: the caller's record as it stands.
#[derive(Debug, Clone)]
pub struct Renewal {
    record: Record,
}

/// A prober's or node's record.
#[derive(Debug, Clone)]
enum Record {
    Prober(ProberRecord),
    Node(Box<NodeRecord>),
}

impl Config {
    /// Decides a renewal by `caller` (identified by its current certificate): `None` when its
    /// record is gone since (revoked).
    pub fn renewal(&self, caller: Caller) -> Option<Renewal> {
        let record = match caller {
            Caller::Prober(p) => Record::Prober(ProberRecord::clone(&self.probers.get(&p.0)?.value)),
            Caller::Node(n) => Record::Node(Box::new(NodeRecord::clone(&self.nodes.get(&n.0)?.value))),
        };
        Some(Renewal { record })
    }
}

impl Renewal {
    /// The change that records the certificate whose SHA-256 is `cert_sha256`, issued at `at`:
    /// the record to save under the caller's id, and the audit action.
    pub fn renewed(self, cert_sha256: String, at: Timestamp) -> (Object, &'static str) {
        match self.record {
            Record::Prober(mut rec) => {
                rec.cert_sha256 = Some(cert_sha256);
                rec.cert_issued_at = Some(at);
                (Object::Prober(rec), "probe.certificate_renew")
            }
            Record::Node(mut rec) => {
                rec.cert_sha256 = Some(cert_sha256);
                rec.cert_issued_at = Some(at);
                (Object::Node(*rec), "node.certificate_renew")
            }
        }
    }
}

/// The host name an enrolling process sent, as kept: control characters dropped, at most
/// [`MAX_HOSTNAME`] characters.
pub fn hostname(sent: &str) -> String {
    sent.chars().filter(|c| !c.is_control()).take(MAX_HOSTNAME).collect()
}
