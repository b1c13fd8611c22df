//! The web UI in a real headless Chromium, driven through chromedriver (WebDriver) against a
//! real `vantage serve`: login (and a refused token), the session's limits, regions and the
//! prober dialogs, then a fleet of edges and probers seen page by page — window strips, an
//! edge that stops, the revision and the reachability that follow. Screenshots of the main
//! pages land in `<target dir>/ui-screenshots/`. Every wait is bounded.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::harness::{AgentProcess, LabFleet, ServerProcess};

/// One browser at a time: Chromium is heavy on a small machine.
pub(crate) static BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A whole scenario may take this long at most.
const SCENARIO: Duration = Duration::from_secs(240);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `<target dir>/ui-screenshots`.
fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// chromedriver on a free loopback port and a headless Chromium session with a fresh profile.
pub(crate) struct Browser {
    pub(crate) client: Client,
    _driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub(crate) async fn start() -> Browser {
        let port = free_port();
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            // A process group of its own, with the Chromium it starts: ended whole on drop.
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver is installed (Debian package chromium-driver)");
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        while reqwest::get(format!("{url}/status")).await.is_err() {
            assert!(started.elapsed() < Duration::from_secs(20), "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--window-size=1400,1000".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
            "timeouts": {"pageLoad": 30_000, "script": 30_000, "implicit": 0},
        });
        let Value::Object(caps) = caps else { unreachable!() };
        let client = tokio::time::timeout(
            Duration::from_secs(60),
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(caps)
                .connect(&url),
        )
        .await
        .expect("Chromium started within 60 s")
        .expect("a WebDriver session");
        Browser { client, _driver: driver, _profile: profile }
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    async fn path(&self) -> String {
        let u = self.client.current_url().await.unwrap();
        match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_owned(),
        }
    }

    /// Waits until the browser is at `path` (with its query), after a click that navigates.
    async fn arrive(&self, path: &str) {
        let started = Instant::now();
        loop {
            let now = self.path().await;
            if now == path {
                return;
            }
            if started.elapsed() > Duration::from_secs(10) {
                let page = self.text("body").await;
                panic!("at {now}, not {path}, after 10 s; the page reads:\n{page}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn text(&self, css: &str) -> String {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .text()
            .await
            .unwrap()
    }

    async fn texts(&self, css: &str) -> Vec<String> {
        let mut out = Vec::new();
        for e in self.client.find_all(Locator::Css(css)).await.unwrap() {
            out.push(e.text().await.unwrap());
        }
        out
    }

    async fn click(&self, css: &str) {
        // In the middle of the window: never under the page's sticky header.
        let middle =
            "const e = document.querySelector(arguments[0]); if (e) e.scrollIntoView({block: 'center'});";
        self.client.execute(middle, vec![json!(css)]).await.unwrap();
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    /// Clicks something whose action ends in a page reload, and waits for that reload (so a
    /// navigation of ours cannot cut the action's request short).
    async fn act(&self, css: &str) {
        self.client.execute("window.vantageTestMarker = true", vec![]).await.unwrap();
        self.click(css).await;
        let started = Instant::now();
        loop {
            let marked = self.client.execute("return window.vantageTestMarker === true", vec![]).await;
            if matches!(marked, Ok(Value::Bool(false))) {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{css}: the page did not reload within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn fill(&self, css: &str, value: &str) {
        let e = self.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
        e.clear().await.unwrap();
        e.send_keys(value).await.unwrap();
    }

    /// Chooses `value` in the select `css`, as picking it from the list does.
    async fn choose(&self, css: &str, value: &str) {
        let script = "const s = document.querySelector(arguments[0]); s.value = arguments[1]; \
                      s.dispatchEvent(new Event('change', { bubbles: true })); return s.value;";
        let chosen = self.client.execute(script, vec![json!(css), json!(value)]).await.unwrap();
        assert_eq!(chosen, json!(value), "{css} offers {value}");
    }

    /// Waits until `css` is displayed.
    async fn visible(&self, css: &str, limit: Duration) {
        let started = Instant::now();
        loop {
            if let Ok(e) = self.client.find(Locator::Css(css)).await
                && e.is_displayed().await.unwrap_or(false)
            {
                return;
            }
            assert!(started.elapsed() < limit, "{css} not shown within {limit:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Reloads `url` until `f` accepts the text of `css` (the whole page when absent).
    async fn until(&self, url: &str, css: &str, limit: Duration, f: impl Fn(&str) -> bool) -> Duration {
        let started = Instant::now();
        loop {
            self.goto(url).await;
            let text = match self.client.find(Locator::Css(css)).await {
                Ok(e) => e.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if f(&text) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < limit,
                "{url} {css} did not change within {limit:?}; it reads:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Watches the text of `css` on the open page, without navigating, until `f` accepts it.
    async fn watch(&self, css: &str, limit: Duration, f: impl Fn(&str) -> bool) -> Duration {
        let started = Instant::now();
        loop {
            let text = match self.client.find(Locator::Css(css)).await {
                Ok(e) => e.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if f(&text) {
                return started.elapsed();
            }
            assert!(started.elapsed() < limit, "{css} did not change within {limit:?}; it reads {text:?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// A screenshot of the whole page (the window grows to the page's height, at most 4,000).
    async fn screenshot(&self, name: &str) {
        let h = self.client.execute("return document.documentElement.scrollHeight", vec![]).await.unwrap();
        let h = u32::try_from(h.as_u64().unwrap_or(1000)).unwrap_or(1000).clamp(700, 4000);
        self.client.set_window_size(1400, h + 120).await.unwrap();
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(screenshot_dir().join(name), png).unwrap();
        self.client.set_window_size(1400, 1000).await.unwrap();
    }

    /// Every page of `urls` fits a phone's width (420 px): the document never scrolls
    /// sideways, only a table inside its own box. Names what sticks out when one does not.
    async fn fits_a_phone(&self, urls: &[String]) {
        const OVERFLOW: &str = r#"
            const d = document.documentElement, cw = d.clientWidth;
            if (window.innerWidth > 440) return 'the window is ' + window.innerWidth + ' px wide';
            if (d.scrollWidth <= cw) return null;
            const out = [];
            for (const e of document.querySelectorAll('body *')) {
              const r = e.getBoundingClientRect();
              if (r.right <= cw + 0.5) continue;
              let p = e.parentElement, clipped = false;
              for (; p && p !== document.body; p = p.parentElement)
                if (getComputedStyle(p).overflowX !== 'visible') { clipped = true; break; }
              if (!clipped) out.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
                + (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/ +/).join('.') : '')
                + ' to ' + Math.round(r.right) + ' px');
              if (out.length >= 6) break;
            }
            return 'scrolls to ' + d.scrollWidth + ' px of ' + cw + ': ' + out.join(', ');
        "#;
        self.client.set_window_size(420, 900).await.unwrap();
        for url in urls {
            self.goto(url).await;
            let r = self.client.execute(OVERFLOW, vec![]).await.unwrap();
            assert!(r.is_null(), "{url} at 420 px: {r}");
            let path = url.split_once("/ui").map_or("", |(_, p)| p);
            let name: String =
                path.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
            let png = self.client.screenshot().await.unwrap();
            std::fs::write(screenshot_dir().join(format!("phone{name}.png")), png).unwrap();
        }
        self.client.set_window_size(1400, 1000).await.unwrap();
    }

    async fn login(&self, base: &str, token: &str) {
        self.goto(&format!("{base}/ui/login")).await;
        self.fill("#token", token).await;
        self.click("#login-submit").await;
    }

    async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.client.clone().close()).await;
    }
}

impl Drop for Browser {
    /// A failed test leaves no browser behind: chromedriver's own process group (Chromium
    /// included) is ended by its id. (Through the system call: `kill -KILL -<pgid>` as a command
    /// line can be read as `kill -1`, every process.)
    fn drop(&mut self) {
        if let Some(pid) = self._driver.id().and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1) {
            let _ =
                nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// A `/v1` request with a session cookie, with or without the UI header.
async fn with_cookie(s: &ServerProcess, session: &str, ui_header: bool) -> u16 {
    let mut r = reqwest::Client::new()
        .get(format!("{}/v1/regions", s.url))
        .header("cookie", format!("vantage_session={session}"));
    if ui_header {
        r = r.header("x-vantage-ui", "1");
    }
    r.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn login_sessions_regions_and_the_prober_dialogs() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, login_scenario()).await.expect("the scenario finished within its time");
}

async fn login_scenario() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    let base = s.url.trim_end_matches('/').to_owned();
    let b = Browser::start().await;

    // Every page needs a session; `/` leads to the UI.
    b.goto(&format!("{base}/")).await;
    b.arrive("/ui/login").await;
    b.goto(&format!("{base}/ui/regions")).await;
    b.arrive("/ui/login?next=/ui/regions").await;

    // A wrong token is refused, and says so.
    b.fill("#token", "vta_0000000000000000000000000000000000000000000000000000000000000000").await;
    b.click("#login-submit").await;
    b.visible("#login-error", Duration::from_secs(10)).await;
    assert_eq!(b.text("#login-error").await, "That is not a valid admin token.");
    assert!(b.client.get_named_cookie("vantage_session").await.is_err(), "no session after a refusal");

    // The right one opens a session and goes where the visitor wanted.
    b.fill("#token", &s.token).await;
    b.click("#login-submit").await;
    b.arrive("/ui/regions").await;
    let cookie = b.client.get_named_cookie("vantage_session").await.unwrap();
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(format!("{:?}", cookie.same_site()), "Some(Strict)");
    let session = cookie.value().to_owned();
    assert_eq!(session.len(), 64);
    // On /v1 the cookie counts only with the UI header (a cross-site form cannot add it).
    assert_eq!(with_cookie(&s, &session, false).await, 401);
    assert_eq!(with_cookie(&s, &session, true).await, 200);
    assert_eq!(with_cookie(&s, "0badc0de", true).await, 401);

    // Without a region, adding a prober says to make one first.
    b.goto(&format!("{base}/ui/probers")).await;
    b.click("#add-prober-button").await;
    b.visible("#add-prober", Duration::from_secs(5)).await;
    assert!(b.text("#add-prober").await.contains("Create a region first"));

    // A region through the form; a bad code is refused with the field named.
    b.goto(&format!("{base}/ui/regions")).await;
    b.fill("#region-form input[name=code]", "sg").await;
    b.fill("#region-form input[name=name]", "Singapore").await;
    b.act("#region-form button[type=submit]").await;
    let rows = b
        .until(&format!("{base}/ui/regions"), "#regions", Duration::from_secs(10), |t| {
            t.contains("Singapore")
        })
        .await;
    assert!(rows < Duration::from_secs(10));
    b.fill("#region-form input[name=code]", "sg").await;
    b.fill("#region-form input[name=name]", "Elsewhere").await;
    b.click("#region-form button[type=submit]").await;
    b.visible("#region-form .form-error", Duration::from_secs(5)).await;
    assert!(b.text("#region-form .form-error").await.starts_with("code:"), "the field is named");
    b.screenshot("regions.png").await;

    // Add prober: the dialog shows the token, the start command and the CA fingerprint once.
    b.goto(&format!("{base}/ui/probers")).await;
    b.click("#add-prober-button").await;
    b.visible("#add-prober-form", Duration::from_secs(5)).await;
    b.fill("#add-prober-form input[name=name]", "sg-ui").await;
    b.click("#add-prober-form button[type=submit]").await;
    b.visible("#token-dialog", Duration::from_secs(10)).await;
    let token = b.text("#token-value").await;
    let command = b.text("#token-command").await;
    let ca = b.text("#token-ca").await;
    let server = b.text("#token-server").await;
    let (channel, fingerprint) = s.channel();
    assert!(token.starts_with("vtp_") && token.len() == 68, "{token}");
    assert_eq!(ca, fingerprint);
    // The channel's host is the one the browser used; its port is the configured one, and this
    // server was told port 0, so the prober below is pointed at the port it really bound.
    assert!(server.starts_with("https://127.0.0.1:"), "{server}");
    assert!(command.starts_with(&format!("VANTAGE_TOKEN={token} vantage probe ")), "{command}");
    for part in [format!("--server {server}"), format!("--ca-sha256 {ca}")] {
        assert!(command.contains(&part), "{part} in {command}");
    }
    b.screenshot("prober-token.png").await;
    b.act("#token-done").await;

    // The token works: a prober started with what the dialog showed comes online.
    let prober = AgentProcess::start(
        "probe",
        &channel,
        &token,
        &ca,
        &temp.path().join("sg-ui"),
        &["--hostname", "sg-ui-host"],
        &temp.path().join("sg-ui.log"),
    );
    let row = "#probers tr[data-prober='sg-ui']";
    b.until(&format!("{base}/ui/probers"), row, Duration::from_secs(30), |t| t.contains("Online")).await;
    assert!(b.text(row).await.contains("Singapore (sg)"));
    b.screenshot("probers.png").await;

    // Rename in its dialog.
    b.click(&format!("{row} button[data-open=rename-prober]")).await;
    b.visible("#rename-form", Duration::from_secs(5)).await;
    b.fill("#rename-form input[name=name]", "sg-renamed").await;
    b.act("#rename-form button[type=submit]").await;
    let row = "#probers tr[data-prober='sg-renamed']";
    b.until(&format!("{base}/ui/probers"), row, Duration::from_secs(10), |t| t.contains("sg-renamed")).await;

    // Disable after confirming; it reads Disabled.
    b.click(&format!("{row} button[data-method=PATCH]")).await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    assert!(b.text("#confirm-text").await.starts_with("Disable prober sg-renamed?"));
    b.act("#confirm-ok").await;
    b.until(&format!("{base}/ui/probers"), row, Duration::from_secs(10), |t| t.contains("Disabled")).await;

    // Delete: cancelling keeps it; confirming "Delete prober sg-renamed?" removes it.
    b.click(&format!("{row} button[data-method=DELETE]")).await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    assert_eq!(b.text("#confirm-text").await, "Delete prober sg-renamed?");
    b.click("#confirm-dialog button[value=cancel]").await;
    b.goto(&format!("{base}/ui/probers")).await;
    assert_eq!(b.texts(row).await.len(), 1, "cancel keeps it");
    b.click(&format!("{row} button[data-method=DELETE]")).await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    b.act("#confirm-ok").await;
    b.until(&format!("{base}/ui/probers"), "main", Duration::from_secs(10), |t| !t.contains("sg-renamed"))
        .await;
    prober.kill().await;

    // The audit shows each change with the token's name as the actor, and filters.
    b.goto(&format!("{base}/ui/audit?action=prober.")).await;
    let audit = b.text("#audit").await;
    for action in ["prober.update", "prober.delete", "probe.enroll"] {
        assert!(audit.contains(action), "{action} in\n{audit}");
    }
    assert!(audit.contains("admin:bootstrap"), "{audit}");
    assert!(!audit.contains("region.create"), "the filter applies");
    b.screenshot("audit.png").await;

    // Logging out ends the session.
    b.click("#logout").await;
    b.arrive("/ui/login").await;
    assert_eq!(with_cookie(&s, &session, true).await, 401);
    b.goto(&format!("{base}/ui")).await;
    b.arrive("/ui/login").await;

    // Revoking a token ends its sessions at once.
    let second = s.create("/v1/admin-tokens", json!({"name": "second"})).await;
    b.login(&base, second["token"].as_str().unwrap()).await;
    b.arrive("/ui").await;
    assert_eq!(b.text("header .who").await, "second");
    // Logged in, the login page goes straight on.
    b.goto(&format!("{base}/ui/login?next=/ui/alerts")).await;
    b.arrive("/ui/alerts").await;
    let (st, _) = s.call(Method::DELETE, &format!("/v1/admin-tokens/{}", second["id"]), None).await;
    assert_eq!(st, 204);
    b.goto(&format!("{base}/ui/regions")).await;
    b.arrive("/ui/login?next=/ui/regions").await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_seen_from_every_region_and_an_edge_that_stops() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, fleet_scenario()).await.expect("the scenario finished within its time");
}

async fn fleet_scenario() {
    let LabFleet { s, edges, port, cluster, nodes, probers, temp: _temp, .. } =
        LabFleet::start("cdn.ui.example", 60).await;
    let base = s.url.trim_end_matches('/').to_owned();
    s.create(
        &format!("/v1/clusters/{cluster}/rules"),
        json!({"name": "hot", "action": "remove_node", "conditions": [{"metric": "cpu", "comparison": ">", "threshold": 90}]}),
    )
    .await;
    // Two rounds at least, so every result has a window and the history has points.
    s.wait_for(&format!("/v1/nodes/{}/results", nodes[0]), Duration::from_secs(30), |v| {
        v["items"]
            .as_array()
            .is_some_and(|r| r.len() == 6 && r.iter().all(|x| x["window"]["good"].as_u64() >= Some(3)))
    })
    .await;

    let b = Browser::start().await;
    b.login(&base, &s.token).await;
    b.arrive("/ui").await;

    // Overview: the fleet at a glance.
    assert!(b.text("#card-probers").await.contains("3 of 3 online"), "{}", b.text("#card-probers").await);
    assert!(b.text("#card-nodes").await.contains("3 healthy"), "{}", b.text("#card-nodes").await);
    b.screenshot("overview.png").await;

    // Probers: every one online, with its last round.
    b.goto(&format!("{base}/ui/probers")).await;
    let rows = b.texts("#probers tbody tr").await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    for r in &rows {
        assert!(r.contains("Online") && r.contains("0.1.0") && r.contains("every target answered"), "{r}");
    }
    b.screenshot("probers-fleet.png").await;

    // Cluster: records per line, nodes, rules with the preview, revisions.
    let cluster_page = format!("{base}/ui/clusters/{cluster}");
    b.goto(&cluster_page).await;
    assert_eq!(b.text("#all-records").await, "127.0.0.60 127.0.0.62 127.0.0.63");
    assert!(b.text("#rules").await.contains("CPU > 90 % for 60 s"));
    // The preview says what the line would answer if every address failed, by its policy.
    let outlook = b.text("#line-outlook tbody").await;
    assert!(
        outlook.contains("default")
            && outlook.contains("hold")
            && outlook.contains("By health")
            && outlook.contains("line default holds its current records (3 addresses)"),
        "{outlook}"
    );
    // Each node's history bars: a bar a day, today's green once the node has been counted up.
    let bars = "return [...document.querySelectorAll(\"#nodes tr[data-node='edge-0'] td.availability i.bar\")]\
                .map(e => e.className + ' ' + e.title)";
    let started = Instant::now();
    loop {
        let v = b.client.execute(bars, vec![]).await.unwrap();
        let days: Vec<String> = serde_json::from_value(v).unwrap();
        let last = days.last().cloned().unwrap_or_default();
        if last.starts_with("bar good") {
            assert_eq!(days.len(), 30, "a bar a day: {days:?}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "today's bar stayed {last:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
        b.goto(&cluster_page).await;
    }
    b.screenshot("cluster.png").await;

    // Node: addresses with level, source, reachability and use; a strip per prober and address.
    let node_page = format!("{base}/ui/nodes/{}", nodes[0]);
    b.goto(&node_page).await;
    let primary = b.text("#addresses tr[data-address='127.0.0.60']").await;
    assert!(
        primary.contains("Primary")
            && primary.contains("Configured")
            && primary.contains("Reachable")
            && primary.contains("In use"),
        "{primary}"
    );
    let backup = b.text("#addresses tr[data-address='127.0.0.61']").await;
    assert!(
        backup.contains("Backup 1") && backup.contains("Reachable") && !backup.contains("In use"),
        "{backup}"
    );
    // The matrix: each address as each region sees it, and every counting prober.
    let cell = |ip: &str, region: &str| format!("#matrix tr[data-address='{ip}'] td[data-region='{region}']");
    for ip in ["127.0.0.60", "127.0.0.61"] {
        for region in ["ap-sg", "eu-de", "us-va"] {
            assert_eq!(b.text(&cell(ip, region)).await, "ok", "{ip} from {region}");
        }
        assert_eq!(b.text(&cell(ip, "all")).await, "ok", "{ip}");
    }
    // The window strips are folded under the results, and unfold.
    let folded = b.client.find(Locator::Css("details#strips")).await.unwrap();
    assert_eq!(folded.attr("open").await.unwrap(), None, "folded by default");
    assert!(!b.client.find(Locator::Css("#results pre.strip")).await.unwrap().is_displayed().await.unwrap());
    b.click("details#strips summary").await;
    b.visible("#results pre.strip", Duration::from_secs(2)).await;
    let strips = b.texts("#results pre.strip").await;
    assert_eq!(strips.len(), 6, "3 probers × 2 addresses");
    for strip in &strips {
        let lines: Vec<&str> = strip.lines().collect();
        assert!(lines[0].starts_with("Current states  good:"), "{strip}");
        assert!(lines[2].starts_with("Oldest ====") && lines[2].ends_with("Newest"), "{strip}");
        assert!(lines[3].ends_with(" Connected") && lines[6].ends_with(" Good"), "{strip}");
        assert_eq!(lines[6].split(' ').next().unwrap().len(), 64, "64 slots: {strip}");
        assert!(lines[6].ends_with("HHH Good"), "the newest attempts were good: {strip}");
    }
    let results = b.text("#results table").await;
    for region in ["Singapore (ap-sg)", "Frankfurt (eu-de)", "Virginia (us-va)"] {
        assert!(results.contains(region), "{region}");
    }
    assert!(results.contains(&format!("127.0.0.60:{port} http")), "{results}");
    // The history charts default to the span of the data (a node made a minute ago: the
    // quarter hour) and have lines; the other ranges render.
    assert_eq!(b.text("#history nav.tabs a[aria-current=page]").await, "15 min");
    assert!(
        !b.client.find_all(Locator::Css("#history svg.chart path")).await.unwrap().is_empty(),
        "a chart line"
    );
    let history = b.text("#history").await;
    for ip in ["127.0.0.60 (Primary)", "127.0.0.61 (Backup 1)"] {
        assert!(
            history.contains(&format!("Loss of {ip} by prober region")),
            "one chart per address: {history}"
        );
    }
    b.screenshot("node.png").await;
    for (range, label) in [("1h", "1 h"), ("24h", "24 h"), ("14d", "14 d")] {
        b.goto(&format!("{node_page}?range={range}")).await;
        assert_eq!(b.text("#history nav.tabs a[aria-current=page]").await, label);
        assert!(!b.client.find_all(Locator::Css("#history svg.chart")).await.unwrap().is_empty(), "{range}");
    }

    // The history behind the charts, from the API: per address and per prober region.
    let (st, h) = s.call(Method::GET, &format!("/v1/nodes/{}/history?range=1h", nodes[0]), None).await;
    assert_eq!(st, 200, "{h}");
    assert_eq!(h["bucket_s"], 20);
    let ips: Vec<&str> =
        h["addresses"].as_array().unwrap().iter().map(|a| a["ip"].as_str().unwrap()).collect();
    assert_eq!(ips, ["127.0.0.60", "127.0.0.61"]);
    let codes: Vec<&str> =
        h["regions"].as_array().unwrap().iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["ap-sg", "eu-de", "us-va"]);
    let per_address =
        h["addresses"].as_array().unwrap().iter().flat_map(|a| a["regions"].as_array().unwrap());
    assert_eq!(per_address.clone().count(), 6, "each address from each region");
    for series in
        h["addresses"].as_array().unwrap().iter().chain(h["regions"].as_array().unwrap()).chain(per_address)
    {
        let points = series["points"].as_array().unwrap();
        assert!(!points.is_empty() && points.len() <= 180, "{series}");
        assert!(points.iter().all(|p| p["loss_pct"] == 0.0 && p["rtt_ms"].as_f64() > Some(0.0)), "{series}");
        assert_eq!(series["latest"]["loss_pct"], 0.0, "{series}");
    }
    let (st, q) = s.call(Method::GET, &format!("/v1/nodes/{}/history?range=15m", nodes[0]), None).await;
    assert_eq!((st, &q["bucket_s"]), (200, &json!(5)), "{q}");
    let (st, e) = s.call(Method::GET, &format!("/v1/nodes/{}/history?range=7d", nodes[0]), None).await;
    assert_eq!((st, &e["error"]["field"]), (400, &json!("range")), "{e}");

    // The primary's edge stops: the address reads Unreachable and a new revision appears.
    let (_, revs) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    let before = revs["items"][0]["number"].as_i64().unwrap();
    // The node page stays open: it re-reads itself every 10 s, with no reload of ours.
    b.goto(&node_page).await;
    edges[0].stop().await;
    // Before the verdict: still reachable and in DNS, but failing, with when it turns
    // unreachable; the node's heading says so.
    let took = b
        .until(
            &node_page,
            "#addresses tr[data-address='127.0.0.60'] .condition",
            Duration::from_secs(10),
            |t| t.starts_with("Failing · unreachable"),
        )
        .await;
    println!("ui: primary stopped → its node page read Failing in {:.1} s", took.as_secs_f64());
    // Seen failing from every region (loopback fails alike everywhere) once the last prober's
    // round is in; the backup is not.
    b.until(&node_page, &cell("127.0.0.60", "all"), Duration::from_secs(15), |t| t == "failing 3/3").await;
    for region in ["ap-sg", "eu-de", "us-va"] {
        assert_eq!(b.text(&cell("127.0.0.60", region)).await, "failing 1/1", "{region}");
        assert_eq!(b.text(&cell("127.0.0.61", region)).await, "ok", "{region}");
    }
    let h1 = b.text("h1").await;
    assert!(h1.contains("Failing") || h1.contains("On Backup 1"), "{h1}");
    let took = b
        .watch("#addresses tr[data-address='127.0.0.60'] .reachability", Duration::from_secs(40), |t| {
            t == "Unreachable"
        })
        .await;
    println!("ui: primary stopped → the open node page read Unreachable in {:.1} s", took.as_secs_f64());
    assert!(b.text("#addresses tr[data-address='127.0.0.61']").await.contains("In use"));
    let took = b
        .until(&cluster_page, "#dns", Duration::from_secs(30), |t| {
            t.contains("127.0.0.61") && !t.contains("127.0.0.60")
        })
        .await;
    println!("ui: then the cluster page showed the backup's records after {:.1} s", took.as_secs_f64());
    // The revision table reads the store, which the revision reaches a moment after DNS.
    b.until(&cluster_page, "#revisions tbody tr.revision", Duration::from_secs(10), |t| {
        t.contains("Node health changed") && t.contains("127.0.0.61")
    })
    .await;
    let first = b.text("#revisions tbody tr.revision").await;
    let number: i64 = first.split_whitespace().next().unwrap().parse().unwrap();
    assert!(number > before, "a new revision: {first}");
    assert!(first.contains("Node health changed"), "{first}");
    assert!(first.contains("127.0.0.61"), "its records: {first}");
    b.screenshot("cluster-failover.png").await;
    b.until(
        &node_page,
        "#addresses tr[data-address='127.0.0.60'] .reachability",
        Duration::from_secs(10),
        |t| t == "Unreachable",
    )
    .await;
    assert!(b.text("#addresses tr[data-address='127.0.0.61']").await.contains("In use"));
    assert!(b.text("h1").await.contains("On Backup 1"), "{}", b.text("h1").await);
    let since = b.text("#addresses tr[data-address='127.0.0.60'] .condition").await;
    assert!(since.starts_with("since "), "{since}");
    b.until(&node_page, "#results table", Duration::from_secs(15), |t| {
        t.matches("Connection refused (refused)").count() == 3
    })
    .await;
    b.screenshot("node-failover.png").await;
    // The node's timeline says what happened; its charts mark the outage and the revisions.
    let events = b.text("#events").await;
    assert!(events.contains("127.0.0.60 of edge-0 is unreachable: 3 of 3 probers"), "{events}");
    assert!(events.contains("127.0.0.60 of edge-0 is failing"), "{events}");
    assert!(!b.texts("#history svg rect.outage").await.is_empty(), "the outage is marked");
    assert!(!b.texts("#history svg line.mark").await.is_empty(), "revisions are marked");
    // What the failover's revision changed, line by line.
    b.goto(&format!("{base}/ui/clusters/{cluster}/diff?from={}&to={number}", number - 1)).await;
    assert_eq!(b.text("h1").await, format!("Revision {} → {number}", number - 1));
    let lines = b.text("#diff-lines tbody").await;
    assert!(lines.contains("127.0.0.61") && lines.contains("127.0.0.60"), "{lines}");
    assert!(b.text("#diff-revisions").await.contains("127.0.0.60 of edge-0 unreachable"));
    // Without revisions in the address, the newest change; a bad one is refused in words.
    let newest =
        s.call(Method::GET, &format!("/v1/clusters/{cluster}/dns"), None).await.1["revision"].clone();
    let newest = newest.as_u64().unwrap();
    b.goto(&format!("{base}/ui/clusters/{cluster}/diff")).await;
    assert_eq!(b.text("h1").await, format!("Revision {} → {newest}", newest - 1));
    b.goto(&format!("{base}/ui/clusters/{cluster}/diff?from=abc")).await;
    assert_eq!(b.text("#error-message").await, "from: a revision number, such as from=3; got \"abc\"");
    b.goto(&format!("{base}/ui/alerts")).await;
    assert!(b.text("#open-alerts").await.contains("127.0.0.60 of edge-0 is unreachable"));
    b.goto(&format!("{base}/ui")).await;
    assert!(b.text("#latest-revisions").await.contains("Node health changed"));
    b.screenshot("overview-failover.png").await;

    // The edge comes back: every region sees it answer at its next round, before the
    // address is reachable again; the 24 h legend says what the latest round saw, not the
    // 5 min bucket that still holds the outage.
    edges[0].restart().await.unwrap();
    let took = b.until(&node_page, &cell("127.0.0.60", "all"), Duration::from_secs(20), |t| t == "ok").await;
    println!("ui: primary back → every region's cell read ok in {:.1} s", took.as_secs_f64());
    for region in ["ap-sg", "eu-de", "us-va"] {
        assert_eq!(b.text(&cell("127.0.0.60", region)).await, "ok", "{region}");
    }
    let legend = "#history figure:first-child ul.legend li:first-child";
    b.until(&format!("{node_page}?range=24h"), legend, Duration::from_secs(15), |t| {
        t == "127.0.0.60 (Primary) now 0 %"
    })
    .await;

    // The audit log dates each entry in full, with its age beside it.
    b.goto(&format!("{base}/ui/audit")).await;
    let when = b.text("#audit tbody tr:first-child td:first-child").await;
    let (date, age) = when.split_once(" UTC · ").unwrap_or_else(|| panic!("{when}"));
    assert!(
        date.len() == 19
            && date.as_bytes()[4] == b'-'
            && date.as_bytes()[10] == b' '
            && date.as_bytes()[13] == b':',
        "{when}"
    );
    assert!(age.ends_with(" ago") || age == "just now", "{when}");

    // Every page of the fleet fits a phone.
    let (_, ps) = s.call(Method::GET, "/v1/probers", None).await;
    let prober = ps["items"][0]["id"].as_i64().unwrap();
    let pages = [
        "/ui".to_owned(),
        "/ui/regions".to_owned(),
        "/ui/probers".to_owned(),
        format!("/ui/probers/{prober}"),
        "/ui/clusters".to_owned(),
        format!("/ui/clusters/{cluster}"),
        format!("/ui/clusters/{cluster}/diff?from=1"),
        format!("/ui/nodes/{}", nodes[0]),
        format!("/ui/nodes/{}?range=24h", nodes[0]),
        "/ui/alerts".to_owned(),
        "/ui/audit".to_owned(),
        "/ui/mirrors".to_owned(),
        "/ui/monitors".to_owned(),
        "/ui/tenants".to_owned(),
        "/ui/checks".to_owned(),
        "/ui/maintenance".to_owned(),
        "/ui/tokens".to_owned(),
        "/ui/status-pages".to_owned(),
    ];
    b.fits_a_phone(&pages.map(|p| format!("{base}{p}"))).await;

    // Addresses edited on the node's page: the configured ones as text, a line's target by
    // its name, a refusal shown in the form, the saved list read back by the API.
    let first_node = format!("{base}/ui/nodes/{}", nodes[0]);
    b.goto(&first_node).await;
    b.click("#edit-addresses summary").await;
    let editor = "#addresses-form textarea[name=addresses]";
    let shown = b.client.find(Locator::Css(editor)).await.unwrap().prop("value").await.unwrap();
    assert_eq!(shown.as_deref(), Some("127.0.0.60 primary\n127.0.0.61 backup1"));
    b.fill(editor, "127.0.0.60 primary\n127.0.0.61 backup2\n127.0.0.64 @default high").await;
    b.click("#addresses-form button[type=submit]").await;
    b.visible("#addresses-form .form-error", Duration::from_secs(5)).await;
    let error = b.text("#addresses-form .form-error").await;
    assert!(error.starts_with("addresses[2].level: "), "the row and field are named: {error}");
    b.fill(editor, "127.0.0.60 primary\n127.0.0.61 backup2\n127.0.0.64 @default trusted").await;
    b.act("#addresses-form button[type=submit]").await;
    let (_, saved) = s.call(Method::GET, &format!("/v1/nodes/{}/addresses", nodes[0]), None).await;
    let default_line =
        s.call(Method::GET, &format!("/v1/clusters/{cluster}/lines"), None).await.1["items"][0]["id"].clone();
    assert_eq!(
        saved["configured"],
        json!([{"ip": "127.0.0.60", "level": "primary"}, {"ip": "127.0.0.61", "level": "backup2"},
               {"ip": "127.0.0.64", "level": "primary", "trusted": true, "line": default_line}]),
        "{saved}"
    );
    b.click("#edit-addresses summary").await;
    let shown = b.client.find(Locator::Css(editor)).await.unwrap().prop("value").await.unwrap();
    assert_eq!(shown.as_deref(), Some("127.0.0.60 primary\n127.0.0.61 backup2\n127.0.0.64 @default trusted"));
    // Back to what the agent reports (none here: it runs no agent), by the editor's button.
    delete_confirmed(&b, "#use-reported").await;
    let (_, saved) = s.call(Method::GET, &format!("/v1/nodes/{}/addresses", nodes[0]), None).await;
    assert_eq!(saved["configured"], json!([]), "{saved}");

    // Nodes deleted from their page: the last one the line answers with takes a second,
    // explicit confirmation that says why, and then DNS answers nothing rather than it.
    for (i, id) in nodes.iter().enumerate() {
        b.goto(&format!("{base}/ui/nodes/{id}")).await;
        b.click("#node-delete").await;
        b.visible("#confirm-dialog", Duration::from_secs(5)).await;
        assert_eq!(b.text("#confirm-text").await, format!("Delete node edge-{i}?"));
        if i == 2 {
            b.click("#confirm-ok").await;
            b.watch("#confirm-text", Duration::from_secs(5), |t| {
                t.contains("last enabled node of group pop-1, which line default answers with")
            })
            .await;
            assert_eq!(b.text("#confirm-ok").await, "Delete anyway");
        }
        b.act("#confirm-ok").await;
        assert_eq!(b.path().await, format!("/ui/clusters/{cluster}"));
    }
    s.wait_for(&format!("/v1/clusters/{cluster}/dns"), Duration::from_secs(10), |v| {
        crate::harness::all_answers(v).is_empty()
    })
    .await;

    // Lines from the cluster page: a bad network is named, a line is made with its all-down
    // policy, the policy changes in its row, and the line goes.
    b.goto(&cluster_page).await;
    b.fill("#line-form input[name=name]", "local").await;
    b.fill("#line-form input[name=client_networks]", "10.0.0.0/8, not-a-network").await;
    b.click("#line-form button[type=submit]").await;
    b.visible("#line-form .form-error", Duration::from_secs(5)).await;
    let error = b.text("#line-form .form-error").await;
    assert!(error.starts_with("client_networks"), "{error}");
    b.fill("#line-form input[name=client_networks]", "10.0.0.0/8, 192.0.2.0/24").await;
    b.choose("#line-form select[name=all_down]", "nodata").await;
    // Ordering groups by latency needs a backup group to order: named, then left as configured.
    let region = s.call(Method::GET, "/v1/regions", None).await.1["items"][0]["id"].to_string();
    b.choose("#line-form select[name=latency_region]", &region).await;
    b.click("#line-form button[type=submit]").await;
    b.watch("#line-form .form-error", Duration::from_secs(5), |t| t.starts_with("latency_region")).await;
    b.choose("#line-form select[name=latency_region]", "").await;
    b.act("#line-form button[type=submit]").await;
    let row = b.text("#lines tr[data-line=local]").await;
    assert!(row.contains("pop-1") && row.contains("10.0.0.0/8, 192.0.2.0/24"), "{row}");
    assert!(row.contains("as configured"), "{row}");
    let line_policy = |v: Value| {
        let items = v["items"].as_array().cloned().unwrap_or_default();
        items.iter().find(|l| l["name"] == "local").and_then(|l| l["all_down"].as_str().map(str::to_owned))
    };
    let lines_path = format!("/v1/clusters/{cluster}/lines");
    assert_eq!(line_policy(s.call(Method::GET, &lines_path, None).await.1), Some("nodata".into()));
    b.choose("#lines tr[data-line=local] select", "online").await;
    b.act("#lines tr[data-line=local] form.all-down button").await;
    assert_eq!(line_policy(s.call(Method::GET, &lines_path, None).await.1), Some("online".into()));
    let outlook = b.text("#line-outlook tbody").await;
    assert!(outlook.contains("local") && outlook.contains("online"), "{outlook}");
    b.click("#lines tr[data-line=local] button.danger").await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    b.act("#confirm-ok").await;
    assert_eq!(line_policy(s.call(Method::GET, &lines_path, None).await.1), None, "deleted");
    b.close().await;
    for p in probers {
        p.kill().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mirrors_blocked_by_hand_and_a_broken_registry_file() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, mirrors_scenario()).await.expect("the scenario finished within its time");
}

/// A mirror registered through the API, blocked and unblocked through the UI (with a note
/// that must come back as text, not markup), a check run and the refusal of a second one, and
/// a broken file dropped into the watched directory that the page names.
async fn mirrors_scenario() {
    let s = ServerProcess::start().await;
    let base = s.url.trim_end_matches('/').to_owned();
    s.create("/v1/regions", json!({"code": "ap-sg", "name": "Singapore"})).await;
    let (st, v) = s.call(Method::PUT, "/v1/tenants/t1", Some(json!({}))).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.call(Method::PUT, "/v1/mirrors/m1.example.net", Some(json!({"tenants": ["t1"]}))).await;
    assert_eq!(st, 201, "{v}");

    let b = Browser::start().await;
    b.login(&base, &s.token).await;
    b.arrive("/ui").await;
    b.click("header nav a[href='/ui/mirrors']").await;
    b.arrive("/ui/mirrors").await;
    assert!(b.text("#reload-ok").await.starts_with("Registry loaded"), "{}", b.text("#reload-ok").await);
    let row = "#mirrors tr[data-mirror='m1.example.net']";
    let verdict = format!("{row} td.verdict");
    assert_eq!(b.text(&verdict).await, "unknown");
    assert!(b.text(row).await.contains("t1"), "{}", b.text(row).await);
    // The matrix has a column per region; no prober there has measured it yet.
    assert_eq!(b.text("#matrix thead").await, "MIRROR AP-SG");
    assert_eq!(b.text("#matrix tr[data-mirror='m1.example.net'] td[data-region='ap-sg']").await, "—");

    // Block with a note: the verdict is blocked and the note reads as it was typed.
    let note = "INC-7 <b>bold</b> & co";
    b.click(&format!("{row} button.block")).await;
    b.visible("#block-form", Duration::from_secs(5)).await;
    assert_eq!(b.text("#block-title").await, "Block m1.example.net");
    b.fill("#block-form input[name=note]", note).await;
    b.act("#block-form button[type=submit]").await;
    assert_eq!(b.text(&verdict).await, "blocked");
    assert!(b.text(&format!("{row} td.block")).await.contains(note), "{}", b.text(row).await);
    assert!(b.client.find_all(Locator::Css("#mirrors td.block b")).await.unwrap().is_empty(), "escaped");
    let (_, m) = s.call(Method::GET, "/v1/mirrors/m1.example.net", None).await;
    assert_eq!(
        (&m["manual_block"], &m["manual_note"], &m["verdict"]),
        (&json!(true), &json!(note), &json!("blocked"))
    );
    b.screenshot("mirrors.png").await;

    // The overview counts it and lists it among what needs a look.
    b.goto(&format!("{base}/ui")).await;
    assert_eq!(b.text("#card-mirrors .big").await, "0 of 1 live");
    assert_eq!(b.text("#card-mirrors .small").await, "1 blocked");
    let listed = b.text("#services-need-a-look tbody").await;
    assert!(
        ["mirror", "m1.example.net", "blocked by operator"].iter().all(|w| listed.contains(w)),
        "{listed}"
    );
    assert!(b.texts("#card-monitors").await.is_empty(), "no monitor, no card");
    b.goto(&format!("{base}/ui/mirrors")).await;

    // Its own page: the record, and no region or prober has an opinion yet.
    b.click(&format!("{row} td a")).await;
    b.arrive("/ui/mirrors/m1.example.net").await;
    assert!(b.text("h1").await.contains("blocked"), "{}", b.text("h1").await);
    let record = b.text("#record").await;
    assert!(record.contains(note) && record.contains("t1") && record.contains("default"), "{record}");
    assert!(b.text("main").await.contains("No prober has reported on it yet."));

    // Check now: the first run starts, a second within 60 s is refused with the wait.
    b.goto(&format!("{base}/ui/mirrors")).await;
    b.click("#check-now").await;
    b.watch("#flash", Duration::from_secs(10), |t| t.starts_with("Check run started")).await;
    b.click("#check-now").await;
    b.watch("#flash", Duration::from_secs(10), |t| t.contains("try again in")).await;

    // Unblock after confirming: the verdict is the regions' again (none has spoken: unknown).
    b.click(&format!("{row} button.unblock")).await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    assert_eq!(b.text("#confirm-text").await, "Unblock mirror m1.example.net?");
    b.act("#confirm-ok").await;
    assert_eq!(b.text(&verdict).await, "unknown");
    assert!(b.text(&format!("{row} td.block")).await.contains("no"));

    // A broken file in the watched directory: the page names it and its field, and the old
    // registry keeps serving.
    std::fs::write(s.dir.join("mirrors/bad.example.net.yaml"), "host: bad.example.net\nweight: heavy\n")
        .unwrap();
    let took = b
        .until(&format!("{base}/ui/mirrors"), "#reload-error", Duration::from_secs(15), |t| {
            t.contains("bad.example.net.yaml") && t.contains("field weight")
        })
        .await;
    println!("ui: a broken registry file was named on the mirrors page after {:.1} s", took.as_secs_f64());
    // How many reloads failed is counted, not pinned: the watcher reloads again on its own reads.
    let banner = b.text("#reload-error").await;
    assert!(
        banner.contains("failed since the server started") && banner.contains("keeps serving"),
        "{banner}"
    );
    assert_eq!(b.texts(row).await.len(), 1, "the previous registry keeps serving");
    b.screenshot("mirrors-reload-error.png").await;

    // Tenants and checks: the tenant with its one mirror; no named check yet.
    b.click("nav.tabs a[href='/ui/tenants']").await;
    b.arrive("/ui/tenants").await;
    assert_eq!(b.text("#tenants tr[data-tenant='t1'] td.num").await, "1", "{}", b.text("#tenants").await);
    assert_eq!(b.text("#tenants tr[data-tenant='t1'] td.fallback").await, "none serves", "live mirrors only");
    b.click("nav.tabs a[href='/ui/checks']").await;
    b.arrive("/ui/checks").await;
    assert!(b.text("#no-checks").await.starts_with("No named check yet"));
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mirrors_seen_from_each_region_with_window_strips() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, mirror_regions_scenario())
        .await
        .expect("the scenario finished within its time");
}

/// Two regions' probers check a mirror that answers and one whose port is closed: the matrix
/// reads each region's status, latency and age in its colour, and the mirror's page shows each
/// prober's opinion with its window strips.
async fn mirror_regions_scenario() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    let base = s.url.trim_end_matches('/').to_owned();
    let edge = vantage_testkit::EdgeServer::start(vantage_testkit::any_loopback()).await.unwrap();
    let closed = vantage_testkit::closed_port().unwrap();
    s.create("/v1/checks", json!({"name": "plain", "method": "http", "path": "/", "interval_s": 1})).await;
    for (host, addr) in [("up.example.net", edge.addr()), ("down.example.net", closed)] {
        let body = json!({"check": "plain", "address": addr.to_string()});
        let (st, v) = s.call(Method::PUT, &format!("/v1/mirrors/{host}"), Some(body)).await;
        assert_eq!(st, 201, "{v}");
    }
    let mut probers = Vec::new();
    for (i, (code, name)) in [("ap-sg", "Singapore"), ("eu-de", "Frankfurt")].into_iter().enumerate() {
        let r = s.create("/v1/regions", json!({"code": code, "name": name})).await["id"].as_i64().unwrap();
        probers.push(s.start_prober(&format!("prober-{i}"), r, temp.path()).await);
    }
    s.wait_for("/v1/mirrors", Duration::from_secs(60), |v| {
        let verdicts: Vec<(&str, &str, usize)> = v["mirrors"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .map(|m| {
                        let regions = m["regions"].as_object().map_or(0, |r| r.len());
                        (m["host"].as_str().unwrap_or(""), m["verdict"].as_str().unwrap_or(""), regions)
                    })
                    .collect()
            })
            .unwrap_or_default();
        verdicts == [("down.example.net", "blocked", 2), ("up.example.net", "live", 2)]
    })
    .await;

    let b = Browser::start().await;
    b.login(&base, &s.token).await;
    b.arrive("/ui").await;
    b.goto(&format!("{base}/ui/mirrors")).await;
    assert_eq!(b.text("#mirrors tr[data-mirror='up.example.net'] td.verdict").await, "live");
    assert_eq!(b.text("#mirrors tr[data-mirror='down.example.net'] td.verdict").await, "blocked");
    assert_eq!(b.text("#matrix thead").await, "MIRROR AP-SG EU-DE");
    for code in ["ap-sg", "eu-de"] {
        let up = format!("#matrix tr[data-mirror='up.example.net'] td[data-region='{code}'] .badge");
        let text = b.text(&up).await;
        let parts: Vec<&str> = text.split(" · ").collect();
        assert!(parts.len() == 3 && parts[0] == "ok" && parts[1].ends_with(" ms"), "{code}: {text}");
        assert!(parts[2] == "just now" || parts[2].ends_with(" s ago"), "{code}: {text}");
        assert_eq!(
            b.client.find(Locator::Css(&up)).await.unwrap().attr("class").await.unwrap().as_deref(),
            Some("badge good")
        );
        let down = format!("#matrix tr[data-mirror='down.example.net'] td[data-region='{code}'] .badge");
        assert!(b.text(&down).await.starts_with("refused · "), "{code}: {}", b.text(&down).await);
        assert_eq!(
            b.client.find(Locator::Css(&down)).await.unwrap().attr("class").await.unwrap().as_deref(),
            Some("badge bad")
        );
    }
    b.screenshot("mirrors-regions.png").await;

    // The mirror's page: each region, and each prober's opinion with its strips.
    b.click("#matrix tr[data-mirror='up.example.net'] a").await;
    b.arrive("/ui/mirrors/up.example.net").await;
    let regions = b.text("#mirror-regions").await;
    assert!(regions.contains("Singapore (ap-sg)") && regions.contains("Frankfurt (eu-de)"), "{regions}");
    let opinions = b.text("#opinions").await;
    assert!(opinions.contains("prober-0") && opinions.contains("prober-1"), "{opinions}");
    let strips = b.texts("#opinions pre.strip").await;
    assert_eq!(strips.len(), 2, "one per prober");
    for strip in &strips {
        let lines: Vec<&str> = strip.lines().collect();
        assert!(lines[0].starts_with("Current states  good:"), "{strip}");
        assert!(lines[6].ends_with("H Good"), "the newest attempt was good: {strip}");
    }
    b.screenshot("mirror.png").await;
    b.goto(&format!("{base}/ui/mirrors/down.example.net")).await;
    assert!(
        b.text("#opinions").await.contains("Connection refused (refused)"),
        "{}",
        b.text("#opinions").await
    );
    b.fits_a_phone(&[format!("{base}/ui/mirrors/down.example.net"), format!("{base}/ui/mirrors")]).await;
    b.close().await;
    for p in probers {
        p.kill().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitors_before_any_probe_and_a_stale_region_seen_by_a_prober() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, monitors_scenario()).await.expect("the scenario finished within its time");
}

/// A monitor over two regions created through the API: before any probe its verdict and
/// every region read unknown. Then one prober in `ap-sg` probes an HLS origin whose newest
/// segment is ten minutes old: that region reads stale with its tuple and age, the other is
/// still unknown, and half the weight stale degrades the monitor.
async fn monitors_scenario() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    let base = s.url.trim_end_matches('/').to_owned();
    let origin = vantage_testkit::EdgeServer::start_with(
        vantage_testkit::any_loopback(),
        vantage_testkit::EdgeOptions::new(vantage_testkit::Behavior::Hls),
    )
    .await
    .unwrap();
    let ap =
        s.create("/v1/regions", json!({"code": "ap-sg", "name": "Singapore"})).await["id"].as_i64().unwrap();
    s.create("/v1/regions", json!({"code": "eu-de", "name": "Frankfurt"})).await;
    let regions = json!([
        {"region": "ap-sg", "weight": 1, "endpoints": [origin.url(vantage_testkit::hls_paths::STALE)], "pathway": "cdn-ap"},
        {"region": "eu-de", "weight": 1, "endpoints": [origin.url(vantage_testkit::hls_paths::FRESH)], "pathway": "cdn-eu"},
    ]);
    let check = json!({"method": "hls", "interval_s": 1, "timeout_ms": 900});
    let m = s.create("/v1/monitors", json!({"name": "live-tv", "check": check, "regions": regions})).await;
    let id = m["id"].as_i64().unwrap();

    let b = Browser::start().await;
    b.login(&base, &s.token).await;
    b.arrive("/ui").await;
    assert_eq!(b.text("#card-monitors .big").await, "0 of 1 healthy");
    assert_eq!(b.text("#card-monitors .small").await, "none down · 1 not probed yet");
    b.click("header nav a[href='/ui/monitors']").await;
    b.arrive("/ui/monitors").await;
    let row = "#monitors tr[data-monitor='live-tv']";
    assert_eq!(b.text(&format!("{row} td.verdict")).await, "unknown");
    assert_eq!(b.text(&format!("{row} td.down")).await, "0 % · budget 15 %");
    assert_eq!(b.text(&format!("{row} td.stale")).await, "0 % · budget 10 %");
    b.click(&format!("{row} td a")).await;
    b.arrive(&format!("/ui/monitors/{id}")).await;
    assert!(b.text("h1").await.ends_with("unknown"), "{}", b.text("h1").await);
    assert!(b.text("#summary").await.contains("no probe yet"), "{}", b.text("#summary").await);
    for (code, name) in [("ap-sg", "Singapore (ap-sg)"), ("eu-de", "Frankfurt (eu-de)")] {
        let r = format!("#monitor-regions tr[data-region='{code}']");
        assert!(b.text(&r).await.starts_with(name), "{}", b.text(&r).await);
        assert_eq!(b.text(&format!("{r} td.health")).await, "unknown");
        assert_eq!(b.text(&format!("{r} td.probed")).await, "no probe yet");
    }
    assert_eq!(b.texts("#steering li").await.len(), 2);
    assert!(b.text("#no-changes").await.starts_with("No change"));
    assert_eq!(b.texts("#history p.chart-empty").await.len(), 2, "no data for either chart yet");

    // One prober in ap-sg: its region goes stale (a ten-minute-old segment), eu-de has no
    // prober and stays unknown, and 50 % of the weight stale is over the 10 % budget.
    let prober = s.start_prober("p-ap", ap, temp.path()).await;
    let verdict_path = format!("/v1/monitors/{id}/verdict");
    s.wait_for(&verdict_path, Duration::from_secs(60), |v| v["global"] == "degraded").await;
    let page = format!("{base}/ui/monitors/{id}");
    let ap_row = "#monitor-regions tr[data-region='ap-sg']";
    b.until(&page, &format!("{ap_row} td.health"), Duration::from_secs(15), |t| t == "stale").await;
    assert!(b.text("h1").await.ends_with("degraded"), "{}", b.text("h1").await);
    assert_eq!(b.text("#stale-weight .badge").await, "50 % · budget 10 %");
    let age = b.text(&format!("{ap_row} td.age")).await;
    assert!(age.starts_with("10 min"), "{age}");
    let tuple = b.text(ap_row).await;
    assert!(tuple.contains("cdn-ap") && tuple.contains("yes yes yes") && tuple.contains(" ms"), "{tuple}");
    assert_eq!(b.text("#monitor-regions tr[data-region='eu-de'] td.health").await, "unknown");
    assert_eq!(b.texts("#steering li").await, ["cdn-eu", "cdn-ap"], "unknown before stale");
    assert!(b.text("#changes").await.contains("degraded"), "{}", b.text("#changes").await);
    b.until(&page, "#history", Duration::from_secs(30), |t| !t.contains("no data in this range")).await;
    assert_eq!(b.texts("#history svg.chart").await.len(), 2);
    let legend = b.text("#history").await;
    assert!(legend.contains("Singapore (ap-sg) last 10 min"), "{legend}");
    b.screenshot("monitor.png").await;
    b.goto(&format!("{base}/ui/monitors")).await;
    assert_eq!(b.text(&format!("{row} td.verdict")).await, "degraded");
    b.screenshot("monitors.png").await;
    b.fits_a_phone(&[page, format!("{base}/ui/monitors")]).await;
    b.close().await;
    prober.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_their_test_button_and_silences() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, channels_scenario()).await.expect("the scenario finished within its time");
}

/// The alerts page lists the notification channels without their secrets, and its test
/// button says whether the channel took the notice, or why not; silences are made and ended
/// there.
async fn channels_scenario() {
    let s = ServerProcess::start_lab().await;
    let base = s.url.trim_end_matches('/').to_owned();
    let hooks = crate::receivers::receiver().await;
    let secret = format!("{}/slack", hooks.url);
    s.create("/v1/webhooks", json!({"name": "ops-slack", "format": "slack", "secret": secret})).await;
    s.create("/v1/webhooks", json!({"name": "dead", "url": "http://127.0.0.1:9/hook", "enabled": false}))
        .await;

    let b = Browser::start().await;
    b.login(&base, &s.token).await;
    b.arrive("/ui").await;
    b.goto(&format!("{base}/ui/alerts")).await;
    let slack = "#channels tr[data-channel='ops-slack']";
    let row = b.text(slack).await;
    assert!(row.contains("slack") && row.contains("Slack incoming webhook"), "{row}");
    assert!(!b.text("body").await.contains(&secret), "the page never shows a secret");
    assert!(b.text("#channels tr[data-channel='dead']").await.contains("disabled"));

    b.click(&format!("{slack} button")).await;
    b.watch("#flash", Duration::from_secs(10), |t| t.starts_with("Delivered")).await;
    hooks.wait(Duration::from_secs(5), |got| got.iter().any(|(k, _)| k == "slack")).await;
    b.click("#channels tr[data-channel='dead'] button").await;
    b.watch("#flash", Duration::from_secs(20), |t| t.starts_with("Not delivered: unreachable")).await;

    // A silence made on the page: listed active, its form's refusal named; ended, it goes.
    b.fill("#silence-form input[name=matchers]", "kind=node_offline nonsense").await;
    b.fill("#silence-form input[name=comment]", "edge-9 is being re-racked").await;
    b.click("#silence-form button[type=submit]").await;
    b.watch("#silence-form .form-error", Duration::from_secs(5), |t| t.starts_with("matchers[1]")).await;
    b.fill("#silence-form input[name=matchers]", "kind=node_offline node=edge-9").await;
    b.act("#silence-form button[type=submit]").await;
    let row = b.text("#silences tbody tr").await;
    assert!(row.contains("active") && row.contains("kind=node_offline node=edge-9"), "{row}");
    let (_, list) = s.call(Method::GET, "/v1/silences", None).await;
    assert_eq!(list["items"][0]["comment"], "edge-9 is being re-racked", "{list}");
    assert!(list["items"][0]["ends_at"].is_string(), "an hour by default: {list}");
    b.click("#silences tbody tr button").await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    b.act("#confirm-ok").await;
    assert!(b.text("#no-silences").await.starts_with("No silence"));

    // A real alert (an address nothing answers, seen by a real prober): "Silence…" fills the
    // form with what holds it.
    let temp = tempfile::tempdir().unwrap();
    let settings = json!({"interval_s": 5, "timeout_ms": 500, "attempts": 1,
                          "failing_before_unreachable_s": 5, "answering_before_reachable_s": 5});
    s.call(Method::PUT, "/v1/settings/probes", Some(settings)).await;
    let region =
        s.create("/v1/regions", json!({"code": "eu", "name": "Europe"})).await["id"].as_i64().unwrap();
    let cluster =
        s.create("/v1/clusters", json!({"name": "c", "domain": "cdn.test.example"})).await["id"].clone();
    let group = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "g"})).await["id"].clone();
    s.create(&format!("/v1/clusters/{cluster}/lines"), json!({"name": "default", "group": group})).await;
    let node =
        s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": "edge-1"})).await["id"]
            .clone();
    s.call(Method::PUT, &format!("/v1/nodes/{node}/addresses"), Some(json!([{"ip": "127.0.0.42"}]))).await;
    let _prober = s.start_prober("fra", region, temp.path()).await;
    s.wait_for("/v1/alerts", Duration::from_secs(30), |v| {
        v["open"].as_array().is_some_and(|o| o.iter().any(|a| a["kind"] == "address_unreachable"))
    })
    .await;
    b.goto(&format!("{base}/ui/alerts")).await;
    assert!(b.text("#open-alerts td.notified").await.starts_with("sent"));
    b.click("#open-alerts button.silence-this").await;
    let filled = b
        .client
        .execute("return document.querySelector('#silence-form [name=matchers]').value", vec![])
        .await
        .unwrap();
    assert_eq!(filled, json!("kind=address_unreachable cluster=c node=edge-1 address=127.0.0.42"));
    b.fill("#silence-form input[name=comment]", "edge-1 moves racks").await;
    b.act("#silence-form button[type=submit]").await;
    assert!(b.text("#silences tbody tr").await.contains("kind=address_unreachable cluster=c"));
    // It was sent before the silence: its resolve will be too, so it does not read held.
    assert!(b.text("#open-alerts td.notified").await.starts_with("sent"));
    b.screenshot("alerts-channels.png").await;

    // A channel made on the page: a Slack one given a URL is refused by that field; given its
    // webhook URL as the secret it is made, and the secret is never shown.
    b.fill("#channel-form input[name=name]", "team-slack").await;
    b.choose("#channel-form select[name=format]", "slack").await;
    b.fill("#channel-form input[name=url]", "https://hooks.example.net/x").await;
    b.click("#channel-form button[type=submit]").await;
    b.watch("#channel-form .field-error", Duration::from_secs(5), |t| !t.is_empty()).await;
    let invalid = b
        .client
        .execute("return document.querySelector('#channel-form [aria-invalid]').name", vec![])
        .await
        .unwrap();
    assert_eq!(invalid, json!("url"));
    b.fill("#channel-form input[name=url]", "").await;
    let team = format!("{}/team", hooks.url);
    b.fill("#channel-form input[name=secret]", &team).await;
    b.act("#channel-form button[type=submit]").await;
    let row = b.text("#channels tr[data-channel='team-slack']").await;
    assert!(row.contains("slack") && !b.text("body").await.contains(&team), "{row}");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_from_the_node_page_and_a_window_from_the_maintenance_page() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, drain_scenario()).await.expect("the scenario finished within its time");
}

/// A node is drained from its page — the pre-flight's refusal shown and overruled — and put
/// back; a maintenance window is planned on its page (its refusal named by field) and ended.
async fn drain_scenario() {
    let s = ServerProcess::start_lab().await;
    let base = s.url.trim_end_matches('/').to_owned();
    let cluster =
        s.create("/v1/clusters", json!({"name": "c", "domain": "cdn.drain-ui.example"})).await["id"].clone();
    let group = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "g"})).await["id"].clone();
    let line = json!({"name": "default", "group": group, "min_healthy": 2});
    s.create(&format!("/v1/clusters/{cluster}/lines"), line).await;
    let mut nodes = Vec::new();
    for (name, ip) in [("edge-1", "127.0.0.61"), ("edge-2", "127.0.0.62")] {
        let n = s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": name})).await["id"]
            .as_i64()
            .unwrap();
        s.call(Method::PUT, &format!("/v1/nodes/{n}/addresses"), Some(json!([{"ip": ip, "trusted": true}])))
            .await;
        nodes.push(n);
    }
    s.wait_for(&format!("/v1/clusters/{cluster}/dns"), Duration::from_secs(10), |v| {
        crate::harness::all_answers(v).len() == 2
    })
    .await;

    let b = Browser::start().await;
    b.login(&base, &s.token).await;
    b.arrive("/ui").await;
    b.goto(&format!("{base}/ui/nodes/{}", nodes[0])).await;
    b.click("#node-drain").await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    b.click("#confirm-ok").await;
    // Refused by the pre-flight, which says why; the operator's word overrules it.
    b.watch("#confirm-dialog", Duration::from_secs(5), |t| t.contains("below its minimum of 2")).await;
    b.act("#confirm-ok").await;
    assert!(b.text("h1").await.contains("Draining"), "{}", b.text("h1").await);
    let (_, v) = s.call(Method::GET, &format!("/v1/nodes/{}", nodes[0]), None).await;
    assert_eq!(v["drain"]["cause"]["by"], "node", "{v}");
    b.visible("#node-undrain", Duration::from_secs(5)).await;
    b.click("#node-undrain").await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    b.act("#confirm-ok").await;
    b.visible("#node-drain", Duration::from_secs(5)).await;

    // A window: no target is refused by field; with edge-2 it opens now.
    b.goto(&format!("{base}/ui/maintenance")).await;
    assert!(b.text("#no-windows").await.starts_with("No maintenance window"));
    b.fill("#maintenance-form input[name=name]", "swap disks").await;
    b.click("#maintenance-form button[type=submit]").await;
    b.watch("#maintenance-form .form-error", Duration::from_secs(5), |t| t.starts_with("nodes")).await;
    b.choose("#maintenance-form select[name=nodes]", &nodes[1].to_string()).await;
    b.act("#maintenance-form button[type=submit]").await;
    let row = b.text("#windows tbody tr").await;
    assert!(row.contains("swap disks") && row.contains("open") && row.contains("node edge-2"), "{row}");
    let (_, v) = s.call(Method::GET, &format!("/v1/nodes/{}", nodes[1]), None).await;
    assert_eq!(v["drain"]["cause"]["by"], "maintenance", "{v}");
    b.screenshot("maintenance.png").await;
    b.click("#windows tbody tr button").await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    b.act("#confirm-ok").await;
    assert!(b.text("#no-windows").await.starts_with("No maintenance window"));
    let (_, v) = s.call(Method::GET, &format!("/v1/nodes/{}", nodes[1]), None).await;
    assert!(v["drain"].is_null(), "{v}");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_its_groups_and_nodes_made_from_the_pages() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, forms_scenario()).await.expect("the scenario finished within its time");
}

/// A cluster, a node group and a node are made from the pages, each form showing the API's
/// refusal beside the field it names; the node is disabled and enabled again from its page.
async fn forms_scenario() {
    let (s, base, b) = logged_in_with_a_region().await;
    b.goto(&format!("{base}/ui/clusters")).await;
    b.fill("#cluster-form input[name=name]", "video").await;
    b.fill("#cluster-form input[name=domain]", "not a domain").await;
    b.click("#cluster-form button[type=submit]").await;
    assert_eq!(refused_field(&b, "#cluster-form").await, "domain", "the refusal sits by the field it names");
    b.fill("#cluster-form input[name=domain]", "cdn.forms.example").await;
    b.fill("#cluster-form input[name=listeners]", "443/https 80/http").await;
    b.act("#cluster-form button[type=submit]").await;
    let (_, clusters) = s.call(Method::GET, "/v1/clusters", None).await;
    let cluster = &clusters["items"][0];
    let listeners: Vec<(u64, &str)> = (cluster["listeners"].as_array().unwrap().iter())
        .map(|l| (l["port"].as_u64().unwrap(), l["protocol"].as_str().unwrap()))
        .collect();
    assert_eq!(listeners, [(443, "https"), (80, "http")], "{cluster}");
    let id = cluster["id"].as_i64().unwrap();

    b.goto(&format!("{base}/ui/clusters/{id}")).await;
    // Edited on its page: a TTL over a day is refused by that field; 60 is saved.
    b.click("#edit-cluster summary").await;
    b.fill("#cluster-edit-form input[name=ttl]", "100000").await;
    b.click("#cluster-edit-form button[type=submit]").await;
    b.watch("#cluster-edit-form .field-error", Duration::from_secs(5), |t| !t.is_empty()).await;
    b.fill("#cluster-edit-form input[name=ttl]", "60").await;
    b.act("#cluster-edit-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{id}"), None).await;
    assert_eq!(v["ttl"], 60, "{v}");
    b.fill("#group-form input[name=name]", "sin-1").await;
    b.act("#group-form button[type=submit]").await;
    assert!(b.text("#groups tr[data-group='sin-1']").await.contains("sin-1"));
    b.fill("#node-form input[name=name]", "sin-1a").await;
    b.act("#node-form button[type=submit]").await;
    let (_, nodes) = s.call(Method::GET, "/v1/nodes", None).await;
    let node = nodes["items"][0]["id"].as_i64().unwrap();
    assert_eq!(nodes["items"][0]["name"], "sin-1a", "{nodes}");
    // A second node of that name: refused, by field.
    b.fill("#node-form input[name=name]", "SIN-1A").await;
    b.click("#node-form button[type=submit]").await;
    b.watch("#node-form .field-error", Duration::from_secs(5), |t| t.contains("already exists")).await;

    b.goto(&format!("{base}/ui/nodes/{node}")).await;
    b.click("#node-disable").await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    b.act("#confirm-ok").await;
    assert!(b.text("h1").await.contains("Disabled"));
    b.act("#node-enable").await;
    b.visible("#node-disable", Duration::from_secs(5)).await;
    let (_, v) = s.call(Method::GET, &format!("/v1/nodes/{node}"), None).await;
    assert_eq!(v["enabled"], true, "{v}");

    // The probe settings card: a timeout longer than the round is refused by that field.
    b.goto(&format!("{base}/ui/probers")).await;
    b.fill("#settings-form input[name=interval_s]", "5").await;
    b.fill("#settings-form input[name=timeout_ms]", "6000").await;
    b.click("#settings-form button[type=submit]").await;
    b.watch("#settings-form .field-error", Duration::from_secs(5), |t| !t.is_empty()).await;
    b.fill("#settings-form input[name=timeout_ms]", "2000").await;
    b.act("#settings-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, "/v1/settings/probes", None).await;
    assert_eq!((v["interval_s"].as_u64(), v["timeout_ms"].as_u64()), (Some(5), Some(2000)), "{v}");
    // And the detection settings: a damping multiplier that is no power of two is refused.
    b.fill("#detection-form input[name=damping_max_multiplier]", "3").await;
    b.click("#detection-form button[type=submit]").await;
    b.watch("#detection-form .field-error", Duration::from_secs(5), |t| !t.is_empty()).await;
    b.fill("#detection-form input[name=damping_max_multiplier]", "4").await;
    b.act("#detection-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, "/v1/settings/detection", None).await;
    assert_eq!(v["damping_max_multiplier"], 4, "{v}");

    // An admin token made on its page: shown once, listed by its prefix, revoked.
    b.goto(&format!("{base}/ui/tokens")).await;
    b.fill("#token-form input[name=name]", "grafana").await;
    b.click("#token-form button[type=submit]").await;
    b.visible("#token-dialog", Duration::from_secs(5)).await;
    let secret = b.text("#token-value").await;
    assert!(secret.starts_with("vta_"), "{secret}");
    b.act("#token-done").await;
    let row = b.text("#tokens tr[data-token='grafana']").await;
    assert!(row.contains("read-only") && !row.contains(&secret), "the secret is never shown again: {row}");
    let regions_with = |token: String| {
        let url = format!("{base}/v1/regions");
        async move { reqwest::Client::new().get(url).bearer_auth(token).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(regions_with(secret.clone()).await, 200, "the token opens the API");
    b.click("#tokens tr[data-token='grafana'] button").await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    b.act("#confirm-ok").await;
    assert!(b.texts("#tokens tr[data-token='grafana']").await.is_empty());
    assert_eq!(regions_with(secret).await, 401, "revoked");
    b.close().await;
}

#[tokio::test]
async fn rules_with_their_live_preview_and_every_field_of_a_cluster_from_the_pages() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, rules_scenario()).await.expect("the scenario finished within its time");
}

/// The value of the form field `css`.
async fn value_of(b: &Browser, css: &str) -> String {
    let v = b
        .client
        .execute("return document.querySelector(arguments[0]).value", vec![json!(css)])
        .await
        .unwrap();
    v.as_str().unwrap_or_default().to_owned()
}

/// The name of the field a form marked invalid, once the API's refusal is shown beside it.
async fn refused_field(b: &Browser, form: &str) -> String {
    b.watch(&format!("{form} .field-error"), Duration::from_secs(5), |t| !t.is_empty()).await;
    let script = "return document.querySelector(arguments[0] + ' [aria-invalid]').name";
    let v = b.client.execute(script, vec![json!(form)]).await.unwrap();
    v.as_str().unwrap_or_default().to_owned()
}

/// A lab server with one region, `eu`, and a browser logged in to it.
async fn logged_in_with_a_region() -> (ServerProcess, String, Browser) {
    let s = ServerProcess::start_lab().await;
    let base = s.url.trim_end_matches('/').to_owned();
    s.create("/v1/regions", json!({"code": "eu", "name": "Europe"})).await;
    let b = Browser::start().await;
    b.login(&base, &s.token).await;
    b.arrive("/ui").await;
    (s, base, b)
}

/// Clicks the delete button `css` and confirms in the dialog.
async fn delete_confirmed(b: &Browser, css: &str) {
    b.click(css).await;
    b.visible("#confirm-dialog", Duration::from_secs(5)).await;
    b.act("#confirm-ok").await;
}

/// A rule drafted on the cluster page is previewed node by node as it is typed (nothing
/// saved), refused by the field the API names, created, switched off, edited in place with
/// its preview, and deleted; then every field of the cluster is edited, a publisher's secret
/// written once and kept by later edits that do not repeat it.
async fn rules_scenario() {
    let s = ServerProcess::start_lab().await;
    let base = s.url.trim_end_matches('/').to_owned();
    let eu = s.create("/v1/regions", json!({"code": "eu", "name": "Europe"})).await["id"].as_i64().unwrap();
    let c = s
        .create(
            "/v1/clusters",
            json!({"name": "video", "domain": "cdn.rules.example", "listeners": [{"port": 80, "protocol": "http"}]}),
        )
        .await;
    let cid = c["id"].as_i64().unwrap();
    let g = s.create(&format!("/v1/clusters/{cid}/groups"), json!({"name": "sin-1", "region": eu})).await;
    s.create("/v1/nodes", json!({"cluster": cid, "name": "sin-1a", "group": g["id"]})).await;
    let rules = format!("/v1/clusters/{cid}/rules");

    let b = Browser::start().await;
    b.login(&base, &s.token).await;
    b.arrive("/ui").await;
    b.goto(&format!("{base}/ui/clusters/{cid}")).await;
    b.fill("#rule-form input[name=name]", "busy").await;
    b.fill("#rule-form textarea[name=conditions]", "cpu > 90 for 60").await;
    b.watch("#rule-preview tbody", Duration::from_secs(10), |t| {
        t.contains("sin-1a") && t.contains("No data")
    })
    .await;
    let (_, v) = s.call(Method::GET, &rules, None).await;
    assert_eq!(v["items"], json!([]), "a preview saves nothing");
    // A region no one has: the preview says why it cannot tell, the save is refused by field.
    b.fill("#rule-form textarea[name=conditions]", "probe_loss > 50 for 30 max in mars").await;
    b.watch("#rule-preview [data-preview-note]", Duration::from_secs(10), |t| t.contains("Not previewed"))
        .await;
    b.click("#rule-form button[type=submit]").await;
    assert_eq!(refused_field(&b, "#rule-form").await, "conditions");
    b.fill("#rule-form textarea[name=conditions]", "probe_loss > 50 for 30 max in eu").await;
    b.act("#rule-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &rules, None).await;
    let rule = &v["items"][0];
    let rid = rule["id"].as_i64().unwrap();
    assert_eq!(rule["conditions"][0]["region"], eu, "{rule}");
    assert_eq!(rule["conditions"][0]["aggregate"], "max", "{rule}");
    assert_eq!(rule["enabled"], true, "{rule}");

    // The row's switch turns it off.
    b.act("#rule-list tr[data-rule='busy'] button.switch").await;
    assert_eq!(b.text("#rule-list tr[data-rule='busy'] button.switch").await, "Off");
    let (_, v) = s.call(Method::GET, &format!("{rules}/{rid}"), None).await;
    assert_eq!(v["enabled"], false, "{v}");

    // Edit: the form holds the rule, its preview shows what it would do in its place.
    b.click("#rule-list tr[data-rule='busy'] button[data-edit]").await;
    assert_eq!(value_of(&b, "#rule-form input[name=name]").await, "busy");
    assert_eq!(
        value_of(&b, "#rule-form textarea[name=conditions]").await,
        "probe_loss > 50 for 30 max in eu"
    );
    b.watch("#rule-preview tbody", Duration::from_secs(10), |t| t.contains("sin-1a")).await;
    assert_eq!(b.text("#rule-form button[type=submit]").await, "Save rule");
    b.screenshot("cluster-rule-editor.png").await;
    b.fill("#rule-form input[name=hold_s]", "120").await;
    b.act("#rule-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &format!("{rules}/{rid}"), None).await;
    assert_eq!((v["hold_s"].as_u64(), v["enabled"].as_bool()), (Some(120), Some(false)), "{v}");
    assert_eq!(v["name"], "busy", "{v}");

    delete_confirmed(&b, "#rule-list tr[data-rule='busy'] button.danger").await;
    let (_, v) = s.call(Method::GET, &rules, None).await;
    assert_eq!(v["items"], json!([]), "{v}");

    // Every field of the cluster; a publisher's secret is written once.
    b.click("#edit-cluster summary").await;
    b.fill("#cluster-edit-form input[name=aliases]", "cdn2.rules.example").await;
    b.fill("#cluster-edit-form input[name=listeners]", "80/http 443/https/proxy").await;
    b.fill("#cluster-edit-form input[name=suspect_ttl]", "5").await;
    b.fill(
        "#cluster-edit-form textarea[name=publishers]",
        "knot 127.0.0.1:5353 vantage-key hmac-sha256 secret=c2VjcmV0c2VjcmV0c2VjcmV0",
    )
    .await;
    b.act("#cluster-edit-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cid}"), None).await;
    assert_eq!(v["aliases"], json!(["cdn2.rules.example"]), "{v}");
    assert_eq!(v["listeners"][1], json!({"port": 443, "protocol": "https", "proxy_protocol": true}), "{v}");
    assert_eq!(v["suspect_ttl"], 5, "{v}");
    assert_eq!(
        (v["publishers"][0]["name"].as_str(), v["publishers"][0]["key_secret"].as_str()),
        (Some("knot"), Some("(hidden)"))
    );
    // Saved again without the secret: kept.
    b.click("#edit-cluster summary").await;
    let shown = value_of(&b, "#cluster-edit-form textarea[name=publishers]").await;
    assert_eq!(shown, "knot 127.0.0.1:5353 vantage-key hmac-sha256", "the secret is never shown");
    b.fill("#cluster-edit-form input[name=ttl]", "45").await;
    b.act("#cluster-edit-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cid}"), None).await;
    assert_eq!((v["ttl"].as_u64(), v["publishers"].as_array().map(Vec::len)), (Some(45), Some(1)), "{v}");
    // Sent to another server without it: refused by that field.
    b.click("#edit-cluster summary").await;
    b.fill("#cluster-edit-form textarea[name=publishers]", "knot 127.0.0.1:5354 vantage-key").await;
    b.click("#cluster-edit-form button[type=submit]").await;
    assert_eq!(refused_field(&b, "#cluster-edit-form").await, "publishers");
    assert!(b.text("#cluster-edit-form .field-error").await.contains("secret again"));

    // A line and a group edited in their forms; the line's backup groups keep the order they
    // are tried in, which the form's list does not show. A node renamed and set to probe.
    let g2 = s.create(&format!("/v1/clusters/{cid}/groups"), json!({"name": "sin-2", "region": eu})).await;
    let g3 = s.create(&format!("/v1/clusters/{cid}/groups"), json!({"name": "sin-3"})).await;
    let backups = json!([g3["id"], g2["id"]]);
    let body = json!({"name": "asia", "group": g["id"], "backup_groups": backups});
    let line = s.create(&format!("/v1/clusters/{cid}/lines"), body).await["id"].as_i64().unwrap();
    b.goto(&format!("{base}/ui/clusters/{cid}")).await;
    b.click("#lines tr[data-line='asia'] button[data-edit]").await;
    b.fill("#line-form input[name=min_healthy]", "2").await;
    b.fill("#line-form input[name=client_networks]", "203.0.113.0/24").await;
    b.act("#line-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cid}/lines/{line}"), None).await;
    assert_eq!((v["min_healthy"].as_u64(), v["name"].as_str()), (Some(2), Some("asia")), "{v}");
    assert_eq!((&v["client_networks"], &v["backup_groups"]), (&json!(["203.0.113.0/24"]), &backups), "{v}");
    b.click("#groups tr[data-group='sin-2'] button[data-edit]").await;
    b.fill("#group-form input[name=name]", "sin-2b").await;
    b.choose("#group-form select[name=region]", "").await;
    b.act("#group-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cid}/groups/{}", g2["id"]), None).await;
    assert_eq!((v["name"].as_str(), &v["region"]), (Some("sin-2b"), &Value::Null), "{v}");
    let (_, nodes) = s.call(Method::GET, "/v1/nodes", None).await;
    let node = nodes["items"][0]["id"].as_i64().unwrap();
    b.goto(&format!("{base}/ui/nodes/{node}")).await;
    b.click("#edit-node summary").await;
    b.fill("#node-edit-form input[name=name]", "sin-1b").await;
    b.act("#node-edit-form button[type=submit]").await;
    assert!(b.text("h1").await.starts_with("sin-1b"), "{}", b.text("h1").await);
    b.act("#node-also-probes").await;
    assert_eq!(b.text("#node-also-probes").await, "On");
    let (_, v) = s.call(Method::GET, &format!("/v1/nodes/{node}"), None).await;
    assert_eq!(v["also_probes"], true, "{v}");
    b.close().await;
}

#[tokio::test]
async fn checks_tenants_mirrors_monitors_channels_and_status_pages_from_the_pages() {
    let _one = BROWSER.lock().await;
    tokio::time::timeout(SCENARIO, objects_scenario()).await.expect("the scenario finished within its time");
}

/// Each remaining kind of object made, refused by field, edited and deleted from its page,
/// and a status page made there and read as the public sees it.
async fn objects_scenario() {
    let (s, base, b) = logged_in_with_a_region().await;

    // A cluster renamed in its edit form, then deleted from its page (it has no node).
    let doomed =
        s.create("/v1/clusters", json!({"name": "old", "domain": "old.objects.example"})).await["id"].clone();
    b.goto(&format!("{base}/ui/clusters/{doomed}")).await;
    b.click("#edit-cluster summary").await;
    b.fill("#cluster-edit-form input[name=name]", "older").await;
    b.act("#cluster-edit-form button[type=submit]").await;
    assert_eq!(b.text("h1").await, "older");
    delete_confirmed(&b, "#cluster-delete").await;
    b.arrive("/ui/clusters").await;
    assert_eq!(s.call(Method::GET, &format!("/v1/clusters/{doomed}"), None).await.0, 404);

    // A region renamed in its form.
    b.goto(&format!("{base}/ui/regions")).await;
    b.click("#regions tr[data-region='eu'] button[data-edit]").await;
    b.fill("#region-form input[name=name]", "Europe West").await;
    b.act("#region-form button[type=submit]").await;
    assert!(b.text("#regions tr[data-region='eu']").await.contains("Europe West"));

    // A named check: a block status out of range is refused by its field.
    b.goto(&format!("{base}/ui/checks")).await;
    b.fill("#check-form input[name=name]", "edge").await;
    b.fill("#check-form input[name=block_statuses]", "99").await;
    b.click("#check-form button[type=submit]").await;
    assert_eq!(refused_field(&b, "#check-form").await, "block_statuses");
    b.fill("#check-form input[name=block_statuses]", "403, 451").await;
    b.act("#check-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, "/v1/checks", None).await;
    let check = v["items"][0]["id"].as_i64().unwrap();
    assert_eq!(v["items"][0]["check"]["block_statuses"], json!([403, 451]), "{v}");
    b.click("#checks tr[data-check='edge'] button[data-edit]").await;
    assert_eq!(value_of(&b, "#check-form input[name=block_statuses]").await, "403, 451");
    b.fill("#check-form input[name=interval_s]", "10").await;
    b.act("#check-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &format!("/v1/checks/{check}"), None).await;
    assert_eq!((v["check"]["interval_s"].as_u64(), v["name"].as_str()), (Some(10), Some("edge")), "{v}");

    // A tenant, then a mirror serving it with that check.
    b.goto(&format!("{base}/ui/tenants")).await;
    b.fill("#tenant-form input[name=name]", "debian").await;
    b.fill("#tenant-form input[name=note]", "the archive").await;
    b.act("#tenant-form button[type=submit]").await;
    // The form for a new one does not overwrite one of that name.
    b.click("#tenant-editor summary").await;
    b.fill("#tenant-form input[name=name]", "debian").await;
    b.click("#tenant-form button[type=submit]").await;
    b.watch("#tenant-form .form-error", Duration::from_secs(5), |t| t.contains("exists already")).await;
    let (_, v) = s.call(Method::GET, "/v1/tenants", None).await;
    assert_eq!(v["items"][0]["note"], "the archive", "{v}");
    b.goto(&format!("{base}/ui/tenants")).await;
    b.click("#tenants tr[data-tenant='debian'] button[data-edit]").await;
    b.fill("#tenant-form input[name=note]", "Debian's archive").await;
    b.act("#tenant-form button[type=submit]").await;
    assert!(b.text("#tenants tr[data-tenant='debian']").await.contains("Debian's archive"));
    b.goto(&format!("{base}/ui/mirrors")).await;
    b.fill("#mirror-form input[name=host]", "mirror.example.net").await;
    b.fill("#mirror-form input[name=tenants]", "debian").await;
    b.fill("#mirror-form input[name=weight]", "2").await;
    b.choose("#mirror-form select[name=check]", "edge").await;
    b.fill("#mirror-form input[name=address]", "not an address").await;
    b.click("#mirror-form button[type=submit]").await;
    assert_eq!(refused_field(&b, "#mirror-form").await, "address");
    b.fill("#mirror-form input[name=address]", "").await;
    b.act("#mirror-form button[type=submit]").await;
    let mirror = "/v1/mirrors/mirror.example.net";
    let (_, v) = s.call(Method::GET, mirror, None).await;
    assert_eq!((v["weight"].as_u64(), v["check"].as_str()), (Some(2), Some("edge")), "{v}");
    assert_eq!(v["tenants"], json!(["debian"]), "{v}");
    // Registered again from the form for a new one: refused, not replaced.
    b.click("#mirror-editor summary").await;
    b.fill("#mirror-form input[name=host]", "mirror.example.net").await;
    b.click("#mirror-form button[type=submit]").await;
    b.watch("#mirror-form .form-error", Duration::from_secs(5), |t| t.contains("registered already")).await;
    // An edit keeps what the form does not show as the registry holds it when saved: a block
    // placed after the page was read stays.
    b.goto(&format!("{base}/ui/mirrors")).await;
    b.click("#mirrors tr[data-mirror='mirror.example.net'] button[data-edit]").await;
    let block = json!({"note": "abuse report"});
    assert_eq!(s.call(Method::POST, &format!("{mirror}/force-block"), Some(block)).await.0, 200);
    b.fill("#mirror-form input[name=weight]", "3").await;
    b.act("#mirror-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, mirror, None).await;
    assert_eq!((v["weight"].as_u64(), v["check"].as_str()), (Some(3), Some("edge")), "{v}");
    assert_eq!((v["manual_block"].as_bool(), v["manual_note"].as_str()), (Some(true), Some("abuse report")));
    // Its host is its name: an edit to another host is refused by that field.
    b.click("#mirrors tr[data-mirror='mirror.example.net'] button[data-edit]").await;
    b.fill("#mirror-form input[name=host]", "other.example.net").await;
    b.click("#mirror-form button[type=submit]").await;
    assert_eq!(refused_field(&b, "#mirror-form").await, "host");
    assert_eq!(s.call(Method::GET, "/v1/mirrors/other.example.net", None).await.0, 404);
    b.goto(&format!("{base}/ui/mirrors")).await;
    delete_confirmed(&b, "#mirrors tr[data-mirror='mirror.example.net'] button.danger:not(.block)").await;
    assert_eq!(s.call(Method::GET, mirror, None).await.0, 404);
    // The mirror and door settings card.
    b.click("#mirror-settings summary").await;
    b.fill("#mirror-settings-form input[name=threshold_pct]", "60").await;
    b.fill("#mirror-settings-form input[name=trusted_proxies]", "127.0.0.1/32").await;
    b.act("#mirror-settings-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, "/v1/settings/mirrors", None).await;
    assert_eq!(
        (v["threshold_pct"].as_u64(), &v["trusted_proxies"]),
        (Some(60), &json!(["127.0.0.1/32"])),
        "{v}"
    );

    // A monitor: a negative audience weight is refused by the regions field.
    b.goto(&format!("{base}/ui/monitors")).await;
    b.fill("#monitor-form input[name=name]", "live").await;
    b.fill("#monitor-form textarea[name=regions]", "eu -5 http://127.0.0.1:9/live.m3u8").await;
    b.click("#monitor-form button[type=submit]").await;
    assert_eq!(refused_field(&b, "#monitor-form").await, "regions");
    b.fill("#monitor-form textarea[name=regions]", "eu 60 http://127.0.0.1:9/live.m3u8 pathway=cdn-a").await;
    b.act("#monitor-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, "/v1/monitors", None).await;
    let monitor = v["items"][0]["id"].as_i64().unwrap();
    assert_eq!(v["items"][0]["monitor"]["regions"][0]["pathway"], "cdn-a", "{v}");
    b.click("#monitors tr[data-monitor='live'] button[data-edit]").await;
    assert_eq!(
        value_of(&b, "#monitor-form textarea[name=regions]").await,
        "eu 60 http://127.0.0.1:9/live.m3u8 pathway=cdn-a"
    );
    b.fill("#monitor-form input[name=down_weight_budget_pct]", "20").await;
    b.choose("#monitor-form select[name=weighting]", "learned").await;
    b.act("#monitor-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &format!("/v1/monitors/{monitor}"), None).await;
    assert_eq!(v["monitor"]["down_weight_budget_pct"], 20.0, "{v}");
    assert_eq!(
        (&v["monitor"]["weighting"], &v["monitor"]["learned_floor_pct"]),
        (&json!("learned"), &json!(5.0)),
        "{v}"
    );
    b.goto(&format!("{base}/ui/monitors/{monitor}")).await;
    let weighting = b.text("#weighting").await;
    assert!(weighting.contains("no demand seen yet: as configured"), "{weighting}");
    assert_eq!(v["monitor"]["regions"][0]["weight"], 60.0, "{v}");

    // A channel edited in place: a field emptied is cleared; its secret is never in the page,
    // and kept by an edit that does not give it again.
    let body = json!({"name": "ops", "format": "pagerduty", "secret": "R0UT1NGKEY", "template": "[{status}] {kind}"});
    let ch = s.create("/v1/webhooks", body).await["id"].as_i64().unwrap();
    b.goto(&format!("{base}/ui/alerts")).await;
    let page = b.client.source().await.unwrap();
    assert!(!page.contains("R0UT1NGKEY"), "the secret is nowhere in the page");
    b.click("#channels tr[data-channel='ops'] button[data-edit]").await;
    assert_eq!(value_of(&b, "#channel-form input[name=template]").await, "[{status}] {kind}");
    assert_eq!(value_of(&b, "#channel-form input[name=secret]").await, "");
    b.fill("#channel-form input[name=template]", "").await;
    b.act("#channel-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, &format!("/v1/webhooks/{ch}"), None).await;
    assert_eq!((v.get("template"), v["secret"].as_str()), (None, Some("(hidden)")), "{v}");

    // A status page of the monitor, read as the public reads it.
    b.goto(&format!("{base}/ui/status-pages")).await;
    b.fill("#status-page-form input[name=slug]", "Video!").await;
    b.fill("#status-page-form input[name=title]", "Video delivery").await;
    b.choose("#status-page-form select[name=monitors]", &monitor.to_string()).await;
    b.click("#status-page-form button[type=submit]").await;
    assert_eq!(refused_field(&b, "#status-page-form").await, "slug");
    b.fill("#status-page-form input[name=slug]", "video").await;
    b.act("#status-page-form button[type=submit]").await;
    assert!(b.text("#status-pages tr[data-status-page='video']").await.contains("monitor live"));
    b.screenshot("status-pages.png").await;
    b.goto(&format!("{base}/status/video")).await;
    let public = b.text("body").await;
    assert!(public.contains("Video delivery") && public.contains("live"), "{public}");
    assert!(!public.contains("127.0.0.1"), "nothing private: {public}");
    b.screenshot("status-page-public.png").await;
    b.goto(&format!("{base}/ui/status-pages")).await;
    b.click("#status-pages tr[data-status-page='video'] button[data-edit]").await;
    b.fill("#status-page-form input[name=title]", "Live video").await;
    b.act("#status-page-form button[type=submit]").await;
    let (_, v) = s.call(Method::GET, "/v1/status-pages", None).await;
    assert_eq!(
        (v["items"][0]["title"].as_str(), v["items"][0]["slug"].as_str()),
        (Some("Live video"), Some("video"))
    );
    delete_confirmed(&b, "#status-pages tr[data-status-page='video'] button.danger").await;
    assert_eq!(reqwest::get(format!("{base}/status/video")).await.unwrap().status(), 404);

    // The monitor, the check and the tenant deleted from their pages.
    b.goto(&format!("{base}/ui/monitors")).await;
    delete_confirmed(&b, "#monitors tr[data-monitor='live'] button.danger").await;
    b.goto(&format!("{base}/ui/checks")).await;
    delete_confirmed(&b, "#checks tr[data-check='edge'] button.danger").await;
    b.goto(&format!("{base}/ui/tenants")).await;
    delete_confirmed(&b, "#tenants tr[data-tenant='debian'] button.danger").await;
    for kind in ["monitors", "checks", "tenants"] {
        let (_, v) = s.call(Method::GET, &format!("/v1/{kind}"), None).await;
        assert_eq!(v["items"], json!([]), "{kind}: {v}");
    }
    b.close().await;
}
