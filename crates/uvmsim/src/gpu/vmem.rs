//! The vector memory path from an SM's L1 TLB to its L1 data cache under
//! back-pressure (`gpu.vmem.backpressure`), as in MGPUSim v4: the L1 TLB's
//! answers pass through a bounded chain of buffers (its top port, the address
//! translator's ports, the cache's top port) to the cache's intake, which takes
//! a request only while the cache has fewer than `l1_transactions` in flight and
//! its directory's buffers have room; the directory takes requests in order and
//! holds a read miss while every way of its set waits for a fill.
//!
//! How it works: per SM, the answers' intervals in each part of the path:
//! `[entered, accepted)` in the buffers before the cache (`buffer_entries`),
//! `[accepted, checked)` before the directory's check (`dir_entries`) and
//! `[accepted, done)` as a cache transaction (`l1_transactions`). An answer ready
//! at `r` enters the chain at the first time from `r` with room, counting only
//! the answers in it then: a merged or missed request is answered (and enters)
//! when its translation arrives, so it takes no room before. A hit that has to
//! wait holds the TLB's later lookups until it is sent (Akita's lookup stage
//! retries the request at its head); a miss or a merge is answered from the MSHR
//! and holds nothing. The cache takes answers in the order they entered the
//! chain. The directory takes them in the order they reach it (a miss's answer
//! after the hits that overtook it, as the translator forwards them): a read it
//! holds for its set holds every answer that reaches it later.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Included, Unbounded};

use crate::config::GpuConfig;
use crate::sim::{Clock, Ps};
use crate::stats::Metrics;

#[derive(Debug, Clone, Default)]
struct SmPath {
    /// Answers in the buffers before the cache: [entered, accepted by the cache).
    chain: Occupancy,
    /// Accepted requests not yet checked by the directory: [accepted, checked).
    dir: Occupancy,
    /// Cache transactions: [accepted, done).
    trans: Occupancy,
    /// The latest answer passed to [`VmemPath::send`]: when it entered the chain and the cache.
    entered: Ps,
    accepted: Ps,
    /// The same for the answer that entered the chain latest: the cache takes the next after it.
    last_in: (Ps, Ps),
    /// No lookup before this: a hit waits for room at the head of the TLB's lookup stage.
    floor: Ps,
    /// The latest read the directory held for its set: (when it reached the directory,
    /// when it was taken). Answers reaching it from then on wait behind it.
    held: (Ps, Ps),
}

/// Counters of the vector memory path.
#[derive(Debug, Clone, Default)]
pub struct VmemStats {
    /// Lookups that waited behind a hit with no room for its answer, and the time they waited.
    pub held_lookups: u64,
    pub held_ps: Ps,
    /// Answers that waited for room in the buffers before the cache, and the time they waited.
    pub full_waits: u64,
    pub full_ps: Ps,
    /// Answers the cache took late (transactions at the cap, or its directory's buffers full).
    pub intake_waits: u64,
    pub intake_ps: Ps,
    /// Reads the directory held because every way of their set was waiting for a fill, and for how long.
    pub set_waits: u64,
    pub set_ps: Ps,
}

/// The L1 TLB → L1 data cache path of every SM of one GPU.
#[derive(Debug, Clone)]
pub struct VmemPath {
    sms: Vec<SmPath>,
    room: usize,
    dir_room: usize,
    trans_room: usize,
    transit: Ps,
    pub stats: VmemStats,
}

/// Intervals `[from, to)` in one part of the path, as counts of starts and ends per
/// time, with the count at the last time asked about folded into `base` and the counts
/// at two recent query times kept as cursors (queries cluster near the lookups and near
/// the answers due later, so counting from the nearer cursor is short).
#[derive(Debug, Clone, Default)]
struct Occupancy {
    /// Intervals holding at `at`, and the time it is for.
    base: usize,
    at: Ps,
    /// Intervals not ended by `at`.
    live: usize,
    /// (starts, ends) at each time after `at`.
    changes: BTreeMap<Ps, (u32, u32)>,
    /// Intervals holding at each cursor's time (no earlier than `at`).
    cursors: [(Ps, usize); 2],
}

impl Occupancy {
    /// Nothing before `t` is asked about again (times come in order).
    fn advance(&mut self, t: Ps) {
        if t <= self.at {
            return;
        }
        self.at = t;
        while let Some(e) = self.changes.first_entry() {
            if *e.key() > t {
                break;
            }
            let (starts, ends) = e.remove();
            self.base = self.base + starts as usize - ends as usize;
            self.live -= ends as usize;
        }
        for c in &mut self.cursors {
            if c.0 < t {
                *c = (t, self.base);
            }
        }
    }

    /// An interval `[from, to)`, `from` no earlier than the last [`Self::advance`], `to` after `from`.
    fn add(&mut self, from: Ps, to: Ps) {
        debug_assert!(from < to);
        self.live += 1;
        if from <= self.at {
            self.base += 1;
        } else {
            self.changes.entry(from).or_default().0 += 1;
        }
        self.changes.entry(to).or_default().1 += 1;
        for c in &mut self.cursors {
            if from <= c.0 && c.0 < to {
                c.1 += 1;
            }
        }
    }

    /// Intervals holding at `r` (no earlier than `at`).
    fn count_at(&mut self, r: Ps) -> usize {
        let k = (self.cursors[1].0.abs_diff(r) < self.cursors[0].0.abs_diff(r)) as usize;
        let (t, n) = self.cursors[k];
        // Signed: walking back, an interval's start can come before its end.
        let mut n = n as i64;
        if r >= t {
            for (_, &(starts, ends)) in self.changes.range((Excluded(t), Included(r))) {
                n += starts as i64 - ends as i64;
            }
        } else {
            for (_, &(starts, ends)) in self.changes.range((Excluded(r), Included(t))) {
                n -= starts as i64 - ends as i64;
            }
        }
        let n = n.max(0) as usize;
        self.cursors[k] = (r, n);
        n
    }

    /// The first time from `r` (no earlier than the last [`Self::advance`]) when fewer
    /// than `cap` intervals hold; `cap` 0 is no limit.
    fn first_room(&mut self, r: Ps, cap: usize) -> Ps {
        if cap == 0 || self.live < cap {
            return r;
        }
        let n = self.count_at(r);
        if n < cap {
            return r;
        }
        let mut n = n as i64;
        let mut last = r;
        for (&t, &(starts, ends)) in self.changes.range((Excluded(r), Unbounded)) {
            n += starts as i64 - ends as i64;
            if n < cap as i64 {
                self.cursors[(self.cursors[1].0.abs_diff(t) < self.cursors[0].0.abs_diff(t)) as usize] = (t, n.max(0) as usize);
                return t;
            }
            last = t;
        }
        // Every interval has ended by the last change.
        last
    }
}

impl VmemPath {
    /// The path of GPU `g`, or None without `gpu.vmem.backpressure`.
    pub fn new(g: &GpuConfig) -> Option<VmemPath> {
        let v = &g.vmem;
        v.backpressure.then(|| VmemPath {
            sms: vec![SmPath::default(); g.sms as usize],
            room: v.buffer_entries as usize,
            dir_room: v.dir_entries as usize,
            trans_room: v.l1_transactions as usize,
            transit: Clock::from_mhz(g.core_mhz).cycles(v.transit_cycles as u64),
            stats: VmemStats::default(),
        })
    }

    /// When SM `sm`'s L1 TLB looks up a request that reaches it at `t`.
    #[inline]
    pub fn lookup_at(&mut self, sm: usize, t: Ps) -> Ps {
        let l = t.max(self.sms[sm].floor);
        if l > t {
            self.stats.held_lookups += 1;
            self.stats.held_ps += l - t;
        }
        l
    }

    /// The answer to a lookup made at `l`, ready at `r` (`hit`: answered by the TLB's
    /// set, which then sends it): when the directory can check it (after the transit,
    /// the cache's intake, and not before a held read that reached the directory first).
    /// Lookups come in time order per SM.
    pub fn send(&mut self, sm: usize, l: Ps, r: Ps, hit: bool) -> Ps {
        let p = &mut self.sms[sm];
        // Nothing is asked about a time before `l` again: what has left by then is gone.
        p.chain.advance(l);
        p.dir.advance(l);
        p.trans.advance(l);
        let s = p.chain.first_room(r, self.room);
        if s > r {
            self.stats.full_waits += 1;
            self.stats.full_ps += s - r;
            if hit {
                p.floor = p.floor.max(l + (s - r));
            }
        }
        // In order into the cache, after the answers that entered the chain before this one.
        let mut c = s + self.transit;
        if s >= p.last_in.0 {
            c = c.max(p.last_in.1);
        }
        let ready = c;
        loop {
            let a = p.trans.first_room(c, self.trans_room);
            let b = p.dir.first_room(a, self.dir_room);
            if b == c {
                break;
            }
            c = b;
        }
        if c > ready {
            self.stats.intake_waits += 1;
            self.stats.intake_ps += c - ready;
        }
        p.entered = s;
        p.accepted = c;
        if s >= p.last_in.0 {
            p.last_in = (s, c);
        }
        if c >= p.held.0 {
            c.max(p.held.1)
        } else {
            c
        }
    }

    /// The directory takes the answer at `at` (from [`Self::send`], or later if its set
    /// had every way filling until `at`, `arrived` being the time from `send`).
    #[inline]
    pub fn take(&mut self, sm: usize, arrived: Ps, at: Ps) {
        if at > arrived {
            self.stats.set_waits += 1;
            self.stats.set_ps += at - arrived;
        }
        let p = &mut self.sms[sm];
        if at > arrived && at > p.held.1 {
            p.held = (arrived, at);
        }
        p.chain.add(p.entered, p.accepted.max(p.entered + 1));
        p.dir.add(p.accepted, at.max(p.accepted + 1));
    }

    /// The cache transaction of the answer last taken ends at `done` (its data, or the
    /// write's acknowledgement, is back).
    #[inline]
    pub fn done(&mut self, sm: usize, done: Ps) {
        if self.trans_room > 0 {
            let p = &mut self.sms[sm];
            p.trans.add(p.accepted, done.max(p.accepted + 1));
        }
    }

    pub fn export(&self, m: &mut Metrics, p: &str) {
        let s = &self.stats;
        m.int(format!("{p}.held_lookups"), s.held_lookups);
        m.float(format!("{p}.held_ns"), s.held_ps as f64 / 1000.0);
        m.int(format!("{p}.full_waits"), s.full_waits);
        m.float(format!("{p}.full_ns"), s.full_ps as f64 / 1000.0);
        m.int(format!("{p}.intake_waits"), s.intake_waits);
        m.float(format!("{p}.intake_ns"), s.intake_ps as f64 / 1000.0);
        m.int(format!("{p}.set_waits"), s.set_waits);
        m.float(format!("{p}.set_ns"), s.set_ps as f64 / 1000.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use proptest::prelude::*;

    /// One SM at 1 GHz (1 cycle = 1000 ps): `room` entries before the cache, `dir` before
    /// its directory's check, `trans` transactions (0 = no limit), 5-cycle transit.
    fn path(room: u32, dir: u32, trans: u32) -> VmemPath {
        let mut g = Config::default().gpu;
        g.sms = 1;
        g.core_mhz = 1000.0;
        g.vmem.backpressure = true;
        g.vmem.buffer_entries = room;
        g.vmem.dir_entries = dir;
        g.vmem.l1_transactions = trans;
        g.vmem.transit_cycles = 5;
        VmemPath::new(&g).unwrap()
    }

    #[test]
    fn off_by_default() {
        assert!(VmemPath::new(&Config::default().gpu).is_none());
    }

    #[test]
    fn answers_flow_freely_while_there_is_room() {
        let mut p = path(2, 2, 0);
        assert_eq!(p.lookup_at(0, 0), 0);
        // Ready at 1000, taken by the cache and checked 5 cycles later.
        assert_eq!(p.send(0, 0, 1000, true), 6000);
        p.take(0, 6000, 6000);
        assert_eq!(p.send(0, 1000, 2000, true), 7000);
        p.take(0, 7000, 7000);
        // Both gone by 7000: the third is ready at 8000, after both.
        assert_eq!(p.send(0, 7000, 8000, true), 13_000);
        assert_eq!(p.stats.full_waits + p.stats.intake_waits, 0);
        assert_eq!(p.lookup_at(0, 7000), 7000);
    }

    #[test]
    fn an_answer_sent_later_takes_no_room_before() {
        // Two merged requests are answered when their translation arrives at 100 cycles;
        // until then they are in the TLB's MSHR, not in the buffers.
        let mut p = path(2, 32, 0);
        for _ in 0..2 {
            assert_eq!(p.send(0, 0, 100_000, false), 105_000);
            p.take(0, 105_000, 105_000);
        }
        // A hit at 1 cycle goes at once although the two will fill the buffers at 100.
        assert_eq!(p.send(0, 1000, 2000, true), 7000);
        assert_eq!(p.stats.full_waits, 0);
        assert_eq!(p.lookup_at(0, 3000), 3000);
        p.take(0, 7000, 7000);
        // A hit answered at 101 cycles finds both there and waits until they are taken at 105.
        assert_eq!(p.send(0, 100_000, 101_000, true), 110_000);
        assert_eq!((p.stats.full_waits, p.stats.full_ps), (1, 4000));
    }

    #[test]
    fn a_hit_without_room_holds_later_lookups_a_miss_does_not() {
        // One buffer entry, one cache transaction.
        let mut p = path(1, 32, 1);
        // A hit at 0, taken at 6; its data is back at 40.
        assert_eq!(p.send(0, 0, 1000, true), 6000);
        p.take(0, 6000, 6000);
        p.done(0, 40_000);
        // A hit looked up at 1 cycle, ready at 2: the buffer is free at 6, the cache's
        // only transaction at 40. The TLB retried it until 6: later lookups from 5 on.
        assert_eq!(p.send(0, 1000, 2000, true), 40_000);
        p.take(0, 40_000, 40_000);
        p.done(0, 80_000);
        assert_eq!((p.stats.full_waits, p.stats.full_ps), (1, 4000));
        assert_eq!((p.stats.intake_waits, p.stats.intake_ps), (1, 29_000));
        // A miss answered at 10 cycles waits in the TLB for the buffer (the hit before it
        // holds it until the cache takes it at 40), then for the cache until 80; it holds
        // no lookup.
        assert_eq!(p.send(0, 2000, 10_000, false), 80_000);
        assert_eq!((p.stats.full_waits, p.stats.full_ps), (2, 34_000));
        assert_eq!((p.stats.intake_waits, p.stats.intake_ps), (2, 29_000 + 35_000));
        assert_eq!(p.lookup_at(0, 3000), 5000);
        assert_eq!((p.stats.held_lookups, p.stats.held_ps), (1, 2000));
        assert_eq!(p.lookup_at(0, 6000), 6000);
    }

    #[test]
    fn the_directory_buffers_bound_the_intake() {
        // Two entries before the directory's check: a read held there for its set until 50
        // cycles keeps the next two answers out of the cache.
        let mut p = path(8, 2, 0);
        assert_eq!(p.send(0, 0, 1000, true), 6000);
        p.take(0, 6000, 50_000);
        assert_eq!(p.send(0, 0, 1000, true), 50_000, "checked behind the held read");
        p.take(0, 50_000, 60_000);
        assert_eq!((p.stats.set_waits, p.stats.set_ps), (2, 44_000 + 10_000));
        // The third is taken by the cache when the first is checked (50), after the second (60).
        assert_eq!(p.send(0, 0, 1000, true), 60_000);
        assert_eq!((p.stats.intake_waits, p.stats.intake_ps), (1, 44_000));
        assert_eq!(p.stats.full_waits, 0);
    }

    #[test]
    fn an_answer_that_reaches_the_directory_before_a_held_read_is_not_held() {
        let mut p = path(8, 32, 0);
        // A miss's answer ready at 100 cycles reaches the directory at 105 and waits there until 300.
        let m = p.send(0, 0, 100_000, false);
        assert_eq!(m, 105_000);
        p.take(0, m, 300_000);
        // A hit looked up later in the simulation but answered earlier (at 2) overtook it: not held.
        assert_eq!(p.send(0, 1000, 2000, true), 7000);
        p.take(0, 7000, 7000);
        // One reaching the directory after 105 waits behind it.
        assert_eq!(p.send(0, 150_000, 151_000, true), 300_000);
    }

    proptest! {
        /// `Occupancy` against a list of intervals scanned time by time, through a random
        /// sequence of additions (from no earlier than the time reached), advances and queries.
        #[test]
        fn first_room_matches_a_scan(
            ops in proptest::collection::vec((0u8..3, 0u64..40, 1u64..30, 1usize..5), 1..40),
        ) {
            let mut o = Occupancy::default();
            let mut iv: Vec<(Ps, Ps)> = Vec::new();
            let mut at = 0;
            for (op, x, len, cap) in ops {
                match op {
                    0 => {
                        o.add(at + x, at + x + len);
                        iv.push((at + x, at + x + len));
                    }
                    1 => {
                        at += x;
                        o.advance(at);
                    }
                    _ => {
                        let r = at + x;
                        let held = |t: Ps| iv.iter().filter(|&&(a, b)| a <= t && t < b).count();
                        let want = (r..).find(|&t| held(t) < cap).unwrap();
                        prop_assert_eq!(o.first_room(r, cap), want);
                        prop_assert_eq!(o.count_at(r), held(r));
                    }
                }
            }
        }
    }
}
