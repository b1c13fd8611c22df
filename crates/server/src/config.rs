//! `vantage serve` settings as a value: parsed from a TOML file, `VANTAGE_*` environment
//! variables and flags, in rising precedence. Nothing here reads the environment itself: the
//! caller hands in the variables, so tests can too.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use vantage_core::net::IpNet;
use vantage_store::{Database, PostgresUrl};

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Every setting of `vantage serve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Data directory: the SQLite database (unless `database` names another), CA, admin token.
    pub data_dir: PathBuf,
    /// A PostgreSQL database (`postgres://user:password@host:port/name`) instead of SQLite in
    /// the data directory. Read and checked here, so a bad URL stops the start with a message
    /// naming this key; it shows without its password.
    #[serde(deserialize_with = "database", serialize_with = "database_url")]
    pub database: Option<PostgresUrl>,
    /// Admin API and UI, and `/metrics`.
    pub api_listen: SocketAddr,
    /// The public face: `/go`, `/steer` and `/healthz`, for players and mirror users. When
    /// set, the admin listener no longer serves `/go` and `/steer`, and this one serves
    /// nothing else. Unset: the admin listener serves both faces (one machine, a lab).
    pub public_listen: Option<SocketAddr>,
    /// Origins whose players may read `/steer` from a page (CORS): `*` for any (the
    /// default), or a list of origins such as `https://player.example.com`.
    #[serde(deserialize_with = "origins")]
    pub steering_origins: Vec<String>,
    /// Serve `/metrics` without a token. Off: a scrape needs an admin token (a read-only one
    /// is enough), sent as Prometheus' `authorization` sends it.
    pub metrics_public: bool,
    /// Agent channel (mutual TLS).
    pub agent_listen: SocketAddr,
    /// Built-in DNS server (UDP and TCP).
    pub dns_listen: SocketAddr,
    /// The agent channel's URL as probers and agents reach it (start commands show it).
    /// Default: `https://<host name>:<agent port>`.
    pub agent_url: Option<String>,
    /// Log format.
    pub log_format: LogFormat,
    /// Log filter (`info`, `vantage_server=debug,info`).
    pub log_level: String,
    /// Accept loopback scheduling addresses, and let probers and the control plane fetch
    /// from loopback (labs, demos and tests on one machine).
    pub allow_loopback_addresses: bool,
    /// Networks probers and the control plane may fetch from although the fetch policy
    /// refuses their class (link-local, multicast…): for labs and private fleets. In TOML a
    /// list; in `VANTAGE_ALLOW_NETWORKS` and `--allow-networks` comma-separated.
    #[serde(deserialize_with = "allowed_networks")]
    pub allow_networks: Vec<IpNet>,
    /// Seconds between periodic evaluations of a cluster.
    pub evaluation_interval_s: u64,
    /// Days of result history kept before the daily roll-up.
    pub history_retention_days: u64,
    /// An edge certificate that expires within this many days alerts.
    pub certificate_warning_days: u64,
    /// Serve the admin API and UI over TLS with this certificate chain (PEM), with
    /// `api_tls_key`.
    pub api_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `api_tls_cert`.
    pub api_tls_key: Option<PathBuf>,
    /// Serve the admin API and UI over TLS with a certificate the internal CA issues at each
    /// start (for `localhost`, the loopback addresses, this host's name and the listen
    /// address); clients trust `<data_dir>/ca/ca.pem`.
    pub api_tls_internal: bool,
    /// Networks of TCP load balancers in front of the admin API and the agent channel: a
    /// connection from one of them stands for many clients, so it counts against the
    /// listener's total but not against the per-source limit. In TOML a list
    /// (`["10.0.0.5/32"]`); in `VANTAGE_LOAD_BALANCERS` and `--load-balancers`
    /// comma-separated. At most a /16 (IPv4) or a /48 (IPv6) each: a wider network would lift
    /// the limit for whole networks of clients. (Not the doors' `trusted_proxies`, whose
    /// `X-Forwarded-For` they read.)
    #[serde(deserialize_with = "networks")]
    pub load_balancers: Vec<IpNet>,
    /// MaxMind DB files (GeoLite2 / GeoIP2 Country, City or ASN; DB-IP lite) that place
    /// clients for lines and regions claiming countries, continents or autonomous systems;
    /// read again whenever one changes. In TOML a list; in `VANTAGE_GEO_DATABASES` and
    /// `--geo-databases` comma-separated.
    #[serde(deserialize_with = "paths")]
    pub geo_databases: Vec<PathBuf>,
}

/// A list of strings, as a TOML list or as one comma-separated string (what the environment
/// and flags can give).
fn list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Items {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Items::deserialize(d)? {
        Items::List(l) => l,
        Items::Text(t) => t.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect(),
    })
}

/// A list of files.
fn paths<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
    Ok(list(d)?.into_iter().map(PathBuf::from).collect())
}

/// A list of networks of `key`, as a TOML list or as one comma-separated string, each
/// passed through `check`.
fn network_list<'de, D: serde::Deserializer<'de>>(
    d: D,
    key: &str,
    check: impl Fn(IpNet) -> Result<IpNet, String>,
) -> Result<Vec<IpNet>, D::Error> {
    let items = list(d)?;
    let refuse = |s: &str, why: String| serde::de::Error::custom(format!("{key}: {s}: {why}"));
    items
        .iter()
        .map(|s| s.parse::<IpNet>().map_err(|e| e.to_string()).and_then(&check).map_err(|why| refuse(s, why)))
        .collect()
}

/// `load_balancers`: each at most a /16 or a /48.
fn networks<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
    network_list(d, "load_balancers", |net| {
        let widest = if net.addr().is_ipv4() { 16 } else { 48 };
        if net.prefix() < widest {
            return Err(format!("wider than a /{widest}; list the balancers' own addresses"));
        }
        Ok(net)
    })
}

/// `steering_origins`: `*`, or origins (`scheme://host[:port]`, no path), as a TOML list or
/// comma-separated.
fn origins<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let items = list(d)?;
    for o in &items {
        let rest = o.strip_prefix("https://").or_else(|| o.strip_prefix("http://"));
        let ok = o == "*" || rest.is_some_and(|r| !r.is_empty() && !r.contains(['/', '?', '#', ' ']));
        if !ok {
            return Err(serde::de::Error::custom(format!(
                "steering_origins: {o:?} is not an origin like https://player.example.com (or *)"
            )));
        }
    }
    Ok(items)
}

/// `allow_networks`: any networks.
fn allowed_networks<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
    network_list(d, "allow_networks", Ok)
}

/// The `database` URL, parsed; a refusal names the key and never quotes the URL.
fn database<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<PostgresUrl>, D::Error> {
    let url = String::deserialize(d)?;
    url.parse().map(Some).map_err(|e| serde::de::Error::custom(format!("database: {e}")))
}

fn database_url<S: serde::Serializer>(url: &Option<PostgresUrl>, s: S) -> Result<S::Ok, S::Error> {
    url.as_ref().map(PostgresUrl::as_str).serialize(s)
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            data_dir: PathBuf::from("./vantage-data"),
            database: None,
            // Only this host until the operator says otherwise.
            api_listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_listen: None,
            metrics_public: false,
            steering_origins: vec!["*".to_owned()],
            agent_listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            dns_listen: SocketAddr::from(([0, 0, 0, 0], 8053)),
            agent_url: None,
            log_format: LogFormat::Text,
            log_level: "info".into(),
            allow_loopback_addresses: false,
            allow_networks: Vec::new(),
            evaluation_interval_s: 10,
            history_retention_days: 14,
            certificate_warning_days: 14,
            api_tls_cert: None,
            api_tls_key: None,
            api_tls_internal: false,
            load_balancers: Vec::new(),
            geo_databases: Vec::new(),
        }
    }
}

/// The keys a configuration may set (and the environment variables `VANTAGE_<KEY>`).
pub const KEYS: [&str; 21] = [
    "data_dir",
    "database",
    "api_listen",
    "public_listen",
    "metrics_public",
    "steering_origins",
    "agent_listen",
    "dns_listen",
    "agent_url",
    "log_format",
    "log_level",
    "allow_loopback_addresses",
    "allow_networks",
    "evaluation_interval_s",
    "history_retention_days",
    "certificate_warning_days",
    "api_tls_cert",
    "api_tls_key",
    "api_tls_internal",
    "load_balancers",
    "geo_databases",
];

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A value is invalid or a key unknown; the message names it.
    #[error("{origin}: {message}")]
    Invalid {
        /// Where it came from (`vantage.toml`, `environment`, `flags`).
        origin: String,
        /// What is wrong.
        message: String,
    },
}

impl ServeConfig {
    /// Merges `file` (TOML text, with its name for messages), then the `VANTAGE_*` variables
    /// among `env`, then `flags` (key → value as typed on the command line).
    pub fn load(
        file: Option<(&str, &str)>,
        env: &BTreeMap<String, String>,
        flags: &BTreeMap<&str, String>,
    ) -> Result<ServeConfig, ConfigError> {
        let mut table = toml::Table::new();
        if let Some((name, text)) = file {
            let parsed: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError::Invalid {
                origin: name.to_owned(),
                message: e.to_string(),
            })?;
            // Validate the file alone first so an unknown key is reported against the file.
            let _: ServeConfig =
                toml::Value::Table(parsed.clone()).try_into().map_err(|e: toml::de::Error| {
                    ConfigError::Invalid { origin: name.to_owned(), message: e.to_string() }
                })?;
            table = parsed;
        }
        for key in KEYS {
            if let Some(v) = env.get(&format!("VANTAGE_{}", key.to_ascii_uppercase())) {
                table.insert(key.to_owned(), scalar(v));
            }
        }
        for (key, v) in flags {
            table.insert((*key).to_owned(), scalar(v));
        }
        toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| ConfigError::Invalid {
            origin: "environment and flags".into(),
            message: e.to_string(),
        })
    }

    /// The database the store opens: `database`, else SQLite in the data directory.
    pub fn store(&self) -> Database {
        match &self.database {
            Some(url) => Database::Postgres(url.clone()),
            None => Database::Sqlite(self.data_dir.join("vantage.db")),
        }
    }

    /// Whether the admin API and UI are served over TLS.
    pub fn api_tls(&self) -> bool {
        self.api_tls_internal || self.api_tls_cert.is_some()
    }

    /// Where probers and this server may fetch from: the loopback and networks allowed here,
    /// never the server's own `listeners`.
    pub fn fetch_policy(&self, listeners: Vec<SocketAddr>) -> vantage_core::fetch::FetchPolicy {
        vantage_core::fetch::FetchPolicy {
            allow_loopback: self.allow_loopback_addresses,
            allow_networks: self.allow_networks.clone(),
            own_listeners: listeners,
        }
    }

    /// The agent channel URL given to probers and agents.
    pub fn agent_url(&self, host: &str) -> String {
        self.agent_url.clone().unwrap_or_else(|| format!("https://{host}:{}", self.agent_listen.port()))
    }
}

/// A value typed in the environment or on the command line: a TOML scalar when it parses as
/// one (`true`, `10`), otherwise a string (`127.0.0.1:8080`, `./data`).
fn scalar(v: &str) -> toml::Value {
    match format!("x = {v}").parse::<toml::Table>() {
        Ok(mut t) => match t.remove("x") {
            Some(value @ (toml::Value::Boolean(_) | toml::Value::Integer(_) | toml::Value::Float(_))) => {
                value
            }
            _ => toml::Value::String(v.to_owned()),
        },
        Err(_) => toml::Value::String(v.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example configuration shows every key (set or commented out), and the README's
    /// list names every one: a new setting cannot go undocumented.
    #[test]
    fn the_example_and_the_readme_name_every_key() {
        let example = include_str!("../../../deploy/vantage.toml");
        let readme = include_str!("../../../README.md");
        let keys = serde_json::to_value(ServeConfig::default()).unwrap();
        let keys = keys.as_object().unwrap();
        assert!(keys.len() > 15, "{keys:?}");
        for key in keys.keys() {
            let shown = example.lines().any(|l| l.trim_start_matches("# ").starts_with(&format!("{key} = ")));
            assert!(shown, "deploy/vantage.toml does not show {key}");
            assert!(readme.contains(&format!("`{key}`")), "README.md does not list {key}");
        }
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_admin_api_listens_on_this_host_only_by_default() {
        let c = ServeConfig::load(None, &BTreeMap::new(), &BTreeMap::new()).unwrap();
        assert_eq!(c.api_listen, "127.0.0.1:8080".parse().unwrap());
    }

    #[test]
    fn file_then_environment_then_flags() {
        let file =
            "data_dir = \"/srv/vantage\"\napi_listen = \"127.0.0.1:9000\"\nevaluation_interval_s = 5\n";
        let e = env(&[
            ("VANTAGE_API_LISTEN", "127.0.0.1:9001"),
            ("VANTAGE_ALLOW_LOOPBACK_ADDRESSES", "true"),
            ("VANTAGE_TOKEN", "x"),
        ]);
        let mut flags = BTreeMap::new();
        flags.insert("data_dir", "/tmp/flag".to_owned());
        let c = ServeConfig::load(Some(("vantage.toml", file)), &e, &flags).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/tmp/flag"));
        assert_eq!(c.api_listen, "127.0.0.1:9001".parse().unwrap());
        assert!(c.allow_loopback_addresses);
        assert_eq!(c.evaluation_interval_s, 5);
        assert_eq!(c.dns_listen, ServeConfig::default().dns_listen);
    }

    /// The file `deploy/` ships reads as it is, with every key it sets.
    #[test]
    fn the_shipped_configuration_file_reads() {
        let file = include_str!("../../../deploy/vantage.toml");
        let c = ServeConfig::load(Some(("deploy/vantage.toml", file)), &BTreeMap::new(), &BTreeMap::new())
            .unwrap();
        assert_eq!(c.certificate_warning_days, 14);
        assert_eq!(c.history_retention_days, 14);
    }

    #[test]
    fn load_balancers_read_as_a_list_or_comma_separated_and_no_wider_than_a_16() {
        let file = "load_balancers = [\"10.0.0.5/32\", \"2001:db8::/64\"]\n";
        let c = ServeConfig::load(Some(("vantage.toml", file)), &BTreeMap::new(), &BTreeMap::new()).unwrap();
        assert_eq!(c.load_balancers, ["10.0.0.5/32".parse().unwrap(), "2001:db8::/64".parse().unwrap()]);
        let e = env(&[("VANTAGE_LOAD_BALANCERS", "10.0.0.5/32, 10.0.1.0/24")]);
        let c = ServeConfig::load(None, &e, &BTreeMap::new()).unwrap();
        assert_eq!(c.load_balancers.len(), 2);
        for (bad, says) in
            [("10.0.0.0/33", "10.0.0.0/33"), ("0.0.0.0/0", "wider than a /16"), ("::/0", "/48")]
        {
            let e = ServeConfig::load(None, &env(&[("VANTAGE_LOAD_BALANCERS", bad)]), &BTreeMap::new())
                .unwrap_err()
                .to_string();
            assert!(e.contains("load_balancers") && e.contains(says), "{e}");
        }
    }

    #[test]
    fn allowed_networks_and_the_public_face_read_from_every_source() {
        let file = "allow_networks = [\"169.254.10.0/24\"]\npublic_listen = \"0.0.0.0:8081\"\n";
        let c = ServeConfig::load(Some(("vantage.toml", file)), &BTreeMap::new(), &BTreeMap::new()).unwrap();
        assert_eq!(c.allow_networks, ["169.254.10.0/24".parse().unwrap()]);
        assert_eq!(c.public_listen, Some("0.0.0.0:8081".parse().unwrap()));
        assert!(!c.metrics_public);
        let e = env(&[("VANTAGE_ALLOW_NETWORKS", "0.0.0.0/0, ::/0"), ("VANTAGE_METRICS_PUBLIC", "true")]);
        let c = ServeConfig::load(None, &e, &BTreeMap::new()).unwrap();
        assert_eq!(c.allow_networks.len(), 2);
        assert!(c.metrics_public);
        let listeners = vec!["127.0.0.1:8080".parse().unwrap()];
        assert_eq!(c.fetch_policy(listeners.clone()).own_listeners, listeners);
        let e = ServeConfig::load(None, &env(&[("VANTAGE_ALLOW_NETWORKS", "nonsense")]), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("allow_networks: nonsense"), "{e}");
        assert_eq!(c.steering_origins, ["*"]);
        let e = env(&[("VANTAGE_STEERING_ORIGINS", "https://a.example, http://b.example:8080")]);
        let c = ServeConfig::load(None, &e, &BTreeMap::new()).unwrap();
        assert_eq!(c.steering_origins, ["https://a.example", "http://b.example:8080"]);
        let e = ServeConfig::load(
            None,
            &env(&[("VANTAGE_STEERING_ORIGINS", "https://a.example/x")]),
            &BTreeMap::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("steering_origins"), "{e}");
    }

    #[test]
    fn the_database_is_sqlite_in_the_data_directory_unless_a_postgres_url_is_given() {
        let c = ServeConfig::load(None, &BTreeMap::new(), &BTreeMap::new()).unwrap();
        assert_eq!(c.store(), Database::Sqlite(PathBuf::from("./vantage-data/vantage.db")));
        let file = "database = \"postgres://vantage:pw@db1:5432/vantage\"\n";
        let c = ServeConfig::load(Some(("vantage.toml", file)), &BTreeMap::new(), &BTreeMap::new()).unwrap();
        assert_eq!(c.store().to_string(), "PostgreSQL at postgres://db1:5432/vantage");
        let e = env(&[("VANTAGE_DATABASE", "postgres://vantage:pw@db2/vantage")]);
        let mut flags = BTreeMap::new();
        flags.insert("database", "postgres://vantage:pw@db3/vantage".to_owned());
        assert_eq!(
            ServeConfig::load(None, &e, &BTreeMap::new()).unwrap().store().to_string(),
            "PostgreSQL at postgres://db2:5432/vantage"
        );
        assert_eq!(
            ServeConfig::load(None, &e, &flags).unwrap().store().to_string(),
            "PostgreSQL at postgres://db3:5432/vantage"
        );
    }

    #[test]
    fn a_bad_database_url_names_the_key_and_not_the_password() {
        for bad in ["mysql://u:s3cret@db/x", "postgres://u:s3cret@db:port/x", "s3cret"] {
            let e = ServeConfig::load(None, &env(&[("VANTAGE_DATABASE", bad)]), &BTreeMap::new())
                .unwrap_err()
                .to_string();
            assert!(e.contains("database") && !e.contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn unknown_key_is_an_error_that_names_it() {
        let e = ServeConfig::load(
            Some(("vantage.toml", "api_listn = \"1.2.3.4:5\"\n")),
            &BTreeMap::new(),
            &BTreeMap::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("vantage.toml:") && e.contains("api_listn"), "{e}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let e = ServeConfig::load(None, &env(&[("VANTAGE_API_LISTEN", "nowhere")]), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("api_listen"), "{e}");
    }
}
