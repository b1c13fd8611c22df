//! Public status pages (`/status/{slug}`, its JSON and its SVG badge) on the public face:
//! what a page shows is the core's (`StatusPage::public`); this only finds the page and
//! writes it out. Nothing here is private unless the page opted in.

use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use vantage_control::status_page::{PublicPage, PublicState};

use crate::app::App;
use crate::error::ApiError;
use crate::support::now;

/// The routes of the public face.
pub(crate) fn public() -> Router<Arc<App>> {
    Router::new()
        .route("/status/{slug}", get(page))
        .route("/status/{slug}/status.json", get(json))
        .route("/status/{slug}/badge.svg", get(badge))
}

/// The page `slug` as its visitors see it now.
fn find(app: &App, slug: &str) -> Result<PublicPage, ApiError> {
    let core = app.view();
    let page = (core.config.status_pages.values())
        .find(|p| p.value.slug == slug)
        .ok_or_else(|| ApiError::NotFound("no such status page".into()))?;
    Ok(page.value.public(&core.config, &core.availability, now()))
}

#[derive(Template)]
#[template(path = "status_page.html")]
struct PageHtml {
    page: PublicPage,
    /// Each component's days as (class, title).
    bars: Vec<Vec<(&'static str, String)>>,
}

async fn page(State(app): State<Arc<App>>, Path(slug): Path<String>) -> Result<Response, ApiError> {
    let page = find(&app, &slug)?;
    let bars = (page.components.iter())
        .map(|c| {
            (c.days.iter())
                .map(|d| {
                    let (class, said) = crate::ui::bar(d.availability_pct);
                    (class, format!("{} {said}", d.date))
                })
                .collect()
        })
        .collect();
    let html = PageHtml { page, bars }.render().map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(([(header::CACHE_CONTROL, "no-cache")], Html(html)).into_response())
}

async fn json(State(app): State<Arc<App>>, Path(slug): Path<String>) -> Result<Response, ApiError> {
    Ok(([(header::CACHE_CONTROL, "no-cache")], axum::Json(find(&app, &slug)?)).into_response())
}

/// A badge as shields draw them: the page's title beside its state, in the state's colour.
async fn badge(State(app): State<Arc<App>>, Path(slug): Path<String>) -> Result<Response, ApiError> {
    let page = find(&app, &slug)?;
    let (label, state) = (crate::ui::esc(&page.title), page.state.words());
    let colour = match page.state {
        PublicState::Operational => "#2e9e5b",
        PublicState::Degraded | PublicState::Maintenance => "#d9a21b",
        PublicState::Outage => "#d64545",
        PublicState::Unknown => "#8a8f98",
    };
    // About 7 px a character at 11 px Verdana, as shields reckon.
    let (lw, sw) = (10 + 7 * page.title.chars().count(), 10 + 7 * state.len());
    let w = lw + sw;
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"20\" role=\"img\" aria-label=\"{label}: {state}\">\
<title>{label}: {state}</title><rect width=\"{lw}\" height=\"20\" fill=\"#555\"/>\
<rect x=\"{lw}\" width=\"{sw}\" height=\"20\" fill=\"{colour}\"/>\
<g fill=\"#fff\" text-anchor=\"middle\" font-family=\"Verdana,DejaVu Sans,sans-serif\" font-size=\"11\">\
<text x=\"{}\" y=\"14\">{label}</text><text x=\"{}\" y=\"14\">{state}</text></g></svg>",
        lw / 2,
        lw + sw / 2
    );
    Ok(([(header::CONTENT_TYPE, "image/svg+xml"), (header::CACHE_CONTROL, "no-cache")], svg).into_response())
}
