//! `vantage ctl export`, `plan` and `apply`: the configuration as files kept in git. The files
//! are read here — merged in name order, secrets resolved from their references — and sent as
//! one document; the server plans and applies it. Its refusals name a field of that document,
//! which is mapped back to the file and line it came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use reqwest::Method;
use serde_json::{Map, Value, json};
use vantage_server::views::{FleetFile, FleetPlan, PlanOp};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

use super::args::FleetFiles;
use super::client::{Client, Refusal};
use super::out;

/// The largest fleet file read.
const MAX_FILE: u64 = 32 * 1024 * 1024;

/// The keys a fleet file may hold, in the order they are merged.
const LISTS: [&str; 7] = ["regions", "checks", "webhooks", "monitors", "clusters", "tenants", "mirrors"];

/// `ctl export`.
pub(super) async fn export(c: &Client, output: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let file: FleetFile = c.get("/v1/fleet").await?;
    let text = if json {
        format!("{}\n", serde_json::to_string_pretty(&file)?)
    } else {
        let header = "# Vantage fleet file: the whole configuration by name (vantage ctl export).\n\
                      # Secrets read `stored` (kept as the server has them) or env:NAME / file:PATH.\n";
        format!("{header}{}", serde_norway::to_string(&file)?)
    };
    match output {
        Some(path) => std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display())),
        None => {
            out(format_args!("{text}"));
            Ok(())
        }
    }
}

/// `ctl plan`: 0 when nothing would change, 2 when something would.
pub(super) async fn plan(c: &Client, files: &FleetFiles, json: bool) -> anyhow::Result<ExitCode> {
    let read = Files::read(&files.paths)?;
    let plan = read.plan(c, files).await?;
    show(&plan, json);
    Ok(if plan.changes.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

/// `ctl apply`: the plan shown, then applied if the configuration is still the one planned
/// against (or `expect`).
pub(super) async fn apply(
    c: &Client,
    files: &FleetFiles,
    expect: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let read = Files::read(&files.paths)?;
    let plan = read.plan(c, files).await?;
    if plan.changes.is_empty() && expect.is_none_or(|e| e == plan.revision) {
        show(&plan, json);
        return Ok(ExitCode::SUCCESS);
    }
    if !json {
        show(&plan, false);
    }
    let body = json!({
        "fleet": read.doc,
        "expected_revision": expect.unwrap_or(&plan.revision),
        "prune": files.prune,
        "force": files.force,
    });
    let applied: FleetPlan =
        c.call(Method::POST, "/v1/fleet/apply", Some(&body)).await.map_err(|e| read.located(e))?;
    if json {
        show(&applied, true);
    } else {
        out(format_args!(
            "\nApplied {} as one change; the configuration is now at revision {}.\n",
            count(applied.changes.len(), "change"),
            applied.revision
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// Prints a plan: the objects and fields, what is left, and what DNS would answer.
fn show(plan: &FleetPlan, json: bool) {
    if json {
        out(format_args!("{}\n", serde_json::to_string_pretty(plan).unwrap_or_default()));
        return;
    }
    let n = |op: PlanOp| plan.changes.iter().filter(|c| c.op == op).count();
    if plan.changes.is_empty() {
        out(format_args!("No changes: the configuration (revision {}) matches the files.\n", plan.revision));
    } else {
        out(format_args!(
            "Plan against revision {}: {} to create, {} to change, {} to delete.\n\n",
            plan.revision,
            n(PlanOp::Create),
            n(PlanOp::Update),
            n(PlanOp::Delete)
        ));
    }
    for ch in &plan.changes {
        let sign = match ch.op {
            PlanOp::Create => '+',
            PlanOp::Update => '~',
            PlanOp::Delete => '-',
        };
        out(format_args!("{sign} {} {}\n", ch.object.kind, ch.object.name));
        for f in &ch.fields {
            let v = |v: &Option<Value>| v.as_ref().map_or_else(|| "(unset)".to_owned(), Value::to_string);
            match ch.op {
                PlanOp::Create => out(format_args!("    {}: {}\n", f.field, v(&f.after))),
                _ => out(format_args!("    {}: {} → {}\n", f.field, v(&f.before), v(&f.after))),
            }
        }
    }
    if !plan.left.is_empty() {
        let names: Vec<String> = plan.left.iter().map(|o| format!("{} {}", o.kind, o.name)).collect();
        out(format_args!(
            "\nLeft as they are (not in the files; --prune deletes them): {}\n",
            names.join(", ")
        ));
    }
    if !plan.dns.is_empty() {
        out(format_args!("\nWhat DNS would answer after the change:\n"));
    }
    let ips = |v: &[std::net::IpAddr]| {
        if v.is_empty() {
            "nothing".to_owned()
        } else {
            v.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
        }
    };
    for cl in &plan.dns {
        for l in &cl.lines {
            let after = if l.removed { "(line removed)".to_owned() } else { ips(&l.after) };
            let same =
                if l.now == l.after { " (unchanged)".to_owned() } else { format!(" (now {})", ips(&l.now)) };
            out(format_args!("  {} line {}: {after}{same}\n", cl.cluster, l.line));
            if let Some(h) = &l.held {
                out(format_args!("    {}\n", h.describe(&l.line)));
            }
        }
        for r in &cl.rules {
            out(format_args!("  {}: {r}\n", cl.cluster));
        }
    }
}

/// One file read: its path and where each of its fields is.
struct Source {
    path: PathBuf,
    lines: BTreeMap<String, usize>,
}

/// Fleet files read and merged into one document.
struct Files {
    doc: Value,
    sources: Vec<Source>,
    /// For each list, each merged item's file and index there.
    origin: BTreeMap<(String, usize), (usize, usize)>,
    /// Which file holds each of the settings.
    settings: BTreeMap<String, usize>,
}

impl Files {
    /// Reads `paths` (files, or directories of `*.yaml`, `*.yml`, `*.json`) in name order.
    fn read(paths: &[PathBuf]) -> anyhow::Result<Files> {
        let mut found = Vec::new();
        for p in paths {
            if p.is_dir() {
                let mut in_dir: Vec<PathBuf> = std::fs::read_dir(p)
                    .with_context(|| format!("cannot read the directory {}", p.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|f| {
                        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or(".");
                        !name.starts_with('.')
                            && [".yaml", ".yml", ".json"].iter().any(|x| name.ends_with(x))
                            && f.is_file()
                    })
                    .collect();
                in_dir.sort();
                if in_dir.is_empty() {
                    bail!("{}: no fleet files (*.yaml, *.yml, *.json) in the directory", p.display());
                }
                found.extend(in_dir);
            } else {
                found.push(p.clone());
            }
        }
        let mut files = Files {
            doc: Value::Object(Map::new()),
            sources: Vec::new(),
            origin: BTreeMap::new(),
            settings: BTreeMap::new(),
        };
        for path in found {
            files.add(path)?;
        }
        Ok(files)
    }

    fn add(&mut self, path: PathBuf) -> anyhow::Result<()> {
        let shown = path.display().to_string();
        let size = std::fs::metadata(&path).with_context(|| format!("cannot read {shown}"))?.len();
        if size > MAX_FILE {
            bail!("{shown}: larger than {} MiB", MAX_FILE >> 20);
        }
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {shown}"))?;
        let mut doc: Value = serde_norway::from_str(&text).map_err(|e| match e.location() {
            Some(l) => anyhow!("{shown}:{}: {e}", l.line()),
            None => anyhow!("{shown}: {e}"),
        })?;
        let lines = lines_of(&text);
        let index = self.sources.len();
        let at = |field: &str| lines.get(field).map_or_else(|| shown.clone(), |l| format!("{shown}:{l}"));
        if doc.is_null() {
            self.sources.push(Source { path, lines });
            return Ok(());
        }
        let Some(obj) = doc.as_object_mut() else {
            bail!(
                "{shown}: a fleet file is a mapping of lists (regions, clusters, …), not {}",
                kind_of(&doc)
            );
        };
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        resolve_secrets(obj, &dir).map_err(|(field, why)| anyhow!("{}: {field}: {why}", at(&field)))?;
        let merged = self.doc.as_object_mut().ok_or_else(|| anyhow!("merged document is not a mapping"))?;
        for (key, value) in std::mem::take(obj) {
            if key == "settings" {
                let Value::Object(settings) = value else {
                    bail!("{}: settings: must be a mapping (probes, detection, mirrors)", at("settings"));
                };
                let into = merged.entry("settings").or_insert_with(|| json!({}));
                for (name, v) in settings {
                    if let Some(first) = self.settings.insert(name.clone(), index) {
                        let first = self.sources[first].path.display().to_string();
                        bail!(
                            "{}: settings.{name}: also in {first}; give it once",
                            at(&format!("settings.{name}"))
                        );
                    }
                    into[name.as_str()] = v;
                }
                continue;
            }
            if !LISTS.contains(&key.as_str()) {
                bail!("{}: {key}: unknown key (a fleet file holds settings, {})", at(&key), LISTS.join(", "));
            }
            let Value::Array(items) = value else {
                bail!("{}: {key}: must be a list", at(&key));
            };
            let list = merged.entry(key.clone()).or_insert_with(|| json!([]));
            let Some(list) = list.as_array_mut() else { continue };
            for (i, item) in items.into_iter().enumerate() {
                self.origin.insert((key.clone(), list.len()), (index, i));
                list.push(item);
            }
        }
        self.sources.push(Source { path, lines });
        Ok(())
    }

    /// Asks the server for the plan of these files.
    async fn plan(&self, c: &Client, files: &FleetFiles) -> anyhow::Result<FleetPlan> {
        let body = json!({"fleet": self.doc, "prune": files.prune, "force": files.force});
        c.call(Method::POST, "/v1/fleet/plan", Some(&body)).await.map_err(|e| self.located(e))
    }

    /// A refusal naming a field of the document, as the file and line it came from.
    fn located(&self, e: anyhow::Error) -> anyhow::Error {
        let Some(r) = e.downcast_ref::<Refusal>() else { return e };
        let Some(field) = r.field().and_then(|f| f.strip_prefix("fleet.")) else { return e };
        match self.locate(field) {
            Some((file, line, local)) => anyhow!("{file}:{line}: {local}: {}", r.reason()),
            None => e,
        }
    }

    /// The file, line and field within that file of a field of the merged document.
    fn locate(&self, field: &str) -> Option<(String, usize, String)> {
        let (head, rest) = field.split_once('.').map_or((field, ""), |(h, r)| (h, r));
        let (file, local) = match head.split_once('[') {
            Some((key, idx)) => {
                let i: usize = idx.trim_end_matches(']').parse().ok()?;
                let (file, j) = *self.origin.get(&(key.to_owned(), i))?;
                let rest = if rest.is_empty() { String::new() } else { format!(".{rest}") };
                (file, format!("{key}[{j}]{rest}"))
            }
            None if head == "settings" => {
                let name = rest.split(['.', '[']).next().unwrap_or_default();
                (*self.settings.get(name)?, field.to_owned())
            }
            None => return None,
        };
        let source = self.sources.get(file)?;
        // The deepest part of the path the file writes (a missing field: its object's line).
        let mut path = local.as_str();
        loop {
            if let Some(line) = source.lines.get(path) {
                return Some((source.path.display().to_string(), *line, local.clone()));
            }
            let cut = path.rfind(['.', '['])?;
            path = &path[..cut];
        }
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "a list",
        Value::String(_) => "text",
        Value::Number(_) => "a number",
        Value::Bool(_) => "true or false",
        _ => "that",
    }
}

/// Replaces each secret reference — a publisher's `key_secret`, a channel's `secret` — by the
/// secret: `env:NAME` from the environment, `file:PATH` from a file (relative to the fleet
/// file's directory), `stored` left for the server. A secret written in the clear is refused:
/// fleet files live in git.
fn resolve_secrets(doc: &mut Map<String, Value>, dir: &Path) -> Result<(), (String, String)> {
    if let Some(Value::Array(clusters)) = doc.get_mut("clusters") {
        for (i, cluster) in clusters.iter_mut().enumerate() {
            let Some(Value::Array(publishers)) = cluster.get_mut("publishers") else { continue };
            for (k, p) in publishers.iter_mut().enumerate() {
                if let Some(secret) = p.get_mut("key_secret") {
                    resolve_secret(secret, &format!("clusters[{i}].publishers[{k}].key_secret"), dir)?;
                }
            }
        }
    }
    if let Some(Value::Array(webhooks)) = doc.get_mut("webhooks") {
        for (i, w) in webhooks.iter_mut().enumerate() {
            if let Some(secret) = w.get_mut("secret") {
                resolve_secret(secret, &format!("webhooks[{i}].secret"), dir)?;
            }
        }
    }
    Ok(())
}

/// One secret reference, at `field`, resolved ([`resolve_secrets`]).
fn resolve_secret(secret: &mut Value, field: &str, dir: &Path) -> Result<(), (String, String)> {
    let text = secret.as_str().unwrap_or_default().to_owned();
    let resolved = if text == "stored" {
        return Ok(());
    } else if let Some(name) = text.strip_prefix("env:") {
        std::env::var(name).map_err(|_| (field.to_owned(), format!("the environment has no {name}")))?
    } else if let Some(file) = text.strip_prefix("file:") {
        let path = dir.join(file);
        let s = std::fs::read_to_string(&path)
            .map_err(|e| (field.to_owned(), format!("cannot read {}: {e}", path.display())))?;
        s.trim().to_owned()
    } else {
        return Err((
            field.to_owned(),
            "a secret is never written in a fleet file: give env:NAME, file:PATH or stored".into(),
        ));
    };
    *secret = Value::String(resolved);
    Ok(())
}

/// Where each field of a YAML (or JSON) text is: `clusters[0].nodes[2].group` → its line.
fn lines_of(text: &str) -> BTreeMap<String, usize> {
    let mut marks = Marks { lines: BTreeMap::new(), stack: Vec::new() };
    // A text the parser cannot read was refused already by the real parse.
    let _ = Parser::new_from_str(text).load(&mut marks, false);
    marks.lines
}

enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, next: usize },
}

struct Marks {
    lines: BTreeMap<String, usize>,
    stack: Vec<Frame>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

impl Marks {
    /// The path of the value starting at `mark`, recorded at its line unless its key was.
    fn value_path(&mut self, mark: Marker) -> String {
        match self.stack.last_mut() {
            None => String::new(),
            Some(Frame::Map { path, key }) => join(path, key.as_deref().unwrap_or_default()),
            Some(Frame::Seq { path, next }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                self.lines.entry(p.clone()).or_insert(mark.line());
                p
            }
        }
    }

    /// A value ended: its mapping waits for the next key.
    fn done(&mut self) {
        if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
            *key = None;
        }
    }
}

impl MarkedEventReceiver for Marks {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(v, ..) => {
                if let Some(Frame::Map { path, key: key @ None }) = self.stack.last_mut() {
                    let p = join(path, &v);
                    self.lines.entry(p).or_insert(mark.line());
                    *key = Some(v);
                    return;
                }
                self.value_path(mark);
                self.done();
            }
            Event::Alias(_) => {
                self.value_path(mark);
                self.done();
            }
            Event::MappingStart(..) => {
                let path = self.value_path(mark);
                self.stack.push(Frame::Map { path, key: None });
            }
            Event::SequenceStart(..) => {
                let path = self.value_path(mark);
                self.stack.push(Frame::Seq { path, next: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
                self.done();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_found_at_its_line_in_block_and_flow_style() {
        let text = "regions:\n  - code: eu\n    name: Europe\nclusters:\n  - name: www\n    nodes:\n      - name: a\n        group: g\n      - {name: b, group: h}\n";
        let lines = lines_of(text);
        assert_eq!(lines.get("regions[0]"), Some(&2));
        assert_eq!(lines.get("regions[0].name"), Some(&3));
        assert_eq!(lines.get("clusters[0].nodes[0].group"), Some(&8));
        assert_eq!(lines.get("clusters[0].nodes[1].group"), Some(&9));
        assert_eq!(lines.get("clusters"), Some(&4));
    }

    #[test]
    fn a_refused_field_is_named_in_the_file_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.yaml");
        let b = dir.path().join("b.yaml");
        std::fs::write(&a, "clusters:\n  - name: one\n    domain: one.test\n").unwrap();
        std::fs::write(&b, "regions:\n  - code: eu\nclusters:\n  - name: two\n    domain: two.test\n    nodes:\n      - name: x\n        group: nope\n").unwrap();
        let files = Files::read(&[dir.path().to_path_buf()]).unwrap();
        let (file, line, local) = files.locate("clusters[1].nodes[0].group").unwrap();
        assert_eq!((file, line, local.as_str()), (b.display().to_string(), 8, "clusters[0].nodes[0].group"));
        // A field the file does not write is found at its object.
        let (_, line, _) = files.locate("clusters[0].ttl").unwrap();
        assert_eq!(line, 2);
    }

    #[test]
    fn secrets_come_from_references_never_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tsig.key"), "c2VjcmV0\n").unwrap();
        let mut doc: Map<String, Value> = serde_json::from_value(json!({"clusters": [{"publishers": [
            {"key_secret": "file:tsig.key"}, {"key_secret": "stored"}, {"key_secret": "hunter2"}
        ]}]}))
        .unwrap();
        let err = resolve_secrets(&mut doc, dir.path()).unwrap_err();
        assert_eq!(err.0, "clusters[0].publishers[2].key_secret");
        assert_eq!(doc["clusters"][0]["publishers"][0]["key_secret"], "c2VjcmV0");
        assert_eq!(doc["clusters"][0]["publishers"][1]["key_secret"], "stored");

        std::fs::write(dir.path().join("pd.key"), "R0UT1NG\n").unwrap();
        let mut doc: Map<String, Value> = serde_json::from_value(json!({"webhooks": [
            {"name": "pd", "secret": "file:pd.key"}, {"name": "slack", "secret": "https://hooks.slack.com/x"}
        ]}))
        .unwrap();
        let err = resolve_secrets(&mut doc, dir.path()).unwrap_err();
        assert_eq!(err.0, "webhooks[1].secret");
        assert_eq!(doc["webhooks"][0]["secret"], "R0UT1NG");
    }
}
