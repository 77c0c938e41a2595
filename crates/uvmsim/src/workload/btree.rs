//! `btree` (Rodinia b+tree `findK`, the svm-apu "BPT"): point queries on a
//! B+tree of `keys` records with `fanout` keys per node, stored level by level
//! (root first, as Rodinia lays the tree out for the GPU). One CTA of
//! `fanout` threads per query, in the order of `findK`'s PTX
//! (docs/workloads.md, "Load order"). Per inner level every thread loads the
//! query's current node `currKnode[q]` (8 bytes, one address for the CTA),
//! waits (the node's address needs it), loads `keys[t]` of that node
//! (coalesced across the CTA) and the query's key (reloaded every level),
//! waits, compares; the threads with `keys[t] <= key` load `keys[t+1]`, wait;
//! the thread whose range holds the key (slot s) loads `offset[q]`, waits,
//! loads the child index `indices[s]` of that node, waits, and stores it into
//! `offset[q]`; the CTA meets (`Op::Barrier`); thread 0 loads `offset[q]`,
//! waits and stores it into `currKnode[q]`; the CTA meets again (2 barriers
//! per level; the child index always passes findK's bound check here). At the
//! leaf every thread loads `currKnode[q]`, waits, loads the keys and the query
//! key, waits, compares; the thread whose key matches loads the record's index
//! `indices[s]`, waits, loads the record, waits, and stores the answer.
//! Before 2026-12-01 every thread loaded the query key once at the start, per
//! level loaded `keys[t]` and `keys[t+1]` together and the matching thread the
//! child index, with one barrier per level, and at the leaf the matching
//! thread loaded the record without its index; `currKnode` and `offset` were
//! not modelled.
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
//! header, child indices, keys), records, query keys, answers, currKnode,
//! offset (8 bytes per query each; ASSUMPTION: allocated last so the other
//! arrays keep their addresses; Rodinia allocates records, nodes, currKnode,
//! offset, query keys, answers). First touch (lockstep): currKnode, the root,
//! the query keys, offset, the level-1 nodes of the queries, ..., the leaves,
//! then the records and answers (interleaved), the first records among the
//! last leaves: a CTA's warps skip different steps (the second key, the
//! child, thread 0's copy), so CTAs in lockstep drift apart.

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

    /// Nodes, records (4 bytes), query keys and answers (4 bytes each per query), currKnode and offset (8 each).
    pub fn footprint(&self) -> u128 {
        let nodes: u128 = self.levels().iter().map(|&n| n as u128).sum();
        nodes * self.node_bytes() as u128 + 4 * self.keys as u128 + 24 * self.queries as u128
    }
}

#[derive(Debug, Clone)]
pub struct BtreeKernel {
    nodes: Buffer,
    records: Buffer,
    query_keys: Buffer,
    answers: Buffer,
    /// findK's `currKnodeD` and `offsetD`: the query's current node and the child it goes to, 8 bytes each.
    curr: Buffer,
    offset: Buffer,
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
    // After the others, so that their addresses do not move (an assumption: Rodinia allocates them
    // after the records and nodes).
    let (curr, offset) = (va.alloc(p.queries * 8, page), va.alloc(p.queries * 8, page));
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
        curr,
        offset,
        level_first,
        level_div,
        levels: levels.len() as u32,
        p: p.clone(),
        seed: mix64(cfg.sim.seed ^ 0x6274_7265),
        compute: w.compute_cycles,
    };
    let spec = KernelSpec { name: "btree", threads: p.queries * f, threads_per_cta: p.fanout, gen: KernelGen::Btree(Box::new(k)) };
    // Rodinia copies currKnode and offset (zeros: the root) to the device with the tree and the keys.
    (vec![spec], nodes.bytes + records.bytes + query_keys.bytes + curr.bytes + offset.bytes)
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
    fn mem(kind: MemKind, base: u64, stride: u64, n: u32, bytes: u32) -> Op {
        Op::Mem { kind, lanes: Lanes::Strided { base, stride: if n >= 2 { stride } else { 0 }, n }, bytes }
    }

    /// Slot of the key within its node at the current level (the thread whose range holds it).
    fn slot(&self) -> u64 {
        self.key / (self.k.level_div[self.level as usize] / self.k.p.fanout as u64) % self.k.p.fanout as u64
    }

    pub fn next(&mut self) -> Op {
        use MemKind::{Load, Store};
        let (f, q, n, t0) = (self.k.p.fanout as u64, self.query, self.lanes, self.t0);
        loop {
            if self.level == self.k.levels {
                return Op::Exit;
            }
            let node = self.k.node(self.key, self.level);
            let (indices, keys) = (node + 8, node + 8 + 4 * (f + 1));
            let (curr, offset) = (self.k.curr.base + 8 * q, self.k.offset.base + 8 * q);
            let leaf = self.level + 1 == self.k.levels;
            let s = self.slot();
            // Lanes t0.. whose key is at most the query's (keys[t] <= key for t <= s), and whether s is ours.
            let below = (s + 1).saturating_sub(t0).min(n as u64) as u32;
            let mine = (t0..t0 + n as u64).contains(&s);
            let phase = self.phase;
            self.phase += 1;
            return match (phase, leaf) {
                // Every level: the current node (its address needs it), then its keys and the query key.
                (0, _) => Self::mem(Load, curr, 0, n, 8),
                (1, _) => Op::Wait,
                (2, _) => Self::mem(Load, keys + 4 * t0, 4, n, 4),
                (3, _) => Self::mem(Load, self.k.query_keys.base + 4 * q, 0, n, 4),
                (4, _) => Op::Wait,
                (5, _) => Op::Compute(self.k.compute),
                // Inner level: the second key of the threads whose first one passed.
                (6, false) if below > 0 => Self::mem(Load, keys + 4 * (t0 + 1), 4, below, 4),
                (7, false) if below > 0 => Op::Wait,
                // The matching thread: the child index of node offset[q] (= the current node), into offset[q].
                (8, false) if mine => Self::mem(Load, offset, 0, 1, 8),
                (9, false) if mine => Op::Wait,
                (10, false) if mine => Self::mem(Load, indices + 4 * s, 0, 1, 4),
                (11, false) if mine => Op::Wait,
                (12, false) if mine => Self::mem(Store, offset, 0, 1, 8),
                (13, false) => Op::Barrier,
                // Thread 0 moves the query to the child: currKnode[q] = offset[q].
                (14, false) if t0 == 0 => Self::mem(Load, offset, 0, 1, 8),
                (15, false) if t0 == 0 => Op::Wait,
                (16, false) if t0 == 0 => Self::mem(Store, curr, 0, 1, 8),
                (17, false) => {
                    (self.level, self.phase) = (self.level + 1, 0);
                    Op::Barrier
                }
                (p, false) if p < 17 => continue,
                // Leaf: the thread whose key matches reads the record's index, the record, stores the answer.
                (6, true) if mine => Self::mem(Load, indices + 4 * s, 0, 1, 4),
                (7, true) if mine => Op::Wait,
                (8, true) if mine => Self::mem(Load, self.k.records.base + 4 * self.key, 0, 1, 4),
                (9, true) if mine => Op::Wait,
                (10, true) if mine => Self::mem(Store, self.k.answers.base + 4 * q, 0, 1, 4),
                (p, true) if p < 11 => continue,
                _ => {
                    self.level = self.k.levels;
                    Op::Exit
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{KernelGen, MemKind, Op};

    fn kernel(p: &crate::workload::Program) -> &super::BtreeKernel {
        match &kernels(p)[0].gen {
            KernelGen::Btree(k) => k,
            _ => unreachable!(),
        }
    }

    /// Checks both warps of query `q`'s CTA, op by op, in a tree of 4096 keys with fanout 64: leaves
    /// hold 64 keys (64 leaves), one level above (1 node) = root. The query's key picks slot key / 64
    /// of the root, then leaf key / 64 (node 1 + key / 64) and slot key % 64 in it.
    fn check_query(p: &crate::workload::Program, q: u64) {
        let k = kernel(p);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        let (nodes, records, query_keys, answers, curr, offset) = (b[0], b[1], b[2], b[3], b[4], b[5]);
        let node_bytes = 8 + 8 * 65;
        let key = k.key(q);
        let (root_slot, leaf_slot) = (key / 64, key % 64);
        let root_keys = nodes + 8 + 4 * 65;
        let leaf = nodes + (1 + key / 64) * node_bytes;
        let (qk, cur, off, ans) = (query_keys + 4 * q, curr + 8 * q, offset + 8 * q, answers + 4 * q);
        let l = |a: Vec<u64>| (MemKind::Load, a);
        let st = |a: u64| (MemKind::Store, vec![a]);
        for w in 0..2u64 {
            let t0 = 32 * w;
            let ours = |s: u64| (t0..t0 + 32).contains(&s);
            // Root: currKnode (every lane), wait, keys[t] and the query key, wait, compare.
            let mut want = vec![l(vec![cur; 32]), l((t0..t0 + 32).map(|t| root_keys + 4 * t).collect()), l(vec![qk; 32])];
            let mut shape = "mwmmwc".to_owned();
            // keys[t + 1] for the lanes with keys[t] <= key: t <= root_slot.
            if root_slot >= t0 {
                want.push(l((t0..=root_slot.min(t0 + 31)).map(|t| root_keys + 4 * (t + 1)).collect()));
                shape += "mw";
            }
            // The matching thread: offset, the child index, offset = child.
            if ours(root_slot) {
                want.extend([l(vec![off]), l(vec![nodes + 8 + 4 * root_slot]), st(off)]);
                shape += "mwmwm";
            }
            shape += "b";
            // Thread 0: currKnode = offset.
            if t0 == 0 {
                want.extend([l(vec![off]), st(cur)]);
                shape += "mwm";
            }
            shape += "b";
            // Leaf: currKnode, keys[t] and the query key; the matching thread the record's index, the record, the answer.
            want.extend([l(vec![cur; 32]), l((t0..t0 + 32).map(|t| leaf + 8 + 4 * 65 + 4 * t).collect()), l(vec![qk; 32])]);
            shape += "mwmmwc";
            if ours(leaf_slot) {
                want.extend([l(vec![leaf + 8 + 4 * leaf_slot]), l(vec![records + 4 * key]), st(ans)]);
                shape += "mwmwm";
            }
            let warp = (2 * q + w) as usize;
            assert_eq!(mem_ops(&mut warps(p, 0)[warp]), want, "query {q}, warp {w}, key {key}");
            let ops = all_ops(&mut warps(p, 0)[warp]);
            assert_eq!(op_shape(&ops), shape, "query {q}, warp {w}, key {key}");
            // currKnode and offset are longs, the rest ints.
            for (op, (_, a)) in ops.iter().filter(|o| matches!(o, Op::Mem { .. })).zip(&want) {
                let long = a[0] >= curr;
                assert!(matches!(op, Op::Mem { bytes, .. } if *bytes == if long { 8 } else { 4 }), "{op:?}");
            }
        }
    }

    #[test]
    fn a_query_reads_one_node_per_level_then_its_record() {
        let p = program(&["workload.kind=btree", "workload.btree.keys=4096", "workload.btree.fanout=64", "workload.btree.queries=4"]);
        let node_bytes = 8 + 8 * 65;
        // Nodes, records, query keys and answers (4 B each), currKnode and offset (8 B each); all but
        // the answers are inputs.
        let sizes: Vec<u64> = p.buffers.iter().map(|b| b.bytes).collect();
        assert_eq!(sizes, [65 * node_bytes, 4 * 4096, 16, 16, 32, 32]);
        assert_eq!(p.host.input_bytes, Some(65 * node_bytes + 4 * 4096 + 16 + 32 + 32));
        // CTA 2 = warps 4 and 5.
        check_query(&p, 2);
    }

    #[test]
    fn slots_on_a_warp_boundary_split_the_steps_between_the_warps() {
        // Slot 31: warp 0 holds the key's thread and all 32 of its lanes load keys[t + 1]; warp 1
        // none. Slot 32: warp 1's lane 0 alone loads keys[t + 1] and holds the key's thread.
        let p = program(&["workload.kind=btree", "workload.btree.keys=4096", "workload.btree.fanout=64", "workload.btree.queries=1024"]);
        let k = kernel(&p);
        let find = |f: &dyn Fn(u64) -> bool| (0..1024).find(|&q| f(k.key(q))).expect("1024 uniform keys hit every slot");
        for q in [find(&|key| key / 64 == 31), find(&|key| key / 64 == 32), find(&|key| key % 64 == 31), find(&|key| key % 64 == 32)] {
            check_query(&p, q);
        }
    }

    #[test]
    fn levels_round_up_and_queries_follow_the_seed() {
        // 5000 keys, fanout 64: 79 leaves (the last one part full), 2 nodes above them, the root.
        let p = program(&["workload.kind=btree", "workload.btree.keys=5000", "workload.btree.fanout=64", "workload.btree.queries=64"]);
        let (k, nodes, node_bytes) = (kernel(&p), p.buffers[0].base, 8 + 8 * 65);
        assert_eq!(p.buffers[0].bytes, (1 + 2 + 79) * node_bytes);
        // Key 4999: slot 4999 / 4096 = 1 of the root, level-1 node 1 + 1, leaf 3 + 4999 / 64 = 81 (the last).
        assert_eq!([k.node(4999, 0), k.node(4999, 1), k.node(4999, 2)], [nodes, nodes + 2 * node_bytes, nodes + 81 * node_bytes]);
        // A query's warp walks three levels: two inner levels of two barriers each.
        assert_eq!(op_shape(&all_ops(&mut warps(&p, 0)[1])).matches('b').count(), 4);
        assert_footprint_is_the_buffers(&[
            "workload.kind=btree",
            "workload.btree.keys=5000",
            "workload.btree.fanout=64",
            "workload.btree.queries=10",
        ]);
        let keys = |seed: &str| {
            let p = program(&["workload.kind=btree", "workload.btree.queries=64", seed]);
            let k = kernel(&p).clone();
            (0..64).map(|q| k.key(q)).collect::<Vec<_>>()
        };
        let a = keys("sim.seed=1");
        assert!(a.iter().zip(keys("sim.seed=2")).all(|(x, y)| *x != y));
        // A CTA needs two warps at least.
        assert!(refused(&["workload.kind=btree", "workload.btree.fanout=32"]).contains("workload.btree.fanout"));
    }

    #[test]
    fn the_warp_of_thread_0_and_the_key_runs_every_step() {
        // 4096 keys, fanout 64: warp 0 of a query whose key has both its slots in lanes 0..32.
        let p = program(&["workload.kind=btree", "workload.btree.keys=4096", "workload.btree.fanout=64", "workload.btree.queries=64"]);
        let k = kernel(&p);
        let q = (0..64).find(|&q| k.key(q) / 64 < 32 && k.key(q) % 64 < 32).expect("some query in warp 0 at both levels");
        let ops = all_ops(&mut warps(&p, 0)[2 * q as usize]);
        // Root: currKnode, wait, keys, query key, wait, compute; keys[t + 1], wait; offset, wait,
        // index, wait, store offset; barrier; offset, wait, store currKnode; barrier. Leaf: the
        // first six, then the record's index, wait, the record, wait, the answer.
        assert_eq!(op_shape(&ops), "mwmmwc".to_owned() + "mw" + "mwmwm" + "b" + "mwm" + "b" + "mwmmwc" + "mwmwm");
        let (curr, offset) = (p.buffers[4].base + 8 * q, p.buffers[5].base + 8 * q);
        let one = |kind, a| Op::Mem { kind, lanes: crate::workload::Lanes::Strided { base: a, stride: 0, n: 1 }, bytes: 8 };
        assert_eq!(ops[8], one(MemKind::Load, offset));
        assert_eq!(ops[12], one(MemKind::Store, offset));
        assert_eq!(ops[14..17], [one(MemKind::Load, offset), Op::Wait, one(MemKind::Store, curr)]);
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
        // Query q's key is uniform in its stratum [q n / 1024, (q + 1) n / 1024) = [1024 q, 1024 q + 1024),
        // not its first key.
        assert!(q.iter().enumerate().all(|(i, &key)| key / 1024 == i as u64));
        assert!(q.iter().enumerate().filter(|&(i, &key)| key == 1024 * i as u64).count() < 8);
    }

    #[test]
    fn first_touch_is_curr_root_query_keys_offset_then_nodes_then_records_and_answers() {
        // 65536 keys, fanout 64: the root, 16 level-1 nodes, 1024 leaves, 528 B each: the root and
        // the level-1 nodes in node pages 0..=2.
        let p = program(&["workload.kind=btree", "workload.btree.keys=65536", "workload.btree.fanout=64", "workload.btree.queries=64"]);
        let ft = first_touch(&p);
        assert_eq!(ft[..4], [(4, 0), (0, 0), (2, 0), (5, 0)]);
        // The inner levels' node pages before the first record; after it only leaves, records and
        // answers (the CTAs' warps skip different steps, so lockstep CTAs drift apart: the first
        // records come while other queries still read their leaves).
        let first_record = ft.iter().position(|&(b, _)| b == 1).unwrap();
        assert!((0..=2).all(|pg| ft[..first_record].contains(&(0, pg))));
        assert!(ft[first_record..].iter().all(|&(b, pg)| b == 1 || b == 3 || b == 0 && pg >= 2));
        assert!(ft.contains(&(3, 0)));
        // Each query's own path in order: its node at each level, then its record.
        let k = kernel(&p);
        let pos = |b: usize, addr: u64| {
            let page = (addr - p.buffers[b].base) >> 12;
            ft.iter().position(|&e| e == (b, page)).unwrap()
        };
        for q in 0..64 {
            let key = k.key(q);
            // Its keys (lane 0's): a node's header may lie on the page before.
            let keys = |level| k.node(key, level) + 8 + 4 * 65;
            let (mid, leaf, record) = (pos(0, keys(1)), pos(0, keys(2)), pos(1, p.buffers[1].base + 4 * key));
            assert!(mid <= leaf && leaf < record, "query {q}: {mid} {leaf} {record}");
        }
    }
}
