//! The prober list (with enrollment tokens) and one prober with its results.

use super::*;

#[derive(Debug)]
struct ProberRow {
    id: i64,
    name: String,
    hostname: String,
    region: String,
    status: Markup,
    last_seen: Markup,
    version: String,
    last_round: Option<RoundView>,
    last_endpoint_checks: Option<RoundView>,
    last_confirmation: Option<RoundView>,
    targets: u32,
    enabled: bool,
}

impl ProberRow {
    /// The row of `p`, with its host and region as the page shows them.
    fn of(p: &views::Prober, hostname: String, region: String, at: Timestamp) -> ProberRow {
        ProberRow {
            id: p.id,
            name: p.name.clone(),
            hostname,
            region,
            status: format::prober_status(&word(&p.status)),
            last_seen: time_or(p.last_seen, at, "never"),
            version: p.version.clone().unwrap_or_else(|| "—".into()),
            last_round: p.last_round.as_ref().map(round_view),
            last_endpoint_checks: p.last_endpoint_checks.as_ref().map(round_view),
            last_confirmation: p.last_confirmation.as_ref().map(round_view),
            targets: p.targets,
            enabled: p.enabled,
        }
    }
}

/// A prober's figures of one kind (its last round, endpoint checks or confirmation): loss,
/// mean RTT, how many targets lost every attempt, out of how many.
#[derive(Debug)]
struct RoundView {
    loss: String,
    rtt: String,
    unreachable: Markup,
    targets: u32,
}

fn round_view(r: &views::Round) -> RoundView {
    let unreachable = match r.unreachable {
        0 => badge(Tone::Good, "every target answered"),
        1 => badge(Tone::Bad, "1 target unreachable"),
        n => badge(Tone::Bad, &format!("{n} targets unreachable")),
    };
    RoundView { loss: pct(r.loss_pct), rtt: ms(r.mean_rtt_ms), unreachable, targets: r.targets }
}

#[derive(Debug)]
struct TokenRow {
    name: String,
    prefix: String,
    region: String,
    expires: Markup,
}

#[derive(Template)]
#[template(path = "probers.html")]
struct ProbersPage {
    frame: Frame,
    probers: Vec<ProberRow>,
    regions: Vec<(i64, String)>,
    tokens: Vec<TokenRow>,
    /// The probe settings card: (field, label, value); the core says what each may be.
    settings: Vec<(&'static str, &'static str, u32)>,
    /// The detection settings card: cross-region confirmation, and the same for the rest.
    confirm: bool,
    detection: Vec<(&'static str, &'static str, u32)>,
}

pub(in crate::ui) async fn probers(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let probers: Items<views::Prober> = api.get("/v1/probers").await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let tokens: Items<views::EnrollToken> = api.get("/v1/probers/tokens").await?;
    let names = region_names(&regions.items);
    let rows = probers
        .items
        .iter()
        .map(|p| {
            let hostname = p.hostname.clone().filter(|h| *h != p.name).unwrap_or_default();
            let region = names.get(&p.region).cloned().unwrap_or_else(|| format!("region {}", p.region));
            ProberRow::of(p, hostname, region, at)
        })
        .collect();
    let tokens = tokens
        .items
        .into_iter()
        .filter(|t| t.state == TokenState::Valid)
        .map(|t| TokenRow {
            name: t.name,
            prefix: t.prefix,
            region: t.region.and_then(|r| names.get(&r).cloned()).unwrap_or_default(),
            expires: time(t.expires_at, at),
        })
        .collect();
    let s: vantage_core::settings::ProbeSettings = api.get("/v1/settings/probes").await?;
    let s = vantage_core::settings::ProbeSettingsInput::from(s);
    let d: vantage_core::detection::DetectionSettings = api.get("/v1/settings/detection").await?;
    let d = vantage_core::detection::DetectionSettingsInput::from(d);
    let page = ProbersPage {
        frame: Frame::new(&v, "Probers", "probers", 10),
        probers: rows,
        regions: regions.items.iter().map(|r| (r.id, format!("{} ({})", r.name, r.code))).collect(),
        tokens,
        settings: vec![
            ("interval_s", "Round every, s", s.interval_s),
            ("timeout_ms", "Attempt timeout, ms", s.timeout_ms),
            ("attempts", "Attempts a round", s.attempts),
            ("loss_pct", "Failing at loss, %", s.loss_pct),
            ("failing_before_unreachable_s", "Failing before unreachable, s", s.failing_before_unreachable_s),
            ("answering_before_reachable_s", "Answering before reachable, s", s.answering_before_reachable_s),
        ],
        confirm: d.confirm,
        detection: vec![
            ("probe_budget_per_s", "Probe budget, probes/s a target", d.probe_budget_per_s),
            ("damping_window_s", "Flap window, s", d.damping_window_s),
            ("damping_max_multiplier", "Longest damping, ×", d.damping_max_multiplier),
            ("damping_stable_s", "Stable before undamped, s", d.damping_stable_s),
        ],
    };
    Ok(render(&page))
}

#[derive(Template)]
#[template(path = "prober.html")]
struct ProberPage {
    frame: Frame,
    row: ProberRow,
    results: Vec<ResultView>,
    results_by_prober: bool,
}

pub(in crate::ui) async fn prober(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Path(id): Path<i64>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let p: views::Prober = api.get(&format!("/v1/probers/{id}")).await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let results: Items<views::ResultRow> = api.get(&format!("/v1/probers/{id}/results")).await?;
    let names = region_names(&regions.items);
    let row = ProberRow::of(
        &p,
        p.hostname.clone().unwrap_or_default(),
        names.get(&p.region).cloned().unwrap_or_default(),
        at,
    );
    let page = ProberPage {
        frame: Frame::new(&v, format!("Prober {}", p.name), "probers", 10),
        row,
        results: results.items.iter().map(|r| result_view(r, false, &names, at)).collect(),
        results_by_prober: false,
    };
    Ok(render(&page))
}
