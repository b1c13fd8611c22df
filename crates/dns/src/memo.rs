//! The line choices a DNS thread made lately. A busy zone's clients are a few thousand
//! resolvers and client subnets asking again and again; remembering each one's choice spares
//! the network trie's walk and, for a client placed by the geo databases, their records'
//! decoding and the claim of the lines.
//!
//! One slot per hash of (table, steered cluster, client), replaced by the next choice that
//! hashes there: a fixed size per thread, no allocation, no lock. A table's generation is in
//! the key, so a new table (new lines, new records, another geo database) is never answered
//! from an old one's choices.

use std::cell::RefCell;
use std::net::IpAddr;

/// Slots per thread: about 40 KiB.
const SLOTS: usize = 1024;

#[derive(Clone, Copy)]
struct Slot {
    /// The table's generation; 0 (no table has it) for an empty slot.
    generation: u64,
    steering: u32,
    client: IpAddr,
    choice: (u32, u8),
}

const EMPTY: Slot =
    Slot { generation: 0, steering: 0, client: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), choice: (0, 0) };

thread_local! {
    static SLOTS_OF_THREAD: RefCell<[Slot; SLOTS]> = const { RefCell::new([EMPTY; SLOTS]) };
}

fn slot_of(generation: u64, steering: u32, client: IpAddr) -> usize {
    let bits = match client {
        IpAddr::V4(a) => u64::from(u32::from(a)),
        IpAddr::V6(a) => {
            let b = u128::from(a);
            (b as u64) ^ ((b >> 64) as u64).rotate_left(32) ^ 1
        }
    };
    let mixed = (bits ^ u64::from(steering).rotate_left(40) ^ generation.rotate_left(20))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mixed >> (64 - SLOTS.trailing_zeros())) as usize
}

/// The choice of `(generation, steering)` for `client`, remembered, else made by `choose` and
/// remembered.
pub(crate) fn remembered(
    generation: u64,
    steering: u32,
    client: IpAddr,
    choose: impl FnOnce() -> (u32, u8),
) -> (u32, u8) {
    SLOTS_OF_THREAD.with(|slots| {
        let i = slot_of(generation, steering, client);
        if let Some(s) = slots.borrow().get(i)
            && s.generation == generation
            && s.steering == steering
            && s.client == client
        {
            return s.choice;
        }
        // Made with no borrow held: `choose` is the caller's.
        let choice = choose();
        if let Some(s) = slots.borrow_mut().get_mut(i) {
            *s = Slot { generation, steering, client, choice };
        }
        choice
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn a_choice_is_made_once_per_table_cluster_and_client() {
        let made = Cell::new(0);
        let choose = |c: (u32, u8)| {
            let made = &made;
            move || {
                made.set(made.get() + 1);
                c
            }
        };
        let a: IpAddr = "198.51.100.7".parse().unwrap();
        let b: IpAddr = "2001:db8::7".parse().unwrap();
        assert_eq!(remembered(7, 0, a, choose((1, 24))), (1, 24));
        assert_eq!(remembered(7, 0, a, choose((9, 9))), (1, 24), "remembered");
        assert_eq!(made.get(), 1);
        assert_eq!(remembered(7, 1, a, choose((2, 24))), (2, 24), "another cluster");
        assert_eq!(remembered(8, 0, a, choose((3, 24))), (3, 24), "another table");
        assert_eq!(remembered(7, 0, b, choose((4, 56))), (4, 56), "another client");
        let mapped: IpAddr = "::ffff:198.51.100.7".parse().unwrap();
        assert_eq!(remembered(7, 0, mapped, choose((5, 120))), (5, 120), "a mapped client is its own key");
        assert_eq!(made.get(), 5);
        // Other clients in every slot: a slot shared with another client never answers for it.
        for i in 0..(SLOTS as u32 * 4) {
            remembered(7, 0, IpAddr::from(std::net::Ipv4Addr::from(i)), || (0, 32));
        }
        assert_eq!(remembered(7, 0, a, choose((1, 24))), (1, 24));
    }
}
