//! `sad` (Parboil SAD, Zheng's "sad"): H.264 motion estimation, the sums of
//! absolute differences between every 16 x 16 macroblock of a frame and the
//! reference frame at every offset of a +-`search_range` pixel window
//! (`P = (2 search_range + 1)^2` positions, 1089 in Parboil), for the 41
//! partitions of a macroblock. Frames are `width x height` 16-bit pixels,
//! row-major; the SADs are 16-bit, in Parboil's layout (`sad.h`): the SADs of
//! one partition size together, sizes in the order 16x16, 16x8, 8x16, 8x8, 8x4,
//! 4x8, 4x4 (width x height; Parboil's block types 1 to 7), within a size each
//! macroblock's partitions in turn, each one row of `P_pad` positions (`P`
//! rounded up to a multiple of 8: Parboil's `MAX_POS_PADDED`, 1096): element
//! `(mbs * first + mb * count + partition) * P_pad + position` for a size's
//! `first` (0, 1, 3, 5, 9, 17, 25) and `count` (1, 2, 2, 4, 8, 8, 16).
//!
//! Each kernel follows the per-warp order of global loads, waits, compute,
//! stores and barriers of Parboil's CUDA kernels (`benchmarks/sad/src/cuda`:
//! `sad4.cu`, `largerBlocks.cu`, launched by `main.cu`) as NVRTC 12.9 compiles
//! them to PTX (docs/workloads.md, section "Load order": GPGPU-Sim runs the PTX
//! in order and a warp stalls at the first use of an outstanding load, where
//! this model puts its `Op::Wait`), with Parboil's grids and CTA sizes:
//! - `mb_sad_calc` (`sad-mb`): one CTA per 4x4 block of the frame (block x
//!   fastest) of `T = ceil(P / 18)` threads (61: 2 warps, of 32 and 29 lanes);
//!   thread t handles positions `18 t ..` (at most 18, 3 per loop iteration).
//!   Threads 0..16 each load one pixel of the current block (2 B), wait (the
//!   shared-memory store uses it) and all meet (`__syncthreads`). Then per
//!   iteration (positions p, p + 1, p + 2: one row of the window, whose side 33
//!   is a multiple of 3), per row y of 4, the thread fetches the 6 reference
//!   pixels its 3 positions' 4-pixel rows cover, `(bx - range + p % side + 0..6,
//!   by - range + p / side + y)` for the block's top-left pixel (bx, by) and
//!   `side = 2 range + 1`, clamped to the frame as the texture's clamp mode does
//!   (2 B each), each used at once: a load, a wait, then its compute.
//!   24 round trips per 3 positions, 144 per thread, one load in flight. The
//!   SADs go to shared memory; the CTA meets again; then threads 0..32 copy the
//!   block's `P_pad` SADs out, 8 B per thread and trip (`vec8b`) as two 4-byte
//!   stores (the PTX's: the struct's `__align__(8)` does not apply),
//!   ceil(P_pad / 128) trips (9; the last with 18 threads). Below search range 8
//!   (fewer than 16 threads) or 12 (32), where Parboil's kernel would leave
//!   pixels unstaged and SADs uncopied, the threads stride by their count.
//! - `larger_sad_calc_8` (`sad-8`): one CTA of 32 x 4 threads per macroblock,
//!   warp w (`threadIdx.y`) the 8x8 block (w % 2, w / 2). Thread x handles
//!   position pairs `x, x + 32, ..` below `ceil(P / 2)` (a 4-byte load holds 2
//!   positions): per pair, 4 loads of the 4x4 SADs (blocks b + 1, b + 5, b + 4,
//!   b, the PTX's order, for the block's top-left 4x4 block b), one wait (the PTX
//!   waits for two of them before the first store and the other two before the
//!   second: they were issued together), compute, 5 stores (4x8, 4x8, 8x4, 8x4,
//!   8x8). The PTX unrolls the loop 4 times after a remainder loop of
//!   `iterations % 4` trips, which runs first: lane 0's 18 pairs (2 in the
//!   remainder) and the others' 17 (1) leave lane 0 one pair ahead in the
//!   unrolled loop (its addresses are those a 33rd lane would have); the model
//!   issues the trips in that order.
//! - `larger_sad_calc_16` (`sad-16`): one CTA of 32 threads per macroblock, the
//!   same shape: 4 loads of the 8x8 SADs (blocks 1, 3, 2, 0), a wait, compute, 5
//!   stores (8x16, 8x16, 16x8, 16x8, 16x16).
//!
//! Changed on 2026-12-01 (from the PTX): before, `sad-mb` ran one CTA of
//! `workload.threads_per_cta` threads per macroblock, a thread per position
//! (and round of positions), which loaded the macroblock's 16 reference rows at
//! its offset (32 B each) together, waited once, computed and stored its 16 4x4
//! SADs, all before the CTA's final barrier: 16 loads in flight and one round
//! trip per position, where Parboil's threads have one fetch in flight and 8
//! round trips per position and 4x4 block, and store after the barrier, warp 0
//! of each CTA. `sad-8` and `sad-16` ran one thread per (macroblock, position)
//! on 2-byte lanes: 16 loads together, compute, 20 stores; 4 loads, 5 stores.
//! The SADs were unpadded and macroblock-major (`(mb * 41 + partition) * P`).
//! `workload.threads_per_cta` no longer applies: the CTA sizes are Parboil's.
//!
//! Simplified from Parboil: the reference frame is read from global memory
//! (Parboil binds it to a texture: a cudaArray read through the texture cache).
//!
//! Arrays in allocation order: current frame, reference frame, SADs. First
//! touch (lockstep): the current frame (the 4x4 blocks in order), the
//! reference frame around each 4x4 block (blocks in order), the 4x4 SADs, then
//! `sad-8`'s 8x4, 4x8 and 8x8 SADs macroblock by macroblock, then `sad-16`'s.

use super::{check, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};

section! {
    /// Parameters of the Parboil SAD motion estimation.
    pub struct SadParams {
        /// Frame width in pixels (a multiple of 16).
        pub width: u64 = 176,
        /// Frame height in pixels (a multiple of 16).
        pub height: u64 = 144,
        /// Search window half-width in pixels (Parboil: 16). The 4x4 kernel's CTAs have
        /// ceil((2 search_range + 1)^2 / 18) threads (61 at 16, 925 at 64), which
        /// `gpu.max_warps_per_sm` must hold.
        pub search_range: u32 = 16,
        /// Arithmetic, shared-memory and control warp instructions per 16 pixels at one search
        /// position (one 4x4 block's SAD), each taking an issue slot of its SM, beyond the 8
        /// reference fetches, which are loads; 0 = `compute_cycles` of latency after each fetch,
        /// no issue slot. A thread of `mb_sad_calc` fetches 24 pixels per 3 positions (4 rows of
        /// 6), waiting for each; their 3 x row_insts instructions are spread evenly over those
        /// fetches (row_insts / 8 after each). Parboil's `mb_sad_calc` per 16 pixels on Fermi
        /// with ISAD: 5 shared-memory loads, 16 absolute-difference accumulations (48 as subtract,
        /// absolute value, add), 5 texture-coordinate conversions, 1 shared store, 4 loop and
        /// search-offset updates = 31; NVRTC 12.9's PTX: 146 (100 per row of 6 fetches, 38 per 3
        /// positions). Before 2026-12-01, when the model issued one load per 16 pixels, the count
        /// also took the 7 other fetches (38 then = 31 now).
        pub row_insts: u32 = 0,
    }
}

/// One partition size in the SAD layout: its first partition (over the sizes before it) and
/// its partitions per macroblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Size {
    first: u64,
    count: u64,
}

/// Parboil's block types 1 to 7 (width x height here; `sad.h` gives height by width).
const S16X16: Size = Size { first: 0, count: 1 };
const S16X8: Size = Size { first: 1, count: 2 };
const S8X16: Size = Size { first: 3, count: 2 };
const S8X8: Size = Size { first: 5, count: 4 };
const S8X4: Size = Size { first: 9, count: 8 };
const S4X8: Size = Size { first: 17, count: 8 };
const S4X4: Size = Size { first: 25, count: 16 };
/// Partitions per macroblock.
const PARTS: u64 = 41;

/// `POS_PER_THREAD`: search positions per thread of `mb_sad_calc`.
const POS_PER_THREAD: u64 = 18;
/// Positions per iteration of its loop, whose 4-pixel rows share 6 reference pixels.
const POS_PER_ITER: u64 = 3;
const FETCHES_PER_ROW: u64 = 6;
/// Fetches per iteration: 4 rows of 6.
const FETCHES_PER_ITER: u64 = 4 * FETCHES_PER_ROW;
/// Threads of `mb_sad_calc` that stage the current 4x4 block (one pixel each).
const STAGERS: u64 = 16;
/// Threads of `mb_sad_calc` that copy the SADs out, and threads along x of the larger kernels.
const GROUP: u64 = 32;
/// Bytes per copy-out thread and trip (`vec8b`), stored as two 4-byte halves.
const COPY_BYTES: u64 = 8;
/// `larger_sad_calc_*` unroll their loop this many times, after a remainder loop.
const UNROLL: u64 = 4;

impl SadParams {
    pub fn validate(&self, p: &str, cfg: &crate::config::Config) -> Result<(), (String, String)> {
        for (name, v) in [("width", self.width), ("height", self.height)] {
            if v == 0 || v % 16 != 0 || v > 1 << 16 {
                return Err((format!("{p}.{name}"), format!("must be a positive multiple of 16 up to 65536, got {v}")));
            }
        }
        check(p, "search_range", self.search_range as u64, 0, 64)?;
        check(p, "row_insts", self.row_insts as u64, 0, 1000)?;
        // Parboil's CTAs: mb_sad_calc's ceil(P / 18) threads, larger_sad_calc_8's 128. A CTA an SM
        // cannot hold would never be scheduled.
        let (ws, max) = (cfg.gpu.warp_size as u64, cfg.gpu.max_warps_per_sm as u64);
        let warps = self.positions().div_ceil(POS_PER_THREAD).max(128).div_ceil(ws);
        if warps > max {
            return Err((
                format!("{p}.search_range"),
                format!("a CTA of {} warps of {ws} (Parboil's launch at this range) is more than gpu.max_warps_per_sm ({max})", warps),
            ));
        }
        Ok(())
    }

    fn macroblocks(&self) -> u64 {
        self.width / 16 * (self.height / 16)
    }

    fn positions(&self) -> u64 {
        (2 * self.search_range as u64 + 1).pow(2)
    }

    /// `MAX_POS_PADDED`: a partition's row of SADs, positions rounded up to a multiple of 8.
    fn padded(&self) -> u64 {
        self.positions().next_multiple_of(8)
    }

    /// Two frames and the SADs.
    pub fn footprint(&self) -> u128 {
        (4 * self.width * self.height) as u128 + 2 * (self.macroblocks() * PARTS * self.padded()) as u128
    }
}

/// Which of Parboil's three kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Launch {
    /// `mb_sad_calc`: the 4x4 SADs.
    Mb,
    /// `larger_sad_calc_8`: 8x4, 4x8 and 8x8 from 4x4.
    Larger8,
    /// `larger_sad_calc_16`: 16x8, 8x16 and 16x16 from 8x8.
    Larger16,
}

#[derive(Debug, Clone, Copy)]
pub struct SadKernel {
    launch: Launch,
    cur: u64,
    reference: u64,
    sad: u64,
    width: u64,
    height: u64,
    range: u64,
    macroblocks: u64,
    padded: u64,
    threads_per_cta: u64,
    compute: u32,
    row_insts: u32,
}

pub(super) fn build(p: &SadParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let mbs = p.macroblocks();
    let (cur, reference) = (va.alloc(p.width * p.height * 2, page), va.alloc(p.width * p.height * 2, page));
    let sad = va.alloc(mbs * PARTS * p.padded() * 2, page);
    let base = SadKernel {
        launch: Launch::Mb,
        cur: cur.base,
        reference: reference.base,
        sad: sad.base,
        width: p.width,
        height: p.height,
        range: p.search_range as u64,
        macroblocks: mbs,
        padded: p.padded(),
        threads_per_cta: p.positions().div_ceil(POS_PER_THREAD),
        compute: w.compute_cycles,
        row_insts: p.row_insts,
    };
    let spec = |name, launch, ctas: u64, tpc: u64| KernelSpec {
        name,
        threads: ctas * tpc,
        threads_per_cta: tpc as u32,
        gen: KernelGen::Sad(Box::new(SadKernel { launch, threads_per_cta: tpc, ..base })),
    };
    let kernels = vec![
        spec("sad-mb", Launch::Mb, 16 * mbs, base.threads_per_cta),
        spec("sad-8", Launch::Larger8, mbs, 4 * GROUP),
        spec("sad-16", Launch::Larger16, mbs, GROUP),
    ];
    (kernels, cur.bytes + reference.bytes)
}

impl SadKernel {
    pub fn warp(&self, id: WarpId) -> SadWarp {
        let (cta, t0) = (id.first_thread / self.threads_per_cta, id.first_thread % self.threads_per_cta);
        let (phase, trips, peel) = match self.launch {
            // The CTA's first threads have the most iterations: only its last may have fewer.
            Launch::Mb => (Phase::Stage, self.iterations(t0), 0),
            Launch::Larger8 | Launch::Larger16 => {
                let (mut peel, mut passes) = (0, 0);
                for t in t0..t0 + id.lanes as u64 {
                    let n = self.pairs(t % GROUP);
                    (peel, passes) = (peel.max(n % UNROLL), passes.max(n / UNROLL));
                }
                (Phase::Combine, peel + UNROLL * passes, peel)
            }
        };
        SadWarp { k: *self, cta, t0, lanes: id.lanes, phase, trips, peel, trip: 0, sub: 0, left: 0 }
    }

    fn positions(&self) -> u64 {
        (2 * self.range + 1).pow(2)
    }

    /// Address of the SAD at position `pos` of partition `part` (of size `s`) of macroblock `mb`.
    fn sad_at(&self, s: Size, mb: u64, part: u64, pos: u64) -> u64 {
        self.sad + ((self.macroblocks * s.first + mb * s.count + part) * self.padded + pos) * 2
    }

    /// Loop iterations (3 positions each) of thread `t` of `mb_sad_calc`.
    fn iterations(&self, t: u64) -> u64 {
        let first = t * POS_PER_THREAD;
        (first + POS_PER_THREAD).min(self.positions()).saturating_sub(first).div_ceil(POS_PER_ITER)
    }

    /// The 4x4 block of `mb_sad_calc`'s CTA `cta`: its top-left pixel (x, y), its
    /// macroblock and its index in the macroblock (row-major).
    fn block(&self, cta: u64) -> (u64, u64, u64, u64) {
        let blocks_w = self.width / 4;
        let (bx, by) = (cta % blocks_w, cta / blocks_w);
        (4 * bx, 4 * by, by / 4 * (self.width / 16) + bx / 4, by % 4 * 4 + bx % 4)
    }

    /// Address of the reference pixel that thread `t` of `mb_sad_calc`'s CTA `cta` fetches
    /// `f`-th (0..144): iteration f / 24 (positions p = 18 t + 3 (f / 24) ..), row y = f / 6 % 4,
    /// pixel i = f % 6 of the row: `(x0 - range + p % side + i, y0 - range + p / side + y)`
    /// clamped to the frame, for the block's top-left pixel (x0, y0).
    pub fn fetch(&self, cta: u64, t: u64, f: u64) -> u64 {
        let (x0, y0, _, _) = self.block(cta);
        self.fetch_from(x0, y0, t, f)
    }

    fn fetch_from(&self, x0: u64, y0: u64, t: u64, f: u64) -> u64 {
        let side = 2 * self.range + 1;
        let p = t * POS_PER_THREAD + f / FETCHES_PER_ITER * POS_PER_ITER;
        let x = (x0 + p % side + f % FETCHES_PER_ROW) as i64 - self.range as i64;
        let y = (y0 + p / side + f / FETCHES_PER_ROW % 4) as i64 - self.range as i64;
        let (x, y) = (x.clamp(0, self.width as i64 - 1) as u64, y.clamp(0, self.height as i64 - 1) as u64);
        self.reference + (y * self.width + x) * 2
    }

    /// Position pairs (4-byte words) thread `x` of a larger kernel handles: x, x + 32, ..
    /// below ceil(P / 2).
    fn pairs(&self, x: u64) -> u64 {
        self.positions().div_ceil(2).saturating_sub(x).div_ceil(GROUP)
    }

    /// The pair thread `x` of a larger kernel works on in its warp's trip `trip`, if it is
    /// active: the first `peel` trips are the remainder loop, where a thread with n pairs runs
    /// n % 4, then passes of 4 trips (the unrolled loop), where it runs n / 4.
    fn pair(&self, x: u64, trip: u64, peel: u64) -> Option<u64> {
        let n = self.pairs(x);
        let (rest, passes) = (n % UNROLL, n / UNROLL);
        let j = if trip < peel {
            (trip < rest).then_some(trip)?
        } else {
            let (pass, u) = ((trip - peel) / UNROLL, (trip - peel) % UNROLL);
            (pass < passes).then_some(rest + UNROLL * pass + u)?
        };
        Some(x + GROUP * j)
    }

    /// The partition that memory instruction `m` of a larger kernel's trip (0..4 its loads in
    /// the PTX's order, 4..9 its stores) accesses, for warp `w` of the CTA (`threadIdx.y`).
    fn combined(&self, m: u64, w: u64) -> (Size, u64) {
        if self.launch == Launch::Larger16 {
            let parts = [(S8X8, 1), (S8X8, 3), (S8X8, 2), (S8X8, 0), (S8X16, 0), (S8X16, 1), (S16X8, 0), (S16X8, 1), (S16X16, 0)];
            return parts[m as usize];
        }
        // The 8x8 block (tx, ty) and its top-left 4x4 block.
        let (tx, ty) = (w % 2, w / 2);
        let b = 8 * ty + 2 * tx;
        match m {
            0 => (S4X4, b + 1),
            1 => (S4X4, b + 5),
            2 => (S4X4, b + 4),
            3 => (S4X4, b),
            4 => (S4X8, 4 * ty + 2 * tx),
            5 => (S4X8, 4 * ty + 2 * tx + 1),
            6 => (S8X4, 4 * ty + tx),
            7 => (S8X4, 4 * ty + tx + 2),
            _ => (S8X8, 2 * ty + tx),
        }
    }
}

/// Where a warp is in its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `mb_sad_calc`: the current block's load, its wait, the first barrier.
    Stage,
    /// `mb_sad_calc`: the fetches (a load, a wait, compute each), then the second barrier.
    Search,
    /// `mb_sad_calc`: the copy-out's pairs of 4-byte stores.
    Copy,
    /// The larger kernels' trips: 4 loads, a wait, compute, 5 stores.
    Combine,
}

#[derive(Debug, Clone)]
pub struct SadWarp {
    k: SadKernel,
    cta: u64,
    /// The warp's first thread in its CTA.
    t0: u64,
    lanes: u32,
    phase: Phase,
    /// `mb_sad_calc`: its first thread's loop iterations; the larger kernels: the warp's trips.
    trips: u64,
    /// The larger kernels: the warp's remainder-loop trips.
    peel: u64,
    /// The current fetch (`Search`), copy-out trip (`Copy`) or trip (`Combine`).
    trip: u64,
    /// The op within it.
    sub: u32,
    /// Single-slot instructions still to issue after this fetch (`row_insts`).
    left: u64,
}

impl SadWarp {
    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let k = self.k;
        let (t0, end) = (self.t0, self.t0 + self.lanes as u64);
        let compact = super::grid::compact;
        loop {
            match self.phase {
                Phase::Stage => {
                    // Threads 0..16 load pixel t of the block (row t / 4, column t % 4): one trip. With
                    // fewer threads (search ranges below 8) they stride by their count, so all 16 are loaded.
                    let s = k.threads_per_cta.min(STAGERS);
                    let hi = end.min(s).min(STAGERS.saturating_sub(s * self.trip));
                    if self.sub == 0 && hi > t0 {
                        let (x0, y0, _, _) = k.block(self.cta);
                        for (t, slot) in (t0..hi).zip(scratch.iter_mut()) {
                            let q = t + s * self.trip;
                            *slot = k.cur + ((y0 + q / 4) * k.width + x0 + q % 4) * 2;
                        }
                        self.trip += 1;
                        return Op::Mem { kind: MemKind::Load, lanes: compact(scratch, (hi - t0) as usize), bytes: 2 };
                    }
                    // The shared-memory store uses the pixels.
                    if self.sub == 0 && self.trip > 0 {
                        self.sub = 1;
                        return Op::Wait;
                    }
                    (self.phase, self.trip, self.sub) = (Phase::Search, 0, 0);
                    return Op::Barrier;
                }
                Phase::Search => {
                    let f = self.trip;
                    if f == self.trips * FETCHES_PER_ITER {
                        (self.phase, self.trip, self.sub) = (Phase::Copy, 0, 0);
                        return Op::Barrier;
                    }
                    self.sub += 1;
                    match self.sub - 1 {
                        0 => {
                            // The threads with this iteration: a prefix of the warp.
                            let n = (t0..end).take_while(|&t| k.iterations(t) > f / FETCHES_PER_ITER).count();
                            let (x0, y0, _, _) = k.block(self.cta);
                            for (t, slot) in (t0..).zip(scratch.iter_mut().take(n)) {
                                *slot = k.fetch_from(x0, y0, t, f);
                            }
                            return Op::Mem { kind: MemKind::Load, lanes: compact(scratch, n), bytes: 2 };
                        }
                        // The pixel's first use: its absolute differences.
                        1 => {
                            let r = k.row_insts as u64;
                            self.left = r * (f + 1) / 8 - r * f / 8;
                            return Op::Wait;
                        }
                        2 if k.row_insts == 0 => return Op::Compute(k.compute),
                        _ if self.left > 0 => {
                            self.left -= 1;
                            return Op::Compute(1);
                        }
                        _ => (self.trip, self.sub) = (f + 1, 0),
                    }
                }
                Phase::Copy => {
                    // Threads 0..32 copy 8-byte words t, t + 32, .. of the block's row of SADs (with
                    // fewer threads, search ranges below 12, they stride by their count).
                    let g = k.threads_per_cta.min(GROUP);
                    let words = k.padded * 2 / COPY_BYTES;
                    let (lo, hi) = (t0 + g * self.trip, (end.min(g) + g * self.trip).min(words));
                    if hi <= lo {
                        return Op::Exit;
                    }
                    let (_, _, mb, block) = k.block(self.cta);
                    let mut base = k.sad_at(S4X4, mb, block, 0) + COPY_BYTES * lo;
                    if self.sub == 0 {
                        self.sub = 1;
                    } else {
                        (self.trip, self.sub, base) = (self.trip + 1, 0, base + 4);
                    }
                    let lanes = Lanes::Strided { base, stride: COPY_BYTES, n: (hi - lo) as u32 };
                    return Op::Mem { kind: MemKind::Store, lanes, bytes: 4 };
                }
                Phase::Combine => {
                    if self.trip == self.trips {
                        return Op::Exit;
                    }
                    self.sub += 1;
                    return match self.sub - 1 {
                        // The PTX waits for two loads before the first store and the other two
                        // before the second; all four went out together.
                        4 => Op::Wait,
                        5 => Op::Compute(k.compute),
                        sub => {
                            let m = if sub < 4 { sub } else { sub - 2 } as u64;
                            let mut n = 0;
                            for t in t0..end {
                                if let Some(pair) = k.pair(t % GROUP, self.trip, self.peel) {
                                    let (size, part) = k.combined(m, t / GROUP);
                                    scratch[n] = k.sad_at(size, self.cta, part, 2 * pair);
                                    n += 1;
                                }
                            }
                            if m == 8 {
                                (self.trip, self.sub) = (self.trip + 1, 0);
                            }
                            let kind = if m < 4 { MemKind::Load } else { MemKind::Store };
                            Op::Mem { kind, lanes: compact(scratch, n), bytes: 4 }
                        }
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::testutil::*;
    use std::collections::HashMap;

    /// Parboil's search positions (range 16) and its padded row of them (`MAX_POS_PADDED`).
    const P: u64 = 1089;
    const PP: u64 = 1096;

    fn sad_program(width: u64, height: u64, more: &[&str]) -> crate::workload::Program {
        let (w, h) = (format!("workload.sad.width={width}"), format!("workload.sad.height={height}"));
        let mut sets = vec!["workload.kind=sad", w.as_str(), h.as_str()];
        sets.extend(more);
        program(&sets)
    }

    fn kernel(p: &crate::workload::Program, i: usize) -> SadKernel {
        match &kernels(p)[i].gen {
            KernelGen::Sad(k) => **k,
            _ => unreachable!(),
        }
    }

    #[test]
    fn parboil_launches_sizes_and_layout() {
        let p = sad_program(64, 32, &[]);
        let ks = kernels(&p);
        let shape: Vec<(&str, u64, u32)> = ks.iter().map(|k| (k.name, k.threads, k.threads_per_cta)).collect();
        // 8 macroblocks: 128 4x4 blocks of 61 threads; 8 CTAs of 32 x 4 and of 32.
        assert_eq!(shape, [("sad-mb", 128 * 61, 61), ("sad-8", 8 * 128, 128), ("sad-16", 8 * 32, 32)]);
        let k = kernel(&p, 0);
        assert_eq!((k.positions(), k.padded, k.iterations(0), k.iterations(59), k.iterations(60)), (P, PP, 6, 6, 3));
        assert_eq!(p.buffers[2].bytes, 8 * 41 * PP * 2);
        assert_eq!(SadParams { width: 64, height: 32, ..SadParams::default() }.footprint(), 4 * 64 * 32 + 2 * 8 * 41 * PP as u128);
        // Range 2: 25 positions padded to 32, 2 threads (18 positions, then 7 in 3 iterations).
        let k = kernel(&sad_program(64, 32, &["workload.sad.search_range=2"]), 0);
        assert_eq!((k.padded, k.threads_per_cta, k.iterations(0), k.iterations(1)), (32, 2, 6, 3));
    }

    #[test]
    fn mb_sad_calc_stages_fetches_one_pixel_at_a_time_and_copies_out_after_the_barrier() {
        // 64 x 32 frame: 4 x 2 macroblocks, 16 x 8 4x4 blocks (CTAs), 2 warps each.
        let p = sad_program(64, 32, &[]);
        let (cur, refr, sad) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let mut ws = warps(&p, 0);
        assert_eq!(ws.len(), 128 * 2);
        let shape0 = format!("mwb{}b{}", "mwc".repeat(144), "mm".repeat(9));
        let shape1 = format!("b{}b", "mwc".repeat(144));
        assert_eq!(op_shape(&all_ops(&mut ws[0].clone())), shape0);
        assert_eq!(op_shape(&all_ops(&mut ws[1].clone())), shape1);
        // CTA 86 = 4x4 block (6, 5): pixels from (24, 20), macroblock (1, 1) = 5, its block 6 (row 1, column 2).
        let (w0, w1) = (mem_ops(&mut ws[2 * 86]), mem_ops(&mut ws[2 * 86 + 1]));
        assert_eq!(w0[0], (MemKind::Load, (0..16).map(|t| cur + ((20 + t / 4) * 64 + 24 + t % 4) * 2).collect()));
        assert_eq!((w0.len(), w1.len()), (1 + 144 + 18, 144));
        // Warp 1, lane 3 = thread 35: positions 630..648; fetch 58 = iteration 2 (position 636 =
        // row 19, column 9 of the 33 x 33 window), row 1, pixel 4: (24 - 16 + 9 + 4, 20 - 16 + 19 + 1).
        assert_eq!(w1[58].1[3], refr + (24 * 64 + 21) * 2);
        assert_eq!(w1[58].1.len(), 29);
        // Thread 60 (lane 28) has 9 positions: 3 iterations, 72 fetches.
        assert_eq!((w1[71].1.len(), w1[72].1.len()), (29, 28));
        // The copy-out: 274 8-byte words of the block's row of 4x4 SADs, as two 4-byte stores per trip.
        let row = sad + ((25 * 8 + 5 * 16 + 6) * PP) * 2;
        for (j, (kind, a)) in w0[145..].iter().enumerate() {
            let (trip, half) = (j as u64 / 2, j as u64 % 2);
            let n = if trip < 8 { 32 } else { 274 - 256 };
            assert_eq!((*kind, a.clone()), (MemKind::Store, (0..n).map(|l| row + 8 * (l + 32 * trip) + 4 * half).collect()));
        }
        let bytes: Vec<u32> = all_ops(&mut warps(&p, 0)[2 * 86])
            .iter()
            .filter_map(|o| if let Op::Mem { bytes, .. } = o { Some(*bytes) } else { None })
            .collect();
        assert!(bytes[..145].iter().all(|&b| b == 2) && bytes[145..].iter().all(|&b| b == 4));
        // Clamped to the frame: CTA 0's first fetch, and the last CTA's (block (15, 7), pixels from
        // (60, 28)) thread 60, position 1086 = row 32, column 30, row 3, pixel 5: (79, 47) -> (63, 31).
        assert_eq!(mem_ops(&mut ws[0])[1].1[0], refr);
        assert_eq!(mem_ops(&mut ws[255])[71].1[28], refr + (31 * 64 + 63) * 2);
        assert_eq!(kernel(&p, 0).fetch(127, 60, 71), refr + (31 * 64 + 63) * 2);
    }

    #[test]
    fn larger_kernels_load_4_wait_and_store_5_per_trip_in_the_ptx_order() {
        let p = sad_program(64, 32, &[]);
        let sad = p.buffers[2].base;
        // Element `pos` of partition `part` of a size (first, count) of macroblock 5; 8 macroblocks.
        let el = |first: u64, count: u64, part: u64, pos: u64| sad + ((8 * first + 5 * count + part) * PP + pos) * 2;
        let trip = "mmmmwcmmmmm";
        // sad-8: CTA 5, warp 3 = the 8x8 block (1, 1), whose top-left 4x4 block is 10.
        let mut ws = warps(&p, 1);
        assert_eq!(ws.len(), 8 * 4);
        assert_eq!(op_shape(&all_ops(&mut ws[5 * 4 + 3].clone())), trip.repeat(18));
        let ops = mem_ops(&mut ws[5 * 4 + 3]);
        // Lane 0 has 18 pairs (2 in the remainder loop), lane 5 17 (1): trip 0 all lanes (pair = lane),
        // trip 1 lane 0 alone (pair 32), then the unrolled loop: lane 0 at 64, 96, .., lane l at l + 32, l + 64, ...
        let lane5 = |t: usize| ops[9 * t..9 * t + 9].iter().map(|(_, a)| a[5]).collect::<Vec<_>>();
        let want = |pair: u64| {
            let e = 2 * pair;
            vec![
                el(25, 16, 11, e),
                el(25, 16, 15, e),
                el(25, 16, 14, e),
                el(25, 16, 10, e),
                el(17, 8, 6, e),
                el(17, 8, 7, e),
                el(9, 8, 5, e),
                el(9, 8, 7, e),
                el(5, 4, 3, e),
            ]
        };
        assert_eq!(lane5(0), want(5));
        assert_eq!(ops[9].1, vec![want(32)[0]]);
        assert_eq!(lane5(2), want(37));
        assert_eq!(lane5(17), want(5 + 32 * 16));
        assert_eq!((ops[9 * 2].1[0], ops[9 * 17].1[0]), (want(64)[0], want(544)[0]));
        assert!(ops
            .iter()
            .enumerate()
            .all(|(i, (k, a))| (*k == MemKind::Load) == (i % 9 < 4) && a.len() == if i / 9 == 1 { 1 } else { 32 }));
        // sad-16: CTA 5, lane 0's pair 32 (trip 1, alone): the 8x8 SADs 1, 3, 2, 0, then 8x16 0, 1, 16x8 0, 1, 16x16.
        let mut ws = warps(&p, 2);
        assert_eq!(op_shape(&all_ops(&mut ws[5].clone())), trip.repeat(18));
        let ops = mem_ops(&mut ws[5]);
        let got: Vec<Vec<u64>> = ops[9..18].iter().map(|(_, a)| a.clone()).collect();
        let e = 64;
        let parts = [(5, 4, 1), (5, 4, 3), (5, 4, 2), (5, 4, 0), (3, 2, 0), (3, 2, 1), (1, 2, 0), (1, 2, 1), (0, 1, 0)];
        assert_eq!(got, parts.map(|(f, c, q)| vec![el(f, c, q, e)]));
    }

    /// Stores and loads of every kernel, per 2-byte SAD element: (kernel, kind, element address).
    fn sad_accesses(p: &crate::workload::Program) -> Vec<(usize, MemKind, u64)> {
        let sad = &p.buffers[2];
        let mut out = vec![];
        for k in 0..3 {
            for mut w in warps(p, k) {
                let mut s = [0; MAX_LANES];
                loop {
                    match w.next(&mut s) {
                        Op::Exit => break,
                        op @ Op::Mem { kind, bytes, .. } => {
                            for a in addrs(op, &s).into_iter().filter(|&a| a >= sad.base && a < sad.base + sad.bytes) {
                                out.extend((0..bytes as u64 / 2).map(|i| (k, kind, a + 2 * i)));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_sad_is_stored_once_and_read_after_its_store() {
        // 2 x 1 macroblocks at Parboil's range, and range 2 (25 positions padded to 32, 2 threads per 4x4 block).
        for (range, pos, padded) in [("16", P, PP), ("2", 25, 32)] {
            let p = sad_program(32, 16, &[&format!("workload.sad.search_range={range}")]);
            let sad = p.buffers[2].base;
            let acc = sad_accesses(&p);
            let mut stored: HashMap<u64, (usize, u32)> = HashMap::new();
            for &(k, kind, a) in &acc {
                if kind == MemKind::Store {
                    let e = stored.entry(a).or_insert((k, 0));
                    e.1 += 1;
                }
            }
            // The 4x4 SADs, padding included, by sad-mb; the larger ones' first 2 ceil(P / 2) positions
            // (a 4-byte word holds 2) by sad-8 (8x4, 4x8, 8x8) and sad-16 (16x8, 8x16, 16x16).
            let words = 2 * pos.div_ceil(2);
            let mut want = HashMap::new();
            for (first, count, k) in [(0, 1, 2), (1, 2, 2), (3, 2, 2), (5, 4, 1), (9, 8, 1), (17, 8, 1), (25, 16, 0)] {
                for q in 0..2 * count {
                    let row = sad + ((2 * first + q) * padded) * 2;
                    let n = if k == 0 { padded } else { words };
                    want.extend((0..n).map(|i| (row + 2 * i, (k, 1))));
                }
            }
            assert_eq!(stored, want, "range {range}");
            // Every load reads a SAD an earlier kernel stored.
            assert!(acc.iter().all(|&(k, kind, a)| kind == MemKind::Store || stored.get(&a).is_some_and(|&(by, _)| by < k)));
            let loads = |k: usize| acc.iter().filter(|&&(kk, kind, _)| kk == k && kind == MemKind::Load).count() as u64;
            // sad-8 reads each 4x4 SAD it uses once, sad-16 each 8x8 one.
            assert_eq!((loads(0), loads(1), loads(2)), (0, 2 * 16 * words, 2 * 4 * words), "range {range}");
        }
    }

    #[test]
    fn row_insts_spread_over_the_fetches() {
        let p = sad_program(64, 32, &[]);
        let q = sad_program(64, 32, &["workload.sad.row_insts=3"]);
        let (old, new) = (all_ops(&mut warps(&p, 0)[1]), all_ops(&mut warps(&q, 0)[1]));
        // Warp 1 of a CTA: a barrier, 144 fetches (load, wait, then Compute(compute_cycles = 4) or
        // 3 x 144 / 8 = 54 single-slot instructions, 3 per 8 fetches), a barrier.
        assert_eq!(old.len(), 1 + 144 * 3 + 1);
        assert_eq!(old.iter().filter(|o| **o == Op::Compute(4)).count(), 144);
        assert_eq!(new.len(), 1 + 144 * 2 + 54 + 1);
        assert_eq!(new.iter().filter(|o| **o == Op::Compute(1)).count(), 54);
        let mem = |v: &[Op]| v.iter().filter(|o| !matches!(o, Op::Compute(_))).copied().collect::<Vec<_>>();
        assert_eq!(mem(&old), mem(&new));
        // Fetches 0 and 1 have none after them, fetch 2 one (floor(3 * 3 / 8) = 1).
        assert_eq!(op_shape(&new[..12]), "bmwmwmwcmwmw");
        // 38 per 16 pixels: 3 x 38 per iteration of 24 fetches.
        let r = sad_program(64, 32, &["workload.sad.row_insts=38"]);
        let ops = all_ops(&mut warps(&r, 0)[1]);
        let loads = ops.iter().enumerate().filter(|(_, o)| matches!(o, Op::Mem { .. })).map(|(i, _)| i).collect::<Vec<_>>();
        assert_eq!(ops[..loads[24]].iter().filter(|o| **o == Op::Compute(1)).count(), 3 * 38);
        // The larger kernels do not count them.
        for k in 1..3 {
            assert_eq!(all_ops(&mut warps(&p, k)[0]), all_ops(&mut warps(&r, k)[0]));
        }
    }

    #[test]
    fn a_64_lane_wavefront_covers_two_warps_of_32() {
        let p = sad_program(64, 32, &[]);
        let ops = |k: &SadKernel, first: u64, lanes: u32| {
            let mut w = k.warp(WarpId { global: 0, first_thread: first, lanes });
            let mut s = [0; MAX_LANES];
            let mut out = vec![];
            loop {
                match w.next(&mut s) {
                    Op::Exit => return out,
                    op => out.push((op_shape(&[op]), addrs(op, &s))),
                }
            }
        };
        // sad-mb's CTA 3 as one wavefront of 61 lanes: the fetches of both warps at once, the
        // stage load and copy-out of the first.
        let mb = kernel(&p, 0);
        let (one, w0, w1) = (ops(&mb, 3 * 61, 61), ops(&mb, 3 * 61, 32), ops(&mb, 3 * 61 + 32, 29));
        let mems = |v: &[(String, Vec<u64>)]| v.iter().filter(|(s, _)| s == "m").map(|(_, a)| a.clone()).collect::<Vec<_>>();
        let (one, w0, w1) = (mems(&one), mems(&w0), mems(&w1));
        assert_eq!(one.len(), w0.len());
        assert_eq!(one[0], w0[0]);
        assert!((0..144).all(|f| one[1 + f] == [w0[1 + f].clone(), w1[f].clone()].concat()));
        assert_eq!(one[145..], w0[145..]);
        // sad-8's CTA 2, warps 2 and 3 (the bottom 8x8 blocks) as one wavefront.
        let k8 = kernel(&p, 1);
        let (one, a, b) = (ops(&k8, 2 * 128 + 64, 64), ops(&k8, 2 * 128 + 64, 32), ops(&k8, 2 * 128 + 96, 32));
        assert_eq!(one.len(), a.len());
        assert!(one.iter().zip(a.iter().zip(&b)).all(|(o, (x, y))| o.0 == x.0 && o.1 == [x.1.clone(), y.1.clone()].concat()));
    }

    #[test]
    fn first_touch_is_the_current_frame_the_reference_then_the_sads_by_size() {
        // 256 x 32 pixels: 512 B rows, each frame 4 pages; 16 x 2 macroblocks.
        let p = sad_program(256, 32, &[]);
        let ft = first_touch(&p);
        let pages = |b: usize| p.buffers[b].bytes.div_ceil(4096);
        // Every page of the frames and of the SADs is touched (the larger partitions by the later launches).
        assert_eq!(ft.len() as u64, pages(0) + pages(1) + pages(2));
        let (cur, rest) = ft.split_at(pages(0) as usize);
        assert_eq!(cur, (0..pages(0)).map(|i| (0, i)).collect::<Vec<_>>());
        let (refr, sads) = rest.split_at(pages(1) as usize);
        assert!(refr.iter().all(|&(b, _)| b == 1) && sads.iter().all(|&(b, _)| b == 2));
        // sad-mb's copy-out touches the 4x4 SADs' pages (the last 16 of 41 partitions) first, then
        // sad-8 the 8x4, 4x8 and 8x8 SADs' and sad-16 the rest.
        let page_of = |first: u64| (32 * first * PP * 2) >> 12;
        let n4x4 = pages(2) - page_of(25);
        assert!(sads[..n4x4 as usize].iter().all(|&(_, q)| q >= page_of(25)));
        let (n4x4, n8) = (n4x4 as usize, (page_of(25) - page_of(5)) as usize);
        assert!(sads[n4x4..n4x4 + n8].iter().all(|&(_, q)| (page_of(5)..page_of(25)).contains(&q)));
        assert!(sads[n4x4 + n8..].iter().all(|&(_, q)| q < page_of(5)));
        // sad-8 goes macroblock by macroblock: macroblock 0's 4x8 SADs first (its first store).
        assert_eq!(sads[n4x4], (2, page_of(17)));
    }

    #[test]
    fn a_cta_an_sm_cannot_hold_is_refused() {
        use crate::config::{resolve, Source};
        let run = |sets: &[&str]| resolve(&[] as &[Source], &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        // Range 64: 129^2 = 16641 positions, mb_sad_calc's CTA of 925 threads (29 warps of 32), the largest.
        let wide = ["workload.kind=sad", "workload.sad.search_range=64", "workload.threads_per_cta=32", "gpu.max_warps_per_sm=28"];
        let e = run(&wide).unwrap_err().to_string();
        assert!(e.contains("workload.sad.search_range") && e.contains("29 warps"), "{e}");
        assert!(
            run(&["workload.kind=sad", "workload.sad.search_range=64", "workload.threads_per_cta=32", "gpu.max_warps_per_sm=29"]).is_ok()
        );
        // Range 16: larger_sad_calc_8's 128 threads are the largest CTA (4 warps).
        assert!(run(&["workload.kind=sad", "workload.threads_per_cta=32", "gpu.max_warps_per_sm=3"]).is_err());
        assert!(run(&["workload.kind=sad", "workload.threads_per_cta=32", "gpu.max_warps_per_sm=4"]).is_ok());
    }

    #[test]
    fn the_host_copies_the_current_and_reference_frames() {
        // 32 x 16 pixels of 2 bytes = 1024 bytes per frame; the SAD arrays are outputs.
        let p = program(&["workload.kind=sad", "workload.sad.width=32", "workload.sad.height=16"]);
        assert_eq!(p.host.input_bytes, Some(2 * 1024));
    }
}
