//! Akita v4.9.0's ideal memory controller (mem/idealmemcontroller:
//! memMiddleware.go, comp.go, builder.go), MGPUSim's DRAM behind each L2 bank.
//!
//! Left out: the control port and its middleware (enable/pause/drain; the
//! controller is always "enable"), storage and the address converter (no
//! data is simulated).

use std::collections::VecDeque;

use super::core::{Body, CompId, Core, Cycle, Msg, PortId};
use super::Component;

/// Builder parameters (Akita `idealmemcontroller.Builder`).
#[derive(Clone, Debug)]
pub struct IdealMemParams {
    /// Cycles from taking a request to its respond event.
    pub latency_cycles: Cycle,
    /// Requests taken from the top port, and handled, per tick.
    pub width: usize,
    /// Top port incoming and outgoing buffer capacity.
    pub top_buf: usize,
}

impl IdealMemParams {
    /// MGPUSim r9nano `buildDRAMControllers`: latency 100 (`dramLatency()`),
    /// builder defaults width 1 and top buffers 16.
    pub fn r9nano() -> Self {
        Self { latency_cycles: 100, width: 1, top_buf: 16 }
    }
}

/// The ideal memory controller (Akita `idealmemcontroller.Comp`).
pub struct IdealMem {
    pub id: CompId,
    pub top: PortId,
    latency: Cycle,
    width: usize,
    /// Akita `inflightBuffer`: taken from the port, not yet handled.
    inflight: VecDeque<Msg>,
    /// Requests whose respond event is scheduled; the event's token is the slot.
    responding: Vec<Option<Msg>>,
    free: Vec<usize>,
    /// Reads and writes answered.
    pub reads: u64,
    pub writes: u64,
}

impl IdealMem {
    pub fn new(core: &mut Core, id: CompId, conn: CompId, p: &IdealMemParams) -> Self {
        let top = core.add_port(id, conn, p.top_buf, p.top_buf);
        Self {
            id,
            top,
            latency: p.latency_cycles,
            width: p.width,
            inflight: VecDeque::new(),
            responding: Vec::new(),
            free: Vec::new(),
            reads: 0,
            writes: 0,
        }
    }

    /// `takeNewReqs`: up to `width` messages into the inflight buffer.
    fn take_new_reqs(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..self.width {
            let Some(msg) = core.retrieve_incoming(self.top) else { break };
            self.inflight.push_back(msg);
            progress = true;
        }
        progress
    }

    /// `handleMemReqs`: the oldest inflight request gets a respond event
    /// `latency` cycles later (`Freq.NCyclesLater`).
    fn handle_mem_req(&mut self, core: &mut Core) -> bool {
        let Some(msg) = self.inflight.pop_front() else { return false };
        assert!(matches!(msg.body, Body::Read { .. } | Body::Write { .. }), "ideal memory controller cannot handle {:?}", msg.body);
        let slot = match self.free.pop() {
            Some(s) => {
                self.responding[s] = Some(msg);
                s
            }
            None => {
                self.responding.push(Some(msg));
                self.responding.len() - 1
            }
        };
        core.schedule_custom(self.id, core.now + self.latency, slot as u64);
        true
    }

    /// Requests taken but not answered yet (for checks).
    pub fn pending(&self) -> usize {
        self.inflight.len() + self.responding.len() - self.free.len()
    }
}

impl Component for IdealMem {
    /// `memMiddleware.Tick`: takeNewReqs, then `width` handleMemReqs.
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = self.take_new_reqs(core);
        for _ in 0..self.width {
            progress |= self.handle_mem_req(core);
        }
        progress
    }

    /// `handleReadRespondEvent` / `handleWriteRespondEvent`: send the
    /// answer; when the port is full, retry at the next cycle
    /// (`Freq.NextTick`); on success, `TickLater`.
    fn on_event(&mut self, core: &mut Core, token: u64) {
        let slot = token as usize;
        let req = self.responding[slot].expect("a scheduled response");
        let body = match req.body {
            Body::Read { .. } => Body::DataReady { rsp_to: req.id },
            Body::Write { .. } => Body::WriteDone { rsp_to: req.id },
            other => unreachable!("not a request: {other:?}"),
        };
        let rsp = core.msg(self.top, req.src, body);
        if !core.send(self.top, rsp) {
            core.schedule_custom(self.id, core.now + 1, token);
            return;
        }
        match req.body {
            Body::Read { .. } => self.reads += 1,
            _ => self.writes += 1,
        }
        self.responding[slot] = None;
        self.free.push(slot);
        core.tick_later(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::super::core::Due;
    use super::*;

    /// A source on one connection with the controller; it sends `script`
    /// (cycle, body) from its own timed events and retrieves every answer in
    /// its ticks. Returns (cycle retrieved, index in `script`) and the cycles
    /// the controller took each request. Port order on the connection: the
    /// source first, as in the Go check.
    fn run(script: &[(Cycle, Body)]) -> (Vec<(Cycle, usize)>, Vec<Cycle>) {
        let mut core = Core::new();
        let src = core.add_component();
        let conn = core.add_connection();
        let src_port = core.add_port(src, conn, 64, 64);
        let mid = core.add_component();
        let mut mem = IdealMem::new(&mut core, mid, conn, &IdealMemParams::r9nano());
        for (i, &(t, _)) in script.iter().enumerate() {
            core.schedule_custom(src, t, i as u64);
        }
        let mut ids = Vec::new();
        let mut got = Vec::new();
        let mut taken = Vec::new();
        while let Some(d) = core.next() {
            assert!(core.now < 10_000);
            match d {
                Due::Custom(c, i) if c == src => {
                    let m = core.msg(src_port, mem.top, script[i as usize].1);
                    ids.push(m.id);
                    assert!(core.send(src_port, m));
                }
                Due::Tick(c) if c == src => {
                    let mut progress = false;
                    while let Some(m) = core.retrieve_incoming(src_port) {
                        let (Body::DataReady { rsp_to } | Body::WriteDone { rsp_to }) = m.body else { panic!() };
                        got.push((core.now, ids.iter().position(|&x| x == rsp_to).unwrap()));
                        progress = true;
                    }
                    core.ticked(src, progress);
                }
                Due::Tick(c) => {
                    assert_eq!(c, mid);
                    if core.peek_incoming(mem.top).is_some() {
                        taken.push(core.now);
                    }
                    let p = mem.tick(&mut core);
                    core.ticked(c, p);
                }
                Due::Custom(c, t) => {
                    assert_eq!(c, mid);
                    mem.on_event(&mut core, t);
                }
            }
        }
        assert_eq!(mem.pending(), 0);
        (got, taken)
    }

    const READ: Body = Body::Read { addr: 0x40, bytes: 64, can_wait: false, tag: 0 };

    /// Sent in cycle 10 (the connection delivers it in 10); the controller
    /// ticks in 11, takes it and schedules the answer at 11 + 100 = 111; the
    /// answer is delivered in 111 and the source retrieves it in 112.
    /// Checked against Go (scripts/akita-crosscheck/writeback, "idealmem: one read at 10":
    /// taken 11, retrieved 112; a write likewise answered at 112).
    #[test]
    fn a_read_is_answered_latency_cycles_after_it_is_taken() {
        let (got, taken) = run(&[(10, READ)]);
        assert_eq!(taken, vec![11]);
        assert_eq!(got, vec![(112, 0)]);
        let w = Body::Write { addr: 0x40, can_wait: false, full_line: true, tag: 0 };
        assert_eq!(run(&[(10, w)]).0, vec![(112, 0)]);
    }

    /// Width 1: of two requests delivered in cycle 10, the tick of 11 takes
    /// the first (answer event at 111), the tick of 12 the second (112).
    /// Retrieved in 112 and 113. Checked against Go ("two reads at 10").
    #[test]
    fn width_one_serialises_two_same_cycle_requests() {
        let r2 = Body::Read { addr: 0x80, bytes: 64, can_wait: false, tag: 0 };
        let (got, taken) = run(&[(10, READ), (10, r2)]);
        assert_eq!(taken, vec![11, 12]);
        assert_eq!(got, vec![(112, 0), (113, 1)]);
    }

    /// The answer port holds 16: with the source's one-entry buffer full
    /// and the source asleep until 300, the answers to 17 reads and a write
    /// sent at 10 (taken 11..=28, due 111..=128) fill the connection's
    /// buffers and the write's answer, the 18th, finds the port full at
    /// 128; it is retried each cycle, not lost. From 300 the source takes
    /// one a cycle (each take refills its buffer in the same cycle), in
    /// order: 300..=317. 17 reads and 1 write are counted.
    #[test]
    fn an_answer_that_finds_the_port_full_is_retried() {
        let mut core = Core::new();
        let src = core.add_component();
        let conn = core.add_connection();
        let src_port = core.add_port(src, conn, 1, 64);
        let mid = core.add_component();
        let mut mem = IdealMem::new(&mut core, mid, conn, &IdealMemParams::r9nano());
        core.schedule_custom(src, 10, 0);
        core.schedule_custom(src, 300, 1);
        let (mut ids, mut got, mut awake) = (Vec::new(), Vec::new(), false);
        while let Some(d) = core.next() {
            assert!(core.now < 10_000, "runaway");
            match d {
                Due::Custom(c, 0) if c == src => {
                    for i in 0..18u64 {
                        let body = if i < 17 {
                            Body::Read { addr: 64 * i, bytes: 64, can_wait: false, tag: i }
                        } else {
                            Body::Write { addr: 0, can_wait: false, full_line: true, tag: i }
                        };
                        let m = core.msg(src_port, mem.top, body);
                        ids.push(m.id);
                        assert!(core.send(src_port, m));
                    }
                }
                Due::Custom(c, _) | Due::Tick(c) if c == src => {
                    awake |= matches!(d, Due::Custom(..));
                    if awake {
                        if let Some(m) = core.retrieve_incoming(src_port) {
                            let (Body::DataReady { rsp_to } | Body::WriteDone { rsp_to }) = m.body else { panic!() };
                            got.push((core.now, ids.iter().position(|&x| x == rsp_to).unwrap()));
                        }
                    }
                }
                Due::Tick(c) => {
                    let p = mem.tick(&mut core);
                    core.ticked(c, p);
                }
                Due::Custom(_, t) => mem.on_event(&mut core, t),
            }
        }
        assert_eq!(got, (0..18).map(|i| (300 + i as Cycle, i)).collect::<Vec<_>>());
        assert_eq!((mem.reads, mem.writes, mem.pending()), (17, 1, 0));
    }
}
