//! `strided`: thread `t` accesses element `t * stride_elements` of one array,
//! `repeats` times (load, wait, compute, and optionally a store back). The
//! lanes of a warp are `stride_elements * element_bytes` bytes apart, so the
//! stride sets the coalescing: 1 gives one 128 B line per warp of 4-byte
//! elements, 32 one line per lane, 1024 one 4 KiB page per lane.
//!
//! First touch: the array's pages in ascending order (thread order), every
//! `stride_elements * element_bytes` bytes; pages between touched ones are never touched.

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of the generic strided-access kernel.
    pub struct StridedParams {
        /// Threads; thread t accesses element t * stride_elements.
        pub threads: u64 = 65_536,
        /// Distance between the elements of consecutive threads, in elements.
        pub stride_elements: u64 = 1,
        /// Bytes per element (and per access).
        pub element_bytes: u32 = 4,
        /// Times each thread repeats its access.
        pub repeats: u32 = 4,
        /// Store the element back after each load.
        pub write: bool = false,
    }
}

impl StridedParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "threads", self.threads, 1, 1 << 30)?;
        check(p, "stride_elements", self.stride_elements, 0, 1 << 30)?;
        if !matches!(self.element_bytes, 1 | 2 | 4 | 8 | 16) {
            return Err((format!("{p}.element_bytes"), format!("must be 1, 2, 4, 8 or 16, got {}", self.element_bytes)));
        }
        check(p, "repeats", self.repeats as u64, 1, 1 << 16)
    }

    /// Bytes of the array: one element per thread, `stride_elements` apart (at least one element).
    pub fn footprint(&self) -> u128 {
        self.threads as u128 * self.stride_elements.max(1) as u128 * self.element_bytes as u128
    }
}

pub(super) fn build(p: &StridedParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let eb = p.element_bytes as u64;
    let a = va.alloc(p.threads * p.stride_elements.max(1) * eb, page);
    let at = Index::affine(0, p.stride_elements, 0);
    let mut body = vec![Step::load(0, at), Step::Wait, Step::Compute(w.compute_cycles)];
    if p.write {
        body.push(Step::store(0, at));
    }
    let k = GridKernel::new([p.threads, 1, 1], p.threads, p.repeats, vec![Array { base: a.base, elem_bytes: p.element_bytes }], body);
    (vec![KernelSpec { name: "strided", threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }], a.bytes)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{Lanes, MemKind, Op};

    #[test]
    fn stride_sets_the_lane_distance_and_every_access_repeats() {
        let p = program(&["workload.kind=strided", "workload.strided.threads=64", "workload.strided.stride_elements=1024"]);
        let base = p.buffers[0].base;
        let ops = mem_ops(&mut warps(&p, 0)[1]);
        assert_eq!(ops.len(), 4); // repeats
        for (kind, a) in &ops {
            assert_eq!(*kind, MemKind::Load);
            // Warp 1 = threads 32..64, one 4 KiB page each.
            assert_eq!(*a, (32..64).map(|t| base + t * 4096).collect::<Vec<_>>());
        }
        assert_eq!(first_touch(&p), (0..64).map(|t| (0, t)).collect::<Vec<_>>());
    }

    #[test]
    fn unit_stride_is_one_coalesced_instruction() {
        let p = program(&["workload.kind=strided", "workload.strided.threads=32", "workload.strided.write=true"]);
        let mut s = [0; 64];
        let mut w = warps(&p, 0).remove(0);
        let op = w.next(&mut s);
        assert!(matches!(op, Op::Mem { lanes: Lanes::Strided { stride: 4, n: 32, .. }, .. }), "{op:?}");
        let kinds: Vec<MemKind> = mem_ops(&mut warps(&p, 0).remove(0)).into_iter().map(|(k, _)| k).collect();
        assert_eq!(kinds, [MemKind::Load, MemKind::Store].repeat(4));
    }

    #[test]
    fn stride_zero_puts_every_lane_on_element_zero_of_a_full_sized_array() {
        // The array keeps one element per thread (footprint's max(1)): 64 threads * 4 B = 256 B.
        let p = program(&["workload.kind=strided", "workload.strided.threads=64", "workload.strided.stride_elements=0"]);
        assert_eq!(p.buffers[0].bytes, 256);
        let base = p.buffers[0].base;
        assert_eq!(mem_ops(&mut warps(&p, 0)[1])[0], (MemKind::Load, vec![base; 32]));
    }
}
