//! Open and recently resolved alerts, and the channels they go to (each with its test
//! button).

use super::*;
use vantage_control::alerts::{Silence, WebhookFormat};

#[derive(Template)]
#[template(path = "alerts.html")]
struct AlertsPage {
    frame: Frame,
    /// Each open alert, with what holds its notification (`silence 3`, `maintenance 4`) if
    /// anything does, and the matchers that would silence it.
    open: Vec<(AlertRow, Option<String>, String)>,
    recent: Vec<AlertRow>,
    channels: Vec<ChannelRow>,
    silences: Vec<SilenceRow>,
}

/// One silence as the page lists it.
#[derive(Debug)]
struct SilenceRow {
    id: i64,
    state: &'static str,
    matchers: String,
    ends: Markup,
    by: String,
    comment: String,
    holds: usize,
}

/// One notification channel as the page lists it.
#[derive(Debug)]
struct ChannelRow {
    id: i64,
    name: String,
    format: &'static str,
    /// Where it delivers, in words (never its secret).
    to: String,
    enabled: bool,
    /// Its fields as the API takes them, never its secret, for the form that edits it.
    values: String,
}

fn channel_row(w: &views::Channel) -> ChannelRow {
    let h = &w.webhook;
    let url = h.url.clone().unwrap_or_default();
    let to = match h.format {
        WebhookFormat::Slack => "Slack incoming webhook (its URL is a secret)".to_owned(),
        WebhookFormat::Email => format!("{} via {url}", h.to.join(", ")),
        _ => url,
    };
    let mut values = serde_json::to_value(h).unwrap_or_default();
    if let Some(o) = values.as_object_mut() {
        o.remove("secret");
    }
    ChannelRow {
        id: w.id,
        name: h.name.clone(),
        format: h.format.as_str(),
        to,
        enabled: h.enabled,
        values: values.to_string(),
    }
}

pub(in crate::ui) async fn alerts(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let at = now();
    let a: views::Alerts = client(&ui, &v).get("/v1/alerts").await?;
    let channels: Items<views::Channel> = client(&ui, &v).get("/v1/webhooks").await?;
    let silences: Items<views::Silence> = client(&ui, &v).get("/v1/silences").await?;
    let mut recent = a.recent;
    recent.sort_by_key(|a| std::cmp::Reverse(a.resolved_at));
    let page = AlertsPage {
        frame: Frame::new(&v, "Alerts", "alerts", 10),
        open: (a.open.iter())
            .map(|x| {
                (
                    alert_row(x, at),
                    a.held.get(&x.key).map(ToString::to_string),
                    Silence::matchers_for(x).join(" "),
                )
            })
            .collect(),
        recent: recent.iter().map(|x| alert_row(x, at)).collect(),
        channels: channels.items.iter().map(channel_row).collect(),
        silences: silences
            .items
            .into_iter()
            .map(|s| SilenceRow {
                id: s.id,
                state: match s.state {
                    views::SilenceState::Pending => "pending",
                    views::SilenceState::Active => "active",
                    views::SilenceState::Expired => "expired",
                },
                matchers: s.silence.matchers.join(" "),
                ends: time(s.silence.ends_at, at),
                by: s.silence.created_by,
                comment: s.silence.comment,
                holds: s.holds.len(),
            })
            .collect(),
    };
    Ok(render(&page))
}
