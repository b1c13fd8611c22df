//! The admin API's bodies as the pages read them: the API's own types (`crate::views`), under
//! the names the pages use. The UI reads the same routes as any client and decides nothing
//! itself.

pub(super) use crate::views::MaintenanceView as MaintenanceWindow;
pub(super) use crate::views::{AddressSeries, AddressView, Addresses, SeriesPoint};
pub(super) use crate::views::{
    AdminTokenView as AdminToken, AuditView as AuditEntry, ClusterView as Cluster,
    EnrollTokenView as EnrollToken, GroupView as Group, LineView as Line, NodeView as Node,
    ProberView as Prober, RuleView as Rule,
};
pub(super) use crate::views::{
    Alerts, DnsView as Dns, History, Items, LineName, Preview, RegionView as Region, ResultView as ResultRow,
    RevisionView as Revision, Revisions, WindowView as Window,
};
pub(super) use crate::views::{
    CheckView as Check, MirrorList, MirrorProberView as MirrorProber, MirrorView as Mirror,
    TenantView as Tenant,
};
pub(super) use crate::views::{
    MonitorHistory, MonitorVerdictView as MonitorVerdict, MonitorView as Monitor,
    RegionVerdictView as RegionVerdict,
};
pub(super) use crate::views::{
    SilenceState, SilenceView as Silence, StatusPageView as StatusPage, WebhookView as Channel,
};
pub(super) use vantage_control::alerts::Alert;
pub(super) use vantage_control::availability::Report as Availability;
pub(super) use vantage_control::maintenance::MaintenanceState;
pub(super) use vantage_control::mirrors::{LoadError, ReloadStatus};
pub(super) use vantage_control::observe::RoundSummary as Round;
pub(super) use vantage_core::rules::Condition;
