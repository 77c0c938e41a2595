//! `xsbench` (XSBench, event-based, unionized energy grid): each lookup picks
//! an energy and `nuclides_per_lookup` nuclides (seeded hashes of the lookup
//! index), binary-searches the unionized energy grid (`nuclides *
//! gridpoints` sorted energies, 8 B each: dependent probes, divergent across
//! lanes), then per nuclide loads its entry of the index grid row of the
//! energy found (`index_grid[e][nuclide]`, 4 B), waits, and reads the two
//! bracketing points of that nuclide's grid (energy + 5 cross sections, 48 B
//! each) 8 bytes at a time in `calculate_micro_xs`'s order: the upper energy,
//! wait, the lower energy, wait, then each cross section's lower and upper
//! value, wait (7 round trips, as in the kernel's PTX: docs/workloads.md,
//! "Load order"; before 2026-12-01 both points were one 96-byte load), and
//! computes. Thread t makes lookups t, t + threads, ...;
//! lane l of a warp handles its own lookup (all lanes divergent).//!
//! Unsorted lookups draw the energy uniformly; sorted ones (the svm-apu
//! "sorted" variant) are order statistics of the same distribution, so
//! adjacent lanes and warps search nearby energies. The unionized grid is
//! modelled as every nuclide's points interleaved evenly, so energy index e
//! is at point e / nuclides of every nuclide grid.
//!
//! Nuclides: by default a lookup's `nuclides_per_lookup` nuclides are uniform
//! with replacement (a simplification). With `materials = true` a lookup draws
//! one of XSBench's 12 materials by its volume fraction (`pick_mat`: fuel 13.9%,
//! cold borated water 27.5%, ...) and reads that material's fixed nuclide list
//! (`load_mats`, Hoogenboom-Martin small with 68 nuclides or large with 355:
//! fuel 34 or 321 nuclides, the others 4 to 27, the borated water's 24, 41, 4
//! and 5 in 9 of the 12), so lanes of a warp read different numbers of
//! nuclides and a few nuclide grids are hot. A lookup then loads its
//! material's nuclide count (`num_nucs[mat]`) and waits, and each nuclide
//! step first loads the nuclide's concentration and id (`concs` and `mats`
//! at `[mat * max_num_nucs + j]`) and waits. The result write-back is not
//! modelled. Arrays in allocation order: unionized energies, index grid,
//! nuclide grids (with materials: `num_nucs`, `mats`, `concs`). First touch (lockstep): the energy grid's middle page, then
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
        /// XSBench's materials: each lookup draws a material by its volume fraction and reads its
        /// nuclide list (XSBench's `pick_mat` and `load_mats`); needs nuclides = 68 (H-M small) or
        /// 355 (H-M large). nuclides_per_lookup is then not read. false: nuclides_per_lookup uniform
        /// nuclides (a simplification; the Zheng suite runs materials since session 39).
        pub materials: bool = false,
    }
}

/// XSBench's 12 materials (`load_mats`, H-M small): fuel, cladding, cold and hot borated water,
/// reactor pressure vessel, lower radial reflector, top reflector, bottom plate, bottom and top
/// nozzles, top and bottom of the fuel assemblies. H-M large adds nuclides 68..354 to the fuel.
const MATERIALS: [&[u16]; 12] = [
    &[58, 59, 60, 61, 40, 42, 43, 44, 45, 46, 1, 2, 3, 7, 8, 9, 10, 29, 57, 47, 48, 0, 62, 15, 33, 34, 52, 53, 54, 55, 56, 18, 23, 41],
    &[63, 64, 65, 66, 67],
    &[24, 41, 4, 5],
    &[24, 41, 4, 5],
    &[19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 27, 28, 29, 30, 31, 32, 26, 49, 50, 51, 11, 12, 13, 14, 6, 16, 17],
    &[24, 41, 4, 5, 19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 49, 50, 51, 11, 12, 13, 14],
    &[24, 41, 4, 5, 19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 49, 50, 51, 11, 12, 13, 14],
    &[24, 41, 4, 5, 19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 49, 50, 51, 11, 12, 13, 14],
    &[24, 41, 4, 5, 19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 49, 50, 51, 11, 12, 13, 14],
    &[24, 41, 4, 5, 19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 49, 50, 51, 11, 12, 13, 14],
    &[24, 41, 4, 5, 63, 64, 65, 66, 67],
    &[24, 41, 4, 5, 63, 64, 65, 66, 67],
];

/// Each material's share of the lookups (XSBench's `pick_mat`, volume fractions in the core), in
/// thousandths. They sum to 1001: pick_mat draws materials 1..11 first, so the fuel gets 139.
const MATERIAL_PERMILLE: [u64; 12] = [140, 52, 275, 134, 154, 64, 66, 55, 8, 15, 25, 13];

/// H-M large's fuel: the small fuel's 34 nuclides and 68..354.
const LARGE_FUEL: u64 = 321;

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
        if self.materials && self.nuclides != 68 && self.nuclides != 355 {
            return Err((
                format!("{p}.nuclides"),
                format!("must be 68 (H-M small) or 355 (H-M large) with {p}.materials = true, got {}", self.nuclides),
            ));
        }
        check(p, "nuclides_per_lookup", self.nuclides_per_lookup as u64, 1, 1024)
    }

    /// Unionized energies, index grid, nuclide grids (and with `materials` the material tables).
    pub fn footprint(&self) -> u128 {
        let u = self.nuclides as u128 * self.gridpoints as u128;
        let tables = if self.materials { 12 * 4 + 12 * 12 * self.max_num_nucs() as u128 } else { 0 };
        8 * u + 4 * u * self.nuclides as u128 + POINT_BYTES as u128 * u + tables
    }

    /// XSBench's `max_num_nucs`: the fuel's nuclide count, the longest list.
    pub fn max_num_nucs(&self) -> u64 {
        if self.nuclides > 68 {
            LARGE_FUEL
        } else {
            MATERIALS[0].len() as u64
        }
    }
}

#[derive(Debug, Clone)]
pub struct XsbenchKernel {
    energy: Buffer,
    index: Buffer,
    grids: Buffer,
    /// With `materials`: `num_nucs` (12 ints), `mats` (12 x max_num_nucs ints), `concs` (doubles).
    mats: Option<[Buffer; 3]>,
    p: XsbenchParams,
    seed: u64,
    compute: u32,
}

pub(super) fn build(p: &XsbenchParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let u = p.nuclides * p.gridpoints;
    let energy = va.alloc(u * 8, page);
    let index = va.alloc(u * p.nuclides * 4, page);
    let grids = va.alloc(u * POINT_BYTES, page);
    let mats = p.materials.then(|| {
        let max = p.max_num_nucs();
        [va.alloc(12 * 4, page), va.alloc(12 * max * 4, page), va.alloc(12 * max * 8, page)]
    });
    let ws = cfg.gpu.warp_size as u64;
    let inputs = energy.bytes + index.bytes + grids.bytes + mats.map_or(0, |m| m.iter().map(|b| b.bytes).sum());
    let gen = KernelGen::Xsbench(Box::new(XsbenchKernel {
        energy,
        index,
        grids,
        mats,
        p: p.clone(),
        seed: mix64(cfg.sim.seed ^ 0x7873_6265),
        compute: w.compute_cycles,
    }));
    let threads = p.threads.min(p.lookups.div_ceil(ws) * ws);
    (vec![KernelSpec { name: "xsbench", threads, threads_per_cta: w.threads_per_cta, gen }], inputs)
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

    /// Lookup `i`'s material (with `materials`), drawn by the volume fractions.
    pub fn material(&self, i: u64) -> usize {
        let roll = ((mix64(self.seed.rotate_left(29) ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93)) as u128 * 1000) >> 64) as u64;
        // As pick_mat: materials 1..11 by their fractions, the fuel takes the rest (13.9%).
        let mut acc = 0;
        for (m, &w) in MATERIAL_PERMILLE.iter().enumerate().skip(1) {
            acc += w;
            if roll < acc {
                return m;
            }
        }
        0
    }

    /// Nuclides lookup `i` reads.
    pub fn nuclide_count(&self, i: u64) -> u32 {
        if !self.p.materials {
            return self.p.nuclides_per_lookup;
        }
        match self.material(i) {
            0 if self.p.nuclides > 68 => LARGE_FUEL as u32,
            m => MATERIALS[m].len() as u32,
        }
    }

    /// The j-th nuclide of lookup `i` (j < [`Self::nuclide_count`]).
    pub fn nuclide(&self, i: u64, j: u32) -> u64 {
        if self.p.materials {
            let list = MATERIALS[self.material(i)];
            return list.get(j as usize).map_or(68 + j as u64 - list.len() as u64, |&n| n as u64);
        }
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
            pt: 0,
            steps: 0,
            count: [0; MAX_LANES],
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
    /// Position in [`POINT_LOADS`].
    pt: usize,
    /// Nuclide steps of this round (the most any lane's lookup reads).
    steps: u32,
    /// Nuclides each lane's lookup reads.
    count: [u32; MAX_LANES],
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
                    self.steps = 0;
                    for l in 0..self.n as usize {
                        self.target[l] = self.k.energy_index(i0 + l as u64);
                        (self.lo[l], self.hi[l]) = (0, u);
                        self.count[l] = self.k.nuclide_count(i0 + l as u64);
                        self.steps = self.steps.max(self.count[l]);
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
                // With materials: the lookup's nuclide count (`num_nucs[mat]`), wait.
                3 => {
                    self.phase = 10;
                    if let Some([nucs, _, _]) = self.k.mats {
                        let i0 = self.lookup0();
                        for (l, a) in scratch.iter_mut().enumerate().take(self.n as usize) {
                            *a = nucs.base + self.k.material(i0 + l as u64) as u64 * 4;
                        }
                        self.phase = 9;
                        return Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: self.n }, bytes: 4 };
                    }
                }
                9 | 12 | 14 => {
                    self.phase += 1;
                    return Op::Wait;
                }
                // Per nuclide (lanes whose lookup has read all its nuclides are idle): with
                // materials its concentration and id (`concs`, `mats` at [mat][j]), wait; its
                // index-grid entry, wait; its two grid points, as POINT_LOADS; compute.
                10 | 11 => {
                    let Some([_, ids, concs]) = self.k.mats else {
                        self.phase = 13;
                        continue;
                    };
                    let (i0, max) = (self.lookup0(), self.k.p.max_num_nucs());
                    let (buf, bytes) = if self.phase == 10 { (concs, 8) } else { (ids, 4) };
                    let mut m = 0;
                    for l in (0..self.n as usize).filter(|&l| self.j < self.count[l]) {
                        scratch[m] = buf.base + (self.k.material(i0 + l as u64) as u64 * max + self.j as u64) * bytes;
                        m += 1;
                    }
                    self.phase += 1;
                    return Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: m as u32 }, bytes: bytes as u32 };
                }
                13 => {
                    let (i0, nuc) = (self.lookup0(), self.k.p.nuclides);
                    let mut m = 0;
                    for l in (0..self.n as usize).filter(|&l| self.j < self.count[l]) {
                        scratch[m] = self.k.index.base + (self.lo[l] * nuc + self.k.nuclide(i0 + l as u64, self.j)) * 4;
                        m += 1;
                    }
                    self.phase = 14;
                    return Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: m as u32 }, bytes: 4 };
                }
                15 => {
                    let Some(&step) = POINT_LOADS.get(self.pt) else {
                        (self.pt, self.phase) = (0, 16);
                        continue;
                    };
                    self.pt += 1;
                    let Some(off) = step else { return Op::Wait };
                    let i0 = self.lookup0();
                    let mut m = 0;
                    for l in (0..self.n as usize).filter(|&l| self.j < self.count[l]) {
                        scratch[m] = self.k.point(self.k.nuclide(i0 + l as u64, self.j), self.lo[l]) + off;
                        m += 1;
                    }
                    return Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: m as u32 }, bytes: 8 };
                }
                _ => {
                    self.j += 1;
                    if self.j == self.steps {
                        (self.j, self.round) = (0, self.round + 1);
                        self.phase = 0;
                    } else {
                        self.phase = 10;
                    }
                    return Op::Compute(self.k.compute);
                }
            }
        }
    }
}

/// `calculate_micro_xs`'s reads of the two bracketing points (byte offsets from the lower one;
/// None: the warp waits), in the order of its PTX (NVRTC 12.9, -O3; docs/workloads.md, "Load
/// order"): the upper energy, the lower energy (each used at once by the interpolation factor),
/// then the five cross sections, each lower and upper pair waited for together: 7 round trips.
const POINT_LOADS: [Option<u64>; 19] = [
    Some(POINT_BYTES),
    None,
    Some(0),
    None,
    Some(8),
    Some(POINT_BYTES + 8),
    None,
    Some(16),
    Some(POINT_BYTES + 16),
    None,
    Some(24),
    Some(POINT_BYTES + 24),
    None,
    Some(32),
    Some(POINT_BYTES + 32),
    None,
    Some(40),
    Some(POINT_BYTES + 40),
    None,
];

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
        assert_eq!(ops.len(), 10 + 3 * 13);
        // Lane 5's probes converge on its energy index.
        let e = k.energy_index(5);
        let probes: Vec<u64> = ops[..10].iter().map(|(_, a)| (a[5] - energy) / 8).collect();
        assert_eq!(probes[0], 512);
        assert!(probes[9] == e || probes[9] == e + 1, "{probes:?} -> {e}");
        // Then per nuclide: the index-grid entry of that energy, and the nuclide's grid points
        // there, 8 bytes at a time: upper energy, lower energy, then each cross section's pair.
        let offsets = [48, 0, 8, 56, 16, 64, 24, 72, 32, 80, 40, 88];
        for j in 0..3 {
            let (n, at) = (k.nuclide(5, j), 10 + 13 * j as usize);
            assert_eq!(ops[at].1[5], index + (e * 16 + n) * 4);
            let got: Vec<u64> = ops[at + 1..at + 13].iter().map(|(_, a)| a[5] - k.point(n, e)).collect();
            assert_eq!(got, offsets);
        }
        // One round trip per probe, for the index grid, and 7 for the points (as the PTX).
        let shape = op_shape(&all_ops(&mut warps(&p, 0)[0]));
        assert_eq!(shape, format!("{}{}", "mw".repeat(10), "mwmwmwmmwmmwmmwmmwmmwc".repeat(3)));
    }

    #[test]
    fn materials_follow_xsbench_volume_fractions_and_nuclide_lists() {
        let p = program(&["workload.kind=xsbench", "workload.xsbench.materials=true"]);
        let k = kernel(&p);
        let mut seen = [0u64; 12];
        for i in 0..100_000 {
            seen[k.material(i)] += 1;
        }
        // pick_mat: cold borated water 27.5%, RPV 15.4%, fuel the rest after materials 1..11, 13.9%.
        for (m, want) in [(2, 0.275), (4, 0.154), (0, 0.139), (8, 0.008)] {
            let got = seen[m] as f64 / 100_000.0;
            assert!((got - want).abs() < 0.005, "material {m}: {got} against {want}");
        }
        // A lookup reads its material's list in order: fuel's 34 (H-M small), water's 24, 41, 4, 5.
        let fuel = (0..).find(|&i| k.material(i) == 0).unwrap();
        assert_eq!(k.nuclide_count(fuel), 34);
        assert_eq!((0..3).map(|j| k.nuclide(fuel, j)).collect::<Vec<_>>(), [58, 59, 60]);
        let water = (0..).find(|&i| k.material(i) == 2).unwrap();
        assert_eq!((0..4).map(|j| k.nuclide(water, j)).collect::<Vec<_>>(), [24, 41, 4, 5]);
        // H-M large: the fuel adds nuclides 68..354 after the small fuel's 34.
        let p = program(&["workload.kind=xsbench", "workload.xsbench.materials=true", "workload.xsbench.nuclides=355"]);
        let k = kernel(&p);
        let fuel = (0..).find(|&i| k.material(i) == 0).unwrap();
        assert_eq!(k.nuclide_count(fuel), 321);
        assert_eq!((k.nuclide(fuel, 33), k.nuclide(fuel, 34), k.nuclide(fuel, 320)), (41, 68, 354));
    }

    #[test]
    fn with_materials_lanes_drop_out_after_their_last_nuclide() {
        let p = program(&[
            "workload.kind=xsbench",
            "workload.xsbench.materials=true",
            "workload.xsbench.gridpoints=16",
            "workload.xsbench.lookups=32",
            "workload.xsbench.threads=32",
        ]);
        let k = kernel(&p);
        let counts: Vec<u32> = (0..32).map(|i| k.nuclide_count(i)).collect();
        let steps = *counts.iter().max().unwrap();
        let ops = mem_ops(&mut warps(&p, 0)[0]);
        // 68 x 16 = 1088 unionized energies: 11 probes; num_nucs; then per step the concentration
        // and the nuclide id, an index-grid load and 12 grid-point loads.
        assert_eq!(ops.len(), 11 + 1 + 15 * steps as usize);
        let (nucs, ids, concs) = (p.buffers[3].base, p.buffers[4].base, p.buffers[5].base);
        assert_eq!(ops[11].1, (0..32).map(|i| nucs + 4 * k.material(i) as u64).collect::<Vec<_>>());
        for j in 0..steps {
            let active: Vec<u64> = (0..32).filter(|&i| counts[i as usize] > j).collect();
            let at = 12 + 15 * j as usize;
            let row = |i: u64, b: u64, s: u64| b + (k.material(i) as u64 * 34 + j as u64) * s;
            assert_eq!(ops[at].1, active.iter().map(|&i| row(i, concs, 8)).collect::<Vec<_>>(), "step {j}");
            assert_eq!(ops[at + 1].1, active.iter().map(|&i| row(i, ids, 4)).collect::<Vec<_>>(), "step {j}");
            for o in &ops[at + 2..at + 15] {
                assert_eq!(o.1.len(), active.len(), "step {j}");
            }
        }
        assert!(counts.iter().any(|&c| c < steps), "the warp mixes materials: {counts:?}");
        let shape = op_shape(&all_ops(&mut warps(&p, 0)[0]));
        assert!(shape.starts_with(&format!("{}mwmmwmw", "mw".repeat(11))), "{shape}");
    }

    #[test]
    fn materials_need_the_hoogenboom_martin_nuclide_counts() {
        let p = super::XsbenchParams { materials: true, nuclides: 100, ..Default::default() };
        let (key, msg) = p.validate("workload.xsbench", 32).unwrap_err();
        assert_eq!(key, "workload.xsbench.nuclides");
        assert!(msg.contains("68") && msg.contains("355"), "{msg}");
        assert!(super::XsbenchParams { materials: true, ..Default::default() }.validate("workload.xsbench", 32).is_ok());
    }

    #[test]
    fn sorted_lookups_have_nondecreasing_energies() {
        let p = program(&["workload.kind=xsbench", "workload.xsbench.sorted=true"]);
        let k = kernel(&p);
        let e: Vec<u64> = (0..32_768).map(|i| k.energy_index(i)).collect();
        assert!(e.windows(2).all(|w| w[0] <= w[1]) && e[0] < 10 && *e.last().unwrap() > 68_000 - 10);
    }

    #[test]
    fn two_point_grids_threads_capped_by_lookups_and_the_host_copies_all_three_grids() {
        // 1 nuclide of 2 grid points: the union grid has u = 2 energies and a lookup's search ends at lo = its
        // target (0 or 1); the interpolation reads points 0 and 1 of the nuclide (min(lo, 2 - 2) = 0): grid bytes
        // 0..48 and 48..96 (8-byte fields at 0, 8, .., 40 of each), never past the 96-byte grid.
        let p = program(&[
            "workload.kind=xsbench",
            "workload.xsbench.nuclides=1",
            "workload.xsbench.gridpoints=2",
            "workload.xsbench.lookups=100",
        ]);
        let grids = p.buffers[2].base;
        let mut offsets = std::collections::BTreeSet::new();
        for mut w in warps(&p, 0) {
            for (_, v) in mem_ops(&mut w) {
                offsets.extend(v.iter().filter(|&&a| a >= grids && a < grids + 4096).map(|&a| a - grids));
            }
        }
        assert_eq!(offsets.into_iter().collect::<Vec<_>>(), (0..12).map(|f| 8 * f).collect::<Vec<_>>());
        // 100 lookups need ceil(100 / 32) = 4 warps, not the 16,384 threads asked for.
        assert_eq!(kernels(&p)[0].threads, 128);
        // Energies 2 x 8 = 16 bytes, the index grid 2 x 1 x 4 = 8, the nuclide grids 2 x 48 = 96.
        assert_eq!(p.host.input_bytes, Some(16 + 8 + 96));
    }
}
