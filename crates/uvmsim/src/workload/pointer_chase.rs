//! `pointer-chase`: dependent loads around one seeded random cycle through
//! all `nodes` nodes of a linked structure. Node `P(i)` points to node
//! `P(i + 1 mod nodes)`, where `P` is a seeded bijection ([`Permutation`]),
//! so following the pointers from any node visits every node once before
//! coming back. Thread `t` starts at cycle position `t * nodes / threads`
//! (threads are spread evenly around the cycle) and makes `hops` hops: load
//! the node, wait for it (the next address is in it), compute. Lanes of a
//! warp are at unrelated nodes: every load is fully divergent, and a page is
//! rarely hit twice in a row: the latency-bound TLB-miss pattern.
//!
//! First touch: in lockstep, hop by hop: the nodes at positions
//! `t * nodes / threads + h` for every thread `t` at hop `h`, i.e. pseudo-random pages.

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, Permutation, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;
use crate::sim::mix64;

section! {
    /// Parameters of the pointer-chasing kernel.
    pub struct PointerChaseParams {
        /// Nodes in the cycle.
        pub nodes: u64 = 65_536,
        /// Bytes per node (a node's pointer is read at its start).
        pub node_bytes: u32 = 64,
        /// Threads, each following the cycle from its own starting node.
        pub threads: u64 = 1024,
        /// Dependent loads per thread.
        pub hops: u64 = 512,
    }
}

impl PointerChaseParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "nodes", self.nodes, 2, 1 << 36)?;
        check(p, "node_bytes", self.node_bytes as u64, 8, 1 << 20)?;
        check(p, "threads", self.threads, 1, 1 << 24)?;
        check(p, "hops", self.hops, 1, 1 << 32)
    }

    pub fn footprint(&self) -> u128 {
        self.nodes as u128 * self.node_bytes as u128
    }
}

#[derive(Debug, Clone)]
pub struct PointerChaseKernel {
    buf: Buffer,
    perm: Permutation,
    p: PointerChaseParams,
    compute: u32,
}

pub(super) fn build(p: &PointerChaseParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let buf = va.alloc(p.nodes * p.node_bytes as u64, page);
    let perm = Permutation::new(p.nodes, mix64(cfg.sim.seed ^ 0x6368_6173));
    let gen = KernelGen::PointerChase(PointerChaseKernel { buf, perm, p: p.clone(), compute: w.compute_cycles });
    (vec![KernelSpec { name: "pointer-chase", threads: p.threads, threads_per_cta: w.threads_per_cta, gen }], buf.bytes)
}

impl PointerChaseKernel {
    /// Address of the node at cycle position `pos`.
    pub fn node(&self, pos: u64) -> u64 {
        self.buf.base + self.perm.apply(pos % self.p.nodes) * self.p.node_bytes as u64
    }

    pub fn warp(&self, id: WarpId) -> PointerChaseWarp {
        PointerChaseWarp { k: self.clone(), first: id.first_thread, lanes: id.lanes, hop: 0, phase: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct PointerChaseWarp {
    k: PointerChaseKernel,
    first: u64,
    lanes: u32,
    hop: u64,
    phase: u8,
}

impl PointerChaseWarp {
    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        if self.hop == self.k.p.hops {
            return Op::Exit;
        }
        self.phase += 1;
        match self.phase {
            1 => {
                let (n, t) = (self.k.p.nodes as u128, self.k.p.threads as u128);
                for (l, slot) in scratch.iter_mut().take(self.lanes as usize).enumerate() {
                    let start = ((self.first + l as u64) as u128 * n / t) as u64;
                    *slot = self.k.node(start + self.hop);
                }
                Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: self.lanes }, bytes: 8 }
            }
            2 => Op::Wait,
            _ => {
                self.phase = 0;
                self.hop += 1;
                Op::Compute(self.k.compute)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;

    #[test]
    fn one_thread_visits_every_node_once_per_cycle() {
        let p = program(&[
            "workload.kind=pointer-chase",
            "workload.pointer_chase.nodes=1000",
            "workload.pointer_chase.threads=1",
            "workload.pointer_chase.hops=2000",
        ]);
        let base = p.buffers[0].base;
        let visits: Vec<u64> = mem_ops(&mut warps(&p, 0)[0]).into_iter().map(|(_, a)| (a[0] - base) / 64).collect();
        assert_eq!(visits.len(), 2000);
        let mut first = visits[..1000].to_vec();
        first.sort_unstable();
        assert_eq!(first, (0..1000).collect::<Vec<_>>());
        // The second lap follows the same cycle.
        assert_eq!(visits[..1000], visits[1000..]);
        // Not the identity: the cycle is shuffled.
        assert!(visits.windows(2).filter(|w| w[1] == w[0] + 1).count() < 20);
    }

    #[test]
    fn threads_start_spread_around_the_cycle() {
        // 4 threads on 64 nodes: thread t's walk is thread 0's walk shifted by 16 hops.
        let p = program(&[
            "workload.kind=pointer-chase",
            "workload.pointer_chase.nodes=64",
            "workload.pointer_chase.threads=4",
            "workload.pointer_chase.hops=32",
        ]);
        let ops = mem_ops(&mut warps(&p, 0)[0]);
        let lane = |l: usize| ops.iter().map(|(_, a)| a[l]).collect::<Vec<_>>();
        assert_eq!(lane(0)[16..], lane(1)[..16]);
        assert_eq!(lane(1)[16..], lane(2)[..16]);
    }

    #[test]
    fn thread_t_starts_at_t_nodes_over_threads_of_the_seeded_cycle() {
        use crate::sim::mix64;
        use crate::workload::{Op, Permutation};
        let p = program(&[
            "sim.seed=7",
            "workload.kind=pointer-chase",
            "workload.pointer_chase.nodes=200",
            "workload.pointer_chase.threads=3",
            "workload.pointer_chase.hops=2",
        ]);
        let base = p.buffers[0].base;
        // The cycle is the permutation keyed by the seed and "chas"; lane 2 starts at 2 x 200 / 3 = 133
        // (not 2 x (200 / 3) = 132), then hops to position 134.
        let perm = Permutation::new(200, mix64(7 ^ 0x6368_6173));
        let ops = all_ops(&mut warps(&p, 0)[0]);
        assert_eq!(op_shape(&ops), "mwcmwc");
        assert!(matches!(ops[0], Op::Mem { bytes: 8, .. }), "{:?}", ops[0]);
        let lane2: Vec<u64> = mem_ops(&mut warps(&p, 0)[0]).iter().map(|(_, a)| a[2]).collect();
        assert_eq!(lane2, [base + perm.apply(133) * 64, base + perm.apply(134) * 64]);
        // Input: the nodes, 200 x 64 bytes.
        assert_eq!(p.host.input_bytes, Some(12_800));
    }
}
