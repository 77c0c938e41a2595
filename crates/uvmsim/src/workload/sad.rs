//! `sad` (Parboil SAD, Zheng's "sad"): H.264 motion estimation, the sums of
//! absolute differences between every 16 x 16 macroblock of a frame and the
//! reference frame at every offset of a +-`search_range` pixel window
//! (`P = (2 search_range + 1)^2` positions), for the 41 partitions of a
//! macroblock (16x16, 2 16x8, 2 8x16, 4 8x8, 8 8x4, 8 4x8, 16 4x4). Frames are
//! `width x height` 16-bit pixels, row-major; the results are 16-bit, laid out
//! `sad[(mb * 41 + partition) * P + position]` with the partitions in that order.
//!
//! Three launches, as Parboil's:
//! - `mb_sad_calc`: one CTA per macroblock (`workload.threads_per_cta`
//!   threads), thread t handles positions t, t + CTA size, ...: each warp first
//!   loads the macroblock's 16 rows of the current frame (lane r row r, 32 B),
//!   waits and meets its CTA (Parboil stages the block in shared memory and
//!   calls `__syncthreads`); then per position, per lane, the 16 reference rows at the offset
//!   (32 B each, clamped to the frame as Parboil's texture fetches are), waits,
//!   computes (16 x compute_cycles, or with `row_insts` > 0, 16 x row_insts
//!   instructions of one issue slot each) and stores the 16 4x4 SADs (adjacent
//!   lanes adjacent positions: coalesced); after its last position it meets its
//!   CTA again (Parboil's barrier before the copy-out, which it does from shared
//!   memory after that barrier and this model per position).
//! - `larger_sad_calc_8`: one thread per (macroblock, position): loads the 16
//!   4x4 SADs, waits, computes, stores the 8x4, 4x8 and 8x8 SADs (20).
//! - `larger_sad_calc_16`: loads the 4 8x8 SADs, waits, computes, stores the
//!   16x8, 8x16 and 16x16 SADs (5).
//!
//! Simplified from Parboil: the reference frame is read through global
//! memory (Parboil uses a texture); each thread covers whole macroblock
//! positions (Parboil splits the 4x4 blocks of a position over threads).
//!
//! Arrays in allocation order: current frame, reference frame, SADs. First
//! touch (lockstep): the current frame's macroblock rows and the reference
//! rows around each macroblock (macroblocks in order), interleaved with the
//! 4x4 SADs; the larger partitions' SADs in the later launches.

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};

section! {
    /// Parameters of the Parboil SAD motion estimation.
    pub struct SadParams {
        /// Frame width in pixels (a multiple of 16).
        pub width: u64 = 176,
        /// Frame height in pixels (a multiple of 16).
        pub height: u64 = 144,
        /// Search window half-width in pixels (Parboil: 16).
        pub search_range: u32 = 16,
        /// Arithmetic and control warp instructions per reference row (16 pixels at one search
        /// position), each taking an issue slot of its SM; 0 = the row's work is `compute_cycles`
        /// of latency that takes no issue slot. Parboil's `mb_sad_calc` (CUDA) per 4x4 block and
        /// search position, its 16 pixels: 7 texture fetches beyond the one load we model (it
        /// fetches 24 pixels per 3 positions and row set), 5 shared-memory loads of the current
        /// block, 16 absolute-difference accumulations (Fermi's ISAD; 48 if the compiler emits
        /// subtract, absolute value and add), 5 texture-coordinate conversions, 1 shared store of
        /// the SAD, 4 loop and search-offset updates = 38 (70 without ISAD).
        pub row_insts: u32 = 0,
    }
}

/// Partitions of a macroblock, and the first of each size in the SAD layout.
const PARTS: u64 = 41;
const P8X8: u64 = 5;
const P4X4: u64 = 25;

impl SadParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        for (name, v) in [("width", self.width), ("height", self.height)] {
            if v == 0 || v % 16 != 0 || v > 1 << 16 {
                return Err((format!("{p}.{name}"), format!("must be a positive multiple of 16 up to 65536, got {v}")));
            }
        }
        check(p, "search_range", self.search_range as u64, 0, 64)?;
        check(p, "row_insts", self.row_insts as u64, 0, 1000)
    }

    fn macroblocks(&self) -> u64 {
        self.width / 16 * (self.height / 16)
    }

    fn positions(&self) -> u64 {
        (2 * self.search_range as u64 + 1).pow(2)
    }

    /// Two frames and the SADs.
    pub fn footprint(&self) -> u128 {
        (4 * self.width * self.height) as u128 + 2 * (self.macroblocks() * PARTS * self.positions()) as u128
    }
}

#[derive(Debug, Clone)]
pub struct SadKernel {
    cur: u64,
    reference: u64,
    sad: u64,
    width: u64,
    height: u64,
    range: u64,
    threads_per_cta: u64,
    compute: u32,
    row_insts: u32,
}

pub(super) fn build(p: &SadParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let (mbs, pos) = (p.macroblocks(), p.positions());
    let (cur, reference) = (va.alloc(p.width * p.height * 2, page), va.alloc(p.width * p.height * 2, page));
    let sad = va.alloc(mbs * PARTS * pos * 2, page);
    let tpc = w.threads_per_cta;
    let k = SadKernel {
        cur: cur.base,
        reference: reference.base,
        sad: sad.base,
        width: p.width,
        height: p.height,
        range: p.search_range as u64,
        threads_per_cta: tpc as u64,
        compute: w.compute_cycles,
        row_insts: p.row_insts,
    };
    let mut kernels =
        vec![KernelSpec { name: "sad-mb", threads: mbs * tpc as u64, threads_per_cta: tpc, gen: KernelGen::Sad(Box::new(k)) }];
    // The larger partitions: (macroblock, position) grids over the SAD array; partition q of macroblock y at position x.
    let at = |q: u64| Index::Affine { c0: q * pos, cx: 1, cy: PARTS * pos, ydiv: 1, cz: 0 };
    let larger = |name: &'static str, from: std::ops::Range<u64>, to: std::ops::Range<u64>| {
        let mut body: Vec<Step> = from.map(|q| Step::load(0, at(q))).collect();
        body.extend([Step::Wait, Step::Compute(w.compute_cycles)]);
        body.extend(to.map(|q| Step::store(0, at(q))));
        let g = GridKernel::new([pos, mbs, 1], pos * mbs, 1, vec![Array { base: sad.base, elem_bytes: 2 }], body);
        KernelSpec { name, threads: g.threads(), threads_per_cta: tpc, gen: KernelGen::Grid(g) }
    };
    kernels.push(larger("sad-8", P4X4..PARTS, P8X8..P4X4));
    kernels.push(larger("sad-16", P8X8..P8X8 + 4, 0..P8X8));
    (kernels, cur.bytes + reference.bytes)
}

impl SadKernel {
    pub fn warp(&self, id: WarpId) -> SadWarp {
        let mb = id.first_thread / self.threads_per_cta;
        SadWarp {
            k: self.clone(),
            mb,
            t0: id.first_thread % self.threads_per_cta,
            lanes: id.lanes,
            round: 0,
            step: 0,
            left: 0,
            met_at_end: false,
        }
    }

    fn positions(&self) -> u64 {
        (2 * self.range + 1).pow(2)
    }

    /// Address of row `r` of the 16-pixel reference segment for macroblock `mb` at search position `s`.
    pub fn reference_row(&self, mb: u64, s: u64, r: u64) -> u64 {
        let side = 2 * self.range + 1;
        let mbw = self.width / 16;
        let y = ((mb / mbw * 16 + r + s / side) as i64 - self.range as i64).clamp(0, self.height as i64 - 1) as u64;
        let x = ((mb % mbw * 16 + s % side) as i64 - self.range as i64).clamp(0, self.width as i64 - 16) as u64;
        self.reference + (y * self.width + x) * 2
    }
}

#[derive(Debug, Clone)]
pub struct SadWarp {
    k: SadKernel,
    mb: u64,
    t0: u64,
    lanes: u32,
    round: u64,
    step: u64,
    /// Row instructions of this round still to issue (`row_insts`).
    left: u64,
    /// The warp has met its CTA at the kernel's last barrier (it exits next).
    met_at_end: bool,
}

impl SadWarp {
    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let k = &self.k;
        let (step, pos) = (self.step, k.positions());
        self.step += 1;
        match step {
            0 => {
                let mbw = k.width / 16;
                let base = k.cur + ((self.mb / mbw * 16) * k.width + self.mb % mbw * 16) * 2;
                Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base, stride: k.width * 2, n: 16.min(self.lanes) }, bytes: 32 }
            }
            1 => Op::Wait,
            // mb_sad_calc meets once the current block is staged in shared memory.
            2 => Op::Barrier,
            _ => {
                let s0 = self.t0 + self.round * k.threads_per_cta;
                if s0 >= pos {
                    self.step = 3;
                    // And again after its positions, before the copy-out (done per position here).
                    if !self.met_at_end {
                        self.met_at_end = true;
                        return Op::Barrier;
                    }
                    return Op::Exit;
                }
                let n = (pos - s0).min(self.lanes as u64) as usize;
                match step - 3 {
                    r @ 0..16 => {
                        for (l, slot) in scratch.iter_mut().take(n).enumerate() {
                            *slot = k.reference_row(self.mb, s0 + l as u64, r);
                        }
                        Op::Mem { kind: MemKind::Load, lanes: super::grid::compact(scratch, n), bytes: 32 }
                    }
                    16 => {
                        self.left = 16 * k.row_insts as u64;
                        Op::Wait
                    }
                    // One issue slot per instruction: the SM's issue rate bounds the kernel.
                    17 if self.left > 0 => {
                        self.left -= 1;
                        if self.left > 0 {
                            self.step = step;
                        }
                        Op::Compute(1)
                    }
                    17 => Op::Compute(16 * k.compute),
                    b => {
                        let b = b - 18;
                        if b == 15 {
                            (self.round, self.step) = (self.round + 1, 3);
                        }
                        let base = k.sad + ((self.mb * PARTS + P4X4 + b) * pos + s0) * 2;
                        Op::Mem { kind: MemKind::Store, lanes: Lanes::Strided { base, stride: 2, n: n as u32 }, bytes: 2 }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{KernelGen, MemKind};

    #[test]
    fn a_macroblock_warp_reads_its_window_and_stores_4x4_sads() {
        // 64 x 32 frame: 4 x 2 macroblocks; range 2: 25 positions; CTAs of 256 threads, so only warp 0 of each works.
        let p = program(&["workload.kind=sad", "workload.sad.width=64", "workload.sad.height=32", "workload.sad.search_range=2"]);
        let names: Vec<&str> = kernels(&p).iter().map(|k| k.name).collect();
        assert_eq!(names, ["sad-mb", "sad-8", "sad-16"]);
        let (cur, refr, sad) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let k = match &kernels(&p)[0].gen {
            KernelGen::Sad(k) => k.as_ref().clone(),
            _ => unreachable!(),
        };
        // Macroblock 5 = (1, 1): pixels x 16..32, y 16..32.
        let ops = mem_ops(&mut warps(&p, 0)[5 * 8]);
        assert_eq!(ops.len(), 1 + 16 + 16);
        assert_eq!(ops[0].1, (0..16).map(|r| cur + ((16 + r) * 64 + 16) * 2).collect::<Vec<_>>());
        // Position s = (dy, dx) = (s / 5 - 2, s % 5 - 2); row r of position 0 is at (16 + r - 2, 14).
        assert_eq!(ops[1].1[0], refr + ((14 * 64) + 14) * 2);
        assert_eq!(ops[1 + 3].1[24], refr + ((16 + 3 + 2) * 64 + 18) * 2);
        assert_eq!(ops[1].1.len(), 25);
        assert_eq!(k.reference_row(0, 0, 0), refr); // clamped at the frame's corner
                                                    // The 16 4x4 SADs of the 25 positions: partitions 25..41 of macroblock 5.
        assert_eq!(ops[17], (MemKind::Store, (0..25).map(|s| sad + ((5 * 41 + 25) * 25 + s) * 2).collect()));
        assert_eq!(ops[32].1[0], sad + ((5 * 41 + 40) * 25) * 2);
        // Other warps of the CTA have no positions.
        assert_eq!(mem_ops(&mut warps(&p, 0)[5 * 8 + 1]).len(), 1);
        // sad-8: thread (position 3, macroblock 2) reads its 16 4x4 SADs and writes partitions 5..25.
        let ops = mem_ops(&mut warps(&p, 1)[(2 * 25 + 3) / 32]);
        let lane = (2 * 25 + 3) % 32;
        let el = |q: u64| sad + ((2 * 41 + q) * 25 + 3) * 2;
        assert_eq!(ops.iter().map(|(_, a)| a[lane]).collect::<Vec<_>>(), (25..41).chain(5..25).map(el).collect::<Vec<_>>());
        assert_eq!(ops.iter().filter(|(k, _)| *k == MemKind::Store).count(), 20);
    }

    #[test]
    fn row_insts_issue_one_slot_per_row_instruction() {
        use crate::workload::Op;
        // 64 x 32 frame, range 16: 1089 positions, so warp 0 of a CTA of 256 has 5 rounds (0, 256, .., 1024).
        let base = ["workload.kind=sad", "workload.sad.width=64", "workload.sad.height=32"];
        let old = all_ops(&mut warps(&program(&base), 0)[0]);
        let mut sets = base.to_vec();
        sets.push("workload.sad.row_insts=3");
        let new = all_ops(&mut warps(&program(&sets), 0)[0]);
        // Current rows, wait, barrier; per round 16 rows, wait, then one Compute(16 rows x 4
        // cycles) by default or 16 rows x 3 single-slot instructions, then 16 stores; a barrier.
        assert_eq!(old.len(), 3 + 5 * (16 + 1 + 1 + 16) + 1);
        assert_eq!(new.len(), 3 + 5 * (16 + 1 + 48 + 16) + 1);
        assert_eq!((old[2], old[old.len() - 1]), (Op::Barrier, Op::Barrier));
        assert_eq!(old.iter().filter(|o| **o == Op::Barrier).count(), 2);
        assert_eq!(old.iter().filter(|o| **o == Op::Compute(64)).count(), 5);
        assert_eq!(new.iter().filter(|o| **o == Op::Compute(1)).count(), 5 * 48);
        let mem = |v: &[Op]| v.iter().filter(|o| matches!(o, Op::Mem { .. } | Op::Wait)).copied().collect::<Vec<_>>();
        assert_eq!(mem(&old), mem(&new));
        // Round 0: its 16 row loads and the wait, then the 48 instructions, then its first store.
        assert!(matches!(new[3 + 16], Op::Wait));
        assert!(new[3 + 17..3 + 65].iter().all(|o| *o == Op::Compute(1)));
        assert!(matches!(new[3 + 65], Op::Mem { kind: MemKind::Store, .. }));
    }

    #[test]
    fn first_touch_is_frames_around_each_macroblock_then_sads() {
        // 1024 x 32 pixels: a 2 KiB row, so a macroblock's 16 rows span 8 pages of each frame.
        let p = program(&["workload.kind=sad", "workload.sad.width=1024", "workload.sad.height=32"]);
        let ft = first_touch(&p);
        assert_eq!(ft[0], (0, 0));
        let mut order: Vec<usize> = ft.iter().map(|&(b, _)| b).collect();
        order.dedup();
        assert_eq!(order[..3], [0, 1, 2]);
        // Every page of the frames and of the SADs is touched (the larger partitions by the later launches).
        let pages = |b: usize| p.buffers[b].bytes.div_ceil(4096) as usize;
        assert_eq!(ft.len(), pages(0) + pages(1) + pages(2));
    }
}
