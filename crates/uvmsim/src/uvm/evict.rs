//! GPU memory for managed data: 2 MiB root chunks, one per VA block with
//! GPU-resident pages, and the choice of a victim when none is left.
//!
//! How it works: [`Chunks`] holds the VA blocks that own a chunk, ordered for
//! the policy. The driver's batch loop asks for a chunk when a block gets its
//! first GPU-resident page; when the capacity is used up it takes
//! [`Chunks::victim`] (never a block of the batch in service: pinned), evicts
//! it and retries. Policies (`uvm.eviction.policy`):
//!
//! - `driver`: the PMM's root-chunk lists (spec/uvm-driver.md "Eviction"):
//!   a free chunk, then UNUSED (blocks with no resident page), DISCARDED, then
//!   the head of USED, ordered by start of residency; accesses do not reorder
//!   it (close to FIFO). In this model a block owns a chunk exactly while it
//!   has resident pages (nothing but eviction removes pages, and the model
//!   does not discard), so UNUSED and DISCARDED stay empty and `driver`
//!   evicts the block that became resident first.
//! - `lru`: least recently *serviced* block first: a block moves to the tail
//!   whenever a batch services a fault in it (seed uvm-driver §2.3.2 describes
//!   the driver's list this way: "updated when a fault is handled from a
//!   VABlock"; GPU accesses that do not fault are invisible to the driver).
//! - `random`: a uniformly drawn block (seed paged-memory §5.1).
//! - `lfu`: fewest batches that serviced the block, oldest first among equals.
//!
//! With `uvm.eviction.granularity = "page"` (seed paged-memory §5: Zheng
//! evicts 4 KiB pages) GPU memory is counted in 4 KiB pages instead and
//! [`Pages`] orders the resident pages: `lru` by the last time the GPU walked
//! to the page (a TLB miss that reaches the GMMU: the accessed bit a walk
//! sets is all the memory system sees of a page; TLB hits stay invisible, as
//! they do to a real GMMU), or its migration if never walked since; `random`
//! uniformly; `driver` in migration order (FIFO). `lfu` has no page form.

use crate::sim::mix64;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Which VA block loses its chunk when GPU memory is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum EvictionPolicy {
    /// The driver's root-chunk lists (spec/uvm-driver.md): a block with no resident page left (UNUSED: the host
    /// took its pages back), then the block resident longest (USED). DISCARDED (cudaMemDiscard) is not modelled.
    #[default]
    Driver,
    /// Least recently serviced block (the list updated on each fault, seed uvm-driver §2.3.2).
    Lru,
    /// A random block (seed paged-memory §5.1).
    Random,
    /// Least frequently serviced block.
    Lfu,
}

leaf!(EvictionPolicy, EvictionGranularity, WriteBack);

/// What one eviction takes away (`uvm.eviction.granularity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum EvictionGranularity {
    /// A whole 2 MiB VA block and its root chunk (the UVM driver, spec/uvm-driver.md).
    #[default]
    Block,
    /// One 4 KiB page (seed paged-memory §5); GPU memory is counted in pages.
    Page,
}

/// Which evicted pages are copied back to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WriteBack {
    /// Every resident page (the UVM driver keeps no dirty state: spec/uvm-driver.md) but read-only duplicates, which the host holds too.
    #[default]
    All,
    /// Only the pages the GPU stored to since they arrived; a clean page's host copy is still valid.
    Dirty,
}

section! {
    /// Eviction when managed data exceeds GPU memory (uvm.gpu_memory_bytes or uvm.oversubscription): a whole 2 MiB VA block
    /// goes, every resident page of it copied back to the host (the driver's behaviour, spec/uvm-driver.md; or only the
    /// dirty ones, write_back), the GPU mappings of those pages dropped (pages of the block mapped remotely, in host memory, keep theirs) and the block's TLB entries shot down. The fixed-latency and polled cost models charge only the copy.
    pub struct EvictionConfig {
        /// "driver" (root-chunk lists: a block with no resident page left, else the block resident longest), "lru" (least recently serviced), "random" or "lfu" (least often serviced).
        pub policy: EvictionPolicy = EvictionPolicy::Driver,
        /// Cost of evicting one VA block besides copying its pages back (lock, unmap the GPU, TLB invalidate, membar, free the chunk), in µs. ASSUMPTION, to be calibrated (seed uvm-driver §5.2: "the same components as a device-to-host fault").
        pub evict_us: f64 = 10.0,
        /// "block" (a 2 MiB VA block and its chunk, the driver) or "page" (one 4 KiB page, GPU memory counted in pages; seed
        /// paged-memory §5 evicts pages). With "page", lru orders pages by their last use (`lru_recency`), random draws a page,
        /// driver evicts the page migrated first; lfu is block-only. Evicted pages are copied back in one transfer per serviced
        /// block and their translations shot down; the driver cost model charges evict_us once per such group. The
        /// allocator still hands memory out in root chunks (pma_alloc_us per pma_chunk_blocks x 512 pages): a run that
        /// evicts nothing and fills its blocks' pages is the same with either granularity (before 2026-11-30 "page"
        /// made no allocator call).
        pub granularity: EvictionGranularity = EvictionGranularity::Block,
        /// Which evicted pages go back over the link: "all" (the driver: it keeps no dirty state) or "dirty" (only pages
        /// the GPU stored to since they arrived; a clean page's host copy is still valid). Seed paged-memory leaves
        /// eviction write-back unspecified (spec/seed-digests.md §2 "Gaps"). A host fault's migration back copies all.
        pub write_back: WriteBack = WriteBack::All,
        /// What page-granular LRU counts as a use: "access" (every GPU access to the page, TLB hits included: the true
        /// LRU of seed paged-memory §5.1, "While true LRU implementations are typically too expensive to implement, it
        /// provides a commonly recognized upper bound") or "walk" (only GMMU walks, i.e. TLB misses: a hot page whose
        /// translation stays in a TLB looks cold; the model before 2026-11-23). Only with granularity "page" and policy "lru".
        pub lru_recency: LruRecency = LruRecency::Access,
        /// When an evicted page's memory can take the page that replaces it: false (the default), once its copy back to
        /// the host has landed (the UVM driver: a root chunk is reused after its pages are copied out, spec/uvm-driver.md
        /// "Eviction"; the fetch waits for the write-back) or true, as soon as the copy back starts (UVMSmart's GPGPU-Sim
        /// model, gmmu_t::cycle: a page is invalidated and its frame freed when its write-back is taken from the PCIe write
        /// stage queue, and the read stage, a separate queue, fills free frames meanwhile; the two directions overlap).
        /// The write-back still occupies the device-to-host direction either way. Seed paged-memory does not say
        /// (spec/seed-digests.md §2 "Gaps"). Single-GPU driver only.
        pub overlap_write_back: bool = false,
    }
}

/// What page-granular LRU eviction counts as a use of a page (`uvm.eviction.lru_recency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LruRecency {
    /// Every GPU access (true LRU).
    #[default]
    Access,
    /// Only page-table walks (TLB misses).
    Walk,
}

leaf!(LruRecency);

impl EvictionConfig {
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.granularity == EvictionGranularity::Page && self.policy == EvictionPolicy::Lfu {
            return Err((
                "uvm.eviction.policy".into(),
                "\"lfu\" counts serviced batches per VA block and has no page form; use \"lru\", \"random\" or \"driver\" with granularity \"page\"".into(),
            ));
        }
        Ok(())
    }
}

/// GPU-resident pages in eviction order (`granularity = "page"`).
///
/// LRU is kept lazily: a page's key is its stamp when it was (re)inserted;
/// [`Residency`](crate::xlat::space::Residency) stamps every walk to a resident
/// page from the same clock, and the victim search re-inserts a page whose
/// stamp moved on. Exact: an entry's key never exceeds its page's current
/// stamp, so the first entry whose key is current has the oldest stamp.
#[derive(Debug, Clone)]
pub struct Pages {
    policy: EvictionPolicy,
    order: BTreeSet<(u64, u64)>,
    keys: FxHashMap<u64, u64>,
    list: Vec<u64>,
    pos: FxHashMap<u64, usize>,
    draws: u64,
    seed: u64,
}

impl Pages {
    pub fn new(policy: EvictionPolicy, seed: u64) -> Pages {
        Pages {
            policy,
            order: BTreeSet::new(),
            keys: FxHashMap::default(),
            list: vec![],
            pos: FxHashMap::default(),
            draws: 0,
            seed: mix64(seed ^ 0x7061_6765_7669),
        }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn contains(&self, vpn: u64) -> bool {
        self.keys.contains_key(&vpn)
    }

    /// `vpn` takes a page of GPU memory, stamped `stamp` (its migration).
    pub fn insert(&mut self, vpn: u64, stamp: u64) {
        if let Some(old) = self.keys.insert(vpn, stamp) {
            self.order.remove(&(old, vpn));
        } else {
            self.pos.insert(vpn, self.list.len());
            self.list.push(vpn);
        }
        self.order.insert((stamp, vpn));
    }

    /// `vpn` left GPU memory other than by eviction (e.g. the host took it back).
    pub fn remove(&mut self, vpn: u64) {
        if let Some(k) = self.keys.remove(&vpn) {
            self.order.remove(&(k, vpn));
        }
        if let Some(i) = self.pos.remove(&vpn) {
            self.list.swap_remove(i);
            if let Some(&moved) = self.list.get(i) {
                self.pos.insert(moved, i);
            }
        }
    }

    /// Choose a victim that `pinned` does not hold and remove it; `stamp` is a
    /// page's current recency stamp (lru). None if every page is pinned.
    pub fn victim(&mut self, pinned: impl Fn(u64) -> bool, stamp: impl Fn(u64) -> u64) -> Option<u64> {
        let v = match self.policy {
            EvictionPolicy::Random => {
                let n = self.list.len();
                if n == 0 {
                    return None;
                }
                self.draws += 1;
                let start = (mix64(self.seed ^ self.draws) % n as u64) as usize;
                (0..n).map(|i| self.list[(start + i) % n]).find(|&p| !pinned(p))?
            }
            EvictionPolicy::Lru => {
                let mut skipped = vec![];
                let mut found = None;
                while let Some(&(key, p)) = self.order.first() {
                    let now = stamp(p).max(key);
                    if now > key {
                        // Walked since its key was set: move it to where it belongs.
                        self.order.pop_first();
                        self.order.insert((now, p));
                        self.keys.insert(p, now);
                    } else if pinned(p) {
                        self.order.pop_first();
                        skipped.push((key, p));
                    } else {
                        found = Some(p);
                        break;
                    }
                }
                self.order.extend(skipped);
                found?
            }
            _ => self.order.iter().map(|&(_, p)| p).find(|&p| !pinned(p))?,
        };
        self.remove(v);
        Some(v)
    }
}

/// The primary key of an UNUSED block under the driver's lists: before every USED one (whose key is its
/// sequence number, from 1).
const UNUSED: u64 = 0;

/// The VA blocks owning a GPU chunk, in eviction order.
#[derive(Debug, Clone)]
pub struct Chunks {
    policy: EvictionPolicy,
    /// (primary, secondary, block): the first unpinned entry is the victim.
    order: BTreeSet<(u64, u64, u64)>,
    keys: FxHashMap<u64, (u64, u64)>,
    /// Every owner, for random draws (swap-removed).
    list: Vec<u64>,
    pos: FxHashMap<u64, usize>,
    seq: u64,
    seed: u64,
}

impl Chunks {
    pub fn new(policy: EvictionPolicy, seed: u64) -> Chunks {
        Chunks {
            policy,
            order: BTreeSet::new(),
            keys: FxHashMap::default(),
            list: vec![],
            pos: FxHashMap::default(),
            seq: 0,
            seed: mix64(seed ^ 0x0065_7669_6374),
        }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn owns(&self, block: u64) -> bool {
        self.keys.contains_key(&block)
    }

    /// `block` took a chunk (its first page becomes resident in this batch).
    pub fn insert(&mut self, block: u64) {
        self.seq += 1;
        let key = match self.policy {
            EvictionPolicy::Lfu => (1, self.seq),
            _ => (self.seq, 0),
        };
        self.set(block, key);
        self.pos.insert(block, self.list.len());
        self.list.push(block);
    }

    /// A batch serviced faults in `block`, which owns a chunk. Under the driver's lists an UNUSED block
    /// that becomes resident again goes to the tail of USED (spec/uvm-driver.md "Eviction").
    pub fn serviced(&mut self, block: u64) {
        self.seq += 1;
        let Some(&old) = self.keys.get(&block) else { return };
        let key = match self.policy {
            EvictionPolicy::Lru => (self.seq, 0),
            EvictionPolicy::Lfu => (old.0 + 1, self.seq),
            EvictionPolicy::Driver if old.0 == UNUSED => (self.seq, 0),
            EvictionPolicy::Driver | EvictionPolicy::Random => return,
        };
        self.set(block, key);
    }

    /// `block` keeps its chunk but has no resident page left (the host took them back): under the driver's
    /// lists it moves to UNUSED, which is evicted before USED (nothing to copy back; spec/uvm-driver.md:
    /// "Victim order: a free root chunk; the head of UNUSED (blocks with no resident pages); DISCARDED; then
    /// the head of USED"). Other policies keep their order.
    pub fn unused(&mut self, block: u64) {
        if self.policy != EvictionPolicy::Driver || !self.keys.contains_key(&block) {
            return;
        }
        self.seq += 1;
        self.set(block, (UNUSED, self.seq));
    }

    fn set(&mut self, block: u64, key: (u64, u64)) {
        if let Some(old) = self.keys.insert(block, key) {
            self.order.remove(&(old.0, old.1, block));
        }
        self.order.insert((key.0, key.1, block));
    }

    /// Choose a victim that `pinned` does not hold and remove it; None if every owner is pinned.
    pub fn victim(&mut self, pinned: impl Fn(u64) -> bool) -> Option<u64> {
        let v = match self.policy {
            EvictionPolicy::Random => {
                let n = self.list.len();
                if n == 0 {
                    return None;
                }
                self.seq += 1;
                let start = (mix64(self.seed ^ self.seq) % n as u64) as usize;
                (0..n).map(|i| self.list[(start + i) % n]).find(|&b| !pinned(b))?
            }
            _ => self.order.iter().map(|&(_, _, b)| b).find(|&b| !pinned(b))?,
        };
        self.remove(v);
        Some(v)
    }

    fn remove(&mut self, block: u64) {
        if let Some(k) = self.keys.remove(&block) {
            self.order.remove(&(k.0, k.1, block));
        }
        if let Some(i) = self.pos.remove(&block) {
            self.list.swap_remove(i);
            if let Some(&moved) = self.list.get(i) {
                self.pos.insert(moved, i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(policy: EvictionPolicy) -> Chunks {
        let mut c = Chunks::new(policy, 1);
        for b in [10, 11, 12, 13] {
            c.insert(b);
        }
        c
    }

    #[test]
    fn driver_evicts_the_block_resident_longest_whatever_is_serviced() {
        let mut c = filled(EvictionPolicy::Driver);
        c.serviced(10);
        assert_eq!(c.victim(|_| false), Some(10), "servicing does not reorder USED");
        assert_eq!(c.victim(|b| b == 11), Some(12), "a pinned block is skipped");
        assert_eq!((c.len(), c.owns(10), c.owns(11)), (2, false, true));
    }

    #[test]
    fn driver_evicts_unused_blocks_first_and_a_resident_again_one_goes_to_the_tail_of_used() {
        let mut c = filled(EvictionPolicy::Driver);
        // 12 then 11 lose their last resident page (the host took them back): UNUSED, in that order.
        c.unused(12);
        c.unused(11);
        // 11 becomes resident again: the tail of USED (after 13).
        c.serviced(11);
        assert_eq!(c.victim(|_| false), Some(12), "UNUSED before USED");
        assert_eq!(c.victim(|_| false), Some(10), "then USED from its head");
        assert_eq!(c.victim(|_| false), Some(13));
        assert_eq!(c.victim(|_| false), Some(11));
        // Other policies keep their own order.
        let mut l = filled(EvictionPolicy::Lru);
        l.unused(12);
        assert_eq!(l.victim(|_| false), Some(10));
    }

    #[test]
    fn lru_evicts_the_least_recently_serviced_block() {
        let mut c = filled(EvictionPolicy::Lru);
        c.serviced(10);
        c.serviced(12);
        assert_eq!(c.victim(|_| false), Some(11));
        assert_eq!(c.victim(|_| false), Some(13));
        assert_eq!(c.victim(|_| false), Some(10));
    }

    #[test]
    fn lfu_evicts_the_least_often_serviced_block_oldest_first() {
        let mut c = filled(EvictionPolicy::Lfu);
        for b in [10, 10, 11, 13] {
            c.serviced(b);
        }
        assert_eq!(c.victim(|_| false), Some(12), "serviced once (its insertion)");
        assert_eq!(c.victim(|_| false), Some(11), "twice, older than 13");
        assert_eq!(c.victim(|_| false), Some(13));
    }

    #[test]
    fn random_is_deterministic_skips_pinned_and_empties() {
        let mut a = filled(EvictionPolicy::Random);
        let mut b = filled(EvictionPolicy::Random);
        let va: Vec<_> = (0..4).map(|_| a.victim(|x| x == 13)).collect();
        let vb: Vec<_> = (0..4).map(|_| b.victim(|x| x == 13)).collect();
        assert_eq!(va, vb);
        let mut got: Vec<u64> = va.iter().flatten().copied().collect();
        got.sort_unstable();
        assert_eq!((got, va[3]), (vec![10, 11, 12], None), "only the pinned block is left");
        assert!(a.owns(13) && a.len() == 1);
    }

    /// Pages stamped by a shared clock, as the residency does.
    struct Clocked {
        pages: Pages,
        clock: u64,
        last: FxHashMap<u64, u64>,
    }

    impl Clocked {
        fn new(policy: EvictionPolicy) -> Clocked {
            Clocked { pages: Pages::new(policy, 7), clock: 0, last: FxHashMap::default() }
        }
        fn insert(&mut self, p: u64) {
            self.clock += 1;
            self.last.insert(p, self.clock);
            self.pages.insert(p, self.clock);
        }
        fn walk(&mut self, p: u64) {
            if self.pages.contains(p) {
                self.clock += 1;
                self.last.insert(p, self.clock);
            }
        }
        fn victim(&mut self, pinned: &[u64]) -> Option<u64> {
            let last = &self.last;
            let v = self.pages.victim(|p| pinned.contains(&p), |p| last.get(&p).copied().unwrap_or(0));
            if let Some(v) = v {
                self.last.remove(&v);
            }
            v
        }
    }

    #[test]
    fn page_lru_evicts_the_page_walked_least_recently() {
        let mut c = Clocked::new(EvictionPolicy::Lru);
        for p in [100, 101, 102, 103] {
            c.insert(p);
        }
        c.walk(100);
        c.walk(102);
        c.walk(100);
        assert_eq!(c.victim(&[]), Some(101));
        assert_eq!(c.victim(&[103]), Some(102), "103 is older but pinned");
        assert_eq!(c.victim(&[]), Some(103), "a skipped pinned page keeps its place");
        assert_eq!(c.victim(&[100]), None, "only a pinned page is left");
        assert_eq!((c.pages.len(), c.pages.contains(100)), (1, true));
    }

    #[test]
    fn page_fifo_ignores_walks_and_random_skips_pinned_deterministically() {
        let mut c = Clocked::new(EvictionPolicy::Driver);
        for p in [5, 6, 7] {
            c.insert(p);
        }
        c.walk(5);
        assert_eq!(c.victim(&[]), Some(5), "driver: migrated first");
        let draw = |pinned: &[u64]| {
            let mut c = Clocked::new(EvictionPolicy::Random);
            for p in 0..64 {
                c.insert(p);
            }
            (0..64).map(|_| c.victim(pinned)).collect::<Vec<_>>()
        };
        let a = draw(&[9]);
        assert_eq!(a, draw(&[9]), "same seed, same draws");
        assert_ne!(a[..8], (0..8).map(Some).collect::<Vec<_>>()[..], "not in insertion order");
        let mut got: Vec<u64> = a.iter().flatten().copied().collect();
        got.sort_unstable();
        assert_eq!((got, a[63]), ((0..64).filter(|&p| p != 9).collect(), None));
    }

    #[test]
    fn a_page_migrated_again_takes_its_new_place_in_fifo_order() {
        let mut p = Pages::new(EvictionPolicy::Driver, 1);
        p.insert(5, 1);
        p.insert(6, 2);
        // 5 comes back (stamp 3): it is now the newest, and held once.
        p.insert(5, 3);
        assert_eq!(p.len(), 2);
        assert_eq!(p.victim(|_| false, |_| 0), Some(6));
        assert_eq!(p.victim(|_| false, |_| 0), Some(5));
        assert_eq!((p.victim(|_| false, |_| 0), p.len()), (None, 0));
    }

    #[test]
    fn page_granularity_rejects_lfu_naming_the_key() {
        let c = EvictionConfig { policy: EvictionPolicy::Lfu, granularity: EvictionGranularity::Page, ..EvictionConfig::default() };
        assert_eq!(c.validate().unwrap_err().0, "uvm.eviction.policy");
        assert!(EvictionConfig { policy: EvictionPolicy::Lfu, ..EvictionConfig::default() }.validate().is_ok());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64),
        Walk(u64),
        Remove(u64),
        Victim(Vec<u64>),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..24).prop_map(Op::Insert),
            (0u64..24).prop_map(Op::Walk),
            (0u64..24).prop_map(Op::Remove),
            proptest::collection::vec(0u64..24, 0..4).prop_map(Op::Victim),
        ]
    }

    proptest::proptest! {
        /// The lazy page LRU chooses what a plain list in recency order chooses
        /// (front = least recent; an insert or a walk moves a page to the back).
        #[test]
        fn page_lru_matches_a_reference_list(ops in proptest::collection::vec(op(), 0..200)) {
            let mut c = Clocked::new(EvictionPolicy::Lru);
            let mut list: Vec<u64> = vec![];
            for op in ops {
                match op {
                    Op::Insert(p) if !list.contains(&p) => {
                        c.insert(p);
                        list.push(p);
                    }
                    Op::Insert(_) => {}
                    Op::Walk(p) => {
                        c.walk(p);
                        if let Some(i) = list.iter().position(|&x| x == p) {
                            list.remove(i);
                            list.push(p);
                        }
                    }
                    Op::Remove(p) => {
                        c.pages.remove(p);
                        c.last.remove(&p);
                        list.retain(|&x| x != p);
                    }
                    Op::Victim(pinned) => {
                        let want = list.iter().copied().find(|p| !pinned.contains(p));
                        proptest::prop_assert_eq!(c.victim(&pinned), want);
                        list.retain(|&x| Some(x) != want);
                    }
                }
                proptest::prop_assert_eq!(c.pages.len(), list.len());
            }
        }
    }
}
