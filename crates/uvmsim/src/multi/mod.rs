//! Multi-GPU systems (seed multi-gpu, Li 2024): N copies of the GPU sharing
//! one virtual address space, pages placed in their memories by a migration
//! policy, far faults served by the host MMU (GMMU mode) or the shared IOMMU
//! (ATS mode), and invalidations broadcast to every GPU before a page moves.
//!
//! How it works. Each GPU is an ordinary [`Gpu`]: its residency bitmap is its
//! local page table (a set bit is a valid PTE, local or remote), so a GMMU
//! walk that finds no valid PTE raises a far fault through the existing
//! replayable-fault path. The world hands those faults to [`Multi::fault`],
//! which computes the host's answer in issue order, like every other
//! component: message to the host, the UVM driver's fetch of the fault's batch
//! ([`batch`]), host-MMU TLB and walk (shared by all GPUs,
//! so GPUs contend there), then the policy's action (map remotely, migrate,
//! replicate), with the invalidation broadcast a migration needs: each GPU
//! shoots down its TLBs and invalidates the PTE with a walk on its own GMMU
//! walkers, competing with demand walks, and the data moves only when every
//! acknowledgement is back. The world then schedules `Ev::PageReady` at the
//! time the answer reaches the GPU, which sets the PTE and replays its warps.
//!
//! The data side asks [`Multi::locate`] for every translated page: local (a
//! copy in this GPU's memory), remote (over the peer fabric to the owner,
//! bypassing this GPU's caches), or a write to a read-replicated page (a
//! protection fault). Access counters count remote line requests and ask for
//! a migration at the threshold ([`Multi::requests`]).
//!
//! Phase-2 hook points (Least-TLB, Trans-FW, IDYLL): the L2-TLB fill in
//! `Translator::translate` (an eviction callback to the IOMMU TLB as victim),
//! the L2-miss path before `Translator::miss` (a pre-walk filter), the host
//! walk in [`Multi::host_translate`] (forwarding to an owner GPU), and the
//! per-GPU loop of [`Multi::invalidate`] (directory filtering and lazy PTE
//! invalidation).

pub mod apps;
pub mod batch;
pub mod dir;
pub mod topo;
pub mod transfw;

pub use dir::{access_bit, access_bits, Directory, Page, Stale, ACCESS_BITS, HOST};
pub use topo::{cta_share, CtaPlacement, Fabric, PeerTopology};

use crate::config::{Config, TranslationMode, WalkerConfig};
use crate::gpu::Gpu;
use crate::link::{Dir, Link};
use crate::mem::Dram;
use crate::sim::{ns_to_ps, Ps, PS_PER_NS};
use crate::stats::{Latency, Metrics};
use crate::uvm::{Cause, MigrationRecord};
use crate::xlat::{Iommu, Lookup, Tlb, Walker};
use serde::{Deserialize, Serialize};

/// Where pages go when GPUs touch them (seed multi-gpu §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum MigrationPolicy {
    /// Every far fault migrates the page to the faulting GPU.
    #[default]
    OnTouch,
    /// A page stays on the GPU that touched it first; others map it remotely.
    FirstTouch,
    /// Remote mapping, and migration to a GPU after `access_threshold` of its remote accesses.
    AccessCounter,
    /// Reads replicate the page; a write invalidates every other copy (ESI).
    ReadReplication,
}

/// Where a single application's pages are before its first kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum InitialPlacement {
    /// In host memory, unmapped on every GPU: each GPU's first touch of a page far-faults.
    #[default]
    Host,
    /// Each buffer split over the GPUs as MGPUSim's `Driver.Distribute` splits it before the
    /// benchmark's copies: GPU i holds pages [i*q, (i+1)*q) of the buffer, q = pages / GPUs
    /// rounded down, and the last GPU also the remainder (all on GPU 0 when the buffer has
    /// fewer pages than GPUs); each page resident and mapped on its GPU.
    Distributed,
}

leaf!(MigrationPolicy, InitialPlacement);

section! {
    /// Multi-GPU system (seed multi-gpu, Li 2024): GPUs sharing one address space, page placement and migration, invalidations.
    pub struct MultiConfig {
        /// GPUs, each a copy of [gpu]; 1 = the single-GPU system (of the rest of [multi] it reads only model_one_gpu and the oracles infinite_pwc, infinite_walkers and, in IOMMU mode, infinite_iommu_tlb; the other keys are refused when set). Seed multi-gpu: 4 (8, 16, 32 in its sensitivity studies); at most 32.
        pub gpus: u32 = 1,
        /// With gpus = 1, still run the multi-GPU model (every buffer unified memory placed from host memory, far faults to the host MMU or IOMMU) instead of the single-GPU UVM path: the 1-GPU point of a scaling study.
        pub model_one_gpu: bool = false,
        /// How a kernel's CTAs are spread over the GPUs: "greedy" (contiguous blocks, an equal share per GPU, as MGPUSim's multi-GPU driver and the seed's §4.1.1 greedy scheduling) or "round-robin" (CTA i on GPU i mod gpus).
        pub cta_placement: CtaPlacement = CtaPlacement::Greedy,
        /// Page placement: "on-touch", "first-touch", "access-counter" (remote mapping, migrate at the threshold) or "read-replication" (ESI); seed multi-gpu §2.3, §4.3.3. A page first touched while in host memory always migrates to the toucher.
        pub migration: MigrationPolicy = MigrationPolicy::OnTouch,
        /// access-counter: remote accesses (line requests) by one GPU to a page that migrate it to that GPU; seed multi-gpu §2.3: 256, §5.3.2: 512.
        pub access_threshold: u32 = 256,
        /// GPU-to-GPU fabric: "switch" (one port per GPU and direction into a PCIe switch), "tree" (PCIe switches of gpus_per_switch GPUs under the root complex, MGPUSim v4.2.0's platform: between GPUs of different switches, traffic also crosses both switches' upstream ports, each at peer_bandwidth_gbps, and two more switches, switch_hop_latency_ns each; host data into a GPU crosses its switch's upstream port too) or "direct" (a link per ordered pair, NVLink/xGMI).
        pub peer_topology: PeerTopology = PeerTopology::Switch,
        /// peer_topology = "tree": GPUs per PCIe switch (GPU g on switch g / gpus_per_switch). MGPUSim v4.2.0 (amd/samples/runner/timingconfig/builder.go, createGPUs): a new switch under the root complex for every second GPU, so 2.
        pub gpus_per_switch: u32 = 2,
        /// peer_topology = "tree": one-way latency of one more switch on the way, in ns; a message between GPUs of different switches pays peer_latency_ns plus two of these (the root complex and the far switch). MGPUSim v4.2.0's PCIe switch latency (timingconfig builder, switchLatency: 140 cycles, "default PCIe Gen4") at its 1 GHz network clock.
        pub switch_hop_latency_ns: f64 = 140.0,
        /// One-way latency between two GPUs in ns (a remote read pays it twice); seed multi-gpu §4.3.2: "we use 150 cycles in the main evaluation" (remote latency), at 1 GHz.
        pub peer_latency_ns: f64 = 150.0,
        /// Bandwidth per direction of a GPU's switch port (or of a direct link) in GB/s. ASSUMPTION: the seed gives none; PCIe 4.0 x16 (~32 GB/s raw).
        pub peer_bandwidth_gbps: f64 = 32.0,
        /// A GPU stops issuing instructions while it handles an invalidation request, from the request's arrival to its acknowledgement: its PTE-invalidation walk in GMMU mode (the TLB shootdown itself takes no time in the model, so with IDYLL's lazy invalidation, which acknowledges on arrival, there is nothing to stall for), as MGPUSim's command processor does for a shootdown: it flushes every CU pipeline, then the address translators, caches and TLBs, before it answers (sarchlab/mgpusim, command processor `processShootdownCommand`). The seed does not say whether its GPUs stall (§2.3 names only the shootdown and the PTE walk). false = the GPU's other warps keep issuing.
        pub shootdown_stalls_gpu: bool = false,
        /// Remote reads go through the requesting CU's L1 cache (hits and merges there never leave the GPU; a miss crosses the fabric and fills the L1, never the local L2), as in MGPUSim, whose RDMA engine sits between the L1 caches and the L2 (seed multi-gpu §3.1.1.1 and §4.1.1 extend MGPUSim). Remote writes are write-through. false = every remote line request crosses the fabric (the model before 2026-11-23).
        pub remote_reads_cached: bool = true,
        /// GPUs reach host memory through one port (the root complex's to the host, or a single switch's upstream port): page moves from the host share its bandwidth (link.bandwidth_gbps) as well as each GPU's own link; false = every GPU has its own root port (under peer_topology = "tree", host data still crosses its switch's upstream port, with host_dma_uses_peer_port).
        pub host_uplink_shared: bool = true,
        /// peer_topology = "switch" or "tree": a page moving from host memory into a GPU also crosses that GPU's switch port (and, in a tree, its switch's upstream port), the one PCIe link its peer traffic (remote line requests, peer migrations) uses, so host DMA and peer traffic into a GPU share multi.peer_bandwidth_gbps (the host DMA is also held to its own link.bandwidth_gbps and, with host_uplink_shared, the switch's upstream port). false = the GPU's host link and its switch port are separate resources (the model before 2026-12-02). Not read with "direct" peer links (NVLink/xGMI links are not the GPU's PCIe link).
        pub host_dma_uses_peer_port: bool = true,
        /// One-way latency of a message between a GPU and the host (far fault, reply, invalidation, acknowledgement) in ns; seed multi-gpu Table 5: PCIe 150 cycles.
        pub host_latency_ns: f64 = 150.0,
        /// Far faults the UVM driver fetches per batch from each GPU's fault buffer (GMMU mode; seed multi-gpu §2.2: the driver "groups faults into batches ... (the batch size is 256)"; the real driver's uvm_perf_fault_batch_count is 256) or, in ATS mode, from the IOMMU's one queue of every GPU's page requests (§2.2: "The IOMMU records PRI requests from different GPUs in a queue ... uses batching"). The driver services one batch of a queue at a time: a batch fetched at time F holds the faults that reached the host by F (at most this many), the host translates them from F, and the queue's next batch is fetched when the last fault of this one is done (its page moved or mapped) or when its first fault arrives, whichever is later. Each fault is still answered when its own page is ready (no per-batch replay). 0 = no batches: each fault is serviced as soon as it reaches the host (the model before 2026-12-01).
        pub fault_batch_size: u32 = 256,
        /// access-counter: notifications the UVM driver fetches per batch from each GPU's access-counter buffer (spec/uvm-driver.md, uvm_gpu_access_counters.c: notifications in batches of 256, uvm_perf_access_counter_batch_count; the seed takes its threshold, 256, and its fault batches from the same driver, its ref. [50]). A GPU's counter that reaches multi.access_threshold sends a notification to the host (multi.host_latency_ns); a batch fetched at time F holds that GPU's notifications that reached the host by F (at most this many), the driver migrates their pages from F, and the GPU's next batch is fetched when this one's last migration is done or when its first notification arrives, whichever is later. 0 = no batches: each migration starts as soon as its notification reaches the host (the model before 2026-12-02).
        pub counter_batch_size: u32 = 256,
        /// The host MMU that serves every GPU's far faults in GMMU mode (seed multi-gpu Table 5).
        pub host_mmu: HostMmuConfig = HostMmuConfig::default(),
        /// Oracles for limit studies (seed multi-gpu Fig. 25, 47, 54); the TLB, page-walk-cache and walker oracles apply to single-GPU runs too.
        pub oracle: OracleConfig = OracleConfig::default(),
        /// Least-TLB (seed multi-gpu §3.2.1, Algorithm 1): the shared IOMMU TLB as a victim cache of the GPUs' L2 TLBs, with a local TLB tracker (ATS mode only).
        pub least_tlb: LeastTlbConfig = LeastTlbConfig::default(),
        /// Multi-application mode (seed multi-gpu §3.1.1.2, Table 4): application i (a workload kind, e.g. ["fir", "matrix-transpose"]) runs on GPU i (from multi.apps_first_gpu) in its own address space, with the [workload] parameters of its kind; other GPUs idle. An application that finishes re-runs until every application has finished once; app<gpu>.* metrics are those of its first run. Empty = one application spread over every GPU. At most multi.gpus entries.
        pub apps: Vec<crate::workload::WorkloadKind> = vec![],
        /// Multi-application mode: the GPU of the first application (application i runs on GPU apps_first_gpu + i, in that GPU's address space). An application alone at its GPU of a mix (the weighted-speedup reference) sets it to that GPU.
        pub apps_first_gpu: u32 = 0,
        /// Where one application's pages start (with multi.apps it must stay "host": multi.apps_resident places an application's pages): "host" (in host memory, each GPU's first touch far-faults: seed multi-gpu §2.3, "A page is migrated from the CPU to the GPU on the GPU's first access") or "distributed" (each buffer split into equal contiguous page ranges over the GPUs, GPU i the i-th, the remainder on the last; resident and mapped there), as MGPUSim's Driver.Distribute splits a buffer before the inputs are copied (sarchlab/mgpusim driver/distributor.go; its FIR, AES, KMeans, MM, MT and SimpleConvolution distribute their large buffers so, in the default mode without unified memory). The Trans-FW pending request table records a GPU's placed pages; the forwarding table learns owners from migrations only (seed multi-gpu §4.2.3: "The FT is updated when a page is migrated").
        pub initial_placement: InitialPlacement = InitialPlacement::Host,
        /// Multi-application mode: each application's pages start in its GPU's memory, mapped (as MGPUSim places a benchmark's data in GPU memory before its kernels; seed multi-gpu Ch. 3 measures translation, not first touches), so its first run has no far faults. false = every page starts in host memory.
        pub apps_resident: bool = false,
        /// IDYLL (seed multi-gpu §5.2): in-PTE directory of the GPUs that accessed a page, and lazy PTE invalidation through a per-GPU merging buffer (GMMU mode).
        pub idyll: IdyllConfig = IdyllConfig::default(),
        /// Trans-FW (seed multi-gpu §4.2): the GMMUs' pending request tables (skip a local walk that cannot succeed) and the host's forwarding of walks to the owner GPU (GMMU mode).
        pub transfw: transfw::TransFwConfig = transfw::TransFwConfig::default(),
    }
}

section! {
    /// IDYLL (seed multi-gpu §5.2, Fig. 52-54). Off by default: the baseline broadcasts every invalidation and walks to invalidate each PTE at once.
    pub struct IdyllConfig {
        /// In-PTE directory (§5.2.2): the host PTE keeps one access bit per GPU in its unused bits 52-62 (bit 52 + gpu mod 11, so GPUs 11 apart share a bit); a GPU's far fault sets its bit, and an invalidation goes only to the GPUs whose bit is set (a shared bit still sends to every GPU behind it). Needs translation.mode = "gmmu".
        pub directory: bool = false,
        /// Lazy PTE invalidation (§5.2.3): a GPU receiving an invalidation shoots down its TLBs, acknowledges at once and parks the PTE invalidation in its IRMB; the IRMB writes an entry back with one walk when the GMMU walkers are idle (or when it evicts one); an L2-TLB miss that hits a pending IRMB entry raises the far fault without a walk. Needs translation.mode = "gmmu".
        pub lazy: bool = false,
        /// IRMB merged entries (bases = VPN >> 9) per GPU; seed multi-gpu §5.2.3: 32.
        pub irmb_bases: u32 = 32,
        /// Offsets (leaf PTE indices) per IRMB entry; seed multi-gpu §5.2.3: 16.
        pub irmb_offsets: u32 = 16,
    }
}

section! {
    /// Least-TLB, single-application part (seed multi-gpu §3.2.1, Algorithm 1, Fig. 10). Off by default: the baseline is mostly-inclusive (§3.1.1.1).
    pub struct LeastTlbConfig {
        /// Least-inclusive IOMMU TLB: a walk's translation fills the L2 (and L1) TLB but not the IOMMU TLB; an entry evicted from a GPU's L2 TLB goes into the IOMMU TLB; an IOMMU-TLB hit moves the entry to the requesting GPU's L2 TLB and removes it from the IOMMU TLB (Algorithm 1 lines 7-11). Needs translation.mode = "iommu", an IOMMU TLB, an L2 TLB with allocate = "on-miss", and iommu.ats_prefetch_pages = 1.
        pub enabled: bool = false,
        /// Local TLB tracker in the IOMMU: a cuckoo filter partitioned by GPU recording which L2 TLBs hold a translation (insert on L2 fill, delete on L2 eviction); an IOMMU-TLB miss it says another GPU holds sends a remote L2 lookup that races the page walk (§3.2.1). Only with enabled = true.
        pub tracker: bool = true,
        /// Tracker fingerprints in all, split equally over the GPUs; seed multi-gpu §3.2.3: 2048.
        pub tracker_entries: u32 = 2048,
        /// Fingerprints per tracker bucket. ASSUMPTION: the seed gives none; Fan et al.'s 4.
        pub tracker_bucket_size: u32 = 4,
        /// Bits per fingerprint. ASSUMPTION: the seed gives only the target false-positive rate 0.2 (§3.2.3); 6 is the smallest width whose full-load bound 2b/(2^f - 1) = 0.127 meets it (xlat/cuckoo.rs).
        pub tracker_fingerprint_bits: u32 = 6,
        /// One-way latency of a remote lookup message between the IOMMU and another GPU, in ns (a remote lookup pays it twice plus that GPU's L2 TLB latency). Seed multi-gpu §3.3.3, Fig. 19: the PCIe latency (~300 ns) is marked on the remote-access-latency axis, the whole remote lookup the seed compares with a walk (remote access pays off below ~3.5x-5x the 106.7 ns DRAM latency, and does at PCIe), so 150 ns each way; Table 5 (Ch. 4): CPU-GPU PCIe 150 cycles.
        pub remote_latency_ns: f64 = 150.0,
        /// Multi-application IOMMU-TLB spilling (§3.2.2, Algorithm 2): an IOMMU-TLB victim with spill chances left goes into the L2 TLB of the GPU with the fewest IOMMU-TLB entries (per-GPU eviction counters), other than its own, and is tracked there; a spilled entry evicted with no chances left is dropped; a remote hit moves it back to its GPU and restores its chances. Needs multi.apps and the tracker.
        pub spill: bool = false,
        /// Spill chances N of a translation (§3.2.2: N = 1, a spill bit; Fig. 18: N = 2).
        pub spill_chances: u32 = 1,
    }
}

section! {
    /// Host MMU: a TLB and walkers shared by all GPUs.
    pub struct HostMmuConfig {
        /// TLB entries (0 = none); seed multi-gpu Table 5: 2048.
        pub tlb_entries: u32 = 2048,
        /// TLB associativity; Table 5: 64-way.
        pub tlb_ways: u32 = 64,
        /// TLB lookup latency in ns. ASSUMPTION: Table 5 gives none; the IOMMU TLB default.
        pub tlb_latency_ns: f64 = 10.0,
        /// Walkers; Table 5: 16 threads, 64-entry PW-queue, 100 cycles per level, a 128-entry PW-cache (32 per level for the 4 cached levels of a 5-level table).
        pub walker: WalkerConfig = WalkerConfig { threads: 16, queue_depth: 64, level_latency_ns: 100.0, pte_from_dram: false, pwc_entries: 32, pwc_ways: 32, pwc_latency_ns: 1.0, pwc_organization: crate::config::PwcOrganization::PerLevel },
    }
}

section! {
    /// Limit-study oracles, each removing one cost (seed multi-gpu §4.1.2 Fig. 25, §5.1 Fig. 47).
    pub struct OracleConfig {
        /// The IOMMU TLB (iommu mode) and the host-MMU TLB hold every translation: 2^20 entries (4 GiB of 4 KiB pages), so only cold misses.
        pub infinite_iommu_tlb: bool = false,
        /// Every page-walk cache (GMMU, host MMU, IOMMU) has 2^16 entries (per level, or in all for a unified one), so only cold misses.
        pub infinite_pwc: bool = false,
        /// Walks never wait for a walker thread or queue slot (GMMU, host MMU, IOMMU; nor for the IOMMU's and host MMU's
        /// TLB miss slots, which are their pool's threads plus queue).
        pub infinite_walkers: bool = false,
        /// Invalidations cost nothing: no PTE walk, no message latency; a migration does not wait for them.
        pub zero_latency_invalidation: bool = false,
        /// Page data moves instantly (the translation side of a migration still costs).
        pub no_migration_latency: bool = false,
    }
}

impl MultiConfig {
    /// Does the multi-GPU model run (more than one GPU, or asked for with one)?
    pub fn active(&self) -> bool {
        self.gpus > 1 || self.model_one_gpu
    }

    pub fn validate(&self, cfg: &Config) -> Result<(), (String, String)> {
        let r = |k: &str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && v >= lo && v <= hi {
                Ok(())
            } else {
                Err((format!("multi.{k}"), format!("must be between {lo} and {hi}, got {v}")))
            }
        };
        r("gpus", self.gpus as f64, 1.0, MAX_GPUS as f64)?;
        r("access_threshold", self.access_threshold as f64, 1.0, 1e9)?;
        r("peer_latency_ns", self.peer_latency_ns, 0.0, 1e6)?;
        r("peer_bandwidth_gbps", self.peer_bandwidth_gbps, 0.001, 1e6)?;
        r("gpus_per_switch", self.gpus_per_switch as f64, 1.0, MAX_GPUS as f64)?;
        r("switch_hop_latency_ns", self.switch_hop_latency_ns, 0.0, 1e6)?;
        r("host_latency_ns", self.host_latency_ns, 0.0, 1e6)?;
        r("fault_batch_size", self.fault_batch_size as f64, 0.0, 1e6)?;
        r("counter_batch_size", self.counter_batch_size as f64, 0.0, 1e6)?;
        let h = &self.host_mmu;
        r("host_mmu.tlb_latency_ns", h.tlb_latency_ns, 0.0, 1e6)?;
        if h.tlb_entries > 0 && (h.tlb_ways == 0 || h.tlb_ways > h.tlb_entries || h.tlb_entries % h.tlb_ways != 0) {
            return Err((
                "multi.host_mmu.tlb_ways".into(),
                format!("must divide multi.host_mmu.tlb_entries ({}), got {}", h.tlb_entries, h.tlb_ways),
            ));
        }
        crate::config::check_walker("multi.host_mmu.walker", &h.walker)?;
        let l = &self.least_tlb;
        r("least_tlb.tracker_entries", l.tracker_entries as f64, self.gpus as f64, 1e8)?;
        r("least_tlb.tracker_bucket_size", l.tracker_bucket_size as f64, 1.0, 8.0)?;
        r("least_tlb.tracker_fingerprint_bits", l.tracker_fingerprint_bits as f64, 1.0, 16.0)?;
        r("least_tlb.remote_latency_ns", l.remote_latency_ns, 0.0, 1e6)?;
        apps::validate(self, cfg)?;
        if l.enabled {
            let need = |k: &str, why: &str| Err((k.to_string(), format!("must be {why} with multi.least_tlb.enabled = true")));
            if cfg.translation.mode != TranslationMode::Iommu {
                return need("translation.mode", "\"iommu\"");
            }
            if cfg.iommu.tlb_entries == 0 {
                return need("iommu.tlb_entries", "> 0");
            }
            if cfg.gpu.l2tlb.entries == 0 || cfg.gpu.l2tlb.allocate != crate::config::TlbAllocate::OnMiss {
                return need("gpu.l2tlb", "an L2 TLB (entries > 0) with allocate = \"on-miss\"");
            }
            if cfg.iommu.ats_prefetch_pages != 1 {
                return need("iommu.ats_prefetch_pages", "1");
            }
        }
        let i = &self.idyll;
        r("idyll.irmb_bases", i.irmb_bases as f64, 1.0, 4096.0)?;
        r("idyll.irmb_offsets", i.irmb_offsets as f64, 1.0, 512.0)?;
        if (i.directory || i.lazy) && cfg.translation.mode != TranslationMode::Gmmu {
            let k = if i.directory { "directory" } else { "lazy" };
            return Err(("translation.mode".into(), format!("must be \"gmmu\" with multi.idyll.{k} = true")));
        }
        transfw::validate(&self.transfw, cfg)?;
        if self.active() && cfg.translation.page_size.0 != 4096 {
            return Err((
                "translation.page_size".into(),
                format!(
                    "must be 4KiB in the multi-GPU model (multi.gpus > 1 or multi.model_one_gpu = true: pages are placed and migrated at 4 KiB), got {}",
                    cfg.translation.page_size
                ),
            ));
        }
        Ok(())
    }
}

/// Most GPUs in a system: GPU sets are 32-bit masks, and events carry the GPU in 5 bits.
pub const MAX_GPUS: u32 = 32;

/// The config with the oracles' structure changes applied (capacities; walker
/// limits are applied to the built walkers by [`unlimit_walkers`]).
pub fn effective(cfg: &Config) -> Config {
    let mut c = cfg.clone();
    let o = &cfg.multi.oracle;
    if o.infinite_iommu_tlb {
        (c.iommu.tlb_entries, c.iommu.tlb_ways) = (1 << 20, 64);
        (c.multi.host_mmu.tlb_entries, c.multi.host_mmu.tlb_ways) = (1 << 20, 64);
    }
    if o.infinite_pwc {
        for w in [&mut c.gmmu.walker, &mut c.iommu.walker, &mut c.multi.host_mmu.walker] {
            (w.pwc_entries, w.pwc_ways) = (1 << 16, 64);
        }
    }
    c
}

/// The infinite-walkers oracle on one GPU's walkers.
pub fn unlimit_walkers(cfg: &Config, gpu: &mut Gpu) {
    if cfg.multi.oracle.infinite_walkers {
        gpu.xlat.gmmu.set_unlimited();
        if let Some(io) = gpu.xlat.iommu.as_mut() {
            io.walker.set_unlimited();
        }
    }
}

/// Where a GPU finds a page it has a translation for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locate {
    /// In its own memory, available from this time.
    Local(Ps),
    /// In this GPU's memory, available from this time.
    Remote(usize, Ps),
    /// A write to a page other GPUs hold read replicas of: a protection fault.
    WriteFault,
}

#[derive(Debug, Clone, Default)]
pub struct MultiStats {
    /// Far faults the host serviced, per GPU.
    pub faults: Vec<u64>,
    /// Far faults on a page whose fault from the same GPU was being serviced.
    pub duplicate_faults: u64,
    /// Line requests served from another GPU's memory, per GPU.
    pub remote_lines: Vec<u64>,
    /// Remote-page reads the requester's L1 served (hits and merges; `remote_reads_cached`).
    pub remote_l1_served: u64,
    pub migrations_h2d: u64,
    pub migrations_p2p: u64,
    /// Of the peer migrations, those an access counter asked for.
    pub counter_migrations: u64,
    /// Access-counter notifications the driver serviced (a counter reached the threshold), with those
    /// whose page was already at the notifying GPU when the driver took them up.
    pub counter_notifications: u64,
    pub replications: u64,
    pub remote_maps: u64,
    /// Writes to read-replicated pages (protection faults that invalidated the other copies).
    pub write_invalidations: u64,
    pub bytes_h2d: u64,
    pub bytes_p2p: u64,
    pub inv_sent: u64,
    pub inv_necessary: u64,
    pub inv_unnecessary: u64,
    /// Send to acknowledgement, per invalidation request.
    pub inv_latency: Latency,
    /// Time GPUs spent stalled by shootdowns (`shootdown_stalls_gpu`), summed over GPUs.
    pub stall_ps: u128,
    /// Send of the first invalidation to the last acknowledgement, per migration.
    pub migration_wait: Latency,
    /// Latency-breakdown sums (ps) over faults: host walker queue, host PW-cache misses, migration, host link.
    pub host_queue_ps: u128,
    pub host_pwc_ps: u128,
    pub migration_ps: u128,
    pub link_ps: u128,
    /// Invalidation walks' share of the GMMU walkers' queue waits and extra entry reads (subtracted from the demand breakdown).
    pub inv_walks: u64,
    pub inv_queue_ps: u128,
    pub inv_reads: u64,
    /// Invalidation walks by entries read (index 1..=levels): the demand walks' distribution is the walkers' less these.
    pub inv_reads_hist: [u64; 8],
    /// IDYLL: invalidation requests the in-PTE directory did not send (the GPU's access bit was clear).
    pub idyll_filtered: u64,
}

/// The shared side of a multi-GPU system.
pub struct Multi {
    n: usize,
    policy: MigrationPolicy,
    threshold: u32,
    gmmu_mode: bool,
    zero_inval: bool,
    no_migration: bool,
    /// IDYLL's in-PTE directory and lazy invalidation (`multi.idyll`).
    directory: bool,
    lazy: bool,
    /// The UVM driver's fault batches, a queue per GPU (GMMU) or one (ATS) (`multi.fault_batch_size`; None = no batches).
    batches: Option<batch::FaultBatches>,
    /// The UVM driver's access-counter notification batches, a queue per GPU (`multi.counter_batch_size`; None = none).
    counter_batches: Option<batch::FaultBatches>,
    /// Trans-FW's forwarding table (`multi.transfw.forwarding`).
    forwarding: Option<Box<transfw::Forwarding>>,
    host_lat: Ps,
    peer_lat: Ps,
    remote_dram: Ps,
    line_bytes: u64,
    /// `multi.remote_reads_cached`.
    pub remote_reads_cached: bool,
    /// `multi.shootdown_stalls_gpu`: per GPU, the windows (from, until) in which it issues
    /// nothing, sorted and disjoint.
    stalls: Option<Vec<Vec<(Ps, Ps)>>>,
    pub dir: Directory,
    fabric: Fabric,
    /// Each GPU's PCIe link to the host, for page migrations from host memory.
    host_links: Vec<Link>,
    /// The switch's upstream port to the host, when shared.
    uplink: Option<Link>,
    /// `multi.host_dma_uses_peer_port`: host data into a GPU also takes its switch port.
    host_dma_port: bool,
    pub host_tlb: Option<Tlb>,
    pub host_walker: Walker,
    host_dram: Dram,
    /// The IOMMU every GPU shares (iommu mode); lent to a GPU while it runs.
    pub iommu: Option<Box<Iommu>>,
    /// Migrations access counters asked for while a GPU ran: (page, GPU, time). The world services them.
    pub requests: Vec<(u64, usize, Ps)>,
    /// The migrations table's rows, one per page move (`uvm.records`; docs/metrics.md "Record tables").
    pub migrations: Option<Vec<MigrationRecord>>,
    /// At most this many rows (`uvm.migration_records_max`); the moves beyond are counted.
    migration_records_max: u64,
    pub migration_records_dropped: u64,
    /// Invalidation requests on their way to GPUs: (arrival, `vpn << 5 | gpu`). The world schedules them.
    pub arrivals: Vec<(Ps, u64)>,
    pub stats: MultiStats,
}

const PAGE: u64 = 4096;

/// Add the window [`from`, `until`) to `w` (sorted, disjoint), merging what it overlaps or
/// touches; returns the time it adds to their union.
fn add_window(w: &mut Vec<(Ps, Ps)>, from: Ps, until: Ps) -> Ps {
    if until <= from {
        return 0;
    }
    // The first window that ends at or after `from` and the first that starts after `until`:
    // those between merge with it (only they are read, so a GPU that never drains its
    // windows does not make each insertion slower).
    let i = w.partition_point(|&(_, b)| b < from);
    let j = w.partition_point(|&(a, _)| a <= until);
    let merged: Ps = w[i..j].iter().map(|&(a, b)| b - a).sum();
    let (mut a, mut b) = (from, until);
    if i < j {
        a = a.min(w[i].0);
        b = b.max(w[j - 1].1);
    }
    w.splice(i..j, [(a, b)]);
    (b - a) - merged
}

impl Multi {
    pub fn new(cfg: &Config, iommu: Option<Box<Iommu>>) -> Multi {
        let m = &cfg.multi;
        let n = m.gpus as usize;
        let h = &m.host_mmu;
        let mut host_walker = Walker::new(&h.walker, cfg.translation.levels);
        if m.oracle.infinite_walkers {
            host_walker.set_unlimited();
        }
        let mut iommu = iommu;
        if let (Some(io), true) = (iommu.as_mut(), m.oracle.infinite_walkers) {
            io.walker.set_unlimited();
        }
        Multi {
            n,
            policy: m.migration,
            threshold: m.access_threshold,
            gmmu_mode: cfg.translation.mode == TranslationMode::Gmmu,
            zero_inval: m.oracle.zero_latency_invalidation,
            no_migration: m.oracle.no_migration_latency,
            directory: m.idyll.directory,
            lazy: m.idyll.lazy,
            // GMMU mode: each GPU's fault buffer (§2.1); ATS mode: the IOMMU's one PRI queue for every GPU (§2.2).
            batches: (m.fault_batch_size > 0).then(|| {
                let gmmu = cfg.translation.mode == TranslationMode::Gmmu;
                batch::FaultBatches::new(m.fault_batch_size, if gmmu { n } else { 1 })
            }),
            // Each GPU has its own access-counter notification buffer, in either translation mode.
            counter_batches: (m.counter_batch_size > 0).then(|| batch::FaultBatches::new(m.counter_batch_size, n)),
            forwarding: transfw::Forwarding::build(cfg),
            host_lat: ns_to_ps(m.host_latency_ns),
            peer_lat: ns_to_ps(m.peer_latency_ns),
            remote_dram: ns_to_ps(cfg.gpu.dram.latency_ns),
            line_bytes: cfg.gpu.line_bytes as u64,
            remote_reads_cached: m.remote_reads_cached,
            stalls: m.shootdown_stalls_gpu.then(|| vec![vec![]; n]),
            dir: Directory::default(),
            fabric: Fabric::new(
                n,
                m.peer_topology,
                m.peer_bandwidth_gbps,
                cfg.gpu.line_bytes as u64,
                m.gpus_per_switch as usize,
                ns_to_ps(m.switch_hop_latency_ns),
            ),
            host_links: (0..n).map(|_| Link::new(&cfg.link)).collect(),
            uplink: m.host_uplink_shared.then(|| Link::new(&cfg.link)),
            host_dma_port: m.host_dma_uses_peer_port,
            host_tlb: (h.tlb_entries > 0).then(|| {
                Tlb::with(h.tlb_entries as usize, h.tlb_ways as usize, ns_to_ps(h.tlb_latency_ns), crate::xlat::walk_slots(cfg, &h.walker))
            }),
            host_walker,
            host_dram: Dram::new(&cfg.gpu.dram, cfg.gpu.line_bytes),
            iommu,
            requests: vec![],
            migrations: cfg.uvm.records.then(Vec::new),
            migration_records_max: cfg.uvm.migration_records_max,
            migration_records_dropped: 0,
            arrivals: vec![],
            stats: MultiStats { faults: vec![0; n], remote_lines: vec![0; n], ..MultiStats::default() },
        }
    }

    pub fn gpus(&self) -> usize {
        self.n
    }

    /// GPU `g` translated page `vpn` for an access (translation done at `ready`): where the data
    /// is and from when (a page in flight is available when its migration ends).
    ///
    /// A page that moved away (or lost its other copies) while `g` held a mapping: until the
    /// invalidation request reaches `g` and is handled (TLB shootdown and PTE invalidation,
    /// `Ev::Invalidate`, which closes the [`Stale`] window), `g`'s TLBs and PTE still name the
    /// old frame, which keeps the data until the copy (it starts after every acknowledgement):
    /// the access is served there at once, in its own memory or remotely at the old owner, not
    /// at the new owner after the copy. Every translation the model computes before the request
    /// is handled found that mapping (a TLB hit or a walk on the still-valid PTE), whatever the
    /// lookup time of its instruction (a warp's step computes its issues a few ns ahead of the
    /// event time): serving it at the new owner would be a remote access through a mapping no GPU
    /// was given (under on-touch, which never maps remotely). A stale write lands in the old frame
    /// before the copy, which carries it; a write through a read replica's read-only mapping
    /// still faults.
    #[inline]
    pub fn locate(&mut self, g: usize, vpn: u64, write: bool, ready: Ps) -> Locate {
        let bit = 1u32 << g;
        let p = self.dir.page(vpn);
        p.touched |= bit;
        if p.stale & bit != 0 {
            if let Some(w) = self.dir.stale(vpn, g) {
                if w.at as usize != g {
                    return Locate::Remote(w.at as usize, ready);
                }
                if write && w.read_only {
                    return Locate::WriteFault;
                }
                return Locate::Local(ready);
            }
        }
        let p = self.dir.page(vpn);
        let ready = ready.max(p.ready);
        if p.copies & bit != 0 || p.owner == HOST {
            if write && p.copies & !bit != 0 {
                return Locate::WriteFault;
            }
            Locate::Local(ready)
        } else {
            // On-touch maps a page only where it lives: a GPU the driver counts as mapping it
            // (its request not handled yet) uses its stale window above, never the new owner.
            debug_assert!(
                self.policy != MigrationPolicy::OnTouch || p.mapped & bit == 0,
                "on-touch: GPU {g} maps page {vpn:#x} but it lives at GPU {} (a remote access)",
                p.owner
            );
            Locate::Remote(p.owner as usize, ready)
        }
    }

    /// One line request of GPU `g` served by GPU `owner`'s memory, issued at `t`;
    /// returns when it is done. Counts the access for access-counter migration.
    #[inline]
    pub fn remote_line(&mut self, g: usize, owner: usize, vpn: u64, write: bool, t: Ps, now: Ps) -> Ps {
        self.stats.remote_lines[g] += 1;
        if self.policy == MigrationPolicy::AccessCounter && self.dir.count_remote(vpn, g, self.threshold) {
            self.requests.push((vpn, g, t));
        }
        // Remote memory: its DRAM latency, not its caches or bandwidth (ASSUMPTION, as the seed's 150-cycle remote access).
        let lat = self.peer_lat + self.fabric.extra_latency(g, owner);
        if write {
            self.fabric.transfer(g, owner, self.line_bytes, t, now) + lat + self.remote_dram
        } else {
            let at = t + lat + self.remote_dram;
            self.fabric.transfer(owner, g, self.line_bytes, at, now) + lat
        }
    }

    /// The host translates `vpn` for a fault arriving at `t`: host-MMU TLB, then a
    /// walk by the shared host walkers (GMMU mode); in ATS mode the IOMMU walk that
    /// failed has already been paid. Hook point: Trans-FW forwards this walk.
    pub fn host_translate(&mut self, vpn: u64, t: Ps, now: Ps) -> Ps {
        if !self.gmmu_mode {
            return t;
        }
        let at = match self.host_tlb.as_mut().map(|tlb| tlb.lookup(vpn, t, now)) {
            Some(Lookup::Done(d, _)) => return d,
            Some(Lookup::Miss(at)) => at,
            None => t,
        };
        self.host_walk(vpn, t, at, now)
    }

    /// The host walkers translate `vpn` (a host-TLB miss at `at` of a request that arrived at `t`).
    fn host_walk(&mut self, vpn: u64, t: Ps, at: Ps, now: Ps) -> Ps {
        let done = self.host_walker.walk(vpn << 12, 1, at, now, &mut self.host_dram);
        self.stats.host_queue_ps += self.host_walker.last_wait as u128;
        self.stats.host_pwc_ps += (self.host_walker.last_reads.saturating_sub(1) as u64 * self.host_walker.level_latency()) as u128;
        if let Some(tlb) = self.host_tlb.as_mut() {
            tlb.fill_miss(vpn, 0, t, done);
        }
        done
    }

    /// Invalidate page `vpn` on every GPU but `skip`: the driver sends at `t`; each
    /// GPU shoots down its TLBs and, in GMMU mode, invalidates its PTE with a walk on
    /// its own walkers (competing with demand walks). Returns when the last
    /// acknowledgement is back at the host. Hook point: IDYLL filters the GPUs
    /// (in-PTE directory) and defers the PTE walk (lazy invalidation) here.
    pub fn invalidate(&mut self, vpn: u64, skip: Option<usize>, t: Ps, now: Ps, gpus: &mut [Gpu]) -> Ps {
        let mut acks = t;
        let mut sent = 0u32;
        let p = *self.dir.page(vpn);
        for (x, gpu) in gpus.iter_mut().enumerate() {
            if Some(x) == skip {
                continue;
            }
            // IDYLL's directory: only GPUs whose access bit is set (or that share it) hold a mapping.
            if self.directory && p.access & access_bit(x) == 0 {
                self.stats.idyll_filtered += 1;
                continue;
            }
            self.stats.inv_sent += 1;
            sent |= 1 << x;
            if self.zero_inval {
                // 1 ps after the send: a send at the previous answer's arrival (`Page::busy`) then
                // lands after the warps that answer woke (same-time events run in push order), so
                // the GPU uses the page once; at the same ps, on-touch pages ping-pong forever.
                self.arrivals.push((t + 1, vpn << 5 | x as u64));
                continue;
            }
            let at = t + self.host_lat;
            // The shootdown takes effect when the request arrives (`Ev::Invalidate`):
            // an answer the GPU got before then is used first.
            self.arrivals.push((at, vpn << 5 | x as u64));
            let done = if self.gmmu_mode && !self.lazy {
                let w = &mut gpu.xlat.gmmu;
                let d = w.walk(vpn << 12, 1, at, now, &mut gpu.mem.dram);
                self.stats.inv_walks += 1;
                self.stats.inv_queue_ps += w.last_wait as u128;
                self.stats.inv_reads += w.last_reads.saturating_sub(1) as u64;
                self.stats.inv_reads_hist[w.last_reads as usize] += 1;
                d
            } else {
                at // ATS (no GPU page table), or IDYLL's lazy invalidation: the IRMB takes it and acknowledges
            };
            if let Some(st) = self.stalls.as_mut() {
                // Windows already over go first (an idle GPU never looks them up).
                let w = &mut st[x];
                w.drain(..w.partition_point(|&(_, until)| until <= now));
                self.stats.stall_ps += add_window(w, at, done) as u128;
            }
            let ack = done + self.host_lat;
            self.stats.inv_latency.record(ack - t);
            acks = acks.max(ack);
        }
        // Every mapping is being invalidated: the access bits clear, except those of the GPU
        // that keeps its copy and of GPUs whose answer is still on its way (it stands).
        let keep = skip.map_or(0, |g| 1u32 << g) | p.pending;
        let q = self.dir.page(vpn);
        q.access = access_bits(keep);
        // A GPU that had a mapping uses it until its request arrives (see `locate`); every
        // request of a broadcast arrives at the same time. Not a GPU whose mapping an earlier
        // request still on its way ends (its `mapped` bit stands until that one arrives).
        if p.owner != HOST {
            let until = t + if self.zero_inval { 1 } else { self.host_lat };
            let read_only = p.copies.count_ones() > 1;
            for x in (0..self.n).filter(|&x| (p.mapped & sent & !p.stale) >> x & 1 == 1) {
                let at = if p.copies >> x & 1 == 1 { x as u8 } else { p.owner };
                self.dir.open_stale(vpn, x, Stale { until, at, read_only });
            }
        }
        // The host's own cached translation of the page changes too.
        if let Some(tlb) = self.host_tlb.as_mut() {
            tlb.invalidate(vpn);
        }
        if let Some(io) = self.iommu.as_mut() {
            io.invalidate_page(vpn);
        }
        self.stats.migration_wait.record(acks - t);
        acks
    }

    /// With `shootdown_stalls_gpu`: the time until which GPU `g`, at `now`, issues nothing
    /// (it is handling a shootdown), if it is stalled.
    #[inline]
    pub fn stalled_until(&mut self, g: usize, now: Ps) -> Option<Ps> {
        let w = &mut self.stalls.as_mut()?[g];
        w.drain(..w.partition_point(|&(_, until)| until <= now));
        w.first().and_then(|&(from, until)| (from <= now).then_some(until))
    }

    /// An invalidation request for `vpn` reaches GPU `x`: its TLBs drop the
    /// translation and its PTE becomes invalid. Necessary if it had either.
    pub fn invalidation_arrives(&mut self, x: usize, vpn: u64, t: Ps, gpu: &mut Gpu) {
        self.dir.close_stale(vpn, x, t);
        let had_tlb = gpu.xlat.invalidate_page(vpn);
        // IDYLL lazy invalidation: the PTE invalidation waits in the IRMB (the page counts as
        // not resident from now on: a walk would find the IRMB entry first); entries it evicts
        // are written to the page table now, one walk each.
        if let Some(b) = gpu.xlat.irmb.as_mut() {
            let mut evicted = vec![];
            b.insert(vpn, &mut evicted);
            self.pte_walks(&evicted, t, t, gpu);
            self.idle_drain(t, gpu);
        }
        // Least-TLB: the L2 TLB no longer holds it (a 4 KiB page's key is its number).
        if let Some(lt) = self.iommu.as_mut().and_then(|io| io.least.as_mut()) {
            lt.l2_dropped(x, vpn);
        }
        let residency = &mut gpu.xlat.space.residency;
        let had_pte = residency.make_nonresident(vpn);
        if let (true, Some(prt)) = (had_pte, gpu.xlat.prt.as_mut()) {
            prt.unmapped(vpn);
        }
        if had_pte && self.dir.page(vpn).pending >> x & 1 == 0 {
            // A warp waiting for this page (answered, not yet replayed) re-executes and faults
            // again; with an answer still on its way, the page comes back and wakes it.
            gpu.requeue_waiters(vpn);
        }
        let p = self.dir.page(vpn);
        let mapped = p.mapped >> x & 1 == 1;
        // An answer still on its way to the GPU was issued after this request was sent
        // (the driver handles one page in order): the new mapping stands.
        if p.pending >> x & 1 == 0 {
            p.mapped &= !(1 << x);
        }
        if had_tlb || had_pte || mapped {
            self.stats.inv_necessary += 1;
        } else {
            self.stats.inv_unnecessary += 1;
        }
    }

    /// Invalidate the PTEs of `vpns` in GPU `gpu`'s page table, one walk each from `t`
    /// (on its walkers, competing with demand walks; nearby VPNs share the PW-cache).
    fn pte_walks(&mut self, vpns: &[u64], t: Ps, now: Ps, gpu: &mut Gpu) {
        for &v in vpns {
            let w = &mut gpu.xlat.gmmu;
            w.walk(v << 12, 1, t, now, &mut gpu.mem.dram);
            self.stats.inv_walks += 1;
            self.stats.inv_queue_ps += w.last_wait as u128;
            self.stats.inv_reads += w.last_reads.saturating_sub(1) as u64;
            self.stats.inv_reads_hist[w.last_reads as usize] += 1;
        }
    }

    /// IDYLL: when GPU `gpu`'s walkers are idle at `t`, its IRMB writes back its LRU entry.
    pub fn idle_drain(&mut self, t: Ps, gpu: &mut Gpu) {
        let Some(b) = gpu.xlat.irmb.as_mut() else { return };
        if b.is_empty() || !gpu.xlat.gmmu.idle_at(t) {
            return;
        }
        let mut out = vec![];
        b.drain_one(&mut out);
        self.pte_walks(&out, t, t, gpu);
    }

    /// Move page `vpn`'s data from `src` (a GPU, or [`HOST`]) to GPU `dst`, starting at `t`; returns when it is
    /// there. With `uvm.records`, a row of the migrations table (from `t` to that time, in ns).
    fn move_data(&mut self, vpn: u64, src: u8, dst: usize, t: Ps, now: Ps, cause: Cause) -> Ps {
        let (done, bytes) = if self.no_migration {
            (t, 0) // the oracle: nothing crosses a link
        } else if src == HOST {
            self.stats.bytes_h2d += PAGE;
            let own = self.host_links[dst].transfer(Dir::HostToDevice, PAGE, t, now.min(t)).1;
            let up = self.uplink.as_mut().map_or(own, |u| u.transfer(Dir::HostToDevice, PAGE, t, now.min(t)).1);
            // The GPU's one PCIe link: its switch port, shared with its peer traffic.
            let port = if self.host_dma_port { self.fabric.host_into(dst, PAGE, t, now) } else { None };
            (own.max(up).max(port.unwrap_or(0)), PAGE)
        } else {
            self.stats.bytes_p2p += PAGE;
            let lat = self.peer_lat + self.fabric.extra_latency(src as usize, dst);
            (self.fabric.transfer(src as usize, dst, PAGE, t, now) + lat, PAGE)
        };
        let full = self.migrations.as_ref().is_some_and(|r| r.len() as u64 >= self.migration_records_max);
        self.migration_records_dropped += full as u64;
        if let Some(rows) = self.migrations.as_mut().filter(|_| !full) {
            let host = src == HOST;
            rows.push(MigrationRecord {
                start_ns: t as f64 / PS_PER_NS as f64,
                end_ns: done as f64 / PS_PER_NS as f64,
                first_page: vpn,
                pages: 1,
                bytes,
                direction: if host { "h2d" } else { "p2p" },
                cause,
                copy_engine: 0,
                gpu: dst as u32,
                src_gpu: if host { -1 } else { src as i32 },
            });
        }
        done
    }

    /// A far fault of GPU `g` on page `vpn` (a store if `write`) raised at `t`:
    /// the host translates, applies the policy, and answers. Returns when the
    /// answer is back at the GPU (its PTE is then valid), or None for a fault
    /// on a page whose earlier fault from `g` is still being serviced.
    pub fn fault(&mut self, g: usize, vpn: u64, write: bool, t: Ps, now: Ps, gpus: &mut [Gpu]) -> Option<Ps> {
        let bit = 1u32 << g;
        let p = *self.dir.page(vpn);
        if p.pending & bit != 0 {
            self.stats.duplicate_faults += 1;
            return None;
        }
        self.stats.faults[g] += 1;
        let arrive = t + self.host_lat;
        // The driver takes the fault up when it fetches its batch.
        let queue = if self.gmmu_mode { g } else { 0 };
        let fetch = self.batches.as_mut().map_or(arrive, |b| b.fetch(queue, arrive));
        let walked = self.host_translate_fw(g, vpn, fetch, now, gpus);
        let start = walked.max(p.ready);
        // Invalidations wait for the page's previous operation (see `Page::busy`).
        let send = self.send_time(fetch, walked, p.busy);
        let mut moved = false;
        let done = if p.owner == HOST {
            // First touch anywhere: the page comes from host memory, nobody else maps it.
            moved = true;
            self.stats.migrations_h2d += 1;
            self.move_data(vpn, HOST, g, start, now, Cause::Demand)
        } else if p.copies & bit != 0 {
            if write && p.copies != bit {
                // A store to a read-replicated page: every other copy goes first.
                self.stats.write_invalidations += 1;
                moved = true;
                let acks = self.invalidate(vpn, Some(g), send, now, gpus);
                start.max(acks)
            } else {
                start // its own copy: the PTE comes back
            }
        } else {
            match (self.policy, write) {
                (MigrationPolicy::FirstTouch | MigrationPolicy::AccessCounter, _) => {
                    self.stats.remote_maps += 1;
                    start
                }
                (MigrationPolicy::ReadReplication, false) => {
                    self.stats.replications += 1;
                    self.move_data(vpn, p.owner, g, start, now, Cause::Replication)
                }
                (MigrationPolicy::OnTouch | MigrationPolicy::ReadReplication, _) => {
                    moved = true;
                    self.stats.migrations_p2p += 1;
                    let acks = self.invalidate(vpn, None, send, now, gpus);
                    self.move_data(vpn, p.owner, g, start.max(acks), now, Cause::Demand)
                }
            }
        };
        if let Some(b) = self.batches.as_mut() {
            b.done(queue, done);
        }
        let ready = done + self.host_lat;
        self.stats.link_ps += 2 * self.host_lat as u128;
        // From the walk's end: the wait for a page still on its way (`p.ready`) is part of it.
        self.stats.migration_ps += (done - walked) as u128;
        let replicated = self.policy == MigrationPolicy::ReadReplication && !write && p.owner != HOST && p.copies & bit == 0;
        let q = self.dir.page(vpn);
        if moved {
            q.owner = g as u8;
            q.copies = bit;
            q.ready = done;
            q.busy = ready;
        } else if replicated {
            q.copies |= bit;
        }
        q.mapped |= bit;
        q.pending |= bit;
        // The host walk found the PTE: this GPU's access bit is set (IDYLL, §5.2.2).
        q.access |= access_bit(g);
        if moved {
            self.dir.reset_counters(vpn, self.n);
            self.owner_changed(vpn, p.owner, g);
        }
        // Its new mapping replaces any old one.
        self.dir.close_stale(vpn, g, Ps::MAX);
        Some(ready)
    }

    /// When the driver sends a page's invalidations: after the page's previous operation; with
    /// IDYLL's directory also after the host walk, which reads the access bits (§5.2.2).
    fn send_time(&self, arrive: Ps, walked: Ps, busy: Ps) -> Ps {
        let t = arrive.max(busy);
        if self.directory {
            t.max(walked)
        } else {
            t
        }
    }

    /// An access counter of GPU `g` reached the threshold on `vpn` at `t`: once the driver has
    /// fetched the notification (`multi.counter_batch_size`), it migrates the page there
    /// (broadcast invalidation, wait, copy). Every GPU, `g`
    /// included, then faults to re-map the page.
    pub fn migrate(&mut self, vpn: u64, g: usize, t: Ps, now: Ps, gpus: &mut [Gpu]) {
        let p = *self.dir.page(vpn);
        self.stats.counter_notifications += 1;
        let arrive = t + self.host_lat;
        // The driver takes the notification up when it fetches its batch from g's buffer.
        let fetch = self.counter_batches.as_mut().map_or(arrive, |b| b.fetch(g, arrive));
        if p.owner == HOST || p.owner as usize == g {
            // Already here (an earlier notification of this GPU moved it): nothing to do.
            if let Some(b) = self.counter_batches.as_mut() {
                b.done(g, fetch);
            }
            return;
        }
        self.stats.migrations_p2p += 1;
        self.stats.counter_migrations += 1;
        let walked = self.host_translate(vpn, fetch, now);
        let acks = self.invalidate(vpn, None, self.send_time(fetch, walked, p.busy), now, gpus);
        let done = self.move_data(vpn, p.owner, g, walked.max(acks).max(p.ready), now, Cause::AccessCounter);
        if let Some(b) = self.counter_batches.as_mut() {
            b.done(g, done);
        }
        let q = self.dir.page(vpn);
        q.owner = g as u8;
        q.copies = 1 << g;
        q.ready = done;
        q.busy = done;
        self.dir.reset_counters(vpn, self.n);
        self.owner_changed(vpn, p.owner, g);
    }

    /// Whether a warp of GPU `g` about to sleep for its far-faulted instructions has no answer
    /// left to wait for. A page's answer wakes only the warps asleep for it at that moment
    /// (`Gpu::replay_page`, or `Gpu::replay` in IOMMU mode), and nothing else replays a GPU
    /// here: a warp that went on with independent work (a library GEMM's next tile loads, then
    /// its math) while its answers arrived, or while its page was invalidated before the
    /// answer (`page_ready`), would sleep for a replay that never comes. A faulted page's
    /// answer is due while the host services this GPU's fault on it, or if the fault was
    /// raised in this run of the warp (`raised`, still to reach the host), or, in GMMU mode,
    /// while a miss on the unmapped page is held in the L2 TLB's MSHR (`held`: `park_held`
    /// parks such lanes without raising a fault). Mapped is not enough: a store to a read-only
    /// replica faults on a mapped page. With no answer due the warp re-executes at once and
    /// faults again on what is missing.
    #[cold]
    pub fn nothing_to_wait_for(
        &self,
        g: u32,
        faulted: &[u64],
        raised: &[crate::uvm::Fault],
        held: Option<&rustc_hash::FxHashSet<u64>>,
        residency: &crate::xlat::space::Residency,
    ) -> bool {
        !faulted.iter().any(|&p| {
            self.dir.get(p).is_some_and(|e| e.pending >> g & 1 == 1)
                || raised.iter().any(|f| f.vpn == p)
                || (held.is_some_and(|h| h.contains(&p)) && !residency.is_mapped(p))
        })
    }

    /// GPU `g`'s answer for `vpn` arrived: its PTE becomes valid, unless the page was
    /// invalidated again meanwhile (then the warps re-execute and fault again).
    pub fn page_ready(&mut self, g: usize, vpn: u64, gpu: &mut Gpu) {
        let p = self.dir.page(vpn);
        p.pending &= !(1 << g);
        let mapped = p.mapped >> g & 1 == 1;
        // The answer releases the misses held with the fault in the L2 TLB's MSHR.
        if let Some(held) = gpu.xlat.far_pending.as_mut() {
            held.remove(&vpn);
        }
        if mapped {
            // IDYLL: the new mapping overwrites the PTE; its pending invalidation is dropped.
            if let Some(b) = gpu.xlat.irmb.as_mut() {
                b.remove(vpn);
            }
        }
        let residency = &mut gpu.xlat.space.residency;
        if mapped {
            if residency.make_resident(vpn) {
                if let Some(prt) = gpu.xlat.prt.as_mut() {
                    prt.mapped(vpn);
                }
            }
        } else {
            // Invalidated before the answer arrived: its warps fault again.
            gpu.requeue_waiters(vpn);
        }
    }

    /// `multi.initial_placement = "distributed"`: split each buffer's pages over the GPUs as
    /// MGPUSim's `Driver.Distribute` does, each page resident and mapped on its GPU.
    pub fn distribute(&mut self, buffers: &[crate::workload::Buffer], gpus: &mut [Gpu]) {
        let n = gpus.len() as u64;
        for b in buffers {
            let (first, end) = b.small_pages();
            let pages = end - first;
            let per = pages / n;
            for vpn in first..end {
                // Whole shares in order, the remainder on the last GPU; fewer pages than GPUs: all on GPU 0.
                let g = (vpn - first).checked_div(per).map_or(0, |i| i.min(n - 1) as usize);
                if gpus[g].xlat.space.residency.make_resident(vpn) {
                    if let Some(prt) = gpus[g].xlat.prt.as_mut() {
                        prt.mapped(vpn);
                    }
                }
                let p = self.dir.page(vpn);
                (p.owner, p.copies, p.mapped, p.access) = (g as u8, 1 << g, 1 << g, access_bit(g));
            }
        }
    }

    pub fn export(&self, m: &mut Metrics, gpus: &[Gpu], span: Ps) {
        let s = &self.stats;
        let n = self.n;
        m.int("multi.gpus", n as u64);
        let faults: u64 = s.faults.iter().sum();
        let remote: u64 = s.remote_lines.iter().sum();
        let (mut l2_misses, mut insts, mut lines) = (0u64, 0u64, 0u64);
        let (mut gq, mut greads, mut gwalks) = (0u128, 0u64, 0u64);
        for (i, gpu) in gpus.iter().enumerate() {
            let l2 = gpu.xlat.l2.as_ref().map_or(0, |t| t.stats.misses);
            let ins = gpu.stats.insts();
            m.int(format!("gpu{i}.far_faults"), s.faults[i]);
            m.int(format!("gpu{i}.remote_accesses"), s.remote_lines[i]);
            m.int(format!("gpu{i}.insts"), ins);
            m.float(format!("gpu{i}.l2tlb.mpki"), per_kilo(l2, ins));
            m.float(format!("gpu{i}.far_faults_pki"), per_kilo(s.faults[i], ins));
            l2_misses += l2;
            insts += ins;
            lines += gpu.stats.line_accesses;
            let w = &gpu.xlat.gmmu.stats;
            gq += w.queue_wait.sum_ps();
            greads += w.pte_reads;
            gwalks += w.walks;
        }
        m.int("multi.insts", insts);
        m.float("multi.l2tlb.mpki", per_kilo(l2_misses, insts));
        m.int("multi.far_faults", faults);
        m.int("multi.far_faults.duplicate", s.duplicate_faults);
        m.int("multi.far_faults.held", gpus.iter().map(|g| g.xlat.held_misses).sum::<u64>());
        m.float("multi.far_faults_pki", per_kilo(faults, insts));
        m.int("multi.remote_accesses", remote);
        m.int("multi.local_accesses", lines.saturating_sub(remote));
        m.int("multi.remote_reads_l1_served", s.remote_l1_served);
        m.ratio("multi.remote_fraction", remote, lines);
        m.int("multi.migrations", s.migrations_h2d + s.migrations_p2p);
        m.int("multi.migrations.h2d", s.migrations_h2d);
        m.int("multi.migrations.p2p", s.migrations_p2p);
        m.int("multi.migrations.counter", s.counter_migrations);
        m.int("multi.replications", s.replications);
        m.int("multi.remote_maps", s.remote_maps);
        m.int("multi.write_invalidations", s.write_invalidations);
        m.int("multi.bytes_h2d", s.bytes_h2d);
        m.int("multi.bytes_p2p", s.bytes_p2p);
        m.int("multi.invalidations.sent", s.inv_sent);
        m.int("multi.invalidations.necessary", s.inv_necessary);
        m.int("multi.invalidations.unnecessary", s.inv_unnecessary);
        s.inv_latency.export(m, "multi.invalidations.latency_ns");
        m.float("multi.shootdown_stall_ns", s.stall_ps as f64 / 1000.0);
        s.migration_wait.export(m, "multi.migration_wait_ns");
        // L2-TLB-miss latency breakdown: each source's total over the run, per L2 miss (all GPUs).
        let per = |ps: u128| if l2_misses == 0 { 0.0 } else { ps as f64 / PS_PER_NS as f64 / l2_misses as f64 };
        let level = gpus.first().map_or(0, |g| g.xlat.gmmu.level_latency()) as u128;
        let demand_extra = (greads - gwalks) as u128 - (s.inv_reads as u128).min((greads - gwalks) as u128);
        m.float("multi.l2miss.gmmu_queue_ns", per(gq.saturating_sub(s.inv_queue_ps)));
        m.float("multi.l2miss.gmmu_pwc_miss_ns", per(demand_extra * level));
        let b = self.batches.as_ref().map_or_else(batch::BatchStats::default, |b| b.stats);
        m.int("multi.fault_batches", b.batches);
        m.ratio("multi.fault_batch.faults_mean", faults, b.batches);
        m.int("multi.fault_batch.faults_max", b.largest as u64);
        m.float("multi.l2miss.batch_wait_ns", per(b.wait_ps));
        let c = self.counter_batches.as_ref().map_or_else(batch::BatchStats::default, |b| b.stats);
        m.int("multi.counter_notifications", s.counter_notifications);
        m.int("multi.counter_batches", c.batches);
        m.ratio("multi.counter_batch.notifications_mean", s.counter_notifications, c.batches);
        m.int("multi.counter_batch.notifications_max", c.largest as u64);
        m.float(
            "multi.counter_batch.wait_ns",
            if s.counter_notifications == 0 { 0.0 } else { c.wait_ps as f64 / PS_PER_NS as f64 / s.counter_notifications as f64 },
        );
        m.float("multi.l2miss.host_queue_ns", per(s.host_queue_ps));
        m.float("multi.l2miss.host_pwc_miss_ns", per(s.host_pwc_ps));
        m.float("multi.l2miss.migration_ns", per(s.migration_ps));
        m.float("multi.l2miss.link_ns", per(s.link_ps));
        if self.gmmu_mode {
            // GMMU walk depth, demand and invalidation walks apart (seed multi-gpu Fig. 26:
            // 56.6% of walks read 1-2 entries). Index = entries read.
            let levels = gpus.first().map_or(0, |g| g.xlat.gmmu.levels()) as usize;
            let mut demand = [0u64; 8];
            for g in gpus {
                for (d, n) in demand.iter_mut().zip(g.xlat.gmmu.stats.reads_hist) {
                    *d += n;
                }
            }
            for (d, i) in demand.iter_mut().zip(s.inv_reads_hist) {
                *d -= i;
            }
            for (name, h) in [("demand_walks", &demand), ("inv_walks", &s.inv_reads_hist)] {
                for (k, n) in h.iter().enumerate().take(levels + 1).skip(1) {
                    m.int(format!("multi.gmmu.{name}.reads.{k}"), *n);
                }
                m.ratio(format!("multi.gmmu.{name}.short_fraction"), h[1] + h[2], h.iter().sum::<u64>());
            }
        }
        if self.directory || self.lazy {
            m.int("multi.idyll.filtered", s.idyll_filtered);
            let mut b = crate::xlat::irmb::IrmbStats::default();
            for x in gpus.iter().filter_map(|g| g.xlat.irmb.as_ref()) {
                let y = &x.stats;
                (b.inserts, b.merges, b.evicted, b.drains, b.drained, b.hits, b.removed) = (
                    b.inserts + y.inserts,
                    b.merges + y.merges,
                    b.evicted + y.evicted,
                    b.drains + y.drains,
                    b.drained + y.drained,
                    b.hits + y.hits,
                    b.removed + y.removed,
                );
            }
            m.int("multi.idyll.irmb.inserts", b.inserts);
            m.int("multi.idyll.irmb.merges", b.merges);
            m.int("multi.idyll.irmb.evictions", b.evicted);
            m.int("multi.idyll.irmb.drains", b.drains);
            m.int("multi.idyll.irmb.drained", b.drained);
            m.int("multi.idyll.irmb.hits", b.hits);
            m.int("multi.idyll.irmb.removed", b.removed);
        }
        transfw::export(self.forwarding.as_deref(), m, gpus);
        for (k, c) in self.dir.sharing(n).iter().enumerate() {
            m.int(format!("multi.sharing.pages_{}", k + 1), *c);
        }
        if self.gmmu_mode {
            match &self.host_tlb {
                Some(t) => t.export(m, "host_mmu.tlb"),
                None => crate::xlat::export_tlb_stats(&Default::default(), 0, m, "host_mmu.tlb"),
            }
            self.host_walker.export(m, "host_mmu.walker", span);
        }
    }
}

fn per_kilo(n: u64, insts: u64) -> f64 {
    if insts == 0 {
        0.0
    } else {
        n as f64 * 1000.0 / insts as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::simulate;
    use crate::xlat::Xlat;

    fn system(n: u32, policy: MigrationPolicy) -> (Multi, Vec<Gpu>) {
        system_with(n, policy, |_| {})
    }

    fn system_with(n: u32, policy: MigrationPolicy, f: impl FnOnce(&mut Config)) -> (Multi, Vec<Gpu>) {
        let mut cfg = Config::default();
        cfg.gpu.sms = 2;
        cfg.multi.gpus = n;
        cfg.multi.migration = policy;
        f(&mut cfg);
        let gpus = (0..n as usize).map(|i| Gpu::with_id(&cfg, i)).collect();
        (Multi::new(&cfg, None), gpus)
    }

    /// A managed 1 MiB buffer of 4 KiB pages at `base`, mapped on every GPU.
    fn map_on_every_gpu(gpus: &mut [Gpu], base: u64) {
        for g in gpus.iter_mut() {
            g.xlat.space.map(&crate::workload::Buffer { base, bytes: 1 << 20, page_bytes: 4096, managed: true });
        }
    }

    #[test]
    fn idyll_directory_sends_only_to_access_bits_and_aliases_beyond_11() {
        let (mut m, mut gpus) = system_with(12, MigrationPolicy::FirstTouch, |c| c.multi.idyll.directory = true);
        let vpn = 5;
        fault(&mut m, &mut gpus, 0, vpn, false, 0); // placed on GPU 0: bit 0
        fault(&mut m, &mut gpus, 1, vpn, false, 1_000_000); // GPU 1 maps it remotely: bit 1
        assert_eq!(m.dir.page(vpn).access, 0b11);
        m.migrate(vpn, 3, 2_000_000, 2_000_000, &mut gpus);
        // GPUs 0 and 1 hold mappings; GPU 11 shares GPU 0's bit (11 mod 11 = 0) and gets one too.
        let to: Vec<usize> = m.arrivals.iter().map(|&(_, x)| (x & 31) as usize).collect();
        assert_eq!(to, [0, 1, 11]);
        assert_eq!((m.stats.inv_sent, m.stats.idyll_filtered), (3, 9));
        deliver(&mut m, &mut gpus);
        assert_eq!((m.stats.inv_necessary, m.stats.inv_unnecessary), (2, 1), "the aliased request is unnecessary");
        assert_eq!(m.dir.page(vpn).access, 0, "an invalidation clears the bits");
        // GPU 3 faults on its new copy: only its bit is set, so a next move invalidates only GPU 3.
        fault(&mut m, &mut gpus, 3, vpn, false, 10_000_000);
        assert_eq!(m.dir.page(vpn).access, 0b1000);
        m.migrate(vpn, 5, 20_000_000, 20_000_000, &mut gpus);
        let to: Vec<usize> = m.arrivals.iter().map(|&(_, x)| (x & 31) as usize).collect();
        assert_eq!(to, [3]);
        // The driver sends after its host walk, which reads the bits: 150 ns message + 10 ns host
        // TLB (the page was walked before: hit) -> sent at +160 ns, arriving at +310 ns.
        assert_eq!(m.arrivals[0].0, 20_000_000 + ns_to_ps(310.0));
        // Without the directory the same move reaches every GPU.
        let (mut b, mut bg) = system(12, MigrationPolicy::FirstTouch);
        fault(&mut b, &mut bg, 0, vpn, false, 0);
        fault(&mut b, &mut bg, 1, vpn, false, 1_000_000);
        b.migrate(vpn, 3, 2_000_000, 2_000_000, &mut bg);
        assert_eq!((b.stats.inv_sent, b.stats.idyll_filtered), (12, 0));
    }

    #[test]
    fn idyll_lazy_acknowledges_at_once_and_an_irmb_hit_faults_without_a_walk() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::OnTouch, |c| c.multi.idyll.lazy = true);
        let base = 1u64 << 30;
        map_on_every_gpu(&mut gpus, base);
        let vpn = base >> 12;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        let busy = m.dir.page(vpn).busy;
        // GPU 0's walkers are all busy (demand walks) when the invalidation arrives: it is parked.
        let threads = Config::default().gmmu.walker.threads as u64;
        for i in 0..threads {
            let g = &mut gpus[0];
            g.xlat.gmmu.walk((100 + i) << 30, 1, busy, busy, &mut g.mem.dram);
        }
        let walks0 = gpus[0].xlat.gmmu.stats.walks;
        m.fault(1, vpn, false, busy, busy, &mut gpus).unwrap();
        // No PTE walk: send -> GPU (150 ns) -> acknowledgement (150 ns).
        assert_eq!(m.stats.migration_wait.mean_ns(), 300.0);
        deliver(&mut m, &mut gpus);
        assert_eq!(m.stats.inv_walks, 1, "GPU 1's walkers were idle: its entry drained at once");
        let b0 = gpus[0].xlat.irmb.as_ref().unwrap();
        assert!(b0.lookup(vpn) && gpus[1].xlat.irmb.as_ref().unwrap().is_empty());
        assert_eq!(gpus[0].xlat.gmmu.stats.walks, walks0);
        // GPU 0 misses its TLBs on the page: the IRMB hit raises the far fault after the L1 and
        // L2 lookups, without waiting for a walker.
        let t = busy + ns_to_ps(1000.0);
        let g = &mut gpus[0];
        let cfg = Config::default();
        let clock = crate::sim::Clock::from_mhz(cfg.gpu.core_mhz);
        let lookups = clock.cycles((cfg.gpu.l1tlb.latency_cycles + cfg.gpu.l2tlb.latency_cycles) as u64);
        match g.xlat.translate(0, base, t, t, &mut g.mem.dram) {
            Xlat::Fault(d) => assert_eq!(d, t + lookups),
            x => panic!("expected a far fault, got {x:?}"),
        }
        assert_eq!(g.xlat.irmb.as_ref().unwrap().stats.hits, 1);
        assert_eq!(g.xlat.gmmu.stats.walks, walks0, "no walk");
        // A page with no pending invalidation walks (and waits for a walker).
        match g.xlat.translate(0, base + 4096, t, t, &mut g.mem.dram) {
            Xlat::Fault(d) => assert!(d > t + lookups + ns_to_ps(100.0)),
            x => panic!("expected a far fault, got {x:?}"),
        }
        assert_eq!(g.xlat.gmmu.stats.walks, walks0 + 1);
        // A new mapping for GPU 0 arrives (as the answer to that fault would): the pending invalidation is dropped.
        m.dir.page(vpn).mapped |= 1;
        m.page_ready(0, vpn, &mut gpus[0]);
        assert!(gpus[0].xlat.irmb.as_ref().unwrap().is_empty());
        assert_eq!(gpus[0].xlat.irmb.as_ref().unwrap().stats.removed, 1);
        // Walkers idle: an arrival's idle drain writes the entry back with one walk.
        let (mut z, mut zg) = system_with(2, MigrationPolicy::OnTouch, |c| c.multi.idyll.lazy = true);
        fault(&mut z, &mut zg, 0, 9, false, 0);
        let busy = z.dir.page(9).busy;
        fault(&mut z, &mut zg, 1, 9, false, busy);
        assert_eq!(z.stats.inv_walks, 2);
        assert!(zg.iter().all(|g| g.xlat.irmb.as_ref().unwrap().is_empty()));
        assert_eq!(zg[0].xlat.irmb.as_ref().unwrap().stats.drains, 1);
    }

    #[test]
    fn a_miss_on_a_page_with_a_far_fault_outstanding_is_held_without_a_walk() {
        let (mut m, mut gpus) = system(2, MigrationPolicy::AccessCounter);
        let base = 1u64 << 30;
        map_on_every_gpu(&mut gpus, base);
        let vpn = base >> 12;
        let cfg = Config::default();
        let clock = crate::sim::Clock::from_mhz(cfg.gpu.core_mhz);
        let lookups = clock.cycles((cfg.gpu.l1tlb.latency_cycles + cfg.gpu.l2tlb.latency_cycles) as u64);
        let walk = ns_to_ps(cfg.gmmu.walker.level_latency_ns * cfg.translation.levels as f64 + cfg.gmmu.walker.pwc_latency_ns);
        // SM 0's first miss walks all levels (cold page-walk caches) and far-faults.
        let g = &mut gpus[0];
        match g.xlat.translate(0, base, 0, 0, &mut g.mem.dram) {
            Xlat::Fault(d) => assert_eq!(d, lookups + walk),
            x => panic!("expected a far fault, got {x:?}"),
        }
        let ready = m.fault(0, vpn, false, lookups + walk, 0, &mut gpus).expect("first fault");
        // SM 1 (its own L1 TLB) misses on the page before the answer: held with the fault in the
        // L2 TLB's MSHR, raised after the L1 and L2 lookups, no walk; the host drops it as a duplicate.
        let t = ns_to_ps(2000.0);
        let g = &mut gpus[0];
        match g.xlat.translate(1, base + 64, t, t, &mut g.mem.dram) {
            Xlat::Fault(d) => assert_eq!(d, t + lookups),
            x => panic!("expected a held far fault, got {x:?}"),
        }
        assert_eq!((g.xlat.gmmu.stats.walks, g.xlat.held_misses), (1, 1));
        assert!(m.fault(0, vpn, false, t + lookups, t, &mut gpus).is_none());
        assert_eq!(m.stats.duplicate_faults, 1);
        // Another page is not held: it walks (the upper levels now hit the page-walk caches: one read).
        let g = &mut gpus[0];
        match g.xlat.translate(1, base + 4096, t, t, &mut g.mem.dram) {
            Xlat::Fault(d) => assert_eq!(d, t + lookups + ns_to_ps(100.0 + cfg.gmmu.walker.pwc_latency_ns)),
            x => panic!("expected a far fault, got {x:?}"),
        }
        assert_eq!(g.xlat.gmmu.stats.walks, 2);
        // The answer releases the page: the next miss walks and finds the valid PTE.
        m.page_ready(0, vpn, &mut gpus[0]);
        let g = &mut gpus[0];
        assert!(matches!(g.xlat.translate(1, base + 128, ready, ready, &mut g.mem.dram), Xlat::Ready(..)));
        assert_eq!((g.xlat.gmmu.stats.walks, g.xlat.held_misses), (3, 1));
        // Another GPU's outstanding fault does not hold this GPU's misses.
        assert!(gpus[1].xlat.far_pending.as_ref().unwrap().is_empty());
    }

    #[test]
    fn idyll_options_run_and_change_nothing_when_off() {
        let base = run(&["multi.gpus=4", "multi.migration=access-counter", "multi.access_threshold=4"]);
        assert!(base.get("multi.idyll.filtered").is_none());
        let both = run(&[
            "multi.gpus=4",
            "multi.migration=access-counter",
            "multi.access_threshold=4",
            "multi.idyll.directory=true",
            "multi.idyll.lazy=true",
        ]);
        assert!(base.get("multi.invalidations.sent").unwrap() > 0.0);
        assert!(both.get("multi.idyll.filtered").unwrap() > 0.0);
        assert_eq!(both.get("multi.invalidations.unnecessary"), Some(0.0), "4 GPUs: no aliasing, every request needed");
        assert!(both.get("multi.idyll.irmb.inserts").unwrap() > 0.0);
        assert_eq!(
            sans_wall(&both),
            sans_wall(&run(&[
                "multi.gpus=4",
                "multi.migration=access-counter",
                "multi.access_threshold=4",
                "multi.idyll.directory=true",
                "multi.idyll.lazy=true",
            ]))
        );
    }

    /// Deliver every invalidation request sent so far (the world does it with `Ev::Invalidate`).
    fn deliver(m: &mut Multi, gpus: &mut [Gpu]) {
        for (at, x) in std::mem::take(&mut m.arrivals) {
            m.invalidation_arrives((x & 31) as usize, x >> 5, at, &mut gpus[(x & 31) as usize]);
        }
    }

    /// GPU `g` faults on `vpn` and gets its answer.
    fn fault(m: &mut Multi, gpus: &mut [Gpu], g: usize, vpn: u64, write: bool, t: Ps) -> Ps {
        let ready = m.fault(g, vpn, write, t, t, gpus).expect("not a duplicate");
        deliver(m, gpus);
        m.page_ready(g, vpn, &mut gpus[g]);
        ready
    }

    /// The driver's batches (`multi.fault_batch_size`): faults that reach the host together share a
    /// fetch; one arriving while its GPU's batch is serviced waits for that batch's last page, and
    /// another GPU's driver is not held up. Without batches the late fault starts at once.
    #[test]
    fn a_fault_arriving_during_its_gpus_batch_waits_for_the_batch_to_end() {
        let t: Ps = 100_000_000;
        let run = |batch: u32| {
            let (mut m, mut gpus) = system_with(3, MigrationPolicy::OnTouch, |c| c.multi.fault_batch_size = batch);
            // GPU 1 first-touches pages 1-3 (idle driver each time, far apart).
            for vpn in 1..=3 {
                fault(&mut m, &mut gpus, 1, vpn, false, vpn * 10_000_000);
            }
            // GPU 0 takes pages 1 and 2 at T (one batch), page 3 a nanosecond later; GPU 2 faults on a
            // fresh page then too.
            let r1 = m.fault(0, 1, false, t, t, &mut gpus).unwrap();
            let r2 = m.fault(0, 2, false, t, t, &mut gpus).unwrap();
            let r3 = m.fault(0, 3, false, t + 1000, t, &mut gpus).unwrap();
            let r4 = m.fault(2, 9, false, t + 1000, t, &mut gpus).unwrap();
            (r1, r2, r3, r4, m.batches.as_ref().map(|b| b.stats))
        };
        let host = ns_to_ps(150.0);
        let (r1, r2, r3, r4, stats) = run(256);
        let stats = stats.expect("batches on");
        // Three idle fetches of GPU 1, two batches of GPU 0, one of GPU 2.
        assert_eq!((stats.batches, stats.largest), (6, 2));
        let end = r1.max(r2) - host;
        // Page 3's batch is fetched when page 2 is done; its invalidation round trip to GPU 1
        // (two messages) comes after that.
        assert!(r3 - host >= end + 2 * host, "page 3 done at {} ps, batch 1 ended at {end} ps", r3 - host);
        assert_eq!(stats.wait_ps, (end - (t + 1000 + host)) as u128);
        // GPU 2's first touch is fetched on arrival, while GPU 0's batch is being serviced.
        assert!(r4 < r3);
        let (u1, u2, u3, u4, none) = run(0);
        assert!(none.is_none());
        assert_eq!((u1, u2, u4), (r1, r2, r4), "the first batch and the other GPU are served alike");
        assert!(u3 < r3, "without batches page 3 starts at once: {u3} against {r3}");
    }

    /// In ATS mode the IOMMU keeps one page-request queue for every GPU (§2.2): another GPU's
    /// fault arriving while a batch is serviced waits for it too.
    #[test]
    fn ats_mode_batches_every_gpus_faults_in_one_queue() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::OnTouch, |c| c.translation.mode = TranslationMode::Iommu);
        let t: Ps = 1_000_000;
        let host = m.host_lat;
        let r0 = m.fault(0, 1, false, t, t, &mut gpus).unwrap();
        let r1 = m.fault(1, 2, false, t + 1000, t, &mut gpus).unwrap();
        let stats = m.batches.as_ref().unwrap().stats;
        assert_eq!(stats.batches, 2);
        // GPU 1's fault is fetched when GPU 0's page is done.
        assert_eq!(stats.wait_ps, ((r0 - host) - (t + 1000 + host)) as u128);
        assert!(r1 > r0);
    }

    /// A warp about to sleep for its faulted pages waits only while an answer is due for one:
    /// the host services the GPU's fault, the fault was just raised, or (GMMU) a miss on the
    /// unmapped page is held in the L2 TLB's MSHR. Otherwise it re-executes at once.
    #[test]
    fn a_sleeping_warp_waits_only_for_answers_due() {
        let (mut m, mut gpus) = system(2, MigrationPolicy::OnTouch);
        let raised = |vpn| crate::uvm::Fault { time: 0, vpn, utlb: 0, sm: 0, warp: 0, write: false, prefetch: false };
        let due = |m: &Multi, gpus: &[Gpu], pages: &[u64], r: &[crate::uvm::Fault], held: Option<&rustc_hash::FxHashSet<u64>>| {
            !m.nothing_to_wait_for(0, pages, r, held, &gpus[0].xlat.space.residency)
        };
        // GPU 0's fault on page 7 is being serviced: its answer is due until it arrives.
        m.fault(0, 7, false, 0, 0, &mut gpus).expect("a first fault");
        assert!(due(&m, &gpus, &[7], &[], None));
        m.page_ready(0, 7, &mut gpus[0]);
        assert!(!due(&m, &gpus, &[7], &[], None), "answered and mapped: nothing to wait for");
        // Page 9: raised in this run (not at the host yet), or no answer coming at all.
        assert!(due(&m, &gpus, &[7, 9], &[raised(9)], None));
        assert!(!due(&m, &gpus, &[9], &[], None), "no fault on it anywhere: re-execute and fault again");
        // GMMU: a miss held behind page 11's fault waits while the page is unmapped.
        let held: rustc_hash::FxHashSet<u64> = [11].into_iter().collect();
        assert!(due(&m, &gpus, &[11], &[], Some(&held)));
        assert!(!due(&m, &gpus, &[7], &[], Some(&held)), "held pages other than its own do not count");
        // A held miss of a page that is mapped by now (its answer came) has nothing left to wait for.
        let held7: rustc_hash::FxHashSet<u64> = [7].into_iter().collect();
        assert!(!due(&m, &gpus, &[7], &[], Some(&held7)), "held but mapped: re-execute");
        // A store to a read-only replica faults on a mapped page: mapped alone is not an answer.
        let (mut r, mut rg) = system(2, MigrationPolicy::ReadReplication);
        fault(&mut r, &mut rg, 0, 5, false, 0);
        fault(&mut r, &mut rg, 1, 5, false, 1_000_000);
        r.fault(1, 5, true, 2_000_000, 2_000_000, &mut rg).expect("the store's fault");
        assert!(rg[1].xlat.space.residency.is_mapped(5));
        assert!(!r.nothing_to_wait_for(1, &[5], &[], None, &rg[1].xlat.space.residency));
    }

    #[test]
    fn walk_depths_separate_invalidation_walks_from_demand_walks() {
        let (mut m, mut gpus) = system(2, MigrationPolicy::OnTouch);
        let levels = Config::default().translation.levels as usize;
        // A page at 7 GiB. The baseline broadcasts every move: GPU 1 invalidates at the first touch
        // (from the host), GPU 0 when GPU 1 takes the page; each walk finds its GMMU's caches cold.
        let vpn = 7 << 18;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        let busy = m.dir.page(vpn).busy;
        fault(&mut m, &mut gpus, 1, vpn, false, busy);
        assert_eq!(m.stats.inv_walks, 2);
        // A demand walk of GPU 0 to the next page: the level-2 entry that walk cached hits.
        let t = busy + ns_to_ps(10_000.0);
        let g = &mut gpus[0];
        g.xlat.gmmu.walk((vpn + 1) << 12, 1, t, t, &mut g.mem.dram);
        let mut x = Metrics::default();
        m.export(&mut x, &gpus, t);
        let get = |k: &str| x.get(k).unwrap_or_else(|| panic!("{k} missing"));
        assert_eq!(get(&format!("multi.gmmu.inv_walks.reads.{levels}")), 2.0);
        assert_eq!(get("multi.gmmu.inv_walks.reads.1"), 0.0);
        assert_eq!(get("multi.gmmu.demand_walks.reads.1"), 1.0);
        assert_eq!(get(&format!("multi.gmmu.demand_walks.reads.{levels}")), 0.0);
        assert_eq!((get("multi.gmmu.demand_walks.short_fraction"), get("multi.gmmu.inv_walks.short_fraction")), (1.0, 0.0));
    }

    #[test]
    fn the_old_owner_uses_its_stale_mapping_until_its_invalidation_arrives() {
        let (mut m, mut gpus) = system(3, MigrationPolicy::OnTouch);
        let vpn = 9;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        let t = m.dir.page(vpn).busy;
        // GPU 1 takes the page; the invalidations are on their way: sent when the fault reaches
        // the host (t + 150 ns), they reach the GPUs at t + 300 ns.
        let ready = m.fault(1, vpn, false, t, t, &mut gpus).unwrap();
        let until = t + ns_to_ps(300.0);
        let copied = m.dir.page(vpn).ready;
        assert!(copied > until && ready > copied);
        assert_eq!(m.dir.stale(vpn, 0), Some(Stale { until, at: 0, read_only: false }));
        assert_eq!(m.dir.page(vpn).stale, 0b001, "only GPU 0 held a mapping");
        // GPU 0 translated before its request was handled: its old frame, at once, reads and
        // writes alike, whatever the instruction's lookup time (a warp's step computes its issues
        // a few ns ahead, so one may lie past the arrival): its TLB entry and PTE were still there.
        // Before 2026-12 a lookup from the arrival on went to the new owner after the copy: a
        // remote access under on-touch, which maps nothing remotely.
        let r = until + 5_000;
        assert_eq!(m.locate(0, vpn, false, r), Locate::Local(r));
        assert_eq!(m.locate(0, vpn, true, r), Locate::Local(r));
        // A GPU that never held the page is not affected, before the shootdown or after it.
        assert_eq!(m.locate(2, vpn, false, r), Locate::Remote(1, copied));
        // The request arrives: the window closes, and GPU 0's translation is gone.
        deliver(&mut m, &mut gpus);
        assert_eq!((m.dir.stale(vpn, 0), m.dir.page(vpn).stale), (None, 0));
        assert!(!gpus[0].xlat.space.residency.is_resident(vpn));
        assert_eq!(m.locate(0, vpn, false, r), Locate::Remote(1, copied));
        m.page_ready(1, vpn, &mut gpus[1]);
        assert_eq!(m.locate(1, vpn, false, ready), Locate::Local(ready));
    }

    #[test]
    fn an_earlier_invalidation_does_not_close_a_later_stale_window() {
        // Three far faults handled back to back (the driver's answers are still on their way):
        // GPU 0 owns the page, GPU 1 takes it (M1), GPU 2 takes it from GPU 1 (M2).
        let (mut m, mut gpus) = system(3, MigrationPolicy::OnTouch);
        let vpn = 11;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        let t = m.dir.page(vpn).busy;
        let ready1 = m.fault(1, vpn, false, t, t, &mut gpus).unwrap();
        let m1 = std::mem::take(&mut m.arrivals);
        m.fault(2, vpn, false, t + 1, t + 1, &mut gpus).unwrap();
        // M2 is sent when GPU 1's answer is in; GPU 0's mapping ends with M1, GPU 1's with M2.
        let (s1, s2) = (t + ns_to_ps(300.0), ready1 + ns_to_ps(150.0));
        // M2 clears the access bits but GPU 1's (its answer is on its way: its PTE will stand), and
        // GPU 2's fault sets its own.
        assert_eq!(m.dir.page(vpn).access, 0b110);
        assert_eq!(m.dir.stale(vpn, 0).map(|w| w.until), Some(s1));
        assert_eq!(m.dir.stale(vpn, 1), Some(Stale { until: s2, at: 1, read_only: false }));
        // M1's requests arrive (GPU 1's too: its answer, still on its way, stands).
        for (at, x) in m1 {
            m.invalidation_arrives((x & 31) as usize, x >> 5, at, &mut gpus[(x & 31) as usize]);
        }
        assert_eq!(m.dir.page(vpn).stale, 0b010);
        m.page_ready(1, vpn, &mut gpus[1]);
        let copied = m.dir.page(vpn).ready;
        // GPU 1 uses its new copy until M2 reaches it; GPU 0 (no mapping since M1: it would fault)
        // is not a stale user: the directory names GPU 2.
        assert_eq!(m.locate(1, vpn, true, s2), Locate::Local(s2));
        assert_eq!(m.locate(0, vpn, false, s2), Locate::Remote(2, copied));
        deliver(&mut m, &mut gpus);
        assert_eq!(m.dir.page(vpn).stale, 0);
    }

    #[test]
    fn stale_remote_mappings_and_read_replicas() {
        // Access counters: GPU 1 maps GPU 0's page remotely; the driver moves it to GPU 2. Until
        // their requests arrive GPU 0 reads its own frame and GPU 1 still reads GPU 0's.
        let (mut m, mut gpus) = system(3, MigrationPolicy::AccessCounter);
        let vpn = 21;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        fault(&mut m, &mut gpus, 1, vpn, false, 1_000_000);
        m.migrate(vpn, 2, 2_000_000, 2_000_000, &mut gpus);
        let until = m.arrivals[0].0;
        assert!(m.arrivals.iter().all(|&(at, _)| at == until));
        let copied = m.dir.page(vpn).ready;
        let r = until;
        assert_eq!(m.locate(0, vpn, true, r), Locate::Local(r));
        assert_eq!(m.locate(1, vpn, false, r), Locate::Remote(0, r));
        assert_eq!(m.locate(1, vpn, false, until + 5_000), Locate::Remote(0, until + 5_000), "until the request is handled");
        deliver(&mut m, &mut gpus);
        assert_eq!(m.locate(1, vpn, false, r), Locate::Remote(2, copied));
        // Read replication: replicas on GPUs 0 and 1; GPU 1's store collapses them. Until its
        // request arrives GPU 0 reads its replica, but a store through that read-only mapping faults.
        let (mut m, mut gpus) = system(3, MigrationPolicy::ReadReplication);
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        fault(&mut m, &mut gpus, 1, vpn, false, 1_000_000);
        m.fault(1, vpn, true, 2_000_000, 2_000_000, &mut gpus).unwrap();
        let until = m.arrivals[0].0;
        assert_eq!(m.dir.stale(vpn, 0), Some(Stale { until, at: 0, read_only: true }));
        assert_eq!(m.dir.stale(vpn, 1), None, "the writer keeps its copy");
        assert_eq!(m.locate(0, vpn, false, until), Locate::Local(until));
        assert_eq!(m.locate(0, vpn, true, until), Locate::WriteFault);
        assert_eq!(m.locate(2, vpn, false, until), Locate::Remote(1, m.dir.page(vpn).ready));
        // That store faults, and GPU 0 takes the page back before its request arrives: its new
        // mapping replaces the stale read-only one, so the store finds its own copy.
        m.fault(0, vpn, true, until - 1, until - 1, &mut gpus).unwrap();
        assert_eq!(m.dir.stale(vpn, 0), None);
        assert_eq!(m.locate(0, vpn, true, until), Locate::Local(m.dir.page(vpn).ready));
    }

    #[test]
    fn access_counter_migrates_exactly_at_the_threshold() {
        let (mut m, mut gpus) = system(2, MigrationPolicy::AccessCounter);
        let vpn = 0x1234;
        fault(&mut m, &mut gpus, 0, vpn, false, 0); // from the host to GPU 0
        fault(&mut m, &mut gpus, 1, vpn, false, 1_000_000); // GPU 1: remote mapping
        assert_eq!((m.stats.migrations_h2d, m.stats.remote_maps), (1, 1));
        assert_eq!(m.locate(1, vpn, false, 2_000_000), Locate::Remote(0, 2_000_000));
        for i in 1..256 {
            m.remote_line(1, 0, vpn, false, 2_000_000 + i, 2_000_000);
        }
        assert!(m.requests.is_empty(), "255 remote accesses must not migrate");
        m.remote_line(1, 0, vpn, false, 3_000_000, 2_000_000);
        assert_eq!(m.requests, vec![(vpn, 1, 3_000_000)]);
        for (v, g, t) in std::mem::take(&mut m.requests) {
            m.migrate(v, g, t, t, &mut gpus);
        }
        deliver(&mut m, &mut gpus);
        let p = *m.dir.page(vpn);
        assert_eq!((p.owner, p.copies, p.mapped), (1, 0b10, 0), "on GPU 1, no GPU keeps a PTE");
        assert_eq!((m.stats.counter_migrations, m.stats.inv_sent, m.stats.inv_necessary), (1, 2, 2));
        assert!(!gpus[0].xlat.space.residency.is_resident(vpn) && !gpus[1].xlat.space.residency.is_resident(vpn));
        // GPU 1's next access faults and maps its own copy: local from then on.
        fault(&mut m, &mut gpus, 1, vpn, false, 10_000_000);
        assert!(matches!(m.locate(1, vpn, false, 20_000_000), Locate::Local(_)));
        assert_eq!(m.stats.migrations_p2p, 1);
    }

    /// The driver's access-counter notification batches (`multi.counter_batch_size`): GPU 1's
    /// notifications for pages 1 and 2 reach the host together and share a fetch; page 3's, a
    /// nanosecond later, waits for that batch's last migration; GPU 2's (page 4, on GPU 1) has a
    /// buffer of its own and is fetched on arrival. Without batches page 3 starts at once.
    #[test]
    fn access_counter_notifications_arriving_during_a_batch_wait_for_its_end() {
        let run = |size: u32| {
            let (mut m, mut gpus) = system_with(3, MigrationPolicy::AccessCounter, |c| c.multi.counter_batch_size = size);
            for vpn in 1..=3 {
                fault(&mut m, &mut gpus, 0, vpn, false, 0);
            }
            fault(&mut m, &mut gpus, 1, 4, false, 0);
            let t = 10_000_000;
            m.migrate(1, 1, t, t, &mut gpus);
            m.migrate(2, 1, t, t, &mut gpus);
            m.migrate(3, 1, t + 1_000, t, &mut gpus);
            m.migrate(4, 2, t + 1_000, t, &mut gpus);
            // A second notification for page 1 finds it already on GPU 1: fetched, nothing moves.
            m.migrate(1, 1, t + 2_000, t, &mut gpus);
            deliver(&mut m, &mut gpus);
            let ready: Vec<Ps> = (1..=4).map(|v| m.dir.page(v).ready).collect();
            let owners: Vec<u8> = (1..=4).map(|v| m.dir.page(v).owner).collect();
            (ready, owners, m.counter_batches.as_ref().map(|b| b.stats), m.stats.counter_notifications, m.stats.counter_migrations)
        };
        let (r, owners, stats, notes, moved) = run(256);
        assert_eq!(owners, [1, 1, 1, 2]);
        assert_eq!((notes, moved), (5, 4));
        let stats = stats.expect("batches on");
        // GPU 1: {1, 2}, then {3, 1 again} (both arrived while the first was serviced); GPU 2: {4}.
        assert_eq!((stats.batches, stats.largest), (3, 2));
        let host = default_host_latency();
        let end = r[0].max(r[1]);
        // Page 3's batch is fetched when page 2 is done; its invalidation round trip follows.
        assert!(r[2] >= end + 2 * host, "page 3 ready at {} ps, the first batch ended at {end} ps", r[2]);
        let (u, _, none, notes0, _) = run(0);
        assert!(none.is_none());
        assert_eq!(notes0, 5);
        assert_eq!((u[0], u[1], u[3]), (r[0], r[1], r[3]), "the first batch and the other GPU are served alike");
        assert!(u[2] < r[2], "without batches page 3 starts at once: {} against {}", u[2], r[2]);
    }

    /// `multi.host_dma_uses_peer_port`: GPU 1's switch port is busy for microseconds with lines read
    /// from GPU 0 (remote line requests) when GPU 1 first-touches a page in host memory: with the
    /// port shared (a PCIe switch's GPU link) the page's DMA waits for those lines; with separate
    /// resources it does not.
    #[test]
    fn host_dma_into_a_gpu_waits_for_its_busy_switch_port() {
        let run = |shared: bool| {
            let (mut m, mut gpus) = system_with(2, MigrationPolicy::FirstTouch, |c| c.multi.host_dma_uses_peer_port = shared);
            fault(&mut m, &mut gpus, 0, 1, false, 0);
            let t = 10_000_000;
            // 2,000 lines of 64 B into GPU 1 from GPU 0: 128 KB, about 4 µs of GPU 1's port at 32 GB/s.
            for _ in 0..2_000 {
                m.remote_line(1, 0, 1, false, t, t);
            }
            fault(&mut m, &mut gpus, 1, 2, false, t)
        };
        let (shared, separate) = (run(true), run(false));
        assert!(shared >= separate + 2_000_000, "shared port {shared} ps, separate {separate} ps");
        // Direct (NVLink) peer links never carry host data: the option changes nothing there.
        let direct = |shared: bool| {
            let (mut m, mut gpus) = system_with(2, MigrationPolicy::FirstTouch, |c| {
                c.multi.host_dma_uses_peer_port = shared;
                c.multi.peer_topology = PeerTopology::Direct;
            });
            fault(&mut m, &mut gpus, 0, 1, false, 0);
            for _ in 0..2_000 {
                m.remote_line(1, 0, 1, false, 10_000_000, 10_000_000);
            }
            fault(&mut m, &mut gpus, 1, 2, false, 10_000_000)
        };
        assert_eq!(direct(true), direct(false));
    }

    /// `multi.peer_topology = "tree"`: a remote read from a GPU under another switch pays two more
    /// switch traversals each way (2 x 2 x 140 ns with the defaults) than under one switch; one from
    /// the GPU on its own switch pays what it does under a single switch.
    #[test]
    fn a_remote_read_across_the_tree_pays_two_more_switches_each_way() {
        let read = |topology: PeerTopology, owner: usize| {
            let (mut m, mut gpus) = system_with(4, MigrationPolicy::FirstTouch, |c| c.multi.peer_topology = topology);
            fault(&mut m, &mut gpus, owner, 1, false, 0);
            let t = 10_000_000;
            m.remote_line(0, owner, 1, false, t, t) - t
        };
        let hop = ns_to_ps(Config::default().multi.switch_hop_latency_ns);
        assert_eq!(read(PeerTopology::Tree, 1), read(PeerTopology::Switch, 1), "GPUs 0 and 1 share a switch");
        assert_eq!(read(PeerTopology::Tree, 2), read(PeerTopology::Switch, 2) + 4 * hop);
        assert_eq!(read(PeerTopology::Tree, 3), read(PeerTopology::Tree, 2));
    }

    /// A page moving between GPUs of different switches of a tree crosses two more switches, once
    /// (2 x 140 ns with the defaults), the rest of the move alike (idle ports, as under one switch).
    #[test]
    fn a_migration_across_the_tree_pays_two_more_switches() {
        let answer = |topology: PeerTopology, owner: usize| {
            let (mut m, mut gpus) = system_with(4, MigrationPolicy::OnTouch, |c| c.multi.peer_topology = topology);
            fault(&mut m, &mut gpus, owner, 1, false, 0);
            let busy = m.dir.page(1).busy;
            fault(&mut m, &mut gpus, 0, 1, false, busy) - busy
        };
        let hop = ns_to_ps(Config::default().multi.switch_hop_latency_ns);
        assert_eq!(answer(PeerTopology::Tree, 1), answer(PeerTopology::Switch, 1), "GPUs 0 and 1 share a switch");
        assert_eq!(answer(PeerTopology::Tree, 2), answer(PeerTopology::Switch, 2) + 2 * hop);
    }

    /// `multi.host_latency_ns` of the default configuration, in ps.
    fn default_host_latency() -> Ps {
        ns_to_ps(Config::default().multi.host_latency_ns)
    }

    #[test]
    fn read_replication_write_invalidates_every_other_copy() {
        let (mut m, mut gpus) = system(4, MigrationPolicy::ReadReplication);
        let vpn = 77;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        for g in 1..4 {
            fault(&mut m, &mut gpus, g, vpn, false, 1_000_000 * g as u64);
        }
        assert_eq!(m.stats.replications, 3);
        assert_eq!(m.dir.page(vpn).copies, 0b1111);
        for g in 0..4 {
            assert!(matches!(m.locate(g, vpn, false, 9_000_000), Locate::Local(_)), "GPU {g} reads its replica");
        }
        // A store from GPU 2 is a protection fault; the driver invalidates the three other copies.
        assert_eq!(m.locate(2, vpn, true, 9_000_000), Locate::WriteFault);
        fault(&mut m, &mut gpus, 2, vpn, true, 10_000_000);
        assert_eq!(m.stats.write_invalidations, 1);
        assert_eq!((m.stats.inv_sent, m.stats.inv_necessary, m.stats.inv_unnecessary), (3, 3, 0));
        let p = *m.dir.page(vpn);
        assert_eq!((p.owner, p.copies, p.mapped), (2, 0b0100, 0b0100));
        for g in [0, 1, 3] {
            assert!(!gpus[g].xlat.space.residency.is_resident(vpn), "GPU {g} lost its copy's PTE");
        }
        assert!(gpus[2].xlat.space.residency.is_resident(vpn));
        assert!(matches!(m.locate(2, vpn, true, 20_000_000), Locate::Local(_)));
    }

    #[test]
    fn broadcast_counts_necessary_and_unnecessary_invalidations() {
        let (mut m, mut gpus) = system(4, MigrationPolicy::FirstTouch);
        let vpn = 5;
        fault(&mut m, &mut gpus, 0, vpn, false, 0); // placed on GPU 0
        fault(&mut m, &mut gpus, 1, vpn, false, 1_000_000); // GPU 1 maps it remotely
                                                            // The driver migrates the page to GPU 3 (as an access counter would): all 4 GPUs get
                                                            // the request; GPUs 0 and 1 had a PTE (necessary), GPUs 2 and 3 had nothing.
        m.migrate(vpn, 3, 2_000_000, 2_000_000, &mut gpus);
        assert_eq!(m.stats.inv_sent, 4);
        deliver(&mut m, &mut gpus);
        assert_eq!((m.stats.inv_necessary, m.stats.inv_unnecessary), (2, 2));
        // Each invalidation walked the GMMU page table of its GPU and was acknowledged.
        assert_eq!(m.stats.inv_walks, 4);
        assert_eq!(m.stats.inv_latency.count(), 4);
        let walks: u64 = gpus.iter().map(|g| g.xlat.gmmu.stats.walks).sum();
        assert_eq!(walks, 4, "invalidation walks use the GPUs' own walkers");
        // With the zero-latency oracle, requests are still counted but cost nothing.
        let (mut z, mut zg) = system(4, MigrationPolicy::FirstTouch);
        z.zero_inval = true;
        fault(&mut z, &mut zg, 0, vpn, false, 0);
        // Sent when the request reaches the host (+150 ns), not before GPU 0's answer arrived;
        // arriving 1 ps later (after the warps that answer woke).
        let send = (1_000_000 + ns_to_ps(150.0)).max(z.dir.page(vpn).busy);
        z.migrate(vpn, 3, 1_000_000, 1_000_000, &mut zg);
        assert!(z.arrivals.len() == 4 && z.arrivals.iter().all(|&(at, _)| at == send + 1));
        deliver(&mut z, &mut zg);
        assert_eq!((z.stats.inv_sent, z.stats.inv_walks), (4, 0));
    }

    #[test]
    fn a_migration_waits_for_every_acknowledgement() {
        let (mut m, mut gpus) = system(2, MigrationPolicy::OnTouch);
        fault(&mut m, &mut gpus, 0, 9, false, 0);
        let busy = m.dir.page(9).busy;
        // GPU 1's walk of page 10 leaves the upper levels in its page-walk caches: its invalidation
        // walk reads the leaf only (100 ns + 1 ns PW-cache), GPU 0's all 4 levels (400 ns + 1 ns).
        let g = &mut gpus[1];
        g.xlat.gmmu.walk(10 << 12, 1, 0, 0, &mut g.mem.dram);
        // GPU 1 takes the page: its answer comes after the invalidation walks of both GPUs.
        let ready = fault(&mut m, &mut gpus, 1, 9, false, busy);
        let wait = m.stats.migration_wait.mean_ns();
        // Send -> GPU (150 ns) -> walk -> host (150 ns): GPU 0 acknowledges after 701 ns, GPU 1
        // (the last one asked) after 401 ns; the move waits for the later one.
        assert_eq!(wait, 701.0);
        assert_eq!(m.stats.inv_latency.mean_ns(), (701.0 + 401.0) / 2.0);
        assert!(ready >= busy + ns_to_ps(wait) + ns_to_ps(150.0));
        assert_eq!(m.dir.page(9).owner, 1);
    }

    /// A fabric with no transfer time to speak of (1e6 GB/s: a line in 0.064 ps, rounded to 0), so
    /// the latencies add up exactly: a read is the request to the owner (150 ns), its DRAM (100 ns)
    /// and the line back (150 ns); a write is the line to the owner and its DRAM write.
    #[test]
    fn a_remote_line_pays_the_peer_latency_each_way_and_the_owners_dram() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::FirstTouch, |c| c.multi.peer_bandwidth_gbps = 1e6);
        fault(&mut m, &mut gpus, 0, 1, false, 0);
        let t = 10_000_000;
        assert_eq!(m.remote_line(1, 0, 1, false, t, t), t + ns_to_ps(150.0 + 100.0 + 150.0));
        assert_eq!(m.remote_line(1, 0, 1, true, t, t), t + ns_to_ps(150.0 + 100.0));
        assert_eq!(m.stats.remote_lines, [0, 2], "counted for the requester");
    }

    /// A remote write carries its line from the writer to the owner (the writer's output port, the
    /// owner's input port): host data into the owner waits for a burst of writes (2,000 lines of
    /// 64 B, about 4 µs of a 32 GB/s port); into the writer it does not, as into an idle GPU.
    #[test]
    fn remote_writes_take_the_owners_input_port() {
        let first_touch = |into: usize| {
            let (mut m, mut gpus) = system(3, MigrationPolicy::FirstTouch);
            fault(&mut m, &mut gpus, 0, 1, false, 0);
            let t = 10_000_000;
            for _ in 0..2_000 {
                m.remote_line(1, 0, 1, true, t, t);
            }
            fault(&mut m, &mut gpus, into, 2, false, t)
        };
        let idle = first_touch(2);
        assert_eq!(first_touch(1), idle);
        assert!(first_touch(0) >= idle + 2_000_000, "{} against {idle}", first_touch(0));
    }

    /// A page move changes the page's host PTE: the host MMU's TLB drops its translation, so the
    /// next far fault on the page walks again.
    #[test]
    fn a_page_move_drops_the_host_tlbs_translation() {
        let (mut m, mut gpus) = system(2, MigrationPolicy::OnTouch);
        let vpn = 9;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        assert_eq!(m.host_walker.stats.walks, 1);
        // GPU 1's fault hits the host TLB (no walk) and moves the page.
        let busy = m.dir.page(vpn).busy;
        fault(&mut m, &mut gpus, 1, vpn, false, busy);
        assert_eq!(m.host_walker.stats.walks, 1);
        let busy = m.dir.page(vpn).busy;
        fault(&mut m, &mut gpus, 0, vpn, false, busy);
        assert_eq!(m.host_walker.stats.walks, 2);
    }

    /// IDYLL: a GPU whose walkers are busy parks its PTE invalidations in the IRMB; with room for one
    /// base, a second page of another base evicts the first, whose PTE is written at once (one walk).
    #[test]
    fn idyll_an_irmb_eviction_writes_its_pte_at_once() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::OnTouch, |c| {
            c.multi.idyll.lazy = true;
            (c.multi.idyll.irmb_bases, c.multi.idyll.irmb_offsets) = (1, 1);
        });
        let threads = Config::default().gmmu.walker.threads as u64;
        let g = &mut gpus[0];
        for i in 0..threads {
            g.xlat.gmmu.walk((100 + i) << 30, 1, 0, 0, &mut g.mem.dram);
        }
        let t = ns_to_ps(100.0);
        // Pages 512 and 1024: bases 1 and 2 (VPN >> 9).
        m.invalidation_arrives(0, 512, t, &mut gpus[0]);
        assert_eq!(m.stats.inv_walks, 0, "parked: no walker idle");
        m.invalidation_arrives(0, 1024, t, &mut gpus[0]);
        assert_eq!(m.stats.inv_walks, 1);
        let b = gpus[0].xlat.irmb.as_ref().unwrap();
        assert!(b.lookup(1024) && !b.lookup(512));
        assert_eq!(gpus[0].xlat.gmmu.stats.walks, threads + 1);
    }

    /// First-touch: GPU 1 maps remotely a page still on its way from the host to GPU 0. Its answer
    /// (its host walk done long before) is sent when the page is in GPU 0's memory, as GPU 0's.
    /// That wait is the migration term of its latency: with one host walker of 4 levels at 100 ns,
    /// no TLB or PW-cache, both faults reach the host at 150 ns; GPU 0 walks 150-550 ns, GPU 1 waits
    /// 400 ns and walks 550-950 ns; the page is in GPU 0's memory at `arrived`. The breakdown then
    /// adds up to both faults' latencies: links 4 × 150, queue 400, 8 levels read at 100 each, and
    /// the migration terms `arrived` - 550 and `arrived` - 950.
    #[test]
    fn a_remote_mapping_of_a_page_on_its_way_waits_for_it() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::FirstTouch, |c| {
            c.translation.levels = 4;
            let w = &mut c.multi.host_mmu.walker;
            (w.threads, w.level_latency_ns, w.pte_from_dram, w.pwc_entries) = (1, 100.0, false, 0);
            c.multi.host_mmu.tlb_entries = 0;
        });
        let r0 = m.fault(0, 9, false, 0, 0, &mut gpus).unwrap();
        let arrived = m.dir.page(9).ready;
        let r1 = m.fault(1, 9, false, 0, 0, &mut gpus).unwrap();
        assert_eq!((r0, r1), (arrived + default_host_latency(), arrived + default_host_latency()));
        assert_eq!(m.stats.remote_maps, 1);
        let ps = |ns: f64| ns_to_ps(ns) as u128;
        assert!(arrived > ns_to_ps(950.0), "the page is still on its way when GPU 1's walk ends");
        assert_eq!(m.stats.migration_ps, 2 * arrived as u128 - ps(550.0 + 950.0));
        let s = &m.stats;
        assert_eq!(s.link_ps + s.host_queue_ps + s.host_pwc_ps + ps(2.0 * 100.0) + s.migration_ps, (r0 + r1) as u128);
    }

    /// Access counters: GPU 2's notification reaches the driver while GPU 1's migration of the page
    /// is under way: its invalidations wait for that move to end (`Page::busy`), then take 150 ns.
    #[test]
    fn a_counter_migration_waits_for_the_pages_previous_move() {
        let (mut m, mut gpus) = system(3, MigrationPolicy::AccessCounter);
        let vpn = 3;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        let t = 10_000_000;
        m.migrate(vpn, 1, t, t, &mut gpus);
        deliver(&mut m, &mut gpus);
        let moved = m.dir.page(vpn).ready;
        assert!(moved > t + 2 * default_host_latency());
        m.migrate(vpn, 2, t, t, &mut gpus);
        let arrivals: Vec<Ps> = m.arrivals.iter().map(|&(at, _)| at).collect();
        assert_eq!(arrivals, [moved + default_host_latency(); 3]);
    }

    /// The far-fault latency breakdown, hand-checked: one host walker of 4 levels at 100 ns each, no
    /// host TLB or PW-cache. GPUs 0 and 1 fault on fresh pages at once: both reach the host at 150 ns,
    /// the first walks 150-550 ns, the second waits 400 ns and walks 550-950 ns.
    #[test]
    fn the_far_fault_latency_breakdown_adds_up() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::OnTouch, |c| {
            c.translation.levels = 4;
            let w = &mut c.multi.host_mmu.walker;
            (w.threads, w.level_latency_ns, w.pte_from_dram, w.pwc_entries) = (1, 100.0, false, 0);
            c.multi.host_mmu.tlb_entries = 0;
        });
        let r0 = m.fault(0, 1, false, 0, 0, &mut gpus).unwrap();
        let r1 = m.fault(1, 2, false, 0, 0, &mut gpus).unwrap();
        let ps = |ns: f64| ns_to_ps(ns) as u128;
        assert_eq!(m.stats.host_queue_ps, ps(400.0));
        // Each walk read 4 entries, 3 of which a PW-cache could have held: 300 ns each.
        assert_eq!(m.stats.host_pwc_ps, ps(600.0));
        // Two messages per fault: to the host and back.
        assert_eq!(m.stats.link_ps, ps(4.0 * 150.0));
        // Each page's move runs from its walk's end to its answer's send (150 ns before it arrives).
        assert_eq!(m.stats.migration_ps, (r0 - ns_to_ps(550.0 + 150.0) + r1 - ns_to_ps(950.0 + 150.0)) as u128);
    }

    fn run(extra: &[&str]) -> Metrics {
        simulate(&resolve(extra)).unwrap()
    }

    /// `multi.initial_placement = "distributed"` splits each buffer as MGPUSim's Driver.Distribute
    /// does: floor(pages / GPUs) pages per GPU in order and the remainder on the last GPU; a
    /// buffer with fewer pages than GPUs all on GPU 0. A page is resident and mapped on its GPU
    /// only, recorded in that GPU's Trans-FW PRT (no false negative), and its first touch by
    /// another GPU is a far fault that migrates it from its owner, not from the host.
    #[test]
    fn distributed_placement_splits_buffers_as_mgpusim_does() {
        let (mut m, mut gpus) = system_with(4, MigrationPolicy::OnTouch, |c| {
            c.translation.mode = TranslationMode::Gmmu;
            c.multi.transfw.prt = true;
            c.multi.transfw.prt_entries = 64;
        });
        let buf = |base: u64, pages: u64| crate::workload::Buffer { base, bytes: pages * 4096, page_bytes: 4096, managed: true };
        let bufs = [buf(0x100_0000, 10), buf(0x200_0000, 3)];
        for g in gpus.iter_mut() {
            for b in &bufs {
                g.xlat.space.map(b);
            }
        }
        m.distribute(&bufs, &mut gpus);
        let owners: Vec<u8> = (0x1000..0x100a).map(|v| m.dir.page(v).owner).collect();
        assert_eq!(owners, [0, 0, 1, 1, 2, 2, 3, 3, 3, 3]);
        let small: Vec<u8> = (0x2000..0x2003).map(|v| m.dir.page(v).owner).collect();
        assert_eq!(small, [0, 0, 0], "fewer pages than GPUs: all on the first");
        for v in 0x1000..0x100a {
            let o = m.dir.page(v).owner as usize;
            for (g, gpu) in gpus.iter_mut().enumerate() {
                assert_eq!(gpu.xlat.space.residency.is_resident(v), g == o, "page {v:#x} on GPU {g}");
            }
            let p = *m.dir.page(v);
            assert_eq!((p.copies, p.mapped, p.access), (1 << o, 1 << o, access_bit(o)));
            assert!(!gpus[o].xlat.prt.as_mut().unwrap().skip(v, true), "a placed page is in its GPU's PRT");
        }
        // GPU 1 touches GPU 3's page: a peer migration, nothing from the host.
        fault(&mut m, &mut gpus, 1, 0x1009, false, 0);
        assert_eq!((m.dir.page(0x1009).owner, m.stats.bytes_h2d, m.stats.bytes_p2p), (1, 0, PAGE));
    }

    /// A stream kernel whose greedy CTA shares match the distributed buffers' shares never
    /// far-faults; from host memory every page faults once.
    #[test]
    fn distributed_placement_removes_first_touch_faults_of_partitioned_kernels() {
        let set = ["multi.gpus=4", "workload.kind=stream", "workload.stream.elements=1048576", "workload.stream.threads=1048576"];
        let host = run(&set);
        let dist = run(&[&set[..], &["multi.initial_placement=\"distributed\""]].concat());
        assert_eq!(host.get("multi.far_faults").unwrap(), 3.0 * 2048.0, "3 arrays of 2^20 doubles, one fault per page");
        assert_eq!(dist.get("multi.far_faults").unwrap(), 0.0);
        assert_eq!(dist.get("multi.bytes_h2d").unwrap(), 0.0);
        assert!(dist.get("time.kernel_ns").unwrap() < host.get("time.kernel_ns").unwrap());
        assert_eq!(sans_wall(&dist), sans_wall(&run(&[&set[..], &["multi.initial_placement=\"distributed\""]].concat())));
    }

    #[test]
    fn distributed_placement_is_refused_with_multi_apps() {
        let o: Vec<String> =
            ["multi.gpus=2", "multi.apps=[\"stream\"]", "multi.initial_placement=\"distributed\""].iter().map(|s| s.to_string()).collect();
        let e = crate::config::resolve(&[], &o).unwrap_err().to_string();
        assert!(e.contains("multi.initial_placement") && e.contains("apps_resident"), "{e}");
    }

    fn sans_wall(m: &Metrics) -> Vec<(String, f64)> {
        m.0.iter().filter(|(k, _)| !k.starts_with("sim.") || k.as_str() == "sim.events").map(|(k, v)| (k.clone(), v.as_f64())).collect()
    }

    #[test]
    fn sixteen_gpus_complete_and_split_the_ctas() {
        let m = run(&["multi.gpus=16"]);
        let ctas: f64 = (0..16).map(|g| m.get(&format!("gpu{g}.ctas")).unwrap()).sum();
        assert_eq!(ctas, m.get("gpu0.ctas").unwrap() * 16.0, "equal shares");
        assert!(m.get("time.kernel_ns").unwrap() > 0.0);
        assert!(m.get("multi.far_faults").unwrap() > 0.0);
        let shared: f64 = (2..=16).map(|k| m.get(&format!("multi.sharing.pages_{k}")).unwrap()).sum();
        assert!(shared > 0.0, "halo rows are shared between neighbouring GPUs");
    }

    #[test]
    fn same_seed_same_metrics_for_1_4_16_gpus() {
        for n in ["1", "4", "16"] {
            let a = run(&[&format!("multi.gpus={n}"), "multi.model_one_gpu=true"]);
            let b = run(&[&format!("multi.gpus={n}"), "multi.model_one_gpu=true"]);
            assert_eq!(sans_wall(&a), sans_wall(&b), "{n} GPUs");
        }
    }

    #[test]
    fn round_robin_and_policies_run_in_both_modes() {
        for mode in ["gmmu", "iommu"] {
            for pol in ["on-touch", "first-touch", "access-counter", "read-replication"] {
                let m = run(&[
                    "multi.gpus=4",
                    &format!("translation.mode={mode}"),
                    &format!("multi.migration={pol}"),
                    "multi.cta_placement=round-robin",
                ]);
                assert!(m.get("time.kernel_ns").unwrap() > 0.0, "{mode} {pol}");
                if pol == "first-touch" {
                    assert_eq!(m.get("multi.migrations.p2p"), Some(0.0), "first-touch never moves a placed page");
                }
            }
        }
    }

    #[test]
    fn stall_windows_merge_and_count_only_new_time() {
        let mut w = vec![];
        assert_eq!(add_window(&mut w, 10, 20), 10);
        assert_eq!(add_window(&mut w, 30, 40), 10);
        assert_eq!(add_window(&mut w, 15, 25), 5); // overlaps the first
        assert_eq!(w, [(10, 25), (30, 40)]);
        assert_eq!(add_window(&mut w, 25, 30), 5); // touches both: one window
        assert_eq!(w, [(10, 40)]);
        assert_eq!(add_window(&mut w, 12, 18), 0); // inside
        assert_eq!(add_window(&mut w, 5, 5), 0); // empty
        assert_eq!(add_window(&mut w, 1, 3), 2); // before, kept sorted
        assert_eq!(w, [(1, 3), (10, 40)]);
    }

    #[test]
    fn a_gpu_handling_a_shootdown_issues_nothing() {
        // 256 x 128: on 128 x 128 no warp comes due inside a stall window since each page's
        // answer wakes its own waiters (`Gpu::replay_page`), so nothing shows the deferral.
        let base = ["multi.gpus=4", "multi.migration=on-touch", "workload.stencil2d.nx=256"];
        let free = run(&base);
        let stalled = run(&[&base[..], &["multi.shootdown_stalls_gpu=true"]].concat());
        assert_eq!(free.get("multi.shootdown_stall_ns"), Some(0.0));
        assert!(stalled.get("multi.shootdown_stall_ns").unwrap() > 0.0);
        assert!(stalled.get("sim.events").unwrap() > free.get("sim.events").unwrap(), "deferred warp events");
        // A GPU whose request is acknowledged at once (zero-latency oracle) never stalls.
        let zero = run(&[&base[..], &["multi.shootdown_stalls_gpu=true", "multi.oracle.zero_latency_invalidation=true"]].concat());
        assert_eq!(zero.get("multi.shootdown_stall_ns"), Some(0.0));
        // The stall check itself: a window covers [from, until), and passed windows go.
        let cfg = crate::config::resolve(&[], &["multi.gpus=2".into(), "multi.shootdown_stalls_gpu=true".into()]).unwrap();
        let mut m = Multi::new(&cfg, None);
        add_window(&mut m.stalls.as_mut().unwrap()[1], 100, 200);
        assert_eq!((m.stalled_until(1, 99), m.stalled_until(1, 100), m.stalled_until(1, 199)), (None, Some(200), Some(200)));
        assert_eq!((m.stalled_until(0, 150), m.stalled_until(1, 200)), (None, None));
        assert!(m.stalls.as_ref().unwrap()[1].is_empty());
    }

    #[test]
    fn remote_reads_hit_the_requesters_l1() {
        // First-touch keeps every page where it was first touched, so the rank vector's pages
        // first touched on other GPUs are read remotely; PageRank reads each of its entries for
        // many rows, so a CU re-reads those lines from its L1. (The stencil's halo lines are read
        // once per GPU and sweep, and left nothing to re-read once warps stopped running ahead.)
        let base = ["gpu.sms=4", "workload.kind=pagerank", "workload.pagerank.nodes=1024", "workload.pagerank.iterations=1"];
        let sim = |extra: &[&str]| {
            let o: Vec<String> =
                [&base[..], &["multi.gpus=4", "multi.migration=first-touch"], extra].concat().iter().map(|s| s.to_string()).collect();
            simulate(&crate::config::resolve(&[], &o).unwrap()).unwrap()
        };
        let cached = sim(&[]);
        let uncached = sim(&["multi.remote_reads_cached=false"]);
        let (rc, ru) = (cached.get("multi.remote_accesses").unwrap(), uncached.get("multi.remote_accesses").unwrap());
        let served = cached.get("multi.remote_reads_l1_served").unwrap();
        assert!(served > 0.0 && rc < ru, "cached {rc} + {served} served, uncached {ru}");
        assert_eq!(uncached.get("multi.remote_reads_l1_served"), Some(0.0));
        // Same placement here (every page placed by its first toucher in both runs), so every
        // remote line request either crossed or was served by the L1: 1,238 + 11,963 = 13,201.
        assert_eq!(cached.get("multi.migrations"), uncached.get("multi.migrations"));
        assert_eq!(rc + served, ru);
    }

    #[test]
    fn oracles_remove_their_costs() {
        let base = run(&["multi.gpus=4", "multi.migration=on-touch"]);
        let zero = run(&["multi.gpus=4", "multi.migration=on-touch", "multi.oracle.zero_latency_invalidation=true"]);
        assert!(base.get("multi.invalidations.latency_ns.mean").unwrap() > 0.0);
        assert_eq!(zero.get("multi.invalidations.latency_ns.mean"), Some(0.0));
        let nomig = run(&["multi.gpus=4", "multi.oracle.no_migration_latency=true"]);
        assert_eq!(nomig.get("multi.bytes_h2d"), Some(0.0));
        let inf = run(&["multi.gpus=4", "multi.oracle.infinite_walkers=true"]);
        assert_eq!(inf.get("host_mmu.walker.queue_wait_ns.mean"), Some(0.0));
        assert_eq!(inf.get("gpu0.walker.queue_wait_ns.mean"), Some(0.0));
    }

    /// A small stencil on 4 SMs per GPU with `extra` settings (the Trans-FW tests use it too).
    pub(in crate::multi) fn resolve(extra: &[&str]) -> Config {
        let mut o: Vec<String> = [
            "gpu.sms=4",
            "workload.kind=stencil2d",
            "workload.stencil2d.nx=128",
            "workload.stencil2d.ny=128",
            "workload.stencil2d.threads=16384",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        o.extend(extra.iter().map(|s| s.to_string()));
        crate::config::resolve(&[], &o).unwrap()
    }

    /// With `uvm.records`, every page move is a row of the migrations table: the rows add up to the
    /// `multi.migrations*`, `multi.replications` and `multi.bytes_*` counts, and keeping them changes no metric.
    #[test]
    fn every_page_move_is_a_migrations_row() {
        use crate::world::simulate_full;
        for pol in ["on-touch", "read-replication", "access-counter"] {
            let set = ["multi.gpus=4", &format!("multi.migration={pol}"), "multi.access_threshold=4"];
            let off = simulate_full(&resolve(&set)).unwrap();
            assert!(off.migrations.is_none(), "{pol}: no records, no table");
            let on = simulate_full(&resolve(&[&set[..], &["uvm.records=true"]].concat())).unwrap();
            assert_eq!(sans_wall(&on.metrics), sans_wall(&off.metrics), "{pol}: records change no metric");
            let m = |k: &str| on.metrics.get(k).unwrap_or_else(|| panic!("{k} missing")) as u64;
            let rows = on.migrations.unwrap();
            let of = |dir: &'static str| rows.iter().filter(move |r| r.direction == dir);
            let caused = |c: Cause| rows.iter().filter(|r| r.cause == c).count() as u64;
            assert_eq!(rows.len() as u64, m("multi.migrations") + m("multi.replications"), "{pol}");
            assert_eq!(of("h2d").count() as u64, m("multi.migrations.h2d"), "{pol}");
            assert_eq!(of("p2p").count() as u64, m("multi.migrations.p2p") + m("multi.replications"), "{pol}");
            assert_eq!(of("h2d").map(|r| r.bytes).sum::<u64>(), m("multi.bytes_h2d"), "{pol}");
            assert_eq!(of("p2p").map(|r| r.bytes).sum::<u64>(), m("multi.bytes_p2p"), "{pol}");
            assert!(m("multi.bytes_h2d") > 0 && m("multi.bytes_p2p") > 0, "{pol}: pages come from the host and from GPUs");
            assert_eq!(rows.len(), of("h2d").count() + of("p2p").count(), "{pol}: no d2h");
            assert!(rows.iter().all(|r| r.pages == 1 && r.bytes == PAGE && r.copy_engine == 0 && r.end_ns > r.start_ns));
            assert!(of("h2d").all(|r| r.src_gpu == -1 && r.gpu < 4 && r.cause == Cause::Demand), "{pol}");
            assert!(of("p2p").all(|r| (0..4).contains(&r.src_gpu) && r.src_gpu != r.gpu as i32 && r.gpu < 4), "{pol}");
            assert_eq!(caused(Cause::Replication), m("multi.replications"), "{pol}");
            assert_eq!(caused(Cause::AccessCounter), m("multi.migrations.counter"), "{pol}");
            assert_eq!(caused(Cause::Replication) > 0, pol == "read-replication", "{pol}: replicas only under read-replication");
            assert_eq!(caused(Cause::AccessCounter) > 0, pol == "access-counter", "{pol}");
            // Every GPU receives pages.
            assert!((0..4).all(|g| rows.iter().any(|r| r.gpu == g)), "{pol}");
        }
    }

    /// `uvm.migration_records_max` bounds the table: the first moves are kept, the rest counted.
    #[test]
    fn the_migrations_table_keeps_at_most_its_bound() {
        use crate::world::simulate_full;
        let set = ["multi.gpus=4", "multi.migration=on-touch", "uvm.records=true"];
        let all = simulate_full(&resolve(&set)).unwrap();
        let some = simulate_full(&resolve(&[&set[..], &["uvm.migration_records_max=10"]].concat())).unwrap();
        let (all_rows, rows) = (all.migrations.unwrap(), some.migrations.unwrap());
        assert!(all_rows.len() > 10);
        assert_eq!(all.metrics.get("uvm.migration_records_dropped"), Some(0.0));
        assert_eq!(rows.len(), 10);
        assert_eq!(some.metrics.get("uvm.migration_records_dropped"), Some((all_rows.len() - 10) as f64));
        assert!(rows.iter().zip(&all_rows).all(|(a, b)| a.first_page == b.first_page && a.start_ns == b.start_ns));
        assert_eq!(some.metrics.get("multi.migrations"), all.metrics.get("multi.migrations"));
    }

    /// The no-migration-latency oracle: the moves are still rows, taking no time and crossing no link.
    #[test]
    fn oracle_page_moves_are_rows_without_time_or_bytes() {
        let out =
            crate::world::simulate_full(&resolve(&["multi.gpus=4", "multi.oracle.no_migration_latency=true", "uvm.records=true"])).unwrap();
        let rows = out.migrations.unwrap();
        assert_eq!(rows.len() as f64, out.metrics.get("multi.migrations").unwrap());
        assert!(!rows.is_empty() && rows.iter().all(|r| r.start_ns == r.end_ns && r.bytes == 0 && r.pages == 1));
        assert_eq!(out.metrics.get("multi.bytes_h2d"), Some(0.0));
    }

    #[test]
    fn one_gpu_without_the_model_has_no_multi_metrics() {
        let m = run(&[]);
        assert!(m.get("multi.gpus").is_none() && m.get("gpu1.ctas").is_none());
        // Settings of the multi-GPU model do not touch a single-GPU run (so the user's are refused there).
        let mut c = resolve(&[]);
        (c.multi.cta_placement, c.multi.migration, c.multi.peer_latency_ns) = (CtaPlacement::RoundRobin, MigrationPolicy::FirstTouch, 1.0);
        assert_eq!(sans_wall(&m), sans_wall(&simulate(&c).unwrap()));
        let e = crate::config::resolve(&[], &["multi.migration=first-touch".into()]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("multi.migration"), "{e}");
    }

    /// Access counters count each requesting GPU's remote accesses apart, and a move restarts every
    /// GPU's count. Threshold 2: GPUs 1 and 2 read GPU 0's page once each (1 and 1: no migration,
    /// though the page had 2 remote accesses); GPU 1's second read reaches it. After the page moved to
    /// GPU 1, GPU 2's one earlier read is forgotten: one more read (1) does not reach 2 either.
    #[test]
    fn access_counters_count_each_requester_apart_and_restart_when_the_page_moves() {
        let (mut m, mut gpus) = system_with(3, MigrationPolicy::AccessCounter, |c| c.multi.access_threshold = 2);
        fault(&mut m, &mut gpus, 0, 5, false, 0);
        let t = 10_000_000;
        m.remote_line(1, 0, 5, false, t, t);
        m.remote_line(2, 0, 5, false, t, t);
        assert!(m.requests.is_empty(), "one access each: below the threshold");
        m.remote_line(1, 0, 5, false, t + 1, t);
        assert_eq!(std::mem::take(&mut m.requests), [(5, 1, t + 1)]);
        m.migrate(5, 1, t + 1, t + 1, &mut gpus);
        deliver(&mut m, &mut gpus);
        assert_eq!(m.dir.page(5).owner, 1);
        let t2 = 20_000_000;
        m.remote_line(2, 1, 5, false, t2, t2);
        assert!(m.requests.is_empty(), "GPU 2's count restarted with the move");
        m.remote_line(2, 1, 5, false, t2 + 1, t2);
        assert_eq!(m.requests, [(5, 2, t2 + 1)]);
    }

    /// A page nobody has faulted on is in host memory: a GPU that has a translation for it reads it
    /// where it is, as its own (no GPU owns it, so no remote access).
    #[test]
    fn a_page_in_host_memory_is_located_as_local() {
        let (mut m, _) = system(2, MigrationPolicy::FirstTouch);
        assert_eq!(m.dir.page(42).owner, HOST);
        assert_eq!(m.locate(1, 42, false, 5_000), Locate::Local(5_000));
        assert_eq!(m.locate(1, 42, true, 5_000), Locate::Local(5_000));
    }

    /// Invalidation walks' share of the GMMU statistics and the demand breakdown the export derives
    /// from it, by hand: one walker thread per GPU, 4 levels of 100 ns, no PW-cache (every walk reads
    /// 4 entries, 3 of which a PW-cache could have held). GPU 1 takes GPU 0's page: its fault reaches
    /// the host at +150 ns, the driver sends at once, both requests arrive at +300 ns. GPU 0's walker
    /// is busy with a demand walk from +100 to +500 ns: its invalidation walk waits 200 ns; GPU 1's
    /// starts at once. Then one L2-TLB miss of GPU 1 walks (no wait). Demand walks: the busy one and
    /// the miss's, 3 extra reads each, so 600 ns of PW-cache misses per L2 miss (of 12 extra reads in
    /// all, 6 are the invalidations'); their queue wait is 0 (of 200 ns in all).
    #[test]
    fn invalidation_walks_keep_their_queue_wait_and_reads_out_of_the_demand_breakdown() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::OnTouch, |c| {
            c.translation.levels = 4;
            let w = &mut c.gmmu.walker;
            (w.threads, w.level_latency_ns, w.pte_from_dram, w.pwc_entries) = (1, 100.0, false, 0);
        });
        let base = 1u64 << 30;
        map_on_every_gpu(&mut gpus, base);
        let vpn = base >> 12;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        let t = m.dir.page(vpn).busy;
        let g = &mut gpus[0];
        g.xlat.gmmu.walk(100 << 30, 1, t + ns_to_ps(100.0), t, &mut g.mem.dram);
        m.fault(1, vpn, false, t, t, &mut gpus).unwrap();
        assert_eq!(m.arrivals.iter().map(|&(at, _)| at).collect::<Vec<_>>(), [t + ns_to_ps(300.0); 2]);
        assert_eq!((m.stats.inv_walks, m.stats.inv_queue_ps, m.stats.inv_reads), (2, ns_to_ps(200.0) as u128, 6));
        deliver(&mut m, &mut gpus);
        let later = t + ns_to_ps(100_000.0);
        let g = &mut gpus[1];
        assert!(matches!(g.xlat.translate(0, base + 4096, later, later, &mut g.mem.dram), Xlat::Fault(_)));
        let mut x = Metrics::default();
        m.export(&mut x, &gpus, later);
        assert_eq!(x.get("multi.l2miss.gmmu_pwc_miss_ns"), Some(600.0));
        assert_eq!(x.get("multi.l2miss.gmmu_queue_ns"), Some(0.0));
    }

    /// Read replication: replicas on GPU 0 (the owner) and GPU 1; GPU 2's store takes the page. Until
    /// GPU 1's request arrives its read-only mapping names its own replica: a read is local there,
    /// not a remote read of GPU 0's copy.
    #[test]
    fn a_replica_holders_stale_mapping_names_its_own_copy() {
        let (mut m, mut gpus) = system(3, MigrationPolicy::ReadReplication);
        let vpn = 21;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        fault(&mut m, &mut gpus, 1, vpn, false, 1_000_000);
        m.fault(2, vpn, true, 2_000_000, 2_000_000, &mut gpus).unwrap();
        let until = m.arrivals[0].0;
        assert_eq!(m.dir.stale(vpn, 1), Some(Stale { until, at: 1, read_only: true }));
        assert_eq!(m.locate(1, vpn, false, until), Locate::Local(until));
    }

    /// A page move changes the page's mapping for the IOMMU too (ATS mode): its TLB drops the
    /// translation that GPU 0's ATS request left there.
    #[test]
    fn a_page_move_drops_the_iommu_tlbs_translation() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::OnTouch, |c| c.translation.mode = TranslationMode::Iommu);
        let base = 1u64 << 30;
        map_on_every_gpu(&mut gpus, base);
        // One shared IOMMU, lent to a GPU while it translates (as the world does).
        m.iommu = gpus[0].xlat.iommu.take();
        gpus[1].xlat.iommu = None;
        let vpn = base >> 12;
        fault(&mut m, &mut gpus, 0, vpn, false, 0);
        let t = m.dir.page(vpn).busy;
        let g = &mut gpus[0];
        g.xlat.iommu = m.iommu.take();
        assert!(matches!(g.xlat.translate(0, base, t, t, &mut g.mem.dram), Xlat::Ready(..)));
        m.iommu = g.xlat.iommu.take();
        assert!(m.iommu.clone().unwrap().invalidate_page(vpn), "the IOMMU TLB holds the page");
        fault(&mut m, &mut gpus, 1, vpn, false, t);
        assert!(!m.iommu.as_mut().unwrap().invalidate_page(vpn), "the move dropped it");
    }

    /// Least-TLB: an invalidation request reaching GPU 1 removes the page from the IOMMU's record of
    /// what GPU 1's L2 TLB holds (the shootdown dropped it there).
    #[test]
    fn an_invalidation_drops_the_page_from_least_tlbs_record_of_the_l2() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::OnTouch, |c| {
            c.translation.mode = TranslationMode::Iommu;
            c.multi.least_tlb.enabled = true;
        });
        m.iommu = gpus[0].xlat.iommu.take();
        let mut victims = Tlb::with(64, 16, 0, 8);
        let lt = m.iommu.as_mut().unwrap().least.as_mut().unwrap();
        lt.l2_filled(1, 9, None, 0, &mut victims);
        assert!(lt.holds(1, 9));
        m.invalidation_arrives(1, 9, 1_000, &mut gpus[1]);
        assert!(!m.iommu.as_ref().unwrap().least.as_ref().unwrap().holds(1, 9));
    }

    /// An invalidation request is necessary at a GPU the driver counts as mapping the page even
    /// before that GPU's answer has set its PTE: first-touch, GPU 1's remote mapping of GPU 0's page
    /// is on its way when the driver moves the page to GPU 2. GPUs 0 (a PTE) and 1 (mapped) need
    /// their requests; GPU 2 had nothing.
    #[test]
    fn a_request_to_a_gpu_whose_answer_is_on_its_way_is_necessary() {
        let (mut m, mut gpus) = system(3, MigrationPolicy::FirstTouch);
        fault(&mut m, &mut gpus, 0, 5, false, 0);
        m.fault(1, 5, false, 1_000_000, 1_000_000, &mut gpus).unwrap();
        m.migrate(5, 2, 1_000_000, 1_000_000, &mut gpus);
        deliver(&mut m, &mut gpus);
        assert_eq!((m.stats.inv_sent, m.stats.inv_necessary, m.stats.inv_unnecessary), (3, 2, 1));
    }

    /// Read replication: GPU 1 holds a replica of page 5, and a warp of it sleeps on a store to it
    /// (a protection fault on a mapped page) raised at T + 2 ns. GPU 2's store fault at T + 1 ns
    /// invalidates every other copy; its request reaches GPU 1 at T + 1 + 150 + 150 ns, when GPU 1's
    /// answer (the page moving there) is on its way. The request takes the PTE but leaves the warp
    /// asleep for that answer: the replay of page 9's answer (GPU 1's first touch at T), in
    /// between, wakes nobody. Requeued, the warp would re-execute the store at that replay and
    /// fault again on a page whose fault the host is still servicing.
    #[test]
    fn an_invalidation_leaves_asleep_the_warps_of_a_gpu_whose_answer_is_on_its_way() {
        let (mut m, mut gpus) = system(3, MigrationPolicy::ReadReplication);
        fault(&mut m, &mut gpus, 0, 5, false, 0);
        fault(&mut m, &mut gpus, 1, 5, false, 1_000_000);
        let t: Ps = 2_000_000;
        let ready9 = m.fault(1, 9, false, t, t, &mut gpus).unwrap();
        m.fault(2, 5, true, t + 1000, t, &mut gpus).unwrap();
        gpus[1].put_warp_to_sleep(&[5]);
        let ready5 = m.fault(1, 5, true, t + 2000, t, &mut gpus).unwrap();
        // GPU 2's broadcast, then GPU 1's own (sent once GPU 2 has the page), in time order.
        let mut arrivals = std::mem::take(&mut m.arrivals);
        arrivals.sort_by_key(|&(at, _)| at);
        let first = arrivals.iter().find(|&&(_, x)| x == (5 << 5) | 1).unwrap().0;
        assert_eq!(first, t + 1000 + ns_to_ps(300.0));
        assert!(first < ready9 && ready9 < ready5, "request at {first}, page 9's answer at {ready9}, page 5's at {ready5}");
        let deliver_all = |m: &mut Multi, gpus: &mut [Gpu], list: Vec<(Ps, u64)>| {
            for (at, x) in list {
                m.invalidation_arrives((x & 31) as usize, x >> 5, at, &mut gpus[(x & 31) as usize]);
            }
        };
        let (before, after): (Vec<_>, Vec<_>) = arrivals.into_iter().partition(|&(at, _)| at < ready9);
        deliver_all(&mut m, &mut gpus, before);
        assert!(!gpus[1].xlat.space.residency.is_resident(5), "GPU 2's request took GPU 1's PTE");
        let mut q = crate::sim::EventQueue::new();
        m.page_ready(1, 9, &mut gpus[1]);
        gpus[1].replay_page(9, ready9, &mut q);
        assert_eq!(q.len(), 0, "page 9's answer wakes no warp waiting for page 5");
        deliver_all(&mut m, &mut gpus, after);
        // Its answer maps the page and wakes the warp.
        m.page_ready(1, 5, &mut gpus[1]);
        gpus[1].replay_page(5, ready5, &mut q);
        assert_eq!(q.len(), 1);
        assert!(gpus[1].xlat.space.residency.is_resident(5));
    }

    /// `uvm.migration_records_max` bounds the model's own rows: with a bound of 1, the second page
    /// move is counted, not kept.
    #[test]
    fn the_model_keeps_at_most_migration_records_max_rows() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::OnTouch, |c| {
            c.uvm.records = true;
            c.uvm.migration_records_max = 1;
        });
        fault(&mut m, &mut gpus, 0, 1, false, 0);
        fault(&mut m, &mut gpus, 0, 2, false, 1_000_000);
        assert_eq!((m.migrations.as_ref().map(|r| r.len()), m.migration_records_dropped), (Some(1), 1));
    }

    /// Read replication: a read fault of a GPU that holds a replica (say its fault crossed its
    /// answer) maps its own copy back: the other replicas stay, nothing is invalidated.
    #[test]
    fn a_replica_holders_read_fault_keeps_the_other_replicas() {
        let (mut m, mut gpus) = system(2, MigrationPolicy::ReadReplication);
        fault(&mut m, &mut gpus, 0, 5, false, 0);
        fault(&mut m, &mut gpus, 1, 5, false, 1_000_000);
        m.fault(1, 5, false, 2_000_000, 2_000_000, &mut gpus).unwrap();
        assert_eq!((m.stats.inv_sent, m.stats.write_invalidations, m.dir.page(5).copies), (0, 0, 0b11));
    }

    /// Read replication copies a page still on its way from the host to its first toucher only when
    /// it is there. One host walker of 4 levels at 100 ns, no TLB or PW-cache: both faults reach the
    /// host at 150 ns, GPU 0's walk ends at 550 ns, GPU 1's at 950 ns; the page reaches GPU 0 at
    /// `arrived` (later). Then the replica crosses GPU 0's idle switch port (4,096 B at 32 GB/s:
    /// 128 ns) and the peer link (150 ns), and the answer returns in 150 ns.
    #[test]
    fn a_replica_of_a_page_on_its_way_waits_for_it() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::ReadReplication, |c| {
            c.translation.levels = 4;
            let w = &mut c.multi.host_mmu.walker;
            (w.threads, w.level_latency_ns, w.pte_from_dram, w.pwc_entries) = (1, 100.0, false, 0);
            c.multi.host_mmu.tlb_entries = 0;
        });
        m.fault(0, 9, false, 0, 0, &mut gpus).unwrap();
        let arrived = m.dir.page(9).ready;
        assert!(arrived > ns_to_ps(950.0), "the page is still on its way when GPU 1's walk ends");
        let r1 = m.fault(1, 9, false, 0, 0, &mut gpus).unwrap();
        assert_eq!(m.stats.replications, 1);
        assert_eq!(r1, arrived + ns_to_ps(128.0 + 150.0 + 150.0));
    }

    /// IDYLL's directory with access-counter batches: GPU 1's notifications for pages 1 and 2 reach
    /// the host 1 ns apart; page 2's is fetched when page 1's migration is done (`done`). The driver
    /// reads page 2's access bits with a host walk from that fetch (a host-TLB hit, 10 ns), and sends
    /// its invalidation only then: it reaches GPU 0 at `done` + 10 + 150 ns.
    #[test]
    fn a_batched_notifications_host_walk_starts_at_its_fetch() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::AccessCounter, |c| c.multi.idyll.directory = true);
        fault(&mut m, &mut gpus, 0, 1, false, 0);
        fault(&mut m, &mut gpus, 0, 2, false, 1_000_000);
        let t = 10_000_000;
        m.migrate(1, 1, t, t, &mut gpus);
        let done = m.dir.page(1).ready;
        m.arrivals.clear();
        m.migrate(2, 1, t + 1_000, t, &mut gpus);
        assert_eq!(m.arrivals, [(done + ns_to_ps(10.0 + 150.0), 2 << 5)]);
    }

    /// `Multi::export` by hand: local accesses are the GPUs' line accesses less the remote ones
    /// (150 - 15), and each walk-depth histogram's short fraction counts walks of 1 and 2 reads. GMMU
    /// walks by entries read (index 1..=4), both GPUs: [3, 3, 0, 6]; invalidation walks [0, 1, 0, 2];
    /// demand walks the difference, [3, 2, 0, 4]: short (3 + 2) / 9, invalidation (0 + 1) / 3.
    #[test]
    fn export_splits_accesses_and_walk_depths_by_hand() {
        let (mut m, mut gpus) = system_with(2, MigrationPolicy::OnTouch, |c| c.translation.levels = 4);
        gpus[0].xlat.gmmu.stats.reads_hist = [0, 3, 2, 0, 5, 0, 0, 0];
        gpus[1].xlat.gmmu.stats.reads_hist = [0, 0, 1, 0, 1, 0, 0, 0];
        m.stats.inv_reads_hist = [0, 0, 1, 0, 2, 0, 0, 0];
        (gpus[0].stats.line_accesses, gpus[1].stats.line_accesses) = (100, 50);
        m.stats.remote_lines = vec![10, 5];
        let mut x = Metrics::default();
        m.export(&mut x, &gpus, 1);
        let get = |k: &str| x.get(k).unwrap_or_else(|| panic!("{k} missing"));
        assert_eq!((get("multi.local_accesses"), get("multi.remote_accesses"), get("multi.remote_fraction")), (135.0, 15.0, 0.1));
        let demand: Vec<f64> = (1..=4).map(|k| get(&format!("multi.gmmu.demand_walks.reads.{k}"))).collect();
        assert_eq!(demand, [3.0, 2.0, 0.0, 4.0]);
        assert_eq!(get("multi.gmmu.demand_walks.short_fraction"), 5.0 / 9.0);
        assert_eq!(get("multi.gmmu.inv_walks.short_fraction"), 1.0 / 3.0);
    }
}
