//! Deterministic event queue: a binary heap on (time, insertion sequence).

use super::Ps;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    t: Ps,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.t == o.t && self.seq == o.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest (then first inserted).
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.cmp(&self.t).then_with(|| o.seq.cmp(&self.seq))
    }
}

/// Events ordered by time; events at the same time come out in insertion order.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue { heap: BinaryHeap::with_capacity(1024), seq: 0 }
    }
    pub fn push(&mut self, t: Ps, ev: E) {
        self.seq += 1;
        self.heap.push(Entry { t, seq: self.seq, ev });
    }
    pub fn pop(&mut self) -> Option<(Ps, E)> {
        self.heap.pop().map(|e| (e.t, e.ev))
    }
    /// Time of the earliest pending event (`Ps::MAX` when empty).
    #[inline]
    pub fn peek_time(&self) -> Ps {
        self.heap.peek().map_or(Ps::MAX, |e| e.t)
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Pops come out sorted by time, and by insertion order within a time.
        #[test]
        fn pops_are_time_then_insertion_ordered(times in proptest::collection::vec(0u64..20, 0..200)) {
            let mut q = EventQueue::new();
            for (i, &t) in times.iter().enumerate() { q.push(t, i); }
            let mut expect: Vec<(u64, usize)> = times.iter().copied().zip(0..).collect();
            expect.sort(); // stable on (time, index)
            let mut got = vec![];
            while let Some(x) = q.pop() { got.push(x); }
            prop_assert_eq!(got, expect);
        }
    }
}
