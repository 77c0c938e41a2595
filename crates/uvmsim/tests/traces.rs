//! Trace inputs from the front ends' side (`api`, as the CLI and Python call it):
//! converting onto the input, implausible Accel-Sim copies, records of GPUs that
//! are not replayed, traces without accesses, and a timed trace replayed on several GPUs.

use std::path::Path;
use uvmsim::api;
use uvmsim::config::{resolve, Source};
use uvmsim::sim::SimError;
use uvmsim::stats::Metrics;
use uvmsim::world::simulate;

const HEADER: &str = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n";

fn convert(input: &Path, out: &Path) -> Result<String, String> {
    api::trace_convert_json(&input.display().to_string(), &out.display().to_string(), &[], &[]).map_err(|e| e.to_string())
}

fn replay(kind: &str, path: &Path, sets: &[&str]) -> Result<Metrics, SimError> {
    let mut o = vec![format!("workload.kind={kind}"), format!("workload.{}.path={:?}", kind.replace('-', "_"), path.display().to_string())];
    o.extend(sets.iter().map(|s| s.to_string()));
    simulate(&resolve(&[], &o).unwrap_or_else(|e| panic!("{e}")))
}

fn bad_input(r: Result<Metrics, SimError>) -> String {
    match r {
        Err(SimError::BadInput(m)) => m,
        Err(e) => panic!("not bad input: {e}"),
        Ok(_) => panic!("accepted"),
    }
}

/// Files in `dir` other than `keep` (a temporary file left behind would show here).
fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.retain(|n| !keep.contains(&n.as_str()));
    v
}

#[test]
fn converting_a_trace_onto_itself_is_refused_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    let body = format!("{HEADER}10,1,0,0,R,0x1000,64\n12,1,1,1,W,0x2000,64\n");
    std::fs::write(&csv, &body).unwrap();
    let uvmt = dir.path().join("t.uvmt");
    convert(&csv, &uvmt).unwrap();
    let uvmt_bytes = std::fs::read(&uvmt).unwrap();
    std::fs::hard_link(&csv, dir.path().join("link.csv")).unwrap();
    // The same path, another spelling of it, a hard link; and a .uvmt onto itself.
    let dotted = dir.path().join(".").join("t.csv");
    for (input, out) in [(&csv, &csv), (&csv, &dotted), (&csv, &dir.path().join("link.csv")), (&uvmt, &uvmt)] {
        let e = convert(input, out).unwrap_err();
        assert!(e.contains("is the input trace") && e.contains(&out.display().to_string()), "{e}");
    }
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), body);
    assert_eq!(std::fs::read(&uvmt).unwrap(), uvmt_bytes);
    assert!(others(dir.path(), &["t.csv", "t.uvmt", "link.csv"]).is_empty());
}

#[test]
fn a_failed_conversion_leaves_no_output_and_keeps_an_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, format!("{HEADER}10,1,0,0,R,0x1000,64\n9,1,0,0,R,0x1000,64\n")).unwrap();
    let out = dir.path().join("out.uvmt");
    let e = convert(&bad, &out).unwrap_err();
    assert!(e.contains("bad.csv:3: time goes backwards"), "{e}");
    assert!(!out.exists(), "a failed conversion left {}", out.display());
    // An existing OUT is replaced only by a finished conversion.
    std::fs::write(&out, "old").unwrap();
    convert(&bad, &out).unwrap_err();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old");
    assert!(others(dir.path(), &["bad.csv", "out.uvmt"]).is_empty(), "{:?}", others(dir.path(), &[]));
    // A good conversion replaces it, gzip chosen by OUT's name (not the temporary file's).
    let good = dir.path().join("good.csv");
    std::fs::write(&good, format!("{HEADER}10,1,0,0,R,0x1000,64\n")).unwrap();
    convert(&good, &out).unwrap();
    let gz = dir.path().join("back.csv.gz");
    convert(&out, &gz).unwrap();
    assert_eq!(&std::fs::read(&gz).unwrap()[..2], &[0x1f, 0x8b]);
}

/// A conversion whose OUT cannot be written is an output error (the CLI's exit code 1), not bad input (exit
/// code 2), whichever converter writes it; a malformed IN stays bad input naming its line. The Python tests
/// (test_trace.py) fail OUT mid-way, past a file size limit.
#[test]
fn an_out_that_cannot_be_written_is_an_output_error_and_a_bad_in_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, format!("{HEADER}10,1,0,0,R,0x1000,64\n")).unwrap();
    let uvmt = dir.path().join("t.uvmt");
    convert(&csv, &uvmt).unwrap();
    let list = dir.path().join("kernelslist.g");
    std::fs::write(&list, "").unwrap();
    let api = |input: &Path, out: &Path| api::trace_convert_json(&input.display().to_string(), &out.display().to_string(), &[], &[]);
    let missing = dir.path().join("no");
    let output_error = |input: &Path, out: &Path| match api(input, out) {
        Err(api::ApiError::Output(m)) => assert!(m.starts_with(&format!("{}: cannot write", out.display())), "{m}"),
        r => panic!("{} -> {}: not an output error: {r:?}", input.display(), out.display()),
    };
    for (input, out) in [(&csv, missing.join("x.uvmt")), (&uvmt, missing.join("x.csv")), (&list, missing.join("w.uvmt"))] {
        output_error(input, &out);
    }
    std::fs::create_dir(&missing).unwrap();
    output_error(&csv, &missing); // a directory
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, format!("{HEADER}10,1,0,0,Q,0x1000,64\n")).unwrap();
    match api(&bad, &dir.path().join("x.uvmt")) {
        Err(api::ApiError::Config(e)) => assert!(e.to_string().contains("bad.csv:2: kind `Q`"), "{e}"),
        r => panic!("not bad input: {r:?}"),
    }
    assert!(matches!(api(&csv, &csv), Err(api::ApiError::Config(_))));
    assert!(others(dir.path(), &["t.csv", "t.uvmt", "kernelslist.g", "bad.csv", "no"]).is_empty());
}

/// The hand-made Accel-Sim trace in a fresh directory, its copy resized to `bytes`.
fn accelsim_with_copy(bytes: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/accelsim");
    let dir = tempfile::tempdir().unwrap();
    for f in ["kernelslist.g", "kernel-1.traceg"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    let list = dir.path().join("kernelslist.g");
    let text = std::fs::read_to_string(&list).unwrap();
    assert!(text.contains("MemcpyHtoD,0x00007f0000000000,512\n"), "{text}");
    std::fs::write(&list, text.replace("MemcpyHtoD,0x00007f0000000000,512\n", &format!("MemcpyHtoD,0x00007f0000000000,{bytes}\n")))
        .unwrap();
    (dir, list)
}

#[test]
fn an_accelsim_copy_larger_than_any_gpu_memory_is_refused_and_large_ones_cost_little() {
    let (_d, list) = accelsim_with_copy(256 << 40);
    let e = api::trace_info_json(&list.display().to_string()).unwrap_err().to_string();
    assert!(e.contains("kernelslist.g:") && e.contains("implausible copy size 281474976710656"), "{e}");
    let (_d, list) = accelsim_with_copy((1 << 40) + 1);
    let e = api::trace_info_json(&list.display().to_string()).unwrap_err().to_string();
    assert!(e.contains("kernelslist.g:1: implausible copy size"), "{e}");
    // 1 TiB: one buffer, found from the copy's range (not its 512 K granules one by one).
    let (_d, list) = accelsim_with_copy(1 << 40);
    let t = std::time::Instant::now();
    let info: serde_json::Value = serde_json::from_str(&api::trace_info_json(&list.display().to_string()).unwrap()).unwrap();
    assert!(t.elapsed().as_secs_f64() < 2.0, "{:?}", t.elapsed());
    assert_eq!(info["page_sizes"], serde_json::json!([[4096, 1u64 << 40]]), "{info}");
}

#[test]
fn records_of_gpus_not_replayed_do_not_stretch_the_run_and_gpu_0_is_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.csv");
    std::fs::write(&one, format!("{HEADER}10,1,0,0,R,0x1000,64\n20,1,0,0,R,0x2000,64\n")).unwrap();
    let two = dir.path().join("two.csv");
    std::fs::write(&two, format!("{HEADER}10,1,0,0,R,0x1000,64\n15,2,0,0,R,0x5000,64\n20,1,0,0,R,0x2000,64\n900000,2,0,0,R,0x3000,64\n"))
        .unwrap();
    let total = |p: &Path, gpu: u32| replay("trace", p, &[&format!("workload.trace.gpu={gpu}")]).unwrap().get("time.total_ns").unwrap();
    // GPU 1's replay ends at its own last access, not at GPU 2's last record.
    assert_eq!(total(&two, 1), total(&one, 1));
    assert!(total(&two, 1) < 10_000.0, "{}", total(&two, 1));
    assert!(total(&two, 2) > 900_000.0);
    // There is no GPU 0: a malformed record, with its line.
    let zero = dir.path().join("zero.csv");
    std::fs::write(&zero, format!("{HEADER}10,1,0,0,R,0x1000,64\n318202,0,0,0,R,0x1000,64\n")).unwrap();
    let m = bad_input(replay("trace", &zero, &[]));
    assert!(m.contains("zero.csv:3: gpu 0 does not exist"), "{m}");
    let e = api::trace_info_json(&zero.display().to_string()).unwrap_err().to_string();
    assert!(e.contains("zero.csv:3: gpu 0 does not exist"), "{e}");
}

/// Two GPUs replay one timed trace (its GPUs 1 and 2). A record on a page no GPU holds, or one
/// another GPU holds, is a multi-GPU far fault with no warp to park: the host answers it at once
/// and the access is issued again when the page is ready (`World::step_trace`). Hand-worked:
/// GPU 1 reads page 0x100 (from the host), GPU 2 reads it, GPU 1 writes it, GPU 2 reads page
/// 0x200 (from the host). On touch, the page moves to GPU 2 and back (two peer migrations); on
/// first touch it stays on GPU 1 and GPU 2 maps it remotely (its one remote access), and GPU 1's
/// write hits its own page (no fault).
#[test]
fn a_multi_gpu_trace_replay_faults_migrates_on_touch_and_maps_remotely_on_first_touch() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("two.csv");
    std::fs::write(
        &csv,
        format!("{HEADER}10,1,0,0,R,0x100000,64\n20000,2,0,0,R,0x100000,64\n40000,1,0,0,W,0x100040,64\n60000,2,0,0,R,0x200000,64\n"),
    )
    .unwrap();
    let preset = Source::preset("li-4gpu-gmmu", std::fs::read_to_string("../../presets/li-4gpu-gmmu.toml").unwrap());
    let run = |migration: &str, link_gbps: f64| {
        let o = vec![
            "workload.kind=trace".to_string(),
            format!("workload.trace.path={:?}", csv.display().to_string()),
            "multi.gpus=2".to_string(),
            format!("multi.migration={migration:?}"),
            format!("link.bandwidth_gbps={link_gbps:?}"),
        ];
        let m = simulate(&resolve(std::slice::from_ref(&preset), &o).unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"));
        let get = |k: &str| m.get(k).unwrap_or(0.0);
        (
            [get("gpu0.far_faults"), get("gpu1.far_faults"), get("multi.migrations.h2d"), get("multi.migrations.p2p")],
            [get("multi.remote_accesses"), get("time.total_ns")],
        )
    };
    let (on_touch, [remote, total]) = run("on-touch", 16.0);
    assert_eq!(on_touch, [2.0, 2.0, 2.0, 2.0], "far faults of GPUs 0 and 1, host and peer migrations");
    assert_eq!(remote, 0.0);
    // The last access is issued again once its page has crossed the host link: a link ten times
    // slower delays the run's end by the page's longer transfer, 4096 B / 1.6 GB/s - 4096 B / 16 GB/s.
    let (_, [_, slow]) = run("on-touch", 1.6);
    assert!((slow - total - (2560.0 - 256.0)).abs() < 1.0, "{total} -> {slow}");
    let (first_touch, [remote, _]) = run("first-touch", 16.0);
    assert_eq!(first_touch, [1.0, 2.0, 2.0, 0.0], "far faults of GPUs 0 and 1, host and peer migrations");
    assert_eq!(remote, 1.0);
}

#[test]
fn a_trace_without_accesses_does_not_run_but_has_info() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("header.csv");
    std::fs::write(&csv, HEADER).unwrap();
    let uvmt = dir.path().join("header.uvmt");
    convert(&csv, &uvmt).unwrap();
    let list = dir.path().join("kernelslist.g");
    std::fs::write(&list, "").unwrap();
    for (kind, p) in [("trace", &csv), ("trace", &uvmt), ("accelsim", &list)] {
        let m = bad_input(replay(kind, p, &[]));
        assert!(m.contains(&p.display().to_string()) && m.contains("the trace holds no accesses"), "{m}");
        let info: serde_json::Value = serde_json::from_str(&api::trace_info_json(&p.display().to_string()).unwrap()).unwrap();
        assert_eq!(info["accesses"], 0, "{info}");
    }
    // A warp trace of it, too.
    let warps = dir.path().join("warps.uvmt");
    convert(&list, &warps).unwrap();
    let m = bad_input(replay("warp-trace", &warps, &[]));
    assert!(m.contains("warps.uvmt") && m.contains("the trace holds no accesses"), "{m}");
}

#[test]
fn an_interrupt_stops_trace_info_and_convert_and_leaves_no_output() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use uvmsim::sim::with_cancel;
    let dir = tempfile::tempdir().unwrap();
    let s = |p: &Path| p.display().to_string();
    // More records than one look at the flag covers (every 4096), in every format `info` and `convert` read.
    let csv = dir.path().join("t.csv");
    let body: String = (0..10_000).map(|i| format!("{i},1,0,0,R,{:#x},64\n", 0x1000 + 64 * i)).collect();
    std::fs::write(&csv, format!("{HEADER}{body}")).unwrap();
    let timed = dir.path().join("t.uvmt");
    convert(&csv, &timed).unwrap();
    let warps = dir.path().join("w.uvmt");
    api::trace_record_json(&[], &["workload.kind=stream".into(), "workload.stream.elements=100000".into()], &s(&warps)).unwrap();
    let (_a, list) = accelsim_with_copy(512);
    let inputs = ["t.csv", "t.uvmt", "w.uvmt"];
    let set = Arc::new(AtomicBool::new(true));
    for p in [&csv, &timed, &warps, &list] {
        let e = with_cancel(set.clone(), || api::trace_info_json(&s(p))).unwrap_err().to_string();
        // Named by the file it was reading (a kernelslist's kernel file, beside it).
        assert!(e.contains(&s(p.parent().unwrap())) && e.ends_with(": interrupted"), "{e}");
        // An unset flag changes nothing.
        with_cancel(Arc::new(AtomicBool::new(false)), || api::trace_info_json(&s(p))).unwrap();
    }
    for (input, out) in [(&csv, "out.uvmt"), (&timed, "out.csv"), (&timed, "out.csv.gz"), (&list, "out-warps.uvmt")] {
        let out = dir.path().join(out);
        let e = with_cancel(set.clone(), || convert(input, &out)).unwrap_err();
        assert!(e.contains("interrupted"), "{e}");
        assert!(others(dir.path(), &inputs).is_empty(), "an interrupted conversion left {:?}", others(dir.path(), &inputs));
    }
}
