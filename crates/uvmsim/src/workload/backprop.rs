//! `backprop` (Rodinia): one training step of a two-layer perceptron with
//! `input_units` inputs and 16 hidden units, the two GPU kernels.
//! Threads form a 16 x input_units grid (x = hidden unit j, y = input unit i,
//! CTAs of 16 x 16 in Rodinia; here consecutive threads are consecutive j).
//! `layerforward`: thread (j, i) loads input[i+1] and weight[i+1][j+1]
//! (the row of 17 weights of input i; row 0 and column 0 are the biases),
//! waits, reduces the 16 products of its CTA in shared memory
//! (4 * compute_cycles) and stores the CTA's partial sum for hidden unit j,
//! `partial[i / 16][j]`. `adjust_weights`: thread (j, i) loads delta[j+1],
//! input[i+1], weight[i+1][j+1] and old_weight[i+1][j+1], waits, computes,
//! and stores weight and old_weight.
//!
//! Simplified from Rodinia: the host-side steps between the kernels (summing
//! the partial sums, the output layer, the error) are not modelled, nor the
//! bias-row update of CTA 0.
//!
//! Arrays in allocation order: input (i+1 floats), weight and old_weight
//! ((i+1) x 17 floats), partial (i/16 x 16), delta (17). First touch
//! (lockstep): input and weight interleaved row-major, then partial; in the
//! second kernel delta, then old_weight row-major.

use super::grid::{Array, GridKernel, Index, Step};
use super::{KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of the Rodinia backprop training step.
    pub struct BackpropParams {
        /// Input units (a multiple of 16); the hidden layer has 16 units.
        pub input_units: u64 = 16_384,
    }
}

const HIDDEN: u64 = 16;

impl BackpropParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        if self.input_units == 0 || self.input_units % 16 != 0 || self.input_units > 1 << 30 {
            return Err((format!("{p}.input_units"), format!("must be a positive multiple of 16 up to 2^30, got {}", self.input_units)));
        }
        Ok(())
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
    let forward = vec![
        Step::load(input, at_input),
        Step::load(weight, at_weight),
        Step::Wait,
        Step::Compute(4 * w.compute_cycles),
        Step::store(partial, Index::Affine { c0: 0, cx: 1, cy: HIDDEN, ydiv: 16, cz: 0 }),
    ];
    let adjust = vec![
        Step::load(delta, Index::affine(1, 1, 0)),
        Step::load(input, at_input),
        Step::load(weight, at_weight),
        Step::load(old, at_weight),
        Step::Wait,
        Step::Compute(w.compute_cycles),
        Step::store(weight, at_weight),
        Step::store(old, at_weight),
    ];
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
}
