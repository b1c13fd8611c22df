//! What every kind of subject has in common: a *book* per kind — cluster addresses
//! ([`Addresses`](crate::addresses::Addresses)), mirrors ([`Mirrors`](crate::mirrors::Mirrors)),
//! monitor endpoints ([`Monitors`](crate::monitors::Monitors)) — that gives probers their work,
//! takes their results, moves its verdicts with time and the configuration, and says what to
//! save. A book decides; it never touches the alert book, the event log or the output queue:
//! what it found comes back as [`Finding`]s, which the control core carries out the same way
//! for every kind. Adding a kind is a book, its [`Subject`] spelling, its part of the view and
//! its registration in [`Control`](crate::Control) (`docs/ARCHITECTURE.md`, "Adding a kind of
//! subject").

use vantage_core::Timestamp;
use vantage_core::check::Check;
use vantage_core::ids::{ClusterId, NodeId};
use vantage_core::result::ProbeResult;
use vantage_core::wire;

use crate::alerts::{AlertAbout, AlertKey, AlertKind, Firing};
use crate::config::Config;
use crate::control::{AuditEntry, Output, Upkeep};
use crate::identity::Caller;
use crate::observe::{Agents, Given, Latest};
use crate::spread::Spread;
use crate::target::{Subject, TargetKey};

/// Something a book found that the control core carries out: alerts, audit, the clusters
/// to evaluate, confirmations, store upkeep. Alerts are fired and resolved in order; audit
/// entries go out as one output, and the steering rebuild and the saves come after.
#[derive(Debug, Clone)]
pub(crate) enum Finding {
    /// Fire this alert, with this summary (a change of details only updates it).
    Fire(Firing, String),
    /// Resolve this alert if it is open.
    Resolve(AlertKey),
    /// Of `kind`, only the alerts in `keep` may stay open: the others' subjects are gone
    /// (`about` reads what an open one is about from its key, past the kind).
    OnlyOpen { kind: AlertKind, keep: Vec<AlertKey>, about: fn(&str) -> Option<AlertAbout> },
    /// Write this audit entry.
    Audit(AuditEntry),
    /// A result moved this cluster's inputs: evaluate it soon (a report's spacing).
    Evaluate(ClusterId),
    /// `from` saw this address change: the others are asked to confirm.
    Confirm { key: TargetKey, from: Caller },
    /// A steering order may have moved: rebuild what `/steer` answers.
    Steer,
    /// The store's upkeep.
    Upkeep(Upkeep),
}

/// What a prober asking for work is given, gathered book by book.
#[derive(Debug, Default)]
pub(crate) struct Work {
    /// The checks the targets index.
    pub checks: Vec<Check>,
    /// Cluster targets.
    pub targets: Vec<wire::Target>,
    /// Endpoint targets (mirrors, monitor endpoints).
    pub endpoints: Vec<wire::EndpointTarget>,
    /// What its reports may carry.
    pub given: Given,
    /// Whether it is to probe every endpoint now (an operator's check run).
    pub check_now: bool,
}

/// Who asks for work, and what the books need to know to give it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asking<'a> {
    pub config: &'a Config,
    pub caller: Caller,
    /// The places of the probers online (the caller among them): the probe budget.
    pub spread: &'a Spread,
    /// The node agents: the addresses they report, whether they answer (the TCP fallback).
    pub agents: &'a Agents,
    pub policy: vantage_core::address::AddressPolicy,
    pub now: Timestamp,
}

/// One result of a report, with what a book needs to take it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reported<'a> {
    pub caller: Caller,
    /// What the caller was given with its work.
    pub given: &'a Given,
    pub report: &'a wire::Report,
    pub result: &'a ProbeResult,
    pub now: Timestamp,
}

/// What taking a report's results leaves: the rows to store and the findings.
#[derive(Debug, Default)]
pub(crate) struct Took {
    /// Results to store, under every key each counts for.
    pub rows: Vec<(Subject, Latest)>,
    /// Clusters whose inputs moved: each evaluated soon, once.
    pub evaluate: std::collections::BTreeSet<ClusterId>,
    pub findings: Vec<Finding>,
    /// The node [`Took::node_moved`] last looked up and its cluster: a report lists a node's
    /// targets together, so most results skip the look-up.
    last_node: Option<(NodeId, Option<ClusterId>)>,
}

impl Took {
    /// The inputs of `node`'s cluster moved (a node `c` does not hold has none).
    pub(crate) fn node_moved(&mut self, c: &Config, node: NodeId) {
        let cluster = match self.last_node {
            Some((n, cluster)) if n == node => cluster,
            _ => {
                let cluster = c.nodes.get(&node.0).map(|n| n.value.cluster);
                self.last_node = Some((node, cluster));
                cluster
            }
        };
        if let Some(cluster) = cluster {
            self.evaluate.insert(cluster);
        }
    }
}

/// What every book does, whatever its subjects: the part the control core loops over.
pub(crate) trait SubjectBook {
    /// Adds what `asking.caller` probes of this book to its work.
    fn issue(&mut self, asking: &Asking, work: &mut Work);
    /// Time passed: verdicts that move with time alone (probers gone quiet, expiry).
    fn sweep(&mut self, c: &Config, now: Timestamp) -> Vec<Finding>;
    /// The configuration changed: states follow it, verdicts are recomputed.
    fn follow(&mut self, c: &Config, now: Timestamp) -> Vec<Finding>;
    /// `caller` stopped counting (deleted, disabled): its results go.
    fn forget(&mut self, caller: Caller);
    /// What to save now, if anything: at once after a verdict changed, else at the book's
    /// own period.
    fn take_save(&mut self, now: Timestamp) -> Option<Output>;
}

/// How a target a report carries was given to its prober: what tells two of a report's
/// targets apart.
#[derive(Debug, Clone, Copy)]
pub(crate) enum GivenAs {
    /// An address's key, at its place among the keys given (a bit each).
    At(u32),
    /// A mirror's or a monitor's endpoint (a few of them), by what it names.
    Named,
}

/// A book's results, by the key its [`Subject`] carries.
pub(crate) trait Records: SubjectBook {
    /// What one of its results is about, as parsed from the wire.
    type Key;
    /// How the caller was given `key` with its work, if it was.
    fn given(given: &Given, key: &Self::Key) -> Option<GivenAs>;
    /// Takes one result about `key`.
    fn record(&mut self, c: &Config, key: &Self::Key, r: Reported, took: &mut Took);
}

/// When a book's saved state is due: it changed (`dirty`), and a verdict changed since the
/// last save (`urgent`: at once) or its period passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Saving {
    /// Something changed since the last save.
    pub dirty: bool,
    /// A verdict changed since the last save.
    pub urgent: bool,
    saved_at: Option<Timestamp>,
}

impl Saving {
    /// Whether a save is due at `now`, saving at most every `every_ms` unless urgent.
    pub(crate) fn due(&self, now: Timestamp, every_ms: i64) -> bool {
        self.dirty && (self.urgent || self.saved_at.is_none_or(|t| now.millis_since(t) >= every_ms))
    }

    /// A save was taken at `now`.
    pub(crate) fn taken(&mut self, now: Timestamp) {
        *self = Saving { dirty: false, urgent: false, saved_at: Some(now) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_save_is_due_once_changed_at_once_when_urgent_else_after_its_period() {
        let t0 = Timestamp::from_millis(1_000_000);
        let mut s = Saving::default();
        assert!(!s.due(t0, 10_000), "nothing changed");
        s.dirty = true;
        assert!(s.due(t0, 10_000), "never saved: at once");
        s.taken(t0);
        s.dirty = true;
        assert!(!s.due(t0.plus_millis(9_999), 10_000));
        assert!(s.due(t0.plus_millis(10_000), 10_000));
        s.urgent = true;
        assert!(s.due(t0.plus_millis(1), 10_000), "a verdict changed: at once");
        s.taken(t0.plus_millis(1));
        assert!(!s.dirty && !s.urgent);
    }
}
