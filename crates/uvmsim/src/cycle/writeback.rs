//! Akita v4.9.0's write-back cache (mem/cache/writeback: writebackcache.go,
//! topparser.go, directorystage.go, bankstage.go, mshrstage.go,
//! writebufferstage.go, transaction.go, util.go, builder.go), one bank of
//! MGPUSim's R9 Nano L2.
//!
//! Left out: the flusher and control port (flush, pause, restart, so the
//! cache is always running and no transaction is ever discarded), tracing,
//! data storage and dirty masks (no data is simulated; a block is dirty or
//! not), PIDs (one address space). Akita's bank-stage count is one
//! (`buildBankStages`), so `bankID(...) % 1` is always bank 0 and the per-bank
//! buffer slices are single buffers here.
//!
//! Go's transactions are shared pointers; here they live in a slab indexed by
//! [`TransId`], freed when the request is answered (where Go's
//! `removeTransaction` drops it from `inFlightTransactions`). An MSHR entry
//! is keyed by its line while in the MSHR; once the write buffer removes it
//! (Go keeps the pointer in `trans.mshrEntry`), it moves into the fetching
//! transaction and then into the MSHR stage's buffer. The write buffer's
//! eviction lists keep the evicted line and the write's id, which is all Go
//! reads from those transactions.

use std::collections::{HashSet, VecDeque};

use super::cachedir::{Directory, Mshr, MshrEntry};
use super::core::{Body, Buffer, CompId, Core, Msg, PortId};
use super::pipeline::Pipeline;
use super::Component;

type TransId = usize;

/// Builder parameters (Akita `writeback.Builder`).
#[derive(Clone, Debug)]
pub struct WriteBackParams {
    pub log2_block_size: u32,
    pub ways: usize,
    pub byte_size: u64,
    pub mshr_entries: usize,
    pub num_req_per_cycle: usize,
    /// Directory pipeline stages; MGPUSim does not set it, so Go's zero value.
    pub dir_latency_cycles: usize,
    pub bank_latency_cycles: usize,
    pub write_buffer_capacity: usize,
    pub max_inflight_fetch: usize,
    pub max_inflight_eviction: usize,
    /// Akita `InterleavingConverter` of the directory: (unit bytes, units).
    pub interleave: Option<(u64, u64)>,
}

impl WriteBackParams {
    /// MGPUSim r9nano `buildL2Caches`: 2 MiB over 16 banks, 16 ways, 64 B
    /// lines, 64 MSHR entries, 16 requests per cycle, interleaved by 2 lines
    /// (128 B) over 16 banks; the rest are builder defaults (bank latency 10,
    /// write buffer 1024, 128 inflight fetches and evictions, directory
    /// latency 0).
    pub fn r9nano_bank() -> Self {
        Self {
            log2_block_size: 6,
            ways: 16,
            byte_size: 2 * 1024 * 1024 / 16,
            mshr_entries: 64,
            num_req_per_cycle: 16,
            dir_latency_cycles: 0,
            bank_latency_cycles: 10,
            write_buffer_capacity: 1024,
            max_inflight_fetch: 128,
            max_inflight_eviction: 128,
            interleave: Some((128, 16)),
        }
    }
}

/// Go `action` (transaction.go).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    BankReadHit,
    BankWriteHit,
    BankEvictAndWrite,
    BankEvictAndFetch,
    BankWriteFetched,
    WriteBufferFetch,
    WriteBufferEvictAndFetch,
    WriteBufferEvictAndWrite,
}

/// Go `transaction`, the fields this port reads.
#[derive(Clone, Debug)]
struct Trans {
    action: Action,
    /// The read or write from the top port.
    req: Msg,
    block: usize,
    /// `victim.Tag` / `evictingAddr`: the line being evicted.
    evicting_addr: u64,
    fetch_addr: u64,
    /// Id of `fetchReadReq`.
    fetch_read_id: u64,
    /// `mshrEntry` once it left the MSHR (see the module comment).
    mshr_entry: Option<MshrEntry<TransId>>,
}

impl Trans {
    fn is_read(&self) -> bool {
        matches!(self.req.body, Body::Read { .. })
    }
    fn addr(&self) -> u64 {
        match self.req.body {
            Body::Read { addr, .. } | Body::Write { addr, .. } => addr,
            _ => unreachable!("a transaction holds a read or a write"),
        }
    }
    fn tag(&self) -> u64 {
        match self.req.body {
            Body::Read { tag, .. } | Body::Write { tag, .. } => tag,
            _ => unreachable!("a transaction holds a read or a write"),
        }
    }
    /// `isWritingFullLine`.
    fn full_line(&self) -> bool {
        matches!(self.req.body, Body::Write { full_line: true, .. })
    }
}

/// An entry of the write buffer's `pendingEvictions` / `inflightEviction`.
#[derive(Clone, Copy, Debug)]
struct Eviction {
    addr: u64,
    tag: u64,
    /// Id of `evictionWriteReq` once sent.
    write_id: u64,
}

/// One bank of the write-back L2 (Akita `writeback.Comp`).
pub struct WriteBack {
    pub id: CompId,
    pub top: PortId,
    pub bottom: PortId,
    /// The lower module's port (Akita `SinglePortMapper`).
    low: PortId,
    bank_index: usize,
    log2_block: u32,
    n: usize,

    dir: Directory,
    mshr: Mshr<TransId>,
    trans: Vec<Option<Trans>>,
    free: Vec<TransId>,
    /// Akita `evictingList`.
    evicting: HashSet<u64>,

    dir_stage_buffer: Buffer<TransId>,
    dir_to_bank: Buffer<TransId>,
    wb_to_bank: Buffer<TransId>,
    mshr_stage_buffer: Buffer<MshrEntry<TransId>>,
    write_buffer_buffer: Buffer<TransId>,

    // directoryStage
    dir_pipeline: Pipeline<TransId>,
    dir_buf: Buffer<TransId>,

    // bankStage
    bank_pipeline: Pipeline<TransId>,
    bank_post: Buffer<TransId>,
    bank_width: usize,
    /// `downwardInflightTransCount`; read and write hits decrement it
    /// without having incremented it, so it goes negative as in Go.
    pub downward_inflight: i64,

    // mshrStage
    processing: Option<MshrEntry<TransId>>,

    // writeBufferStage
    write_buffer_capacity: usize,
    max_inflight_fetch: usize,
    max_inflight_eviction: usize,
    pending_evictions: VecDeque<Eviction>,
    inflight_fetch: Vec<TransId>,
    inflight_eviction: Vec<Eviction>,

    pub read_hits: u64,
    pub read_misses: u64,
    pub read_mshr_hits: u64,
    pub write_hits: u64,
    pub write_misses: u64,
    pub write_mshr_hits: u64,
    /// Dirty victims evicted by the directory.
    pub evictions: u64,
}

impl WriteBack {
    /// `Builder.Build`: top and bottom ports of `numReqPerCycle*2` each, one
    /// bank stage whose pipeline is `numReqPerCycle` wide (2 if that is 1)
    /// with a post buffer of that width, every internal buffer
    /// `numReqPerCycle`. `low` may be set later with [`WriteBack::set_low`].
    pub fn new(
        core: &mut Core,
        id: CompId,
        top_conn: CompId,
        bottom_conn: CompId,
        low: PortId,
        bank_index: usize,
        p: &WriteBackParams,
    ) -> Self {
        let n = p.num_req_per_cycle;
        let top = core.add_port(id, top_conn, 2 * n, 2 * n);
        let bottom = core.add_port(id, bottom_conn, 2 * n, 2 * n);
        let block = 1u64 << p.log2_block_size;
        let sets = (p.byte_size / (p.ways as u64 * block)) as usize;
        let mut dir = Directory::new(sets, p.ways, block);
        dir.interleave = p.interleave;
        let bank_width = if n == 1 { 2 } else { n };
        Self {
            id,
            top,
            bottom,
            low,
            bank_index,
            log2_block: p.log2_block_size,
            n,
            dir,
            mshr: Mshr::new(p.mshr_entries),
            trans: Vec::new(),
            free: Vec::new(),
            evicting: HashSet::new(),
            dir_stage_buffer: Buffer::new(n),
            dir_to_bank: Buffer::new(n),
            wb_to_bank: Buffer::new(n),
            mshr_stage_buffer: Buffer::new(n),
            write_buffer_buffer: Buffer::new(n),
            dir_pipeline: Pipeline::new(n, p.dir_latency_cycles),
            dir_buf: Buffer::new(n),
            bank_pipeline: Pipeline::new(bank_width, p.bank_latency_cycles),
            bank_post: Buffer::new(bank_width),
            bank_width,
            downward_inflight: 0,
            processing: None,
            write_buffer_capacity: p.write_buffer_capacity,
            max_inflight_fetch: p.max_inflight_fetch,
            max_inflight_eviction: p.max_inflight_eviction,
            pending_evictions: VecDeque::new(),
            inflight_fetch: Vec::new(),
            inflight_eviction: Vec::new(),
            read_hits: 0,
            read_misses: 0,
            read_mshr_hits: 0,
            write_hits: 0,
            write_misses: 0,
            write_mshr_hits: 0,
            evictions: 0,
        }
    }

    /// The lower module's port, when it did not exist at `new`.
    pub fn set_low(&mut self, low: PortId) {
        self.low = low;
    }

    /// Transactions not yet answered (for checks).
    pub fn in_flight(&self) -> usize {
        self.trans.len() - self.free.len()
    }

    /// `getCacheLineID`.
    fn line(&self, addr: u64) -> u64 {
        addr & !((1u64 << self.log2_block) - 1)
    }

    fn t(&self, id: TransId) -> &Trans {
        self.trans[id].as_ref().expect("a live transaction")
    }

    fn tm(&mut self, id: TransId) -> &mut Trans {
        self.trans[id].as_mut().expect("a live transaction")
    }

    fn new_trans(&mut self, req: Msg) -> TransId {
        let t = Trans { action: Action::BankReadHit, req, block: 0, evicting_addr: 0, fetch_addr: 0, fetch_read_id: 0, mshr_entry: None };
        match self.free.pop() {
            Some(i) => {
                self.trans[i] = Some(t);
                i
            }
            None => {
                self.trans.push(Some(t));
                self.trans.len() - 1
            }
        }
    }

    /// `removeTransaction` (bank and MSHR stages).
    fn remove_trans(&mut self, id: TransId) -> Trans {
        let t = self.trans[id].take().expect("transaction not found");
        self.free.push(id);
        t
    }

    // ---- topParser ----

    /// `topParser.Tick`: one request from the top port into the directory
    /// stage's buffer.
    fn top_parser_tick(&mut self, core: &mut Core) -> bool {
        let Some(&req) = core.peek_incoming(self.top) else { return false };
        if !self.dir_stage_buffer.can_push() {
            return false;
        }
        if let (Some((unit, units)), Body::Read { addr, .. } | Body::Write { addr, .. }) = (self.dir.interleave, req.body) {
            // Akita's InterleavingConverter panics on another bank's address.
            debug_assert_eq!((addr / unit % units) as usize, self.bank_index, "address 0x{addr:x} is another bank's");
        }
        let t = self.new_trans(req);
        self.dir_stage_buffer.push(t);
        core.retrieve_incoming(self.top);
        true
    }

    // ---- directoryStage ----

    /// `directoryStage.Tick`.
    fn dir_tick(&mut self) -> bool {
        let mut progress = self.dir_accept();
        progress |= self.dir_pipeline.tick(&mut self.dir_buf);
        progress |= self.dir_process();
        progress
    }

    /// `acceptNewTransaction`.
    fn dir_accept(&mut self) -> bool {
        let mut progress = false;
        for _ in 0..self.n {
            if !self.dir_pipeline.can_accept(&self.dir_buf) {
                break;
            }
            let Some(t) = self.dir_stage_buffer.pop() else { break };
            self.dir_pipeline.accept(t, &mut self.dir_buf);
            progress = true;
        }
        progress
    }

    /// `processTransaction`: up to `numReqPerCycle` tries on the head (a
    /// blocked head is tried again, as in Go); a head whose line is being
    /// evicted stops the stage.
    fn dir_process(&mut self) -> bool {
        let mut progress = false;
        for _ in 0..self.n {
            let Some(&t) = self.dir_buf.peek() else { break };
            let line = self.line(self.t(t).addr());
            if self.evicting.contains(&line) {
                break;
            }
            if self.t(t).is_read() {
                progress |= self.do_read(t, line);
                continue;
            }
            progress |= self.do_write(t, line);
        }
        progress
    }

    /// `doRead`.
    fn do_read(&mut self, t: TransId, line: u64) -> bool {
        if let Some(i) = self.mshr.query(line) {
            // handleReadMSHRHit
            self.mshr.entries[i].requests.push(t);
            self.dir_buf.pop();
            self.read_mshr_hits += 1;
            return true;
        }
        if let Some(b) = self.dir.lookup(line) {
            // handleReadHit
            if self.dir.blocks[b].locked {
                return false;
            }
            let ok = self.read_from_bank(t, b);
            self.read_hits += ok as u64;
            return ok;
        }
        let ok = self.handle_miss(t, line);
        self.read_misses += ok as u64;
        ok
    }

    /// `handleReadMiss` and `writePartialLineMiss` (the same steps).
    fn handle_miss(&mut self, t: TransId, line: u64) -> bool {
        if self.mshr.is_full() {
            return false;
        }
        let v = self.dir.find_victim(line);
        if self.dir.blocks[v].locked || self.dir.blocks[v].read_count > 0 {
            return false;
        }
        if self.need_eviction(v) {
            return self.evict(t, v, line);
        }
        self.fetch(t, v, line)
    }

    /// `doWrite`.
    fn do_write(&mut self, t: TransId, line: u64) -> bool {
        if let Some(i) = self.mshr.query(line) {
            // doWriteMSHRHit
            self.mshr.entries[i].requests.push(t);
            self.dir_buf.pop();
            self.write_mshr_hits += 1;
            return true;
        }
        if let Some(b) = self.dir.lookup(line) {
            // doWriteHit
            if self.dir.blocks[b].locked || self.dir.blocks[b].read_count > 0 {
                return false;
            }
            let ok = self.write_to_bank(t, b, line);
            self.write_hits += ok as u64;
            return ok;
        }
        // doWriteMiss
        let ok = if self.t(t).full_line() {
            // writeFullLineMiss
            let v = self.dir.find_victim(line);
            if self.dir.blocks[v].locked || self.dir.blocks[v].read_count > 0 {
                false
            } else if self.need_eviction(v) {
                self.evict(t, v, line)
            } else {
                self.write_to_bank(t, v, line)
            }
        } else {
            self.handle_miss(t, line)
        };
        self.write_misses += ok as u64;
        ok
    }

    /// `needEviction`.
    fn need_eviction(&self, b: usize) -> bool {
        self.dir.blocks[b].valid && self.dir.blocks[b].dirty
    }

    /// `readFromBank`.
    fn read_from_bank(&mut self, t: TransId, b: usize) -> bool {
        if !self.dir_to_bank.can_push() {
            return false;
        }
        self.dir.visit(b);
        self.dir.blocks[b].read_count += 1;
        let tr = self.tm(t);
        tr.block = b;
        tr.action = Action::BankReadHit;
        self.dir_buf.pop();
        self.dir_to_bank.push(t);
        true
    }

    /// `writeToBank`.
    fn write_to_bank(&mut self, t: TransId, b: usize, line: u64) -> bool {
        if !self.dir_to_bank.can_push() {
            return false;
        }
        self.dir.visit(b);
        let blk = &mut self.dir.blocks[b];
        blk.locked = true;
        blk.tag = line;
        blk.valid = true;
        let tr = self.tm(t);
        tr.block = b;
        tr.action = Action::BankWriteHit;
        self.dir_buf.pop();
        self.dir_to_bank.push(t);
        true
    }

    /// `evict` with `updateTransForEviction` and `updateVictimBlockMetaData`:
    /// a read or partial write also takes an MSHR entry for its line.
    fn evict(&mut self, t: TransId, v: usize, line: u64) -> bool {
        if !self.dir_to_bank.can_push() {
            return false;
        }
        let old_tag = self.dir.blocks[v].tag;
        let need_fetch = self.t(t).is_read() || !self.t(t).full_line();
        {
            let tr = self.tm(t);
            tr.evicting_addr = old_tag;
            tr.block = v;
            if need_fetch {
                tr.fetch_addr = line;
                tr.action = Action::BankEvictAndFetch;
            } else {
                tr.action = Action::BankEvictAndWrite;
            }
        }
        if need_fetch {
            let i = self.mshr.add(line, v);
            self.mshr.entries[i].requests.push(t);
        }
        let blk = &mut self.dir.blocks[v];
        blk.tag = line;
        blk.locked = true;
        blk.dirty = false;
        self.dir.visit(v);
        self.dir_buf.pop();
        self.dir_to_bank.push(t);
        self.evicting.insert(old_tag);
        self.evictions += 1;
        true
    }

    /// `fetch`: an MSHR entry for the line and the victim block locked for it.
    fn fetch(&mut self, t: TransId, b: usize, line: u64) -> bool {
        if !self.dir_to_bank.can_push() {
            return false;
        }
        let i = self.mshr.add(line, b);
        let blk = &mut self.dir.blocks[b];
        blk.locked = true;
        blk.tag = line;
        blk.valid = true;
        self.dir.visit(b);
        self.dir_buf.pop();
        let tr = self.tm(t);
        tr.block = b;
        tr.action = Action::WriteBufferFetch;
        tr.fetch_addr = line;
        self.dir_to_bank.push(t);
        self.mshr.entries[i].requests.push(t);
        true
    }

    // ---- bankStage ----

    /// `bankStage.Tick`: `numReqPerCycle` finalizes, the pipeline, then
    /// `numReqPerCycle` pulls.
    fn bank_tick(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..self.n {
            progress |= self.finalize(core);
        }
        progress |= self.bank_pipeline.tick(&mut self.bank_post);
        for _ in 0..self.n {
            progress |= self.pull_from_buf();
        }
        progress
    }

    /// `pullFromBuf`: the write buffer's transactions first; the directory's
    /// only while the write buffer's input has room and one lane stays free
    /// for upward traffic. Fetches skip the pipeline.
    fn pull_from_buf(&mut self) -> bool {
        if !self.bank_pipeline.can_accept(&self.bank_post) {
            return false;
        }
        if let Some(t) = self.wb_to_bank.pop() {
            self.bank_pipeline.accept(t, &mut self.bank_post);
            return true;
        }
        if !self.write_buffer_buffer.can_push() {
            return false;
        }
        if self.downward_inflight >= self.bank_width as i64 - 1 {
            return false;
        }
        let Some(t) = self.dir_to_bank.pop() else { return false };
        let action = self.t(t).action;
        if action == Action::WriteBufferFetch {
            self.write_buffer_buffer.push(t);
            return true;
        }
        self.bank_pipeline.accept(t, &mut self.bank_post);
        if matches!(action, Action::BankEvictAndFetch | Action::BankEvictAndWrite) {
            self.downward_inflight += 1;
        }
        true
    }

    /// `finalizeTrans`: the first entry of the post-pipeline buffer that can
    /// finish, finishes.
    fn finalize(&mut self, core: &mut Core) -> bool {
        for i in 0..self.bank_post.len() {
            let t = *self.bank_post.get(i).expect("in range");
            let done = match self.t(t).action {
                Action::BankReadHit => self.finalize_read_hit(core, t),
                Action::BankWriteHit => self.finalize_write_hit(core, t),
                Action::BankWriteFetched => self.finalize_write_fetched(t),
                Action::BankEvictAndFetch | Action::BankEvictAndWrite => self.finalize_eviction(t),
                a => panic!("bank action not supported: {a:?}"),
            };
            if done {
                self.bank_post.remove(i);
                return true;
            }
        }
        false
    }

    /// `finalizeReadHit`.
    fn finalize_read_hit(&mut self, core: &mut Core, t: TransId) -> bool {
        if !core.can_send(self.top) {
            return false;
        }
        let tr = self.remove_trans(t);
        self.downward_inflight -= 1;
        self.dir.blocks[tr.block].read_count -= 1;
        let rsp = core.msg(self.top, tr.req.src, Body::DataReady { rsp_to: tr.req.id });
        core.send(self.top, rsp);
        true
    }

    /// `finalizeWriteHit`.
    fn finalize_write_hit(&mut self, core: &mut Core, t: TransId) -> bool {
        if !core.can_send(self.top) {
            return false;
        }
        let tr = self.remove_trans(t);
        let blk = &mut self.dir.blocks[tr.block];
        blk.valid = true;
        blk.locked = false;
        blk.dirty = true;
        self.downward_inflight -= 1;
        let rsp = core.msg(self.top, tr.req.src, Body::WriteDone { rsp_to: tr.req.id });
        core.send(self.top, rsp);
        true
    }

    /// `finalizeBankWriteFetched`: the MSHR entry goes to the MSHR stage.
    fn finalize_write_fetched(&mut self, t: TransId) -> bool {
        if !self.mshr_stage_buffer.can_push() {
            return false;
        }
        let entry = self.tm(t).mshr_entry.take().expect("a fetched transaction holds its MSHR entry");
        let blk = &mut self.dir.blocks[entry.block];
        blk.locked = false;
        blk.valid = true;
        self.mshr_stage_buffer.push(entry);
        true
    }

    /// `finalizeBankEviction`: the victim's data is read; on to the write buffer.
    fn finalize_eviction(&mut self, t: TransId) -> bool {
        if !self.write_buffer_buffer.can_push() {
            return false;
        }
        let tr = self.tm(t);
        tr.action = match tr.action {
            Action::BankEvictAndFetch => Action::WriteBufferEvictAndFetch,
            Action::BankEvictAndWrite => Action::WriteBufferEvictAndWrite,
            a => panic!("unsupported action {a:?}"),
        };
        let addr = tr.evicting_addr;
        self.evicting.remove(&addr);
        self.write_buffer_buffer.push(t);
        self.downward_inflight -= 1;
        true
    }

    // ---- mshrStage ----

    /// `mshrStage.Tick`: one request of the current MSHR entry answered per call.
    fn mshr_stage_tick(&mut self, core: &mut Core) -> bool {
        if self.processing.is_none() {
            let Some(e) = self.mshr_stage_buffer.pop() else { return false };
            self.processing = Some(e);
        }
        self.process_one_req(core)
    }

    /// `processOneReq` (every transaction is present: nothing is discarded).
    fn process_one_req(&mut self, core: &mut Core) -> bool {
        if !core.can_send(self.top) {
            return false;
        }
        let e = self.processing.as_mut().expect("an entry");
        let t = e.requests.remove(0);
        if e.requests.is_empty() {
            self.processing = None;
        }
        let tr = self.remove_trans(t);
        let body = if tr.is_read() { Body::DataReady { rsp_to: tr.req.id } } else { Body::WriteDone { rsp_to: tr.req.id } };
        let rsp = core.msg(self.top, tr.req.src, body);
        core.send(self.top, rsp);
        true
    }

    // ---- writeBufferStage ----

    /// `writeBufferStage.Tick`: write, processReturnRsp, processNewTransaction.
    fn write_buffer_tick(&mut self, core: &mut Core) -> bool {
        let mut progress = self.wb_write(core);
        progress |= self.process_return_rsp(core);
        progress |= self.process_new_transaction(core);
        progress
    }

    /// `processNewTransaction`.
    fn process_new_transaction(&mut self, core: &mut Core) -> bool {
        let Some(&t) = self.write_buffer_buffer.peek() else { return false };
        match self.t(t).action {
            Action::WriteBufferFetch => {
                // processWriteBufferFetch
                let fetch = self.t(t).fetch_addr;
                let local =
                    self.inflight_eviction.iter().any(|e| e.addr == fetch) || self.pending_evictions.iter().any(|e| e.addr == fetch);
                if local {
                    self.send_fetched_data_to_bank(t)
                } else {
                    self.fetch_from_bottom(core, t)
                }
            }
            Action::WriteBufferEvictAndWrite => {
                if self.write_buffer_full() || !self.wb_to_bank.can_push() {
                    return false;
                }
                let tr = self.tm(t);
                tr.action = Action::BankWriteHit;
                let ev = Eviction { addr: tr.evicting_addr, tag: tr.tag(), write_id: 0 };
                self.wb_to_bank.push(t);
                self.pending_evictions.push_back(ev);
                self.write_buffer_buffer.pop();
                true
            }
            Action::WriteBufferEvictAndFetch => {
                // processWriteBufferFetchAndEvict: queue the eviction, leave
                // the transaction at the head as a fetch.
                if self.write_buffer_full() {
                    return false;
                }
                let tr = self.tm(t);
                tr.action = Action::WriteBufferFetch;
                let ev = Eviction { addr: tr.evicting_addr, tag: tr.tag(), write_id: 0 };
                self.pending_evictions.push_back(ev);
                true
            }
            a => panic!("unknown transaction action {a:?}"),
        }
    }

    /// `combineData` (only the dirty flag: written lines become dirty) and
    /// the MSHR removal that follows it; the entry moves into the transaction.
    fn take_mshr_entry(&mut self, t: TransId) {
        let fetch = self.t(t).fetch_addr;
        let entry = self.mshr.remove(fetch);
        if entry.requests.iter().any(|&r| !self.t(r).is_read()) {
            self.dir.blocks[entry.block].dirty = true;
        }
        let tr = self.tm(t);
        tr.action = Action::BankWriteFetched;
        tr.mshr_entry = Some(entry);
    }

    /// `sendFetchedDataToBank`: the line is in the write buffer.
    fn send_fetched_data_to_bank(&mut self, t: TransId) -> bool {
        if !self.wb_to_bank.can_push() {
            return false;
        }
        self.take_mshr_entry(t);
        self.wb_to_bank.push(t);
        self.write_buffer_buffer.pop();
        true
    }

    /// `fetchFromBottom`.
    fn fetch_from_bottom(&mut self, core: &mut Core, t: TransId) -> bool {
        if self.inflight_fetch.len() >= self.max_inflight_fetch || !core.can_send(self.bottom) {
            return false;
        }
        let (addr, tag) = (self.t(t).fetch_addr, self.t(t).tag());
        let bytes = 1u32 << self.log2_block;
        let read = core.msg(self.bottom, self.low, Body::Read { addr, bytes, can_wait: false, tag });
        core.send(self.bottom, read);
        self.tm(t).fetch_read_id = read.id;
        self.inflight_fetch.push(t);
        self.write_buffer_buffer.pop();
        true
    }

    /// `write`: the oldest pending eviction goes below. The dirty mask is not
    /// tracked, so the write says `full_line` (the DRAM does not look).
    fn wb_write(&mut self, core: &mut Core) -> bool {
        let Some(&ev) = self.pending_evictions.front() else { return false };
        if self.inflight_eviction.len() >= self.max_inflight_eviction || !core.can_send(self.bottom) {
            return false;
        }
        let body = Body::Write { addr: ev.addr, can_wait: false, full_line: true, tag: ev.tag };
        let w = core.msg(self.bottom, self.low, body);
        core.send(self.bottom, w);
        self.pending_evictions.pop_front();
        self.inflight_eviction.push(Eviction { write_id: w.id, ..ev });
        true
    }

    /// `processReturnRsp`.
    fn process_return_rsp(&mut self, core: &mut Core) -> bool {
        let Some(&msg) = core.peek_incoming(self.bottom) else { return false };
        match msg.body {
            Body::DataReady { rsp_to } => {
                // processDataReadyRsp
                let k = self.inflight_fetch.iter().position(|&t| self.t(t).fetch_read_id == rsp_to).expect("inflight read not found");
                if !self.wb_to_bank.can_push() {
                    return false;
                }
                let t = self.inflight_fetch[k];
                self.take_mshr_entry(t);
                self.wb_to_bank.push(t);
                self.inflight_fetch.remove(k);
                core.retrieve_incoming(self.bottom);
                true
            }
            Body::WriteDone { rsp_to } => {
                // processWriteDoneRsp: searched from the newest.
                let k = self.inflight_eviction.iter().rposition(|e| e.write_id == rsp_to).expect("write request not found");
                self.inflight_eviction.remove(k);
                core.retrieve_incoming(self.bottom);
                true
            }
            other => panic!("unknown msg type {other:?}"),
        }
    }

    /// `writeBufferFull`.
    fn write_buffer_full(&self) -> bool {
        self.pending_evictions.len() + self.inflight_eviction.len() >= self.write_buffer_capacity
    }
}

impl Component for WriteBack {
    /// `middleware.Tick` / `runPipeline`: the MSHR stage, the bank stage
    /// once, then the write buffer, the directory and the top parser, each
    /// stage other than the bank `numReqPerCycle` times.
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..self.n {
            progress |= self.mshr_stage_tick(core);
        }
        progress |= self.bank_tick(core);
        for _ in 0..self.n {
            progress |= self.write_buffer_tick(core);
        }
        for _ in 0..self.n {
            progress |= self.dir_tick();
        }
        for _ in 0..self.n {
            progress |= self.top_parser_tick(core);
        }
        progress
    }
}

#[cfg(test)]
mod tests {
    //! Every case runs bank 0 of MGPUSim's R9 Nano L2 (`r9nano_bank`) over
    //! an ideal memory controller (`IdealMemParams::r9nano`: latency 100,
    //! width 1), a source on the top connection sending at given cycles and
    //! retrieving answers in its ticks. Cycles are the source's retrieval
    //! (the cache's send is one cycle earlier). All cases were run in Go
    //! (Akita v4.9.0's writeback.Comp and idealmemcontroller.Comp, same
    //! parameters and port order, AKITA_TIE=fifo) by scripts/akita-crosscheck/writeback/main.go,
    //! which printed the same cycles.
    //!
    //! Common path (derived from the Go stages): a request sent in cycle s is
    //! delivered in s; the cache ticks in s+1 (top parser → dirStageBuffer);
    //! s+2 the directory (latency 0) decides and pushes to dirToBankBuffer;
    //! s+3 the bank stage (ticked before the directory) pulls it into the
    //! 10-stage pipeline; it is in the post buffer at the tick of s+13 and
    //! finalized at s+14 (finalize runs before the pipeline's tick); a hit's
    //! answer is sent in s+14 and retrieved in s+15.
    use std::collections::HashMap;

    use super::super::core::{Cycle, Due};
    use super::super::idealmem::{IdealMem, IdealMemParams};
    use super::*;

    struct Run {
        /// (cycle retrieved, index of the request in the script).
        got: Vec<(Cycle, usize)>,
        /// (cycle, body) of each request the DRAM took from its port.
        dram: Vec<(Cycle, Body)>,
        wb: WriteBack,
    }

    fn read(addr: u64) -> Body {
        Body::Read { addr, bytes: 64, can_wait: false, tag: 0 }
    }
    fn write(addr: u64, full_line: bool) -> Body {
        Body::Write { addr, can_wait: false, full_line, tag: 0 }
    }

    fn run(script: &[(Cycle, Body)]) -> Run {
        run_with(&WriteBackParams::r9nano_bank(), &IdealMemParams::r9nano(), script)
    }

    /// `run` with other cache and DRAM parameters.
    fn run_with(p: &WriteBackParams, mp: &IdealMemParams, script: &[(Cycle, Body)]) -> Run {
        let mut core = Core::new();
        let src = core.add_component();
        let top_conn = core.add_connection();
        let src_port = core.add_port(src, top_conn, 1024, 1024);
        let bottom_conn = core.add_connection();
        let cid = core.add_component();
        let mut wb = WriteBack::new(&mut core, cid, top_conn, bottom_conn, PortId::MAX, 0, p);
        let mid = core.add_component();
        let mut mem = IdealMem::new(&mut core, mid, bottom_conn, mp);
        wb.set_low(mem.top);
        for (i, &(t, _)) in script.iter().enumerate() {
            core.schedule_custom(src, t, i as u64);
        }
        let (mut ids, mut got, mut dram) = (HashMap::new(), Vec::new(), Vec::new());
        while let Some(d) = core.next() {
            assert!(core.now < 100_000, "runaway");
            match d {
                Due::Custom(c, i) if c == src => {
                    let m = core.msg(src_port, wb.top, script[i as usize].1);
                    ids.insert(m.id, i as usize);
                    assert!(core.send(src_port, m));
                }
                Due::Custom(c, t) => {
                    assert_eq!(c, mid);
                    mem.on_event(&mut core, t);
                }
                Due::Tick(c) if c == src => {
                    let mut progress = false;
                    while let Some(m) = core.retrieve_incoming(src_port) {
                        let (Body::DataReady { rsp_to } | Body::WriteDone { rsp_to }) = m.body else { panic!() };
                        got.push((core.now, ids[&rsp_to]));
                        progress = true;
                    }
                    core.ticked(src, progress);
                }
                Due::Tick(c) if c == cid => {
                    let p = wb.tick(&mut core);
                    core.ticked(c, p);
                }
                Due::Tick(c) => {
                    assert_eq!(c, mid);
                    // The first `width` are what this tick takes.
                    for m in core.ports[mem.top as usize].incoming.iter().take(mp.width) {
                        dram.push((core.now, m.body));
                    }
                    let p = mem.tick(&mut core);
                    core.ticked(c, p);
                }
            }
        }
        assert_eq!(wb.in_flight(), 0, "every request answered");
        assert_eq!(mem.pending(), 0);
        Run { got, dram, wb }
    }

    /// Read miss sent at 10: the directory (12) takes an MSHR entry and a
    /// victim, the bank stage (13) passes the fetch to the write buffer,
    /// which runs after it in the same tick and sends the read below; the
    /// DRAM takes it in 14 and answers at 114; the write buffer (115) hands
    /// the line to the bank (116 into the pipeline, post buffer 126,
    /// finalized 127 into the MSHR stage's buffer); the MSHR stage, first in
    /// the tick, answers in 128; retrieved 129. The read of the same line at
    /// 300 hits: 300 + 15 = 315. Go: 14, 129, 315.
    #[test]
    fn a_read_miss_fetches_and_a_second_read_hits_after_the_bank_latency() {
        let r = run(&[(10, read(0x0)), (300, Body::Read { addr: 0x20, bytes: 4, can_wait: false, tag: 0 })]);
        assert_eq!(r.dram, vec![(14, read(0x0))]);
        assert_eq!(r.got, vec![(129, 0), (315, 1)]);
        assert_eq!((r.wb.read_misses, r.wb.read_hits, r.wb.read_mshr_hits), (1, 1, 0));
        assert_eq!(r.wb.downward_inflight, -1, "a read hit decrements it without incrementing (Go quirk)");
    }

    /// Reads of the same line at 12 and 13 reach the directory at 14 and 15,
    /// find the miss's MSHR entry and join it; the MSHR stage answers the
    /// three requests in its 16 calls of cycle 128: all retrieved at 129, one
    /// fetch only. Go: 129, 129, 129.
    #[test]
    fn reads_of_a_line_being_fetched_join_its_mshr_entry() {
        let b = |addr| Body::Read { addr, bytes: 4, can_wait: false, tag: 0 };
        let r = run(&[(10, read(0x0)), (12, b(0x20)), (13, b(0x30))]);
        assert_eq!(r.dram.len(), 1);
        assert_eq!(r.got, vec![(129, 0), (129, 1), (129, 2)]);
        assert_eq!((r.wb.read_misses, r.wb.read_mshr_hits), (1, 2));
    }

    /// A partial-line write miss fetches the line like a read miss (DRAM read
    /// at 14, WriteDone from the MSHR stage, retrieved 129) and leaves it
    /// dirty and valid: a read at 300 hits (315). A full-line write miss needs
    /// no fetch: it goes straight to the bank as a write hit (retrieved at
    /// 10 + 15 = 25), and a read at 300 hits. Go: 14/129/315 and 25/315.
    #[test]
    fn a_partial_write_miss_fetches_and_a_full_line_write_miss_does_not() {
        let r = run(&[(10, write(0x40, false)), (300, read(0x40))]);
        assert_eq!(r.dram, vec![(14, read(0x40))]);
        assert_eq!(r.got, vec![(129, 0), (315, 1)]);
        assert_eq!((r.wb.write_misses, r.wb.read_hits), (1, 1));
        assert!(r.wb.dir.blocks[r.wb.dir.lookup(0x40).unwrap()].dirty);

        let r = run(&[(10, write(0x800, true)), (300, read(0x800))]);
        assert!(r.dram.is_empty());
        assert_eq!(r.got, vec![(25, 0), (315, 1)]);
        assert_eq!((r.wb.write_misses, r.wb.read_hits), (1, 1));
    }

    /// Sixteen full-line writes at 10..25 to lines k·128 KiB, all in set 0 of
    /// bank 0 (local line (a / 2048)·2 = 128·k, set 0), fill its 16 ways with
    /// dirty lines, one WriteDone per cycle 25..40. A read of a 17th such line
    /// at 500 finds the least recent (w0's, line 0) dirty: the directory
    /// (502) evicts it (an eviction-and-fetch), the bank pipeline reads it
    /// (503 → post buffer 513, finalized 514 into the write buffer's input);
    /// in 514 the write buffer's first call queues the eviction and turns
    /// the transaction into a fetch, its second call sends the write and
    /// then the read. The DRAM (width 1) takes the write at 515 and the read
    /// at 516, answers the read at 616; then as a miss: 617 → bank 618 →
    /// 628 → 629 → MSHR stage 630 → retrieved 631. Go: the same.
    #[test]
    fn a_dirty_victim_is_written_back_before_the_fetch() {
        let mut script: Vec<(Cycle, Body)> = (0..16).map(|k| (10 + k, write(k * 131_072, true))).collect();
        script.push((500, read(16 * 131_072)));
        let r = run(&script);
        let writes: Vec<(Cycle, usize)> = (0..16).map(|k| (25 + k as Cycle, k)).collect();
        assert_eq!(r.got[..16], writes[..]);
        assert_eq!(r.got[16], (631, 16));
        let full = Body::Write { addr: 0, can_wait: false, full_line: true, tag: 0 };
        assert_eq!(r.dram, vec![(515, full), (516, read(16 * 131_072))]);
        assert_eq!((r.wb.evictions, r.wb.read_misses, r.wb.write_misses), (1, 1, 16));
        assert!(r.wb.dir.lookup(0).is_none(), "w0's line left the cache");
    }

    /// A read miss and a full-line write miss to another line in the same
    /// cycle run side by side: the read's fetch is taken by the DRAM at 14
    /// and answered at 129, the write is answered at 25. Go: the same.
    #[test]
    fn a_read_miss_does_not_hold_back_a_write_miss_behind_it() {
        let r = run(&[(10, read(0x0)), (10, write(0x800, true))]);
        assert_eq!(r.dram, vec![(14, read(0x0))]);
        assert_eq!(r.got, vec![(25, 1), (129, 0)]);
    }

    /// The generator of scripts/akita-crosscheck/writeback/main.go's `randomScript`: reads
    /// (half), partial and full-line writes. Mode 0: over 40 lines of sets 0
    /// and 1 (20 per set, so evictions of dirty lines), 0 to 2 cycles apart.
    /// Mode 1: about 8 requests a cycle over 64 lines of those sets (top
    /// port back-pressure, the evicting list stalling the directory, fetches
    /// served from the write buffer). Mode 2: about 8 a cycle over 4096
    /// lines of bank 0, mostly misses (the MSHR fills, the DRAM's port backs
    /// up into the cache's bottom port).
    fn random_script(n: usize, seed: u64, mode: u32) -> Vec<(Cycle, Body)> {
        let mut x = seed;
        let mut next = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        let mut t: Cycle = 10;
        let mut script = Vec::with_capacity(n);
        for _ in 0..n {
            let addr = if mode == 2 {
                if next() % 8 == 0 {
                    t += 1;
                }
                let line = next() % 4096;
                (line / 2) * 2048 + (line % 2) * 64
            } else if mode == 1 {
                if next() % 8 == 0 {
                    t += 1;
                }
                let line = next() % 64;
                (line % 32) * 131_072 + (line / 32) * 64
            } else {
                t += next() % 3;
                let line = next() % 40;
                (line % 20) * 131_072 + (line / 20) * 64
            };
            let body = match next() % 4 {
                0 | 1 => Body::Read { addr: addr + (next() % 16) * 4, bytes: 4, can_wait: false, tag: 0 },
                2 => write(addr + (next() % 16) * 4, false),
                _ => write(addr, true),
            };
            script.push((t, body));
        }
        script
    }

    /// main.go's checksums: h = h·1000003 ^ v (wrapping) over the answers in
    /// retrieval order, v = cycle·100000 + request index, and over the DRAM's
    /// takes, v = cycle·4 + (1 for a write) + address·1000000.
    fn checksums(r: &Run) -> (u64, u64) {
        let mix = |h: u64, v: u64| h.wrapping_mul(1_000_003) ^ v;
        let rsp = r.got.iter().fold(0, |h, &(c, i)| mix(h, c * 100_000 + i as u64));
        let dram = r.dram.iter().fold(0, |h, &(c, b)| {
            let (w, addr) = match b {
                Body::Read { addr, .. } => (0, addr),
                Body::Write { addr, .. } => (1, addr),
                _ => unreachable!(),
            };
            mix(h, (c * 4 + w).wrapping_add(addr.wrapping_mul(1_000_000)))
        });
        (rsp, dram)
    }

    /// Eight pseudo-random runs of 400 requests, every answer's cycle and
    /// order and every DRAM take compared (through the checksums) with Go's
    /// run of the same script: (seed, mode, last answer, answer checksum,
    /// DRAM takes, DRAM checksum) as main.go printed them.
    #[test]
    fn random_workloads_match_go_cycle_for_cycle() {
        let expect: [(u64, u32, Cycle, u64, usize, u64); 8] = [
            (1, 0, 760, 401013806613044416, 102, 16147377325628623781),
            (2, 0, 658, 1563893093535348072, 103, 3688042812060842371),
            (3, 0, 748, 16343346204465770070, 103, 5294347836747226764),
            (4, 0, 743, 727625385459296414, 102, 6005334588301019480),
            (5, 1, 678, 13423233976762444004, 222, 16652993569580864078),
            (6, 1, 753, 5648349041876873058, 223, 10415485602353075605),
            (7, 2, 578, 8244435062764249672, 291, 8857576199591858464),
            (8, 2, 564, 6421778316168762706, 280, 6095478242383133952),
        ];
        for (seed, mode, last, h_rsp, n_dram, h_dram) in expect {
            let r = run(&random_script(400, seed, mode));
            assert_eq!(r.got.len(), 400);
            assert_eq!(r.got.last().unwrap().0, last, "seed {seed}");
            assert_eq!(r.dram.len(), n_dram, "seed {seed}");
            assert_eq!(checksums(&r), (h_rsp, h_dram), "seed {seed}");
            if mode < 2 {
                assert!(r.wb.evictions > 0 && r.wb.read_mshr_hits > 0, "seed {seed} exercises evictions and MSHR hits");
            }
        }
    }

    /// A partial write to a line being fetched joins its MSHR entry (a write
    /// MSHR hit, answered with the read at 129) and a later partial write
    /// hits (300 + 15).
    #[test]
    fn write_mshr_hits_and_write_hits_are_counted() {
        let r = run(&[(10, read(0x0)), (12, write(0x20, false)), (300, write(0x10, false))]);
        assert_eq!(r.got, vec![(129, 0), (129, 1), (315, 2)]);
        assert_eq!((r.wb.read_misses, r.wb.write_mshr_hits, r.wb.write_hits, r.wb.write_misses), (1, 1, 1, 0));
    }

    /// One request a cycle: the bank stage is still 2 wide, one lane kept
    /// for upward traffic, so a read miss and a later hit are answered as
    /// with 16 (129 and 315).
    #[test]
    fn one_request_a_cycle_keeps_a_two_lane_bank() {
        let p = WriteBackParams { num_req_per_cycle: 1, ..WriteBackParams::r9nano_bank() };
        let r = run_with(
            &p,
            &IdealMemParams::r9nano(),
            &[(10, read(0x0)), (300, Body::Read { addr: 0x20, bytes: 4, can_wait: false, tag: 0 })],
        );
        assert_eq!(r.got, vec![(129, 0), (315, 1)]);
    }

    /// With one way a set, lines k·2048 (k < 16) of bank 0 sit in sets 2k
    /// and lines 2 MiB higher in the same sets. Sixteen partial writes make
    /// the first lines dirty; sixteen reads of the others at 1000 each evict
    /// one (the directory at 1002). The bank stage keeps one of its 16
    /// lanes for upward traffic: it pulls 15 evictions at 1003 and the 16th
    /// only when the first 15 leave the pipeline at 1014, 11 cycles later.
    /// The write buffer handles 8 evictions a tick (two of its 16 calls
    /// each: queue the write-back, then fetch), so the first 15 send their
    /// write-back and fetch at 1014 and 1015 (taken by the 16-wide DRAM a
    /// cycle later) and are answered at 1130 and 1131; the 16th, finalized
    /// at 1025, is taken at 1026 and answered at 1141.
    #[test]
    fn the_bank_keeps_a_lane_free_for_upward_traffic() {
        let p = WriteBackParams { ways: 1, ..WriteBackParams::r9nano_bank() };
        let mem = IdealMemParams { width: 16, ..IdealMemParams::r9nano() };
        let mut script: Vec<(Cycle, Body)> = (0..16).map(|k| (10 + k, write(k * 2048, false))).collect();
        script.extend((0..16).map(|k| (1000, read(k * 2048 + (2 << 20)))));
        let r = run_with(&p, &mem, &script);
        let taken = |b: Body| r.dram.iter().find(|d| d.1 == b).unwrap().0;
        let full = |a| Body::Write { addr: a, can_wait: false, full_line: true, tag: 0 };
        let writes: Vec<Cycle> = (0..16).map(|k| taken(full(k * 2048))).collect();
        let reads: Vec<Cycle> = (0..16).map(|k| taken(read(k * 2048 + (2 << 20)))).collect();
        let want = [vec![1015; 8], vec![1016; 7], vec![1026]].concat();
        assert_eq!((&writes, &reads), (&want, &want));
        assert_eq!((r.got[16], r.got[31]), ((1130, 16), (1141, 31)));
        assert_eq!((r.wb.evictions, r.wb.downward_inflight), (16, 0));
    }

    /// Lines 0 and 2048 are made dirty by full-line writes (one way a set);
    /// full-line writes to the lines 2 MiB higher at 1000 evict them (into
    /// the write buffer at 1014). With a write buffer of one eviction, or
    /// one eviction in flight, the second eviction waits for the first's
    /// WriteDone: the DRAM (width 1) takes the first at 1015, answers it at
    /// 1115, the cache parses it at 1116 and sends the second, taken at 1117.
    #[test]
    fn evictions_wait_for_room_in_the_write_buffer() {
        let one_way = WriteBackParams { ways: 1, ..WriteBackParams::r9nano_bank() };
        let script = [(10, write(0, true)), (11, write(2048, true)), (1000, write(2 << 20, true)), (1000, write((2 << 20) + 2048, true))];
        let full = |a| Body::Write { addr: a, can_wait: false, full_line: true, tag: 0 };
        for p in [
            WriteBackParams { write_buffer_capacity: 1, ..one_way.clone() },
            WriteBackParams { max_inflight_eviction: 1, ..one_way.clone() },
        ] {
            let r = run_with(&p, &IdealMemParams::r9nano(), &script);
            assert_eq!(r.dram, vec![(1015, full(0)), (1117, full(2048))], "{p:?}");
        }
    }

    /// With one fetch in flight, a second read miss's fetch waits for the
    /// first's data: taken by the DRAM at 14, answered at 114, parsed at
    /// 115, when the second read goes below (taken at 116).
    #[test]
    fn fetches_wait_for_the_inflight_limit() {
        let p = WriteBackParams { max_inflight_fetch: 1, ..WriteBackParams::r9nano_bank() };
        let r = run_with(&p, &IdealMemParams::r9nano(), &[(10, read(0x0)), (10, read(0x800))]);
        assert_eq!(r.dram, vec![(14, read(0x0)), (116, read(0x800))]);
    }

    /// `finalizeTrans` finishes the first entry of the post-pipeline buffer
    /// that can finish, past a head that cannot. One request a cycle (every
    /// internal buffer holds 1, the bank pipeline is 2 wide, one finalize,
    /// one MSHR-stage call and one pull a tick). w (a full-line write of
    /// line 6144, set 6, at 5) is retrieved at 20 and leaves the line valid.
    /// Read misses a (line 0), b (2048) and c (4096) at 10, 11, 12 go
    /// below at 13, 14, 15 (taken 14, 15, 16, answered 114, 115, 116); three
    /// reads of line 0 at 13, 14, 15 join a's MSHR entry (directory at 15,
    /// 16, 17), so it holds 4 requests. The write buffer parses one answer a
    /// tick (115, 116, 117) into its 1-deep output, and the bank pulls a,
    /// b, c at 116, 117, 118 (post buffer 126, 127, 128, finalized from 127,
    /// 128, 129). h, a read of line 6144 at 116 (parsed 117, a hit at 118),
    /// is pulled at 119 behind c and reaches the post buffer at 129.
    /// 127: a's entry into the MSHR stage's buffer. 128: the MSHR stage
    /// takes it and answers its first request; b's entry into the buffer.
    /// 129: a's second answer; c cannot finish (the buffer holds b's
    /// entry). 130: a's third; c still cannot, h behind it can: answered,
    /// retrieved 131. 131: a's fourth (its entry done). 132: the MSHR stage
    /// takes b's entry and answers b; c's entry goes into the buffer.
    /// 133: c answered. Retrieved one cycle after each answer. Finalizing
    /// only the head would hold h behind c: c finalized at 132, h at 133
    /// (retrieved 134). Go (`WithNumReqPerCycle(1)`): the same.
    #[test]
    fn the_bank_finalizes_a_later_entry_past_a_head_that_cannot_finish() {
        let p = WriteBackParams { num_req_per_cycle: 1, ..WriteBackParams::r9nano_bank() };
        let rd4 = |addr| Body::Read { addr, bytes: 4, can_wait: false, tag: 0 };
        let script = [
            (5, write(6144, true)),
            (10, read(0)),
            (11, read(2048)),
            (12, read(4096)),
            (13, rd4(0x10)),
            (14, rd4(0x20)),
            (15, rd4(0x30)),
            (116, read(6144)),
        ];
        let r = run_with(&p, &IdealMemParams::r9nano(), &script);
        assert_eq!(r.dram, vec![(14, read(0)), (15, read(2048)), (16, read(4096))]);
        assert_eq!(r.got, vec![(20, 0), (129, 1), (130, 4), (131, 5), (131, 7), (132, 6), (133, 2), (134, 3)]);
        assert_eq!((r.wb.read_misses, r.wb.read_mshr_hits, r.wb.read_hits), (3, 3, 1));
    }

    /// The eviction's write-back carries the tag of the request that
    /// evicted the line, as its fetch does (the dirty-victim case above with
    /// the read tagged 7).
    #[test]
    fn an_eviction_carries_the_evicting_requests_tag() {
        let mut script: Vec<(Cycle, Body)> = (0..16).map(|k| (10 + k, write(k * 131_072, true))).collect();
        script.push((500, Body::Read { addr: 16 * 131_072, bytes: 64, can_wait: false, tag: 7 }));
        let r = run(&script);
        let w = Body::Write { addr: 0, can_wait: false, full_line: true, tag: 7 };
        assert_eq!(r.dram, vec![(515, w), (516, Body::Read { addr: 16 * 131_072, bytes: 64, can_wait: false, tag: 7 })]);
    }
}
