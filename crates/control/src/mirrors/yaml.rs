//! A bound on what a YAML document expands to, checked before any value is built. Aliases
//! repeat the node they name, and nested ones multiply: a 12 KiB body of one anchored list of
//! 2,500 items and a list of 2,500 aliases to it is six million nodes, which cost about
//! 190 MB to build before validation could refuse them. A pass over the parser's events that
//! only counts (allocating nothing per node) refuses such a document first.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use vantage_core::Error;

/// Most nodes (scalars, sequences and maps, aliases counted as what they repeat) a document
/// may expand to. The largest registry file or body (64 KiB) without aliases holds fewer than
/// 33,000 (every node takes at least two bytes), so only aliases reach it.
const MAX_NODES: u64 = 100_000;

/// Refuses `text` when it expands to more than [`MAX_NODES`] nodes. Any other fault is left
/// to the parse that follows, which words it.
pub(crate) fn bounded(text: &str) -> Result<(), Error> {
    let mut count = 0;
    // Only the count matters: a document this pass cannot read is refused by the real parse.
    let _ = Budget(&mut count).deserialize(serde_norway::Deserializer::from_str(text));
    if count > MAX_NODES {
        return Err(Error::invalid(
            "body",
            format!("the YAML expands to more than {MAX_NODES} nodes through aliases"),
        ));
    }
    Ok(())
}

/// Counts the nodes it visits into its counter, stopping one past [`MAX_NODES`].
struct Budget<'a>(&'a mut u64);

impl Budget<'_> {
    fn take<E: de::Error>(&mut self) -> Result<(), E> {
        *self.0 += 1;
        if *self.0 > MAX_NODES { Err(E::custom("too many nodes")) } else { Ok(()) }
    }

    fn again(&mut self) -> Budget<'_> {
        Budget(&mut *self.0)
    }
}

impl<'de> DeserializeSeed<'de> for Budget<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Budget<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML node")
    }

    fn visit_bool<E: de::Error>(mut self, _: bool) -> Result<(), E> {
        self.take()
    }

    fn visit_i64<E: de::Error>(mut self, _: i64) -> Result<(), E> {
        self.take()
    }

    fn visit_u64<E: de::Error>(mut self, _: u64) -> Result<(), E> {
        self.take()
    }

    fn visit_f64<E: de::Error>(mut self, _: f64) -> Result<(), E> {
        self.take()
    }

    fn visit_str<E: de::Error>(mut self, _: &str) -> Result<(), E> {
        self.take()
    }

    fn visit_bytes<E: de::Error>(mut self, _: &[u8]) -> Result<(), E> {
        self.take()
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.take()
    }

    fn visit_none<E: de::Error>(mut self) -> Result<(), E> {
        self.take()
    }

    fn visit_some<D: Deserializer<'de>>(mut self, d: D) -> Result<(), D::Error> {
        self.take()?;
        d.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.take()?;
        while seq.next_element_seed(self.again())?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.take()?;
        while map.next_key_seed(self.again())?.is_some() {
            map.next_value_seed(self.again())?;
        }
        Ok(())
    }

    /// A tagged node (`!tag value`): the tag, then the value.
    fn visit_enum<A: EnumAccess<'de>>(mut self, e: A) -> Result<(), A::Error> {
        self.take()?;
        let ((), variant) = e.variant_seed(self.again())?;
        variant.newtype_variant_seed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hostile body of issue 30: one anchored list and a list of aliases to it.
    fn aliases(items: usize) -> String {
        let list = vec!["1"; items].join(",");
        let refs = vec!["*a"; items].join(",");
        format!("x: &a [{list}]\ny: [{refs}]\n")
    }

    fn rss_peak_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Set in the child process [`an_alias_bomb_is_refused_before_it_is_built`] measures in.
    const ALONE: &str = "VANTAGE_TEST_ALIAS_BOMB_ALONE";

    /// The peak RSS is the process's: measured beside the other tests of this binary, any of
    /// them that allocates a few MB meanwhile tips it (a fold test of 10,000 keys did, 3 runs in
    /// 10). So the test binary runs this one test alone in a child process and measures there.
    #[test]
    fn an_alias_bomb_is_refused_before_it_is_built() {
        if std::env::var_os(ALONE).is_none() {
            let name = "mirrors::yaml::tests::an_alias_bomb_is_refused_before_it_is_built";
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--test-threads=1", "--nocapture"])
                .env(ALONE, "1")
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
            assert!(said.contains("1 passed"), "the child ran no test: {said}");
            return;
        }
        let body = aliases(2_500);
        assert!(body.len() < 13 * 1024, "{}", body.len());
        // From what the process holds now: writing 5 to `clear_refs` resets the peak.
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let before = rss_peak_kib();
        let e = crate::mirrors::registry::document(&body).unwrap_err();
        let grown = rss_peak_kib() - before;
        assert_eq!(e.field(), "body");
        assert_eq!(e.reason(), "the YAML expands to more than 100000 nodes through aliases");
        assert!(grown < 16 * 1024, "the peak RSS grew by {grown} KiB");
    }

    #[test]
    fn documents_within_the_bound_pass_aliases_and_all() {
        assert!(bounded(&aliases(300)).is_ok());
        let flat = format!("x: [{}]\n", vec!["1"; 32_000].join(","));
        assert!(bounded(&flat).is_ok());
        assert!(bounded("a: !tagged {b: [1, 2]}\nc: ~\n").is_ok());
        // What this pass cannot read is the parse's to word.
        assert!(bounded("a: [unclosed\n").is_ok());
        let doc = crate::mirrors::registry::document("x: &r {a: 1}\ny: *r\n").unwrap();
        assert_eq!(doc["y"]["a"], 1);
    }
}
