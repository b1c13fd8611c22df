//! The pages: each reads the admin API (in process, as the visitor), shapes what it read into
//! rows of text for its template, and renders. Nothing here decides anything the API has not
//! already decided; the only judgement is how a node's state reads at a glance ([`health`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use vantage_core::Timestamp;

use super::chart::{self, Chart};
use super::client::{Client, PageError};
use super::format::{
    self, Markup, Tone, action, badge, comparison, esc, level, metric, ms, num, pct, span, stamp, time,
    time_or, word,
};
use super::views::{self, Items};
use super::{Ui, Visitor, render};
use crate::api::Range;
use crate::support::now;
use crate::views::{ProberKind, PublishState};
use vantage_control::config::TokenState;
use vantage_control::observe::ProberStatus;
use vantage_core::address::AddressSource;
use vantage_core::ids::{GroupId, LineId, RegionId};
use vantage_core::reachability::{Condition as AddressCondition, Reachability};
use vantage_core::rules::{Aggregate, MatchMode};

type PageResult = Result<Response, PageError>;

/// What every page's frame shows: the title, which tab is current, who is logged in, and how
/// often the page refreshes itself (0: never).
#[derive(Debug, Clone)]
pub(in crate::ui) struct Frame {
    title: String,
    active: &'static str,
    user: String,
    refresh: u32,
    /// Why the store could not be read for the page (its banner says changes are paused).
    store_away: Option<String>,
}

impl Frame {
    fn new(v: &Visitor, title: impl Into<String>, active: &'static str, refresh: u32) -> Self {
        Frame { title: title.into(), active, user: v.user.name.clone(), refresh, store_away: None }
    }

    /// Says, on a page that reads what only the store keeps, when `api` found it away.
    fn reading(mut self, api: &Client) -> Self {
        self.store_away = api.store_away();
        self
    }
}

fn client(ui: &Ui, v: &Visitor) -> Client {
    Client::new(ui.api.clone(), &v.session)
}

/// Percent-encodes a query value or path.
pub(in crate::ui) fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

mod alerts;
mod audit;
mod checks;
mod clusters;
mod diff;
mod login;
mod maintenance;
mod mirrors;
mod monitors;
mod node;
mod overview;
mod probers;
mod regions;
mod shapes;
mod status_pages;
mod tenants;
mod timeline;
mod tokens;

pub(super) use alerts::alerts;
pub(super) use audit::audit;
pub(super) use checks::checks;
pub(super) use clusters::{cluster, clusters};
pub(super) use diff::diff;
pub(super) use login::{error_page, login_page, not_found};
pub(super) use maintenance::maintenance;
pub(super) use mirrors::{mirror, mirrors};
pub(super) use monitors::{monitor, monitors};
pub(super) use node::node;
pub(super) use overview::overview;
pub(super) use probers::{prober, probers};
pub(super) use regions::regions;
use shapes::*;
pub(super) use status_pages::status_pages;
pub(super) use tenants::tenants;
pub(super) use tokens::tokens;
