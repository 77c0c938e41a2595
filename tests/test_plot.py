"""`uvmsim plot`: every kind renders from a small run or sweep, and refuses clearly when its data is missing."""

from __future__ import annotations

import math
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import uvmsim
from conftest import Cli
from uvmsim import plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# A small managed run with per-batch records (about 40 batches).
MANAGED = {
    "workload.kind": "regular",
    "workload.managed": True,
    "workload.regular.threads": 8192,
    "uvm.records": True,
    "uvm.fault_records": True,
}
# A sweep of a numeric axis against a policy axis: 2 x 3 runs of a few ms each.
SWEEP = """\
preset = "titan-v"
[set]
"workload.kind" = "regular"
workload.managed = true
[grid]
"uvm.replay_policy" = ["batch", "once"]
"workload.regular.threads" = [1024, 2048, 4096]
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("run")
    uvmsim.run(preset="titan-v", set=MANAGED, out=d)
    return d


@pytest.fixture(scope="module")
def multi_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A small 4-GPU run: the multi-GPU model measures the L2-miss latency breakdown.
    d = tmp_path_factory.mktemp("multi")
    # With records: its migrations table has a row per page move (link-utilization).
    sets = {"workload.kind": "stencil2d", "workload.stencil2d.nx": 256, "uvm.records": True}
    uvmsim.run(preset="li-4gpu-gmmu", set=sets, out=d)
    return d


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sweep")
    (d / "spec.toml").write_text(SWEEP)
    summary = uvmsim.sweep.run_sweep(d / "spec.toml", d / "out", jobs=2)
    assert summary.ok == 6
    return d / "out"


def check_file(path: Path, fmt: str) -> None:
    data = path.read_bytes()
    assert len(data) > 10_000, f"{path} is suspiciously small ({len(data)} bytes)"
    if fmt == "png":
        assert data.startswith(PNG_MAGIC)
    else:
        root = ET.fromstring(data)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"


CASES = [
    ("runtime-bars", "sweep", []),
    ("runtime-bars", "sweep", ["--axis", "workload.regular.threads", "--metric", "uvm.batches"]),
    ("tlb-hit-rates", "sweep", []),
    ("tlb-hit-rates", "run", []),
    ("latency-concurrency", "sweep", []),
    ("batch-time-vs-bytes", "run", []),
    ("batch-stages", "run", []),
    ("fault-scatter", "run", []),
    ("link-utilization", "run", []),
    ("link-utilization", "multi", []),
    ("l2-miss-latency", "multi", []),
]


@pytest.mark.parametrize("fmt", ["png", "svg"])
@pytest.mark.parametrize(("kind", "source", "extra"), CASES)
def test_kind_renders(
    cli: Cli,
    run_dir: Path,
    sweep_dir: Path,
    multi_dir: Path,
    tmp_path: Path,
    kind: str,
    source: str,
    extra: list[str],
    fmt: str,
) -> None:
    d = {"run": run_dir, "sweep": sweep_dir, "multi": multi_dir}[source]
    out = tmp_path / f"{kind}.{fmt}"
    p = cli("plot", kind, str(d), "-o", str(out), *extra)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"wrote {out}"
    check_file(out, fmt)


def test_default_output_is_in_the_directory(cli: Cli, run_dir: Path) -> None:
    p = cli("plot", "tlb-hit-rates", str(run_dir), "--format", "svg")
    assert p.returncode == 0, p.stderr
    check_file(run_dir / "tlb-hit-rates.svg", "svg")


def test_runtime_bars_normalizes_to_the_first_value_with_a_geomean(sweep_dir: Path) -> None:
    df = uvmsim.sweep.load_sweep(sweep_dir)
    fig = plot.runtime_bars(df, "uvm.replay_policy")
    ax = fig.axes[0]
    heights = [[b.get_height() for b in c] for c in ax.containers]  # one container per policy
    assert heights[0] == pytest.approx([1.0] * 4)  # the baseline, 3 groups + geomean
    ratios = []
    for threads in (1024, 2048, 4096):
        t = df[df["set.workload.regular.threads"] == threads].set_index("set.uvm.replay_policy")["time.total_ns"]
        ratios.append(t["once"] / t["batch"])
    assert heights[1][:3] == pytest.approx(ratios)
    assert heights[1][3] == pytest.approx((ratios[0] * ratios[1] * ratios[2]) ** (1 / 3))
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "geomean"


def test_runtime_bars_reads_a_value_a_run_leaves_at_its_base_from_its_config(tmp_path: Path) -> None:
    # A [[runs]] entry without the axis key has NaN in its column (and makes pandas store 4 as 4.0): the plot
    # takes the value the run used, from its resolved config, and keeps integers integers.
    import warnings

    base = {"workload.kind": "stream", "workload.stream.elements": 65536}
    spec = uvmsim.sweep.parse_spec({"preset": "titan-v", "set": base, "runs": [{}, {"gpu.sms": 4}]}, "<test>")
    assert uvmsim.sweep.run_sweep(spec, tmp_path / "s", jobs=1).ok == 2
    df = uvmsim.sweep.load_sweep(tmp_path / "s")
    sms = uvmsim.resolve(preset="titan-v")["gpu"]["sms"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Mean of empty slice"
        ax = plot.runtime_bars(df, "gpu.sms").axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [str(sms), "4"]
    assert ax.get_ylabel().endswith(f"gpu.sms = {sms})")
    t = df.set_index(df["set.gpu.sms"].fillna(sms).astype(int))["time.total_ns"]
    heights = [[b.get_height() for b in c] for c in ax.containers]
    assert heights == [pytest.approx([1.0, 1.0]), pytest.approx([t[4] / t[sms]] * 2)]
    # A run whose value cannot be told (no stored config) is refused, not drawn as "nan".
    df.loc[df["set.gpu.sms"].isna(), "config"] = None
    with pytest.raises(plot.PlotDataError, match="does not override `gpu.sms`"):
        plot.runtime_bars(df, "gpu.sms")


def test_batch_fit_matches_numpy(run_dir: Path) -> None:
    batches = uvmsim.load(run_dir).tables["batches"]
    fig = plot.batch_time_vs_bytes(batches)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[0] == f"{len(batches)} batches"
    import numpy as np

    slope, intercept = np.polyfit(batches["bytes_h2d"] / 2**20, (batches["end_ns"] - batches["start_ns"]) / 1e3, 1)
    assert labels[1] == f"fit: {intercept:.1f} µs + {slope:.1f} µs/MiB"


def test_batch_stages_stack_the_recorded_stages(run_dir: Path, tmp_path: Path) -> None:
    batches = uvmsim.load(run_dir).tables["batches"]
    fig = plot.batch_stages(batches)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == list(plot.STAGE_ORDER)
    # The stacked bars of each batch reach its recorded duration.
    import numpy as np

    tops = np.zeros(len(batches))
    for container in fig.axes[0].containers:
        tops = np.maximum(tops, [r.get_y() + r.get_height() for r in container])
    assert tops == pytest.approx(((batches["end_ns"] - batches["start_ns"]) / 1e3).to_numpy(), rel=1e-6)
    # Every stage has its own colour (the default cycle repeated after 10).
    colours = [tuple(c.patches[0].get_facecolor()) for c in fig.axes[0].containers]
    assert len(set(colours)) == len(colours) == len(plot.STAGE_ORDER)
    check_file(plot.save(fig, tmp_path / "stages.png"), "png")


def test_batch_stages_draws_whatever_stage_columns_exist(run_dir: Path, tmp_path: Path) -> None:
    # Tables from other sources may carry other stages: they follow the known ones.
    batches = uvmsim.load(run_dir).tables["batches"][["batch", "start_ns", "end_ns", "replay_ns"]].copy()
    batches["service_ns"] = batches["end_ns"] - batches["start_ns"] - batches["replay_ns"]
    fig = plot.batch_stages(batches)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["replay", "service"]
    check_file(plot.save(fig, tmp_path / "stages2.png"), "png")


@pytest.mark.parametrize(("n", "per_group"), [(500, 1), (5000, 3)])
def test_batch_stages_of_many_batches_are_bounded_areas(n: int, per_group: int) -> None:
    # One bar per batch per stage of a 60,000-batch run took minutes and gigabytes: beyond STAGE_BARS_MAX
    # batches the stages are stacked step areas, each step the mean of `per_group` consecutive batches.
    import numpy as np
    import pandas as pd

    assert n > plot.STAGE_BARS_MAX and math.ceil(n / plot.STAGE_GROUPS_MAX) == per_group
    i = np.arange(n, dtype=float)
    batches = pd.DataFrame({"batch": i.astype(int), "start_ns": 0.0, "end_ns": 1e3 * i, "fetch_ns": 500 * i})
    batches["replay_ns"] = batches["end_ns"] - batches["fetch_ns"]  # batch i takes i µs in all
    ax = plot.batch_stages(batches).axes[0]
    assert not ax.containers and len(ax.collections) == 2  # no bars: one area per stage
    top = ax.collections[-1].get_paths()[0].vertices[:, 1].max()
    last = i[(n - 1) // per_group * per_group :]
    assert top == pytest.approx(last.mean())  # the last step: the mean time of the last group's batches
    title, ylabel = ax.get_title(), ax.get_ylabel()
    assert f"{n:,} batches" in title
    if per_group > 1:
        assert f"mean of each {per_group} consecutive" in title and "mean" in ylabel
    else:
        assert "mean" not in title + ylabel


def test_save_draws_the_figure_before_creating_the_file(tmp_path: Path) -> None:
    # Drawing can take long; a plot killed meanwhile must not leave an empty temporary file next to the output.
    class Figure:
        def savefig(self, f: Any, **kwargs: Any) -> None:
            assert list(tmp_path.iterdir()) == [], "a file exists while the figure is drawn"
            f.write(b"drawn")

    plot.save(Figure(), tmp_path / "p.png")  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["p.png"] and (tmp_path / "p.png").read_bytes() == b"drawn"


def test_multi_gpu_link_utilization_stays_within_the_link_and_leaves_p2p_out(multi_dir: Path) -> None:
    import pandas as pd

    r = uvmsim.load(multi_dir)
    mig = r.tables["migrations"]
    assert (mig["direction"] == "h2d").sum() == r.metrics["multi.migrations.h2d"] > 0
    bandwidth, latency = r.config["link"]["bandwidth_gbps"], r.config["link"]["latency_ns"]
    # The shared uplink carries every GPU's pages: spread over the time each page takes on it, never above 100%
    # (spread over a row's whole span, which includes the wait for the busy link, the queued pages would overlap).
    (line,) = plot.link_utilization(mig, bandwidth, latency_ns=latency).axes[0].lines
    assert 50.0 < line.get_ydata().max() <= 100.0 + 1e-6
    # GPU-to-GPU copies cross the peer fabric: left out, and the title says how many.
    p2p = pd.DataFrame([{**mig.iloc[0].to_dict(), "direction": "p2p", "src_gpu": 1, "gpu": 0}] * 3)
    ax = plot.link_utilization(pd.concat([mig, p2p]), bandwidth, latency_ns=latency).axes[0]
    assert [x.get_label() for x in ax.lines] == ["h2d"] and "3 p2p copies not shown" in ax.get_title()
    with pytest.raises(plot.PlotDataError, match="all GPU-to-GPU"):
        plot.link_utilization(p2p, bandwidth)


UNAVAILABLE = [
    ("batch-time-vs-bytes", "sweep", ["is a sweep", "run directory"]),
    ("runtime-bars", "run", ["not a sweep directory"]),
    ("runtime-bars", "nowhere", ["does not exist"]),
]


@pytest.mark.parametrize(("kind", "source", "expected"), UNAVAILABLE)
def test_missing_data_is_one_line_and_exit_2(
    cli: Cli, run_dir: Path, sweep_dir: Path, tmp_path: Path, kind: str, source: str, expected: list[str]
) -> None:
    d = {"run": run_dir, "sweep": sweep_dir, "nowhere": tmp_path / "nowhere"}[source]
    p = cli("plot", kind, str(d), "-o", str(tmp_path / "x.png"))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("uvmsim: error: "), p.stderr
    for word in expected:
        assert word in p.stderr
    assert not (tmp_path / "x.png").exists()


def test_run_without_records_says_how_to_get_them(cli: Cli, tmp_path: Path) -> None:
    uvmsim.run(preset="titan-v", set={"workload.kind": "regular", "workload.regular.threads": 1024}, out=tmp_path / "r")
    p = cli("plot", "batch-time-vs-bytes", "r")
    assert p.returncode == 2 and "uvm.records=true" in p.stderr, p.stderr


# A multi-application run whose pages start in their GPU's memory: nothing moves.
RESIDENT = {"multi.apps": ["stencil2d"], "multi.apps_resident": True}


@pytest.mark.parametrize(
    ("preset", "workload", "kind", "extra", "expected"),
    [
        ("kaveri-apu", "regular", "batch-stages", {}, ['translation.mode = "iommu"', "page-request path"]),
        ("li-4gpu-gmmu", "stencil2d", "batch-time-vs-bytes", {}, ["multi-GPU model", "multi.far_faults = "]),
        (
            "li-4gpu-gmmu",
            "stencil2d",
            "link-utilization",
            RESIDENT,
            ["multi-GPU model", "moved no page", "multi.migrations = 0", "multi.apps_resident = true"],
        ),
        ("titan-v", "regular", "link-utilization", {}, ["workload.managed = false"]),
    ],
)
def test_a_run_with_empty_tables_says_why(
    cli: Cli, tmp_path: Path, preset: str, workload: str, kind: str, extra: dict[str, Any], expected: list[str]
) -> None:
    # The run kept records, but this preset or model produces none of this kind: asking for
    # `uvm.records=true` again, as for a run without records, would send the user round in a circle.
    size = {"regular": {"workload.regular.threads": 1024}, "stencil2d": {"workload.stencil2d.nx": 256}}[workload]
    managed = preset != "titan-v"
    sets = {"workload.kind": workload, "workload.managed": managed, "uvm.records": True, **size, **extra}
    uvmsim.run(preset=preset, set=sets, out=tmp_path / "r")
    p = cli("plot", kind, "r")
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "has no rows" in p.stderr and "uvm.records" not in p.stderr, p.stderr
    for words in expected:
        assert words in p.stderr, p.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["plot", "bars", "."], ["unknown plot kind `bars`", "runtime-bars"]),
        (["plot", "runtime-bars", "SWEEP", "--axis", "nope"], ["no axis `nope`", "uvm.replay_policy"]),
        (["plot", "runtime-bars", "SWEEP", "--metric", "time.totl_ns"], ["time.totl_ns", "time.total_ns"]),
        (["plot", "runtime-bars", "SWEEP", "-o", "x.pdf"], ["x.pdf", "--format"]),
        (["plot", "runtime-bars", "SWEEP", "-o", "x.svg", "--format", "png"], [".svg", "png"]),
        (["plot", "runtime-bars"], ["DIR"]),
    ],
)
def test_bad_plot_input_exit_2(cli: Cli, sweep_dir: Path, args: list[str], expected: list[str]) -> None:
    p = cli(*[str(sweep_dir) if a == "SWEEP" else a for a in args])
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    for word in expected:
        assert word in p.stderr, p.stderr


def test_a_plot_is_not_written_over_the_files_it_reads(
    cli: Cli, run_dir: Path, sweep_dir: Path, tmp_path: Path
) -> None:
    # `plot tlb-hit-rates DIR -o DIR/summary.json --format svg` replaced the run's summary with an SVG (exit 0), and
    # `-o DIR/batches.parquet --format png` its batches table with a PNG.
    shutil.copytree(run_dir, tmp_path / "run")
    shutil.copytree(sweep_dir, tmp_path / "sweep")
    (sweep_run,) = sorted((tmp_path / "sweep" / "runs").glob("*.parquet"))[:1]
    files = [*(tmp_path / "run").iterdir(), *(tmp_path / "sweep").rglob("*.*")]
    before = {f: f.read_bytes() for f in files if f.is_file()}
    for kind, d, out, what in (
        ("tlb-hit-rates", "run", "run/summary.json", "a run summary"),
        ("batch-stages", "run", "run/batches.parquet", "a table of the run"),
        ("runtime-bars", "sweep", f"sweep/runs/{sweep_run.name}", "a sweep run"),
        ("runtime-bars", "sweep", "sweep/sweep.json", "the sweep record"),
    ):
        p = cli("plot", kind, d, "-o", out, "--format", "svg")
        assert p.returncode == 2 and p.stderr.count("\n") == 1, (out, p.stderr)
        assert f"`{out}` is {what} of this plot: writing it would destroy its input" in p.stderr
    assert {f: f.read_bytes() for f in before} == before
    assert cli("plot", "tlb-hit-rates", "run", "-o", "run/rates.svg").returncode == 0


def test_list_names_every_kind_and_what_is_missing(cli: Cli) -> None:
    p = cli("plot", "--list")
    assert p.returncode == 0, p.stderr
    lines = {line.split()[0]: line for line in p.stdout.splitlines()}
    assert list(lines) == list(plot.KINDS)
    assert "migrations table" in lines["link-utilization"] and "multi.l2miss" in lines["l2-miss-latency"]
    assert not any("not yet recorded" in line for line in lines.values())


def test_link_utilization_is_bytes_over_capacity() -> None:
    import pandas as pd

    # 12,000 bytes over 1 µs on a 12 GB/s link: 100% for the whole span; a second, half-rate copy after it: 50%.
    m = pd.DataFrame(
        {
            "start_ns": [0.0, 1000.0],
            "end_ns": [1000.0, 2000.0],
            "bytes": [12_000, 6_000],
            "direction": ["h2d", "h2d"],
        }
    )
    line = plot.link_utilization(m, 12.0, bins=20).axes[0].lines[0]
    y = list(line.get_ydata())
    assert y[:10] == pytest.approx([100.0] * 10) and y[10:] == pytest.approx([50.0] * 10)


def test_l2_miss_latency_stacks_the_terms(multi_dir: Path) -> None:
    m = uvmsim.load(multi_dir).metrics
    fig = plot.l2_miss_latency([("a", m)])
    tops = sum(p.get_height() for p in fig.axes[0].patches)
    assert tops == pytest.approx(sum(m[f"multi.l2miss.{t}_ns"] for t in plot.L2MISS_TERMS)) and tops > 0
    with pytest.raises(plot.PlotDataError, match="multi-GPU"):
        plot.l2_miss_latency([("single", {"time.total_ns": 1.0})])


def test_fault_scatter_draws_every_fault(run_dir: Path, tmp_path: Path) -> None:
    faults = uvmsim.load(run_dir).tables["faults"]
    assert set(faults["outcome"]) <= {"serviced", "duplicate", "stale", "flushed"}
    # Every page of the run was serviced exactly once.
    assert (faults["outcome"] == "serviced").sum() == uvmsim.load(run_dir).metrics["uvm.faults.unique"]
    fig = plot.fault_scatter(faults)
    drawn = sum(len(c.get_offsets()) for c in fig.axes[0].collections)
    assert drawn == len(faults)
    # The grey rings are named, with their count.
    flushed = int((faults["outcome"] == "flushed").sum())
    legend = fig.axes[0].get_legend()
    assert flushed > 0 and legend is not None and f"flushed ({flushed}" in legend.get_texts()[0].get_text()
    check_file(plot.save(fig, tmp_path / "faults.svg"), "svg")


@pytest.fixture(scope="module")
def reproduce_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from uvmsim import cli as cli_mod

    d = tmp_path_factory.mktemp("reproduce") / "tlb"
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["reproduce", "apu-tlb-miss-latency", "--quick", "-o", str(d)])
    assert e.value.code == 0
    return d


@pytest.mark.parametrize("kind", ["tlb-hit-rates", "runtime-bars", "batch-stages", "l2-miss-latency"])
@pytest.mark.parametrize("layout", ["experiment", "interrupted-experiment", "all"])
def test_a_reproduce_output_is_named_with_what_plot_takes(
    cli: Cli, reproduce_dir: Path, tmp_path: Path, kind: str, layout: str
) -> None:
    # Was: "the sweep has no successful run to plot" (its runs/ was taken for a sweep's), or "`DIR` is a sweep".
    import shutil

    if layout == "experiment":
        d, plots, run = reproduce_dir, reproduce_dir / "plot.png", reproduce_dir / "runs"
    elif layout == "interrupted-experiment":  # its runs are written as they finish, comparison.csv at the end
        d = tmp_path / "tlb"
        shutil.copytree(reproduce_dir / "runs", d / "runs")
        plots, run = d / "plot.png", d / "runs"
    else:
        d = tmp_path / "all"
        shutil.copytree(reproduce_dir, d / "apu-tlb-miss-latency")
        (d / "report.html").write_text("<html></html>\n")
        plots, run = d / "ID" / "plot.png", d / "apu-tlb-miss-latency" / "runs"
    assert (d / "runs").is_dir() or layout == "all"
    p = cli("plot", kind, str(d))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.splitlines()) == 1, p.stderr
    for words in ("uvmsim reproduce", "not a run or a sweep directory", str(plots), "run directory", "sweep directory"):
        assert words in p.stderr, (words, p.stderr)
    assert f"`{run}{os.sep}stride-" in p.stderr, p.stderr  # one of its runs, which plot takes
    assert not list(d.glob(f"{kind}.*"))
    # The run it names plots.
    if kind == "tlb-hit-rates":
        example = p.stderr.split("`")[-2]
        assert cli("plot", kind, example, "-o", str(tmp_path / "t.png")).returncode == 0


@pytest.mark.parametrize(
    ("kind", "ok"),
    [("tlb-hit-rates", True), ("fault-scatter", True), ("batch-stages", False), ("batch-time-vs-bytes", False)],
)
def test_a_plot_reads_only_the_tables_it_needs(run_dir: Path, tmp_path: Path, kind: str, ok: bool) -> None:
    # Was: any damaged table of the run stopped every plot of it, also one that draws only its metrics.
    import shutil

    d = tmp_path / "run"
    shutil.copytree(run_dir, d)
    (d / "batches.parquet").write_bytes(b"PAR1 damaged")
    if ok:
        check_file(plot.render(kind, d, tmp_path / "x.png"), "png")
    else:
        with pytest.raises(uvmsim.ConfigError, match=r"batches\.parquet: not a readable Parquet table"):
            plot.render(kind, d, tmp_path / "x.png")
    with pytest.raises(uvmsim.ConfigError, match="batches.parquet"):
        uvmsim.load(d)  # everything, by default
    assert set(uvmsim.load(d, tables=["faults"]).tables) == {"faults"}
    assert uvmsim.load(d, tables=()).tables == {}


# --- made-up data: what each plot draws, computed by hand (the mutation audit of plot.py) -----------------------


def sweep_frame(rows: list[dict[str, Any]]) -> Any:
    """A sweep's DataFrame as load_sweep gives it: run_id, status, error, the `set.` columns, metrics, config."""
    import pandas as pd

    full = [{"run_id": f"r{i}", "status": "ok", "error": None, **r, "config": None} for i, r in enumerate(rows)]
    return pd.DataFrame(full)


def bar_heights(ax: Any) -> list[list[float]]:
    return [[b.get_height() for b in c] for c in ax.containers]


def tick_labels(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


def legend_texts(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_runtime_bars_orders_groups_and_values_as_they_appear_and_means_a_cells_runs() -> None:
    P, T = "set.uvm.replay_policy", "set.workload.regular.threads"
    df = sweep_frame(
        [
            {P: "once", T: 4096, "time.total_ns": 200.0},
            {P: "batch", T: 4096, "time.total_ns": 100.0},
            {P: "once", T: 1024, "time.total_ns": 30.0},
            {P: "once", T: 1024, "time.total_ns": 50.0},  # two runs of one cell: their mean, 40
            {P: "batch", T: 1024, "time.total_ns": 20.0},
            {P: "never", T: 1024, "time.total_ns": math.nan, "status": "failed"},  # not drawn
        ]
    )
    ax = plot.runtime_bars(df, "uvm.replay_policy").axes[0]
    # Values and groups in order of appearance, not sorted: the baseline is "once", the first value.
    assert legend_texts(ax) == ["once", "batch"] and ax.get_ylabel().endswith("uvm.replay_policy = once)")
    assert tick_labels(ax) == ["threads=4096", "threads=1024", "geomean"]
    # batch / once: 100 / 200 = 0.5 at 4096, 20 / mean(30, 50) = 0.5 at 1024 (a sum, 80, would give 0.25).
    assert bar_heights(ax) == [pytest.approx([1.0, 1.0, 1.0]), pytest.approx([0.5, 0.5, 0.5])]
    # Another baseline: once / batch = 2 and 40 / 20 = 2; the label names it.
    ax = plot.runtime_bars(df, "uvm.replay_policy", baseline="batch").axes[0]
    assert bar_heights(ax) == [pytest.approx([2.0, 2.0, 2.0]), pytest.approx([1.0, 1.0, 1.0])]
    assert ax.get_ylabel().endswith("uvm.replay_policy = batch)")
    with pytest.raises(plot.PlotDataError, match="no value 'never'"):
        plot.runtime_bars(df, "uvm.replay_policy", baseline="never")  # only a failed run has it
    # An axis named with its column's `set.` prefix is the same axis, labelled without it.
    ax = plot.runtime_bars(df, P).axes[0]
    assert bar_heights(ax)[1] == pytest.approx([0.5, 0.5, 0.5])
    assert ax.get_legend().get_title().get_text() == "uvm.replay_policy"
    # With no other axis, one group, "all runs": batch's mean (100 + 20) / 2 = 60 over once's (200 + 30 + 50) / 3.
    ax = plot.runtime_bars(df.drop(columns=[T]), "uvm.replay_policy").axes[0]
    assert tick_labels(ax) == ["all runs", "geomean"]
    assert bar_heights(ax)[1] == pytest.approx([60 / (280 / 3)] * 2)
    # No successful run: refused, with the reason.
    with pytest.raises(plot.PlotDataError, match="no successful run"):
        plot.runtime_bars(df.assign(status="failed"), "uvm.replay_policy")


def test_runtime_bars_geomean_leaves_out_zero_missing_and_unnormalizable_ratios() -> None:
    import numpy as np

    P, G = "set.uvm.replay_policy", "set.gpu.sms"
    df = sweep_frame(
        [
            {P: "batch", G: 1, "uvm.batches": 100.0},
            {P: "once", G: 1, "uvm.batches": 0.0},  # ratio 0: drawn, but no log in the geomean
            {P: "batch", G: 2, "uvm.batches": 100.0},
            {P: "once", G: 2, "uvm.batches": 50.0},  # ratio 0.5
            {P: "batch", G: 3, "uvm.batches": 100.0},  # no "once" run: NaN
            {P: "batch", G: 4, "uvm.batches": 0.0},  # a zero baseline: nothing to normalize to, NaN bars
            {P: "once", G: 4, "uvm.batches": 7.0},
        ]
    )
    ax = plot.runtime_bars(df, "uvm.replay_policy", metric="uvm.batches").axes[0]
    base, once = bar_heights(ax)
    assert tick_labels(ax) == ["sms=1", "sms=2", "sms=3", "sms=4", "geomean"]
    assert base[:3] == pytest.approx([1.0] * 3) and np.isnan(base[3]) and base[4] == pytest.approx(1.0)
    assert once[:2] == pytest.approx([0.0, 0.5]) and np.isnan(once[2]) and np.isnan(once[3])
    assert once[4] == pytest.approx(0.5)  # the geomean of the one ratio left, 0.5


def test_tlb_hit_rates_are_percentages_per_level_with_absent_levels_left_out() -> None:
    import numpy as np

    L1, L2, IO = "gpu0.l1tlb.hit_rate", "gpu0.l2tlb.hit_rate", "iommu.tlb.hit_rate"
    runs = [("gmmu", {L1: 0.5, L2: 0.25, IO: math.nan}), ("iommu", {L1: 0.75, L2: 0.5, IO: 0.9}), ("old", {L1: 0.1})]
    ax = plot.tlb_hit_rates(runs).axes[0]
    # A level any run has is drawn (the IOMMU's only in IOMMU mode); a run without it has no bar, not 0%.
    assert legend_texts(ax) == ["L1 TLB", "L2 TLB", "IOMMU TLB"] and tick_labels(ax) == ["gmmu", "iommu", "old"]
    l1, l2, io = bar_heights(ax)
    assert l1 == pytest.approx([50.0, 75.0, 10.0]) and l2[:2] == pytest.approx([25.0, 50.0]) and np.isnan(l2[2])
    assert np.isnan(io[0]) and io[1] == pytest.approx(90.0) and np.isnan(io[2])
    # A level no run has (NaN in a sweep's DataFrame) is left out.
    ax = plot.tlb_hit_rates([("a", {L1: 0.5, L2: 0.5, IO: math.nan})]).axes[0]
    assert legend_texts(ax) == ["L1 TLB", "L2 TLB"]
    with pytest.raises(plot.PlotDataError, match="no TLB hit rates"):
        plot.tlb_hit_rates([("a", {"time.total_ns": 1.0, IO: math.nan})])


def test_tlb_hit_rates_of_a_multi_gpu_run_are_over_all_its_gpus_as_its_headline() -> None:
    # GPU 0 hit 1 of 10 lookups, GPU 1 9 of 10: the system's L1 rate is 50%, as `uvmsim run` prints it (gpu*.*),
    # not GPU 0's 10% (found drawing a 4-GPU trace replay: 20% plotted against a 27.83% headline).
    m: dict[str, Any] = {"multi.gpus": 2, "iommu.tlb.hit_rate": 0.5}
    for g, (l1, l2) in enumerate([(1, 0), (9, 3)]):
        m |= {f"gpu{g}.l1tlb.hits": l1, f"gpu{g}.l1tlb.accesses": 10, f"gpu{g}.l1tlb.hit_rate": l1 / 10}
        m |= {f"gpu{g}.l2tlb.hits": l2, f"gpu{g}.l2tlb.accesses": 4, f"gpu{g}.l2tlb.hit_rate": l2 / 4}
    headline = dict(uvmsim.Result(metrics=m, config={}, tables={}, version="0").key_metrics())
    l1, l2, io = bar_heights(plot.tlb_hit_rates([("two", m)]).axes[0])
    assert headline["gpu*.l1tlb.hit_rate"] == pytest.approx(0.5) and headline["gpu*.l2tlb.hit_rate"] == 0.375
    assert l1 == pytest.approx([50.0]) and l2 == pytest.approx([37.5])
    assert io == pytest.approx([50.0])


def test_metric_vs_axis_sorts_x_means_a_points_runs_and_labels_each_line() -> None:
    X, P, A, B = "set.workload.regular.threads", "set.uvm.replay_policy", "set.l1.ways", "set.l2.ways"
    M = "gpu0.l1tlb.miss_latency_ns.mean"
    rows = []
    for policy, scale in (("batch", 1.0), ("once", 2.0)):
        for x, y in ((4096, 40.0), (1024, 10.0), (2048, 20.0)):  # not in x order
            rows.append({X: x, P: policy, A: 1, B: 2, M: scale * y})
    rows.append({X: 2048, P: "batch", A: 1, B: 2, M: 30.0})  # a second run at 2048: mean(20, 30) = 25
    rows.append({X: 8192, P: "batch", A: 1, B: 2, M: math.nan, "status": "failed"})
    ax = plot.metric_vs_axis(sweep_frame(rows), "workload.regular.threads").axes[0]
    batch, once = ax.lines
    assert list(batch.get_xdata()) == [1024, 2048, 4096] and list(batch.get_ydata()) == pytest.approx([10, 25, 40])
    assert list(once.get_xdata()) == [1024, 2048, 4096] and list(once.get_ydata()) == pytest.approx([20, 40, 80])
    # `ways` is the last part of two keys: those are named in full; `replay_policy` alone is short.
    assert legend_texts(ax) == ["replay_policy=batch, l1.ways=1, l2.ways=2", "replay_policy=once, l1.ways=1, l2.ways=2"]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("workload.regular.threads", M)


def test_batch_fit_values_by_hand() -> None:
    import pandas as pd

    mib = 2**20
    # 1 MiB batches of 90 and 110 µs, 2 MiB ones of 170 µs: least squares through the means (1, 100) and
    # (2, 170): slope 70 µs/MiB, intercept 30 µs. r² = Sxy² / (Sxx Syy) = 70² / (1 x 5100) = 0.961 (y - 135:
    # -45, -25, 35, 35). 1 MiB per 70 µs: 1,048,576 B / 70,000 ns = 14.98 GB/s.
    b = pd.DataFrame(
        {
            "batch": [0, 1, 2, 3],
            "start_ns": [0.0, 1e6, 2e6, 3e6],
            "bytes_h2d": [mib, 2 * mib, mib, 2 * mib],
            "bytes_d2h": [0, 0, 0, 0],
        }
    )
    b["end_ns"] = b["start_ns"] + [90e3, 170e3, 110e3, 170e3]
    ax = plot.batch_time_vs_bytes(b).axes[0]
    assert legend_texts(ax) == ["4 batches", "fit: 30.0 µs + 70.0 µs/MiB", "≈ 14.98 GB/s marginal, R² = 0.961"]
    assert ax.collections[0].get_offsets().tolist() == [[1, 90], [2, 170], [1, 110], [2, 170]]
    fit = ax.lines[0]  # from 0 MiB (the intercept) to the largest batch
    assert (fit.get_xdata()[0], fit.get_xdata()[-1]) == (0.0, 2.0)
    assert (fit.get_ydata()[0], fit.get_ydata()[-1]) == pytest.approx((30.0, 170.0))
    with pytest.raises(plot.PlotDataError, match="no batches table"):
        plot.batch_time_vs_bytes(b.iloc[:0])


def test_batch_stages_bars_up_to_the_limit_at_their_batch_numbers_and_areas_to_the_last_batch() -> None:
    import numpy as np
    import pandas as pd

    def table(n: int, first: int = 0) -> pd.DataFrame:
        return pd.DataFrame({"batch": np.arange(first, first + n), "start_ns": 0.0, "end_ns": 1e3, "fetch_ns": 1e3})

    # Bars for up to STAGE_BARS_MAX batches, each at its batch number (batches counted from 10 here).
    ax = plot.batch_stages(table(plot.STAGE_BARS_MAX, 10)).axes[0]
    (bars,) = ax.containers
    assert [r.get_x() + r.get_width() / 2 for r in bars][:2] == pytest.approx([10, 11])
    # One more: areas, whose steps span every batch, the last one too (batch n - 1 from n - 1.5 to n - 0.5).
    n = plot.STAGE_BARS_MAX + 1
    ax = plot.batch_stages(table(n)).axes[0]
    assert not ax.containers
    xs = ax.collections[0].get_paths()[0].vertices[:, 0]
    assert (xs.min(), xs.max()) == (-0.5, n - 0.5)
    with pytest.raises(plot.PlotDataError, match="no per-stage times"):
        plot.batch_stages(table(3).drop(columns=["fetch_ns"]))


def test_fault_scatter_orders_by_time_and_colours_by_batch() -> None:
    import pandas as pd

    faults = pd.DataFrame(
        {
            "time_ns": [30.0, 10.0, 20.0, 20.0],
            "page": [105, 100, 103, 101],
            "batch": [1, 0, 0, 1],
            "outcome": ["serviced", "serviced", "serviced", "flushed"],
        }
    )
    ax = plot.fault_scatter(faults).axes[0]
    # In time order (ties as written): pages 100, 103, 101 (flushed), 105; from the lowest: 0, 3, 1, 5.
    faulted, flushed = ax.collections
    assert faulted.get_offsets().tolist() == [[0, 0], [1, 3], [3, 5]] and flushed.get_offsets().tolist() == [[2, 1]]
    assert list(faulted.get_array()) == [0, 0, 1]  # the colours: each fault's batch
    assert ax.get_title() == "4 faults in 2 batches"
    with pytest.raises(plot.PlotDataError, match="no faults table"):
        plot.fault_scatter(faults.iloc[:0])


def test_link_utilization_per_direction_links_time_axis_and_latency() -> None:
    import pandas as pd

    # 12,000 bytes h2d from 1 to 2 µs and 6,000 d2h at the same time on 2 links of 12 GB/s (24,000 bytes per µs):
    # 50% and 25%; bins of 0.25 µs, centred 0.125 µs ... after the first copy.
    m = pd.DataFrame({"start_ns": 1000.0, "end_ns": 2000.0, "bytes": [12_000, 6_000], "direction": ["h2d", "d2h"]})
    ax = plot.link_utilization(m, 12.0, bins=4, links=2).axes[0]
    d2h, h2d = ax.lines
    assert (d2h.get_label(), h2d.get_label()) == ("d2h", "h2d")
    assert list(h2d.get_xdata()) == pytest.approx([0.125, 0.375, 0.625, 0.875])
    assert list(h2d.get_ydata()) == pytest.approx([50.0] * 4) and list(d2h.get_ydata()) == pytest.approx([25.0] * 4)
    assert ax.get_ylabel() == "utilisation of 2 links of 12 GB/s (%)"
    # A multi-GPU row spans a page move from its issue to its arrival: 12,000 bytes take 1 µs at 12 GB/s and
    # arrive 1 µs (the latency) before the row's end, 3 µs after its start: carried from 1 to 2 µs.
    m = pd.DataFrame({"start_ns": [0.0], "end_ns": [3000.0], "bytes": [12_000], "direction": ["h2d"]})
    (line,) = plot.link_utilization(m, 12.0, bins=3, latency_ns=1000.0).axes[0].lines
    assert list(line.get_ydata()) == pytest.approx([0.0, 100.0, 0.0])


def test_link_utilization_takes_each_directions_bandwidth() -> None:
    import pandas as pd

    # An asymmetric link (gh200-c2c: 450 GB/s h2d, 297 d2h): 12,000 bytes each way in 1 µs is 100% of 12 GB/s
    # h2d and 200% of 6 GB/s d2h, not 100% of the h2d rate; with 2 links, half of each.
    m = pd.DataFrame({"start_ns": 0.0, "end_ns": 1000.0, "bytes": [12_000, 12_000], "direction": ["h2d", "d2h"]})
    ax = plot.link_utilization(m, 12.0, bins=2, d2h_bandwidth_gbps=6.0).axes[0]
    d2h, h2d = ax.lines
    assert list(h2d.get_ydata()) == pytest.approx([100.0] * 2) and list(d2h.get_ydata()) == pytest.approx([200.0] * 2)
    assert ax.get_ylabel() == "utilisation of 12 GB/s h2d, 6 GB/s d2h (%)"
    ax = plot.link_utilization(m, 12.0, bins=2, links=2, d2h_bandwidth_gbps=6.0).axes[0]
    assert [list(line.get_ydata()) for line in ax.lines] == [pytest.approx([100.0] * 2), pytest.approx([50.0] * 2)]
    assert ax.get_ylabel() == "utilisation of 2 links of 12 GB/s h2d, 6 GB/s d2h (%)"
    # The d2h rate also sets how long a multi-GPU row's bytes take before its last one: 6,000 bytes at 6 GB/s
    # take 1 µs up to 1 µs (the latency) before the row's end.
    m = pd.DataFrame({"start_ns": [0.0], "end_ns": [3000.0], "bytes": [6_000], "direction": ["d2h"]})
    (line,) = plot.link_utilization(m, 12.0, bins=3, latency_ns=1000.0, d2h_bandwidth_gbps=6.0).axes[0].lines
    assert list(line.get_ydata()) == pytest.approx([0.0, 100.0, 0.0])


def test_link_utilization_of_a_run_with_an_asymmetric_link(tmp_path: Path) -> None:
    # Oversubscribed: evictions copy blocks back (d2h rows) over a link half as fast that way.
    sets = {**MANAGED, "uvm.oversubscription": 2.0, "link.bandwidth_gbps": 12.0, "link.d2h_bandwidth_gbps": 6.0}
    r = uvmsim.run(preset="titan-v", set=sets, out=tmp_path)
    mig = r.tables["migrations"]
    assert set(mig["direction"]) == {"h2d", "d2h"}
    ax = plot.KINDS["link-utilization"].draw(tmp_path, None, None).axes[0]
    expected = plot.link_utilization(mig, 12.0, d2h_bandwidth_gbps=6.0).axes[0]
    assert [line.get_label() for line in ax.lines] == ["d2h", "h2d"]
    for got, want in zip(ax.lines, expected.lines, strict=True):
        assert list(got.get_ydata()) == pytest.approx(list(want.get_ydata()))
    assert ax.get_ylabel() == "utilisation of 12 GB/s h2d, 6 GB/s d2h (%)"


def test_multi_gpu_link_utilization_of_a_run_takes_its_link_and_latency(multi_dir: Path) -> None:
    r = uvmsim.load(multi_dir)
    link = r.config["link"]
    assert r.config["multi"]["gpus"] == 4 and r.config["multi"]["host_uplink_shared"] is True
    ax = plot.KINDS["link-utilization"].draw(multi_dir, None, None).axes[0]
    expected = plot.link_utilization(r.tables["migrations"], link["bandwidth_gbps"], latency_ns=link["latency_ns"])
    assert list(ax.lines[0].get_ydata()) == pytest.approx(list(expected.axes[0].lines[0].get_ydata()))
    assert ax.get_ylabel() == f"utilisation of {link['bandwidth_gbps']:g} GB/s (%)"  # one shared uplink


def test_l2_miss_latency_stacks_terms_present_in_any_run() -> None:
    import numpy as np

    q, link = "multi.l2miss.gmmu_queue_ns", "multi.l2miss.link_ns"
    runs = [("a", {q: 10.0, link: 5.0}), ("b", {q: 20.0, link: math.nan}), ("c", {q: 1.0})]
    ax = plot.l2_miss_latency(runs).axes[0]
    assert legend_texts(ax) == ["gmmu queue", "link"] and tick_labels(ax) == ["a", "b", "c"]
    queue, wire = ax.containers
    assert [r.get_height() for r in queue] == [10.0, 20.0, 1.0] and [r.get_y() for r in queue] == [0.0] * 3
    # The link term on top of the queue's; a NaN or a missing term is 0 (not a gap in the stack).
    assert [r.get_height() for r in wire] == [5.0, 0.0, 0.0] and [r.get_y() for r in wire] == [10.0, 20.0, 1.0]
    assert not np.isnan([r.get_height() for r in wire]).any()


def test_directory_kinds_default_to_the_first_fitting_axis_and_their_metric(sweep_dir: Path, run_dir: Path) -> None:
    # runtime-bars: the first axis (a policy); latency-concurrency: the first numeric one.
    ax = plot.KINDS["runtime-bars"].draw(sweep_dir, None, None).axes[0]
    assert ax.get_legend().get_title().get_text() == "uvm.replay_policy"
    assert ax.get_ylabel().startswith("time.total_ns\n")
    ax = plot.KINDS["latency-concurrency"].draw(sweep_dir, None, None).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("workload.regular.threads", "gpu0.l1tlb.miss_latency_ns.mean")
    # A bool axis is not numeric.
    df = sweep_frame([{"set.workload.managed": b, "set.gpu.sms": n} for b, n in ((True, 4), (False, 8))])
    assert plot._first_axis(run_dir, df, numeric=True) == "gpu.sms"  # run_dir: no sweep.json, the columns' order
    # One run: labelled by its workload.
    ax = plot.KINDS["tlb-hit-rates"].draw(run_dir, None, None).axes[0]
    assert tick_labels(ax) == ["regular"]


def test_an_option_a_kind_does_not_read_and_a_line_through_categories_are_refused(
    sweep_dir: Path, run_dir: Path, tmp_path: Path
) -> None:
    # `--metric` on tlb-hit-rates, `--axis` on batch-stages: silently ignored before, now named.
    with pytest.raises(uvmsim.ConfigError, match="plot kind tlb-hit-rates takes no --metric; runtime-bars and"):
        plot.render("tlb-hit-rates", sweep_dir, tmp_path / "a.png", metric="uvm.batches")
    with pytest.raises(uvmsim.ConfigError, match="takes no --axis"):
        plot.render("batch-stages", run_dir, tmp_path / "b.png", axis="uvm.batch_size")
    # latency-concurrency draws a line against a number: a policy axis is refused (runtime-bars takes it).
    with pytest.raises(plot.PlotDataError, match="--axis uvm.replay_policy is not numeric .values batch, "):
        plot.render("latency-concurrency", sweep_dir, tmp_path / "c.png", axis="uvm.replay_policy")
    assert not any(tmp_path.iterdir())


def test_a_sweep_without_its_sweep_json_is_still_a_sweep(sweep_dir: Path, tmp_path: Path) -> None:
    import shutil

    d = tmp_path / "s"
    shutil.copytree(sweep_dir, d)
    (d / "sweep.json").unlink()
    check_file(plot.render("runtime-bars", d, tmp_path / "x.png", axis="uvm.replay_policy"), "png")


def test_tlb_hit_rates_of_a_sweep_leave_failed_runs_out(tmp_path: Path) -> None:
    sets = {"workload.kind": "regular", "workload.regular.threads": 1024}
    spec = uvmsim.sweep.parse_spec({"preset": "titan-v", "set": sets, "runs": [{}, {"sim.stall_events": 1}]}, "<t>")
    assert uvmsim.sweep.run_sweep(spec, tmp_path / "s", jobs=1).ok == 1
    ax = plot.KINDS["tlb-hit-rates"].draw(tmp_path / "s", None, None).axes[0]
    assert len(tick_labels(ax)) == 1


def test_why_a_table_is_empty_names_the_model_that_left_it_empty() -> None:
    from types import SimpleNamespace

    def why(config: dict[str, Any], name: str) -> str:
        return plot._why_empty(SimpleNamespace(config=config, metrics={}), name)  # type: ignore[arg-type]

    # One GPU through the multi-GPU model: its message, not the single-GPU driver's.
    one = {"multi": {"gpus": 1, "model_one_gpu": True}, "workload": {"managed": False}}
    assert "multi-GPU model (multi.gpus = 1)" in why(one, "batches")
    # apps_resident speaks of the applications of multi.apps: without them, no word of it.
    assert "apps_resident" not in why({"multi": {"gpus": 4, "apps_resident": True}}, "migrations")
    assert "apps_resident = true" in why({"multi": {"gpus": 4, "apps": ["x"], "apps_resident": True}}, "migrations")
    iommu = {"translation": {"mode": "iommu"}, "workload": {"managed": True}}
    assert "page-request path maps first touches in place" in why(iommu, "migrations")


def test_output_format_from_suffix_or_default(tmp_path: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = Path("d")
    assert plot.output_path("k", d, None, None) == (d / "k.png", "png")
    assert plot.output_path("k", d, Path("x.SVG"), None) == (Path("x.SVG"), "svg")
    assert plot.output_path("k", d, Path("x.out"), "svg") == (Path("x.out"), "svg")  # no format suffix: --format's
    with pytest.raises(uvmsim.ConfigError, match="unknown format `pdf`"):
        plot.render("tlb-hit-rates", run_dir, tmp_path / "x.pdf", "pdf")

    # An output that cannot be written is refused before anything is drawn.
    def boom(*args: Any) -> Any:
        raise AssertionError("drawn")

    monkeypatch.setitem(plot.KINDS, "tlb-hit-rates", plot.Kind("tlb-hit-rates", "run", "", boom))
    with pytest.raises(OSError):
        plot.render("tlb-hit-rates", run_dir, tmp_path)
