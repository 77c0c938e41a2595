//! `comd` (Mantevo CoMD, svm-apu / Zheng "comd"): the link-cell force kernel
//! of a molecular-dynamics step. Space is a `cells_x x cells_y x cells_z` grid
//! of link cells (x fastest); every cell holds `atoms_per_cell` atoms in slots
//! of a fixed capacity of 64 (CoMD's MAXATOMS), so atom i of cell c is at slot
//! `c * 64 + i` of the position and force arrays (3 doubles, 24 B, each).
//!
//! One thread per atom (thread t = atom t % atoms_per_cell of cell t /
//! atoms_per_cell, as CoMD's GPU ports map them): it loads its own position,
//! then for each of the 27 cells around its own (dz, dy, dx = -1, 0, +1, with
//! periodic wrap-around) loads that cell's atom count, waits, loads the
//! position of every atom of the cell (lanes of one cell read the same atom:
//! a broadcast), waits and computes (`atoms_per_cell * compute_cycles`, or
//! with `pair_insts` > 0, `atoms_per_cell * pair_insts` instructions of one
//! issue slot each); finally it stores its force.
//!
//! Simplified from CoMD: every cell holds the same number of atoms; the
//! periodic neighbours are the cells themselves (CoMD copies them into halo
//! cells); no cutoff test or Newton's-third-law halving; the position update
//! and the atom redistribution between cells are not modelled.
//!
//! Arrays in allocation order: positions, forces, atom counts. First touch
//! (lockstep): the positions of the atoms' own cells (ascending), the counts
//! and positions of the neighbour cells as the loop reaches them, then the
//! forces ascending.

use super::{check, KernelGen, KernelSpec, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};

section! {
    /// Parameters of the CoMD link-cell force kernel.
    pub struct ComdParams {
        /// Link cells along x (contiguous).
        pub cells_x: u64 = 8,
        /// Link cells along y.
        pub cells_y: u64 = 8,
        /// Link cells along z.
        pub cells_z: u64 = 8,
        /// Atoms in every cell (at most 64, the slots per cell).
        pub atoms_per_cell: u32 = 16,
        /// Arithmetic and control warp instructions per atom pair, each taking an issue slot of its
        /// SM; 0 = the pair's work is one `compute_cycles` of latency that takes no extra issue slots.
        /// CoMD's `ljForce` pair loop (double precision) counted as SASS-level instructions: dr 3,
        /// r2 3, the cutoff test 2, 1/r2 6 (reciprocal estimate and Newton steps), r6 3, eLocal 2,
        /// U 1, fr 4, the force 3, the loop counter, test and branch 3 = 30 (zheng suite).
        pub pair_insts: u32 = 0,
    }
}

/// Atom slots per link cell (CoMD's MAXATOMS).
const SLOTS: u64 = 64;
/// Bytes of a position or force: three doubles.
const VEC3: u64 = 24;

impl ComdParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "cells_x", self.cells_x, 1, 1 << 12)?;
        check(p, "cells_y", self.cells_y, 1, 1 << 12)?;
        check(p, "cells_z", self.cells_z, 1, 1 << 12)?;
        check(p, "atoms_per_cell", self.atoms_per_cell as u64, 1, SLOTS)?;
        check(p, "pair_insts", self.pair_insts as u64, 0, 1000)
    }

    fn cells(&self) -> u64 {
        self.cells_x * self.cells_y * self.cells_z
    }

    /// Positions and forces (64 slots per cell), atom counts.
    pub fn footprint(&self) -> u128 {
        self.cells() as u128 * (2 * SLOTS * VEC3 + 4) as u128
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ComdKernel {
    pos: u64,
    force: u64,
    counts: u64,
    dims: [u64; 3],
    apc: u64,
    compute: u32,
    pair_insts: u32,
}

pub(super) fn build(p: &ComdParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let cells = p.cells();
    let (pos, force, counts) = (va.alloc(cells * SLOTS * VEC3, page), va.alloc(cells * SLOTS * VEC3, page), va.alloc(cells * 4, page));
    let k = ComdKernel {
        pos: pos.base,
        force: force.base,
        counts: counts.base,
        dims: [p.cells_x, p.cells_y, p.cells_z],
        apc: p.atoms_per_cell as u64,
        compute: w.compute_cycles,
        pair_insts: p.pair_insts,
    };
    let threads = cells * p.atoms_per_cell as u64;
    (
        vec![KernelSpec { name: "comd", threads, threads_per_cta: w.threads_per_cta, gen: KernelGen::Comd(Box::new(k)) }],
        pos.bytes + counts.bytes,
    )
}

impl ComdKernel {
    /// Neighbour `n` (0..27, dz, dy, dx = -1, 0, +1) of cell `c`, wrapping around periodically.
    pub fn neighbour(&self, c: u64, n: u64) -> u64 {
        let [nx, ny, nz] = self.dims;
        let (x, y, z) = (c % nx, c / nx % ny, c / (nx * ny));
        let w = |v: u64, d: u64, len: u64| (v + len + d % 3 - 1) % len;
        w(x, n, nx) + nx * (w(y, n / 3, ny) + ny * w(z, n / 9, nz))
    }

    fn slot(&self, t: u64) -> u64 {
        t / self.apc * SLOTS + t % self.apc
    }

    pub fn warp(&self, id: WarpId) -> ComdWarp {
        ComdWarp { k: *self, t0: id.first_thread, lanes: id.lanes, nb: 0, step: 0, left: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct ComdWarp {
    k: ComdKernel,
    t0: u64,
    lanes: u32,
    /// Neighbour cell of the loop (27 = done).
    nb: u64,
    /// Step within the neighbour: count, wait, atom positions, wait, compute.
    step: u64,
    /// Pair instructions of this neighbour still to issue (`pair_insts`).
    left: u64,
}

impl ComdWarp {
    /// One access per lane at `f(thread)`.
    fn lanes(&self, scratch: &mut [u64; MAX_LANES], kind: MemKind, bytes: u32, f: impl Fn(u64) -> u64) -> Op {
        let n = self.lanes as usize;
        for (l, slot) in scratch.iter_mut().take(n).enumerate() {
            *slot = f(self.t0 + l as u64);
        }
        Op::Mem { kind, lanes: super::grid::compact(scratch, n), bytes }
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let k = self.k;
        let apc = k.apc;
        if self.nb == 28 {
            return Op::Exit;
        }
        let (nb, step) = (self.nb, self.step);
        if nb == 27 {
            self.nb = 28;
            return self.lanes(scratch, MemKind::Store, VEC3 as u32, |t| k.force + k.slot(t) * VEC3);
        }
        if step == 0 && nb == 0 {
            // The atom's own position first (kept in registers).
            self.step = 1;
            return self.lanes(scratch, MemKind::Load, VEC3 as u32, |t| k.pos + k.slot(t) * VEC3);
        }
        self.step += 1;
        let cell = |t: u64| k.neighbour(t / apc, nb);
        match step {
            1 => self.lanes(scratch, MemKind::Load, 4, |t| k.counts + cell(t) * 4),
            2 => Op::Wait,
            s if s < 3 + apc => self.lanes(scratch, MemKind::Load, VEC3 as u32, |t| k.pos + (cell(t) * SLOTS + s - 3) * VEC3),
            s if s == 3 + apc => {
                self.left = apc * k.pair_insts as u64;
                Op::Wait
            }
            // One issue slot per pair instruction: the SM's issue rate bounds the kernel.
            _ if self.left > 1 => {
                (self.left, self.step) = (self.left - 1, step);
                Op::Compute(1)
            }
            _ if self.left == 1 => {
                (self.nb, self.step, self.left) = (nb + 1, 1, 0);
                Op::Compute(1)
            }
            _ => {
                (self.nb, self.step) = (nb + 1, 1);
                Op::Compute(apc as u32 * k.compute)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{KernelGen, MemKind};

    fn kernel(p: &crate::workload::Program) -> &super::ComdKernel {
        match &kernels(p)[0].gen {
            KernelGen::Comd(k) => k,
            _ => unreachable!(),
        }
    }

    #[test]
    fn neighbours_wrap_around() {
        let p = program(&["workload.kind=comd", "workload.comd.cells_x=4", "workload.comd.cells_y=3", "workload.comd.cells_z=2"]);
        let k = kernel(&p);
        // Cell 0 = (0, 0, 0): neighbour 0 = (-1, -1, -1) = (3, 2, 1); 13 = itself; 14 = (1, 0, 0); 26 = (1, 1, 1).
        let c = |x: u64, y: u64, z: u64| x + 4 * (y + 3 * z);
        assert_eq!(k.neighbour(0, 0), c(3, 2, 1));
        assert_eq!(k.neighbour(0, 13), 0);
        assert_eq!(k.neighbour(0, 14), c(1, 0, 0));
        assert_eq!(k.neighbour(0, 26), c(1, 1, 1));
        assert_eq!(k.neighbour(c(3, 2, 1), 26), 0);
    }

    #[test]
    fn an_atom_reads_its_27_cells_then_stores_its_force() {
        // 4 x 4 x 4 cells of 16 atoms: warp 3 = cells 6 and 7 (atoms 96..128).
        let p = program(&["workload.kind=comd", "workload.comd.cells_x=4", "workload.comd.cells_y=4", "workload.comd.cells_z=4"]);
        let k = kernel(&p);
        let (pos, force, counts) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let ops = mem_ops(&mut warps(&p, 0)[3]);
        assert_eq!(ops.len(), 1 + 27 * (1 + 16) + 1);
        let slot = |cell: u64, i: u64| (cell * 64 + i) * 24;
        let own: Vec<u64> = (0..32).map(|l| pos + slot(6 + l / 16, l % 16)).collect();
        assert_eq!(ops[0], (MemKind::Load, own));
        // Neighbour 5 = (dx, dy, dz) = (+1, 0, -1): its count, then its 16 atoms, atom 7 at step 7.
        let at = 1 + 5 * 17;
        let nb = |l: u64| k.neighbour(6 + l / 16, 5);
        assert_eq!(nb(0), 3 + 4 * (1 + 4 * 3)); // cell 6 = (2, 1, 0) -> (3, 1, 3), z wrapping around.
        assert_eq!(ops[at].1, (0..32).map(|l| counts + 4 * nb(l)).collect::<Vec<_>>());
        assert_eq!(ops[at + 1 + 7].1, (0..32).map(|l| pos + slot(nb(l), 7)).collect::<Vec<_>>());
        let last = ops.last().unwrap();
        assert_eq!(*last, (MemKind::Store, (0..32).map(|l| force + slot(6 + l / 16, l % 16)).collect()));
    }

    #[test]
    fn pair_insts_issue_one_slot_per_pair_instruction() {
        use crate::workload::Op;
        let base = ["workload.kind=comd", "workload.comd.atoms_per_cell=4"];
        let old = all_ops(&mut warps(&program(&base), 0)[0]);
        let mut sets = base.to_vec();
        sets.push("workload.comd.pair_insts=30");
        let new = all_ops(&mut warps(&program(&sets), 0)[0]);
        // Per neighbour: count, wait, 4 positions, wait, then one Compute(4 atoms x 4 cycles) by
        // default, or 4 atoms x 30 single-cycle instructions; the memory ops are the same.
        assert_eq!(old.len(), 1 + 27 * 8 + 1);
        assert_eq!(new.len(), 1 + 27 * (7 + 120) + 1);
        assert_eq!(old.iter().filter(|o| **o == Op::Compute(16)).count(), 27);
        assert_eq!(new.iter().filter(|o| **o == Op::Compute(1)).count(), 27 * 120);
        let mem = |v: &[Op]| v.iter().filter(|o| matches!(o, Op::Mem { .. } | Op::Wait)).copied().collect::<Vec<_>>();
        assert_eq!(mem(&old), mem(&new));
        // Neighbour 0's block: its 7 memory steps, then its 120 pair instructions, then neighbour 1's count.
        assert!(new[1 + 7..1 + 127].iter().all(|o| *o == Op::Compute(1)));
        assert!(matches!(new[1 + 127], Op::Mem { .. }));
    }

    #[test]
    fn first_touch_is_positions_and_counts_then_forces() {
        let p = program(&["workload.kind=comd", "workload.comd.atoms_per_cell=64"]);
        let ft = first_touch(&p);
        // Own positions first: 512 cells x 64 slots x 24 B = 192 pages, ascending.
        assert_eq!(ft[..192], (0..192).map(|pg| (0, pg)).collect::<Vec<_>>());
        assert_eq!(ft[192], (2, 0));
        assert_eq!(ft[193..], (0..192).map(|pg| (1, pg)).collect::<Vec<_>>());
    }
}
