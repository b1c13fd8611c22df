//! The regions page.

use super::*;
use vantage_core::geo::describe_clients;

#[derive(Debug)]
struct RegionRow {
    id: i64,
    code: String,
    name: String,
    /// Its client networks and places.
    clients: String,
    probers: usize,
    /// Requests from its clients over the last day.
    requests_day: u64,
    /// Its fields as the API takes them, for the form that edits it.
    values: String,
}

#[derive(Template)]
#[template(path = "regions.html")]
struct RegionsPage {
    frame: Frame,
    regions: Vec<RegionRow>,
}

pub(in crate::ui) async fn regions(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let regions: Items<views::Region> = client(&ui, &v).get("/v1/regions").await?;
    let page = RegionsPage {
        frame: Frame::new(&v, "Regions", "regions", 0),
        regions: regions
            .items
            .into_iter()
            .map(|r| RegionRow {
                values: serde_json::json!({
                    "code": r.code,
                    "name": r.name,
                    "client_networks": r.client_networks,
                    "countries": r.places.countries,
                    "continents": r.places.continents,
                    "asns": r.places.asns,
                })
                .to_string(),
                clients: describe_clients(&r.client_networks, &r.places),
                id: r.id,
                code: r.code,
                name: r.name,
                probers: r.probers,
                requests_day: r.requests_day,
            })
            .collect(),
    };
    Ok(render(&page))
}
