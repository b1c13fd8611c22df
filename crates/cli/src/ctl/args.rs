//! The words of `vantage ctl`: its flags, resources and actions.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use vantage_core::check::Method;

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
    pub(super) command: Resource,
}

/// What to act on.
#[derive(Debug, clap::Subcommand)]
pub(super) enum Resource {
    /// Regions (code, name).
    Regions(Plain),
    /// Clusters (name, domain, aliases, dns_mode, ttl, listeners, check, publishers…), their
    /// revisions and current records.
    Clusters(ClusterArgs),
    /// Node groups of a cluster (name, region).
    Groups(InCluster),
    /// Lines of a cluster (name, group, backup_groups, min_healthy, client_networks).
    Lines(InCluster),
    /// Scheduling rules of a cluster, and their preview.
    Rules(RuleArgs),
    /// Nodes (cluster, group, name, enabled, also_probes) and their scheduling addresses.
    Nodes(NodeArgs),
    /// Probers (list, get, update name/enabled, delete), enrollment tokens, results.
    Probers(ProberArgs),
    /// Webhook sinks for alerts (name, url, format json|alertmanager, enabled).
    Webhooks(Plain),
    /// Open and recently resolved alerts.
    Alerts,
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
    /// Named checks that probe mirrors (`default` applies where none is named).
    Checks {
        #[command(subcommand)]
        action: CheckAction,
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
}

#[derive(Debug, clap::Args)]
pub(super) struct Plain {
    #[command(subcommand)]
    pub(super) action: Action,
}

#[derive(Debug, clap::Args)]
pub(super) struct InCluster {
    /// The cluster id.
    #[arg(long)]
    pub(super) cluster: i64,
    #[command(subcommand)]
    pub(super) action: Action,
}

/// The usual actions. FIELD=VALUE sets a field: VALUE is JSON when it parses as JSON
/// (`ttl=60`, `enabled=false`, `listeners='[{"port":443,"protocol":"https"}]'`), text
/// otherwise; `a.b=…` sets a nested field.
#[derive(Debug, clap::Subcommand)]
pub(super) enum Action {
    /// List them.
    List,
    /// Show one.
    Get { id: i64 },
    /// Create one from FIELD=VALUE pairs (or --file).
    Create {
        fields: Vec<String>,
        /// JSON body file (`-` for standard input).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Change fields of one.
    Update {
        id: i64,
        fields: Vec<String>,
        /// JSON merge-patch file (`-` for standard input).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Delete one.
    Delete { id: i64 },
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
        id: i64,
        /// At most this many (50).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// A cluster's current records per line.
    Dns { id: i64 },
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
        /// Its region id.
        #[arg(long)]
        region: i64,
        /// Validity in seconds (300–604800, 3600).
        #[arg(long)]
        valid_for: Option<i64>,
    },
    /// List enrollment tokens.
    Tokens,
    /// A prober's latest results with window strips.
    Results { id: i64 },
}

#[derive(Debug, clap::Args)]
pub(super) struct RuleArgs {
    /// The cluster id.
    #[arg(long)]
    pub(super) cluster: i64,
    #[command(subcommand)]
    pub(super) action: RuleAction,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum RuleAction {
    #[command(flatten)]
    Common(Action),
    /// Every rule against every node it looks at now: status, conditions, what happens next.
    Preview,
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
    Addresses { id: i64 },
    /// Set a node's scheduling addresses: IP[:LEVEL]… (level primary, backup1 or backup2;
    /// primary when absent). No address: use the reported ones again.
    SetAddresses { id: i64, addresses: Vec<String> },
    /// Create an enrollment token for a node's agent (shown once) and print the start command.
    Token {
        /// The node id.
        id: i64,
        /// Validity in seconds (300–604800, 3600).
        #[arg(long)]
        valid_for: Option<i64>,
    },
    /// List node enrollment tokens.
    Tokens,
    /// Every prober's latest results for a node, with window strips.
    Results { id: i64 },
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum SettingsAction {
    /// Show the probe settings.
    Get,
    /// Change probe settings: FIELD=VALUE… (others keep their value).
    Set { fields: Vec<String> },
    /// The mirror and door settings (shown without an action).
    ///
    /// Fields: threshold_pct, scheme, exclude_client_region, trusted_proxies.
    Mirrors {
        #[command(subcommand)]
        action: Option<MirrorSettingsAction>,
    },
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum MirrorSettingsAction {
    /// Show the mirror and door settings.
    Get,
    /// Change mirror and door settings: FIELD=VALUE… (others keep their value), e.g.
    /// `threshold_pct=60 'trusted_proxies=["10.0.0.0/8"]'`.
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
    },
    /// Delete a tenant (refused while a mirror names it).
    Delete { name: String },
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum CheckAction {
    /// List named checks.
    List,
    /// Show one.
    Get { id: i64 },
    /// Create a named check; absent attributes take their defaults.
    Create {
        name: String,
        #[command(flatten)]
        check: CheckFlags,
    },
    /// Change fields of one: FIELD=VALUE… (or --file), as for other objects.
    Update {
        id: i64,
        fields: Vec<String>,
        /// JSON merge-patch file (`-` for standard input).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Delete one.
    Delete { id: i64 },
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
    Create { name: String },
    /// Revoke a token.
    Revoke { id: i64 },
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
