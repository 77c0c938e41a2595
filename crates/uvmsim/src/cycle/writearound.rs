//! Akita v4.9.0's write-around cache (mem/cache/writearound), MGPUSim's L1V.
//!
//! Followed: cache.go (the middleware's stage order), coalescer.go,
//! directory.go, bankstage.go, bottomparser.go, respondstage.go and
//! transaction.go; the directory, MSHR and LRU victim finder are
//! [`super::cachedir`]'s. Transactions are shared and mutated from several
//! lists as Go's `*transaction` pointers are, so they are `Rc`s here and the
//! lists compare them by identity.
//!
//! Left out: controlstage.go (flush, invalidate, pause: MGPUSim's runs on this
//! path never pause the L1V), tracing, and the data (storage reads and writes,
//! dirty masks): a write's `full_line` stands in for its dirty mask being all
//! true, and a coalesced write is `full_line` when any of its writes is. PIDs
//! are not kept (one address space per run).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::cachedir::{Directory, Mshr};
use super::core::{Body, Buffer, CompId, Core, Msg, PortId};
use super::pipeline::Pipeline;
use super::Component;

/// The builder's settings (writearound.Builder).
#[derive(Clone, Debug)]
pub struct WriteAroundParams {
    pub bank_latency_cycles: usize,
    pub num_banks: usize,
    pub log2_block_size: u32,
    pub ways: usize,
    pub num_mshr_entries: usize,
    pub num_reqs_per_cycle: usize,
    pub max_num_concurrent_trans: usize,
    pub total_bytes: u64,
    pub dir_latency_cycles: usize,
    /// The address-to-port mapper's interleaving (`lows[(addr / unit) % lows.len()]`).
    pub low_interleave: u64,
}

impl WriteAroundParams {
    /// MGPUSim v4.2.0's R9 Nano L1V (shaderarray/builder.go `buildL1VCaches`;
    /// the directory latency is the builder's default).
    pub fn r9nano() -> Self {
        Self {
            bank_latency_cycles: 20,
            num_banks: 4,
            log2_block_size: 6,
            ways: 4,
            num_mshr_entries: 128,
            num_reqs_per_cycle: 8,
            max_num_concurrent_trans: 128,
            total_bytes: 16 * 1024,
            dir_latency_cycles: 2,
            low_interleave: 128,
        }
    }
}

/// Go `bankActionType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BankAction {
    Invalid,
    ReadHit,
    Write,
    WriteFetched,
}

/// A pre-coalesce transaction: one request from the top (Go `transaction`
/// with `read` or `write` set and no `preCoalesceTransactions`).
#[derive(Debug)]
struct PreTrans {
    req: Msg,
    done: Cell<bool>,
}

impl PreTrans {
    fn is_read(&self) -> bool {
        matches!(self.req.body, Body::Read { .. })
    }
    fn addr(&self) -> u64 {
        match self.req.body {
            Body::Read { addr, .. } | Body::Write { addr, .. } => addr,
            _ => unreachable!("only reads and writes enter the cache"),
        }
    }
    fn tag(&self) -> u64 {
        match self.req.body {
            Body::Read { tag, .. } | Body::Write { tag, .. } => tag,
            _ => unreachable!("only reads and writes enter the cache"),
        }
    }
    fn full_line(&self) -> bool {
        matches!(self.req.body, Body::Write { full_line: true, .. })
    }
    /// Go `isReqLastInWave`.
    fn last_in_wave(&self) -> bool {
        match self.req.body {
            Body::Read { can_wait, .. } | Body::Write { can_wait, .. } => !can_wait,
            _ => unreachable!("only reads and writes enter the cache"),
        }
    }
}

type PreRef = Rc<PreTrans>;

/// A post-coalesce transaction (Go `transaction` built by `coalesceRead` /
/// `coalesceWrite`): a line-aligned read or write and the requests it serves.
#[derive(Debug)]
struct Trans {
    read: bool,
    /// The line address (Go's coalesced request's `Address`).
    addr: u64,
    full_line: bool,
    /// Tag of the first request, carried on the request sent below.
    tag: u64,
    pre: Vec<PreRef>,
    read_to_bottom: Option<u64>,
    write_to_bottom: Option<u64>,
    bank_action: BankAction,
    block: usize,
}

type TRef = Rc<RefCell<Trans>>;

/// One bank (Go `bankStage`): its pipeline and post-pipeline buffer. Its
/// input buffer is `WriteAround::bank_bufs[i]`, as in Go.
struct Bank {
    pipe: Pipeline<TRef>,
    post: Buffer<TRef>,
}

/// The write-around cache (Go `writearound.Comp`).
pub struct WriteAround {
    pub top: PortId,
    pub bottom: PortId,
    lows: Vec<PortId>,
    low_interleave: u64,
    n: usize,
    log2_block: u32,
    max_trans: usize,
    pub dir: Directory,
    mshr: Mshr<TRef>,
    dir_buf: Buffer<TRef>,
    bank_bufs: Vec<Buffer<TRef>>,
    dir_pipe: Pipeline<TRef>,
    dir_post: Buffer<TRef>,
    banks: Vec<Bank>,
    to_coalesce: Vec<PreRef>,
    transactions: Vec<PreRef>,
    post_coalesce: Vec<TRef>,
    /// Post-coalesce reads that hit a valid block (`processReadHit` done).
    pub read_hits: u64,
    /// Post-coalesce reads sent below (`processReadMiss` done).
    pub read_misses: u64,
    /// Post-coalesce reads and writes added to an MSHR entry (`processMSHRHit`).
    pub mshr_hits: u64,
    /// Post-coalesce writes sent below (`writeBottom` done).
    pub writes: u64,
    /// Of those, writes that hit a valid block (`processWriteHit` done).
    pub write_hits: u64,
}

impl WriteAround {
    /// Go `Builder.Build`: ports of `num_reqs_per_cycle` each way, the
    /// directory buffer and bank buffers of `num_reqs_per_cycle`, pipelines
    /// `num_reqs_per_cycle` wide. `lows` may be empty and set later.
    pub fn new(core: &mut Core, id: CompId, top_conn: CompId, bottom_conn: CompId, lows: Vec<PortId>, p: &WriteAroundParams) -> Self {
        let n = p.num_reqs_per_cycle;
        let top = core.add_port(id, top_conn, n, n);
        let bottom = core.add_port(id, bottom_conn, n, n);
        let block_size = 1u64 << p.log2_block_size;
        let sets = (p.total_bytes / (p.ways as u64 * block_size)) as usize;
        Self {
            top,
            bottom,
            lows,
            low_interleave: p.low_interleave,
            n,
            log2_block: p.log2_block_size,
            max_trans: p.max_num_concurrent_trans,
            dir: Directory::new(sets, p.ways, block_size),
            mshr: Mshr::new(p.num_mshr_entries),
            dir_buf: Buffer::new(n),
            bank_bufs: (0..p.num_banks).map(|_| Buffer::new(n)).collect(),
            dir_pipe: Pipeline::new(n, p.dir_latency_cycles),
            dir_post: Buffer::new(n),
            banks: (0..p.num_banks).map(|_| Bank { pipe: Pipeline::new(n, p.bank_latency_cycles), post: Buffer::new(n) }).collect(),
            to_coalesce: Vec::new(),
            transactions: Vec::new(),
            post_coalesce: Vec::new(),
            read_hits: 0,
            read_misses: 0,
            mshr_hits: 0,
            writes: 0,
            write_hits: 0,
        }
    }

    /// The lower ports the requests below are interleaved over.
    pub fn set_lows(&mut self, lows: Vec<PortId>) {
        self.lows = lows;
    }

    /// Requests from the top not yet answered (Go `len(transactions)`).
    pub fn num_transactions(&self) -> usize {
        self.transactions.len()
    }

    /// True when nothing is held anywhere in the cache.
    pub fn is_idle(&self) -> bool {
        self.transactions.is_empty()
            && self.post_coalesce.is_empty()
            && self.dir_buf.is_empty()
            && self.dir_pipe.is_empty()
            && self.dir_post.is_empty()
            && self.mshr.entries.is_empty()
            && self.bank_bufs.iter().all(|b| b.is_empty())
            && self.banks.iter().all(|b| b.pipe.is_empty() && b.post.is_empty())
    }

    fn line(&self, addr: u64) -> u64 {
        (addr >> self.log2_block) << self.log2_block
    }

    /// `mem.InterleavedAddressPortMapper.Find`.
    fn low_for(&self, addr: u64) -> PortId {
        assert!(!self.lows.is_empty(), "the write-around cache has no lower ports");
        self.lows[((addr / self.low_interleave) % self.lows.len() as u64) as usize]
    }

    /// Go `getBankBuf`: bank of block `set * ways + way`.
    fn bank_of(&self, block: usize) -> usize {
        block % self.bank_bufs.len()
    }

    /// Go `removeTransaction` of the bank stage and the bottom parser: the
    /// first entry of `postCoalesceTransactions` that is `t`, if any.
    fn remove_post_coalesce(&mut self, t: &TRef) {
        if let Some(i) = self.post_coalesce.iter().position(|x| Rc::ptr_eq(x, t)) {
            self.post_coalesce.remove(i);
        }
    }

    // ---- respondstage.go ----

    /// Go `respondStage.Tick`: the first done transaction in `transactions`
    /// order is answered; if its answer cannot be sent, none is.
    fn respond_tick(&mut self, core: &mut Core) -> bool {
        let Some(i) = self.transactions.iter().position(|t| t.done.get()) else {
            return false;
        };
        let req = self.transactions[i].req;
        let body = if self.transactions[i].is_read() { Body::DataReady { rsp_to: req.id } } else { Body::WriteDone { rsp_to: req.id } };
        if !core.can_send(self.top) {
            return false;
        }
        let rsp = core.msg(self.top, req.src, body);
        let sent = core.send(self.top, rsp);
        debug_assert!(sent);
        self.transactions.remove(i);
        true
    }

    // ---- bottomparser.go ----

    /// Go `bottomParser.Tick`.
    fn parse_bottom_tick(&mut self, core: &mut Core) -> bool {
        let Some(&msg) = core.peek_incoming(self.bottom) else {
            return false;
        };
        match msg.body {
            Body::WriteDone { rsp_to } => self.process_done_rsp(core, rsp_to),
            Body::DataReady { rsp_to } => self.process_data_ready(core, rsp_to),
            _ => panic!("cannot process response {msg:?}"),
        }
    }

    /// Go `processDoneRsp` (`fetchAndWrite` is never set in the write-around
    /// cache, so its branch is left out).
    fn process_done_rsp(&mut self, core: &mut Core, rsp_to: u64) -> bool {
        let found = self.post_coalesce.iter().find(|t| t.borrow().write_to_bottom == Some(rsp_to)).cloned();
        if let Some(t) = found {
            for p in &t.borrow().pre {
                p.done.set(true);
            }
            self.remove_post_coalesce(&t);
        }
        core.retrieve_incoming(self.bottom);
        true
    }

    /// Go `processDataReady`: every request of the line's MSHR entry is done
    /// and leaves `postCoalesceTransactions`; the fill goes to the victim's bank.
    fn process_data_ready(&mut self, core: &mut Core, rsp_to: u64) -> bool {
        let Some(t) = self.post_coalesce.iter().find(|t| t.borrow().read_to_bottom == Some(rsp_to)).cloned() else {
            core.retrieve_incoming(self.bottom);
            return true;
        };
        let bank = self.bank_of(t.borrow().block);
        if !self.bank_bufs[bank].can_push() {
            return false;
        }
        let line = self.line(t.borrow().addr);
        let e = self.mshr.query(line).expect("a fetched line has its MSHR entry");
        // finalizeMSHRTrans
        let reqs = std::mem::take(&mut self.mshr.entries[e].requests);
        for r in &reqs {
            for p in &r.borrow().pre {
                p.done.set(true);
            }
            self.remove_post_coalesce(r);
        }
        self.mshr.remove(line);
        t.borrow_mut().bank_action = BankAction::WriteFetched;
        self.bank_bufs[bank].push(t.clone());
        self.remove_post_coalesce(&t);
        core.retrieve_incoming(self.bottom);
        true
    }

    // ---- bankstage.go ----

    /// Go `bankStage.Tick`: finalize ×n, the pipeline, extract ×n.
    fn bank_tick(&mut self, i: usize) -> bool {
        let mut progress = false;
        for _ in 0..self.n {
            progress |= self.finalize_trans(i);
        }
        let bank = &mut self.banks[i];
        progress |= bank.pipe.tick(&mut bank.post);
        for _ in 0..self.n {
            progress |= self.extract_from_buf(i);
        }
        progress
    }

    /// Go `extractFromBuf`.
    fn extract_from_buf(&mut self, i: usize) -> bool {
        if self.bank_bufs[i].peek().is_none() {
            return false;
        }
        let bank = &mut self.banks[i];
        if !bank.pipe.can_accept(&bank.post) {
            return false;
        }
        let t = self.bank_bufs[i].pop().expect("peeked");
        bank.pipe.accept(t, &mut bank.post);
        true
    }

    /// Go `finalizeTrans`: a read hit's requests are done (and its readers
    /// released); a write hit or a fill unlocks its block.
    fn finalize_trans(&mut self, i: usize) -> bool {
        let Some(t) = self.banks[i].post.peek().cloned() else {
            return false;
        };
        let (action, block) = {
            let tb = t.borrow();
            (tb.bank_action, tb.block)
        };
        match action {
            BankAction::ReadHit => {
                self.dir.blocks[block].read_count -= 1;
                for p in &t.borrow().pre {
                    p.done.set(true);
                }
                self.remove_post_coalesce(&t);
            }
            BankAction::Write | BankAction::WriteFetched => {
                self.dir.blocks[block].locked = false;
            }
            BankAction::Invalid => panic!("cannot handle trans bank action"),
        }
        self.banks[i].post.pop();
        true
    }

    // ---- directory.go ----

    /// Go `directory.Tick`: up to n from the directory buffer into the
    /// pipeline, the pipeline, then n tries at the post-pipeline buffer's
    /// head (a failed head is tried again in the next iteration, as Go's
    /// `continue` does).
    fn directory_tick(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..self.n {
            if !self.dir_pipe.can_accept(&self.dir_post) {
                break;
            }
            let Some(t) = self.dir_buf.pop() else {
                break;
            };
            self.dir_pipe.accept(t, &mut self.dir_post);
            progress = true;
        }
        progress |= self.dir_pipe.tick(&mut self.dir_post);
        for _ in 0..self.n {
            let Some(t) = self.dir_post.peek().cloned() else {
                break;
            };
            let read = t.borrow().read;
            progress |= if read { self.process_read(core, &t) } else { self.process_write(core, &t) };
        }
        progress
    }

    /// Go `processRead`: MSHR hit, else read hit, else miss.
    fn process_read(&mut self, core: &mut Core, t: &TRef) -> bool {
        let line = self.line(t.borrow().addr);
        if let Some(e) = self.mshr.query(line) {
            return self.process_mshr_hit(t, e);
        }
        if let Some(b) = self.dir.lookup(line) {
            return self.process_read_hit(t, b);
        }
        self.process_read_miss(core, t)
    }

    /// Go `processMSHRHit`.
    fn process_mshr_hit(&mut self, t: &TRef, e: usize) -> bool {
        self.mshr.entries[e].requests.push(t.clone());
        self.dir_post.pop();
        self.mshr_hits += 1;
        true
    }

    /// Go `processReadHit`: waits while the block is locked.
    fn process_read_hit(&mut self, t: &TRef, b: usize) -> bool {
        if self.dir.blocks[b].locked {
            return false;
        }
        let bank = self.bank_of(b);
        if !self.bank_bufs[bank].can_push() {
            return false;
        }
        {
            let mut tb = t.borrow_mut();
            tb.block = b;
            tb.bank_action = BankAction::ReadHit;
        }
        self.dir.blocks[b].read_count += 1;
        self.dir.visit(b);
        self.bank_bufs[bank].push(t.clone());
        self.dir_post.pop();
        self.read_hits += 1;
        true
    }

    /// Go `processReadMiss`: waits while the victim is locked or has readers,
    /// or the MSHR is full, or the bottom port is.
    fn process_read_miss(&mut self, core: &mut Core, t: &TRef) -> bool {
        let line = self.line(t.borrow().addr);
        let victim = self.dir.find_victim(line);
        if self.dir.blocks[victim].locked || self.dir.blocks[victim].read_count > 0 {
            return false;
        }
        if self.mshr.is_full() {
            return false;
        }
        if !self.fetch_from_bottom(core, t, victim) {
            return false;
        }
        self.dir_post.pop();
        self.read_misses += 1;
        true
    }

    /// Go `fetchFromBottom`: a 64 B read of the line below; the victim is
    /// taken (valid, locked, most recent) for the line at once.
    fn fetch_from_bottom(&mut self, core: &mut Core, t: &TRef, victim: usize) -> bool {
        let (line, tag) = {
            let tb = t.borrow();
            (self.line(tb.addr), tb.tag)
        };
        if !core.can_send(self.bottom) {
            return false;
        }
        let dst = self.low_for(line);
        let bytes = 1u32 << self.log2_block;
        let req = core.msg(self.bottom, dst, Body::Read { addr: line, bytes, can_wait: false, tag });
        let sent = core.send(self.bottom, req);
        debug_assert!(sent);
        {
            let mut tb = t.borrow_mut();
            tb.read_to_bottom = Some(req.id);
            tb.block = victim;
        }
        let e = self.mshr.add(line, victim);
        self.mshr.entries[e].requests.push(t.clone());
        self.mshr.entries[e].read_to_bottom = Some(req.id);
        let b = &mut self.dir.blocks[victim];
        b.tag = line;
        b.valid = true;
        b.locked = true;
        self.dir.visit(victim);
        true
    }

    /// Go `processWrite`: a write to a line being fetched is sent below and
    /// joins the MSHR entry; else write hit or write miss.
    fn process_write(&mut self, core: &mut Core, t: &TRef) -> bool {
        let line = self.line(t.borrow().addr);
        if let Some(e) = self.mshr.query(line) {
            if self.write_bottom(core, t) {
                return self.process_mshr_hit(t, e);
            }
            return false;
        }
        if let Some(b) = self.dir.lookup(line) {
            return self.process_write_hit(core, t, b);
        }
        // writeMiss
        if self.write_bottom(core, t) {
            self.dir_post.pop();
            return true;
        }
        false
    }

    /// Go `writeBottom`: the coalesced write (at its line address) below.
    fn write_bottom(&mut self, core: &mut Core, t: &TRef) -> bool {
        if !core.can_send(self.bottom) {
            return false;
        }
        let (addr, full_line, tag) = {
            let tb = t.borrow();
            (tb.addr, tb.full_line, tb.tag)
        };
        let dst = self.low_for(addr);
        let req = core.msg(self.bottom, dst, Body::Write { addr, can_wait: false, full_line, tag });
        let sent = core.send(self.bottom, req);
        debug_assert!(sent);
        t.borrow_mut().write_to_bottom = Some(req.id);
        self.writes += 1;
        true
    }

    /// Go `processWriteHit`: waits while the block is locked or read; the
    /// write goes below and the block stays locked until its bank stage ends.
    fn process_write_hit(&mut self, core: &mut Core, t: &TRef, b: usize) -> bool {
        if self.dir.blocks[b].locked || self.dir.blocks[b].read_count > 0 {
            return false;
        }
        let bank = self.bank_of(b);
        if !self.bank_bufs[bank].can_push() {
            return false;
        }
        if t.borrow().write_to_bottom.is_none() && !self.write_bottom(core, t) {
            return false;
        }
        let line = self.line(t.borrow().addr);
        let blk = &mut self.dir.blocks[b];
        blk.locked = true;
        blk.valid = true;
        blk.tag = line;
        self.dir.visit(b);
        {
            let mut tb = t.borrow_mut();
            tb.bank_action = BankAction::Write;
            tb.block = b;
        }
        self.bank_bufs[bank].push(t.clone());
        self.dir_post.pop();
        self.write_hits += 1;
        true
    }

    // ---- coalescer.go ----

    /// Go `coalescer.Tick`.
    fn coalesce_tick(&mut self, core: &mut Core) -> bool {
        let Some(&req) = core.peek_incoming(self.top) else {
            return false;
        };
        self.process_req(core, req)
    }

    /// Go `processReq` and its four cases.
    fn process_req(&mut self, core: &mut Core, req: Msg) -> bool {
        if self.transactions.len() >= self.max_trans {
            return false;
        }
        let pre = Rc::new(PreTrans { req, done: Cell::new(false) });
        let coalescable = self.to_coalesce.is_empty() || self.can_coalesce(&pre);
        if pre.last_in_wave() {
            if !self.dir_buf.can_push() {
                return false;
            }
            if coalescable {
                // processReqLastInWaveCoalescable
                self.add_pre(pre);
                self.coalesce_and_send();
            } else {
                // processReqLastInWaveNoncoalescable: the held group goes
                // first; the request waits if that filled the buffer.
                self.coalesce_and_send();
                if !self.dir_buf.can_push() {
                    return true;
                }
                self.add_pre(pre);
                self.coalesce_and_send();
            }
        } else if coalescable {
            // processReqCoalescable
            self.add_pre(pre);
        } else {
            // processReqNoncoalescable
            if !self.dir_buf.can_push() {
                return false;
            }
            self.coalesce_and_send();
            self.add_pre(pre);
        }
        core.retrieve_incoming(self.top);
        true
    }

    fn add_pre(&mut self, pre: PreRef) {
        self.to_coalesce.push(pre.clone());
        self.transactions.push(pre);
    }

    /// Go `canReqCoalesce`: same line as the first held request (of either kind).
    fn can_coalesce(&self, pre: &PreTrans) -> bool {
        pre.addr() >> self.log2_block == self.to_coalesce[0].addr() >> self.log2_block
    }

    /// Go `coalesceAndSend` (`coalesceRead` / `coalesceWrite` by the first
    /// held request's kind).
    fn coalesce_and_send(&mut self) {
        let pre = std::mem::take(&mut self.to_coalesce);
        let first = &pre[0];
        let read = first.is_read();
        let t = Rc::new(RefCell::new(Trans {
            read,
            addr: self.line(first.addr()),
            full_line: !read && pre.iter().any(|p| p.full_line()),
            tag: first.tag(),
            read_to_bottom: None,
            write_to_bottom: None,
            bank_action: BankAction::Invalid,
            block: 0,
            pre,
        }));
        self.dir_buf.push(t.clone());
        self.post_coalesce.push(t);
    }
}

impl Component for WriteAround {
    /// Go `middleware.Tick` / `runPipeline` (never paused here).
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for _ in 0..self.n {
            progress |= self.respond_tick(core);
        }
        for _ in 0..self.n {
            progress |= self.parse_bottom_tick(core);
        }
        for i in 0..self.banks.len() {
            progress |= self.bank_tick(i);
        }
        progress |= self.directory_tick(core);
        for _ in 0..self.n {
            progress |= self.coalesce_tick(core);
        }
        progress
    }
}

#[cfg(test)]
mod tests {
    //! Cycle cases. Each names the Go scenario of scripts/akita-crosscheck/writearound/main.go
    //! (the real `writearound.Comp` with the R9 Nano L1V parameters between
    //! a test source and Akita's `idealmemcontroller`, run with
    //! `AKITA_TIE=fifo`) whose printed cycles it asserts: every cycle test
    //! below was checked against that program's output (the mapper test is
    //! a plain unit test).
    //!
    //! Derivations use: a request sent by the source at `s` is in the top
    //! port at `s` (the connection ticks in the same cycle) and the cache
    //! ticks at `s + 1`; its coalescer pushes the transaction to the directory
    //! buffer at `s + 1` (the directory stage ran before it in that tick); the
    //! directory takes it into its 2-stage pipeline at `s + 2` and moves it to
    //! stage 1 in the same tick; at `s + 3` it reaches the post-pipeline buffer
    //! and is processed (`D = s + 3`). A bank takes an item at `T`, moves it
    //! one stage a tick (stage 19 at `T + 19`), pushes it to its post buffer
    //! at `T + 20` and finalizes it at `T + 21`. The respond stage runs first
    //! in a tick, so a transaction made done at `t` is answered at `t + 1`.
    //! The memory (Go `idealmemcontroller`, width 1 unless said) takes a
    //! request the cycle after it is sent and answers `L` = 100 cycles later.
    use super::*;
    use crate::cycle::core::{Cycle, Due};
    use std::collections::{HashMap, HashSet, VecDeque};

    /// A request of the source: sent at `at`.
    #[derive(Clone, Copy, Debug)]
    struct Req {
        at: Cycle,
        write: bool,
        addr: u64,
        bytes: u32,
        can_wait: bool,
    }

    fn rd(at: Cycle, addr: u64, can_wait: bool) -> Req {
        Req { at, write: false, addr, bytes: 4, can_wait }
    }

    fn wr(at: Cycle, addr: u64, bytes: u32) -> Req {
        Req { at, write: true, addr, bytes, can_wait: false }
    }

    /// Akita's `idealmemcontroller` (memMiddleware.go): each tick takes up
    /// to `width` requests from its port, then starts up to `width` of the
    /// taken ones, each answered `latency` cycles later (retried a cycle
    /// later while its port is full), then asks for a tick.
    struct TestMem {
        id: CompId,
        port: PortId,
        latency: Cycle,
        width: usize,
        inflight: VecDeque<Msg>,
        started: Vec<Msg>,
    }

    impl Component for TestMem {
        fn tick(&mut self, core: &mut Core) -> bool {
            let mut progress = false;
            for _ in 0..self.width {
                let Some(m) = core.retrieve_incoming(self.port) else { break };
                self.inflight.push_back(m);
                progress = true;
            }
            for _ in 0..self.width {
                let Some(m) = self.inflight.pop_front() else { break };
                core.schedule_custom(self.id, core.now + self.latency, self.started.len() as u64);
                self.started.push(m);
                progress = true;
            }
            progress
        }

        fn on_event(&mut self, core: &mut Core, token: u64) {
            let req = self.started[token as usize];
            if !core.can_send(self.port) {
                core.schedule_custom(self.id, core.now + 1, token);
                return;
            }
            let body = match req.body {
                Body::Read { .. } => Body::DataReady { rsp_to: req.id },
                Body::Write { .. } => Body::WriteDone { rsp_to: req.id },
                b => panic!("memory got {b:?}"),
            };
            let rsp = core.msg(self.port, req.src, body);
            assert!(core.send(self.port, rsp));
            core.tick_later(self.id);
        }
    }

    /// The cache between a source (on the top connection) and a `TestMem`
    /// (on the bottom one). `log` holds the cache's sends as the Go program
    /// prints them ("cycle side kind name-or-address").
    struct Bench {
        core: Core,
        cache_id: CompId,
        cache: WriteAround,
        src_id: CompId,
        src_port: PortId,
        mem: TestMem,
        reqs: Vec<Req>,
        names: HashMap<u64, usize>,
        seen: HashSet<u64>,
        log: Vec<String>,
    }

    impl Bench {
        fn new(mem_width: usize, mem_buf: usize, latency: Cycle, reqs: Vec<Req>) -> Self {
            let mut core = Core::new();
            let cache_id = core.add_component();
            let src_id = core.add_component();
            let mem_id = core.add_component();
            let top_conn = core.add_connection();
            let bottom_conn = core.add_connection();
            let mut cache = WriteAround::new(&mut core, cache_id, top_conn, bottom_conn, Vec::new(), &WriteAroundParams::r9nano());
            let src_port = core.add_port(src_id, top_conn, 1024, 1024);
            let mem_port = core.add_port(mem_id, bottom_conn, mem_buf, mem_buf);
            cache.set_lows(vec![mem_port]);
            for (i, r) in reqs.iter().enumerate() {
                core.schedule_custom(src_id, r.at, i as u64);
            }
            let mem = TestMem { id: mem_id, port: mem_port, latency, width: mem_width, inflight: VecDeque::new(), started: Vec::new() };
            Self { core, cache_id, cache, src_id, src_port, mem, reqs, names: HashMap::new(), seen: HashSet::new(), log: Vec::new() }
        }

        /// Handle every event due at or before `until`.
        fn run_until(&mut self, until: Cycle) {
            while self.core.peek_time().is_some_and(|t| t <= until) {
                let Some(due) = self.core.next() else { break };
                match due {
                    Due::Tick(c) if c == self.cache_id => {
                        let progress = self.cache.tick(&mut self.core);
                        self.record_sends();
                        self.core.ticked(c, progress);
                    }
                    Due::Tick(c) if c == self.src_id => {
                        let mut progress = false;
                        while self.core.retrieve_incoming(self.src_port).is_some() {
                            progress = true;
                        }
                        self.core.ticked(c, progress);
                    }
                    Due::Tick(c) => {
                        assert_eq!(c, self.mem.id);
                        let progress = self.mem.tick(&mut self.core);
                        self.core.ticked(c, progress);
                    }
                    Due::Custom(c, i) if c == self.src_id => self.send(i as usize),
                    Due::Custom(c, token) => {
                        assert_eq!(c, self.mem.id);
                        self.mem.on_event(&mut self.core, token);
                    }
                }
            }
        }

        fn run(&mut self) {
            self.run_until(Cycle::MAX);
            assert!(self.cache.is_idle(), "the cache holds work at the end");
        }

        fn send(&mut self, i: usize) {
            let r = self.reqs[i];
            let body = if r.write {
                Body::Write { addr: r.addr, can_wait: r.can_wait, full_line: r.bytes == 64 && r.addr % 64 == 0, tag: i as u64 }
            } else {
                Body::Read { addr: r.addr, bytes: r.bytes, can_wait: r.can_wait, tag: i as u64 }
            };
            let m = self.core.msg(self.src_port, self.cache.top, body);
            self.names.insert(m.id, i);
            assert!(self.core.send(self.src_port, m));
        }

        /// After a cache tick its new messages are still in its outgoing
        /// buffers (the connections tick after it): top answers first, as
        /// the respond stage runs before the directory in a tick.
        fn record_sends(&mut self) {
            let now = self.core.now;
            for p in [self.cache.top, self.cache.bottom] {
                let side = if p == self.cache.top { "top" } else { "bottom" };
                let msgs: Vec<Msg> = self.core.ports[p as usize].outgoing.iter().copied().collect();
                for m in msgs {
                    if !self.seen.insert(m.id) {
                        continue;
                    }
                    let line = match m.body {
                        Body::DataReady { rsp_to } => format!("{now} {side} DataReady r{}", self.names[&rsp_to]),
                        Body::WriteDone { rsp_to } => format!("{now} {side} WriteDone r{}", self.names[&rsp_to]),
                        Body::Read { addr, .. } => format!("{now} {side} Read {addr:#x}"),
                        Body::Write { addr, .. } => format!("{now} {side} Write {addr:#x}"),
                        b => panic!("the cache sent {b:?}"),
                    };
                    self.log.push(line);
                }
            }
        }

        /// FNV-1a of the log's lines, each ended by a newline (the Go
        /// program's digest).
        fn digest(&self) -> u64 {
            let mut h: u64 = 0xcbf29ce484222325;
            for l in &self.log {
                for b in l.bytes().chain(std::iter::once(b'\n')) {
                    h ^= b as u64;
                    h = h.wrapping_mul(0x100000001b3);
                }
            }
            h
        }

        /// The bottom requests the memory received.
        fn bottom_reqs(&self) -> Vec<Body> {
            self.mem.started.iter().map(|m| m.body).collect()
        }
    }

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Go s1. Read miss at s = 10: read below at D = 13; the memory takes it
    /// at 14 and answers at 114; the cache parses the DataReady at P = 115
    /// (the request is done) and answers the top at 116. A read of the same
    /// line at s = 200 hits at D = 203; its bank takes it at 204 and
    /// finalizes it at 225; the answer leaves at 226.
    #[test]
    fn a_read_miss_fills_the_line_and_a_later_read_hits() {
        let mut b = Bench::new(1, 16, 100, vec![rd(10, 0x1000, false), rd(200, 0x1010, false)]);
        b.run();
        assert_eq!(b.log, lines(&["13 bottom Read 0x1000", "116 top DataReady r0", "226 top DataReady r1"]));
        assert_eq!(b.bottom_reqs(), vec![Body::Read { addr: 0x1000, bytes: 64, can_wait: false, tag: 0 }]);
        assert_eq!((b.cache.read_misses, b.cache.read_hits, b.cache.mshr_hits), (1, 1, 0));
        assert_eq!(b.digest(), 0x0f88a5d9864d316a);
    }

    /// Go s1b. The fill parsed at P = 115 goes to its bank in the same tick
    /// (the bottom parser runs before the banks), which unlocks the block at
    /// P + 21 = 136. A read of the line at 120 reaches the directory at 123
    /// and finds the block valid but locked: it waits at the head until the
    /// bank unlocks it at 136 (banks run before the directory), hits at
    /// D = 136 and is answered at D + 23 = 159.
    #[test]
    fn a_read_hit_waits_while_the_fill_holds_the_block() {
        let mut b = Bench::new(1, 16, 100, vec![rd(10, 0x1000, false), rd(120, 0x1020, false)]);
        b.run();
        assert_eq!(b.log, lines(&["13 bottom Read 0x1000", "116 top DataReady r0", "159 top DataReady r1"]));
        assert_eq!((b.cache.read_misses, b.cache.read_hits), (1, 1));
    }

    /// Go s2. r0 (0x1000) misses at 13; r1 (same line, sent at 11) reaches
    /// the directory at 14 and joins r0's MSHR entry: both are done when the
    /// line arrives (115) and answered at 116, with one read below. r2..r4
    /// (0x3000.., sent at 10, the first two `can_wait`) coalesce into one
    /// read, sent at 13 after r0's in the same directory tick; the width-1
    /// memory takes it at 15, so its three answers leave at 117.
    #[test]
    fn mshr_hits_and_coalesced_reads_share_one_read_below() {
        let reqs = vec![rd(10, 0x1000, false), rd(11, 0x1008, false), rd(10, 0x3000, true), rd(10, 0x3004, true), rd(10, 0x3008, false)];
        let mut b = Bench::new(1, 16, 100, reqs);
        b.run();
        let want = [
            "13 bottom Read 0x1000",
            "13 bottom Read 0x3000",
            "116 top DataReady r0",
            "116 top DataReady r1",
            "117 top DataReady r2",
            "117 top DataReady r3",
            "117 top DataReady r4",
        ];
        assert_eq!(b.log, lines(&want));
        assert_eq!((b.cache.read_misses, b.cache.mshr_hits, b.cache.read_hits), (2, 1, 0));
        assert_eq!(b.digest(), 0x26a3ff9679ae19a4);
    }

    /// Go s3. Five lines of set 0 (stride 64 sets × 64 B = 4 KiB) at 10: the
    /// first four take ways 0..3 (blocks 0..3, banks 0..3) and go below at
    /// 13; the fifth finds every block locked and waits. The width-1 memory
    /// answers at 114..117, parsed at 115..118 (answers at 116..119); block
    /// 0's fill is finalized at 115 + 21 = 136, and in that tick the
    /// directory takes block 0 (the least recent unlocked) for 0x4000 and
    /// sends its read: taken at 137, answered at 237, parsed at 238, answer
    /// at 239. Line 0x0 is evicted.
    #[test]
    fn a_read_miss_waits_while_its_victim_is_locked() {
        let reqs = (0..5).map(|k| rd(10, k * 0x1000, false)).collect();
        let mut b = Bench::new(1, 16, 100, reqs);
        b.run();
        let want = [
            "13 bottom Read 0x0",
            "13 bottom Read 0x1000",
            "13 bottom Read 0x2000",
            "13 bottom Read 0x3000",
            "116 top DataReady r0",
            "117 top DataReady r1",
            "118 top DataReady r2",
            "119 top DataReady r3",
            "136 bottom Read 0x4000",
            "239 top DataReady r4",
        ];
        assert_eq!(b.log, lines(&want));
        assert_eq!(b.cache.read_misses, 5);
        assert_eq!(b.cache.dir.lookup(0x0), None);
        assert_eq!(b.cache.dir.lookup(0x4000), Some(0));
        assert_eq!(b.digest(), 0xb516477be419becc);
    }

    /// Go s4 (memory width 8, buffer 256). 129 reads of distinct lines sent
    /// at 10: the top port (8 deep) takes 8 a cycle, refilled in the same
    /// cycle the coalescer frees it, so reads 8k..8k+7 are coalesced at
    /// 11 + k and go below at 13 + k (k = 0..15). At 27 the cache holds 128
    /// transactions and the 129th stays in the top port. Batch k's lines
    /// return at 114 + k and are answered at 116 + k; at 116 the respond
    /// stage frees a slot before the coalescer runs, which takes the 129th:
    /// below at 118, answered at 118 + 103 = 221.
    #[test]
    fn the_transaction_cap_holds_requests_in_the_top_port() {
        let reqs = (0..129).map(|j| rd(10, j * 64, false)).collect();
        let mut b = Bench::new(8, 256, 100, reqs);
        b.run_until(60);
        assert_eq!(b.cache.num_transactions(), 128);
        assert_eq!(b.core.ports[b.cache.top as usize].incoming.len(), 1);
        b.run();
        let mut want = Vec::new();
        for j in 0..128u64 {
            want.push(format!("{} bottom Read {:#x}", 13 + j / 8, j * 64));
        }
        for j in 0..128u64 {
            want.push(format!("{} top DataReady r{j}", 116 + j / 8));
        }
        want.push("118 bottom Read 0x2000".to_string());
        want.push("221 top DataReady r128".to_string());
        let mut got = b.log.clone();
        got.sort_by_key(|l| l.split(' ').next().unwrap().parse::<u64>().unwrap());
        want.sort_by_key(|l| l.split(' ').next().unwrap().parse::<u64>().unwrap());
        assert_eq!(got, want);
        assert_eq!(b.log.len(), 258);
        assert_eq!(b.digest(), 0x47c9364f32d916b0);
    }

    /// Go s5. A full-line write miss at 10 goes below at 13 (at its line
    /// address) and is answered when its WriteDone is parsed (115): 116. It
    /// does not allocate: a read of the line at 200 misses (below at 203,
    /// answered at 306).
    #[test]
    fn a_write_goes_around_the_cache() {
        let mut b = Bench::new(1, 16, 100, vec![wr(10, 0x2000, 64), rd(200, 0x2000, false)]);
        b.run();
        assert_eq!(b.log, lines(&["13 bottom Write 0x2000", "116 top WriteDone r0", "203 bottom Read 0x2000", "306 top DataReady r1"]));
        assert_eq!(b.bottom_reqs()[0], Body::Write { addr: 0x2000, can_wait: false, full_line: true, tag: 0 });
        assert_eq!((b.cache.writes, b.cache.write_hits, b.cache.read_misses), (1, 0, 1));
        assert_eq!(b.digest(), 0x548f3f0a06cb3371);
    }

    /// Go s5b. After a fill of 0x4000 (unlocked at 136), a 4-byte write to
    /// the line at 200 hits at D = 203: it goes below (at the line address,
    /// not full) and locks the block; its bank takes it at 204 and unlocks
    /// the block at 225. A read at 201 reaches the directory at 204, waits on
    /// the lock, hits at 225 and is answered at 248, before the write, which
    /// is answered after its WriteDone (taken 204, back 304, parsed 305): 306.
    #[test]
    fn a_write_hit_locks_its_block_until_its_bank_stage_ends() {
        let mut b = Bench::new(1, 16, 100, vec![rd(10, 0x4000, false), wr(200, 0x4008, 4), rd(201, 0x4000, false)]);
        b.run();
        let want =
            ["13 bottom Read 0x4000", "116 top DataReady r0", "203 bottom Write 0x4000", "248 top DataReady r2", "306 top WriteDone r1"];
        assert_eq!(b.log, lines(&want));
        assert_eq!(b.bottom_reqs()[1], Body::Write { addr: 0x4000, can_wait: false, full_line: false, tag: 1 });
        assert_eq!((b.cache.writes, b.cache.write_hits, b.cache.read_hits), (1, 1, 1));
        assert_eq!(b.digest(), 0xfb10422190c904fb);
    }

    /// Go s6. A write to a line being fetched goes below at once (14) and
    /// joins the MSHR entry: it is done with the fill (parsed 115) and
    /// answered at 116 with the read, before its own WriteDone (taken 15,
    /// back 115, parsed 116 and dropped).
    #[test]
    fn a_write_to_a_line_being_fetched_is_done_with_the_fill() {
        let mut b = Bench::new(1, 16, 100, vec![rd(10, 0x5000, false), wr(11, 0x5000, 4)]);
        b.run();
        assert_eq!(b.log, lines(&["13 bottom Read 0x5000", "14 bottom Write 0x5000", "116 top DataReady r0", "116 top WriteDone r1"]));
        assert_eq!((b.cache.mshr_hits, b.cache.writes), (1, 1));
        assert_eq!(b.digest(), 0x5d0bec03d7bdabb0);
    }

    /// The Go program's random source (same constants).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }

    /// Go `randomWaves`: waves of 1..4 requests of one kind (all but the last
    /// `can_wait`), 3 a cycle from cycle 10, over 12 tags in sets 0..2.
    fn random_waves(seed: u64, n: usize) -> Vec<Req> {
        let mut g = Lcg(seed);
        let mut reqs = Vec::new();
        while reqs.len() < n {
            let size = g.next() % 4 + 1;
            let write = g.next() % 4 == 0;
            for k in 0..size {
                let at = 10 + reqs.len() as u64 / 3;
                let mut addr = (g.next() % 12) * 4096 + (g.next() % 3) * 64 + (g.next() % 16) * 4;
                let mut bytes = 4;
                if write && g.next() % 2 == 0 {
                    addr = addr / 64 * 64;
                    bytes = 64;
                }
                reqs.push(Req { at, write, addr, bytes, can_wait: k != size - 1 });
            }
        }
        reqs
    }

    /// Go r1 and r2: 600 random requests each (mixed waves, evictions,
    /// locked victims, MSHR hits, write hits, a saturated width-1 memory in
    /// r1): every send of the cache, cycle by cycle, has the Go run's digest.
    #[test]
    fn random_runs_match_the_go_cache_send_for_send() {
        let mut b = Bench::new(1, 16, 30, random_waves(1, 600));
        b.run();
        assert_eq!(b.log.len(), 1065);
        assert_eq!(b.log.last().map(String::as_str), Some("2134 top DataReady r577"));
        assert_eq!(b.digest(), 0x2b26cc80c53d96ac);
        // Every path is taken (Rust counts, not the Go program's).
        let c = &b.cache;
        assert!(c.read_hits > 0 && c.read_misses > 0 && c.mshr_hits > 0 && c.write_hits > 0 && c.writes > c.write_hits);
        let mut b = Bench::new(4, 16, 100, random_waves(7, 600));
        b.run();
        assert_eq!(b.log.len(), 1056);
        assert_eq!(b.log.last().map(String::as_str), Some("4387 top WriteDone r598"));
        assert_eq!(b.digest(), 0x6f8862683ca80c24);
    }

    /// `mem.InterleavedAddressPortMapper` with 128 B units.
    #[test]
    fn requests_below_interleave_over_the_lower_ports_by_128_bytes() {
        let mut core = Core::new();
        let id = core.add_component();
        let (t, bo) = (core.add_connection(), core.add_connection());
        let c = WriteAround::new(&mut core, id, t, bo, vec![7, 8, 9], &WriteAroundParams::r9nano());
        assert_eq!([c.low_for(0), c.low_for(64), c.low_for(128), c.low_for(256), c.low_for(384)], [7, 7, 8, 9, 7]);
    }

    /// A block's bank is its index `set · 4 + way` mod 4 banks (Go
    /// `getBankBuf`), here its way. Set-up: reads at 10 of lines 0x0, 0x100,
    /// .., 0x700 (sets 0, 4, .., 28) and at 11 of 0x800 (set 32) fill way 0
    /// of each set (blocks 16k and 128, bank 0), answered by 124. Eight reads
    /// of the first eight lines at 300 hit at D = 303: the directory, after
    /// the banks in that tick, fills bank 0's 8-deep buffer. A read miss
    /// sent at 199 goes below at D = 202 (taken 203, back 303) and its fill
    /// is parsed at 304, before the banks run. Filling way 1 of set 32
    /// (0x1800: block 129, bank 1) it goes at once: done at 304, answered at
    /// 305. Filling way 0 of set 36 (0x900: block 144, bank 0) it finds bank
    /// 0's buffer full, waits for the bank to take the hits (304) and goes at
    /// 305: answered at 306. The hits: bank 0 takes them at 304, finalizes
    /// them at 325, answered at 326. A bank by set (sets 0 mod 4) or a
    /// single bank would put 0x1800's fill behind the hits too (306). Go
    /// (the same requests, memory width 1): the same logs and digests.
    #[test]
    fn a_fill_goes_to_the_bank_of_its_block_not_of_its_set() {
        let run = |miss: u64| {
            let mut reqs: Vec<Req> = (0..8).map(|k| rd(10, k * 0x100, false)).collect();
            reqs.push(rd(11, 0x800, false));
            reqs.push(rd(199, miss, false));
            reqs.extend((0..8).map(|k| rd(300, k * 0x100, false)));
            let mut b = Bench::new(1, 16, 100, reqs);
            b.run();
            assert_eq!((b.cache.read_misses, b.cache.read_hits), (10, 8));
            assert!((0..8).all(|k| b.cache.dir.lookup(k * 0x100) == Some(16 * k as usize)), "way 0 of sets 0, 4, .., 28");
            (b.cache.dir.lookup(miss), b.log[18..].to_vec(), b.digest())
        };
        let hits: Vec<String> = (10..18).map(|r| format!("326 top DataReady r{r}")).collect();
        let (block, log, digest) = run(0x1800);
        assert_eq!(block, Some(129));
        assert_eq!(log, [lines(&["202 bottom Read 0x1800", "305 top DataReady r9"]), hits.clone()].concat());
        assert_eq!(digest, 0x53e23ef4b3244d55);
        let (block, log, digest) = run(0x900);
        assert_eq!(block, Some(144));
        assert_eq!(log, [lines(&["202 bottom Read 0x900", "306 top DataReady r9"]), hits].concat());
        assert_eq!(digest, 0x371dffab92230588);
    }

    /// A coalesced write is full-line when any of its writes is, and carries
    /// its first write's tag: a partial write (tag 0, may wait) and a
    /// full-line write of the same line (tag 1) go below as one full-line
    /// write tagged 0, answered together.
    #[test]
    fn a_coalesced_write_is_full_line_if_any_write_is_and_keeps_the_first_tag() {
        let reqs = vec![
            Req { at: 10, write: true, addr: 0x2008, bytes: 4, can_wait: true },
            Req { at: 10, write: true, addr: 0x2000, bytes: 64, can_wait: false },
        ];
        let mut b = Bench::new(1, 16, 100, reqs);
        b.run();
        assert_eq!(b.bottom_reqs(), vec![Body::Write { addr: 0x2000, can_wait: false, full_line: true, tag: 0 }]);
        assert_eq!(b.log, lines(&["13 bottom Write 0x2000", "116 top WriteDone r0", "116 top WriteDone r1"]));
    }
}
