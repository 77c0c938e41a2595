//! Keys nothing reads in a mode: the single-GPU UVM driver's fault-batch options in IOMMU mode, the
//! whole single-GPU driver in the multi-GPU model, the multi-GPU model's options on one GPU, one
//! translation mode's hardware in the other, and each model's progress watchdog in the others. A run
//! that set one looked as if it had applied it (the metrics did not move), so the resolver refuses
//! such a key when the user set it (a config file, `--set`, Python's `set`); a preset may carry them
//! (it describes its machine, driver included).
//!
//! The table was found by reading where each key is read and checked by runs with each key changed
//! (tests/modes.rs: `unread_keys_change_no_metric`, `multi_and_translation_keys_change_no_metric`): in
//! IOMMU mode far faults go to the page-request path ([`crate::uvm::ppr`]), and the driver runs only
//! for `cudaMemPrefetchAsync`, access-counter migration, host accesses and hints, which read its
//! per-block costs, GPU memory, eviction and thrashing settings but not its fault buffer, batches,
//! replays or prefetcher; the multi-GPU model builds no driver allocation at all (`World::new`), so
//! only the GPU-side fault options (`uvm.fault_mode`, `uvm.stall_warp_on_fault`) and the record
//! tables (`uvm.records`, `uvm.migration_records_max`) are read there. On one GPU `World::new` builds
//! no `Multi`: of `[multi]` only the oracles applied to the GPU's own walkers and TLBs are read
//! ([`crate::multi::effective`], [`crate::multi::unlimit_walkers`]). The IOMMU is built only in IOMMU
//! mode (`Translator::new`), its page-request path and shootdowns run only on one APU; in IOMMU mode
//! a TLB miss never reaches the GMMU's walkers, and in the multi-GPU model neither do PTE
//! invalidations (the GPUs have no page table of their own) nor does the host translate a fault
//! again (`Multi::host_translate`).

use super::{Config, TranslationMode};

/// A configuration's mode: which model runs and how GPU TLB misses are translated. Every
/// configuration is in exactly one ([`Config::mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One GPU on the single-GPU model, `translation.mode = "gmmu"`.
    Gmmu,
    /// One GPU on the single-GPU model, `translation.mode = "iommu"`.
    Iommu,
    /// The multi-GPU model (`multi.gpus` > 1 or `multi.model_one_gpu`), `translation.mode = "gmmu"`.
    MultiGmmu,
    /// The multi-GPU model, `translation.mode = "iommu"` (ATS).
    MultiIommu,
}

const ONE_GPU: &[Mode] = &[Mode::Gmmu, Mode::Iommu];
const MULTI: &[Mode] = &[Mode::MultiGmmu, Mode::MultiIommu];
const GMMU: &[Mode] = &[Mode::Gmmu, Mode::MultiGmmu];
const IOMMU: &[Mode] = &[Mode::Iommu, Mode::MultiIommu];

/// Options of the driver's fault service: the fault buffer, batches, replays, the polled and
/// fixed-latency models' fault latency, the fault prefetcher, preemptive unmapping, the faults table,
/// and the watchdog that counts its batches.
const FAULT_BATCHES: &[&str] = &[
    "uvm.fault_buffer_entries",
    "uvm.batch_size",
    "uvm.replay_policy",
    "uvm.max_batches_per_service",
    "uvm.max_throttle_per_service",
    "uvm.replay_update_put_ratio",
    "uvm.utlb_fault_limit",
    "uvm.utlb_merge_faults",
    "uvm.fault_latency_us",
    "uvm.merge_far_faults",
    "uvm.merged_faults_take_mshr",
    "uvm.merge_prefetched_faults",
    "uvm.land_per_copy",
    "uvm.interrupt_us",
    "uvm.batch_us",
    "uvm.fetch_entry_us",
    "uvm.per_fault_us",
    "uvm.replay_us",
    "uvm.per_duplicate_us",
    "uvm.sm_fault_interval_ns",
    "uvm.replay_latency_ns",
    "uvm.fetch_after_replay_wait",
    "uvm.fault_records",
    "uvm.fault_records_max",
    "uvm.prefetch.",
    "uvm.preunmap.",
    "sim.watchdog_batches",
];

/// The rest of the single-GPU driver: what its migrations (`cudaMemPrefetchAsync`, access-counter
/// migration), host accesses and hints read, and the GPU memory it manages.
const DRIVER: &[&str] = &[
    "uvm.cost_model",
    "uvm.per_block_us",
    "uvm.first_touch_us",
    "uvm.first_touch_tail",
    "uvm.unmap_us",
    "uvm.unmap_per_page_us",
    "uvm.unmap_per_thread_us",
    "uvm.pma_alloc_us",
    "uvm.pma_chunk_blocks",
    "uvm.zero_us_per_page",
    "uvm.map_us",
    "uvm.tracker_us",
    "uvm.async_copies",
    "uvm.gpu_memory_bytes",
    "uvm.oversubscription",
    "uvm.cpu_fault_us",
    "uvm.baselines",
    "uvm.eviction.",
    "uvm.thrashing.",
    "uvm.advise.",
    "uvm.access_counters.",
    "workload.host_threads",
];

/// The keys of [`DRIVER`] that its migrations alone read: all but these, which the host's CPU faults, the
/// baselines, the hints and the access counters read, or which other checks refuse in IOMMU mode. With
/// `iommu.shared_memory` (an APU in IOMMU mode) nothing migrates, since prefetches move nothing and host accesses
/// use the page-request path's pages in place.
const NOT_MIGRATION: &[&str] = &["uvm.oversubscription", "uvm.cpu_fault_us", "uvm.baselines", "uvm.advise.", "uvm.access_counters."];

/// Does `key` belong to the driver's migrations (unread on a shared-memory APU)?
fn migration_key(key: &str) -> bool {
    DRIVER.iter().filter(|e| !NOT_MIGRATION.contains(e)).any(|e| covers(e, key))
}

const SHARED_MEMORY_WHY: &str = "the GPU shares the host's one memory, so the UVM driver migrates nothing there: a \
    prefetch moves nothing and host accesses use the pages the page-request path mapped where they are (far faults \
    go to [iommu.ppr]); it needs iommu.shared_memory = false (a GPU with memory of its own) or translation.mode = \"gmmu\"";

/// `[multi]` but what one GPU reads: `multi.gpus` and `multi.model_one_gpu` choose the model, and the
/// oracles `infinite_pwc`, `infinite_walkers` and (IOMMU mode) `infinite_iommu_tlb` change the GPU's own
/// walkers and TLBs.
const MULTI_MODEL: &[&str] = &[
    "multi.cta_placement",
    "multi.migration",
    "multi.access_threshold",
    "multi.peer_topology",
    "multi.gpus_per_switch",
    "multi.switch_hop_latency_ns",
    "multi.peer_latency_ns",
    "multi.peer_bandwidth_gbps",
    "multi.shootdown_stalls_gpu",
    "multi.remote_reads_cached",
    "multi.host_uplink_shared",
    "multi.host_dma_uses_peer_port",
    "multi.host_latency_ns",
    "multi.fault_batch_size",
    "multi.counter_batch_size",
    "multi.host_mmu.",
    "multi.oracle.zero_latency_invalidation",
    "multi.oracle.no_migration_latency",
    "multi.least_tlb.",
    "multi.apps",
    "multi.apps_first_gpu",
    "multi.apps_resident",
    "multi.initial_placement",
    "multi.idyll.",
    "multi.transfw.",
];

/// One row of the table: the keys (or sections ending in `.`), the modes that do not read them, where
/// that is (in the refusal; then in the reference, shorter) and why.
struct Unread {
    keys: &'static [&'static str],
    modes: &'static [Mode],
    place: &'static str,
    short: &'static str,
    why: &'static str,
}

const MULTI_PLACE: &str = "the multi-GPU model (multi.gpus > 1 or multi.model_one_gpu = true)";

/// The first row that covers a key in a configuration's mode gives its refusal; the reference lists
/// every row's place.
const UNREAD: &[Unread] = &[
    Unread {
        keys: FAULT_BATCHES,
        modes: &[Mode::Iommu],
        place: "translation.mode = \"iommu\"",
        short: "translation.mode = \"iommu\"",
        why: "far faults go to the IOMMU's page-request path ([iommu.ppr]), not to the UVM driver's fault buffer and \
              batches, whose options these are (their counterparts there: iommu.ppr.*; the driver's prefetcher: \
              iommu.ppr.pages_log2)",
    },
    Unread {
        keys: FAULT_BATCHES,
        modes: MULTI,
        place: MULTI_PLACE,
        short: "the multi-GPU model",
        why: "far faults go to the multi-GPU model's host (multi.migration, multi.host_*), not to the single-GPU UVM \
              driver's fault buffer and batches, whose options these are (the multi-GPU model's watchdog: sim.watchdog_answers)",
    },
    Unread {
        keys: DRIVER,
        modes: MULTI,
        place: MULTI_PLACE,
        short: "the multi-GPU model",
        why: "the single-GPU UVM driver does not run there: the model places every page itself (multi.migration, \
              multi.access_threshold), from host memory, with no GPU memory limit, hints, thrashing control or host \
              accesses; it needs multi.gpus = 1 and multi.model_one_gpu = false",
    },
    Unread {
        keys: MULTI_MODEL,
        modes: ONE_GPU,
        place: "the single-GPU model (multi.gpus = 1 and multi.model_one_gpu = false)",
        short: "the single-GPU model",
        why: "it is an option of the multi-GPU model (its host's page placement and invalidations, the peer fabric, the \
              host MMU, multi-application mode, Least-TLB, IDYLL, Trans-FW), which does not run there: one GPU's far \
              faults go to the UVM driver ([uvm]) or, in translation.mode = \"iommu\", to the page-request path \
              ([iommu.ppr]). To use it set multi.gpus > 1 or multi.model_one_gpu = true (one GPU reads only the \
              oracles infinite_pwc, infinite_walkers and, in IOMMU mode, infinite_iommu_tlb)",
    },
    Unread {
        keys: &["multi.oracle.infinite_iommu_tlb"],
        modes: &[Mode::Gmmu],
        place: "translation.mode = \"gmmu\" on one GPU",
        short: "translation.mode = \"gmmu\" on one GPU",
        why: "it enlarges the IOMMU's TLB (translation.mode = \"iommu\") and the multi-GPU model's host-MMU TLB, and \
              one GPU walking its own page table has neither (its GMMU's oracles: multi.oracle.infinite_pwc and \
              infinite_walkers)",
    },
    // Before the GMMU row: in the multi-GPU model in GMMU mode, the first thing these need is one GPU.
    Unread {
        keys: &["iommu.ppr.", "iommu.shootdown.", "iommu.shared_memory"],
        modes: MULTI,
        place: MULTI_PLACE,
        short: "the multi-GPU model",
        why: "far faults go to the multi-GPU model's host (multi.migration, multi.host_latency_ns), not to the APU's \
              page-request path, TLB shootdowns (the shootdown workload) and shared memory (prefetches that move nothing) \
              model one APU; they need one APU: \
              multi.gpus = 1 and multi.model_one_gpu = false, with translation.mode = \"iommu\"",
    },
    Unread {
        keys: &["iommu.", "multi.least_tlb."],
        modes: GMMU,
        place: "translation.mode = \"gmmu\"",
        short: "translation.mode = \"gmmu\"",
        why: "the GPUs walk their own page tables ([gmmu.walker]; the multi-GPU model's host walks for their far faults, \
              [multi.host_mmu]), so there is no IOMMU: neither its TLB, walkers and ATS link, nor its page-request \
              path and shootdowns, nor Least-TLB (the IOMMU TLB as a victim cache) run; they need \
              translation.mode = \"iommu\"",
    },
    Unread {
        keys: &["gmmu."],
        modes: IOMMU,
        place: "translation.mode = \"iommu\"",
        short: "translation.mode = \"iommu\"",
        why: "GPU TLB misses go over ATS to the IOMMU, whose walkers are [iommu.walker]: the GPU's own GMMU walks \
              nothing (in the multi-GPU model not even to invalidate a PTE: the GPUs have no page table of their \
              own); they need translation.mode = \"gmmu\"",
    },
    Unread {
        keys: &["multi.shootdown_stalls_gpu"],
        modes: &[Mode::MultiIommu],
        place: "the multi-GPU model with translation.mode = \"iommu\"",
        short: "the multi-GPU model with translation.mode = \"iommu\"",
        why: "a GPU's stall runs from an invalidation request's arrival to its acknowledgement, and in ATS mode the GPU \
              acknowledges on arrival: it has no page table whose PTE it walks to invalidate, and its TLB shootdown \
              takes no time in the model, so there is no window to stall in; it needs translation.mode = \"gmmu\" \
              (and does nothing with multi.idyll.lazy = true, which acknowledges on arrival too)",
    },
    Unread {
        keys: &["sim.watchdog_answers"],
        modes: ONE_GPU,
        place: "the single-GPU model (multi.gpus = 1 and multi.model_one_gpu = false)",
        short: "the single-GPU model",
        why: "it counts the multi-GPU model's far-fault answers, and one GPU's far faults are serviced in the UVM \
              driver's batches (their watchdog: sim.watchdog_batches) or, in translation.mode = \"iommu\", by the \
              page-request path",
    },
    Unread {
        keys: &["multi.host_mmu.", "multi.idyll.", "multi.transfw."],
        modes: &[Mode::MultiIommu],
        place: "the multi-GPU model with translation.mode = \"iommu\"",
        short: "the multi-GPU model with translation.mode = \"iommu\"",
        why: "a far fault there comes from the shared IOMMU's failed walk, so the host does not translate it again \
              (no host-MMU TLB or walk: multi.host_mmu), and the GPUs have no page table of their own whose PTE \
              invalidations IDYLL filters or defers (multi.idyll) or whose walks Trans-FW skips or forwards \
              (multi.transfw); they need translation.mode = \"gmmu\"",
    },
];

/// Does `entry` (a key, or a section ending in `.`) cover `key`? (A section the user set whole is
/// checked by its keys: the resolver records each of them.)
fn covers(entry: &str, key: &str) -> bool {
    match entry.strip_suffix('.') {
        Some(section) => key == section || key.starts_with(entry),
        None => key == entry,
    }
}

impl Config {
    /// This configuration's mode.
    pub fn mode(&self) -> Mode {
        match (self.multi.active(), self.translation.mode) {
            (false, TranslationMode::Gmmu) => Mode::Gmmu,
            (false, TranslationMode::Iommu) => Mode::Iommu,
            (true, TranslationMode::Gmmu) => Mode::MultiGmmu,
            (true, TranslationMode::Iommu) => Mode::MultiIommu,
        }
    }

    /// Why `key` (dotted, as set) is not read in this configuration's mode, if it is not: the message
    /// the resolver refuses a user's setting of it with.
    pub fn unread(&self, key: &str) -> Option<String> {
        // The cycle-stepped MGPUSim engine has its own fixed configuration: only the trace and the seed are read.
        if self.workload.kind == crate::workload::WorkloadKind::Trace
            && self.workload.trace.engine == "mgpusim-r9nano"
            && !(matches!(key, "workload" | "workload.kind" | "workload.trace" | "sim.seed") || key.starts_with("workload.trace."))
        {
            return Some(
                "is not read with workload.trace.engine = \"mgpusim-r9nano\": that engine replays MGPUSim's R9 Nano \
                 memory path with MGPUSim's own parameters (crates/uvmsim/src/cycle)"
                    .to_string(),
            );
        }
        let mode = self.mode();
        UNREAD
            .iter()
            .find(|r| r.modes.contains(&mode) && r.keys.iter().any(|e| covers(e, key)))
            .map(|r| format!("is not read in {}: {}", r.place, r.why))
            .or_else(|| {
                (mode == Mode::Iommu && self.iommu.shared_memory && migration_key(key))
                    .then(|| format!("is not read with iommu.shared_memory = true (an APU): {SHARED_MEMORY_WHY}"))
            })
    }
}

/// The modes in which `key` is not read (for its documentation and tests).
pub fn unread_in(key: &str) -> Vec<Mode> {
    let mut out = vec![];
    for r in UNREAD.iter().filter(|r| r.keys.iter().any(|e| covers(e, key))) {
        for m in r.modes {
            if !out.contains(m) {
                out.push(*m);
            }
        }
    }
    out
}

/// The sentence a key's documentation ends with when some mode does not read it.
pub fn unread_note(key: &str) -> Option<String> {
    let mut places: Vec<&str> = vec![];
    for r in UNREAD.iter().filter(|r| r.keys.iter().any(|e| covers(e, key))) {
        if !places.contains(&r.short) {
            places.push(r.short);
        }
    }
    if migration_key(key) {
        places.push("translation.mode = \"iommu\" with iommu.shared_memory = true");
    }
    let (last, rest) = places.split_last()?;
    let list = if rest.is_empty() { last.to_string() } else { format!("{} nor in {last}", rest.join(", ")) };
    Some(format!("Not read in {list} (refused when set there; a preset may carry it)."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_cover_keys_and_sections() {
        assert!(covers("uvm.batch_size", "uvm.batch_size"));
        assert!(!covers("uvm.batch_size", "uvm.batch_sizes"));
        assert!(covers("uvm.prefetch.", "uvm.prefetch.policy"));
        assert!(covers("uvm.prefetch.", "uvm.prefetch"));
        assert!(!covers("uvm.prefetch.", "uvm.prefetcher"));
        assert!(!covers("uvm.eviction.granularity", "uvm.eviction"));
    }

    #[test]
    fn every_entry_names_a_key_or_section() {
        let keys: Vec<String> = Config::reference().into_iter().map(|p| p.key).collect();
        for r in UNREAD {
            for e in r.keys {
                assert!(keys.iter().any(|k| covers(e, k) && (e.ends_with('.') || k == e)), "{e} is not a key");
            }
        }
    }

    /// What chooses the mode, and the oracles one GPU applies to its own walkers and TLBs, are read.
    #[test]
    fn the_keys_one_gpu_reads_of_multi_are_not_listed() {
        for key in ["multi.gpus", "multi.model_one_gpu", "multi.oracle.infinite_pwc", "multi.oracle.infinite_walkers"] {
            assert!(unread_in(key).is_empty(), "{key}");
        }
        assert_eq!(unread_in("multi.oracle.infinite_iommu_tlb"), [Mode::Gmmu]);
        assert_eq!(unread_in("multi.migration"), [Mode::Gmmu, Mode::Iommu]);
        assert_eq!(unread_in("multi.host_mmu.walker.threads"), [Mode::Gmmu, Mode::Iommu, Mode::MultiIommu]);
        assert_eq!(unread_in("multi.least_tlb.tracker"), [Mode::Gmmu, Mode::Iommu, Mode::MultiGmmu]);
        assert_eq!(unread_in("iommu.ppr.irq_us"), [Mode::MultiGmmu, Mode::MultiIommu, Mode::Gmmu]);
        assert_eq!(unread_in("gmmu.walker.threads"), [Mode::Iommu, Mode::MultiIommu]);
        assert!(unread_in("translation.walk_records_every").is_empty());
        assert_eq!(unread_in("multi.shootdown_stalls_gpu"), [Mode::Gmmu, Mode::Iommu, Mode::MultiIommu]);
        assert_eq!(unread_in("sim.watchdog_batches"), [Mode::Iommu, Mode::MultiGmmu, Mode::MultiIommu]);
        assert_eq!(unread_in("sim.watchdog_answers"), [Mode::Gmmu, Mode::Iommu]);
        assert!(unread_in("sim.seed").is_empty());
        let note = unread_note("iommu.ppr.irq_us").unwrap();
        assert_eq!(
            note,
            "Not read in the multi-GPU model nor in translation.mode = \"gmmu\" (refused when set there; a preset may carry it)."
        );
        let note = unread_note("multi.least_tlb.tracker").unwrap();
        assert!(note.starts_with("Not read in the single-GPU model nor in translation.mode = \"gmmu\" ("), "{note}");
    }

    /// The cycle-stepped MGPUSim engine reads the workload kind, the trace's keys and the seed, and only when
    /// a trace is what runs.
    #[test]
    fn the_mgpusim_engine_reads_only_the_kind_the_trace_and_the_seed() {
        let mut c = Config::default();
        c.workload.trace.engine = "mgpusim-r9nano".into();
        assert_eq!(c.unread("gpu.sms"), None, "not a trace workload: the engine does not run");
        c.workload.kind = crate::workload::WorkloadKind::Trace;
        // `workload.trace` and `workload` themselves: the keys the resolver records for `--set workload.trace={...}`
        // and `--set workload={kind = "trace", trace = {...}}` (their leaves are checked one by one).
        for key in [
            "workload",
            "workload.kind",
            "workload.trace",
            "workload.trace.path",
            "workload.trace.gap_ns",
            "workload.trace.tie_seed",
            "sim.seed",
        ] {
            assert_eq!(c.unread(key), None, "{key}");
        }
        for key in ["gpu.sms", "sim.max_events", "uvm.batch_size"] {
            assert!(c.unread(key).unwrap().starts_with("is not read with workload.trace.engine = \"mgpusim-r9nano\""), "{key}");
        }
        c.workload.trace.engine = "event".into();
        assert_eq!(c.unread("gpu.sms"), None);
    }
}
