//! Typed configuration: one struct per section, declared once with its
//! defaults and documentation (see `section!`), loaded from TOML sources
//! (preset, then the user's file) plus `--set key.path=value` overrides, and
//! validated with messages that name the source, the key and what is accepted.
//!
//! Contracts: unknown keys are errors naming the nearest valid key; sizes take
//! binary units ([`ByteSize`]); every other number carries its unit in its key
//! (`_ns`, `_cycles`, `_mhz`, `_gbps`, `_bytes`).

#[macro_use]
mod macros;
mod load;
mod units;
mod unread;

pub use load::{plain_key, resolve, ConfigError, Source};
pub use units::ByteSize;
pub use unread::{unread_in, Mode};

use crate::assoc::Replacement;
use crate::link::BandwidthModel;
use crate::uvm::prefetch::PrefetchPolicy;
use crate::uvm::{Advice, UvmConfig};
use crate::workload::WorkloadConfig;
use serde::{Deserialize, Serialize};

/// One documented parameter: dotted key and description.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParamDoc {
    pub key: String,
    pub doc: String,
    /// A section (a table of parameters) rather than a parameter.
    #[serde(skip)]
    pub section: bool,
}

/// Anything that can appear in a config: a section (recurses) or a leaf value.
pub trait Describe {
    fn describe(path: &str, doc: &str, out: &mut Vec<ParamDoc>);
}

pub fn join_key(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

leaf!(u32, u64, f64, bool, String, ByteSize, Replacement, TranslationMode, WarpScheduler, CtaDispatch, TlbAllocate, PwcOrganization);

/// Which ready warp an SM issues from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WarpScheduler {
    /// Greedy-then-oldest: the issuing warp continues until it stalls, then the earliest-ready warp.
    #[default]
    Gto,
    /// Strictly the earliest-ready warp, instruction by instruction.
    TimeOrder,
}

/// How a kernel's first CTAs are spread over the SMs at launch (later ones go to the SM a retiring CTA frees).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CtaDispatch {
    /// One CTA per SM per pass (CTA i on SM i mod SMs while every SM has room): GPGPU-Sim's issue order. Gilman et
    /// al. (SIGMETRICS PER 2020) find that on Pascal, Volta and Turing the block scheduler picks the next SM by its
    /// free resources, which on an idle GPU also spreads a kernel's first CTAs over the SMs.
    #[default]
    RoundRobin,
    /// Each SM filled before the next (CTAs 0 .. k-1 on SM 0, k .. 2k-1 on SM 1, ...). A hypothesis, not a
    /// documented scheduler: neighbouring CTAs share an SM and its TLB.
    Fill,
}

/// How a GPU TLB miss is translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TranslationMode {
    /// Discrete GPU: the GPU's own MMU (GMMU) walks a GPU-local radix page table.
    #[default]
    Gmmu,
    /// APU / ATS: misses travel over a link to the host IOMMU, which has its own TLB and walkers.
    Iommu,
}

/// How a walker's page-walk cache holds the entries of the non-leaf levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PwcOrganization {
    /// One cache per non-leaf level, each of `pwc_entries` entries.
    #[default]
    PerLevel,
    /// Unified translation cache (UTC; Barr et al., ISCA 2010, "Translation caching:
    /// skip, don't walk (the page table)"): one cache of `pwc_entries` entries holding
    /// the entries of every non-leaf level, tagged by level, with one LRU order, so
    /// lower-level entries compete with (and evict) upper-level ones.
    Unified,
}

/// When a missed translation takes its TLB entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TlbAllocate {
    /// At the miss: the entry is reserved (and made most recently used) at once and
    /// filled later; lookups before the fill are MSHR hits that refresh it.
    #[default]
    OnMiss,
    /// At the fill: the miss waits in an MSHR outside the array; when the translation
    /// arrives the set's least recently used entry is evicted and the new one made most
    /// recently used. Lookups before the fill are MSHR hits that touch no recency.
    OnFill,
}

section! {
    /// Run control.
    pub struct SimConfig {
        /// Root seed: every random choice of the run is a hash of it and what is chosen.
        pub seed: u64 = 1,
        /// Fail the run (naming what waits) when this many events in a row fire without simulated time advancing.
        pub stall_events: u64 = 10_000_000,
        /// Print progress to stderr every this many wall-clock seconds; 0 = never (`uvmsim run`: 2). A line gives the simulated time, events and their rate, then where the program is: its host operation and the running kernel's CTAs done, a trace replay's line, or in a multi-application run how many applications ended their first run and how often the others re-ran.
        pub progress_every_s: f64 = 0.0,
        /// Fail the run (naming the far-fault state) when the UVM driver services this many batches (polled model:
        /// handler rounds) in a row while no warp instruction completes (re-executions of faulted ones do not count);
        /// 0 = never. A guard against runs that thrash without end, not a model parameter. Pages the thrashing
        /// mitigation throttles fault until their nap ends (uvm.thrashing.nap lapses): the message names that wait.
        pub watchdog_batches: u64 = 100_000,
        /// Fail a multi-GPU run (naming each GPU's waiting warps) when this many far-fault answers in a row reach
        /// the GPUs while no warp instruction completes on any of them; 0 = never. The multi-GPU counterpart of
        /// `watchdog_batches` (far faults there are answered page by page, not in batches): a guard against pages
        /// that move between GPUs without end, not a model parameter.
        pub watchdog_answers: u64 = 1_000_000,
        /// Fail the run ("event budget reached") after it has handled this many events without finishing; 0 = no
        /// limit. A budget for experiments whose runs may take hours, not a model parameter: deterministic (events,
        /// not wall time), so a run that fits its budget has the metrics it has without one.
        pub max_events: u64 = 0,
    }
}

section! {
    /// A set-associative TLB.
    pub struct TlbConfig {
        /// Number of entries; 0 removes this TLB level.
        pub entries: u32 = 32,
        /// Associativity; equal to entries for fully associative.
        pub ways: u32 = 32,
        /// Lookup latency in GPU core cycles.
        pub latency_cycles: u32 = 1,
        /// Outstanding misses (MSHRs); misses to a page already pending merge into its MSHR.
        pub mshrs: u32 = 32,
        /// Replacement policy: "lru" or "fifo".
        pub replacement: Replacement = Replacement::Lru,
        /// When a miss takes its entry: "on-miss" (reserved at the miss) or "on-fill"
        /// (inserted when the translation arrives, evicting the set's LRU entry then; the
        /// pending miss lives only in its MSHR). "on-fill" is MGPUSim v4's Akita TLB
        /// (akita v4 mem/vm/tlb: a miss only adds an MSHR entry; the response evicts,
        /// updates and visits a way).
        pub allocate: TlbAllocate = TlbAllocate::OnMiss,
        /// Lookups are served in arrival order: a miss that finds every MSHR busy holds
        /// back every later lookup of this TLB (hits too) until an MSHR frees. Akita's TLB
        /// does this (akita v4 mem/vm/tlb: the lookup stage retries the request at the head
        /// of its buffer while the MSHR is full). false: only that miss waits.
        pub full_mshrs_block: bool = false,
        /// L2 TLB only: GPU core cycles from this TLB taking a translation it missed to the
        /// L1 TLB having it (a miss's way back; a hit's is inside `latency_cycles`). 0 = the
        /// same time. MGPUSim (akita v4 mem/vm/tlb + sim/directconnection): the L2 TLB parses
        /// the response in one tick and answers the MSHR entry in the next, and the L1 TLB
        /// parses it in the tick after that: 2. A request that merged into this TLB's
        /// pending miss (an MSHR hit still waiting when its lookup is made) is answered
        /// with it, as Akita's respondMSHREntry answers every request of the entry.
        pub fill_return_cycles: u32 = 0,
        /// GPU core cycles from a request's arrival to its lookup: the MSHR and set check
        /// (which sees the translations installed by then) and, on a miss, the request to
        /// the next level; a hit still answers `latency_cycles` after the arrival, so at
        /// most `latency_cycles`. 0 = uvmsim's default: the check sees the TLB as it is
        /// at the arrival and a miss leaves `latency_cycles` later. MGPUSim's L2 TLB (akita
        /// v4 mem/vm/tlb): a request reaching it in tick A enters the 4-stage lookup
        /// pipeline at the end of A, reaches the post-pipeline buffer in A+4 and is looked
        /// up in A+5 (extractFromPipeline runs before the pipeline moves), where a miss is
        /// sent on at once: 5, with `latency_cycles` 6 for the answer's hop back.
        pub lookup_stage_cycles: u32 = 0,
        /// Translations this TLB installs per GPU core cycle; 0 = no limit. A fill that
        /// finds its cycle taken is installed (its MSHR freed, its requests answered) in
        /// the next free one. Akita v4's TLB (mem/vm/tlb tlbMiddleware.parseBottom) takes
        /// one response per tick, and none while the previous one's MSHR entry is being
        /// answered (respondMSHREntry, first in the next tick): 1.
        pub fills_per_cycle: u32 = 0,
    }
}

section! {
    /// A set-associative data cache (128 B lines by default, physically tagged).
    pub struct CacheConfig {
        /// Capacity; 0 removes this cache level.
        pub size_bytes: ByteSize = ByteSize(16 << 10),
        /// Associativity.
        pub ways: u32 = 4,
        /// Hit latency in GPU core cycles.
        pub latency_cycles: u32 = 20,
        /// Replacement policy: "lru" or "fifo".
        pub replacement: Replacement = Replacement::Lru,
    }
}

section! {
    /// Device memory (or, on an APU, the shared system memory) as latency plus bandwidth.
    pub struct DramConfig {
        /// Latency of one line access at an idle channel, in ns (added after the bandwidth queue).
        pub latency_ns: f64 = 100.0,
        /// Aggregate peak bandwidth in GB/s (1e9 bytes per second), split evenly over channels.
        pub bandwidth_gbps: f64 = 512.0,
        /// Independent channels; lines interleave across them.
        pub channels: u32 = 16,
        /// How addresses map to channels. 0 = a hash of the line number (spreads power-of-two
        /// strides evenly; uvmsim's default). Otherwise consecutive blocks of this many bytes
        /// go to consecutive channels: channel = (address / interleave_bytes) mod channels.
        /// A multiple of `gpu.line_bytes`. MGPUSim's R9 Nano (amd/samples/runner/timingconfig/
        /// r9nano/builder.go): log2MemoryBankInterleavingSize 7 selects the L2 bank per 128 B
        /// (an InterleavedAddressPortMapper) and L2 bank i sends its misses to DRAM controller i
        /// only (a SinglePortMapper): 128.
        pub interleave_bytes: ByteSize = ByteSize(0),
    }
}

section! {
    /// One GPU: SMs (NVIDIA) or compute units (AMD), warp slots, issue, TLBs, caches, memory.
    pub struct GpuConfig {
        /// Number of SMs / compute units.
        pub sms: u32 = 16,
        /// Core clock in MHz.
        pub core_mhz: f64 = 1000.0,
        /// Threads per warp (32 on NVIDIA) or wavefront (64 on AMD).
        pub warp_size: u32 = 32,
        /// Warp slots per SM.
        pub max_warps_per_sm: u32 = 48,
        /// Resident CTAs (thread blocks) per SM.
        pub max_ctas_per_sm: u32 = 16,
        /// Cycles the SM's issue port is busy per warp instruction.
        pub issue_cycles: u32 = 1,
        /// Warp scheduler: "gto" (greedy-then-oldest) or "time-order" (earliest-ready warp each instruction).
        pub scheduler: WarpScheduler = WarpScheduler::Gto,
        /// How a kernel's CTAs are spread over the SMs at launch: "round-robin" (one per SM per pass, the default) or
        /// "fill" (each SM filled before the next; a hypothesis for sensitivity studies, no scheduler documents it).
        pub cta_dispatch: CtaDispatch = CtaDispatch::RoundRobin,
        /// CTA-wide barriers (`__syncthreads`) hold each warp until every running warp of its CTA has reached
        /// them (CUDA's execution model); false: a barrier takes its issue slot but waits for nothing, each warp
        /// runs on alone (as every warp did before 2026-11-30; a what-if for how much the barriers couple the
        /// stalls of a CTA's warps).
        pub cta_barriers: bool = true,
        /// Data-cache line size in bytes (the coalescing granule).
        pub line_bytes: u32 = 128,
        /// SMs sharing one L1 TLB (a µTLB); 1 = private per SM.
        pub sms_per_l1tlb: u32 = 1,
        /// Per-SM (or per-µTLB) L1 TLB.
        pub l1tlb: TlbConfig = TlbConfig::default(),
        /// Shared L2 TLB (entries = 0: none).
        pub l2tlb: TlbConfig = TlbConfig { entries: 512, ways: 16, latency_cycles: 10, mshrs: 64, ..TlbConfig::default() },
        /// Per-SM L1 data cache.
        pub l1d: CacheConfig = CacheConfig::default(),
        /// Shared L2 data cache.
        pub l2d: CacheConfig = CacheConfig { size_bytes: ByteSize(2 << 20), ways: 16, latency_cycles: 100, replacement: Replacement::Lru },
        /// Device memory.
        pub dram: DramConfig = DramConfig::default(),
        /// The path from the L1 TLB's answers to the L1 data cache (MGPUSim's address translator).
        pub vmem: VmemConfig = VmemConfig::default(),
    }
}

section! {
    /// The vector memory path between an SM's L1 TLB and its L1 data cache: by default a
    /// translated access reaches the cache as soon as its translation is ready. With
    /// `backpressure` it follows MGPUSim v4's path (Akita v4: mem/vm/tlb tlbMiddleware,
    /// mem/vm/addresstranslator, mem/cache/writearound): the L1 TLB's answers wait in a
    /// bounded chain of buffers for the L1 data cache, which takes a request while it has
    /// fewer than `l1_transactions` in flight and room before its directory; the directory
    /// takes them in order and holds a read miss while every way of its set waits for a
    /// fill; a hit the TLB cannot answer for lack of room holds its later lookups.
    pub struct VmemConfig {
        /// Model the back-pressure of the L1 data cache on the L1 TLB (needs `gpu.l1d`).
        /// Akita v4: the TLB's lookup stage stops while a hit's answer cannot be sent
        /// (tlbMiddleware.handleTranslationHit returns false and the request stays at the
        /// head); the address translator forwards answers in arrival order and stops when
        /// the cache's top port is full (parseTranslation); the write-around cache's
        /// directory processes its buffer in order and a read miss waits while its set's
        /// victim is locked by a pending fill (directory.processReadMiss, LRUVictimFinder:
        /// the least recent unlocked way, none if all are locked). Misses and merged
        /// requests take their room when their translation arrives; they never hold the
        /// lookups (their effect on the TLB's fill parsing is not modelled). Writes do
        /// not wait for a way (write-around). Off: no change to any result. Validated on
        /// timed trace replay (`mgpusim-tlb`), whose lookups come in time order per CU.
        /// With generated warps (which issue slightly out of order) a way is locked only
        /// from its fill's start; on `mgpusim-r9nano` nine MGPUSim-suite generators run
        /// 0.99-1.45x their time with it off (docs/validation.md, MGPUSim traces,
        /// "Session 46"), but no generator result is checked against MGPUSim.
        pub backpressure: bool = false,
        /// Translated requests the buffers between the L1 TLB's answer and the cache's
        /// intake hold. MGPUSim v4 R9 Nano (per-port incoming + outgoing buffers of
        /// NumReqPerCycle each, Akita v4 sim.NewPort): TLB top out 32 + translator
        /// translation in 32 + translator bottom out 32 + L1V top in 8 = 104. An answer
        /// takes room from when it is sent (a merged or missed request's when its
        /// translation arrives) until the cache takes it. (Until 2026-11-29: 136 entries up
        /// to the directory's check, counted over the last 136 answers whether sent yet or
        /// not, which held lookups thousands of cycles that MGPUSim makes at once.)
        pub buffer_entries: u32 = 104,
        /// Requests the cache has taken that its directory has not checked yet: MGPUSim v4
        /// write-around L1V, the directory buffer 8, the 2-stage directory pipeline 2 x 8
        /// and its post-pipeline buffer 8 (NumReqPerCycle 8 each). The coalescer takes a
        /// request only with directory-buffer room: MGPUSim's ROB copies requests without
        /// CanWaitForCoalesce (rob.go duplicateReadReq), so each is the last of its wave.
        pub dir_entries: u32 = 32,
        /// Cache transactions in flight, from the intake until the data (or a write's
        /// acknowledgement) is back; 0 = no limit. MGPUSim v4.2.0 R9 Nano:
        /// WithMaxNumConcurrentTrans(128) (timingconfig/shaderarray/builder.go); Akita v4.9.0
        /// writearound coalescer.processReq takes nothing while 128 are in flight.
        pub l1_transactions: u32 = 128,
        /// GPU core cycles from the TLB's answer entering the buffers to the cache's
        /// intake when nothing waits ahead (translator parse, coalescer, directory
        /// pipeline); the directory checks it then unless its set holds it.
        pub transit_cycles: u32 = 5,
    }
}

section! {
    /// Virtual-memory layout shared by all translation modes.
    pub struct TranslationConfig {
        /// "gmmu" (discrete GPU walks its own table) or "iommu" (APU/ATS: the host IOMMU translates).
        pub mode: TranslationMode = TranslationMode::Gmmu,
        /// Radix page-table levels: 4 (48-bit VA) or 5 (57-bit VA).
        pub levels: u32 = 4,
        /// Page size of allocations that do not choose one: 4KiB, 64KiB, 2MiB or 1GiB.
        pub page_size: ByteSize = ByteSize(4 << 10),
        /// Record every N-th page walk of each walker (GMMU, IOMMU) in the `walks` table; 0 = none.
        pub walk_records_every: u64 = 0,
        /// At most this many walk records per walker (the rest are counted, not kept).
        pub walk_records_max: u64 = 100_000,
        /// Managed memory: map a fully GPU-resident 64 KiB region (16 pages) or 2 MiB VA block with one
        /// 64 KiB or 2 MiB PTE, as the UVM driver does (spec/uvm-driver.md, "PTE size": identical
        /// attributes and contiguous backing; a block's 2 MiB chunk is contiguous). TLBs then hold one
        /// entry for the region and walks end at its level; a page leaving GPU memory shoots the larger
        /// entry down. false: every managed page is a 4 KiB PTE (the seeds' simulators). GMMU, one GPU.
        pub managed_large_ptes: bool = false,
    }
}

section! {
    /// A pool of page-table walkers with per-level page-walk caches.
    pub struct WalkerConfig {
        /// Concurrent walks (walker threads).
        pub threads: u32 = 8,
        /// Walks waiting for a thread beyond those in service; a full queue back-pressures the TLB.
        pub queue_depth: u32 = 64,
        /// Latency of one page-table-entry read by a walker, in ns.
        pub level_latency_ns: f64 = 100.0,
        /// Page-table-entry reads also take DRAM bandwidth (queueing behind data traffic), bypassing the data caches.
        pub pte_from_dram: bool = false,
        /// Page-walk-cache entries: for each non-leaf level ("per-level"), or in all ("unified"); 0 = no page-walk cache.
        pub pwc_entries: u32 = 32,
        /// Page-walk-cache associativity (of each level's cache, or of the unified one).
        pub pwc_ways: u32 = 32,
        /// Page-walk-cache organisation: "per-level" (one cache per non-leaf level) or "unified" (one
        /// cache for all levels with one LRU order: the UTC of Barr et al., ISCA 2010; seed multi-gpu
        /// §4.1.1: "We use UTC PW-cache organization").
        pub pwc_organization: PwcOrganization = PwcOrganization::PerLevel,
        /// Page-walk-cache lookup latency in ns.
        pub pwc_latency_ns: f64 = 1.0,
    }
}

section! {
    /// The GPU memory-management unit (translation.mode = "gmmu").
    pub struct GmmuConfig {
        /// Walkers of the GMMU.
        pub walker: WalkerConfig = WalkerConfig::default(),
    }
}

section! {
    /// The host IOMMU serving GPU TLB misses over ATS (translation.mode = "iommu").
    pub struct IommuConfig {
        /// One-way latency of an ATS request or response between the GPU and the IOMMU, in ns.
        pub link_latency_ns: f64 = 150.0,
        /// Time one ATS request or response holds its direction of the link, in ns: messages in one
        /// direction pass one per this time (shared by all GPUs), then take `link_latency_ns`.
        /// 0 = no serialisation. MGPUSim (Akita `noc/networking/pcie`, `switching/endpoint`,
        /// `switching/switches`): a translation message is one flit and each endpoint and switch
        /// port passes one flit per 1 GHz cycle, so 1.
        pub link_msg_ns: f64 = 0.0,
        /// IOMMU TLB entries (0 = none).
        pub tlb_entries: u32 = 256,
        /// IOMMU TLB associativity.
        pub tlb_ways: u32 = 16,
        /// IOMMU TLB lookup latency in ns.
        pub tlb_latency_ns: f64 = 10.0,
        /// Translations returned per ATS response (the demanded page and its aligned neighbours); 1 = no ATS prefetch.
        pub ats_prefetch_pages: u32 = 1,
        /// IOMMU walkers.
        pub walker: WalkerConfig = WalkerConfig { threads: 16, pte_from_dram: true, ..WalkerConfig::default() },
        /// The page-fault path of an APU (PPR queue, interrupt, work-queue), for managed memory in IOMMU mode.
        pub ppr: crate::uvm::ppr::PprConfig = crate::uvm::ppr::PprConfig::default(),
        /// TLB shootdowns through the IOMMU (seed svm-apu §VI, Table 4).
        pub shootdown: crate::xlat::shootdown::ShootdownConfig = crate::xlat::shootdown::ShootdownConfig::default(),
        /// The GPU has no memory of its own: it shares the host's physical memory (an APU: kaveri-apu, mi300a-apu).
        /// A prefetch to the GPU (`workload.prefetch_inputs`) then moves and maps nothing, and the kernel's first
        /// touches still take the page-request path: amdgpu's KFD resolves a prefetch to an APU's GPU to system memory
        /// (linux drivers/gpu/drm/amd/amdkfd/kfd_svm.c, `svm_range_best_prefetch_location`: "if
        /// (bo_node->adev->gmc.is_app_apu) { best_loc = 0; ...}"), where the range already is, and `svm_range_set_attr`
        /// maps nothing for a prefetch alone with XNACK on. ASSUMPTION: the call itself costs no time. Pages the page-request path
        /// maps are then GPU-resident (the one memory). false: the GPU has memory behind the link (gh200-c2c): a
        /// page request maps the host's page remotely (read over the link, until access counters migrate it), and a
        /// prefetch migrates pages to the GPU as the UVM driver does.
        /// Access-counter migration (uvm.access_counters.migrate) needs false: there is no GPU memory to migrate to.
        pub shared_memory: bool = false,
    }
}

section! {
    /// The host-GPU link (PCIe, NVLink, NVLink-C2C) and the GPU's copy engines.
    /// Typical values: PCIe 3.0 x16 12 GB/s achievable per direction (15.75 raw), PCIe 4.0 x16 ~25 (31.5 raw),
    /// PCIe 5.0 x16 ~50 (63 raw), NVLink 2 (V100) 25 per brick per direction, 75 for the three bricks of a 4-GPU AC922 to its POWER9 (68 measured, presets/v100-nvlink2-p9.toml), NVLink-C2C (GH200) 450.
    pub struct LinkConfig {
        /// One-way latency of a transfer in ns (DMA setup and flight).
        pub latency_ns: f64 = 1000.0,
        /// Achievable bandwidth in GB/s per direction (the atan model's asymptote); host to device, and device to host
        /// unless d2h_bandwidth_gbps says otherwise.
        pub bandwidth_gbps: f64 = 12.0,
        /// Device-to-host bandwidth in GB/s where it differs from host to device (measured links are often
        /// asymmetric); 0 = bandwidth_gbps.
        pub d2h_bandwidth_gbps: f64 = 0.0,
        /// Copy engines (DMA engines) of the GPU; each moves one transfer at a time, and they are split between the
        /// directions (even ones host to device, odd ones device to host; one engine serves both). 2 = one a direction,
        /// as NVIDIA's UVM driver uses them (one preferred CE per channel type, CPU_TO_GPU and GPU_TO_CPU on different
        /// CEs: uvm_channel.c pick_ce_for_channel_type).
        pub copy_engines: u32 = 2,
        /// How speed depends on transfer size: "constant" or "atan" (UVMSmart's PCIe fit, spec/uvm-driver.md).
        pub bandwidth_model: BandwidthModel = BandwidthModel::Constant,
        /// The atan model's b, per KiB: speed = bandwidth * (2/pi) * atan(b * size_KiB); 0.07292 in UVMSmart.
        pub atan_b_per_kib: f64 = 0.07292,
        /// Transfers at least this large get their atan speed scaled by atan_large_transfer_factor.
        pub atan_large_transfer_bytes: ByteSize = ByteSize(2 << 20),
        /// Speed factor for large transfers in the atan model (UVMSmart halves them).
        pub atan_large_transfer_factor: f64 = 0.5,
    }
}

section! {
    /// A whole simulated system and the workload that runs on it.
    pub struct Config {
        /// Run control.
        pub sim: SimConfig = SimConfig::default(),
        /// The GPU.
        pub gpu: GpuConfig = GpuConfig::default(),
        /// Virtual-memory layout.
        pub translation: TranslationConfig = TranslationConfig::default(),
        /// GMMU (discrete GPU) translation.
        pub gmmu: GmmuConfig = GmmuConfig::default(),
        /// IOMMU (APU / ATS) translation.
        pub iommu: IommuConfig = IommuConfig::default(),
        /// Host-GPU link.
        pub link: LinkConfig = LinkConfig::default(),
        /// Unified memory: fault buffer and driver.
        pub uvm: UvmConfig = UvmConfig::default(),
        /// Multi-GPU system: GPU count, CTA and page placement, migration, invalidation, host MMU, oracles.
        pub multi: crate::multi::MultiConfig = crate::multi::MultiConfig::default(),
        /// What runs.
        pub workload: WorkloadConfig = WorkloadConfig::default(),
    }
}

impl Config {
    /// Every documented parameter, in declaration order.
    pub fn reference() -> Vec<ParamDoc> {
        let mut out: Vec<ParamDoc> = Self::described().into_iter().filter(|p| !p.section).collect();
        // Where a mode does not read the key (and refuses it), from the one table that says so.
        for p in &mut out {
            if let Some(note) = unread::unread_note(&p.key) {
                p.doc = format!("{} {note}", p.doc);
            }
        }
        out
    }

    /// Every section (`gpu.l1tlb`, ...) with its description, in declaration order.
    pub fn sections() -> Vec<ParamDoc> {
        Self::described().into_iter().filter(|p| p.section).collect()
    }

    fn described() -> Vec<ParamDoc> {
        let mut out = vec![];
        <Config as Describe>::describe("", "", &mut out);
        out
    }

    /// Range and consistency checks; `Err((key, message))`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let g = &self.gpu;
        // Upper bounds keep a typo from allocating the machine's memory away.
        range("gpu.sms", g.sms as f64, 1.0, 4096.0)?;
        range("gpu.core_mhz", g.core_mhz, 1.0, 100_000.0)?;
        one_of("gpu.warp_size", g.warp_size as u64, &[8, 16, 32, 64])?;
        range("gpu.max_warps_per_sm", g.max_warps_per_sm as f64, 1.0, 1024.0)?;
        range("gpu.max_ctas_per_sm", g.max_ctas_per_sm as f64, 1.0, 1024.0)?;
        pos("gpu.issue_cycles", g.issue_cycles as f64)?;
        pow2("gpu.line_bytes", g.line_bytes as u64, 32, 4096)?;
        pos("gpu.sms_per_l1tlb", g.sms_per_l1tlb as f64)?;
        tlb("gpu.l1tlb", &g.l1tlb, false, g.core_mhz)?;
        tlb("gpu.l2tlb", &g.l2tlb, true, g.core_mhz)?;
        cache("gpu.l1d", &g.l1d, g.line_bytes, g.core_mhz)?;
        cache("gpu.l2d", &g.l2d, g.line_bytes, g.core_mhz)?;
        range("gpu.vmem.buffer_entries", g.vmem.buffer_entries as f64, 1.0, 1e6)?;
        range("gpu.vmem.dir_entries", g.vmem.dir_entries as f64, 1.0, 1e6)?;
        range("gpu.vmem.l1_transactions", g.vmem.l1_transactions as f64, 0.0, 1e6)?;
        latency_cycles("gpu.vmem.transit_cycles", g.vmem.transit_cycles, g.core_mhz)?;
        if g.vmem.backpressure && g.l1d.size_bytes.0 == 0 {
            return Err(("gpu.vmem.backpressure".into(), "needs an L1 data cache (gpu.l1d.size_bytes > 0)".into()));
        }
        range("gpu.dram.latency_ns", g.dram.latency_ns, 0.0, 1e6)?;
        range("gpu.dram.bandwidth_gbps", g.dram.bandwidth_gbps, 0.001, 1e6)?;
        range("gpu.dram.channels", g.dram.channels as f64, 1.0, 1024.0)?;
        let il = g.dram.interleave_bytes.0;
        if il > 1 << 40 || il % g.line_bytes as u64 != 0 {
            return Err((
                "gpu.dram.interleave_bytes".into(),
                format!("must be 0 (hash) or a multiple of gpu.line_bytes ({}) up to 1 TiB, got {}", g.line_bytes, g.dram.interleave_bytes),
            ));
        }
        let t = &self.translation;
        one_of("translation.levels", t.levels as u64, &[4, 5])?;
        one_of("translation.page_size", t.page_size.0, &PAGE_SIZES)?;
        range("translation.walk_records_max", t.walk_records_max as f64, 0.0, 1e8)?;
        walker("gmmu.walker", &self.gmmu.walker)?;
        let io = &self.iommu;
        range("iommu.link_latency_ns", io.link_latency_ns, 0.0, 1e6)?;
        range("iommu.link_msg_ns", io.link_msg_ns, 0.0, 1e6)?;
        if io.tlb_entries > 0 {
            range("iommu.tlb_entries", io.tlb_entries as f64, 1.0, MAX_ENTRIES as f64)?;
            geometry("iommu.tlb_entries", io.tlb_entries, "iommu.tlb_ways", io.tlb_ways)?;
        }
        range("iommu.tlb_latency_ns", io.tlb_latency_ns, 0.0, 1e6)?;
        if !(1..=64).contains(&io.ats_prefetch_pages) || !io.ats_prefetch_pages.is_power_of_two() {
            return Err(("iommu.ats_prefetch_pages".into(), format!("must be a power of two from 1 to 64, got {}", io.ats_prefetch_pages)));
        }
        walker("iommu.walker", &io.walker)?;
        io.ppr.validate("iommu.ppr")?;
        io.shootdown.validate("iommu.shootdown")?;
        range("link.latency_ns", self.link.latency_ns, 0.0, 1e9)?;
        range("link.bandwidth_gbps", self.link.bandwidth_gbps, 0.001, 1e6)?;
        if self.link.d2h_bandwidth_gbps != 0.0 {
            range("link.d2h_bandwidth_gbps", self.link.d2h_bandwidth_gbps, 0.001, 1e6)?;
        }
        range("link.copy_engines", self.link.copy_engines as f64, 1.0, 64.0)?;
        range("link.atan_b_per_kib", self.link.atan_b_per_kib, 1e-6, 1e3)?;
        range("link.atan_large_transfer_factor", self.link.atan_large_transfer_factor, 0.01, 100.0)?;
        range("sim.progress_every_s", self.sim.progress_every_s, 0.0, 1e6)?;
        pos("sim.stall_events", self.sim.stall_events as f64)?;
        self.uvm.validate()?;
        self.multi.validate(self)?;
        // After the multi-GPU keys' own ranges, so an out-of-range `multi.gpus` is named first.
        let t = &self.translation;
        if t.managed_large_ptes && (t.mode != TranslationMode::Gmmu || self.multi.active()) {
            return Err((
                "translation.managed_large_ptes".into(),
                format!("models the single-GPU UVM driver's page tables: it needs {}", self.single_gpu_driver_needs()),
            ));
        }
        if self.uvm.oversubscription > 0.0 && (t.mode != TranslationMode::Gmmu || self.multi.active()) {
            // Silently ignored before: the PPR path counted its pages against a capacity nothing enforced.
            return Err((
                "uvm.oversubscription".into(),
                format!(
                    "sizes the GPU memory the single-GPU UVM driver evicts from (in \"iommu\" mode far faults go to \
                     the IOMMU's page-request path, which maps pages in place and evicts nothing; the multi-GPU model \
                     has no GPU memory limit): it needs {}",
                    self.single_gpu_driver_needs()
                ),
            ));
        }
        self.driver_options()?;
        self.capacity()?;
        self.workload.validate(self)
    }

    /// What a run needs for the single-GPU UVM driver (the GMMU mode, one GPU outside the multi-GPU
    /// model), naming only the settings that keep it out: a multi-GPU run with `multi.gpus = 1` is
    /// `multi.model_one_gpu`'s doing, and "one GPU" alone would send its user looking at `multi.gpus`.
    fn single_gpu_driver_needs(&self) -> String {
        let mut needs = vec![];
        if self.translation.mode != TranslationMode::Gmmu {
            needs.push("translation.mode = \"gmmu\"");
        }
        if self.multi.gpus > 1 {
            needs.push("multi.gpus = 1");
        }
        if self.multi.model_one_gpu && self.multi.active() {
            needs.push("multi.model_one_gpu = false");
        }
        needs.join(" and ")
    }

    /// Options of the single-GPU UVM driver's fault path that nothing reads in the other modes: refused
    /// when set there (they changed no metric, so a run looked as if it had applied them).
    fn driver_options(&self) -> Check {
        let u = &self.uvm;
        let hint_key = if u.advise.per_buffer.is_empty() { "uvm.advise.policy" } else { "uvm.advise.per_buffer" };
        if self.multi.active() {
            // The multi-GPU model sends every far fault to `Multi` and never builds the driver's allocations.
            let model = "the multi-GPU model (multi.gpus > 1 or multi.model_one_gpu = true)";
            if u.advise.any(|a| a != Advice::None) {
                return Err((
                    hint_key.into(),
                    format!(
                        "cudaMemAdvise hints go to the single-GPU UVM driver, which {model} does not run: its page \
                         placement is multi.migration (read duplication: multi.migration = \"read-replication\"; remote \
                         mapping, hot pages migrated: \"access-counter\"; pages kept where first touched: \"first-touch\")"
                    ),
                ));
            }
            if u.prefetch.policy != PrefetchPolicy::None {
                return Err((
                    "uvm.prefetch.policy".into(),
                    format!(
                        "the UVM driver's fault prefetcher never runs in {model}: a far fault moves its 4 KiB page \
                         alone; set it to \"none\""
                    ),
                ));
            }
            if u.access_counters.migrate {
                return Err((
                    "uvm.access_counters.migrate".into(),
                    format!(
                        "the single-GPU UVM driver's access-counter migration never runs in {model}: use \
                         multi.migration = \"access-counter\" (with multi.access_threshold)"
                    ),
                ));
            }
            if u.baselines {
                return Err((
                    "uvm.baselines".into(),
                    format!(
                        "compares with copy-then-execute on one GPU's device memory, but {model} places every page \
                         from host memory at its first touch (the copy would be charged and every page still \
                         far-faulted): it needs {}",
                        if self.multi.gpus > 1 { "multi.gpus = 1" } else { "multi.model_one_gpu = false" }
                    ),
                ));
            }
            return Ok(());
        }
        if self.translation.mode == TranslationMode::Iommu {
            let never = "which never happens in translation.mode = \"iommu\": far faults go to the IOMMU's \
                         page-request path ([iommu.ppr]), which maps the pages in place without the driver";
            if u.prefetch.policy != PrefetchPolicy::None {
                return Err((
                    "uvm.prefetch.policy".into(),
                    format!(
                        "the UVM driver's fault prefetcher acts when the driver services a batch of faults, {never}; \
                         iommu.ppr.pages_log2 sets how much one page request maps (or use translation.mode = \"gmmu\")"
                    ),
                ));
            }
            if u.advise.any(|a| a == Advice::ReadMostly) {
                return Err((
                    hint_key.into(),
                    format!(
                        "\"read-mostly\" duplicates pages when the UVM driver services a fault, {never}; read \
                         duplication needs translation.mode = \"gmmu\""
                    ),
                ));
            }
            if self.iommu.shared_memory && u.access_counters.migrate {
                return Err((
                    "uvm.access_counters.migrate".into(),
                    "migrates hot host-resident pages into GPU memory, and with iommu.shared_memory = true (an APU) the \
                     GPU has none of its own: every page is already in the one memory it shares with the host"
                        .into(),
                ));
            }
            if u.advise.any(|a| a == Advice::PreferredLocationHost) && !u.access_counters.migrate {
                return Err((
                    hint_key.into(),
                    format!(
                        "\"preferred-location-host\" maps pages remotely when the UVM driver services a fault, {never}; \
                         there it only keeps remotely mapped pages from access-counter migration, which is off \
                         (uvm.access_counters.migrate = false). For host-resident pages read over the link use \
                         \"accessed-by\" (or translation.mode = \"gmmu\")"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The TLBs and caches the model allocates, summed over their copies (one per µTLB or SM, one set per GPU):
    /// each kind within [`MAX_ENTRIES`] entries (or lines). The bound of a single TLB or cache alone lets 80 SMs
    /// of 2^24-entry L1 TLBs take tens of GB before the run starts.
    fn capacity(&self) -> Check {
        let g = &self.gpu;
        let gpus = self.multi.gpus.max(1) as u64;
        let lines = |c: &CacheConfig| c.size_bytes.0 / g.line_bytes as u64;
        let l1s = g.sms.div_ceil(g.sms_per_l1tlb.max(1)) as u64;
        let pwcs = if self.gmmu.walker.pwc_organization == PwcOrganization::Unified { 1 } else { self.translation.levels as u64 - 1 };
        for (key, each, copies, what) in [
            ("gpu.l1tlb.entries", g.l1tlb.entries as u64, l1s * gpus, "L1 TLBs (gpu.sms / gpu.sms_per_l1tlb per GPU) of"),
            ("gpu.l1d.size_bytes", lines(&g.l1d), g.sms as u64 * gpus, "L1 data caches (one per SM and GPU) of"),
            ("gpu.l2tlb.entries", g.l2tlb.entries as u64, gpus, "L2 TLBs (one per GPU) of"),
            ("gpu.l2d.size_bytes", lines(&g.l2d), gpus, "L2 data caches (one per GPU) of"),
            ("gmmu.walker.pwc_entries", self.gmmu.walker.pwc_entries as u64, pwcs * gpus, "page-walk caches (per level and GPU) of"),
        ] {
            let unit = if key.ends_with("size_bytes") { "lines" } else { "entries" };
            let all = each.saturating_mul(copies);
            if all > MAX_ENTRIES as u64 {
                return Err((
                    key.into(),
                    format!("{copies} {what} {each} {unit} hold {all} {unit} in all; the model allocates at most {MAX_ENTRIES}"),
                ));
            }
        }
        Ok(())
    }
}

/// Page sizes a translation structure understands.
pub const PAGE_SIZES: [u64; 4] = [4 << 10, 64 << 10, 2 << 20, 1 << 30];

type Check = Result<(), (String, String)>;

fn range(key: &str, v: f64, lo: f64, hi: f64) -> Check {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err((key.into(), format!("must be between {lo} and {hi}, got {v}")))
    }
}

fn pos(key: &str, v: f64) -> Check {
    if v > 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("must be greater than 0, got {v}")))
    }
}

fn one_of(key: &str, v: u64, ok: &[u64]) -> Check {
    if ok.contains(&v) {
        Ok(())
    } else {
        let list: Vec<String> =
            ok.iter().map(|&x| if x >= 4096 && x.is_power_of_two() { ByteSize(x).to_string() } else { x.to_string() }).collect();
        Err((key.into(), format!("must be one of {}, got {v}", list.join(", "))))
    }
}

fn pow2(key: &str, v: u64, lo: u64, hi: u64) -> Check {
    if v.is_power_of_two() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err((key.into(), format!("must be a power of two from {lo} to {hi}, got {v}")))
    }
}

fn geometry(ekey: &str, entries: u32, wkey: &str, ways: u32) -> Check {
    if ways == 0 || ways > entries {
        return Err((wkey.into(), format!("must be between 1 and the entry count ({ekey} = {entries}), got {ways}")));
    }
    if entries % ways != 0 {
        return Err((ekey.into(), format!("must be a multiple of the associativity ({wkey} = {ways}), got {entries}")));
    }
    Ok(())
}

/// Largest TLB, page-walk cache or data cache (in entries or lines) the model accepts.
const MAX_ENTRIES: u32 = 1 << 24;

/// A latency in GPU core cycles: at most 1 ms at the core clock, as the latencies given in ns (gpu.dram.latency_ns,
/// the walkers' level_latency_ns, ...). An access's arrival at a DRAM channel is reserved that far ahead of the
/// current time, and the channel's bandwidth timeline holds every bucket up to it: 2^32 cycles made it grow by
/// gigabytes (a run that did not end), and so did 10^6 cycles at gpu.core_mhz = 1.
fn latency_cycles(key: &str, v: u32, core_mhz: f64) -> Check {
    let max = (core_mhz * 1000.0).floor();
    if v as f64 <= max {
        Ok(())
    } else {
        Err((key.into(), format!("must be at most 1 ms: {max} cycles at gpu.core_mhz = {core_mhz}, got {v}")))
    }
}

fn tlb(p: &str, t: &TlbConfig, optional: bool, core_mhz: f64) -> Check {
    if !optional && t.fill_return_cycles != 0 {
        return Err((format!("{p}.fill_return_cycles"), "applies to the L2 TLB only: must be 0 here".into()));
    }
    latency_cycles(&format!("{p}.latency_cycles"), t.latency_cycles, core_mhz)?;
    latency_cycles(&format!("{p}.fill_return_cycles"), t.fill_return_cycles, core_mhz)?;
    if t.lookup_stage_cycles > t.latency_cycles {
        return Err((
            format!("{p}.lookup_stage_cycles"),
            format!("must be at most latency_cycles ({}), got {}", t.latency_cycles, t.lookup_stage_cycles),
        ));
    }
    range(&format!("{p}.fills_per_cycle"), t.fills_per_cycle as f64, 0.0, 1e6)?;
    if t.entries == 0 {
        return if optional { Ok(()) } else { Err((format!("{p}.entries"), "must be greater than 0".into())) };
    }
    range(&format!("{p}.entries"), t.entries as f64, 1.0, MAX_ENTRIES as f64)?;
    geometry(&format!("{p}.entries"), t.entries, &format!("{p}.ways"), t.ways)?;
    pos(&format!("{p}.mshrs"), t.mshrs as f64)
}

fn cache(p: &str, c: &CacheConfig, line: u32, core_mhz: f64) -> Check {
    if c.size_bytes.0 == 0 {
        return Ok(());
    }
    latency_cycles(&format!("{p}.latency_cycles"), c.latency_cycles, core_mhz)?;
    let lines = c.size_bytes.0 / line as u64;
    if lines > MAX_ENTRIES as u64 {
        return Err((format!("{p}.size_bytes"), format!("must be at most {} lines of {line} bytes, got {}", MAX_ENTRIES, c.size_bytes)));
    }
    if c.size_bytes.0 % line as u64 != 0 || lines == 0 {
        return Err((format!("{p}.size_bytes"), format!("must be a whole number of {line}-byte lines, got {}", c.size_bytes)));
    }
    geometry(&format!("{p}.size_bytes"), lines as u32, &format!("{p}.ways"), c.ways)
}

/// Range checks of a walker section at key prefix `p`.
pub fn check_walker(p: &str, w: &WalkerConfig) -> Check {
    walker(p, w)
}

fn walker(p: &str, w: &WalkerConfig) -> Check {
    range(&format!("{p}.threads"), w.threads as f64, 1.0, 4096.0)?;
    range(&format!("{p}.level_latency_ns"), w.level_latency_ns, 0.0, 1e6)?;
    range(&format!("{p}.pwc_latency_ns"), w.pwc_latency_ns, 0.0, 1e6)?;
    if w.pwc_entries > 0 {
        range(&format!("{p}.pwc_entries"), w.pwc_entries as f64, 1.0, MAX_ENTRIES as f64)?;
        geometry(&format!("{p}.pwc_entries"), w.pwc_entries, &format!("{p}.pwc_ways"), w.pwc_ways)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn defaults_are_valid_and_documented() {
        Config::default().validate().unwrap();
        let refs = Config::reference();
        assert!(refs.iter().any(|p| p.key == "gpu.l1tlb.entries" && p.doc.starts_with("Number of entries")));
        assert!(refs.iter().all(|p| !p.doc.is_empty()), "undocumented: {:?}", refs.iter().filter(|p| p.doc.is_empty()).collect::<Vec<_>>());
        let secs = Config::sections();
        assert!(secs.iter().any(|s| s.key == "gpu.l1tlb" && s.doc.contains("L1 TLB")), "{secs:?}");
        assert!(secs.iter().all(|s| !s.doc.is_empty()));
    }

    #[test]
    fn dram_interleave_must_be_whole_lines() {
        let mut c = Config::default();
        c.gpu.line_bytes = 64;
        for ok in [0, 64, 128, 4096] {
            c.gpu.dram.interleave_bytes = ByteSize(ok);
            c.validate().unwrap();
        }
        for bad in [32, 100, 1 << 41] {
            c.gpu.dram.interleave_bytes = ByteSize(bad);
            let (key, msg) = c.validate().unwrap_err();
            assert_eq!(key, "gpu.dram.interleave_bytes", "{msg}");
        }
        // The bound is inclusive: 1 TiB (a multiple of 64) is taken, one line more is not.
        c.gpu.dram.interleave_bytes = ByteSize(1 << 40);
        c.validate().unwrap();
        c.gpu.dram.interleave_bytes = ByteSize((1 << 40) + 64);
        assert_eq!(c.validate().unwrap_err().0, "gpu.dram.interleave_bytes");
    }

    /// The default config with `f` applied: its refusal (key, message), or `None` if it is valid.
    fn checked(f: impl FnOnce(&mut Config)) -> Option<(String, String)> {
        let mut c = Config::default();
        f(&mut c);
        c.validate().err()
    }

    fn key_of(f: impl FnOnce(&mut Config)) -> String {
        checked(f).expect("must be refused").0
    }

    #[test]
    fn ranges_accept_their_bounds_and_refuse_one_past() {
        type Edit = fn(&mut Config);
        // Each edge the error message states is taken (16 KiB of L1 holds 4 lines of 4 KiB: still 4 ways).
        let taken: [(&str, Edit); 12] = [
            ("line 32", |c| c.gpu.line_bytes = 32),
            ("line 4096", |c| c.gpu.line_bytes = 4096),
            ("warp 8", |c| c.gpu.warp_size = 8),
            ("ctas 1024", |c| c.gpu.max_ctas_per_sm = 1024),
            ("walker threads 4096", |c| c.gmmu.walker.threads = 4096),
            ("copy engines 1", |c| c.link.copy_engines = 1),
            ("walk records 1e8", |c| c.translation.walk_records_max = 100_000_000),
            ("levels 5", |c| c.translation.levels = 5),
            ("ats 64", |c| c.iommu.ats_prefetch_pages = 64),
            ("no L1 transaction limit", |c| c.gpu.vmem.l1_transactions = 0),
            ("no L2 TLB", |c| c.gpu.l2tlb.entries = 0),
            ("lookup stage = latency", |c| c.gpu.l2tlb.lookup_stage_cycles = 10),
        ];
        for (what, f) in taken {
            assert_eq!(checked(f), None, "{what}");
        }
        let refused: [(&str, Edit); 16] = [
            ("gpu.line_bytes", |c| c.gpu.line_bytes = 16),
            ("gpu.line_bytes", |c| c.gpu.line_bytes = 8192),
            ("gpu.max_ctas_per_sm", |c| c.gpu.max_ctas_per_sm = 1025),
            ("gmmu.walker.threads", |c| c.gmmu.walker.threads = 4097),
            ("link.copy_engines", |c| c.link.copy_engines = 0),
            ("translation.walk_records_max", |c| c.translation.walk_records_max = 100_000_001),
            ("iommu.ats_prefetch_pages", |c| c.iommu.ats_prefetch_pages = 128),
            ("iommu.ats_prefetch_pages", |c| c.iommu.ats_prefetch_pages = 3),
            ("gpu.l2tlb.lookup_stage_cycles", |c| c.gpu.l2tlb.lookup_stage_cycles = 11),
            // Zero where a count must be positive (the L2 TLB alone may be removed).
            ("gpu.issue_cycles", |c| c.gpu.issue_cycles = 0),
            ("sim.stall_events", |c| c.sim.stall_events = 0),
            ("gpu.l1tlb.entries", |c| c.gpu.l1tlb.entries = 0),
            ("gpu.l1tlb.mshrs", |c| c.gpu.l1tlb.mshrs = 0),
            ("gpu.l2tlb.mshrs", |c| c.gpu.l2tlb.mshrs = 0),
            ("gpu.vmem.dir_entries", |c| c.gpu.vmem.dir_entries = 0),
            // An asymmetric link's own key is named, not the host-to-device one.
            ("link.d2h_bandwidth_gbps", |c| c.link.d2h_bandwidth_gbps = 0.0001),
        ];
        for (key, f) in refused {
            assert_eq!(key_of(f), key);
        }
        assert_eq!(checked(|c| c.gpu.issue_cycles = 0).unwrap().1, "must be greater than 0, got 0");
        assert_eq!(checked(|c| c.gpu.l1tlb.entries = 0).unwrap().1, "must be greater than 0");
    }

    #[test]
    fn page_sizes_are_listed_in_binary_units_from_4kib() {
        let (key, msg) = checked(|c| c.translation.page_size = ByteSize(8 << 10)).unwrap();
        assert_eq!((key.as_str(), msg.as_str()), ("translation.page_size", "must be one of 4KiB, 64KiB, 2MiB, 1GiB, got 8192"));
    }

    #[test]
    fn entries_not_a_multiple_of_the_ways_blame_the_entries() {
        let (key, msg) = checked(|c| c.gpu.l1tlb.entries = 48).unwrap();
        assert_eq!(
            (key.as_str(), msg.as_str()),
            ("gpu.l1tlb.entries", "must be a multiple of the associativity (gpu.l1tlb.ways = 32), got 48")
        );
        let (key, msg) = checked(|c| c.gpu.l1tlb.ways = 64).unwrap();
        assert_eq!(
            (key.as_str(), msg.as_str()),
            ("gpu.l1tlb.ways", "must be between 1 and the entry count (gpu.l1tlb.entries = 32), got 64")
        );
    }

    #[test]
    fn a_cache_of_a_part_line_is_refused_even_at_one_way() {
        // 700 B is 5 lines of 128 B and 60 B over; at one way the associativity check would take it.
        let (key, msg) = checked(|c| (c.gpu.l1d.size_bytes, c.gpu.l1d.ways) = (ByteSize(700), 1)).unwrap();
        assert_eq!(key, "gpu.l1d.size_bytes");
        assert!(msg.starts_with("must be a whole number of 128-byte lines"), "{msg}");
        assert_eq!(checked(|c| (c.gpu.l1d.size_bytes, c.gpu.l1d.ways) = (ByteSize(640), 1)), None);
    }

    #[test]
    fn the_one_ms_latency_bound_is_whole_cycles_at_a_fractional_clock() {
        // 1 ms at 1.0005 MHz is 1000.5 cycles: the bound is its floor, 1000.
        let (key, msg) = checked(|c| (c.gpu.core_mhz, c.gpu.l1d.latency_cycles) = (1.0005, 1001)).unwrap();
        assert_eq!(key, "gpu.l1d.latency_cycles");
        assert_eq!(msg, "must be at most 1 ms: 1000 cycles at gpu.core_mhz = 1.0005, got 1001");
    }

    #[test]
    fn large_ptes_and_oversubscription_need_one_gpu_in_gmmu_mode() {
        assert_eq!(key_of(|c| (c.multi.gpus, c.translation.managed_large_ptes) = (2, true)), "translation.managed_large_ptes");
        assert_eq!(key_of(|c| (c.translation.mode, c.uvm.oversubscription) = (TranslationMode::Iommu, 2.0)), "uvm.oversubscription");
        assert_eq!(checked(|c| c.uvm.oversubscription = 2.0), None);
        // The message names only what keeps the driver out: a one-GPU run in the multi-GPU model was told to set
        // multi.gpus = 1, which it had (stress seed 7501, a100-pcie4 with multi.model_one_gpu = true).
        let msg = |f: fn(&mut Config)| checked(f).unwrap().1;
        let m = msg(|c| (c.multi.model_one_gpu, c.translation.managed_large_ptes) = (true, true));
        assert!(m.ends_with("it needs multi.model_one_gpu = false"), "{m}");
        let m = msg(|c| (c.multi.gpus, c.translation.managed_large_ptes) = (2, true));
        assert!(m.ends_with("it needs multi.gpus = 1"), "{m}");
        let m = msg(|c| {
            (c.translation.mode, c.multi.gpus, c.multi.model_one_gpu, c.uvm.oversubscription) = (TranslationMode::Iommu, 4, true, 2.0)
        });
        assert!(m.ends_with("it needs translation.mode = \"gmmu\" and multi.gpus = 1 and multi.model_one_gpu = false"), "{m}");
    }

    #[test]
    fn baselines_in_the_multi_gpu_model_say_which_key_to_change() {
        let (key, msg) = checked(|c| (c.multi.model_one_gpu, c.uvm.baselines) = (true, true)).unwrap();
        assert_eq!(key, "uvm.baselines");
        assert!(msg.ends_with("it needs multi.model_one_gpu = false"), "{msg}");
        let (_, msg) = checked(|c| (c.multi.gpus, c.uvm.baselines) = (2, true)).unwrap();
        assert!(msg.ends_with("it needs multi.gpus = 1"), "{msg}");
    }

    #[test]
    fn capacity_counts_a_part_utlb_group_and_each_non_leaf_level() {
        // 3 SMs, 2 to a µTLB: 2 µTLBs (the second serves one SM) of 2^24 entries = 2^25 > 2^24.
        let (key, msg) = checked(|c| {
            (c.gpu.sms, c.gpu.sms_per_l1tlb, c.gpu.l1tlb.entries, c.gpu.l1tlb.ways) = (3, 2, 1 << 24, 16);
        })
        .unwrap();
        assert_eq!(key, "gpu.l1tlb.entries");
        assert!(msg.starts_with("2 L1 TLBs (gpu.sms / gpu.sms_per_l1tlb per GPU) of 16777216 entries hold 33554432 entries"), "{msg}");
        // Per-level page-walk caches: levels - 1 of them. 5 levels: 4 x 2^22 = 2^24, just taken.
        assert_eq!(checked(|c| (c.translation.levels, c.gmmu.walker.pwc_entries, c.gmmu.walker.pwc_ways) = (5, 1 << 22, 16)), None);
        // 4 levels: 3 x 5592406 = 16777218, two over.
        let (key, msg) = checked(|c| (c.gmmu.walker.pwc_entries, c.gmmu.walker.pwc_ways) = (5_592_406, 2)).unwrap();
        assert_eq!(key, "gmmu.walker.pwc_entries");
        assert!(msg.starts_with("3 page-walk caches (per level and GPU) of 5592406 entries hold 16777218 entries"), "{msg}");
    }
}
