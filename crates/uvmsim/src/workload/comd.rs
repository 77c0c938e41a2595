//! `comd` (Mantevo CoMD, svm-apu / Zheng "comd"): the link-cell force kernel
//! of a molecular-dynamics step as NVIDIA's CoMD-CUDA computes Lennard-Jones
//! forces with one thread per atom (`LJ_Force_thread_atom`,
//! `src-mpi/gpu_lj_thread_atom.h`), its loads, waits, compute and stores in
//! the order of the kernel's PTX (NVRTC 12.9, -O3, double precision:
//! docs/workloads.md, "Load order"). Space is a `cells_x x cells_y x cells_z`
//! grid of link cells (x fastest); every cell holds `atoms_per_cell` atoms in
//! slots of a fixed capacity of 64 (MAXATOMS), so atom i of cell c is slot
//! `c * 64 + i` of CoMD-CUDA's structure-of-arrays atom data: positions `r.x`,
//! `r.y`, `r.z`, forces `f.x`, `f.y`, `f.z` and energies `e`, a double array
//! each.
//!
//! Thread t is entry t of the atom list (`list.cells[t]` = t / atoms_per_cell,
//! `list.atoms[t]` = t % atoms_per_cell: cell-major, as CoMD-CUDA's host fills
//! `a_list`, the list the kernel is launched with). With iBox its cell and
//! iOff = iBox * 64 + iAtom its slot, a thread:
//! - loads `list.cells[t]` (4 B), waits; loads `list.atoms[t]` (4 B), waits;
//! - loads its own `r.x`, `r.y`, `r.z` at iOff (8 B each, no wait: the PTX
//!   first uses them at the first pair);
//! - for each of the 27 cells around its own (jBox): loads
//!   `neighbor_cells[iBox * 27 + j]` (4 B), waits, loads `nAtoms[jBox]` (4 B),
//!   waits, then for each atom of jBox loads its `r.x`, waits, its `r.y`,
//!   waits, its `r.z`, waits (lanes of one cell read the same atom: a
//!   broadcast) and computes the pair: `compute_cycles` of latency, or with
//!   `pair_insts` > 0, `pair_insts` instructions of one issue slot each;
//! - stores `f.x`, `f.y`, `f.z`, `e` at iOff (8 B each).
//!
//! Where the source and its PTX differ the model follows the PTX: the source
//! reads `list.atoms[tid]` before `list.cells[tid]`, the PTX loads the cell
//! first (its first use, iBox * 64, comes first); the source re-reads
//! `nAtoms[jBox]` in the atom loop's condition, the PTX loads it once per
//! neighbour cell (the loop has no store). The PTX unrolls the atom loop by 4
//! without changing a pair's loads and waits. `Op::Wait` waits for every
//! outstanding load, so the wait for the first `neighbor_cells` entry also
//! waits for the own position, which the PTX first waits for at the first pair.
//!
//! Changed on 2026-12-01 (to the PTX's order): before, a neighbour cell's atom
//! positions were all in flight together as 24 B records (array-of-structures
//! positions and forces) followed by one wait and one compute for the cell,
//! with no neighbour-list or atom-list loads, and the force was one 24 B store.
//!
//! Simplified from CoMD-CUDA: every cell holds the same number of atoms; the
//! periodic neighbours are the cells themselves (CoMD copies them into halo
//! cells, which the halo exchange fills), in the order dz, dy, dx = -1, 0, +1
//! (CoMD's `getNeighborBoxes` lists dx, dy, dz with z fastest, and CoMD-CUDA's
//! host swaps the cell itself to the front of the table); every pair is
//! computed (the PTX skips a pair's force beyond the cutoff); the arrays the
//! kernel does not touch (momenta, ...), the position update, the halo
//! exchange and the redistribution of atoms between cells are not modelled.
//!
//! Arrays in allocation order, CoMD-CUDA's `AllocateGpu` order of the arrays
//! the kernel uses: `r.x`, `r.y`, `r.z`, `f.x`, `f.y`, `f.z`, `e`,
//! `neighbor_cells`, `list.atoms`, `list.cells`, `nAtoms` (`initLinkCellsGpu`
//! allocates `nAtoms` after the atom lists in the versions with the
//! interpolated LJ kernel, before them in older ones). The inputs (the
//! explicit-copy baseline's host-to-device copy) are all but the forces and
//! energies. First touch (lockstep): `list.cells`, `list.atoms`, then the own
//! positions `r.x`, `r.y`, `r.z` (each ascending: every page holds own-atom
//! slots), `neighbor_cells` (every cell's first entry: every page, ascending),
//! `nAtoms`; the neighbour cells' positions were all touched by then; then
//! `f.x`, `f.y`, `f.z`, `e` ascending.

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
/// Neighbour cells of a cell, itself included (CoMD's N_MAX_NEIGHBORS).
const NEIGHBOURS: u64 = 27;
/// Bytes of one coordinate, force component or energy: a double.
const REAL_BYTES: u64 = 8;
/// Bytes of an int (an atom-list entry, a neighbour-table entry, a cell's atom count).
const INT_BYTES: u64 = 4;
/// A thread's ops before the neighbour loop: `list.cells`, wait, `list.atoms`, wait, `r.x`, `r.y`, `r.z`.
const HEAD_OPS: u64 = 7;
/// A neighbour cell's ops before its atoms: `neighbor_cells`, wait, `nAtoms`, wait.
const CELL_HEAD_OPS: u64 = 4;
/// An atom's loads and waits before its pair's compute: `r.x`, wait, `r.y`, wait, `r.z`, wait.
const ATOM_OPS: u64 = 6;
/// A thread's stores: `f.x`, `f.y`, `f.z`, `e`.
const STORE_OPS: u64 = 4;

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

    fn atoms(&self) -> u64 {
        self.cells() * self.atoms_per_cell as u64
    }

    /// Positions, forces and energies (7 doubles a slot, 64 slots a cell), the neighbour table
    /// (27 ints a cell), the two atom lists (an int per atom each) and the atom counts (an int a cell).
    pub fn footprint(&self) -> u128 {
        let cells = self.cells() as u128;
        cells * (7 * SLOTS * REAL_BYTES + NEIGHBOURS * INT_BYTES + INT_BYTES) as u128 + 2 * (self.atoms() * INT_BYTES) as u128
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ComdKernel {
    /// `r.x`, `r.y`, `r.z`.
    r: [u64; 3],
    /// `f.x`, `f.y`, `f.z`, `e`: the stores, in order.
    out: [u64; 4],
    neighbor_cells: u64,
    list_atoms: u64,
    list_cells: u64,
    n_atoms: u64,
    dims: [u64; 3],
    apc: u64,
    compute: u32,
    pair_insts: u32,
}

pub(super) fn build(p: &ComdParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let (cells, atoms) = (p.cells(), p.atoms());
    let soa = cells * SLOTS * REAL_BYTES;
    let r = [va.alloc(soa, page), va.alloc(soa, page), va.alloc(soa, page)];
    let out = [va.alloc(soa, page), va.alloc(soa, page), va.alloc(soa, page), va.alloc(soa, page)];
    let neighbor_cells = va.alloc(cells * NEIGHBOURS * INT_BYTES, page);
    let (list_atoms, list_cells) = (va.alloc(atoms * INT_BYTES, page), va.alloc(atoms * INT_BYTES, page));
    let n_atoms = va.alloc(cells * INT_BYTES, page);
    let k = ComdKernel {
        r: r.map(|b| b.base),
        out: out.map(|b| b.base),
        neighbor_cells: neighbor_cells.base,
        list_atoms: list_atoms.base,
        list_cells: list_cells.base,
        n_atoms: n_atoms.base,
        dims: [p.cells_x, p.cells_y, p.cells_z],
        apc: p.atoms_per_cell as u64,
        compute: w.compute_cycles,
        pair_insts: p.pair_insts,
    };
    // The inputs: positions, the neighbour table, the atom lists and counts (forces and energies are the outputs).
    let inputs = r.iter().map(|b| b.bytes).sum::<u64>() + neighbor_cells.bytes + list_atoms.bytes + list_cells.bytes + n_atoms.bytes;
    (vec![KernelSpec { name: "comd", threads: atoms, threads_per_cta: w.threads_per_cta, gen: KernelGen::Comd(Box::new(k)) }], inputs)
}

impl ComdKernel {
    /// Neighbour `n` (0..27, dz, dy, dx = -1, 0, +1) of cell `c`, wrapping around periodically:
    /// entry `c * 27 + n` of the neighbour table.
    pub fn neighbour(&self, c: u64, n: u64) -> u64 {
        let [nx, ny, nz] = self.dims;
        let (x, y, z) = (c % nx, c / nx % ny, c / (nx * ny));
        let w = |v: u64, d: u64, len: u64| (v + len + d % 3 - 1) % len;
        w(x, n, nx) + nx * (w(y, n / 3, ny) + ny * w(z, n / 9, nz))
    }

    /// Ops of one pair's compute.
    fn pair_ops(&self) -> u64 {
        self.pair_insts.max(1) as u64
    }

    /// Ops of one neighbour cell: its head, then per atom the loads and waits and the pair's compute.
    fn cell_ops(&self) -> u64 {
        CELL_HEAD_OPS + self.apc * (ATOM_OPS + self.pair_ops())
    }

    pub fn warp(&self, id: WarpId) -> ComdWarp {
        ComdWarp { k: *self, t0: id.first_thread, lanes: id.lanes, op: 0, pair_left: 0, nb_of: u64::MAX, nb_cells: vec![] }
    }
}

#[derive(Debug, Clone)]
pub struct ComdWarp {
    k: ComdKernel,
    t0: u64,
    lanes: u32,
    /// Index of the next op in the thread's sequence (the same for every lane).
    op: u64,
    /// Compute ops of the current pair still to come: they are most of a thread's ops, and each
    /// would otherwise locate itself in the sequence with four divisions.
    pair_left: u64,
    /// Neighbour `nb_of` of each of the warp's own cells, in order (`ComdKernel::neighbour`, three
    /// divisions each, once per neighbour cell instead of once per load).
    nb_of: u64,
    nb_cells: Vec<u64>,
}

impl ComdWarp {
    /// One access per lane at `f(thread)`.
    fn lanes(&self, scratch: &mut [u64; MAX_LANES], kind: MemKind, bytes: u64, f: impl Fn(u64) -> u64) -> Op {
        let n = self.lanes as usize;
        for (l, slot) in scratch.iter_mut().take(n).enumerate() {
            *slot = f(self.t0 + l as u64);
        }
        Op::Mem { kind, lanes: super::grid::compact(scratch, n), bytes: bytes as u32 }
    }

    /// One access per lane at `f(cell, slot)`, where `cell` is the lane's own cell (`neighbour` = None) or
    /// its neighbour `nb` of it, and `slot` is the lane's iOff (atom `t % atoms_per_cell` of cell `t / atoms_per_cell`
    /// for thread `t`). Consecutive lanes share a cell
    /// (`atoms_per_cell` threads each), so the cell and its neighbour are worked out once per cell, without
    /// the divisions `neighbour` takes per lane (they were 40% of a CoMD run's time); the neighbours
    /// once per neighbour cell `nb` of the loop, not at each of its 1 + 3 x atoms_per_cell loads.
    fn cell_lanes(
        &mut self,
        scratch: &mut [u64; MAX_LANES],
        kind: MemKind,
        bytes: u64,
        neighbour: Option<u64>,
        f: impl Fn(u64, u64) -> u64,
    ) -> Op {
        let k = self.k;
        let n = self.lanes as usize;
        let (first, last) = (self.t0 / k.apc, (self.t0 + n as u64 - 1) / k.apc);
        if let Some(nb) = neighbour {
            if self.nb_of != nb {
                self.nb_cells.clear();
                self.nb_cells.extend((first..=last).map(|own| k.neighbour(own, nb)));
                self.nb_of = nb;
            }
        }
        // Cell by cell: the lanes of own cell `own` (from atom `atom`) read `cell`.
        let (mut l, mut atom) = (0, self.t0 % k.apc);
        for (c, own) in (first..=last).enumerate() {
            let cell = if neighbour.is_some() { self.nb_cells[c] } else { own };
            let take = (k.apc - atom).min((n - l) as u64);
            for a in atom..atom + take {
                scratch[l] = f(cell, own * SLOTS + a);
                l += 1;
            }
            atom = 0;
        }
        Op::Mem { kind, lanes: super::grid::compact(scratch, n), bytes: bytes as u32 }
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let k = self.k;
        if self.pair_left > 0 {
            // The rest of a pair's compute (see below): no memory op can come before it ends.
            (self.pair_left, self.op) = (self.pair_left - 1, self.op + 1);
            return Op::Compute(1);
        }
        let body = HEAD_OPS + NEIGHBOURS * k.cell_ops();
        let i = self.op;
        if i >= body + STORE_OPS {
            return Op::Exit;
        }
        self.op += 1;
        let load = MemKind::Load;
        if i < HEAD_OPS {
            // The thread's cell, then its atom (each used at once: a wait), then its own position.
            return match i {
                0 => self.lanes(scratch, load, INT_BYTES, |t| k.list_cells + t * INT_BYTES),
                2 => self.lanes(scratch, load, INT_BYTES, |t| k.list_atoms + t * INT_BYTES),
                1 | 3 => Op::Wait,
                c => self.cell_lanes(scratch, load, REAL_BYTES, None, |_, slot| k.r[(c - 4) as usize] + slot * REAL_BYTES),
            };
        }
        if i >= body {
            let a = k.out[(i - body) as usize];
            return self.cell_lanes(scratch, MemKind::Store, REAL_BYTES, None, |_, slot| a + slot * REAL_BYTES);
        }
        let (nb, s) = ((i - HEAD_OPS) / k.cell_ops(), (i - HEAD_OPS) % k.cell_ops());
        match s {
            0 => self.cell_lanes(scratch, load, INT_BYTES, None, |own, _| k.neighbor_cells + (own * NEIGHBOURS + nb) * INT_BYTES),
            2 => self.cell_lanes(scratch, load, INT_BYTES, Some(nb), |cell, _| k.n_atoms + cell * INT_BYTES),
            1 | 3 => Op::Wait,
            _ => {
                let per_atom = ATOM_OPS + k.pair_ops();
                let (atom, q) = ((s - CELL_HEAD_OPS) / per_atom, (s - CELL_HEAD_OPS) % per_atom);
                match q {
                    0 | 2 | 4 => self.cell_lanes(scratch, load, REAL_BYTES, Some(nb), |cell, _| {
                        k.r[(q / 2) as usize] + (cell * SLOTS + atom) * REAL_BYTES
                    }),
                    1 | 3 | 5 => Op::Wait,
                    // One issue slot per pair instruction: the SM's issue rate bounds the kernel.
                    _ if k.pair_insts > 0 => {
                        // The pair's first compute op (q = ATOM_OPS): the others follow.
                        if q == ATOM_OPS {
                            self.pair_left = k.pair_ops() - 1;
                        }
                        Op::Compute(1)
                    }
                    _ => Op::Compute(k.compute),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{KernelGen, MemKind, Op};

    fn kernel(p: &crate::workload::Program) -> &super::ComdKernel {
        match &kernels(p)[0].gen {
            KernelGen::Comd(k) => k,
            _ => unreachable!(),
        }
    }

    /// Buffer indices in allocation order.
    const RX: usize = 0;
    const RY: usize = 1;
    const RZ: usize = 2;
    const FX: usize = 3;
    const FY: usize = 4;
    const FZ: usize = 5;
    const E: usize = 6;
    const NBR: usize = 7;
    const LIST_ATOMS: usize = 8;
    const LIST_CELLS: usize = 9;
    const N_ATOMS: usize = 10;

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
    fn a_thread_follows_the_ptx_order() {
        // 2 x 2 x 2 cells of 2 atoms: one warp of 16 threads.
        let p = program(&[
            "workload.kind=comd",
            "workload.comd.cells_x=2",
            "workload.comd.cells_y=2",
            "workload.comd.cells_z=2",
            "workload.comd.atoms_per_cell=2",
        ]);
        let ops = all_ops(&mut warps(&p, 0)[0]);
        // list.cells, wait, list.atoms, wait, r.x r.y r.z; per neighbour: neighbor_cells, wait, nAtoms, wait, and per
        // atom r.x, wait, r.y, wait, r.z, wait, the pair; the stores f.x f.y f.z e.
        let want = format!("mwmwmmm{}mmmm", format!("mwmw{}", "mwmwmwc".repeat(2)).repeat(27));
        assert_eq!(op_shape(&ops), want);
        let mem: Vec<(MemKind, u32)> =
            ops.iter().filter_map(|o| if let Op::Mem { kind, bytes, .. } = o { Some((*kind, *bytes)) } else { None }).collect();
        let (ld, st) = (MemKind::Load, MemKind::Store);
        let mut want = vec![(ld, 4), (ld, 4), (ld, 8), (ld, 8), (ld, 8)];
        for _ in 0..27 {
            want.extend([(ld, 4), (ld, 4)]);
            want.extend([(ld, 8); 6]);
        }
        want.extend([(st, 8); 4]);
        assert_eq!(mem, want);
        // pair_insts = 0: each pair is one compute_cycles (4) of latency.
        assert!(ops.iter().filter(|o| matches!(o, Op::Compute(_))).all(|o| *o == Op::Compute(4)));
    }

    #[test]
    fn one_lanes_addresses_worked_by_hand() {
        // 4 x 4 x 4 cells of 16 atoms: warp 3 = threads 96..128 = cells 6 and 7. Lane 5 = thread 101 = atom 5 of
        // cell 6 = (2, 1, 0): iOff = 6 * 64 + 5 = 389.
        let p = program(&["workload.kind=comd", "workload.comd.cells_x=4", "workload.comd.cells_y=4", "workload.comd.cells_z=4"]);
        let b = |i: usize| p.buffers[i].base;
        let ops = mem_ops(&mut warps(&p, 0)[3]);
        assert_eq!(ops.len(), 2 + 3 + 27 * (2 + 16 * 3) + 4);
        let lane5 = |i: usize| ops[i].1[5];
        // The start: list.cells[101], list.atoms[101], r.x, r.y, r.z [389].
        assert_eq!([lane5(0), lane5(1)], [b(LIST_CELLS) + 404, b(LIST_ATOMS) + 404]);
        assert_eq!([lane5(2), lane5(3), lane5(4)], [b(RX) + 3112, b(RY) + 3112, b(RZ) + 3112]);
        // Neighbour 5 = (dx, dy, dz) = (+1, 0, -1): (3, 1, 3), z wrapping around = cell 3 + 4 * (1 + 4 * 3) = 55.
        // neighbor_cells[6 * 27 + 5 = 167], nAtoms[55]; its atom 7 is slot 55 * 64 + 7 = 3527, byte 28216.
        let at = 5 + 5 * 50;
        assert_eq!(kernel(&p).neighbour(6, 5), 55);
        assert_eq!([lane5(at), lane5(at + 1)], [b(NBR) + 668, b(N_ATOMS) + 220]);
        let atom7 = at + 2 + 7 * 3;
        assert_eq!([lane5(atom7), lane5(atom7 + 1), lane5(atom7 + 2)], [b(RX) + 28216, b(RY) + 28216, b(RZ) + 28216]);
        // Lanes of one cell read the same atom: lanes 0..16 (cell 6) atom 7 of cell 55, lanes 16..32 (cell 7 =
        // (3, 1, 0) -> (0, 1, 3) = 52) atom 7 of cell 52.
        let want: Vec<u64> = (0..32).map(|l| b(RY) + if l < 16 { 28216 } else { (52 * 64 + 7) * 8 }).collect();
        assert_eq!(ops[atom7 + 1], (MemKind::Load, want));
        // The stores: f.x, f.y, f.z, e at every lane's own slot.
        let own = |base: u64| (0..32).map(|l| base + ((6 + l / 16) * 64 + l % 16) * 8).collect::<Vec<u64>>();
        let n = ops.len();
        for (i, buf) in [FX, FY, FZ, E].into_iter().enumerate() {
            assert_eq!(ops[n - 4 + i], (MemKind::Store, own(b(buf))));
        }
    }

    #[test]
    fn pair_insts_issue_one_slot_per_pair_instruction() {
        let base = ["workload.kind=comd", "workload.comd.atoms_per_cell=4"];
        let old = all_ops(&mut warps(&program(&base), 0)[0]);
        let mut sets = base.to_vec();
        sets.push("workload.comd.pair_insts=30");
        let new = all_ops(&mut warps(&program(&sets), 0)[0]);
        // Per neighbour: 4 ops, then per atom 6 loads and waits and one Compute(4 cycles) by default, or 30
        // single-cycle instructions; the memory ops and waits are the same.
        assert_eq!(old.len(), 7 + 27 * (4 + 4 * 7) + 4);
        assert_eq!(new.len(), 7 + 27 * (4 + 4 * 36) + 4);
        assert_eq!(old.iter().filter(|o| **o == Op::Compute(4)).count(), 27 * 4);
        assert_eq!(new.iter().filter(|o| **o == Op::Compute(1)).count(), 27 * 4 * 30);
        let mem = |v: &[Op]| v.iter().filter(|o| matches!(o, Op::Mem { .. } | Op::Wait)).copied().collect::<Vec<_>>();
        assert_eq!(mem(&old), mem(&new));
        // Neighbour 0's first atom: its 6 loads and waits, its 30 pair instructions, then the next atom's r.x.
        let first = 7 + 4 + 6;
        assert_eq!(new[first - 1], Op::Wait);
        assert!(new[first..first + 30].iter().all(|o| *o == Op::Compute(1)));
        assert!(matches!(new[first + 30], Op::Mem { .. }));
    }

    #[test]
    fn first_touch_is_lists_own_positions_table_counts_then_outputs() {
        // 8 x 8 x 8 cells of 16 atoms: lists 8192 x 4 B = 8 pages, each SoA array 512 x 64 x 8 B = 64 pages,
        // neighbor_cells 512 x 27 x 4 B = 14 pages, nAtoms 1 page.
        let p = program(&["workload.kind=comd"]);
        let ft = first_touch(&p);
        let all = |b: usize, n: u64| (0..n).map(move |pg| (b, pg));
        let mut want: Vec<(usize, u64)> = all(LIST_CELLS, 8).chain(all(LIST_ATOMS, 8)).collect();
        for b in [RX, RY, RZ] {
            want.extend(all(b, 64));
        }
        want.extend(all(NBR, 14).chain(all(N_ATOMS, 1)));
        for b in [FX, FY, FZ, E] {
            want.extend(all(b, 64));
        }
        assert_eq!(ft, want);
    }

    #[test]
    fn footprint_and_inputs() {
        let p = program(&["workload.kind=comd", "workload.comd.cells_x=5", "workload.comd.atoms_per_cell=7"]);
        let bytes: Vec<u64> = p.buffers.iter().map(|b| b.bytes).collect();
        let (cells, atoms) = (5 * 8 * 8u64, 5 * 8 * 8 * 7u64);
        assert_eq!(bytes, [[cells * 512; 7].as_slice(), &[cells * 108, atoms * 4, atoms * 4, cells * 4]].concat());
        let params = crate::workload::ComdParams { cells_x: 5, atoms_per_cell: 7, ..Default::default() };
        assert_eq!(params.footprint(), bytes.iter().sum::<u64>() as u128);
        // The inputs: positions, neighbour table, atom lists and counts.
        assert_eq!(p.host.input_bytes, Some(3 * cells * 512 + cells * 108 + 2 * atoms * 4 + cells * 4));
    }

    proptest::proptest! {
        /// Every lane's address, worked out per cell once (`cell_lanes`), is the one the thread's own
        /// cell and neighbour formulas give (the per-lane path before session 60), for any grid, atoms
        /// per cell and partial last warp.
        #[test]
        fn per_cell_lanes_agree_with_the_per_thread_formulas(
            dims in (1u64..5, 1u64..4, 1u64..4),
            apc in 1u64..40,
        ) {
            let sets = [
                "workload.kind=comd".to_string(),
                format!("workload.comd.cells_x={}", dims.0),
                format!("workload.comd.cells_y={}", dims.1),
                format!("workload.comd.cells_z={}", dims.2),
                format!("workload.comd.atoms_per_cell={apc}"),
            ];
            let p = program(&sets.iter().map(String::as_str).collect::<Vec<_>>());
            let k = *kernel(&p);
            let b = |i: usize| p.buffers[i].base;
            for (w, warp) in warps(&p, 0).iter_mut().enumerate() {
                let ops = mem_ops(warp);
                for l in 0..ops[0].1.len() {
                    // The thread, from its first load (list.cells[t]).
                    let t = (ops[0].1[l] - b(LIST_CELLS)) / 4;
                    let (own, slot) = (t / apc, t / apc * super::SLOTS + t % apc);
                    let mut want = vec![b(LIST_CELLS) + t * 4, b(LIST_ATOMS) + t * 4];
                    want.extend([RX, RY, RZ].map(|a| b(a) + slot * 8));
                    for nb in 0..27 {
                        let cell = k.neighbour(own, nb);
                        want.extend([b(NBR) + (own * 27 + nb) * 4, b(N_ATOMS) + cell * 4]);
                        for atom in 0..apc {
                            want.extend([RX, RY, RZ].map(|a| b(a) + (cell * super::SLOTS + atom) * 8));
                        }
                    }
                    want.extend([FX, FY, FZ, E].map(|a| b(a) + slot * 8));
                    let got: Vec<u64> = ops.iter().map(|(_, lanes)| lanes[l]).collect();
                    proptest::prop_assert_eq!(got, want, "warp {} lane {}", w, l);
                }
            }
        }
    }
}
