//! A tenant's mirrors ordered by latency, region by region (§10a): where a tenant asks for it,
//! a door sends a visitor to the eligible mirror its region's probers measure fastest, with
//! content steering's hysteresis — a mirror moves ahead of another only once it has been faster
//! by the margin (20 % and 20 ms) for three check intervals, so visitors are not moved between
//! mirrors on noise — and a mirror failing in the region drops behind at once. A region's
//! latency of a mirror is the median of its probers' (the book's region observation).

use std::collections::{BTreeMap, BTreeSet};

use vantage_core::Timestamp;
use vantage_core::mirror::RegionStatus;
use vantage_core::steering::{HOLD_TTLS, PathwayFigure, SteeringOrder};

use super::book::{Book, check_of};
use crate::config::Config;

/// The order of each (tenant, region) whose tenant orders its mirrors by latency.
#[derive(Debug, Default, Clone)]
pub(super) struct LatencyOrders(BTreeMap<(String, String), SteeringOrder>);

impl LatencyOrders {
    /// Brings every order to `now` from what `book` holds; true when one changed. A region's
    /// first order is by latency at once (nothing was promised to its visitors yet).
    pub(super) fn update(&mut self, c: &Config, book: &Book, now: Timestamp) -> bool {
        let regions: Vec<&str> = c.regions.values().map(|r| r.value.code.as_str()).collect();
        let mut changed = false;
        let mut kept = BTreeSet::new();
        for t in c.mirrors.tenants.values().filter(|t| t.order_by_latency) {
            let hosts: Vec<&str> = (c.mirrors.mirrors.values())
                .filter(|m| m.may_serve(&t.name))
                .map(|m| m.host.as_str())
                .collect();
            let interval_s = hosts.iter().map(|h| check_of(c, h).interval_s()).max().unwrap_or(0);
            let hold_ms = HOLD_TTLS * i64::from(interval_s) * 1000;
            for region in &regions {
                let figures: Vec<PathwayFigure> = (hosts.iter())
                    .map(|h| {
                        let seen = book.state(h).and_then(|s| s.regions.get(*region));
                        let ok = seen.filter(|o| o.status == RegionStatus::Ok);
                        PathwayFigure {
                            pathway: (*h).to_owned(),
                            rank: if ok.is_some() { 0 } else { 1 },
                            ttfb_ms: ok.map(|o| f64::from(o.latency)),
                        }
                    })
                    .collect();
                let key = (t.name.clone(), (*region).to_owned());
                changed |= self.0.entry(key.clone()).or_default().update(&figures, hold_ms, now);
                kept.insert(key);
            }
        }
        let before = self.0.len();
        self.0.retain(|k, _| kept.contains(k));
        changed || self.0.len() != before
    }

    /// Each (tenant, region)'s mirrors by host, preferred first.
    pub(super) fn orders(&self) -> BTreeMap<(String, String), Vec<String>> {
        self.0.iter().map(|(k, o)| (k.clone(), o.order.clone())).collect()
    }
}
