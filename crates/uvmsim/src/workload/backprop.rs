//! `backprop` (Rodinia): one training step of a two-layer perceptron with
//! `input_units` inputs and 16 hidden units, the two GPU kernels.
//! Threads form a 16 x input_units grid (x = hidden unit j, y = input unit i,
//! CTAs of 16 x 16 in Rodinia; here consecutive threads are consecutive j).
//! `layerforward`: thread (j, i) loads input[i+1] and weight[i+1][j+1]
//! (the row of 17 weights of input i; row 0 and column 0 are the biases),
//! waits, reduces the 16 products of its CTA in shared memory
//! (4 * compute_cycles, or with `forward_insts` > 0 that many instructions of
//! one issue slot each) and stores the CTA's partial sum for hidden unit j,
//! `partial[i / 16][j]`, meeting its CTA at Rodinia's 8 barriers (the first
//! right after the loads). `adjust_weights`: thread (j, i) loads delta[j+1],
//! input[i+1], weight[i+1][j+1] and old_weight[i+1][j+1], waits, computes
//! (`compute_cycles`, or `adjust_insts` single-slot instructions), stores
//! weight and old_weight, and meets its CTA at Rodinia's one barrier.
//!
//! Simplified from Rodinia: the host-side steps between the kernels (summing
//! the partial sums, the output layer, the error) are not modelled, nor the
//! bias-row update of CTA 0.
//!
//! Arrays in allocation order: input (i+1 floats), weight and old_weight
//! ((i+1) x 17 floats), partial (i/16 x 16), delta (17). First touch
//! (lockstep): input and weight interleaved row-major, then partial; in the
//! second kernel delta, then old_weight row-major.

use super::grid::{staged, Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of the Rodinia backprop training step.
    pub struct BackpropParams {
        /// Input units (a multiple of 16); the hidden layer has 16 units.
        pub input_units: u64 = 16_384,
        /// Arithmetic, control and shared-memory warp instructions per thread of `layerforward`,
        /// each taking an issue slot of its SM; 0 = its work is `4 x compute_cycles` of latency
        /// that takes no issue slot. Rodinia's `bpnn_layerforward_CUDA` counted as Fermi
        /// instructions: ids and the two indices 11, the guarded input copy to shared memory 5,
        /// the weight copy 5, the product 4, three barriers 3, the 4-step reduction 129 (per step:
        /// `__log2f` loop test 4, `__powf(2, i)` 4, `ty % power_two` as Fermi's software integer
        /// remainder 17, test 2, barrier 1; the add, run by 1.875 steps of a warp on average, 9),
        /// the write-back's shared load and barrier 2, the guarded partial-sum store 6 = 165.
        pub forward_insts: u32 = 0,
        /// Instructions per thread of `adjust_weights` (see `forward_insts`; 0 = `compute_cycles`
        /// of latency): Rodinia's `bpnn_adjust_weights_cuda`: ids and the three indices 12,
        /// addresses 6, the weight update 10 and the old-weight update 8 (`ETA` and `MOMENTUM`
        /// are double literals: conversions and double multiplies and adds), the barrier 1, the
        /// bias-row test 3 = 40.
        pub adjust_insts: u32 = 0,
    }
}

const HIDDEN: u64 = 16;

impl BackpropParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        if self.input_units == 0 || self.input_units % 16 != 0 || self.input_units > 1 << 30 {
            return Err((format!("{p}.input_units"), format!("must be a positive multiple of 16 up to 2^30, got {}", self.input_units)));
        }
        check(p, "forward_insts", self.forward_insts as u64, 0, 10_000)?;
        check(p, "adjust_insts", self.adjust_insts as u64, 0, 10_000)
    }

    pub fn footprint(&self) -> u128 {
        let i = self.input_units as u128;
        4 * ((i + 1) + 2 * (i + 1) * (HIDDEN as u128 + 1) + i + (HIDDEN as u128 + 1))
    }
}

pub(super) fn build(p: &BackpropParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let i = p.input_units;
    let row = HIDDEN + 1;
    let bufs = [
        va.alloc((i + 1) * 4, page),
        va.alloc((i + 1) * row * 4, page),
        va.alloc((i + 1) * row * 4, page),
        va.alloc(i * 4, page),
        va.alloc(row * 4, page),
    ];
    let arrays: Vec<Array> = bufs.iter().map(|b| Array { base: b.base, elem_bytes: 4 }).collect();
    let (input, weight, old, partial, delta) = (0, 1, 2, 3, 4);
    let at_input = Index::affine(1, 0, 1);
    let at_weight = Index::affine(row + 1, 1, row);
    // bpnn_layerforward_CUDA meets 8 times: after staging the input node and the weights in
    // shared memory, after the product, after each of the 4 reduction steps, and before the
    // partial-sum store (the barriers are among `forward_insts`).
    let forward = [
        vec![Step::load(input, at_input), Step::load(weight, at_weight), Step::Wait],
        staged(p.forward_insts, 4 * w.compute_cycles, 8),
        vec![Step::store(partial, Index::Affine { c0: 0, cx: 1, cy: HIDDEN, ydiv: 16, cz: 0 })],
    ]
    .concat();
    let adjust = [
        vec![
            Step::load(delta, Index::affine(1, 1, 0)),
            Step::load(input, at_input),
            Step::load(weight, at_weight),
            Step::load(old, at_weight),
            Step::Wait,
        ],
        // One issue slot per instruction (the barrier below is one of them), or latency.
        match p.adjust_insts {
            0 => vec![Step::Compute(w.compute_cycles)],
            n => vec![Step::Compute(1); n as usize - 1],
        },
        // bpnn_adjust_weights_cuda meets once, after its stores (before CTA 0's bias-row update).
        vec![Step::store(weight, at_weight), Step::store(old, at_weight), Step::Barrier],
    ]
    .concat();
    let kernels = [("backprop-forward", forward), ("backprop-adjust", adjust)]
        .map(|(name, body)| {
            let k = GridKernel::new([HIDDEN, i, 1], HIDDEN * i, 1, arrays.clone(), body);
            KernelSpec { name, threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }
        })
        .into();
    (kernels, bufs[0].bytes + 2 * bufs[1].bytes)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn forward_and_adjust_read_the_weight_row_of_their_input() {
        let p = program(&["workload.kind=backprop", "workload.backprop.input_units=64"]);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        // Warp 20 = threads 640..672 = inputs 40, 41 (16 hidden units each).
        let ops = mem_ops(&mut warps(&p, 0)[20]);
        let lanes = |i0: u64, f: &dyn Fn(u64, u64) -> u64| (0..32).map(|l| f(l % 16, i0 + l / 16)).collect::<Vec<_>>();
        assert_eq!(ops[0], (MemKind::Load, lanes(40, &|_, i| b[0] + 4 * (i + 1))));
        assert_eq!(ops[1], (MemKind::Load, lanes(40, &|j, i| b[1] + 4 * ((i + 1) * 17 + j + 1))));
        // Partial sums of CTA-row 40 / 16 = 2.
        assert_eq!(ops[2], (MemKind::Store, lanes(40, &|j, _| b[3] + 4 * (2 * 16 + j))));
        let ops = mem_ops(&mut warps(&p, 1)[20]);
        let kinds: Vec<MemKind> = ops.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, [[MemKind::Load; 4].as_slice(), &[MemKind::Store; 2]].concat());
        assert_eq!(ops[0].1, lanes(40, &|j, _| b[4] + 4 * (j + 1)));
        assert_eq!(ops[3].1, lanes(40, &|j, i| b[2] + 4 * ((i + 1) * 17 + j + 1)));
        let order: Vec<usize> = first_touch(&p).iter().map(|&(b, _)| b).collect();
        assert_eq!(order, [0, 1, 1, 3, 4, 2, 2]);
    }

    #[test]
    fn insts_issue_one_slot_per_instruction_between_the_loads_and_the_stores() {
        use crate::workload::Op;
        let base = ["workload.kind=backprop", "workload.backprop.input_units=64"];
        let (po, pn) =
            (program(&base), program(&[&base[..], &["workload.backprop.forward_insts=5", "workload.backprop.adjust_insts=3"]].concat()));
        let mem = |v: &[Op]| v.iter().filter(|o| matches!(o, Op::Mem { .. } | Op::Wait)).copied().collect::<Vec<_>>();
        // Forward: 2 loads, wait, a barrier, Compute(16) and 7 more barriers, or the 8 barriers
        // alone (5 slots are fewer than the barriers, which issue anyway), the partial-sum store.
        let (old, new) = (all_ops(&mut warps(&po, 0)[3]), all_ops(&mut warps(&pn, 0)[3]));
        assert_eq!(old[2..5], [Op::Wait, Op::Barrier, Op::Compute(16)]);
        assert_eq!(old[5..12], [Op::Barrier; 7]);
        assert_eq!(new.len(), 2 + 1 + 8 + 1);
        assert_eq!(new[3..11], [Op::Barrier; 8]);
        assert!(matches!(new[11], Op::Mem { .. }));
        assert_eq!(mem(&old), mem(&new));
        // Adjust: 4 loads, wait, Compute(4) or 2 single slots (the barrier is the third), 2 stores, the barrier.
        let (old, new) = (all_ops(&mut warps(&po, 1)[3]), all_ops(&mut warps(&pn, 1)[3]));
        assert_eq!(old[4..6], [Op::Wait, Op::Compute(4)]);
        assert_eq!(new.len(), 4 + 1 + 2 + 2 + 1);
        assert_eq!(new[5..7], [Op::Compute(1); 2]);
        assert_eq!(new[9], Op::Barrier);
        assert_eq!(mem(&old), mem(&new));
    }
}
