//! Akita v4.9.0's MMU (mem/vm/mmu/mmu.go) and the PCIe path between the L2
//! TLB and it.
//!
//! The MMU is followed as written for pages that are already mapped (page
//! migration, which the traced single-GPU kernels never trigger, is left
//! out): it takes one request a tick while fewer than `walkers` walks are in
//! flight, counts each walk down for `latency` ticks and answers it in the
//! tick after, in the order the walks started.
//!
//! Between the L2 TLB and the MMU runs the PCIe network ([`super::pcie`]);
//! [`PcieLink`], one message a cycle each way with a fixed latency, is the
//! simpler model it replaced, kept as an option
//! ([`super::machine::ReplayOptions::pcie_leg_cycles`]) to show what the
//! network's timing changes.

use super::core::{Body, CompId, Core, Msg, PortId};
use super::Component;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// The MMU's parameters (Akita `mmu.Builder`; MGPUSim's createMMU).
#[derive(Clone, Debug)]
pub struct MmuParams {
    /// `WithPageWalkingLatency(100)`.
    pub latency_cycles: u32,
    /// `maxNumReqInFlight`, builder default 16.
    pub walkers: usize,
    /// Physical page of a virtual page: `vpage + phys_offset_bytes`. MGPUSim's
    /// driver hands a process virtual pages from 0x1000 up and GPU 1's
    /// physical pages in order from 4 GiB + 0x1000 (the device's first page is
    /// never handed out): an instrumented run of matrixtranspose maps 0x1000
    /// to 0x1_0000_1000 and its code page 0x2001000 to 0x1_0200_1000
    /// (`memoryallocator.go` `allocatePages`). Until session 53 this was
    /// 4 GiB − 0x1000, one page off, which moved every line to another L2
    /// set and bank.
    pub phys_offset_bytes: u64,
}

impl MmuParams {
    pub fn r9nano() -> Self {
        Self { latency_cycles: 100, walkers: 16, phys_offset_bytes: 4u64 << 30 }
    }
}

struct Walk {
    req: Msg,
    left: u32,
}

/// The MMU component.
pub struct Mmu {
    p: MmuParams,
    pub top: PortId,
    walking: Vec<Walk>,
    /// Walks answered.
    pub walks: u64,
}

impl Mmu {
    pub fn new(core: &mut Core, id: CompId, conn: CompId, p: &MmuParams) -> Self {
        let top = core.add_port(id, conn, 4096, 4096);
        Self { p: p.clone(), top, walking: Vec::new(), walks: 0 }
    }

    /// `walkPageTable`: count down, or answer (if the port can send), in order.
    fn walk_page_table(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        let mut done = Vec::new();
        for (i, w) in self.walking.iter_mut().enumerate() {
            if w.left > 0 {
                w.left -= 1;
                progress = true;
                continue;
            }
            if !core.can_send(self.top) {
                continue;
            }
            let Body::TransReq { vpage } = w.req.body else { panic!("the MMU takes translation requests") };
            let rsp = core.msg(self.top, w.req.src, Body::TransRsp { rsp_to: w.req.id, vpage, ppage: vpage + self.p.phys_offset_bytes });
            core.send(self.top, rsp);
            done.push(i);
            progress = true;
        }
        for &i in done.iter().rev() {
            self.walking.remove(i);
            self.walks += 1;
        }
        progress
    }

    /// `parseFromTop`: one request a tick while walkers are free.
    fn parse_from_top(&mut self, core: &mut Core) -> bool {
        if self.walking.len() >= self.p.walkers {
            return false;
        }
        let Some(req) = core.retrieve_incoming(self.top) else { return false };
        self.walking.push(Walk { req, left: self.p.latency_cycles });
        true
    }
}

impl Component for Mmu {
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = self.walk_page_table(core);
        progress |= self.parse_from_top(core);
        progress
    }
}

/// The PCIe path as a two-port pipe: each way, one message a cycle enters
/// and leaves `leg_cycles` after its sender sent it (when nothing waits).
pub struct PcieLink {
    /// Port on the L2 TLB's side.
    pub near: PortId,
    /// Port on the MMU's side.
    pub far: PortId,
    /// The MMU's top port.
    pub mmu: PortId,
    id: CompId,
    delay: u64,
    up: VecDeque<(u64, Msg)>,
    down: VecDeque<(u64, Msg)>,
    /// Who sent each request now at the MMU, to route its answer back.
    origin: FxHashMap<u64, PortId>,
}

impl PcieLink {
    pub fn new(core: &mut Core, id: CompId, near_conn: CompId, far_conn: CompId, leg_cycles: u64) -> Self {
        let near = core.add_port(id, near_conn, 64, 64);
        let far = core.add_port(id, far_conn, 64, 64);
        // Sent in s, delivered to this port in s, taken here in s + 1, sent on
        // at s + 1 + delay, delivered then, taken by the receiver one tick later.
        let delay = leg_cycles.saturating_sub(2);
        Self { near, far, mmu: PortId::MAX, id, delay, up: VecDeque::new(), down: VecDeque::new(), origin: FxHashMap::default() }
    }

    fn forward(core: &mut Core, q: &mut VecDeque<(u64, Msg)>, port: PortId) -> bool {
        let mut progress = false;
        while let Some(&(due, m)) = q.front() {
            if due > core.now || !core.send(port, m) {
                break;
            }
            q.pop_front();
            progress = true;
        }
        progress
    }
}

impl Component for PcieLink {
    fn tick(&mut self, core: &mut Core) -> bool {
        let now = core.now;
        let mut progress = false;
        if let Some(m) = core.retrieve_incoming(self.near) {
            self.origin.insert(m.id, m.src);
            self.up.push_back((now + self.delay, Msg { src: self.far, dst: self.mmu, ..m }));
            core.schedule_custom(self.id, now + self.delay, 0);
            progress = true;
        }
        if let Some(m) = core.retrieve_incoming(self.far) {
            let Body::TransRsp { rsp_to, .. } = m.body else { panic!("the MMU answers translations") };
            let to = self.origin.remove(&rsp_to).expect("an answer to a request that crossed the link");
            self.down.push_back((now + self.delay, Msg { src: self.near, dst: to, ..m }));
            core.schedule_custom(self.id, now + self.delay, 0);
            progress = true;
        }
        progress |= Self::forward(core, &mut self.up, self.far);
        progress |= Self::forward(core, &mut self.down, self.near);
        // Messages still queued keep the link ticking one cycle at a time
        // only when they are due; otherwise their events wake it.
        let waiting_due = |q: &VecDeque<(u64, Msg)>| q.front().is_some_and(|&(d, _)| d <= now);
        progress || waiting_due(&self.up) || waiting_due(&self.down)
    }

    fn on_event(&mut self, core: &mut Core, _token: u64) {
        core.tick_now(self.id);
    }
}
