//! Helpers shared by the integration tests (each test file is its own crate: `mod common;`).

#![allow(dead_code)] // not every test crate uses every helper

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// An Accel-Sim trace of one thread block of 64 threads whose warps run `warps[0]` and `warps[1]`
/// (SASS opcodes, `"LDG"` a 4-byte load of lane l at 0x7f0000000000 + 4 l, `"FFMA"` one cycle).
pub fn trace(dir: &Path, warps: [&[&str]; 2]) -> PathBuf {
    let mut t = String::from(
        "-kernel name = k\n-kernel id = 1\n-grid dim = (1,1,1)\n-block dim = (64,1,1)\n-shmem = 0\n-nregs = 8\n\
         -binary version = 70\n-cuda stream id = 0\n-shmem base_addr = 0x00007f1000000000\n\
         -local mem base_addr = 0x00007f1100000000\n-nvbit version = 1.5.5\n-accelsim tracer version = 4\n\
         -enable lineinfo = 0\n\n#traces format = [line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] \
         mem_width [adrrescompress?] [mem_addresses] immediate\n\n#BEGIN_TB\n\nthread block = 0,0,0\n",
    );
    for (w, insts) in warps.iter().enumerate() {
        writeln!(t, "\nwarp = {w}\ninsts = {}", insts.len()).unwrap();
        for (i, op) in insts.iter().enumerate() {
            let pc = i * 16;
            match *op {
                "LDG" => writeln!(t, "{pc:04x} ffffffff 1 R4 LDG.E 1 R2 4 1 0x7f0000000000 4").unwrap(),
                "FFMA" => writeln!(t, "{pc:04x} ffffffff 1 R6 FFMA 2 R6 R6 0").unwrap(),
                bar => writeln!(t, "{pc:04x} ffffffff 0 {bar} 0 0").unwrap(),
            }
        }
    }
    t.push_str("\n#END_TB\n");
    std::fs::write(dir.join("kernel-1.traceg"), t).unwrap();
    let list = dir.join("kernelslist.g");
    std::fs::write(&list, "kernel-1.traceg\n").unwrap();
    list
}
