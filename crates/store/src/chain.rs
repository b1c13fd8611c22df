//! Revisions stored as differences (issue 32): a cluster's records are stored whole now and
//! then, and each revision between holds only what changed, line by line, from the one before
//! it — at 10,000 nodes a revision that adds one address stores a few bytes instead of every
//! address of the cluster. Readers never see the difference: every read rebuilds the full
//! records from the nearest whole revision at or before it.
//!
//! A revision is stored whole when the one before it is not stored or cannot be read back (the
//! first; after revisions dropped while storage was down), when its records are not exactly
//! the core's (free-form JSON), after [`MAX_DELTAS`] differences in a row, or when the
//! differences since the last whole one would name more addresses than the whole records do.
//! So storage grows with what changes (a whole record set at least once in every
//! [`MAX_DELTAS`] + 1 revisions), and a read rebuilds at most [`MAX_DELTAS`] differences whose addresses together
//! are no more than one whole record set.
//!
//! A difference is kept in its own column (`difference`), its row's `records` left empty, so
//! that a server of an older version sharing the database fails to read it instead of taking
//! it for a revision without records; and it carries a fingerprint of the records it rebuilds,
//! so that a chain that no longer holds (a predecessor replaced behind this process's back)
//! fails the read instead of handing DNS wrong records.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use vantage_core::evaluate::{FastSet, Records, came_and_gone};
use vantage_core::ids::{GroupId, LineId};

use crate::{Error, Result, RevisionRow};

/// Differences stored in a row at most before the next revision is stored whole.
const MAX_DELTAS: u32 = 256;

/// A revision as the database holds it: `row.records` are whole when `delta` is 0, else the
/// [`Delta`] from revision `number - 1`; `delta` counts the revisions back to the whole one.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) row: RevisionRow,
    pub(crate) delta: u32,
}

/// What changed in one list of addresses.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Change {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    added: Vec<IpAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    removed: Vec<IpAddr>,
}

impl Change {
    fn between(before: &[IpAddr], after: &[IpAddr]) -> Change {
        let (added, removed) = came_and_gone(before, after);
        Change { added, removed }
    }

    /// Makes the change in `ips`, keeping them sorted (as the core keeps every list of
    /// records); a list the change leaves alone is not touched.
    fn apply(&self, ips: &mut Vec<IpAddr>) {
        if !self.removed.is_empty() {
            let removed: FastSet<&IpAddr> = self.removed.iter().collect();
            ips.retain(|ip| !removed.contains(ip));
        }
        if !self.added.is_empty() {
            ips.extend(&self.added);
            ips.sort_unstable();
        }
    }

    fn size(&self) -> usize {
        self.added.len() + self.removed.len()
    }
}

/// What changed in a cluster's records from one revision to the next.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Delta {
    /// Lines whose addresses changed, or that are new.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    lines: BTreeMap<LineId, Change>,
    /// Lines that are gone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    gone: Vec<LineId>,
    #[serde(default)]
    all: Change,
    /// The shorter TTLs, whole (a few lines at most).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    ttls: BTreeMap<LineId, u32>,
    /// The group orders of lines that steer by latency, whole (a few groups each).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    orders: BTreeMap<LineId, Vec<GroupId>>,
    /// [`fingerprint`] of the records it rebuilds.
    check: u64,
}

impl Delta {
    fn between(before: &Records, after: &Records) -> Delta {
        Delta {
            lines: after
                .lines
                .iter()
                .filter(|(line, ips)| before.lines.get(line) != Some(ips))
                .map(|(line, ips)| {
                    (*line, Change::between(before.lines.get(line).map_or(&[][..], Vec::as_slice), ips))
                })
                .collect(),
            gone: before.lines.keys().filter(|l| !after.lines.contains_key(l)).copied().collect(),
            all: Change::between(&before.all, &after.all),
            ttls: after.ttls.clone(),
            orders: after.orders.clone(),
            check: fingerprint(after),
        }
    }

    /// Makes the change in `r`, in place: a rebuild walks many differences of a large record
    /// set, and each touches few of its lines.
    fn apply(&self, r: &mut Records) {
        for line in &self.gone {
            r.lines.remove(line);
        }
        for (line, change) in &self.lines {
            change.apply(r.lines.entry(*line).or_default());
        }
        self.all.apply(&mut r.all);
        r.ttls.clone_from(&self.ttls);
        r.orders.clone_from(&self.orders);
    }

    /// Addresses it names.
    fn size(&self) -> usize {
        self.lines.values().map(Change::size).sum::<usize>() + self.all.size()
    }
}

/// A hash of `r` that stays the same across processes and versions (FNV-1a over the line ids,
/// addresses and TTLs), for checking a rebuild.
fn fingerprint(r: &Records) -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    for (line, ips) in &r.lines {
        h.eat(&line.0.to_le_bytes());
        h.ips(ips);
    }
    h.ips(&r.all);
    for (line, ttl) in &r.ttls {
        h.eat(&line.0.to_le_bytes());
        h.eat(&ttl.to_le_bytes());
    }
    // Records without orders hash as they did before orders existed.
    for (line, groups) in &r.orders {
        h.eat(&line.0.to_le_bytes());
        h.eat(&(groups.len() as u64).to_le_bytes());
        for g in groups {
            h.eat(&g.0.to_le_bytes());
        }
    }
    h.0
}

/// FNV-1a, 64 bits.
struct Fnv(u64);

impl Fnv {
    fn eat(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// A list of addresses, its length first (so that lists that run together differ).
    fn ips(&mut self, ips: &[IpAddr]) {
        self.eat(&(ips.len() as u64).to_le_bytes());
        for ip in ips {
            match ip {
                IpAddr::V4(v4) => self.eat(&v4.octets()),
                IpAddr::V6(v6) => self.eat(&v6.octets()),
            }
        }
    }
}

/// Addresses whole records name.
fn size(r: &Records) -> usize {
    r.lines.values().map(Vec::len).sum::<usize>() + r.all.len()
}

/// The newest revision stored for a cluster, rebuilt, with how far it is from the whole one
/// and how many addresses the differences since name.
#[derive(Debug)]
pub(crate) struct Tip {
    number: u32,
    records: Records,
    delta: u32,
    spent: usize,
}

/// Reads stored revisions for the chain: a cluster's rows after `after` up to `upto`, oldest
/// first.
pub(crate) trait Earlier: Sync {
    fn earlier(&self, cluster: i64, after: u32, upto: u32) -> crate::backend::Op<'_, Vec<Stored>>;
}

/// The newest revision of each cluster this process stored or read, so that the next one is
/// stored as a difference, and the next read rebuilt, without walking the chain.
#[derive(Clone, Default)]
pub(crate) struct Chains(Arc<Mutex<HashMap<i64, Tip>>>);

impl std::fmt::Debug for Chains {
    /// How many clusters it holds a revision of (their records are the size of the fleet).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.0.lock().map_or(0, |m| m.len());
        f.debug_struct("Chains").field("clusters", &held).finish()
    }
}

impl Chains {
    /// Stores `row` with `insert` (true: a row was written; false: that number was there
    /// already, which keeps the first), as a difference where it can be.
    pub(crate) async fn store(
        &self,
        row: &RevisionRow,
        db: &(impl Earlier + ?Sized),
        insert: impl AsyncFnOnce(&Stored) -> Result<bool>,
    ) -> Result<()> {
        // Only records the core's own form rebuilds exactly (free-form JSON is kept as it is).
        let records = Records::deserialize(&row.records)
            .ok()
            .filter(|r| serde_json::to_value(r).is_ok_and(|v| v == row.records));
        let Some(records) = records else {
            insert(&Stored { row: row.clone(), delta: 0 }).await?;
            return Ok(());
        };
        // Taken out while the write is under way: a write whose outcome is unknown leaves the
        // database to say what the revision before the next one is.
        let kept = self.0.lock().ok().and_then(|mut m| m.remove(&row.cluster));
        let before = match (kept, row.number.checked_sub(1)) {
            (Some(tip), Some(previous)) if tip.number == previous => Some(tip),
            (_, Some(previous)) if previous > 0 => match tip_at(db, row.cluster, previous).await {
                Ok(tip) => tip,
                Err(e) => {
                    // Stored whole, the revision needs nothing of a chain that cannot be read.
                    tracing::warn!(cluster = row.cluster, revision = row.number, error = %e, "the revision before cannot be read back: this one is stored whole");
                    None
                }
            },
            _ => None,
        };
        let (stored, tip) = encode(row, records, before);
        if insert(&stored).await?
            && let Ok(mut m) = self.0.lock()
        {
            m.insert(row.cluster, tip);
        }
        Ok(())
    }
}

/// How `row` (whose records are `records`) is stored after `before`, and the tip it makes.
fn encode(row: &RevisionRow, records: Records, before: Option<Tip>) -> (Stored, Tip) {
    if let Some(mut b) = before
        && b.delta < MAX_DELTAS
    {
        let delta = Delta::between(&b.records, &records);
        let spent = b.spent + delta.size();
        // Checked, so that a list the core ever keeps unsorted is stored whole, not wrong.
        delta.apply(&mut b.records);
        if spent <= size(&records)
            && b.records == records
            && let Ok(json) = serde_json::to_value(&delta)
        {
            let stored = Stored { row: RevisionRow { records: json, ..row.clone() }, delta: b.delta + 1 };
            return (stored, Tip { number: row.number, records, delta: b.delta + 1, spent });
        }
    }
    (Stored { row: row.clone(), delta: 0 }, Tip { number: row.number, records, delta: 0, spent: 0 })
}

/// Revision `number` of `cluster` rebuilt from the database (`None`: not stored, or not the
/// core's records).
async fn tip_at(db: &(impl Earlier + ?Sized), cluster: i64, number: u32) -> Result<Option<Tip>> {
    let Some(last) = db.earlier(cluster, number - 1, number).await?.pop() else { return Ok(None) };
    let mut rows = if last.delta == 0 {
        Vec::new()
    } else {
        db.earlier(cluster, (number - 1).saturating_sub(last.delta), number - 1).await?
    };
    rows.push(last);
    let mut tip: Option<Tip> = None;
    for s in rows {
        tip = next(tip, &s)?;
    }
    Ok(tip.filter(|t| t.number == number))
}

/// The tip after stored row `s`, following `tip` (`None` when `s` is whole but not the
/// core's records).
fn next(tip: Option<Tip>, s: &Stored) -> Result<Option<Tip>> {
    if s.delta == 0 {
        return Ok(Records::deserialize(&s.row.records).ok().map(|records| Tip {
            number: s.row.number,
            records,
            delta: 0,
            spent: 0,
        }));
    }
    let (cluster, number) = (s.row.cluster, s.row.number);
    let broken = |why: String| Error::Broken(format!("revision {number} of cluster {cluster} {why}"));
    let Some(mut t) = tip.filter(|t| t.number.checked_add(1) == Some(number)) else {
        return Err(broken("is stored as a difference from the revision before, which is missing".into()));
    };
    let delta = Delta::deserialize(&s.row.records)
        .map_err(|e| broken(format!("has an unreadable difference: {e}")))?;
    delta.apply(&mut t.records);
    if fingerprint(&t.records) != delta.check {
        return Err(broken("does not rebuild the records it was stored from".into()));
    }
    Ok(Some(Tip { number, records: t.records, delta: s.delta, spent: t.spent + delta.size() }))
}

/// Whether `tip` is the records the stored difference `s` rebuilds (its fingerprint).
fn holds(tip: &Tip, s: &Stored) -> bool {
    s.delta > 0 && Delta::deserialize(&s.row.records).is_ok_and(|d| d.check == fingerprint(&tip.records))
}

impl Chains {
    /// `rows` as stored, with their full records: each difference rebuilt from the nearest
    /// revision before it that is whole, or kept here (read with `db` where it is not among
    /// `rows`). Order kept. The newest revision rebuilt is kept for the next read or store: a
    /// replica that follows reads every cluster's newest revision each second, and would
    /// otherwise rebuild up to [`MAX_DELTAS`] differences each time.
    pub(crate) async fn decode(
        &self,
        rows: Vec<Stored>,
        db: &(impl Earlier + ?Sized),
    ) -> Result<Vec<RevisionRow>> {
        let mut needed: BTreeMap<i64, (u32, u32)> = BTreeMap::new();
        for s in rows.iter().filter(|s| s.delta > 0) {
            let from = s.row.number.saturating_sub(s.delta);
            let e = needed.entry(s.row.cluster).or_insert((from, s.row.number));
            *e = (e.0.min(from), e.1.min(s.row.number));
        }
        let mut rebuilt: HashMap<(i64, u32), serde_json::Value> = HashMap::new();
        for (cluster, (from, first)) in needed {
            // A kept revision between the whole one and the first asked for saves the walk
            // up to it; one that is the first asked for (a follower reading the same newest
            // revision each second) is it, once its fingerprint matches the stored one.
            let kept = self.0.lock().ok().and_then(|mut m| m.remove(&cluster));
            let asked = rows.iter().find(|s| s.row.cluster == cluster && s.row.number == first);
            let (mut tip, kept) = match kept {
                Some(t) if t.number >= from && t.number < first => (Some(t), None),
                Some(t) if t.number == first && asked.is_some_and(|s| holds(&t, s)) => {
                    rebuilt.insert((cluster, first), serde_json::to_value(&t.records)?);
                    (Some(t), None)
                }
                other => (None, other),
            };
            let start = tip.as_ref().map_or(from, |t| t.number + 1);
            let read = if start < first {
                db.earlier(cluster, start.saturating_sub(1), first.saturating_sub(1)).await?
            } else {
                Vec::new()
            };
            let mut chain: BTreeMap<u32, &Stored> = read.iter().map(|s| (s.row.number, s)).collect();
            chain.extend(rows.iter().filter(|s| s.row.cluster == cluster).map(|s| (s.row.number, s)));
            for (number, s) in chain.range(start..) {
                tip = next(tip, s)?;
                if s.delta > 0
                    && let Some(t) = &tip
                {
                    rebuilt.insert((cluster, *number), serde_json::to_value(&t.records)?);
                }
            }
            // Kept: the newer of the one taken out and the one rebuilt last.
            let newest = match (kept, tip) {
                (Some(k), Some(t)) => Some(if k.number > t.number { k } else { t }),
                (k, t) => k.or(t),
            };
            if let Some(t) = newest
                && let Ok(mut m) = self.0.lock()
            {
                // A store meanwhile may have kept a newer one.
                if m.get(&cluster).is_none_or(|have| have.number < t.number) {
                    m.insert(cluster, t);
                }
            }
        }
        Ok(rows
            .into_iter()
            .map(|s| {
                let mut row = s.row;
                if let Some(records) = rebuilt.remove(&(row.cluster, row.number)) {
                    row.records = records;
                }
                row
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(v: &[u8]) -> Vec<IpAddr> {
        v.iter().map(|i| IpAddr::from([192, 0, 2, *i])).collect()
    }

    fn records(lines: &[(i64, &[u8])]) -> Records {
        let lines: BTreeMap<LineId, Vec<IpAddr>> = lines.iter().map(|(l, v)| (LineId(*l), ips(v))).collect();
        let mut all: Vec<IpAddr> = lines.values().flatten().copied().collect();
        all.sort_unstable();
        all.dedup();
        Records { lines, all, ttls: BTreeMap::new(), orders: BTreeMap::new() }
    }

    /// A difference rebuilds the records it was made from: lines changed, new, gone, emptied.
    #[test]
    fn a_delta_rebuilds_what_it_was_made_from() {
        let a = records(&[(0, &[1, 2, 3]), (1, &[4]), (2, &[5, 6])]);
        let mut b = records(&[(0, &[1, 3, 7]), (2, &[]), (3, &[8])]);
        b.ttls.insert(LineId(0), 30);
        b.orders.insert(LineId(2), vec![GroupId(5), GroupId(4)]);
        let d = Delta::between(&a, &b);
        let mut rebuilt = a.clone();
        d.apply(&mut rebuilt);
        assert_eq!(rebuilt, b);
        assert_ne!(fingerprint(&rebuilt), fingerprint(&Records { orders: BTreeMap::new(), ..b.clone() }));
        assert_eq!(d.gone, [LineId(1)]);
        assert_eq!(d.size(), 2 + 2 + 1 + (3 + 3));
        assert_eq!(Delta::between(&b, &b).size(), 0);
        let mut same = b.clone();
        Delta::between(&b, &b).apply(&mut same);
        assert_eq!(same, b);
    }

    /// A difference applied to other records than it was made from fails the read, naming the
    /// revision, instead of rebuilding wrong records.
    #[test]
    fn a_difference_on_the_wrong_predecessor_is_broken() {
        let (a, b) = (records(&[(0, &[1, 2])]), records(&[(0, &[1, 3])]));
        let row = |number: u32, records: serde_json::Value| RevisionRow {
            cluster: 9,
            number,
            at: vantage_core::Timestamp::from_secs(1),
            reason: String::new(),
            records,
            held: serde_json::json!({}),
            publish: serde_json::json!([]),
        };
        let delta = serde_json::to_value(Delta::between(&a, &b)).unwrap();
        let s = Stored { row: row(2, delta), delta: 1 };
        let good = Tip { number: 1, records: a, delta: 0, spent: 0 };
        assert_eq!(next(Some(good), &s).unwrap().map(|t| t.records), Some(b));
        let other = Tip { number: 1, records: records(&[(0, &[2, 4])]), delta: 0, spent: 0 };
        let e = next(Some(other), &s).expect_err("broken");
        assert!(e.to_string().contains("revision 2 of cluster 9 does not rebuild"), "{e}");
    }
}
