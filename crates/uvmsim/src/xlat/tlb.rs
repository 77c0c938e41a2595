//! A TLB level: set-associative entries that remember when their
//! translation arrives, MSHRs that bound outstanding misses, and counters.
//!
//! Two options model MGPUSim's (Akita's) TLB: `allocate = "on-fill"` keeps a
//! pending miss out of the array until its translation arrives (a list of
//! pending fills, installed in fill order before each later lookup), and
//! `full_mshrs_block` makes a miss that waits for an MSHR hold back every
//! later lookup. `lookup_stage_cycles` makes the check happen at the end of the
//! lookup pipeline rather than at the arrival, `fill_return_cycles` answers merged
//! requests after their fill, and `fills_per_cycle` (through [`Tlb::fill_time`])
//! installs fills one cycle slot at a time. With none of these, lookups take the
//! short path below unchanged.

use super::Outstanding;
use crate::assoc::SetAssoc;
use crate::config::{TlbAllocate, TlbConfig};
use crate::sim::{Clock, Ps};
use crate::stats::{Latency, Metrics};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, Default)]
pub struct Entry {
    /// Physical address of the page.
    pub pa: u64,
    /// When the translation is (or was) filled: later lookups before then merge into the miss.
    pub ready: Ps,
}

#[derive(Debug, Clone, Default)]
pub struct TlbStats {
    pub accesses: u64,
    pub hits: u64,
    pub mshr_hits: u64,
    pub misses: u64,
    /// Summed wait of the misses for an MSHR.
    pub mshr_wait_ps: u128,
    pub miss_latency: Latency,
}

/// Outcome of a lookup at time `t`.
pub enum Lookup {
    /// Translation available at this time.
    Done(Ps, u64),
    /// Miss: ask the next level at this time (after the lookup and any MSHR wait).
    Miss(Ps),
}

/// A miss whose translation is on its way (`allocate = "on-fill"`).
#[derive(Debug, Clone, Copy)]
struct Pending {
    ready: Ps,
    key: u64,
    pa: u64,
}

#[derive(Debug, Clone)]
pub struct Tlb {
    arr: SetAssoc<Entry>,
    latency: Ps,
    mshrs: Outstanding,
    /// Either option is on: lookups take [`Tlb::lookup_ordered`].
    modelled: bool,
    on_fill: bool,
    full_blocks: bool,
    /// Pending fills (on-fill), earliest first (ties in fill order).
    pending: Vec<Pending>,
    /// Lookups wait until then behind a miss that waited for an MSHR (full_mshrs_block).
    blocked_until: Ps,
    /// The latest time a miss that waited for an MSHR got one, less the lookup latency: the
    /// TLB takes requests in order, so one arriving earlier is taken only then. Read by
    /// blocking faults (`Gpu`), whose µTLB stops taking requests when a fault is found.
    pub backlog_until: Ps,
    /// Arrival to the check (lookup_stage_cycles); 0 = check at the arrival, miss after `latency`.
    stage: Ps,
    /// A merged request is answered this long after its fill (fill_return_cycles).
    merge_return: Ps,
    /// Fills per cycle (fills_per_cycle, 0 = no limit), the cycle, and the fills taken per cycle index ahead.
    fill_cap: u32,
    cycle: Ps,
    fill_slots: BTreeMap<u64, u32>,
    pub stats: TlbStats,
}

impl Tlb {
    pub fn new(c: &TlbConfig, clock: Clock) -> Option<Tlb> {
        (c.entries > 0).then(|| {
            let arr = SetAssoc::new(c.entries as usize, c.ways as usize, c.replacement);
            let mut t = Tlb::build(arr, clock.cycles(c.latency_cycles as u64), c.mshrs as usize);
            t.set_options(c, clock);
            t
        })
    }

    /// A TLB with explicit geometry and latency (IOMMU TLB).
    pub fn with(entries: usize, ways: usize, latency: Ps, mshrs: usize) -> Tlb {
        Tlb::build(SetAssoc::new(entries, ways, crate::assoc::Replacement::Lru), latency, mshrs)
    }

    fn build(arr: SetAssoc<Entry>, latency: Ps, mshrs: usize) -> Tlb {
        Tlb {
            arr,
            latency,
            mshrs: Outstanding::new(mshrs),
            modelled: false,
            on_fill: false,
            full_blocks: false,
            pending: Vec::new(),
            blocked_until: 0,
            backlog_until: 0,
            stage: 0,
            merge_return: 0,
            fill_cap: 0,
            cycle: 1,
            fill_slots: BTreeMap::new(),
            stats: TlbStats::default(),
        }
    }

    fn set_options(&mut self, c: &TlbConfig, clock: Clock) {
        self.on_fill = c.allocate == TlbAllocate::OnFill;
        self.full_blocks = c.full_mshrs_block;
        self.stage = clock.cycles(c.lookup_stage_cycles as u64);
        self.merge_return = clock.cycles(c.fill_return_cycles as u64);
        self.fill_cap = c.fills_per_cycle;
        self.cycle = clock.cycles(1).max(1);
        self.update_modelled();
    }

    fn update_modelled(&mut self) {
        self.modelled = self.on_fill || self.full_blocks || self.stage > 0 || self.merge_return > 0;
    }

    /// Look `key` up for a request arriving at `t`; `now` is the engine's time (no later
    /// request arrives before it, or before `t`).
    #[inline]
    pub fn lookup(&mut self, key: u64, t: Ps, now: Ps) -> Lookup {
        if self.modelled {
            return self.lookup_ordered(key, t, now);
        }
        self.stats.accesses += 1;
        let at = t + self.latency;
        match self.arr.lookup(key) {
            Some(e) if e.ready <= t => {
                self.stats.hits += 1;
                Lookup::Done(at, e.pa)
            }
            Some(e) => {
                self.stats.mshr_hits += 1;
                Lookup::Done(at.max(e.ready), e.pa)
            }
            None => {
                self.stats.misses += 1;
                let admitted = self.mshrs.admit_pending(at, now.min(t));
                self.stats.mshr_wait_ps += (admitted - at) as u128;
                if admitted > at {
                    self.backlog_until = self.backlog_until.max(admitted - self.latency);
                }
                Lookup::Miss(admitted)
            }
        }
    }

    /// [`Self::lookup`] with the options on (kept out of line: the default path stays small).
    #[inline(never)]
    fn lookup_ordered(&mut self, key: u64, t: Ps, now: Ps) -> Lookup {
        self.stats.accesses += 1;
        // Behind a miss that waited for an MSHR: this lookup is made when that one was.
        let t = t.max(self.blocked_until);
        let at = t + self.latency;
        // The check, and a miss's request onward: at the end of the lookup stage, or
        // (stage 0) the check at the arrival and the request after the latency.
        let look = t + self.stage;
        let send = if self.stage > 0 { look } else { at };
        if self.on_fill {
            self.install_until(look);
            // Akita checks the MSHR before the sets: a merge touches no recency.
            if let Some(p) = self.pending.iter().find(|p| p.key == key) {
                self.stats.mshr_hits += 1;
                return Lookup::Done(at.max(p.ready + self.merge_return), p.pa);
            }
        }
        match self.arr.lookup(key) {
            Some(e) if e.ready <= look => {
                self.stats.hits += 1;
                Lookup::Done(at, e.pa)
            }
            Some(e) => {
                self.stats.mshr_hits += 1;
                Lookup::Done(at.max(e.ready + self.merge_return), e.pa)
            }
            None => {
                self.stats.misses += 1;
                let admitted = self.mshrs.admit_pending(send, now.min(t));
                self.stats.mshr_wait_ps += (admitted - send) as u128;
                if admitted > send {
                    // The pipeline latency overlaps the wait: later lookups count from `admitted` on.
                    let until = admitted - (send - t);
                    self.backlog_until = self.backlog_until.max(until);
                    if self.full_blocks {
                        self.blocked_until = until;
                    }
                }
                Lookup::Miss(admitted)
            }
        }
    }

    /// Install the pending fills that arrived by `t`, in arrival order: each evicts
    /// its set's LRU entry and becomes the most recently used.
    fn install_until(&mut self, t: Ps) {
        let n = self.pending.partition_point(|p| p.ready <= t);
        for p in self.pending.drain(..n) {
            // `insert`, not `insert_absent`: a prefetch may have put the key in meanwhile.
            self.arr.insert(p.key, Entry { pa: p.pa, ready: p.ready });
        }
    }

    /// When a translation reaching this TLB at `ready` is installed: `ready`, or with
    /// `fills_per_cycle` the start of the first cycle from then with a free fill slot
    /// (taken here; call once per fill, then [`Self::fill_miss`] with the result).
    /// Slots of cycles before `now` are forgotten: fills come no earlier than their lookup.
    #[inline]
    pub fn fill_time(&mut self, ready: Ps, now: Ps) -> Ps {
        if self.fill_cap == 0 {
            return ready;
        }
        self.take_fill_slot(ready, now)
    }

    #[inline(never)]
    fn take_fill_slot(&mut self, ready: Ps, now: Ps) -> Ps {
        let past = now / self.cycle;
        while self.fill_slots.first_key_value().is_some_and(|(&c, _)| c < past) {
            self.fill_slots.pop_first();
        }
        let first = ready / self.cycle;
        let mut c = first;
        loop {
            let n = self.fill_slots.entry(c).or_insert(0);
            if *n < self.fill_cap {
                *n += 1;
                return if c == first { ready } else { c * self.cycle };
            }
            c += 1;
        }
    }

    /// Complete a miss that was looked up at `t`: fill and free its MSHR at `ready`.
    /// Returns the entry the fill evicted (none with allocate = "on-fill": that happens later).
    pub fn fill_miss(&mut self, key: u64, pa: u64, t: Ps, ready: Ps) -> Option<(u64, Entry)> {
        let evicted = if self.on_fill {
            let i = self.pending.partition_point(|p| p.ready <= ready);
            self.pending.insert(i, Pending { ready, key, pa });
            None
        } else {
            self.arr.insert_absent(key, Entry { pa, ready })
        };
        self.mshrs.push(ready);
        self.stats.miss_latency.record(ready.saturating_sub(t));
        evicted
    }

    /// A miss whose walk found no translation (a far fault): its MSHR is held until the walk's answer at
    /// `ready`, and nothing is filled. Not a translation's latency, so not in `miss_latency`.
    pub fn fault_miss(&mut self, ready: Ps) {
        self.mshrs.push(ready);
    }

    /// Complete a miss looked up at `t` without filling (a least-inclusive IOMMU TLB): free its MSHR at `ready`.
    /// The answer can come before an MSHR admitted the miss (Least-TLB's remote L2 lookup runs from the
    /// request's arrival): then it held none.
    pub fn complete_miss(&mut self, t: Ps, ready: Ps) {
        self.mshrs.push_answered(ready);
        self.stats.miss_latency.record(ready.saturating_sub(t));
    }

    /// Insert a victim from an upper level (no lookup, no counters), most recently used; replaces an
    /// existing entry. Returns the entry it evicted.
    pub fn insert_victim(&mut self, key: u64, pa: u64, ready: Ps) -> Option<(u64, Entry)> {
        self.arr.insert(key, Entry { pa, ready })
    }

    /// Insert a translation nobody is waiting for (a prefetch); keeps an existing entry.
    pub fn fill_prefetch(&mut self, key: u64, pa: u64, ready: Ps) -> bool {
        self.arr.insert_if_absent(key, Entry { pa, ready })
    }

    /// Every key the TLB holds or has a fill pending for.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.arr.keys().chain(self.pending.iter().map(|p| p.key))
    }

    /// Does the array hold `key` (no recency or counter change)?
    pub fn holds(&self, key: u64) -> bool {
        self.arr.probe(key).is_some()
    }

    /// Control protocol: drop one translation, or all.
    /// A pending fill of the key is dropped too (its translation is discarded on arrival).
    pub fn invalidate(&mut self, key: u64) -> bool {
        self.pending.retain(|p| p.key != key);
        self.arr.invalidate(key)
    }
    /// Invalidate every entry whose key satisfies `pred`; returns how many.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(u64) -> bool) -> usize {
        self.pending.retain(|p| !pred(p.key));
        self.arr.invalidate_where(pred)
    }
    /// Drop every translation; returns how many there were.
    pub fn flush(&mut self) -> usize {
        let n = self.arr.occupancy();
        self.arr.flush();
        self.pending.clear();
        n
    }

    pub fn export(&self, m: &mut Metrics, p: &str) {
        export_stats(&self.stats, self.mshrs.full_waits, m, p);
    }
}

/// Export the counters of one TLB level (or the sum of several).
pub fn export_stats(s: &TlbStats, full_waits: u64, m: &mut Metrics, p: &str) {
    m.int(format!("{p}.accesses"), s.accesses);
    m.int(format!("{p}.hits"), s.hits);
    m.int(format!("{p}.mshr_hits"), s.mshr_hits);
    m.int(format!("{p}.misses"), s.misses);
    m.int(format!("{p}.mshr_full_waits"), full_waits);
    let wait = if s.misses > 0 { s.mshr_wait_ps as f64 / 1000.0 / s.misses as f64 } else { 0.0 };
    m.float(format!("{p}.mshr_wait_ns.mean"), wait);
    m.ratio(format!("{p}.hit_rate"), s.hits, s.accesses);
    s.miss_latency.export(m, &format!("{p}.miss_latency_ns"));
}

/// Sum the counters of several TLBs of one level (per-SM L1s).
pub fn sum(tlbs: &[Tlb]) -> (TlbStats, u64) {
    let mut s = TlbStats::default();
    let mut w = 0;
    for t in tlbs {
        s.accesses += t.stats.accesses;
        s.hits += t.stats.hits;
        s.mshr_hits += t.stats.mshr_hits;
        s.misses += t.stats.misses;
        s.mshr_wait_ps += t.stats.mshr_wait_ps;
        w += t.mshrs.full_waits;
    }
    s.miss_latency = merged_latency(tlbs);
    (s, w)
}

fn merged_latency(tlbs: &[Tlb]) -> Latency {
    let mut l = Latency::default();
    for t in tlbs {
        l.merge(&t.stats.miss_latency);
    }
    l
}

#[cfg(test)]
impl Tlb {
    fn opts(&mut self, allocate: TlbAllocate, full_mshrs_block: bool) {
        self.on_fill = allocate == TlbAllocate::OnFill;
        self.full_blocks = full_mshrs_block;
        self.update_modelled();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[derive(Debug, PartialEq, Clone, Copy)]
    enum Class {
        Hit,
        Merge,
        Miss,
    }

    /// Naive reference TLB: per set a recency list of (key, ready), most recent last.
    struct Reference {
        sets: Vec<VecDeque<(u64, Ps)>>,
        ways: usize,
    }

    impl Reference {
        fn access(&mut self, key: u64, t: Ps, fill_ready: Ps) -> Class {
            let n = self.sets.len() as u64;
            let set = &mut self.sets[(key % n) as usize];
            if let Some(p) = set.iter().position(|e| e.0 == key) {
                let e = set.remove(p).unwrap();
                set.push_back(e);
                return if e.1 <= t { Class::Hit } else { Class::Merge };
            }
            if set.len() == self.ways {
                set.pop_front();
            }
            set.push_back((key, fill_ready));
            Class::Miss
        }
    }

    proptest! {
        /// Hits, MSHR merges and misses agree with the reference on random
        /// access streams, for several geometries; latencies as configured.
        #[test]
        fn tlb_matches_reference(
            ops in proptest::collection::vec((0u64..48, 0u64..300, 1u64..2000), 1..300),
            geo in prop_oneof![Just((16usize, 16usize)), Just((32, 4)), Just((64, 8)), Just((8, 2))],
        ) {
            let lat = 7;
            let mut tlb = Tlb::with(geo.0, geo.1, lat, 1 << 20);
            let mut r = Reference { sets: vec![VecDeque::new(); geo.0 / geo.1], ways: geo.1 };
            let mut t = 0;
            let (mut hits, mut merges, mut misses) = (0, 0, 0);
            for &(key, dt, miss_lat) in &ops {
                t += dt;
                let want = r.access(key, t, t + lat + miss_lat);
                let got = match tlb.lookup(key, t, 0) {
                    Lookup::Done(d, pa) => {
                        prop_assert_eq!(pa, key * 4096);
                        prop_assert!(d >= t + lat);
                        if d == t + lat { Class::Hit } else { Class::Merge }
                    }
                    Lookup::Miss(at) => {
                        prop_assert_eq!(at, t + lat);
                        tlb.fill_miss(key, key * 4096, t, at + miss_lat);
                        Class::Miss
                    }
                };
                // Compare by counters: a merge whose fill lands exactly at t + lat looks like a hit by time.
                match want { Class::Hit => hits += 1, Class::Merge => merges += 1, Class::Miss => misses += 1 }
                if want == Class::Miss { prop_assert_eq!(got, Class::Miss); }
                prop_assert_eq!((tlb.stats.hits, tlb.stats.mshr_hits, tlb.stats.misses), (hits, merges, misses));
            }
            prop_assert_eq!(tlb.stats.accesses, ops.len() as u64);
        }
    }

    /// Naive reference for the Akita options: recency lists, a pending list
    /// installed in fill order, and MSHR end times; returns the class and the
    /// time the TLB answers (`Done`) or asks the next level (`Miss`).
    struct AkitaRef {
        sets: Vec<VecDeque<(u64, Ps)>>,
        ways: usize,
        lat: Ps,
        cap: usize,
        on_fill: bool,
        blocks: bool,
        /// lookup_stage_cycles and fill_return_cycles.
        stage: Ps,
        ret: Ps,
        pending: Vec<(Ps, u64)>,
        /// Every miss's MSHR interval.
        ends: Vec<(Ps, Ps)>,
        blocked: Ps,
    }

    impl AkitaRef {
        fn access(&mut self, key: u64, t: Ps, miss_lat: Ps) -> (Class, Ps) {
            let t = if self.blocks { t.max(self.blocked) } else { t };
            let look = t + self.stage;
            let n = self.sets.len() as u64;
            if self.on_fill {
                // Fill order: by time, ties in the order the misses were filled.
                while let Some(i) = (0..self.pending.len()).filter(|&i| self.pending[i].0 <= look).min_by_key(|&i| (self.pending[i].0, i)) {
                    let (ready, k) = self.pending.remove(i);
                    let set = &mut self.sets[(k % n) as usize];
                    if set.len() == self.ways {
                        set.pop_front();
                    }
                    set.push_back((k, ready));
                }
                if let Some(&(ready, _)) = self.pending.iter().find(|p| p.1 == key) {
                    return (Class::Merge, (ready + self.ret).max(t + self.lat));
                }
            }
            let set = &mut self.sets[(key % n) as usize];
            if let Some(p) = set.iter().position(|e| e.0 == key) {
                let e = set.remove(p).unwrap();
                set.push_back(e);
                return if e.1 <= look { (Class::Hit, t + self.lat) } else { (Class::Merge, (e.1 + self.ret).max(t + self.lat)) };
            }
            // A miss is sent at the end of the stage, or after the latency with no stage.
            let sent = if self.stage > 0 { look } else { t + self.lat };
            // The MSHRs: each miss holds one over [admission, fill); the earliest time from
            // `sent` (or a fill after it) when fewer than `cap` are held.
            let held = |s: Ps| self.ends.iter().filter(|&&(a, e)| a <= s && s < e).count();
            let mut cands: Vec<Ps> = self.ends.iter().map(|&(_, e)| e).filter(|&e| e > sent).collect();
            cands.push(sent);
            cands.sort_unstable();
            let at = *cands.iter().find(|&&s| held(s) < self.cap).unwrap();
            if self.blocks && at > sent {
                self.blocked = at - (sent - t);
            }
            let ready = at + miss_lat;
            self.ends.push((at, ready));
            if self.on_fill {
                self.pending.push((ready, key));
            } else {
                if set.len() == self.ways {
                    set.pop_front();
                }
                set.push_back((key, ready));
            }
            (Class::Miss, at)
        }
    }

    proptest! {
        /// With "on-fill" allocation and/or blocking on full MSHRs, with or without a lookup
        /// stage and a merged-request answer delay: every lookup's class and time agree with
        /// the naive reference, for several geometries and MSHR counts.
        #[test]
        fn akita_options_match_reference(
            ops in proptest::collection::vec((0u64..40, 0u64..300, 1u64..2000), 1..300),
            geo in prop_oneof![Just((16usize, 16usize)), Just((32, 4)), Just((64, 8)), Just((8, 2))],
            cap in prop_oneof![Just(1usize), Just(2), Just(4), Just(1 << 20)],
            opts in prop_oneof![Just((true, false)), Just((false, true)), Just((true, true))],
            stage in prop_oneof![Just(0u64), Just(3), Just(7)],
            ret in prop_oneof![Just(0u64), Just(2)],
        ) {
            let lat = 7;
            let mut tlb = Tlb::with(geo.0, geo.1, lat, cap);
            tlb.opts(if opts.0 { TlbAllocate::OnFill } else { TlbAllocate::OnMiss }, opts.1);
            (tlb.stage, tlb.merge_return) = (stage, ret);
            tlb.update_modelled();
            let mut r = AkitaRef {
                sets: vec![VecDeque::new(); geo.0 / geo.1], ways: geo.1, lat, cap,
                on_fill: opts.0, blocks: opts.1, stage, ret, pending: vec![], ends: vec![], blocked: 0,
            };
            let mut t = 0;
            let mut counts = (0, 0, 0);
            for &(key, dt, miss_lat) in &ops {
                t += dt;
                let (class, when) = r.access(key, t, miss_lat);
                match tlb.lookup(key, t, 0) {
                    Lookup::Done(d, pa) => {
                        prop_assert_ne!(class, Class::Miss, "key {} at {}", key, t);
                        prop_assert_eq!(d, when);
                        prop_assert_eq!(pa, key * 4096);
                    }
                    Lookup::Miss(at) => {
                        prop_assert_eq!(class, Class::Miss, "key {} at {}", key, t);
                        prop_assert_eq!(at, when);
                        tlb.fill_miss(key, key * 4096, t, at + miss_lat);
                    }
                }
                match class { Class::Hit => counts.0 += 1, Class::Merge => counts.1 += 1, Class::Miss => counts.2 += 1 }
                prop_assert_eq!((tlb.stats.hits, tlb.stats.mshr_hits, tlb.stats.misses), counts);
            }
        }
    }

    /// One lookup: 'H'it, 'S' (MSHR hit) or 'M'iss (filled `miss_lat` after it is sent on) and when it is answered or sent on.
    fn step(tlb: &mut Tlb, key: u64, t: Ps, miss_lat: Ps) -> (char, Ps) {
        let (h, s) = (tlb.stats.hits, tlb.stats.mshr_hits);
        match tlb.lookup(key, t, 0) {
            Lookup::Done(d, _) => (
                if tlb.stats.hits > h {
                    'H'
                } else {
                    assert!(tlb.stats.mshr_hits > s);
                    'S'
                },
                d,
            ),
            Lookup::Miss(at) => {
                tlb.fill_miss(key, 0, t, at + miss_lat);
                ('M', at)
            }
        }
    }

    #[test]
    fn on_fill_inserts_at_the_fill_and_merges_do_not_refresh() {
        // One set of two ways, no latency. A and B are filled at 10 and 20; A is used at 30.
        // C misses at 40 (fill at 100); lookups of C before then are MSHR hits.
        // The same sequence on both allocations; they differ in what is evicted.
        let seq = |alloc| {
            let mut tlb = Tlb::with(2, 2, 0, 8);
            tlb.opts(alloc, false);
            let mut got = vec![];
            for (key, t, lat) in [(1, 0, 10), (2, 0, 20), (1, 30, 0), (3, 40, 60), (3, 50, 0), (2, 60, 0), (1, 110, 0)] {
                got.push(step(&mut tlb, key, t, lat).0);
            }
            got.into_iter().collect::<String>()
        };
        // on-miss: C takes B's slot (the LRU) at 40, so B misses at 60 (refilled by 60, evicting A, LRU),
        // and A misses at 110.
        assert_eq!(seq(TlbAllocate::OnMiss), "MMHMSMM");
        // on-fill: the set keeps A and B until C arrives at 100, so B hits at 60; C then
        // evicts A (used at 30, before B at 60), and A misses at 110.
        assert_eq!(seq(TlbAllocate::OnFill), "MMHMSHM");
    }

    #[test]
    fn on_fill_evicts_the_lru_at_the_fill() {
        // Two ways. A and B are filled at 5 and 6. D misses at 10, when A is the LRU entry,
        // but is filled at 50, after A was used at 40: the fill evicts B, not A.
        let mut tlb = Tlb::with(2, 2, 0, 8);
        tlb.opts(TlbAllocate::OnFill, false);
        assert_eq!(step(&mut tlb, 1, 0, 5), ('M', 0));
        assert_eq!(step(&mut tlb, 2, 0, 6), ('M', 0));
        assert_eq!(step(&mut tlb, 4, 10, 40), ('M', 10));
        assert_eq!(step(&mut tlb, 4, 20, 0), ('S', 50));
        assert_eq!(step(&mut tlb, 1, 40, 0), ('H', 40));
        assert_eq!(step(&mut tlb, 1, 60, 0), ('H', 60));
        assert_eq!(step(&mut tlb, 4, 61, 0), ('H', 61));
        assert_eq!(step(&mut tlb, 2, 62, 0), ('M', 62));
        // On-miss allocation: D takes A's slot at 10, so A misses at 40.
        let mut tlb = Tlb::with(2, 2, 0, 8);
        for (key, t, lat) in [(1, 0, 5), (2, 0, 6), (4, 10, 40)] {
            step(&mut tlb, key, t, lat);
        }
        assert_eq!(step(&mut tlb, 1, 40, 0).0, 'M');
    }

    #[test]
    fn full_mshrs_block_later_lookups() {
        // One MSHR, latency 0. A misses at 0 (fill at 100); B misses at 10 and waits for the MSHR until 100.
        // C was filled before. At 20 C and A are looked up.
        let run = |blocks| {
            let mut tlb = Tlb::with(16, 16, 0, 1);
            tlb.opts(TlbAllocate::OnMiss, blocks);
            tlb.fill_prefetch(3, 0, 0);
            let a = step(&mut tlb, 1, 0, 100);
            let b = step(&mut tlb, 2, 10, 100);
            (a, b, step(&mut tlb, 3, 20, 0), step(&mut tlb, 1, 20, 0))
        };
        // Only B waits: C hits at 20, A merges into its pending miss (answered at 100).
        assert_eq!(run(false), (('M', 0), ('M', 100), ('H', 20), ('S', 100)));
        // Everything after B waits until B gets its MSHR at 100: C and A (filled at 100) hit then.
        assert_eq!(run(true), (('M', 0), ('M', 100), ('H', 100), ('H', 100)));
    }

    #[test]
    fn lookup_stage_checks_and_sends_at_the_end_of_the_stage() {
        // Latency 6 (a hit's answer), on-fill. A misses at 0 and is filled at 100.
        let run = |stage: Ps| {
            let mut tlb = Tlb::with(16, 16, 6, 8);
            tlb.opts(TlbAllocate::OnFill, false);
            tlb.stage = stage;
            tlb.update_modelled();
            let miss = step(&mut tlb, 1, 0, 95);
            assert_eq!(tlb.stats.miss_latency.count(), 1);
            (miss, step(&mut tlb, 1, 96, 0), step(&mut tlb, 1, 93, 0))
        };
        // Stage 0: checked at the arrival, the miss leaves at 6 (filled at 101); at 96 and 93
        // the fill is still pending: MSHR hits answered at the fill.
        assert_eq!(run(0), (('M', 6), ('S', 102), ('S', 101)));
        // Stage 5: the miss leaves at 5 (filled at 100); the lookup of the request that arrived
        // at 96 is made at 101, after the fill: a hit, answered at 102. One from 93 is made at 98: merged.
        assert_eq!(run(5), (('M', 5), ('H', 102), ('S', 100)));
    }

    #[test]
    fn merged_requests_are_answered_fill_return_after_the_fill() {
        for alloc in [TlbAllocate::OnFill, TlbAllocate::OnMiss] {
            let mut tlb = Tlb::with(16, 16, 6, 8);
            tlb.opts(alloc, false);
            tlb.merge_return = 2;
            tlb.update_modelled();
            // A misses at 0 (leaves at 6), filled at 100.
            assert_eq!(step(&mut tlb, 1, 0, 94), ('M', 6));
            // Merged at 50: answered with the miss's own request, at 102.
            assert_eq!(step(&mut tlb, 1, 50, 0), ('S', 102));
            // Merged at 99: its own latency ends later (105) than that.
            assert_eq!(step(&mut tlb, 1, 99, 0), ('S', 105));
            // After the fill: a hit.
            assert_eq!(step(&mut tlb, 1, 100, 0), ('H', 106));
        }
    }

    #[test]
    fn fills_per_cycle_hands_out_one_slot_a_cycle() {
        let mut tlb = Tlb::with(16, 16, 0, 8);
        (tlb.fill_cap, tlb.cycle) = (1, 1000);
        // 5 000 ps is in cycle 5: the first fill keeps its time, the next ones take cycles 6 and 7.
        assert_eq!(tlb.fill_time(5000, 0), 5000);
        assert_eq!(tlb.fill_time(5300, 0), 6000);
        assert_eq!(tlb.fill_time(5000, 0), 7000);
        // Earlier and later cycles are free.
        assert_eq!(tlb.fill_time(4500, 0), 4500);
        assert_eq!(tlb.fill_time(9000, 0), 9000);
        // Two per cycle: cycle 5 takes two more.
        let mut two = Tlb::with(16, 16, 0, 8);
        (two.fill_cap, two.cycle) = (2, 1000);
        let got: Vec<Ps> = (0..5).map(|_| two.fill_time(5000, 0)).collect();
        assert_eq!(got, [5000, 5000, 6000, 6000, 7000]);
        // No limit (the default): the time is kept.
        let mut free = Tlb::with(16, 16, 0, 8);
        assert_eq!((free.fill_time(5000, 0), free.fill_time(5000, 0)), (5000, 5000));
    }

    #[test]
    fn a_fill_moved_to_a_later_cycle_frees_its_mshr_then() {
        // One MSHR, one fill a cycle (1000 ps), no latency. A and B are filled at 5000
        // (B at 6000, the next free cycle): a third miss gets the MSHR B held at 6000.
        let mut tlb = Tlb::with(16, 16, 0, 1);
        tlb.opts(TlbAllocate::OnFill, false);
        (tlb.fill_cap, tlb.cycle) = (1, 1000);
        for (k, t) in [(1u64, 0u64), (2, 5000)] {
            let Lookup::Miss(at) = tlb.lookup(k, t, 0) else { panic!("cold miss expected") };
            let ready = tlb.fill_time(5000.max(at), t);
            tlb.fill_miss(k, 0, t, ready);
        }
        let Lookup::Miss(at) = tlb.lookup(3, 5500, 0) else { panic!("cold miss expected") };
        assert_eq!(at, 6000);
        // B is installed at 6000: merged before, a hit from then on.
        assert_eq!(step(&mut tlb, 2, 5999, 0), ('S', 6000));
        assert_eq!(step(&mut tlb, 2, 6000, 0), ('H', 6000));
    }

    #[test]
    fn full_mshrs_delay_the_next_miss() {
        let mut tlb = Tlb::with(16, 16, 0, 2);
        for (k, ready) in [(1u64, 100u64), (2, 50)] {
            let Lookup::Miss(at) = tlb.lookup(k, 0, 0) else { panic!("cold miss expected") };
            tlb.fill_miss(k, 0, 0, ready.max(at));
        }
        // Both MSHRs busy: the third miss waits for the earlier fill (50).
        let Lookup::Miss(at) = tlb.lookup(3, 10, 0) else { panic!("cold miss expected") };
        assert_eq!(at, 50);
        tlb.fill_miss(3, 0, 10, 200);
        assert_eq!((tlb.stats.mshr_wait_ps, tlb.mshrs.full_waits), (40, 1));
        // A miss looked up after those but arriving at 5 finds the first two held: at 50 the
        // third takes the second's MSHR, so it waits for the first's release at 100. One
        // arriving at 250 finds all free.
        let Lookup::Miss(at) = tlb.lookup(4, 5, 0) else { panic!("cold miss expected") };
        assert_eq!(at, 100);
        tlb.fill_miss(4, 0, 5, 160);
        let Lookup::Miss(at) = tlb.lookup(5, 250, 0) else { panic!("cold miss expected") };
        assert_eq!(at, 250);
        let mut m = Metrics::default();
        tlb.export(&mut m, "t");
        assert_eq!(m.get("t.mshr_wait_ns.mean"), Some((40.0 + 95.0) / 1000.0 / 5.0));
        // The latest MSHR wait's end: requests are taken in order, so none before 100.
        assert_eq!(tlb.backlog_until, 100);
    }

    /// `backlog_until` is the end of the latest MSHR wait less the lookup latency (when the
    /// waiting miss's lookup counts as made); misses that did not wait leave it alone.
    #[test]
    fn backlog_until_marks_the_end_of_the_latest_mshr_wait() {
        let mut tlb = Tlb::with(16, 16, 10, 1);
        let Lookup::Miss(at) = tlb.lookup(1, 0, 0) else { panic!("cold miss expected") };
        assert_eq!((at, tlb.backlog_until), (10, 0));
        tlb.fill_miss(1, 0, 0, 300);
        // The only MSHR is held until 300: a miss arriving at 20 is admitted then.
        let Lookup::Miss(at) = tlb.lookup(2, 20, 0) else { panic!("cold miss expected") };
        assert_eq!((at, tlb.backlog_until), (300, 290));
        tlb.fill_miss(2, 0, 20, 400);
        // A miss arriving at 1000 finds the MSHR free: the mark stays.
        let Lookup::Miss(at) = tlb.lookup(3, 1000, 0) else { panic!("cold miss expected") };
        assert_eq!((at, tlb.backlog_until), (1010, 290));
        // With the options on (a 4 ps lookup stage: the check and the request onward at t + 4),
        // the mark is the admission less the stage. A misses at 0 (sent at 4, filled at 300); B,
        // arriving at 20, is sent at 24 and admitted at 300: its lookup counts as made at 296.
        let mut tlb = Tlb::with(16, 16, 10, 1);
        tlb.opts(TlbAllocate::OnFill, false);
        tlb.stage = 4;
        tlb.update_modelled();
        assert_eq!(step(&mut tlb, 1, 0, 296), ('M', 4));
        assert_eq!(tlb.backlog_until, 0);
        assert_eq!(step(&mut tlb, 2, 20, 100), ('M', 300));
        assert_eq!(tlb.backlog_until, 296);
    }

    /// Least-TLB: a miss waiting for an MSHR can be answered (by a remote L2 TLB) before one admits
    /// it. It then holds none: a miss looked up later is admitted when the first MSHR frees, as if
    /// the early one had not been there (a debug assertion stopped such runs: stress seed 4503).
    #[test]
    fn a_miss_answered_before_its_mshr_admission_holds_none() {
        let mut tlb = Tlb::with(16, 16, 0, 1);
        let Lookup::Miss(at) = tlb.lookup(1, 0, 0) else { panic!("cold miss expected") };
        assert_eq!(at, 0);
        tlb.complete_miss(0, 100);
        let Lookup::Miss(at) = tlb.lookup(2, 10, 0) else { panic!("cold miss expected") };
        assert_eq!(at, 100, "the only MSHR is held until 100");
        tlb.complete_miss(10, 40);
        let Lookup::Miss(at) = tlb.lookup(3, 20, 0) else { panic!("cold miss expected") };
        assert_eq!(at, 100, "the early answer took no MSHR time after 100");
        tlb.complete_miss(20, 130);
        assert_eq!(tlb.stats.miss_latency.count(), 3);
    }

    /// The engine's time, not a request's arrival, bounds what the MSHRs forget: a miss processed
    /// later but arriving earlier still finds the MSHR held then. Forty misses 10 ps apart hold
    /// the only MSHR 5 ps each (enough to fill more than one of the chunks the MSHR set forgets
    /// whole); B arrives at 1000 with the engine at 0; C, at 52, waits for the sixth miss's
    /// [50, 55). (Pruning at B's arrival dropped that interval and let C in at 52.)
    #[test]
    fn an_mshr_held_before_a_later_arrival_still_holds_against_an_earlier_one() {
        let mut tlb = Tlb::with(16, 16, 0, 1);
        let miss = |tlb: &mut Tlb, k: u64, t: Ps| match tlb.lookup(k, t, 0) {
            Lookup::Miss(at) => at,
            Lookup::Done(..) => panic!("cold miss expected"),
        };
        for i in 0..40 {
            assert_eq!(miss(&mut tlb, 100 + i, 10 * i), 10 * i);
            tlb.fill_miss(100 + i, 0, 10 * i, 10 * i + 5);
        }
        assert_eq!(miss(&mut tlb, 1, 1000), 1000);
        tlb.fill_miss(1, 0, 1000, 1100);
        assert_eq!(miss(&mut tlb, 2, 52), 55);
    }

    /// Latency 10, one MSHR. A misses at 0 (sent at 10, filled at 300); B misses at 20 and would be
    /// sent at 30, but gets the MSHR at 300: a 270 ps wait. A hit at 400 is an access, not a miss:
    /// the mean wait is over the 2 misses, 0.135 ns (over the 3 accesses it would be 0.09). Miss
    /// latencies run from the lookup: 300 - 0 and 400 - 20, 680 ps in all.
    #[test]
    fn the_mshr_wait_runs_from_the_lookup_latency_and_averages_over_misses() {
        let mut tlb = Tlb::with(16, 16, 10, 1);
        let Lookup::Miss(at) = tlb.lookup(1, 0, 0) else { panic!("cold miss expected") };
        assert_eq!(at, 10);
        tlb.fill_miss(1, 0, 0, 300);
        let Lookup::Miss(at) = tlb.lookup(2, 20, 0) else { panic!("cold miss expected") };
        assert_eq!(at, 300);
        tlb.fill_miss(2, 0, 20, 400);
        assert_eq!(tlb.stats.mshr_wait_ps, 270);
        assert!(matches!(tlb.lookup(1, 400, 0), Lookup::Done(410, _)));
        assert_eq!(tlb.stats.miss_latency.sum_ps(), 680);
        let mut m = Metrics::default();
        tlb.export(&mut m, "t");
        assert_eq!(m.get("t.mshr_wait_ns.mean"), Some(270.0 / 1000.0 / 2.0));
    }

    /// On-fill: fills that arrive at the same time are installed in the order they were filled, so
    /// the later one is the more recent. One set of two ways: A then B filled at 10; C, filled at
    /// 20, evicts A (the LRU), not B.
    #[test]
    fn fills_arriving_together_are_installed_in_fill_order() {
        let mut tlb = Tlb::with(2, 2, 0, 8);
        tlb.opts(TlbAllocate::OnFill, false);
        assert_eq!(step(&mut tlb, 1, 0, 10), ('M', 0));
        assert_eq!(step(&mut tlb, 2, 0, 10), ('M', 0));
        assert_eq!(step(&mut tlb, 3, 20, 0), ('M', 20));
        assert_eq!(step(&mut tlb, 2, 30, 0), ('H', 30));
        assert_eq!(step(&mut tlb, 1, 31, 0), ('M', 31));
    }

    /// On-fill: a miss filled at 100 is pending until then. Dropping its key before (one page, by
    /// predicate, or all) drops the pending fill too: nothing is installed, a lookup at 200 misses.
    #[test]
    fn invalidations_and_flushes_drop_pending_fills() {
        for how in 0..3 {
            let mut tlb = Tlb::with(16, 16, 0, 8);
            tlb.opts(TlbAllocate::OnFill, false);
            assert_eq!(step(&mut tlb, 1, 0, 100), ('M', 0));
            assert_eq!(tlb.keys().collect::<Vec<_>>(), [1], "a pending fill is among the keys");
            // The array itself holds nothing yet: none is counted as removed.
            match how {
                0 => assert!(!tlb.invalidate(1)),
                1 => assert_eq!(tlb.invalidate_where(|k| k == 1), 0),
                _ => assert_eq!(tlb.flush(), 0),
            }
            assert_eq!(tlb.keys().count(), 0, "case {how}");
            assert_eq!(step(&mut tlb, 1, 200, 0), ('M', 200), "case {how}");
        }
    }

    /// Per-SM L1 TLBs are exported as one level: every counter is the sum over them. In each of two
    /// one-MSHR TLBs (no latency) a miss at 0 holds the MSHR until its fill at 100, a miss at 10
    /// waits 90 ps for it (filled at 200: 190 ps from its lookup), and a hit follows at 500.
    #[test]
    fn the_l1_sum_adds_every_counter_of_every_tlb() {
        let mut tlbs = vec![Tlb::with(16, 16, 0, 1), Tlb::with(16, 16, 0, 1)];
        for tlb in &mut tlbs {
            for (k, t) in [(1, 0), (2, 10)] {
                let Lookup::Miss(at) = tlb.lookup(k, t, 0) else { panic!("cold miss expected") };
                tlb.fill_miss(k, 0, t, at + 100);
            }
            assert!(matches!(tlb.lookup(1, 500, 0), Lookup::Done(500, _)));
        }
        let (s, waits) = sum(&tlbs);
        assert_eq!((s.accesses, s.hits, s.mshr_hits, s.misses, s.mshr_wait_ps, waits), (6, 2, 0, 4, 180, 2));
        assert_eq!(s.miss_latency.sum_ps(), 2 * (100 + 190));
    }
}
