//! The queries whose SQL is the same on SQLite and PostgreSQL, written once: sqlx takes
//! `$N` placeholders on both, and the readers of `rows` serve both. [`shared_queries!`] makes
//! them in each backend's module, for its pool and database types, where the names they use
//! are imported; what differs between the backends (opening, transactions, result writes, the
//! history's roll-up, the state scan, sizes) stays in `sqlite` and `postgres`.
//! [`shared_methods!`] makes the [`Backend`](crate::backend::Backend) methods that run them,
//! in each backend's implementation, whose `pool` field is the pool.

/// States written by one statement of [`put_states`](crate::Store::put_states) at most: three
/// parameters each, well within both backends' limit on a statement's parameters.
pub(crate) const STATES_AT_ONCE: usize = 1_000;

/// The shared queries for a pool type `$pool` of database `$db`.
macro_rules! shared_queries {
    ($pool:ty, $db:ty) => {
        pub(crate) async fn audit(pool: &$pool, f: &AuditFilter) -> Result<Vec<AuditEntry>> {
            let rows = filters::audit::<$db>(f).build().fetch_all(pool).await?;
            rows::all(&rows, rows::audit)
        }

        pub(crate) async fn latest(pool: &$pool) -> Result<Vec<ResultRow>> {
            let rows = sqlx::query(
                "SELECT l.prober, t.key, l.at, l.sent, l.lost, l.rtt_us, l.error, l.connected, l.xmit, l.recv, l.good, \
                        l.avg_rtt, l.hls, l.filled \
                 FROM latest_results AS l JOIN targets AS t ON t.id = l.target ORDER BY l.prober, l.target",
            )
            .fetch_all(pool)
            .await?;
            rows::all(&rows, rows::latest)
        }

        pub(crate) async fn delete_latest_of(pool: &$pool, prober: i64) -> Result<u64> {
            Ok(sqlx::query("DELETE FROM latest_results WHERE prober = $1")
                .bind(prober)
                .execute(pool)
                .await?
                .rows_affected())
        }

        pub(crate) async fn delete_latest_before(pool: &$pool, before: Timestamp) -> Result<u64> {
            Ok(sqlx::query("DELETE FROM latest_results WHERE at < $1")
                .bind(before.millis())
                .execute(pool)
                .await?
                .rows_affected())
        }

        pub(crate) async fn history_daily(
            pool: &$pool,
            target: &str,
            since: Timestamp,
            until: Timestamp,
        ) -> Result<Vec<DailyPoint>> {
            let rows = sqlx::query(
                "SELECT d.day, d.prober, d.rounds, d.sent, d.lost, d.rtt_avg_us, d.rtt_max_us FROM history_daily AS d \
                 WHERE d.target = (SELECT id FROM targets WHERE key = $1) AND d.day >= $2 AND d.day < $3 \
                 ORDER BY d.day, d.prober",
            )
            .bind(target)
            .bind(since.millis())
            .bind(until.millis())
            .fetch_all(pool)
            .await?;
            rows::all(&rows, rows::daily_point)
        }

        pub(crate) async fn insert_revision<'e>(
            to: impl sqlx::Executor<'e, Database = $db>,
            s: &Stored,
        ) -> Result<bool> {
            let r = &s.row;
            let done = sqlx::query(
                "INSERT INTO revisions (cluster, number, at, reason, records, held, publish, delta, difference) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (cluster, number) DO NOTHING",
            )
            .bind(r.cluster)
            .bind(i64::from(r.number))
            .bind(r.at.millis())
            .bind(&r.reason)
            .bind(if s.delta == 0 { serde_json::to_string(&r.records)? } else { String::new() })
            .bind(serde_json::to_string(&r.held)?)
            .bind(serde_json::to_string(&r.publish)?)
            .bind(i64::from(s.delta))
            .bind(if s.delta == 0 { None } else { Some(serde_json::to_string(&r.records)?) })
            .execute(to)
            .await?;
            Ok(done.rows_affected() > 0)
        }

        pub(crate) async fn set_revision_publish(
            pool: &$pool,
            cluster: i64,
            number: u32,
            publish: &serde_json::Value,
        ) -> Result<()> {
            sqlx::query("UPDATE revisions SET publish = $3 WHERE cluster = $1 AND number = $2")
                .bind(cluster)
                .bind(i64::from(number))
                .bind(serde_json::to_string(publish)?)
                .execute(pool)
                .await?;
            Ok(())
        }

        pub(crate) async fn revision(pool: &$pool, cluster: i64, number: u32) -> Result<Option<Stored>> {
            let row = sqlx::query(
                "SELECT cluster, number, at, reason, records, held, publish, delta, difference FROM revisions \
                 WHERE cluster = $1 AND number = $2",
            )
            .bind(cluster)
            .bind(i64::from(number))
            .fetch_optional(pool)
            .await?;
            row.as_ref().map(rows::revision).transpose()
        }

        pub(crate) async fn revisions(pool: &$pool, cluster: i64, limit: u32) -> Result<Vec<Stored>> {
            let rows = sqlx::query(
                "SELECT cluster, number, at, reason, records, held, publish, delta, difference FROM revisions WHERE cluster = $1 \
                 ORDER BY number DESC LIMIT $2",
            )
            .bind(cluster)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            rows::all(&rows, rows::revision)
        }

        pub(crate) async fn revisions_between(
            pool: &$pool,
            cluster: i64,
            after: u32,
            upto: u32,
            limit: u32,
        ) -> Result<Vec<Stored>> {
            let rows = sqlx::query(
                "SELECT cluster, number, at, reason, records, held, publish, delta, difference FROM revisions \
                 WHERE cluster = $1 AND number > $2 AND number <= $3 ORDER BY number DESC LIMIT $4",
            )
            .bind(cluster)
            .bind(i64::from(after))
            .bind(i64::from(upto))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            let mut out = rows::all(&rows, rows::revision)?;
            out.reverse();
            Ok(out)
        }

        pub(crate) async fn put_state(pool: &$pool, key: &str, value: &str, now: Timestamp) -> Result<()> {
            sqlx::query(
                "INSERT INTO state (key, value, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )
            .bind(key)
            .bind(value)
            .bind(now.millis())
            .execute(pool)
            .await?;
            Ok(())
        }

        pub(crate) async fn claim_state(pool: &$pool, key: &str, value: &str, now: Timestamp) -> Result<String> {
            sqlx::query(
                "INSERT INTO state (key, value, updated_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING",
            )
            .bind(key)
            .bind(value)
            .bind(now.millis())
            .execute(pool)
            .await?;
            Ok(sqlx::query_scalar("SELECT value FROM state WHERE key = $1").bind(key).fetch_one(pool).await?)
        }

        /// Writes the states `puts` and deletes those under `deletes` in one transaction, after
        /// deleting every state whose key starts with `clear`, when given.
        pub(crate) async fn put_states(
            pool: &$pool,
            clear: Option<&str>,
            puts: &[(String, String)],
            deletes: &[String],
            now: Timestamp,
        ) -> Result<()> {
            in_transaction(pool, async |tx| {
                if let Some(prefix) = clear {
                    delete_prefix(&mut *tx, prefix).await?;
                }
                for chunk in deletes.chunks(crate::shared::STATES_AT_ONCE) {
                    let mut q = sqlx::QueryBuilder::<$db>::new("DELETE FROM state WHERE key IN (");
                    let mut keys = q.separated(", ");
                    for key in chunk {
                        keys.push_bind(key.as_str());
                    }
                    q.push(")");
                    q.build().execute(&mut *tx).await?;
                }
                for chunk in puts.chunks(crate::shared::STATES_AT_ONCE) {
                    let mut q = sqlx::QueryBuilder::<$db>::new("INSERT INTO state (key, value, updated_at) ");
                    q.push_values(chunk, |mut row, (key, value)| {
                        row.push_bind(key.as_str()).push_bind(value.as_str()).push_bind(now.millis());
                    });
                    q.push(
                        " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    );
                    q.build().execute(&mut *tx).await?;
                }
                Ok(())
            })
            .await
        }

        pub(crate) async fn delete_state(pool: &$pool, key: &str) -> Result<()> {
            sqlx::query("DELETE FROM state WHERE key = $1").bind(key).execute(pool).await?;
            Ok(())
        }

        pub(crate) async fn events(pool: &$pool, f: &EventFilter) -> Result<Vec<EventRow>> {
            let rows = filters::events::<$db>(f, Order::Newest).build().fetch_all(pool).await?;
            let mut out = rows::all(&rows, rows::event)?;
            // The newest `limit`, returned oldest first (a timeline reads forward).
            out.reverse();
            Ok(out)
        }

        pub(crate) async fn events_after(pool: &$pool, f: &EventFilter) -> Result<Vec<EventRow>> {
            let rows = filters::events::<$db>(f, Order::Oldest).build().fetch_all(pool).await?;
            rows::all(&rows, rows::event)
        }

        pub(crate) async fn last_event(pool: &$pool) -> Result<i64> {
            Ok(sqlx::query_scalar::<_, Option<i64>>("SELECT MAX(id) FROM events").fetch_one(pool).await?.unwrap_or(0))
        }

        pub(crate) async fn delete_events_before(pool: &$pool, before: Timestamp) -> Result<u64> {
            let done = sqlx::query("DELETE FROM events WHERE at < $1").bind(before.millis()).execute(pool).await?;
            Ok(done.rows_affected())
        }
    };
}

pub(crate) use shared_queries;

/// The [`Backend`](crate::backend::Backend) methods that run the shared queries (and the
/// readers every backend shares) on `self.pool`.
macro_rules! shared_methods {
    () => {
        fn ping(&self) -> Op<'_, ()> {
            Box::pin(rows::ping(&self.pool))
        }

        fn objects(&self) -> Op<'_, Vec<ObjectRow>> {
            Box::pin(rows::objects(&self.pool))
        }

        fn audit<'a>(&'a self, filter: &'a AuditFilter) -> Op<'a, Vec<AuditEntry>> {
            Box::pin(audit(&self.pool, filter))
        }

        fn latest(&self) -> Op<'_, Vec<ResultRow>> {
            Box::pin(latest(&self.pool))
        }

        fn delete_latest_of(&self, prober: i64) -> Op<'_, u64> {
            Box::pin(delete_latest_of(&self.pool, prober))
        }

        fn delete_latest_before(&self, before: Timestamp) -> Op<'_, u64> {
            Box::pin(delete_latest_before(&self.pool, before))
        }

        fn history<'a>(
            &'a self,
            target: &'a str,
            since: Timestamp,
            until: Timestamp,
        ) -> Op<'a, Vec<HistoryPoint>> {
            Box::pin(history(&self.pool, target, since, until))
        }

        fn history_daily<'a>(
            &'a self,
            target: &'a str,
            since: Timestamp,
            until: Timestamp,
        ) -> Op<'a, Vec<DailyPoint>> {
            Box::pin(history_daily(&self.pool, target, since, until))
        }

        fn delete_daily_before(&self, before: Timestamp) -> Op<'_, u64> {
            Box::pin(delete_daily_before(&self.pool, before))
        }

        fn insert_events<'a>(&'a self, events: &'a [EventRow]) -> Op<'a, ()> {
            Box::pin(insert_events(&self.pool, events))
        }

        fn events<'a>(&'a self, filter: &'a EventFilter) -> Op<'a, Vec<EventRow>> {
            Box::pin(events(&self.pool, filter))
        }

        fn events_after<'a>(&'a self, filter: &'a EventFilter) -> Op<'a, Vec<EventRow>> {
            Box::pin(events_after(&self.pool, filter))
        }

        fn last_event(&self) -> Op<'_, i64> {
            Box::pin(last_event(&self.pool))
        }

        fn delete_events_before(&self, before: Timestamp) -> Op<'_, u64> {
            Box::pin(delete_events_before(&self.pool, before))
        }

        fn revision(&self, cluster: i64, number: u32) -> Op<'_, Option<Stored>> {
            Box::pin(revision(&self.pool, cluster, number))
        }

        fn revisions_between(&self, cluster: i64, after: u32, upto: u32, limit: u32) -> Op<'_, Vec<Stored>> {
            Box::pin(revisions_between(&self.pool, cluster, after, upto, limit))
        }

        fn insert_revision<'a>(&'a self, row: &'a Stored) -> Op<'a, bool> {
            Box::pin(insert_revision(&self.pool, row))
        }

        fn set_revision_publish<'a>(
            &'a self,
            cluster: i64,
            number: u32,
            publish: &'a serde_json::Value,
        ) -> Op<'a, ()> {
            Box::pin(set_revision_publish(&self.pool, cluster, number, publish))
        }

        fn revisions(&self, cluster: i64, limit: u32) -> Op<'_, Vec<Stored>> {
            Box::pin(revisions(&self.pool, cluster, limit))
        }

        fn latest_revisions(&self) -> Op<'_, Vec<Stored>> {
            Box::pin(latest_revisions(&self.pool))
        }

        fn put_state<'a>(&'a self, key: &'a str, value: &'a str, now: Timestamp) -> Op<'a, ()> {
            Box::pin(put_state(&self.pool, key, value, now))
        }

        fn claim_state<'a>(&'a self, key: &'a str, value: &'a str, now: Timestamp) -> Op<'a, String> {
            Box::pin(claim_state(&self.pool, key, value, now))
        }

        fn states<'a>(&'a self, prefix: &'a str) -> Op<'a, Vec<(String, String)>> {
            Box::pin(states(&self.pool, prefix))
        }

        fn put_states<'a>(
            &'a self,
            clear: Option<&'a str>,
            puts: &'a [(String, String)],
            deletes: &'a [String],
            now: Timestamp,
        ) -> Op<'a, ()> {
            Box::pin(put_states(&self.pool, clear, puts, deletes, now))
        }

        fn delete_state<'a>(&'a self, key: &'a str) -> Op<'a, ()> {
            Box::pin(delete_state(&self.pool, key))
        }

        fn checkpoint(&self) -> Op<'_, ()> {
            Box::pin(checkpoint(&self.pool))
        }

        fn size_bytes(&self) -> Op<'_, u64> {
            Box::pin(size_bytes(&self.pool))
        }
    };
}

pub(crate) use shared_methods;
