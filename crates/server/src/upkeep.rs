//! The store's upkeep the control core asks for — expiry of latest results and events, the
//! daily roll-up of history — carried out on a task of its own, in order, so that a day's
//! roll-up never holds up a revision, an alert or an event behind it. (A removed prober's
//! results go through the intake, behind the results stored before: `channel::intake`.)

use tokio::sync::mpsc;
use vantage_control::Upkeep;
use vantage_store::Store;

/// Carries out `work` until the driver drops its end, then what is left.
pub(crate) async fn run(store: Store, mut work: mpsc::UnboundedReceiver<Upkeep>) {
    while let Some(w) = work.recv().await {
        carry_out(&store, w).await;
    }
}

async fn carry_out(store: &Store, w: Upkeep) {
    match w {
        Upkeep::ExpireResults { before } => match store.delete_latest_before(before).await {
            Ok(n) if n > 0 => tracing::info!(dropped = n, "expired latest results not updated for an hour"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot expire latest results"),
        },
        Upkeep::ExpireEvents { before } => match store.delete_events_before(before).await {
            Ok(n) if n > 0 => tracing::info!(dropped = n, "deleted events past the history's retention"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot delete old events"),
        },
        Upkeep::RollUpHistory { before, daily_before } => {
            match store.roll_up_history(before).await {
                Ok(n) if n > 0 => tracing::info!(rows = n, "rolled up history"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot roll up history"),
            }
            if let Err(e) = store.delete_daily_before(daily_before).await {
                tracing::warn!(error = %e, "cannot delete old daily roll-ups");
            }
        }
    }
}
