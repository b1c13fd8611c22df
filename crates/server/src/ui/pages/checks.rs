//! The named checks that mirrors, clusters and monitors are probed with.

use super::*;
use vantage_core::check::Method;

#[derive(Debug)]
struct CheckRow {
    id: i64,
    name: String,
    method: String,
    path: String,
    interval: String,
    timeout: String,
    /// `3 of 8, initial 2`: good attempts needed among the window, and assumed at first sight.
    window: String,
    expected: u16,
    block_pattern: String,
    /// `403, 451`: statuses that are a block page; empty when none.
    block_statuses: String,
    mirrors: usize,
    clusters: usize,
    monitors: usize,
    /// Its fields as the API takes them, for the form that edits it.
    values: String,
}

fn check_row(c: &views::Check) -> CheckRow {
    let k = &c.check;
    let mut values =
        serde_json::to_value(vantage_core::check::CheckInput::from(k.clone())).unwrap_or_default();
    if let Some(o) = values.as_object_mut() {
        o.insert("name".into(), c.name.clone().into());
    }
    CheckRow {
        id: c.id,
        values: values.to_string(),
        name: c.name.clone(),
        method: k.method().map(|m| m.as_str().to_owned()).unwrap_or_default(),
        path: k.path().to_owned(),
        interval: format!("{} s", k.interval_s()),
        timeout: format!("{} ms", k.timeout_ms()),
        window: format!("{} of {}, initial {}", k.threshold(), k.window(), k.initial()),
        expected: k.expected_response(),
        block_pattern: k.block_pattern().unwrap_or_default().to_owned(),
        block_statuses: k.block_statuses().iter().map(u16::to_string).collect::<Vec<_>>().join(", "),
        mirrors: c.mirrors,
        clusters: c.clusters,
        monitors: c.monitors,
    }
}

#[derive(Template)]
#[template(path = "checks.html")]
struct ChecksPage {
    frame: Frame,
    tab: &'static str,
    checks: Vec<CheckRow>,
    /// Whether a check named `default` exists (else mirrors naming none use the built-in one).
    has_default: bool,
    /// The methods a check may name.
    methods: [&'static str; 4],
}

pub(in crate::ui) async fn checks(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let list: Items<views::Check> = client(&ui, &v).get("/v1/checks").await?;
    let page = ChecksPage {
        frame: Frame::new(&v, "Checks", "mirrors", 0),
        tab: "checks",
        methods: [Method::Http, Method::Https, Method::Tcp, Method::Hls].map(Method::as_str),
        has_default: list.items.iter().any(|c| c.name.eq_ignore_ascii_case("default")),
        checks: list.items.iter().map(check_row).collect(),
    };
    Ok(render(&page))
}
