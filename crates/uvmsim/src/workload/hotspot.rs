//! `hotspot` (Rodinia): transient thermal simulation on a rows x cols chip.
//! Each launch advances `pyramid_height` time steps: every cell loads its
//! temperature and its four neighbours' (clamped at the chip's edge) and its
//! power, waits, computes the steps (`pyramid_height * compute_cycles`), and
//! stores its new temperature into the other temperature grid (ping-pong).
//! `iterations / pyramid_height` launches (rounded up).
//!
//! Simplified from Rodinia: one thread per cell, row-major (Rodinia uses 16 x 16
//! thread tiles that overlap by the pyramid's halo and keep the intermediate
//! steps in shared memory; the global reads and writes per cell are the same).
//!
//! Arrays in allocation order: temperature 0, temperature 1, power. First
//! touch (lockstep): temperature 0 row-major, power row-major, temperature 1 row-major.

use super::grid::{Array, GridKernel, Index, Step};
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
    }
}

impl HotspotParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "rows", self.rows, 1, 1 << 24)?;
        check(p, "cols", self.cols, 1, 1 << 24)?;
        check(p, "iterations", self.iterations as u64, 1, 10_000)?;
        check(p, "pyramid_height", self.pyramid_height as u64, 1, 64)
    }

    /// Two temperature grids and the power grid, floats.
    pub fn footprint(&self) -> u128 {
        3 * self.rows as u128 * self.cols as u128 * 4
    }
}

pub(super) fn build(p: &HotspotParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let bytes = p.rows * p.cols * 4;
    let (t0, t1, power) = (va.alloc(bytes, page), va.alloc(bytes, page), va.alloc(bytes, page));
    let mut body: Vec<Step> =
        [(0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)].iter().map(|&(dx, dy)| Step::load(0, Index::at(dx, dy, 0))).collect();
    body.extend([Step::load(1, Index::HERE), Step::Wait, Step::Compute(p.pyramid_height * w.compute_cycles), Step::store(2, Index::HERE)]);
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
    fn a_cell_reads_its_neighbours_and_power_and_writes_the_other_grid() {
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
        // Warp 3 = row 3 (the last): its south neighbour clamps to itself. Lane 31 = (31, 3).
        let ops = mem_ops(&mut warps(&p, 0)[3]);
        let lane31: Vec<(MemKind, u64)> = ops.iter().map(|(k, a)| (*k, a[31])).collect();
        let want = [c(t0, 31, 3), c(t0, 31, 2), c(t0, 31, 3), c(t0, 30, 3), c(t0, 31, 3), c(pw, 31, 3)];
        assert_eq!(lane31[..6], want.map(|a| (MemKind::Load, a)));
        assert_eq!(lane31[6], (MemKind::Store, c(t1, 31, 3)));
        // The second launch reads temperature 1 and writes temperature 0.
        let ops = mem_ops(&mut warps(&p, 1)[0]);
        assert_eq!((ops[0].1[0], ops[6].1[0]), (t1, t0));
        assert_eq!(first_touch(&p).iter().map(|&(b, _)| b).collect::<Vec<_>>(), [0, 2, 1]);
    }
}
