//! `parboil-stencil`: Parboil's 3D stencil (`benchmarks/stencil/src/cuda/kernels.cu`,
//! `block2D_hybrid_coarsen_x`, launched by `main.cu` beside it), the zheng suite's "stencil". A
//! 7-point Jacobi sweep over float grids `A0 -> Anext` of nx x ny x nz elements, x fastest:
//! `Index3D(nx, ny, i, j, k) = i + nx * (j + ny * k)`.
//!
//! Launch (main.cu): blocks of (32, 4) threads (128: four warps of 32, warp `w` = row `threadIdx.y =
//! w`), a grid of ((nx + 63) / 64, (ny + 3) / 4) CTAs, block x fastest; one launch per iteration, and
//! main swaps `d_A0` and `d_Anext` after each (ping-pong: launch 2 reads what launch 1 wrote; some
//! copies of main.cu in circulation launch without swapping). Thread (tx, ty) of CTA (bx, by) owns the
//! two columns `i = 64 bx + tx` and `i2 = i + 32` at `j = 4 by + ty` (coarsening along x) and walks
//! them through z; a CTA keeps its 64 x 4 tile of the current plane in shared memory, so only the
//! tile's halo comes from global memory.
//!
//! Per warp, in the order of the kernel's PTX (NVRTC 12.9, -O3, which is the source's order;
//! GPGPU-Sim runs it in order and a warp stalls at the first use of an outstanding load, where the
//! model puts `Op::Wait`; docs/workloads.md, "Load order"):
//! - prologue: barrier (shared memory zeroed); load `A0[i, j, 0]` and `A0[i, j, 1]`, wait (stored to
//!   shared memory); the same at `i2`, wait; barrier;
//! - for k = 1 ..= nz - 2: load `A0[i, j, k + 1]` (top); then, for the writing threads, `A0[i, j + 1,
//!   k]` if ty == 3, `A0[i, j - 1, k]` if ty == 0, `A0[i - 1, j, k]` if tx == 0 (the other
//!   neighbours are in shared memory), wait, compute (`workload.compute_cycles`), store `Anext[i, j,
//!   k]`; the same at `i2` (its x halo `A0[i2 + 1, j, k]` if tx == 31); barrier, rotate the planes in
//!   shared memory, barrier.
//!
//! Guards, as the source has them: the centre column (bottom, current, top) is loaded by every
//! thread inside the grid (`i < nx && j < ny`; `i2 < nx` for the second); the halo loads and the store
//! only by the writing threads, `w_region = 0 < i < nx - 1 && 0 < j < ny - 1` and `w_region2 = i2 <
//! nx - 1 && 0 < j < ny - 1`. Threads outside them are inactive lanes; an instruction none of a
//! warp's lanes run is not issued: a warp of rows past ny only meets its CTA. A warp with no writing
//! lane (rows j = 0 and ny - 1) skips the update, so it first uses its top values after the plane's
//! first barrier (storing them to shared memory): it waits there (ASSUMPTION: from the source's
//! control flow, not from the PTX).
//!
//! Simplified: shared memory is not modelled (its stores and loads, the zeroing and the rotation:
//! only the barriers remain), nor main's device-to-device copy of A0 into Anext before the first
//! launch (which sets Anext's boundary); the explicit-copy program copies A0 (the input) in and
//! Anext out. The update is one `Compute` per column.
//!
//! Warps of other sizes (16, 64: `gpu.warp_size` must divide 128) take their lanes' threads in the
//! same order: a 64-lane warp runs rows ty and ty + 1, each instruction for the lanes whose guard holds.
//!
//! First touch (lockstep, a CTA's warps held at its barriers): A0's planes 0 and 1 (row by row, CTA
//! by CTA), then per k A0's plane k + 1 and Anext's plane k (rows 1 to ny - 2). Anext's planes 0
//! and nz - 1 and its rows 0 and ny - 1 are never written, so the next launch, reading that grid as
//! its A0, touches them first. Plain lockstep (warps not held at barriers) lets the rows j = 0 and
//! ny - 1, which store nothing, run ahead through A0's planes.

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;

/// `blockDim.x`: threads along x, one warp row.
const BLOCK_X: u64 = 32;
/// `blockDim.y`: rows of a CTA.
const BLOCK_Y: u64 = 4;
const CTA_THREADS: u64 = BLOCK_X * BLOCK_Y;
/// Columns along x per CTA: each thread takes i and i + 32.
const TILE_X: u64 = 2 * BLOCK_X;
/// float.
const ELEMENT_BYTES: u64 = 4;
/// CUDA's limit on `gridDim.y`, which bounds ny.
const MAX_GRID_Y: u64 = 65_535;

section! {
    /// Parameters of Parboil's 3D stencil (`block2D_hybrid_coarsen_x`): a 7-point Jacobi sweep over an nx x ny x nz float grid per launch, the two grids swapping roles between launches. Defaults: Parboil's default dataset (512 x 512 x 64), with 2 iterations instead of its 100.
    pub struct ParboilStencilParams {
        /// Grid width (elements along x, contiguous in memory); at least 3.
        pub nx: u64 = 512,
        /// Grid height (elements along y); at least 3, at most 262,140 (CUDA's 65,535 CTAs along y, 4 rows each).
        pub ny: u64 = 512,
        /// Grid depth (planes along z, walked by each thread's loop); at least 3.
        pub nz: u64 = 64,
        /// Sweeps: one kernel launch each, A0 and Anext swapping roles in between (Parboil's runs: 100).
        pub iterations: u32 = 2,
    }
}

impl ParboilStencilParams {
    pub fn validate(&self, p: &str, cfg: &Config) -> Result<(), (String, String)> {
        check(p, "nx", self.nx, 3, 1 << 24)?;
        check(p, "ny", self.ny, 3, BLOCK_Y * MAX_GRID_Y)?;
        check(p, "nz", self.nz, 3, 1 << 24)?;
        check(p, "iterations", self.iterations as u64, 1, 10_000)?;
        let cells = self.nx as u128 * self.ny as u128 * self.nz as u128;
        if cells > i32::MAX as u128 {
            return Err((
                p.into(),
                format!("nx * ny * nz is {cells} elements; the kernel indexes the grid with an int (Index3D): at most {}", i32::MAX),
            ));
        }
        let (ws, max) = (cfg.gpu.warp_size as u64, cfg.gpu.max_warps_per_sm as u64);
        if CTA_THREADS % ws != 0 || CTA_THREADS / ws > max {
            return Err((
                "gpu.warp_size".into(),
                format!(
                    "parboil-stencil's CTAs of 128 threads need a warp size dividing 128 and at most gpu.max_warps_per_sm ({max}) warps, got {ws}"
                ),
            ));
        }
        Ok(())
    }

    /// A0 and Anext.
    pub fn footprint(&self) -> u128 {
        2 * self.nx as u128 * self.ny as u128 * self.nz as u128 * ELEMENT_BYTES as u128
    }
}

#[derive(Debug, Clone)]
pub struct ParboilStencilKernel {
    /// This launch's A0 (read) and Anext (written).
    a0: Buffer,
    anext: Buffer,
    nx: u64,
    ny: u64,
    nz: u64,
    compute: u32,
}

/// Two grids; launch t reads grid t % 2 and writes the other. A0 is the input (copied in by the
/// explicit-copy program), Anext the output.
pub(super) fn build(p: &ParboilStencilParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let bytes = p.nx * p.ny * p.nz * ELEMENT_BYTES;
    let grids = [va.alloc(bytes, page), va.alloc(bytes, page)];
    let ctas = p.nx.div_ceil(TILE_X) * p.ny.div_ceil(BLOCK_Y);
    let kernels = (0..p.iterations as usize)
        .map(|t| {
            let (a0, anext) = (grids[t % 2], grids[1 - t % 2]);
            let k = ParboilStencilKernel { a0, anext, nx: p.nx, ny: p.ny, nz: p.nz, compute: w.compute_cycles };
            KernelSpec {
                name: "block2D_hybrid_coarsen_x",
                threads: ctas * CTA_THREADS,
                threads_per_cta: CTA_THREADS as u32,
                gen: KernelGen::ParboilStencil(k),
            }
        })
        .collect();
    (kernels, bytes)
}

/// Which of a thread's two columns: `i` or `i2 = i + 32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Half {
    I,
    I2,
}

/// The lanes an instruction runs for: the source's guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    /// Inside the grid (`i < nx && j < ny`): the centre column's loads.
    InGrid,
    /// `w_region` (i) or `w_region2` (i2): the thread writes Anext.
    Region,
    /// The region and `y_h_bound` (ty == 3): the row above comes from global memory.
    YHigh,
    /// The region and `y_l_bound` (ty == 0): the row below.
    YLow,
    /// The region and `x_l_bound` (tx == 0) for i, `x_h_bound` (tx == 31) for i2: the x neighbour
    /// outside the CTA's 64 columns.
    XEdge,
}

/// One instruction of a warp's program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// A load from A0 or a store to Anext, its lanes as at k = 0: which lanes run and their offsets
    /// do not depend on k, and each plane up adds one plane's bytes to every address, so they are
    /// worked out once per warp, not per plane. An explicit list's addresses are the warp's
    /// `explicit[start..start + n]` (`start` means nothing for a strided run).
    Mem {
        kind: MemKind,
        lanes: Lanes,
        start: u32,
    },
    Wait,
    Compute,
    Barrier,
}

impl ParboilStencilKernel {
    pub fn warp(&self, id: WarpId) -> ParboilStencilWarp {
        let cta = id.first_thread / CTA_THREADS;
        let grid_x = self.nx.div_ceil(TILE_X);
        let mut w = ParboilStencilWarp {
            k: self.clone(),
            bx: cta % grid_x,
            by: cta / grid_x,
            t0: id.first_thread % CTA_THREADS,
            lanes: id.lanes,
            steps: vec![],
            explicit: vec![],
            plane_start: 0,
            pos: 0,
            z: 0,
        };
        w.plan();
        w
    }
}

#[derive(Debug, Clone)]
pub struct ParboilStencilWarp {
    k: ParboilStencilKernel,
    bx: u64,
    by: u64,
    /// Flattened id (`tx + 32 ty`) of the warp's first thread in its CTA.
    t0: u64,
    lanes: u32,
    /// The prologue, then the body of the z loop (from `plane_start`): the instructions at least one
    /// lane runs (which lanes do does not depend on k).
    steps: Vec<Step>,
    /// The addresses of the `Lanes::Explicit` steps at k = 0, one run per step.
    explicit: Vec<u64>,
    plane_start: usize,
    pos: usize,
    /// The loop's k (0 in the prologue).
    z: u64,
}

impl ParboilStencilWarp {
    /// The (x, y) of `lane`'s column in `half` if the guard lets it run.
    fn runs(&self, half: Half, guard: Guard, lane: u64) -> Option<(u64, u64)> {
        let (nx, ny) = (self.k.nx, self.k.ny);
        let t = self.t0 + lane;
        let (tx, ty) = (t % BLOCK_X, t / BLOCK_X);
        let x = self.bx * TILE_X + tx + if half == Half::I2 { BLOCK_X } else { 0 };
        let y = self.by * BLOCK_Y + ty;
        let inner_y = y > 0 && y < ny - 1;
        // w_region checks i > 0; w_region2 does not (i2 >= 32).
        let region = inner_y && x < nx - 1 && (half == Half::I2 || x > 0);
        let edge_tx = if half == Half::I { 0 } else { BLOCK_X - 1 };
        let on = match guard {
            Guard::InGrid => x < nx && y < ny,
            Guard::Region => region,
            Guard::YHigh => region && ty == BLOCK_Y - 1,
            Guard::YLow => region && ty == 0,
            Guard::XEdge => region && tx == edge_tx,
        };
        on.then_some((x, y))
    }

    fn any(&self, half: Half, guard: Guard) -> bool {
        (0..self.lanes as u64).any(|l| self.runs(half, guard, l).is_some())
    }

    /// The warp's instructions: those of the source that at least one of its lanes runs.
    fn plan(&mut self) {
        let mut s = vec![Step::Barrier];
        for half in [Half::I, Half::I2] {
            if self.any(half, Guard::InGrid) {
                // bottom = A0[.., 0]; sh_A0[..] = A0[.., 1]: the store to shared memory waits.
                let bottom = self.mem(MemKind::Load, half, Guard::InGrid, (0, 0, 0));
                let centre = self.mem(MemKind::Load, half, Guard::InGrid, (0, 0, 1));
                s.extend([bottom, centre, Step::Wait]);
            }
        }
        s.push(Step::Barrier);
        self.plane_start = s.len();
        let mut outstanding = false;
        for half in [Half::I, Half::I2] {
            if self.any(half, Guard::InGrid) {
                s.push(self.mem(MemKind::Load, half, Guard::InGrid, (0, 0, 1)));
                outstanding = true;
            }
            if self.any(half, Guard::Region) {
                let side = if half == Half::I { -1 } else { 1 };
                for (guard, dx, dy) in [(Guard::YHigh, 0, 1), (Guard::YLow, 0, -1), (Guard::XEdge, side, 0)] {
                    if self.any(half, guard) {
                        s.push(self.mem(MemKind::Load, half, guard, (dx, dy, 0)));
                    }
                }
                // The region lies inside the grid: its top load is outstanding.
                let store = self.mem(MemKind::Store, half, Guard::Region, (0, 0, 0));
                s.extend([Step::Wait, Step::Compute, store]);
                outstanding = false;
            }
        }
        // __syncthreads; bottom = sh_A0[..]; sh_A0[..] = top (a top not yet used is waited for); __syncthreads.
        s.push(Step::Barrier);
        if outstanding {
            s.push(Step::Wait);
        }
        s.push(Step::Barrier);
        self.steps = s;
    }

    /// The instruction accessing `buf[x + dx, y + dy, k + dz]` (A0 for loads, Anext for the store)
    /// for the lanes the guard lets run, its addresses taken at k = 0.
    fn mem(&mut self, kind: MemKind, half: Half, guard: Guard, (dx, dy, dz): (i64, i64, u64)) -> Step {
        let (nx, ny) = (self.k.nx, self.k.ny);
        let buf = if kind == MemKind::Store { self.k.anext } else { self.k.a0 };
        let mut scratch = [0; MAX_LANES];
        let mut n = 0;
        for l in 0..self.lanes as u64 {
            if let Some((x, y)) = self.runs(half, guard, l) {
                let e = x.wrapping_add_signed(dx) + nx * (y.wrapping_add_signed(dy) + ny * dz);
                scratch[n] = buf.base + e * ELEMENT_BYTES;
                n += 1;
            }
        }
        let lanes = super::grid::compact(&scratch, n);
        let start = self.explicit.len() as u32;
        if let Lanes::Explicit { .. } = lanes {
            self.explicit.extend_from_slice(&scratch[..n]);
        }
        Step::Mem { kind, lanes, start }
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        if self.pos == self.steps.len() {
            // The loop runs k = 1 ..= nz - 2.
            if self.z + 2 >= self.k.nz {
                return Op::Exit;
            }
            (self.z, self.pos) = (self.z + 1, self.plane_start);
        } else if self.pos == self.plane_start && self.z == 0 {
            self.z = 1;
        }
        let step = self.steps[self.pos];
        self.pos += 1;
        match step {
            Step::Mem { kind, lanes, start } => {
                let shift = self.z * self.k.nx * self.k.ny * ELEMENT_BYTES;
                let lanes = match lanes {
                    Lanes::Strided { base, stride, n } => Lanes::Strided { base: base + shift, stride, n },
                    Lanes::Explicit { n } => {
                        let from = &self.explicit[start as usize..start as usize + n as usize];
                        for (to, a) in scratch.iter_mut().zip(from) {
                            *to = a + shift;
                        }
                        lanes
                    }
                };
                Op::Mem { kind, lanes, bytes: ELEMENT_BYTES as u32 }
            }
            Step::Wait => Op::Wait,
            Step::Compute => Op::Compute(self.k.compute),
            Step::Barrier => Op::Barrier,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{MemKind, Op, Program, WarpId, WarpStream, MAX_LANES};

    /// 192 x 12 x 4: a grid of (3, 3) CTAs, so CTA (1, 1) is interior; two planes in the loop.
    const SMALL: [&str; 4] = [
        "workload.kind=parboil-stencil",
        "workload.parboil_stencil.nx=192",
        "workload.parboil_stencil.ny=12",
        "workload.parboil_stencil.nz=4",
    ];

    fn sized(nx: u64, ny: u64, nz: u64, more: &[&str]) -> Program {
        let mut sets = vec![
            "workload.kind=parboil-stencil".to_string(),
            format!("workload.parboil_stencil.nx={nx}"),
            format!("workload.parboil_stencil.ny={ny}"),
            format!("workload.parboil_stencil.nz={nz}"),
        ];
        sets.extend(more.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
        program(&refs)
    }

    /// Warp `ty` of CTA (bx, by) of launch `k` (32-lane warps), in a grid `gx` CTAs wide.
    fn warp_of(p: &Program, k: usize, gx: u64, (bx, by, ty): (u64, u64, u64)) -> WarpStream {
        warps(p, k).swap_remove(((by * gx + bx) * 4 + ty) as usize)
    }

    #[test]
    fn parboils_default_dataset_is_the_default() {
        // 512 x 512 x 64 floats, two grids; grid (8, 128) of 128 threads; one launch per iteration.
        let p = program(&["workload.kind=parboil-stencil"]);
        let bytes: Vec<u64> = p.buffers.iter().map(|b| b.bytes).collect();
        assert_eq!(bytes, [512 * 512 * 64 * 4; 2]);
        let ks = kernels(&p);
        assert_eq!(ks.len(), 2);
        assert_eq!(
            (ks[0].name, ks[0].threads, ks[0].threads_per_cta, ks[0].ctas()),
            ("block2D_hybrid_coarsen_x", 8 * 128 * 128, 128, 1024)
        );
    }

    #[test]
    fn op_shape_of_middle_and_halo_row_warps() {
        let p = program(&SMALL);
        let shape = |bx, by, ty| op_shape(&all_ops(&mut warp_of(&p, 0, 3, (bx, by, ty))));
        let prologue = "bmmwmmwb";
        // ty 1 and 2 of an interior CTA: top, lane 0's x halo, wait, compute, store; the same at i2
        // with lane 31's; barrier, barrier. Twice (k = 1, 2).
        let middle = "mmwcm".repeat(2) + "bb";
        assert_eq!(shape(1, 1, 1), prologue.to_owned() + &middle.repeat(2));
        assert_eq!(shape(1, 1, 2), prologue.to_owned() + &middle.repeat(2));
        // ty 0 and 3 load the row below / above too: top, y halo, x halo.
        let halo_row = "mmmwcm".repeat(2) + "bb";
        assert_eq!(shape(1, 1, 0), prologue.to_owned() + &halo_row.repeat(2));
        assert_eq!(shape(1, 1, 3), prologue.to_owned() + &halo_row.repeat(2));
        // Row j = 0 (ty 0 of by 0) and j = ny - 1 = 11 (ty 3 of by 2) write nothing: both tops, then
        // the barrier, the wait at the tops' first use (into shared memory), the barrier.
        let edge = "mmbwb";
        assert_eq!(shape(1, 0, 0), prologue.to_owned() + &edge.repeat(2));
        assert_eq!(shape(1, 2, 3), prologue.to_owned() + &edge.repeat(2));
        // Their neighbours inside (j = 1, ty 1 of by 0; j = 10, ty 2 of by 2) read the edge rows
        // from shared memory.
        assert_eq!(shape(1, 0, 1), prologue.to_owned() + &middle.repeat(2));
        // bx 0: lane 0 (i = 0) is on the edge, no x halo at i; bx 2: lane 31 (i2 = 191) likewise at i2.
        assert_eq!(shape(0, 1, 1), prologue.to_owned() + &("mwcm".to_owned() + "mmwcm" + "bb").repeat(2));
        assert_eq!(shape(2, 1, 1), prologue.to_owned() + &("mmwcm".to_owned() + "mwcm" + "bb").repeat(2));
        // Computes take workload.compute_cycles.
        assert!(all_ops(&mut warp_of(&p, 0, 3, (1, 1, 1))).contains(&Op::Compute(4)));
    }

    #[test]
    fn addresses_of_one_warp_by_hand() {
        // 192 x 12 x 4, CTA (1, 1), ty 1: i = 64..96, i2 = 96..128, j = 5. A plane is 192 x 12 =
        // 2,304 elements; element (i, 5, k) is i + 960 + 2304 k.
        let p = program(&SMALL);
        let (a, n) = (p.buffers[0].base, p.buffers[1].base);
        let run = |base: u64, from: u64, to: u64| -> Vec<u64> { (from..to).map(|e| base + 4 * e).collect() };
        let ops = mem_ops(&mut warp_of(&p, 0, 3, (1, 1, 1)));
        let want = vec![
            // Prologue: A0[64..96, 5, 0] at element 1024 (byte 4,096), A0[64..96, 5, 1], then at i2.
            (MemKind::Load, run(a, 1024, 1056)),
            (MemKind::Load, run(a, 3328, 3360)),
            (MemKind::Load, run(a, 1056, 1088)),
            (MemKind::Load, run(a, 3360, 3392)),
            // k = 1: top A0[64..96, 5, 2]; lane 0's left A0[63, 5, 1]; store Anext[64..96, 5, 1].
            (MemKind::Load, run(a, 5632, 5664)),
            (MemKind::Load, vec![a + 4 * 3327]),
            (MemKind::Store, run(n, 3328, 3360)),
            // i2: top A0[96..128, 5, 2]; lane 31's right A0[128, 5, 1]; store Anext[96..128, 5, 1].
            (MemKind::Load, run(a, 5664, 5696)),
            (MemKind::Load, vec![a + 4 * 3392]),
            (MemKind::Store, run(n, 3360, 3392)),
        ];
        assert_eq!(ops[..10], want[..]);
        assert_eq!(ops[4].1[0], a + 4 * 5632);
        assert_eq!(ops.len(), 4 + 2 * 6);
        // k = 2: the same one plane up (2,304 elements).
        for (got, (kind, addrs)) in ops[10..].iter().zip(&want[4..]) {
            assert_eq!(got, &(*kind, addrs.iter().map(|x| x + 4 * 2304).collect::<Vec<_>>()));
        }
    }

    #[test]
    fn halo_loads_of_lane_0_lane_31_and_the_edge_rows() {
        // 100 x 12 x 3: grid (2, 3); CTA 1 along x covers i = 64..96 and i2 = 96..128 (only 96..100 in
        // the grid, 96..99 writing).
        let p = sized(100, 12, 3, &[]);
        let a = p.buffers[0].base;
        let e = |i: u64, j: u64, k: u64| a + 4 * (i + 100 * (j + 12 * k));
        let loads = |bx, by, ty| -> Vec<Vec<u64>> {
            mem_ops(&mut warp_of(&p, 0, 2, (bx, by, ty))).into_iter().filter(|(k, _)| *k == MemKind::Load).skip(4).map(|(_, v)| v).collect()
        };
        // CTA (0, 1), ty 0 (j = 4): top, the row below (lanes i = 1..32: i = 0 is the edge), no x halo
        // (lane 0 is i = 0); at i2: top, the row below, lane 31's right neighbour A0[64, 4, 1].
        assert_eq!(
            loads(0, 1, 0),
            [
                (0..32).map(|i| e(i, 4, 2)).collect::<Vec<_>>(),
                (1..32).map(|i| e(i, 3, 1)).collect(),
                (32..64).map(|i| e(i, 4, 2)).collect(),
                (32..64).map(|i| e(i, 3, 1)).collect(),
                vec![e(64, 4, 1)],
            ]
        );
        // CTA (1, 1), ty 3 (j = 7): top, the row above, lane 0's left A0[63, 7, 1]; at i2 only lanes
        // 0..4 (i2 < 100) load the top, lanes 0..3 (i2 < 99) the row above; lane 31 (i2 = 127) is out.
        assert_eq!(
            loads(1, 1, 3),
            [
                (64..96).map(|i| e(i, 7, 2)).collect::<Vec<_>>(),
                (64..96).map(|i| e(i, 8, 1)).collect(),
                vec![e(63, 7, 1)],
                (96..100).map(|i| e(i, 7, 2)).collect(),
                (96..99).map(|i| e(i, 8, 1)).collect(),
            ]
        );
        // Row j = 0: only the centre column (prologue and top), every lane inside the grid.
        let row0 = mem_ops(&mut warp_of(&p, 0, 2, (1, 0, 0)));
        assert_eq!(row0.iter().map(|(_, v)| v.len()).collect::<Vec<_>>(), [32, 32, 4, 4, 32, 4]);
        assert!(row0.iter().all(|(k, _)| *k == MemKind::Load));
        // Rows past ny (grid y 3 covers j = 8..12: all inside at ny = 12); at ny = 10, ty 2 and 3 of
        // by 2 (j = 10, 11) are outside: barriers only.
        let q = sized(100, 10, 3, &[]);
        assert_eq!(op_shape(&all_ops(&mut warp_of(&q, 0, 2, (0, 2, 2)))), "bbbb");
        assert_eq!(op_shape(&all_ops(&mut warp_of(&q, 0, 2, (0, 2, 3)))), "bbbb");
    }

    /// Every lane of every warp against the source's expressions and guards, for warps of 16, 32 and
    /// 64 lanes; each launch stores every interior element of Anext once and nothing else.
    #[test]
    fn lanes_match_the_source_and_interior_is_stored_once() {
        for (nx, ny, nz, ws) in [(192u64, 12u64, 4u64, 32u64), (100, 10, 5, 32), (70, 7, 3, 64), (65, 5, 4, 16), (3, 3, 3, 32)] {
            let p = sized(nx, ny, nz, &[&format!("gpu.warp_size={ws}")]);
            let (a, n) = (p.buffers[0].base, p.buffers[1].base);
            let k0 = kernels(&p)[0];
            let gx = nx.div_ceil(64);
            let idx = |i: u64, j: u64, k: u64| i + nx * (j + ny * k);
            let mut stores = vec![];
            for wi in 0..k0.threads / ws {
                let mut w = k0.gen.warp(WarpId { global: wi, first_thread: wi * ws, lanes: ws as u32 });
                let cta = wi * ws / 128;
                let (bx, by) = (cta % gx, cta / gx);
                // (tx, ty) of each lane, in lane order.
                let threads: Vec<(u64, u64)> = (wi * ws % 128..wi * ws % 128 + ws).map(|t| (t % 32, t / 32)).collect();
                // One instruction: the lanes for which `on(i, i2, j, tx, ty)` holds, at `at(...)`.
                let instr = |on: &dyn Fn(u64, u64, u64, u64, u64) -> bool, at: &dyn Fn(u64, u64, u64) -> u64| -> Vec<u64> {
                    threads
                        .iter()
                        .map(|&(tx, ty)| (64 * bx + tx, 64 * bx + tx + 32, 4 * by + ty, tx, ty))
                        .filter(|&(i, i2, j, tx, ty)| on(i, i2, j, tx, ty))
                        .map(|(i, i2, j, _, _)| at(i, i2, j))
                        .collect()
                };
                let w_region = |i: u64, _: u64, j: u64| i > 0 && j > 0 && i < nx - 1 && j < ny - 1;
                let w_region2 = |_: u64, i2: u64, j: u64| j > 0 && i2 < nx - 1 && j < ny - 1;
                let mut want: Vec<(MemKind, Vec<u64>)> = vec![];
                let mut push = |kind, v: Vec<u64>| {
                    if !v.is_empty() {
                        want.push((kind, v))
                    }
                };
                let ld = MemKind::Load;
                push(ld, instr(&|i, _, j, _, _| i < nx && j < ny, &|i, _, j| a + 4 * idx(i, j, 0)));
                push(ld, instr(&|i, _, j, _, _| i < nx && j < ny, &|i, _, j| a + 4 * idx(i, j, 1)));
                push(ld, instr(&|_, i2, j, _, _| i2 < nx && j < ny, &|_, i2, j| a + 4 * idx(i2, j, 0)));
                push(ld, instr(&|_, i2, j, _, _| i2 < nx && j < ny, &|_, i2, j| a + 4 * idx(i2, j, 1)));
                for k in 1..nz - 1 {
                    push(ld, instr(&|i, _, j, _, _| i < nx && j < ny, &|i, _, j| a + 4 * idx(i, j, k + 1)));
                    push(ld, instr(&|i, i2, j, _, ty| w_region(i, i2, j) && ty == 3, &|i, _, j| a + 4 * idx(i, j + 1, k)));
                    push(ld, instr(&|i, i2, j, _, ty| w_region(i, i2, j) && ty == 0, &|i, _, j| a + 4 * idx(i, j - 1, k)));
                    push(ld, instr(&|i, i2, j, tx, _| w_region(i, i2, j) && tx == 0, &|i, _, j| a + 4 * idx(i - 1, j, k)));
                    push(MemKind::Store, instr(&|i, i2, j, _, _| w_region(i, i2, j), &|i, _, j| n + 4 * idx(i, j, k)));
                    push(ld, instr(&|_, i2, j, _, _| i2 < nx && j < ny, &|_, i2, j| a + 4 * idx(i2, j, k + 1)));
                    push(ld, instr(&|i, i2, j, _, ty| w_region2(i, i2, j) && ty == 3, &|_, i2, j| a + 4 * idx(i2, j + 1, k)));
                    push(ld, instr(&|i, i2, j, _, ty| w_region2(i, i2, j) && ty == 0, &|_, i2, j| a + 4 * idx(i2, j - 1, k)));
                    push(ld, instr(&|i, i2, j, tx, _| w_region2(i, i2, j) && tx == 31, &|_, i2, j| a + 4 * idx(i2 + 1, j, k)));
                    push(MemKind::Store, instr(&|i, i2, j, _, _| w_region2(i, i2, j), &|_, i2, j| n + 4 * idx(i2, j, k)));
                }
                let got = mem_ops(&mut w);
                assert_eq!(got, want, "{nx} x {ny} x {nz}, warp size {ws}, warp {wi}");
                stores.extend(got.into_iter().filter(|(kind, _)| *kind == MemKind::Store).flat_map(|(_, v)| v));
            }
            stores.sort_unstable();
            let interior: Vec<u64> =
                (1..nz - 1).flat_map(|k| (1..ny - 1).flat_map(move |j| (1..nx - 1).map(move |i| n + 4 * idx(i, j, k)))).collect();
            assert_eq!(stores, interior, "{nx} x {ny} x {nz}: interior stored once, boundary never");
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        use crate::config::{resolve, Source};
        let refused = |sets: &[&str], key: &str| {
            let mut o = vec!["workload.kind=parboil-stencil".to_string()];
            o.extend(sets.iter().map(|s| format!("workload.parboil_stencil.{s}")));
            let e = resolve(&[] as &[Source], &o).err().unwrap_or_else(|| panic!("{o:?} accepted")).to_string();
            assert!(e.contains(key), "{o:?}: {e}");
        };
        for (set, key) in [("nx=2", "nx"), ("ny=2", "ny"), ("nz=2", "nz"), ("nz=0", "nz"), ("ny=262141", "ny"), ("nx=16777217", "nx")] {
            refused(&[set], &format!("workload.parboil_stencil.{key}"));
        }
        refused(&["iterations=0"], "workload.parboil_stencil.iterations");
        // 2048^3 elements overflow the kernel's int index.
        refused(&["nx=2048", "ny=2048", "nz=2048"], "Index3D");
        let e = resolve(&[] as &[Source], &["workload.kind=parboil-stencil".into(), "gpu.warp_size=48".into()]).err().unwrap().to_string();
        assert!(e.contains("warp_size"), "{e}");
        // The smallest grid is accepted: one interior element.
        assert_eq!(kernels(&sized(3, 3, 3, &[]))[0].ctas(), 1);
    }

    /// Lockstep as testutil::first_touch, but a warp at a barrier waits until every live warp of its CTA
    /// reaches one (gpu.cta_barriers), as on the GPU.
    fn first_touch_with_barriers(p: &Program) -> Vec<(usize, u64)> {
        let mut seen = std::collections::HashSet::new();
        let mut out = vec![];
        let mut s = [0; MAX_LANES];
        for k in 0..kernels(p).len() {
            // (warp, waiting at a barrier, exited); a CTA is 4 consecutive warps.
            let mut live: Vec<(WarpStream, bool, bool)> = warps(p, k).into_iter().map(|w| (w, false, false)).collect();
            while live.iter().any(|w| !w.2) {
                for (w, waiting, done) in live.iter_mut() {
                    if *waiting || *done {
                        continue;
                    }
                    let op = w.next(&mut s);
                    for a in addrs(op, &s) {
                        if seen.insert(a >> 12) {
                            let b = p.buffers.iter().position(|b| a >= b.base && a < b.base + b.bytes).expect("inside a buffer");
                            out.push((b, (a - p.buffers[b].base) >> 12));
                        }
                    }
                    match op {
                        Op::Barrier => *waiting = true,
                        Op::Exit => *done = true,
                        _ => {}
                    }
                }
                // Release each CTA whose live warps all wait.
                for cta in live.chunks_mut(4) {
                    if cta.iter().all(|w| w.1 || w.2) {
                        cta.iter_mut().for_each(|w| w.1 = false);
                    }
                }
            }
        }
        out
    }

    #[test]
    fn first_touch_goes_plane_by_plane_and_the_grids_ping_pong() {
        // 128 x 8 floats: one 4 KiB page per plane. nz = 6, two launches.
        let p = sized(128, 8, 6, &["workload.parboil_stencil.iterations=2"]);
        let ft = first_touch_with_barriers(&p);
        // Launch 1: A0's planes 0 and 1, then per k A0's plane k + 1 and Anext's plane k.
        let mut want = vec![(0, 0), (0, 1)];
        for k in 1..5 {
            want.extend([(0, k + 1), (1, k)]);
        }
        // Launch 2 reads grid 1 as A0: its planes 0 and 5, never written, come first then.
        want.extend([(1, 0), (1, 5)]);
        assert_eq!(ft, want);
    }

    #[test]
    fn launches_ping_pong_between_the_grids() {
        let p = sized(128, 8, 4, &["workload.parboil_stencil.iterations=3"]);
        let (g0, g1) = (&p.buffers[0], &p.buffers[1]);
        let inside = |g: &crate::workload::Buffer, a: u64| a >= g.base && a < g.base + g.bytes;
        for (k, (src, dst)) in [(g0, g1), (g1, g0), (g0, g1)].into_iter().enumerate() {
            for mut w in warps(&p, k) {
                for (kind, v) in mem_ops(&mut w) {
                    let g = if kind == MemKind::Load { src } else { dst };
                    assert!(v.iter().all(|&a| inside(g, a)), "launch {k}: {kind:?} outside its grid");
                }
            }
        }
        // The explicit-copy program copies A0 in, Anext out.
        let q = sized(128, 8, 4, &["workload.memcpy_inputs=true", "workload.memcpy_outputs=true"]);
        assert!(matches!(q.ops[0], crate::workload::HostOp::MemcpyH2D { bytes } if bytes == 128 * 8 * 4 * 4));
        assert!(matches!(q.ops.last(), Some(crate::workload::HostOp::MemcpyD2H { bytes }) if *bytes == 128 * 8 * 4 * 4));
    }
}
