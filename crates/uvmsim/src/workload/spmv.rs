//! `spmv`: y = A x for a square sparse matrix in CSR (row pointers, column
//! indices, values), as SHOC's CSR kernels (`src/cuda/level1/spmv/Spmv.cu`)
//! do it. Every row has `nnz_per_row` entries; entry k of row r is in the band
//! |c - r| <= `band_cols` with probability `band_fraction` and uniform over
//! the columns otherwise, chosen by a seeded hash of (r, k) (a banded matrix
//! with random fill-in, as from a mesh with some long-range couplings).
//!
//! A warp's loads and waits follow the kernels' PTX (docs/workloads.md, "Load
//! order"; compiled with x read by a plain global load, where SHOC reads it
//! through a texture). `warp_per_row` (`spmv_csr_vector_kernel`): warp r
//! handles row r: it loads row_ptr[r] (one address), waits, loads
//! row_ptr[r+1], waits; then per chunk of warp-size entries loads the column
//! indices (coalesced), waits, gathers x at those columns and loads the values
//! together, waits; then reduces across lanes in shared memory
//! (warp-synchronous, no barrier: log2(warp) * compute_cycles) and lane 0
//! stores y[r]. Otherwise (`spmv_csr_scalar_kernel`) thread r handles row r
//! alone: it loads row_ptr[r] and row_ptr[r+1] together and waits; its k-th
//! column index and value are nnz_per_row entries away from its neighbour
//! lane's (uncoalesced), and the warp loops over k: load the index, wait,
//! gather x and load the value, wait, compute; then store y.
//!
//! Changed on 2026-12-01 (session 44): before, the vector warp loaded both
//! row pointers in one instruction, and both kernels loaded index and value
//! together, waited, then gathered x without waiting for it until the next
//! chunk's (entry's) index and value were issued. `pagerank` and `cusparse`,
//! which run this generator's vector kernel as a model of other kernels
//! (Hetero-Mark's, cuSPARSE's; not checked), keep that earlier order.
//!
//! Arrays in allocation order: row_ptr (rows+1 u32), col_idx (u32), values,
//! x, y. First touch (lockstep): row_ptr, then chunk by chunk (vector) or
//! entry by entry (scalar) the column indices row-major, the x pages they
//! point at (near each row, and the random columns' pages) and the values;
//! then y row-major.

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;
use crate::sim::mix64;

section! {
    /// Parameters of the CSR sparse matrix-vector product.
    pub struct SpmvParams {
        /// Rows (= columns) of the matrix.
        pub rows: u64 = 16_384,
        /// Non-zeros in every row.
        pub nnz_per_row: u32 = 16,
        /// Half-width of the band around the diagonal, in columns.
        pub band_cols: u64 = 64,
        /// Fraction of the entries inside the band (the rest are uniform random columns), 0 to 1.
        pub band_fraction: f64 = 0.9,
        /// Bytes per value of A, x and y (4 = float, 8 = double).
        pub value_bytes: u32 = 4,
        /// One warp per row (CSR-vector); false = one thread per row (CSR-scalar).
        pub warp_per_row: bool = true,
    }
}

impl SpmvParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "rows", self.rows, 1, 1 << 30)?;
        check(p, "nnz_per_row", self.nnz_per_row as u64, 1, 4096)?;
        check(p, "band_cols", self.band_cols, 0, 1 << 30)?;
        if !(0.0..=1.0).contains(&self.band_fraction) {
            return Err((format!("{p}.band_fraction"), format!("must be between 0 and 1, got {}", self.band_fraction)));
        }
        if !matches!(self.value_bytes, 4 | 8) {
            return Err((format!("{p}.value_bytes"), format!("must be 4 or 8, got {}", self.value_bytes)));
        }
        Ok(())
    }

    pub fn footprint(&self) -> u128 {
        let (r, nnz, v) = (self.rows as u128, self.rows as u128 * self.nnz_per_row as u128, self.value_bytes as u128);
        4 * (r + 1) + 4 * nnz + v * nnz + 2 * v * r
    }
}

#[derive(Debug, Clone)]
pub struct SpmvKernel {
    row_ptr: Buffer,
    col: Buffer,
    val: Buffer,
    x: Buffer,
    y: Buffer,
    p: SpmvParams,
    /// `band_fraction` as a threshold on a 32-bit hash.
    band_below: u64,
    seed: u64,
    warp_size: u32,
    compute: u32,
    /// The warp-per-row kernel in SHOC's PTX order (`spmv`); false: the order
    /// of before 2026-12-01, kept for `pagerank` and `cusparse`, which model
    /// other kernels (Hetero-Mark's, cuSPARSE's) whose order was not checked.
    shoc_order: bool,
}

pub(super) fn build(p: &SpmvParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    build_with(p, 1, "spmv", true, w, cfg, page, va)
}

/// `iterations` products with one matrix, x and y swapping roles between
/// launches (launch i + 1 reads what launch i wrote; `pagerank`), in the
/// earlier warp-per-row order.
pub(super) fn build_iterated(
    p: &SpmvParams,
    iterations: u32,
    name: &'static str,
    w: &WorkloadConfig,
    cfg: &Config,
    page: u64,
    va: &mut VaAllocator,
) -> (Vec<KernelSpec>, u64) {
    build_with(p, iterations, name, false, w, cfg, page, va)
}

#[allow(clippy::too_many_arguments)]
fn build_with(
    p: &SpmvParams,
    iterations: u32,
    name: &'static str,
    shoc_order: bool,
    w: &WorkloadConfig,
    cfg: &Config,
    page: u64,
    va: &mut VaAllocator,
) -> (Vec<KernelSpec>, u64) {
    let nnz = p.rows * p.nnz_per_row as u64;
    let vb = p.value_bytes as u64;
    let (row_ptr, col, val) = (va.alloc((p.rows + 1) * 4, page), va.alloc(nnz * 4, page), va.alloc(nnz * vb, page));
    let (x, y) = (va.alloc(p.rows * vb, page), va.alloc(p.rows * vb, page));
    let k = SpmvKernel { shoc_order, ..kernel_on(p, [row_ptr, col, val, x, y], w, cfg) };
    let threads = k.threads();
    let inputs = row_ptr.bytes + col.bytes + val.bytes + x.bytes;
    let kernels = (0..iterations)
        .map(|i| {
            let k = if i % 2 == 0 { k.clone() } else { SpmvKernel { x: k.y, y: k.x, ..k.clone() } };
            KernelSpec { name, threads, threads_per_cta: w.threads_per_cta, gen: KernelGen::Spmv(Box::new(k)) }
        })
        .collect();
    (kernels, inputs)
}

/// The product over buffers the caller allocated: row_ptr, col_idx, values, x, y
/// (`cusparse` runs it on the CSR its conversion kernel wrote), in the earlier
/// warp-per-row order. The columns are the same function of (seed, row,
/// entry) as `spmv`'s.
pub(super) fn kernel_on(p: &SpmvParams, [row_ptr, col, val, x, y]: [Buffer; 5], w: &WorkloadConfig, cfg: &Config) -> SpmvKernel {
    SpmvKernel {
        row_ptr,
        col,
        val,
        x,
        y,
        p: p.clone(),
        band_below: (p.band_fraction * (1u64 << 32) as f64) as u64,
        seed: mix64(cfg.sim.seed ^ 0x7370_6d76),
        warp_size: cfg.gpu.warp_size,
        compute: w.compute_cycles,
        shoc_order: false,
    }
}

impl SpmvKernel {
    /// Threads of the launch: a warp per row (vector) or a thread per row (scalar).
    pub fn threads(&self) -> u64 {
        if self.p.warp_per_row {
            self.p.rows * self.warp_size as u64
        } else {
            self.p.rows
        }
    }

    /// Column of entry `k` of row `r`.
    pub fn column(&self, r: u64, k: u64) -> u64 {
        let n = self.p.rows;
        let h = mix64(self.seed ^ (r * self.p.nnz_per_row as u64 + k));
        if (h >> 32) < self.band_below {
            let w = self.p.band_cols.min(n);
            let off = (h & 0xffff_ffff) % (2 * w + 1);
            (r + off).saturating_sub(w).min(n - 1)
        } else {
            (((h & 0xffff_ffff) as u128 * n as u128) >> 32) as u64
        }
    }

    pub fn warp(&self, id: WarpId) -> SpmvWarp {
        let row = if self.p.warp_per_row { id.first_thread / self.warp_size as u64 } else { id.first_thread };
        let order = match (self.p.warp_per_row, self.shoc_order) {
            (false, _) => &SCALAR,
            (true, true) => &VECTOR,
            (true, false) => &VECTOR_EARLIER,
        };
        SpmvWarp { k: self.clone(), row, lanes: id.lanes, order, part: 0, i: 0, k0: 0 }
    }
}

/// One step of a warp's program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// `row_ptr[row + off]`: one address (vector: every lane reads the warp's
    /// row's) or the lanes' rows (scalar).
    RowPtr(u64),
    /// `row_ptr[row]` and `row_ptr[row + 1]` in one instruction (earlier vector order).
    RowPtrPair,
    /// Column indices of the current entries.
    Col,
    /// Values of the current entries.
    Val,
    /// x gathered at the current entries' columns.
    X,
    Wait,
    /// One multiply-add.
    Fma,
    /// The reduction across lanes, log2(warp) multiply-add steps.
    Reduce,
    /// `y[row]` (vector: lane 0) or the lanes' rows (scalar).
    Store,
}

/// A warp's program: the row's prologue, the body run per chunk of
/// warp-size entries (vector) or per entry (scalar), the epilogue.
type Order = [&'static [Step]; 3];

use Step::*;

/// SHOC `spmv_csr_vector_kernel`'s PTX: `row_ptr[r]` is used (start + lane)
/// before `row_ptr[r+1]` is loaded; per chunk the index is used for x's
/// address, then x and the value are loaded together and used by the
/// multiply-add; the reduction is warp-synchronous (volatile shared memory,
/// no barrier); lane 0 stores.
const VECTOR: Order = [&[RowPtr(0), Wait, RowPtr(1), Wait], &[Col, Wait, X, Val, Wait], &[Reduce, Store]];

/// SHOC `spmv_csr_scalar_kernel`'s PTX: both row pointers together; per
/// entry the index, then x and the value together, then the multiply-add.
const SCALAR: Order = [&[RowPtr(0), RowPtr(1), Wait], &[Col, Wait, X, Val, Wait, Fma], &[Store]];

/// The warp-per-row order before 2026-12-01 (`pagerank`, `cusparse`): both row
/// pointers in one instruction; per chunk index and value together, then x,
/// waited for only after the next chunk's index and value.
const VECTOR_EARLIER: Order = [&[RowPtrPair, Wait], &[Col, Val, Wait, X], &[Wait, Reduce, Store]];

#[derive(Debug, Clone)]
pub struct SpmvWarp {
    k: SpmvKernel,
    /// The warp's row (vector) or its first lane's row (scalar).
    row: u64,
    lanes: u32,
    order: &'static Order,
    /// Prologue, body or epilogue (3: done).
    part: usize,
    /// Next step within the part.
    i: usize,
    /// First entry of the current chunk (vector) or the current entry (scalar).
    k0: u64,
}

impl SpmvWarp {
    fn mem(kind: MemKind, base: u64, stride: u64, n: u32, bytes: u32) -> Op {
        Op::Mem { kind, lanes: Lanes::Strided { base, stride, n }, bytes }
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let (nnz, vector) = (self.k.p.nnz_per_row as u64, self.k.p.warp_per_row);
        let step = loop {
            let Some(part) = self.order.get(self.part) else { return Op::Exit };
            if let Some(&s) = part.get(self.i) {
                self.i += 1;
                break s;
            }
            // The end of a part: the next chunk (vector) or entry (scalar), or the next part.
            self.i = 0;
            if self.part == 1 {
                self.k0 += if vector { self.lanes as u64 } else { 1 };
                if self.k0 < nnz {
                    continue;
                }
            }
            self.part += 1;
        };
        let k = &self.k;
        let vb = k.p.value_bytes;
        // Lanes: the chunk's entries (vector) or the warp's rows (scalar).
        let n = if vector { (nnz - self.k0.min(nnz)).min(self.lanes as u64) as u32 } else { self.lanes };
        // Column indices and values of the current entries: contiguous (vector) or a row apart (scalar).
        let (entry, stride) = (self.row * nnz + self.k0, if vector { 1 } else { nnz });
        match step {
            RowPtr(off) if vector => Self::mem(MemKind::Load, k.row_ptr.base + (self.row + off) * 4, 0, 1, 4),
            RowPtr(off) => Self::mem(MemKind::Load, k.row_ptr.base + (self.row + off) * 4, 4, n, 4),
            RowPtrPair => Self::mem(MemKind::Load, k.row_ptr.base + self.row * 4, 4, 2, 4),
            Col => Self::mem(MemKind::Load, k.col.base + entry * 4, stride * 4, n, 4),
            Val => Self::mem(MemKind::Load, k.val.base + entry * vb as u64, stride * vb as u64, n, vb),
            X => {
                for (l, slot) in scratch.iter_mut().take(n as usize).enumerate() {
                    let (r, e) = if vector { (self.row, self.k0 + l as u64) } else { (self.row + l as u64, self.k0) };
                    *slot = k.x.base + k.column(r, e) * vb as u64;
                }
                Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n }, bytes: vb }
            }
            Wait => Op::Wait,
            Fma => Op::Compute(k.compute),
            Reduce => Op::Compute(self.lanes.max(2).ilog2() * k.compute),
            Store if vector => Self::mem(MemKind::Store, k.y.base + self.row * vb as u64, 0, 1, vb),
            Store => Self::mem(MemKind::Store, k.y.base + self.row * vb as u64, vb as u64, n, vb),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{KernelGen, MemKind, Op};

    fn kernel(p: &crate::workload::Program) -> &super::SpmvKernel {
        match &kernels(p)[0].gen {
            KernelGen::Spmv(k) => k,
            _ => unreachable!(),
        }
    }

    #[test]
    fn warp_per_row_reads_its_row_coalesced_and_gathers_x() {
        let p = program(&["workload.kind=spmv", "workload.spmv.rows=1024", "workload.spmv.nnz_per_row=40"]);
        let k = kernel(&p);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        // Warp 7 = row 7: row_ptr[7], row_ptr[8], then 40 entries = chunks of 32 and 8 lanes (index, x, value), y[7].
        let ops = mem_ops(&mut warps(&p, 0)[7]);
        let kinds: Vec<MemKind> = ops.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, [[MemKind::Load; 8].as_slice(), &[MemKind::Store]].concat());
        assert_eq!(ops[0].1, [b[0] + 28]);
        assert_eq!(ops[1].1, [b[0] + 32]);
        assert_eq!(ops[2].1, (0..32).map(|e| b[1] + 4 * (7 * 40 + e)).collect::<Vec<_>>());
        assert_eq!(ops[3].1, (0..32).map(|e| b[3] + 4 * k.column(7, e)).collect::<Vec<_>>());
        assert_eq!(ops[4].1, (0..32).map(|e| b[2] + 4 * (7 * 40 + e)).collect::<Vec<_>>());
        assert_eq!(ops[5].1, (32..40).map(|e| b[1] + 4 * (7 * 40 + e)).collect::<Vec<_>>());
        assert_eq!(ops[6].1, (32..40).map(|e| b[3] + 4 * k.column(7, e)).collect::<Vec<_>>());
        assert_eq!(ops[7].1, (32..40).map(|e| b[2] + 4 * (7 * 40 + e)).collect::<Vec<_>>());
        assert_eq!(ops[8].1, [b[4] + 7 * 4]);
    }

    #[test]
    fn warp_per_row_follows_the_vector_kernels_ptx() {
        // spmv_csr_vector_kernel: row_ptr[r], wait (start + lane), row_ptr[r+1], wait; per chunk the index,
        // wait, x and the value, wait; the warp-synchronous reduction (no barrier) and lane 0's store.
        let p = program(&["workload.kind=spmv", "workload.spmv.rows=64", "workload.spmv.nnz_per_row=40", "workload.compute_cycles=7"]);
        let ops = all_ops(&mut warps(&p, 0)[3]);
        assert_eq!(op_shape(&ops), "mwmw".to_owned() + "mwmmw" + "mwmmw" + "cm");
        assert_eq!(ops[ops.len() - 2], Op::Compute(5 * 7));
        // The scalar kernel: both row pointers together; per entry the index, wait, x and the value, wait, the
        // multiply-add; then the store.
        let p = program(&[
            "workload.kind=spmv",
            "workload.spmv.rows=64",
            "workload.spmv.nnz_per_row=3",
            "workload.spmv.warp_per_row=false",
            "workload.compute_cycles=7",
        ]);
        let ops = all_ops(&mut warps(&p, 0)[1]);
        assert_eq!(op_shape(&ops), "mmw".to_owned() + &"mwmmwc".repeat(3) + "m");
        assert!(ops.iter().all(|o| matches!(o, Op::Compute(7) | Op::Mem { .. } | Op::Wait)));
    }

    #[test]
    fn pagerank_and_cusparse_keep_the_earlier_vector_order() {
        let earlier = "mw".to_owned() + "mmwm" + "mmwm" + "wcm";
        let p = program(&["workload.kind=pagerank", "workload.pagerank.nodes=64", "workload.pagerank.edges_per_node=40"]);
        assert_eq!(op_shape(&all_ops(&mut warps(&p, 0)[3])), earlier);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        let ops = mem_ops(&mut warps(&p, 0)[3]);
        assert_eq!(ops[0].1, [b[0] + 12, b[0] + 16]);
        assert_eq!(ops[1].1, (0..32).map(|e| b[1] + 4 * (3 * 40 + e)).collect::<Vec<_>>());
        assert_eq!(ops[2].1, (0..32).map(|e| b[2] + 4 * (3 * 40 + e)).collect::<Vec<_>>());
        let p = program(&["workload.kind=cusparse", "workload.cusparse.n=64", "workload.cusparse.nnz_per_row=32"]);
        assert_eq!(op_shape(&all_ops(&mut warps(&p, 3)[3])), "mw".to_owned() + "mmwm" + "wcm");
    }

    #[test]
    fn thread_per_row_strides_over_the_rows_entries() {
        let p =
            program(&["workload.kind=spmv", "workload.spmv.rows=64", "workload.spmv.nnz_per_row=3", "workload.spmv.warp_per_row=false"]);
        let k = kernel(&p);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        // Warp 1 = rows 32..64: row_ptr[r] and [r+1], then (index, x, value) x 3 entries, then y.
        let ops = mem_ops(&mut warps(&p, 0)[1]);
        assert_eq!(ops.len(), 2 + 3 * 3 + 1);
        assert_eq!(ops[0].1, (32..64).map(|r| b[0] + 4 * r).collect::<Vec<_>>());
        assert_eq!(ops[1].1, (33..65).map(|r| b[0] + 4 * r).collect::<Vec<_>>());
        assert_eq!(ops[5].1, (32..64).map(|r| b[1] + 4 * (r * 3 + 1)).collect::<Vec<_>>());
        assert_eq!(ops[6].1, (32..64).map(|r| b[3] + 4 * k.column(r, 1)).collect::<Vec<_>>());
        assert_eq!(ops[7].1, (32..64).map(|r| b[2] + 4 * (r * 3 + 1)).collect::<Vec<_>>());
        assert_eq!(ops[11], (MemKind::Store, (32..64).map(|r| b[4] + 4 * r).collect()));
    }

    #[test]
    fn doubles_are_8_bytes_in_the_values_x_and_y_and_the_host_copies_the_matrix_and_x() {
        use crate::workload::Op;
        let bytes =
            |ops: &[Op]| ops.iter().filter_map(|o| if let Op::Mem { bytes, .. } = o { Some(*bytes) } else { None }).collect::<Vec<_>>();
        for vector in [true, false] {
            let p = program(&[
                "workload.kind=spmv",
                "workload.spmv.rows=64",
                "workload.spmv.nnz_per_row=40",
                "workload.spmv.value_bytes=8",
                &format!("workload.spmv.warp_per_row={vector}"),
            ]);
            let k = kernel(&p);
            let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
            // Vector: warp 3 = row 3, entries 0..32 and 32..40. Scalar: warp 1 = rows 32..64, entry by entry.
            let w = if vector { 3 } else { 1 };
            let ops = mem_ops(&mut warps(&p, 0)[w]);
            let (val, x, y) = if vector {
                let chunk = |e: std::ops::Range<u64>| {
                    (
                        e.clone().map(|e| b[2] + 8 * (3 * 40 + e)).collect::<Vec<_>>(),
                        e.map(|e| b[3] + 8 * k.column(3, e)).collect::<Vec<_>>(),
                    )
                };
                let ((v0, x0), (v1, x1)) = (chunk(0..32), chunk(32..40));
                assert_eq!(bytes(&all_ops(&mut warps(&p, 0)[3])), [4, 4, 4, 8, 8, 4, 8, 8, 8]);
                (vec![(4, v0), (7, v1)], vec![(3, x0), (6, x1)], vec![b[4] + 8 * 3])
            } else {
                let e = 1;
                assert_eq!(bytes(&all_ops(&mut warps(&p, 0)[1])), [&[4, 4][..], &[4, 8, 8].repeat(40), &[8]].concat());
                let val = (32..64u64).map(|r| b[2] + 8 * (r * 40 + e)).collect();
                let x = (32..64u64).map(|r| b[3] + 8 * k.column(r, e)).collect();
                (vec![(7, val)], vec![(6, x)], (32..64u64).map(|r| b[4] + 8 * r).collect())
            };
            for (i, want) in val.into_iter().chain(x) {
                assert_eq!(ops[i].1, want, "vector {vector}, op {i}");
            }
            assert_eq!((ops.last().unwrap().0, &ops.last().unwrap().1), (MemKind::Store, &y));
            // Inputs: row_ptr (65 x 4), indices (2560 x 4), values (2560 x 8), x (64 x 8); y is the output.
            assert_eq!(p.host.input_bytes, Some(260 + 10_240 + 20_480 + 512));
        }
        assert_footprint_is_the_buffers(&[
            "workload.kind=spmv",
            "workload.spmv.rows=100",
            "workload.spmv.nnz_per_row=7",
            "workload.spmv.value_bytes=8",
        ]);
        assert_footprint_is_the_buffers(&["workload.kind=pagerank", "workload.pagerank.nodes=100"]);
    }

    #[test]
    fn a_64_lane_warp_takes_64_entries_a_chunk_and_reduces_in_6_steps() {
        use crate::workload::{Op, WarpId};
        let p = program(&[
            "gpu.warp_size=64",
            "workload.kind=spmv",
            "workload.spmv.rows=64",
            "workload.spmv.nnz_per_row=100",
            "workload.compute_cycles=7",
        ]);
        let idx = p.buffers[1].base;
        // Row 3: entries 0..64, then 64..100.
        let mut w = kernels(&p)[0].gen.warp(WarpId { global: 3, first_thread: 3 * 64, lanes: 64 });
        let ops = ops_with_addrs(&mut w);
        let cols: Vec<&Vec<u64>> =
            ops.iter().filter(|(k, a)| *k == 'l' && a[0] >= idx && a[0] < idx + p.buffers[1].bytes).map(|(_, a)| a).collect();
        assert_eq!(cols, [&(0..64).map(|e| idx + 4 * (300 + e)).collect::<Vec<_>>(), &(64..100).map(|e| idx + 4 * (300 + e)).collect()]);
        // The tree reduction over 64 lanes: log2(64) = 6 steps of 7 cycles.
        assert!(all_ops(&mut kernels(&p)[0].gen.warp(WarpId { global: 3, first_thread: 3 * 64, lanes: 64 })).contains(&Op::Compute(42)));
    }

    #[test]
    fn columns_follow_the_seed_and_a_band_wider_than_the_matrix_spreads_over_it() {
        let cols = |sets: &[&str]| {
            let p = program(&[&["workload.kind=spmv"], sets].concat());
            let k = kernel(&p).clone();
            (0..k.p.rows).flat_map(|r| (0..k.p.nnz_per_row as u64).map(move |e| (r, e))).map(|(r, e)| k.column(r, e)).collect::<Vec<u64>>()
        };
        let (a, b) = (cols(&["workload.spmv.rows=4096", "sim.seed=1"]), cols(&["workload.spmv.rows=4096", "sim.seed=2"]));
        assert!(a.iter().zip(&b).filter(|(x, y)| x == y).count() < a.len() / 4);
        // 10 rows, a band of +-1000 columns: the band is cut to +-10 (the matrix), so each inner column
        // (1..=8) takes 1/21 of the entries (the offsets past either edge pile on columns 0 and 9):
        // about 476 of 10 x 1000.
        let c = cols(&[
            "workload.spmv.rows=10",
            "workload.spmv.nnz_per_row=1000",
            "workload.spmv.band_cols=1000",
            "workload.spmv.band_fraction=1",
        ]);
        for col in 1..=8 {
            let n = c.iter().filter(|&&x| x == col).count();
            assert!((380..580).contains(&n), "column {col}: {n}");
        }
    }

    #[test]
    fn band_fraction_places_columns_in_the_band() {
        let cols = |f: &str| {
            let p = program(&[
                "workload.kind=spmv",
                "workload.spmv.rows=100000",
                "workload.spmv.band_cols=10",
                &format!("workload.spmv.band_fraction={f}"),
            ]);
            let k = kernel(&p).clone();
            (0..2000u64).flat_map(|r| (0..16).map(move |e| (r * 50, e))).map(|(r, e)| (r, k.column(r, e))).collect::<Vec<_>>()
        };
        assert!(cols("1.0").iter().all(|&(r, c)| c.abs_diff(r) <= 10 && c < 100000));
        let inside = cols("0.5").iter().filter(|&&(r, c)| c.abs_diff(r) <= 10).count() as f64 / 32000.0;
        assert!((inside - 0.5).abs() < 0.02, "{inside}");
        // Every offset of the band occurs.
        let offs: std::collections::BTreeSet<i64> = cols("1.0").iter().map(|&(r, c)| c as i64 - r as i64).collect();
        assert_eq!(offs.len(), 21);
    }

    #[test]
    fn first_touch_is_row_pointers_indices_x_values_then_y() {
        let p = program(&["workload.kind=spmv", "workload.spmv.rows=4096", "workload.spmv.band_fraction=1"]);
        let ft = first_touch(&p);
        let mut order: Vec<usize> = ft.iter().map(|&(b, _)| b).collect();
        order.dedup();
        assert_eq!(order, [0, 1, 3, 2, 4]);
        // Indices row-major; x (banded) in ascending pages too.
        for b in [1, 3] {
            let pages: Vec<u64> = ft.iter().filter(|(x, _)| *x == b).map(|&(_, pg)| pg).collect();
            assert!(pages.windows(2).all(|w| w[0] < w[1]), "{b}: {pages:?}");
        }
    }
}
