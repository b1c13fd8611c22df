//! Each kind of configuration object as the generic handlers see it: where it is kept, how its
//! document parses, and what the API answers for it.

use super::*;
use crate::api::agents::NodeItem;

impl Kind for Region {
    type View = RegionView;
    type Input = RegionInput;
    const NAME: &'static str = "region";
    const LABEL: &'static str = "Region";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.regions
    }
    fn wrap(self) -> Object {
        Object::Region(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        let r: Region = parse_as(doc)?;
        vantage_core::limits::region(&r)?;
        Ok(r)
    }
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> RegionView {
        let c = &core.config;
        let probers = c.probers.values().filter(|p| p.value.region == RegionId(id)).count();
        let requests_day =
            core.monitors.demand(crate::support::now()).get(&s.value.code).copied().unwrap_or(0);
        RegionView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            code: s.value.code.clone(),
            name: s.value.name.clone(),
            client_networks: s.value.client_networks.clone(),
            places: s.value.places.clone(),
            probers,
            requests_day,
        }
    }
}

impl Kind for Cluster {
    type View = ClusterView;
    type Input = ClusterInput;
    const NAME: &'static str = "cluster";
    const LABEL: &'static str = "Cluster";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.clusters
    }
    fn wrap(self) -> Object {
        Object::Cluster(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        let c: Cluster = parse_as(doc)?;
        vantage_core::limits::cluster(&c)?;
        Ok(c)
    }
    /// A publisher sent without its secret (or with the `(hidden)` a view shows) keeps the one
    /// it has, as long as it still pushes to the same server with the same key: a form or a
    /// file holds no secret it was never shown, and a secret never follows a key to another
    /// server. Names match as the cluster's publishers are told apart, without case.
    fn fill_patch(old: &Self, patch: &mut Value) -> Result<(), ApiError> {
        let Some(list) = patch.get_mut("publishers").and_then(Value::as_array_mut) else { return Ok(()) };
        for (i, p) in list.iter_mut().enumerate() {
            let Some(p) = p.as_object_mut() else { continue };
            if p.get("key_secret").is_some_and(|s| s.as_str() != Some(HIDDEN)) {
                continue;
            }
            p.remove("key_secret");
            let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
            let Some(was) = old.publishers.iter().find(|o| o.name.eq_ignore_ascii_case(name)) else {
                continue;
            };
            // A server that does not parse is refused by its own field when the document is.
            let server =
                p.get("server").and_then(Value::as_str).and_then(|s| s.parse::<std::net::SocketAddr>().ok());
            let Some(server) = server else {
                continue;
            };
            let key = p.get("key_name").and_then(Value::as_str).map(|k| k.trim().trim_end_matches('.'));
            if server != was.server || !key.is_some_and(|k| k.eq_ignore_ascii_case(&was.key_name)) {
                return Err(ApiError::invalid(
                    format!("publishers[{i}].key_secret"),
                    "a publisher that pushes to another server or with another key takes its secret again",
                ));
            }
            p.insert("key_secret".into(), Value::String(was.key_secret.clone()));
        }
        Ok(())
    }
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> ClusterView {
        let probed_with = core.config.cluster_check(&s.value).into();
        let tcp_fallback = core.tcp_fallback(ClusterId(id), crate::support::now()).map(|f| f.reason());
        let c = ClusterInput::from(Cluster::clone(&s.value));
        ClusterView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            name: c.name,
            domain: c.domain,
            aliases: c.aliases,
            dns_mode: c.dns_mode,
            ttl: c.ttl,
            suspect_ttl: c.suspect_ttl,
            listeners: c.listeners,
            check: c.check,
            check_name: c.check_name,
            probed_with,
            tcp_fallback,
            mass_removal_pct: c.mass_removal_pct,
            agent_required: c.agent_required,
            required_links: c.required_links,
            // TSIG secrets are written, never read back.
            publishers: c
                .publishers
                .into_iter()
                .map(|p| PublisherInput { key_secret: HIDDEN.into(), ..PublisherInput::from(p) })
                .collect(),
        }
    }
}

fn parent(cluster: Option<ClusterId>) -> Result<ClusterId, ApiError> {
    cluster.ok_or_else(|| ApiError::Internal("child object without a cluster".into()))
}

/// The parts every child of a cluster has alike: where it is kept, its variant, and its
/// document (the inner value, with the cluster from the path).
macro_rules! child_kind {
    ($map:ident, $variant:ident, $field:ident, $inner:ty) => {
        child_kind!($map, $variant, $field, $inner, |_| Ok(()));
    };
    ($map:ident, $variant:ident, $field:ident, $inner:ty, $limits:expr) => {
        fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
            &c.$map
        }
        fn wrap(self) -> Object {
            Object::$variant(self)
        }
        fn cluster(&self) -> Option<ClusterId> {
            Some(self.cluster)
        }
        fn doc(&self) -> Value {
            to_doc(&self.$field)
        }
        fn parse(doc: Value, cluster: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
            let inner: $inner = parse_as(doc)?;
            let limits: fn(&$inner) -> vantage_core::Result<()> = $limits;
            limits(&inner)?;
            Ok(Self { cluster: parent(cluster)?, $field: inner })
        }
    };
}

impl Kind for GroupRecord {
    type View = GroupView;
    type Input = GroupInput;
    const NAME: &'static str = "group";
    const LABEL: &'static str = "Node group";
    child_kind!(groups, Group, group, NodeGroup);
    fn view(id: i64, s: &Stored<Self>, _: &CoreView) -> GroupView {
        GroupView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            cluster: s.value.cluster,
            name: s.value.group.name.clone(),
            region: s.value.group.region,
            drained: s.value.group.drained,
        }
    }
}

impl Kind for LineRecord {
    type View = LineView;
    type Input = LineInput;
    const NAME: &'static str = "line";
    const LABEL: &'static str = "Line";
    child_kind!(lines, Line, line, Line, vantage_core::limits::line);
    fn view(id: i64, s: &Stored<Self>, _: &CoreView) -> LineView {
        let l = &s.value.line;
        LineView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            cluster: s.value.cluster,
            name: l.name.clone(),
            group: l.group,
            backup_groups: l.backup_groups.clone(),
            min_healthy: l.min_healthy,
            client_networks: l.client_networks.clone(),
            places: l.places.clone(),
            all_down: l.all_down,
            latency_region: l.latency_region,
        }
    }
}

impl Kind for RuleRecord {
    type View = RuleView;
    type Input = RuleInput;
    const NAME: &'static str = "rule";
    const LABEL: &'static str = "Rule";
    child_kind!(rules, Rule, rule, Rule);
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> RuleView {
        RuleView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            cluster: s.value.cluster,
            rule: s.value.rule.clone(),
            acting_on: crate::api::rules::acting_on(core, s.value.cluster, id),
        }
    }
    fn action(op: &str) -> String {
        format!("scheduling.rule_{op}")
    }
}

/// A node as created: its cluster and the node's fields (checked by the core's `NodeInput`).
#[derive(Debug, serde::Deserialize)]
struct NodeBody {
    cluster: ClusterId,
    #[serde(flatten)]
    node: BTreeMap<String, Value>,
}

impl Kind for NodeRecord {
    type View = NodeView;
    type Input = NodeCreate;
    const NAME: &'static str = "node";
    const LABEL: &'static str = "Node";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.nodes
    }
    fn wrap(self) -> Object {
        Object::Node(self)
    }
    fn cluster(&self) -> Option<ClusterId> {
        Some(self.cluster)
    }
    fn doc(&self) -> Value {
        let mut v = to_doc(&self.node);
        v["cluster"] = json!(self.cluster);
        v
    }
    fn parse(doc: Value, existing: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        let body: NodeBody = parse_as(doc)?;
        if existing.is_some_and(|c| c != body.cluster) {
            return Err(ApiError::invalid(
                "cluster",
                "a node cannot move to another cluster; delete it and create it there",
            ));
        }
        let node: Node = parse_as::<NodeInput>(Value::Object(body.node.into_iter().collect()))?.try_into()?;
        Ok(NodeRecord {
            cluster: body.cluster,
            node,
            addresses: AddressList::default(),
            cert_sha256: None,
            cert_issued_at: None,
            enrolled_from: None,
        })
    }
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> NodeView {
        crate::api::agents::node_view(core, id, s, crate::support::now())
    }
    fn write_list<'a>(
        written: &Written,
        list: List,
        objects: impl Iterator<Item = (i64, &'a Stored<Self>)>,
        core: &CoreView,
    ) -> serde_json::Result<Vec<u8>> {
        let at = crate::support::now();
        let items = objects.map(|(node, stored)| (node, NodeItem { core, node, stored, at }));
        written.list(list, items)
    }
    /// Setting *also probes* is its own entry, `node.set_probe` with the value before and
    /// after; the rest of the patch, if any, is `node.update`.
    fn update_audit(old: &Self, new: &Self, mut patch: Value) -> Vec<(String, Value)> {
        let probe = patch.as_object_mut().and_then(|p| p.remove("also_probes"));
        let mut entries = Vec::new();
        if patch.as_object().is_none_or(|p| !p.is_empty()) {
            entries.push((Self::action("update"), patch));
        }
        if probe.is_some() {
            entries.push((
                "node.set_probe".to_owned(),
                json!({"before": old.node.also_probes, "after": new.node.also_probes}),
            ));
        }
        entries
    }
}

impl Kind for ProberRecord {
    type View = ProberView;
    type Input = ProberBody;
    const NAME: &'static str = "prober";
    const LABEL: &'static str = "Prober";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.probers
    }
    fn wrap(self) -> Object {
        Object::Prober(self)
    }
    fn doc(&self) -> Value {
        json!({"name": self.name, "region": self.region, "enabled": self.enabled})
    }
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        let b: ProberBody = parse_as(doc)?;
        let name = vantage_core::model::display_name("name", &b.name)?;
        Ok(ProberRecord {
            name,
            region: b.region,
            enabled: b.enabled,
            cert_sha256: None,
            cert_issued_at: None,
        })
    }
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> ProberView {
        crate::api::agents::prober_view(core, id, s)
    }
}

impl Kind for Webhook {
    type View = WebhookView;
    type Input = Webhook;
    const NAME: &'static str = "webhook";
    const LABEL: &'static str = "Webhook";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.webhooks
    }
    fn wrap(self) -> Object {
        Object::Webhook(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    fn parse(doc: Value, _: Option<ClusterId>, app: &App) -> Result<Self, ApiError> {
        let hook = parse_as::<Webhook>(doc)?.check()?;
        // Every destination is judged when it is entered, as it will be when it is used.
        let policy = app.fetch_policy();
        match (hook.format, hook.url.as_deref(), hook.secret.as_deref()) {
            (WebhookFormat::Slack, _, Some(secret)) => {
                crate::fetch::refuse_address(policy, "secret", secret)?
            }
            (WebhookFormat::Email, Some(url), _) => {
                let server = SmtpServer::parse("url", url)?;
                if let Ok(ip) = server.host.parse::<std::net::IpAddr>() {
                    let addr = std::net::SocketAddr::new(ip, server.port);
                    policy.check(addr).map_err(|r| ApiError::invalid("url", r.to_string()))?;
                }
            }
            (_, Some(url), _) => crate::fetch::refuse_address(policy, "url", url)?,
            _ => {}
        }
        Ok(hook)
    }
    /// A change that sends the channel elsewhere must give its secret again.
    fn refuse_change(old: &Self, new: &Self, patch: &Value) -> Result<(), ApiError> {
        let resent = patch.get("secret").is_some_and(|v| !v.is_null());
        if old.secret.is_some() && new.secret.is_some() && !resent && !old.same_destination(new) {
            return Err(ApiError::invalid(
                "secret",
                "a channel that delivers elsewhere takes its secret again: send secret with the change",
            ));
        }
        Ok(())
    }
    fn view(id: i64, s: &Stored<Self>, _: &CoreView) -> WebhookView {
        // Secrets are written, never read back.
        let secret = s.value.secret.as_ref().map(|_| HIDDEN.to_owned());
        let webhook = Webhook { secret, ..Webhook::clone(&s.value) };
        WebhookView { id, created_at: s.created_at, updated_at: s.updated_at, webhook }
    }
}

impl KeepPrivate for Webhook {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
}

impl Kind for Silence {
    type View = SilenceView;
    type Input = SilenceCreate;
    const NAME: &'static str = "silence";
    const LABEL: &'static str = "Silence";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.silences
    }
    fn wrap(self) -> Object {
        Object::Silence(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    /// A change (a longer or shorter silence, other matchers; an end now or past ends it
    /// now): checked at the time it is made.
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        Ok(parse_as::<Silence>(doc)?.check_change(crate::support::now())?)
    }
    /// Who made it and when it started are the server's to say.
    fn refuse_patch(patch: &Value) -> Result<(), ApiError> {
        for field in ["starts_at", "created_by"] {
            if patch.get(field).is_some() {
                return Err(ApiError::invalid(field, "set when the silence is made; it cannot change"));
            }
        }
        Ok(())
    }
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> SilenceView {
        let now = crate::support::now();
        let state = if now < s.value.starts_at {
            SilenceState::Pending
        } else if now < s.value.ends_at {
            SilenceState::Active
        } else {
            SilenceState::Expired
        };
        let holds = (core.held_alerts(now).into_iter())
            .filter(|(_, by)| *by == Hold::Silence(id))
            .map(|(key, _)| key)
            .collect();
        SilenceView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            silence: Silence::clone(&s.value),
            state,
            holds,
        }
    }
}

impl KeepPrivate for Silence {
    /// Who made it and when it started are the server's to say.
    fn keep_from(self, old: &Self) -> Self {
        Silence { created_by: old.created_by.clone(), starts_at: old.starts_at, ..self }
    }
}

impl Kind for NamedCheck {
    type View = CheckView;
    type Input = CheckCreate;
    const NAME: &'static str = "check";
    const LABEL: &'static str = "Check";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.checks
    }
    fn wrap(self) -> Object {
        Object::Check(self)
    }
    fn doc(&self) -> Value {
        let mut v = to_doc(&self.check);
        v["name"] = json!(self.name);
        v
    }
    fn parse(mut doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        let name = doc.as_object_mut().and_then(|o| o.remove("name"));
        let Some(Value::String(name)) = name else {
            return Err(ApiError::invalid(
                "name",
                "a check needs a name (`default` applies where none is named)",
            ));
        };
        let name = vantage_core::model::display_name("name", &name)?;
        let check = parse_as(doc)?;
        vantage_core::limits::check(&check)?;
        Ok(NamedCheck { name, check })
    }
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> CheckView {
        let c = &core.config;
        let name = &s.value.name;
        let mirrors = c
            .mirrors
            .mirrors
            .values()
            .filter(|m| m.check.as_deref().unwrap_or("default").eq_ignore_ascii_case(name))
            .count();
        let probes =
            |p: vantage_control::config::Probed| p.name.is_some_and(|n| n.eq_ignore_ascii_case(name));
        let clusters = c.clusters.values().filter(|x| probes(c.cluster_check(&x.value))).count();
        let monitors = c.monitors.values().filter(|x| probes(c.monitor_check(&x.value))).count();
        CheckView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            name: name.clone(),
            check: s.value.check.clone(),
            mirrors,
            clusters,
            monitors,
        }
    }
}

impl KeepPrivate for NamedCheck {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
}

impl Kind for Monitor {
    type View = MonitorView;
    type Input = MonitorInput;
    const NAME: &'static str = "monitor";
    const LABEL: &'static str = "Monitor";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.monitors
    }
    fn wrap(self) -> Object {
        Object::Monitor(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    fn parse(doc: Value, _: Option<ClusterId>, app: &App) -> Result<Self, ApiError> {
        let m: Monitor = parse_as(doc)?;
        for (i, r) in m.regions.iter().enumerate() {
            for (k, url) in r.endpoints.iter().enumerate() {
                crate::fetch::refuse_address(
                    app.fetch_policy(),
                    &format!("regions[{i}].endpoints[{k}]"),
                    url,
                )?;
            }
        }
        Ok(m)
    }
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> MonitorView {
        let c = &core.config;
        let verdict = core.monitors.state(vantage_core::ids::MonitorId(id)).and_then(|st| st.verdict);
        MonitorView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            monitor: Monitor::clone(&s.value),
            probed_with: c.monitor_check(&s.value).into(),
            verdict: verdict.map(|v| v.verdict.global),
            since: verdict.map(|v| v.at),
        }
    }
}

impl KeepPrivate for Monitor {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
}

impl Kind for StatusPage {
    type View = StatusPageView;
    type Input = StatusPage;
    const NAME: &'static str = "status_page";
    const LABEL: &'static str = "Status page";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.status_pages
    }
    fn wrap(self) -> Object {
        Object::StatusPage(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        Ok(parse_as::<StatusPage>(doc)?.check()?)
    }
    fn view(id: i64, s: &Stored<Self>, _: &CoreView) -> StatusPageView {
        StatusPageView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            path: format!("/status/{}", s.value.slug),
            page: StatusPage::clone(&s.value),
        }
    }
}

impl KeepPrivate for StatusPage {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
}
