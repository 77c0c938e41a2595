//! Warp-trace replay and recording: a `.uvmt` file of warp instruction
//! streams (see `tracefmt.rs`) runs through the normal GPU model.
//!
//! How it works. `program` turns the file's header into the recorded host
//! program: the same allocations (base, size, page size, managed flag), the
//! same copies and, per kernel launch, the same grid with a
//! [`WarpTraceKernel`] as its generator. The GPU dispatches CTAs in order, so
//! it asks for warps in grid order: the kernel keeps one [`KernelCursor`] (the
//! next chunk of its section) and hands each new warp a [`WarpCursor`], which
//! shares the group chunk it is in or owns its segment chunk. Resident warps
//! are the only readers, each holding one chunk of at most `CHUNK_BYTES`, so
//! memory stays flat however long the trace is. A corrupt chunk ends the warp
//! (`Exit`) with the error kept in the stream; the GPU stops the run with it
//! as bad input (exit code 2), naming the file and byte offset.
//!
//! `record` is the other direction: it builds any workload's program and
//! writes every kernel's warps in grid order, with the warp identities the
//! GPU gives them, without simulating. Replaying the file then gives exactly
//! the generator's op streams, so the metrics of a replay equal those of the
//! generator run (except wall-clock ones).

use super::tracefmt::{self, BufferRec, Header, HostRec, KernelCursor, Mode, TraceFile, WarpCursor};
use super::{Buffer, HostOp, HostSetup, KernelGen, KernelSpec, Op, Program, WarpId, WarpStream, MAX_LANES};
use crate::config::Config;
use std::cell::RefCell;
use std::io::Write;
use std::sync::Arc;

section! {
    /// Parameters of warp-trace replay (workload.kind = "warp-trace").
    pub struct WarpTraceParams {
        /// Binary trace (.uvmt) of warp instruction streams, from `uvmsim trace record` or `uvmsim trace convert`.
        pub path: String = String::new(),
    }
}

impl WarpTraceParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        if self.path.is_empty() {
            return Err((format!("{p}.path"), "must name a .uvmt trace file".into()));
        }
        Ok(())
    }
}

/// A kernel replayed from a trace: the file and the dispatch cursor.
#[derive(Debug, Clone)]
pub struct WarpTraceKernel {
    file: Arc<TraceFile>,
    max_bytes: u32,
    cursor: RefCell<KernelCursor>,
}

impl WarpTraceKernel {
    pub fn warp(&self, id: WarpId) -> WarpTraceWarp {
        let file = self.file.clone();
        match self.cursor.borrow_mut().warp(&self.file, id.global, self.max_bytes) {
            Ok(cur) => WarpTraceWarp { file, cur: Some(cur), failure: None },
            Err(e) => WarpTraceWarp { file, cur: None, failure: Some(e.0.into()) },
        }
    }
}

/// One replayed warp. It sits inline in the GPU's warp state (the cursor's
/// window with it), so that issuing from it touches no other memory.
#[derive(Debug, Clone)]
pub struct WarpTraceWarp {
    file: Arc<TraceFile>,
    cur: Option<WarpCursor>,
    failure: Option<Box<str>>,
}

impl WarpTraceWarp {
    #[inline]
    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        if let Some(c) = &mut self.cur {
            if let Some(op) = c.next_common() {
                return op;
            }
            match c.next_other(&self.file, scratch) {
                // After its Exit a warp may be asked again (to re-run faulted instructions, then exit):
                // it keeps answering Exit, and lets go of its chunk now.
                Ok(Op::Exit) => self.cur = None,
                Ok(op) => return op,
                Err(e) => {
                    self.failure = Some(e.0.into());
                    self.cur = None;
                }
            }
        }
        Op::Exit
    }

    /// The warp yields: refill its window now if it runs low (see `WarpCursor::top_up`).
    #[inline(always)]
    pub fn yielding(&mut self) {
        if let Some(c) = &mut self.cur {
            c.top_up();
        }
    }

    /// Why the stream ended early (a corrupt trace), once.
    pub fn failure(&mut self) -> Option<String> {
        self.failure.take().map(String::from)
    }
}

/// The host program a warp trace recorded, ready to run on the GPU `cfg` describes.
pub fn program(path: &str, cfg: &Config) -> Result<Program, String> {
    let file = TraceFile::open(path).map_err(|e| e.0)?;
    program_of(Arc::new(file), cfg)
}

pub(super) fn program_of(file: Arc<TraceFile>, cfg: &Config) -> Result<Program, String> {
    let h = &file.header;
    if h.mode != Mode::Warps {
        return Err(format!("{}: holds timed accesses, not warp instruction streams: replay it with workload.kind = \"trace\"", file.name));
    }
    if file.totals.mem_ops == 0 {
        // An empty replay would pass for a result (all-zero metrics), as an empty timed trace would.
        return Err(format!("{}: the trace holds no accesses (no memory instruction in any warp): nothing to replay", file.name));
    }
    let ws = cfg.gpu.warp_size;
    if h.warp_size != ws {
        return Err(format!(
            "{}: recorded with {}-lane warps, but gpu.warp_size is {ws} (choose a preset with the same warp size)",
            file.name, h.warp_size
        ));
    }
    // The recorded host program, with what a replay-time `workload.*` key set away from its default
    // adds or overrides (docs/traces.md, "Round-trip guarantee"):
    // - `managed = true` replays it on managed memory, as a `cudaMallocManaged` port of it would run:
    //   every allocation managed (with the generators' managed page size) and no explicit copies;
    // - `memcpy_inputs` / `memcpy_outputs = true` add the copies a recording without them lacks (its
    //   input bytes in before the first operation, the other allocations' bytes out after the last);
    // - `host_init = false` and `host_threads` other than 1 override the recorded host set-up;
    // - `prefetch_inputs = true` adds prefetches (in `build`).
    let w = &cfg.workload;
    let managed = w.managed;
    let host = HostSetup {
        init: h.host_init && w.host_init,
        threads: if w.host_threads != 1 { w.host_threads } else { h.host_threads },
        input_bytes: h.input_bytes,
    };
    let buffers = h
        .buffers
        .iter()
        .map(|b| {
            let page_bytes = if managed && !b.managed { super::MANAGED_PAGE_BYTES } else { b.page_bytes };
            Buffer { base: b.base, bytes: b.bytes, page_bytes, managed: managed || b.managed }
        })
        .collect();
    let mut ops = vec![];
    let mut kernel = 0u32;
    for op in &h.ops {
        match op {
            HostRec::MemcpyH2d { .. } | HostRec::MemcpyD2h { .. } if managed => {}
            HostRec::MemcpyH2d { bytes } => ops.push(HostOp::MemcpyH2D { bytes: *bytes }),
            HostRec::MemcpyD2h { bytes } => ops.push(HostOp::MemcpyD2H { bytes: *bytes }),
            HostRec::Prefetch { buffer } => ops.push(HostOp::PrefetchAsync { buffer: *buffer as usize }),
            HostRec::Launch { name, threads, threads_per_cta } => {
                let wpc = threads_per_cta.div_ceil(ws);
                if wpc > cfg.gpu.max_warps_per_sm {
                    return Err(format!(
                        "{}: kernel {kernel} (`{name}`) has {wpc} warps per CTA, more than gpu.max_warps_per_sm ({})",
                        file.name, cfg.gpu.max_warps_per_sm
                    ));
                }
                let cursor = RefCell::new(KernelCursor::new(&file, kernel).map_err(|e| e.0)?);
                // Any access the coalescer takes (a generator's 96-byte xsbench reads span lines of 64 B).
                let max_bytes = crate::gpu::coalesce::MAX_ACCESS_BYTES;
                let gen = KernelGen::WarpTrace(Box::new(WarpTraceKernel { file: file.clone(), max_bytes, cursor }));
                ops.push(HostOp::Launch(KernelSpec { name: "warp-trace", threads: *threads, threads_per_cta: *threads_per_cta, gen }));
                kernel += 1;
            }
        }
    }
    if let (false, Some(inputs)) = (managed, h.input_bytes) {
        // As a generator makes them: the inputs copied in first, the outputs back after the last kernel.
        let h2d = ops.iter().any(|o| matches!(o, HostOp::MemcpyH2D { .. }));
        let d2h = ops.iter().any(|o| matches!(o, HostOp::MemcpyD2H { .. }));
        if w.memcpy_inputs && inputs > 0 && !h2d {
            ops.insert(0, HostOp::MemcpyH2D { bytes: inputs });
        }
        let outputs = h.buffers.iter().map(|b| b.bytes).sum::<u64>().saturating_sub(inputs);
        if w.memcpy_outputs && outputs > 0 && !d2h {
            ops.push(HostOp::MemcpyD2H { bytes: outputs });
        }
    }
    Ok(Program { buffers, ops, host })
}

/// Every warp of a kernel in grid order, with the identities `Gpu::dispatch_one` gives them.
pub fn grid_warps(k: &KernelSpec, warp_size: u32) -> impl Iterator<Item = WarpId> + '_ {
    let (ws, tpc) = (warp_size as u64, k.threads_per_cta as u64);
    let wpc = tpc.div_ceil(ws);
    (0..k.ctas()).flat_map(move |c| {
        let threads = (k.threads - c * tpc).min(tpc);
        (0..threads.div_ceil(ws)).map(move |w| WarpId {
            global: c * wpc + w,
            first_thread: c * tpc + w * ws,
            lanes: (threads - w * ws).min(ws) as u32,
        })
    })
}

/// Why a recording failed: its input (a workload that cannot be recorded, a corrupt trace being
/// recorded) or its output (OUT cannot be written: exit code 1 from the CLI, not 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    Input(String),
    Output(String),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Input(m) | RecordError::Output(m) => f.write_str(m),
        }
    }
}

/// Write the warp streams of `program` (built for `cfg`) to `out` as a `.uvmt`
/// trace; `source` is recorded in the header. Nothing is simulated.
pub fn record(program: &Program, cfg: &Config, source: &str, out: &str) -> Result<tracefmt::Totals, RecordError> {
    let input = RecordError::Input;
    let mut hops = vec![];
    for op in &program.ops {
        hops.push(match op {
            HostOp::MemcpyH2D { bytes } => HostRec::MemcpyH2d { bytes: *bytes },
            HostOp::MemcpyD2H { bytes } => HostRec::MemcpyD2h { bytes: *bytes },
            HostOp::Launch(k) => HostRec::Launch { name: k.name.to_string(), threads: k.threads, threads_per_cta: k.threads_per_cta },
            HostOp::Replay { .. } => {
                return Err(input(
                    "a timed trace (workload.kind = \"trace\") has no warp streams to record; use `uvmsim trace convert` instead".into(),
                ))
            }
            HostOp::Shootdown { .. } => {
                return Err(input("the trace format has no host shootdowns: `shootdown` cannot be recorded".into()))
            }
            HostOp::PrefetchAsync { buffer } => HostRec::Prefetch { buffer: *buffer as u32 },
            HostOp::HostAccess { .. } | HostOp::HostCompute { .. } => {
                return Err(input("host accesses and host compute (ping-pong, and srad's read of a managed image: workload.srad.roi_rows = 0 leaves it out) cannot be recorded in a warp trace".into()))
            }
        });
    }
    let buffers = program.buffers.iter().map(|b| BufferRec { base: b.base, bytes: b.bytes, page_bytes: b.page_bytes, managed: b.managed });
    let mut header = Header::new(Mode::Warps, source.to_string(), cfg.gpu.warp_size, buffers.collect(), hops);
    // The host program's set-up, with its allocations and operations.
    (header.host_init, header.host_threads, header.input_bytes) = (program.host.init, program.host.threads, program.host.input_bytes);
    // Written under a temporary name of its own beside OUT (`.OUT.uvmsim-PID-N.tmp`, as `trace convert`
    // writes) and renamed over OUT at the end: a failed or interrupted record leaves no partial trace, and
    // two records to the same OUT at once each write their own file (the last rename wins, whole).
    let tmp = super::trace::TempOut::new(out);
    let totals = (|| {
        let io = |e: std::io::Error| RecordError::Output(format!("{out}: cannot write: {e}"));
        let f = std::fs::File::create(&tmp.tmp).map_err(io)?;
        let mut w = tracefmt::Writer::new(std::io::BufWriter::with_capacity(1 << 20, f), &header).map_err(io)?;
        let mut scratch = [0u64; MAX_LANES];
        for op in &program.ops {
            let HostOp::Launch(k) = op else { continue };
            w.begin_kernel();
            for id in grid_warps(k, cfg.gpu.warp_size) {
                if crate::sim::cancelled() {
                    return Err(input(format!("{out}: interrupted; nothing written")));
                }
                let mut stream = k.gen.warp(id);
                loop {
                    let op = stream.next(&mut scratch);
                    if op == Op::Exit {
                        if let Some(e) = stream.failure() {
                            return Err(input(e));
                        }
                    }
                    w.op(op, &scratch).map_err(io)?;
                    if op == Op::Exit {
                        break;
                    }
                }
            }
            w.end_kernel().map_err(io)?;
        }
        let (mut f, totals) = w.finish().map_err(io)?;
        f.flush().map_err(io)?;
        Ok(totals)
    })()?;
    tmp.commit().map_err(|e| RecordError::Output(e.0))?;
    Ok(totals)
}

impl WarpStream {
    /// Why a stream read from a trace ended early (a corrupt trace), if it did; taken once.
    pub fn failure(&mut self) -> Option<String> {
        match self {
            WarpStream::WarpTrace(w) => w.failure(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{resolve, Source};
    use crate::stats::Value;

    fn cfg(sets: &[&str]) -> Config {
        let o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        resolve(&[] as &[Source], &o).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A path `name` in a fresh directory, removed with the returned guard.
    fn tmp(name: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name).to_string_lossy().into_owned();
        (dir, p)
    }

    /// The metrics of a run, without the wall-clock ones.
    fn metrics(c: &Config) -> Vec<(String, Value)> {
        let m = crate::world::simulate(c).unwrap_or_else(|e| panic!("{e}"));
        m.0.iter().filter(|(k, _)| !crate::stats::WALL_CLOCK_METRICS.contains(&k.as_str())).map(|(k, v)| (k.clone(), *v)).collect()
    }

    #[test]
    fn record_then_replay_gives_identical_metrics() {
        let managed_stream =
            ["workload.kind=stream", "workload.managed=true", "workload.stream.elements=40000", "workload.stream.threads=2048"];
        let with = |more: &'static [&'static str]| -> Vec<&'static str> { managed_stream.iter().chain(more).copied().collect() };
        // The host program's set-up (workload.prefetch_inputs, host_init, host_threads) is recorded with it
        // (before 2026-11-30 a replay ran without it), and the run's managed-memory features follow the
        // program's managed allocations, not workload.managed (access counters, the oracle's first pass).
        let host_cases = [
            with(&["workload.prefetch_inputs=true"]),
            with(&["workload.host_init=false"]),
            with(&["workload.host_threads=8"]),
            with(&["workload.memcpy_outputs=true", "workload.host_threads=3"]),
            with(&["uvm.access_counters.migrate=true", "uvm.advise.policy=\"accessed-by\""]),
            with(&["uvm.prefetch.policy=\"oracle\"", "uvm.oversubscription=1.5"]),
        ];
        let cases: [&[&str]; 7] = [
            &["workload.kind=stream", "workload.stream.elements=40000", "workload.stream.threads=2048"],
            // CTA barriers (format version 3), on managed memory: faulted warps meet the others at them.
            &["workload.kind=blas-gemm", "workload.blas_gemm.n=200", "workload.managed=true"],
            &["workload.kind=regular", "workload.managed=true", "workload.regular.threads=3000"],
            &["workload.kind=gather", "workload.gather.lookups=2000", "workload.gather.threads=512", "translation.page_size=\"4KiB\""],
            &["workload.kind=stride", "workload.stride.work_items=40", "workload.stride.accesses=300"],
            &["workload.kind=stream", "workload.memcpy_inputs=true", "workload.stream.elements=5000", "workload.threads_per_cta=96"],
            // 96-byte lanes (two grid points) on 64-byte lines: the replay refused them until 2026-11-29.
            &[
                "workload.kind=xsbench",
                "workload.xsbench.gridpoints=300",
                "workload.xsbench.lookups=2048",
                "workload.xsbench.threads=1024",
                "gpu.line_bytes=64",
            ],
        ];
        for (i, sets) in cases.iter().copied().chain(host_cases.iter().map(|v| v.as_slice())).enumerate() {
            let direct = cfg(sets);
            let (_dir, path) = tmp(&format!("rt{i}.uvmt"));
            let program = crate::workload::build(&direct).unwrap();
            let totals = record(&program, &direct, &sets.join(" "), &path).unwrap();
            assert!(totals.mem_ops > 0);
            let mut replay_sets: Vec<&str> = sets.iter().copied().filter(|s| !s.starts_with("workload.")).collect();
            let kind = "workload.kind=warp-trace".to_string();
            let p = format!("workload.warp_trace.path={path:?}");
            replay_sets.push(&kind);
            replay_sets.push(&p);
            let a = metrics(&direct);
            let b = metrics(&cfg(&replay_sets));
            assert_eq!(a, b, "case {i}: {sets:?}");
            std::fs::remove_file(&path).unwrap();
        }
    }

    #[test]
    fn a_device_memory_recording_replays_on_managed_memory() {
        // Recorded with explicit copies on device memory; replayed with workload.managed = true it
        // is the generator's managed program (same buffers, no copies): every metric the same.
        let gen = ["workload.kind=stream", "workload.stream.elements=40000", "workload.stream.threads=2048"];
        let device: Vec<&str> = gen.iter().copied().chain(["workload.memcpy_inputs=true", "workload.memcpy_outputs=true"]).collect();
        let device = cfg(&device);
        let (_dir, path) = tmp("dev.uvmt");
        record(&crate::workload::build(&device).unwrap(), &device, "t", &path).unwrap();
        let p = format!("workload.warp_trace.path={path:?}");
        let replay = |managed: &str| metrics(&cfg(&["workload.kind=warp-trace", &p, managed]));
        let managed: Vec<&str> = gen.iter().copied().chain(["workload.managed=true"]).collect();
        let direct = metrics(&cfg(&managed));
        let get = |m: &[(String, Value)], k: &str| m.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        assert!(matches!(get(&direct, "uvm.faults.raw"), Some(Value::Int(n)) if n > 0), "{direct:?}");
        assert_eq!(replay("workload.managed=true"), direct);
        // Without it, the recorded program as it was: copies, no faults.
        let plain = replay("workload.managed=false");
        assert_eq!(plain, metrics(&device));
        assert_eq!(get(&plain, "uvm.faults.raw"), Some(Value::Int(0)));
        // The baselines of the managed replay are the recording as it was: copy, then execute.
        let with = metrics(&cfg(&["workload.kind=warp-trace", &p, "workload.managed=true", "uvm.baselines=true"]));
        let f = |m: &[(String, Value)], k: &str| match get(m, k) {
            Some(Value::Float(x)) => x,
            v => panic!("{k}: {v:?}"),
        };
        let copy = f(&plain, "time.memcpy_ns");
        assert!(copy > 0.0);
        assert_eq!(f(&with, "baseline.copy_then_execute_ns"), copy + f(&plain, "time.kernel_ns"));
    }

    /// A replay-time `workload.*` key set away from its default adds to or overrides the recording: a
    /// plain device-memory recording (no copies, host set-up at its defaults) replayed with a key gives
    /// the generator run with it, every metric the same. Before 2026-11-30 `memcpy_inputs` and
    /// `memcpy_outputs` did nothing on a replay, so `uvm.baselines` compared the managed replay with a
    /// "copy-then-execute" run that copied nothing (slowdown_vs_copy was slowdown_vs_ideal).
    #[test]
    fn replay_time_keys_add_to_the_recording_as_they_do_to_the_generator() {
        let gen = ["workload.kind=stream", "workload.stream.elements=40000", "workload.stream.threads=2048"];
        let device = cfg(&gen);
        let (_dir, path) = tmp("plain.uvmt");
        record(&crate::workload::build(&device).unwrap(), &device, "t", &path).unwrap();
        let p = format!("workload.warp_trace.path={path:?}");
        let keys: [&[&str]; 6] = [
            &["workload.memcpy_inputs=true", "workload.memcpy_outputs=true"],
            &["workload.memcpy_outputs=true"],
            &["workload.managed=true", "uvm.baselines=true"],
            &["workload.managed=true", "workload.prefetch_inputs=true"],
            &["workload.managed=true", "workload.host_init=false"],
            &["workload.managed=true", "workload.host_threads=8", "uvm.baselines=true"],
        ];
        for more in keys {
            let direct: Vec<&str> = gen.iter().chain(more).copied().collect();
            let replay: Vec<&str> = ["workload.kind=warp-trace", p.as_str()].iter().chain(more).copied().collect();
            assert_eq!(metrics(&cfg(&replay)), metrics(&cfg(&direct)), "{more:?}");
        }
        let m = crate::world::simulate(&cfg(&["workload.kind=warp-trace", &p, "workload.managed=true", "uvm.baselines=true"])).unwrap();
        let (copy, ideal) = (m.get("baseline.slowdown_vs_copy").unwrap(), m.get("baseline.slowdown_vs_ideal").unwrap());
        assert!(copy > 0.0 && copy < ideal, "{copy} {ideal}");

        // A recording of a prefetching program replayed with prefetch_inputs = true prefetches once, as the generator does.
        let pre: Vec<&str> = gen.iter().chain(&["workload.managed=true", "workload.prefetch_inputs=true"]).copied().collect();
        let (_dir2, path2) = tmp("pre.uvmt");
        record(&crate::workload::build(&cfg(&pre)).unwrap(), &cfg(&pre), "t", &path2).unwrap();
        let p2 = format!("workload.warp_trace.path={path2:?}");
        let program = crate::workload::build(&cfg(&["workload.kind=warp-trace", &p2, "workload.prefetch_inputs=true"])).unwrap();
        assert_eq!(program.ops.iter().filter(|o| matches!(o, HostOp::PrefetchAsync { .. })).count(), 3);
        assert_eq!(metrics(&cfg(&["workload.kind=warp-trace", &p2, "workload.prefetch_inputs=true"])), metrics(&cfg(&pre)));
    }

    /// A device-memory recording without copies and without its input bytes (format version 1) has no
    /// copy-then-execute form: uvm.baselines is refused, naming the file and the way out.
    #[test]
    fn baselines_need_the_copies_or_the_input_bytes() {
        let device = cfg(&["workload.kind=stream", "workload.stream.elements=20000"]);
        let (_dir, path) = tmp("old.uvmt");
        let mut program = crate::workload::build(&device).unwrap();
        program.host.input_bytes = None;
        record(&program, &device, "t", &path).unwrap();
        let p = format!("workload.warp_trace.path={path:?}");
        let e = crate::world::simulate(&cfg(&["workload.kind=warp-trace", &p, "workload.managed=true", "uvm.baselines=true"])).unwrap_err();
        assert!(
            matches!(&e, crate::sim::SimError::BadInput(m) if m.contains(&path) && m.contains("records no copies") && m.contains("memcpy_inputs")),
            "{e}"
        );
        // Without the baselines it replays.
        crate::world::simulate(&cfg(&["workload.kind=warp-trace", &p, "workload.managed=true"])).unwrap();
    }

    /// On several GPUs a recording of a program that prefetches, or leaves first touches to the GPU, is
    /// refused (the multi-GPU model can run neither), as the generator with those settings is.
    #[test]
    fn a_single_gpu_host_set_up_is_refused_on_several_gpus() {
        for key in ["workload.prefetch_inputs=true", "workload.host_init=false"] {
            let one = cfg(&["workload.kind=stream", "workload.stream.elements=20000", "workload.managed=true", key]);
            let (_dir, path) = tmp("one.uvmt");
            record(&crate::workload::build(&one).unwrap(), &one, "t", &path).unwrap();
            let p = format!("workload.warp_trace.path={path:?}");
            let e = crate::world::simulate(&cfg(&["workload.kind=warp-trace", &p, "multi.gpus=4"])).unwrap_err();
            assert!(matches!(&e, crate::sim::SimError::BadInput(m) if m.contains("multi.gpus = 1")), "{key}: {e}");
        }
    }

    /// On several GPUs a recorded device-memory program's copies would be charged and every page still
    /// far-faulted (the multi-GPU model places pages from host memory at first touch): refused, with the
    /// way out; on managed memory the copies are dropped and it runs.
    #[test]
    fn a_device_memory_recording_is_refused_on_several_gpus_unless_managed() {
        let device = cfg(&["workload.kind=stream", "workload.stream.elements=20000", "workload.memcpy_inputs=true"]);
        let (_dir, path) = tmp("dev4.uvmt");
        record(&crate::workload::build(&device).unwrap(), &device, "t", &path).unwrap();
        let p = format!("workload.warp_trace.path={path:?}");
        let e = crate::world::simulate(&cfg(&["workload.kind=warp-trace", &p, "multi.gpus=4"])).unwrap_err();
        assert!(matches!(&e, crate::sim::SimError::BadInput(m) if m.contains("workload.managed = true")), "{e}");
        let m = crate::world::simulate(&cfg(&["workload.kind=warp-trace", &p, "multi.gpus=4", "workload.managed=true"])).unwrap();
        assert_eq!(m.get("host.memcpy_bytes"), Some(0.0));
        assert!(m.get("multi.far_faults").unwrap() > 0.0);
        // A recording that only copies its results back is refused too (workload.memcpy_outputs is, on several GPUs).
        let outputs = cfg(&["workload.kind=stream", "workload.stream.elements=20000", "workload.memcpy_outputs=true"]);
        record(&crate::workload::build(&outputs).unwrap(), &outputs, "t", &path).unwrap();
        let e = crate::world::simulate(&cfg(&["workload.kind=warp-trace", &p, "multi.gpus=4"])).unwrap_err();
        assert!(
            matches!(&e, crate::sim::SimError::BadInput(m) if m.contains("device to host") && m.contains("workload.managed = true")),
            "{e}"
        );
    }

    #[test]
    fn a_managed_recording_has_no_baseline_to_compare_with() {
        let sets = ["workload.kind=regular", "workload.managed=true", "workload.regular.threads=1024"];
        let direct = cfg(&sets);
        let (_dir, path) = tmp("managed.uvmt");
        record(&crate::workload::build(&direct).unwrap(), &direct, "t", &path).unwrap();
        let p = format!("workload.warp_trace.path={path:?}");
        let e = crate::world::simulate(&cfg(&["workload.kind=warp-trace", &p, "workload.managed=true", "uvm.baselines=true"])).unwrap_err();
        assert!(matches!(&e, crate::sim::SimError::BadInput(m) if m.contains("uvm.baselines") && m.contains(&path)), "{e}");
        // Without the baselines it replays as recorded.
        assert_eq!(metrics(&cfg(&["workload.kind=warp-trace", &p, "workload.managed=true"])), metrics(&direct));
    }

    #[test]
    fn a_recording_replays_on_several_gpus_with_the_generators_metrics() {
        // Each GPU reads only its CTAs' warps (a contiguous share, or every fourth CTA), passing
        // over the others' chunks: group chunks of a few warps each, and warps long enough to
        // be written as several segment chunks.
        let shapes = [
            ["workload.stream.elements=1000000", "workload.stream.threads=8192"],
            ["workload.stream.elements=1000000", "workload.stream.threads=256"],
        ];
        for (shape, placement) in shapes.iter().flat_map(|s| ["greedy", "round-robin"].map(|p| (s, p))) {
            let sets = ["multi.gpus=4", "workload.kind=stream", shape[0], shape[1], "workload.threads_per_cta=64"];
            let pl = format!("multi.cta_placement={placement:?}");
            let mut direct: Vec<&str> = sets.to_vec();
            direct.push(&pl);
            let direct = cfg(&direct);
            let (_dir, path) = tmp("multi.uvmt");
            record(&crate::workload::build(&direct).unwrap(), &direct, "t", &path).unwrap();
            let p = format!("workload.warp_trace.path={path:?}");
            let replay = cfg(&["multi.gpus=4", &pl, "workload.kind=warp-trace", &p]);
            // The chunks by kind: the shapes must give several group chunks, and segments.
            let f = TraceFile::open(&path).unwrap();
            let (mut at, mut kinds) = (f.totals.kernel_offsets[0], [0u32; 2]);
            while let Ok(c) = f.chunk_header(at) {
                match c.tag {
                    b'G' => kinds[0] += 1,
                    b'S' => kinds[1] += 1,
                    _ => break,
                }
                at = c.next();
            }
            // 256 threads: 8 warps, each long enough to be split; 8,192: many short warps, grouped.
            let split = shape[1].ends_with("=256");
            assert!(if split { kinds[1] > 8 } else { kinds[0] > 4 }, "{shape:?}: {kinds:?}");
            assert_eq!(metrics(&replay), metrics(&direct), "{shape:?} {placement}: {kinds:?} group / segment chunks");
        }
    }

    /// OUT is written under a name of its own beside it and renamed at the end (before 2026-11-30 always
    /// `OUT.part`, which two records to the same OUT shared): nothing else is left in the directory; an OUT
    /// that cannot be written is an output error (exit code 1), not bad input.
    #[test]
    fn record_writes_a_temporary_file_of_its_own_and_reports_output_errors() {
        let c = cfg(&["workload.kind=stream", "workload.stream.elements=1000", "workload.stream.threads=256"]);
        let program = crate::workload::build(&c).unwrap();
        let (dir, path) = tmp("out.uvmt");
        std::fs::write(format!("{path}.part"), b"another record's").unwrap();
        record(&program, &c, "t", &path).unwrap();
        record(&program, &c, "t", &path).unwrap();
        TraceFile::open(&path).unwrap();
        let mut names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["out.uvmt", "out.uvmt.part"]);
        let missing = dir.path().join("no/such/dir.uvmt").to_string_lossy().into_owned();
        let e = record(&program, &c, "t", &missing).unwrap_err();
        assert!(matches!(&e, RecordError::Output(m) if m.starts_with(&format!("{missing}: cannot write"))), "{e}");
        let e = record(&crate::workload::build(&cfg(&["workload.kind=ping-pong"])).unwrap(), &c, "t", &path).unwrap_err();
        assert!(matches!(e, RecordError::Input(_)));
    }

    #[test]
    fn replay_checks_the_gpu_and_the_file_kind() {
        let direct = cfg(&["workload.kind=stream", "workload.stream.elements=1000", "workload.stream.threads=256"]);
        let (_dir, path) = tmp("ws.uvmt");
        record(&crate::workload::build(&direct).unwrap(), &direct, "t", &path).unwrap();
        let e =
            crate::workload::build(&cfg(&["workload.kind=warp-trace", &format!("workload.warp_trace.path={path:?}"), "gpu.warp_size=64"]))
                .unwrap_err();
        assert!(e.contains("recorded with 32-lane warps") && e.contains(&path), "{e}");
        let e = crate::workload::build(&cfg(&["workload.kind=warp-trace", "workload.warp_trace.path=/nonexistent.uvmt"])).unwrap_err();
        assert!(e.contains("/nonexistent.uvmt") && e.contains("cannot read"), "{e}");
    }

    /// A recorded CTA may have as many warps as an SM holds, not one more.
    #[test]
    fn a_recorded_cta_may_fill_an_sm() {
        // 256-thread CTAs of 32-lane warps: 8 warps each.
        let direct = cfg(&["workload.kind=stream", "workload.stream.elements=1000", "workload.stream.threads=256"]);
        let (_dir, path) = tmp("cta.uvmt");
        record(&crate::workload::build(&direct).unwrap(), &direct, "t", &path).unwrap();
        let p = format!("workload.warp_trace.path={path:?}");
        assert!(crate::workload::build(&cfg(&["workload.kind=warp-trace", &p, "gpu.max_warps_per_sm=8"])).is_ok());
        let seven = cfg(&["workload.kind=warp-trace", &p, "gpu.max_warps_per_sm=7", "workload.threads_per_cta=32"]);
        let e = crate::workload::build(&seven).unwrap_err();
        assert!(e.contains("8 warps per CTA, more than gpu.max_warps_per_sm (7)"), "{e}");
    }

    #[test]
    fn a_corrupt_chunk_stops_the_run_as_bad_input() {
        let direct = cfg(&["workload.kind=stream", "workload.stream.elements=100000", "workload.stream.threads=4096"]);
        let (_dir, path) = tmp("corrupt.uvmt");
        record(&crate::workload::build(&direct).unwrap(), &direct, "t", &path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n / 2] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        let e = crate::world::simulate(&cfg(&["workload.kind=warp-trace", &format!("workload.warp_trace.path={path:?}")])).unwrap_err();
        assert!(matches!(&e, crate::sim::SimError::BadInput(m) if m.contains(&path) && m.contains("byte") && m.contains("corrupt")), "{e}");
    }
}
