//! The world: one simulated system (host program + one GPU, or several with
//! [`Multi`] between them) as a [`Model`] for the run loop, and [`simulate`],
//! which builds it from a config, runs it and collects the metrics.
//!
//! With `multi.gpus` > 1 every kernel's CTAs are spread over the GPUs
//! (`multi.cta_placement`) and the kernel ends when every GPU has finished
//! its share; far faults go to [`Multi`] instead of the UVM driver; a trace
//! replays each GPU's records on that GPU.

use crate::config::{Config, TranslationMode};
use crate::gpu::{Gpu, EV_GPU_SHIFT};
use crate::link::{Dir, Link};
use crate::multi::{self, Multi};
use crate::sim::{self, EventQueue, Model, Ps, RunOptions, SimError, PS_PER_NS};
use crate::stats::Metrics;
use crate::uvm::evict::{EvictionGranularity, EvictionPolicy, LruRecency};
use crate::uvm::ppr::Ppr;
use crate::uvm::prefetch::PrefetchPolicy;
use crate::uvm::{Next, Uvm, UvmConfig};
use crate::workload::trace::{Record, TraceReader};
use crate::workload::{self, HostOp, Program};
use crate::xlat::shootdown::Shootdown;

/// Every event of the system: compact and `Copy`, so the hot path never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// The host program runs its next operation.
    Host,
    /// A warp (by slot) is ready to issue.
    Warp(u32),
    /// A CTA's last access completed.
    CtaDone(u32),
    /// The next traced access is due.
    Trace,
    /// The UVM driver runs (fetches and services a batch of far faults).
    UvmService,
    /// The UVM driver's current batch ends (pages mapped, warps replayed).
    UvmBatchDone,
    /// An APU page request completes: this 4 KiB page is mapped (IOMMU mode).
    PprDone(u64),
    /// Multi-GPU: the host's answer to a far fault reaches the GPU (`vpn << 5 | gpu`): its PTE becomes valid.
    PageReady(u64),
    /// Multi-GPU: an invalidation request reaches the GPU (`vpn << 5 | gpu`).
    Invalidate(u64),
    /// Pages pinned by thrashing mitigation reach their unpin deadline.
    UvmUnpin,
    /// The driver services the GPU's access-counter notifications.
    UvmCounters,
    /// An access-counter migration's copies end: its pages become GPU-resident.
    UvmCountersDone,
    /// Multi-application mode: application (GPU) i runs its next host operation.
    App(u32),
}

/// Low bits of an event's slot or CTA number: the index within its GPU.
const EV_INDEX_MASK: u32 = (1 << EV_GPU_SHIFT) - 1;

/// A trace being replayed: the reader and the record due next.
struct Replay {
    reader: TraceReader,
    path: String,
    gpu: u32,
    next: Option<Record>,
    first: Option<Ps>,
    done: Ps,
    /// The lowest and highest GPU numbers of the records read (to name them when none is replayed).
    gpus_seen: Option<(u32, u32)>,
}

pub struct World {
    program: Program,
    pc: usize,
    /// The GPUs (one unless `multi.gpus` > 1).
    pub gpus: Vec<Gpu>,
    /// The shared side of a multi-GPU system.
    pub multi: Option<Multi>,
    /// Multi-application mode (`multi.apps`): one program per GPU instead of `program`.
    apps: Option<multi::apps::Apps>,
    /// GPUs still running the current kernel, since when, and the kernels' total span (multi-GPU).
    running: usize,
    multi_placement: multi::CtaPlacement,
    kernel_start: Ps,
    kernel_ps: Ps,
    link: Link,
    /// Explicit copies' time and bytes, host-to-device then device-to-host.
    memcpy_ps: [Ps; 2],
    memcpy_bytes: [u64; 2],
    done_at: Option<Ps>,
    /// The oracle's first pass: done once the first-touch order is complete.
    first_pass: bool,
    replay: Option<Replay>,
    /// An `Ev::UvmCounters` is on the queue.
    counters_armed: bool,
    page_bytes: u64,
    uvm: Uvm,
    host_threads: u32,
    /// The APU page-fault path, in IOMMU mode (faults go there instead of the UVM driver).
    ppr: Option<Ppr>,
    /// Host TLB shootdowns through the IOMMU, in IOMMU mode.
    shootdown: Option<Shootdown>,
    /// Progress watchdogs (0 = off): far-fault batches (`sim.watchdog_batches`, one GPU) or
    /// far-fault answers (`sim.watchdog_answers`, several GPUs) in a row with no instruction
    /// completed on any GPU, and the completed count at the last of them.
    watchdog: u64,
    watchdog_answers: u64,
    stuck_steps: u64,
    last_completed: u64,
}

impl World {
    pub fn new(cfg: &Config, program: Program) -> World {
        let n = cfg.multi.gpus as usize;
        let cfg = &multi::effective(cfg);
        let mut gpus: Vec<Gpu> = (0..n).map(|i| Gpu::with_id(cfg, i)).collect();
        for g in gpus.iter_mut() {
            multi::unlimit_walkers(cfg, g);
        }
        let mut multi = cfg.multi.active().then(|| {
            // One IOMMU for all GPUs (ATS mode): it lives in `Multi` and is lent to the GPU that runs.
            let iommu = gpus[0].xlat.iommu.take();
            for g in gpus.iter_mut() {
                g.xlat.iommu = None;
            }
            Multi::new(cfg, iommu)
        });
        let mut uvm = Uvm::new(&cfg.uvm, gpus[0].xlat.l1.len(), gpus[0].sms(), cfg.sim.seed);
        uvm.shared_memory = cfg.translation.mode == TranslationMode::Iommu && cfg.iommu.shared_memory;
        if cfg.uvm.eviction.granularity == EvictionGranularity::Page && cfg.uvm.eviction.policy == EvictionPolicy::Lru {
            // 4 KiB LRU orders pages by their last use: the residency stamps walks (and TLB hits: true LRU).
            gpus[0].xlat.space.residency.keep_recency();
            gpus[0].xlat.space.residency.stamp_hits = cfg.uvm.eviction.lru_recency == LruRecency::Access;
        }
        for b in &program.buffers {
            if multi.is_some() {
                // Every buffer is unified memory whose pages the multi-GPU policy places.
                for g in gpus.iter_mut() {
                    g.xlat.space.map(&crate::workload::Buffer { managed: true, page_bytes: 4096, ..*b });
                }
                continue;
            }
            let gpu = &mut gpus[0];
            gpu.xlat.space.map(b);
            if b.managed {
                let (first, end) = b.small_pages();
                uvm.add_allocation(first, end);
                gpu.xlat.space.residency.used_by_alloc.add(first, end);
            }
            if b.managed && program.host.init {
                // The host program initialised the array before the kernels: CPU-resident and CPU-mapped.
                let (first, end) = b.small_pages();
                uvm.host_touch(first, end, program.host.threads);
            }
        }
        if let (Some(mx), multi::InitialPlacement::Distributed) = (multi.as_mut(), cfg.multi.initial_placement) {
            // Refused with multi.apps, whose programs' buffers are mapped later (apps_resident).
            mx.distribute(&program.buffers, &mut gpus);
        }
        uvm.apply_advice(&mut gpus[0].xlat.space.residency);
        if multi.is_none() {
            gpus[0].limited_memory = uvm.memory_limited();
        }
        // The program's allocations, not `workload.managed`: a replayed recording of a managed program has them.
        if cfg.uvm.access_counters.migrate && multi.is_none() && program.buffers.iter().any(|b| b.managed) {
            gpus[0].remote.counters = Some(crate::uvm::counters::AccessCounters::new(&cfg.uvm.access_counters));
        }
        let ppr = (cfg.translation.mode == TranslationMode::Iommu).then(|| {
            let mut ppr = Ppr::new(&cfg.iommu.ppr);
            // A request's block stops at its allocation's edges (the driver's SVM range ends at the VMA's).
            for b in program.buffers.iter().filter(|b| b.managed) {
                let (first, end) = b.small_pages();
                ppr.add_allocation(first, end);
            }
            ppr
        });
        let host_threads = program.host.threads;
        World {
            program,
            pc: 0,
            gpus,
            multi,
            apps: None,
            running: 0,
            multi_placement: cfg.multi.cta_placement,
            kernel_start: 0,
            kernel_ps: 0,
            link: Link::new(&cfg.link),
            memcpy_ps: [0; 2],
            memcpy_bytes: [0; 2],
            done_at: None,
            first_pass: false,
            replay: None,
            counters_armed: false,
            page_bytes: cfg.translation.page_size.0,
            watchdog: cfg.sim.watchdog_batches,
            watchdog_answers: cfg.sim.watchdog_answers,
            stuck_steps: 0,
            last_completed: 0,
            uvm,
            host_threads,
            ppr,
            shootdown: (cfg.translation.mode == TranslationMode::Iommu).then(|| {
                let io = &cfg.iommu;
                Shootdown::new(
                    &io.shootdown,
                    io.ppr.ref_ghz / io.ppr.host_ghz,
                    io.walker.level_latency_ns,
                    io.tlb_latency_ns,
                    io.link_latency_ns,
                    cfg.gpu.core_mhz,
                )
            }),
        }
    }

    /// Start replaying a trace: map every address, schedule the first record.
    fn start_replay(&mut self, path: &str, gpu: u32, gap_ns: f64, now: Ps, q: &mut EventQueue<Ev>) -> Result<(), SimError> {
        let mut reader = TraceReader::open(path).map_err(|e| SimError::BadInput(e.0))?.with_gap_ns(gap_ns);
        let multi = self.multi.is_some();
        for g in self.gpus.iter_mut() {
            g.xlat.space.map_identity(self.page_bytes, multi);
        }
        let next = reader.next_record().map_err(|e| SimError::BadInput(e.0))?;
        // A header and no records would end at once with all-zero metrics, as if that were a result.
        let Some(first) = next else { return Err(SimError::BadInput(format!("{path}: the trace holds no accesses (no records)"))) };
        q.push(first.time.max(now), Ev::Trace);
        self.replay = Some(Replay { reader, path: path.to_string(), gpu, next, first: None, done: now, gpus_seen: None });
        Ok(())
    }

    /// Issue every traced access due at `now`, then schedule the next one (or
    /// resume the host program once the last access is done). Record `gpu` runs on
    /// GPU `gpu - workload.trace.gpu` (records of GPUs the system lacks are skipped).
    fn step_trace(&mut self, now: Ps, q: &mut EventQueue<Ev>) -> Result<(), SimError> {
        let rp = self.replay.as_mut().expect("a trace event means a replay is running");
        while let Some(r) = rp.next {
            let g = r.gpu.wrapping_sub(rp.gpu) as usize;
            // A record of a GPU that is not replayed is passed over now, not at its time:
            // waiting for it would stretch the run to the other GPUs' last access.
            if r.time > now && g < self.gpus.len() {
                q.push(r.time, Ev::Trace);
                return Ok(());
            }
            let seen = rp.gpus_seen.get_or_insert((r.gpu, r.gpu));
            *seen = (seen.0.min(r.gpu), seen.1.max(r.gpu));
            if g < self.gpus.len() {
                let gpu = &mut self.gpus[g];
                if r.cu as usize >= gpu.sms() {
                    return Err(SimError::BadInput(format!(
                        "{}: cu {} does not exist: gpu.sms is {} (choose a preset with as many SMs as the traced GPU)",
                        rp.reader.position(),
                        r.cu,
                        gpu.sms()
                    )));
                }
                rp.first.get_or_insert(r.time);
                let pos = rp.reader.position();
                let mut t = now;
                let mut tries = 0;
                let done = loop {
                    let gpu = &mut self.gpus[g];
                    lend_iommu(&mut self.multi, gpu);
                    let res = gpu.replay_access(r.cu as usize, r.kind, r.vaddr, r.size, t, now, self.multi.as_mut());
                    unlend_iommu(&mut self.multi, gpu);
                    let (done, faulted) = res.map_err(|va| SimError::Model(format!("{pos}: address {va:#x} is not mapped")))?;
                    if !faulted {
                        break done;
                    }
                    // Multi-GPU far fault: no warp to park, so the host answers at once and the access is issued again then.
                    let faults: Vec<_> = gpu.drain_faults().collect();
                    let m = self.multi.as_mut().expect("only placed pages fault in a trace");
                    for f in faults {
                        let ready = m.fault(g, f.vpn, f.write, f.time, now, &mut self.gpus).unwrap_or(f.time);
                        m.page_ready(g, f.vpn, &mut self.gpus[g]);
                        t = t.max(ready);
                    }
                    tries += 1;
                    if tries > 8 {
                        return Err(SimError::Model(format!("{pos}: page {:#x} keeps faulting", r.vaddr >> 12)));
                    }
                };
                if let Some(m) = self.multi.as_mut() {
                    service_requests(m, now, &mut self.gpus, q);
                }
                rp.done = rp.done.max(done);
            }
            rp.next = rp.reader.next_record().map_err(|e| SimError::BadInput(e.0))?;
        }
        if let (None, Some((lo, hi))) = (rp.first, rp.gpus_seen) {
            // Records were read but none was of a simulated GPU: an empty run would pass for a result.
            let n = self.gpus.len() as u64;
            let wanted = if n == 1 { format!("GPU {}", rp.gpu) } else { format!("GPUs {} to {}", rp.gpu, rp.gpu as u64 + n - 1) };
            let has = if lo == hi { format!("GPU {lo}") } else { format!("GPUs {lo} to {hi}") };
            return Err(SimError::BadInput(format!(
                "{}: key `workload.trace.gpu`: no record of {wanted} (workload.trace.gpu = {}): the trace's records are of {has}",
                rp.path, rp.gpu
            )));
        }
        // End of the trace: its span counts as kernel time; the host resumes when the last access is done.
        let (first, done) = (rp.first.unwrap_or(rp.done), rp.done);
        self.gpus[0].add_kernel_time(done - first);
        self.kernel_ps += done - first;
        self.replay = None;
        q.push(done.max(now), Ev::Host);
        Ok(())
    }

    /// Run host operations from `now` until one has to wait.
    fn step_host(&mut self, now: Ps, q: &mut EventQueue<Ev>) -> Result<(), SimError> {
        while let Some(op) = self.program.ops.get(self.pc) {
            self.pc += 1;
            match op {
                HostOp::MemcpyH2D { bytes } => {
                    // cudaMemcpy: one transfer, the host waits for it.
                    let (_, end) = self.link.transfer(Dir::HostToDevice, *bytes, now, now);
                    self.memcpy_ps[0] += end - now;
                    self.memcpy_bytes[0] += bytes;
                    q.push(end, Ev::Host);
                    return Ok(());
                }
                HostOp::MemcpyD2H { bytes } => {
                    let (_, end) = self.link.transfer(Dir::DeviceToHost, *bytes, now, now);
                    self.memcpy_ps[1] += end - now;
                    self.memcpy_bytes[1] += bytes;
                    q.push(end, Ev::Host);
                    return Ok(());
                }
                HostOp::Launch(k) => {
                    let n = self.gpus.len() as u64;
                    let total = k.ctas();
                    let placement = self.multi_placement;
                    self.running = 0;
                    for (g, gpu) in self.gpus.iter_mut().enumerate() {
                        let (first, step, count) = multi::cta_share(placement, g as u64, n, total);
                        self.running += gpu.launch_part(k.clone(), first, step, count, now, q) as usize;
                    }
                    if self.running > 0 {
                        self.kernel_start = now;
                        return Ok(());
                    }
                }
                HostOp::Replay { path, gpu, gap_ns } => {
                    let (path, gpu, gap_ns) = (path.clone(), *gpu, *gap_ns);
                    return self.start_replay(&path, gpu, gap_ns, now, q);
                }
                &HostOp::Shootdown { va, page_bytes, pages, count, all } => {
                    // Serial shootdowns; no kernel runs meanwhile, so the translations go at once.
                    let sd = self.shootdown.as_mut().expect("validation: shootdowns need IOMMU mode");
                    let mut t = now;
                    for i in 0..count {
                        let x = &mut self.gpus[0].xlat;
                        let gone = if all { x.flush_all() } else { x.shootdown_page(va + (i % pages) * page_bytes) };
                        t += sd.record(gone);
                    }
                    q.push(t, Ev::Host);
                    return Ok(());
                }
                &HostOp::HostAccess { buffer, offset, bytes, write } => {
                    let b = self.program.buffers[buffer];
                    let end = if b.managed {
                        let (first, last) = ((b.base + offset) >> 12, (b.base + offset + bytes).div_ceil(4096));
                        let residency = &mut self.gpus[0].xlat.space.residency;
                        let end = self.uvm.host_access(now, first..last, write, self.host_threads, &mut self.link, residency);
                        self.after_uvm(q);
                        end
                    } else {
                        now
                    };
                    q.push(end, Ev::Host);
                    return Ok(());
                }
                &HostOp::PrefetchAsync { buffer } => {
                    let b = self.program.buffers[buffer];
                    let (first, last) = b.small_pages();
                    let residency = &mut self.gpus[0].xlat.space.residency;
                    let end = self.uvm.prefetch_async(now, first..last, &mut self.link, residency);
                    self.after_uvm(q);
                    q.push(end, Ev::Host);
                    return Ok(());
                }
                &HostOp::HostCompute { ns } => {
                    q.push(now + sim::ns_to_ps(ns), Ev::Host);
                    return Ok(());
                }
            }
        }
        self.done_at = Some(now);
        Ok(())
    }
}

impl World {
    /// A warp of a multi-GPU system runs; its far faults go to the host. (Out of
    /// line: the single-GPU issue loop stays small enough to inline into the run loop.)
    #[inline(never)]
    fn warp_multi(&mut self, tagged: u32, now: Ps, q: &mut EventQueue<Ev>) -> Result<(), SimError> {
        let g = (tagged >> EV_GPU_SHIFT) as usize;
        // A GPU handling a shootdown issues nothing (`multi.shootdown_stalls_gpu`).
        if let Some(until) = self.multi.as_mut().and_then(|m| m.stalled_until(g, now)) {
            q.push(until, Ev::Warp(tagged));
            return Ok(());
        }
        let gpu = &mut self.gpus[g];
        lend_iommu(&mut self.multi, gpu);
        let m = self.multi.as_mut().expect("multi-GPU warps only");
        let res = gpu.run_warp(tagged & EV_INDEX_MASK, now, q, Some(m), None);
        unlend_iommu(&mut self.multi, gpu);
        res?;
        let m = self.multi.as_mut().expect("multi-GPU warps only");
        let faults = gpu.take_faults();
        for f in &faults {
            if let Some(t) = m.fault(g, f.vpn, f.write, f.time, now, &mut self.gpus) {
                q.push(t.max(now), Ev::PageReady(f.vpn << 5 | g as u64));
            }
        }
        self.gpus[g].return_faults(faults);
        multi::apps::apply_spills(m, &mut self.gpus, now);
        service_requests(m, now, &mut self.gpus, q);
        Ok(())
    }

    /// Multi-application mode: application `i` runs on; the run ends when every application has finished once.
    fn step_app(&mut self, i: Option<usize>, now: Ps, q: &mut EventQueue<Ev>) {
        let (Some(apps), Some(m)) = (self.apps.as_mut(), self.multi.as_ref()) else { unreachable!("multi-application mode") };
        let done = match i {
            Some(i) => apps.step(i, &mut self.gpus, &mut self.link, m, now, q),
            None => apps.start(&mut self.gpus, &mut self.link, m, now, q),
        };
        if done {
            self.kernel_ps = now;
            self.done_at = Some(now);
        }
    }
}

/// Lend the shared IOMMU (multi-GPU ATS mode) to the GPU about to translate.
#[inline]
fn lend_iommu(multi: &mut Option<Multi>, gpu: &mut Gpu) {
    if let Some(m) = multi.as_mut() {
        if m.iommu.is_some() {
            gpu.xlat.iommu = m.iommu.take();
        }
    }
}

/// Take the shared IOMMU back.
#[inline]
fn unlend_iommu(multi: &mut Option<Multi>, gpu: &mut Gpu) {
    if let Some(m) = multi.as_mut() {
        if gpu.xlat.iommu.is_some() {
            m.iommu = gpu.xlat.iommu.take();
        }
    }
}

/// Migrations that access counters asked for while a GPU ran; then schedule
/// every invalidation request sent since the last call.
fn service_requests(m: &mut Multi, now: Ps, gpus: &mut [Gpu], q: &mut EventQueue<Ev>) {
    for (vpn, g, t) in std::mem::take(&mut m.requests) {
        m.migrate(vpn, g, t, now, gpus);
    }
    for (at, x) in m.arrivals.drain(..) {
        q.push(at.max(now), Ev::Invalidate(x));
    }
}

impl Model for World {
    type Event = Ev;

    fn handle(&mut self, now: Ps, ev: Ev, q: &mut EventQueue<Ev>) -> Result<(), SimError> {
        match ev {
            Ev::Warp(tagged) if self.multi.is_some() => self.warp_multi(tagged, now, q)?,
            Ev::Warp(slot) => {
                let gpu = &mut self.gpus[0];
                if let Some(&Ev::Warp(next)) = q.peek() {
                    gpu.prefetch_warp(next);
                }
                // With the UVM driver (not the IOMMU's page requests), a warp sleeps only while
                // one of its far faults is in the driver's hands (`Gpu::run_warp`).
                gpu.run_warp(slot, now, q, None, self.ppr.is_none().then_some(&self.uvm))?;
                if gpu.remote.counters.as_ref().is_some_and(|c| !c.notifications.is_empty()) && !self.counters_armed {
                    self.counters_armed = true;
                    q.push(now + gpu.remote.counters.as_ref().map_or(0, |c| c.notify), Ev::UvmCounters);
                }
                if let Some(ppr) = self.ppr.as_mut() {
                    ppr.settle(now);
                }
                for f in gpu.drain_faults() {
                    match self.ppr.as_mut() {
                        Some(ppr) => {
                            // A fault fails after its warp ran (`settle` relies on it).
                            debug_assert!(f.time >= now, "fault at {} before its warp ran at {now}", f.time);
                            if let Some((t, first)) = ppr.raise(&f) {
                                q.push(t, Ev::PprDone(first));
                            }
                        }
                        None => schedule(self.uvm.raise(f), q),
                    }
                }
                for next in self.uvm.events.drain(..) {
                    schedule(next, q);
                }
            }
            Ev::Invalidate(x) => {
                let (vpn, g) = (x >> 5, (x & 31) as usize);
                let m = self.multi.as_mut().expect("invalidations only in a multi-GPU system");
                m.invalidation_arrives(g, vpn, now, &mut self.gpus[g]);
            }
            Ev::PageReady(x) => {
                let (vpn, g) = (x >> 5, (x & 31) as usize);
                let m = self.multi.as_mut().expect("page answers only in a multi-GPU system");
                m.page_ready(g, vpn, &mut self.gpus[g]);
                m.idle_drain(now, &mut self.gpus[g]);
                if self.watchdog_answers > 0 {
                    self.check_answers(now)?;
                }
                // The lanes on this page complete now, whatever else their warp waits for: in GMMU
                // mode the L2 TLB's MSHR answers the misses it held for the page; in IOMMU mode the
                // page request's response lets the device retry the page's translation (PCIe PRI).
                // Waking a warp only once all its pages were mapped at once livelocked page pairs
                // shared by two GPUs' wavefronts (robust.rs, ats_lanes_on_page_pairs_two_gpus_share_complete).
                self.gpus[g].replay_page(vpn, now, q);
            }
            Ev::UvmService => {
                let next = self.uvm.service(now, &mut self.link, &mut self.gpus[0].xlat.space.residency);
                self.after_uvm(q);
                schedule(next, q);
                for next in self.uvm.events.drain(..) {
                    schedule(next, q);
                }
            }
            Ev::UvmCounters => {
                let gpu = &mut self.gpus[0];
                let c = gpu.remote.counters.as_mut().expect("counter events only with access counters");
                if !self.uvm.counters_can_run(now) {
                    // A batch or a migration is in service: the notifications wait in the buffer.
                    q.push(self.uvm.counters_retry_at(now), Ev::UvmCounters);
                    return Ok(());
                }
                self.counters_armed = false;
                let notes = std::mem::take(&mut c.notifications);
                if let Some(end) = self.uvm.service_counters(now, &notes, &mut self.link, &mut gpu.xlat.space.residency) {
                    q.push(end, Ev::UvmCountersDone);
                }
                self.after_uvm(q);
            }
            Ev::UvmCountersDone => {
                self.uvm.counters_done(now, &mut self.gpus[0].xlat.space.residency);
                self.after_uvm(q);
            }
            Ev::UvmUnpin => {
                self.uvm.unpin_due(now, &mut self.gpus[0].xlat.space.residency);
                self.after_uvm(q);
            }
            Ev::UvmBatchDone => {
                let gpu = &mut self.gpus[0];
                let (next, replay) = self.uvm.batch_done(now, &mut gpu.xlat.space.residency);
                if self.watchdog > 0 {
                    self.check_progress(now)?;
                }
                let gpu = &mut self.gpus[0];
                // The µTLBs' held accesses walk again; those still unmapped fault again.
                for mut f in self.uvm.take_retries() {
                    f.time = gpu.retry_walk(f.sm, f.vpn, f.time, now);
                    schedule(self.uvm.rewrite(f), q);
                }
                if replay {
                    match self.uvm.take_resumed() {
                        // Polled model: only µTLBs with no far fault left resume.
                        Some(utlbs) => {
                            let lost = self.uvm.take_ended().iter().any(|&p| !gpu.xlat.space.residency.is_mapped(p));
                            let uvm = &self.uvm;
                            gpu.resume(&utlbs, lost, now, q, |u, p| uvm.in_service(u, p))
                        }
                        // GPU memory has filled: lanes complete as their pages are mapped or lost.
                        None if self.uvm.full && !gpu.blocking => {
                            let ended = self.uvm.take_ended();
                            let uvm = &self.uvm;
                            gpu.replay_ended(&ended, now, q, |u, p| uvm.in_service(u, p))
                        }
                        // Blocking faults, memory full: every waiting warp re-executes after an eviction; so does
                        // one waiting for a page whose fault ended unmapped (its block deferred, or evicted again):
                        // it may have gone to sleep after the service's refault epoch began, and nothing else
                        // would raise the page again (before 2026-12-06 such warps slept for ever: a deadlock).
                        None if self.uvm.full => {
                            let residency = &gpu.xlat.space.residency;
                            let lost: Vec<u64> = self.uvm.take_ended().into_iter().filter(|&p| !residency.is_mapped(p)).collect();
                            for p in lost {
                                gpu.requeue_waiters(p);
                            }
                            gpu.replay(now, q)
                        }
                        None => {
                            let lost = self.uvm.take_ended().iter().any(|&p| !gpu.xlat.space.residency.is_mapped(p));
                            let uvm = &self.uvm;
                            gpu.replay_serviced(lost, now, q, |u, p| uvm.in_service(u, p))
                        }
                    }
                }
                schedule(next, q);
                for next in self.uvm.events.drain(..) {
                    schedule(next, q);
                }
            }
            Ev::PprDone(first) => {
                let ppr = self.ppr.as_mut().expect("PPR events only in IOMMU mode");
                let (first, end) = ppr.done(first);
                let gpu = &mut self.gpus[0];
                let residency = &mut gpu.xlat.space.residency;
                let shared = self.uvm.shared_memory;
                for vpn in first..end {
                    if shared && !residency.is_resident(vpn) {
                        // The APU's one memory: the GPU's own.
                        residency.make_resident(vpn);
                        self.uvm.map_in_place(vpn);
                        ppr.in_place += 1;
                    } else if !shared && !residency.is_mapped(vpn) {
                        // Host memory behind the link (gh200-c2c): the GPU reads it there, remotely, and access
                        // counters may migrate it (before 2026-12-07 it was taken for GPU memory, read at its speed).
                        residency.map_remote(vpn);
                        self.uvm.map_in_place(vpn);
                    }
                }
                // The GPU retries: warps whose pages are all mapped run again.
                gpu.replay_pages(first, end, now, q);
            }
            Ev::CtaDone(tagged) => {
                let g = (tagged >> EV_GPU_SHIFT) as usize;
                if !self.gpus[g].cta_done(tagged & EV_INDEX_MASK, now, q) {
                    // the GPU's share of the kernel goes on
                } else if self.apps.is_some() {
                    // Multi-application mode: GPU g's application goes on.
                    self.step_app(Some(g), now, q);
                } else {
                    // The kernel ends when every GPU has finished its share.
                    self.running -= 1;
                    if self.running == 0 {
                        self.kernel_ps += now - self.kernel_start;
                        self.step_host(now, q)?;
                    }
                }
            }
            Ev::Host if self.apps.is_some() => self.step_app(None, now, q),
            Ev::App(i) => self.step_app(Some(i as usize), now, q),
            Ev::Host => self.step_host(now, q)?,
            Ev::Trace => self.step_trace(now, q)?,
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.done_at.is_some() || (self.first_pass && self.uvm.first_touch_complete())
    }

    fn progress_note(&self) -> String {
        if let Some(apps) = &self.apps {
            return apps.progress_note();
        }
        // One program: its host operation, and the running kernel's CTAs done over all GPUs (a GPU whose part
        // has ended holds no kernel: the CTAs not done are those of the parts still running).
        let mut note = format!("; host operation {} of {}", self.pc, self.program.ops.len());
        if let Some(HostOp::Launch(k)) = self.pc.checked_sub(1).and_then(|i| self.program.ops.get(i)) {
            let left: u64 = self.gpus.iter().filter_map(Gpu::kernel_progress).map(|(done, part)| part - done).sum();
            if left > 0 {
                let total = k.ctas();
                note += &format!(", kernel `{}`: {} of {total} CTAs done", k.name, total.saturating_sub(left));
            }
        }
        if let Some(rp) = &self.replay {
            note += &format!(", trace replay at {}", rp.reader.position());
        }
        note
    }

    fn describe_waiting(&self) -> Vec<String> {
        let mut out = vec![format!("host program: at operation {} of {}", self.pc, self.program.ops.len())];
        if let Some(rp) = &self.replay {
            out.push(format!("trace replay: at {}", rp.reader.position()));
        }
        self.uvm.describe(&mut out);
        for (g, gpu) in self.gpus.iter().enumerate() {
            if self.gpus.len() > 1 {
                out.push(format!("GPU {g}:"));
            }
            gpu.describe_waiting(&mut out);
        }
        out
    }
}

impl World {
    /// The progress watchdog, at the end of each batch: fail when `sim.watchdog_batches`
    /// batches in a row end with no instruction completed since the one before.
    fn check_progress(&mut self, now: Ps) -> Result<(), SimError> {
        if self.steps_without_progress() < self.watchdog {
            return Ok(());
        }
        let residency = &self.gpus[0].xlat.space.residency;
        let mut lines = vec![self.uvm.state_line(residency)];
        self.gpus[0].describe_waiting(&mut lines);
        // Faults the thrashing mitigation throttles come back until the nap ends: a wait, not thrashing memory.
        let why = match self.uvm.throttled_until() {
            Some(until) if until > now => format!(
                "the last batch's pages are throttled by the thrashing mitigation until {:.3} ns (uvm.thrashing.nap \
                 lapses of uvm.thrashing.lapse_us), and their warps fault until then: shorten the nap or the lapse, \
                 or raise sim.watchdog_batches",
                sim::ps_to_ns(until)
            ),
            _ => "GPU memory thrashing: raise uvm.gpu_memory_bytes or lower uvm.oversubscription".into(),
        };
        Err(SimError::Model(format!(
            "no progress at {:.3} ns: {} far-fault batches in a row ended with no warp instruction completed \
             (sim.watchdog_batches); the faulted instructions keep re-executing and faulting again ({why}); state:\n  {}",
            sim::ps_to_ns(now),
            self.stuck_steps,
            lines.join("\n  ")
        )))
    }

    /// The watchdogs' count: one more step (a batch, an answer), and the steps in a row
    /// since an instruction last completed on any GPU. A part of a split instruction
    /// (`Gpu::park_held`) is not progress: the instruction counts once, as in `completed_insts`.
    fn steps_without_progress(&mut self) -> u64 {
        let done: u64 = self.gpus.iter().map(|g| g.stats.completed_insts.saturating_sub(g.stats.split_insts)).sum();
        if done == self.last_completed {
            self.stuck_steps += 1;
        } else {
            self.last_completed = done;
            self.stuck_steps = 0;
        }
        self.stuck_steps
    }

    /// The multi-GPU progress watchdog, at each far-fault answer: fail when
    /// `sim.watchdog_answers` answers in a row reach the GPUs with no instruction completed
    /// on any GPU since the one before.
    fn check_answers(&mut self, now: Ps) -> Result<(), SimError> {
        if self.steps_without_progress() < self.watchdog_answers {
            return Ok(());
        }
        let mut lines = Vec::new();
        for (g, gpu) in self.gpus.iter().enumerate() {
            lines.push(format!("GPU {g}:"));
            gpu.describe_waiting(&mut lines);
        }
        Err(SimError::Model(format!(
            "no progress at {:.3} ns: {} far-fault answers in a row reached the GPUs with no warp instruction \
             completed on any of them (sim.watchdog_answers); the faulted instructions keep re-executing and \
             faulting again (their pages move to another GPU before the re-execution uses them: a migration \
             policy that moves pages less often, first-touch or access-counter, would let them settle); state:\n  {}",
            sim::ps_to_ns(now),
            self.stuck_steps,
            lines.join("\n  ")
        )))
    }

    /// After the driver changed GPU mappings: shoot down the blocks it left
    /// (evicted, taken back by the host, unpinned) in every GPU TLB, and
    /// schedule the unpin deadlines of newly pinned pages.
    fn after_uvm(&mut self, q: &mut EventQueue<Ev>) {
        if !self.uvm.shootdowns.is_empty() {
            self.gpus[0].xlat.shootdown(&self.uvm.shootdowns);
            self.uvm.shootdowns.clear();
        }
        for vpn in self.uvm.shootdown_pages.drain(..) {
            self.gpus[0].xlat.invalidate_page(vpn);
        }
        for t in self.uvm.unpin_wakeups.drain(..) {
            q.push(t, Ev::UvmUnpin);
        }
    }
}

/// Put what the UVM driver asked for on the queue.
fn schedule(next: Next, q: &mut EventQueue<Ev>) {
    match next {
        Next::Nothing => {}
        Next::Service(t) => q.push(t, Ev::UvmService),
        Next::BatchDone(t) => q.push(t, Ev::UvmBatchDone),
    }
}

/// The result of a run: metrics and, when enabled, record tables.
pub struct Output {
    pub metrics: Metrics,
    /// Per-batch records of the UVM driver (`uvm.records = true`).
    pub batches: Option<Vec<crate::uvm::BatchRecord>>,
    /// Per-fault records (`uvm.fault_records = true`).
    pub faults: Option<Vec<crate::uvm::FaultRecord>>,
    /// Per-migration records (`uvm.records = true`): the UVM driver's copies, or the multi-GPU model's page moves.
    pub migrations: Option<Vec<crate::uvm::MigrationRecord>>,
    /// Sampled page walks (`translation.walk_records_every > 0`).
    pub walks: Option<Vec<crate::xlat::WalkRecord>>,
    /// Per managed allocation, the UVM driver's page counts (`uvm.records = true`, one GPU, managed memory).
    pub allocations: Option<Vec<crate::uvm::AllocRecord>>,
}

/// Run the system `cfg` describes; returns its metrics.
pub fn simulate(cfg: &Config) -> Result<Metrics, SimError> {
    simulate_full(cfg).map(|o| o.metrics)
}

/// `uvm.advise.buffers` and `per_buffer` name managed allocations by index: one the workload does not have
/// would leave the hint applied nowhere, silently. Known only once the program is built.
fn check_advice(cfg: &Config, program: &workload::Program) -> Result<(), SimError> {
    let a = &cfg.uvm.advise;
    if cfg.multi.active() || !cfg.multi.apps.is_empty() || (a.buffers.is_empty() && a.per_buffer.is_empty()) {
        return Ok(());
    }
    let n = program.buffers.iter().filter(|b| b.managed).count();
    let has = match n {
        0 => "the workload has no managed allocation (workload.managed = false?)".to_string(),
        1 => "the workload has 1 managed allocation (index 0)".to_string(),
        n => format!("the workload has {n} managed allocations (indices 0 to {})", n - 1),
    };
    if let Some(&i) = a.buffers.iter().find(|&&i| i as usize >= n) {
        return Err(SimError::BadInput(format!("key `uvm.advise.buffers`: allocation {i} does not exist: {has}")));
    }
    if a.per_buffer.len() > n {
        return Err(SimError::BadInput(format!("key `uvm.advise.per_buffer`: {} hints for the allocations: {has}", a.per_buffer.len())));
    }
    Ok(())
}

/// Zheng's oracle (seed paged-memory §4.2): a first pass of `cfg`, demand paging only,
/// records the order in which pages are first faulted; returns it and the events the pass
/// handled. Unless `to_end`, the pass stops once every managed page has been faulted: the
/// rest of the run cannot change the order (a stencil's later sweeps fault nothing new).
pub fn first_touch_pass(cfg: &Config, to_end: bool) -> Result<(Vec<u64>, u64), SimError> {
    let mut first = cfg.clone();
    first.uvm.prefetch.policy = PrefetchPolicy::None;
    (first.uvm.records, first.uvm.baselines) = (false, false);
    let mut pass = World::new(&first, workload::build(&first).map_err(SimError::BadInput)?);
    pass.uvm.record_first_touch();
    pass.first_pass = !to_end;
    let mut q = EventQueue::new();
    q.push(0, Ev::Host);
    let rep = sim::run(&mut pass, &mut q, &run_options(cfg))?;
    Ok((pass.uvm.first_touch_order(), rep.events))
}

/// Run the system `cfg` describes; returns its metrics and record tables.
pub fn simulate_full(cfg: &Config) -> Result<Output, SimError> {
    if cfg.workload.kind == workload::WorkloadKind::Trace && cfg.workload.trace.engine == "mgpusim-r9nano" {
        return cycle_replay(cfg);
    }
    let started = std::time::Instant::now();
    let apps = (!cfg.multi.apps.is_empty()).then(|| multi::apps::Apps::build(cfg)).transpose().map_err(SimError::BadInput)?;
    // Multi-application mode: the applications' programs replace the workload's.
    let program = match apps {
        Some(_) => workload::Program { buffers: vec![], ops: vec![], host: workload::HostSetup::of(&cfg.workload, None) },
        None => workload::build(cfg).map_err(SimError::BadInput)?,
    };
    check_advice(cfg, &program)?;
    // Managed memory in the run: `workload.managed`, or a replayed recording of a managed program.
    let managed = cfg.workload.managed || program.buffers.iter().any(|b| b.managed);
    if cfg.uvm.baselines && !managed {
        // Before 2026-12-07 the baselines were skipped without a word: the run had no baseline.* metrics.
        return Err(SimError::BadInput(
            "key `uvm.baselines`: compares a run on managed memory with copy-then-execute on device memory, and this run \
             has no managed memory (workload.managed = false): it is that baseline itself; set workload.managed = true"
                .into(),
        ));
    }
    check_baseline_recording(cfg, managed)?;
    let mut world = World::new(cfg, program);
    if let Some(a) = apps {
        a.map(&mut world.gpus, world.multi.as_mut().expect("multi.apps runs the multi-GPU model"), cfg.multi.apps_resident);
        world.apps = Some(a);
    }
    if cfg.uvm.prefetch.policy == PrefetchPolicy::Oracle && managed {
        world.uvm.set_oracle(first_touch_pass(cfg, false)?.0);
    }
    let mut q = EventQueue::new();
    q.push(0, Ev::Host);
    let opts = run_options(cfg);
    let rep = sim::run(&mut world, &mut q, &opts)?;
    if cfg!(debug_assertions) && world.multi.is_none() {
        // Pages the IOMMU's page-request path mapped in place count as resident but hold no GPU memory.
        let in_place = world.ppr.as_ref().map_or(0, |p| p.in_place);
        world.uvm.check_invariants_in_place(&world.gpus[0].xlat.space.residency, in_place).map_err(SimError::Model)?;
    }
    let mut m = Metrics::default();
    let end = world.done_at.unwrap_or(rep.end_ps);
    let kernel_ps = if world.multi.is_some() { world.kernel_ps } else { world.gpus[0].stats.kernel_ps };
    m.float("time.total_ns", end as f64 / PS_PER_NS as f64);
    m.float("time.kernel_ns", kernel_ps as f64 / PS_PER_NS as f64);
    let [h2d, d2h] = world.memcpy_ps;
    m.float("time.memcpy_ns", (h2d + d2h) as f64 / PS_PER_NS as f64);
    m.float("time.memcpy_h2d_ns", h2d as f64 / PS_PER_NS as f64);
    m.float("time.memcpy_d2h_ns", d2h as f64 / PS_PER_NS as f64);
    m.int("host.memcpy_bytes", world.memcpy_bytes.iter().sum());
    m.int("host.memcpy_h2d_bytes", world.memcpy_bytes[0]);
    m.int("host.memcpy_d2h_bytes", world.memcpy_bytes[1]);
    for g in 0..world.gpus.len() {
        // The shared IOMMU (ATS mode) is exported with each GPU's translation: the same `iommu.*` values.
        lend_iommu(&mut world.multi, &mut world.gpus[g]);
        world.gpus[g].export(&mut m, &format!("gpu{g}"), end);
        unlend_iommu(&mut world.multi, &mut world.gpus[g]);
    }
    if let Some(mx) = &world.multi {
        mx.export(&mut m, &world.gpus, end);
    }
    if let Some(a) = &world.apps {
        a.export(&mut m);
    }
    // Work planned past the program's end (an access-counter migration in service) is not counted.
    world.uvm.program_ended(end, &mut world.link);
    world.link.export(&mut m, end);
    world.uvm.export(&mut m, &world.gpus[0].xlat.space.residency);
    world.gpus[0].remote.export(&mut m);
    world.uvm.counters.export(world.gpus[0].remote.counters.as_ref().map_or(0, |c| c.raised), &mut m);
    if let Some(ppr) = &world.ppr {
        ppr.export(&mut m);
    }
    if let Some(sd) = &world.shootdown {
        sd.export(&mut m, "iommu.shootdown");
    }
    m.int("sim.events", rep.events);
    m.int("sim.seed", cfg.sim.seed);
    m.float("sim.wall_s", rep.wall_s);
    let wall = rep.wall_s.max(1e-9);
    m.float("sim.events_per_s", rep.events as f64 / wall);
    let mem_insts: u64 = world.gpus.iter().map(|g| g.stats.warp_mem_insts).sum();
    m.float("sim.warp_mem_insts_per_s", mem_insts as f64 / wall);
    if cfg.uvm.baselines && managed {
        baselines(cfg, end, &mut m)?;
    }
    // The whole call: with the oracle's first pass and the baselines, which `sim.wall_s` leaves out.
    m.float("sim.total_wall_s", started.elapsed().as_secs_f64());
    // The multi-GPU model's page moves (multi-application mode included: its applications fault through the
    // same model) after any copy of the UVM driver (host operations act on GPU 0 there).
    let mut migrations = world.uvm.migrations.take();
    let mut dropped = world.uvm.migration_records_dropped;
    if let (Some(rows), Some(mx)) = (migrations.as_mut(), world.multi.as_mut()) {
        rows.extend(mx.migrations.take().unwrap_or_default());
        dropped += mx.migration_records_dropped;
        // Both kept up to the bound: the table as a whole keeps it too.
        let max = cfg.uvm.migration_records_max as usize;
        if rows.len() > max {
            dropped += (rows.len() - max) as u64;
            rows.truncate(max);
        }
    }
    m.int("uvm.migration_records_dropped", dropped);
    Ok(Output {
        metrics: m,
        batches: world.uvm.records.take(),
        faults: world.uvm.fault_records.take(),
        migrations,
        walks: (cfg.translation.walk_records_every > 0)
            .then(|| world.gpus.iter_mut().enumerate().flat_map(|(i, g)| g.xlat.take_walk_records(i as u32)).collect()),
        // The multi-GPU model moves pages itself: the driver's per-allocation counts would miss them.
        allocations: (cfg.uvm.records && world.multi.is_none() && !world.uvm.alloc_tally.rows.is_empty()).then(|| {
            // The prefetched pages used were counted where the GPU touched them (the residency).
            let used = &world.gpus[0].xlat.space.residency.used_by_alloc.counts;
            let mut rows = std::mem::take(&mut world.uvm.alloc_tally.rows);
            for (r, &u) in rows.iter_mut().zip(used) {
                (r.prefetch_used, r.prefetch_wasted) = (u, r.prefetched - u);
            }
            rows
        }),
    })
}

/// `workload.trace.engine = "mgpusim-r9nano"`: the trace through the cycle-stepped port of MGPUSim's R9 Nano
/// path (`crate::cycle`), which has its own fixed configuration. Its metrics carry the event model's names.
fn cycle_replay(cfg: &Config) -> Result<Output, SimError> {
    use crate::cycle::machine::{read_rows, R9Nano, ReplayOptions};
    if cfg.multi.active() || !cfg.multi.apps.is_empty() {
        return Err(SimError::BadInput(
            "workload.trace.engine = \"mgpusim-r9nano\" models one GPU: it cannot run with the multi-GPU model".into(),
        ));
    }
    let started = std::time::Instant::now();
    let rows = read_rows(&cfg.workload.trace.path, cfg.workload.trace.gap_ns).map_err(|e| SimError::BadInput(e.0))?;
    let first = rows.iter().map(|r| r.cycle).min().unwrap_or(0);
    let tie_seed = Some(cfg.workload.trace.tie_seed).filter(|&s| s != 0);
    let mut machine = R9Nano::new(&rows, &ReplayOptions { tie_seed, ..ReplayOptions::default() });
    let r = machine.run();
    let wall = started.elapsed().as_secs_f64();
    // 1 GHz: a cycle is a nanosecond.
    let mut m = Metrics::default();
    m.float("time.total_ns", r.last_cycle as f64);
    m.float("time.kernel_ns", r.last_cycle.saturating_sub(first) as f64);
    for (name, c) in [("gpu0.l1tlb", r.l1_tlb), ("gpu0.l2tlb", r.l2_tlb)] {
        m.int(format!("{name}.hits"), c.hits);
        m.int(format!("{name}.misses"), c.misses);
        m.int(format!("{name}.mshr_hits"), c.mshr_hits);
        m.int(format!("{name}.accesses"), c.hits + c.misses + c.mshr_hits);
    }
    m.int("gpu0.line_accesses", r.accesses);
    m.int("sim.events", r.events);
    m.int("sim.seed", cfg.sim.seed);
    m.float("sim.wall_s", wall);
    m.float("sim.events_per_s", r.events as f64 / wall.max(1e-9));
    m.float("sim.total_wall_s", wall);
    Ok(Output { metrics: m, batches: None, faults: None, migrations: None, walks: None, allocations: None })
}

/// The baselines replay a warp trace as a device-memory program with its copies (`baselines`: the recorded
/// program with `workload.memcpy_inputs` and `memcpy_outputs`, which add the copies a recording without them
/// lacks, from its input bytes). Say before the run when that program does not exist, rather than report a
/// managed run, or a run without copies, as the copy-then-execute baseline: a recording of a managed program
/// (its allocations stay managed), or a device-memory recording without copies made before the header
/// recorded its input bytes (format version 1).
fn check_baseline_recording(cfg: &Config, managed: bool) -> Result<(), SimError> {
    if !(cfg.uvm.baselines && managed && cfg.workload.kind == workload::WorkloadKind::WarpTrace) {
        return Ok(());
    }
    // The recorded flags are in the header (the program built for the run may have them all managed).
    let path = &cfg.workload.warp_trace.path;
    let file = workload::tracefmt::TraceFile::open(path).map_err(|e| SimError::BadInput(e.0))?;
    let h = &file.header;
    if h.buffers.iter().any(|b| b.managed) {
        return Err(SimError::BadInput(format!(
            "uvm.baselines: {path} records a managed program, which has no copy-then-execute form to compare with; \
             record the device-memory program (workload.managed = false) and replay that with workload.managed = true"
        )));
    }
    let copies = h.ops.iter().any(|o| matches!(o, workload::tracefmt::HostRec::MemcpyH2d { .. }));
    if !copies && h.input_bytes.is_none() {
        return Err(SimError::BadInput(format!(
            "uvm.baselines: {path} records no copies, nor (an older recording, format version 1) which bytes are the \
             program's inputs, so its copy-then-execute baseline would copy nothing; record it again (the recording \
             then holds its input bytes), or with its copies (workload.memcpy_inputs = true, workload.memcpy_outputs = true)"
        )));
    }
    Ok(())
}

/// The legacy baselines of a managed run (seed paged-memory §2): the same
/// workload on device memory with its inputs copied first (copy-then-execute),
/// and with copy and kernel perfectly overlapped (the longer of the two).
fn baselines(cfg: &Config, managed_ps: Ps, m: &mut Metrics) -> Result<(), SimError> {
    let mut legacy = cfg.clone();
    legacy.workload.managed = false;
    legacy.workload.memcpy_inputs = true;
    legacy.workload.memcpy_outputs = true;
    // A program without managed memory never reaches the UVM driver, and the GPU reads its `[uvm]` options only
    // on a fault or for managed pages: the section is reset so that every managed variant of one system and
    // workload (fault modes, prefetchers, eviction, oversubscription) has one baseline, simulated once per process.
    legacy.uvm = UvmConfig::default();
    let (copy, kernel) = legacy_times(&legacy)?;
    let copy_then_execute = copy + kernel;
    let ideal = copy.max(kernel);
    let managed = managed_ps as f64 / PS_PER_NS as f64;
    m.float("baseline.copy_then_execute_ns", copy_then_execute);
    m.float("baseline.ideal_overlap_ns", ideal);
    m.float("baseline.slowdown_vs_copy", if copy_then_execute > 0.0 { managed / copy_then_execute } else { 0.0 });
    m.float("baseline.slowdown_vs_ideal", if ideal > 0.0 { managed / ideal } else { 0.0 });
    Ok(())
}

/// Copy-then-execute runs already simulated in this process, by configuration: a sweep's or an experiment's
/// managed runs of one workload differ only in `[uvm]`, so a worker process simulates their baseline once.
static LEGACY_TIMES: std::sync::Mutex<Vec<(Config, (f64, f64))>> = std::sync::Mutex::new(Vec::new());

/// At most this many baselines are kept (the oldest goes first); a config is a few KiB.
const LEGACY_TIMES_KEPT: usize = 64;

/// The copy and kernel times (ns) of the device-memory run `legacy`, from [`LEGACY_TIMES`] when it was simulated
/// before. Replays of trace files are always simulated (the file may have changed since).
fn legacy_times(legacy: &Config) -> Result<(f64, f64), SimError> {
    use workload::WorkloadKind as K;
    let memo = !matches!(legacy.workload.kind, K::Trace | K::WarpTrace | K::Accelsim);
    if memo {
        let kept = LEGACY_TIMES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, t)) = kept.iter().find(|(c, _)| c == legacy) {
            return Ok(*t);
        }
    }
    let l = simulate(legacy)?;
    let t = (l.get("time.memcpy_ns").unwrap_or(0.0), l.get("time.kernel_ns").unwrap_or(0.0));
    if memo {
        let mut kept = LEGACY_TIMES.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= LEGACY_TIMES_KEPT {
            kept.remove(0);
        }
        kept.push((legacy.clone(), t));
    }
    Ok(t)
}

/// The event loop's limits from the run-control section of the configuration.
fn run_options(cfg: &Config) -> RunOptions {
    RunOptions { stall_events: cfg.sim.stall_events, progress_every_s: cfg.sim.progress_every_s, max_events: cfg.sim.max_events }
}
