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
//!
//! Interrupt coalescing (seed svm-apu §II.B: "Multiple PPR requests can be
//! queued before the CPU is interrupted"): a request that reaches the PPR log
//! while the interrupt handler is running (or raised and not yet running) is
//! drained by that handler, which reads the log until it finds it empty; only
//! a request that lands in an empty log with no handler under way raises a new
//! interrupt. The handler pays `irq_us` once per interrupt and `init_us` per
//! request it drains. linux drivers/iommu/amd_iommu.c
//! (torvalds/linux@0076cd3d063a): the hard IRQ `amd_iommu_int_handler` returns
//! `IRQ_WAKE_THREAD`; the thread `amd_iommu_int_thread` reads
//! `MMIO_STATUS_OFFSET`, clears the PPR bit and calls `iommu_poll_ppr_log`,
//! whose `while (head != tail)` loop handles one entry, writes the head and
//! re-reads head and tail ("Refresh ring-buffer information"), and loops again
//! while a re-read status still has `MMIO_STATUS_PPR_INT_MASK` set. (Newer
//! kernels' drivers/iommu/amd/ppr.c `amd_iommu_poll_ppr_log`
//! (@3c6a2bac1524) no longer re-reads the tail inside its loop, but
//! drivers/iommu/amd/iommu.c `amd_iommu_handle_irq` clears the status bit
//! before polling and loops `while (status & mask)` on a re-read status, so
//! entries logged meanwhile are still drained by the same handler.)
//!
//! Request capacity (saturation): a PCIe PRI function may have at most its
//! "Outstanding Page Request Allocation" of page requests outstanding, and the
//! AMD IOMMUv2 driver allocates 32: amd_iommu.c `pdev_iommuv2_enable`
//! (@0076cd3d063a): "FIXME: Hardcode number of outstanding requests for now"
//! `reqs = 32;` (1 only for a device flagged `AMD_PRI_DEV_ERRATUM_LIMIT_REQ_ONE`,
//! which no in-tree driver did: the errata code was removed as "entirely
//! unused", iommu list patch "iommu/amd: remove the unused device errata code",
//! 2021-04-02), then `pci_enable_pri(pdev, reqs)`. With `max_outstanding` > 0 a
//! fault whose request finds that many outstanding is held by the GPU until the
//! earliest outstanding request's completion (its PRG response) reaches the GPU
//! and frees its slot; held requests are sent in the order they were raised.
//! Its fault latency includes the wait. The IOMMU's PPR log has 512 entries
//! (drivers/iommu/amd_iommu_types.h `PPR_LOG_ENTRIES 512`,
//! torvalds/linux@02a0947ae458), so one GPU within its allocation of 32 cannot
//! overflow it; a full log is not modelled.

use super::Fault;
use crate::sim::{ns_to_ps, ps_to_ns, Ps};
use crate::stats::{Latency, Metrics};
use crate::xlat::space::PageRanges;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

section! {
    /// The APU's page-fault path (translation.mode = "iommu", workload.managed = true): PPR queue,
    /// interrupt, work-queue and worker on the host CPU (seed svm-apu §V.A). The defaults are the
    /// kaveri-apu fit to Fig. 6 (see presets/kaveri-apu.toml), in µs at `ref_ghz`.
    pub struct PprConfig {
        /// PPR from the GPU into the IOMMU's PPR log, in ns (not scaled by the CPU clock); a request that raises an
        /// interrupt reaches the handler `irq_us` later. ASSUMPTION. At the kaveri-apu fit (`irq_us` = 0) it also
        /// holds the interrupt's delivery.
        pub request_ns: f64 = 1000.0,
        /// Once per interrupt, before the handler reads its first request: interrupt entry, waking the threaded
        /// handler, the status register's read and write and the log's head/tail reads (amd_iommu.c
        /// `amd_iommu_int_thread`, `iommu_poll_ppr_log`; see the module doc), in µs at `ref_ghz`. ASSUMPTION: 0,
        /// i.e. folded into `request_ns` and `init_us` as at the Fig. 6 fit, whose totals do not separate it.
        pub irq_us: f64 = 0.0,
        /// Reading one request from the PPR queue and pre-processing it, in the interrupt handler ("initialization"), in µs.
        /// Paid per request, including requests that reach the log while the handler runs (they are drained by it).
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
        /// Page requests the GPU may have outstanding (PCIe PRI "Outstanding Page Request Allocation"); a fault whose
        /// request finds this many outstanding is held by the GPU until a completion frees one. 0 = unlimited.
        /// Linux's AMD IOMMUv2 driver hard-codes 32 (amd_iommu.c `pdev_iommuv2_enable`, torvalds/linux@0076cd3d063a:
        /// `reqs = 32;` ... `pci_enable_pri(pdev, reqs)`; still 32 when its unused errata path was removed in 2021).
        pub max_outstanding: u32 = 32,
    }
}

impl PprConfig {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        for (k, v, hi) in [
            ("request_ns", self.request_ns, 1e9),
            ("irq_us", self.irq_us, 1e6),
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

/// The PPR path's state: when the interrupt handler and the worker are next free,
/// and when the GPU's outstanding requests complete.
#[derive(Debug)]
pub struct Ppr {
    request: Ps,
    irq: Ps,
    init: Ps,
    schedule: Ps,
    process: Ps,
    page: Ps,
    complete: Ps,
    log2: u32,
    /// When the interrupt handler has drained the log (a request arriving before then is drained by it).
    irq_free: Ps,
    worker_free: Ps,
    /// `max_outstanding` (0 = unlimited) and the completion times of the requests holding its slots.
    slots: usize,
    outstanding: BinaryHeap<Reverse<Ps>>,
    /// Managed allocations as sorted page ranges [first, end): blocks are clamped to them.
    allocs: PageRanges,
    /// Blocks with a request in flight: first page -> end page.
    pending: FxHashMap<u64, u64>,
    pub faults: u64,
    pub merged: u64,
    /// Pages mapped by completed or in-flight requests.
    pub pages: u64,
    /// Pages the completions made GPU-mapped that were not (set by the caller that maps them):
    /// mapped in place, they take none of the GPU memory the UVM driver allocates.
    pub in_place: u64,
    /// Interrupts raised (requests that found the log empty and no handler under way).
    pub interrupts: u64,
    /// Requests held by the GPU for a free slot, their total and longest hold.
    pub credit_waits: u64,
    credit_wait_ps: Ps,
    credit_wait_max_ps: Ps,
    pub latency: Latency,
    /// Time with at least one request outstanding: the union of the requests' [fault, done] spans, kept
    /// as disjoint spans in time order (a fault found by a later event may be earlier than one raised
    /// before it: walks take different times) and their total. Spans that end before the current event
    /// can grow no more and are dropped ([`Ppr::settle`]); the total keeps them.
    spans: VecDeque<(Ps, Ps)>,
    busy_ps: Ps,
}

impl Ppr {
    pub fn new(c: &PprConfig) -> Ppr {
        let scale = c.ref_ghz / c.host_ghz;
        let cpu = |us: f64| ns_to_ps(us * 1000.0 * scale);
        Ppr {
            request: ns_to_ps(c.request_ns),
            irq: cpu(c.irq_us),
            init: cpu(c.init_us),
            schedule: cpu(c.schedule_us),
            process: cpu(c.process_us),
            page: cpu(c.page_us),
            complete: ns_to_ps(c.complete_ns),
            log2: c.pages_log2,
            irq_free: 0,
            worker_free: 0,
            slots: c.max_outstanding as usize,
            // Holds at most `slots` entries; grown on demand past a small start.
            outstanding: BinaryHeap::with_capacity((c.max_outstanding as usize).min(1024)),
            allocs: PageRanges::default(),
            pending: FxHashMap::default(),
            faults: 0,
            merged: 0,
            pages: 0,
            in_place: 0,
            interrupts: 0,
            credit_waits: 0,
            credit_wait_ps: 0,
            credit_wait_max_ps: 0,
            latency: Latency::default(),
            spans: VecDeque::new(),
            busy_ps: 0,
        }
    }

    /// A managed allocation of pages [first, end): a block never crosses its edges.
    pub fn add_allocation(&mut self, first: u64, end: u64) {
        self.allocs.add(first, end);
    }

    /// The pages [first, end) one request for `vpn` maps: its aligned block, clamped to its
    /// allocation (a page outside every allocation, e.g. trace replay: the whole block).
    pub fn block_of(&self, vpn: u64) -> (u64, u64) {
        let (lo, hi) = (vpn >> self.log2 << self.log2, ((vpn >> self.log2) + 1) << self.log2);
        match self.allocs.find(vpn) {
            Some((f, e, _)) => (lo.max(f), hi.min(e)),
            None => (lo, hi),
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
        // The GPU sends the request when it has a free slot: at the fault, or when the
        // earliest outstanding request's completion reaches it.
        let mut sent = f.time;
        if self.slots > 0 && self.outstanding.len() == self.slots {
            let Reverse(freed) = self.outstanding.pop().expect("a full set of slots");
            if freed > f.time {
                let wait = freed - f.time;
                self.credit_waits += 1;
                self.credit_wait_ps += wait;
                self.credit_wait_max_ps = self.credit_wait_max_ps.max(wait);
                sent = freed;
            }
        }
        let logged = sent + self.request;
        // A request logged while the handler drains the log is read by it; else it raises an interrupt.
        let read_from = if logged < self.irq_free {
            self.irq_free
        } else {
            self.interrupts += 1;
            logged + self.irq
        };
        let init_done = read_from + self.init;
        self.irq_free = init_done;
        let start = (init_done + self.schedule).max(self.worker_free);
        self.worker_free = start + self.process + (end - first - 1) * self.page;
        let done = self.worker_free + self.complete;
        if self.slots > 0 {
            self.outstanding.push(Reverse(done));
        }
        self.latency.record(done - f.time);
        self.busy(f.time, done);
        Some((done, first))
    }

    /// Add [start, end] to the time with a request outstanding. The one worker completes requests in the order
    /// they are raised, so `end` is the latest end yet and merging looks back from the last span only.
    fn busy(&mut self, mut start: Ps, mut end: Ps) {
        while let Some(&(a, b)) = self.spans.back() {
            if b < start {
                break;
            }
            self.spans.pop_back();
            self.busy_ps -= b - a;
            (start, end) = (start.min(a), end.max(b));
        }
        self.spans.push_back((start, end));
        self.busy_ps += end - start;
    }

    /// The simulation reached `now`: no later fault starts before it, so spans that ended earlier are final.
    pub fn settle(&mut self, now: Ps) {
        while self.spans.front().is_some_and(|&(_, b)| b < now) {
            self.spans.pop_front();
        }
    }

    /// The block's request completed: its pages [first, end) are mapped now.
    pub fn done(&mut self, first: u64) -> (u64, u64) {
        (first, self.pending.remove(&first).expect("a completion for a block in flight"))
    }

    pub fn export(&self, m: &mut Metrics) {
        m.int("apu.faults", self.faults);
        m.int("apu.faults.merged", self.merged);
        m.int("apu.pages_mapped", self.pages);
        m.int("apu.interrupts", self.interrupts);
        m.int("apu.ppr_credit_waits", self.credit_waits);
        m.float("apu.ppr_credit_wait_ns", ps_to_ns(self.credit_wait_ps));
        m.float("apu.ppr_credit_wait_max_ns", ps_to_ns(self.credit_wait_max_ps));
        self.latency.export(m, "apu.fault_latency_ns");
        m.float("apu.time_ns", ps_to_ns(self.busy_ps));
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

    /// `apu.time_ns` is the time with a request outstanding: overlapping requests count once, idle gaps not at all.
    #[test]
    fn service_time_is_the_union_of_the_requests_latencies() {
        let mut p = Ppr::new(&PprConfig::default());
        // A at 0 µs: done 5.3. B at 1.0: logged 2.0 (A's handler is done: an interrupt), read 2.0-2.3, waits for
        // the worker (A's 1.6-5.0) until 5.0, processed to 8.4, done 8.7. C at 20.0: alone, done 25.3.
        let done: Vec<Ps> = [(1, 0), (2, 1_000_000), (3, 20_000_000)].map(|(v, t)| p.raise(&fault(v, t)).unwrap().0).into();
        assert_eq!(done, [5_300_000, 8_700_000, 25_300_000]);
        let mut m = Metrics::default();
        p.export(&mut m);
        // [0, 8.7] and [20.0, 25.3]: 14.0 µs; the latencies sum to 18.3.
        assert_eq!(m.get("apu.time_ns"), Some(14_000.0));
        // Settled at 10 µs, the first span is final; the total keeps it.
        p.settle(10_000_000);
        assert_eq!(p.spans.len(), 1);
        p.export(&mut m);
        assert_eq!(m.get("apu.time_ns"), Some(14_000.0));
    }

    /// A fault a later event finds may have failed before one already raised (its walk took less time): its
    /// span reaches back before the others'.
    #[test]
    fn service_time_covers_a_request_raised_after_a_later_one() {
        let mut p = Ppr::new(&PprConfig::default());
        // A at 10 µs: logged 11.0, read 11.0-11.3, worker 11.6-15.0, done 15.3. B at 2 µs, raised after A: logged
        // 3.0, read behind A's handler 11.3-11.6, worker 15.0-18.4, done 18.7. Outstanding [2, 18.7]: 16.7 µs.
        assert_eq!(p.raise(&fault(1, 10_000_000)).unwrap().0, 15_300_000);
        assert_eq!(p.raise(&fault(2, 2_000_000)).unwrap().0, 18_700_000);
        let mut m = Metrics::default();
        p.export(&mut m);
        assert_eq!(m.get("apu.time_ns"), Some(16_700.0));
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
    fn faults_logged_while_the_handler_runs_share_its_interrupt() {
        // 1 µs per interrupt; unlimited slots. Times in µs: request 1.0, irq 1.0, init 0.3, schedule 0.3,
        // process 3.4, completion 0.3.
        let c = PprConfig { irq_us: 1.0, max_outstanding: 0, ..PprConfig::default() };
        let mut p = Ppr::new(&c);
        // A at 0: logged at 1.0 into an empty log: an interrupt; the handler reads it from 2.0 to 2.3;
        // the worker runs it 2.6-6.0; done 6.3.
        assert_eq!(p.raise(&fault(1, 0)).unwrap().0, 6_300_000);
        // B at 0.5: logged at 1.5, while the interrupt is on its way: the same handler reads it next
        // (2.3-2.6, init only); it waits for the worker (6.0-9.4); done 9.7.
        assert_eq!(p.raise(&fault(2, 500_000)).unwrap().0, 9_700_000);
        // C at 1.5: logged at 2.5, while the handler reads B: read 2.6-2.9; worker 9.4-12.8; done 13.1.
        assert_eq!(p.raise(&fault(3, 1_500_000)).unwrap().0, 13_100_000);
        assert_eq!(p.interrupts, 1, "one interrupt drained all three");
    }

    #[test]
    fn a_fault_after_the_log_emptied_raises_a_new_interrupt() {
        let c = PprConfig { irq_us: 1.0, max_outstanding: 0, ..PprConfig::default() };
        let mut p = Ppr::new(&c);
        assert_eq!(p.raise(&fault(1, 0)).unwrap().0, 6_300_000);
        // The handler finished at 2.3. D at 5.0 is logged at 6.0 into an empty log: a second interrupt,
        // read from 7.0 to 7.3, worker 7.6-11.0, done 11.3.
        assert_eq!(p.raise(&fault(4, 5_000_000)).unwrap().0, 11_300_000);
        assert_eq!(p.interrupts, 2);
        // Logged exactly when the handler finished (at 7.3; fault at 6.3): it had found the log empty, a third interrupt.
        p.raise(&fault(5, 6_300_000)).unwrap();
        assert_eq!(p.interrupts, 3);
        let mut m = Metrics::default();
        p.export(&mut m);
        assert_eq!(m.get("apu.interrupts"), Some(3.0));
    }

    #[test]
    fn a_request_beyond_the_allocation_waits_for_a_completion() {
        // Two slots and a fast worker (0.1 µs), so the front end, not the worker, sets the times.
        let c = PprConfig { max_outstanding: 2, process_us: 0.1, ..PprConfig::default() };
        let mut p = Ppr::new(&c);
        // A at 0: logged 1.0 (interrupt), read 1.0-1.3, worker 1.6-1.7, done 2.0.
        assert_eq!(p.raise(&fault(1, 0)).unwrap().0, 2_000_000);
        // B at 0: logged 1.0 while A is read: read 1.3-1.6, worker 1.9-2.0, done 2.3.
        assert_eq!(p.raise(&fault(2, 0)).unwrap().0, 2_300_000);
        // C at 0 finds both slots taken: the GPU sends it when A's completion arrives (2.0): logged 3.0 into an
        // empty log (a second interrupt), read 3.0-3.3, worker 3.6-3.7, done 4.0.
        assert_eq!(p.raise(&fault(3, 0)).unwrap().0, 4_000_000);
        assert_eq!((p.credit_waits, p.credit_wait_ps, p.credit_wait_max_ps, p.interrupts), (1, 2_000_000, 2_000_000, 2));
        // D at 10: B's slot was freed at 2.3, long before: no wait.
        assert_eq!(p.raise(&fault(4, 10_000_000)).unwrap().0, 12_000_000);
        assert_eq!(p.credit_waits, 1);
        let mut m = Metrics::default();
        p.export(&mut m);
        assert_eq!(m.get("apu.ppr_credit_waits"), Some(1.0));
        assert_eq!(m.get("apu.ppr_credit_wait_ns"), Some(2000.0));
        assert_eq!(m.get("apu.ppr_credit_wait_max_ns"), Some(2000.0));

        // Unlimited: C is sent at 0 and read by the first interrupt (1.6-1.9), worker 2.2-2.3, done 2.6.
        let mut u = Ppr::new(&PprConfig { max_outstanding: 0, ..c });
        let ends: Vec<Ps> = (1..4).map(|v| u.raise(&fault(v, 0)).unwrap().0).collect();
        assert_eq!(ends, [2_000_000, 2_300_000, 2_600_000]);
        assert_eq!((u.credit_waits, u.interrupts), (0, 1));
    }

    #[test]
    fn a_slot_freed_exactly_when_the_fault_comes_is_no_wait() {
        // One slot, the fast worker: A at 0 is done at 2.0 µs (as above).
        let c = PprConfig { max_outstanding: 1, process_us: 0.1, ..PprConfig::default() };
        let mut p = Ppr::new(&c);
        assert_eq!(p.raise(&fault(1, 0)).unwrap().0, 2_000_000);
        // B at 2.0 µs finds the slot freed at that instant: sent at once, not counted as a wait. Logged at 3.0
        // into an empty log (a second interrupt), read 3.0-3.3, worker 3.6-3.7, done 4.0.
        assert_eq!(p.raise(&fault(2, 2_000_000)).unwrap().0, 4_000_000);
        assert_eq!((p.credit_waits, p.credit_wait_ps, p.interrupts), (0, 0, 2));
    }

    /// The model before interrupt coalescing and request slots: every request pays `init`
    /// at the handler in turn and the worker's costs, nothing else.
    fn serial_reference(c: &PprConfig, faults: &[(u64, Ps)]) -> Vec<Option<Ps>> {
        let p = Ppr::new(c);
        let (mut irq_free, mut worker_free) = (0, 0);
        let mut pending = std::collections::HashSet::new();
        faults
            .iter()
            .map(|&(vpn, t)| {
                let (first, end) = p.block_of(vpn);
                if !pending.insert(first) {
                    return None;
                }
                irq_free = (t + p.request).max(irq_free) + p.init;
                let start = (irq_free + p.schedule).max(worker_free);
                worker_free = start + p.process + (end - first - 1) * p.page;
                Some(worker_free + p.complete)
            })
            .collect()
    }

    #[test]
    fn unlimited_slots_and_a_free_interrupt_reproduce_the_serial_model() {
        // Faults at pseudo-random times over 200 µs on 300 pages of 4-page blocks: bursts, gaps and merges.
        let faults: Vec<(u64, Ps)> = (0..400u64).map(|i| (crate::sim::mix64(i) % 300, crate::sim::mix64(i + 1000) % 200_000_000)).collect();
        let c = PprConfig { irq_us: 0.0, max_outstanding: 0, pages_log2: 2, page_us: 0.7, ..PprConfig::default() };
        let mut p = Ppr::new(&c);
        let got: Vec<Option<Ps>> = faults.iter().map(|&(v, t)| p.raise(&fault(v, t)).map(|r| r.0)).collect();
        assert_eq!(got, serial_reference(&c, &faults));
        assert!(p.merged > 0 && p.interrupts > 1 && p.interrupts < p.faults, "{} {} {}", p.merged, p.interrupts, p.faults);
    }

    #[test]
    fn thirty_two_slots_do_not_move_a_burst_the_worker_limits() {
        // Fig. 6's 64 concurrent faults with the default costs: the 33rd request waits for the first completion
        // (5.3 µs), but the one worker is busy until far later, so every completion time is unchanged.
        let burst = |slots: u32| {
            let mut p = Ppr::new(&PprConfig { max_outstanding: slots, ..PprConfig::default() });
            let ends: Vec<Ps> = (0..64).map(|v| p.raise(&fault(v, 0)).unwrap().0).collect();
            (ends, p.credit_waits)
        };
        let (limited, waits) = burst(32);
        assert_eq!(limited, burst(0).0);
        assert_eq!(waits, 32);
    }

    #[test]
    fn the_block_size_is_bounded() {
        assert!(PprConfig { pages_log2: 18, ..PprConfig::default() }.validate("iommu.ppr").is_ok());
        let e = PprConfig { pages_log2: 19, ..PprConfig::default() }.validate("iommu.ppr").unwrap_err();
        assert_eq!(e.0, "iommu.ppr.pages_log2");
        let e = PprConfig { irq_us: -1.0, ..PprConfig::default() }.validate("iommu.ppr").unwrap_err();
        assert_eq!(e.0, "iommu.ppr.irq_us");
    }
}
