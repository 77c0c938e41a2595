//! `parboil-sgemm`: Parboil's sgemm (`benchmarks/sgemm/src/cuda/sgemm_kernel.cu`, `mysgemmNT`), the
//! register-tiled kernel after Vasily Volkov that seed paged-memory names among its workloads ("Parboil
//! sgemm", §3.2). C = A * B with A (m x k) and C (m x n) column-major and B given transposed
//! (`B^T`, n x k column-major, i.e. B row by row: element (r, c) of B at `c + r * n`), as Parboil's
//! main calls `regtileSgemm('N', 'T', m, n, k, 1, A, m, B^T, n, 0, C, m)`.
//!
//! The kernel, as its source has it (`TILE_N` 16, `TILE_TB_HEIGHT` 8, `TILE_M` 128): a grid of
//! (m / 128, n / 16) CTAs of 16 x 8 = 128 threads, block x fastest. Thread `mid` (its flattened id,
//! `tx = mid % 16`, `ty = mid / 16`) of CTA (bx, by) owns row `bx * 128 + mid` of C and its 16 columns
//! `by * 16 ..`. Per step `i` of 8 along k:
//! - `b_s[ty][tx] = B[n + (i + ty) * ldb]`: row `i + ty` of B, 16 consecutive elements per half-warp,
//!   stored to shared memory (the load is waited for), then `__syncthreads`;
//! - for `j` in 0..8: `a = A[m + (i + j) * lda]` (32 consecutive elements of column `i + j` per warp)
//!   and 16 multiply-adds with it (`c[kk] += a * b_s[j][kk]`); each load is used at once, so a warp
//!   has one load of A outstanding at a time (ASSUMPTION: the source's order; the PTX nvcc emits,
//!   which GPGPU-Sim runs in order, was not read, and could issue a step's 8 loads together);
//! - `__syncthreads`.
//!
//! Then `C[t + i * ldc] = C[t + i * ldc] * beta + alpha * c[i]` for its 16 columns: each a load of C,
//! waited for, and a store (the loads cannot move above the earlier stores: `ldc` is not known).
//!
//! Sizes: the source assumes m a multiple of 128 and n of 16, and reads k in steps of 8; other sizes
//! are refused here. Parboil's datasets: small 128 x 96 x 160, medium 1024 x 992 x 1056 (m x k x n).
//!
//! First touch (lockstep): per step, B's rows `i .. i + 8` and A's columns `i .. i + 8` (all CTAs
//! share them: one column of A is one 4 KiB page at m = 1024); at the end C, the first of each CTA's
//! 16 columns for every CTA, then the second, and so on.

use super::{check, Buffer, KernelGen, KernelSpec, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;

/// `TILE_N`: columns of C per CTA, and multiply-adds per element of A.
const TILE_N: u64 = 16;
/// `TILE_TB_HEIGHT`: k per step (rows of B loaded, columns of A read).
const TILE_TB_HEIGHT: u64 = 8;
/// `TILE_M`: rows of C per CTA, one per thread.
const TILE_M: u64 = TILE_N * TILE_TB_HEIGHT;
const ELEMENT_BYTES: u64 = 4;

section! {
    /// Parameters of Parboil's sgemm (`mysgemmNT`): C (m x n) = A (m x k) * B (k x n). Defaults: Parboil's medium dataset.
    pub struct ParboilSgemmParams {
        /// Rows of A and C (`matArow`); a multiple of 128 (TILE_M).
        pub m: u64 = 1024,
        /// Columns of B and C (`matBcol`); a multiple of 16 (TILE_N).
        pub n: u64 = 1056,
        /// Columns of A, rows of B (`matAcol`); a multiple of 8 (TILE_TB_HEIGHT).
        pub k: u64 = 992,
    }
}

impl ParboilSgemmParams {
    pub fn validate(&self, p: &str, cfg: &Config) -> Result<(), (String, String)> {
        for (name, v, unit) in [("m", self.m, TILE_M), ("n", self.n, TILE_N), ("k", self.k, TILE_TB_HEIGHT)] {
            check(p, name, v, unit, 1 << 20)?;
            if v % unit != 0 {
                return Err((format!("{p}.{name}"), format!("must be a multiple of {unit} (the kernel's tile), got {v}")));
            }
        }
        let (ws, max) = (cfg.gpu.warp_size as u64, cfg.gpu.max_warps_per_sm as u64);
        if TILE_M % ws != 0 || TILE_M / ws > max {
            return Err((
                "gpu.warp_size".into(),
                format!(
                    "parboil-sgemm's CTAs of 128 threads need a warp size dividing 128 and at most gpu.max_warps_per_sm ({max}) warps, got {ws}"
                ),
            ));
        }
        Ok(())
    }

    /// A, B and C.
    pub fn footprint(&self) -> u128 {
        (self.m as u128 * self.k as u128 + self.k as u128 * self.n as u128 + self.m as u128 * self.n as u128) * ELEMENT_BYTES as u128
    }
}

#[derive(Debug, Clone)]
pub struct ParboilSgemmKernel {
    a: Buffer,
    b: Buffer,
    c: Buffer,
    p: ParboilSgemmParams,
    compute: u32,
}

/// A and B^T are the inputs (copied in by the explicit-copy program); C is allocated only.
pub(super) fn build(p: &ParboilSgemmParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let (a_bytes, b_bytes) = (p.m * p.k * ELEMENT_BYTES, p.k * p.n * ELEMENT_BYTES);
    let (a, b, c) = (va.alloc(a_bytes, page), va.alloc(b_bytes, page), va.alloc(p.m * p.n * ELEMENT_BYTES, page));
    let gen = KernelGen::ParboilSgemm(ParboilSgemmKernel { a, b, c, p: p.clone(), compute: w.compute_cycles });
    let ctas = (p.m / TILE_M) * (p.n / TILE_N);
    (vec![KernelSpec { name: "mysgemmNT", threads: ctas * TILE_M, threads_per_cta: TILE_M as u32, gen }], a_bytes + b_bytes)
}

impl ParboilSgemmKernel {
    pub fn warp(&self, id: WarpId) -> ParboilSgemmWarp {
        let cta = id.first_thread / TILE_M;
        let grid_x = self.p.m / TILE_M;
        ParboilSgemmWarp {
            k: self.clone(),
            bx: cta % grid_x,
            by: cta / grid_x,
            mid0: id.first_thread % TILE_M,
            lanes: id.lanes,
            step: 0,
            phase: 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ParboilSgemmWarp {
    k: ParboilSgemmKernel,
    bx: u64,
    by: u64,
    /// Flattened id (`mid`) of the warp's first thread in its CTA.
    mid0: u64,
    lanes: u32,
    /// Step along k (i / 8); k / 8 is the epilogue.
    step: u64,
    phase: u64,
}

/// Ops per step: load B, wait, barrier, 8 x (load A, wait, compute), barrier.
const STEP_OPS: u64 = 3 + 3 * TILE_TB_HEIGHT + 1;

impl ParboilSgemmWarp {
    /// Rows of C (= rows of A) of the warp's lanes start here: `bx * 128 + mid`.
    fn row0(&self) -> u64 {
        self.bx * TILE_M + self.mid0
    }

    /// `buf[row0 + lane + col * ld]` for every lane: 32 consecutive elements of one column.
    fn column(&self, kind: MemKind, buf: Buffer, col: u64, ld: u64) -> Op {
        let base = buf.base + (self.row0() + col * ld) * ELEMENT_BYTES;
        Op::Mem { kind, lanes: super::Lanes::Strided { base, stride: ELEMENT_BYTES, n: self.lanes }, bytes: ELEMENT_BYTES as u32 }
    }

    /// `B[n + (i + ty) * ldb]` for every lane: (ty, tx) = (mid / 16, mid % 16), n = by * 16 + tx.
    fn b_rows(&self, i: u64, scratch: &mut [u64; MAX_LANES]) -> Op {
        let ldb = self.k.p.n;
        for (l, x) in scratch[..self.lanes as usize].iter_mut().enumerate() {
            let mid = self.mid0 + l as u64;
            *x = self.k.b.base + (self.by * TILE_N + mid % TILE_N + (i + mid / TILE_N) * ldb) * ELEMENT_BYTES;
        }
        Op::Mem { kind: MemKind::Load, lanes: super::grid::compact(scratch, self.lanes as usize), bytes: ELEMENT_BYTES as u32 }
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let steps = self.k.p.k / TILE_TB_HEIGHT;
        let ph = self.phase;
        self.phase += 1;
        if self.step < steps {
            let i = self.step * TILE_TB_HEIGHT;
            let op = match ph {
                0 => self.b_rows(i, scratch),
                1 => Op::Wait,
                2 => Op::Barrier,
                p if p < STEP_OPS - 1 => match (p - 3) % 3 {
                    0 => self.column(MemKind::Load, self.k.a, i + (p - 3) / 3, self.k.p.m),
                    1 => Op::Wait,
                    _ => Op::Compute((TILE_N as u32).saturating_mul(self.k.compute)),
                },
                _ => Op::Barrier,
            };
            if self.phase == STEP_OPS {
                (self.step, self.phase) = (self.step + 1, 0);
            }
            return op;
        }
        // Epilogue: C[t + i * ldc], t = ldc * by * 16 + m: column by * 16 + i, rows of the warp.
        if ph >= 3 * TILE_N {
            return Op::Exit;
        }
        let col = self.by * TILE_N + ph / 3;
        match ph % 3 {
            0 => self.column(MemKind::Load, self.k.c, col, self.k.p.m),
            1 => Op::Wait,
            _ => self.column(MemKind::Store, self.k.c, col, self.k.p.m),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{MemKind, WarpId};

    const SMALL: [&str; 4] =
        ["workload.kind=parboil-sgemm", "workload.parboil_sgemm.m=256", "workload.parboil_sgemm.n=32", "workload.parboil_sgemm.k=16"];

    #[test]
    fn the_medium_dataset_is_the_default() {
        // Parboil's medium run: A 1024 x 992, B^T 1056 x 992, C 1024 x 1056; grid (8, 66) of 128 threads.
        let p = program(&["workload.kind=parboil-sgemm"]);
        let bytes: Vec<u64> = p.buffers.iter().map(|b| b.bytes).collect();
        assert_eq!(bytes, [1024 * 992 * 4, 992 * 1056 * 4, 1024 * 1056 * 4]);
        let k = &kernels(&p)[0];
        assert_eq!((k.threads, k.threads_per_cta, k.ctas()), (8 * 66 * 128, 128, 528));
    }

    #[test]
    fn each_step_loads_b_meets_the_cta_and_uses_each_column_of_a_at_once() {
        // k = 16: two steps of (B, wait, barrier, 8 x (A, wait, compute), barrier); then 16 x (C, wait, C).
        let p = program(&SMALL);
        for mut w in warps(&p, 0) {
            let s = op_shape(&all_ops(&mut w));
            let step = format!("mwb{}b", "mwc".repeat(8));
            assert_eq!(s, format!("{}{}", step.repeat(2), "mwm".repeat(16)));
        }
    }

    #[test]
    fn addresses_of_one_warp_by_hand() {
        // m = 256, n = 32, k = 16: grid (2, 2). CTA 3 = (bx 1, by 1); its warp 2 = mids 64..96:
        // rows 128 + 64 .. 128 + 96 of A and C; ty = 4, 5 and tx = 0..16 for B.
        let p = program(&SMALL);
        let (a, b, c) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let ops = mem_ops(&mut warps(&p, 0)[3 * 4 + 2]);
        assert_eq!(ops.len(), 2 * 9 + 32);
        let col = |m: u64, col: u64| -> Vec<u64> { (192..224).map(|r| m + (r + col * 256) * 4).collect() };
        // Step 1 (i = 8): B rows 12 and 13 at columns 16..32 (ldb = n = 32), then A's columns 8..16.
        let b_rows: Vec<u64> = [12u64, 13].iter().flat_map(|&r| (16..32).map(move |cl| b + (cl + r * 32) * 4)).collect();
        assert_eq!(ops[9], (MemKind::Load, b_rows));
        for j in 0..8 {
            assert_eq!(ops[10 + j], (MemKind::Load, col(a, 8 + j as u64)));
        }
        // Epilogue: columns 16..32 of C (by * 16 + i), each loaded then stored.
        for i in 0..16 {
            assert_eq!(ops[18 + 2 * i], (MemKind::Load, col(c, 16 + i as u64)));
            assert_eq!(ops[19 + 2 * i], (MemKind::Store, col(c, 16 + i as u64)));
        }
    }

    /// Every lane's address computed from the kernel's source expressions, for sizes and warp sizes
    /// (16, 32, 64 lanes); every element of C is loaded and stored exactly once, A's and B's each read
    /// by every CTA that needs them.
    #[test]
    fn lanes_match_the_source_expressions() {
        for (m, n, k, ws) in [(128u64, 16u64, 8u64, 32u64), (256, 48, 24, 32), (384, 32, 16, 64), (128, 64, 40, 16)] {
            let p = program(&[
                "workload.kind=parboil-sgemm",
                &format!("workload.parboil_sgemm.m={m}"),
                &format!("workload.parboil_sgemm.n={n}"),
                &format!("workload.parboil_sgemm.k={k}"),
                &format!("gpu.warp_size={ws}"),
            ]);
            let (a, b, c) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
            // The GPU's warps of `ws` lanes (the test helper's are 32 lanes).
            let k0 = kernels(&p)[0];
            let ws_warps = (0..k0.threads / ws).map(|g| k0.gen.warp(WarpId { global: g, first_thread: g * ws, lanes: ws as u32 }));
            let mut c_stores = vec![];
            for (wi, mut w) in ws_warps.enumerate() {
                let (cta, w0) = (wi as u64 / (128 / ws), (wi as u64 % (128 / ws)) * ws);
                let (bx, by) = (cta % (m / 128), cta / (m / 128));
                let mids = w0..w0 + ws;
                let mut want = vec![];
                for i in (0..k).step_by(8) {
                    want.push((MemKind::Load, mids.clone().map(|mid| b + ((by * 16 + mid % 16) + (i + mid / 16) * n) * 4).collect()));
                    for j in 0..8 {
                        want.push((MemKind::Load, mids.clone().map(|mid| a + ((bx * 128 + mid) + (i + j) * m) * 4).collect()));
                    }
                }
                for i in 0..16 {
                    let t: Vec<u64> = mids.clone().map(|mid| c + (m * by * 16 + bx * 128 + mid + i * m) * 4).collect();
                    want.push((MemKind::Load, t.clone()));
                    want.push((MemKind::Store, t));
                }
                let got = mem_ops(&mut w);
                assert_eq!(got, want, "m {m}, n {n}, k {k}, warp size {ws}, warp {wi}");
                c_stores.extend(got.into_iter().filter(|(kind, _)| *kind == MemKind::Store).flat_map(|(_, v)| v));
            }
            c_stores.sort_unstable();
            assert_eq!(c_stores, (0..m * n).map(|e| c + 4 * e).collect::<Vec<_>>());
        }
    }

    #[test]
    fn sizes_off_the_tiles_are_refused() {
        use crate::config::{resolve, Source};
        for (key, v) in [("m", 1000), ("n", 1000), ("k", 990), ("m", 0)] {
            let c = resolve(&[] as &[Source], &["workload.kind=parboil-sgemm".into(), format!("workload.parboil_sgemm.{key}={v}")]);
            let e = c.err().unwrap_or_else(|| panic!("{key} = {v} accepted")).to_string();
            assert!(e.contains(&format!("workload.parboil_sgemm.{key}")), "{e}");
        }
    }

    #[test]
    fn first_touch_goes_step_by_step_through_b_and_a_then_c() {
        // m = 1024 (a column of A is one 4 KiB page), n = 1024 (a row of B is one page), k = 16.
        let p = program(&[
            "workload.kind=parboil-sgemm",
            "workload.parboil_sgemm.m=1024",
            "workload.parboil_sgemm.n=1024",
            "workload.parboil_sgemm.k=16",
        ]);
        let ft = first_touch(&p);
        let step = |i: u64| -> Vec<(usize, u64)> { (i..i + 8).map(|r| (1, r)).chain((i..i + 8).map(|col| (0, col))).collect() };
        assert_eq!(ft[..16], step(0)[..]);
        assert_eq!(ft[16..32], step(8)[..]);
        // C: each warp's i-th column, by * 16 + i, for the CTAs in grid order (64 column tiles).
        let c: Vec<(usize, u64)> = (0..16).flat_map(|i| (0..64).map(move |by| (2, by * 16 + i))).collect();
        assert_eq!(ft[32..], c[..]);
    }

    #[test]
    fn a_column_of_a_feeds_16_products_and_the_host_copies_a_and_b() {
        use crate::workload::Op;
        let p = program(&SMALL);
        // Step 0: B, wait, barrier, then A's column, wait and 16 x compute_cycles 4 = 64 cycles.
        assert_eq!(all_ops(&mut warps(&p, 0)[0])[5], Op::Compute(64));
        // A 256 x 16 floats = 16,384 bytes, B 16 x 32 floats = 2048 bytes; C is not copied in.
        assert_eq!(p.host.input_bytes, Some(16_384 + 2048));
    }
}
