//! Admin tokens: those that exist (by name and prefix, never the secret), revoked with a
//! button; a new one made with a form and shown once.

use super::*;

#[derive(Template)]
#[template(path = "tokens.html")]
struct TokensPage {
    frame: Frame,
    tokens: Vec<TokenRow>,
}

/// One admin token as the page lists it.
#[derive(Debug)]
struct TokenRow {
    id: i64,
    name: String,
    prefix: String,
    read_only: bool,
    created: Markup,
}

pub(in crate::ui) async fn tokens(
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> PageResult {
    let at = now();
    let list: Items<views::AdminToken> = client(&ui, &v).get("/v1/admin-tokens").await?;
    let page = TokensPage {
        frame: Frame::new(&v, "Admin tokens", "tokens", 0),
        tokens: (list.items.into_iter())
            .map(|t| TokenRow {
                id: t.id,
                name: t.name,
                prefix: t.prefix,
                read_only: t.read_only,
                created: time(t.created_at, at),
            })
            .collect(),
    };
    Ok(render(&page))
}
