//! The GPU: SMs with warp slots, the CTA scheduler, the warp issue loop and
//! the coalescer, in front of translation ([`Translator`]) and the data
//! hierarchy ([`MemSystem`]).
//!
//! How it works: a kernel's CTAs go round-robin to SMs with enough free warp
//! slots. Each resident warp is an event source: when it is ready it issues
//! through its SM's issue port (one instruction per `issue_cycles`), and
//! keeps issuing inline while its next ready time is earlier than every
//! pending event (same result as scheduling an event, without the heap
//! traffic). Loads do not block: a warp continues until a `Wait` needs a load
//! that has not returned, then yields to the other warps. A CTA retires when
//! its last warp has exited and its accesses are done, freeing its slots for
//! the next CTA.
//!
//! Warp scheduling: `gto` (greedy-then-oldest, GPGPU-Sim's default) lets the
//! issuing warp run on through instructions and short ALU stalls, then the
//! earliest-ready warp goes; `time-order` issues strictly in order of ready
//! time (one event per instruction under contention, slower). The issue port
//! keeps a window of slots, so a warp that ran ahead leaves the slots of its
//! stalls to the warps that were ready then.

pub(crate) mod coalesce;
mod port;
pub mod vmem;

pub use coalesce::{coalesce, Lines};
use port::{IssuePort, SlotLen};
use vmem::VmemPath;

use crate::config::{Config, CtaDispatch, WarpScheduler};
use crate::mem::MemSystem;
use crate::multi::{Locate, Multi};
use crate::sim::{Clock, EventQueue, Ps, SimError};
use crate::stats::Metrics;
use crate::uvm::remote::RemoteAccess;
use crate::uvm::{Fault, FaultMode, Uvm};
use crate::workload::{KernelSpec, Lanes, MemKind, Op, WarpId, WarpStream, MAX_LANES};
use crate::world::Ev;
use crate::xlat::space::REMOTE_PA;
use crate::xlat::{Translator, Xlat};
use rustc_hash::FxHashMap;

/// The part of memory instruction `op` (lanes in `scratch` if explicit) that
/// touches the pages of `faults`: explicit lanes for the re-execution. With `split`
/// (multi-GPU), a lane whose access crosses into the next page and faulted on only one
/// of the two keeps only its part on that page (the lane's size within it, so the same
/// line for an access of at most a line):
/// kept whole, it needed both pages mapped at once, which two pages moving between GPUs
/// under on-touch migration may never be (sad's unaligned 32-byte rows never finished).
fn narrow(op: Op, scratch: &[u64; MAX_LANES], faults: &[Fault], split: bool) -> (Op, Box<[u64]>) {
    let Op::Mem { kind, lanes, bytes } = op else { return (op, Box::default()) };
    let len = u64::from(bytes.max(1));
    let faulted = |p: u64| faults.iter().any(|f| f.vpn == p);
    if let Lanes::Strided { base, stride, n: n @ 1.. } = lanes {
        let end = (u64::from(n) - 1).checked_mul(stride).and_then(|d| base.checked_add(d)).and_then(|a| a.checked_add(len - 1));
        if let Some(end) = end.filter(|&e| e >> 12 == base >> 12 && faulted(base >> 12)) {
            // Every lane is on the one faulted page (most instructions), kept whole.
            debug_assert!(end >= base);
            if !split && (stride <= 32 || stride >= len) {
                // One GPU: the instruction itself re-executes. Its lanes ascend and are at
                // most a minimal line apart, or do not overlap, so `coalesce` gives the lines
                // the explicit lanes would (sorted, each once).
                return (op, Box::default());
            }
            let lanes: Box<[u64]> = (0..u64::from(n)).map(|i| base + i * stride).collect();
            return (Op::Mem { kind, lanes: Lanes::Explicit { n }, bytes }, lanes);
        }
    }
    let mut out = [0u64; MAX_LANES];
    let mut n = 0;
    let (count, lane) = match lanes {
        Lanes::Strided { base, stride, n } => (n as usize, (base, stride, false)),
        Lanes::Explicit { n } => (n as usize, (0, 0, true)),
    };
    // Lanes mostly share a page: remember the last page's answer.
    let mut memo = (u64::MAX, false);
    let mut on_faulted = |p: u64| {
        if memo.0 != p {
            memo = (p, faulted(p));
        }
        memo.1
    };
    for (i, &x) in scratch.iter().enumerate().take(count) {
        let a = if lane.2 { x } else { lane.0 + i as u64 * lane.1 };
        let (first, last) = (a >> 12, (a + len - 1) >> 12);
        let (head, tail) = (on_faulted(first), first != last && on_faulted(last));
        if head || tail {
            // Only an access over exactly two pages is split (a longer one runs again whole).
            out[n] = match (split && last == first + 1, head, tail) {
                (true, true, false) => (last << 12) - len,
                (true, false, true) => last << 12,
                _ => a,
            };
            n += 1;
        }
    }
    (Op::Mem { kind, lanes: Lanes::Explicit { n: n as u32 }, bytes }, out[..n].into())
}

/// The lane addresses a saved instruction needs when it re-executes: only an
/// explicit-lane memory op reads `scratch` (strided lanes are computed), so
/// only its `n` lanes are kept (an empty box allocates nothing).
fn saved_lanes(op: &Op, scratch: &[u64; MAX_LANES]) -> Box<[u64]> {
    match *op {
        Op::Mem { lanes: Lanes::Explicit { n }, .. } => scratch[..n as usize].into(),
        _ => Box::default(),
    }
}

/// GMMU multi-GPU: the next instruction `w` re-executes may have lanes on pages whose far
/// fault is still outstanding (in `held`, not mapped). Their requests wait in the L2 TLB's
/// MSHR until that page's answer (`Gpu::replay_page`), so they are not looked up again: they
/// go back to `pending` (and their pages to `faulted`), and only the other lanes issue. A warp
/// woken by one page's answer thus completes the lanes on it and sleeps on at its next
/// dependency for the rest, without re-translating every held lane at each answer (which
/// doubled PageRank's line accesses under access counters). A lane whose access crosses into
/// the next page (an unaligned one, as sad's 32-byte reference rows) is split at the page
/// boundary when only one of its pages is held: each part is its own page's request. Kept
/// whole, it needed both pages mapped at once, and two pages ping-ponging between four GPUs
/// under on-touch migration never were (the run never ended). None: nothing parked;
/// Some(true): every lane parked (nothing to issue); Some(false): split, the other lanes issue now.
#[cold]
fn park_held(w: &mut Warp, held: &rustc_hash::FxHashSet<u64>, residency: &crate::xlat::space::Residency) -> Option<bool> {
    let Some(&(Op::Mem { kind, lanes: Lanes::Explicit { .. }, bytes }, ref lanes)) = w.redo.front() else {
        return None;
    };
    // Lanes mostly share a page: remember the last page's answer (one hash lookup per page run).
    let mut memo = (u64::MAX, false);
    let mut parked = |p: u64| {
        if memo.0 != p {
            memo = (p, held.contains(&p) && !residency.is_mapped(p));
        }
        memo.1
    };
    let len = u64::from(bytes.max(1));
    // What each lane does, found once (a hash lookup per page): it issues now, waits whole, or
    // is split at its page boundary with its head or its tail waiting.
    const GO: u8 = 0;
    const WAIT: u8 = 1;
    const HEAD_WAITS: u8 = 2;
    const TAIL_WAITS: u8 = 3;
    debug_assert!(lanes.len() <= MAX_LANES, "a split never adds lanes to a part");
    let mut class = [GO; MAX_LANES];
    let (mut n_wait, mut n_go) = (0, 0);
    for (c, &a) in class.iter_mut().zip(lanes.iter()) {
        let (p0, p1) = (a >> 12, (a + len - 1) >> 12);
        *c = match (parked(p0), p0 != p1 && parked(p1)) {
            (false, false) => GO,
            // Split at the boundary (an access over exactly two pages): each part, `len` bytes
            // within its page, touches the same line as the original part there when the access
            // is at most a line long (every generator's default); a longer one may touch one more.
            (true, false) if p1 == p0 + 1 => HEAD_WAITS,
            (false, true) if p1 == p0 + 1 => TAIL_WAITS,
            // Both pages held, or a longer access with one held: the lane waits whole.
            _ => WAIT,
        };
        n_wait += u32::from(*c != GO);
        n_go += u32::from(*c != WAIT);
    }
    if n_wait == 0 {
        return None;
    }
    let lanes = &lanes[..];
    let mut last = u64::MAX;
    for (&c, &a) in class.iter().zip(lanes) {
        // The page the waiting part is on: a whole lane's first page (as before the split), a tail's next one.
        let p = match c {
            GO => continue,
            TAIL_WAITS => (a >> 12) + 1,
            _ => a >> 12,
        };
        if p != last && !w.faulted.contains(&p) {
            w.faulted.push(p);
        }
        last = p;
    }
    w.epoch = residency.refault_epoch;
    if n_go == 0 {
        // Every lane waits whole: the instruction moves over as it is, without a copy.
        let ins = w.redo.pop_front().expect("checked above");
        w.pending.push(ins);
        return Some(true);
    }
    // Exact capacities: a boxed slice made from them needs no reallocation.
    let (mut wait, mut go) = (Vec::with_capacity(n_wait as usize), Vec::with_capacity(n_go as usize));
    for (&c, &a) in class.iter().zip(lanes) {
        let boundary = ((a >> 12) + 1) << 12;
        match c {
            GO => go.push(a),
            WAIT => wait.push(a),
            HEAD_WAITS => {
                wait.push(boundary - len);
                go.push(boundary);
            }
            _ => {
                go.push(boundary - len);
                wait.push(boundary);
            }
        }
    }
    let op = |n: usize| Op::Mem { kind, lanes: Lanes::Explicit { n: n as u32 }, bytes };
    w.pending.push((op(wait.len()), wait.into_boxed_slice()));
    *w.redo.front_mut().expect("checked above") = (op(go.len()), go.into_boxed_slice());
    Some(false)
}

/// Multi-GPU: whether a warp about to sleep for its far-faulted instructions has no answer
/// due (`Multi::nothing_to_wait_for`); it then re-executes them at once.
#[cold]
fn no_answer_due(place: Option<&Multi>, gpu: u32, faulted: &[u64], raised: &[Fault], xlat: &Translator) -> bool {
    place.is_some_and(|m| m.nothing_to_wait_for(gpu, faulted, raised, xlat.far_pending.as_ref(), &xlat.space.residency))
}

/// One GPU with the UVM driver: whether a warp about to sleep for its far-faulted instructions
/// has no fault left in the driver's hands (`Uvm::in_service` for its µTLB `utlb`: buffered, in
/// service or held at the µTLB; `raised`: this run's faults, not yet written). A sleeping warp
/// wakes only at a replay, and a replay comes only while some fault is outstanding. A warp that
/// went on with independent work after its faults (blas-gemm's stores of its C tile, then its
/// exit) and reaches its wait after the replay that ended the last of them would sleep until
/// some other warp's fault brought a replay, or for ever at the end of a kernel (a lost wake-up:
/// the driver idle, the warp asleep on mapped pages). The replay retried its held accesses
/// when it ended them (spec/uvm-driver.md: every fault ends serviced, cancelled or flushed, and
/// a replay wakes its warps), so it re-executes at once, and faults again on what is missing
/// (a page evicted, or a fault dropped). Mapped is not enough: a store to a read-only duplicate
/// faults on a mapped page.
#[cold]
fn no_fault_outstanding(uvm: Option<&Uvm>, utlb: u32, faulted: &[u64], raised: &[Fault]) -> bool {
    uvm.is_some_and(|u| !faulted.iter().any(|&p| u.in_service(utlb, p) || raised.iter().any(|f| f.vpn == p)))
}

/// Prefetch the cache line at `p` (a hint: never faults, whatever `p` is).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch instruction does not access memory architecturally and never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Longest stall (in cycles) a greedy warp runs through inline: well inside
/// the issue port's 64-slot window, longer than ALU dependency chains.
const SHORT_STALL_CYCLES: u64 = 32;

/// A sleeping warp and the page it was found waiting for at the last replay
/// (`UNKNOWN`: not checked since it fell asleep, or voided).
#[derive(Debug, Clone, Copy)]
struct Sleeper {
    slot: u32,
    /// Its SM's µTLB (fixed for the warp's life): `resume` checks the page it stopped at
    /// without reading the warp.
    utlb: u32,
    /// `UNKNOWN`, or the last page of the warp's `faulted` list, found missing when noted.
    on: u64,
    /// The pages of the warp's `faulted` list when it fell asleep (a sleeping warp's list
    /// only shrinks, so this stays a superset): `requeue_waiters` skips, without touching
    /// the warp, every sleeper whose filter rules the page out.
    pages: PageFilter,
}

impl Sleeper {
    const UNKNOWN: u64 = u64::MAX;

    fn new(slot: u32, utlb: usize, faulted: &[u64]) -> Sleeper {
        Sleeper { slot, utlb: utlb as u32, on: Sleeper::UNKNOWN, pages: PageFilter::of(faulted) }
    }
}

/// A 64-bit Bloom filter of page numbers (one bit per page): `may_hold` is true for
/// every page added, and for few others (a sleeping warp waits for a handful of pages).
/// 64 bits keep a `Sleeper` at 24 bytes: `replay` moves the sleepers it keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct PageFilter(u64);

impl PageFilter {
    #[inline]
    fn bit(vpn: u64) -> u64 {
        // Fibonacci hashing: the top 6 bits of the product spread neighbouring pages.
        1u64 << (vpn.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
    }

    fn of(pages: &[u64]) -> PageFilter {
        PageFilter(pages.iter().fold(0, |f, &p| f | PageFilter::bit(p)))
    }

    #[inline]
    fn may_hold(self, vpn: u64) -> bool {
        self.0 & PageFilter::bit(vpn) != 0
    }
}

#[derive(Debug)]
struct Warp {
    stream: WarpStream,
    sm: u32,
    cta: u32,
    /// When every load issued so far has returned.
    loads: Ps,
    /// When every store issued so far is done.
    stores: Ps,
    id: WarpId,
    /// Memory instructions that far-faulted (with their lane addresses), waiting for a replay.
    /// The warp keeps issuing independent instructions; it sleeps at its next `Wait` (or exit).
    pending: Vec<(Op, Box<[u64]>)>,
    /// Faulted instructions to re-execute now, after a replay, before the stream goes on.
    redo: std::collections::VecDeque<(Op, Box<[u64]>)>,
    /// The 4 KiB pages its pending instructions faulted on: a replay wakes the
    /// warp once all are resident (its µTLB holds the misses until then, so
    /// nothing is walked again in between).
    faulted: Vec<u64>,
    /// The residency's refault epoch at its last fault: if pages were evicted
    /// since, a replay re-executes it even with pages missing (they fault again).
    epoch: u64,
}

impl Warp {
    /// After a replay: its faulted instructions (`pending`) run next, after any already in `redo`.
    #[inline]
    fn wake(&mut self) {
        if self.redo.is_empty() {
            // The usual case: swap the buffers (both keep their capacity) rather than move
            // each instruction, on every wake of every sleeping warp.
            let redo = Vec::from(std::mem::take(&mut self.redo));
            self.redo = std::mem::replace(&mut self.pending, redo).into();
        } else {
            self.redo.extend(self.pending.drain(..));
        }
    }
}

#[derive(Debug, Default)]
struct Sm {
    port: IssuePort,
    free_slots: Vec<u32>,
    ctas: u32,
}

#[derive(Debug, Default)]
struct Cta {
    sm: u32,
    warps_left: u32,
    end: Ps,
    slots: Vec<u32>,
    /// The barrier in progress: warps arrived, the latest arrival, and the slots of those that wait.
    bar_arrived: u32,
    bar_at: Ps,
    bar_waiters: Vec<u32>,
}

impl Cta {
    /// Every running warp has reached the barrier: the waiting ones go on at `at`, and the
    /// barrier is ready for the next one.
    fn release(&mut self, at: Ps, tag: u32, q: &mut EventQueue<Ev>) {
        for s in self.bar_waiters.drain(..) {
            q.push(at, Ev::Warp(tag | s));
        }
        (self.bar_arrived, self.bar_at) = (0, 0);
    }
}

#[derive(Debug)]
struct Kernel {
    spec: KernelSpec,
    warps_per_cta: u32,
    /// This GPU runs CTAs `first + i * step` for `i < total_ctas` (all of them on a single GPU).
    first: u64,
    step: u64,
    next_cta: u64,
    total_ctas: u64,
    done_ctas: u64,
    start: Ps,
}

/// `translations_by_page`'s class of a page of 2^k bytes, by k: 4 KiB and below, up to 64 KiB,
/// up to 2 MiB, larger (one load on the hit path instead of three compares).
const PAGE_CLASS: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut k = 0;
    while k < 64 {
        t[k] = (k > 12) as u8 + (k > 16) as u8 + (k > 21) as u8;
        k += 1;
    }
    t
};

/// Counters of the GPU front end.
#[derive(Debug, Clone, Default)]
pub struct GpuStats {
    pub warp_insts: u64,
    /// Instructions that completed: compute instructions and memory instructions that did
    /// not far-fault (a faulted one counts again in `warp_insts` each time it re-executes).
    pub completed_insts: u64,
    /// Re-executed memory instructions split by `park_held` into a part issued now and a part
    /// parked on held pages: both parts count in `completed_insts`, the export subtracts these.
    pub split_insts: u64,
    /// Compute instructions (`Op::Compute`); with `warp_mem_insts` they are the instructions of MPKI.
    pub compute_insts: u64,
    pub warp_mem_insts: u64,
    /// CTA barriers passed (`Op::Barrier`, counted per warp).
    pub barriers: u64,
    /// Memory instructions a blocked µTLB held back until the replay (blocking faults).
    pub blocked_insts: u64,
    pub line_accesses: u64,
    pub translations: u64,
    /// Translations answered by an entry of 4 KiB, 64 KiB, 2 MiB or 1 GiB (faults not counted).
    pub translations_by_page: [u64; 4],
    pub kernels: u64,
    pub kernel_ps: Ps,
    pub ctas: u64,
    pub warps: u64,
}

impl GpuStats {
    /// Instructions for per-kilo-instruction rates: warp memory and compute instructions
    /// (not waits or exits; a trace replay has memory instructions only).
    pub fn insts(&self) -> u64 {
        self.warp_mem_insts + self.compute_insts
    }
}

pub struct Gpu {
    /// Index in a multi-GPU system (0 for a single GPU).
    pub id: usize,
    /// `id` in the top bits of the slot and CTA numbers of this GPU's events.
    tag: u32,
    sms: Vec<Sm>,
    warps: Vec<Option<Warp>>,
    ctas: Vec<Cta>,
    free_ctas: Vec<u32>,
    kernel: Option<Kernel>,
    warp_size: u32,
    max_ctas: u32,
    issue: Ps,
    slot: SlotLen,
    greedy: bool,
    /// `gpu.cta_dispatch = "fill"`: each SM takes all the CTAs it can at launch before the next SM.
    fill_first: bool,
    /// `gpu.cta_barriers`: `Op::Barrier` holds a warp until its CTA's running warps all reach it.
    barriers: bool,
    /// Stalls up to this long (dependent ALU work) do not end a greedy warp's run.
    short_stall: Ps,
    clock: Clock,
    line_shift: u32,
    scratch: [u64; MAX_LANES],
    lines: Lines,
    pub xlat: Translator,
    pub mem: MemSystem,
    /// The L1 TLB → L1 data cache path under back-pressure (`gpu.vmem.backpressure`).
    pub vmem: Option<VmemPath>,
    pub stats: GpuStats,
    /// Far faults raised since the world last collected them.
    faults: Vec<Fault>,
    /// The warp whose instruction is being issued (its faults name it).
    fault_warp: u32,
    /// Warps waiting for a replay, in the order they fell asleep (the order a replay wakes them).
    waiting: Vec<Sleeper>,
    /// The residency's refault epoch when the `Sleeper::on` pages were noted (another epoch voids them).
    waiting_epoch: u64,
    /// With per-page replays (`replay_page`, the APU path): sleeping warps filed under the page they wait for.
    by_page: FxHashMap<u64, Vec<u32>>,
    /// Batch driver once GPU memory is full (`replay_ended`): sleeping warps filed under every
    /// page they faulted on, each with the nap it was filed in (an entry of an earlier nap is stale).
    by_fault: FxHashMap<u64, Vec<(u32, u64)>>,
    /// Lists of `by_fault` entries removed, reused for new pages (allocating one per page filed and
    /// freeing it at its replay cost oversub-stream-driver 1.3% of its instructions); and the warps
    /// a `replay_ended` wakes.
    spare_lists: Vec<Vec<(u32, u64)>>,
    woken: Vec<u32>,
    /// Per warp slot, its current nap (0: awake or not filed); `naps` numbers them (0: no
    /// `replay_ended` yet).
    nap_of: Vec<u64>,
    naps: u64,
    /// Blocking fault mode (`uvm.fault_mode = "blocking"`), and from when each µTLB is blocked
    /// (`Ps::MAX`: not blocked).
    pub blocking: bool,
    blocked: Vec<Ps>,
    /// A warp stops at its far-faulting load or store (`uvm.stall_warp_on_fault`).
    stall_on_fault: bool,
    /// Zero-copy accesses to remotely mapped managed pages (host memory over the link).
    pub remote: RemoteAccess,
    /// Read-mostly pages may be read-only duplicates: a store to one faults.
    read_dup: bool,
    /// Record which resident managed pages the GPU stores to (`uvm.eviction.write_back = "dirty"`).
    track_dirty: bool,
    /// `translation.managed_large_ptes`: one translation may cover several 4 KiB managed pages.
    large_ptes: bool,
    /// GPU memory for managed data is limited (single GPU, `uvm.oversubscription` or
    /// `uvm.gpu_memory_bytes`): pages may be evicted, so a faulted instruction re-executes
    /// only its lanes on faulted pages (see `run_warp`).
    pub limited_memory: bool,
}

/// Bits of an event's slot or CTA number that index within one GPU; the GPU's id is above them.
pub const EV_GPU_SHIFT: u32 = 24;

/// The index of the first line at or after `i` beyond the 4 KiB page of `va`:
/// the rest of a faulting page's lines fault with it.
#[inline]
fn past_page(lines: &Lines, mut i: usize, va: u64, ls: u32) -> usize {
    let end_line = ((va >> 12) + 1) << 12 >> ls;
    while i < lines.n && lines.line[i] < end_line {
        i += 1;
    }
    i
}

impl Gpu {
    pub fn new(cfg: &Config) -> Gpu {
        Gpu::with_id(cfg, 0)
    }

    /// GPU `id` of a multi-GPU system.
    pub fn with_id(cfg: &Config, id: usize) -> Gpu {
        let g = &cfg.gpu;
        let clock = Clock::from_mhz(g.core_mhz);
        Gpu {
            id,
            tag: (id as u32) << EV_GPU_SHIFT,
            sms: (0..g.sms)
                .map(|s| Sm { free_slots: (0..g.max_warps_per_sm).rev().map(|i| s * g.max_warps_per_sm + i).collect(), ..Sm::default() })
                .collect(),
            warps: (0..g.sms * g.max_warps_per_sm).map(|_| None).collect(),
            ctas: vec![],
            free_ctas: vec![],
            kernel: None,
            warp_size: g.warp_size,
            max_ctas: g.max_ctas_per_sm,
            issue: clock.cycles(g.issue_cycles as u64),
            slot: SlotLen::new(clock.cycles(g.issue_cycles as u64)),
            greedy: g.scheduler == WarpScheduler::Gto,
            fill_first: g.cta_dispatch == CtaDispatch::Fill,
            barriers: g.cta_barriers,
            short_stall: clock.cycles(SHORT_STALL_CYCLES),
            clock,
            line_shift: g.line_bytes.trailing_zeros(),
            scratch: [0; MAX_LANES],
            lines: Lines::default(),
            xlat: Translator::with_gpu(cfg, id),
            mem: MemSystem::new(g),
            vmem: VmemPath::new(g),
            stats: GpuStats::default(),
            faults: vec![],
            fault_warp: 0,
            waiting: vec![],
            waiting_epoch: 0,
            by_page: FxHashMap::default(),
            by_fault: FxHashMap::default(),
            spare_lists: vec![],
            woken: vec![],
            nap_of: vec![],
            naps: 0,
            blocking: cfg.uvm.fault_mode == FaultMode::Blocking,
            blocked: vec![Ps::MAX; g.sms.div_ceil(g.sms_per_l1tlb) as usize],
            stall_on_fault: cfg.uvm.stall_warp_on_fault,
            remote: RemoteAccess::new(&cfg.link),
            read_dup: cfg.uvm.advise.any_read_mostly(),
            track_dirty: cfg.uvm.eviction.write_back == crate::uvm::evict::WriteBack::Dirty,
            large_ptes: cfg.translation.managed_large_ptes,
            limited_memory: false,
        }
    }

    /// Start a kernel at `now`. Returns false if it has no work (nothing to wait for).
    pub fn launch(&mut self, spec: KernelSpec, now: Ps, q: &mut EventQueue<Ev>) -> bool {
        let total = spec.ctas();
        self.launch_part(spec, 0, 1, total, now, q)
    }

    /// The running kernel's CTAs done and CTAs in this GPU's part (the progress line's); None once the part ends.
    pub fn kernel_progress(&self) -> Option<(u64, u64)> {
        self.kernel.as_ref().map(|k| (k.done_ctas, k.total_ctas))
    }

    /// Start this GPU's share of a kernel at `now`: CTAs `first + i * step` for
    /// `i < count` (multi-GPU CTA placement). Returns false if the share is empty.
    pub fn launch_part(&mut self, spec: KernelSpec, first: u64, step: u64, count: u64, now: Ps, q: &mut EventQueue<Ev>) -> bool {
        if count == 0 {
            return false;
        }
        let warps_per_cta = spec.threads_per_cta.div_ceil(self.warp_size);
        self.kernel = Some(Kernel { spec, warps_per_cta, first, step, next_cta: 0, total_ctas: count, done_ctas: 0, start: now });
        self.stats.kernels += 1;
        if self.fill_first {
            for sm in 0..self.sms.len() {
                while self.dispatch_one(sm, now, q) {}
            }
            return true;
        }
        // Round-robin: one CTA per SM per pass until no SM takes more.
        loop {
            let mut placed = false;
            for sm in 0..self.sms.len() {
                placed |= self.dispatch_one(sm, now, q);
            }
            if !placed {
                break;
            }
        }
        true
    }

    /// Place the next CTA on `sm` if it fits.
    fn dispatch_one(&mut self, sm: usize, now: Ps, q: &mut EventQueue<Ev>) -> bool {
        let Some(k) = self.kernel.as_mut() else {
            return false;
        };
        let s = &mut self.sms[sm];
        let max_ctas = k.spec.gen.cta_limit().map_or(self.max_ctas, |l| l.min(self.max_ctas));
        if k.next_cta >= k.total_ctas || s.ctas >= max_ctas || (s.free_slots.len() as u32) < k.warps_per_cta {
            return false;
        }
        let c = k.first + k.next_cta * k.step;
        k.next_cta += 1;
        let tpc = k.spec.threads_per_cta as u64;
        let first = c * tpc;
        let threads = (k.spec.threads - first).min(tpc);
        let nwarps = threads.div_ceil(self.warp_size as u64) as u32;
        let ci = match self.free_ctas.pop() {
            Some(i) => i,
            None => {
                self.ctas.push(Cta::default());
                self.ctas.len() as u32 - 1
            }
        };
        let cta = &mut self.ctas[ci as usize];
        cta.sm = sm as u32;
        cta.warps_left = nwarps;
        cta.end = now;
        cta.slots.clear();
        debug_assert!(cta.bar_waiters.is_empty() && cta.bar_arrived == 0, "a finished CTA left warps at a barrier");
        s.ctas += 1;
        for w in 0..nwarps {
            let slot = s.free_slots.pop().expect("free slots checked above");
            cta.slots.push(slot);
            let ws = self.warp_size as u64;
            let id = WarpId {
                global: c * k.warps_per_cta as u64 + w as u64,
                first_thread: first + w as u64 * ws,
                lanes: (threads - w as u64 * ws).min(ws) as u32,
            };
            self.warps[slot as usize] = Some(Warp {
                stream: k.spec.gen.warp(id),
                sm: sm as u32,
                cta: ci,
                loads: now,
                stores: now,
                id,
                pending: vec![],
                redo: Default::default(),
                faulted: vec![],
                epoch: 0,
            });
            q.push(now, Ev::Warp(self.tag | slot));
        }
        self.stats.ctas += 1;
        self.stats.warps += nwarps as u64;
        true
    }

    /// A CTA's last access is done: free its slots, start more CTAs. Returns true when the kernel finished.
    pub fn cta_done(&mut self, ci: u32, now: Ps, q: &mut EventQueue<Ev>) -> bool {
        let cta = &mut self.ctas[ci as usize];
        let sm = cta.sm as usize;
        self.sms[sm].free_slots.append(&mut cta.slots);
        self.sms[sm].ctas -= 1;
        self.free_ctas.push(ci);
        let Some(k) = self.kernel.as_mut() else {
            return false;
        };
        k.done_ctas += 1;
        if k.done_ctas == k.total_ctas {
            self.stats.kernel_ps += now - k.start;
            self.kernel = None;
            return true;
        }
        while self.dispatch_one(sm, now, q) {}
        false
    }

    /// Run warp `slot` from `now`: issue instructions until it must wait for something.
    /// `place` is the multi-GPU page placement (None on a single GPU); `uvm` the single GPU's
    /// UVM driver, when its far faults go there (None: multi-GPU, or the IOMMU's page requests).
    #[inline(always)]
    pub fn run_warp(
        &mut self,
        slot: u32,
        now: Ps,
        q: &mut EventQueue<Ev>,
        mut place: Option<&mut Multi>,
        uvm: Option<&Uvm>,
    ) -> Result<(), SimError> {
        let mut t = now;
        loop {
            let w = self.warps[slot as usize].as_mut().expect("events only name resident warps");
            // GMMU multi-GPU: a re-executed instruction's lanes on pages still held in the L2
            // TLB's MSHR stay parked there; only the others issue (see `park_held`).
            if !w.redo.is_empty() && !self.stall_on_fault && !self.blocking {
                if let Some(held) = self.xlat.far_pending.as_ref() {
                    match park_held(w, held, &self.xlat.space.residency) {
                        Some(true) => continue,
                        // One instruction now completes in two parts: count it once.
                        Some(false) => self.stats.split_insts += 1,
                        None => {}
                    }
                }
            }
            let sm = w.sm as usize;
            // The SM's issue port serialises its warps. A warp that finds it busy issues
            // at the next free slot, processed now: arrival order at the memory side may
            // then invert by a few cycles, which its structures tolerate, and a re-queued
            // event per conflict is saved.
            let issue = self.sms[sm].port.issue(t, self.slot);
            self.stats.warp_insts += 1;
            self.fault_warp = slot;
            let next = issue + self.issue;
            let op = match w.redo.pop_front() {
                Some((op, lanes)) => {
                    self.scratch[..lanes.len()].copy_from_slice(&lanes);
                    op
                }
                None => w.stream.next(&mut self.scratch),
            };
            if op == Op::Exit {
                // A stream read from a trace ends early at a corrupt chunk: stop the run with its message.
                if let Some(e) = w.stream.failure() {
                    return Err(SimError::BadInput(e));
                }
            }
            let ready = match op {
                Op::Compute(c) => {
                    self.stats.compute_insts += 1;
                    self.stats.completed_insts += 1;
                    issue + self.clock.cycles(c as u64).max(self.issue)
                }
                // Without `gpu.cta_barriers` a barrier is issued but waits for nothing.
                Op::Barrier if !self.barriers => next,
                // A dependency on a faulted load, or the end with faulted instructions: sleep
                // until the replay, then re-execute the faulted instructions and this wait (or
                // the stream exits again). A barrier also waits for the warp's faulted instructions:
                // `__syncthreads` makes the warp's earlier memory accesses visible to its CTA, so
                // they must have been performed.
                Op::Wait | Op::Barrier | Op::Exit if !w.pending.is_empty() => {
                    if op != Op::Exit {
                        w.pending.push((op, Box::default()));
                    }
                    if no_answer_due(place.as_deref(), self.tag >> EV_GPU_SHIFT, &w.faulted, &self.faults, &self.xlat)
                        || no_fault_outstanding(uvm, self.xlat.utlb_of(sm) as u32, &w.faulted, &self.faults)
                    {
                        // Multi-GPU: its answers came while it went on (`Multi::nothing_to_wait_for`);
                        // one GPU: the replay that ended its last fault came while it went on.
                        w.faulted.clear();
                        w.wake();
                        next
                    } else {
                        self.waiting.push(Sleeper::new(slot, self.xlat.utlb_of(sm), &w.faulted));
                        return Ok(());
                    }
                }
                Op::Wait => next.max(w.loads),
                Op::Barrier => {
                    self.stats.barriers += 1;
                    let cta = &mut self.ctas[w.cta as usize];
                    cta.bar_arrived += 1;
                    cta.bar_at = cta.bar_at.max(issue);
                    if cta.bar_arrived < cta.warps_left {
                        cta.bar_waiters.push(slot);
                        return Ok(());
                    }
                    // The last to arrive: all go on at the next issue slot after the latest arrival.
                    // ASSUMPTION: a barrier resolves within one issue slot (no source gives its latency).
                    let at = cta.bar_at + self.issue;
                    cta.release(at, self.tag, q);
                    at
                }
                // Blocking faults: from the moment a walk finds a fault, the µTLB takes no requests
                // until the replay (seed paged-memory §2.1: the GMMU stops the TLB). One issued
                // earlier is taken at its issue, or behind the misses still waiting for an MSHR.
                Op::Mem { .. }
                    if self.blocking && {
                        let u = self.xlat.utlb_of(sm);
                        issue.max(self.xlat.l1[u].backlog_until) >= self.blocked[u]
                    } =>
                {
                    self.stats.blocked_insts += 1;
                    w.pending.push((op, saved_lanes(&op, &self.scratch)));
                    self.waiting.push(Sleeper::new(slot, self.xlat.utlb_of(sm), &w.faulted));
                    return Ok(());
                }
                Op::Mem { kind, lanes, bytes } => {
                    coalesce(lanes, bytes, &self.scratch, self.line_shift, &mut self.lines);
                    // No later request can arrive before this: bandwidth timelines may forget the past.
                    let floor = issue.min(q.peek_time());
                    let raised = self.faults.len();
                    // Monomorphised: the single-GPU access has no placement code in it.
                    let res = match place.as_deref_mut() {
                        None => self.access::<false>(sm, kind, issue, floor, None),
                        p => self.access::<true>(sm, kind, issue, floor, p),
                    };
                    let (done, faulted) = res.map_err(|va| {
                        let w = self.warps[slot as usize].as_ref().expect("resident");
                        SimError::Model(format!(
                            "warp {} (threads {}..{}) on SM {sm} accessed {va:#x}, outside every allocation",
                            w.id.global,
                            w.id.first_thread,
                            w.id.first_thread + w.id.lanes as u64
                        ))
                    })?;
                    let w = self.warps[slot as usize].as_mut().expect("resident");
                    if faulted {
                        // Replayable far fault: the instruction is re-executed after the replay;
                        // meanwhile the warp goes on with independent instructions.
                        w.pending.push(if place.is_some() || self.limited_memory {
                            // Only the lanes on faulted pages run again; the others are done: the
                            // µTLB replays the faulted translations, not the instruction (seed
                            // paged-memory §3, step 6). Needed wherever pages can be taken away
                            // (multi-GPU migrations, evictions): a page obtained for the retry may
                            // go again before the others arrive, so retrying every lane would
                            // need all of them resident at once, and livelocks once one warp
                            // instruction touches more pages than GPU memory holds, or the
                            // sleeping warps' pages together thrash it. (With unlimited memory
                            // the whole instruction re-executes, as it always did.)
                            narrow(op, &self.scratch, &self.faults[raised..], place.is_some())
                        } else {
                            (op, saved_lanes(&op, &self.scratch))
                        });
                        w.faulted.extend(self.faults[raised..].iter().map(|f| f.vpn));
                        w.epoch = self.xlat.space.residency.refault_epoch;
                        if self.blocking {
                            // Blocking: the µTLB stops once the first of these faults is found (the
                            // walk's end), and the warp waits where it is. Every faulting miss records
                            // a fault at the time the GMMU learns of it (its walk's end; a multi-GPU
                            // miss held behind its page's pending fault, its lookup), so `issue` is
                            // only a fallback.
                            let u = self.xlat.utlb_of(sm);
                            let found = self.faults[raised..].iter().map(|f| f.time).min().unwrap_or(issue);
                            self.blocked[u] = self.blocked[u].min(found);
                            self.waiting.push(Sleeper::new(slot, u, &w.faulted));
                            return Ok(());
                        }
                        if self.stall_on_fault && kind != MemKind::Prefetch {
                            // Zheng's GPU: the faulting warp stalls here (its µTLB goes on serving
                            // the other warps); after the replay it re-executes this instruction.
                            self.waiting.push(Sleeper::new(slot, self.xlat.utlb_of(sm), &w.faulted));
                            return Ok(());
                        }
                    } else {
                        self.stats.completed_insts += 1;
                        match kind {
                            MemKind::Load => w.loads = w.loads.max(done),
                            MemKind::Store => w.stores = w.stores.max(done),
                            MemKind::Prefetch => {} // nothing waits for a prefetch
                        }
                    }
                    next
                }
                Op::Exit => {
                    let end = issue.max(w.loads).max(w.stores);
                    let ci = w.cta;
                    self.warps[slot as usize] = None;
                    let cta = &mut self.ctas[ci as usize];
                    cta.end = cta.end.max(end);
                    cta.warps_left -= 1;
                    // An exited warp is no longer waited for: the others may all be at the barrier now.
                    if cta.bar_arrived > 0 && cta.bar_arrived == cta.warps_left {
                        cta.release(cta.bar_at.max(issue) + self.issue, self.tag, q);
                    }
                    if cta.warps_left == 0 {
                        q.push(cta.end, Ev::CtaDone(self.tag | ci));
                    }
                    return Ok(());
                }
            };
            // Keep issuing inline while the warp does not stall for long (greedy-then-
            // oldest: it resumes as soon as it can; other warps still get the port
            // slots of its short stalls, see `IssuePort`), or while nothing else is
            // due before it is ready again. The greedy run stays within a short stall
            // of the time it was woken at (no other event was due before it): short
            // stalls add up, and a warp run far ahead would take the port's window (and
            // every time-ordered structure) with it, so that the warps due before it
            // issued only after it. (Bounded by its own wake time, not the next event's,
            // so that other GPUs' or applications' events do not change its run.)
            if (self.greedy && ready <= next + self.short_stall && ready <= now + self.short_stall) || ready < q.peek_time() {
                t = ready;
            } else {
                q.push(ready, Ev::Warp(self.tag | slot));
                if let Some(w) = self.warps[slot as usize].as_mut() {
                    w.stream.yielding();
                }
                return Ok(());
            }
        }
    }

    /// Ask the CPU to load warp `slot`'s state into its caches (a hint, no effect on
    /// results): called one event ahead, it hides the cache miss that every warp
    /// visit otherwise takes, since thousands of warps interleave between two
    /// visits of one warp.
    #[inline]
    pub fn prefetch_warp(&self, slot: u32) {
        if let Some(w) = self.warps.get((slot & ((1 << EV_GPU_SHIFT) - 1)) as usize) {
            let p = (w as *const Option<Warp>).cast::<u8>();
            for off in (0..std::mem::size_of::<Option<Warp>>()).step_by(64) {
                prefetch(p.wrapping_add(off));
            }
        }
    }

    /// Number of SMs.
    pub fn sms(&self) -> usize {
        self.sms.len()
    }

    /// One traced access of `size` bytes at `va` from SM `sm`, issued at `t` (trace
    /// replay, no warp behind it); returns when it is done and whether it far-faulted
    /// (only in a multi-GPU system, whose pages are placed), or the unmapped address.
    #[allow(clippy::too_many_arguments)]
    pub fn replay_access(
        &mut self,
        sm: usize,
        kind: MemKind,
        va: u64,
        size: u32,
        t: Ps,
        floor: Ps,
        place: Option<&mut Multi>,
    ) -> Result<(Ps, bool), u64> {
        coalesce(Lanes::Strided { base: va, stride: 0, n: 1 }, size, &self.scratch, self.line_shift, &mut self.lines);
        self.access::<true>(sm, kind, t, floor, place)
    }

    /// Add a replayed trace's span to the kernel time.
    pub fn add_kernel_time(&mut self, d: Ps) {
        self.stats.kernels += 1;
        self.stats.kernel_ps += d;
    }

    /// Walk again, from `t`, a far-faulted access to `vpn` that SM `sm`'s µTLB retries after a
    /// replay; returns when the walk ends.
    pub fn retry_walk(&mut self, sm: u32, vpn: u64, t: Ps, now: Ps) -> Ps {
        self.xlat.retry_walk(sm as usize, vpn << 12, t, now, &mut self.mem.dram)
    }

    /// Far faults raised since the last call, oldest first.
    pub fn drain_faults(&mut self) -> std::vec::Drain<'_, Fault> {
        self.faults.drain(..)
    }

    /// The far faults raised since the last call, oldest first, taken out whole (the GPU is free to
    /// borrow while they are handled); hand the emptied vector back with [`Self::return_faults`] so
    /// its allocation is reused (a vector collected per warp event was 6% of a multi-GPU run).
    pub fn take_faults(&mut self) -> Vec<Fault> {
        std::mem::take(&mut self.faults)
    }

    /// Give back the vector [`Self::take_faults`] returned, emptied.
    pub fn return_faults(&mut self, mut v: Vec<Fault>) {
        v.clear();
        if self.faults.is_empty() {
            self.faults = v;
        }
    }

    /// The driver replayed at `now`: the µTLBs unblock, and every sleeping warp
    /// whose faulted pages are all resident re-executes its faulted instructions.
    pub fn replay(&mut self, now: Ps, q: &mut EventQueue<Ev>) {
        self.replay_with(now, q, None);
    }

    /// Multi-GPU: the answer for page `vpn` arrived at `now` and mapped it here. As
    /// `replay`, and every sleeping warp waiting for `vpn` re-executes too, even if
    /// other pages it faulted on are still missing: the L2 TLB's MSHR answers the
    /// requests held for this page when the translation comes back, so its lanes on
    /// `vpn` complete now, and its lanes on pages still held stay parked in the MSHR
    /// (`park_held`: not translated again) until their own answers. Each request
    /// completes on its own, as in MGPUSim, which the seed's multi-GPU simulator
    /// extends; waiting until every page of the instruction was mapped at once kept
    /// warps asleep while other GPUs took back the pages that had come (on-touch
    /// ping-pong of shared pages: li-transfw's PageRank never finished).
    pub fn replay_page(&mut self, vpn: u64, now: Ps, q: &mut EventQueue<Ev>) {
        self.replay_with(now, q, Some(vpn));
    }

    fn replay_with(&mut self, now: Ps, q: &mut EventQueue<Ev>, answered: Option<u64>) {
        self.blocked.fill(Ps::MAX);
        let (warps, residency) = (&mut self.warps, &self.xlat.space.residency);
        if self.waiting_epoch != residency.refault_epoch {
            self.waiting_epoch = residency.refault_epoch;
            self.waiting.iter_mut().for_each(|s| s.on = Sleeper::UNKNOWN);
        }
        // Most sleepers wait for one of a few pages: remember the latest answers (nothing
        // changes residency during a replay) rather than look each one up again.
        let mut memo = [(Sleeper::UNKNOWN, false); 16];
        let mut is_mapped = |p: u64| {
            let e = &mut memo[(p % 16) as usize];
            if e.0 != p {
                *e = (p, residency.is_mapped(p));
            }
            e.1
        };
        let fresh = residency.mapped_since();
        // The answered page, if it is mapped here (an answer already invalidated wakes nobody).
        let answered = answered.filter(|&p| is_mapped(p));
        self.waiting.retain_mut(|s| {
            // Waiting for the answered page: its requests on it are answered (see `replay_page`).
            if let Some(p) = answered.filter(|&p| s.pages.may_hold(p)) {
                if let Some(w) = warps[s.slot as usize].as_mut().filter(|w| w.faulted.contains(&p)) {
                    w.faulted.clear();
                    w.wake();
                    q.push(now, Ev::Warp(self.tag | s.slot));
                    return false;
                }
            }
            // Still missing the page it stopped at last time: nothing else can have
            // changed (it has not run; `requeue_waiters` and a new epoch void `on`), so
            // it sleeps on without touching its state (most sleepers, most replays).
            // `on` was missing when noted, so unless it was mapped since, it still is.
            if s.on != Sleeper::UNKNOWN && (!fresh.may_hold(s.on) || !is_mapped(s.on)) {
                return true;
            }
            if let Some(w) = warps[s.slot as usize].as_mut() {
                if w.epoch != residency.refault_epoch {
                    // Pages it waits for may have been evicted after their fault was
                    // serviced (or their block deferred): nothing would raise them
                    // again, so it re-executes, and faults again on what is missing.
                    w.faulted.clear();
                }
                // Pages become resident in batches: drop them from the end, stop at the first still missing.
                while let Some(&p) = w.faulted.last() {
                    if !is_mapped(p) {
                        s.on = p;
                        return true;
                    }
                    w.faulted.pop();
                }
                w.wake();
            }
            q.push(now, Ev::Warp(self.tag | s.slot));
            false
        });
        self.xlat.space.residency.clear_mapped_since();
    }

    /// Multi-GPU: page `vpn`, mapped here, was taken away (an invalidation), or its answer
    /// came back already invalidated. The sleeping warps waiting for it re-execute at the
    /// next replay and fault again (nothing else would raise it); the other sleeping warps
    /// keep waiting for their own pages, as the µTLB holds their misses (a global refault
    /// epoch would re-walk them all after every invalidation).
    pub fn requeue_waiters(&mut self, vpn: u64) {
        for s in &mut self.waiting {
            if !s.pages.may_hold(vpn) {
                continue;
            }
            if let Some(w) = self.warps[s.slot as usize].as_mut() {
                if w.faulted.contains(&vpn) {
                    w.faulted.clear();
                    s.on = Sleeper::UNKNOWN;
                    s.pages = PageFilter::default();
                }
            }
        }
    }

    /// A far fault was serviced (the polled fault model): `replay`, except that only the
    /// µTLBs in `utlbs` (no far fault left) unblock; a warp stalled at a still-blocked
    /// µTLB keeps sleeping rather than issuing into it again. A warp wakes once none of
    /// its faulted pages is both missing and still in the driver's hands (`in_service`:
    /// buffered, crossing the link or held at its µTLB): the far-fault MSHR of each page
    /// notifies its own requests (seed paged-memory §3, step 6). A page evicted after it
    /// landed, or whose fault was dropped, faults again when the warp re-executes; an
    /// eviction does not wake every sleeping warp (that re-executed all of them at each
    /// landing under oversubscription, and the runs never ended).
    ///
    /// `lost`: whether a fault ended since the last call whose page is not mapped
    /// (from `Uvm::take_ended`); without one, a warp still missing the page it stopped at keeps
    /// waiting without asking the driver (a page leaves its hands only when its fault ends).
    pub fn resume(&mut self, utlbs: &[u32], lost: bool, now: Ps, q: &mut EventQueue<Ev>, in_service: impl Fn(u32, u64) -> bool) {
        for &u in utlbs {
            self.blocked[u as usize] = Ps::MAX;
        }
        self.wake_serviced(lost, now, q, in_service);
    }

    /// The batch driver replayed at `now` (one GPU, GPU memory not yet full): every µTLB
    /// unblocks, and, as in `resume`, a sleeping warp wakes once none of its faulted pages is
    /// both missing and still in the driver's hands (`in_service`: buffered, in the batch,
    /// flushed or held at its µTLB). A page whose fault was dropped (a thrashing throttle) is
    /// in nobody's hands: it faults again when the warp re-executes. Before, such a drop
    /// started a new refault epoch that re-executed every sleeping warp. `lost` as in
    /// `resume`. Once memory has filled, `replay_ended` takes over.
    pub fn replay_serviced(&mut self, lost: bool, now: Ps, q: &mut EventQueue<Ev>, in_service: impl Fn(u32, u64) -> bool) {
        self.blocked.fill(Ps::MAX);
        self.wake_serviced(lost, now, q, in_service);
    }

    /// The batch driver replayed at `now` once GPU memory has filled (pages may be evicted):
    /// every µTLB unblocks, and a sleeping warp re-executes as soon as one of its faulted
    /// pages was mapped or its fault ended (`ended`, `Uvm::take_ended`): its lanes on that
    /// page complete if the page is mapped, or fault again if it was taken away (evicted after
    /// its service, or its fault dropped); its other lanes walk again and merge into their
    /// faults, still outstanding. The replay retries the µTLBs' held translations, and each
    /// completes once mapped (seed paged-memory §3, step 6), so a lane does not wait for the
    /// warp's other pages: waiting for all of them, as `replay_serviced` does before memory
    /// fills, let pages that had arrived be evicted before their lanes ran (a random gather at
    /// 2× oversubscription evicted 6× the chunks). Before, every eviction re-executed every
    /// sleeping warp (a refault epoch), which completed the same lanes but re-walked all the
    /// others at every batch. Sleepers are filed by page rather than scanned: the pages
    /// mapped or ended wake them, so a replay costs those pages, not the sleeping warps.
    ///
    /// Not for blocking faults (`blocking`): there the warps still waiting re-execute at each
    /// eviction (`replay`), which re-blocks their µTLBs; after this replay every µTLB would
    /// stay unblocked, other warps' new faults would thrash memory, and a random gather at 2×
    /// took 2.2× longer.
    pub fn replay_ended(&mut self, ended: &[u64], now: Ps, q: &mut EventQueue<Ev>, in_service: impl Fn(u32, u64) -> bool) {
        self.blocked.fill(Ps::MAX);
        if self.naps == 0 {
            // The first such replay: the sleepers noted by `replay_serviced` are filed afresh.
            self.naps = 1;
            self.waiting.iter_mut().for_each(|s| s.on = Sleeper::UNKNOWN);
        }
        if self.nap_of.len() < self.warps.len() {
            self.nap_of.resize(self.warps.len(), 0);
        }
        let (warps, residency, spare) = (&self.warps, &self.xlat.space.residency, &mut self.spare_lists);
        let mut woken = std::mem::take(&mut self.woken);
        woken.clear();
        // Warps asleep since the last replay: file each under its pages, unless one of them
        // already ended (mapped, or in nobody's hands) while it ran on.
        for s in self.waiting.iter_mut().filter(|s| s.on == Sleeper::UNKNOWN) {
            let slot = s.slot as usize;
            let Some(w) = warps[slot].as_ref() else {
                woken.push(s.slot);
                continue;
            };
            if w.faulted.is_empty() || w.faulted.iter().any(|&p| residency.is_mapped(p) || !in_service(s.utlb, p)) {
                woken.push(s.slot);
                continue;
            }
            self.naps += 1;
            self.nap_of[slot] = self.naps;
            for &p in &w.faulted {
                self.by_fault.entry(p).or_insert_with(|| spare.pop().unwrap_or_default()).push((s.slot, self.naps));
            }
            s.on = w.faulted[0];
        }
        for &slot in &woken {
            self.nap_of[slot as usize] = 0;
        }
        for p in ended {
            let Some(mut list) = self.by_fault.remove(p) else { continue };
            for &(slot, nap) in &list {
                if self.nap_of[slot as usize] == nap {
                    self.nap_of[slot as usize] = 0;
                    woken.push(slot);
                }
            }
            list.clear();
            self.spare_lists.push(list);
        }
        if !woken.is_empty() {
            let nap_of = &self.nap_of;
            self.waiting.retain(|s| s.on != Sleeper::UNKNOWN && nap_of[s.slot as usize] != 0);
            for &slot in &woken {
                if let Some(w) = self.warps[slot as usize].as_mut() {
                    w.faulted.clear();
                    w.wake();
                }
                q.push(now, Ev::Warp(self.tag | slot));
            }
        }
        self.woken = woken;
    }

    fn wake_serviced(&mut self, lost: bool, now: Ps, q: &mut EventQueue<Ev>, in_service: impl Fn(u32, u64) -> bool) {
        let (warps, residency, blocked, xlat) = (&mut self.warps, &self.xlat.space.residency, &self.blocked, &self.xlat);
        let fresh = residency.mapped_since();
        // Many sleepers of a µTLB wait for the same few pages: remember the latest answers
        // (nothing changes residency or the driver's state during the scan).
        let mut memo = [(u32::MAX, Sleeper::UNKNOWN, false); 16];
        let mut waits = |u: u32, p: u64| {
            let e = &mut memo[((p ^ u as u64) % 16) as usize];
            if (e.0, e.1) != (u, p) {
                *e = (u, p, !residency.is_mapped(p) && in_service(u, p));
            }
            e.2
        };
        self.waiting.retain_mut(|s| {
            // Still waiting for the page it stopped at (its list has not changed while it
            // slept): it sleeps on without touching the warp (most sleepers, most rounds).
            // `on` was missing when noted, so unless it was mapped since, it still is.
            if s.on != Sleeper::UNKNOWN && if lost { waits(s.utlb, s.on) } else { !fresh.may_hold(s.on) || !residency.is_mapped(s.on) } {
                return true;
            }
            s.on = Sleeper::UNKNOWN;
            let slot = s.slot;
            if let Some(w) = warps[slot as usize].as_mut() {
                let u = s.utlb as usize;
                debug_assert_eq!(u, xlat.utlb_of(w.sm as usize));
                while let Some(&p) = w.faulted.last() {
                    if waits(s.utlb, p) {
                        s.on = p;
                        return true;
                    }
                    w.faulted.pop();
                }
                if blocked[u] != Ps::MAX {
                    return true;
                }
                w.wake();
            }
            q.push(now, Ev::Warp(self.tag | slot));
            false
        });
        self.xlat.space.residency.clear_mapped_since();
    }

    /// Pages [first, end) became resident at `now` (an APU page request completed): the
    /// µTLBs unblock and the sleeping warps that waited only for them re-execute — what
    /// `replay` does, without scanning every sleeping warp on every page: warps that
    /// went to sleep since the last call are filed under the page they wait for.
    pub fn replay_pages(&mut self, first: u64, end: u64, now: Ps, q: &mut EventQueue<Ev>) {
        self.blocked.fill(Ps::MAX);
        let mut inbox = std::mem::take(&mut self.waiting);
        for s in inbox.drain(..) {
            self.file_or_wake(s.slot, now, q);
        }
        self.waiting = inbox;
        for vpn in first..end {
            if self.by_page.is_empty() {
                break;
            }
            for slot in self.by_page.remove(&vpn).unwrap_or_default() {
                self.file_or_wake(slot, now, q);
            }
        }
    }

    /// File a sleeping warp under the last of its pages still missing, or wake it if none is.
    fn file_or_wake(&mut self, slot: u32, now: Ps, q: &mut EventQueue<Ev>) {
        let residency = &self.xlat.space.residency;
        if let Some(w) = self.warps[slot as usize].as_mut() {
            if w.epoch != residency.refault_epoch {
                w.faulted.clear(); // as in `replay`
            }
            while let Some(&p) = w.faulted.last() {
                // Mapped: resident, or (a page request for host memory behind the link) remotely.
                if !residency.is_mapped(p) {
                    self.by_page.entry(p).or_default().push(slot);
                    return;
                }
                w.faulted.pop();
            }
            w.wake();
        }
        q.push(now, Ev::Warp(self.tag | slot));
    }

    /// Note a far fault for the driver (kept out of line: the hot path never takes it).
    #[cold]
    fn record_fault(&mut self, sm: usize, kind: MemKind, va: u64, at: Ps) {
        let utlb = self.xlat.utlb_of(sm) as u32;
        self.faults.push(Fault {
            time: at,
            vpn: va >> 12,
            utlb,
            sm: sm as u32,
            warp: self.fault_warp,
            write: kind == MemKind::Store,
            prefetch: kind == MemKind::Prefetch,
        });
    }

    /// Translate and access the coalesced lines in `self.lines`; returns when all are
    /// done and whether any page far-faulted, or the first address outside every allocation.
    fn access<const MULTI: bool>(
        &mut self,
        sm: usize,
        kind: MemKind,
        t: Ps,
        now: Ps,
        mut place: Option<&mut Multi>,
    ) -> Result<(Ps, bool), u64> {
        self.stats.warp_mem_insts += 1;
        self.stats.line_accesses += self.lines.n as u64;
        let ls = self.line_shift;
        let mut done = t;
        let mut faulted = false;
        let mut i = 0;
        while i < self.lines.n {
            let va = self.lines.line[i] << ls;
            self.stats.translations += 1;
            // With the back-pressured path the lookup may wait for room behind an earlier hit.
            let (lt, hits) = match self.vmem.as_mut() {
                Some(v) => (v.lookup_at(sm, t), self.xlat.l1_hits(sm)),
                None => (t, 0),
            };
            let (mut ready, pa, page) = match self.xlat.translate(sm, va, lt, now, &mut self.mem.dram) {
                // A store to a read-only duplicate (read-mostly) faults: the driver collapses the copies.
                Xlat::Ready(at, ..) if self.read_dup && kind == MemKind::Store && self.xlat.space.residency.is_dup(va >> 12) => {
                    self.record_fault(sm, kind, va, at);
                    faulted = true;
                    i = past_page(&self.lines, i, va, ls);
                    continue;
                }
                Xlat::Ready(r, pa, page) => {
                    self.stats.translations_by_page[PAGE_CLASS[page.trailing_zeros() as usize & 63] as usize] += 1;
                    (r, pa, page)
                }
                Xlat::Unmapped => return Err(va),
                Xlat::Fault(at) => {
                    self.record_fault(sm, kind, va, at);
                    faulted = true;
                    i = past_page(&self.lines, i, va, ls);
                    continue;
                }
            };
            let first_line = (va & !(page - 1)) >> ls;
            let end_line = first_line + (page >> ls).max(1);
            if let (true, Some(m)) = (MULTI, place.as_deref_mut()) {
                // Multi-GPU: the page may be in another GPU's memory (pages are 4 KiB there).
                let write = kind == MemKind::Store;
                match m.locate(self.id, va >> 12, write, ready) {
                    Locate::Local(r) => ready = r,
                    Locate::Remote(owner, r) if kind == MemKind::Load && m.remote_reads_cached => {
                        // Through the L1 (MGPUSim's RDMA engine sits below it); tagged with the owner
                        // so that the page's lines at another GPU, or here after a move, are other lines.
                        let (id, tag) = (self.id, (owner as u64 + 1) << 56);
                        let pa_line = pa >> ls;
                        while i < self.lines.n && self.lines.line[i] < end_line {
                            let line = tag | (pa_line + (self.lines.line[i] - first_line));
                            let mut crossed = false;
                            let d = self.mem.read_l1_then(sm, line, r, |at| {
                                crossed = true;
                                m.remote_line(id, owner, va >> 12, false, at, now)
                            });
                            m.stats.remote_l1_served += u64::from(!crossed);
                            done = done.max(d);
                            i += 1;
                        }
                        continue;
                    }
                    Locate::Remote(owner, r) => {
                        while i < self.lines.n && self.lines.line[i] < end_line {
                            done = done.max(m.remote_line(self.id, owner, va >> 12, write, r, now));
                            i += 1;
                        }
                        continue;
                    }
                    Locate::WriteFault => {
                        self.record_fault(sm, kind, va, ready);
                        faulted = true;
                        while i < self.lines.n && self.lines.line[i] < end_line {
                            i += 1;
                        }
                        continue;
                    }
                }
            }
            if pa & REMOTE_PA != 0 {
                // Remotely mapped (host memory): the page's lines go over the link, uncached.
                let n = self.lines.line[i..self.lines.n].iter().take_while(|&&l| l < end_line).count();
                done = done.max(self.remote.access(kind, va >> 12, n as u32, n as u64 * (1 << ls), ready, now));
                i += n;
                continue;
            }
            if self.large_ptes && page > 4096 {
                // A 64 KiB or 2 MiB managed mapping covers several 4 KiB pages: each one the lines
                // touch is used (a prefetched page's first touch, which no walk saw) and, by a
                // store, dirty. (Device memory has no residency: nothing to mark.)
                let residency = &mut self.xlat.space.residency;
                let mut last = u64::MAX;
                for &l in self.lines.line[i..self.lines.n].iter().take_while(|&&l| l < end_line) {
                    let vpn = (l << ls) >> 12;
                    if vpn != last {
                        last = vpn;
                        residency.mark_touched(vpn);
                        if self.track_dirty && kind == MemKind::Store {
                            residency.mark_dirty(vpn);
                        }
                    }
                }
            } else if self.track_dirty && kind == MemKind::Store {
                self.xlat.space.residency.mark_dirty(va >> 12); // managed pages are 4 KiB here: one page per group
            }
            let pa_line = pa >> ls;
            let hit = self.vmem.is_some() && self.xlat.l1_hits(sm) > hits;
            while i < self.lines.n && self.lines.line[i] < end_line {
                let line = pa_line + (self.lines.line[i] - first_line);
                let ready = match self.vmem.as_mut() {
                    None => ready,
                    Some(v) => {
                        let arrived = v.send(sm, lt, ready, hit);
                        // Write-around: only a read needs a way of its set.
                        let at = if kind == MemKind::Load { self.mem.l1_accept(sm, line, arrived) } else { arrived };
                        v.take(sm, arrived, at);
                        at
                    }
                };
                let d = match kind {
                    MemKind::Load => self.mem.read(sm, line, ready, now),
                    MemKind::Store => self.mem.write(sm, line, ready, now),
                    MemKind::Prefetch => self.mem.prefetch(line, ready, now),
                };
                if let Some(v) = self.vmem.as_mut() {
                    v.done(sm, d);
                }
                done = done.max(d);
                i += 1;
            }
        }
        Ok((done, faulted))
    }

    /// What the GPU waits for, for deadlock reports.
    pub fn describe_waiting(&self, out: &mut Vec<String>) {
        let asleep = self.waiting.len() + self.by_page.values().map(Vec::len).sum::<usize>();
        if asleep > 0 {
            out.push(format!("{asleep} warps wait for a far-fault replay"));
        }
        let at_barrier: usize = self.ctas.iter().map(|c| c.bar_waiters.len()).sum();
        if at_barrier > 0 {
            out.push(format!("{at_barrier} warps wait at a CTA barrier for the rest of their CTA"));
        }
        if let Some(k) = &self.kernel {
            let resident: Vec<&Warp> = self.warps.iter().flatten().collect();
            out.push(format!(
                "kernel `{}`: {} of {} CTAs done, {} dispatched, {} warps resident",
                k.spec.name,
                k.done_ctas,
                k.total_ctas,
                k.next_cta,
                resident.len()
            ));
            let residency = &self.xlat.space.residency;
            for w in resident.iter().take(8) {
                // The pages it waits for, and whether each is mapped here now.
                let pages: Vec<String> =
                    w.faulted.iter().take(4).map(|&p| format!("{p:#x}{}", if residency.is_mapped(p) { " (mapped)" } else { "" })).collect();
                out.push(format!(
                    "  warp {} on SM {}: loads outstanding until {} ps, stores until {} ps; {} faulted, {} to re-execute; waits for pages [{}]",
                    w.id.global,
                    w.sm,
                    w.loads,
                    w.stores,
                    w.pending.len(),
                    w.redo.len(),
                    pages.join(", ")
                ));
            }
        }
    }

    pub fn export(&self, m: &mut Metrics, p: &str, span: Ps) {
        let s = &self.stats;
        m.int(format!("{p}.warp_insts"), s.warp_insts);
        m.int(format!("{p}.completed_insts"), s.completed_insts.saturating_sub(s.split_insts));
        m.int(format!("{p}.warp_mem_insts"), s.warp_mem_insts);
        m.int(format!("{p}.barriers"), s.barriers);
        m.int(format!("{p}.blocked_insts"), s.blocked_insts);
        m.int(format!("{p}.line_accesses"), s.line_accesses);
        m.int(format!("{p}.translations"), s.translations);
        for (size, n) in ["4KiB", "64KiB", "2MiB", "1GiB"].iter().zip(s.translations_by_page) {
            m.int(format!("{p}.translations.by_page.{size}"), n);
        }
        m.int(format!("{p}.kernels"), s.kernels);
        m.int(format!("{p}.ctas"), s.ctas);
        m.int(format!("{p}.warps"), s.warps);
        self.xlat.export(m, p, span);
        self.mem.export(m, p);
        if let Some(v) = &self.vmem {
            v.export(m, &format!("{p}.vmem"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{build, HostOp};

    /// The first kernel `cfg`'s workload launches.
    fn first_kernel(cfg: &Config) -> KernelSpec {
        build(cfg)
            .unwrap()
            .ops
            .into_iter()
            .find_map(|op| if let HostOp::Launch(k) = op { Some(k) } else { None })
            .expect("the workload launches a kernel")
    }

    /// Warp `i` (threads 32 i .. 32 i + 32) of `spec`'s kernel, on SM 0 in CTA 0, idle, with `redo`
    /// to re-execute first and `faulted` pages.
    fn test_warp(spec: &KernelSpec, i: usize, redo: std::collections::VecDeque<(Op, Box<[u64]>)>, faulted: Vec<u64>) -> Warp {
        let id = WarpId { global: i as u64, first_thread: 32 * i as u64, lanes: 32 };
        Warp { stream: spec.gen.warp(id), sm: 0, cta: 0, loads: 0, stores: 0, id, pending: vec![], redo, faulted, epoch: 0 }
    }

    /// A GPU with one sleeping warp per list in `waits`, each waiting for those pages.
    fn sleeping(waits: &[&[u64]]) -> Gpu {
        let cfg = Config::default();
        let mut gpu = Gpu::new(&cfg);
        let spec = first_kernel(&cfg);
        for (i, pages) in waits.iter().enumerate() {
            gpu.warps.push(Some(test_warp(&spec, i, Default::default(), pages.to_vec())));
            gpu.waiting.push(Sleeper::new((gpu.warps.len() - 1) as u32, 0, pages));
        }
        gpu
    }

    impl Gpu {
        /// For tests elsewhere in the crate (`multi`'s): one more warp (as `sleeping`'s, in a slot
        /// after the others) asleep for `pages`, as after its far faults.
        pub(crate) fn put_warp_to_sleep(&mut self, pages: &[u64]) {
            let spec = first_kernel(&Config::default());
            self.warps.push(Some(test_warp(&spec, self.waiting.len(), Default::default(), pages.to_vec())));
            self.waiting.push(Sleeper::new((self.warps.len() - 1) as u32, 0, pages));
        }
    }

    fn woken(gpu: &mut Gpu) -> usize {
        let mut q = EventQueue::new();
        let before = gpu.waiting.len();
        gpu.replay(0, &mut q);
        before - gpu.waiting.len()
    }

    #[test]
    fn requeue_wakes_only_the_warps_waiting_for_the_page() {
        // Pages 7, 8, 9 are not resident: a replay wakes nobody.
        let mut gpu = sleeping(&[&[7], &[8, 9], &[9]]);
        assert_eq!(woken(&mut gpu), 0);
        // Page 5 (nobody waits for it) was taken away: still nobody wakes.
        gpu.requeue_waiters(5);
        assert_eq!(woken(&mut gpu), 0);
        // Page 9 was taken away: the two warps waiting for it re-execute, the third sleeps on.
        gpu.requeue_waiters(9);
        assert_eq!(woken(&mut gpu), 2);
        assert_eq!(gpu.waiting.len(), 1);
        assert_eq!(gpu.warps[gpu.waiting[0].slot as usize].as_ref().unwrap().faulted, vec![7]);
    }

    #[test]
    fn an_answered_page_wakes_every_warp_waiting_for_it_even_with_other_pages_missing() {
        // Warps wait for [7], [8, 9] and [9]; page 9's answer arrives and maps it.
        let mut gpu = sleeping(&[&[7], &[8, 9], &[9]]);
        gpu.xlat.space.residency.make_resident(9);
        let slots = |g: &Gpu| g.waiting.iter().map(|s| s.slot).collect::<Vec<_>>();
        let s = slots(&gpu);
        let mut q = EventQueue::new();
        // `replay` wakes only the warp whose pages are all mapped: [8, 9] waits for 8 too.
        let mut all = sleeping(&[&[7], &[8, 9], &[9]]);
        all.xlat.space.residency.make_resident(9);
        all.replay(0, &mut q);
        assert_eq!(slots(&all), vec![s[0], s[1]]);
        // `replay_page(9)`: both warps waiting for 9 run (their requests on 9 are answered;
        // their lanes on 8 will park again when they re-execute); the warp waiting for 7 sleeps on.
        let mut q = EventQueue::new();
        gpu.replay_page(9, 0, &mut q);
        assert_eq!(slots(&gpu), vec![s[0]]);
        assert_eq!(q.len(), 2);
        assert!(gpu.warps[s[1] as usize].as_ref().unwrap().faulted.is_empty(), "its re-execution notes what is still missing");
        // An answer that was invalidated before it arrived (page 7 not mapped) wakes nobody.
        let mut q = EventQueue::new();
        gpu.replay_page(7, 0, &mut q);
        assert_eq!((gpu.waiting.len(), q.len()), (1, 0));
    }

    #[test]
    fn a_reexecuted_instruction_parks_its_lanes_on_held_pages() {
        let mut gpu = sleeping(&[&[]]);
        let slot = gpu.waiting[0].slot as usize;
        gpu.xlat.space.residency.make_resident(6);
        let held: rustc_hash::FxHashSet<u64> = [5u64, 8].into_iter().collect();
        let mem = |n: u32| Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n }, bytes: 4 };
        let page = |p: u64| p << 12;
        let w = gpu.warps[slot].as_mut().unwrap();
        // Lanes on page 5 (held), 6 (mapped) and 7 (neither: it must walk and fault again).
        w.redo = vec![(mem(3), vec![page(5) + 4, page(6), page(7)].into()), (Op::Wait, Box::default())].into();
        let residency = &gpu.xlat.space.residency;
        assert_eq!(park_held(w, &held, residency), Some(false));
        assert_eq!(w.redo[0], (mem(2), vec![page(6), page(7)].into()));
        assert_eq!(w.pending, vec![(mem(1), vec![page(5) + 4].into())]);
        assert_eq!(w.faulted, vec![5]);
        // An instruction whose every lane is held leaves redo whole; nothing issues.
        w.redo = vec![(mem(2), vec![page(8), page(5)].into()), (Op::Wait, Box::default())].into();
        assert_eq!(park_held(w, &held, residency), Some(true));
        assert_eq!(w.redo.len(), 1);
        assert_eq!(w.pending[1], (mem(2), vec![page(8), page(5)].into()));
        assert_eq!(w.faulted, vec![5, 8]);
        // Nothing held: untouched.
        let before = w.redo.clone();
        assert_eq!(park_held(w, &held, residency), None);
        assert_eq!(w.redo, before);
    }

    #[test]
    fn a_new_refault_epoch_wakes_sleepers_whose_page_was_noted() {
        // The first replay notes the page each sleeper stopped at (7, 9, 9); a replay
        // that only re-reads those notes would keep them all asleep after an eviction.
        let mut gpu = sleeping(&[&[7], &[8, 9], &[9]]);
        assert_eq!(woken(&mut gpu), 0);
        assert!(gpu.waiting.iter().all(|s| s.on != Sleeper::UNKNOWN));
        gpu.xlat.space.residency.refault_epoch += 1;
        assert_eq!(woken(&mut gpu), 3);
        assert!(gpu.waiting.is_empty());
    }

    #[test]
    fn a_batch_replay_wakes_only_warps_whose_pages_left_the_drivers_hands() {
        // Warps wait for [7], [8, 9] and [9]; the driver holds faults on 7, 8 and 9.
        let mut gpu = sleeping(&[&[7], &[8, 9], &[9]]);
        let mut held: Vec<u64> = vec![7, 8, 9];
        let replay = |gpu: &mut Gpu, lost: bool, held: &[u64]| {
            let before = gpu.waiting.len();
            gpu.replay_serviced(lost, 0, &mut EventQueue::new(), |u, p| u == 0 && held.contains(&p));
            before - gpu.waiting.len()
        };
        assert_eq!(replay(&mut gpu, false, &held), 0);
        // Page 9 was serviced, then evicted within the batch (a new refault epoch): nobody will
        // raise it again. Not told that a fault ended unmapped, the replay keeps everyone
        // asleep (the cheap check); told, the warp waiting only for 9 re-executes, the one
        // also waiting for 8 sleeps on 8, and the one waiting for 7 is left alone, where the
        // epoch would have woken all three.
        held.retain(|&p| p != 9);
        gpu.xlat.space.residency.refault_epoch += 1;
        assert_eq!(replay(&mut gpu, false, &held), 0);
        assert_eq!(replay(&mut gpu, true, &held), 1);
        let waits = |gpu: &Gpu| {
            gpu.waiting.iter().map(|s| (s.on, gpu.warps[s.slot as usize].as_ref().unwrap().faulted.clone())).collect::<Vec<_>>()
        };
        assert_eq!(waits(&gpu), vec![(7, vec![7]), (8, vec![8])]);
        // Page 8 is mapped: its warp re-executes (and faults again on 9).
        gpu.xlat.space.residency.make_resident(8);
        held.retain(|&p| p != 8);
        assert_eq!(replay(&mut gpu, false, &held), 1);
        assert_eq!(waits(&gpu), vec![(7, vec![7])]);
    }

    #[test]
    fn once_memory_is_full_a_warp_wakes_when_any_of_its_pages_is_mapped_or_lost() {
        // Warps wait for [7], [8, 9] and [9]; the driver holds faults on all three pages.
        let mut gpu = sleeping(&[&[7], &[8, 9], &[9]]);
        let mut held: Vec<u64> = vec![7, 8, 9];
        let replay = |gpu: &mut Gpu, ended: &[u64], held: &[u64]| {
            let before = gpu.waiting.len();
            let mut q = EventQueue::new();
            gpu.replay_ended(ended, 0, &mut q, |u, p| u == 0 && held.contains(&p));
            // One event per warp woken, by this replay only.
            assert_eq!(q.len(), before - gpu.waiting.len());
            before - gpu.waiting.len()
        };
        let asleep = |gpu: &Gpu| gpu.waiting.iter().map(|s| s.slot).collect::<Vec<_>>();
        let slots = asleep(&gpu);
        // Filed under their pages; nothing mapped or ended: all sleep.
        assert_eq!(replay(&mut gpu, &[], &held), 0);
        // Page 9 is mapped: both warps waiting for it run their lanes on it now, the second
        // although page 8 is still missing (its lanes on 8 walk again and merge).
        gpu.xlat.space.residency.make_resident(9);
        held.retain(|&p| p != 9);
        assert_eq!(replay(&mut gpu, &[9], &held), 2);
        assert_eq!(asleep(&gpu), vec![slots[0]]);
        assert!(gpu.warps[slots[1] as usize].as_ref().unwrap().faulted.is_empty(), "re-executes afresh");
        // Page 8's entry for the second warp is from a nap that ended: it wakes nobody.
        assert_eq!(replay(&mut gpu, &[8], &held), 0);
        // Page 7's fault was dropped (a deferred block): its warp re-executes and faults again.
        held.retain(|&p| p != 7);
        assert_eq!(replay(&mut gpu, &[7], &held), 1);
        assert!(gpu.waiting.is_empty());
        // A warp that fell asleep after its page was mapped (its fault ended while it ran on)
        // wakes when it is filed, at the next replay.
        let mut late = sleeping(&[&[5], &[6]]);
        let slots = asleep(&late);
        late.xlat.space.residency.make_resident(5);
        assert_eq!(replay(&mut late, &[], &[6]), 1);
        assert_eq!(asleep(&late), vec![slots[1]]);
    }

    #[test]
    fn wake_puts_pending_after_redo() {
        let mut gpu = sleeping(&[&[]]);
        let w = gpu.warps.last_mut().unwrap().as_mut().unwrap();
        let ops = |w: &Warp| w.redo.iter().map(|(op, _)| *op).collect::<Vec<_>>();
        // Nothing left to redo: the pending instructions are next, in order.
        w.pending = vec![(Op::Compute(1), Box::default()), (Op::Wait, Box::default())];
        w.wake();
        assert_eq!(ops(w), vec![Op::Compute(1), Op::Wait]);
        assert!(w.pending.is_empty());
        // Still redoing (a blocked µTLB stopped it): the pending ones follow.
        w.redo.pop_front();
        w.pending.push((Op::Compute(2), vec![5u64, 6].into()));
        w.wake();
        assert_eq!(ops(w), vec![Op::Wait, Op::Compute(2)]);
        assert_eq!(&*w.redo[1].1, &[5, 6]);
        assert!(w.pending.is_empty());
    }

    #[test]
    fn a_kernels_cta_limit_caps_the_ctas_an_sm_holds() {
        // blas-gemm at n = 1024: 64 CTAs of 8 warps; 4 SMs with room for 8 such CTAs each by warp slots.
        for (limit, want) in [(2u32, 2u32), (1, 1), (64, 8)] {
            let sets =
                ["workload.kind=blas-gemm", "workload.blas_gemm.n=1024", "gpu.sms=4", "gpu.max_warps_per_sm=64", "gpu.max_ctas_per_sm=32"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain([format!("workload.blas_gemm.ctas_per_sm={limit}")])
                    .collect::<Vec<_>>();
            let cfg = crate::config::resolve(&[] as &[crate::config::Source], &sets).unwrap();
            let mut gpu = Gpu::new(&cfg);
            let spec = build(&cfg).unwrap().ops.into_iter().find_map(|op| if let HostOp::Launch(k) = op { Some(k) } else { None }).unwrap();
            gpu.launch(spec, 0, &mut EventQueue::new());
            assert!(gpu.sms.iter().all(|s| s.ctas == want), "limit {limit}: {:?}", gpu.sms.iter().map(|s| s.ctas).collect::<Vec<_>>());
        }
    }

    #[test]
    fn page_filter_rules_out_most_other_pages() {
        let f = PageFilter::of(&[3, 4, 1000, 77_777]);
        let hits = (10_000..20_000u64).filter(|&p| f.may_hold(p)).count();
        assert!(hits < 10_000 * 12 / 100, "{hits} false positives in 10000");
        assert!(!PageFilter::default().may_hold(3));
    }

    #[test]
    fn narrow_keeps_the_lanes_on_faulted_pages_in_order() {
        let fault = |vpn| Fault { time: 0, vpn, utlb: 0, sm: 0, warp: 0, write: false, prefetch: false };
        let mut scratch = [0u64; MAX_LANES];
        // 32 lanes of 8 bytes every 512 bytes from 0x1800: pages 1 (lanes 0..3), 2 (4..11), 3 (12..19), ...
        let op = Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base: 0x1800, stride: 512, n: 32 }, bytes: 8 };
        let (nop, lanes) = narrow(op, &scratch, &[fault(3), fault(1)], false);
        let want: Vec<u64> = (0..4).chain(12..20).map(|i| 0x1800 + 512 * i).collect();
        assert_eq!(&*lanes, &want[..]);
        assert!(matches!(nop, Op::Mem { lanes: Lanes::Explicit { n: 12 }, bytes: 8, .. }));
        // A lane whose bytes straddle two pages runs again if either faulted.
        scratch[..3].copy_from_slice(&[0x2ffc, 0x5000, 0x2000]);
        let op = Op::Mem { kind: MemKind::Store, lanes: Lanes::Explicit { n: 3 }, bytes: 8 };
        assert_eq!(&*narrow(op, &scratch, &[fault(3)], false).1, &[0x2ffc]);
        assert!(narrow(op, &scratch, &[fault(9)], false).1.is_empty());
        // Split (multi-GPU): only the part on the faulted page runs again, 8 bytes within it:
        // the tail from page 3's start, or the head ending at page 2's end; both faulted, whole.
        assert_eq!(&*narrow(op, &scratch, &[fault(3)], true).1, &[0x3000]);
        assert_eq!(&*narrow(op, &scratch, &[fault(2)], true).1, &[0x2ff8, 0x2000]);
        assert_eq!(&*narrow(op, &scratch, &[fault(2), fault(3)], true).1, &[0x2ffc, 0x2000]);
        // An access over three pages (8 KiB from 0x2ffc: pages 2, 3, 4) is never split; its last
        // page counts, as without splitting.
        let long = Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: 1 }, bytes: 8192 };
        assert_eq!(&*narrow(long, &scratch, &[fault(4)], true).1, &[0x2ffc]);
        // One GPU, every lane on the faulted page: the instruction re-executes as it is, unless its
        // lanes overlap by more than a minimal line (96 bytes every 33: coalescing the strided form
        // would give lines out of order), when the explicit lanes are kept.
        let whole = Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base: 0x2000, stride: 4, n: 32 }, bytes: 4 };
        assert_eq!(narrow(whole, &scratch, &[fault(2)], false), (whole, Box::default()));
        let overlapping = Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base: 0x2000, stride: 33, n: 2 }, bytes: 96 };
        let (nop, lanes) = narrow(overlapping, &scratch, &[fault(2)], false);
        assert!(matches!(nop, Op::Mem { lanes: Lanes::Explicit { n: 2 }, .. }) && *lanes == [0x2000, 0x2021]);
    }

    /// GMMU multi-GPU re-execution: lanes on a page still held behind its far fault wait, and
    /// a lane crossing into a held page from a mapped one (or back) is split at the boundary.
    #[test]
    fn park_held_splits_a_lane_that_crosses_into_a_held_page() {
        let mut gpu = sleeping(&[&[]]);
        let w = gpu.warps.last_mut().unwrap().as_mut().unwrap();
        let residency = &mut gpu.xlat.space.residency;
        residency.make_resident(2);
        // Page 2 is mapped, page 3 held (its answer not back): lanes 0x2ffc (crosses 2 -> 3),
        // 0x2000 (page 2 only), 0x3010 (page 3 only).
        let held: rustc_hash::FxHashSet<u64> = [3].into_iter().collect();
        let op = Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: 3 }, bytes: 8 };
        w.redo.push_back((op, vec![0x2ffc, 0x2000, 0x3010].into()));
        assert_eq!(park_held(w, &held, residency), Some(false));
        assert_eq!(&*w.redo[0].1, &[0x2ff8, 0x2000], "the head on page 2 and the page-2 lane go now");
        assert_eq!(&*w.pending.last().unwrap().1, &[0x3000, 0x3010], "the tail and the page-3 lane wait");
        assert_eq!(w.faulted, [3]);
        // Nothing held: nothing parked.
        assert_eq!(park_held(w, &Default::default(), residency), None);
    }

    use proptest::prelude::*;

    /// The sleepers (slot, page noted) and every warp's faulted pages: what two scans must agree on.
    #[allow(clippy::type_complexity)]
    fn sleep_state(g: &Gpu) -> (Vec<(u32, u64)>, Vec<Vec<u64>>) {
        let sleepers = g.waiting.iter().map(|s| (s.slot, s.on)).collect();
        let faulted = g.warps.iter().flatten().map(|w| w.faulted.clone()).collect();
        (sleepers, faulted)
    }

    /// The events a queue holds, in order (the warps woken, at their times).
    fn drain(q: &mut EventQueue<Ev>) -> Vec<(Ps, Ev)> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    /// `narrow` before its fast path: every lane checked against the faults.
    fn narrow_lane_by_lane(op: Op, scratch: &[u64; MAX_LANES], faults: &[Fault], split: bool) -> (Op, Box<[u64]>) {
        let Op::Mem { kind, lanes, bytes } = op else { return (op, Box::default()) };
        let mut out = vec![];
        let (count, lane) = match lanes {
            Lanes::Strided { base, stride, n } => (n as usize, (base, stride, false)),
            Lanes::Explicit { n } => (n as usize, (0, 0, true)),
        };
        for (i, &x) in scratch.iter().enumerate().take(count) {
            let a = if lane.2 { x } else { lane.0 + i as u64 * lane.1 };
            let len = u64::from(bytes.max(1));
            let (first, last) = (a >> 12, (a + len - 1) >> 12);
            let (head, tail) = (faults.iter().any(|f| f.vpn == first), first != last && faults.iter().any(|f| f.vpn == last));
            if head || tail {
                out.push(match (split && last == first + 1, head, tail) {
                    (true, true, false) => (last << 12) - len,
                    (true, false, true) => last << 12,
                    _ => a,
                });
            }
        }
        (Op::Mem { kind, lanes: Lanes::Explicit { n: out.len() as u32 }, bytes }, out.into())
    }

    /// The lines an instruction re-executed with `lanes` coalesces to, on `shift`-bit lines.
    fn lines_of(op: Op, lanes: &[u64], shift: u32) -> Vec<u64> {
        let Op::Mem { lanes: l, bytes, .. } = op else { return vec![] };
        let mut scratch = [0u64; MAX_LANES];
        scratch[..lanes.len()].copy_from_slice(lanes);
        let mut out = Lines::default();
        coalesce(l, bytes, &scratch, shift, &mut out);
        out.line[..out.n].to_vec()
    }

    proptest! {
        /// `narrow` re-executes what the lane-by-lane version does: the same explicit lanes,
        /// or (one GPU, every lane on one faulted page) the instruction itself, which
        /// coalesces to the same lines on every line size.
        #[test]
        fn narrow_matches_lane_by_lane(
            base in 0u64..0x6000,
            stride in prop_oneof![0u64..80, 0u64..5000, Just(u64::MAX - 3)],
            n in 0u32..=32,
            bytes in prop_oneof![Just(4u32), Just(8), Just(16), Just(96)],
            faults in proptest::collection::vec(0u64..8, 0..4),
            split: bool,
            explicit: bool,
        ) {
            let faults: Vec<Fault> =
                faults.into_iter().map(|vpn| Fault { time: 0, vpn, utlb: 0, sm: 0, warp: 0, write: false, prefetch: false }).collect();
            let mut scratch = [0u64; MAX_LANES];
            let op = if explicit {
                for (i, x) in scratch.iter_mut().enumerate().take(n as usize) {
                    *x = base.wrapping_add((i as u64).wrapping_mul(stride)) % 0x8000;
                }
                Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n }, bytes }
            } else {
                if n > 0 && (u64::from(n) - 1).checked_mul(stride).and_then(|d| d.checked_add(base + 96)).is_none() {
                    return Ok(()); // a wrapping lane address: no workload makes one
                }
                Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base, stride, n }, bytes }
            };
            let (want_op, want) = narrow_lane_by_lane(op, &scratch, &faults, split);
            let (got_op, got) = narrow(op, &scratch, &faults, split);
            if got_op == op && !split && !matches!(op, Op::Mem { lanes: Lanes::Explicit { .. }, .. }) {
                prop_assert_eq!(&*want, &(0..u64::from(n)).map(|i| base + i * stride).collect::<Vec<_>>()[..]);
                for shift in [5, 6, 7] {
                    prop_assert_eq!(lines_of(got_op, &got, shift), lines_of(want_op, &want, shift));
                }
            } else {
                prop_assert_eq!((got_op, got), (want_op, want));
            }
        }

        /// The sleepers' scans skip the residency lookup of a page not mapped since the last
        /// scan; with a filter that holds every page they do what they did before it, through
        /// pages mapped, mapped remotely and evicted, replays of both kinds, and refault epochs.
        #[test]
        fn mapped_since_filter_matches_a_full_scan(
            waits in proptest::collection::vec(proptest::collection::vec(0u64..24, 0..6), 1..12),
            steps in proptest::collection::vec((0u32..6, 0u64..24), 0..40),
        ) {
            let lists: Vec<&[u64]> = waits.iter().map(Vec::as_slice).collect();
            let mut fast = sleeping(&lists);
            let mut full = sleeping(&lists);
            full.xlat.space.residency.disable_mapped_since();
            let (mut qf, mut qs) = (EventQueue::new(), EventQueue::new());
            for (k, &(what, p)) in steps.iter().enumerate() {
                for g in [&mut fast, &mut full] {
                    let r = &mut g.xlat.space.residency;
                    match what {
                        0 | 1 => {
                            r.make_resident(p);
                        }
                        2 if !r.is_resident(p) => r.map_remote(p),
                        3 => {
                            r.unmake_resident(p);
                            r.unmap_remote(p);
                        }
                        4 if p % 5 == 0 => r.refault_epoch += 1,
                        _ => {}
                    }
                }
                // Replay on every other step, so pages are mapped and evicted between scans.
                if k % 2 == 1 {
                    // In the driver's hands: odd pages (a fault ended for the others).
                    let in_service = |_: u32, p: u64| p % 2 == 1;
                    match p % 3 {
                        0 => {
                            fast.replay(0, &mut qf);
                            full.replay(0, &mut qs);
                        }
                        1 => {
                            fast.replay_serviced(false, 0, &mut qf, in_service);
                            full.replay_serviced(false, 0, &mut qs, in_service);
                        }
                        _ => {
                            fast.resume(&[0], what == 5, 0, &mut qf, in_service);
                            full.resume(&[0], what == 5, 0, &mut qs, in_service);
                        }
                    }
                }
                prop_assert_eq!(sleep_state(&fast), sleep_state(&full));
            }
            prop_assert_eq!(drain(&mut qf), drain(&mut qs));
        }

        /// A filter holds every page it was made of.
        #[test]
        fn page_filter_has_no_false_negatives(pages in proptest::collection::vec(any::<u64>(), 0..32)) {
            let f = PageFilter::of(&pages);
            prop_assert!(pages.iter().all(|&p| f.may_hold(p)));
        }

        /// `requeue_waiters` with the filters does what a scan of every sleeper does (the
        /// version before them: a filter that holds every page), through replays that wake
        /// warps and pop their resident pages, and new refault epochs.
        #[test]
        fn requeue_matches_a_full_scan(
            waits in proptest::collection::vec(proptest::collection::vec(0u64..24, 0..6), 1..12),
            steps in proptest::collection::vec((0u32..4, 0u64..24), 0..40),
        ) {
            let lists: Vec<&[u64]> = waits.iter().map(Vec::as_slice).collect();
            let mut fast = sleeping(&lists);
            let mut full = sleeping(&lists);
            let (mut qf, mut qs) = (EventQueue::new(), EventQueue::new());
            for &(what, p) in &steps {
                full.waiting.iter_mut().for_each(|s| s.pages = PageFilter(!0));
                for g in [&mut fast, &mut full] {
                    match what {
                        0 | 1 => g.requeue_waiters(p),
                        2 => {
                            g.xlat.space.residency.make_resident(p);
                        }
                        _ => {
                            if p % 5 == 0 {
                                g.xlat.space.residency.refault_epoch += 1;
                            }
                        }
                    }
                }
                fast.replay(0, &mut qf);
                full.replay(0, &mut qs);
                prop_assert_eq!(sleep_state(&fast), sleep_state(&full));
            }
            prop_assert_eq!(drain(&mut qf), drain(&mut qs));
        }
    }

    #[test]
    fn a_warp_whose_pages_arrived_sleeps_on_while_its_utlb_is_blocked() {
        // A warp waits for page 7, now mapped; its µTLB (0) is blocked (blocking faults).
        let mut gpu = sleeping(&[&[7]]);
        gpu.xlat.space.residency.make_resident(7);
        gpu.blocked[0] = 5000;
        let mut q = EventQueue::new();
        // Another µTLB's last fault was serviced: µTLB 0 stays blocked, the warp sleeps on.
        gpu.resume(&[3], false, 0, &mut q, |_, _| false);
        assert_eq!((gpu.waiting.len(), q.len()), (1, 0));
        // µTLB 0's: it unblocks and the warp re-executes.
        gpu.resume(&[0], false, 0, &mut q, |_, _| false);
        assert_eq!((gpu.waiting.len(), q.len(), gpu.blocked[0]), (0, 1, Ps::MAX));
    }

    #[test]
    fn once_memory_is_full_a_warp_whose_fault_ended_unmapped_while_it_ran_on_wakes_when_filed() {
        // Neither page 5 nor 6 is mapped; the driver holds 6's fault, 5's was dropped before the
        // warp waiting for it fell asleep: nothing would raise it again, so that warp re-executes.
        let mut gpu = sleeping(&[&[5], &[6]]);
        let slots: Vec<u32> = gpu.waiting.iter().map(|s| s.slot).collect();
        let mut q = EventQueue::new();
        gpu.replay_ended(&[], 0, &mut q, |u, p| u == 0 && p == 6);
        assert_eq!(gpu.waiting.iter().map(|s| s.slot).collect::<Vec<_>>(), vec![slots[1]]);
        assert_eq!(drain(&mut q).len(), 1);
    }

    #[test]
    fn a_page_request_wakes_the_warps_filed_under_every_page_of_its_range() {
        // Warps wait for pages 7, 8 and 9: a completion of other pages files them under theirs.
        let mut gpu = sleeping(&[&[7], &[8], &[9]]);
        let mut q = EventQueue::new();
        gpu.replay_pages(100, 101, 0, &mut q);
        assert_eq!((gpu.waiting.len(), gpu.by_page.len(), q.len()), (0, 3, 0));
        // Pages [7, 9) complete: the warps on 7 and 8 re-execute; the one on 9 stays filed.
        for p in 7..9 {
            gpu.xlat.space.residency.make_resident(p);
        }
        gpu.replay_pages(7, 9, 0, &mut q);
        assert_eq!(q.len(), 2);
        assert_eq!(gpu.by_page.keys().copied().collect::<Vec<_>>(), vec![9]);
        // After an eviction (a new refault epoch) a sleeping warp re-executes when filed, as in
        // `replay`: its page may have gone after its fault was serviced, and nothing raises it again.
        let mut gpu = sleeping(&[&[7]]);
        gpu.xlat.space.residency.refault_epoch += 1;
        let mut q = EventQueue::new();
        gpu.replay_pages(100, 101, 0, &mut q);
        assert_eq!((q.len(), gpu.by_page.len()), (1, 0));
    }

    #[test]
    fn a_faulting_page_takes_its_own_lines_with_it_and_no_more() {
        // 128-byte lines: page 0 holds lines 0..32. Lines 30, 31 are on it, 32 and 33 on page 1.
        let mut l = Lines::default();
        l.line[..4].copy_from_slice(&[30, 31, 32, 33]);
        l.n = 4;
        assert_eq!(past_page(&l, 0, 30 << 7, 7), 2);
        assert_eq!(past_page(&l, 2, 32 << 7, 7), 4);
    }

    #[test]
    fn a_fault_raised_but_not_yet_written_is_outstanding() {
        let cfg = Config::default();
        let uvm = Uvm::new(&cfg.uvm, 16, 16, 0);
        let raised = [Fault { time: 0, vpn: 5, utlb: 0, sm: 0, warp: 0, write: false, prefetch: false }];
        // Page 5's fault is among this run's, not yet in the driver's hands: the warp must sleep.
        assert!(!no_fault_outstanding(Some(&uvm), 0, &[5], &raised));
        // Nobody holds page 6's: the replay that ended it came while the warp went on.
        assert!(no_fault_outstanding(Some(&uvm), 0, &[6], &raised));
        assert!(!no_fault_outstanding(None, 0, &[6], &raised));
    }

    /// A GPU of the default config (1 GHz: an issue slot is 1000 ps) whose CTA 0 on SM 0 holds
    /// one warp per script (in slot i), each running its script, which ends in `Exit`, from `redo`.
    fn scripted(scripts: &[&[Op]]) -> Gpu {
        scripted_in(&Config::default(), scripts)
    }

    fn scripted_in(cfg: &Config, scripts: &[&[Op]]) -> Gpu {
        let mut gpu = Gpu::new(cfg);
        let spec = first_kernel(cfg);
        gpu.ctas.push(Cta { warps_left: scripts.len() as u32, ..Cta::default() });
        for (i, ops) in scripts.iter().enumerate() {
            gpu.warps[i] = Some(test_warp(&spec, i, ops.iter().map(|&op| (op, Box::default())).collect(), vec![]));
        }
        gpu
    }

    /// Runs the scripted warps, all ready at 0 (slot 0 handled first); when their CTA is done.
    fn cta_end(gpu: &mut Gpu) -> Ps {
        let mut q = EventQueue::new();
        for slot in 0..gpu.ctas[0].warps_left {
            q.push(0, Ev::Warp(slot));
        }
        while let Some((t, ev)) = q.pop() {
            match ev {
                Ev::Warp(slot) => gpu.run_warp(slot, t, &mut q, None, None).unwrap(),
                Ev::CtaDone(0) => return t,
                e => panic!("unexpected event {e:?}"),
            }
        }
        panic!("the CTA never finished")
    }

    #[test]
    fn blocking_faults_block_the_utlb_from_the_first_fault_found() {
        // One load on two managed pages 1 GiB apart, neither resident: each walk ends in a fault
        // (the second's upper levels miss the walk cache again: the times differ). The µTLB takes
        // no request from the earlier one on, and the warp sleeps.
        let mut cfg = Config::default();
        cfg.uvm.fault_mode = FaultMode::Blocking;
        let (a, b) = (1u64 << 40, (1u64 << 40) + (1 << 30));
        let load = Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: 2 }, bytes: 4 };
        let mut gpu = scripted_in(&cfg, &[&[load, Op::Exit]]);
        gpu.xlat.space.map(&crate::workload::Buffer { base: a, bytes: 2 << 30, page_bytes: 4096, managed: true });
        gpu.warps[0].as_mut().unwrap().redo[0].1 = vec![a, b].into();
        gpu.run_warp(0, 0, &mut EventQueue::new(), None, None).unwrap();
        let times: Vec<Ps> = gpu.faults.iter().map(|f| f.time).collect();
        assert_eq!((gpu.faults.len(), gpu.waiting.len()), (2, 1));
        assert!(times[1] < times[0], "{times:?}: the second walk hits the walk cache's upper levels");
        assert_eq!(gpu.blocked[0], times[1]);
    }

    #[test]
    fn a_warp_that_stalls_on_its_faults_goes_on_past_a_faulting_prefetch() {
        // `uvm.stall_warp_on_fault`: a faulting load stops its warp there; a faulting prefetch
        // does not (nothing waits for it): Compute and Exit issue too (3 instructions), and the
        // warp sleeps at its Exit for the prefetch's replay.
        let mut cfg = Config::default();
        cfg.uvm.stall_warp_on_fault = true;
        let base = 1u64 << 40;
        let mem = |kind| Op::Mem { kind, lanes: Lanes::Strided { base, stride: 4, n: 32 }, bytes: 4 };
        for (kind, issued) in [(MemKind::Prefetch, 3), (MemKind::Load, 1)] {
            let mut gpu = scripted_in(&cfg, &[&[mem(kind), Op::Compute(1), Op::Exit]]);
            gpu.xlat.space.map(&crate::workload::Buffer { base, bytes: 4096, page_bytes: 4096, managed: true });
            gpu.run_warp(0, 0, &mut EventQueue::new(), None, None).unwrap();
            assert_eq!((gpu.stats.warp_insts, gpu.faults.len(), gpu.waiting.len()), (issued, 1, 1), "{kind:?}");
            // Neither is a write (a prefetch fault asks for a readable page).
            assert_eq!((gpu.faults[0].write, gpu.faults[0].prefetch), (false, kind == MemKind::Prefetch));
        }
    }

    #[test]
    fn a_faulting_warp_notes_the_refault_epoch_of_its_fault() {
        // Evictions have started epoch 3 before the warp's load faults on page `base >> 12`. The warp
        // notes epoch 3, so a later replay of other pages files it under its page, still missing (an
        // epoch older than the residency's would mean its page may have gone since its fault was
        // serviced, and it would re-execute at once: one event).
        let mut cfg = Config::default();
        cfg.uvm.stall_warp_on_fault = true;
        let base = 1u64 << 40;
        let load = Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base, stride: 4, n: 32 }, bytes: 4 };
        let mut gpu = scripted_in(&cfg, &[&[load, Op::Exit]]);
        gpu.xlat.space.map(&crate::workload::Buffer { base, bytes: 4096, page_bytes: 4096, managed: true });
        gpu.xlat.space.residency.refault_epoch = 3;
        gpu.run_warp(0, 0, &mut EventQueue::new(), None, None).unwrap();
        assert_eq!((gpu.faults.len(), gpu.waiting.len()), (1, 1));
        let mut q = EventQueue::new();
        gpu.replay_pages(100, 101, 0, &mut q);
        assert_eq!((q.len(), gpu.by_page.keys().copied().collect::<Vec<_>>()), (0, vec![base >> 12]));
    }

    #[test]
    fn a_warp_exits_once_its_stores_are_done() {
        // A store to device memory issued at 0: its translation alone walks four levels in DRAM
        // (over 100 ns); the Exit issues at 1 ns but the CTA ends when the store is done.
        let store = Op::Mem { kind: MemKind::Store, lanes: Lanes::Strided { base: 1 << 40, stride: 4, n: 32 }, bytes: 4 };
        let mut gpu = scripted(&[&[store, Op::Exit]]);
        gpu.xlat.space.map(&crate::workload::Buffer { base: 1 << 40, bytes: 4096, page_bytes: 4096, managed: false });
        let end = cta_end(&mut gpu);
        assert!(end > 100_000, "ended at {end} ps");
        // 32 lanes x 4 aligned bytes: one 128-byte line, one translation.
        let st = &gpu.stats;
        assert_eq!((st.completed_insts, st.warp_mem_insts, st.line_accesses, st.translations), (1, 1, 1, 1));
    }

    #[test]
    fn a_remote_load_moves_every_line_it_touches_over_the_link() {
        // 32 lanes of 8 bytes from a remotely mapped managed page: 256 bytes, two 128-byte lines,
        // one remote load of both lines' bytes (one line's would be 128).
        let base = 1u64 << 40;
        let load = Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base, stride: 8, n: 32 }, bytes: 8 };
        let mut gpu = scripted(&[&[load, Op::Exit]]);
        gpu.xlat.space.map(&crate::workload::Buffer { base, bytes: 4096, page_bytes: 4096, managed: true });
        gpu.xlat.space.residency.map_remote(base >> 12);
        cta_end(&mut gpu);
        let (r, st) = (&gpu.remote, &gpu.stats);
        assert_eq!((r.loads, r.stores, r.bytes, st.line_accesses), (1, 0, 256, 2));
        assert!(gpu.faults.is_empty());
    }

    #[test]
    fn a_load_that_returns_before_an_earlier_one_does_not_end_the_wait_sooner() {
        // An earlier load is back at 10 µs; this one (device memory, a walk and a DRAM read, well
        // under that) returns first. The Wait ends with the later of the two, then Exit issues.
        let base = 1u64 << 40;
        let load = Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base, stride: 4, n: 32 }, bytes: 4 };
        let mut gpu = scripted(&[&[load, Op::Wait, Op::Exit]]);
        gpu.xlat.space.map(&crate::workload::Buffer { base, bytes: 4096, page_bytes: 4096, managed: false });
        gpu.warps[0].as_mut().unwrap().loads = 10_000_000;
        assert_eq!(cta_end(&mut gpu), 10_000_000);
        assert_eq!(gpu.stats.completed_insts, 1);
    }

    #[test]
    fn with_back_pressure_a_store_writes_around_a_set_whose_way_waits_for_a_fill() {
        // An L1 of one 128-byte way: a load of line 0 (a DRAM read) locks it until its data is back.
        // The store to line 1 issued next needs no way (write-around): it is done at the L2, before
        // the load's data; were it to wait for the way it would end after the load.
        let mut cfg = Config::default();
        cfg.gpu.vmem.backpressure = true;
        (cfg.gpu.l1d.ways, cfg.gpu.l1d.size_bytes) = (1, crate::config::ByteSize(128));
        let base = 1u64 << 40;
        let mem = |kind, at| Op::Mem { kind, lanes: Lanes::Strided { base: at, stride: 4, n: 32 }, bytes: 4 };
        let mut gpu = scripted_in(&cfg, &[&[mem(MemKind::Load, base), mem(MemKind::Store, base + 128), Op::Wait, Op::Exit]]);
        gpu.xlat.space.map(&crate::workload::Buffer { base, bytes: 4096, page_bytes: 4096, managed: false });
        // Another event pending at 1 ps: the warp yields at its Wait instead of running on inline.
        let mut q = EventQueue::new();
        q.push(1, Ev::Host);
        gpu.run_warp(0, 0, &mut q, None, None).unwrap();
        let w = gpu.warps[0].as_ref().unwrap();
        assert!(0 < w.stores && w.stores < w.loads, "store done at {} ps, load at {} ps", w.stores, w.loads);
    }

    #[test]
    fn with_back_pressure_a_merged_translation_waiting_for_room_holds_no_lookup() {
        // One buffer entry before the L1: loads of lines 0, 1, 2 of a device page issue at 0, 1 and
        // 2 ns. The first misses the L1 TLB (a walk, answered at W); the other two merge into its
        // entry (no hit: the TLB's hit count is unchanged), answered at W too. The first holds the
        // entry until the cache takes it at W + 5 cycles, the second then until W + 10: they wait
        // 5 and 10 ns. Only a hit the TLB cannot send holds the lookups after it: none is held
        // (were the second a hit, the third's lookup would wait from 2 ns until 1 + 5 ns).
        let mut cfg = Config::default();
        (cfg.gpu.vmem.backpressure, cfg.gpu.vmem.buffer_entries) = (true, 1);
        let base = 1u64 << 40;
        let load =
            |line: u64| Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base: base + 128 * line, stride: 4, n: 32 }, bytes: 4 };
        let mut gpu = scripted_in(&cfg, &[&[load(0), load(1), load(2), Op::Exit]]);
        gpu.xlat.space.map(&crate::workload::Buffer { base, bytes: 4096, page_bytes: 4096, managed: false });
        cta_end(&mut gpu);
        let l1 = &gpu.xlat.l1[0].stats;
        assert_eq!((l1.hits, l1.mshr_hits, l1.misses), (0, 2, 1));
        let s = &gpu.vmem.as_ref().unwrap().stats;
        assert_eq!((s.full_waits, s.full_ps), (2, 15_000));
        assert_eq!((s.held_lookups, s.held_ps), (0, 0));
    }

    #[test]
    fn a_warp_running_ahead_lets_the_timelines_forget_only_before_the_next_event() {
        // Remote stores (a page mapped in host memory) take their 128 bytes on the link's
        // device-to-host timeline (12 GB/s, 65,536 ps buckets) from their translation, and are
        // done a link latency (1 µs) later. Warp 2 warms the L1 TLB at 0. At T = 1,040,000 ps warps
        // 0 and 1 are due; warp 0 computes 30 cycles inline and stores at 1,070,000 (its
        // translation ends at 1,071,000, bucket 16 from 1,048,576); warp 1, handled after it, stores
        // at the next issue slot, 1,041,000, translated at 1,042,000 (bucket 15). Warp 0's floor is
        // T (warp 1's event), so bucket 15 is still there: warp 1's store is done at
        // 1,042,000 + 128 x 83.33 + 1,000,000 = 2,052,666 ps (warp 0's at 2,081,666). A floor at
        // warp 0's issue would forget bucket 15 and put warp 1's bytes in bucket 16 behind warp 0's:
        // 1,048,576 + 256 x 83.38 + 1,000,000 = 2,069,921.
        let base = 1u64 << 40;
        let mem = |kind| Op::Mem { kind, lanes: Lanes::Strided { base, stride: 4, n: 32 }, bytes: 4 };
        let store = mem(MemKind::Store);
        let mut gpu = scripted(&[&[Op::Compute(30), store, Op::Exit], &[store, Op::Exit], &[mem(MemKind::Load), Op::Exit]]);
        gpu.xlat.space.map(&crate::workload::Buffer { base, bytes: 4096, page_bytes: 4096, managed: true });
        gpu.xlat.space.residency.map_remote(base >> 12);
        // A CTA per warp: each CTA ends with its warp's store.
        gpu.ctas = (0..3).map(|_| Cta { warps_left: 1, ..Cta::default() }).collect();
        for (i, w) in gpu.warps.iter_mut().take(3).enumerate() {
            w.as_mut().unwrap().cta = i as u32;
        }
        let t: Ps = 1_040_000;
        let mut q = EventQueue::new();
        q.push(0, Ev::Warp(2));
        q.push(t, Ev::Warp(0));
        q.push(t, Ev::Warp(1));
        let mut ends = [0; 3];
        while let Some((now, ev)) = q.pop() {
            match ev {
                Ev::Warp(slot) => gpu.run_warp(slot, now, &mut q, None, None).unwrap(),
                Ev::CtaDone(ci) => ends[ci as usize] = now,
                e => panic!("unexpected event {e:?}"),
            }
        }
        assert_eq!(gpu.remote.stores, 2);
        assert_eq!(ends[..2], [2_081_666, 2_052_666]);
    }

    #[test]
    fn a_compute_instruction_is_busy_for_its_cycles_from_its_issue() {
        // Compute(5) issues at 0 and is done at 5 cycles, when Exit issues: the CTA ends at 5000 ps.
        let mut gpu = scripted(&[&[Op::Compute(5), Op::Exit]]);
        assert_eq!(cta_end(&mut gpu), 5000);
        let s = &gpu.stats;
        assert_eq!((s.warp_insts, s.compute_insts, s.completed_insts), (2, 1, 1));
    }

    #[test]
    fn a_wait_waits_for_the_loads_and_an_exit_for_the_stores_too() {
        // Loads back at 3 cycles, stores done at 9. Wait (issued at 0) ends at 3; Compute(20)
        // issues at 3 and ends at 23, when Exit issues: 23000 ps (a wait for the stores: 29000).
        let mut gpu = scripted(&[&[Op::Wait, Op::Compute(20), Op::Exit]]);
        let w = gpu.warps[0].as_mut().unwrap();
        (w.loads, w.stores) = (3000, 9000);
        assert_eq!(cta_end(&mut gpu), 23_000);
        // Exit issued at 0 ends the warp when its stores are done, at 9000 ps.
        let mut gpu = scripted(&[&[Op::Exit]]);
        let w = gpu.warps[0].as_mut().unwrap();
        (w.loads, w.stores) = (3000, 9000);
        assert_eq!(cta_end(&mut gpu), 9000);
    }

    #[test]
    fn a_barrier_releases_its_warps_one_slot_after_the_latest_arrival() {
        // Warp 0 computes for 10 cycles (slot 0), arrives at 10000 ps; warp 1 arrives first in
        // time (slot 1, 1000 ps) but last in processing. Both go on at 10000 + 1000: warp 1 exits
        // at 11000, warp 0 at the next slot, 12000 (from warp 1's earlier arrival: 3000).
        let mut gpu = scripted(&[&[Op::Compute(10), Op::Barrier, Op::Exit], &[Op::Barrier, Op::Exit]]);
        assert_eq!(cta_end(&mut gpu), 12_000);
        assert_eq!(gpu.stats.barriers, 2);
    }

    #[test]
    fn a_warp_exiting_releases_the_barrier_one_slot_after_its_exit() {
        // Warp 0 waits at the barrier from 0; warp 1 computes from 1000 ps and exits at 11000, the
        // last warp the barrier waited for: warp 0 goes on at 12000 and exits then (not at the
        // barrier's arrival + 1 slot, 1000 ps, which ended the CTA at 11000).
        let mut gpu = scripted(&[&[Op::Barrier, Op::Exit], &[Op::Compute(10), Op::Exit]]);
        assert_eq!(cta_end(&mut gpu), 12_000);
    }

    #[test]
    fn a_partial_last_cta_gets_only_its_threads() {
        // 790 threads in CTAs of 256: three of 8 full warps and a last one of 790 - 768 = 22
        // threads, one warp of 22 lanes: 25 warps, 790 lanes. Launched at 5 ns, the kernel takes
        // until its last CTA is done (here, all four at 12 ns): 7000 ps.
        let mut cfg = Config::default();
        (cfg.workload.kind, cfg.workload.threads_per_cta) = (crate::workload::WorkloadKind::VecaddProbe, 256);
        cfg.workload.vecadd_probe.threads = 790;
        let mut gpu = Gpu::new(&cfg);
        let mut q = EventQueue::new();
        assert!(gpu.launch(first_kernel(&cfg), 5000, &mut q));
        let warps: Vec<&Warp> = gpu.warps.iter().flatten().collect();
        assert_eq!((gpu.stats.ctas, gpu.stats.warps, warps.len()), (4, 25, 25));
        assert_eq!(warps.iter().map(|w| u64::from(w.id.lanes)).sum::<u64>(), 790);
        let last = warps.iter().max_by_key(|w| w.id.global).unwrap();
        assert_eq!((last.id.global, last.id.first_thread, last.id.lanes), (24, 768, 22));
        let done: Vec<bool> = (0..4).map(|ci| gpu.cta_done(ci, 12_000, &mut q)).collect();
        assert_eq!(done, [false, false, false, true]);
        assert_eq!((gpu.stats.kernels, gpu.stats.kernel_ps), (1, 7000));
    }

    #[test]
    fn cta_dispatch_spreads_the_first_ctas_round_robin_or_fills_each_sm_first() {
        // 4 SMs taking 2 one-warp CTAs each: the first 8 CTAs of a gather kernel.
        let placed = |dispatch: CtaDispatch| {
            let mut cfg = Config::default();
            (cfg.gpu.sms, cfg.gpu.max_ctas_per_sm, cfg.gpu.cta_dispatch) = (4, 2, dispatch);
            (cfg.workload.kind, cfg.workload.threads_per_cta) = (crate::workload::WorkloadKind::Gather, 32);
            let mut gpu = Gpu::new(&cfg);
            let spec = first_kernel(&cfg);
            assert!(spec.ctas() > 8);
            let per_cta = spec.threads_per_cta.div_ceil(cfg.gpu.warp_size) as u64;
            gpu.launch(spec, 0, &mut EventQueue::new());
            let mut sm_of: Vec<(u64, u32)> = gpu.warps.iter().flatten().map(|w| (w.id.global / per_cta, w.sm)).collect();
            sm_of.sort_unstable();
            sm_of.dedup();
            sm_of.into_iter().map(|(_, sm)| sm).collect::<Vec<_>>()
        };
        assert_eq!(placed(CtaDispatch::RoundRobin), vec![0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(placed(CtaDispatch::Fill), vec![0, 0, 1, 1, 2, 2, 3, 3]);
    }
}
