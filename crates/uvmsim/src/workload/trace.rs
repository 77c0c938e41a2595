//! Trace replay: timed memory-access traces in the generic text format
//! (`time_ns,gpu,cu,wavefront,kind,vaddr,size`, optionally gzip- or zstd-compressed;
//! the format of the MGPUSim traces in `shared/traces/mgpusim/`), its
//! order-only form (first column `order`: a sequence number instead of a time,
//! each step `workload.trace.gap_ns` apart), or the same records in a timed
//! `.uvmt` binary trace (`tracefmt.rs`), detected by content.
//!
//! How it works: [`TraceReader`] streams records one line (or one chunk) at
//! a time into a reused buffer (no trace is loaded whole). During a run each
//! access is issued at its recorded time on its recorded SM/CU, so the
//! simulated hierarchy decides hits, MSHR merges and latencies while the trace
//! keeps the recorded order and gaps. Bad input names the file and line (or
//! byte offset). [`info`] summarises any trace format, [`convert`] turns a
//! CSV trace into a timed `.uvmt` and back, losslessly.

use super::tracefmt::{self, Mode, TimedReader, TimedRec, TraceFile};
use super::{Lanes, MemKind, Op};
use crate::sim::{Ps, PS_PER_NS};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};

section! {
    /// Parameters of trace replay (workload.kind = "trace").
    pub struct TraceParams {
        /// Trace file: CSV with header time_ns,gpu,cu,wavefront,kind,vaddr,size (plain, gzip- or zstd-compressed; or order,gpu,... with a sequence number instead of a time), or a timed .uvmt made from one by `uvmsim trace convert`.
        pub path: String = String::new(),
        /// Which GPU of the trace to replay (GPUs are numbered from 1, as MGPUSim names them).
        pub gpu: u32 = 1,
        /// Order-only traces (first column `order`): ns between consecutive order values, the compute gap the trace does
        /// not record; an access of order k issues at k x gap_ns. Timed traces ignore it.
        pub gap_ns: f64 = 1.0,
        /// "event" replays through this configuration's GPU model; "mgpusim-r9nano" through the cycle-stepped port of
        /// MGPUSim v4.2.0's R9 Nano memory path (crates/uvmsim/src/cycle: CU, reorder buffer, address translator, L1
        /// and L2 TLBs, write-around L1V, write-back L2, ideal DRAM, the PCIe network's endpoints and switches, MMU),
        /// which has its own fixed configuration (no other key changes it but tie_seed) and replays GPU 1 of a
        /// single-GPU trace.
        pub engine: String = "event".to_string(),
        /// mgpusim-r9nano engine only: 0 runs events of the same cycle in the order they were scheduled; N > 0 in a
        /// pseudo-random order seeded by N. MGPUSim's own TLB counts move by several percent when only its tie order
        /// changes (docs/validation.md, "MGPUSim's own spread"); this measures the same spread of the port.
        pub tie_seed: u64 = 0,
    }
}

impl TraceParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        if self.path.is_empty() {
            return Err((format!("{p}.path"), "must name a trace file".into()));
        }
        if self.gpu == 0 {
            return Err((format!("{p}.gpu"), "GPUs are numbered from 1".into()));
        }
        if !(self.gap_ns.is_finite() && (0.0..=1e9).contains(&self.gap_ns)) {
            return Err((format!("{p}.gap_ns"), format!("must be between 0 and 1e9 ns, got {}", self.gap_ns)));
        }
        if !matches!(self.engine.as_str(), "event" | "mgpusim-r9nano") {
            return Err((format!("{p}.engine"), format!("must be \"event\" or \"mgpusim-r9nano\", got \"{}\"", self.engine)));
        }
        if self.engine != "mgpusim-r9nano" && self.tie_seed != 0 {
            return Err((format!("{p}.tie_seed"), "is read only by workload.trace.engine = \"mgpusim-r9nano\"".into()));
        }
        if self.engine == "mgpusim-r9nano" && self.gpu != 1 {
            return Err((format!("{p}.gpu"), "the mgpusim-r9nano engine replays GPU 1 of a single-GPU trace".into()));
        }
        Ok(())
    }
}

/// One traced access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub time: Ps,
    pub gpu: u32,
    pub cu: u32,
    pub wavefront: u64,
    pub kind: MemKind,
    pub vaddr: u64,
    pub size: u32,
}

/// A malformed, truncated or unreadable trace: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError(pub String);

impl TraceError {
    /// A trace file that cannot be opened: a relative path that does not exist names the
    /// directory it was taken from (config and sweep files do not move it to theirs).
    pub fn open(path: &str, e: &std::io::Error) -> TraceError {
        let mut m = format!("{path}: cannot read the trace: {e}");
        if e.kind() == std::io::ErrorKind::NotFound && std::path::Path::new(path).is_relative() {
            if let Ok(d) = std::env::current_dir() {
                m += &format!(" (a relative path is taken from the current directory, {})", d.display());
            }
        }
        TraceError(m)
    }

    /// A trace is opened more than once (its format told by its first bytes, then read; a timed
    /// trace is scanned before its run), so a pipe or FIFO (`<(zcat t.csv.gz)`) lost to the first
    /// reader what the next one needed ("header is `avefront,kind,...`"), and opening a FIFO that
    /// nobody writes waited forever, deaf to Ctrl-C and SIGTERM. Refused by its type, unopened.
    pub fn check_regular(path: &str) -> Result<(), TraceError> {
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() && !m.is_dir() => Err(TraceError(format!(
                "{path}: not a regular file (a pipe or FIFO?): a trace is read more than once; save it to a file first"
            ))),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a conversion failed: its input (a malformed, truncated or unreadable trace, named with its line or
/// byte) or its output (OUT cannot be written: no space, too large, the directory went away). The CLI exits
/// with code 2 for the first (bad input) and 1 for the second, as for `trace record`'s OUT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConvertError {
    Input(TraceError),
    Output(String),
}

impl From<TraceError> for ConvertError {
    fn from(e: TraceError) -> ConvertError {
        ConvertError::Input(e)
    }
}

impl From<ConvertError> for TraceError {
    fn from(e: ConvertError) -> TraceError {
        match e {
            ConvertError::Input(e) => e,
            ConvertError::Output(m) => TraceError(m),
        }
    }
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::Input(e) => f.write_str(&e.0),
            ConvertError::Output(m) => f.write_str(m),
        }
    }
}

const HEADER: [&str; 7] = ["time_ns", "gpu", "cu", "wavefront", "kind", "vaddr", "size"];
/// The order-only header: a sequence number in place of the time.
const HEADER_ORDER: [&str; 7] = ["order", "gpu", "cu", "wavefront", "kind", "vaddr", "size"];

/// Streams the records of a timed trace (CSV, or a timed `.uvmt`).
pub struct TraceReader {
    path: String,
    input: Box<dyn BufRead>,
    line: String,
    line_no: u64,
    last_time: Ps,
    /// A binary timed trace, read chunk by chunk instead of `input`.
    bin: Option<TimedReader>,
    /// Order-only CSV: each order step lasts this long (ps); None for a timed trace.
    order_gap: Option<Ps>,
}

impl TraceReader {
    pub fn open(path: &str) -> Result<TraceReader, TraceError> {
        TraceError::check_regular(path)?;
        if tracefmt::is_uvmt(path) {
            return TraceReader::binary(TraceFile::open(path)?);
        }
        let file = File::open(path).map_err(|e| TraceError::open(path, &e))?;
        TraceReader::from_reader(path, Box::new(file))
    }

    fn binary(file: TraceFile) -> Result<TraceReader, TraceError> {
        let path = file.name.clone();
        let bin = Some(TimedReader::new(file)?);
        Ok(TraceReader { path, input: Box::new(std::io::empty()), line: String::new(), line_no: 0, last_time: 0, bin, order_gap: None })
    }

    /// Read a trace from any byte source; `name` is how errors refer to it.
    pub fn from_reader(name: &str, input: Box<dyn Read>) -> Result<TraceReader, TraceError> {
        let err = |e: std::io::Error| TraceError(format!("{name}: cannot read the trace: {e}"));
        let mut raw = BufReader::new(input);
        // Gzip or binary by content (magic bytes), not by file name.
        let head = raw.fill_buf().map_err(err)?;
        if head.starts_with(tracefmt::MAGIC) {
            let mut bytes = vec![];
            raw.read_to_end(&mut bytes).map_err(err)?;
            return TraceReader::binary(TraceFile::from_blob(name, tracefmt::Blob::Mem(bytes))?);
        }
        let input: Box<dyn BufRead> = if head.starts_with(&[0x1f, 0x8b]) {
            Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(raw)))
        } else if head.starts_with(&ZSTD_MAGIC) || is_skippable_zstd(head) {
            Box::new(BufReader::new(ZstdFrames { src: Some(raw), frame: None }))
        } else {
            Box::new(raw)
        };
        let mut r =
            TraceReader { path: name.to_string(), input, line: String::new(), line_no: 0, last_time: 0, bin: None, order_gap: None };
        if !r.read_line()? {
            return Err(TraceError(format!("{name}: empty trace (expected the header {})", HEADER.join(","))));
        }
        let fields: Vec<&str> = r.line.trim_end().split(',').collect();
        if fields == HEADER_ORDER {
            r.order_gap = Some(PS_PER_NS);
        } else if r.line.starts_with('\u{feff}') {
            // Invisible when the header is quoted back: "header is `time_ns,...`, expected `time_ns,...`".
            return Err(r.bad("the header starts with a UTF-8 byte-order mark (U+FEFF, as some spreadsheet programs write): remove it"));
        } else if fields != HEADER {
            return Err(r.bad(&format!(
                "header is `{}`, expected `{}` (or `{}`)",
                clip(r.line.trim_end()),
                HEADER.join(","),
                HEADER_ORDER.join(",")
            )));
        }
        Ok(r)
    }

    /// Order-only traces: each order step lasts `gap_ns` (1 ns unless set); no effect on a timed trace.
    pub fn with_gap_ns(mut self, gap_ns: f64) -> TraceReader {
        if self.order_gap.is_some() {
            self.order_gap = Some((gap_ns * PS_PER_NS as f64).round() as Ps);
        }
        self
    }

    /// `path:line` of the last record read (`path: record N (chunk at byte B)` for a binary trace).
    pub fn position(&self) -> String {
        match &self.bin {
            Some(b) => b.position(),
            None => format!("{}:{}", self.path, self.line_no),
        }
    }

    fn bad(&self, why: &str) -> TraceError {
        TraceError(format!("{}:{}: {why}", self.path, self.line_no))
    }

    /// Read the next line into `self.line`; false at the end of the file.
    fn read_line(&mut self) -> Result<bool, TraceError> {
        let n = read_bounded_line(&mut *self.input, &mut self.line)
            .map_err(|e| TraceError(format!("{}:{}: cannot read the trace (truncated or corrupt?): {e}", self.path, self.line_no + 1)))?;
        if n > 0 {
            self.line_no += 1;
        }
        Ok(n > 0)
    }

    /// The next record, or `None` at the end of the trace.
    pub fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        if let Some(b) = &mut self.bin {
            let Some(t) = b.next_record()? else { return Ok(None) };
            let rec = record_of(&t).map_err(|why| TraceError(format!("{}: {why}", b.position())))?;
            if rec.time < self.last_time {
                return Err(TraceError(format!("{}: time goes backwards (records must be in non-decreasing time order)", b.position())));
            }
            self.last_time = rec.time;
            return Ok(Some(rec));
        }
        loop {
            if !self.read_line()? {
                return Ok(None);
            }
            let l = self.line.trim_end();
            if !l.is_empty() {
                break;
            }
        }
        let l = self.line.trim_end();
        let mut it = l.split(',');
        let mut field = |name: &str| it.next().ok_or_else(|| format!("missing field `{name}` (expected 7 comma-separated fields)"));
        let order_gap = self.order_gap;
        let parsed = (|| -> Result<Record, String> {
            let time_ns: u64 = match order_gap {
                None => whole("time_ns", field("time_ns")?, MAX_TIME_PS / PS_PER_NS)?,
                Some(_) => whole("order", field("order")?, u64::MAX)?,
            };
            let gpu = whole("gpu", field("gpu")?, u32::MAX as u64)? as u32;
            let cu = whole("cu", field("cu")?, u32::MAX as u64)? as u32;
            let wavefront = whole("wavefront", field("wavefront")?, u64::MAX)?;
            let kind = match field("kind")? {
                "R" => MemKind::Load,
                "W" => MemKind::Store,
                "P" => MemKind::Prefetch,
                k => return Err(format!("kind `{}` is not R (read), W (write) or P (prefetch)", clip(k))),
            };
            let va = field("vaddr")?;
            let hex = va
                .strip_prefix("0x")
                .or_else(|| va.strip_prefix("0X"))
                .ok_or_else(|| format!("vaddr `{}` is not hex with a 0x prefix", clip(va)))?;
            let vaddr = u64::from_str_radix(hex, 16).map_err(|_| format!("vaddr `{}` is not a hex address", clip(va)))?;
            let sf = field("size")?;
            // A size past u64 is outside the accepted range too: say that range, not u64's.
            let size = whole("size", sf, u64::MAX).map_err(|e| {
                if e.contains("out of range") {
                    format!("size {} is outside 1..4096 bytes", clip(sf))
                } else {
                    e
                }
            })?;
            if size == 0 || size > 4096 {
                return Err(format!("size {size} is outside 1..4096 bytes"));
            }
            let size = size as u32;
            let kind = match kind {
                MemKind::Load => 0,
                MemKind::Store => 1,
                MemKind::Prefetch => 2,
            };
            let mut rec = record_of(&TimedRec { time_ns: 0, gpu, cu, wavefront, kind, vaddr, size })?;
            rec.time = match order_gap {
                None => time_ns.checked_mul(PS_PER_NS).ok_or("time_ns is too large")?,
                Some(gap) => time_ns
                    .checked_mul(gap)
                    .filter(|t| *t <= MAX_TIME_PS)
                    .ok_or("order x workload.trace.gap_ns is beyond the simulated clock's range (2^62 ps, 53 days)")?,
            };
            Ok(rec)
        })();
        let rec = parsed.map_err(|why| self.bad(&why))?;
        if it.next().is_some() {
            return Err(self.bad("more than 7 fields"));
        }
        if rec.time < self.last_time {
            let (what, order) = if self.order_gap.is_some() { ("order", "order") } else { ("time", "time order") };
            return Err(self.bad(&format!("{what} goes backwards (records must be in non-decreasing {order})")));
        }
        self.last_time = rec.time;
        Ok(Some(rec))
    }
}

/// Longest line the text trace readers take (a CSV record is under 100 bytes, an Accel-Sim
/// instruction line under 1 KiB). A file without line breaks (a binary or zero-filled file taken
/// for CSV) is refused at its first 64 KiB: read whole into one line it took four times its size
/// in memory (1.2 GB for 300 MB) and was quoted whole in the one-line error.
pub const MAX_LINE_BYTES: usize = 1 << 16;

/// `BufRead::read_line` into `line` (cleared first) that stops with an `InvalidData` error at a
/// line longer than [`MAX_LINE_BYTES`]; the bytes read, 0 at the end of the input.
pub fn read_bounded_line(input: &mut dyn BufRead, line: &mut String) -> std::io::Result<usize> {
    let mut bytes = std::mem::take(line).into_bytes();
    bytes.clear();
    let n = input.take(MAX_LINE_BYTES as u64 + 1).read_until(b'\n', &mut bytes)?;
    if n > MAX_LINE_BYTES {
        let why = format!("a line longer than {} KiB: not a text trace (a binary file?)", MAX_LINE_BYTES >> 10);
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
    }
    *line =
        String::from_utf8(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8"))?;
    Ok(n)
}

/// `s` cut to its first 100 characters, for an error message that quotes the input.
pub fn clip(s: &str) -> String {
    match s.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// A zstd skippable frame (magic 0x184D2A50..=0x184D2A5F, little-endian) starts `head`.
fn is_skippable_zstd(head: &[u8]) -> bool {
    head.len() >= 4 && head[1..4] == [0x2a, 0x4d, 0x18] && head[0] & 0xf0 == 0x50
}

type ZstdFrame<R> = ruzstd::decoding::StreamingDecoder<R, ruzstd::decoding::FrameDecoder>;

/// Every frame of a zstd stream in turn, skippable frames passed over: ruzstd's decoder reads
/// one frame, while `zstd` may write several (`--format` concatenation, `pzstd`), as gzip may
/// hold several members. A truncated or corrupt frame is a read error, not an early end.
struct ZstdFrames<R: BufRead> {
    /// The input between frames; inside a frame, `frame` holds it.
    src: Option<R>,
    frame: Option<ZstdFrame<R>>,
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let corrupt = |e: &dyn std::fmt::Display| {
            // ruzstd's errors nest their causes' Debug forms: an input that ends inside a frame says so plainly.
            let text = e.to_string();
            let why = if text.contains("UnexpectedEof") { "zstd: the stream ends inside a frame".into() } else { format!("zstd: {text}") };
            std::io::Error::new(std::io::ErrorKind::InvalidData, why)
        };
        loop {
            if let Some(f) = &mut self.frame {
                let n = f.read(buf).map_err(|e| corrupt(&e))?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.src = self.frame.take().map(|f| f.into_inner());
            }
            let Some(mut src) = self.src.take() else { return Ok(0) };
            let head = src.fill_buf()?;
            if head.is_empty() {
                self.src = Some(src);
                return Ok(0);
            }
            if is_skippable_zstd(head) {
                let mut h = [0u8; 8];
                src.read_exact(&mut h)?;
                let len = u64::from(u32::from_le_bytes([h[4], h[5], h[6], h[7]]));
                if std::io::copy(&mut src.by_ref().take(len), &mut std::io::sink())? < len {
                    return Err(corrupt(&"a skippable frame is cut short"));
                }
                self.src = Some(src);
                continue;
            }
            self.frame = Some(ZstdFrame::new(src).map_err(|e| corrupt(&e))?);
        }
    }
}

/// The latest time a record may carry, in ps: 2^62 (53 days) leaves the simulated clock room to
/// run on past it; a record at u64::MAX ps saturated the clock (its latency read 0).
const MAX_TIME_PS: Ps = 1 << 62;

/// A CSV field as a whole number up to `max`; a number too large says so rather than
/// "not a whole number".
fn whole(name: &str, s: &str, max: u64) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v) if v <= max => Ok(v),
        Err(_) if !s.trim_start_matches('+').bytes().all(|b| b.is_ascii_digit()) || s.trim_start_matches('+').is_empty() => {
            Err(format!("{name} `{}` is not a whole number", clip(s)))
        }
        _ => Err(format!("{name} {} is out of range (at most {max})", clip(s))),
    }
}

/// A record's fields checked and converted (shared by the CSV and binary readers).
fn record_of(t: &TimedRec) -> Result<Record, String> {
    let kind = match t.kind {
        0 => MemKind::Load,
        1 => MemKind::Store,
        2 => MemKind::Prefetch,
        k => return Err(format!("kind {k} is not a read, write or prefetch")),
    };
    if t.gpu == 0 {
        return Err("gpu 0 does not exist: GPUs are numbered from 1, as MGPUSim names them".into());
    }
    if t.size == 0 || t.size > 4096 {
        return Err(format!("size {} is outside 1..4096 bytes", t.size));
    }
    if t.vaddr >= 1 << 57 {
        return Err(format!("vaddr {:#x} is beyond a 57-bit address space", t.vaddr));
    }
    if t.vaddr + u64::from(t.size) > 1 << 57 {
        return Err(format!("the access at {:#x} of {} bytes ends beyond a 57-bit address space", t.vaddr, t.size));
    }
    if t.time_ns > MAX_TIME_PS / PS_PER_NS {
        return Err(format!("time_ns {} is out of range (at most {})", t.time_ns, MAX_TIME_PS / PS_PER_NS));
    }
    let time = t.time_ns * PS_PER_NS;
    Ok(Record { time, gpu: t.gpu, cu: t.cu, wavefront: t.wavefront, kind, vaddr: t.vaddr, size: t.size })
}

/// Summary statistics of a trace (`uvmsim trace info`). Fields a format does
/// not record (times and CUs of a warp trace, kernels of a timed trace) are 0.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TraceInfo {
    /// `csv`, `uvmt-timed` or `uvmt-warps`.
    pub format: String,
    /// The `.uvmt` header's source (generator config or original file).
    pub source: String,
    /// Timed traces: records (one per coalesced request). Warp traces: lane accesses (active lanes of memory instructions).
    pub accesses: u64,
    /// Warp memory instructions (timed traces: = accesses).
    pub mem_insts: u64,
    /// Distinct 64 B lines each memory instruction touches, summed (coalesced requests; timed traces: = accesses).
    pub requests_64b: u64,
    /// Kernel launches (warp traces).
    pub kernels: u64,
    /// Warps (warp traces).
    pub warps: u64,
    pub reads: u64,
    pub writes: u64,
    pub prefetches: u64,
    pub gpus: u64,
    pub cus: u64,
    pub wavefronts: u64,
    pub unique_pages_4k: u64,
    pub unique_lines_64b: u64,
    pub footprint_bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Request sizes: (bytes, count), ascending (warp traces: bytes per lane access).
    pub sizes: Vec<(u32, u64)>,
    /// Page sizes of the recorded allocations: (page bytes, allocated bytes), ascending (warp traces).
    pub page_sizes: Vec<(u64, u64)>,
    /// Managed (unified) bytes among the allocations (warp traces).
    pub managed_bytes: u64,
}

/// Touched 4 KiB pages and 64 B lines, as bitmaps per 2 MiB region (bounded by the footprint).
#[derive(Default)]
struct Touched {
    regions: HashMap<u64, Box<[u64; 512]>>,
    lines: u64,
    pages: u64,
}

impl Touched {
    fn line(&mut self, line: u64) {
        let bits = self.regions.entry(line >> 15).or_insert_with(|| Box::new([0; 512]));
        let i = (line & 0x7fff) as usize;
        if bits[i / 64] & 1 << (i % 64) == 0 {
            // A page's 64 lines are one word: its first line touched is the page's first touch.
            if bits[i / 64] == 0 {
                self.pages += 1;
            }
            bits[i / 64] |= 1 << (i % 64);
            self.lines += 1;
        }
    }
}

/// Records or ops a trace loop (info, convert) handles between two looks at the interrupt flag.
pub(crate) const CANCEL_EVERY: u64 = 4096;

/// In a long trace loop, at item `n`: has this thread's work been interrupted (Ctrl-C, SIGTERM:
/// [`crate::sim::with_cancel`])? Looks at the flag every [`CANCEL_EVERY`] items, so that a trace of
/// GBs stops within milliseconds. `what` names the file in the error.
pub(crate) fn check_cancel(n: u64, what: &str) -> Result<(), TraceError> {
    if n % CANCEL_EVERY == 0 && crate::sim::cancelled() {
        return Err(TraceError(format!("{what}: interrupted")));
    }
    Ok(())
}

/// Stream a trace once and summarise it: CSV, timed or warp `.uvmt`, or an Accel-Sim `kernelslist.g`.
pub fn info(path: &str) -> Result<TraceInfo, TraceError> {
    TraceError::check_regular(path)?;
    if tracefmt::is_uvmt(path) {
        let f = TraceFile::open(path)?;
        if f.header.mode == Mode::Warps {
            return warp_info(&f);
        }
    } else if super::accelsim::is_kernelslist(path) {
        let dir = tempdir_file("info")?;
        let f = super::accelsim::convert(path, &dir, &super::accelsim::Layout::default())?;
        return warp_info(&f);
    }
    let mut r = TraceReader::open(path)?;
    let mut out = TraceInfo { format: if r.bin.is_some() { "uvmt-timed" } else { "csv" }.into(), ..TraceInfo::default() };
    if let Some(b) = &r.bin {
        out.source = b.source().to_string();
    }
    let (mut gpus, mut cus, mut waves) = (HashSet::new(), HashSet::new(), HashSet::new());
    let mut touched = Touched::default();
    let mut sizes = BTreeMap::new();
    loop {
        check_cancel(out.accesses, path)?;
        let Some(rec) = r.next_record()? else { break };
        if out.accesses == 0 {
            out.first_ns = rec.time / PS_PER_NS;
        }
        out.last_ns = rec.time / PS_PER_NS;
        out.accesses += 1;
        match rec.kind {
            MemKind::Load => out.reads += 1,
            MemKind::Store => out.writes += 1,
            MemKind::Prefetch => out.prefetches += 1,
        }
        gpus.insert(rec.gpu);
        cus.insert((rec.gpu, rec.cu));
        waves.insert(rec.wavefront);
        for l in rec.vaddr >> 6..=(rec.vaddr + rec.size as u64 - 1) >> 6 {
            touched.line(l);
        }
        *sizes.entry(rec.size).or_insert(0u64) += 1;
    }
    out.mem_insts = out.accesses;
    out.requests_64b = out.accesses;
    out.gpus = gpus.len() as u64;
    out.cus = cus.len() as u64;
    out.wavefronts = waves.len() as u64;
    out.unique_pages_4k = touched.pages;
    out.unique_lines_64b = touched.lines;
    out.footprint_bytes = out.unique_pages_4k * 4096;
    out.sizes = sizes.into_iter().collect();
    Ok(out)
}

/// A temporary file that is gone when the returned path is dropped... as a path for a converter's output.
fn tempdir_file(what: &str) -> Result<TempPath, TraceError> {
    TempPath::new(what).map_err(|e| TraceError(format!("cannot create a temporary file: {e}")))
}

/// A temporary file path, deleted on drop.
pub struct TempPath(pub String);

impl TempPath {
    pub fn new(what: &str) -> std::io::Result<TempPath> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("uvmsim-{what}-{}-{n}.uvmt", std::process::id()));
        Ok(TempPath(p.to_string_lossy().into_owned()))
    }
}

impl std::ops::Deref for TempPath {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Is `out` the file `input` names (after following links, or a hard link to it)?
/// Converting a file onto itself would truncate the input before it is read.
pub fn same_file(input: &str, out: &str) -> bool {
    let (Ok(a), Ok(b)) = (std::fs::metadata(input), std::fs::metadata(out)) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        std::fs::canonicalize(input).ok() == std::fs::canonicalize(out).ok()
    }
}

/// Can OUT be written by renaming a temporary file over it? Not when it is a directory, nor when it
/// exists and is not a regular file (a device such as /dev/null, a FIFO, a socket): the rename
/// would replace the node itself (run as root, `trace record ... /dev/null` left a regular file
/// at /dev/null). Checked before any work; the message names OUT.
pub fn check_out(out: &str) -> Result<(), String> {
    match std::fs::metadata(out) {
        Ok(m) if m.is_dir() => Err(format!("{out}: cannot write: is a directory")),
        Ok(m) if !m.is_file() => {
            Err(format!("{out}: cannot write: not a regular file (a device, FIFO or socket would be replaced by the output)"))
        }
        _ => Ok(()),
    }
}

/// A temporary file next to an output, renamed over it by [`TempOut::commit`] and
/// removed if dropped uncommitted: a failed or interrupted writer never leaves a
/// truncated output behind (or destroys the file it was to replace).
pub struct TempOut {
    /// The output as the user named it (for messages).
    pub out: String,
    /// What the rename replaces: `out`, or the file a symbolic link `out` points to.
    target: std::path::PathBuf,
    pub tmp: String,
    done: bool,
}

impl TempOut {
    /// Only the name is chosen; the writer creates the file. The same directory keeps the rename atomic. An `out`
    /// that is a symbolic link to a file is written through, as a shell's `>` would: the rename would otherwise
    /// replace the link itself and leave its target as it was.
    pub fn new(out: &str) -> TempOut {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::path::Path::new(out);
        // Follow the links by hand, not with canonicalize: a dangling link's target is created, as Python's writers
        // (os.path.realpath) and a shell do. 40 hops is Linux's own limit; a loop is then left to the rename.
        let mut target = p.to_path_buf();
        for _ in 0..40 {
            match std::fs::read_link(&target) {
                Ok(next) => target = target.parent().map_or(next.clone(), |d| d.join(&next)),
                Err(_) => break,
            }
        }
        let name = target.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = target.with_file_name(format!(".{name}.uvmsim-{}-{n}.tmp", std::process::id()));
        TempOut { out: out.to_string(), target, tmp: tmp.to_string_lossy().into_owned(), done: false }
    }

    /// A writer's error, naming the output rather than the temporary file.
    pub fn rename_err(&self, e: TraceError) -> TraceError {
        TraceError(e.0.replace(&self.tmp, &self.out))
    }

    /// A converter's error, naming the output rather than the temporary file.
    pub fn rename_convert_err(&self, e: ConvertError) -> ConvertError {
        match e {
            ConvertError::Input(e) => ConvertError::Input(self.rename_err(e)),
            ConvertError::Output(m) => ConvertError::Output(m.replace(&self.tmp, &self.out)),
        }
    }

    pub fn commit(mut self) -> Result<(), TraceError> {
        std::fs::rename(&self.tmp, &self.target).map_err(|e| TraceError(format!("{}: cannot write: {e}", self.out)))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for TempOut {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Summary of a warp trace: every op of every warp, streamed.
fn warp_info(f: &TraceFile) -> Result<TraceInfo, TraceError> {
    let h = &f.header;
    let mut out =
        TraceInfo { format: "uvmt-warps".into(), source: h.source.clone(), kernels: h.kernels().count() as u64, ..TraceInfo::default() };
    let mut touched = Touched::default();
    let mut sizes = BTreeMap::new();
    let mut lines = crate::gpu::Lines::default();
    tracefmt::for_each_op(f, 4096, |_, _, op, scratch| {
        match op {
            Op::Exit => out.warps += 1,
            Op::Mem { kind, lanes, bytes } => {
                let n = match lanes {
                    Lanes::Strided { n, .. } | Lanes::Explicit { n } => n as u64,
                };
                out.mem_insts += 1;
                out.accesses += n;
                match kind {
                    MemKind::Load => out.reads += n,
                    MemKind::Store => out.writes += n,
                    MemKind::Prefetch => out.prefetches += n,
                }
                *sizes.entry(bytes).or_insert(0u64) += n;
                // Per lane at most 4096 B = 64 lines: coalesce lane by lane into the bitmaps.
                let each: &mut dyn FnMut(u64) = &mut |a| {
                    for l in a >> 6..=(a + bytes as u64 - 1) >> 6 {
                        touched.line(l);
                    }
                };
                match lanes {
                    Lanes::Strided { base, stride, n } => (0..n as u64).for_each(|i| each(base + i * stride)),
                    Lanes::Explicit { n } => scratch[..n as usize].iter().for_each(|&a| each(a)),
                }
                if bytes <= 64 {
                    crate::gpu::coalesce(lanes, bytes, scratch, 6, &mut lines);
                    out.requests_64b += lines.n as u64;
                } else {
                    out.requests_64b += n * (bytes as u64).div_ceil(64);
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    out.wavefronts = out.warps;
    out.unique_pages_4k = touched.pages;
    out.unique_lines_64b = touched.lines;
    out.footprint_bytes = out.unique_pages_4k * 4096;
    out.sizes = sizes.into_iter().collect();
    let mut pages = BTreeMap::new();
    for b in &h.buffers {
        *pages.entry(b.page_bytes).or_insert(0u64) += b.bytes;
        if b.managed {
            out.managed_bytes += b.bytes;
        }
    }
    out.page_sizes = pages.into_iter().collect();
    Ok(out)
}

/// Convert a timed CSV trace to a timed `.uvmt` (losslessly), or a timed
/// `.uvmt` back to CSV (gzip-compressed when `gz`). Returns the records written; a write that fails is
/// `ConvertError::Output`, anything wrong with the input `ConvertError::Input`.
pub fn convert_timed(input: &str, out: &str, gz: bool) -> Result<u64, ConvertError> {
    let mut r = TraceReader::open(input)?;
    let werr = |e: std::io::Error| ConvertError::Output(format!("{out}: cannot write: {e}"));
    let file = File::create(out).map_err(werr)?;
    let mut n = 0u64;
    let kind = |k: MemKind| match k {
        MemKind::Load => 0u8,
        MemKind::Store => 1,
        MemKind::Prefetch => 2,
    };
    if r.bin.is_none() {
        let h = tracefmt::Header::new(Mode::Timed, input.to_string(), 0, vec![], vec![]);
        let mut w = tracefmt::Writer::new(std::io::BufWriter::new(file), &h).map_err(werr)?;
        loop {
            check_cancel(n, input)?;
            let Some(rec) = r.next_record()? else { break };
            let t = TimedRec {
                time_ns: rec.time / PS_PER_NS,
                gpu: rec.gpu,
                cu: rec.cu,
                wavefront: rec.wavefront,
                kind: kind(rec.kind),
                vaddr: rec.vaddr,
                size: rec.size,
            };
            w.record(&t).map_err(werr)?;
            n += 1;
        }
        w.finish().map_err(werr)?;
        return Ok(n);
    }
    let mut csv = |o: &mut dyn Write| -> Result<(), ConvertError> {
        writeln!(o, "{}", HEADER.join(",")).map_err(werr)?;
        loop {
            check_cancel(n, input)?;
            let Some(rec) = r.next_record()? else { break };
            let k = ["R", "W", "P"][kind(rec.kind) as usize];
            writeln!(o, "{},{},{},{},{k},{:#x},{}", rec.time / PS_PER_NS, rec.gpu, rec.cu, rec.wavefront, rec.vaddr, rec.size)
                .map_err(werr)?;
            n += 1;
        }
        Ok(())
    };
    let o = std::io::BufWriter::new(file);
    if gz {
        let mut gz = flate2::write::GzEncoder::new(o, flate2::Compression::default());
        csv(&mut gz)?;
        gz.finish().and_then(|mut o| o.flush()).map_err(werr)?;
    } else {
        let mut o = o;
        csv(&mut o)?;
        o.flush().map_err(werr)?;
    }
    Ok(n)
}

/// Check that a reader can open `path` (fail early, before a run starts).
pub fn check_readable(path: &str) -> Result<(), TraceError> {
    TraceReader::open(path).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// `body` in a file `name` of a fresh directory, removed with the returned guard.
    fn write(name: &str, body: &str, gz: bool) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        let mut f = File::create(&p).unwrap();
        if gz {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(body.as_bytes()).unwrap();
            f.write_all(&e.finish().unwrap()).unwrap();
        } else {
            f.write_all(body.as_bytes()).unwrap();
        }
        let p = p.to_string_lossy().into_owned();
        (dir, p)
    }

    const GOOD: &str = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64\n10,1,3,1,W,0x2040,64\n12,1,0,0,R,0x1040,64\n";

    #[test]
    fn reads_plain_and_gzip_alike() {
        for gz in [false, true] {
            let (_p_dir, p) = write(&format!("good{gz}.csv"), GOOD, gz);
            let mut r = TraceReader::open(&p).unwrap();
            let a = r.next_record().unwrap().unwrap();
            assert_eq!(a, Record { time: 10_000, gpu: 1, cu: 0, wavefront: 0, kind: MemKind::Load, vaddr: 0x1000, size: 64 });
            assert_eq!(r.next_record().unwrap().unwrap().kind, MemKind::Store);
            assert_eq!(r.next_record().unwrap().unwrap().time, 12_000);
            assert!(r.next_record().unwrap().is_none());
            let i = info(&p).unwrap();
            assert_eq!((i.accesses, i.reads, i.writes, i.cus, i.wavefronts, i.unique_pages_4k, i.unique_lines_64b), (3, 2, 1, 2, 2, 2, 3));
        }
    }

    #[test]
    fn order_only_traces_issue_each_step_gap_ns_apart() {
        let body = "order,gpu,cu,wavefront,kind,vaddr,size\n0,1,0,0,R,0x1000,64\n0,1,1,1,R,0x2000,64\n3,1,0,0,W,0x1040,64\n";
        let (_p_dir, p) = write("order.csv", body, false);
        let times = |r: TraceReader| {
            let mut r = r;
            std::iter::from_fn(|| r.next_record().unwrap()).map(|x| x.time).collect::<Vec<Ps>>()
        };
        assert_eq!(times(TraceReader::open(&p).unwrap()), vec![0, 0, 3_000], "1 ns a step unless set");
        assert_eq!(times(TraceReader::open(&p).unwrap().with_gap_ns(2.5)), vec![0, 0, 7_500]);
        // A timed trace ignores the gap.
        assert_eq!(times(TraceReader::open(&write("timed.csv", GOOD, false).1).unwrap().with_gap_ns(100.0)), vec![10_000, 10_000, 12_000]);
        let (_back_dir, back) =
            write("order_back.csv", "order,gpu,cu,wavefront,kind,vaddr,size\n5,1,0,0,R,0x1000,64\n4,1,0,0,R,0x1000,64\n", false);
        let mut r = TraceReader::open(&back).unwrap();
        r.next_record().unwrap();
        let e = r.next_record().unwrap_err().0;
        assert!(e.contains(":3: order goes backwards (records must be in non-decreasing order)"), "{e}");
    }

    #[test]
    fn bad_input_names_file_line_and_reason() {
        let cases = [
            ("time,gpu\n", ":1: header"),
            ("time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,X,0x1000,64\n", ":2: kind `X`"),
            ("time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,1000,64\n", ":2: vaddr `1000` is not hex"),
            ("time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000\n", ":2: missing field `size`"),
            ("time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64,9\n", ":2: more than 7 fields"),
            ("time_ns,gpu,cu,wavefront,kind,vaddr,size\n20,1,0,0,R,0x1000,64\n10,1,0,0,R,0x1000,64\n", ":3: time goes backwards"),
            ("time_ns,gpu,cu,wavefront,kind,vaddr,size\nten,1,0,0,R,0x1000,64\n", ":2: time_ns `ten` is not a whole number"),
            // Numbers too large say so, not "not a whole number".
            (
                "time_ns,gpu,cu,wavefront,kind,vaddr,size\n99999999999999999999,1,0,0,R,0x1000,64\n",
                ":2: time_ns 99999999999999999999 is out of range",
            ),
            (
                "time_ns,gpu,cu,wavefront,kind,vaddr,size\n4611686018427388,1,0,0,R,0x1000,64\n",
                ":2: time_ns 4611686018427388 is out of range (at most 4611686018427387)",
            ),
            ("time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,4294967296\n", ":2: size 4294967296 is outside 1..4096 bytes"),
            (
                "time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,99999999999999999999999\n",
                ":2: size 99999999999999999999999 is outside 1..4096 bytes",
            ),
            // The last byte of an access is inside the 57-bit space too (it failed the run with exit 1).
            (
                "time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1fffffffffffff0,64\n",
                ":2: the access at 0x1fffffffffffff0 of 64 bytes ends beyond a 57-bit address space",
            ),
            (
                "time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,4294967296,0,0,R,0x1000,64\n",
                ":2: gpu 4294967296 is out of range (at most 4294967295)",
            ),
            // GPUs are numbered from 1.
            ("time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64\n11,0,0,0,R,0x1000,64\n", ":3: gpu 0 does not exist"),
            ("", "empty trace"),
        ];
        for (i, (body, want)) in cases.iter().enumerate() {
            let (_p_dir, p) = write(&format!("bad{i}.csv"), body, false);
            let e = match TraceReader::open(&p) {
                Err(e) => e,
                Ok(mut r) => loop {
                    match r.next_record() {
                        Err(e) => break e,
                        Ok(None) => panic!("case {i} parsed"),
                        Ok(Some(_)) => {}
                    }
                },
            };
            assert!(e.0.contains(&p) && e.0.contains(want), "case {i}: {e}");
        }
    }

    fn zstd(body: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(body, ruzstd::encoding::CompressionLevel::Fastest)
    }

    fn records(p: &str) -> Result<Vec<Record>, TraceError> {
        let mut r = TraceReader::open(p)?;
        std::iter::from_fn(|| r.next_record().transpose()).collect()
    }

    /// A zstd CSV reads as the plain one, also as several frames with a skippable frame between them.
    #[test]
    fn reads_zstd_frames_like_plain() {
        let (_dir, plain) = write("plain.csv", GOOD, false);
        let want = records(&plain).unwrap();
        assert_eq!(want.len(), 3);
        let (_d1, one) = write("one.csv.zst", "", false);
        std::fs::write(&one, zstd(GOOD.as_bytes())).unwrap();
        assert_eq!(records(&one).unwrap(), want);
        let (head, tail) = GOOD.split_at(GOOD.len() / 2 + 3);
        let mut several = vec![0x5a, 0x2a, 0x4d, 0x18, 5, 0, 0, 0, 1, 2, 3, 4, 5];
        several.extend(zstd(head.as_bytes()));
        several.extend([0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0]);
        several.extend(zstd(tail.as_bytes()));
        let (_d2, many) = write("many.csv.zst", "", false);
        std::fs::write(&many, several).unwrap();
        assert_eq!(records(&many).unwrap(), want);
        assert_eq!(info(&many).unwrap().accesses, 3);
    }

    #[test]
    fn truncated_zstd_is_an_error_not_a_short_trace() {
        let body = GOOD.to_string() + &"13,1,0,0,R,0x1040,64\n".repeat(50);
        let bytes = zstd(body.as_bytes());
        let (_d, cut) = write("cut.csv.zst", "", false);
        for keep in [bytes.len() - 4, bytes.len() / 2, 6] {
            std::fs::write(&cut, &bytes[..keep]).unwrap();
            let e = records(&cut).expect_err("a truncated zstd stream must not end quietly");
            assert!(e.0.contains("cut.csv.zst") && e.0.contains("truncated or corrupt"), "{keep}: {e}");
        }
    }

    #[test]
    fn truncated_gzip_is_an_error_not_a_short_trace() {
        let (_p_dir, p) = write("full.csv.gz", GOOD, true);
        let bytes = std::fs::read(&p).unwrap();
        let (_cut_dir, cut) = write("cut.csv.gz", "", false);
        std::fs::write(&cut, &bytes[..bytes.len() - 12]).unwrap();
        let mut r = TraceReader::open(&cut).unwrap();
        let mut result = Ok(None);
        for _ in 0..10 {
            result = r.next_record();
            if !matches!(result, Ok(Some(_))) {
                break;
            }
        }
        let e = result.expect_err("a truncated gzip stream must not end quietly");
        assert!(e.0.contains("truncated or corrupt"), "{e}");
    }

    proptest::proptest! {
        /// Arbitrary bytes, and valid traces with bytes flipped, never panic the
        /// reader: every outcome is records or an error naming the input and line.
        #[test]
        fn arbitrary_input_never_panics(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            flips in proptest::collection::vec((0usize..200, proptest::prelude::any::<u8>()), 0..6),
            gz in proptest::prelude::any::<bool>(),
        ) {
            let mut valid = GOOD.repeat(3).into_bytes();
            for (i, b) in flips {
                let n = valid.len();
                valid[i % n] = b;
            }
            for bytes in [junk, valid] {
                let data = if gz {
                    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                    e.write_all(&bytes).unwrap();
                    e.finish().unwrap()
                } else {
                    bytes
                };
                if let Ok(mut r) = TraceReader::from_reader("fuzz", Box::new(std::io::Cursor::new(data))) {
                    for _ in 0..100 {
                        match r.next_record() {
                            Ok(Some(_)) => {}
                            Ok(None) => break,
                            Err(e) => { proptest::prop_assert!(e.0.starts_with("fuzz:"), "{}", e); break; }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn order_steps_round_gap_ns_to_the_nearest_ps() {
        let body = "order,gpu,cu,wavefront,kind,vaddr,size\n0,1,0,0,R,0x1000,64\n3,1,0,0,R,0x2000,64\n";
        let (_dir, p) = write("order_round.csv", body, false);
        let mut r = TraceReader::open(&p).unwrap().with_gap_ns(0.0016);
        // 0.0016 ns = 1.6 ps, rounded to 2 ps a step: order 3 issues at 6 ps (not 3, as truncation gives).
        assert_eq!((r.next_record().unwrap().unwrap().time, r.next_record().unwrap().unwrap().time), (0, 6));
    }

    #[test]
    fn the_largest_time_size_and_address_are_accepted() {
        // time_ns at its limit 2^62 / 1000 = 4611686018427387; a 4096-byte access at 2^57 - 4096 ends exactly at 2^57.
        let body = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n4611686018427387,1,0,0,W,0x1fffffffffff000,4096\n";
        let (_dir, p) = write("edges.csv", body, false);
        let rec = records(&p).unwrap();
        assert_eq!(
            rec,
            vec![Record {
                time: 4_611_686_018_427_387_000,
                gpu: 1,
                cu: 0,
                wavefront: 0,
                kind: MemKind::Store,
                vaddr: 0x1ff_ffff_ffff_f000,
                size: 4096
            }]
        );
        // An address at 2^57 itself is named as beyond the space (not only its access's end).
        let (_d2, p2) = write("beyond.csv", "time_ns,gpu,cu,wavefront,kind,vaddr,size\n1,1,0,0,R,0x200000000000000,64\n", false);
        let e = records(&p2).unwrap_err().0;
        assert!(e.ends_with(":2: vaddr 0x200000000000000 is beyond a 57-bit address space"), "{e}");
    }

    #[test]
    fn blank_lines_are_skipped_but_counted() {
        let body = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64\n\n12,1,0,0,R,0x1040,64\n\nten,1,0,0,R,0x1000,64\n";
        let (_dir, p) = write("blank.csv", body, false);
        let mut r = TraceReader::open(&p).unwrap();
        assert_eq!(r.next_record().unwrap().unwrap().time, 10_000);
        assert_eq!(r.next_record().unwrap().unwrap().time, 12_000);
        // Lines: 1 header, 2 record, 3 blank, 4 record, 5 blank, 6 the bad one.
        let e = r.next_record().unwrap_err().0;
        assert!(e.ends_with(":6: time_ns `ten` is not a whole number"), "{e}");
    }

    #[test]
    fn a_line_too_long_names_its_line() {
        let body = format!("time_ns,gpu,cu,wavefront,kind,vaddr,size\n{}\n", "1".repeat(MAX_LINE_BYTES + 10));
        let (_dir, p) = write("long.csv", &body, false);
        let e = records(&p).unwrap_err().0;
        assert!(
            e.ends_with(":2: cannot read the trace (truncated or corrupt?): a line longer than 64 KiB: not a text trace (a binary file?)"),
            "{e}"
        );
    }

    #[test]
    fn info_counts_cus_per_gpu_lines_once_and_the_first_and_last_time() {
        // The second access is GPU 2's CU 0 (a CU of its own) on the first access's line; the third is 2 MiB + 4 KiB on,
        // 2^15 lines after the first line (0x201000 / 64 = 0x8040, 0x1000 / 64 = 0x40).
        let body = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64\n11,2,0,1,W,0x1010,32\n15,1,0,0,R,0x201000,64\n";
        let (_dir, p) = write("info.csv", body, false);
        let i = info(&p).unwrap();
        assert_eq!((i.accesses, i.reads, i.writes, i.gpus, i.cus, i.wavefronts), (3, 2, 1, 2, 2, 2));
        // Lines 0x40 and 0x8040, in pages 0x1000 and 0x201000: 2 pages = 8192 bytes.
        assert_eq!((i.unique_lines_64b, i.unique_pages_4k, i.footprint_bytes), (2, 2, 8192));
        assert_eq!((i.first_ns, i.last_ns), (10, 15));
        assert_eq!(i.sizes, vec![(32, 1), (64, 2)]);
    }

    #[test]
    fn csv_converts_to_uvmt_and_back_unchanged() {
        let (dir, p) = write("conv.csv", GOOD, false);
        let bin = dir.path().join("conv.uvmt").to_string_lossy().into_owned();
        let back = dir.path().join("back.csv").to_string_lossy().into_owned();
        assert_eq!(convert_timed(&p, &bin, false), Ok(3));
        assert_eq!(convert_timed(&bin, &back, false), Ok(3));
        assert_eq!(std::fs::read_to_string(&back).unwrap(), GOOD);
    }

    #[test]
    fn a_binary_trace_going_back_in_time_is_refused() {
        // The first record is 7 bytes (tag, time 100, gpu 1, wavefront 0, vaddr zigzag(0x1000) = 0x2000 in 2 bytes,
        // size 64; cu 0 is the initial one), each repeat 4 (tag, 3 zero deltas): 7 + 4 x 16 383 = 65 539 >= 64 KiB
        // (65 535 a record earlier) closes the chunk at record 16 384, so the one at 50 ns starts the next chunk,
        // whose deltas restart: the writer takes it. It is the 16 385th record.
        let (dir, _) = write("unused", "", false);
        let p = dir.path().join("back.uvmt").to_string_lossy().into_owned();
        let h = tracefmt::Header::new(Mode::Timed, "x".into(), 0, vec![], vec![]);
        let mut w = tracefmt::Writer::new(File::create(&p).unwrap(), &h).unwrap();
        let mut t = TimedRec { time_ns: 100, gpu: 1, cu: 0, wavefront: 0, kind: 0, vaddr: 0x1000, size: 64 };
        for _ in 0..16_384 {
            w.record(&t).unwrap();
        }
        t.time_ns = 50;
        w.record(&t).unwrap();
        w.finish().unwrap();
        let e = records(&p).unwrap_err().0;
        assert!(
            e.starts_with(&format!("{p}: record 16385 (chunk at byte "))
                && e.ends_with(": time goes backwards (records must be in non-decreasing time order)"),
            "{e}"
        );
    }

    #[test]
    fn a_byte_order_mark_is_named() {
        let (_dir, p) = write("bom.csv", &format!("\u{feff}{GOOD}"), false);
        let e = TraceReader::open(&p).err().unwrap().0;
        assert!(
            e.ends_with(":1: the header starts with a UTF-8 byte-order mark (U+FEFF, as some spreadsheet programs write): remove it"),
            "{e}"
        );
    }

    #[test]
    fn a_binary_record_at_the_latest_time_reads_and_one_after_it_does_not() {
        // The latest time is 2^62 ps = 4611686018427387 ns (rounded down).
        let (dir, _) = write("unused", "", false);
        for (time_ns, ok) in [(4_611_686_018_427_387u64, true), (4_611_686_018_427_388, false)] {
            let p = dir.path().join(format!("t{time_ns}.uvmt")).to_string_lossy().into_owned();
            let h = tracefmt::Header::new(Mode::Timed, "x".into(), 0, vec![], vec![]);
            let mut w = tracefmt::Writer::new(File::create(&p).unwrap(), &h).unwrap();
            w.record(&TimedRec { time_ns, gpu: 1, cu: 0, wavefront: 0, kind: 0, vaddr: 0x1000, size: 64 }).unwrap();
            w.finish().unwrap();
            match records(&p) {
                Ok(r) => assert!(ok && r[0].time == time_ns * 1000, "{r:?}"),
                Err(e) => assert!(!ok && e.0.ends_with("time_ns 4611686018427388 is out of range (at most 4611686018427387)"), "{e}"),
            }
        }
    }

    #[test]
    fn a_missing_file_is_reported() {
        let e = TraceReader::open("/nonexistent/trace.csv").err().unwrap();
        assert!(e.0.contains("/nonexistent/trace.csv") && e.0.contains("cannot read"), "{e}");
    }
}
