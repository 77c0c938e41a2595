//! `xsbench` (XSBench, event-based, unionized energy grid): each lookup picks
//! an energy and `nuclides_per_lookup` nuclides (seeded hashes of the lookup
//! index), binary-searches the unionized energy grid (`nuclides *
//! gridpoints` sorted energies, 8 B each: dependent probes, divergent across
//! lanes), then per nuclide loads its entry of the index grid row of the
//! energy found (`index_grid[e][nuclide]`, 4 B), waits, and loads the two
//! bracketing points of that nuclide's grid (2 x 48 B: energy + 5 cross
//! sections), waits and computes. Thread t makes lookups t, t + threads, ...;
//! lane l of a warp handles its own lookup (all lanes divergent).
//!
//! Unsorted lookups draw the energy uniformly; sorted ones (the svm-apu
//! "sorted" variant) are order statistics of the same distribution, so
//! adjacent lanes and warps search nearby energies. The unionized grid is
//! modelled as every nuclide's points interleaved evenly, so energy index e
//! is at point e / nuclides of every nuclide grid.
//!
//! Simplified from XSBench: the nuclides of a lookup are uniform with
//! replacement (XSBench draws a material, then uses its fixed nuclide list;
//! fuel has many more nuclides than the others); the result write-back is not
//! modelled. Arrays in allocation order: unionized energies, index grid,
//! nuclide grids. First touch (lockstep): the energy grid's middle page, then
//! the pages the binary searches reach level by level (unsorted: soon all of
//! them), then per nuclide step the index-grid rows and nuclide-grid pages of
//! the found energies.

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;
use crate::sim::mix64;

section! {
    /// Parameters of the XSBench cross-section lookup kernel.
    pub struct XsbenchParams {
        /// Nuclides (isotopes).
        pub nuclides: u64 = 68,
        /// Energy grid points per nuclide.
        pub gridpoints: u64 = 1000,
        /// Total lookups.
        pub lookups: u64 = 32_768,
        /// Threads; each makes lookups / threads lookups in turn.
        pub threads: u64 = 16_384,
        /// Nuclides whose cross sections each lookup reads.
        pub nuclides_per_lookup: u32 = 8,
        /// Sort the lookups by energy (adjacent threads search nearby energies).
        pub sorted: bool = false,
    }
}

/// Bytes of one nuclide grid point: energy and 5 cross sections, doubles.
const POINT_BYTES: u64 = 48;

impl XsbenchParams {
    pub fn validate(&self, p: &str, warp: u32) -> Result<(), (String, String)> {
        check(p, "nuclides", self.nuclides, 1, 1 << 16)?;
        check(p, "gridpoints", self.gridpoints, 2, 1 << 24)?;
        check(p, "lookups", self.lookups, 1, 1 << 36)?;
        if self.threads == 0 || self.threads % warp as u64 != 0 {
            return Err((format!("{p}.threads"), format!("must be a positive multiple of gpu.warp_size ({warp}), got {}", self.threads)));
        }
        check(p, "nuclides_per_lookup", self.nuclides_per_lookup as u64, 1, 1024)
    }

    /// Unionized energies, index grid, nuclide grids.
    pub fn footprint(&self) -> u128 {
        let u = self.nuclides as u128 * self.gridpoints as u128;
        8 * u + 4 * u * self.nuclides as u128 + POINT_BYTES as u128 * u
    }
}

#[derive(Debug, Clone)]
pub struct XsbenchKernel {
    energy: Buffer,
    index: Buffer,
    grids: Buffer,
    p: XsbenchParams,
    seed: u64,
    compute: u32,
}

pub(super) fn build(p: &XsbenchParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let u = p.nuclides * p.gridpoints;
    let energy = va.alloc(u * 8, page);
    let index = va.alloc(u * p.nuclides * 4, page);
    let grids = va.alloc(u * POINT_BYTES, page);
    let ws = cfg.gpu.warp_size as u64;
    let gen = KernelGen::Xsbench(Box::new(XsbenchKernel {
        energy,
        index,
        grids,
        p: p.clone(),
        seed: mix64(cfg.sim.seed ^ 0x7873_6265),
        compute: w.compute_cycles,
    }));
    let threads = p.threads.min(p.lookups.div_ceil(ws) * ws);
    (vec![KernelSpec { name: "xsbench", threads, threads_per_cta: w.threads_per_cta, gen }], energy.bytes + index.bytes + grids.bytes)
}

impl XsbenchKernel {
    fn union_points(&self) -> u64 {
        self.p.nuclides * self.p.gridpoints
    }

    /// Unionized-grid index of lookup `i`'s energy: uniform, or the i-th order statistic when sorted.
    pub fn energy_index(&self, i: u64) -> u64 {
        let u = self.union_points();
        let h = mix64(self.seed ^ i);
        if self.p.sorted {
            let num = ((i as u128) << 32 | (h >> 32) as u128) * u as u128;
            ((num / ((self.p.lookups as u128) << 32)) as u64).min(u - 1)
        } else {
            ((h as u128 * u as u128) >> 64) as u64
        }
    }

    /// The j-th nuclide of lookup `i`.
    pub fn nuclide(&self, i: u64, j: u32) -> u64 {
        let h = mix64(self.seed.rotate_left(17) ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ j as u64);
        ((h as u128 * self.p.nuclides as u128) >> 64) as u64
    }

    /// Address of the lower bracketing point of nuclide `n` for unionized index `e`.
    pub fn point(&self, n: u64, e: u64) -> u64 {
        let p = (e / self.p.nuclides).min(self.p.gridpoints - 2);
        self.grids.base + (n * self.p.gridpoints + p) * POINT_BYTES
    }

    pub fn warp(&self, id: WarpId) -> XsbenchWarp {
        XsbenchWarp {
            k: self.clone(),
            first: id.first_thread,
            width: id.lanes,
            round: 0,
            n: 0,
            phase: 0,
            j: 0,
            target: [0; MAX_LANES],
            lo: [0; MAX_LANES],
            hi: [0; MAX_LANES],
        }
    }
}

#[derive(Debug, Clone)]
pub struct XsbenchWarp {
    k: XsbenchKernel,
    first: u64,
    width: u32,
    /// Lane l handles lookup round * threads + first + l.
    round: u64,
    n: u32,
    phase: u8,
    /// Nuclide step of the lookup.
    j: u32,
    target: [u64; MAX_LANES],
    lo: [u64; MAX_LANES],
    hi: [u64; MAX_LANES],
}

impl XsbenchWarp {
    fn lookup0(&self) -> u64 {
        self.round * self.k.p.threads + self.first
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let u = self.k.union_points();
        loop {
            match self.phase {
                // A new round of lookups: draw the energies, start the searches.
                0 => {
                    let i0 = self.lookup0();
                    if i0 >= self.k.p.lookups {
                        return Op::Exit;
                    }
                    self.n = (self.k.p.lookups - i0).min(self.width as u64) as u32;
                    for l in 0..self.n as usize {
                        self.target[l] = self.k.energy_index(i0 + l as u64);
                        (self.lo[l], self.hi[l]) = (0, u);
                    }
                    self.phase = 1;
                }
                // One probe of every unfinished binary search.
                1 => {
                    let mut m = 0;
                    for l in 0..self.n as usize {
                        let (lo, hi) = (self.lo[l], self.hi[l]);
                        if hi - lo > 1 {
                            let mid = lo + (hi - lo) / 2;
                            scratch[m] = self.k.energy.base + mid * 8;
                            m += 1;
                            if self.target[l] >= mid {
                                self.lo[l] = mid;
                            } else {
                                self.hi[l] = mid;
                            }
                        }
                    }
                    if m == 0 {
                        self.phase = 3;
                        continue;
                    }
                    self.phase = 2;
                    return Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: m as u32 }, bytes: 8 };
                }
                2 => {
                    self.phase = 1;
                    return Op::Wait;
                }
                // Per nuclide: its index-grid entry, wait, its two grid points, wait, compute.
                3 => {
                    let (i0, nuc) = (self.lookup0(), self.k.p.nuclides);
                    for (l, slot) in scratch.iter_mut().take(self.n as usize).enumerate() {
                        *slot = self.k.index.base + (self.lo[l] * nuc + self.k.nuclide(i0 + l as u64, self.j)) * 4;
                    }
                    self.phase = 4;
                    return Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: self.n }, bytes: 4 };
                }
                4 | 6 => {
                    self.phase += 1;
                    return Op::Wait;
                }
                5 => {
                    let i0 = self.lookup0();
                    for (l, slot) in scratch.iter_mut().take(self.n as usize).enumerate() {
                        *slot = self.k.point(self.k.nuclide(i0 + l as u64, self.j), self.lo[l]);
                    }
                    self.phase = 6;
                    return Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: self.n }, bytes: 2 * POINT_BYTES as u32 };
                }
                _ => {
                    self.j += 1;
                    if self.j == self.k.p.nuclides_per_lookup {
                        (self.j, self.round) = (0, self.round + 1);
                        self.phase = 0;
                    } else {
                        self.phase = 3;
                    }
                    return Op::Compute(self.k.compute);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::KernelGen;

    fn kernel(p: &crate::workload::Program) -> &super::XsbenchKernel {
        match &kernels(p)[0].gen {
            KernelGen::Xsbench(k) => k,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_lookup_searches_the_grid_then_reads_each_nuclide() {
        // 16 nuclides x 64 points = 1024 unionized energies: 10 probes.
        let p = program(&[
            "workload.kind=xsbench",
            "workload.xsbench.nuclides=16",
            "workload.xsbench.gridpoints=64",
            "workload.xsbench.lookups=32",
            "workload.xsbench.threads=32",
            "workload.xsbench.nuclides_per_lookup=3",
        ]);
        let k = kernel(&p);
        let (energy, index) = (p.buffers[0].base, p.buffers[1].base);
        let ops = mem_ops(&mut warps(&p, 0)[0]);
        assert_eq!(ops.len(), 10 + 3 * 2);
        // Lane 5's probes converge on its energy index.
        let e = k.energy_index(5);
        let probes: Vec<u64> = ops[..10].iter().map(|(_, a)| (a[5] - energy) / 8).collect();
        assert_eq!(probes[0], 512);
        assert!(probes[9] == e || probes[9] == e + 1, "{probes:?} -> {e}");
        // Then per nuclide: the index-grid entry of that energy, and the nuclide's grid points there.
        for j in 0..3 {
            let n = k.nuclide(5, j);
            assert_eq!(ops[10 + 2 * j as usize].1[5], index + (e * 16 + n) * 4);
            assert_eq!(ops[11 + 2 * j as usize].1[5], k.point(n, e));
        }
    }

    #[test]
    fn sorted_lookups_have_nondecreasing_energies() {
        let p = program(&["workload.kind=xsbench", "workload.xsbench.sorted=true"]);
        let k = kernel(&p);
        let e: Vec<u64> = (0..32_768).map(|i| k.energy_index(i)).collect();
        assert!(e.windows(2).all(|w| w[0] <= w[1]) && e[0] < 10 && *e.last().unwrap() > 68_000 - 10);
    }
}
