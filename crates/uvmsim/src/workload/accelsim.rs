//! Accel-Sim / NVBit kernel traces (`kernelslist.g` + `kernel-*.traceg`), the
//! text format of Accel-Sim's NVBit tracer (tracer version 3 and later).
//!
//! How it works: the trace is converted, streaming, into a warp `.uvmt`
//! (`tracefmt.rs`) and replayed like any warp trace (`warptrace.rs`), so it
//! runs through the normal GPU model with flat memory. Two passes over the
//! text: the first checks every line and collects the touched address ranges
//! (the trace has no allocations: each run of touched `max(page, 2 MiB)`
//! granules, and each `MemcpyHtoD` range, becomes a buffer with
//! `translation.page_size` pages, managed when `workload.managed`); the
//! second writes the ops. Mapping, per warp:
//!
//! - `LDG`, `LD`, `LDGSTS` (global loads) → `Mem Load`; `STG`, `ST` → `Mem Store`;
//!   `ATOM`, `ATOMG`, `RED` → `Mem Store` (a write; their returned value is not
//!   waited for). Bytes per lane come from the opcode's width suffix (`.64`,
//!   `.128`, `.U8`, ...; 4 when none), as Accel-Sim reads them. Lanes are the
//!   mask's active lanes; address format 1 (base + stride) becomes strided
//!   lanes, formats 0 (list) and 2 (base + deltas) explicit lanes.
//! - `BAR.SYNC` (`__syncthreads`) and `BAR.RED` → `Barrier` (the CTA's warps
//!   meet there, `gpu.cta_barriers`); `BAR.ARV` only arrives and is `Compute`.
//!   The trace does not carry a barrier's number or thread count, so a named
//!   barrier of part of a CTA (warp-specialised kernels) is taken as the whole
//!   CTA's, which over-synchronises such a kernel (replay it with
//!   `gpu.cta_barriers = false` to compare). A warp that exits is not waited for.
//! - Every other instruction (ALU, shared/local/constant memory, control) is
//!   one cycle of `Compute`; consecutive ones merge.
//! - A scoreboard: a global load's destination registers are pending until
//!   the next `Wait`; an instruction that reads or writes a pending register
//!   gets a `Wait` before it.
//!
//! CTAs are the thread blocks in file order (Accel-Sim issues them in that
//! order too); a thread block's warps are `warp = 0..` of its block, and a
//! warp missing from the trace is an empty warp. `MemcpyHtoD` lines become
//! copies (without managed memory); other `kernelslist.g` lines (`MemcpyDtoH`)
//! are ignored. Errors name the file, line and reason.

use super::trace::{clip, ConvertError, TempPath, TraceError};
use super::tracefmt::{BufferRec, Header, HostRec, Mode, TraceFile, Writer};
use super::{Lanes, MemKind, Op, MAX_LANES};
use crate::config::Config;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

section! {
    /// Parameters of Accel-Sim trace replay (workload.kind = "accelsim").
    pub struct AccelsimParams {
        /// The trace's kernelslist.g; its kernel-*.traceg files are read from the same directory.
        pub path: String = String::new(),
    }
}

impl AccelsimParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        if self.path.is_empty() {
            return Err((format!("{p}.path"), "must name an Accel-Sim kernelslist.g".into()));
        }
        Ok(())
    }
}

/// How the trace's address ranges are allocated.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub page_bytes: u64,
    pub managed: bool,
}

impl Default for Layout {
    fn default() -> Self {
        Layout { page_bytes: 4096, managed: false }
    }
}

impl Layout {
    pub fn of(cfg: &Config) -> Layout {
        let managed = cfg.workload.managed;
        // Managed memory is mapped in 4 KiB pages, as the generators allocate it.
        Layout { page_bytes: if managed { super::MANAGED_PAGE_BYTES } else { cfg.translation.page_size.0 }, managed }
    }
}

const WARP: u32 = 32;
const ADDR_LIMIT: u64 = 1 << 57;
/// Largest `MemcpyHtoD`: 1 TiB, above every GPU's memory (the largest hold 288 GB). The link's
/// bandwidth timeline holds every bucket of a transfer while it lasts (about 140 MB per TiB), so a
/// 256 TiB copy took tens of GB to simulate.
const MAX_COPY_BYTES: u64 = 1 << 40;

/// Is `path` an Accel-Sim command list (by its `.g` name)?
pub fn is_kernelslist(path: &str) -> bool {
    path.ends_with(".g")
}

/// The program of an Accel-Sim trace: converted to a temporary warp trace, then replayed.
pub fn program(path: &str, cfg: &Config) -> Result<super::Program, String> {
    if cfg.gpu.warp_size != WARP {
        // Said before the conversion, and of the user's file, not of the temporary one.
        return Err(format!(
            "{path}: an Accel-Sim (NVBit) trace has {WARP}-lane warps, but gpu.warp_size is {}: choose a preset of an NVIDIA GPU",
            cfg.gpu.warp_size
        ));
    }
    let tmp = TempPath::new("accelsim").map_err(|e| format!("cannot create a temporary file: {e}"))?;
    let file = convert(path, &tmp, &Layout::of(cfg)).map_err(|e| e.to_string())?;
    let name = file.name.clone();
    // The open file stays readable after the temporary path is removed. Its checks (CTA sizes)
    // name the file: the user's, not the temporary one.
    super::warptrace::program_of(std::sync::Arc::new(file), cfg).map_err(|e| e.replace(&name, path))
}

/// One `kernelslist.g` command.
enum Command {
    Copy { addr: u64, bytes: u64 },
    Kernel(PathBuf),
}

fn commands(path: &str) -> Result<Vec<Command>, TraceError> {
    TraceError::check_regular(path)?;
    let text = std::fs::read(path).map_err(|e| TraceError::open(path, &e))?;
    let text = String::from_utf8(text).map_err(|_| TraceError(format!("{path}: not a text file (an Accel-Sim kernelslist.g)")))?;
    let dir = Path::new(path).parent().unwrap_or(Path::new("."));
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        let bad = |why: String| TraceError(format!("{path}:{}: {why}", i + 1));
        if l.len() > super::trace::MAX_LINE_BYTES {
            // Quoted whole below: a file without line breaks was one line of its whole size.
            return Err(bad(format!("a line longer than {} KiB: not an Accel-Sim kernelslist.g", super::trace::MAX_LINE_BYTES >> 10)));
        }
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if let Some(rest) = l.strip_prefix("MemcpyHtoD,") {
            let mut f = rest.split(',');
            let (a, b) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
            let addr = hex(a).ok_or_else(|| bad(format!("address `{a}` is not hex (expected MemcpyHtoD,0xADDR,BYTES)")))?;
            let bytes: u64 = b.trim().parse().map_err(|_| bad(format!("byte count `{b}` is not a whole number")))?;
            if f.next().is_some() {
                return Err(bad("more than 3 fields (expected MemcpyHtoD,0xADDR,BYTES)".into()));
            }
            if bytes > MAX_COPY_BYTES {
                return Err(bad(format!(
                    "implausible copy size {bytes}: a MemcpyHtoD fills device memory, and no GPU has more than 1 TiB (2^40 bytes)"
                )));
            }
            if addr.checked_add(bytes).map_or(true, |e| e > ADDR_LIMIT) {
                return Err(bad("the copy ends beyond the 57-bit address space".into()));
            }
            out.push(Command::Copy { addr, bytes });
        } else if l.starts_with("Memcpy") {
            continue; // device-to-host copies: not modelled
        } else if l.starts_with("kernel") {
            out.push(Command::Kernel(dir.join(l)));
        } else {
            return Err(bad(format!("`{}` is not MemcpyHtoD,ADDR,BYTES or a kernel-N.traceg file", clip(l))));
        }
    }
    Ok(out)
}

fn hex(s: &str) -> Option<u64> {
    let s = s.trim();
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    u64::from_str_radix(h, 16).ok()
}

/// A kernel's header lines.
#[derive(Debug, Clone, Default)]
struct KernelHeader {
    name: String,
    grid: [u64; 3],
    block: [u64; 3],
    lineinfo: bool,
}

impl KernelHeader {
    fn ctas(&self) -> u64 {
        self.grid.iter().product()
    }
    fn threads_per_cta(&self) -> u64 {
        self.block.iter().product()
    }
    fn warps_per_cta(&self) -> u32 {
        self.threads_per_cta().div_ceil(WARP as u64) as u32
    }
}

/// One instruction line.
#[derive(Debug, Clone, Default)]
struct Inst {
    /// Registers read and written (general registers only; RZ and others are not dependencies).
    regs: Vec<u8>,
    dests: Vec<u8>,
    /// A global memory access: kind, bytes per lane, lanes.
    mem: Option<(MemKind, u32)>,
    lanes: Vec<u64>,
    stride: Option<(u64, u64)>,
    /// A CTA barrier: `BAR.SYNC` (`__syncthreads`; `.DEFER_BLOCKING` since Volta) or `BAR.RED`
    /// (`__syncthreads_count/and/or`); not `BAR.ARV`, which arrives without waiting.
    barrier: bool,
}

/// What the reader reports, in file order.
enum Event<'a> {
    BeginTb,
    Warp(u32),
    Inst(&'a Inst),
    EndTb,
}

/// Reads one `kernel-N.traceg` line by line.
struct KernelReader {
    path: String,
    input: Box<dyn BufRead>,
    line: String,
    no: u64,
}

impl KernelReader {
    fn open(path: &Path) -> Result<KernelReader, TraceError> {
        let name = path.display().to_string();
        TraceError::check_regular(&name)?;
        let f = std::fs::File::open(path).map_err(|e| TraceError(format!("{name}: cannot read the trace: {e}")))?;
        let mut input = BufReader::with_capacity(1 << 16, f);
        let head = input.fill_buf().map_err(|e| TraceError(format!("{name}: cannot read the trace: {e}")))?;
        if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            return Err(TraceError(format!("{name}: xz-compressed; decompress it first (xz -dk)")));
        }
        Ok(KernelReader { path: name, input: Box::new(input), line: String::new(), no: 0 })
    }

    fn bad(&self, why: impl std::fmt::Display) -> TraceError {
        TraceError(format!("{}:{}: {why}", self.path, self.no))
    }

    fn next_line(&mut self) -> Result<bool, TraceError> {
        // Converting or summarising GBs of text: stop soon after an interrupt.
        super::trace::check_cancel(self.no, &self.path)?;
        let n = super::trace::read_bounded_line(&mut *self.input, &mut self.line)
            .map_err(|e| TraceError(format!("{}:{}: cannot read the trace: {e}", self.path, self.no + 1)))?;
        self.no += 1;
        Ok(n > 0)
    }

    /// Parse the whole kernel: its header, then every event.
    fn read(mut self, f: &mut dyn FnMut(&KernelHeader, Event) -> Result<(), TraceError>) -> Result<KernelHeader, TraceError> {
        let mut h = KernelHeader::default();
        let (mut grid, mut block) = (false, false);
        // Header: `-key = value` lines up to the first `#` line.
        loop {
            if !self.next_line()? {
                return Err(self.bad("the trace ends in its header (no #BEGIN_TB)"));
            }
            let l = self.line.trim();
            if l.starts_with('#') {
                break;
            }
            let Some(rest) = l.strip_prefix('-') else {
                if l.is_empty() {
                    continue;
                }
                return Err(self.bad(format!("`{}` is not a -key = value header line", clip(l))));
            };
            let (key, value) = rest.split_once('=').map(|(k, v)| (k.trim(), v.trim())).unwrap_or((rest.trim(), ""));
            match key {
                "kernel name" => h.name = value.to_string(),
                "grid dim" => (h.grid, grid) = (self.dim(value)?, true),
                "block dim" => (h.block, block) = (self.dim(value)?, true),
                "enable lineinfo" => h.lineinfo = value == "1",
                "accelsim tracer version" => {
                    let v: u32 = value.parse().map_err(|_| self.bad(format!("tracer version `{value}` is not a number")))?;
                    if v < 3 {
                        return Err(self.bad(format!("tracer version {v}: only traces of Accel-Sim tracer version 3 or later are read")));
                    }
                }
                _ => {}
            }
        }
        if !grid || !block {
            return Err(self.bad("the header lacks -grid dim or -block dim"));
        }
        // Checked products: (2^63+1, 2, 1) must not wrap to a grid of 2.
        let product = |d: &[u64; 3]| d.iter().try_fold(1u64, |a, &x| a.checked_mul(x));
        if !product(&h.block).is_some_and(|t| t <= 1024 * 64) || !product(&h.grid).is_some_and(|c| c <= 1 << 40) {
            return Err(self.bad("implausible grid or block dimensions"));
        }
        let wpc = h.warps_per_cta();
        let (mut in_tb, mut tbs, mut warp, mut left) = (false, 0u64, None::<u32>, 0u64);
        let mut inst = Inst::default();
        loop {
            if !self.next_line()? {
                break;
            }
            let l = self.line.trim();
            if l.is_empty() {
                continue;
            }
            if l == "#BEGIN_TB" {
                if in_tb {
                    return Err(self.bad("#BEGIN_TB inside a thread block (missing #END_TB)"));
                }
                (in_tb, warp, left) = (true, None, 0);
                tbs += 1;
                if tbs > h.ctas() {
                    return Err(self.bad(format!("more thread blocks than the grid's {}", h.ctas())));
                }
                f(&h, Event::BeginTb)?;
            } else if l == "#END_TB" {
                if !in_tb || left > 0 {
                    return Err(self.bad(if in_tb {
                        format!("#END_TB with {left} instructions of the warp missing")
                    } else {
                        "#END_TB outside a thread block".into()
                    }));
                }
                in_tb = false;
                f(&h, Event::EndTb)?;
            } else if l.starts_with('#') {
                continue;
            } else if !in_tb {
                return Err(self.bad(format!("`{}` outside a thread block (#BEGIN_TB ... #END_TB)", clip(l))));
            } else if let Some(v) = l.strip_prefix("thread block") {
                let v = v.trim_start().strip_prefix('=').unwrap_or("").trim();
                let ok = v.split(',').count() == 3 && v.split(',').all(|x| x.trim().parse::<u64>().is_ok());
                if !ok {
                    return Err(self.bad(format!("`{}`: expected thread block = x,y,z", clip(l))));
                }
            } else if let Some(v) = l.strip_prefix("warp") {
                let v = v.trim_start().strip_prefix('=').map(str::trim);
                let w: u32 = v.and_then(|v| v.parse().ok()).ok_or_else(|| self.bad(format!("`{}`: expected warp = N", clip(l))))?;
                if left > 0 {
                    return Err(self.bad(format!("warp {w} starts with {left} instructions of the previous warp missing")));
                }
                if w >= wpc || warp.is_some_and(|p| w <= p) {
                    return Err(self.bad(format!("warp {w}: warps of a thread block must be in ascending order below {wpc}")));
                }
                warp = Some(w);
                f(&h, Event::Warp(w))?;
            } else if let Some(v) = l.strip_prefix("insts") {
                let v = v.trim_start().strip_prefix('=').map(str::trim);
                left = v.and_then(|v| v.parse().ok()).ok_or_else(|| self.bad(format!("`{}`: expected insts = N", clip(l))))?;
                if warp.is_none() {
                    return Err(self.bad("insts = N before warp = N"));
                }
            } else {
                if left == 0 {
                    return Err(self.bad("an instruction beyond the warp's insts count"));
                }
                left -= 1;
                self.parse_inst(&h, &mut inst)?;
                f(&h, Event::Inst(&inst))?;
            }
        }
        if in_tb {
            return Err(self.bad("the trace ends inside a thread block (truncated?)"));
        }
        if tbs != h.ctas() {
            return Err(self.bad(format!("the grid has {} thread blocks but the trace holds {tbs}", h.ctas())));
        }
        Ok(h)
    }

    fn dim(&self, v: &str) -> Result<[u64; 3], TraceError> {
        let inner = v.trim().strip_prefix('(').and_then(|x| x.strip_suffix(')'));
        let parts: Vec<Option<u64>> = inner.unwrap_or("").split(',').map(|x| x.trim().parse().ok()).collect();
        match parts.as_slice() {
            [Some(x), Some(y), Some(z)] if *x > 0 && *y > 0 && *z > 0 => Ok([*x, *y, *z]),
            _ => Err(self.bad(format!("`{v}` is not a dimension (x,y,z) of positive numbers"))),
        }
    }

    /// `[line] pc mask dest_num [dests] opcode src_num [srcs] mem_width [format addresses] [imm]`.
    fn parse_inst(&self, h: &KernelHeader, inst: &mut Inst) -> Result<(), TraceError> {
        let mut t = self.line.split_ascii_whitespace();
        let mut next = |what: &str| t.next().ok_or_else(|| self.bad(format!("instruction cut short: missing {what}")));
        if h.lineinfo {
            next("line number")?;
        }
        let pc = next("pc")?;
        hex(pc).ok_or_else(|| self.bad(format!("pc `{pc}` is not hex")))?;
        let m = next("mask")?;
        let mask = hex(m).filter(|&v| v <= u32::MAX as u64).ok_or_else(|| self.bad(format!("mask `{m}` is not a 32-bit hex mask")))? as u32;
        inst.regs.clear();
        inst.dests.clear();
        inst.lanes.clear();
        inst.stride = None;
        let nd = next("dest_num")?;
        let nd: usize = nd.parse().ok().filter(|&n| n <= 32).ok_or_else(|| self.bad(format!("dest_num `{nd}` is not a count")))?;
        for _ in 0..nd {
            if let Some(r) = reg(next("a destination register")?) {
                inst.dests.push(r);
                inst.regs.push(r);
            }
        }
        let opcode = next("opcode")?.to_string();
        let ns = next("src_num")?;
        let ns: usize = ns.parse().ok().filter(|&n| n <= 32).ok_or_else(|| self.bad(format!("src_num `{ns}` is not a count")))?;
        for _ in 0..ns {
            if let Some(r) = reg(next("a source register")?) {
                inst.regs.push(r);
            }
        }
        let w = next("mem_width")?;
        let width: u32 = w.parse().map_err(|_| self.bad(format!("mem_width `{w}` is not a number")))?;
        let base_op = opcode.split('.').next().unwrap_or("");
        let kind = match base_op {
            "LDG" | "LD" | "LDGSTS" => Some(MemKind::Load),
            "STG" | "ST" | "ATOM" | "ATOMG" | "RED" => Some(MemKind::Store),
            _ => None,
        };
        inst.mem = None;
        let mut parts = opcode.split('.');
        inst.barrier = parts.next() == Some("BAR") && matches!(parts.next(), None | Some("SYNC" | "RED"));
        if width > 0 {
            let f = next("address format")?;
            let active = mask.count_ones() as usize;
            match f {
                "0" => {
                    for _ in 0..active {
                        let a = next("a lane address")?;
                        inst.lanes.push(hex(a).ok_or_else(|| self.bad(format!("address `{a}` is not hex")))?);
                    }
                }
                "1" => {
                    let a = next("base address")?;
                    let base = hex(a).ok_or_else(|| self.bad(format!("address `{a}` is not hex")))?;
                    let s = next("stride")?;
                    let stride: i64 = s.parse().map_err(|_| self.bad(format!("stride `{s}` is not a number")))?;
                    for i in 0..active as i64 {
                        inst.lanes.push(base.wrapping_add((i * stride) as u64));
                    }
                    if stride >= 0 {
                        inst.stride = Some((base, stride as u64));
                    }
                }
                "2" => {
                    let a = next("base address")?;
                    let mut addr = hex(a).ok_or_else(|| self.bad(format!("address `{a}` is not hex")))?;
                    if active > 0 {
                        inst.lanes.push(addr);
                    }
                    for _ in 1..active {
                        let d = next("a delta")?;
                        let d: i64 = d.parse().map_err(|_| self.bad(format!("delta `{d}` is not a number")))?;
                        addr = addr.wrapping_add(d as u64);
                        inst.lanes.push(addr);
                    }
                }
                _ => return Err(self.bad(format!("address format `{f}` is not 0 (list), 1 (base+stride) or 2 (base+delta)"))),
            }
            let bytes = width_of(&opcode);
            if inst.lanes.iter().any(|&a| a.checked_add(bytes as u64).map_or(true, |e| e > ADDR_LIMIT)) {
                return Err(self.bad("an address is beyond the 57-bit address space"));
            }
            if let Some(k) = kind {
                if active > 0 {
                    inst.mem = Some((k, bytes));
                }
            }
        } else if kind.is_some() {
            return Err(self.bad(format!("{opcode} is a global memory instruction but mem_width is 0")));
        }
        // At most one more token (an immediate), as Accel-Sim reads it.
        let _imm = t.next();
        if let Some(x) = t.next() {
            return Err(self.bad(format!("unexpected `{x}` after the instruction")));
        }
        Ok(())
    }
}

/// `R12` → 12; RZ (R255), uniform and predicate registers are not dependencies.
fn reg(tok: &str) -> Option<u8> {
    tok.strip_prefix('R').and_then(|n| n.parse::<u8>().ok()).filter(|&r| r != 255)
}

/// Bytes per lane from the opcode's width suffix (`LDG.E.128` → 16, `.U8` → 1), 4 by default.
fn width_of(opcode: &str) -> u32 {
    for t in opcode.split('.') {
        let digits = t.strip_prefix('U').or_else(|| t.strip_prefix('S')).unwrap_or(t);
        if let Ok(bits) = digits.parse::<u32>() {
            return (bits / 8).clamp(1, 64);
        }
    }
    4
}

/// Where converted ops go.
type Emit<'a> = dyn FnMut(Op, &[u64; MAX_LANES]) -> Result<(), TraceError> + 'a;

/// Turns one warp's instructions into ops (scoreboard, merged compute).
#[derive(Default)]
struct WarpOps {
    pending: [u64; 4],
    compute: u32,
}

impl WarpOps {
    fn inst(&mut self, i: &Inst, emit: &mut Emit) -> Result<(), TraceError> {
        let z = [0u64; MAX_LANES];
        let hit = i.regs.iter().any(|&r| self.pending[r as usize / 64] & 1 << (r % 64) != 0);
        if hit {
            self.flush(emit)?;
            emit(Op::Wait, &z)?;
            self.pending = [0; 4];
        }
        if i.barrier {
            self.flush(emit)?;
            return emit(Op::Barrier, &z);
        }
        let Some((kind, bytes)) = i.mem else {
            self.compute += 1;
            return Ok(());
        };
        self.flush(emit)?;
        let n = i.lanes.len() as u32;
        let mut s = [0u64; MAX_LANES];
        let lanes = match i.stride {
            Some((base, stride)) => Lanes::Strided { base, stride, n },
            None => {
                s[..i.lanes.len()].copy_from_slice(&i.lanes);
                Lanes::Explicit { n }
            }
        };
        emit(Op::Mem { kind, lanes, bytes }, &s)?;
        if kind == MemKind::Load {
            for &r in &i.dests {
                self.pending[r as usize / 64] |= 1 << (r % 64);
            }
        }
        Ok(())
    }

    fn flush(&mut self, emit: &mut Emit) -> Result<(), TraceError> {
        if self.compute > 0 {
            emit(Op::Compute(self.compute), &[0; MAX_LANES])?;
            self.compute = 0;
        }
        Ok(())
    }

    fn exit(&mut self, emit: &mut Emit) -> Result<(), TraceError> {
        self.flush(emit)?;
        *self = WarpOps::default();
        emit(Op::Exit, &[0; MAX_LANES])
    }
}

/// Convert an Accel-Sim trace to a warp `.uvmt` at `out`; returns it opened. A write that fails is
/// `ConvertError::Output`, anything wrong with the trace `ConvertError::Input`.
pub fn convert(kernelslist: &str, out: &str, layout: &Layout) -> Result<TraceFile, ConvertError> {
    let cmds = commands(kernelslist)?;
    // Pass 1: check everything, collect the touched granules and each kernel's geometry.
    let granule = layout.page_bytes.max(2 << 20);
    // Lane granules one by one (bounded by the footprint), copies as ranges: a copy's
    // granules one by one made memory and time grow with its size (GBs for 256 TiB).
    let mut touched = BTreeSet::new();
    let mut copied = vec![];
    let mut ops = vec![];
    for c in &cmds {
        match c {
            Command::Copy { addr, bytes } => {
                if *bytes > 0 {
                    copied.push((addr / granule, (addr + bytes - 1) / granule));
                }
                if !layout.managed {
                    ops.push(HostRec::MemcpyH2d { bytes: *bytes });
                }
            }
            Command::Kernel(p) => {
                let h = KernelReader::open(p)?.read(&mut |_, ev| {
                    if let Event::Inst(i) = ev {
                        if let Some((_, bytes)) = i.mem {
                            for &a in &i.lanes {
                                touched.insert(a / granule);
                                touched.insert((a + bytes as u64 - 1) / granule);
                            }
                        }
                    }
                    Ok(())
                })?;
                let name = if h.name.is_empty() { p.display().to_string() } else { h.name.clone() };
                ops.push(HostRec::Launch { name, threads: h.ctas() * h.threads_per_cta(), threads_per_cta: h.threads_per_cta() as u32 });
            }
        }
    }
    // Granule ranges in order, merged where they overlap or touch.
    let mut ranges: Vec<(u64, u64)> = copied.into_iter().chain(touched.into_iter().map(|g| (g, g))).collect();
    ranges.sort_unstable();
    let mut buffers: Vec<BufferRec> = vec![];
    for (first, last) in ranges {
        let (base, end) = (first * granule, (last + 1) * granule);
        match buffers.last_mut() {
            Some(b) if b.base + b.bytes >= base => b.bytes = b.bytes.max(end - b.base),
            _ => buffers.push(BufferRec { base, bytes: end - base, page_bytes: layout.page_bytes, managed: layout.managed }),
        }
    }
    let header = Header::new(Mode::Warps, format!("accelsim {kernelslist}"), WARP, buffers, ops);
    // Pass 2: write the ops.
    let werr = |e: std::io::Error| format!("{out}: cannot write: {e}");
    let output = |e: std::io::Error| ConvertError::Output(werr(e));
    let f = std::fs::File::create(out).map_err(output)?;
    let mut w = Writer::new(std::io::BufWriter::with_capacity(1 << 20, f), &header).map_err(output)?;
    // A write that fails inside the reader's callback goes back through it as a TraceError; this tells it
    // apart from the reader's own errors (a malformed line).
    let mut write_failed: Option<String> = None;
    for c in &cmds {
        let Command::Kernel(p) = c else { continue };
        w.begin_kernel();
        let mut ops = WarpOps::default();
        let (mut next_warp, mut open) = (0u32, false);
        let mut emit = |op: Op, s: &[u64; MAX_LANES]| {
            w.op(op, s).map_err(|e| {
                let m = werr(e);
                write_failed = Some(m.clone());
                TraceError(m)
            })
        };
        let read = KernelReader::open(p)?.read(&mut |h, ev| {
            let empty = |from: u32, to: u32, emit: &mut Emit| (from..to).try_for_each(|_| emit(Op::Exit, &[0; MAX_LANES]));
            match ev {
                Event::BeginTb => next_warp = 0,
                Event::Warp(n) => {
                    if open {
                        ops.exit(&mut emit)?;
                    }
                    empty(next_warp, n, &mut emit)?;
                    (next_warp, open) = (n + 1, true);
                }
                Event::Inst(i) => ops.inst(i, &mut emit)?,
                Event::EndTb => {
                    if open {
                        ops.exit(&mut emit)?;
                        open = false;
                    }
                    empty(next_warp, h.warps_per_cta(), &mut emit)?;
                }
            }
            Ok(())
        });
        if let Err(e) = read {
            return Err(write_failed.take().map_or(ConvertError::Input(e), ConvertError::Output));
        }
        w.end_kernel().map_err(output)?;
    }
    w.finish().map_err(output)?;
    Ok(TraceFile::open(out)?)
}

/// Read a kernelslist from memory (fuzzing): written to a temporary directory first.
pub fn check_bytes(kernelslist: &[u8], kernel: &[u8]) -> Result<(), TraceError> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("uvmsim-accelsim-check-{}-{n}", std::process::id()));
    let checked = (|| {
        std::fs::create_dir_all(&dir).map_err(|e| TraceError(e.to_string()))?;
        std::fs::write(dir.join("kernelslist.g"), kernelslist).map_err(|e| TraceError(e.to_string()))?;
        std::fs::write(dir.join("kernel-1.traceg"), kernel).map_err(|e| TraceError(e.to_string()))?;
        let out = TempPath::new("accelsim-check").map_err(|e| TraceError(e.to_string()))?;
        let list = dir.join("kernelslist.g").display().to_string();
        let f = convert(&list, &out, &Layout::default())?;
        super::tracefmt::for_each_op(&f, 4096, |_, _, _, _| Ok(()))
    })();
    // Nothing left behind in the temporary directory, whatever the outcome.
    let _ = std::fs::remove_dir_all(&dir);
    checked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{resolve, Source};

    fn data() -> String {
        format!("{}/../../tests/data/accelsim/kernelslist.g", env!("CARGO_MANIFEST_DIR"))
    }

    fn s(base: u64, stride: u64, n: u32) -> Lanes {
        Lanes::Strided { base, stride, n }
    }

    #[test]
    fn the_hand_made_trace_converts_to_the_documented_ops() {
        let out = TempPath::new("accelsim-test").unwrap();
        let f = convert(&data(), &out, &Layout::default()).unwrap();
        let got = ops_of(&f);
        let (ld, st) = (MemKind::Load, MemKind::Store);
        let ex = |n| Lanes::Explicit { n };
        let want = vec![
            (0, Op::Compute(2), vec![]),
            (0, Op::Mem { kind: ld, lanes: s(0x7f00_0000_0000, 4, 32), bytes: 4 }, vec![]),
            (0, Op::Wait, vec![]),
            (0, Op::Compute(1), vec![]),
            (0, Op::Mem { kind: st, lanes: s(0x7f00_0020_0000, 4, 32), bytes: 4 }, vec![]),
            (0, Op::Exit, vec![]),
            (1, Op::Mem { kind: ld, lanes: ex(16), bytes: 8 }, (0..16).map(|i| 0x7f00_0000_0080 + 8 * i).collect()),
            (1, Op::Compute(1), vec![]),
            (1, Op::Wait, vec![]),
            (1, Op::Compute(1), vec![]),
            (1, Op::Exit, vec![]),
            (2, Op::Mem { kind: st, lanes: ex(2), bytes: 4 }, vec![0x7f00_0020_0100, 0x7f00_0020_0104]),
            (2, Op::Mem { kind: ld, lanes: ex(1), bytes: 1 }, vec![0x7f00_0000_1000]),
            (2, Op::Exit, vec![]),
            (3, Op::Exit, vec![]),
        ];
        assert_eq!(got, want);
        assert_eq!(f.header.buffers, vec![BufferRec { base: 0x7f00_0000_0000, bytes: 4 << 20, page_bytes: 4096, managed: false }]);
        assert_eq!(f.header.ops[0], HostRec::MemcpyH2d { bytes: 512 });
        assert_eq!((f.totals.mem_ops, f.totals.lanes, f.totals.warps), (5, 83, 4));
    }

    #[test]
    fn the_hand_made_trace_simulates() {
        let run = |managed: bool| {
            let o = vec![
                "workload.kind=accelsim".to_string(),
                format!("workload.accelsim.path={:?}", data()),
                format!("workload.managed={managed}"),
            ];
            crate::world::simulate(&resolve(&[] as &[Source], &o).unwrap()).unwrap()
        };
        let m = run(false);
        let get = |m: &crate::stats::Metrics, k: &str| m.get(k).unwrap_or_else(|| panic!("{k}"));
        assert_eq!(get(&m, "gpu0.warp_mem_insts"), 5.0);
        assert_eq!(get(&m, "gpu0.warps"), 4.0);
        assert_eq!(get(&m, "host.memcpy_bytes"), 512.0);
        let m = run(true);
        assert_eq!(get(&m, "host.memcpy_bytes"), 0.0);
        assert_eq!(get(&m, "uvm.faults.unique"), 3.0);
    }

    #[test]
    fn malformed_traces_name_file_line_and_reason() {
        let good = std::fs::read_to_string(data().replace("kernelslist.g", "kernel-1.traceg")).unwrap();
        let cases = [
            (good.replace("-grid dim = (2,1,1)", "-grid dim = (2,1)"), ":3: `(2,1)` is not a dimension"),
            (good.replace("insts = 5", "insts = 6"), ":29: warp 1 starts with 1 instructions"),
            (good.replace("LDG.E 1 R2 4 1 0x7f0000000000 4", "LDG.E 1 R2 4 7 0x7f0000000000 4"), ":25: address format `7`"),
            (good.replace("LDG.E 1 R2 4 1", "LDG.E 1 R2 0 1"), ":25: LDG.E is a global memory instruction but mem_width is 0"),
            (
                good.replace("0x7f0000000080 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8", "0x7f0000000080 8 8"),
                ":31: instruction cut short: missing a delta",
            ),
            (good.replace("IADD 1 R8 0", "IADD 1 R8 0 5 6"), ":32: unexpected `6`"),
            (good.replace("warp = 1", "warp = 7"), ":29: warp 7"),
            // Warps of a 64-thread block are 0 and 1.
            (good.replace("warp = 1", "warp = 2"), ":29: warp 2"),
            // The second thread block of a grid of one: reported where it begins.
            (good.replace("-grid dim = (2,1,1)", "-grid dim = (1,1,1)"), ":37: more thread blocks than the grid's 1"),
            (good.replace("#END_TB\n\n#BEGIN_TB", "#END_TB"), ":37: `thread block = 1,0,0` outside a thread block"),
            (good.replace("(2,1,1)", "(3,1,1)"), "the grid has 3 thread blocks but the trace holds 2"),
            (good[..good.len() - 9].to_string(), "ends inside a thread block"),
            (good.replace("-accelsim tracer version = 4", "-accelsim tracer version = 2"), ":12: tracer version 2"),
            // Dimensions whose product overflows 64 bits are implausible, not wrapped (to a grid of 2 here).
            (good.replace("(2,1,1)", "(9223372036854775809,2,1)"), "implausible grid or block dimensions"),
            (good.replace("(2,1,1)", "(4294967296,4294967296,1)"), "implausible grid or block dimensions"),
            (good.replace("-block dim = (64,1,1)", "-block dim = (9223372036854775840,2,1)"), "implausible grid or block dimensions"),
        ];
        for (i, (text, want)) in cases.iter().enumerate() {
            let e = check_bytes(b"kernel-1.traceg\n", text.as_bytes()).expect_err(&format!("case {i}"));
            assert!(e.0.contains("kernel-1.traceg:") && e.0.contains(want), "case {i}: {e}");
        }
        let e = check_bytes(b"MemcpyHtoD,zz,5\n", good.as_bytes()).unwrap_err();
        assert!(e.0.contains("kernelslist.g:1: address `zz`"), "{e}");
    }

    /// Every op of the trace of one kernel (and the kernelslist's copies), converted: (warp, op, explicit lanes).
    fn converted(tag: &str, list: &str, kernel: &str) -> (TraceFile, Vec<(u64, Op, Vec<u64>)>) {
        let dir = std::env::temp_dir().join(format!("uvmsim-accelsim-unit-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("kernelslist.g"), list).unwrap();
        std::fs::write(dir.join("kernel-1.traceg"), kernel).unwrap();
        let out = TempPath::new("accelsim-test").unwrap();
        let f = convert(&dir.join("kernelslist.g").display().to_string(), &out, &Layout::default());
        let _ = std::fs::remove_dir_all(&dir);
        let f = f.unwrap();
        let got = ops_of(&f);
        (f, got)
    }

    /// Every op of a converted trace: (warp, op, explicit lanes' addresses).
    fn ops_of(f: &TraceFile) -> Vec<(u64, Op, Vec<u64>)> {
        let mut got = vec![];
        super::super::tracefmt::for_each_op(f, 4096, |_, w, op, sc| {
            let lanes = match op {
                Op::Mem { lanes: Lanes::Explicit { n }, .. } => sc[..n as usize].to_vec(),
                _ => vec![],
            };
            got.push((w, op, lanes));
            Ok(())
        })
        .unwrap();
        got
    }

    #[test]
    fn the_scoreboard_barriers_widths_and_granules_of_a_second_trace() {
        // Version 3 with line numbers; a block of 24 x 2 = 48 threads (2 warps) whose warp 0 is absent.
        let kernel = "-kernel name = k\n-grid dim = (1,1,1)\n-block dim = (24,2,1)\n-accelsim tracer version = 3\n\
                      -enable lineinfo = 1\n#traces format = ...\n#BEGIN_TB\nthread block = 0,0,0\nwarp = 1\ninsts = 12\n\
                      7 0000 ffffffff 1 R255 LDG.E.S16 1 R2 2 1 0x7f0000000000 0\n\
                      7 0010 ffffffff 1 R6 IMAD 2 R255 R255 0\n\
                      8 0020 ffffffff 1 R7 ATOMG.E.ADD 2 R2 R6 4 1 0x7f0000000100 4\n\
                      8 0030 ffffffff 1 R8 LDG.E 1 R2 4 1 0x7f0000000200 4\n\
                      9 0040 ffffffff 1 R9 FADD 2 R7 R3 0\n\
                      9 0050 ffffffff 0 STG.E 2 R2 R8 4 1 0x7f0000000300 4\n\
                      10 0060 00000001 1 R10 LDG.E.64 1 R2 8 0 0x7f00003ffffc\n\
                      10 0070 ffffffff 1 R11 FADD 2 R3 R3 0\n\
                      11 0080 ffffffff 0 BAR.RED.POPC 0 0\n\
                      11 0090 ffffffff 0 BAR.ARV 0 0\n\
                      12 00a0 ffffffff 1 R10 MOV 1 R12 0\n\
                      12 00b0 ffffffff 1 R13 MOV 1 R10 0\n#END_TB\n";
        let (f, got) = converted("second", "MemcpyHtoD,0x7f0000800000,2097152\nkernel-1.traceg\n", kernel);
        let (ld, st) = (MemKind::Load, MemKind::Store);
        let c = |n| (1, Op::Compute(n), vec![]);
        let (wait, bar) = ((1, Op::Wait, vec![]), (1, Op::Barrier, vec![]));
        let want = vec![
            (0, Op::Exit, vec![]),
            // R255 (RZ) is no dependency; `.S16` is 2 bytes a lane; stride 0 is strided still.
            (1, Op::Mem { kind: ld, lanes: s(0x7f00_0000_0000, 0, 32), bytes: 2 }, vec![]),
            c(1),
            // An atomic's destination is not waited for; the store reading the load's R8 is.
            (1, Op::Mem { kind: st, lanes: s(0x7f00_0000_0100, 4, 32), bytes: 4 }, vec![]),
            (1, Op::Mem { kind: ld, lanes: s(0x7f00_0000_0200, 4, 32), bytes: 4 }, vec![]),
            c(1),
            wait.clone(),
            (1, Op::Mem { kind: st, lanes: s(0x7f00_0000_0300, 4, 32), bytes: 4 }, vec![]),
            (1, Op::Mem { kind: ld, lanes: Lanes::Explicit { n: 1 }, bytes: 8 }, vec![0x7f00_003f_fffc]),
            // BAR.RED meets after the compute before it; BAR.ARV is compute.
            c(1),
            bar,
            c(1),
            // Writing the pending R10 waits; the wait clears it, so reading R10 then does not.
            wait,
            c(2),
            (1, Op::Exit, vec![]),
        ];
        assert_eq!(got, want);
        // The lone lane's 8 bytes from 0x7f00003ffffc reach granule 0x7f0000400000: granules 0..3 make one buffer;
        // the copy ends where granule 5 begins, so it is granule 4 alone.
        let buf = |base, mib: u64| BufferRec { base, bytes: mib << 20, page_bytes: 4096, managed: false };
        assert_eq!(f.header.buffers, vec![buf(0x7f00_0000_0000, 6), buf(0x7f00_0080_0000, 2)]);
        assert_eq!(f.header.ops[1], HostRec::Launch { name: "k".into(), threads: 48, threads_per_cta: 48 });
        // With managed memory the copies are left out: the hand-made trace's ops are its launch alone.
        let out = TempPath::new("accelsim-test").unwrap();
        let f = convert(&data(), &out, &Layout { page_bytes: 4096, managed: true }).unwrap();
        assert!(matches!(f.header.ops[..], [HostRec::Launch { .. }]), "{:?}", f.header.ops);
    }

    #[test]
    fn copies_up_to_one_tib_and_to_the_end_of_the_address_space_are_read() {
        let good = std::fs::read_to_string(data().replace("kernelslist.g", "kernel-1.traceg")).unwrap();
        // 2^40 bytes, and 256 bytes ending at 2^57.
        let list = b"MemcpyHtoD,0x0,1099511627776\nMemcpyHtoD,0x1ffffffffffff00,256\nkernel-1.traceg\n";
        check_bytes(list, good.as_bytes()).unwrap();
    }
}
