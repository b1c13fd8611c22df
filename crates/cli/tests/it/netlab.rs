//! Separate networks for the fault-injection tests, made with `ip` (iproute2; the tests run as
//! root): every prober gets a network namespace of its own, joined to the test's namespace by
//! a veth pair, so that a prober's network can be cut, or only its way to the edges, while the
//! others' stay. The edges and the agent channel listen on addresses of an interface made
//! here; every address is in 198.18.0.0/15 (set aside for benchmarks, RFC 2544), on interfaces
//! this lab makes and deletes, so no traffic leaves the machine.

use std::net::IpAddr;
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};

/// Labs made by this test process: each gets its own index in its names.
static NEXT: AtomicU8 = AtomicU8::new(0);

/// The namespaces, veth pairs and address interface of one test; deleted when dropped.
pub(crate) struct NetLab {
    /// `vt<pid>x<index>`: the prefix of every name, so that leftovers of a killed run are known.
    tag: String,
    /// The third octet of every address: 198.18.lab.x and 198.19.lab.x.
    lab: u8,
    probers: u8,
}

/// A third octet that no interface on this machine uses in 198.18.0.0/15, starting from one
/// the process id picks, so that labs of test processes running side by side do not share
/// addresses. Labs are made one at a time within a process (the caller holds `MAKING`).
fn free_octet() -> u8 {
    let out =
        Command::new("ip").args(["-o", "-4", "addr", "show"]).output().map(|o| o.stdout).unwrap_or_default();
    let text = String::from_utf8_lossy(&out);
    let used = |o: u8| text.contains(&format!("198.18.{o}.")) || text.contains(&format!("198.19.{o}."));
    let start = std::process::id() % 250;
    (0..250u32)
        .filter_map(|i| u8::try_from((start + i) % 250).ok())
        .find(|&o| !used(o))
        .expect("a free 198.18.x.0/24")
}

/// Held while a lab picks its octet and makes its interfaces.
static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl NetLab {
    /// A lab with `probers` namespaces (at most 9; at most 9 labs per test process, so that
    /// every name fits the 15 bytes of an interface name).
    pub(crate) fn new(probers: u8) -> NetLab {
        assert!(probers <= 9);
        let _making = MAKING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        remove_leftovers();
        let index = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(index <= 9, "at most 9 labs per test process");
        let tag = format!("vt{}x{index}", std::process::id());
        let net = NetLab { tag, lab: free_octet(), probers };
        // A veth pair with both ends here stands in for a dummy interface, whose kernel module
        // machines may lack: its addresses are this namespace's own.
        let (local, peer) = (net.local(), format!("{}e", net.tag));
        ip(&["link", "add", &local, "type", "veth", "peer", "name", &peer]);
        ip(&["link", "set", &peer, "up"]);
        ip(&["link", "set", &local, "up"]);
        ip(&["addr", "add", &format!("{}/32", net.server_ip()), "dev", &local]);
        for e in 0..4 {
            ip(&["addr", "add", &format!("{}/32", net.edge_ip(e)), "dev", &local]);
        }
        for p in 0..probers {
            let (ns, outer, inner) = (net.netns(p), net.outer(p), net.inner(p));
            ip(&["netns", "add", &ns]);
            ip(&["link", "add", &outer, "type", "veth", "peer", "name", &inner]);
            ip(&["link", "set", &inner, "netns", &ns]);
            ip(&["addr", "add", &format!("{}/30", net.gateway(p)), "dev", &outer]);
            ip(&["link", "set", &outer, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&["-n", &ns, "addr", "add", &format!("{}/30", net.prober_ip(p)), "dev", &inner]);
            ip(&["-n", &ns, "link", "set", &inner, "up"]);
            ip(&["-n", &ns, "route", "add", "default", "via", &net.gateway(p).to_string()]);
        }
        net
    }

    /// Where the agent channel listens.
    pub(crate) fn server_ip(&self) -> IpAddr {
        IpAddr::from([198, 18, self.lab, 1])
    }

    /// Edge `e` (0–3): 198.18.lab.16–19, the /30 that [`NetLab::cut_edges`] makes unreachable.
    pub(crate) fn edge_ip(&self, e: u8) -> IpAddr {
        IpAddr::from([198, 18, self.lab, 16 + e])
    }

    /// The command prefix that runs a program in prober `p`'s namespace.
    pub(crate) fn wrapper(&self, p: u8) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.netns(p)]
    }

    /// Cuts prober `p`'s network: its link goes down, so it reaches neither the edges nor the
    /// server.
    pub(crate) fn cut(&self, p: u8) {
        ip(&["link", "set", &self.outer(p), "down"]);
    }

    /// Undoes [`NetLab::cut`].
    pub(crate) fn restore(&self, p: u8) {
        ip(&["link", "set", &self.outer(p), "up"]);
    }

    /// Cuts prober `p`'s way to the edges only (they become unreachable from it, as behind a
    /// broken upstream); it still reaches the server and reports.
    pub(crate) fn cut_edges(&self, p: u8) {
        ip(&["-n", &self.netns(p), "route", "add", "unreachable", &self.edges_net()]);
    }

    /// Undoes [`NetLab::cut_edges`].
    pub(crate) fn restore_edges(&self, p: u8) {
        ip(&["-n", &self.netns(p), "route", "del", "unreachable", &self.edges_net()]);
    }

    fn edges_net(&self) -> String {
        format!("198.18.{}.16/30", self.lab)
    }

    fn local(&self) -> String {
        format!("{}d", self.tag)
    }

    fn netns(&self, p: u8) -> String {
        format!("{}n{p}", self.tag)
    }

    /// The veth end in the test's namespace.
    fn outer(&self, p: u8) -> String {
        format!("{}o{p}", self.tag)
    }

    /// The veth end in the prober's namespace.
    fn inner(&self, p: u8) -> String {
        format!("{}i{p}", self.tag)
    }

    /// The test's side of prober `p`'s /30: 198.19.lab.(4p + 1).
    fn gateway(&self, p: u8) -> IpAddr {
        IpAddr::from([198, 19, self.lab, 4 * p + 1])
    }

    fn prober_ip(&self, p: u8) -> IpAddr {
        IpAddr::from([198, 19, self.lab, 4 * p + 2])
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        for p in 0..self.probers {
            // Deleting a namespace deletes its veth end, and with it the pair; the second
            // command is for a namespace that was never made, and usually finds nothing.
            quietly(&["netns", "del", &self.netns(p)]);
            quietly(&["link", "del", &self.outer(p)]);
        }
        quietly(&["link", "del", &self.local()]);
    }
}

/// Runs `ip ARGS…` for cleaning up: whatever is already gone is no error.
fn quietly(args: &[&str]) {
    let _ = Command::new("ip").args(args).stderr(std::process::Stdio::null()).status();
}

/// Runs `ip ARGS…`, which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip (iproute2) is installed");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// Deletes the namespaces and interfaces of labs whose test process is gone (killed before its
/// labs were dropped), so that their addresses do not shadow this run's.
fn remove_leftovers() {
    let alive = |name: &str| {
        let pid =
            name.strip_prefix("vt").and_then(|r| r.split('x').next()).and_then(|p| p.parse::<u32>().ok());
        pid.is_none_or(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
    };
    let listed = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().map(|o| o.stdout).unwrap_or_default();
        String::from_utf8_lossy(&out).into_owned()
    };
    for line in listed(&["netns", "list"]).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if name.starts_with("vt") && !alive(name) {
            quietly(&["netns", "del", name]);
        }
    }
    for line in listed(&["-o", "link", "show"]).lines() {
        // `7: vt123x0d: <…>` or `8: vt123x0o0@if2: <…>`
        let name = line.split(':').nth(1).unwrap_or_default().trim().split('@').next().unwrap_or_default();
        if name.starts_with("vt") && name.contains('x') && !alive(name) {
            quietly(&["link", "del", name]);
        }
    }
}
