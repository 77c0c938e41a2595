//! `pathfinder` (Rodinia): dynamic programming over a rows x cols grid of
//! weights, row by row: the cost of cell (r, x) is its weight plus the
//! least of the costs of (r-1, x-1), (r-1, x), (r-1, x+1). One launch per
//! pyramid step covers `pyramid_height` rows, in the order of
//! `dynproc_kernel`'s PTX (docs/workloads.md, "Load order"): each thread (one
//! per column) loads the previous cost row at its own column x, waits (the
//! value goes straight to shared memory) and meets its CTA; the neighbours
//! x-1 and x+1 come from shared memory, staged by the neighbouring threads.
//! Then per row it loads its weight `wall[row][x]`, waits, computes and
//! meets (after the step), and meets again after copying the result back,
//! except after the launch's last row (Rodinia leaves the loop before the
//! copy): 2n barriers for n rows. At the end it stores its cost into the
//! other cost row (ping-pong). The weights of the first row are the initial
//! costs, so `wall` holds rows 1..rows.
//!
//! Simplified from Rodinia: its CTAs overlap by the pyramid's halo (each CTA
//! computes fewer columns than it has threads, and its halo threads load the
//! cost but neither weights nor a result, as do the threads outside the
//! shrinking pyramid in later rows); here every thread owns one column and
//! computes every row. A computing Rodinia thread reads its cost element and
//! its column's weights and writes its result, as a thread does here. Before
//! 2026-12-01 each thread loaded the cost row at x-1, x and x+1 (three loads
//! in flight) and met its CTA 1 + 2n times, and this comment claimed Rodinia's
//! threads read the same: they read the neighbours from shared memory.
//!
//! Arrays in allocation order: wall ((rows-1) x cols), cost 0, cost 1 (cols
//! each). First touch (lockstep): cost 0, then wall row by row (one row per
//! step of the pyramid), then cost 1.

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of the Rodinia pathfinder dynamic program.
    pub struct PathfinderParams {
        /// Rows of the weight grid (the first is the initial cost row).
        pub rows: u64 = 100,
        /// Columns (threads).
        pub cols: u64 = 16_384,
        /// Rows per kernel launch (Rodinia's pyramid height).
        pub pyramid_height: u32 = 20,
    }
}

impl PathfinderParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "rows", self.rows, 2, 1 << 24)?;
        check(p, "cols", self.cols, 1, 1 << 30)?;
        check(p, "pyramid_height", self.pyramid_height as u64, 1, 1024)?;
        if (self.rows - 1).div_ceil(self.pyramid_height as u64) > 10_000 {
            return Err((format!("{p}.pyramid_height"), format!("gives more than 10000 launches for {} rows; raise it", self.rows)));
        }
        Ok(())
    }

    /// Weights of rows 1.., two cost rows, ints.
    pub fn footprint(&self) -> u128 {
        (self.rows as u128 + 1) * self.cols as u128 * 4
    }
}

pub(super) fn build(p: &PathfinderParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let wall = va.alloc((p.rows - 1) * p.cols * 4, page);
    let cost = [va.alloc(p.cols * 4, page), va.alloc(p.cols * 4, page)];
    let ph = p.pyramid_height as u64;
    let kernels = (0..(p.rows - 1).div_ceil(ph))
        .map(|i| {
            let start = i * ph;
            let (src, dst) = (cost[i as usize % 2], cost[1 - i as usize % 2]);
            // dynproc_kernel stages its column's cost in shared memory (stored at once: one load in
            // flight) and meets; each row's step loads the weight, adds it to the least of the
            // neighbours (from shared memory), meets, and but for the last row copies the result
            // back and meets again.
            let rows = start..(start + ph).min(p.rows - 1);
            let mut body = vec![Step::load(1, Index::HERE), Step::Wait, Step::Barrier];
            for row in rows.clone() {
                body.extend([Step::load(0, Index::affine(row * p.cols, 1, 0)), Step::Wait, Step::Compute(w.compute_cycles), Step::Barrier]);
                if row + 1 < rows.end {
                    body.push(Step::Barrier);
                }
            }
            body.push(Step::store(2, Index::HERE));
            let arrays = [wall, src, dst].iter().map(|b| Array { base: b.base, elem_bytes: 4 }).collect();
            let k = GridKernel::new([p.cols, 1, 1], p.cols, 1, arrays, body);
            KernelSpec { name: "pathfinder", threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }
        })
        .collect();
    (kernels, wall.bytes + cost[0].bytes)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{MemKind, Op};

    #[test]
    fn one_launch_per_pyramid_step_reading_its_rows() {
        // 8 rows -> 7 rows of weights; pyramid 3 -> launches of rows 0-2, 3-5, 6.
        let p = program(&[
            "workload.kind=pathfinder",
            "workload.pathfinder.rows=8",
            "workload.pathfinder.cols=1024",
            "workload.pathfinder.pyramid_height=3",
        ]);
        assert_eq!(kernels(&p).len(), 3);
        let (wall, c0, c1) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        // Launch 1, lane 5 of warp 2 (column 69): its cost in cost 1; weights of rows 3, 4, 5; store to cost 0.
        let ops: Vec<(MemKind, u64)> = mem_ops(&mut warps(&p, 1)[2]).iter().map(|(k, a)| (*k, a[5])).collect();
        let l = |a| (MemKind::Load, a);
        let w = |row: u64| wall + row * 4096 + 69 * 4;
        assert_eq!(ops, [l(c1 + 69 * 4), l(w(3)), l(w(4)), l(w(5)), (MemKind::Store, c0 + 69 * 4)]);
        // The last launch has one row.
        assert_eq!(mem_ops(&mut warps(&p, 2)[0]).len(), 1 + 1 + 1);
        // First touch: cost 0, the first pyramid's weight rows, cost 1, then the later rows.
        let ft = first_touch(&p);
        assert_eq!(ft[..5], [(1, 0), (0, 0), (0, 1), (0, 2), (2, 0)]);
        assert_eq!(ft[5..], [(0, 3), (0, 4), (0, 5), (0, 6)]);
    }

    #[test]
    fn the_cta_meets_after_staging_the_cost_and_twice_per_row_but_the_last() {
        let p = program(&[
            "workload.kind=pathfinder",
            "workload.pathfinder.rows=8",
            "workload.pathfinder.cols=64",
            "workload.pathfinder.pyramid_height=3",
        ]);
        // The cost load, wait, barrier; per row: load, wait, compute, barrier, and a second
        // barrier but after the last row; the store: 2n barriers for n rows.
        let ops = all_ops(&mut warps(&p, 0)[0]);
        assert_eq!(op_shape(&ops), "mwb".to_owned() + "mwcbb" + "mwcbb" + "mwcb" + "m");
        assert_eq!(ops.iter().filter(|o| **o == Op::Barrier).count(), 6);
        // A launch of one row meets twice: after staging, after the step.
        assert_eq!(op_shape(&all_ops(&mut warps(&p, 2)[1])), "mwbmwcbm");
    }

    #[test]
    fn a_step_computes_and_the_host_copies_the_weights_and_the_first_cost_row() {
        let p = program(&[
            "workload.kind=pathfinder",
            "workload.pathfinder.rows=8",
            "workload.pathfinder.cols=64",
            "workload.pathfinder.pyramid_height=3",
        ]);
        // The first row's step: load, wait, compute (compute_cycles 4).
        assert_eq!(all_ops(&mut warps(&p, 0)[0])[5], Op::Compute(4));
        // Inputs: the weights of rows 1..8, 7 x 64 ints = 1792 bytes, and cost 0, 64 ints = 256 bytes.
        assert_eq!(p.host.input_bytes, Some(1792 + 256));
        // 6 rows of weights in pyramids of 3: 2 launches, none empty.
        let p = program(&["workload.kind=pathfinder", "workload.pathfinder.rows=7", "workload.pathfinder.pyramid_height=3"]);
        assert_eq!(kernels(&p).len(), 2);
    }
}
