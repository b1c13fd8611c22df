//! The one error type of the core: input that does not make a valid value.

/// Why an input was refused. Every variant names the field, so an API can answer
/// `400 {"field": …, "reason": …}` without guessing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A field's value is outside what the contract allows.
    #[error("{field}: {reason}")]
    Invalid {
        /// Dotted path of the field (`conditions[2].threshold`).
        field: String,
        /// What is wrong, in the operator's words.
        reason: String,
    },
}

impl Error {
    /// An invalid-field error.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Invalid { field: field.into(), reason: reason.into() }
    }

    /// The field the error is about.
    pub fn field(&self) -> &str {
        match self {
            Error::Invalid { field, .. } => field,
        }
    }

    /// The reason, without the field.
    pub fn reason(&self) -> &str {
        match self {
            Error::Invalid { reason, .. } => reason,
        }
    }

    /// The same error under a parent field: `threshold` becomes `conditions[2].threshold`.
    pub fn within(self, parent: &str) -> Self {
        match self {
            Error::Invalid { field, reason } => Error::Invalid {
                field: if field.is_empty() {
                    parent.to_owned()
                } else if field.starts_with('[') {
                    format!("{parent}{field}")
                } else {
                    format!("{parent}.{field}")
                },
                reason,
            },
        }
    }
}

/// Result with the core's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Checks that `value` lies in `lo..=hi`, naming `field` and the range otherwise.
pub(crate) fn in_range<T>(field: &str, value: T, lo: T, hi: T) -> Result<T>
where
    T: PartialOrd + std::fmt::Display + Copy,
{
    if value < lo || value > hi {
        Err(Error::invalid(field, format!("must be between {lo} and {hi}, got {value}")))
    } else {
        Ok(value)
    }
}

/// Checks that a list holds at most `max` items, naming `field` and the limit otherwise.
pub(crate) fn at_most(field: &str, len: usize, max: usize) -> Result<()> {
    if len > max { Err(Error::invalid(field, format!("at most {max} items, got {len}"))) } else { Ok(()) }
}

/// Checks a display name: trimmed, 1..=`max` characters, no control characters.
pub(crate) fn name(field: &str, value: &str, max: usize) -> Result<String> {
    let v = value.trim();
    let n = v.chars().count();
    if n == 0 {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if n > max {
        return Err(Error::invalid(field, format!("must be at most {max} characters, got {n}")));
    }
    if v.chars().any(char::is_control) {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    Ok(v.to_owned())
}

/// Parses a document into `T`, naming the field of a type error or an unknown key, so that
/// the API and the file loaders answer alike.
pub fn from_value<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(described)
}

/// A deserialisation error as the field it concerns and a plain reason.
pub(crate) fn described(e: serde_path_to_error::Error<serde_json::Error>) -> Error {
    let path = e.path().to_string();
    let inner = e.into_inner().to_string();
    // Validation inside a type (`TryFrom`) reports "field: reason" itself.
    if let Some((field, reason)) = inner.split_once(": ").filter(|(f, _)| is_field_path(f)) {
        let field = if path == "." { field.to_owned() } else { format!("{path}.{field}") };
        return Error::invalid(field, reason);
    }
    if let Some(unknown) = inner.strip_prefix("unknown field `").and_then(|r| r.split('`').next()) {
        // The path already ends with the unknown key.
        let field = if path == "." { unknown.to_owned() } else { path };
        if field.is_empty() {
            return Error::invalid("body", "an empty key is not a field");
        }
        return Error::invalid(field, "unknown field");
    }
    if let Some(missing) = inner.strip_prefix("missing field `").and_then(|r| r.split('`').next()) {
        let field = if path == "." { missing.to_owned() } else { format!("{path}.{missing}") };
        return Error::invalid(field, "is required");
    }
    Error::invalid(if path == "." { "body".to_owned() } else { path }, crate::plain::plain(&inner))
}

fn is_field_path(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']'))
}
