//! Akita v4.9.0's TLB (mem/vm/tlb: tlbMiddleware.go, tlbmshr.go,
//! internal/set.go, builder.go), used by MGPUSim for the per-CU L1 vector
//! TLBs and the GPU's L2 TLB. Flush and drain control are left out (the
//! traced kernels do not flush).

use super::core::{Body, Buffer, CompId, Core, Msg, PortId};
use super::pipeline::Pipeline;
use super::Component;
use rustc_hash::FxHashMap;

/// Sizes of one TLB (Akita `tlb.Builder`).
#[derive(Clone, Debug)]
pub struct TlbParams {
    pub sets: usize,
    pub ways: usize,
    pub mshrs: usize,
    pub reqs_per_cycle: usize,
    /// Lookup pipeline stages (`WithLatency`; builder default 4).
    pub latency_cycles: usize,
    pub page_bytes: u64,
}

impl TlbParams {
    /// MGPUSim's L1 vector TLB (shaderarray/builder.go buildL1VTLBs).
    pub fn r9nano_l1v() -> Self {
        Self { sets: 4, ways: 64, mshrs: 64, reqs_per_cycle: 32, latency_cycles: 1, page_bytes: 4096 }
    }
    /// MGPUSim's L2 TLB (r9nano/builder.go buildL2TLB: 64 ways over 4 GiB of
    /// pages, 64 MSHRs, 1,024 requests a cycle, latency left at the default 4).
    pub fn r9nano_l2() -> Self {
        Self { sets: 16384, ways: 64, mshrs: 64, reqs_per_cycle: 1024, latency_cycles: 4, page_bytes: 4096 }
    }
}

/// One set: its ways' pages and the visit order (front = least recent),
/// as Akita's `setImpl` (a block is evicted from the front and re-visited).
#[derive(Clone, Debug)]
struct Set {
    pages: Vec<Option<(u64, u64)>>,
    order: Vec<usize>,
    index: FxHashMap<u64, usize>,
}

impl Set {
    fn new(ways: usize) -> Self {
        Self { pages: vec![None; ways], order: (0..ways).collect(), index: FxHashMap::default() }
    }
    fn lookup(&self, vpage: u64) -> Option<(usize, u64)> {
        let w = *self.index.get(&vpage)?;
        self.pages[w].map(|(_, p)| (w, p))
    }
    fn visit(&mut self, way: usize) {
        if let Some(i) = self.order.iter().position(|&w| w == way) {
            self.order.remove(i);
        }
        self.order.push(way);
    }
    /// Evict the least recent way, write `vpage` into it and visit it
    /// (`parseBottom`: Evict, Update, Visit).
    fn fill(&mut self, vpage: u64, ppage: u64) {
        let way = self.order.remove(0);
        if let Some((old, _)) = self.pages[way] {
            self.index.remove(&old);
        }
        self.pages[way] = Some((vpage, ppage));
        self.index.insert(vpage, way);
        self.order.push(way);
    }
}

#[derive(Clone, Debug)]
struct MshrEntry {
    vpage: u64,
    requests: Vec<Msg>,
    ppage: u64,
}

/// Lookup outcomes (Akita's "hit", "miss", "mshr-hit" task steps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbCounts {
    pub hits: u64,
    pub misses: u64,
    pub mshr_hits: u64,
}

/// A TLB component.
pub struct Tlb {
    p: TlbParams,
    pub top: PortId,
    pub bottom: PortId,
    /// Where misses go (the L2 TLB's top port, or the link to the MMU).
    pub low: PortId,
    sets: FxHashMap<usize, Set>,
    mshr: Vec<MshrEntry>,
    responding: Option<MshrEntry>,
    pipeline: Pipeline<Msg>,
    buffer: Buffer<Msg>,
    pub counts: TlbCounts,
    /// Per-lookup log (cycle, vpage, outcome 0 hit / 1 miss / 2 MSHR hit), when enabled.
    pub log: Option<Vec<(u64, u64, u8)>>,
}

impl Tlb {
    pub fn new(core: &mut Core, id: CompId, top_conn: CompId, bottom_conn: CompId, p: &TlbParams) -> Self {
        let top = core.add_port(id, top_conn, p.reqs_per_cycle, p.reqs_per_cycle);
        let bottom = core.add_port(id, bottom_conn, p.reqs_per_cycle, p.reqs_per_cycle);
        Self {
            p: p.clone(),
            top,
            bottom,
            low: PortId::MAX,
            sets: FxHashMap::default(),
            mshr: Vec::new(),
            responding: None,
            pipeline: Pipeline::new(p.reqs_per_cycle, p.latency_cycles),
            buffer: Buffer::new(16),
            counts: TlbCounts::default(),
            log: None,
        }
    }

    fn set_of(&self, vpage: u64) -> usize {
        ((vpage / self.p.page_bytes) % self.p.sets as u64) as usize
    }

    fn set_mut(&mut self, s: usize) -> &mut Set {
        let ways = self.p.ways;
        self.sets.entry(s).or_insert_with(|| Set::new(ways))
    }

    fn note(&mut self, now: u64, vpage: u64, outcome: u8) {
        match outcome {
            0 => self.counts.hits += 1,
            1 => self.counts.misses += 1,
            _ => self.counts.mshr_hits += 1,
        }
        if let Some(log) = self.log.as_mut() {
            log.push((now, vpage, outcome));
        }
    }

    /// `respondMSHREntry`: answer the filled entry's requests one per call.
    fn respond_mshr_entry(&mut self, core: &mut Core) -> bool {
        let Some(e) = self.responding.as_mut() else { return false };
        let req = e.requests[0];
        let rsp = core.msg(self.top, req.src, Body::TransRsp { rsp_to: req.id, vpage: e.vpage, ppage: e.ppage });
        if !core.send(self.top, rsp) {
            return false;
        }
        e.requests.remove(0);
        if e.requests.is_empty() {
            self.responding = None;
        }
        true
    }

    /// `parseBottom`: one fill per call, none while an entry is being answered.
    fn parse_bottom(&mut self, core: &mut Core) -> bool {
        if self.responding.is_some() {
            return false;
        }
        let Some(&rsp) = core.peek_incoming(self.bottom) else { return false };
        let Body::TransRsp { vpage, ppage, .. } = rsp.body else { panic!("TLB bottom takes translations") };
        let Some(i) = self.mshr.iter().position(|e| e.vpage == vpage) else {
            core.retrieve_incoming(self.bottom);
            return true;
        };
        let s = self.set_of(vpage);
        self.set_mut(s).fill(vpage, ppage);
        let mut e = self.mshr.remove(i);
        e.ppage = ppage;
        self.responding = Some(e);
        core.retrieve_incoming(self.bottom);
        true
    }

    /// `lookup`: false leaves the request at the head of the buffer.
    fn lookup(&mut self, core: &mut Core, req: Msg) -> bool {
        let Body::TransReq { vpage } = req.body else { panic!("TLB top takes translation requests") };
        if let Some(e) = self.mshr.iter_mut().find(|e| e.vpage == vpage) {
            e.requests.push(req);
            self.note(core.now, vpage, 2);
            return true;
        }
        let s = self.set_of(vpage);
        if let Some((way, ppage)) = self.sets.get(&s).and_then(|set| set.lookup(vpage)) {
            // handleTranslationHit: the answer must leave before the visit.
            let rsp = core.msg(self.top, req.src, Body::TransRsp { rsp_to: req.id, vpage, ppage });
            if !core.send(self.top, rsp) {
                return false;
            }
            self.set_mut(s).visit(way);
            self.note(core.now, vpage, 0);
            return true;
        }
        // handleTranslationMiss / fetchBottom.
        if self.mshr.len() >= self.p.mshrs {
            return false;
        }
        let fetch = core.msg(self.bottom, self.low, Body::TransReq { vpage });
        if !core.send(self.bottom, fetch) {
            return false;
        }
        self.mshr.push(MshrEntry { vpage, requests: vec![req], ppage: 0 });
        self.note(core.now, vpage, 1);
        true
    }

    /// `processPipeline`: extract (the head retried each iteration), tick, insert.
    fn process_pipeline(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..self.p.reqs_per_cycle {
            let Some(&req) = self.buffer.peek() else { break };
            if self.lookup(core, req) {
                self.buffer.pop();
                progress = true;
            }
        }
        progress |= self.pipeline.tick(&mut self.buffer);
        for _ in 0..self.p.reqs_per_cycle {
            if !self.pipeline.can_accept(&self.buffer) {
                break;
            }
            let Some(req) = core.retrieve_incoming(self.top) else { break };
            self.pipeline.accept(req, &mut self.buffer);
            progress = true;
        }
        progress
    }

    /// MSHR entries in use (for checks).
    pub fn mshr_len(&self) -> usize {
        self.mshr.len()
    }
}

impl Component for Tlb {
    /// `handleEnable`.
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..self.p.reqs_per_cycle {
            progress |= self.respond_mshr_entry(core);
        }
        for _ in 0..self.p.reqs_per_cycle {
            progress |= self.parse_bottom(core);
        }
        progress |= self.process_pipeline(core);
        progress
    }
}

#[cfg(test)]
mod tests {
    use super::super::core::Due;
    use super::*;

    /// A source that sends translation requests at given cycles and a
    /// provider that answers every request `delay` cycles after it takes it.
    struct Rig {
        core: Core,
        tlb: Tlb,
        tlb_id: CompId,
        src_id: CompId,
        src: PortId,
        prov_id: CompId,
        prov: PortId,
        delay: u64,
        /// (cycle the source took an answer, vpage)
        answers: Vec<(u64, u64)>,
        pending: Vec<(u64, Msg)>,
    }

    impl Rig {
        fn new(p: &TlbParams, delay: u64) -> Self {
            let mut core = Core::new();
            let src_id = core.add_component();
            let tlb_id = core.add_component();
            let prov_id = core.add_component();
            let c_top = core.add_connection();
            let c_bot = core.add_connection();
            let src = core.add_port(src_id, c_top, 64, 64);
            let mut tlb = Tlb::new(&mut core, tlb_id, c_top, c_bot, p);
            let prov = core.add_port(prov_id, c_bot, 64, 64);
            tlb.low = prov;
            Self { core, tlb, tlb_id, src_id, src, prov_id, prov, delay, answers: vec![], pending: vec![] }
        }

        /// Requests for `vpages` (in order) sent by the source at `at`.
        fn request(&mut self, at: u64, vpages: &[u64]) {
            self.core.schedule_custom(self.src_id, at, vpages.len() as u64);
            for &v in vpages {
                let m = self.core.msg(self.src, self.tlb.top, Body::TransReq { vpage: v });
                self.pending.push((at, m));
            }
        }

        fn run(&mut self) {
            while let Some(d) = self.core.next() {
                let now = self.core.now;
                match d {
                    Due::Custom(c, _) if c == self.src_id => {
                        let due: Vec<Msg> = self.pending.iter().filter(|(t, _)| *t == now).map(|(_, m)| *m).collect();
                        for m in due {
                            assert!(self.core.send(self.src, m));
                        }
                    }
                    Due::Custom(c, token) if c == self.prov_id => {
                        let rsp = self.core.msg(
                            self.prov,
                            PortId::try_from(token >> 32).unwrap(),
                            Body::TransRsp { rsp_to: 0, vpage: token & 0xffff_ffff, ppage: (token & 0xffff_ffff) + 0x1000_0000 },
                        );
                        assert!(self.core.send(self.prov, rsp));
                    }
                    Due::Tick(c) if c == self.tlb_id => {
                        let p = self.tlb.tick(&mut self.core);
                        self.core.ticked(c, p);
                    }
                    Due::Tick(c) if c == self.src_id => {
                        while let Some(m) = self.core.retrieve_incoming(self.src) {
                            let Body::TransRsp { vpage, .. } = m.body else { panic!() };
                            self.answers.push((now, vpage));
                        }
                    }
                    Due::Tick(c) if c == self.prov_id => {
                        while let Some(m) = self.core.retrieve_incoming(self.prov) {
                            let Body::TransReq { vpage } = m.body else { panic!() };
                            let token = (u64::from(m.src) << 32) | vpage;
                            self.core.schedule_custom(self.prov_id, now + self.delay, token);
                        }
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
    }

    /// Sent in cycle 10: delivered in 10, the TLB takes it into its one-stage
    /// pipeline in its tick of 11, moves it to the buffer in 12 and looks it
    /// up (a miss, sent below) in 13 — the lookup is extracted before the
    /// pipeline ticks, so an item accepted in 11 is looked up in 13. The
    /// provider takes it in 14, answers in 14 + 50 = 64; the TLB parses the
    /// fill in 65, answers in 66 (respondMSHREntry runs first in the next
    /// tick), the source takes it in 67. A second request for the page in 20
    /// is an MSHR hit answered in the same tick (one answer per call, 32
    /// calls a tick); a third in 100 hits, looked up and answered in 103,
    /// taken by the source in 104.
    #[test]
    fn miss_fill_and_hit_timing_follow_the_middleware_order() {
        let mut r = Rig::new(&TlbParams::r9nano_l1v(), 50);
        r.request(10, &[0x5000]);
        r.request(20, &[0x5000]);
        r.request(100, &[0x5000]);
        r.run();
        assert_eq!(r.answers, vec![(67, 0x5000), (67, 0x5000), (104, 0x5000)]);
        assert_eq!(r.tlb.counts, TlbCounts { hits: 1, misses: 1, mshr_hits: 1 });
    }

    /// With 2 MSHRs, the third distinct miss stays at the head of the buffer
    /// and holds the hit behind it until a fill frees an entry.
    #[test]
    fn a_miss_with_full_mshrs_holds_the_lookups_behind_it() {
        let p = TlbParams { mshrs: 2, ..TlbParams::r9nano_l1v() };
        let mut r = Rig::new(&p, 50);
        r.request(10, &[0x1000]);
        r.request(200, &[0x2000, 0x3000, 0x4000, 0x1000]);
        r.run();
        assert_eq!(r.tlb.counts, TlbCounts { hits: 1, misses: 4, mshr_hits: 0 });
        // 0x1000 was filled long before; its hit waits for 0x4000's miss,
        // which needs a fill of 0x2000 or 0x3000 (about 200 + 3 + 1 + 50 + 1).
        let hit = r.answers.iter().rev().find(|a| a.1 == 0x1000).unwrap().0;
        assert!(hit > 250, "the hit waited behind the blocked miss, answered at {hit}");
    }

    /// LRU: with 1 set of 2 ways, touching A keeps it while C evicts B.
    #[test]
    fn fills_evict_the_least_recently_visited_way() {
        let p = TlbParams { sets: 1, ways: 2, ..TlbParams::r9nano_l1v() };
        let mut r = Rig::new(&p, 10);
        r.request(0, &[0x1000]);
        r.request(100, &[0x2000]);
        r.request(200, &[0x1000]);
        r.request(300, &[0x3000]);
        r.request(400, &[0x1000]);
        r.request(500, &[0x2000]);
        r.run();
        assert_eq!(r.tlb.counts, TlbCounts { hits: 2, misses: 4, mshr_hits: 0 });
    }

    use proptest::prelude::*;

    proptest! {
        /// A set used as the TLB uses it (visit on a hit, fill on a miss)
        /// against a recency list: the same hits, translations and pages.
        #[test]
        fn a_set_is_an_lru_list(ways in 1usize..9, pages in proptest::collection::vec(0u64..24, 0..400)) {
            let mut set = Set::new(ways);
            let mut list: Vec<u64> = Vec::new(); // most recent last
            for v in pages {
                let pos = list.iter().position(|&p| p == v);
                match set.lookup(v) {
                    Some((way, ppage)) => {
                        prop_assert!(pos.is_some(), "{v} hit but the reference evicted it");
                        prop_assert_eq!(ppage, v + 7);
                        set.visit(way);
                        list.remove(pos.unwrap());
                    }
                    None => {
                        prop_assert!(pos.is_none(), "{v} missed but the reference holds it");
                        set.fill(v, v + 7);
                        if list.len() == ways {
                            list.remove(0);
                        }
                    }
                }
                list.push(v);
                let mut held: Vec<u64> = set.pages.iter().flatten().map(|p| p.0).collect();
                held.sort_unstable();
                let mut want = list.clone();
                want.sort_unstable();
                prop_assert_eq!(held, want);
                prop_assert_eq!(set.index.len(), list.len());
            }
        }
    }

    /// The set is the page number modulo the sets: with 4 sets of 1 way,
    /// pages 1-4 take one set each and page 5 evicts page 1 (5 mod 4 = 1),
    /// so of 9 lookups 3 hit (pages 2, 3, 4) and 6 miss (1-5, then 1).
    #[test]
    fn the_page_number_picks_the_set() {
        let p = TlbParams { sets: 4, ways: 1, ..TlbParams::r9nano_l1v() };
        let mut r = Rig::new(&p, 10);
        for (k, v) in [0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x2000, 0x3000, 0x4000, 0x1000].into_iter().enumerate() {
            r.request(100 * k as u64, &[v]);
        }
        r.run();
        assert_eq!(r.tlb.counts, TlbCounts { hits: 3, misses: 6, mshr_hits: 0 });
    }

    /// MGPUSim's L1 vector TLB has 64 ways a set: after 65 pages of set 0
    /// (pages 4k, one each 100 cycles) the first is gone and the second is
    /// still there, so page 4 hits and page 0 misses (66 misses, 1 hit).
    #[test]
    fn the_l1_vector_tlb_keeps_64_pages_a_set() {
        let mut r = Rig::new(&TlbParams::r9nano_l1v(), 10);
        for k in 0..65u64 {
            r.request(100 * k, &[0x4000 * k]);
        }
        r.request(7000, &[0x4000]);
        r.request(7100, &[0x0]);
        r.run();
        assert_eq!(r.tlb.counts, TlbCounts { hits: 1, misses: 66, mshr_hits: 0 });
    }

    /// MGPUSim's L2 TLB has 64 MSHRs: of 65 distinct misses sent at 10 and
    /// 11, 64 go below at once; the 65th waits at the head of the buffer
    /// until the first fill frees an entry, so its answer comes a provider
    /// delay (200) after the first, while the 64 are answered one a tick
    /// (one fill is parsed a tick) within 64 cycles of the first.
    #[test]
    fn the_l2_tlb_has_64_mshrs() {
        let mut r = Rig::new(&TlbParams::r9nano_l2(), 200);
        r.request(10, &(1..=40u64).map(|k| 0x1000 * k).collect::<Vec<_>>());
        r.request(11, &(41..=65u64).map(|k| 0x1000 * k).collect::<Vec<_>>());
        r.run();
        let first = r.answers.iter().map(|a| a.0).min().unwrap();
        let early = r.answers.iter().filter(|a| a.0 < first + 100).count();
        assert_eq!((r.answers.len(), early), (65, 64));
        assert_eq!(r.tlb.counts.misses, 65);
    }
}
