//! Prefetchers: which non-faulted pages migrate with a batch's faults.
//!
//! How it works: every policy is a pure function over page bitmaps or page
//! ranges, called by the driver's batch loop ([`super::Uvm::service`]); the
//! driver then migrates the chosen pages with their VA block, makes them
//! resident at the end of the batch and counts them (`uvm.prefetch.*`).
//! Two families:
//!
//! - **Per VA block** (the UVM driver and UVMSmart): `density` (the driver's
//!   density tree, spec/uvm-driver.md "Prefetcher"), `sequential-local` (the
//!   aligned 64 KiB around each faulted page) and `random-4k` (one random page
//!   of the faulted page's block per faulted page). They see one 2 MiB block:
//!   its resident pages and its faulted pages, and never cross it.
//! - **Per batch** (seed paged-memory §4.1, Zheng's demand-prioritised
//!   transfer set): the batch's unique demand faults come first; if they are
//!   fewer than `transfer_set_pages`, the set is filled with candidates of
//!   `random` (uniform over the managed allocations), `sequential` (lowest
//!   non-resident page first) or `locality` (the `window_pages` pages after the
//!   last faulting page, then sequential) or `oracle` (the order in which a
//!   first, demand-only run of the same workload faulted its pages: the world
//!   runs that pass first). Resident and already chosen pages are skipped.
//!
//! Bitmaps: [`PageMask`] holds one bit per 4 KiB page of a 2 MiB block (512).

use crate::sim::mix64;
use serde::{Deserialize, Serialize};

/// One bit per 4 KiB page of a 2 MiB VA block.
pub type PageMask = [u64; 8];

/// Pages of a full VA block.
pub const PAGES: usize = 512;
/// Pages of a 64 KiB big page.
const BIG: usize = 16;

#[inline]
pub fn get(m: &PageMask, i: usize) -> bool {
    m[i / 64] >> (i % 64) & 1 == 1
}

#[inline]
pub fn set(m: &mut PageMask, i: usize) {
    m[i / 64] |= 1 << (i % 64);
}

#[inline]
pub fn clear(m: &mut PageMask, i: usize) {
    m[i / 64] &= !(1 << (i % 64));
}

/// Set pages `start..end`.
pub fn set_range(m: &mut PageMask, start: usize, end: usize) {
    for i in start..end {
        set(m, i);
    }
}

/// Set bits among pages `start..end` (end <= 512).
pub fn count_range(m: &PageMask, start: usize, end: usize) -> usize {
    let mut n = 0;
    let mut i = start;
    while i < end {
        let (w, b) = (i / 64, i % 64);
        let span = (64 - b).min(end - i);
        let bits = if span == 64 { m[w] } else { (m[w] >> b) & ((1u64 << span) - 1) };
        n += bits.count_ones() as usize;
        i += span;
    }
    n
}

pub fn count(m: &PageMask) -> usize {
    m.iter().map(|w| w.count_ones() as usize).sum()
}

/// The pages set in `m`, in order.
pub fn pages(m: &PageMask) -> impl Iterator<Item = usize> + '_ {
    (0..8).flat_map(move |w| {
        let mut bits = m[w];
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                w * 64 + b
            })
        })
    })
}

/// Clear every page at or beyond `n` (the end of a partial block).
fn clamp(m: &mut PageMask, n: usize) {
    for (w, word) in m.iter_mut().enumerate() {
        let lo = w * 64;
        if lo >= n {
            *word = 0;
        } else if n - lo < 64 {
            *word &= (1u64 << (n - lo)) - 1;
        }
    }
}

/// Which pages migrate with the faults (`uvm.prefetch.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PrefetchPolicy {
    /// Demand paging only: faulted pages migrate, nothing else.
    #[default]
    None,
    /// The UVM driver's density tree (uvm_perf_prefetch.c; spec/uvm-driver.md), the driver's default.
    Density,
    /// Zheng's transfer set filled with random pages of the managed allocations (seed paged-memory §4.2).
    Random,
    /// Zheng's transfer set filled lowest non-resident page first (seed paged-memory §4.2).
    Sequential,
    /// Zheng's transfer set filled from the window after the last faulting page, then sequentially (seed paged-memory §4.2).
    Locality,
    /// Zheng's transfer set filled in the order pages were first faulted in a first, demand-only run of the same workload (seed paged-memory §4.2).
    Oracle,
    /// UVMSmart's sequential-local prefetcher: each faulted page brings its aligned 64 KiB (Ganguly et al., ISCA 2019).
    SequentialLocal,
    /// UVMSmart's random prefetcher: one random page of the faulted page's 2 MiB block per faulted page (Ganguly et al., ISCA 2019).
    #[serde(rename = "random-4k")]
    Random4k,
}

leaf!(PrefetchPolicy);

impl PrefetchPolicy {
    /// Zheng's per-batch transfer-set policies (the others work per VA block).
    pub fn per_batch(self) -> bool {
        matches!(self, PrefetchPolicy::Random | PrefetchPolicy::Sequential | PrefetchPolicy::Locality | PrefetchPolicy::Oracle)
    }
}

/// What the prefetcher does once GPU memory is full (`uvm.prefetch.when_full`; seed paged-memory §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WhenFull {
    /// Go on with `policy`.
    #[default]
    Keep,
    /// Stop prefetching: on-demand migration only (§5.1).
    Stop,
    /// Zheng's continued prefetch (§5.2): the pages not on the GPU among the
    /// `window_pages` after the last faulting page, without the sequential fill.
    Locality,
}

leaf!(WhenFull);

section! {
    /// Prefetching: which pages migrate with a batch's faults (spec/uvm-driver.md "Prefetcher"; seed paged-memory §4).
    pub struct PrefetchConfig {
        /// "none" (demand paging), "density" (the driver's tree; the driver enables it by default), Zheng's transfer-set policies "random", "sequential", "locality", "oracle" (a first pass, demand paging only, records the first-touch order; it stops once every managed page has faulted), or UVMSmart's "sequential-local" (64 KiB) and "random-4k". The UVM driver's fault path only (translation.mode = "gmmu", one GPU): refused in "iommu" mode (faults go to the page-request path; iommu.ppr.pages_log2 sets what one request maps) and by the multi-GPU model, neither of which reads it.
        pub policy: PrefetchPolicy = PrefetchPolicy::None,
        /// density: a subtree is prefetched when popcount * 100 > size * threshold, 1-100 (uvm_perf_prefetch_threshold, default 51).
        pub threshold: u32 = 51,
        /// density: faulted pages a VA block needs in a batch before the tree runs, 1-20 (uvm_perf_prefetch_min_faults, default 1; its use as a per-block, per-batch count is an ASSUMPTION).
        pub min_faults: u32 = 1,
        /// density: treat the GPU as the preferred location of managed memory (cudaMemAdvise SetPreferredLocation): a block resident nowhere (not host-initialised, never evicted) is then prefetched whole (spec/uvm-driver.md). Default false: no preferred location, as without hints, and the rule never applies.
        pub gpu_preferred: bool = false,
        /// random, sequential, locality, oracle: pages per transfer set, demand faults first (seed paged-memory §4.1: 80 = 16 GB/s x 20 µs / 4 KiB).
        pub transfer_set_pages: u32 = 80,
        /// locality: pages after the last faulting page it takes candidates from (seed paged-memory §4.2: 128).
        pub window_pages: u32 = 128,
        /// Once GPU memory is full (the first time a migration needs an eviction or fills the last free page; it stays so):
        /// "keep" (go on with policy), "stop" (on-demand only; seed paged-memory §5.1) or "locality" (the window_pages after
        /// the last faulting page, no sequential fill; §5.2 "continued prefetch"). Zheng's warm-up is policy = "oracle" with
        /// "stop" or "locality" (§5: "execute the application using the oracular prefetcher until GPU memory is at capacity").
        pub when_full: WhenFull = WhenFull::Keep,
        /// Polled model, transfer sets, once GPU memory is full: a set's prefetches fill only what the link will have
        /// free, transfer_set_pages minus the larger of the interval's demand pages and the pages still queued on the
        /// link (its busier direction, at bandwidth_gbps). Seed paged-memory §4: the set is "the number of in-flight
        /// pages on the PCIe bus required to maximize bandwidth", prefetches join it "only as a last resort", not
        /// "throttling on-demand page fetches"; §5.2: continued prefetch does not attempt "to maximize PCIe bandwidth".
        /// Until memory is full the sets fit the link; once full, each page copied in first evicts one over the same
        /// copy engines, and a set sized by the demand pages alone queued its prefetches ahead of later demand pages
        /// (docs/validation.md, zheng-eviction). false: the demand pages only (the earlier rule).
        pub full_link_room: bool = true,
        /// Polled model, transfer sets: the demand pages that reach the handler in an interval go out with the
        /// interval's set, at its end (seed paged-memory §4.1: the runtime "constructs an 80-page transfer set that
        /// it batch-submits at the end of the interval", and prefetch selection "is on the critical path for fault
        /// handling latency"). false: each demand page goes out as soon as its fault latency has run, and only the
        /// prefetches wait for the interval's end (the model before 2026-11-23). Not applied while no set is built
        /// (policy none, density, or when_full = "stop" once memory is full).
        pub demand_waits_for_set: bool = true,
    }
}

impl PrefetchConfig {
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(1..=100).contains(&self.threshold) {
            return Err(("uvm.prefetch.threshold".into(), format!("must be between 1 and 100, got {}", self.threshold)));
        }
        if !(1..=20).contains(&self.min_faults) {
            return Err(("uvm.prefetch.min_faults".into(), format!("must be between 1 and 20, got {}", self.min_faults)));
        }
        if self.transfer_set_pages > 1 << 20 {
            return Err(("uvm.prefetch.transfer_set_pages".into(), format!("must be at most 1048576, got {}", self.transfer_set_pages)));
        }
        if self.window_pages > 1 << 20 {
            return Err(("uvm.prefetch.window_pages".into(), format!("must be at most 1048576, got {}", self.window_pages)));
        }
        Ok(())
    }
}

/// The driver's density prefetcher for one VA block of `n` pages (512, fewer
/// at the end of an allocation), exactly as spec/uvm-driver.md describes it:
/// the bitmap is the resident pages plus the faulted pages, every aligned
/// 64 KiB region holding a faulted page counting as fully populated; for each
/// faulted page, walk its subtrees from the leaf to the root (sizes 1, 2, 4,
/// ..., 512 pages, clamped to the block) and take the largest whose
/// `popcount * 100 > size * threshold`; the result is the union of those
/// subtrees, clamped to the block, minus the faulted pages (resident pages
/// may be in it: they do not migrate).
pub fn density(resident: &PageMask, faulted: &PageMask, n: usize, threshold: u32) -> PageMask {
    let n = n.min(PAGES);
    let mut faulted = *faulted;
    clamp(&mut faulted, n);
    let faulted = &faulted;
    let mut pop = [0u64; 8];
    for w in 0..8 {
        pop[w] = resident[w] | faulted[w];
    }
    // 64 KiB big-page growth: regions of 16 pages (a quarter of a word each).
    for r in 0..PAGES / BIG {
        let (w, shift) = (r * BIG / 64, (r * BIG) % 64);
        if (faulted[w] >> shift) & 0xFFFF != 0 {
            pop[w] |= 0xFFFF << shift;
        }
    }
    clamp(&mut pop, n);
    let mut out = [0u64; 8];
    // Faulted pages of one 64 KiB region share every subtree of 16 pages and
    // up, and the subtrees below lie inside the (full) region: they choose the
    // same region, so one page per region suffices.
    let mut done = 0u32;
    for p in pages(faulted) {
        let region = p / BIG;
        if done >> region & 1 == 1 {
            continue;
        }
        done |= 1 << region;
        let mut best = None;
        for level in 0..=9 {
            let size = 1usize << level;
            let start = p & !(size - 1);
            let end = (start + size).min(n);
            if count_range(&pop, start, end) * 100 > (end - start) * threshold as usize {
                best = Some((start, end));
            }
        }
        if let Some((s, e)) = best {
            set_range(&mut out, s, e);
        }
    }
    for w in 0..8 {
        out[w] &= !faulted[w];
    }
    clamp(&mut out, n);
    out
}

/// UVMSmart's sequential-local prefetcher: the aligned 64 KiB region of each
/// faulted page, clamped to the block's `n` pages, minus the faulted pages.
pub fn sequential_local(faulted: &PageMask, n: usize) -> PageMask {
    let mut out = [0u64; 8];
    for p in pages(faulted).filter(|&p| p < n) {
        let s = p & !(BIG - 1);
        set_range(&mut out, s, (s + BIG).min(n));
    }
    for w in 0..8 {
        out[w] &= !faulted[w];
    }
    clamp(&mut out, n);
    out
}

/// UVMSmart-style random prefetcher: for each faulted page, one page drawn
/// uniformly from the block's `n` pages that is neither resident, faulted nor
/// already chosen (a few draws; none if they all hit such pages). `key`
/// seeds the draws (deterministic per block and batch).
pub fn random_4k(resident: &PageMask, faulted: &PageMask, n: usize, key: u64) -> PageMask {
    let mut out = [0u64; 8];
    let mut draw = 0u64;
    for _ in pages(faulted).filter(|&p| p < n) {
        for _ in 0..8 {
            draw += 1;
            let i = (mix64(key ^ draw.wrapping_mul(0x9E37_79B9)) % n as u64) as usize;
            if !get(resident, i) && !get(faulted, i) && !get(&out, i) {
                set(&mut out, i);
                break;
            }
        }
    }
    out
}

/// Zheng's sequential candidates: up to `want` pages of the allocations
/// `ranges` (sorted, disjoint `first..end` page ranges), in VA order from
/// `from`, that `taken` rejects not (resident, demanded, chosen). Returns the
/// pages and where the scan stopped: every page between `from` and it was
/// taken or chosen.
pub fn sequential(ranges: &[(u64, u64)], from: u64, want: usize, mut taken: impl FnMut(u64) -> bool) -> (Vec<u64>, u64) {
    let mut out = Vec::with_capacity(want);
    let mut at = from;
    for &(first, end) in ranges {
        if end <= at {
            continue;
        }
        at = at.max(first);
        while at < end {
            if out.len() == want {
                return (out, at);
            }
            if !taken(at) {
                out.push(at);
            }
            at += 1;
        }
    }
    (out, at)
}

/// Zheng's oracle candidates: up to `want` pages of `order` from position
/// `from` on that `taken` rejects not. Returns them and the position after
/// the last page of `order` it looked at.
pub fn oracle(order: &[u64], from: usize, want: usize, mut taken: impl FnMut(u64) -> bool) -> (Vec<u64>, usize) {
    let mut out = Vec::with_capacity(want);
    let mut at = from;
    while at < order.len() && out.len() < want {
        if !taken(order[at]) {
            out.push(order[at]);
        }
        at += 1;
    }
    (out, at)
}

/// Zheng's locality candidates: up to `want` pages among the `window` pages
/// after `last` inside its allocation that `taken` rejects not.
pub fn locality(ranges: &[(u64, u64)], last: u64, window: u64, want: usize, mut taken: impl FnMut(u64) -> bool) -> Vec<u64> {
    let end = ranges.iter().find(|&&(f, e)| f <= last && last < e).map_or(last + 1, |&(_, e)| e);
    (last + 1..(last + 1 + window).min(end)).filter(|&p| !taken(p)).take(want).collect()
}

/// Zheng's random candidates: up to `want` pages drawn uniformly from the
/// allocations `ranges` that `taken` rejects not (at most 8 draws per page
/// wanted). `key` seeds the draws.
pub fn random(ranges: &[(u64, u64)], want: usize, key: u64, mut taken: impl FnMut(u64) -> bool) -> Vec<u64> {
    let total: u64 = ranges.iter().map(|&(f, e)| e - f).sum();
    let mut out: Vec<u64> = Vec::with_capacity(want);
    if total == 0 {
        return out;
    }
    for d in 0..8 * want as u64 {
        if out.len() == want {
            break;
        }
        let mut k = mix64(key ^ d.wrapping_mul(0xD1B5_4A32_D192_ED03)) % total;
        let page = ranges
            .iter()
            .find_map(|&(f, e)| {
                if k < e - f {
                    Some(f + k)
                } else {
                    k -= e - f;
                    None
                }
            })
            .expect("k < total");
        if !taken(page) && !out.contains(&page) {
            out.push(page);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mask(pages: &[usize]) -> PageMask {
        let mut m = [0; 8];
        for &p in pages {
            set(&mut m, p);
        }
        m
    }

    fn list(m: &PageMask) -> Vec<usize> {
        pages(m).collect()
    }

    #[test]
    fn one_fault_brings_its_64k() {
        let got = density(&[0; 8], &mask(&[37]), 512, 51);
        assert_eq!(list(&got), (32..48).filter(|&p| p != 37).collect::<Vec<_>>());
    }

    #[test]
    fn threshold_1_pulls_the_whole_block_on_one_fault() {
        // The 16 grown pages are 16/512 = 3.1% > 1% of the root.
        let got = density(&[0; 8], &mask(&[300]), 512, 1);
        assert_eq!(count(&got), 511);
        assert!(!get(&got, 300));
    }

    #[test]
    fn threshold_100_never_prefetches() {
        // popcount * 100 > size * 100 never holds.
        assert_eq!(density(&mask(&(0..511).collect::<Vec<_>>()), &mask(&[511]), 512, 100), [0; 8]);
    }

    #[test]
    fn the_growth_sequence_to_a_full_block() {
        // Faults in distinct 64 KiB regions, each batch after the previous is resident.
        // Region 0: 16 of 32 pages in the 128 KiB subtree, 16 * 100 > 32 * 51 fails: only 64 KiB.
        let mut resident = [0; 8];
        let step = |fault: usize, resident: &mut PageMask| {
            let f = mask(&[fault]);
            let got = density(resident, &f, 512, 51);
            for w in 0..8 {
                resident[w] |= got[w] | f[w];
            }
            count(resident)
        };
        assert_eq!(step(0, &mut resident), 16);
        // Region 1 (pages 16..32): the 128 KiB subtree 0..32 is full (32 > 16.3): 32 pages.
        assert_eq!(step(16, &mut resident), 32);
        // Region 2 (32..48): subtree 0..64 holds 48 of 64 (4800 > 3264): all 64.
        assert_eq!(step(32, &mut resident), 64);
        // Region 4 (64..80): 0..128 holds 80 of 128 (8000 > 6528): all 128.
        assert_eq!(step(64, &mut resident), 128);
        // Region 8 (128..144): 0..256 holds 144 of 256 (14400 > 13056): all 256.
        assert_eq!(step(128, &mut resident), 256);
        // Region 16 (256..272): 0..512 holds 272 of 512 (27200 > 26112): the whole block.
        assert_eq!(step(256, &mut resident), 512);
    }

    /// Faults a block takes when its pages are touched in order and each batch
    /// holds the next `k` non-resident pages (all of them faulted before the
    /// driver sees any): the batch's prefetch then becomes resident.
    fn sequential_faults(k: usize) -> (usize, usize) {
        let (mut resident, mut faults, mut batches) = ([0u64; 8], 0, 0);
        while count(&resident) < PAGES {
            let f = mask(&(0..PAGES).filter(|&p| !get(&resident, p)).take(k).collect::<Vec<_>>());
            let got = density(&resident, &f, PAGES, 51);
            for w in 0..8 {
                resident[w] |= got[w] | f[w];
            }
            faults += count(&f);
            batches += 1;
        }
        (faults, batches)
    }

    #[test]
    fn coverage_of_an_in_order_block_falls_with_the_faults_per_batch() {
        // Why stream's coverage depends on how many of a block's pages fault per batch:
        // whole 64 KiB regions already faulted gain nothing from the growth, and the
        // tree doubles the resident prefix only once it holds > 51% of the next subtree.
        // k = 16: 0..16, 16..32 (32 of 64 fails), 32..48 -> 0..64, 64..80 -> 0..128,
        // 128..144 -> 0..256, 256..272 -> the block: 6 batches, 96 faults (81.25% fewer).
        assert_eq!(sequential_faults(16), (96, 6));
        // k = 64: 0..64 (64 of 128 fails), 64..128 (128 of 256 fails), 128..192 -> 0..256,
        // 256..320 -> the block: 4 batches, 256 faults (50% fewer).
        assert_eq!(sequential_faults(64), (256, 4));
        // k = 1: each fault brings its 64 KiB; the same doubling: 6 faults (98.8% fewer).
        assert_eq!(sequential_faults(1), (6, 6));
    }

    #[test]
    fn the_largest_qualifying_subtree_wins_even_above_a_failing_level() {
        // Pages 64..192 resident (128), fault at 0: subtree 0..64 has 16 (fails),
        // 0..128 has 16 + 64 = 80 of 128 (qualifies), 0..256 has 16 + 128 = 144 of 256 (qualifies).
        let res = mask(&(64..192).collect::<Vec<_>>());
        let got = density(&res, &mask(&[0]), 512, 51);
        assert_eq!(list(&got), (1..256).collect::<Vec<_>>(), "the union holds resident pages; they do not migrate");
    }

    #[test]
    fn nothing_crosses_the_end_of_a_partial_block() {
        // A block of 40 pages (the end of an allocation): the fault at 39 grows to 32..40 only.
        let got = density(&[0; 8], &mask(&[39]), 40, 1);
        assert!(list(&got).iter().all(|&p| p < 40));
        assert_eq!(count(&got), 39, "threshold 1: the whole 40-page block minus the fault");
        let sl = sequential_local(&mask(&[39]), 40);
        assert_eq!(list(&sl), (32..39).collect::<Vec<_>>());
    }

    #[test]
    fn sequential_local_brings_the_aligned_64k_of_each_fault() {
        let got = sequential_local(&mask(&[5, 6, 100]), 512);
        let mut want: Vec<usize> = (0..16).filter(|&p| p != 5 && p != 6).collect();
        want.extend((96..112).filter(|&p| p != 100));
        assert_eq!(list(&got), want);
    }

    #[test]
    fn random_4k_takes_one_free_page_per_fault_in_the_block() {
        let res = mask(&(0..256).collect::<Vec<_>>());
        let got = random_4k(&res, &mask(&[300, 301, 302]), 512, 7);
        assert_eq!(count(&got), 3);
        assert!(list(&got).iter().all(|&p| (256..512).contains(&p) && !(300..303).contains(&p)));
        assert_eq!(got, random_4k(&res, &mask(&[300, 301, 302]), 512, 7), "deterministic");
        // Each fault brings a page of its own: 8 faults, 8 distinct pages. A draw that hits a page already
        // chosen is drawn again (key 30 has one); with 504 free pages none of these keys misses 8 times in a row.
        for key in 0..64 {
            assert_eq!(count(&random_4k(&[0; 8], &mask(&(0..8).collect::<Vec<_>>()), 512, key)), 8, "key {key}");
        }
    }

    #[test]
    fn zheng_sequential_takes_the_lowest_free_pages_across_allocations() {
        let ranges = [(100, 104), (200, 210)];
        let taken = |p: u64| p == 101 || p == 200;
        let (got, at) = sequential(&ranges, 0, 4, taken);
        assert_eq!(got, vec![100, 102, 103, 201]);
        assert_eq!(at, 202, "the scan stops after the last page it took");
        let (rest, at) = sequential(&ranges, at, 100, taken);
        assert_eq!((rest.len(), at), (8, 210));
    }

    #[test]
    fn zheng_oracle_follows_the_recorded_order() {
        let order = [50, 10, 11, 900, 12, 13];
        let (got, at) = oracle(&order, 0, 3, |p| p == 10);
        assert_eq!((got, at), (vec![50, 11, 900], 4));
        assert_eq!(oracle(&order, at, 5, |_| false), (vec![12, 13], 6));
    }

    #[test]
    fn zheng_locality_takes_the_window_after_the_last_fault() {
        let ranges = [(0, 1000)];
        let got = locality(&ranges, 10, 128, 5, |p| p == 12);
        assert_eq!(got, vec![11, 13, 14, 15, 16]);
        // The window stops at the allocation's end.
        assert_eq!(locality(&ranges, 997, 128, 80, |_| false), vec![998, 999]);
    }

    #[test]
    fn zheng_random_draws_free_pages_of_the_allocations() {
        let ranges = [(0, 64), (1000, 1064)];
        let got = random(&ranges, 20, 3, |p| p % 2 == 0);
        assert_eq!(got.len(), 20);
        assert!(got.iter().all(|&p| p % 2 == 1 && (p < 64 || (1000..1064).contains(&p))));
        let mut d = got.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), 20, "no page twice");
    }

    /// The density tree built literally: counts per node of a 10-level binary
    /// tree over 512 leaves (leaves past `n` count as absent, node sizes clamped).
    fn density_reference(resident: &[bool], faulted: &[bool], n: usize, threshold: u32) -> Vec<bool> {
        let mut populated: Vec<bool> = (0..512).map(|i| i < n && (resident[i] || faulted[i])).collect();
        for r in 0..32 {
            if (r * 16..r * 16 + 16).any(|i| i < n && faulted[i]) {
                for p in populated.iter_mut().take((r * 16 + 16).min(n)).skip(r * 16) {
                    *p = true;
                }
            }
        }
        // levels[l][k]: populated leaves under node k of level l (node size 2^l).
        let mut levels: Vec<Vec<usize>> = vec![populated.iter().map(|&b| b as usize).collect()];
        for l in 1..=9 {
            let below = &levels[l - 1];
            levels.push((0..512 >> l).map(|k| below[2 * k] + below[2 * k + 1]).collect());
        }
        let mut out = vec![false; 512];
        for p in (0..n).filter(|&p| faulted[p]) {
            let mut chosen = None;
            for (l, counts) in levels.iter().enumerate() {
                let k = p >> l;
                let (start, end) = (k << l, ((k + 1) << l).min(n));
                if counts[k] * 100 > (end - start) * threshold as usize {
                    chosen = Some((start, end));
                }
            }
            if let Some((s, e)) = chosen {
                out[s..e].iter_mut().for_each(|x| *x = true);
            }
        }
        (0..512).map(|i| out[i] && !faulted[i] && i < n).collect()
    }

    proptest! {
        #[test]
        fn density_agrees_with_the_literal_tree(
            res in proptest::collection::vec(any::<bool>(), 512),
            density_pct in 0u32..100,
            faults in proptest::collection::vec(0usize..512, 1..40),
            n in prop_oneof![Just(512usize), 1usize..512],
            threshold in 1u32..=100,
        ) {
            // Sparse or dense residency, a few faulted pages (not resident).
            let resident: Vec<bool> = res.iter().enumerate().map(|(i, &b)| b && (i as u32 * 37 % 100) < density_pct).collect();
            let mut faulted = vec![false; 512];
            for f in faults { if !resident[f] { faulted[f] = true; } }
            let to_mask = |v: &[bool]| { let mut m = [0u64; 8]; for (i, &b) in v.iter().enumerate() { if b { set(&mut m, i); } } m };
            let got = density(&to_mask(&resident), &to_mask(&faulted), n, threshold);
            let want = density_reference(&resident, &faulted, n, threshold);
            prop_assert_eq!(got, to_mask(&want));
        }
    }
}
