//! The world: one simulated system (host program + GPU) as a [`Model`] for
//! the run loop, and [`simulate`], which builds it from a config, runs it and
//! collects the metrics.

use crate::config::{Config, TranslationMode};
use crate::gpu::Gpu;
use crate::link::{Dir, Link};
use crate::sim::{self, EventQueue, Model, Ps, RunOptions, SimError, PS_PER_NS};
use crate::stats::Metrics;
use crate::uvm::ppr::Ppr;
use crate::uvm::prefetch::PrefetchPolicy;
use crate::uvm::{Next, Uvm};
use crate::workload::trace::{Record, TraceReader};
use crate::workload::{self, HostOp, Program};

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
    /// Pages pinned by thrashing mitigation reach their unpin deadline.
    UvmUnpin,
}

/// A trace being replayed: the reader and the record due next.
struct Replay {
    reader: TraceReader,
    gpu: u32,
    next: Option<Record>,
    first: Option<Ps>,
    done: Ps,
}

pub struct World {
    program: Program,
    pc: usize,
    pub gpu: Gpu,
    link: Link,
    memcpy_ps: Ps,
    memcpy_bytes: u64,
    done_at: Option<Ps>,
    replay: Option<Replay>,
    page_bytes: u64,
    uvm: Uvm,
    host_threads: u32,
    /// The APU page-fault path, in IOMMU mode (faults go there instead of the UVM driver).
    ppr: Option<Ppr>,
}

impl World {
    pub fn new(cfg: &Config, program: Program) -> World {
        let mut gpu = Gpu::new(cfg);
        let mut uvm = Uvm::new(&cfg.uvm, gpu.xlat.l1.len(), gpu.sms(), cfg.sim.seed);
        for b in &program.buffers {
            gpu.xlat.space.map(b);
            if b.managed {
                uvm.add_allocation(b.base >> 12, (b.base + b.bytes).div_ceil(4096));
            }
            if b.managed && cfg.workload.host_init {
                // The host program initialised the array before the kernels: CPU-resident and CPU-mapped.
                uvm.host_touch(b.base >> 12, (b.base + b.bytes).div_ceil(4096), cfg.workload.host_threads);
            }
        }
        uvm.apply_advice(&mut gpu.xlat.space.residency);
        World {
            program,
            pc: 0,
            gpu,
            link: Link::new(&cfg.link),
            memcpy_ps: 0,
            memcpy_bytes: 0,
            done_at: None,
            replay: None,
            page_bytes: cfg.translation.page_size.0,
            uvm,
            host_threads: cfg.workload.host_threads,
            ppr: (cfg.translation.mode == TranslationMode::Iommu).then(|| Ppr::new(&cfg.iommu.ppr)),
        }
    }

    /// Start replaying a trace: map every address, schedule the first record.
    fn start_replay(&mut self, path: &str, gpu: u32, now: Ps, q: &mut EventQueue<Ev>) -> Result<(), SimError> {
        let mut reader = TraceReader::open(path).map_err(|e| SimError::BadInput(e.0))?;
        self.gpu.xlat.space.map_identity(self.page_bytes);
        let next = reader.next_record().map_err(|e| SimError::BadInput(e.0))?;
        match next {
            Some(r) => q.push(r.time.max(now), Ev::Trace),
            None => q.push(now, Ev::Host),
        }
        self.replay = Some(Replay { reader, gpu, next, first: None, done: now });
        Ok(())
    }

    /// Issue every traced access due at `now`, then schedule the next one (or
    /// resume the host program once the last access is done).
    fn step_trace(&mut self, now: Ps, q: &mut EventQueue<Ev>) -> Result<(), SimError> {
        let rp = self.replay.as_mut().expect("a trace event means a replay is running");
        while let Some(r) = rp.next {
            if r.time > now {
                q.push(r.time, Ev::Trace);
                return Ok(());
            }
            if r.gpu == rp.gpu {
                if r.cu as usize >= self.gpu.sms() {
                    return Err(SimError::BadInput(format!(
                        "{}: cu {} does not exist: gpu.sms is {} (choose a preset with as many SMs as the traced GPU)",
                        rp.reader.position(),
                        r.cu,
                        self.gpu.sms()
                    )));
                }
                rp.first.get_or_insert(r.time);
                let done = self
                    .gpu
                    .replay_access(r.cu as usize, r.kind, r.vaddr, r.size, now, now)
                    .map_err(|va| SimError::Model(format!("{}: address {va:#x} is not mapped", rp.reader.position())))?;
                rp.done = rp.done.max(done);
            }
            rp.next = rp.reader.next_record().map_err(|e| SimError::BadInput(e.0))?;
        }
        // End of the trace: its span counts as kernel time; the host resumes when the last access is done.
        let (first, done) = (rp.first.unwrap_or(rp.done), rp.done);
        self.gpu.add_kernel_time(done - first);
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
                    self.memcpy_ps += end - now;
                    self.memcpy_bytes += bytes;
                    q.push(end, Ev::Host);
                    return Ok(());
                }
                HostOp::Launch(k) => {
                    if self.gpu.launch(k.clone(), now, q) {
                        return Ok(());
                    }
                }
                HostOp::Replay { path, gpu } => {
                    let (path, gpu) = (path.clone(), *gpu);
                    return self.start_replay(&path, gpu, now, q);
                }
                &HostOp::HostAccess { buffer, offset, bytes, write } => {
                    let b = self.program.buffers[buffer];
                    let end = if b.managed {
                        let (first, last) = ((b.base + offset) >> 12, (b.base + offset + bytes).div_ceil(4096));
                        let residency = &mut self.gpu.xlat.space.residency;
                        let end = self.uvm.host_access(now, first..last, write, self.host_threads, &mut self.link, residency);
                        self.after_uvm(q);
                        end
                    } else {
                        now
                    };
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

impl Model for World {
    type Event = Ev;

    fn handle(&mut self, now: Ps, ev: Ev, q: &mut EventQueue<Ev>) -> Result<(), SimError> {
        match ev {
            Ev::Warp(slot) => {
                self.gpu.run_warp(slot, now, q)?;
                for f in self.gpu.drain_faults() {
                    match self.ppr.as_mut() {
                        Some(ppr) => {
                            if let Some(t) = ppr.raise(&f) {
                                q.push(t, Ev::PprDone(f.vpn));
                            }
                        }
                        None => schedule(self.uvm.raise(f), q),
                    }
                }
            }
            Ev::UvmService => {
                let next = self.uvm.service(now, &mut self.link, &mut self.gpu.xlat.space.residency);
                self.after_uvm(q);
                schedule(next, q);
            }
            Ev::UvmUnpin => {
                self.uvm.unpin_due(now, &mut self.gpu.xlat.space.residency);
                self.after_uvm(q);
            }
            Ev::UvmBatchDone => {
                let (next, replay) = self.uvm.batch_done(now, &mut self.gpu.xlat.space.residency);
                if replay {
                    self.gpu.replay(now, q);
                }
                schedule(next, q);
            }
            Ev::PprDone(vpn) => {
                let ppr = self.ppr.as_mut().expect("PPR events only in IOMMU mode");
                ppr.done(vpn);
                let residency = &mut self.gpu.xlat.space.residency;
                if !residency.is_resident(vpn) {
                    residency.make_resident(vpn);
                }
                // The GPU retries: warps whose pages are all mapped run again.
                self.gpu.replay(now, q);
            }
            Ev::CtaDone(c) => {
                if self.gpu.cta_done(c, now, q) {
                    self.step_host(now, q)?;
                }
            }
            Ev::Host => self.step_host(now, q)?,
            Ev::Trace => self.step_trace(now, q)?,
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.done_at.is_some()
    }

    fn describe_waiting(&self) -> Vec<String> {
        let mut out = vec![format!("host program: at operation {} of {}", self.pc, self.program.ops.len())];
        if let Some(rp) = &self.replay {
            out.push(format!("trace replay: at {}", rp.reader.position()));
        }
        self.uvm.describe(&mut out);
        self.gpu.describe_waiting(&mut out);
        out
    }
}

impl World {
    /// After the driver changed GPU mappings: shoot down the blocks it left
    /// (evicted, taken back by the host, unpinned) in every GPU TLB, and
    /// schedule the unpin deadlines of newly pinned pages.
    fn after_uvm(&mut self, q: &mut EventQueue<Ev>) {
        if !self.uvm.shootdowns.is_empty() {
            self.gpu.xlat.shootdown(&self.uvm.shootdowns);
            self.uvm.shootdowns.clear();
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
    /// Per-migration records (`uvm.records = true`).
    pub migrations: Option<Vec<crate::uvm::MigrationRecord>>,
}

/// Run the system `cfg` describes; returns its metrics.
pub fn simulate(cfg: &Config) -> Result<Metrics, SimError> {
    simulate_full(cfg).map(|o| o.metrics)
}

/// Run the system `cfg` describes; returns its metrics and record tables.
pub fn simulate_full(cfg: &Config) -> Result<Output, SimError> {
    let program = workload::build(cfg).map_err(SimError::BadInput)?;
    let mut world = World::new(cfg, program);
    if cfg.uvm.prefetch.policy == PrefetchPolicy::Oracle && cfg.workload.managed {
        // Zheng's oracle: a first pass, demand paging only, records the order in which pages are first faulted.
        let mut first = cfg.clone();
        first.uvm.prefetch.policy = PrefetchPolicy::None;
        (first.uvm.records, first.uvm.baselines) = (false, false);
        let mut pass = World::new(&first, workload::build(&first).map_err(SimError::BadInput)?);
        pass.uvm.record_first_touch();
        let mut q = EventQueue::new();
        q.push(0, Ev::Host);
        sim::run(&mut pass, &mut q, &RunOptions { stall_events: cfg.sim.stall_events, progress_every_s: cfg.sim.progress_every_s })?;
        world.uvm.set_oracle(pass.uvm.first_touch_order());
    }
    let mut q = EventQueue::new();
    q.push(0, Ev::Host);
    let opts = RunOptions { stall_events: cfg.sim.stall_events, progress_every_s: cfg.sim.progress_every_s };
    let rep = sim::run(&mut world, &mut q, &opts)?;
    if cfg!(debug_assertions) {
        world.uvm.check_invariants(&world.gpu.xlat.space.residency).map_err(SimError::Model)?;
    }
    let mut m = Metrics::default();
    let end = world.done_at.unwrap_or(rep.end_ps);
    m.float("time.total_ns", end as f64 / PS_PER_NS as f64);
    m.float("time.kernel_ns", world.gpu.stats.kernel_ps as f64 / PS_PER_NS as f64);
    m.float("time.memcpy_ns", world.memcpy_ps as f64 / PS_PER_NS as f64);
    m.int("host.memcpy_bytes", world.memcpy_bytes);
    world.gpu.export(&mut m, "gpu0");
    world.link.export(&mut m, end);
    world.uvm.export(&mut m, &world.gpu.xlat.space.residency);
    world.gpu.remote.export(&mut m);
    if let Some(ppr) = &world.ppr {
        ppr.export(&mut m);
    }
    m.int("sim.events", rep.events);
    m.int("sim.seed", cfg.sim.seed);
    m.float("sim.wall_s", rep.wall_s);
    let wall = rep.wall_s.max(1e-9);
    m.float("sim.events_per_s", rep.events as f64 / wall);
    m.float("sim.warp_mem_insts_per_s", world.gpu.stats.warp_mem_insts as f64 / wall);
    if cfg.uvm.baselines && cfg.workload.managed {
        baselines(cfg, end, &mut m)?;
    }
    Ok(Output {
        metrics: m,
        batches: world.uvm.records.take(),
        faults: world.uvm.fault_records.take(),
        migrations: world.uvm.migrations.take(),
    })
}

/// The legacy baselines of a managed run (seed paged-memory §2): the same
/// workload on device memory with its inputs copied first (copy-then-execute),
/// and with copy and kernel perfectly overlapped (the longer of the two).
fn baselines(cfg: &Config, managed_ps: Ps, m: &mut Metrics) -> Result<(), SimError> {
    let mut legacy = cfg.clone();
    legacy.workload.managed = false;
    legacy.workload.memcpy_inputs = true;
    legacy.uvm.baselines = false;
    legacy.uvm.records = false;
    let l = simulate(&legacy)?;
    let (copy, kernel) = (l.get("time.memcpy_ns").unwrap_or(0.0), l.get("time.kernel_ns").unwrap_or(0.0));
    let copy_then_execute = copy + kernel;
    let ideal = copy.max(kernel);
    let managed = managed_ps as f64 / PS_PER_NS as f64;
    m.float("baseline.copy_then_execute_ns", copy_then_execute);
    m.float("baseline.ideal_overlap_ns", ideal);
    m.float("baseline.slowdown_vs_copy", if copy_then_execute > 0.0 { managed / copy_then_execute } else { 0.0 });
    m.float("baseline.slowdown_vs_ideal", if ideal > 0.0 { managed / ideal } else { 0.0 });
    Ok(())
}
