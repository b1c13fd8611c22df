//! The operator's geo databases (MaxMind DB format: GeoLite2 / GeoIP2 Country, City or ASN,
//! DB-IP lite): where a client address is, and how far that placing reaches (the network the
//! database holds it in: the ECS scope of an answer chosen by it).
//!
//! The bytes come in as values (the server reads the files and watches them); several files
//! are read as one — a country database and an ASN database together, the first file that
//! names a part of a place giving it.

use std::net::IpAddr;

use maxminddb::Reader;
use serde::Deserialize;
use vantage_core::geo::{Continent, Country, Place};

/// One database file.
struct GeoFile {
    /// What the operator called it (its path), for errors and metrics.
    name: String,
    reader: Reader<Vec<u8>>,
}

/// What one database file is, for the operator to see it was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeoFileInfo {
    /// The file's name as given.
    pub name: String,
    /// The database's own type (`GeoLite2-Country`, `DBIP-ASN-Lite`…).
    pub database_type: String,
    /// When it was built, Unix seconds.
    pub build_epoch: u64,
}

/// The geo databases in use, read as one.
pub struct GeoDb {
    files: Vec<GeoFile>,
}

impl std::fmt::Debug for GeoDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.files.iter().map(|g| &g.name)).finish()
    }
}

/// Where the databases place an address: the place, and the prefix length within which every
/// address is placed alike (the longest of the files' networks holding it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Located {
    pub place: Place,
    pub prefix: u8,
}

/// The parts of a record Vantage reads; a City or Country record has the first three, an ASN
/// record the last. Strings are borrowed from the database.
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    country: Option<Coded<'a>>,
    /// Where the network is registered: the country when the database gives no other.
    #[serde(borrow)]
    registered_country: Option<Coded<'a>>,
    #[serde(borrow)]
    continent: Option<Coded<'a>>,
    autonomous_system_number: Option<u32>,
}

#[derive(Deserialize)]
struct Coded<'a> {
    iso_code: Option<&'a str>,
    code: Option<&'a str>,
}

impl GeoDb {
    /// Reads `files` (name, bytes) as databases; an error names the file that is not one.
    pub fn open(files: Vec<(String, Vec<u8>)>) -> Result<GeoDb, String> {
        let files = files
            .into_iter()
            .map(|(name, bytes)| match Reader::from_source(bytes) {
                Ok(reader) => Ok(GeoFile { name, reader }),
                Err(e) => Err(format!("{name}: not a MaxMind DB file: {e}")),
            })
            .collect::<Result<_, _>>()?;
        Ok(GeoDb { files })
    }

    /// Each file's name, type and build time.
    pub fn files(&self) -> Vec<GeoFileInfo> {
        (self.files.iter())
            .map(|f| GeoFileInfo {
                name: f.name.clone(),
                database_type: f.reader.metadata().database_type.clone(),
                build_epoch: f.reader.metadata().build_epoch,
            })
            .collect()
    }

    /// Where `ip` is. A record that does not decode places nothing (a database is the
    /// operator's file, not ours to trust), and narrows the scope to the address itself.
    pub fn locate(&self, ip: IpAddr) -> Located {
        let ip = ip.to_canonical();
        let full = if ip.is_ipv4() { 32 } else { 128 };
        let mut found = Located::default();
        for file in &self.files {
            // An IPv6 address in an IPv4-only database: it says nothing about any of them.
            if ip.is_ipv6() && file.reader.metadata().ip_version == 4 {
                continue;
            }
            let result = match file.reader.lookup(ip) {
                Ok(r) => r,
                // A tree that does not read: no place, and a choice for this address alone.
                Err(_) => {
                    found.prefix = full;
                    continue;
                }
            };
            // An IPv6 database without the IPv4 space names an IPv6 network for an IPv4
            // address: it says nothing about any IPv4 address.
            let prefix = match result.network() {
                Ok(n) if n.is_ipv4() == ip.is_ipv4() => n.prefix().min(full),
                Ok(_) => 0,
                Err(_) => full,
            };
            found.prefix = found.prefix.max(prefix);
            let record = match result.decode::<Record<'_>>() {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(_) => {
                    found.prefix = full;
                    continue;
                }
            };
            let place = &mut found.place;
            let country = (record.country.and_then(|c| c.iso_code))
                .or_else(|| record.registered_country.and_then(|c| c.iso_code));
            if place.country.is_none() {
                place.country = country.and_then(|c| c.parse::<Country>().ok());
            }
            if place.continent.is_none() {
                place.continent = record.continent.and_then(|c| c.code).and_then(Continent::from_code);
            }
            if place.asn.is_none() {
                place.asn = record.autonomous_system_number.filter(|a| *a != 0);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use vantage_testkit::{GeoEntry, write_mmdb, write_mmdb_ipv4};

    use super::*;

    fn file(dir: &std::path::Path, name: &str, kind: &str, entries: &[GeoEntry<'_>]) -> (String, Vec<u8>) {
        let path = dir.join(name);
        write_mmdb(&path, kind, entries);
        (name.to_owned(), std::fs::read(&path).unwrap())
    }

    #[test]
    fn a_country_and_an_asn_database_place_an_address_together() {
        let dir = tempfile::tempdir().unwrap();
        let country = file(
            dir.path(),
            "country.mmdb",
            "GeoLite2-Country",
            &[
                GeoEntry::Country { network: "198.51.100.0/24", country: "DE", continent: "EU" },
                GeoEntry::Country { network: "2001:db8::/32", country: "JP", continent: "AS" },
            ],
        );
        let asn = file(
            dir.path(),
            "asn.mmdb",
            "GeoLite2-ASN",
            &[GeoEntry::Asn { network: "198.51.100.0/25", asn: 3320 }],
        );
        let db = GeoDb::open(vec![country, asn]).unwrap();
        let berlin = db.locate("198.51.100.7".parse().unwrap());
        assert_eq!(berlin.place.country.map(|c| c.to_string()).as_deref(), Some("DE"));
        assert_eq!(berlin.place.continent, Some(Continent::EU));
        assert_eq!(berlin.place.asn, Some(3320));
        assert_eq!(berlin.prefix, 25, "the narrower of the two networks");
        let other = db.locate("198.51.100.200".parse().unwrap());
        assert_eq!((other.place.asn, other.prefix), (None, 25));
        let tokyo = db.locate("2001:db8::1".parse().unwrap());
        assert_eq!(tokyo.place.continent, Some(Continent::AS));
        assert_eq!(tokyo.prefix, 32);
        let nowhere = db.locate("203.0.113.1".parse().unwrap());
        assert_eq!(nowhere.place, Place::default());
        assert_eq!(
            nowhere.prefix, 5,
            "the empty network around it: 203.0.113.1 leaves 198.51.100.0 at its 5th bit"
        );
        let types: Vec<String> = db.files().into_iter().map(|f| f.database_type).collect();
        assert_eq!(types, ["GeoLite2-Country", "GeoLite2-ASN"]);
    }

    #[test]
    fn an_ipv4_only_database_places_ipv4_clients_and_says_nothing_of_ipv6_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asn4.mmdb");
        write_mmdb_ipv4(&path, "DBIP-ASN-Lite", &[GeoEntry::Asn { network: "198.51.100.0/26", asn: 3320 }]);
        let db = GeoDb::open(vec![("asn4.mmdb".into(), std::fs::read(&path).unwrap())]).unwrap();
        let v4 = db.locate("198.51.100.7".parse().unwrap());
        assert_eq!((v4.place.asn, v4.prefix), (Some(3320), 26));
        // An IPv4-mapped address is the IPv4 one.
        assert_eq!(db.locate("::ffff:198.51.100.7".parse().unwrap()), v4);
        let v6 = db.locate("2001:db8::1".parse().unwrap());
        assert_eq!((v6.place, v6.prefix), (Place::default(), 0), "no IPv6 network: every IPv6 client alike");
    }

    #[test]
    fn a_file_that_is_no_database_is_named() {
        let e = GeoDb::open(vec![("/etc/geo/country.mmdb".into(), b"not a database".to_vec())]).unwrap_err();
        assert!(e.starts_with("/etc/geo/country.mmdb: not a MaxMind DB file"), "{e}");
    }
}
