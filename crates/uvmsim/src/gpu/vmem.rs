//! The vector memory path from an SM's L1 TLB to its L1 data cache under
//! back-pressure (`gpu.vmem.backpressure`), as in MGPUSim v4: the L1 TLB's
//! answers pass through a bounded chain of buffers (its top port, the address
//! translator's ports, the cache's top port, directory buffer and pipeline) to
//! the cache directory, which takes them in order and holds a read miss while
//! every way of its set waits for a fill.
//!
//! How it works: per SM, the times at which the directory took the last
//! `buffer_entries` answers. An answer ready at `r` enters the chain when there
//! is room: when the earliest of those times has passed, if all are later than
//! `r`. A hit that has to wait holds the TLB's later lookups until it is sent
//! (Akita's lookup stage retries the request at its head); a miss or a merge is
//! answered from the MSHR and holds nothing. The directory takes answers in the
//! order they reach it (a miss's answer after the hits that overtook it, as the
//! translator forwards them): a read it holds for its set holds every answer
//! that reaches it later.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::config::GpuConfig;
use crate::sim::{Clock, Ps};
use crate::stats::Metrics;

#[derive(Debug, Clone, Default)]
struct SmPath {
    /// When the directory took each of the last `room` answers, earliest on top.
    taken: BinaryHeap<Reverse<Ps>>,
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
    /// Answers that waited for room in the buffers, and the time they waited.
    pub full_waits: u64,
    pub full_ps: Ps,
    /// Reads the directory held because every way of their set was waiting for a fill, and for how long.
    pub set_waits: u64,
    pub set_ps: Ps,
}

/// The L1 TLB → L1 data cache path of every SM of one GPU.
#[derive(Debug, Clone)]
pub struct VmemPath {
    sms: Vec<SmPath>,
    room: usize,
    transit: Ps,
    pub stats: VmemStats,
}

impl VmemPath {
    /// The path of GPU `g`, or None without `gpu.vmem.backpressure`.
    pub fn new(g: &GpuConfig) -> Option<VmemPath> {
        let v = &g.vmem;
        v.backpressure.then(|| VmemPath {
            sms: vec![SmPath::default(); g.sms as usize],
            room: v.buffer_entries as usize,
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
    /// and not before a held read that reached the directory first).
    #[inline]
    pub fn send(&mut self, sm: usize, l: Ps, r: Ps, hit: bool) -> Ps {
        let p = &mut self.sms[sm];
        let s = match p.taken.peek() {
            Some(&Reverse(oldest)) if p.taken.len() >= self.room && oldest > r => {
                self.stats.full_waits += 1;
                self.stats.full_ps += oldest - r;
                if hit {
                    p.floor = p.floor.max(l + (oldest - r));
                }
                oldest
            }
            _ => r,
        };
        let arrived = s + self.transit;
        if arrived >= p.held.0 {
            arrived.max(p.held.1)
        } else {
            arrived
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
        if p.taken.len() >= self.room {
            p.taken.pop();
        }
        p.taken.push(Reverse(at));
    }

    pub fn export(&self, m: &mut Metrics, p: &str) {
        let s = &self.stats;
        m.int(format!("{p}.held_lookups"), s.held_lookups);
        m.float(format!("{p}.held_ns"), s.held_ps as f64 / 1000.0);
        m.int(format!("{p}.full_waits"), s.full_waits);
        m.float(format!("{p}.full_ns"), s.full_ps as f64 / 1000.0);
        m.int(format!("{p}.set_waits"), s.set_waits);
        m.float(format!("{p}.set_ns"), s.set_ps as f64 / 1000.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// One SM at 1 GHz (1 cycle = 1000 ps), `room` buffer entries, 5-cycle transit.
    fn path(room: u32) -> VmemPath {
        let mut g = Config::default().gpu;
        g.sms = 1;
        g.core_mhz = 1000.0;
        g.vmem.backpressure = true;
        g.vmem.buffer_entries = room;
        g.vmem.transit_cycles = 5;
        VmemPath::new(&g).unwrap()
    }

    #[test]
    fn off_by_default() {
        assert!(VmemPath::new(&Config::default().gpu).is_none());
    }

    #[test]
    fn answers_flow_freely_while_there_is_room() {
        let mut p = path(2);
        assert_eq!(p.lookup_at(0, 0), 0);
        // Ready at 1000, at the directory 5 cycles later; taken at once.
        assert_eq!(p.send(0, 0, 1000, true), 6000);
        p.take(0, 6000, 6000);
        assert_eq!(p.send(0, 1000, 2000, true), 7000);
        p.take(0, 7000, 7000);
        // Two answers in the chain, both taken by 7000: the third is ready at 8000, after both.
        assert_eq!(p.send(0, 7000, 8000, true), 13_000);
        assert_eq!(p.stats.full_waits, 0);
        assert_eq!(p.lookup_at(0, 7000), 7000);
    }

    #[test]
    fn a_hit_without_room_holds_later_lookups_a_miss_does_not() {
        let mut p = path(2);
        // The directory holds the first two answers until 50 and 60 cycles (their sets were full).
        let a = p.send(0, 0, 1000, true);
        p.take(0, a, 50_000);
        let b = p.send(0, 0, 1000, true);
        assert_eq!(b, 50_000, "reached the directory at 6, behind the held read");
        p.take(0, b, 60_000);
        assert_eq!(p.stats.set_waits, 2);
        assert_eq!(p.stats.set_ps, (50_000 - 6000) + (60_000 - 50_000));
        // A miss answered at 20 cycles waits for the earliest answer to leave (50), holds no lookup;
        // it reaches the directory at 55, after the held read (reached at 50, taken at 60).
        assert_eq!(p.send(0, 2000, 20_000, false), 60_000);
        assert_eq!(p.lookup_at(0, 3000), 3000);
        p.take(0, 60_000, 60_000);
        // A hit looked up at 4 cycles, ready at 5: room only at 60, when the second answer left.
        assert_eq!(p.send(0, 4000, 5000, true), 65_000);
        assert_eq!(p.stats.full_waits, 2);
        assert_eq!(p.stats.full_ps, (50_000 - 20_000) + (60_000 - 5000));
        // The TLB retried it every cycle and sent it at 60: later lookups come from 59 on (60 - the 1-cycle answer).
        assert_eq!(p.lookup_at(0, 10_000), 59_000);
        assert_eq!(p.stats.held_lookups, 1);
        assert_eq!(p.stats.held_ps, 49_000);
        assert_eq!(p.lookup_at(0, 70_000), 70_000);
    }

    #[test]
    fn an_answer_that_reaches_the_directory_before_a_held_read_is_not_held() {
        let mut p = path(8);
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
}
