//! Where a client is, as the operator's geo database places it, and which line or region claims
//! it (SPEC §10a). A line or a region may claim clients by autonomous system, country or
//! continent as well as by client network; a network always comes first (it is what the
//! operator wrote for those very addresses), then the most specific geo claim: an AS, then a
//! country, then a continent. Between two lines claiming alike, the first (by id: the one made
//! first) wins, as with overlapping networks.
//!
//! Reading the database is the server's and the DNS crate's (it is a file that changes); what
//! a place is and who claims it is decided here.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result, at_most};
use crate::net::IpNet;

/// Countries, continents and autonomous systems one line or region claims, each at most.
pub const MAX_PLACES: usize = 1024;

/// A country: its ISO 3166-1 alpha-2 code, upper case (`SG`), as geo databases name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Country([u8; 2]);

impl Country {
    /// The code (`SG`).
    pub fn as_str(&self) -> &str {
        // Two ASCII letters by construction.
        std::str::from_utf8(&self.0).unwrap_or("??")
    }
}

impl FromStr for Country {
    type Err = String;
    /// Two letters, either case.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().as_bytes() {
            [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
                Ok(Country([a.to_ascii_uppercase(), b.to_ascii_uppercase()]))
            }
            _ => Err(format!("a country is an ISO 3166-1 alpha-2 code such as SG, got {s:?}")),
        }
    }
}

impl fmt::Display for Country {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Country {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Country {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "schema")]
impl utoipa::PartialSchema for Country {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some("ISO 3166-1 alpha-2 country code (`SG`)"))
            .min_length(Some(2))
            .max_length(Some(2))
            .into()
    }
}

#[cfg(feature = "schema")]
impl utoipa::ToSchema for Country {}

/// A continent, by the two-letter code geo databases give it (read in either case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub enum Continent {
    /// Africa.
    AF,
    /// Antarctica.
    AN,
    /// Asia.
    AS,
    /// Europe.
    EU,
    /// North America.
    NA,
    /// Oceania.
    OC,
    /// South America.
    SA,
}

impl Continent {
    /// The code (`EU`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Continent::AF => "AF",
            Continent::AN => "AN",
            Continent::AS => "AS",
            Continent::EU => "EU",
            Continent::NA => "NA",
            Continent::OC => "OC",
            Continent::SA => "SA",
        }
    }

    /// The continent a database's code names, either case (`None`: no continent of ours).
    pub fn from_code(code: &str) -> Option<Continent> {
        [
            Continent::AF,
            Continent::AN,
            Continent::AS,
            Continent::EU,
            Continent::NA,
            Continent::OC,
            Continent::SA,
        ]
        .into_iter()
        .find(|c| c.as_str().eq_ignore_ascii_case(code))
    }
}

impl<'de> Deserialize<'de> for Continent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Continent::from_code(s.trim()).ok_or_else(|| {
            serde::de::Error::custom(format!("a continent is one of AF, AN, AS, EU, NA, OC, SA, got {s:?}"))
        })
    }
}

impl fmt::Display for Continent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the geo database places a client address; each part absent where it says nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    pub country: Option<Country>,
    pub continent: Option<Continent>,
    /// Autonomous system number.
    pub asn: Option<u32>,
}

/// How specifically a claim names a place, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Claim {
    Asn,
    Country,
    Continent,
}

/// The places one line or region claims (by the geo database), each list sorted and without
/// repeats: in API bodies, its three fields beside the object's own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Places {
    /// Countries (ISO 3166-1 alpha-2 codes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<Country>,
    /// Continents (`EU`, `AS`…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub continents: Vec<Continent>,
    /// Autonomous system numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asns: Vec<u32>,
}

impl Places {
    /// Validated places as entered: lists bounded, AS 0 refused, then sorted without repeats.
    pub fn new(
        mut countries: Vec<Country>,
        mut continents: Vec<Continent>,
        mut asns: Vec<u32>,
    ) -> Result<Places> {
        at_most("countries", countries.len(), MAX_PLACES)?;
        at_most("continents", continents.len(), MAX_PLACES)?;
        at_most("asns", asns.len(), MAX_PLACES)?;
        if let Some(i) = asns.iter().position(|a| *a == 0) {
            return Err(Error::invalid(format!("asns[{i}]"), "AS 0 is reserved: no client is in it"));
        }
        countries.sort_unstable();
        countries.dedup();
        continents.sort_unstable();
        continents.dedup();
        asns.sort_unstable();
        asns.dedup();
        Ok(Places { countries, continents, asns })
    }

    /// Claims no place.
    pub fn is_empty(&self) -> bool {
        self.countries.is_empty() && self.continents.is_empty() && self.asns.is_empty()
    }

    /// How specifically these places claim `place` (`None`: not at all).
    pub fn claim(&self, place: &Place) -> Option<Claim> {
        let has = |found: bool, claim| found.then_some(claim);
        place
            .asn
            .and_then(|a| has(self.asns.contains(&a), Claim::Asn))
            .or_else(|| place.country.and_then(|c| has(self.countries.contains(&c), Claim::Country)))
            .or_else(|| place.continent.and_then(|c| has(self.continents.contains(&c), Claim::Continent)))
    }
}

/// Places as an operator reads them: `AS3320, DE, continent EU` (a continent's code is said to
/// be one: `AS` is Asia, and American Samoa's country code); empty for none.
pub fn describe(p: &Places) -> String {
    let asns = p.asns.iter().map(|a| format!("AS{a}"));
    let countries = p.countries.iter().map(Country::to_string);
    let continents = p.continents.iter().map(|c| format!("continent {c}"));
    asns.chain(countries).chain(continents).collect::<Vec<_>>().join(", ")
}

/// The clients a line or a region claims, as a list or a page shows them: its networks, then
/// its places; empty for none.
pub fn describe_clients(networks: &[IpNet], places: &Places) -> String {
    let mut all: Vec<String> = networks.iter().map(ToString::to_string).collect();
    let places = describe(places);
    if !places.is_empty() {
        all.push(places);
    }
    all.join(", ")
}

/// The claimant of `place`: the one with the most specific claim, the first of those in
/// `claimants`' order.
pub fn claimant<'p, T>(claimants: impl IntoIterator<Item = (T, &'p Places)>, place: &Place) -> Option<T> {
    let mut best: Option<(Claim, T)> = None;
    for (who, places) in claimants {
        if let Some(claim) = places.claim(place)
            && best.as_ref().is_none_or(|(b, _)| claim < *b)
        {
            best = Some((claim, who));
        }
    }
    best.map(|(_, who)| who)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(countries: &[&str], continents: &[Continent], asns: &[u32]) -> Places {
        Places::new(
            countries.iter().map(|c| c.parse().unwrap()).collect(),
            continents.to_vec(),
            asns.to_vec(),
        )
        .unwrap()
    }

    fn place(country: &str, continent: Continent, asn: u32) -> Place {
        Place { country: Some(country.parse().unwrap()), continent: Some(continent), asn: Some(asn) }
    }

    #[test]
    fn countries_read_either_case_and_refuse_anything_else() {
        assert_eq!("sg".parse::<Country>().unwrap().as_str(), "SG");
        assert_eq!(serde_json::from_str::<Country>("\"De\"").unwrap().to_string(), "DE");
        for bad in ["", "S", "SGP", "1A", "é"] {
            assert!(bad.parse::<Country>().is_err(), "{bad}");
        }
        let e = serde_json::from_str::<Country>("\"Singapore\"").unwrap_err().to_string();
        assert!(e.contains("ISO 3166-1 alpha-2"), "{e}");
        assert_eq!(Continent::from_code("eu"), Some(Continent::EU));
        assert_eq!(serde_json::from_str::<Continent>("\"eu\"").unwrap(), Continent::EU);
        let e = serde_json::from_str::<Continent>("\"Europe\"").unwrap_err().to_string();
        assert!(e.contains("one of AF, AN, AS, EU"), "{e}");
        assert_eq!(Continent::from_code("XX"), None);
    }

    #[test]
    fn places_are_bounded_sorted_and_refuse_as_zero() {
        let p = places(&["SG", "de", "DE"], &[Continent::EU, Continent::AS, Continent::EU], &[64501, 13335]);
        assert_eq!(p.countries.iter().map(Country::as_str).collect::<Vec<_>>(), ["DE", "SG"]);
        assert_eq!(p.continents, [Continent::AS, Continent::EU]);
        assert_eq!(p.asns, [13335, 64501]);
        assert_eq!(describe(&p), "AS13335, AS64501, DE, SG, continent AS, continent EU");
        let nets = ["192.0.2.0/24".parse().unwrap()];
        let countries = Places { countries: p.countries.clone(), ..Places::default() };
        assert_eq!(describe_clients(&nets, &countries), "192.0.2.0/24, DE, SG");
        assert_eq!(describe_clients(&[], &Places::default()), "");
        let e = Places::new(Vec::new(), Vec::new(), vec![1, 0]).unwrap_err().to_string();
        assert_eq!(e, "asns[1]: AS 0 is reserved: no client is in it");
        let e = Places::new(Vec::new(), Vec::new(), (1..=1025).collect()).unwrap_err().to_string();
        assert_eq!(e, "asns: at most 1024 items, got 1025");
    }

    #[test]
    fn the_most_specific_claim_wins_then_the_first_claimant() {
        let by_continent = places(&[], &[Continent::EU], &[]);
        let by_country = places(&["DE"], &[], &[]);
        let by_asn = places(&[], &[], &[3320]);
        let also_country = places(&["DE", "FR"], &[], &[]);
        let berlin = place("DE", Continent::EU, 3320);
        let claimants = [("continent", &by_continent), ("country", &by_country), ("asn", &by_asn)];
        assert_eq!(claimant(claimants, &berlin), Some("asn"));
        let claimants = [("continent", &by_continent), ("country", &by_country), ("also", &also_country)];
        assert_eq!(claimant(claimants, &berlin), Some("country"), "the first of equal claims");
        let paris = place("FR", Continent::EU, 5410);
        assert_eq!(
            claimant([("continent", &by_continent), ("country", &by_country)], &paris),
            Some("continent")
        );
        assert_eq!(claimant([("country", &by_country)], &paris), None);
        assert_eq!(claimant([("continent", &by_continent)], &Place::default()), None, "an unknown place");
    }
}
