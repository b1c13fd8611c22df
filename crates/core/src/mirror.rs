//! Mirrors and doors (§6): mirror records, the verdict from regional statuses, and the door
//! filter stack with a weighted choice.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, name};
use crate::model::dns_name;
use crate::time::Timestamp;

/// The latest status of a mirror seen from one region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegionStatus {
    /// An HTTP response arrived within the timeout.
    #[serde(rename = "ok")]
    Ok,
    /// No response within the timeout.
    #[serde(rename = "timeout")]
    Timeout,
    /// The connection was refused.
    #[serde(rename = "refused")]
    Refused,
    /// A local error made the measurement inconclusive; counts neither way.
    #[serde(rename = "error")]
    Error,
    /// The response matched a block-page pattern.
    #[serde(rename = "blocked-inferred")]
    BlockedInferred,
}

impl RegionStatus {
    /// Counts toward F: a sign the mirror is blocked or down there.
    pub fn is_failing(self) -> bool {
        matches!(self, RegionStatus::Timeout | RegionStatus::Refused | RegionStatus::BlockedInferred)
    }
}

/// One region's latest measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegionObservation {
    pub status: RegionStatus,
    /// Latency, ms (0 when none).
    pub latency: u32,
    /// When measured.
    pub at: Timestamp,
}

/// A mirror's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MirrorVerdict {
    /// No usable measurement.
    #[default]
    Unknown,
    /// Blocked (or manually blocked).
    Blocked,
    /// Failing in some regions, below the threshold.
    Degraded,
    /// Failing nowhere.
    Live,
}

impl MirrorVerdict {
    /// Gauge value: 3 live, 2 degraded, 1 blocked, 0 unknown.
    pub fn gauge(self) -> i64 {
        match self {
            MirrorVerdict::Live => 3,
            MirrorVerdict::Degraded => 2,
            MirrorVerdict::Blocked => 1,
            MirrorVerdict::Unknown => 0,
        }
    }
}

impl fmt::Display for MirrorVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MirrorVerdict::Live => "live",
            MirrorVerdict::Degraded => "degraded",
            MirrorVerdict::Blocked => "blocked",
            MirrorVerdict::Unknown => "unknown",
        })
    }
}

/// Default share of failing regions that blocks a mirror, %.
pub const DEFAULT_THRESHOLD_PCT: u32 = 50;

/// The verdict: manual block → blocked; with F the failing regions and T the regions with a
/// status other than `error`: T = 0 → unknown; F/T ≥ threshold → blocked; F = 0 → live;
/// otherwise degraded.
pub fn verdict(
    manual_block: bool,
    regions: &BTreeMap<String, RegionObservation>,
    threshold_pct: u32,
) -> MirrorVerdict {
    if manual_block {
        return MirrorVerdict::Blocked;
    }
    let t = regions.values().filter(|r| r.status != RegionStatus::Error).count() as u64;
    let f = regions.values().filter(|r| r.status.is_failing()).count() as u64;
    if t == 0 {
        MirrorVerdict::Unknown
    } else if f * 100 >= u64::from(threshold_pct) * t {
        MirrorVerdict::Blocked
    } else if f == 0 {
        MirrorVerdict::Live
    } else {
        MirrorVerdict::Degraded
    }
}

/// A mirror record: the operator's fields, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "MirrorInput")]
#[non_exhaustive]
pub struct Mirror {
    /// Public host name (a DNS name), unique.
    pub host: String,
    /// Tenants it may serve; empty = all.
    pub tenants: Vec<String>,
    /// Selection weight; 0 disables it without removing it.
    pub weight: u32,
    /// Operator's hard block.
    pub manual_block: bool,
    /// Note with a manual block (< 256 bytes).
    pub manual_note: String,
}

/// A mirror as entered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MirrorInput {
    pub host: String,
    pub tenants: Vec<String>,
    /// Weight (1).
    pub weight: i64,
    /// Manual block.
    pub manual_block: bool,
    /// Manual note.
    pub manual_note: String,
}

impl Default for MirrorInput {
    fn default() -> Self {
        MirrorInput {
            host: String::new(),
            tenants: Vec::new(),
            weight: 1,
            manual_block: false,
            manual_note: String::new(),
        }
    }
}

impl TryFrom<MirrorInput> for Mirror {
    type Error = Error;
    fn try_from(i: MirrorInput) -> Result<Self> {
        let host = dns_name("host", &i.host)?;
        let weight = u32::try_from(i.weight).map_err(|_| {
            Error::invalid("weight", format!("must be a whole number of at least 0, got {}", i.weight))
        })?;
        if i.manual_note.len() >= 256 {
            return Err(Error::invalid(
                "manual_note",
                format!("must be under 256 bytes, got {}", i.manual_note.len()),
            ));
        }
        let mut tenants = Vec::with_capacity(i.tenants.len());
        for (n, t) in i.tenants.iter().enumerate() {
            tenants.push(name(&format!("tenants[{n}]"), t, 253)?);
        }
        Ok(Mirror { host, tenants, weight, manual_block: i.manual_block, manual_note: i.manual_note })
    }
}

impl Mirror {
    /// True when the mirror may serve `tenant`.
    pub fn serves(&self, tenant: &str) -> bool {
        self.tenants.is_empty() || self.tenants.iter().any(|t| t == tenant)
    }
}

/// What a door asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DoorQuery {
    /// The tenant the visitor wants (`None`: any).
    pub tenant: Option<String>,
    /// Regions in which a candidate must not be failing.
    pub exclude_regions: Vec<String>,
}

/// A mirror with its current verdict and regions, as the door sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Record.
    pub mirror: &'a Mirror,
    pub verdict: MirrorVerdict,
    /// Region statuses.
    pub regions: &'a BTreeMap<String, RegionObservation>,
}

/// The filter stack: verdict live; tenant allowed; weight > 0; not failing in an excluded
/// region. Returns the indices of the survivors.
pub fn door_filter(candidates: &[Candidate<'_>], q: &DoorQuery) -> Vec<usize> {
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.verdict == MirrorVerdict::Live)
        .filter(|(_, c)| q.tenant.as_deref().is_none_or(|t| c.mirror.serves(t)))
        .filter(|(_, c)| c.mirror.weight > 0)
        .filter(|(_, c)| {
            !q.exclude_regions.iter().any(|r| c.regions.get(r).is_some_and(|o| o.status.is_failing()))
        })
        .map(|(i, _)| i)
        .collect()
}

/// Picks one of `weights` in proportion to its weight, with `roll` a uniform random number
/// (any u64; the caller supplies randomness so the choice stays pure).
pub fn choose_weighted(weights: &[u32], roll: u64) -> Option<usize> {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut point = roll % total;
    for (i, w) in weights.iter().enumerate() {
        let w = u64::from(*w);
        if point < w {
            return Some(i);
        }
        point -= w;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(list: &[(&str, RegionStatus)]) -> BTreeMap<String, RegionObservation> {
        list.iter()
            .map(|(r, s)| {
                ((*r).to_owned(), RegionObservation { status: *s, latency: 100, at: Timestamp::EPOCH })
            })
            .collect()
    }

    use RegionStatus::*;

    #[test]
    fn a_mirror_blocked_in_two_of_four_regions_is_blocked() {
        let r = regions(&[("us1", Ok), ("de1", Ok), ("ru1", Refused), ("cn1", Timeout)]);
        assert_eq!(verdict(false, &r, DEFAULT_THRESHOLD_PCT), MirrorVerdict::Blocked);
    }

    #[test]
    fn mirror_verdict_rules() {
        assert_eq!(verdict(false, &regions(&[]), 50), MirrorVerdict::Unknown);
        assert_eq!(verdict(false, &regions(&[("a", Error), ("b", Error)]), 50), MirrorVerdict::Unknown);
        assert_eq!(verdict(false, &regions(&[("a", Ok), ("b", Ok)]), 50), MirrorVerdict::Live);
        assert_eq!(
            verdict(false, &regions(&[("a", Ok), ("b", Ok), ("c", Timeout)]), 50),
            MirrorVerdict::Degraded
        );
        assert_eq!(
            verdict(false, &regions(&[("a", Ok), ("b", BlockedInferred)]), 50),
            MirrorVerdict::Blocked
        );
        // `error` counts toward neither F nor T.
        assert_eq!(
            verdict(false, &regions(&[("a", Ok), ("b", Error), ("c", Error)]), 50),
            MirrorVerdict::Live
        );
        assert_eq!(
            verdict(false, &regions(&[("a", Ok), ("b", Ok), ("c", Refused)]), 30),
            MirrorVerdict::Blocked
        );
    }

    #[test]
    fn manual_block_forces_blocked() {
        assert_eq!(verdict(true, &regions(&[("a", Ok)]), 50), MirrorVerdict::Blocked);
    }

    #[test]
    fn mirror_record_validation() {
        let m: Mirror = serde_json::from_str(r#"{"host":"Mirror-3.Example.net"}"#).unwrap();
        assert_eq!((m.host.as_str(), m.weight), ("mirror-3.example.net", 1));
        let e =
            Mirror::try_from(MirrorInput { host: "m.example.net".into(), weight: -1, ..Default::default() })
                .unwrap_err();
        assert_eq!(e.to_string(), "weight: must be a whole number of at least 0, got -1");
        let e = Mirror::try_from(MirrorInput {
            host: "m.example.net".into(),
            manual_note: "x".repeat(256),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "manual_note: must be under 256 bytes, got 256");
        assert!(
            Mirror::try_from(MirrorInput {
                host: "m.example.net".into(),
                manual_note: "x".repeat(255),
                ..Default::default()
            })
            .is_ok()
        );
        assert_eq!(
            Mirror::try_from(MirrorInput { host: "not a host".into(), ..Default::default() })
                .unwrap_err()
                .field(),
            "host"
        );
    }

    #[test]
    fn door_filter_stack() {
        let mk = |host: &str, tenants: &[&str], weight: u32| Mirror {
            host: host.into(),
            tenants: tenants.iter().map(|t| (*t).into()).collect(),
            weight,
            manual_block: false,
            manual_note: String::new(),
        };
        let ms = [
            mk("a.example.net", &[], 1),
            mk("b.example.net", &["t1"], 1),
            mk("c.example.net", &[], 0),
            mk("d.example.net", &[], 2),
            mk("e.example.net", &[], 1),
        ];
        let ok = regions(&[("us1", Ok), ("ru1", Ok)]);
        let ru_refused = regions(&[("us1", Ok), ("de1", Ok), ("ru1", Refused)]);
        let cands = [
            Candidate { mirror: &ms[0], verdict: MirrorVerdict::Live, regions: &ok },
            Candidate { mirror: &ms[1], verdict: MirrorVerdict::Live, regions: &ok },
            Candidate { mirror: &ms[2], verdict: MirrorVerdict::Live, regions: &ok },
            Candidate { mirror: &ms[3], verdict: MirrorVerdict::Live, regions: &ru_refused },
            Candidate { mirror: &ms[4], verdict: MirrorVerdict::Degraded, regions: &ok },
        ];
        assert_eq!(door_filter(&cands, &DoorQuery::default()), vec![0, 1, 3]);
        assert_eq!(
            door_filter(&cands, &DoorQuery { tenant: Some("t2".into()), exclude_regions: vec![] }),
            vec![0, 3]
        );
        assert_eq!(
            door_filter(
                &cands,
                &DoorQuery { tenant: Some("t1".into()), exclude_regions: vec!["ru1".into()] }
            ),
            vec![0, 1]
        );
    }

    #[test]
    fn weighted_choice_is_proportional() {
        let w = [1, 0, 3];
        let mut counts = [0; 3];
        for roll in 0..400u64 {
            counts[choose_weighted(&w, roll).unwrap()] += 1;
        }
        assert_eq!(counts, [100, 0, 300]);
        assert_eq!(choose_weighted(&[0, 0], 5), None);
        assert_eq!(choose_weighted(&[], 5), None);
    }
}
