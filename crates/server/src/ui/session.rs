//! UI sessions: a random id in an HttpOnly, SameSite=Strict cookie, mapped in memory to the id
//! of the admin token that logged in. Nothing is stored: a restart logs everyone out. A session
//! ends at logout, after a day unused, a week after login, or as soon as its token is revoked.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use axum::http::{HeaderMap, header};
use rand::RngCore;

use crate::support::lock;
use vantage_control::config::Config;

/// The cookie's name.
pub(crate) const COOKIE: &str = "vantage_session";
/// The header that must accompany the cookie on `/v1` (a cross-site form cannot set it).
pub(crate) const UI_HEADER: &str = "x-vantage-ui";
/// A session unused this long ends.
const IDLE: Duration = Duration::from_secs(24 * 3600);
/// A session ends this long after login, used or not.
const LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// Sessions kept at most; the least recently used go first.
const MAX_SESSIONS: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Session {
    token: i64,
    created: Instant,
    used: Instant,
}

/// Every open session.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

/// Who a valid session belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionUser {
    /// The admin token's id.
    pub token: i64,
    /// The admin token's name (the audit actor is `admin:<name>`, as with bearer tokens).
    pub name: String,
    /// The token may read, not change.
    pub read_only: bool,
}

impl Sessions {
    /// Opens a session for the admin token `token`; returns its id (64 hex digits).
    pub(crate) fn open(&self, token: i64) -> String {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let id = hex::encode(bytes);
        let at = Instant::now();
        let mut map = lock(&self.map);
        map.retain(|_, s| alive(s, at));
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(id.clone(), Session { token, created: at, used: at });
        id
    }

    /// The user of session `id`, when it is open and its token still exists; marks it used.
    /// A session whose token was revoked or that expired is closed here.
    pub(crate) fn resolve(&self, id: &str, config: &Config) -> Option<SessionUser> {
        let at = Instant::now();
        let mut map = lock(&self.map);
        let s = map.get_mut(id)?;
        let token = config.admin_tokens.get(&s.token).filter(|_| alive(s, at));
        match token {
            Some(t) => {
                s.used = at;
                Some(SessionUser { token: s.token, name: t.value.name.clone(), read_only: t.value.read_only })
            }
            None => {
                map.remove(id);
                None
            }
        }
    }

    /// Closes session `id`.
    pub(crate) fn close(&self, id: &str) {
        lock(&self.map).remove(id);
    }

    /// Open sessions (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.map).len()
    }
}

fn alive(s: &Session, at: Instant) -> bool {
    at.duration_since(s.used) < IDLE && at.duration_since(s.created) < LIFETIME
}

/// The session id from the `Cookie` headers, if any.
pub(crate) fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty())
}

/// The `Set-Cookie` value that hands out session `id` (`Secure` when served over TLS).
pub(crate) fn set_cookie(id: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}", LIFETIME.as_secs())
}

/// The `Set-Cookie` value that removes the session cookie.
pub(crate) fn clear_cookie(secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}")
}

/// True when the request carries `X-Vantage-UI: 1`.
pub(crate) fn has_ui_header(headers: &HeaderMap) -> bool {
    headers.get(UI_HEADER).is_some_and(|v| v.as_bytes() == b"1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use vantage_control::config::{AdminToken, Object};
    use vantage_core::Timestamp;

    fn config_with_token(id: i64, name: &str) -> Config {
        let mut c = Config::default();
        c.put(
            id,
            Object::AdminToken(AdminToken {
                name: name.into(),
                prefix: "vta_x".into(),
                sha256: "00".into(),
                read_only: false,
            }),
            Timestamp::EPOCH,
            Timestamp::EPOCH,
        );
        c
    }

    #[test]
    fn a_session_lives_while_its_token_does() {
        let s = Sessions::default();
        let with = config_with_token(7, "ops");
        let id = s.open(7);
        assert_eq!(id.len(), 64);
        assert_ne!(s.open(7), id, "ids are random");
        assert_eq!(
            s.resolve(&id, &with),
            Some(SessionUser { token: 7, name: "ops".into(), read_only: false })
        );
        assert_eq!(s.resolve("nope", &with), None);
        // The token is revoked: the session ends, and stays ended.
        assert_eq!(s.resolve(&id, &Config::default()), None);
        assert_eq!(s.resolve(&id, &with), None);
        let other = s.open(7);
        s.close(&other);
        assert_eq!(s.resolve(&other, &with), None);
        assert_eq!(s.len(), 1);
    }

    /// On tokio's paused clock: a day unused ends a session, and a week after login ends one
    /// however often it is used.
    #[tokio::test(start_paused = true)]
    async fn a_session_ends_after_a_day_unused_or_a_week_after_login() {
        let s = Sessions::default();
        let with = config_with_token(7, "ops");
        let (idle, busy) = (s.open(7), s.open(7));
        let second = Duration::from_secs(1);
        tokio::time::advance(IDLE - second).await;
        assert!(s.resolve(&busy, &with).is_some());
        tokio::time::advance(2 * second).await;
        assert_eq!(s.resolve(&idle, &with), None, "a day and a second unused");
        assert!(s.resolve(&busy, &with).is_some(), "used two seconds ago");
        let mut since_login = IDLE + second;
        let step = IDLE - second;
        while since_login + step < LIFETIME {
            tokio::time::advance(step).await;
            since_login += step;
            assert!(s.resolve(&busy, &with).is_some(), "used within the day, {since_login:?} after login");
        }
        tokio::time::advance(LIFETIME - since_login).await;
        assert_eq!(s.resolve(&busy, &with), None, "a week after login");
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1; vantage_session=abc ; b=2"));
        assert_eq!(cookie(&h), Some("abc"));
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1"));
        h.append(header::COOKIE, HeaderValue::from_static("vantage_session=def"));
        assert_eq!(cookie(&h), Some("def"));
        assert_eq!(cookie(&HeaderMap::new()), None);
        let set = set_cookie("abc", false);
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"));
        assert!(!set.contains("Secure"));
        assert!(set_cookie("abc", true).ends_with("; Secure"), "over TLS");
        assert!(clear_cookie(true).ends_with("; Secure"));
    }
}
