//! Mirrors and doors (SPEC §6) inside the control core: the registry loaded from files, what
//! the probers saw of each mirror, the check runs operators ask for, the endpoint targets
//! probers are given, and the snapshot doors choose from.

pub mod book;
mod core;
pub mod doors;
mod findings;
mod latency;
pub mod registry;
mod yaml;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::check::{Check, CheckInput, Method};
use vantage_core::mirror::{Mirror, Scheme};
use vantage_core::wire::EndpointTarget;

pub use self::core::{FreshnessCheck, Mirrors};
use crate::config::Config;
use crate::identity::Caller;
pub use registry::{LoadError, Registry, Tenant};

/// Operators may start one check run this often, across all callers (SPEC §6).
pub const CHECK_RUN_EVERY_S: i64 = 60;

/// The outcome of the registry's reloads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct ReloadStatus {
    /// The last reload, successful or not.
    pub at: Option<Timestamp>,
    /// The last reload that swapped the registry in.
    pub loaded_at: Option<Timestamp>,
    /// Why the last reload failed; `None` when it passed.
    pub error: Option<LoadError>,
    /// Every file the last reading of the directory left out, with why (a symbolic link, a
    /// named pipe, too large, not UTF-8, unreadable); while any is, the reload is refused and
    /// `error` names the first. Empty when every file could be read.
    #[serde(default)]
    pub skipped: Vec<LoadError>,
    /// Failed reloads since the start.
    pub failures: u64,
}

/// A check run an operator asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRun {
    /// When it was asked for.
    pub at: Timestamp,
    /// The regions it asks (`None`: all).
    pub regions: Option<BTreeSet<String>>,
    /// Probers told so far (each is told once).
    pub told: BTreeSet<Caller>,
}

/// Why a check run was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckRefused {
    /// The last run is younger than [`CHECK_RUN_EVERY_S`].
    TooSoon {
        /// Seconds until one may start.
        retry_after_s: u64,
    },
    /// The request named something that does not exist.
    Invalid(vantage_core::Error),
}

impl CheckRun {
    /// Whether `caller`, in `region`, should be told to probe now (once per run).
    pub(crate) fn tell(&mut self, caller: Caller, region: Option<&str>) -> bool {
        let asked = match (&self.regions, region) {
            (None, Some(_)) => true,
            (Some(set), Some(r)) => set.contains(r),
            (_, None) => false,
        };
        asked && self.told.insert(caller)
    }
}

/// The check of a mirror that names none while no check is named `default`: the built-in
/// attributes, at `/`. Any HTTP answer makes a mirror `ok` (reference 004), and every web
/// server answers at its root, so a plain mirror is measured without a check written for it;
/// the clusters' `/.vantage/health` is a path only Vantage's edges serve.
pub fn builtin_check() -> Check {
    let root = CheckInput { path: Some("/".into()), ..CheckInput::default() };
    // The defaults with a valid path are valid.
    Check::parse(root).unwrap_or_else(|_| unreachable!("the built-in mirror check is valid"))
}

/// The URL a mirror is probed at: [`probe_origin`], then the check's path — or, when the check
/// probes the root (the default) and the mirror has a base URL, the base's path: by default
/// a mirror is checked where doors send its visitors.
pub fn probe_url(m: &Mirror, check: &Check, doors: Scheme) -> String {
    let path = if check.path() == "/" { m.base_path() } else { check.path() };
    format!("{}{path}", probe_origin(m, check, doors))
}

/// `scheme://host[:port]` a mirror is reached at: [`probe_scheme`], and the base URL's host and
/// port when it has one, else its host.
pub fn probe_origin(m: &Mirror, check: &Check, doors: Scheme) -> String {
    let authority = m
        .base_url
        .as_deref()
        .and_then(|b| b.split_once("://"))
        .map(|(_, rest)| rest.split('/').next().unwrap_or_default().to_owned())
        .unwrap_or_else(|| m.host.clone());
    format!("{}://{authority}", probe_scheme(m, check, doors))
}

/// The scheme a mirror is reached with: its check's when the check names `http` or
/// `https`, else its base URL's, else the scheme doors send visitors with (`doors`, the
/// mirror settings'): a mirror is probed the way its visitors reach it.
pub fn probe_scheme(m: &Mirror, check: &Check, doors: Scheme) -> &'static str {
    match check.method() {
        Some(Method::Http) => "http",
        Some(Method::Https) => "https",
        Some(Method::Tcp | Method::Hls) | None => match m.base_scheme() {
            Some("http") => "http",
            Some(_) => "https",
            None => doors.as_str(),
        },
    }
}

/// Every mirror as an endpoint target, with the checks they index appended to `checks`.
pub fn endpoint_targets(c: &Config, checks: &mut Vec<Check>) -> Vec<EndpointTarget> {
    let mut out = Vec::with_capacity(c.mirrors.mirrors.len());
    for m in c.mirrors.mirrors.values() {
        let check = book::check_of(c, &m.host);
        let index = match checks.iter().position(|x| *x == check) {
            Some(i) => i,
            None => {
                checks.push(check.clone());
                checks.len() - 1
            }
        };
        out.push(EndpointTarget {
            key: crate::target::Subject::Mirror(m.host.clone()).to_string(),
            url: probe_url(m, &check, c.mirror_settings.scheme()),
            address: m.address,
            check: u32::try_from(index).unwrap_or(u32::MAX),
            any_status: true,
            // A mirror's check stays on the mirror.
            allowed_hosts: Vec::new(),
        });
    }
    out
}
