//! The `.uvmt` binary trace format: chunked, delta-encoded, deflate-compressed.
//!
//! How it works. A file is
//!
//! ```text
//! magic "UVMTRACE" | version u32 LE | header length u32 LE | header (JSON)
//! header CRC-32 u32 LE       version 2: of the version, length and header bytes (8 .. 16 + length)
//! chunk*                     each: 32-byte chunk header + deflate payload
//! end chunk ('E')            totals and, per kernel, the byte offset of its first chunk
//! footer                     offset of the end chunk u64 LE | "UVMTEND\0"
//! ```
//!
//! The header (JSON, [`Header`]) says what the body holds (`mode`): `warps`,
//! the per-warp instruction streams of a host program (its allocations,
//! copies and kernel launches with their geometry), or `timed`, the records
//! of a timed-access trace (the CSV format, converted losslessly).
//!
//! Warp bodies. Per kernel, the warps are stored in grid order, each as its
//! ops up to and including `Exit` ([`OpEncoder`]: a tag byte, then varints;
//! addresses are zigzag deltas from the warp's previous address, strided
//! lanes are base + stride + count, explicit lanes deltas from lane to lane,
//! and a repeated byte count, stride or lane count costs no byte). Small
//! warps are packed whole into group chunks (`G`: their byte lengths, then
//! their ops); a warp longer than one chunk is written alone as segment
//! chunks (`S`, the last one flagged). Chunks hold at most [`CHUNK_BYTES`]
//! of raw data (plus one op), so a reader holds at most one chunk per warp it
//! is replaying: memory is bounded by the resident warps, not the trace.
//!
//! Timed bodies (`T` chunks) hold records: time, GPU, CU and wavefront deltas,
//! kind, address delta, size; the delta state restarts in every chunk.
//!
//! Every chunk carries its kernel, first warp (or record), count, raw and
//! packed lengths and a CRC-32 of those fields and its raw bytes, so corruption and
//! truncation are reported with the byte offset of the chunk, never decoded
//! into wrong accesses; since version 2 the header has a CRC-32 too (a changed
//! byte in it is refused, not replayed as another program). Readers check the
//! version: versions 1 (no header CRC, no host-init fields) and 2 are read, any
//! other is refused, naming it.

use super::trace::TraceError;
use super::{Lanes, MemKind, Op, MAX_LANES};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::sync::Arc;

pub const MAGIC: &[u8; 8] = b"UVMTRACE";
const FOOTER_MAGIC: &[u8; 8] = b"UVMTEND\0";
/// Format version written. Version 2 (2026-11-30) adds the header's CRC-32 and the header fields
/// `host_init`, `host_threads`, `input_bytes` and the `prefetch` host operation; version 1 files
/// (no header CRC; the fields at their defaults) are read as before. Version 3 (2026-11-30) adds the
/// CTA barrier op (`OP_BARRIER`); files of versions 1 and 2 hold none and read as before.
pub const VERSION: u32 = 3;
/// The oldest format version read.
pub const OLDEST_VERSION: u32 = 1;
/// Raw bytes per chunk written (a chunk may exceed it by one op). 64 KiB since
/// session 12 (16 KiB before; readers take up to `MAX_RAW`, so both read): each
/// chunk's inflate set-up is amortised over 4x the ops, the 1 G replay ran 3-5%
/// faster and the file is 30% smaller, for 4x the memory per resident warp.
pub const CHUNK_BYTES: usize = 64 << 10;
/// Largest raw chunk a reader accepts (a corrupt length must not allocate gigabytes).
const MAX_RAW: u32 = 1 << 20;
/// Largest header or end chunk accepted.
const MAX_META: u32 = 64 << 20;
const CHUNK_HEADER: usize = 32;
/// Addresses are within a 57-bit virtual address space.
const ADDR_LIMIT: u64 = 1 << 57;

/// What a file's body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Warp instruction streams of a host program (replay: `workload.kind = "warp-trace"`).
    Warps,
    /// Timed accesses (replay: `workload.kind = "trace"`).
    Timed,
}

/// An allocation of the recorded program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferRec {
    pub base: u64,
    pub bytes: u64,
    pub page_bytes: u64,
    pub managed: bool,
}

/// A host operation of the recorded program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum HostRec {
    MemcpyH2d {
        bytes: u64,
    },
    MemcpyD2h {
        bytes: u64,
    },
    Launch {
        name: String,
        threads: u64,
        threads_per_cta: u32,
    },
    /// cudaMemPrefetchAsync of managed allocation `buffer` to the GPU (version 2).
    Prefetch {
        buffer: u32,
    },
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// The file header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub mode: Mode,
    /// Free text: the generator config or the original file.
    pub source: String,
    /// Lanes per warp the streams were generated for (warps mode).
    pub warp_size: u32,
    pub buffers: Vec<BufferRec>,
    pub ops: Vec<HostRec>,
    /// The host initialised the managed allocations before the first kernel (`workload.host_init`):
    /// they start CPU-resident and CPU-mapped; false: first touched by the GPU. Version 2, written
    /// only when false (absent: true).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub host_init: bool,
    /// Host threads that initialised them (`workload.host_threads`). Version 2, written only when not 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub host_threads: u32,
    /// Bytes of the program's input arrays, the ones `workload.memcpy_inputs` copies (the rest of the
    /// allocations are its outputs): a replay adds the explicit copies from them. Version 2, warp
    /// recordings of generators; absent: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_bytes: Option<u64>,
}

impl Header {
    /// A header with the host program's defaults: host-initialised managed allocations (one
    /// thread), input bytes unknown.
    pub fn new(mode: Mode, source: String, warp_size: u32, buffers: Vec<BufferRec>, ops: Vec<HostRec>) -> Header {
        Header { mode, source, warp_size, buffers, ops, host_init: true, host_threads: 1, input_bytes: None }
    }

    /// Kernel launches in order: (threads, threads per CTA).
    pub fn kernels(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.ops.iter().filter_map(|o| match o {
            HostRec::Launch { threads, threads_per_cta, .. } => Some((*threads, *threads_per_cta)),
            HostRec::MemcpyH2d { .. } | HostRec::MemcpyD2h { .. } | HostRec::Prefetch { .. } => None,
        })
    }

    /// Warps of a kernel with this geometry.
    pub fn warps_of(&self, threads: u64, tpc: u32) -> u64 {
        let ws = self.warp_size.max(1) as u64;
        let full = threads / tpc as u64;
        let rest = threads % tpc as u64;
        full * (tpc as u64).div_ceil(ws) + rest.div_ceil(ws)
    }

    fn check(&self, name: &str) -> Result<(), TraceError> {
        let bad = |why: String| Err(TraceError(format!("{name}: bad header: {why}")));
        if self.mode == Mode::Warps && !(1..=MAX_LANES as u32).contains(&self.warp_size) {
            return bad(format!("warp_size {} is not between 1 and {MAX_LANES}", self.warp_size));
        }
        for b in &self.buffers {
            if !b.page_bytes.is_power_of_two() || b.page_bytes < 4096 || b.base % b.page_bytes != 0 || b.bytes == 0 {
                return bad(format!("buffer at {:#x}: page_bytes must be a power of two >= 4096 dividing the base, bytes > 0", b.base));
            }
            if b.base.checked_add(b.bytes).map_or(true, |e| e > ADDR_LIMIT) {
                return bad(format!("buffer at {:#x} of {} bytes ends beyond the 57-bit address space", b.base, b.bytes));
            }
        }
        if !(1..=1024).contains(&self.host_threads) {
            return bad(format!("host_threads {} is not between 1 and 1024", self.host_threads));
        }
        let total: u64 = self.buffers.iter().map(|b| b.bytes).fold(0, u64::saturating_add);
        if self.input_bytes.is_some_and(|n| n > total) {
            return bad(format!("input_bytes {} exceeds the {total} bytes of the buffers", self.input_bytes.unwrap_or(0)));
        }
        for op in &self.ops {
            if let HostRec::Prefetch { buffer } = op {
                if !self.buffers.get(*buffer as usize).is_some_and(|b| b.managed) {
                    return bad(format!("prefetch of buffer {buffer}, which is not a managed allocation of the header"));
                }
            }
        }
        for (threads, tpc) in self.kernels() {
            if tpc == 0 || threads == 0 || threads > 1 << 50 {
                return bad("a kernel launch needs 1 to 2^50 threads and threads_per_cta > 0".into());
            }
        }
        Ok(())
    }
}

/// Totals and the kernel index, from the end chunk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Totals {
    /// Warps (warps mode) or records (timed mode).
    pub warps: u64,
    pub records: u64,
    pub ops: u64,
    pub mem_ops: u64,
    /// Active lanes of all memory ops (one per record in timed mode).
    pub lanes: u64,
    /// Byte offset of each kernel's first chunk (warps mode).
    pub kernel_offsets: Vec<u64>,
}

// ---------------------------------------------------------------- varints

#[inline]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

#[inline(always)]
fn get_varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    // With the longest varint's 10 bytes in `buf`, decode without a bounds check per byte
    // (the same result and errors as `get_varint_checked`).
    if let Some(b) = buf.get(*pos..*pos + 10) {
        let mut v = 0u64;
        for (i, &x) in b.iter().enumerate() {
            if i == 9 && x > 1 {
                break;
            }
            v |= ((x & 0x7f) as u64) << (7 * i);
            if x < 0x80 {
                *pos += i + 1;
                return Ok(v);
            }
        }
        *pos += 10;
        return Err("number overflows 64 bits".into());
    }
    get_varint_checked(buf, pos)
}

#[inline(never)]
fn get_varint_checked(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let Some(&b) = buf.get(*pos) else {
            return Err("op cut short (data ends inside a number)".into());
        };
        *pos += 1;
        if shift == 63 && b > 1 {
            return Err("number overflows 64 bits".into());
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Ok(v);
        }
        shift += 7;
        if shift > 63 {
            return Err("number overflows 64 bits".into());
        }
    }
}

// ---------------------------------------------------------------- op codec

const OP_EXIT: u8 = 0;
const OP_COMPUTE: u8 = 1;
const OP_WAIT: u8 = 2;
/// A CTA barrier: the wait op's code with bit 3 set (format version 3).
const OP_BARRIER: u8 = OP_WAIT | 1 << 3;
const OP_STRIDED: u8 = 3;
const OP_EXPLICIT: u8 = 4;
const SAME_BYTES: u8 = 1 << 5;
const SAME_STRIDE: u8 = 1 << 6;
const SAME_N: u8 = 1 << 7;

fn kind_bits(k: MemKind) -> u8 {
    match k {
        MemKind::Load => 0,
        MemKind::Store => 1 << 3,
        MemKind::Prefetch => 2 << 3,
    }
}

/// Delta state of one warp's stream (both directions), reset at each warp.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpState {
    addr: u64,
    stride: u64,
    n: u32,
    bytes: u32,
}

/// Encodes one warp's ops.
#[derive(Debug, Clone, Default)]
pub struct OpEncoder {
    s: OpState,
}

impl OpEncoder {
    pub fn encode(&mut self, op: Op, scratch: &[u64; MAX_LANES], out: &mut Vec<u8>) {
        match op {
            Op::Exit => out.push(OP_EXIT),
            Op::Wait => out.push(OP_WAIT),
            Op::Barrier => out.push(OP_BARRIER),
            Op::Compute(c) if c < 31 => out.push(OP_COMPUTE | ((c as u8 + 1) << 3)),
            Op::Compute(c) => {
                out.push(OP_COMPUTE);
                put_varint(out, c as u64);
            }
            Op::Mem { kind, lanes, bytes } => {
                let (Lanes::Strided { n, .. } | Lanes::Explicit { n }) = lanes;
                let mut tag = kind_bits(kind);
                let same_bytes = bytes == self.s.bytes;
                if same_bytes {
                    tag |= SAME_BYTES;
                }
                match lanes {
                    Lanes::Strided { base, stride, n } => {
                        tag |= OP_STRIDED;
                        let (same_stride, same_n) = (stride == self.s.stride, n == self.s.n);
                        tag |= if same_stride { SAME_STRIDE } else { 0 } | if same_n { SAME_N } else { 0 };
                        out.push(tag);
                        put_varint(out, zigzag(base.wrapping_sub(self.s.addr) as i64));
                        if !same_stride {
                            put_varint(out, stride);
                        }
                        if !same_n {
                            put_varint(out, n as u64);
                        }
                        if !same_bytes {
                            put_varint(out, bytes as u64);
                        }
                        self.s.addr = base;
                        self.s.stride = stride;
                    }
                    Lanes::Explicit { n } => {
                        tag |= OP_EXPLICIT;
                        let same_n = n == self.s.n;
                        if same_n {
                            tag |= SAME_N;
                        }
                        out.push(tag);
                        if !same_n {
                            put_varint(out, n as u64);
                        }
                        if !same_bytes {
                            put_varint(out, bytes as u64);
                        }
                        let mut prev = self.s.addr;
                        for (i, &a) in scratch[..n as usize].iter().enumerate() {
                            put_varint(out, zigzag(a.wrapping_sub(prev) as i64));
                            prev = a;
                            if i == 0 {
                                self.s.addr = a;
                            }
                        }
                    }
                }
                self.s.n = n;
                self.s.bytes = bytes;
            }
        }
    }
}

/// Decodes one warp's ops, checking every field: lane counts up to
/// [`MAX_LANES`], 1..=`max_bytes` bytes per lane, addresses inside 57 bits.
#[derive(Debug, Clone, Copy)]
pub struct OpDecoder {
    s: OpState,
    max_bytes: u32,
}

impl OpDecoder {
    pub fn new(max_bytes: u32) -> OpDecoder {
        OpDecoder { s: OpState::default(), max_bytes }
    }

    #[inline(always)]
    pub fn decode(&mut self, buf: &[u8], pos: &mut usize, scratch: &mut [u64; MAX_LANES]) -> Result<Op, String> {
        let Some(&tag) = buf.get(*pos) else {
            return Err("ops end without Exit".into());
        };
        *pos += 1;
        let kind = || match (tag >> 3) & 3 {
            0 => Ok(MemKind::Load),
            1 => Ok(MemKind::Store),
            2 => Ok(MemKind::Prefetch),
            _ => Err(format!("bad memory kind in op tag {tag:#04x}")),
        };
        match tag & 7 {
            OP_EXIT if tag == OP_EXIT => Ok(Op::Exit),
            OP_WAIT if tag == OP_WAIT => Ok(Op::Wait),
            OP_WAIT if tag == OP_BARRIER => Ok(Op::Barrier),
            OP_COMPUTE => {
                let small = tag >> 3;
                let c = if small > 0 { small as u64 - 1 } else { get_varint(buf, pos)? };
                u32::try_from(c).map(Op::Compute).map_err(|_| format!("compute of {c} cycles overflows 32 bits"))
            }
            OP_STRIDED => {
                let kind = kind()?;
                let base = self.s.addr.wrapping_add(unzigzag(get_varint(buf, pos)?) as u64);
                let stride = if tag & SAME_STRIDE != 0 { self.s.stride } else { get_varint(buf, pos)? };
                let n = self.lanes(tag, buf, pos)?;
                let bytes = self.bytes(tag, buf, pos)?;
                let last =
                    (n.max(1) as u64 - 1).checked_mul(stride).and_then(|d| d.checked_add(base)).and_then(|a| a.checked_add(bytes as u64));
                if last.map_or(true, |a| a > ADDR_LIMIT) {
                    return Err(format!("strided access from {base:#x} ({n} lanes, stride {stride}) leaves the 57-bit address space"));
                }
                self.s.addr = base;
                self.s.stride = stride;
                Ok(Op::Mem { kind, lanes: Lanes::Strided { base, stride, n }, bytes })
            }
            OP_EXPLICIT if tag & SAME_STRIDE == 0 => {
                let kind = kind()?;
                let n = self.lanes(tag, buf, pos)?;
                let bytes = self.bytes(tag, buf, pos)?;
                let mut prev = self.s.addr;
                for (i, slot) in scratch[..n as usize].iter_mut().enumerate() {
                    let a = prev.wrapping_add(unzigzag(get_varint(buf, pos)?) as u64);
                    if a.checked_add(bytes as u64).map_or(true, |e| e > ADDR_LIMIT) {
                        return Err(format!("lane address {a:#x} is beyond the 57-bit address space"));
                    }
                    *slot = a;
                    prev = a;
                    if i == 0 {
                        self.s.addr = a;
                    }
                }
                Ok(Op::Mem { kind, lanes: Lanes::Explicit { n }, bytes })
            }
            _ => Err(format!("unknown op tag {tag:#04x}")),
        }
    }

    /// The ops recorded streams mostly consist of (waits, short computes, strided
    /// accesses that repeat the last stride, lane count and width), decoded with
    /// only the checks they need; `None` (nothing consumed) for any other op,
    /// which `decode` then handles. Where it answers, it gives what `decode`
    /// gives (property-tested): the state's lane count and width were checked
    /// when they were set, a width of 0 meaning none was set yet.
    #[inline(always)]
    pub fn decode_common(&mut self, buf: &[u8], pos: &mut usize) -> Option<Op> {
        const KIND: u8 = 3 << 3;
        const KINDS: [MemKind; 4] = [MemKind::Load, MemKind::Store, MemKind::Prefetch, MemKind::Prefetch];
        let p = *pos;
        let tag = *buf.get(p)?;
        let s = self.s;
        if tag | KIND != OP_STRIDED | SAME_BYTES | SAME_STRIDE | SAME_N | KIND {
            if tag == OP_WAIT {
                *pos = p + 1;
                return Some(Op::Wait);
            }
            if tag & 7 == OP_COMPUTE && tag >= 8 {
                *pos = p + 1;
                return Some(Op::Compute((tag >> 3) as u32 - 1));
            }
            return None;
        }
        // Kind 3 is no kind; a width of 0 is none set yet; 11 bytes = the tag and a longest
        // varint, so the varint read below needs no bounds of its own to fail on.
        if tag & KIND == KIND || s.bytes == 0 || buf.len() < p + 11 {
            return None;
        }
        let mut q = p + 1;
        let base = s.addr.wrapping_add(unzigzag(get_varint(buf, &mut q).ok()?) as u64);
        let last =
            (s.n.max(1) as u64 - 1).checked_mul(s.stride).and_then(|d| d.checked_add(base)).and_then(|a| a.checked_add(s.bytes as u64));
        if last.map_or(true, |a| a > ADDR_LIMIT) {
            return None;
        }
        self.s.addr = base;
        *pos = q;
        let kind = KINDS[(tag >> 3) as usize & 3];
        Some(Op::Mem { kind, lanes: Lanes::Strided { base, stride: s.stride, n: s.n }, bytes: s.bytes })
    }

    fn lanes(&mut self, tag: u8, buf: &[u8], pos: &mut usize) -> Result<u32, String> {
        let n = if tag & SAME_N != 0 { self.s.n as u64 } else { get_varint(buf, pos)? };
        if n > MAX_LANES as u64 {
            return Err(format!("{n} lanes in one op (at most {MAX_LANES})"));
        }
        self.s.n = n as u32;
        Ok(n as u32)
    }

    fn bytes(&mut self, tag: u8, buf: &[u8], pos: &mut usize) -> Result<u32, String> {
        let b = if tag & SAME_BYTES != 0 { self.s.bytes as u64 } else { get_varint(buf, pos)? };
        if b == 0 || b > self.max_bytes as u64 {
            return Err(format!("{b} bytes per lane (1 to {} accepted here)", self.max_bytes));
        }
        self.s.bytes = b as u32;
        Ok(b as u32)
    }
}

// ---------------------------------------------------------------- timed records

/// One timed access (`trace::Record` without the unit conversions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimedRec {
    pub time_ns: u64,
    pub gpu: u32,
    pub cu: u32,
    pub wavefront: u64,
    pub kind: u8,
    pub vaddr: u64,
    pub size: u32,
}

const T_SAME_GPU: u8 = 1 << 2;
const T_SAME_CU: u8 = 1 << 3;
const T_SAME_SIZE: u8 = 1 << 4;

fn encode_timed(prev: &mut TimedRec, r: &TimedRec, out: &mut Vec<u8>) {
    let mut tag = r.kind & 3;
    tag |= if r.gpu == prev.gpu { T_SAME_GPU } else { 0 } | if r.cu == prev.cu { T_SAME_CU } else { 0 };
    tag |= if r.size == prev.size { T_SAME_SIZE } else { 0 };
    out.push(tag);
    put_varint(out, r.time_ns - prev.time_ns);
    if r.gpu != prev.gpu {
        put_varint(out, r.gpu as u64);
    }
    if r.cu != prev.cu {
        put_varint(out, r.cu as u64);
    }
    put_varint(out, zigzag(r.wavefront.wrapping_sub(prev.wavefront) as i64));
    put_varint(out, zigzag(r.vaddr.wrapping_sub(prev.vaddr) as i64));
    if r.size != prev.size {
        put_varint(out, r.size as u64);
    }
    *prev = *r;
}

fn decode_timed(prev: &mut TimedRec, buf: &[u8], pos: &mut usize) -> Result<TimedRec, String> {
    let tag = buf[*pos];
    *pos += 1;
    if tag & 3 == 3 || tag >> 5 != 0 {
        return Err(format!("bad record tag {tag:#04x}"));
    }
    let small = |v: u64, what: &str| u32::try_from(v).map_err(|_| format!("{what} {v} overflows 32 bits"));
    let time_ns = prev.time_ns.checked_add(get_varint(buf, pos)?).ok_or("time overflows")?;
    let gpu = if tag & T_SAME_GPU != 0 { prev.gpu } else { small(get_varint(buf, pos)?, "gpu")? };
    let cu = if tag & T_SAME_CU != 0 { prev.cu } else { small(get_varint(buf, pos)?, "cu")? };
    let wavefront = prev.wavefront.wrapping_add(unzigzag(get_varint(buf, pos)?) as u64);
    let vaddr = prev.vaddr.wrapping_add(unzigzag(get_varint(buf, pos)?) as u64);
    let size = if tag & T_SAME_SIZE != 0 { prev.size } else { small(get_varint(buf, pos)?, "size")? };
    let r = TimedRec { time_ns, gpu, cu, wavefront, kind: tag & 3, vaddr, size };
    *prev = r;
    Ok(r)
}

// ---------------------------------------------------------------- chunks

/// The fixed header of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// `G` group of whole warps, `S` segment of one warp, `T` timed records, `E` end.
    pub tag: u8,
    /// `S`: bit 0 = the warp's last segment.
    pub flags: u8,
    pub kernel: u32,
    /// `G`: grid index of the first warp; `S`: the warp; `T`: index of the first record.
    pub first: u64,
    /// `G`: warps; `S`: segment number; `T`: records.
    pub count: u32,
    pub raw_len: u32,
    pub packed_len: u32,
    pub crc: u32,
    /// Byte offset of the chunk in the file.
    pub at: u64,
}

impl Chunk {
    /// Byte offset of the chunk after this one.
    pub fn next(&self) -> u64 {
        self.at + CHUNK_HEADER as u64 + self.packed_len as u64
    }

    fn parse(b: &[u8; CHUNK_HEADER], at: u64) -> Chunk {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Chunk {
            tag: b[0],
            flags: b[1],
            kernel: u32_at(4),
            first: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            count: u32_at(16),
            raw_len: u32_at(20),
            packed_len: u32_at(24),
            crc: u32_at(28),
            at,
        }
    }

    fn bytes(&self) -> [u8; CHUNK_HEADER] {
        let mut b = [0u8; CHUNK_HEADER];
        b[0] = self.tag;
        b[1] = self.flags;
        b[4..8].copy_from_slice(&self.kernel.to_le_bytes());
        b[8..16].copy_from_slice(&self.first.to_le_bytes());
        b[16..20].copy_from_slice(&self.count.to_le_bytes());
        b[20..24].copy_from_slice(&self.raw_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.packed_len.to_le_bytes());
        b[28..32].copy_from_slice(&self.crc.to_le_bytes());
        b
    }
}

/// CRC-32 of a chunk: its header fields (all but the CRC) and its raw data.
fn crc32(head: &[u8; CHUNK_HEADER], data: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(&head[..CHUNK_HEADER - 4]);
    c.update(data);
    c.sum()
}

/// CRC-32 of the header (version 2): the version and length fields (`pre`, bytes 8..16) and the JSON.
fn header_crc(pre: &[u8], text: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(pre);
    c.update(text);
    c.sum()
}

/// The bytes of a trace: a file read by position (no shared cursor, so every
/// warp can read its own chunks), or a buffer in memory (tests, fuzzing).
#[derive(Debug)]
pub enum Blob {
    File(std::fs::File, u64),
    Mem(Vec<u8>),
}

impl Blob {
    pub fn open(path: &str) -> Result<Blob, TraceError> {
        TraceError::check_regular(path)?;
        let f = std::fs::File::open(path).map_err(|e| TraceError::open(path, &e))?;
        let len = f.metadata().map_err(|e| TraceError(format!("{path}: cannot read the trace: {e}")))?.len();
        Ok(Blob::File(f, len))
    }

    pub fn len(&self) -> u64 {
        match self {
            Blob::File(_, n) => *n,
            Blob::Mem(v) => v.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fill `buf` from byte `at`; false if the blob ends first.
    pub fn read_at(&self, at: u64, buf: &mut [u8]) -> std::io::Result<bool> {
        if at.checked_add(buf.len() as u64).map_or(true, |e| e > self.len()) {
            return Ok(false);
        }
        match self {
            Blob::Mem(v) => {
                buf.copy_from_slice(&v[at as usize..at as usize + buf.len()]);
                Ok(true)
            }
            #[cfg(unix)]
            Blob::File(f, _) => std::os::unix::fs::FileExt::read_exact_at(f, buf, at).map(|_| true),
            #[cfg(windows)]
            Blob::File(f, _) => {
                let mut done = 0;
                while done < buf.len() {
                    let n = std::os::windows::fs::FileExt::seek_read(f, &mut buf[done..], at + done as u64)?;
                    if n == 0 {
                        return Ok(false);
                    }
                    done += n;
                }
                Ok(true)
            }
        }
    }
}

/// An open `.uvmt` file: its name (for messages), bytes, header and totals.
#[derive(Debug)]
pub struct TraceFile {
    pub name: String,
    pub blob: Blob,
    pub header: Header,
    pub totals: Totals,
    /// Byte offset of the first chunk.
    pub body: u64,
    /// Byte offset of the end chunk.
    pub end: u64,
}

/// Is this file to be read as a `.uvmt`: does it start with the magic, or is it named `.uvmt`? By name too, so
/// that a binary trace with a damaged first byte is reported as one ("no UVMTRACE magic") rather than read as CSV
/// text and refused for its bytes (`uvmsim trace convert` never writes CSV text under a `.uvmt` name).
pub fn is_uvmt(path: &str) -> bool {
    // Only a regular file is opened: a FIFO would lose its first bytes, or block with no writer.
    let mut m = [0u8; 8];
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && (path.ends_with(".uvmt") || std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut m)).is_ok() && &m == MAGIC)
}

impl TraceFile {
    pub fn open(path: &str) -> Result<TraceFile, TraceError> {
        TraceFile::from_blob(path, Blob::open(path)?)
    }

    /// Check magic, version, header and footer; the chunks are checked as they are read.
    pub fn from_blob(name: &str, blob: Blob) -> Result<TraceFile, TraceError> {
        let bad = |at: u64, why: &str| TraceError(format!("{name}: byte {at}: {why}"));
        let io = |e: std::io::Error| TraceError(format!("{name}: cannot read the trace: {e}"));
        let mut pre = [0u8; 16];
        let mut magic = [0u8; 8];
        if !blob.read_at(0, &mut magic).map_err(io)? || &magic != MAGIC {
            return Err(bad(0, "not a uvmsim binary trace (no UVMTRACE magic)"));
        }
        if !blob.read_at(0, &mut pre).map_err(io)? {
            return Err(bad(blob.len(), "truncated: the file ends inside its 16-byte preamble (magic, version, header length)"));
        }
        let version = u32::from_le_bytes(pre[8..12].try_into().expect("4 bytes"));
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(bad(
                8,
                &format!(
                    "format version {version}; this uvmsim reads versions {OLDEST_VERSION} to {VERSION} (re-record or convert the trace)"
                ),
            ));
        }
        let hlen = u32::from_le_bytes(pre[12..16].try_into().expect("4 bytes"));
        if hlen > MAX_META {
            return Err(bad(12, &format!("header length {hlen} is implausible")));
        }
        let mut text = vec![0u8; hlen as usize];
        if !blob.read_at(16, &mut text).map_err(io)? {
            return Err(bad(16, "truncated inside the header"));
        }
        let mut body = 16 + hlen as u64;
        if version >= 2 {
            // Checked before the JSON is read: a changed byte that still parses is another program.
            let mut crc = [0u8; 4];
            if !blob.read_at(body, &mut crc).map_err(io)? {
                return Err(bad(body, "truncated: the file ends inside the header's CRC-32"));
            }
            if u32::from_le_bytes(crc) != header_crc(&pre[8..16], &text) {
                return Err(bad(
                    16,
                    &format!(
                        "bad header: bytes 8 to {} (version, length and header) do not match their CRC-32 at byte {body}: \
                         the header was changed or damaged",
                        body - 1
                    ),
                ));
            }
            body += 4;
        }
        let header: Header = serde_json::from_slice(&text).map_err(|e| bad(16, &format!("bad header: {e}")))?;
        header.check(name)?;
        // The footer names the end chunk; a file cut anywhere loses it.
        let len = blob.len();
        let mut foot = [0u8; 16];
        if len < body + 16 || !blob.read_at(len - 16, &mut foot).map_err(io)? || &foot[8..] != FOOTER_MAGIC {
            return Err(bad(len, "truncated: the end marker is missing (the file was cut short or is still being written)"));
        }
        let end = u64::from_le_bytes(foot[..8].try_into().expect("8 bytes"));
        if end < body || end > len - 16 {
            return Err(bad(len - 16, &format!("end chunk offset {end} is outside the body")));
        }
        let mut file = TraceFile { name: name.to_string(), blob, header, totals: Totals::default(), body, end };
        let (c, raw) = file.chunk_at(end, MAX_META)?;
        if c.tag != b'E' || c.next() != len - 16 {
            return Err(bad(end, "the footer does not point at the end chunk"));
        }
        file.totals = serde_json::from_slice(&raw).map_err(|e| bad(end, &format!("bad end chunk: {e}")))?;
        let kernels = file.header.kernels().count();
        if file.header.mode == Mode::Warps && file.totals.kernel_offsets.len() != kernels {
            return Err(bad(end, &format!("{} kernel offsets for {kernels} kernel launches", file.totals.kernel_offsets.len())));
        }
        if file.totals.kernel_offsets.iter().any(|&o| o < body || o > end) {
            return Err(bad(end, "a kernel offset is outside the body"));
        }
        Ok(file)
    }

    /// `name: byte AT`, for messages.
    pub fn at(&self, at: u64) -> String {
        format!("{}: byte {at}", self.name)
    }

    /// The chunk header at `at`.
    pub fn chunk_header(&self, at: u64) -> Result<Chunk, TraceError> {
        let mut h = [0u8; CHUNK_HEADER];
        let ok = self.blob.read_at(at, &mut h).map_err(|e| TraceError(format!("{}: cannot read the trace: {e}", self.at(at))))?;
        if !ok {
            return Err(TraceError(format!("{}: truncated: a chunk header is cut short", self.at(at))));
        }
        let c = Chunk::parse(&h, at);
        if !matches!(c.tag, b'G' | b'S' | b'T' | b'E') {
            return Err(TraceError(format!("{}: not a chunk (tag {:#04x}): corrupt trace", self.at(at), c.tag)));
        }
        if c.next() > self.blob.len() {
            return Err(TraceError(format!("{}: truncated: the chunk's {} bytes run past the end of the file", self.at(at), c.packed_len)));
        }
        Ok(c)
    }

    /// The chunk at `at`, decompressed and checked.
    pub fn chunk_at(&self, at: u64, max_raw: u32) -> Result<(Chunk, Vec<u8>), TraceError> {
        let c = self.chunk_header(at)?;
        let raw = self.payload(&c, max_raw)?;
        Ok((c, raw))
    }

    /// The raw bytes of chunk `c`.
    pub fn payload(&self, c: &Chunk, max_raw: u32) -> Result<Vec<u8>, TraceError> {
        self.payload_with(c, max_raw, |raw| raw.to_vec())
    }

    /// The raw bytes of chunk `c`, shared (a warp's ops).
    pub fn payload_shared(&self, c: &Chunk, max_raw: u32) -> Result<ChunkData, TraceError> {
        self.payload_with(c, max_raw, |raw| ChunkData::from(raw))
    }

    /// Read, inflate and check chunk `c` in this thread's reused buffers, and hand its
    /// raw bytes to `f` (which copies them out: they are overwritten by the next chunk).
    fn payload_with<T>(&self, c: &Chunk, max_raw: u32, f: impl FnOnce(&[u8]) -> T) -> Result<T, TraceError> {
        let bad = |why: String| TraceError(format!("{}: {why}", self.at(c.at)));
        if c.raw_len > max_raw || c.packed_len > max_raw.saturating_mul(2).saturating_add(1024) {
            return Err(bad(format!("chunk length {} (packed {}) is implausible: corrupt trace", c.raw_len, c.packed_len)));
        }
        INFLATER.with(|cell| {
            let inf = &mut *cell.borrow_mut();
            let (pl, rl) = (c.packed_len as usize, c.raw_len as usize);
            grow(&mut inf.packed, pl);
            grow(&mut inf.raw, rl);
            let packed = &mut inf.packed[..pl];
            if !self.blob.read_at(c.at + CHUNK_HEADER as u64, packed).map_err(|e| bad(format!("cannot read the trace: {e}")))? {
                return Err(bad("truncated: the chunk's data is cut short".into()));
            }
            let raw = &mut inf.raw[..rl];
            let n = inflate_exact(&mut inf.state, packed, raw).map_err(|e| bad(format!("corrupt chunk data: {e}")))?;
            if n != rl || crc32(&c.bytes(), raw) != c.crc {
                return Err(bad("corrupt chunk: its data does not match its length and checksum".into()));
            }
            let out = f(raw);
            // Keep only buffers of chunk size (a header or end chunk may be far larger).
            for b in [&mut inf.packed, &mut inf.raw] {
                if b.len() > 2 * MAX_RAW as usize {
                    *b = Vec::new();
                }
            }
            Ok(out)
        })
    }
}

/// A thread's chunk-reading state, reused from chunk to chunk: fresh buffers and a
/// fresh inflate state would be zeroed for every chunk (miniz's state is about
/// 11 KiB, its Huffman tables are rebuilt per block anyway).
struct Inflater {
    state: Box<miniz_oxide::inflate::core::DecompressorOxide>,
    packed: Vec<u8>,
    raw: Vec<u8>,
}

thread_local! {
    static INFLATER: std::cell::RefCell<Inflater> =
        std::cell::RefCell::new(Inflater { state: Box::default(), packed: Vec::new(), raw: Vec::new() });
}

/// Make `buf` at least `len` bytes long (zeroing only the new bytes); a buffer
/// left far larger by a failed header or end chunk goes when chunk sizes return.
fn grow(buf: &mut Vec<u8>, len: usize) {
    if buf.len() > 2 * MAX_RAW as usize && len <= 2 * MAX_RAW as usize {
        *buf = Vec::new();
    }
    if buf.len() < len {
        buf.resize(len, 0);
    }
}

/// Inflate raw-deflate `packed` in one call into `out`; returns how many bytes the
/// data filled. Data that does not fit is an error; data that falls short is for
/// the caller's length check. Back-references before the start of `out` are errors
/// (a non-wrapping output buffer), so stale bytes in a reused `out` never leak in.
/// (A streaming decoder would zero about 75 KiB of state and window per chunk and
/// copy every byte through its window: 5% of a replay's instructions.)
fn inflate_exact(state: &mut miniz_oxide::inflate::core::DecompressorOxide, packed: &[u8], out: &mut [u8]) -> Result<usize, String> {
    use miniz_oxide::inflate::core::inflate_flags::{TINFL_FLAG_IGNORE_ADLER32, TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF};
    use miniz_oxide::inflate::TINFLStatus;
    state.init();
    let flags = TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF | TINFL_FLAG_IGNORE_ADLER32;
    match miniz_oxide::inflate::core::decompress(state, packed, out, 0, flags) {
        (TINFLStatus::Done, _, n) => Ok(n),
        // In words: the decoder's status names (HasMoreOutput, ...) mean nothing to a user.
        (TINFLStatus::HasMoreOutput, ..) => Err("the compressed data inflates to more than the chunk's recorded size".into()),
        (TINFLStatus::NeedsMoreInput | TINFLStatus::FailedCannotMakeProgress, ..) => {
            Err("the compressed data ends before its last block".into())
        }
        _ => Err("the compressed data is not valid deflate".into()),
    }
}

// ---------------------------------------------------------------- writer

/// Writes a `.uvmt` file: header first, then chunks, then the end chunk and footer.
pub struct Writer<W: Write> {
    out: W,
    at: u64,
    totals: Totals,
    mode: Mode,
    kernel: u32,
    kernels: u32,
    // warps mode: the open group chunk (warp lengths and bodies), the warp being written
    group_first: u64,
    group_lens: Vec<u64>,
    group: Vec<u8>,
    warp: u64,
    cur: Vec<u8>,
    segments: u32,
    enc: OpEncoder,
    // timed mode
    timed: Vec<u8>,
    timed_n: u32,
    timed_prev: TimedRec,
    scratch: Vec<u8>,
}

impl<W: Write> Writer<W> {
    pub fn new(mut out: W, header: &Header) -> std::io::Result<Writer<W>> {
        let text = serde_json::to_vec(header).expect("header serializes");
        let mut pre = VERSION.to_le_bytes().to_vec();
        pre.extend_from_slice(&(text.len() as u32).to_le_bytes());
        out.write_all(MAGIC)?;
        out.write_all(&pre)?;
        out.write_all(&text)?;
        out.write_all(&header_crc(&pre, &text).to_le_bytes())?;
        Ok(Writer {
            out,
            at: 16 + text.len() as u64 + 4,
            totals: Totals::default(),
            mode: header.mode,
            kernel: 0,
            kernels: header.kernels().count() as u32,
            group_first: 0,
            group_lens: vec![],
            group: vec![],
            warp: 0,
            cur: vec![],
            segments: 0,
            enc: OpEncoder::default(),
            timed: vec![],
            timed_n: 0,
            timed_prev: TimedRec::default(),
            scratch: vec![],
        })
    }

    fn chunk(&mut self, tag: u8, flags: u8, first: u64, count: u32, raw: &[u8]) -> std::io::Result<()> {
        self.scratch.clear();
        let mut e = flate2::write::DeflateEncoder::new(std::mem::take(&mut self.scratch), flate2::Compression::fast());
        e.write_all(raw)?;
        let packed = e.finish()?;
        let mut c = Chunk {
            tag,
            flags,
            kernel: self.kernel,
            first,
            count,
            raw_len: raw.len() as u32,
            packed_len: packed.len() as u32,
            crc: 0,
            at: self.at,
        };
        c.crc = crc32(&c.bytes(), raw);
        self.out.write_all(&c.bytes())?;
        self.out.write_all(&packed)?;
        self.at = c.next();
        self.scratch = packed;
        Ok(())
    }

    /// Start the next kernel launch of the header (warps mode).
    pub fn begin_kernel(&mut self) {
        assert_eq!(self.mode, Mode::Warps);
        assert!((self.totals.kernel_offsets.len() as u32) < self.kernels, "more kernels than the header launches");
        self.kernel = self.totals.kernel_offsets.len() as u32;
        self.totals.kernel_offsets.push(self.at);
        self.warp = 0;
        self.group_first = 0;
    }

    fn flush_group(&mut self) -> std::io::Result<()> {
        if self.group_lens.is_empty() {
            return Ok(());
        }
        let mut raw = Vec::with_capacity(self.group.len() + 3 * self.group_lens.len());
        for &l in &self.group_lens {
            put_varint(&mut raw, l);
        }
        raw.extend_from_slice(&self.group);
        let n = self.group_lens.len() as u32;
        self.chunk(b'G', 0, self.group_first, n, &raw)?;
        self.group_lens.clear();
        self.group.clear();
        Ok(())
    }

    /// Append one op of the current warp; `Exit` ends the warp (the next op starts the next warp).
    pub fn op(&mut self, op: Op, scratch: &[u64; MAX_LANES]) -> std::io::Result<()> {
        self.enc.encode(op, scratch, &mut self.cur);
        self.totals.ops += 1;
        if let Op::Mem { lanes, .. } = op {
            self.totals.mem_ops += 1;
            self.totals.lanes += match lanes {
                Lanes::Strided { n, .. } | Lanes::Explicit { n } => n as u64,
            };
        }
        if op == Op::Exit {
            if self.segments > 0 {
                let cur = std::mem::take(&mut self.cur);
                self.chunk(b'S', 1, self.warp, self.segments, &cur)?;
                self.cur = cur;
            } else {
                if self.group.len() + self.cur.len() > CHUNK_BYTES {
                    self.flush_group()?;
                }
                if self.group_lens.is_empty() {
                    self.group_first = self.warp;
                }
                self.group_lens.push(self.cur.len() as u64);
                self.group.extend_from_slice(&self.cur);
            }
            self.cur.clear();
            self.segments = 0;
            self.enc = OpEncoder::default();
            self.warp += 1;
            self.totals.warps += 1;
        } else if self.cur.len() >= CHUNK_BYTES {
            // A long warp: written alone, in segments.
            if self.segments == 0 {
                self.flush_group()?;
            }
            let cur = std::mem::take(&mut self.cur);
            self.chunk(b'S', 0, self.warp, self.segments, &cur)?;
            self.cur = cur;
            self.cur.clear();
            self.segments += 1;
        }
        Ok(())
    }

    /// End the current kernel (warps mode).
    pub fn end_kernel(&mut self) -> std::io::Result<()> {
        assert!(self.cur.is_empty() && self.segments == 0, "a warp is still open");
        self.flush_group()
    }

    /// Append one timed record (timed mode).
    pub fn record(&mut self, r: &TimedRec) -> std::io::Result<()> {
        let mut prev = self.timed_prev;
        encode_timed(&mut prev, r, &mut self.timed);
        self.timed_prev = prev;
        self.timed_n += 1;
        self.totals.records += 1;
        self.totals.ops += 1;
        self.totals.mem_ops += 1;
        self.totals.lanes += 1;
        if self.timed.len() >= CHUNK_BYTES {
            self.flush_timed()?;
        }
        Ok(())
    }

    fn flush_timed(&mut self) -> std::io::Result<()> {
        if self.timed_n > 0 {
            let raw = std::mem::take(&mut self.timed);
            self.chunk(b'T', 0, self.totals.records - self.timed_n as u64, self.timed_n, &raw)?;
            self.timed = raw;
            self.timed.clear();
            self.timed_n = 0;
            self.timed_prev = TimedRec::default();
        }
        Ok(())
    }

    /// Write the end chunk and footer; returns the output and the totals.
    pub fn finish(mut self) -> std::io::Result<(W, Totals)> {
        self.flush_group()?;
        self.flush_timed()?;
        if self.mode == Mode::Warps && self.totals.kernel_offsets.len() as u32 != self.kernels {
            return Err(std::io::Error::other(format!(
                "the header launches {} kernels but {} were written",
                self.kernels,
                self.totals.kernel_offsets.len()
            )));
        }
        let end = self.at;
        let meta = serde_json::to_vec(&self.totals).expect("totals serialize");
        self.kernel = 0;
        self.chunk(b'E', 0, 0, 0, &meta)?;
        self.out.write_all(&end.to_le_bytes())?;
        self.out.write_all(FOOTER_MAGIC)?;
        self.out.flush()?;
        Ok((self.out, self.totals))
    }
}

// ---------------------------------------------------------------- sequential readers

/// Reads a timed body record by record, one chunk in memory.
pub struct TimedReader {
    file: TraceFile,
    next: u64,
    raw: Vec<u8>,
    pos: usize,
    left: u32,
    chunk_at: u64,
    index: u64,
    prev: TimedRec,
}

impl TimedReader {
    pub fn new(file: TraceFile) -> Result<TimedReader, TraceError> {
        if file.header.mode != Mode::Timed {
            return Err(TraceError(format!(
                "{}: holds warp instruction streams, not timed accesses: replay it with workload.kind = \"warp-trace\"",
                file.name
            )));
        }
        let next = file.body;
        Ok(TimedReader { file, next, raw: vec![], pos: 0, left: 0, chunk_at: 0, index: 0, prev: TimedRec::default() })
    }

    /// The header's source text.
    pub fn source(&self) -> &str {
        &self.file.header.source
    }

    /// Where the reader is: file, the number of the last record read (1-based, as a decode error
    /// numbers the record it fails on) and its chunk's byte offset.
    pub fn position(&self) -> String {
        format!("{}: record {} (chunk at byte {})", self.file.name, self.index, self.chunk_at)
    }

    pub fn next_record(&mut self) -> Result<Option<TimedRec>, TraceError> {
        while self.left == 0 {
            if self.next >= self.file.end {
                if self.index != self.file.totals.records {
                    return Err(TraceError(format!(
                        "{}: {} records read, the end chunk says {}: corrupt trace",
                        self.file.at(self.file.end),
                        self.index,
                        self.file.totals.records
                    )));
                }
                return Ok(None);
            }
            let (c, raw) = self.file.chunk_at(self.next, MAX_RAW)?;
            if c.tag != b'T' || c.first != self.index || c.count == 0 || c.next() > self.file.end {
                return Err(TraceError(format!("{}: expected timed-record chunk {}: corrupt trace", self.file.at(c.at), self.index)));
            }
            (self.raw, self.pos, self.left, self.chunk_at, self.next) = (raw, 0, c.count, c.at, c.next());
            self.prev = TimedRec::default();
        }
        if self.pos >= self.raw.len() {
            return Err(TraceError(format!("{}: chunk holds fewer records than it says: corrupt trace", self.file.at(self.chunk_at))));
        }
        let r = decode_timed(&mut self.prev, &self.raw, &mut self.pos)
            .map_err(|e| TraceError(format!("{}: record {}: {e}", self.file.at(self.chunk_at), self.index + 1)))?;
        self.left -= 1;
        self.index += 1;
        if self.left == 0 && self.pos != self.raw.len() {
            return Err(TraceError(format!("{}: chunk has bytes after its last record: corrupt trace", self.file.at(self.chunk_at))));
        }
        Ok(Some(r))
    }
}

/// A warp's ops in a chunk: shared by the warps of a group, owned by a segment's warp.
pub type ChunkData = Arc<[u8]>;

/// Reads every warp of every kernel in file order (for `trace info`, `convert`
/// and tests): calls `f(kernel, warp, op, lanes)` for each op. Stops with an error
/// when the thread's work is interrupted (`trace::check_cancel`).
pub fn for_each_op(
    file: &TraceFile,
    max_bytes: u32,
    mut f: impl FnMut(u32, u64, Op, &[u64; MAX_LANES]) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let mut scratch = [0u64; MAX_LANES];
    let mut ops = 0u64;
    for (k, (threads, tpc)) in file.header.kernels().enumerate() {
        let warps = file.header.warps_of(threads, tpc);
        let mut cursor = KernelCursor::new(file, k as u32)?;
        for w in 0..warps {
            let mut ws = cursor.warp(file, w, max_bytes)?;
            loop {
                super::trace::check_cancel(ops, &file.name)?;
                ops += 1;
                let op = ws.next(file, &mut scratch)?;
                f(k as u32, w, op, &scratch)?;
                if op == Op::Exit {
                    break;
                }
            }
        }
        cursor.finish(file, warps)?;
    }
    Ok(())
}

/// An open group chunk: its data, each warp's byte range, its first warp and byte offset.
type Group = (ChunkData, Vec<(u32, u32)>, u64, u64);

/// The dispatch position in one kernel's chunks: hands out warps in grid order.
#[derive(Debug, Clone)]
pub struct KernelCursor {
    kernel: u32,
    /// Next chunk to read.
    next: u64,
    /// The open group chunk: its data, where each warp starts, its first warp.
    group: Option<Group>,
}

impl KernelCursor {
    pub fn new(file: &TraceFile, kernel: u32) -> Result<KernelCursor, TraceError> {
        let next =
            *file.totals.kernel_offsets.get(kernel as usize).ok_or_else(|| TraceError(format!("{}: no kernel {kernel}", file.name)))?;
        Ok(KernelCursor { kernel, next, group: None })
    }

    fn expect(&self, file: &TraceFile, c: &Chunk, what: &str) -> Result<(), TraceError> {
        if c.kernel != self.kernel || c.next() > file.end {
            return Err(TraceError(format!("{}: expected {what} of kernel {}: corrupt trace", file.at(c.at), self.kernel)));
        }
        Ok(())
    }

    /// The stream of warp `w`. Warps must be asked for in increasing grid order, but
    /// not every warp: a GPU of a multi-GPU run reads only its own CTAs' warps, and
    /// the chunks of the others are passed over by their headers.
    pub fn warp(&mut self, file: &TraceFile, w: u64, max_bytes: u32) -> Result<WarpCursor, TraceError> {
        if let Some((data, starts, first, at)) = &self.group {
            if w >= *first && w - *first < starts.len() as u64 {
                let (s, e) = starts[(w - first) as usize];
                return Ok(WarpCursor::new(data.clone(), s as usize, e as usize, *at, None, w, max_bytes));
            }
        }
        self.group = None;
        loop {
            let c = file.chunk_header(self.next)?;
            match c.tag {
                b'G' => {
                    self.expect(file, &c, &format!("warps from {w}"))?;
                    if c.first > w || c.count == 0 {
                        return Err(TraceError(format!(
                            "{}: expected warp {w} of kernel {}, found warp {}: corrupt trace",
                            file.at(c.at),
                            self.kernel,
                            c.first
                        )));
                    }
                    if w - c.first >= c.count as u64 {
                        // Warps of CTAs this GPU does not run.
                        self.next = c.next();
                        continue;
                    }
                    let raw = file.payload_shared(&c, MAX_RAW)?;
                    if c.count as usize > raw.len() {
                        return Err(TraceError(format!("{}: {} warps in {} bytes: corrupt trace", file.at(c.at), c.count, raw.len())));
                    }
                    let mut pos = 0;
                    let mut lens = Vec::with_capacity(c.count as usize);
                    for _ in 0..c.count {
                        lens.push(
                            get_varint(&raw, &mut pos)
                                .map_err(|e| TraceError(format!("{}: warp lengths: {e}: corrupt trace", file.at(c.at))))?,
                        );
                    }
                    let mut starts = Vec::with_capacity(lens.len());
                    for l in lens {
                        let end = (pos as u64).checked_add(l).filter(|&e| e <= raw.len() as u64);
                        let Some(end) = end else {
                            return Err(TraceError(format!("{}: warp lengths exceed the chunk: corrupt trace", file.at(c.at))));
                        };
                        starts.push((pos as u32, end as u32));
                        pos = end as usize;
                    }
                    if pos != raw.len() {
                        return Err(TraceError(format!("{}: bytes after the chunk's last warp: corrupt trace", file.at(c.at))));
                    }
                    self.next = c.next();
                    let (s, e) = starts[(w - c.first) as usize];
                    let data = raw;
                    self.group = Some((data.clone(), starts, c.first, c.at));
                    return Ok(WarpCursor::new(data, s as usize, e as usize, c.at, None, w, max_bytes));
                }
                b'S' => {
                    self.expect(file, &c, &format!("warp {w}"))?;
                    if c.first > w || c.count != 0 {
                        return Err(TraceError(format!("{}: expected the first segment of warp {w}: corrupt trace", file.at(c.at))));
                    }
                    // The warp's other segments (headers only): the next warp starts after them.
                    let last = self.last_segment(file, c)?;
                    self.next = last.next();
                    if c.first < w {
                        continue;
                    }
                    let raw = file.payload_shared(&c, MAX_RAW)?;
                    let len = raw.len();
                    return Ok(WarpCursor::new(raw, 0, len, c.at, Some(c), w, max_bytes));
                }
                _ => return Err(TraceError(format!("{}: expected warp {w} of kernel {}: corrupt trace", file.at(c.at), self.kernel))),
            }
        }
    }

    /// The last segment of the warp whose first segment is `c`, checked segment by segment.
    fn last_segment(&self, file: &TraceFile, c: Chunk) -> Result<Chunk, TraceError> {
        let w = c.first;
        let mut last = c;
        while last.flags & 1 == 0 {
            let n = file.chunk_header(last.next())?;
            if n.tag != b'S' || n.first != w || n.count != last.count + 1 {
                return Err(TraceError(format!("{}: expected segment {} of warp {w}: corrupt trace", file.at(n.at), last.count + 1)));
            }
            self.expect(file, &n, &format!("warp {w}"))?;
            last = n;
        }
        Ok(last)
    }

    /// After the kernel's last warp: nothing of it may be left.
    pub fn finish(&self, file: &TraceFile, warps: u64) -> Result<(), TraceError> {
        if let Some((_, starts, first, at)) = &self.group {
            if first + starts.len() as u64 != warps {
                return Err(TraceError(format!("{}: kernel {} has more warps than its launch: corrupt trace", file.at(*at), self.kernel)));
            }
        }
        if self.next < file.end {
            let c = file.chunk_header(self.next)?;
            if c.kernel == self.kernel && c.tag != b'E' {
                return Err(TraceError(format!("{}: kernel {} has more warps than its launch: corrupt trace", file.at(c.at), self.kernel)));
            }
        }
        Ok(())
    }
}

/// Bytes of a warp's ops the cursor keeps inline (see [`WarpCursor`]).
pub const WINDOW: usize = 128;
/// Longest strided op (tag and four 10-byte varints): with fewer bytes left in
/// the window, the next op is decoded from the chunk and the window refilled.
const MAX_STRIDED_OP: usize = 41;
/// With fewer bytes than this left in the window when its warp yields, the window
/// is topped up from the chunk (see [`WarpCursor::top_up`]).
const TOP_UP_LEFT: usize = 64;
/// With fewer bytes than this left, the top-up's data is prefetched: a visit's
/// worth of ops (a triad's loads, wait, compute and store: about 20 bytes) ahead.
const PREFETCH_LEFT: usize = TOP_UP_LEFT + 32;

/// One warp's read position. The next [`WINDOW`] bytes of its ops are copied
/// inline and decoded from there, so that a warp's visit touches only its own
/// state: with thousands of warps interleaved, the chunk buffers (one 64 KiB
/// chunk per warp, spread over the heap) are out of the CPU's caches and TLB
/// by the time a warp issues again. The chunk is read only to refill the window
/// (about once per 10–20 ops, when the warp yields), and for ops that do not fit in it.
#[derive(Debug, Clone)]
pub struct WarpCursor {
    win: [u8; WINDOW],
    /// Read position in `win`, and how many bytes of it are valid.
    wpos: u16,
    wlen: u16,
    dec: OpDecoder,
    /// `data[win_at..]` is in the window; the warp's ops end at `data[end]` (chunks are under 4 GiB).
    win_at: u32,
    end: u32,
    /// The chunk data the window is a copy of (inline: a top-up reads it without another miss).
    data: ChunkData,
    rest: Box<CursorRest>,
}

/// The parts of a cursor not needed on the fast path.
#[derive(Debug, Clone)]
struct CursorRest {
    /// Byte offset of the chunk `data` came from.
    chunk_at: u64,
    /// The segment chunk `data` came from, for a long warp.
    segment: Option<Chunk>,
    warp: u64,
}

impl WarpCursor {
    fn new(data: ChunkData, pos: usize, end: usize, chunk_at: u64, segment: Option<Chunk>, warp: u64, max_bytes: u32) -> WarpCursor {
        let rest = Box::new(CursorRest { chunk_at, segment, warp });
        let (win_at, end) = (pos as u32, end as u32);
        WarpCursor { win: [0; WINDOW], wpos: 0, wlen: 0, dec: OpDecoder::new(max_bytes), win_at, end, data, rest }
    }

    /// The next op; an error names the file, the chunk's byte offset, the warp and the reason.
    #[inline]
    pub fn next(&mut self, file: &TraceFile, scratch: &mut [u64; MAX_LANES]) -> Result<Op, TraceError> {
        match self.next_common() {
            Some(op) => Ok(op),
            None => self.next_other(file, scratch),
        }
    }

    /// The next op if it is a common one (see [`OpDecoder::decode_common`]) whole in
    /// the window, so the same as in the data; otherwise `None`, and `next_other` decodes it.
    /// (Split from `next` so that the replay's hot path moves no `Result`.)
    #[inline(always)]
    pub fn next_common(&mut self) -> Option<Op> {
        let (wpos, wlen) = (self.wpos as usize, self.wlen as usize);
        if wlen - wpos < PREFETCH_LEFT {
            // A top-up is near (when this visit or the next ends): start loading what it
            // reads, the chunk bytes after the window. (Never past the data: `wrapping_add`.)
            let ahead = self.data.as_ptr().wrapping_add(self.win_at as usize + wlen);
            crate::gpu::prefetch(ahead);
            crate::gpu::prefetch(ahead.wrapping_add(64));
        }
        let mut p = wpos;
        let op = self.dec.decode_common(&self.win[..wlen], &mut p)?;
        self.wpos = p as u16;
        Some(op)
    }

    /// The next op, after `next_common` found none.
    #[inline]
    pub fn next_other(&mut self, file: &TraceFile, scratch: &mut [u64; MAX_LANES]) -> Result<Op, TraceError> {
        let (wpos, wlen) = (self.wpos as usize, self.wlen as usize);
        // The fast path: the window holds a whole strided op, or the rest of the warp's data.
        // Decoding a prefix of the data gives the same op as decoding the data, or fails
        // (an op cut short): then, and for the Exit check, the chunk decides.
        if wlen - wpos >= MAX_STRIDED_OP || self.win_at as usize + wlen == self.end as usize {
            let saved = self.dec.s;
            let mut p = wpos;
            match self.dec.decode(&self.win[..wlen], &mut p, scratch) {
                Ok(op) if op != Op::Exit => {
                    self.wpos = p as u16;
                    return Ok(op);
                }
                _ => self.dec.s = saved,
            }
        }
        self.next_from_chunk(file, scratch)
    }

    /// The next op decoded from the chunk, never from the window (the reference the window must match).
    #[cfg(test)]
    fn next_unwindowed(&mut self, file: &TraceFile, scratch: &mut [u64; MAX_LANES]) -> Result<Op, TraceError> {
        self.next_from_chunk(file, scratch)
    }

    /// Decode the next op from the chunk itself (checking what the window cannot), then refill the window.
    #[inline(never)]
    fn next_from_chunk(&mut self, file: &TraceFile, scratch: &mut [u64; MAX_LANES]) -> Result<Op, TraceError> {
        let mut pos = self.win_at as usize + self.wpos as usize;
        if pos >= self.end as usize {
            self.next_segment(file)?;
            pos = 0;
        }
        let r = &*self.rest;
        let end = self.end as usize;
        let op = self
            .dec
            .decode(&self.data[..end], &mut pos, scratch)
            .map_err(|e| TraceError(format!("{}: warp {}, data byte {pos}: {e}: corrupt trace", file.at(r.chunk_at), r.warp)))?;
        if op == Op::Exit && pos != end {
            return Err(TraceError(format!("{}: warp {}: bytes after its Exit: corrupt trace", file.at(r.chunk_at), r.warp)));
        }
        self.fill_window(pos);
        Ok(op)
    }

    /// Called when the warp yields: with fewer than [`TOP_UP_LEFT`] bytes left in the
    /// window (and more ops in the chunk), copy the window afresh from the read
    /// position. The chunk bytes it reads were prefetched while this visit issued,
    /// so they are in the CPU's caches now and not when the warp issues again. The
    /// window stays a copy of the data from its position: ops decode the same.
    #[inline(always)]
    pub fn top_up(&mut self) {
        let (wpos, wlen) = (self.wpos as usize, self.wlen as usize);
        if wlen - wpos < TOP_UP_LEFT && self.win_at + (wlen as u32) < self.end {
            self.fill_window(self.win_at as usize + wpos);
        }
    }

    /// Copy the window from data byte `pos` (at most the window's size, never past the warp's ops).
    #[inline(never)]
    fn fill_window(&mut self, pos: usize) {
        let end = self.end as usize;
        let n = (end - pos).min(WINDOW);
        if n == WINDOW {
            // (The compiler merges both copies into one memcpy call; a forced inline fixed-size
            // copy was measured in session 47 and saved nothing, so the time is presumably the
            // misses on the source, which this VM could not count.)
            self.win.copy_from_slice(&self.data[pos..pos + WINDOW]);
        } else {
            self.win[..n].copy_from_slice(&self.data[pos..pos + n]);
        }
        self.win_at = pos as u32;
        (self.wpos, self.wlen) = (0, n as u16);
    }

    #[cold]
    fn next_segment(&mut self, file: &TraceFile) -> Result<(), TraceError> {
        let r = &mut *self.rest;
        let Some(seg) = r.segment.filter(|s| s.flags & 1 == 0) else {
            return Err(TraceError(format!("{}: warp {}: its ops end without Exit: corrupt trace", file.at(r.chunk_at), r.warp)));
        };
        let c = file.chunk_header(seg.next())?;
        let raw = file.payload_shared(&c, MAX_RAW)?;
        if c.tag != b'S' || c.first != r.warp || c.count != seg.count + 1 || c.kernel != seg.kernel {
            return Err(TraceError(format!("{}: expected segment {} of warp {}: corrupt trace", file.at(c.at), seg.count + 1, r.warp)));
        }
        self.end = raw.len() as u32;
        self.data = raw;
        self.win_at = 0;
        r.chunk_at = c.at;
        r.segment = Some(c);
        (self.wpos, self.wlen) = (0, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops() -> Vec<(Op, [u64; MAX_LANES])> {
        let mut s = [0u64; MAX_LANES];
        for (i, x) in s.iter_mut().enumerate() {
            *x = 0x10_0000_0000 + (i as u64 * 7919) % 4096 * 4;
        }
        let z = [0u64; MAX_LANES];
        vec![
            (Op::Compute(3), z),
            (Op::Compute(4000), z),
            (Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base: 0x10_0000_0000, stride: 4, n: 32 }, bytes: 4 }, z),
            (Op::Mem { kind: MemKind::Store, lanes: Lanes::Strided { base: 0x10_0000_0080, stride: 4, n: 32 }, bytes: 4 }, z),
            (Op::Wait, z),
            (Op::Mem { kind: MemKind::Prefetch, lanes: Lanes::Explicit { n: 17 }, bytes: 8 }, s),
            (Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base: 0x8, stride: 0, n: 0 }, bytes: 16 }, z),
        ]
    }

    #[test]
    fn ops_round_trip_through_the_codec() {
        let mut enc = OpEncoder::default();
        let mut buf = vec![];
        for (op, s) in ops() {
            enc.encode(op, &s, &mut buf);
        }
        let mut dec = OpDecoder::new(128);
        let mut pos = 0;
        let mut s = [0u64; MAX_LANES];
        for (op, want) in ops() {
            assert_eq!(dec.decode(&buf, &mut pos, &mut s).unwrap(), op);
            if let Op::Mem { lanes: Lanes::Explicit { n }, .. } = op {
                assert_eq!(&s[..n as usize], &want[..n as usize]);
            }
        }
        assert_eq!(pos, buf.len());
        assert!(dec.decode(&buf, &mut pos, &mut s).unwrap_err().contains("without Exit"));
    }

    fn header(kernels: &[(u64, u32)]) -> Header {
        Header::new(
            Mode::Warps,
            "test".into(),
            32,
            vec![BufferRec { base: 1 << 40, bytes: 1 << 20, page_bytes: 4096, managed: false }],
            kernels.iter().map(|&(threads, tpc)| HostRec::Launch { name: "k".into(), threads, threads_per_cta: tpc }).collect(),
        )
    }

    /// Warp `w` of kernel `k`: `len` strided loads, a wait, exit.
    fn warp_ops(k: u64, w: u64, len: u64) -> Vec<Op> {
        let mut v: Vec<Op> = (0..len)
            .map(|i| Op::Mem {
                kind: MemKind::Load,
                lanes: Lanes::Strided { base: (1 << 40) + (k * 1000 + w * 64 + i * 128) % (1 << 20), stride: 4, n: 32 },
                bytes: 4,
            })
            .collect();
        v.push(Op::Wait);
        v.push(Op::Exit);
        v
    }

    /// Writes kernels of warps whose lengths come from `len(k, w)`.
    fn write(kernels: &[(u64, u32)], len: impl Fn(u64, u64) -> u64) -> Vec<u8> {
        let h = header(kernels);
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        let z = [0u64; MAX_LANES];
        for (k, &(threads, tpc)) in kernels.iter().enumerate() {
            w.begin_kernel();
            for warp in 0..h.warps_of(threads, tpc) {
                for op in warp_ops(k as u64, warp, len(k as u64, warp)) {
                    w.op(op, &z).unwrap();
                }
            }
            w.end_kernel().unwrap();
        }
        w.finish().unwrap().0
    }

    #[test]
    fn warps_round_trip_in_groups_and_segments() {
        // Short warps (groups) and a few very long ones (segments), over two kernels.
        let kernels = [(64 * 100, 64), (1000, 96)];
        let len = |k: u64, w: u64| if w % 37 == 5 { 20_000 } else { (k + w) % 9 };
        let bytes = write(&kernels, len);
        let f = TraceFile::from_blob("t.uvmt", Blob::Mem(bytes)).unwrap();
        let mut seen = vec![];
        for_each_op(&f, 128, |k, w, op, _| {
            seen.push((k, w, op));
            Ok(())
        })
        .unwrap();
        let mut want = vec![];
        for (k, &(threads, tpc)) in kernels.iter().enumerate() {
            for w in 0..f.header.warps_of(threads, tpc) {
                want.extend(warp_ops(k as u64, w, len(k as u64, w)).into_iter().map(|op| (k as u32, w, op)));
            }
        }
        assert_eq!(seen.len(), want.len());
        assert!(seen == want);
        assert_eq!(f.totals.ops, want.len() as u64);
    }

    #[test]
    fn timed_records_round_trip() {
        let h = Header::new(Mode::Timed, "x.csv".into(), 0, vec![], vec![]);
        let recs: Vec<TimedRec> = (0..5000u64)
            .map(|i| TimedRec {
                time_ns: i / 3,
                gpu: 1 + (i % 7 == 0) as u32,
                cu: (i % 5) as u32,
                wavefront: i / 10,
                kind: (i % 3) as u8,
                vaddr: 0x1000 + i * 64 % 9999,
                size: 64,
            })
            .collect();
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        for r in &recs {
            w.record(r).unwrap();
        }
        let bytes = w.finish().unwrap().0;
        let mut r = TimedReader::new(TraceFile::from_blob("t", Blob::Mem(bytes)).unwrap()).unwrap();
        for want in &recs {
            assert_eq!(r.next_record().unwrap().as_ref(), Some(want));
        }
        assert_eq!(r.next_record().unwrap(), None);
    }

    #[test]
    fn bad_files_name_the_byte_and_reason() {
        let good = write(&[(640, 64)], |_, w| w % 4);
        let mut v9 = good.clone();
        v9[8] = 9;
        let mut flipped = good.clone();
        let mid = good.len() / 2;
        flipped[mid] ^= 0x55;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"time_ns,gpu".to_vec(), "byte 0: not a uvmsim binary trace"),
            (MAGIC.to_vec(), "byte 8: truncated: the file ends inside its 16-byte preamble"),
            (v9, "byte 8: format version 9; this uvmsim reads versions 1 to 3"),
            (good[..good.len() - 5].to_vec(), "truncated"),
            (good[..40].to_vec(), "truncated"),
            (flipped, "corrupt"),
        ];
        for (i, (bytes, want)) in cases.into_iter().enumerate() {
            let e = TraceFile::from_blob("t.uvmt", Blob::Mem(bytes))
                .and_then(|f| for_each_op(&f, 128, |_, _, _, _| Ok(())))
                .expect_err(&format!("case {i} must fail"));
            assert!(e.0.starts_with("t.uvmt: ") && e.0.contains(want), "case {i}: {e}");
        }
    }

    /// The header's CRC-32 (version 2): a changed header byte that still parses as JSON (a kernel's
    /// thread count) is refused, naming the header's bytes, as are changes to the version and length
    /// fields and to the CRC itself; before 2026-11-30 the file replayed another program.
    #[test]
    fn a_changed_header_byte_is_refused_by_its_crc() {
        let good = write(&[(64000, 64)], |_, w| w % 4);
        TraceFile::from_blob("t.uvmt", Blob::Mem(good.clone())).unwrap();
        let hlen = u32::from_le_bytes(good[12..16].try_into().unwrap()) as usize;
        let text = std::str::from_utf8(&good[16..16 + hlen]).unwrap();
        let at = 16 + text.find("\"threads\":64000").unwrap() + "\"threads\":".len();
        let mut threads = good.clone();
        threads[at..at + 5].copy_from_slice(b"63999");
        let mut length = good.clone();
        length[12] ^= 1;
        let mut crc = good.clone();
        crc[16 + hlen] ^= 0x80;
        let want = format!("t.uvmt: byte 16: bad header: bytes 8 to {} (version, length and header) do not match their CRC-32", 15 + hlen);
        for (i, bad) in [threads, crc].into_iter().enumerate() {
            let e = TraceFile::from_blob("t.uvmt", Blob::Mem(bad)).expect_err("a changed header must fail");
            assert!(e.0.starts_with(&want), "case {i}: {e}");
        }
        let e = TraceFile::from_blob("t.uvmt", Blob::Mem(length)).expect_err("a changed length must fail");
        assert!(e.0.contains("bad header") && e.0.contains("CRC-32"), "{e}");
    }

    /// Version 1 files (before 2026-11-30: no header CRC, no host set-up fields) still read: a recording made
    /// then (`stream`, managed, 4,096 elements, 512 threads), with the defaults for what it did not record.
    #[test]
    fn a_version_1_recording_still_reads() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/v1-stream.uvmt");
        let f = TraceFile::open(path).unwrap();
        assert_eq!(u32::from_le_bytes(std::fs::read(path).unwrap()[8..12].try_into().unwrap()), 1);
        assert_eq!((f.header.host_init, f.header.host_threads, f.header.input_bytes), (true, 1, None));
        assert_eq!(f.header.buffers.len(), 3);
        assert!(f.header.buffers.iter().all(|b| b.managed));
        let mut ops = 0;
        for_each_op(&f, 128, |_, _, _, _| {
            ops += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((ops, f.totals.ops, f.totals.warps), (656, 656, 16));
    }

    /// Accesses may end exactly at the top of the 57-bit address space (2^57), not a byte beyond.
    #[test]
    fn accesses_may_end_at_the_57_bit_limit() {
        let top = 1u64 << 57;
        let mut s = [0u64; MAX_LANES];
        // Strided: 32 lanes 4 apart of 4 bytes from 2^57 - 128 end at 2^57 - 128 + 31 * 4 + 4 = 2^57.
        let strided = |base| Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base, stride: 4, n: 32 }, bytes: 4 };
        // Explicit: one 8-byte lane at 2^57 - 8 ends at 2^57.
        let explicit = Op::Mem { kind: MemKind::Store, lanes: Lanes::Explicit { n: 1 }, bytes: 8 };
        for (op, lane, ok) in
            [(strided(top - 128), 0, true), (strided(top - 127), 0, false), (explicit, top - 8, true), (explicit, top - 7, false)]
        {
            s[0] = lane;
            let mut buf = vec![];
            OpEncoder::default().encode(op, &s, &mut buf);
            let r = OpDecoder::new(128).decode(&buf, &mut 0, &mut [0; MAX_LANES]);
            assert_eq!(r.is_ok(), ok, "{op:?} {lane:#x}: {r:?}");
            if let Err(e) = r {
                assert!(e.contains("57-bit address space"), "{e}");
            }
        }
    }

    #[test]
    fn zero_bytes_per_lane_is_refused() {
        let mut buf = vec![];
        // The encoder's initial width is 0, so the op says "same width" and carries none.
        OpEncoder::default().encode(Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: 1 }, bytes: 0 }, &[0; MAX_LANES], &mut buf);
        let e = OpDecoder::new(128).decode(&buf, &mut 0, &mut [0; MAX_LANES]).unwrap_err();
        assert_eq!(e, "0 bytes per lane (1 to 128 accepted here)");
    }

    #[test]
    fn timed_record_tags_with_kind_3_or_high_bits_are_refused() {
        for (tag, want) in [(0x03u8, "bad record tag 0x03"), (0x20, "bad record tag 0x20"), (0x80, "bad record tag 0x80")] {
            let buf = [tag, 0, 0, 0, 0, 0, 0, 0];
            assert_eq!(decode_timed(&mut TimedRec::default(), &buf, &mut 0), Err(want.to_string()));
        }
        // Tag 0x1e: kind 2 and the three "same" bits: time +1, wavefront 0, vaddr +64 (zigzag 128 = 0x80 0x01).
        let buf = [0x1e, 1, 0, 0x80, 0x01];
        let r = decode_timed(&mut TimedRec::default(), &buf, &mut 0).unwrap();
        assert_eq!((r.kind, r.time_ns, r.vaddr), (2, 1, 64));
    }

    /// A version 2 file (a header CRC, no barrier op) reads like a version 3 one.
    #[test]
    fn a_version_2_file_is_read_with_its_header_crc() {
        let mut bytes = write(&[(640, 64)], |_, w| w % 4);
        let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        bytes[8] = 2;
        let crc = header_crc(&bytes[8..16], &bytes[16..16 + hlen]);
        bytes[16 + hlen..20 + hlen].copy_from_slice(&crc.to_le_bytes());
        let f = TraceFile::from_blob("t.uvmt", Blob::Mem(bytes)).unwrap();
        assert_eq!(f.body, 16 + hlen as u64 + 4);
        let mut ops = 0;
        for_each_op(&f, 128, |_, _, _, _| {
            ops += 1;
            Ok(())
        })
        .unwrap();
        // 20 warps (640 / 32), warp w has w % 4 loads, a wait and an exit: 5 x (0 + 1 + 2 + 3) + 20 x 2 = 70.
        assert_eq!((ops, f.totals.ops), (70, 70));
    }

    #[test]
    fn warps_of_counts_a_partial_last_cta() {
        let h = header(&[]);
        // 1000 threads in CTAs of 96: 10 full CTAs of 3 warps, and 40 threads = 2 warps of 32.
        assert_eq!(h.warps_of(1000, 96), 32);
        assert_eq!(h.warps_of(960, 96), 30);
        assert_eq!(h.warps_of(33, 64), 2);
    }

    /// The delta state restarts in every `T` chunk, on both sides: a body of several chunks reads back.
    #[test]
    fn timed_records_over_several_chunks_round_trip() {
        let h = Header::new(Mode::Timed, "x.csv".into(), 0, vec![], vec![]);
        // Each record: a tag, a 1-byte time delta, a 1-byte wavefront delta and a 2-byte vaddr delta (zigzag of
        // 4096 = 8192) at least: 30 000 records are over 120 000 bytes, two 64 KiB chunks or more.
        let recs: Vec<TimedRec> = (0..30_000u64)
            .map(|i| TimedRec { time_ns: i, gpu: 1, cu: 2, wavefront: i % 3, kind: 0, vaddr: 0x1000 + i * 4096, size: 32 })
            .collect();
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        for r in &recs {
            w.record(r).unwrap();
        }
        let f = TraceFile::from_blob("t", Blob::Mem(w.finish().unwrap().0)).unwrap();
        let (mut at, mut chunks) = (f.body, 0);
        while at < f.end {
            at = f.chunk_header(at).unwrap().next();
            chunks += 1;
        }
        assert!(chunks >= 2, "{chunks}");
        let mut r = TimedReader::new(f).unwrap();
        for want in &recs {
            assert_eq!(r.next_record().unwrap().as_ref(), Some(want));
        }
        assert_eq!(r.next_record().unwrap(), None);
    }

    #[test]
    fn a_timed_body_disagreeing_with_its_end_chunk_is_corrupt() {
        let h = Header::new(Mode::Timed, "x.csv".into(), 0, vec![], vec![]);
        let rec = TimedRec { time_ns: 5, gpu: 1, cu: 0, wavefront: 0, kind: 0, vaddr: 0x1000, size: 64 };
        // Three records, an end chunk that says four.
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        for _ in 0..3 {
            w.record(&rec).unwrap();
        }
        w.flush_timed().unwrap();
        w.totals.records += 1;
        let f = TraceFile::from_blob("t", Blob::Mem(w.finish().unwrap().0)).unwrap();
        let end = f.end;
        let mut r = TimedReader::new(f).unwrap();
        for _ in 0..3 {
            r.next_record().unwrap().unwrap();
        }
        assert_eq!(r.next_record().unwrap_err().0, format!("t: byte {end}: 3 records read, the end chunk says 4: corrupt trace"));
        // One record and a stray byte after it in its chunk.
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        w.record(&rec).unwrap();
        w.timed.push(0);
        let f = TraceFile::from_blob("t", Blob::Mem(w.finish().unwrap().0)).unwrap();
        let body = f.body;
        let e = TimedReader::new(f).unwrap().next_record().unwrap_err().0;
        assert_eq!(e, format!("t: byte {body}: chunk has bytes after its last record: corrupt trace"));
    }

    /// Records are numbered from 1 in every message: a decode error names the record it fails on,
    /// `position()` the last one read.
    #[test]
    fn a_bad_record_is_named_by_its_1_based_number() {
        let h = Header::new(Mode::Timed, "x.csv".into(), 0, vec![], vec![]);
        let rec = TimedRec { time_ns: 5, gpu: 1, cu: 0, wavefront: 0, kind: 0, vaddr: 0x1000, size: 64 };
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        w.record(&rec).unwrap();
        let second = w.timed.len();
        w.record(&rec).unwrap();
        w.timed[second] = 0x03; // the second record's tag: no kind 3
        let f = TraceFile::from_blob("t", Blob::Mem(w.finish().unwrap().0)).unwrap();
        let body = f.body;
        let mut r = TimedReader::new(f).unwrap();
        r.next_record().unwrap().unwrap();
        assert_eq!(r.position(), format!("t: record 1 (chunk at byte {body})"));
        assert_eq!(r.next_record().unwrap_err().0, format!("t: byte {body}: record 2: bad record tag 0x03"));
    }

    /// Wavefront and address deltas of any size round-trip: a delta of 2^62 or more is a zigzag value with its top
    /// bit set, which must be shifted as unsigned (2^62 from 0: zigzag 2^63, back to +2^62, not -2^62).
    #[test]
    fn timed_records_with_huge_deltas_round_trip() {
        let h = Header::new(Mode::Timed, "x.csv".into(), 0, vec![], vec![]);
        let rec = |wavefront, vaddr| TimedRec { time_ns: 1, gpu: 1, cu: 0, wavefront, kind: 1, vaddr, size: 4 };
        let recs = [rec(1 << 62, 0x1000), rec(u64::MAX, (1 << 57) - 4), rec(0, 0), rec(1 << 63, 0x40), rec(3, 0x1_0000_0000)];
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        for r in &recs {
            w.record(r).unwrap();
        }
        let mut r = TimedReader::new(TraceFile::from_blob("t", Blob::Mem(w.finish().unwrap().0)).unwrap()).unwrap();
        for want in &recs {
            assert_eq!(r.next_record().unwrap().as_ref(), Some(want));
        }
    }

    #[test]
    fn timed_chunk_headers_are_checked() {
        let h = Header::new(Mode::Timed, "x.csv".into(), 0, vec![], vec![]);
        let rec = TimedRec { time_ns: 5, gpu: 1, cu: 0, wavefront: 0, kind: 0, vaddr: 0x1000, size: 64 };
        let read = |bytes: Vec<u8>| {
            let f = TraceFile::from_blob("t", Blob::Mem(bytes)).unwrap();
            let body = f.body;
            (body, TimedReader::new(f).unwrap().next_record())
        };
        // A chunk tag that is none of G, S, T, E (the first chunk's tag byte is the body's first byte).
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        w.record(&rec).unwrap();
        let mut bytes = w.finish().unwrap().0;
        let body = read(bytes.clone()).0 as usize;
        bytes[body] = b'X';
        let (body, r) = read(bytes);
        assert_eq!(r.unwrap_err().0, format!("t: byte {body}: not a chunk (tag 0x58): corrupt trace"));
        // A first chunk that says it starts at record 5 (the count said 7 when 2 were flushed: 7 - 2).
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        w.record(&rec).unwrap();
        w.record(&rec).unwrap();
        w.totals.records += 5;
        let (body, r) = read(w.finish().unwrap().0);
        assert_eq!(r.unwrap_err().0, format!("t: byte {body}: expected timed-record chunk 0: corrupt trace"));
        // A chunk of no records.
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        w.chunk(b'T', 0, 0, 0, &[]).unwrap();
        let (body, r) = read(w.finish().unwrap().0);
        assert_eq!(r.unwrap_err().0, format!("t: byte {body}: expected timed-record chunk 0: corrupt trace"));
    }

    #[test]
    fn a_kernel_with_more_warps_than_its_launch_is_corrupt() {
        // 64 threads in one CTA of 64 = 2 warps; three are written.
        let h = header(&[(64, 64)]);
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        w.begin_kernel();
        for _ in 0..3 {
            w.op(Op::Exit, &[0; MAX_LANES]).unwrap();
        }
        w.end_kernel().unwrap();
        let f = TraceFile::from_blob("t.uvmt", Blob::Mem(w.finish().unwrap().0)).unwrap();
        let e = for_each_op(&f, 128, |_, _, _, _| Ok(())).unwrap_err().0;
        assert_eq!(e, format!("t.uvmt: byte {}: kernel 0 has more warps than its launch: corrupt trace", f.body));
    }

    #[test]
    fn header_limits_are_inclusive() {
        // 2^50 threads, 64 lanes, 1024 host threads, input bytes = all of the buffers' 1 MiB: the largest accepted.
        // A buffer may end at 2^57 itself (here its 1 MiB from 2^57 - 2^20).
        let mut h = header(&[(1 << 50, 64)]);
        h.buffers[0].base = (1 << 57) - (1 << 20);
        h.warp_size = 64;
        h.host_threads = 1024;
        h.input_bytes = Some(1 << 20);
        h.check("t").unwrap();
        let mut bad: Vec<(Header, &str)> = vec![];
        let wants =
            ["warp_size 65", "host_threads 1025", "input_bytes 1048577", "a kernel launch needs", "ends beyond the 57-bit address space"];
        for (i, want) in wants.into_iter().enumerate() {
            let mut b = if i == 3 { header(&[((1 << 50) + 1, 64)]) } else { h.clone() };
            match i {
                0 => b.warp_size = 65,
                1 => b.host_threads = 1025,
                2 => b.input_bytes = Some((1 << 20) + 1),
                4 => b.buffers[0].base += 4096,
                _ => {}
            }
            bad.push((b, want));
        }
        for (b, want) in bad {
            let e = b.check("t").unwrap_err().0;
            assert!(e.starts_with("t: bad header: ") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_bad_op_names_its_chunk_warp_and_data_byte() {
        let h = header(&[(32, 32)]);
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        w.begin_kernel();
        w.cur.push(0x07); // no op has code 7
        w.op(Op::Exit, &[0; MAX_LANES]).unwrap();
        w.end_kernel().unwrap();
        let f = TraceFile::from_blob("t.uvmt", Blob::Mem(w.finish().unwrap().0)).unwrap();
        // The group chunk is the first of the body; its data is [warp length 2][0x07][Exit]: the tag read ends at byte 2.
        let e = for_each_op(&f, 128, |_, _, _, _| Ok(())).unwrap_err().0;
        assert_eq!(e, format!("t.uvmt: byte {}: warp 0, data byte 2: unknown op tag 0x07: corrupt trace", f.body));
    }

    #[test]
    fn a_kernel_offset_outside_the_body_is_refused() {
        let h = header(&[(32, 32)]);
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        w.begin_kernel();
        w.op(Op::Exit, &[0; MAX_LANES]).unwrap();
        w.end_kernel().unwrap();
        w.totals.kernel_offsets[0] = 0;
        let e = TraceFile::from_blob("t.uvmt", Blob::Mem(w.finish().unwrap().0)).unwrap_err().0;
        assert!(e.starts_with("t.uvmt: byte ") && e.ends_with(": a kernel offset is outside the body"), "{e}");
    }

    #[test]
    fn varint_fast_path_handles_the_tenth_byte_like_the_checked_one() {
        for last in 0..=255u8 {
            for fill in [0x80u8, 0xff] {
                let mut bytes = vec![fill; 9];
                bytes.push(last);
                bytes.extend_from_slice(&[0; 4]);
                let (mut p, mut q) = (0, 0);
                assert_eq!((get_varint(&bytes, &mut p), p), (get_varint_checked(&bytes, &mut q), q), "{bytes:?}");
            }
        }
        let (mut p, mut q) = (0, 0);
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1];
        assert_eq!((get_varint(&max, &mut p), get_varint_checked(&max, &mut q)), (Ok(u64::MAX), Ok(u64::MAX)));
    }

    proptest::proptest! {
        /// The unchecked varint fast path gives the checked decoder's value, position and error.
        #[test]
        fn varint_fast_path_matches_the_checked_one(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
            high in proptest::prelude::any::<u16>(),
            at in 0usize..24,
        ) {
            // Bias towards long varints: many bytes with the continuation bit.
            let bytes: Vec<u8> = bytes.iter().enumerate().map(|(i, &b)| if high >> (i % 16) & 1 == 1 { b | 0x80 } else { b }).collect();
            let (mut p, mut q) = (at.min(bytes.len()), at.min(bytes.len()));
            let (a, b) = (get_varint(&bytes, &mut p), get_varint_checked(&bytes, &mut q));
            proptest::prop_assert_eq!(a, b);
            proptest::prop_assert_eq!(p, q);
        }
    }

    #[test]
    fn common_ops_take_the_short_decoder() {
        let mut enc = OpEncoder::default();
        let mut buf = vec![];
        let z = [0u64; MAX_LANES];
        let load = |base| Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base, stride: 4, n: 32 }, bytes: 4 };
        let store = Op::Mem { kind: MemKind::Store, lanes: Lanes::Strided { base: 0x4000, stride: 4, n: 32 }, bytes: 4 };
        let ops = [load(0x1000), load(0x2000), Op::Wait, Op::Barrier, Op::Compute(5), store, Op::Compute(4000), load(0x1080), Op::Exit];
        for op in ops {
            enc.encode(op, &z, &mut buf);
        }
        buf.extend_from_slice(&[0; 10]); // room for the short decoder's 10-byte varint read
        let mut dec = OpDecoder::new(128);
        let mut pos = 0;
        // The first access sets the stride, lane count and width; then only the address changes.
        let mut s = [0u64; MAX_LANES];
        assert_eq!(dec.decode_common(&buf, &mut pos), None);
        // Tag, base 0x1000 (zigzag 0x2000: two bytes), stride, lanes and width: 6 bytes.
        assert_eq!((dec.decode(&buf, &mut pos, &mut s), pos), (Ok(ops[0]), 6));
        let mut got = vec![];
        while let Some(op) = dec.decode_common(&buf, &mut pos) {
            got.push(op);
        }
        assert_eq!(got, ops[1..3]);
        // A barrier (one byte), a long compute and Exit go to the full decoder.
        let at = pos;
        assert_eq!((dec.decode(&buf, &mut pos, &mut s), pos), (Ok(Op::Barrier), at + 1));
        got.clear();
        while let Some(op) = dec.decode_common(&buf, &mut pos) {
            got.push(op);
        }
        assert_eq!(got, ops[4..6]);
        assert_eq!(dec.decode(&buf, &mut pos, &mut s), Ok(Op::Compute(4000)));
        assert_eq!(dec.decode_common(&buf, &mut pos), Some(ops[7]));
        let at = pos;
        assert_eq!((dec.decode_common(&buf, &mut pos), pos), (None, at));
        assert_eq!(dec.decode(&buf, &mut pos, &mut s), Ok(Op::Exit));
    }

    proptest::proptest! {
        /// Wherever the short decoder answers, the full one gives the same op,
        /// position and state; where it does not, it consumed nothing.
        #[test]
        fn short_decoder_matches_the_full_one(
            pick in 0u8..4,
            tag in proptest::prelude::any::<u8>(),
            rest in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..14),
            (addr, stride) in (proptest::prelude::any::<u64>(), proptest::prelude::any::<u64>()),
            (n, bytes, max) in (0..=MAX_LANES as u32, 0u32..=128, 1u32..=128),
            small in proptest::prelude::any::<bool>(),
        ) {
            let tag = match pick {
                0 => OP_WAIT,
                1 => OP_COMPUTE | tag & !7,
                2 => OP_STRIDED | SAME_BYTES | SAME_STRIDE | SAME_N | tag & (3 << 3),
                _ => tag,
            };
            let mut buf = vec![tag];
            buf.extend_from_slice(&rest);
            // Small strides and addresses too, so that the address check passes as often as not.
            let (addr, stride) = if small { (addr >> 8, stride >> 40) } else { (addr, stride) };
            let st = OpState { addr, stride, n, bytes: if bytes > max { 0 } else { bytes } };
            let (mut a, mut b) = (OpDecoder { s: st, max_bytes: max }, OpDecoder { s: st, max_bytes: max });
            let (mut p, mut q) = (0, 0);
            let mut scratch = [0u64; MAX_LANES];
            match a.decode_common(&buf, &mut p) {
                Some(op) => {
                    proptest::prop_assert_eq!(b.decode(&buf, &mut q, &mut scratch), Ok(op));
                    proptest::prop_assert_eq!((p, a.s), (q, b.s));
                }
                None => proptest::prop_assert_eq!((p, a.s), (0, st)),
            }
        }
    }

    /// Warp `w`'s ops from `seed`: every op kind, deltas of every varint length,
    /// explicit ops longer than the cursor's window, and long warps (segments).
    fn random_ops(seed: u64, w: u64) -> Vec<(Op, [u64; MAX_LANES])> {
        let r = |i: u64, what: u64| crate::sim::mix64(seed ^ w << 20 ^ i << 3 ^ what);
        let len = match r(0, 1) % 8 {
            0 => 3000 + r(0, 2) % 3000,
            _ => r(0, 2) % 60,
        };
        let mut out = vec![];
        let mut s = [0u64; MAX_LANES];
        for i in 0..len {
            let bytes = [4, 4, 8, 16, 128][(r(i, 3) % 5) as usize];
            let kind = [MemKind::Load, MemKind::Store, MemKind::Prefetch][(r(i, 4) % 3) as usize];
            let base = (r(i, 5) % (1 << (r(i, 6) % 50))) & !7;
            let op = match r(i, 7) % 8 {
                0 => Op::Compute((r(i, 8) % (1 << (r(i, 9) % 33))) as u32),
                1 => Op::Wait,
                2 => {
                    let n = (r(i, 10) % (MAX_LANES as u64 + 1)) as u32;
                    for (l, a) in s.iter_mut().enumerate().take(n as usize) {
                        *a = (base + (r(i, 11 + l as u64) % (1 << (r(i, 12) % 40)))) & !7;
                    }
                    Op::Mem { kind, lanes: Lanes::Explicit { n }, bytes }
                }
                _ => {
                    let stride = [0, 4, 8, 128, r(i, 13) % 100_000][(r(i, 14) % 5) as usize];
                    Op::Mem { kind, lanes: Lanes::Strided { base, stride, n: 1 + (r(i, 15) % 32) as u32 }, bytes }
                }
            };
            out.push((op, s));
        }
        out.push((Op::Exit, s));
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// The windowed cursor gives exactly the ops (and explicit lanes) written,
        /// and on a corrupted file exactly what decoding from the chunk gives:
        /// the same ops, then the same error; with the warp yielding (its window
        /// topped up) after the ops that `yields` picks.
        #[test]
        fn windowed_cursor_matches_the_chunk_decoder(
            seed in proptest::prelude::any::<u64>(),
            flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 1u8..=255), 0..3),
            yields in proptest::prelude::any::<u64>(),
        ) {
            let yields_after = |i: usize| yields >> (i % 64) & 1 != 0;
            let kernels = [(64 * 6u64, 64u32)];
            let h = header(&kernels);
            let warps = h.warps_of(kernels[0].0, kernels[0].1);
            let mut w = Writer::new(Vec::new(), &h).unwrap();
            w.begin_kernel();
            for warp in 0..warps {
                for (op, s) in random_ops(seed, warp) {
                    w.op(op, &s).unwrap();
                }
            }
            w.end_kernel().unwrap();
            let bytes = w.finish().unwrap().0;
            let f = TraceFile::from_blob("p.uvmt", Blob::Mem(bytes.clone())).unwrap();
            let (mut s, mut t) = ([0u64; MAX_LANES], [0u64; MAX_LANES]);
            let mut kc = KernelCursor::new(&f, 0).unwrap();
            for warp in 0..warps {
                let mut c = kc.warp(&f, warp, 128).unwrap();
                for (i, (want, lanes)) in random_ops(seed, warp).into_iter().enumerate() {
                    let op = c.next(&f, &mut s).unwrap();
                    proptest::prop_assert_eq!(op, want);
                    if let Op::Mem { lanes: Lanes::Explicit { n }, .. } = op {
                        proptest::prop_assert_eq!(&s[..n as usize], &lanes[..n as usize]);
                    }
                    if yields_after(i) {
                        c.top_up();
                    }
                }
            }
            // The same warps' bytes with some changed, read windowed and from the chunk.
            for warp in 0..warps {
                let mut raw = vec![];
                let mut enc = OpEncoder::default();
                for (op, l) in random_ops(seed, warp) {
                    enc.encode(op, &l, &mut raw);
                }
                for &(i, x) in &flips {
                    let n = raw.len();
                    raw[i % n] ^= x;
                }
                let data: ChunkData = raw.into();
                let mut ca = WarpCursor::new(data.clone(), 0, data.len(), 0, None, warp, 128);
                let mut cb = WarpCursor::new(data.clone(), 0, data.len(), 0, None, warp, 128);
                for i in 0.. {
                    if yields_after(i) {
                        ca.top_up();
                    }
                    let (a, b) = (ca.next(&f, &mut s), cb.next_unwindowed(&f, &mut t));
                    proptest::prop_assert_eq!(&a, &b);
                    match a {
                        Ok(Op::Mem { lanes: Lanes::Explicit { n }, .. }) => {
                            proptest::prop_assert_eq!(&s[..n as usize], &t[..n as usize])
                        }
                        Ok(Op::Exit) | Err(_) => break,
                        _ => {}
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Arbitrary bytes, and valid files cut short or with bytes changed,
        /// never panic a reader: each ends in ops or an error naming the file.
        #[test]
        fn arbitrary_bytes_never_panic(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            cut in 0usize..5000,
            flips in proptest::collection::vec((0usize..5000, proptest::prelude::any::<u8>()), 0..4),
        ) {
            let good = write(&[(64 * 3, 64), (100, 32)], |_, w| if w == 2 { 3000 } else { w % 5 });
            let mut changed = good.clone();
            for (i, b) in flips {
                let n = changed.len();
                changed[i % n] = b;
            }
            let cut = good[..cut.min(good.len())].to_vec();
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend_from_slice(&junk);
            for bytes in [junk, changed, cut, with_magic] {
                match TraceFile::from_blob("fuzz", Blob::Mem(bytes)) {
                    Ok(f) => {
                        if let Err(e) = for_each_op(&f, 128, |_, _, _, _| Ok(())) {
                            proptest::prop_assert!(e.0.starts_with("fuzz: "), "{}", e);
                        }
                    }
                    Err(e) => proptest::prop_assert!(e.0.starts_with("fuzz: "), "{}", e),
                }
            }
        }
    }
}

#[cfg(test)]
mod inflate_tests {
    use super::inflate_exact;
    use miniz_oxide::inflate::core::DecompressorOxide;
    use std::io::Write;

    fn deflate(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(vec![], flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Inflate with a reused state into a buffer of `len` stale bytes (as the chunk reader does).
    fn inflate(state: &mut DecompressorOxide, packed: &[u8], len: usize) -> Result<(Vec<u8>, usize), String> {
        let mut out = vec![0xa5; len];
        let n = inflate_exact(state, packed, &mut out)?;
        Ok((out, n))
    }

    #[test]
    fn inflates_exactly_the_stated_length() {
        let st = &mut DecompressorOxide::new();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let packed = deflate(&data);
        let (raw, n) = inflate(st, &packed, data.len()).unwrap();
        assert_eq!((n, &raw[..]), (data.len(), &data[..]));
        // Stated too short: the data does not fit, an error. Too long: a short count for the length check.
        // The errors are in words, not the decoder's status names (HasMoreOutput, ...).
        assert_eq!(
            inflate(st, &packed, data.len() - 1).unwrap_err(),
            "the compressed data inflates to more than the chunk's recorded size"
        );
        assert_eq!(inflate(st, &packed, data.len() + 5).unwrap().1, data.len());
        // Empty chunks, and garbage.
        assert_eq!(inflate(st, &deflate(&[]), 0).unwrap().1, 0);
        assert!(inflate(st, &[0xff; 16], 100).is_err());
        assert_eq!(inflate(st, &packed[..packed.len() / 2], data.len()).unwrap_err(), "the compressed data ends before its last block");
        // The state is reusable after all those errors.
        assert_eq!(inflate(st, &packed, data.len()).unwrap().0, data);
    }

    #[test]
    fn a_reference_before_the_data_is_an_error_even_over_stale_bytes() {
        // A fixed-Huffman block whose first symbol copies 3 bytes from distance 1
        // (nothing decoded yet): zlib says "invalid distance too far back".
        let st = &mut DecompressorOxide::new();
        assert!(inflate(st, &[3, 2, 0], 3).is_err());
        assert!(inflate(st, &[3, 2, 0], 100).is_err());
    }

    proptest::proptest! {
        /// A state and buffer reused over a sequence of chunks inflate each as a fresh decoder does.
        #[test]
        fn reused_state_inflates_like_a_fresh_one(
            chunks in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..3000), 1..6),
            cut in proptest::option::of(0usize..100),
        ) {
            let st = &mut DecompressorOxide::new();
            for (k, data) in chunks.iter().enumerate() {
                let mut packed = deflate(data);
                if k == 0 {
                    if let Some(c) = cut {
                        // A corrupt first chunk (cut short) before the good ones.
                        packed.truncate(packed.len() * c / 100);
                        proptest::prop_assert!(inflate(st, &packed, data.len()).is_err() || data.is_empty());
                        packed = deflate(data);
                    }
                }
                let mut fresh = vec![];
                std::io::Read::read_to_end(&mut flate2::read::DeflateDecoder::new(&packed[..]), &mut fresh).unwrap();
                let (raw, n) = inflate(st, &packed, data.len()).unwrap();
                proptest::prop_assert_eq!(&raw[..n], &fresh[..]);
                proptest::prop_assert_eq!(&raw[..n], &data[..]);
            }
        }
    }
}
