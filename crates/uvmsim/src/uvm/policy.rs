//! Placement hints (cudaMemAdvise) and preemptive CPU unmapping: their
//! parameters and the background unmap worker.
//!
//! Hints (spec/uvm-driver.md "Residency, hints"): one policy for the managed
//! allocations chosen by `uvm.advise.buffers`, or one per allocation
//! (`uvm.advise.per_buffer`, as a program advises each array):
//!
//! - `read-mostly` (SetReadMostly): a GPU read fault copies the page to the
//!   GPU as a read-only duplicate; the host keeps its copy and its mapping
//!   (no CPU unmap). A GPU store to a duplicate faults and collapses it (the
//!   host copy is unmapped; nothing moves); a host write invalidates the GPU
//!   copy. cudaMemPrefetchAsync duplicates too (CUDA runtime API,
//!   cudaMemAdvise). An evicted duplicate is dropped, not copied back. A page
//!   resident nowhere is populated on the GPU alone, its only copy.
//! - `preferred-location-host` (SetPreferredLocation = CPU): a GPU fault maps
//!   the page remotely where it is, in host memory (populated there when
//!   resident nowhere): no migration, and nothing is prefetched away from the
//!   host.
//! - `accessed-by` (SetAccessedBy = GPU): the GPU keeps a mapping wherever the
//!   page is: host-resident pages are mapped remotely from the start (no
//!   fault); pages resident nowhere are populated on the GPU at their first
//!   fault, and migrate as usual; pages the host takes back, or evicted ones,
//!   stay mapped remotely.
//!
//! Remote accesses cost the link ([`super::remote`]).
//!
//! Preemptive CPU unmapping (seed uvm-driver Ch. 6): when a GPU fault finds
//! its VA block still mapped on the host, the driver unmaps not only that
//! block but every host-mapped block of its allocation, or of the whole
//! managed space. `sync`: in that batch, as one call (one TLB shootdown for
//! the range: `unmap_us` per block and `unmap_per_page_us` per host-mapped
//! page, plus the per-thread shootdown cost once).
//! `async`: a background worker unmaps the range block by block (each block
//! locked while it is unmapped, at the on-demand cost of a block) while the
//! driver goes on; the driver skips blocks the worker has done, waits for the
//! block the worker holds, and unmaps on demand (the fallback) a block the
//! worker has not reached. The faulting block itself is unmapped on demand.

use crate::sim::Ps;
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// A cudaMemAdvise hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Advice {
    /// No hint: migrate on fault.
    #[default]
    None,
    /// SetReadMostly: read faults duplicate the page; writes collapse the copies.
    ReadMostly,
    /// SetPreferredLocation(CPU): the GPU maps the pages remotely instead of migrating them.
    PreferredLocationHost,
    /// SetAccessedBy(GPU): the GPU keeps a (remote) mapping of host-resident pages; migration as usual otherwise.
    AccessedBy,
}

/// How much a preemptive CPU unmap takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum UnmapGranularity {
    /// The faulting VA block only (the driver's on-demand unmapping).
    #[default]
    VaBlock,
    /// Every host-mapped block of the faulting block's allocation.
    Allocation,
    /// Every host-mapped block of the managed address space.
    Space,
}

/// Who does a preemptive unmap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum UnmapMode {
    /// The driver thread, within the faulting batch.
    #[default]
    Sync,
    /// A background worker, block by block, while the driver goes on.
    Async,
}

leaf!(Advice, UnmapGranularity, UnmapMode, Vec<u32>, Vec<Advice>);

section! {
    /// cudaMemAdvise hints on managed allocations (spec/uvm-driver.md "Residency, hints"). The single-GPU UVM driver applies them: the multi-GPU model refuses them (its placement is multi.migration; read duplication is "read-replication"). In translation.mode = "iommu" faults go to the page-request path, which maps pages in place: "accessed-by" still maps host-resident pages remotely, "read-mostly" is refused (nothing makes duplicates), and "preferred-location-host" only keeps remotely mapped pages from access-counter migration (refused when uvm.access_counters.migrate is off).
    pub struct AdviseConfig {
        /// "none", "read-mostly" (SetReadMostly: read duplication), "preferred-location-host" (SetPreferredLocation CPU: remote mapping instead of migration, no prefetch away) or "accessed-by" (SetAccessedBy GPU: host-resident pages mapped remotely; migration as usual otherwise).
        pub policy: Advice = Advice::None,
        /// The managed allocations the hint applies to, by index in the workload's allocation order (docs/workloads.md); empty = all of them.
        pub buffers: Vec<u32> = vec![],
        /// A hint per managed allocation, by index in the workload's allocation order (each "none", "read-mostly",
        /// "preferred-location-host" or "accessed-by"; allocations past the list get none), as a program calls
        /// cudaMemAdvise on each of its arrays; when given, `policy` and `buffers` must be left at their defaults.
        pub per_buffer: Vec<Advice> = vec![],
    }
}

impl AdviseConfig {
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !self.per_buffer.is_empty() && (self.policy != Advice::None || !self.buffers.is_empty()) {
            return Err((
                "uvm.advise.per_buffer".into(),
                "gives each allocation its own hint: leave uvm.advise.policy and uvm.advise.buffers unset with it".into(),
            ));
        }
        Ok(())
    }

    /// The hint of managed allocation `index`.
    pub fn of(&self, index: u32) -> Advice {
        if !self.per_buffer.is_empty() {
            return self.per_buffer.get(index as usize).copied().unwrap_or_default();
        }
        if self.buffers.is_empty() || self.buffers.contains(&index) {
            self.policy
        } else {
            Advice::None
        }
    }

    /// Whether any allocation can be read-mostly (GPU stores to duplicates must then fault).
    pub fn any_read_mostly(&self) -> bool {
        self.any(|a| a == Advice::ReadMostly)
    }

    /// Whether a hint given (`policy`, or one of `per_buffer`) satisfies `pred`.
    pub fn any(&self, pred: impl Fn(Advice) -> bool) -> bool {
        pred(self.policy) || self.per_buffer.iter().any(|&a| pred(a))
    }
}

section! {
    /// Preemptive CPU unmapping on the first GPU fault (seed uvm-driver Ch. 6, Allen's proposal; the driver unmaps on demand, per VA block).
    pub struct PreunmapConfig {
        /// "va-block" (on demand, the driver's behaviour), "allocation" or "space" (every host-mapped block of the faulting allocation, or of all managed memory).
        pub granularity: UnmapGranularity = UnmapGranularity::VaBlock,
        /// "sync" (the driver unmaps the range in the faulting batch, one call) or "async" (a background worker, block by block; the driver falls back to on-demand unmapping for blocks it has not reached).
        pub mode: UnmapMode = UnmapMode::Sync,
    }
}

/// The background unmap worker: blocks queued in address order, done one
/// after another from `free_at`.
#[derive(Debug, Default)]
pub struct Worker {
    queue: VecDeque<u64>,
    queued: FxHashSet<u64>,
    /// When the worker finished the last block it took (or became busy).
    pub free_at: Ps,
}

impl Worker {
    pub fn is_queued(&self, block: u64) -> bool {
        self.queued.contains(&block)
    }

    /// Queue `blocks` (in order), starting no earlier than `t`.
    pub fn enqueue(&mut self, blocks: impl IntoIterator<Item = u64>, t: Ps) {
        if self.queue.is_empty() {
            self.free_at = self.free_at.max(t);
        }
        for b in blocks {
            if self.queued.insert(b) {
                self.queue.push_back(b);
            }
        }
    }

    /// Run the worker up to `t`: every queued block it finishes by then is
    /// unmapped (`unmap(block)` returns its cost, or None if it is no longer
    /// host-mapped: skipped at no cost). Returns the blocks it unmapped.
    pub fn advance(&mut self, t: Ps, mut cost: impl FnMut(u64) -> Option<Ps>) -> Vec<u64> {
        let mut done = vec![];
        while let Some(&b) = self.queue.front() {
            let Some(c) = cost(b) else {
                self.queue.pop_front();
                self.queued.remove(&b);
                continue;
            };
            if self.free_at + c > t {
                break;
            }
            self.free_at += c;
            self.queue.pop_front();
            self.queued.remove(&b);
            done.push(b);
        }
        done
    }

    /// The block the worker is unmapping at `t` (started, not finished), with its end.
    pub fn holding(&self, t: Ps, cost: impl Fn(u64) -> Ps) -> Option<(u64, Ps)> {
        let &b = self.queue.front()?;
        (self.free_at <= t).then(|| (b, self.free_at + cost(b)))
    }

    /// The driver waited for the held block: it is done at `end`.
    pub fn finish_front(&mut self, end: Ps) {
        if let Some(b) = self.queue.pop_front() {
            self.queued.remove(&b);
        }
        self.free_at = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_unmaps_in_order_and_skips_what_is_done() {
        let mut w = Worker::default();
        w.enqueue([1, 2, 3, 4], 100);
        assert!(w.is_queued(3));
        // Each block takes 10; block 2 was unmapped on demand meanwhile (skipped at no cost).
        let done = w.advance(125, |b| (b != 2).then_some(10));
        assert_eq!(done, vec![1, 3]);
        assert_eq!(w.free_at, 120);
        // At 125 it holds block 4 until 130.
        assert_eq!(w.holding(125, |_| 10), Some((4, 130)));
        w.finish_front(130);
        assert!(w.advance(1000, |_| Some(10)).is_empty());
        assert!(!w.is_queued(4));
        // Idle: new work starts when queued, not in the past.
        w.enqueue([9], 2000);
        assert_eq!(w.holding(2000, |_| 10), Some((9, 2010)));
    }

    #[test]
    fn blocks_queued_while_the_worker_is_busy_follow_its_work_and_one_ending_at_t_is_done() {
        let mut w = Worker::default();
        w.enqueue([1, 2], 100);
        // At 105 block 1 (100-110) is not done yet.
        assert!(w.advance(105, |_| Some(10)).is_empty());
        // Queued at 105 behind busy work: it starts when block 2 ends (120), not at 105.
        w.enqueue([3], 105);
        // 1, 2, 3 end at 110, 120, 130: by 130 all three are done (the last one exactly then).
        assert_eq!(w.advance(130, |_| Some(10)), vec![1, 2, 3]);
        assert_eq!(w.free_at, 130);
    }
}
