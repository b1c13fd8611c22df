//! Where alerts are sent: a notification channel (kept as a `webhook` object, its historic
//! name) of one of five formats — Vantage's JSON, the Alertmanager webhook payload, a Slack
//! incoming webhook, PagerDuty's Events API v2, or email over SMTP — validated here, each
//! field's refusal naming the field. The channel's credential (Slack's webhook URL,
//! PagerDuty's routing key, the SMTP password) is its `secret`: written, never read back.

use serde::{Deserialize, Serialize};
use vantage_core::Error;

use super::{Alert, AlertState};

/// What a view shows instead of a secret, and what an update may send back to keep it.
pub const HIDDEN: &str = "(hidden)";
/// Where PagerDuty events go unless a channel says otherwise.
pub const PAGERDUTY_EVENTS_URL: &str = "https://events.pagerduty.com/v2/enqueue";
/// The text of a Slack message, a PagerDuty summary and an email's subject, unless a channel
/// has its own template.
pub const DEFAULT_TEMPLATE: &str = "[{status}] {summary}";
/// The placeholders a template may use.
const PLACEHOLDERS: [&str; 8] =
    ["status", "kind", "key", "summary", "fired_at", "resolved_at", "details", "id"];
const MAX_TEMPLATE: usize = 2_000;
const MAX_RECIPIENTS: usize = 20;
const MAX_SECRET: usize = 2_048;

/// A notification channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Name, unique.
    pub name: String,
    /// Where to deliver: the URL POSTed to (`json`, `alertmanager`; `pagerduty`: the Events
    /// API, PagerDuty's own unless given), or the SMTP server (`email`: `smtp://host:587`
    /// with STARTTLS, `smtps://host:465`; plain SMTP only to a loopback address). A Slack
    /// channel has none: its URL is its secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Payload format.
    #[serde(default)]
    pub format: WebhookFormat,
    /// Disabled channels get nothing.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The credential, written and never read back (views show `(hidden)`; a change that
    /// leaves it out keeps it): Slack's incoming-webhook URL, PagerDuty's routing key, the SMTP
    /// password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// `email`: the SMTP user name (with the password in `secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// `email`: the sender's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// `email`: the recipients' addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// `slack`, `pagerduty`, `email`: the message (an email's first line is its subject), with
    /// `{status}`, `{kind}`, `{key}`, `{summary}`, `{fired_at}`, `{resolved_at}`, `{details}`
    /// and `{id}`; `[{status}] {summary}` unless given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

fn yes() -> bool {
    true
}

/// Payload of a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// Vantage's JSON: one alert per request.
    #[default]
    Json,
    /// The Alertmanager webhook payload (version 4).
    Alertmanager,
    /// A Slack incoming webhook: the template's text.
    Slack,
    /// PagerDuty Events API v2: `trigger` on firing, `resolve` on resolved, the alert's key as
    /// the dedup key.
    Pagerduty,
    /// An email over SMTP.
    Email,
}

/// An email channel's SMTP server, read from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpServer {
    pub host: String,
    pub port: u16,
    /// `smtps`: TLS from the first byte (else STARTTLS).
    pub implicit_tls: bool,
    /// No TLS at all: only ever to a loopback address (a local relay, a test's sink).
    pub plain: bool,
}

impl SmtpServer {
    /// Reads `smtp://host[:port]` or `smtps://host[:port]`; the refusal names `field`.
    pub fn parse(field: &str, url: &str) -> Result<SmtpServer, Error> {
        let bad = |why: &str| Error::invalid(field, why.to_owned());
        let (implicit_tls, rest) = if let Some(r) = url.strip_prefix("smtps://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("smtp://") {
            (false, r)
        } else {
            return Err(bad("must be smtp://host[:port] (STARTTLS) or smtps://host[:port]"));
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '@', '?', '#'])
            || authority.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(bad(
                "must be smtp://host[:port] or smtps://host[:port], nothing more (the user name and password have their own fields)",
            ));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') && (h.starts_with('[') || !h.contains(':')) => {
                (h, p.parse::<u16>().map_err(|_| bad("the port must be a number from 1 to 65535"))?)
            }
            _ => (authority, if implicit_tls { 465 } else { 587 }),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        if host.is_empty() || port == 0 {
            return Err(bad("must name a host and a port from 1 to 65535"));
        }
        let loopback =
            host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        Ok(SmtpServer { host, port, implicit_tls, plain: loopback && !implicit_tls })
    }
}

/// Whether `text` looks like one email address (no display name, no line breaks).
fn address(field: &str, text: &str) -> Result<String, Error> {
    let t = text.trim();
    let ok = t.len() <= 254
        && t.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.contains('@')
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains("..")
        })
        && !t
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ',' | ';' | '"'));
    if ok {
        Ok(t.to_owned())
    } else {
        Err(Error::invalid(field, format!("must be an email address (name@example.net), got {t:?}")))
    }
}

impl Webhook {
    /// Validates a channel: each format takes its own fields and refuses the others.
    pub fn check(self) -> Result<Webhook, Error> {
        let name = vantage_core::model::display_name("name", &self.name)?;
        let format = self.format;
        let unused = |field: &str, present: bool| {
            if present {
                Err(Error::invalid(field, format!("a {} channel takes no {field}", format.as_str())))
            } else {
                Ok(())
            }
        };
        let email = format == WebhookFormat::Email;
        unused("username", !email && self.username.is_some())?;
        unused("from", !email && self.from.is_some())?;
        unused("to", !email && !self.to.is_empty())?;
        let posts = matches!(format, WebhookFormat::Json | WebhookFormat::Alertmanager);
        unused("template", posts && self.template.is_some())?;
        if self.secret.as_deref() == Some(HIDDEN) {
            return Err(Error::invalid(
                "secret",
                "(hidden) is what a view shows: send the secret itself, or leave the field out to keep it",
            ));
        }
        if let Some(s) = &self.secret
            && (s.trim().is_empty() || s.len() > MAX_SECRET || s.chars().any(char::is_control))
        {
            return Err(Error::invalid("secret", format!("must be 1 to {MAX_SECRET} printable characters")));
        }
        let url = match format {
            WebhookFormat::Json | WebhookFormat::Alertmanager => {
                unused("secret", self.secret.is_some())?;
                let url = self
                    .url
                    .as_deref()
                    .ok_or_else(|| Error::invalid("url", "the URL to POST alerts to is required"))?;
                Some(vantage_core::monitor::endpoint_url("url", url)?)
            }
            WebhookFormat::Slack => {
                unused("url", self.url.is_some())?;
                let secret = self.secret.as_deref().ok_or_else(|| {
                    Error::invalid("secret", "the incoming webhook URL Slack gave (https://hooks.slack.com/services/…) is required")
                })?;
                // Never echoed: the URL is the credential.
                if vantage_core::monitor::endpoint_url("secret", secret).is_err() {
                    return Err(Error::invalid(
                        "secret",
                        "must be the incoming webhook URL Slack gave (https://hooks.slack.com/services/…)",
                    ));
                }
                None
            }
            WebhookFormat::Pagerduty => {
                if self.secret.is_none() {
                    return Err(Error::invalid(
                        "secret",
                        "the routing key of the PagerDuty integration (Events API v2) is required",
                    ));
                }
                let url = self.url.as_deref().unwrap_or(PAGERDUTY_EVENTS_URL);
                Some(vantage_core::monitor::endpoint_url("url", url)?)
            }
            WebhookFormat::Email => {
                let url = self.url.as_deref().ok_or_else(|| {
                    Error::invalid("url", "the SMTP server (smtp://host:587 or smtps://host:465) is required")
                })?;
                SmtpServer::parse("url", url)?;
                if self.username.is_some() != self.secret.is_some() {
                    let field = if self.username.is_some() { "secret" } else { "username" };
                    return Err(Error::invalid(
                        field,
                        "the SMTP user name and password (secret) go together",
                    ));
                }
                if let Some(u) = &self.username
                    && (u.is_empty() || u.len() > 254 || u.chars().any(char::is_control))
                {
                    return Err(Error::invalid("username", "must be 1 to 254 printable characters"));
                }
                let from = self
                    .from
                    .as_deref()
                    .ok_or_else(|| Error::invalid("from", "the sender's address is required"))?;
                address("from", from)?;
                if self.to.is_empty() || self.to.len() > MAX_RECIPIENTS {
                    return Err(Error::invalid("to", format!("1 to {MAX_RECIPIENTS} recipients")));
                }
                for (i, t) in self.to.iter().enumerate() {
                    address(&format!("to[{i}]"), t)?;
                }
                Some(url.trim().to_owned())
            }
        };
        if let Some(t) = &self.template {
            check_template(t)?;
        }
        Ok(Webhook { name, url, ..self })
    }

    /// Whether `other` delivers where this does (format, URL, user name): a channel that
    /// delivers elsewhere must be given its secret again, or an edit could send the stored one
    /// to a server of the editor's choosing.
    pub fn same_destination(&self, other: &Webhook) -> bool {
        (self.format, &self.url, &self.username) == (other.format, &other.url, &other.username)
    }

    /// The text of `a` by this channel's template.
    pub fn text(&self, a: &Alert) -> String {
        render(self.template.as_deref().unwrap_or(DEFAULT_TEMPLATE), a)
    }
}

impl WebhookFormat {
    /// The name, as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookFormat::Json => "json",
            WebhookFormat::Alertmanager => "alertmanager",
            WebhookFormat::Slack => "slack",
            WebhookFormat::Pagerduty => "pagerduty",
            WebhookFormat::Email => "email",
        }
    }
}

/// Every `{name}` of a template must be a placeholder.
fn check_template(t: &str) -> Result<(), Error> {
    if t.trim().is_empty() || t.len() > MAX_TEMPLATE {
        return Err(Error::invalid("template", format!("must be 1 to {MAX_TEMPLATE} characters")));
    }
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(Error::invalid("template", "a { without its }"));
        };
        let name = &after[..close];
        if !PLACEHOLDERS.contains(&name) {
            return Err(Error::invalid(
                "template",
                format!(
                    "{{{name}}} is not a placeholder: use {}",
                    PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(", ")
                ),
            ));
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

/// `template` with its placeholders filled from `a` (a template is checked when saved; an
/// unknown placeholder is left as written).
pub fn render(template: &str, a: &Alert) -> String {
    let status = match a.state {
        AlertState::Firing => "firing",
        AlertState::Resolved => "resolved",
    };
    let value = |name: &str| -> Option<String> {
        Some(match name {
            "status" => status.to_owned(),
            "kind" => a.kind.to_string(),
            "key" => a.key.clone(),
            "summary" => a.summary.clone(),
            "fired_at" => a.fired_at.to_string(),
            "resolved_at" => a.resolved_at.map(|t| t.to_string()).unwrap_or_default(),
            "details" => a.details.to_string(),
            "id" => a.id.to_string(),
            _ => return None,
        })
    };
    let mut out = String::with_capacity(template.len() + a.summary.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}').and_then(|close| Some((close, value(&after[..close])?))) {
            Some((close, v)) => {
                out.push_str(&v);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use vantage_core::Timestamp;

    use super::*;
    use crate::alerts::AlertKind;

    fn channel(doc: serde_json::Value) -> Result<Webhook, Error> {
        serde_json::from_value::<Webhook>(doc).unwrap().check()
    }

    fn refused(doc: serde_json::Value) -> (String, String) {
        let e = channel(doc).unwrap_err();
        (e.field().to_owned(), e.to_string())
    }

    #[test]
    fn each_format_takes_its_own_fields_and_names_the_one_wrong() {
        assert!(channel(json!({"name": "hook", "url": "https://hooks.example.net/x"})).is_ok());
        assert_eq!(refused(json!({"name": "hook"})).0, "url");
        assert_eq!(
            refused(json!({"name": "hook", "url": "https://h.example.net/", "secret": "s"})).0,
            "secret"
        );
        let slack = "https://hooks.slack.com/services/T0/B0/XXXX";
        assert!(channel(json!({"name": "ops", "format": "slack", "secret": slack})).is_ok());
        let (field, text) =
            refused(json!({"name": "ops", "format": "slack", "secret": "hooks.slack.com/T0/B0/XXXX"}));
        assert_eq!(field, "secret");
        assert!(!text.contains("XXXX"), "a secret is never echoed: {text}");
        assert_eq!(
            refused(json!({"name": "ops", "format": "slack", "url": slack, "secret": slack})).0,
            "url"
        );
        let pd = channel(json!({"name": "pd", "format": "pagerduty", "secret": "R0UT1NGKEY"})).unwrap();
        assert_eq!(pd.url.as_deref(), Some(PAGERDUTY_EVENTS_URL));
        assert_eq!(refused(json!({"name": "pd", "format": "pagerduty"})).0, "secret");
        let mail = json!({"name": "m", "format": "email", "url": "smtp://mail.example.net",
                          "from": "vantage@example.net", "to": ["oncall@example.net"]});
        assert!(channel(mail.clone()).is_ok());
        let mut no_to = mail.clone();
        no_to["to"] = json!([]);
        assert_eq!(refused(no_to).0, "to");
        let mut bad_to = mail.clone();
        bad_to["to"] = json!(["oncall@example.net", "not an address"]);
        assert_eq!(refused(bad_to).0, "to[1]");
        let mut two_ats = mail.clone();
        two_ats["from"] = json!("a@b@example.net");
        assert_eq!(refused(two_ats).0, "from");
        let mut user_only = mail.clone();
        user_only["username"] = json!("vantage");
        assert_eq!(refused(user_only).0, "secret");
        let mut creds_in_url = mail.clone();
        creds_in_url["url"] = json!("smtp://user:pass@mail.example.net");
        assert_eq!(refused(creds_in_url).0, "url");
        assert_eq!(
            refused(json!({"name": "hook", "url": "https://h.example.net/", "to": ["a@b.net"]})).0,
            "to"
        );
        let mut bad_template = mail;
        bad_template["template"] = json!("{status} {nope}");
        let (field, text) = refused(bad_template);
        assert_eq!(field, "template");
        assert!(text.contains("{nope}") && text.contains("{summary}"), "{text}");
    }

    #[test]
    fn smtp_is_tls_unless_local() {
        let s = SmtpServer::parse("url", "smtp://mail.example.net").unwrap();
        assert_eq!((s.port, s.implicit_tls, s.plain), (587, false, false));
        let s = SmtpServer::parse("url", "smtps://mail.example.net").unwrap();
        assert_eq!((s.port, s.implicit_tls, s.plain), (465, true, false));
        let s = SmtpServer::parse("url", "smtp://127.0.0.1:2525").unwrap();
        assert_eq!((s.host.as_str(), s.port, s.plain), ("127.0.0.1", 2525, true));
        let s = SmtpServer::parse("url", "smtp://[::1]:25").unwrap();
        assert_eq!((s.host.as_str(), s.port, s.plain), ("::1", 25, true));
        for bad in
            ["http://mail.example.net", "smtp://", "smtp://mail.example.net:0", "smtp://m.example.net:x"]
        {
            assert!(SmtpServer::parse("url", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn templates_fill_their_placeholders() {
        let a = Alert {
            id: 3,
            key: "node_offline/node:7".into(),
            kind: AlertKind::NodeOffline,
            state: AlertState::Resolved,
            summary: "node edge-1 is offline".into(),
            details: json!({"node": "edge-1"}),
            fired_at: Timestamp::from_secs(1_800_000_000),
            resolved_at: Some(Timestamp::from_secs(1_800_000_060)),
        };
        assert_eq!(render(DEFAULT_TEMPLATE, &a), "[resolved] node edge-1 is offline");
        assert_eq!(render("{kind} #{id} {key} {{", &a), "node_offline #3 node_offline/node:7 {{");
        assert!(render("{fired_at}→{resolved_at}", &a).starts_with("2027-01-15T08:00:00"));
    }
}
