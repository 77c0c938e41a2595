//! The driver's view of every page of a multi-GPU system: where it lives,
//! which GPUs hold a copy or a valid PTE, which touched it, and the
//! per-GPU remote-access counters of access-counter migration.

use crate::sim::Ps;
use rustc_hash::FxHashMap;

/// Owner of a page that no GPU holds yet (it is in host memory).
pub const HOST: u8 = u8::MAX;

/// State of one 4 KiB page; GPU sets are bit masks (bit g = GPU g, at most 32 GPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// GPU whose memory holds the master copy, or [`HOST`].
    pub owner: u8,
    /// GPUs whose memory holds a copy (the owner, plus read replicas).
    pub copies: u32,
    /// GPUs with a valid PTE for the page (local or remote mapping), as the driver set them.
    pub mapped: u32,
    /// GPUs with a far fault on the page being serviced.
    pub pending: u32,
    /// GPUs that ever accessed the page (the sharing histogram).
    pub touched: u32,
    /// IDYLL's access bits in the host PTE (bit `g % ACCESS_BITS` for GPU g): set by a far
    /// fault, cleared by an invalidation; aliased GPUs share a bit.
    pub access: u16,
    /// The page's data is where `owner`/`copies` say from this time on (a migration in flight ends then).
    pub ready: Ps,
    /// The driver works on one page at a time (the VA-block lock): the last operation
    /// that moved the page ends at this time (its answer delivered), and the next
    /// one sends its invalidations only then, so the GPU that got the page uses it first.
    pub busy: Ps,
    /// GPUs whose mapping an invalidation on its way will end (a [`Stale`] window each).
    pub stale: u32,
}

impl Default for Page {
    fn default() -> Page {
        Page { owner: HOST, copies: 0, mapped: 0, pending: 0, touched: 0, access: 0, ready: 0, busy: 0, stale: 0 }
    }
}

/// Unused host-PTE bits 52-62 that IDYLL uses as access bits (seed multi-gpu §5.2.2: m = 11).
pub const ACCESS_BITS: usize = 11;

/// The access bit of GPU `g` (h(g) = g mod 11, bit 52 + h(g) of the PTE; here bit h(g)).
#[inline]
pub fn access_bit(g: usize) -> u16 {
    1 << (g % ACCESS_BITS)
}

/// The access bits of a set of GPUs.
pub fn access_bits(gpus: u32) -> u16 {
    (0..32).filter(|g| gpus >> g & 1 == 1).fold(0, |a, g| a | access_bit(g))
}

/// A GPU's mapping of a page that moved (or lost its other copies) while the GPU held it:
/// until the invalidation request reaches the GPU, its TLBs and PTE still name the old frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale {
    /// The request arrives (TLB shootdown, PTE invalidated) at this time.
    pub until: Ps,
    /// The GPU whose memory the mapping names (the GPU itself for a copy of its own).
    pub at: u8,
    /// A read replica's mapping (read-only): a write through it faults.
    pub read_only: bool,
}

/// Every page any GPU touched (memory grows with the touched footprint), and access counters.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    pages: FxHashMap<u64, Page>,
    /// Remote accesses per (page, GPU), key `vpn << 5 | gpu`, since the page last moved.
    counters: FxHashMap<u64, u32>,
    /// Stale mappings per (page, GPU), key `vpn << 5 | gpu`; `Page::stale` says which exist.
    stale: FxHashMap<u64, Stale>,
}

impl Directory {
    #[inline]
    pub fn page(&mut self, vpn: u64) -> &mut Page {
        self.pages.entry(vpn).or_default()
    }

    pub fn get(&self, vpn: u64) -> Option<&Page> {
        self.pages.get(&vpn)
    }

    /// GPU `g`'s mapping of `vpn` stays in use until `s.until`.
    pub fn open_stale(&mut self, vpn: u64, g: usize, s: Stale) {
        self.page(vpn).stale |= 1 << g;
        self.stale.insert(vpn << 5 | g as u64, s);
    }

    /// GPU `g`'s stale mapping of `vpn`, if it has one.
    #[inline]
    pub fn stale(&self, vpn: u64, g: usize) -> Option<Stale> {
        self.stale.get(&(vpn << 5 | g as u64)).copied()
    }

    /// GPU `g`'s stale mapping of `vpn` ends at `t` if its window is over by then (the request
    /// that ends it arrived, or the GPU mapped the page anew: `t` = [`Ps::MAX`]).
    pub fn close_stale(&mut self, vpn: u64, g: usize, t: Ps) {
        let p = self.page(vpn);
        if p.stale >> g & 1 == 1 {
            let k = vpn << 5 | g as u64;
            if self.stale.get(&k).is_some_and(|s| s.until <= t) {
                self.stale.remove(&k);
                self.page(vpn).stale &= !(1 << g);
            }
        }
    }

    /// Count one remote access of GPU `g` to `vpn`; true when this one reaches `threshold` (the counter restarts).
    pub fn count_remote(&mut self, vpn: u64, g: usize, threshold: u32) -> bool {
        let c = self.counters.entry(vpn << 5 | g as u64).or_insert(0);
        *c += 1;
        if *c >= threshold {
            *c = 0;
            return true;
        }
        false
    }

    /// The page moved: every GPU's count starts again.
    pub fn reset_counters(&mut self, vpn: u64, gpus: usize) {
        for g in 0..gpus {
            self.counters.remove(&(vpn << 5 | g as u64));
        }
    }

    /// Pages touched by exactly k GPUs, for k = 1..=gpus (index k - 1).
    pub fn sharing(&self, gpus: usize) -> Vec<u64> {
        let mut h = vec![0u64; gpus];
        for p in self.pages.values() {
            let k = p.touched.count_ones() as usize;
            if k > 0 {
                h[k.min(gpus) - 1] += 1;
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_fires_exactly_at_the_threshold_and_restarts() {
        let mut d = Directory::default();
        for i in 1..256 {
            assert!(!d.count_remote(7, 2, 256), "access {i}");
        }
        assert!(d.count_remote(7, 2, 256));
        // Another GPU's count of the same page is its own.
        assert!(!d.count_remote(7, 1, 256));
        // Restarted: 255 more do not fire, the 256th does.
        for _ in 1..256 {
            assert!(!d.count_remote(7, 2, 256));
        }
        assert!(d.count_remote(7, 2, 256));
        // GPU 1 counted one access above, GPUs 0 and 3 count one here: a reset clears every GPU's
        // count, the first's and the last's too, so none of them reaches a threshold of 2 with one more.
        assert!(!d.count_remote(7, 0, 2) && !d.count_remote(7, 3, 2));
        d.reset_counters(7, 4);
        assert!(!d.count_remote(7, 0, 2) && !d.count_remote(7, 1, 2) && !d.count_remote(7, 3, 2), "reset clears every GPU's count");
    }

    #[test]
    fn sharing_histogram() {
        let mut d = Directory::default();
        d.page(1).touched = 0b0001;
        d.page(2).touched = 0b0011;
        d.page(3).touched = 0b1111;
        d.page(4).touched = 0b0100;
        d.page(5); // never touched
        assert_eq!(d.sharing(4), vec![2, 1, 0, 1]);
    }

    #[test]
    fn access_bits_fold_gpus_eleven_apart_onto_one_bit() {
        // GPU g's bit is g mod 11: GPUs 0, 11 and 22 share bit 0; GPU 31 has bit 9 (31 = 2 x 11 + 9).
        assert_eq!(access_bits(1 | 1 << 11 | 1 << 22), 1);
        assert_eq!(access_bits(1 << 31), 1 << 9);
        assert_eq!(access_bits(1 << 10 | 1 << 31), 1 << 10 | 1 << 9);
    }
}
