//! [`Fingerprint`]: the SHA-256 of a certificate's DER, as an operator pins the channel CA.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

/// SHA-256 of a certificate's DER encoding.
///
/// Parsed from 64 hexadecimal digits, any case, with or without colons between the bytes
/// (`AB:CD:…` as `openssl x509 -fingerprint -sha256` prints it); shown as 64 lowercase digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of(der: &[u8]) -> Self {
        Fingerprint(Sha256::digest(der).into())
    }

    /// The digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// Why a text is not a SHA-256 fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a SHA-256 fingerprint (64 hexadecimal digits, colons allowed): {0}")]
pub struct FingerprintParseError(String);

impl FromStr for Fingerprint {
    type Err = FingerprintParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim();
        let digits: String = trimmed.chars().filter(|c| *c != ':').collect();
        // Colons may only separate bytes: `ab:cd` yes, `a:bcd` or `abcd:` no.
        let colons_ok = !trimmed.contains(':')
            || trimmed.split(':').all(|part| part.len() == 2) && trimmed.split(':').count() == 32;
        let mut out = [0u8; 32];
        match hex::decode_to_slice(&digits, &mut out) {
            Ok(()) if colons_ok => Ok(Fingerprint(out)),
            _ => Err(FingerprintParseError(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_any_case_with_or_without_colons() {
        let plain = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let fp: Fingerprint = plain.parse().unwrap();
        assert_eq!(fp.to_string(), plain);
        let colons = plain
            .as_bytes()
            .chunks(2)
            .map(|c| std::str::from_utf8(c).unwrap().to_uppercase())
            .collect::<Vec<_>>()
            .join(":");
        assert_eq!(colons.parse::<Fingerprint>().unwrap(), fp);
        assert_eq!(format!(" {} ", plain.to_uppercase()).parse::<Fingerprint>().unwrap(), fp);
    }

    #[test]
    fn refuses_wrong_lengths_digits_and_colons() {
        for bad in [
            "",
            "0011",
            "zz112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
            "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff00",
            "0:0112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
        ] {
            assert!(bad.parse::<Fingerprint>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fingerprint_is_sha256_of_the_der() {
        // SHA-256 of the empty string.
        assert_eq!(
            Fingerprint::of(b"").to_string(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
