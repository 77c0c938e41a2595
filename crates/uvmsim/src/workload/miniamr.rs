//! `miniamr` (Mantevo miniAMR, svm-apu): a 7-point stencil over a list of
//! mesh blocks with one level of refinement. The domain is `blocks_x x
//! blocks_y x blocks_z` coarse blocks; a coarse block whose centre lies
//! within `refine_radius` of the domain's centre (coordinates scaled to
//! [-1, 1]; miniAMR refines around a sphere) is refined into 8 children.
//! Every block, coarse or child, holds `block_cells^3` cells plus a one-cell
//! halo on each side: `vars` variables of `(b+2)^3` doubles, one contiguous
//! array per block. The block list is the coarse blocks in order (x fastest),
//! each refined one replaced by its 8 children (octant order, x fastest).
//!
//! Each iteration is two launches over one of two block lists (ping-pong):
//! - halo exchange: one thread per halo cell of each of the 6 faces of each
//!   block (per variable): loads the cell of the neighbouring block that
//!   covers it and stores it into the halo; a child next to a coarse block
//!   reads the coarse cell that contains it, a coarse block next to a refined
//!   one reads the first of the fine cells it covers; faces on the domain
//!   boundary have no neighbour (those threads do nothing).
//! - stencil: one thread per interior cell (per variable): loads the cell and
//!   its 6 neighbours from its own block (the halo at the block's faces),
//!   waits, computes, stores the cell into the other list.
//!
//! Simplified from miniAMR: one refinement level, fixed (no moving objects,
//! no re-refinement or load balancing); restriction takes one fine cell
//! instead of the average; miniAMR's stencil writes a work array and copies
//! it back, here the two block lists swap roles; the checksums are not modelled.
//!
//! Arrays in allocation order: block list 0, block list 1. First touch
//! (lockstep): list 0's face cells (the first launch's halo exchange) block
//! by block, then list 0's interiors and list 1's interiors block by block.

use super::{check, KernelGen, KernelSpec, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use std::sync::Arc;

section! {
    /// Parameters of the miniAMR block-structured stencil.
    pub struct MiniamrParams {
        /// Coarse blocks along x.
        pub blocks_x: u64 = 4,
        /// Coarse blocks along y.
        pub blocks_y: u64 = 4,
        /// Coarse blocks along z.
        pub blocks_z: u64 = 4,
        /// Interior cells along each edge of a block (the array adds a halo cell on each side).
        pub block_cells: u64 = 8,
        /// Variables per cell, each a separate (b+2)^3 array of doubles in the block.
        pub vars: u32 = 1,
        /// Coarse blocks whose centre is within this distance of the domain's centre (coordinates in [-1, 1]) are refined into 8; 0 to 2.
        pub refine_radius: f64 = 0.5,
        /// Time steps; each is a halo exchange and a stencil launch.
        pub iterations: u32 = 2,
    }
}

impl MiniamrParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "blocks_x", self.blocks_x, 1, 256)?;
        check(p, "blocks_y", self.blocks_y, 1, 256)?;
        check(p, "blocks_z", self.blocks_z, 1, 256)?;
        check(p, "block_cells", self.block_cells, 2, 1024)?;
        check(p, "vars", self.vars as u64, 1, 256)?;
        if !(0.0..=2.0).contains(&self.refine_radius) {
            return Err((format!("{p}.refine_radius"), format!("must be between 0 and 2, got {}", self.refine_radius)));
        }
        check(p, "iterations", self.iterations as u64, 1, 10_000)
    }

    fn coarse(&self) -> u64 {
        self.blocks_x * self.blocks_y * self.blocks_z
    }

    /// Whether coarse block c is refined.
    fn refined(&self, c: u64) -> bool {
        let (bx, by) = (self.blocks_x, self.blocks_y);
        let centre = |i: u64, n: u64| (i as f64 + 0.5) / n as f64 * 2.0 - 1.0;
        let (x, y, z) = (centre(c % bx, bx), centre(c / bx % by, by), centre(c / (bx * by), self.blocks_z));
        (x * x + y * y + z * z).sqrt() <= self.refine_radius
    }

    /// Blocks in the list: coarse blocks, each refined one counting 8.
    pub fn blocks(&self) -> u64 {
        (0..self.coarse()).map(|c| if self.refined(c) { 8 } else { 1 }).sum()
    }

    fn block_bytes(&self) -> u64 {
        self.vars as u64 * (self.block_cells + 2).pow(3) * 8
    }

    /// Two block lists.
    pub fn footprint(&self) -> u128 {
        2 * self.blocks() as u128 * self.block_bytes() as u128
    }
}

/// The block list and how to find the block covering a fine-level cell.
#[derive(Debug)]
struct Mesh {
    /// Coarse blocks per axis.
    blocks: [u64; 3],
    b: u64,
    vars: u64,
    /// List index of each coarse block's first entry (and one past the end).
    first: Vec<u64>,
    /// Per list entry: its coarse block and octant (8 = the coarse block itself).
    entries: Vec<(u64, u8)>,
}

impl Mesh {
    fn new(p: &MiniamrParams) -> Mesh {
        let (mut first, mut entries) = (vec![], vec![]);
        for c in 0..p.coarse() {
            first.push(entries.len() as u64);
            if p.refined(c) {
                entries.extend((0..8).map(|o| (c, o)));
            } else {
                entries.push((c, 8));
            }
        }
        first.push(entries.len() as u64);
        Mesh { blocks: [p.blocks_x, p.blocks_y, p.blocks_z], b: p.block_cells, vars: p.vars as u64, first, entries }
    }

    fn block_elems(&self) -> u64 {
        self.vars * (self.b + 2).pow(3)
    }

    /// Element of variable v at cell (x, y, z) (each -1..=b) of list entry k.
    fn elem(&self, k: u64, v: u64, c: [i64; 3]) -> u64 {
        let e = self.b as i64 + 2;
        k * self.block_elems() + v * (e * e * e) as u64 + ((c[2] + 1) * e * e + (c[1] + 1) * e + c[0] + 1) as u64
    }

    /// Lower corner of entry k in fine-cell units, and its cell size (2 = coarse, 1 = child).
    fn origin(&self, k: u64) -> ([i64; 3], i64) {
        let (c, o) = self.entries[k as usize];
        let [bx, by, _] = self.blocks;
        let b = self.b as i64;
        let cc = [(c % bx) as i64, (c / bx % by) as i64, (c / (bx * by)) as i64];
        if o == 8 {
            (cc.map(|v| 2 * b * v), 2)
        } else {
            (std::array::from_fn(|a| 2 * b * cc[a] + b * ((o >> a) & 1) as i64), 1)
        }
    }

    /// The list entry and cell of the block covering fine cell g, if g is inside the domain.
    fn locate(&self, g: [i64; 3]) -> Option<(u64, [i64; 3])> {
        let b = self.b as i64;
        if (0..3).any(|a| g[a] < 0 || g[a] >= 2 * b * self.blocks[a] as i64) {
            return None;
        }
        let cc = g.map(|v| v / (2 * b));
        let [bx, by, _] = self.blocks.map(|v| v as i64);
        let c = (cc[0] + bx * (cc[1] + by * cc[2])) as usize;
        let (k0, k1) = (self.first[c], self.first[c + 1]);
        let local = g.map(|v| v % (2 * b));
        if k1 - k0 == 1 {
            Some((k0, local.map(|v| v / 2)))
        } else {
            let o = (0..3).map(|a| ((local[a] / b) as u64) << a).sum::<u64>();
            Some((k0 + o, local.map(|v| v % b)))
        }
    }
}

#[derive(Debug, Clone)]
pub struct MiniamrKernel {
    mesh: Arc<Mesh>,
    /// The list the launch reads (and, for the halo exchange, writes), and the list the stencil writes.
    src: u64,
    dst: u64,
    halo: bool,
    compute: u32,
}

pub(super) fn build(p: &MiniamrParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let mesh = Arc::new(Mesh::new(p));
    let blocks = mesh.entries.len() as u64;
    let lists = [va.alloc(blocks * p.block_bytes(), page), va.alloc(blocks * p.block_bytes(), page)];
    let b = p.block_cells;
    let mut kernels = vec![];
    for i in 0..p.iterations as usize {
        let (src, dst) = (lists[i % 2].base, lists[1 - i % 2].base);
        for (halo, name, threads) in [(true, "miniamr-halo", blocks * 6 * b * b), (false, "miniamr-stencil", blocks * b * b * b)] {
            let k = MiniamrKernel { mesh: mesh.clone(), src, dst, halo, compute: w.compute_cycles };
            kernels.push(KernelSpec { name, threads, threads_per_cta: w.threads_per_cta, gen: KernelGen::Miniamr(Box::new(k)) });
        }
    }
    (kernels, lists[0].bytes)
}

impl MiniamrKernel {
    pub fn warp(&self, id: WarpId) -> MiniamrWarp {
        MiniamrWarp { k: self.clone(), t0: id.first_thread, lanes: id.lanes, var: 0, step: 0 }
    }

    /// Halo thread t: the element it loads (None on the domain boundary) and the halo element it stores.
    fn halo_cell(&self, t: u64, v: u64) -> Option<(u64, u64)> {
        let m = &self.mesh;
        let b = m.b;
        let (k, f, i, j) = (t / (6 * b * b), t / (b * b) % 6, (t % b) as i64, (t / b % b) as i64);
        let (axis, side) = ((f / 2) as usize, if f % 2 == 0 { -1 } else { b as i64 });
        let mut c = [0i64; 3];
        c[axis] = side;
        c[(axis + 1) % 3] = i;
        c[(axis + 2) % 3] = j;
        let (o, s) = m.origin(k);
        let (nk, nc) = m.locate(std::array::from_fn(|a| o[a] + s * c[a]))?;
        Some((m.elem(nk, v, nc), m.elem(k, v, c)))
    }

    /// Stencil thread t: its block and interior cell.
    fn cell(&self, t: u64) -> (u64, [i64; 3]) {
        let b = self.mesh.b;
        (t / (b * b * b), [(t % b) as i64, (t / b % b) as i64, (t / (b * b) % b) as i64])
    }
}

/// The 7 points: centre, -x, +x, -y, +y, -z, +z.
const POINTS: [[i64; 3]; 7] = [[0, 0, 0], [-1, 0, 0], [1, 0, 0], [0, -1, 0], [0, 1, 0], [0, 0, -1], [0, 0, 1]];

#[derive(Debug, Clone)]
pub struct MiniamrWarp {
    k: MiniamrKernel,
    t0: u64,
    lanes: u32,
    var: u64,
    step: u8,
}

impl MiniamrWarp {
    fn mem(&self, scratch: &mut [u64; MAX_LANES], kind: MemKind, base: u64, f: impl Fn(u64) -> Option<u64>) -> Option<Op> {
        let mut m = 0;
        for t in self.t0..self.t0 + self.lanes as u64 {
            if let Some(e) = f(t) {
                scratch[m] = base + e * 8;
                m += 1;
            }
        }
        (m > 0).then(|| Op::Mem { kind, lanes: super::grid::compact(scratch, m), bytes: 8 })
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let k = self.k.clone();
        let (v, m) = (self.var, &k.mesh);
        loop {
            if self.var == m.vars {
                return Op::Exit;
            }
            let step = self.step;
            self.step += 1;
            let op = match (k.halo, step) {
                (true, 0) => self.mem(scratch, MemKind::Load, k.src, |t| k.halo_cell(t, v).map(|h| h.0)),
                (true, 1) => Some(Op::Wait),
                (true, _) => {
                    (self.var, self.step) = (v + 1, 0);
                    self.mem(scratch, MemKind::Store, k.src, |t| k.halo_cell(t, v).map(|h| h.1))
                }
                (false, s @ 0..7) => self.mem(scratch, MemKind::Load, k.src, |t| {
                    let (blk, c) = k.cell(t);
                    Some(m.elem(blk, v, std::array::from_fn(|a| c[a] + POINTS[s as usize][a])))
                }),
                (false, 7) => Some(Op::Wait),
                (false, 8) => Some(Op::Compute(k.compute)),
                (false, _) => {
                    (self.var, self.step) = (v + 1, 0);
                    self.mem(scratch, MemKind::Store, k.dst, |t| {
                        let (blk, c) = k.cell(t);
                        Some(m.elem(blk, v, c))
                    })
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

    fn amr(sets: &[(&str, &str)]) -> crate::workload::Program {
        let mut v = vec!["workload.kind=miniamr".to_string()];
        v.extend(sets.iter().map(|(k, x)| format!("workload.miniamr.{k}={x}")));
        program(&v.iter().map(String::as_str).collect::<Vec<_>>())
    }

    #[test]
    fn the_central_blocks_are_refined_into_8() {
        let p = MiniamrParams::default();
        // 4 x 4 x 4 blocks: the 8 central ones are within 0.5 of the centre (distance 0.433).
        assert_eq!(p.blocks(), 64 - 8 + 64);
        let m = Mesh::new(&p);
        // Coarse block 21 = (1, 1, 1) is refined: list entries 21..29 are its children.
        assert_eq!(m.first[21..23], [21, 29]);
        assert_eq!(m.entries[21..29].iter().map(|e| e.1).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
        // A child's origin in fine cells; child 3 of (1, 1, 1) = octant (1, 1, 0).
        assert_eq!(m.origin(24), ([24, 24, 16], 1));
        assert_eq!(m.origin(0), ([0, 0, 0], 2));
        // Fine cell (15, 16, 16) is in coarse block (0, 1, 1), not refined: its cell (7, 0, 0).
        assert_eq!(m.locate([15, 16, 16]), Some((m.first[20], [7, 0, 0])));
        assert_eq!(m.locate([-1, 0, 0]), None);
    }

    #[test]
    fn stencil_reads_its_block_with_halos_and_writes_the_other_list() {
        let o = amr(&[("blocks_x", "1"), ("blocks_y", "1"), ("blocks_z", "1"), ("refine_radius", "0")]);
        let names: Vec<&str> = kernels(&o).iter().map(|k| k.name).collect();
        assert_eq!(names, ["miniamr-halo", "miniamr-stencil", "miniamr-halo", "miniamr-stencil"]);
        let (l0, l1) = (o.buffers[0].base, o.buffers[1].base);
        // A single coarse block, at the centre, hence refined: 8 children of 8^3 cells in 10^3 arrays; stencil warp 1 =
        // cells y 4..8 of z 0 of child 0.
        let ops = mem_ops(&mut warps(&o, 1)[1]);
        let e = |x: i64, y: i64, z: i64| (((z + 1) * 100 + (y + 1) * 10 + x + 1) * 8) as u64;
        let lanes = |base: u64, d: [i64; 3]| -> Vec<u64> { (0..32).map(|l| base + e(l % 8 + d[0], 4 + l / 8 + d[1], d[2])).collect() };
        assert_eq!(ops.len(), 8);
        for (s, d) in POINTS.iter().enumerate() {
            assert_eq!(ops[s], (MemKind::Load, lanes(l0, *d)), "point {s}");
        }
        assert_eq!(ops[7], (MemKind::Store, lanes(l1, [0, 0, 0])));
        // In the halo exchange only the 3 inner faces of each child have a neighbour: 8 x 3 x 64 cells loaded and stored.
        let moved: usize = warps(&o, 0).iter_mut().flat_map(mem_ops).map(|(_, a)| a.len()).sum();
        assert_eq!(moved, 2 * 8 * 3 * 64);
    }

    #[test]
    fn halo_cells_come_from_the_neighbour_at_its_level() {
        // A line of 3 coarse blocks of 4^3 cells; the middle one (centre 0) is refined, the others (centres -2/3, 2/3) not.
        let o = amr(&[("blocks_x", "3"), ("blocks_y", "1"), ("blocks_z", "1"), ("block_cells", "4"), ("refine_radius", "0.4")]);
        let k = match &kernels(&o)[0].gen {
            KernelGen::Miniamr(k) => k.as_ref().clone(),
            _ => unreachable!(),
        };
        let m = &k.mesh;
        assert_eq!(m.entries.len(), 1 + 8 + 1);
        // Block 0 (coarse, cell size 2 fine cells), face +x (f = 1), face cell (i, j) = (y 2, z 3): its halo cell (4, 2, 3).
        let t = 16 + 3 * 4 + 2;
        let (src, dst) = k.halo_cell(t, 0).unwrap();
        assert_eq!(dst, m.elem(0, 0, [4, 2, 3]));
        // Its first fine cell (8, 4, 6) is in the middle block's child octant (0, 1, 1) = 6, cell (0, 0, 2).
        assert_eq!(src, m.elem(1 + 6, 0, [0, 0, 2]));
        // Child 1 (octant (1, 0, 0), list entry 2, origin (12, 0, 0)), face +x, (i, j) = (3, 1): fine cell (16, 3, 1)
        // is in coarse block 2 (list entry 9) at its cell (0, 1, 0), half resolution.
        let t = 2 * 6 * 16 + 16 + 4 + 3;
        let (src, dst) = k.halo_cell(t, 0).unwrap();
        assert_eq!(dst, m.elem(2, 0, [4, 3, 1]));
        assert_eq!(src, m.elem(9, 0, [0, 1, 0]));
        // Face -x of block 0 is on the domain boundary.
        assert_eq!(k.halo_cell(5, 0), None);
    }

    #[test]
    fn first_touch_is_faces_then_interiors_then_the_other_list() {
        // 2 x 2 x 2 blocks of 16^3 (18^3 x 8 B = 46656 B, ~11.4 pages each), no refinement.
        let o = amr(&[
            ("blocks_x", "2"),
            ("blocks_y", "2"),
            ("blocks_z", "2"),
            ("block_cells", "16"),
            ("refine_radius", "0"),
            ("iterations", "1"),
        ]);
        let ft = first_touch(&o);
        let mut order: Vec<usize> = ft.iter().map(|&(b, _)| b).collect();
        order.dedup();
        assert_eq!(order, [0, 1]);
        // List 1 is touched in ascending order by the stencil's stores.
        let l1: Vec<u64> = ft.iter().filter(|x| x.0 == 1).map(|x| x.1).collect();
        assert!(l1.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn iterations_swap_the_lists_and_each_variable_has_its_own_array() {
        // Two coarse blocks of 4^3 (centres -0.5, 0.5: not refined), 2 variables of 6^3 = 216 doubles each.
        let o =
            amr(&[("blocks_x", "2"), ("blocks_y", "1"), ("blocks_z", "1"), ("block_cells", "4"), ("vars", "2"), ("refine_radius", "0")]);
        let (l0, l1) = (o.buffers[0].base, o.buffers[1].base);
        // Iteration 1's stencil reads list 1 and writes list 0. Lane 0 = block 0, cell (0, 0, 0): element
        // 36 + 6 + 1 = 43 of variable 0, 216 + 43 of variable 1.
        let ops = all_ops(&mut warps(&o, 3)[0]);
        assert_eq!(op_shape(&ops), ("m".repeat(7) + "wcm").repeat(2));
        assert_eq!(ops[8], Op::Compute(4));
        let mem = mem_ops(&mut warps(&o, 3)[0]);
        assert_eq!((mem[0].1[0], mem[7].1[0]), (l1 + 43 * 8, l0 + 43 * 8));
        assert_eq!(mem[8].1[0], l1 + (216 + 43) * 8);
        // The halo exchange waits for each variable's loads before storing them (warp 0: faces -x, on the
        // boundary, and +x of block 0).
        assert_eq!(op_shape(&all_ops(&mut warps(&o, 0)[0])), "mwmmwm");
        // Input: block list 0, 2 blocks x 432 doubles = 6912 bytes.
        assert_eq!(o.host.input_bytes, Some(6912));
    }
}
