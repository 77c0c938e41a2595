//! A sorted multiset of times with rank queries (how many are ≤ t), cheap to insert into
//! anywhere: sorted chunks (one is split in half beyond 2 × `CHUNK` values), so an insertion moves at most a chunk
//! (a plain sorted vector moved every later value, and walkers insert walks requested now
//! before thousands booked ahead).

use crate::sim::Ps;

const CHUNK: usize = 256;

#[derive(Debug, Clone, Default)]
pub struct Ranked {
    /// Non-empty, each sorted, every value of a chunk ≤ every value of the next.
    chunks: Vec<Vec<Ps>>,
    len: usize,
}

impl Ranked {
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The chunk a value `x` goes into: the first whose last value is > x (ties after equal values), else the last.
    fn chunk_of(&self, x: Ps) -> usize {
        self.chunks.partition_point(|c| *c.last().expect("non-empty") <= x).min(self.chunks.len().saturating_sub(1))
    }

    pub fn insert(&mut self, x: Ps) {
        self.len += 1;
        if self.chunks.is_empty() {
            self.chunks.push(vec![x]);
            return;
        }
        let i = self.chunk_of(x);
        let c = &mut self.chunks[i];
        let at = c.partition_point(|&v| v <= x);
        c.insert(at, x);
        if c.len() > 2 * CHUNK {
            let tail = c.split_off(CHUNK);
            self.chunks.insert(i + 1, tail);
        }
    }

    /// Values ≤ `t`.
    pub fn rank(&self, t: Ps) -> usize {
        let full = self.chunks.partition_point(|c| *c.last().expect("non-empty") <= t);
        let before: usize = self.chunks[..full].iter().map(Vec::len).sum();
        before + self.chunks.get(full).map_or(0, |c| c.partition_point(|&v| v <= t))
    }

    /// The first value > `t`.
    pub fn first_after(&self, t: Ps) -> Option<Ps> {
        let i = self.chunks.partition_point(|c| *c.last().expect("non-empty") <= t);
        self.chunks.get(i).map(|c| c[c.partition_point(|&v| v <= t)])
    }

    /// Drop the `k` smallest values.
    pub fn pop_front(&mut self, mut k: usize) {
        k = k.min(self.len);
        self.len -= k;
        let whole = self.chunks.iter().take_while(|c| {
            let take = c.len() <= k;
            if take {
                k -= c.len();
            }
            take
        });
        let n = whole.count();
        self.chunks.drain(..n);
        if k > 0 {
            self.chunks[0].drain(..k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a sorted vector: ranks, first values after, and front removals agree.
        #[test]
        fn matches_a_sorted_vector(ops in proptest::collection::vec((0u64..2_000, 0u8..10), 1..3_000)) {
            let mut r = Ranked::default();
            let mut v: Vec<Ps> = vec![];
            for (x, op) in ops {
                match op {
                    0 => {
                        let k = (x as usize) % 40;
                        r.pop_front(k);
                        v.drain(..k.min(v.len()));
                    }
                    1 => {
                        prop_assert_eq!(r.rank(x), v.partition_point(|&y| y <= x));
                        prop_assert_eq!(r.first_after(x), v.iter().copied().find(|&y| y > x));
                    }
                    _ => {
                        r.insert(x);
                        let at = v.partition_point(|&y| y <= x);
                        v.insert(at, x);
                    }
                }
                prop_assert_eq!(r.len(), v.len());
            }
        }
    }
}
