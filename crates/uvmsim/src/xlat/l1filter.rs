//! Which L1 TLBs of a GPU may hold a key: a one-hash filter whose slots hold masks of the L1 TLBs
//! (by index modulo 64) filled with a key hashing to them, so that an invalidation of one page
//! searches only those TLBs, and none when the mask is empty. Without it every invalidated page
//! searched every L1 TLB (a 16-GPU mi300a-apu CoMD run spent half its time there: 228 CUs' TLBs,
//! three keys each); with a one-bit filter (session 60), every one of them when any held it.
//!
//! Exact in the direction that matters: an L1 TLB that holds a key, or has a fill of it pending, is
//! always in its slot's mask (every L1 fill goes through [`L1Filter::note`], and a rebuild re-adds
//! every key held). Marks of keys since evicted or invalidated stay until the next rebuild, which
//! runs when the notes since the last one reach half the slots: a false positive only costs the
//! search the filter saves, so the simulation is the same with or without it.

use super::tlb::Tlb;

/// Filter slots per L1 TLB entry of the GPU (a power of two is taken at or above the product).
const SLOTS_PER_ENTRY: usize = 4;

/// L1 TLBs are told apart by their index modulo this (one bit of a slot's mask each): exact up to 64
/// L1 TLBs, groups of `ceil(n / 64)` beyond.
const GROUPS: usize = 64;

#[derive(Debug, Clone)]
pub struct L1Filter {
    /// Per slot, the groups of L1 TLBs that were filled with a key hashing to it.
    masks: Vec<u64>,
    /// `64 - log2(slots)`: a key's slot is the top bits of its multiplicative hash.
    shift: u32,
    /// Keys noted since the last rebuild; a rebuild comes when they reach `limit`.
    noted: usize,
    limit: usize,
}

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

impl L1Filter {
    /// A filter for L1 TLBs of `entries` entries in all.
    pub fn new(entries: usize) -> L1Filter {
        let n = (entries.max(1) * SLOTS_PER_ENTRY).next_power_of_two().max(64);
        L1Filter { masks: vec![0; n], shift: 64 - n.trailing_zeros(), noted: 0, limit: n / 2 }
    }

    #[inline(always)]
    fn slot(&self, key: u64) -> usize {
        (key.wrapping_mul(MUL) >> self.shift) as usize
    }

    /// The groups of L1 TLBs that may hold `key` (bit `g`: the L1 TLBs `g`, `g + 64`, ...); 0: none holds
    /// it, nor has a fill of it pending.
    #[inline]
    pub fn holders(&self, key: u64) -> u64 {
        self.masks[self.slot(key)]
    }

    /// The L1 TLBs of `l1s` (indices) in the groups of `mask`.
    pub fn members(mask: u64, l1s: usize) -> impl Iterator<Item = usize> {
        let mut bits = mask;
        std::iter::from_fn(move || {
            let g = bits.trailing_zeros() as usize;
            bits &= bits.wrapping_sub(1);
            (g < GROUPS).then_some(g)
        })
        .flat_map(move |g| (g..l1s).step_by(GROUPS))
    }

    /// Is L1 TLB `l1` among the members of `mask`'s groups?
    #[inline]
    pub fn covers(mask: u64, l1: usize) -> bool {
        mask >> (l1 % GROUPS) & 1 == 1
    }

    /// `key` is being filled into L1 TLB `l1` of `l1s`; the filter is rebuilt from their contents
    /// first when it has taken its share of notes since the last rebuild.
    #[inline]
    pub fn note(&mut self, key: u64, l1: usize, l1s: &[Tlb]) {
        if self.noted >= self.limit {
            self.rebuild(l1s);
        }
        self.noted += 1;
        let s = self.slot(key);
        self.masks[s] |= 1 << (l1 % GROUPS);
    }

    /// Forget the keys no L1 TLB holds any more: only those of `l1s` (held or pending) stay.
    #[cold]
    fn rebuild(&mut self, l1s: &[Tlb]) {
        self.masks.fill(0);
        self.noted = 0;
        for (i, t) in l1s.iter().enumerate() {
            for k in t.keys() {
                let s = self.slot(k);
                self.masks[s] |= 1 << (i % GROUPS);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against the TLBs themselves, through fills, evictions, invalidations and rebuilds: a key an
        /// L1 TLB holds always has that TLB among the members of its holders.
        #[test]
        fn a_key_held_is_never_reported_absent(ops in proptest::collection::vec((0u8..3, 0usize..70, 0u64..200), 1..2000)) {
            // 70 4-entry TLBs (280 entries: 2048 slots, rebuilt every 1024 notes); TLBs 0-5
            // share their groups with 64-69.
            let n = 70;
            let mut l1s: Vec<Tlb> = (0..n).map(|_| Tlb::with(4, 4, 1, 4)).collect();
            let mut f = L1Filter::new(4 * n);
            for (i, &(op, t, key)) in ops.iter().enumerate() {
                match op {
                    0 | 1 => {
                        f.note(key, t, &l1s);
                        l1s[t].fill_prefetch(key, key << 12, i as u64);
                    }
                    _ => {
                        l1s[t].invalidate(key);
                    }
                }
                for (j, tlb) in l1s.iter().enumerate() {
                    for k in tlb.keys() {
                        let m = f.holders(k);
                        prop_assert!(L1Filter::members(m, n).any(|x| x == j), "TLB {} holds {} but is not among its holders {:#x} after op {}", j, k, m, i);
                    }
                }
            }
        }
    }

    #[test]
    fn members_are_the_tlbs_of_the_groups() {
        assert_eq!(L1Filter::members(0, 130).count(), 0);
        assert_eq!(L1Filter::members(1, 130).collect::<Vec<_>>(), vec![0, 64, 128]);
        assert_eq!(L1Filter::members(0b110, 3).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(L1Filter::members(1 << 63, 40).count(), 0, "group 63 has no TLB of 40");
        assert_eq!(L1Filter::members(u64::MAX, 40).count(), 40);
        for (mask, n) in [(0b1010u64, 200), (1 << 63, 130), (u64::MAX, 64)] {
            let members: Vec<usize> = L1Filter::members(mask, n).collect();
            assert!((0..n).all(|i| L1Filter::covers(mask, i) == members.contains(&i)), "{mask:#x} over {n}");
        }
    }

    #[test]
    fn a_rebuild_forgets_keys_no_longer_held() {
        let mut l1s = vec![Tlb::with(4, 4, 1, 4)];
        let mut f = L1Filter::new(4);
        assert_eq!((f.masks.len(), f.limit), (64, 32), "64 slots, rebuilt after 32 notes");
        for k in 0..32u64 {
            f.note(k, 0, &l1s);
            l1s[0].fill_prefetch(k, 0, 0);
        }
        // The TLB keeps its last four keys; every key noted is still reported until the rebuild.
        assert!((0..32).all(|k| f.holders(k) == 1));
        f.note(100, 0, &l1s);
        l1s[0].fill_prefetch(100, 0, 0);
        let held: Vec<u64> = l1s[0].keys().collect();
        assert_eq!(held.len(), 4);
        assert!(held.iter().all(|&k| f.holders(k) == 1));
        let forgotten = (0..32).filter(|&k| !held.contains(&k) && f.holders(k) == 0).count();
        assert!(forgotten >= 20, "most evicted keys leave the filter at the rebuild ({forgotten} of 28)");
    }

    #[test]
    fn a_key_is_searched_only_in_the_group_that_was_filled() {
        let mut l1s: Vec<Tlb> = (0..130).map(|_| Tlb::with(4, 4, 1, 4)).collect();
        let mut f = L1Filter::new(4 * 130);
        f.note(7, 65, &l1s);
        l1s[65].fill_prefetch(7, 0, 0);
        assert_eq!(f.holders(7), 1 << 1);
        assert_eq!(L1Filter::members(f.holders(7), 130).collect::<Vec<_>>(), vec![1, 65, 129]);
    }
}
