//! What the demo prints while it runs: one line per event, stamped with the time since the
//! demo started. The narrator polls the admin API (probers, addresses, revisions, alerts),
//! asks the built-in DNS server what `dig` on this machine would get, and says what changed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::watch;
use vantage_dns::query_a;

use super::fleet::{self, Api, Fleet, NODES};

/// Standard output with a clock.
#[derive(Debug)]
pub(crate) struct Out {
    start: Instant,
    /// The latest scripted event (what happened, when), for "N s after …".
    event: Mutex<Option<(Instant, String)>>,
}

impl Out {
    pub(crate) fn new() -> Out {
        Out { start: Instant::now(), event: Mutex::new(None) }
    }

    /// When the demo started.
    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    /// Prints `[+  12.3s] line`.
    pub(crate) fn say(&self, line: &str) {
        print_line(&format!("[+{:>6.1}s] {line}", self.start.elapsed().as_secs_f64()));
    }

    /// Prints a continuation line, indented under the stamp.
    pub(crate) fn more(&self, line: &str) {
        print_line(&format!("{:11}{line}", ""));
    }

    /// Remembers a scripted event.
    pub(crate) fn event(&self, what: String) {
        *lock(&self.event) = Some((Instant::now(), what));
    }

    fn since_event(&self) -> Option<String> {
        lock(&self.event)
            .as_ref()
            .map(|(at, what)| format!("{:.1} s after {what}", at.elapsed().as_secs_f64()))
    }
}

/// One line on standard output; a closed output (`vantage demo | head`) is not an error of
/// the demo, so failures to write are ignored.
fn print_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// A poisoned lock only means a panic elsewhere; the value is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the narrator knows of one scheduling address.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    counting: u64,
    failing: u64,
    reachability: String,
}

/// `127.0.0.11 (sin-1a primary)`.
fn describe(ip: IpAddr) -> String {
    for n in NODES {
        if fleet::loopback(n.primary) == ip {
            return format!("{ip} ({} primary)", n.name);
        }
        if n.backup.map(fleet::loopback) == Some(ip) {
            return format!("{ip} ({} backup)", n.name);
        }
    }
    ip.to_string()
}

fn ips(v: &Value) -> Vec<IpAddr> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str()?.parse().ok()).collect()).unwrap_or_default()
}

fn join(ips: &[IpAddr]) -> String {
    if ips.is_empty() {
        "nothing".into()
    } else {
        ips.iter().map(IpAddr::to_string).collect::<Vec<_>>().join(" ")
    }
}

/// `local: 127.0.0.11 127.0.0.13 · default: 127.0.0.14 127.0.0.16`.
fn records(rev: &Value, names: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(lines) = rev["records"]["lines"].as_object() {
        for (id, r) in lines {
            let name = names[id]["name"].as_str().map_or_else(|| format!("line {id}"), str::to_owned);
            parts.push(format!("{name}: {}", join(&ips(r))));
        }
    }
    parts.join(" · ")
}

/// The narrator's memory.
#[derive(Debug, Default)]
struct State {
    probers_online: BTreeSet<String>,
    addresses: HashMap<IpAddr, Seen>,
    /// Per node: the addresses in use, once known.
    in_use: BTreeMap<String, Vec<IpAddr>>,
    revision: u64,
    /// Open alerts: id → summary.
    alerts: BTreeMap<u64, String>,
    dns: Option<Result<Vec<IpAddr>, String>>,
}

/// Polls and narrates until `stop`.
pub(crate) async fn run(
    api: Api,
    dns: SocketAddr,
    fleet: Fleet,
    out: Arc<Out>,
    mut stop: watch::Receiver<bool>,
) {
    let mut state = State::default();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        dns_answer(&mut state, dns, &out).await;
        // The API every other tick: 2 polls a second are plenty for 5 s rounds.
        n += 1;
        if n % 2 == 1 {
            continue;
        }
        if let Err(e) = api_state(&mut state, &api, &fleet, &out).await {
            tracing::debug!(error = %e, "demo narrator: API poll failed");
        }
    }
}

async fn dns_answer(state: &mut State, dns: SocketAddr, out: &Out) {
    let now = query_a(dns, fleet::DOMAIN, Duration::from_secs(1)).await;
    if state.dns.as_ref() == Some(&now) {
        return;
    }
    match &now {
        Ok(ips) => {
            let when = if state.dns.is_none() { None } else { out.since_event() };
            let tail = when.map(|w| format!(" ({w})")).unwrap_or_default();
            out.say(&format!("DNS: {} answers {} to this machine{tail}", fleet::DOMAIN, join(ips)));
        }
        Err(e) => out.say(&format!("DNS: no answer for {}: {e}", fleet::DOMAIN)),
    }
    state.dns = Some(now);
}

async fn api_state(state: &mut State, api: &Api, fleet: &Fleet, out: &Out) -> anyhow::Result<()> {
    let probers = api.get("/v1/probers").await?;
    for p in probers["items"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let name = p["name"].as_str().unwrap_or_default().to_owned();
        let online = p["status"] == "online" && !p["last_round"].is_null();
        if online && state.probers_online.insert(name.clone()) {
            out.say(&format!(
                "prober {name} ({}) is online: {} targets (address × port) every {} s",
                p["region_code"].as_str().unwrap_or("?"),
                p["targets"],
                fleet::INTERVAL_S
            ));
            if state.probers_online.len() == fleet::PROBERS.len() {
                out.more(
                    "All three report now: an address fails when a strict majority (2 of 3) sees it fail.",
                );
            }
        } else if !online && p["status"] == "offline" && state.probers_online.remove(&name) {
            out.say(&format!("prober {name} is offline"));
        }
    }

    let nodes = api.get("/v1/nodes").await?;
    for node in nodes["items"].as_array().map(Vec::as_slice).unwrap_or_default() {
        if node["cluster"].as_i64() != Some(fleet.cluster) {
            continue;
        }
        let name = node["name"].as_str().unwrap_or_default().to_owned();
        let mut in_use = Vec::new();
        for a in node["addresses"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let Some(ip) = a["ip"].as_str().and_then(|s| s.parse::<IpAddr>().ok()) else { continue };
            if a["in_use"] == true {
                in_use.push(ip);
            }
            let now = Seen {
                counting: a["probers"]["counting"].as_u64().unwrap_or(0),
                failing: a["probers"]["failing"].as_u64().unwrap_or(0),
                reachability: a["reachability"].as_str().unwrap_or("reachable").to_owned(),
            };
            let before = state.addresses.insert(ip, now.clone());
            if let Some(before) = before {
                address_change(ip, &before, &now, out);
            }
        }
        match state.in_use.get(&name) {
            Some(before) if !before.is_empty() && !in_use.is_empty() && *before != in_use => {
                let primary = NODES.iter().find(|n| n.name == name).map(|n| fleet::loopback(n.primary));
                let which = if primary.is_some_and(|p| in_use.contains(&p)) {
                    "its primary address again"
                } else {
                    "its backup address"
                };
                out.say(&format!("node {name} answers with {which}: {}", join(&in_use)));
            }
            _ => {}
        }
        if !in_use.is_empty() {
            state.in_use.insert(name, in_use);
        }
    }

    let revs = api.get(&format!("/v1/clusters/{}/revisions?limit=20", fleet.cluster)).await?;
    let mut new: Vec<&Value> = revs["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|r| r["number"].as_u64().is_some_and(|n| n > state.revision))
        .collect();
    new.sort_by_key(|r| r["number"].as_u64());
    if state.revision == 0 && new.len() > 1 {
        // The set-up made one revision per change; only the last one tells anything.
        let skipped = new.len() - 1;
        out.say(&format!("revisions 1–{skipped} were cut while the fleet was set up, one per change"));
        new.drain(..skipped);
    }
    for r in new {
        let number = r["number"].as_u64().unwrap_or_default();
        out.say(&format!(
            "revision {number}: {} — {}",
            r["reason"].as_str().unwrap_or("?"),
            records(r, &revs["lines"])
        ));
        if let Some(held) = r["held"].as_object().filter(|h| !h.is_empty()) {
            for (line, why) in held {
                let name = revs["lines"][line]["name"].as_str().unwrap_or(line);
                out.more(&format!("line {name} kept its records: {}", why.as_str().unwrap_or_default()));
            }
        }
        state.revision = state.revision.max(number);
    }

    let alerts = api.get("/v1/alerts").await?;
    let open: BTreeMap<u64, String> = alerts["open"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|a| Some((a["id"].as_u64()?, a["summary"].as_str().unwrap_or_default().to_owned())))
        .collect();
    for (id, summary) in &open {
        if !state.alerts.contains_key(id) {
            out.say(&format!("alert firing: {summary}"));
        }
    }
    for (id, summary) in &state.alerts {
        if !open.contains_key(id) {
            out.say(&format!("alert resolved: {summary}"));
        }
    }
    state.alerts = open;
    Ok(())
}

fn address_change(ip: IpAddr, before: &Seen, now: &Seen, out: &Out) {
    let who = describe(ip);
    if now.failing != before.failing && now.counting > 0 {
        let majority = now.failing * 2 > now.counting;
        let was_majority = before.failing * 2 > before.counting;
        if now.failing > before.failing {
            let mut line = format!("{who}: {} of {} probers see it failing", now.failing, now.counting);
            if majority && !was_majority {
                line.push_str(&format!(
                    " — a majority: unreachable once that has lasted {} s",
                    fleet::FAILING_BEFORE_UNREACHABLE_S
                ));
            }
            out.say(&line);
        } else {
            let mut line = if now.failing == 0 {
                format!("{who}: every prober sees it answering")
            } else {
                format!("{who}: {} of {} probers still see it failing", now.failing, now.counting)
            };
            if was_majority && !majority && now.reachability == "unreachable" {
                line.push_str(&format!(
                    " — a majority sees it answer: reachable again once that has lasted {} s",
                    fleet::ANSWERING_BEFORE_REACHABLE_S
                ));
            }
            out.say(&line);
        }
    }
    if now.reachability != before.reachability {
        match now.reachability.as_str() {
            "unreachable" => out.say(&format!(
                "{who} is unreachable: a majority saw it fail for {} s",
                fleet::FAILING_BEFORE_UNREACHABLE_S
            )),
            _ => out.say(&format!(
                "{who} is reachable again: a majority saw it answer for {} s",
                fleet::ANSWERING_BEFORE_REACHABLE_S
            )),
        }
    }
}
