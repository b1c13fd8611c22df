//! Server-assigned identifiers. One newtype per kind, so a node id can never be
//! passed where a prober id is meant.

use std::fmt;

macro_rules! id_type {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::num::ParseIntError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map($name)
            }
        }
    )*};
}

id_type!(
    RegionId,
    /// A prober (a `vantage probe` process).
    ProberId,
    ClusterId,
    /// A node group of a cluster.
    GroupId,
    /// A line of a cluster.
    LineId,
    /// A node (edge server).
    NodeId,
    /// A scheduling rule.
    RuleId,
    /// A target a prober checks.
    TargetId,
    MonitorId,
);
