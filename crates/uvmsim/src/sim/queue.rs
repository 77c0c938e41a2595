//! Deterministic event queue: a calendar queue on (time, insertion sequence).
//!
//! How it works: time is cut into buckets of `2^SHIFT` ps; a ring of `N`
//! buckets covers the near future from the bucket of the last popped event
//! (`cur`), and later events wait in an overflow heap until the ring reaches
//! them. A bucket is sorted (ascending) the first time it is read and then
//! read from a cursor; events pushed into a sorted bucket are inserted in
//! place, which for the usual push at the current time (the largest key so
//! far) is an append. Keys pack time and insertion sequence into one `u128`, so events at
//! the same time come out in insertion order. Pushes are O(1), pops O(1)
//! amortized for the near-future events a simulation mostly schedules.

use super::Ps;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const SHIFT: u32 = 12; // ~4 ns buckets
const N: usize = 1024; // ~4 µs of near future in the ring
const WORDS: usize = N / 64;
/// Entries of capacity a drained bucket keeps (8 KiB). A burst (a replay waking
/// thousands of warps at one time) grows its bucket; kept, that capacity stayed with the
/// bucket, and over a long run every bucket of the ring held the largest burst it had
/// seen: 100 MiB on a 4-GPU PageRank whose replays woke 16,384 warps at once.
const KEEP: usize = 256;

#[derive(Clone, Copy)]
struct Entry<E> {
    /// time << 64 | insertion sequence.
    key: u128,
    ev: E,
}

/// Events ordered by time; events at the same time come out in insertion order.
pub struct EventQueue<E> {
    ring: Vec<Vec<Entry<E>>>,
    sorted: Vec<bool>,
    /// Per bucket, the next entry to pop (entries before it are consumed): 0 unless sorted.
    read: Vec<usize>,
    /// One bit per ring bucket: non-empty.
    bits: [u64; WORDS],
    /// Absolute bucket index that the ring starts at; no event is earlier.
    cur: u64,
    in_ring: usize,
    /// Absolute bucket holding the earliest ring event, sorted, while known.
    head: Option<u64>,
    overflow: BinaryHeap<Reverse<OverflowEntry<E>>>,
    seq: u64,
}

struct OverflowEntry<E>(Entry<E>);

impl<E> PartialEq for OverflowEntry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.0.key == o.0.key
    }
}
impl<E> Eq for OverflowEntry<E> {}
impl<E> PartialOrd for OverflowEntry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for OverflowEntry<E> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.key.cmp(&o.0.key)
    }
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn bucket_of(key: u128) -> u64 {
    ((key >> 64) as u64) >> SHIFT
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            ring: (0..N).map(|_| Vec::new()).collect(),
            sorted: vec![false; N],
            read: vec![0; N],
            bits: [0; WORDS],
            cur: 0,
            in_ring: 0,
            head: None,
            overflow: BinaryHeap::new(),
            seq: 0,
        }
    }

    fn put_in_ring(&mut self, e: Entry<E>) {
        let i = (bucket_of(e.key) as usize) & (N - 1);
        let b = &mut self.ring[i];
        if self.sorted[i] && !b.is_empty() {
            // Ascending order: insert after the last smaller key (at the end for an event
            // at the current time; a descending bucket shifted every entry for it, and a
            // replay waking thousands of warps at once made that quadratic).
            let r = self.read[i];
            let at = r + b[r..].partition_point(|x| x.key < e.key);
            b.insert(at, e);
        } else {
            b.push(e);
        }
        self.bits[i / 64] |= 1 << (i % 64);
        self.in_ring += 1;
    }

    pub fn push(&mut self, t: Ps, ev: E) {
        self.seq += 1;
        let e = Entry { key: (t as u128) << 64 | self.seq as u128, ev };
        let b = bucket_of(e.key);
        debug_assert!(b >= self.cur, "event scheduled in the past");
        if b < self.cur + N as u64 {
            if self.head.is_some_and(|h| b < h) {
                self.head = None;
            }
            self.put_in_ring(e);
        } else {
            self.overflow.push(Reverse(OverflowEntry(e)));
        }
    }

    /// Ring index of the first non-empty bucket at or after `cur`.
    fn first_nonempty(&self) -> Option<usize> {
        if self.in_ring == 0 {
            return None;
        }
        let start = (self.cur as usize) & (N - 1);
        let (w0, b0) = (start / 64, start % 64);
        let first = self.bits[w0] & (!0u64 << b0);
        if first != 0 {
            return Some(w0 * 64 + first.trailing_zeros() as usize);
        }
        for k in 1..=WORDS {
            let w = (w0 + k) % WORDS;
            let word = if k == WORDS { self.bits[w] & !(!0u64 << b0) } else { self.bits[w] };
            if word != 0 {
                return Some(w * 64 + word.trailing_zeros() as usize);
            }
        }
        None
    }

    /// The ring bucket holding the earliest ring event, sorted so that it sits at its cursor.
    #[inline]
    fn settle(&mut self) -> Option<usize> {
        if let Some(h) = self.head {
            return Some((h as usize) & (N - 1));
        }
        let i = self.first_nonempty()?;
        // Ring indices from `cur` map to absolute buckets cur.. in order.
        let start = (self.cur as usize) & (N - 1);
        self.head = Some(self.cur + ((i + N - start) & (N - 1)) as u64);
        if !self.sorted[i] {
            self.ring[i].sort_unstable_by_key(|e| e.key);
            self.sorted[i] = true;
        }
        Some(i)
    }

    /// Move the ring's start to absolute bucket `to`, pulling overflow events into the new window.
    fn advance(&mut self, to: u64) {
        if to <= self.cur {
            return;
        }
        self.cur = to;
        while let Some(Reverse(OverflowEntry(e))) = self.overflow.peek() {
            if bucket_of(e.key) >= self.cur + N as u64 {
                break;
            }
            let Reverse(OverflowEntry(e)) = self.overflow.pop().expect("peeked");
            self.put_in_ring(e);
        }
    }

    pub fn pop(&mut self) -> Option<(Ps, E)> {
        // Overflow events are all later than ring events, so the ring goes first.
        let e = match self.settle() {
            Some(i) => {
                let b = &mut self.ring[i];
                let e = b[self.read[i]];
                self.read[i] += 1;
                self.in_ring -= 1;
                if self.read[i] == b.len() {
                    b.clear();
                    if b.capacity() > KEEP {
                        b.shrink_to(KEEP);
                    }
                    self.read[i] = 0;
                    self.bits[i / 64] &= !(1 << (i % 64));
                    self.sorted[i] = false;
                    self.head = None;
                }
                e
            }
            None => self.overflow.pop()?.0 .0,
        };
        self.advance(bucket_of(e.key));
        Some(((e.key >> 64) as Ps, e.ev))
    }

    /// Time of the earliest pending event (`Ps::MAX` when empty).
    #[inline]
    pub fn peek_time(&mut self) -> Ps {
        match self.settle() {
            Some(i) => (self.ring[i][self.read[i]].key >> 64) as Ps,
            None => self.overflow.peek().map_or(Ps::MAX, |Reverse(OverflowEntry(e))| (e.key >> 64) as Ps),
        }
    }

    /// The earliest pending event, left in the queue (to prefetch the state it will touch).
    #[inline]
    pub fn peek(&mut self) -> Option<&E> {
        match self.settle() {
            Some(i) => self.ring[i].get(self.read[i]).map(|e| &e.ev),
            None => self.overflow.peek().map(|Reverse(OverflowEntry(e))| &e.ev),
        }
    }

    pub fn len(&self) -> usize {
        self.in_ring + self.overflow.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Pops come out sorted by time, and by insertion order within a time,
        /// also when pushes and pops interleave.
        #[test]
        fn pops_are_time_then_insertion_ordered(ops in proptest::collection::vec((0u64..20, any::<bool>(), 0u32..4), 0..300)) {
            let mut q = EventQueue::new();
            let mut reference: Vec<(u64, usize)> = vec![];
            let mut now = 0u64;
            for (i, &(dt, pop, scale)) in ops.iter().enumerate() {
                // Times from the same picosecond up to far beyond the ring (overflow).
                let t = now + dt * [1, 1_000, 1_000_000, 1_000_000_000][scale as usize];
                if i % 7 == 3 {
                    prop_assert_eq!(q.peek_time(), reference.iter().min().map_or(u64::MAX, |r| r.0));
                }
                if pop {
                    reference.sort();
                    let want = if reference.is_empty() { None } else { Some(reference.remove(0)) };
                    if let Some((t, _)) = want { now = t; }
                    prop_assert_eq!(q.pop(), want);
                } else {
                    q.push(t, i);
                    reference.push((t, i));
                }
                prop_assert_eq!(q.len(), reference.len());
            }
            reference.sort();
            let mut got = vec![];
            while let Some(x) = q.pop() { got.push(x); }
            prop_assert_eq!(got, reference);
        }
    }
}
