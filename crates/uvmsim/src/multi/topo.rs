//! Multi-GPU topology: which GPU runs which CTAs, and the GPU-to-GPU fabric
//! (a switch with one port per GPU, or a dedicated link per pair) over which
//! remote accesses and page migrations travel.

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

/// Bandwidth of the GPU-to-GPU fabric: per-direction timelines of ports (switch) or links (direct).
#[derive(Debug, Clone)]
pub struct Fabric {
    n: usize,
    topology: PeerTopology,
    /// Switch: `out[g]` then `in[g]` per GPU (2n); direct: one per ordered pair (n*n).
    lanes: Vec<Timeline>,
}

impl Fabric {
    pub fn new(n: usize, topology: PeerTopology, gbps: f64, unit_bytes: u64) -> Fabric {
        let lanes = match topology {
            PeerTopology::Switch => 2 * n,
            PeerTopology::Direct => n * n,
        };
        Fabric { n, topology, lanes: (0..lanes).map(|_| Timeline::new(gbps, unit_bytes)).collect() }
    }

    /// Move `bytes` from GPU `src` to GPU `dst`, entering the fabric at `t`;
    /// returns when the last byte has left it (no flight latency).
    pub fn transfer(&mut self, src: usize, dst: usize, bytes: u64, t: Ps, now: Ps) -> Ps {
        let now = now.min(t);
        match self.topology {
            PeerTopology::Switch => {
                let a = self.lanes[2 * src].reserve(t, bytes, now);
                let b = self.lanes[2 * dst + 1].reserve(t, bytes, now);
                a.max(b)
            }
            PeerTopology::Direct => self.lanes[src * self.n + dst].reserve(t, bytes, now),
        }
    }

    /// Carry `bytes` from the host into GPU `dst` over its switch port (a PCIe switch's
    /// downstream port: the GPU's one link, which its peer traffic uses too), entering at
    /// `t`; returns when the last byte is through, or None for direct links (NVLink/xGMI
    /// peer links are not the GPU's PCIe link).
    pub fn host_into(&mut self, dst: usize, bytes: u64, t: Ps, now: Ps) -> Option<Ps> {
        match self.topology {
            PeerTopology::Switch => Some(self.lanes[2 * dst + 1].reserve(t, bytes, now.min(t))),
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
        let mut sw = Fabric::new(3, PeerTopology::Switch, 1.0, 1000);
        let a = sw.transfer(0, 1, 1000, 0, 0);
        let b = sw.transfer(2, 1, 1000, 0, 0); // GPU 1's input port is busy with the first
        assert!(b >= a + 900_000, "{a} {b}");
        let mut d = Fabric::new(3, PeerTopology::Direct, 1.0, 1000);
        let a = d.transfer(0, 1, 1000, 0, 0);
        let b = d.transfer(2, 1, 1000, 0, 0); // its own link
        assert!(b <= a + 100_000, "{a} {b}");
    }

    #[test]
    fn host_dma_shares_a_switch_port_with_peer_traffic() {
        // 1 GB/s: 1000 bytes take 1 µs. A peer transfer into GPU 1, then host data into it at
        // the same time: the second waits for the port; GPU 2's port is free.
        let mut sw = Fabric::new(3, PeerTopology::Switch, 1.0, 1000);
        let a = sw.transfer(0, 1, 1000, 0, 0);
        let h = sw.host_into(1, 1000, 0, 0).expect("a switch port");
        assert!(h >= a + 900_000, "{a} {h}");
        let free = sw.host_into(2, 1000, 0, 0).expect("a switch port");
        assert!(free <= 1_100_000, "{free}");
        // And a peer transfer after host data waits likewise.
        let b = sw.transfer(2, 1, 1000, 0, 0);
        assert!(b >= h + 900_000, "{h} {b}");
        // Direct links are not the GPU's PCIe link.
        assert_eq!(Fabric::new(3, PeerTopology::Direct, 1.0, 1000).host_into(1, 1000, 0, 0), None);
    }
}
