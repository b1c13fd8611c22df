//! `vantage ctl`: the admin API from the shell. Every object can be listed, shown, created,
//! changed and deleted; tables by default, `--json` for scripts; the server's message and a
//! non-zero exit on errors.

/// `println!` and `print!` for everything below: standard output that a reader going away
/// (`ctl audit | head -1`) ends quietly, where std's panic when writing to a closed pipe and
/// exit 101. Shadowing std's keeps every print of `ctl` on the one path.
macro_rules! println {
    () => { $crate::ctl::out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::ctl::out(format_args!("{}\n", format_args!($($arg)*))) };
}
macro_rules! print {
    ($($arg:tt)*) => { $crate::ctl::out(format_args!($($arg)*)) };
}

mod args;
mod client;
mod events;
mod fleet;
mod names;
mod revisions;
mod status;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use vantage_control::availability::Report;
use vantage_control::mirrors::Tenant;
use vantage_core::check::{Check, CheckInput, Method as CheckMethod};
use vantage_core::detection::DetectionSettings;
use vantage_core::mirror::{MirrorInput, MirrorSettings};
use vantage_core::monitor::MonitorInput;
use vantage_core::settings::ProbeSettings;
use vantage_server::views::{
    Addresses, AdminTokenView, Alerts, AuditView, BlockRequest, CheckCreate, CheckRunRequest, CheckRunView,
    CheckView, ClientView, ClusterView, DnsView, DoorChoice, DraftPreview, EnrollTokenView, GroupView, Items,
    LineView, MaintenanceView, MirrorList, MirrorView, MonitorHistory, MonitorVerdictView, MonitorView,
    NewAdminToken, NewEnrollToken, NodeView, Preview, ProberView, RegionView, ResultView, Revisions,
    RuleView, SilenceView, StatusPageView, TenantView, WebhookView,
};

pub(crate) use args::Args;
use args::{
    Action, CheckAction, CheckFlags, ClusterAction, Command, DoorAction, FleetCommand, GroupAction,
    MirrorAction, MirrorFlags, MonitorAction, MonitorFlags, NodeAction, ProberAction, Resource, RuleAction,
    SettingsAction, SettingsObjectAction, TenantAction, TokenAction,
};
use client::{Client, Refusal};
use names::{Kind, Names};
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

/// The text of a file, or of standard input for `-`.
fn read(f: &PathBuf) -> anyhow::Result<String> {
    if f.as_os_str() == "-" {
        Ok(std::io::read_to_string(std::io::stdin())?)
    } else {
        std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))
    }
}

/// A JSON object from FIELD=VALUE pairs or a file.
fn body(fields: &[String], file: Option<&PathBuf>) -> anyhow::Result<Value> {
    if let Some(f) = file {
        return serde_json::from_str(&read(f)?).with_context(|| format!("{} is not JSON", f.display()));
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

/// `ctl report`: every subject's availability as a table, or one subject's with its incidents.
async fn report(
    c: &Client,
    subject: Option<&str>,
    kind: Option<&str>,
    target: Option<f64>,
    json: bool,
) -> anyhow::Result<()> {
    let mut query: Vec<String> = Vec::new();
    if let Some(k) = kind {
        query.push(format!("kind={k}"));
    }
    if let Some(t) = target {
        query.push(format!("target={t}"));
    }
    let q = if query.is_empty() { String::new() } else { format!("?{}", query.join("&")) };
    let Some(s) = subject else {
        listing(c.get::<Items<Report>>(&format!("/v1/availability{q}")).await?, json);
        return Ok(());
    };
    // An address's subject has a `/`: one path segment all the same.
    let r: Report = c.get(&format!("/v1/availability/{}{q}", s.replace('/', "%2F"))).await?;
    if json {
        print(&r, true);
        return Ok(());
    }
    table(std::slice::from_ref(&r));
    if r.incidents.is_empty() {
        println!("\nno incident in 30 days");
    } else {
        println!("\nincidents (30 days), newest first:");
        table(&r.incidents);
    }
    Ok(())
}

/// Prints a list as JSON, or as a table.
fn listing<R: Row + Serialize>(items: Items<R>, json: bool) {
    if json {
        print(&json!({ "items": items.items }), true);
    } else {
        table(&items.items);
    }
}

/// Prints a list of results with window strips, and under a table what the strips say.
fn with_strips<R: Row + Serialize>(items: Items<R>, json: bool) {
    let legend = !json && !items.items.is_empty();
    listing(items, json);
    if legend {
        println!("{}", table::STRIP_LEGEND);
    }
}

/// Runs a generic action on the `kind`'s collection at `path`, whose objects read as `V`;
/// an object and the objects its fields refer to may be given by name.
async fn generic<V>(
    names: &mut Names<'_>,
    kind: Kind,
    path: &str,
    action: &Action,
    json: bool,
) -> anyhow::Result<()>
where
    V: Row + Serialize + DeserializeOwned,
{
    let c = names.client();
    let what = kind.noun().to_uppercase();
    let out: V = match action {
        Action::List => {
            listing(c.get::<Items<V>>(path).await?, json);
            return Ok(());
        }
        Action::Get { id } => c.get(&format!("{path}/{}", names.id(kind, &what, id).await?)).await?,
        Action::Create { fields, file } => {
            let mut b = body(fields, file.as_ref())?;
            names.fields(kind, None, &mut b).await?;
            c.call(Method::POST, path, Some(&b)).await?
        }
        Action::Update { id, fields, file } => {
            let id = names.id(kind, &what, id).await?;
            let mut b = body(fields, file.as_ref())?;
            names.fields(kind, Some(id), &mut b).await?;
            c.call(Method::PATCH, &format!("{path}/{id}"), Some(&b)).await?
        }
        Action::Delete { id, force } => {
            let id = names.id(kind, &what, id).await?;
            let force = if *force { "?force=true" } else { "" };
            c.delete(&format!("{path}/{id}{force}")).await?;
            if !json {
                println!("deleted {} {id}", kind.noun());
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

/// Shows the settings at `path`, or changes the `fields` given: the current settings with those
/// fields replaced are put back whole, since the route replaces every field.
/// The fields a settings action changes (`None`: it only shows them).
fn fields_of(action: &Option<SettingsObjectAction>) -> Option<&[String]> {
    match action {
        None | Some(SettingsObjectAction::Get) => None,
        Some(SettingsObjectAction::Set { fields }) => Some(fields.as_slice()),
    }
}

async fn settings<T>(c: &Client, path: &str, fields: Option<&[String]>, json: bool) -> anyhow::Result<()>
where
    T: Serialize + DeserializeOwned,
{
    let current: T = c.get(path).await?;
    let out = match fields {
        None => current,
        Some(fields) => {
            let mut next = serde_json::to_value(current)?;
            if let (Value::Object(n), Value::Object(changes)) = (&mut next, body(fields, None)?) {
                n.extend(changes);
            }
            c.call(Method::PUT, path, Some(&next)).await?
        }
    };
    print(&out, json);
    Ok(())
}

/// A check's attributes from its flags; the rest take their defaults on the server.
fn check_input(f: &CheckFlags) -> CheckInput {
    CheckInput {
        method: f.method,
        path: f.path.clone(),
        host: f.host.clone(),
        interval_s: f.interval_s,
        timeout_ms: f.timeout_ms,
        window: f.window,
        threshold: f.threshold,
        initial: f.initial,
        expected_response: f.expected_response,
        block_pattern: f.block_pattern.clone(),
        block_statuses: f.block_statuses.clone(),
        ..CheckInput::default()
    }
}

/// A mirror record from flags. An existing mirror's manual block and note are kept: flags
/// describe the record, while blocks are lifted only on purpose, with `mirrors unblock`.
/// Fields without a flag take their defaults, including fields the record gains later.
#[allow(clippy::needless_update)]
async fn mirror_record(c: &Client, host: &str, f: &MirrorFlags) -> anyhow::Result<MirrorInput> {
    let path = format!("/v1/mirrors/{}", urlencode(host));
    let existing = match c.get::<MirrorView>(&path).await {
        Ok(m) => Some(m),
        Err(e) if e.downcast_ref::<Refusal>().is_some_and(|r| r.status == StatusCode::NOT_FOUND) => None,
        Err(e) => return Err(e),
    };
    let defaults = MirrorInput::default();
    Ok(MirrorInput {
        host: host.to_owned(),
        tenants: f.tenants.clone(),
        weight: f.weight.unwrap_or(defaults.weight),
        manual_block: existing.as_ref().is_some_and(|m| m.manual_block),
        manual_note: existing.map(|m| m.manual_note).unwrap_or_default(),
        check: f.check.clone(),
        address: f.address,
        base_url: f.base_url.clone(),
        ..defaults
    })
}

/// Prints a mirror: its fields, then its regions and each prober's opinion as tables.
fn mirror(m: &MirrorView, json: bool) -> anyhow::Result<()> {
    if json {
        print(m, true);
        return Ok(());
    }
    let mut fields = serde_json::to_value(m)?;
    if let Value::Object(f) = &mut fields {
        f.remove("regions");
        f.remove("probers");
    }
    record(&fields);
    println!();
    if m.regions.is_empty() {
        println!("no region has reported");
    } else {
        let regions: Vec<_> = m.regions.iter().map(|(code, o)| (code.clone(), *o)).collect();
        table(&regions);
    }
    println!();
    if m.probers.is_empty() {
        println!("no prober has reported");
    } else {
        table(&m.probers);
        println!("{}", table::STRIP_LEGEND);
    }
    Ok(())
}

async fn mirrors(c: &Client, action: &MirrorAction, json: bool) -> anyhow::Result<()> {
    let one = |host: &str| format!("/v1/mirrors/{}", urlencode(host));
    match action {
        MirrorAction::List => {
            let v: MirrorList = c.get("/v1/mirrors").await?;
            if json {
                print(&v, true);
            } else {
                table(&v.mirrors);
                if let Some(e) = &v.reload.error {
                    eprintln!("the registry's last reload failed, the previous one keeps serving: {e}");
                }
            }
            Ok(())
        }
        MirrorAction::Get { host } => mirror(&c.get(&one(host)).await?, json),
        MirrorAction::Put { host, file: Some(f), .. } => {
            mirror(&c.put_document(&one(host), read(f)?).await?, json)
        }
        MirrorAction::Put { host, file: None, record } => {
            let body = serde_json::to_value(mirror_record(c, host, record).await?)?;
            mirror(&c.call(Method::PUT, &one(host), Some(&body)).await?, json)
        }
        MirrorAction::Delete { host } => {
            c.delete(&one(host)).await?;
            if !json {
                println!("deleted mirror {host}");
            }
            Ok(())
        }
        MirrorAction::Check { regions } => {
            let req = CheckRunRequest { regions: (!regions.is_empty()).then(|| regions.clone()) };
            let run: CheckRunView =
                match c.call(Method::POST, "/v1/mirrors/check", Some(&serde_json::to_value(req)?)).await {
                    Ok(run) => run,
                    Err(e) => {
                        let wait = e.downcast_ref::<Refusal>().and_then(|r| r.retry_after_s);
                        return Err(match wait {
                            Some(s) => e.context(format!("no check run started; retry in {s} s")),
                            None => e,
                        });
                    }
                };
            if json {
                print(&run, true);
            } else {
                let regions =
                    run.regions.as_ref().map_or_else(|| "every region".to_owned(), |r| r.join(", "));
                // Probers learn of the run at their next work request.
                println!(
                    "check run started at {} in {regions}: {} probers to check {} mirrors",
                    run.started_at, run.probers, run.mirrors
                );
            }
            Ok(())
        }
        MirrorAction::Block { host, note } => {
            let body = serde_json::to_value(BlockRequest { note: note.clone() })?;
            mirror(&c.call(Method::POST, &format!("{}/force-block", one(host)), Some(&body)).await?, json)
        }
        MirrorAction::Unblock { host, note } => {
            let body = serde_json::to_value(BlockRequest { note: note.clone().unwrap_or_default() })?;
            mirror(&c.call(Method::POST, &format!("{}/unblock", one(host)), Some(&body)).await?, json)
        }
    }
}

/// A monitor from its name and flags; the rest take their defaults. A check interval makes
/// the default `hls` check probe at that pace; its refusal names the field as the API would.
fn monitor_input(name: &str, f: &MonitorFlags) -> anyhow::Result<MonitorInput> {
    let defaults = MonitorInput::default();
    let (failure_quorum, quorum_window) =
        f.quorum.unwrap_or((defaults.failure_quorum, defaults.quorum_window));
    let check = f
        .check_interval_s
        .map(|s| {
            Check::parse(CheckInput {
                method: Some(CheckMethod::Hls),
                interval_s: Some(s),
                ..CheckInput::default()
            })
            .map_err(|e| e.within("check"))
        })
        .transpose()?;
    Ok(MonitorInput {
        name: name.to_owned(),
        check,
        check_name: f.check.clone(),
        regions: f.regions.clone(),
        failure_quorum,
        quorum_window,
        max_segment_age_s: f.max_segment_age_s.unwrap_or(defaults.max_segment_age_s),
        steer_by_client_region: f.steer_by_client_region,
        ..defaults
    })
}

/// A monitor file: YAML, which also reads JSON.
fn monitor_file(f: &PathBuf) -> anyhow::Result<Value> {
    serde_norway::from_str(&read(f)?).with_context(|| format!("{} is neither JSON nor YAML", f.display()))
}

/// Prints a monitor: its fields and verdict, then its regions as a table.
fn monitor(m: &MonitorView, json: bool) -> anyhow::Result<()> {
    if json {
        print(m, true);
        return Ok(());
    }
    let mut fields = serde_json::to_value(&m.monitor)?;
    if let Value::Object(f) = &mut fields {
        f.remove("regions");
        f.insert("id".into(), json!(m.id));
        f.insert("probed_with".into(), json!(m.probed_with.source_phrase()));
        f.insert("verdict".into(), json!(m.verdict.map_or_else(|| "unknown".to_owned(), |v| v.to_string())));
        f.insert("since".into(), json!(m.since));
        f.insert("created_at".into(), json!(m.created_at));
        f.insert("updated_at".into(), json!(m.updated_at));
    }
    record(&fields);
    println!();
    table(&m.monitor.regions);
    Ok(())
}

/// Prints a verdict: global and the weights behind it, each region's tuple, the steering order.
fn verdict(v: &MonitorVerdictView, json: bool) {
    if json {
        print(v, true);
        return;
    }
    let global = v.global.map_or_else(|| "unknown".to_owned(), |g| g.to_string());
    println!("{} (id {}): {global} since {}", v.name, v.id, table::cell(&v.since));
    let pct = |share: f64| table::decimal(Some(share * 100.0));
    println!("weight down {} %, stale {} %", pct(v.down_weight), pct(v.stale_weight));
    println!("steering {}", v.pathway_priority.join(" > "));
    for (region, order) in &v.pathway_priority_by_region {
        println!("  players in {region}: {}", order.join(" > "));
    }
    println!();
    table(&v.regions);
}

/// Prints a history: one table per region, then the verdict changes.
fn history(h: &MonitorHistory, json: bool) {
    if json {
        print(h, true);
        return;
    }
    println!("range {}, {} s buckets", h.range, h.bucket_s);
    for r in &h.regions {
        println!();
        if r.points.is_empty() {
            println!("{}: no probes", r.region);
        } else {
            println!("{}:", r.region);
            table(&r.points);
        }
    }
    println!();
    if h.verdicts.is_empty() {
        println!("no verdict change");
    } else {
        table(&h.verdicts);
    }
}

async fn monitors(names: &mut Names<'_>, action: &MonitorAction, json: bool) -> anyhow::Result<()> {
    let c = names.client();
    match action {
        MonitorAction::List => {
            listing(c.get::<Items<MonitorView>>("/v1/monitors").await?, json);
            Ok(())
        }
        MonitorAction::Get { id: r } => monitor(
            &c.get(&format!("/v1/monitors/{}", names.id(Kind::Monitor, "MONITOR", r).await?)).await?,
            json,
        ),
        MonitorAction::Create { name, file, monitor: flags } => {
            let body = match (file, name) {
                (Some(f), _) => monitor_file(f)?,
                (None, Some(name)) => serde_json::to_value(monitor_input(name, flags)?)?,
                (None, None) => return Err(anyhow!("a monitor needs a NAME or --file")),
            };
            monitor(&c.call(Method::POST, "/v1/monitors", Some(&body)).await?, json)
        }
        MonitorAction::Delete { id: r } => {
            let id = names.id(Kind::Monitor, "MONITOR", r).await?;
            c.delete(&format!("/v1/monitors/{id}")).await?;
            if !json {
                println!("deleted monitor {id}");
            }
            Ok(())
        }
        MonitorAction::Verdict { id: r } => {
            verdict(
                &c.get(&format!("/v1/monitors/{}/verdict", names.id(Kind::Monitor, "MONITOR", r).await?))
                    .await?,
                json,
            );
            Ok(())
        }
        MonitorAction::History { id: r, range } => {
            let id = names.id(Kind::Monitor, "MONITOR", r).await?;
            let path = format!("/v1/monitors/{id}/history{}", query(&[("range", range.clone())]));
            history(&c.get(&path).await?, json);
            Ok(())
        }
    }
}

async fn dispatch(args: &Args) -> anyhow::Result<ExitCode> {
    let c = Client::connect(args)?;
    match &args.command {
        Command::Fleet(FleetCommand::Export { output }) => {
            fleet::export(&c, output.as_deref(), args.json).await.map(|()| ExitCode::SUCCESS)
        }
        Command::Fleet(FleetCommand::Plan(files)) => fleet::plan(&c, files, args.json).await,
        Command::Fleet(FleetCommand::Apply { files, expect }) => {
            fleet::apply(&c, files, expect.as_deref(), args.json).await
        }
        Command::Resource(r) => resources(&c, r, args.json).await.map(|()| ExitCode::SUCCESS),
    }
}

async fn resources(c: &Client, command: &Resource, json: bool) -> anyhow::Result<()> {
    let names = &mut Names::new(c);
    match command {
        Resource::Regions(p) => {
            generic::<RegionView>(names, Kind::Region, "/v1/regions", &p.action, json).await
        }
        Resource::Clusters(a) => match &a.action {
            ClusterAction::Common(x) => {
                generic::<ClusterView>(names, Kind::Cluster, "/v1/clusters", x, json).await
            }
            ClusterAction::Revisions { id, limit } => {
                let cluster = names.id(Kind::Cluster, "CLUSTER", id).await?;
                let path = format!("/v1/clusters/{cluster}/revisions?limit={}", limit.unwrap_or(50));
                let v: Revisions = c.get(&path).await?;
                if json {
                    print(&v, true);
                    return Ok(());
                }
                // Named as the API names them (the default line included); a line deleted since
                // by its id.
                let line_name = |id: vantage_core::ids::LineId| {
                    v.lines
                        .get(&id.0.to_string())
                        .map_or_else(|| format!("line {}", id.0), |l| l.name.clone())
                };
                let rows: Vec<_> = v.items.iter().flat_map(|r| table::revision_lines(r, line_name)).collect();
                table(&rows);
                Ok(())
            }
            ClusterAction::Diff { id, from, to } => {
                let id = names.id(Kind::Cluster, "CLUSTER", id).await?;
                revisions::diff(c, id, *from, *to, json).await
            }
            ClusterAction::Dns { id } => {
                let id = names.id(Kind::Cluster, "CLUSTER", id).await?;
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
                        places: Default::default(),
                        records: v.all.clone(),
                        since: None,
                        held: None,
                    });
                    table(&lines);
                }
                Ok(())
            }
        },
        Resource::Probers(a) => match &a.action {
            ProberAction::Common(x) => {
                generic::<ProberView>(names, Kind::Prober, "/v1/probers", x, json).await
            }
            ProberAction::Token { name, region, valid_for } => {
                let region = names.id(Kind::Region, "--region", region).await?;
                let body = json!({"name": name, "region": region, "valid_for_s": valid_for});
                token(&c.call(Method::POST, "/v1/probers/tokens", Some(&body)).await?, json);
                Ok(())
            }
            ProberAction::Tokens => {
                listing(c.get::<Items<EnrollTokenView>>("/v1/probers/tokens").await?, json);
                Ok(())
            }
            ProberAction::Results { id } => {
                let id = names.id(Kind::Prober, "PROBER", id).await?;
                with_strips(c.get::<Items<ResultView>>(&format!("/v1/probers/{id}/results")).await?, json);
                Ok(())
            }
        },
        Resource::Webhooks(p) => {
            generic::<WebhookView>(names, Kind::Webhook, "/v1/webhooks", &p.action, json).await
        }
        Resource::Silences(p) => {
            generic::<SilenceView>(names, Kind::Silence, "/v1/silences", &p.action, json).await
        }
        Resource::StatusPages(p) => {
            generic::<StatusPageView>(names, Kind::StatusPage, "/v1/status-pages", &p.action, json).await
        }
        Resource::Maintenance(p) => {
            generic::<MaintenanceView>(names, Kind::Maintenance, "/v1/maintenance", &p.action, json).await
        }
        Resource::Report { subject, kind, target } => {
            report(c, subject.as_deref(), kind.as_deref(), *target, json).await
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
            let cluster = names.id(Kind::Cluster, "--cluster", &p.cluster).await?;
            let path = format!("/v1/clusters/{cluster}/groups");
            // A drain says whether the operator confirmed it; putting back takes no options.
            let (id, verb, body) = match &p.action {
                GroupAction::Common(a) => {
                    return generic::<GroupView>(names, Kind::Group(cluster), &path, a, json).await;
                }
                GroupAction::Drain { id, confirm } => (id, "drain", Some(json!({"confirm": confirm}))),
                GroupAction::Undrain { id } => (id, "undrain", None),
            };
            let id = names.id(Kind::Group(cluster), "GROUP", id).await?;
            print(
                &c.call::<GroupView>(Method::POST, &format!("{path}/{id}/{verb}"), body.as_ref()).await?,
                json,
            );
            Ok(())
        }
        Resource::Lines(p) => {
            let cluster = names.id(Kind::Cluster, "--cluster", &p.cluster).await?;
            let path = format!("/v1/clusters/{cluster}/lines");
            generic::<LineView>(names, Kind::Line(cluster), &path, &p.action, json).await
        }
        Resource::Rules(r) => match &r.action {
            RuleAction::Common(a) => {
                let cluster = names.id(Kind::Cluster, "--cluster", &r.cluster).await?;
                let path = format!("/v1/clusters/{cluster}/rules");
                generic::<RuleView>(names, Kind::Rule(cluster), &path, a, json).await
            }
            RuleAction::Preview { fields, file, rule }
                if fields.is_empty() && file.is_none() && rule.is_none() =>
            {
                let cluster = names.id(Kind::Cluster, "--cluster", &r.cluster).await?;
                let v: Preview = c.get(&format!("/v1/clusters/{cluster}/preview")).await?;
                if json {
                    print(&v, true)
                } else {
                    table(&v.items);
                    println!();
                    table(&v.lines);
                }
                Ok(())
            }
            RuleAction::Preview { fields, file, rule } => {
                let cluster = names.id(Kind::Cluster, "--cluster", &r.cluster).await?;
                let kind = Kind::Rule(cluster);
                let mut patch = body(fields, file.as_ref())?;
                let (path, draft) = match rule {
                    None => {
                        names.fields(kind, None, &mut patch).await?;
                        (format!("/v1/clusters/{cluster}/preview"), patch)
                    }
                    // The rule as it is, changed by the patch as an update would change it.
                    Some(rule) => {
                        let id = names.id(kind, "--rule", rule).await?;
                        names.fields(kind, Some(id), &mut patch).await?;
                        let current: RuleView = c.get(&format!("/v1/clusters/{cluster}/rules/{id}")).await?;
                        let mut draft = serde_json::to_value(&current.rule)?;
                        vantage_core::patch::merge(&mut draft, patch);
                        (format!("/v1/clusters/{cluster}/rules/{id}/preview"), draft)
                    }
                };
                let v: DraftPreview = c.call(Method::POST, &path, Some(&draft)).await?;
                if json {
                    print(&v, true)
                } else {
                    table(&v.items);
                }
                Ok(())
            }
        },
        Resource::Nodes(n) => match &n.action {
            NodeAction::Common(a) => generic::<NodeView>(names, Kind::Node, "/v1/nodes", a, json).await,
            NodeAction::Token { id, valid_for } => {
                let id = names.id(Kind::Node, "NODE", id).await?;
                let body = json!({"node": id, "valid_for_s": valid_for});
                token(&c.call(Method::POST, "/v1/nodes/tokens", Some(&body)).await?, json);
                Ok(())
            }
            NodeAction::Drain { id, confirm } => {
                let id = names.id(Kind::Node, "NODE", id).await?;
                let body = json!({"confirm": confirm});
                print(
                    &c.call::<NodeView>(Method::POST, &format!("/v1/nodes/{id}/drain"), Some(&body)).await?,
                    json,
                );
                Ok(())
            }
            NodeAction::Undrain { id } => {
                let id = names.id(Kind::Node, "NODE", id).await?;
                print(
                    &c.call::<NodeView>(Method::POST, &format!("/v1/nodes/{id}/undrain"), None).await?,
                    json,
                );
                Ok(())
            }
            NodeAction::Tokens => {
                listing(c.get::<Items<EnrollTokenView>>("/v1/nodes/tokens").await?, json);
                Ok(())
            }
            NodeAction::Results { id } => {
                let id = names.id(Kind::Node, "NODE", id).await?;
                with_strips(c.get::<Items<ResultView>>(&format!("/v1/nodes/{id}/results")).await?, json);
                Ok(())
            }
            NodeAction::Addresses { id } => {
                let id = names.id(Kind::Node, "NODE", id).await?;
                // The node's view: each address with what the probers and the last pass say.
                let node = c.get::<NodeView>(&format!("/v1/nodes/{id}")).await?;
                listing(Items { items: node.addresses }, json);
                Ok(())
            }
            NodeAction::SetAddresses { id, addresses } => {
                let id = names.id(Kind::Node, "NODE", id).await?;
                let mut rows: Vec<Value> = Vec::with_capacity(addresses.len());
                for a in addresses {
                    // `IP@LINE`: a target address of that line (by name or id).
                    let (a, line) = a.split_once('@').map_or((a.as_str(), None), |(a, l)| (a, Some(l)));
                    let (a, trusted) = a.strip_suffix(":trusted").map_or((a, false), |a| (a, true));
                    let mut row = match a.rsplit_once(':') {
                        Some((ip, level)) if matches!(level, "primary" | "backup1" | "backup2") => {
                            json!({"ip": ip, "level": level})
                        }
                        _ => json!({"ip": a}),
                    };
                    if trusted {
                        row["trusted"] = json!(true);
                    }
                    if let Some(line) = line {
                        let node: NodeView = c.get(&format!("/v1/nodes/{id}")).await?;
                        let line = names.id(Kind::Line(node.cluster.0), "LINE", &line.parse()?).await?;
                        row["line"] = json!(line);
                    }
                    rows.push(row);
                }
                let path = format!("/v1/nodes/{id}/addresses");
                let out: Addresses = c.call(Method::PUT, &path, Some(&Value::Array(rows))).await?;
                for w in &out.warnings {
                    eprintln!("warning: {w}");
                }
                print(&out, json);
                Ok(())
            }
            NodeAction::AddSourceAddress { id, level } => {
                let id = names.id(Kind::Node, "NODE", id).await?;
                let body = match level {
                    Some(l) => json!({"level": l}),
                    None => json!({}),
                };
                let path = format!("/v1/nodes/{id}/addresses/source");
                let out: Addresses = c.call(Method::POST, &path, Some(&body)).await?;
                for w in &out.warnings {
                    eprintln!("warning: {w}");
                }
                print(&out, json);
                Ok(())
            }
        },
        Resource::Settings { action } => match action {
            SettingsAction::Get => settings::<ProbeSettings>(c, "/v1/settings/probes", None, json).await,
            SettingsAction::Set { fields } => {
                settings::<ProbeSettings>(c, "/v1/settings/probes", Some(fields), json).await
            }
            SettingsAction::Mirrors { action } => {
                settings::<MirrorSettings>(c, "/v1/settings/mirrors", fields_of(action), json).await
            }
            SettingsAction::Detection { action } => {
                settings::<DetectionSettings>(c, "/v1/settings/detection", fields_of(action), json).await
            }
        },
        Resource::Mirrors { action } => mirrors(c, action, json).await,
        Resource::Monitors { action } => monitors(names, action, json).await,
        Resource::Tenants { action } => match action {
            TenantAction::List => {
                listing(c.get::<Items<TenantView>>("/v1/tenants").await?, json);
                Ok(())
            }
            TenantAction::Put { name, note, fallback_to_degraded, fallback_url, order_by_latency } => {
                let t = Tenant {
                    name: name.clone(),
                    note: note.clone().unwrap_or_default(),
                    fallback_to_degraded: *fallback_to_degraded,
                    fallback_url: fallback_url.clone(),
                    order_by_latency: *order_by_latency,
                };
                let path = format!("/v1/tenants/{}", urlencode(name));
                let v: TenantView = c.call(Method::PUT, &path, Some(&serde_json::to_value(t)?)).await?;
                print(&v, json);
                Ok(())
            }
            TenantAction::Delete { name } => {
                c.delete(&format!("/v1/tenants/{}", urlencode(name))).await?;
                if !json {
                    println!("deleted tenant {name}");
                }
                Ok(())
            }
        },
        Resource::Checks { action } => {
            let common = match action {
                CheckAction::Create { name, check } => {
                    let body = CheckCreate { name: name.clone(), check: check_input(check) };
                    let v: CheckView =
                        c.call(Method::POST, "/v1/checks", Some(&serde_json::to_value(body)?)).await?;
                    print(&v, json);
                    return Ok(());
                }
                CheckAction::List => Action::List,
                CheckAction::Get { id } => Action::Get { id: id.clone() },
                CheckAction::Update { id, fields, file } => {
                    Action::Update { id: id.clone(), fields: fields.clone(), file: file.clone() }
                }
                CheckAction::Delete { id } => Action::Delete { id: id.clone(), force: false },
            };
            generic::<CheckView>(names, Kind::Check, "/v1/checks", &common, json).await
        }
        Resource::Client { ip, prefix } => {
            let q: Vec<(&str, String)> = prefix.iter().map(|p| ("prefix", p.to_string())).collect();
            let v: ClientView = c.get(&format!("/v1/clients/{ip}{}", query(&q))).await?;
            if json {
                print(&v, true);
            } else {
                let place = v.place.as_ref().map_or_else(
                    || "no geo database".to_owned(),
                    |p| {
                        let part = |s: Option<String>| s.unwrap_or_else(|| "-".into());
                        format!(
                            "country {}, continent {}, AS {} (alike within /{})",
                            part(p.country.map(|c| c.to_string())),
                            part(p.continent.map(|c| c.to_string())),
                            part(p.asn.map(|a| a.to_string())),
                            p.prefix
                        )
                    },
                );
                println!("{}: {place}; region {}", v.ip, v.region.as_deref().unwrap_or("none"));
                table(&v.answers);
            }
            Ok(())
        }
        Resource::Doors { action } => match action {
            DoorAction::Select { tenant, exclude_regions, client } => {
                let mut q: Vec<(&str, String)> = Vec::new();
                if let Some(t) = tenant {
                    q.push(("tenant", t.clone()));
                }
                if !exclude_regions.is_empty() {
                    q.push(("exclude_regions", exclude_regions.join(",")));
                }
                if let Some(ip) = client {
                    q.push(("client", ip.to_string()));
                }
                let v: DoorChoice = c.get(&format!("/v1/doors/select{}", query(&q))).await?;
                print(&v, json);
                Ok(())
            }
        },
        Resource::AdminTokens { action } => match action {
            TokenAction::List => {
                generic::<AdminTokenView>(names, Kind::AdminToken, "/v1/admin-tokens", &Action::List, json)
                    .await
            }
            TokenAction::Create { name, read_only } => {
                let body = json!({ "name": name, "read_only": read_only });
                let v: NewAdminToken = c.call(Method::POST, "/v1/admin-tokens", Some(&body)).await?;
                if json {
                    print(&v, true);
                } else {
                    println!("{}", v.token);
                    eprintln!("admin token {:?} created (id {}); it is shown only now", v.name, v.id);
                }
                Ok(())
            }
            TokenAction::Revoke { id } => {
                let delete = Action::Delete { id: id.clone(), force: false };
                generic::<AdminTokenView>(names, Kind::AdminToken, "/v1/admin-tokens", &delete, json).await
            }
        },
        Resource::Status { cluster } => {
            let only = match cluster {
                Some(r) => Some(names.id(Kind::Cluster, "--cluster", r).await?),
                None => None,
            };
            status::status(c, only, json).await
        }
        Resource::Events(a) => {
            let cluster = match &a.cluster {
                Some(r) => Some(names.id(Kind::Cluster, "--cluster", r).await?),
                None => None,
            };
            let node = match &a.node {
                Some(r) => Some(names.id(Kind::Node, "--node", r).await?),
                None => None,
            };
            events::events(c, a, (cluster, node), json).await
        }
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
            listing(c.get::<Items<AuditView>>(&format!("/v1/audit{}", query(&q))).await?, json);
            Ok(())
        }
    }
}

/// `?k=v&…` with the values encoded; nothing when there are none.
fn query(q: &[(&str, String)]) -> String {
    if q.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = q.iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect();
    format!("?{}", pairs.join("&"))
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Writes to standard output; a closed pipe ends the process with success (the reader has
/// what it wanted), any other failure with an error.
pub(crate) fn out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match rt.block_on(dispatch(&args)) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            Ok(ExitCode::FAILURE)
        }
    }
}
