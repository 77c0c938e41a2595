//! Set-associative storage shared by every cache-like structure: TLBs,
//! page-walk caches, data caches (and later GPU-memory eviction lists).
//!
//! How it works: `sets × ways` slots hold a 64-bit key and a payload. The set is
//! `key mod sets`; the replacement policy sees only the candidates of one set
//! and their per-slot stamps, so one LRU implementation serves every level.
//! Control protocol (the same for every structure): [`SetAssoc::invalidate`]
//! one key, [`SetAssoc::invalidate_where`] a range, [`SetAssoc::flush`] all.

use serde::{Deserialize, Serialize};

/// Which slot of a full set is evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Replacement {
    /// Least recently used (a hit refreshes the slot).
    #[default]
    Lru,
    /// First in, first out (a hit does not refresh the slot).
    Fifo,
}

const INVALID: u64 = u64::MAX;

/// A set-associative array of `(key, V)`; keys must not be `u64::MAX`.
#[derive(Debug, Clone)]
pub struct SetAssoc<V: Copy> {
    sets: usize,
    ways: usize,
    pow2_mask: Option<u64>,
    /// Lemire's fast-modulo constant for a set count that is not a power of two.
    fastmod: u64,
    keys: Vec<u64>,
    /// Recency (LRU) or insertion (FIFO) order within a set: larger is newer;
    /// 0 marks an empty slot, so the victim scan is one `min` per set.
    /// 32 bits keep that scan narrow; `tick` renumbers before they wrap.
    stamps: Vec<u32>,
    vals: Vec<V>,
    clock: u32,
    policy: Replacement,
    /// Slots of the last few hits, checked before the set: a warp stream
    /// alternates between a handful of pages. Off for data caches, whose
    /// lookups rarely repeat a line back to back.
    mru: [usize; 4],
    mru_next: usize,
    use_mru: bool,
}

impl<V: Copy + Default> SetAssoc<V> {
    /// `entries` slots in sets of `ways` (`entries` must be a multiple of `ways`; both > 0).
    pub fn new(entries: usize, ways: usize, policy: Replacement) -> Self {
        assert!(ways > 0 && entries >= ways && entries % ways == 0, "bad geometry {entries}/{ways}");
        let sets = entries / ways;
        SetAssoc {
            sets,
            ways,
            pow2_mask: sets.is_power_of_two().then_some(sets as u64 - 1),
            fastmod: (u64::MAX / sets as u64).wrapping_add(1),
            keys: vec![INVALID; entries],
            stamps: vec![0; entries],
            vals: vec![V::default(); entries],
            clock: 0,
            policy,
            mru: [0; 4],
            mru_next: 0,
            use_mru: true,
        }
    }

    /// Skip the recent-hits check (for structures whose lookups rarely repeat back to back).
    pub fn without_mru(mut self) -> Self {
        self.use_mru = false;
        self
    }

    #[inline]
    fn set_base(&self, key: u64) -> usize {
        let s = match self.pow2_mask {
            Some(m) => key & m,
            // Fold the key to 32 bits, then (fold mod sets) without a division.
            None => {
                let folded = (key ^ (key >> 32)) & 0xFFFF_FFFF;
                ((self.fastmod.wrapping_mul(folded) as u128 * self.sets as u128) >> 64) as u64
            }
        };
        s as usize * self.ways
    }

    /// Advance the clock; before it wraps, renumber every set's stamps 1..=ways in their current order.
    #[inline(always)]
    fn tick(&mut self) -> u32 {
        if self.clock == u32::MAX {
            self.renumber();
        }
        self.clock += 1;
        self.clock
    }

    #[cold]
    fn renumber(&mut self) {
        {
            for b in (0..self.keys.len()).step_by(self.ways) {
                let mut order: Vec<usize> = (b..b + self.ways).collect();
                order.sort_by_key(|&i| self.stamps[i]);
                for (rank, i) in order.into_iter().enumerate() {
                    if self.stamps[i] != 0 {
                        self.stamps[i] = rank as u32 + 1;
                    }
                }
            }
            self.clock = self.ways as u32 + 1;
        }
    }

    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let b = self.set_base(key);
        self.keys[b..b + self.ways].iter().position(|&k| k == key).map(|w| b + w)
    }

    /// Look `key` up; a hit refreshes its recency (under LRU).
    #[inline]
    pub fn lookup(&mut self, key: u64) -> Option<&mut V> {
        let hit = if self.use_mru { self.mru.iter().copied().find(|&i| self.keys[i] == key) } else { None };
        let i = match hit {
            Some(i) => i,
            None => {
                let i = self.find(key)?;
                self.mru[self.mru_next] = i;
                self.mru_next = (self.mru_next + 1) % 4;
                i
            }
        };
        if self.policy == Replacement::Lru {
            self.stamps[i] = self.tick();
        }
        Some(&mut self.vals[i])
    }

    /// Look `key` up without touching replacement state.
    pub fn probe(&self, key: u64) -> Option<&V> {
        self.find(key).map(|i| &self.vals[i])
    }

    /// Insert or overwrite `key`; returns the evicted `(key, value)` if a valid slot was replaced.
    pub fn insert(&mut self, key: u64, v: V) -> Option<(u64, V)> {
        debug_assert_ne!(key, INVALID);
        let now = self.tick();
        if let Some(i) = self.find(key) {
            self.vals[i] = v;
            if self.policy == Replacement::Lru {
                self.stamps[i] = now;
            }
            return None;
        }
        self.place(key, v, now)
    }

    /// Insert `key` unless it is present (then nothing changes); true if inserted.
    #[inline]
    pub fn insert_if_absent(&mut self, key: u64, v: V) -> bool {
        if self.find(key).is_some() {
            return false;
        }
        let now = self.tick();
        self.place(key, v, now);
        true
    }

    /// Insert `key`, known to be absent (e.g. right after a failed lookup): skips the search.
    #[inline]
    pub fn insert_absent(&mut self, key: u64, v: V) -> Option<(u64, V)> {
        debug_assert!(self.find(key).is_none());
        let now = self.tick();
        self.place(key, v, now)
    }

    /// Put `key` in the empty or oldest slot of its set (LRU: stamps refreshed on hits; FIFO: set on insert only).
    #[inline]
    fn place(&mut self, key: u64, v: V, now: u32) -> Option<(u64, V)> {
        let b = self.set_base(key);
        let st = &self.stamps[b..b + self.ways];
        let (mut w, mut oldest) = (0, st[0]);
        for (j, &x) in st.iter().enumerate().skip(1) {
            if x < oldest {
                (w, oldest) = (j, x);
            }
        }
        let i = b + w;
        let old = (self.keys[i] != INVALID).then(|| (self.keys[i], self.vals[i]));
        self.keys[i] = key;
        self.vals[i] = v;
        self.stamps[i] = now;
        old
    }

    /// Remove `key`; true if it was present.
    pub fn invalidate(&mut self, key: u64) -> bool {
        match self.find(key) {
            Some(i) => {
                self.keys[i] = INVALID;
                self.stamps[i] = 0;
                true
            }
            None => false,
        }
    }

    /// Remove every key for which `pred` holds (e.g. a virtual-address range); returns how many.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(u64) -> bool) -> usize {
        let mut n = 0;
        for (k, st) in self.keys.iter_mut().zip(self.stamps.iter_mut()) {
            if *k != INVALID && pred(*k) {
                *k = INVALID;
                *st = 0;
                n += 1;
            }
        }
        n
    }

    /// Remove everything.
    pub fn flush(&mut self) {
        self.keys.fill(INVALID);
        self.stamps.fill(0);
    }

    /// Number of valid slots.
    pub fn occupancy(&self) -> usize {
        self.keys.iter().filter(|&&k| k != INVALID).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn set_of(key: u64, sets: usize) -> usize {
        if sets.is_power_of_two() {
            (key % sets as u64) as usize
        } else {
            (((key ^ (key >> 32)) & 0xFFFF_FFFF) % sets as u64) as usize
        }
    }

    /// Naive reference: one recency list per set, most recent at the back.
    struct Reference {
        sets: Vec<VecDeque<u64>>,
        ways: usize,
        lru: bool,
    }
    impl Reference {
        fn access(&mut self, key: u64) -> bool {
            let n = self.sets.len();
            let set = &mut self.sets[set_of(key, n)];
            if let Some(p) = set.iter().position(|&k| k == key) {
                if self.lru {
                    let k = set.remove(p).unwrap();
                    set.push_back(k);
                }
                return true;
            }
            if set.len() == self.ways {
                set.pop_front();
            }
            set.push_back(key);
            false
        }
    }

    fn check(entries: usize, ways: usize, policy: Replacement, keys: &[u64]) -> Result<(), TestCaseError> {
        let mut a: SetAssoc<u64> = SetAssoc::new(entries, ways, policy);
        let mut r = Reference { sets: vec![VecDeque::new(); entries / ways], ways, lru: policy == Replacement::Lru };
        for &k in keys {
            let hit = a.lookup(k).is_some();
            if !hit {
                a.insert(k, k * 3);
            } else {
                prop_assert_eq!(*a.probe(k).unwrap(), k * 3);
            }
            prop_assert_eq!(hit, r.access(k), "key {}", k);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn lru_matches_reference(keys in proptest::collection::vec(prop_oneof![0u64..64, (1u64 << 40)..(1u64 << 40) + 64], 0..400),
                                 geo in prop_oneof![Just((16usize, 16usize)), Just((32, 4)), Just((12, 3)), Just((8, 1)), Just((64, 8))]) {
            check(geo.0, geo.1, Replacement::Lru, &keys)?;
        }
        #[test]
        fn fifo_matches_reference(keys in proptest::collection::vec(0u64..40, 0..400),
                                  geo in prop_oneof![Just((16usize, 16usize)), Just((32, 4)), Just((6, 2))]) {
            check(geo.0, geo.1, Replacement::Fifo, &keys)?;
        }
    }

    #[test]
    fn lru_hand_case() {
        // 2-way, one set: A B A C -> C evicts B (A was refreshed).
        let mut a: SetAssoc<u8> = SetAssoc::new(2, 2, Replacement::Lru);
        a.insert(1, 0);
        a.insert(2, 0);
        assert!(a.lookup(1).is_some());
        assert_eq!(a.insert(3, 0), Some((2, 0)));
        assert!(a.probe(1).is_some() && a.probe(3).is_some() && a.probe(2).is_none());
    }

    #[test]
    fn stamps_renumber_before_wrapping_and_keep_lru_order() {
        let mut a: SetAssoc<u8> = SetAssoc::new(4, 4, Replacement::Lru);
        for k in 1..=4 {
            a.insert(k, 0);
        }
        a.clock = u32::MAX - 1;
        assert!(a.lookup(1).is_some()); // stamp u32::MAX; order now 2 3 4 1
        assert!(a.lookup(2).is_some()); // the clock would wrap: renumbered, order 3 4 1 2
        assert!(a.clock < 100);
        assert_eq!(a.insert(5, 0), Some((3, 0)));
        assert_eq!(a.insert(6, 0), Some((4, 0)));
    }

    #[test]
    fn control_protocol() {
        let mut a: SetAssoc<u8> = SetAssoc::new(16, 4, Replacement::Lru);
        for k in 0..16 {
            a.insert(k, 1);
        }
        assert_eq!(a.occupancy(), 16);
        assert!(a.invalidate(5));
        assert!(!a.invalidate(5));
        assert_eq!(a.invalidate_where(|k| (8..12).contains(&k)), 4);
        assert_eq!(a.occupancy(), 11);
        assert!(a.lookup(9).is_none());
        a.flush();
        assert_eq!(a.occupancy(), 0);
    }
}
