//! A bounded set of in-flight operations (MSHRs, walker queue slots). Each
//! operation holds a slot over its interval [admission, end). Requests reach
//! the set out of time order (a warp's lookups are timed ahead of the engine,
//! a retried walk at its batch's end), so the slots held at a time are counted
//! from the intervals, not from the order of the calls: a request at `t` is
//! admitted at `t` while fewer than the slots are held then, else at the first
//! release after `t` that leaves one free.
//!
//! Before 2026-11-30 the set kept only completion times and retired those up
//! to each request's time: a request earlier than the previous one found the
//! slots those retirements freed, and was charged for operations admitted
//! after it (on titan-v's stream, 25 K of 27.8 K full L1-TLB admissions came
//! out of order).

use crate::sim::Ps;

/// A chunk holds CHUNK..=2 CHUNK events (more splits it in two). Measured (instructions, bench quick
/// sizes): 16 saves 3-8% on the walk-bound rows but costs 9% on oversub-stream-driver, whose deep
/// backlogs make `locate` walk more chunks; 8 costs more everywhere.
const CHUNK: usize = 32;

/// Dropped chunks are removed from the front once they are at least this many and half of the list
/// (amortised constant time per chunk, without shifting the list at every drop).
const DROPPED_BEFORE_REMOVAL: usize = 16;

/// Event lists of dropped chunks kept for later splits (more would only hold memory).
const SPARE_LISTS: usize = 64;

/// An event's sort key: its time, then admissions (+1, even) before ends (−1, odd), so within
/// a time the running count falls to its value at that time and never below it.
#[inline]
fn key(t: Ps, end: bool) -> u64 {
    (t.min(u64::MAX >> 1) << 1) | end as u64
}

#[inline]
fn delta(k: u64) -> i64 {
    1 - 2 * (k & 1) as i64
}

/// One chunk of the time-ordered events.
#[derive(Debug, Clone)]
struct Chunk {
    /// Sorted keys.
    ev: Vec<u64>,
    /// The deltas' sum.
    sum: i64,
    /// The least running sum over the chunk's events (from 0 before its first), when not `stale`
    /// (recomputed only when a full set's search passes the chunk).
    min: i64,
    stale: bool,
}

impl Chunk {
    fn new(ev: Vec<u64>) -> Chunk {
        let sum = ev.iter().map(|&k| delta(k)).sum();
        Chunk { ev, sum, min: 0, stale: true }
    }

    fn min(&mut self) -> i64 {
        if self.stale {
            let mut run = 0i64;
            self.min = i64::MAX;
            for &k in &self.ev {
                run += delta(k);
                self.min = self.min.min(run);
            }
            self.stale = false;
        }
        self.min
    }
}

#[derive(Debug, Clone)]
pub struct Outstanding {
    cap: i64,
    /// The intervals' admissions and ends as time-ordered events in chunks (every event of a
    /// chunk at or before every event of the next): the slots held at `t` are the deltas'
    /// sum up to `t`. Chunks over before the engine's time are dropped: those before `head`
    /// are gone (removed in bulk, so that dropping one is not a shift of the rest, and a plain
    /// slice is searched rather than a ring's two).
    chunks: Vec<Chunk>,
    /// Each chunk's last key (searched without touching the chunks); the same indices.
    lasts: Vec<u64>,
    /// The first chunk not dropped.
    head: usize,
    /// Event lists of dropped chunks, reused by splits.
    spare: Vec<Vec<u64>>,
    /// The deltas' sum over every event, dropped ones included.
    total: i64,
    /// Ends in the chunks: no more slots are held at any time from the floor on.
    ends: usize,
    /// Admission of the request let in by [`Self::admit_pending`] whose end [`Self::push`] has
    /// not given yet.
    pending: Option<Ps>,
    /// Times known to hold every slot: [lo, hi) (empty when lo == hi). Insertions only add
    /// slots held, so a stretch found full stays full, and a later request inside it resumes
    /// the search at `hi` instead of walking the backlog again (walk bursts queue deep).
    full: (Ps, Ps),
    /// Admissions that had to wait for a free slot.
    pub full_waits: u64,
}

impl Outstanding {
    pub fn new(cap: usize) -> Outstanding {
        // Nothing is reserved up front: a large configured count (MSHRs, a walker queue) must not
        // allocate before the run starts.
        let cap = cap.clamp(1, i64::MAX as usize) as i64;
        Outstanding {
            cap,
            chunks: Vec::new(),
            lasts: Vec::new(),
            head: 0,
            spare: Vec::new(),
            total: 0,
            ends: 0,
            pending: None,
            full: (0, 0),
            full_waits: 0,
        }
    }

    /// The first event after `t` (after every event at `t`) as (chunk, index in it; the chunk
    /// count and 0 if none), and the slots held at `t`: the total less what follows, counted
    /// from the back (requests come mostly near the latest times, so this is short).
    #[inline]
    fn locate(&self, t: Ps) -> (usize, usize, i64) {
        let k = key(t, true);
        let chunks = &self.chunks[self.head..];
        let mut after = 0i64;
        let mut c = chunks.len();
        while c > 0 && chunks[c - 1].ev.first().is_some_and(|&f| f > k) && c + 4 > chunks.len() {
            c -= 1;
            after += chunks[c].sum;
        }
        if c > 0 && chunks[c - 1].ev.first().is_some_and(|&f| f > k) {
            // Far behind the latest bookings (32 GPUs' invalidation walks booked ~0.8 ms ahead put
            // hundreds of chunks after a demand walk's time): reading each chunk's first event is a
            // cache miss per chunk, so bisect the chunks' last keys instead, as `insert` does. The
            // chunks after the first one whose last key is beyond `k` lie wholly after it (the
            // events are in order); that chunk may too.
            let j = self.lasts[self.head..self.head + c].partition_point(|&l| l <= k);
            after += chunks[j + 1..c].iter().map(|ch| ch.sum).sum::<i64>();
            c = j + 1;
            if chunks[j].ev.first().is_some_and(|&f| f > k) {
                c = j;
                after += chunks[j].sum;
            }
        }
        let Some(ch) = c.checked_sub(1).map(|p| &chunks[p]) else {
            return (0, 0, self.total - after);
        };
        // The last eight events from the back (most requests land there), then a binary search: a
        // walk burst's requests land deep inside a chunk, where the event-by-event scan was a tenth
        // of gather-walks' run.
        let mut i = ch.ev.len();
        while i > 0 && ch.ev[i - 1] > k && i + 8 > ch.ev.len() {
            i -= 1;
            after += delta(ch.ev[i]);
        }
        if i > 0 && ch.ev[i - 1] > k {
            let j = ch.ev.partition_point(|&e| e <= k);
            // The deltas of ev[j..i]: +1 per admission, -1 per end (odd key); summed without branches.
            let ends: i64 = ch.ev[j..i].iter().map(|&e| (e & 1) as i64).sum();
            after += (i - j) as i64 - 2 * ends;
            i = j;
        }
        if i == ch.ev.len() {
            (c, 0, self.total - after)
        } else {
            (c - 1, i, self.total - after)
        }
    }

    /// Slots held at `t`.
    #[inline]
    pub fn held_at(&self, t: Ps) -> usize {
        self.locate(t).2.max(0) as usize
    }

    /// When an operation arriving at `t` gets a slot: at `t` while fewer than the slots are held
    /// then, else the first later time at which fewer are (a release). No later request
    /// arrives before `floor` (the engine's time, or `t` if earlier), so what ends by then is
    /// forgotten.
    #[inline]
    pub fn admit(&mut self, t: Ps, floor: Ps) -> Ps {
        // Chunks over by the floor are dropped, but the last (insertions need one).
        let kf = key(floor, true);
        while self.chunks.len() - self.head > 1 && self.lasts[self.head] <= kf {
            let ch = &mut self.chunks[self.head];
            self.ends -= ch.ev.iter().filter(|&&k| k & 1 == 1).count();
            let ev = std::mem::take(&mut ch.ev);
            if self.spare.len() < SPARE_LISTS {
                self.spare.push(ev);
            }
            self.head += 1;
        }
        if self.head >= DROPPED_BEFORE_REMOVAL && 2 * self.head >= self.chunks.len() {
            self.chunks.drain(..self.head);
            self.lasts.drain(..self.head);
            self.head = 0;
        }
        if self.ends < self.cap as usize {
            return t;
        }
        let (lo, hi) = self.full;
        // Inside a stretch known full, the search resumes at its end.
        let from = if lo <= t && t < hi { hi } else { t };
        let (c, i, run) = self.locate(from);
        let mut s = from;
        if run >= self.cap {
            s = self.first_below_cap(c, i, run).expect("slots held at t are released after t");
        }
        if s > t {
            self.full_waits += 1;
            // [t, s) is full; it joins the known stretch when they meet.
            self.full = if t <= hi && s >= lo { (t.min(lo), s.max(hi)) } else { (t, s) };
        }
        s
    }

    /// [`Self::admit`] for an operation whose end is not known yet: the next [`Self::push`]
    /// gives it (a TLB miss, filled after the walk). One at a time.
    #[inline]
    pub fn admit_pending(&mut self, t: Ps, floor: Ps) -> Ps {
        debug_assert!(self.pending.is_none(), "an admitted operation was given no end");
        let s = self.admit(t, floor);
        self.pending = Some(s);
        s
    }

    /// From event `i` of chunk `c` with the running count `run` before it: the time of the
    /// first event after which the count is below the capacity.
    fn first_below_cap(&mut self, c: usize, i: usize, mut run: i64) -> Option<Ps> {
        let cap = self.cap;
        for (n, ch) in self.chunks[self.head + c..].iter_mut().enumerate().map(|(j, ch)| (c + j, ch)) {
            let from = if n == c { i } else { 0 };
            if from == 0 && run + ch.min() >= cap {
                run += ch.sum;
                continue;
            }
            for &k in &ch.ev[from..] {
                run += delta(k);
                if run < cap {
                    return Some(k >> 1);
                }
            }
        }
        None
    }

    /// Record that the operation admitted by [`Self::admit_pending`] ends at `end`.
    #[inline]
    pub fn push(&mut self, end: Ps) {
        let admitted = self.pending.take();
        debug_assert!(admitted.is_some(), "an end without an admission");
        self.push_interval(admitted.unwrap_or(end), end);
    }

    /// As [`Self::push`] for an operation whose answer may come before its admission (a
    /// Least-TLB IOMMU miss answered by a remote L2 TLB, or by a walk already in flight, while
    /// it waited for an MSHR): it then held no slot, recorded as an empty interval at the
    /// admission.
    #[inline]
    pub fn push_answered(&mut self, end: Ps) {
        self.push(end.max(self.pending.unwrap_or(end)));
    }

    /// Record an operation holding a slot over [admitted, end).
    #[inline]
    pub fn push_interval(&mut self, admitted: Ps, end: Ps) {
        debug_assert!(admitted <= end, "an operation ends before its admission");
        self.insert(key(admitted, false));
        self.insert(key(end.max(admitted), true));
    }

    fn insert(&mut self, k: u64) {
        if self.chunks.len() == self.head {
            self.chunks.push(Chunk::new(vec![]));
            self.lasts.push(0);
        }
        // The first chunk whose last event sorts after this one, else the last chunk. Most
        // events come at or near the latest time: looked for from the back.
        let (h, n) = (self.head, self.chunks.len());
        let mut c = n - 1;
        while c > h && self.lasts[c - 1] > k && c + 4 > n {
            c -= 1;
        }
        if c > h && self.lasts[c - 1] > k {
            c = h + self.lasts[h..].partition_point(|&l| l <= k);
        }
        let ch = &mut self.chunks[c];
        let mut at = ch.ev.len();
        while at > 0 && ch.ev[at - 1] > k && at + 8 > ch.ev.len() {
            at -= 1;
        }
        if at > 0 && ch.ev[at - 1] > k {
            at = ch.ev.partition_point(|&e| e <= k);
        }
        ch.ev.insert(at, k);
        let d = delta(k);
        self.ends += (k & 1) as usize;
        ch.sum += d;
        ch.stale = true;
        self.total += d;
        if ch.ev.len() > 2 * CHUNK {
            let mut tail = self.spare.pop().unwrap_or_default();
            tail.clear();
            tail.extend_from_slice(&ch.ev[CHUNK..]);
            ch.ev.truncate(CHUNK);
            let next = Chunk::new(tail);
            ch.sum -= next.sum;
            self.lasts[c] = *ch.ev.last().expect("non-empty");
            self.lasts.insert(c + 1, *next.ev.last().expect("non-empty"));
            self.chunks.insert(c + 1, next);
        } else {
            self.lasts[c] = *ch.ev.last().expect("non-empty");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn waits_for_the_earliest_completion_when_full() {
        let mut o = Outstanding::new(2);
        assert_eq!(o.admit_pending(0, 0), 0);
        o.push(100);
        assert_eq!(o.admit_pending(0, 0), 0);
        o.push(50);
        assert_eq!(o.admit_pending(10, 10), 50);
        o.push(200);
        assert_eq!(o.full_waits, 1);
        assert_eq!(o.admit_pending(120, 120), 120);
    }

    #[test]
    fn an_earlier_request_sees_the_slots_held_at_its_own_time() {
        // Two slots. A at 1000 (to 1500) and B at 1000 (to 1400) are booked first; C, booked
        // next but arriving at 0, finds both free then (the old set had retired nothing before
        // 1000 and made C wait for B's end at 1400) and holds one to 1200.
        let mut o = Outstanding::new(2);
        for end in [1500, 1400] {
            assert_eq!(o.admit_pending(1000, 0), 1000);
            o.push(end);
        }
        assert_eq!(o.admit_pending(0, 0), 0);
        o.push(1200);
        assert_eq!(o.full_waits, 0);
        // At 1100 three are held (C, A, B): a request then waits past C's release at 1200
        // (two still held) to B's at 1400.
        assert_eq!(o.held_at(1100), 3);
        assert_eq!(o.admit_pending(1100, 0), 1400);
        o.push(1450);
        // D, arriving at 100 after C was booked: one slot is held (C's), so it goes at once.
        assert_eq!(o.admit_pending(100, 0), 100);
    }

    #[test]
    fn a_release_that_leaves_the_set_full_is_passed_over() {
        // One slot: A holds [0, 100); B, booked next, holds [100, 300) (admitted at A's release).
        // C arrives at 50: A's release at 100 finds B admitted then, so C waits for B's at 300.
        let mut o = Outstanding::new(1);
        assert_eq!(o.admit_pending(0, 0), 0);
        o.push(100);
        assert_eq!(o.admit_pending(100, 0), 100);
        o.push(300);
        assert_eq!(o.admit_pending(50, 0), 300);
    }

    #[test]
    fn a_huge_capacity_admits_at_once() {
        let mut o = Outstanding::new(u32::MAX as usize);
        for i in 0..5000 {
            assert_eq!(o.admit_pending(i, i), i);
            o.push(1_000_000);
        }
        assert_eq!(o.full_waits, 0);
        // Once they are over, the intervals are dropped (but the last chunk).
        assert_eq!(o.admit_pending(2_000_000, 2_000_000), 2_000_000);
        assert!(o.chunks[o.head..].iter().map(|c| c.ev.len()).sum::<usize>() <= 2 * CHUNK);
    }

    /// Reference: every interval kept; a request at `t` is admitted at the earliest `s` ≥ `t`
    /// (t or an interval's end) where fewer than `cap` intervals hold [a, e) ∋ s.
    fn reference(reqs: &[(Ps, Ps)], cap: usize) -> Vec<Ps> {
        let mut held: Vec<(Ps, Ps)> = vec![];
        let mut out = vec![];
        for &(t, d) in reqs {
            let count = |s: Ps| held.iter().filter(|&&(a, e)| a <= s && s < e).count();
            let mut cands: Vec<Ps> = held.iter().map(|&(_, e)| e).filter(|&e| e > t).collect();
            cands.push(t);
            cands.sort_unstable();
            let s = *cands.iter().find(|&&s| count(s) < cap).unwrap();
            held.push((s, s + d));
            out.push(s);
        }
        out
    }

    /// Requests (engine step, arrival ahead of the engine, duration) through a set of `cap`
    /// slots, pruned at the engine's time: the set, the admissions, and the (arrival, duration)
    /// pairs for [`reference`].
    fn drive(cap: usize, reqs: &[(Ps, Ps, Ps)]) -> (Outstanding, Vec<Ps>, Vec<(Ps, Ps)>) {
        let mut o = Outstanding::new(cap);
        let (mut now, mut got, mut asked) = (0, vec![], vec![]);
        for &(step, ahead, d) in reqs {
            now += step;
            let s = o.admit_pending(now + ahead, now);
            o.push(s + d);
            got.push(s);
            asked.push((now + ahead, d));
        }
        (o, got, asked)
    }

    proptest! {
        /// Requests in any order against the reference, with pruning at a floor that only grows
        /// and never passes a request (the engine's time).
        #[test]
        fn out_of_order_requests_match_the_reference(
            reqs in proptest::collection::vec((0u64..30, 0u64..400, 1u64..300), 1..120),
            cap in 1usize..6,
        ) {
            let (_, got, asked) = drive(cap, &reqs);
            prop_assert_eq!(got, reference(&asked, cap));
        }
    }

    #[test]
    fn dropped_chunks_are_removed_in_bulk_and_their_lists_reused() {
        // A long run whose engine time keeps up: chunks are dropped at the front, removed in bulk
        // (the head goes back to 0) and their lists reused, and the admissions still match the
        // reference.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let reqs: Vec<(Ps, Ps, Ps)> = (0..3000).map(|_| (rnd(40), rnd(600), 1 + rnd(120))).collect();
        let mut o = Outstanding::new(3);
        let (mut now, mut got, mut asked, mut compacted, mut reused) = (0, vec![], vec![], false, false);
        for &(step, ahead, d) in &reqs {
            now += step;
            let (head, spare) = (o.head, o.spare.len());
            let s = o.admit_pending(now + ahead, now);
            compacted |= o.head < head;
            o.push(s + d);
            reused |= o.spare.len() < spare;
            got.push(s);
            asked.push((now + ahead, d));
        }
        assert!(compacted && reused && o.full_waits > 0);
        assert_eq!(got, reference(&asked, 3));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Long backlogs (many chunks; the engine's time creeping): the known-full stretch and
        /// the searches from the back agree with the reference too.
        #[test]
        fn deep_backlogs_match_the_reference(
            reqs in proptest::collection::vec((0u64..3, 0u64..2000, 1u64..500), 200..320),
            cap in 1usize..4,
        ) {
            let (o, got, asked) = drive(cap, &reqs);
            prop_assert!(o.chunks.len() - o.head > 2);
            prop_assert_eq!(got, reference(&asked, cap));
        }

        /// A count far behind the latest bookings (more than four chunks after its time: the bisection
        /// over the chunks' last keys) equals the intervals held then, counted one by one.
        #[test]
        fn counts_far_behind_the_bookings_match_a_direct_count(
            reqs in proptest::collection::vec((0u64..2, 0u64..20_000, 1u64..400), 300..600),
            at in proptest::collection::vec(0u64..25_000, 1..40),
        ) {
            let (o, got, asked) = drive(1 << 20, &reqs);
            let floor: Ps = reqs.iter().map(|r| r.0).sum();
            prop_assert!(o.chunks.len() - o.head > 8);
            for t in at.into_iter().map(|t| t.max(floor)) {
                let direct = got.iter().zip(&asked).filter(|&(&s, &(_, d))| s <= t && t < s + d).count();
                prop_assert_eq!(o.held_at(t), direct, "at {}", t);
            }
        }
    }
}
