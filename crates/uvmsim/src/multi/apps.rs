//! Multi-application mode (`multi.apps`; seed multi-gpu §3.1.1.2, Table 4):
//! application i runs alone on GPU `apps_first_gpu + i`, all at once, sharing the host side
//! (the IOMMU and its TLB in ATS mode, the host MMU in GMMU mode, the links).
//!
//! How it works. Each application is an ordinary [`Program`] built from the
//! config with `workload.kind` set to its kind, its heap at its own virtual
//! range (`VA_BASE + gpu * APP_VA_STRIDE`): distinct ranges are distinct
//! address spaces whose translations can never share a key, which is what
//! tagging the shared TLBs by address space gives. Its buffers are mapped in
//! its GPU's address space only (unified memory placed by `multi.migration`,
//! as in single-application multi-GPU runs). Each application steps through
//! its host operations on its own (`Ev::App`, by GPU); its kernels run all their
//! CTAs on its GPU. An application that finishes re-runs from its first
//! operation (its pages and TLB entries stay warm) until every application
//! has finished once, as the seed does to keep the contention up; the run
//! ends then, and `app<gpu>.*` are the counters at the end of its first run.
//! An application alone on the same GPU (`apps_first_gpu`) has the same
//! addresses and hardware: the reference of the weighted speedup.

use super::{Multi, MultiConfig};
use crate::config::Config;
use crate::gpu::Gpu;
use crate::link::{Dir, Link};
use crate::sim::{ns_to_ps, EventQueue, Ps, PS_PER_NS};
use crate::stats::Metrics;
use crate::workload::{self, Buffer, HostOp, Program, WorkloadKind, VA_BASE};
use crate::world::Ev;
use crate::xlat::Tlb;

leaf!(Vec<WorkloadKind>);

/// Virtual-address distance between two applications' heaps (8 TiB): 32 of them fit
/// below 2^48 from `VA_BASE`, each with more room than any workload allocates.
pub const APP_VA_STRIDE: u64 = 1 << 43;

/// The `multi.apps` checks of [`MultiConfig::validate`].
pub fn validate(m: &MultiConfig, cfg: &Config) -> Result<(), (String, String)> {
    let l = &m.least_tlb;
    if !(1..=255).contains(&l.spill_chances) {
        return Err(("multi.least_tlb.spill_chances".into(), format!("must be between 1 and 255, got {}", l.spill_chances)));
    }
    if l.spill && (m.apps.is_empty() || !l.enabled || !l.tracker) {
        return Err((
            "multi.least_tlb.spill".into(),
            "needs multi.apps (multi-application mode), multi.least_tlb.enabled = true and multi.least_tlb.tracker = true".into(),
        ));
    }
    if m.apps.is_empty() {
        return Ok(());
    }
    if !m.active() {
        return Err(("multi.apps".into(), "needs the multi-GPU model: multi.gpus > 1 or multi.model_one_gpu = true".into()));
    }
    if m.apps.len() + m.apps_first_gpu as usize > m.gpus as usize {
        return Err((
            "multi.apps".into(),
            format!(
                "lists {} applications from GPU {} (multi.apps_first_gpu) but multi.gpus is {} (one GPU each)",
                m.apps.len(),
                m.apps_first_gpu,
                m.gpus
            ),
        ));
    }
    use WorkloadKind::*;
    if let Some(k) = m.apps.iter().find(|k| matches!(k, Trace | WarpTrace | Accelsim | PingPong | Shootdown)) {
        return Err((
            "multi.apps".into(),
            format!("`{}`: trace replays and host-interaction workloads cannot run as an application", k.name()),
        ));
    }
    if cfg.uvm.baselines {
        return Err(("uvm.baselines".into(), "must be false with multi.apps".into()));
    }
    if m.initial_placement != super::InitialPlacement::Host {
        return Err((
            "multi.initial_placement".into(),
            "must be \"host\" with multi.apps (an application's pages start on its GPU with multi.apps_resident = true)".into(),
        ));
    }
    Ok(())
}

/// A host operation in the user's terms (not its Rust variant), for messages.
fn host_op_name(op: &HostOp) -> &'static str {
    match op {
        HostOp::MemcpyH2D { .. } => "cudaMemcpy host-to-device",
        HostOp::MemcpyD2H { .. } => "cudaMemcpy device-to-host",
        HostOp::Launch(_) => "kernel launch",
        HostOp::Replay { .. } => "trace replay",
        HostOp::Shootdown { .. } => "TLB shootdown",
        HostOp::HostAccess { .. } => "host access to managed memory",
        HostOp::HostCompute { .. } => "host compute",
        HostOp::PrefetchAsync { .. } => "cudaMemPrefetchAsync",
    }
}

/// Counters of one application at the end of its first run.
#[derive(Debug, Clone, Copy, Default)]
struct Snapshot {
    end: Ps,
    warp_insts: u64,
    l2_accesses: u64,
    l2_hits: u64,
    /// [ATS requests, IOMMU-TLB hits, remote hits] (ATS mode).
    iommu: Option<[u64; 3]>,
    far_faults: u64,
}

struct App {
    gpu: usize,
    program: Program,
    pc: usize,
    /// Runs started.
    runs: u32,
    run_start: Ps,
    first: Option<Snapshot>,
}

/// The applications of a multi-application run.
pub struct Apps {
    apps: Vec<App>,
    /// The GPU of the first application.
    first_gpu: usize,
    /// Applications that have not finished once.
    remaining: usize,
    core_mhz: f64,
}

impl Apps {
    /// Build every application's program (application i's heap at its own range).
    pub fn build(cfg: &Config) -> Result<Apps, String> {
        let mut apps = vec![];
        let first_gpu = cfg.multi.apps_first_gpu as usize;
        for (i, &kind) in cfg.multi.apps.iter().enumerate() {
            let gpu = first_gpu + i;
            let mut c = cfg.clone();
            c.workload.kind = kind;
            let program = workload::build_at(&c, VA_BASE + gpu as u64 * APP_VA_STRIDE)
                .map_err(|e| format!("multi.apps[{i}] (`{}`): {e}", kind.name()))?;
            if let Some(op) = program.ops.iter().find(|o| {
                !matches!(o, HostOp::Launch(_) | HostOp::HostCompute { .. } | HostOp::MemcpyH2D { .. } | HostOp::MemcpyD2H { .. })
            }) {
                return Err(format!(
                    "multi.apps[{i}] (`{}`): its host operation {} does not run in multi-application mode",
                    kind.name(),
                    host_op_name(op)
                ));
            }
            apps.push(App { gpu, program, pc: 0, runs: 1, run_start: 0, first: None });
        }
        Ok(Apps { remaining: apps.len(), apps, first_gpu, core_mhz: cfg.gpu.core_mhz })
    }

    /// Map each application's buffers in its GPU's address space only (unified memory in 4 KiB
    /// pages); with `resident`, every page starts in that GPU's memory with a valid PTE.
    pub fn map(&self, gpus: &mut [Gpu], multi: &mut Multi, resident: bool) {
        for app in &self.apps {
            let g = app.gpu;
            for b in &app.program.buffers {
                gpus[g].xlat.space.map(&Buffer { managed: true, page_bytes: 4096, ..*b });
                if !resident {
                    continue;
                }
                for vpn in b.base >> 12..(b.base + b.bytes).div_ceil(4096) {
                    gpus[g].xlat.space.residency.make_resident(vpn);
                    let p = multi.dir.page(vpn);
                    (p.owner, p.copies, p.mapped, p.access) = (g as u8, 1 << g, 1 << g, super::access_bit(g));
                }
            }
        }
    }

    /// Start every application at `now`.
    pub fn start(&mut self, gpus: &mut [Gpu], link: &mut Link, multi: &Multi, now: Ps, q: &mut EventQueue<Ev>) -> bool {
        let mut done = false;
        for i in 0..self.apps.len() {
            done |= self.step(self.first_gpu + i, gpus, link, multi, now, q);
        }
        done
    }

    /// Run the host operations of GPU `i`'s application from `now` until one has to wait;
    /// true once every application has finished its first run (the run ends).
    pub fn step(&mut self, i: usize, gpus: &mut [Gpu], link: &mut Link, multi: &Multi, now: Ps, q: &mut EventQueue<Ev>) -> bool {
        let app = &mut self.apps[i - self.first_gpu];
        loop {
            let Some(op) = app.program.ops.get(app.pc) else {
                if app.first.is_none() {
                    app.first = Some(snapshot(i, &gpus[i], multi, now));
                    self.remaining -= 1;
                }
                if self.remaining == 0 {
                    return true;
                }
                if now == app.run_start {
                    return false; // a run that takes no time is not repeated
                }
                // Re-run until the longest application ends (§3.1.1.2).
                (app.pc, app.runs, app.run_start) = (0, app.runs + 1, now);
                continue;
            };
            app.pc += 1;
            match op {
                HostOp::Launch(k) => {
                    if gpus[i].launch_part(k.clone(), 0, 1, k.ctas(), now, q) {
                        return false;
                    }
                }
                &HostOp::HostCompute { ns } => {
                    q.push(now + ns_to_ps(ns), Ev::App(i as u32));
                    return false;
                }
                &HostOp::MemcpyH2D { bytes } => {
                    let (_, end) = link.transfer(Dir::HostToDevice, bytes, now, now);
                    q.push(end, Ev::App(i as u32));
                    return false;
                }
                &HostOp::MemcpyD2H { bytes } => {
                    let (_, end) = link.transfer(Dir::DeviceToHost, bytes, now, now);
                    q.push(end, Ev::App(i as u32));
                    return false;
                }
                _ => unreachable!("checked in Apps::build"),
            }
        }
    }

    /// The progress line's note: how many applications have ended their first run (the run ends when all
    /// have) and how often the others re-ran meanwhile, so that a mix whose short application re-runs
    /// thousands of times while a long one finishes says why it takes long.
    pub fn progress_note(&self) -> String {
        let ended = self.apps.len() - self.remaining;
        let reruns: u64 = self.apps.iter().map(|a| u64::from(a.runs) - 1).sum();
        format!("; applications: {ended} of {} ended their first run, {reruns} re-runs", self.apps.len())
    }

    /// `app<i>.*` metrics (docs/metrics.md "Multi-application").
    pub fn export(&self, m: &mut Metrics) {
        m.int("apps.count", self.apps.len() as u64);
        for app in &self.apps {
            let p = format!("app{}", app.gpu);
            let s = app.first.unwrap_or_default();
            let ns = s.end as f64 / PS_PER_NS as f64;
            m.float(format!("{p}.runtime_ns"), ns);
            m.int(format!("{p}.instructions"), s.warp_insts);
            let cycles = ns * self.core_mhz / 1000.0;
            m.float(format!("{p}.ipc"), if cycles > 0.0 { s.warp_insts as f64 / cycles } else { 0.0 });
            m.int(format!("{p}.runs"), app.runs as u64);
            m.int(format!("{p}.far_faults"), s.far_faults);
            m.int(format!("{p}.l2tlb.accesses"), s.l2_accesses);
            m.ratio(format!("{p}.l2tlb.hit_rate"), s.l2_hits, s.l2_accesses);
            if let Some([req, hits, remote]) = s.iommu {
                m.int(format!("{p}.iommu.requests"), req);
                m.ratio(format!("{p}.iommu.tlb_hit_rate"), hits, req);
                m.ratio(format!("{p}.iommu.remote_hit_rate"), remote, req);
            }
        }
    }
}

fn snapshot(i: usize, gpu: &Gpu, multi: &Multi, now: Ps) -> Snapshot {
    let l2 = gpu.xlat.l2.as_ref().map(|t| (t.stats.accesses, t.stats.hits)).unwrap_or_default();
    Snapshot {
        end: now,
        warp_insts: gpu.stats.warp_insts,
        l2_accesses: l2.0,
        l2_hits: l2.1,
        iommu: multi.iommu.as_ref().and_then(|io| io.per_gpu.get(i).copied()),
        far_faults: multi.stats.faults[i],
    }
}

/// Least-TLB spilling: apply the spills and removals queued while a GPU ran to the other GPUs' L2 TLBs.
pub fn apply_spills(m: &mut Multi, gpus: &mut [Gpu], now: Ps) {
    let Some(io) = m.iommu.as_mut() else { return };
    if io.least.as_ref().is_some_and(|l| !l.ops.is_empty()) {
        let mut l2s: Vec<&mut Tlb> = gpus.iter_mut().map(|g| g.xlat.l2.as_mut().expect("validated: Least-TLB has L2 TLBs")).collect();
        io.apply_spills(&mut l2s, now);
    }
}

#[cfg(test)]
mod tests {
    use crate::stats::Metrics;
    use crate::world::simulate;

    /// A small ATS system (4 SMs per GPU, 32-entry L2 TLBs, a 64-entry IOMMU TLB) with small workloads.
    fn run(extra: &[&str]) -> Metrics {
        simulate(&config(extra)).unwrap()
    }

    fn config(extra: &[&str]) -> crate::config::Config {
        let mut o: Vec<String> = [
            "gpu.sms=4",
            "translation.mode=iommu",
            "iommu.tlb_entries=64",
            "iommu.tlb_ways=16",
            "gpu.l2tlb.entries=32",
            "gpu.l2tlb.ways=16",
            "multi.migration=first-touch",
            "multi.oracle.no_migration_latency=true",
            "workload.stencil2d.nx=256",
            "workload.stencil2d.ny=256",
            "workload.stencil2d.threads=16384",
            "workload.stream.elements=65536",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        o.extend(extra.iter().map(|s| s.to_string()));
        crate::config::resolve(&[], &o).unwrap()
    }

    fn app(m: &Metrics, i: usize, k: &str) -> f64 {
        m.get(&format!("app{i}.{k}")).unwrap_or_else(|| panic!("app{i}.{k} missing"))
    }

    const SAME: [&str; 6] = ["runtime_ns", "instructions", "ipc", "l2tlb.hit_rate", "iommu.tlb_hit_rate", "far_faults"];

    /// With every shared resource unlimited (IOMMU TLB, walkers, no migration cost, and no
    /// driver batches: the IOMMU's one page-request queue would make them wait for each other) two
    /// applications cannot slow each other down: each one's first-run metrics equal its
    /// alone run's (alone = the same system with the other GPU idle). Stencil2d is the
    /// shorter: it re-runs while stream finishes, and its metrics stay those of its
    /// first run; stream's runtime is the run's.
    #[test]
    fn isolated_applications_equal_their_alone_runs() {
        let inf =
            ["multi.gpus=2", "multi.oracle.infinite_iommu_tlb=true", "multi.oracle.infinite_walkers=true", "multi.fault_batch_size=0"];
        let both = run(&[&inf[..], &["multi.apps=[\"stencil2d\", \"stream\"]"]].concat());
        let st = run(&[&inf[..], &["multi.apps=[\"stencil2d\"]"]].concat());
        let sm = run(&[&inf[..], &["multi.apps=[\"stream\"]", "multi.apps_first_gpu=1"]].concat());
        for k in SAME {
            assert_eq!(app(&both, 0, k), app(&st, 0, k), "stencil2d {k}");
            assert_eq!(app(&both, 1, k), app(&sm, 1, k), "stream {k}");
        }
        assert!(sm.get("app0.runs").is_none() && sm.get("gpu0.warp_insts") == Some(0.0), "GPU 0 idles");
        assert!(app(&both, 0, "runtime_ns") < app(&both, 1, "runtime_ns"));
        assert!(app(&both, 0, "runs") >= 2.0 && app(&both, 1, "runs") == 1.0);
        assert!(both.get("gpu0.warp_insts").unwrap() > app(&both, 0, "instructions"), "the re-runs count on the GPU, not the app");
        assert_eq!(both.get("time.kernel_ns"), Some(app(&both, 1, "runtime_ns")));
        assert_eq!(app(&st, 0, "runs"), 1.0);
        // Alone, stream runs once: its first run is the whole of GPU 1's work.
        assert_eq!(Some(app(&sm, 1, "instructions")), sm.get("gpu1.warp_insts"));
        // IPC: warp instructions per core cycle (gpu.core_mhz = 1000: one cycle per ns).
        assert_eq!(app(&sm, 1, "ipc"), app(&sm, 1, "instructions") / app(&sm, 1, "runtime_ns"));
    }

    /// With the 64-entry shared IOMMU TLB, four copies of stencil2d compete for it: each
    /// one's IOMMU-TLB hit rate falls below its alone run's, and none runs faster.
    #[test]
    fn shared_iommu_tlb_contention() {
        let alone = run(&["multi.gpus=4", "multi.apps=[\"stencil2d\"]"]);
        let mix = run(&["multi.gpus=4", "multi.apps=[\"stencil2d\", \"stencil2d\", \"stencil2d\", \"stencil2d\"]"]);
        for i in 0..4 {
            assert!(app(&mix, i, "iommu.tlb_hit_rate") < app(&alone, 0, "iommu.tlb_hit_rate"), "app {i}");
            assert!(app(&mix, i, "runtime_ns") >= app(&alone, 0, "runtime_ns"), "app {i}");
        }
        // Same seed and config: identical metrics.
        let again = run(&["multi.gpus=4", "multi.apps=[\"stencil2d\", \"stencil2d\", \"stencil2d\", \"stencil2d\"]"]);
        let strip = |m: &Metrics| -> Vec<(String, f64)> {
            m.0.iter().filter(|(k, _)| !k.starts_with("sim.") || k.as_str() == "sim.events").map(|(k, v)| (k.clone(), v.as_f64())).collect()
        };
        assert_eq!(strip(&mix), strip(&again));
    }

    /// Least-TLB with spilling runs in a 4-application mix: entries spill, remote hits
    /// find them (moving them home), and the result is deterministic.
    #[test]
    fn least_tlb_spilling_runs() {
        let set = [
            "multi.gpus=4",
            "multi.apps=[\"stencil2d\", \"stream\", \"stencil2d\", \"stream\"]",
            "multi.least_tlb.enabled=true",
            "multi.least_tlb.spill=true",
            // Remote lookups faster than a walk (this config's walks are short), so remote hits answer.
            "multi.least_tlb.remote_latency_ns=20",
        ];
        let m = run(&set);
        assert!(m.get("multi.least_tlb.spills").unwrap() > 0.0);
        assert!(m.get("multi.least_tlb.spill_hits").unwrap() > 0.0);
        // Separate address spaces: every remote hit is on a spilled entry. The two counts are taken
        // at different moments: a remote hit at the lookup, a spill hit when the requester's L2
        // fills the key and takes the copy from its holder. The walk racing the lookup can bring
        // that fill first, and a holder can evict its copy before it: close, not equal.
        let (spill, remote) = (m.get("multi.least_tlb.spill_hits").unwrap(), m.get("multi.least_tlb.remote_hits").unwrap());
        assert!((spill - remote).abs() <= 0.1 * remote, "{spill} spill hits, {remote} remote hits");
        let remote: f64 = (0..4).map(|i| app(&m, i, "iommu.remote_hit_rate")).sum();
        assert!(remote > 0.0);
        let again = run(&set);
        assert_eq!(m.get("sim.events"), again.get("sim.events"));
        assert_eq!(m.get("time.kernel_ns"), again.get("time.kernel_ns"));
    }

    /// apps_resident: the pages start on the application's GPU, so its run has no far fault.
    #[test]
    fn resident_pages_do_not_fault() {
        let cold = run(&["multi.gpus=2", "multi.apps=[\"stream\", \"stencil2d\"]"]);
        let warm = run(&["multi.gpus=2", "multi.apps=[\"stream\", \"stencil2d\"]", "multi.apps_resident=true"]);
        for i in 0..2 {
            assert!(app(&cold, i, "far_faults") > 0.0);
            assert_eq!(app(&warm, i, "far_faults"), 0.0);
            assert!(app(&warm, i, "runtime_ns") < app(&cold, i, "runtime_ns"));
        }
        assert_eq!(warm.get("multi.far_faults"), Some(0.0));
    }

    /// The applications' page moves go through the multi-GPU model: with records, one migrations row each, on
    /// the application's GPU (here from the host, taking no time under the oracle); resident pages never move.
    #[test]
    fn applications_page_moves_are_migrations_rows() {
        let set = ["multi.gpus=2", "multi.apps=[\"stream\", \"stencil2d\"]", "uvm.records=true"];
        let cold = crate::world::simulate_full(&config(&set)).unwrap();
        let rows = cold.migrations.unwrap();
        assert_eq!(rows.len() as f64, cold.metrics.get("multi.migrations").unwrap());
        for g in 0..2 {
            assert!(rows.iter().any(|r| r.gpu == g), "GPU {g}'s application moved pages");
        }
        assert!(rows.iter().all(|r| r.direction == "h2d" && r.src_gpu == -1 && r.start_ns == r.end_ns));
        let warm = crate::world::simulate_full(&config(&[&set[..], &["multi.apps_resident=true"]].concat())).unwrap();
        assert_eq!(warm.migrations.map(|r| r.len()), Some(0));
    }

    /// `apps_resident` places every page a buffer touches, its partly used last one too: stream's
    /// arrays of 1000 doubles are 8000 B, pages 0 and 1 of each (2 MiB-aligned) buffer.
    #[test]
    fn resident_buffers_hold_their_partly_used_last_page() {
        let cfg = config(&["multi.gpus=2", "multi.apps=[\"stream\"]", "workload.stream.elements=1000"]);
        let apps = super::Apps::build(&cfg).unwrap();
        let mut gpus: Vec<crate::gpu::Gpu> = (0..2).map(|i| crate::gpu::Gpu::with_id(&cfg, i)).collect();
        let mut multi = crate::multi::Multi::new(&cfg, None);
        apps.map(&mut gpus, &mut multi, true);
        let buffers = &apps.apps[0].program.buffers;
        assert_eq!(buffers.len(), 3);
        for b in buffers {
            let first = b.base >> 12;
            assert_eq!((b.bytes, b.base % 4096), (8000, 0));
            for vpn in [first, first + 1] {
                assert!(gpus[0].xlat.space.residency.is_resident(vpn), "page {vpn:#x}");
                let p = *multi.dir.page(vpn);
                assert_eq!((p.owner, p.copies, p.mapped, p.access), (0, 1, 1, crate::multi::access_bit(0)));
            }
            assert!(!gpus[0].xlat.space.residency.is_resident(first + 2));
        }
    }

    #[test]
    fn a_host_operation_apps_cannot_run_is_named_in_user_terms() {
        // Validation refuses such kinds first; build's own check still speaks the user's terms.
        let mut cfg = crate::config::resolve(&[], &["multi.gpus=2".into(), "multi.apps=[\"fir\"]".into()]).unwrap();
        cfg.multi.apps = vec![crate::workload::WorkloadKind::PingPong];
        let e = super::Apps::build(&cfg).err().expect("ping-pong's host accesses do not run in multi-application mode");
        assert!(e.starts_with("multi.apps[0] (`ping-pong`): its host operation host access to managed memory does not run"), "{e}");
    }

    #[test]
    fn bad_app_lists_name_the_key() {
        let e = |o: &[&str]| crate::config::resolve(&[], &o.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap_err();
        assert!(e(&["multi.gpus=2", "multi.apps=[\"fir\", \"fir\", \"fir\"]"]).to_string().contains("multi.apps"));
        assert!(e(&["multi.gpus=2", "multi.apps=[\"trace\"]"]).to_string().contains("multi.apps"));
        // Kinds by the names the user gives them, not the Rust variants.
        for (kind, name) in [("trace", "`trace`"), ("ping-pong", "`ping-pong`"), ("warp-trace", "`warp-trace`")] {
            let msg = e(&["multi.gpus=2", &format!("multi.apps=[\"fir\", \"{kind}\"]")]).to_string();
            assert!(msg.starts_with(&format!("--set: key `multi.apps`: {name}: ")), "{msg}");
        }
        assert!(e(&["multi.gpus=2", "multi.apps=[\"no-such\"]"]).to_string().contains("multi.apps"));
        assert!(e(&["multi.gpus=2", "multi.apps=[\"fir\", \"fir\"]", "multi.apps_first_gpu=1"]).to_string().contains("multi.apps"));
        assert!(e(&["multi.apps=[\"fir\"]"]).to_string().contains("multi.apps"), "one GPU without the model");
    }

    /// IPC is per core cycle: at 2,000 MHz a first run that ends at 1,000 ns took 2,000 cycles, and
    /// 500 warp instructions in it are 0.25 per cycle.
    #[test]
    fn ipc_counts_core_cycles() {
        let cfg = config(&["multi.gpus=2", "multi.apps=[\"stream\"]", "gpu.core_mhz=2000", "workload.stream.elements=1000"]);
        let mut apps = super::Apps::build(&cfg).unwrap();
        apps.apps[0].first = Some(super::Snapshot { end: 1_000_000, warp_insts: 500, ..Default::default() });
        let mut m = Metrics::default();
        apps.export(&mut m);
        assert_eq!((app(&m, 0, "runtime_ns"), app(&m, 0, "ipc")), (1000.0, 0.25));
    }
}
