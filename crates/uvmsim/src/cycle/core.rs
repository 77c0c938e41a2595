//! The tick engine, ports, buffers and direct connections, following Akita
//! v4.9.0's `sim` package (serialengine.go, ticker.go, port.go, buffer.go,
//! directconnection/directconnection.go) at one clock (1 GHz, so one time
//! unit is one cycle).
//!
//! What is kept exactly, because the TLB counts of MGPUSim's runs depend on it:
//! - A component ticks only when woken. `tick_now` schedules a tick in the
//!   current cycle, `tick_later` in the next; a tick that made progress asks
//!   for the next cycle (`TickingComponent.Handle`).
//! - `Port::send` pushes into the port's outgoing buffer and, when that buffer
//!   was empty, wakes the connection in the current cycle (`NotifySend` →
//!   `TickNow`). The connection delivers each port's outgoing messages in
//!   order into the destination's incoming buffer, and stops at the first
//!   that does not fit (`forwardMany`); delivery into an empty incoming buffer
//!   wakes its owner in the next cycle (`NotifyRecv` → `TickLater`).
//! - Retrieving from an incoming buffer that was full wakes the connection now
//!   and every other component on it in the next cycle (`NotifyAvailable`);
//!   retrieving from an outgoing buffer that was full wakes its owner in the
//!   next cycle (`NotifyPortFree`).
//! - The connection starts its scan one port further each tick.
//! - Connections are secondary ticking components: in each cycle they tick
//!   after every component's tick and timed event of that cycle
//!   (`NewSecondaryTickingComponent`, `SerialEngine.nextEvent`), so a message
//!   sent in a cycle is delivered in that cycle whatever the order of the sends.
//!
//! What is not: Akita's event queue is a binary heap ordered by time only, so
//! events of the same cycle run in an order that depends on the heap's whole
//! history. Here they run in the order they were scheduled. MGPUSim itself,
//! with its ties broken this way instead (an experiment, docs/validation.md
//! "MGPUSim's own spread"), moves atax's L1 TLB hits by −1.75%.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Simulated time in cycles of the one 1 GHz clock.
pub type Cycle = u64;
/// Index of a port in [`Core::ports`].
pub type PortId = u32;
/// Index of a component (a connection or a model component).
pub type CompId = u32;

/// What a message carries. Addresses are bytes; `tag` follows a trace row
/// through the path for the per-access records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// Translation request for the page at `vpage` (page-aligned).
    TransReq { vpage: u64 },
    /// Translation answer to request `rsp_to`.
    TransRsp { rsp_to: u64, vpage: u64, ppage: u64 },
    /// Read of the line or bytes at `addr`.
    Read { addr: u64, bytes: u32, can_wait: bool, tag: u64 },
    /// Write at `addr`; `full_line` when every byte of its 64 B line is written.
    Write { addr: u64, can_wait: bool, full_line: bool, tag: u64 },
    /// Data returned for read `rsp_to`.
    DataReady { rsp_to: u64 },
    /// Write `rsp_to` is done.
    WriteDone { rsp_to: u64 },
    /// A network flit carrying message `msg` (kept in [`Core::payloads`]).
    Flit { msg: u64 },
}

/// A message between two ports. `id` is unique in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    pub id: u64,
    pub src: PortId,
    pub dst: PortId,
    pub body: Body,
}

/// A bounded first-in first-out buffer (Akita `sim.Buffer`).
#[derive(Clone, Debug)]
pub struct Buffer<T> {
    cap: usize,
    items: VecDeque<T>,
}

impl<T> Buffer<T> {
    pub fn new(cap: usize) -> Self {
        Self { cap, items: VecDeque::with_capacity(cap.min(4096)) }
    }
    pub fn can_push(&self) -> bool {
        self.items.len() < self.cap
    }
    /// Push; the caller checked `can_push` (Akita panics on overflow too).
    pub fn push(&mut self, item: T) {
        assert!(self.items.len() < self.cap, "buffer overflow");
        self.items.push_back(item);
    }
    pub fn pop(&mut self) -> Option<T> {
        self.items.pop_front()
    }
    pub fn peek(&self) -> Option<&T> {
        self.items.front()
    }
    pub fn peek_mut(&mut self) -> Option<&mut T> {
        self.items.front_mut()
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn capacity(&self) -> usize {
        self.cap
    }
    pub fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i)
    }
    pub fn remove(&mut self, i: usize) -> Option<T> {
        self.items.remove(i)
    }
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }
    pub fn clear(&mut self) {
        self.items.clear();
    }
}

/// A port: an incoming and an outgoing buffer, its owner and its connection.
#[derive(Clone, Debug)]
pub struct Port {
    pub owner: CompId,
    pub conn: CompId,
    pub incoming: Buffer<Msg>,
    pub outgoing: Buffer<Msg>,
}

/// A direct connection's state: its ports and where its next scan starts.
#[derive(Clone, Debug, Default)]
struct Conn {
    ports: Vec<PortId>,
    next_port: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Tick(CompId),
    /// A component's own timed event (the ideal memory controller's answers).
    Custom(CompId, u64),
}

/// What the engine hands back to the model: a component to tick, or a
/// component's own event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    Tick(CompId),
    Custom(CompId, u64),
}

/// Engine state shared by every component: time, the event queue, the ports
/// and the connections.
pub struct Core {
    pub now: Cycle,
    queue: BinaryHeap<Reverse<(Cycle, u64, Ev)>>,
    /// The connections' ticks (Akita's secondary queue).
    secondary: BinaryHeap<Reverse<(Cycle, u64, Ev)>>,
    seq: u64,
    /// When set, events of the same cycle run in a seeded pseudo-random
    /// order instead of the order they were scheduled (to measure how much a
    /// count owes to the tie order, as MGPUSim's own spread was measured).
    tie_seed: Option<u64>,
    next_tick: Vec<Option<Cycle>>,
    /// `Some(i)` for a component that is connection `i`.
    conn_of: Vec<Option<usize>>,
    conns: Vec<Conn>,
    pub ports: Vec<Port>,
    next_msg: u64,
    /// Messages in flight through a network, by id, while flits carry them.
    pub payloads: rustc_hash::FxHashMap<u64, Msg>,
    /// Events handled, for the throughput report.
    pub events: u64,
}

impl Default for Core {
    fn default() -> Self {
        Self::new()
    }
}

impl Core {
    pub fn new() -> Self {
        Self {
            now: 0,
            queue: BinaryHeap::new(),
            secondary: BinaryHeap::new(),
            seq: 0,
            tie_seed: None,
            next_tick: Vec::new(),
            conn_of: Vec::new(),
            conns: Vec::new(),
            ports: Vec::new(),
            next_msg: 1,
            payloads: rustc_hash::FxHashMap::default(),
            events: 0,
        }
    }

    /// Break same-cycle ties in a seeded pseudo-random order (`None`: the
    /// order of scheduling).
    pub fn set_tie_seed(&mut self, seed: Option<u64>) {
        self.tie_seed = seed;
    }

    /// Register a model component; returns its id.
    pub fn add_component(&mut self) -> CompId {
        self.next_tick.push(None);
        self.conn_of.push(None);
        (self.next_tick.len() - 1) as CompId
    }

    /// Register a direct connection; returns its id.
    pub fn add_connection(&mut self) -> CompId {
        let id = self.add_component();
        self.conn_of[id as usize] = Some(self.conns.len());
        self.conns.push(Conn::default());
        id
    }

    /// A port of component `owner` with the given buffer sizes, plugged into
    /// `conn`: a direct connection, or a network endpoint (a model component
    /// that moves the port's messages itself, Akita's `endpoint.Comp`).
    pub fn add_port(&mut self, owner: CompId, conn: CompId, in_cap: usize, out_cap: usize) -> PortId {
        let id = self.ports.len() as PortId;
        self.ports.push(Port { owner, conn, incoming: Buffer::new(in_cap), outgoing: Buffer::new(out_cap) });
        if let Some(c) = self.conn_of[conn as usize] {
            self.conns[c].ports.push(id);
        }
        id
    }

    /// A fresh message id.
    pub fn msg_id(&mut self) -> u64 {
        let id = self.next_msg;
        self.next_msg += 1;
        id
    }

    /// A message from `src` to `dst` with a fresh id.
    pub fn msg(&mut self, src: PortId, dst: PortId, body: Body) -> Msg {
        Msg { id: self.msg_id(), src, dst, body }
    }

    fn schedule(&mut self, at: Cycle, ev: Ev) {
        debug_assert!(at >= self.now, "scheduling in the past");
        self.seq += 1;
        // splitmix64's finalizer is a bijection, so keys stay unique.
        let key = match self.tie_seed {
            None => self.seq,
            Some(s) => {
                let mut z = self.seq ^ s.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            }
        };
        let secondary = matches!(ev, Ev::Tick(c) if self.conn_of[c as usize].is_some());
        if secondary {
            self.secondary.push(Reverse((at, key, ev)));
        } else {
            self.queue.push(Reverse((at, key, ev)));
        }
    }

    /// Akita `SerialEngine.nextEvent`: the primary event unless the secondary
    /// one is strictly earlier.
    fn pop_event(&mut self) -> Option<(Cycle, Ev)> {
        let p = self.queue.peek().map(|Reverse((t, _, _))| *t);
        let s = self.secondary.peek().map(|Reverse((t, _, _))| *t);
        let q = match (p, s) {
            (None, None) => return None,
            (Some(_), None) => &mut self.queue,
            (None, Some(_)) => &mut self.secondary,
            (Some(p), Some(s)) => {
                if p <= s {
                    &mut self.queue
                } else {
                    &mut self.secondary
                }
            }
        };
        q.pop().map(|Reverse((t, _, ev))| (t, ev))
    }

    /// A component's own event at `at` (handed back as [`Due::Custom`]).
    pub fn schedule_custom(&mut self, comp: CompId, at: Cycle, token: u64) {
        self.schedule(at, Ev::Custom(comp, token));
    }

    /// Akita `TickNow`: a tick in this cycle unless one is already due now or later.
    pub fn tick_now(&mut self, comp: CompId) {
        let now = self.now;
        if self.next_tick[comp as usize].is_some_and(|t| t >= now) {
            return;
        }
        self.next_tick[comp as usize] = Some(now);
        self.schedule(now, Ev::Tick(comp));
    }

    /// Akita `TickLater`: a tick in the next cycle unless one is already due then or later.
    pub fn tick_later(&mut self, comp: CompId) {
        let t = self.now + 1;
        if self.next_tick[comp as usize].is_some_and(|n| n >= t) {
            return;
        }
        self.next_tick[comp as usize] = Some(t);
        self.schedule(t, Ev::Tick(comp));
    }

    /// The next due event, connections' ticks handled here; `None` when the
    /// queue is empty. Time advances to the event's cycle.
    #[allow(clippy::should_implement_trait)] // not an iterator: each call moves time
    pub fn next(&mut self) -> Option<Due> {
        loop {
            let (t, ev) = self.pop_event()?;
            self.now = t;
            self.events += 1;
            match ev {
                Ev::Tick(c) => {
                    if let Some(i) = self.conn_of[c as usize] {
                        if self.tick_conn(i) {
                            self.tick_later(c);
                        }
                        continue;
                    }
                    return Some(Due::Tick(c));
                }
                Ev::Custom(c, token) => return Some(Due::Custom(c, token)),
            }
        }
    }

    /// Time of the next due event, if any.
    pub fn peek_time(&self) -> Option<Cycle> {
        let p = self.queue.peek().map(|Reverse((t, _, _))| *t);
        let s = self.secondary.peek().map(|Reverse((t, _, _))| *t);
        match (p, s) {
            (Some(p), Some(s)) => Some(p.min(s)),
            (p, s) => p.or(s),
        }
    }

    /// After a model component's tick: a tick that made progress asks for the next cycle.
    pub fn ticked(&mut self, comp: CompId, progress: bool) {
        if progress {
            self.tick_later(comp);
        }
    }

    // ---- ports ----

    pub fn can_send(&self, p: PortId) -> bool {
        self.ports[p as usize].outgoing.can_push()
    }

    /// Akita `Port.Send`: false when the outgoing buffer is full.
    pub fn send(&mut self, p: PortId, msg: Msg) -> bool {
        debug_assert_eq!(msg.src, p, "a port sends only its own messages");
        let port = &mut self.ports[p as usize];
        if !port.outgoing.can_push() {
            return false;
        }
        let was_empty = port.outgoing.is_empty();
        port.outgoing.push(msg);
        if was_empty {
            let conn = port.conn;
            // A direct connection ticks now (`NotifySend` → `TickNow`); an
            // endpoint in the next cycle (its `NotifySend` → `TickLater`).
            if self.conn_of[conn as usize].is_some() {
                self.tick_now(conn);
            } else {
                self.tick_later(conn);
            }
        }
        true
    }

    /// Akita `Port.Deliver`: false when the incoming buffer is full.
    pub fn deliver(&mut self, p: PortId, msg: Msg) -> bool {
        let port = &mut self.ports[p as usize];
        if !port.incoming.can_push() {
            return false;
        }
        let was_empty = port.incoming.is_empty();
        port.incoming.push(msg);
        if was_empty {
            let owner = port.owner;
            self.tick_later(owner);
        }
        true
    }

    pub fn peek_incoming(&self, p: PortId) -> Option<&Msg> {
        self.ports[p as usize].incoming.peek()
    }

    /// Akita `Port.RetrieveIncoming`.
    pub fn retrieve_incoming(&mut self, p: PortId) -> Option<Msg> {
        let port = &mut self.ports[p as usize];
        let msg = port.incoming.pop()?;
        if port.incoming.len() == port.incoming.capacity() - 1 {
            let conn = port.conn;
            if self.conn_of[conn as usize].is_some() {
                self.notify_available(conn, p);
            } else {
                // Endpoint `NotifyAvailable` → `TickLater`.
                self.tick_later(conn);
            }
        }
        Some(msg)
    }

    /// Akita `Port.RetrieveOutgoing`: a port that was full wakes its owner next cycle.
    pub fn retrieve_outgoing(&mut self, p: PortId) -> Option<Msg> {
        let port = &mut self.ports[p as usize];
        let msg = port.outgoing.pop()?;
        if port.outgoing.len() == port.outgoing.capacity() - 1 {
            let owner = port.owner;
            self.tick_later(owner);
        }
        Some(msg)
    }

    /// Akita `DirectConnection.NotifyAvailable`: every other port's owner
    /// ticks in the next cycle, the connection now.
    fn notify_available(&mut self, conn: CompId, freed: PortId) {
        let c = self.conn_of[conn as usize].expect("a port's connection");
        for i in 0..self.conns[c].ports.len() {
            let q = self.conns[c].ports[i];
            if q != freed {
                let owner = self.ports[q as usize].owner;
                self.tick_later(owner);
            }
        }
        self.tick_now(conn);
    }

    /// Akita `directconnection.middleware.Tick`.
    fn tick_conn(&mut self, c: usize) -> bool {
        let n = self.conns[c].ports.len();
        if n == 0 {
            return false;
        }
        let start = self.conns[c].next_port;
        let mut progress = false;
        for i in 0..n {
            let p = self.conns[c].ports[(i + start) % n];
            while let Some(&head) = self.ports[p as usize].outgoing.peek() {
                if !self.deliver(head.dst, head) {
                    break;
                }
                progress = true;
                self.retrieve_outgoing(p);
            }
        }
        self.conns[c].next_port = (start + 1) % n;
        progress
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two components on one connection: a message sent in cycle 10 is in
    /// the receiver's incoming buffer in cycle 10 and the receiver ticks in 11.
    #[test]
    fn a_message_sent_now_is_delivered_now_and_seen_next_cycle() {
        let mut core = Core::new();
        let a = core.add_component();
        let b = core.add_component();
        let conn = core.add_connection();
        let pa = core.add_port(a, conn, 4, 4);
        let pb = core.add_port(b, conn, 4, 4);
        core.schedule_custom(a, 10, 0);
        assert_eq!(core.next(), Some(Due::Custom(a, 0)));
        assert_eq!(core.now, 10);
        let m = core.msg(pa, pb, Body::TransReq { vpage: 0x1000 });
        assert!(core.send(pa, m));
        // The connection's tick runs inside `next`, in cycle 10.
        assert_eq!(core.next(), Some(Due::Tick(b)));
        assert_eq!(core.now, 11);
        assert_eq!(core.retrieve_incoming(pb).map(|m| m.body), Some(Body::TransReq { vpage: 0x1000 }));
    }

    /// A full incoming buffer holds the sender's messages in its outgoing
    /// buffer; the receiver's retrieve frees the head at once and the
    /// connection delivers in the same cycle.
    #[test]
    fn back_pressure_holds_messages_until_the_receiver_takes_one() {
        let mut core = Core::new();
        let a = core.add_component();
        let b = core.add_component();
        let conn = core.add_connection();
        let pa = core.add_port(a, conn, 1, 4);
        let pb = core.add_port(b, conn, 1, 4);
        core.schedule_custom(a, 0, 0);
        core.next();
        for v in 0..3u64 {
            let m = core.msg(pa, pb, Body::TransReq { vpage: v });
            assert!(core.send(pa, m));
        }
        assert_eq!(core.next(), Some(Due::Tick(b)));
        assert_eq!(core.ports[pb as usize].incoming.len(), 1);
        assert_eq!(core.ports[pa as usize].outgoing.len(), 2);
        // b takes one in cycle 1: the connection refills in cycle 1.
        core.retrieve_incoming(pb);
        while core.peek_time() == Some(1) {
            let d = core.next();
            assert!(matches!(d, Some(Due::Tick(_)) | None));
        }
        assert_eq!(core.ports[pb as usize].incoming.len(), 1);
        assert_eq!(core.ports[pa as usize].outgoing.len(), 1);
    }

    /// With a tie seed, the ticks of one cycle run in a seeded order: a
    /// permutation of the scheduling order, the same for the same seed, and
    /// cycles still run in time order.
    #[test]
    fn a_tie_seed_permutes_same_cycle_events_only() {
        let order = |seed: Option<u64>| {
            let mut core = Core::new();
            core.set_tie_seed(seed);
            let comps: Vec<CompId> = (0..8).map(|_| core.add_component()).collect();
            for &c in &comps {
                core.tick_later(c);
            }
            core.schedule_custom(comps[0], 5, 0);
            let mut seen = Vec::new();
            while let Some(d) = core.next() {
                seen.push((core.now, d));
            }
            seen
        };
        let fifo = order(None);
        assert_eq!(fifo.iter().map(|e| e.1).take(8).collect::<Vec<_>>(), (0..8).map(Due::Tick).collect::<Vec<_>>());
        let a = order(Some(1));
        assert_eq!(a, order(Some(1)));
        assert_ne!(a, fifo);
        let mut sorted = a.clone();
        sorted.sort_by_key(|e| (e.0, format!("{:?}", e.1)));
        let mut fifo_sorted = fifo.clone();
        fifo_sorted.sort_by_key(|e| (e.0, format!("{:?}", e.1)));
        assert_eq!(sorted, fifo_sorted, "the same events");
        assert!(a.windows(2).all(|w| w[0].0 <= w[1].0), "time order kept");
        assert_eq!(a.last(), Some(&(5, Due::Custom(0, 0))));
    }

    #[test]
    fn ticks_are_not_scheduled_twice_and_same_cycle_events_run_in_order() {
        let mut core = Core::new();
        let a = core.add_component();
        let b = core.add_component();
        core.tick_later(b);
        core.tick_later(a);
        core.tick_later(b);
        assert_eq!(core.next(), Some(Due::Tick(b)));
        assert_eq!(core.next(), Some(Due::Tick(a)));
        assert_eq!(core.next(), None);
        // A component that ticked in this cycle is not ticked again in it
        // (Akita keeps `nextTickTime` = now), and a second request is dropped.
        core.tick_now(a);
        assert_eq!(core.next(), None);
        let c = core.add_component();
        core.tick_now(c);
        core.tick_now(c);
        assert_eq!(core.next(), Some(Due::Tick(c)));
        assert_eq!(core.next(), None);
    }

    /// The next event handed to the model and its cycle (connection ticks
    /// run inside `next`).
    fn step(core: &mut Core) -> Option<(Cycle, Due)> {
        core.next().map(|d| (core.now, d))
    }

    /// a sends two messages at 0 into b's one-entry buffer: the first is
    /// delivered at 0 (b ticks at 1), the second waits; the connection,
    /// which made progress at 0, ticks at 1 without progress and sleeps. b
    /// takes the first at 5: freeing the full buffer wakes the connection
    /// at once (the second is in b's buffer before a's tick at 6) and a, not
    /// b, next cycle; b's buffer was empty, so the delivery wakes b at 6
    /// too. b takes the second at 10 with nothing behind it: only a ticks,
    /// at 11.
    #[test]
    fn freeing_a_full_buffer_wakes_the_connection_now_and_the_other_ports_next_cycle() {
        let mut core = Core::new();
        let a = core.add_component();
        let b = core.add_component();
        let conn = core.add_connection();
        let pa = core.add_port(a, conn, 4, 4);
        let pb = core.add_port(b, conn, 1, 4);
        core.schedule_custom(a, 0, 0);
        core.schedule_custom(b, 5, 0);
        core.schedule_custom(b, 10, 0);
        assert_eq!(step(&mut core), Some((0, Due::Custom(a, 0))));
        for v in [1, 2] {
            let m = core.msg(pa, pb, Body::TransReq { vpage: v });
            assert!(core.send(pa, m));
        }
        assert_eq!(step(&mut core), Some((1, Due::Tick(b))));
        assert_eq!(step(&mut core), Some((5, Due::Custom(b, 0))));
        assert_eq!(core.retrieve_incoming(pb).map(|m| m.body), Some(Body::TransReq { vpage: 1 }));
        assert_eq!(step(&mut core), Some((6, Due::Tick(a))));
        assert_eq!(core.ports[pb as usize].incoming.peek().map(|m| m.body), Some(Body::TransReq { vpage: 2 }), "delivered in cycle 5");
        assert_eq!(step(&mut core), Some((6, Due::Tick(b))));
        assert_eq!(step(&mut core), Some((10, Due::Custom(b, 0))));
        assert!(core.retrieve_incoming(pb).is_some());
        assert_eq!(step(&mut core), Some((11, Due::Tick(a))));
        assert_eq!(step(&mut core), None);
    }

    /// A port plugged into an endpoint (a component, not a direct
    /// connection): taking from its full incoming buffer in cycle 5 wakes
    /// the endpoint in cycle 6 (`NotifyAvailable` → `TickLater`); taking
    /// from a buffer that was not full wakes nothing.
    #[test]
    fn freeing_a_full_buffer_on_an_endpoint_wakes_it_next_cycle() {
        let mut core = Core::new();
        let dev = core.add_component();
        let ep = core.add_component();
        let p = core.add_port(dev, ep, 2, 2);
        for v in [1, 2] {
            let m = core.msg(PortId::MAX, p, Body::TransReq { vpage: v });
            assert!(core.deliver(p, m));
        }
        assert_eq!(core.next(), Some(Due::Tick(dev)));
        core.schedule_custom(dev, 5, 0);
        assert_eq!(core.next(), Some(Due::Custom(dev, 0)));
        assert!(core.retrieve_incoming(p).is_some());
        assert_eq!(step(&mut core), Some((6, Due::Tick(ep))));
        assert_eq!(step(&mut core), None);
        core.schedule_custom(dev, 8, 0);
        assert_eq!(core.next(), Some(Due::Custom(dev, 0)));
        assert!(core.retrieve_incoming(p).is_some());
        assert_eq!(core.next(), None);
    }

    /// The connection starts its scan one port further each tick: a and b
    /// each queue three messages for c at 0; c's buffer holds one and c
    /// takes one a tick. x1 goes at 0 (scan from a), then each tick's scan
    /// starts one port further: y1 (from b), x2 (from c, which has nothing,
    /// then a), x3 (a), y2 (b), y3 (c, a, then b); c takes each a cycle
    /// after its delivery. Without the rotation a's three would go first.
    #[test]
    fn the_connection_scan_starts_one_port_further_each_tick() {
        let mut core = Core::new();
        let a = core.add_component();
        let b = core.add_component();
        let c = core.add_component();
        let conn = core.add_connection();
        let pa = core.add_port(a, conn, 4, 4);
        let pb = core.add_port(b, conn, 4, 4);
        let pc = core.add_port(c, conn, 1, 4);
        core.schedule_custom(a, 0, 0);
        assert_eq!(core.next(), Some(Due::Custom(a, 0)));
        for v in 1..=3u64 {
            let (x, y) = (core.msg(pa, pc, Body::TransReq { vpage: v }), core.msg(pb, pc, Body::TransReq { vpage: 100 + v }));
            assert!(core.send(pa, x) && core.send(pb, y));
        }
        let mut got = Vec::new();
        while let Some(d) = core.next() {
            if d == Due::Tick(c) {
                if let Some(m) = core.retrieve_incoming(pc) {
                    let Body::TransReq { vpage } = m.body else { panic!() };
                    got.push((core.now, vpage));
                }
            }
        }
        assert_eq!(got, vec![(1, 1), (2, 101), (3, 2), (4, 3), (5, 102), (6, 103)]);
    }
}
