//! Driver-initiated migration to the GPU: `cudaMemPrefetchAsync`
//! (spec/uvm-driver.md "Residency, hints": it "migrates block by block,
//! populates untouched pages, ignores preferred location, may evict; CPU
//! pre-unmap in 8 MiB steps").
//!
//! No fault is involved, so there is no fetch, no batch and no replay: per VA
//! block the driver pays its per-block cost, the first GPU touch of the block
//! (DMA map), a root chunk (allocated, or freed by evicting the block the
//! eviction policy chooses), zero-fill of the pages resident nowhere, the copy
//! of the host-resident ones over the link and the map; the host side is
//! unmapped in 8 MiB steps (one `unmap_mapping_range` per step: every block's
//! page tables, one TLB-shootdown round), and the tracker is waited on once
//! at the end. Under the fixed-latency cost model only the copies cost time.
//!
//! The host program waits for the prefetch (stream order: the next kernel on
//! the stream starts after it; ASSUMPTION: the host does nothing else
//! meanwhile, which is what the workloads that use it do).

use super::records::AllocCount;
use super::{prefetch, Advice, Cause, Residency, Uvm, BLOCK_PAGES};
use crate::link::{Dir, Link};
use crate::sim::Ps;
use crate::stats::Metrics;
use crate::xlat::space::Evicted;

/// VA blocks the host unmaps in one step (8 MiB).
const UNMAP_STEP_BLOCKS: u64 = 4;

/// What `cudaMemPrefetchAsync` calls did (exported as `uvm.prefetch_async.*`).
#[derive(Debug, Clone, Default)]
pub struct AsyncPrefetchStats {
    pub calls: u64,
    /// Pages made resident on the GPU (copied or zero-filled).
    pub pages: u64,
    pub bytes_h2d: u64,
    /// Remote mappings replaced by a migration (the hint is ignored).
    pub remote_replaced: u64,
    pub evictions: u64,
    pub time_ps: Ps,
}

impl AsyncPrefetchStats {
    pub fn export(&self, m: &mut Metrics) {
        m.int("uvm.prefetch_async.calls", self.calls);
        m.int("uvm.prefetch_async.pages", self.pages);
        m.int("uvm.prefetch_async.bytes_h2d", self.bytes_h2d);
        m.int("uvm.prefetch_async.remote_replaced", self.remote_replaced);
        m.int("uvm.prefetch_async.evictions", self.evictions);
        m.float("uvm.prefetch_async.time_ns", self.time_ps as f64 / 1000.0);
    }
}

/// What one driver-initiated migration did.
#[derive(Debug, Clone, Default)]
pub struct Moved {
    pub pages: u64,
    pub bytes_h2d: u64,
    pub remote_replaced: u64,
    pub evictions: u64,
    /// Each block's copy to the GPU, in order.
    pub copies: Vec<BlockCopy>,
}

/// One VA block's pages moved by a driver-initiated migration: the copy (`start` and `end` as the
/// link returned them; none for a block whose pages were all zero-filled: `start` is then when its
/// service reached them) and what it counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCopy {
    pub start: Ps,
    pub end: Ps,
    pub pages: u64,
    pub bytes: u64,
}

impl Uvm {
    /// `cudaMemPrefetchAsync(pages → GPU)` issued at `now`: returns when the
    /// last page is resident and mapped. GPU translations to drop (remote
    /// mappings replaced, evicted blocks) are left in `shootdowns`.
    pub fn prefetch_async(&mut self, now: Ps, pages: std::ops::Range<u64>, link: &mut Link, residency: &mut Residency) -> Ps {
        if self.shared_memory {
            // An APU's GPU has no memory of its own to prefetch to: nothing moves or is mapped (`iommu.shared_memory`).
            self.async_prefetch.calls += 1;
            return now;
        }
        let want: Vec<u64> = pages.filter(|&p| !residency.is_resident(p)).collect();
        let (end, moved, _) = self.migrate_to_gpu(now, &want, Cause::PrefetchAsync, link, residency, true);
        let s = &mut self.async_prefetch;
        s.calls += 1;
        s.pages += moved.pages;
        s.bytes_h2d += moved.bytes_h2d;
        s.remote_replaced += moved.remote_replaced;
        s.evictions += moved.evictions;
        s.time_ps += end - now;
        end
    }

    /// Migrate `pages` (sorted, none GPU-resident) to the GPU from `now`, VA
    /// block by VA block; returns when the last is copied and mapped, and
    /// what moved. With `apply` the pages become resident (remote mappings
    /// replaced) at once; otherwise the pages that moved are returned for the
    /// caller to make resident at that time. The pages of a block that finds
    /// GPU memory full of this call's own blocks, and those after it, stay
    /// where they are (with page granularity, the block's first pages fill
    /// what room is left).
    pub(super) fn migrate_to_gpu(
        &mut self,
        now: Ps,
        pages: &[u64],
        cause: Cause,
        link: &mut Link,
        residency: &mut Residency,
        apply: bool,
    ) -> (Ps, Moved, Vec<u64>) {
        let driver = self.fixed.is_none();
        let c = self.costs.clone();
        let cost = |d: Ps| if driver { d } else { 0 };
        let mut t = now;
        let mut moved = Moved::default();
        let mut later = vec![];
        let (Some(&first), Some(&last)) = (pages.first(), pages.last()) else { return (now, moved, later) };
        let (first_block, end_block) = (first / BLOCK_PAGES, last / BLOCK_PAGES + 1);
        // The blocks of this call keep their chunks (ASSUMPTION, as for a batch's blocks).
        let in_call = |b: u64| (first_block..end_block).contains(&b);
        let mut unmapped_to = first_block;
        // As in a fault batch (`uvm.async_copies`): each block's copy is pushed and the next block's CPU
        // work goes on; the call ends on its tracker, after the last copy (uvm_migrate.c: one tracker
        // for the whole call, waited for once).
        let async_copies = driver && c.async_copies;
        let mut landed = t;
        // Page granularity: this call's pages are pinned while it runs (make_room pins each block's), not after.
        let pinned_before = self.page_evict.as_ref().map(|pm| pm.pinned.clone());
        for mut want in pages.chunk_by(|a, b| a / BLOCK_PAGES == b / BLOCK_PAGES) {
            let mut last = false;
            let block = want[0] / BLOCK_PAGES;
            // Read-mostly: cudaMemPrefetchAsync creates read-only duplicates (CUDA runtime API,
            // cudaMemAdvise): the host keeps its copy and its mapping, nothing is unmapped or moved.
            let duplicate = self.advice_of(block * BLOCK_PAGES) == Advice::ReadMostly;
            debug_assert!(apply || !duplicate, "access counters never see read-mostly pages (never mapped remotely)");
            if block >= unmapped_to {
                // The host side goes in 8 MiB steps.
                unmapped_to = block + UNMAP_STEP_BLOCKS;
                t += cost(self.unmap_step(block, unmapped_to));
            }
            t += cost(c.per_block);
            if self.gpu_blocks.insert(block) {
                t += cost(self.first_touch_cost(block));
            }
            if self.page_evict.is_some() {
                // Page granularity counts GPU memory in 4 KiB pages (as the fault batches do): room for the
                // block's pages, evicting others but this call's. Its chunk counters stay untouched (before
                // 2026-11-30 this path took chunks, so its pages were never counted: a prefetch of twice the
                // GPU memory left twice the capacity resident).
                let before = self.stats.evictions;
                let calls = self.page_alloc_calls(want.len());
                t += cost(c.pma_alloc * calls);
                match self.make_room(want, &mut vec![], t, now, link, residency) {
                    Some((after, admitted)) => {
                        t = after;
                        if admitted < want.len() {
                            // GPU memory is full of this call's pages: the block's first pages fill it, the
                            // rest of the call stays where it is.
                            want = &want[..admitted];
                            last = true;
                        }
                    }
                    // GPU memory holds only this call's pages: the rest stays where it is.
                    None => break,
                }
                moved.evictions += self.stats.evictions - before;
            } else if !self.chunks.owns(block) {
                if self.free_chunks == 0 {
                    if self.allocated_chunks < self.capacity_chunks {
                        t += cost(c.pma_alloc);
                        let got = (c.pma_chunk_blocks as u64).min(self.capacity_chunks - self.allocated_chunks);
                        self.allocated_chunks += got;
                        self.free_chunks += got;
                    } else if let Some(victim) = self.chunks.victim(in_call) {
                        t += cost(c.evict);
                        t = self.evict_to_host(victim, t, now, link, residency);
                        t += cost(c.per_block);
                        moved.evictions += 1;
                    } else {
                        // GPU memory holds only this call's blocks: the rest stays where it is.
                        break;
                    }
                }
                self.free_chunks -= 1;
                self.full |= self.free_chunks == 0 && self.allocated_chunks >= self.capacity_chunks;
                self.chunks.insert(block);
            } else {
                self.chunks.serviced(block);
            }
            let from_cpu: Vec<u64> = want.iter().copied().filter(|&p| self.cpu_resident(p)).collect();
            t += cost(c.zero_per_page * (want.len() - from_cpu.len()) as Ps);
            let bytes = from_cpu.len() as u64 * 4096;
            let mut copy = BlockCopy { start: t, end: t, pages: want.len() as u64, bytes };
            if bytes > 0 {
                // The driver pushes the copy (`uvm.copy_push_us`), then the copy engine runs it.
                t += self.push_cost(from_cpu.len());
                let xfer = link.transfer_on(Dir::HostToDevice, bytes, t, now);
                (copy.start, copy.end) = (xfer.0, xfer.1);
                if async_copies {
                    landed = landed.max(xfer.1);
                } else {
                    t = xfer.1;
                }
                self.record_migration(xfer, &from_cpu, Dir::HostToDevice, cause);
                if !duplicate {
                    // A copy is not a move: duplicates are no thrashing event.
                    self.thrashing.migrated(block, &from_cpu, crate::uvm::thrashing::Proc::Gpu, t);
                }
            }
            t += cost(c.map);
            moved.remote_replaced += want.iter().filter(|&&p| residency.is_remote(p)).count() as u64;
            if !apply {
                later.extend_from_slice(want);
            } else {
                if self.make_gpu_resident(want, residency) {
                    self.shootdowns.push(block);
                }
                if duplicate {
                    // Only the pages the host holds become duplicates; the others are populated on the GPU alone.
                    for &p in &from_cpu {
                        residency.set_dup(p, true);
                    }
                    self.stats.dup_copies += from_cpu.len() as u64;
                }
            }
            moved.pages += want.len() as u64;
            moved.bytes_h2d += bytes;
            moved.copies.push(copy);
            self.stats.bytes_h2d += bytes;
            self.alloc_tally.count(AllocCount::PagesH2d, &self.allocs, from_cpu.iter().copied());
            if last {
                break;
            }
        }
        if let (Some(pm), Some(before)) = (self.page_evict.as_mut(), pinned_before) {
            pm.pinned = before;
        }
        t = t.max(landed) + cost(c.tracker);
        (t, moved, later)
    }

    /// The migrated `pages` of one block are GPU-resident now; true if a
    /// remote mapping was replaced (the block's GPU translations must go).
    pub(super) fn make_gpu_resident(&mut self, pages: &[u64], residency: &mut Residency) -> bool {
        let mut remote = false;
        for &p in pages {
            remote |= residency.unmap_remote(p);
            residency.make_resident(p);
            // In GPU memory now, no longer where the page-request path mapped it.
            if let Some(m) = self.in_place.get_mut(&(p / BLOCK_PAGES)) {
                prefetch::clear(m, (p % BLOCK_PAGES) as usize);
            }
        }
        remote
    }

    /// Unmap the host-mapped blocks of `[block, end)` in one call: every
    /// block's page tables and one shootdown round for the most threads.
    fn unmap_step(&mut self, block: u64, end: u64) -> Ps {
        let (mut n, mut pages, mut most) = (0, 0, 0);
        for b in block..end {
            if self.advice_of(b * BLOCK_PAGES) == Advice::ReadMostly {
                // Read-mostly: the prefetch duplicates the pages, the host keeps its copy and its mapping.
                continue;
            }
            if let Some(m) = self.cpu_mapped.remove(&b) {
                n += 1;
                pages += prefetch::count(&m.pages) as u64;
                most = most.max(m.threads);
            }
        }
        if n == 0 {
            return 0;
        }
        self.stats.unmaps_sync += n;
        self.costs.unmap_of(n, pages, most)
    }

    /// Evict VA block `victim` at `t`: its resident pages go back to the host
    /// over the link (all of them, or the dirty ones with `write_back = "dirty"`), its GPU translations are
    /// shot down, its chunk is free. Returns when the chunk can be reused: when the copy is done, or when it
    /// starts with `uvm.eviction.overlap_write_back`.
    pub(super) fn evict_to_host(&mut self, victim: u64, t: Ps, now: Ps, link: &mut Link, residency: &mut Residency) -> Ps {
        let Evicted { resident: mask, untouched, dirty, dup } = residency.evict_block(victim);
        let n = prefetch::count(&mask) as u64;
        // Dirty write-back: only the pages the GPU stored to go back (a clean page's host copy is valid).
        // A read-only duplicate never goes back: the host holds it too, and the driver copies only the
        // pages not resident at the destination (uvm_va_block.c, block_copy_resident_pages).
        let mut copy = if self.dirty_only { dirty } else { mask };
        for (c, d) in copy.iter_mut().zip(dup) {
            *c &= !d;
        }
        let copied = prefetch::count(&copy) as u64;
        if self.advice_of(victim * BLOCK_PAGES) == Advice::AccessedBy {
            // Accessed-by: the GPU keeps a mapping of the pages, now in host memory.
            for i in prefetch::pages(&mask) {
                residency.map_remote(victim * BLOCK_PAGES + i as u64);
            }
        }
        let host = self.cpu_evicted.entry(victim).or_insert([0; 8]);
        for w in 0..8 {
            host[w] |= mask[w];
        }
        let bytes = copied * 4096;
        let mut end = t;
        if bytes > 0 {
            // The driver pushes the copy back (`uvm.copy_push_us`), then the copy engine runs it.
            let t = t + self.push_cost(copied as usize);
            let xfer = link.transfer_on(Dir::DeviceToHost, bytes, t, now);
            // The chunk is free once the copy back has landed, or once it starts (`overlap_write_back`).
            end = if self.overlap_write_back { xfer.0 } else { xfer.1 };
            if self.migrations.is_some() {
                let evicted: Vec<u64> = prefetch::pages(&copy).map(|i| victim * BLOCK_PAGES + i as u64).collect();
                self.record_migration(xfer, &evicted, Dir::DeviceToHost, Cause::Eviction);
            }
        }
        // The block's allocation: that of its first resident page (a block holds one allocation's pages).
        let first = prefetch::pages(&mask).next().map_or(victim * BLOCK_PAGES, |i| victim * BLOCK_PAGES + i as u64);
        self.alloc_tally.count(AllocCount::Evictions, &self.allocs, [first]);
        self.alloc_tally.count(AllocCount::PagesEvicted, &self.allocs, prefetch::pages(&mask).map(|i| victim * BLOCK_PAGES + i as u64));
        self.alloc_tally.count(AllocCount::PagesWrittenBack, &self.allocs, prefetch::pages(&copy).map(|i| victim * BLOCK_PAGES + i as u64));
        self.stats.evictions += 1;
        self.stats.pages_evicted += n;
        self.stats.pages_evicted_clean += n - copied;
        self.stats.bytes_d2h += bytes;
        self.stats.prefetch_evicted_untouched += untouched;
        self.shootdowns.push(victim);
        self.seq_cursor = self.seq_cursor.min(victim * BLOCK_PAGES);
        self.free_chunks += 1;
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::uvm::UvmConfig;

    fn setup(c: UvmConfig) -> (Uvm, Link, Residency) {
        let cfg = Config::default();
        let mut u = Uvm::new(&c, 4, 4, 1);
        u.add_allocation(0, 4 * BLOCK_PAGES);
        (u, Link::new(&cfg.link), Residency::default())
    }

    fn costed() -> UvmConfig {
        let mut c = Config::default().uvm;
        (c.per_block_us, c.first_touch_us, c.first_touch_tail, c.pma_alloc_us, c.pma_chunk_blocks) = (8.0, 15.0, 1e9, 100.0, 64);
        (c.zero_us_per_page, c.map_us, c.tracker_us, c.unmap_us, c.unmap_per_thread_us) = (0.5, 3.0, 4.0, 5.0, 3.0);
        (c.unmap_per_page_us, c.copy_push_us, c.copy_push_per_page_us) = (0.0, 2.0, 0.25);
        c
    }

    #[test]
    fn host_resident_pages_are_copied_and_untouched_ones_zero_filled() {
        let (mut u, mut link, mut r) = setup(costed());
        // The first half of block 0 was initialised by 2 host threads; the rest never touched.
        u.host_touch(0, BLOCK_PAGES / 2, 2);
        let end = u.prefetch_async(0, 0..BLOCK_PAGES, &mut link, &mut r);
        assert!((0..BLOCK_PAGES).all(|p| r.is_resident(p)));
        let s = &u.async_prefetch;
        assert_eq!((s.calls, s.pages, s.bytes_h2d), (1, 512, 256 * 4096));
        // Hand-checked: unmap 5 + 3 (2 threads, one step), block 8, first touch 15 (the
        // huge Pareto shape puts every draw at the median), chunk 100, zero-fill 256 x 0.5,
        // pushing the copy 2 + 256 x 0.25, the 1 MiB copy (what the same copy takes on an idle
        // link), tracker 4. The map (3) is pushed behind the copy and done while it runs
        // (`async_copies`, the default).
        let copy = Link::new(&Config::default().link).transfer_on(Dir::HostToDevice, 256 * 4096, 0, 0).1;
        let want = 1_000_000 * (8 + 8 + 15 + 100 + 128 + 2 + 64 + 4) + copy;
        // (The link's bandwidth timeline rounds a copy's start to its slots: a few ns.)
        assert!(end.abs_diff(want) < 5000, "{end} vs {want}");
        assert_eq!(u.stats.unmaps_sync, 1);
        // Resident pages are skipped the second time: nothing moves, nothing to wait for.
        let again = u.prefetch_async(end, 0..BLOCK_PAGES, &mut link, &mut r);
        assert_eq!(again, end);
        assert_eq!(u.async_prefetch.pages, 512);
    }

    #[test]
    fn a_full_gpu_evicts_other_blocks_but_never_the_calls_own() {
        let mut c = costed();
        c.gpu_memory_bytes = crate::config::ByteSize(2 * 2 * 1024 * 1024);
        let (mut u, mut link, mut r) = setup(c);
        u.host_touch(0, 4 * BLOCK_PAGES, 1);
        // Blocks 0 and 1 fill the GPU; prefetching 2..4 evicts both.
        let t = u.prefetch_async(0, 0..2 * BLOCK_PAGES, &mut link, &mut r);
        let t = u.prefetch_async(t, 2 * BLOCK_PAGES..4 * BLOCK_PAGES, &mut link, &mut r);
        assert_eq!(u.async_prefetch.evictions, 2);
        assert!((0..2 * BLOCK_PAGES).all(|p| !r.is_resident(p)));
        assert!((2 * BLOCK_PAGES..4 * BLOCK_PAGES).all(|p| r.is_resident(p)));
        assert_eq!(u.stats.bytes_d2h, 2 * 512 * 4096);
        assert_eq!(u.shootdowns, vec![0, 1]);
        // A call larger than GPU memory stops at its capacity instead of evicting itself.
        let (mut u, mut link, mut r) = setup({
            let mut c = costed();
            c.gpu_memory_bytes = crate::config::ByteSize(2 * 1024 * 1024);
            c
        });
        u.host_touch(0, 4 * BLOCK_PAGES, 1);
        u.prefetch_async(t, 0..4 * BLOCK_PAGES, &mut link, &mut r);
        assert_eq!(u.async_prefetch.evictions, 0);
        assert_eq!(r.resident_pages(), 512);
    }

    #[test]
    fn an_evictions_copy_back_is_pushed_first_under_the_driver_model_only() {
        // 100 resident pages of block 1 go back: the copy starts after the push (2 + 100 x 0.25 µs) under the
        // driver model; the other models charge only the copy.
        let copy = Link::new(&Config::default().link).transfer_on(Dir::DeviceToHost, 100 * 4096, 0, 0).1;
        for (model, push) in [(crate::uvm::CostModel::Driver, 27_000_000), (crate::uvm::CostModel::Polled, 0)] {
            let mut c = costed();
            c.cost_model = model;
            let (mut u, mut link, mut r) = setup(c);
            for p in BLOCK_PAGES..BLOCK_PAGES + 100 {
                r.make_resident(p);
            }
            let end = u.evict_to_host(1, 0, 0, &mut link, &mut r);
            assert!(end.abs_diff(push + copy) < 5000, "{model:?}: {end} vs {}", push + copy);
            assert_eq!((u.stats.bytes_d2h, r.resident_pages()), (100 * 4096, 0));
        }
    }

    #[test]
    fn with_overlap_write_back_a_chunk_is_free_when_its_copy_back_starts() {
        // Block 1's 100 resident pages go back on an idle link: the chunk is free at once (the copy starts at 0,
        // nothing to push under the polled model) instead of when the copy lands; the copy is the same either way.
        let copy = Link::new(&Config::default().link).transfer_on(Dir::DeviceToHost, 100 * 4096, 0, 0).1;
        for (overlap, want) in [(false, copy), (true, 0)] {
            let mut c = costed();
            c.cost_model = crate::uvm::CostModel::Polled;
            c.eviction.overlap_write_back = overlap;
            let (mut u, mut link, mut r) = setup(c);
            for p in BLOCK_PAGES..BLOCK_PAGES + 100 {
                r.make_resident(p);
            }
            let end = u.evict_to_host(1, 0, 0, &mut link, &mut r);
            assert!(end.abs_diff(want) < 5000, "overlap {overlap}: {end} vs {want}");
            assert_eq!((u.stats.bytes_d2h, link.stats[Dir::DeviceToHost as usize].bytes), (100 * 4096, 100 * 4096));
        }
    }

    #[test]
    fn with_overlap_write_back_the_fetch_runs_beside_the_evictions_copy_back() {
        // Page granularity, GPU memory of one block, the fixed-latency model (only the copies cost): block 0 fills
        // the GPU, then block 1 evicts all of it. The driver's order copies block 0 back, then block 1 in; with
        // overlap_write_back block 1 comes in while block 0 goes out, and the call ends a copy-back earlier.
        let d2h = Link::new(&Config::default().link).transfer_on(Dir::DeviceToHost, 512 * 4096, 0, 0).1;
        let mut took = vec![];
        for overlap in [false, true] {
            let mut c = costed();
            c.cost_model = crate::uvm::CostModel::FixedLatency;
            c.gpu_memory_bytes = crate::config::ByteSize(2 * 1024 * 1024);
            c.eviction.granularity = crate::uvm::evict::EvictionGranularity::Page;
            c.eviction.overlap_write_back = overlap;
            let (mut u, mut link, mut r) = setup(c);
            u.host_touch(0, 2 * BLOCK_PAGES, 1);
            let t = u.prefetch_async(0, 0..BLOCK_PAGES, &mut link, &mut r);
            let end = u.prefetch_async(t, BLOCK_PAGES..2 * BLOCK_PAGES, &mut link, &mut r);
            assert!((BLOCK_PAGES..2 * BLOCK_PAGES).all(|p| r.is_resident(p)) && !r.is_resident(0));
            assert_eq!((u.stats.pages_evicted, u.stats.bytes_d2h), (512, 512 * 4096));
            took.push(end - t);
        }
        let saved = took[0] - took[1];
        assert!(saved.abs_diff(d2h) < 5000, "saved {saved} ps, the copy back takes {d2h}");
    }

    /// The second of two prefetches on a GPU of two blocks (blocks 0, 1, then 2, 3: two evictions), copies
    /// synchronous so that every cost adds to the call's time.
    fn second_call(evict_us: f64, per_block_us: f64) -> Ps {
        let mut c = costed();
        c.gpu_memory_bytes = crate::config::ByteSize(2 * 2 * 1024 * 1024);
        (c.async_copies, c.eviction.evict_us, c.per_block_us) = (false, evict_us, per_block_us);
        let (mut u, mut link, mut r) = setup(c);
        u.host_touch(0, 4 * BLOCK_PAGES, 1);
        let t = u.prefetch_async(0, 0..2 * BLOCK_PAGES, &mut link, &mut r);
        let end = u.prefetch_async(t, 2 * BLOCK_PAGES..4 * BLOCK_PAGES, &mut link, &mut r);
        assert_eq!(u.async_prefetch.evictions, 2);
        end - t
    }

    #[test]
    fn an_eviction_costs_evict_us_and_restarts_the_blocks_service() {
        let base = second_call(10.0, 8.0);
        // One more µs of evict_us: two evictions, 2 µs.
        let d_evict = second_call(11.0, 8.0) - base;
        assert!(d_evict.abs_diff(2_000_000) < 5000, "{d_evict}");
        // One more µs of per_block_us: each of the two blocks pays it before and again after its eviction, 4 µs.
        let d_block = second_call(10.0, 9.0) - base;
        assert!(d_block.abs_diff(4_000_000) < 5000, "{d_block}");
    }

    #[test]
    fn dirty_write_back_copies_only_the_stored_pages_and_counts_the_clean_ones() {
        let mut c = costed();
        c.eviction.write_back = crate::uvm::evict::WriteBack::Dirty;
        let (mut u, mut link, mut r) = setup(c);
        // Block 1: 100 resident pages, the GPU stored to 10 of them.
        for p in BLOCK_PAGES..BLOCK_PAGES + 100 {
            r.make_resident(p);
        }
        for p in BLOCK_PAGES..BLOCK_PAGES + 10 {
            r.mark_dirty(p);
        }
        u.evict_to_host(1, 0, 0, &mut link, &mut r);
        assert_eq!((u.stats.pages_evicted, u.stats.pages_evicted_clean, u.stats.bytes_d2h), (100, 90, 10 * 4096));
        assert_eq!(link.stats[Dir::DeviceToHost as usize].bytes, 10 * 4096);
    }

    #[test]
    fn an_accessed_by_block_evicted_stays_mapped_remotely() {
        let mut c = costed();
        c.advise.policy = Advice::AccessedBy;
        let (mut u, mut link, mut r) = setup(c);
        for p in BLOCK_PAGES..BLOCK_PAGES + 100 {
            r.make_resident(p);
        }
        u.evict_to_host(1, 0, 0, &mut link, &mut r);
        // The 100 evicted pages, and only they, are mapped remotely (in host memory now).
        assert!((BLOCK_PAGES..BLOCK_PAGES + 100).all(|p| r.is_remote(p) && !r.is_resident(p)));
        assert!(!r.is_remote(BLOCK_PAGES + 100));
    }

    #[test]
    fn a_prefetch_copy_is_a_thrashing_event_for_the_gpu() {
        let (mut u, mut link, mut r) = setup(costed());
        u.host_touch(0, BLOCK_PAGES, 1);
        let end = u.prefetch_async(0, 0..8, &mut link, &mut r);
        assert!(!u.thrashing.tracking());
        // The host takes page 3 back within the lapse (500 µs) of the prefetch's event on block 0: the block
        // alternates, so its pages are tracked from now on.
        u.thrashing.migrated(0, &[3], crate::uvm::thrashing::Proc::Host, end + 1000);
        assert!(u.thrashing.tracking());
    }

    /// cudaMemPrefetchAsync of read-mostly data: the host's pages (the first half of block 0, 2 threads) become
    /// read-only duplicates, the others are populated on the GPU alone. The host keeps its mapping (no unmap:
    /// the time of `host_resident_pages_are_copied_and_untouched_ones_zero_filled` less its 5 + 3 µs), and a
    /// copy is no thrashing event (the host's taking page 3 back starts no tracking).
    #[test]
    fn prefetching_read_mostly_data_duplicates_the_hosts_pages_and_unmaps_nothing() {
        let mut c = costed();
        c.advise.policy = Advice::ReadMostly;
        let (mut u, mut link, mut r) = setup(c);
        u.host_touch(0, BLOCK_PAGES / 2, 2);
        let end = u.prefetch_async(0, 0..BLOCK_PAGES, &mut link, &mut r);
        let copy = Link::new(&Config::default().link).transfer_on(Dir::HostToDevice, 256 * 4096, 0, 0).1;
        let want = 1_000_000 * (8 + 15 + 100 + 128 + 2 + 64 + 4) + copy;
        assert!(end.abs_diff(want) < 5000, "{end} vs {want}");
        assert_eq!((u.stats.unmaps_sync, u.cpu_mapped.contains_key(&0)), (0, true));
        assert!((0..BLOCK_PAGES).all(|p| r.is_resident(p) && r.is_dup(p) == (p < BLOCK_PAGES / 2)));
        assert_eq!(u.stats.dup_copies, 256);
        u.thrashing.migrated(0, &[3], crate::uvm::thrashing::Proc::Host, end + 1000);
        assert!(!u.thrashing.tracking());
    }

    /// Page granularity, 4 pages of GPU memory (2048 at 512x): a prefetch of blocks 0 and 1 (nothing on the
    /// host) fills it with block 0's first 4 pages and stops there: unmap nothing, block 8, first touch 15,
    /// one allocator call 100, zero-fill 4 x 0.5, map 3, tracker 4 = 132 µs; block 1 is not started. With
    /// room for both, both go.
    #[test]
    fn with_page_granularity_a_prefetch_fills_the_room_left_with_a_blocks_first_pages() {
        let run = |oversubscription: f64| {
            let mut c = costed();
            c.oversubscription = oversubscription;
            c.eviction.granularity = crate::uvm::evict::EvictionGranularity::Page;
            let (mut u, mut link, mut r) = setup(c);
            let end = u.prefetch_async(0, 0..2 * BLOCK_PAGES, &mut link, &mut r);
            (end, r.resident_pages(), u.async_prefetch.pages, u.gpu_blocks.contains(&1))
        };
        let (end, resident, pages, started) = run(512.0);
        assert_eq!((end, resident, pages, started), (132_000_000, 4, 4, false));
        assert!(run(1.0).1 == 1024);
    }

    /// An evicted block's read-only duplicates go nowhere (the host holds them): of 100 resident pages, 40
    /// duplicates, 60 are copied back; 40 evictions are clean.
    #[test]
    fn an_evicted_blocks_duplicates_are_not_copied_back() {
        let (mut u, mut link, mut r) = setup(costed());
        for p in BLOCK_PAGES..BLOCK_PAGES + 100 {
            r.make_resident(p);
            r.set_dup(p, p < BLOCK_PAGES + 40);
        }
        u.evict_to_host(1, 0, 0, &mut link, &mut r);
        assert_eq!((u.stats.pages_evicted, u.stats.pages_evicted_clean, u.stats.bytes_d2h), (100, 40, 60 * 4096));
        // Its data is on the host now: the block is still populated.
        assert!(u.populated(1, &r));
    }

    /// Page granularity, one root chunk (512 pages) per allocator call: a prefetch of block 0's 512 pages calls
    /// it once: block 8, first touch 15, the call 100, zero-fill 512 x 0.5, map 3, tracker 4 = 386 µs.
    #[test]
    fn with_page_granularity_a_prefetch_calls_the_allocator_for_what_it_lacks_only() {
        let mut c = costed();
        (c.oversubscription, c.pma_chunk_blocks) = (1.0, 1);
        c.eviction.granularity = crate::uvm::evict::EvictionGranularity::Page;
        let (mut u, mut link, mut r) = setup(c);
        assert_eq!(u.prefetch_async(0, 0..BLOCK_PAGES, &mut link, &mut r), 386_000_000);
    }

    #[test]
    fn remote_mappings_are_replaced_and_shot_down() {
        let (mut u, mut link, mut r) = setup(costed());
        u.host_touch(0, BLOCK_PAGES, 1);
        r.map_remote(3);
        u.prefetch_async(0, 0..8, &mut link, &mut r);
        assert!(!r.is_remote(3) && r.is_resident(3));
        assert_eq!(u.async_prefetch.remote_replaced, 1);
        assert_eq!(u.shootdowns, vec![0]);
    }

    #[test]
    fn the_fixed_latency_model_costs_only_the_copies() {
        let mut c = costed();
        c.cost_model = crate::uvm::CostModel::FixedLatency;
        let (mut u, mut link, mut r) = setup(c);
        let end = u.prefetch_async(0, 0..BLOCK_PAGES, &mut link, &mut r);
        // Nothing was on the host: all zero-filled, free under this model.
        assert_eq!(end, 0);
        assert_eq!(r.resident_pages(), 512);
    }
}
