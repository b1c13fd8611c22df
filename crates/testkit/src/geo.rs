//! Geo databases made at test time: MaxMind DB files written by PyPI's `mmdb-writer` (in the
//! virtual environment `.ci/run` makes, `$VANTAGE_VENV`), as an operator's GeoLite2 Country
//! and ASN files are laid out.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One network of a test database and what it holds.
#[derive(Debug, Clone, Copy)]
pub enum GeoEntry<'a> {
    /// A Country record: `country.iso_code` and `continent.code`.
    Country { network: &'a str, country: &'a str, continent: &'a str },
    /// An ASN record: `autonomous_system_number`.
    Asn { network: &'a str, asn: u32 },
}

/// The Python that runs `mmdb-writer`: `$VANTAGE_VENV/bin/python3` (what `.ci/run` installs
/// it in), else the `python3` on the path.
fn python() -> PathBuf {
    let venv = std::env::var_os("VANTAGE_VENV").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/vantage-venv")
    });
    let python = venv.join("bin/python3");
    if python.exists() { python } else { PathBuf::from("python3") }
}

/// Writes a database of `database_type` (`GeoLite2-Country`, `GeoLite2-ASN`) holding
/// `entries` to `path` (IPv6 with the IPv4 space mapped, as MaxMind's are).
pub fn write_mmdb(path: &Path, database_type: &str, entries: &[GeoEntry<'_>]) {
    write(path, database_type, 6, entries);
}

/// The same as an IPv4-only database (as some providers' are): IPv4 networks only.
pub fn write_mmdb_ipv4(path: &Path, database_type: &str, entries: &[GeoEntry<'_>]) {
    write(path, database_type, 4, entries);
}

fn write(path: &Path, database_type: &str, ip_version: u8, entries: &[GeoEntry<'_>]) {
    let mut records = String::new();
    for e in entries {
        // Networks and codes are the test's own constants: quoted as Python strings.
        let _ = match e {
            GeoEntry::Country { network, country, continent } => writeln!(
                records,
                "    ({network:?}, {{'country': {{'iso_code': {country:?}}}, 'continent': {{'code': {continent:?}}}}}),"
            ),
            GeoEntry::Asn { network, asn } => {
                writeln!(records, "    ({network:?}, {{'autonomous_system_number': MmdbU32({asn})}}),")
            }
        };
    }
    let script = format!(
        "import sys\n\
         from mmdb_writer import MMDBWriter, MmdbU32\n\
         from netaddr import IPSet\n\
         w = MMDBWriter(ip_version={ip_version}, database_type=sys.argv[2], ipv4_compatible={ip_version} == 6)\n\
         for net, rec in [\n{records}]:\n    w.insert_network(IPSet([net]), rec)\n\
         w.to_db_file(sys.argv[1])\n"
    );
    let out = Command::new(python())
        .arg("-c")
        .arg(&script)
        .arg(path)
        .arg(database_type)
        .output()
        .expect("python3 runs (mmdb-writer: pip install mmdb-writer, as .ci/run does)");
    assert!(out.status.success(), "mmdb-writer failed: {}\n{script}", String::from_utf8_lossy(&out.stderr));
}
