//! The mirror registry (SPEC §6): one YAML file per mirror, `<host>.yaml`, and the tenants in
//! `tenants.yaml` beside them. A reload reads every file and validates the whole set — each
//! record, then what spans records (unique hosts, tenants that exist, checks that exist,
//! region keys that are known) — and yields a registry only when every file passes; the
//! first failure names its file and field. Parsing lives here so the API and the files are
//! held to the same rules; reading and writing the files is the server's.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use vantage_core::Error;
use vantage_core::mirror::{Mirror, MirrorInput};

use crate::config::Config;

/// The tenant registry's file, beside the mirror files. Mirror hosts have at least two
/// labels, so no mirror's file can take this name.
pub const TENANTS_FILE: &str = "tenants.yaml";

/// Fields of a mirror record that Vantage derives from its probers. A record sent to the API
/// must not carry them; a file may (a record copied from an answer or another server), and
/// they are checked and then ignored, since this server derives its own.
pub const DERIVED: [&str; 6] =
    ["verdict", "verdict_since", "last_check", "blocked_count", "total_checked", "regions"];

/// Longest tenant name: it is a path segment of door URLs.
const MAX_TENANT: usize = 64;

/// A tenant: what a mirror may serve and what a door asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Tenant {
    /// Name: letters, digits, `.`, `-` and `_`, 1–64 characters; a segment of `/go/{tenant}/…`.
    pub name: String,
    /// What it is, for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// When none of the mirrors that may serve it is live, doors send its visitors to the
    /// degraded ones (each still not failing where the visitor is) rather than to none. Off
    /// by default: reference 004's doors keep only `live` mirrors, and a degraded mirror
    /// fails somewhere, so serving it is a choice a tenant makes for itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fallback_to_degraded: bool,
    /// Where doors send its visitors when no mirror may serve them (an origin that always
    /// has the files): a base URL their path is joined to. Used only then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_url: Option<String>,
    /// Doors send its visitors to the eligible mirror their region's probers measure fastest,
    /// with hysteresis, instead of choosing by weight (off: by weight).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub order_by_latency: bool,
}

impl Tenant {
    /// Validates a tenant: its name is a URL path segment, its note under 256 bytes.
    pub fn parse(self) -> Result<Tenant, Error> {
        let name = self.name.trim().to_owned();
        let ok = !name.is_empty()
            && name.len() <= MAX_TENANT
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
            && !name.starts_with('.');
        if !ok {
            return Err(Error::invalid(
                "name",
                format!(
                    "must be 1 to {MAX_TENANT} letters, digits, dots, hyphens or underscores, got {:?}",
                    self.name
                ),
            ));
        }
        if self.note.len() >= 256 {
            return Err(Error::invalid("note", format!("must be under 256 bytes, got {}", self.note.len())));
        }
        let fallback_url = self
            .fallback_url
            .as_deref()
            .map(|u| vantage_core::mirror::base_url("fallback_url", u))
            .transpose()?;
        Ok(Tenant { name, fallback_url, ..self })
    }
}

/// Every mirror and tenant, validated as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registry {
    /// Mirrors by host.
    pub mirrors: BTreeMap<String, Mirror>,
    /// Tenants by name.
    pub tenants: BTreeMap<String, Tenant>,
    /// The file each mirror was read from (`Mirror-1.example.net.yml`, say), so a change
    /// through the API rewrites that file instead of adding a second one.
    pub files: BTreeMap<String, String>,
}

/// Why a reload was refused: the first file that failed and its field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct LoadError {
    /// File name inside the mirrors directory.
    pub file: String,
    /// Field at fault (`body` when the file is not a document at all).
    pub field: String,
    /// Why, in plain words.
    pub reason: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.file, self.field, self.reason)
    }
}

impl LoadError {
    fn of(file: &str, e: Error) -> LoadError {
        LoadError { file: file.to_owned(), field: e.field().to_owned(), reason: e.reason().to_owned() }
    }
}

/// A YAML (or JSON, which YAML reads too) document as a JSON value, refused before it is
/// built when its aliases would expand it past a bound.
pub fn document(text: &str) -> Result<Value, Error> {
    super::yaml::bounded(text)?;
    serde_norway::from_str::<Value>(text).map_err(|e| {
        Error::invalid("body", format!("not a YAML document: {}", vantage_core::plain::plain(&e.to_string())))
    })
}

/// A mirror record as an operator sends it to the API: derived fields are refused by name.
pub fn mirror_from_api(doc: Value) -> Result<Mirror, Error> {
    if let Some(obj) = doc.as_object()
        && let Some(field) = DERIVED.iter().find(|f| obj.contains_key(**f))
    {
        return Err(Error::invalid(*field, "is derived by Vantage from its probers and cannot be set"));
    }
    let input: MirrorInput = vantage_core::from_value(doc)?;
    Mirror::try_from(input)
}

/// A mirror record from a file: derived fields are allowed, their region keys must be known
/// regions, and then they are dropped.
fn mirror_from_file(mut doc: Value, c: &Config) -> Result<Mirror, Error> {
    if let Some(obj) = doc.as_object_mut() {
        if let Some(regions) = obj.get("regions") {
            let Some(map) = regions.as_object() else {
                return Err(Error::invalid("regions", "must be a map of region code to status"));
            };
            if let Some(unknown) = map.keys().find(|k| !c.has_region(k)) {
                return Err(Error::invalid(format!("regions.{unknown}"), "is not a known region code"));
            }
        }
        for f in DERIVED {
            obj.remove(f);
        }
    }
    Mirror::try_from(vantage_core::from_value::<MirrorInput>(doc)?)
}

/// The tenants of a `tenants.yaml`: a list of tenant records (an empty file: none).
pub fn tenants_from(text: &str) -> Result<Vec<Tenant>, Error> {
    let doc = document(text)?;
    if doc.is_null() {
        return Ok(Vec::new());
    }
    let list: Vec<Tenant> = vantage_core::from_value(doc)?;
    list.into_iter().enumerate().map(|(i, t)| t.parse().map_err(|e| e.within(&format!("[{i}]")))).collect()
}

/// The mirror file name of `host`.
pub fn file_of(host: &str) -> String {
    format!("{host}.yaml")
}

/// A mirror record as its file holds it: the operator's fields only.
pub fn mirror_yaml(m: &Mirror) -> String {
    serde_norway::to_string(&MirrorInput::from(m.clone())).unwrap_or_default()
}

/// The tenants as `tenants.yaml` holds them.
pub fn tenants_yaml(tenants: &BTreeMap<String, Tenant>) -> String {
    let list: Vec<&Tenant> = tenants.values().collect();
    serde_norway::to_string(&list).unwrap_or_default()
}

/// Whether a name is a registry file of the directory: `.yaml` or `.yml`, not hidden
/// (editors' and our own temporary files start with a dot), and a name, not a path (names
/// also come from the replicas' change log, and are written where they say).
pub fn is_registry_file(name: &str) -> bool {
    !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && (name.ends_with(".yaml") || name.ends_with(".yml"))
}

impl Registry {
    /// Validates every file (`(file name, text)`) as one registry: each mirror record, its host
    /// matching its file name and unique, its tenants and check existing; every tenant of
    /// `tenants.yaml` valid and unique. The first failure refuses the whole set.
    pub fn load(files: &[(String, String)], c: &Config) -> Result<Registry, LoadError> {
        let mut r = Registry::default();
        if let Some((file, text)) = files.iter().find(|(f, _)| f == TENANTS_FILE) {
            for (i, t) in tenants_from(text).map_err(|e| LoadError::of(file, e))?.into_iter().enumerate() {
                if r.tenants.contains_key(&t.name) {
                    let e =
                        Error::invalid(format!("[{i}].name"), format!("tenant {:?} appears twice", t.name));
                    return Err(LoadError::of(file, e));
                }
                r.tenants.insert(t.name.clone(), t);
            }
        }
        for (file, text) in files.iter().filter(|(f, _)| f != TENANTS_FILE && is_registry_file(f)) {
            let fail = |e: Error| LoadError::of(file, e);
            let m = document(text).and_then(|d| mirror_from_file(d, c)).map_err(fail)?;
            let stem = file.strip_suffix(".yaml").or_else(|| file.strip_suffix(".yml")).unwrap_or(file);
            let stem = stem.to_ascii_lowercase();
            if stem != m.host {
                return Err(fail(Error::invalid(
                    "host",
                    format!("{:?} does not match the file name (expected {})", m.host, file_of(&m.host)),
                )));
            }
            if r.mirrors.contains_key(&m.host) {
                return Err(fail(Error::invalid("host", format!("{:?} is registered twice", m.host))));
            }
            r.admits(&m, c).map_err(fail)?;
            r.files.insert(m.host.clone(), file.clone());
            r.mirrors.insert(m.host.clone(), m);
        }
        Ok(r)
    }

    /// Checks what a mirror names against the registry and the configuration: its tenants
    /// exist and its check does.
    pub fn admits(&self, m: &Mirror, c: &Config) -> Result<(), Error> {
        if let Some((i, t)) = m.tenants.iter().enumerate().find(|(_, t)| !self.tenants.contains_key(*t)) {
            return Err(Error::invalid(format!("tenants[{i}]"), format!("no tenant {t:?} (add it first)")));
        }
        if c.check_named(m.check.as_deref()).is_none() {
            let name = m.check.as_deref().unwrap_or("default");
            return Err(Error::invalid("check", format!("no check named {name:?}")));
        }
        Ok(())
    }

    /// The file that holds (or will hold) `host`'s record.
    pub fn file_of(&self, host: &str) -> String {
        self.files.get(host).cloned().unwrap_or_else(|| file_of(host))
    }

    /// The mirrors that name `tenant`.
    pub fn serving(&self, tenant: &str) -> impl Iterator<Item = &Mirror> {
        self.mirrors.values().filter(move |m| m.tenants.iter().any(|t| t == tenant))
    }

    /// What changed from `before`: hosts added, removed and changed.
    pub fn changes(&self, before: &Registry) -> Changes {
        let mut ch = Changes::default();
        for (h, m) in &self.mirrors {
            match before.mirrors.get(h) {
                None => ch.added.push(h.clone()),
                Some(b) if b != m => ch.changed.push(h.clone()),
                Some(_) => {}
            }
        }
        ch.removed = before.mirrors.keys().filter(|h| !self.mirrors.contains_key(*h)).cloned().collect();
        ch.tenants = self.tenants != before.tenants;
        ch
    }
}

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// Hosts that appeared.
    pub added: Vec<String>,
    /// Hosts whose record changed.
    pub changed: Vec<String>,
    /// Hosts that went.
    pub removed: Vec<String>,
    /// Whether the tenants changed.
    pub tenants: bool,
}

impl Changes {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty() && !self.tenants
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Object;
    use vantage_core::Timestamp;
    use vantage_core::model::{Region, RegionInput};

    fn config() -> Config {
        let mut c = Config::default();
        let region =
            Region::try_from(RegionInput { code: "us1".into(), name: "US".into(), ..Default::default() });
        c.put(1, Object::Region(region.unwrap()), Timestamp::EPOCH, Timestamp::EPOCH);
        c
    }

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(f, t)| ((*f).to_owned(), (*t).to_owned())).collect()
    }

    #[test]
    fn a_valid_set_loads_whole() {
        let r = Registry::load(
            &files(&[
                (TENANTS_FILE, "- name: example\n  note: the example tenant\n"),
                ("m1.example.net.yaml", "host: m1.example.net\ntenants: [example]\nweight: 2\n"),
                ("m2.example.net.yaml", "host: m2.example.net\nregions:\n  us1: {status: ok, latency: 3}\n"),
                (".m3.example.net.yaml.tmp", "junk: ["),
                ("README", "not a mirror"),
            ]),
            &config(),
        )
        .unwrap();
        assert_eq!(r.mirrors.len(), 2);
        assert_eq!(r.mirrors["m1.example.net"].weight, 2);
        assert_eq!(r.file_of("m2.example.net"), "m2.example.net.yaml");
        assert_eq!(r.file_of("new.example.net"), "new.example.net.yaml");
        assert_eq!(r.tenants["example"].note, "the example tenant");
        assert_eq!(r.serving("example").count(), 1);
    }

    #[test]
    fn the_first_bad_file_refuses_the_set_and_names_the_field() {
        let c = config();
        let cases = [
            ("m1.example.net.yaml", "host: m1.example.net\nweight: -1\n", "weight"),
            ("m1.example.net.yaml", "host: m1.example.net\ntenants: [nobody]\n", "tenants[0]"),
            ("m1.example.net.yaml", "host: m1.example.net\nmanual_block: maybe\n", "manual_block"),
            ("m1.example.net.yaml", "host: m1.example.net\nregions: {mars: {status: ok}}\n", "regions.mars"),
            ("m1.example.net.yaml", "host: m1.example.net\nwieght: 1\n", "wieght"),
            ("m1.example.net.yaml", "host: m2.example.net\n", "host"),
            ("m1.example.net.yaml", "host: m1.example.net\ncheck: nosuch\n", "check"),
            ("m1.example.net.yaml", "host: [unclosed\n", "body"),
            (TENANTS_FILE, "- name: a\n- name: a\n", "[1].name"),
            (TENANTS_FILE, "- name: \"a b\"\n", "[0].name"),
            (TENANTS_FILE, "- name: a\n  fallback_to_degraded: maybe\n", "[0].fallback_to_degraded"),
            (TENANTS_FILE, "- name: a\n  fallback: true\n", "[0].fallback"),
        ];
        for (file, text, field) in cases {
            let e = Registry::load(&files(&[(file, text)]), &c).unwrap_err();
            assert_eq!((e.file.as_str(), e.field.as_str()), (file, field), "{text}: {e}");
        }
        let note = format!("host: m1.example.net\nmanual_note: \"{}\"\n", "x".repeat(256));
        let e = Registry::load(&files(&[("m1.example.net.yaml", &note)]), &c).unwrap_err();
        assert_eq!(e.field, "manual_note");
        let twice = files(&[
            ("M1.example.net.yaml", "host: m1.example.net"),
            ("m1.example.net.yml", "host: m1.example.net"),
        ]);
        assert_eq!(Registry::load(&twice, &c).unwrap_err().field, "host");
    }

    #[test]
    fn a_files_own_name_is_kept_and_its_suffix_stripped_once() {
        let c = config();
        let r = Registry::load(&files(&[("Mirror.yml.example.net.yml", "host: mirror.yml.example.net")]), &c);
        let r = r.unwrap();
        assert_eq!(r.file_of("mirror.yml.example.net"), "Mirror.yml.example.net.yml");
    }

    #[test]
    fn the_api_refuses_derived_fields_by_name() {
        let e = mirror_from_api(serde_json::json!({"host": "m.example.net", "verdict": "live"})).unwrap_err();
        assert_eq!(e.field(), "verdict");
        let e = mirror_from_api(serde_json::json!({"host": "m.example.net", "regions": {}})).unwrap_err();
        assert_eq!(e.field(), "regions");
        assert!(mirror_from_api(serde_json::json!({"host": "m.example.net"})).is_ok());
    }

    #[test]
    fn files_round_trip() {
        let c = config();
        let m = mirror_from_api(serde_json::json!({"host": "m.example.net", "weight": 3, "manual_block": true, "manual_note": "ticket 1", "address": "127.0.0.1:8080"})).unwrap();
        let text = mirror_yaml(&m);
        let r = Registry::load(&files(&[("m.example.net.yaml", &text)]), &c).unwrap();
        assert_eq!(r.mirrors["m.example.net"], m);
        let mut tenants = BTreeMap::new();
        tenants.insert(
            "t".to_owned(),
            Tenant {
                name: "t".into(),
                note: String::new(),
                fallback_to_degraded: false,
                fallback_url: None,
                order_by_latency: false,
            },
        );
        let plain = tenants_yaml(&tenants);
        assert!(!plain.contains("fallback"), "written only when on: {plain}");
        tenants.insert(
            "u".to_owned(),
            Tenant {
                name: "u".into(),
                note: String::new(),
                fallback_to_degraded: true,
                fallback_url: None,
                order_by_latency: false,
            },
        );
        let both: Vec<Tenant> = tenants.values().cloned().collect();
        assert_eq!(tenants_from(&tenants_yaml(&tenants)).unwrap(), both);
        assert_eq!(tenants_from("").unwrap(), Vec::new());
    }
}
