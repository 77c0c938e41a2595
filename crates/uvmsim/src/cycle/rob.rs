//! The L1V path in front of the cache: MGPUSim v4.2.0's reorder buffer
//! (amd/timing/rob/rob.go) and Akita v4.9.0's address translator
//! (mem/vm/addresstranslator/addresstranslator.go). Flush control is left out.

use super::core::{Body, CompId, Core, Msg, PortId};
use super::Component;
use std::collections::VecDeque;

/// The reorder buffer: requests go down in arrival order, answers go back up
/// in the same order (MGPUSim's L1V ROB: 512 entries, 32 a cycle, ports of 64).
pub struct Rob {
    pub top: PortId,
    pub bottom: PortId,
    /// The address translator's top port.
    pub below: PortId,
    size: usize,
    per_cycle: usize,
    /// (request from the top, id of the copy sent down, the answer if back)
    trans: VecDeque<(Msg, u64, Option<Msg>)>,
}

impl Rob {
    pub fn new(core: &mut Core, id: CompId, top_conn: CompId, bottom_conn: CompId) -> Self {
        let per_cycle = 32;
        let top = core.add_port(id, top_conn, 2 * per_cycle, 2 * per_cycle);
        let bottom = core.add_port(id, bottom_conn, 2 * per_cycle, 2 * per_cycle);
        Self { top, bottom, below: PortId::MAX, size: 512, per_cycle, trans: VecDeque::new() }
    }

    /// `topDown`.
    fn top_down(&mut self, core: &mut Core) -> bool {
        let Some(&req) = core.peek_incoming(self.top) else { return false };
        if self.trans.len() >= self.size {
            return false;
        }
        // `duplicateReadReq` / `duplicateWriteReq` build fresh requests that
        // leave `CanWaitForCoalesce` at false: below the ROB no request waits
        // in the L1V's coalescer, whatever the CU marked.
        let body = match req.body {
            Body::Read { addr, bytes, tag, .. } => Body::Read { addr, bytes, can_wait: false, tag },
            Body::Write { addr, full_line, tag, .. } => Body::Write { addr, can_wait: false, full_line, tag },
            other => other,
        };
        let down = core.msg(self.bottom, self.below, body);
        if !core.send(self.bottom, down) {
            return false;
        }
        self.trans.push_back((req, down.id, None));
        core.retrieve_incoming(self.top);
        true
    }

    /// `parseBottom`.
    fn parse_bottom(&mut self, core: &mut Core) -> bool {
        let Some(rsp) = core.retrieve_incoming(self.bottom) else { return false };
        let rsp_to = rsp_to(&rsp);
        if let Some(t) = self.trans.iter_mut().find(|t| t.1 == rsp_to) {
            t.2 = Some(rsp);
        }
        true
    }

    /// `bottomUp`: the oldest transaction, once answered.
    fn bottom_up(&mut self, core: &mut Core) -> bool {
        let Some(&(req, _, Some(rsp))) = self.trans.front() else { return false };
        let body = match rsp.body {
            Body::DataReady { .. } => Body::DataReady { rsp_to: req.id },
            _ => Body::WriteDone { rsp_to: req.id },
        };
        let up = core.msg(self.top, req.src, body);
        if !core.send(self.top, up) {
            return false;
        }
        self.trans.pop_front();
        true
    }
}

impl Component for Rob {
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..self.per_cycle {
            progress |= self.bottom_up(core);
        }
        for _ in 0..self.per_cycle {
            progress |= self.parse_bottom(core);
        }
        for _ in 0..self.per_cycle {
            progress |= self.top_down(core);
        }
        progress
    }
}

pub(crate) fn rsp_to(m: &Msg) -> u64 {
    match m.body {
        Body::DataReady { rsp_to } | Body::WriteDone { rsp_to } | Body::TransRsp { rsp_to, .. } => rsp_to,
        other => panic!("not a response: {other:?}"),
    }
}

/// The address translator: one translation request per access (no merging),
/// translated accesses sent to the cache in the order their translations come
/// back (MGPUSim's L1V translator: 32 a cycle, ports of 32).
pub struct Translator {
    pub top: PortId,
    pub bottom: PortId,
    pub translation: PortId,
    /// The L1 TLB's and the L1V cache's top ports.
    pub tlb: PortId,
    pub cache: PortId,
    per_cycle: usize,
    page_bytes: u64,
    /// (translation request id, the access waiting for it)
    transactions: Vec<(u64, Msg)>,
    /// (access from the top, id of the translated access sent down)
    in_flight: Vec<(Msg, u64)>,
}

impl Translator {
    pub fn new(core: &mut Core, id: CompId, top_conn: CompId, bottom_conn: CompId, tlb_conn: CompId) -> Self {
        let per_cycle = 32;
        let top = core.add_port(id, top_conn, per_cycle, per_cycle);
        let bottom = core.add_port(id, bottom_conn, per_cycle, per_cycle);
        let translation = core.add_port(id, tlb_conn, per_cycle, per_cycle);
        Self {
            top,
            bottom,
            translation,
            tlb: PortId::MAX,
            cache: PortId::MAX,
            per_cycle,
            page_bytes: 4096,
            transactions: Vec::new(),
            in_flight: Vec::new(),
        }
    }

    /// `translate`.
    fn translate(&mut self, core: &mut Core) -> bool {
        let Some(&req) = core.peek_incoming(self.top) else { return false };
        let addr = match req.body {
            Body::Read { addr, .. } | Body::Write { addr, .. } => addr,
            other => panic!("the translator takes accesses, not {other:?}"),
        };
        let t = core.msg(self.translation, self.tlb, Body::TransReq { vpage: addr / self.page_bytes * self.page_bytes });
        if !core.send(self.translation, t) {
            return false;
        }
        self.transactions.push((t.id, req));
        core.retrieve_incoming(self.top);
        true
    }

    /// `parseTranslation`.
    fn parse_translation(&mut self, core: &mut Core) -> bool {
        let Some(&rsp) = core.peek_incoming(self.translation) else { return false };
        let Body::TransRsp { rsp_to, ppage, .. } = rsp.body else { panic!("translations only") };
        let Some(i) = self.transactions.iter().position(|t| t.0 == rsp_to) else {
            core.retrieve_incoming(self.translation);
            return true;
        };
        let req = self.transactions[i].1;
        let body = match req.body {
            Body::Read { addr, bytes, can_wait, tag } => Body::Read { addr: ppage + addr % self.page_bytes, bytes, can_wait, tag },
            Body::Write { addr, can_wait, full_line, tag } => {
                Body::Write { addr: ppage + addr % self.page_bytes, can_wait, full_line, tag }
            }
            _ => unreachable!("checked in translate"),
        };
        let down = core.msg(self.bottom, self.cache, body);
        if !core.send(self.bottom, down) {
            return false;
        }
        self.in_flight.push((req, down.id));
        self.transactions.remove(i);
        core.retrieve_incoming(self.translation);
        true
    }

    /// `respond`.
    fn respond(&mut self, core: &mut Core) -> bool {
        let Some(&rsp) = core.peek_incoming(self.bottom) else { return false };
        let to = rsp_to(&rsp);
        if let Some(i) = self.in_flight.iter().position(|f| f.1 == to) {
            let from_top = self.in_flight[i].0;
            let body = match rsp.body {
                Body::DataReady { .. } => Body::DataReady { rsp_to: from_top.id },
                _ => Body::WriteDone { rsp_to: from_top.id },
            };
            let up = core.msg(self.top, from_top.src, body);
            if !core.send(self.top, up) {
                return false;
            }
            self.in_flight.remove(i);
        }
        core.retrieve_incoming(self.bottom);
        true
    }
}

impl Component for Translator {
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..self.per_cycle {
            progress |= self.respond(core);
        }
        for _ in 0..self.per_cycle {
            progress |= self.parse_translation(core);
        }
        for _ in 0..self.per_cycle {
            progress |= self.translate(core);
        }
        progress
    }
}

#[cfg(test)]
mod tests {
    use super::super::core::Due;
    use super::super::testkit::Endpoint;
    use super::*;

    fn tick(core: &mut Core, d: Due, id: CompId, c: &mut dyn Component) {
        match d {
            Due::Tick(t) if t == id => {
                let p = c.tick(core);
                core.ticked(t, p);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Three reads answered below in reverse order (the first after 30
    /// cycles, the last after 10) go back up in their arrival order, all in
    /// the tick after the first one's answer is parsed: sent in 10, down in
    /// the ROB's tick of 11, taken below in 12, the first's answer arrives
    /// in 42, is parsed in 43 and the three leave in 44 (taken in 45). The
    /// copies sent down may not wait in the coalescer.
    #[test]
    fn answers_go_up_in_arrival_order_whatever_order_they_come_back() {
        let mut core = Core::new();
        let top = core.add_connection();
        let bottom = core.add_connection();
        let mut src = Endpoint::new(&mut core, top, 64);
        let rob_id = core.add_component();
        let mut rob = Rob::new(&mut core, rob_id, top, bottom);
        let mut delays = vec![10u64, 20, 30];
        let mut below = Endpoint::answering(
            &mut core,
            bottom,
            64,
            Box::new(move |m: &Msg| Some((delays.pop().unwrap(), Body::DataReady { rsp_to: m.id }))),
        );
        rob.below = below.port;
        let ids: Vec<u64> =
            (0..3u64).map(|i| src.send_at(&mut core, 10, rob.top, Body::Read { addr: 64 * i, bytes: 4, can_wait: true, tag: i })).collect();
        while let Some(d) = core.next() {
            if !src.handle(&mut core, d) && !below.handle(&mut core, d) {
                tick(&mut core, d, rob_id, &mut rob);
            }
        }
        let down: Vec<Body> = below.got.iter().map(|g| g.1.body).collect();
        let want: Vec<Body> = (0..3u64).map(|i| Body::Read { addr: 64 * i, bytes: 4, can_wait: false, tag: i }).collect();
        assert_eq!(down, want);
        let up: Vec<(u64, Body)> = src.got.iter().map(|g| (g.0, g.1.body)).collect();
        assert_eq!(up, ids.iter().map(|&id| (45, Body::DataReady { rsp_to: id })).collect::<Vec<_>>());
        assert!(rob.trans.is_empty());
    }

    /// The translator asks one translation per access, even two on one page
    /// (no merging), sends each access to the cache at the physical page plus
    /// its offset in the order the translations come back, and answers the
    /// access it came from.
    #[test]
    fn each_access_is_translated_on_its_own_and_sent_in_translation_order() {
        let mut core = Core::new();
        let top = core.add_connection();
        let bottom = core.add_connection();
        let tconn = core.add_connection();
        let mut src = Endpoint::new(&mut core, top, 64);
        let id = core.add_component();
        let mut tr = Translator::new(&mut core, id, top, bottom, tconn);
        // Page 0x2000's translations take 40 cycles, page 0x5000's 5.
        let mut tlb = Endpoint::answering(
            &mut core,
            tconn,
            64,
            Box::new(|m: &Msg| {
                let Body::TransReq { vpage } = m.body else { panic!() };
                let delay = if vpage == 0x2000 { 40 } else { 5 };
                Some((delay, Body::TransRsp { rsp_to: m.id, vpage, ppage: vpage + 0x1_0000_0000 }))
            }),
        );
        let mut cache = Endpoint::answering(
            &mut core,
            bottom,
            64,
            Box::new(|m: &Msg| {
                Some((
                    3,
                    match m.body {
                        Body::Read { .. } => Body::DataReady { rsp_to: m.id },
                        _ => Body::WriteDone { rsp_to: m.id },
                    },
                ))
            }),
        );
        tr.tlb = tlb.port;
        tr.cache = cache.port;
        let a = src.send_at(&mut core, 10, tr.top, Body::Read { addr: 0x2010, bytes: 4, can_wait: false, tag: 1 });
        let b = src.send_at(&mut core, 10, tr.top, Body::Write { addr: 0x2040, can_wait: false, full_line: true, tag: 2 });
        let c = src.send_at(&mut core, 10, tr.top, Body::Read { addr: 0x5008, bytes: 8, can_wait: false, tag: 3 });
        while let Some(d) = core.next() {
            if !src.handle(&mut core, d) && !tlb.handle(&mut core, d) && !cache.handle(&mut core, d) {
                tick(&mut core, d, id, &mut tr);
            }
        }
        let asked: Vec<Body> = tlb.got.iter().map(|g| g.1.body).collect();
        assert_eq!(asked, [0x2000, 0x2000, 0x5000].map(|vpage| Body::TransReq { vpage }));
        let sent: Vec<Body> = cache.got.iter().map(|g| g.1.body).collect();
        assert_eq!(
            sent,
            vec![
                Body::Read { addr: 0x1_0000_5008, bytes: 8, can_wait: false, tag: 3 },
                Body::Read { addr: 0x1_0000_2010, bytes: 4, can_wait: false, tag: 1 },
                Body::Write { addr: 0x1_0000_2040, can_wait: false, full_line: true, tag: 2 },
            ]
        );
        let up: Vec<Body> = src.got.iter().map(|g| g.1.body).collect();
        assert_eq!(up, vec![Body::DataReady { rsp_to: c }, Body::DataReady { rsp_to: a }, Body::WriteDone { rsp_to: b }]);
        assert!(tr.transactions.is_empty() && tr.in_flight.is_empty());
    }

    /// A write goes up as a write's answer (`WriteDone`) and a read as
    /// `DataReady`, in arrival order, whatever the answer below says first.
    #[test]
    fn a_write_is_answered_up_as_a_write() {
        let mut core = Core::new();
        let top = core.add_connection();
        let bottom = core.add_connection();
        let mut src = Endpoint::new(&mut core, top, 64);
        let rob_id = core.add_component();
        let mut rob = Rob::new(&mut core, rob_id, top, bottom);
        let mut below = Endpoint::answering(
            &mut core,
            bottom,
            64,
            Box::new(|m: &Msg| {
                Some(match m.body {
                    Body::Read { .. } => (5, Body::DataReady { rsp_to: m.id }),
                    _ => (9, Body::WriteDone { rsp_to: m.id }),
                })
            }),
        );
        rob.below = below.port;
        let w = src.send_at(&mut core, 10, rob.top, Body::Write { addr: 0x40, can_wait: true, full_line: true, tag: 0 });
        let r = src.send_at(&mut core, 10, rob.top, Body::Read { addr: 0x80, bytes: 4, can_wait: true, tag: 1 });
        while let Some(d) = core.next() {
            if !src.handle(&mut core, d) && !below.handle(&mut core, d) {
                tick(&mut core, d, rob_id, &mut rob);
            }
        }
        assert_eq!(below.got[0].1.body, Body::Write { addr: 0x40, can_wait: false, full_line: true, tag: 0 });
        let up: Vec<Body> = src.got.iter().map(|g| g.1.body).collect();
        assert_eq!(up, vec![Body::WriteDone { rsp_to: w }, Body::DataReady { rsp_to: r }]);
    }

    /// The ROB holds 512 transactions: of 520 reads that are never
    /// answered (sent 16 a cycle from 10), 512 go down and 8 wait above.
    #[test]
    fn the_rob_holds_512_transactions() {
        let mut core = Core::new();
        let top = core.add_connection();
        let bottom = core.add_connection();
        let mut src = Endpoint::new(&mut core, top, 64);
        let rob_id = core.add_component();
        let mut rob = Rob::new(&mut core, rob_id, top, bottom);
        let mut below = Endpoint::new(&mut core, bottom, 64);
        rob.below = below.port;
        for i in 0..520u64 {
            src.send_at(&mut core, 10 + i / 16, rob.top, Body::Read { addr: 64 * i, bytes: 4, can_wait: false, tag: i });
        }
        while let Some(d) = core.next() {
            if !src.handle(&mut core, d) && !below.handle(&mut core, d) {
                tick(&mut core, d, rob_id, &mut rob);
            }
        }
        assert_eq!((below.got.len(), rob.trans.len()), (512, 512));
        assert_eq!(core.ports[rob.top as usize].incoming.len(), 8);
    }

    /// The translator answers up to 32 accesses a tick: 20 reads of one
    /// page sent at 10 are translated together (the TLB answers each 5
    /// cycles after taking it), sent to the cache in one tick, answered by
    /// it in one cycle, and all 20 answers reach the source in one cycle.
    #[test]
    fn the_translator_answers_twenty_accesses_in_one_tick() {
        let mut core = Core::new();
        let top = core.add_connection();
        let bottom = core.add_connection();
        let tconn = core.add_connection();
        let mut src = Endpoint::new(&mut core, top, 64);
        let id = core.add_component();
        let mut tr = Translator::new(&mut core, id, top, bottom, tconn);
        let mut tlb = Endpoint::answering(
            &mut core,
            tconn,
            64,
            Box::new(|m: &Msg| {
                let Body::TransReq { vpage } = m.body else { panic!() };
                Some((5, Body::TransRsp { rsp_to: m.id, vpage, ppage: vpage }))
            }),
        );
        let mut cache = Endpoint::answering(&mut core, bottom, 64, Box::new(|m: &Msg| Some((3, Body::DataReady { rsp_to: m.id }))));
        tr.tlb = tlb.port;
        tr.cache = cache.port;
        for i in 0..20u64 {
            src.send_at(&mut core, 10, tr.top, Body::Read { addr: 0x3000 + 8 * i, bytes: 4, can_wait: false, tag: i });
        }
        while let Some(d) = core.next() {
            if !src.handle(&mut core, d) && !tlb.handle(&mut core, d) && !cache.handle(&mut core, d) {
                tick(&mut core, d, id, &mut tr);
            }
        }
        assert_eq!(cache.got.len(), 20);
        assert!(cache.got.iter().all(|g| g.0 == cache.got[0].0), "the cache took all 20 in one cycle");
        assert_eq!(src.got.len(), 20);
        assert!(
            src.got.iter().all(|g| g.0 == src.got[0].0),
            "answered in one cycle: {:?}",
            src.got.iter().map(|g| g.0).collect::<Vec<_>>()
        );
    }
}
