//! The list queries whose `WHERE` depends on a filter, written once: the query builder gives
//! each backend its own placeholders, and the SQL itself is common to SQLite and PostgreSQL.

use sqlx::{Database, Encode, QueryBuilder, Type};

use crate::{AUDIT_RENAMES, AuditFilter, EventFilter};

/// Whether the action filter `f` (an action, or a prefix ending in `.`) takes `action`.
fn takes(f: &str, action: &str) -> bool {
    match f.strip_suffix('.') {
        Some(prefix) => action == prefix || action.strip_prefix(f).is_some(),
        None => action == f,
    }
}

/// Both names of every renamed action the filter `f` takes by either of them.
fn renamed_alike(f: &str) -> impl Iterator<Item = &'static str> + '_ {
    AUDIT_RENAMES
        .iter()
        .filter(move |(new, old)| takes(f, new) || takes(f, old))
        .flat_map(|(new, old)| [*new, *old])
}

/// Audit entries matching `f`, newest first.
pub(crate) fn audit<DB: Database>(f: &AuditFilter) -> QueryBuilder<DB>
where
    DB::Arguments: Default,
    for<'a> String: Encode<'a, DB> + Type<DB>,
    for<'a> i64: Encode<'a, DB> + Type<DB>,
{
    let mut q = QueryBuilder::new("SELECT id, at, actor, action, object, metadata FROM audit WHERE 1 = 1");
    if let Some(a) = &f.action {
        if let Some(prefix) = a.strip_suffix('.') {
            q.push(" AND (action = ").push_bind(prefix.to_owned()).push(" OR action LIKE ");
            q.push_bind(format!("{}.%", prefix.replace('%', "\\%").replace('_', "\\_"))).push(" ESCAPE '\\'");
        } else {
            q.push(" AND (action = ").push_bind(a.clone());
        }
        // Entries written under a renamed action's other name match too.
        for name in renamed_alike(a) {
            q.push(" OR action = ").push_bind(name.to_owned());
        }
        q.push(")");
    }
    if let Some(a) = &f.actor {
        q.push(" AND actor = ").push_bind(a.clone());
    }
    if let Some(o) = &f.object {
        q.push(" AND object = ").push_bind(o.clone());
    }
    if let Some(t) = f.since {
        q.push(" AND at >= ").push_bind(t.millis());
    }
    if let Some(t) = f.until {
        q.push(" AND at < ").push_bind(t.millis());
    }
    q.push(" ORDER BY id DESC LIMIT ").push_bind(i64::from(f.limit.unwrap_or(100).min(10_000)));
    q
}

/// Which end of the matching events a query takes `limit` of.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Order {
    /// The newest, newest first.
    Newest,
    /// The oldest, oldest first.
    Oldest,
}

/// Events matching `f`: `limit` of them from the end `order` says, in that order.
pub(crate) fn events<DB: Database>(f: &EventFilter, order: Order) -> QueryBuilder<DB>
where
    DB::Arguments: Default,
    for<'a> String: Encode<'a, DB> + Type<DB>,
    for<'a> i64: Encode<'a, DB> + Type<DB>,
{
    let mut q =
        QueryBuilder::new("SELECT id, at, kind, cluster, node, summary, details FROM events WHERE 1 = 1");
    if let Some(c) = f.cluster {
        q.push(" AND cluster = ").push_bind(c);
    }
    if let Some(n) = f.node {
        q.push(" AND node = ").push_bind(n);
    }
    if let Some(t) = f.since {
        q.push(" AND at >= ").push_bind(t.millis());
    }
    if let Some(id) = f.after {
        q.push(" AND id > ").push_bind(id);
    }
    if !f.kinds.is_empty() {
        q.push(" AND kind IN (");
        let mut list = q.separated(", ");
        for k in &f.kinds {
            list.push_bind(k.clone());
        }
        q.push(")");
    }
    q.push(match order {
        Order::Newest => " ORDER BY id DESC LIMIT ",
        Order::Oldest => " ORDER BY id ASC LIMIT ",
    })
    .push_bind(i64::from(f.limit.min(10_000)));
    q
}
