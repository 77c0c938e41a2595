//! A bounded set of in-flight operations (MSHRs, walker queue slots): a new
//! one is admitted at once while a slot is free, else when the earliest
//! in-flight one completes.

use crate::sim::Ps;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Slots reserved up front; a larger set grows on demand.
const PREALLOCATE: usize = 1024;

#[derive(Debug, Clone)]
pub struct Outstanding {
    cap: usize,
    /// Completion times, earliest on top.
    ends: BinaryHeap<Reverse<Ps>>,
    /// Admissions that had to wait for a free slot.
    pub full_waits: u64,
}

impl Outstanding {
    pub fn new(cap: usize) -> Outstanding {
        // The heap grows as operations are in flight: reserving the whole capacity up front would let a large
        // configured count (MSHRs, a walker queue) allocate gigabytes before the run starts.
        Outstanding { cap: cap.max(1), ends: BinaryHeap::with_capacity(cap.clamp(1, PREALLOCATE) + 1), full_waits: 0 }
    }

    fn retire_until(&mut self, t: Ps) {
        while self.ends.peek().is_some_and(|&Reverse(e)| e <= t) {
            self.ends.pop();
        }
    }

    /// When an operation arriving at `t` gets a slot.
    #[inline]
    pub fn admit(&mut self, t: Ps) -> Ps {
        self.retire_until(t);
        if self.ends.len() < self.cap {
            return t;
        }
        self.full_waits += 1;
        let Reverse(first) = self.ends.pop().expect("full means non-empty");
        self.retire_until(first);
        first
    }

    /// Record an admitted operation that completes at `end`.
    #[inline]
    pub fn push(&mut self, end: Ps) {
        self.ends.push(Reverse(end));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn waits_for_the_earliest_completion_when_full() {
        let mut o = Outstanding::new(2);
        assert_eq!(o.admit(0), 0);
        o.push(100);
        assert_eq!(o.admit(0), 0);
        o.push(50);
        assert_eq!(o.admit(10), 50);
        o.push(200);
        assert_eq!(o.full_waits, 1);
        assert_eq!(o.admit(120), 120);
    }

    #[test]
    fn a_huge_capacity_reserves_little_and_still_admits_at_once() {
        let mut o = Outstanding::new(u32::MAX as usize);
        assert!(o.ends.capacity() <= 2 * (PREALLOCATE + 1), "{}", o.ends.capacity());
        for i in 0..5000 {
            assert_eq!(o.admit(i), i);
            o.push(1_000_000);
        }
        assert_eq!((o.ends.len(), o.full_waits), (5000, 0));
    }
}
