//! Host metrics: the /proc parsers on sample texts, a fake procfs with two samples, this
//! machine's real /proc, and the metrics file.

use std::path::Path;
use std::time::{Duration, Instant};

use vantage_agent::metrics::{
    CpuTimes, MetricsSource, Sampler, count_established, cpu_pct, egress_mbps, parse_loadavg, parse_meminfo,
    parse_net_dev, parse_stat, read_metrics_file,
};
use vantage_core::wire::HostMetrics;

const STAT: &str = "\
cpu  100 10 50 800 40 0 0 0 0 0
cpu0 50 5 25 400 20 0 0 0 0 0
intr 12345
ctxt 999
";

const STAT_LATER: &str = "\
cpu  160 10 80 900 50 0 0 0 0 0
cpu0 80 5 40 450 25 0 0 0 0 0
";

const MEMINFO: &str = "\
MemTotal:        8000000 kB
MemFree:         1000000 kB
MemAvailable:    6000000 kB
Buffers:          100000 kB
Cached:          2000000 kB
";

const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 9999999     100    0    0    0     0          0         0  9999999     100    0    0    0     0       0          0
  eth0: 5000 50 0 0 0 0 0 0 1000000 40 0 0 0 0 0 0
  eth1:    10 1 0 0 0 0 0 0 500000 5 0 0 0 0 0 0
";

const NET_DEV_LATER: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 99999999     100    0    0    0     0          0         0  99999999     100    0    0    0     0       0          0
  eth0: 5000 50 0 0 0 0 0 0 3500000 40 0 0 0 0 0 0
  eth1:    10 1 0 0 0 0 0 0 100 5 0 0 0 0 0 0
  wg0:    10 1 0 0 0 0 0 0 999999 5 0 0 0 0 0 0
";

const TCP: &str = "\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:3C2B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6908819 1 0 100 0 0 10 0
   1: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 7602 1 0 20 4 30 10 -1
   2: 0A00000F:01BB 0B00000F:D431 01 00000000:00000000 02:000A7E5C 00000000     0        0 7603 2 0 20 4 30 10 -1
   3: 0A00000F:01BB 0B00000F:D432 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0
";

const TCP6: &str = "\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:C350 01 00000000:00000000 00:00000000 00000000  1000        0 1 1 0 20 4 30 10 -1
";

#[test]
fn stat_gives_busy_and_total_ticks() {
    // total = 100+10+50+800+40 = 1000; idle = 800 + 40 iowait.
    assert_eq!(parse_stat(STAT).unwrap(), CpuTimes { busy: 160, total: 1000 });
    let later = parse_stat(STAT_LATER).unwrap();
    assert_eq!(later, CpuTimes { busy: 250, total: 1200 });
    // 90 busy ticks of 200.
    assert!((cpu_pct(parse_stat(STAT).unwrap(), later) - 45.0).abs() < 1e-9);
    assert_eq!(cpu_pct(later, later), 0.0, "no time passed");
    assert_eq!(cpu_pct(later, parse_stat(STAT).unwrap()), 0.0, "counters went back");
    assert!(parse_stat("intr 1\n").is_err());
    assert!(parse_stat("cpu 1 2 x 4\n").is_err());
}

#[test]
fn loadavg_and_meminfo() {
    assert_eq!(parse_loadavg("6.55 5.30 4.44 8/201 4725\n").unwrap(), (6.55, 5.30, 4.44));
    assert!(parse_loadavg("1.0 2.0").is_err());
    assert_eq!(parse_meminfo(MEMINFO).unwrap(), (2_000_000 * 1024, 8_000_000 * 1024));
    // Without MemAvailable: MemFree + Buffers + Cached.
    let old = MEMINFO.lines().filter(|l| !l.starts_with("MemAvailable")).collect::<Vec<_>>().join("\n");
    assert_eq!(parse_meminfo(&old).unwrap(), ((8_000_000 - 3_100_000) * 1024, 8_000_000 * 1024));
    assert!(parse_meminfo("MemFree: 1 kB\n").is_err());
}

#[test]
fn net_dev_egress_skips_loopback_and_resets() {
    let before = parse_net_dev(NET_DEV).unwrap();
    assert_eq!(before[1], ("eth0".to_owned(), 1_000_000));
    let after = parse_net_dev(NET_DEV_LATER).unwrap();
    // eth0 sent 2,500,000 bytes in 2 s = 10 Mbit/s; eth1 was reset; wg0 is new; lo never counts.
    let mbps = egress_mbps(&before, &after, Duration::from_secs(2));
    assert!((mbps - 10.0).abs() < 1e-9, "{mbps}");
    assert_eq!(egress_mbps(&before, &after, Duration::ZERO), 0.0);
    assert!(parse_net_dev("h1\nh2\n  eth0: 1 2 3\n").is_err());
}

#[test]
fn tcp_tables_count_established_sockets() {
    assert_eq!(count_established(TCP), 2);
    assert_eq!(count_established(TCP6), 1);
    assert_eq!(count_established(""), 0);
}

fn write_proc(root: &Path, stat: &str, net_dev: &str) {
    std::fs::create_dir_all(root.join("net")).unwrap();
    std::fs::write(root.join("stat"), stat).unwrap();
    std::fs::write(root.join("loadavg"), "0.50 0.25 0.10 1/100 42\n").unwrap();
    std::fs::write(root.join("meminfo"), MEMINFO).unwrap();
    std::fs::write(root.join("net/dev"), net_dev).unwrap();
    std::fs::write(root.join("net/tcp"), TCP).unwrap();
    std::fs::write(root.join("net/tcp6"), TCP6).unwrap();
}

#[test]
fn sampler_rates_are_zero_first_then_differences() {
    let dir = tempfile::tempdir().unwrap();
    write_proc(dir.path(), STAT, NET_DEV);
    let mut sampler = Sampler::new(MetricsSource::Proc(dir.path().to_owned()));
    let t0 = Instant::now();
    let first = sampler.sample_at(t0).unwrap();
    assert_eq!(
        first,
        HostMetrics {
            cpu_pct: 0.0,
            load1: 0.5,
            load5: 0.25,
            load15: 0.1,
            memory_used_bytes: 2_000_000 * 1024,
            memory_total_bytes: 8_000_000 * 1024,
            egress_mbps: 0.0,
            connections: 3,
        }
    );
    write_proc(dir.path(), STAT_LATER, NET_DEV_LATER);
    let second = sampler.sample_at(t0 + Duration::from_secs(2)).unwrap();
    assert!((second.cpu_pct - 45.0).abs() < 1e-9, "{second:?}");
    assert!((second.egress_mbps - 10.0).abs() < 1e-9, "{second:?}");

    // Without tcp6 (IPv6 off) the IPv4 table still counts; without stat, no metrics.
    std::fs::remove_file(dir.path().join("net/tcp6")).unwrap();
    assert_eq!(sampler.sample_at(t0 + Duration::from_secs(4)).unwrap().connections, 2);
    std::fs::remove_file(dir.path().join("stat")).unwrap();
    let e = sampler.sample_at(t0 + Duration::from_secs(6)).unwrap_err();
    assert!(e.to_string().contains("stat"), "{e}");
}

#[test]
fn real_proc_of_this_machine() {
    let mut sampler = Sampler::new(MetricsSource::default());
    let first = sampler.sample().unwrap();
    assert_eq!((first.cpu_pct, first.egress_mbps), (0.0, 0.0), "rates are 0 in the first sample");
    assert!(first.memory_total_bytes > 0 && first.memory_used_bytes <= first.memory_total_bytes, "{first:?}");
    assert!(first.load1 >= 0.0);
    // Burn some CPU so that the second sample has ticks to compare.
    let until = Instant::now() + Duration::from_millis(300);
    let mut x = 0u64;
    while Instant::now() < until {
        x = x.wrapping_mul(31).wrapping_add(1);
    }
    std::hint::black_box(x);
    let second = sampler.sample().unwrap();
    assert!(second.cpu_pct > 0.0 && second.cpu_pct <= 100.0, "{second:?}");
    assert!(second.egress_mbps >= 0.0);
}

#[test]
fn metrics_file_is_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metrics.json");
    let m = HostMetrics {
        cpu_pct: 12.5,
        load1: 1.0,
        memory_total_bytes: 100,
        memory_used_bytes: 40,
        ..Default::default()
    };
    std::fs::write(&path, serde_json::to_string(&m).unwrap()).unwrap();
    assert_eq!(read_metrics_file(&path).unwrap(), m);
    let mut sampler = Sampler::new(MetricsSource::File(path.clone()));
    assert_eq!(sampler.sample().unwrap(), m);

    // Re-read at every sample.
    let m2 = HostMetrics { cpu_pct: 97.0, ..m };
    std::fs::write(&path, serde_json::to_string(&m2).unwrap()).unwrap();
    assert_eq!(sampler.sample().unwrap(), m2);

    let over = serde_json::to_string(&HostMetrics { cpu_pct: 150.0, ..m }).unwrap();
    let negative = serde_json::to_string(&HostMetrics { load5: -1.0, ..m }).unwrap();
    let unknown = serde_json::to_string(&m).unwrap().replace("\"load1\"", "\"nope\"");
    for bad in [over.as_str(), negative.as_str(), unknown.as_str(), r#"{"cpu_pct": 1}"#, "not json"] {
        std::fs::write(&path, bad).unwrap();
        let e = sampler.sample().unwrap_err();
        assert!(e.to_string().contains("metrics.json"), "{bad}: {e}");
    }
    std::fs::remove_file(&path).unwrap();
    assert!(sampler.sample().is_err());
}
