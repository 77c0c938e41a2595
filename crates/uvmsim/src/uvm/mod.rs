//! Unified memory: the GPU's replayable fault buffer and the UVM driver's
//! batch loop (spec/uvm-driver.md, seed uvm-driver).
//!
//! How it works: a walk that finds a managed page not resident on the GPU
//! raises a far fault ([`Fault`]); the warp waits for a replay. Faults enter a
//! ring buffer, in the order they occur, unless their µTLB already has
//! `utlb_fault_limit` outstanding (Allen §3.2.1: 56 on a Titan V) or the ring
//! is full: then the µTLB holds the miss and raises it after the next replay
//! (the hardware keeps it; nothing is walked again). An optional per-SM rate
//! throttle spaces one SM's faults. The first fault wakes the driver after
//! `interrupt_us`. The driver fetches up to `batch_size` faults, coalesces
//! duplicates of a page, groups the pages by 2 MiB VA block and services the
//! blocks one after another: a cost per block, then the block's new pages over
//! the link (copy engines, [`crate::link`]). After the batch the pages become
//! resident and mapped, the policy decides the rest of the buffer (`batch`:
//! keep it for the next batch; `batch-flush`, the driver's default: discard
//! it, and the µTLBs raise those faults again after the replay; `once`: go on
//! until the buffer is drained, then replay). At a replay the µTLBs retry the
//! faults they hold side by side (one each per round), `replay_latency_ns`
//! later; each retried access walks again (the world walks it) and faults
//! again if its page is still unmapped. Every waiting warp whose faulted pages
//! are all resident re-executes its faulted instructions. When a fetch finds
//! nothing written the driver's loop ends; the next fault interrupts it again.
//! With `fetch_after_replay_wait` (batch-flush) the end of a batch follows the
//! driver's order instead: flush and replay push `replay_us` before the batch
//! ends, the retries from `replay_latency_ns` after the push, and the next
//! fetch when the batch ends (the driver's wait for the replay over), without
//! an interrupt (docs/notes-batch-makeup.md).
//!
//! Batch time = interrupt (first batch of a wake-up) + pre-processing
//! (batch_us, fetch_entry_us × fetched, per_duplicate_us × duplicates the fetch
//! did not merge) + Σ over blocks (per_block_us, per_fault_us × the block's
//! distinct pages, first touch, CPU unmap, map) + tracker (its fixed cost plus
//! the wait for the copies still on the link: each block's copy is pushed to a
//! copy engine and overlaps the next blocks' CPU work, `async_copies`) +
//! replay_us. Every term is a parameter; the
//! defaults are assumptions to be calibrated (seed uvm-driver: 400-600 µs of
//! UVM time for < 100 KB).
//!
//! Prefetch ([`prefetch`]): per VA block, the prefetcher adds pages to the
//! block's faulted ones (or, for Zheng's transfer sets, per batch, before the
//! blocks are formed); they migrate with the block, become resident at the
//! end of the batch marked untouched, and count as used at their first walk.
//!
//! GPU memory and eviction ([`evict`]): a block takes a 2 MiB chunk with its
//! first resident page (from the allocator, `pma_chunk_blocks` per call,
//! up to the capacity). When none is left the driver evicts a victim chosen by
//! the policy among the blocks not in this batch: all its resident pages go
//! back over the link (device to host; they are host-resident afterwards, not
//! CPU-mapped), they stop being resident at once, their GPU translations are
//! shot down (`shootdowns`, done by the world), and the block's service
//! restarts (its per-block cost again). If every chunk belongs to the batch's
//! own blocks, the block is deferred: its faults come again after the replay.
//! An eviction bumps the residency's refault epoch, so warps that wait for a
//! replay re-execute and fault again on pages that were taken away.
//! With `uvm.eviction.granularity = "page"` memory is counted in 4 KiB pages
//! instead (`Uvm::make_room`): single pages are evicted, the batch's own
//! pinned, prefetches that find no room dropped. `uvm.prefetch.when_full`
//! changes the prefetcher once memory has been full (Zheng's §5 warm-up).
//!
//! Thrashing, hints and the host ([`thrashing`], [`policy`], [`remote`]):
//! before a batch's blocks are formed, every faulted page asks the thrashing
//! module for a hint: throttled pages are not serviced (the refault epoch
//! makes their warps fault again after the replay), pinned pages and pages
//! hinted to stay on the host are mapped remotely (no chunk, no copy, no CPU
//! unmap). Read-mostly reads are copied as read-only duplicates and leave the
//! host mapped; a GPU store to a duplicate faults and collapses it. Thrashing
//! and preferred-location pages are never prefetched. A host access
//! ([`Uvm::host_access`]) takes GPU-resident pages back over the link, one CPU
//! fault per VA block (the block keeps its GPU chunk). CPU unmapping is on
//! demand per block, or preemptive (`[uvm.preunmap]`: a synchronous range, or
//! the background worker the batches skip, wait for or fall back from). With
//! `records`, every copy over the link is a row of the `migrations` table.

pub mod counters;
pub mod evict;
pub mod migrate;
pub mod policy;
pub mod ppr;
pub mod prefetch;
pub mod remote;
pub mod thrashing;

use crate::config::ByteSize;
use crate::link::{Dir, Link};
use crate::sim::{mix64, ns_to_ps, Ps};
use crate::stats::{Latency, Metrics};
use crate::xlat::space::{Residency, BLOCK_PAGES};
use evict::{Chunks, EvictionConfig, EvictionGranularity, Pages, WriteBack};
pub use policy::Advice;
use policy::{AdviseConfig, PreunmapConfig, UnmapGranularity, UnmapMode, Worker};
use prefetch::{PageMask, PrefetchConfig, PrefetchPolicy, WhenFull};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use thrashing::{Hint, Proc, Thrashing, ThrashingConfig};

/// Bytes of a 2 MiB VA block (and of the GPU root chunk that backs it).
const BLOCK_BYTES: u64 = BLOCK_PAGES * 4096;

/// What happens to the faults left in the buffer after a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReplayPolicy {
    /// Replay after each VA block is serviced (policy 0): warps waiting on that block resume sooner; more replays.
    Block,
    /// Replay after each batch; the next batch takes the faults still buffered.
    Batch,
    /// Flush the buffer, then replay (uvm_perf_fault_replay_policy = 2, the default).
    #[default]
    BatchFlush,
    /// Replay once the buffer is drained: batches follow each other without replays (policy 3).
    Once,
}

leaf!(ReplayPolicy, CostModel, FaultMode);

/// What a far fault stops on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FaultMode {
    /// The warp keeps issuing independent instructions and sleeps at its next dependency; others run on (NVIDIA since Pascal).
    #[default]
    Replayable,
    /// The faulting µTLB takes no requests until the fault is serviced: every warp of its SMs stalls at its next memory instruction (seed paged-memory §2.1).
    Blocking,
}

/// How long servicing a batch takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CostModel {
    /// The driver's stages: batch, per-fault, per-block and replay costs plus transfers (seed uvm-driver).
    #[default]
    Driver,
    /// One fixed far-fault service latency per batch plus the transfers (seed paged-memory §3.1: 20 µs).
    FixedLatency,
    /// Zheng's handler (seed paged-memory §3.1): every far fault is serviced `fault_latency_us` after it reaches
    /// the handler, overlapping the others ("the SW fault handler will drain the GMMU pending fault queue if there
    /// are multiple faults available in a polled fashion"); then its page crosses the link, queued per direction.
    Polled,
}

section! {
    /// Unified memory: the fault buffer and the UVM driver's batch servicing (for workload.managed = true).
    pub struct UvmConfig {
        /// "replayable" (the warp sleeps at its next dependency) or "blocking" (the faulting µTLB stops until serviced).
        pub fault_mode: FaultMode = FaultMode::Replayable,
        /// Replayable mode: a warp whose load or store far-faults stops at that instruction until its pages are serviced
        /// (seed paged-memory §3.2: "the warp that has missed in the TLB will be stalled, but all other warps within the CU
        /// can continue to issue"; §1: CUs issue "from available warps as long as they are not also blocked on pending
        /// far-faults"), so a warp has one instruction's far faults outstanding at a time. false: it goes on with
        /// independent instructions and sleeps at its next dependency (seed uvm-driver §3.2.1), so one warp can hold
        /// many far faults (a far-fault MSHR each).
        pub stall_warp_on_fault: bool = false,
        /// Entries of the GPU's replayable fault buffer (ring). ASSUMPTION: 4096, room for 40 µTLBs x 56 faults.
        pub fault_buffer_entries: u32 = 4096,
        /// Faults the driver fetches per batch (uvm_perf_fault_batch_count, default 256).
        pub batch_size: u32 = 256,
        /// "batch-flush" (driver default: discard the rest of the buffer, replay), "batch" (replay, keep the rest), "block" (replay after each VA block, keep the rest) or "once" (replay when the buffer is drained).
        pub replay_policy: ReplayPolicy = ReplayPolicy::BatchFlush,
        /// Batches one bottom-half run services before it yields and waits for the next interrupt (uvm_perf_fault_max_batches_per_service, default 20).
        pub max_batches_per_service: u32 = 20,
        /// `batch-flush`: the flush re-reads the buffer's PUT pointer, discarding the faults written while the batch was
        /// serviced too, only when more than this percentage of the batch's fetched faults were duplicates
        /// (uvm_perf_fault_replay_update_put_ratio, default 50; `uvm_gpu_replayable_faults.c`: flush mode UPDATE_PUT);
        /// otherwise it discards up to the PUT the batch's fetch read (CACHED_PUT) and the later faults stay for the next
        /// batch. 0: any duplicate re-reads it. (Before 2026-11-23 the flush always re-read PUT.)
        pub replay_update_put_ratio: u32 = 50,
        /// Outstanding faults per µTLB; more are not raised until a replay (seed uvm-driver §3.2.1: 56 on Titan V).
        pub utlb_fault_limit: u32 = 56,
        /// A µTLB's later miss on a page it already has a fault outstanding for (buffered, in service or held) merges
        /// into that fault and writes no entry (true), or writes an entry of its own (false, the default): a duplicate
        /// that takes a slot of `utlb_fault_limit` and that the driver fetches, coalesces and counts. Misses that meet
        /// while a walk is in flight share its fault either way. Source for false: the driver's fetch keeps "the last
        /// fault per uTLB to detect duplicates due to local reuse and the last fault in the whole batch to detect reuse
        /// across CTAs" (`uvm_gpu_replayable_faults.c`, `fetch_fault_buffer_entries`), i.e. NVIDIA's hardware writes a
        /// µTLB's repeated faults on a page. Either way a warp's own access to a page is one fault until it ends (the
        /// instruction re-executed after an eviction merges into it: the hardware holds and replays that access). The
        /// polled model always merges (seed paged-memory §3: the GMMU's far-fault MSHRs track each page). true was the
        /// model before 2026-11-23.
        pub utlb_merge_faults: bool = false,
        /// "driver" (the stage costs below), "fixed-latency" (fault_latency_us per batch, then the transfers) or "polled"
        /// (fault_latency_us per fault from its arrival, faults overlapping, then its page's transfer; replay_policy,
        /// batch_size and max_batches_per_service do not apply; seed paged-memory §3.1).
        pub cost_model: CostModel = CostModel::Driver,
        /// fixed-latency model: far-fault service latency per batch in µs, interrupt included; polled model: per fault,
        /// the unloaded far-fault latency, and the interval of Zheng's transfer sets (seed paged-memory Table 1 and §4.1: 20 µs).
        pub fault_latency_us: f64 = 20.0,
        /// Polled model: a far fault on a page whose service another µTLB's fault has started (waiting out its latency or
        /// crossing the link) merges into it and ends when that page lands, taking no latency of its own (its µTLB's MSHR
        /// stays taken until then). Seed paged-memory §3: the GMMU's far-fault MSHRs track page migration requests, and
        /// "once the page is migrated ... the corresponding entry in the far-fault MSHRs is used to notify the appropriate
        /// TLBs to replay". false: each µTLB's fault waits out its own latency (the model before session 6).
        pub merge_far_faults: bool = true,
        /// Polled model with merge_far_faults: a far fault that merges into another µTLB's service of its page takes one of
        /// its own µTLB's far-fault MSHRs (utlb_fault_limit) until the page lands (true), or none (false: the page's MSHR
        /// entry tracks it, so it neither counts against the limit nor is Nacked for it). Seed paged-memory §3 leaves it
        /// open: the GMMU drops and Nacks "translation requests for which it has not initiated the SW page faulting process
        /// nor is tracking" (false), while "the TLB simply maintains a counter of how many far-fault Nack-Replayable
        /// messages it has pending" against the per-CU threshold (true).
        pub merged_faults_take_mshr: bool = true,
        /// Polled model: each copy of a handler round lands on its own, the faults on its pages ending when it arrives,
        /// and the round's demand pages cross the link before its prefetched ones (true); or the round lands as one when
        /// its last copy arrives, its copies in VA-block order (false, the model before 2026-11-28). With true each copy
        /// also starts from the round's start: with GPU memory full (page granularity) a block's eviction waits only for
        /// the copy engine, not for the other blocks' evictions to land (since 2026-11-28, session 21). Seed paged-memory §3
        /// (step 6): "Once the page is migrated to the GPU, the corresponding entry in the far-fault MSHRs is used to
        /// notify the appropriate TLBs to replay"; §4.1: "Because we do not want to impede on-demand fetches, we add
        /// prefetch requests to a transfer set only as a last resort."
        pub land_per_copy: bool = true,
        /// Interrupt and bottom-half wake-up before the first batch, in µs. ASSUMPTION, to be calibrated.
        pub interrupt_us: f64 = 5.0,
        /// Fixed cost of a batch (fetch, sort, bookkeeping), in µs. ASSUMPTION, to be calibrated.
        pub batch_us: f64 = 10.0,
        /// Cost per fault entry read from the buffer (poll its valid bit, parse it, compare it with its µTLB's and
        /// the batch's last entry, clear it), in µs; every fetched entry pays it, duplicate or not. The replayable
        /// buffer sits in cached system memory (RM's kgmmuFaultBufferGetAddressSpace: ADDR_SYSMEM, NV_MEMORY_CACHED
        /// unless confidential computing moves it to video memory) and is read in order, so an entry costs a
        /// streamed read of 32 bytes and a few compares. ASSUMPTION: 0.01 µs (32 B at ~3 GB/s), not fitted.
        pub fetch_entry_us: f64 = 0.01,
        /// Cost per distinct page of a batch (the service loop's per-fault work: residency, thrashing and
        /// permission checks, masks), in µs, charged in its VA block's service before the block's copy is pushed
        /// (the driver does it in service_fault_batch_block, not while fetching; seed uvm-driver §3.3: pre-processing
        /// "is shown to be negligible in cost"); duplicates never reach it (merged at fetch, or skipped as equal to
        /// the previous page after the sort). ASSUMPTION, to be calibrated: with fetch_entry_us, 0.2 µs per fault of
        /// a kernel without duplicates, what `per_fault_us` charged every fetched fault before session 17.
        pub per_fault_us: f64 = 0.19,
        /// Cost per 2 MiB VA block serviced (lock, state, map, membar), in µs. ASSUMPTION, to be calibrated.
        pub per_block_us: f64 = 8.0,
        /// Cost of issuing a replay and waiting for it, in µs. ASSUMPTION, to be calibrated.
        pub replay_us: f64 = 5.0,
        /// Cost per duplicate that survives the fetch's merging (see `fetch_entry_us`): it is sorted with the batch
        /// and skipped as equal to the previous page, in µs. Default 0: folded into `batch_us`; a sensitivity knob.
        pub per_duplicate_us: f64 = 0.0,
        /// First GPU touch of a VA block: DMA-map its pages and build the reverse map (seed uvm-driver §4.2: heavy-tailed, up to 64% of a batch); median cost in µs. ASSUMPTION, to be calibrated.
        pub first_touch_us: f64 = 15.0,
        /// Tail of the first-touch cost: Pareto shape (smaller is heavier; draws capped at 20 × the median). ASSUMPTION.
        pub first_touch_tail: f64 = 1.5,
        /// Unmapping a CPU-mapped block from the host (`unmap_mapping_range`), fixed part per block, in µs, for one
        /// host thread; `unmap_per_page_us` adds the block's host-mapped pages. MEASURED on the development machine
        /// (docs/performance.md, "Host unmap cost"): zapping the 4 KiB PTEs of a 2 MiB MAP_SHARED memfd mapping
        /// (`madvise(MADV_DONTNEED)`, the zap path `unmap_mapping_range` takes) costs 1.8 µs with 1 page mapped,
        /// 13.2 µs with 64, 85.1 µs with 512 (medians of 500, Linux 6.18, load < 1; scripts/measure_host_unmap.c):
        /// a least-squares line gives 1.6 µs + 0.163 µs per page. The driver's own bookkeeping is not included.
        pub unmap_us: f64 = 1.6,
        /// Unmapping cost per host-mapped 4 KiB page of the block, in µs. MEASURED, see `unmap_us`.
        pub unmap_per_page_us: f64 = 0.163,
        /// Extra unmap cost per further host thread that touched the block (TLB shootdowns on each of its CPUs; seed uvm-driver §4.4), in µs. ASSUMPTION, to be calibrated.
        pub unmap_per_thread_us: f64 = 3.0,
        /// One call to the physical memory allocator, which takes root chunks from the GPU allocator in batches (spec/uvm-driver.md: 64 × 2 MiB), in µs. ASSUMPTION, to be calibrated.
        pub pma_alloc_us: f64 = 100.0,
        /// 2 MiB root chunks the allocator takes per call (spec/uvm-driver.md: 64).
        pub pma_chunk_blocks: u32 = 64,
        /// Zero-filling a page that is resident nowhere (populated on the GPU, no transfer), in µs. ASSUMPTION.
        pub zero_us_per_page: f64 = 0.02,
        /// Mapping a block's new pages on the GPU (PTE writes, TLB invalidate, membar), in µs. ASSUMPTION, to be calibrated.
        pub map_us: f64 = 2.0,
        /// Waiting for the batch's copy and map work to complete (the batch tracker): the fixed part, in µs, paid even when
        /// the copies are done; with `async_copies` the wait for copies still on the link comes on top. ASSUMPTION, to be
        /// calibrated.
        pub tracker_us: f64 = 5.0,
        /// Copies are pushed to the copy engines and the batch waits for them once, at its end (true, the driver): the
        /// driver's block service pushes each block's copy and PTE writes on channels that acquire the block's tracker
        /// and goes on with the next block (its CPU unmap, first-touch set-up and map overlap the copies still on the
        /// link); the replay push acquires the batch tracker and, under `batch-flush`, the driver waits for it
        /// (`uvm_gpu_replayable_faults.c`: `push_replay_on_gpu`, `uvm_tracker_wait` on the replay tracker). That wait is
        /// the batch's `tracker_ns`, which grows when CPU work that hid the copies goes away (seed uvm-driver §6.3.1,
        /// Fig. 6.3). false: each block's service waits for its own copy (`transfer_ns`), as before 2026-11-23. The
        /// driver cost model only (the fixed-latency model waits per block; the polled one overlaps its round's copies);
        /// the `block` replay policy waits per block either way.
        pub async_copies: bool = true,
        /// Per-SM fault-rate throttle: least time between two faults one SM writes to the buffer, in ns; later faults wait; 0 = none (seed uvm-driver §3.2.1 infers a throttle, without its rate).
        pub sm_fault_interval_ns: f64 = 0.0,
        /// From the driver's replay to the µTLBs retrying the accesses they hold (over their outstanding limit, or
        /// flushed from the buffer), in ns: the replay method's trip through a channel to the GPU. Each retried access then
        /// walks the page table again (through the GMMU's walkers, competing with demand walks) and, still unmapped,
        /// writes its fault again. ASSUMPTION (no source gives it).
        pub replay_latency_ns: f64 = 1000.0,
        /// `batch-flush`, driver cost model: order the end of a batch as the driver does (`uvm_gpu_replayable_faults.c`):
        /// the flush reads PUT and discards up to it, then pushes the replay (`fault_buffer_flush_locked`), both
        /// `replay_us` before the batch ends; the GPU executes the replay `replay_latency_ns` after the push and its
        /// µTLBs retry the accesses they hold from then; the driver waits for the replay (`uvm_tracker_wait` on the
        /// replay tracker) until the batch ends and fetches again at once, re-reading PUT because GET has reached the
        /// cached PUT (`fetch_fault_buffer_entries`, FAULT_FETCH_MODE_BATCH_READY): the next batch holds what was
        /// written by then, so after an UPDATE_PUT flush, the faults re-raised between the replay's arrival and the
        /// end of the wait; a fetch that finds nothing ends the bottom half (the next fault interrupts it). Needs
        /// replay_latency_ns <= replay_us x 1000 (the wait cannot end before the GPU has executed the replay).
        /// false (before 2026-11-23): the flush reads PUT when the wait has ended, the replay reaches the GPU
        /// `replay_latency_ns` after that, and a fetch that finds the buffer empty ends the bottom half, so after an
        /// UPDATE_PUT flush the next batch waits for the re-raised faults' interrupt (`interrupt_us`).
        pub fetch_after_replay_wait: bool = false,
        /// Prefetching (spec/uvm-driver.md "Prefetcher"; seed paged-memory §4). Default policy "none": demand paging only,
        /// as in the seeds' baseline measurements (seed uvm-driver Ch. 3-4 disable prefetching; seed paged-memory's replayable
        /// baseline); the real driver's default is "density" (uvm_perf_prefetch_enable = 1).
        pub prefetch: PrefetchConfig = PrefetchConfig::default(),
        /// GPU memory available to managed data, allocated in 2 MiB root chunks, one per VA block with GPU-resident
        /// pages (spec/uvm-driver.md); 0 = unlimited (no eviction). Device (non-managed) allocations do not count.
        pub gpu_memory_bytes: ByteSize = ByteSize(0),
        /// Managed footprint over GPU memory, in 2 MiB blocks (2.0: half the footprint's blocks fit, rounded down; below 1 the
        /// footprint fits; seed paged-memory §5 sets GPU memory to a fraction of the footprint); 0 = off. When set, it
        /// overrides gpu_memory_bytes.
        pub oversubscription: f64 = 0.0,
        /// Eviction when GPU memory is full.
        pub eviction: EvictionConfig = EvictionConfig::default(),
        /// Thrashing detection and mitigation between the host and the GPU.
        pub thrashing: ThrashingConfig = ThrashingConfig::default(),
        /// cudaMemAdvise hints.
        pub advise: AdviseConfig = AdviseConfig::default(),
        /// Preemptive CPU unmapping.
        pub preunmap: PreunmapConfig = PreunmapConfig::default(),
        /// Access-counter migration of remotely mapped pages.
        pub access_counters: counters::AccessCounterConfig = counters::AccessCounterConfig::default(),
        /// A host access that finds a managed page on the GPU (or its VA block not mapped on the host): the CPU page fault's
        /// service per VA block, before any copy back, in µs. ASSUMPTION, to be calibrated.
        pub cpu_fault_us: f64 = 20.0,
        /// Keep one record per batch and one per migration (the `batches` and `migrations` tables of the run's output).
        pub records: bool = false,
        /// Keep one record per fault fetched or flushed (the `faults` table: arrival, SM, µTLB, page, access, batch, outcome).
        pub fault_records: bool = false,
        /// Most rows the `faults` table keeps (later faults are counted in uvm.fault_records_dropped).
        pub fault_records_max: u64 = 1_000_000,
        /// Also run the same workload with device memory and explicit copies, and report the
        /// copy-then-execute and ideal-overlap baselines (`baseline.*`; seed paged-memory §2).
        pub baselines: bool = false,
    }
}

/// What became of a fault the driver saw (the `faults` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The first fault of its page in its batch: the page was migrated and mapped.
    Serviced,
    /// A later fault of a page already in the batch.
    Duplicate,
    /// Its page was already resident when the batch was sorted.
    Stale,
    /// Discarded from the buffer by batch-flush (its µTLB raises it again after the replay).
    Flushed,
    /// Not serviced: the GPU was throttled on its page (thrashing); raised again after the replay.
    Throttled,
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
    /// A hint: read-duplication copies (read-mostly).
    Hint,
    /// Thrashing mitigation: a page pinned on the host moved there.
    Thrashing,
    /// cudaMemPrefetchAsync to the GPU.
    PrefetchAsync,
    /// Access-counter migration of remotely mapped pages to the GPU.
    AccessCounter,
}

/// One copy over the link (the `migrations` table).
#[derive(Debug, Clone, Serialize)]
pub struct MigrationRecord {
    pub start_ns: f64,
    pub end_ns: f64,
    /// The lowest 4 KiB page number of the copy, and its pages (not necessarily contiguous: a VA block's set).
    pub first_page: u64,
    pub pages: u64,
    pub bytes: u64,
    /// "h2d" or "d2h".
    pub direction: &'static str,
    pub cause: Cause,
    pub copy_engine: u32,
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
    pub unique: u64,
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
    /// Replays issued during the batch (one per VA block under `block`, else one or none).
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
    /// Waiting for copies before going on: a block's own (`uvm.async_copies = false`, or the fixed-latency model), or
    /// the polled model's round.
    pub transfer_ns: f64,
    pub map_ns: f64,
    pub tracker_ns: f64,
    pub replay_ns: f64,
    /// Not a stage: the time the batch's host-to-device copies spent on the link (each from its start on a copy
    /// engine to its arrival), overlapping the stages above when copies are asynchronous; the seed's "transfer time"
    /// (uvm-driver Fig. 4.2).
    pub copy_ns: f64,
}

impl UvmConfig {
    pub fn validate(&self) -> Result<(), (String, String)> {
        // The driver preallocates a batch of `batch_size` entries: an unbounded buffer would let a batch take
        // hundreds of GB before the run starts. Real buffers hold a few thousand entries.
        const MAX_FAULT_BUFFER: u32 = 1 << 20;
        if !(1..=MAX_FAULT_BUFFER).contains(&self.fault_buffer_entries) {
            return Err((
                "uvm.fault_buffer_entries".into(),
                format!("must be between 1 and {MAX_FAULT_BUFFER}, got {}", self.fault_buffer_entries),
            ));
        }
        if self.batch_size == 0 || self.batch_size > self.fault_buffer_entries {
            return Err((
                "uvm.batch_size".into(),
                format!("must be between 1 and uvm.fault_buffer_entries ({}), got {}", self.fault_buffer_entries, self.batch_size),
            ));
        }
        if self.max_batches_per_service == 0 {
            return Err(("uvm.max_batches_per_service".into(), "must be greater than 0".into()));
        }
        if self.replay_update_put_ratio > 100 {
            // The driver clamps it to 100 (min(uvm_perf_fault_replay_update_put_ratio, 100)); a percentage.
            return Err((
                "uvm.replay_update_put_ratio".into(),
                format!("must be a percentage, 0 to 100, got {}", self.replay_update_put_ratio),
            ));
        }
        if !(self.first_touch_tail.is_finite() && (1.01..=100.0).contains(&self.first_touch_tail)) {
            return Err(("uvm.first_touch_tail".into(), format!("must be between 1.01 and 100, got {}", self.first_touch_tail)));
        }
        if self.pma_chunk_blocks == 0 || self.pma_chunk_blocks > 1 << 20 {
            return Err(("uvm.pma_chunk_blocks".into(), format!("must be between 1 and 2^20, got {}", self.pma_chunk_blocks)));
        }
        self.prefetch.validate()?;
        self.eviction.validate()?;
        self.thrashing.validate()?;
        self.advise.validate()?;
        self.access_counters.validate()?;
        if !(self.cpu_fault_us.is_finite() && (0.0..=1e6).contains(&self.cpu_fault_us)) {
            return Err(("uvm.cpu_fault_us".into(), format!("must be between 0 and 1000000 µs, got {}", self.cpu_fault_us)));
        }
        if !(self.oversubscription == 0.0 || (self.oversubscription.is_finite() && (0.01..=1000.0).contains(&self.oversubscription))) {
            return Err((
                "uvm.oversubscription".into(),
                format!("must be 0 (off) or between 0.01 and 1000, got {}", self.oversubscription),
            ));
        }
        if self.gpu_memory_bytes.0 != 0 && self.gpu_memory_bytes.0 < BLOCK_BYTES {
            return Err((
                "uvm.gpu_memory_bytes".into(),
                format!("must be 0 (unlimited) or at least one 2 MiB chunk, got {}", self.gpu_memory_bytes),
            ));
        }
        if !(self.eviction.evict_us.is_finite() && (0.0..=1e6).contains(&self.eviction.evict_us)) {
            return Err(("uvm.eviction.evict_us".into(), format!("must be between 0 and 1000000 µs, got {}", self.eviction.evict_us)));
        }
        if self.utlb_fault_limit == 0 {
            return Err(("uvm.utlb_fault_limit".into(), "must be greater than 0".into()));
        }
        for (k, v) in [
            ("fault_latency_us", self.fault_latency_us),
            ("interrupt_us", self.interrupt_us),
            ("batch_us", self.batch_us),
            ("per_fault_us", self.per_fault_us),
            ("fetch_entry_us", self.fetch_entry_us),
            ("per_block_us", self.per_block_us),
            ("replay_us", self.replay_us),
            ("per_duplicate_us", self.per_duplicate_us),
            ("first_touch_us", self.first_touch_us),
            ("unmap_us", self.unmap_us),
            ("unmap_per_page_us", self.unmap_per_page_us),
            ("unmap_per_thread_us", self.unmap_per_thread_us),
            ("pma_alloc_us", self.pma_alloc_us),
            ("zero_us_per_page", self.zero_us_per_page),
            ("map_us", self.map_us),
            ("tracker_us", self.tracker_us),
        ] {
            if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
                return Err((format!("uvm.{k}"), format!("must be between 0 and 1000000 µs, got {v}")));
            }
        }
        for (k, v) in [("sm_fault_interval_ns", self.sm_fault_interval_ns), ("replay_latency_ns", self.replay_latency_ns)] {
            if !(v.is_finite() && (0.0..=1e9).contains(&v)) {
                return Err((format!("uvm.{k}"), format!("must be between 0 and 1000000000 ns, got {v}")));
            }
        }
        if self.fetch_after_replay_wait && self.replay_latency_ns > self.replay_us * 1000.0 {
            return Err((
                "uvm.replay_latency_ns".into(),
                format!(
                    "with uvm.fetch_after_replay_wait = true it must be at most uvm.replay_us x 1000 ({} ns): the driver's wait \
                     for the replay cannot end before the GPU executes it; got {}",
                    self.replay_us * 1000.0,
                    self.replay_latency_ns
                ),
            ));
        }
        Ok(())
    }
}

/// A far fault raised by a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub time: Ps,
    /// 4 KiB page number.
    pub vpn: u64,
    pub utlb: u32,
    pub sm: u32,
    /// The GPU's warp slot whose access faulted: a µTLB holds each warp's access once.
    pub warp: u32,
    pub write: bool,
    /// Raised by a prefetch instruction: escapes the µTLB limit (seed uvm-driver §3.2.1).
    pub prefetch: bool,
}

#[derive(Debug, Clone, Default)]
pub struct UvmStats {
    /// Faults written to the buffer.
    pub raw: u64,
    /// Faults the driver fetched (every raw fault is fetched or flushed).
    pub fetched: u64,
    /// Distinct pages serviced.
    pub unique: u64,
    /// Fetched faults for a page already in the same batch.
    pub duplicates: u64,
    /// Fetched faults the fetch merged into an adjacent entry for the same page (see [`fetch_coalesced`]).
    pub fetch_merged: u64,
    /// Faults discarded by batch-flush.
    pub flushed: u64,
    /// Batch-flush flushes that re-read PUT (UPDATE_PUT: duplicates over `replay_update_put_ratio` % of the batch).
    pub put_rereads: u64,
    /// Faults held at their µTLB (limit reached or buffer full), raised after a later replay.
    pub throttled: u64,
    /// Held (or flushed) accesses the µTLBs retried after a replay: each walked the page table again.
    pub retried: u64,
    /// Misses merged into a fault their µTLB already had outstanding for the page.
    pub merged: u64,
    pub batches: u64,
    pub va_blocks: u64,
    pub bytes_h2d: u64,
    pub replays: u64,
    /// Pages prefetched, and those evicted before the GPU touched them.
    pub prefetched: u64,
    pub prefetch_evicted_untouched: u64,
    /// Pages a locality window passed over because they were resident (once GPU memory is full), and the demand faults
    /// later taken on such pages before they arrived again (evicted after the window skipped them).
    pub window_skipped_resident: u64,
    pub window_skipped_refaults: u64,
    pub evictions: u64,
    pub pages_evicted: u64,
    /// Evicted pages not copied back: clean, with `write_back = "dirty"`.
    pub pages_evicted_clean: u64,
    pub bytes_d2h: u64,
    /// VA blocks a batch could not service: GPU memory full and every chunk held by the batch's own blocks.
    pub deferred_blocks: u64,
    /// Pages mapped remotely by batches (pinned, or hinted to stay on the host).
    pub remote_mapped: u64,
    /// Read-mostly: pages duplicated on the GPU, duplicates collapsed by a GPU store, and invalidated by a host write.
    pub dup_copies: u64,
    pub dup_collapses: u64,
    pub dup_invalidations: u64,
    /// Host accesses: VA blocks the host faulted on, pages it took back from the GPU, and their bytes.
    pub host_faults: u64,
    pub host_pages_d2h: u64,
    pub host_bytes_d2h: u64,
    /// Time host accesses took (faults, copies back and thrashing naps), in ps.
    pub host_ps: Ps,
    /// CPU unmapping: blocks unmapped on demand (by the driver, in a batch), by a synchronous preemptive
    /// call, by the background worker; the driver's waits for a block the worker held.
    pub unmaps_on_demand: u64,
    pub unmaps_sync: u64,
    pub unmaps_async: u64,
    pub unmap_waits: u64,
    pub time_ps: Ps,
    /// Time in each stage, summed over the batches (the driver model's breakdown, seed uvm-driver Fig. 3.4).
    stages: Stages,
    pub batch: Latency,
    /// Polled model: each far fault's time from its arrival at the handler to the landing that frees its MSHR,
    /// and each Nacked access's time held at its µTLB (from its walk to its retry reaching the GPU).
    pub far_fault: Latency,
    pub nacked: Latency,
    /// Polled model: faults merged into another µTLB's service of the same page (`uvm.merge_far_faults`).
    pub joined: u64,
}

#[derive(Debug)]
enum State {
    Idle,
    /// A service event is scheduled.
    Woken,
    /// A batch is being serviced: its segments (one per VA block under the
    /// `block` policy, else one) end at these times, when their pages become
    /// resident and mapped and a replay may follow.
    Servicing {
        segments: VecDeque<Segment>,
        fetched: Vec<Fault>,
        start: Ps,
    },
}

/// Part of a batch: at `end`, its demanded and prefetched pages become
/// resident (read-only duplicates among them marked), its remote pages mapped.
#[derive(Debug, Default)]
struct Segment {
    end: Ps,
    demand: Vec<u64>,
    prefetched: Vec<u64>,
    remote: Vec<u64>,
    dup: Vec<u64>,
}

/// Polled model: one handler round's pages crossing the link, and the faults
/// that wait for them (their µTLBs' far-fault MSHRs stay taken until `end`).
#[derive(Debug)]
struct Flight {
    id: u64,
    start: Ps,
    end: Ps,
    segment: Segment,
    faults: Vec<Fault>,
    /// The round's last flight to land: the round's time is counted when it does.
    last: bool,
}

/// The driver's stage costs, in ps (see [`UvmConfig`] for each term's source).
#[derive(Debug, Clone)]
struct Costs {
    batch: Ps,
    per_fault: Ps,
    fetch_entry: Ps,
    per_duplicate: Ps,
    per_block: Ps,
    first_touch: Ps,
    first_touch_tail: f64,
    unmap: Ps,
    unmap_per_page: Ps,
    unmap_per_thread: Ps,
    pma_alloc: Ps,
    pma_chunk_blocks: u32,
    evict: Ps,
    zero_per_page: Ps,
    map: Ps,
    tracker: Ps,
    replay: Ps,
    async_copies: bool,
}

/// A VA block's host mapping: what unmapping it costs depends on both.
#[derive(Debug, Clone, Copy, Default)]
struct HostMap {
    /// Most host threads that touched the block (each one's CPU needs a TLB shootdown).
    threads: u32,
    /// Pages whose host PTEs exist (each one is zapped).
    pages: PageMask,
}

impl Costs {
    /// Unmapping `n` host-mapped blocks with `pages` mapped pages in all in one call: every block's page
    /// tables, and one shootdown round for the most threads.
    fn unmap_of(&self, n: u64, pages: u64, most_threads: u32) -> Ps {
        self.unmap * n + self.unmap_per_page * pages + self.unmap_per_thread * most_threads.saturating_sub(1) as Ps
    }

    /// Unmapping one block on its own.
    fn unmap_block(&self, m: &HostMap) -> Ps {
        self.unmap_of(1, prefetch::count(&m.pages) as u64, m.threads)
    }
}

/// GPU memory counted in 4 KiB pages (`uvm.eviction.granularity = "page"`).
#[derive(Debug, Clone)]
struct PageMemory {
    /// Pages of GPU memory for managed data (u64::MAX: unlimited).
    capacity: u64,
    /// The pages holding one (resident, or migrating in this batch), in eviction order.
    pages: Pages,
    /// This batch's pages: never victims.
    pinned: FxHashSet<u64>,
}

/// Time spent in each stage of one batch.
#[derive(Debug, Clone, Copy, Default)]
struct Stages {
    fetch: Ps,
    block: Ps,
    fault: Ps,
    first_touch: Ps,
    unmap: Ps,
    alloc: Ps,
    evict: Ps,
    zero: Ps,
    transfer: Ps,
    map: Ps,
    tracker: Ps,
    replay: Ps,
    /// Not a stage: the batch's host-to-device copies' time on the link.
    copy: Ps,
}

impl Stages {
    /// The stages by name, in batch order (the batches table's `NAME_ns` columns; `copy` is not a stage).
    fn named(&self) -> [(&'static str, Ps); 12] {
        [
            ("fetch", self.fetch),
            ("block", self.block),
            ("fault", self.fault),
            ("first_touch", self.first_touch),
            ("unmap", self.unmap),
            ("alloc", self.alloc),
            ("evict", self.evict),
            ("zero", self.zero),
            ("transfer", self.transfer),
            ("map", self.map),
            ("tracker", self.tracker),
            ("replay", self.replay),
        ]
    }

    fn accumulate(&mut self, o: &Stages) {
        let fields = [
            (&mut self.fetch, o.fetch),
            (&mut self.block, o.block),
            (&mut self.fault, o.fault),
            (&mut self.first_touch, o.first_touch),
            (&mut self.unmap, o.unmap),
            (&mut self.alloc, o.alloc),
            (&mut self.evict, o.evict),
            (&mut self.zero, o.zero),
            (&mut self.transfer, o.transfer),
            (&mut self.map, o.map),
            (&mut self.tracker, o.tracker),
            (&mut self.replay, o.replay),
            (&mut self.copy, o.copy),
        ];
        for (a, b) in fields {
            *a += b;
        }
    }
}

/// What the world must schedule after a UVM step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Nothing,
    /// Run the driver at this time.
    Service(Ps),
    /// The current batch ends at this time.
    BatchDone(Ps),
}

pub struct Uvm {
    buffer: VecDeque<Fault>,
    capacity: usize,
    batch_size: usize,
    policy: ReplayPolicy,
    limit: u32,
    outstanding: Vec<u32>,
    /// (µTLB, page) pairs with faults outstanding (buffered, in service or held), and how many:
    /// a later miss of the same µTLB to the page merges into them (`utlb_merge`) or adds one.
    pending: FxHashMap<(u32, u64), u32>,
    utlb_merge: bool,
    /// `uvm.merged_faults_take_mshr = false`: the (µTLB, page) faults merged into another
    /// µTLB's service without counting in `outstanding`.
    uncounted: FxHashSet<(u32, u64)>,
    merged_take_mshr: bool,
    /// Faults held at their µTLB (its limit reached, the buffer full, or flushed):
    /// raised again after a replay, in order, as the µTLB retries them.
    parked: Vec<VecDeque<Fault>>,
    /// The (µTLB, page, warp) of every outstanding fault (buffered, in service or held): a µTLB
    /// holds a warp's access to a page once, so the warp's later miss on it (the instruction
    /// re-executed after an eviction) merges into that fault even without `utlb_merge`; other
    /// warps' misses are entries of their own.
    by_warp: FxHashSet<(u32, u64, u32)>,
    /// Per-SM rate throttle: when each SM may next write a fault (empty when off).
    sm_next: Vec<Ps>,
    sm_interval: Ps,
    /// Replay to the µTLBs' retry of the accesses they hold.
    replay_latency: Ps,
    /// `uvm.fetch_after_replay_wait` (batch-flush, driver model): a batch's last segment ends when the flush and
    /// replay are pushed; the driver fetches again `costs.replay` later, when its wait for the replay ends.
    fetch_after_replay: bool,
    /// Held faults retried at the last replay, their slots taken: the world walks each again
    /// (`take_retries`) and writes it back (`rewrite`) at the walk's end.
    retries: Vec<Fault>,
    interrupt: Ps,
    costs: Costs,
    fixed: Option<Ps>,
    /// Polled model: the per-fault latency. Its rounds of faults overlap, each one a [`Flight`].
    polled: Option<Ps>,
    /// Polled model: a fault on a page already in service merges into it (`uvm.merge_far_faults`).
    merge: bool,
    /// Polled model: a round's copies land one by one, demand pages first (`uvm.land_per_copy`).
    land_per_copy: bool,
    /// Polled model: the time of the earliest handler poll scheduled (later events are stale and ignored).
    poll_at: Option<Ps>,
    /// Polled model: rounds whose pages are crossing the link, by end time.
    flights: VecDeque<Flight>,
    /// Polled model: pages in a flight, with the flight's id.
    in_flight: FxHashMap<u64, u64>,
    next_flight: u64,
    /// Polled model with a transfer-set prefetcher: the end of the current interval (seed paged-memory §4.1),
    /// the demand pages sent in it so far, and the last demand page sent.
    interval_end: Option<Ps>,
    interval_demand: usize,
    last_demand: Option<u64>,
    /// Events the caller must schedule besides the one a call returns (polled model).
    pub events: Vec<Next>,
    /// Polled model: the µTLBs with no far fault left after the last `batch_done` (only they resume).
    resumed: Vec<u32>,
    seed: u64,
    /// VA blocks with GPU state (DMA-mapped, a physical chunk): their first touch is paid.
    gpu_blocks: FxHashSet<u64>,
    /// Root chunks taken from the allocator and not owned by a block.
    free_chunks: u64,
    /// Root chunks taken from the allocator so far, and at most.
    allocated_chunks: u64,
    capacity_chunks: u64,
    oversubscription: f64,
    /// The VA blocks owning a chunk, in eviction order.
    chunks: Chunks,
    /// Page-granular eviction (`uvm.eviction.granularity = "page"`): GPU memory
    /// in 4 KiB pages, the pages holding one in eviction order, and the pages
    /// of the batch in service (pinned).
    page_evict: Option<Box<PageMemory>>,
    /// GPU memory has been full (uvm.prefetch.when_full applies from then on).
    pub full: bool,
    /// Evictions copy back only the pages the GPU stored to (`uvm.eviction.write_back = "dirty"`).
    pub(super) dirty_only: bool,
    /// Evicted 4 KiB pages whose GPU translations the world must shoot down (page granularity).
    pub shootdown_pages: Vec<u64>,
    /// Pages evicted to the host (resident there now: a later fault copies them back).
    cpu_evicted: FxHashMap<u64, PageMask>,
    /// Evicted VA blocks whose GPU translations the caller must shoot down.
    pub shootdowns: Vec<u64>,
    prefetch: PrefetchConfig,
    /// Managed allocations as sorted page ranges (prefetch candidates, block ends).
    allocs: Vec<(u64, u64)>,
    /// Sequential prefetch: every managed page below it is resident or in service.
    seq_cursor: u64,
    /// Locality prefetch: resident pages a window passed over since they last arrived (diagnostic).
    window_skipped: FxHashSet<u64>,
    /// Oracle prefetch: pages in first-touch order, and how far the transfer sets took them.
    oracle: Vec<u64>,
    oracle_at: usize,
    /// Recording the first-touch order (the oracle's first pass): pages in order, and those seen.
    first_touch: Option<(Vec<u64>, FxHashSet<u64>)>,
    /// The managed pages a recording can see (the union of the allocations), and whether it has
    /// seen them all: nothing later can add to the order, so the first pass may stop there.
    first_touch_pages: u64,
    first_touch_complete: bool,
    /// VA blocks mapped on the CPU: the host threads that touched them and the pages mapped.
    cpu_mapped: FxHashMap<u64, HostMap>,
    /// Page ranges resident on the CPU (host-initialised); other pages are
    /// populated on the GPU by zero-filling, without a transfer.
    cpu_resident: Vec<(u64, u64)>,
    state: State,
    /// Batches in the current bottom-half run, and the limit.
    run_batches: u32,
    max_batches: u32,
    /// The buffer's PUT pointer as the driver last read it: faults written by then (`time <=`) are between GET and
    /// PUT; a fetch reads it again only when it has taken every fault up to it.
    cached_put: Ps,
    update_put_ratio: u32,
    /// The duplicates and faults of the batch in service (the flush's UPDATE_PUT test).
    batch_dups: (u64, u64),
    pub stats: UvmStats,
    /// Per-batch records, when `records` is on.
    pub records: Option<Vec<BatchRecord>>,
    /// Per-fault records, when `fault_records` is on, and how many more there were.
    pub fault_records: Option<Vec<FaultRecord>>,
    fault_records_max: u64,
    pub fault_records_dropped: u64,
    /// Per-migration records, when `records` is on.
    pub migrations: Option<Vec<MigrationRecord>>,
    pub thrashing: Thrashing,
    /// Pinned pages' unpin deadlines the caller must schedule (`Ev::UvmUnpin`).
    pub unpin_wakeups: Vec<Ps>,
    unpin_scheduled: Ps,
    advise: AdviseConfig,
    /// Page ranges of the allocations under the hint (sorted).
    /// Hinted allocations (first page, end, hint), sorted.
    advised: Vec<(u64, u64, Advice)>,
    preunmap: PreunmapConfig,
    worker: Worker,
    /// Blocks the worker unmapped that no batch has serviced since.
    worker_done: FxHashSet<u64>,
    cpu_fault: Ps,
    /// cudaMemPrefetchAsync calls (`migrate.rs`).
    pub async_prefetch: migrate::AsyncPrefetchStats,
    /// Access-counter migrations (`counters.rs`): the driver is busy with one until then, its pages.
    busy_until: Ps,
    counter_pages: Vec<u64>,
    pub counters: counters::CounterStats,
}

impl Fault {
    fn access(&self) -> &'static str {
        if self.prefetch {
            "prefetch"
        } else if self.write {
            "write"
        } else {
            "read"
        }
    }
}

fn us(x: f64) -> Ps {
    ns_to_ps(x * 1000.0)
}

/// How many of a batch's entries (in buffer order) the driver's fetch leaves
/// after coalescing (`fetch_fault_buffer_try_merge_entry`): an entry merges
/// into its µTLB's last entry of the batch if they name the same page, or
/// else into the batch's last entry if it names the same page with an access
/// type no more intrusive (prefetch < read < write); a merged entry is never
/// sorted or looked at again. Duplicates that are not adjacent in this sense
/// survive the fetch and are skipped only after the sort.
fn fetch_coalesced(fetched: &[Fault]) -> u64 {
    let kind = |f: &Fault| {
        if f.write {
            2u8
        } else if f.prefetch {
            0
        } else {
            1
        }
    };
    let mut utlb_last: FxHashMap<u32, (u64, u8)> = FxHashMap::default();
    let mut last: Option<(u64, u8)> = None;
    let mut kept = 0;
    for f in fetched {
        let k = kind(f);
        if let Some(e) = utlb_last.get_mut(&f.utlb).filter(|e| e.0 == f.vpn) {
            // The more intrusive access becomes the representative.
            e.1 = e.1.max(k);
            continue;
        }
        if last.is_some_and(|(vpn, lk)| vpn == f.vpn && k <= lk) {
            continue;
        }
        utlb_last.insert(f.utlb, (f.vpn, k));
        last = Some((f.vpn, k));
        kept += 1;
    }
    kept
}

/// One of a (µTLB, page) pair's outstanding faults ended.
fn unpend(pending: &mut FxHashMap<(u32, u64), u32>, by_warp: &mut FxHashSet<(u32, u64, u32)>, f: &Fault) {
    by_warp.remove(&(f.utlb, f.vpn, f.warp));
    let key = (f.utlb, f.vpn);
    if let Some(n) = pending.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            pending.remove(&key);
        }
    }
}

impl Uvm {
    pub fn new(c: &UvmConfig, utlbs: usize, sms: usize, seed: u64) -> Uvm {
        Uvm {
            buffer: VecDeque::new(),
            capacity: c.fault_buffer_entries as usize,
            batch_size: c.batch_size as usize,
            policy: c.replay_policy,
            limit: c.utlb_fault_limit,
            outstanding: vec![0; utlbs],
            parked: vec![VecDeque::new(); utlbs],
            by_warp: FxHashSet::default(),
            pending: FxHashMap::default(),
            utlb_merge: c.utlb_merge_faults || c.cost_model == CostModel::Polled,
            uncounted: FxHashSet::default(),
            merged_take_mshr: c.merged_faults_take_mshr,
            sm_next: if c.sm_fault_interval_ns > 0.0 { vec![0; sms] } else { vec![] },
            sm_interval: ns_to_ps(c.sm_fault_interval_ns),
            replay_latency: ns_to_ps(c.replay_latency_ns),
            fetch_after_replay: c.fetch_after_replay_wait
                && c.replay_policy == ReplayPolicy::BatchFlush
                && c.cost_model == CostModel::Driver,
            retries: vec![],
            // The fixed latency covers the whole service, interrupt included.
            interrupt: if c.cost_model == CostModel::Driver { us(c.interrupt_us) } else { 0 },
            costs: Costs {
                batch: us(c.batch_us),
                per_fault: us(c.per_fault_us),
                fetch_entry: us(c.fetch_entry_us),
                per_duplicate: us(c.per_duplicate_us),
                per_block: us(c.per_block_us),
                first_touch: us(c.first_touch_us),
                first_touch_tail: c.first_touch_tail,
                unmap: us(c.unmap_us),
                unmap_per_page: us(c.unmap_per_page_us),
                unmap_per_thread: us(c.unmap_per_thread_us),
                pma_alloc: us(c.pma_alloc_us),
                pma_chunk_blocks: c.pma_chunk_blocks,
                evict: us(c.eviction.evict_us),
                zero_per_page: us(c.zero_us_per_page),
                map: us(c.map_us),
                tracker: us(c.tracker_us),
                replay: us(c.replay_us),
                async_copies: c.async_copies,
            },
            seed: mix64(seed ^ 0x7576_6d5f_6674),
            gpu_blocks: FxHashSet::default(),
            free_chunks: 0,
            allocated_chunks: 0,
            capacity_chunks: if c.gpu_memory_bytes.0 > 0 { c.gpu_memory_bytes.0 / BLOCK_BYTES } else { u64::MAX },
            oversubscription: c.oversubscription,
            chunks: Chunks::new(c.eviction.policy, seed),
            page_evict: (c.eviction.granularity == EvictionGranularity::Page).then(|| {
                let capacity = if c.gpu_memory_bytes.0 > 0 { c.gpu_memory_bytes.0 / 4096 } else { u64::MAX };
                Box::new(PageMemory { capacity, pages: Pages::new(c.eviction.policy, seed), pinned: FxHashSet::default() })
            }),
            full: false,
            dirty_only: c.eviction.write_back == WriteBack::Dirty,
            shootdown_pages: vec![],
            cpu_evicted: FxHashMap::default(),
            shootdowns: vec![],
            prefetch: c.prefetch.clone(),
            allocs: vec![],
            seq_cursor: 0,
            window_skipped: FxHashSet::default(),
            oracle: vec![],
            oracle_at: 0,
            first_touch: None,
            first_touch_pages: 0,
            first_touch_complete: false,
            cpu_mapped: FxHashMap::default(),
            cpu_resident: vec![],
            // The polled model's latency runs from each fault's arrival, before its round: a round costs nothing more.
            fixed: match c.cost_model {
                CostModel::FixedLatency => Some(us(c.fault_latency_us)),
                CostModel::Polled => Some(0),
                CostModel::Driver => None,
            },
            polled: (c.cost_model == CostModel::Polled).then(|| us(c.fault_latency_us)),
            land_per_copy: c.land_per_copy,
            merge: c.merge_far_faults,
            poll_at: None,
            flights: VecDeque::new(),
            in_flight: FxHashMap::default(),
            next_flight: 0,
            interval_end: None,
            interval_demand: 0,
            last_demand: None,
            events: vec![],
            resumed: vec![],
            state: State::Idle,
            run_batches: 0,
            cached_put: 0,
            update_put_ratio: c.replay_update_put_ratio,
            batch_dups: (0, 0),
            max_batches: c.max_batches_per_service,
            stats: UvmStats::default(),
            records: c.records.then(Vec::new),
            fault_records: c.fault_records.then(Vec::new),
            fault_records_max: c.fault_records_max,
            fault_records_dropped: 0,
            migrations: c.records.then(Vec::new),
            thrashing: Thrashing::new(&c.thrashing),
            unpin_wakeups: vec![],
            unpin_scheduled: 0,
            advise: c.advise.clone(),
            advised: vec![],
            preunmap: c.preunmap.clone(),
            worker: Worker::default(),
            worker_done: FxHashSet::default(),
            cpu_fault: us(c.cpu_fault_us),
            async_prefetch: migrate::AsyncPrefetchStats::default(),
            busy_until: 0,
            counter_pages: vec![],
            counters: counters::CounterStats::default(),
        }
    }

    /// A walk raised `f`. Returns when the driver must be woken, if it was idle.
    pub fn raise(&mut self, f: Fault) -> Next {
        let n = self.pending.entry((f.utlb, f.vpn)).or_insert(0);
        if *n > 0 && (self.utlb_merge || self.by_warp.contains(&(f.utlb, f.vpn, f.warp))) {
            // The µTLB already has a miss outstanding for this page: the new one merges
            // into it (its MSHR), no second fault. Faulting warps wait for residency.
            self.stats.merged += 1;
            return Next::Nothing;
        }
        *n += 1;
        self.by_warp.insert((f.utlb, f.vpn, f.warp));
        if !self.can_write(&f) {
            // The µTLB holds the miss (hardware keeps it; nothing is walked again) until a replay.
            self.stats.throttled += 1;
            self.parked[f.utlb as usize].push_back(f);
            return Next::Nothing;
        }
        self.write(f)
    }

    /// Whether `f` may enter the buffer now: its µTLB is under its limit (prefetches escape it) and the ring has room
    /// (retries on their way hold a slot).
    fn can_write(&self, f: &Fault) -> bool {
        (f.prefetch || self.outstanding[f.utlb as usize] < self.limit || self.merges_free(f))
            && self.buffer.len() + self.retries.len() < self.capacity
    }

    /// With `uvm.merged_faults_take_mshr = false`: `f`'s page is already in service for another
    /// µTLB (buffered or crossing the link), so `f` will merge and takes no MSHR of its own.
    fn merges_free(&self, f: &Fault) -> bool {
        !self.merged_take_mshr
            && self.merge
            && self.polled.is_some()
            && (self.in_flight.get(&f.vpn).is_some_and(|&id| self.flights.iter().any(|x| x.id == id && x.end >= f.time))
                || self.buffer.iter().any(|g| g.vpn == f.vpn))
    }

    /// The faults retried at the last replay: walk each again from its `time`, then `rewrite` it.
    pub fn take_retries(&mut self) -> Vec<Fault> {
        std::mem::take(&mut self.retries)
    }

    /// A retried access's walk ended at `f.time` and found no mapping: its fault enters the buffer
    /// (its µTLB slot was taken at the replay).
    pub fn rewrite(&mut self, f: Fault) -> Next {
        self.outstanding[f.utlb as usize] -= 1;
        self.write(f)
    }

    /// Write `f` to the buffer, after the SM's rate throttle lets it through.
    fn write(&mut self, mut f: Fault) -> Next {
        if !self.sm_next.is_empty() && !f.prefetch {
            let next = &mut self.sm_next[f.sm as usize];
            f.time = f.time.max(*next);
            *next = f.time + self.sm_interval;
        }
        if self.merges_free(&f) {
            self.uncounted.insert((f.utlb, f.vpn));
        } else {
            self.outstanding[f.utlb as usize] += 1;
        }
        self.stats.raw += 1;
        if self.polled.is_some() && self.merge {
            // Its page is crossing the link: the GMMU's MSHR for the page notifies this µTLB too when it lands.
            let flight = self.in_flight.get(&f.vpn).and_then(|&id| self.flights.iter_mut().find(|x| x.id == id && x.end >= f.time));
            if let Some(flight) = flight {
                self.stats.fetched += 1;
                self.stats.duplicates += 1;
                self.stats.joined += 1;
                flight.faults.push(f);
                let batch = self.stats.batches;
                self.record_fault(&f, batch, Outcome::Duplicate);
                return Next::Nothing;
            }
        }
        // The hardware writes faults in the order they occur; walks processed
        // later may end earlier, so insert by time (ties keep raise order).
        if self.buffer.back().map_or(true, |g| g.time <= f.time) {
            self.buffer.push_back(f);
        } else {
            let at = self.buffer.partition_point(|g| g.time <= f.time);
            self.buffer.insert(at, f);
        }
        if let Some(latency) = self.polled {
            // Polled: the handler takes the fault in once its latency has run; a transfer-set
            // prefetcher's interval starts with the first fault of an idle handler.
            if self.prefetch.policy.per_batch() && self.interval_end.is_none() {
                self.interval_end = Some(f.time + latency);
            }
            match self.interval_end {
                // Held for the set: nothing to do for it before its interval ends.
                Some(end) if self.demand_waits_for_set() => self.request(end.max(f.time + latency)),
                _ => self.request(f.time + latency),
            }
            return Next::Nothing;
        }
        if matches!(self.state, State::Idle) {
            self.state = State::Woken;
            return Next::Service(f.time + self.interrupt);
        }
        Next::Nothing
    }

    /// After a replay the µTLBs retry the faults they hold, in order, while they
    /// have room; a page made resident meanwhile no longer faults. A retry
    /// reaches the GPU `replay_latency` after the replay and walks again (the
    /// world walks `retries`, then calls `rewrite`). The µTLBs retry side by
    /// side, so their walks interleave: one per µTLB per round.
    fn unpark(&mut self, now: Ps, residency: &Residency) {
        let mut active: Vec<usize> = (0..self.parked.len()).filter(|&u| !self.parked[u].is_empty()).collect();
        while !active.is_empty() {
            active.retain(|&u| {
                while let Some(f) = self.parked[u].front() {
                    if residency.is_mapped(f.vpn) {
                        unpend(&mut self.pending, &mut self.by_warp, f);
                        self.parked[u].pop_front();
                        continue;
                    }
                    if !self.can_write(f) {
                        return false;
                    }
                    let mut f = self.parked[u].pop_front().expect("front exists");
                    let retry = f.time.max(now + self.replay_latency);
                    self.stats.nacked.record(retry - f.time);
                    f.time = retry;
                    self.outstanding[f.utlb as usize] += 1;
                    self.stats.retried += 1;
                    self.retries.push(f);
                    return !self.parked[u].is_empty();
                }
                false
            });
        }
    }

    fn record_fault(&mut self, f: &Fault, batch: u64, outcome: Outcome) {
        let Some(rows) = self.fault_records.as_mut() else { return };
        if rows.len() as u64 >= self.fault_records_max {
            self.fault_records_dropped += 1;
            return;
        }
        rows.push(FaultRecord { time_ns: f.time as f64 / 1000.0, sm: f.sm, utlb: f.utlb, page: f.vpn, access: f.access(), batch, outcome });
    }

    /// Whether µTLB `utlb` has a fault outstanding for page `vpn` (buffered, in service or held).
    pub fn in_service(&self, utlb: u32, vpn: u64) -> bool {
        self.pending.contains_key(&(utlb, vpn))
    }

    /// Faults held at µTLBs, waiting for a replay.
    pub fn parked(&self) -> usize {
        self.parked.iter().map(VecDeque::len).sum()
    }

    /// The host program touched pages `first..end` (4 KiB page numbers) with
    /// `threads` host threads: they are CPU-resident and CPU-mapped.
    pub fn host_touch(&mut self, first: u64, end: u64, threads: u32) {
        self.cpu_resident.push((first, end));
        self.cpu_resident.sort_unstable();
        for block in first / BLOCK_PAGES..end.div_ceil(BLOCK_PAGES) {
            self.host_map(block, first, end, threads);
        }
    }

    /// The host maps the pages of `first..end` that lie in `block`, touched by `threads` host threads.
    fn host_map(&mut self, block: u64, first: u64, end: u64, threads: u32) {
        let base = block * BLOCK_PAGES;
        let (lo, hi) = (first.max(base) - base, end.min(base + BLOCK_PAGES) - base);
        let m = self.cpu_mapped.entry(block).or_default();
        m.threads = m.threads.max(threads);
        prefetch::set_range(&mut m.pages, lo as usize, hi as usize);
    }

    /// A managed allocation of pages `first..end` (4 KiB page numbers): prefetch
    /// candidates come from these, and with `uvm.oversubscription` they size GPU memory.
    pub fn add_allocation(&mut self, first: u64, end: u64) {
        let index = self.allocs.len() as u32;
        let advice = self.advise.of(index);
        if advice != Advice::None {
            self.advised.push((first, end, advice));
            self.advised.sort_unstable_by_key(|r| r.0);
        }
        self.allocs.push((first, end));
        self.allocs.sort_unstable();
        self.seq_cursor = self.allocs[0].0;
        if self.oversubscription > 0.0 {
            let blocks: u64 = self.allocs.iter().map(|&(f, e)| e.div_ceil(BLOCK_PAGES) - f / BLOCK_PAGES).sum();
            self.capacity_chunks = ((blocks as f64 / self.oversubscription).floor() as u64).max(1);
            if let Some(pm) = self.page_evict.as_mut() {
                let pages: u64 = self.allocs.iter().map(|&(f, e)| e - f).sum();
                pm.capacity = ((pages as f64 / self.oversubscription).floor() as u64).max(1);
            }
        }
    }

    /// Record the order in which pages are first faulted (the oracle's first pass).
    /// Call after the allocations are added (the world adds them all when it is built).
    pub fn record_first_touch(&mut self) {
        self.first_touch = Some((vec![], FxHashSet::default()));
        // Allocations are sorted; count their union (two never share a page, but be sure).
        let (mut pages, mut covered) = (0, 0);
        for &(f, e) in &self.allocs {
            let f = f.max(covered);
            if e > f {
                pages += e - f;
                covered = e;
            }
        }
        self.first_touch_pages = pages;
        self.first_touch_complete = pages == 0;
    }

    /// Recording the first-touch order (`record_first_touch`), every managed page has faulted.
    pub fn first_touch_complete(&self) -> bool {
        self.first_touch_complete
    }

    /// The pages in the order they were first faulted (serviced), when recording.
    pub fn first_touch_order(&mut self) -> Vec<u64> {
        self.first_touch.take().map(|(order, _)| order).unwrap_or_default()
    }

    /// The oracle prefetcher's order of pages.
    pub fn set_oracle(&mut self, order: Vec<u64>) {
        (self.oracle, self.oracle_at) = (order, 0);
    }

    /// GPU memory for managed data, in 2 MiB chunks (u64::MAX: unlimited).
    pub fn capacity_chunks(&self) -> u64 {
        self.capacity_chunks
    }

    /// Has `vpn` data on the host (host-initialised, or evicted there)? Else it is populated by zero-filling.
    fn cpu_resident(&self, vpn: u64) -> bool {
        let i = self.cpu_resident.partition_point(|&(first, _)| first <= vpn);
        (i > 0 && vpn < self.cpu_resident[i - 1].1)
            || self.cpu_evicted.get(&(vpn / BLOCK_PAGES)).is_some_and(|m| prefetch::get(m, (vpn % BLOCK_PAGES) as usize))
    }

    /// Does VA block `block` hold data anywhere (GPU, or the host)?
    fn populated(&self, block: u64, residency: &Residency) -> bool {
        let (first, end) = (block * BLOCK_PAGES, (block + 1) * BLOCK_PAGES);
        let i = self.cpu_resident.partition_point(|&(f, _)| f < end);
        residency.block_mask(block) != [0; 8]
            || self.cpu_evicted.contains_key(&block)
            || self.cpu_resident[..i].iter().any(|&(_, e)| e > first)
    }

    /// Pages of VA block `block` inside its allocation (512 but at an allocation's end).
    fn block_pages(&self, block: u64) -> usize {
        let first = block * BLOCK_PAGES;
        let i = self.allocs.partition_point(|&(f, _)| f <= first);
        match i.checked_sub(1).map(|i| self.allocs[i]) {
            Some((_, end)) if end > first => (end - first).min(BLOCK_PAGES) as usize,
            _ => BLOCK_PAGES as usize,
        }
    }

    /// The hint on `vpn`'s allocation.
    #[inline]
    fn advice_of(&self, vpn: u64) -> Advice {
        if self.advised.is_empty() {
            return Advice::None;
        }
        let i = self.advised.partition_point(|&(f, ..)| f <= vpn);
        if i > 0 && vpn < self.advised[i - 1].1 {
            self.advised[i - 1].2
        } else {
            Advice::None
        }
    }

    /// May `vpn` be prefetched to the GPU? Not when it thrashes, nor away from its preferred location (the host).
    fn prefetchable(&self, vpn: u64) -> bool {
        !self.thrashing.is_thrashing(vpn) && self.advice_of(vpn) != Advice::PreferredLocationHost
    }

    /// Apply the hints once the host program has initialised its data:
    /// accessed-by maps the host-resident pages of its allocations remotely.
    pub fn apply_advice(&mut self, residency: &mut Residency) {
        for &(first, end, advice) in &self.advised {
            if advice != Advice::AccessedBy {
                continue;
            }
            for p in first..end {
                if self.cpu_resident(p) && !residency.is_mapped(p) {
                    residency.map_remote(p);
                }
            }
        }
    }

    /// Record a copy over the link (the `migrations` table).
    fn record_migration(&mut self, (start, end, engine): (Ps, Ps, u32), pages: &[u64], dir: Dir, cause: Cause) {
        let Some(rows) = self.migrations.as_mut() else { return };
        rows.push(MigrationRecord {
            start_ns: start as f64 / 1000.0,
            end_ns: end as f64 / 1000.0,
            first_page: pages.iter().copied().min().unwrap_or(0),
            pages: pages.len() as u64,
            bytes: pages.len() as u64 * 4096,
            direction: if dir == Dir::HostToDevice { "h2d" } else { "d2h" },
            cause,
            copy_engine: engine,
        });
    }

    /// The host-mapped VA blocks a preemptive unmap triggered in `block` covers, in address order.
    fn unmap_range(&self, block: u64) -> Vec<u64> {
        let ranges: Vec<(u64, u64)> = match self.preunmap.granularity {
            UnmapGranularity::VaBlock => vec![(block, block + 1)],
            UnmapGranularity::Allocation => {
                let i = self.allocs.partition_point(|&(f, _)| f <= block * BLOCK_PAGES);
                match i.checked_sub(1).map(|i| self.allocs[i]) {
                    Some((f, e)) if e > block * BLOCK_PAGES => vec![(f / BLOCK_PAGES, e.div_ceil(BLOCK_PAGES))],
                    _ => vec![(block, block + 1)],
                }
            }
            UnmapGranularity::Space => self.allocs.iter().map(|&(f, e)| (f / BLOCK_PAGES, e.div_ceil(BLOCK_PAGES))).collect(),
        };
        let mut out: Vec<u64> = ranges.into_iter().flat_map(|(a, b)| a..b).filter(|b| self.cpu_mapped.contains_key(b)).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The driver, servicing `block` at `t`, must have it unmapped from the
    /// host: returns how long that takes in the batch (on demand, a
    /// synchronous preemptive range, or waiting for the worker).
    fn cpu_unmap(&mut self, block: u64, t: Ps, rec_skipped: &mut u64) -> Ps {
        if self.preunmap.mode == UnmapMode::Async {
            let cpu_mapped = &mut self.cpu_mapped;
            let costs = &self.costs;
            let done = self.worker.advance(t, |b| cpu_mapped.get(&b).map(|m| costs.unmap_block(m)));
            for b in &done {
                cpu_mapped.remove(b);
            }
            self.stats.unmaps_async += done.len() as u64;
            self.worker_done.extend(done);
            let Some(&mapped) = self.cpu_mapped.get(&block) else {
                // Done in the background already (or never host-mapped): nothing to do.
                if self.worker_done.remove(&block) {
                    *rec_skipped += 1;
                }
                return 0;
            };
            let held = self.worker.holding(t, |b| self.cpu_mapped.get(&b).map_or(0, |m| self.costs.unmap_block(m)));
            if let Some((b, end)) = held.filter(|&(b, _)| b == block) {
                // The worker holds the block's lock: wait for it.
                self.cpu_mapped.remove(&b);
                self.worker.finish_front(end);
                self.stats.unmaps_async += 1;
                self.stats.unmap_waits += 1;
                return end - t;
            }
            // Not reached yet: unmap it on demand (the fallback), and start the worker on the rest of the range.
            if !self.worker.is_queued(block) {
                let range = self.unmap_range(block);
                self.worker.enqueue(range.into_iter().filter(|&b| b != block), t);
            }
            self.cpu_mapped.remove(&block);
            self.stats.unmaps_on_demand += 1;
            return self.costs.unmap_block(&mapped);
        }
        let Some(mapped) = self.cpu_mapped.remove(&block) else { return 0 };
        if self.preunmap.granularity == UnmapGranularity::VaBlock {
            self.stats.unmaps_on_demand += 1;
            return self.costs.unmap_block(&mapped);
        }
        // One call over the range: every block's page tables, one TLB shootdown round.
        let (mut n, mut pages, mut most) = (1, prefetch::count(&mapped.pages) as u64, mapped.threads);
        for b in self.unmap_range(block) {
            if let Some(m) = self.cpu_mapped.remove(&b) {
                most = most.max(m.threads);
                pages += prefetch::count(&m.pages) as u64;
                n += 1;
            }
        }
        self.stats.unmaps_sync += n;
        self.costs.unmap_of(n, pages, most)
    }

    /// The host program accesses `pages` (4 KiB page numbers; `write`: stores) with
    /// `threads` host threads, at `now`: GPU-resident pages fault on the host
    /// and come back over the link (read-mostly duplicates stay for reads; a
    /// write invalidates them), a host thrashing on a page sleeps through its
    /// nap, pinned and remotely mapped pages are used in place. Returns when
    /// the access is done; evicted-like GPU translations to shoot down are
    /// left in `shootdowns`.
    pub fn host_access(
        &mut self,
        now: Ps,
        pages: std::ops::Range<u64>,
        write: bool,
        threads: u32,
        link: &mut Link,
        residency: &mut Residency,
    ) -> Ps {
        let (first, end) = (pages.start, pages.end);
        let mut t = now;
        let mut block = first / BLOCK_PAGES;
        while block * BLOCK_PAGES < end {
            let (lo, hi) = ((block * BLOCK_PAGES).max(first), ((block + 1) * BLOCK_PAGES).min(end));
            // Pages of the block the access takes from the GPU, after any thrashing nap.
            let mut take: Vec<u64> = vec![];
            let mut pin: Vec<u64> = vec![];
            let mut drop_dup: Vec<u64> = vec![];
            for p in lo..hi {
                if !residency.is_resident(p) {
                    continue;
                }
                if residency.is_dup(p) {
                    if write {
                        drop_dup.push(p);
                    }
                    continue;
                }
                let mut hint = self.thrashing.hint(p, Proc::Host, t);
                while let Hint::Throttle(until) = hint {
                    // The host thread sleeps through the nap, then faults again.
                    t = t.max(until);
                    hint = self.thrashing.hint(p, Proc::Host, t);
                }
                if hint == Hint::Pin {
                    pin.push(p);
                } else {
                    take.push(p);
                }
            }
            let mapped = self.cpu_mapped.contains_key(&block);
            if take.is_empty() && pin.is_empty() && drop_dup.is_empty() && mapped {
                block += 1;
                continue;
            }
            // One CPU fault per block: the driver unmaps the GPU (and revokes duplicates), copies back.
            self.stats.host_faults += 1;
            t += self.cpu_fault;
            if !take.is_empty() || !pin.is_empty() || !drop_dup.is_empty() {
                t += self.costs.map;
                self.shootdowns.push(block);
            }
            for (pages, cause) in [(take, Cause::Demand), (pin, Cause::Thrashing)] {
                if pages.is_empty() {
                    continue;
                }
                let bytes = pages.len() as u64 * 4096;
                let xfer = link.transfer_on(Dir::DeviceToHost, bytes, t, now);
                t = xfer.1;
                self.record_migration(xfer, &pages, Dir::DeviceToHost, cause);
                let host = self.cpu_evicted.entry(block).or_insert([0; 8]);
                for &p in &pages {
                    prefetch::set(host, (p % BLOCK_PAGES) as usize);
                    residency.unmake_resident(p);
                    if let Some(pm) = self.page_evict.as_mut() {
                        pm.pages.remove(p);
                        residency.forget(p);
                    }
                }
                self.stats.host_pages_d2h += pages.len() as u64;
                self.stats.host_bytes_d2h += bytes;
                if cause == Cause::Thrashing {
                    // Pinned on the host: the GPU keeps a remote mapping.
                    for &p in &pages {
                        residency.map_remote(p);
                    }
                    self.stats.remote_mapped += pages.len() as u64;
                } else {
                    self.thrashing.migrated(block, &pages, Proc::Host, t);
                    if self.advice_of(block * BLOCK_PAGES) == Advice::AccessedBy {
                        // Accessed-by: the GPU keeps a (now remote) mapping wherever the page goes.
                        for &p in &pages {
                            residency.map_remote(p);
                        }
                    }
                }
            }
            for &p in &drop_dup {
                residency.unmake_resident(p);
                if let Some(pm) = self.page_evict.as_mut() {
                    pm.pages.remove(p);
                    residency.forget(p);
                }
            }
            self.stats.dup_invalidations += drop_dup.len() as u64;
            if residency.block_mask(block) == [0; 8] {
                // Nothing of the block is left on the GPU: its chunk goes to the driver's UNUSED list.
                self.chunks.unused(block);
            }
            // Pages resident nowhere are populated on the host (zero-filled), and the block is host-mapped again.
            if (lo..hi).any(|p| !self.cpu_resident(p)) {
                self.host_touch(lo, hi, threads);
            }
            self.host_map(block, lo, hi, threads);
            block += 1;
        }
        self.stats.host_ps += t - now;
        self.collect_unpins();
        t
    }

    /// New pins: their deadlines for the caller to schedule.
    fn collect_unpins(&mut self) {
        if let Some(t) = self.thrashing.next_unpin() {
            if t != self.unpin_scheduled {
                self.unpin_scheduled = t;
                self.unpin_wakeups.push(t);
            }
        }
    }

    /// Unpin the pages whose pin period ended by `now`: the GPU's remote
    /// mappings go (their blocks are left in `shootdowns`), so the next GPU
    /// access faults and migrates the page.
    pub fn unpin_due(&mut self, now: Ps, residency: &mut Residency) {
        for p in self.thrashing.unpin_due(now) {
            if residency.unmap_remote(p) {
                residency.refault_epoch += 1;
            }
            let b = p / BLOCK_PAGES;
            if self.shootdowns.last() != Some(&b) {
                self.shootdowns.push(b);
            }
        }
        self.collect_unpins();
    }

    /// Page granularity: room in GPU memory for a block's `demand` and
    /// `prefetched` pages (not resident), evicting unpinned pages by the policy;
    /// prefetched pages that find no room are dropped (the last ones). The
    /// victims go back in one copy; their translations are shot down. Returns
    /// the time after the evictions, or None if the demand pages find no room
    /// (every other page is the batch's own): the block waits.
    fn make_room(
        &mut self,
        demand: &[u64],
        prefetched: &mut Vec<u64>,
        mut t: Ps,
        now: Ps,
        link: &mut Link,
        residency: &mut Residency,
    ) -> Option<Ps> {
        let pm = self.page_evict.as_mut().expect("page granularity");
        let need = demand.len() + prefetched.len();
        let free = pm.capacity.saturating_sub(pm.pages.len() as u64) as usize;
        let mut victims = vec![];
        if need > free {
            self.full = true;
            while free + victims.len() < need {
                match pm.pages.victim(|p| pm.pinned.contains(&p), |p| residency.last_touch(p)) {
                    Some(v) => victims.push(v),
                    None => break,
                }
            }
        }
        let room = free + victims.len();
        if !victims.is_empty() {
            if self.fixed.is_none() {
                t += self.costs.evict;
            }
            let dirty: Vec<u64> =
                if self.dirty_only { victims.iter().copied().filter(|&v| residency.is_dirty(v)).collect() } else { vec![] };
            for &v in &victims {
                self.stats.prefetch_evicted_untouched += residency.is_untouched(v) as u64;
                residency.unmake_resident(v);
                residency.forget(v);
                if self.advice_of(v) == Advice::AccessedBy {
                    residency.map_remote(v);
                }
                prefetch::set(self.cpu_evicted.entry(v / BLOCK_PAGES).or_insert([0; 8]), (v % BLOCK_PAGES) as usize);
                self.seq_cursor = self.seq_cursor.min(v);
            }
            self.shootdown_pages.extend(&victims);
            // Dirty write-back: a clean page's host copy is still valid, only the written ones go.
            let mut copied: Vec<u64> = if self.dirty_only { dirty } else { victims.clone() };
            let bytes = copied.len() as u64 * 4096;
            if bytes > 0 {
                let xfer = link.transfer_on(Dir::DeviceToHost, bytes, t, now);
                t = xfer.1;
                if self.migrations.is_some() {
                    copied.sort_unstable();
                    self.record_migration(xfer, &copied, Dir::DeviceToHost, Cause::Eviction);
                }
            }
            self.stats.evictions += victims.len() as u64;
            self.stats.pages_evicted += victims.len() as u64;
            self.stats.pages_evicted_clean += (victims.len() - copied.len()) as u64;
            self.stats.bytes_d2h += bytes;
        }
        if room < demand.len() {
            return None;
        }
        prefetched.truncate(room - demand.len());
        let pm = self.page_evict.as_mut().expect("page granularity");
        for &p in demand.iter().chain(prefetched.iter()) {
            pm.pages.insert(p, residency.touch(p));
            pm.pinned.insert(p);
        }
        self.full |= pm.pages.len() as u64 >= pm.capacity;
        Some(t)
    }

    /// The prefetch policy now: `policy`, or what `when_full` says once GPU memory has been full.
    fn prefetch_policy(&self) -> PrefetchPolicy {
        match (self.full, self.prefetch.when_full) {
            (false, _) | (true, WhenFull::Keep) => self.prefetch.policy,
            (true, WhenFull::Stop) => PrefetchPolicy::None,
            (true, WhenFull::Locality) => PrefetchPolicy::Locality,
        }
    }

    /// Polled model: whether demand pages wait for their interval's transfer set (seed paged-memory §4.1,
    /// `PrefetchConfig::demand_waits_for_set`), i.e. the option is on and transfer sets are being built.
    fn demand_waits_for_set(&self) -> bool {
        self.prefetch.demand_waits_for_set && self.prefetch_policy().per_batch()
    }

    /// Zheng's transfer set: pages to prefetch with the batch's unique demand
    /// pages `demand` (sorted), the last fault fetched being on `last`; `earlier`
    /// demand pages already went out in the same interval (polled model).
    fn transfer_set(&mut self, demand: &[u64], earlier: usize, last: Option<u64>, residency: &Residency) -> Vec<u64> {
        let want = (self.prefetch.transfer_set_pages as usize).saturating_sub(demand.len() + earlier);
        if want == 0 || self.allocs.is_empty() {
            return vec![];
        }
        let policy = self.prefetch_policy();
        // §5.2's continued prefetch takes only the window: filling the set sequentially
        // maximises PCIe bandwidth, which it must not do once every page displaces another.
        let fill = policy == PrefetchPolicy::Sequential
            || (policy == PrefetchPolicy::Locality && !(self.full && self.prefetch.when_full == WhenFull::Locality));
        let in_flight = &self.in_flight;
        let taken = |p: u64| residency.is_resident(p) || in_flight.contains_key(&p) || demand.binary_search(&p).is_ok();
        let mut out = match policy {
            PrefetchPolicy::Random => prefetch::random(&self.allocs, want, mix64(self.seed ^ 0x7072_6566 ^ self.stats.batches << 8), taken),
            PrefetchPolicy::Oracle => {
                let (out, at) = prefetch::oracle(&self.oracle, self.oracle_at, want, taken);
                self.oracle_at = at;
                out
            }
            PrefetchPolicy::Locality => match last {
                Some(l) => {
                    // Tracked once GPU memory is full: before, nothing is evicted and the set would only grow.
                    let track = self.full;
                    let skipped = &mut self.window_skipped;
                    let mut n = 0;
                    let out = prefetch::locality(&self.allocs, l, self.prefetch.window_pages as u64, want, |p| {
                        if track && residency.is_resident(p) {
                            n += skipped.insert(p) as u64;
                        }
                        taken(p)
                    });
                    self.stats.window_skipped_resident += n;
                    out
                }
                None => vec![],
            },
            _ => vec![],
        };
        if fill && out.len() < want {
            // Sequential fills the set; locality falls back to it when its window runs out.
            let chosen = out.clone();
            let (more, at) =
                prefetch::sequential(&self.allocs, self.seq_cursor, want - out.len(), |p| taken(p) || chosen.binary_search(&p).is_ok());
            // Every page the scan passed is resident, demanded or chosen: in service now.
            self.seq_cursor = at;
            out.extend(more);
        }
        out.sort_unstable();
        out.dedup();
        if !self.window_skipped.is_empty() {
            for p in &out {
                self.window_skipped.remove(p);
            }
        }
        out
    }

    /// Per-block prefetch (density, sequential-local, random-4k): the pages of
    /// VA block `block` to migrate with its faulted pages `faulted`.
    fn block_prefetch(&self, block: u64, faulted: &[u64], residency: &Residency) -> Vec<u64> {
        let p = &self.prefetch;
        let n = self.block_pages(block);
        let mut fmask = [0u64; 8];
        for &f in faulted {
            prefetch::set(&mut fmask, (f % BLOCK_PAGES) as usize);
        }
        let resident = residency.block_mask(block);
        let mask = match self.prefetch_policy() {
            PrefetchPolicy::Density if faulted.len() < p.min_faults as usize => return vec![],
            PrefetchPolicy::Density if p.gpu_preferred && !self.populated(block, residency) => {
                // Resident nowhere and the destination is the preferred location: the whole block.
                let mut m = [0u64; 8];
                prefetch::set_range(&mut m, 0, n);
                for w in 0..8 {
                    m[w] &= !fmask[w];
                }
                m
            }
            PrefetchPolicy::Density => prefetch::density(&resident, &fmask, n, p.threshold),
            PrefetchPolicy::SequentialLocal => prefetch::sequential_local(&fmask, n),
            PrefetchPolicy::Random4k => prefetch::random_4k(&resident, &fmask, n, mix64(self.seed ^ block ^ self.stats.batches << 40)),
            _ => return vec![],
        };
        prefetch::pages(&mask).filter(|&i| !prefetch::get(&resident, i)).map(|i| block * BLOCK_PAGES + i as u64).collect()
    }

    /// The first-touch cost of `block`: the median times a Pareto draw of the
    /// configured shape (deterministic per block and seed), capped at 20 ×.
    fn first_touch_cost(&self, block: u64) -> Ps {
        let c = &self.costs;
        // u in (0, 1]; x = u^(-1/a) has median 2^(1/a): divide it out.
        let u = ((mix64(self.seed ^ block) >> 11) + 1) as f64 / (1u64 << 53) as f64;
        let x = (u.powf(-1.0 / c.first_touch_tail) / 2f64.powf(1.0 / c.first_touch_tail)).min(20.0);
        (c.first_touch as f64 * x) as Ps
    }

    /// The driver runs at `now`: fetch and service one batch. Evictions take
    /// effect at once (their pages leave `residency`; the blocks to shoot down
    /// are left in `shootdowns`); the batch's pages become resident at its end.
    pub fn service(&mut self, now: Ps, link: &mut Link, residency: &mut Residency) -> Next {
        if self.polled.is_some() {
            return self.poll(now, link, residency);
        }
        if now < self.busy_until {
            // The bottom half is migrating for the access counters: the batch waits.
            return Next::Service(self.busy_until);
        }
        // Fetch up to batch_size faults written by the cached PUT; the driver reads PUT again only
        // once GET has reached it (fetch_fault_buffer_entries). The buffer is in time order.
        if !self.buffer.front().is_some_and(|f| f.time <= self.cached_put) {
            self.cached_put = now;
        }
        let mut fetched = Vec::with_capacity(self.batch_size);
        while fetched.len() < self.batch_size && self.buffer.front().is_some_and(|f| f.time <= self.cached_put) {
            fetched.extend(self.buffer.pop_front());
        }
        if fetched.is_empty() {
            // Nothing written yet: the bottom half ends (the driver's fetch finds GET == PUT) and
            // the next fault's interrupt wakes it again.
            self.run_batches = 0;
            return match self.buffer.front() {
                Some(f) => Next::Service(f.time + self.interrupt),
                None => {
                    self.state = State::Idle;
                    Next::Nothing
                }
            };
        }
        self.run_batch(now, fetched, None, link, residency)
    }

    /// Ask for a handler poll at `t` (polled model): only the earliest one needs an event,
    /// since each poll asks again for what is left.
    fn request(&mut self, t: Ps) {
        if self.poll_at.map_or(true, |p| t < p) {
            self.poll_at = Some(t);
            self.events.push(Next::Service(t));
        }
    }

    /// The polled handler at `now` (seed paged-memory §3.1): every fault whose
    /// latency has run since it arrived is taken in and its page sent over the
    /// link at once (one round, a [`Flight`]); with a transfer-set prefetcher,
    /// at the end of each interval of `fault_latency_us` the set is filled up to
    /// `transfer_set_pages` with the interval's demand pages counted first, and
    /// the prefetched pages go out (§4.1). The interval's demand pages go out
    /// with its set, at its end (`demand_waits_for_set`, §4.1: the set is
    /// "batch-submit[ted] at the end of the interval"), or, with that off, as
    /// soon as their latency has run.
    fn poll(&mut self, now: Ps, link: &mut Link, residency: &mut Residency) -> Next {
        if self.poll_at != Some(now) {
            return Next::Nothing; // superseded by an earlier poll, which asked again for what this one was for
        }
        self.poll_at = None;
        let latency = self.polled.expect("polled model");
        if self.demand_waits_for_set() {
            if let Some(end) = self.interval_end.filter(|&e| e > now) {
                self.request(end); // faults taken in now would only wait for the set
                return Next::Nothing;
            }
        }
        let mut fetched = vec![];
        while self.buffer.front().is_some_and(|f| f.time + latency <= now) {
            fetched.extend(self.buffer.pop_front());
        }
        if self.merge && !fetched.is_empty() {
            // Later faults (of other µTLBs) on these pages merge into their service: they go out together.
            let pages: FxHashSet<u64> = fetched.iter().map(|f| f.vpn).collect();
            let (same, rest): (VecDeque<Fault>, VecDeque<Fault>) =
                self.buffer.drain(..).partition(|f| f.time <= now && pages.contains(&f.vpn));
            self.buffer = rest;
            self.stats.joined += same.len() as u64;
            fetched.extend(same);
        }
        let mut demand: Vec<u64> =
            fetched.iter().map(|f| f.vpn).filter(|p| !residency.is_mapped(*p) && !self.in_flight.contains_key(p)).collect();
        demand.sort_unstable();
        demand.dedup();
        if let Some(l) = fetched.iter().rev().map(|f| f.vpn).find(|p| demand.binary_search(p).is_ok()) {
            self.last_demand = Some(l);
        }
        let interval = self.interval_end == Some(now);
        // With GPU memory full, a prefetch evicts: only intervals with demand faults prefetch then
        // (seed paged-memory §5.2: pages near the on-demand page), else prefetching would cycle the footprint.
        // (Page granularity counts GPU memory in pages; its chunk counters stay untouched.)
        let full = match &self.page_evict {
            Some(pm) => pm.capacity != u64::MAX && pm.pages.len() as u64 >= pm.capacity,
            None => self.capacity_chunks != u64::MAX && self.allocated_chunks >= self.capacity_chunks && self.free_chunks == 0,
        };
        let extra = if interval && (!full || self.interval_demand + demand.len() > 0) {
            // Once full, a set fills only what the link will have free: its room counts the pages still
            // queued on the link if they outnumber the interval's demand pages (see PrefetchConfig::full_link_room).
            let queued = if full && self.prefetch.full_link_room { (link.backlog_bytes(now) / 4096) as usize } else { 0 };
            self.transfer_set(&demand, self.interval_demand.max(queued), self.last_demand, residency)
        } else {
            vec![]
        };
        self.interval_demand += demand.len();
        let more = !extra.is_empty() && !full;
        let next =
            if fetched.is_empty() && extra.is_empty() { Next::Nothing } else { self.run_batch(now, fetched, Some(extra), link, residency) };
        if interval {
            // The next interval follows while there is anything to send or to wait for.
            let busy = more || self.interval_demand > 0 || !self.buffer.is_empty() || !self.flights.is_empty() || self.parked() > 0;
            self.interval_end = busy.then_some(now + latency);
            self.interval_demand = 0;
        }
        if let Some(f) = self.buffer.front() {
            self.request(f.time + latency);
        }
        if let Some(e) = self.interval_end {
            self.request(e);
        }
        next
    }

    /// Service the faults `fetched` at `now` (a batch, or a round of the polled
    /// handler, whose transfer-set prefetches come in `polled_extra`).
    fn run_batch(
        &mut self,
        now: Ps,
        fetched: Vec<Fault>,
        polled_extra: Option<Vec<u64>>,
        link: &mut Link,
        residency: &mut Residency,
    ) -> Next {
        let polled = polled_extra.is_some();
        // Coalesce, sort, group by VA block; pages already resident are stale.
        self.stats.fetched += fetched.len() as u64;
        let mut pages: Vec<u64> = fetched.iter().map(|f| f.vpn).collect();
        pages.sort_unstable();
        pages.dedup();
        let duplicates = (fetched.len() - pages.len()) as u64;
        self.stats.duplicates += duplicates;
        let coalesced = fetch_coalesced(&fetched);
        self.stats.fetch_merged += fetched.len() as u64 - coalesced;
        self.batch_dups = (duplicates, fetched.len() as u64);
        // Read-mostly: a store to a read-only duplicate collapses it (nothing moves; the host's mapping goes).
        let (collapse, writes): (Vec<u64>, Vec<u64>) = if self.advised.iter().any(|r| r.2 == Advice::ReadMostly) {
            let mut w: Vec<u64> = fetched.iter().filter(|f| f.write).map(|f| f.vpn).collect();
            w.sort_unstable();
            w.dedup();
            (w.iter().copied().filter(|&p| residency.is_dup(p)).collect(), w)
        } else {
            (vec![], vec![])
        };
        // Polled: a page already crossing the link is not sent again; its faults wait for that flight.
        pages.retain(|&p| !residency.is_mapped(p) && !self.in_flight.contains_key(&p));
        self.stats.unique += pages.len() as u64;
        if !self.window_skipped.is_empty() {
            let skipped = &mut self.window_skipped;
            self.stats.window_skipped_refaults += pages.iter().filter(|&p| skipped.remove(p)).count() as u64;
        }
        if let Some((order, seen)) = self.first_touch.as_mut() {
            // Within a batch, faults in the order they were raised.
            for f in &fetched {
                if pages.binary_search(&f.vpn).is_ok() && seen.insert(f.vpn) {
                    order.push(f.vpn);
                }
            }
            self.first_touch_complete = order.len() as u64 >= self.first_touch_pages;
        }
        // Thrashing hints and placement hints: throttled pages wait (their warps fault
        // again after the replay), pinned or hinted ones are mapped remotely.
        let mut throttled_pages: Vec<u64> = vec![];
        let mut remote: Vec<u64> = vec![];
        if self.thrashing.tracking() || !self.advised.is_empty() {
            let mut keep = Vec::with_capacity(pages.len());
            for &p in &pages {
                match self.thrashing.hint(p, Proc::Gpu, now) {
                    Hint::Throttle(_) => throttled_pages.push(p),
                    Hint::Pin => remote.push(p),
                    Hint::None => match self.advice_of(p) {
                        Advice::PreferredLocationHost => remote.push(p),
                        Advice::AccessedBy if self.cpu_resident(p) => remote.push(p),
                        _ => keep.push(p),
                    },
                }
            }
            pages = keep;
            if !throttled_pages.is_empty() {
                residency.refault_epoch += 1;
            }
        }
        let throttled = throttled_pages.len() as u64;
        if self.fault_records.is_some() {
            let mut seen = FxHashSet::default();
            let batch = self.stats.batches;
            for f in &fetched {
                let outcome = if !seen.insert(f.vpn) || self.in_flight.contains_key(&f.vpn) {
                    Outcome::Duplicate
                } else if residency.is_resident(f.vpn) || residency.is_remote(f.vpn) {
                    Outcome::Stale
                } else if throttled_pages.contains(&f.vpn) {
                    Outcome::Throttled
                } else {
                    Outcome::Serviced
                };
                self.record_fault(f, batch, outcome);
            }
        }
        // Zheng's transfer set: prefetch candidates fill what the demand pages leave.
        let mut extra = if let Some(extra) = polled_extra {
            extra
        } else if self.prefetch_policy().per_batch() {
            let last = fetched.iter().rev().map(|f| f.vpn).find(|p| pages.binary_search(p).is_ok());
            self.transfer_set(&pages, 0, last, residency)
        } else {
            vec![]
        };
        if self.thrashing.tracking() || !self.advised.is_empty() {
            extra.retain(|&p| self.prefetchable(p));
        }
        // The batch's VA blocks, in order, with their demanded and prefetched pages.
        let mut work: Vec<(u64, Vec<u64>, Vec<u64>)> = vec![];
        let (mut i, mut j) = (0, 0);
        while i < pages.len() || j < extra.len() {
            let block = pages.get(i).copied().unwrap_or(u64::MAX).min(extra.get(j).copied().unwrap_or(u64::MAX)) / BLOCK_PAGES;
            let n = pages[i..].iter().take_while(|&&p| p / BLOCK_PAGES == block).count();
            let m = extra[j..].iter().take_while(|&&p| p / BLOCK_PAGES == block).count();
            work.push((block, pages[i..i + n].to_vec(), extra[j..j + m].to_vec()));
            (i, j) = (i + n, j + m);
        }
        // Chunks of the blocks in service are pinned (ASSUMPTION: the whole batch's, not only the block being serviced).
        let mut pinned: Vec<u64> = work.iter().map(|w| w.0).collect();
        let per_copy = polled && self.land_per_copy;
        if per_copy {
            // Demand pages cross first, block by block, then the prefetched ones: each its own copy.
            let (mut first, mut then) = (vec![], vec![]);
            for (block, demand, prefetched) in work {
                if !demand.is_empty() {
                    first.push((block, demand, vec![]));
                }
                if !prefetched.is_empty() {
                    then.push((block, vec![], prefetched));
                }
            }
            first.extend(then);
            work = first;
        }
        // Polled, per copy: each copy's pages, landing when it arrives.
        let mut copies: Vec<Segment> = vec![];
        if polled {
            // And those of the pages still crossing the link.
            pinned.extend(self.in_flight.keys().map(|p| p / BLOCK_PAGES));
            pinned.sort_unstable();
            pinned.dedup();
        }
        if let Some(pm) = self.page_evict.as_mut() {
            pm.pinned.clear();
            // Pages still crossing the link (polled model) stay too.
            pm.pinned.extend(self.in_flight.keys());
        }
        let (blocks_before, bytes_before, d2h_before) = (self.stats.va_blocks, self.stats.bytes_h2d, self.stats.bytes_d2h);
        let (evictions_before, evicted_before, prefetched_before) = (self.stats.evictions, self.stats.pages_evicted, self.stats.prefetched);
        let remote_before = self.stats.remote_mapped;
        let th_before = (self.thrashing.stats.detected, self.thrashing.stats.pins, self.thrashing.stats.unpins);
        let driver = self.fixed.is_none();
        let c = self.costs.clone();
        let mut st = Stages::default();
        let mut t = now;
        // The fixed-latency model replaces every stage cost by one latency; transfers come on top. The
        // driver model's pre-processing: read the entries, sort, skip the duplicates the fetch left.
        let fetch =
            self.fixed.unwrap_or(c.batch + c.fetch_entry * fetched.len() as Ps + c.per_duplicate * (coalesced - pages.len() as u64));
        t += fetch;
        st.fetch += fetch;
        let mut segments = VecDeque::new();
        let mut serviced: Vec<u64> = vec![];
        let mut all_dup: Vec<u64> = vec![];
        let per_block_replay = self.policy == ReplayPolicy::Block && !polled;
        // Asynchronous copies (the driver model): each block's copy is pushed and the service goes on; the
        // batch's tracker wait takes the last one in (`UvmConfig::async_copies`).
        let async_copies = driver && c.async_copies && !per_block_replay;
        // Polled: the round's copies queue on the link together; the round ends when the last lands.
        let mut landed = t;
        // The driver model's stage costs (the fixed-latency model has none).
        let add = |t: &mut Ps, d: Ps, stage: &mut Ps| {
            if driver {
                *t += d;
                *stage += d;
            }
        };
        let mut unmaps_skipped = 0;
        // Collapses of read-only duplicates, per block: the host's mapping goes, the GPU's becomes writable.
        for group in collapse.chunk_by(|a, b| a / BLOCK_PAGES == b / BLOCK_PAGES) {
            let block = group[0] / BLOCK_PAGES;
            add(&mut t, c.per_block, &mut st.block);
            let d = self.cpu_unmap(block, t, &mut unmaps_skipped);
            add(&mut t, d, &mut st.unmap);
            add(&mut t, c.map, &mut st.map);
            for &p in group {
                residency.set_dup(p, false);
            }
            self.stats.dup_collapses += group.len() as u64;
        }
        // Remote mappings, per block: no chunk, no copy; pages resident nowhere are zero-filled on the host.
        for group in remote.chunk_by(|a, b| a / BLOCK_PAGES == b / BLOCK_PAGES) {
            let block = group[0] / BLOCK_PAGES;
            add(&mut t, c.per_block, &mut st.block);
            let fresh: Vec<u64> = group.iter().copied().filter(|&p| !self.cpu_resident(p)).collect();
            add(&mut t, c.zero_per_page * fresh.len() as Ps, &mut st.zero);
            let host = self.cpu_evicted.entry(block).or_insert([0; 8]);
            for p in fresh {
                prefetch::set(host, (p % BLOCK_PAGES) as usize);
            }
            add(&mut t, c.map, &mut st.map);
        }
        self.stats.remote_mapped += remote.len() as u64;
        // Per copy, each block's copy is its own flight from the round's start: its eviction (page granularity)
        // and copy do not wait for the evictions of the round's other blocks, only for the copy engines.
        let round_start = t;
        for (block, demand, mut prefetched) in work {
            if per_copy {
                t = round_start;
            }
            if !self.prefetch_policy().per_batch() && !demand.is_empty() {
                prefetched = self.block_prefetch(block, &demand, residency);
                if self.thrashing.tracking() || !self.advised.is_empty() {
                    prefetched.retain(|&p| self.prefetchable(p));
                }
            }
            let new_block = self.gpu_blocks.insert(block);
            add(&mut t, c.per_block, &mut st.block);
            // The block's faults, checked one by one before its pages are allocated and copied.
            add(&mut t, c.per_fault * demand.len() as Ps, &mut st.fault);
            if new_block {
                add(&mut t, self.first_touch_cost(block), &mut st.first_touch);
            }
            if self.page_evict.is_some() {
                // 4 KiB pages: room for the block's pages, evicting others (deferred if every page is pinned).
                match self.make_room(&demand, &mut prefetched, t, now, link, residency) {
                    Some(after) => {
                        st.evict += after - t;
                        t = after;
                        if per_copy {
                            landed = landed.max(after);
                        }
                    }
                    None => {
                        self.stats.deferred_blocks += 1;
                        residency.refault_epoch += 1;
                        self.seq_cursor = self.seq_cursor.min(block * BLOCK_PAGES);
                        continue;
                    }
                }
            // A GPU root chunk for the block's first resident page; when memory is full,
            // evict, then restart the block's service (the driver drops the block lock).
            } else if !self.chunks.owns(block) {
                if self.free_chunks == 0 {
                    if self.allocated_chunks < self.capacity_chunks {
                        add(&mut t, c.pma_alloc, &mut st.alloc);
                        let got = (c.pma_chunk_blocks as u64).min(self.capacity_chunks - self.allocated_chunks);
                        self.allocated_chunks += got;
                        self.free_chunks += got;
                    } else if let Some(victim) = self.chunks.victim(|b| pinned.binary_search(&b).is_ok()) {
                        add(&mut t, c.evict, &mut st.evict);
                        // Every resident page goes back (spec/uvm-driver.md; dirtiness is not tracked).
                        let after = self.evict_to_host(victim, t, now, link, residency);
                        st.evict += after - t;
                        t = after;
                        add(&mut t, c.per_block, &mut st.block);
                    } else {
                        // Every chunk belongs to this batch's blocks: this block waits; its
                        // faults are raised again after the replay.
                        self.stats.deferred_blocks += 1;
                        residency.refault_epoch += 1;
                        self.seq_cursor = self.seq_cursor.min(block * BLOCK_PAGES);
                        continue;
                    }
                }
                self.free_chunks -= 1;
                self.full |= self.free_chunks == 0 && self.allocated_chunks >= self.capacity_chunks;
                self.chunks.insert(block);
            } else {
                self.chunks.serviced(block);
            }
            // Read-mostly reads duplicate the pages: the host keeps its copy and its mapping.
            let duplicate =
                self.advice_of(block * BLOCK_PAGES) == Advice::ReadMostly && !demand.iter().any(|p| writes.binary_search(p).is_ok());
            if !duplicate {
                let d = self.cpu_unmap(block, t, &mut unmaps_skipped);
                add(&mut t, d, &mut st.unmap);
            }
            let moved = demand.len() + prefetched.len();
            let from_cpu: Vec<u64> = demand.iter().chain(&prefetched).copied().filter(|&p| self.cpu_resident(p)).collect();
            if driver {
                let zero = c.zero_per_page * (moved - from_cpu.len()) as Ps;
                t += zero;
                st.zero += zero;
            }
            let bytes = from_cpu.len() as u64 * 4096;
            // Polled, per copy: when this block's pages are in (zero-filled ones at once).
            let mut arrives = t;
            if bytes > 0 {
                let xfer = link.transfer_on(Dir::HostToDevice, bytes, t, now);
                st.copy += xfer.1 - xfer.0;
                arrives = xfer.1;
                if polled || async_copies {
                    landed = landed.max(xfer.1);
                } else {
                    st.transfer += xfer.1 - t;
                    t = xfer.1;
                }
                if self.migrations.is_some() {
                    // One copy, one row per cause: the faulted pages, then the prefetched ones.
                    let (dem, pre): (Vec<u64>, Vec<u64>) = from_cpu.iter().partition(|p| demand.binary_search(p).is_ok());
                    let (cd, cp) = if duplicate { (Cause::Hint, Cause::Hint) } else { (Cause::Demand, Cause::Prefetch) };
                    for (rows, cause) in [(dem, cd), (pre, cp)] {
                        if !rows.is_empty() {
                            self.record_migration(xfer, &rows, Dir::HostToDevice, cause);
                        }
                    }
                }
                if !duplicate {
                    self.thrashing.migrated(block, &from_cpu, Proc::Gpu, t);
                }
            }
            let dup: Vec<u64> = if duplicate {
                self.stats.dup_copies += moved as u64;
                demand.iter().chain(&prefetched).copied().collect()
            } else {
                vec![]
            };
            if driver {
                t += c.map;
                st.map += c.map;
            }
            self.stats.va_blocks += 1;
            self.stats.bytes_h2d += bytes;
            self.stats.prefetched += prefetched.len() as u64;
            if per_block_replay {
                if driver {
                    t += c.tracker + c.replay;
                    (st.tracker, st.replay) = (st.tracker + c.tracker, st.replay + c.replay);
                }
                segments.push_back(Segment { end: t, demand, prefetched, dup, ..Segment::default() });
            } else if per_copy {
                copies.push(Segment { end: arrives, demand, prefetched, dup, ..Segment::default() });
            } else {
                serviced.extend(demand);
                serviced.extend(prefetched);
                all_dup.extend(dup);
            }
        }
        if landed > t {
            // Asynchronous copies: the driver's wait on the batch tracker before the replay.
            if async_copies {
                st.tracker += landed - t;
            } else {
                st.transfer += landed - t;
            }
            t = landed;
        }
        if !per_block_replay || segments.is_empty() {
            if driver {
                t += c.tracker + c.replay;
                (st.tracker, st.replay) = (st.tracker + c.tracker, st.replay + c.replay);
            }
            // One segment: demand and prefetched pages told apart by the pages list. With
            // `fetch_after_replay` it ends at the flush and replay push, the driver's wait after it.
            let (demand, prefetched): (Vec<u64>, Vec<u64>) = serviced.into_iter().partition(|p| pages.binary_search(p).is_ok());
            let end = if self.fetch_after_replay { t - c.replay } else { t };
            segments.push_back(Segment { end, demand, prefetched, dup: all_dup, ..Segment::default() });
        }
        segments.back_mut().expect("at least one segment").remote = remote;
        let end = t;
        self.stats.batches += 1;
        self.stats.stages.accumulate(&st);
        if let Some(r) = self.records.as_mut() {
            let count = |pred: fn(&Fault) -> bool| fetched.iter().filter(|f| pred(f)).count() as u64;
            let ns = |d: Ps| d as f64 / 1000.0;
            r.push(BatchRecord {
                batch: self.stats.batches - 1,
                start_ns: ns(now),
                end_ns: ns(end),
                fetched: fetched.len() as u64,
                reads: count(|f| !f.write && !f.prefetch),
                writes: count(|f| f.write),
                prefetches: count(|f| f.prefetch),
                unique: pages.len() as u64,
                duplicates,
                fetch_merged: fetched.len() as u64 - coalesced,
                va_blocks: self.stats.va_blocks - blocks_before,
                bytes_h2d: self.stats.bytes_h2d - bytes_before,
                prefetched: self.stats.prefetched - prefetched_before,
                evictions: self.stats.evictions - evictions_before,
                pages_evicted: self.stats.pages_evicted - evicted_before,
                bytes_d2h: self.stats.bytes_d2h - d2h_before,
                flushed: 0,
                throttled,
                remote_mapped: self.stats.remote_mapped - remote_before,
                thrashing_detected: self.thrashing.stats.detected - th_before.0,
                pins: self.thrashing.stats.pins - th_before.1,
                unpins: self.thrashing.stats.unpins - th_before.2,
                unmaps_skipped,
                replays: 0,
                fetch_ns: ns(st.fetch),
                block_ns: ns(st.block),
                fault_ns: ns(st.fault),
                first_touch_ns: ns(st.first_touch),
                unmap_ns: ns(st.unmap),
                alloc_ns: ns(st.alloc),
                evict_ns: ns(st.evict),
                zero_ns: ns(st.zero),
                transfer_ns: ns(st.transfer),
                map_ns: ns(st.map),
                tracker_ns: ns(st.tracker),
                replay_ns: ns(st.replay),
                copy_ns: ns(st.copy),
            });
        }
        self.collect_unpins();
        if polled {
            return self.launch(now, copies, segments.pop_front().expect("one segment"), fetched);
        }
        let first_end = segments.front().expect("at least one segment").end;
        self.state = State::Servicing { segments, fetched, start: now };
        Next::BatchDone(first_end)
    }

    /// Polled model: a round's pages cross the link, as `copies` that land one
    /// by one (`uvm.land_per_copy`) and `rest`, which ends with the round and
    /// holds its other pages (all of them without per-copy landing) and its
    /// remote mappings. Each fault of `fetched` waits for the flight that
    /// carries its page (one of these, or an earlier round's); faults on pages
    /// none carries (resident already, throttled) end with `rest`.
    fn launch(&mut self, now: Ps, copies: Vec<Segment>, rest: Segment, fetched: Vec<Fault>) -> Next {
        let mut by_page: FxHashMap<u64, usize> = FxHashMap::default();
        for (i, c) in copies.iter().enumerate() {
            for &p in c.demand.iter().chain(&c.prefetched) {
                by_page.insert(p, i);
            }
        }
        let n = copies.len();
        let mut faults: Vec<Vec<Fault>> = vec![vec![]; n + 1];
        for f in fetched {
            if let Some(&i) = by_page.get(&f.vpn) {
                faults[i].push(f);
                continue;
            }
            match self.in_flight.get(&f.vpn).and_then(|&other| self.flights.iter_mut().find(|x| x.id == other)) {
                Some(other) => other.faults.push(f),
                None => faults[n].push(f),
            }
        }
        // The rest flies only if it has something to land (or nothing else does).
        let rest_flies = n == 0
            || !faults[n].is_empty()
            || !rest.demand.is_empty()
            || !rest.prefetched.is_empty()
            || !rest.remote.is_empty()
            || !rest.dup.is_empty();
        let round_end = if rest_flies { rest.end } else { copies.iter().map(|c| c.end).max().unwrap_or(rest.end) };
        let mut segments: Vec<(Segment, Vec<Fault>)> = copies.into_iter().zip(faults.iter_mut().map(std::mem::take)).collect();
        if rest_flies {
            segments.push((rest, std::mem::take(&mut faults[n])));
        }
        let mut first = None;
        let mut last_marked = false;
        // The last flight of the round to land is the last one ending at the round's end.
        let last_at = segments.iter().rposition(|(s, _)| s.end == round_end);
        for (k, (segment, faults)) in segments.into_iter().enumerate() {
            let id = self.next_flight;
            self.next_flight += 1;
            for &p in segment.demand.iter().chain(&segment.prefetched) {
                self.in_flight.insert(p, id);
            }
            let end = segment.end;
            let last = Some(k) == last_at;
            last_marked |= last;
            let at = self.flights.partition_point(|x| x.end <= end);
            self.flights.insert(at, Flight { id, start: now, end, segment, faults, last });
            match first {
                None => first = Some(end),
                Some(_) => self.events.push(Next::BatchDone(end)),
            }
        }
        debug_assert!(last_marked, "a round has a last flight");
        Next::BatchDone(first.expect("a round has a flight"))
    }

    /// The batch ends at `now`: map its pages, apply the replay policy.
    /// Returns what comes next, and whether the caller must replay the waiting warps now.
    pub fn batch_done(&mut self, now: Ps, residency: &mut Residency) -> (Next, bool) {
        if self.polled.is_some() {
            return self.land(now, residency);
        }
        let State::Servicing { segments, .. } = &mut self.state else { unreachable!("batch_done follows service") };
        let seg = segments.pop_front().expect("a servicing batch has a segment left");
        self.apply(seg, residency);
        if let Some(next) = self.state_next_segment() {
            // `block` policy: this VA block is mapped; replay, then the next block.
            self.stats.replays += 1;
            if let Some(last) = self.records.as_mut().and_then(|r| r.last_mut()) {
                last.replays += 1;
            }
            return (Next::BatchDone(next), true);
        }
        self.finish_batch(now, residency)
    }

    fn state_next_segment(&self) -> Option<Ps> {
        match &self.state {
            State::Servicing { segments, .. } => segments.front().map(|s| s.end),
            _ => None,
        }
    }

    /// Polled model: the earliest flight lands at `now`: its pages are resident, its
    /// faults free their MSHRs, the µTLBs retry what they hold (Nack-Replayable,
    /// seed paged-memory §3) and the waiting warps replay; µTLBs with no far fault
    /// left resume (blocking mode).
    fn land(&mut self, now: Ps, residency: &mut Residency) -> (Next, bool) {
        let flight = self.flights.pop_front().expect("a flight lands at each of its events");
        debug_assert_eq!(flight.end, now, "flights land in order");
        for p in flight.segment.demand.iter().chain(&flight.segment.prefetched) {
            self.in_flight.remove(p);
        }
        self.apply(flight.segment, residency);
        let mut touched: Vec<u32> = flight.faults.iter().map(|f| f.utlb).collect();
        touched.sort_unstable();
        touched.dedup();
        for f in &flight.faults {
            self.stats.far_fault.record(now - f.time);
            if !self.uncounted.remove(&(f.utlb, f.vpn)) {
                self.outstanding[f.utlb as usize] -= 1;
            }
            unpend(&mut self.pending, &mut self.by_warp, f);
        }
        if flight.last {
            self.stats.time_ps += now - flight.start;
            self.stats.batch.record(now - flight.start);
        }
        self.stats.replays += 1;
        self.unpark(now, residency);
        self.resumed = touched.into_iter().filter(|&u| self.outstanding[u as usize] == 0 && self.parked[u as usize].is_empty()).collect();
        (Next::Nothing, true)
    }

    /// GPU memory for managed data is limited: pages may be evicted.
    pub fn memory_limited(&self) -> bool {
        self.capacity_chunks != u64::MAX || self.page_evict.as_ref().is_some_and(|pm| pm.capacity != u64::MAX)
    }

    /// Pages resident or crossing the link, and faults buffered, in service and held at µTLBs (for reports).
    pub fn state_line(&self, residency: &Residency) -> String {
        let capacity = match &self.page_evict {
            Some(pm) if pm.capacity != u64::MAX => format!("{} 4 KiB pages", pm.capacity),
            _ if self.capacity_chunks != u64::MAX => format!("{} 2 MiB chunks", self.capacity_chunks),
            _ => "unlimited".into(),
        };
        format!(
            "UVM: {} pages resident (GPU memory: {capacity}), {} crossing the link; faults: {} buffered, {} in service, {} held at µTLBs; {} batches, {} pages evicted",
            residency.resident_pages(),
            self.in_flight.len(),
            self.buffer.len(),
            self.outstanding.iter().map(|&o| o as usize).sum::<usize>().saturating_sub(self.buffer.len()),
            self.parked(),
            self.stats.batches,
            self.stats.pages_evicted,
        )
    }

    /// Polled model: the µTLBs that may resume after the last `batch_done` (None: every µTLB, the batch models).
    pub fn take_resumed(&mut self) -> Option<Vec<u32>> {
        self.polled.is_some().then(|| std::mem::take(&mut self.resumed))
    }

    /// A segment's pages become resident and mapped.
    fn apply(&mut self, seg: Segment, residency: &mut Residency) {
        for p in seg.demand {
            // In flight and resident at once would mean a page migrated twice.
            debug_assert!(!residency.is_resident(p), "page {p:#x} serviced but already resident");
            residency.make_resident(p);
        }
        for p in seg.prefetched {
            debug_assert!(!residency.is_resident(p), "page {p:#x} prefetched but already resident");
            residency.make_prefetched(p);
        }
        for p in seg.remote {
            residency.map_remote(p);
        }
        for p in seg.dup {
            residency.set_dup(p, true);
        }
        debug_assert!(
            self.capacity_chunks == u64::MAX || residency.resident_pages() <= self.capacity_chunks * BLOCK_PAGES,
            "{} pages resident beyond the capacity of {} chunks",
            residency.resident_pages(),
            self.capacity_chunks
        );
    }

    /// The last segment of a batch is mapped: free the faults' µTLB slots, apply the replay policy.
    fn finish_batch(&mut self, now: Ps, residency: &mut Residency) -> (Next, bool) {
        let State::Servicing { fetched, start, .. } = std::mem::replace(&mut self.state, State::Idle) else {
            unreachable!("checked above")
        };
        for f in &fetched {
            self.outstanding[f.utlb as usize] -= 1;
            unpend(&mut self.pending, &mut self.by_warp, f);
        }
        if self.policy == ReplayPolicy::BatchFlush {
            // Flush up to the cached PUT, or, with more duplicates than update_put_ratio % of the
            // batch, up to the PUT read now (faults whose walks end later arrive after the flush).
            // A flushed fault's access is still pending at its µTLB, which raises it again after
            // the replay (a duplicate, seed uvm-driver §3.2.1).
            let (dups, faults) = self.batch_dups;
            if dups * 100 > faults * self.update_put_ratio as u64 {
                self.cached_put = now;
                self.stats.put_rereads += 1;
            }
            let put = self.cached_put;
            let before = self.buffer.len();
            let outstanding = &mut self.outstanding;
            let mut requeue: Vec<Fault> = vec![];
            self.buffer.retain(|f| {
                let keep = f.time > put;
                if !keep {
                    outstanding[f.utlb as usize] -= 1;
                    requeue.push(*f);
                }
                keep
            });
            if self.fault_records.is_some() {
                let batch = self.stats.batches.saturating_sub(1);
                for f in &requeue {
                    self.record_fault(f, batch, Outcome::Flushed);
                }
            }
            let parked = &mut self.parked;
            // Ahead of the faults the µTLB held back: they are older.
            for f in requeue.into_iter().rev() {
                parked[f.utlb as usize].push_front(f);
            }
            let n = (before - self.buffer.len()) as u64;
            self.stats.flushed += n;
            if let Some(last) = self.records.as_mut().and_then(|r| r.last_mut()) {
                last.flushed = n;
            }
        }
        // `fetch_after_replay`: `now` is the flush and replay push; the driver's wait for the replay ends
        // `replay_us` later, and it fetches then (whatever the buffer holds: an empty fetch ends the run).
        let wait = if self.fetch_after_replay { self.costs.replay } else { 0 };
        self.stats.time_ps += now + wait - start;
        self.stats.batch.record(now + wait - start);
        // `once` keeps servicing while faults are waiting in the buffer, and replays after.
        let replay = !(self.policy == ReplayPolicy::Once && self.buffer.iter().any(|f| f.time <= now));
        if replay {
            self.stats.replays += 1;
            if let Some(last) = self.records.as_mut().and_then(|r| r.last_mut()) {
                last.replays += 1;
            }
            self.unpark(now, residency);
        }
        let next = if self.fetch_after_replay {
            self.state = State::Woken;
            self.run_batches += 1;
            if self.run_batches >= self.max_batches {
                self.run_batches = 0;
                Next::Service(now + wait + self.interrupt)
            } else {
                Next::Service(now + wait)
            }
        } else if self.buffer.is_empty() {
            self.run_batches = 0;
            Next::Nothing
        } else {
            self.state = State::Woken;
            self.run_batches += 1;
            if self.run_batches >= self.max_batches {
                // The bottom half yields after max_batches_per_service; the next interrupt wakes it.
                self.run_batches = 0;
                Next::Service(now + self.interrupt)
            } else {
                Next::Service(now)
            }
        };
        (next, replay)
    }

    /// Conservation of faults (checked at the end of every debug run and in
    /// tests): every raised fault is fetched, flushed or still buffered, and
    /// the µTLBs count exactly the buffered and in-service ones as outstanding.
    /// (A run may end while a batch of stale faults is in service.)
    pub fn check_invariants(&self, residency: &Residency) -> Result<(), String> {
        let s = &self.stats;
        let buffered = self.buffer.len() as u64;
        if s.raw != s.fetched + s.flushed + buffered {
            return Err(format!("uvm: {} faults raised but {} fetched + {} flushed + {buffered} buffered", s.raw, s.fetched, s.flushed));
        }
        let in_service = match &self.state {
            State::Servicing { fetched, segments, .. } => {
                if let Some(p) = segments.iter().flat_map(|s| s.demand.iter().chain(&s.prefetched)).find(|&&p| residency.is_resident(p)) {
                    return Err(format!("uvm: page {p:#x} is being migrated but already resident"));
                }
                fetched.len() as u64
            }
            _ => 0,
        };
        let mut in_service = in_service;
        for f in &self.flights {
            if let Some(p) = f.segment.demand.iter().chain(&f.segment.prefetched).find(|&&p| residency.is_resident(p)) {
                return Err(format!("uvm: page {p:#x} is crossing the link but already resident"));
            }
            in_service += f.faults.len() as u64;
        }
        if self.capacity_chunks != u64::MAX {
            let cap = self.capacity_chunks;
            if self.chunks.len() as u64 > cap || self.allocated_chunks > cap {
                return Err(format!(
                    "uvm: {} chunks owned, {} allocated, beyond the capacity of {cap}",
                    self.chunks.len(),
                    self.allocated_chunks
                ));
            }
            if residency.resident_pages() > cap * BLOCK_PAGES {
                return Err(format!("uvm: {} pages resident, beyond the capacity of {cap} chunks", residency.resident_pages()));
            }
        }
        if let Some(pm) = self.page_evict.as_ref() {
            if pm.pages.len() as u64 > pm.capacity || residency.resident_pages() > pm.capacity {
                return Err(format!(
                    "uvm: {} pages hold GPU memory, {} resident, beyond the capacity of {} pages",
                    pm.pages.len(),
                    residency.resident_pages(),
                    pm.capacity
                ));
            }
        }
        let outstanding = self.outstanding.iter().map(|&o| o as u64).sum::<u64>() + self.uncounted.len() as u64;
        if outstanding != buffered + in_service {
            return Err(format!("uvm: µTLBs count {outstanding} outstanding faults, {buffered} buffered + {in_service} in service"));
        }
        Ok(())
    }

    pub fn describe(&self, out: &mut Vec<String>) {
        out.push(format!(
            "uvm driver: {:?}, {} faults buffered, {} rounds in flight",
            self.state_name(),
            self.buffer.len(),
            self.flights.len()
        ));
    }

    fn state_name(&self) -> &'static str {
        match self.state {
            State::Idle => "idle",
            State::Woken => "woken",
            State::Servicing { .. } => "servicing a batch",
        }
    }

    pub fn export(&self, m: &mut Metrics, residency: &Residency) {
        let s = &self.stats;
        m.int("uvm.faults.raw", s.raw);
        m.int("uvm.faults.fetched", s.fetched);
        m.int("uvm.faults.unique", s.unique);
        m.int("uvm.faults.duplicate", s.duplicates);
        m.int("uvm.faults.fetch_merged", s.fetch_merged);
        m.int("uvm.faults.flushed", s.flushed);
        m.int("uvm.flush_put_rereads", s.put_rereads);
        m.int("uvm.faults.throttled", s.throttled);
        m.int("uvm.faults.retried", s.retried);
        m.int("uvm.faults.merged", s.merged);
        m.int("uvm.fault_records_dropped", self.fault_records_dropped);
        m.int("uvm.batches", s.batches);
        m.int("uvm.va_blocks", s.va_blocks);
        m.int("uvm.bytes_h2d", s.bytes_h2d);
        m.int("uvm.replays", s.replays);
        m.int("uvm.prefetch.pages", s.prefetched);
        m.int("uvm.prefetched_pages", s.prefetched); // DESIGN.md's contract name for the same count
        m.int("uvm.prefetch.used", residency.prefetch_used);
        m.int("uvm.prefetch.wasted", s.prefetched - residency.prefetch_used);
        m.int("uvm.prefetch.evicted_unused", s.prefetch_evicted_untouched);
        m.int("uvm.prefetch.window_skipped_resident", s.window_skipped_resident);
        m.int("uvm.prefetch.window_skipped_refaults", s.window_skipped_refaults);
        m.int("uvm.evictions", s.evictions);
        m.int("uvm.pages_evicted", s.pages_evicted);
        m.int("uvm.pages_evicted_clean", s.pages_evicted_clean);
        m.int("uvm.bytes_d2h", s.bytes_d2h);
        m.int("uvm.va_blocks_deferred", s.deferred_blocks);
        let th = &self.thrashing.stats;
        m.int("uvm.thrashing.detected", th.detected);
        m.int("uvm.thrashing.events", th.events);
        m.int("uvm.thrashing.throttles_gpu", th.throttles[Proc::Gpu as usize]);
        m.int("uvm.thrashing.throttles_host", th.throttles[Proc::Host as usize]);
        m.int("uvm.thrashing.throttled_faults", th.throttled_faults);
        m.int("uvm.thrashing.pins", th.pins);
        m.int("uvm.thrashing.unpins", th.unpins);
        m.int("uvm.remote_mapped", s.remote_mapped);
        m.int("uvm.read_dup.copies", s.dup_copies);
        m.int("uvm.read_dup.collapses", s.dup_collapses);
        m.int("uvm.read_dup.invalidations", s.dup_invalidations);
        m.int("uvm.host.faults", s.host_faults);
        m.int("uvm.host.pages_d2h", s.host_pages_d2h);
        m.int("uvm.host.bytes_d2h", s.host_bytes_d2h);
        m.float("uvm.host.time_ns", s.host_ps as f64 / 1000.0);
        m.int("uvm.unmap.on_demand", s.unmaps_on_demand);
        m.int("uvm.unmap.sync", s.unmaps_sync);
        m.int("uvm.unmap.async", s.unmaps_async);
        m.int("uvm.unmap.waits", s.unmap_waits);
        let capacity = match &self.page_evict {
            Some(pm) if pm.capacity != u64::MAX => pm.capacity * 4096,
            Some(_) => 0,
            None if self.capacity_chunks == u64::MAX => 0,
            None => self.capacity_chunks * BLOCK_BYTES,
        };
        m.int("uvm.gpu_memory_bytes", capacity);
        m.float("uvm.time_ns", s.time_ps as f64 / 1000.0);
        for (name, ps) in s.stages.named() {
            m.float(format!("uvm.stage.{name}_ns"), ps as f64 / 1000.0);
        }
        m.float("uvm.stage.copy_ns", s.stages.copy as f64 / 1000.0);
        s.batch.export(m, "uvm.batch_ns");
        if self.polled.is_some() {
            s.far_fault.export(m, "uvm.polled.fault_ns");
            m.int("uvm.polled.faults", s.far_fault.count());
            m.int("uvm.polled.merged", s.joined);
            m.float("uvm.polled.fault_time_ns", s.far_fault.sum_ps() as f64 / 1000.0);
            s.nacked.export(m, "uvm.polled.nacked_ns");
        }
        m.ratio("uvm.faults_per_batch", s.raw - s.flushed, s.batches);
        m.int("uvm.resident_pages", residency.resident_pages());
        self.async_prefetch.export(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use evict::EvictionPolicy;

    fn uvm(policy: ReplayPolicy, limit: u32) -> (Uvm, Link, Residency) {
        let mut c = UvmConfig { replay_policy: policy, utlb_fault_limit: limit, batch_size: 4, ..UvmConfig::default() };
        c.interrupt_us = 1.0;
        (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default())
    }

    fn fault(vpn: u64, utlb: u32) -> Fault {
        Fault { time: 0, vpn, utlb, sm: utlb * 2, warp: 0, write: false, prefetch: false }
    }

    /// The world's part of a replay: each retried access walks again (`walk` ps) and faults again.
    fn retry(u: &mut Uvm, walk: Ps) -> Vec<Next> {
        u.take_retries().into_iter().map(|f| u.rewrite(Fault { time: f.time + walk, ..f })).collect()
    }

    #[test]
    fn first_fault_wakes_the_driver_after_the_interrupt() {
        let (mut u, _, _) = uvm(ReplayPolicy::BatchFlush, 56);
        assert_eq!(u.raise(fault(1, 0)), Next::Service(1_000_000));
        assert_eq!(u.raise(fault(2, 0)), Next::Nothing, "already woken");
    }

    #[test]
    fn a_batch_coalesces_groups_by_block_and_maps_at_its_end() {
        let (mut u, mut link, mut res) = uvm(ReplayPolicy::BatchFlush, 56);
        for (vpn, utlb) in [(7, 0), (7, 1), (600, 0), (8, 1), (9, 0), (10, 0)] {
            u.raise(fault(vpn, utlb));
        }
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        // Batch of 4: pages 7, 7 (duplicate), 600, 8 -> 3 pages in 2 VA blocks.
        assert_eq!((u.stats.duplicates, u.stats.unique, u.stats.va_blocks), (1, 3, 2));
        assert!(!res.is_resident(7), "not mapped before the batch ends");
        // Costs: 10 + 4 x 0.2 + 2 x (8 + transfer) + 5 µs.
        assert!(end > 31_800_000, "{end}");
        // batch-flush discarded the two faults left (9, 10): the buffer is empty, the driver
        // stops. Their µTLB retries them when the replay arrives (1 µs), walks (0.5 µs here)
        // and faults again; the first of them interrupts the driver (1 µs).
        assert_eq!(u.batch_done(end, &mut res), (Next::Nothing, true));
        assert!(res.is_resident(7) && res.is_resident(600) && res.is_resident(8));
        assert_eq!(u.retries.iter().map(|f| (f.vpn, f.time)).collect::<Vec<_>>(), vec![(9, end + 1_000_000), (10, end + 1_000_000)]);
        assert_eq!(retry(&mut u, 500_000), vec![Next::Service(end + 2_500_000), Next::Nothing]);
        assert_eq!((u.stats.flushed, u.stats.raw, u.buffer.len(), u.outstanding.clone()), (2, 8, 2, vec![2, 0]));
        assert!(u.buffer.iter().all(|f| f.time == end + 1_500_000 && (f.vpn == 9 || f.vpn == 10)));
        assert!(!res.is_resident(9));
        u.check_invariants(&res).unwrap();
    }

    #[test]
    fn batch_policy_keeps_the_rest_for_the_next_batch() {
        let (mut u, mut link, mut res) = uvm(ReplayPolicy::Batch, 56);
        for vpn in 0..6 {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        assert_eq!(u.batch_done(end, &mut res), (Next::Service(end), true));
        let Next::BatchDone(end2) = u.service(end, &mut link, &mut res) else { panic!() };
        assert_eq!(u.batch_done(end2, &mut res), (Next::Nothing, true));
        assert_eq!((u.stats.batches, u.stats.unique, u.stats.flushed), (2, 6, 0));
        u.check_invariants(&res).unwrap();
    }

    #[test]
    fn batch_flush_discards_up_to_the_cached_put_unless_duplicates_pass_the_ratio() {
        let run = |ratio: u32| {
            let mut c = UvmConfig {
                replay_policy: ReplayPolicy::BatchFlush,
                batch_size: 4,
                replay_update_put_ratio: ratio,
                ..UvmConfig::default()
            };
            c.interrupt_us = 1.0;
            let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
            for (vpn, utlb) in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (3, 1)] {
                u.raise(fault(vpn, utlb));
            }
            // The fetch reads PUT at 0 and takes pages 0, 0, 1, 1 (2 duplicates of 4); pages 2 and 3 stay before PUT.
            let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
            // Written while the batch is serviced: after the PUT the fetch read.
            u.raise(Fault { time: end / 2, ..fault(20, 0) });
            let (next, replay) = u.batch_done(end, &mut res);
            assert!(replay);
            let left = u.buffer.iter().map(|f| f.vpn).collect::<Vec<_>>();
            // The flushed faults come back after the replay.
            retry(&mut u, 1000);
            u.check_invariants(&res).unwrap();
            (u.stats.flushed, u.stats.put_rereads, left, next == Next::Service(end))
        };
        // 50% duplicates is not more than the default 50%: CACHED_PUT discards pages 2 and 3 only; page 20 is
        // fetched by the next batch, at once.
        assert_eq!(run(50), (2, 0, vec![20], true));
        // Above the ratio the flush reads PUT again (UPDATE_PUT) and discards page 20 too: the buffer is empty.
        assert_eq!(run(40), (3, 1, vec![], false));
    }

    #[test]
    fn fetch_after_replay_wait_fetches_the_faults_re_raised_before_the_wait_ends() {
        // Pages 0, 0, 1, 1 (2 duplicates of 4: above a 40% ratio, UPDATE_PUT), pages 2 and 3 left in the buffer,
        // page 20 written while the batch is serviced. replay_us 5 µs, replay_latency 1 µs, interrupt 1 µs.
        let run = |on: bool| {
            let mut c = UvmConfig {
                replay_policy: ReplayPolicy::BatchFlush,
                batch_size: 4,
                replay_update_put_ratio: 40,
                fetch_after_replay_wait: on,
                ..UvmConfig::default()
            };
            c.interrupt_us = 1.0;
            let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
            for (vpn, utlb) in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (3, 1)] {
                u.raise(fault(vpn, utlb));
            }
            let Next::BatchDone(at) = u.service(0, &mut link, &mut res) else { panic!() };
            u.raise(Fault { time: at / 2, ..fault(20, 0) });
            let (next, replay) = u.batch_done(at, &mut res);
            assert!(replay);
            // All three are flushed (UPDATE_PUT at `at`) and retried 1 µs after `at`.
            assert_eq!((u.stats.flushed, u.stats.put_rereads), (3, 1));
            assert!(u.retries.iter().all(|f| f.time == at + 1_000_000), "{:?}", u.retries);
            // They walk 0.5 µs and are written at at + 1.5 µs.
            let rewritten = retry(&mut u, 500_000);
            (u, link, res, at, next, rewritten)
        };
        let (_, _, _, end, next, rewritten) = run(false);
        // Off: the batch ends after the replay wait; the buffer is empty, the driver stops, and the
        // first re-raised fault interrupts it 1 µs after it is written.
        assert_eq!(next, Next::Nothing);
        assert_eq!(rewritten, vec![Next::Service(end + 2_500_000), Next::Nothing, Next::Nothing]);
        let (mut u, mut link, mut res, push, next, rewritten) = run(true);
        // On: the flush and replay are pushed replay_us (5 µs) before the batch ends; the driver
        // fetches when its wait ends, without an interrupt, and takes the three re-raised faults.
        assert_eq!(push, end - 5_000_000);
        assert_eq!(next, Next::Service(push + 5_000_000));
        assert_eq!(rewritten, vec![Next::Nothing; 3], "the driver is already due to fetch");
        assert_eq!(u.stats.time_ps, end, "the batch's time includes the wait");
        let Next::BatchDone(_) = u.service(push + 5_000_000, &mut link, &mut res) else { panic!("three faults to fetch") };
        assert_eq!((u.stats.batches, u.stats.fetched), (2, 7));
        u.check_invariants(&res).unwrap();
        // A fetch after the wait that finds nothing ends the bottom half.
        let c = UvmConfig { batch_size: 4, fetch_after_replay_wait: true, ..UvmConfig::default() };
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
        for vpn in 0..4 {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(push) = u.service(0, &mut link, &mut res) else { panic!() };
        assert_eq!(u.batch_done(push, &mut res), (Next::Service(push + 5_000_000), true));
        assert_eq!(u.service(push + 5_000_000, &mut link, &mut res), Next::Nothing);
        assert!(matches!(u.state, State::Idle));
        u.check_invariants(&res).unwrap();
        // The wait cannot end before the replay reaches the GPU.
        let c = UvmConfig { fetch_after_replay_wait: true, replay_latency_ns: 6000.0, ..UvmConfig::default() };
        assert_eq!(c.validate().unwrap_err().0, "uvm.replay_latency_ns");
        assert!(UvmConfig { fetch_after_replay_wait: false, ..c }.validate().is_ok());
    }

    #[test]
    fn fixed_latency_model_costs_one_latency_plus_transfers() {
        let c = UvmConfig { cost_model: CostModel::FixedLatency, fault_latency_us: 20.0, ..UvmConfig::default() };
        let mut link_cfg = Config::default().link;
        link_cfg.latency_ns = 0.0;
        link_cfg.bandwidth_gbps = 16.0;
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&link_cfg), Residency::default());
        u.host_touch(0, 512, 1);
        u.raise(fault(1, 0));
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        // 20 µs, then 4 KiB at 16 GB/s = 256 ns (seed paged-memory §4.1: "~250 nanoseconds").
        assert!((20_256_000..20_300_000).contains(&end), "{end}");
    }

    #[test]
    fn the_bottom_half_yields_after_max_batches() {
        let c = UvmConfig {
            replay_policy: ReplayPolicy::Batch,
            batch_size: 1,
            max_batches_per_service: 2,
            interrupt_us: 1.0,
            ..UvmConfig::default()
        };
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
        for vpn in 0..3 {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(e1) = u.service(0, &mut link, &mut res) else { panic!() };
        assert_eq!(u.batch_done(e1, &mut res).0, Next::Service(e1), "the second batch follows at once");
        let Next::BatchDone(e2) = u.service(e1, &mut link, &mut res) else { panic!() };
        assert_eq!(u.batch_done(e2, &mut res).0, Next::Service(e2 + 1_000_000), "after 2 batches: wait for an interrupt");
    }

    #[test]
    fn once_policy_replays_only_when_the_buffer_is_drained() {
        let (mut u, mut link, mut res) = uvm(ReplayPolicy::Once, 56);
        for vpn in 0..6 {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        assert_eq!(u.batch_done(end, &mut res), (Next::Service(end), false), "faults left: no replay yet");
        let Next::BatchDone(end2) = u.service(end, &mut link, &mut res) else { panic!() };
        assert_eq!(u.batch_done(end2, &mut res), (Next::Nothing, true));
        assert_eq!((u.stats.batches, u.stats.replays), (2, 1));
        u.check_invariants(&res).unwrap();
    }

    #[test]
    fn the_utlb_limit_holds_faults_until_a_replay() {
        let (mut u, mut link, mut res) = uvm(ReplayPolicy::Batch, 2);
        for vpn in 0..5 {
            u.raise(fault(vpn, 1));
        }
        u.raise(fault(9, 0));
        assert_eq!((u.stats.raw, u.stats.throttled, u.parked()), (3, 3, 3));
        res.make_resident(3); // made resident meanwhile (e.g. by another µTLB's fault)
        let Next::BatchDone(end) = u.service(10_000_000, &mut link, &mut res) else { panic!() };
        // The batch took all three buffered faults: the driver stops until the retries fault again.
        assert_eq!(u.batch_done(end, &mut res), (Next::Nothing, true));
        assert_eq!(retry(&mut u, 0), vec![Next::Service(end + 2_000_000), Next::Nothing]);
        // The replay freed both of µTLB 1's slots: it raises pages 2 and 4 (3 no longer faults), in order.
        let raised: Vec<u64> = u.buffer.iter().map(|f| f.vpn).collect();
        assert_eq!((raised, u.parked(), u.stats.raw), (vec![2, 4], 0, 5));
        u.check_invariants(&res).unwrap();
    }

    #[test]
    fn a_utlbs_repeated_miss_writes_a_duplicate_unless_it_merges() {
        for merge in [false, true] {
            let c = UvmConfig { utlb_merge_faults: merge, utlb_fault_limit: 3, batch_size: 8, ..UvmConfig::default() };
            let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
            // µTLB 0 misses on page 5 three times (three warps), then on page 6; µTLB 1 on page 5 once.
            for (vpn, utlb, warp) in [(5, 0, 0), (5, 0, 1), (5, 0, 2), (6, 0, 0), (5, 1, 3)] {
                u.raise(Fault { warp, ..fault(vpn, utlb) });
            }
            if merge {
                // One entry per (µTLB, page): 5 and 6 of µTLB 0, 5 of µTLB 1.
                assert_eq!((u.stats.raw, u.stats.merged, u.parked()), (3, 2, 0));
            } else {
                // Every miss writes an entry; the third of µTLB 0 fills its limit of 3, so page 6 waits at the µTLB.
                assert_eq!((u.stats.raw, u.stats.merged, u.parked()), (4, 0, 1));
            }
            assert!(u.in_service(0, 5) && u.in_service(1, 5));
            let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
            // The driver fetches every entry and services page 5 once: the repeats are duplicates.
            let (fetched, dups) = if merge { (3, 1) } else { (4, 3) };
            assert_eq!((u.stats.fetched, u.stats.duplicates, u.stats.unique), (fetched, dups, if merge { 2 } else { 1 }));
            u.batch_done(end, &mut res);
            assert!(!u.in_service(0, 5) && !u.in_service(1, 5), "every entry of page 5 ended with the batch");
            retry(&mut u, 0); // the held miss on page 6 walks again and faults
            assert_eq!(u.buffer.iter().map(|f| f.vpn).collect::<Vec<_>>(), if merge { vec![] } else { vec![6] });
            u.check_invariants(&res).unwrap();
        }
    }

    #[test]
    fn a_utlb_holds_a_warps_access_to_a_page_once() {
        let c = UvmConfig { utlb_fault_limit: 1, batch_size: 8, ..UvmConfig::default() };
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
        let warp = |vpn: u64, warp: u32| Fault { warp, ..fault(vpn, 0) };
        u.raise(warp(1, 0)); // written: µTLB 0's one slot
        u.raise(warp(1, 0)); // the same warp's access again (re-executed): merges into the written one
        u.raise(warp(2, 0)); // held
        u.raise(warp(2, 0)); // merges into the held one
        u.raise(warp(2, 1)); // another warp's access to the page: held too
        assert_eq!((u.stats.raw, u.stats.merged, u.parked()), (1, 2, 2));
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        // The replay freed the slot: the first held access is retried; page 2's other stays held.
        let retried: Vec<(u64, u32)> = u.take_retries().iter().map(|f| (f.vpn, f.warp)).collect();
        assert_eq!((retried, u.parked()), (vec![(2, 0)], 1));
        assert!(u.in_service(0, 2));
    }

    #[test]
    fn the_sm_throttle_spaces_an_sms_faults() {
        let c = UvmConfig { sm_fault_interval_ns: 100.0, batch_size: 4, ..UvmConfig::default() };
        let (mut u, res) = (Uvm::new(&c, 2, 4, 0), Residency::default());
        let at = |vpn: u64, sm: u32| Fault { time: 0, vpn, utlb: sm / 2, sm, warp: 0, write: false, prefetch: false };
        for vpn in 0..3 {
            u.raise(at(vpn, 1));
        }
        u.raise(at(9, 2));
        let mut pre = at(11, 1);
        pre.prefetch = true;
        u.raise(pre);
        // SM 1's faults at 0, 100, 200 ns; SM 2's at 0; the prefetch escapes the throttle.
        let order: Vec<(u64, Ps)> = u.buffer.iter().map(|f| (f.vpn, f.time)).collect();
        assert_eq!(order, vec![(0, 0), (9, 0), (11, 0), (1, 100_000), (2, 200_000)]);
        u.check_invariants(&res).unwrap();
    }

    #[test]
    fn stale_faults_are_not_migrated_again() {
        let (mut u, mut link, mut res) = uvm(ReplayPolicy::BatchFlush, 56);
        res.make_resident(3);
        u.raise(fault(3, 0));
        let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
        assert_eq!((u.stats.unique, u.stats.bytes_h2d), (0, 0));
    }

    /// A driver-cost-model Uvm with records, batches of `batch`, and every stage cost distinct.
    fn costed(policy: ReplayPolicy, batch: u32) -> (Uvm, Link, Residency) {
        let c = UvmConfig {
            replay_policy: policy,
            batch_size: batch,
            records: true,
            first_touch_tail: 100.0, // nearly constant: the median
            pma_chunk_blocks: 2,
            ..UvmConfig::default()
        };
        (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default())
    }

    #[test]
    fn unmap_cost_counts_each_host_mapped_page_once() {
        let (mut u, mut link, mut res) = costed(ReplayPolicy::Batch, 8);
        // Block 0: pages 0..100 initialised, then 50..150 touched again (150 distinct pages), by 1 thread;
        // block 1: pages 512..522 by 2 threads.
        u.host_touch(0, 100, 1);
        u.host_touch(50, 150, 1);
        u.host_touch(512, 522, 2);
        for vpn in [1, 513] {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
        let r = u.records.as_ref().unwrap()[0].clone();
        // Hand-checked: two blocks at 1.6 µs each, 160 pages at 0.163 µs, one further thread (3 µs) for block 1.
        let want = 2.0 * 1.6 + 150.0 * 0.163 + 10.0 * 0.163 + 3.0;
        assert!((r.unmap_ns / 1000.0 - want).abs() < 1e-6, "{} vs {want}", r.unmap_ns / 1000.0);
    }

    #[test]
    fn stage_costs_follow_block_state_and_sum_to_the_batch_time() {
        let (mut u, mut link, mut res) = costed(ReplayPolicy::Batch, 8);
        // Block 0 host-initialised by 4 threads; block 1 untouched by the host.
        u.host_touch(0, 512, 4);
        for vpn in [1, 2, 513] {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        let r = u.records.as_ref().unwrap()[0].clone();
        let us = |ns: f64| ns / 1000.0;
        assert!((us(r.fetch_ns) - (10.0 + 3.0 * 0.01)).abs() < 1e-6, "three entries read");
        assert!((us(r.block_ns) - 16.0).abs() < 1e-6, "two blocks");
        assert!((us(r.fault_ns) - 3.0 * 0.19).abs() < 1e-6, "three distinct pages, checked in their blocks");
        assert!((us(r.first_touch_ns) - 30.0).abs() < 0.5, "both blocks are new: 2 x the 15 µs median");
        assert!((us(r.alloc_ns) - 100.0).abs() < 1e-6, "one allocator call gives 2 root chunks");
        assert!((us(r.unmap_ns) - (1.6 + 512.0 * 0.163 + 3.0 * 3.0)).abs() < 1e-6, "only block 0 is CPU-mapped: 512 pages, 4 threads");
        assert!((us(r.zero_ns) - 0.02).abs() < 1e-6, "page 513 is resident nowhere: zero-filled");
        assert_eq!(r.bytes_h2d, 2 * 4096, "pages 1 and 2 come from the CPU");
        // Block 0's 8 KiB copy lands while block 1 is set up: the tracker waits for nothing more than its fixed cost.
        assert!(r.copy_ns > 0.0 && r.transfer_ns == 0.0);
        assert!((us(r.map_ns) - 4.0).abs() < 1e-6 && (us(r.tracker_ns) - 5.0).abs() < 1e-6 && (us(r.replay_ns) - 5.0).abs() < 1e-6);
        let sum = r.fetch_ns
            + r.block_ns
            + r.fault_ns
            + r.first_touch_ns
            + r.unmap_ns
            + r.alloc_ns
            + r.zero_ns
            + r.transfer_ns
            + r.map_ns
            + r.tracker_ns
            + r.replay_ns;
        assert!((sum - (r.end_ns - r.start_ns)).abs() < 1e-3, "{sum} vs {}", r.end_ns - r.start_ns);
        assert_eq!(u.batch_done(end, &mut res), (Next::Nothing, true));
        // Block 0 again (page 3): no first touch, no unmap (already unmapped), no allocation.
        u.raise(fault(3, 0));
        let Next::BatchDone(_) = u.service(end, &mut link, &mut res) else { panic!() };
        let r = u.records.as_ref().unwrap()[1].clone();
        assert_eq!((r.first_touch_ns, r.unmap_ns, r.alloc_ns), (0.0, 0.0, 0.0));
        // summary.json's per-stage totals are the batches' stage columns summed.
        let mut m = Metrics::default();
        u.export(&mut m, &res);
        let recs = u.records.as_ref().unwrap();
        let total = |f: fn(&BatchRecord) -> f64| recs.iter().map(f).sum::<f64>();
        for (name, want) in [
            ("fetch", total(|r| r.fetch_ns)),
            ("fault", total(|r| r.fault_ns)),
            ("unmap", total(|r| r.unmap_ns)),
            ("replay", total(|r| r.replay_ns)),
            ("copy", total(|r| r.copy_ns)),
        ] {
            let got = m.get(&format!("uvm.stage.{name}_ns")).unwrap();
            assert!((got - want).abs() < 1e-3 && want > 0.0, "{name}: {got} vs {want}");
        }
    }

    #[test]
    fn the_fetch_merges_an_entry_into_its_utlbs_last_or_the_batchs_last() {
        let f = |vpn: u64, utlb: u32, write: bool| Fault { write, ..fault(vpn, utlb) };
        // Hand-checked, in buffer order (µTLB, page, access):
        //   (0, 5, R) kept; (0, 5, R) same as µTLB 0's last: merged; (1, 5, R) same page as the batch's last, no
        //   more intrusive: merged; (1, 5, W) µTLB 1 has no entry of its own yet, and a write is more intrusive than
        //   the batch's last read: kept; (0, 6, R) kept; (1, 5, R) µTLB 1's last is page 5: merged; (0, 5, R) µTLB 0's
        //   last is now 6 and the batch's last is 5 written (W >= R): merged; (0, 7, R) kept.
        let b =
            [f(5, 0, false), f(5, 0, false), f(5, 1, false), f(5, 1, true), f(6, 0, false), f(5, 1, false), f(5, 0, false), f(7, 0, false)];
        assert_eq!(fetch_coalesced(&b), 5);
        // Duplicates that are not adjacent survive the fetch (the sort skips them later).
        assert_eq!(fetch_coalesced(&[f(1, 0, false), f(2, 1, false), f(1, 2, false), f(2, 3, false)]), 4);
        // A prefetch after a read of its page merges; a read after a prefetch does not (more intrusive).
        let pf = |vpn: u64, utlb: u32| Fault { prefetch: true, ..fault(vpn, utlb) };
        assert_eq!(fetch_coalesced(&[f(9, 0, false), pf(9, 1)]), 1);
        assert_eq!(fetch_coalesced(&[pf(9, 0), f(9, 1, false)]), 2);
        assert_eq!(fetch_coalesced(&[]), 0);
    }

    #[test]
    fn a_fetched_entry_costs_its_read_and_only_distinct_pages_cost_the_per_fault_work() {
        let (mut u, mut link, mut res) = costed(ReplayPolicy::Batch, 8);
        // Page 1 three times from µTLB 0 (two merge at fetch), page 2 from µTLB 1, page 1 again from µTLB 1
        // (not adjacent to a page-1 entry: kept, then skipped after the sort).
        // Each from its own warp (a warp's repeated access to a page is one fault).
        for (warp, (vpn, utlb)) in [(1, 0), (1, 0), (1, 0), (2, 1), (1, 1)].into_iter().enumerate() {
            u.raise(Fault { warp: warp as u32, ..fault(vpn, utlb) });
        }
        let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
        let r = u.records.as_ref().unwrap()[0].clone();
        // Pre-processing: batch_us 10 + 5 entries read at 0.01; the service: 2 pages at 0.19.
        assert!((r.fetch_ns / 1000.0 - (10.0 + 5.0 * 0.01)).abs() < 1e-6, "{}", r.fetch_ns);
        assert!((r.fault_ns / 1000.0 - 2.0 * 0.19).abs() < 1e-6, "{}", r.fault_ns);
        assert_eq!((u.stats.fetched, u.stats.fetch_merged, u.stats.duplicates), (5, 2, 3));
        assert_eq!((r.fetched, r.fetch_merged, r.duplicates, r.unique), (5, 2, 3, 2), "the batch record");
        // A duplicate that survives the fetch costs per_duplicate_us (default 0): here one, page 1 from µTLB 1.
        let c =
            UvmConfig { per_duplicate_us: 1.0, replay_policy: ReplayPolicy::Batch, batch_size: 8, records: true, ..UvmConfig::default() };
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
        for (warp, (vpn, utlb)) in [(1, 0), (1, 0), (1, 0), (2, 1), (1, 1)].into_iter().enumerate() {
            u.raise(Fault { warp: warp as u32, ..fault(vpn, utlb) });
        }
        let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
        let r2 = u.records.as_ref().unwrap()[0].clone();
        assert!((r2.fetch_ns - r.fetch_ns - 1000.0).abs() < 1e-6, "{} vs {}", r2.fetch_ns, r.fetch_ns);
    }

    /// Two host-initialised blocks, 4 faults each, over a slow link (each block's 16 KiB copy takes ~160 µs,
    /// longer than a block's CPU work): the batch record with copies asynchronous or not, and a given unmap cost.
    fn two_block_batch(async_copies: bool, unmap_per_page_us: f64) -> BatchRecord {
        let c = UvmConfig {
            replay_policy: ReplayPolicy::Batch,
            batch_size: 8,
            records: true,
            first_touch_tail: 100.0,
            pma_chunk_blocks: 2,
            async_copies,
            unmap_per_page_us,
            ..UvmConfig::default()
        };
        let mut lc = Config::default().link;
        lc.bandwidth_gbps = 0.1;
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&lc), Residency::default());
        u.host_touch(0, 1024, 1);
        for vpn in [0, 1, 2, 3, 512, 513, 514, 515] {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
        u.records.as_ref().unwrap()[0].clone()
    }

    #[test]
    fn async_copies_overlap_the_next_blocks_work_and_the_tracker_waits_for_the_rest() {
        let dur = |r: &BatchRecord| r.end_ns - r.start_ns;
        let cpu =
            |r: &BatchRecord| r.fetch_ns + r.block_ns + r.fault_ns + r.first_touch_ns + r.unmap_ns + r.alloc_ns + r.zero_ns + r.map_ns;
        let sync = two_block_batch(false, 0.163);
        let asy = two_block_batch(true, 0.163);
        for r in [&sync, &asy] {
            let sum = cpu(r) + r.transfer_ns + r.tracker_ns + r.replay_ns;
            assert!((sum - dur(r)).abs() < 1e-3, "stages sum to the batch: {sum} vs {}", dur(r));
            assert!(r.copy_ns > 2.0 * 150_000.0, "two ~160 µs copies: {}", r.copy_ns);
        }
        // Synchronous: each block waits for its copy; the tracker only costs its fixed 5 µs.
        assert!((sync.transfer_ns - sync.copy_ns).abs() < 1e-3 && (sync.tracker_ns - 5000.0).abs() < 1e-3);
        // Asynchronous: block 0's map and block 1's CPU work (8 µs, 4 faults × 0.19 µs, first touch ~15 µs, unmap
        // 1.6 + 512 × 0.163 µs)
        // run while block 0's copy is on the link, block 1's map while its own copy is; the copies follow each other
        // on the one host-to-device engine either way. So the batch is shorter by that CPU work (the first-touch draw
        // varies by about a µs around its median), and the tracker waits for what is left of the copies.
        assert_eq!(asy.transfer_ns, 0.0);
        let hidden = (2.0 + 8.0 + 4.0 * 0.19 + 15.0 + 1.6 + 512.0 * 0.163 + 2.0) * 1000.0;
        assert!((dur(&sync) - dur(&asy) - hidden).abs() < 2000.0, "overlap {} vs {hidden}", dur(&sync) - dur(&asy));
        assert!(asy.tracker_ns > 5000.0 + 100_000.0, "block 1's copy is still on the link: {}", asy.tracker_ns);
        // Cheaper unmapping (seed uvm-driver §6.3.1, Fig. 6.3): the batch is shorter, by less than the unmap saved, and
        // the tracker wait grows: the copies no longer hide behind the CPU work.
        let cheap = two_block_batch(true, 0.0);
        let saved = asy.unmap_ns - cheap.unmap_ns;
        assert!(saved > 150_000.0 && dur(&cheap) < dur(&asy) && dur(&asy) - dur(&cheap) < saved);
        assert!(cheap.tracker_ns > asy.tracker_ns + 50_000.0, "{} vs {}", cheap.tracker_ns, asy.tracker_ns);
    }

    #[test]
    fn first_touch_costs_are_heavy_tailed_and_deterministic() {
        let c = UvmConfig { first_touch_us: 10.0, first_touch_tail: 1.5, ..UvmConfig::default() };
        let u = Uvm::new(&c, 2, 4, 7);
        let mut draws: Vec<Ps> = (0..10_000).map(|b| u.first_touch_cost(b)).collect();
        assert_eq!(draws[..5], (0..5).map(|b| Uvm::new(&c, 2, 4, 7).first_touch_cost(b)).collect::<Vec<_>>()[..]);
        draws.sort_unstable();
        let median = draws[5000] as f64 / 1e6;
        let p99 = draws[9900] as f64 / 1e6;
        assert!((9.0..11.0).contains(&median), "median {median} µs");
        assert!(p99 > 8.0 * median, "a heavy tail: p99 {p99} µs");
        assert!(*draws.last().unwrap() <= 200_000_000, "capped at 20 x");
    }

    #[test]
    fn block_policy_replays_after_each_block() {
        let (mut u, mut link, mut res) = costed(ReplayPolicy::Block, 8);
        for vpn in [1, 513, 1025] {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(e1) = u.service(0, &mut link, &mut res) else { panic!() };
        // The first block is mapped and replayed before the others are serviced.
        let (Next::BatchDone(e2), true) = u.batch_done(e1, &mut res) else { panic!() };
        assert!(res.is_resident(1) && !res.is_resident(513));
        let (Next::BatchDone(e3), true) = u.batch_done(e2, &mut res) else { panic!() };
        assert!(e3 > e2 && e2 > e1 && res.is_resident(513) && !res.is_resident(1025));
        let (next, replay) = u.batch_done(e3, &mut res);
        assert_eq!((next, replay, res.is_resident(1025)), (Next::Nothing, true, true));
        assert_eq!((u.stats.replays, u.records.as_ref().unwrap()[0].replays), (3, 3));
        u.check_invariants(&res).unwrap();
    }

    #[test]
    fn fault_records_give_each_fault_its_outcome() {
        let c = UvmConfig { batch_size: 4, fault_records: true, fault_records_max: 6, ..UvmConfig::default() };
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
        res.make_resident(9);
        // µTLB 0: pages 5, 9 (resident: stale); µTLB 1: 5 (a duplicate across µTLBs), 6; then 7, 8 stay buffered.
        for (vpn, utlb) in [(5, 0), (9, 0), (5, 1), (6, 1), (7, 0), (8, 1)] {
            u.raise(fault(vpn, utlb));
        }
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        let _ = u.batch_done(end, &mut res); // batch-flush: 7 and 8 are flushed
        u.raise(fault(10, 0));
        let Next::BatchDone(_) = u.service(end, &mut link, &mut res) else { panic!() };
        let rows: Vec<(u64, Outcome, u64)> = u.fault_records.as_ref().unwrap().iter().map(|r| (r.page, r.outcome, r.batch)).collect();
        assert_eq!(
            rows,
            vec![
                (5, Outcome::Serviced, 0),
                (9, Outcome::Stale, 0),
                (5, Outcome::Duplicate, 0),
                (6, Outcome::Serviced, 0),
                (7, Outcome::Flushed, 0),
                (8, Outcome::Flushed, 0),
            ]
        );
        assert!(u.fault_records_dropped > 0, "the table keeps at most fault_records_max rows");
    }

    fn stage_sum(r: &BatchRecord) -> f64 {
        r.fetch_ns
            + r.block_ns
            + r.fault_ns
            + r.first_touch_ns
            + r.unmap_ns
            + r.alloc_ns
            + r.evict_ns
            + r.zero_ns
            + r.transfer_ns
            + r.map_ns
            + r.tracker_ns
            + r.replay_ns
    }

    fn with(c: UvmConfig) -> (Uvm, Link, Residency) {
        let c = UvmConfig { records: true, first_touch_tail: 100.0, ..c };
        (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default())
    }

    #[test]
    fn density_prefetch_migrates_the_64k_with_the_fault_and_counts_it() {
        let mut c = UvmConfig::default();
        c.prefetch.policy = PrefetchPolicy::Density;
        let (mut u, mut link, mut res) = with(c);
        u.add_allocation(0, 1024);
        u.host_touch(0, 1024, 1);
        u.raise(fault(1, 0));
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        let r = u.records.as_ref().unwrap()[0].clone();
        assert_eq!((r.unique, r.prefetched, r.bytes_h2d), (1, 15, 16 * 4096));
        assert!(!res.is_resident(5));
        u.batch_done(end, &mut res);
        assert!((0..16).all(|p| res.is_resident(p)) && !res.is_resident(16));
        assert_eq!((u.stats.prefetched, res.untouched_pages()), (15, 15));
        assert!(res.access(5));
        let mut m = Metrics::default();
        u.export(&mut m, &res);
        assert_eq!((m.get("uvm.prefetch.used"), m.get("uvm.prefetch.wasted")), (Some(1.0), Some(14.0)));
    }

    #[test]
    fn zheng_policies_fill_the_transfer_set_after_the_demand_faults() {
        for (policy, want) in
            [(PrefetchPolicy::Sequential, vec![0, 1, 2, 3, 4, 5, 6]), (PrefetchPolicy::Locality, vec![101, 102, 103, 104, 105, 106, 107])]
        {
            let mut c = UvmConfig::default();
            c.prefetch.policy = policy;
            c.prefetch.transfer_set_pages = 8;
            let (mut u, mut link, mut res) = with(c);
            u.add_allocation(0, 2048);
            u.raise(fault(100, 0));
            let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
            u.batch_done(end, &mut res);
            let got: Vec<u64> = (0..2048).filter(|&p| res.is_resident(p) && p != 100).collect();
            assert_eq!(got, want, "{policy:?}");
        }
        // Random: 7 distinct pages of the allocation.
        let mut c = UvmConfig::default();
        c.prefetch.policy = PrefetchPolicy::Random;
        c.prefetch.transfer_set_pages = 8;
        let (mut u, mut link, mut res) = with(c);
        u.add_allocation(0, 2048);
        u.raise(fault(100, 0));
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        assert_eq!((res.resident_pages(), u.stats.prefetched), (8, 7));
    }

    #[test]
    fn a_full_gpu_evicts_the_oldest_block_copies_it_back_and_restarts() {
        let c = UvmConfig {
            gpu_memory_bytes: ByteSize(4 << 20),
            pma_chunk_blocks: 64,
            replay_policy: ReplayPolicy::Batch,
            ..UvmConfig::default()
        };
        let (mut u, mut link, mut res) = with(c);
        u.add_allocation(0, 4 * 512);
        u.host_touch(0, 4 * 512, 1);
        assert_eq!(u.capacity_chunks(), 2);
        for vpn in [1, 2, 513] {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        assert_eq!(u.allocated_chunks, 2, "one allocator call, clamped to the capacity");
        assert!(u.full, "both chunks taken");
        u.raise(Fault { time: end, ..fault(1025, 0) });
        let Next::BatchDone(end2) = u.service(end, &mut link, &mut res) else { panic!() };
        // Block 0 (resident first) goes: its two pages back to the host, its translations shot down.
        assert_eq!((u.stats.evictions, u.stats.pages_evicted, u.stats.bytes_d2h), (1, 2, 2 * 4096));
        assert_eq!(u.shootdowns, vec![0]);
        assert!(!res.is_resident(1) && !res.is_resident(2) && res.is_resident(513));
        let r = u.records.as_ref().unwrap()[1].clone();
        assert_eq!((r.evictions, r.pages_evicted, r.bytes_d2h, r.alloc_ns), (1, 2, 8192, 0.0));
        assert!(r.evict_ns > 10_000.0, "evict_us plus the copy: {}", r.evict_ns);
        assert!((r.block_ns - 16_000.0).abs() < 1e-6, "the block's service restarts after the eviction");
        assert!((stage_sum(&r) - (r.end_ns - r.start_ns)).abs() < 1e-3);
        u.batch_done(end2, &mut res);
        u.check_invariants(&res).unwrap();
        // Block 0 again: block 1 goes; page 1 comes back from the host (a copy, not a zero-fill), no CPU unmap.
        u.raise(Fault { time: end2, ..fault(1, 0) });
        let Next::BatchDone(_) = u.service(end2, &mut link, &mut res) else { panic!() };
        let r = u.records.as_ref().unwrap()[2].clone();
        assert_eq!((r.evictions, r.bytes_h2d, r.zero_ns, r.unmap_ns, r.first_touch_ns), (1, 4096, 0.0, 0.0, 0.0));
        assert_eq!(u.shootdowns, vec![0, 1]);
        assert!(res.resident_pages() <= 2 * 512);
    }

    #[test]
    fn eviction_policies_choose_their_victims() {
        // Blocks 0, 1 resident (0 first); block 0 serviced again; then block 2 needs room.
        for (policy, victim) in [(EvictionPolicy::Driver, 0), (EvictionPolicy::Lru, 1), (EvictionPolicy::Lfu, 1)] {
            let c = UvmConfig {
                gpu_memory_bytes: ByteSize(4 << 20),
                replay_policy: ReplayPolicy::Batch,
                eviction: EvictionConfig { policy, ..EvictionConfig::default() },
                ..UvmConfig::default()
            };
            let (mut u, mut link, mut res) = with(c);
            let mut t = 0;
            for vpn in [1, 513, 2, 1025] {
                u.raise(Fault { time: t, ..fault(vpn, 0) });
                let Next::BatchDone(end) = u.service(t, &mut link, &mut res) else { panic!() };
                u.batch_done(end, &mut res);
                t = end;
            }
            assert_eq!(u.shootdowns, vec![victim], "{policy:?}");
        }
    }

    #[test]
    fn a_block_the_host_took_back_is_evicted_before_older_resident_ones() {
        // Two chunks: blocks 0 then 1 resident; the host takes block 1's page back (UNUSED); block 2 then
        // evicts block 1, with nothing to copy, not block 0, the head of USED.
        let c = UvmConfig { gpu_memory_bytes: ByteSize(4 << 20), replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
        let (mut u, mut link, mut res) = with(c);
        let mut t = 0;
        for vpn in [1, 513] {
            u.raise(Fault { time: t, ..fault(vpn, 0) });
            let Next::BatchDone(end) = u.service(t, &mut link, &mut res) else { panic!() };
            u.batch_done(end, &mut res);
            t = end;
        }
        t = u.host_access(t, 513..514, false, 1, &mut link, &mut res);
        assert!(!res.is_resident(513));
        u.shootdowns.clear(); // the host access's own (the world takes them)
        let d2h = u.stats.bytes_d2h;
        u.raise(Fault { time: t, ..fault(1025, 0) });
        let Next::BatchDone(end) = u.service(t, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        assert_eq!(u.shootdowns, vec![1], "the UNUSED block goes first");
        assert_eq!((u.stats.evictions, u.stats.bytes_d2h - d2h), (1, 0), "nothing left to copy back");
        assert!(res.is_resident(1) && res.is_resident(1025));
        u.check_invariants(&res).unwrap();
    }

    #[test]
    fn a_batch_larger_than_gpu_memory_defers_blocks() {
        let c = UvmConfig { gpu_memory_bytes: ByteSize(2 << 20), ..UvmConfig::default() };
        let (mut u, mut link, mut res) = with(c);
        u.raise(fault(1, 0));
        u.raise(fault(513, 0));
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        assert_eq!((u.stats.deferred_blocks, res.refault_epoch, res.is_resident(1), res.is_resident(513)), (1, 1, true, false));
        u.check_invariants(&res).unwrap();
    }
    /// The polled model on a link with no latency and 16 GB/s (a 4 KiB page takes 256 ns),
    /// every page host-resident, 4 µTLBs.
    fn polled(limit: u32, prefetch: PrefetchConfig) -> (Uvm, Link, Residency) {
        polled_with(UvmConfig { utlb_fault_limit: limit, prefetch, ..UvmConfig::default() })
    }

    fn polled_with(c: UvmConfig) -> (Uvm, Link, Residency) {
        let c = UvmConfig { cost_model: CostModel::Polled, fault_latency_us: 20.0, ..c };
        let mut link_cfg = Config::default().link;
        (link_cfg.latency_ns, link_cfg.bandwidth_gbps) = (0.0, 16.0);
        let mut u = Uvm::new(&c, 4, 4, 0);
        u.add_allocation(0, POLLED_PAGES);
        u.host_touch(0, POLLED_PAGES, 1);
        (u, Link::new(&link_cfg), Residency::default())
    }

    fn fault_at(time: Ps, vpn: u64, utlb: u32) -> Fault {
        Fault { time, ..fault(vpn, utlb) }
    }

    /// Run the polled handler's events in time order until none is left; returns when each page became resident.
    fn drain(u: &mut Uvm, link: &mut Link, res: &mut Residency) -> Vec<(u64, Ps)> {
        let mut landed = vec![];
        let mut queue: Vec<Next> = u.events.drain(..).collect();
        while let Some(i) = (0..queue.len()).min_by_key(|&i| match queue[i] {
            Next::Service(t) | Next::BatchDone(t) => (t, matches!(queue[i], Next::Service(_))),
            Next::Nothing => (0, false),
        }) {
            let next = match queue.swap_remove(i) {
                Next::Service(t) => u.service(t, link, res),
                Next::BatchDone(t) => {
                    let before: Vec<u64> = (0..POLLED_PAGES).filter(|&p| res.is_resident(p)).collect();
                    assert_eq!(u.batch_done(t, res), (Next::Nothing, true));
                    landed.extend((0..POLLED_PAGES).filter(|&p| res.is_resident(p) && before.binary_search(&p).is_err()).map(|p| (p, t)));
                    queue.extend(retry(u, 0).into_iter().filter(|n| *n != Next::Nothing));
                    Next::Nothing
                }
                Next::Nothing => Next::Nothing,
            };
            queue.extend(std::iter::once(next).filter(|n| *n != Next::Nothing));
            queue.append(&mut u.events);
            u.check_invariants(res).unwrap();
        }
        landed
    }

    const PAGE_PS: Ps = 256_000; // 4 KiB at 16 GB/s
    const POLLED_PAGES: u64 = 64 * 512;

    fn near(got: Ps, want: Ps) -> bool {
        got.abs_diff(want) <= 2_000 // the link's bandwidth timeline rounds to a few ns
    }

    #[test]
    fn polled_faults_overlap_each_taking_its_latency_from_its_arrival() {
        let (mut u, mut link, mut res) = polled(16, PrefetchConfig::default());
        assert_eq!(u.raise(fault_at(0, 1, 0)), Next::Nothing, "events go through `events`");
        u.raise(fault_at(5_000_000, 600, 1));
        let landed = drain(&mut u, &mut link, &mut res);
        // 20 µs after each arrival, then one page over the link: not 40 µs for the second (a batch later).
        assert_eq!(landed.len(), 2);
        assert!(landed[0].0 == 1 && near(landed[0].1, 20_000_000 + PAGE_PS), "{landed:?}");
        assert!(landed[1].0 == 600 && near(landed[1].1, 25_000_000 + PAGE_PS), "{landed:?}");
        assert_eq!((u.stats.unique, u.stats.batches, u.stats.replays), (2, 2, 2));
    }

    #[test]
    fn polled_faults_arriving_together_queue_on_the_link() {
        let (mut u, mut link, mut res) = polled(16, PrefetchConfig::default());
        // 64 faults 1 ns apart, in 64 VA blocks: 64 rounds, whose pages share the link's bandwidth.
        for k in 0..64u64 {
            u.raise(fault_at(k * 1000, k * 512, (k % 4) as u32));
        }
        let landed = drain(&mut u, &mut link, &mut res);
        assert_eq!(landed.len(), 64);
        // Loaded latency: the k-th page waits for the k before it (the link's bandwidth timeline
        // has buckets of 2 µs, inside which two copy engines may overlap).
        let slack = 2_100_000;
        for (k, &(page, t)) in landed.iter().enumerate() {
            assert_eq!(page, k as u64 * 512);
            let queued = 20_000_000 + (k as Ps + 1) * PAGE_PS;
            assert!(t + slack >= queued && t <= queued + slack, "page {k} at {t}");
        }
    }

    #[test]
    fn polled_mshr_limit_nacks_and_replays_after_a_fault_is_serviced() {
        let (mut u, mut link, mut res) = polled(1, PrefetchConfig::default());
        u.raise(fault_at(0, 1, 0));
        u.raise(fault_at(0, 2, 0)); // over the µTLB's one far-fault MSHR: held, raised when page 1 lands
        u.raise(fault_at(0, 3, 1)); // another µTLB: not held
        assert_eq!((u.stats.throttled, u.parked()), (1, 1));
        let landed = drain(&mut u, &mut link, &mut res);
        let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
        // Pages 1 and 3 reach the handler together: one round, one copy of their VA block.
        assert!(near(when(1), 20_000_000 + 2 * PAGE_PS) && when(3) == when(1), "{landed:?}");
        // Page 2's fault is retried when page 1's flight lands (after the 1 µs replay latency), then takes its 20 µs.
        assert!(near(when(2), when(1) + 1_000_000 + 20_000_000 + PAGE_PS), "{landed:?}");
    }

    #[test]
    fn polled_fault_on_a_page_in_flight_waits_for_that_flight_and_blocks_its_utlb_until_then() {
        // Without merging, the second µTLB's fault waits out its own latency before it finds the flight.
        let (mut u, mut link, mut res) = polled_with(UvmConfig { merge_far_faults: false, ..UvmConfig::default() });
        u.raise(fault_at(0, 7, 0));
        u.raise(fault_at(100_000, 7, 1)); // the same page from another µTLB, 100 ns later
                                          // Poll at 20 µs: page 7 goes out, landing at 20.256 µs.
        let Next::BatchDone(end) = u.service(20_000_000, &mut link, &mut res) else { panic!() };
        u.events.clear();
        // Poll at 20.1 µs: page 7 is crossing the link; the fault joins that flight (nothing sent twice).
        let bytes = link_bytes(&link);
        u.service(20_100_000, &mut link, &mut res);
        assert_eq!(link_bytes(&link), bytes);
        assert_eq!(u.outstanding, vec![1, 1, 0, 0]);
        // The empty round of the second poll lands first: µTLB 1 still waits.
        let (_, replay) = u.batch_done(20_100_000, &mut res);
        assert!(replay);
        assert_eq!(u.take_resumed(), Some(vec![]));
        u.batch_done(end, &mut res);
        assert!(res.is_resident(7));
        assert_eq!((u.take_resumed(), u.outstanding.clone()), (Some(vec![0, 1]), vec![0, 0, 0, 0]));
        u.check_invariants(&res).unwrap();
    }

    #[test]
    fn a_merged_fault_need_not_take_its_utlb_s_mshr() {
        for take in [true, false] {
            let (mut u, mut link, mut res) =
                polled_with(UvmConfig { utlb_fault_limit: 1, merged_faults_take_mshr: take, ..UvmConfig::default() });
            u.raise(fault_at(0, 7, 0));
            // Page 7 again, from µTLB 1: merges into µTLB 0's service.
            u.raise(fault_at(10_000_000, 7, 1));
            // µTLB 1's own far fault. Taking the MSHR: page 9 is held until page 7 lands (20.256 µs), retried
            // 1 µs later, lands at 41.512 µs. Not taking it: page 9 goes at once, is polled at 30 µs and lands
            // at 30.256 µs.
            u.raise(fault_at(10_000_000, 9, 1));
            assert_eq!(u.stats.throttled, take as u64);
            assert_eq!((u.outstanding.clone(), u.uncounted.len()), (vec![1, 1, 0, 0], !take as usize));
            u.check_invariants(&res).unwrap();
            let landed = drain(&mut u, &mut link, &mut res);
            let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
            assert!(near(when(7), 20_000_000 + PAGE_PS), "{landed:?}");
            assert!(near(when(9), if take { 41_512_000 } else { 30_000_000 + PAGE_PS }), "take {take}: {landed:?}");
            assert_eq!((u.stats.joined, u.stats.unique, u.stats.raw), (1, 2, 3));
            assert!(u.uncounted.is_empty() && u.outstanding == vec![0, 0, 0, 0]);
            u.check_invariants(&res).unwrap();
        }
    }

    #[test]
    fn polled_faults_of_other_utlbs_merge_into_the_service_of_their_page() {
        for merge in [true, false] {
            let (mut u, mut link, mut res) =
                polled_with(UvmConfig { utlb_fault_limit: 1, merge_far_faults: merge, ..UvmConfig::default() });
            u.raise(fault_at(0, 7, 0));
            u.raise(fault_at(10_000_000, 7, 1)); // page 7 again, from µTLB 1, 10 µs later: its one MSHR
            u.raise(fault_at(10_000_000, 9, 1)); // held (Nack) until that MSHR frees
            let landed = drain(&mut u, &mut link, &mut res);
            let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
            assert!(near(when(7), 20_000_000 + PAGE_PS), "{landed:?}");
            // Merged: µTLB 1's fault ends when page 7 lands (20.256 µs), so page 9 is retried 1 µs later and
            // lands 20 µs + a page after that: 41.512 µs. Not merged: it waits out its own 20 µs (30 µs), then
            // finds page 7 resident; page 9 is retried at 31 µs and lands at 51.256 µs.
            let (nine, mean_ns) =
                if merge { (41_512_000, (20_256 + 10_256 + 20_256) / 3) } else { (51_256_000, (20_256 + 20_000 + 20_256) / 3) };
            assert!(near(when(9), nine), "merge {merge}: {landed:?}");
            assert!((u.stats.far_fault.mean_ns() - mean_ns as f64).abs() < 5.0, "{}", u.stats.far_fault.mean_ns());
            assert_eq!((u.stats.joined, u.stats.unique, u.stats.raw), (merge as u64, 2, 3));
        }
    }

    #[test]
    fn polled_fault_on_a_page_crossing_the_link_joins_that_flight() {
        let (mut u, mut link, mut res) = polled(16, PrefetchConfig::default());
        u.raise(fault_at(0, 7, 0));
        let Next::BatchDone(end) = u.service(20_000_000, &mut link, &mut res) else { panic!() };
        assert!(near(end, 20_000_000 + PAGE_PS));
        // µTLB 1 faults on page 7 at 20.1 µs, while it crosses the link: no buffer entry, no second copy.
        u.raise(fault_at(20_100_000, 7, 1));
        assert_eq!((u.buffer.len(), u.outstanding.clone(), u.stats.joined), (0, vec![1, 1, 0, 0], 1));
        u.batch_done(end, &mut res);
        assert_eq!((u.take_resumed(), u.outstanding.clone()), (Some(vec![0, 1]), vec![0, 0, 0, 0]));
        assert_eq!((u.stats.unique, link_bytes(&link)), (1, 4096));
        u.check_invariants(&res).unwrap();
    }

    fn link_bytes(link: &Link) -> u64 {
        let mut m = Metrics::default();
        link.export(&mut m, 1);
        m.get("link.h2d.bytes").unwrap() as u64
    }

    #[test]
    fn polled_transfer_sets_fill_each_interval_after_its_demand_pages() {
        for (wait, per_copy) in [(true, true), (false, true), (true, false), (false, false)] {
            let prefetch = PrefetchConfig {
                policy: PrefetchPolicy::Locality,
                transfer_set_pages: 4,
                window_pages: 6,
                demand_waits_for_set: wait,
                ..PrefetchConfig::default()
            };
            let (mut u, mut link, mut res) = polled(16, prefetch);
            u.land_per_copy = per_copy;
            u.allocs = vec![(0, 14)];
            u.raise(fault_at(0, 5, 0));
            u.raise(fault_at(3_000_000, 9, 1));
            let landed = drain(&mut u, &mut link, &mut res);
            let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
            // Interval 1 is 0-20 µs (it starts with the first fault): page 5 goes out at 20 µs with 3
            // prefetches from the window after it (6, 7, 8). Per copy, page 5 crosses alone first and lands,
            // then the 3 prefetches; else the block's 4 pages are one copy that lands at once.
            let demand_lands = if per_copy { PAGE_PS } else { 4 * PAGE_PS };
            assert!(near(when(5), 20_000_000 + demand_lands), "{landed:?}");
            for p in [6, 7, 8] {
                assert!(near(when(p), 20_000_000 + 4 * PAGE_PS), "{p}: {landed:?}");
            }
            // Page 9 (faulted at 3 µs) reaches the handler at 23 µs, in interval 2 (20-40 µs), whose set has
            // it and 3 prefetches after it. Waiting for the set, it goes out with them at 40 µs (first, per
            // copy); not waiting, alone at 23 µs, and the 3 prefetches at 40 µs.
            if wait {
                assert!(near(when(9), 40_000_000 + demand_lands), "{landed:?}");
                for p in [10, 11, 12] {
                    assert!(near(when(p), 40_000_000 + 4 * PAGE_PS), "{p}: {landed:?}");
                }
            } else {
                assert!(near(when(9), 23_000_000 + PAGE_PS), "{landed:?}");
                for p in [10, 11, 12] {
                    assert!(near(when(p), 40_000_000 + 3 * PAGE_PS), "{p}: {landed:?}");
                }
            }
            // Interval 3, no fault: the window after 9 has 13 left, then the sequential fill (0, 1, 2);
            // interval 4: 3 and 4, the last pages; interval 5 finds nothing and the intervals stop.
            for p in [13, 0, 1, 2] {
                assert!(near(when(p), 60_000_000 + 4 * PAGE_PS), "{p}: {landed:?}");
            }
            for p in [3, 4] {
                assert!(near(when(p), 80_000_000 + 2 * PAGE_PS), "{p}: {landed:?}");
            }
            assert_eq!((res.resident_pages(), u.stats.prefetched, u.stats.unique), (14, 12, 2));
            assert!(u.events.is_empty() && u.poll_at.is_none() && u.interval_end.is_none());
            // Far-fault latency: page 5's 20 µs + its copy; page 9's 37 µs waiting for its set + its copy,
            // else 20 µs + a page.
            let nine = if wait { 37_000_000 + demand_lands } else { 20_000_000 + PAGE_PS };
            let mean = (20_000_000 + demand_lands + nine) as f64 / 2e3;
            assert!((u.stats.far_fault.mean_ns() - mean).abs() < 5.0, "wait {wait}: {} vs {mean}", u.stats.far_fault.mean_ns());
        }
    }

    #[test]
    fn polled_demand_pages_cross_before_the_prefetches_of_lower_blocks() {
        // A demand page in block 1; the sequential set fills from page 0, in block 0. Per copy, the
        // demand page crosses first and its fault ends then; as one round, block 0's copy goes first
        // (VA order) and every page lands with the last copy.
        for per_copy in [true, false] {
            let prefetch = PrefetchConfig { policy: PrefetchPolicy::Sequential, transfer_set_pages: 4, ..PrefetchConfig::default() };
            let (mut u, mut link, mut res) = polled(16, prefetch);
            u.land_per_copy = per_copy;
            u.allocs = vec![(0, 1024)];
            u.raise(fault_at(0, 600, 0));
            let landed = drain(&mut u, &mut link, &mut res);
            let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
            let demand = if per_copy { 20_000_000 + PAGE_PS } else { 20_000_000 + 4 * PAGE_PS };
            assert!(near(when(600), demand), "{per_copy}: {landed:?}");
            for p in [0, 1, 2] {
                assert!(near(when(p), 20_000_000 + 4 * PAGE_PS), "{p}: {landed:?}");
            }
            assert!((u.stats.far_fault.mean_ns() - demand as f64 / 1e3).abs() < 5.0, "{}", u.stats.far_fault.mean_ns());
            // Each round's time is counted once, to its last landing.
            assert_eq!(u.stats.batch.count(), u.stats.batches);
        }
    }

    #[test]
    fn polled_prefetch_stops_when_gpu_memory_is_full_unless_demand_faults_come() {
        let prefetch = PrefetchConfig { policy: PrefetchPolicy::Locality, transfer_set_pages: 4, ..PrefetchConfig::default() };
        let (mut u, mut link, mut res) = polled(16, prefetch);
        u.capacity_chunks = 1; // one 2 MiB chunk for the 64 blocks
        u.raise(fault_at(0, 0, 0));
        drain(&mut u, &mut link, &mut res);
        // Interval 1: page 0 and 3 prefetches take the only chunk; interval 2 finds memory full and no
        // demand: no prefetch, and the intervals stop (they would cycle the footprint through the chunk).
        assert_eq!((res.resident_pages(), u.stats.prefetched, u.stats.evictions), (4, 3, 0));
        assert!(u.interval_end.is_none() && u.events.is_empty());
        // A demand fault in another block evicts block 0 and brings its window with it.
        u.raise(fault_at(100_000_000, 600, 1));
        drain(&mut u, &mut link, &mut res);
        assert_eq!((u.stats.evictions, u.stats.prefetched), (1, 6));
        assert!((600..604).all(|p| res.is_resident(p)) && res.resident_pages() == 4);
    }

    #[test]
    fn demand_pages_wait_for_sets_only_while_sets_are_built() {
        // GPU memory (one chunk) fills in the first interval. Then pages 600 and 1200 (two other VA blocks)
        // fault at 100 and 105 µs.
        // Prefetching on (keep): a set is built every interval, so 1200 (at the handler at 125 µs) waits for its
        // interval's end, 140 µs. Stopped once full: no set, 1200 goes out as its 20 µs run out.
        for (when_full, waits) in [(WhenFull::Keep, true), (WhenFull::Stop, false)] {
            let prefetch =
                PrefetchConfig { policy: PrefetchPolicy::Locality, transfer_set_pages: 4, when_full, ..PrefetchConfig::default() };
            let (mut u, mut link, mut res) = polled(16, prefetch);
            u.capacity_chunks = 1;
            u.raise(fault_at(0, 0, 0));
            drain(&mut u, &mut link, &mut res);
            u.raise(fault_at(100_000_000, 600, 1));
            u.raise(fault_at(105_000_000, 1200, 2));
            let landed = drain(&mut u, &mut link, &mut res);
            let when = landed.iter().find(|l| l.0 == 1200).unwrap().1;
            if waits {
                assert!(when > 140_000_000, "{when_full:?}: {landed:?}");
            } else {
                assert!((125_000_000..135_000_000).contains(&when), "{when_full:?}: {landed:?}");
            }
        }
    }

    #[test]
    fn polled_prefetch_stops_when_page_granular_memory_is_full() {
        // The same with GPU memory counted in 4 KiB pages (4 of them): its chunk counters
        // never fill, and the handler used to go on prefetching every interval, each
        // prefetch evicting a page (the polled oversubscribed runs thrashed on it).
        let prefetch = PrefetchConfig { policy: PrefetchPolicy::Locality, transfer_set_pages: 4, ..PrefetchConfig::default() };
        let (mut u, mut link, mut res) = polled(16, prefetch);
        u.page_evict = Some(Box::new(PageMemory { capacity: 4, pages: Pages::new(EvictionPolicy::Lru, 0), pinned: FxHashSet::default() }));
        u.raise(fault_at(0, 0, 0));
        drain(&mut u, &mut link, &mut res);
        assert_eq!((res.resident_pages(), u.stats.prefetched, u.stats.evictions), (4, 3, 0));
        assert!(u.interval_end.is_none() && u.events.is_empty());
        // A demand fault still brings its window, evicting as many pages.
        u.raise(fault_at(100_000_000, 600, 1));
        drain(&mut u, &mut link, &mut res);
        assert_eq!((u.stats.evictions, u.stats.prefetched), (4, 6));
        assert!((600..604).all(|p| res.is_resident(p)) && res.resident_pages() == 4);
    }

    #[test]
    fn polled_copies_of_a_full_round_evict_without_waiting_for_each_other() {
        // 4 pages of GPU memory, full; a 1 µs link. One round brings pages of 3 blocks, each evicting a page.
        for per_copy in [true, false] {
            let (mut u, _, mut res) = polled(16, PrefetchConfig::default());
            let mut link = Link::new(&{
                let mut l = Config::default().link;
                (l.latency_ns, l.bandwidth_gbps) = (1000.0, 16.0);
                l
            });
            u.land_per_copy = per_copy;
            u.page_evict =
                Some(Box::new(PageMemory { capacity: 4, pages: Pages::new(EvictionPolicy::Lru, 0), pinned: FxHashSet::default() }));
            for (i, p) in [0, 1, 2, 3].into_iter().enumerate() {
                u.raise(fault_at(i as Ps * 1_000_000, p, 0));
            }
            drain(&mut u, &mut link, &mut res);
            assert_eq!((res.resident_pages(), u.stats.evictions), (4, 0));
            for (i, p) in [600, 1200, 1800].into_iter().enumerate() {
                u.raise(fault_at(100_000_000, p, i as u32));
            }
            let landed = drain(&mut u, &mut link, &mut res);
            assert_eq!(u.stats.evictions, 3);
            let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
            // The handler takes the three at 120 µs. A page's copy takes 256 ns, and 1 µs more to land.
            let want = if per_copy {
                // Evictions back to back on the device-to-host engine (in at 121.256, 121.512, 121.768 µs); each
                // block's copy after its own eviction, queued on the host-to-device engine.
                [122_512_000, 122_768_000, 123_024_000]
            } else {
                // Each block's eviction starts when the previous one has landed (121.256, 122.512, 123.768 µs),
                // and the round lands with its last copy.
                [125_024_000; 3]
            };
            for (p, w) in [600, 1200, 1800].into_iter().zip(want) {
                assert!(near(when(p), w), "{per_copy}: {landed:?}");
            }
        }
    }

    #[test]
    fn polled_sets_fill_only_what_the_link_has_free_once_memory_is_full() {
        // 8 pages of GPU memory, sets of 8, a window of 16. Page 0's interval fills memory: 0 and 7 prefetches.
        // Then page 600 faults at 100 µs; at its interval's end (120 µs) the link still has 5.5 pages to carry.
        // Counting them, the set has room for 8 - 1 - 5 = 2 prefetches (601, 602); by its demand page alone, 7.
        for (link_room, backlog, want) in [(true, 5.5, 2), (false, 5.5, 7), (true, 0.0, 7)] {
            let prefetch = PrefetchConfig {
                policy: PrefetchPolicy::Locality,
                transfer_set_pages: 8,
                window_pages: 16,
                full_link_room: link_room,
                ..PrefetchConfig::default()
            };
            let (mut u, mut link, mut res) = polled(16, prefetch);
            u.page_evict =
                Some(Box::new(PageMemory { capacity: 8, pages: Pages::new(EvictionPolicy::Lru, 0), pinned: FxHashSet::default() }));
            u.raise(fault_at(0, 0, 0));
            drain(&mut u, &mut link, &mut res);
            assert_eq!((res.resident_pages(), u.stats.prefetched, u.stats.evictions), (8, 7, 0));
            let at = 120_000_000;
            link.transfer(Dir::HostToDevice, (backlog * 4096.0) as u64, at, at);
            u.raise(fault_at(100_000_000, 600, 1));
            let landed = drain(&mut u, &mut link, &mut res);
            let got: Vec<u64> = landed.iter().map(|l| l.0).filter(|&p| p != 600).collect();
            assert_eq!(got, (601..601 + want).collect::<Vec<u64>>(), "link_room {link_room}, backlog {backlog}");
            assert_eq!((u.stats.prefetched, u.stats.pages_evicted), (7 + want, 1 + want), "link_room {link_room}, backlog {backlog}");
            assert!(res.is_resident(600) && res.resident_pages() == 8);
        }
    }

    /// Serve one fault on each of `vpns` in its own batch; returns the time after.
    fn serve(u: &mut Uvm, link: &mut Link, res: &mut Residency, mut t: Ps, vpns: &[u64]) -> Ps {
        for &vpn in vpns {
            u.raise(Fault { time: t, ..fault(vpn, 0) });
            let Next::BatchDone(end) = u.service(t, link, res) else { panic!() };
            u.batch_done(end, res);
            t = end;
        }
        t
    }

    #[test]
    fn page_granularity_evicts_single_pages_by_walk_recency() {
        // 8 pages of footprint at 2x oversubscription: 4 pages of GPU memory.
        for (policy, victim) in [(EvictionPolicy::Lru, 1), (EvictionPolicy::Driver, 0)] {
            let c = UvmConfig {
                oversubscription: 2.0,
                eviction: EvictionConfig { policy, granularity: EvictionGranularity::Page, ..EvictionConfig::default() },
                ..UvmConfig::default()
            };
            let (mut u, mut link, mut res) = with(c);
            res.keep_recency();
            u.add_allocation(0, 8);
            u.host_touch(0, 8, 1);
            let t = serve(&mut u, &mut link, &mut res, 0, &[0, 1, 2, 3]);
            assert!(u.full && u.stats.evictions == 0);
            // The GPU walks to page 0 again: LRU keeps it, the driver's FIFO does not care.
            assert!(res.access(0));
            serve(&mut u, &mut link, &mut res, t, &[4]);
            assert_eq!(u.shootdown_pages, vec![victim], "{policy:?}");
            assert_eq!((u.stats.evictions, u.stats.pages_evicted, u.stats.bytes_d2h), (1, 1, 4096));
            assert_eq!(u.shootdowns, Vec::<u64>::new(), "no block is shot down");
            assert!(!res.is_resident(victim) && res.is_resident(4) && res.resident_pages() == 4);
            assert!(u.cpu_resident(victim), "the evicted page is on the host");
            let r = u.records.as_ref().unwrap()[4].clone();
            assert_eq!((r.evictions, r.bytes_d2h, r.bytes_h2d), (1, 4096, 4096));
            let mut m = Metrics::default();
            u.export(&mut m, &res);
            assert_eq!(m.get("uvm.gpu_memory_bytes"), Some(4.0 * 4096.0));
            u.check_invariants(&res).unwrap();
        }
    }

    #[test]
    fn when_full_stops_or_narrows_prefetching_once_memory_is_full() {
        // 64 pages at 4x oversubscription: 16 pages. Sequential transfer sets of 4 fill them in 4 batches.
        for (when_full, want) in [(WhenFull::Keep, vec![16, 17, 18]), (WhenFull::Stop, vec![]), (WhenFull::Locality, vec![21, 22])] {
            let mut c = UvmConfig {
                oversubscription: 4.0,
                eviction: EvictionConfig { granularity: EvictionGranularity::Page, ..EvictionConfig::default() },
                ..UvmConfig::default()
            };
            c.prefetch.policy = PrefetchPolicy::Sequential;
            c.prefetch.transfer_set_pages = 4;
            c.prefetch.window_pages = 2;
            c.prefetch.when_full = when_full;
            let (mut u, mut link, mut res) = with(c);
            u.add_allocation(0, 64);
            let t = serve(&mut u, &mut link, &mut res, 0, &[0, 4, 8]);
            assert!(!u.full && res.resident_pages() == 12);
            let t = serve(&mut u, &mut link, &mut res, t, &[12]);
            assert!(u.full && res.resident_pages() == 16 && u.stats.prefetched == 12, "{when_full:?}: warm-up prefetches");
            serve(&mut u, &mut link, &mut res, t, &[20]);
            let got: Vec<u64> = (16..64).filter(|&p| res.is_resident(p) && p != 20).collect();
            assert_eq!(got, want, "{when_full:?}");
            assert_eq!((u.stats.pages_evicted, res.resident_pages()), (1 + want.len() as u64, 16), "{when_full:?}");
        }
    }

    #[test]
    fn locality_windows_count_the_resident_pages_they_skip_and_the_refaults_on_them() {
        // 64 pages at 4x oversubscription: 16 pages, evicted oldest first. Locality sets of 4, window 4.
        let mut c = UvmConfig {
            oversubscription: 4.0,
            eviction: EvictionConfig {
                granularity: EvictionGranularity::Page,
                policy: EvictionPolicy::Driver,
                ..EvictionConfig::default()
            },
            ..UvmConfig::default()
        };
        c.prefetch.policy = PrefetchPolicy::Locality;
        c.prefetch.transfer_set_pages = 4;
        c.prefetch.window_pages = 4;
        c.prefetch.when_full = WhenFull::Locality;
        let (mut u, mut link, mut res) = with(c);
        u.add_allocation(0, 64);
        // Pages 8..23 arrive (each fault brings the 3 after it): memory is full.
        let t = serve(&mut u, &mut link, &mut res, 0, &[8, 12, 16, 20]);
        assert!(u.full && (8..24).all(|p| res.is_resident(p)));
        assert_eq!(u.stats.window_skipped_resident, 0);
        // A fault on 6: its window 7..10 takes 7 and passes over 8, 9 and 10, still resident; 6 and 7 evict
        // the oldest, 8 and 9.
        let t = serve(&mut u, &mut link, &mut res, t, &[6]);
        assert!(res.is_resident(7) && !res.is_resident(8) && !res.is_resident(9));
        assert_eq!((u.stats.window_skipped_resident, u.stats.window_skipped_refaults), (3, 0));
        // 8 faults after its window passed it: a refault. Its window takes 9 (no longer counted as skipped),
        // passes over 10 (already counted), 11 and 12; 8 and 9 evict 10 and 11.
        let t = serve(&mut u, &mut link, &mut res, t, &[8]);
        assert!(res.is_resident(9) && !res.is_resident(10));
        assert_eq!((u.stats.window_skipped_resident, u.stats.window_skipped_refaults), (5, 1));
        // 10 was passed over too; 30 never was.
        serve(&mut u, &mut link, &mut res, t, &[10, 30]);
        assert_eq!(u.stats.window_skipped_refaults, 2);
        let mut m = Metrics::default();
        u.export(&mut m, &res);
        assert_eq!(m.get("uvm.prefetch.window_skipped_refaults"), Some(2.0));
    }

    #[test]
    fn page_granularity_drops_prefetches_and_defers_what_finds_no_room() {
        // 2 pages of memory; a batch demanding 3 pages of one block: the block waits.
        let mut c = UvmConfig {
            oversubscription: 4.0,
            eviction: EvictionConfig { granularity: EvictionGranularity::Page, ..EvictionConfig::default() },
            ..UvmConfig::default()
        };
        let (mut u, mut link, mut res) = with(c.clone());
        u.add_allocation(0, 8);
        for vpn in [0, 1, 2] {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        assert_eq!((u.stats.deferred_blocks, res.resident_pages(), res.refault_epoch), (1, 0, 1));
        // A transfer set larger than memory: the demand page and one prefetch.
        c.prefetch.policy = PrefetchPolicy::Sequential;
        c.prefetch.transfer_set_pages = 4;
        let (mut u, mut link, mut res) = with(c);
        u.add_allocation(0, 8);
        serve(&mut u, &mut link, &mut res, 0, &[5]);
        assert_eq!((res.resident_pages(), u.stats.prefetched, u.stats.evictions), (2, 1, 0));
        assert!(res.is_resident(5) && res.is_resident(0));
        u.check_invariants(&res).unwrap();
    }
}
