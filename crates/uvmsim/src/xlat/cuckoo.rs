//! Cuckoo filter (Fan et al., CoNEXT 2014): approximate set membership with
//! deletion, as seed multi-gpu uses it for Least-TLB's local TLB tracker
//! (§3.2, one filter of 2048 entries partitioned by GPU, target false-positive
//! rate 0.2), Trans-FW's pending request table (§4.2.2, 125 buckets x 4
//! fingerprints per GMMU) and its host forwarding table (1000 buckets x 2
//! fingerprints, key VPN‖owner GPU).
//!
//! How it works: a key hashes (`mix64(key ^ seed)`) to a primary bucket and a
//! `fingerprint_bits`-bit fingerprint (never 0: 0 marks an empty slot). Partial-key
//! cuckoo hashing gives the alternate bucket from the bucket and the
//! fingerprint alone, `alt(i, fp) = i ^ h(fp)` when the bucket count is a
//! power of two (Fan et al.); for other counts (the seed's 125 and 1000) it is
//! `(h(fp) - i) mod n`, also an involution, so `alt(alt(i)) = i` either way.
//! Insert puts the fingerprint in a free slot of either bucket; if both are
//! full it evicts a slot's fingerprint (chosen by a hash of the seed, the key
//! and the kick number, so runs are deterministic) and moves it to that
//! fingerprint's other bucket, up to `max_kicks` times. If that fails the
//! filter is full: the kicks are undone and insert returns `false`, so a full
//! filter never loses a stored fingerprint (no false negatives, ever).
//! Lookup checks both buckets; delete removes one copy of the fingerprint
//! from either. Deleting a key that was never inserted may remove another
//! key's identical fingerprint (as in the hardware); callers delete only
//! what they inserted.
//!
//! False positives: a query for an absent key matches one of the `2b` slots
//! of its two buckets with probability about `2 b α / (2^f - 1)` at load
//! factor α (`b` = bucket size, `f` = fingerprint bits).
//!
//! The seed gives no fingerprint width. The default, 6 bits, is the smallest
//! `f` whose full-load bound `2b / (2^f - 1)` (8/63 = 0.127 for b = 4) meets
//! Least-TLB's target false-positive rate 0.2; 5 bits would give 0.26 at full
//! load (Fan et al. §4: `f >= log2(2b/ε)`).

use crate::sim::mix64;

/// Shape of one cuckoo filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuckooParams {
    /// Buckets (any count >= 1).
    pub buckets: usize,
    /// Fingerprints per bucket (1..=8); Fan et al. and Least-TLB / the PRT use 4, the forwarding table 2.
    pub bucket_size: usize,
    /// Bits per fingerprint (1..=16). Default 6 (see the module doc).
    pub fingerprint_bits: u32,
    /// Evictions an insert may make before the filter counts as full (Fan et al.'s reference code: 500).
    pub max_kicks: u32,
    /// Hash seed (`sim.seed` or a derived value).
    pub seed: u64,
}

/// Default fingerprint width: see the module doc.
pub const DEFAULT_FINGERPRINT_BITS: u32 = 6;

impl CuckooParams {
    /// A filter of `entries` fingerprints in buckets of `bucket_size` (rounded up to whole buckets).
    pub fn with_entries(entries: usize, bucket_size: usize, seed: u64) -> CuckooParams {
        CuckooParams {
            buckets: entries.div_ceil(bucket_size).max(1),
            bucket_size,
            fingerprint_bits: DEFAULT_FINGERPRINT_BITS,
            max_kicks: 500,
            seed,
        }
    }
}

#[derive(Debug, Clone)]
pub struct CuckooFilter {
    p: CuckooParams,
    /// `buckets * bucket_size` slots; 0 = empty.
    slots: Vec<u16>,
    len: usize,
}

impl CuckooFilter {
    pub fn new(p: CuckooParams) -> CuckooFilter {
        assert!(p.buckets >= 1, "a cuckoo filter needs at least one bucket");
        assert!((1..=8).contains(&p.bucket_size), "bucket_size must be 1..=8, got {}", p.bucket_size);
        assert!((1..=16).contains(&p.fingerprint_bits), "fingerprint_bits must be 1..=16, got {}", p.fingerprint_bits);
        CuckooFilter { slots: vec![0; p.buckets * p.bucket_size], len: 0, p }
    }

    pub fn params(&self) -> &CuckooParams {
        &self.p
    }

    /// Fingerprints stored.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots in all.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The design false-positive rate at the current load: each of the `2 b α`
    /// occupied slots an absent key is compared with matches with probability
    /// `1 / (2^f - 1)`, so `1 - (1 - 1/(2^f - 1))^(2 b α)` (about `2 b α / 2^f`).
    pub fn design_fp_rate(&self) -> f64 {
        let alpha = self.len as f64 / self.capacity() as f64;
        let miss = 1.0 - 1.0 / ((1u64 << self.p.fingerprint_bits) - 1) as f64;
        1.0 - miss.powf(2.0 * self.p.bucket_size as f64 * alpha)
    }

    /// (primary bucket, fingerprint) of a key.
    fn locate(&self, key: u64) -> (usize, u16) {
        let h = mix64(key ^ self.p.seed);
        let n = self.p.buckets as u64;
        // Multiply-high maps the low half onto the buckets, the high half onto 1..2^f.
        let i = ((h & 0xFFFF_FFFF) * n) >> 32;
        let fps = (1u64 << self.p.fingerprint_bits) - 1;
        let fp = 1 + (((h >> 32) * fps) >> 32);
        (i as usize, fp as u16)
    }

    /// The other bucket of fingerprint `fp` stored in bucket `i`.
    fn alt(&self, i: usize, fp: u16) -> usize {
        let n = self.p.buckets;
        let h = mix64(fp as u64 ^ self.p.seed.rotate_left(17) ^ 0xC0C0_F11E) as usize;
        if n.is_power_of_two() {
            i ^ (h & (n - 1))
        } else {
            (h % n + n - i) % n
        }
    }

    fn bucket(&self, i: usize) -> &[u16] {
        let b = self.p.bucket_size;
        &self.slots[i * b..(i + 1) * b]
    }

    /// Put `fp` in a free slot of bucket `i`.
    fn place(&mut self, i: usize, fp: u16) -> bool {
        let b = self.p.bucket_size;
        match self.slots[i * b..(i + 1) * b].iter_mut().find(|s| **s == 0) {
            Some(s) => {
                *s = fp;
                true
            }
            None => false,
        }
    }

    /// Insert a key; `false` (and the filter unchanged) when it is full.
    pub fn insert(&mut self, key: u64) -> bool {
        let (i1, fp) = self.locate(key);
        let i2 = self.alt(i1, fp);
        if self.place(i1, fp) || self.place(i2, fp) {
            self.len += 1;
            return true;
        }
        // Every slot taken: no kick can free one (the same `false` as 500 kicks and their undo, at no cost).
        if self.len == self.slots.len() {
            return false;
        }
        // Both full: kick. Remember each displacement to undo it if we fail.
        let b = self.p.bucket_size;
        let mut path: Vec<usize> = Vec::with_capacity(16);
        let r = mix64(key ^ self.p.seed ^ 0x4B1C_4B1C);
        let mut i = if r & 1 == 0 { i1 } else { i2 };
        let mut fp = fp;
        for kick in 0..self.p.max_kicks {
            let slot = i * b + (mix64(r ^ kick as u64) % b as u64) as usize;
            std::mem::swap(&mut fp, &mut self.slots[slot]);
            path.push(slot);
            i = self.alt(i, fp);
            if self.place(i, fp) {
                self.len += 1;
                return true;
            }
        }
        // Full: put every displaced fingerprint back where it was.
        for &slot in path.iter().rev() {
            std::mem::swap(&mut fp, &mut self.slots[slot]);
        }
        false
    }

    /// Whether the key may be in the set (never false for an inserted key).
    pub fn contains(&self, key: u64) -> bool {
        let (i1, fp) = self.locate(key);
        let i2 = self.alt(i1, fp);
        self.bucket(i1).contains(&fp) || self.bucket(i2).contains(&fp)
    }

    /// Remove one copy of the key's fingerprint; `false` if neither bucket holds it.
    pub fn delete(&mut self, key: u64) -> bool {
        let (i1, fp) = self.locate(key);
        let b = self.p.bucket_size;
        for i in [i1, self.alt(i1, fp)] {
            if let Some(s) = self.slots[i * b..(i + 1) * b].iter_mut().find(|s| **s == fp) {
                *s = 0;
                self.len -= 1;
                return true;
            }
        }
        false
    }

    pub fn clear(&mut self) {
        self.slots.fill(0);
        self.len = 0;
    }
}

/// One filter split evenly into per-GPU partitions (Least-TLB's local TLB
/// tracker: "divided equally according to the number of GPUs"): a GPU's
/// entries go to its own partition, and a lookup tests every partition and
/// says which may hold the key.
#[derive(Debug, Clone)]
pub struct PartitionedCuckoo {
    parts: Vec<CuckooFilter>,
}

impl PartitionedCuckoo {
    /// `entries` fingerprints in all, split over `partitions` (at most 64) filters of equal size.
    pub fn new(entries: usize, partitions: usize, bucket_size: usize, fingerprint_bits: u32, seed: u64) -> PartitionedCuckoo {
        assert!((1..=64).contains(&partitions), "partitions must be 1..=64, got {partitions}");
        let mut p = CuckooParams::with_entries(entries / partitions, bucket_size, seed);
        p.fingerprint_bits = fingerprint_bits;
        PartitionedCuckoo { parts: (0..partitions).map(|_| CuckooFilter::new(p)).collect() }
    }

    pub fn partition(&self, part: usize) -> &CuckooFilter {
        &self.parts[part]
    }

    pub fn insert(&mut self, part: usize, key: u64) -> bool {
        self.parts[part].insert(key)
    }

    pub fn delete(&mut self, part: usize, key: u64) -> bool {
        self.parts[part].delete(key)
    }

    /// Bit `g` set: partition `g` may hold the key.
    pub fn lookup(&self, key: u64) -> u64 {
        self.parts.iter().enumerate().filter(|(_, f)| f.contains(key)).fold(0, |m, (g, _)| m | 1 << g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn filter(buckets: usize, bucket_size: usize, bits: u32) -> CuckooFilter {
        CuckooFilter::new(CuckooParams { buckets, bucket_size, fingerprint_bits: bits, max_kicks: 500, seed: 7 })
    }

    #[test]
    fn alternate_bucket_is_an_involution() {
        for n in [1usize, 2, 125, 128, 1000] {
            let f = filter(n, 4, 6);
            for i in 0..n {
                for fp in 1..64u16 {
                    let a = f.alt(i, fp);
                    assert!(a < n);
                    assert_eq!(f.alt(a, fp), i, "n {n} i {i} fp {fp}");
                }
            }
        }
    }

    proptest! {
        // Random insert / delete sequences against a HashSet: every key the
        // reference holds is found (no false negatives), and the count matches.
        #[test]
        fn no_false_negatives(ops in prop::collection::vec((any::<bool>(), 0u64..400), 1..2000), pow2 in any::<bool>()) {
            let mut f = filter(if pow2 { 64 } else { 61 }, 4, 8);
            let mut set = HashSet::new();
            for (ins, k) in ops {
                if ins && !set.contains(&k) {
                    if f.insert(k) { set.insert(k); }
                } else if !ins && set.remove(&k) {
                    prop_assert!(f.delete(k));
                }
                prop_assert_eq!(f.len(), set.len());
            }
            for k in &set {
                prop_assert!(f.contains(*k));
            }
        }
    }

    /// Fill to `load` of capacity with keys 0.., then query 100k absent keys.
    fn measured_fp(bits: u32, bucket_size: usize, load: f64) -> (f64, f64) {
        let mut f = filter(512, bucket_size, bits);
        let n = (f.capacity() as f64 * load) as u64;
        for k in 0..n {
            assert!(f.insert(k), "insert {k} of {n} failed");
        }
        let q = 100_000u64;
        let hits = (0..q).filter(|i| f.contains((1 << 40) + i)).count();
        (hits as f64 / q as f64, f.design_fp_rate())
    }

    #[test]
    fn false_positive_rate_is_near_the_design_value() {
        // Tolerance: within 15% of 2bα/(2^f-1) (100k queries: the binomial
        // standard error is at most 4% of the rate for every case here).
        for (bits, b, load) in [(6, 4, 0.9), (8, 4, 0.9), (6, 2, 0.8), (10, 4, 0.9)] {
            let (got, want) = measured_fp(bits, b, load);
            assert!((got - want).abs() <= 0.15 * want, "bits {bits} b {b} load {load}: measured {got:.4}, design {want:.4}");
        }
        // The default width at full-ish load meets Least-TLB's 0.2 target.
        let (got, _) = measured_fp(DEFAULT_FINGERPRINT_BITS, 4, 0.95);
        assert!(got < 0.2, "{got}");
    }

    #[test]
    fn delete_removes_a_present_key_only() {
        let mut f = filter(64, 4, 12);
        assert!(f.insert(42) && f.insert(43));
        assert!(f.contains(42));
        assert!(f.delete(42));
        assert!(!f.contains(42), "12-bit fingerprints: 42 gone (43 does not collide with this seed)");
        assert!(f.contains(43));
        assert!(!f.delete(42));
        assert_eq!(f.len(), 1);
        // A key inserted twice needs two deletes.
        assert!(f.insert(43));
        assert!(f.delete(43) && f.contains(43) && f.delete(43) && !f.contains(43));
    }

    /// Offering many keys fills every slot; then an insert is refused and changes nothing.
    #[test]
    fn filter_with_every_slot_taken_refuses() {
        let mut f = filter(4, 2, 16);
        for k in 0..10_000 {
            f.insert(k);
        }
        assert_eq!(f.len, f.slots.len(), "10,000 offers fill all 8 slots");
        let before = f.slots.clone();
        assert!(!f.insert(123_456));
        assert_eq!((f.len, &f.slots), (8, &before));
    }

    /// A filter full for a key (its kicks ran out) refuses it and undoes every displacement.
    #[test]
    fn full_filter_rejects_and_keeps_what_it_holds() {
        // Four kicks an insert: the first refusal comes with slots still free, so the kicks are
        // made and undone. (With 500 kicks, 4 x 2 slots took 8 keys: every slot taken, refused
        // before any kick, and an insert that lost a displaced key passed.)
        let mut f = CuckooFilter::new(CuckooParams { buckets: 16, bucket_size: 2, fingerprint_bits: 16, max_kicks: 4, seed: 7 });
        let mut held = vec![];
        let mut k = 0;
        while f.insert(k) {
            held.push(k);
            k += 1;
            assert!(k < 100, "32 slots cannot take 100 keys");
        }
        assert!(held.len() < f.capacity() && held.len() >= 16, "{} of {} slots", held.len(), f.capacity());
        assert!(held.iter().all(|&h| f.contains(h)), "the refused insert's kicks were undone");
        let before = f.slots.clone();
        // Failing again leaves every slot as it was: nothing stored is lost.
        assert!(!f.insert(k));
        assert_eq!(f.slots, before);
        assert!(held.iter().all(|&h| f.contains(h)));
        // Deleting one frees its slot (other slots were free already): it goes back in.
        assert!(f.delete(held[0]));
        assert_eq!(f.len(), held.len() - 1);
        assert!(f.insert(held[0]));
        assert_eq!(f.len(), held.len());
    }

    #[test]
    fn a_large_filter_fills_to_a_high_load() {
        // Fan et al.: b = 4 reaches ~95% occupancy before the first failure.
        let mut f = filter(1024, 4, 12);
        let mut k = 0;
        while f.insert(k) {
            k += 1;
        }
        let load = f.len() as f64 / f.capacity() as f64;
        assert!(load > 0.9, "first failure at load {load}");
    }

    #[test]
    fn partitions_report_which_gpus_may_hold_a_key() {
        // Least-TLB's tracker: 2048 entries over 4 GPUs.
        let mut t = PartitionedCuckoo::new(2048, 4, 4, 12, 3);
        assert_eq!(t.partition(0).capacity(), 512);
        assert!(t.insert(1, 0xABC) && t.insert(3, 0xABC) && t.insert(2, 0x123));
        assert_eq!(t.lookup(0xABC), 0b1010);
        assert_eq!(t.lookup(0x123), 0b0100);
        assert!(t.delete(3, 0xABC));
        assert_eq!(t.lookup(0xABC), 0b0010);
        assert_eq!(t.lookup(0x999), 0);
    }

    /// The design rate at a known load: 2 fingerprints of 2 bits in one bucket of 4 (α = 1/2). An
    /// absent key meets 2bα = 4 stored slots, each matching with probability 1/3 (fingerprints are
    /// 1..=3, never 0): 1 - (2/3)^4 = 65/81.
    #[test]
    fn design_false_positive_rate_at_half_load() {
        let mut f = filter(1, 4, 2);
        assert_eq!(f.design_fp_rate(), 0.0);
        assert!(f.insert(1) && f.insert(2));
        assert!((f.design_fp_rate() - 65.0 / 81.0).abs() < 1e-12, "{}", f.design_fp_rate());
    }

    /// An insert whose primary bucket is full takes a free slot of its alternate bucket and moves
    /// nothing; it kicks only when both are full. Two buckets of one slot: b shares a's primary
    /// bucket, and a kick of b's would start there (its hash's choice), moving a.
    #[test]
    fn a_full_primary_bucket_sends_the_insert_to_the_alternate_without_a_kick() {
        let mut f = filter(2, 1, 16);
        let (a, b) = (0..1000u64)
            .flat_map(|a| (a + 1..1000).map(move |b| (a, b)))
            .find(|&(a, b)| {
                let ((ia, fa), (ib, fb)) = (f.locate(a), f.locate(b));
                ia == ib && fa != fb && f.alt(ia, fa) != ia && f.alt(ib, fb) != ib && mix64(b ^ 7 ^ 0x4B1C_4B1C) & 1 == 0
            })
            .expect("such keys among the first thousand");
        let ((i, fa), (_, fb)) = (f.locate(a), f.locate(b));
        assert!(f.insert(a) && f.insert(b));
        assert_eq!((f.bucket(i), f.bucket(1 - i)), (&[fa][..], &[fb][..]));
    }
}
