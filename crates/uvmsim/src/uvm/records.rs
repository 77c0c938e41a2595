//! The driver's record tables (`uvm.records`): one row per fault, per batch and per
//! migration, written as Parquet by the front end (docs/metrics.md "Record tables").

use crate::xlat::space::PageRanges;
use serde::Serialize;

/// What became of a fault the driver saw (the `faults` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The first fault of its page in its batch: the page was migrated (or zero-filled) and mapped; one
    /// per page of `uvm.faults.unique`.
    Serviced,
    /// A later fault of a page already in the batch.
    Duplicate,
    /// Its page was already resident when the batch was sorted.
    Stale,
    /// Discarded from the buffer by batch-flush (its µTLB raises it again after the replay).
    Flushed,
    /// Not serviced: the GPU was throttled on its page (thrashing); raised again after the replay.
    Throttled,
    /// The first fault of its page in its batch, mapped remotely instead of migrated (pinned by thrashing
    /// mitigation, or a preferred-location-host / accessed-by hint).
    Remote,
    /// The first fault of its page in its batch, not serviced: its VA block found no GPU memory (every chunk held
    /// by the batch's own blocks); raised again after the replay.
    Deferred,
}

/// One fault the driver fetched or flushed (the `faults` table).
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    /// When the fault was written to the buffer.
    pub time_ns: f64,
    pub sm: u32,
    pub utlb: u32,
    /// 4 KiB virtual page number.
    pub page: u64,
    /// read, write or prefetch.
    pub access: &'static str,
    /// The batch that fetched it (or, flushed, the batch after which it was flushed).
    pub batch: u64,
    pub outcome: Outcome,
}

/// Why pages moved (the `migrations` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// A fault (GPU or host) on a page of the copy.
    Demand,
    /// Only prefetched pages.
    Prefetch,
    /// A VA block evicted from full GPU memory.
    Eviction,
    /// A hint: read-duplication copies (read-mostly), their faulted and prefetched pages alike (counted in
    /// `uvm.faults.unique` and `uvm.prefetch.pages` as other copies' pages are).
    Hint,
    /// Thrashing mitigation: a page pinned on the host moved there.
    Thrashing,
    /// cudaMemPrefetchAsync to the GPU.
    PrefetchAsync,
    /// Access-counter migration of remotely mapped pages to the GPU (single GPU: from the host; multi-GPU:
    /// from another GPU).
    AccessCounter,
    /// Multi-GPU read replication: a read replica copied to the reading GPU, the owner keeping its copy.
    Replication,
}

/// One copy over the link (the `migrations` table): a copy engine's transfer of the UVM driver, or one
/// 4 KiB page move of the multi-GPU model.
#[derive(Debug, Clone, Serialize)]
pub struct MigrationRecord {
    pub start_ns: f64,
    pub end_ns: f64,
    /// The lowest 4 KiB page number of the copy, and its pages (not necessarily contiguous: a VA block's set).
    pub first_page: u64,
    pub pages: u64,
    /// Bytes that crossed a link (multi-GPU with `multi.oracle.no_migration_latency`: 0, the data moves
    /// instantly).
    pub bytes: u64,
    /// "h2d", "d2h" or (multi-GPU) "p2p", GPU to GPU.
    pub direction: &'static str,
    pub cause: Cause,
    /// The copy engine of a UVM-driver copy; 0 for the multi-GPU model's page moves (it has no copy engines).
    pub copy_engine: u32,
    /// The GPU whose memory the copy is for: the destination of h2d and p2p, the source of d2h (0 with one GPU).
    pub gpu: u32,
    /// The GPU a p2p copy comes from; -1 for h2d and d2h.
    pub src_gpu: i32,
}

/// One serviced batch (the `batches` table).
#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchRecord {
    pub batch: u64,
    pub start_ns: f64,
    pub end_ns: f64,
    /// Faults fetched, by access type.
    pub fetched: u64,
    pub reads: u64,
    pub writes: u64,
    pub prefetches: u64,
    /// Distinct faulted pages the batch serviced (migrated or zero-filled; `uvm.faults.unique`).
    pub unique: u64,
    /// Distinct faulted pages of VA blocks the batch deferred for want of GPU memory (`uvm.faults.deferred`).
    pub deferred: u64,
    pub duplicates: u64,
    /// Duplicates the fetch merged into an adjacent entry (`uvm.faults.fetch_merged`).
    pub fetch_merged: u64,
    pub va_blocks: u64,
    pub bytes_h2d: u64,
    /// Pages prefetched (migrated with the faulted pages, not faulted themselves).
    pub prefetched: u64,
    /// VA blocks evicted to make room, their resident pages, and the bytes copied back to the host.
    pub evictions: u64,
    pub pages_evicted: u64,
    pub bytes_d2h: u64,
    /// Faults flushed from the buffer after this batch.
    pub flushed: u64,
    /// Pages whose GPU fault was not serviced because the GPU was throttled on them (thrashing).
    pub throttled: u64,
    /// Pages the batch mapped remotely instead of migrating (pinned by thrashing mitigation, or by a hint).
    pub remote_mapped: u64,
    /// Thrashing events during the batch: pages found thrashing, pinned, and unpinned.
    pub thrashing_detected: u64,
    pub pins: u64,
    pub unpins: u64,
    /// Blocks whose host mapping the batch found already removed by the asynchronous unmap worker.
    pub unmaps_skipped: u64,
    /// Replays issued during the batch (one per VA block under `block`, else one or none; polled model: one per
    /// flight of the round that landed).
    pub replays: u64,
    /// Time in each stage, in ns; together they make end_ns - start_ns (the
    /// fixed-latency model puts its latency in fetch_ns).
    pub fetch_ns: f64,
    pub block_ns: f64,
    /// The per-fault work of the blocks' service (`per_fault_us` × distinct pages serviced).
    pub fault_ns: f64,
    pub first_touch_ns: f64,
    pub unmap_ns: f64,
    pub alloc_ns: f64,
    /// Evictions: cost per evicted block plus copying its pages back.
    pub evict_ns: f64,
    pub zero_ns: f64,
    /// The driver's CPU time pushing the blocks' host-to-device copies onto copy-engine channels (`uvm.copy_push_us`
    /// per block copied plus `uvm.copy_push_per_page_us` per page), without waiting for them: what seed uvm-driver
    /// Fig. 4.2 calls transfer time (the artifact's batch driver times `block_copy_resident_pages_between`). The
    /// push of an eviction's copy back is in `evict_ns`.
    pub push_ns: f64,
    /// Waiting for copies before going on: a block's own (`uvm.async_copies = false`, or the fixed-latency model), or
    /// the polled model's round.
    pub transfer_ns: f64,
    pub map_ns: f64,
    pub tracker_ns: f64,
    pub replay_ns: f64,
    /// Not a stage: the time the batch's host-to-device copies spent on the link (each from its start on a copy
    /// engine to its arrival), overlapping the stages above when copies are asynchronous (not what seed uvm-driver
    /// Fig. 4.2 calls transfer time: that is `push_ns`).
    pub copy_ns: f64,
    /// The batch ended before the run did. A batch still in service when the program ends (it holds
    /// only faults whose warps no longer wait, e.g. duplicates) keeps the end it was planned with, and
    /// is left out of `uvm.batch_ns.*` and `uvm.time_ns`.
    pub finished: bool,
}

impl BatchRecord {
    /// The time in the batch's stages (`fetch_ns` to `replay_ns`; not `copy_ns`, which overlaps them): its
    /// `end_ns - start_ns`, as the stage fields are defined.
    pub fn stages_ns(&self) -> f64 {
        self.fetch_ns
            + self.block_ns
            + self.fault_ns
            + self.first_touch_ns
            + self.unmap_ns
            + self.alloc_ns
            + self.evict_ns
            + self.zero_ns
            + self.push_ns
            + self.transfer_ns
            + self.map_ns
            + self.tracker_ns
            + self.replay_ns
    }
}

/// One managed allocation (the `allocations` table): the driver's page counts split by the allocation
/// the pages belong to, so that each column sums over the rows to the run's total named beside it.
/// A programmer reads from it which buffer the faults, prefetches and evictions come from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AllocRecord {
    /// Order among the run's managed allocations (cudaMallocManaged calls), from 0.
    pub index: u32,
    /// Its 4 KiB pages: the first page number and how many.
    pub first_page: u64,
    pub pages: u64,
    /// Distinct faulted pages serviced (`uvm.faults.unique`).
    pub faults: u64,
    /// Pages prefetched with them (`uvm.prefetch.pages`), of which the GPU touched `prefetch_used` before they
    /// left its memory (`uvm.prefetch.used`) and not `prefetch_wasted` (`uvm.prefetch.wasted`: evicted untouched,
    /// or untouched at the end).
    pub prefetched: u64,
    pub prefetch_used: u64,
    pub prefetch_wasted: u64,
    /// Pages copied host to device by the driver, for any cause (`uvm.bytes_h2d` / 4096).
    pub pages_h2d: u64,
    /// VA blocks (or, with page-granular eviction, pages) evicted (`uvm.evictions`), their resident pages
    /// (`uvm.pages_evicted`) and the pages copied back (`uvm.bytes_d2h` / 4096).
    pub evictions: u64,
    pub pages_evicted: u64,
    pub pages_written_back: u64,
    /// Pages a host access took back from the GPU (`uvm.host.pages_d2h`).
    pub host_fault_pages: u64,
}

/// The per-allocation counters behind the `allocations` table, kept whether or not records are on; a row
/// per allocation, by the index its [`PageRanges`] gives it.
#[derive(Debug, Clone, Default)]
pub struct AllocTally {
    pub rows: Vec<AllocRecord>,
}

/// A column of [`AllocRecord`].
#[derive(Debug, Clone, Copy)]
pub enum AllocCount {
    Faults,
    Prefetched,
    PagesH2d,
    Evictions,
    PagesEvicted,
    PagesWrittenBack,
    HostFaultPages,
}

impl AllocTally {
    /// The row of managed allocation `index` (the next one), pages `first..end`.
    pub fn add(&mut self, index: usize, first: u64, end: u64) {
        debug_assert_eq!(index, self.rows.len(), "rows are added in index order");
        self.rows.push(AllocRecord { index: index as u32, first_page: first, pages: end - first, ..AllocRecord::default() });
    }

    /// Count each of `pages` in column `c` of the row of its allocation in `ranges` (a page outside every
    /// allocation is not counted).
    pub fn count(&mut self, c: AllocCount, ranges: &PageRanges, pages: impl IntoIterator<Item = u64>) {
        // Pages come in runs of one allocation (a VA block's set): look the range up only when it changes.
        let mut at: Option<(u64, u64, usize)> = None;
        for p in pages {
            let row = match at {
                Some((f, e, row)) if (f..e).contains(&p) => row,
                _ => match ranges.find(p) {
                    Some(r) => {
                        at = Some(r);
                        r.2
                    }
                    None => continue,
                },
            };
            let r = &mut self.rows[row];
            *match c {
                AllocCount::Faults => &mut r.faults,
                AllocCount::Prefetched => &mut r.prefetched,
                AllocCount::PagesH2d => &mut r.pages_h2d,
                AllocCount::Evictions => &mut r.evictions,
                AllocCount::PagesEvicted => &mut r.pages_evicted,
                AllocCount::PagesWrittenBack => &mut r.pages_written_back,
                AllocCount::HostFaultPages => &mut r.host_fault_pages,
            } += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_tally_counts_each_page_in_its_allocation_and_skips_the_rest() {
        // Added out of address order: the rows keep the order of the calls.
        let ranges: PageRanges = [(1000, 1512), (0, 100)].into_iter().collect();
        let mut t = AllocTally::default();
        t.add(0, 1000, 1512);
        t.add(1, 0, 100);
        t.count(AllocCount::Faults, &ranges, [5, 6, 99, 100, 1000, 1511, 1512, 7]);
        t.count(AllocCount::PagesEvicted, &ranges, 1000..1010);
        assert_eq!((t.rows[0].faults, t.rows[1].faults), (2, 4));
        assert_eq!((t.rows[0].pages_evicted, t.rows[1].pages_evicted), (10, 0));
        assert_eq!((t.rows[0].index, t.rows[0].first_page, t.rows[0].pages), (0, 1000, 512));
        assert_eq!((t.rows[1].index, t.rows[1].first_page, t.rows[1].pages), (1, 0, 100));
    }

    #[test]
    fn each_count_goes_to_its_own_column() {
        let ranges: PageRanges = [(0, 100)].into_iter().collect();
        let mut t = AllocTally::default();
        t.add(0, 0, 100);
        // Column k gets k pages, so that a count in the wrong column shows.
        let columns = [
            AllocCount::Faults,
            AllocCount::Prefetched,
            AllocCount::PagesH2d,
            AllocCount::Evictions,
            AllocCount::PagesEvicted,
            AllocCount::PagesWrittenBack,
            AllocCount::HostFaultPages,
        ];
        for (k, c) in columns.into_iter().enumerate() {
            t.count(c, &ranges, 0..k as u64 + 1);
        }
        let want = AllocRecord {
            index: 0,
            first_page: 0,
            pages: 100,
            faults: 1,
            prefetched: 2,
            pages_h2d: 3,
            evictions: 4,
            pages_evicted: 5,
            pages_written_back: 6,
            host_fault_pages: 7,
            ..AllocRecord::default()
        };
        assert_eq!(t.rows, vec![want]);
    }

    #[test]
    fn stages_ns_sums_every_stage_and_not_copy_ns() {
        // Each column a distinct power of two: the sum names the columns in it (bits 0-12, not copy_ns's 13).
        let r = BatchRecord {
            fetch_ns: 1.0,
            block_ns: 2.0,
            fault_ns: 4.0,
            first_touch_ns: 8.0,
            unmap_ns: 16.0,
            alloc_ns: 32.0,
            evict_ns: 64.0,
            zero_ns: 128.0,
            push_ns: 256.0,
            transfer_ns: 512.0,
            map_ns: 1024.0,
            tracker_ns: 2048.0,
            replay_ns: 4096.0,
            copy_ns: 8192.0,
            ..BatchRecord::default()
        };
        assert_eq!(r.stages_ns(), 8191.0);
    }

    #[test]
    fn table_values_are_kebab_case() {
        // The names the tables carry (docs/metrics.md "Record tables").
        let name = |v: serde_json::Value| v.as_str().unwrap().to_string();
        let outcomes = [Outcome::Serviced, Outcome::Stale, Outcome::Deferred].map(|o| name(serde_json::to_value(o).unwrap()));
        let causes = [Cause::Demand, Cause::PrefetchAsync, Cause::AccessCounter].map(|c| name(serde_json::to_value(c).unwrap()));
        assert_eq!(
            (outcomes, causes),
            (["serviced", "stale", "deferred"].map(String::from), ["demand", "prefetch-async", "access-counter"].map(String::from))
        );
    }
}
