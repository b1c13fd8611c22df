//! Tokens: admin bearer tokens (`vta_`) and enrollment tokens (`vtp_`, `vtn_`). Only a
//! SHA-256 and a short prefix are ever stored; the token itself is shown once.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// A freshly made token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewToken {
    /// The token, to show once.
    pub token: String,
    /// Its first characters, stored to recognise it.
    pub prefix: String,
    /// Its SHA-256, hex, stored to check it.
    pub sha256: String,
}

/// Makes a token with `kind` (`vta`, `vtp`, `vtn`) and 32 random bytes.
pub(crate) fn new_token(kind: &str) -> NewToken {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token = format!("{kind}_{}", hex::encode(bytes));
    NewToken { prefix: token[..kind.len() + 9].to_owned(), sha256: sha256_hex(token.as_bytes()), token }
}

/// SHA-256 of `data`, hex.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_their_prefix_and_are_stored_hashed() {
        let t = new_token("vta");
        assert!(t.token.starts_with("vta_") && t.token.len() == 68);
        assert_eq!(t.prefix, t.token[..12]);
        assert_eq!(t.sha256, sha256_hex(t.token.as_bytes()));
        assert_ne!(new_token("vta").token, t.token);
    }
}
