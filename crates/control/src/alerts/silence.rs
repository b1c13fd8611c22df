//! Silences: for a while, the notifications of the alerts they match are held back — the
//! alerts still fire, resolve and show, and a silence that ends while one it held is still
//! firing lets that one's notification go. Kept as configuration objects, so every replica
//! sees the same silences and each is audited.

use serde::{Deserialize, Serialize};
use vantage_core::{Error, Timestamp};

use super::{Alert, AlertKind};

/// Longest a silence may last.
pub const MAX_SILENCE_S: u64 = 30 * 86_400;
const MAX_MATCHERS: usize = 10;
const MAX_COMMENT: usize = 500;

/// A silence as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Silence {
    /// `name=value`, every one to match: `kind` is the alert's kind, any other name a field of
    /// its details (`node`, `cluster`, `rule`, `host`, `monitor`, `prober`, `line`…).
    pub matchers: Vec<String>,
    /// From when it holds notifications back.
    pub starts_at: Timestamp,
    /// Until when.
    pub ends_at: Timestamp,
    /// Why, in the operator's words.
    pub comment: String,
    /// Who made it (the admin token's name).
    pub created_by: String,
}

/// What a new silence is asked with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SilenceCreate {
    /// `name=value`, every one to match (see [`Silence::matchers`]).
    pub matchers: Vec<String>,
    /// How long it lasts from now, seconds (or give `ends_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<u64>,
    /// Until when (or give `duration_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<Timestamp>,
    /// Why.
    pub comment: String,
}

/// The end asked for by a duration from `from` (1 s to `max_s`) or a time, one of the two: how
/// silences and maintenance windows are both given their end.
pub(crate) fn ends(
    from: Timestamp,
    asked: (Option<u64>, Option<Timestamp>),
    max_s: u64,
) -> Result<Timestamp, Error> {
    match asked {
        (Some(d), None) if d == 0 || d > max_s => {
            Err(Error::invalid("duration_s", format!("1 to {max_s} seconds ({} days)", max_s / 86_400)))
        }
        (Some(d), None) => Ok(from.plus_secs(d)),
        (None, Some(t)) => Ok(t),
        _ => Err(Error::invalid("duration_s", "give duration_s or ends_at, one of the two")),
    }
}

impl SilenceCreate {
    /// The silence `by` asks for at `now`.
    pub fn silence(self, by: &str, now: Timestamp) -> Result<Silence, Error> {
        let ends_at = ends(now, (self.duration_s, self.ends_at), MAX_SILENCE_S)?;
        Silence {
            matchers: self.matchers,
            starts_at: now,
            ends_at,
            comment: self.comment,
            created_by: by.to_owned(),
        }
        .check(now)
    }
}

/// When a silence is checked: made now, or changed now (an end in the past then ends it now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checked {
    Made,
    Changed,
}

impl Silence {
    /// Validates a silence made at `now`: it ends after `now`, within 30 days of its start, and
    /// matches something narrower than everything.
    pub fn check(self, now: Timestamp) -> Result<Silence, Error> {
        self.checked(now, Checked::Made)
    }

    /// Validates a change made at `now`: as [`check`](Self::check), but an end at or before
    /// `now` ends the silence now (it stays listed, expired), and an expired one may be edited.
    pub fn check_change(self, now: Timestamp) -> Result<Silence, Error> {
        self.checked(now, Checked::Changed)
    }

    fn checked(self, now: Timestamp, how: Checked) -> Result<Silence, Error> {
        if self.matchers.is_empty() || self.matchers.len() > MAX_MATCHERS {
            return Err(Error::invalid(
                "matchers",
                format!(
                    "1 to {MAX_MATCHERS} matchers name=value (kind=node_offline, node=edge-1): a silence of everything hides every outage"
                ),
            ));
        }
        let mut matchers = Vec::with_capacity(self.matchers.len());
        for (i, m) in self.matchers.iter().enumerate() {
            let field = format!("matchers[{i}]");
            let (name, value) = m.split_once('=').ok_or_else(|| {
                Error::invalid(
                    &field,
                    format!("must be name=value (kind=node_offline, node=edge-1), got {m:?}"),
                )
            })?;
            let (name, value) = (name.trim(), value.trim());
            let name_ok = !name.is_empty()
                && name.len() <= 32
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !name_ok {
                return Err(Error::invalid(
                    &field,
                    format!("{name:?} is not a field name (lower-case letters, digits, _)"),
                ));
            }
            if value.is_empty() || value.len() > 253 || value.chars().any(char::is_control) {
                return Err(Error::invalid(&field, "the value must be 1 to 253 printable characters"));
            }
            // A kind that does not exist would hold nothing, silently.
            if name == "kind" && !AlertKind::names().any(|k| k.eq_ignore_ascii_case(value)) {
                let kinds: Vec<&str> = AlertKind::names().collect();
                return Err(Error::invalid(
                    &field,
                    format!("no alert kind {value:?}: one of {}", kinds.join(", ")),
                ));
            }
            matchers.push(format!("{name}={value}"));
        }
        // A change may end it now, or edit one that ended; a new one must hold something yet.
        if how == Checked::Made && self.ends_at <= now {
            return Err(Error::invalid("ends_at", "must be in the future"));
        }
        if self.ends_at <= self.starts_at {
            return Err(Error::invalid("ends_at", "must be after the silence started"));
        }
        if self.ends_at.millis_since(self.starts_at) > i64::try_from(MAX_SILENCE_S * 1000).unwrap_or(i64::MAX)
        {
            return Err(Error::invalid("ends_at", "at most 30 days after the silence started"));
        }
        let comment = self.comment.trim().to_owned();
        if comment.is_empty() || comment.len() > MAX_COMMENT || comment.chars().any(char::is_control) {
            return Err(Error::invalid(
                "comment",
                format!("why, in 1 to {MAX_COMMENT} printable characters"),
            ));
        }
        Ok(Silence { matchers, comment, ..self })
    }

    /// The matchers that hold `a` and the alerts about the same subject: its kind and the
    /// fields of its details that name what it is about (cluster, node, address, port, rule,
    /// line, mirror host, monitor, prober) — what the page offers to silence an alert with.
    pub fn matchers_for(a: &Alert) -> Vec<String> {
        const SUBJECT: [&str; 9] =
            ["cluster", "node", "address", "port", "rule", "line", "host", "monitor", "prober"];
        let mut out = vec![format!("kind={}", a.kind)];
        for name in SUBJECT {
            let value = match a.details.get(name) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(v @ serde_json::Value::Number(_)) => v.to_string(),
                _ => continue,
            };
            // What a matcher can carry (the form splits on spaces and commas).
            if !value.is_empty()
                && value.len() <= 253
                && !value.contains([' ', ','])
                && !value.chars().any(char::is_control)
            {
                out.push(format!("{name}={value}"));
            }
        }
        out
    }

    /// Whether it holds `a`'s notifications back at `now`.
    pub fn holds(&self, a: &Alert, now: Timestamp) -> bool {
        self.starts_at <= now
            && now < self.ends_at
            && self.matchers.iter().all(|m| {
                let Some((name, want)) = m.split_once('=') else { return false };
                // Names compare without case, as everywhere.
                if name == "kind" {
                    return a.kind.as_str().eq_ignore_ascii_case(want);
                }
                match a.details.get(name) {
                    Some(serde_json::Value::String(s)) => s.eq_ignore_ascii_case(want),
                    // A number or a flag matches as it is written (`port=443`).
                    Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => {
                        let written = v.to_string();
                        written == want
                    }
                    _ => false,
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::alerts::{AlertKind, AlertState};

    fn alert() -> Alert {
        Alert {
            id: 1,
            key: "node_offline/node:7".into(),
            kind: AlertKind::NodeOffline,
            state: AlertState::Firing,
            summary: "node edge-1 is offline".into(),
            details: json!({"node": "edge-1", "port": 443}),
            fired_at: Timestamp::from_secs(1_800_000_000),
            resolved_at: None,
        }
    }

    fn ask(matchers: &[&str], duration_s: Option<u64>) -> Result<Silence, Error> {
        let now = Timestamp::from_secs(1_800_000_000);
        SilenceCreate {
            matchers: matchers.iter().map(|m| (*m).to_owned()).collect(),
            duration_s,
            ends_at: None,
            comment: "maintenance of edge-1".into(),
        }
        .silence("ops", now)
    }

    #[test]
    fn every_matcher_must_match_while_it_lasts() {
        let t = Timestamp::from_secs(1_800_000_000);
        let s = ask(&["kind=node_offline", " node = edge-1 "], Some(3600)).unwrap();
        assert_eq!(s.matchers, ["kind=node_offline", "node=edge-1"]);
        assert_eq!((s.starts_at, s.ends_at, s.created_by.as_str()), (t, t.plus_secs(3600), "ops"));
        assert!(s.holds(&alert(), t.plus_secs(10)));
        assert!(!s.holds(&alert(), t.plus_secs(3600)), "ended");
        assert!(ask(&["port=443"], Some(60)).unwrap().holds(&alert(), t));
        assert!(
            ask(&["kind=Node_Offline", "node=EDGE-1"], Some(60)).unwrap().holds(&alert(), t),
            "without case"
        );
        assert!(!ask(&["node=edge-2"], Some(60)).unwrap().holds(&alert(), t));
        assert!(!ask(&["kind=node_offline", "cluster=video"], Some(60)).unwrap().holds(&alert(), t));
    }

    #[test]
    fn an_alert_offers_the_matchers_that_hold_it() {
        let m = Silence::matchers_for(&alert());
        assert_eq!(m, ["kind=node_offline", "node=edge-1", "port=443"]);
        let t = Timestamp::from_secs(1_800_000_000);
        let refs: Vec<&str> = m.iter().map(String::as_str).collect();
        assert!(ask(&refs, Some(60)).unwrap().holds(&alert(), t), "they are valid and hold it");
    }

    #[test]
    fn refusals_name_their_field() {
        let field = |r: Result<Silence, Error>| r.unwrap_err().field().to_owned();
        assert_eq!(field(ask(&[], Some(60))), "matchers");
        assert_eq!(field(ask(&["kind=node_offline", "nonsense"], Some(60))), "matchers[1]");
        assert_eq!(field(ask(&["Node=edge-1"], Some(60))), "matchers[0]");
        assert_eq!(field(ask(&["node="], Some(60))), "matchers[0]");
        assert_eq!(field(ask(&["node=edge-1"], None)), "duration_s");
        assert_eq!(field(ask(&["kind=node_ofline"], Some(60))), "matchers[0]", "a kind that does not exist");
        assert_eq!(field(ask(&["kind=test"], Some(60))), "matchers[0]", "test notices are never silenced");
        assert_eq!(field(ask(&["node=edge-1"], Some(MAX_SILENCE_S + 1))), "duration_s");
        let now = Timestamp::from_secs(1_800_000_000);
        let past = SilenceCreate {
            matchers: vec!["node=edge-1".into()],
            duration_s: None,
            ends_at: Some(now.plus_millis(-1000)),
            comment: "x".into(),
        };
        assert_eq!(field(past.silence("ops", now)), "ends_at");
        let silent = SilenceCreate {
            matchers: vec!["node=a".into()],
            duration_s: Some(5),
            ends_at: None,
            comment: " ".into(),
        };
        assert_eq!(field(silent.silence("ops", now)), "comment");
    }

    #[test]
    fn a_change_may_end_it_now_and_never_stretch_it_past_30_days_from_its_start() {
        let t = Timestamp::from_secs(1_800_000_000);
        let s = ask(&["node=edge-1"], Some(3600)).unwrap();
        let later = t.plus_secs(600);
        let ended = Silence { ends_at: later, ..s.clone() }.check_change(later).unwrap();
        assert!(!ended.holds(&alert(), later), "ended now");
        let edited = Silence { comment: "done".into(), ..ended }.check_change(t.plus_secs(7200)).unwrap();
        assert_eq!(edited.comment, "done", "an expired one may be edited");
        let long = Silence { ends_at: t.plus_secs(MAX_SILENCE_S + 1), ..s.clone() };
        assert_eq!(long.check_change(later).unwrap_err().field(), "ends_at");
        let backwards = Silence { ends_at: t, ..s };
        assert_eq!(backwards.check_change(later).unwrap_err().field(), "ends_at");
    }
}
