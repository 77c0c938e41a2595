//! Which keys a GPU's L1 TLBs may hold: a one-hash bit filter over every key filled into any of
//! them, so that an invalidation of one page skips the L1 TLBs when none can hold it. Without it
//! every invalidated page searched every L1 TLB (a 16-GPU mi300a-apu CoMD run spent half its time
//! there: 228 CUs' TLBs, three keys each).
//!
//! Exact in the direction that matters: a key any L1 TLB holds, or has a fill pending for, always
//! has its bit set (every L1 fill goes through [`L1Filter::note`], and a rebuild re-adds every key
//! held). Bits of keys since evicted or invalidated stay set until the next rebuild, which runs when
//! the notes since the last one reach a quarter of the bits: a false positive only costs the search
//! the filter saves, so the simulation is the same with or without it.

use super::tlb::Tlb;

/// Filter bits per L1 TLB entry of the GPU (a power of two is taken at or above the product).
const BITS_PER_ENTRY: usize = 16;

#[derive(Debug, Clone)]
pub struct L1Filter {
    bits: Vec<u64>,
    /// `64 - log2(bits)`: a key's bit is the top bits of its multiplicative hash.
    shift: u32,
    /// Keys noted since the last rebuild; a rebuild comes when they reach `limit`.
    noted: usize,
    limit: usize,
}

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

impl L1Filter {
    /// A filter for L1 TLBs of `entries` entries in all.
    pub fn new(entries: usize) -> L1Filter {
        let n = (entries.max(1) * BITS_PER_ENTRY).next_power_of_two().max(64);
        L1Filter { bits: vec![0; n / 64], shift: 64 - n.trailing_zeros(), noted: 0, limit: n / 4 }
    }

    #[inline(always)]
    fn bit(&self, key: u64) -> (usize, u64) {
        let h = (key.wrapping_mul(MUL) >> self.shift) as usize;
        (h / 64, 1 << (h % 64))
    }

    /// May some L1 TLB hold `key`? (False: none holds it, nor has a fill of it pending.)
    #[inline]
    pub fn may_hold(&self, key: u64) -> bool {
        let (w, b) = self.bit(key);
        self.bits[w] & b != 0
    }

    /// `key` is being filled into an L1 TLB of `l1s`; the filter is rebuilt from their contents
    /// first when it has taken its share of notes since the last rebuild.
    #[inline]
    pub fn note(&mut self, key: u64, l1s: &[Tlb]) {
        if self.noted >= self.limit {
            self.rebuild(l1s);
        }
        self.noted += 1;
        let (w, b) = self.bit(key);
        self.bits[w] |= b;
    }

    /// Forget the keys no L1 TLB holds any more: only those of `l1s` (held or pending) stay.
    #[cold]
    fn rebuild(&mut self, l1s: &[Tlb]) {
        self.bits.fill(0);
        self.noted = 0;
        for k in l1s.iter().flat_map(|t| t.keys()) {
            let (w, b) = self.bit(k);
            self.bits[w] |= b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against the TLBs themselves, through fills, evictions, invalidations and rebuilds: a key
        /// any L1 TLB holds is never reported absent.
        #[test]
        fn a_key_held_is_never_reported_absent(ops in proptest::collection::vec((0u8..3, 0usize..3, 0u64..200), 1..2000)) {
            // Three 4-entry TLBs (12 entries: a 256-bit filter, rebuilt every 64 notes).
            let mut l1s: Vec<Tlb> = (0..3).map(|_| Tlb::with(4, 4, 1, 4)).collect();
            let mut f = L1Filter::new(12);
            for (i, &(op, t, key)) in ops.iter().enumerate() {
                match op {
                    0 | 1 => {
                        f.note(key, &l1s);
                        l1s[t].fill_prefetch(key, key << 12, i as u64);
                    }
                    _ => {
                        l1s[t].invalidate(key);
                    }
                }
                for tlb in &l1s {
                    for k in tlb.keys() {
                        prop_assert!(f.may_hold(k), "key {} held but reported absent after op {}", k, i);
                    }
                }
            }
        }
    }

    #[test]
    fn a_rebuild_forgets_keys_no_longer_held() {
        let mut l1s = vec![Tlb::with(4, 4, 1, 4)];
        let mut f = L1Filter::new(4);
        assert_eq!(f.limit, 16, "64 bits, rebuilt after 16 notes");
        for k in 0..16u64 {
            f.note(k, &l1s);
            l1s[0].fill_prefetch(k, 0, 0);
        }
        // The TLB keeps its last four keys; every key noted is still reported until the rebuild.
        assert!((0..16).all(|k| f.may_hold(k)));
        f.note(100, &l1s);
        l1s[0].fill_prefetch(100, 0, 0);
        let held: Vec<u64> = l1s[0].keys().collect();
        assert_eq!(held.len(), 4);
        assert!(held.iter().all(|&k| f.may_hold(k)));
        let forgotten = (0..16).filter(|&k| !held.contains(&k) && !f.may_hold(k)).count();
        assert!(forgotten >= 8, "most evicted keys leave the filter at the rebuild ({forgotten} of 12)");
    }
}
