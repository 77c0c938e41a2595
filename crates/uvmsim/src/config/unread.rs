//! Keys nothing reads in a mode: the single-GPU UVM driver's fault-batch options in IOMMU mode, and
//! the whole single-GPU driver in the multi-GPU model. A run that set one looked as if it had applied
//! it (the metrics did not move), so the resolver refuses such a key when the user set it (a config
//! file, `--set`, Python's `set`); a preset may carry them (it describes its machine's driver too).
//!
//! The table was found by reading where each key is read and checked by runs with each key changed
//! (tests/modes.rs, `unread_keys_change_no_metric`): in IOMMU mode far faults go to the page-request
//! path ([`crate::uvm::ppr`]), and the driver runs only for `cudaMemPrefetchAsync`, access-counter
//! migration, host accesses and hints, which read its per-block costs, GPU memory, eviction and
//! thrashing settings but not its fault buffer, batches, replays or prefetcher; the multi-GPU model
//! builds no driver allocation at all (`World::new`), so only the GPU-side fault options
//! (`uvm.fault_mode`, `uvm.stall_warp_on_fault`) and the record tables (`uvm.records`,
//! `uvm.migration_records_max`) are read there.

use super::{Config, TranslationMode};

/// A mode in which part of the configuration is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `translation.mode = "iommu"` on one GPU.
    Iommu,
    /// The multi-GPU model (`multi.gpus` > 1 or `multi.model_one_gpu`), in either translation mode.
    Multi,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Iommu => "translation.mode = \"iommu\"",
            Mode::Multi => "the multi-GPU model (multi.gpus > 1 or multi.model_one_gpu = true)",
        }
    }
}

/// Options of the driver's fault service: the fault buffer, batches, replays, the polled and
/// fixed-latency models' fault latency, the fault prefetcher, preemptive unmapping, the faults table.
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

/// (keys, or sections ending in `.`; the mode; why they are not read there).
const UNREAD: &[(&[&str], Mode, &str)] = &[
    (
        FAULT_BATCHES,
        Mode::Iommu,
        "far faults go to the IOMMU's page-request path ([iommu.ppr]), not to the UVM driver's fault buffer and \
         batches, whose options these are (their counterparts there: iommu.ppr.*; the driver's prefetcher: \
         iommu.ppr.pages_log2)",
    ),
    (
        FAULT_BATCHES,
        Mode::Multi,
        "far faults go to the multi-GPU model's host (multi.migration, multi.host_*), not to the single-GPU UVM \
         driver's fault buffer and batches, whose options these are",
    ),
    (
        DRIVER,
        Mode::Multi,
        "the single-GPU UVM driver does not run there: the model places every page itself (multi.migration, \
         multi.access_threshold), from host memory, with no GPU memory limit, hints, thrashing control or host \
         accesses; it needs multi.gpus = 1 and multi.model_one_gpu = false",
    ),
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
    /// The mode whose unread keys apply to this configuration, if any.
    pub fn unread_mode(&self) -> Option<Mode> {
        if self.multi.active() {
            Some(Mode::Multi)
        } else if self.translation.mode == TranslationMode::Iommu {
            Some(Mode::Iommu)
        } else {
            None
        }
    }

    /// Why `key` (dotted, as set) is not read in this configuration's mode, if it is not: the message
    /// the resolver refuses a user's setting of it with.
    pub fn unread(&self, key: &str) -> Option<String> {
        let mode = self.unread_mode()?;
        UNREAD
            .iter()
            .find(|(keys, m, _)| *m == mode && keys.iter().any(|e| covers(e, key)))
            .map(|(_, m, why)| format!("is not read in {}: {why}", m.name()))
    }
}

/// The modes in which `key` is not read (for its documentation).
pub fn unread_in(key: &str) -> Vec<Mode> {
    let mut out = vec![];
    for (keys, m, _) in UNREAD {
        if !out.contains(m) && keys.iter().any(|e| covers(e, key)) {
            out.push(*m);
        }
    }
    out
}

/// The sentence a key's documentation ends with when some mode does not read it.
pub fn unread_note(key: &str) -> Option<String> {
    let modes = unread_in(key);
    let names = |m: Mode| match m {
        Mode::Iommu => "translation.mode = \"iommu\"",
        Mode::Multi => "the multi-GPU model",
    };
    match modes.as_slice() {
        [] => None,
        [m] => Some(format!("Not read in {} (refused when set there; a preset may carry it).", names(*m))),
        [a, b, ..] => Some(format!("Not read in {} nor in {} (refused when set there; a preset may carry it).", names(*a), names(*b))),
    }
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
        for (entries, ..) in UNREAD {
            for e in *entries {
                assert!(keys.iter().any(|k| covers(e, k) && (e.ends_with('.') || k == e)), "{e} is not a key");
            }
        }
    }
}
