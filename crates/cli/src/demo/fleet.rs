//! The demo's fleet, made the way an operator makes one: through the admin API. Probe
//! settings, three regions, a cluster with two node groups, two lines, four nodes (two with a
//! backup address) and an enrollment token per prober.

use std::net::{IpAddr, Ipv4Addr};

use anyhow::{Context, anyhow, bail};
use reqwest::Method;
use serde_json::{Value, json};

/// The demo cluster's domain.
pub(crate) const DOMAIN: &str = "cdn.demo.test";
/// The client network of the line `local`: `dig` on this machine asks from 127.0.0.1.
pub(crate) const LOCAL_NETWORK: &str = "127.0.0.0/8";

/// The fastest probe settings §3.3 allows, so the story is quick.
pub(crate) const INTERVAL_S: u64 = 5;
pub(crate) const TIMEOUT_MS: u64 = 1000;
pub(crate) const ATTEMPTS: u64 = 3;
pub(crate) const FAILING_BEFORE_UNREACHABLE_S: u64 = 5;
pub(crate) const ANSWERING_BEFORE_REACHABLE_S: u64 = 5;

/// Regions: (code, name).
pub(crate) const REGIONS: [(&str, &str); 3] =
    [("ap-sg", "Singapore"), ("eu-de", "Frankfurt"), ("us-va", "Virginia")];
/// Probers: (name, index into [`REGIONS`]).
pub(crate) const PROBERS: [(&str, usize); 3] = [("prober-sg", 0), ("prober-de", 1), ("prober-us", 2)];
/// Node groups: (name, index into [`REGIONS`]).
pub(crate) const GROUPS: [(&str, usize); 2] = [("sin-1", 0), ("fra-1", 1)];

/// One node of the demo: name, index into [`GROUPS`], last octet of its primary address and
/// of its backup address, if any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeSpec {
    pub(crate) name: &'static str,
    pub(crate) group: usize,
    pub(crate) primary: u8,
    pub(crate) backup: Option<u8>,
}

/// The nodes; the first is the one whose primary fails in the story.
pub(crate) const NODES: [NodeSpec; 4] = [
    NodeSpec { name: "sin-1a", group: 0, primary: 11, backup: Some(12) },
    NodeSpec { name: "sin-1b", group: 0, primary: 13, backup: None },
    NodeSpec { name: "fra-1a", group: 1, primary: 14, backup: Some(15) },
    NodeSpec { name: "fra-1b", group: 1, primary: 16, backup: None },
];

/// 127.0.0.`octet`.
pub(crate) fn loopback(octet: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, octet))
}

/// Every edge address, in order: 127.0.0.11–16.
pub(crate) fn edge_ips() -> Vec<IpAddr> {
    let mut octets: Vec<u8> = NODES.iter().flat_map(|n| [Some(n.primary), n.backup]).flatten().collect();
    octets.sort_unstable();
    octets.into_iter().map(loopback).collect()
}

/// The admin API with a token.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    pub(crate) base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    pub(crate) fn new(base: String, token: String) -> anyhow::Result<Api> {
        let http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(10)).build()?;
        Ok(Api { base, token, http })
    }

    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let mut req =
            self.http.request(method.clone(), format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.with_context(|| format!("{method} {path}"))?;
        let status = resp.status();
        let text = resp.text().await.with_context(|| format!("{method} {path}"))?;
        let value: Value = if text.trim().is_empty() { Value::Null } else { serde_json::from_str(&text)? };
        if !status.is_success() {
            bail!("{method} {path}: {status}: {value}");
        }
        Ok(value)
    }

    pub(crate) async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(Method::GET, path, None).await
    }

    /// Stored events (`path` is `/v1/events?…`).
    pub(crate) async fn events(
        &self,
        path: &str,
    ) -> anyhow::Result<Vec<vantage_control::events::FleetEvent>> {
        let v = self.get(path).await?;
        Ok(serde_json::from_value(v["items"].clone())?)
    }

    /// The event stream, unfiltered, on a client of its own: a stream has no end, so the
    /// whole-request timeout of the other calls must not apply.
    pub(crate) fn source(&self) -> crate::follow::Source {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .build()
            .unwrap_or_else(|_| self.http.clone());
        crate::follow::Source {
            http,
            base: self.base.clone(),
            token: self.token.clone(),
            query: String::new(),
        }
    }

    async fn create(&self, path: &str, body: Value) -> anyhow::Result<i64> {
        let v = self.call(Method::POST, path, Some(body)).await?;
        v["id"].as_i64().ok_or_else(|| anyhow!("POST {path}: no id in {v}"))
    }
}

/// A prober's enrollment: its name, region code and single-use token.
#[derive(Debug, Clone)]
pub(crate) struct Enrollment {
    pub(crate) name: &'static str,
    pub(crate) region: &'static str,
    pub(crate) token: String,
}

/// What was made.
#[derive(Debug, Clone)]
pub(crate) struct Fleet {
    pub(crate) cluster: i64,
    /// Node ids, in the order of [`NODES`].
    pub(crate) nodes: Vec<i64>,
    pub(crate) enrollments: Vec<Enrollment>,
}

/// Makes the fleet; the edges listen on `port` of their addresses.
pub(crate) async fn create(api: &Api, port: u16) -> anyhow::Result<Fleet> {
    api.call(
        Method::PUT,
        "/v1/settings/probes",
        Some(json!({
            "interval_s": INTERVAL_S,
            "timeout_ms": TIMEOUT_MS,
            "attempts": ATTEMPTS,
            "failing_before_unreachable_s": FAILING_BEFORE_UNREACHABLE_S,
            "answering_before_reachable_s": ANSWERING_BEFORE_REACHABLE_S,
        })),
    )
    .await?;
    let mut regions = Vec::new();
    for (code, name) in REGIONS {
        regions.push(api.create("/v1/regions", json!({"code": code, "name": name})).await?);
    }
    let cluster = api
        .create(
            "/v1/clusters",
            json!({"name": "demo", "domain": DOMAIN, "listeners": [{"port": port, "protocol": "http"}]}),
        )
        .await?;
    let mut groups = Vec::new();
    for (name, region) in GROUPS {
        groups.push(
            api.create(
                &format!("/v1/clusters/{cluster}/groups"),
                json!({"name": name, "region": regions[region]}),
            )
            .await?,
        );
    }
    let lines = format!("/v1/clusters/{cluster}/lines");
    api.create(
        &lines,
        json!({"name": "local", "group": groups[0], "backup_groups": [groups[1]], "client_networks": [LOCAL_NETWORK]}),
    )
    .await?;
    api.create(&lines, json!({"name": "default", "group": groups[1], "backup_groups": [groups[0]]})).await?;
    let mut nodes = Vec::new();
    for n in NODES {
        let id = api
            .create("/v1/nodes", json!({"cluster": cluster, "group": groups[n.group], "name": n.name}))
            .await?;
        let mut addresses = vec![json!({"ip": loopback(n.primary), "level": "primary"})];
        if let Some(b) = n.backup {
            addresses.push(json!({"ip": loopback(b), "level": "backup1"}));
        }
        api.call(Method::PUT, &format!("/v1/nodes/{id}/addresses"), Some(Value::Array(addresses))).await?;
        nodes.push(id);
    }
    let mut enrollments = Vec::new();
    for (name, region) in PROBERS {
        let v = api
            .call(Method::POST, "/v1/probers/tokens", Some(json!({"name": name, "region": regions[region]})))
            .await?;
        let token = v["token"].as_str().ok_or_else(|| anyhow!("POST /v1/probers/tokens: no token in {v}"))?;
        enrollments.push(Enrollment { name, region: REGIONS[region].0, token: token.to_owned() });
    }
    Ok(Fleet { cluster, nodes, enrollments })
}
