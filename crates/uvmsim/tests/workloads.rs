//! Every workload generator, run end to end with its default parameters: it
//! finishes, issues exactly the warp memory instructions its pattern implies,
//! and gives the same metrics twice.

use std::time::Instant;
use uvmsim::config::{resolve, Source};
use uvmsim::stats::Metrics;
use uvmsim::workload::WorkloadKind;
use uvmsim::world::simulate;

fn run(sets: &[String]) -> Metrics {
    let c = resolve(&[] as &[Source], sets).unwrap_or_else(|e| panic!("{e}"));
    simulate(&c).unwrap_or_else(|e| panic!("{sets:?}: {e}"))
}

/// Metrics without the wall-clock ones.
fn simulated(x: &Metrics) -> Vec<(String, f64)> {
    x.0.iter().filter(|(k, _)| !uvmsim::stats::WALL_CLOCK_METRICS.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.as_f64())).collect()
}

/// Warp memory instructions the defaults imply (warp size 32), worked out from each generator's pattern.
fn expected_mem_insts(kind: WorkloadKind) -> Option<(u64, u64)> {
    let w = |threads: u64| threads.div_ceil(32);
    let exact = |n: u64| (n, n);
    Some(match kind {
        // 32 Ki lookups over 16 Ki threads: 2 rounds of a key read, 24 probes, an entry read.
        WorkloadKind::Gather => exact(w(16_384) * 2 * 26),
        // 64 Ki threads, 4 repeats of one load.
        WorkloadKind::Strided => exact(w(65_536) * 4),
        // 1024 threads x 512 hops.
        WorkloadKind::PointerChase => exact(w(1024) * 512),
        // 256 CTAs of 8 warps; 16 k-steps of 2 loads, then 1 store.
        WorkloadKind::TiledGemm => exact(256 * 8 * (16 * 2 + 1)),
        // 512 x 512 elements, 2 sweeps of 5 loads + 1 store.
        WorkloadKind::Stencil2d => exact(w(512 * 512) * 6 * 2),
        // 64^3 elements, 2 sweeps of 7 loads + 1 store.
        WorkloadKind::Stencil3d => exact(w(64 * 64 * 64) * 8 * 2),
        // 512 x 512 x 64, 2 launches, CTAs (8 x 128) of 4 warps; warp = row j, x columns i = 64 bx + lane and
        // i2 = i + 32. Per warp 4 prologue loads. Per plane k = 1..=62: every warp's 2 tops; the +-y halos
        // (2) of the 254 warps at ty 0 or 3 off the rows 0 and 511 per CTA column; lane 0's -x (CTA columns
        // 1..=7) and lane 31's +x (columns 0..=6), each on rows 1..=510; 2 stores per warp of rows 1..=510.
        WorkloadKind::ParboilStencil => {
            let warps = 8 * 128 * 4;
            let per_plane = warps * 2 + 8 * 254 * 2 + 2 * 7 * 510 + 8 * 510 * 2;
            exact(2 * (warps * 4 + 62 * per_plane))
        }
        // 512 x 512 cells, 2 launches of 2 loads (temperature, power) + 1 store.
        WorkloadKind::Hotspot => exact(w(512 * 512) * 3 * 2),
        // 16 Ki columns; 99 weight rows in launches of 20, 20, 20, 20, 19 rows, each with a cost load and a store.
        WorkloadKind::Pathfinder => exact(w(16_384) * (5 * 2 + 99)),
        // 64 x 64 tiles of corner + 16 reference rows + west + north + 16 stored rows.
        WorkloadKind::Nw => exact(64 * 64 * 35),
        // 256 x 256 pixels, 2 iterations of (5 loads + 5 stores) + (8 loads + 1 store).
        WorkloadKind::Srad => exact(w(256 * 256) * 19 * 2),
        // 16 x 16 Ki threads: forward 2 loads + 2 stores, adjust 4 loads + a store + 3 reloads + a store.
        WorkloadKind::Backprop => exact(w(16 * 16_384) * 13),
        // 16 Ki rows, a warp each: row_ptr[r], row_ptr[r+1], one chunk of 16 (indices, x, values), y.
        WorkloadKind::Spmv => exact(16_384 * 6),
        // 32 Ki lookups over 16 Ki threads (2 rounds): 16 or 17 probes of 68000 energies, then 8 nuclides x
        // (an index-grid read + 12 grid-point reads).
        WorkloadKind::Xsbench => (w(16_384) * 2 * (16 + 8 * 13), w(16_384) * 2 * (17 + 8 * 13)),
        // 1024 queries, CTAs of 8 warps, 2 inner levels and the leaf: per level every warp loads currKnode, the
        // node keys and the query key, the warps up to the key's slot the next keys, the slot's warp offset and
        // the child index and stores offset, warp 0 loads offset and stores currKnode; the leaf's slot warp the
        // index, the record and the answer. The count depends on each query's slots: 87 to 101 per query.
        WorkloadKind::Btree => (1024 * 87, 1024 * 101),
        // 4096 threads, one access each.
        WorkloadKind::FaultBurst => exact(w(4096)),
        // The CUDA port, 32^3 rows, 32 per warp (one x row), 2 iterations: 8 waxpbys (3 per warp), 3 matvecs, 4 dots.
        // matvec: per warp 27 index loads, a value and a p gather for each entry some lane has (27 less 3 if y = 0,
        // less 9 if z = 0), the store. dot: the memset's 32 warps a store; dot_kernel's 64 CTAs of 16 warps 2 loads
        // a warp and a store a CTA; the final CTA's 32 warps a load and one store.
        WorkloadKind::Minife => exact(8 * 3 * 1024 + 3 * (1024 * (27 + 2 * 27 + 1) - 2 * (3 * 32 + 9 * 32)) + 4 * (32 + 64 * 33 + 33)),
        // 8^3 cells x 16 atoms = 256 warps: the atom lists 2, own x, y, z 3, 27 x (table entry + count + 16 x 3
        // coordinates), the force's 3 components and the energy 4.
        WorkloadKind::Comd => exact(256 * (2 + 3 + 27 * (2 + 16 * 3) + 4)),
        // 4^3 coarse blocks, the 8 central ones refined: 120 blocks of 8^3 cells. Per iteration: the halo exchange's
        // 120 x 6 x 64 threads (1440 warps, minus the 2 x 96 on domain-boundary faces) load and store, the stencil's
        // 1920 warps make 7 loads and a store.
        WorkloadKind::Miniamr => exact(2 * ((1440 - 192) * 2 + 1920 * 8)),
        // 11 x 9 macroblocks, 1089 positions. sad-mb: 16 CTAs of 2 warps per macroblock: warp 0 stages the block
        // (1 load), both make 144 fetches of one pixel, warp 0 copies out (9 trips of 2 stores); sad-8: 4 warps,
        // sad-16: 1 warp per macroblock, 18 trips of 4 loads and 5 stores.
        WorkloadKind::Sad => exact(99 * 16 * (1 + 2 * 144 + 18) + 99 * 5 * 18 * 9),
        // One work-item touching 64 pages, before and after the shootdowns.
        WorkloadKind::Shootdown => exact(2 * 64),
        // 512 Ki samples: 16 taps, a load each, and the store.
        WorkloadKind::Fir => exact(w(524_288) * 17),
        // 2048 points: swap 32 loads + 32 stores; 5 iterations of 5 x 32 loads + the membership store.
        WorkloadKind::Kmeans => exact(w(2048) * (64 + 5 * 161)),
        // 2048 rows, a warp each, 4 iterations: row pointers, one chunk of 20 (indices, values, x), the store.
        WorkloadKind::Pagerank => exact(2048 * 5 * 4),
        // 16 Ki blocks: load, 14 x 16 S-box lookups, store.
        WorkloadKind::Aes => exact(w(16_384) * 226),
        // 512 x 512 threads: 4 float4 loads + 4 float4 stores.
        WorkloadKind::MatrixTranspose => exact(w(512 * 512) * 8),
        // 4096 threads, 91 passes of 2 loads + 2 stores.
        WorkloadKind::BitonicSort => exact(w(4096) * 91 * 4),
        // 32 Ki threads: 8 loads + 8 stores.
        WorkloadKind::Fft => exact(w(32_768) * 16),
        // 510 x 510 pixels: 9 loads + 1 store.
        WorkloadKind::SimpleConvolution => exact(w(510 * 510) * 10),
        // 27 x 126^2 column-matrix elements: a load and a store each.
        WorkloadKind::Im2col => exact(w(27 * 126 * 126) * 2),
        // im2col of 27 x 62^2 elements, then 8 x 62^2 outputs of 27 x 2 loads + 1 store.
        WorkloadKind::Conv2d => exact(w(27 * 62 * 62) * 2 + w(8 * 62 * 62) * 55),
        // 2000 iterations of one 16-thread warp that loads (no store by default).
        WorkloadKind::PingPong => exact(2000),
        // 512 x 512 points, 4 passes of a load and a store.
        WorkloadKind::Cufft => exact(w(512 * 512) * 8),
        // 512 x 512 cells; init 4 + 5 + 12 accesses, 3 iterations of 10 + 6 + 3.
        WorkloadKind::Tealeaf => exact(w(512 * 512) * (21 + 3 * 19)),
        // Levels 64^3 .. 4^3, 2 V-cycles: per level above the bottom 2 smooth passes + residual (9 each) down,
        // interpolation (3) + 2 passes up, restriction (10) per coarse warp; 8 passes (9 each) on the 2 bottom warps.
        WorkloadKind::Hpgmg => {
            let fine: u64 = [64u64, 32, 16, 8].iter().map(|m| w(m * m * m)).sum();
            let coarse: u64 = [32u64, 16, 8, 4].iter().map(|m| w(m * m * m)).sum();
            exact(2 * (fine * (27 + 21) + coarse * 10 + 2 * 8 * 9))
        }
        // 2048 rows, a warp each: nnz 64 chunks + count; dense2csr row_ptr + 64 chunks + 2 x 2 stores; SpMV 8;
        // the scan's 64 warps a load and a store.
        WorkloadKind::Cusparse => exact(2048 * (65 + 69 + 8) + w(2048) * 2),
        _ => return None,
    })
}

#[test]
fn every_generator_runs_with_its_defaults_and_is_deterministic() {
    for kind in WorkloadKind::ALL {
        if matches!(kind, WorkloadKind::Trace | WorkloadKind::WarpTrace | WorkloadKind::Accelsim) {
            continue; // needs a file; the trace modules and tests/test_trace.py cover them
        }
        let sets: Vec<String> =
            [format!("workload.kind={}", kind.name())].into_iter().chain(needs(kind).iter().map(|s| s.to_string())).collect();
        let t = Instant::now();
        let a = run(&sets);
        let wall = t.elapsed();
        let insts = a.get("gpu0.warp_mem_insts").unwrap();
        eprintln!("{:14} {:>9} warp mem insts, {:>12.0} ns simulated, {:?}", kind.name(), insts, a.get("time.kernel_ns").unwrap(), wall);
        assert!(insts > 0.0, "{}", kind.name());
        if let Some((lo, hi)) = expected_mem_insts(kind) {
            assert!((lo as f64..=hi as f64).contains(&insts), "{}: {insts} warp memory instructions, expected {lo}..={hi}", kind.name());
        }
        assert_eq!(simulated(&a), simulated(&run(&sets)), "{} is not deterministic", kind.name());
    }
}

/// The generators handle 64-lane wavefronts and managed memory (every first
/// touch a far fault, faulted instructions replayed) on a small instance.
#[test]
fn every_generator_runs_managed_with_64_lane_wavefronts() {
    for kind in WorkloadKind::ALL {
        if matches!(kind, WorkloadKind::Trace | WorkloadKind::WarpTrace | WorkloadKind::Accelsim) {
            continue;
        }
        let sets: Vec<String> = [format!("workload.kind={}", kind.name()), "gpu.warp_size=64".into(), "workload.managed=true".into()]
            .into_iter()
            .chain(small(kind).iter().chain(needs(kind)).map(|s| s.to_string()))
            .collect();
        let x = run(&sets);
        // In IOMMU mode far faults take the APU's PPR path instead of the UVM driver.
        let faults = x.get("uvm.faults.unique").unwrap() + x.get("apu.faults").unwrap_or(0.0);
        assert!(faults > 0.0, "{}", kind.name());
        assert!(x.get("gpu0.warp_mem_insts").unwrap() > 0.0, "{}", kind.name());
    }
}

/// What a generator needs of the system besides its defaults.
fn needs(kind: WorkloadKind) -> &'static [&'static str] {
    match kind {
        WorkloadKind::Shootdown => &["translation.mode=iommu"],
        _ => &[],
    }
}

/// Small instances for the managed runs (far faults make runs slower).
fn small(kind: WorkloadKind) -> &'static [&'static str] {
    match kind {
        WorkloadKind::Stride | WorkloadKind::Concurrency => &["workload.stride.accesses=100", "workload.concurrency.accesses=100"],
        WorkloadKind::Regular => &["workload.regular.threads=4096"],
        WorkloadKind::Random => &["workload.random.threads=4096"],
        WorkloadKind::Stream => &["workload.stream.elements=65536"],
        WorkloadKind::Gather => &["workload.gather.lookups=4096", "workload.gather.threads=1024"],
        WorkloadKind::PointerChase => &["workload.pointer_chase.hops=16"],
        WorkloadKind::Strided => &["workload.strided.threads=4096", "workload.strided.stride_elements=1024"],
        WorkloadKind::TiledGemm => &["workload.tiled_gemm.n=128"],
        WorkloadKind::BlasGemm => &["workload.blas_gemm.n=256"],
        WorkloadKind::Stencil2d => &["workload.stencil2d.nx=256", "workload.stencil2d.ny=64"],
        WorkloadKind::Stencil3d => &["workload.stencil3d.nz=8"],
        WorkloadKind::Hotspot => &["workload.hotspot.rows=64"],
        WorkloadKind::Pathfinder => &["workload.pathfinder.rows=21", "workload.pathfinder.cols=4096"],
        WorkloadKind::Nw => &["workload.nw.n=256"],
        WorkloadKind::Srad => &["workload.srad.rows=64", "workload.srad.iterations=1"],
        WorkloadKind::Backprop => &["workload.backprop.input_units=1024"],
        WorkloadKind::Spmv => &["workload.spmv.rows=2048", "workload.spmv.warp_per_row=false"],
        WorkloadKind::Btree => &["workload.btree.queries=64"],
        WorkloadKind::Xsbench => &["workload.xsbench.lookups=4096", "workload.xsbench.threads=1024"],
        WorkloadKind::Minife => &["workload.minife.nz=4", "workload.minife.iterations=1"],
        WorkloadKind::Comd => &["workload.comd.cells_z=2"],
        WorkloadKind::Miniamr => &["workload.miniamr.iterations=1"],
        WorkloadKind::Bfs => &["workload.bfs.scale=10"],
        WorkloadKind::Sad => &["workload.sad.width=64", "workload.sad.height=32"],
        WorkloadKind::Fir => &["workload.fir.length=65536"],
        WorkloadKind::Kmeans => &["workload.kmeans.points=1024", "workload.kmeans.iterations=1"],
        WorkloadKind::Pagerank => &["workload.pagerank.nodes=512"],
        WorkloadKind::Aes => &["workload.aes.length=65536"],
        WorkloadKind::MatrixTranspose => &["workload.matrix_transpose.width=512"],
        WorkloadKind::BitonicSort => &["workload.bitonic_sort.length=4096"],
        WorkloadKind::Fft => &["workload.fft.points=32768"],
        WorkloadKind::SimpleConvolution => &["workload.simple_convolution.width=126", "workload.simple_convolution.height=126"],
        WorkloadKind::Im2col => &["workload.im2col.height=32", "workload.im2col.width=32"],
        WorkloadKind::Conv2d => &["workload.conv2d.height=32", "workload.conv2d.width=32"],
        WorkloadKind::PingPong => &["workload.ping_pong.iterations=50"],
        WorkloadKind::Cufft => &["workload.cufft.n1=64"],
        WorkloadKind::Tealeaf => &["workload.tealeaf.nx=256", "workload.tealeaf.ny=64", "workload.tealeaf.iterations=1"],
        WorkloadKind::Hpgmg => &["workload.hpgmg.n=16", "workload.hpgmg.cycles=1"],
        WorkloadKind::Cusparse => &["workload.cusparse.n=512"],
        _ => &[],
    }
}
