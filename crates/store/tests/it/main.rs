//! The store against real databases: every case runs twice, on an SQLite file in a temporary
//! directory and on a schema of its own on the test PostgreSQL server (`db`), so that both
//! backends are held to the same behaviour. `postgres` has what only PostgreSQL has.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod db;
mod postgres;

use db::Db;
use vantage_core::Timestamp;
use vantage_core::result::{Attempt, ErrorCode, HlsDetail, Stages};
use vantage_core::window::WindowRegister;
use vantage_store::{AuditFilter, EventFilter, EventRow, NewAudit, ResultRow, RevisionRow, Write};

const T0: Timestamp = Timestamp::from_secs(1_800_000_000);

/// Defines a test that runs `body` on each backend: `name::sqlite` and `name::postgres`.
macro_rules! on_both {
    ($(#[doc = $doc:literal])* async fn $name:ident($db:ident) $body:block) => {
        $(#[doc = $doc])*
        mod $name {
            use super::*;

            async fn body($db: &Db) $body

            #[tokio::test]
            async fn sqlite() {
                body(&Db::sqlite()).await
            }

            #[tokio::test]
            async fn postgres() {
                body(&Db::postgres().await).await
            }
        }
    };
}

fn audit(action: &str, object: &str) -> NewAudit {
    NewAudit {
        actor: "admin:test".into(),
        action: action.into(),
        object: object.into(),
        metadata: serde_json::json!({"k": 1}),
    }
}

fn put(id: i64, kind: &str, parent: Option<i64>, name: &str) -> Write {
    Write::Put { id, kind: kind.into(), parent, name: name.into(), body: format!(r#"{{"name":"{name}"}}"#) }
}

on_both! {
async fn objects_insert_update_delete_with_audit_in_one_transaction(db) {
    let s = db.open().await;
    let ids = [1, 2];
    s.commit(
        &[put(1, "region", None, "sg"), put(2, "region", None, "de")],
        &[audit("region.create", "region:*")],
        T0,
    )
    .await
    .unwrap();
    let later = T0.plus_secs(5);
    s.commit(&[put(1, "region", None, "sg2")], &[audit("region.update", "region:1")], later).await.unwrap();
    let rows = s.objects().await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].name.as_str(), rows[0].created_at, rows[0].updated_at), ("sg2", T0, later));
    s.commit(&[Write::Delete { id: ids[1] }], &[audit("region.delete", "region:2")], later).await.unwrap();
    assert_eq!(s.objects().await.unwrap().len(), 1);
    // A failing write rolls back the whole change, audit included.
    let err = s
        .commit(
            &[put(3, "region", None, "x"), Write::Delete { id: 999 }],
            &[audit("region.create", "x")],
            later,
        )
        .await;
    assert!(matches!(err, Err(vantage_store::Error::NotFound(999))));
    assert_eq!(s.objects().await.unwrap().len(), 1);
    assert_eq!(s.audit(&AuditFilter::default()).await.unwrap().len(), 3);
}
}

on_both! {
async fn audit_filters(db) {
    let s = db.open().await;
    for (i, action) in
        ["scheduling.activate", "scheduling.recover", "node.set_addresses", "scheduling"].iter().enumerate()
    {
        s.commit(&[], &[audit(action, &format!("node:{i}"))], T0.plus_secs(i as u64)).await.unwrap();
    }
    let by_prefix =
        s.audit(&AuditFilter { action: Some("scheduling.".into()), ..Default::default() }).await.unwrap();
    let actions: Vec<&str> = by_prefix.iter().map(|a| a.action.as_str()).collect();
    assert_eq!(actions, ["scheduling", "scheduling.recover", "scheduling.activate"], "newest first");
    let exact = s
        .audit(&AuditFilter { action: Some("node.set_addresses".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(exact.len(), 1);
    assert_eq!(exact[0].metadata, serde_json::json!({"k": 1}));
    let window = s
        .audit(&AuditFilter {
            since: Some(T0.plus_secs(1)),
            until: Some(T0.plus_secs(3)),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(window.len(), 2);
    let one = s
        .audit(&AuditFilter { object: Some("node:2".into()), limit: Some(5), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
}
}

on_both! {
/// Entries written under a renamed action's former name stay found by either name, and by
/// either name's prefix; each keeps the name it was written with.
async fn renamed_audit_actions_find_entries_under_both_names(db) {
    let s = db.open().await;
    let written =
        ["prober.enroll", "probe.enroll", "settings.probes_update", "system.probes_update", "prober.update"];
    for (i, action) in written.iter().enumerate() {
        s.commit(&[], &[audit(action, "prober:1")], T0.plus_secs(i as u64)).await.unwrap();
    }
    let s = &s;
    let found = |action: &str| {
        let filter = AuditFilter { action: Some(action.into()), ..Default::default() };
        async move { s.audit(&filter).await.unwrap().into_iter().map(|a| a.action).collect::<Vec<_>>() }
    };
    for name in ["probe.enroll", "prober.enroll"] {
        assert_eq!(found(name).await, ["probe.enroll", "prober.enroll"], "{name}");
    }
    for name in ["system.probes_update", "settings.probes_update"] {
        assert_eq!(found(name).await, ["system.probes_update", "settings.probes_update"], "{name}");
    }
    assert_eq!(found("probe.").await, ["probe.enroll", "prober.enroll"]);
    assert_eq!(found("prober.").await, ["prober.update", "probe.enroll", "prober.enroll"]);
    assert_eq!(found("system.").await, ["system.probes_update", "settings.probes_update"]);
    assert_eq!(found("prober.update").await, ["prober.update"], "an action never renamed");
}
}

fn result(prober: i64, target: &str, at: Timestamp, lost: u32) -> ResultRow {
    let mut register = WindowRegister::new(0);
    for i in 0..3 {
        let good = i >= lost;
        register.push(&Attempt {
            stages: if good { Stages::ALL } else { Stages::CONNECTED },
            rtt_us: 1500,
            error: (!good).then_some(ErrorCode::Timeout),
        });
    }
    ResultRow {
        prober,
        target: target.into(),
        at,
        sent: 3,
        lost,
        rtt_us: (lost < 3).then_some(1500),
        error: (lost > 0).then_some(ErrorCode::Timeout),
        register,
        hls: None,
    }
}

on_both! {
async fn results_keep_the_latest_per_prober_and_target_and_every_history_row(db) {
    let s = db.open().await;
    s.write_results(&[result(1, "n1/203.0.113.1:80", T0, 0), result(2, "n1/203.0.113.1:80", T0, 3)])
        .await
        .unwrap();
    s.write_results(&[result(1, "n1/203.0.113.1:80", T0.plus_secs(10), 1)]).await.unwrap();
    let mut latest = s.latest().await.unwrap();
    latest.sort_by_key(|r| r.prober);
    assert_eq!(latest.len(), 2);
    assert_eq!(
        (latest[0].at, latest[0].lost, latest[0].error),
        (T0.plus_secs(10), 1, Some(ErrorCode::Timeout))
    );
    assert_eq!(latest[0].register, result(1, "x", T0, 1).register_with_rate());
    assert_eq!(latest[1].rtt_us, None);
    let h = s.history("n1/203.0.113.1:80", T0, T0.plus_secs(60)).await.unwrap();
    assert_eq!(h.len(), 3);
    assert_eq!((h[2].at, h[2].prober, h[2].lost), (T0.plus_secs(10), 1, 1));
    assert!(s.history("other", T0, T0.plus_secs(60)).await.unwrap().is_empty());
    // Disabling a prober deletes its latest results; stale ones expire.
    assert_eq!(s.delete_latest_of(2).await.unwrap(), 1);
    assert_eq!(s.delete_latest_before(T0.plus_secs(11)).await.unwrap(), 1);
    assert!(s.latest().await.unwrap().is_empty());
    assert_eq!(
        s.history("n1/203.0.113.1:80", T0, T0.plus_secs(60)).await.unwrap().len(),
        3,
        "history keeps every result"
    );
}
}

on_both! {
/// Target keys go to the database as a list: quotes, backslashes and letters beyond ASCII keep
/// their spelling, a key named by several results of one batch gets one id, and a key the
/// database has but a new process does not remember gets its id back.
async fn target_keys_keep_their_spelling_and_their_ids(db) {
    let keys = ["n1/203.0.113.1:80", "m/\"quoted\"\\host", "m/bücher.example", "n1/203.0.113.1:8080"];
    let s = db.open().await;
    let batch: Vec<ResultRow> = keys[..3].iter().flat_map(|k| [result(1, k, T0, 0), result(2, k, T0, 1)]).collect();
    s.write_results(&batch).await.unwrap();
    drop(s);
    let s = db.open().await;
    let batch: Vec<ResultRow> = keys[1..].iter().map(|k| result(1, k, T0.plus_secs(10), 2)).collect();
    s.write_results(&batch).await.unwrap();
    let mut latest: Vec<(i64, String, u32)> =
        s.latest().await.unwrap().into_iter().map(|r| (r.prober, r.target, r.lost)).collect();
    latest.sort();
    let mut want: Vec<(i64, String, u32)> = vec![
        (1, keys[0].into(), 0),
        (1, keys[1].into(), 2),
        (1, keys[2].into(), 2),
        (1, keys[3].into(), 2),
        (2, keys[0].into(), 1),
        (2, keys[1].into(), 1),
        (2, keys[2].into(), 1),
    ];
    want.sort();
    assert_eq!(latest, want);
    for (key, rows) in [(keys[0], 2), (keys[1], 3), (keys[2], 3), (keys[3], 1)] {
        assert_eq!(s.history(key, T0, T0.plus_secs(60)).await.unwrap().len(), rows, "{key}");
    }
}
}

on_both! {
async fn a_large_batch_writes_every_row_once(db) {
    // 9,000 rows: several statements on SQLite, one COPY per table on PostgreSQL (the test of
    // 20,000 in `postgres` sends its COPY data in more than one piece).
    let s = db.open().await;
    let target = |t: u32| format!("n{t}/203.0.113.{}:{}", t % 250 + 1, 1000 + t);
    let round = |at: Timestamp, lost: u32| -> Vec<ResultRow> {
        (1..=3).flat_map(|p| (0..3_000).map(move |t| result(p, &target(t), at, lost))).collect()
    };
    s.write_results(&round(T0, 0)).await.unwrap();
    s.write_results(&round(T0.plus_secs(10), 2)).await.unwrap();
    let latest = s.latest().await.unwrap();
    assert_eq!(latest.len(), 9_000);
    assert!(latest.iter().all(|r| r.at == T0.plus_secs(10) && r.lost == 2), "the second round everywhere");
    for t in [0, 1_234, 2_999] {
        let h = s.history(&target(t), T0, T0.plus_secs(60)).await.unwrap();
        assert_eq!(h.len(), 6, "two rounds of three probers for {}", target(t));
    }
}
}

trait WithRate {
    fn register_with_rate(&self) -> WindowRegister;
}

impl WithRate for ResultRow {
    /// The register as it reads back from storage.
    fn register_with_rate(&self) -> WindowRegister {
        let r = self.register;
        WindowRegister::from_parts(
            r.connected,
            r.sent,
            r.received,
            r.good,
            f64::from(r.avg_rtt_ms),
            Some(r.filled()),
        )
    }
}

on_both! {
async fn history_rolls_up_per_day_before_deletion(db) {
    let s = db.open().await;
    let day0 = Timestamp::from_millis(T0.millis() / 86_400_000 * 86_400_000);
    s.write_results(&[result(1, "t", day0.plus_secs(10), 0), result(1, "t", day0.plus_secs(20), 3)])
        .await
        .unwrap();
    s.write_results(&[result(1, "t", day0.plus_secs(86_400 + 5), 0)]).await.unwrap();
    let deleted = s.roll_up_history(day0.plus_secs(86_400)).await.unwrap();
    assert_eq!(deleted, 2);
    let daily = s.history_daily("t", day0, day0.plus_secs(3 * 86_400)).await.unwrap();
    assert_eq!(daily.len(), 1);
    assert_eq!((daily[0].day, daily[0].rounds, daily[0].sent, daily[0].lost), (day0, 2, 6, 3));
    assert_eq!(daily[0].rtt_avg_us, Some(1500));
    assert_eq!(s.history("t", day0, day0.plus_secs(3 * 86_400)).await.unwrap().len(), 1);
    // A second roll-up of the same day adds to it.
    s.write_results(&[result(1, "t", day0.plus_secs(30), 0)]).await.unwrap();
    s.roll_up_history(day0.plus_secs(86_400)).await.unwrap();
    let daily = s.history_daily("t", day0, day0.plus_secs(86_400)).await.unwrap();
    assert_eq!((daily[0].rounds, daily[0].sent), (3, 9));
    assert_eq!(s.delete_daily_before(day0.plus_secs(1)).await.unwrap(), 1);
}
}

on_both! {
async fn revisions_and_state_survive_a_reopen(db) {
    {
        let s = db.open().await;
        for n in 1..=3 {
            s.insert_revision(&RevisionRow {
                cluster: 7,
                number: n,
                at: T0.plus_secs(u64::from(n)),
                reason: format!("r{n}"),
                records: serde_json::json!({"all": [format!("203.0.113.{n}")]}),
                held: serde_json::json!({}),
                publish: serde_json::json!([]),
            })
            .await
            .unwrap();
        }
        s.set_revision_publish(7, 3, &serde_json::json!([{"target": "knot", "status": "published"}]))
            .await
            .unwrap();
        s.put_state("cluster:7", r#"{"x":1}"#, T0).await.unwrap();
        s.put_state("cluster:7", r#"{"x":2}"#, T0).await.unwrap();
        s.put_state("node:1", "{}", T0).await.unwrap();
        s.commit(&[put(1, "region", None, "sg")], &[], T0).await.unwrap();
    }
    let s = db.open().await;
    let revs = s.revisions(7, 2).await.unwrap();
    assert_eq!(revs.iter().map(|r| r.number).collect::<Vec<_>>(), [3, 2]);
    assert_eq!(revs[0].publish[0]["status"], "published");
    let latest = s.latest_revisions().await.unwrap();
    assert_eq!((latest.len(), latest[0].number), (1, 3));
    assert_eq!(s.states("cluster:").await.unwrap(), vec![("cluster:7".to_owned(), r#"{"x":2}"#.to_owned())]);
    s.delete_state("cluster:7").await.unwrap();
    assert!(s.states("cluster:").await.unwrap().is_empty());
    assert_eq!(s.objects().await.unwrap().len(), 1);
    assert!(s.size_bytes().await.unwrap() > 0);
    s.ping().await.unwrap();
}
}

on_both! {
async fn states_saved_many_at_once_replace_delete_and_clear_by_prefix(db) {
    let s = db.open().await;
    let row = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    s.put_state("cluster:1", "rest", T0).await.unwrap();
    s.put_state("cluster:12/1/a", "other cluster", T0).await.unwrap();
    // More than one statement's worth, so that the chunks are taken in turn.
    let many: Vec<(String, String)> = (0..2_500).map(|i| (format!("cluster:1/{i}"), format!("v{i}"))).collect();
    s.put_states(None, &many, &[], T0).await.unwrap();
    assert_eq!(s.states("cluster:1/").await.unwrap().len(), 2_500);
    // A difference: one changed, one new, two deleted (one of them never saved).
    let deletes = vec!["cluster:1/7".to_owned(), "cluster:1/nothing".to_owned()];
    s.put_states(None, &[row("cluster:1/3", "w3"), row("cluster:1/x", "new")], &deletes, T0).await.unwrap();
    let saved = s.states("cluster:1/").await.unwrap();
    assert_eq!(saved.len(), 2_500);
    assert!(saved.contains(&row("cluster:1/3", "w3")) && saved.contains(&row("cluster:1/x", "new")));
    assert!(!saved.iter().any(|(k, _)| k == "cluster:1/7"));
    // A whole one replaces every row under its prefix and nothing else.
    s.put_states(Some("cluster:1/"), &[row("cluster:1/only", "1")], &[], T0).await.unwrap();
    assert_eq!(s.states("cluster:1/").await.unwrap(), vec![row("cluster:1/only", "1")]);
    assert!(s.states("cluster:").await.unwrap().contains(&row("cluster:1", "rest")));
    assert_eq!(s.states("cluster:12/").await.unwrap(), vec![row("cluster:12/1/a", "other cluster")]);
}
}

on_both! {
async fn events_filter_by_cluster_node_kind_time_and_id_oldest_first(db) {
    let s = db.open().await;
    let t0 = T0;
    let event = |id: i64, kind: &str, cluster: Option<i64>, node: Option<i64>| EventRow {
        id,
        at: t0.plus_millis(id * 1000),
        kind: kind.into(),
        cluster,
        node,
        summary: format!("event {id}"),
        details: serde_json::json!({"n": id}),
    };
    let rows = vec![
        event(1, "prober_online", None, None),
        event(2, "address_failing", Some(3), Some(7)),
        event(3, "revision", Some(3), None),
        event(4, "address_failing", Some(4), Some(8)),
        event(5, "revision", Some(4), None),
    ];
    s.insert_events(&rows).await.unwrap();
    // Storing an id again keeps the first.
    s.insert_events(&[event(5, "alert_fired", None, None)]).await.unwrap();
    assert_eq!(s.last_event().await.unwrap(), 5);
    let ids = |v: Vec<EventRow>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
    let all = EventFilter { limit: 100, ..EventFilter::default() };
    assert_eq!(s.events(&all).await.unwrap(), rows, "everything, oldest first");
    assert_eq!(
        ids(s.events(&EventFilter { limit: 2, ..all.clone() }).await.unwrap()),
        [4, 5],
        "the newest two"
    );
    assert_eq!(ids(s.events(&EventFilter { cluster: Some(3), ..all.clone() }).await.unwrap()), [2, 3]);
    assert_eq!(ids(s.events(&EventFilter { node: Some(8), ..all.clone() }).await.unwrap()), [4]);
    let kinds = vec!["revision".to_owned(), "prober_online".to_owned()];
    assert_eq!(ids(s.events(&EventFilter { kinds, ..all.clone() }).await.unwrap()), [1, 3, 5]);
    assert_eq!(ids(s.events(&EventFilter { after: Some(3), ..all.clone() }).await.unwrap()), [4, 5]);
    let since = Some(t0.plus_millis(4000));
    assert_eq!(ids(s.events(&EventFilter { since, ..all.clone() }).await.unwrap()), [4, 5]);
    assert_eq!(s.delete_events_before(t0.plus_millis(3000)).await.unwrap(), 2);
    assert_eq!(ids(s.events(&all).await.unwrap()), [3, 4, 5]);
}
}

on_both! {
/// Two results for one (prober, target) in one batch (two reports in one group commit): the
/// later one is the latest, and both are history.
async fn a_batch_keeps_the_later_of_two_results_for_one_prober_and_target(db) {
    let s = db.open().await;
    s.write_results(&[result(1, "t", T0, 0), result(1, "t", T0.plus_secs(10), 2), result(2, "t", T0, 1)])
        .await
        .unwrap();
    let latest: Vec<_> = s.latest().await.unwrap().iter().map(|r| (r.prober, r.at, r.lost)).collect();
    assert_eq!(latest, [(1, T0.plus_secs(10), 2), (2, T0, 1)], "ordered by prober");
    let h: Vec<_> = s.history("t", T0, T0.plus_secs(60)).await.unwrap().iter().map(|p| (p.at, p.prober)).collect();
    assert_eq!(h, [(T0, 1), (T0, 2), (T0.plus_secs(10), 1)], "by time, then prober");
    // The same batch again (a retry) adds no history.
    s.write_results(&[result(1, "t", T0, 0)]).await.unwrap();
    assert_eq!(s.history("t", T0, T0.plus_secs(60)).await.unwrap().len(), 3);
}
}

on_both! {
/// A batch of targets reported before and new ones (a prober given more work): the known rows
/// take the new values, the new ones are added, and an HLS result's details read back whole.
async fn a_batch_of_known_and_new_targets_updates_the_one_and_adds_the_other(db) {
    let s = db.open().await;
    let target = |t: u32| format!("n{t}/203.0.113.{}:80", t + 1);
    s.write_results(&(0..3).map(|t| result(1, &target(t), T0, 0)).collect::<Vec<_>>()).await.unwrap();
    let hls = HlsDetail {
        reachable: true,
        manifest_valid: true,
        segment_fetchable: false,
        segment_age_s: Some(42.5),
        ttfb_ms: None,
    };
    let mut second: Vec<ResultRow> = (1..5).map(|t| result(1, &target(t), T0.plus_secs(10), 1)).collect();
    second[3].hls = Some(hls);
    s.write_results(&second).await.unwrap();
    let stored = s.latest().await.unwrap();
    // Every field of the added row and of an updated one, as written.
    for (row, written) in [(&stored[4], &second[3]), (&stored[1], &second[0])] {
        assert_eq!(*row, ResultRow { register: written.register_with_rate(), ..written.clone() });
    }
    let latest: Vec<_> = stored.into_iter().map(|r| (r.target, r.at, r.lost, r.hls)).collect();
    assert_eq!(
        latest,
        [
            (target(0), T0, 0, None),
            (target(1), T0.plus_secs(10), 1, None),
            (target(2), T0.plus_secs(10), 1, None),
            (target(3), T0.plus_secs(10), 1, None),
            (target(4), T0.plus_secs(10), 1, Some(hls)),
        ]
    );
}
}

on_both! {
/// A stream resuming far behind pages forward through the oldest events after its last one:
/// every page the next ids in order, filters applied, none skipped however many follow.
async fn events_after_pages_forward_oldest_first(db) {
    let s = db.open().await;
    let rows: Vec<EventRow> = (1..=2_500)
        .map(|id| EventRow {
            id,
            at: T0.plus_millis(id),
            kind: if id % 2 == 0 { "revision" } else { "prober_online" }.into(),
            cluster: Some(id % 3),
            node: None,
            summary: format!("event {id}"),
            details: serde_json::json!({}),
        })
        .collect();
    s.insert_events(&rows).await.unwrap();
    let ids = |v: &[EventRow]| v.iter().map(|e| e.id).collect::<Vec<_>>();
    let mut after = 10;
    let mut seen = Vec::new();
    loop {
        let page = s
            .events_after(&EventFilter { after: Some(after), limit: 1_000, ..EventFilter::default() })
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = last.id;
        seen.extend(ids(&page));
    }
    assert_eq!(seen, (11..=2_500).collect::<Vec<_>>(), "every event after 10, in order, across pages");
    let first = s.events_after(&EventFilter { limit: 3, ..EventFilter::default() }).await.unwrap();
    assert_eq!(ids(&first), [1, 2, 3], "without after: from the first");
    let filtered = EventFilter {
        after: Some(100),
        cluster: Some(0),
        kinds: vec!["revision".into()],
        limit: 3,
        ..EventFilter::default()
    };
    assert_eq!(ids(&s.events_after(&filtered).await.unwrap()), [102, 108, 114], "filters apply");
}
}

on_both! {
async fn a_claimed_state_keeps_its_first_value(db) {
    let s = db.open().await;
    assert_eq!(s.claim_state("ca", "first", T0).await.unwrap(), "first");
    assert_eq!(s.claim_state("ca", "second", T0.plus_secs(1)).await.unwrap(), "first", "the first claim wins");
    assert_eq!(s.states("ca").await.unwrap(), vec![("ca".to_owned(), "first".to_owned())]);
}
}

/// A pseudo-random number below `n` (a fixed sequence: the test is the same every run).
fn below(seed: &mut u64, n: u32) -> u32 {
    *seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    u32::try_from(*seed >> 33).unwrap_or(0) % n
}

on_both! {
/// Revisions are stored as differences and read back whole by every read: across whole ones
/// stored now and then, a free-form revision, a reopened store (the chain read back from the
/// database) and a number stored twice (the first kept, and followed).
async fn revisions_stored_as_differences_read_back_whole(db) {
    use std::collections::BTreeMap;
    use std::net::IpAddr;
    use vantage_core::evaluate::Records;
    use vantage_core::ids::LineId;

    let mut s = db.open().await;
    // Another process on the same database (a replica): it stores a few revisions between.
    let other = db.open().await;
    let empty = s.size_bytes().await.unwrap();
    let ip = |i: u32| IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
    let mut lines: BTreeMap<LineId, Vec<IpAddr>> =
        (0..3).map(|l| (LineId(l), (0..1_000).map(|i| ip(l as u32 * 1_000 + i)).collect())).collect();
    let mut ttls = BTreeMap::new();
    let mut seed = 7;
    let (mut written, mut whole) = (Vec::new(), 0);
    let row = |n: u32, records: serde_json::Value| RevisionRow {
        cluster: 5,
        number: n,
        at: T0.plus_secs(u64::from(n)),
        reason: format!("r{n}"),
        records,
        held: serde_json::json!({}),
        publish: serde_json::json!([]),
    };
    for n in 1..=320 {
        // An address moves in or out of a line; now and then a line comes or goes, a TTL changes.
        let line = LineId(i64::from(below(&mut seed, 4)));
        let ips = lines.entry(line).or_default();
        let a = ip(below(&mut seed, 5_000));
        match ips.binary_search(&a) {
            Ok(at) => drop(ips.remove(at)),
            Err(at) => ips.insert(at, a),
        }
        if n % 50 == 0 {
            lines.remove(&LineId(3));
        }
        if n % 30 == 0 {
            ttls.insert(LineId(1), n);
        }
        let mut all: Vec<IpAddr> = lines.values().flatten().copied().collect();
        all.sort_unstable();
        all.dedup();
        let records = Records { lines: lines.clone(), all, ttls: ttls.clone(), orders: BTreeMap::new() };
        let r = if n == 100 {
            row(n, serde_json::json!({"all": ["free-form"]}))
        } else {
            row(n, serde_json::to_value(&records).unwrap())
        };
        whole += r.records.to_string().len();
        if n == 150 {
            // A new process: it stores the next from the chain it reads back, the first time
            // from a read of its own.
            s = db.open().await;
            assert_eq!(s.revision(5, 149).await.unwrap().as_ref(), written.last());
        }
        if n == 200 {
            // Read twice: the second time from the revision kept by the first.
            assert_eq!(s.latest_revisions().await.unwrap().as_slice(), &written[198..]);
            assert_eq!(s.latest_revisions().await.unwrap().as_slice(), &written[198..]);
        }
        if n == 253 {
            // After the other's three: rebuilt from the one this process kept (249).
            assert_eq!(s.revision(5, 252).await.unwrap().as_ref(), written.last());
        }
        let by = if (250..=252).contains(&n) { &other } else { &s };
        by.insert_revision(&r).await.unwrap();
        written.push(r);
    }
    // Another holder's revision 320 is refused (the first is kept), and 321 follows the first.
    let mut other = written[319].clone();
    other.records = written[0].records.clone();
    s.insert_revision(&other).await.unwrap();
    let mut next = written[319].clone();
    next.number = 321;
    s.insert_revision(&next).await.unwrap();
    written.push(next);

    // A second cluster's chain beside it: the newest of every cluster, each rebuilt.
    let mut second = Vec::new();
    for n in 1..=3u8 {
        let ips: Vec<IpAddr> = (0..=n).map(|i| IpAddr::from([192, 0, 2, i])).collect();
        let records = Records {
            lines: BTreeMap::from([(LineId(0), ips.clone())]),
            all: ips,
            ttls: BTreeMap::new(),
            orders: BTreeMap::new(),
        };
        let r = RevisionRow { cluster: 6, ..row(u32::from(n), serde_json::to_value(&records).unwrap()) };
        s.insert_revision(&r).await.unwrap();
        second.push(r);
    }
    assert_eq!(s.latest_revisions().await.unwrap(), [written[320].clone(), second[2].clone()]);

    for r in written.iter().step_by(7).chain(written.last()) {
        assert_eq!(s.revision(5, r.number).await.unwrap().as_ref(), Some(r), "revision {}", r.number);
    }
    let newest: Vec<RevisionRow> = written.iter().rev().take(40).cloned().collect();
    assert_eq!(s.revisions(5, 40).await.unwrap(), newest);
    assert_eq!(s.revisions_between(5, 90, 130, 100).await.unwrap(), written[90..130]);
    // Differences take a small part of what whole record sets would.
    let grown = s.size_bytes().await.unwrap().saturating_sub(empty);
    assert!(grown * 10 < whole as u64, "{grown} bytes stored for {whole} bytes of records");
}
}
