//! Strict JSON reading for the agent channel: a struct is read only from an object. Serde's
//! derived structs also take an array of their fields in order, so `"hls": [true, true,
//! true, -5]` would pass as an HLS tuple; a wire format read by position breaks silently the
//! day a field is added, and hides what a sender meant. [`from_slice`] wraps the JSON reader
//! so every struct, however deep, asks for a map, and names the field of any fault like
//! [`crate::from_value`] does.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

use crate::error::{Error, Result};

/// Reads `T` from the JSON text `bytes`: structs only from objects, nothing after the value.
pub fn from_slice<T: de::DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    // Read without tracking where each value is first: nearly every body is good, and the
    // tracking doubled the reading of a 10,000-result report (6.4 ms against 2.8 plain). A
    // body that fails is read again, tracked, to name the field at fault.
    let mut json = serde_json::Deserializer::from_slice(bytes);
    if let Ok(value) = T::deserialize(Strict(&mut json))
        && json.end().is_ok()
    {
        return Ok(value);
    }
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(Strict(&mut json)).map_err(crate::error::described)?;
    json.end().map_err(|e| Error::invalid("body", crate::plain::plain(&e.to_string())))?;
    Ok(value)
}

/// A deserializer whose structs are maps.
struct Strict<D>(D);

/// What [`Strict`] hands on (visitors, seeds and the accesses they are given): each wraps
/// the next deserializer it reaches in [`Strict`].
struct Wrap<T>(T);

macro_rules! forward {
    ($($method:ident $(($($arg:ident: $ty:ty),*))?),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, $($($arg: $ty,)*)? visitor: V) -> std::result::Result<V::Value, D::Error> {
            self.0.$method($($($arg,)*)? Wrap(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward! {
        deserialize_any, deserialize_bool, deserialize_i8, deserialize_i16, deserialize_i32,
        deserialize_i64, deserialize_i128, deserialize_u8, deserialize_u16, deserialize_u32,
        deserialize_u64, deserialize_u128, deserialize_f32, deserialize_f64, deserialize_char,
        deserialize_str, deserialize_string, deserialize_bytes, deserialize_byte_buf,
        deserialize_option, deserialize_unit, deserialize_seq, deserialize_map,
        deserialize_identifier, deserialize_ignored_any,
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    }

    /// The one change: a struct is read as a map, so an array is refused as "invalid type:
    /// sequence, expected struct …".
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> std::result::Result<V::Value, D::Error> {
        self.0.deserialize_map(Wrap(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! pass {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> std::result::Result<V::Value, E> {
            self.0.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    pass! {
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64),
        visit_i128(i128), visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64),
        visit_u128(u128), visit_f32(f32), visit_f64(f64), visit_char(char), visit_str(&str),
        visit_borrowed_str(&'de str), visit_string(String), visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]), visit_byte_buf(Vec<u8>),
    }

    fn visit_none<E: de::Error>(self) -> std::result::Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<V::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<V::Value, D::Error> {
        self.0.visit_some(Strict(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> std::result::Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(Strict(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<V::Value, A::Error> {
        self.0.visit_seq(Wrap(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<V::Value, A::Error> {
        self.0.visit_map(Wrap(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, e: A) -> std::result::Result<V::Value, A::Error> {
        self.0.visit_enum(Wrap(e))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Wrap<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<S::Value, D::Error> {
        self.0.deserialize(Strict(d))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> std::result::Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Wrap(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> std::result::Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Wrap(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> std::result::Result<T::Value, A::Error> {
        self.0.next_value_seed(Wrap(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Wrap<A> {
    type Error = A::Error;
    type Variant = Wrap<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> std::result::Result<(T::Value, Wrap<A::Variant>), A::Error> {
        let (value, variant) = self.0.variant_seed(Wrap(seed))?;
        Ok((value, Wrap(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn unit_variant(self) -> std::result::Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> std::result::Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Wrap(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> std::result::Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> std::result::Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Wrap(visitor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{HlsDetail, ProbeResult};

    #[test]
    fn structs_come_only_from_objects_at_any_depth() {
        let ok: ProbeResult = from_slice(
            br#"{"target":"m/a.example.net","attempts":[{"stages":15,"rtt_us":900}],"hls":{"reachable":true,"manifest_valid":true,"segment_fetchable":true,"ttfb_ms":3.5}}"#,
        )
        .unwrap();
        assert_eq!(ok.hls.and_then(|h| h.ttfb_ms), Some(3.5));
        let e = from_slice::<HlsDetail>(b"[true, true, true, 5.0]").unwrap_err();
        assert_eq!(e.field(), "body");
        assert_eq!(e.reason(), "must be an object, got a list");
        let e = from_slice::<ProbeResult>(
            br#"{"target":"m/a.example.net","attempts":[],"hls":[true,true,true,-5.0]}"#,
        )
        .unwrap_err();
        assert_eq!(e.field(), "hls");
        let e = from_slice::<ProbeResult>(br#"{"target":"m/a","attempts":[[15,900]]}"#).unwrap_err();
        assert_eq!(e.field(), "attempts[0]");
        let e = from_slice::<HlsDetail>(
            br#"{"reachable":true,"manifest_valid":true,"segment_fetchable":true} x"#,
        )
        .unwrap_err();
        assert_eq!(e.field(), "body");
    }
}
