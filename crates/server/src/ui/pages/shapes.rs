//! What several pages show alike: how a node reads at a glance, region names, a probe result
//! with its window strip, a history chart with its legend.

use super::*;

/// How a node reads at a glance.
#[derive(Debug, Clone)]
pub(super) struct Health {
    pub(super) tone: Tone,
    pub(super) label: String,
    pub(super) detail: String,
}

impl Health {
    pub(super) fn badge(&self) -> Markup {
        badge(self.tone, &self.label)
    }
    pub(super) fn healthy(&self) -> bool {
        self.tone == Tone::Good
    }
}

/// A node is healthy when it is in service on its primary addresses and none of its
/// addresses is unreachable; the API's fields say all of that.
pub(super) fn health(n: &views::Node) -> Health {
    let h = |tone, label: &str, detail: String| Health { tone, label: label.to_owned(), detail };
    if !n.enabled {
        return h(Tone::Neutral, "Disabled", "Not probed and not answered".into());
    }
    if let Some(d) = &n.drain {
        let why = n.drain_cause.clone().unwrap_or_default();
        return match d.moved_at.filter(|_| !d.drained) {
            None if d.drained => h(
                Tone::Neutral,
                "Drained",
                format!("Out of the answers ({why}); clients have moved. Still probed"),
            ),
            Some(at) => h(
                Tone::Neutral,
                "Draining",
                format!(
                    "Out of the answers ({why}); clients have moved by {} (2 × TTL). Still probed",
                    format::absolute(at)
                ),
            ),
            None => h(Tone::Neutral, "Draining", format!("Leaving the answers ({why}). Still probed")),
        };
    }
    if n.no_public_address {
        let add = n.addable_source.map(|ip| format!(", or add its source address {ip}")).unwrap_or_default();
        return h(
            Tone::Bad,
            "No public address",
            format!(
                "None is configured and its agent reports no public one: DNS has nothing to answer with. Configure one{add}"
            ),
        );
    }
    let Some(serving) = n.serving else {
        return h(Tone::Neutral, "Not evaluated", "Waiting for the first evaluation".into());
    };
    if !serving {
        return h(
            Tone::Bad,
            "Not answered",
            "Left out of DNS: its agent or a required link is not fresh".into(),
        );
    }
    let ips = |keep: &dyn Fn(&views::AddressView) -> bool| -> Vec<String> {
        n.addresses.iter().filter(|a| keep(a)).map(|a| a.ip.to_string()).collect()
    };
    let down = ips(&|a| a.reachability == Some(Reachability::Unreachable));
    let failing = ips(&|a| a.condition == Some(AddressCondition::Failing));
    match n.level.map(|l| word(&l)).as_deref() {
        None => h(Tone::Bad, "Unreachable", format!("Every address is unreachable: {}", down.join(", "))),
        Some(l) if l != "primary" => {
            let mut why = Vec::new();
            if let Some(r) = &n.held_by {
                why.push(format!("Held by rule {}", r.name.as_deref().unwrap_or("(deleted)")));
            }
            if !down.is_empty() {
                why.push(format!("Unreachable: {}", down.join(", ")));
            }
            h(Tone::Warn, &format!("On {}", level(l)), why.join(" · "))
        }
        Some(_) if !down.is_empty() => h(Tone::Warn, "Degraded", format!("Unreachable: {}", down.join(", "))),
        Some(_) if !failing.is_empty() => h(
            Tone::Warn,
            "Failing",
            format!(
                "A majority of probers sees {} failing; still in DNS until the verdict",
                failing.join(", ")
            ),
        ),
        Some(_) => h(Tone::Good, "Healthy", String::new()),
    }
}

/// Region names by id: `Singapore (ap-sg)`.
pub(super) fn region_names(regions: &[views::Region]) -> HashMap<RegionId, String> {
    regions.iter().map(|r| (RegionId(r.id), format!("{} ({})", r.name, r.code))).collect()
}

/// One probe result with its window strip, for the node and prober pages.
#[derive(Debug)]
pub(super) struct ResultView {
    /// The other side: the prober on a node page, the node on a prober page.
    pub(super) who: String,
    pub(super) who_href: String,
    pub(super) who_note: String,
    pub(super) region: String,
    pub(super) address: String,
    pub(super) loss: Markup,
    pub(super) rtt: String,
    pub(super) error: String,
    pub(super) checked: Markup,
    pub(super) strip: Strip,
}

/// A window register as the pages show it (`_strip.html`): how many of the window's
/// attempts were good against the threshold, then the strips oldest to newest.
#[derive(Debug)]
pub(super) struct Strip {
    pub(super) head: Markup,
    pub(super) text: String,
}

pub(super) fn strip(w: &views::Window) -> Strip {
    let ok = w.good >= w.threshold;
    Strip {
        head: badge(
            if ok { Tone::Good } else { Tone::Bad },
            &format!("good {} of {} (threshold {})", w.good, w.window, w.threshold),
        ),
        text: w.text.trim_end().to_owned(),
    }
}

pub(super) fn error_label(code: &str) -> &str {
    match code {
        "timeout" => "Timed out",
        "refused" => "Connection refused",
        "reset" => "Connection reset",
        "tls" => "TLS handshake failed",
        "status" => "Unexpected status",
        "unreachable" => "Network unreachable",
        "manifest" => "Bad manifest",
        "segment" => "Segment failed",
        "stale" => "Stale segment",
        other => other,
    }
}

pub(super) fn result_view(
    r: &views::ResultRow,
    by_prober: bool,
    regions: &HashMap<RegionId, String>,
    at: Timestamp,
) -> ResultView {
    let (who, who_href, who_note) = if by_prober {
        let note = if r.prober_kind == ProberKind::Node { "node that probes" } else { "" };
        let href = if r.prober_kind == ProberKind::Node {
            format!("/ui/nodes/{}", r.prober)
        } else {
            format!("/ui/probers/{}", r.prober)
        };
        (r.prober_name.clone(), href, note.to_owned())
    } else {
        let name = r.node_name.clone().unwrap_or_else(|| r.target.clone());
        (name, format!("/ui/nodes/{}", r.node), String::new())
    };
    let address = if r.address.is_ipv6() {
        format!("[{}]:{}", r.address, r.port)
    } else {
        format!("{}:{}", r.address, r.port)
    };
    let address = match &r.method {
        Some(m) => format!("{address} {m}"),
        None => address,
    };
    ResultView {
        who,
        who_href,
        who_note,
        region: r.region.and_then(|id| regions.get(&id).cloned()).unwrap_or_else(|| "—".into()),
        address,
        loss: badge(
            if r.lost == 0 {
                Tone::Good
            } else if r.lost >= r.sent {
                Tone::Bad
            } else {
                Tone::Warn
            },
            &format!("{} ({}/{})", pct(r.loss_pct), r.lost, r.sent),
        ),
        rtt: ms(r.rtt_ms),
        error: r.error.map(|e| format!("{} ({})", error_label(e.as_str()), e.as_str())).unwrap_or_default(),
        checked: time(r.checked, at),
        strip: strip(&r.window),
    }
}

#[derive(Debug)]
pub(super) struct ClusterRow {
    pub(super) id: i64,
    pub(super) name: String,
    pub(super) domain: String,
    pub(super) mode: String,
    pub(super) listeners: String,
    pub(super) nodes: usize,
    pub(super) healthy: usize,
    pub(super) revision: String,
    pub(super) revision_at: Markup,
}

impl ClusterRow {
    /// A cluster with the health of its nodes and its newest revision (number, time).
    pub(super) fn new<'a>(
        c: &views::Cluster,
        healths: impl Iterator<Item = &'a Health>,
        revision: String,
        revision_at: Markup,
    ) -> Self {
        let (mut nodes, mut healthy) = (0, 0);
        for h in healths {
            nodes += 1;
            healthy += usize::from(h.healthy());
        }
        ClusterRow {
            id: c.id,
            name: c.name.clone(),
            domain: c.domain.clone(),
            mode: word(&c.dns_mode),
            listeners: listeners_text(c),
            nodes,
            healthy,
            revision,
            revision_at,
        }
    }
}

#[derive(Debug)]
pub(super) struct AlertRow {
    pub(super) kind: String,
    pub(super) summary: String,
    pub(super) fired: Markup,
    pub(super) resolved: Markup,
    /// How long it fired (so far, while open).
    pub(super) lasted: String,
}

pub(super) fn alert_row(a: &views::Alert, at: Timestamp) -> AlertRow {
    AlertRow {
        kind: a.kind.as_str().replace('_', " "),
        summary: a.summary.clone(),
        fired: time(a.fired_at, at),
        resolved: time_or(a.resolved_at, at, "open"),
        lasted: span(a.resolved_at.unwrap_or(at).millis_since(a.fired_at)),
    }
}

pub(super) fn listeners_text(c: &views::Cluster) -> String {
    c.listeners
        .iter()
        .map(|l| {
            format!("{} {}{}", l.port, word(&l.protocol), if l.proxy_protocol { " (PROXY)" } else { "" })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a cluster's check asks, in a line: `GET /.vantage/health (Host
/// health.vantage.invalid), 200 expected, over each listener's protocol`; `tcp: connect`.
pub(super) fn check_text(k: &vantage_core::check::Check) -> String {
    use vantage_core::check::Method;
    let over = k.method().map_or_else(|| "over each listener's protocol".to_owned(), |m| format!("over {m}"));
    match k.method() {
        Some(Method::Tcp) => "tcp: connect".into(),
        _ if !k.request().is_empty() => format!("raw request, {} expected, {over}", k.expected_response()),
        _ => format!("GET {} (Host {}), {} expected, {over}", k.path(), k.host(), k.expected_response()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without `?range=` a chart spans its data: a node made minutes ago gets the quarter
    /// hour, one two hours old the day, an old one the longest range.
    #[test]
    fn charts_default_to_the_span_of_their_data() {
        let at = Timestamp::from_secs(1_800_000_000);
        let unasked = RangeQuery { range: None };
        for (age_s, want) in [
            (60, Range::Quarter),
            (900, Range::Quarter),
            (901, Range::Hour),
            (7_200, Range::Day),
            (90 * 86_400, Range::Fortnight),
        ] {
            assert_eq!(unasked.range(at.plus_millis(-age_s * 1000), at), want, "{age_s} s old");
        }
        let asked = RangeQuery { range: Some("24h".into()) };
        assert_eq!(asked.range(at.plus_millis(-60_000), at), Range::Day, "what is asked wins");
    }

    fn node(json: Value) -> views::Node {
        let mut base = serde_json::json!({
            "id": 7, "created_at": "2026-12-01T09:00:00Z", "updated_at": "2026-12-01T09:00:00Z",
            "name": "sin-1a", "cluster": 1, "group": 2, "enabled": true, "also_probes": false,
            "enrolled": false, "online": false, "last_heartbeat": null, "version": null, "hostname": null,
            "connects_from": null, "capabilities": [], "metrics": null, "links": [], "reported_addresses": [],
            "serving": true, "held_by": null,
        });
        if let (Some(b), Some(extra)) = (base.as_object_mut(), json.as_object()) {
            b.extend(extra.clone());
        }
        serde_json::from_value(base).unwrap()
    }

    /// A node that a backup-IP rule holds on backup 1 after its primary recovered: the page
    /// says which rule holds it, not "Unreachable:" with nothing after it.
    #[test]
    fn a_node_held_on_backup_by_a_rule_names_the_rule() {
        let n = node(serde_json::json!({
            "level": "backup1",
            "held_by": {"rule": 3, "name": "egress"},
            "addresses": [
                {"ip": "203.0.113.10", "level": "primary", "source": "configured", "reachability": "reachable", "in_use": false},
                {"ip": "198.51.100.10", "level": "backup1", "source": "configured", "reachability": "reachable", "in_use": true},
            ],
        }));
        let h = health(&n);
        assert_eq!(h.label, "On Backup 1");
        assert_eq!(h.detail, "Held by rule egress");
        let down = node(serde_json::json!({
            "level": "backup1",
            "addresses": [
                {"ip": "203.0.113.10", "level": "primary", "source": "configured", "reachability": "unreachable", "in_use": false},
                {"ip": "198.51.100.10", "level": "backup1", "source": "configured", "reachability": "reachable", "in_use": true},
            ],
        }));
        assert_eq!(health(&down).detail, "Unreachable: 203.0.113.10");
    }

    /// A node behind NAT with nothing configured: "No public address", never "Healthy", and
    /// the page offers the address its agent connects from.
    #[test]
    fn a_nat_only_node_reads_no_public_address() {
        let n = node(serde_json::json!({
            "online": true, "level": null, "addresses": [], "no_public_address": true,
            "connects_from": "198.51.100.7", "addable_source": "198.51.100.7",
        }));
        let h = health(&n);
        assert_eq!((h.label.as_str(), h.healthy()), ("No public address", false));
        assert!(h.detail.ends_with("or add its source address 198.51.100.7"), "{}", h.detail);
    }
}

/// A history chart and its legend: per line its colour, label and last value.
#[derive(Debug)]
pub(super) struct ChartView {
    pub(super) svg: Markup,
    pub(super) legend: Vec<(usize, String, String)>,
}

impl ChartView {
    /// Draws `c`; each legend entry ends with the line's newest value as `last` reads it.
    pub(super) fn new(c: &Chart<'_>, last: impl Fn(f64) -> String) -> ChartView {
        let notes = c
            .lines
            .iter()
            .map(|l| {
                let newest = l.points.iter().rev().find_map(|(_, v)| *v);
                newest.map_or_else(|| "no data".into(), |v| format!("last {}", last(v)))
            })
            .collect();
        ChartView::with_notes(c, notes)
    }

    /// Draws `c`; each legend entry ends with its line's note.
    pub(super) fn with_notes(c: &Chart<'_>, notes: Vec<String>) -> ChartView {
        let legend = c
            .lines
            .iter()
            .zip(notes)
            .enumerate()
            .map(|(i, (l, note))| (i % chart::COLOURS, l.label.clone(), note))
            .collect();
        ChartView { svg: c.render(), legend }
    }
}

/// `?range=` of the pages with history charts.
#[derive(Debug, Deserialize)]
pub(in crate::ui) struct RangeQuery {
    range: Option<String>,
}

impl RangeQuery {
    /// The range asked for when the history routes know it, else the shortest that spans
    /// the data: everything since `begun` (the object's creation) up to `at`.
    pub(super) fn range(&self, begun: Timestamp, at: Timestamp) -> Range {
        self.range
            .as_deref()
            .and_then(|r| Range::parse(r).ok())
            .unwrap_or_else(|| Range::covering(at.millis_since(begun)))
    }
}

/// The range tabs (`_range_tabs.html`): each range's name, label and whether it is `current`.
pub(super) fn range_tabs(current: Range) -> Vec<(&'static str, &'static str, bool)> {
    Range::ALL.into_iter().map(|r| (r.name(), r.label(), r == current)).collect()
}
