//! `vantage ctl`: the admin API from the shell. Every object can be listed, shown, created,
//! changed and deleted; tables by default, `--json` for scripts; the server's message and a
//! non-zero exit on errors.

mod args;
mod client;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use vantage_core::settings::ProbeSettings;
use vantage_server::views::{
    Addresses, AdminTokenView, Alerts, AuditView, ClusterView, DnsView, EnrollTokenView, GroupView, Items,
    LineView, NewAdminToken, NewEnrollToken, NodeView, Preview, ProberView, RegionView, ResultView,
    Revisions, RuleView, WebhookView,
};

pub(crate) use args::Args;
use args::{
    Action, ClusterAction, NodeAction, ProberAction, Resource, RuleAction, SettingsAction, TokenAction,
};
use client::Client;
use table::{Row, record, table};

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

/// Prints a value as JSON, or as FIELD  VALUE lines.
fn print<T: Serialize>(v: &T, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    } else {
        record(v);
    }
}

/// Prints a list as JSON, or as a table.
fn listing<R: Row + Serialize>(items: Items<R>, json: bool) {
    if json {
        print(&json!({ "items": items.items }), true);
    } else {
        table(&items.items);
    }
}

/// Runs a generic action on the collection at `path`, whose objects read as `V`.
async fn generic<V>(c: &Client, kind: &str, path: &str, action: &Action, json: bool) -> anyhow::Result<()>
where
    V: Row + Serialize + DeserializeOwned,
{
    let out: V = match action {
        Action::List => {
            listing(c.get::<Items<V>>(path).await?, json);
            return Ok(());
        }
        Action::Get { id } => c.get(&format!("{path}/{id}")).await?,
        Action::Create { fields, file } => {
            c.call(Method::POST, path, Some(&body(fields, file.as_ref())?)).await?
        }
        Action::Update { id, fields, file } => {
            c.call(Method::PATCH, &format!("{path}/{id}"), Some(&body(fields, file.as_ref())?)).await?
        }
        Action::Delete { id } => {
            c.delete(&format!("{path}/{id}")).await?;
            if !json {
                println!("deleted {kind} {id}");
            }
            return Ok(());
        }
    };
    print(&out, json);
    Ok(())
}

/// Prints a new enrollment token: the token alone on standard output, the rest on standard error.
fn token(t: &NewEnrollToken, json: bool) {
    if json {
        print(t, true);
        return;
    }
    println!("{}", t.token);
    eprintln!("expires {}; shown only now", t.expires_at);
    eprintln!("CA fingerprint: {}", t.ca_sha256);
    eprintln!("start command: {}", t.command);
}

async fn dispatch(args: &Args) -> anyhow::Result<()> {
    let c = Client::connect(args)?;
    let json = args.json;
    match &args.command {
        Resource::Regions(p) => generic::<RegionView>(&c, "regions", "/v1/regions", &p.action, json).await,
        Resource::Clusters(a) => match &a.action {
            ClusterAction::Common(x) => generic::<ClusterView>(&c, "clusters", "/v1/clusters", x, json).await,
            ClusterAction::Revisions { id, limit } => {
                let path = format!("/v1/clusters/{id}/revisions?limit={}", limit.unwrap_or(50));
                let v: Revisions = c.get(&path).await?;
                if json {
                    print(&v, true)
                } else {
                    table(&v.items)
                }
                Ok(())
            }
            ClusterAction::Dns { id } => {
                let v: DnsView = c.get(&format!("/v1/clusters/{id}/dns")).await?;
                if json {
                    print(&v, true);
                } else {
                    println!("{} (TTL {}, revision {})", v.domain, v.ttl, table::cell(&v.revision));
                    let mut lines = v.lines.clone();
                    lines.push(vantage_server::views::DnsLine {
                        id: vantage_core::ids::LineId(-1),
                        name: "all".into(),
                        client_networks: Vec::new(),
                        records: v.all.clone(),
                    });
                    table(&lines);
                }
                Ok(())
            }
        },
        Resource::Probers(a) => match &a.action {
            ProberAction::Common(x) => generic::<ProberView>(&c, "probers", "/v1/probers", x, json).await,
            ProberAction::Token { name, region, valid_for } => {
                let body = json!({"name": name, "region": region, "valid_for_s": valid_for});
                token(&c.call(Method::POST, "/v1/probers/tokens", Some(&body)).await?, json);
                Ok(())
            }
            ProberAction::Tokens => {
                listing(c.get::<Items<EnrollTokenView>>("/v1/probers/tokens").await?, json);
                Ok(())
            }
            ProberAction::Results { id } => {
                listing(c.get::<Items<ResultView>>(&format!("/v1/probers/{id}/results")).await?, json);
                Ok(())
            }
        },
        Resource::Webhooks(p) => {
            generic::<WebhookView>(&c, "webhooks", "/v1/webhooks", &p.action, json).await
        }
        Resource::Alerts => {
            let v: Alerts = c.get("/v1/alerts").await?;
            if json {
                print(&v, true);
            } else {
                let rows: Vec<_> = v.open.iter().chain(&v.recent).cloned().collect();
                table(&rows);
            }
            Ok(())
        }
        Resource::Groups(p) => {
            let path = format!("/v1/clusters/{}/groups", p.cluster);
            generic::<GroupView>(&c, "groups", &path, &p.action, json).await
        }
        Resource::Lines(p) => {
            let path = format!("/v1/clusters/{}/lines", p.cluster);
            generic::<LineView>(&c, "lines", &path, &p.action, json).await
        }
        Resource::Rules(r) => match &r.action {
            RuleAction::Common(a) => {
                let path = format!("/v1/clusters/{}/rules", r.cluster);
                generic::<RuleView>(&c, "rules", &path, a, json).await
            }
            RuleAction::Preview => {
                let v: Preview = c.get(&format!("/v1/clusters/{}/preview", r.cluster)).await?;
                if json {
                    print(&v, true)
                } else {
                    table(&v.items)
                }
                Ok(())
            }
        },
        Resource::Nodes(n) => match &n.action {
            NodeAction::Common(a) => generic::<NodeView>(&c, "nodes", "/v1/nodes", a, json).await,
            NodeAction::Token { id, valid_for } => {
                let body = json!({"node": id, "valid_for_s": valid_for});
                token(&c.call(Method::POST, "/v1/nodes/tokens", Some(&body)).await?, json);
                Ok(())
            }
            NodeAction::Tokens => {
                listing(c.get::<Items<EnrollTokenView>>("/v1/nodes/tokens").await?, json);
                Ok(())
            }
            NodeAction::Results { id } => {
                listing(c.get::<Items<ResultView>>(&format!("/v1/nodes/{id}/results")).await?, json);
                Ok(())
            }
            NodeAction::Addresses { id } => {
                print(&c.get::<Addresses>(&format!("/v1/nodes/{id}/addresses")).await?, json);
                Ok(())
            }
            NodeAction::SetAddresses { id, addresses } => {
                let rows: Vec<Value> = addresses
                    .iter()
                    .map(|a| match a.rsplit_once(':') {
                        Some((ip, level)) if matches!(level, "primary" | "backup1" | "backup2") => {
                            json!({"ip": ip, "level": level})
                        }
                        _ => json!({"ip": a}),
                    })
                    .collect();
                let path = format!("/v1/nodes/{id}/addresses");
                let out: Addresses = c.call(Method::PUT, &path, Some(&Value::Array(rows))).await?;
                print(&out, json);
                Ok(())
            }
        },
        Resource::Settings { action } => {
            let current: ProbeSettings = c.get("/v1/settings/probes").await?;
            let out = match action {
                SettingsAction::Get => current,
                SettingsAction::Set { fields } => {
                    let mut next = serde_json::to_value(current)?;
                    if let (Value::Object(n), Value::Object(changes)) = (&mut next, body(fields, None)?) {
                        n.extend(changes);
                    }
                    c.call(Method::PUT, "/v1/settings/probes", Some(&next)).await?
                }
            };
            print(&out, json);
            Ok(())
        }
        Resource::AdminTokens { action } => match action {
            TokenAction::List => {
                generic::<AdminTokenView>(&c, "admin-tokens", "/v1/admin-tokens", &Action::List, json).await
            }
            TokenAction::Create { name } => {
                let v: NewAdminToken =
                    c.call(Method::POST, "/v1/admin-tokens", Some(&json!({ "name": name }))).await?;
                if json {
                    print(&v, true);
                } else {
                    println!("{}", v.token);
                    eprintln!("admin token {:?} created (id {}); it is shown only now", v.name, v.id);
                }
                Ok(())
            }
            TokenAction::Revoke { id } => {
                let delete = Action::Delete { id: *id };
                generic::<AdminTokenView>(&c, "admin-tokens", "/v1/admin-tokens", &delete, json).await
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
            listing(c.get::<Items<AuditView>>(&format!("/v1/audit?{query}")).await?, json);
            Ok(())
        }
    }
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
