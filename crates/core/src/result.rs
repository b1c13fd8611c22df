//! What a prober reports: per-attempt stage bits and error codes, and one result per
//! target and round (§3.1, §3.2).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::time::Timestamp;

/// Why an attempt failed. Every failed attempt has exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The attempt exceeded its timeout.
    Timeout,
    /// The port refused the connection.
    Refused,
    /// The peer reset the connection.
    Reset,
    /// The TLS handshake failed.
    Tls,
    /// The response status was not the expected one.
    Status,
    /// The network is unreachable.
    Unreachable,
    /// HLS: the manifest is not a valid playlist (or has no media segment).
    Manifest,
    /// HLS: the newest segment could not be fetched.
    Segment,
    /// HLS: the newest segment is older than the maximum age.
    Stale,
    /// The response matched the check's block-page pattern: a censor's or a provider's page
    /// answered instead of the service (a mirror's `blocked-inferred`).
    Blocked,
    /// The fetch policy refused the destination: an address the operator did not allow, the
    /// control plane's own listener, or a playlist's URI on another origin. Nothing was sent.
    Policy,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 11] = [
        ErrorCode::Timeout,
        ErrorCode::Refused,
        ErrorCode::Reset,
        ErrorCode::Tls,
        ErrorCode::Status,
        ErrorCode::Unreachable,
        ErrorCode::Manifest,
        ErrorCode::Segment,
        ErrorCode::Stale,
        ErrorCode::Blocked,
        ErrorCode::Policy,
    ];

    /// The code as it appears in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Timeout => "timeout",
            ErrorCode::Refused => "refused",
            ErrorCode::Reset => "reset",
            ErrorCode::Tls => "tls",
            ErrorCode::Status => "status",
            ErrorCode::Unreachable => "unreachable",
            ErrorCode::Manifest => "manifest",
            ErrorCode::Segment => "segment",
            ErrorCode::Stale => "stale",
            ErrorCode::Blocked => "blocked",
            ErrorCode::Policy => "policy",
        }
    }

    /// What the code means, for people.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorCode::Timeout => "Timed out",
            ErrorCode::Refused => "Connection refused",
            ErrorCode::Reset => "Connection reset",
            ErrorCode::Tls => "TLS handshake failed",
            ErrorCode::Status => "Unexpected status",
            ErrorCode::Unreachable => "Unreachable",
            ErrorCode::Manifest => "Invalid manifest",
            ErrorCode::Segment => "Segment not fetchable",
            ErrorCode::Stale => "Stale segment",
            ErrorCode::Blocked => "Block page",
            ErrorCode::Policy => "Refused by the fetch policy",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ErrorCode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        ErrorCode::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| Error::invalid("error", format!("unknown error code {s:?}")))
    }
}

/// The stages one attempt reached (§3.4): connected, request sent, response received, good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Stages(u8);

impl Stages {
    /// The TCP connection (and TLS handshake, when any) succeeded.
    pub const CONNECTED: Stages = Stages(1);
    /// The request was written.
    pub const SENT: Stages = Stages(2);
    /// A response arrived.
    pub const RECEIVED: Stages = Stages(4);
    /// The attempt was good ("happy").
    pub const GOOD: Stages = Stages(8);
    /// Every stage of a good HTTP attempt.
    pub const ALL: Stages = Stages(15);

    /// No stage reached.
    pub const fn empty() -> Self {
        Stages(0)
    }
    /// From raw bits (unknown bits dropped).
    pub const fn from_bits(b: u8) -> Self {
        Stages(b & 15)
    }
    /// Raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }
    /// True when every stage of `other` is reached.
    pub const fn contains(self, other: Stages) -> bool {
        self.0 & other.0 == other.0
    }
    /// These stages plus `other`.
    pub const fn with(self, other: Stages) -> Self {
        Stages(self.0 | other.0)
    }
}

/// One attempt of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attempt {
    /// Stages reached.
    pub stages: Stages,
    /// Round-trip time in microseconds (to the verdict of the attempt).
    pub rtt_us: u32,
    /// Why it failed; `None` exactly when the stages include [`Stages::GOOD`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorCode>,
}

impl Attempt {
    /// True when the attempt was good.
    pub fn good(&self) -> bool {
        self.stages.contains(Stages::GOOD)
    }
}

/// HLS details of the last attempt of a round: the health tuple of §7.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HlsDetail {
    /// The edge answered.
    pub reachable: bool,
    /// The manifest started with `#EXTM3U` and named a media segment.
    pub manifest_valid: bool,
    /// The newest segment answered 200 or 206.
    pub segment_fetchable: bool,
    /// Age of the newest segment in seconds, when the edge said when it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_age_s: Option<f64>,
    /// Time to the manifest's first byte, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_ms: Option<f64>,
}

/// One prober's outcome for one target in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeResult {
    /// The target key the server handed out.
    pub target: String,
    /// The attempts, in order.
    pub attempts: Vec<Attempt>,
    /// HLS tuple of the last attempt, for `hls` checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hls: Option<HlsDetail>,
    /// TLS targets: when the certificate the edge showed in the round's last completed
    /// handshake expires (its `notAfter`). Absent without a handshake, and in reports of
    /// probers that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_not_after: Option<Timestamp>,
    /// When the first failed attempt of the round ended (the prober's clock; the control
    /// plane reads it relative to the report's `finished_at`). Absent when every attempt was
    /// good, and from probers that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Timestamp>,
}

impl ProbeResult {
    /// Attempts sent.
    pub fn sent(&self) -> u32 {
        u32::try_from(self.attempts.len()).unwrap_or(u32::MAX)
    }

    /// Attempts lost (not good).
    pub fn lost(&self) -> u32 {
        u32::try_from(self.attempts.iter().filter(|a| !a.good()).count()).unwrap_or(u32::MAX)
    }

    /// Median RTT of the good attempts in ms (mean of the middle two for an even count).
    pub fn median_rtt_ms(&self) -> Option<f64> {
        // A report's result has at most 10 attempts: their RTTs are sorted on the stack, as
        // the core takes every result's median on its thread; more (a result made here) take
        // the heap.
        let mut room = [0u32; 16];
        let mut more = Vec::new();
        let good = self.attempts.iter().filter(|a| a.good()).map(|a| a.rtt_us);
        let rtts: &mut [u32] = if self.attempts.len() <= room.len() {
            let mut n = 0;
            for (slot, rtt) in room.iter_mut().zip(good) {
                *slot = rtt;
                n += 1;
            }
            &mut room[..n]
        } else {
            more.extend(good);
            &mut more
        };
        if rtts.is_empty() {
            return None;
        }
        rtts.sort_unstable();
        let n = rtts.len();
        let us = if n % 2 == 1 {
            f64::from(rtts[n / 2])
        } else {
            (f64::from(rtts[n / 2 - 1]) + f64::from(rtts[n / 2])) / 2.0
        };
        Some(us / 1000.0)
    }

    /// The error code of the last failed attempt.
    pub fn last_error(&self) -> Option<ErrorCode> {
        self.attempts.iter().rev().find_map(|a| a.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(good: bool, rtt_us: u32) -> Attempt {
        if good {
            Attempt { stages: Stages::ALL, rtt_us, error: None }
        } else {
            Attempt { stages: Stages::CONNECTED, rtt_us, error: Some(ErrorCode::Status) }
        }
    }

    #[test]
    fn result_summary_sent_lost_median_last_error() {
        let r = ProbeResult {
            target: "t".into(),
            attempts: vec![a(true, 3000), a(false, 100), a(true, 1000), a(true, 2000)],
            hls: None,
            cert_not_after: None,
            failed_at: None,
        };
        assert_eq!((r.sent(), r.lost()), (4, 1));
        assert_eq!(r.median_rtt_ms(), Some(2.0));
        assert_eq!(r.last_error(), Some(ErrorCode::Status));
        let even = ProbeResult {
            target: "t".into(),
            attempts: vec![a(true, 1000), a(true, 2000)],
            hls: None,
            cert_not_after: None,
            failed_at: None,
        };
        assert_eq!(even.median_rtt_ms(), Some(1.5));
        let none = ProbeResult {
            target: "t".into(),
            attempts: vec![a(false, 1)],
            hls: None,
            cert_not_after: None,
            failed_at: None,
        };
        assert_eq!(none.median_rtt_ms(), None);
        // More attempts than a report holds (sorted on the heap): the same median.
        let many = ProbeResult { attempts: (1..=17).rev().map(|ms| a(true, ms * 1000)).collect(), ..none };
        assert_eq!(many.median_rtt_ms(), Some(9.0));
    }

    #[test]
    fn certificate_expiry_is_optional_on_the_wire() {
        let old = r#"{"target":"t","attempts":[{"stages":15,"rtt_us":10}]}"#;
        let r: ProbeResult = serde_json::from_str(old).unwrap();
        assert_eq!(r.cert_not_after, None, "reports of older probers still parse");
        assert_eq!(serde_json::to_string(&r).unwrap(), old, "and are written the same");
        let with = ProbeResult { cert_not_after: Some(Timestamp::from_secs(1_900_000_000)), ..r };
        let json = serde_json::to_string(&with).unwrap();
        assert!(json.contains(r#""cert_not_after":"2030-03-17T17:46:40.000Z""#), "{json}");
        assert_eq!(serde_json::from_str::<ProbeResult>(&json).unwrap(), with);
    }

    #[test]
    fn error_codes_round_trip() {
        for c in ErrorCode::ALL {
            assert_eq!(c.as_str().parse::<ErrorCode>().unwrap(), c);
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{c}\""));
        }
    }
}
