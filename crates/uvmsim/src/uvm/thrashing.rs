//! Thrashing detection and mitigation (spec/uvm-driver.md "Thrashing",
//! `uvm_perf_thrashing.c`): pages that the host and the GPU take from each
//! other are throttled, then pinned on the host and mapped remotely by the
//! GPU for a while, then unpinned.
//!
//! How it works (the driver's phases, simplified where said):
//!
//! - **Events.** Every fault-driven migration of a page (GPU fault: host to
//!   GPU; host access: GPU to host) is an event for its destination processor.
//!   Evictions are not (the driver skips them). Per-page state is only kept
//!   for a VA block once two consecutive events on the block, within the
//!   lapse, went to different processors (the driver's block phase), so a
//!   single-GPU run without host accesses never tracks a page.
//! - **Detection.** An event within `lapse_us` of the page's previous one
//!   counts; at `threshold` counted events the page thrashes. An event after a
//!   longer quiet time resets a thrashing page that is not pinned.
//! - **Throttle.** A processor faulting on a thrashing page is throttled for
//!   `nap` lapses: the GPU's fault is not serviced (its warps fault again
//!   after the replay, and are refused until the nap ends); the host sleeps
//!   until then. When its nap is over, the throttled processor is the
//!   do-not-throttle processor: its next fault is serviced (the page
//!   migrates), so the two processors take turns, one nap each.
//!   SIMPLIFICATION: the lapse is measured from the page's last event or the
//!   end of its last throttle, whichever is later (the driver compares with
//!   the last migration only, so in a strictly alternating ping-pong whether
//!   its throttled processor comes back inside the lapse is a race of a few
//!   µs; here it always does).
//! - **Pin.** After `pin_threshold` throttles the next fault pins the page on
//!   the host (the location both processors can access, as the driver picks
//!   for a CPU and a PCIe GPU): a GPU-resident page migrates back, and the GPU
//!   maps it remotely (zero-copy, [`super::remote`]) instead of faulting it
//!   in. Thrashing pages are never prefetched.
//! - **Unpin.** `pin` lapses later the page is unpinned: the GPU's remote
//!   mapping is dropped (its TLB entries shot down) and the page's state is
//!   reset, so the next GPU access faults and migrates it again.

use crate::sim::Ps;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

section! {
    /// Thrashing detection and mitigation (uvm_perf_thrashing.c; spec/uvm-driver.md "Thrashing"): a page migrated back and
    /// forth between the host and the GPU is throttled, then pinned on the host and mapped remotely by the GPU, then unpinned.
    pub struct ThrashingConfig {
        /// Detect and mitigate thrashing (uvm_perf_thrashing_enable, default 1).
        pub enable: bool = true,
        /// Events within the lapse after which a page thrashes (uvm_perf_thrashing_threshold, default 3; 1-7).
        pub threshold: u32 = 3,
        /// Throttles of a page after which it is pinned (uvm_perf_thrashing_pin_threshold, default 10; 1-255).
        pub pin_threshold: u32 = 10,
        /// Most time between two events on a page for them to count as thrashing, in µs (uvm_perf_thrashing_lapse_usec, default 500; the driver adapts it, which is not modelled).
        pub lapse_us: f64 = 500.0,
        /// How long a throttled processor is kept off the page, in lapses (uvm_perf_thrashing_nap, default 1; 1-100).
        pub nap: u32 = 1,
        /// How long a page stays pinned, in lapses (uvm_perf_thrashing_pin, default 300 = 150 ms).
        pub pin: u32 = 300,
    }
}

impl ThrashingConfig {
    pub fn validate(&self) -> Result<(), (String, String)> {
        let k = |n: &str| format!("uvm.thrashing.{n}");
        if !(1..=7).contains(&self.threshold) {
            return Err((k("threshold"), format!("must be between 1 and 7, got {}", self.threshold)));
        }
        if !(1..=255).contains(&self.pin_threshold) {
            return Err((k("pin_threshold"), format!("must be between 1 and 255, got {}", self.pin_threshold)));
        }
        if !(self.lapse_us.is_finite() && (1.0..=1e6).contains(&self.lapse_us)) {
            return Err((k("lapse_us"), format!("must be between 1 and 1000000 µs, got {}", self.lapse_us)));
        }
        if !(1..=100).contains(&self.nap) {
            return Err((k("nap"), format!("must be between 1 and 100 lapses, got {}", self.nap)));
        }
        if !(1..=100_000).contains(&self.pin) {
            return Err((k("pin"), format!("must be between 1 and 100000 lapses, got {}", self.pin)));
        }
        Ok(())
    }
}

/// A processor that accesses managed memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proc {
    Host = 0,
    Gpu = 1,
}

/// What the thrashing module tells the fault handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// Service the fault as usual.
    None,
    /// Do not service it before this time.
    Throttle(Ps),
    /// The page is pinned on the host: map it remotely (GPU) or use it in place (host).
    Pin,
}

#[derive(Debug, Clone, Copy, Default)]
struct Page {
    /// Time of the last event, or the end of the last throttle if later (None: no event yet).
    hot: Option<Ps>,
    events: u32,
    throttles: u32,
    /// Until when each processor is throttled (0: not throttled).
    throttled: [Ps; 2],
    pinned_until: Option<Ps>,
}

#[derive(Debug, Default, Clone)]
pub struct ThrashingStats {
    /// Pages found thrashing.
    pub detected: u64,
    /// Throttles (a processor kept off a page for a nap), by processor.
    pub throttles: [u64; 2],
    /// GPU faults refused because their processor was throttled.
    pub throttled_faults: u64,
    pub pins: u64,
    pub unpins: u64,
    /// Migration events counted (within the lapse of the page's previous one).
    pub events: u64,
}

pub struct Thrashing {
    enable: bool,
    threshold: u32,
    pin_threshold: u32,
    lapse: Ps,
    nap: Ps,
    pin: Ps,
    /// Per VA block: the last event's time and destination.
    blocks: FxHashMap<u64, (Ps, Proc)>,
    /// Per-page state of the blocks where two processors alternate.
    pages: FxHashMap<u64, Page>,
    /// Pinned pages with their unpin deadline, in deadline order.
    pins: VecDeque<(Ps, u64)>,
    pub stats: ThrashingStats,
}

impl Thrashing {
    pub fn new(c: &ThrashingConfig) -> Thrashing {
        let lapse = crate::sim::ns_to_ps(c.lapse_us * 1000.0);
        Thrashing {
            enable: c.enable,
            threshold: c.threshold,
            pin_threshold: c.pin_threshold,
            lapse,
            nap: lapse * c.nap as Ps,
            pin: lapse * c.pin as Ps,
            blocks: FxHashMap::default(),
            pages: FxHashMap::default(),
            pins: VecDeque::new(),
            stats: ThrashingStats::default(),
        }
    }

    /// Fault-driven migrations of `pages` (all in VA block `block`) to `dst` at `t`.
    pub fn migrated(&mut self, block: u64, pages: &[u64], dst: Proc, t: Ps) {
        if !self.enable || pages.is_empty() {
            return;
        }
        let prev = self.blocks.insert(block, (t, dst));
        let alternating = prev.is_some_and(|(last, p)| p != dst && t.saturating_sub(last) <= self.lapse);
        for &p in pages {
            let st = match self.pages.get_mut(&p) {
                Some(st) => st,
                None if alternating => self.pages.entry(p).or_default(),
                None => continue,
            };
            if st.pinned_until.is_some() {
                continue;
            }
            match st.hot {
                Some(h) if t.saturating_sub(h) <= self.lapse => {
                    st.events += 1;
                    self.stats.events += 1;
                    if st.events == self.threshold {
                        self.stats.detected += 1;
                    }
                }
                // A quiet time longer than the lapse: no longer thrashing.
                Some(_) => *st = Page::default(),
                None => {}
            }
            st.hot = Some(st.hot.unwrap_or(0).max(t));
        }
    }

    /// Is any page tracked (else no hint can be other than None)?
    #[inline]
    pub fn tracking(&self) -> bool {
        !self.pages.is_empty()
    }

    /// Is `vpn` thrashing (never prefetched)?
    #[inline]
    pub fn is_thrashing(&self, vpn: u64) -> bool {
        !self.pages.is_empty() && self.pages.get(&vpn).is_some_and(|st| st.events >= self.threshold || st.pinned_until.is_some())
    }

    /// Is `vpn` pinned on the host?
    pub fn is_pinned(&self, vpn: u64) -> bool {
        self.pages.get(&vpn).is_some_and(|st| st.pinned_until.is_some())
    }

    /// `proc` faults on `vpn` at `t`, and the fault would migrate the page: what to do.
    pub fn hint(&mut self, vpn: u64, proc: Proc, t: Ps) -> Hint {
        if !self.enable || self.pages.is_empty() {
            return Hint::None;
        }
        let Some(st) = self.pages.get_mut(&vpn) else { return Hint::None };
        if st.pinned_until.is_some() {
            return Hint::Pin;
        }
        if st.events < self.threshold {
            return Hint::None;
        }
        let me = proc as usize;
        if st.throttled[me] != 0 {
            let until = st.throttled[me];
            if t < until {
                if proc == Proc::Gpu {
                    self.stats.throttled_faults += 1;
                }
                return Hint::Throttle(until);
            }
            // Its nap is over: it is the do-not-throttle processor, serviced now.
            st.throttled[me] = 0;
            st.hot = Some(st.hot.unwrap_or(0).max(until));
            return Hint::None;
        }
        if st.hot.is_some_and(|h| t.saturating_sub(h) > self.lapse) {
            return Hint::None; // quiet for longer than the lapse: no longer thrashing
        }
        if st.throttles >= self.pin_threshold {
            st.pinned_until = Some(t + self.pin);
            st.throttled = [0; 2];
            self.pins.push_back((t + self.pin, vpn));
            self.stats.pins += 1;
            return Hint::Pin;
        }
        st.throttles += 1;
        st.throttled[me] = t + self.nap;
        self.stats.throttles[me] += 1;
        if proc == Proc::Gpu {
            self.stats.throttled_faults += 1;
        }
        Hint::Throttle(t + self.nap)
    }

    /// The earliest unpin deadline, if a page is pinned.
    pub fn next_unpin(&self) -> Option<Ps> {
        self.pins.front().map(|&(t, _)| t)
    }

    /// Unpin every page whose deadline is at or before `now`; returns them.
    pub fn unpin_due(&mut self, now: Ps) -> Vec<u64> {
        let mut out = vec![];
        while let Some(&(t, p)) = self.pins.front() {
            if t > now {
                break;
            }
            self.pins.pop_front();
            if let Some(st) = self.pages.get_mut(&p) {
                if st.pinned_until == Some(t) {
                    *st = Page::default();
                    self.stats.unpins += 1;
                    out.push(p);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Ps = 1_000_000;

    fn t() -> Thrashing {
        Thrashing::new(&ThrashingConfig::default())
    }

    #[test]
    fn one_processor_never_thrashes() {
        let mut th = t();
        for i in 0..20 {
            th.migrated(0, &[5], Proc::Gpu, i * 10 * US);
        }
        assert!(!th.is_thrashing(5));
        assert_eq!(th.hint(5, Proc::Gpu, 300 * US), Hint::None);
        assert!(th.pages.is_empty(), "no per-page state without a second processor");
    }

    #[test]
    fn three_alternating_events_within_the_lapse_make_a_page_thrash() {
        let mut th = t();
        th.migrated(0, &[5], Proc::Gpu, 0); // first touch: block state only
        th.migrated(0, &[5], Proc::Host, 100 * US); // the page's first tracked event
        th.migrated(0, &[5], Proc::Gpu, 200 * US);
        th.migrated(0, &[5], Proc::Host, 300 * US);
        assert!(!th.is_thrashing(5), "two counted events");
        th.migrated(0, &[5], Proc::Gpu, 400 * US);
        assert!(th.is_thrashing(5) && !th.is_thrashing(6));
        assert_eq!(th.stats.detected, 1);
        // Quiet for more than the lapse: the next event resets it.
        th.migrated(0, &[5], Proc::Host, 1000 * US);
        assert!(!th.is_thrashing(5));
    }

    #[test]
    fn throttle_turns_then_pin_then_unpin() {
        let mut th = t();
        for (i, p) in [Proc::Gpu, Proc::Host, Proc::Gpu, Proc::Host, Proc::Gpu].into_iter().enumerate() {
            th.migrated(0, &[5], p, i as Ps * 50 * US);
        }
        let mut now = 250 * US;
        let mut who = Proc::Host;
        for n in 1..=10 {
            // The other processor faults: throttled for one nap (500 µs), refused meanwhile.
            assert_eq!(th.hint(5, who, now), Hint::Throttle(now + 500 * US), "throttle {n}");
            assert_eq!(th.hint(5, who, now + 499 * US), Hint::Throttle(now + 500 * US));
            // After its nap it is serviced, and the page migrates to it.
            now += 510 * US;
            assert_eq!(th.hint(5, who, now), Hint::None);
            th.migrated(0, &[5], who, now + 20 * US);
            now += 40 * US;
            who = if who == Proc::Host { Proc::Gpu } else { Proc::Host };
        }
        assert_eq!(th.stats.throttles, [5, 5]);
        assert_eq!(th.hint(5, who, now), Hint::Pin, "pinned after 10 throttles");
        assert!(th.is_pinned(5) && th.is_thrashing(5));
        assert_eq!(th.hint(5, Proc::Gpu, now + 1000 * US), Hint::Pin);
        // 300 lapses = 150 ms later it is unpinned, and its history forgotten.
        assert_eq!(th.next_unpin(), Some(now + 150_000 * US));
        assert!(th.unpin_due(now + 149_999 * US).is_empty());
        assert_eq!(th.unpin_due(now + 150_000 * US), vec![5]);
        assert!(!th.is_pinned(5) && !th.is_thrashing(5));
        assert_eq!(th.hint(5, Proc::Gpu, now + 150_001 * US), Hint::None);
        assert_eq!((th.stats.pins, th.stats.unpins), (1, 1));
    }

    #[test]
    fn the_lapse_and_the_nap_end_inclusive() {
        let mut th = t();
        // Pages 5 and 6 of block 0, moved host <-> GPU exactly one lapse (500 µs) apart: each gap is
        // within the lapse (<=), so the block alternates and every event after the first tracked one counts.
        for (i, p) in [Proc::Gpu, Proc::Host, Proc::Gpu, Proc::Host, Proc::Gpu, Proc::Host].into_iter().enumerate() {
            th.migrated(0, &[5, 6], p, i as Ps * 500 * US);
        }
        // Tracked from the event at 500 µs; counted at 1000, 1500, 2000 and 2500 µs: 4 per page.
        assert!(th.is_thrashing(5) && th.is_thrashing(6));
        assert_eq!(th.stats.events, 8);
        // Each page is detected once, when it reaches the threshold (3), not again at its 4th event.
        assert_eq!(th.stats.detected, 2);
        // The GPU faults on page 5 exactly a lapse after the last event (2500 µs): still thrashing, throttled
        // for one nap (500 µs); on page 6 a picosecond later: quiet for longer than the lapse, serviced.
        assert_eq!(th.hint(5, Proc::Gpu, 3000 * US), Hint::Throttle(3500 * US));
        assert_eq!(th.hint(6, Proc::Gpu, 3000 * US + 1), Hint::None);
        // The nap ends at 3500 µs: a fault then is serviced (the do-not-throttle turn).
        assert_eq!(th.hint(5, Proc::Gpu, 3500 * US), Hint::None);
        assert_eq!((th.stats.throttles, th.stats.throttled_faults), ([0, 1], 1));
    }

    #[test]
    fn disabled_does_nothing() {
        let mut th = Thrashing::new(&ThrashingConfig { enable: false, ..ThrashingConfig::default() });
        for i in 0..10 {
            th.migrated(0, &[5], if i % 2 == 0 { Proc::Gpu } else { Proc::Host }, i * US);
        }
        assert!(!th.is_thrashing(5));
        assert_eq!(th.hint(5, Proc::Host, 20 * US), Hint::None);
    }
}
