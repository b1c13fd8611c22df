//! The health-check snippets of `deploy/edges/`, run by the real servers they are written for
//! (nginx, HAProxy, Varnish): the probers' check (`vantage check`, the prober's own code) is
//! answered by the edge itself, for the probers' health host, before the site's own rules —
//! which still hold for every other request — and never from a backend (the origins here are
//! closed ports).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vantage_testkit::{closed_port, free_port};

use crate::{text, vantage};

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/edges");

fn snippet(name: &str) -> PathBuf {
    Path::new(DEPLOY).join(name)
}

fn read_snippet(name: &str) -> String {
    std::fs::read_to_string(snippet(name)).unwrap()
}

/// An edge server in the foreground in its own temporary directory, killed when dropped.
struct EdgeProcess {
    _child: tokio::process::Child,
    dir: tempfile::TempDir,
}

impl EdgeProcess {
    /// Runs `program ARGS…` (`{dir}` in an argument is the temporary directory, where `files`
    /// are written first) and waits until it listens on every port of `ports` on 127.0.0.1.
    async fn start(program: &str, args: &[&str], files: &[(&str, String)], ports: &[u16]) -> EdgeProcess {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        for (name, body) in files {
            std::fs::write(dir.path().join(name), body.replace("{dir}", &d)).unwrap();
        }
        let args: Vec<String> = args.iter().map(|a| a.replace("{dir}", &d)).collect();
        let child = tokio::process::Command::new(program)
            .args(&args)
            .stdout(std::fs::File::create(dir.path().join("stdout.log")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{program} runs (its Debian package is in .ci/packages): {e}"));
        let edge = EdgeProcess { _child: child, dir };
        let started = Instant::now();
        for &port in ports {
            while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "{program} does not listen on {port}: {}",
                    edge.logs()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        edge
    }

    fn logs(&self) -> String {
        ["stdout.log", "stderr.log", "error.log"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Sends one HTTP/1.1 request and returns everything that came back before the server closed.
async fn raw(port: u16, path: &str, host: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "no end of answer on port {port}");
    String::from_utf8_lossy(&out).into_owned()
}

/// `vantage check 127.0.0.1:PORT` passes, with its default host and path.
async fn probers_see_healthy(edge: &EdgeProcess, port: u16) {
    let out = vantage(&["check", &format!("127.0.0.1:{port}"), "--attempts", "2"]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "port {port}: {stdout}{stderr}\n{}", edge.logs());
    assert!(stdout.contains("verdict: healthy — 2 of 2 attempts good"), "{stdout}");
}

/// The health path on a site's own host is answered too, uncacheable; another path is not.
async fn site_rules_hold(edge: &EdgeProcess, port: u16, other_status: &str) {
    let health = raw(port, "/.vantage/health", "www.example.net").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}\n{}", edge.logs());
    assert!(health.to_ascii_lowercase().contains("cache-control: no-store"), "{health}");
    let page = raw(port, "/index.html", "www.example.net").await;
    assert!(page.starts_with(&format!("HTTP/1.1 {other_status}")), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_snippets_answer_the_health_check_for_any_host_before_site_rules() {
    let (catch_all, site) = (free_port().unwrap(), free_port().unwrap());
    let include = format!("include {};", snippet("nginx-vantage-health.conf").display());
    // The catch-all server exactly as shipped, on a loopback port.
    let server = read_snippet("nginx.conf")
        .replace("listen 80 default_server;", &format!("listen 127.0.0.1:{catch_all} default_server;"))
        .replace("listen [::]:80 default_server;", "")
        .replace("include snippets/vantage-health.conf;", &include);
    let conf = format!(
        "daemon off;\nmaster_process off;\npid {{dir}}/nginx.pid;\nerror_log {{dir}}/error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {{dir}}; proxy_temp_path {{dir}};\n  \
         fastcgi_temp_path {{dir}}; uwsgi_temp_path {{dir}}; scgi_temp_path {{dir}};\n\
         {server}\n\
         server {{\n  listen 127.0.0.1:{site} default_server;\n  server_name www.example.net;\n  \
         {include}\n  if ($request_uri !~ ^/\\.vantage/health$) {{ return 301 https://$host$request_uri; }}\n  \
         location / {{ proxy_pass http://{origin}; }}\n}}\n}}\n",
        origin = closed_port().unwrap(),
    );
    let edge = EdgeProcess::start(
        "nginx",
        &["-p", "{dir}", "-c", "{dir}/nginx.conf"],
        &[("nginx.conf", conf)],
        &[catch_all, site],
    )
    .await;

    for port in [catch_all, site] {
        probers_see_healthy(&edge, port).await;
    }
    site_rules_hold(&edge, site, "301").await;
    // The catch-all server answers nothing but the health check (444: closed, no answer).
    assert_eq!(raw(catch_all, "/", "health.vantage.invalid").await, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_rule_answers_the_health_check_before_the_redirect() {
    let port = free_port().unwrap();
    let origin: SocketAddr = closed_port().unwrap();
    let conf = read_snippet("haproxy.cfg")
        .replace("bind :80", &format!("bind 127.0.0.1:{port}"))
        .replace("server origin1 127.0.0.1:8080", &format!("server origin1 {origin}"));
    let edge =
        EdgeProcess::start("haproxy", &["-db", "-f", "{dir}/haproxy.cfg"], &[("haproxy.cfg", conf)], &[port])
            .await;

    probers_see_healthy(&edge, port).await;
    site_rules_hold(&edge, port, "301").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn varnish_vcl_answers_the_health_check_before_the_site_vcl_recv() {
    let port = free_port().unwrap();
    let origin: SocketAddr = closed_port().unwrap();
    let main = format!(
        "vcl 4.1;\nbackend default {{ .host = \"{}\"; .port = \"{}\"; }}\ninclude \"{}\";\n\
         sub vcl_recv {{ return (synth(403, \"site rules\")); }}\n",
        origin.ip(),
        origin.port(),
        snippet("varnish.vcl").display()
    );
    let listen = format!("127.0.0.1:{port}");
    let edge = EdgeProcess::start(
        "varnishd",
        &[
            "-F",
            "-j",
            "none",
            "-n",
            "{dir}/varnish",
            "-a",
            &listen,
            "-f",
            "{dir}/main.vcl",
            "-s",
            "malloc,16m",
        ],
        &[("main.vcl", main)],
        &[port],
    )
    .await;

    probers_see_healthy(&edge, port).await;
    site_rules_hold(&edge, port, "403").await;
}
