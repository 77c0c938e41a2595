//! Test endpoints for the components' unit tests: a port that sends
//! messages at given cycles, records what reaches it, and (optionally)
//! answers each message after a delay it chooses.

use super::core::{Body, CompId, Core, Cycle, Due, Msg, PortId};

/// How an endpoint answers a message it took: `(delay, body)`, or `None`
/// to keep it.
pub type Reply = Box<dyn FnMut(&Msg) -> Option<(u64, Body)>>;

/// A component with one port on `conn`.
pub struct Endpoint {
    pub id: CompId,
    pub port: PortId,
    /// Messages waiting for their send event (indexed by the event's token).
    pending: Vec<Msg>,
    /// (cycle it was taken, message) for everything that reached the port.
    pub got: Vec<(Cycle, Msg)>,
    reply: Option<Reply>,
}

impl Endpoint {
    pub fn new(core: &mut Core, conn: CompId, cap: usize) -> Self {
        let id = core.add_component();
        let port = core.add_port(id, conn, cap, cap);
        Self { id, port, pending: Vec::new(), got: Vec::new(), reply: None }
    }

    /// An endpoint that answers with `reply`.
    pub fn answering(core: &mut Core, conn: CompId, cap: usize, reply: Reply) -> Self {
        Self { reply: Some(reply), ..Self::new(core, conn, cap) }
    }

    /// Send `body` to `dst` in cycle `at`; returns the message's id.
    pub fn send_at(&mut self, core: &mut Core, at: Cycle, dst: PortId, body: Body) -> u64 {
        let m = core.msg(self.port, dst, body);
        core.schedule_custom(self.id, at, self.pending.len() as u64);
        self.pending.push(m);
        m.id
    }

    /// Handle `d` if it is this endpoint's; false otherwise.
    pub fn handle(&mut self, core: &mut Core, d: Due) -> bool {
        match d {
            Due::Custom(c, token) if c == self.id => {
                let m = self.pending[token as usize];
                assert!(core.send(self.port, m), "the test endpoint's port is full");
                true
            }
            Due::Tick(c) if c == self.id => {
                while let Some(m) = core.retrieve_incoming(self.port) {
                    self.got.push((core.now, m));
                    if let Some((delay, body)) = self.reply.as_mut().and_then(|r| r(&m)) {
                        self.send_at(core, core.now + delay, m.src, body);
                    }
                }
                true
            }
            _ => false,
        }
    }

    /// (cycle, vpage, ppage) of each translation answer taken.
    pub fn translations(&self) -> Vec<(Cycle, u64, u64)> {
        self.got
            .iter()
            .filter_map(|&(t, m)| match m.body {
                Body::TransRsp { vpage, ppage, .. } => Some((t, vpage, ppage)),
                _ => None,
            })
            .collect()
    }
}
