//! `stencil2d` and `stencil3d`: a 5-point (2D) or 7-point (3D) Jacobi stencil
//! over a row-major grid (x fastest), as a grid-stride loop: each element
//! loads itself and its neighbours from the input grid (clamped at the
//! borders), waits, computes and stores itself into the output grid. Each
//! iteration is one kernel launch; the two grids swap roles between launches
//! (ping-pong), so launch 2 reads what launch 1 wrote.
//!
//! Loads per element in order: centre, -x, +x, -y, +y (then -z, +z in 3D).
//! First touch (lockstep): the input grid row-major (the centre loads), then
//! the output grid row-major. A warp alone runs one row (2D) or plane (3D)
//! ahead of its own elements through the +y / +z neighbour.

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of the 2D / 3D Jacobi stencil (`stencil2d` ignores `nz`).
    pub struct StencilParams {
        /// Grid width (elements along x, contiguous in memory).
        pub nx: u64 = 512,
        /// Grid height (elements along y).
        pub ny: u64 = 512,
        /// Grid depth (elements along z; `stencil3d` only).
        pub nz: u64 = 1,
        /// Bytes per element (4 = float, 8 = double).
        pub element_bytes: u32 = 4,
        /// Sweeps; each is one kernel launch, the grids swapping roles in between.
        pub iterations: u32 = 2,
        /// Threads of the grid-stride loop; thread t takes elements t, t + threads, ... (nx x ny: each thread
        /// walks its (x, y) column through z, the order of Parboil's 3D stencil).
        pub threads: u64 = 65_536,
        /// CTA barriers (`__syncthreads`) a thread meets after each element's store; 0 = none, a
        /// plain Jacobi sweep. Parboil's 3D stencil (`block2D_hybrid_coarsen_x`) meets twice per
        /// z-plane, after the plane's stores and after rotating its planes in shared memory: 2
        /// (the zheng suite's stencil until session 44; `parboil-stencil` models that kernel since).
        pub barriers: u32 = 0,
    }
}

/// `workload.stencil3d` defaults: a 64^3 grid.
pub fn default_3d() -> StencilParams {
    StencilParams { nx: 64, ny: 64, nz: 64, ..StencilParams::default() }
}

impl StencilParams {
    pub fn validate(&self, p: &str, three_d: bool) -> Result<(), (String, String)> {
        check(p, "nx", self.nx, 1, 1 << 24)?;
        check(p, "ny", self.ny, 1, 1 << 24)?;
        check(p, "nz", self.nz, 1, if three_d { 1 << 24 } else { 1 })?;
        if !matches!(self.element_bytes, 4 | 8) {
            return Err((format!("{p}.element_bytes"), format!("must be 4 or 8, got {}", self.element_bytes)));
        }
        check(p, "iterations", self.iterations as u64, 1, 10_000)?;
        check(p, "threads", self.threads, 1, 1 << 30)?;
        check(p, "barriers", self.barriers as u64, 0, 16)
    }

    /// Two grids.
    pub fn footprint(&self) -> u128 {
        2 * self.nx as u128 * self.ny as u128 * self.nz as u128 * self.element_bytes as u128
    }
}

pub(super) fn build(p: &StencilParams, three_d: bool, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let bytes = p.nx * p.ny * p.nz * p.element_bytes as u64;
    let grids = [va.alloc(bytes, page), va.alloc(bytes, page)];
    let mut offsets = vec![(0, 0, 0), (-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0)];
    if three_d {
        offsets.extend([(0, 0, -1), (0, 0, 1)]);
    }
    let mut body: Vec<Step> = offsets.iter().map(|&(dx, dy, dz)| Step::load(0, Index::at(dx, dy, dz))).collect();
    body.extend([Step::Wait, Step::Compute(w.compute_cycles), Step::store(1, Index::HERE)]);
    body.extend((0..p.barriers).map(|_| Step::Barrier));
    let name = if three_d { "stencil3d" } else { "stencil2d" };
    let kernels = (0..p.iterations as usize)
        .map(|i| {
            let (src, dst) = (grids[i % 2], grids[1 - i % 2]);
            let arrays = vec![Array { base: src.base, elem_bytes: p.element_bytes }, Array { base: dst.base, elem_bytes: p.element_bytes }];
            let k = GridKernel::new([p.nx, p.ny, p.nz], p.threads, 1, arrays, body.clone());
            KernelSpec { name, threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }
        })
        .collect();
    (kernels, bytes)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn five_point_neighbours_of_one_thread() {
        // 64 x 8 grid: warp 2 covers row 1 (threads 64..96: x 0..32, y 1).
        let p = program(&["workload.kind=stencil2d", "workload.stencil2d.nx=64", "workload.stencil2d.ny=8"]);
        let (a, b) = (p.buffers[0].base, p.buffers[1].base);
        let ops = mem_ops(&mut warps(&p, 0)[2]);
        let lane0: Vec<(MemKind, u64)> = ops.iter().map(|(k, v)| (*k, v[0])).collect();
        let e = |x: u64, y: u64| 4 * (y * 64 + x);
        // Thread (0, 1): centre, -x (clamped to x = 0), +x, -y, +y; then its store to the other grid.
        assert_eq!(
            lane0,
            [
                (MemKind::Load, a + e(0, 1)),
                (MemKind::Load, a + e(0, 1)),
                (MemKind::Load, a + e(1, 1)),
                (MemKind::Load, a + e(0, 0)),
                (MemKind::Load, a + e(0, 2)),
                (MemKind::Store, b + e(0, 1)),
            ]
        );
        // Lane 5 = (5, 1): an interior point.
        assert_eq!(ops[1].1[5], a + e(4, 1));
        assert_eq!(ops[4].1[5], a + e(5, 2));
    }

    #[test]
    fn iterations_ping_pong_between_the_grids() {
        let p =
            program(&["workload.kind=stencil2d", "workload.stencil2d.nx=32", "workload.stencil2d.ny=4", "workload.stencil2d.iterations=3"]);
        let (a, b) = (p.buffers[0].base, p.buffers[1].base);
        for (k, (src, dst)) in [(a, b), (b, a), (a, b)].into_iter().enumerate() {
            let ops = mem_ops(&mut warps(&p, k)[0]);
            assert_eq!(ops[0].1[0], src);
            assert_eq!(ops.last().unwrap().1[0], dst);
        }
    }

    #[test]
    fn seven_point_reads_the_planes_above_and_below() {
        let p = program(&["workload.kind=stencil3d", "workload.stencil3d.nx=32", "workload.stencil3d.ny=4", "workload.stencil3d.nz=4"]);
        let a = p.buffers[0].base;
        // Warp 5 = row y 1 of plane z 1.
        let ops = mem_ops(&mut warps(&p, 0)[5]);
        assert_eq!(ops.len(), 8);
        let e = |x: u64, y: u64, z: u64| a + 4 * ((z * 4 + y) * 32 + x);
        assert_eq!(ops[5].1, (0..32).map(|x| e(x, 1, 0)).collect::<Vec<_>>());
        assert_eq!(ops[6].1, (0..32).map(|x| e(x, 1, 2)).collect::<Vec<_>>());
    }

    #[test]
    fn one_thread_per_column_walks_it_through_z() {
        // threads = nx x ny (Parboil's decomposition, the Zheng suite's setting): thread (x, y)
        // takes the element of every plane in turn. 32 x 4 x 3: warp 1 is row y 1, all planes.
        let p = program(&[
            "workload.kind=stencil3d",
            "workload.stencil3d.nx=32",
            "workload.stencil3d.ny=4",
            "workload.stencil3d.nz=3",
            "workload.stencil3d.threads=128",
        ]);
        let a = p.buffers[0].base;
        let e = |x: u64, y: u64, z: u64| a + 4 * ((z * 4 + y) * 32 + x);
        let centres: Vec<u64> = mem_ops(&mut warps(&p, 0)[1]).iter().step_by(8).map(|(_, v)| v[3]).collect();
        assert_eq!(centres, [e(3, 1, 0), e(3, 1, 1), e(3, 1, 2)]);
    }

    #[test]
    fn parboil_barriers_follow_each_planes_store() {
        let base = ["workload.kind=stencil3d", "workload.stencil3d.nx=32", "workload.stencil3d.ny=4", "workload.stencil3d.nz=3"];
        let with = [&base[..], &["workload.stencil3d.threads=128", "workload.stencil3d.barriers=2"]].concat();
        // Per plane: 7 loads, wait, compute, the store, then the two barriers.
        let plane = "mmmmmmmwcm";
        assert_eq!(op_shape(&all_ops(&mut warps(&program(&with), 0)[1])), (plane.to_owned() + "bb").repeat(3));
        // None by default: a plain Jacobi sweep.
        let plain = [&base[..], &["workload.stencil3d.threads=128"]].concat();
        assert_eq!(op_shape(&all_ops(&mut warps(&program(&plain), 0)[1])), plane.repeat(3));
        assert!(crate::workload::stencil::StencilParams { barriers: 17, ..Default::default() }.validate("w", true).is_err());
    }

    #[test]
    fn first_touch_is_input_row_major_then_output() {
        // 1024 x 8 floats: one 4 KiB page per row.
        let p = program(&["workload.kind=stencil2d", "workload.stencil2d.nx=1024", "workload.stencil2d.ny=8"]);
        let mut want: Vec<(usize, u64)> = (0..8).map(|y| (0, y)).collect();
        want.extend((0..8).map(|y| (1, y)));
        assert_eq!(first_touch(&p), want);
    }

    #[test]
    fn the_host_copies_only_the_input_grid() {
        // 32 x 4 floats = 512 bytes; the output grid is not an input.
        let p = program(&["workload.kind=stencil2d", "workload.stencil2d.nx=32", "workload.stencil2d.ny=4"]);
        assert_eq!(p.host.input_bytes, Some(512));
    }

    #[test]
    fn doubles_are_read_and_written_8_bytes_apart() {
        // element_bytes 8, 32 x 4 grid: warp 1 = row 1; lane 5 = (5, 1), element 37 of both grids.
        let p = program(&[
            "workload.kind=stencil2d",
            "workload.stencil2d.nx=32",
            "workload.stencil2d.ny=4",
            "workload.stencil2d.element_bytes=8",
        ]);
        let (a, b) = (p.buffers[0].base, p.buffers[1].base);
        let ops = mem_ops(&mut warps(&p, 0)[1]);
        assert_eq!((ops[0].1[5], ops[5].1[5]), (a + 8 * 37, b + 8 * 37));
    }
}

#[cfg(test)]
mod mgpusim_tests {
    use crate::workload::testutil::*;

    #[test]
    fn st_geometry_matches_the_mgpusim_trace_footprint() {
        // ST of seed multi-gpu = SHOC stencil2d; MGPUSim's trace (stencil2d.csv.gz, -row 512 -col 512
        // -iter 2) touches 534 pages: two 514-row grids with 528-float padded rows. stencil2d at
        // 512 x 512 has the same grids without halo and padding: 512 pages (within 5%). Its
        // accesses are not comparable: SHOC stages a tile in local memory (207 accesses per
        // wavefront of 1,024 points), stencil2d reads every neighbour from global memory.
        let p = program(&["gpu.warp_size=64", "workload.kind=stencil2d", "workload.stencil2d.nx=512", "workload.stencil2d.ny=512"]);
        let (_, _, pages) = trace_stats(&p, 64);
        near("pages", pages as f64, 534.0, 0.05);
    }
}
