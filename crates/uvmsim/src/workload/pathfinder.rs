//! `pathfinder` (Rodinia): dynamic programming over a rows x cols grid of
//! weights, row by row: the cost of cell (r, x) is its weight plus the
//! least of the costs of (r-1, x-1), (r-1, x), (r-1, x+1). One launch per
//! pyramid step covers `pyramid_height` rows: each thread (one per column)
//! loads the previous cost row at x-1, x, x+1 (clamped at the edges), waits and
//! meets its CTA (Rodinia stages the row in shared memory), then per row loads
//! its weight `wall[row][x]`, waits, computes and meets twice (after the step,
//! after the copy back), and at the end stores its cost into the other cost
//! row (ping-pong). The weights of the
//! first row are the initial costs, so `wall` holds rows 1..rows.
//!
//! Simplified from Rodinia: its CTAs overlap by the pyramid's halo (each CTA
//! computes fewer columns than it has threads); here every thread owns one
//! column. The per-thread global reads and writes are the same.
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
            // dynproc_kernel stages the cost row in shared memory and meets; each row's step
            // meets after computing and after copying the result back.
            let mut body: Vec<Step> = [-1, 0, 1].iter().map(|&dx| Step::load(1, Index::at(dx, 0, 0))).collect();
            body.extend([Step::Wait, Step::Barrier]);
            for row in start..(start + ph).min(p.rows - 1) {
                body.extend([
                    Step::load(0, Index::affine(row * p.cols, 1, 0)),
                    Step::Wait,
                    Step::Compute(w.compute_cycles),
                    Step::Barrier,
                    Step::Barrier,
                ]);
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
    use crate::workload::MemKind;

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
        // Launch 1, thread 0: costs at x -1 (clamped), 0, 1 of cost 1; weights of rows 3, 4, 5; store to cost 0.
        let ops: Vec<(MemKind, u64)> = mem_ops(&mut warps(&p, 1)[0]).iter().map(|(k, a)| (*k, a[0])).collect();
        let l = |a| (MemKind::Load, a);
        assert_eq!(ops, [l(c1), l(c1), l(c1 + 4), l(wall + 3 * 4096), l(wall + 4 * 4096), l(wall + 5 * 4096), (MemKind::Store, c0)]);
        // The last launch has one row.
        assert_eq!(mem_ops(&mut warps(&p, 2)[0]).len(), 3 + 1 + 1);
        // First touch: cost 0, the first pyramid's weight rows, cost 1, then the later rows.
        let ft = first_touch(&p);
        assert_eq!(ft[..5], [(1, 0), (0, 0), (0, 1), (0, 2), (2, 0)]);
        assert_eq!(ft[5..], [(0, 3), (0, 4), (0, 5), (0, 6)]);
    }

    #[test]
    fn the_cta_meets_after_staging_the_cost_row_and_twice_per_row() {
        let p = program(&["workload.kind=pathfinder", "workload.pathfinder.rows=3", "workload.pathfinder.cols=64"]);
        // The cost row's 3 loads, wait, barrier; per row: load, wait, compute, 2 barriers; the store.
        assert_eq!(op_shape(&all_ops(&mut warps(&p, 0)[0])), "mmmwb".to_owned() + &"mwcbb".repeat(2) + "m");
    }
}
