//! `backprop` (Rodinia): one training step of a two-layer perceptron with
//! `input_units` inputs and 16 hidden units, the two GPU kernels.
//! Threads form a 16 x input_units grid (x = hidden unit j, y = input unit i,
//! CTAs of 16 x 16 in Rodinia; here consecutive threads are consecutive j).
//! `layerforward`: thread (j, i) loads input[i+1], waits, meets its CTA,
//! loads weight[i+1][j+1] (the row of 17 weights of input i; row 0 and
//! column 0 are the biases), waits, meets its CTA, reduces the 16 products
//! of its CTA in shared memory (4 * compute_cycles, or with `forward_insts` >
//! 0 that many instructions of one issue slot each), writes its weight back
//! (Rodinia's `input_hidden_cuda[index] = weight_matrix[ty][tx]`), and stores
//! the CTA's partial sum for hidden unit j, `partial[i / 16][j]`, meeting its
//! CTA at Rodinia's 8 barriers. `adjust_weights`: thread (j, i) loads
//! delta[j+1], input[i+1], old_weight[i+1][j+1] and weight[i+1][j+1], one at a
//! time, computes, stores weight, loads delta, input and old_weight again
//! (the pointers are not `__restrict__`), computes, stores old_weight, and
//! meets its CTA at Rodinia's one barrier. Every load waits for its value
//! before the next is issued, as in the kernels' PTX (docs/workloads.md,
//! "Load order"; before 2026-12-01 the loads of each kernel were issued
//! together, without the reloads and the forward kernel's write-back).
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
    // The order of the kernels' PTX (NVRTC 12.9, -O3; docs/workloads.md, "Load order"): each
    // load's value is used at once (stored to shared memory, or converted to double), so a
    // warp has one load in flight at a time. bpnn_layerforward_CUDA meets 8 times: after
    // staging the input node, after staging the weights, after the product, after each of the
    // 4 reduction steps, and after writing the weight tile back (the barriers are among
    // `forward_insts`, two of them outside `staged`).
    let forward = [
        vec![Step::load(input, at_input), Step::Wait, Step::Barrier, Step::load(weight, at_weight), Step::Wait],
        staged(
            match p.forward_insts {
                0 => 0,
                n => n.saturating_sub(2).max(1),
            },
            4 * w.compute_cycles,
            6,
        ),
        // `input_hidden_cuda[index] = weight_matrix[ty][tx]`: the kernel writes its tile back.
        vec![Step::store(weight, at_weight), Step::Barrier],
        vec![Step::store(partial, Index::Affine { c0: 0, cx: 1, cy: HIDDEN, ydiv: 16, cz: 0 })],
    ]
    .concat();
    // bpnn_adjust_weights_cuda's pointers are not `__restrict__`: after the store to w, the
    // old-weight update loads delta, ly and oldw again. Its instructions (`adjust_insts`, the
    // barrier one of them) fall 28 : 8 : 3 before the weight store, before the old-weight store
    // and after the barrier (the bias-row test), as in the count of `adjust_insts`' doc.
    let slots = |part: u32| -> Vec<Step> {
        match p.adjust_insts {
            0 if part < 2 => vec![Step::Compute(w.compute_cycles)],
            0 => vec![],
            n => {
                let s = n - 1;
                let (a, b) = (s * 28 / 39, s * 8 / 39);
                vec![Step::Compute(1); [a, b, s - a - b][part as usize] as usize]
            }
        }
    };
    let adjust = [
        vec![
            Step::load(delta, Index::affine(1, 1, 0)),
            Step::Wait,
            Step::load(input, at_input),
            Step::Wait,
            Step::load(old, at_weight),
            Step::Wait,
            Step::load(weight, at_weight),
            Step::Wait,
        ],
        slots(0),
        vec![
            Step::store(weight, at_weight),
            Step::load(delta, Index::affine(1, 1, 0)),
            Step::Wait,
            Step::load(input, at_input),
            Step::Wait,
            Step::load(old, at_weight),
            Step::Wait,
        ],
        slots(1),
        // It meets once, after its stores (before CTA 0's bias-row update).
        vec![Step::store(old, at_weight), Step::Barrier],
        slots(2),
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
        let weight = lanes(40, &|j, i| b[1] + 4 * ((i + 1) * 17 + j + 1));
        assert_eq!(ops[0], (MemKind::Load, lanes(40, &|_, i| b[0] + 4 * (i + 1))));
        assert_eq!(ops[1], (MemKind::Load, weight.clone()));
        // The weight tile written back, then the partial sums of CTA-row 40 / 16 = 2.
        assert_eq!(ops[2], (MemKind::Store, weight));
        assert_eq!(ops[3], (MemKind::Store, lanes(40, &|j, _| b[3] + 4 * (2 * 16 + j))));
        let ops = mem_ops(&mut warps(&p, 1)[20]);
        let (l, s) = (MemKind::Load, MemKind::Store);
        let kinds: Vec<MemKind> = ops.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, [l, l, l, l, s, l, l, l, s]);
        let delta = lanes(40, &|j, _| b[4] + 4 * (j + 1));
        let old = lanes(40, &|j, i| b[2] + 4 * ((i + 1) * 17 + j + 1));
        assert_eq!(ops[0].1, delta);
        assert_eq!(ops[2].1, old);
        assert_eq!(ops[3].1, lanes(40, &|j, i| b[1] + 4 * ((i + 1) * 17 + j + 1)));
        // The reloads after the weight store (no `__restrict__`): delta, input, old weight.
        assert_eq!(ops[5].1, delta);
        assert_eq!(ops[6].1, ops[1].1);
        assert_eq!((ops[7].1.clone(), ops[8].1.clone()), (old.clone(), old));
        let order: Vec<usize> = first_touch(&p).iter().map(|&(b, _)| b).collect();
        assert_eq!(order, [0, 1, 1, 3, 4, 2, 2]);
    }

    #[test]
    fn every_load_is_waited_for_before_the_next_as_in_the_ptx() {
        let p = program(&["workload.kind=backprop", "workload.backprop.input_units=64"]);
        // Forward: input, wait, barrier, weight, wait, barrier, compute, 5 barriers, write-back, barrier, partial.
        assert_eq!(op_shape(&all_ops(&mut warps(&p, 0)[3])), "mwbmwbcbbbbbmbm");
        // Adjust: 4 loads one at a time, compute, store, 3 reloads, compute, store, barrier.
        assert_eq!(op_shape(&all_ops(&mut warps(&p, 1)[3])), "mwmwmwmwcmmwmwmwcmb");
    }

    #[test]
    fn insts_issue_one_slot_per_instruction_between_the_loads_and_the_stores() {
        use crate::workload::Op;
        let base = ["workload.kind=backprop", "workload.backprop.input_units=64"];
        let (po, pn) =
            (program(&base), program(&[&base[..], &["workload.backprop.forward_insts=10", "workload.backprop.adjust_insts=40"]].concat()));
        let mem = |v: &[Op]| v.iter().filter(|o| matches!(o, Op::Mem { .. } | Op::Wait)).copied().collect::<Vec<_>>();
        let count = |v: &[Op], o: Op| v.iter().filter(|&&x| x == o).count();
        // Forward: 10 slots = 8 barriers and 2 single slots, the loads and stores unchanged.
        let (old, new) = (all_ops(&mut warps(&po, 0)[3]), all_ops(&mut warps(&pn, 0)[3]));
        assert_eq!(old[5..8], [Op::Barrier, Op::Compute(16), Op::Barrier]);
        assert_eq!((count(&new, Op::Barrier), count(&new, Op::Compute(1))), (8, 2));
        assert_eq!(count(&new, Op::Compute(16)), 0);
        assert_eq!(mem(&old), mem(&new));
        // Adjust: 40 slots = the barrier and 28, 8 and 3 single slots around the two stores and it.
        let (old, new) = (all_ops(&mut warps(&po, 1)[3]), all_ops(&mut warps(&pn, 1)[3]));
        assert_eq!(count(&old, Op::Compute(4)), 2);
        assert_eq!(new.len(), 9 + 7 + 1 + 39);
        let runs: Vec<usize> = op_shape(&new).split(|c| c != 'c').filter(|r| !r.is_empty()).map(str::len).collect();
        assert_eq!(runs, [28, 8, 3]);
        assert_eq!(mem(&old), mem(&new));
    }

    #[test]
    fn adjust_stores_the_new_weight_and_the_host_copies_the_input_and_both_weight_arrays() {
        let p = program(&["workload.kind=backprop", "workload.backprop.input_units=64"]);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        // Adjust, warp 20 = inputs 40, 41. Its first store is weight[i+1][j+1]: lane 17 = (j 1, i 41),
        // element 42 x 17 + 2.
        let ops = mem_ops(&mut warps(&p, 1)[20]);
        assert_eq!((ops[4].0, ops[4].1[17]), (MemKind::Store, b[1] + 4 * (42 * 17 + 2)));
        // Inputs: input (65 floats = 260 bytes), weight and old weight (65 x 17 floats = 4420 bytes each).
        assert_eq!(p.host.input_bytes, Some(260 + 2 * 4420));
    }
}
