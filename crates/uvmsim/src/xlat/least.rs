//! Least-TLB (seed multi-gpu §3.2.1, Algorithm 1): the shared IOMMU TLB as a
//! victim cache of the GPUs' L2 TLBs ("least-inclusive"), and a local TLB
//! tracker that finds a translation in another GPU's L2 TLB.
//!
//! How it works. The IOMMU owns this state (it is lent to the GPU that runs,
//! so the translating GPU reaches it). For each GPU it keeps the set of keys
//! its L2 TLB holds, each with whether the tracker took it (a full cuckoo
//! filter refuses an insert; only what was inserted is deleted, so the filter
//! never loses another key's fingerprint). That set is the L2 TLB's contents,
//! kept in step by the callbacks below: it answers a remote lookup exactly as
//! the remote L2 TLB would, without borrowing another GPU while this one runs.
//! - [`LeastTlb::l2_filled`]: a GPU's L2 TLB took a translation (walk, IOMMU
//!   hit, remote hit): the tracker records it in that GPU's partition; the L2
//!   entry it evicted leaves the tracker and goes into the IOMMU TLB.
//! - [`LeastTlb::l2_dropped`]: an invalidation removed an L2 entry.
//! - [`LeastTlb::remote`]: an IOMMU-TLB miss asks the tracker (looked up in
//!   parallel with the IOMMU TLB, from the request's arrival); every other
//!   GPU whose partition answers positive gets a remote lookup, and the first
//!   remote hit is back at the IOMMU after two messages and its L2 latency.
//!   A positive for a GPU that does not hold the key is a false positive: a
//!   wasted probe, and the walk answers.
//!
//! The walk races the remote lookup (§3.2.1, "whichever comes first"): a
//! remote hit back before a walker takes the request ends it unwalked
//! (Algorithm 1 line 18, "end Pthread_IOMMUTLB"); a walk already under way
//! runs to its end (ASSUMPTION: walkers are not pre-empted), and the earlier
//! answer is used. Misses of a key whose walk is in flight wait for it (the
//! IOMMU's pending-request table; the baseline merges them in its TLB MSHRs).
//! A walk whose page then faults at the GPU leaves its translation in the
//! IOMMU TLB (the L2 TLB did not take it), as the baseline's fill does.
//!
//! ASSUMPTION: a remote lookup does not refresh the remote L2 entry's
//! recency (the seed does not say).
//!
//! Multi-application spilling (§3.2.2, Algorithm 2; `spill`). Each translation
//! carries its GPU (the application's) and N spill chances (N = 1: the spill
//! bit). Per-GPU eviction counters count each GPU's translations in the IOMMU
//! TLB. An IOMMU-TLB victim with chances left is spilled into the L2 TLB of
//! the GPU with the smallest counter other than its own (ties: the lowest
//! GPU), loses a chance and is tracked there; an L2 eviction of an entry with
//! no chance left is dropped (lines 28-29), otherwise it goes into the IOMMU
//! TLB (lines 24-26). A remote hit moves the spilled entry back to its GPU:
//! it leaves the receiver's L2 TLB and the tracker, its chances restored.
//! The receiver's L2 TLB belongs to another GPU, so the spill and the removal
//! are queued ([`LeastTlb::ops`]) and applied by [`LeastTlb::apply`] after the
//! running GPU's step, at the same simulated time (ASSUMPTION: the model's
//! event granularity; the receiver sees the entry a step later at most).

use super::cuckoo::PartitionedCuckoo;
use super::tlb::{Entry, Tlb};
use crate::sim::{ns_to_ps, Ps};
use crate::stats::Metrics;
use std::collections::HashMap;

/// Pending-table size at which answered entries are dropped.
const PENDING_PURGE: usize = 4096;

#[derive(Debug, Clone, Default)]
pub struct LeastStats {
    /// L2-TLB evictions inserted into the IOMMU TLB.
    pub victim_inserts: u64,
    /// IOMMU-TLB hits moved to the requester's L2 TLB (removed from the IOMMU TLB).
    pub iommu_hits_moved: u64,
    /// Tracker lookups (IOMMU-TLB misses).
    pub filter_lookups: u64,
    /// Lookups with a positive answer for at least one other GPU.
    pub filter_positive: u64,
    /// Remote L2 lookups sent (one per positive partition).
    pub remote_probes: u64,
    /// Misses a remote L2 TLB held (at least one probe hit).
    pub remote_hits: u64,
    /// Remote hits that answered before the walk.
    pub remote_first: u64,
    /// Remote hits back before a walker took the request: no walk.
    pub walks_avoided: u64,
    /// Probes to a GPU whose L2 TLB did not hold the key (wasted).
    pub false_positives: u64,
    /// (lookup, other GPU) pairs where that GPU did not hold the key: the false-positive rate's denominator.
    pub absent_tests: u64,
    /// Inserts the tracker refused (its partition full): that L2 entry is not shareable.
    pub insert_failures: u64,
    /// Spilling: IOMMU-TLB victims put into another GPU's L2 TLB.
    pub spills: u64,
    /// Spilling: IOMMU-TLB victims with no chance left (dropped).
    pub spill_drops: u64,
    /// Spilling: spilled entries evicted from the receiver's L2 TLB with no chance left (dropped).
    pub spill_discards: u64,
    /// Spilling: spilled entries evicted from the receiver with chances left (back into the IOMMU TLB).
    pub spill_returns: u64,
    /// Spilling: remote hits on a spilled entry (moved back to its GPU).
    pub spill_hits: u64,
}

/// A translation's spilling state.
#[derive(Debug, Clone, Copy)]
struct Meta {
    /// The GPU whose application it translates.
    owner: u8,
    /// Spill chances left.
    left: u8,
    /// In the IOMMU TLB (counted by its owner's eviction counter).
    in_iommu: bool,
}

/// Multi-application spilling state (Algorithm 2).
#[derive(Debug, Clone)]
struct Spill {
    chances: u8,
    /// Per GPU: its translations in the IOMMU TLB (the eviction counters).
    counters: Vec<u64>,
    meta: HashMap<u64, Meta>,
}

/// A change to another GPU's L2 TLB, applied after the running GPU's step.
#[derive(Debug, Clone, Copy)]
pub enum SpillOp {
    /// Put a spilled entry into this GPU's L2 TLB.
    Insert(usize, u64, Entry),
    /// A spilled entry went back to its GPU: remove it from this GPU's L2 TLB.
    Remove(usize, u64),
}

#[derive(Debug, Clone)]
pub struct LeastTlb {
    tracker: Option<PartitionedCuckoo>,
    /// Per GPU: the keys its L2 TLB holds → whether the tracker recorded the key.
    held: Vec<HashMap<u64, bool>>,
    /// Misses being answered: key → when (the IOMMU's pending-request table).
    pending: HashMap<u64, Ps>,
    /// One-way IOMMU ↔ GPU message latency of a remote lookup.
    remote_lat: Ps,
    /// The remote GPU's L2 TLB lookup latency.
    l2_lat: Ps,
    spill: Option<Spill>,
    /// Spilling: changes to other GPUs' L2 TLBs waiting for [`LeastTlb::apply`].
    pub ops: Vec<SpillOp>,
    pub stats: LeastStats,
}

impl LeastTlb {
    /// Least-TLB for `gpus` GPUs; `tracker`: (entries, bucket size, fingerprint bits, seed).
    pub fn new(gpus: usize, tracker: Option<(usize, usize, u32, u64)>, remote_latency_ns: f64, l2_lat: Ps) -> LeastTlb {
        LeastTlb {
            tracker: tracker.map(|(e, b, f, seed)| PartitionedCuckoo::new(e, gpus, b, f, seed)),
            held: vec![HashMap::new(); gpus],
            pending: HashMap::new(),
            remote_lat: ns_to_ps(remote_latency_ns),
            l2_lat,
            spill: None,
            ops: vec![],
            stats: LeastStats::default(),
        }
    }

    /// Turn on multi-application spilling with `chances` spill chances per translation.
    pub fn with_spill(mut self, chances: u32) -> LeastTlb {
        let n = self.held.len();
        self.spill = Some(Spill { chances: chances.min(255) as u8, counters: vec![0; n], meta: HashMap::new() });
        self
    }

    /// Spilling: GPU `g`'s eviction counter (its translations in the IOMMU TLB).
    pub fn eviction_counter(&self, g: usize) -> Option<u64> {
        self.spill.as_ref().map(|s| s.counters[g])
    }

    /// GPU `g`'s L2 TLB took `key`, evicting `evicted` at `t`: the IOMMU TLB's
    /// copy, if any, moves to the L2 (it leaves the IOMMU TLB); the tracker records
    /// the new entry; the evicted one leaves the tracker and becomes the IOMMU TLB's victim.
    pub fn l2_filled(&mut self, g: usize, key: u64, evicted: Option<(u64, Entry)>, t: Ps, iommu_tlb: &mut Tlb) {
        if self.spill.is_some() {
            return self.l2_filled_spill(g, key, evicted, t, iommu_tlb);
        }
        if iommu_tlb.invalidate(key) {
            self.stats.iommu_hits_moved += 1;
        }
        if let Some((ek, e)) = evicted {
            self.untrack(g, ek);
            iommu_tlb.insert_victim(ek, e.pa, e.ready.max(t));
            self.stats.victim_inserts += 1;
        }
        self.track(g, key);
    }

    /// An invalidation removed `key` from GPU `g`'s L2 TLB (if it was there).
    pub fn l2_dropped(&mut self, g: usize, key: u64) {
        self.untrack(g, key);
    }

    /// Remove `key` from GPU `g`'s set (and the tracker, if it took it); was it there?
    fn untrack(&mut self, g: usize, key: u64) -> bool {
        match self.held[g].remove(&key) {
            Some(tracked) => {
                if let (true, Some(f)) = (tracked, self.tracker.as_mut()) {
                    f.delete(g, key);
                }
                true
            }
            None => false,
        }
    }

    /// Record `key` in GPU `g`'s set and, if it has room, the tracker.
    fn track(&mut self, g: usize, key: u64) {
        if self.held[g].contains_key(&key) {
            return;
        }
        let tracked = match self.tracker.as_mut() {
            Some(f) => {
                let ok = f.insert(g, key);
                self.stats.insert_failures += !ok as u64;
                ok
            }
            None => false,
        };
        self.held[g].insert(key, tracked);
    }

    /// [`Self::l2_filled`] with spilling (Algorithm 2): GPU `g`'s own translation, with
    /// its chances restored; a spilled copy in another GPU leaves it (a remote hit).
    fn l2_filled_spill(&mut self, g: usize, key: u64, evicted: Option<(u64, Entry)>, t: Ps, iommu_tlb: &mut Tlb) {
        let sp = self.spill.as_mut().expect("spilling");
        if iommu_tlb.invalidate(key) {
            self.stats.iommu_hits_moved += 1;
            if let Some(m) = sp.meta.get(&key).filter(|m| m.in_iommu) {
                sp.counters[m.owner as usize] -= 1;
            }
        }
        sp.meta.insert(key, Meta { owner: g as u8, left: sp.chances, in_iommu: false });
        for x in 0..self.held.len() {
            if x != g && self.untrack(x, key) {
                self.stats.spill_hits += 1;
                self.ops.push(SpillOp::Remove(x, key));
            }
        }
        if let Some((ek, e)) = evicted {
            self.l2_evicted(g, ek, e, t, iommu_tlb);
        }
        self.track(g, key);
    }

    /// Spilling: GPU `g`'s L2 TLB evicted `key` at `t`. An entry with no chance left is
    /// dropped (Algorithm 2 lines 28-29); any other goes into the IOMMU TLB (lines 24-26).
    fn l2_evicted(&mut self, g: usize, key: u64, e: Entry, t: Ps, iommu_tlb: &mut Tlb) {
        if !self.untrack(g, key) {
            return; // a spilled copy that already went home (its removal is queued)
        }
        let sp = self.spill.as_mut().expect("spilling");
        let m = sp.meta.get(&key).copied().unwrap_or(Meta { owner: g as u8, left: sp.chances, in_iommu: false });
        if m.left == 0 {
            sp.meta.remove(&key);
            self.stats.spill_discards += 1;
            return;
        }
        self.stats.spill_returns += (m.owner as usize != g) as u64;
        self.iommu_insert(key, e.pa, e.ready.max(t), m, iommu_tlb);
    }

    /// Spilling: put `key` into the IOMMU TLB, counting it for its GPU; spill what that evicts.
    fn iommu_insert(&mut self, key: u64, pa: u64, ready: Ps, m: Meta, iommu_tlb: &mut Tlb) {
        self.stats.victim_inserts += 1;
        let sp = self.spill.as_mut().expect("spilling");
        if !sp.meta.get(&key).is_some_and(|x| x.in_iommu) {
            sp.counters[m.owner as usize] += 1;
        }
        sp.meta.insert(key, Meta { in_iommu: true, ..m });
        if let Some((vk, ve)) = iommu_tlb.insert_victim(key, pa, ready) {
            self.iommu_evicted(vk, ve);
        }
    }

    /// Spilling: the IOMMU TLB evicted `key`. With a chance left it goes to the L2 TLB of
    /// the GPU with the fewest IOMMU-TLB entries, other than its own (lines 30-34).
    fn iommu_evicted(&mut self, key: u64, e: Entry) {
        let sp = self.spill.as_mut().expect("spilling");
        let Some(m) = sp.meta.get(&key).copied() else { return };
        if m.in_iommu {
            sp.counters[m.owner as usize] -= 1;
        }
        let owner = m.owner as usize;
        let receiver = (0..sp.counters.len()).filter(|&x| x != owner).min_by_key(|&x| (sp.counters[x], x));
        match receiver {
            Some(x) if m.left > 0 => {
                sp.meta.insert(key, Meta { left: m.left - 1, in_iommu: false, ..m });
                self.stats.spills += 1;
                self.ops.push(SpillOp::Insert(x, key, e));
                self.track(x, key);
            }
            _ => {
                sp.meta.remove(&key);
                self.stats.spill_drops += 1;
            }
        }
    }

    /// A walk of GPU `g`'s `key` whose page faulted leaves its translation in the IOMMU TLB
    /// (the L2 TLB did not take it), ready at `ready`.
    pub fn fault_fill(&mut self, g: usize, key: u64, ready: Ps, iommu_tlb: &mut Tlb) {
        match self.spill.as_ref() {
            None => {
                iommu_tlb.fill_prefetch(key, 0, ready);
            }
            Some(_) if iommu_tlb.holds(key) => {}
            Some(sp) => {
                let m = Meta { owner: g as u8, left: sp.chances, in_iommu: false };
                self.iommu_insert(key, 0, ready, m, iommu_tlb);
                self.stats.victim_inserts -= 1; // not a victim: the walk's own fill
            }
        }
    }

    /// The IOMMU TLB dropped `key` (an invalidation): it no longer counts for its GPU.
    pub fn iommu_dropped(&mut self, key: u64) {
        if let Some(sp) = self.spill.as_mut() {
            if let Some(m) = sp.meta.get_mut(&key).filter(|m| m.in_iommu) {
                m.in_iommu = false;
                sp.counters[m.owner as usize] -= 1;
            }
        }
    }

    /// Spilling: apply the queued changes to the GPUs' L2 TLBs (`l2s[g]` is GPU `g`'s), in
    /// order, at `t`; what a spill evicts from a receiver is handled as its L2 eviction.
    pub fn apply(&mut self, l2s: &mut [&mut Tlb], t: Ps, iommu_tlb: &mut Tlb) {
        while !self.ops.is_empty() {
            for op in std::mem::take(&mut self.ops) {
                match op {
                    SpillOp::Insert(x, key, e) => {
                        if let Some((ek, ee)) = l2s[x].insert_victim(key, e.pa, e.ready) {
                            self.l2_evicted(x, ek, ee, t, iommu_tlb);
                        }
                    }
                    SpillOp::Remove(x, key) => {
                        l2s[x].invalidate(key);
                    }
                }
            }
        }
    }

    /// GPU `g`'s request for `key` missed the IOMMU TLB; it arrived at the IOMMU at
    /// `arrive`. Returns when a remote L2 hit is back at the IOMMU, if any GPU holds it
    /// and the tracker says so.
    pub fn remote(&mut self, g: usize, key: u64, arrive: Ps) -> Option<Ps> {
        let f = self.tracker.as_ref()?;
        self.stats.filter_lookups += 1;
        let positive = f.lookup(key) & !(1u64 << g);
        let mut hit = false;
        for (x, held) in self.held.iter().enumerate() {
            if x == g {
                continue;
            }
            let has = held.contains_key(&key);
            self.stats.absent_tests += !has as u64;
            if positive >> x & 1 == 1 {
                self.stats.remote_probes += 1;
                hit |= has;
                self.stats.false_positives += !has as u64;
            }
        }
        self.stats.filter_positive += (positive != 0) as u64;
        hit.then(|| {
            self.stats.remote_hits += 1;
            arrive + 2 * self.remote_lat + self.l2_lat
        })
    }

    /// A walk (or remote lookup) of `key` in flight at `t`: when it answers.
    pub fn in_flight(&mut self, key: u64, t: Ps) -> Option<Ps> {
        match self.pending.get(&key) {
            Some(&end) if end > t => Some(end),
            Some(_) => {
                self.pending.remove(&key);
                None
            }
            None => None,
        }
    }

    /// A miss of `key` that arrived at `t` is answered at `end`.
    pub fn walked(&mut self, key: u64, t: Ps, end: Ps) {
        if self.pending.len() >= PENDING_PURGE {
            // Requests arrive in time order: answers before this one's arrival are stale.
            self.pending.retain(|_, e| *e > t);
        }
        self.pending.insert(key, end);
    }

    /// Does GPU `g`'s L2 TLB hold `key` (as far as Least-TLB knows)?
    pub fn holds(&self, g: usize, key: u64) -> bool {
        self.held[g].contains_key(&key)
    }

    pub fn export(&self, m: &mut Metrics) {
        let s = &self.stats;
        let p = "multi.least_tlb";
        m.int(format!("{p}.victim_inserts"), s.victim_inserts);
        m.int(format!("{p}.iommu_hits_moved"), s.iommu_hits_moved);
        m.int(format!("{p}.filter_lookups"), s.filter_lookups);
        m.int(format!("{p}.filter_positive"), s.filter_positive);
        m.int(format!("{p}.remote_probes"), s.remote_probes);
        m.int(format!("{p}.remote_hits"), s.remote_hits);
        m.int(format!("{p}.remote_first"), s.remote_first);
        m.int(format!("{p}.walks_avoided"), s.walks_avoided);
        m.int(format!("{p}.false_positives"), s.false_positives);
        m.int(format!("{p}.absent_tests"), s.absent_tests);
        m.ratio(format!("{p}.false_positive_rate"), s.false_positives, s.absent_tests);
        m.int(format!("{p}.insert_failures"), s.insert_failures);
        if let Some(sp) = &self.spill {
            m.int(format!("{p}.spills"), s.spills);
            m.int(format!("{p}.spill_drops"), s.spill_drops);
            m.int(format!("{p}.spill_discards"), s.spill_discards);
            m.int(format!("{p}.spill_returns"), s.spill_returns);
            m.int(format!("{p}.spill_hits"), s.spill_hits);
            for (g, c) in sp.counters.iter().enumerate() {
                m.int(format!("{p}.eviction_counter.gpu{g}"), *c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, TranslationMode};
    use crate::mem::Dram;
    use crate::sim::PS_PER_NS;
    use crate::workload::Buffer;
    use crate::xlat::{Translator, Xlat};

    const BASE: u64 = 1 << 30;

    /// Two GPUs of one SM, a 1-entry L1 TLB (1 ns), a 2-entry fully associative L2
    /// TLB (10 ns), a 4-entry IOMMU TLB (20 ns) behind a 100 ns link, flat 500 ns
    /// walks (4 levels x 125 ns), remote lookups 50 ns each way.
    fn config(least: bool) -> Config {
        let mut c = Config::default();
        c.translation.mode = TranslationMode::Iommu;
        c.translation.levels = 4;
        c.gpu.sms = 1;
        c.gpu.sms_per_l1tlb = 1;
        c.gpu.core_mhz = 1000.0;
        (c.gpu.l1tlb.entries, c.gpu.l1tlb.ways, c.gpu.l1tlb.latency_cycles) = (1, 1, 1);
        (c.gpu.l2tlb.entries, c.gpu.l2tlb.ways, c.gpu.l2tlb.latency_cycles) = (2, 2, 10);
        let io = &mut c.iommu;
        (io.link_latency_ns, io.tlb_entries, io.tlb_ways, io.tlb_latency_ns) = (100.0, 4, 4, 20.0);
        let w = &mut io.walker;
        (w.threads, w.queue_depth, w.level_latency_ns, w.pte_from_dram, w.pwc_entries, w.pwc_latency_ns) = (8, 64, 125.0, false, 0, 0.0);
        c.multi.gpus = 2;
        c.multi.least_tlb.enabled = least;
        c.multi.least_tlb.remote_latency_ns = 50.0;
        c
    }

    struct Sys {
        gpus: Vec<Translator>,
        dram: Dram,
    }

    impl Sys {
        fn new(c: &Config) -> Sys {
            let mut gpus: Vec<Translator> = (0..2).map(|g| Translator::with_gpu(c, g)).collect();
            gpus[1].iommu = None;
            for t in gpus.iter_mut() {
                t.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: false });
            }
            Sys { gpus, dram: Dram::new(&c.gpu.dram, c.gpu.line_bytes) }
        }

        /// GPU `g` translates page `p` at `t_ns`: when it is ready, in ns (the shared IOMMU is lent to it).
        fn xlat(&mut self, g: usize, p: u64, t_ns: u64) -> u64 {
            let io = self.gpus.iter_mut().find_map(|t| t.iommu.take());
            self.gpus[g].iommu = io;
            let t = t_ns * PS_PER_NS;
            match self.gpus[g].translate(0, BASE + p * 4096, t, t, &mut self.dram) {
                Xlat::Ready(d, _, _) => d / PS_PER_NS,
                x => panic!("{x:?}"),
            }
        }

        fn iommu_holds(&self, p: u64) -> bool {
            let io = self.gpus.iter().find_map(|t| t.iommu.as_ref()).unwrap();
            io.tlb.as_ref().unwrap().holds(BASE / 4096 + p)
        }

        /// Apply the queued spills and removals to the L2 TLBs (the world does it after each step).
        fn apply(&mut self) {
            let mut io = self.gpus.iter_mut().find_map(|t| t.iommu.take()).unwrap();
            let mut l2s: Vec<&mut crate::xlat::Tlb> = self.gpus.iter_mut().map(|t| t.l2.as_mut().unwrap()).collect();
            io.apply_spills(&mut l2s, 0);
            self.gpus[0].iommu = Some(io);
        }

        fn least(&self) -> &super::LeastTlb {
            self.gpus.iter().find_map(|t| t.iommu.as_ref()).unwrap().least.as_ref().unwrap()
        }

        fn l2_holds(&self, g: usize, p: u64) -> bool {
            self.gpus[g].l2.as_ref().unwrap().holds(BASE / 4096 + p)
        }

        fn stats(&self) -> super::LeastStats {
            self.gpus.iter().find_map(|t| t.iommu.as_ref()).unwrap().least.as_ref().unwrap().stats.clone()
        }
    }

    /// A walk fills the L2 TLB only; an L2 eviction goes into the IOMMU TLB; an IOMMU
    /// hit moves the entry back to the L2 TLB. Times by hand: L1 1 + L2 10 + link 100
    /// + IOMMU TLB 20 + walk 500 + link 100 = 731 ns; an IOMMU hit 1 + 10 + 100 + 20 + 100 = 231 ns.
    #[test]
    fn victim_fill_and_move() {
        let mut s = Sys::new(&config(true));
        assert_eq!(s.xlat(0, 0, 0), 731);
        assert!(!s.iommu_holds(0), "a walk does not fill the IOMMU TLB");
        assert_eq!(s.xlat(0, 1, 10_000), 10_731);
        assert_eq!(s.stats().victim_inserts, 0);
        // Page 2 evicts page 0 (LRU) from the 2-entry L2 TLB: page 0 becomes the IOMMU TLB's victim.
        assert_eq!(s.xlat(0, 2, 20_000), 20_731);
        assert!(s.iommu_holds(0) && !s.iommu_holds(2));
        assert_eq!(s.stats().victim_inserts, 1);
        // Page 0 again: an IOMMU hit, moved to the L2 TLB (which evicts page 1 into the IOMMU TLB).
        assert_eq!(s.xlat(0, 0, 30_000), 30_231);
        assert!(!s.iommu_holds(0) && s.iommu_holds(1));
        let st = s.stats();
        assert_eq!((st.victim_inserts, st.iommu_hits_moved), (2, 1));
        // The same sequence in the mostly-inclusive baseline: the walk fills the IOMMU TLB, which keeps it.
        let mut b = Sys::new(&config(false));
        assert_eq!(b.xlat(0, 0, 0), 731);
        assert!(b.iommu_holds(0));
        b.xlat(0, 1, 10_000);
        b.xlat(0, 2, 20_000);
        assert_eq!(b.xlat(0, 0, 30_000), 30_231);
        assert!(b.iommu_holds(0));
    }

    /// A miss that finds a walk of its page in flight waits for it; the applications' IOMMU
    /// counters (`app{N}.iommu.tlb_hit_rate`) count it as answered at the IOMMU, as the baseline
    /// counts the same request's merge into its IOMMU TLB's MSHR (it once counted only there).
    #[test]
    fn a_merge_into_a_walk_in_flight_counts_as_the_baselines_merge_does() {
        let counts = |least: bool| {
            let mut s = Sys::new(&config(least));
            s.gpus[0].iommu.as_mut().unwrap().per_gpu = vec![[0; 3]; 2];
            let first = s.xlat(0, 0, 0);
            assert_eq!(s.xlat(1, 0, 1), first, "GPU 1 waits for GPU 0's walk");
            s.gpus.iter().find_map(|t| t.iommu.as_ref()).unwrap().per_gpu.clone()
        };
        assert_eq!(counts(false), vec![[1, 0, 0], [1, 1, 0]]);
        assert_eq!(counts(true), counts(false));
    }

    /// The tracker finds page 0 in GPU 0's L2 TLB: GPU 1's miss is answered by the remote
    /// lookup (arrival 111 + 50 + 10 + 50 = 221, + link 100 = 321 ns) instead of the walk (731).
    #[test]
    fn remote_hit_shortens_the_miss() {
        let mut s = Sys::new(&config(true));
        s.xlat(0, 0, 0);
        assert_eq!(s.xlat(1, 0, 10_000), 10_321);
        let st = s.stats();
        // Two tracker lookups: GPU 0's own miss (nothing tracked yet) and GPU 1's.
        assert_eq!((st.filter_lookups, st.remote_probes, st.remote_hits, st.remote_first, st.false_positives), (2, 1, 1, 1, 0));
        // Both L2 TLBs keep it now (§3.2.1: shared translations stay in both).
        let io = s.gpus[1].iommu.as_ref().unwrap().least.as_ref().unwrap();
        assert!(io.holds(0, BASE / 4096) && io.holds(1, BASE / 4096));
        // Without the tracker the same miss walks.
        let mut c = config(true);
        c.multi.least_tlb.tracker = false;
        let mut n = Sys::new(&c);
        n.xlat(0, 0, 0);
        assert_eq!(n.xlat(1, 0, 10_000), 10_731);
    }

    /// At the default remote latency (150 ns each way, seed Fig. 19: the whole remote access
    /// ~ the PCIe latency, 300 ns) a remote hit beats even an unqueued walk: arrival 111 + 150
    /// + 10 + 150 = 421, + link 100 = 521 ns, against 731 ns for the walk.
    #[test]
    fn default_remote_lookup_beats_an_unqueued_walk() {
        let mut c = config(true);
        c.multi.least_tlb.remote_latency_ns = Config::default().multi.least_tlb.remote_latency_ns;
        let mut s = Sys::new(&c);
        s.xlat(0, 0, 0);
        assert_eq!(s.xlat(1, 0, 10_000), 10_521);
        // An idle walker took the request at once: its walk runs on and its answer is discarded (§3.2.1).
        let st = s.stats();
        assert_eq!((st.remote_first, st.walks_avoided), (1, 0));
    }

    /// A 1-bit fingerprint in one bucket per GPU matches every key once anything is
    /// stored: GPU 1's page 5 (never in GPU 0) gets a wasted probe and the walk answers.
    #[test]
    fn false_positive_falls_back_to_the_walk() {
        let mut c = config(true);
        (c.multi.least_tlb.tracker_entries, c.multi.least_tlb.tracker_bucket_size, c.multi.least_tlb.tracker_fingerprint_bits) = (8, 4, 1);
        let mut s = Sys::new(&c);
        s.xlat(0, 0, 0);
        assert_eq!(s.xlat(1, 5, 10_000), 10_731);
        let st = s.stats();
        // Absent tests: GPU 1 lacked page 0 at GPU 0's miss, GPU 0 lacks page 5.
        assert_eq!((st.remote_probes, st.remote_hits, st.false_positives, st.absent_tests), (1, 0, 1, 2));
    }

    /// L2 evictions and invalidations delete from the tracker: after GPU 0's L2 TLB lost
    /// page 0 (evicted into the IOMMU TLB), GPU 1 finds it in the IOMMU TLB, not remotely.
    #[test]
    fn tracker_follows_evictions_and_invalidations() {
        let mut s = Sys::new(&config(true));
        s.xlat(0, 0, 0);
        s.xlat(0, 1, 10_000);
        s.xlat(0, 2, 20_000);
        assert_eq!(s.stats().filter_lookups, 3);
        // IOMMU hit: 30_000 + 231.
        assert_eq!(s.xlat(1, 0, 30_000), 30_231);
        assert_eq!(s.stats().filter_lookups, 3, "an IOMMU hit needs no tracker");
        // An invalidation of page 2 in GPU 0 (the world calls this when its request arrives).
        let lt = s.gpus[1].iommu.as_mut().unwrap().least.as_mut().unwrap();
        lt.l2_dropped(0, BASE / 4096 + 2);
        assert!(!lt.holds(0, BASE / 4096 + 2));
        assert_eq!(lt.tracker.as_ref().unwrap().partition(0).len(), 1, "page 1 only");
    }

    /// Least-TLB needs the shared IOMMU: other modes are refused, naming the key.
    #[test]
    fn needs_iommu_mode() {
        let mut c = config(true);
        c.translation.mode = TranslationMode::Gmmu;
        assert_eq!(c.validate().unwrap_err().0, "translation.mode");
        let mut c = config(true);
        c.iommu.ats_prefetch_pages = 4;
        assert_eq!(c.validate().unwrap_err().0, "iommu.ats_prefetch_pages");
        assert!(config(true).validate().is_ok());
    }

    /// One walker thread, busy with GPU 0's page 1 (10_131 to 10_631 ns): GPU 1's request
    /// for page 0 (in GPU 0's L2) gets the remote answer at 10_001 + 111 + 110 = 10_222
    /// before the walker is free, so it is never walked: done at 10_322.
    #[test]
    fn remote_hit_before_a_walker_is_free_skips_the_walk() {
        let mut c = config(true);
        c.iommu.walker.threads = 1;
        let mut s = Sys::new(&c);
        s.xlat(0, 0, 0);
        assert_eq!(s.xlat(0, 1, 10_000), 10_731);
        assert_eq!(s.xlat(1, 0, 10_001), 10_322);
        let io = s.gpus[1].iommu.as_ref().unwrap();
        assert_eq!(io.walker.stats.walks, 2);
        assert_eq!(s.stats().walks_avoided, 1);
    }

    fn spill_config(chances: u32) -> Config {
        let mut c = config(true);
        c.multi.least_tlb.spill = true;
        c.multi.least_tlb.spill_chances = chances;
        c
    }

    /// Algorithm 2 on two GPUs (GPU 0's application uses pages 0.., GPU 1's pages 100..;
    /// 2-entry L2 TLBs, a 4-entry IOMMU TLB). GPU 0's seventh page makes the IOMMU TLB
    /// evict page 0, which spills into GPU 1's L2 TLB (the only other GPU); GPU 0's next
    /// miss of page 0 is a remote hit (321 ns, as a single-application remote hit) that
    /// moves the entry back: it leaves GPU 1's L2 TLB. A spilled entry evicted from the
    /// receiver has no chance left: it is dropped, not put into the IOMMU TLB.
    #[test]
    fn spill_to_the_other_gpu_and_back() {
        let mut s = Sys::new(&spill_config(1));
        for p in 0..6 {
            assert_eq!(s.xlat(0, p, 10_000 * p), 10_000 * p + 731);
        }
        // L2 {4, 5}, IOMMU {0, 1, 2, 3}: four of GPU 0's translations.
        assert_eq!(s.least().eviction_counter(0), Some(4));
        s.xlat(0, 6, 60_000);
        assert!(!s.iommu_holds(0) && s.iommu_holds(4));
        assert_eq!(s.stats().spills, 1);
        assert!(!s.l2_holds(1, 0), "queued until applied");
        s.apply();
        assert!(s.l2_holds(1, 0) && s.least().holds(1, BASE / 4096));
        assert_eq!((s.least().eviction_counter(0), s.least().eviction_counter(1)), (Some(4), Some(0)));
        // GPU 0 needs page 0 again: the tracker finds it in GPU 1's L2 TLB.
        assert_eq!(s.xlat(0, 0, 100_000), 100_321);
        let st = s.stats();
        assert_eq!((st.remote_hits, st.spill_hits), (1, 1));
        s.apply();
        assert!(!s.l2_holds(1, 0) && !s.least().holds(1, BASE / 4096), "the receiver gave it back");
        assert!(s.l2_holds(0, 0));
        // That fill evicted page 5 into the IOMMU TLB, which spilled page 1 to GPU 1.
        assert!(s.l2_holds(1, 1) && s.iommu_holds(5));
        // GPU 1's own two pages evict the spilled page 1: no chance left, dropped.
        s.xlat(1, 100, 200_000);
        s.xlat(1, 101, 210_000);
        s.apply();
        let st = s.stats();
        assert_eq!((st.spills, st.spill_discards, st.spill_returns), (2, 1, 0));
        assert!(!s.l2_holds(1, 1) && !s.iommu_holds(1), "page 1 left the hierarchy");
    }

    /// With N = 2 chances the spilled entry evicted from the receiver goes back into the
    /// IOMMU TLB (and counts for its own GPU again). An invalidation of page 1 first frees
    /// an IOMMU-TLB slot, so the return evicts nothing (no chain of spills).
    #[test]
    fn two_spill_chances_return_to_the_iommu() {
        let mut s = Sys::new(&spill_config(2));
        for p in 0..7 {
            s.xlat(0, p, 10_000 * p);
        }
        s.apply();
        assert!(s.l2_holds(1, 0));
        let io = s.gpus.iter_mut().find_map(|t| t.iommu.as_mut()).unwrap();
        assert!(io.invalidate_page(BASE / 4096 + 1));
        assert_eq!(s.least().eviction_counter(0), Some(3), "pages 2, 3, 4");
        s.xlat(1, 100, 200_000);
        s.xlat(1, 101, 210_000);
        s.apply();
        let st = s.stats();
        assert_eq!((st.spills, st.spill_discards, st.spill_returns), (1, 0, 1));
        assert!(s.iommu_holds(0) && !s.l2_holds(1, 0), "page 0 is back in the IOMMU TLB");
        assert_eq!(s.least().eviction_counter(0), Some(4));
        // With N = 1 the same sequence drops it.
        let mut one = Sys::new(&spill_config(1));
        for p in 0..7 {
            one.xlat(0, p, 10_000 * p);
        }
        one.apply();
        one.gpus.iter_mut().find_map(|t| t.iommu.as_mut()).unwrap().invalidate_page(BASE / 4096 + 1);
        one.xlat(1, 100, 200_000);
        one.xlat(1, 101, 210_000);
        one.apply();
        assert_eq!((one.stats().spill_discards, one.stats().spill_returns), (1, 0));
        assert!(!one.iommu_holds(0));
    }

    /// The receiver is the GPU with the fewest IOMMU-TLB entries other than the victim's
    /// own GPU, the lowest-numbered on a tie (three GPUs, a 2-entry IOMMU TLB).
    #[test]
    fn receiver_has_the_smallest_eviction_counter() {
        let mut lt = super::LeastTlb::new(3, Some((96, 4, 8, 1)), 50.0, 0).with_spill(1);
        let mut io = crate::xlat::Tlb::with(2, 2, 0, 8);
        let e = super::Entry { pa: 0, ready: 0 };
        // GPU 1's L2 evicts key 10, GPU 0's evicts key 1: the IOMMU TLB holds one of each.
        lt.l2_filled(1, 10, None, 0, &mut io);
        lt.l2_filled(1, 11, Some((10, e)), 0, &mut io);
        lt.l2_filled(0, 1, None, 0, &mut io);
        lt.l2_filled(0, 2, Some((1, e)), 0, &mut io);
        assert_eq!([0, 1, 2].map(|g| lt.eviction_counter(g).unwrap()), [1, 1, 0]);
        // GPU 0's key 2 evicted: the IOMMU TLB's LRU entry, GPU 1's key 10, spills to GPU 2 (0 < 2).
        lt.l2_filled(0, 3, Some((2, e)), 0, &mut io);
        assert_eq!([0, 1, 2].map(|g| lt.eviction_counter(g).unwrap()), [2, 0, 0]);
        // GPU 0's key 3 evicted: key 1 (GPU 0's) spills; GPUs 1 and 2 tie at 0: GPU 1.
        lt.l2_filled(0, 4, Some((3, e)), 0, &mut io);
        let to: Vec<(usize, u64)> = lt
            .ops
            .iter()
            .map(|op| match *op {
                super::SpillOp::Insert(x, k, _) => (x, k),
                super::SpillOp::Remove(x, k) => panic!("unexpected removal {x} {k}"),
            })
            .collect();
        assert_eq!(to, [(2, 10), (1, 1)]);
        assert!(lt.holds(2, 10) && lt.holds(1, 1));
    }

    /// Spilling is a multi-application mechanism: refused without multi.apps, naming the key.
    #[test]
    fn spill_needs_multi_apps() {
        let c = spill_config(1);
        assert_eq!(c.validate().unwrap_err().0, "multi.least_tlb.spill");
        let mut c = spill_config(1);
        c.multi.apps = vec![crate::workload::WorkloadKind::Stream; 2];
        assert!(c.validate().is_ok());
        c.multi.least_tlb.spill_chances = 0;
        assert_eq!(c.validate().unwrap_err().0, "multi.least_tlb.spill_chances");
    }

    /// The race's tie: a remote answer back just as a walker could take the request ends it
    /// unwalked. One walker thread, busy with GPU 0's page 1 over [10_131, 10_631) ns; GPU 1's
    /// request for page 0 at 10_410 ns reaches the IOMMU at 10_521 and its remote answer is back
    /// at 10_521 + 50 + 10 + 50 = 10_631, when the thread frees: done at 10_731, with no walk.
    #[test]
    fn a_remote_answer_back_as_the_walker_frees_skips_the_walk() {
        let mut c = config(true);
        c.iommu.walker.threads = 1;
        let mut s = Sys::new(&c);
        s.xlat(0, 0, 0);
        assert_eq!(s.xlat(0, 1, 10_000), 10_731);
        assert_eq!(s.xlat(1, 0, 10_410), 10_731);
        assert_eq!(s.stats().walks_avoided, 1);
        assert_eq!(s.gpus[1].iommu.as_ref().unwrap().walker.stats.walks, 2);
    }

    /// A remote answer that ties with the walk is not counted as answering first: 2 x 255 + 10 =
    /// 520 ns after the arrival, as the IOMMU TLB's 20 ns and the 500 ns walk. GPU 1's request
    /// at 10_000 arrives at 10_111; both answers are there at 10_631, back at 10_731.
    #[test]
    fn a_remote_answer_tying_with_the_walk_is_not_counted_first() {
        let mut c = config(true);
        c.multi.least_tlb.remote_latency_ns = 255.0;
        let mut s = Sys::new(&c);
        s.xlat(0, 0, 0);
        assert_eq!(s.xlat(1, 0, 10_000), 10_731);
        let st = s.stats();
        assert_eq!((st.remote_hits, st.remote_first, st.walks_avoided), (1, 0, 0));
    }

    /// A miss of a key whose walk is in flight waits for that walk (the IOMMU's pending-request
    /// table), although the tracker already lists the GPU whose L2 TLB the walk fills: GPU 0's
    /// walk of page 0 answers at the IOMMU at 631 ns; GPU 1's request, there at 211 ns, is
    /// answered with it (back at 731), not by a remote lookup (back at 421).
    #[test]
    fn a_miss_of_a_key_being_walked_waits_for_that_walk() {
        let mut s = Sys::new(&config(true));
        assert_eq!(s.xlat(0, 0, 0), 731);
        assert_eq!(s.xlat(1, 0, 100), 731);
        assert_eq!((s.stats().filter_lookups, s.stats().remote_hits), (1, 0));
    }

    /// A walk whose page faults leaves its translation in the IOMMU TLB from when the walk answers
    /// there (631 ns), a link crossing before the fault reaches the GPU (731 ns): GPU 1's request
    /// for the page, at the IOMMU at 511 ns, merges into it and is answered at 631, back at 731.
    #[test]
    fn a_faulting_walk_fills_the_iommu_tlb_when_it_answers_there() {
        let c = config(true);
        let mut gpus: Vec<Translator> = (0..2).map(|g| Translator::with_gpu(&c, g)).collect();
        for t in gpus.iter_mut() {
            t.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: true });
        }
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        assert_eq!(gpus[0].translate(0, BASE, 0, 0, &mut dram), Xlat::Fault(731 * PS_PER_NS));
        gpus[1].iommu = gpus[0].iommu.take();
        let t = 400 * PS_PER_NS;
        assert_eq!(gpus[1].translate(0, BASE, t, t, &mut dram), Xlat::Fault(731 * PS_PER_NS));
    }

    /// An L2 victim enters the IOMMU TLB when the L2 TLB evicts it (500 ps), not when it was first
    /// filled (100): a lookup arriving at the IOMMU at 300 merges and is answered at 500.
    #[test]
    fn a_victim_enters_the_iommu_tlb_when_the_l2_evicts_it() {
        let mut lt = super::LeastTlb::new(2, None, 50.0, 0);
        let mut io = crate::xlat::Tlb::with(4, 4, 0, 8);
        lt.l2_filled(0, 1, Some((9, super::Entry { pa: 0, ready: 100 })), 500, &mut io);
        assert_eq!(lt.stats.victim_inserts, 1);
        assert!(matches!(io.lookup(9, 300, 0), crate::xlat::Lookup::Done(500, _)));
        assert!(matches!(io.lookup(9, 600, 0), crate::xlat::Lookup::Done(600, _)));
    }

    /// The tracker's counters look at the other GPUs only. GPU 0 looks up a key only its own L2 TLB
    /// holds: no positive (its own partition does not count), one absent test (GPU 1 lacks it).
    /// Once GPU 1 holds it too: a positive, one probe and a remote hit, back 50 + 50 ns and the
    /// 10 ps L2 lookup after the arrival, and no absent test.
    #[test]
    fn tracker_lookups_count_the_other_gpus_only() {
        let mut lt = super::LeastTlb::new(2, Some((64, 4, 12, 1)), 50.0, 10);
        let mut io = crate::xlat::Tlb::with(4, 4, 0, 8);
        lt.l2_filled(0, 5, None, 0, &mut io);
        assert_eq!(lt.remote(0, 5, 1000), None);
        let s = &lt.stats;
        assert_eq!((s.filter_lookups, s.filter_positive, s.remote_probes, s.absent_tests), (1, 0, 0, 1));
        lt.l2_filled(1, 5, None, 0, &mut io);
        assert_eq!(lt.remote(0, 5, 1000), Some(1000 + 100_000 + 10));
        let s = &lt.stats;
        assert_eq!((s.filter_lookups, s.filter_positive, s.remote_probes, s.remote_hits, s.absent_tests), (2, 1, 1, 1, 1));
    }

    /// Spills applied at a step's end that spill again are applied in the same step. One-entry L2
    /// TLBs and IOMMU TLB, two chances. GPU 1's L2 holds its key 20; GPU 0's L2 evicts 10, then 11,
    /// into the IOMMU TLB, whose eviction of 10 spills it to GPU 1 (queued). Applying it evicts 20
    /// from GPU 1's L2 into the IOMMU TLB, which evicts 11: spilled to GPU 1 too, which evicts 10
    /// back into the IOMMU TLB, which evicts 20: spilled to GPU 0. All of it in one `apply`.
    #[test]
    fn spills_caused_by_applying_spills_are_applied_too() {
        let mut lt = super::LeastTlb::new(2, None, 50.0, 0).with_spill(2);
        let mut io = crate::xlat::Tlb::with(1, 1, 0, 8);
        let (mut l2a, mut l2b) = (crate::xlat::Tlb::with(1, 1, 0, 8), crate::xlat::Tlb::with(1, 1, 0, 8));
        let e = super::Entry { pa: 0, ready: 0 };
        l2b.insert_victim(20, 0, 0);
        lt.l2_filled(1, 20, None, 0, &mut io);
        lt.l2_filled(0, 10, None, 0, &mut io);
        lt.l2_filled(0, 11, Some((10, e)), 0, &mut io);
        lt.l2_filled(0, 12, Some((11, e)), 0, &mut io);
        assert_eq!(lt.ops.len(), 1, "10 spilled to GPU 1");
        lt.apply(&mut [&mut l2a, &mut l2b], 0, &mut io);
        assert!(lt.ops.is_empty());
        assert!(l2a.holds(20) && l2b.holds(11) && io.holds(10));
        assert_eq!((lt.stats.spills, lt.stats.spill_returns), (3, 1));
    }

    /// Spilling: a second faulting walk of a key the IOMMU TLB holds (another GPU's fault) leaves
    /// the entry as it is: ready at 100 ps (a lookup at 200 hits), counted for GPU 0, which loses
    /// the count when the entry is dropped.
    #[test]
    fn a_second_faulting_walk_leaves_the_iommu_tlb_entry_alone() {
        let mut lt = super::LeastTlb::new(2, None, 50.0, 0).with_spill(1);
        let mut io = crate::xlat::Tlb::with(2, 2, 0, 8);
        lt.fault_fill(0, 7, 100, &mut io);
        lt.fault_fill(1, 7, 300, &mut io);
        assert!(matches!(io.lookup(7, 200, 0), crate::xlat::Lookup::Done(200, _)));
        assert_eq!((lt.eviction_counter(0), lt.eviction_counter(1)), (Some(1), Some(0)));
        lt.iommu_dropped(7);
        assert_eq!((lt.eviction_counter(0), lt.eviction_counter(1)), (Some(0), Some(0)));
    }
}
