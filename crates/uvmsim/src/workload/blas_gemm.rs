//! `blas-gemm`: C = A * B for n x n column-major matrices, tiled the way a
//! library SGEMM is (seed uvm-driver's sgemm is cuBLAS's, §3.3 "cuBLAS SGEMM
//! [31]"; cuBLAS is closed, so the tiling is CUTLASS's default SIMT
//! configuration, `cutlass/gemm/device/default_gemm_configuration.h`:
//! threadblock 128 x 128 x 8, warp tile 32 x 64, 2 stages, scalar loads).
//!
//! A CTA of 256 threads (8 warps of 32) computes a 128 x 128 tile of C; CTAs
//! are numbered with the M tile fastest (CUTLASS's identity swizzle). Per
//! k-step of 8, each thread loads 4 elements of A and 4 of B through
//! CUTLASS's strip-mined thread maps, over each operand's contiguous
//! dimension (i = 0..4):
//! - A (m x k, column-major): thread t takes row `t % 128` of column
//!   `t / 128 + 2i`, so warp w reads 32 consecutive floats of columns
//!   `w / 4 + {0, 2, 4, 6}` (one page each);
//! - B (k x n, column-major): thread t takes k `t % 8` of column
//!   `t / 8 + 32i`, so warp w reads 8 consecutive floats of 4 columns per
//!   instruction, 16 columns per k-step (16 pages when a column spans one).
//!
//! The loads of k-step s + 1 are issued before the compute of k-step s and
//! waited for after it (the double buffer); the warp then stores them to
//! shared memory and the CTA meets at a barrier (`__syncthreads`, one per
//! k-step in CUTLASS's two-stage mainloop), as it does after the prologue's
//! loads of k-step 0. After the last k-step each
//! thread stores 64 elements of C the same way as A's loads (row `t % 128`
//! of column `t / 128 + 2j`, j = 0..64): the epilogue's column segments.
//! The maps are per thread, so wavefronts of 64 lanes take two warps' share.
//!
//! What this changes against `tiled-gemm`: a CTA touches 128 columns of B,
//! so the GPU's concurrent CTAs fault on thousands of distinct pages at once
//! instead of the few dozen that all of `tiled-gemm`'s CTAs share.
//!
//! Compute: each thread does 8 x (32 x 64) / 32 = 512 FMAs per k-step; the
//! SM's `fp32_lanes` are shared by `ctas_per_sm` CTAs of 256 threads, so a
//! warp's k-step takes 512 x 256 x ctas_per_sm / fp32_lanes cycles (4,096
//! with the defaults: the SM at its FP32 peak).
//!
//! `n` need not be a multiple of 128: edge CTAs skip the elements outside
//! the matrices (the predicated loads and stores of CUTLASS's iterators).

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};

const TILE: u64 = 128;
const KTILE: u64 = 8;
const THREADS: u64 = 256;
/// FMAs per thread per k-step: 8 x (32 x 64 warp tile) / 32 lanes.
const FMAS: u64 = KTILE * 32 * 64 / 32;

section! {
    /// Parameters of the library-style (CUTLASS default SIMT) sgemm.
    pub struct BlasGemmParams {
        /// Matrix order (rows = columns of A, B and C); edge tiles are partial when 128 does not divide it.
        pub n: u64 = 1024,
        /// Bytes per element (4 = sgemm, 8 = dgemm).
        pub element_bytes: u32 = 4,
        /// CTAs resident per SM. ASSUMPTION: 2, register-bound (a 32 x 64 warp tile keeps 64 accumulators and two
        /// stages of fragments per thread, over 100 registers: 256 threads x 128 registers fill half of Volta's
        /// 64 K). Also bounded by gpu.max_ctas_per_sm and the SM's warp slots.
        pub ctas_per_sm: u32 = 2,
        /// FP32 lanes per SM, which set the compute time of a k-step (Volta: 64).
        pub fp32_lanes: u32 = 64,
    }
}

impl BlasGemmParams {
    pub fn validate(&self, p: &str, cfg: &crate::config::Config) -> Result<(), (String, String)> {
        check(p, "n", self.n, 1, 1 << 22)?;
        if !matches!(self.element_bytes, 4 | 8) {
            return Err((format!("{p}.element_bytes"), format!("must be 4 or 8, got {}", self.element_bytes)));
        }
        check(p, "ctas_per_sm", self.ctas_per_sm as u64, 1, 64)?;
        check(p, "fp32_lanes", self.fp32_lanes as u64, 1, 1024)?;
        let (ws, max) = (cfg.gpu.warp_size, cfg.gpu.max_warps_per_sm);
        if THREADS % ws as u64 != 0 || THREADS > (ws * max) as u64 {
            return Err((
                "gpu.warp_size".into(),
                format!("a blas-gemm CTA has 256 threads: needs a warp size dividing 256 and at most gpu.max_warps_per_sm ({max}) warps, got {ws}"),
            ));
        }
        Ok(())
    }

    /// A, B and C.
    pub fn footprint(&self) -> u128 {
        3 * self.n as u128 * self.n as u128 * self.element_bytes as u128
    }
}

#[derive(Debug, Clone)]
pub struct BlasGemmKernel {
    a: Buffer,
    b: Buffer,
    c: Buffer,
    p: BlasGemmParams,
    kstep_cycles: u32,
}

pub(super) fn build(p: &BlasGemmParams, _w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let bytes = p.n * p.n * p.element_bytes as u64;
    let (a, b, c) = (va.alloc(bytes, page), va.alloc(bytes, page), va.alloc(bytes, page));
    let kstep_cycles = (FMAS * THREADS * p.ctas_per_sm as u64 / p.fp32_lanes as u64).clamp(1, u32::MAX as u64) as u32;
    let gen = KernelGen::BlasGemm(BlasGemmKernel { a, b, c, p: p.clone(), kstep_cycles });
    let tiles = p.n.div_ceil(TILE);
    let threads_per_cta = THREADS as u32;
    (vec![KernelSpec { name: "blas-gemm", threads: tiles * tiles * threads_per_cta as u64, threads_per_cta, gen }], 2 * bytes)
}

impl BlasGemmKernel {
    /// CTAs resident per SM (the kernel's register-bound occupancy).
    pub fn cta_limit(&self) -> u32 {
        self.p.ctas_per_sm
    }

    pub fn warp(&self, id: WarpId) -> BlasGemmWarp {
        let cta = id.first_thread / THREADS;
        let tiles = self.p.n.div_ceil(TILE);
        let t0 = id.first_thread % THREADS;
        BlasGemmWarp { k: self.clone(), mt: cta % tiles, nt: cta / tiles, t0, lanes: id.lanes as u64, step: 0, phase: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct BlasGemmWarp {
    k: BlasGemmKernel,
    /// The CTA's tile of C: rows mt*128.., columns nt*128...
    mt: u64,
    nt: u64,
    /// First thread of the warp within its CTA, and its lanes.
    t0: u64,
    lanes: u64,
    /// Position in the program: 0 = prologue loads, wait, barrier; then per k-step
    /// s (1-based here) the loads of s, compute, wait, barrier; then the stores.
    step: u64,
    phase: u32,
}

impl BlasGemmWarp {
    fn el(&self, m: Buffer, row: u64, col: u64) -> u64 {
        m.base + (col * self.k.p.n + row) * self.k.p.element_bytes as u64
    }

    /// The lanes of one access, skipping elements outside the matrix; `None` if none is inside.
    fn op(&self, kind: MemKind, m: Buffer, cell: impl Fn(u64) -> (u64, u64), scratch: &mut [u64; MAX_LANES]) -> Option<Op> {
        let n = self.k.p.n;
        let mut active = 0;
        for l in 0..self.lanes {
            let (row, col) = cell(self.t0 + l);
            if row < n && col < n {
                scratch[active] = self.el(m, row, col);
                active += 1;
            }
        }
        let bytes = self.k.p.element_bytes;
        (active > 0).then(|| Op::Mem { kind, lanes: super::grid::compact(scratch, active), bytes })
    }

    /// A's loads and C's stores: thread t takes row `r0 + t % 128` of column `col0 + t / 128`. When
    /// the warp's lanes sit in one column and inside the matrix (every tile but the edge ones), they
    /// are consecutive elements, the `Strided` run `op` would find, built without visiting each lane.
    fn column_segment(&self, kind: MemKind, m: Buffer, r0: u64, col0: u64, scratch: &mut [u64; MAX_LANES]) -> Option<Op> {
        let (first, last) = (self.t0, self.t0 + self.lanes - 1);
        // A warp's lanes never straddle two columns: its size divides the CTA's 256 threads (validate)
        // and is at most 64.
        debug_assert_eq!(first / TILE, last / TILE);
        let (col, row_last) = (col0 + first / TILE, r0 + last % TILE);
        if self.lanes >= 2 && row_last < self.k.p.n && col < self.k.p.n {
            let bytes = self.k.p.element_bytes;
            let lanes = Lanes::Strided { base: self.el(m, r0 + first % TILE, col), stride: bytes as u64, n: self.lanes as u32 };
            return Some(Op::Mem { kind, lanes, bytes });
        }
        self.op(kind, m, |t| (r0 + t % TILE, col0 + t / TILE), scratch)
    }

    /// Load `i` (0..8) of k-step `s`: A's four, then B's four (`cell` gets the thread within the CTA).
    fn load(&self, s: u64, i: u32, scratch: &mut [u64; MAX_LANES]) -> Option<Op> {
        let (k0, i, r0, c0) = (s * KTILE, i as u64, self.mt * TILE, self.nt * TILE);
        if i < 4 {
            self.column_segment(MemKind::Load, self.k.a, r0, k0 + 2 * i, scratch)
        } else {
            self.b_segment(k0, c0 + 32 * (i - 4), scratch)
        }
    }

    /// B's loads: thread t takes row `k0 + t % 8` of column `col0 + t / 8`. When every lane is inside
    /// the matrix (every k-step but a partial last one, every tile but the edge ones), the lanes are
    /// written without `op`'s bounds check per lane.
    fn b_segment(&self, k0: u64, col0: u64, scratch: &mut [u64; MAX_LANES]) -> Option<Op> {
        let (n, eb) = (self.k.p.n, self.k.p.element_bytes as u64);
        let (first, lanes) = (self.t0, self.lanes as usize);
        if k0 + KTILE <= n && col0 + (first + self.lanes - 1) / KTILE < n {
            for (t, s) in (first..).zip(&mut scratch[..lanes]) {
                *s = self.el(self.k.b, k0 + t % KTILE, col0 + t / KTILE);
            }
            return Some(Op::Mem { kind: MemKind::Load, lanes: super::grid::compact(scratch, lanes), bytes: eb as u32 });
        }
        self.op(MemKind::Load, self.k.b, |t| (k0 + t % KTILE, col0 + t / KTILE), scratch)
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let ksteps = self.k.p.n.div_ceil(KTILE);
        loop {
            let (step, phase) = (self.step, self.phase);
            self.phase += 1;
            if step == 0 {
                // Prologue: k-step 0's loads, stored to shared memory, then the barrier.
                if phase < 8 {
                    if let Some(op) = self.load(0, phase, scratch) {
                        return op;
                    }
                    continue;
                }
                if phase == 8 {
                    return Op::Wait;
                }
                (self.step, self.phase) = (1, 0);
                return Op::Barrier;
            }
            if step <= ksteps {
                // k-step s = step - 1: load s + 1 (if any), compute s, wait for s + 1.
                let s = step - 1;
                if phase < 8 {
                    if s + 1 < ksteps {
                        if let Some(op) = self.load(s + 1, phase, scratch) {
                            return op;
                        }
                    }
                    continue;
                }
                if phase == 8 {
                    return Op::Compute(self.k.kstep_cycles);
                }
                if phase == 9 {
                    return Op::Wait;
                }
                (self.step, self.phase) = (step + 1, 0);
                return Op::Barrier;
            }
            // Stores: thread t writes row t % 128 of column t / 128 + 2j.
            if phase < 64 {
                let (r0, c0, j) = (self.mt * TILE, self.nt * TILE, phase as u64);
                if let Some(op) = self.column_segment(MemKind::Store, self.k.c, r0, c0 + 2 * j, scratch) {
                    return op;
                }
                continue;
            }
            return Op::Exit;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{MemKind, Op, WarpId};

    #[test]
    fn one_warps_loads_follow_cutlass_thread_maps() {
        // n = 256: 2 x 2 CTAs; CTA 1 = (mt 1, nt 0); its warp 5: A rows 128 + 32..64, columns 1, 3, 5, 7 of the
        // k-step; B columns 20..24 (+32 per instruction), k 0..8 of the k-step.
        let p = program(&["workload.kind=blas-gemm", "workload.blas_gemm.n=256"]);
        let (a, b, c) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let ops = mem_ops(&mut warps(&p, 0)[8 + 5]);
        // 32 k-steps of 8 loads, then 64 stores.
        assert_eq!(ops.len(), 32 * 8 + 64);
        let el = |m: u64, row: u64, col: u64| m + (col * 256 + row) * 4;
        let a_col = |k0: u64, i: u64| -> Vec<u64> { (0..32).map(|l| el(a, 160 + l, k0 + 1 + 2 * i)).collect() };
        let b_cols = |k0: u64, i: u64| -> Vec<u64> { (0..32).map(|l| el(b, k0 + l % 8, 20 + 32 * i + l / 8)).collect() };
        for i in 0..4 {
            assert_eq!(ops[i as usize], (MemKind::Load, a_col(0, i)));
            assert_eq!(ops[4 + i as usize], (MemKind::Load, b_cols(0, i)));
            // k-step 3 (k = 24..32).
            assert_eq!(ops[3 * 8 + i as usize], (MemKind::Load, a_col(24, i)));
            assert_eq!(ops[3 * 8 + 4 + i as usize], (MemKind::Load, b_cols(24, i)));
        }
        // Stores: rows 160..192 of columns 1, 3, .. 127 (like A's loads).
        assert_eq!(ops[32 * 8], (MemKind::Store, (0..32).map(|l| el(c, 160 + l, 1)).collect()));
        assert_eq!(ops[32 * 8 + 63], (MemKind::Store, (0..32).map(|l| el(c, 160 + l, 127)).collect()));
    }

    #[test]
    fn every_warp_meets_its_cta_after_the_prologue_and_each_k_step_once_its_loads_are_in() {
        // n = 200 (an edge tile: some warps load nothing of some k-steps): 25 k-steps, so 26 barriers per
        // warp, each right after a wait (the loads stored to shared memory), whatever the warp loaded.
        let p = program(&["workload.kind=blas-gemm", "workload.blas_gemm.n=200"]);
        for mut w in warps(&p, 0) {
            let ops = all_ops(&mut w);
            let bars: Vec<usize> = ops.iter().enumerate().filter(|(_, o)| **o == Op::Barrier).map(|(i, _)| i).collect();
            assert_eq!(bars.len(), 26);
            assert!(bars.iter().all(|&i| ops[i - 1] == Op::Wait), "{ops:?}");
            // The prologue's: after k-step 0's loads, before any compute.
            assert!(ops[..bars[0]].iter().all(|o| matches!(o, Op::Mem { .. } | Op::Wait)));
            assert!(ops[bars[25]..].iter().all(|o| matches!(o, Op::Mem { .. } | Op::Barrier)));
        }
    }

    #[test]
    fn a_cta_reads_every_element_of_its_a_rows_and_b_columns_once() {
        // n = 128: one CTA. Over all its warps, A and B are each read exactly once, C written once.
        let p = program(&["workload.kind=blas-gemm", "workload.blas_gemm.n=128"]);
        let mut seen = std::collections::HashMap::<u64, u32>::new();
        for mut w in warps(&p, 0) {
            for (_, lanes) in mem_ops(&mut w) {
                for a in lanes {
                    *seen.entry(a).or_default() += 1;
                }
            }
        }
        assert_eq!(seen.len(), 3 * 128 * 128);
        assert!(seen.values().all(|&c| c == 1));
    }

    /// Every lane of every warp against CUTLASS's thread maps and their bounds, lane by lane, at sizes
    /// whose edge tiles end inside a warp's column segment (n = 159: the segment of rows 128..160 ends
    /// one row outside) and at warp sizes 16, 32 and 64: the column-segment shortcut gives what the
    /// lane-by-lane path gives.
    #[test]
    fn every_lane_follows_the_thread_maps_and_bounds() {
        for (n, ws) in [(159u64, 32u64), (159, 64), (160, 16), (130, 32), (256, 64)] {
            let p = program(&["workload.kind=blas-gemm", &format!("workload.blas_gemm.n={n}"), &format!("gpu.warp_size={ws}")]);
            let (a, b, c) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
            let (tiles, k) = (n.div_ceil(128), kernels(&p)[0]);
            for wi in 0..k.threads / ws {
                let first = wi * ws;
                let mut w = k.gen.warp(WarpId { global: wi, first_thread: first, lanes: ws as u32 });
                let (t0, cta) = (first % 256, first / 256);
                let (r0, c0) = (cta % tiles * 128, cta / tiles * 128);
                // The lanes whose (row, column) lies inside the matrix, in lane order.
                let pick = |m: u64, cell: &dyn Fn(u64) -> (u64, u64)| -> Vec<u64> {
                    (t0..t0 + ws).map(cell).filter(|&(r, col)| r < n && col < n).map(|(r, col)| m + (col * n + r) * 4).collect()
                };
                let mut want = vec![];
                for k0 in (0..n).step_by(8) {
                    for i in 0..4 {
                        want.push((MemKind::Load, pick(a, &|t| (r0 + t % 128, k0 + t / 128 + 2 * i))));
                    }
                    for i in 0..4 {
                        want.push((MemKind::Load, pick(b, &|t| (k0 + t % 8, c0 + t / 8 + 32 * i))));
                    }
                }
                for j in 0..64 {
                    want.push((MemKind::Store, pick(c, &|t| (r0 + t % 128, c0 + t / 128 + 2 * j))));
                }
                want.retain(|(_, v)| !v.is_empty());
                assert_eq!(mem_ops(&mut w), want, "n = {n}, warp size {ws}, warp {wi}");
            }
        }
    }

    #[test]
    fn edge_tiles_touch_nothing_outside_the_matrices() {
        let p = program(&["workload.kind=blas-gemm", "workload.blas_gemm.n=130"]);
        let (lo, hi) = (p.buffers[0].base, p.buffers[2].base + 130 * 130 * 4);
        let mut n = 0;
        for mut w in warps(&p, 0) {
            for (_, lanes) in mem_ops(&mut w) {
                n += lanes.len();
                assert!(lanes.iter().all(|&a| a >= lo && a < hi));
            }
        }
        // A and B read once per CTA row or column of tiles that uses them (2 each), C written once.
        assert_eq!(n as u64, 2 * 130 * 130 * 2 + 130 * 130);
    }

    #[test]
    fn a_k_step_takes_the_sms_fp32_time_and_dgemm_reads_8_byte_elements() {
        use crate::workload::KernelGen;
        let p = program(&[
            "workload.kind=blas-gemm",
            "workload.blas_gemm.n=128",
            "workload.blas_gemm.element_bytes=8",
            "workload.blas_gemm.ctas_per_sm=3",
            "workload.blas_gemm.fp32_lanes=128",
        ]);
        // Prologue: 8 loads, wait, barrier; k-step 0: 8 loads, then 512 FMAs x 256 threads x 3 CTAs / 128 lanes = 3072 cycles.
        assert_eq!(all_ops(&mut warps(&p, 0)[0])[18], Op::Compute(3072));
        let ks = kernels(&p);
        let KernelGen::BlasGemm(k) = &ks[0].gen else { unreachable!() };
        assert_eq!(k.cta_limit(), 3);
        // Warp 0's first load, lane 1: A row 1 of column 0, 8 bytes in.
        let a = p.buffers[0].base;
        assert_eq!(mem_ops(&mut warps(&p, 0)[0])[0].1[1], a + 8);
        // Inputs: A and B, 128 x 128 doubles = 131,072 bytes each; C is an output.
        assert_eq!(p.host.input_bytes, Some(2 * 131_072));
    }
}
