//! Who is calling the agent channel, decided from the configuration: a client certificate's
//! fingerprint names an enabled prober or an enrolled node; and when a certificate is due for
//! renewal.

use vantage_core::Timestamp;
use vantage_core::ids::{NodeId, ProberId};

use crate::config::Config;

/// Days a client certificate is valid.
pub const CLIENT_CERT_DAYS: u64 = 30;

/// A caller of the agent channel. A prober and a node never share an id (ids are global).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Caller {
    /// A `vantage probe` process.
    Prober(ProberId),
    /// A node agent.
    Node(NodeId),
}

impl Caller {
    /// The object id behind the caller, which is also the id its results are kept under.
    pub fn id(self) -> i64 {
        match self {
            Caller::Prober(ProberId(id)) | Caller::Node(NodeId(id)) => id,
        }
    }

    /// `prober` or `node`, for audit actions and actors.
    pub fn kind(self) -> &'static str {
        match self {
            Caller::Prober(_) => "prober",
            Caller::Node(_) => "node",
        }
    }

    /// The role its certificates name.
    pub fn role(self) -> vantage_core::wire::Role {
        match self {
            Caller::Prober(_) => vantage_core::wire::Role::Prober,
            Caller::Node(_) => vantage_core::wire::Role::Node,
        }
    }
}

/// Why a certificate does not identify a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// No client certificate was presented.
    NoCertificate,
    /// The certificate is a disabled prober's (it may still renew, to come back when enabled).
    Disabled {
        prober: ProberId,
        /// Its name, for the message.
        name: String,
    },
    /// Nobody's current certificate.
    Unknown,
}

impl Config {
    /// The caller whose current certificate has SHA-256 `fingerprint`.
    pub fn identify(&self, fingerprint: Option<&str>) -> Result<Caller, Refused> {
        let fp = fingerprint.ok_or(Refused::NoCertificate)?;
        if let Some((id, p)) = self.probers.iter().find(|(_, p)| p.value.cert_sha256.as_deref() == Some(fp)) {
            if !p.value.enabled {
                return Err(Refused::Disabled { prober: ProberId(*id), name: p.value.name.clone() });
            }
            return Ok(Caller::Prober(ProberId(*id)));
        }
        if let Some((id, _)) = self.nodes.iter().find(|(_, n)| n.value.cert_sha256.as_deref() == Some(fp)) {
            return Ok(Caller::Node(NodeId(*id)));
        }
        Err(Refused::Unknown)
    }

    /// Who may renew with this certificate: anyone [`identify`](Self::identify) accepts, and a
    /// disabled prober too, so that it can come back when it is enabled again.
    pub fn renewer(&self, fingerprint: Option<&str>) -> Result<Caller, Refused> {
        match self.identify(fingerprint) {
            Err(Refused::Disabled { prober, .. }) => Ok(Caller::Prober(prober)),
            other => other,
        }
    }

    /// Whose results an id stands for: a prober's, or a probing node's (ids are global).
    pub fn caller(&self, id: i64) -> Option<Caller> {
        if self.probers.contains_key(&id) {
            Some(Caller::Prober(ProberId(id)))
        } else {
            self.nodes.contains_key(&id).then_some(Caller::Node(NodeId(id)))
        }
    }

    /// When the current certificate of `caller` was issued.
    pub fn cert_issued_at(&self, caller: Caller) -> Option<Timestamp> {
        match caller {
            Caller::Prober(p) => self.probers.get(&p.0).and_then(|p| p.value.cert_issued_at),
            Caller::Node(n) => self.nodes.get(&n.0).and_then(|n| n.value.cert_issued_at),
        }
    }

    /// Seconds before `caller` should renew its certificate (0: now, or no certificate).
    pub fn renew_in_s(&self, caller: Caller, now: Timestamp) -> u64 {
        self.cert_issued_at(caller).map_or(0, |t| renew_in_s(t, now))
    }
}

/// Seconds until a certificate issued at `issued` should be renewed: when less than a third of
/// its life remains (SPEC §4).
pub fn renew_in_s(issued: Timestamp, now: Timestamp) -> u64 {
    let life_ms = i64::try_from(CLIENT_CERT_DAYS * 86_400_000).unwrap_or(i64::MAX);
    let renew_at = issued.plus_millis(life_ms * 2 / 3);
    u64::try_from(renew_at.millis_since(now).max(0) / 1000).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_is_due_when_a_third_of_the_life_remains() {
        let day = 86_400_000;
        let t0 = Timestamp::from_millis(0);
        assert_eq!(renew_in_s(t0, t0), 20 * 86_400);
        assert_eq!(renew_in_s(t0, Timestamp::from_millis(19 * day)), 86_400);
        assert_eq!(renew_in_s(t0, Timestamp::from_millis(25 * day)), 0);
    }
}
