//! Notification channels end to end through the API: each format's refusals name their
//! field, secrets never come back (views, audit, fleet export), a change that leaves the
//! secret out keeps it, and the test notice reaches Slack, PagerDuty and email receivers on
//! loopback — or says why not. Firing and resolved alerts through the same channels are in
//! `rules` (a real rule's alert).

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::ctl_mirrors::ctl;
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
    // The stored secret goes only where it went: a new URL must come with it.
    let elsewhere = json!({"url": "http://127.0.0.1:1/collect"});
    let (st, v) = s.call(Method::PATCH, &path, Some(elsewhere)).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("secret")), "{v}");
    let slack_path = format!("/v1/webhooks/{}", id(&slack));
    let (st, v) = s.call(Method::PATCH, &slack_path, Some(json!({"format": "pagerduty"}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("secret")), "{v}");
    // Every destination is judged when it is entered, the secret one too.
    let metadata = json!({"name": "meta", "format": "slack", "secret": "http://169.254.169.254/latest/x"});
    let (st, v) = s.call(Method::POST, "/v1/webhooks", Some(metadata)).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("secret")), "{v}");
    let (st, v) =
        s.call(Method::POST, "/v1/webhooks", Some(mailbox(json!({"url": "smtp://169.254.169.254"})))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("url")), "{v}");

    // The test button: one notice now, and how it went.
    for (w, note) in [(&slack, Some(json!({"note": "new rotation"}))), (&pd, None), (&email, None)] {
        let (st, v) = s.call(Method::POST, &format!("/v1/webhooks/{}/test", id(w)), note).await;
        assert_eq!((st, &v), (200, &json!({"delivered": true})), "{}: {v}", w["name"]);
    }
    hooks
        .wait(Duration::from_secs(5), |got| {
            got.iter().any(|(k, v)| {
                k == "slack"
                    && v["text"].as_str().is_some_and(|t| {
                        t.starts_with("[firing] test notice from Vantage to slack")
                            && t.ends_with(": new rotation")
                    })
            }) && got.iter().any(|(k, v)| {
                k == "pd"
                    && v["routing_key"] == "R0UT1NGKEY"
                    && v["event_action"] == "trigger"
                    && v["dedup_key"] == "test/webhook:pd"
                    && v["payload"]["severity"] == "info"
                    && v["payload"]["summary"].as_str().is_some_and(|t| t.ends_with("[test]"))
            }) && got.iter().any(|(k, v)| {
                // The test's incident is resolved at once.
                k == "pd" && v["event_action"] == "resolve" && v["dedup_key"] == "test/webhook:pd"
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
    // One that refuses it (a 404) is not tried again.
    let wrong = json!({"name": "wrong", "format": "slack", "secret": format!("{}/no/such/hook", hooks.url)});
    let wrong = s.create("/v1/webhooks", wrong).await;
    let (_, v) = s.call(Method::POST, &format!("/v1/webhooks/{}/test", id(&wrong)), None).await;
    assert_eq!(v, json!({"delivered": false, "error": "the channel refused it: 404 Not Found"}));
    let (st, v) = s.call(Method::POST, "/v1/webhooks/999999/test", None).await;
    assert_eq!(st, 404, "{v}");
    s.wait_for("/v1/audit?action=webhook.test", Duration::from_secs(5), |v| {
        v["items"].as_array().is_some_and(|i| i.len() == 5)
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

/// A silence holds back the notification of a real alert (an address nothing answers on,
/// seen by a real prober) while the alert fires and shows; deleted, it lets it go at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silence_holds_a_real_alerts_notification_until_it_goes() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_lab().await;
    let hooks = receiver().await;
    s.create("/v1/webhooks", json!({"name": "json", "url": format!("{}/json", hooks.url)})).await;
    let settings = json!({"interval_s": 5, "timeout_ms": 500, "attempts": 1,
                          "failing_before_unreachable_s": 5, "answering_before_reachable_s": 5});
    let (st, v) = s.call(Method::PUT, "/v1/settings/probes", Some(settings)).await;
    assert_eq!(st, 200, "{v}");
    let region =
        s.create("/v1/regions", json!({"code": "eu", "name": "Europe"})).await["id"].as_i64().unwrap();
    let cluster = s.create("/v1/clusters", json!({"name": "c", "domain": "cdn.test.example"})).await["id"]
        .as_i64()
        .unwrap();
    let group = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "g"})).await["id"]
        .as_i64()
        .unwrap();
    s.create(&format!("/v1/clusters/{cluster}/lines"), json!({"name": "default", "group": group})).await;
    let node =
        s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": "edge-1"})).await["id"]
            .as_i64()
            .unwrap();
    // Nothing listens there: the probers see it refused.
    s.call(Method::PUT, &format!("/v1/nodes/{node}/addresses"), Some(json!([{"ip": "127.0.0.41"}]))).await;

    for (body, field) in [
        (json!({"matchers": [], "duration_s": 60, "comment": "x"}), "matchers"),
        (json!({"matchers": ["node edge-1"], "duration_s": 60, "comment": "x"}), "matchers[0]"),
        (json!({"matchers": ["node=edge-1"], "comment": "x"}), "duration_s"),
        (json!({"matchers": ["node=edge-1"], "duration_s": 60, "comment": ""}), "comment"),
        (json!({"matchers": ["node=edge-1"], "duration_s": 60, "comment": "x", "by": "me"}), "by"),
    ] {
        let (st, v) = s.call(Method::POST, "/v1/silences", Some(body.clone())).await;
        assert_eq!((st, v["error"]["field"].as_str()), (400, Some(field)), "{body}: {v}");
    }
    // Made with ctl, as on-call would.
    let matchers = r#"matchers=["kind=address_unreachable","node=edge-1"]"#;
    let (code, _, err) =
        ctl(&s, &["silences", "create", matchers, "duration_s=3600", "comment=edge-1 is being re-racked"])
            .await;
    assert_eq!(code, Some(0), "{err}");
    let (_, list) = s.call(Method::GET, "/v1/silences", None).await;
    let silence = list["items"][0].clone();
    let id = silence["id"].as_i64().unwrap();
    assert_eq!(
        (silence["state"].as_str(), silence["created_by"].is_string()),
        (Some("active"), true),
        "{silence}"
    );
    let (_, out, _) = ctl(&s, &["silences", "list"]).await;
    assert!(out.contains("active") && out.contains("kind=address_unreachable"), "{out}");

    let _prober = s.start_prober("fra", region, temp.path()).await;
    let key = format!("address_unreachable/node:{node}/127.0.0.41");
    s.wait_for("/v1/alerts", Duration::from_secs(30), |v| {
        v["held"][&key] == json!({"by": "silence", "id": id})
    })
    .await;
    let (_, one) = s.call(Method::GET, &format!("/v1/silences/{id}"), None).await;
    assert_eq!(one["holds"], json!([key]), "{one}");
    let (_, status, _) = ctl(&s, &["status"]).await;
    assert!(status.contains(&format!("(notification held by silence {id})")), "{status}");
    // The alert fires and shows; its notification waits.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(hooks.got.lock().unwrap().is_empty(), "held: {:?}", hooks.got.lock().unwrap());

    // The silence goes: the notification goes at once.
    let (code, _, err) = ctl(&s, &["silences", "delete", &id.to_string()]).await;
    assert_eq!(code, Some(0), "{err}");
    hooks
        .wait(Duration::from_secs(5), |got| {
            got.iter().any(|(k, v)| k == "json" && v["status"] == "firing" && v["key"] == json!(key))
        })
        .await;
    let (_, alerts) = s.call(Method::GET, "/v1/alerts", None).await;
    assert_eq!(alerts["held"], json!({}), "{alerts}");

    // Who made a silence and when it started cannot change; an end already past ends it now.
    let other = s
        .create(
            "/v1/silences",
            json!({"matchers": ["node=edge-2"], "duration_s": 600, "comment": "edge-2 swap"}),
        )
        .await;
    let path = format!("/v1/silences/{}", other["id"]);
    let (st, v) = s.call(Method::PATCH, &path, Some(json!({"starts_at": "2030-01-01T00:00:00Z"}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("starts_at")), "{v}");
    let started: vantage_core::Timestamp = other["starts_at"].as_str().unwrap().parse().unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let end = started.plus_secs(1).to_string();
    let (st, v) = s.call(Method::PATCH, &path, Some(json!({"ends_at": end}))).await;
    assert_eq!((st, v["state"].as_str()), (200, Some("expired")), "{v}");
}
