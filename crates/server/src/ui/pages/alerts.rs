//! Open and recently resolved alerts.

use super::*;

#[derive(Template)]
#[template(path = "alerts.html")]
struct AlertsPage {
    frame: Frame,
    open: Vec<AlertRow>,
    recent: Vec<AlertRow>,
}

pub(in crate::ui) async fn alerts(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let at = now();
    let a: views::Alerts = client(&ui, &v).get("/v1/alerts").await?;
    let mut recent = a.recent;
    recent.sort_by_key(|a| std::cmp::Reverse(a.resolved_at));
    let page = AlertsPage {
        frame: Frame::new(&v, "Alerts", "alerts", 10),
        open: a.open.iter().map(|x| alert_row(x, at)).collect(),
        recent: recent.iter().map(|x| alert_row(x, at)).collect(),
    };
    Ok(render(&page))
}
