//! Notification channels end to end through the API: each format's refusals name their
//! field, secrets never come back (views, audit, fleet export), a change that leaves the
//! secret out keeps it, and the test notice reaches Slack, PagerDuty and email receivers on
//! loopback — or says why not. Firing and resolved alerts through the same channels are in
//! `rules` (a real rule's alert).

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::harness::ServerProcess;
use crate::receivers::{SmtpSink, receiver};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_keep_their_secrets_and_their_test_notice_says_how_it_went() {
    let s = ServerProcess::start_lab().await;
    let hooks = receiver().await;
    let mail = SmtpSink::start().await;

    let mailbox = |extra: serde_json::Value| {
        let mut m = json!({"name": "m", "format": "email", "url": "smtp://mail.example.net",
                           "from": "vantage@example.net", "to": ["oncall@example.net"]});
        m.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        m
    };
    for (body, field) in [
        (json!({"name": "s", "format": "slack"}), "secret"),
        (json!({"name": "s", "format": "slack", "secret": "hooks.slack.example/T0/B0/SECRETPATH"}), "secret"),
        (json!({"name": "p", "format": "pagerduty"}), "secret"),
        (json!({"name": "j", "url": "https://hooks.example.net/", "to": ["a@example.net"]}), "to"),
        (mailbox(json!({"from": null})), "from"),
        (mailbox(json!({"to": ["oncall@example.net", "nobody"]})), "to[1]"),
        (mailbox(json!({"url": "smtp://user:pw@mail.example.net"})), "url"),
        (mailbox(json!({"template": "{status} {nope}"})), "template"),
    ] {
        let (st, v) = s.call(Method::POST, "/v1/webhooks", Some(body.clone())).await;
        assert_eq!((st, v["error"]["field"].as_str()), (400, Some(field)), "{body}: {v}");
        assert!(!v.to_string().contains("SECRETPATH"), "a secret is never echoed: {v}");
    }

    let slack_url = format!("{}/slack", hooks.url);
    let slack =
        s.create("/v1/webhooks", json!({"name": "slack", "format": "slack", "secret": slack_url})).await;
    assert_eq!(slack["secret"], "(hidden)", "{slack}");
    let pd = json!({"name": "pd", "format": "pagerduty", "url": format!("{}/pd", hooks.url),
                    "secret": "R0UT1NGKEY", "template": "{summary} ({kind})"});
    let pd = s.create("/v1/webhooks", pd).await;
    let email = json!({"name": "mail", "format": "email", "url": format!("smtp://{}", mail.addr),
                       "from": "vantage@example.net", "to": ["oncall@example.net", "noc@example.net"],
                       "template": "{status}: {kind}"});
    let email = s.create("/v1/webhooks", email).await;
    let id = |v: &serde_json::Value| v["id"].as_i64().unwrap();

    // Nothing the API shows gives a secret away.
    let (_, list) = s.call(Method::GET, "/v1/webhooks", None).await;
    s.wait_for("/v1/audit?action=webhook.create", Duration::from_secs(5), |v| {
        v["items"].as_array().is_some_and(|i| i.len() == 3)
    })
    .await;
    let (_, audit) = s.call(Method::GET, "/v1/audit", None).await;
    let (_, export) = s.call(Method::GET, "/v1/fleet", None).await;
    for text in [list.to_string(), audit.to_string(), export.to_string()] {
        assert!(!text.contains("R0UT1NGKEY") && !text.contains(&slack_url), "{text}");
    }
    let exported = export["webhooks"].as_array().unwrap();
    let pd_doc = exported.iter().find(|w| w["name"] == "pd").unwrap();
    assert_eq!((&pd_doc["secret"], &pd_doc["format"]), (&json!("stored"), &json!("pagerduty")), "{export}");

    // A change that leaves the secret out keeps it; sending back what a view shows is refused.
    let path = format!("/v1/webhooks/{}", id(&pd));
    let (st, v) = s.call(Method::PATCH, &path, Some(json!({"template": "{summary} [{kind}]"}))).await;
    assert_eq!((st, &v["secret"]), (200, &json!("(hidden)")), "{v}");
    let (st, v) = s.call(Method::PATCH, &path, Some(json!({"secret": "(hidden)"}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("secret")), "{v}");

    // The test button: one notice now, and how it went.
    for w in [&slack, &pd, &email] {
        let (st, v) = s.call(Method::POST, &format!("/v1/webhooks/{}/test", id(w)), None).await;
        assert_eq!((st, &v), (200, &json!({"delivered": true})), "{}: {v}", w["name"]);
    }
    hooks
        .wait(Duration::from_secs(5), |got| {
            got.iter().any(|(k, v)| {
                k == "slack"
                    && v["text"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("[firing] test notice from Vantage to slack"))
            }) && got.iter().any(|(k, v)| {
                k == "pd"
                    && v["routing_key"] == "R0UT1NGKEY"
                    && v["event_action"] == "trigger"
                    && v["dedup_key"] == "test/webhook:pd"
                    && v["payload"]["severity"] == "info"
                    && v["payload"]["summary"].as_str().is_some_and(|t| t.ends_with("[test]"))
            })
        })
        .await;
    mail.wait(Duration::from_secs(5), |m| {
        m.iter().any(|t| {
            t.contains("Subject: firing: test")
                && t.contains("To: oncall@example.net, noc@example.net")
                && t.contains("key: test/webhook:mail")
        })
    })
    .await;

    // A channel nobody answers: not delivered, and why; a destination the fetch policy
    // refuses is refused when it is entered.
    let dead = s.create("/v1/webhooks", json!({"name": "dead", "url": "http://127.0.0.1:9/hook"})).await;
    let (st, v) = s.call(Method::POST, &format!("/v1/webhooks/{}/test", id(&dead)), None).await;
    assert_eq!((st, &v["delivered"]), (200, &json!(false)), "{v}");
    assert!(v["error"].as_str().is_some_and(|e| e.starts_with("unreachable")), "{v}");
    let (st, v) = s.call(Method::POST, "/v1/webhooks/999999/test", None).await;
    assert_eq!(st, 404, "{v}");
    s.wait_for("/v1/audit?action=webhook.test", Duration::from_secs(5), |v| {
        v["items"].as_array().is_some_and(|i| i.len() == 4)
    })
    .await;
    let (_, audit) = s.call(Method::GET, "/v1/audit?action=webhook.test", None).await;
    assert!(
        audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["metadata"]["name"] == "dead" && a["metadata"]["delivered"] == false),
        "{audit}"
    );
}
