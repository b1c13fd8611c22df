//! Email notifications over SMTP: STARTTLS required (`smtp://`) or TLS from the first byte
//! (`smtps://`), plain only to a loopback relay; the server's address is resolved here and
//! judged by the fetch policy, and the connection made to the address judged, as every other
//! fetch of the control plane.

use std::net::SocketAddr;

use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use vantage_control::alerts::{Alert, SmtpServer, Webhook};
use vantage_core::fetch::FetchPolicy;

use super::{ATTEMPT_TIMEOUT, Failure};

/// The message of `a` for `sink`: the template's first line is the subject, the whole text
/// and the alert's details the body.
fn message(sink: &Webhook, a: &Alert) -> Result<Message, Failure> {
    let refused = |what: &str| Failure::Refused(format!("the channel's {what} is not an email address"));
    let from: Mailbox = sink.from.as_deref().unwrap_or_default().parse().map_err(|_| refused("from"))?;
    let text = sink.text(a);
    let subject = text.lines().next().unwrap_or_default().chars().take(200).collect::<String>();
    let details = serde_json::to_string_pretty(&a.details).unwrap_or_default();
    let mut m =
        Message::builder().message_id(None).from(from).subject(subject).header(ContentType::TEXT_PLAIN);
    for to in &sink.to {
        m = m.to(to.parse().map_err(|_| refused("to"))?);
    }
    m.body(format!("{text}\n\nkind: {}\nkey: {}\ndetails:\n{details}\n", a.kind, a.key))
        .map_err(|e| Failure::Refused(format!("the message cannot be made: {e}")))
}

/// The SMTP server's address the fetch policy allows (and, for plain SMTP, a loopback one,
/// whatever the name resolves to).
async fn address(server: &SmtpServer, policy: &FetchPolicy) -> Result<SocketAddr, Failure> {
    let candidates = crate::fetch::resolve(&server.host, server.port).await.map_err(Failure::from)?;
    if let Some(a) = candidates.iter().find(|a| server.plain && !a.ip().is_loopback()) {
        return Err(Failure::Refused(format!(
            "plain SMTP goes only to a loopback address; {} resolves to {}",
            server.host,
            a.ip()
        )));
    }
    let allowed = crate::fetch::judge(policy, &server.host, candidates).map_err(Failure::from)?;
    allowed.first().copied().ok_or_else(|| Failure::Retry(format!("{} resolves to no address", server.host)))
}

/// One attempt to mail `a` to `sink`'s recipients.
pub(super) async fn send(sink: &Webhook, a: &Alert, policy: &FetchPolicy) -> Result<(), Failure> {
    let server = SmtpServer::parse("url", sink.url.as_deref().unwrap_or_default())
        .map_err(|e| Failure::Refused(e.to_string()))?;
    let addr = address(&server, policy).await?;
    let tls = || TlsParameters::new(server.host.clone()).map_err(|e| Failure::Refused(format!("TLS: {e}")));
    let tls = if server.plain {
        Tls::None
    } else if server.implicit_tls {
        Tls::Wrapper(tls()?)
    } else {
        Tls::Required(tls()?)
    };
    // Connected to the address judged; the certificate is checked against the host's name.
    let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(addr.ip().to_string())
        .port(addr.port())
        .tls(tls)
        .timeout(Some(ATTEMPT_TIMEOUT));
    if let (Some(user), Some(password)) = (&sink.username, &sink.secret) {
        transport = transport.credentials(Credentials::new(user.clone(), password.clone()));
    }
    let message = message(sink, a)?;
    match tokio::time::timeout(ATTEMPT_TIMEOUT, transport.build().send(message)).await {
        Ok(Ok(_)) => Ok(()),
        // lettre's errors name the server's answer, never the password.
        Ok(Err(e)) => Err(Failure::Retry(format!("SMTP: {e}"))),
        Err(_) => Err(Failure::Retry(format!("no answer from the SMTP server within {ATTEMPT_TIMEOUT:?}"))),
    }
}
