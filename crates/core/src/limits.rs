//! Size limits on what the admin API accepts (`docs/LIMITS.md`). They are checked where input
//! enters — a create or a change through the API — and not when a value is read back: stored
//! objects that an earlier version accepted still load, and a check another server sends in a
//! prober's work still parses.

use crate::check::Check;
use crate::error::{Error, Result, at_most};
use crate::model::{Cluster, Line, Region};

/// Client networks of one region or line at most.
pub const MAX_CLIENT_NETWORKS: usize = 4096;
/// The longest check path or raw request line, bytes.
pub const MAX_LINE: usize = 2048;

/// The longest URL taken (monitor endpoints, webhooks, mirror freshness references), bytes:
/// what HTTP servers and proxies commonly accept in a request line.
pub const MAX_URL: usize = 2048;

/// Refuses a URL longer than [`MAX_URL`], by its length: one that long is not quoted back.
pub fn url(field: &str, text: &str) -> Result<()> {
    if text.len() > MAX_URL {
        return Err(Error::invalid(field, format!("a URL is at most {MAX_URL} bytes, got {}", text.len())));
    }
    Ok(())
}

/// A region's limits.
pub fn region(r: &Region) -> Result<()> {
    at_most("client_networks", r.client_networks.len(), MAX_CLIENT_NETWORKS)
}

/// A line's limits.
pub fn line(l: &Line) -> Result<()> {
    at_most("backup_groups", l.backup_groups.len(), 16)?;
    at_most("client_networks", l.client_networks.len(), MAX_CLIENT_NETWORKS)
}

/// A cluster's limits, its check's included.
pub fn cluster(c: &Cluster) -> Result<()> {
    at_most("aliases", c.aliases.len(), 64)?;
    at_most("required_links", c.required_links.len(), 32)?;
    at_most("publishers", c.publishers.len(), 16)?;
    c.check.as_ref().map_or(Ok(()), |k| check(k).map_err(|e| e.within("check")))
}

/// A check's limits.
pub fn check(c: &Check) -> Result<()> {
    if c.path().len() > MAX_LINE {
        return Err(Error::invalid("path", format!("at most {MAX_LINE} bytes, got {}", c.path().len())));
    }
    at_most("request", c.request().len(), 32)?;
    if let Some(i) = c.request().iter().position(|l| l.len() > MAX_LINE) {
        return Err(Error::invalid(format!("request[{i}]"), format!("at most {MAX_LINE} bytes")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 10,000-byte monitor endpoint, webhook or freshness reference is refused by its length,
    /// not quoted back.
    #[test]
    fn urls_are_capped_and_not_quoted() {
        let long = format!("http://127.0.0.1/{}", "a".repeat(10_000));
        let e = crate::monitor::endpoint_url("regions[0].endpoints[0]", &long).unwrap_err();
        assert_eq!(e.field(), "regions[0].endpoints[0]");
        assert_eq!(e.reason(), "a URL is at most 2048 bytes, got 10017");
        let edge = format!("http://127.0.0.1/{}", "a".repeat(MAX_URL - 17));
        assert!(crate::monitor::endpoint_url("url", &edge).is_ok());
        let f = serde_json::json!({"path": "/t", "reference": long, "max_lag_s": 60});
        let m = serde_json::json!({"host": "m.example.net", "freshness": f});
        let e = crate::from_value::<crate::mirror::MirrorInput>(m)
            .and_then(crate::mirror::Mirror::try_from)
            .unwrap_err();
        assert_eq!(e.field(), "freshness.reference");
        assert!(!e.reason().contains("aaaa"), "{e}");
    }

    #[test]
    fn lists_and_strings_have_limits_at_the_edge_but_stored_values_still_parse() {
        let cluster_json = |extra: String| format!(r#"{{"name":"v","domain":"cdn.example.net"{extra}}}"#);
        let aliases: Vec<String> = (0..65).map(|i| format!("\"a{i}.example.net\"")).collect();
        let many =
            serde_json::from_str::<Cluster>(&cluster_json(format!(r#","aliases":[{}]"#, aliases.join(","))))
                .expect("a stored cluster with 65 aliases still loads");
        assert_eq!(cluster(&many).unwrap_err().to_string(), "aliases: at most 64 items, got 65");
        let long = "a".repeat(2048);
        let c = serde_json::from_str::<Cluster>(&cluster_json(format!(r#","check":{{"path":"/{long}"}}"#)))
            .unwrap();
        assert_eq!(cluster(&c).unwrap_err().to_string(), "check.path: at most 2048 bytes, got 2049");
        let nets: Vec<String> = (0..4097).map(|i| format!("\"10.{}.{}.0/24\"", i / 256, i % 256)).collect();
        let l: Line = serde_json::from_str(&format!(
            r#"{{"name":"l","group":1,"client_networks":[{}]}}"#,
            nets.join(",")
        ))
        .unwrap();
        assert_eq!(line(&l).unwrap_err().to_string(), "client_networks: at most 4096 items, got 4097");
        assert!(cluster(&serde_json::from_str(&cluster_json(String::new())).unwrap()).is_ok());
    }
}
