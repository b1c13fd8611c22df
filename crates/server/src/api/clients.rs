//! `GET /v1/clients/{ip}`: where Vantage puts a client — the place the geo databases give it,
//! its region (as the doors find it) and what each cluster's DNS answers it — read from the
//! tables DNS and the doors answer from, so that it says what they do.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use serde::Deserialize;

use super::{Api, Op};
use crate::app::App;
use crate::error::ApiError;
use crate::views::{ClientAnswerView, ClientView, PlaceView};

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get(
            "/v1/clients/{ip}",
            "clusters",
            "Where a client is (country, continent, AS, region) and what each cluster's DNS answers it (prefix: as an ECS client subnet of that length)",
        )
        .answers::<ClientView>(),
        get(client),
    );
}

/// What `/v1/clients/{ip}` takes besides the address.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientQuery {
    /// The source prefix of an ECS client subnet: the address is cut to it, as a resolver
    /// sends it (absent: the whole address).
    prefix: Option<u8>,
}

async fn client(
    State(app): State<Arc<App>>,
    Path(ip): Path<String>,
    Query(q): Query<ClientQuery>,
) -> Result<Json<ClientView>, ApiError> {
    let ip: IpAddr =
        ip.parse().map_err(|_| ApiError::invalid("ip", format!("{ip:?} is not an IPv4 or IPv6 address")))?;
    let mut ip = ip.to_canonical();
    if let Some(prefix) = q.prefix {
        let (family, bits) = if ip.is_ipv4() { ("IPv4", 32) } else { ("IPv6", 128) };
        if prefix > bits {
            return Err(ApiError::invalid(
                "prefix",
                format!("an {family} prefix is at most {bits} bits, got {prefix}"),
            ));
        }
        ip = vantage_core::net::mask(ip, prefix);
    }
    let located = app.geo().map(|g| g.locate(ip));
    let doors = app.doors();
    let region = doors.region_of(ip, located.as_ref().map(|l| &l.place)).map(str::to_owned);
    let answers = (app.answers().load().answers_for(ip).into_iter())
        .map(|a| ClientAnswerView { cluster: a.cluster, line: a.line, records: a.records, scope: a.scope })
        .collect();
    let place = located.map(|l| PlaceView {
        country: l.place.country,
        continent: l.place.continent,
        asn: l.place.asn,
        prefix: l.prefix,
    });
    Ok(Json(ClientView { ip, place, region, answers }))
}
