//! A fast non-cryptographic hasher (the Fx algorithm) for the evaluator's maps, whose keys
//! are server-assigned ids and operator-set addresses, so hash flooding is not a concern.

use std::hash::Hasher;

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// The Fx hasher: rotate, xor, multiply per word.
#[derive(Debug, Clone, Copy, Default)]
pub struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    /// The multiply mixes every bit of a word into the high bits only: a word's low bits
    /// depend on its own low bits alone. Hash tables index buckets by the low bits, so
    /// addresses that differ in their high bytes (10.0.x.y) would share a bucket — the whole
    /// fleet in one probe chain. The rotation brings the mixed high bits down.
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, BuildHasherDefault};
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    /// Addresses of one network, which differ only in their high bytes as the hasher reads
    /// them, spread over a table's buckets (its low bits) instead of sharing one.
    #[test]
    fn addresses_of_one_network_spread_over_the_buckets() {
        let build = BuildHasherDefault::<FastHasher>::default();
        let buckets: std::collections::HashSet<u64> = (0..30_000u32)
            .map(|n| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n)))
            .map(|ip| build.hash_one(ip) & 0x7fff)
            .collect();
        assert!(buckets.len() > 16_000, "{} of 32,768 buckets used", buckets.len());
    }
}
