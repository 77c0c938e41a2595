//! `gather`: lookups into a large sorted table, XSBench / B+tree-like. Each
//! lookup reads its key (coalesced), then binary-searches the table with
//! dependent probes and reads the entry it finds. Unsorted keys are uniform
//! random, so the lanes of a warp diverge over the whole table from the
//! first probes; sorted keys (the originals sort them on the host, svm-apu
//! §IV.B) are order statistics of the same distribution, so adjacent lanes
//! share their search path and diverge only in the last few probes.

use super::{Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;
use crate::sim::mix64;

section! {
    /// Parameters of the table-lookup kernel.
    pub struct GatherParams {
        /// Entries of the table (searched by key = entry index).
        pub table_entries: u64 = 1 << 24,
        /// Bytes per table entry.
        pub entry_bytes: u32 = 16,
        /// Total lookups.
        pub lookups: u64 = 1 << 15,
        /// Threads; each makes lookups / threads lookups in turn.
        pub threads: u64 = 1 << 14,
        /// Sort the keys first (adjacent threads then search nearby keys).
        pub sorted: bool = false,
        /// Find each key by binary search (dependent probes); false reads its entry directly.
        pub binary_search: bool = true,
    }
}

impl GatherParams {
    pub fn validate(&self, p: &str, warp: u32) -> Result<(), (String, String)> {
        if !(2..=1 << 40).contains(&self.table_entries) {
            return Err((format!("{p}.table_entries"), format!("must be between 2 and 2^40, got {}", self.table_entries)));
        }
        if !(4..=4096).contains(&self.entry_bytes) {
            return Err((format!("{p}.entry_bytes"), format!("must be between 4 and 4096, got {}", self.entry_bytes)));
        }
        if self.lookups == 0 || self.lookups > 1 << 36 {
            return Err((format!("{p}.lookups"), format!("must be between 1 and 2^36, got {}", self.lookups)));
        }
        if self.threads == 0 || self.threads % warp as u64 != 0 {
            return Err((format!("{p}.threads"), format!("must be a positive multiple of gpu.warp_size ({warp}), got {}", self.threads)));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct GatherKernel {
    keys: Buffer,
    table: Buffer,
    p: GatherParams,
    seed: u64,
    compute: u32,
}

pub(super) fn build(p: &GatherParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (KernelSpec, u64) {
    let keys = va.alloc(p.lookups * 4, page);
    let table = va.alloc(p.table_entries * p.entry_bytes as u64, page);
    let kernel = KernelSpec {
        name: "gather",
        threads: p.threads.min(p.lookups.div_ceil(cfg.gpu.warp_size as u64) * cfg.gpu.warp_size as u64),
        threads_per_cta: w.threads_per_cta,
        gen: KernelGen::Gather(GatherKernel {
            keys,
            table,
            p: p.clone(),
            seed: mix64(cfg.sim.seed ^ 0x6761_7468),
            compute: w.compute_cycles,
        }),
    };
    (kernel, keys.bytes + table.bytes)
}

impl GatherKernel {
    /// The key of lookup `i`: uniform over the table, or the i-th order statistic when sorted.
    pub fn key(&self, i: u64) -> u64 {
        let t = self.p.table_entries;
        let h = mix64(self.seed ^ i);
        if self.p.sorted {
            // floor((i + u) * T / L), u uniform in [0,1): nondecreasing in i.
            let num = ((i as u128) << 32 | (h >> 32) as u128) * t as u128;
            ((num / ((self.p.lookups as u128) << 32)) as u64).min(t - 1)
        } else {
            ((h as u128 * t as u128) >> 64) as u64
        }
    }

    pub fn warp(&self, id: WarpId) -> GatherWarp {
        GatherWarp {
            k: self.clone(),
            first: id.first_thread,
            width: id.lanes,
            step: 0,
            n: 0,
            phase: 0,
            key: [0; MAX_LANES],
            lo: [0; MAX_LANES],
            hi: [0; MAX_LANES],
        }
    }
}

#[derive(Debug, Clone)]
pub struct GatherWarp {
    k: GatherKernel,
    first: u64,
    width: u32,
    /// Lookup round: lane l handles lookup step * threads + first + l.
    step: u64,
    /// Active lanes this round.
    n: u32,
    phase: u8,
    key: [u64; MAX_LANES],
    lo: [u64; MAX_LANES],
    hi: [u64; MAX_LANES],
}

impl GatherWarp {
    fn entry(&self, e: u64) -> u64 {
        self.k.table.base + e * self.k.p.entry_bytes as u64
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let p = &self.k.p;
        loop {
            match self.phase {
                0 => {
                    let i0 = self.step * p.threads + self.first;
                    if i0 >= p.lookups {
                        return Op::Exit;
                    }
                    self.n = (p.lookups - i0).min(self.width as u64) as u32;
                    self.phase = 1;
                    return Op::Mem {
                        kind: MemKind::Load,
                        lanes: Lanes::Strided { base: self.k.keys.base + i0 * 4, stride: 4, n: self.n },
                        bytes: 4,
                    };
                }
                1 => {
                    let i0 = self.step * p.threads + self.first;
                    for l in 0..self.n as usize {
                        self.key[l] = self.k.key(i0 + l as u64);
                        self.lo[l] = 0;
                        self.hi[l] = p.table_entries;
                    }
                    self.phase = if p.binary_search { 2 } else { 4 };
                    return Op::Wait;
                }
                2 => {
                    let mut m = 0;
                    for l in 0..self.n as usize {
                        if self.hi[l] - self.lo[l] > 1 {
                            scratch[m] = self.entry(self.lo[l] + (self.hi[l] - self.lo[l]) / 2);
                            m += 1;
                        }
                    }
                    if m == 0 {
                        self.phase = 4;
                        continue;
                    }
                    self.phase = 3;
                    return Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: m as u32 }, bytes: p.entry_bytes.min(8) };
                }
                3 => {
                    for l in 0..self.n as usize {
                        let (lo, hi) = (self.lo[l], self.hi[l]);
                        if hi - lo > 1 {
                            let mid = lo + (hi - lo) / 2;
                            if self.key[l] >= mid {
                                self.lo[l] = mid;
                            } else {
                                self.hi[l] = mid;
                            }
                        }
                    }
                    self.phase = 2;
                    return Op::Wait;
                }
                4 => {
                    let n = self.n as usize;
                    for (l, slot) in scratch.iter_mut().take(n).enumerate() {
                        let e = if p.binary_search { self.lo[l] } else { self.key[l] };
                        *slot = self.k.table.base + e * p.entry_bytes as u64;
                    }
                    self.phase = 5;
                    return Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: self.n }, bytes: p.entry_bytes.min(16) };
                }
                5 => {
                    self.phase = 6;
                    return Op::Wait;
                }
                _ => {
                    self.phase = 0;
                    self.step += 1;
                    return Op::Compute(self.k.compute);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(sorted: bool) -> GatherKernel {
        let mut va = VaAllocator::default();
        let mut cfg = Config::default();
        cfg.workload.gather = GatherParams { table_entries: 1024, lookups: 256, threads: 64, sorted, ..GatherParams::default() };
        let (k, _) = build(&cfg.workload.gather, &cfg.workload, &cfg, 4096, &mut va);
        match k.gen {
            KernelGen::Gather(g) => g,
            _ => unreachable!(),
        }
    }

    #[test]
    fn sorted_keys_are_nondecreasing_and_in_range() {
        let k = kernel(true);
        let keys: Vec<u64> = (0..256).map(|i| k.key(i)).collect();
        assert!(keys.windows(2).all(|w| w[0] <= w[1]));
        assert!(keys.iter().all(|&x| x < 1024));
        assert!(keys[255] > 1000 && keys[0] < 8);
    }

    #[test]
    fn binary_search_finds_the_key_in_log2_probes() {
        let k = kernel(false);
        let mut w = k.warp(WarpId { global: 0, first_thread: 0, lanes: 32 });
        let mut s = [0u64; MAX_LANES];
        let mut probes = 0;
        loop {
            match w.next(&mut s) {
                Op::Mem { lanes: Lanes::Explicit { .. }, .. } if w.phase == 3 => probes += 1,
                Op::Mem { lanes: Lanes::Explicit { n }, .. } => {
                    // Final read: each lane reads exactly its key's entry.
                    for (l, &addr) in s.iter().take(n as usize).enumerate() {
                        assert_eq!(addr, w.entry(w.key[l]));
                    }
                    break;
                }
                _ => {}
            }
        }
        assert_eq!(probes, 10); // log2(1024)
    }

    #[test]
    fn a_lookup_reads_its_seeded_key_then_probes_halves_and_the_host_copies_keys_and_table() {
        use crate::workload::testutil::{all_ops, kernels, mem_ops, program, warps};
        let p = program(&[
            "sim.seed=7",
            "workload.kind=gather",
            "workload.gather.table_entries=1000",
            "workload.gather.entry_bytes=32",
            "workload.gather.lookups=100",
            "workload.gather.threads=256",
        ]);
        // 100 lookups need 4 warps of 32: 128 threads, not 256.
        assert_eq!(kernels(&p)[0].threads, 128);
        // Inputs: the keys, 100 x 4 bytes, and the table, 1000 x 32 bytes.
        assert_eq!(p.host.input_bytes, Some(400 + 32_000));
        let (keys, table) = (p.buffers[0].base, p.buffers[1].base);
        // Lookup 0's key: its hash (keyed by the seed and "gath") times the table size, the top 64 bits.
        let key = ((mix64(mix64(7 ^ 0x6761_7468)) as u128 * 1000) >> 64) as u64;
        // Lane 0's probes: the middle of [lo, hi), rounded down (500, then 250 or 750, ...); then its entry.
        let (mut lo, mut hi, mut probes) = (0, 1000, vec![]);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            probes.push(table + mid * 32);
            (lo, hi) = if key >= mid { (mid, hi) } else { (lo, mid) };
        }
        let mem = mem_ops(&mut warps(&p, 0)[0]);
        assert_eq!(mem[0].1[0], keys);
        assert_eq!(mem[1..=probes.len()].iter().map(|(_, a)| a[0]).collect::<Vec<_>>(), probes);
        // One round: the next lookup of thread 0 would be 256, past the 100.
        assert_eq!(mem.last().unwrap().1[0], table + key * 32);
        assert_eq!(mem.iter().filter(|(_, a)| (keys..keys + 400).contains(&a[0])).count(), 1);
        // Keys are 4 bytes, probes read 8 of an entry, the found entry 16.
        let ops = all_ops(&mut warps(&p, 0)[0]);
        let bytes: Vec<u32> = ops.iter().filter_map(|o| if let Op::Mem { bytes, .. } = o { Some(*bytes) } else { None }).collect();
        assert_eq!((bytes[0], bytes[1], *bytes.last().unwrap()), (4, 8, 16));
    }
}
