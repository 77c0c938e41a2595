//! Workloads: a host program (allocate, copy, launch, synchronize) and
//! kernels whose warps produce their instruction streams lazily.
//!
//! How it works: a generator (one file each) turns its config section into a
//! [`Program`]: the allocations, host operations and, per kernel, a
//! [`KernelGen`] that creates one [`WarpStream`] per warp on demand. A warp
//! stream yields [`Op`]s one at a time; lane addresses of divergent accesses
//! go into a scratch buffer owned by the caller, so nothing allocates per op.
//! Random choices are hashes of the run's seed and the thread or lookup they
//! are for, so a warp's addresses do not depend on scheduling.
//!
//! Element-wise kernels share one engine (`grid.rs`); a generator may launch
//! several kernels (iterations, pyramid steps). Each generator declares its
//! footprint (`WorkloadConfig::footprint`, checked before building) and
//! documents its first-touch order; docs/workloads.md collects them.

pub mod accelsim;
mod aes;
mod allen;
mod backprop;
mod bfs;
mod bitonic;
mod blas_gemm;
mod btree;
mod comd;
mod fault_burst;
mod fft;
mod fir;
mod gather;
mod gemm;
mod grid;
mod hotspot;
mod im2col;
mod kmeans;
mod miniamr;
mod minife;
mod nw;
mod pagerank;
mod parboil_sgemm;
mod parboil_stencil;
mod pathfinder;
mod pingpong;
mod pointer_chase;
mod regular;
mod sad;
mod shootdown;
mod simple_conv;
mod spmv;
mod srad;
mod stencil;
mod stream;
mod stride;
mod strided;
pub mod trace;
pub mod tracefmt;
mod transpose;
mod vecadd;
pub mod warptrace;
mod xsbench;

pub use accelsim::AccelsimParams;
pub use aes::AesParams;
pub use allen::{CufftParams, CusparseParams, HpgmgParams, TealeafParams};
pub use backprop::BackpropParams;
pub use bfs::BfsParams;
pub use bitonic::BitonicParams;
pub use blas_gemm::BlasGemmParams;
pub use btree::BtreeParams;
pub use comd::ComdParams;
pub use fault_burst::FaultBurstParams;
pub use fft::FftParams;
pub use fir::FirParams;
pub use gather::GatherParams;
pub use gemm::GemmParams;
pub use hotspot::HotspotParams;
pub use im2col::Im2colParams;
pub use kmeans::KmeansParams;
pub use miniamr::MiniamrParams;
pub use minife::MinifeParams;
pub use nw::NwParams;
pub use pagerank::PagerankParams;
pub use parboil_sgemm::ParboilSgemmParams;
pub use parboil_stencil::ParboilStencilParams;
pub use pathfinder::PathfinderParams;
pub use pingpong::PingPongParams;
pub use pointer_chase::PointerChaseParams;
pub use regular::RegularParams;
pub use sad::SadParams;
pub use shootdown::ShootdownParams;
pub use simple_conv::SimpleConvParams;
pub use spmv::SpmvParams;
pub use srad::SradParams;
pub use stencil::StencilParams;
pub use stream::StreamParams;
pub use stride::StrideParams;
pub use strided::StridedParams;
pub use trace::TraceParams;
pub use transpose::TransposeParams;
pub use vecadd::VecaddParams;
pub use warptrace::WarpTraceParams;
pub use xsbench::XsbenchParams;

use crate::config::{ByteSize, Config};
use crate::sim::mix64;
use serde::{Deserialize, Serialize};

/// Largest warp the model supports (AMD wavefront).
pub const MAX_LANES: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemKind {
    Load,
    Store,
    /// A prefetch instruction (prefetch.global.L2): translated and brought to the L2; nothing waits for it.
    Prefetch,
}

/// The lanes of one memory instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lanes {
    /// Lane `i` accesses `base + i * stride`, for `n` active lanes.
    Strided { base: u64, stride: u64, n: u32 },
    /// The first `n` entries of the scratch buffer hold the lane addresses.
    Explicit { n: u32 },
}

/// One warp instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Busy for this many core cycles.
    Compute(u32),
    /// A memory access of `bytes` per lane.
    Mem { kind: MemKind, lanes: Lanes, bytes: u32 },
    /// Wait until every load issued so far has returned (scoreboard).
    Wait,
    /// CTA-wide barrier (`__syncthreads`, `bar.sync`, `s_barrier`): the warp goes on once every
    /// warp of its CTA still running has reached it (`gpu.cta_barriers`).
    Barrier,
    /// The warp is done.
    Exit,
}

/// An allocation the host program makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buffer {
    pub base: u64,
    pub bytes: u64,
    pub page_bytes: u64,
    /// Managed (unified) memory: pages migrate to the GPU on first touch (far faults).
    pub managed: bool,
}

impl Buffer {
    /// The 4 KiB pages it covers, [first, end): the granule of managed-memory state.
    pub fn small_pages(&self) -> (u64, u64) {
        (self.base >> 12, (self.base + self.bytes).div_ceil(4096))
    }
}

/// Hands out virtual addresses: each allocation starts on a boundary of
/// max(its page size, 2 MiB), as the CUDA and HSA allocators do for large allocations.
#[derive(Debug, Clone)]
pub struct VaAllocator {
    next: u64,
    /// New allocations are managed memory (`workload.managed`).
    pub managed: bool,
    pub buffers: Vec<Buffer>,
}

/// Start of the simulated heap (1 TiB), inside a 48-bit canonical address space.
pub const VA_BASE: u64 = 1 << 40;

impl Default for VaAllocator {
    fn default() -> Self {
        VaAllocator { next: VA_BASE, managed: false, buffers: vec![] }
    }
}

/// The page size of a managed allocation: managed memory is tracked in 4 KiB pages (the
/// driver's unit). The driver maps a fully resident 64 KiB or 2 MiB region with a bigger PTE:
/// `translation.managed_large_ptes` (the translator picks the size from residency); without it
/// the TLBs see 4 KiB pages. Generators, Accel-Sim conversion and managed replays all use it.
pub const MANAGED_PAGE_BYTES: u64 = 4096;

impl VaAllocator {
    pub fn alloc(&mut self, bytes: u64, page_bytes: u64) -> Buffer {
        let page_bytes = if self.managed { MANAGED_PAGE_BYTES } else { page_bytes };
        let align = page_bytes.max(2 << 20);
        let base = self.next.div_ceil(align) * align;
        let bytes = bytes.max(1);
        self.next = base + bytes.div_ceil(page_bytes) * page_bytes;
        let b = Buffer { base, bytes, page_bytes, managed: self.managed };
        self.buffers.push(b);
        b
    }
}

/// A kernel launch: grid shape and the generator of its warps.
#[derive(Debug, Clone)]
pub struct KernelSpec {
    pub name: &'static str,
    /// Total threads (work-items); the last CTA may be partial.
    pub threads: u64,
    pub threads_per_cta: u32,
    pub gen: KernelGen,
}

impl KernelSpec {
    pub fn ctas(&self) -> u64 {
        self.threads.div_ceil(self.threads_per_cta as u64)
    }
}

/// Host operations, run in order.
#[derive(Debug, Clone)]
pub enum HostOp {
    /// Copy `bytes` from host to device over the link (explicit-copy programs).
    MemcpyH2D { bytes: u64 },
    /// Copy `bytes` from device to host over the link (an explicit-copy program's results).
    MemcpyD2H { bytes: u64 },
    /// Launch a kernel and wait for it (launch + synchronize).
    Launch(KernelSpec),
    /// Replay a memory-access trace, each access at its recorded time, and wait for it.
    Replay { path: String, gpu: u32, gap_ns: f64 },
    /// The host shoots down GPU translations `count` times, serially: page `i mod pages` of the
    /// array at `va` (pages of `page_bytes`) each time, or every translation when `all`.
    Shootdown { va: u64, page_bytes: u64, pages: u64, count: u64, all: bool },
    /// The host touches `bytes` of a buffer from `offset` (stores if `write`): managed pages on the GPU fault back.
    HostAccess { buffer: usize, offset: u64, bytes: u64, write: bool },
    /// The host computes for this many ns (no memory traffic modelled).
    HostCompute { ns: f64 },
    /// cudaMemPrefetchAsync of a managed buffer to the GPU; the next kernel waits for it (stream order).
    PrefetchAsync { buffer: usize },
}

/// A whole workload: its allocations, how the host set them up, and its host operations.
#[derive(Debug, Clone)]
pub struct Program {
    pub buffers: Vec<Buffer>,
    pub ops: Vec<HostOp>,
    pub host: HostSetup,
}

/// What the host program did before its operations, besides allocating: recorded in a warp trace
/// with the allocations and operations (the header's `host_init`, `host_threads`, `input_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSetup {
    /// The host initialised the managed allocations (`workload.host_init`): they start CPU-resident
    /// and CPU-mapped; false: first touched by the GPU.
    pub init: bool,
    /// Host threads that initialised them (`workload.host_threads`).
    pub threads: u32,
    /// Bytes of the input arrays, the ones `workload.memcpy_inputs` copies (the other allocations are
    /// outputs), when known: a replay adds the explicit copies from it.
    pub input_bytes: Option<u64>,
}

impl HostSetup {
    /// The workload config's host settings.
    pub fn of(w: &WorkloadConfig, input_bytes: Option<u64>) -> HostSetup {
        HostSetup { init: w.host_init, threads: w.host_threads, input_bytes }
    }
}

/// The per-kernel part of a generator; creates warp streams.
#[derive(Debug, Clone)]
pub enum KernelGen {
    Stride(stride::StrideKernel),
    Regular(regular::RegularKernel),
    Stream(stream::StreamKernel),
    Gather(gather::GatherKernel),
    WarpTrace(Box<warptrace::WarpTraceKernel>),
    Vecadd(vecadd::VecaddKernel),
    Grid(grid::GridKernel),
    PointerChase(pointer_chase::PointerChaseKernel),
    Gemm(gemm::GemmKernel),
    ParboilSgemm(parboil_sgemm::ParboilSgemmKernel),
    ParboilStencil(parboil_stencil::ParboilStencilKernel),
    BlasGemm(blas_gemm::BlasGemmKernel),
    Nw(nw::NwKernel),
    Spmv(Box<spmv::SpmvKernel>),
    Xsbench(Box<xsbench::XsbenchKernel>),
    Btree(Box<btree::BtreeKernel>),
    FaultBurst(fault_burst::FaultBurstKernel),
    Minife(Box<minife::MinifeKernel>),
    Comd(Box<comd::ComdKernel>),
    Miniamr(Box<miniamr::MiniamrKernel>),
    Bfs(Box<bfs::BfsKernel>),
    Sad(Box<sad::SadKernel>),
    Aes(Box<aes::AesKernel>),
    Transpose(transpose::TransposeKernel),
    Im2col(Box<im2col::Im2colKernel>),
}

/// Identity of one warp within a kernel launch.
#[derive(Debug, Clone, Copy)]
pub struct WarpId {
    /// Index of the warp in the whole grid.
    pub global: u64,
    /// First thread (global id) of the warp.
    pub first_thread: u64,
    /// Active threads (lanes) of the warp.
    pub lanes: u32,
}

impl KernelGen {
    /// CTAs of this kernel an SM may hold, beyond the GPU's own limits (a kernel's register-bound occupancy).
    pub fn cta_limit(&self) -> Option<u32> {
        match self {
            KernelGen::BlasGemm(k) => Some(k.cta_limit()),
            _ => None,
        }
    }

    pub fn warp(&self, id: WarpId) -> WarpStream {
        match self {
            KernelGen::Stride(k) => WarpStream::Stride(k.warp(id)),
            KernelGen::Regular(k) => WarpStream::Regular(k.warp(id)),
            KernelGen::Stream(k) => WarpStream::Stream(k.warp(id)),
            KernelGen::Gather(k) => WarpStream::Gather(Box::new(k.warp(id))),
            KernelGen::WarpTrace(k) => WarpStream::WarpTrace(k.warp(id)),
            KernelGen::Vecadd(k) => WarpStream::Vecadd(k.warp(id)),
            KernelGen::Grid(k) => WarpStream::Grid(k.warp(id)),
            KernelGen::PointerChase(k) => WarpStream::PointerChase(k.warp(id)),
            KernelGen::Gemm(k) => WarpStream::Gemm(Box::new(k.warp(id))),
            KernelGen::ParboilSgemm(k) => WarpStream::ParboilSgemm(Box::new(k.warp(id))),
            KernelGen::ParboilStencil(k) => WarpStream::ParboilStencil(Box::new(k.warp(id))),
            KernelGen::BlasGemm(k) => WarpStream::BlasGemm(Box::new(k.warp(id))),
            KernelGen::Nw(k) => WarpStream::Nw(Box::new(k.warp(id))),
            KernelGen::Spmv(k) => WarpStream::Spmv(Box::new(k.warp(id))),
            KernelGen::Xsbench(k) => WarpStream::Xsbench(Box::new(k.warp(id))),
            KernelGen::Btree(k) => WarpStream::Btree(Box::new(k.warp(id))),
            KernelGen::FaultBurst(k) => WarpStream::FaultBurst(k.warp(id)),
            KernelGen::Minife(k) => WarpStream::Minife(Box::new(k.warp(id))),
            KernelGen::Comd(k) => WarpStream::Comd(Box::new(k.warp(id))),
            KernelGen::Miniamr(k) => WarpStream::Miniamr(Box::new(k.warp(id))),
            KernelGen::Bfs(k) => WarpStream::Bfs(Box::new(k.warp(id))),
            KernelGen::Sad(k) => WarpStream::Sad(Box::new(k.warp(id))),
            KernelGen::Aes(k) => WarpStream::Aes(Box::new(k.warp(id))),
            KernelGen::Transpose(k) => WarpStream::Transpose(Box::new(k.warp(id))),
            KernelGen::Im2col(k) => WarpStream::Im2col(Box::new(k.warp(id))),
        }
    }
}

/// The instruction stream of one warp.
#[derive(Debug, Clone)]
pub enum WarpStream {
    Stride(stride::StrideWarp),
    Regular(regular::RegularWarp),
    Stream(stream::StreamWarp),
    Gather(Box<gather::GatherWarp>),
    WarpTrace(warptrace::WarpTraceWarp),
    Vecadd(vecadd::VecaddWarp),
    Grid(grid::GridWarp),
    PointerChase(pointer_chase::PointerChaseWarp),
    Gemm(Box<gemm::GemmWarp>),
    ParboilSgemm(Box<parboil_sgemm::ParboilSgemmWarp>),
    ParboilStencil(Box<parboil_stencil::ParboilStencilWarp>),
    BlasGemm(Box<blas_gemm::BlasGemmWarp>),
    Nw(Box<nw::NwWarp>),
    Spmv(Box<spmv::SpmvWarp>),
    Xsbench(Box<xsbench::XsbenchWarp>),
    Btree(Box<btree::BtreeWarp>),
    FaultBurst(fault_burst::FaultBurstWarp),
    Minife(Box<minife::MinifeWarp>),
    Comd(Box<comd::ComdWarp>),
    Miniamr(Box<miniamr::MiniamrWarp>),
    Bfs(Box<bfs::BfsWarp>),
    Sad(Box<sad::SadWarp>),
    Aes(Box<aes::AesWarp>),
    Transpose(Box<transpose::TransposeWarp>),
    Im2col(Box<im2col::Im2colWarp>),
}

impl WarpStream {
    /// The warp stops issuing until its next event: a replayed stream prepares its next
    /// visit (no effect on the ops it yields).
    #[inline(always)]
    pub fn yielding(&mut self) {
        if let WarpStream::WarpTrace(w) = self {
            w.yielding();
        }
    }

    /// The next instruction; divergent lane addresses go to `scratch`.
    #[inline]
    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        match self {
            WarpStream::Stride(w) => w.next(),
            WarpStream::Regular(w) => w.next(scratch),
            WarpStream::Stream(w) => w.next(),
            WarpStream::Gather(w) => w.next(scratch),
            WarpStream::WarpTrace(w) => w.next(scratch),
            WarpStream::Vecadd(w) => w.next(),
            WarpStream::Grid(w) => w.next(scratch),
            WarpStream::PointerChase(w) => w.next(scratch),
            WarpStream::Gemm(w) => w.next(scratch),
            WarpStream::ParboilSgemm(w) => w.next(scratch),
            WarpStream::ParboilStencil(w) => w.next(scratch),
            WarpStream::BlasGemm(w) => w.next(scratch),
            WarpStream::Nw(w) => w.next(),
            WarpStream::Spmv(w) => w.next(scratch),
            WarpStream::Xsbench(w) => w.next(scratch),
            WarpStream::Btree(w) => w.next(),
            WarpStream::FaultBurst(w) => w.next(),
            WarpStream::Minife(w) => w.next(scratch),
            WarpStream::Comd(w) => w.next(scratch),
            WarpStream::Miniamr(w) => w.next(scratch),
            WarpStream::Bfs(w) => w.next(scratch),
            WarpStream::Sad(w) => w.next(scratch),
            WarpStream::Aes(w) => w.next(scratch),
            WarpStream::Transpose(w) => w.next(scratch),
            WarpStream::Im2col(w) => w.next(scratch),
        }
    }
}

/// Which generator a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    #[default]
    Stride,
    Concurrency,
    Regular,
    Random,
    Stream,
    Gather,
    VecaddProbe,
    Trace,
    WarpTrace,
    Accelsim,
    PointerChase,
    Strided,
    TiledGemm,
    BlasGemm,
    ParboilSgemm,
    Stencil2d,
    Stencil3d,
    ParboilStencil,
    Hotspot,
    Pathfinder,
    Nw,
    Srad,
    Backprop,
    Spmv,
    Btree,
    Xsbench,
    FaultBurst,
    Minife,
    Comd,
    Miniamr,
    Bfs,
    Sad,
    Shootdown,
    Fir,
    Kmeans,
    Pagerank,
    Aes,
    MatrixTranspose,
    BitonicSort,
    Fft,
    SimpleConvolution,
    Im2col,
    Conv2d,
    PingPong,
    Cufft,
    Tealeaf,
    Hpgmg,
    Cusparse,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 48] = [
        WorkloadKind::Stride,
        WorkloadKind::Concurrency,
        WorkloadKind::Regular,
        WorkloadKind::Random,
        WorkloadKind::Stream,
        WorkloadKind::Gather,
        WorkloadKind::VecaddProbe,
        WorkloadKind::Trace,
        WorkloadKind::WarpTrace,
        WorkloadKind::Accelsim,
        WorkloadKind::PointerChase,
        WorkloadKind::Strided,
        WorkloadKind::TiledGemm,
        WorkloadKind::BlasGemm,
        WorkloadKind::ParboilSgemm,
        WorkloadKind::Stencil2d,
        WorkloadKind::Stencil3d,
        WorkloadKind::ParboilStencil,
        WorkloadKind::Hotspot,
        WorkloadKind::Pathfinder,
        WorkloadKind::Nw,
        WorkloadKind::Srad,
        WorkloadKind::Backprop,
        WorkloadKind::Spmv,
        WorkloadKind::Btree,
        WorkloadKind::Xsbench,
        WorkloadKind::FaultBurst,
        WorkloadKind::Minife,
        WorkloadKind::Comd,
        WorkloadKind::Miniamr,
        WorkloadKind::Bfs,
        WorkloadKind::Sad,
        WorkloadKind::Shootdown,
        WorkloadKind::Fir,
        WorkloadKind::Kmeans,
        WorkloadKind::Pagerank,
        WorkloadKind::Aes,
        WorkloadKind::MatrixTranspose,
        WorkloadKind::BitonicSort,
        WorkloadKind::Fft,
        WorkloadKind::SimpleConvolution,
        WorkloadKind::Im2col,
        WorkloadKind::Conv2d,
        WorkloadKind::PingPong,
        WorkloadKind::Cufft,
        WorkloadKind::Tealeaf,
        WorkloadKind::Hpgmg,
        WorkloadKind::Cusparse,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Stride => "stride",
            WorkloadKind::Concurrency => "concurrency",
            WorkloadKind::Regular => "regular",
            WorkloadKind::Random => "random",
            WorkloadKind::Stream => "stream",
            WorkloadKind::Gather => "gather",
            WorkloadKind::VecaddProbe => "vecadd-probe",
            WorkloadKind::Trace => "trace",
            WorkloadKind::WarpTrace => "warp-trace",
            WorkloadKind::Accelsim => "accelsim",
            WorkloadKind::PointerChase => "pointer-chase",
            WorkloadKind::Strided => "strided",
            WorkloadKind::TiledGemm => "tiled-gemm",
            WorkloadKind::BlasGemm => "blas-gemm",
            WorkloadKind::ParboilSgemm => "parboil-sgemm",
            WorkloadKind::Stencil2d => "stencil2d",
            WorkloadKind::Stencil3d => "stencil3d",
            WorkloadKind::ParboilStencil => "parboil-stencil",
            WorkloadKind::Hotspot => "hotspot",
            WorkloadKind::Pathfinder => "pathfinder",
            WorkloadKind::Nw => "nw",
            WorkloadKind::Srad => "srad",
            WorkloadKind::Backprop => "backprop",
            WorkloadKind::Spmv => "spmv",
            WorkloadKind::Btree => "btree",
            WorkloadKind::Xsbench => "xsbench",
            WorkloadKind::FaultBurst => "fault-burst",
            WorkloadKind::Minife => "minife",
            WorkloadKind::Comd => "comd",
            WorkloadKind::Miniamr => "miniamr",
            WorkloadKind::Bfs => "bfs",
            WorkloadKind::Sad => "sad",
            WorkloadKind::Shootdown => "shootdown",
            WorkloadKind::Fir => "fir",
            WorkloadKind::Kmeans => "kmeans",
            WorkloadKind::Pagerank => "pagerank",
            WorkloadKind::Aes => "aes",
            WorkloadKind::MatrixTranspose => "matrix-transpose",
            WorkloadKind::BitonicSort => "bitonic-sort",
            WorkloadKind::Fft => "fft",
            WorkloadKind::SimpleConvolution => "simple-convolution",
            WorkloadKind::Im2col => "im2col",
            WorkloadKind::Conv2d => "conv2d",
            WorkloadKind::PingPong => "ping-pong",
            WorkloadKind::Cufft => "cufft",
            WorkloadKind::Tealeaf => "tealeaf",
            WorkloadKind::Hpgmg => "hpgmg",
            WorkloadKind::Cusparse => "cusparse",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            WorkloadKind::Stride => "N work-items, each doing K dependent accesses S bytes apart (load, wait, compute) in its own region: the TLB-latency microbenchmark of svm-apu §IV.A (Table 3).",
            WorkloadKind::Concurrency => "Like stride with a page-sized stride: 1-64 work-items, each on its own pages, so every access of every work-item is a separate TLB miss; the walk-concurrency microbenchmark of svm-apu Fig. 2.",
            WorkloadKind::Regular => "Each thread reads then writes one element of its own page, page = global thread id: regular, fully divergent across pages within a warp (uvm-driver 'regular').",
            WorkloadKind::Random => "Each thread reads then writes one element of a page chosen by a seeded random permutation of thread ids (each page once): uvm-driver 'random'.",
            WorkloadKind::Stream => "STREAM triad a[i] = b[i] + s*c[i] over three arrays with a grid-stride loop: coalesced, streaming, TLB-hit-heavy.",
            WorkloadKind::Gather => "Lookups into a large sorted table by binary search (XSBench / B+tree-like): each lookup reads its key coalesced, then makes dependent probes; keys unsorted (random) or sorted (adjacent threads search nearby keys).",
            WorkloadKind::VecaddProbe => "Seed uvm-driver Listing 3.1: each thread adds the first float of a page of a and b into c, three pages per thread (LDG, LDG, wait, FADD, STG); with prefetch, prefetch.global.L2 of every page first. Use with workload.managed = true to see how faults form batches.",
            WorkloadKind::Trace => "Replay of a memory-access trace (CSV time_ns,gpu,cu,wavefront,kind,vaddr,size, plain, gzip or zstd; e.g. shared/traces/mgpusim): each access issues at its recorded time on its recorded CU; addresses map one-to-one to physical memory with translation.page_size pages.",
            WorkloadKind::WarpTrace => "Replay of a binary warp trace (.uvmt, from `uvmsim trace record` or `trace convert`): the recorded allocations, copies and kernel launches, each warp issuing its recorded instruction stream through the GPU model; a generator's recording replays with identical metrics.",
            WorkloadKind::Accelsim => "Replay of an Accel-Sim/NVBit trace (kernelslist.g + kernel-*.traceg): global loads/stores/atomics become warp memory instructions, other instructions compute, uses of a load's destination register waits; touched address ranges are allocated with translation.page_size pages (managed with workload.managed).",
            WorkloadKind::PointerChase => "Dependent loads around one seeded random cycle through all nodes (node P(i) points to P(i+1)); each thread starts at its own point of the cycle: fully divergent, latency-bound, one page per lane per hop.",
            WorkloadKind::Strided => "Thread t loads element t*stride_elements, repeatedly: the stride sets how many lines and pages a warp instruction touches (1 = one line, >= page/element = one page per lane).",
            WorkloadKind::ParboilSgemm => "Parboil's sgemm (mysgemmNT, the register-tiled kernel of seed paged-memory's 'Parboil sgemm'): C = A*B, A and C column-major, B given transposed; CTAs of 128 threads, each owning a row of C and 16 columns; per step of 8 along k a CTA loads 8 rows of B into shared memory and meets at a barrier, then each warp reads 8 columns of A one at a time (each used at once), and meets again; then each thread loads and stores its 16 elements of C. Default: Parboil's medium dataset (m 1024, k 992, n 1056).",
            WorkloadKind::TiledGemm => "C = A*B with shared-memory tiles (CUDA-samples sgemm): per k-step each tile x tile CTA loads a tile of A's rows, waits, loads one of B's columns, waits (coalesced row segments; the PTX's order), syncs and computes; then stores its tile of C.",
            WorkloadKind::BlasGemm => "C = A*B column-major with a library SGEMM's tiling (seed uvm-driver's sgemm is cuBLAS; CUTLASS's default SIMT configuration, 128 x 128 x 8 CTA tiles of 8 warps, double-buffered, one CTA barrier per k-step): per k-step a CTA reads 8 columns of A and 128 columns of B, so concurrent CTAs fault on many distinct pages.",
            WorkloadKind::Stencil2d => "5-point Jacobi stencil over a row-major 2D grid, grid-stride: each element loads itself and its 4 neighbours (clamped at borders), computes, stores to the other grid; one launch per iteration, ping-pong grids.",
            WorkloadKind::Stencil3d => "7-point Jacobi stencil over a 3D grid (x fastest), grid-stride: each element loads itself and its 6 neighbours (the +-z ones a plane away), computes, stores to the other grid, then meets its CTA `barriers` times (Parboil's: 2 per plane); one launch per iteration, ping-pong grids.",
            WorkloadKind::ParboilStencil => "Parboil's 3D stencil (block2D_hybrid_coarsen_x, the zheng suite's stencil): 7-point Jacobi on float grids, CTAs of 32 x 4 threads over 64 x 4 columns (each thread two columns, 32 apart), walking z; per plane each warp (one row) loads the plane above, its halo rows and lane 0's / lane 31's x halo (the rest is in shared memory), waits, computes and stores, per column, then meets its CTA twice; edge threads load only their column and store nothing. One launch per iteration, ping-pong grids. Default: Parboil's default dataset (512 x 512 x 64), 2 iterations.",
            WorkloadKind::Hotspot => "Rodinia hotspot: thermal 2D stencil, one thread per cell: loads its temperature, waits, loads its power, waits (the neighbours come from shared memory), meets its CTA, computes pyramid_height steps (two CTA barriers each but the last), stores to the other temperature grid; one launch per pyramid step.",
            WorkloadKind::Pathfinder => "Rodinia pathfinder: row-by-row dynamic programming, one thread per column: loads the previous cost row at its column (the neighbours come from shared memory), waits and meets its CTA, then each row's weight in turn (two CTA barriers per row but the last); one launch per pyramid of rows, ping-pong cost rows.",
            WorkloadKind::Nw => "Rodinia Needleman-Wunsch: score-matrix tiles along anti-diagonals, one launch per diagonal, one warp per tile: loads the corner, the reference tile row by row, the west column (strided) and north row, each waited for before the next (the PTX's order), computes, stores the tile.",
            WorkloadKind::Srad => "Rodinia SRAD (v2): 2D image diffusion, two kernels per iteration: one loads each pixel's north and south, meets, west and east, meets, the pixel, meets, and stores a coefficient and 4 derivative arrays; the other loads the pixel, its south and east neighbours' and its own coefficient (each followed by a barrier) and the derivatives, and updates the image; every load waited for where the PTX uses it (4 and 5 barriers). Each iteration the host first reads the image's region of interest (managed memory: its pages come back from the GPU) and, with explicit copies, copies the image in before and out after the two kernels, as srad_v2 does.",
            WorkloadKind::Backprop => "Rodinia backprop: layer-forward kernel (each thread loads its input, then its weight of the input's 17-weight row, reduces across its CTA at 8 barriers, writes its weight back, stores a partial sum) then weight-adjust kernel (loads delta, input, old weight, weight; stores the weight; reloads delta, input, old weight; stores the old weight; one barrier); every load waited for before the next (the PTX's order).",
            WorkloadKind::Spmv => "CSR sparse matrix-vector product over a banded matrix with seeded random fill-in (SHOC's CSR kernels, in their PTX's order): per row, the row pointers, then per chunk the column indices, then x gathered at them with the values, read coalesced (warp per row) or a row apart (thread per row).",
            WorkloadKind::Btree => "B+tree point queries (Rodinia b+tree findK, svm-apu BPT): one CTA of fanout threads per query; per level each warp loads the query's current node pointer, the node's keys (coalesced) and the query key, the matching thread its child index through the offset array, with two CTA barriers; then the record; loads waited for where the PTX uses them; unsorted or sorted queries.",
            WorkloadKind::Xsbench => "XSBench lookups (unionized grid, svm-apu / Zheng xsbench): per lookup a binary search of the unionized energy grid (dependent, divergent probes), then per nuclide its index-grid entry and the two bracketing nuclide-grid points, 8 bytes at a time in 7 round trips (the PTX's order); unsorted or sorted lookups.",
            WorkloadKind::FaultBurst => "Concurrent first-touch faults (issue 3, svm-apu fault bursts): faults threads each make one access to its own page (stride_bytes apart) as their first instruction, so a managed run raises that many far faults at once; for fault-latency and batching studies.",
            WorkloadKind::Minife => "miniFE conjugate gradient on the 27-point matrix of a structured 3D grid. CUDA port (default): ELL matrix (entry j of 32 rows coalesced), matvec_ell_kernel, dot as memset + dot_kernel (512-thread CTAs, shared-memory reduction over 4 __syncthreads) + dot_final_reduce_kernel (one 1,024-thread CTA, 5 __syncthreads), grid-stride waxpbys, cg_solve's set-up then per iteration dot(r, r), waxpby p, matvec, dot(Ap, p) and two waxpbys. Reference port (cuda = false): CSR, thread per row (row offsets, then per entry its index and value, uncoalesced, and p gathered) and per element, six launches per iteration.",
            WorkloadKind::Comd => "CoMD link-cell force kernel (CoMD-CUDA's LJ_Force_thread_atom, in its PTX's order): one thread per atom loads its cell and slot from the atom lists and its position, then for each of the 27 cells around its own (periodic) the neighbour-table entry and the cell's atom count, and every atom's x, y, z one at a time (a broadcast within a cell), computing each pair; then stores its force and energy.",
            WorkloadKind::Miniamr => "miniAMR: 7-point stencil over a list of mesh blocks (each a contiguous array with one-cell halos), the blocks near the domain's centre refined into 8 children; per iteration a halo exchange between neighbouring blocks (across refinement levels) and the stencil, ping-pong block lists.",
            WorkloadKind::Bfs => "Graph500-like BFS on a Kronecker (R-MAT) graph generated from the seed: one launch per level, one thread per vertex; frontier vertices read their CSR offsets and neighbour lists, gather the neighbours' levels and mark the unvisited ones.",
            WorkloadKind::Shootdown => "GPU TLB shootdowns (svm-apu §VI, Table 4): one work-item touches N pages, the host shoots their translations down (one page at a time, or flush-all) K times, and the kernel runs again; needs translation.mode = \"iommu\".",
            WorkloadKind::Fir => "Hetero-Mark FIR (MGPUSim; seed multi-gpu FIR, 'adjacent'): one thread per sample loads input[t - j] for each of 16 taps (load, wait, multiply-add) and stores output[t].",
            WorkloadKind::Kmeans => "Hetero-Mark KMeans (MGPUSim; seed multi-gpu KM): a swap kernel transposes the features point-major to feature-major (strided loads, coalesced stores), then per iteration each point thread loads every feature once per cluster (coalesced) and stores its membership.",
            WorkloadKind::Pagerank => "Hetero-Mark PageRank (MGPUSim; seed multi-gpu PR, 'random'): per iteration a CSR-vector SpMV (one wavefront per node) over a random graph, gathering the rank vector at random columns; rank vectors ping-pong.",
            WorkloadKind::Aes => "Hetero-Mark AES-256 (MGPUSim; seed multi-gpu AES, 'partition'): one thread per 16-byte block loads it, makes 14 x 16 data-dependent lookups into a 256-byte S-box in global memory, and stores it back in place.",
            WorkloadKind::MatrixTranspose => "AMDAPPSDK MatrixTranspose (MGPUSim; seed multi-gpu MT, 'scatter-gather', highest MPKI): each thread moves a 4x4 float block with float4 loads along input rows and float4 stores spread over 16 output rows per wavefront.",
            WorkloadKind::BitonicSort => "AMDAPPSDK BitonicSort (MGPUSim; seed multi-gpu BS): one launch per pass (log2 n (log2 n + 1) / 2), each thread loads, compares and stores a pair of keys pair-distance apart.",
            WorkloadKind::Fft => "SHOC FFT (MGPUSim; seed multi-gpu FFT, 'stride'): in-place 512-point transforms, one 64-thread group per 4 KiB: eight coalesced 512 B loads at stride 64 points, compute, eight stores.",
            WorkloadKind::SimpleConvolution => "AMDAPPSDK SimpleConvolution (MGPUSim; seed multi-gpu SC, 'adjacent'): one thread per output pixel (row-major, wavefronts wrap rows) loads the mask x mask input neighbourhood of a padded image and stores one pixel.",
            WorkloadKind::Im2col => "MGPUSim DNN im2col (seed multi-gpu Im2col, 'scatter-gather'): one thread per column-matrix element (kernel offset fastest) loads an input pixel and stores it into its column-matrix row: each wavefront writes a line in each of kernel^2 rows.",
            WorkloadKind::Conv2d => "MGPUSim DNN conv2d (seed multi-gpu Conv2d): the im2col kernel, then a GEMM with one thread per output element looping over the column-matrix rows (weight broadcast, coalesced column-matrix loads).",
            WorkloadKind::Sad => "Parboil SAD (H.264 motion estimation): per 16x16 macroblock, sums of absolute differences against the reference frame at every offset of a search window; mb_sad_calc runs a 61-thread CTA per 4x4 block that stages the block, meets, fetches the reference one pixel at a time (each used at once: the PTX's order), meets again and copies its SADs out; larger_sad_calc_8 and _16 combine them into the larger partitions (4 loads, wait, 5 stores per trip).",
            WorkloadKind::PingPong => "Host and GPU take turns on the same pages (thrashing, issue 4): per iteration a kernel where thread g reads (and optionally writes) one element of page g, then the host writes (or reads) every page, then computes for host_us; with managed memory the pages migrate back and forth until thrashing mitigation throttles and pins them. One GPU (the host accesses go to the single-GPU UVM driver).",
            WorkloadKind::Cufft => "cuFFT-like (seed uvm-driver Table 5.1 cufft): forward then inverse 1D complex-float FFT of n1 x n2 points, out-of-place four-step: a column pass (lanes n2 points apart: a page per lane, uncoalesced) and a contiguous row pass each way, through a work array.",
            WorkloadKind::Tealeaf => "TeaLeaf-like (seed uvm-driver Table 5.1; UK-MAC TeaLeaf CG heat conduction) on an nx x ny f64 grid: three init kernels (u, kx/ky from density, r = u0 - A u and p = r), then per CG iteration w = A p (5-point with kx, ky), u and r updates, p = r + beta p.",
            WorkloadKind::Hpgmg => "HPGMG-FV-like (seed uvm-driver Table 5.1; NVIDIA's UVM HPGMG): multigrid V-cycles on an n^3 f64 grid: per level red/black 7-point smooths, residual, restriction to (n/2)^3 (stride-2 loads), down to the bottom grid, then interpolation and smooths back up; one array per vector and level.",
            WorkloadKind::Cusparse => "cuSPARSE-like (seed uvm-driver Table 5.1 cusparse): a dense n x n float matrix converted to CSR with a fixed nnz per row (row-scan count, scan, row re-scan writing indices and values), then a CSR-vector SpMV on it with spmv's band + random columns.",
        }
    }
}

section! {
    /// The workload: which generator and its parameters.
    pub struct WorkloadConfig {
        /// Generator: stride, concurrency, regular, random, stream, gather, vecadd-probe, trace, warp-trace, accelsim, pointer-chase, strided, tiled-gemm, blas-gemm, parboil-sgemm, stencil2d, stencil3d, parboil-stencil, hotspot, pathfinder, nw, srad, backprop, spmv, btree, xsbench, fault-burst, minife, comd, miniamr, bfs, sad, shootdown, fir, kmeans, pagerank, aes, matrix-transpose, bitonic-sort, fft, simple-convolution, im2col, conv2d or ping-pong, cufft, tealeaf, hpgmg or cusparse (`uvmsim workloads` describes them).
        pub kind: WorkloadKind = WorkloadKind::Stride,
        /// Threads per CTA (thread block / work-group).
        pub threads_per_cta: u32 = 256,
        /// Core cycles of compute after each dependent memory access.
        pub compute_cycles: u32 = 4,
        /// Copy the kernel's input arrays host-to-device before launching (the explicit-copy baseline). One GPU: the
        /// multi-GPU model, which places every page from host memory at its first touch, refuses it (and a replayed
        /// trace's recorded copies: replay it with workload.managed = true). A warp-trace replay is its recording's
        /// copies; true adds the input copy to a recording without one (from the bytes it records as inputs). srad copies its
        /// image in before every iteration, as Rodinia's srad_v2 does.
        pub memcpy_inputs: bool = false,
        /// Copy the kernels' other arrays (all but the inputs: results, and any scratch array) device-to-host after the
        /// last kernel: the explicit-copy baseline's return copy (seed paged-memory §2: "On kernel completion, programmers
        /// must also copy the return data from the GPU to CPU"). One GPU: the multi-GPU model, whose arrays are managed
        /// memory placed across the GPUs, refuses it (the copy moved no page and was charged on one GPU's link). On a
        /// warp-trace replay, true adds the return copy to a recording without one. srad copies back its image (not its
        /// five GPU-only arrays) after every iteration, as Rodinia's srad_v2 does.
        pub memcpy_outputs: bool = false,
        /// Allocate the kernel's arrays as managed (unified) memory: the GPU faults pages in on first touch ([uvm]).
        /// A warp-trace or Accel-Sim replay then runs its recorded program on managed memory (every allocation
        /// managed, 4 KiB pages, its copies dropped); a timed trace (kind "trace") refuses it.
        pub managed: bool = false,
        /// Managed arrays are initialised by the host before the kernels (CPU-resident and CPU-mapped: GPU faults migrate them and unmap the CPU); false: first touched by the GPU (zero-filled there, no transfer). The multi-GPU model places every page from host memory and refuses false. A warp trace records it; false on a replay overrides the recording's true.
        pub host_init: bool = true,
        /// cudaMemPrefetchAsync every managed allocation to the GPU before the first kernel (the usual managed-memory optimisation; spec/uvm-driver.md: block by block, no faults, may evict). A warp trace records the prefetches; true on a warp-trace or Accel-Sim replay prefetches every managed allocation the recording does not already prefetch (with workload.managed = true, all of them). One GPU's driver: the multi-GPU model refuses it.
        pub prefetch_inputs: bool = false,
        /// Host threads that initialised the managed arrays and that make the program's later host accesses (the CPU unmap of a block costs more per thread that touched it; seed uvm-driver §4.4). With host_init = false in a program without host accesses (every workload but ping-pong and managed srad) nothing reads it. A warp trace records it; a value other than 1 on a replay overrides the recording's.
        pub host_threads: u32 = 1,
        /// Parameters of `stride`.
        pub stride: StrideParams = StrideParams::default(),
        /// Parameters of `concurrency`.
        pub concurrency: StrideParams = StrideParams { work_items: 16, accesses: 1000, stride_bytes: ByteSize(4096), access_bytes: 4 },
        /// Parameters of `regular`.
        pub regular: RegularParams = RegularParams::default(),
        /// Parameters of `random`.
        pub random: RegularParams = RegularParams::default(),
        /// Parameters of `stream`.
        pub stream: StreamParams = StreamParams::default(),
        /// Parameters of `gather`.
        pub gather: GatherParams = GatherParams::default(),
        /// Parameters of `vecadd-probe`.
        pub vecadd_probe: VecaddParams = VecaddParams::default(),
        /// Parameters of `trace`.
        pub trace: TraceParams = TraceParams::default(),
        /// Parameters of `warp-trace`.
        pub warp_trace: WarpTraceParams = WarpTraceParams::default(),
        /// Parameters of `accelsim`.
        pub accelsim: AccelsimParams = AccelsimParams::default(),
        /// Parameters of `pointer-chase`.
        pub pointer_chase: PointerChaseParams = PointerChaseParams::default(),
        /// Parameters of `strided`.
        pub strided: StridedParams = StridedParams::default(),
        /// Parameters of `tiled-gemm`.
        pub tiled_gemm: GemmParams = GemmParams::default(),
        /// Parameters of `blas-gemm`.
        pub blas_gemm: BlasGemmParams = BlasGemmParams::default(),
        /// Parameters of `parboil-sgemm`.
        pub parboil_sgemm: ParboilSgemmParams = ParboilSgemmParams::default(),
        /// Parameters of `stencil2d`.
        pub stencil2d: StencilParams = StencilParams::default(),
        /// Parameters of `stencil3d`.
        pub stencil3d: StencilParams = stencil::default_3d(),
        /// Parameters of `parboil-stencil`.
        pub parboil_stencil: ParboilStencilParams = ParboilStencilParams::default(),
        /// Parameters of `hotspot`.
        pub hotspot: HotspotParams = HotspotParams::default(),
        /// Parameters of `pathfinder`.
        pub pathfinder: PathfinderParams = PathfinderParams::default(),
        /// Parameters of `nw`.
        pub nw: NwParams = NwParams::default(),
        /// Parameters of `srad`.
        pub srad: SradParams = SradParams::default(),
        /// Parameters of `backprop`.
        pub backprop: BackpropParams = BackpropParams::default(),
        /// Parameters of `spmv`.
        pub spmv: SpmvParams = SpmvParams::default(),
        /// Parameters of `btree`.
        pub btree: BtreeParams = BtreeParams::default(),
        /// Parameters of `xsbench`.
        pub xsbench: XsbenchParams = XsbenchParams::default(),
        /// Parameters of `fault-burst`.
        pub fault_burst: FaultBurstParams = FaultBurstParams::default(),
        /// Parameters of `minife`.
        pub minife: MinifeParams = MinifeParams::default(),
        /// Parameters of `comd`.
        pub comd: ComdParams = ComdParams::default(),
        /// Parameters of `miniamr`.
        pub miniamr: MiniamrParams = MiniamrParams::default(),
        /// Parameters of `bfs`.
        pub bfs: BfsParams = BfsParams::default(),
        /// Parameters of `sad`.
        pub sad: SadParams = SadParams::default(),
        /// Parameters of `shootdown`.
        pub shootdown: ShootdownParams = ShootdownParams::default(),
        /// Parameters of `fir`.
        pub fir: FirParams = FirParams::default(),
        /// Parameters of `kmeans`.
        pub kmeans: KmeansParams = KmeansParams::default(),
        /// Parameters of `pagerank`.
        pub pagerank: PagerankParams = PagerankParams::default(),
        /// Parameters of `aes`.
        pub aes: AesParams = AesParams::default(),
        /// Parameters of `matrix-transpose`.
        pub matrix_transpose: TransposeParams = TransposeParams::default(),
        /// Parameters of `bitonic-sort`.
        pub bitonic_sort: BitonicParams = BitonicParams::default(),
        /// Parameters of `fft`.
        pub fft: FftParams = FftParams::default(),
        /// Parameters of `simple-convolution`.
        pub simple_convolution: SimpleConvParams = SimpleConvParams::default(),
        /// Parameters of `im2col`.
        pub im2col: Im2colParams = Im2colParams::default(),
        /// Parameters of `conv2d`.
        pub conv2d: Im2colParams = im2col::default_conv2d(),
        /// Parameters of `ping-pong`.
        pub ping_pong: PingPongParams = PingPongParams::default(),
        /// Parameters of `cufft`.
        pub cufft: CufftParams = CufftParams::default(),
        /// Parameters of `tealeaf`.
        pub tealeaf: TealeafParams = TealeafParams::default(),
        /// Parameters of `hpgmg`.
        pub hpgmg: HpgmgParams = HpgmgParams::default(),
        /// Parameters of `cusparse`.
        pub cusparse: CusparseParams = CusparseParams::default(),
    }
}

leaf!(WorkloadKind);

/// Largest footprint a workload may allocate: 64 TiB (the simulated heap starts
/// at 1 TiB in a 48-bit address space).
const MAX_FOOTPRINT: u128 = 1 << 46;

impl WorkloadConfig {
    /// Bytes the workload's arrays take (before page rounding), exact.
    fn footprint(&self) -> u128 {
        let (a, b, c) = (&self.stride, &self.concurrency, &self.vecadd_probe);
        match self.kind {
            WorkloadKind::Stride => a.work_items as u128 * a.accesses as u128 * a.stride_bytes.0 as u128,
            WorkloadKind::Concurrency => b.work_items as u128 * b.accesses as u128 * b.stride_bytes.0 as u128,
            WorkloadKind::Regular => self.regular.threads as u128 * self.regular.bytes_per_thread.0 as u128,
            WorkloadKind::Random => self.random.threads as u128 * self.random.bytes_per_thread.0 as u128,
            WorkloadKind::Stream => 3 * self.stream.elements as u128 * self.stream.element_bytes as u128,
            WorkloadKind::Gather => self.gather.table_entries as u128 * self.gather.entry_bytes as u128 + 4 * self.gather.lookups as u128,
            WorkloadKind::VecaddProbe => 3 * c.threads as u128 * c.iterations as u128 * 4096,
            WorkloadKind::Trace | WorkloadKind::WarpTrace | WorkloadKind::Accelsim => 0,
            WorkloadKind::PointerChase => self.pointer_chase.footprint(),
            WorkloadKind::Strided => self.strided.footprint(),
            WorkloadKind::TiledGemm => self.tiled_gemm.footprint(),
            WorkloadKind::BlasGemm => self.blas_gemm.footprint(),
            WorkloadKind::ParboilSgemm => self.parboil_sgemm.footprint(),
            WorkloadKind::Stencil2d => self.stencil2d.footprint(),
            WorkloadKind::Stencil3d => self.stencil3d.footprint(),
            WorkloadKind::ParboilStencil => self.parboil_stencil.footprint(),
            WorkloadKind::Hotspot => self.hotspot.footprint(),
            WorkloadKind::Pathfinder => self.pathfinder.footprint(),
            WorkloadKind::Nw => self.nw.footprint(),
            WorkloadKind::Srad => self.srad.footprint(),
            WorkloadKind::Backprop => self.backprop.footprint(),
            WorkloadKind::Spmv => self.spmv.footprint(),
            WorkloadKind::Btree => self.btree.footprint(),
            WorkloadKind::Xsbench => self.xsbench.footprint(),
            WorkloadKind::FaultBurst => self.fault_burst.footprint(),
            WorkloadKind::Minife => self.minife.footprint(),
            WorkloadKind::Comd => self.comd.footprint(),
            WorkloadKind::Miniamr => self.miniamr.footprint(),
            WorkloadKind::Bfs => self.bfs.footprint(),
            WorkloadKind::Sad => self.sad.footprint(),
            WorkloadKind::Shootdown => self.shootdown.pages as u128 * (2 << 20), // at most a 2 MiB page each
            WorkloadKind::Fir => self.fir.footprint(),
            WorkloadKind::Kmeans => self.kmeans.footprint(),
            WorkloadKind::Pagerank => self.pagerank.footprint(),
            WorkloadKind::Aes => self.aes.footprint(),
            WorkloadKind::MatrixTranspose => self.matrix_transpose.footprint(),
            WorkloadKind::BitonicSort => self.bitonic_sort.footprint(),
            WorkloadKind::Fft => self.fft.footprint(),
            WorkloadKind::SimpleConvolution => self.simple_convolution.footprint(),
            WorkloadKind::Im2col => self.im2col.footprint(false),
            WorkloadKind::Conv2d => self.conv2d.footprint(true),
            WorkloadKind::PingPong => self.ping_pong.footprint(),
            WorkloadKind::Cufft => self.cufft.footprint(),
            WorkloadKind::Tealeaf => self.tealeaf.footprint(),
            WorkloadKind::Hpgmg => self.hpgmg.footprint(),
            WorkloadKind::Cusparse => self.cusparse.footprint(),
        }
    }

    pub fn validate(&self, cfg: &Config) -> Result<(), (String, String)> {
        if self.prefetch_inputs && !self.managed && !matches!(self.kind, WorkloadKind::WarpTrace | WorkloadKind::Accelsim) {
            return Err(("workload.prefetch_inputs".into(), "prefetches managed memory: set workload.managed = true".into()));
        }
        if self.managed && self.kind == WorkloadKind::Trace {
            // Said rather than ignored: the run would look like a managed one and fault nothing.
            return Err((
                "workload.managed".into(),
                "a timed trace (workload.kind = \"trace\") has no allocations to make managed: its addresses map one-to-one \
                 to device memory. Managed memory needs a warp trace (uvmsim trace record) or an Accel-Sim trace"
                    .into(),
            ));
        }
        if cfg.multi.active() {
            self.validate_multi(cfg)?;
        }
        if !(1..=1024).contains(&self.host_threads) {
            return Err(("workload.host_threads".into(), format!("must be between 1 and 1024, got {}", self.host_threads)));
        }
        let ws = cfg.gpu.warp_size;
        let tpc = self.threads_per_cta;
        if tpc == 0 || tpc % ws != 0 || tpc / ws > cfg.gpu.max_warps_per_sm {
            return Err((
                "workload.threads_per_cta".into(),
                format!(
                    "must be a positive multiple of gpu.warp_size ({ws}) with at most gpu.max_warps_per_sm ({}) warps, got {tpc}",
                    cfg.gpu.max_warps_per_sm
                ),
            ));
        }
        // The kind's own checks come first: its footprint is only meaningful (and only cheap to compute: some
        // kinds count blocks or tree levels) for parameters inside their ranges.
        self.validate_kind(cfg)?;
        let fp = self.footprint();
        if fp > MAX_FOOTPRINT {
            return Err((
                format!("workload.{}", self.kind.name().replace('-', "_")),
                format!("the parameters ask for {fp} bytes of arrays; at most 64 TiB can be allocated"),
            ));
        }
        Ok(())
    }

    /// What the multi-GPU model (`multi.gpus` > 1 or `multi.model_one_gpu`) cannot run. It places every
    /// page from host memory at its first touch and sends far faults to the host, not to the single-GPU
    /// UVM driver: the driver's host operations and a copy into one GPU's memory would be charged, or
    /// dropped, without effect on the pages.
    fn validate_multi(&self, cfg: &Config) -> Result<(), (String, String)> {
        let needs = if cfg.multi.gpus > 1 { "it needs multi.gpus = 1" } else { "it needs multi.model_one_gpu = false" };
        if self.prefetch_inputs {
            return Err(("workload.prefetch_inputs".into(), format!("models one GPU's driver: {needs}")));
        }
        if self.memcpy_inputs {
            return Err((
                "workload.memcpy_inputs".into(),
                format!(
                    "copies the inputs into one GPU's device memory, but the multi-GPU model places every page from \
                     host memory at its first touch (the copy would be charged and every page still far-faulted): {needs}"
                ),
            ));
        }
        if self.memcpy_outputs {
            // It charged one device-to-host copy of the results on [link] (one GPU's link, not the model's
            // host connections) and moved no page: the results stay wherever multi.migration placed them.
            return Err((
                "workload.memcpy_outputs".into(),
                format!(
                    "copies the results back from one GPU's device memory, but the multi-GPU model keeps every array \
                     in managed memory, its pages placed across the GPUs (the copy would be charged on one GPU's \
                     link and move no page): {needs}"
                ),
            ));
        }
        if !self.host_init {
            return Err((
                "workload.host_init".into(),
                format!(
                    "false lets the UVM driver zero-fill first touches on the GPU, but the multi-GPU model places every \
                     page from host memory at its first touch: {needs}"
                ),
            ));
        }
        let runs_srad =
            if cfg.multi.apps.is_empty() { self.kind == WorkloadKind::Srad } else { cfg.multi.apps.contains(&WorkloadKind::Srad) };
        if runs_srad && self.managed && self.srad.roi().is_some() {
            return Err((
                "workload.srad.roi_rows".into(),
                format!(
                    "srad's host reads J's region of interest between iterations (Rodinia srad_v2), a host access to \
                     managed memory that goes to the single-GPU UVM driver, which the multi-GPU model does not run: \
                     {needs}, or set workload.srad.roi_rows = 0 to leave the host's read out"
                ),
            ));
        }
        if self.kind == WorkloadKind::PingPong && cfg.multi.apps.is_empty() {
            return Err((
                "workload.kind".into(),
                format!(
                    "ping-pong: its host accesses between the kernels go to the single-GPU UVM driver, which the \
                     multi-GPU model does not run (they would be dropped): {needs}"
                ),
            ));
        }
        Ok(())
    }

    /// The range checks of the parameters of the workload's kind.
    fn validate_kind(&self, cfg: &Config) -> Result<(), (String, String)> {
        let ws = cfg.gpu.warp_size;
        match self.kind {
            WorkloadKind::Stride => self.stride.validate("workload.stride"),
            WorkloadKind::Concurrency => self.concurrency.validate("workload.concurrency"),
            WorkloadKind::Regular => self.regular.validate("workload.regular"),
            WorkloadKind::Random => self.random.validate("workload.random"),
            WorkloadKind::Stream => self.stream.validate("workload.stream", ws),
            WorkloadKind::Gather => self.gather.validate("workload.gather", ws),
            WorkloadKind::VecaddProbe => self.vecadd_probe.validate("workload.vecadd_probe"),
            WorkloadKind::Trace => self.trace.validate("workload.trace"),
            WorkloadKind::WarpTrace => self.warp_trace.validate("workload.warp_trace"),
            WorkloadKind::Accelsim => self.accelsim.validate("workload.accelsim"),
            WorkloadKind::PointerChase => self.pointer_chase.validate("workload.pointer_chase"),
            WorkloadKind::Strided => self.strided.validate("workload.strided"),
            WorkloadKind::TiledGemm => self.tiled_gemm.validate("workload.tiled_gemm", cfg),
            WorkloadKind::BlasGemm => self.blas_gemm.validate("workload.blas_gemm", cfg),
            WorkloadKind::ParboilSgemm => self.parboil_sgemm.validate("workload.parboil_sgemm", cfg),
            WorkloadKind::Stencil2d => self.stencil2d.validate("workload.stencil2d", false),
            WorkloadKind::Stencil3d => self.stencil3d.validate("workload.stencil3d", true),
            WorkloadKind::ParboilStencil => self.parboil_stencil.validate("workload.parboil_stencil", cfg),
            WorkloadKind::Hotspot => self.hotspot.validate("workload.hotspot"),
            WorkloadKind::Pathfinder => self.pathfinder.validate("workload.pathfinder"),
            WorkloadKind::Nw => self.nw.validate("workload.nw", cfg),
            WorkloadKind::Srad => self.srad.validate("workload.srad"),
            WorkloadKind::Backprop => self.backprop.validate("workload.backprop"),
            WorkloadKind::Spmv => self.spmv.validate("workload.spmv"),
            WorkloadKind::Btree => self.btree.validate("workload.btree", cfg),
            WorkloadKind::Xsbench => self.xsbench.validate("workload.xsbench", ws),
            WorkloadKind::FaultBurst => self.fault_burst.validate("workload.fault_burst"),
            WorkloadKind::Minife => self.minife.validate("workload.minife", cfg),
            WorkloadKind::Comd => self.comd.validate("workload.comd"),
            WorkloadKind::Miniamr => self.miniamr.validate("workload.miniamr"),
            WorkloadKind::Bfs => self.bfs.validate("workload.bfs"),
            WorkloadKind::Sad => self.sad.validate("workload.sad", cfg),
            WorkloadKind::Shootdown => self.shootdown.validate("workload.shootdown", cfg),
            WorkloadKind::Fir => self.fir.validate("workload.fir"),
            WorkloadKind::Kmeans => self.kmeans.validate("workload.kmeans"),
            WorkloadKind::Pagerank => self.pagerank.validate("workload.pagerank"),
            WorkloadKind::Aes => self.aes.validate("workload.aes"),
            WorkloadKind::MatrixTranspose => self.matrix_transpose.validate("workload.matrix_transpose", cfg),
            WorkloadKind::BitonicSort => self.bitonic_sort.validate("workload.bitonic_sort"),
            WorkloadKind::Fft => self.fft.validate("workload.fft"),
            WorkloadKind::SimpleConvolution => self.simple_convolution.validate("workload.simple_convolution"),
            WorkloadKind::Im2col => self.im2col.validate("workload.im2col"),
            WorkloadKind::Conv2d => self.conv2d.validate("workload.conv2d"),
            WorkloadKind::PingPong => self.ping_pong.validate("workload.ping_pong"),
            WorkloadKind::Cufft => self.cufft.validate("workload.cufft"),
            WorkloadKind::Tealeaf => self.tealeaf.validate("workload.tealeaf"),
            WorkloadKind::Hpgmg => self.hpgmg.validate("workload.hpgmg"),
            WorkloadKind::Cusparse => self.cusparse.validate("workload.cusparse", ws),
        }
    }
}

/// Build the program the config describes; a trace workload whose file cannot be
/// read fails here, with a message naming the file.
pub fn build(cfg: &Config) -> Result<Program, String> {
    let mut p = build_at(cfg, VA_BASE)?;
    if cfg.multi.active() && (p.ops.iter().any(|op| matches!(op, HostOp::PrefetchAsync { .. })) || !p.host.init) {
        // A recorded single-GPU program (a generator's are refused by validation): the multi-GPU model places
        // every page from host memory at its first touch, so neither can be run as recorded.
        let what = if p.host.init {
            "prefetches managed allocations to the GPU (cudaMemPrefetchAsync, workload.prefetch_inputs), which \
             models one GPU's driver"
        } else {
            "leaves its managed allocations to be first touched by the GPU (workload.host_init = false), but the \
             multi-GPU model places every page from host memory at its first touch"
        };
        let needs = if cfg.multi.gpus > 1 { "multi.gpus = 1" } else { "multi.model_one_gpu = false" };
        return Err(format!("the {} trace {what}: replay it with {needs}", cfg.workload.kind.name()));
    }
    if cfg.multi.active() && p.ops.iter().any(|op| matches!(op, HostOp::MemcpyH2D { .. } | HostOp::MemcpyD2H { .. })) {
        // A recorded device-memory program (workload.memcpy_inputs and memcpy_outputs are refused by validation).
        let what = if p.ops.iter().any(|op| matches!(op, HostOp::MemcpyH2D { .. })) {
            "copies its inputs into device memory (cudaMemcpy host to device), but the multi-GPU model places every \
             page from host memory at its first touch (the copy would be charged and every page still far-faulted)"
        } else {
            "copies its results back from device memory (cudaMemcpy device to host), but the multi-GPU model keeps \
             every array in managed memory, its pages placed across the GPUs (the copy would be charged on one GPU's \
             link and move no page)"
        };
        return Err(format!(
            "key `workload.managed`: the {} trace {what}: set workload.managed = true to replay it on managed memory, its \
             copies dropped",
            cfg.workload.kind.name()
        ));
    }
    if cfg.workload.prefetch_inputs {
        // cudaMemPrefetchAsync of every managed allocation, before the first kernel; a replayed
        // recording's own prefetches there are not repeated.
        let at = p.ops.iter().position(|op| matches!(op, HostOp::Launch(_))).unwrap_or(p.ops.len());
        let done: Vec<usize> =
            p.ops[..at].iter().filter_map(|op| if let HostOp::PrefetchAsync { buffer } = op { Some(*buffer) } else { None }).collect();
        let pre: Vec<HostOp> = p
            .buffers
            .iter()
            .enumerate()
            .filter(|(i, b)| b.managed && !done.contains(i))
            .map(|(i, _)| HostOp::PrefetchAsync { buffer: i })
            .collect();
        p.ops.splice(at..at, pre);
    }
    Ok(p)
}

/// [`build`] with the heap starting at `va_base` (multi-application mode gives each
/// application its own range, so their translations never share a key).
pub fn build_at(cfg: &Config, va_base: u64) -> Result<Program, String> {
    let w = &cfg.workload;
    let page = cfg.translation.page_size.0;
    let mut va = VaAllocator { managed: w.managed, next: va_base, ..VaAllocator::default() };
    if w.kind == WorkloadKind::Trace {
        return Ok(Program {
            buffers: vec![],
            ops: vec![HostOp::Replay { path: w.trace.path.clone(), gpu: w.trace.gpu, gap_ns: w.trace.gap_ns }],
            host: HostSetup::of(w, None),
        });
    }
    if w.kind == WorkloadKind::WarpTrace {
        return warptrace::program(&w.warp_trace.path, cfg);
    }
    if w.kind == WorkloadKind::Accelsim {
        return accelsim::program(&w.accelsim.path, cfg);
    }
    if w.kind == WorkloadKind::PingPong {
        let ops = pingpong::build(&w.ping_pong, w, cfg, page, &mut va);
        return Ok(Program { buffers: va.buffers, ops, host: HostSetup::of(w, None) });
    }
    if w.kind == WorkloadKind::Srad {
        // srad_v2's host program: per-iteration copies of J and the host's read of its region of interest.
        let (ops, inputs) = srad::build(&w.srad, w, page, &mut va);
        return Ok(Program { buffers: va.buffers, ops, host: HostSetup::of(w, Some(inputs)) });
    }
    let one = |(k, inputs)| (vec![k], inputs);
    let (kernels, inputs) = match w.kind {
        WorkloadKind::Stride => one(stride::build(&w.stride, w, cfg, page, &mut va)),
        WorkloadKind::Concurrency => one(stride::build(&w.concurrency, w, cfg, page, &mut va)),
        WorkloadKind::Regular => one(regular::build(&w.regular, false, w, cfg, page, &mut va)),
        WorkloadKind::Random => one(regular::build(&w.random, true, w, cfg, page, &mut va)),
        WorkloadKind::Stream => one(stream::build(&w.stream, w, page, &mut va)),
        WorkloadKind::Gather => one(gather::build(&w.gather, w, cfg, page, &mut va)),
        WorkloadKind::VecaddProbe => one(vecadd::build(&w.vecadd_probe, w, page, &mut va)),
        WorkloadKind::Trace | WorkloadKind::WarpTrace | WorkloadKind::Accelsim | WorkloadKind::PingPong | WorkloadKind::Srad => {
            unreachable!("handled above")
        }
        WorkloadKind::PointerChase => pointer_chase::build(&w.pointer_chase, w, cfg, page, &mut va),
        WorkloadKind::Strided => strided::build(&w.strided, w, page, &mut va),
        WorkloadKind::TiledGemm => gemm::build(&w.tiled_gemm, w, page, &mut va),
        WorkloadKind::ParboilSgemm => parboil_sgemm::build(&w.parboil_sgemm, w, page, &mut va),
        WorkloadKind::BlasGemm => blas_gemm::build(&w.blas_gemm, w, page, &mut va),
        WorkloadKind::Stencil2d => stencil::build(&w.stencil2d, false, w, page, &mut va),
        WorkloadKind::Stencil3d => stencil::build(&w.stencil3d, true, w, page, &mut va),
        WorkloadKind::ParboilStencil => parboil_stencil::build(&w.parboil_stencil, w, page, &mut va),
        WorkloadKind::Hotspot => hotspot::build(&w.hotspot, w, page, &mut va),
        WorkloadKind::Pathfinder => pathfinder::build(&w.pathfinder, w, page, &mut va),
        WorkloadKind::Nw => nw::build(&w.nw, w, cfg, page, &mut va),
        WorkloadKind::Backprop => backprop::build(&w.backprop, w, page, &mut va),
        WorkloadKind::Spmv => spmv::build(&w.spmv, w, cfg, page, &mut va),
        WorkloadKind::Btree => btree::build(&w.btree, w, cfg, page, &mut va),
        WorkloadKind::Xsbench => xsbench::build(&w.xsbench, w, cfg, page, &mut va),
        WorkloadKind::FaultBurst => fault_burst::build(&w.fault_burst, w, page, &mut va),
        WorkloadKind::Minife => minife::build(&w.minife, w, cfg, page, &mut va),
        WorkloadKind::Comd => comd::build(&w.comd, w, page, &mut va),
        WorkloadKind::Miniamr => miniamr::build(&w.miniamr, w, page, &mut va),
        WorkloadKind::Bfs => bfs::build(&w.bfs, w, cfg, page, &mut va),
        WorkloadKind::Sad => sad::build(&w.sad, w, page, &mut va),
        WorkloadKind::Shootdown => {
            // Touch, shoot down, touch again.
            let (k, op) = shootdown::build(&w.shootdown, w, cfg, page, &mut va);
            let ops = vec![HostOp::Launch(k.clone()), op, HostOp::Launch(k)];
            return Ok(Program { buffers: va.buffers, ops, host: HostSetup::of(w, None) });
        }
        WorkloadKind::Fir => fir::build(&w.fir, w, page, &mut va),
        WorkloadKind::Kmeans => kmeans::build(&w.kmeans, w, page, &mut va),
        WorkloadKind::Pagerank => pagerank::build(&w.pagerank, w, cfg, page, &mut va),
        WorkloadKind::Aes => aes::build(&w.aes, w, cfg, page, &mut va),
        WorkloadKind::MatrixTranspose => transpose::build(&w.matrix_transpose, w, page, &mut va),
        WorkloadKind::BitonicSort => bitonic::build(&w.bitonic_sort, w, page, &mut va),
        WorkloadKind::Fft => fft::build(&w.fft, w, page, &mut va),
        WorkloadKind::SimpleConvolution => simple_conv::build(&w.simple_convolution, w, page, &mut va),
        WorkloadKind::Im2col => im2col::build(&w.im2col, false, w, page, &mut va),
        WorkloadKind::Conv2d => im2col::build(&w.conv2d, true, w, page, &mut va),
        WorkloadKind::Cufft => allen::build_cufft(&w.cufft, w, page, &mut va),
        WorkloadKind::Tealeaf => allen::build_tealeaf(&w.tealeaf, w, page, &mut va),
        WorkloadKind::Hpgmg => allen::build_hpgmg(&w.hpgmg, w, page, &mut va),
        WorkloadKind::Cusparse => allen::build_cusparse(&w.cusparse, w, cfg, page, &mut va),
    };
    let mut ops = vec![];
    if w.memcpy_inputs && inputs > 0 {
        ops.push(HostOp::MemcpyH2D { bytes: inputs });
    }
    ops.extend(kernels.into_iter().map(HostOp::Launch));
    let outputs = va.buffers.iter().map(|b| b.bytes).sum::<u64>().saturating_sub(inputs);
    if w.memcpy_outputs && outputs > 0 {
        ops.push(HostOp::MemcpyD2H { bytes: outputs });
    }
    Ok(Program { buffers: va.buffers, ops, host: HostSetup::of(w, Some(inputs)) })
}

/// A seeded bijection on [0, n): a 4-round Feistel network on the next power
/// of two, cycle-walking until the value falls inside [0, n). Gives "each
/// thread a random unique page" without storing a permutation.
#[derive(Debug, Clone, Copy)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    seed: u64,
}

impl Permutation {
    pub fn new(n: u64, seed: u64) -> Permutation {
        let bits = 64 - (n.max(2) - 1).leading_zeros();
        Permutation { n, half_bits: bits.div_ceil(2), seed }
    }
    pub fn apply(&self, mut x: u64) -> u64 {
        debug_assert!(x < self.n);
        let h = self.half_bits;
        let mask = (1u64 << h) - 1;
        loop {
            let (mut l, mut r) = (x >> h, x & mask);
            for round in 0..4u64 {
                let f = mix64(r ^ self.seed.wrapping_add(round.wrapping_mul(0x9E37_79B9))) & mask;
                (l, r) = (r, l ^ f);
            }
            x = (l << h) | r;
            if x < self.n {
                return x;
            }
        }
    }
}

/// Range check of an integer parameter `{prefix}.{name}`, with the message the other checks use.
pub(super) fn check(prefix: &str, name: &str, v: u64, lo: u64, hi: u64) -> Result<(), (String, String)> {
    if (lo..=hi).contains(&v) {
        return Ok(());
    }
    Err((format!("{prefix}.{name}"), format!("must be between {lo} and {hi}, got {v}")))
}

/// Size of a workload array rounded to whole pages.
pub(crate) fn pages_of(bytes: u64, page: u64) -> u64 {
    bytes.div_ceil(page)
}

/// Helpers for the generators' tests: build a program from `--set` overrides,
/// run its warps, and record first touches.
#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::config::{resolve, Source};

    /// The program of the default config with these overrides (warp size 32).
    pub fn program(sets: &[&str]) -> Program {
        let o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        build(&resolve(&[] as &[Source], &o).unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The workload's footprint (what the 64 TiB check adds up) is the bytes its program allocates.
    pub fn assert_footprint_is_the_buffers(sets: &[&str]) {
        let o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let c = resolve(&[] as &[Source], &o).unwrap_or_else(|e| panic!("{e}"));
        let p = build(&c).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.workload.footprint(), p.buffers.iter().map(|b| b.bytes as u128).sum::<u128>(), "{sets:?}");
    }

    /// The message of the config error these overrides give (panics if they are accepted).
    pub fn refused(sets: &[&str]) -> String {
        let o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        resolve(&[] as &[Source], &o).err().unwrap_or_else(|| panic!("{sets:?} accepted")).to_string()
    }

    /// A warp's ops with their lane addresses: ('l'oad, 's'tore or 'p'refetch, addresses), ('w', []), ('b', []),
    /// ('c', [cycles]).
    pub fn ops_with_addrs(w: &mut WarpStream) -> Vec<(char, Vec<u64>)> {
        let mut s = [0; MAX_LANES];
        let mut out = vec![];
        loop {
            let op = w.next(&mut s);
            out.push(match op {
                Op::Exit => return out,
                Op::Mem { kind: MemKind::Load, .. } => ('l', addrs(op, &s)),
                Op::Mem { kind: MemKind::Store, .. } => ('s', addrs(op, &s)),
                Op::Mem { kind: MemKind::Prefetch, .. } => ('p', addrs(op, &s)),
                Op::Wait => ('w', vec![]),
                Op::Barrier => ('b', vec![]),
                Op::Compute(c) => ('c', vec![c as u64]),
            });
        }
    }

    /// The kernel specs of the program, in launch order.
    pub fn kernels(p: &Program) -> Vec<&KernelSpec> {
        p.ops.iter().filter_map(|op| if let HostOp::Launch(k) = op { Some(k) } else { None }).collect()
    }

    /// The warps of kernel `k` in grid order, with the ids the GPU gives them.
    pub fn warps(p: &Program, k: usize) -> Vec<WarpStream> {
        let k = kernels(p)[k];
        let (ws, tpc) = (32u64, k.threads_per_cta as u64);
        let wpc = tpc.div_ceil(ws);
        let mut out = vec![];
        for cta in 0..k.ctas() {
            let threads = (k.threads - cta * tpc).min(tpc);
            for w in 0..threads.div_ceil(ws) {
                let id = WarpId { global: cta * wpc + w, first_thread: cta * tpc + w * ws, lanes: (threads - w * ws).min(ws) as u32 };
                out.push(k.gen.warp(id));
            }
        }
        out
    }

    /// The lane addresses of a memory instruction.
    pub fn addrs(op: Op, scratch: &[u64; MAX_LANES]) -> Vec<u64> {
        match op {
            Op::Mem { lanes: Lanes::Strided { base, stride, n }, .. } => (0..n as u64).map(|i| base + i * stride).collect(),
            Op::Mem { lanes: Lanes::Explicit { n }, .. } => scratch[..n as usize].to_vec(),
            _ => vec![],
        }
    }

    /// Every op of a warp in order.
    pub fn all_ops(w: &mut WarpStream) -> Vec<Op> {
        let mut s = [0; MAX_LANES];
        let mut out = vec![];
        loop {
            match w.next(&mut s) {
                Op::Exit => return out,
                op => out.push(op),
            }
        }
    }

    /// A warp's ops as one letter each: m(em), w(ait), b(arrier), c(ompute), x (exit).
    pub fn op_shape(ops: &[Op]) -> String {
        ops.iter()
            .map(|o| match o {
                Op::Mem { .. } => 'm',
                Op::Wait => 'w',
                Op::Barrier => 'b',
                Op::Compute(_) => 'c',
                Op::Exit => 'x',
            })
            .collect()
    }

    /// Every memory instruction of a warp: its kind and lane addresses.
    pub fn mem_ops(w: &mut WarpStream) -> Vec<(MemKind, Vec<u64>)> {
        let mut s = [0; MAX_LANES];
        let mut out = vec![];
        loop {
            match w.next(&mut s) {
                Op::Exit => return out,
                op @ Op::Mem { kind, .. } => out.push((kind, addrs(op, &s))),
                _ => {}
            }
        }
    }

    /// What an MGPUSim trace counts, over every kernel run with `ws`-lane
    /// wavefronts: (wavefronts, accesses = distinct 64 B lines per memory
    /// instruction summed, distinct 4 KiB pages touched). MGPUSim's coalescer
    /// makes one trace row per line a wavefront instruction touches.
    pub fn trace_stats(p: &Program, ws: u64) -> (u64, u64, u64) {
        let (mut waves, mut accesses) = (0, 0);
        let mut pages = std::collections::HashSet::new();
        let mut s = [0; MAX_LANES];
        let mut lines = std::collections::BTreeSet::new();
        for k in kernels(p) {
            let tpc = k.threads_per_cta as u64;
            for cta in 0..k.ctas() {
                let threads = (k.threads - cta * tpc).min(tpc);
                for w in 0..threads.div_ceil(ws) {
                    let id = WarpId {
                        global: cta * tpc.div_ceil(ws) + w,
                        first_thread: cta * tpc + w * ws,
                        lanes: (threads - w * ws).min(ws) as u32,
                    };
                    let mut st = k.gen.warp(id);
                    waves += 1;
                    loop {
                        match st.next(&mut s) {
                            Op::Exit => break,
                            op @ Op::Mem { bytes, .. } => {
                                lines.clear();
                                for a in addrs(op, &s) {
                                    lines.extend(a >> 6..=(a + bytes as u64 - 1) >> 6);
                                }
                                accesses += lines.len() as u64;
                                pages.extend(lines.iter().map(|l| l >> 6));
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        (waves, accesses, pages.len() as u64)
    }

    /// Assert `got` is within `tol` (a fraction) of `want`.
    pub fn near(what: &str, got: f64, want: f64, tol: f64) {
        assert!((got - want).abs() <= tol * want, "{what}: got {got}, trace {want} (tolerance {:.0}%)", tol * 100.0);
    }

    /// Runs the kernels in launch order, each in lockstep (every warp issues
    /// one instruction in turn, in grid order), and returns the 4 KiB pages
    /// in the order of their first touch, as (buffer index, page in buffer).
    pub fn first_touch(p: &Program) -> Vec<(usize, u64)> {
        let mut seen = std::collections::HashSet::new();
        let mut out = vec![];
        let mut s = [0; MAX_LANES];
        for k in 0..kernels(p).len() {
            let mut live = warps(p, k);
            while !live.is_empty() {
                live.retain_mut(|w| {
                    let op = w.next(&mut s);
                    for a in addrs(op, &s) {
                        if seen.insert(a >> 12) {
                            let b = p.buffers.iter().position(|b| a >= b.base && a < b.base + b.bytes).expect("inside a buffer");
                            out.push((b, (a - p.buffers[b].base) >> 12));
                        }
                    }
                    op != Op::Exit
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn permutation_is_a_bijection(n in 1u64..3000, seed in any::<u64>()) {
            let p = Permutation::new(n, seed);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = p.apply(x);
                prop_assert!(y < n);
                prop_assert!(!seen[y as usize]);
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn allocations_are_aligned_and_disjoint() {
        let mut va = VaAllocator::default();
        let a = va.alloc(5000, 4096);
        let b = va.alloc(3 << 20, 2 << 20);
        let c = va.alloc(10, 1 << 30);
        assert_eq!(a.base % (2 << 20), 0);
        assert!(b.base >= a.base + 8192 && b.base % (2 << 20) == 0);
        assert!(c.base >= b.base + (4 << 20) && c.base % (1 << 30) == 0);
    }
}
