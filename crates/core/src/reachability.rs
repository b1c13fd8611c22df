//! Reachability of an address (§5.1): which results count, failing by strict majority, and
//! the unreachable / reachable-again hysteresis.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::detection::Damping;
use crate::ids::RegionId;
use crate::settings::ProbeSettings;
use crate::time::Timestamp;

/// What the evaluator knows of one prober.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProberView {
    /// Its region.
    pub region: RegionId,
    /// Its results count: an enabled prober, or a node that still probes (enabled, *also
    /// probes* on, group with a region).
    pub active: bool,
}

/// One prober's latest result for one port of an address.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// Index of the prober in the evaluator's prober table.
    pub prober: u32,
    /// Attempts sent (a result has at most 10).
    pub sent: u16,
    /// Attempts lost.
    pub lost: u16,
    /// Median RTT of the good attempts, µs: the latest result's own figure, kept once.
    pub rtt_us: Option<u32>,
    /// When the prober reported it.
    pub reported_at: Timestamp,
    /// When the round's first failed attempt ended, in the server's time (never after
    /// `reported_at`); `None` without a failed attempt, or from a prober that does not say.
    pub failed_at: Option<Timestamp>,
}

impl Observation {
    /// Median RTT of the good attempts, ms.
    pub fn rtt_ms(&self) -> Option<f32> {
        self.rtt_us.map(|us| us as f32 / 1000.0)
    }
}

/// The latest results for one address, every port, every prober; sorted by prober so that
/// one prober's ports are adjacent (the type keeps that order). Kept in place by their keeper
/// as results arrive; a pass borrows them, so nothing shares them through a count (a pass took
/// and dropped one for each address, a third of gathering its view after a change; issue 32).
///
/// Each list made or changed is a new [`edition`](Self::edition), so that a pass can tell an
/// address whose observations did not move since it last tallied them without reading them.
#[derive(Debug, Clone, Default)]
pub struct Observations {
    list: Vec<Observation>,
    /// Unique to this content in the process (0: empty, as made by `default`).
    edition: u64,
}

/// The last edition given out. An identity, like a pointer, not an input to any decision:
/// a pass that tallies again what it could have reused decides the same.
static EDITIONS: AtomicU64 = AtomicU64::new(0);

fn next_edition() -> u64 {
    EDITIONS.fetch_add(1, Ordering::Relaxed) + 1
}

/// The same observations, whatever their editions.
impl PartialEq for Observations {
    fn eq(&self, other: &Observations) -> bool {
        self.list == other.list
    }
}

impl Observations {
    /// Sorts the observations by prober.
    pub fn new(mut v: Vec<Observation>) -> Self {
        if !v.is_sorted_by_key(|o| o.prober) {
            v.sort_by_key(|o| o.prober);
        }
        Observations { list: v, edition: next_edition() }
    }

    /// The observations, sorted by prober.
    pub fn as_slice(&self) -> &[Observation] {
        &self.list
    }

    /// Which content this is: two lists of the same edition hold the same observations (a
    /// copy shares its edition; every change makes a new one).
    pub fn edition(&self) -> u64 {
        self.edition
    }

    /// Puts `o` at place `at` (replacing what was there: the same prober's result for the same
    /// port), or with no place after the observations of its prober, keeping the order by
    /// prober; returns its place. A replacement of another prober's place is refused (`None`).
    pub fn put(&mut self, at: Option<usize>, o: Observation) -> Option<usize> {
        match at {
            Some(i) => {
                if self.list.get(i).is_none_or(|x| x.prober != o.prober) {
                    return None;
                }
                self.list[i] = o;
                self.edition = next_edition();
                Some(i)
            }
            None => {
                let i = self.list.partition_point(|x| x.prober <= o.prober);
                self.list.insert(i, o);
                self.edition = next_edition();
                Some(i)
            }
        }
    }

    /// Removes the observation at place `at`, if there is one.
    pub fn remove(&mut self, at: usize) -> Option<Observation> {
        (at < self.list.len()).then(|| {
            self.edition = next_edition();
            self.list.remove(at)
        })
    }

    /// Reads the first observation, returning a figure of it only so that the read is made: a
    /// pass reads a few addresses' first before it tallies them, so that their cache misses
    /// are waited for together rather than one address after another.
    pub fn touch(&self) -> u64 {
        self.list.first().map_or(0, |o| u64::from(o.sent))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Per counting prober: (prober, sent, lost, RTT sum ms, RTT count) over every port with a
    /// fresh result, handed to `each` in prober order. A result counts when its prober is
    /// active, it sent an attempt, and it was reported within 3 intervals (at least 15 s) of
    /// `now`. One walk of the list, each prober's tally made in place: an iterator calling out
    /// for each prober, its tally returned through memory, was a tenth of a steady pass more
    /// (issue 32).
    #[inline(always)]
    pub fn each_prober(
        &self,
        probers: &[ProberView],
        settings: &ProbeSettings,
        now: Timestamp,
        mut each: impl FnMut(ProberTally),
    ) {
        let fresh = Fresh::of(settings, now);
        let mut rest = self.list.as_slice();
        while let Some(first) = rest.first() {
            let prober = first.prober;
            let n = rest.iter().position(|o| o.prober != prober).unwrap_or(rest.len());
            let (group, next) = rest.split_at(n);
            rest = next;
            if probers.get(prober as usize).is_some_and(|p| p.active)
                && let Some(t) = ProberTally::counted(group, fresh)
            {
                each(t);
            }
        }
    }
}

/// One counting prober's results over the ports of one address (or of several addresses).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProberTally {
    /// Index of the prober.
    pub prober: u32,
    /// Attempts sent over every port.
    pub sent: u32,
    /// Attempts lost over every port.
    pub lost: u32,
    /// Sum of the median RTTs of answering ports, ms.
    pub rtt_sum_ms: f64,
    /// Answering ports.
    pub rtt_n: u32,
    /// Its newest counted result.
    pub reported_at: Timestamp,
    /// Its oldest counted result: the first to stop counting.
    pub oldest: Timestamp,
    /// The earliest end of a failed attempt among its counted results.
    pub failed_at: Option<Timestamp>,
}

impl ProberTally {
    /// The tally of one prober's results (`group`: every one of its ports) that count by
    /// `fresh`, with an attempt sent. `None` when none does.
    #[inline(always)]
    fn counted(group: &[Observation], fresh: Fresh) -> Option<ProberTally> {
        let (mut sent, mut lost, mut rtt_sum_ms, mut rtt_n) = (0u32, 0u32, 0.0f64, 0u32);
        // Any counted result is older (only a tally that counted one is returned).
        let (mut reported_at, mut oldest) = (Timestamp::EPOCH, Timestamp::from_millis(i64::MAX));
        let mut failed_at: Option<Timestamp> = None;
        for o in group.iter().filter(|o| o.sent > 0 && fresh.counts(o.reported_at)) {
            reported_at = reported_at.max(o.reported_at);
            oldest = oldest.min(o.reported_at);
            if let Some(f) = o.failed_at.map(|f| f.min(o.reported_at)) {
                failed_at = Some(failed_at.map_or(f, |g| g.min(f)));
            }
            sent += u32::from(o.sent);
            lost += u32::from(o.lost.min(o.sent));
            if let Some(r) = o.rtt_ms() {
                rtt_sum_ms += f64::from(r);
                rtt_n += 1;
            }
        }
        (sent > 0).then_some(ProberTally {
            prober: group[0].prober,
            sent,
            lost,
            rtt_sum_ms,
            rtt_n,
            reported_at,
            oldest,
            failed_at,
        })
    }

    /// Loss in percent.
    pub fn loss_pct(&self) -> f64 {
        if self.sent == 0 { 0.0 } else { f64::from(self.lost) * 100.0 / f64::from(self.sent) }
    }

    /// True when this prober sees the address failing: loss ≥ the loss setting.
    pub fn sees_failing(&self, settings: &ProbeSettings) -> bool {
        sees_failing(self.sent, self.lost, settings)
    }

    /// Since when its results show the failure: the end of the first failed attempt when the
    /// prober said, else its report.
    pub fn failing_evidence(&self) -> Timestamp {
        self.failed_at.unwrap_or(self.reported_at)
    }
}

/// True when `lost` of `sent` attempts reach the loss setting.
pub fn sees_failing(sent: u32, lost: u32, settings: &ProbeSettings) -> bool {
    sent > 0 && u64::from(lost) * 100 >= u64::from(settings.loss_pct()) * u64::from(sent)
}

/// Which results count at one moment (§5.1's freshness, [`ProbeSettings::result_counts`]),
/// its bound worked out once for the walk of an address's results rather than for each.
#[derive(Debug, Clone, Copy)]
struct Fresh {
    now: Timestamp,
    fresh_ms: i64,
}

impl Fresh {
    fn of(settings: &ProbeSettings, now: Timestamp) -> Fresh {
        Fresh { now, fresh_ms: settings.result_fresh_ms() }
    }

    /// Whether a result reported at `reported_at` counts.
    #[inline(always)]
    fn counts(self, reported_at: Timestamp) -> bool {
        crate::settings::fresh_within(reported_at, self.now, self.fresh_ms)
    }
}

/// How the counting probers see an address, as a pass takes it: what it shows ([`Tally`]) and
/// what the hysteresis reads besides. Never written out: statuses and the API carry the tally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verdict {
    /// Probers whose results count.
    pub counting: u32,
    /// Of those, the ones that see the address failing.
    pub failing: u32,
    /// While failing: the earliest time the reports show a strict majority failing — the
    /// majority-th oldest of the failing probers' evidence (the end of each one's first failed
    /// attempt, else its report). Never earlier than the real start, since each prober saw
    /// the failure by then.
    pub failing_from: Option<Timestamp>,
    /// While not failing: as of when the reports show it so — the newest time by which enough
    /// probers had reported it answering to leave no strict majority failing (the
    /// ⌈counting/2⌉-th newest of the answering probers' reports). A later failing streak may
    /// start no earlier.
    pub answering_at: Option<Timestamp>,
}

impl Verdict {
    /// Failing: a strict majority of the counting probers see it failing. No results: not failing.
    pub fn is_failing(&self) -> bool {
        self.tally().is_failing()
    }

    /// What an operator reads of it.
    pub fn tally(&self) -> Tally {
        Tally { counting: self.counting, failing: self.failing, failing_from: self.failing_from }
    }
}

/// How the counting probers see an address, as the API, `ctl` and the pages show it: the
/// [`Verdict`] without its `answering_at`, the hysteresis's own input. That moves with every
/// round of every prober, so with it every node's view differed after every pass and a list of
/// 10,000 nodes was written out anew (about 40 ms) instead of from the bytes written before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Tally {
    /// Probers whose results count.
    pub counting: u32,
    /// Of those, the ones that see the address failing.
    pub failing: u32,
    /// While failing: the earliest time the reports show a strict majority failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_from: Option<Timestamp>,
}

impl Tally {
    /// Failing: a strict majority of the counting probers see it failing. No results: not failing.
    pub fn is_failing(&self) -> bool {
        self.counting > 0 && self.failing * 2 > self.counting
    }
}

/// One counting prober's say on an address: its region, whether it sees the address failing,
/// since when, and its tally.
#[derive(Debug, Clone, Copy, Default)]
struct Say {
    /// The place of its region among the pass's regions ([`Tallies::NO_REGION`]: none).
    region: u32,
    failing: bool,
    evidence: Timestamp,
    tally: ProberTally,
}

/// What tallying one address needs besides its observations, kept from one address to the
/// next so that a pass over a fleet's addresses allocates nothing but their verdicts: the
/// pass's regions and each prober's as a place among them, the counting probers' says, the
/// same by region, and the times a verdict picks one of.
#[derive(Debug, Default)]
pub struct Tallies {
    /// The regions with an active prober, sorted ([`active_regions`]).
    regions: Vec<RegionId>,
    /// By prober place: the place of its region in `regions`.
    region_at: Vec<u32>,
    says: Vec<Say>,
    by_region: Vec<Say>,
    /// Where each region's says start in `by_region` (one more than the regions), and room
    /// to place them.
    starts: Vec<usize>,
    next: Vec<usize>,
    times: Vec<Timestamp>,
    /// The tally by region being made.
    columns: Vec<(RegionId, Tally)>,
}

impl Tallies {
    /// A prober whose region is not among the pass's (an inactive one's).
    const NO_REGION: u32 = u32::MAX;

    /// For the addresses of one pass over `probers`: its columns are the regions with an
    /// active prober.
    pub fn new(probers: &[ProberView]) -> Tallies {
        let regions = active_regions(probers);
        let region_at = probers
            .iter()
            .map(|p| {
                let at = regions.binary_search(&p.region).ok().and_then(|i| u32::try_from(i).ok());
                at.filter(|_| p.active).unwrap_or(Self::NO_REGION)
            })
            .collect();
        Tallies { starts: vec![0; regions.len() + 1], regions, region_at, ..Tallies::default() }
    }

    /// The pass's regions, sorted: the columns of [`verdicts_by_region`].
    pub fn regions(&self) -> &[RegionId] {
        &self.regions
    }

    /// Fills `self.says` with the says of the counting probers of one address.
    fn say(&mut self, obs: &Observations, probers: &[ProberView], settings: &ProbeSettings, now: Timestamp) {
        self.says.clear();
        let (says, region_at) = (&mut self.says, &self.region_at);
        obs.each_prober(probers, settings, now, |t| {
            says.push(Say {
                region: region_at.get(t.prober as usize).copied().unwrap_or(Self::NO_REGION),
                failing: t.sees_failing(settings),
                evidence: t.failing_evidence(),
                tally: t,
            })
        });
    }

    /// The counting probers' tallies of the address tallied last: what a node's probe metrics
    /// sum up, taken in the same walk as its verdicts.
    pub fn counted(&self) -> impl Iterator<Item = &ProberTally> {
        self.says.iter().map(|s| &s.tally)
    }

    /// Until when the tally of the address tallied last holds if its observations do not
    /// move: the first moment one of the results it counted stops counting (`None`: it
    /// counted none, and none of the others can count again). Results only ever stop counting
    /// as time goes on, and nothing else of a tally reads the time.
    pub fn holds_until(&self, settings: &ProbeSettings) -> Option<Timestamp> {
        let oldest = self.says.iter().map(|s| s.tally.oldest).min()?;
        Some(oldest.plus_millis(settings.result_fresh_ms().saturating_add(1)))
    }
}

/// The verdict of `says` (SPEC §5.1): failing when a strict majority fails, with the time the
/// reports show it so, or the time they show it answering. `times` is room to pick that time
/// in: one selection, not a sort.
fn verdict_of(says: &[Say], times: &mut Vec<Timestamp>) -> Verdict {
    let t = tally_of(says, times);
    let mut v = Verdict {
        counting: t.counting,
        failing: t.failing,
        failing_from: t.failing_from,
        answering_at: None,
    };
    if !t.is_failing() && t.counting > 0 {
        times.clear();
        times.extend(says.iter().filter(|s| !s.failing).map(|s| s.tally.reported_at));
        // The answering probers that leave no strict majority failing; the newest first.
        let enough = (t.counting.div_ceil(2) as usize).saturating_sub(1);
        v.answering_at =
            (enough < times.len()).then(|| *times.select_nth_unstable_by(enough, |a, b| b.cmp(a)).1);
    }
    v
}

/// The tally of `says`: [`verdict_of`] without the time the reports show the address
/// answering, which only the hysteresis reads: a region's tally is shown, never stepped, so
/// that time is not picked for it.
fn tally_of(says: &[Say], times: &mut Vec<Timestamp>) -> Tally {
    let mut t = Tally {
        counting: u32::try_from(says.len()).unwrap_or(u32::MAX),
        failing: u32::try_from(says.iter().filter(|s| s.failing).count()).unwrap_or(u32::MAX),
        failing_from: None,
    };
    if t.is_failing() {
        times.clear();
        times.extend(says.iter().filter(|s| s.failing).map(|s| s.evidence));
        let majority = (t.counting / 2) as usize; // index of the (counting/2 + 1)-th oldest
        t.failing_from = (majority < times.len()).then(|| *times.select_nth_unstable(majority).1);
    }
    t
}

/// Tallies the counting probers of one address.
pub fn verdict(
    obs: &Observations,
    probers: &[ProberView],
    settings: &ProbeSettings,
    now: Timestamp,
) -> Verdict {
    let mut t = Tallies::default();
    t.say(obs, probers, settings, now);
    verdict_of(&t.says, &mut t.times)
}

/// The regions with an active prober, sorted: the columns of [`verdicts_by_region`].
pub fn active_regions(probers: &[ProberView]) -> Vec<RegionId> {
    let mut regions: Vec<RegionId> = probers.iter().filter(|p| p.active).map(|p| p.region).collect();
    regions.sort_unstable();
    regions.dedup();
    regions
}

/// An address's tally by region, in the order of [`Tallies::regions`]: shared, so that the
/// tally a pass keeps for the next (issue 32) and the statuses made from it hold one list, and
/// reading the tally back copies none.
pub type ByRegion = Arc<[(RegionId, Tally)]>;

/// How the counting probers see an address, all together and region by region: [`verdict`],
/// and [`verdict`] over each region's probers alone for every one of the regions with an
/// active prober (`tallies`' [`Tallies::regions`]; a region whose probers have no fresh
/// result counts none). The regions are for reading where a failure is seen from; a few
/// regions alone decide nothing (§5.1). One tally serves both, and adds the attempts those
/// probers sent and lost to `loss` (one (sent, lost) per region, in their order). `tallies`
/// is made for `probers` ([`Tallies::new`]). The tally by region is `before` again, shared,
/// when it is the same.
pub fn verdicts_by_region(
    obs: &Observations,
    probers: &[ProberView],
    (settings, now): (&ProbeSettings, Timestamp),
    (loss, before): (&mut [(u64, u64)], Option<&ByRegion>),
    tallies: &mut Tallies,
) -> (Verdict, ByRegion) {
    debug_assert_eq!(tallies.region_at.len(), probers.len(), "tallies made for these probers");
    tallies.say(obs, probers, settings, now);
    let Tallies { regions, says, by_region, starts, next, times, columns, .. } = tallies;
    debug_assert_eq!(loss.len(), regions.len(), "one (sent, lost) per region");
    let all = verdict_of(says, times);
    // The says by region in two walks (a count, then each in its place), not a sort: every
    // counting prober is active, so its region is one of `regions` (a prober the tallies
    // were not made for has none, and counts in no region).
    let place = |s: &Say| usize::try_from(s.region).ok().filter(|r| *r < regions.len());
    starts.fill(0);
    for r in says.iter().filter_map(place) {
        starts[r + 1] += 1;
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    by_region.clear();
    by_region.resize(starts[regions.len()], Say::default());
    next.clear();
    next.extend_from_slice(starts);
    for s in says.iter() {
        if let Some(r) = place(s) {
            by_region[next[r]] = *s;
            next[r] += 1;
        }
    }
    columns.clear();
    let each = regions.iter().zip(loss.iter_mut()).zip(starts.windows(2)).map(|((r, (sent, lost)), w)| {
        let theirs = &by_region[w[0]..w[1]];
        for s in theirs {
            *sent += u64::from(s.tally.sent);
            *lost += u64::from(s.tally.lost);
        }
        (*r, tally_of(theirs, times))
    });
    columns.extend(each);
    // From one round to the next an address's tally by region most often stays the same: the
    // list before is shared again rather than a list allocated for every address at every pass.
    let by = match before {
        Some(b) if **b == **columns => Arc::clone(b),
        _ => Arc::from(columns.as_slice()),
    };
    (all, by)
}

/// Reachability of an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Reachability {
    /// DNS may use it.
    Reachable,
    /// Failing for *failing before unreachable*; DNS avoids it.
    Unreachable,
}

/// An address's reachability with the streak under way, as an operator reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// Reachable, and no strict majority sees it failing.
    Reachable,
    /// Still reachable (DNS still answers with it), but a strict majority sees it failing:
    /// unreachable at `changes_at` unless it answers again first.
    Failing,
    /// Unreachable, and not answering.
    Unreachable,
    /// Unreachable, answering again: reachable at `changes_at` unless it fails again first.
    Recovering,
    /// New, and no strict majority of the counting probers has seen it answer yet: DNS leaves
    /// it out (unless no prober checks its cluster at all, or it is trusted).
    Unverified,
}

/// [`Condition`] with its times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct AddressCondition {
    pub condition: Condition,
    /// When this condition began (`None`: reachable since the address was first seen).
    pub since: Option<Timestamp>,
    /// While failing or recovering: when the reachability changes if the streak goes on.
    pub changes_at: Option<Timestamp>,
}

/// The hysteresis state of one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressHealth {
    /// Current reachability.
    pub state: Reachability,
    /// When it entered that state (`None`: reachable from the start).
    pub since: Option<Timestamp>,
    /// While reachable: since when it has been failing without a break.
    pub failing_since: Option<Timestamp>,
    /// While unreachable: since when it has been answering (not failing) without a break.
    pub answering_since: Option<Timestamp>,
    /// Flap damping: *answering before reachable* is doubled this many times.
    #[serde(default)]
    pub doublings: u8,
    /// When `doublings` last changed.
    #[serde(default)]
    pub damped_at: Option<Timestamp>,
    /// The newest time the reports showed it answering ([`Verdict::answering_at`]); a failing
    /// streak starts no earlier. Without it, the previous evaluation bounds the streak.
    #[serde(default)]
    pub answered_at: Option<Timestamp>,
    /// A strict majority of the counting probers has seen it answer since it was added (or
    /// it is trusted); until then DNS leaves it out. State saved before addresses were
    /// verified reads as verified.
    #[serde(default = "verified")]
    pub verified: bool,
}

fn verified() -> bool {
    true
}

impl Default for AddressHealth {
    fn default() -> Self {
        AddressHealth {
            state: Reachability::Reachable,
            since: None,
            failing_since: None,
            answering_since: None,
            doublings: 0,
            damped_at: None,
            answered_at: None,
            verified: true,
        }
    }
}

impl AddressHealth {
    /// A newly added address: unverified unless the operator trusts it.
    pub fn added(trusted: bool) -> AddressHealth {
        AddressHealth { verified: trusted, ..AddressHealth::default() }
    }

    /// Verified once a strict majority of the counting probers sees it answer (`v`; of the
    /// `expected` probers, when more probe it than have reported yet), or at once when
    /// trusted; it stays verified.
    pub fn verify(&mut self, v: &Verdict, expected: u32, trusted: bool) {
        let answering = v.counting - v.failing.min(v.counting);
        self.verified |= trusted || answering * 2 > v.counting.max(expected);
    }

    /// Nothing can verify an address: no prober's results count for it and none online is to
    /// probe it (no prober at all, or only the node itself, which never probes its own
    /// addresses). It then serves unverified rather than leave DNS empty.
    pub fn unchecked(v: &Tally, expected: u32) -> bool {
        v.counting == 0 && expected == 0
    }

    /// Feeds one evaluation at `now`: whether the address is failing, and since when the
    /// evidence says so (`evidence ≤ now`; a failing streak may start no earlier than the
    /// reports last showed it answering, or without that the previous evaluation, which saw it
    /// otherwise). Returns the new state when it changed.
    /// Unreachable after failing continuously for *failing before unreachable*; reachable
    /// again after not failing for *answering before reachable* times the damping multiplier.
    /// Going unreachable within the damping window of coming back doubles the multiplier (up
    /// to its cap); each stable window reachable halves it.
    pub fn step(
        &mut self,
        failing: bool,
        evidence: Timestamp,
        previous: Option<Timestamp>,
        now: Timestamp,
        settings: &ProbeSettings,
        damping: &Damping,
    ) -> Option<Reachability> {
        let floor = self.answered_at.or(previous).unwrap_or(Timestamp::EPOCH);
        let start = evidence.min(now).max(floor);
        self.forgive(now, damping);
        let answering_wait = self.answering_wait_s(settings);
        let (streak, wait) = match self.state {
            Reachability::Reachable if failing => {
                (&mut self.failing_since, u64::from(settings.failing_before_unreachable_s()))
            }
            Reachability::Unreachable if !failing => (&mut self.answering_since, answering_wait),
            Reachability::Reachable => {
                self.failing_since = None;
                return None;
            }
            Reachability::Unreachable => {
                self.answering_since = None;
                return None;
            }
        };
        let since = *streak.get_or_insert(start);
        if !now.at_least_secs_after(since, wait) {
            return None;
        }
        let state = match self.state {
            Reachability::Reachable => Reachability::Unreachable,
            Reachability::Unreachable => Reachability::Reachable,
        };
        let (mut doublings, mut damped_at) = (self.doublings, self.damped_at);
        // A flap: down again soon after coming back (`since` is when it came back; `None`
        // when it never was down).
        let flapped = state == Reachability::Unreachable
            && self.since.is_some_and(|back| !now.at_least_secs_after(back, u64::from(damping.window_s())));
        if flapped && doublings < damping.max_doublings() {
            doublings += 1;
            damped_at = Some(now);
        }
        *self = AddressHealth {
            state,
            since: Some(now),
            failing_since: None,
            answering_since: None,
            doublings: doublings.min(damping.max_doublings()),
            damped_at,
            answered_at: self.answered_at,
            verified: self.verified,
        };
        Some(state)
    }

    /// One doubling is forgiven per stable window reachable; a lowered cap applies at once.
    fn forgive(&mut self, now: Timestamp, damping: &Damping) {
        self.doublings = self.doublings.min(damping.max_doublings());
        if self.state != Reachability::Reachable || self.doublings == 0 {
            return;
        }
        let calm_from = self.since.max(self.damped_at).unwrap_or(now);
        if now.at_least_secs_after(calm_from, u64::from(damping.stable_s())) {
            self.doublings -= 1;
            self.damped_at = Some(now);
        }
    }

    /// Feeds one evaluation whose evidence is the verdict: a failing streak starts when the
    /// reports first showed a majority failing (never before they last showed it answering),
    /// an answering streak at `now`.
    pub fn observe(
        &mut self,
        v: &Verdict,
        previous: Option<Timestamp>,
        now: Timestamp,
        settings: &ProbeSettings,
        damping: &Damping,
    ) -> Option<Reachability> {
        if let Some(at) = v.answering_at.filter(|_| !v.is_failing()) {
            let at = at.min(now);
            self.answered_at = Some(self.answered_at.map_or(at, |b| b.max(at)));
        }
        self.step(v.is_failing(), v.failing_from.unwrap_or(now), previous, now, settings, damping)
    }

    /// The damping multiplier of *answering before reachable* now (1: not damped).
    pub fn multiplier(&self) -> u32 {
        1 << self.doublings.min(31)
    }

    /// Seconds an unreachable address must answer before it is reachable again.
    pub fn answering_wait_s(&self, settings: &ProbeSettings) -> u64 {
        u64::from(settings.answering_before_reachable_s()) * u64::from(self.multiplier())
    }

    /// The time at which the state would change if the input stayed as it is (so the
    /// evaluator can wake up exactly then).
    pub fn deadline(&self, settings: &ProbeSettings) -> Option<Timestamp> {
        match self.state {
            Reachability::Reachable => {
                self.failing_since.map(|t| t.plus_secs(u64::from(settings.failing_before_unreachable_s())))
            }
            Reachability::Unreachable => {
                self.answering_since.map(|t| t.plus_secs(self.answering_wait_s(settings)))
            }
        }
    }

    /// The first moment [`observe`](Self::observe) with the verdict `v` it was last observed
    /// with at `now` may change it: the end of its streak, or the next doubling forgiven
    /// (`None`: no such moment); `now` itself when the reports show it answering after `now`
    /// (a clock set back), whose time answered each later step raises. Until then each step
    /// with that verdict leaves it as the last one did (a failing streak, once started, keeps
    /// its start; the time it answered is a maximum; verified stays verified), so a pass may
    /// take it as it is.
    pub fn steady_until(
        &self,
        v: &Verdict,
        now: Timestamp,
        (settings, damping): (&ProbeSettings, &Damping),
    ) -> Option<Timestamp> {
        let forgiven = (self.state == Reachability::Reachable && self.doublings > 0)
            .then(|| self.since.max(self.damped_at))
            .flatten()
            .map(|calm| calm.plus_secs(u64::from(damping.stable_s())));
        let answered_ahead = v.answering_at.filter(|at| !v.is_failing() && *at > now).map(|_| now);
        self.deadline(settings).into_iter().chain(forgiven).chain(answered_ahead).min()
    }

    /// What the address is doing, for people: its reachability, or the streak that will change
    /// it if it goes on — with since when, and when it would change.
    pub fn condition(&self, settings: &ProbeSettings) -> AddressCondition {
        if !self.verified {
            return AddressCondition { condition: Condition::Unverified, since: None, changes_at: None };
        }
        let (condition, since) = match (self.state, self.failing_since, self.answering_since) {
            (Reachability::Reachable, Some(t), _) => (Condition::Failing, Some(t)),
            (Reachability::Reachable, None, _) => (Condition::Reachable, self.since),
            (Reachability::Unreachable, _, Some(t)) => (Condition::Recovering, Some(t)),
            (Reachability::Unreachable, _, None) => (Condition::Unreachable, self.since),
        };
        AddressCondition { condition, since, changes_at: self.deadline(settings) }
    }

    /// Failing, by a strict majority, but not yet unreachable: DNS still answers with it.
    pub fn is_suspect(&self) -> bool {
        self.state == Reachability::Reachable && self.failing_since.is_some()
    }

    /// True when reachable.
    pub fn is_reachable(&self) -> bool {
        self.state == Reachability::Reachable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ProbeSettingsInput;

    const T0: Timestamp = Timestamp::from_secs(1_800_000_000);

    fn probers(n: usize) -> Vec<ProberView> {
        vec![ProberView { region: RegionId(1), active: true }; n]
    }

    fn obs(prober: u32, sent: u16, lost: u16, at: Timestamp) -> Observation {
        Observation {
            prober,
            sent,
            lost,
            rtt_us: (lost < sent).then_some(1000),
            reported_at: at,
            failed_at: None,
        }
    }

    /// Observations updated in place keep their order by prober: a new one goes after its
    /// prober's others, a replacement stays where it is, and only the same prober's place can
    /// be replaced.
    #[test]
    fn observations_put_in_place_stay_sorted_by_prober() {
        let mut o = Observations::new(vec![obs(3, 3, 0, T0), obs(1, 3, 0, T0)]);
        let copy = o.clone();
        assert_eq!(o.put(None, obs(2, 3, 1, T0)), Some(1));
        assert_eq!(o.put(None, obs(1, 3, 2, T0)), Some(1));
        let probers: Vec<u32> = o.as_slice().iter().map(|x| x.prober).collect();
        assert_eq!(probers, [1, 1, 2, 3]);
        assert_eq!(o.put(Some(2), obs(2, 3, 3, T0)), Some(2));
        assert_eq!(o.as_slice()[2].lost, 3);
        assert_eq!(o.put(Some(2), obs(3, 3, 3, T0)), None, "another prober's place");
        assert_eq!(o.remove(0).map(|x| x.lost), Some(0));
        assert_eq!(o.remove(9), None);
        assert_eq!(copy.as_slice().len(), 2, "a copy taken before is not changed");
    }

    fn settings() -> ProbeSettings {
        ProbeSettings::default()
    }

    #[test]
    fn failing_needs_a_strict_majority_of_counting_probers() {
        let p = probers(4);
        let s = settings();
        // 2 of 4 failing: not a strict majority.
        let o =
            Observations::new(vec![obs(0, 3, 3, T0), obs(1, 3, 3, T0), obs(2, 3, 0, T0), obs(3, 3, 0, T0)]);
        let v = verdict(&o, &p, &s, T0);
        assert_eq!((v.counting, v.failing), (4, 2));
        assert!(!v.is_failing());
        // 3 of 4 failing.
        let o =
            Observations::new(vec![obs(0, 3, 3, T0), obs(1, 3, 3, T0), obs(2, 3, 2, T0), obs(3, 3, 0, T0)]);
        assert!(verdict(&o, &p, &s, T0).is_failing());
    }

    #[test]
    fn no_results_is_not_failing() {
        let v = verdict(&Observations::default(), &probers(3), &settings(), T0);
        assert_eq!(v.counting, 0);
        assert!(!v.is_failing());
    }

    #[test]
    fn loss_is_summed_over_every_port_of_the_address() {
        let p = probers(1);
        let s = settings(); // 50 %
        // Port 80 lost 3 of 3, port 443 lost 0 of 3: 50 % over both ports, which fails.
        let o = Observations::new(vec![obs(0, 3, 3, T0), obs(0, 3, 0, T0)]);
        assert_eq!((verdict(&o, &p, &s, T0).counting, verdict(&o, &p, &s, T0).failing), (1, 1));
        // 2 of 6 lost: 33 %, not failing.
        let o = Observations::new(vec![obs(0, 3, 2, T0), obs(0, 3, 0, T0)]);
        assert_eq!((verdict(&o, &p, &s, T0).counting, verdict(&o, &p, &s, T0).failing), (1, 0));
    }

    #[test]
    fn results_count_only_from_active_probers_within_three_intervals() {
        let mut p = probers(3);
        p[2].active = false;
        let s = settings(); // interval 10 s: fresh for 30 s
        let o = Observations::new(vec![
            obs(0, 3, 3, T0),                      // counts, failing
            obs(1, 3, 0, T0.plus_millis(-31_000)), // too old
            obs(2, 3, 0, T0),                      // disabled prober
        ]);
        assert_eq!((verdict(&o, &p, &s, T0).counting, verdict(&o, &p, &s, T0).failing), (1, 1));
        // With interval 5 s the window is at least 15 s.
        let fast = ProbeSettings::parse(ProbeSettingsInput {
            interval_s: 5,
            timeout_ms: 1000,
            ..Default::default()
        })
        .unwrap();
        let o = Observations::new(vec![
            obs(0, 3, 3, T0.plus_millis(-15_000)),
            obs(1, 3, 3, T0.plus_millis(-15_001)),
        ]);
        assert_eq!(verdict(&o, &probers(2), &fast, T0).counting, 1);
    }

    #[test]
    fn each_region_is_tallied_over_its_own_probers() {
        let mut p = probers(5);
        p[2].region = RegionId(2);
        p[3].region = RegionId(2);
        p[4] = ProberView { region: RegionId(3), active: false };
        let s = settings();
        // Region 1 sees it failing 2 of 2, region 2 answering (one fresh result of two), and
        // region 3 has no active prober, so no column.
        let o = Observations::new(vec![
            obs(0, 3, 3, T0),
            obs(1, 3, 3, T0),
            obs(2, 3, 0, T0),
            obs(3, 3, 3, T0.plus_millis(-31_000)),
            obs(4, 3, 3, T0),
        ]);
        let mut loss = [(0, 0); 2];
        let (all, by) = verdicts_by_region(&o, &p, (&s, T0), (&mut loss, None), &mut Tallies::new(&p));
        assert_eq!(loss, [(6, 6), (3, 0)], "the attempts of the results that count, by region");
        let tallies: Vec<(RegionId, u32, u32)> =
            by.iter().map(|(r, v)| (*r, v.failing, v.counting)).collect();
        assert_eq!(tallies, [(RegionId(1), 2, 2), (RegionId(2), 0, 1)]);
        assert!(by[0].1.is_failing() && !by[1].1.is_failing());
        // Together they are what the whole verdict counts.
        assert_eq!(all, verdict(&o, &p, &s, T0));
        assert_eq!((all.failing, all.counting), (2, 3));
        // A round later the same tally by region is the one before, shared; another is not.
        let round = |at: Timestamp, lost: u16| {
            Observations::new(vec![obs(1, 3, lost, at), obs(2, 3, 0, at), obs(4, 3, 0, at)])
        };
        let mut tallies = Tallies::new(&p);
        let (_, by) = verdicts_by_region(&round(T0, 0), &p, (&s, T0), (&mut loss, None), &mut tallies);
        let later = T0.plus_secs(10);
        let (_, again) =
            verdicts_by_region(&round(later, 0), &p, (&s, later), (&mut loss, Some(&by)), &mut tallies);
        assert!(Arc::ptr_eq(&again, &by), "the same tally by region, shared");
        let (_, other) =
            verdicts_by_region(&round(later, 3), &p, (&s, later), (&mut loss, Some(&by)), &mut tallies);
        assert!(!Arc::ptr_eq(&other, &by) && other[0].1.failing == 1, "another, made anew");
    }

    /// Each counting prober's tally the plain way, result by result into a map by prober, with
    /// the settings' own freshness rule: what the one walk of [`Observations::each_prober`]
    /// must give.
    fn plain_tallies(
        obs: &[Observation],
        probers: &[ProberView],
        s: &ProbeSettings,
        now: Timestamp,
    ) -> Vec<ProberTally> {
        let mut by: std::collections::BTreeMap<u32, ProberTally> = std::collections::BTreeMap::new();
        let counted = obs.iter().filter(|o| {
            o.sent > 0
                && s.result_counts(o.reported_at, now)
                && probers.get(o.prober as usize).is_some_and(|p| p.active)
        });
        for o in counted {
            let t = by.entry(o.prober).or_insert(ProberTally {
                prober: o.prober,
                oldest: o.reported_at,
                ..ProberTally::default()
            });
            t.sent += u32::from(o.sent);
            t.lost += u32::from(o.lost.min(o.sent));
            t.reported_at = t.reported_at.max(o.reported_at);
            t.oldest = t.oldest.min(o.reported_at);
            if let Some(f) = o.failed_at {
                let f = f.min(o.reported_at);
                t.failed_at = Some(t.failed_at.map_or(f, |g| g.min(f)));
            }
            if let Some(r) = o.rtt_ms() {
                t.rtt_sum_ms += f64::from(r);
                t.rtt_n += 1;
            }
        }
        by.into_values().collect()
    }

    /// The verdict of `says` the plain way: every time sorted, the majority-th picked.
    fn sorted_verdict(
        obs: &[Observation],
        probers: &[ProberView],
        s: &ProbeSettings,
        now: Timestamp,
    ) -> Verdict {
        let tallies = plain_tallies(obs, probers, s, now);
        let failing: Vec<&ProberTally> = tallies.iter().filter(|t| t.sees_failing(s)).collect();
        let mut v =
            Verdict { counting: tallies.len() as u32, failing: failing.len() as u32, ..Verdict::default() };
        if v.is_failing() {
            let mut times: Vec<Timestamp> = failing.iter().map(|t| t.failing_evidence()).collect();
            times.sort();
            v.failing_from = Some(times[(v.counting / 2) as usize]);
        } else if v.counting > 0 {
            let mut times: Vec<Timestamp> =
                tallies.iter().filter(|t| !t.sees_failing(s)).map(|t| t.reported_at).collect();
            times.sort_by(|a, b| b.cmp(a));
            v.answering_at = Some(times[v.counting.div_ceil(2) as usize - 1]);
        }
        v
    }

    proptest::proptest! {
        /// Tallied with reused room, by region in two walks and with a selection instead of a
        /// sort, one address after another, each verdict is what sorting every time gives —
        /// overall and over each region's probers alone.
        #[test]
        fn verdicts_by_region_are_what_sorting_gives(
            regions_of in proptest::collection::vec((0i64..4, proptest::bool::weighted(0.9)), 1..12),
            addresses in proptest::collection::vec(
                proptest::collection::vec((0u32..12, 0u16..4, 0u16..4, 0i64..40_000, proptest::option::of(0i64..5_000), proptest::option::of(0u32..200_000)), 0..30),
                1..6,
            ),
        ) {
            let p: Vec<ProberView> =
                regions_of.iter().map(|&(r, active)| ProberView { region: RegionId(r), active }).collect();
            let s = settings();
            let now = T0.plus_secs(40);
            let mut tallies = Tallies::new(&p);
            let regions = tallies.regions().to_vec();
            proptest::prop_assert_eq!(&regions, &active_regions(&p));
            for list in addresses {
                let obs: Vec<Observation> = list
                    .iter()
                    .map(|&(prober, sent, lost, ago, failed, rtt_us)| Observation {
                        prober: prober % p.len() as u32,
                        sent,
                        lost: lost.min(sent),
                        rtt_us,
                        reported_at: now.plus_millis(-ago),
                        failed_at: failed.map(|f| now.plus_millis(-ago - f)),
                    })
                    .collect();
                let mut loss = vec![(0, 0); regions.len()];
                let o = Observations::new(obs.clone());
                let (all, by) = verdicts_by_region(&o, &p, (&s, now), (&mut loss, None), &mut tallies);
                proptest::prop_assert_eq!(all, sorted_verdict(&obs, &p, &s, now));
                let mut walked = Vec::new();
                o.each_prober(&p, &s, now, |t| walked.push(t));
                proptest::prop_assert_eq!(walked, plain_tallies(&obs, &p, &s, now), "each prober's tally");
                proptest::prop_assert_eq!(by.len(), regions.len());
                for ((r, v), (region, (sent, lost))) in by.iter().copied().zip(regions.iter().zip(&loss)) {
                    proptest::prop_assert_eq!(r, *region);
                    let only: Vec<ProberView> =
                        p.iter().map(|x| ProberView { active: x.active && x.region == r, ..*x }).collect();
                    proptest::prop_assert_eq!(v, sorted_verdict(&obs, &only, &s, now).tally(), "region {:?}", r);
                    let theirs = plain_tallies(&obs, &only, &s, now)
                        .iter()
                        .fold((0, 0), |(a, b), t| (a + u64::from(t.sent), b + u64::from(t.lost)));
                    proptest::prop_assert_eq!((*sent, *lost), theirs, "the attempts of region {:?}", r);
                }
            }
        }
    }

    #[test]
    fn unreachable_after_failing_before_unreachable() {
        let s = settings(); // 30 s / 60 s
        let mut h = AddressHealth::default();
        assert_eq!(h.step(true, T0, None, T0, &s, &Damping::default()), None);
        assert_eq!(h.deadline(&s), Some(T0.plus_secs(30)));
        assert_eq!(h.step(true, T0.plus_secs(29), Some(T0), T0.plus_secs(29), &s, &Damping::default()), None);
        assert_eq!(
            h.step(true, T0.plus_secs(30), Some(T0.plus_secs(29)), T0.plus_secs(30), &s, &Damping::default()),
            Some(Reachability::Unreachable)
        );
        assert!(!h.is_reachable());
    }

    #[test]
    fn failing_must_be_continuous() {
        let s = settings();
        let mut h = AddressHealth::default();
        h.step(true, T0, None, T0, &s, &Damping::default());
        h.step(false, T0.plus_secs(20), Some(T0), T0.plus_secs(20), &s, &Damping::default());
        assert_eq!(
            h.step(true, T0.plus_secs(30), Some(T0.plus_secs(20)), T0.plus_secs(30), &s, &Damping::default()),
            None,
            "the streak restarted"
        );
        assert_eq!(
            h.step(true, T0.plus_secs(59), Some(T0.plus_secs(30)), T0.plus_secs(59), &s, &Damping::default()),
            None
        );
        assert_eq!(
            h.step(true, T0.plus_secs(60), Some(T0.plus_secs(59)), T0.plus_secs(60), &s, &Damping::default()),
            Some(Reachability::Unreachable)
        );
    }

    #[test]
    fn failing_streak_starts_at_the_evidence_but_not_before_the_previous_evaluation() {
        let s = settings(); // 30 s
        let mut h = AddressHealth::default();
        assert_eq!(h.step(false, T0, None, T0, &s, &Damping::default()), None);
        // Reports at T0+8 showed the failure; the pass runs at T0+10.
        assert_eq!(h.step(true, T0.plus_secs(8), Some(T0), T0.plus_secs(10), &s, &Damping::default()), None);
        assert_eq!(h.deadline(&s), Some(T0.plus_secs(38)));
        assert_eq!(
            h.step(true, T0.plus_secs(8), Some(T0.plus_secs(10)), T0.plus_secs(38), &s, &Damping::default()),
            Some(Reachability::Unreachable)
        );
        // Evidence older than the previous evaluation is clamped to it.
        let mut h = AddressHealth::default();
        h.step(false, T0, None, T0.plus_secs(10), &s, &Damping::default());
        h.step(true, T0, Some(T0.plus_secs(10)), T0.plus_secs(12), &s, &Damping::default());
        assert_eq!(h.failing_since, Some(T0.plus_secs(10)));
    }

    #[test]
    fn failing_from_is_the_majority_th_oldest_failing_report() {
        let p = probers(3);
        let s = settings();
        let o = Observations::new(vec![
            obs(0, 3, 3, T0.plus_secs(1)),
            obs(1, 3, 3, T0.plus_secs(4)),
            obs(2, 3, 3, T0.plus_secs(2)),
        ]);
        // Two of three make a majority: the second oldest failing report.
        assert_eq!(verdict(&o, &p, &s, T0.plus_secs(5)).failing_from, Some(T0.plus_secs(2)));
        let o = Observations::new(vec![
            obs(0, 3, 3, T0.plus_secs(1)),
            obs(1, 3, 0, T0.plus_secs(4)),
            obs(2, 3, 3, T0.plus_secs(3)),
        ]);
        assert_eq!(verdict(&o, &p, &s, T0.plus_secs(5)).failing_from, Some(T0.plus_secs(3)));
    }

    #[test]
    fn reachable_again_after_answering_before_reachable() {
        let s = settings();
        let mut h = AddressHealth::default();
        h.step(true, T0, None, T0, &s, &Damping::default());
        h.step(true, T0.plus_secs(30), Some(T0), T0.plus_secs(30), &s, &Damping::default());
        assert_eq!(
            h.step(
                false,
                T0.plus_secs(40),
                Some(T0.plus_secs(30)),
                T0.plus_secs(40),
                &s,
                &Damping::default()
            ),
            None
        );
        assert_eq!(
            h.step(true, T0.plus_secs(50), Some(T0.plus_secs(40)), T0.plus_secs(50), &s, &Damping::default()),
            None,
            "failing again resets the wait"
        );
        assert_eq!(
            h.step(
                false,
                T0.plus_secs(60),
                Some(T0.plus_secs(50)),
                T0.plus_secs(60),
                &s,
                &Damping::default()
            ),
            None
        );
        assert_eq!(
            h.step(
                false,
                T0.plus_secs(119),
                Some(T0.plus_secs(60)),
                T0.plus_secs(119),
                &s,
                &Damping::default()
            ),
            None
        );
        assert_eq!(
            h.step(
                false,
                T0.plus_secs(120),
                Some(T0.plus_secs(119)),
                T0.plus_secs(120),
                &s,
                &Damping::default()
            ),
            Some(Reachability::Reachable)
        );
    }

    /// Down for 30 s and back after answering for the damped wait, starting at `t`; returns
    /// when it was reachable again.
    fn outage(h: &mut AddressHealth, t: Timestamp, s: &ProbeSettings, d: &Damping) -> Timestamp {
        h.step(true, t, None, t, s, d);
        assert_eq!(h.step(true, t, Some(t), t.plus_secs(30), s, d), Some(Reachability::Unreachable));
        let back = t.plus_secs(30);
        h.step(false, back, Some(t.plus_secs(30)), back, s, d);
        let wait = h.answering_wait_s(s);
        assert_eq!(h.deadline(s), Some(back.plus_secs(wait)));
        assert_eq!(h.step(false, back, Some(back), back.plus_secs(wait - 1), s, d), None);
        assert_eq!(
            h.step(false, back, Some(back.plus_secs(wait - 1)), back.plus_secs(wait), s, d),
            Some(Reachability::Reachable)
        );
        back.plus_secs(wait)
    }

    /// Until `steady_until`, an observation of the verdict of the last one leaves the state as
    /// it is; at that moment it moves: a streak ends, or a doubling is forgiven. Reports that
    /// show it answering after `now` (a clock set back) move it at every step until then.
    #[test]
    fn a_state_steps_to_itself_until_it_is_steady_no_more() {
        let (s, d) = (settings(), Damping::default()); // 60 s; window 1 h, cap 8×, stable 1 h
        let answering =
            |at: Timestamp| Verdict { counting: 3, failing: 0, failing_from: None, answering_at: Some(at) };
        let failing = |from: Timestamp| Verdict {
            counting: 3,
            failing: 2,
            failing_from: Some(from),
            answering_at: None,
        };
        let mut damped = AddressHealth::default();
        let t = outage(&mut damped, T0, &s, &d);
        let t = outage(&mut damped, t.plus_secs(60), &s, &d);
        damped.observe(&answering(t), Some(t), t, &s, &d);
        assert_eq!(damped.multiplier(), 2);
        let mut streak = AddressHealth::default();
        streak.observe(&failing(T0), None, T0, &s, &d);
        let mut recovering = AddressHealth::default();
        recovering.step(true, T0, None, T0, &s, &d);
        recovering.step(true, T0, Some(T0), T0.plus_secs(60), &s, &d);
        let back = T0.plus_secs(61);
        recovering.observe(&answering(back), Some(back), back, &s, &d);
        assert_eq!(recovering.condition(&s).condition, Condition::Recovering);
        let cases =
            [(damped, answering(t), t), (streak, failing(T0), T0), (recovering, answering(back), back)];
        for (i, (h, v, at)) in cases.into_iter().enumerate() {
            let until = h.steady_until(&v, at, (&s, &d)).expect("a moment it moves");
            for now in [at.plus_secs(1), until.plus_millis(-1)] {
                let mut again = h;
                again.observe(&v, Some(now), now, &s, &d);
                assert_eq!(again, h, "case {i}: steady at {now}");
            }
            let mut again = h;
            again.observe(&v, Some(until), until, &s, &d);
            assert_ne!(again, h, "case {i}: moved at {until}");
        }
        let steady = AddressHealth::default();
        assert_eq!(steady.steady_until(&answering(T0), T0, (&s, &d)), None, "reachable, undamped: steady");
        // Reports dated after `now`: the time it answered moves with `now` until then.
        let ahead = answering(T0.plus_secs(30));
        let mut h = AddressHealth::default();
        h.observe(&ahead, None, T0, &s, &d);
        assert_eq!(h.steady_until(&ahead, T0, (&s, &d)), Some(T0), "not steady");
        let mut again = h;
        again.observe(&ahead, Some(T0), T0.plus_secs(1), &s, &d);
        assert_ne!(again, h, "a step later moved it");
    }

    #[test]
    fn flaps_double_answering_before_reachable_up_to_the_cap_and_calm_halves_it() {
        let (s, d) = (settings(), Damping::default()); // 60 s; window 1 h, cap 8×, stable 1 h
        let mut h = AddressHealth::default();
        // The first outage is not a flap: the address had never been down.
        let mut t = outage(&mut h, T0, &s, &d);
        assert_eq!(h.multiplier(), 1);
        let mut waits = Vec::new();
        for _ in 0..4 {
            t = outage(&mut h, t.plus_secs(60), &s, &d);
            waits.push(h.multiplier());
        }
        assert_eq!(waits, [2, 4, 8, 8], "×2 per flap, capped at 8×");
        // Down again more than the window after coming back: not a flap, and an hour of calm
        // halved it first.
        h.step(false, t, None, t.plus_secs(3600), &s, &d);
        assert_eq!(h.multiplier(), 4);
        h.step(false, t, Some(t.plus_secs(3600)), t.plus_secs(3605), &s, &d);
        assert_eq!(h.multiplier(), 4, "one halving per stable window");
        h.step(false, t, Some(t.plus_secs(3605)), t.plus_secs(7205), &s, &d);
        assert_eq!(h.multiplier(), 2);
        outage(&mut h, t.plus_secs(7300), &s, &d);
        assert_eq!(h.multiplier(), 2, "not a flap: it had been back for two hours");
        // Damping off.
        let off = crate::detection::DetectionSettings::parse(crate::detection::DetectionSettingsInput {
            damping_max_multiplier: 1,
            ..Default::default()
        })
        .unwrap();
        let mut h = AddressHealth::default();
        let mut t = outage(&mut h, T0, &s, off.damping());
        for _ in 0..3 {
            t = outage(&mut h, t.plus_secs(10), &s, off.damping());
        }
        assert_eq!(h.multiplier(), 1);
    }

    #[test]
    fn a_saved_state_without_damping_fields_loads_undamped() {
        let h: AddressHealth = serde_json::from_str(
            r#"{"state":"reachable","since":null,"failing_since":null,"answering_since":null}"#,
        )
        .unwrap();
        assert_eq!((h.multiplier(), h.damped_at), (1, None));
    }

    #[test]
    fn failing_evidence_is_the_first_failed_attempt_when_the_prober_says() {
        let p = probers(3);
        let s = settings();
        let mut o = vec![
            obs(0, 3, 3, T0.plus_secs(9)),
            obs(1, 3, 3, T0.plus_secs(12)),
            obs(2, 3, 0, T0.plus_secs(12)),
        ];
        // A hung edge: each round reports after 3 timeouts, but its first attempt failed 6 s
        // before the report.
        o[0].failed_at = Some(T0.plus_secs(3));
        o[1].failed_at = Some(T0.plus_secs(6));
        let v = verdict(&Observations::new(o.clone()), &p, &s, T0.plus_secs(12));
        assert_eq!(v.failing_from, Some(T0.plus_secs(6)));
        // Never after the report, whatever the prober says.
        o[1].failed_at = Some(T0.plus_secs(40));
        let v = verdict(&Observations::new(o), &p, &s, T0.plus_secs(12));
        assert_eq!(v.failing_from, Some(T0.plus_secs(12)));
    }

    #[test]
    fn the_condition_says_failing_and_recovering_before_the_verdict_with_their_times() {
        let (s, d) = (settings(), Damping::default()); // 30 s / 60 s
        let mut h = AddressHealth::default();
        let at = |c, since, changes_at| AddressCondition { condition: c, since, changes_at };
        assert_eq!(h.condition(&s), at(Condition::Reachable, None, None));
        h.step(true, T0, None, T0.plus_secs(2), &s, &d);
        assert_eq!(h.condition(&s), at(Condition::Failing, Some(T0), Some(T0.plus_secs(30))));
        h.step(true, T0, Some(T0.plus_secs(2)), T0.plus_secs(30), &s, &d);
        assert_eq!(h.condition(&s), at(Condition::Unreachable, Some(T0.plus_secs(30)), None));
        h.step(false, T0.plus_secs(40), Some(T0.plus_secs(30)), T0.plus_secs(40), &s, &d);
        assert_eq!(
            h.condition(&s),
            at(Condition::Recovering, Some(T0.plus_secs(40)), Some(T0.plus_secs(100)))
        );
        h.step(false, T0.plus_secs(100), Some(T0.plus_secs(40)), T0.plus_secs(100), &s, &d);
        assert_eq!(h.condition(&s), at(Condition::Reachable, Some(T0.plus_secs(100)), None));
    }

    #[test]
    fn suspect_while_failing_and_still_reachable() {
        let (s, d) = (settings(), Damping::default());
        let mut h = AddressHealth::default();
        assert!(!h.is_suspect());
        h.step(true, T0, None, T0, &s, &d);
        assert!(h.is_suspect());
        h.step(true, T0, Some(T0), T0.plus_secs(30), &s, &d);
        assert!(!h.is_suspect(), "unreachable is not suspect");
    }

    #[test]
    fn a_failing_streak_starts_at_the_evidence_when_the_last_pass_had_only_older_answers() {
        let (s, d) = (settings(), Damping::default());
        let p = probers(3);
        let mut h = AddressHealth::default();
        let at = |ms: i64| T0.plus_millis(ms);
        // A hung edge from T0: prober 0's round (from 1 s) reports at 10 s, its first attempt
        // having failed at 4 s; probers 1 and 2 last answered at -6.7 s and -3.3 s.
        let mut o = vec![obs(0, 3, 3, at(10_000)), obs(1, 3, 0, at(-6_700)), obs(2, 3, 0, at(-3_300))];
        o[0].failed_at = Some(at(4_000));
        let v = verdict(&Observations::new(o.clone()), &p, &s, at(10_000));
        assert!(!v.is_failing());
        assert_eq!(v.answering_at, Some(at(-6_700)), "two answering probers are needed: the older one");
        assert_eq!(h.observe(&v, None, at(10_000), &s, &d), None);
        // Prober 1's round (from 4.3 s) reports at 13.3 s, failed from 7.3 s: a strict majority
        // has been failing since then, not since the pass at 10 s.
        o[1] = Observation { failed_at: Some(at(7_300)), ..obs(1, 3, 3, at(13_300)) };
        let v = verdict(&Observations::new(o), &p, &s, at(13_300));
        assert_eq!(v.failing_from, Some(at(7_300)));
        h.observe(&v, Some(at(10_000)), at(13_300), &s, &d);
        assert_eq!(h.failing_since, Some(at(7_300)));
        assert_eq!(h.deadline(&s), Some(at(37_300)));
    }
}
