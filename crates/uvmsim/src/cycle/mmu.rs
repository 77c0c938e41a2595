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

#[cfg(test)]
mod tests {
    use super::super::core::Due;
    use super::super::testkit::Endpoint;
    use super::*;

    /// Run until no event is left, ticking the MMU and (when given) the link.
    fn run(core: &mut Core, src: &mut Endpoint, mmu: &mut Mmu, mmu_id: CompId, mut link: Option<(&mut PcieLink, CompId)>) {
        while let Some(d) = core.next() {
            if src.handle(core, d) {
                continue;
            }
            match (d, link.as_mut()) {
                (Due::Tick(c), _) if c == mmu_id => {
                    let p = mmu.tick(core);
                    core.ticked(c, p);
                }
                (Due::Tick(c), Some((l, id))) if c == *id => {
                    let p = l.tick(core);
                    core.ticked(c, p);
                }
                (Due::Custom(c, t), Some((l, id))) if c == *id => l.on_event(core, t),
                (other, _) => panic!("unexpected {other:?}"),
            }
        }
    }

    fn direct(walkers: usize) -> (Core, Endpoint, Mmu, CompId) {
        let mut core = Core::new();
        let conn = core.add_connection();
        let src = Endpoint::new(&mut core, conn, 64);
        let mmu_id = core.add_component();
        let mmu = Mmu::new(&mut core, mmu_id, conn, &MmuParams { walkers, ..MmuParams::r9nano() });
        (core, src, mmu, mmu_id)
    }

    /// Sent in 10: the MMU takes it in its tick of 11 (100 cycles to count
    /// down), counts in the ticks of 12..=111, answers in 112; the source
    /// takes it in 113. The physical page is the virtual one + 4 GiB.
    #[test]
    fn a_walk_answers_latency_plus_three_cycles_after_the_send() {
        let (mut core, mut src, mut mmu, id) = direct(16);
        src.send_at(&mut core, 10, mmu.top, Body::TransReq { vpage: 0x3000 });
        run(&mut core, &mut src, &mut mmu, id, None);
        assert_eq!(src.translations(), vec![(113, 0x3000, 0x1_0000_3000)]);
        assert_eq!(mmu.walks, 1);
    }

    /// One request is taken a tick, so three sent together start in 11, 12
    /// and 13 and are taken back in 113, 114, 115. With 2 walkers the third
    /// starts only when the first walk's answer leaves (tick 112: the walk
    /// list is scanned before a request is taken), 99 ticks later: 214.
    #[test]
    fn walks_start_one_a_tick_and_wait_for_a_free_walker() {
        for (walkers, third) in [(16, 115), (2, 214)] {
            let (mut core, mut src, mut mmu, id) = direct(walkers);
            for v in [0x1000, 0x2000, 0x3000] {
                src.send_at(&mut core, 10, mmu.top, Body::TransReq { vpage: v });
            }
            run(&mut core, &mut src, &mut mmu, id, None);
            let at: Vec<(u64, u64)> = src.translations().iter().map(|t| (t.0, t.1)).collect();
            assert_eq!(at, vec![(113, 0x1000), (114, 0x2000), (third, 0x3000)], "{walkers} walkers");
        }
    }

    /// Each leg of the link takes `leg` cycles from the sender's send to the
    /// receiver's tick, where a direct connection takes 1: a walk comes back
    /// 2 × (leg − 1) cycles later than over a direct connection (113), and
    /// three requests sent together cross one a cycle.
    #[test]
    fn the_link_adds_its_leg_latency_each_way_one_message_a_cycle() {
        let mut core = Core::new();
        let near = core.add_connection();
        let far = core.add_connection();
        let mut src = Endpoint::new(&mut core, near, 64);
        let link_id = core.add_component();
        let mut link = PcieLink::new(&mut core, link_id, near, far, 50);
        let mmu_id = core.add_component();
        let mut mmu = Mmu::new(&mut core, mmu_id, far, &MmuParams::r9nano());
        link.mmu = mmu.top;
        for v in [0x1000, 0x2000, 0x3000] {
            src.send_at(&mut core, 10, link.near, Body::TransReq { vpage: v });
        }
        run(&mut core, &mut src, &mut mmu, mmu_id, Some((&mut link, link_id)));
        let at: Vec<(u64, u64)> = src.translations().iter().map(|t| (t.0, t.1)).collect();
        assert_eq!(at, vec![(113 + 98, 0x1000), (114 + 98, 0x2000), (115 + 98, 0x3000)]);
        assert!(link.origin.is_empty(), "every answer found its way back");
    }
}
