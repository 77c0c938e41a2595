//! Fuzz target: `uvmsim::fuzz::trace_uvmt` (its doc says what the input is and what must hold;
//! the body lives in the crate so that it is built and tested with it).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| uvmsim::fuzz::trace_uvmt(data));
