//! What only the PostgreSQL backend has: day partitions of the history, dropped whole by the
//! roll-up, and bulk writes of a large group commit.

use sqlx::{Connection, PgConnection};
use vantage_core::Timestamp;
use vantage_store::{Database, FileWrite, LogAs, PostgresUrl, Store};

use crate::db::{Db, Schema};
use crate::result;

fn schema(db: &Db) -> &Schema {
    match db {
        Db::Postgres(s) => s,
        Db::Sqlite(_) => unreachable!("a PostgreSQL test"),
    }
}

/// The history's partitions, by name.
async fn partitions(conn: &mut PgConnection) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid \
         WHERE i.inhparent = 'history'::regclass ORDER BY 1",
    )
    .fetch_all(conn)
    .await
    .unwrap()
}

async fn count(conn: &mut PgConnection, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(conn).await.unwrap()
}

#[tokio::test]
async fn the_roll_up_drops_the_partitions_of_whole_days_and_keeps_their_daily_rows() {
    let db = Db::postgres().await;
    let s = db.open().await;
    let mut conn = PgConnection::connect(&schema(&db).url).await.unwrap();
    // 2027-01-15 00:00 UTC and the two days after.
    let day0 = Timestamp::from_millis(1_800_000_000_000 / 86_400_000 * 86_400_000);
    let day = |n: u64, s: u64| day0.plus_secs(n * 86_400 + s);
    s.write_results(&[result(1, "t", day(0, 10), 0), result(2, "t", day(0, 20), 3)]).await.unwrap();
    s.write_results(&[result(1, "t", day(1, 10), 0)]).await.unwrap();
    s.write_results(&[result(1, "t", day(2, 10), 0), result(1, "t", day(2, 7200), 0)]).await.unwrap();
    // Each day's partition, and the next day's ahead of its first write.
    assert_eq!(
        partitions(&mut conn).await,
        ["history_20270115", "history_20270116", "history_20270117", "history_20270118"]
    );

    // Up to the start of day 2: days 0 and 1 go whole.
    assert_eq!(s.roll_up_history(day(2, 0)).await.unwrap(), 3);
    assert_eq!(partitions(&mut conn).await, ["history_20270117", "history_20270118"]);
    let daily = s.history_daily("t", day0, day(3, 0)).await.unwrap();
    let rows: Vec<_> = daily.iter().map(|d| (d.day, d.prober, d.rounds, d.lost)).collect();
    assert_eq!(rows, [(day0, 1, 1, 0), (day0, 2, 1, 3), (day(1, 0), 1, 1, 0)]);
    assert_eq!(count(&mut conn, "SELECT COUNT(*) FROM history_daily").await, 3);

    // A cut-off inside day 2 deletes rows of its partition and keeps the partition.
    assert_eq!(s.roll_up_history(day(2, 3600)).await.unwrap(), 1);
    assert_eq!(partitions(&mut conn).await, ["history_20270117", "history_20270118"]);
    assert_eq!(s.history("t", day0, day(3, 0)).await.unwrap().len(), 1);

    // A late result for a day whose partition was dropped makes it again, and rolls up into
    // the same daily row.
    s.write_results(&[result(1, "t", day(1, 30), 0)]).await.unwrap();
    assert!(partitions(&mut conn).await.contains(&"history_20270116".to_owned()));
    assert_eq!(s.roll_up_history(day(2, 0)).await.unwrap(), 1);
    let daily = s.history_daily("t", day(1, 0), day(2, 0)).await.unwrap();
    assert_eq!((daily.len(), daily[0].rounds), (1, 2));
    assert!(!partitions(&mut conn).await.contains(&"history_20270116".to_owned()));
}

#[tokio::test]
async fn a_write_of_20000_results_lands_whole_and_again_changes_only_the_latest() {
    let db = Db::postgres().await;
    let s = db.open().await;
    let t0 = Timestamp::from_secs(1_800_000_000);
    let rows = |lost: u32| -> Vec<_> {
        (1..=4)
            .flat_map(|p| {
                (0..5_000).map(move |t| result(p, &format!("n{t}/198.51.100.{}:443", t % 250), t0, lost))
            })
            .collect()
    };
    s.write_results(&rows(0)).await.unwrap();
    let mut conn = PgConnection::connect(&schema(&db).url).await.unwrap();
    assert_eq!(count(&mut conn, "SELECT COUNT(*) FROM history").await, 20_000);
    assert_eq!(count(&mut conn, "SELECT COUNT(*) FROM targets").await, 5_000);
    // The same batch again, as after a write whose outcome was unknown: the history keeps its
    // rows as they were, the latest table takes the new values.
    s.write_results(&rows(3)).await.unwrap();
    assert_eq!(count(&mut conn, "SELECT COUNT(*) FROM history").await, 20_000);
    assert_eq!(count(&mut conn, "SELECT COUNT(*) FROM history WHERE lost = 0").await, 20_000);
    let latest = s.latest().await.unwrap();
    assert_eq!(latest.len(), 20_000);
    assert!(latest.iter().all(|r| r.lost == 3));
}

#[tokio::test]
async fn history_stored_before_the_narrow_columns_reads_back_after_the_upgrade() {
    let db = Db::postgres().await;
    let mut conn = PgConnection::connect(&schema(&db).url).await.unwrap();
    // The schema as the version before migration 0003 left it, with a day of 8-byte rows.
    sqlx::migrate!("./migrations/postgres").run_to(2, &mut conn).await.unwrap();
    let t0 = Timestamp::from_secs(1_800_000_000);
    let day = t0.millis() / 86_400_000 * 86_400_000;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO targets (id, key) VALUES (1, 't'); \
         CREATE TABLE history_20270115 PARTITION OF history FOR VALUES FROM ({day}) TO ({}); \
         INSERT INTO history SELECT {} / 600000, 1, {} + n * 10000, p, 3, p - 1, 1500 + n, NULL, NULL \
             FROM generate_series(0, 59) AS n, generate_series(1, 2) AS p",
        day + 86_400_000,
        t0.millis(),
        t0.millis()
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    let s = db.open().await;
    let mut h = s.history("t", t0, t0.plus_secs(600)).await.unwrap();
    assert_eq!(h.len(), 120, "60 rounds of 10 s, two probers each");
    assert_eq!((h[1].prober, h[1].sent, h[1].lost, h[1].rtt_us), (2, 3, 1, Some(1500)));
    // The upgraded table takes new rows beside the old ones.
    s.write_results(&[result(1, "t", t0.plus_secs(5), 2)]).await.unwrap();
    h = s.history("t", t0, t0.plus_secs(10)).await.unwrap();
    let got: Vec<_> = h.iter().map(|p| (p.at, p.prober, p.lost)).collect();
    assert_eq!(got, [(t0, 1, 0), (t0, 2, 1), (t0.plus_secs(5), 1, 2)]);
}

#[tokio::test]
async fn a_prober_id_beyond_the_history_columns_is_refused_by_name_and_the_next_write_lands() {
    let db = Db::postgres().await;
    let s = db.open().await;
    let t0 = Timestamp::from_secs(1_800_000_000);
    let e = s.write_results(&[result(1 << 31, "t", t0, 0)]).await.unwrap_err().to_string();
    assert!(e.contains("prober id 2147483648"), "{e}");
    for p in 1..=3 {
        s.write_results(&[result(p, "t", t0, 0)]).await.unwrap();
    }
    assert_eq!(s.history("t", t0, t0.plus_secs(10)).await.unwrap().len(), 3);
}

#[tokio::test]
async fn revisions_are_unique_per_cluster_and_number_by_constraint() {
    let db = Db::postgres().await;
    let _store = db.open().await;
    let mut conn = PgConnection::connect(&schema(&db).url).await.unwrap();
    let insert = "INSERT INTO revisions (cluster, number, at, reason, records, held, publish) \
                  VALUES (1, 1, 0, 'r', '{}', '{}', '[]')";
    sqlx::query(insert).execute(&mut conn).await.unwrap();
    let again = sqlx::query(insert).execute(&mut conn).await.unwrap_err();
    assert_eq!(again.as_database_error().and_then(|e| e.code()).as_deref(), Some("23505"), "{again}");
}

#[test]
fn a_url_shows_without_its_password_and_a_bad_one_is_refused() {
    let url: PostgresUrl = "postgres://vantage:s3cret@db.example:6543/fleet?sslmode=disable".parse().unwrap();
    for shown in [url.to_string(), format!("{url:?}"), Database::Postgres(url.clone()).to_string()] {
        assert!(shown.contains("db.example:6543/fleet") && !shown.contains("s3cret"), "{shown}");
    }
    for bad in ["mysql://x@y/z", "postgres://u:s3cret@host:notaport/db"] {
        let e = bad.parse::<PostgresUrl>().unwrap_err().to_string();
        assert!(!e.contains("s3cret") && !e.is_empty(), "{e}");
    }
}

#[tokio::test]
async fn a_server_that_is_not_there_is_an_error_not_a_hang() {
    // Port 1 on loopback: nothing listens there.
    let url: PostgresUrl = "postgres://postgres@127.0.0.1:1/test".parse().unwrap();
    let started = std::time::Instant::now();
    assert!(Store::open_postgres(&url).await.is_err());
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}

fn revision(cluster: i64, number: u32) -> vantage_store::RevisionRow {
    vantage_store::RevisionRow {
        cluster,
        number,
        at: Timestamp::from_secs(1_800_000_000 + i64::from(number)),
        reason: format!("r{number}"),
        records: serde_json::json!({}),
        held: serde_json::json!({}),
        publish: serde_json::json!([]),
    }
}

/// Revision numbers are unique and gap-free per cluster by constraint: a revision is stored
/// only after the one before it, and a number stored twice keeps the first.
#[tokio::test]
async fn revisions_are_numbered_without_gaps_by_constraint() {
    let db = Db::postgres().await;
    let s = db.open().await;
    s.insert_revision(&revision(1, 1)).await.unwrap();
    let gap = s.insert_revision(&revision(1, 3)).await.expect_err("3 before 2");
    assert!(gap.to_string().contains("revisions_follow_previous"), "{gap}");
    s.insert_revision(&revision(1, 2)).await.unwrap();
    s.insert_revision(&revision(1, 3)).await.unwrap();
    let mut again = revision(1, 3);
    again.reason = "another holder's".into();
    s.insert_revision(&again).await.unwrap();
    assert_eq!(s.revision(1, 3).await.unwrap().unwrap().reason, "r3", "the first one stays");
    // Each cluster numbers on its own.
    s.insert_revision(&revision(2, 1)).await.unwrap();
    assert!(s.insert_revision(&revision(2, 5)).await.is_err());
}

/// Configuration changes are numbered: a replica commits change n only if nobody did, and
/// the others read every change in order.
#[tokio::test]
async fn changes_are_logged_in_order_and_a_taken_number_is_a_conflict() {
    let db = Db::postgres().await;
    let s = db.open().await;
    let r = s.replication().expect("PostgreSQL replicates");
    let t = Timestamp::from_secs(1_800_000_000);
    assert_eq!(r.changes_head().await.unwrap(), 0);
    let put = |id: i64| vantage_store::Write::Put {
        id,
        kind: "region".into(),
        parent: None,
        name: format!("r{id}"),
        body: "{}".into(),
    };
    s.commit_logged(Some(log(1, "a", &[])), &[put(1)], &[], t).await.unwrap();
    let conflict =
        s.commit_logged(Some(log(1, "b", &[])), &[put(2)], &[], t).await.expect_err("number 1 is taken");
    assert!(matches!(conflict, vantage_store::Error::Conflict), "{conflict}");
    assert_eq!(s.objects().await.unwrap().len(), 1, "the refused change wrote nothing");
    s.commit_logged(Some(log(2, "b", &[])), &[vantage_store::Write::Delete { id: 1 }, put(2)], &[], t)
        .await
        .unwrap();
    let logged = r.changes_after(0).await.unwrap();
    let seen: Vec<_> = logged.iter().map(|c| (c.seq, c.origin.as_str(), c.writes.len())).collect();
    assert_eq!(seen, [(1, "a", 1), (2, "b", 2)]);
    assert_eq!(logged[1].writes[0], vantage_store::Write::Delete { id: 1 });
    assert_eq!(r.changes_after(1).await.unwrap().len(), 1);
    // Writes to the mirror registry's files are logged with the change that numbers them, and
    // a replica starting reads every one in order.
    let file = |name: &str, text: Option<&str>| FileWrite { name: name.into(), text: text.map(Into::into) };
    let written = [file("m.example.net.yaml", Some("host: m.example.net\n")), file("tenants.yaml", None)];
    s.commit_logged(Some(log(3, "a", &written)), &[], &[], t).await.unwrap();
    s.commit_logged(Some(log(4, "b", &written[..1])), &[], &[], t).await.unwrap();
    let logged = r.changes_after(2).await.unwrap();
    assert_eq!((logged[0].files.as_slice(), logged[0].writes.len()), (&written[..], 0));
    assert!(r.changes_after(0).await.unwrap()[0].files.is_empty());
    assert_eq!(r.logged_files().await.unwrap(), [&written[..], &written[..1]].concat());
    // Pruning keeps the newest, the number the next change follows.
    r.prune(t, t.plus_secs(1)).await.unwrap();
    assert_eq!(r.changes_head().await.unwrap(), 4);
}

fn log<'a>(seq: i64, origin: &'a str, files: &'a [FileWrite]) -> LogAs<'a> {
    LogAs { seq, origin, files }
}

/// Relayed observations come back in the order they were relayed, each with its time, and a
/// notification says so.
#[tokio::test]
async fn relayed_observations_are_read_in_order_after_a_notification() {
    let db = Db::postgres().await;
    let s = db.open().await;
    let r = s.replication().unwrap();
    let mut notified = r.listen().await.unwrap();
    let t = Timestamp::from_secs(1_800_000_000);
    let head = r.inbox_head().await.unwrap();
    r.relay("a", &[(t, "1".into()), (t.plus_millis(1), "2".into())]).await.unwrap();
    let written =
        tokio::time::timeout(std::time::Duration::from_secs(5), notified.recv()).await.unwrap().unwrap();
    assert_eq!(written, vantage_store::Written::Inbox);
    let later = t.plus_millis(500);
    r.relay("b", &[(later, "3".into())]).await.unwrap();
    let rows = r.relayed_after(head).await.unwrap();
    let seen: Vec<_> = rows.iter().map(|x| (x.origin.as_str(), x.body.as_str(), x.at)).collect();
    assert_eq!(seen, [("a", "1", t), ("a", "2", t.plus_millis(1)), ("b", "3", later)]);
    assert!(r.relayed_after(rows[1].id).await.unwrap().len() == 1);
    r.prune(t.plus_secs(1), t).await.unwrap();
    assert!(r.relayed_after(head).await.unwrap().is_empty());
}

/// One lease holder at a time; when its connection goes, another takes the lease. A revision
/// is stored only under the lease's current epoch: once another replica has taken the lease,
/// the previous holder's revisions are refused.
#[tokio::test]
async fn one_replica_holds_the_lease_and_one_that_lost_it_stores_no_revision() {
    let db = Db::postgres().await;
    let s = db.open().await;
    let r = s.replication().unwrap();
    let wait = std::time::Duration::from_secs(5);
    let (mut a, mut b) = (r.lease(), r.lease());
    assert!(a.hold(wait).await);
    assert!(!b.hold(wait).await, "taken");
    assert!(a.hold(wait).await, "still held");
    let first = a.epoch().expect("the holder's epoch");
    r.insert_revision(&revision(1, 1), first).await.unwrap();
    a.release();
    assert_eq!(a.epoch(), None);
    // The server frees the lock once it sees the connection closed.
    let started = std::time::Instant::now();
    while !b.hold(wait).await {
        assert!(started.elapsed() < wait, "free again");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!a.hold(wait).await);
    let second = b.epoch().unwrap();
    assert!(second > first);
    let refused = r.insert_revision(&revision(1, 2), first).await.expect_err("fenced");
    assert!(matches!(refused, vantage_store::Error::Fenced), "{refused}");
    r.insert_revision(&revision(1, 2), second).await.unwrap();
    assert_eq!(s.latest_revisions().await.unwrap()[0].number, 2);
}
