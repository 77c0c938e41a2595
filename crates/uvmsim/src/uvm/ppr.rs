//! The APU's GPU page-fault path (seed svm-apu §II, §V.A): an IOMMU walk that
//! finds no valid PTE fails the ATS request; the GPU sends a Peripheral Page
//! Request (PPR) to the IOMMU, which queues it and interrupts the CPU. The
//! IOMMU driver reads the request in the interrupt ("initialization") and puts
//! it on a work-queue; a kernel worker thread runs it later ("schedule") and
//! finds a page and updates the page table ("processing"); the driver notifies
//! the IOMMU, the IOMMU the GPU, which retries the translation.
//!
//! How it works: the interrupt handler and the worker are each one CPU thread,
//! so requests queue behind each other there; that queueing is what makes the
//! latency grow with concurrent faults and the throughput flat (Fig. 6). The
//! software phases run on the host CPU: they take `×ref_ghz/host_ghz` their
//! time at `ref_ghz` (Fig. 7: latency ∝ 1/frequency). A page already requested
//! is not requested again; its faulting warps wait for the same completion.
//!
//! Range-granular service (`pages_log2` > 0, amdgpu's KFD SVM retry-fault
//! handler): one request maps the aligned block of `2^pages_log2` pages around
//! the faulting page, clamped to its allocation. linux
//! drivers/gpu/drm/amd/amdkfd/kfd_svm.c, `svm_range_restore_pages`
//! (torvalds/linux@006ad514a50c): "Align migration range start and size to
//! granularity size: size = 1UL << prange->granularity; start =
//! max_t(unsigned long, ALIGN_DOWN(addr, size), prange->start); last =
//! min_t(unsigned long, ALIGN(addr + 1, size) - 1, prange->last);" then
//! `svm_range_validate_and_map(mm, start, last, ...)`. A fault on a page of a
//! block in service waits for it (the handler serialises on the range's
//! `migrate_mutex` and skips "duplicate vm fault on different pages of same
//! range"). The worker's processing grows with the block: `process_us` for the
//! first page and `page_us` for each further one.

use super::Fault;
use crate::sim::{ns_to_ps, Ps};
use crate::stats::{Latency, Metrics};
use rustc_hash::FxHashMap;

section! {
    /// The APU's page-fault path (translation.mode = "iommu", workload.managed = true): PPR queue,
    /// interrupt, work-queue and worker on the host CPU (seed svm-apu §V.A). The defaults are the
    /// kaveri-apu fit to Fig. 6 (see presets/kaveri-apu.toml), in µs at `ref_ghz`.
    pub struct PprConfig {
        /// PPR from the GPU to the IOMMU queue and the interrupt raised on the CPU, in ns (not scaled by the CPU clock). ASSUMPTION.
        pub request_ns: f64 = 1000.0,
        /// Reading one request from the PPR queue and pre-processing it, in the interrupt handler ("initialization"), in µs.
        pub init_us: f64 = 0.3,
        /// From the work item's queuing to its worker running it ("schedule"; Fig. 6: the largest part), in µs.
        pub schedule_us: f64 = 0.3,
        /// Finding a physical page and updating the page table, by the one worker thread ("processing"), in µs.
        pub process_us: f64 = 3.4,
        /// Completion back to the GPU (driver to IOMMU to GPU) before its translation retry, in ns (not scaled). ASSUMPTION.
        pub complete_ns: f64 = 300.0,
        /// Host CPU clock in GHz: the software phases scale with ref_ghz / host_ghz (Fig. 7).
        pub host_ghz: f64 = 3.7,
        /// The clock the phase costs above are given at, in GHz (the A10-7850K's 3.7 GHz).
        pub ref_ghz: f64 = 3.7,
        /// Pages mapped per request, as log2: a fault maps the aligned block of 2^pages_log2 4 KiB pages around it,
        /// clamped to its allocation (amdgpu KFD's SVM `granularity`, kfd_svm.c `svm_range_restore_pages`; the
        /// driver's default is 9 = 2 MiB). 0 = one page per request (IOMMUv2 PPR handling, as measured in seed svm-apu).
        pub pages_log2: u32 = 0,
        /// Processing of each page of a request after the first, by the worker, in µs at `ref_ghz`. ASSUMPTION: no
        /// source splits a multi-page request's cost; the default is `process_us`, since svm-apu's processing is
        /// per-page work ("find a physical page and update the page table"), so a block only saves the per-request phases.
        pub page_us: f64 = 3.4,
    }
}

impl PprConfig {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        for (k, v, hi) in [
            ("request_ns", self.request_ns, 1e9),
            ("init_us", self.init_us, 1e6),
            ("schedule_us", self.schedule_us, 1e6),
            ("process_us", self.process_us, 1e6),
            ("complete_ns", self.complete_ns, 1e9),
            ("page_us", self.page_us, 1e6),
        ] {
            if !(v.is_finite() && (0.0..=hi).contains(&v)) {
                return Err((format!("{p}.{k}"), format!("must be between 0 and {hi}, got {v}")));
            }
        }
        for (k, v) in [("host_ghz", self.host_ghz), ("ref_ghz", self.ref_ghz)] {
            if !(v.is_finite() && (0.1..=10.0).contains(&v)) {
                return Err((format!("{p}.{k}"), format!("must be between 0.1 and 10 GHz, got {v}")));
            }
        }
        // The driver caps the granularity at 27 (kfd_svm.c `svm_range_list_init`); the model at 1 GiB blocks.
        if self.pages_log2 > 18 {
            return Err((format!("{p}.pages_log2"), format!("must be between 0 and 18 (1 GiB blocks), got {}", self.pages_log2)));
        }
        Ok(())
    }
}

/// The PPR path's state: when the interrupt handler and the worker are next free.
#[derive(Debug)]
pub struct Ppr {
    request: Ps,
    init: Ps,
    schedule: Ps,
    process: Ps,
    page: Ps,
    complete: Ps,
    log2: u32,
    irq_free: Ps,
    worker_free: Ps,
    /// Managed allocations as sorted page ranges [first, end): blocks are clamped to them.
    allocs: Vec<(u64, u64)>,
    /// Blocks with a request in flight: first page -> end page.
    pending: FxHashMap<u64, u64>,
    pub faults: u64,
    pub merged: u64,
    /// Pages mapped by completed or in-flight requests.
    pub pages: u64,
    pub latency: Latency,
}

impl Ppr {
    pub fn new(c: &PprConfig) -> Ppr {
        let scale = c.ref_ghz / c.host_ghz;
        let cpu = |us: f64| ns_to_ps(us * 1000.0 * scale);
        Ppr {
            request: ns_to_ps(c.request_ns),
            init: cpu(c.init_us),
            schedule: cpu(c.schedule_us),
            process: cpu(c.process_us),
            page: cpu(c.page_us),
            complete: ns_to_ps(c.complete_ns),
            log2: c.pages_log2,
            irq_free: 0,
            worker_free: 0,
            allocs: vec![],
            pending: FxHashMap::default(),
            faults: 0,
            merged: 0,
            pages: 0,
            latency: Latency::default(),
        }
    }

    /// A managed allocation of pages [first, end): a block never crosses its edges.
    pub fn add_allocation(&mut self, first: u64, end: u64) {
        let at = self.allocs.partition_point(|&(f, _)| f < first);
        self.allocs.insert(at, (first, end));
    }

    /// The pages [first, end) one request for `vpn` maps: its aligned block, clamped to its
    /// allocation (a page outside every allocation, e.g. trace replay: the whole block).
    pub fn block_of(&self, vpn: u64) -> (u64, u64) {
        let (lo, hi) = (vpn >> self.log2 << self.log2, ((vpn >> self.log2) + 1) << self.log2);
        let i = self.allocs.partition_point(|&(f, _)| f <= vpn);
        match i.checked_sub(1).map(|i| self.allocs[i]) {
            Some((f, e)) if vpn < e => (lo.max(f), hi.min(e)),
            _ => (lo, hi),
        }
    }

    /// A walk failed with `f`: when its block will be mapped and the GPU told, and the
    /// block's first page for [`Ppr::done`] (None if a request for the block is already in flight).
    pub fn raise(&mut self, f: &Fault) -> Option<(Ps, u64)> {
        let (first, end) = self.block_of(f.vpn);
        if self.pending.insert(first, end).is_some() {
            self.merged += 1;
            return None;
        }
        self.faults += 1;
        self.pages += end - first;
        let init_done = (f.time + self.request).max(self.irq_free) + self.init;
        self.irq_free = init_done;
        let start = (init_done + self.schedule).max(self.worker_free);
        self.worker_free = start + self.process + (end - first - 1) * self.page;
        let done = self.worker_free + self.complete;
        self.latency.record(done - f.time);
        Some((done, first))
    }

    /// The block's request completed: its pages [first, end) are mapped now.
    pub fn done(&mut self, first: u64) -> (u64, u64) {
        (first, self.pending.remove(&first).expect("a completion for a block in flight"))
    }

    pub fn export(&self, m: &mut Metrics) {
        m.int("apu.faults", self.faults);
        m.int("apu.faults.merged", self.merged);
        m.int("apu.pages_mapped", self.pages);
        self.latency.export(m, "apu.fault_latency_ns");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(vpn: u64, time: Ps) -> Fault {
        Fault { time, vpn, utlb: 0, sm: 0, warp: 0, write: false, prefetch: false }
    }

    #[test]
    fn one_fault_costs_every_phase_once() {
        let c = PprConfig::default();
        let mut p = Ppr::new(&c);
        let (done, first) = p.raise(&fault(1, 0)).unwrap();
        assert_eq!(first, 1);
        // 1.0 + 0.3 + 0.3 + 3.4 + 0.3 = 5.3 µs
        assert_eq!(done, 5_300_000);
        assert_eq!(p.raise(&fault(1, 10)), None, "a second fault on the page waits for the same request");
        assert_eq!(p.done(1), (1, 2));
        assert!(p.raise(&fault(1, 10_000_000)).is_some());
    }

    #[test]
    fn concurrent_faults_queue_at_the_worker() {
        let mut p = Ppr::new(&PprConfig::default());
        let ends: Vec<Ps> = (0..64).map(|v| p.raise(&fault(v, 0)).unwrap().0).collect();
        // After the first, one completes every process_us: the worker is the bottleneck.
        assert!(ends.windows(2).all(|w| w[1] - w[0] == 3_400_000));
        let throughput_per_ms = 64.0 / (*ends.last().unwrap() as f64 / 1e9);
        assert!((280.0..300.0).contains(&throughput_per_ms), "{throughput_per_ms}");
    }

    #[test]
    fn a_slower_host_clock_stretches_the_software_phases() {
        let fast = Ppr::new(&PprConfig::default()).raise(&fault(1, 0)).unwrap().0;
        let slow = Ppr::new(&PprConfig { host_ghz: 1.7, ..PprConfig::default() }).raise(&fault(1, 0)).unwrap().0;
        // 1.3 µs unscaled + 4.0 µs x 3.7/1.7 (each phase rounded to a ps).
        assert!(slow.abs_diff(1_300_000 + (4_000_000.0 * 3.7 / 1.7) as Ps) < 10, "{slow}");
        assert!(slow as f64 / fast as f64 > 1.8);
    }

    #[test]
    fn a_request_maps_its_aligned_block_clamped_to_the_allocation() {
        // Blocks of 8 pages; 1 µs per page after the first; one allocation of pages [0, 20), one of [21, 40).
        let c = PprConfig { pages_log2: 3, page_us: 1.0, ..PprConfig::default() };
        let mut p = Ppr::new(&c);
        p.add_allocation(21, 40);
        p.add_allocation(0, 20);
        assert_eq!(p.block_of(5), (0, 8));
        // The fault at 5 maps [0, 8): 1.0 request + 0.3 init + 0.3 schedule + (3.4 + 7 x 1.0) processing + 0.3 completion.
        assert_eq!(p.raise(&fault(5, 0)), Some((12_300_000, 0)));
        // A fault on another page of the block while it is in service waits for the same request.
        assert_eq!(p.raise(&fault(7, 1_000_000)), None);
        // A fault in the next block is a new request: its interrupt work queues behind the first's
        // (init done at 1.6 µs), its processing behind the worker (free at 12.0 µs): 12.0 + 10.4 + 0.3.
        assert_eq!(p.raise(&fault(9, 0)), Some((22_700_000, 8)));
        // The block of 18 is [16, 24) clamped to the allocation's end: 4 pages, 3.4 + 3 x 1.0 from 22.4 µs.
        assert_eq!(p.block_of(18), (16, 20));
        assert_eq!(p.raise(&fault(18, 0)), Some((29_100_000, 16)));
        // The block of 22 is [16, 24) clamped to the second allocation's start.
        assert_eq!(p.block_of(22), (21, 24));
        // A page outside every allocation (trace replay) gets the whole aligned block.
        assert_eq!(p.block_of(44), (40, 48));
        assert_eq!((p.faults, p.merged, p.pages), (3, 1, 20));
        // Once the block is mapped its pages do not fault; a later fault on it (e.g. after an unmap) is a new request.
        assert_eq!(p.done(0), (0, 8));
        assert!(p.raise(&fault(3, 30_000_000)).is_some());
        assert_eq!(p.faults, 4);
    }

    #[test]
    fn one_page_requests_ignore_the_allocations() {
        let mut p = Ppr::new(&PprConfig::default());
        p.add_allocation(0, 20);
        assert_eq!((p.block_of(0), p.block_of(19), p.block_of(1000)), ((0, 1), (19, 20), (1000, 1001)));
    }

    #[test]
    fn the_block_size_is_bounded() {
        assert!(PprConfig { pages_log2: 18, ..PprConfig::default() }.validate("iommu.ppr").is_ok());
        let e = PprConfig { pages_log2: 19, ..PprConfig::default() }.validate("iommu.ppr").unwrap_err();
        assert_eq!(e.0, "iommu.ppr.pages_log2");
    }
}
