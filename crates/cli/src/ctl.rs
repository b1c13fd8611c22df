//! `vantage ctl`: the admin API from the shell. Every object can be listed, shown, created,
//! changed and deleted; tables by default, `--json` for scripts; the server's message and a
//! non-zero exit on errors.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use serde_json::{Map, Value};

/// Connection flags of `vantage ctl`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Server URL [default: from the local data directory's serve.json].
    #[arg(long, env = "VANTAGE_URL", global = true)]
    server: Option<String>,
    /// Admin token [default: the local data directory's admin-token file].
    #[arg(long, env = "VANTAGE_ADMIN_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    /// Data directory to find the local server and token in.
    #[arg(long, env = "VANTAGE_DATA_DIR", default_value = "./vantage-data", global = true)]
    data_dir: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Resource,
}

/// What to act on.
#[derive(Debug, clap::Subcommand)]
enum Resource {
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
    /// Probe settings.
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
struct Plain {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Args)]
struct InCluster {
    /// The cluster id.
    #[arg(long)]
    cluster: i64,
    #[command(subcommand)]
    action: Action,
}

/// The usual actions. FIELD=VALUE sets a field: VALUE is JSON when it parses as JSON
/// (`ttl=60`, `enabled=false`, `listeners='[{"port":443,"protocol":"https"}]'`), text
/// otherwise; `a.b=…` sets a nested field.
#[derive(Debug, clap::Subcommand)]
enum Action {
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
struct ClusterArgs {
    #[command(subcommand)]
    action: ClusterAction,
}

#[derive(Debug, clap::Subcommand)]
enum ClusterAction {
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
struct ProberArgs {
    #[command(subcommand)]
    action: ProberAction,
}

#[derive(Debug, clap::Subcommand)]
enum ProberAction {
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
struct RuleArgs {
    /// The cluster id.
    #[arg(long)]
    cluster: i64,
    #[command(subcommand)]
    action: RuleAction,
}

#[derive(Debug, clap::Subcommand)]
enum RuleAction {
    #[command(flatten)]
    Common(Action),
    /// Every rule against every node it looks at now: status, conditions, what happens next.
    Preview,
}

#[derive(Debug, clap::Args)]
struct NodeArgs {
    #[command(subcommand)]
    action: NodeAction,
}

#[derive(Debug, clap::Subcommand)]
enum NodeAction {
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
enum SettingsAction {
    /// Show the probe settings.
    Get,
    /// Change probe settings: FIELD=VALUE… (others keep their value).
    Set { fields: Vec<String> },
}

#[derive(Debug, clap::Subcommand)]
enum TokenAction {
    /// List tokens (never the tokens themselves).
    List,
    /// Create a token; it is printed once.
    Create { name: String },
    /// Revoke a token.
    Revoke { id: i64 },
}

#[derive(Debug, clap::Args)]
struct AuditArgs {
    /// Action, or a prefix ending in a dot (`scheduling.`).
    #[arg(long)]
    action: Option<String>,
    /// Actor (`admin:bootstrap`, `system`).
    #[arg(long)]
    actor: Option<String>,
    /// Object (`node:12`).
    #[arg(long)]
    object: Option<String>,
    /// At or after (RFC 3339).
    #[arg(long)]
    since: Option<String>,
    /// Before (RFC 3339).
    #[arg(long)]
    until: Option<String>,
    /// At most this many (100).
    #[arg(long)]
    limit: Option<u32>,
}

struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Client {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.with_context(|| format!("cannot reach the server at {}", self.base))?;
        let status = resp.status();
        let text = resp.text().await?;
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(value);
        }
        let e = &value["error"];
        match (e["field"].as_str(), e["reason"].as_str()) {
            (Some(f), Some(r)) => bail!("{f}: {r} ({status})"),
            (None, Some(r)) => bail!("{r} ({status})"),
            _ => bail!("{status}: {value}"),
        }
    }
}

/// Sets `path` (dotted) in `obj` to `value`.
fn set_path(obj: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            obj.insert(path.to_owned(), value);
        }
        Some((head, rest)) => {
            let child = obj.entry(head.to_owned()).or_insert_with(|| Value::Object(Map::new()));
            if !child.is_object() {
                *child = Value::Object(Map::new());
            }
            if let Value::Object(m) = child {
                set_path(m, rest, value);
            }
        }
    }
}

/// A JSON object from FIELD=VALUE pairs or a file.
fn body(fields: &[String], file: Option<&PathBuf>) -> anyhow::Result<Value> {
    if let Some(f) = file {
        let text = if f.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())?
        } else {
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?
        };
        return serde_json::from_str(&text).with_context(|| format!("{} is not JSON", f.display()));
    }
    let mut obj = Map::new();
    for f in fields {
        let (k, v) = f.split_once('=').ok_or_else(|| anyhow!("expected FIELD=VALUE, got {f:?}"))?;
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
        set_path(&mut obj, k, value);
    }
    Ok(Value::Object(obj))
}

/// A cell: text as is, numbers and booleans printed, the rest as compact JSON.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.iter().all(|x| !x.is_object()) => {
            a.iter().map(cell).collect::<Vec<_>>().join(",")
        }
        other => other.to_string(),
    }
}

/// Prints objects as an aligned table of `columns`.
fn table(items: &[Value], columns: &[&str]) {
    let rows: Vec<Vec<String>> =
        items.iter().map(|i| columns.iter().map(|c| cell(&i[*c])).collect()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(n, c)| rows.iter().map(|r| r[n].chars().count()).chain([c.len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(columns.iter().map(|c| c.to_uppercase()).collect());
    for r in rows {
        line(r);
    }
}

/// Prints one object as FIELD  VALUE lines.
fn record(v: &Value) {
    if let Value::Object(m) = v {
        let w = m.keys().map(String::len).max().unwrap_or(0);
        for (k, x) in m {
            println!("{k:<w$}  {}", cell(x));
        }
    } else {
        println!("{}", cell(v));
    }
}

/// A list row made readable: a prober's last round as one phrase.
fn shape(kind: &str, row: &Value) -> Value {
    let mut r = row.clone();
    if kind == "probers" {
        let lr = &row["last_round"];
        r["last_round"] = if lr.is_null() {
            Value::Null
        } else {
            let rtt = lr["mean_rtt_ms"].as_f64().map_or_else(|| "-".to_owned(), |v| format!("{v:.1} ms"));
            Value::String(format!(
                "loss {:.1} %, {rtt}, {} unreachable",
                lr["loss_pct"].as_f64().unwrap_or_default(),
                lr["unreachable"].as_u64().unwrap_or_default()
            ))
        };
    }
    r
}

fn columns(kind: &str) -> &'static [&'static str] {
    match kind {
        "regions" => &["id", "code", "name", "probers"],
        "clusters" => &["id", "name", "domain", "dns_mode", "ttl", "aliases"],
        "groups" => &["id", "name", "region"],
        "lines" => &["id", "name", "group", "backup_groups", "min_healthy", "client_networks"],
        "rules" => &["id", "name", "line", "action", "match", "enabled", "hold_s", "recover_s"],
        "nodes" => &["id", "cluster", "group", "name", "enabled", "also_probes", "enrolled"],
        "probers" => &[
            "id",
            "name",
            "region_code",
            "enabled",
            "status",
            "last_seen",
            "version",
            "targets",
            "last_round",
        ],
        "webhooks" => &["id", "name", "url", "format", "enabled"],
        "admin-tokens" => &["id", "name", "prefix", "created_at"],
        _ => &["at", "actor", "action", "object"],
    }
}

fn connect(args: &Args) -> anyhow::Result<Client> {
    let base = match &args.server {
        Some(s) => s.trim_end_matches('/').to_owned(),
        None => {
            let f = args.data_dir.join("serve.json");
            let text = std::fs::read_to_string(&f).with_context(|| {
                format!(
                    "no --server given and cannot read {} (is `vantage serve` running here?)",
                    f.display()
                )
            })?;
            let v: Value = serde_json::from_str(&text)?;
            v["api"].as_str().ok_or_else(|| anyhow!("{} has no api address", f.display()))?.to_owned()
        }
    };
    let token = match &args.token {
        Some(t) => t.clone(),
        None => {
            let f = args.data_dir.join("admin-token");
            std::fs::read_to_string(&f)
                .with_context(|| format!("no --token given and cannot read {}", f.display()))?
                .trim()
                .to_owned()
        }
    };
    Ok(Client { base, token, http: reqwest::Client::new() })
}

/// Runs a generic action on the collection at `path`.
async fn generic(c: &Client, kind: &str, path: &str, action: &Action, json: bool) -> anyhow::Result<()> {
    use reqwest::Method;
    let out = match action {
        Action::List => {
            let v = c.call(Method::GET, path, None).await?;
            if !json {
                let rows: Vec<Value> = v["items"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|r| shape(kind, r))
                    .collect();
                table(&rows, columns(kind));
                return Ok(());
            }
            v
        }
        Action::Get { id } => c.call(Method::GET, &format!("{path}/{id}"), None).await?,
        Action::Create { fields, file } => {
            c.call(Method::POST, path, Some(body(fields, file.as_ref())?)).await?
        }
        Action::Update { id, fields, file } => {
            c.call(Method::PATCH, &format!("{path}/{id}"), Some(body(fields, file.as_ref())?)).await?
        }
        Action::Delete { id } => {
            c.call(Method::DELETE, &format!("{path}/{id}"), None).await?;
            if !json {
                println!("deleted {kind} {id}");
            }
            return Ok(());
        }
    };
    print(&out, json);
    Ok(())
}

fn print(v: &Value, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    } else {
        record(v);
    }
}

async fn dispatch(args: &Args) -> anyhow::Result<()> {
    use reqwest::Method;
    let c = connect(args)?;
    let json = args.json;
    match &args.command {
        Resource::Regions(p) => generic(&c, "regions", "/v1/regions", &p.action, json).await,
        Resource::Clusters(a) => match &a.action {
            ClusterAction::Common(x) => generic(&c, "clusters", "/v1/clusters", x, json).await,
            ClusterAction::Revisions { id, limit } => {
                let v = c
                    .call(
                        Method::GET,
                        &format!("/v1/clusters/{id}/revisions?limit={}", limit.unwrap_or(50)),
                        None,
                    )
                    .await?;
                listing(&v, json, &["number", "at", "reason", "records"], |r| {
                    let mut r = r.clone();
                    r["records"] = r["records"]["all"].clone();
                    r
                });
                Ok(())
            }
            ClusterAction::Dns { id } => {
                let v = c.call(Method::GET, &format!("/v1/clusters/{id}/dns"), None).await?;
                if json {
                    print(&v, true);
                } else {
                    println!(
                        "{} (TTL {}, revision {})",
                        cell(&v["domain"]),
                        cell(&v["ttl"]),
                        cell(&v["revision"])
                    );
                    let mut lines = v["lines"].as_array().cloned().unwrap_or_default();
                    lines
                        .push(serde_json::json!({"name": "all", "client_networks": [], "records": v["all"]}));
                    table(&lines, &["name", "client_networks", "records"]);
                }
                Ok(())
            }
        },
        Resource::Probers(a) => match &a.action {
            ProberAction::Common(x) => generic(&c, "probers", "/v1/probers", x, json).await,
            ProberAction::Token { name, region, valid_for } => {
                let body = serde_json::json!({"name": name, "region": region, "valid_for_s": valid_for});
                token(&c.call(Method::POST, "/v1/probers/tokens", Some(body)).await?, json);
                Ok(())
            }
            ProberAction::Tokens => {
                let v = c.call(Method::GET, "/v1/probers/tokens", None).await?;
                listing(
                    &v,
                    json,
                    &["id", "prefix", "name", "region", "state", "expires_at", "used_at"],
                    Value::clone,
                );
                Ok(())
            }
            ProberAction::Results { id } => {
                let v = c.call(Method::GET, &format!("/v1/probers/{id}/results"), None).await?;
                listing(&v, json, RESULT_COLUMNS, Value::clone);
                Ok(())
            }
        },
        Resource::Webhooks(p) => generic(&c, "webhooks", "/v1/webhooks", &p.action, json).await,
        Resource::Alerts => {
            let v = c.call(Method::GET, "/v1/alerts", None).await?;
            if json {
                print(&v, true);
            } else {
                let mut rows = v["open"].as_array().cloned().unwrap_or_default();
                rows.extend(v["recent"].as_array().cloned().unwrap_or_default());
                table(&rows, &["id", "state", "kind", "summary", "fired_at", "resolved_at"]);
            }
            Ok(())
        }
        Resource::Groups(p) => {
            generic(&c, "groups", &format!("/v1/clusters/{}/groups", p.cluster), &p.action, json).await
        }
        Resource::Lines(p) => {
            generic(&c, "lines", &format!("/v1/clusters/{}/lines", p.cluster), &p.action, json).await
        }
        Resource::Rules(r) => match &r.action {
            RuleAction::Common(a) => {
                generic(&c, "rules", &format!("/v1/clusters/{}/rules", r.cluster), a, json).await
            }
            RuleAction::Preview => {
                let v = c.call(Method::GET, &format!("/v1/clusters/{}/preview", r.cluster), None).await?;
                if json {
                    print(&v, true);
                } else {
                    let rows: Vec<Value> = v["items"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                        .iter()
                        .map(|i| {
                            serde_json::json!({
                                "rule": i["rule_name"], "node": i["node_name"], "status": i["status"],
                                "conditions": conditions(&i["conditions"]), "outcome": i["outcome_text"],
                            })
                        })
                        .collect();
                    table(&rows, &["rule", "node", "status", "conditions", "outcome"]);
                }
                Ok(())
            }
        },
        Resource::Nodes(n) => match &n.action {
            NodeAction::Common(a) => generic(&c, "nodes", "/v1/nodes", a, json).await,
            NodeAction::Token { id, valid_for } => {
                let body = serde_json::json!({"node": id, "valid_for_s": valid_for});
                token(&c.call(Method::POST, "/v1/nodes/tokens", Some(body)).await?, json);
                Ok(())
            }
            NodeAction::Tokens => {
                let v = c.call(Method::GET, "/v1/nodes/tokens", None).await?;
                listing(
                    &v,
                    json,
                    &["id", "prefix", "name", "node", "state", "expires_at", "used_at"],
                    Value::clone,
                );
                Ok(())
            }
            NodeAction::Results { id } => {
                let v = c.call(Method::GET, &format!("/v1/nodes/{id}/results"), None).await?;
                listing(&v, json, RESULT_COLUMNS, Value::clone);
                Ok(())
            }
            NodeAction::Addresses { id } => {
                print(&c.call(Method::GET, &format!("/v1/nodes/{id}/addresses"), None).await?, json);
                Ok(())
            }
            NodeAction::SetAddresses { id, addresses } => {
                let rows: Vec<Value> = addresses
                    .iter()
                    .map(|a| match a.rsplit_once(':') {
                        Some((ip, level)) if matches!(level, "primary" | "backup1" | "backup2") => {
                            serde_json::json!({"ip": ip, "level": level})
                        }
                        _ => serde_json::json!({"ip": a}),
                    })
                    .collect();
                print(
                    &c.call(Method::PUT, &format!("/v1/nodes/{id}/addresses"), Some(Value::Array(rows)))
                        .await?,
                    json,
                );
                Ok(())
            }
        },
        Resource::Settings { action } => {
            let current = c.call(Method::GET, "/v1/settings/probes", None).await?;
            let out = match action {
                SettingsAction::Get => current,
                SettingsAction::Set { fields } => {
                    let mut next = current;
                    if let (Value::Object(n), Value::Object(changes)) = (&mut next, body(fields, None)?) {
                        n.extend(changes);
                    }
                    c.call(Method::PUT, "/v1/settings/probes", Some(next)).await?
                }
            };
            print(&out, json);
            Ok(())
        }
        Resource::AdminTokens { action } => match action {
            TokenAction::List => generic(&c, "admin-tokens", "/v1/admin-tokens", &Action::List, json).await,
            TokenAction::Create { name } => {
                let v = c
                    .call(Method::POST, "/v1/admin-tokens", Some(serde_json::json!({ "name": name })))
                    .await?;
                if json {
                    print(&v, true);
                } else {
                    println!("{}", cell(&v["token"]));
                    eprintln!(
                        "admin token {:?} created (id {}); it is shown only now",
                        cell(&v["name"]),
                        v["id"]
                    );
                }
                Ok(())
            }
            TokenAction::Revoke { id } => {
                generic(&c, "admin-tokens", "/v1/admin-tokens", &Action::Delete { id: *id }, json).await
            }
        },
        Resource::Audit(a) => {
            let mut q: Vec<(&str, String)> = Vec::new();
            for (k, v) in [
                ("action", &a.action),
                ("actor", &a.actor),
                ("object", &a.object),
                ("since", &a.since),
                ("until", &a.until),
            ] {
                if let Some(v) = v {
                    q.push((k, v.clone()));
                }
            }
            if let Some(l) = a.limit {
                q.push(("limit", l.to_string()));
            }
            let query = q.iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect::<Vec<_>>().join("&");
            let v = c.call(Method::GET, &format!("/v1/audit?{query}"), None).await?;
            if json {
                print(&v, true);
            } else {
                table(v["items"].as_array().map(Vec::as_slice).unwrap_or_default(), columns("audit"));
            }
            Ok(())
        }
    }
}

/// Columns of a result listing; `good` is the window strip of good attempts.
const RESULT_COLUMNS: &[&str] = &[
    "prober_name",
    "node_name",
    "address",
    "port",
    "method",
    "loss_pct",
    "rtt_ms",
    "error",
    "checked",
    "good",
];

/// Prints `{"items": [...]}` as a table of `columns` (rows shaped by `shape`), or as JSON.
fn listing(v: &Value, json: bool, columns: &[&str], shape: impl Fn(&Value) -> Value) {
    if json {
        print(v, true);
        return;
    }
    let rows: Vec<Value> = v["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let mut r = shape(r);
            if !r["window"].is_null() {
                r["good"] = r["window"]["good_strip"].clone();
            }
            r
        })
        .collect();
    table(&rows, columns);
}

/// Prints a new enrollment token: the token alone on standard output, the rest on standard error.
fn token(v: &Value, json: bool) {
    if json {
        print(v, true);
        return;
    }
    println!("{}", cell(&v["token"]));
    eprintln!("expires {}; shown only now", cell(&v["expires_at"]));
    eprintln!("CA fingerprint: {}", cell(&v["ca_sha256"]));
    eprintln!("start command: {}", cell(&v["command"]));
}

/// A preview's conditions in one cell: `cpu 95.2 > 90 (held 30/60 s)`, `cpu No data`.
fn conditions(list: &Value) -> String {
    list.as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let metric = cell(&c["metric"]);
            match c["value"].as_f64() {
                None => format!("{metric} No data"),
                Some(v) => format!(
                    "{metric} {v:.1} {} {} (held {}/{} s)",
                    cell(&c["comparison"]),
                    cell(&c["threshold"]),
                    cell(&c["held_s"]),
                    cell(&c["required_s"])
                ),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match rt.block_on(dispatch(&args)) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("error: {e:#}");
            Ok(ExitCode::FAILURE)
        }
    }
}
