//! A cycle-stepped replay of MGPUSim traces through the R9 Nano memory path
//! of MGPUSim v4.2.0 and Akita v4.9.0, component by component.
//!
//! Why a second engine: the timestamp model (`gpu`, `xlat`, `mem`) decides a
//! request's time when it is looked up. Some of MGPUSim's stalls depend on
//! requests that arrive later (the L2 TLB's lane order under saturation, one
//! CU's full buffer holding the L2's answers to every CU: docs/validation.md,
//! "What the timestamp model cannot follow"), so matching MGPUSim's TLB counts
//! needs its components stepped cycle by cycle. This module follows the Go
//! sources at those versions (each file names the one it follows); what it
//! leaves out is listed in the file that would hold it.
//!
//! Layout: [`core`] is Akita's engine (ticks, ports, buffers, direct
//! connections); [`pipeline`] its pipelines; [`cachedir`] the cache directory
//! and MSHR; the components each implement [`Component`].

pub mod cachedir;
pub mod core;
pub mod idealmem;
pub mod machine;
pub mod mmu;
pub mod pcie;
pub mod pipeline;
pub mod rob;
#[cfg(test)]
pub(crate) mod testkit;
pub mod tlb;
pub mod writearound;
pub mod writeback;

use self::core::Core;

/// A component of the path (Akita `TickingComponent` with its middleware).
pub trait Component {
    /// One tick at `core.now`; true when it made progress (then it ticks
    /// again next cycle).
    fn tick(&mut self, core: &mut Core) -> bool;

    /// A timed event the component scheduled with [`Core::schedule_custom`].
    fn on_event(&mut self, _core: &mut Core, _token: u64) {}
}
