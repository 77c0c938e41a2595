//! `spmv`: y = A x for a square sparse matrix in CSR (row pointers, column
//! indices, values), as the SHOC / cuSPARSE-style kernels do it. Every row has
//! `nnz_per_row` entries; entry k of row r is in the band |c - r| <=
//! `band_cols` with probability `band_fraction` and uniform over the columns
//! otherwise, chosen by a seeded hash of (r, k) (a banded matrix with random
//! fill-in, as from a mesh with some long-range couplings).
//!
//! `warp_per_row` (CSR-vector): warp r handles row r: it loads
//! row_ptr[r], row_ptr[r+1], waits, then per chunk of warp-size entries
//! loads the column indices and the values (coalesced), waits, and gathers
//! x at those columns; then waits, reduces across lanes
//! (log2(warp) * compute_cycles) and lane 0 stores y[r]. Otherwise
//! (CSR-scalar) thread r handles row r alone: its k-th column index and value
//! are nnz_per_row entries away from its neighbour lane's (uncoalesced), and
//! the warp loops over k: load index and value, wait, gather x, compute.
//!
//! Arrays in allocation order: row_ptr (rows+1 u32), col_idx (u32), values,
//! x, y. First touch (lockstep, vector): row_ptr, then col_idx and values
//! interleaved row-major with the x pages near each row (and the random
//! columns' pages), then y row-major.

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
}

pub(super) fn build(p: &SpmvParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    build_iterated(p, 1, "spmv", w, cfg, page, va)
}

/// `iterations` products with one matrix, x and y swapping roles between
/// launches (launch i + 1 reads what launch i wrote; `pagerank`).
pub(super) fn build_iterated(
    p: &SpmvParams,
    iterations: u32,
    name: &'static str,
    w: &WorkloadConfig,
    cfg: &Config,
    page: u64,
    va: &mut VaAllocator,
) -> (Vec<KernelSpec>, u64) {
    let nnz = p.rows * p.nnz_per_row as u64;
    let vb = p.value_bytes as u64;
    let (row_ptr, col, val) = (va.alloc((p.rows + 1) * 4, page), va.alloc(nnz * 4, page), va.alloc(nnz * vb, page));
    let (x, y) = (va.alloc(p.rows * vb, page), va.alloc(p.rows * vb, page));
    let k = kernel_on(p, [row_ptr, col, val, x, y], w, cfg);
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
/// (`cusparse` runs it on the CSR its conversion kernel wrote). The columns are
/// the same function of (seed, row, entry) as `spmv`'s.
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
        SpmvWarp { k: self.clone(), row, lanes: id.lanes, k0: 0, phase: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct SpmvWarp {
    k: SpmvKernel,
    /// The warp's row (vector) or its first lane's row (scalar).
    row: u64,
    lanes: u32,
    /// First entry of the current chunk (vector) or the current entry (scalar).
    k0: u64,
    phase: u8,
}

impl SpmvWarp {
    fn mem(kind: MemKind, base: u64, stride: u64, n: u32, bytes: u32) -> Op {
        Op::Mem { kind, lanes: Lanes::Strided { base, stride, n }, bytes }
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let k = &self.k;
        let (nnz, vb) = (k.p.nnz_per_row as u64, k.p.value_bytes);
        let vector = k.p.warp_per_row;
        loop {
            // Lanes: the chunk's entries (vector) or the warp's rows (scalar).
            let n = if vector { (nnz - self.k0.min(nnz)).min(self.lanes as u64) as u32 } else { self.lanes };
            // Column indices and values of the current entries: contiguous (vector) or a row apart (scalar).
            let (entry, step) = if vector { (self.row * nnz + self.k0, 1) } else { (self.row * nnz + self.k0, nnz) };
            let phase = self.phase;
            self.phase += 1;
            return match phase {
                0 if vector => Self::mem(MemKind::Load, k.row_ptr.base + self.row * 4, 4, 2, 4),
                0 => Self::mem(MemKind::Load, k.row_ptr.base + self.row * 4, 4, n, 4),
                1 if vector => continue,
                1 => Self::mem(MemKind::Load, k.row_ptr.base + (self.row + 1) * 4, 4, n, 4),
                2 | 5 => Op::Wait,
                3 => Self::mem(MemKind::Load, k.col.base + entry * 4, step * 4, n, 4),
                4 => Self::mem(MemKind::Load, k.val.base + entry * vb as u64, step * vb as u64, n, vb),
                6 => {
                    for (l, slot) in scratch.iter_mut().take(n as usize).enumerate() {
                        let (r, e) = if vector { (self.row, self.k0 + l as u64) } else { (self.row + l as u64, self.k0) };
                        *slot = k.x.base + k.column(r, e) * vb as u64;
                    }
                    Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n }, bytes: vb }
                }
                7 => {
                    // The next chunk (vector) or entry (scalar, after its multiply-add), or the end of the row.
                    self.k0 += if vector { self.lanes as u64 } else { 1 };
                    if self.k0 < nnz {
                        self.phase = 3;
                        if vector {
                            continue;
                        }
                        return Op::Compute(k.compute);
                    }
                    Op::Wait
                }
                // Multiply-adds, then (vector) the reduction across lanes.
                8 if vector => Op::Compute(self.lanes.max(2).ilog2() * k.compute),
                8 => Op::Compute(k.compute),
                9 if vector => Self::mem(MemKind::Store, k.y.base + self.row * vb as u64, 0, 1, vb),
                9 => Self::mem(MemKind::Store, k.y.base + self.row * vb as u64, vb as u64, n, vb),
                _ => {
                    self.phase = 10;
                    Op::Exit
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{KernelGen, MemKind};

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
        // Warp 7 = row 7: 40 entries = chunks of 32 and 8 lanes.
        let ops = mem_ops(&mut warps(&p, 0)[7]);
        let kinds: Vec<MemKind> = ops.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, [[MemKind::Load; 7].as_slice(), &[MemKind::Store]].concat());
        assert_eq!(ops[0].1, [b[0] + 28, b[0] + 32]);
        assert_eq!(ops[1].1, (0..32).map(|e| b[1] + 4 * (7 * 40 + e)).collect::<Vec<_>>());
        assert_eq!(ops[2].1, (0..32).map(|e| b[2] + 4 * (7 * 40 + e)).collect::<Vec<_>>());
        assert_eq!(ops[3].1, (0..32).map(|e| b[3] + 4 * k.column(7, e)).collect::<Vec<_>>());
        assert_eq!(ops[4].1, (32..40).map(|e| b[1] + 4 * (7 * 40 + e)).collect::<Vec<_>>());
        assert_eq!(ops[6].1, (32..40).map(|e| b[3] + 4 * k.column(7, e)).collect::<Vec<_>>());
        assert_eq!(ops[7].1, [b[4] + 7 * 4]);
    }

    #[test]
    fn thread_per_row_strides_over_the_rows_entries() {
        let p =
            program(&["workload.kind=spmv", "workload.spmv.rows=64", "workload.spmv.nnz_per_row=3", "workload.spmv.warp_per_row=false"]);
        let k = kernel(&p);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        // Warp 1 = rows 32..64: row_ptr[r] and [r+1], then (index, value, x) x 3 entries, then y.
        let ops = mem_ops(&mut warps(&p, 0)[1]);
        assert_eq!(ops.len(), 2 + 3 * 3 + 1);
        assert_eq!(ops[0].1, (32..64).map(|r| b[0] + 4 * r).collect::<Vec<_>>());
        assert_eq!(ops[1].1, (33..65).map(|r| b[0] + 4 * r).collect::<Vec<_>>());
        assert_eq!(ops[5].1, (32..64).map(|r| b[1] + 4 * (r * 3 + 1)).collect::<Vec<_>>());
        assert_eq!(ops[6].1, (32..64).map(|r| b[2] + 4 * (r * 3 + 1)).collect::<Vec<_>>());
        assert_eq!(ops[7].1, (32..64).map(|r| b[3] + 4 * k.column(r, 1)).collect::<Vec<_>>());
        assert_eq!(ops[11], (MemKind::Store, (32..64).map(|r| b[4] + 4 * r).collect()));
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
    fn first_touch_is_row_pointers_indices_values_x_then_y() {
        let p = program(&["workload.kind=spmv", "workload.spmv.rows=4096", "workload.spmv.band_fraction=1"]);
        let ft = first_touch(&p);
        let mut order: Vec<usize> = ft.iter().map(|&(b, _)| b).collect();
        order.dedup();
        assert_eq!(order, [0, 1, 2, 3, 4]);
        // Indices row-major; x (banded) in ascending pages too.
        for b in [1, 3] {
            let pages: Vec<u64> = ft.iter().filter(|(x, _)| *x == b).map(|&(_, pg)| pg).collect();
            assert!(pages.windows(2).all(|w| w[0] < w[1]), "{b}: {pages:?}");
        }
    }
}
