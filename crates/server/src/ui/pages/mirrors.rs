//! The mirrors (SPEC §6): how the registry's last reload went, every mirror with its verdict
//! and manual block, the region × mirror matrix, and one mirror with each prober's opinion.

use super::*;
use vantage_core::mirror::MirrorSettingsInput;

/// The registry's reloads. A failed one keeps the previous registry serving, so the page
/// says so and names the file, field and reason the operator has to fix.
#[derive(Debug)]
struct Reload {
    error: Option<views::LoadError>,
    /// When the last reload ran (the failed one, when it failed).
    at: Markup,
    /// When the registry that serves was swapped in (none: no reload has passed yet).
    loaded: Option<Markup>,
    failures: u64,
    /// Every file the reading left out, with why (the error names the first).
    skipped: Vec<views::LoadError>,
}

fn reload(r: &views::ReloadStatus, at: Timestamp) -> Reload {
    Reload {
        error: r.error.clone(),
        at: time_or(r.at, at, "never"),
        loaded: r.loaded_at.map(|t| time(t, at)),
        failures: r.failures,
        skipped: if r.skipped.len() > 1 { r.skipped.clone() } else { Vec::new() },
    }
}

/// A mirror's freshness check and where it stands. A stale mirror keeps its verdict but
/// doors leave it out until a fresh check, which the verdict alone would not tell.
#[derive(Debug)]
struct FreshnessRow {
    /// `stale · lag 2 h`, `fresh · lag 12 s`, or `unknown`.
    state: Markup,
    stale: bool,
    max_lag: String,
    path: String,
    reference: String,
    checked: Markup,
    /// Why the last check read no lag; empty when it read one.
    error: String,
}

fn freshness_row(m: &views::Mirror, at: Timestamp) -> Option<FreshnessRow> {
    let f = m.freshness.as_ref()?;
    let s = m.freshness_state.clone().unwrap_or_default();
    Some(FreshnessRow {
        state: format::freshness(s.stale, s.lag_s),
        stale: s.stale,
        max_lag: format::seconds(Some(f64::from(f.max_lag_s))),
        path: f.path.clone(),
        reference: f.reference.clone(),
        checked: time_or(s.checked_at, at, "not checked yet"),
        error: s.error.unwrap_or_default(),
    })
}

/// A mirror's record and verdict, as its row and its page's facts show them.
#[derive(Debug)]
struct MirrorRow {
    host: String,
    /// The host as a URL path segment.
    path: String,
    verdict: Markup,
    since: Markup,
    weight: u32,
    /// Comma-separated; empty: every tenant.
    tenants: String,
    manual_block: bool,
    note: String,
    /// An open maintenance window takes it out of the doors.
    in_maintenance: bool,
    /// Its availability bars (on the list only).
    availability: Markup,
    last_check: Markup,
    /// None: the mirror has no freshness check.
    freshness: Option<FreshnessRow>,
    /// Its record as the API takes it (no derived field), for the form that edits it.
    values: String,
}

fn mirror_row(m: &views::Mirror, at: Timestamp) -> MirrorRow {
    MirrorRow {
        host: m.host.clone(),
        path: urlencode(&m.host),
        verdict: format::verdict(&m.verdict.to_string()),
        since: time_or(m.verdict_since, at, "—"),
        weight: m.weight,
        tenants: m.tenants.join(", "),
        manual_block: m.manual_block,
        note: m.manual_note.clone(),
        in_maintenance: m.in_maintenance,
        availability: Markup::default(),
        last_check: time_or(m.last_check, at, "never"),
        freshness: freshness_row(m, at),
        values: serde_json::json!({
            "host": m.host,
            "tenants": m.tenants,
            "weight": m.weight,
            "manual_block": m.manual_block,
            "manual_note": m.manual_note,
            "check": m.check,
            "address": m.address,
            "freshness": m.freshness,
            "base_url": m.base_url,
        })
        .to_string(),
    }
}

/// A column of the matrix: a region's code and name.
#[derive(Debug)]
struct RegionColumn {
    code: String,
    name: String,
}

/// A mirror's row of the matrix: per column, the region's code and its cell (none: no
/// measurement from there yet).
#[derive(Debug)]
struct MatrixRow {
    host: String,
    path: String,
    cells: Vec<(String, Option<Markup>)>,
}

/// One column per region: every region the API lists, and any a mirror still has a status
/// from (a region deleted since), by code.
fn columns(regions: &[views::Region], mirrors: &[views::Mirror]) -> Vec<RegionColumn> {
    let mut names: BTreeMap<String, String> =
        regions.iter().map(|r| (r.code.clone(), r.name.clone())).collect();
    for code in mirrors.iter().flat_map(|m| m.regions.keys()) {
        names.entry(code.clone()).or_insert_with(|| code.clone());
    }
    names.into_iter().map(|(code, name)| RegionColumn { code, name }).collect()
}

fn matrix_row(m: &views::Mirror, columns: &[RegionColumn], at: Timestamp) -> MatrixRow {
    let cells = columns
        .iter()
        .map(|c| {
            let cell =
                m.regions.get(&c.code).map(|o| format::region_cell(o.status.as_str(), o.latency, o.at, at));
            (c.code.clone(), cell)
        })
        .collect();
    MatrixRow { host: m.host.clone(), path: urlencode(&m.host), cells }
}

#[derive(Template)]
#[template(path = "mirrors.html")]
struct MirrorsPage {
    frame: Frame,
    tab: &'static str,
    reload: Reload,
    mirrors: Vec<MirrorRow>,
    columns: Vec<RegionColumn>,
    matrix: Vec<MatrixRow>,
    /// The named checks a mirror may name.
    checks: Vec<String>,
    /// The mirror and door settings, for their card (absent in tests of other parts).
    settings: Option<MirrorSettingsInput>,
}

pub(in crate::ui) async fn mirrors(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let list: views::MirrorList = api.get("/v1/mirrors").await?;
    let checks: Items<views::Check> = api.get("/v1/checks").await?;
    let settings: MirrorSettingsInput = api.get("/v1/settings/mirrors").await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let columns = columns(&regions.items, &list.mirrors);
    let availability: Items<views::Availability> = api.get("/v1/availability?kind=mirror").await?;
    let bars: HashMap<String, Markup> =
        availability.items.iter().map(|r| (r.subject.clone(), format::bars(r))).collect();
    let row = |m: &views::Mirror| MirrorRow {
        availability: bars.get(&format!("mirror:{}", m.host)).cloned().unwrap_or_default(),
        ..mirror_row(m, at)
    };
    let page = MirrorsPage {
        frame: Frame::new(&v, "Mirrors", "mirrors", 10),
        tab: "mirrors",
        reload: reload(&list.reload, at),
        mirrors: list.mirrors.iter().map(row).collect(),
        matrix: list.mirrors.iter().map(|m| matrix_row(m, &columns, at)).collect(),
        columns,
        checks: checks.items.into_iter().map(|c| c.name).collect(),
        settings: Some(settings),
    };
    Ok(render(&page))
}

/// A region's latest measurement of one mirror.
#[derive(Debug)]
struct RegionRow {
    region: String,
    status: Markup,
    latency: String,
    at: Markup,
}

/// One prober's opinion of a mirror, with its window register.
#[derive(Debug)]
struct OpinionRow {
    id: i64,
    name: String,
    region: String,
    status: Markup,
    error: String,
    rtt: String,
    checked: Markup,
    strip: Strip,
}

#[derive(Template)]
#[template(path = "mirror.html")]
struct MirrorPage {
    frame: Frame,
    row: MirrorRow,
    check: String,
    address: String,
    counters: String,
    regions: Vec<RegionRow>,
    probers: Vec<OpinionRow>,
}

pub(in crate::ui) async fn mirror(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
    Path(host): Path<String>,
) -> PageResult {
    let api = client(&ui, &v);
    let at = now();
    let m: views::Mirror = api.get(&format!("/v1/mirrors/{}", urlencode(&host))).await?;
    let regions: Items<views::Region> = api.get("/v1/regions").await?;
    let name = |code: &str| match regions.items.iter().find(|r| r.code == code) {
        Some(r) => format!("{} ({code})", r.name),
        None => code.to_owned(),
    };
    let region_rows = m
        .regions
        .iter()
        .map(|(code, o)| RegionRow {
            region: name(code),
            status: format::region_status(o.status.as_str()),
            latency: if o.latency > 0 { format!("{} ms", o.latency) } else { "—".into() },
            at: time(o.at, at),
        })
        .collect();
    let probers = m
        .probers
        .iter()
        .map(|p: &views::MirrorProber| OpinionRow {
            id: p.prober,
            name: p.name.clone(),
            region: name(&p.region),
            status: format::region_status(p.status.as_str()),
            error: p
                .error
                .map(|e| format!("{} ({})", error_label(e.as_str()), e.as_str()))
                .unwrap_or_default(),
            rtt: ms(p.rtt_ms),
            checked: time(p.checked, at),
            strip: strip(&p.window),
        })
        .collect();
    let page = MirrorPage {
        frame: Frame::new(&v, format!("Mirror {}", m.host), "mirrors", 10),
        row: mirror_row(&m, at),
        check: m.check.clone().unwrap_or_else(|| "default".into()),
        address: m.address.clone().unwrap_or_default(),
        counters: format!("{} failing of {} region updates", m.blocked_count, m.total_checked),
        regions: region_rows,
        probers,
    };
    Ok(render(&page))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frame of a page of these tests.
    fn frame(title: &str) -> Frame {
        Frame { title: title.into(), active: "mirrors", user: "ops".into(), refresh: 10, store_away: None }
    }

    fn mirror(host: &str, regions: &[&str]) -> views::Mirror {
        let regions: serde_json::Map<String, Value> = regions
            .iter()
            .map(|r| {
                (
                    (*r).to_owned(),
                    serde_json::json!({"status": "ok", "latency": 4, "at": "2026-12-01T09:00:00Z"}),
                )
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "host": host, "tenants": [], "weight": 1, "manual_block": false, "manual_note": "",
            "check": null, "address": null, "verdict": "live", "verdict_since": null, "last_check": null,
            "blocked_count": 0, "total_checked": 1, "regions": regions, "probers": [],
        }))
        .unwrap()
    }

    fn region(code: &str, name: &str) -> views::Region {
        serde_json::from_value(serde_json::json!({
            "id": 1, "created_at": "2026-12-01T09:00:00Z", "updated_at": "2026-12-01T09:00:00Z",
            "code": code, "name": name, "client_networks": [], "probers": 0,
        }))
        .unwrap()
    }

    /// Every region is a column, in code order, and so is a region a mirror still has a
    /// status from after it was deleted; a mirror not measured from a region has no cell there.
    #[test]
    fn the_matrix_has_a_column_per_region() {
        let regions = [region("us-va", "Virginia"), region("ap-sg", "Singapore")];
        let mirrors = [mirror("a.example.net", &["ap-sg", "eu-gone"]), mirror("b.example.net", &[])];
        let cols = columns(&regions, &mirrors);
        let codes: Vec<(&str, &str)> = cols.iter().map(|c| (c.code.as_str(), c.name.as_str())).collect();
        assert_eq!(codes, [("ap-sg", "Singapore"), ("eu-gone", "eu-gone"), ("us-va", "Virginia")]);
        let at = Timestamp::from_secs(1_800_000_000);
        let a = matrix_row(&mirrors[0], &cols, at);
        let filled: Vec<(&str, bool)> =
            a.cells.iter().map(|(c, cell)| (c.as_str(), cell.is_some())).collect();
        assert_eq!(filled, [("ap-sg", true), ("eu-gone", true), ("us-va", false)]);
        assert!(matrix_row(&mirrors[1], &cols, at).cells.iter().all(|(_, c)| c.is_none()));
    }

    /// A mirror without a freshness check shows none; one with a check reads unknown until a
    /// check reads a lag, and a stale one says it is out of door rotation, with the last
    /// check's error escaped.
    #[test]
    fn freshness_shows_lag_stale_and_the_last_error() {
        let at = Timestamp::from_secs(1_800_000_000);
        let mut m = mirror("a.example.net", &[]);
        assert!(freshness_row(&m, at).is_none());
        m.freshness = Some(
            serde_json::from_value(serde_json::json!({
                "path": "/debian/project/trace/master",
                "reference": "https://ref.example.org/debian/project/trace/master",
                "max_lag_s": 3600,
            }))
            .unwrap(),
        );
        let f = freshness_row(&m, at).unwrap();
        assert_eq!(f.state.0, "<span class=\"badge neutral\">unknown</span>");
        assert!(f.checked.0.contains("not checked yet") && f.error.is_empty() && !f.stale);
        m.freshness_state = Some(
            serde_json::from_value(serde_json::json!({
                "checked_at": "2027-01-15T07:59:48Z", "lag_s": 7200, "stale": true,
                "error": "reference: <b>404</b>",
            }))
            .unwrap(),
        );
        let page = MirrorPage {
            frame: frame("Mirror"),
            row: mirror_row(&m, at),
            check: "default".into(),
            address: String::new(),
            counters: String::new(),
            regions: Vec::new(),
            probers: Vec::new(),
        };
        let html = page.render().unwrap();
        let facts = &html[html.find("id=\"freshness\"").unwrap()..];
        assert!(facts.starts_with("id=\"freshness\"><span class=\"badge warn\">stale · lag 2 h</span> <strong>out of door rotation</strong>"), "{facts}");
        assert!(html.contains("lag allowed 60 min"), "{html}");
        assert!(html.contains("<time datetime=\"2027-01-15T07:59:48.000Z\""), "{html}");
        assert!(html.contains("reference: &#60;b&#62;404&#60;/b&#62;") && !html.contains("<b>404"), "{html}");
    }

    /// A reload refused for several unreadable files lists every one with its reason.
    #[test]
    fn every_skipped_file_is_listed() {
        let at = Timestamp::from_secs(1_800_000_000);
        let skipped = |file: &str, reason: &str| views::LoadError {
            file: file.into(),
            field: String::new(),
            reason: reason.into(),
        };
        let status = views::ReloadStatus {
            at: Some(at),
            loaded_at: None,
            error: Some(skipped("a.yaml", "a symbolic link")),
            failures: 1,
            skipped: vec![
                skipped("a.yaml", "a symbolic link"),
                skipped("b.yaml", "a named pipe, not a regular file"),
            ],
        };
        let page = MirrorsPage {
            frame: frame("Mirrors"),
            tab: "mirrors",
            reload: reload(&status, at),
            mirrors: Vec::new(),
            matrix: Vec::new(),
            columns: Vec::new(),
            checks: Vec::new(),
            settings: None,
        };
        let html = page.render().unwrap();
        let list = &html[html.find("id=\"reload-skipped\"").unwrap()..];
        assert!(list.contains("a.yaml</span>: a symbolic link"), "{list}");
        assert!(list.contains("b.yaml</span>: a named pipe, not a regular file"), "{list}");
    }

    /// What comes from the registry's files (notes, a failed reload's reason) is escaped, and
    /// a failed reload names its file, field and reason with the count of failed reloads.
    #[test]
    fn the_page_escapes_what_the_registry_holds() {
        let at = Timestamp::from_secs(1_800_000_000);
        let mut m = mirror("a.example.net", &["ap-sg"]);
        m.manual_block = true;
        m.manual_note = "<script>alert(1)</script> & \"more\"".into();
        let status = views::ReloadStatus {
            at: Some(at),
            loaded_at: None,
            error: Some(views::LoadError {
                file: "bad.example.net.yaml".into(),
                field: "weight".into(),
                reason: "must be a number, got <i>heavy</i>".into(),
            }),
            failures: 2,
            skipped: Vec::new(),
        };
        let columns = columns(&[region("ap-sg", "Singapore")], std::slice::from_ref(&m));
        let page = MirrorsPage {
            frame: frame("Mirrors"),
            tab: "mirrors",
            reload: reload(&status, at),
            mirrors: vec![mirror_row(&m, at)],
            matrix: vec![matrix_row(&m, &columns, at)],
            columns,
            checks: Vec::new(),
            settings: None,
        };
        let html = page.render().unwrap();
        assert!(!html.contains("<script>alert") && !html.contains("<i>heavy"), "{html}");
        assert!(html.contains("&#60;script&#62;alert(1)&#60;/script&#62; &#38; &#34;more&#34;"), "{html}");
        let banner = &html[html.find("id=\"reload-error\"").unwrap()..];
        let banner = &banner[..banner.find("</div>").unwrap()];
        for part in [
            "bad.example.net.yaml",
            "weight",
            "must be a number, got &#60;i&#62;heavy&#60;/i&#62;",
            "2 reloads have failed",
        ] {
            assert!(banner.contains(part), "{part} in {banner}");
        }
        assert!(
            html.contains("<td data-region=\"ap-sg\"><span class=\"badge good\">ok · 4 ms · <time "),
            "{html}"
        );
    }
}
