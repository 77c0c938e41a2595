//! Multi-GPU topology: which GPU runs which CTAs, and the GPU-to-GPU fabric
//! (a switch with one port per GPU, a tree of switches under the root complex,
//! or a dedicated link per pair) over which remote accesses and page migrations
//! travel.

use crate::mem::Timeline;
use crate::sim::Ps;
use serde::{Deserialize, Serialize};

/// How a kernel's CTAs are spread over the GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CtaPlacement {
    /// Contiguous blocks, an equal share per GPU (MGPUSim's multi-GPU driver;
    /// the seed's "greedy" scheduling keeps neighbouring CTAs on one GPU).
    #[default]
    Greedy,
    /// CTA i on GPU i mod gpus.
    RoundRobin,
}

/// How GPUs reach each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PeerTopology {
    /// One port per GPU and direction into a switch (PCIe): all peer traffic of a GPU shares its ports.
    #[default]
    Switch,
    /// A dedicated link per ordered pair of GPUs (NVLink / xGMI all-to-all).
    Direct,
    /// PCIe switches of `multi.gpus_per_switch` GPUs each under the root complex (MGPUSim v4.2.0's
    /// platform: a new switch for every second GPU): a GPU's port into its switch as in `Switch`, and
    /// traffic between GPUs of different switches also crosses both switches' upstream ports and
    /// two more switches (the root complex and the far switch).
    Tree,
}

leaf!(CtaPlacement, PeerTopology);

/// The CTAs GPU `g` of `n` runs out of `total`: CTA ids `first + i * step` for `i < count`.
pub fn cta_share(p: CtaPlacement, g: u64, n: u64, total: u64) -> (u64, u64, u64) {
    match p {
        CtaPlacement::Greedy => {
            let (lo, hi) = (total * g / n, total * (g + 1) / n);
            (lo, 1, hi - lo)
        }
        CtaPlacement::RoundRobin => (g, n, if total > g { (total - g).div_ceil(n) } else { 0 }),
    }
}

/// Bandwidth of the GPU-to-GPU fabric: per-direction timelines of ports (switch, tree) or links (direct).
#[derive(Debug, Clone)]
pub struct Fabric {
    n: usize,
    topology: PeerTopology,
    /// GPUs per switch (GPU g on switch g / per_switch; all of them under one switch).
    per_switch: usize,
    /// Tree: the extra one-way latency between GPUs of different switches (two more switches).
    cross_latency: Ps,
    /// Switch and tree: `out[g]` then `in[g]` per GPU (2n), then `up[s]`, `down[s]` per switch's
    /// upstream port; direct: one per ordered pair (n*n).
    lanes: Vec<Timeline>,
}

impl Fabric {
    /// `per_switch` and `hop` (one switch's latency) are read by the tree only; a single switch is
    /// the tree's one-switch case (no traffic crosses switches, its uplink lanes stay unused).
    pub fn new(n: usize, topology: PeerTopology, gbps: f64, unit_bytes: u64, per_switch: usize, hop: Ps) -> Fabric {
        let per_switch = if topology == PeerTopology::Switch { n.max(1) } else { per_switch.max(1) };
        let lanes = match topology {
            PeerTopology::Switch | PeerTopology::Tree => 2 * n + 2 * n.div_ceil(per_switch),
            PeerTopology::Direct => n * n,
        };
        let cross_latency = if topology == PeerTopology::Tree { 2 * hop } else { 0 };
        Fabric { n, topology, per_switch, cross_latency, lanes: (0..lanes).map(|_| Timeline::new(gbps, unit_bytes)).collect() }
    }

    /// Tree: the switch GPU `g` hangs from.
    fn switch_of(&self, g: usize) -> usize {
        g / self.per_switch
    }

    /// The one-way latency GPU `src` to GPU `dst` adds to the peer latency: in a tree, two more
    /// switches (the root complex and the far switch) between GPUs of different switches.
    pub fn extra_latency(&self, src: usize, dst: usize) -> Ps {
        // Zero but in a tree: one switch has no crossings, direct links no switches.
        if self.switch_of(src) != self.switch_of(dst) {
            self.cross_latency
        } else {
            0
        }
    }

    /// Move `bytes` from GPU `src` to GPU `dst`, entering the fabric at `t`;
    /// returns when the last byte has left it (no flight latency).
    pub fn transfer(&mut self, src: usize, dst: usize, bytes: u64, t: Ps, now: Ps) -> Ps {
        let now = now.min(t);
        match self.topology {
            PeerTopology::Switch | PeerTopology::Tree => {
                let a = self.lanes[2 * src].reserve(t, bytes, now);
                let b = self.lanes[2 * dst + 1].reserve(t, bytes, now);
                let (s, d) = (self.switch_of(src), self.switch_of(dst));
                if s == d {
                    return a.max(b);
                }
                // Up from the near switch to the root complex, down into the far one.
                let base = 2 * self.n;
                let up = self.lanes[base + 2 * s].reserve(t, bytes, now);
                let down = self.lanes[base + 2 * d + 1].reserve(t, bytes, now);
                a.max(b).max(up).max(down)
            }
            PeerTopology::Direct => self.lanes[src * self.n + dst].reserve(t, bytes, now),
        }
    }

    /// Carry `bytes` from the host into GPU `dst` over its switch port (a PCIe switch's
    /// downstream port: the GPU's one link, which its peer traffic uses too) and, in a tree,
    /// its switch's upstream port from the root complex, entering at `t`; returns when the
    /// last byte is through, or None for direct links (NVLink/xGMI peer links are not the
    /// GPU's PCIe link).
    pub fn host_into(&mut self, dst: usize, bytes: u64, t: Ps, now: Ps) -> Option<Ps> {
        let now = now.min(t);
        match self.topology {
            PeerTopology::Switch => Some(self.lanes[2 * dst + 1].reserve(t, bytes, now)),
            PeerTopology::Tree => {
                let port = self.lanes[2 * dst + 1].reserve(t, bytes, now);
                let lane = 2 * self.n + 2 * self.switch_of(dst) + 1;
                let down = self.lanes[lane].reserve(t, bytes, now);
                Some(port.max(down))
            }
            PeerTopology::Direct => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_gives_contiguous_equal_blocks() {
        // 10 CTAs on 4 GPUs: 2, 3, 2, 3 (floor of the running share), contiguous, covering all.
        let shares: Vec<_> = (0..4).map(|g| cta_share(CtaPlacement::Greedy, g, 4, 10)).collect();
        assert_eq!(shares, vec![(0, 1, 2), (2, 1, 3), (5, 1, 2), (7, 1, 3)]);
        // One GPU runs everything, in order.
        assert_eq!(cta_share(CtaPlacement::Greedy, 0, 1, 7), (0, 1, 7));
    }

    #[test]
    fn round_robin_interleaves() {
        let shares: Vec<_> = (0..4).map(|g| cta_share(CtaPlacement::RoundRobin, g, 4, 10)).collect();
        assert_eq!(shares, vec![(0, 4, 3), (1, 4, 3), (2, 4, 2), (3, 4, 2)]);
        // More GPUs than CTAs: the last ones get none.
        assert_eq!(cta_share(CtaPlacement::RoundRobin, 5, 8, 3), (5, 8, 0));
    }

    #[test]
    fn every_cta_runs_exactly_once() {
        for p in [CtaPlacement::Greedy, CtaPlacement::RoundRobin] {
            for n in [1u64, 2, 3, 4, 16, 32] {
                for total in [0u64, 1, 5, 64, 1000] {
                    let mut seen = vec![0u32; total as usize];
                    for g in 0..n {
                        let (first, step, count) = cta_share(p, g, n, total);
                        for i in 0..count {
                            seen[(first + i * step) as usize] += 1;
                        }
                    }
                    assert!(seen.iter().all(|&c| c == 1), "{p:?} n={n} total={total}");
                }
            }
        }
    }

    #[test]
    fn switch_ports_are_shared_direct_links_are_not() {
        // 1 GB/s = 1 byte per ns: 1000 bytes take 1 µs.
        let mut sw = Fabric::new(3, PeerTopology::Switch, 1.0, 1000, 2, 0);
        let a = sw.transfer(0, 1, 1000, 0, 0);
        let b = sw.transfer(2, 1, 1000, 0, 0); // GPU 1's input port is busy with the first
        assert!(b >= a + 900_000, "{a} {b}");
        let mut d = Fabric::new(3, PeerTopology::Direct, 1.0, 1000, 2, 0);
        let a = d.transfer(0, 1, 1000, 0, 0);
        let b = d.transfer(2, 1, 1000, 0, 0); // its own link
        assert!(b <= a + 100_000, "{a} {b}");
    }

    #[test]
    fn a_gpus_sends_share_its_output_port_on_a_switch_not_on_direct_links() {
        // 1 GB/s: 1000 bytes take 1 µs. GPU 0 sends to GPUs 1 and 2 at once: through a switch both
        // leave by GPU 0's one output port, the second after the first.
        let mut sw = Fabric::new(3, PeerTopology::Switch, 1.0, 1000, 2, 0);
        let a = sw.transfer(0, 1, 1000, 0, 0);
        let b = sw.transfer(0, 2, 1000, 0, 0);
        assert!(b >= a + 900_000, "{a} {b}");
        // A port per direction: GPU 1 sends while it receives.
        let c = sw.transfer(1, 0, 1000, 0, 0);
        assert!(c <= 1_100_000, "{c}");
        // Direct: a link per ordered pair, so GPU 0's two sends run side by side.
        let mut d = Fabric::new(3, PeerTopology::Direct, 1.0, 1000, 2, 0);
        let a = d.transfer(0, 1, 1000, 0, 0);
        let b = d.transfer(0, 2, 1000, 0, 0);
        assert!(b <= a + 100_000, "{a} {b}");
    }

    #[test]
    fn host_dma_shares_a_switch_port_with_peer_traffic() {
        // 1 GB/s: 1000 bytes take 1 µs. A peer transfer into GPU 1, then host data into it at
        // the same time: the second waits for the port; GPU 2's port is free.
        let mut sw = Fabric::new(3, PeerTopology::Switch, 1.0, 1000, 2, 0);
        let a = sw.transfer(0, 1, 1000, 0, 0);
        let h = sw.host_into(1, 1000, 0, 0).expect("a switch port");
        assert!(h >= a + 900_000, "{a} {h}");
        let free = sw.host_into(2, 1000, 0, 0).expect("a switch port");
        assert!(free <= 1_100_000, "{free}");
        // And a peer transfer after host data waits likewise.
        let b = sw.transfer(2, 1, 1000, 0, 0);
        assert!(b >= h + 900_000, "{h} {b}");
        // Direct links are not the GPU's PCIe link.
        assert_eq!(Fabric::new(3, PeerTopology::Direct, 1.0, 1000, 2, 0).host_into(1, 1000, 0, 0), None);
    }

    #[test]
    fn a_tree_shares_each_switch_uplink_between_its_gpus() {
        // 4 GPUs, 2 per switch, 1 GB/s: 1000 bytes take 1 µs; a switch traversal 140 ns.
        let mut t = Fabric::new(4, PeerTopology::Tree, 1.0, 1000, 2, 140_000);
        // GPUs 0 and 1 share switch 0: no extra latency, and their transfer leaves the uplinks free.
        assert_eq!(t.extra_latency(0, 1), 0);
        assert_eq!(t.extra_latency(1, 2), 280_000);
        let a = t.transfer(0, 1, 1000, 0, 0);
        assert!(a <= 1_100_000, "{a}");
        // GPU 0 -> 2 and GPU 1 -> 3 both go up switch 0's uplink: the second waits for it,
        // although their GPU ports (0 out, 1 out, 2 in, 3 in) are distinct.
        let mut t = Fabric::new(4, PeerTopology::Tree, 1.0, 1000, 2, 140_000);
        let a = t.transfer(0, 2, 1000, 0, 0);
        let b = t.transfer(1, 3, 1000, 0, 0);
        assert!(b >= a + 900_000, "{a} {b}");
        // Under a single switch the same two transfers run side by side.
        let mut sw = Fabric::new(4, PeerTopology::Switch, 1.0, 1000, 2, 140_000);
        let a = sw.transfer(0, 2, 1000, 0, 0);
        let b = sw.transfer(1, 3, 1000, 0, 0);
        assert!(b <= a + 100_000, "{a} {b}");
        assert_eq!(sw.extra_latency(1, 2), 0);
        // 6 GPUs on 3 switches: GPU 0 -> 2 (switch 0 to 1) and GPU 1 -> 4 (switch 0 to 2) share only
        // switch 0's uplink (up from the near switch), and the second waits for it.
        let mut t = Fabric::new(6, PeerTopology::Tree, 1.0, 1000, 2, 140_000);
        let a = t.transfer(0, 2, 1000, 0, 0);
        let b = t.transfer(1, 4, 1000, 0, 0);
        assert!(b >= a + 900_000, "{a} {b}");
    }

    #[test]
    fn host_data_into_a_tree_crosses_the_switch_uplink() {
        // Host data into GPU 2 (switch 1) waits for a peer transfer from GPU 0 into GPU 3, which
        // holds switch 1's downstream uplink; host data into GPU 1 (switch 0) does not.
        let mut t = Fabric::new(4, PeerTopology::Tree, 1.0, 1000, 2, 0);
        let a = t.transfer(0, 3, 1000, 0, 0);
        let h = t.host_into(2, 1000, 0, 0).expect("a PCIe port");
        assert!(h >= a + 900_000, "{a} {h}");
        let free = t.host_into(1, 1000, 0, 0).expect("a PCIe port");
        assert!(free <= 1_100_000, "{free}");
        // An odd GPU count: the last switch holds one GPU.
        let mut t = Fabric::new(3, PeerTopology::Tree, 1.0, 1000, 2, 140_000);
        assert_eq!((t.extra_latency(2, 0), t.extra_latency(0, 1)), (280_000, 0));
        assert!(t.transfer(2, 0, 1000, 0, 0) <= 1_100_000);
    }
}
