//! Lines and regions by place (SPEC §10a): a `vantage serve` given a country and an ASN
//! database (MaxMind DB files made here with mmdb-writer) answers each ECS client by its
//! network first, then its AS, country and continent, with the scope the databases allow; it
//! reads a replaced database within seconds and keeps the last good one when a file breaks;
//! `ctl client` says what `dig` gets.

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use vantage_testkit::{GeoEntry, dig, write_mmdb};

use crate::harness::ServerProcess;

/// The country database: three countries on three continents.
fn countries(path: &Path, tokyo_is: &str) {
    write_mmdb(
        path,
        "GeoLite2-Country",
        &[
            GeoEntry::Country { network: "198.51.100.0/24", country: "DE", continent: "EU" },
            GeoEntry::Country { network: "203.0.113.0/24", country: "FR", continent: "EU" },
            GeoEntry::Country { network: "100.64.0.0/24", country: tokyo_is, continent: "AS" },
            GeoEntry::Country { network: "2001:db8:100::/48", country: "DE", continent: "EU" },
        ],
    );
}

/// Replaces `path` by a rename, as geoipupdate does.
fn replace(path: &Path, write: impl FnOnce(&Path)) {
    let next = path.with_extension("new");
    write(&next);
    std::fs::rename(&next, path).unwrap();
}

/// `dig` as an ECS client subnet (`198.51.100.7` for a /32, or `a/len`): the answer's
/// addresses and the scope the server gave.
async fn as_client(dns: std::net::SocketAddr, client: &str) -> (Vec<String>, String) {
    let subnet =
        if client.contains('/') { format!("+subnet={client}") } else { format!("+subnet={client}/32") };
    let out = tokio::task::spawn_blocking(move || {
        dig(dns, &["geo.test.example", "A", &subnet, "+noall", "+answer", "+comments"]).unwrap()
    })
    .await
    .unwrap();
    let mut records: Vec<String> = out
        .lines()
        .filter(|l| l.contains("\tIN\tA\t"))
        .filter_map(|l| l.split('\t').next_back())
        .map(str::to_owned)
        .collect();
    records.sort();
    let scope = out
        .lines()
        .find_map(|l| l.split("CLIENT-SUBNET: ").nth(1))
        .map(|s| s.trim().rsplit('/').next().unwrap_or_default().to_owned())
        .unwrap_or_default();
    (records, scope)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_answer_by_network_then_as_country_and_continent_and_follow_the_database() {
    let temp = tempfile::tempdir().unwrap();
    let (country_db, asn_db) = (temp.path().join("country.mmdb"), temp.path().join("asn.mmdb"));
    countries(&country_db, "JP");
    write_mmdb(&asn_db, "GeoLite2-ASN", &[GeoEntry::Asn { network: "198.51.100.0/26", asn: 3320 }]);
    let databases = format!("{},{}", country_db.display(), asn_db.display());
    let s = ServerProcess::start_in(
        &temp.path().join("server"),
        &["--allow-loopback-addresses", "--geo-databases", &databases],
    )
    .await;
    let cluster = s.create("/v1/clusters", json!({"name": "geo", "domain": "geo.test.example"})).await["id"]
        .as_i64()
        .unwrap();
    // One group and one node per line, each answering its own address.
    let claims = [
        ("default", json!({})),
        ("office", json!({"client_networks": ["198.51.100.192/26"]})),
        ("isp", json!({"asns": [3320]})),
        ("germany", json!({"countries": ["de"]})),
        ("europe", json!({"continents": ["EU"]})),
    ];
    let mut groups = Vec::new();
    for (i, (name, _)) in claims.iter().enumerate() {
        let group = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": name})).await["id"]
            .as_i64()
            .unwrap();
        let node =
            s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": name})).await["id"]
                .as_i64()
                .unwrap();
        let ip = format!("192.0.2.{}", i + 1);
        s.call(Method::PUT, &format!("/v1/nodes/{node}/addresses"), Some(json!([{"ip": ip}]))).await;
        groups.push(group);
    }
    let mut lines = Vec::new();
    for ((name, clients), group) in claims.into_iter().zip(&groups) {
        let mut line = json!({"name": name, "group": group});
        line.as_object_mut().unwrap().extend(clients.as_object().unwrap().clone());
        lines.push(s.create(&format!("/v1/clusters/{cluster}/lines"), line).await);
    }
    assert_eq!(lines[3]["countries"], json!(["DE"]), "countries read either case, kept upper case");
    s.wait_for(&format!("/v1/clusters/{cluster}/dns"), Duration::from_secs(20), |v| {
        v["all"].as_array().is_some_and(|a| a.len() == 5)
    })
    .await;

    let dns = s.dns();
    let expect = [
        // A network before every place, though Germany and AS 3320 claim the address too.
        ("198.51.100.200", "192.0.2.2", "26"),
        // The AS before the country: the ASN database holds it in a /26.
        ("198.51.100.7", "192.0.2.3", "26"),
        // The country before the continent.
        ("198.51.100.77", "192.0.2.4", "26"),
        ("203.0.113.9", "192.0.2.5", "24"),
        // In Asia, which no line claims; and an address no database knows.
        ("100.64.0.9", "192.0.2.1", "24"),
    ];
    for (client, record, scope) in expect {
        let (records, got) = as_client(dns, client).await;
        assert_eq!((records, got.as_str()), (vec![record.to_owned()], scope), "{client}");
    }
    let (records, _) = as_client(dns, "192.0.2.200").await;
    assert_eq!(records, ["192.0.2.1"], "unknown to the databases: the default line");
    // IPv6 clients; an IPv4 one sent as IPv4-mapped IPv6, its scope in IPv6 bits.
    assert_eq!(as_client(dns, "2001:db8:100:5::/64").await, (vec!["192.0.2.4".to_owned()], "48".to_owned()));
    assert_eq!(
        as_client(dns, "::ffff:203.0.113.9/128").await,
        (vec!["192.0.2.5".to_owned()], "120".to_owned())
    );
    // A resolver sends a /24: the address cut to it is what is placed (198.51.100.0, in AS 3320).
    assert_eq!(as_client(dns, "198.51.100.77/24").await.0, ["192.0.2.3"]);
    let out = s.ctl(&["client", "198.51.100.77", "--prefix", "24", "--json"]).await;
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&seen["ip"], &seen["answers"][0]["line"]), (&json!("198.51.100.0"), &json!("isp")), "{seen}");
    let (status, v) = s.call(Method::GET, "/v1/clients/198.51.100.77?prefix=33", None).await;
    assert_eq!((status, &v["error"]["field"]), (400, &json!("prefix")), "{v}");

    // `ctl client` says what dig got, and where the client is.
    let out = s.ctl(&["client", "198.51.100.7", "--json"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        seen["place"],
        json!({"country": "DE", "continent": "EU", "asn": 3320, "prefix": 26}),
        "{seen}"
    );
    assert_eq!(
        seen["answers"],
        json!([{"cluster": "geo", "line": "isp", "records": ["192.0.2.3"], "scope": 26}])
    );
    let out = s.ctl(&["client", "100.64.0.9"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("country JP, continent AS") && text.contains("default"), "{text}");

    // A region claiming Japan: the client's region, for the doors.
    s.create("/v1/regions", json!({"code": "ap-jp", "name": "Japan", "countries": ["JP"]})).await;
    let start = Instant::now();
    loop {
        let (_, v) = s.call(Method::GET, "/v1/clients/100.64.0.9", None).await;
        if v["region"] == "ap-jp" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its clients' DNS queries are its demand (SPEC §10a): three address answers chosen by a
    // Tokyo subnet count for ap-jp, placed when the server hands the counts over (every 5 s).
    // (The earlier one may count too, if it was placed after the region came.)
    for _ in 0..3 {
        as_client(dns, "100.64.0.9").await;
    }
    let start = Instant::now();
    loop {
        let metrics = s.metrics().await;
        let counted = metrics
            .lines()
            .find_map(|l| l.strip_prefix(r#"vantage_demand_requests_total{region="ap-jp",source="dns"} "#))
            .and_then(|n| n.parse::<u64>().ok());
        if counted.is_some_and(|n| (3..=4).contains(&n)) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "{counted:?} in:\n{metrics}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A new country database: Tokyo's network now in Germany, answered within seconds.
    replace(&country_db, |p| countries(p, "DE"));
    let start = Instant::now();
    while as_client(dns, "100.64.0.9").await.0 != ["192.0.2.4"] {
        assert!(start.elapsed() < Duration::from_secs(10), "the new database was not read");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A broken one: refused, counted, and the last good one stays in use.
    replace(&country_db, |p| std::fs::write(p, b"not a database").unwrap());
    let start = Instant::now();
    while !s.metrics().await.contains("vantage_geo_database_reload_failures_total 1") {
        assert!(start.elapsed() < Duration::from_secs(10), "the broken database was not refused");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(as_client(dns, "100.64.0.9").await.0, ["192.0.2.4"]);
    assert!(s.metrics().await.contains("vantage_geo_database_build_timestamp_seconds{file="));

    // Bad places are refused with the field named, and change nothing.
    let group = groups[0];
    for (body, field) in [
        (json!({"name": "x", "group": group, "countries": ["Germany"]}), "countries"),
        (json!({"name": "x", "group": group, "continents": ["Europe"]}), "continents"),
        (json!({"name": "x", "group": group, "asns": [0]}), "asns[0]"),
    ] {
        let (status, v) = s.call(Method::POST, &format!("/v1/clusters/{cluster}/lines"), Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
        assert!(v["error"]["field"].as_str().unwrap_or_default().starts_with(field), "{v}");
    }
    let (_, now) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/lines"), None).await;
    assert_eq!(now["items"].as_array().map(Vec::len), Some(5));
}

#[tokio::test]
async fn a_geo_database_that_does_not_read_stops_the_start_naming_it() {
    let temp = tempfile::tempdir().unwrap();
    let bad = temp.path().join("country.mmdb");
    std::fs::write(&bad, b"not a database").unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["serve", "--data-dir"])
        .arg(temp.path().join("data"))
        .args(["--api-listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0", "--dns-listen", "127.0.0.1:0"])
        .arg("--geo-databases")
        .arg(&bad)
        .env_remove("VANTAGE_CONFIG")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("geo_databases") && err.contains("country.mmdb: not a MaxMind DB file"), "{err}");
}
