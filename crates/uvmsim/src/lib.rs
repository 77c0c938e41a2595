//! uvmsim: a fast event-level simulator of GPU virtual memory.
//!
//! Flow (one direction): workload → gpu → xlat (translation) → mem (data
//! caches, DRAM) → stats. See docs/architecture.md for a walk through one
//! memory access.

#[macro_use]
pub mod config;
pub mod api;
pub mod assoc;
pub mod cycle;
pub mod fuzz;
pub mod gpu;
pub mod link;
pub mod mem;
pub mod multi;
pub mod sim;
pub mod stats;
pub mod uvm;
pub mod workload;
pub mod world;
pub mod xlat;
