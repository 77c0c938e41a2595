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
//! With `fetch_after_replay_wait` (batch-flush, driver model; the default since
//! session 59) the end of a batch follows the driver's order: flush and replay
//! push `replay_us` before the batch ends, the retries from `replay_latency_ns`
//! after the push, and the next fetch when the batch ends (the driver's wait
//! for the replay over), without an interrupt (docs/notes-batch-makeup.md).
//! Off, the flush and replay follow the wait and an empty fetch waits for the
//! next interrupt.
//!
//! Batch time = interrupt (first batch of a wake-up) + pre-processing
//! (batch_us, fetch_entry_us × fetched, per_duplicate_us × duplicates the fetch
//! did not merge) + Σ over blocks (per_block_us, per_fault_us × the block's
//! distinct pages, first touch, CPU unmap, pushing its copy: copy_push_us +
//! copy_push_per_page_us × pages copied, map) + tracker (its fixed cost plus
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
//! Prefetches never take the memory the batch's later demand pages need
//! (`Uvm::room_for_later`): a transfer set's prefetch-only block before a
//! demand block takes no chunk that block would need.
//! An eviction bumps the residency's refault epoch, so warps that wait for a
//! replay re-execute and fault again on pages that were taken away.
//! With `uvm.eviction.granularity = "page"` memory is counted in 4 KiB pages
//! instead (`Uvm::make_room`): single pages are evicted, the batch's own
//! pinned, prefetches that find no room dropped, and a block whose faulted
//! pages outnumber the room left serviced in part (its first pages; the
//! others are deferred to the next batch); the allocator still hands
//! memory out `pma_chunk_blocks` root chunks per call (`Uvm::page_alloc_calls`). `uvm.prefetch.when_full`
//! changes the prefetcher once memory has been full (Zheng's §5 warm-up).
//!
//! Thrashing, hints and the host ([`thrashing`], [`policy`], [`remote`]):
//! before a batch's blocks are formed, every faulted page asks the thrashing
//! module for a hint: throttled pages are not serviced (the refault epoch
//! makes their warps fault again after the replay), pinned pages and pages
//! hinted to stay on the host are mapped remotely (no chunk, no copy, no CPU
//! unmap). Read-mostly reads (and cudaMemPrefetchAsync) copy the host's pages
//! as read-only duplicates and leave the host mapped; a GPU store to a
//! duplicate faults and collapses it; evicting one copies nothing back. Thrashing
//! and preferred-location pages are never prefetched. A host access
//! ([`Uvm::host_access`]) takes GPU-resident pages back over the link, one CPU
//! fault per VA block (the block keeps its GPU chunk); a host read of a
//! read-mostly page copies it back instead and the GPU keeps a read-only
//! duplicate (the driver's residency order puts read duplication first, for
//! every faulting processor). CPU unmapping is on
//! demand per block, or preemptive (`[uvm.preunmap]`: a synchronous range, or
//! the background worker the batches skip, wait for or fall back from). With
//! `records`, every copy over the link is a row of the `migrations` table.

pub mod counters;
pub mod evict;
pub mod migrate;
pub mod policy;
pub mod ppr;
pub mod prefetch;
pub mod records;
pub mod remote;
pub mod thrashing;

use crate::config::ByteSize;
use crate::link::{Dir, Link};
use crate::sim::{mix64, ns_to_ps, Ps};
use crate::stats::{Latency, Metrics};
use crate::xlat::space::{PageRanges, Residency, BLOCK_PAGES};
use evict::{Chunks, EvictionConfig, EvictionGranularity, Pages, WriteBack};
pub use policy::Advice;
use policy::{AdviseConfig, PreunmapConfig, UnmapGranularity, UnmapMode, Worker};
use prefetch::{PageMask, PrefetchConfig, PrefetchPolicy, WhenFull};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use thrashing::{Hint, Proc, Thrashing, ThrashingConfig};

use records::{AllocCount, AllocTally};
pub use records::{AllocRecord, BatchRecord, Cause, FaultRecord, MigrationRecord, Outcome};

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
    /// Unified memory: the fault buffer and the UVM driver's batch servicing (for workload.managed = true). In
    /// translation.mode = "iommu" far faults go to the IOMMU's page-request path instead ([iommu.ppr]): the driver
    /// runs only for cudaMemPrefetchAsync, access-counter migration, host accesses and hints, so its fault-buffer,
    /// batch, replay, prefetcher and preemptive-unmap options are not read. The multi-GPU model runs no single-GPU
    /// driver: of this section it reads only fault_mode, stall_warp_on_fault, records and migration_records_max.
    /// A key not read in the configured mode is refused when the user sets it (a preset may carry it).
    pub struct UvmConfig {
        /// "replayable" (the warp sleeps at its next dependency) or "blocking" (the faulting µTLB takes no request from the
        /// time the walk finds the fault until it is serviced; seed paged-memory §2.1: the GMMU stops the TLB "from taking
        /// new translation requests"; those issued before then go on). The faults its walks find beyond
        /// `utlb_fault_limit` are turned back and walk again after the replay: Zheng's blocking GMMU, without the
        /// replayable design's far-fault MSHRs (§3), tracks one (zheng-blocking sets 1).
        pub fault_mode: FaultMode = FaultMode::Replayable,
        /// Replayable mode: a warp whose load or store far-faults stops at that instruction until its pages are serviced
        /// (seed paged-memory §3.1: "the warp that has missed in the TLB will be stalled, but all other warps within the CU
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
        /// Batches with thrashing-throttled faults one bottom-half run services before it yields and waits for the
        /// next interrupt (uvm_perf_fault_max_throttle_per_service, default 5; `uvm_gpu_replayable_faults.c`, the
        /// service loop: a batch whose service throttled a page counts). Only with uvm.thrashing.enable, and not in
        /// the polled cost model (it has no batches).
        pub max_throttle_per_service: u32 = 5,
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
        /// batch_size, max_batches_per_service and max_throttle_per_service do not apply; seed paged-memory §3.1).
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
        /// Polled model with merge_far_faults: a far fault on a page crossing the link only as a prefetch (no fault asked
        /// for it) joins that copy at once and ends when it lands (true, the model before 2026-12-01), or reaches the
        /// handler as any fault does (false): taken in once its latency has run (or at its interval's end with
        /// prefetch.demand_waits_for_set), it then ends when the page lands, or at once if it has. Seed paged-memory §3:
        /// the GMMU allocates a far-fault MSHR when its walk finds the page missing and initiates "the SW page faulting
        /// process"; only a page some TLB's fault started has an entry that can notify the others, and the runtime's own
        /// prefetches (§4.1) start none.
        pub merge_prefetched_faults: bool = false,
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
        /// First GPU touch of a VA block: DMA-map its pages and build the reverse map (seed uvm-driver §5.1.1, Fig. 5.2b: "up to 64% of batch time is spent in GPU VABlock state initialization"; heavy-tailed); median cost in µs. ASSUMPTION, to be calibrated.
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
        /// The driver's CPU time to push one block's copy onto a copy-engine channel, fixed part per push, in µs
        /// (driver cost model only; every copy: a batch's host-to-device copies, in the batches table's `push_ns`,
        /// evictions' copies back, in `evict_ns`, cudaMemPrefetchAsync's and CPU faults' copies): the driver's
        /// `block_copy_resident_pages_between` begins a push
        /// (reserve a channel's GPFIFO entry and pushbuffer space, acquire the block's tracker), writes the copy
        /// methods, and ends it (semaphore release, GPFIFO entry, doorbell) without waiting for the copy, which runs on
        /// the link while the driver goes on. Allen's "transfer time" (seed uvm-driver Fig. 4.2) is this CPU time:
        /// the artifact's batch driver (github.com/tallendev/uvm-eval, drivers/batchd-…-460.27.04) times that
        /// function, not the DMA. ASSUMPTION (no source gives its duration; set before any run used it): 1 µs.
        pub copy_push_us: f64 = 1.0,
        /// The push's cost per 4 KiB page copied, in µs: the 460 driver writes one copy-engine memcopy per page of a
        /// copy to or from host memory (the host pages are not physically contiguous), after looking up the page's
        /// DMA address. ASSUMPTION (about ten method writes and an address lookup; set before any run used it): 0.05 µs.
        pub copy_push_per_page_us: f64 = 0.05,
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
        /// Fig. 6.3). cudaMemPrefetchAsync and access-counter migrations do the same (`uvm_migrate.c`: one tracker for
        /// the call, waited for once at its end; since 2026-11-29, before which they waited for each block's copy).
        /// false: each block's service waits for its own copy (`transfer_ns`), as before 2026-11-23. The
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
        /// false (the default until session 59, when it was found to decide where regular's faults fall:
        /// docs/validation.md, uvm-driver "Session 59"): the flush reads PUT when the wait has ended, the replay
        /// reaches the GPU `replay_latency_ns` after that, and a fetch that finds the buffer empty ends the bottom
        /// half, so after an UPDATE_PUT flush the next batch waits for the re-raised faults' interrupt (`interrupt_us`).
        pub fetch_after_replay_wait: bool = true,
        /// Prefetching (spec/uvm-driver.md "Prefetcher"; seed paged-memory §4). Default policy "none": demand paging only,
        /// as in the seeds' baseline measurements (seed uvm-driver Ch. 3-4 disable prefetching; seed paged-memory's replayable
        /// baseline); the real driver's default is "density" (uvm_perf_prefetch_enable = 1).
        pub prefetch: PrefetchConfig = PrefetchConfig::default(),
        /// GPU memory available to managed data, allocated in 2 MiB root chunks, one per VA block with GPU-resident
        /// pages (spec/uvm-driver.md); 0 = unlimited (no eviction). Device (non-managed) allocations do not count.
        /// One GPU only: the multi-GPU model has no GPU memory limit and does not read it (presets set it for their
        /// single-GPU runs). In translation.mode = "iommu" the page-request path maps first touches in place, outside
        /// this memory; only the driver's migrations (access-counter migration among them) take it. A limit the footprint
        /// never reaches still differs from 0: with limited memory a far-faulted instruction re-executes only its lanes on
        /// faulted pages (0: the whole instruction, as before evictions were modelled; docs/architecture.md).
        pub gpu_memory_bytes: ByteSize = ByteSize(0),
        /// Managed footprint over GPU memory, in 2 MiB blocks (2.0: half the footprint's blocks fit, rounded down; below 1 the
        /// footprint fits; seed paged-memory §5 sets GPU memory to a fraction of the footprint); 0 = off. GPU memory is
        /// never less than one 2 MiB block (one 4 KiB page with eviction.granularity = "page"): a footprint of 3 blocks
        /// gets 1 block at 2.0 and at 4.0 alike (the metric uvm.gpu_memory_bytes says what a run had). When set, it
        /// overrides gpu_memory_bytes. Needs the UVM driver's fault path (translation.mode = "gmmu", one GPU). 1.0 is not
        /// 0: the footprint fits without eviction but fills GPU memory exactly (as does any value that rounds to no
        /// spare block), and a full memory changes the replay (waiting warps wake page by page, their lanes on mapped
        /// pages completing: docs/architecture.md) and the prefetcher (prefetch.when_full, prefetch.full_link_room).
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
        /// Keep one record per batch and one per migration (the `batches` and `migrations` tables of the run's output), and with one GPU the `allocations` table (the driver's page counts per managed allocation).
        pub records: bool = false,
        /// Keep one record per fault fetched or flushed (the `faults` table: arrival, SM, µTLB, page, access, batch, outcome).
        pub fault_records: bool = false,
        /// Most rows the `faults` table keeps (later faults are counted in uvm.fault_records_dropped).
        pub fault_records_max: u64 = 1_000_000,
        /// Most rows the `migrations` table keeps (later copies are counted in uvm.migration_records_dropped):
        /// a multi-GPU run writes one per page moved, and each row costs about 1.4 KiB at its peak on the way to Python.
        pub migration_records_max: u64 = 1_000_000,
        /// Also run the same workload with device memory and explicit copies, and report the
        /// copy-then-execute and ideal-overlap baselines (`baseline.*`; seed paged-memory §2). One GPU: the
        /// multi-GPU model refuses it (it places every page from host memory at first touch, copies or not). A run
        /// without managed memory (workload.managed = false) is refused too: it is the baseline itself.
        pub baselines: bool = false,
    }
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
        if self.max_throttle_per_service == 0 {
            // The driver's loop checks the limit before fetching: 0 would never service a fault.
            return Err(("uvm.max_throttle_per_service".into(), "must be greater than 0".into()));
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
            ("copy_push_us", self.copy_push_us),
            ("copy_push_per_page_us", self.copy_push_per_page_us),
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
        // Only where the order applies (batch-flush, driver model): the default is on, and a preset of another
        // model or policy must not be refused for a value it never reads together with this one.
        let ordered =
            self.fetch_after_replay_wait && self.replay_policy == ReplayPolicy::BatchFlush && self.cost_model == CostModel::Driver;
        if ordered && self.replay_latency_ns > self.replay_us * 1000.0 {
            return Err((
                "uvm.replay_latency_ns".into(),
                format!(
                    "with uvm.fetch_after_replay_wait = true (the default) it must be at most uvm.replay_us x 1000 ({} ns): \
                     the driver's wait for the replay cannot end before the GPU executes it; got {} (lower it, raise \
                     uvm.replay_us, or set uvm.fetch_after_replay_wait = false)",
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
    /// Distinct faulted pages serviced: migrated (or zero-filled) to the GPU with their VA block; not
    /// the throttled, remotely mapped or deferred ones.
    pub unique: u64,
    /// Distinct faulted pages of VA blocks deferred for want of GPU memory (raised again after the replay).
    pub deferred_pages: u64,
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
    /// Evicted pages not copied back: read-only duplicates (the host holds them), and clean ones with `write_back = "dirty"`.
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
    /// Read-mostly pages a host read copied back, the GPU keeping a read-only duplicate.
    pub dup_host_copies: u64,
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
        /// Its stages, counted in `uvm.stage.*` when it ends (as its time in `uvm.time_ns`).
        stages: Stages,
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
    /// The round's batch number (its row in the batch records).
    batch: u64,
    start: Ps,
    end: Ps,
    segment: Segment,
    faults: Vec<Fault>,
    /// The round's last flight to land: the round's time (and its stages, which it carries) are counted when it does.
    last: bool,
    stages: Stages,
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
    copy_push: Ps,
    copy_push_per_page: Ps,
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
    /// Pages the allocator has handed out so far (`pma_chunk_blocks` root chunks of 512 pages per
    /// call, up to `capacity`): memory counted in pages still comes from the allocator in root chunks.
    allocated: u64,
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
    push: Ps,
    transfer: Ps,
    map: Ps,
    tracker: Ps,
    replay: Ps,
    /// Not a stage: the batch's host-to-device copies' time on the link.
    copy: Ps,
}

impl Stages {
    /// The stages by name, in batch order (the batches table's `NAME_ns` columns; `copy` is not a stage).
    fn named(&self) -> [(&'static str, Ps); 13] {
        [
            ("fetch", self.fetch),
            ("block", self.block),
            ("fault", self.fault),
            ("first_touch", self.first_touch),
            ("unmap", self.unmap),
            ("alloc", self.alloc),
            ("evict", self.evict),
            ("zero", self.zero),
            ("push", self.push),
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
            (&mut self.push, o.push),
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
    /// Polled model with merging: how many of the buffer's faults are on each page, so a poll
    /// (and `merges_free`) learns whether later faults can merge without scanning the buffer.
    buffered: FxHashMap<u64, u32>,
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
    /// `merge_prefetched_faults`: a fault joins a copy carrying its page as a prefetch too.
    merge_prefetched: bool,
    /// Polled model: a round's copies land one by one, demand pages first (`uvm.land_per_copy`).
    land_per_copy: bool,
    /// Polled model: the time of the earliest handler poll scheduled (later events are stale and ignored).
    poll_at: Option<Ps>,
    /// Polled model: rounds whose pages are crossing the link, by end time.
    flights: VecDeque<Flight>,
    /// Polled model: pages in a flight, with the flight's id.
    in_flight: FxHashMap<u64, u64>,
    /// How many of `in_flight`'s pages each VA block has: the blocks a round pins (kept so a
    /// poll does not walk every page on the link).
    in_flight_blocks: FxHashMap<u64, u32>,
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
    /// Pages whose faults ended (left `pending`) since the GPU last checked its sleeping
    /// warps (`take_ended`).
    ended: Vec<u64>,
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
    /// An evicted page's memory is free when its copy back starts (`uvm.eviction.overlap_write_back`), not when it lands.
    pub(super) overlap_write_back: bool,
    /// Evicted 4 KiB pages whose GPU translations the world must shoot down (page granularity).
    pub shootdown_pages: Vec<u64>,
    /// Pages evicted to the host (resident there now: a later fault copies them back).
    cpu_evicted: FxHashMap<u64, PageMask>,
    /// Pages the page-request path mapped in place (translation.mode = "iommu"): they stay in host memory,
    /// mapped on the host as well, so host accesses use them where they are.
    pub(super) in_place: FxHashMap<u64, PageMask>,
    /// The GPU shares the host's memory (`iommu.shared_memory`): a prefetch moves and maps nothing.
    pub shared_memory: bool,
    /// Evicted VA blocks whose GPU translations the caller must shoot down.
    pub shootdowns: Vec<u64>,
    prefetch: PrefetchConfig,
    /// Managed allocations' page ranges (prefetch candidates, block ends, the tally's rows).
    allocs: PageRanges,
    /// The driver's page counts per managed allocation (the `allocations` table).
    pub(crate) alloc_tally: AllocTally,
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
    /// Batches in the current bottom-half run, and the limit; those of them that throttled a
    /// thrashing page, and their limit; whether the batch in service throttled one.
    run_batches: u32,
    max_batches: u32,
    run_throttled: u32,
    max_throttled: u32,
    batch_throttled: bool,
    /// When the last batch's throttled pages' naps end, if it throttled any (the watchdog's report).
    throttled_until: Option<Ps>,
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
    pub migration_records_max: u64,
    /// Copies not kept in the `migrations` table because it was full.
    pub migration_records_dropped: u64,
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
    /// The access-counter migration in service: when it started, and its blocks' copies.
    counter_start: Ps,
    counter_copies: Vec<migrate::BlockCopy>,
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
    // Each µTLB's last kept page. The driver also upgrades that entry's access type on a merge,
    // but the merge test reads only the batch's last entry's type, which that upgrade leaves as
    // it was (the driver moves the µTLB's pointer, not the batch's), so only the page is kept.
    let mut utlb_last: FxHashMap<u32, u64> = FxHashMap::default();
    let mut last: Option<(u64, u8)> = None;
    let mut kept = 0;
    for f in fetched {
        let k = kind(f);
        if utlb_last.get(&f.utlb) == Some(&f.vpn) {
            continue;
        }
        if last.is_some_and(|(vpn, lk)| vpn == f.vpn && k <= lk) {
            continue;
        }
        utlb_last.insert(f.utlb, f.vpn);
        last = Some((f.vpn, k));
        kept += 1;
    }
    kept
}

/// One of `key`'s items left a multiset kept as counts (`Uvm::buffered`, `Uvm::in_flight_blocks`).
fn count_down(counts: &mut FxHashMap<u64, u32>, key: u64) {
    if let std::collections::hash_map::Entry::Occupied(mut e) = counts.entry(key) {
        *e.get_mut() -= 1;
        if *e.get() == 0 {
            e.remove();
        }
    }
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
            buffered: FxHashMap::default(),
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
                copy_push: us(c.copy_push_us),
                copy_push_per_page: us(c.copy_push_per_page_us),
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
                Box::new(PageMemory { capacity, pages: Pages::new(c.eviction.policy, seed), pinned: FxHashSet::default(), allocated: 0 })
            }),
            full: false,
            dirty_only: c.eviction.write_back == WriteBack::Dirty,
            overlap_write_back: c.eviction.overlap_write_back,
            shootdown_pages: vec![],
            cpu_evicted: FxHashMap::default(),
            in_place: FxHashMap::default(),
            shared_memory: false,
            shootdowns: vec![],
            prefetch: c.prefetch.clone(),
            allocs: PageRanges::default(),
            alloc_tally: AllocTally::default(),
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
            merge_prefetched: c.merge_prefetched_faults,
            poll_at: None,
            flights: VecDeque::new(),
            in_flight: FxHashMap::default(),
            in_flight_blocks: FxHashMap::default(),
            next_flight: 0,
            interval_end: None,
            interval_demand: 0,
            last_demand: None,
            events: vec![],
            resumed: vec![],
            ended: vec![],
            state: State::Idle,
            run_batches: 0,
            run_throttled: 0,
            max_throttled: c.max_throttle_per_service,
            batch_throttled: false,
            throttled_until: None,
            cached_put: 0,
            update_put_ratio: c.replay_update_put_ratio,
            batch_dups: (0, 0),
            max_batches: c.max_batches_per_service,
            stats: UvmStats::default(),
            records: c.records.then(Vec::new),
            fault_records: c.fault_records.then(Vec::new),
            fault_records_max: c.fault_records_max,
            fault_records_dropped: 0,
            migration_records_max: c.migration_records_max,
            migration_records_dropped: 0,
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
            counter_start: 0,
            counter_copies: vec![],
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
            && (self.joined_flight(f).is_some() || self.buffered.contains_key(&f.vpn))
    }

    /// Polled model with merge_far_faults: the copy in the air that `f` joins at once, the one carrying
    /// its page as a demand page (a fault started its service), or as a prefetch too with
    /// merge_prefetched_faults.
    fn joined_flight(&self, f: &Fault) -> Option<usize> {
        let &id = self.in_flight.get(&f.vpn)?;
        let i = self.flights.iter().position(|x| x.id == id && x.end >= f.time)?;
        (self.merge_prefetched || self.flights[i].segment.demand.binary_search(&f.vpn).is_ok()).then_some(i)
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
            // Its page is crossing the link for another µTLB's fault: the GMMU's MSHR for the page
            // notifies this µTLB too when it lands.
            if let Some(i) = self.joined_flight(&f) {
                let flight = &mut self.flights[i];
                self.stats.fetched += 1;
                self.stats.duplicates += 1;
                self.stats.joined += 1;
                flight.faults.push(f);
                // A duplicate of the round whose flight it joins: its row counts it as the summary does.
                let batch = flight.batch;
                if let Some(r) = self.records.as_mut().and_then(|r| r.get_mut(batch as usize)) {
                    r.fetched += 1;
                    r.duplicates += 1;
                    match (f.write, f.prefetch) {
                        (true, _) => r.writes += 1,
                        (false, true) => r.prefetches += 1,
                        (false, false) => r.reads += 1,
                    }
                }
                self.record_fault(&f, batch, Outcome::Duplicate);
                return Next::Nothing;
            }
        }
        // The hardware writes faults in the order they occur; walks processed
        // later may end earlier, so insert by time (ties keep raise order).
        if self.polled.is_some() && self.merge {
            *self.buffered.entry(f.vpn).or_insert(0) += 1;
        }
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
                        self.ended.push(f.vpn);
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

    /// The pages whose faults ended since the last call (serviced, dropped with a deferred
    /// block or a throttle, or held and found mapped at a replay), for the GPU's replay.
    /// A sleeping warp's page leaves `in_service` only when its fault ends: without one of
    /// these now unmapped (serviced and evicted, or dropped), a warp still waiting for an
    /// unmapped page at the last check still waits for it.
    pub fn take_ended(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.ended)
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
        let index = self.allocs.add(first, end);
        let advice = self.advise.of(index as u32);
        if advice != Advice::None {
            self.advised.push((first, end, advice));
            self.advised.sort_unstable_by_key(|r| r.0);
        }
        self.alloc_tally.add(index, first, end);
        self.seq_cursor = self.allocs.spans()[0].0;
        if self.oversubscription > 0.0 {
            let blocks: u64 = self.allocs.spans().iter().map(|&(f, e)| e.div_ceil(BLOCK_PAGES) - f / BLOCK_PAGES).sum();
            if let Some(pm) = self.page_evict.as_mut() {
                // Memory counted in pages only: a chunk capacity rounded down from the blocks would be
                // smaller than the pages' and fail the capacity checks of debug builds.
                let pages: u64 = self.allocs.spans().iter().map(|&(f, e)| e - f).sum();
                pm.capacity = ((pages as f64 / self.oversubscription).floor() as u64).max(1);
            } else {
                self.capacity_chunks = ((blocks as f64 / self.oversubscription).floor() as u64).max(1);
            }
        }
    }

    /// Record the order in which pages are first faulted (the oracle's first pass).
    /// Call after the allocations are added (the world adds them all when it is built).
    pub fn record_first_touch(&mut self) {
        self.first_touch = Some((vec![], FxHashSet::default()));
        // Allocations are sorted; count their union (two never share a page, but be sure).
        let (mut pages, mut covered) = (0, 0);
        for &(f, e) in self.allocs.spans() {
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
            || self.is_in_place(vpn)
    }

    /// The page-request path mapped `vpn` for the GPU in place (IOMMU mode): the page is in host memory, where the
    /// fault handler populated it and mapped it on the host too (the IOMMU driver's `handle_mm_fault`, the KFD's
    /// `hmm_range_fault`), so host accesses use it in place and keep the GPU's mapping. ASSUMPTION: one host thread
    /// (the handler) mapped it, for the cost of a later unmap.
    pub fn map_in_place(&mut self, vpn: u64) {
        let block = vpn / BLOCK_PAGES;
        prefetch::set(self.in_place.entry(block).or_insert([0; 8]), (vpn % BLOCK_PAGES) as usize);
        self.host_map(block, vpn, vpn + 1, 1);
    }

    /// Was `vpn` mapped for the GPU in place, in host memory?
    fn is_in_place(&self, vpn: u64) -> bool {
        self.in_place.get(&(vpn / BLOCK_PAGES)).is_some_and(|m| prefetch::get(m, (vpn % BLOCK_PAGES) as usize))
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
        match self.allocs.find(first) {
            Some((_, end, _)) => (end - first).min(BLOCK_PAGES) as usize,
            None => BLOCK_PAGES as usize,
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
        if rows.len() as u64 >= self.migration_records_max {
            self.migration_records_dropped += 1;
            return;
        }
        rows.push(MigrationRecord {
            start_ns: start as f64 / 1000.0,
            end_ns: end as f64 / 1000.0,
            first_page: pages.iter().copied().min().unwrap_or(0),
            pages: pages.len() as u64,
            bytes: pages.len() as u64 * 4096,
            direction: if dir == Dir::HostToDevice { "h2d" } else { "d2h" },
            cause,
            copy_engine: engine,
            gpu: 0,
            src_gpu: -1,
        });
    }

    /// The host-mapped VA blocks a preemptive unmap triggered in `block` covers, in address order.
    fn unmap_range(&self, block: u64) -> Vec<u64> {
        let ranges: Vec<(u64, u64)> = match self.preunmap.granularity {
            UnmapGranularity::VaBlock => vec![(block, block + 1)],
            UnmapGranularity::Allocation => match self.allocs.find(block * BLOCK_PAGES) {
                Some((f, e, _)) => vec![(f / BLOCK_PAGES, e.div_ceil(BLOCK_PAGES))],
                None => vec![(block, block + 1)],
            },
            UnmapGranularity::Space => self.allocs.spans().iter().map(|&(f, e)| (f / BLOCK_PAGES, e.div_ceil(BLOCK_PAGES))).collect(),
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
    /// nap, pinned, remotely mapped and in-place pages (IOMMU mode: the
    /// page-request path maps host memory) are used in place. Returns when
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
            // Read-mostly pages a host read copies back, the GPU keeping a read-only duplicate.
            let mut dup_back: Vec<u64> = vec![];
            for p in lo..hi {
                if !residency.is_resident(p) || self.is_in_place(p) {
                    // Host memory: the host uses it where it is (a page mapped in place keeps its GPU mapping).
                    continue;
                }
                if residency.is_dup(p) {
                    if write {
                        drop_dup.push(p);
                    }
                    continue;
                }
                if !write && self.advice_of(p) == Advice::ReadMostly {
                    // Read duplication comes before the thrashing hints (spec/uvm-driver.md, residency order).
                    dup_back.push(p);
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
            if take.is_empty() && pin.is_empty() && drop_dup.is_empty() && dup_back.is_empty() && mapped {
                block += 1;
                continue;
            }
            // One CPU fault per block: the driver unmaps the GPU (and revokes duplicates, or the write permission
            // of the pages it duplicates), copies back.
            self.stats.host_faults += 1;
            t += self.cpu_fault;
            if !take.is_empty() || !pin.is_empty() || !drop_dup.is_empty() || !dup_back.is_empty() {
                t += self.costs.map;
                self.shootdowns.push(block);
            }
            for (pages, cause) in [(take, Cause::Demand), (pin, Cause::Thrashing)] {
                if pages.is_empty() {
                    continue;
                }
                let bytes = pages.len() as u64 * 4096;
                t += self.push_cost(pages.len());
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
                self.alloc_tally.count(AllocCount::HostFaultPages, &self.allocs, pages.iter().copied());
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
            if !dup_back.is_empty() {
                // A copy, not a move: the GPU keeps the page (read-only: its next store faults and collapses the
                // copies), so nothing is unmade resident and the thrashing module is not told.
                let bytes = dup_back.len() as u64 * 4096;
                t += self.push_cost(dup_back.len());
                let xfer = link.transfer_on(Dir::DeviceToHost, bytes, t, now);
                t = xfer.1;
                self.record_migration(xfer, &dup_back, Dir::DeviceToHost, Cause::Hint);
                let host = self.cpu_evicted.entry(block).or_insert([0; 8]);
                for &p in &dup_back {
                    prefetch::set(host, (p % BLOCK_PAGES) as usize);
                    residency.set_dup(p, true);
                }
                self.stats.dup_host_copies += dup_back.len() as u64;
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

    /// Page granularity: the allocator calls that give GPU memory room for `need` more pages (as far as
    /// its capacity goes), each taking `pma_chunk_blocks` root chunks of 512 pages, as a chunk-counted
    /// memory takes them for its blocks. Memory counted in pages is still physical memory the driver
    /// gets from the allocator: before 2026-11-30 this mode made no allocator call, so a run whose GPU
    /// memory sufficed took `pma_alloc_us` less per 64 root chunks with page than with block eviction.
    fn page_alloc_calls(&mut self, need: usize) -> u64 {
        let batch = self.costs.pma_chunk_blocks as u64 * BLOCK_PAGES;
        let pm = self.page_evict.as_mut().expect("page granularity");
        let want = (pm.pages.len() as u64).saturating_add(need as u64).min(pm.capacity);
        let mut calls = 0;
        while pm.allocated < want {
            pm.allocated = pm.allocated.saturating_add(batch).min(pm.capacity);
            calls += 1;
        }
        calls
    }

    /// Page granularity: room in GPU memory for a block's `demand` and
    /// `prefetched` pages (not resident), evicting unpinned pages by the policy;
    /// prefetched pages that find no room are dropped (the last ones). The
    /// victims go back in one copy; their translations are shot down. Returns
    /// the time after the evictions and how many of the demand pages (the
    /// first ones) have room: fewer than all when they outnumber the memory the
    /// batch's own pages leave (the others wait for the next batch); None if
    /// none has room (every page is the batch's own): the block waits.
    fn make_room(
        &mut self,
        demand: &[u64],
        prefetched: &mut Vec<u64>,
        mut t: Ps,
        now: Ps,
        link: &mut Link,
        residency: &mut Residency,
    ) -> Option<(Ps, usize)> {
        let in_flight = &self.in_flight;
        let pm = self.page_evict.as_mut().expect("page granularity");
        let need = demand.len() + prefetched.len();
        let free = pm.capacity.saturating_sub(pm.pages.len() as u64) as usize;
        let mut victims = vec![];
        if need > free {
            self.full = true;
            while free + victims.len() < need {
                match pm.pages.victim(|p| pm.pinned.contains(&p) || in_flight.contains_key(&p), |p| residency.last_touch(p)) {
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
            // What goes back: every victim, or the dirty ones with `write_back = "dirty"`; never a read-only
            // duplicate, which the host holds too (the driver copies only pages not resident at the destination).
            let mut copied: Vec<u64> =
                victims.iter().copied().filter(|&v| !residency.is_dup(v) && (!self.dirty_only || residency.is_dirty(v))).collect();
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
            let bytes = copied.len() as u64 * 4096;
            if bytes > 0 {
                t += self.push_cost(copied.len());
                let xfer = link.transfer_on(Dir::DeviceToHost, bytes, t, now);
                // The pages' memory takes the block's once their copy back has landed, or once it starts.
                t = if self.overlap_write_back { xfer.0 } else { xfer.1 };
                if self.migrations.is_some() {
                    copied.sort_unstable();
                    self.record_migration(xfer, &copied, Dir::DeviceToHost, Cause::Eviction);
                }
            }
            self.alloc_tally.count(AllocCount::Evictions, &self.allocs, victims.iter().copied());
            self.alloc_tally.count(AllocCount::PagesEvicted, &self.allocs, victims.iter().copied());
            self.alloc_tally.count(AllocCount::PagesWrittenBack, &self.allocs, copied.iter().copied());
            self.stats.evictions += victims.len() as u64;
            self.stats.pages_evicted += victims.len() as u64;
            self.stats.pages_evicted_clean += (victims.len() - copied.len()) as u64;
            self.stats.bytes_d2h += bytes;
        }
        // A block's demand larger than GPU memory itself: the first pages that fit go now, so that every
        // batch makes progress (before 2026-12-06 the block waited for room that could never come, and the
        // run livelocked). A demand that fits in GPU memory but not beside the batch's own pages waits
        // whole for the next batch, when they are no longer pinned.
        let capacity = self.page_evict.as_ref().expect("page granularity").capacity as usize;
        if room == 0 || (room < demand.len() && demand.len() <= capacity) {
            return None;
        }
        let admitted = demand.len().min(room);
        prefetched.truncate(room - admitted);
        let pm = self.page_evict.as_mut().expect("page granularity");
        for &p in demand[..admitted].iter().chain(prefetched.iter()) {
            pm.pages.insert(p, residency.touch(p));
            pm.pinned.insert(p);
        }
        self.full |= pm.pages.len() as u64 >= pm.capacity;
        Some((t, admitted))
    }

    /// Drops a batch entry's `prefetched` pages (the last ones) that would take the memory its own
    /// `demand` pages and the batch's `later` entries' demand pages need: pages with page granularity,
    /// with block granularity a prefetch-only block's root chunk (`pinned`: the batch's blocks, whose
    /// chunks cannot be evicted). The evictable memory counts: pages or chunks the batch has not pinned.
    fn room_for_later(&self, prefetched: &mut Vec<u64>, demand: usize, block: u64, later: &[(u64, usize)], pinned: &[u64]) {
        if let Some(pm) = self.page_evict.as_ref() {
            let need: usize = demand + later.iter().map(|l| l.1).sum::<usize>();
            let free = (pm.capacity as usize).saturating_sub(pm.pages.len());
            if need + prefetched.len() <= free {
                return;
            }
            let held = pm.pinned.len() + self.in_flight.keys().filter(|&p| !pm.pinned.contains(p) && pm.pages.contains(*p)).count();
            prefetched.truncate((pm.capacity as usize).saturating_sub(held).saturating_sub(need));
        } else if demand == 0 && !self.chunks.owns(block) {
            let free = self.free_chunks.saturating_add(self.capacity_chunks.saturating_sub(self.allocated_chunks));
            let need = later.iter().filter(|l| l.1 > 0 && !self.chunks.owns(l.0)).map(|l| l.0).collect::<FxHashSet<_>>().len() as u64;
            if free > need {
                return;
            }
            let unpinned = (self.chunks.len() - pinned.iter().filter(|&&b| self.chunks.owns(b)).count()) as u64;
            if free + unpinned <= need {
                prefetched.clear();
            }
        }
    }

    /// The driver's CPU time to push a copy of `pages` 4 KiB pages onto a copy-engine channel (`uvm.copy_push_us`,
    /// `uvm.copy_push_per_page_us`); the driver cost model only (the other models charge a copy its link time).
    fn push_cost(&self, pages: usize) -> Ps {
        if self.fixed.is_none() {
            self.costs.copy_push + self.costs.copy_push_per_page * pages as Ps
        } else {
            0
        }
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
            PrefetchPolicy::Random => {
                prefetch::random(self.allocs.spans(), want, mix64(self.seed ^ 0x7072_6566 ^ self.stats.batches << 8), taken)
            }
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
                    let out = prefetch::locality(self.allocs.spans(), l, self.prefetch.window_pages as u64, want, |p| {
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
            let (more, at) = prefetch::sequential(self.allocs.spans(), self.seq_cursor, want - out.len(), |p| {
                taken(p) || chosen.binary_search(&p).is_ok()
            });
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
        // Polled model: a page an earlier round is still carrying over the link is neither
        // resident nor free (rounds overlap); migrating it again would move it twice.
        prefetch::pages(&mask)
            .filter(|&i| !prefetch::get(&resident, i))
            .map(|i| block * BLOCK_PAGES + i as u64)
            .filter(|p| !self.in_flight.contains_key(p))
            .collect()
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
            self.end_run();
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
        self.debug_check_counts();
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
        if self.merge {
            for f in &fetched {
                count_down(&mut self.buffered, f.vpn);
            }
        }
        if self.merge && fetched.iter().any(|f| self.buffered.contains_key(&f.vpn)) {
            // Later faults (of other µTLBs) on these pages merge into their service: they go out together.
            // The buffer is in time order, so only its prefix up to `now` can merge; the page counts
            // above skip the scan when no buffered fault shares a page (without them a poll walked the
            // whole buffer, quadratic in its length under heavy oversubscription).
            let pages: FxHashSet<u64> = fetched.iter().map(|f| f.vpn).filter(|p| self.buffered.contains_key(p)).collect();
            let cut = self.buffer.partition_point(|f| f.time <= now);
            if self.buffer.range(..cut).any(|f| pages.contains(&f.vpn)) {
                let head: Vec<Fault> = self.buffer.drain(..cut).collect();
                let before = fetched.len();
                let mut rest = Vec::with_capacity(head.len());
                for f in head {
                    if pages.contains(&f.vpn) {
                        count_down(&mut self.buffered, f.vpn);
                        fetched.push(f);
                    } else {
                        rest.push(f);
                    }
                }
                self.stats.joined += (fetched.len() - before) as u64;
                for f in rest.into_iter().rev() {
                    self.buffer.push_front(f);
                }
            }
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
        let mut extra = if interval && (!full || self.interval_demand + demand.len() > 0) {
            // Once full, a set fills only what the link will have free: its room counts the pages still
            // queued on the link if they outnumber the interval's demand pages (see PrefetchConfig::full_link_room).
            let queued = if full && self.prefetch.full_link_room { (link.backlog_bytes(now) / 4096) as usize } else { 0 };
            self.transfer_set(&demand, self.interval_demand.max(queued), self.last_demand, residency)
        } else {
            vec![]
        };
        // Thrashing and hinted pages are not prefetched (`run_batch` drops them): a set of only those is no
        // set, and must not keep the intervals going (before 2026-12-06 an idle GPU polled every interval
        // while the host slept out a thrashing nap, 50,000 empty rounds a second, until the watchdog stopped it).
        if self.thrashing.tracking() || !self.advised.is_empty() {
            extra.retain(|&p| self.prefetchable(p));
        }
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
        self.debug_check_counts();
        next
    }

    /// Debug builds: the per-page and per-block counts kept for the polled handler agree with
    /// the buffer and the pages on the link they summarise (what a poll scanned before session 41).
    fn debug_check_counts(&self) {
        if cfg!(debug_assertions) {
            let mut want: FxHashMap<u64, u32> = FxHashMap::default();
            if self.merge {
                for f in &self.buffer {
                    *want.entry(f.vpn).or_insert(0) += 1;
                }
            }
            assert_eq!(self.buffered, want, "buffered faults per page");
            want.clear();
            for p in self.in_flight.keys() {
                *want.entry(p / BLOCK_PAGES).or_insert(0) += 1;
            }
            assert_eq!(self.in_flight_blocks, want, "pages on the link per VA block");
        }
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
        let distinct = pages.len() as u64;
        let duplicates = fetched.len() as u64 - distinct;
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
        // `uvm.faults.unique` counts these pages only once their block is serviced (not throttled,
        // mapped remotely or deferred).
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
        let mut nap_end: Ps = 0;
        if self.thrashing.tracking() || !self.advised.is_empty() {
            let mut keep = Vec::with_capacity(pages.len());
            for &p in &pages {
                match self.thrashing.hint(p, Proc::Gpu, now) {
                    Hint::Throttle(until) => {
                        throttled_pages.push(p);
                        nap_end = nap_end.max(until);
                    }
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
        self.batch_throttled = throttled > 0;
        self.throttled_until = (throttled > 0).then_some(nap_end);
        // The faults' outcomes as the batch sorts them (written once its blocks are serviced: a
        // deferred block's are `deferred`).
        let mut outcomes: Vec<Outcome> = vec![];
        if self.fault_records.is_some() {
            let mut seen = FxHashSet::default();
            outcomes = fetched
                .iter()
                .map(|f| {
                    if !seen.insert(f.vpn) || self.in_flight.contains_key(&f.vpn) {
                        Outcome::Duplicate
                    } else if residency.is_resident(f.vpn) || residency.is_remote(f.vpn) {
                        Outcome::Stale
                    } else if throttled_pages.contains(&f.vpn) {
                        Outcome::Throttled
                    } else if remote.binary_search(&f.vpn).is_ok() {
                        Outcome::Remote
                    } else {
                        Outcome::Serviced
                    }
                })
                .collect();
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
            pinned.extend(self.in_flight_blocks.keys());
            pinned.sort_unstable();
            pinned.dedup();
        }
        if let Some(pm) = self.page_evict.as_mut() {
            // (Pages still crossing the link, polled model, stay too: `make_room` asks `in_flight`.)
            pm.pinned.clear();
        }
        let (blocks_before, bytes_before, d2h_before) = (self.stats.va_blocks, self.stats.bytes_h2d, self.stats.bytes_d2h);
        let (evictions_before, evicted_before, prefetched_before) = (self.stats.evictions, self.stats.pages_evicted, self.stats.prefetched);
        let (remote_before, unique_before) = (self.stats.remote_mapped, self.stats.unique);
        let mut deferred: Vec<u64> = vec![];
        let th_before = (self.thrashing.stats.detected, self.thrashing.stats.pins, self.thrashing.stats.unpins);
        let driver = self.fixed.is_none();
        let c = self.costs.clone();
        let mut st = Stages::default();
        let mut t = now;
        // The fixed-latency model replaces every stage cost by one latency; transfers come on top. The
        // driver model's pre-processing: read the entries, sort, skip the duplicates the fetch left (counted
        // against the distinct pages before the stale, throttled and remote ones left `pages`: those are not
        // duplicates).
        let fetch = self.fixed.unwrap_or(c.batch + c.fetch_entry * fetched.len() as Ps + c.per_duplicate * (coalesced - distinct));
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
        // Per copy, the blocks' evictions overlap: the round's `evict` stage runs until the last of them is
        // done, its `transfer` stage from then to the last copy's landing (so the stages make the round).
        let mut evict_end = round_start;
        // Each entry's block and demand pages, for the room the entries after it need (`room_for_later`).
        let demand_of: Vec<(u64, usize)> = work.iter().map(|w| (w.0, w.1.len())).collect();
        for (idx, (block, mut demand, mut prefetched)) in work.into_iter().enumerate() {
            if per_copy {
                t = round_start;
            }
            if !self.prefetch_policy().per_batch() && !demand.is_empty() {
                prefetched = self.block_prefetch(block, &demand, residency);
                if self.thrashing.tracking() || !self.advised.is_empty() {
                    prefetched.retain(|&p| self.prefetchable(p));
                }
            }
            // Prefetches take only the memory the batch's later demand pages leave: in VA-block order a
            // transfer set's prefetch-only block (or a block's prefetched pages) before a demand block could
            // otherwise fill a full memory with pages the batch pins, deferring the demand block at every
            // batch (before 2026-12-06 the run livelocked: stream at uvm.oversubscription = 8, sequential).
            if !prefetched.is_empty() {
                self.room_for_later(&mut prefetched, demand.len(), block, &demand_of[idx + 1..], &pinned);
                if demand.is_empty() && prefetched.is_empty() {
                    continue;
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
                // 4 KiB pages: memory from the allocator, then room for the block's pages, evicting others
                // (deferred if every page is pinned).
                let calls = self.page_alloc_calls(demand.len() + prefetched.len());
                add(&mut t, c.pma_alloc * calls, &mut st.alloc);
                match self.make_room(&demand, &mut prefetched, t, now, link, residency) {
                    Some((after, admitted)) => {
                        if admitted < demand.len() {
                            // The pages with no room wait for the next batch; their warps fault again.
                            deferred.extend(demand.drain(admitted..));
                            residency.refault_epoch += 1;
                            self.seq_cursor = self.seq_cursor.min(block * BLOCK_PAGES);
                        }
                        if per_copy {
                            evict_end = evict_end.max(after);
                            landed = landed.max(after);
                        } else {
                            st.evict += after - t;
                        }
                        t = after;
                    }
                    None => {
                        self.stats.deferred_blocks += 1;
                        deferred.extend(&demand);
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
                        if per_copy {
                            evict_end = evict_end.max(after);
                        } else {
                            st.evict += after - t;
                        }
                        t = after;
                        add(&mut t, c.per_block, &mut st.block);
                    } else {
                        // Every chunk belongs to this batch's blocks: this block waits; its
                        // faults are raised again after the replay.
                        self.stats.deferred_blocks += 1;
                        deferred.extend(&demand);
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
                // The CPU pushes the copy's methods; the copy engine starts on it once pushed.
                add(&mut t, self.push_cost(from_cpu.len()), &mut st.push);
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
            // Only a page the host holds is duplicated; one resident nowhere is populated on the GPU alone (its
            // only copy: an eviction copies it back, a host read duplicates it there).
            let dup: Vec<u64> = if duplicate {
                self.stats.dup_copies += from_cpu.len() as u64;
                from_cpu.clone()
            } else {
                vec![]
            };
            if driver {
                t += c.map;
                st.map += c.map;
            }
            self.stats.va_blocks += 1;
            self.stats.unique += demand.len() as u64;
            self.stats.bytes_h2d += bytes;
            self.stats.prefetched += prefetched.len() as u64;
            self.alloc_tally.count(AllocCount::Faults, &self.allocs, demand.iter().copied());
            self.alloc_tally.count(AllocCount::Prefetched, &self.allocs, prefetched.iter().copied());
            self.alloc_tally.count(AllocCount::PagesH2d, &self.allocs, from_cpu.iter().copied());
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
        if per_copy {
            // The copies ran side by side from the round's start (see `evict_end`); the round ends
            // with its last copy, or with the last block's eviction if that block copied nothing.
            let end = landed.max(t);
            let evicted = evict_end.min(end);
            st.evict += evicted - round_start;
            st.transfer += end - evicted;
            t = end;
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
        // `block` policy: blocks deferred after the last one serviced cost their checks after its replay; their
        // faults need a replay of their own (before 2026-12-06 the batch ended with that block's, and its time
        // fell short of its stages).
        let deferred_last = per_block_replay && segments.back().is_some_and(|s: &Segment| s.end < t);
        if !per_block_replay || segments.is_empty() || deferred_last {
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
        self.stats.deferred_pages += deferred.len() as u64;
        if self.fault_records.is_some() {
            deferred.sort_unstable();
            let batch = self.stats.batches;
            for (f, mut outcome) in fetched.iter().zip(outcomes) {
                if outcome == Outcome::Serviced && deferred.binary_search(&f.vpn).is_ok() {
                    outcome = Outcome::Deferred;
                }
                self.record_fault(f, batch, outcome);
            }
        }
        self.stats.batches += 1;
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
                unique: self.stats.unique - unique_before,
                deferred: deferred.len() as u64,
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
                push_ns: ns(st.push),
                transfer_ns: ns(st.transfer),
                map_ns: ns(st.map),
                tracker_ns: ns(st.tracker),
                replay_ns: ns(st.replay),
                copy_ns: ns(st.copy),
                finished: false,
            });
        }
        self.collect_unpins();
        if polled {
            return self.launch(now, copies, segments.pop_front().expect("one segment"), fetched, st);
        }
        let first_end = segments.front().expect("at least one segment").end;
        self.state = State::Servicing { segments, fetched, start: now, stages: st };
        Next::BatchDone(first_end)
    }

    /// Polled model: a round's pages cross the link, as `copies` that land one
    /// by one (`uvm.land_per_copy`) and `rest`, which ends with the round and
    /// holds its other pages (all of them without per-copy landing) and its
    /// remote mappings. Each fault of `fetched` waits for the flight that
    /// carries its page (one of these, or an earlier round's); faults on pages
    /// none carries (resident already, throttled) end with `rest`.
    fn launch(&mut self, now: Ps, copies: Vec<Segment>, rest: Segment, fetched: Vec<Fault>, stages: Stages) -> Next {
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
                if self.in_flight.insert(p, id).is_none() {
                    *self.in_flight_blocks.entry(p / BLOCK_PAGES).or_insert(0) += 1;
                }
            }
            debug_assert!(segment.demand.windows(2).all(|w| w[0] < w[1]), "a copy's demand pages are sorted (`joined_flight`)");
            let end = segment.end;
            let last = Some(k) == last_at;
            last_marked |= last;
            let at = self.flights.partition_point(|x| x.end <= end);
            let batch = self.stats.batches - 1;
            let stages = if last { stages } else { Stages::default() };
            self.flights.insert(at, Flight { id, batch, start: now, end, segment, faults, last, stages });
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
            if self.in_flight.remove(p).is_some() {
                count_down(&mut self.in_flight_blocks, p / BLOCK_PAGES);
            }
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
            self.ended.push(f.vpn);
        }
        if flight.last {
            self.stats.stages.accumulate(&flight.stages);
            self.stats.time_ps += now - flight.start;
            self.stats.batch.record(now - flight.start);
            if let Some(r) = self.records.as_mut().and_then(|r| r.get_mut(flight.batch as usize)) {
                r.finished = true;
            }
        }
        self.stats.replays += 1;
        if let Some(r) = self.records.as_mut().and_then(|r| r.get_mut(flight.batch as usize)) {
            r.replays += 1;
        }
        self.unpark(now, residency);
        self.resumed = touched.into_iter().filter(|&u| self.outstanding[u as usize] == 0 && self.parked[u as usize].is_empty()).collect();
        (Next::Nothing, true)
    }

    /// When the naps of the pages the last batch throttled end (None: it throttled none).
    pub fn throttled_until(&self) -> Option<Ps> {
        self.throttled_until
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
        for &p in &seg.demand {
            // In flight and resident at once would mean a page migrated twice.
            debug_assert!(!residency.is_resident(p), "page {p:#x} serviced but already resident");
            residency.make_resident(p);
        }
        for &p in &seg.prefetched {
            debug_assert!(!residency.is_resident(p), "page {p:#x} prefetched but already resident");
            residency.make_prefetched(p);
        }
        for &p in &seg.remote {
            residency.map_remote(p);
        }
        if self.polled.is_none() && self.full {
            // The GPU's replay completes the lanes on every page mapped now, whichever fault
            // (or prefetch) brought it (`Gpu::replay_ended`).
            self.ended.extend(seg.demand.iter().chain(&seg.prefetched).chain(&seg.remote));
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
        let State::Servicing { fetched, start, stages, .. } = std::mem::replace(&mut self.state, State::Idle) else {
            unreachable!("checked above")
        };
        self.stats.stages.accumulate(&stages);
        for f in &fetched {
            self.outstanding[f.utlb as usize] -= 1;
            unpend(&mut self.pending, &mut self.by_warp, f);
        }
        self.ended.extend(fetched.iter().map(|f| f.vpn));
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
        if let Some(last) = self.records.as_mut().and_then(|r| r.last_mut()) {
            last.finished = true;
        }
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
            if self.run_full() {
                Next::Service(now + wait + self.interrupt)
            } else {
                Next::Service(now + wait)
            }
        } else if self.buffer.is_empty() {
            self.end_run();
            Next::Nothing
        } else {
            self.state = State::Woken;
            if self.run_full() {
                // The bottom half yields; the next interrupt wakes it.
                Next::Service(now + self.interrupt)
            } else {
                Next::Service(now)
            }
        };
        (next, replay)
    }

    /// Count the batch just serviced in the bottom-half run; true (and a new run) when the
    /// run has reached max_batches_per_service batches or max_throttle_per_service batches
    /// that throttled a thrashing page, as the driver's service loop checks before each fetch.
    fn run_full(&mut self) -> bool {
        self.run_batches += 1;
        self.run_throttled += u32::from(std::mem::take(&mut self.batch_throttled));
        let full = self.run_batches >= self.max_batches || self.run_throttled >= self.max_throttled;
        if full {
            self.end_run();
        }
        full
    }

    /// The bottom half ends (limits reached, or nothing left to fetch).
    fn end_run(&mut self) {
        self.run_batches = 0;
        self.run_throttled = 0;
        self.batch_throttled = false;
    }

    /// Conservation of faults (checked at the end of every debug run and in
    /// tests): every raised fault is fetched, flushed or still buffered, and
    /// the µTLBs count exactly the buffered and in-service ones as outstanding.
    /// (A run may end while a batch of stale faults is in service.)
    pub fn check_invariants(&self, residency: &Residency) -> Result<(), String> {
        self.check_invariants_in_place(residency, 0)
    }

    /// `check_invariants` when `in_place` of the resident pages were mapped in place by the
    /// IOMMU's page-request path (translation.mode = "iommu"): they hold none of the GPU memory
    /// the driver allocates, so they do not count against its capacity. (If the driver evicts
    /// such a page the check only becomes looser.)
    pub fn check_invariants_in_place(&self, residency: &Residency, in_place: u64) -> Result<(), String> {
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
            let placed = residency.resident_pages().saturating_sub(in_place);
            if placed > cap * BLOCK_PAGES {
                return Err(format!("uvm: {placed} pages resident, beyond the capacity of {cap} chunks"));
            }
        }
        if let Some(pm) = self.page_evict.as_ref() {
            let placed = residency.resident_pages().saturating_sub(in_place);
            if pm.pages.len() as u64 > pm.capacity || placed > pm.capacity {
                return Err(format!(
                    "uvm: {} pages hold GPU memory, {placed} resident, beyond the capacity of {} pages",
                    pm.pages.len(),
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
            "uvm driver: {:?}, {} faults buffered, {} rounds in flight, {} held at µTLBs ({} outstanding)",
            self.state_name(),
            self.buffer.len(),
            self.flights.len(),
            self.parked(),
            self.outstanding.iter().map(|&o| o as u64).sum::<u64>()
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
        m.int("uvm.faults.deferred", s.deferred_pages);
        m.int("uvm.faults.duplicate", s.duplicates);
        m.int("uvm.faults.fetch_merged", s.fetch_merged);
        m.int("uvm.faults.flushed", s.flushed);
        // Raised but never fetched: still in the buffer when the program ended.
        m.int("uvm.faults.unfetched", self.buffer.len() as u64);
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
        m.int("uvm.read_dup.host_copies", s.dup_host_copies);
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
        m.ratio("uvm.faults_per_batch", s.fetched, s.batches);
        m.int("uvm.resident_pages", residency.resident_pages());
        self.async_prefetch.export(m);
    }
}

#[cfg(test)]
mod tests;
