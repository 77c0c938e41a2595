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

use crate::sim::mix64;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Which VA block loses its chunk when GPU memory is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum EvictionPolicy {
    /// The driver's root-chunk lists: the block resident longest (spec/uvm-driver.md).
    #[default]
    Driver,
    /// Least recently serviced block (the list updated on each fault, seed uvm-driver §2.3.2).
    Lru,
    /// A random block (seed paged-memory §5.1).
    Random,
    /// Least frequently serviced block.
    Lfu,
}

leaf!(EvictionPolicy);

section! {
    /// Eviction when managed data exceeds GPU memory (uvm.gpu_memory_bytes or uvm.oversubscription): a whole 2 MiB VA block
    /// goes, every resident page of it copied back to the host (the driver's behaviour, spec/uvm-driver.md; the model tracks
    /// no dirtiness), its GPU mappings and TLB entries dropped. The fixed-latency and polled cost models charge only the copy.
    pub struct EvictionConfig {
        /// "driver" (root-chunk lists, the block resident longest), "lru" (least recently serviced), "random" or "lfu" (least often serviced).
        pub policy: EvictionPolicy = EvictionPolicy::Driver,
        /// Cost of evicting one VA block besides copying its pages back (lock, unmap the GPU, TLB invalidate, membar, free the chunk), in µs. ASSUMPTION, to be calibrated (seed uvm-driver §5.2: "the same components as a device-to-host fault").
        pub evict_us: f64 = 10.0,
    }
}

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

    /// A batch serviced faults in `block`, which owns a chunk.
    pub fn serviced(&mut self, block: u64) {
        self.seq += 1;
        let Some(&old) = self.keys.get(&block) else { return };
        let key = match self.policy {
            EvictionPolicy::Lru => (self.seq, 0),
            EvictionPolicy::Lfu => (old.0 + 1, self.seq),
            EvictionPolicy::Driver | EvictionPolicy::Random => return,
        };
        self.set(block, key);
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
}
