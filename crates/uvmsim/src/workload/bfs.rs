//! `bfs` (Graph500-like, svm-apu "Graph500"): level-synchronous top-down
//! breadth-first search on a Kronecker (R-MAT) graph of `2^scale` vertices and
//! `edge_factor * 2^scale` directed edges, stored in CSR (8-byte offsets,
//! 4-byte neighbour ids), generated on the fly from the seed: nothing of the
//! graph is stored.
//!
//! The graph. Every edge picks its endpoints bit by bit with the initiator
//! [[9, 3], [3, 1]] / 16 (Graph500 uses [[0.57, 0.19], [0.19, 0.05]]; this
//! separable one is within 0.01 of it): a row bit is 0 with probability 3/4
//! and, independently, a column bit is 0 with probability 3/4. So vertex u's
//! share of the edges is `prod_i (3/4 or 1/4)` over its bits, and the CSR
//! offset of a vertex, `floor(E * sum of the shares of the vertices before
//! it)`, is a closed form computed exactly in integers in `scale` steps; its
//! degree is the difference of two offsets. Edge e's target is drawn from
//! `mix64(seed, e)`, two hash bits per level. Vertex labels are the R-MAT ids
//! XOR a seeded mask (Graph500 scrambles labels with a hash permutation; an
//! XOR keeps the closed form) so the hubs are spread over the arrays.
//!
//! The search. The root is the first vertex of a seeded sequence with at
//! least one edge. The frontiers are computed exactly when the program is
//! built (one byte per vertex, a pass over the edges per level), so each
//! launch knows its frontier; nothing is approximated. One launch per level
//! k, one thread per vertex: load level[v], wait; the frontier lanes
//! (level k) load offsets[v] and offsets[v+1], wait; then per neighbour j
//! (lanes whose degree exceeds j): load the neighbour id, wait, load its
//! level, wait, compute, and store level k+1 into it if it was unvisited when
//! the launch began. The last launch finds no new vertex (as a real BFS does).
//!
//! Simplified from Graph500: edges are directed (Graph500 symmetrises the
//! edge list), duplicates and self-loops are kept, the parent array is
//! replaced by the level array, and one search from one root is run.
//!
//! Arrays in allocation order: offsets, neighbours, level. First touch
//! (lockstep): the level array (launch 0's first loads), then the root's
//! offsets and neighbour list, then level by level the frontier vertices'
//! offsets and neighbour lists in vertex order.

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;
use crate::sim::mix64;
use std::sync::Arc;

section! {
    /// Parameters of the Graph500-like breadth-first search.
    pub struct BfsParams {
        /// log2 of the number of vertices.
        pub scale: u32 = 14,
        /// Edges per vertex (Graph500: 16).
        pub edge_factor: u32 = 16,
    }
}

/// A level value meaning "not reached".
const UNREACHED: u8 = u8::MAX;

impl BfsParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "scale", self.scale as u64, 1, 28)?;
        check(p, "edge_factor", self.edge_factor as u64, 1, 64)
    }

    fn vertices(&self) -> u64 {
        1 << self.scale
    }

    fn edges(&self) -> u64 {
        self.vertices() * self.edge_factor as u64
    }

    /// Offsets, neighbour ids and levels.
    pub fn footprint(&self) -> u128 {
        let (v, e) = (self.vertices() as u128, self.edges() as u128);
        8 * (v + 1) + 4 * e + 4 * v
    }
}

/// The Kronecker graph, and the level of every vertex from the root.
#[derive(Debug)]
pub struct Graph {
    scale: u32,
    edges: u64,
    mask: u64,
    seed: u64,
    root: u64,
    levels: Vec<u8>,
    /// Levels with vertices: the launches.
    depth: u32,
}

impl Graph {
    fn new(p: &BfsParams, seed: u64) -> Graph {
        let v = p.vertices();
        let mut g =
            Graph { scale: p.scale, edges: p.edges(), mask: mix64(seed ^ 0x6d61_736b) & (v - 1), seed, root: 0, levels: vec![], depth: 0 };
        g.root = (0..)
            .map(|i| mix64(seed ^ 0x726f_6f74 ^ i) & (v - 1))
            .find(|&r| g.degree(r) > 0)
            .expect("a graph with edges has a vertex with edges");
        let mut levels = vec![UNREACHED; v as usize];
        levels[g.root as usize] = 0;
        let mut k = 0;
        loop {
            let mut found = false;
            for u in 0..v {
                if levels[u as usize] == k {
                    let off = g.offset(u);
                    for j in 0..g.degree(u) {
                        let w = g.target(off + j) as usize;
                        if levels[w] == UNREACHED {
                            levels[w] = k + 1;
                            found = true;
                        }
                    }
                }
            }
            k += 1;
            if !found || k == UNREACHED - 1 {
                break;
            }
        }
        (g.levels, g.depth) = (levels, k as u32);
        g
    }

    /// First edge of vertex `u` (u = 2^scale: the edge count).
    pub fn offset(&self, u: u64) -> u64 {
        // Shares in quarters: an R-MAT bit 0 weighs 3, a bit 1 weighs 1; the label bit is the R-MAT bit XOR the mask's.
        let w = |bit: u64| if bit == 0 { 3u128 } else { 1 };
        let (mut below, mut prefix) = (0u128, 1u128);
        if u >> self.scale != 0 {
            return self.edges;
        }
        for i in (0..self.scale).rev() {
            let (lb, mb) = ((u >> i) & 1, (self.mask >> i) & 1);
            if lb == 1 {
                // Every vertex with the same higher bits and label bit 0 here comes first; the lower bits' weights sum to 4^i.
                below += (prefix * w(mb)) << (2 * i);
            }
            prefix *= w(lb ^ mb);
        }
        ((self.edges as u128 * below) >> (2 * self.scale)) as u64
    }

    pub fn degree(&self, u: u64) -> u64 {
        self.offset(u + 1) - self.offset(u)
    }

    /// Target of edge `e`: each R-MAT bit 1 with probability 1/4 (two hash bits), then the label mask.
    pub fn target(&self, e: u64) -> u64 {
        let h = mix64(self.seed ^ e.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // Keep bit 2i when hash bits 2i and 2i+1 are both set, then gather the even bits.
        let mut x = h & (h >> 1) & 0x5555_5555_5555_5555;
        x = (x | x >> 1) & 0x3333_3333_3333_3333;
        x = (x | x >> 2) & 0x0f0f_0f0f_0f0f_0f0f;
        x = (x | x >> 4) & 0x00ff_00ff_00ff_00ff;
        x = (x | x >> 8) & 0x0000_ffff_0000_ffff;
        x = (x | x >> 16) & 0x0000_0000_ffff_ffff;
        (x ^ self.mask) & ((1 << self.scale) - 1)
    }

    pub fn level(&self, u: u64) -> u8 {
        self.levels[u as usize]
    }
}

#[derive(Debug, Clone)]
pub struct BfsKernel {
    g: Arc<Graph>,
    offsets: u64,
    neighbours: u64,
    level: u64,
    /// The launch's level: its frontier.
    k: u8,
    compute: u32,
}

pub(super) fn build(p: &BfsParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let (v, e) = (p.vertices(), p.edges());
    let (offsets, neighbours, level): (Buffer, Buffer, Buffer) =
        (va.alloc((v + 1) * 8, page), va.alloc(e * 4, page), va.alloc(v * 4, page));
    let g = Arc::new(Graph::new(p, mix64(cfg.sim.seed ^ 0x6266_7300)));
    let kernels = (0..g.depth)
        .map(|k| {
            let gen = BfsKernel {
                g: g.clone(),
                offsets: offsets.base,
                neighbours: neighbours.base,
                level: level.base,
                k: k as u8,
                compute: w.compute_cycles,
            };
            KernelSpec { name: "bfs", threads: v, threads_per_cta: w.threads_per_cta, gen: KernelGen::Bfs(Box::new(gen)) }
        })
        .collect();
    (kernels, offsets.bytes + neighbours.bytes + level.bytes)
}

impl BfsKernel {
    pub fn graph(&self) -> &Graph {
        &self.g
    }

    pub fn warp(&self, id: WarpId) -> BfsWarp {
        BfsWarp {
            k: self.clone(),
            v0: id.first_thread,
            lanes: id.lanes,
            n: 0,
            j: 0,
            phase: 0,
            vertex: [0; MAX_LANES],
            first: [0; MAX_LANES],
            degree: [0; MAX_LANES],
        }
    }
}

#[derive(Debug, Clone)]
pub struct BfsWarp {
    k: BfsKernel,
    v0: u64,
    lanes: u32,
    /// Frontier lanes, and their vertices, first edges and degrees.
    n: usize,
    j: u64,
    phase: u8,
    vertex: [u64; MAX_LANES],
    first: [u64; MAX_LANES],
    degree: [u64; MAX_LANES],
}

impl BfsWarp {
    /// offsets[v + d] of every frontier vertex v.
    fn offsets(&self, scratch: &mut [u64; MAX_LANES], d: u64) -> Op {
        for (l, slot) in scratch.iter_mut().take(self.n).enumerate() {
            *slot = self.k.offsets + (self.vertex[l] + d) * 8;
        }
        Op::Mem { kind: MemKind::Load, lanes: super::grid::compact(scratch, self.n), bytes: 8 }
    }

    /// Addresses `base + f(lane) * bytes` of the frontier lanes that have a j-th neighbour and that `f` accepts; `None` if none.
    fn gather(&self, scratch: &mut [u64; MAX_LANES], kind: MemKind, base: u64, bytes: u64, f: impl Fn(usize) -> Option<u64>) -> Option<Op> {
        let mut m = 0;
        for l in 0..self.n {
            if self.j < self.degree[l] {
                if let Some(e) = f(l) {
                    scratch[m] = base + e * bytes;
                    m += 1;
                }
            }
        }
        (m > 0).then(|| Op::Mem { kind, lanes: super::grid::compact(scratch, m), bytes: bytes as u32 })
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let k = self.k.clone();
        let g = &k.g;
        loop {
            let phase = self.phase;
            self.phase += 1;
            let op = match phase {
                0 => Some(Op::Mem {
                    kind: MemKind::Load,
                    lanes: Lanes::Strided { base: k.level + self.v0 * 4, stride: 4, n: self.lanes },
                    bytes: 4,
                }),
                1 => Some(Op::Wait),
                2 => {
                    self.n = 0;
                    for v in self.v0..self.v0 + self.lanes as u64 {
                        if g.level(v) == k.k {
                            (self.vertex[self.n], self.first[self.n], self.degree[self.n]) = (v, g.offset(v), g.degree(v));
                            self.n += 1;
                        }
                    }
                    if self.n == 0 {
                        self.phase = 11;
                        continue;
                    }
                    Some(self.offsets(scratch, 0))
                }
                3 => Some(self.offsets(scratch, 1)),
                4 | 6 | 8 => Some(Op::Wait),
                5 => match self.gather(scratch, MemKind::Load, k.neighbours, 4, |l| Some(self.first[l] + self.j)) {
                    Some(op) => Some(op),
                    None => {
                        self.phase = 11;
                        continue;
                    }
                },
                7 => self.gather(scratch, MemKind::Load, k.level, 4, |l| Some(g.target(self.first[l] + self.j))),
                9 => Some(Op::Compute(k.compute)),
                10 => {
                    let op = self.gather(scratch, MemKind::Store, k.level, 4, |l| {
                        let t = g.target(self.first[l] + self.j);
                        (g.level(t) == k.k + 1).then_some(t)
                    });
                    (self.j, self.phase) = (self.j + 1, 5);
                    op
                }
                _ => {
                    self.phase = 11;
                    return Op::Exit;
                }
            };
            if let Some(op) = op {
                return op;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::testutil::*;

    fn graph(scale: u32, edge_factor: u32) -> Graph {
        Graph::new(&BfsParams { scale, edge_factor }, 42)
    }

    #[test]
    fn offsets_are_the_kronecker_shares() {
        let g = graph(10, 16);
        let (v, e) = (1024u64, 16 * 1024u64);
        assert_eq!((g.offset(0), g.offset(v)), (0, e));
        assert!((0..v).all(|u| g.offset(u) <= g.offset(u + 1)));
        // The hub (R-MAT id 0, label = mask) has E (3/4)^10 edges; R-MAT id 1 a third of that.
        let hub = e as f64 * 0.75f64.powi(10);
        assert!((g.degree(g.mask) as f64 - hub).abs() <= 1.0, "{} vs {hub}", g.degree(g.mask));
        assert!((g.degree(g.mask ^ 1) as f64 - hub / 3.0).abs() <= 1.0);
        // Targets follow the same shares: about (3/4)^10 of all edges point at the hub.
        let to_hub = (0..e).filter(|&x| g.target(x) == g.mask).count() as f64;
        assert!((to_hub - hub).abs() < 4.0 * hub.sqrt(), "{to_hub} vs {hub}");
    }

    #[test]
    fn another_seed_draws_other_edges_not_only_other_labels() {
        // The label mask alone would give the same graph relabelled: the R-MAT ids of the targets
        // (target XOR mask) differ too.
        let (a, b) = (Graph::new(&BfsParams { scale: 10, edge_factor: 4 }, 1), Graph::new(&BfsParams { scale: 10, edge_factor: 4 }, 2));
        assert_ne!(a.mask, b.mask);
        let same = (0..4096).filter(|&e| a.target(e) ^ a.mask == b.target(e) ^ b.mask).count();
        // Two independent R-MAT draws agree on about sum_u share(u)^2 = (5/8)^10 of the edges: 0.9%.
        assert!(same < 200, "{same} of 4096");
    }

    #[test]
    fn levels_are_a_breadth_first_search() {
        let g = graph(10, 4);
        assert_eq!(g.level(g.root), 0);
        let mut reached = 0;
        for u in 0..1024 {
            let l = g.level(u);
            if l == UNREACHED {
                continue;
            }
            reached += 1;
            for j in 0..g.degree(u) {
                // Every edge goes at most one level down.
                let t = g.level(g.target(g.offset(u) + j));
                assert!(t != UNREACHED && t <= l + 1, "{u} at {l} -> {t}");
            }
        }
        // Every level below the depth is reached, the depth is not (the last launch finds nothing new).
        assert!((0..g.depth as u8).all(|k| (0..1024).any(|u| g.level(u) == k)));
        assert!(!(0..1024).any(|u| g.level(u) == g.depth as u8));
        assert!(reached > 100, "{reached}");
    }

    #[test]
    fn a_frontier_warp_reads_its_lists_and_marks_new_vertices() {
        let p = program(&["workload.kind=bfs", "workload.bfs.scale=8", "workload.bfs.edge_factor=4"]);
        let (off, nbr, lvl) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let k = match &kernels(&p)[1].gen {
            KernelGen::Bfs(k) => k.as_ref().clone(),
            _ => unreachable!(),
        };
        let g = k.graph();
        // Launch 1 (frontier = level 1): find a warp with frontier vertices.
        let (wi, mut w) = warps(&p, 1).into_iter().enumerate().find(|(i, _)| (0..32).any(|l| g.level(*i as u64 * 32 + l) == 1)).unwrap();
        let front: Vec<u64> = (0..32).map(|l| wi as u64 * 32 + l).filter(|&v| g.level(v) == 1).collect();
        let ops = mem_ops(&mut w);
        assert_eq!(ops[0], (MemKind::Load, (0..32).map(|l| lvl + 4 * (wi as u64 * 32 + l)).collect()));
        assert_eq!(ops[1].1, front.iter().map(|v| off + 8 * v).collect::<Vec<_>>());
        assert_eq!(ops[2].1, front.iter().map(|v| off + 8 * (v + 1)).collect::<Vec<_>>());
        // Neighbour 0 of every frontier vertex with one: its id, its level, and a store if it is new at level 2.
        let with: Vec<u64> = front.iter().copied().filter(|&v| g.degree(v) > 0).collect();
        assert_eq!(ops[3].1, with.iter().map(|&v| nbr + 4 * g.offset(v)).collect::<Vec<_>>());
        let t: Vec<u64> = with.iter().map(|&v| g.target(g.offset(v))).collect();
        assert_eq!(ops[4].1, t.iter().map(|x| lvl + 4 * x).collect::<Vec<_>>());
        let new: Vec<u64> = t.iter().filter(|&&x| g.level(x) == 2).map(|x| lvl + 4 * x).collect();
        if !new.is_empty() {
            assert_eq!(ops[5], (MemKind::Store, new));
        }
        // The warp reads exactly its frontier's edges.
        let ids: usize =
            ops.iter().filter(|(_, a)| a.first().is_some_and(|&x| x >= nbr && x < nbr + p.buffers[1].bytes)).map(|(_, a)| a.len()).sum();
        assert_eq!(ids as u64, front.iter().map(|&v| g.degree(v)).sum::<u64>());
        // A warp without frontier vertices loads its levels and exits.
        let idle = (0..8).find(|&i| (0..32).all(|l| g.level(i * 32 + l) != 1)).map(|i| mem_ops(&mut warps(&p, 1)[i as usize]).len());
        assert!(idle.is_none_or(|n| n == 1));
    }

    /// Every warp of every launch against the kernel's loop written out: load level[v], wait; the
    /// frontier lanes (level k) load offsets[v] and offsets[v+1], wait; per neighbour j of the lanes
    /// that have one: the id, wait, its level, wait, compute, and level[w] = k + 1 stored for the
    /// neighbours unvisited when the launch began (the store is left out when there are none).
    #[test]
    fn every_warp_of_every_launch_runs_the_kernels_loop() {
        let p = program(&["workload.kind=bfs", "workload.bfs.scale=8", "workload.bfs.edge_factor=4", "workload.compute_cycles=7"]);
        let (off, nbr, lvl) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let k0 = match &kernels(&p)[0].gen {
            KernelGen::Bfs(k) => k.as_ref().clone(),
            _ => unreachable!(),
        };
        let g = k0.graph();
        // One launch per level, the last finding nothing new.
        let top = (0..256).map(|u| g.level(u)).filter(|&l| l != UNREACHED).max().unwrap();
        assert_eq!(kernels(&p).len(), top as usize + 1);
        let (mut skipped, mut stored, mut behind) = (0, 0, 0);
        for k in 0..=top {
            for (wi, w) in warps(&p, k as usize).iter_mut().enumerate() {
                let vs: Vec<u64> = (32 * wi as u64..32 * wi as u64 + 32).collect();
                let mut want = vec![('l', vs.iter().map(|v| lvl + 4 * v).collect()), ('w', vec![])];
                let front: Vec<u64> = vs.iter().copied().filter(|&v| g.level(v) == k).collect();
                behind += vs.iter().filter(|&&v| g.level(v) < k).count();
                if !front.is_empty() {
                    want.push(('l', front.iter().map(|v| off + 8 * v).collect()));
                    want.push(('l', front.iter().map(|v| off + 8 * (v + 1)).collect()));
                    want.push(('w', vec![]));
                }
                for j in 0.. {
                    let lanes: Vec<u64> = front.iter().copied().filter(|&v| g.degree(v) > j).collect();
                    if lanes.is_empty() {
                        break;
                    }
                    let t: Vec<u64> = lanes.iter().map(|&v| g.target(g.offset(v) + j)).collect();
                    want.push(('l', lanes.iter().map(|&v| nbr + 4 * (g.offset(v) + j)).collect()));
                    want.push(('w', vec![]));
                    want.push(('l', t.iter().map(|x| lvl + 4 * x).collect()));
                    want.extend([('w', vec![]), ('c', vec![7])]);
                    let new: Vec<u64> = t.iter().copied().filter(|&x| g.level(x) == k + 1).collect();
                    skipped += t.len() - new.len();
                    stored += new.len();
                    if !new.is_empty() {
                        want.push(('s', new.iter().map(|x| lvl + 4 * x).collect()));
                    }
                }
                assert_eq!(ops_with_addrs(w), want, "launch {k}, warp {wi}");
            }
        }
        // The graph has edges back to visited vertices (no store), new ones, and vertices behind the frontier.
        assert!(skipped > 0 && stored > 0 && behind > 0, "{skipped} {stored} {behind}");
        // Offsets (257 x 8 bytes), neighbour ids (1024 x 4) and levels (256 x 4, the root's 0 and the rest
        // unvisited) are all copied.
        assert_eq!(p.host.input_bytes, Some(2056 + 4096 + 1024));
        assert_footprint_is_the_buffers(&["workload.kind=bfs", "workload.bfs.scale=9", "workload.bfs.edge_factor=3"]);
    }

    #[test]
    fn first_touch_is_levels_then_the_roots_lists_then_the_frontiers() {
        let p = program(&["workload.kind=bfs", "workload.bfs.scale=12"]);
        let g = match &kernels(&p)[0].gen {
            KernelGen::Bfs(k) => k.graph().root,
            _ => unreachable!(),
        };
        let ft = first_touch(&p);
        // 4096 levels = 4 pages, then the root's offsets page and the start of its neighbour list.
        assert_eq!(ft[..4], [(2, 0), (2, 1), (2, 2), (2, 3)]);
        assert_eq!(ft[4], (0, g * 8 / 4096));
        assert_eq!(ft[5].0, 1);
        assert!(ft[4..].iter().all(|&(b, _)| b != 2));
    }
}
