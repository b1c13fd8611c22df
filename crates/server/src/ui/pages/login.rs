//! The login page and the error page.

use super::*;

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage<'a> {
    next: &'a str,
    error: Option<&'a str>,
}

/// The login form, with an error when the last try failed.
pub(in crate::ui) fn login_page(next: &str, error: Option<&str>, status: StatusCode) -> Response {
    let mut r = render(&LoginPage { next, error });
    if r.status() == StatusCode::OK {
        *r.status_mut() = status;
    }
    r
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    message: &'a str,
}

/// A page that says what went wrong.
pub(in crate::ui) fn error_page(status: StatusCode, message: &str) -> Html<String> {
    Html(
        ErrorPage { status: status.as_u16(), message }
            .render()
            .unwrap_or_else(|_| format!("<!doctype html><title>Error</title><p>{}</p>", esc(message))),
    )
}

/// No such page.
pub(in crate::ui) fn not_found() -> Response {
    (StatusCode::NOT_FOUND, error_page(StatusCode::NOT_FOUND, "There is no such page.")).into_response()
}
