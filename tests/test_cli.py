"""The `uvmsim` command end to end, including its handling of bad input."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

import uvmsim
from conftest import WORKLOADS, Cli
from uvmsim import cli as cli_mod

STRIDE = ["--set", "workload.kind=stride", "--set", "workload.stride.accesses=500"]
# A managed triad of 3 x 4096 8-byte elements (8 pages each) on titan-v: 24 pages fault, in 2 batches.
MANAGED_STREAM = ["--preset", "titan-v"] + [
    a for s in ("workload.kind=stream", "workload.managed=true", "workload.stream.elements=4096") for a in ("--set", s)
]


def test_run_preset_writes_summary(cli: Cli, tmp_path: Path) -> None:
    p = cli("run", "--preset", "kaveri-apu", *STRIDE, "-o", "out")
    assert p.returncode == 0, p.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["version"]
    assert summary["config"]["translation"]["mode"] == "iommu"
    m = summary["metrics"]
    for key in (
        "time.total_ns",
        "time.kernel_ns",
        "gpu0.warp_mem_insts",
        "gpu0.l1tlb.hits",
        "gpu0.l1tlb.misses",
        "gpu0.l1tlb.hit_rate",
        "gpu0.l2tlb.misses",
        "iommu.walker.walks",
        "sim.events",
        "sim.wall_s",
    ):
        assert key in m, key
    assert m["gpu0.warp_mem_insts"] == 500
    assert "time.kernel_ns" in p.stdout and "out/summary.json" in p.stdout
    assert p.stderr == ""  # not a terminal: no progress lines


def test_run_prints_where_a_managed_runs_pages_came_from(cli: Cli, tmp_path: Path) -> None:
    # A triad without prefetch: each of its three 128-page arrays faults every page once, copied from the host.
    sets = ["workload.kind=stream", "workload.managed=true", "workload.stream.elements=65536"]
    sets += ["uvm.prefetch.policy=none", "uvm.records=true"]
    p = cli("run", "--preset", "titan-v", *(a for s in sets for a in ("--set", s)), "-o", "out")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:3] == ["by", "allocation", "faults"])
    assert [line.split() for line in lines[at + 1 : at + 4]] == [
        [str(i), "(0.5", "MiB)", "128", "0", "0", "128", "0", "0"] for i in range(3)
    ]
    assert "out/allocations.parquet" in p.stdout
    # The headline in each metric's unit (format_metric), not raw numbers: 3 arrays x 128 pages faulted once each,
    # 384 x 4096 B = 1,572,864 B copied in; times in the largest unit reached, with 3 decimals.
    rows = {line.split()[0]: line.split(maxsplit=1)[1] for line in lines[:at]}
    assert rows["uvm.faults.unique"] == "384" and rows["uvm.bytes_h2d"] == "1,572,864", rows
    assert re.fullmatch(r"\d+\.\d{3} (µs|ms)", rows["time.total_ns"]), rows
    assert re.fullmatch(r"\d+\.\d\d %", rows["gpu0.l1tlb.hit_rate"]), rows
    # The count is of the metrics summary.json holds, not of the tables the run keeps.
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert f"wrote out/summary.json ({len(summary['metrics'])} metrics), " in p.stdout, p.stdout


def test_run_config_file_default_out_dir_and_quiet(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "my.toml").write_text('[workload]\nkind = "stride"\n[workload.stride]\naccesses = 200\n')
    p = cli("run", "my.toml", "--preset", "kaveri-apu", "--quiet")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert json.loads((tmp_path / "uvmsim-out" / "summary.json").read_text())["metrics"]["gpu0.warp_mem_insts"] == 200


def test_progress_is_requested_only_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    args = ["run", "--preset", "kaveri-apu", *STRIDE, "-o", str(tmp_path / "a")]
    with pytest.raises(SystemExit) as e:
        cli_mod.main(args)
    assert e.value.code == 0
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["config"]["sim"]["progress_every_s"] == 2
    with pytest.raises(SystemExit):  # --quiet wins over the terminal
        cli_mod.main([*args, "--quiet", "-o", str(tmp_path / "b")])
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["config"]["sim"]["progress_every_s"] == 0
    # The terminal's default goes first: an explicit --set still wins (appended last, 2 would).
    with pytest.raises(SystemExit):
        cli_mod.main([*args, "--set", "sim.progress_every_s=0.5", "-o", str(tmp_path / "c")])
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["config"]["sim"]["progress_every_s"] == 0.5


def test_progress_reports_a_run_of_few_events(cli: Cli) -> None:
    # About 10,500 events: fewer than the 2^20 between clock reads before, so nothing was printed.
    stream = ["--set", "workload.kind=stream", "--set", "workload.stream.elements=262144"]
    p = cli("run", "--preset", "titan-v", *stream, "--set", "sim.progress_every_s=0.000001", "-o", "p")
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("uvmsim:") and "events" in ln]
    assert len(lines) >= 2, p.stderr
    # Each line says where the program is: its host operation and the kernel's CTAs done so far.
    done = [
        int(n) for n in re.findall(r"; host operation 1 of 1, kernel `stream`: (\d+) of 256 CTAs done$", p.stderr, re.M)
    ]
    assert len(done) == len(lines) and done == sorted(done) and done[-1] < 256, p.stderr


def test_progress_of_a_trace_replay_names_the_line_it_reached(cli: Cli, tmp_path: Path) -> None:
    # 20,000 accesses on 4 CUs, 10 ns apart: enough events for several progress lines.
    rows = (f"{10 * i},1,{i % 4},{i % 16},R,{0x100000 + 64 * i:#x},64" for i in range(20_000))
    (tmp_path / "t.csv").write_text("time_ns,gpu,cu,wavefront,kind,vaddr,size\n" + "\n".join(rows) + "\n")
    p = cli("run", "--preset", "mgpusim-r9nano", "--trace", "t.csv", "--set", "sim.progress_every_s=1e-6", "-o", "t")
    assert p.returncode == 0, p.stderr
    at = [int(n) for n in re.findall(r"; host operation 1 of 1, trace replay at \S*t\.csv:(\d+)$", p.stderr, re.M)]
    assert len(at) >= 2 and at == sorted(at) and at[-1] <= 20_001, p.stderr


def test_progress_of_a_multi_application_run_counts_ended_applications_and_re_runs(cli: Cli, tmp_path: Path) -> None:
    # A mix runs until its longest application ends, the others re-running meanwhile: the progress line says how
    # many have ended and how often the others re-ran, which the simulated time alone does not show.
    small = ["workload.stencil2d.nx=256", "workload.stencil2d.ny=256", "workload.stencil2d.threads=16384"]
    sets = ['multi.apps=["stencil2d", "stream"]', *small, "workload.stream.elements=65536", "sim.progress_every_s=1e-6"]
    p = cli("run", "--preset", "li-4gpu-ats", *(a for s in sets for a in ("--set", s)), "-o", "mix")
    assert p.returncode == 0, p.stderr
    notes = re.findall(r"; applications: (\d) of 2 ended their first run, (\d+) re-runs$", p.stderr, re.M)
    assert len(notes) >= 2, p.stderr
    ended, reruns = [int(n[0]) for n in notes], [int(n[1]) for n in notes]
    assert ended == sorted(ended) and reruns == sorted(reruns) and ended[0] == 0 and reruns[0] == 0, notes
    m = json.loads((tmp_path / "mix" / "summary.json").read_text())["metrics"]
    # The longer application (stencil2d here) runs once; the last line counts at most the shorter's re-runs.
    runs = sorted([m["app0.runs"], m["app1.runs"]])
    assert runs[0] == 1 and 0 < reruns[-1] <= runs[1] - 1, (notes[-1], runs)


def test_an_explicit_set_of_uvm_records_wins_over_timeline(cli: Cli, tmp_path: Path) -> None:
    # --timeline turns uvm.records on ahead of the user's --set: `--set uvm.records=false` keeps the run without
    # its batches table (2 batches serviced, none recorded), the timeline without batch spans.
    p = cli("run", *MANAGED_STREAM, "--timeline", "t.json", "--set", "uvm.records=false", "-o", "out")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "wrote t.json (open it in https://ui.perfetto.dev)", p.stdout
    r = uvmsim.load(tmp_path / "out")
    assert r.config["uvm"]["records"] is False and r.metrics["uvm.batches"] == 2 and "batches" not in r.tables
    assert json.loads((tmp_path / "t.json").read_text())["otherData"]["batches_total"] == 0


def test_a_timeline_named_as_a_table_of_out_is_refused(cli: Cli, tmp_path: Path) -> None:
    # The run writes OUT/NAME.parquet for its tables: a timeline there would replace one, or be replaced.
    p = cli("run", *MANAGED_STREAM, "--timeline", "out/batches.parquet", "-q", "-o", "out")
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "'--timeline': `out/batches.parquet` would replace the run's own batches.parquet" in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


def test_the_allocations_summary_shows_the_first_eight(capsys: pytest.CaptureFixture[str]) -> None:
    # Made-up rows: allocation i has 256 * (i + 1) pages (i + 1 MiB) and faulted i + 1 times.
    import pandas as pd

    def table(n: int, faults: int = 1) -> pd.DataFrame:
        rows = [{"index": i, "pages": 256 * (i + 1), **{c: 0 for c, _ in cli_mod.ALLOC_COLUMNS}} for i in range(n)]
        for r in rows:
            r["faults"] = faults * (r["index"] + 1)
        return pd.DataFrame(rows)

    cli_mod._echo_allocations(table(9))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == "by allocation faults prefetched used pages in evicted to host".split()
    assert [line.split()[:4] for line in lines[1:9]] == [[str(i), f"({i + 1}.0", "MiB)", str(i + 1)] for i in range(8)]
    assert lines[9:] == ["  ... 1 more allocations in the allocations table"]  # 9 - 8
    cli_mod._echo_allocations(table(8))  # exactly the rows shown: nothing more to say
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 9 and "more" not in lines[-1]
    cli_mod._echo_allocations(table(3, faults=0))  # no allocation did any work: no table at all
    assert capsys.readouterr().out == ""


def test_echo_rows_aligns_every_column_but_the_last(capsys: pytest.CaptureFixture[str]) -> None:
    # Each column as wide as its widest cell over all rows (not the first row's), two spaces apart; the last is
    # left ragged and trailing blanks dropped.
    cli_mod._echo_rows([("a", "x", "long text"), ("bbb", "", "t"), ("cc", "yyyy", "")], indent="  ")
    assert capsys.readouterr().out.splitlines() == ["  a    x     long text", "  bbb        t", "  cc   yyyy"]


def test_presets_list_and_describe(cli: Cli) -> None:
    p = cli("presets")
    assert p.returncode == 0, p.stderr
    names = [line.split()[0] for line in p.stdout.splitlines()]
    assert "kaveri-apu" in names and "r9nano" in names
    d = cli("presets", "kaveri-apu")
    assert d.returncode == 0, d.stderr
    assert "kaveri-apu.toml" in d.stdout and "[iommu" in d.stdout


def test_presets_describes_a_preset_file_as_prose_then_its_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The comment header is the description; the settings follow verbatim from the first line that is not a
    # comment (its `[gpu]` included), comments and blank lines kept.
    (tmp_path / "mine.toml").write_text("# My machine: four SMs.\n#\n# Second paragraph.\n\n[gpu]\nsms = 4   # why\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["presets", "mine.toml"])
    assert e.value.code == 0
    assert capsys.readouterr().out == (
        "mine  (mine.toml)\n\nMy machine: four SMs.\n\nSecond paragraph.\n\n[gpu]\nsms = 4   # why\n"
    )


def test_workloads_list_and_describe(cli: Cli) -> None:
    p = cli("workloads")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    # One entry per workload: its name, then its whole description wrapped (continuation lines indented).
    assert all(len(line) <= 100 for line in lines)
    entries: dict[str, str] = {}
    name = ""
    for line in lines:
        if line.startswith(" "):
            entries[name] += line
        else:
            name, _, text = line.partition(" ")
            entries[name] = text
    assert list(entries) == WORKLOADS
    for w in uvmsim.workloads():
        assert entries[w["name"]].split() == w["description"].split(), w["name"]
    d = cli("workloads", "gather")
    assert d.returncode == 0, d.stderr
    assert "workload.gather.table_entries" in d.stdout and "workload.gather.sorted" in d.stdout


def test_workloads_describes_one_with_its_defaults_as_toml(capsys: pytest.CaptureFixture[str]) -> None:
    # The heading says how to select it; each default is shown as --set takes it: a size string quoted ("64B", not
    # 64B), a number bare.
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["workloads", "stride"])
    assert e.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "stride  (--set workload.kind=stride)"
    params = {line.split()[0]: line.split()[1] for line in lines[lines.index("parameters:") + 1 :]}
    assert params["workload.stride.stride_bytes"] == '"64B"' and params["workload.stride.accesses"] == "10000"


def test_config_with_a_preset_or_set_alone_prints_the_resolved_config(capsys: pytest.CaptureFixture[str]) -> None:
    # --resolved is implied by any of CONFIG, --preset, --set: each prints the config a run would use.
    for args, line in (
        (["--set", "gpu.sms=3"], "gpu.sms = 3"),
        (["--preset", "kaveri-apu"], 'translation.mode = "iommu"'),  # the default is "gmmu"
    ):
        with pytest.raises(SystemExit) as e:
            cli_mod.main(["config", *args])
        assert e.value.code == 0
        assert line in capsys.readouterr().out.splitlines(), args


def test_config_json_is_the_reference_and_resolved_text_is_toml(capsys: pytest.CaptureFixture[str]) -> None:
    # `config --json` alone is the parameter reference, as JSON (the API's config_reference()).
    with pytest.raises(SystemExit):
        cli_mod.main(["config", "--json"])
    assert json.loads(capsys.readouterr().out) == uvmsim.config_reference()
    # Resolved values are TOML as written in a config file: a string keeps its UTF-8 (JSON would write \u00e9).
    with pytest.raises(SystemExit):
        cli_mod.main(["config", "--set", "workload.trace.path=données.csv"])
    assert 'workload.trace.path = "données.csv"' in capsys.readouterr().out.splitlines()


def test_config_reference_and_resolved(cli: Cli) -> None:
    p = cli("config")
    assert p.returncode == 0, p.stderr
    assert any(line.startswith("gpu.l1tlb.entries ") for line in p.stdout.splitlines())
    r = cli("config", "--resolved", "--preset", "kaveri-apu", "--set", "iommu.walker.threads=32")
    assert r.returncode == 0, r.stderr
    assert "iommu.walker.threads = 32" in r.stdout.splitlines()
    j = cli("config", "--resolved", "--json", "--set", "gpu.sms=3")
    assert json.loads(j.stdout)["gpu"]["sms"] == 3


def test_a_resolved_config_given_as_a_config_file_says_to_load_it_as_a_preset(cli: Cli, tmp_path: Path) -> None:
    # `config --resolved` writes every key, those its mode does not read too: as CONFIG it is refused (a user
    # file may not set them), and the message now says what loads it; as --preset it runs.
    r = cli("config", "--resolved", "--preset", "kaveri-apu", "--set", "workload.stride.accesses=50")
    (tmp_path / "r.toml").write_text(r.stdout)
    p = cli("run", "r.toml", "-q")
    assert p.returncode == 2 and "is not read in" in p.stderr, p.stderr
    assert p.stderr.rstrip().endswith(
        "load it as a preset (--preset r.toml), which may carry keys its mode does not read"
    )
    p = cli("run", "--preset", "r.toml", "-q")
    assert p.returncode == 0, p.stderr
    # A hand-written file with one such key gets the message without the hint.
    (tmp_path / "small.toml").write_text("[iommu]\nats_prefetch_pages = 4\n")
    p = cli("run", "small.toml", "--preset", "titan-v", "-q")
    assert p.returncode == 2 and "is not read in" in p.stderr and "--preset small.toml" not in p.stderr


def test_a_quoted_dotted_key_in_a_config_file_is_the_dotted_key(cli: Cli, tmp_path: Path) -> None:
    # As in sweep specs: TOML reads `"uvm.batch_size"` as one key holding a dot; it means uvm.batch_size.
    (tmp_path / "q.toml").write_text('"uvm.batch_size" = 64\n[gpu]\n"l1tlb.entries" = 64\n')
    r = cli("config", "--resolved", "q.toml", "--preset", "titan-v")
    assert r.returncode == 0, r.stderr
    assert {"uvm.batch_size = 64", "gpu.l1tlb.entries = 64"} <= set(r.stdout.splitlines())


def test_reproduce_list(cli: Cli) -> None:
    p = cli("reproduce", "--list")
    assert p.returncode == 0, p.stderr
    ids = [line.split()[0] for line in p.stdout.splitlines()]
    assert ids == [
        "allen-async-unmap",
        "allen-base-cost",
        "allen-batch-composition",
        "allen-batch-size",
        "allen-oversub",
        "allen-prefetch-reduction",
        "allen-transfer-share",
        "allen-vecadd-probe",
        "apu-divergence",
        "apu-fault-cpu-freq",
        "apu-fault-latency",
        "apu-shootdown",
        "apu-tlb-miss-latency",
        "apu-walk-concurrency",
        "li-idyll",
        "li-least-tlb",
        "li-mpki",
        "li-transfw",
        "mgpusim-tlb",
        "modern-presets",
        "zheng-blocking",
        "zheng-eviction",
        "zheng-latency-sensitivity",
        "zheng-oversub-sweep",
        "zheng-pcie-util",
        "zheng-prefetch",
        "zheng-prefetch-blocking",
        "zheng-replayable-mshr",
    ]


BAD_INPUTS = [
    pytest.param(
        ["run", "--preset", "kaveri-apu", "--set", "gpu.l1tlb.entires=3"],
        ["gpu.l1tlb.entires", "did you mean `gpu.l1tlb.entries`"],
        id="unknown-key",
    ),
    pytest.param(
        ["run", "--preset", "kaveri-apu", "--set", "translation.page_size=4KB"],
        ["translation.page_size", "KiB"],
        id="bad-unit",
    ),
    pytest.param(
        ["run", "--preset", "kaveri-apu", "--set", "translation.levels=3"],
        ["translation.levels", "4, 5"],
        id="out-of-range",
    ),
    pytest.param(
        ["run", "--preset", "kaveri-apu", "--set", "gpu.dram.latency_ns=10us"],
        ["gpu.dram.latency_ns", "10us"],
        id="wrong-type",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--set", "uvm.thrashing.threshold=9"],
        ["uvm.thrashing.threshold", "between 1 and 7"],
        id="thrashing-threshold-out-of-range",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--set", "uvm.advise.policy=read-only"],
        ["uvm.advise.policy", "read-only"],
        id="unknown-advice",
    ),
    pytest.param(["run", "--preset", "kaveri"], ["unknown preset `kaveri`", "kaveri-apu"], id="unknown-preset"),
    pytest.param(
        ["run", "--preset", "kaveri-apu", "--set", "workload.kind=no-such-workload"],
        ["workload.kind", "no-such-workload", "gather"],
        id="unknown-workload-kind",
    ),
    pytest.param(
        ["run", "--preset", "kaveri-apu", "--set", "gpu.sms"], ["gpu.sms", "key.path=value"], id="set-without-equals"
    ),
    # reproduce --set: checked against the experiment's preset before any run.
    pytest.param(
        ["reproduce", "zheng-blocking", "--quick", "--set", "gpu.l1tlb.mshr=1"],
        ["--set: key `gpu.l1tlb.mshr`", "did you mean `gpu.l1tlb.mshrs`"],
        id="reproduce-set-unknown-key",
    ),
    pytest.param(
        ["reproduce", "zheng-blocking", "--set", "gpu.sms"], ["gpu.sms", "key.path=value"], id="reproduce-set-no-equals"
    ),
    pytest.param(
        ["reproduce", "--all", "--set", "gpu.sms=2"], ["--set runs one experiment", "no --all"], id="reproduce-set-all"
    ),
    pytest.param(
        ["reproduce", "zheng-blocking", "--set", "gpu.sms=2", "--markdown", "doc.md"],
        ["--set runs one experiment", "--markdown"],
        id="reproduce-set-markdown",
    ),
    pytest.param(["run", "absent.toml"], ["absent.toml", "does not exist"], id="missing-config-file"),
    pytest.param(["run", "broken.toml"], ["broken.toml", "not valid TOML"], id="malformed-toml"),
    pytest.param(["run", "--preset", "kaveri-apu", "--set", "gpu=3"], ["gpu", "section"], id="section-given-a-value"),
    # A quoted number is a string: a type error, not "out of range" (that is for integers beyond TOML's i64).
    pytest.param(
        ["run", "--preset", "li-4gpu-ats", "--set", 'multi.gpus="4"'],
        ["--set: key `multi.gpus`", 'invalid type: string "4", expected an integer'],
        id="quoted-number",
    ),
    pytest.param(
        ["run", "quoted-number.toml", "--preset", "titan-v"],
        ["quoted-number.toml: key `multi.gpus`", "expected an integer"],
        id="quoted-number-in-a-file",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--set", "sim.seed=9223372036854775808"],
        ["--set: key `sim.seed`", "9223372036854775808 is out of range", "9223372036854775807"],
        id="integer-beyond-toml",
    ),
    # A key given quoted and unquoted in one file: both forms named, not one silently lost.
    pytest.param(
        ["run", "twice.toml", "--preset", "titan-v"],
        ["twice.toml: key `uvm.batch_size`: given twice", '`"uvm.batch_size"`', "`uvm.batch_size`"],
        id="quoted-and-unquoted-key",
    ),
    # An error on a list element names its source like any other; kinds by their names, not Rust's.
    pytest.param(
        ["run", "--preset", "li-4gpu-ats", "--set", 'multi.apps=["tracex"]'],
        ["uvmsim: error: --set: key `multi.apps[0]`", "tracex"],
        id="list-element",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--set", "uvm.advise.per_buffer=[1]"],
        ["uvmsim: error: --set: key `uvm.advise.per_buffer[0]`"],
        id="list-element-advice",
    ),
    pytest.param(
        ["run", "--preset", "li-4gpu-ats", "--set", 'multi.apps=["fir", "ping-pong"]'],
        ["--set: key `multi.apps`: `ping-pong`: trace replays and host-interaction workloads cannot"],
        id="app-kind-by-its-name",
    ),
    # Keys nothing reads in the configured mode, set by the user: refused, saying why and what reads them.
    pytest.param(
        ["run", "--preset", "titan-v", "--set", "multi.migration=first-touch"],
        [
            "--set: key `multi.migration`: is not read in the single-GPU model",
            "set multi.gpus > 1 or multi.model_one_gpu = true",
        ],
        id="multi-gpu-key-on-one-gpu",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--set", "iommu.walker.threads=4"],
        [
            '--set: key `iommu.walker.threads`: is not read in translation.mode = "gmmu"',
            'they need translation.mode = "iommu"',
        ],
        id="iommu-key-in-gmmu-mode",
    ),
    pytest.param(
        ["run", "--preset", "kaveri-apu", "--set", "gmmu.walker.threads=4"],
        [
            '--set: key `gmmu.walker.threads`: is not read in translation.mode = "iommu"',
            'they need translation.mode = "gmmu"',
        ],
        id="gmmu-key-in-iommu-mode",
    ),
    pytest.param(
        ["run", "--preset", "li-4gpu-ats", "--set", "multi.host_mmu.walker.threads=4"],
        ['key `multi.host_mmu.walker.threads`: is not read in the multi-GPU model with translation.mode = "iommu"'],
        id="host-mmu-key-in-ats-mode",
    ),
    # Another workload's parameters on a run's command line: nothing reads them (the resolver accepts them, for
    # sweep and experiment bases that serve several kinds; `run` and `trace record` refuse them).
    pytest.param(
        ["run", "--preset", "titan-v", "--set", "workload.blas_gemm.n=512"],
        [
            "--set: key `workload.blas_gemm.n`: is a parameter of the `blas-gemm` workload, which this run does not "
            'run (workload.kind = "stride")',
            "add --set workload.kind=blas-gemm to run it",
        ],
        id="another-workloads-key",
    ),
    pytest.param(
        ["run", "--preset", "li-4gpu-ats", "--set", 'multi.apps=["fir", "aes"]', "--set", "workload.kmeans.points=64"],
        ['the `kmeans` workload, which this run does not run (multi.apps = ["fir", "aes"])', "add it to multi.apps"],
        id="another-workloads-key-multi-app",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--set", '"workload.stream".elements=64'],
        ["key `workload.stream.elements`: is a parameter of the `stream` workload"],
        id="another-workloads-key-quoted",  # the quoted key is the same key, and is named plainly
    ),
    pytest.param(
        ["trace", "record", "--preset", "titan-v", "--set", "workload.stream.elements=64", "x.uvmt"],
        ["key `workload.stream.elements`: is a parameter of the `stream` workload, which this run does not run"],
        id="another-workloads-key-record",
    ),
    # reproduce's options that exclude each other, refused before any run.
    pytest.param(
        ["reproduce", "zheng-blocking", "--list", "--markdown", "doc.md"],
        ["--markdown records an experiment's result"],
        id="list-markdown",
    ),
    pytest.param(["reproduce", "--list", "--set", "gpu.sms=2"], ["--set runs one experiment", "--list"], id="list-set"),
    pytest.param(["reproduce", "zheng-blocking", "--list"], ["give an experiment ID or --list, not"], id="id-list"),
    pytest.param(
        ["reproduce", "apu-tlb-latency"],
        ["apu-tlb-latency", "did you mean `apu-tlb-miss-latency`"],
        id="unknown-experiment",
    ),
    pytest.param(
        ["reproduce", "ZHENG-BLOCKING"],
        ["ZHENG-BLOCKING", "did you mean `zheng-blocking`"],
        id="unknown-experiment-in-capitals",  # named no nearest ID: the match minded the letter case
    ),
    pytest.param(["presets", "TITAN-V"], ["TITAN-V", "did you mean `titan-v`"], id="unknown-preset-in-capitals"),
    pytest.param(["workloads", "strider"], ["strider", "did you mean `stride`"], id="unknown-workload-name"),
    pytest.param(
        ["config", "--markdown", "--set", "gpu.sms=2"], ["--markdown prints the parameter reference only"], id="md-set"
    ),
    pytest.param(["presets", "titanv"], ["unknown preset `titanv`"], id="describe-unknown-preset"),
    pytest.param(["run", "--preset", "kaveri-apu", "--frobnicate"], ["--frobnicate"], id="unknown-option"),
    # Nothing to simulate: not a run of the bare defaults (--set alone does not describe a system either).
    pytest.param(["run", "--set", "gpu.sms=2"], ["give a CONFIG file, a --preset or a --trace"], id="run-nothing"),
]


@pytest.mark.parametrize(("args", "expected"), BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(cli: Cli, tmp_path: Path, args: list[str], expected: list[str]) -> None:
    (tmp_path / "broken.toml").write_text("[gpu\nsms = 1\n")
    (tmp_path / "quoted-number.toml").write_text('[multi]\ngpus = "4"\n')
    (tmp_path / "twice.toml").write_text('"uvm.batch_size" = 128\nuvm.batch_size = 64\n')
    p = cli(*args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("uvmsim: error: ")
    for word in expected:
        assert word in lines[0], lines[0]
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "uvmsim-out").exists()  # nothing half-written


def test_simulation_failure_is_one_line_and_exit_1(cli: Cli, tmp_path: Path) -> None:
    # Stop the run as soon as one event fires without simulated time advancing.
    p = cli("run", "--preset", "kaveri-apu", "--set", "sim.stall_events=1", "--set", "workload.kind=gather")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("uvmsim: error: simulation failed: "), p.stderr
    assert "simulated time stopped advancing" in p.stderr, p.stderr  # the stall guard, not another failure
    assert not (tmp_path / "uvmsim-out" / "summary.json").exists()


def test_a_bug_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An experiment's analysis that raises (a bug, not bad input): one line naming the error, no traceback.
    from uvmsim import reproduce as rep

    def broken(ctx: rep.Context) -> dict[str, float]:
        raise ValueError("analysis exploded")

    monkeypatch.setitem(rep.REGISTRY, "apu-tlb-miss-latency", broken)
    monkeypatch.delenv("UVMSIM_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["reproduce", "apu-tlb-miss-latency", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("uvmsim: error: internal error: ValueError: analysis exploded"), err
    monkeypatch.setenv("UVMSIM_TRACEBACK", "1")
    with pytest.raises(ValueError, match="analysis exploded"):
        cli_mod.main(["reproduce", "apu-tlb-miss-latency", "-o", str(tmp_path / "out")])


def _interrupt(*args: Any, **kwargs: Any) -> Any:
    raise KeyboardInterrupt


def test_ctrl_c_in_run_says_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(uvmsim, "run", _interrupt)
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["run", "--preset", "titan-v", "-o", str(tmp_path / "r")])
    assert e.value.code == 130
    assert capsys.readouterr().err.strip() == "uvmsim: error: interrupted"  # was "aborted"


@pytest.mark.parametrize(
    ("args", "resume"),
    [
        (["apu-tlb-miss-latency", "--quick"], "uvmsim reproduce apu-tlb-miss-latency -o OUT --quick --resume"),
        (["--all", "-j", "2"], "uvmsim reproduce --all -o OUT --resume -j 2"),
        (
            ["apu-tlb-miss-latency", "--set", "gpu.l1tlb.entries=64"],
            "uvmsim reproduce apu-tlb-miss-latency -o OUT --resume --set gpu.l1tlb.entries=64",
        ),
    ],
)
def test_ctrl_c_in_reproduce_says_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], resume: str
) -> None:
    # As an interrupted sweep does: the finished runs are kept, and --resume goes on from them.
    from uvmsim import report as report_mod
    from uvmsim import reproduce as rep

    monkeypatch.setattr(rep, "reproduce_context", _interrupt)
    monkeypatch.setattr(report_mod, "reproduce_all", _interrupt)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["reproduce", *args, "-o", str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 130 and len(err.splitlines()) == 1, err
    assert err.startswith("uvmsim: error: reproduce ") and " interrupted; " in err, err
    assert f"`{resume.replace('OUT', str(out))}`" in err, err


@pytest.mark.parametrize(
    ("args", "out"),
    [(["apu-tlb-miss-latency"], "uvmsim-out/apu-tlb-miss-latency"), (["--all"], "uvmsim-out/reproduce")],
)
def test_reproduce_writes_by_default_into_uvmsim_out_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], out: str
) -> None:
    # Without -o: one directory per experiment (several can share uvmsim-out), `reproduce` for --all; the
    # interrupted run's --resume command names it.
    from uvmsim import report as report_mod
    from uvmsim import reproduce as rep

    monkeypatch.setattr(rep, "reproduce_context", _interrupt)
    monkeypatch.setattr(report_mod, "reproduce_all", _interrupt)
    monkeypatch.chdir(tmp_path)
    code, err = _run_main(["reproduce", *args], capsys)
    assert code == 130 and f"`uvmsim reproduce {args[0]} -o {out} --resume`" in err, err


def test_reproduce_says_before_the_runs_which_set_keys_the_experiment_varies(cli: Cli, tmp_path: Path) -> None:
    # apu-walk-concurrency sets iommu.walker.threads in some of its runs: the note comes before the runs, once.
    p = cli("reproduce", "apu-walk-concurrency", "--quick", "--set", "iommu.walker.threads=3", "-o", "out")
    assert p.returncode == 0, p.stderr
    note = "note: apu-walk-concurrency sets iommu.walker.threads itself in some of its runs;"
    assert p.stderr.count(note) == 1 and "--set iommu.walker.threads will not apply there" in p.stderr, p.stderr
    assert p.stderr.index(note) < p.stderr.index("  run 1/"), p.stderr
    assert "did not apply" not in p.stderr
    # zheng-replayable-mshr sets uvm.utlb_fault_limit in every run: refused before any run.
    p = cli("reproduce", "zheng-replayable-mshr", "--quick", "--set", "uvm.utlb_fault_limit=3", "-o", "z")
    assert p.returncode == 2 and "in every run of zheng-replayable-mshr" in p.stderr and not (tmp_path / "z").exists()


def test_one_line_folds_code_frames() -> None:
    msg = "a.toml: not valid TOML: TOML parse error at line 1, column 5\n  |\n1 | [gpu\n  |     ^\nunclosed table"
    assert cli_mod.one_line(msg) == "a.toml: not valid TOML: TOML parse error at line 1, column 5; unclosed table"
    assert cli_mod.one_line("stalled; waiting:\n  walker: 3 walks\n") == "stalled; waiting: walker: 3 walks"


def test_clip_long_words_from_201_characters() -> None:
    # _LONG_WORD = 200: a word of 200 is shown whole; one of 201 as its first 100 and last 40, 61 left out.
    word = "a" * 100 + "b" * 61 + "c" * 40
    assert cli_mod.clip_long_words(f"x {word[:-1]} y") == f"x {word[:-1]} y"
    assert cli_mod.clip_long_words(f"x {word} y") == f"x {'a' * 100}…[61 characters]…{'c' * 40} y"


def test_trace_convert_counts_warps_of_a_warp_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # tests/data/accelsim: one kernel of 4 warps (trace info: kernels / warps 1 / 4); a warp .uvmt counts warps.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["trace", "convert", str(ACCELSIM_DIR / "kernelslist.g"), "w.uvmt"])
    assert e.value.code == 0
    assert capsys.readouterr().out == "wrote w.uvmt (accelsim -> uvmt-warps, 4 warps)\n"


def test_sizes_are_shown_in_the_largest_binary_unit_that_divides_them() -> None:
    assert [cli_mod._size(b) for b in (1024, 1536, 2**21, 2**20 + 4096, 3 << 30, 100)] == [
        "1 KiB",  # from 1 KiB (>=)
        "1536 B",  # 1.5 KiB: no whole unit
        "2 MiB",
        "1028 KiB",
        "3 GiB",
        "100 B",
    ]


def test_trace_info_prints_a_timed_uvmt_as_timed_accesses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Four accesses of GPU 1: two 64 B in page 0x1 (lines 0x1000, 0x1040), one of 128 B at 0x3000 (two lines) and
    # a 64 B prefetch of its first line.
    (tmp_path / "s.csv").write_text(
        "time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64\n20,1,1,0,W,0x1040,64\n30,1,0,1,R,0x3000,128\n"
        "40,1,0,1,P,0x3000,64\n"  # a prefetch: counted apart from reads and writes (the text once left it out)
    )
    uvmsim.trace_convert(tmp_path / "s.csv", tmp_path / "s.uvmt")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["trace", "info", "s.uvmt"])
    assert e.value.code == 0
    rows = {k.strip(): v for k, v in (line.rsplit("  ", 1) for line in capsys.readouterr().out.splitlines()[1:])}
    assert rows["format"].strip() == "uvmt-timed" and "kernels / warps" not in rows  # timed: not warp streams
    counts = [rows[k].strip() for k in ("accesses", "reads / writes / prefetches", "GPUs / CUs")]
    assert counts == ["4", "2 / 1 / 1", "1 / 2"]
    assert [rows[k].strip() for k in ("unique 4 KiB pages", "unique 64 B lines")] == ["2", "4"]
    assert rows["time span"].strip() == "10 - 40 ns" and rows["request sizes"].strip() == "64 B x 3, 128 B x 1"


def test_version(cli: Cli) -> None:
    p = cli("--version")
    assert p.returncode == 0 and "uvmsim" in p.stdout


# --- inputs that cannot be read: exit 2; outputs that cannot be written: exit 1 ----------------------------------

TRACE_CSV = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n100,1,0,0,R,0x1000,64\n"
TRACE_RUN = ["--preset", "mgpusim-r9nano", "--trace", "t.csv"]
SWEEP_SPEC = 'preset = "kaveri-apu"\n[set]\n"workload.stride.accesses" = 100\n[grid]\n"gpu.l1tlb.entries" = [16]\n'


def _inputs(d: Path) -> None:
    (d / "c.toml").write_text('[workload]\nkind = "stride"\n[workload.stride]\naccesses = 100\n')
    (d / "t.csv").write_text(TRACE_CSV)
    (d / "spec.toml").write_text(SWEEP_SPEC)
    (d / "spec-c.toml").write_text(f'config = "c.toml"\n{SWEEP_SPEC}')
    (d / "mine.toml").write_text("# my preset\n")
    (d / "doc.md").write_text("<!-- BEGIN reproduce-summary -->\n<!-- END reproduce-summary -->\n")


# (arguments, the file they cannot read); paths relative to the test's directory.
UNREADABLE = [
    pytest.param(["run", "c.toml", "--preset", "kaveri-apu"], "c.toml", id="config"),
    pytest.param(["run", "--preset", "mgpusim-r9nano", "--trace", "t.csv"], "t.csv", id="trace"),
    pytest.param(["sweep", "spec.toml", "-o", "sw"], "spec.toml", id="sweep-spec"),
    pytest.param(["sweep", "spec-c.toml", "-o", "sw"], "c.toml", id="config-of-sweep-spec"),
    pytest.param(["run", "--preset", "mine.toml"], "mine.toml", id="preset-file"),
    pytest.param(["presets", "mine.toml"], "mine.toml", id="describe-preset-file"),
    pytest.param(["reproduce", "apu-tlb-miss-latency", "--markdown", "doc.md"], "doc.md", id="markdown"),
]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode: see the simulated test below")
@pytest.mark.parametrize(("args", "name"), UNREADABLE)
def test_an_unreadable_input_exits_2_naming_it(cli: Cli, tmp_path: Path, args: list[str], name: str) -> None:
    _inputs(tmp_path)
    (tmp_path / name).chmod(0)
    p = cli(*args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.startswith("uvmsim: error: ") and len(p.stderr.splitlines()) == 1, p.stderr
    assert f"`{name}` cannot be read: Permission denied" in p.stderr, p.stderr
    assert not (tmp_path / "uvmsim-out").exists() and not (tmp_path / "sw").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_trace_named_by_set_exits_2_naming_it(cli: Cli, tmp_path: Path) -> None:
    # Read by the simulator (Rust), not by Python: its error is bad input too.
    _inputs(tmp_path)
    (tmp_path / "t.csv").chmod(0)
    p = cli("run", "--preset", "mgpusim-r9nano", "--set", "workload.kind=trace", "--set", "workload.trace.path=t.csv")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "t.csv: cannot read the trace: Permission denied" in p.stderr and len(p.stderr.splitlines()) == 1


def test_a_missing_trace_named_by_set_exits_2_and_leaves_no_directory(cli: Cli, tmp_path: Path) -> None:
    # The simulator opens the trace only when it starts: the output directory it was given must not stay behind.
    p = cli(
        "run", "--preset", "mgpusim-r9nano", "--set", "workload.kind=trace", "--set", "workload.trace.path=none.csv"
    )
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "none.csv: cannot read the trace" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert not (tmp_path / "uvmsim-out").exists()
    # A directory that was there before is left alone.
    (tmp_path / "mine").mkdir()
    p = cli(
        "run",
        "--preset",
        "mgpusim-r9nano",
        "--set",
        "workload.kind=trace",
        "--set",
        "workload.trace.path=none.csv",
        "-o",
        "mine",
    )
    assert p.returncode == 2 and (tmp_path / "mine").is_dir()


@pytest.mark.parametrize(("args", "name"), UNREADABLE)
def test_an_unreadable_input_exits_2_naming_it_simulated(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    name: str,
) -> None:
    # The same, as root too: opening the file for reading fails as a chmod 000 would for another user.
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    real_open = Path.open

    def denying_open(self: Path, mode: str = "r", *a: Any, **kw: Any) -> Any:
        if self.name == name and "r" in mode:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_open(self, mode, *a, **kw)

    monkeypatch.setattr(Path, "open", denying_open)
    with pytest.raises(SystemExit) as e:
        cli_mod.main(args)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert err == f"uvmsim: error: {_what(name)} `{name}` cannot be read: Permission denied\n", err
    assert not (tmp_path / "uvmsim-out").exists() and not (tmp_path / "sw").exists()


def _what(name: str) -> str:
    return {"c.toml": "config file", "t.csv": "trace", "spec.toml": "sweep spec", "mine.toml": "preset file"}.get(
        name, "markdown file"
    )


def test_a_run_directory_that_cannot_be_read_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uvmsim.run(preset="kaveri-apu", set={"workload.stride.accesses": 100}, out=tmp_path / "run")
    real_read_text = Path.read_text

    def denying(self: Path, *a: Any, **kw: Any) -> str:
        if self.name == "summary.json":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_read_text(self, *a, **kw)

    monkeypatch.setattr(Path, "read_text", denying)
    with pytest.raises(uvmsim.InputError, match="run summary `.*summary.json` cannot be read: Permission denied"):
        uvmsim.load(tmp_path / "run")
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["plot", "batch-time-vs-bytes", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "summary.json` cannot be read: Permission denied" in err, err


def test_an_output_that_cannot_be_written_exits_1(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    p = cli("run", "--preset", "kaveri-apu", *STRIDE, "-o", "file/out")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert p.stderr.startswith("uvmsim: error: ") and len(p.stderr.splitlines()) == 1, p.stderr
    assert "file/out" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["trace", "record", "--preset", "titan-v", *STRIDE, "file/t.uvmt"], id="record"),
        pytest.param(["trace", "convert", "t.csv", "file/t.uvmt"], id="convert"),
        pytest.param(["trace", "convert", "t.csv", "."], id="convert-to-a-directory"),
        # A FIFO or a device (/dev/null) OUT: the temporary file was renamed over it, replacing the node (as root,
        # /dev/null became a regular file).
        pytest.param(["trace", "record", "--preset", "titan-v", *STRIDE, "fifo"], id="record-over-a-fifo"),
        pytest.param(["trace", "convert", "t.csv", "fifo"], id="convert-over-a-fifo"),
        pytest.param(["run", "--preset", "kaveri-apu", *STRIDE, "--timeline", "fifo"], id="timeline-over-a-fifo"),
    ],
)
def test_a_trace_output_that_cannot_be_written_exits_1(cli: Cli, tmp_path: Path, args: list[str]) -> None:
    # As `run`'s OUT: refused before any work, one line, exit 1 (not bad input).
    _inputs(tmp_path)
    (tmp_path / "file").write_text("")
    os.mkfifo(tmp_path / "fifo")
    p = cli(*args)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert p.stderr.startswith("uvmsim: error: ") and "cannot write" in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1, p.stderr
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode)


ACCELSIM_DIR = Path(__file__).resolve().parent / "data" / "accelsim"


def _run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the CLI in this process (faster than a subprocess); its exit code and stderr."""
    with pytest.raises(SystemExit) as e:
        cli_mod.main(args)
    return int(e.value.code or 0), capsys.readouterr().err


# (arguments, the input they would overwrite, words of the message); paths relative to the test's directory,
# where _inputs wrote its files, `link.csv` (a symbolic link), `hard.csv` and `hard` (hard links) to t.csv, a copy of
# tests/data/accelsim in acc/ and d/summary.json, a copy of c.toml.
OUTPUT_IS_INPUT = [
    pytest.param(["run", *TRACE_RUN, "--timeline", "t.csv"], "t.csv", "the trace", id="timeline-trace"),
    pytest.param(["run", *TRACE_RUN, "--timeline", "./t.csv"], "t.csv", "the trace", id="timeline-spelling"),
    pytest.param(["run", *TRACE_RUN, "--timeline", "link.csv"], "t.csv", "the trace", id="timeline-symlink"),
    pytest.param(["run", *TRACE_RUN, "--timeline", "hard.csv"], "t.csv", "the trace", id="timeline-hard-link"),
    pytest.param(
        ["run", "--preset", "mgpusim-r9nano", "--set", "workload.kind=trace", "--set", "workload.trace.path=t.csv"]
        + ["--timeline", "t.csv"],
        "t.csv",
        "the trace",
        id="timeline-trace-by-set",
    ),
    pytest.param(["run", "c.toml", "--timeline", "c.toml"], "c.toml", "the config file", id="timeline-config"),
    pytest.param(
        ["run", "--preset", "mine.toml", "--timeline", "mine.toml"],
        "mine.toml",
        "the preset file",
        id="timeline-preset",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--trace", "acc/kernelslist.g", "--timeline", "acc/kernel-1.traceg"],
        "acc/kernel-1.traceg",
        "a kernel file of the trace",
        id="timeline-accelsim-kernel",
    ),
    pytest.param(["run", "c.toml", "-o", "c.toml"], "c.toml", "the config file", id="out-dir-is-config"),
    pytest.param(["run", "d/summary.json", "-o", "d"], "d/summary.json", "writes d/summary.json", id="out-dir-holds"),
    # A table's name too, refused as -o's value before the run (the API's own check would say "this run writes").
    pytest.param(
        ["run", "d/x.parquet", "-o", "d"], "d/x.parquet", "'-o' / '--out': `d` would replace", id="out-dir-holds-table"
    ),
    pytest.param(["trace", "record", "c.toml", "c.toml"], "c.toml", "the config file", id="record-config"),
    pytest.param(["trace", "record", "c.toml", "./c.toml"], "c.toml", "the config file", id="record-config-spelling"),
    pytest.param(
        ["trace", "record", "--preset", "titan-v", "--set", "workload.kind=trace", "--set", "workload.trace.path=t.csv"]
        + ["hard"],
        "t.csv",
        "the trace",
        id="record-trace",
    ),
    pytest.param(["trace", "convert", "t.csv", "link.csv"], "t.csv", "the input trace", id="convert-symlink"),
    pytest.param(
        ["trace", "convert", "acc/kernelslist.g", "acc/kernel-1.traceg"],
        "acc/kernel-1.traceg",
        "a kernel file of the trace",
        id="convert-accelsim-kernel",
    ),
    pytest.param(
        ["trace", "convert", "t.csv", "mine.toml", "--preset", "mine.toml"], "mine.toml", "preset", id="convert-preset"
    ),
    pytest.param(["sweep", "spec.toml", "-o", "spec.toml"], "spec.toml", "the sweep spec", id="sweep-out-is-spec"),
]


@pytest.mark.parametrize(("args", "name", "words"), OUTPUT_IS_INPUT)
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    name: str,
    words: str,
) -> None:
    # Was: exit 0 with the trace, config or preset replaced by the timeline (or the config by a recorded trace).
    _inputs(tmp_path)
    (tmp_path / "link.csv").symlink_to("t.csv")
    os.link(tmp_path / "t.csv", tmp_path / "hard.csv")
    os.link(tmp_path / "t.csv", tmp_path / "hard")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "summary.json").write_text((tmp_path / "c.toml").read_text())
    (tmp_path / "d" / "x.parquet").write_text((tmp_path / "c.toml").read_text())
    (tmp_path / "acc").mkdir()
    for f in ACCELSIM_DIR.iterdir():
        (tmp_path / "acc" / f.name).write_bytes(f.read_bytes())
    before = (tmp_path / name).read_bytes()
    monkeypatch.chdir(tmp_path)
    code, err = _run_main(args, capsys)
    assert code == 2, err
    assert err.startswith("uvmsim: error: ") and len(err.splitlines()) == 1, err
    assert words in err and ("destroy its input" in err or "choose another directory" in err), err
    assert (tmp_path / name).read_bytes() == before
    assert not (tmp_path / "uvmsim-out").exists()


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["run", "--preset", "kaveri-apu", *STRIDE], id="run"),
        pytest.param(["sweep", "spec.toml"], id="sweep"),
        pytest.param(["reproduce", "apu-tlb-miss-latency"], id="reproduce"),
        pytest.param(["reproduce", "--all"], id="reproduce-all"),
    ],
)
@pytest.mark.parametrize(
    ("out", "why"),
    [("file", "it is a file, not a directory"), ("file/sub", "`file` is a file, not a directory")],
)
def test_an_output_directory_that_is_a_file_exits_1_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    out: str,
    why: str,
) -> None:
    # Was: exit 2 (click's "Directory 'file' is a file") for `-o file`, exit 1 for `-o file/sub`: both are an
    # output that cannot be written, exit 1, refused before any run.
    _inputs(tmp_path)
    (tmp_path / "file").write_text("")
    monkeypatch.chdir(tmp_path)
    code, err = _run_main([*command, "-o", out], capsys)
    assert code == 1, err
    assert err == f"uvmsim: error: {out}: cannot write the output directory: {why}\n", err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes a directory whatever its mode")
def test_an_output_directory_without_write_permission_exits_1_before_the_run(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    try:
        p = cli("run", "--preset", "kaveri-apu", *STRIDE, "-o", "ro/out")
    finally:
        (tmp_path / "ro").chmod(0o755)
    assert p.returncode == 1, p.stderr
    assert p.stderr == "uvmsim: error: ro/out: cannot write the output directory: Permission denied\n", p.stderr


def test_a_panic_of_the_core_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # pyo3 raises a panic of the core as PanicException, a BaseException: `except Exception` let it through as a
    # traceback.
    class PanicException(BaseException):
        pass

    def panics(*args: Any, **kwargs: Any) -> None:
        raise PanicException("index out of bounds: the len is 0 but the index is 0")

    monkeypatch.setattr(uvmsim, "run", panics)
    monkeypatch.chdir(tmp_path)
    code, err = _run_main(["run", "--preset", "kaveri-apu", *STRIDE, "-q", "-o", "out"], capsys)
    assert code == 1, err
    assert err == (
        "uvmsim: error: internal error: PanicException: index out of bounds: the len is 0 but the index is 0 "
        "(set UVMSIM_TRACEBACK=1 for the traceback)\n"
    ), err
    assert not (tmp_path / "out").exists()


def test_an_output_file_that_is_a_directory_exits_1_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: exit 2 (click's "File 'adir' is a directory"), where `trace record`/`convert` OUT and `-o FILE` exit 1:
    # an output that cannot be written.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    uvmsim.run(preset="kaveri-apu", set=["workload.kind=stride", "workload.stride.accesses=100"], out="r")
    for args in (
        ["run", "--preset", "kaveri-apu", *STRIDE, "-q", "-o", "out", "--timeline", "adir"],
        ["plot", "tlb-hit-rates", "r", "-o", "adir"],
    ):
        code, err = _run_main(args, capsys)
        assert (code, err) == (1, "uvmsim: error: adir: cannot write: Is a directory\n"), (args, err)
    assert not (tmp_path / "out").exists() and not list((tmp_path / "adir").iterdir())
    # From Python the writer's error names the file, not its temporary file (".adir.<random>.tmp").
    from uvmsim import plot

    with pytest.raises(IsADirectoryError, match=r"^adir: cannot write: Is a directory$"):
        plot.render("tlb-hit-rates", "r", "adir", "png")
    # ... before drawing (which can take a while on a large sweep).
    monkeypatch.setitem(plot.KINDS, "tlb-hit-rates", dataclasses.replace(plot.KINDS["tlb-hit-rates"], draw=_no_draw))
    with pytest.raises(IsADirectoryError, match=r"^adir: cannot write: Is a directory$"):
        plot.render("tlb-hit-rates", "r", "adir", "png")


def _no_draw(*args: object) -> None:
    raise AssertionError("drew a plot it cannot write")


@pytest.mark.parametrize(
    ("argv", "code", "stream"), [(["run", "--no-such-option"], 2, "stderr"), (["--help"], 0, "stdout")]
)
def test_the_command_keeps_its_exit_code_and_exit_handlers_once_pyarrow_is_loaded(
    argv: list[str], code: int, stream: str
) -> None:
    """With pyarrow loaded the command leaves by os._exit (its thread pools can abort the interpreter's
    teardown, apache/arrow#34314): the exit code, what was printed and the exit handlers must survive it."""
    import subprocess

    script = (
        "import atexit, sys, pyarrow\n"
        "atexit.register(lambda: print('exit handlers ran', file=sys.stderr))\n"
        "from uvmsim.cli import entry\n"
        f"sys.argv = ['uvmsim', *{argv!r}]\n"
        "entry()\n"
    )
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert p.returncode == code, p.stderr
    assert "exit handlers ran" in p.stderr
    assert ("error:" if code else "Usage:") in getattr(p, stream)


def test_each_workload_kind_has_its_own_parameter_section() -> None:
    # `run` finds another workload's keys by the section its parameters are in: one per kind, no two kinds sharing.
    sections = {w["name"]: {p["key"].split(".")[1] for p in w["params"]} for w in uvmsim.workloads()}
    assert all(len(s) == 1 for s in sections.values()), sections
    assert len({s.pop() for s in sections.values()}) == len(sections)


def test_a_runs_own_workload_keys_and_the_shared_ones_are_accepted(cli: Cli) -> None:
    p = cli(
        "run", "--preset", "titan-v", "-q", "--set", "workload.kind=stream", "--set", "workload.stream.elements=4096"
    )
    assert p.returncode == 0, p.stderr
    p = cli(
        "run", "--preset", "titan-v", "-q", "--set", "workload.stride.accesses=50", "--set", "workload.compute_cycles=2"
    )
    assert p.returncode == 0, p.stderr
