//! Akita v4.9.0's PCIe network between the GPU and the CPU side, as MGPUSim
//! v4.2.0 builds it for one GPU (amd/samples/runner/timingconfig/builder.go):
//! `pcie.Connector` at version 4 × 16, switch latency 140; a root complex
//! (switch 0) with the CPU-side ports behind endpoint 0, one switch (switch 1)
//! under it, and the GPU's ports behind endpoint 1. Files followed:
//! noc/networking/pcie/pcie.go, noc/networking/networkconnector/connector.go,
//! noc/networking/switching/endpoint/endpoint.go,
//! noc/networking/switching/switches/switch.go,
//! noc/networking/arbitration/xbar.go.
//!
//! What is kept: endpoints and switches are ordinary (primary) ticking
//! components, so whether an endpoint picks up a message in the cycle it was
//! sent depends on whether it ticks after its sender in that cycle; each
//! switch port is a 140-stage pipeline one flit wide with one-entry route,
//! forward and send-out buffers; the crossbar arbiter starts one port further
//! each tick. Every message on this path (translation requests and answers,
//! `TrafficBytes` 0) is one flit (the flit size, 34 bytes at 16 GiB/s × 16
//! lanes and 1 GHz, never matters), so a flit carries its message whole.

use super::core::{Body, Buffer, CompId, Core, Msg, PortId};
use super::pipeline::Pipeline;
use super::Component;
use std::collections::VecDeque;

/// Akita `endpoint.Comp` with one input and one output channel. Device ports
/// are plugged into it (their `conn` is this component); its network port is
/// on a direct connection to a switch port.
pub struct Endpoint {
    pub network: PortId,
    pub devices: Vec<PortId>,
    /// The switch port flits are sent to (`DefaultSwitchDst`).
    pub switch_dst: PortId,
    msg_out: VecDeque<Msg>,
    flits_to_send: VecDeque<Msg>,
    /// Messages whose flits have all arrived, in arrival order (`assemblingMsgs`:
    /// with one flit a message, each is complete when received).
    assembling: VecDeque<Msg>,
    assembled: VecDeque<Msg>,
}

impl Endpoint {
    /// The endpoint `id` with its network port on connection `link`
    /// (MGPUSim: incoming and outgoing buffers of 16).
    pub fn new(core: &mut Core, id: CompId, link: CompId) -> Self {
        let network = core.add_port(id, link, 16, 16);
        Self {
            network,
            devices: Vec::new(),
            switch_dst: PortId::MAX,
            msg_out: VecDeque::new(),
            flits_to_send: VecDeque::new(),
            assembling: VecDeque::new(),
            assembled: VecDeque::new(),
        }
    }

    /// `sendFlitOut`: one flit a cycle; when the last is sent, every device
    /// port's owner is told the network is free again.
    fn send_flit_out(&mut self, core: &mut Core) -> bool {
        let Some(&flit) = self.flits_to_send.front() else { return false };
        if !core.send(self.network, flit) {
            return false;
        }
        self.flits_to_send.pop_front();
        if self.flits_to_send.is_empty() {
            for &p in &self.devices {
                let owner = core.ports[p as usize].owner;
                core.tick_later(owner);
            }
        }
        true
    }

    /// `prepareMsg`: one message from each device port, in port order.
    fn prepare_msg(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for i in 0..self.devices.len() {
            let p = self.devices[i];
            if let Some(m) = core.retrieve_outgoing(p) {
                self.msg_out.push_back(m);
                progress = true;
            }
        }
        progress
    }

    /// `prepareFlits`: every waiting message becomes its one flit.
    fn prepare_flits(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        while let Some(m) = self.msg_out.pop_front() {
            core.payloads.insert(m.id, m);
            let flit = core.msg(self.network, self.switch_dst, Body::Flit { msg: m.id });
            self.flits_to_send.push_back(flit);
            progress = true;
        }
        progress
    }

    /// `tryDeliver`: assembled messages into their device ports, in order,
    /// until one does not fit.
    fn try_deliver(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        while let Some(&m) = self.assembled.front() {
            debug_assert!(self.devices.contains(&m.dst), "no device port for {m:?}");
            if !core.deliver(m.dst, m) {
                return progress;
            }
            self.assembled.pop_front();
            progress = true;
        }
        progress
    }

    /// `assemble`.
    fn assemble(&mut self) -> bool {
        let progress = !self.assembling.is_empty();
        self.assembled.extend(self.assembling.drain(..));
        progress
    }

    /// `recv`: one flit a cycle.
    fn recv(&mut self, core: &mut Core) -> bool {
        let Some(&flit) = core.peek_incoming(self.network) else { return false };
        let Body::Flit { msg } = flit.body else { panic!("an endpoint receives flits, not {flit:?}") };
        let m = core.payloads.remove(&msg).expect("a flit's message");
        self.assembling.push_back(m);
        core.retrieve_incoming(self.network);
        true
    }
}

impl Component for Endpoint {
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = self.send_flit_out(core);
        progress |= self.prepare_msg(core);
        progress |= self.prepare_flits(core);
        progress |= self.try_deliver(core);
        progress |= self.assemble();
        progress |= self.recv(core);
        progress
    }
}

/// One switch port and what stands behind it (`portComplex`), with one input
/// and one output channel.
struct PortComplex {
    local: PortId,
    remote: PortId,
    pipeline: Pipeline<Msg>,
    route_buf: Buffer<Msg>,
    /// Routed flits with the index of their output port.
    forward_buf: Buffer<(Msg, usize)>,
    send_out_buf: Buffer<Msg>,
}

/// Akita `switches.Comp` with the crossbar arbiter.
pub struct Switch {
    ports: Vec<PortComplex>,
    /// Final destination port → index of the output port (`routing.Table`).
    routes: rustc_hash::FxHashMap<PortId, usize>,
    next_arb: usize,
}

impl Switch {
    pub fn new() -> Self {
        Self { ports: Vec::new(), routes: rustc_hash::FxHashMap::default(), next_arb: 0 }
    }

    /// `SwitchPortAdder.AddPort`: a port of the switch `id` on connection
    /// `link` facing `remote`, with a `latency_cycles`-stage pipeline (MGPUSim:
    /// buffers of 16, latency 140). Returns the port and its index.
    pub fn add_port(&mut self, core: &mut Core, id: CompId, link: CompId, latency_cycles: usize) -> (PortId, usize) {
        let local = core.add_port(id, link, 16, 16);
        self.ports.push(PortComplex {
            local,
            remote: PortId::MAX,
            pipeline: Pipeline::new(1, latency_cycles),
            route_buf: Buffer::new(1),
            forward_buf: Buffer::new(1),
            send_out_buf: Buffer::new(1),
        });
        (local, self.ports.len() - 1)
    }

    /// The port at `index` faces `remote`.
    pub fn set_remote(&mut self, index: usize, remote: PortId) {
        self.ports[index].remote = remote;
    }

    /// Messages for `dst` leave through port `index`.
    pub fn route(&mut self, dst: PortId, index: usize) {
        self.routes.insert(dst, index);
    }

    /// `sendOut`.
    fn send_out(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for pc in &mut self.ports {
            let Some(&flit) = pc.send_out_buf.peek() else { continue };
            let flit = Msg { src: pc.local, dst: pc.remote, ..flit };
            if core.send(pc.local, flit) {
                pc.send_out_buf.pop();
                progress = true;
            }
        }
        progress
    }

    /// `forward` with `xbarArbiter.Arbitrate`: from one port further each
    /// tick, each forward buffer whose head's output no earlier buffer took.
    fn forward(&mut self) -> bool {
        let n = self.ports.len();
        let start = self.next_arb;
        let mut selected = Vec::new();
        let mut taken = vec![false; n];
        for i in 0..n {
            let cur = (start + i) % n;
            let Some(&(_, out)) = self.ports[cur].forward_buf.peek() else { continue };
            if taken[out] {
                continue;
            }
            selected.push(cur);
            taken[out] = true;
        }
        self.next_arb = (self.next_arb + 1) % n.max(1);
        let mut progress = false;
        for cur in selected {
            while let Some(&(flit, out)) = self.ports[cur].forward_buf.peek() {
                if !self.ports[out].send_out_buf.can_push() {
                    break;
                }
                self.ports[out].send_out_buf.push(flit);
                self.ports[cur].forward_buf.pop();
                progress = true;
            }
        }
        progress
    }

    /// `route`: the flit's output port from its message's destination.
    fn route_flits(&mut self, core: &Core) -> bool {
        let mut progress = false;
        for i in 0..self.ports.len() {
            let Some(&flit) = self.ports[i].route_buf.peek() else { continue };
            if !self.ports[i].forward_buf.can_push() {
                continue;
            }
            let Body::Flit { msg } = flit.body else { panic!("a switch forwards flits, not {flit:?}") };
            let dst = core.payloads[&msg].dst;
            let out = *self.routes.get(&dst).unwrap_or_else(|| panic!("no output port for {dst}"));
            self.ports[i].route_buf.pop();
            self.ports[i].forward_buf.push((flit, out));
            progress = true;
        }
        progress
    }

    /// `movePipeline`.
    fn move_pipeline(&mut self) -> bool {
        let mut progress = false;
        for pc in &mut self.ports {
            progress |= pc.pipeline.tick(&mut pc.route_buf);
        }
        progress
    }

    /// `startProcessing`: one flit a port into its pipeline.
    fn start_processing(&mut self, core: &mut Core) -> bool {
        let mut progress = false;
        for pc in &mut self.ports {
            let Some(&flit) = core.peek_incoming(pc.local) else { continue };
            if !pc.pipeline.can_accept(&pc.route_buf) {
                continue;
            }
            pc.pipeline.accept(flit, &mut pc.route_buf);
            core.retrieve_incoming(pc.local);
            progress = true;
        }
        progress
    }
}

/// The network of one GPU, built as `pcie.Connector` builds it.
pub struct Network {
    /// Endpoint 0 (CPU side) and 1 (GPU side).
    pub endpoints: Vec<Endpoint>,
    /// Switch 0 (the root complex) and switch 1.
    pub switches: Vec<Switch>,
}

impl Network {
    /// Switch latency (`WithSwitchLatency(140)`, PCIe 4 in MGPUSim's builder).
    pub const SWITCH_LATENCY_CYCLES: usize = 140;

    /// `AddRootComplex(cpu)`, `AddSwitch(root)`, `PlugInDevice(switch 1, gpu)`:
    /// `ep_ids` and `sw_ids` are the registered components of endpoints 0 and 1
    /// and switches 0 and 1; `links` three direct connections, used in the
    /// order the connector makes them (endpoint 0 to switch 0, switch 0 to
    /// switch 1, endpoint 1 to switch 1). The device ports were plugged into
    /// their endpoint (their `conn` is the endpoint's id).
    pub fn build(
        core: &mut Core,
        ep_ids: [CompId; 2],
        sw_ids: [CompId; 2],
        links: [CompId; 3],
        cpu: Vec<PortId>,
        gpu: Vec<PortId>,
    ) -> Self {
        let lat = Self::SWITCH_LATENCY_CYCLES;
        let (mut sw0, mut sw1) = (Switch::new(), Switch::new());
        let mut ep0 = Endpoint::new(core, ep_ids[0], links[0]);
        let (s0p0, i00) = sw0.add_port(core, sw_ids[0], links[0], lat);
        let (s0p1, i01) = sw0.add_port(core, sw_ids[0], links[1], lat);
        let (s1p0, i10) = sw1.add_port(core, sw_ids[1], links[1], lat);
        let mut ep1 = Endpoint::new(core, ep_ids[1], links[2]);
        let (s1p1, i11) = sw1.add_port(core, sw_ids[1], links[2], lat);
        sw0.set_remote(i00, ep0.network);
        sw0.set_remote(i01, s1p0);
        sw1.set_remote(i10, s0p1);
        sw1.set_remote(i11, ep1.network);
        ep0.switch_dst = s0p0;
        ep1.switch_dst = s1p1;
        for &p in &cpu {
            sw0.route(p, i00);
            sw1.route(p, i10);
        }
        for &p in &gpu {
            sw0.route(p, i01);
            sw1.route(p, i11);
        }
        ep0.devices = cpu;
        ep1.devices = gpu;
        Self { endpoints: vec![ep0, ep1], switches: vec![sw0, sw1] }
    }
}

impl Default for Switch {
    fn default() -> Self {
        Self::new()
    }
}

impl Component for Switch {
    fn tick(&mut self, core: &mut Core) -> bool {
        let mut progress = self.send_out(core);
        progress |= self.forward();
        progress |= self.route_flits(core);
        progress |= self.move_pipeline();
        progress |= self.start_processing(core);
        progress
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cycle::core::Due;
    use crate::cycle::machine::Idle;
    use crate::cycle::mmu::{Mmu, MmuParams};
    use rustc_hash::FxHashMap;

    /// The generator of scripts/akita-crosscheck/pcie/main.go: each tick it
    /// takes every answer, then sends every due request while its port
    /// accepts; a timed event at each request cycle wakes it (`TickNow`).
    struct Gen {
        id: CompId,
        port: PortId,
        mmu: PortId,
        reqs: Vec<(u64, u64)>,
        next: usize,
        sent: FxHashMap<u64, usize>,
        send: Vec<u64>,
        seen: Vec<u64>,
    }

    impl Component for Gen {
        fn tick(&mut self, core: &mut Core) -> bool {
            let mut progress = false;
            while let Some(m) = core.retrieve_incoming(self.port) {
                let Body::TransRsp { rsp_to, .. } = m.body else { panic!("answers only") };
                self.seen[self.sent[&rsp_to]] = core.now;
                progress = true;
            }
            while let Some(&(at, k)) = self.reqs.get(self.next) {
                if at > core.now {
                    break;
                }
                let m = core.msg(self.port, self.mmu, Body::TransReq { vpage: 0x1000 * k });
                if !core.send(self.port, m) {
                    break;
                }
                self.sent.insert(m.id, self.next);
                self.send[self.next] = core.now;
                self.next += 1;
                progress = true;
            }
            progress
        }

        fn on_event(&mut self, core: &mut Core, _token: u64) {
            core.tick_now(self.id);
        }
    }

    /// Run the Go program's scenario: (send cycles, answer cycles).
    fn run(reqs: Vec<(u64, u64)>) -> (Vec<u64>, Vec<u64>) {
        let mut core = Core::new();
        // Components: 0 idle, 1 generator, 2 MMU, 3-4 endpoints, 5-6 switches.
        let ids: Vec<CompId> = (0..7).map(|_| core.add_component()).collect();
        let links = [core.add_connection(), core.add_connection(), core.add_connection()];
        let (idle, gen_id, mmu_id) = (ids[0], ids[1], ids[2]);
        let (ep_ids, sw_ids) = ([ids[3], ids[4]], [ids[5], ids[6]]);
        let mut mmu = Mmu::new(&mut core, mmu_id, ep_ids[0], &MmuParams::r9nano());
        let mut cpu: Vec<PortId> = (0..2).map(|_| core.add_port(idle, ep_ids[0], 4, 4)).collect();
        cpu.push(core.add_port(mmu_id, ep_ids[0], 1, 1));
        cpu.push(mmu.top);
        let mut gpu: Vec<PortId> = (0..2).map(|_| core.add_port(idle, ep_ids[1], 4, 4)).collect();
        let port = core.add_port(gen_id, ep_ids[1], 64, 64);
        gpu.push(port);
        let mut net = Network::build(&mut core, ep_ids, sw_ids, links, cpu, gpu);
        let n = reqs.len();
        let mut gen = Gen { id: gen_id, port, mmu: mmu.top, reqs, next: 0, sent: FxHashMap::default(), send: vec![0; n], seen: vec![0; n] };
        let mut last = None;
        for &(at, _) in &gen.reqs {
            if last != Some(at) {
                core.schedule_custom(gen_id, at, 0);
                last = Some(at);
            }
        }
        let mut idle_c = Idle;
        while let Some(due) = core.next() {
            let c = match due {
                Due::Tick(c) | Due::Custom(c, _) => c,
            };
            let comp: &mut dyn Component = match c {
                0 => &mut idle_c,
                1 => &mut gen,
                2 => &mut mmu,
                3 | 4 => &mut net.endpoints[c as usize - 3],
                _ => &mut net.switches[c as usize - 5],
            };
            match due {
                Due::Tick(_) => {
                    let p = comp.tick(&mut core);
                    core.ticked(c, p);
                }
                Due::Custom(_, t) => comp.on_event(&mut core, t),
            }
        }
        (gen.send, gen.seen)
    }

    fn digest(v: &[u64]) -> u64 {
        v.iter().enumerate().map(|(i, &c)| (i as u64 + 1) * c).sum()
    }

    /// One request: out at 10, taken by the MMU at 304 (the leg of 294:
    /// endpoint at 11, flit out at 12, 144 cycles a switch, endpoint 0 at
    /// 300-302, delivered at 303), answered 101 cycles later, back at 699.
    /// The cycles are those the Go program prints for Akita's network.
    #[test]
    fn one_request_crosses_the_network_as_in_akita() {
        let (send, seen) = run(vec![(10, 1)]);
        assert_eq!((send, seen), (vec![10], vec![699]));
    }

    /// Scripted streams against scripts/akita-crosscheck/pcie (AKITA_TIE=fifo):
    /// the sums over requests of (i + 1) × cycle of the sends and the answers.
    #[test]
    fn scripted_streams_match_akita_cycle_for_cycle() {
        let train: Vec<(u64, u64)> = (0..200).map(|i| (10 + 3 * i, i + 1)).collect();
        let (send, seen) = run(train);
        assert_eq!(&seen[..5], &[698, 700, 704, 706, 710]);
        assert_eq!((digest(&send), digest(&seen)), (8_200_800, 30_377_288));

        let burst: Vec<(u64, u64)> = (0..300).map(|i| (10, i + 1)).collect();
        let (send, seen) = run(burst);
        assert_eq!(&seen[..5], &[698, 700, 701, 702, 703]);
        assert_eq!((digest(&send), digest(&seen)), (6_693_635, 86_577_032));

        let mut random = Vec::new();
        let (mut state, mut t) = (1u64, 10u64);
        for i in 0..2000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            t += state % 21;
            random.push((t, i % 4096 + 1));
        }
        let (send, seen) = run(random);
        assert_eq!((digest(&send), digest(&seen)), (26_922_882_368, 28_300_339_898));
    }
}
