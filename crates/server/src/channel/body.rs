//! The channel's request bodies: JSON read strictly ([`vantage_core::strict`]: structs only
//! from objects, the field of any fault named), and every refusal in the channel's JSON error
//! shape, as agents read it (axum's own extractor answers in plain text).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body of `T`, read within the route's body limit.
#[derive(Debug)]
pub(super) struct Body<T>(pub(super) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| match e.status() {
            StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::TooLarge("the body is larger than this endpoint reads".into())
            }
            _ => ApiError::invalid("body", "could not be read"),
        })?;
        Ok(Body(vantage_core::strict::from_slice(&bytes)?))
    }
}
