//! `hotspot` (Rodinia): transient thermal simulation on a rows x cols chip.
//! Each launch advances `pyramid_height` time steps: every cell loads its
//! temperature, waits, loads its power, waits (each load's value goes
//! straight to shared memory: one load in flight, as in the kernel's PTX,
//! docs/workloads.md, "Load order"), meets its CTA at a barrier (the staging
//! `__syncthreads`), computes the steps (`pyramid_height * compute_cycles`,
//! or with `setup_insts`/`step_insts`, `cell_insts()` instructions of one
//! issue slot each, the 2 * pyramid_height barriers among them: two per step
//! but the last, which leaves the loop before the copy back), and stores its
//! new temperature into the other temperature grid (ping-pong).
//! `iterations / pyramid_height` launches (rounded up).
//!
//! Simplified from Rodinia: one thread per cell, row-major (Rodinia uses 16 x 16
//! thread tiles that overlap by the pyramid's halo, each thread loading one
//! cell, and keep the intermediate steps and the neighbours in shared memory;
//! the pages read and written are the same). Before 2026-12-01 each cell
//! loaded its four neighbours too, all six loads in flight together, and met
//! its CTA 1 + 2 * pyramid_height times.
//!
//! Arrays in allocation order: temperature 0, temperature 1, power. First
//! touch (lockstep): temperature 0 row-major, power row-major, temperature 1 row-major.

use super::grid::{staged, Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of the Rodinia hotspot thermal stencil.
    pub struct HotspotParams {
        /// Grid rows (cells along y).
        pub rows: u64 = 512,
        /// Grid columns (cells along x, contiguous).
        pub cols: u64 = 512,
        /// Simulated time steps.
        pub iterations: u32 = 2,
        /// Time steps per kernel launch (Rodinia's pyramid height).
        pub pyramid_height: u32 = 1,
        /// Arithmetic, control and shared-memory warp instructions of a Rodinia thread per launch
        /// outside the time steps, each taking an issue slot of its SM (with `step_insts`; both 0 =
        /// the launch's work is `pyramid_height x compute_cycles` of latency that takes no issue
        /// slot). Rodinia's `calculate_temp` (CUDA) counted as Fermi instructions: thread and block
        /// ids 4, `step/Cap` (IEEE division) 10, the three reciprocals 18, tile and index arithmetic
        /// 15, the load's range test 6, 2 shared stores and a barrier 3, the valid range 12, the
        /// clamped neighbours N, S, W, E 12, the final store's test and shared load 4 = 84.
        pub setup_insts: u32 = 0,
        /// Instructions of a Rodinia thread per time step (see `setup_insts`): the four range tests
        /// 13, 6 shared loads, the update 19 (9 of them double precision: the `2.0` literal
        /// promotes it), the shared store of the result 1, two barriers, the last-step test and
        /// the copy back 6, the loop 3 = 50 (the zheng suite's count).
        pub step_insts: u32 = 0,
    }
}

/// Rodinia's thread tile side (BLOCK_SIZE): a launch of pyramid height h runs 16 x 16 threads
/// per (16 - 2h)^2 cells it computes, the rest being the halo.
const TILE: u64 = 16;

impl HotspotParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "rows", self.rows, 1, 1 << 24)?;
        check(p, "cols", self.cols, 1, 1 << 24)?;
        check(p, "iterations", self.iterations as u64, 1, 10_000)?;
        check(p, "pyramid_height", self.pyramid_height as u64, 1, 64)?;
        check(p, "setup_insts", self.setup_insts as u64, 0, 10_000)?;
        check(p, "step_insts", self.step_insts as u64, 0, 10_000)?;
        if self.setup_insts + self.step_insts > 0 && 2 * self.pyramid_height as u64 >= TILE {
            return Err((
                format!("{p}.pyramid_height"),
                format!("must be below {} with setup_insts or step_insts (Rodinia's 16 x 16 tile), got {}", TILE / 2, self.pyramid_height),
            ));
        }
        Ok(())
    }

    /// Instructions per cell and launch: a thread's, times Rodinia's threads per computed cell.
    pub fn cell_insts(&self) -> u64 {
        let h = self.pyramid_height as u64;
        let per_thread = self.setup_insts as u64 + h * self.step_insts as u64;
        (per_thread * TILE * TILE).div_ceil((TILE - 2 * h).pow(2))
    }

    /// Two temperature grids and the power grid, floats.
    pub fn footprint(&self) -> u128 {
        3 * self.rows as u128 * self.cols as u128 * 4
    }
}

pub(super) fn build(p: &HotspotParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let bytes = p.rows * p.cols * 4;
    let (t0, t1, power) = (va.alloc(bytes, page), va.alloc(bytes, page), va.alloc(bytes, page));
    // Rodinia's calculate_temp stages its cell's temperature and power in shared memory, each
    // load's value stored there at once (one load in flight: the PTX, docs/workloads.md, "Load
    // order"); the neighbours are read from shared memory, loaded by the neighbouring threads.
    let mut body = vec![Step::load(0, Index::HERE), Step::Wait, Step::load(1, Index::HERE), Step::Wait];
    // It meets once after the staging and twice per time step (after the step, after copying
    // it back) but the last, which leaves the loop before the copy: 2h barriers. With
    // instruction counts (one issue slot each: the SM's issue rate bounds the kernel) the
    // barriers are among them.
    let barriers = 2 * p.pyramid_height;
    body.extend(staged(p.cell_insts().try_into().unwrap_or(u32::MAX), p.pyramid_height * w.compute_cycles, barriers));
    body.push(Step::store(2, Index::HERE));
    let launches = p.iterations.div_ceil(p.pyramid_height) as usize;
    let kernels = (0..launches)
        .map(|i| {
            let (src, dst) = if i % 2 == 0 { (t0, t1) } else { (t1, t0) };
            let arrays = [src, power, dst].iter().map(|b| Array { base: b.base, elem_bytes: 4 }).collect();
            let k = GridKernel::new([p.cols, p.rows, 1], p.rows * p.cols, 1, arrays, body.clone());
            KernelSpec { name: "hotspot", threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }
        })
        .collect();
    (kernels, 2 * bytes)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn a_cell_reads_its_temperature_and_power_and_writes_the_other_grid() {
        let p = program(&[
            "workload.kind=hotspot",
            "workload.hotspot.rows=4",
            "workload.hotspot.cols=32",
            "workload.hotspot.iterations=4",
            "workload.hotspot.pyramid_height=2",
        ]);
        assert_eq!(kernels(&p).len(), 2);
        let (t0, t1, pw) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let c = |b: u64, x: u64, y: u64| b + 4 * (y * 32 + x);
        // Warp 3 = row 3. Lane 31 = (31, 3): its temperature, its power, its new temperature.
        let ops = mem_ops(&mut warps(&p, 0)[3]);
        let lane31: Vec<(MemKind, u64)> = ops.iter().map(|(k, a)| (*k, a[31])).collect();
        assert_eq!(lane31, [(MemKind::Load, c(t0, 31, 3)), (MemKind::Load, c(pw, 31, 3)), (MemKind::Store, c(t1, 31, 3))]);
        // The second launch reads temperature 1 and writes temperature 0.
        let ops = mem_ops(&mut warps(&p, 1)[0]);
        assert_eq!((ops[0].1[0], ops[2].1[0]), (t1, t0));
        assert_eq!(first_touch(&p).iter().map(|&(b, _)| b).collect::<Vec<_>>(), [0, 2, 1]);
    }

    #[test]
    fn insts_issue_a_threads_count_times_the_tiles_overlap_per_cell() {
        use crate::workload::Op;
        let base = ["workload.kind=hotspot", "workload.hotspot.rows=4", "workload.hotspot.cols=32", "workload.hotspot.pyramid_height=2"];
        let old = all_ops(&mut warps(&program(&base), 0)[1]);
        let mut sets = base.to_vec();
        sets.extend(["workload.hotspot.setup_insts=10", "workload.hotspot.step_insts=4"]);
        let new = all_ops(&mut warps(&program(&sets), 0)[1]);
        // Height 2: 12 x 12 cells per 16 x 16 threads; (10 + 2 x 4) x 256 / 144 = 32 per cell.
        // Latency mode: each load waited for, a barrier, the latency, the steps' 3 other barriers.
        assert_eq!(op_shape(&old), "mwmwbcbbbm");
        assert_eq!(old[5], Op::Compute(8));
        // Instruction mode: 32 slots, 4 of them barriers, each followed by its share of the other 28.
        assert_eq!(new.len(), 4 + 32 + 1);
        assert_eq!(new[4..36].iter().filter(|o| **o == Op::Barrier).count(), 4);
        assert_eq!(new[4..36].iter().filter(|o| **o == Op::Compute(1)).count(), 28);
        assert_eq!(new[4], Op::Barrier);
        assert!(matches!(new[36], Op::Mem { .. }));
        let mem = |v: &[Op]| v.iter().filter(|o| matches!(o, Op::Mem { .. } | Op::Wait)).copied().collect::<Vec<_>>();
        assert_eq!(mem(&old), mem(&new));
        // Height 1: 14 x 14 of 256, rounded up: (84 + 50) x 256 / 196 = 175.02 -> 176.
        let p = crate::workload::hotspot::HotspotParams { setup_insts: 84, step_insts: 50, ..Default::default() };
        assert_eq!(p.cell_insts(), 176);
        assert_eq!(crate::workload::hotspot::HotspotParams::default().cell_insts(), 0);
        // Height 8 leaves no cells in a tile.
        let bad = crate::workload::hotspot::HotspotParams { step_insts: 1, pyramid_height: 8, ..Default::default() };
        assert_eq!(bad.validate("w").unwrap_err().0, "w.pyramid_height");
    }

    #[test]
    fn launches_round_up_and_the_host_copies_a_temperature_grid_and_the_power() {
        let p = program(&[
            "workload.kind=hotspot",
            "workload.hotspot.rows=4",
            "workload.hotspot.cols=32",
            "workload.hotspot.iterations=3",
            "workload.hotspot.pyramid_height=2",
        ]);
        // Rodinia's `for (t = 0; t < total_iterations; t += num_iterations)`: ceil(3 / 2) = 2 launches.
        assert_eq!(kernels(&p).len(), 2);
        // Inputs: temperature 0 and the power, 4 x 32 floats = 512 bytes each; temperature 1 is an output.
        assert_eq!(p.host.input_bytes, Some(2 * 512));
    }
}
