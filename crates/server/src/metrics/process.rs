//! The process metrics Prometheus' client libraries export under their standard names
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …), read from `/proc/self` at
//! each scrape: prometheus-client has no process collector of its own.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of the times in `/proc/<pid>/stat`: the kernel's `USER_HZ`, which is
/// 100 on every architecture Linux exports to user space the same way (Prometheus' own procfs
/// reader assumes it too), so no `sysconf` call (and no `unsafe`) is needed.
const USER_HZ: f64 = 100.0;

/// What `/proc/self` says about this process.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Reading {
    cpu_seconds: f64,
    resident_bytes: f64,
    virtual_bytes: f64,
    start_time_seconds: f64,
    open_fds: f64,
    max_fds: Option<f64>,
}

/// From `/proc/self/stat`: CPU time (user + system), virtual size and start time (ticks since
/// boot, made absolute with `btime` of `/proc/stat`). The fields are counted after the
/// command's closing parenthesis, since the command itself may hold spaces.
fn parse_stat(stat: &str, boot_time_s: f64) -> Option<(f64, f64, f64)> {
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Field 3 of proc(5) (the state) is fields[0].
    let number = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    let cpu = (number(14)? + number(15)?) / USER_HZ;
    let start = boot_time_s + number(22)? / USER_HZ;
    Some((cpu, number(23)?, start))
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn parse_rss(status: &str) -> Option<f64> {
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().strip_suffix("kB")?;
    Some(kb.trim().parse::<f64>().ok()? * 1024.0)
}

/// `btime` of `/proc/stat`: when the machine booted, in seconds since the epoch.
fn parse_boot_time(stat: &str) -> Option<f64> {
    stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()
}

/// The soft limit of open files in `/proc/self/limits` (`None`: unlimited or unreadable).
fn parse_max_fds(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files").split_whitespace().next()?.parse().ok()
}

impl Reading {
    /// The reading now; `None` off Linux or when `/proc` is not mounted.
    fn now() -> Option<Reading> {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let boot = parse_boot_time(&read("/proc/stat")?)?;
        let (cpu_seconds, virtual_bytes, start_time_seconds) = parse_stat(&read("/proc/self/stat")?, boot)?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as f64;
        Some(Reading {
            cpu_seconds,
            resident_bytes: parse_rss(&read("/proc/self/status")?)?,
            virtual_bytes,
            start_time_seconds,
            open_fds,
            max_fds: read("/proc/self/limits").as_deref().and_then(parse_max_fds),
        })
    }
}

/// Reads `/proc/self` at each scrape; nothing is kept between scrapes.
#[derive(Debug, Default)]
pub(crate) struct Process;

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(r) = Reading::now() else { return Ok(()) };
        let cpu = ConstCounter::new(r.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let gauges = [
            ("process_resident_memory_bytes", "Resident memory size in bytes", Some(r.resident_bytes)),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes", Some(r.virtual_bytes)),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                Some(r.start_time_seconds),
            ),
            ("process_open_fds", "Number of open file descriptors", Some(r.open_fds)),
            ("process_max_fds", "Maximum number of open file descriptors", r.max_fds),
        ];
        for (name, help, value) in gauges {
            let Some(v) = value else { continue };
            let g = ConstGauge::new(v);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_count_after_the_command_even_with_spaces_in_it() {
        // pid (comm) state ppid … utime=14 stime=15 … starttime=22 vsize=23 rss=24
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 3000 104857600 389 0";
        let (cpu, vsize, start) = parse_stat(stat, 1_700_000_000.0).unwrap();
        assert_eq!((cpu, vsize, start), (3.0, 104_857_600.0, 1_700_000_030.0));
        assert_eq!(parse_stat("42 (x) S 1", 0.0), None);
    }

    #[test]
    fn memory_boot_time_and_the_fd_limit_come_from_their_files() {
        assert_eq!(parse_rss("Name:\tvantage\nVmRSS:\t   2048 kB\nThreads:\t9\n"), Some(2_097_152.0));
        assert_eq!(parse_boot_time("cpu  1 2 3\nbtime 1796156446\nprocesses 9\n"), Some(1_796_156_446.0));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            20000                524288               files\n";
        assert_eq!(parse_max_fds(limits), Some(20_000.0));
        assert_eq!(
            parse_max_fds("Max open files            unlimited            unlimited            files\n"),
            None
        );
    }

    #[test]
    fn this_process_reads_as_itself() {
        let r = Reading::now().unwrap();
        assert!(r.resident_bytes > 0.0 && r.open_fds >= 3.0 && r.start_time_seconds > 1.0e9, "{r:?}");
    }
}
