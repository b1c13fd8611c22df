//! serde's and axum's refusals in an operator's words: `invalid type: string "abc", expected
//! u32 at line 1 column 9` becomes `must be a whole number, got the text "abc"`.

/// `message` (from serde_json, serde_path_to_error, a YAML parser or an axum extractor) in
/// plain words; a message it does not know stays as it is, without its `at line … column …`
/// positions.
pub fn plain(message: &str) -> String {
    let m = strip_positions(message.trim());
    let m = m.as_str();
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some((got, want)) = m.strip_prefix(prefix).and_then(|r| r.rsplit_once(", expected ")) {
            return format!("must be {}, got {}", expected(want), got_value(got));
        }
    }
    if let Some(rest) = m.strip_prefix("unknown variant `")
        && let Some((got, want)) = rest.split_once("`, expected ")
    {
        let options = want.trim_start_matches("one of ").replace('`', "");
        return format!("must be one of {options}, got {got:?}");
    }
    if let Some(field) = m.strip_prefix("missing field `").and_then(|r| r.strip_suffix('`')) {
        return format!("{field} is required");
    }
    if let Some(n) = m.strip_prefix("invalid length ").and_then(|r| r.split_once(", expected ")) {
        return format!("must be {}, got {} items", n.1, n.0);
    }
    if m.starts_with("EOF while parsing") {
        return "the JSON ends too early".into();
    }
    m.to_owned()
}

/// `m` without its ` at line L column C` positions: a YAML parser's message has one for the
/// error and one for what it was reading (`… at line 1 column 9, while parsing a quoted scalar
/// at line 1 column 3`).
fn strip_positions(m: &str) -> String {
    let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let mut out = String::with_capacity(m.len());
    let mut rest = m;
    while let Some(i) = rest.find(" at line ") {
        let after = &rest[i + " at line ".len()..];
        let (line, tail) = after.split_at(digits(after));
        match tail.strip_prefix(" column ") {
            Some(c) if !line.is_empty() && digits(c) > 0 => {
                out.push_str(&rest[..i]);
                rest = &c[digits(c)..];
            }
            _ => {
                out.push_str(&rest[..=i]);
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// What serde expected, as an operator would say it.
fn expected(want: &str) -> String {
    match want.trim() {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => {
            "a whole number".into()
        }
        "f32" | "f64" => "a number".into(),
        "a string" | "a borrowed string" | "a character" => "text".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a map" => "an object".into(),
        w if w.starts_with("struct ") => "an object".into(),
        w if w.starts_with("a sequence") => "a list".into(),
        w => w.to_owned(),
    }
}

/// What it got.
fn got_value(got: &str) -> String {
    let got = got.trim();
    let quoted = |s: &str| s.trim_matches('`').to_owned();
    if let Some(s) = got.strip_prefix("string ") {
        return format!("the text {s}");
    }
    for kind in ["integer ", "floating point "] {
        if let Some(n) = got.strip_prefix(kind) {
            return format!("the number {}", quoted(n));
        }
    }
    if let Some(b) = got.strip_prefix("boolean ") {
        return quoted(b);
    }
    match got {
        "sequence" => "a list".into(),
        "map" => "an object".into(),
        "unit value" | "null" => "null".into(),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_messages_in_plain_words() {
        for (raw, plain_words) in [
            (
                r#"invalid type: string "abc", expected u32 at line 1 column 9"#,
                r#"must be a whole number, got the text "abc""#,
            ),
            ("invalid type: integer `5`, expected a string", "must be text, got the number 5"),
            ("invalid type: sequence, expected struct ClusterInput", "must be an object, got a list"),
            ("invalid type: boolean `true`, expected f64", "must be a number, got true"),
            ("invalid value: integer `-1`, expected u32", "must be a whole number, got the number -1"),
            (
                "unknown variant `gopher`, expected one of `http`, `https`",
                r#"must be one of http, https, got "gopher""#,
            ),
            ("missing field `name` at line 1 column 2", "name is required"),
            ("EOF while parsing an object at line 1 column 5", "the JSON ends too early"),
            (
                "found invalid Unicode character escape code at line 1 column 11, while parsing a \
                 quoted scalar at line 1 column 3",
                "found invalid Unicode character escape code, while parsing a quoted scalar",
            ),
            ("expected value at line 1 column 1", "expected value"),
            ("must be between 1 and 86400, got 0", "must be between 1 and 86400, got 0"),
        ] {
            assert_eq!(plain(raw), plain_words, "{raw}");
        }
    }
}
