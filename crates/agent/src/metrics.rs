//! Host metrics of a node (`metrics-v1`): whole-host CPU from `/proc/stat` differences, load
//! from `/proc/loadavg`, memory from `/proc/meminfo`, egress of the non-loopback interfaces
//! from `/proc/net/dev` differences, established TCP connections from `/proc/net/tcp{,6}` —
//! or, instead, a JSON file of [`HostMetrics`] re-read at every heartbeat (tests and hosts
//! whose metrics come from elsewhere).
//!
//! The parsers are pure functions over the files' text; [`Sampler`] reads the files and keeps
//! the previous sample for the two rates, which are 0 in the first sample.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use vantage_core::wire::HostMetrics;

use crate::error::{Error, Result};

/// Where metrics come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsSource {
    /// A procfs mount (normally `/proc`).
    Proc(PathBuf),
    /// A JSON file holding one [`HostMetrics`], re-read at every sample.
    File(PathBuf),
}

impl Default for MetricsSource {
    fn default() -> Self {
        MetricsSource::Proc(PathBuf::from("/proc"))
    }
}

/// Cumulative CPU time of the whole host, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Ticks not idle (everything but `idle` and `iowait`).
    pub busy: u64,
    /// All ticks.
    pub total: u64,
}

/// Reads the aggregate `cpu` line of `/proc/stat`: user nice system idle iowait irq softirq
/// steal (guest time is already inside user and nice, so it is not added again).
pub fn parse_stat(text: &str) -> Result<CpuTimes, String> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))
        .ok_or_else(|| "no aggregate cpu line".to_owned())?;
    let fields = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse::<u64>().map_err(|e| format!("cpu field {f:?}: {e}")))
        .collect::<Result<Vec<u64>, String>>()?;
    if fields.len() < 4 {
        return Err(format!("cpu line has {} fields, at least 4 expected", fields.len()));
    }
    let total = fields.iter().fold(0u64, |a, b| a.saturating_add(*b));
    let idle = fields[3].saturating_add(fields.get(4).copied().unwrap_or(0));
    Ok(CpuTimes { busy: total.saturating_sub(idle), total })
}

/// CPU usage in % between two samples (0 when no time passed or the counters went back).
pub fn cpu_pct(prev: CpuTimes, cur: CpuTimes) -> f64 {
    let total = cur.total.saturating_sub(prev.total);
    if total == 0 || cur.total < prev.total {
        return 0.0;
    }
    let busy = cur.busy.saturating_sub(prev.busy);
    (busy as f64 / total as f64 * 100.0).clamp(0.0, 100.0)
}

/// The 1, 5 and 15 minute load of `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Result<(f64, f64, f64), String> {
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().map_err(|e| format!("load {f:?}: {e}")));
    let mut next = || it.next().unwrap_or_else(|| Err("fewer than 3 load values".to_owned()));
    let (l1, l5, l15) = (next()?, next()?, next()?);
    if [l1, l5, l15].iter().any(|l| !l.is_finite() || *l < 0.0) {
        return Err(format!("load out of range: {l1} {l5} {l15}"));
    }
    Ok((l1, l5, l15))
}

/// Memory used (MemTotal − MemAvailable) and total, in bytes, from `/proc/meminfo`. Kernels
/// before 3.14 lack MemAvailable: MemFree + Buffers + Cached stands in.
pub fn parse_meminfo(text: &str) -> Result<(u64, u64), String> {
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let mut parts = rest.split_whitespace();
            let value: u64 = parts.next()?.parse().ok()?;
            // Values are in kB (the kernel writes "kB" and means KiB).
            Some(match parts.next() {
                Some("kB") => value.saturating_mul(1024),
                _ => value,
            })
        })
    };
    let total = field("MemTotal").ok_or_else(|| "no MemTotal".to_owned())?;
    let available = match field("MemAvailable") {
        Some(a) => a,
        None => {
            let free = field("MemFree").ok_or_else(|| "neither MemAvailable nor MemFree".to_owned())?;
            free.saturating_add(field("Buffers").unwrap_or(0)).saturating_add(field("Cached").unwrap_or(0))
        }
    };
    Ok((total.saturating_sub(available), total))
}

/// Bytes sent by each interface, from `/proc/net/dev` (after the two header lines:
/// `name: rx_bytes rx_packets … (8 receive fields) tx_bytes …`).
pub fn parse_net_dev(text: &str) -> Result<Vec<(String, u64)>, String> {
    let mut out = Vec::new();
    for line in text.lines().skip(2) {
        let Some((name, counters)) = line.split_once(':') else {
            continue;
        };
        let tx = counters
            .split_whitespace()
            .nth(8)
            .ok_or_else(|| format!("interface {}: too few counters", name.trim()))?;
        let tx: u64 = tx.parse().map_err(|e| format!("interface {}: tx_bytes {tx:?}: {e}", name.trim()))?;
        out.push((name.trim().to_owned(), tx));
    }
    Ok(out)
}

/// True for the loopback interface, whose traffic never leaves the host.
fn is_loopback(name: &str) -> bool {
    name == "lo"
}

/// Egress in Mbit/s of the non-loopback interfaces between two samples `elapsed` apart. An
/// interface that appeared, vanished or whose counter went back (reset) counts 0.
pub fn egress_mbps(prev: &[(String, u64)], cur: &[(String, u64)], elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    let bytes = cur
        .iter()
        .filter(|(name, _)| !is_loopback(name))
        .filter_map(|(name, now)| {
            let (_, before) = prev.iter().find(|(n, _)| n == name)?;
            now.checked_sub(*before)
        })
        .fold(0u64, u64::saturating_add);
    bytes as f64 * 8.0 / secs / 1_000_000.0
}

/// Established TCP sockets in a `/proc/net/tcp` or `/proc/net/tcp6` table (state `01`).
pub fn count_established(text: &str) -> u64 {
    let n = text.lines().skip(1).filter(|l| l.split_whitespace().nth(3) == Some("01")).count();
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Reads a metrics file: one JSON [`HostMetrics`], every value finite, non-negative, CPU at
/// most 100 %.
pub fn read_metrics_file(path: &Path) -> Result<HostMetrics> {
    let bad = |reason: String| Error::Metrics { path: path.to_owned(), reason };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let m: HostMetrics = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    for (name, v) in [
        ("cpu_pct", m.cpu_pct),
        ("load1", m.load1),
        ("load5", m.load5),
        ("load15", m.load15),
        ("egress_mbps", m.egress_mbps),
    ] {
        if !v.is_finite() || v < 0.0 {
            return Err(bad(format!("{name} must be a non-negative number, not {v}")));
        }
    }
    if m.cpu_pct > 100.0 {
        return Err(bad(format!("cpu_pct must be at most 100, not {}", m.cpu_pct)));
    }
    Ok(m)
}

/// Reads `root/rel` and parses it; errors name the file.
fn read_parsed<T>(root: &Path, rel: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<T> {
    let path = root.join(rel);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(&text).map_err(|reason| Error::Metrics { path, reason }),
        Err(e) => Err(Error::Metrics { path, reason: e.to_string() }),
    }
}

#[derive(Debug, Clone)]
struct ProcSample {
    at: Instant,
    cpu: CpuTimes,
    tx: Vec<(String, u64)>,
}

/// Takes host metrics from its [`MetricsSource`], keeping what the rates need.
#[derive(Debug, Clone)]
pub struct Sampler {
    source: MetricsSource,
    prev: Option<ProcSample>,
}

impl Sampler {
    /// A sampler with no previous sample (its first rates are 0).
    pub fn new(source: MetricsSource) -> Self {
        Sampler { source, prev: None }
    }

    /// Where the metrics come from.
    pub fn source(&self) -> &MetricsSource {
        &self.source
    }

    /// The host metrics now.
    pub fn sample(&mut self) -> Result<HostMetrics> {
        self.sample_at(Instant::now())
    }

    /// The host metrics, as sampled at `at` (rates are over the time since the previous
    /// sample).
    pub fn sample_at(&mut self, at: Instant) -> Result<HostMetrics> {
        let root = match &self.source {
            MetricsSource::File(path) => return read_metrics_file(path),
            MetricsSource::Proc(root) => root.clone(),
        };
        let cpu = read_parsed(&root, "stat", parse_stat)?;
        let (load1, load5, load15) = read_parsed(&root, "loadavg", parse_loadavg)?;
        let (memory_used_bytes, memory_total_bytes) = read_parsed(&root, "meminfo", parse_meminfo)?;
        let tx = read_parsed(&root, "net/dev", parse_net_dev)?;
        let established = |t: &str| Ok::<_, String>(count_established(t));
        // A host without IPv6 has no tcp6 table.
        let tcp6 = read_parsed(&root, "net/tcp6", established).unwrap_or(0);
        let connections = read_parsed(&root, "net/tcp", established)?.saturating_add(tcp6);
        let (cpu_pct, egress_mbps) = match &self.prev {
            Some(p) => (cpu_pct(p.cpu, cpu), egress_mbps(&p.tx, &tx, at.saturating_duration_since(p.at))),
            None => (0.0, 0.0),
        };
        self.prev = Some(ProcSample { at, cpu, tx });
        Ok(HostMetrics {
            cpu_pct,
            load1,
            load5,
            load15,
            memory_used_bytes,
            memory_total_bytes,
            egress_mbps,
            connections,
        })
    }
}
