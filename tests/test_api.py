"""The Python API: layering, value conversion, results on disk, determinism."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import uvmsim
from conftest import WORKLOADS
from uvmsim import ConfigError, _core
from uvmsim._files import MissingInputError

# A small dependent-stride run on the APU: every access is an IOMMU translation.
SMALL = {
    "workload.kind": "stride",
    "workload.stride.accesses": 300,
    "workload.stride.stride_bytes": 4096,
}
# Unsorted gather: its keys come from the seeded RNG.
RANDOM = {
    "workload.kind": "gather",
    "workload.gather.table_entries": 1 << 20,
    "workload.gather.lookups": 4096,
    "workload.gather.threads": 1024,
    "workload.gather.sorted": False,
}
# Wall-clock measurements, the only metrics allowed to differ between identical runs.
WALL_CLOCK = uvmsim.WALL_CLOCK_METRICS


def test_toml_values() -> None:
    assert uvmsim.toml_value(True) == "true"
    assert uvmsim.toml_value(3) == "3"
    assert uvmsim.toml_value(2.5) == "2.5"
    assert uvmsim.toml_value("2MiB") == '"2MiB"'
    assert uvmsim.toml_value('a"b\\') == '"a\\"b\\\\"'
    assert uvmsim.toml_value([1, "x"]) == '[1, "x"]'
    with pytest.raises(TypeError, match="cannot express object"):
        uvmsim.toml_value(object())
    # TOML forbids a raw DEL (0x7f) in a basic string, which JSON leaves raw.
    assert uvmsim.toml_value("a\x7fb") == '"a\\u007fb"'


def test_numpy_numbers_are_plain_config_values() -> None:
    # Values from a DataFrame or np.linspace: np.float64's repr is "np.float64(1000.0)" under NumPy 2, np.int64
    # is no int, np.bool_ no bool.
    import numpy as np

    assert uvmsim.overrides(
        {"gpu.core_mhz": np.float64(1000.0), "a": np.int64(1024), "b": np.bool_(True), "c": np.float32(0.5)}
    ) == ["gpu.core_mhz=1000.0", "a=1024", "b=true", "c=0.5"]
    r = uvmsim.run(
        preset="titan-v",
        set={"workload.kind": "stream", "workload.stream.elements": np.int64(1024), "gpu.core_mhz": np.float64(900)},
    )
    assert r.config["gpu"]["core_mhz"] == 900.0 and r.config["workload"]["stream"]["elements"] == 1024


def test_a_key_given_twice_in_a_mapping_is_refused() -> None:
    # As a dotted key and nested: the last would silently win.
    twice = {"uvm.batch_size": 1, "uvm": {"batch_size": 2}}
    with pytest.raises(uvmsim.ConfigError, match=r"set: key `uvm.batch_size` given twice"):
        uvmsim.overrides(twice)
    with pytest.raises(uvmsim.ConfigError, match=r"<dict config>: key `uvm.batch_size` given twice"):
        uvmsim.run(preset="titan-v", config=twice)


def test_a_dict_config_integer_beyond_i64_says_so() -> None:
    # Not the TOML parser's multi-line excerpt: the key and the limit, as --set says it.
    with pytest.raises(
        uvmsim.ConfigError, match=r"^<dict config>: key `sim.seed`: 18446744073709551616 is out of range"
    ):
        uvmsim.run(preset="titan-v", config={"sim": {"seed": 2**64}})
    assert uvmsim.dict_to_toml({"sim": {"seed": 2**63 - 1}}) == "sim.seed = 9223372036854775807\n"
    # TOML's i64 bounds, both inclusive: -2^63 is a value, 2^63 and -2^63 - 1 are not.
    assert uvmsim.dict_to_toml({"x": -(2**63)}) == "x = -9223372036854775808\n"
    for v in (2**63, -(2**63) - 1):
        with pytest.raises(uvmsim.ConfigError, match=f"key `x`: {v} is out of range"):
            uvmsim.dict_to_toml({"x": v})


def test_overrides_from_mapping_and_list() -> None:
    assert uvmsim.overrides({"gpu": {"sms": 4}, "translation.page_size": "2MiB", "x.flag": False}) == [
        "gpu.sms=4",
        'translation.page_size="2MiB"',
        "x.flag=false",
    ]
    assert uvmsim.overrides(["gpu.sms=4"]) == ["gpu.sms=4"]
    assert uvmsim.overrides(None) == []
    with pytest.raises(TypeError, match="not a single string"):
        uvmsim.overrides("gpu.sms=4")  # a bare string would be split into characters
    with pytest.raises(TypeError, match=r"set entries must be 'key=value' strings, got \('gpu.sms', 4\)"):
        uvmsim.overrides([("gpu.sms", 4)])


def test_layers_apply_in_order(tmp_path: Path) -> None:
    f = tmp_path / "my.toml"
    f.write_text("[gpu]\nsms = 4\ncore_mhz = 500.0\n")
    cfg = uvmsim.resolve(f, preset="kaveri-apu", set={"gpu.core_mhz": 900.0})
    assert cfg["gpu"]["sms"] == 4  # file over preset
    assert cfg["gpu"]["core_mhz"] == 900.0  # --set over file
    assert cfg["translation"]["mode"] == "iommu"  # from the preset


def test_dict_config_errors_name_the_dict() -> None:
    with pytest.raises(uvmsim.ConfigError, match=r"<dict config>.*gpu\.l1tlb\.entires.*gpu\.l1tlb\.entries"):
        uvmsim.resolve({"gpu": {"l1tlb": {"entires": 3}}})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="absent.toml"):
        uvmsim.run(tmp_path / "absent.toml")


def test_run_writes_summary_and_load_reads_it(tmp_path: Path) -> None:
    r = uvmsim.run({"workload": {"stride": {"accesses": 300}}}, preset="kaveri-apu", set=SMALL, out=tmp_path / "o")
    assert r.metrics["gpu0.warp_mem_insts"] == 300
    assert r.metrics["time.kernel_ns"] > 0
    assert r.config["workload"]["stride"]["stride_bytes"] == "4KiB"  # sizes come back in binary units
    assert r.version == uvmsim.__version__
    back = uvmsim.load(tmp_path / "o")
    assert back == r  # `out` is not compared
    assert back.out == tmp_path / "o"
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["summary.json"]  # no temporary file left
    html = r._repr_html_()
    assert "<table>" in html and "time.kernel_ns" in html and "stride" in html


def test_the_notebook_caption_of_a_multi_application_run_names_its_applications() -> None:
    # With multi.apps the applications run, not workload.kind (li-4gpu-gmmu's resolved kind is the default,
    # "stride"): the caption named a workload that never ran.
    config = {"workload": {"kind": "stride"}, "multi": {"gpus": 4, "apps": ["fir", "matrix-transpose"]}}
    html = uvmsim.Result(metrics={"time.total_ns": 1.0}, config=config, version="t")._repr_html_()
    assert "applications fir, matrix-transpose" in html and "workload stride" not in html
    one = uvmsim.Result(metrics={"time.total_ns": 1.0}, config={"workload": {"kind": "fir"}}, version="t")
    assert "workload fir" in one._repr_html_()


MANAGED = {
    "workload.kind": "regular",
    "workload.managed": True,
    "workload.regular.threads": 2048,
    "uvm.records": True,
}


def test_tables_are_dataframes_on_disk_as_parquet_listed_by_the_summary(tmp_path: Path) -> None:
    # titan-v leaves prefetching off: the driver's density prefetcher makes the prefetch columns non-zero.
    sets = {**MANAGED, "uvm.prefetch.policy": "density"}
    r = uvmsim.run(preset="titan-v", set=sets, out=tmp_path)
    batches = r.tables["batches"]
    assert isinstance(batches, pd.DataFrame)
    assert {"batch", "start_ns", "end_ns", "fetched", "bytes_h2d"} <= set(batches.columns)
    assert len(batches) == r.metrics["uvm.batches"] > 1
    assert batches["bytes_h2d"].sum() == r.metrics["uvm.bytes_h2d"]
    # summary.json lists each table (file, rows) and holds none of their rows: those are in the Parquet files.
    raw = json.loads((tmp_path / "summary.json").read_text())
    assert set(r.tables) == {"batches", "migrations", "allocations"}
    assert raw["tables"] == {n: {"file": f"{n}.parquet", "rows": len(df)} for n, df in r.tables.items()}
    # The allocations table splits the driver's totals by buffer.
    allocs = r.tables["allocations"]
    assert allocs["faults"].sum() == r.metrics["uvm.faults.unique"] > 0
    assert allocs["pages_h2d"].sum() * 4096 == r.metrics["uvm.bytes_h2d"]
    assert allocs["prefetch_used"].sum() == r.metrics["uvm.prefetch.used"] > 0
    assert (allocs["prefetch_used"] + allocs["prefetch_wasted"] == allocs["prefetched"]).all()
    # The same run without records: its summary is as long, give or take the three table entries.
    uvmsim.run(preset="titan-v", set={**sets, "uvm.records": False}, out=tmp_path / "norec")
    without = (tmp_path / "norec" / "summary.json").stat().st_size
    assert abs((tmp_path / "summary.json").stat().st_size - without) < 300
    (tmp_path / "norec" / "summary.json").unlink()
    (tmp_path / "norec").rmdir()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "allocations.parquet",
        "batches.parquet",
        "migrations.parquet",
        "summary.json",
    ]
    for name, df in r.tables.items():
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / f"{name}.parquet"), df)
    back = uvmsim.load(tmp_path)
    assert back == r
    pd.testing.assert_frame_equal(back.tables["batches"], batches)
    assert back != uvmsim.Result(r.metrics, r.config, r.version, tables={"batches": batches.iloc[:1]})
    # The same table names, one table's rows differing: not equal (not only the names are compared).
    assert back != uvmsim.Result(r.metrics, r.config, r.version, tables={**back.tables, "batches": batches.iloc[:1]})
    assert "<code>batches</code>" in r._repr_html_() and f"({len(batches)} rows)" in r._repr_html_()


def test_load_reads_summaries_that_embed_their_tables(tmp_path: Path) -> None:
    # Runs written before the tables moved out of summary.json (e.g. an experiment resumed with --resume).
    r = uvmsim.run(preset="titan-v", set=MANAGED)
    old = {**r.to_json(), "tables": {n: df.to_dict(orient="records") for n, df in r.tables.items()}}
    (tmp_path / "summary.json").write_text(json.dumps(old))
    assert uvmsim.load(tmp_path) == r


def test_load_reads_a_summary_from_before_tables(tmp_path: Path) -> None:
    # summary.json had no "tables" key before record tables existed: such a run loads, with no tables.
    (tmp_path / "summary.json").write_text('{"metrics": {"x": 1}, "config": {}, "version": "0.1.0"}')
    assert uvmsim.load(tmp_path) == uvmsim.Result(metrics={"x": 1}, config={}, version="0.1.0")


def test_load_refuses_a_run_whose_tables_are_missing_or_stale(tmp_path: Path) -> None:
    uvmsim.run(preset="titan-v", set=MANAGED, out=tmp_path / "a")
    uvmsim.run(preset="titan-v", set={**MANAGED, "workload.regular.threads": 4096}, out=tmp_path / "b")
    (tmp_path / "b" / "batches.parquet").replace(tmp_path / "a" / "batches.parquet")
    with pytest.raises(uvmsim.ConfigError, match=r"batches\.parquet: \d+ rows, but .*summary\.json lists \d+"):
        uvmsim.load(tmp_path / "a")
    with pytest.raises(uvmsim.ConfigError, match=r"not a complete run: it lists table `batches` but .* is missing"):
        uvmsim.load(tmp_path / "b")
    (tmp_path / "b" / "batches.parquet").write_text("not parquet")
    with pytest.raises(uvmsim.ConfigError, match=r"batches\.parquet: not a readable Parquet table"):
        uvmsim.load(tmp_path / "b")


def test_load_reads_a_table_only_from_the_run_directory(tmp_path: Path) -> None:
    # A summary naming ../b/batches.parquet (or an absolute path) points outside its run: only the name counts.
    uvmsim.run(preset="titan-v", set=MANAGED, out=tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "batches.parquet").replace(tmp_path / "b" / "batches.parquet")
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    for file in ("../b/batches.parquet", str(tmp_path / "b" / "batches.parquet")):
        summary["tables"]["batches"]["file"] = file
        (tmp_path / "a" / "summary.json").write_text(json.dumps(summary))
        with pytest.raises(uvmsim.ConfigError, match=r"lists table `batches` but .*a/batches\.parquet is missing"):
            uvmsim.load(tmp_path / "a")


def test_results_differ_by_version() -> None:
    # `out` is left out of ==; the simulator's version is not (a result of another uvmsim is another result).
    a = uvmsim.Result(metrics={"x": 1}, config={}, version="0.1.0")
    assert a == uvmsim.Result(metrics={"x": 1}, config={}, version="0.1.0", out=Path("elsewhere"))
    assert a != uvmsim.Result(metrics={"x": 1}, config={}, version="0.2.0")


def test_run_trace_layers_under_set(tmp_path: Path) -> None:
    # trace= goes before set, as --trace before --set: an explicit workload.kind wins over the trace's.
    (tmp_path / "t.csv").write_text("time_ns,gpu,cu,wavefront,kind,vaddr,size\n100,1,0,0,R,0x1000,64\n")
    r = uvmsim.run(
        preset="mgpusim-r9nano",
        trace=tmp_path / "t.csv",
        set={"workload.kind": "stride", "workload.stride.accesses": 100},
    )
    assert r.config["workload"]["kind"] == "stride" and r.metrics["gpu0.warp_mem_insts"] == 100


def test_a_uvmt_with_a_damaged_magic_converts_as_binary_and_says_so(tmp_path: Path) -> None:
    # Named .uvmt, it is read as a binary trace whatever its first bytes (tracefmt.rs is_uvmt): converting it to
    # CSV is allowed and the reader names the damage, rather than OUT being refused as if IN were CSV text.
    (tmp_path / "d.uvmt").write_bytes(b"\xffVMTRACE" + bytes(4096))
    with pytest.raises(ConfigError, match=r"d\.uvmt: byte 0: not a uvmsim binary trace \(no UVMTRACE magic\)"):
        uvmsim.trace_convert(tmp_path / "d.uvmt", tmp_path / "o.csv")
    assert not (tmp_path / "o.csv").exists()


def test_a_kernel_list_is_known_by_its_g_suffix(tmp_path: Path) -> None:
    # accelsim.rs is_kernelslist takes any name ending in .g, not only Accel-Sim's own kernelslist.g.
    (tmp_path / "run.g").write_text("kernel-1.traceg\n")
    assert uvmsim.trace_workload(tmp_path / "run.g") == {
        "workload.kind": "accelsim",
        "workload.accelsim.path": str(tmp_path / "run.g"),
    }


def test_migrations_table_matches_the_link_bytes(tmp_path: Path) -> None:
    # The host and the GPU take pages from each other: copies both ways, every byte in the table.
    pp = {
        "workload.kind": "ping-pong",
        "workload.managed": True,
        "workload.ping_pong.pages": 8,
        "workload.ping_pong.iterations": 30,
        "uvm.records": True,
    }
    r = uvmsim.run(preset="titan-v", set=pp, out=tmp_path)
    mig = r.tables["migrations"]
    columns = {"start_ns", "end_ns", "first_page", "pages", "bytes", "direction", "cause", "copy_engine"}
    assert set(mig.columns) == columns | {"gpu", "src_gpu"}
    assert (mig["gpu"] == 0).all() and (mig["src_gpu"] == -1).all()  # one GPU: no peer copies
    by_dir = mig.groupby("direction")["bytes"].sum()
    assert by_dir["h2d"] == r.metrics["link.h2d.bytes"] and by_dir["d2h"] == r.metrics["link.d2h.bytes"]
    assert {"demand", "thrashing"} <= set(mig["cause"])
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "migrations.parquet"), mig)
    assert r.metrics["uvm.thrashing.throttles_gpu"] > 0 and r.metrics["uvm.thrashing.pins"] > 0


def test_multi_gpu_migrations_table_matches_the_moved_bytes(tmp_path: Path) -> None:
    # On-touch: pages come from the host at their first touch and move between GPUs after; a row per page.
    sets = {
        "workload.kind": "stencil2d",
        "workload.stencil2d.nx": 128,
        "multi.migration": "on-touch",
        "uvm.records": True,
    }
    r = uvmsim.run(preset="li-4gpu-gmmu", set=sets, out=tmp_path)
    m, mig = r.metrics, r.tables["migrations"]
    assert len(mig) == m["multi.migrations"] + m["multi.replications"]
    by_dir = mig.groupby("direction")["bytes"].sum()
    assert by_dir["h2d"] == m["multi.bytes_h2d"] > 0 and by_dir["p2p"] == m["multi.bytes_p2p"] > 0
    assert set(mig["direction"]) == {"h2d", "p2p"} and set(mig["cause"]) == {"demand"}
    p2p = mig[mig["direction"] == "p2p"]
    assert (p2p["src_gpu"] != p2p["gpu"]).all() and p2p["src_gpu"].between(0, 3).all()
    assert (mig[mig["direction"] == "h2d"]["src_gpu"] == -1).all() and (mig["copy_engine"] == 0).all()
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "migrations.parquet"), mig)


def test_load_explains_what_the_directory_is(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        uvmsim.load(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="no summary.json"):
        uvmsim.load(tmp_path)
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(uvmsim.ConfigError, match="not a run summary"):
        uvmsim.load(tmp_path)


def test_load_of_a_summary_json_file_names_its_directory(tmp_path: Path) -> None:
    # load("out/summary.json") said "`out/summary.json` is not a run directory: it has no summary.json".
    uvmsim.run(preset="kaveri-apu", set=SMALL, out=tmp_path / "out")
    with pytest.raises(FileNotFoundError, match=r"summary.json` is a file, not a run directory: .*holds it, `.*out`$"):
        uvmsim.load(tmp_path / "out" / "summary.json")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(FileNotFoundError, match=r"notes.txt` is a file, not a run directory$"):
        uvmsim.load(tmp_path / "notes.txt")


def test_load_refuses_a_table_name_no_run_keeps(tmp_path: Path) -> None:
    # tables=["batchs"] loaded nothing and said nothing; a known name the run lacks stays fine (none kept).
    uvmsim.run(preset="kaveri-apu", set=SMALL, out=tmp_path / "out")
    with pytest.raises(uvmsim.ConfigError, match="unknown record table `batchs`; did you mean `batches`"):
        uvmsim.load(tmp_path / "out", tables=["batchs"])
    assert uvmsim.load(tmp_path / "out", tables=["batches"]).tables == {}
    # The list is the one docs/metrics.md documents, and what the simulator writes.
    doc = (Path(__file__).resolve().parent.parent / "docs" / "metrics.md").read_text()
    section = doc.split("## Record tables", 1)[1].split("\n## ", 1)[0]
    assert sorted(re.findall(r"^- \*\*`([a-z_]+)`\*\*", section, re.M)) == sorted(uvmsim.TABLE_NAMES)
    sets = {"workload.kind": "regular", "workload.managed": True, "workload.regular.threads": 1024}
    records = {"uvm.records": True, "uvm.fault_records": True, "translation.walk_records_every": 1}
    r = uvmsim.run(preset="titan-v", set={**sets, **records})
    assert set(r.tables) <= set(uvmsim.TABLE_NAMES) and {"batches", "faults", "walks"} <= set(r.tables)


def test_a_run_into_a_directory_removes_the_tables_an_earlier_run_left(tmp_path: Path) -> None:
    sets = {"workload.kind": "regular", "workload.managed": True, "workload.regular.threads": 1024}
    uvmsim.run(preset="titan-v", set={**sets, "uvm.records": True}, out=tmp_path / "d")
    assert (tmp_path / "d" / "batches.parquet").is_file()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    uvmsim.run(preset="titan-v", set=sets, out=tmp_path / "d")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["notes.txt", "summary.json"]


def test_same_seed_same_metrics_other_seed_other_metrics() -> None:
    a = uvmsim.run(preset="kaveri-apu", set={**RANDOM, "sim.seed": 7}).metrics
    b = uvmsim.run(preset="kaveri-apu", set={**RANDOM, "sim.seed": 7}).metrics
    c = uvmsim.run(preset="kaveri-apu", set={**RANDOM, "sim.seed": 8}).metrics
    assert a.keys() == b.keys()
    assert {k: v for k, v in a.items() if k not in WALL_CLOCK} == {k: v for k, v in b.items() if k not in WALL_CLOCK}
    # The seed reaches the workload: a different seed permutes the lookups differently.
    assert a["time.kernel_ns"] != c["time.kernel_ns"]


@pytest.mark.parametrize("preset", ["kaveri-apu", "li-4gpu-ats", "titan-v"])
def test_a_resolved_config_reruns_as_a_preset_file(tmp_path: Path, preset: str) -> None:
    """docs/config.md, "Layering": a run's resolved config, written as TOML, reruns it as a preset file with the
    same metrics; as the user's config it is refused in every mode, since it sets keys the mode does not read (one
    GPU in GMMU mode too: [iommu] and [multi])."""
    r = uvmsim.run(preset=preset, set=SMALL)
    path = tmp_path / "resolved.toml"
    path.write_text(uvmsim.dict_to_toml(r.config))
    again = uvmsim.run(preset=path)
    assert again.config == r.config
    assert {k: v for k, v in again.metrics.items() if k not in WALL_CLOCK} == {
        k: v for k, v in r.metrics.items() if k not in WALL_CLOCK
    }
    with pytest.raises(uvmsim.ConfigError, match="is not read in"):
        uvmsim.run(r.config)


def test_summary_json_is_plain_json(tmp_path: Path) -> None:
    uvmsim.run(preset="kaveri-apu", set=SMALL, out=tmp_path)
    raw = json.loads((tmp_path / "summary.json").read_text())
    assert set(raw) == {"version", "config", "metrics", "tables"}
    assert raw["tables"] == {}  # uvm.records off: no tables
    assert all(isinstance(v, int | float) for v in raw["metrics"].values())


def test_config_reference_and_workloads() -> None:
    ref = {p["key"]: p for p in uvmsim.config_reference()}
    assert ref["gpu.l1tlb.entries"]["doc"]
    assert "translation.page_size" in ref and "iommu.walker.threads" in ref
    names = [w["name"] for w in uvmsim.workloads()]
    assert names == WORKLOADS


def test_the_headline_adds_unified_memory_only_when_the_driver_ran() -> None:
    base = {"time.total_ns": 1000.0, "sim.events": 10, "sim.wall_s": 0.1}
    uvm = {
        "uvm.batches": 3,
        "uvm.faults.raw": 40,
        "uvm.faults.unique": 30,
        "uvm.time_ns": 900.0,
        "uvm.bytes_h2d": 4096 * 30,
        "uvm.prefetch.pages": 0,
        "uvm.evictions": 2,
        "uvm.pages_evicted": 1024,
        "uvm.host.faults": 0,
        "uvm.host.time_ns": 0.0,
        "uvm.stage.fetch_ns": 50.0,
        "uvm.stage.block_ns": 400.0,
        "uvm.stage.unmap_ns": 300.0,
        "uvm.stage.replay_ns": 100.0,
        "uvm.stage.map_ns": 0.0,
        "uvm.stage.copy_ns": 5000.0,
        "baseline.slowdown_vs_copy": 2.5,
    }
    names = [k for k, _ in uvmsim.Result(metrics={**base, **uvm}, config={}, version="t").key_metrics()]
    assert names == [
        "time.total_ns",
        "uvm.faults.raw",
        "uvm.faults.unique",
        "uvm.batches",
        "uvm.time_ns",
        "uvm.bytes_h2d",
        "uvm.evictions",  # prefetch.pages is 0: left out
        "uvm.pages_evicted",  # the host never faulted: its rows are left out
        "uvm.stage.block_ns",  # the three largest stages; copy_ns overlaps them and is not one
        "uvm.stage.unmap_ns",
        "uvm.stage.replay_ns",
        "baseline.slowdown_vs_copy",
        "sim.events",
        "sim.wall_s",
    ]
    # A host that took pages back from the GPU (ping-pong, managed srad): its faults and time follow the evictions.
    host = {**base, **uvm, "uvm.host.faults": 32, "uvm.host.time_ns": 780.5}
    names = [k for k, _ in uvmsim.Result(metrics=host, config={}, version="t").key_metrics()]
    assert names[names.index("uvm.pages_evicted") + 1 : names.index("uvm.stage.block_ns")] == [
        "uvm.host.faults",
        "uvm.host.time_ns",
    ]
    # No batch serviced (device memory, or a managed run that never faulted): no unified-memory rows.
    idle = {**base, **uvm, "uvm.batches": 0}
    idle.pop("baseline.slowdown_vs_copy")
    assert [k for k, _ in uvmsim.Result(metrics=idle, config={}, version="t").key_metrics()] == [
        "time.total_ns",
        "sim.events",
        "sim.wall_s",
    ]


def test_the_headline_lists_only_stages_that_took_time() -> None:
    # Two stages took time, two none: the "three largest" are the two, not a 0 ns row.
    m = {"uvm.batches": 1, "uvm.stage.fetch_ns": 5.0, "uvm.stage.unmap_ns": 9.0, "uvm.stage.map_ns": 0.0}
    m |= {"uvm.stage.replay_ns": 0.0}
    names = [k for k, _ in uvmsim.Result(metrics=m, config={}, version="t").key_metrics()]
    assert names == ["uvm.batches", "uvm.stage.unmap_ns", "uvm.stage.fetch_ns"]


def test_a_multi_gpu_headline_of_gpus_that_made_no_access_reads_0() -> None:
    # No GPU translated anything (every count 0): hit rates and the weighted latency are 0, not a division by 0.
    m: dict[str, float | int] = {"multi.gpus": 2, "time.total_ns": 1.0}
    for g in range(2):
        m |= {f"gpu{g}.{k}": 0 for k in ("l1tlb.hits", "l1tlb.accesses", "l1tlb.misses", "l2tlb.hits")}
        m |= {f"gpu{g}.l2tlb.accesses": 0}
        m |= {f"gpu{g}.l1tlb.hit_rate": 0.0, f"gpu{g}.l1tlb.miss_latency_ns.mean": 0.0}
    rows = dict(uvmsim.Result(metrics=m, config={}, version="t").key_metrics())
    assert rows["gpu*.l1tlb.hit_rate"] == 0.0 and rows["gpu*.l1tlb.miss_latency_ns.mean"] == 0.0


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("time.total_ns", 999.96, "1000.0 ns"),  # below 1 µs: ns with one decimal
        ("time.total_ns", 1000.0, "1.000 µs"),  # from 1 µs (>=, not >)
        ("time.total_ns", 1e6, "1.000 ms"),
        ("time.total_ns", 2.5e9, "2.500 s"),
        ("uvm.time_ns", -1500.0, "-1.500 µs"),  # by magnitude
        ("gpu0.l1tlb.miss_latency_ns.mean", 148.44, "148.4 ns"),  # a statistic of a _ns metric: still ns
        ("sim.wall_s", 0.0071, "0.007 s"),
        ("uvm.bytes_h2d", 98304, "98,304"),
        ("multi.migrations", 3.0, "3"),  # a whole float: an integer
        ("multi.remote_fraction", 0.123456, "0.1235"),  # 4 significant digits
        ("gpu0.l1tlb.hit_rate", 0.5, "50.00 %"),
        ("gpu0.l1tlb.hit_rate", float("nan"), "nan"),  # not "nan %"
        ("time.total_ns", float("inf"), "inf"),  # not "inf s"
    ],
)
def test_format_metric_by_unit(name: str, value: float, shown: str) -> None:
    assert uvmsim.format_metric(name, value) == shown


def test_a_multi_gpu_headline_shows_the_whole_systems_gpu_rows() -> None:
    # Greedy placement can leave GPU 0 idle (li-4gpu-ats's default run: GPU 3 ran every CTA); its rows alone
    # read 0 instructions and a 0% hit rate. A multi-GPU headline sums over the GPUs instead.
    per_gpu = {
        0: {"warp_mem_insts": 0, "l1tlb.hits": 0, "l1tlb.accesses": 0, "l1tlb.misses": 0, "l2tlb.hits": 0},
        1: {"warp_mem_insts": 100, "l1tlb.hits": 90, "l1tlb.accesses": 100, "l1tlb.misses": 10, "l2tlb.hits": 5},
        3: {"warp_mem_insts": 300, "l1tlb.hits": 150, "l1tlb.accesses": 300, "l1tlb.misses": 30, "l2tlb.hits": 5},
    }
    latency = {0: 0.0, 1: 100.0, 3: 500.0}
    m: dict[str, float | int] = {"time.total_ns": 1.0, "multi.gpus": 4, "multi.far_faults": 9}
    for g in range(4):
        c = per_gpu.get(g, per_gpu[0])
        m |= {f"gpu{g}.{k}": v for k, v in c.items()}
        m |= {f"gpu{g}.l2tlb.accesses": c["l1tlb.misses"], f"gpu{g}.l2tlb.misses": c["l1tlb.misses"] - c["l2tlb.hits"]}
        m |= {f"gpu{g}.l1tlb.miss_latency_ns.mean": latency.get(g, 0.0), f"gpu{g}.walker.walks": 1}
        m |= {f"gpu{g}.walker.utilization": 0.1 * g}
        m |= {f"gpu{g}.l1tlb.hit_rate": c["l1tlb.hits"] / c["l1tlb.accesses"] if c["l1tlb.accesses"] else 0.0}
        m |= {f"gpu{g}.l2tlb.hit_rate": c["l2tlb.hits"] / c["l1tlb.misses"] if c["l1tlb.misses"] else 0.0}
    rows = dict(uvmsim.Result(metrics=m, config={}, version="t").key_metrics())
    assert list(rows) == [
        "time.total_ns",
        "gpu*.warp_mem_insts",
        "gpu*.l1tlb.hit_rate",
        "gpu*.l2tlb.hit_rate",
        "gpu*.l2tlb.misses",
        "gpu*.l1tlb.miss_latency_ns.mean",
        "gpu*.walker.walks",
        "gpu*.walker.utilization",
        "multi.far_faults",
    ]
    assert rows["gpu*.warp_mem_insts"] == 400 and rows["gpu*.l2tlb.misses"] == 30 and rows["gpu*.walker.walks"] == 4
    assert rows["gpu*.l1tlb.hit_rate"] == 240 / 400 and rows["gpu*.l2tlb.hit_rate"] == 10 / 40
    assert rows["gpu*.l1tlb.miss_latency_ns.mean"] == (10 * 100.0 + 30 * 500.0) / 40
    assert rows["gpu*.walker.utilization"] == pytest.approx((0.0 + 0.1 + 0.2 + 0.3) / 4)  # the GPUs' mean
    assert uvmsim.format_metric("gpu*.walker.utilization", 0.15) == "15.00 %"
    assert uvmsim.format_metric("gpu*.l1tlb.hit_rate", 0.6) == "60.00 %"
    # One GPU: its own rows, as before.
    one = {k: v for k, v in m.items() if not k.startswith(("gpu1.", "gpu2.", "gpu3."))} | {"multi.gpus": 1}
    rows = dict(uvmsim.Result(metrics=one, config={}, version="t").key_metrics())
    assert rows["gpu0.warp_mem_insts"] == 0 and "gpu*.warp_mem_insts" not in rows


def test_the_headline_adds_the_multi_gpu_and_apu_figures_when_they_apply() -> None:
    multi = {
        "time.total_ns": 1.0,
        "multi.gpus": 4,
        "multi.l2tlb.mpki": 2.0,
        "multi.far_faults": 9,
        "multi.migrations": 3,
    }
    names = [k for k, _ in uvmsim.Result(metrics=multi, config={}, version="t").key_metrics()]
    assert names == ["time.total_ns", "multi.l2tlb.mpki", "multi.far_faults", "multi.migrations"]
    one = {**multi, "multi.gpus": 1, "apu.faults": 5, "apu.fault_latency_ns.mean": 5300.0}
    names = [k for k, _ in uvmsim.Result(metrics=one, config={}, version="t").key_metrics()]
    assert names == ["time.total_ns", "apu.faults", "apu.fault_latency_ns.mean"]
    assert [k for k, _ in uvmsim.Result(metrics={**one, "apu.faults": 0}, config={}, version="t").key_metrics()] == [
        "time.total_ns"
    ]


# --- no output over an input (the CLI's rule, in the API too) ----------------------------------------------------

STREAM_TOML = '[workload]\nkind = "stream"\nmanaged = true\n[workload.stream]\nelements = 4096\n'


def test_trace_record_refuses_an_out_that_is_one_of_its_inputs(tmp_path: Path) -> None:
    # Was: the config file, the preset's file or the warp trace being re-recorded replaced by the recording.
    config = tmp_path / "c.toml"
    config.write_text(STREAM_TOML)
    preset = tmp_path / "p.toml"
    preset.write_text((Path(uvmsim.__file__).parent / "data" / "presets" / "titan-v.toml").read_text())
    warps = tmp_path / "w.uvmt"
    uvmsim.trace_record(warps, config)
    (tmp_path / "hard.uvmt").hardlink_to(warps)
    replay = {"workload.kind": "warp-trace", "workload.warp_trace.path": str(warps)}
    before = {p: p.read_bytes() for p in (config, preset, warps)}
    cases = [
        ((config, config), {}, "the config file of this recording"),
        ((f"{tmp_path}/./c.toml", config), {}, f"the config file `{config}` of this recording"),
        ((preset,), {"preset": preset, "set": {"workload.kind": "stream"}}, "the preset file"),
        ((tmp_path / "hard.uvmt",), {"set": replay}, f"the trace `{warps}`"),
    ]
    for args, kwargs, words in cases:
        with pytest.raises(uvmsim.ConfigError, match="writing it would destroy its input") as e:
            uvmsim.trace_record(*args, **kwargs)
        assert words in str(e.value), e.value
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(f.name for f in tmp_path.iterdir()) == ["c.toml", "hard.uvmt", "p.toml", "w.uvmt"]
    uvmsim.trace_record(tmp_path / "again.uvmt", set=replay)  # the same inputs, another OUT: fine


def test_trace_convert_refuses_the_preset_file_or_a_kernel_file_as_out(tmp_path: Path) -> None:
    # The core refuses OUT = IN; the CLI also the preset's file and an Accel-Sim IN's kernel files, now the API too.
    src = Path(__file__).resolve().parent / "data" / "accelsim"
    for f in src.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    preset = tmp_path / "p.toml"
    preset.write_text((Path(uvmsim.__file__).parent / "data" / "presets" / "titan-v.toml").read_text())
    kernel, before = tmp_path / "kernel-1.traceg", (tmp_path / "kernel-1.traceg").read_bytes()
    with pytest.raises(uvmsim.ConfigError, match="is a kernel file of the trace .* of this conversion"):
        uvmsim.trace_convert(tmp_path / "kernelslist.g", kernel)
    with pytest.raises(uvmsim.ConfigError, match="is the preset file of this conversion"):
        uvmsim.trace_convert(tmp_path / "kernelslist.g", preset, preset=preset)
    with pytest.raises(uvmsim.ConfigError, match="is the input trace"):
        uvmsim.trace_convert(tmp_path / "kernelslist.g", tmp_path / "kernelslist.g")
    assert kernel.read_bytes() == before and "[gpu" in preset.read_text()


def test_run_refuses_an_out_directory_that_would_replace_an_input(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    config = tmp_path / "d" / "summary.json"  # a config file of any name is TOML
    config.write_text(STREAM_TOML)
    with pytest.raises(uvmsim.ConfigError, match=r"would replace the config file .*: this run writes"):
        uvmsim.run(config, preset="titan-v", out=tmp_path / "d")
    with pytest.raises(uvmsim.ConfigError, match="is the config file of this run"):
        uvmsim.run(config, preset="titan-v", out=config)
    assert config.read_text() == STREAM_TOML and sorted(p.name for p in (tmp_path / "d").iterdir()) == ["summary.json"]


# --- bad arguments: uvmsim's own errors, naming what is wrong, before any work ----------------------------------


def _api_cases(d: Path) -> list[tuple[Any, type[BaseException], str]]:
    """(call, the exception it raises, a regex of its message), for files made in `d`. Before the fix, where
    there was one: the raw or misleading error the call gave."""
    import uvmsim.sweep as sw
    from uvmsim import timeline as tl

    (d / "file").write_text("")
    (d / "adir").mkdir()
    small = {"workload.kind": "stream", "workload.stream.elements": 4096}
    result = uvmsim.run(set=small)
    summaries = {"array": "[]", "metrics": '{"metrics": 5, "config": {}, "version": "x"}'}
    summaries["table"] = '{"metrics": {}, "config": {}, "version": "x", "tables": {"x": 5}}'
    for name, text in summaries.items():
        (d / name).mkdir()
        (d / name / "summary.json").write_text(text)
    return [
        # TypeError "expected str, bytes or os.PathLike object, not int"
        (lambda: uvmsim.run(123), TypeError, "^config must be the path of a TOML file or a mapping"),
        (lambda: uvmsim.run(preset=123), TypeError, "^preset must be a preset name or the path of a preset file"),
        (lambda: uvmsim.run(set=5), TypeError, "^set must be a mapping .* not int$"),  # "'int' object is not iterable"
        # TypeError "cannot express NoneType None as a config value", naming no key
        (lambda: uvmsim.run(set={"gpu.sms": None}), ConfigError, "^--set: key `gpu.sms`: cannot express NoneType"),
        (lambda: uvmsim.run({"gpu": {"sms": None}}), ConfigError, "^<dict config>: key `gpu.sms`: cannot express"),
        # FileExistsError "[Errno 17] File exists: 'file'", after the whole simulation
        (lambda: uvmsim.run(set=small, out=d / "file"), OSError, "file: cannot write the output directory: it is a"),
        # ConfigError "None: cannot read the trace: No such file or directory"
        (lambda: uvmsim.trace_info(None), TypeError, "not NoneType"),
        # ConfigError "absent.csv: cannot read the trace: ..." where run(trace=...) raised MissingInputError
        (lambda: uvmsim.trace_info(d / "absent.csv"), MissingInputError, "^trace `.*absent.csv` does not exist$"),
        (lambda: uvmsim.trace_convert(d / "adir", d / "o.uvmt"), MissingInputError, "is a directory, not a file$"),
        # no table loaded: the string was taken for the names "b", "a", "t", ...
        (lambda: uvmsim.load(d / "array", tables="batches"), TypeError, r"^tables must be a list of table names"),
        # ConfigError "... missing or malformed 'list' object has no attribute 'get'"
        (lambda: uvmsim.load(d / "array"), ConfigError, "summary.json: not a run summary: an array, not a JSON object"),
        # loaded, then AttributeError from key_metrics()
        (lambda: uvmsim.load(d / "metrics"), ConfigError, "not a run summary: `metrics` is missing or not a JSON"),
        (lambda: uvmsim.load(d / "table"), ConfigError, "table `x` is neither columns, rows nor a {file, rows}"),
        # AttributeError "'str' object has no attribute 'config'"
        (lambda: tl.write("result", d / "t.json"), TypeError, "^result must be a uvmsim.Result"),
        # TypeError "'<' not supported between instances of 'str' and 'int'"
        (lambda: tl.write(result, d / "t.json", max_batches="9"), TypeError, "^max_batches must be a whole number"),
        # IsADirectoryError "[Errno 21] Is a directory: '.../.adir.<random>.tmp' -> '.../adir'" (now the same class,
        # with a message naming the file alone)
        (lambda: tl.write(result, d / "adir"), IsADirectoryError, "adir: cannot write: Is a directory$"),
        (lambda: sw.run_sweep({"grid": {"gpu.sms": [4]}}, d / "s1", jobs="2"), TypeError, "^jobs must be a whole"),
        (lambda: sw.run_sweep({"grid": {"gpu.sms": [4]}}, d / "s2", jobs=1.5), TypeError, "^jobs must be a whole"),
        # FileExistsError "[Errno 17] File exists: 'file'"
        (lambda: sw.run_sweep({"grid": {"gpu.sms": [4]}}, d / "file"), OSError, "file: cannot write the output dir"),
    ]


def test_bad_arguments_raise_clear_uvmsim_errors(tmp_path: Path) -> None:
    failures = []
    for i, (call, kind, pattern) in enumerate(_api_cases(tmp_path)):
        try:
            call()
            failures.append(f"case {i}: no error")
        except BaseException as e:
            if type(e) is not kind or not re.search(pattern, str(e)):
                failures.append(f"case {i}: {type(e).__name__}: {e}")
    assert not failures, "\n".join(failures)
    assert not (tmp_path / "s1").exists() and not (tmp_path / "s2").exists()
    assert sorted(p.name for p in (tmp_path / "adir").iterdir()) == []  # no temporary file left either


def test_a_panic_in_the_core_is_a_simulation_error() -> None:
    # A bug in the simulator is a failed run naming it: before 2026-11-30 it reached Python as pyo3's
    # PanicException, a BaseException that `except Exception` (and callers' error handling) did not catch.
    with pytest.raises(uvmsim.SimulationError, match="internal error.*a deliberate panic for the tests"):
        uvmsim._core._panic_for_test()


def test_a_write_stopped_midway_leaves_neither_file_nor_the_directory_it_made(tmp_path: Path) -> None:
    # Was: a SIGTERM while an experiment stored a run left an empty run directory (test_interrupt.py saw it).
    from uvmsim._files import atomic_write

    def stopped(fd: int) -> None:
        import os

        os.close(fd)
        raise KeyboardInterrupt

    target = tmp_path / "runs" / "a" / "summary.json"
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, stopped)
    assert not (tmp_path / "runs" / "a").exists()
    (tmp_path / "b").mkdir()  # a directory that was there stays
    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "b" / "x.json", stopped)
    assert (tmp_path / "b").is_dir() and not list((tmp_path / "b").iterdir())


def test_core_stub_matches_the_module() -> None:
    """python/uvmsim/_core.pyi (what mypy and editors read) names the compiled module's functions, classes and
    constants, each function with the binding's parameters in order, and each exception with its base."""
    import ast
    import inspect

    stub = ast.parse((Path(uvmsim.__file__).parent / "_core.pyi").read_text(encoding="utf-8"))
    functions = {n.name: [a.arg for a in n.args.args] for n in stub.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: [ast.unparse(b) for b in n.bases] for n in stub.body if isinstance(n, ast.ClassDef)}
    constants = {n.target.id for n in stub.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    public = {n for n in dir(_core) if not n.startswith("__") or n == "__version__"}
    assert public == set(functions) | set(classes) | constants
    for name, params in functions.items():
        assert list(inspect.signature(getattr(_core, name)).parameters) == params, name
    for name, bases in classes.items():
        assert [b.__name__ for b in getattr(_core, name).__bases__] == bases, name
    assert isinstance(_core.__version__, str)
    assert all(isinstance(m, str) for m in _core.WALL_CLOCK_METRICS)
