//! `aes` (Hetero-Mark AES-256, seed multi-gpu Tables 3 and 6: L2-TLB MPKI
//! 0.003, "partition" pattern; MGPUSim `amd/samples/aes`): encrypts `length`
//! bytes in place, one thread per 16-byte block. A thread loads its block
//! (16 B per lane: a wavefront reads 1 KiB, 16 lines), then makes `rounds` x
//! 16 S-box lookups, each a byte of a 256-byte table in global memory at an
//! index that depends on the data (here a seeded hash of (thread, lookup)),
//! each waiting for the previous (the next index depends on it), and stores
//! the block back. The expanded key is uniform (scalar loads, not modelled).
//!
//! Checked against the MGPUSim trace (`aes.csv.gz`, 256 KiB): 256 wavefronts
//! of 942 accesses (16 + about 910 S-box lines, 4 per lookup + 16); this
//! model makes 16 + 4 x 224 + 16 = 928. 65 of its 66 pages (the 66th holds
//! the key).
//!
//! Arrays in allocation order: data, S-box. First touch (lockstep): data
//! ascending, the S-box at the first lookup.

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;
use crate::sim::mix64;

section! {
    /// Parameters of `aes` (Hetero-Mark AES-256 as MGPUSim runs it).
    pub struct AesParams {
        /// Bytes to encrypt, a multiple of 16 (MGPUSim `-length`; its trace: 262,144).
        pub length: u64 = 262_144,
        /// Rounds of 16 S-box lookups each (AES-256: 14).
        pub rounds: u32 = 14,
    }
}

impl AesParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "length", self.length, 16, 1 << 36)?;
        if self.length % 16 != 0 {
            return Err((format!("{p}.length"), format!("must be a multiple of 16 (AES blocks), got {}", self.length)));
        }
        check(p, "rounds", self.rounds as u64, 1, 64)
    }

    /// Data and S-box.
    pub fn footprint(&self) -> u128 {
        self.length as u128 + 256
    }
}

#[derive(Debug, Clone)]
pub struct AesKernel {
    data: Buffer,
    sbox: Buffer,
    lookups: u32,
    seed: u64,
    compute: u32,
}

pub(super) fn build(p: &AesParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let (data, sbox) = (va.alloc(p.length, page), va.alloc(256, page));
    let k = AesKernel { data, sbox, lookups: 16 * p.rounds, seed: mix64(cfg.sim.seed ^ 0xAE5), compute: w.compute_cycles };
    (
        vec![KernelSpec { name: "aes", threads: p.length / 16, threads_per_cta: w.threads_per_cta, gen: KernelGen::Aes(Box::new(k)) }],
        p.length + 256,
    )
}

impl AesKernel {
    pub fn warp(&self, id: WarpId) -> AesWarp {
        AesWarp { k: self.clone(), t0: id.first_thread, lanes: id.lanes, step: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct AesWarp {
    k: AesKernel,
    t0: u64,
    lanes: u32,
    step: u32,
}

impl AesWarp {
    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let s = self.step;
        self.step += 1;
        let block = Lanes::Strided { base: self.k.data.base + 16 * self.t0, stride: 16, n: self.lanes };
        let last = 2 + 3 * self.k.lookups;
        match s {
            0 => Op::Mem { kind: MemKind::Load, lanes: block, bytes: 16 },
            1 => Op::Wait,
            s if s < last => match (s - 2) % 3 {
                0 => {
                    let i = ((s - 2) / 3) as u64;
                    for (l, slot) in scratch.iter_mut().take(self.lanes as usize).enumerate() {
                        *slot = self.k.sbox.base + (mix64(self.k.seed ^ ((self.t0 + l as u64) << 12) ^ i) & 255);
                    }
                    Op::Mem { kind: MemKind::Load, lanes: Lanes::Explicit { n: self.lanes }, bytes: 1 }
                }
                1 => Op::Wait,
                _ => Op::Compute(self.k.compute),
            },
            s if s == last => Op::Mem { kind: MemKind::Store, lanes: block, bytes: 16 },
            _ => Op::Exit,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn matches_the_mgpusim_trace() {
        // aes.csv.gz (256 KiB): 256 wavefronts, 241,152 accesses (942 each), 66 pages (one holds the key).
        let p = program(&["gpu.warp_size=64", "workload.kind=aes"]);
        let (waves, acc, pages) = trace_stats(&p, 64);
        assert_eq!(waves, 256);
        near("accesses", acc as f64, 241_152.0, 0.02);
        near("pages", pages as f64, 66.0, 0.02);
    }

    #[test]
    fn block_in_lookups_block_out() {
        let p = program(&["workload.kind=aes", "workload.aes.length=1024", "workload.aes.rounds=1"]);
        let (d, s) = (p.buffers[0].base, p.buffers[1].base);
        let ops = mem_ops(&mut warps(&p, 0)[1]);
        assert_eq!(ops.len(), 18);
        assert_eq!(ops[0], (MemKind::Load, (32..64).map(|t| d + 16 * t).collect()));
        assert!(ops[1..17].iter().all(|(k, v)| *k == MemKind::Load && v.iter().all(|a| (s..s + 256).contains(a))));
        assert_ne!(ops[1].1, ops[2].1, "data-dependent indices differ by lookup");
        assert_eq!(ops[17], (MemKind::Store, ops[0].1.clone()));
    }

    #[test]
    fn each_lookup_waits_for_the_last_then_computes_and_the_host_copies_the_data_and_the_s_box() {
        use crate::workload::{Lanes, Op, WarpId};
        let p = program(&["workload.kind=aes", "workload.aes.length=1024", "workload.aes.rounds=1", "workload.compute_cycles=7"]);
        let d = p.buffers[0].base;
        // Warp 1 (blocks 32..64): the block (16 bytes a lane), a wait, 16 x (a byte of the S-box, a wait,
        // 7 cycles), the block stored back.
        let ops = all_ops(&mut warps(&p, 0)[1]);
        assert_eq!(op_shape(&ops), "mw".to_owned() + &"mwc".repeat(16) + "m");
        let block = Lanes::Strided { base: d + 16 * 32, stride: 16, n: 32 };
        assert_eq!(ops[0], Op::Mem { kind: MemKind::Load, lanes: block, bytes: 16 });
        assert_eq!(ops[ops.len() - 1], Op::Mem { kind: MemKind::Store, lanes: block, bytes: 16 });
        assert!(ops[2..ops.len() - 1]
            .chunks(3)
            .all(|c| matches!(c, [Op::Mem { kind: MemKind::Load, bytes: 1, .. }, Op::Wait, Op::Compute(7)])));
        // A lookup's index is a function of the thread and the lookup: thread 40's are the same as lane 8
        // of warp 1 in a warp of its own.
        let lane8: Vec<u64> = mem_ops(&mut warps(&p, 0)[1])[1..17].iter().map(|(_, a)| a[8]).collect();
        let alone: Vec<u64> = mem_ops(&mut kernels(&p)[0].gen.warp(WarpId { global: 0, first_thread: 40, lanes: 1 }))[1..17]
            .iter()
            .map(|(_, a)| a[0])
            .collect();
        assert_eq!(lane8, alone);
        // The data (1024 bytes) and the S-box (256 bytes) are copied.
        assert_eq!(p.host.input_bytes, Some(1024 + 256));
        assert_footprint_is_the_buffers(&["workload.kind=aes", "workload.aes.length=4096"]);
    }

    #[test]
    fn lookups_reach_every_byte_of_the_s_box_and_follow_the_seed() {
        let lookups = |seed: &str| {
            let p = program(&["workload.kind=aes", "workload.aes.length=16384", "workload.aes.rounds=1", seed]);
            let s = p.buffers[1].base;
            warps(&p, 0)
                .iter_mut()
                .flat_map(|w| mem_ops(w)[1..17].iter().flat_map(|(_, a)| a.iter().map(|x| x - s)).collect::<Vec<_>>())
                .collect::<Vec<u64>>()
        };
        // 1024 threads x 16 lookups over 256 bytes: about 64 each, every byte used.
        let a = lookups("sim.seed=1");
        assert_eq!(a.iter().collect::<std::collections::BTreeSet<_>>().len(), 256);
        assert!(a.iter().all(|&x| x < 256));
        // Another seed, other indices.
        let b = lookups("sim.seed=2");
        assert!(a.iter().zip(&b).filter(|(x, y)| x == y).count() < a.len() / 16);
    }
}
