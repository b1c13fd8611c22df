//! Where Vantage puts a client (`GET /v1/clients/{ip}`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use vantage_core::geo::{Continent, Country};

/// A client address as Vantage sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClientView {
    /// The address looked at: the one asked about, cut to the prefix when one was given (an
    /// IPv4-mapped IPv6 address reads as IPv4).
    #[schema(value_type = String)]
    pub ip: IpAddr,
    /// Where the geo databases place it (absent: none configured).
    pub place: Option<PlaceView>,
    /// Its region, as the doors find it: the one whose client networks hold it, else the one
    /// claiming its place (absent: none).
    pub region: Option<String>,
    /// What each cluster's DNS answers it, as an ECS client address or a resolver's.
    pub answers: Vec<ClientAnswerView>,
}

/// Where the geo databases place an address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlaceView {
    pub country: Option<Country>,
    pub continent: Option<Continent>,
    /// Autonomous system number.
    pub asn: Option<u32>,
    /// The prefix length within which every address is placed alike.
    pub prefix: u8,
}

/// What one cluster answers the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClientAnswerView {
    /// The cluster's name.
    pub cluster: String,
    /// The line chosen (`all`: no line claims the client and the cluster has no default line).
    pub line: String,
    /// Its records now.
    #[schema(value_type = Vec<String>)]
    pub records: Vec<IpAddr>,
    /// The ECS scope prefix the choice holds for.
    pub scope: u8,
}
