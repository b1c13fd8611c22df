//! OpenAPI schemas of the types whose JSON is text: a time is an RFC 3339 string, a network a
//! CIDR string. Only with the `schema` feature, for the admin API's document.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::net::IpNet;
use crate::time::Timestamp;

fn text(format: Option<SchemaFormat>, example: &str, description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(format)
        .examples([example])
        .description(Some(description))
        .into()
}

impl PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        text(
            Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)),
            "2026-12-01T09:04:17.000Z",
            "A time (RFC 3339, UTC).",
        )
    }
}

impl ToSchema for Timestamp {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Timestamp")
    }
}

impl PartialSchema for IpNet {
    fn schema() -> RefOr<Schema> {
        text(None, "192.0.2.0/24", "An IP network in CIDR notation.")
    }
}

impl ToSchema for IpNet {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("IpNet")
    }
}

/// Types that serialise as their input: their schema is the input's.
macro_rules! as_input {
    ($($ty:ty => $input:ty),* $(,)?) => {$(
        impl PartialSchema for $ty {
            fn schema() -> RefOr<Schema> {
                <$input as PartialSchema>::schema()
            }
        }

        impl ToSchema for $ty {
            fn name() -> Cow<'static, str> {
                <$input as ToSchema>::name()
            }
            fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
                <$input as ToSchema>::schemas(schemas)
            }
        }
    )*};
}

as_input!(
    crate::check::Check => crate::check::CheckInput,
    crate::model::PublisherSpec => crate::model::PublisherInput,
    crate::rules::Condition => crate::rules::ConditionInput,
    crate::mirror::MirrorSettings => crate::mirror::MirrorSettingsInput,
    crate::detection::DetectionSettings => crate::detection::DetectionSettingsInput,
    crate::monitor::Monitor => crate::monitor::MonitorInput,
);
