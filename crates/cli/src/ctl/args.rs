//! The words of `vantage ctl`: its flags, resources and actions.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use vantage_core::check::Method;
use vantage_core::monitor::MonitorRegion;

use super::names::Ref;

/// Connection flags of `vantage ctl`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Server URL [default: from the local data directory's serve.json].
    #[arg(long, env = "VANTAGE_URL", global = true)]
    pub(super) server: Option<String>,
    /// Admin token [default: the local data directory's admin-token file].
    #[arg(long, env = "VANTAGE_ADMIN_TOKEN", global = true, hide_env_values = true)]
    pub(super) token: Option<String>,
    /// Data directory to find the local server and token in.
    #[arg(long, env = "VANTAGE_DATA_DIR", default_value = "./vantage-data", global = true)]
    pub(super) data_dir: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub(super) json: bool,
    #[command(subcommand)]
    pub(super) command: Command,
}

/// A resource to act on, or the whole configuration as files.
#[derive(Debug, clap::Subcommand)]
pub(super) enum Command {
    #[command(flatten)]
    Fleet(FleetCommand),
    #[command(flatten)]
    Resource(Resource),
}

/// What to act on.
#[derive(Debug, clap::Subcommand)]
pub(super) enum Resource {
    /// Regions (code, name, client_networks, countries, continents, asns).
    Regions(Plain),
    /// Clusters (name, domain, aliases, dns_mode, ttl, listeners, check or check_name,
    /// publishers…), their revisions and current records.
    Clusters(ClusterArgs),
    /// Node groups of a cluster (name, region).
    Groups(GroupArgs),
    /// Lines of a cluster (name, group, backup_groups, min_healthy, client_networks, countries,
    /// continents, asns).
    Lines(InCluster),
    /// Scheduling rules of a cluster, and their preview.
    Rules(RuleArgs),
    /// Nodes (cluster, group, name, enabled, also_probes) and their scheduling addresses.
    Nodes(NodeArgs),
    /// Probers (list, get, update name/enabled, delete), enrollment tokens, results.
    Probers(ProberArgs),
    /// Notification channels for alerts (name, format json|alertmanager|slack|pagerduty|email,
    /// url, secret, from, to, template, enabled).
    Webhooks(Plain),
    /// Silences of alerts' notifications (matchers='["kind=node_offline","node=edge-1"]',
    /// duration_s or ends_at, comment); delete one to end it.
    Silences(Plain),
    /// Maintenance windows (name, starts_at, duration_s or ends_at, nodes='["edge-1"]',
    /// groups='[ID]', mirrors='["m.example.net"]', monitors='["live"]', comment): while open,
    /// their nodes and groups are drained, their mirrors out of rotation, their alerts' notifications held.
    Maintenance(Plain),
    /// Public status pages (slug, title, clusters='["video"]', monitors, tenants, details):
    /// served at /status/SLUG on the public listener, with status.json and badge.svg.
    StatusPages(Plain),
    /// Open and recently resolved alerts.
    Alerts,
    /// Availability: the share of time each subject served over 24 h, 7 d and 30 d
    /// (maintenance left out), the error budget left against --target, and for one subject
    /// (node:7, address:7/192.0.2.1, line:1/4, mirror:HOST, monitor:3) its incidents.
    Report {
        /// One subject; none: every subject (of --kind).
        subject: Option<String>,
        /// address, node, line, mirror or monitor.
        #[arg(long)]
        kind: Option<String>,
        /// The availability aimed at, % (99.9).
        #[arg(long)]
        target: Option<f64>,
    },
    /// Mirrors (§6): their verdicts and regions, records, manual blocks and check runs.
    Mirrors {
        #[command(subcommand)]
        action: MirrorAction,
    },
    /// Tenants that mirrors serve and doors ask for.
    Tenants {
        #[command(subcommand)]
        action: TenantAction,
    },
    /// Named checks that probe mirrors, clusters and monitors (`default` applies to those that
    /// have no check and name none).
    Checks {
        #[command(subcommand)]
        action: CheckAction,
    },
    /// Monitors (§7): endpoints weighed by audience per region, their verdicts and history.
    Monitors {
        #[command(subcommand)]
        action: MonitorAction,
    },
    /// Where a client address is (country, continent, AS, region by the geo databases and the
    /// regions' networks) and what each cluster's DNS answers it now.
    Client {
        /// The address (a resolver's, or an ECS client subnet's).
        ip: IpAddr,
        /// As an ECS client subnet of this length (the address cut to it, as a resolver sends it).
        #[arg(long, value_name = "BITS")]
        prefix: Option<u8>,
    },
    /// Doors: which mirror a visitor would be sent to now.
    Doors {
        #[command(subcommand)]
        action: DoorAction,
    },
    /// Probe settings, and the mirror and door settings.
    Settings {
        #[command(subcommand)]
        action: SettingsAction,
    },
    /// Admin API tokens.
    AdminTokens {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// The audit log.
    Audit(AuditArgs),
    /// What happened in the fleet, in order: addresses failing, unreachable and back, levels,
    /// rules, revisions with their records per line, alerts, probers, publications.
    Events(EventArgs),
    /// One screen for an incident: probers offline, alerts firing, and per cluster what DNS
    /// answers now, why, and every node that is not healthy (failing, unreachable,
    /// recovering, left out), with since when.
    Status {
        /// Only this cluster (its id or name).
        #[arg(long)]
        cluster: Option<Ref>,
    },
}

/// The configuration as files kept in git.
#[derive(Debug, clap::Subcommand)]
pub(super) enum FleetCommand {
    /// Write the configuration as a fleet file (YAML, or JSON with --json): every object by
    /// name, secrets as `stored`. Applying it back changes nothing.
    Export {
        /// Write it to this file instead of standard output.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// What applying fleet files would change: each object and field, and what DNS would
    /// answer per line after it. Exits 0 when nothing would change, 2 when something would.
    Plan(FleetFiles),
    /// Apply fleet files in one audited change, after showing its plan.
    Apply {
        #[command(flatten)]
        files: FleetFiles,
        /// Apply only if the configuration is still at this revision (a reviewed plan's);
        /// refused when it moved since. Default: the revision of the plan shown.
        #[arg(long)]
        expect: Option<String>,
    },
}

/// Which fleet files, and what to do with objects they do not hold.
#[derive(Debug, clap::Args)]
pub(super) struct FleetFiles {
    /// A fleet file (YAML or JSON), or a directory of them (`*.yaml`, `*.yml`, `*.json`); may
    /// be given more than once.
    #[arg(short = 'f', long = "file", required = true)]
    pub(super) paths: Vec<PathBuf>,
    /// Delete objects the files do not hold (without it they are left, and listed).
    #[arg(long)]
    pub(super) prune: bool,
    /// Delete even where it changes what DNS answers beyond the object (the last enabled node
    /// of a group a line answers with).
    #[arg(long)]
    pub(super) force: bool,
}

#[derive(Debug, clap::Args)]
pub(super) struct Plain {
    #[command(subcommand)]
    pub(super) action: Action,
}

#[derive(Debug, clap::Args)]
pub(super) struct GroupArgs {
    /// The cluster (its id or name).
    #[arg(long)]
    pub(super) cluster: Ref,
    #[command(subcommand)]
    pub(super) action: GroupAction,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum GroupAction {
    #[command(flatten)]
    Common(Action),
    /// Drain a group: every node of it leaves the answers at once and stays probed. Refused,
    /// naming the lines, when a line would fall below its minimum, unless --confirm.
    Drain {
        id: Ref,
        #[arg(long)]
        confirm: bool,
    },
    /// Put a drained group back in the answers.
    Undrain { id: Ref },
}

#[derive(Debug, clap::Args)]
pub(super) struct InCluster {
    /// The cluster (its id or name).
    #[arg(long)]
    pub(super) cluster: Ref,
    #[command(subcommand)]
    pub(super) action: Action,
}

/// The usual actions. FIELD=VALUE sets a field: VALUE is JSON when it parses as JSON
/// (`ttl=60`, `enabled=false`, `listeners='[{"port":443,"protocol":"https"}]'`), text
/// otherwise; `a.b=…` sets a nested field. Wherever an id goes, a name may stand: `ID` is an
/// id or a name (`nodes get sin-1a`), and so are the fields naming another object
/// (`group=sin-1`, `region=ap-sg`, `cluster=video`, `line=default`, `backup_groups=[...]`).
#[derive(Debug, clap::Subcommand)]
pub(super) enum Action {
    /// List them.
    List,
    /// Show one.
    Get { id: Ref },
    /// Create one from FIELD=VALUE pairs (or --file).
    Create {
        fields: Vec<String>,
        /// JSON body file (`-` for standard input).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Change fields of one.
    Update {
        id: Ref,
        fields: Vec<String>,
        /// JSON merge-patch file (`-` for standard input).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Delete one.
    Delete {
        id: Ref,
        /// Delete even where it changes what DNS answers beyond the object (the last enabled
        /// node of a group a line answers with).
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, clap::Args)]
pub(super) struct ClusterArgs {
    #[command(subcommand)]
    pub(super) action: ClusterAction,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum ClusterAction {
    #[command(flatten)]
    Common(Action),
    /// A cluster's revisions, newest first.
    Revisions {
        id: Ref,
        /// At most this many (50).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// A cluster's current records per line.
    Dns { id: Ref },
    /// What changed from revision FROM to the later TO: each line's records gained and lost,
    /// and every revision in between with its reason.
    Diff { id: Ref, from: u32, to: u32 },
}

#[derive(Debug, clap::Args)]
pub(super) struct ProberArgs {
    #[command(subcommand)]
    pub(super) action: ProberAction,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum ProberAction {
    #[command(flatten)]
    Common(Action),
    /// Create an enrollment token (shown once) and print the start command.
    Token {
        /// The new prober's name.
        #[arg(long)]
        name: String,
        /// Its region (id, code or name).
        #[arg(long)]
        region: Ref,
        /// Validity in seconds (300–604800, 3600).
        #[arg(long)]
        valid_for: Option<i64>,
    },
    /// List enrollment tokens.
    Tokens,
    /// A prober's latest results with window strips.
    Results { id: Ref },
}

#[derive(Debug, clap::Args)]
pub(super) struct RuleArgs {
    /// The cluster (its id or name).
    #[arg(long)]
    pub(super) cluster: Ref,
    #[command(subcommand)]
    pub(super) action: RuleAction,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum RuleAction {
    #[command(flatten)]
    Common(Action),
    /// Every rule against every node it looks at now: status, conditions, what happens next.
    /// With FIELD=VALUE pairs or --file: a rule as drafted instead, as if it were on — a new
    /// one, or with --rule that rule changed by them (a merge patch); nothing is saved.
    Preview {
        /// The draft's fields, as `create` (or, with --rule, `update`) takes them.
        fields: Vec<String>,
        /// JSON file of the draft (`-` for standard input).
        #[arg(long)]
        file: Option<PathBuf>,
        /// The rule the draft changes (its id or name).
        #[arg(long)]
        rule: Option<Ref>,
    },
}

#[derive(Debug, clap::Args)]
pub(super) struct NodeArgs {
    #[command(subcommand)]
    pub(super) action: NodeAction,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum NodeAction {
    #[command(flatten)]
    Common(Action),
    /// Show a node's scheduling addresses.
    Addresses { id: Ref },
    /// Set a node's scheduling addresses: IP[:LEVEL][:trusted][@LINE]… (level primary, backup1
    /// or backup2; primary when absent). A new address stays out of DNS until a strict majority
    /// of the probers has seen it answer; `trusted` serves it at once. `@LINE` makes it a
    /// target address of that line: there the node answers with its targets instead of its
    /// scheduling addresses, with no level switching. No address: use the reported ones again.
    SetAddresses { id: Ref, addresses: Vec<String> },
    /// Add source address: add the address the node's agent connects from (its latest
    /// heartbeat's, else its enrollment's; a NAT's public address) to its configured addresses.
    /// Refused when it is private or configured already.
    AddSourceAddress {
        /// The node (id or name).
        id: Ref,
        /// Its level: primary (default), backup1 or backup2.
        #[arg(long)]
        level: Option<String>,
    },
    /// Create an enrollment token for a node's agent (shown once) and print the start command.
    Token {
        /// The node (id or name).
        id: Ref,
        /// Validity in seconds (300–604800, 3600).
        #[arg(long)]
        valid_for: Option<i64>,
    },
    /// List node enrollment tokens.
    Tokens,
    /// Every prober's latest results for a node, with window strips.
    Results { id: Ref },
    /// Drain a node: out of the answers at once, still probed; it reads drained once clients
    /// have had 2 × TTL to move. Refused, naming the lines, when a line would fall below its
    /// minimum, unless --confirm.
    Drain {
        id: Ref,
        #[arg(long)]
        confirm: bool,
    },
    /// Put a drained node back in the answers (as its health allows).
    Undrain { id: Ref },
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum SettingsAction {
    /// Show the probe settings.
    Get,
    /// Change probe settings: FIELD=VALUE… (others keep their value).
    Set { fields: Vec<String> },
    /// The mirror and door settings (shown without an action).
    ///
    /// Fields: threshold_pct, scheme, exclude_client_region, trusted_proxies; e.g. `set
    /// threshold_pct=60 'trusted_proxies=["10.0.0.0/8"]'`.
    Mirrors {
        #[command(subcommand)]
        action: Option<SettingsObjectAction>,
    },
    /// The detection settings: cross-region confirmation, flap damping, the probe budget
    /// (shown without an action).
    ///
    /// Fields: confirm, probe_budget_per_s, damping_window_s, damping_max_multiplier,
    /// damping_stable_s; e.g. `set probe_budget_per_s=20`.
    Detection {
        #[command(subcommand)]
        action: Option<SettingsObjectAction>,
    },
}

/// Show or change one settings object.
#[derive(Debug, clap::Subcommand)]
pub(super) enum SettingsObjectAction {
    /// Show the settings.
    Get,
    /// Change the settings: FIELD=VALUE… (others keep their value); the object's own help
    /// lists its fields (`settings mirrors --help`).
    Set { fields: Vec<String> },
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum MirrorAction {
    /// List mirrors with their verdicts.
    List,
    /// Show a mirror, its regions and each prober's opinion.
    Get { host: String },
    /// Register or replace a mirror, from a YAML or JSON file or from flags.
    ///
    /// A record built from flags replaces the whole record (absent fields take their
    /// defaults) but keeps a manual block: `mirrors unblock` lifts it.
    Put {
        host: String,
        /// YAML or JSON record file (`-` for standard input), sent as it is.
        #[arg(long, conflicts_with_all = ["weight", "tenants", "check", "address"])]
        file: Option<PathBuf>,
        #[command(flatten)]
        record: MirrorFlags,
    },
    /// Deregister a mirror.
    Delete { host: String },
    /// Ask the probers to check every mirror now (one run per 60 s across all callers).
    Check {
        /// Only the probers of this region (repeat for more; default: every region).
        #[arg(long = "region", value_name = "CODE")]
        regions: Vec<String>,
    },
    /// Block a mirror by hand: its verdict is `blocked` whatever the probers see.
    Block {
        host: String,
        /// Why (under 256 bytes), e.g. a ticket.
        #[arg(long)]
        note: String,
    },
    /// Lift a manual block.
    Unblock {
        host: String,
        /// Why it is lifted.
        #[arg(long)]
        note: Option<String>,
    },
}

/// The fields of a mirror record as flags.
#[derive(Debug, clap::Args)]
pub(super) struct MirrorFlags {
    /// Selection weight (1); 0 keeps it out of doors.
    #[arg(long, allow_negative_numbers = true)]
    pub(super) weight: Option<i64>,
    /// A tenant it may serve (repeat for more; none: every tenant).
    #[arg(long = "tenant", value_name = "TENANT")]
    pub(super) tenants: Vec<String>,
    /// The named check that probes it (`default`).
    #[arg(long, value_name = "NAME")]
    pub(super) check: Option<String>,
    /// Where probers connect instead of resolving the host.
    #[arg(long, value_name = "IP:PORT")]
    pub(super) address: Option<SocketAddr>,
    /// Where its files are: doors join visitors' paths to it, probers check it
    /// (https://mirror.example.net/debian/; default: the doors' scheme and the host).
    #[arg(long, value_name = "URL")]
    pub(super) base_url: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum TenantAction {
    /// List tenants and how many mirrors name each.
    List,
    /// Create or replace a tenant.
    Put {
        name: String,
        /// What it is, for people.
        #[arg(long)]
        note: Option<String>,
        /// When none of its mirrors is live, doors send its visitors to degraded ones rather
        /// than to none (off: only live mirrors, as reference 004 has it).
        #[arg(long)]
        fallback_to_degraded: bool,
        /// Where doors send its visitors when no mirror may serve them (a base URL).
        #[arg(long, value_name = "URL")]
        fallback_url: Option<String>,
        /// Doors send its visitors to the eligible mirror their region's probers measure
        /// fastest, with hysteresis (off: by weight).
        #[arg(long)]
        order_by_latency: bool,
    },
    /// Delete a tenant (refused while a mirror names it).
    Delete { name: String },
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum CheckAction {
    /// List named checks.
    List,
    /// Show one.
    Get { id: Ref },
    /// Create a named check; absent attributes take their defaults.
    Create {
        name: String,
        #[command(flatten)]
        check: CheckFlags,
    },
    /// Change fields of one: FIELD=VALUE… (or --file), as for other objects.
    Update {
        id: Ref,
        fields: Vec<String>,
        /// JSON merge-patch file (`-` for standard input).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Delete one.
    Delete { id: Ref },
}

/// The attributes of a check as flags.
#[derive(Debug, clap::Args)]
pub(super) struct CheckFlags {
    /// Method: tcp, http, https or hls.
    #[arg(long, value_parser = crate::check::parse_method)]
    pub(super) method: Option<Method>,
    /// Request path (`/.vantage/health`).
    #[arg(long)]
    pub(super) path: Option<String>,
    /// `Host` header and TLS SNI.
    #[arg(long)]
    pub(super) host: Option<String>,
    /// Seconds between attempts (5).
    #[arg(long)]
    pub(super) interval_s: Option<u32>,
    /// Timeout per attempt, ms (2000).
    #[arg(long)]
    pub(super) timeout_ms: Option<u32>,
    /// Attempts considered (8, at most 64).
    #[arg(long)]
    pub(super) window: Option<u8>,
    /// Good attempts within the window needed to be healthy (3).
    #[arg(long)]
    pub(super) threshold: Option<u8>,
    /// Good attempts assumed when a target is first seen (threshold − 1).
    #[arg(long)]
    pub(super) initial: Option<u8>,
    /// Expected HTTP status (200).
    #[arg(long, value_name = "STATUS")]
    pub(super) expected_response: Option<u16>,
    /// A text whose presence in a response body marks a block page (`blocked-inferred`).
    #[arg(long, value_name = "TEXT")]
    pub(super) block_pattern: Option<String>,
    /// An HTTP status that marks a block page, such as 403 or 451 (repeat for more; none: a
    /// mirror's every answer counts as one).
    #[arg(long = "block-status", value_name = "STATUS")]
    pub(super) block_statuses: Vec<u16>,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum MonitorAction {
    /// List monitors with their verdicts.
    List,
    /// Show a monitor's definition, verdict and regions.
    Get { id: Ref },
    /// Create a monitor from a JSON or YAML file, or from a name and flags.
    ///
    /// From flags, e.g. `monitors create live --region eu-de=60=https://a.example/live.m3u8@cdn-a
    /// --region us-va=40=https://b.example/live.m3u8,https://c.example/live.m3u8 --quorum 3/5`;
    /// the rest take their defaults: the down budget 15 %, the stale budget 10 %, the steering
    /// TTL 30 s (a file sets them all).
    Create {
        /// The monitor's name.
        #[arg(required_unless_present = "file")]
        name: Option<String>,
        /// JSON or YAML monitor file (`-` for standard input), sent as it is: name, check,
        /// regions, failure_quorum, quorum_window, max_segment_age_s, down_weight_budget_pct,
        /// stale_weight_budget_pct, steering_ttl_s, weighting, learned_floor_pct,
        /// steer_by_client_region.
        #[arg(long, conflicts_with_all = ["name", "regions", "max_segment_age_s", "quorum", "check_interval_s", "check", "steer_by_client_region"])]
        file: Option<PathBuf>,
        #[command(flatten)]
        monitor: MonitorFlags,
    },
    /// Delete a monitor.
    Delete { id: Ref },
    /// A monitor's verdict: global, the weights behind it, each region's tuple, the steering order.
    Verdict { id: Ref },
    /// A monitor's probes, failures and segment age per region over time, and its verdict changes.
    History {
        id: Ref,
        /// How far back: 15m (5 s buckets), 1h (20 s), 24h (5 min) or 14d (1 h).
        #[arg(long, default_value = "1h", value_parser = ["15m", "1h", "24h", "14d"])]
        range: String,
    },
}

/// The fields of a monitor as flags.
#[derive(Debug, clap::Args)]
pub(super) struct MonitorFlags {
    /// A region: its code, audience weight, endpoint URLs (comma-separated) and, after `@`, the
    /// content-steering pathway (the region code when absent). Repeat for more.
    #[arg(long = "region", value_name = "CODE=WEIGHT=URL[,URL…][@PATHWAY]", value_parser = monitor_region)]
    pub(super) regions: Vec<MonitorRegion>,
    /// Worst segment age before a region is stale, s (30).
    #[arg(long, value_name = "S")]
    pub(super) max_segment_age_s: Option<u32>,
    /// N failing of a region's last M probes make it down (3/5).
    #[arg(long, value_name = "N/M", value_parser = quorum)]
    pub(super) quorum: Option<(u32, u32)>,
    /// Seconds between probes of each endpoint (5).
    #[arg(long, value_name = "S", conflicts_with = "check")]
    pub(super) check_interval_s: Option<u32>,
    /// The named check to probe the endpoints with (without it and without
    /// --check-interval-s: the check named `default`, else `hls`).
    #[arg(long, value_name = "NAME")]
    pub(super) check: Option<String>,
    /// Order the pathways for each region's players by what that region's probers measure
    /// (every region's probers then probe every region's endpoints).
    #[arg(long)]
    pub(super) steer_by_client_region: bool,
}

/// `CODE=WEIGHT=URL[,URL…][@PATHWAY]`. The server judges the values; this only splits them.
/// The pathway is what follows the last `@` unless that holds a `/` or `:`, so a URL's own
/// `user@host` stays a URL.
fn monitor_region(text: &str) -> Result<MonitorRegion, String> {
    let mut parts = text.splitn(3, '=');
    let (Some(region), Some(weight), Some(urls)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected CODE=WEIGHT=URL[,URL…][@PATHWAY]".into());
    };
    let weight = weight.parse().map_err(|_| format!("the weight must be a number, got {weight:?}"))?;
    let (urls, pathway) = match urls.rsplit_once('@') {
        Some((urls, p)) if !p.contains(['/', ':']) => (urls, Some(p.to_owned())),
        _ => (urls, None),
    };
    Ok(MonitorRegion {
        region: region.to_owned(),
        weight,
        endpoints: urls.split(',').map(str::to_owned).collect(),
        pathway,
        // The monitor's own maximum applies; a region's override goes through --file.
        max_segment_age_s: None,
    })
}

/// `N/M`.
fn quorum(text: &str) -> Result<(u32, u32), String> {
    text.split_once('/')
        .and_then(|(n, m)| Some((n.parse().ok()?, m.parse().ok()?)))
        .ok_or_else(|| format!("expected N/M (failing probes of the last M), got {text:?}"))
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum DoorAction {
    /// Choose a mirror as a door would, by weight among the eligible ones.
    Select {
        /// The tenant the visitor wants (default: any mirror).
        #[arg(long)]
        tenant: Option<String>,
        /// A region where the mirror must not be failing (repeat for more).
        #[arg(long = "exclude-region", value_name = "CODE")]
        exclude_regions: Vec<String>,
        /// The visitor's address, to keep it away from mirrors failing in its region.
        #[arg(long, value_name = "IP")]
        client: Option<IpAddr>,
    },
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum TokenAction {
    /// List tokens (never the tokens themselves).
    List,
    /// Create a token; it is printed once.
    Create {
        name: String,
        /// A token that may read everything and change nothing (dashboards, on-call).
        #[arg(long)]
        read_only: bool,
    },
    /// Revoke a token.
    Revoke { id: Ref },
}

#[derive(Debug, clap::Args)]
pub(super) struct AuditArgs {
    /// Action, or a prefix ending in a dot (`scheduling.`).
    #[arg(long)]
    pub(super) action: Option<String>,
    /// Actor (`admin:bootstrap`, `system`).
    #[arg(long)]
    pub(super) actor: Option<String>,
    /// Object (`node:12`).
    #[arg(long)]
    pub(super) object: Option<String>,
    /// At or after (RFC 3339).
    #[arg(long)]
    pub(super) since: Option<String>,
    /// Before (RFC 3339).
    #[arg(long)]
    pub(super) until: Option<String>,
    /// At most this many (100).
    #[arg(long)]
    pub(super) limit: Option<u32>,
}

#[derive(Debug, clap::Args)]
pub(super) struct EventArgs {
    /// Only this cluster (its id or name).
    #[arg(long)]
    pub(super) cluster: Option<Ref>,
    /// Only this node (its id or name).
    #[arg(long)]
    pub(super) node: Option<Ref>,
    /// Only these kinds, comma-separated (`address_failing,revision`).
    #[arg(long)]
    pub(super) kind: Option<String>,
    /// Since this RFC 3339 time or this long ago (`15m`, `2h`, `1d`) [default: the last 20].
    #[arg(long)]
    pub(super) since: Option<String>,
    /// At most this many stored ones (the newest) [default: 20, or 200 with --since].
    #[arg(long)]
    pub(super) limit: Option<u32>,
    /// Then keep printing each one as it happens, until interrupted.
    #[arg(long, short = 'f')]
    pub(super) follow: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_flag_splits_into_code_weight_urls_and_pathway() {
        let r = monitor_region("eu-de=60.5=https://a.example/live.m3u8?k=v,https://b.example/x.m3u8@cdn-a")
            .unwrap();
        assert_eq!((r.region.as_str(), r.weight, r.pathway.as_deref()), ("eu-de", 60.5, Some("cdn-a")));
        assert_eq!(r.endpoints, ["https://a.example/live.m3u8?k=v", "https://b.example/x.m3u8"]);
        // A URL's user@host is no pathway; negative weights are for the server to refuse.
        let r = monitor_region("us-va=-1=https://user@b.example/live.m3u8").unwrap();
        assert_eq!((r.weight, r.pathway), (-1.0, None));
        assert_eq!(r.endpoints, ["https://user@b.example/live.m3u8"]);
        assert!(monitor_region("us-va=https://b.example/").is_err());
        assert!(monitor_region("us-va=heavy=https://b.example/").is_err());
    }

    #[test]
    fn a_quorum_is_n_of_m() {
        assert_eq!(quorum("3/5"), Ok((3, 5)));
        assert!(quorum("3").is_err());
        assert!(quorum("3/x").is_err());
    }
}
