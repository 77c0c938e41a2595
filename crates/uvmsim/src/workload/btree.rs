//! `btree` (Rodinia b+tree `findK`, the svm-apu "BPT"): point queries on a
//! B+tree of `keys` records with `fanout` keys per node, stored level by level
//! (root first, as Rodinia lays the tree out for the GPU). One CTA of
//! `fanout` threads per query: every thread loads the query's key, then per
//! level, thread t loads keys[t] and keys[t+1] of the current node (coalesced
//! across the CTA), waits, compares; the thread whose range holds the key loads
//! indices[t] (the child), and the CTA meets at the barrier (`Op::Barrier`:
//! every warp waits for the matching thread's load). At the leaf the
//! matching thread loads the record, waits, and stores the answer.
//!
//! The tree is complete: the node holding key k at level l (leaves = level
//! L-1) is k / fanout^(L-l), so a query's path is a function of its key.
//! Unsorted queries are uniform random keys; sorted ones (svm-apu's "sorted"
//! variant) are order statistics, so consecutive CTAs walk the same nodes.
//! Unlike `gather` (a binary search with one probe per level over a flat
//! array), every level here reads a whole node, and the node pages of the
//! upper levels are shared by all queries.
//!
//! Arrays in allocation order: nodes (each 8 + 8 * (fanout + 1) bytes:
//! header, child indices, keys), records, query keys, answers. First touch
//! (lockstep): the query keys, the root, the level-1 nodes of the queries,
//! ..., the leaves, then the records and answers (interleaved).

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig};
use crate::config::Config;
use crate::sim::mix64;

section! {
    /// Parameters of the B+tree search kernel.
    pub struct BtreeParams {
        /// Records (keys 0..keys) in the tree.
        pub keys: u64 = 1 << 20,
        /// Keys per node; also the threads of a query's CTA (a multiple of gpu.warp_size).
        pub fanout: u32 = 256,
        /// Queries (one CTA each).
        pub queries: u64 = 1024,
        /// Sort the queries by key (consecutive CTAs search nearby keys).
        pub sorted: bool = false,
    }
}

impl BtreeParams {
    pub fn validate(&self, p: &str, cfg: &Config) -> Result<(), (String, String)> {
        let (ws, max) = (cfg.gpu.warp_size, cfg.gpu.max_warps_per_sm);
        if self.fanout < 2 * ws || self.fanout % ws != 0 || self.fanout > ws * max {
            return Err((
                format!("{p}.fanout"),
                format!(
                    "must be a multiple of gpu.warp_size ({ws}), at least 2 warps and at most gpu.max_warps_per_sm ({max}) warps, got {}",
                    self.fanout
                ),
            ));
        }
        check(p, "keys", self.keys, 2, 1 << 36)?;
        check(p, "queries", self.queries, 1, 1 << 30)
    }

    /// Nodes per level, root first.
    fn levels(&self) -> Vec<u64> {
        let mut v = vec![self.keys.div_ceil(self.fanout as u64)];
        while *v.last().expect("non-empty") > 1 {
            v.push(v.last().expect("non-empty").div_ceil(self.fanout as u64));
        }
        v.reverse();
        v
    }

    fn node_bytes(&self) -> u64 {
        8 + 8 * (self.fanout as u64 + 1)
    }

    pub fn footprint(&self) -> u128 {
        let nodes: u128 = self.levels().iter().map(|&n| n as u128).sum();
        nodes * self.node_bytes() as u128 + 4 * self.keys as u128 + 8 * self.queries as u128
    }
}

#[derive(Debug, Clone)]
pub struct BtreeKernel {
    nodes: Buffer,
    records: Buffer,
    query_keys: Buffer,
    answers: Buffer,
    /// First node of each level, root first, and the divisor of a key at that level.
    level_first: [u64; 16],
    level_div: [u64; 16],
    levels: u32,
    p: BtreeParams,
    seed: u64,
    compute: u32,
}

pub(super) fn build(p: &BtreeParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let levels = p.levels();
    let total: u64 = levels.iter().sum();
    let nodes = va.alloc(total * p.node_bytes(), page);
    let (records, query_keys, answers) = (va.alloc(p.keys * 4, page), va.alloc(p.queries * 4, page), va.alloc(p.queries * 4, page));
    let (mut level_first, mut level_div) = ([0; 16], [0; 16]);
    let (mut first, f) = (0, p.fanout as u64);
    for (l, &n) in levels.iter().enumerate() {
        level_first[l] = first;
        level_div[l] = f.pow((levels.len() - l) as u32);
        first += n;
    }
    let k = BtreeKernel {
        nodes,
        records,
        query_keys,
        answers,
        level_first,
        level_div,
        levels: levels.len() as u32,
        p: p.clone(),
        seed: mix64(cfg.sim.seed ^ 0x6274_7265),
        compute: w.compute_cycles,
    };
    let spec = KernelSpec { name: "btree", threads: p.queries * f, threads_per_cta: p.fanout, gen: KernelGen::Btree(Box::new(k)) };
    (vec![spec], nodes.bytes + records.bytes + query_keys.bytes)
}

impl BtreeKernel {
    /// The key of query `q`: uniform, or the q-th order statistic when sorted.
    pub fn key(&self, q: u64) -> u64 {
        let (n, h) = (self.p.keys, mix64(self.seed ^ q));
        if self.p.sorted {
            let num = ((q as u128) << 32 | (h >> 32) as u128) * n as u128;
            ((num / ((self.p.queries as u128) << 32)) as u64).min(n - 1)
        } else {
            ((h as u128 * n as u128) >> 64) as u64
        }
    }

    /// Address of the node on `key`'s path at `level` (0 = root).
    pub fn node(&self, key: u64, level: u32) -> u64 {
        let l = level as usize;
        self.nodes.base + (self.level_first[l] + key / self.level_div[l]) * self.p.node_bytes()
    }

    pub fn warp(&self, id: WarpId) -> BtreeWarp {
        let f = self.p.fanout as u64;
        let q = id.first_thread / f;
        BtreeWarp { k: self.clone(), key: self.key(q), query: q, t0: id.first_thread % f, lanes: id.lanes, level: 0, phase: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct BtreeWarp {
    k: BtreeKernel,
    query: u64,
    key: u64,
    /// The warp's first thread within its CTA (= its first key slot in a node).
    t0: u64,
    lanes: u32,
    level: u32,
    phase: u8,
}

impl BtreeWarp {
    fn load(base: u64, stride: u64, n: u32) -> Op {
        Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base, stride, n }, bytes: 4 }
    }

    /// Slot of the key within its node at the current level, and whether it is in this warp's lanes.
    fn slot(&self) -> Option<u64> {
        let s = self.key / (self.k.level_div[self.level as usize] / self.k.p.fanout as u64) % self.k.p.fanout as u64;
        (self.t0..self.t0 + self.lanes as u64).contains(&s).then_some(s)
    }

    pub fn next(&mut self) -> Op {
        let f = self.k.p.fanout as u64;
        loop {
            let node = self.k.node(self.key, self.level);
            let (indices, keys) = (node + 8, node + 8 + 4 * (f + 1));
            let leaf = self.level + 1 == self.k.levels;
            let phase = self.phase;
            self.phase += 1;
            return match phase {
                0 => Self::load(self.k.query_keys.base + self.query * 4, 0, self.lanes),
                1 => Op::Wait,
                2 => Self::load(keys + self.t0 * 4, 4, self.lanes),
                3 if leaf => continue,
                3 => Self::load(keys + (self.t0 + 1) * 4, 4, self.lanes),
                4 => Op::Wait,
                5 => Op::Compute(self.k.compute),
                // The matching thread reads the child (inner node) or the record (leaf).
                6 => match (self.slot(), leaf) {
                    (Some(s), false) => Self::load(indices + s * 4, 0, 1),
                    (Some(_), true) => Self::load(self.k.records.base + self.key * 4, 0, 1),
                    (None, _) => continue,
                },
                7 => Op::Wait,
                // The CTA meets (findK's `__syncthreads`): every warp goes on to the child the matching
                // thread read, so all wait for that thread's load.
                8 if !leaf => {
                    (self.level, self.phase) = (self.level + 1, 2);
                    Op::Barrier
                }
                8 if self.slot().is_some() => Op::Mem {
                    kind: MemKind::Store,
                    lanes: Lanes::Strided { base: self.k.answers.base + self.query * 4, stride: 0, n: 1 },
                    bytes: 4,
                },
                _ => {
                    self.phase = 9;
                    Op::Exit
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{KernelGen, Op};

    fn kernel(p: &crate::workload::Program) -> &super::BtreeKernel {
        match &kernels(p)[0].gen {
            KernelGen::Btree(k) => k,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_query_reads_one_node_per_level_then_its_record() {
        // 4096 keys, fanout 64: leaves hold 64 keys (64 leaves), one level above (1 node) = root.
        let p = program(&["workload.kind=btree", "workload.btree.keys=4096", "workload.btree.fanout=64", "workload.btree.queries=4"]);
        let k = kernel(&p);
        let (nodes, records) = (p.buffers[0].base, p.buffers[1].base);
        let node_bytes = 8 + 8 * 65;
        // CTA 2 = warps 4 and 5; the query's key picks the leaf key / 64 (node 1 + key / 64) and slot key % 64 in it.
        let key = k.key(2);
        let w = (key % 64 >= 32) as usize;
        let ops = mem_ops(&mut warps(&p, 0)[4 + w]);
        let root_keys = nodes + 8 + 4 * 65;
        let leaf = nodes + (1 + key / 64) * node_bytes;
        let t0 = 32 * w as u64;
        assert_eq!(ops[1].1, (t0..t0 + 32).map(|t| root_keys + 4 * t).collect::<Vec<_>>());
        assert_eq!(ops[2].1, (t0..t0 + 32).map(|t| root_keys + 4 * (t + 1)).collect::<Vec<_>>());
        // The root's child index of slot key / 64, only if that slot is in this warp.
        let root_slot = key / 64;
        let mut i = 3;
        if (t0..t0 + 32).contains(&root_slot) {
            assert_eq!(ops[3].1, [nodes + 8 + 4 * root_slot]);
            i = 4;
        }
        assert_eq!(ops[i].1, (t0..t0 + 32).map(|t| leaf + 8 + 4 * 65 + 4 * t).collect::<Vec<_>>());
        assert_eq!(ops[i + 1].1, [records + 4 * key]);
        // The same thread stores the answer.
        assert_eq!(ops.len(), i + 3);
        // Both warps of the CTA meet once per inner level (one here: the root), after the child's load.
        for mut w in warps(&p, 0).into_iter().skip(4).take(2) {
            let all = all_ops(&mut w);
            let bars: Vec<usize> = all.iter().enumerate().filter(|(_, o)| **o == Op::Barrier).map(|(j, _)| j).collect();
            assert_eq!(bars.len(), 1, "{all:?}");
            assert_eq!(all[bars[0] - 1], Op::Wait);
        }
    }

    #[test]
    fn sorted_queries_share_their_path() {
        let p = program(&["workload.kind=btree", "workload.btree.sorted=true"]);
        let k = kernel(&p);
        let leaves: std::collections::BTreeSet<u64> = (0..1024).map(|q| k.node(k.key(q), 2)).collect();
        let q: Vec<u64> = (0..1024).map(|q| k.key(q)).collect();
        assert!(q.windows(2).all(|w| w[0] <= w[1]));
        // 1024 sorted queries over 4096 leaves: each leaf at most once, in order; the 16 level-1 nodes all visited.
        assert!(leaves.len() > 700);
        let mid: std::collections::BTreeSet<u64> = (0..1024).map(|q| k.node(k.key(q), 1)).collect();
        assert_eq!(mid.len(), 16);
    }

    #[test]
    fn first_touch_is_query_keys_then_nodes_then_records_and_answers() {
        let p = program(&["workload.kind=btree", "workload.btree.keys=65536", "workload.btree.fanout=64", "workload.btree.queries=64"]);
        let ft = first_touch(&p);
        assert_eq!(ft[..2], [(2, 0), (0, 0)]);
        // Every node page (root, inner, leaves) before the first record; records and answers interleave at the end.
        let last_node = ft.iter().rposition(|&(b, _)| b == 0).unwrap();
        let first_record = ft.iter().position(|&(b, _)| b == 1).unwrap();
        assert!(last_node < first_record);
        assert!(ft[first_record..].iter().all(|&(b, _)| b == 1 || b == 3));
    }
}
