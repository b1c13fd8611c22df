//! What the control core publishes after each pass, one snapshot per cluster: the revision DNS
//! serves (with the zone as it was when the revision was cut, so that the serial always
//! matches the records and names), every node's status with the level DNS uses, and the rule
//! states. The API, the UI, the rule preview and DNS read only this.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use vantage_core::Timestamp;
use vantage_core::answer::LineHold;
use vantage_core::evaluate::{DEFAULT_LINE, NodeStatus, Records, RuleNodeStatus};
use vantage_core::geo::Places;
use vantage_core::ids::{ClusterId, LineId, NodeId};
use vantage_core::net::IpNet;

use crate::config::Config;

/// A line's name and the clients it answers, as of a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneLine {
    /// Line name (`default` for the implicit line).
    pub name: String,
    /// Client networks it answers (with no place either: the default line).
    pub client_networks: Vec<IpNet>,
    /// The places (by the geo database) whose clients it answers.
    pub places: Places,
}

/// A cluster's zone as of a revision: what DNS needs besides the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// Cluster name.
    pub name: String,
    pub domain: String,
    /// Alias domains.
    pub aliases: Vec<String>,
    /// TTL of its answers.
    pub ttl: u32,
    /// Its lines.
    pub lines: BTreeMap<LineId, ZoneLine>,
}

impl Zone {
    /// The zone of cluster `id` in `c` (`None` once the cluster is gone).
    pub fn of(c: &Config, id: ClusterId) -> Option<Zone> {
        let cluster = &c.clusters.get(&id.0)?.value;
        let mut lines: BTreeMap<LineId, ZoneLine> = c
            .lines_of(id)
            .map(|(lid, l)| {
                (
                    lid,
                    ZoneLine {
                        name: l.value.line.name.clone(),
                        client_networks: l.value.line.client_networks.clone(),
                        places: l.value.line.places.clone(),
                    },
                )
            })
            .collect();
        lines.entry(DEFAULT_LINE).or_insert_with(|| ZoneLine {
            name: "default".into(),
            client_networks: Vec::new(),
            places: Places::default(),
        });
        Some(Zone {
            name: cluster.name.clone(),
            domain: cluster.domain.clone(),
            aliases: cluster.aliases.clone(),
            ttl: cluster.ttl,
            lines,
        })
    }

    /// A line's name, or its id where the line is gone.
    pub fn line_name(&self, line: LineId) -> String {
        self.lines.get(&line).map_or_else(|| line.to_string(), |l| l.name.clone())
    }
}

/// A published revision: its number, records and zone.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    pub cluster: ClusterId,
    /// Revision number (the SOA serial).
    pub number: u32,
    /// When it was cut.
    pub at: Timestamp,
    /// Why it was cut: kept with what DNS serves, so a status reads it from memory even while
    /// the store, which keeps every revision, is away.
    pub reason: String,
    /// Its records.
    pub records: Records,
    /// Lines that answer by their all-down policy in it, which and why: what every status,
    /// alert and figure says of a held line is read from here.
    pub held: BTreeMap<LineId, LineHold>,
    /// The zone it was cut under.
    pub zone: Zone,
}

impl Published {
    /// The records of every line, with the line's name and networks.
    pub fn lines(&self) -> impl Iterator<Item = (LineId, &ZoneLine, &[IpAddr])> + '_ {
        self.records
            .lines
            .iter()
            .filter_map(|(id, r)| self.zone.lines.get(id).map(|l| (*id, l, r.as_slice())))
    }
}

/// One cluster after its last pass.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterSnapshot {
    /// When it was last evaluated (`None`: not yet since start).
    pub evaluated_at: Option<Timestamp>,
    /// The revision DNS serves.
    pub published: Option<Arc<Published>>,
    /// Every node's status from the last pass, shared with the snapshot before where it did
    /// not change.
    pub nodes: BTreeMap<NodeId, Arc<NodeStatus>>,
    /// Every rule state that is not idle.
    pub rules: Vec<RuleNodeStatus>,
    /// Since when each line has answered its current records: the revision that last changed
    /// them (after a restart, at the latest the stored revision's time).
    pub line_since: BTreeMap<LineId, Timestamp>,
    /// Since when each node has been at its current level (unknown before the first change
    /// after a start).
    pub level_since: BTreeMap<NodeId, Timestamp>,
    /// Its drained nodes, draining or drained.
    pub drains: BTreeMap<NodeId, crate::drain::Drain>,
    /// Attempts sent and lost over the results its last pass counted, by prober region.
    pub probe_loss: Vec<(vantage_core::ids::RegionId, u64, u64)>,
}

/// Every cluster's snapshot.
pub type Snapshots = BTreeMap<ClusterId, Arc<ClusterSnapshot>>;
