//! MGPUSim v4.2.0's R9 Nano memory path for one GPU, wired as its builders
//! do (amd/samples/runner/timingconfig/{shaderarray,r9nano}/builder.go), fed
//! by a trace's rows at their times.
//!
//! The trace records when each CU handed a request to its L1V path; a CU here
//! sends each row in the cycle of its time (later if its port is full) and
//! takes the answers, 16 a cycle, as MGPUSim's CU does
//! (`processInputFromVectorMem`). Left out, and why each cannot matter much
//! or is unknown: the scalar and instruction caches and their TLBs (their
//! misses reach the L2 TLB and L2 cache, a few pages per kernel: README of
//! the traces), whose ports are kept as idle ports so the shared connections
//! scan the same number of ports; the command processor and DMA; data.
//! What the trace does not record is in [`ReplayOptions`] and [`cu_rows`].

use super::core::{Body, CompId, Core, Due, PortId};
use super::idealmem::{IdealMem, IdealMemParams};
use super::mmu::{Mmu, MmuParams, PcieLink};
use super::pcie::{Endpoint, Network, Switch};
use super::rob::{Rob, Translator};
use super::tlb::{Tlb, TlbCounts, TlbParams};
use super::writearound::{WriteAround, WriteAroundParams};
use super::writeback::{WriteBack, WriteBackParams};
use super::Component;
use crate::workload::trace::{TraceError, TraceReader};
use crate::workload::MemKind;

/// One access of the trace as the CU sends it.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub cycle: u64,
    pub cu: usize,
    pub wavefront: u64,
    pub write: bool,
    pub vaddr: u64,
    /// MGPUSim's `CanWaitForCoalesce`: not the last request of its instruction
    /// (not in the traces: false, see [`cu_rows`]).
    pub can_wait: bool,
}

/// Which port of a shader array a side message leaves from, in the order
/// MGPUSim plugs them (scalar then instruction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SidePort {
    /// L1 scalar TLB → L2 TLB.
    ScalarTlb,
    /// L1 instruction TLB → L2 TLB.
    InstTlb,
    /// L1 scalar cache → L2.
    ScalarCache,
    /// The L1 instruction cache's address translator → L2.
    InstCache,
}

/// One message of the scalar or instruction paths, which the traces do not
/// hold: a translation request for `addr` (a virtual page) from a TLB port,
/// or a read or full-line write of physical `addr` to the L2 bank that
/// holds it (interleaved as for the L1V caches). `sa` is below 16.
#[derive(Clone, Copy, Debug)]
pub struct SideMsg {
    pub cycle: u64,
    pub sa: usize,
    pub port: SidePort,
    pub write: bool,
    pub addr: u64,
}

/// A timed event that wakes `id` at `next` (its next row's cycle), unless
/// that cycle has come or the event is already scheduled.
fn wake_at(core: &mut Core, id: CompId, woken_for: &mut Option<u64>, next: Option<u64>) {
    if let Some(t) = next {
        if t > core.now && *woken_for != Some(t) {
            *woken_for = Some(t);
            core.schedule_custom(id, t, 0);
        }
    }
}

/// A CU: sends its rows at their cycles and takes the answers.
struct Cu {
    id: CompId,
    port: PortId,
    rob: PortId,
    /// (cycle, body)
    rows: Vec<(u64, Body)>,
    next: usize,
    woken_for: Option<u64>,
    answers: u64,
    last_answer: u64,
    /// With [`ReplayOptions::stores_wait_for_loads`] or
    /// [`ReplayOptions::keep_wavefront_gaps`]: what each row waits for.
    deps: Option<Deps>,
}

/// A CU's rows with their wavefronts' order and store-after-load
/// dependencies ([`ReplayOptions::stores_wait_for_loads`]): a row is not sent
/// before the previous row of its wavefront, and a store not before every
/// load of its wavefront since the wavefront's previous store is answered.
/// A row held so goes to `held`; later rows of other wavefronts go on.
struct Deps {
    /// Per row: the previous row of its wavefront (`u32::MAX`: none).
    prev: Vec<u32>,
    /// Per row: its range in `loads` (empty for a load).
    span: Vec<(u32, u32)>,
    loads: Vec<u32>,
    sent: Vec<bool>,
    answered: Vec<bool>,
    /// Message id of a sent load → its row.
    pending: std::collections::HashMap<u64, u32>,
    held: std::collections::VecDeque<u32>,
    /// Rows that were held at least once (information).
    delayed: u64,
    /// With [`ReplayOptions::keep_wavefront_gaps`]: per row, its recorded
    /// cycles after the previous row of its wavefront (else empty), and the
    /// cycle each row was sent.
    gap: Vec<u64>,
    sent_at: Vec<u64>,
}

impl Deps {
    fn new(rows: &[(u64, Body)], wavefronts: &[u64], stores_wait: bool, keep_gaps: bool) -> Self {
        let n = rows.len();
        let (mut prev, mut span, mut loads) = (vec![u32::MAX; n], vec![(0, 0); n], Vec::new());
        // Per wavefront: its last row and its loads since its last store.
        let mut last: std::collections::HashMap<u64, (u32, Vec<u32>)> = std::collections::HashMap::new();
        for (i, (&(_, body), &w)) in rows.iter().zip(wavefronts).enumerate() {
            let e = last.entry(w).or_insert((u32::MAX, Vec::new()));
            prev[i] = e.0;
            e.0 = i as u32;
            if !stores_wait {
                continue;
            }
            if matches!(body, Body::Write { .. }) {
                let start = loads.len() as u32;
                loads.append(&mut e.1);
                span[i] = (start, loads.len() as u32);
            } else {
                e.1.push(i as u32);
            }
        }
        let gap = if keep_gaps {
            (0..n).map(|i| if prev[i] == u32::MAX { 0 } else { rows[i].0.saturating_sub(rows[prev[i] as usize].0) }).collect()
        } else {
            Vec::new()
        };
        Self {
            prev,
            span,
            loads,
            sent: vec![false; n],
            answered: vec![false; n],
            pending: Default::default(),
            held: Default::default(),
            delayed: 0,
            gap,
            sent_at: if keep_gaps { vec![0; n] } else { Vec::new() },
        }
    }

    /// Whether `row` may go at `now`; if only its gap keeps it, the cycle it may.
    fn ready(&self, row: usize, now: u64) -> (bool, Option<u64>) {
        let p = self.prev[row];
        let (a, b) = self.span[row];
        if !((p == u32::MAX || self.sent[p as usize]) && self.loads[a as usize..b as usize].iter().all(|&l| self.answered[l as usize])) {
            return (false, None);
        }
        if p != u32::MAX && !self.gap.is_empty() {
            let at = self.sent_at[p as usize] + self.gap[row];
            if at > now {
                return (false, Some(at));
            }
        }
        (true, None)
    }

    fn mark_sent(&mut self, row: usize, now: u64) {
        self.sent[row] = true;
        if !self.sent_at.is_empty() {
            self.sent_at[row] = now;
        }
    }
}

impl Cu {
    /// [`Component::tick`] with dependencies: held rows first, in order, then
    /// the rows whose cycle has come; 16 sends a cycle in all.
    fn tick_deps(&mut self, core: &mut Core, mut progress: bool) -> bool {
        let d = self.deps.as_mut().expect("deps");
        let mut budget = 16;
        let mut still = std::collections::VecDeque::with_capacity(d.held.len());
        let mut full = false;
        while let Some(r) = d.held.pop_front() {
            let r = r as usize;
            if full || budget == 0 {
                still.push_back(r as u32);
                continue;
            }
            let (ok, at) = d.ready(r, core.now);
            if !ok {
                if let Some(t) = at {
                    core.schedule_custom(self.id, t, 0);
                }
                still.push_back(r as u32);
                continue;
            }
            let m = core.msg(self.port, self.rob, self.rows[r].1);
            let id = m.id;
            if !core.send(self.port, m) {
                full = true;
                still.push_back(r as u32);
                continue;
            }
            d.mark_sent(r, core.now);
            if matches!(self.rows[r].1, Body::Read { .. }) {
                d.pending.insert(id, r as u32);
            }
            budget -= 1;
            progress = true;
        }
        d.held = still;
        while !full && budget > 0 {
            let Some(&(t, body)) = self.rows.get(self.next) else { break };
            if t > core.now {
                break;
            }
            let r = self.next;
            let (ok, at) = d.ready(r, core.now);
            if !ok {
                if let Some(t) = at {
                    core.schedule_custom(self.id, t, 0);
                }
                d.held.push_back(r as u32);
                d.delayed += 1;
                self.next += 1;
                progress = true;
                continue;
            }
            let m = core.msg(self.port, self.rob, body);
            let id = m.id;
            if !core.send(self.port, m) {
                break;
            }
            d.mark_sent(r, core.now);
            if matches!(body, Body::Read { .. }) {
                d.pending.insert(id, r as u32);
            }
            self.next += 1;
            budget -= 1;
            progress = true;
        }
        wake_at(core, self.id, &mut self.woken_for, self.rows.get(self.next).map(|r| r.0));
        progress
    }
}

impl Component for Cu {
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..16 {
            let Some(m) = core.retrieve_incoming(self.port) else { break };
            self.answers += 1;
            self.last_answer = core.now;
            progress = true;
            if let (Some(d), Body::DataReady { rsp_to }) = (self.deps.as_mut(), m.body) {
                if let Some(r) = d.pending.remove(&rsp_to) {
                    d.answered[r as usize] = true;
                }
            }
        }
        if self.deps.is_some() {
            return self.tick_deps(core, progress);
        }
        for _ in 0..16 {
            let Some(&(t, body)) = self.rows.get(self.next) else { break };
            if t > core.now {
                break;
            }
            let m = core.msg(self.port, self.rob, body);
            if !core.send(self.port, m) {
                break;
            }
            self.next += 1;
            progress = true;
        }
        wake_at(core, self.id, &mut self.woken_for, self.rows.get(self.next).map(|r| r.0));
        progress
    }

    fn on_event(&mut self, core: &mut Core, _token: u64) {
        core.tick_now(self.id);
    }
}

/// The scalar and instruction paths' traffic of an instrumented MGPUSim run
/// ([`SideMsg`]), sent from those paths' ports at the logged cycles (in log
/// order, the next waiting while a port is full); answers are taken and
/// dropped. Without side messages it sends nothing: its ports are the idle
/// ports of those paths, woken (to no effect) as every port on a connection
/// is. Their buffers hold 64 messages each way, not MGPUSim's sizes: the
/// matched pair never fills them.
struct Injector {
    id: CompId,
    ports: Vec<PortId>,
    rows: Vec<(u64, usize, Body, PortId)>,
    next: usize,
    woken_for: Option<u64>,
}

impl Component for Injector {
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for &p in &self.ports {
            while core.retrieve_incoming(p).is_some() {
                progress = true;
            }
        }
        while let Some(&(t, pi, body, dst)) = self.rows.get(self.next) {
            if t > core.now {
                break;
            }
            let m = core.msg(self.ports[pi], dst, body);
            if !core.send(self.ports[pi], m) {
                break;
            }
            self.next += 1;
            progress = true;
        }
        wake_at(core, self.id, &mut self.woken_for, self.rows.get(self.next).map(|r| r.0));
        progress
    }

    fn on_event(&mut self, core: &mut Core, _token: u64) {
        core.tick_now(self.id);
    }
}

/// A component that never sends: the ports of the parts not modelled.
pub(crate) struct Idle;

impl Component for Idle {
    fn tick(&mut self, _core: &mut Core) -> bool {
        false
    }
}

enum Kind {
    Cu(usize),
    Rob(usize),
    At(usize),
    L1Tlb(usize),
    L1v(usize),
    L2(usize),
    Dram(usize),
    L2Tlb,
    Mmu,
    Link,
    Ep(usize),
    Sw(usize),
    Inj,
    Idle,
    Conn,
}

/// Results of a replay.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub l1_tlb: TlbCounts,
    pub l2_tlb: TlbCounts,
    pub walks: u64,
    pub accesses: u64,
    pub answers: u64,
    /// Cycle of the last answer to a CU.
    pub last_cycle: u64,
    pub events: u64,
    /// Rows held past their cycle by [`ReplayOptions::stores_wait_for_loads`]
    /// or [`ReplayOptions::keep_wavefront_gaps`].
    pub held_rows: u64,
}

/// The R9 Nano path of one GPU: the engine and, apart, the components it
/// hands ticks to (two fields, so a tick borrows both without moving either).
pub struct R9Nano {
    core: Core,
    parts: Parts,
}

struct Parts {
    kinds: Vec<Kind>,
    cus: Vec<Cu>,
    robs: Vec<Rob>,
    ats: Vec<Translator>,
    l1tlbs: Vec<Tlb>,
    l1vs: Vec<WriteAround>,
    l2s: Vec<WriteBack>,
    drams: Vec<IdealMem>,
    l2tlb: Tlb,
    mmu: Mmu,
    /// The fixed-latency pipe, when chosen instead of the network.
    link: Option<PcieLink>,
    eps: Vec<Endpoint>,
    sws: Vec<Switch>,
    inj: Injector,
    idle: Idle,
}

/// What the trace does not say, and the options of the engine (the PCIe
/// model, the order of same-cycle events).
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// `None`: the PCIe network as MGPUSim builds it ([`super::pcie`]);
    /// `Some(n)`: a pipe of one message a cycle each way with a one-way
    /// time of `n` cycles from the L2 TLB's send to the MMU's take
    /// (MGPUSim's logs show 292-294), the model before the network's port.
    pub pcie_leg_cycles: Option<u64>,
    /// Whether a store writes its whole 64 B line (the trace has no byte
    /// mask); a partial write misses in the L2 with a fetch from DRAM.
    pub stores_full_line: bool,
    /// Seed of a pseudo-random order for events of the same cycle; `None`
    /// runs them in the order they were scheduled.
    pub tie_seed: Option<u64>,
    /// Traffic of the scalar and instruction paths, in cycle order (none in a
    /// trace replay; from an instrumented MGPUSim run, for cross-checks).
    pub side: Vec<SideMsg>,
    /// A closed-loop approximation (experimental, off by default): a row is
    /// not sent before the previous row of its wavefront, and a store not
    /// before every load of its wavefront since its previous store has been
    /// answered (a GCN3 wavefront waits for its loads, `s_waitcnt`, before a
    /// store that uses their data). Off, every row goes at its recorded cycle
    /// whatever happened to the loads before it (open loop).
    pub stores_wait_for_loads: bool,
    /// A row is not sent before the previous row of its wavefront, nor before
    /// its recorded cycles after that row was sent, so a delay carries
    /// through the rest of the wavefront (experimental, off by default;
    /// alone or with `stores_wait_for_loads`).
    pub keep_wavefront_gaps: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            pcie_leg_cycles: None,
            stores_full_line: true,
            tie_seed: None,
            side: Vec::new(),
            stores_wait_for_loads: false,
            keep_wavefront_gaps: false,
        }
    }
}

impl Parts {
    fn component(&mut self, c: CompId) -> &mut dyn Component {
        match self.kinds[c as usize] {
            Kind::Cu(i) => &mut self.cus[i],
            Kind::Rob(i) => &mut self.robs[i],
            Kind::At(i) => &mut self.ats[i],
            Kind::L1Tlb(i) => &mut self.l1tlbs[i],
            Kind::L1v(i) => &mut self.l1vs[i],
            Kind::L2(i) => &mut self.l2s[i],
            Kind::Dram(i) => &mut self.drams[i],
            Kind::L2Tlb => &mut self.l2tlb,
            Kind::Mmu => &mut self.mmu,
            Kind::Link => self.link.as_mut().expect("the pipe was built"),
            Kind::Ep(i) => &mut self.eps[i],
            Kind::Sw(i) => &mut self.sws[i],
            Kind::Inj => &mut self.inj,
            Kind::Idle => &mut self.idle,
            Kind::Conn => unreachable!("connections tick in the core"),
        }
    }
}

/// Requests of `rows` per CU (`tag` = the row's index in its CU). The trace
/// does not record the CU's `CanWaitForCoalesce`, and it does not matter:
/// MGPUSim's ROB copies each request without it (`duplicateReadReq`), so no
/// request waits in the L1V's coalescer ([`Rob`]); `Row::can_wait` is kept
/// for request logs of instrumented MGPUSim runs, which carry it.
fn cu_rows(rows: &[Row], cus: usize, o: &ReplayOptions) -> Vec<Vec<(u64, Body)>> {
    let mut per: Vec<Vec<(u64, Body)>> = vec![Vec::new(); cus];
    for r in rows {
        let out = &mut per[r.cu];
        let tag = out.len() as u64;
        let body = if r.write {
            Body::Write { addr: r.vaddr, can_wait: r.can_wait, full_line: o.stores_full_line, tag }
        } else {
            Body::Read { addr: r.vaddr, bytes: 64, can_wait: r.can_wait, tag }
        };
        out.push((r.cycle, body));
    }
    per
}

impl R9Nano {
    /// Build the path for `rows` (all of GPU 1).
    pub fn new(rows: &[Row], o: &ReplayOptions) -> Self {
        const SAS: usize = 16;
        const CUS_PER_SA: usize = 4;
        const CUS: usize = SAS * CUS_PER_SA;
        const BANKS: usize = 16;
        let mut core = Core::new();
        core.set_tie_seed(o.tie_seed);
        let mut kinds: Vec<Kind> = Vec::new();
        let comp = |core: &mut Core, kinds: &mut Vec<Kind>, k: Kind| {
            let id = core.add_component();
            debug_assert_eq!(id as usize, kinds.len());
            kinds.push(k);
            id
        };
        let idle = comp(&mut core, &mut kinds, Kind::Idle);
        let conn = |core: &mut Core, kinds: &mut Vec<Kind>| {
            let id = core.add_connection();
            debug_assert_eq!(id as usize, kinds.len());
            kinds.push(Kind::Conn);
            id
        };
        // Shared connections, their ports plugged in MGPUSim's order.
        let tlb_conn = conn(&mut core, &mut kinds); // L1TLBToL2TLB
        let l1l2 = conn(&mut core, &mut kinds); // L1ToL2
        let l2dram = conn(&mut core, &mut kinds); // L2ToDRAM

        // The PCIe side: the L2 TLB's bottom port and the MMU's top port are
        // plugged into endpoints 1 and 0 (or into the two ends of the pipe).
        let (gpu_side, cpu_side) = match o.pcie_leg_cycles {
            None => (comp(&mut core, &mut kinds, Kind::Ep(1)), comp(&mut core, &mut kinds, Kind::Ep(0))),
            Some(_) => (conn(&mut core, &mut kinds), conn(&mut core, &mut kinds)),
        };

        let l2tlb_id = comp(&mut core, &mut kinds, Kind::L2Tlb);
        let mut l2tlb = Tlb::new(&mut core, l2tlb_id, tlb_conn, gpu_side, &TlbParams::r9nano_l2());
        // connectL1ToL2: the RDMA engine's two inside ports, then the L2 tops.
        core.add_port(idle, l1l2, 1, 1);
        core.add_port(idle, l1l2, 1, 1);
        let wb = WriteBackParams::r9nano_bank();
        let mut l2s = Vec::new();
        for b in 0..BANKS {
            let id = comp(&mut core, &mut kinds, Kind::L2(b));
            l2s.push(WriteBack::new(&mut core, id, l1l2, l2dram, PortId::MAX, b, &wb));
        }
        let mut drams = Vec::new();
        for d in 0..BANKS {
            let id = comp(&mut core, &mut kinds, Kind::Dram(d));
            drams.push(IdealMem::new(&mut core, id, l2dram, &IdealMemParams::r9nano()));
        }
        // The DMA engine's and the page migration controller's memory ports.
        core.add_port(idle, l2dram, 1, 1);
        core.add_port(idle, l2dram, 1, 1);
        for (l2, dram) in l2s.iter_mut().zip(&drams) {
            l2.set_low(dram.top);
        }
        let l2_tops: Vec<PortId> = l2s.iter().map(|c| c.top).collect();

        let per_cu = cu_rows(rows, CUS, o);
        let mut wavefronts: Vec<Vec<u64>> = vec![Vec::new(); CUS];
        let deps = o.stores_wait_for_loads || o.keep_wavefront_gaps;
        if deps {
            for r in rows {
                wavefronts[r.cu].push(r.wavefront);
            }
        }
        let inj_id = comp(&mut core, &mut kinds, Kind::Inj);
        let mut inj_ports: Vec<PortId> = Vec::new();
        let (mut cus, mut robs, mut ats, mut l1tlbs, mut l1vs) = (vec![], vec![], vec![], vec![], vec![]);
        let wa = WriteAroundParams::r9nano();
        for sa in 0..SAS {
            for c in 0..CUS_PER_SA {
                let i = sa * CUS_PER_SA + c;
                let cu_id = comp(&mut core, &mut kinds, Kind::Cu(i));
                let rob_id = comp(&mut core, &mut kinds, Kind::Rob(i));
                let at_id = comp(&mut core, &mut kinds, Kind::At(i));
                let tlb_id = comp(&mut core, &mut kinds, Kind::L1Tlb(i));
                let l1v_id = comp(&mut core, &mut kinds, Kind::L1v(i));
                let cu_rob = conn(&mut core, &mut kinds);
                let rob_at = conn(&mut core, &mut kinds);
                let at_tlb = conn(&mut core, &mut kinds);
                let l1v_at = conn(&mut core, &mut kinds);
                let port = core.add_port(cu_id, cu_rob, 64, 64);
                let mut rob = Rob::new(&mut core, rob_id, cu_rob, rob_at);
                let l1v = WriteAround::new(&mut core, l1v_id, l1v_at, l1l2, l2_tops.clone(), &wa);
                let mut at = Translator::new(&mut core, at_id, rob_at, l1v_at, at_tlb);
                let mut tlb = Tlb::new(&mut core, tlb_id, at_tlb, tlb_conn, &TlbParams::r9nano_l1v());
                rob.below = at.top;
                at.tlb = tlb.top;
                at.cache = l1v.top;
                tlb.low = l2tlb.top;
                let rows = per_cu[i].clone();
                let deps = deps.then(|| Deps::new(&rows, &wavefronts[i], o.stores_wait_for_loads, o.keep_wavefront_gaps));
                cus.push(Cu { id: cu_id, port, rob: rob.top, rows, next: 0, woken_for: None, answers: 0, last_answer: 0, deps });
                robs.push(rob);
                ats.push(at);
                l1tlbs.push(tlb);
                l1vs.push(l1v);
            }
            // The shader array's scalar and instruction TLBs and caches.
            inj_ports.push(core.add_port(inj_id, tlb_conn, 64, 64));
            inj_ports.push(core.add_port(inj_id, tlb_conn, 64, 64));
            inj_ports.push(core.add_port(inj_id, l1l2, 64, 64));
            inj_ports.push(core.add_port(inj_id, l1l2, 64, 64));
        }
        let mmu_id = comp(&mut core, &mut kinds, Kind::Mmu);
        let mmu = Mmu::new(&mut core, mmu_id, cpu_side, &MmuParams::r9nano());
        let (mut link, mut eps, mut sws) = (None, Vec::new(), Vec::new());
        match o.pcie_leg_cycles {
            Some(leg) => {
                let link_id = comp(&mut core, &mut kinds, Kind::Link);
                let mut l = PcieLink::new(&mut core, link_id, gpu_side, cpu_side, leg);
                l.mmu = mmu.top;
                l2tlb.low = l.near;
                link = Some(l);
            }
            None => {
                l2tlb.low = mmu.top;
                let sw_ids = [comp(&mut core, &mut kinds, Kind::Sw(0)), comp(&mut core, &mut kinds, Kind::Sw(1))];
                let links = [conn(&mut core, &mut kinds), conn(&mut core, &mut kinds), conn(&mut core, &mut kinds)];
                // The root complex's ports: the driver's GPU and MMU ports (idle), the
                // MMU's migration port (idle here) and its top port.
                let mut cpu: Vec<PortId> = (0..2).map(|_| core.add_port(idle, cpu_side, 1, 1)).collect();
                cpu.push(core.add_port(mmu_id, cpu_side, 1, 1));
                cpu.push(mmu.top);
                // The GPU's ports sorted by name (Akita `PortOwnerBase.Ports`): command
                // processor, page migration controller, RDMA data, RDMA request (idle),
                // then the L2 TLB's bottom (`Translation_00`).
                let mut gpu: Vec<PortId> = (0..4).map(|_| core.add_port(idle, gpu_side, 1, 1)).collect();
                gpu.push(l2tlb.bottom);
                let n = Network::build(&mut core, [cpu_side, gpu_side], sw_ids, links, cpu, gpu);
                (eps, sws) = (n.endpoints, n.switches);
            }
        }
        for cu in &cus {
            core.schedule_custom(cu.id, cu.rows.first().map_or(0, |r| r.0), 0);
        }
        let mut inj_rows: Vec<(u64, usize, Body, PortId)> = o
            .side
            .iter()
            .map(|m| {
                let which = m.port as usize;
                let body = match (m.port, m.write) {
                    (SidePort::ScalarTlb | SidePort::InstTlb, _) => Body::TransReq { vpage: m.addr },
                    (_, false) => Body::Read { addr: m.addr, bytes: 64, can_wait: false, tag: u64::MAX },
                    (_, true) => Body::Write { addr: m.addr, can_wait: false, full_line: true, tag: u64::MAX },
                };
                let bank = (m.addr / wa.low_interleave) as usize % BANKS;
                let dst = if matches!(m.port, SidePort::ScalarTlb | SidePort::InstTlb) { l2tlb.top } else { l2_tops[bank] };
                assert!(m.sa < SAS, "side message from shader array {} of {SAS}", m.sa);
                (m.cycle, m.sa * 4 + which, body, dst)
            })
            .collect();
        inj_rows.sort_by_key(|r| r.0);
        if let Some(&(t, ..)) = inj_rows.first() {
            core.schedule_custom(inj_id, t, 0);
        }
        let inj = Injector { id: inj_id, ports: inj_ports, rows: inj_rows, next: 0, woken_for: None };
        Self { core, parts: Parts { kinds, cus, robs, ats, l1tlbs, l1vs, l2s, drams, l2tlb, mmu, link, eps, sws, inj, idle: Idle } }
    }

    /// Keep every TLB lookup (cycle, page, outcome) for [`R9Nano::write_lookup_log`].
    pub fn log_lookups(&mut self) {
        for t in self.parts.l1tlbs.iter_mut().chain(std::iter::once(&mut self.parts.l2tlb)) {
            t.log = Some(Vec::new());
        }
    }

    /// Write the kept lookups as MGPUSim-named lines: `cycle TLB page outcome`.
    pub fn write_lookup_log(&self, path: &str) -> std::io::Result<()> {
        use std::io::Write;
        let mut lines: Vec<(u64, String)> = Vec::new();
        let named = self.parts.l1tlbs.iter().enumerate().map(|(i, t)| (format!("GPU[1].SA[{}].L1VTLB[{}]", i / 4, i % 4), t));
        for (name, t) in named.chain(std::iter::once(("GPU[1].L2TLB".to_string(), &self.parts.l2tlb))) {
            for &(c, v, o) in t.log.iter().flatten() {
                let o = ["hit", "miss", "mshr-hit"][o as usize];
                lines.push((c, format!("{c} {name} {v:x} {o}")));
            }
        }
        lines.sort_by_key(|l| l.0);
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        for (_, l) in lines {
            writeln!(f, "{l}")?;
        }
        Ok(())
    }

    /// Run to the end of the trace.
    pub fn run(&mut self) -> Report {
        while let Some(due) = self.core.next() {
            match due {
                Due::Tick(c) => {
                    let progress = self.parts.component(c).tick(&mut self.core);
                    self.core.ticked(c, progress);
                }
                Due::Custom(c, token) => self.parts.component(c).on_event(&mut self.core, token),
            }
        }
        let mut r = Report { events: self.core.events, walks: self.parts.mmu.walks, l2_tlb: self.parts.l2tlb.counts, ..Report::default() };
        for t in &self.parts.l1tlbs {
            r.l1_tlb.hits += t.counts.hits;
            r.l1_tlb.misses += t.counts.misses;
            r.l1_tlb.mshr_hits += t.counts.mshr_hits;
        }
        for cu in &self.parts.cus {
            r.accesses += cu.rows.len() as u64;
            r.answers += cu.answers;
            r.last_cycle = r.last_cycle.max(cu.last_answer);
            r.held_rows += cu.deps.as_ref().map_or(0, |d| d.delayed);
        }
        r
    }
}

/// Read an MGPUSim trace's rows of GPU 1 (cycles = ns at 1 GHz); an order-only
/// trace's access k issues at k x `gap_ns`, as in the event model.
pub fn read_rows(path: &str, gap_ns: f64) -> Result<Vec<Row>, TraceError> {
    let mut reader = TraceReader::open(path)?.with_gap_ns(gap_ns);
    let mut rows = Vec::new();
    while let Some(rec) = reader.next_record()? {
        if rec.gpu != 1 {
            return Err(TraceError(format!(
                "{path}: GPU {} at {}: the cycle-stepped replay models MGPUSim's single-GPU runs (GPU 1) only",
                rec.gpu,
                reader.position()
            )));
        }
        if rec.cu >= 64 {
            return Err(TraceError(format!("{path}: CU {} at {}: the R9 Nano has 64", rec.cu, reader.position())));
        }
        // MGPUSim's page table covers the GPU's 4 GiB (its virtual pages from 0x1000, physical from 4 GiB).
        if rec.vaddr >= 4 << 30 {
            return Err(TraceError(format!(
                "{path}: address {:#x} at {}: the R9 Nano's page table covers 4 GiB of virtual addresses",
                rec.vaddr,
                reader.position()
            )));
        }
        rows.push(Row {
            cycle: rec.time / 1000,
            cu: rec.cu as usize,
            wavefront: rec.wavefront,
            write: rec.kind == MemKind::Store,
            vaddr: rec.vaddr,
            can_wait: false,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cycle: u64, cu: usize, write: bool, vaddr: u64) -> Row {
        Row { cycle, cu, wavefront: cu as u64, write, vaddr, can_wait: false }
    }

    /// One read on an idle GPU, cycle by cycle (each hop: sent in a cycle,
    /// delivered in it, taken by the receiver's tick in the next):
    /// CU sends at 100; ROB 101; translator 102; L1 TLB takes it at 103,
    /// pipeline 104, lookup (miss) at 105; L2 TLB takes it at 106, four
    /// stages 107-110, lookup (miss) and send at 111; the PCIe network brings
    /// it to the MMU's take 294 cycles later, at 405 (`pcie` tests, checked
    /// against Akita); the walk counts 406-505 and answers at 506; 294 later
    /// the L2 TLB parses the fill (800), answers at 801; the L1 TLB parses at
    /// 802, answers at 803; the translator sends the read to the L1V at 804.
    /// The L1V sends it below at 807 (3 cycles, as its Go-checked test); the
    /// L2 bank answers 118 cycles after delivery (its Go-checked miss: DRAM
    /// 100 + 18), at 925; the L1V answers up at 927 (its test: 2 cycles after
    /// the data), the translator at 928, the ROB parses at 929 and answers at
    /// 930 (it answers before it parses in a tick), the CU takes it at 931.
    /// With the fixed 293-cycle pipe instead of the network, each leg is one
    /// cycle shorter: 929.
    #[test]
    fn one_read_crosses_the_whole_path_in_the_derived_cycles() {
        let rows = [row(100, 0, false, 0x1040)];
        let mut m = R9Nano::new(&rows, &ReplayOptions::default());
        m.log_lookups();
        let r = m.run();
        assert_eq!(m.parts.l1tlbs[0].log.as_deref(), Some(&[(105, 0x1000, 1)][..]));
        assert_eq!(m.parts.l2tlb.log.as_deref(), Some(&[(111, 0x1000, 1)][..]));
        assert_eq!((r.answers, r.walks), (1, 1));
        assert_eq!(r.last_cycle, 931);
        let piped = R9Nano::new(&rows, &ReplayOptions { pcie_leg_cycles: Some(293), ..ReplayOptions::default() }).run();
        assert_eq!(piped.last_cycle, 929);
    }

    /// A request its CU marked as not the last of its instruction
    /// (`CanWaitForCoalesce`) is still answered when nothing follows it: the
    /// ROB's copy drops the mark, as MGPUSim's `duplicateReadReq` does, so the
    /// L1V's coalescer does not hold it for a next request that never comes.
    #[test]
    fn the_rob_drops_the_coalescing_mark() {
        let rows = [Row { can_wait: true, ..row(100, 0, false, 0x1040) }, Row { can_wait: true, ..row(101, 0, false, 0x1080) }];
        let r = R9Nano::new(&rows, &ReplayOptions::default()).run();
        assert_eq!(r.answers, 2);
    }

    /// With `stores_wait_for_loads` a store waits for its wavefront's load
    /// (answered at 931, as in the test above) and a read of that wavefront
    /// behind the store waits with it (and goes after it), while another wavefront's store on the
    /// same CU goes at its cycle; off, all go at their cycles. Page 0x9000's
    /// lookup is the L1 TLB's second either way.
    #[test]
    fn stores_wait_for_their_wavefronts_loads_when_asked() {
        let other = Row { wavefront: 7, ..row(150, 0, true, 0x9000) };
        let rows = [row(100, 0, false, 0x1040), row(150, 0, true, 0x5000), other, row(160, 0, false, 0xd000)];
        let lookups = |wait: bool, keep_wavefront_gaps: bool| {
            let o = ReplayOptions { stores_wait_for_loads: wait, keep_wavefront_gaps, ..ReplayOptions::default() };
            let mut m = R9Nano::new(&rows, &o);
            m.log_lookups();
            let r = m.run();
            assert_eq!(r.answers, 4);
            let log = m.parts.l1tlbs[0].log.clone().unwrap();
            (log.iter().map(|e| (e.1, e.0)).collect::<Vec<_>>(), r.held_rows)
        };
        let (open, held) = lookups(false, false);
        assert_eq!(held, 0);
        assert_eq!(open.iter().map(|e| e.1).collect::<Vec<_>>(), [105, 155, 155, 165]);
        let (closed, held) = lookups(true, false);
        assert_eq!(held, 2);
        assert_eq!(closed[0], (0x1000, 105));
        assert_eq!(closed[1], (0x9000, 155));
        // The store goes in the cycle after the answer's, the read behind it in the same cycle.
        assert_eq!(&closed[2..], [(0x5000, 936), (0xd000, 936)]);
        // Keeping the gaps, the read also waits its recorded 10 cycles after the store.
        let (gapped, _) = lookups(true, true);
        assert_eq!(&gapped[..2], &closed[..2]);
        assert_eq!(&gapped[2..], [(0x5000, 936), (0xd000, 946)]);
        // Gaps alone hold nothing where every row could go at its recorded cycle.
        assert_eq!(lookups(false, true), (open, 0));
    }

    /// Side traffic (the scalar and instruction paths of an instrumented
    /// MGPUSim run) reaches the shared L2 TLB and L2 from its own ports: a
    /// scalar TLB's request is an L2 TLB miss and a walk, and a vector access
    /// to the same page later hits in the L2 TLB.
    #[test]
    fn side_traffic_reaches_the_l2_tlb_and_the_l2() {
        let side = vec![
            SideMsg { cycle: 10, sa: 3, port: SidePort::ScalarTlb, write: false, addr: 0x5000 },
            SideMsg { cycle: 20, sa: 3, port: SidePort::InstCache, write: false, addr: (4 << 30) + 0x9100 },
        ];
        let rows = [row(2000, 1, false, 0x5040)];
        let mut m = R9Nano::new(&rows, &ReplayOptions { side, ..ReplayOptions::default() });
        m.log_lookups();
        let r = m.run();
        assert_eq!(r.walks, 1);
        assert_eq!(m.parts.l2tlb.log.as_deref().map(|l| l.iter().map(|e| e.2).collect::<Vec<_>>()), Some(vec![1, 0]));
        assert_eq!(r.answers, 1);
        assert_eq!(m.parts.inj.next, 2, "both side messages were sent");
    }

    /// After the fill, another CU's access to the page misses in its own L1
    /// TLB and hits in the shared L2 TLB; the first CU's hits in its L1 TLB.
    #[test]
    fn the_l2_tlb_serves_other_cus_and_the_l1_tlb_its_own() {
        let rows = [row(100, 0, false, 0x1000), row(2000, 5, false, 0x1040), row(2000, 0, true, 0x1080)];
        let mut m = R9Nano::new(&rows, &ReplayOptions::default());
        let r = m.run();
        assert_eq!(r.l1_tlb, TlbCounts { hits: 1, misses: 2, mshr_hits: 0 });
        assert_eq!(r.l2_tlb, TlbCounts { hits: 1, misses: 1, mshr_hits: 0 });
        assert_eq!(r.answers, 3);
    }

    /// Every access of a random trace is answered (no request is lost or
    /// left waiting in a buffer), and the same trace gives the same counts.
    #[test]
    fn random_traces_finish_and_are_deterministic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut rows = Vec::new();
        let mut t = 1000;
        for _ in 0..4000 {
            t += next() % 3;
            let cu = (next() % 64) as usize;
            let page = next() % 300;
            let line = next() % 64;
            rows.push(row(t, cu, next() % 4 == 0, 0x1000 + page * 4096 + line * 64));
        }
        let a = R9Nano::new(&rows, &ReplayOptions::default()).run();
        let b = R9Nano::new(&rows, &ReplayOptions::default()).run();
        assert_eq!(a.answers, rows.len() as u64);
        assert_eq!(a.l1_tlb.hits + a.l1_tlb.misses + a.l1_tlb.mshr_hits, rows.len() as u64);
        assert_eq!((a.l1_tlb, a.l2_tlb, a.last_cycle, a.events), (b.l1_tlb, b.l2_tlb, b.last_cycle, b.events));
        let partial = R9Nano::new(&rows, &ReplayOptions { stores_full_line: false, ..ReplayOptions::default() }).run();
        assert_eq!(partial.answers, rows.len() as u64);
    }

    fn trace_file(text: &str) -> tempfile::NamedTempFile {
        use std::io::Write;
        let mut f = tempfile::Builder::new().suffix(".csv").tempfile().expect("temp file");
        f.write_all(text.as_bytes()).expect("write");
        f
    }

    /// An address beyond the R9 Nano's 4 GiB, another GPU's row or CU 64 is refused naming the file and line;
    /// an order-only trace issues access k at k x gap_ns.
    #[test]
    fn read_rows_refuses_what_the_r9nano_cannot_hold_and_spaces_order_only_traces() {
        let head = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n";
        for (row, says) in
            [("10,1,0,0,R,0x100000000,64", "covers 4 GiB"), ("10,2,0,0,R,0x1000,64", "GPU 2"), ("10,1,64,0,R,0x1000,64", "has 64")]
        {
            let f = trace_file(&format!("{head}{row}\n"));
            let p = f.path().to_str().unwrap();
            let e = read_rows(p, 1.0).expect_err(row).0;
            assert!(e.contains(p) && e.contains(says), "{e}");
        }
        let f = trace_file("order,gpu,cu,wavefront,kind,vaddr,size\n0,1,0,0,R,0x1000,64\n4,1,1,0,W,0x2000,64\n");
        let rows = read_rows(f.path().to_str().unwrap(), 2.5).unwrap();
        assert_eq!(rows.iter().map(|r| (r.cycle, r.write)).collect::<Vec<_>>(), vec![(0, false), (10, true)]);
    }

    /// A CU alone in front of a test endpoint standing for its ROB, which
    /// answers each read `delay(row tag)` cycles after taking it (writes are
    /// not answered). Returns (cycle taken, tag) of every row the endpoint
    /// took and the CU's answers and last answer.
    fn cu_alone(rows: Vec<(u64, Body)>, deps: bool, delay: fn(u64) -> u64) -> (Vec<(u64, u64)>, u64, u64) {
        use super::super::testkit::Endpoint;
        let mut core = Core::new();
        let conn = core.add_connection();
        let mut rob = Endpoint::answering(
            &mut core,
            conn,
            64,
            Box::new(move |m: &super::super::core::Msg| match m.body {
                Body::Read { tag, .. } => Some((delay(tag), Body::DataReady { rsp_to: m.id })),
                _ => None,
            }),
        );
        let id = core.add_component();
        let port = core.add_port(id, conn, 64, 64);
        let deps = deps.then(|| Deps::new(&rows, &vec![0; rows.len()], true, false));
        let mut cu = Cu { id, port, rob: rob.port, rows, next: 0, woken_for: None, answers: 0, last_answer: 0, deps };
        core.schedule_custom(id, cu.rows[0].0, 0);
        while let Some(d) = core.next() {
            if rob.handle(&mut core, d) {
                continue;
            }
            match d {
                Due::Tick(c) => {
                    assert_eq!(c, id);
                    let p = cu.tick(&mut core);
                    core.ticked(c, p);
                }
                Due::Custom(..) => cu.on_event(&mut core, 0),
            }
        }
        let took = rob.got.iter().map(|&(t, m)| match m.body {
            Body::Read { tag, .. } | Body::Write { tag, .. } => (t, tag),
            _ => unreachable!(),
        });
        (took.collect(), cu.answers, cu.last_answer)
    }

    fn rd(cycle: u64, tag: u64) -> (u64, Body) {
        (cycle, Body::Read { addr: 64 * tag, bytes: 64, can_wait: false, tag })
    }

    /// 17 rows of cycle 100: the CU sends 16 in its tick of 100 (taken at
    /// 101) and the 17th at 101 (taken at 102).
    #[test]
    fn a_cu_sends_sixteen_rows_a_tick() {
        let (took, ..) = cu_alone((0..17).map(|k| rd(100, k)).collect(), false, |_| 1000);
        assert_eq!(took.iter().map(|t| t.0).collect::<Vec<_>>(), [vec![101; 16], vec![102]].concat());
    }

    /// 17 answers reaching the CU in one cycle: it takes 16 a tick. The
    /// reads go at 100 and 101 (as above, taken 101 and 102) and are
    /// answered 50 and 49 cycles later, all delivered at 151: the CU takes
    /// 16 at 152 and the last at 153.
    #[test]
    fn a_cu_takes_sixteen_answers_a_tick() {
        let (_, answers, last) = cu_alone((0..17).map(|k| rd(100, k)).collect(), false, |tag| if tag < 16 { 50 } else { 49 });
        assert_eq!((answers, last), (17, 153));
    }

    /// Held rows count against the 16 sends a tick: 20 stores of the
    /// wavefront of a read wait for its answer (the read taken at 101,
    /// answered 50 cycles later, taken by the CU at 152) and go from the
    /// held list 16 at 152 and 4 at 153 (taken at 153 and 154).
    #[test]
    fn held_rows_go_sixteen_a_tick() {
        let mut rows = vec![rd(100, 0)];
        rows.extend((1..=20u64).map(|k| (110, Body::Write { addr: 64 * k, can_wait: false, full_line: true, tag: k })));
        let (took, answers, last) = cu_alone(rows, true, |_| 50);
        assert_eq!((answers, last), (1, 152));
        assert_eq!(took.iter().map(|t| t.0).collect::<Vec<_>>(), [vec![101], vec![153; 16], vec![154; 4]].concat());
    }

    /// A load sent from the held list is waited for like any other: the
    /// second store of the wavefront waits for the load held behind the
    /// first store, and goes once that load is answered.
    #[test]
    fn a_store_waits_for_a_load_that_was_held() {
        let rows = [row(100, 0, false, 0x1040), row(150, 0, true, 0x5000), row(160, 0, false, 0xd000), row(170, 0, true, 0x7000)];
        let o = ReplayOptions { stores_wait_for_loads: true, ..ReplayOptions::default() };
        let mut m = R9Nano::new(&rows, &o);
        m.log_lookups();
        let r = m.run();
        assert_eq!((r.answers, r.held_rows), (4, 3));
        let log = m.parts.l1tlbs[0].log.clone().unwrap();
        let at = |page: u64| log.iter().find(|e| e.1 == page).unwrap().0;
        assert_eq!((at(0x5000), at(0xd000)), (936, 936));
        assert!(at(0x7000) > at(0xd000) + 800, "the second store waited for the held load's answer");
    }

    /// Side messages are sent in cycle order whatever their order in the
    /// list: the scalar TLB's request of cycle 10, listed second, is looked
    /// up by the L2 TLB at 16 (taken at 11, four stages, as the vector
    /// path's at 106-111 above).
    #[test]
    fn side_messages_go_in_cycle_order() {
        let side = vec![
            SideMsg { cycle: 20, sa: 3, port: SidePort::InstCache, write: false, addr: (4 << 30) + 0x9100 },
            SideMsg { cycle: 10, sa: 3, port: SidePort::ScalarTlb, write: false, addr: 0x5000 },
        ];
        let mut m = R9Nano::new(&[], &ReplayOptions { side, ..ReplayOptions::default() });
        m.log_lookups();
        m.run();
        assert_eq!(m.parts.l2tlb.log.as_deref(), Some(&[(16, 0x5000, 1)][..]));
        assert_eq!(m.parts.inj.next, 2);
    }

    /// Shader array `sa`'s side ports are the injector's ports 4·sa..4·sa+3,
    /// scalar TLB, instruction TLB (on the L1-to-L2-TLB connection), scalar
    /// cache and instruction cache (on the L1-to-L2 connection).
    #[test]
    fn side_messages_leave_from_their_shader_arrays_ports() {
        let side: Vec<SideMsg> = [SidePort::ScalarTlb, SidePort::InstTlb, SidePort::ScalarCache, SidePort::InstCache]
            .into_iter()
            .map(|port| SideMsg { cycle: 10, sa: 5, port, write: false, addr: 0x5000 })
            .collect();
        let m = R9Nano::new(&[], &ReplayOptions { side, ..ReplayOptions::default() });
        let ports: Vec<usize> = m.parts.inj.rows.iter().map(|r| r.1).collect();
        assert_eq!(ports, [20, 21, 22, 23]);
        let conn = |p: PortId| m.core.ports[p as usize].conn;
        let inj = &m.parts.inj.ports;
        assert_eq!([conn(inj[20]), conn(inj[21])], [conn(m.parts.l1tlbs[0].bottom); 2]);
        assert_eq!([conn(inj[22]), conn(inj[23])], [conn(m.parts.l1vs[0].bottom); 2]);
    }

    /// A partial store misses in the L2 with a fetch from DRAM: one store on
    /// an idle GPU is answered 104 cycles later than a full-line one (the L2
    /// bank's Go-checked cases: a partial-line write miss answered at 129, a
    /// full-line one at 25).
    #[test]
    fn partial_stores_fetch_their_line_in_the_l2() {
        let rows = [row(100, 0, true, 0x1040)];
        let full = R9Nano::new(&rows, &ReplayOptions::default()).run();
        let partial = R9Nano::new(&rows, &ReplayOptions { stores_full_line: false, ..ReplayOptions::default() }).run();
        assert_eq!(partial.last_cycle, full.last_cycle + 104);
    }
}
