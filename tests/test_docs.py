"""The generated and hand-written references in docs/ agree with the code."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

import uvmsim
from conftest import Cli
from uvmsim.cli import cli
from uvmsim.reproduce import list_experiments

DOCS = Path(__file__).resolve().parent.parent / "docs"

# One small run per translation mode: together they produce every metric.
GMMU_RUN = {"preset": "r9nano", "set": ["workload.kind=stream", "workload.stream.elements=65536"]}
IOMMU_RUN = {"preset": "kaveri-apu", "set": ["workload.stride.accesses=200"]}

# A table row of docs/metrics.md: `| `name` | unit | meaning |`.
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")
_MODE = {
    "GMMU mode only": "gmmu",
    "IOMMU mode only": "iommu",
    "uvm.baselines only": "baselines",
    "multi-GPU only": "multi",
    "Least-TLB only": "least",
    "IDYLL only": "idyll",
    "Trans-FW only": "transfw",
    "multi-application only": "apps",
    "polled model only": "polled",
    "gpu.vmem.backpressure` only": "vmem",
}
# A small 4-GPU run (GMMU mode, host MMU): every GPU's metrics are documented under `gpu0`.
MULTI_RUN = {"preset": "li-4gpu-gmmu", "set": ["workload.kind=stream", "workload.stream.elements=65536", "gpu.sms=4"]}
# A small Least-TLB run (4 GPUs, shared IOMMU), for the `multi.least_tlb.*` metrics.
LEAST_RUN = {"preset": "li-4gpu-ats", "set": ["workload.kind=stencil2d", "gpu.sms=4", "multi.least_tlb.enabled=true"]}
# A small IDYLL run (4 GPUs, GMMU mode, directory and lazy invalidation), for the `multi.idyll.*` metrics.
IDYLL_RUN = {
    "preset": "li-4gpu-gmmu",
    "set": ["workload.kind=stencil2d", "gpu.sms=4", "multi.idyll.directory=true", "multi.idyll.lazy=true"],
}
# A small Trans-FW run (4 GPUs, GMMU mode, PRT and host forwarding), for the `multi.transfw.*` metrics.
TRANSFW_RUN = {
    "preset": "li-4gpu-gmmu",
    "set": ["workload.kind=stencil2d", "gpu.sms=4", "multi.transfw.prt=true", "multi.transfw.forwarding=true"],
}
# A small multi-application run (4 GPUs, shared IOMMU, Least-TLB with spilling), for `app{N}.*` and the spill metrics.
APPS_RUN = {
    "preset": "li-4gpu-ats",
    "set": [
        'multi.apps=["stencil2d", "stream", "stencil2d", "stream"]',
        "workload.stream.elements=65536",
        "gpu.sms=4",
        "multi.least_tlb.enabled=true",
        "multi.least_tlb.spill=true",
    ],
}
# A managed run with Zheng's polled far-fault handler, for the `uvm.polled.*` metrics.
POLLED_RUN = {
    "preset": "gtx480-zheng",
    "set": ["workload.kind=hotspot", "workload.hotspot.rows=64", "workload.hotspot.cols=64", "workload.managed=true"],
}
# A run with the L1 data cache's back-pressure on the L1 TLB, for the `gpu0.vmem.*` metrics.
VMEM_RUN = {
    "preset": "mgpusim-r9nano",
    "set": ["workload.kind=stream", "workload.stream.elements=65536", "gpu.vmem.backpressure=true"],
}
# A managed run with its legacy baselines (GMMU mode), for the `baseline.*` metrics.
BASELINES_RUN = {
    "preset": "r9nano",
    "set": ["workload.kind=stream", "workload.stream.elements=65536", "workload.managed=true", "uvm.baselines=true"],
}


def test_config_reference_is_the_generated_one(cli: Cli) -> None:
    p = cli("config", "--markdown")
    assert p.returncode == 0, p.stderr
    doc = (DOCS / "config.md").read_text(encoding="utf-8")
    assert doc == p.stdout, "docs/config.md is stale: regenerate it with `uvmsim config --markdown > docs/config.md`"


def test_config_markdown_covers_every_parameter(cli: Cli) -> None:
    text = cli("config", "--markdown").stdout
    for p in uvmsim.config_reference():
        assert f"| `{p['key']}` |" in text, p["key"]


def test_config_markdown_takes_no_other_option(cli: Cli) -> None:
    p = cli("config", "--markdown", "--json")
    assert p.returncode == 2
    assert "--markdown" in p.stderr


def documented_metrics() -> dict[str, str]:
    """Metric names (or `{N}` patterns) documented in docs/metrics.md -> the mode they belong to ("both" if any)."""
    out: dict[str, str] = {}
    mode = "both"
    for line in (DOCS / "metrics.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            mode = next((m for marker, m in _MODE.items() if marker in line), "both")
        elif m := _ROW.match(line):
            name = m.group(1)
            assert name not in out, f"docs/metrics.md lists `{name}` twice"
            out[name] = mode
    return out


def _matcher(name: str) -> re.Pattern[str]:
    return re.compile("".join("[0-9]+" if part == "{N}" else re.escape(part) for part in re.split(r"(\{N\})", name)))


@pytest.fixture(scope="module")
def produced() -> dict[str, set[str]]:
    multi_metrics = uvmsim.run(preset=MULTI_RUN["preset"], set=MULTI_RUN["set"]).metrics
    return {
        "gmmu": set(uvmsim.run(preset=GMMU_RUN["preset"], set=GMMU_RUN["set"]).metrics),
        "iommu": set(uvmsim.run(preset=IOMMU_RUN["preset"], set=IOMMU_RUN["set"]).metrics),
        "baselines": set(uvmsim.run(preset=BASELINES_RUN["preset"], set=BASELINES_RUN["set"]).metrics),
        "polled": set(uvmsim.run(preset=POLLED_RUN["preset"], set=POLLED_RUN["set"]).metrics),
        "vmem": set(uvmsim.run(preset=VMEM_RUN["preset"], set=VMEM_RUN["set"]).metrics),
        "multi": {re.sub(r"^gpu[0-9]+\.", "gpu0.", k) for k in multi_metrics},
        "least": {
            re.sub(r"^gpu[0-9]+\.", "gpu0.", k)
            for k in uvmsim.run(preset=LEAST_RUN["preset"], set=LEAST_RUN["set"]).metrics
        },
        "idyll": {
            re.sub(r"^gpu[0-9]+\.", "gpu0.", k)
            for k in uvmsim.run(preset=IDYLL_RUN["preset"], set=IDYLL_RUN["set"]).metrics
        },
        "transfw": {
            re.sub(r"^gpu[0-9]+\.", "gpu0.", k)
            for k in uvmsim.run(preset=TRANSFW_RUN["preset"], set=TRANSFW_RUN["set"]).metrics
        },
        "apps": {
            re.sub(r"^gpu[0-9]+\.", "gpu0.", k)
            for k in uvmsim.run(preset=APPS_RUN["preset"], set=APPS_RUN["set"]).metrics
        },
    }


def test_every_produced_metric_is_documented(produced: dict[str, set[str]]) -> None:
    docs = documented_metrics()
    matchers = [(_matcher(d), d) for d in docs]
    for mode, keys in produced.items():
        missing = sorted(k for k in keys if not any(m.fullmatch(k) for m, _ in matchers))
        assert not missing, f"{mode} run produces metrics missing from docs/metrics.md: {missing}"


def test_every_documented_metric_is_produced_in_its_mode(produced: dict[str, set[str]]) -> None:
    assert len(documented_metrics()) > 50
    for name, mode in documented_metrics().items():
        m = _matcher(name)
        if mode in ("baselines", "polled", "vmem", "multi", "least", "idyll", "transfw", "apps"):
            assert any(m.fullmatch(k) for k in produced[mode]), f"`{name}` is not produced by the {mode} run"
            continue
        where = {run for run in ("gmmu", "iommu") if any(m.fullmatch(k) for k in produced[run])}
        expect = {"gmmu", "iommu"} if mode == "both" else {mode}
        assert where == expect, (
            f"docs/metrics.md documents `{name}` for {sorted(expect)} runs, but it is produced by {sorted(where)} runs"
        )


def readme_commands(text: str) -> list[list[str]]:
    """The arguments of every `uvmsim ...` command in `text`'s ```sh blocks (continued lines joined, comments
    and `&&` split off); a usage line's optional `[--opt VALUE]` is taken with its brackets dropped."""
    cmds = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split(" #", 1)[0].split("&&"):
                if part.strip().startswith("uvmsim "):
                    cmds.append([a.strip("[]") for a in shlex.split(part)[1:]])
    return cmds


def parse_command(args: list[str]) -> tuple[str, click.Context]:
    """The (sub)command `args` name and its parsed context, as `uvmsim` would parse them (raises click's
    error for an unknown command or option, or a value an option's type refuses)."""
    cmd: click.Command = cli
    names: list[str] = []
    while isinstance(cmd, click.Group):
        name, *args = args
        sub = cmd.get_command(click.Context(cmd), name)
        if sub is None:
            raise click.UsageError(f"no command `uvmsim {' '.join([*names, name])}`")
        cmd, names = sub, [*names, name]
    return " ".join(names), cmd.make_context(" ".join(names), args)


def test_readme_commands_are_found_in_a_block() -> None:
    text = "x\n```sh\npip install . && uvmsim run --preset p \\\n    -o out   # note\nuvmsim bench [--quick]\n```\n"
    assert readme_commands(text) == [["run", "--preset", "p", "-o", "out"], ["bench", "--quick"]]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["runn"], "no command"),
        (["trace", "inf", "t.csv"], "no command"),
        (["run", "--sett", "a=1"], "No such option"),
        (["run", "--timeline-max-batches", "0"], "0"),
    ],
)
def test_a_command_uvmsim_would_refuse_does_not_parse(args: list[str], error: str) -> None:
    with pytest.raises(click.ClickException, match=error):
        parse_command(args)


def test_every_readme_command_runs_with_real_options_presets_experiments_and_keys() -> None:
    # README's commands are what a new user types first; a renamed option, preset, experiment or config key
    # must fail here rather than there. Each is parsed as `uvmsim` parses it, and its --preset/--set resolved
    # as a run would (the experiment's preset for `reproduce ID --set`); nothing is simulated.
    readme = (DOCS.parent / "README.md").read_text()
    cmds = readme_commands(readme)
    assert len(cmds) >= 30, cmds
    ids = {s.id: s for s in list_experiments()}
    presets = {i.name for i in uvmsim.list_presets()}
    for args in cmds:
        name, ctx = parse_command(args)
        p = ctx.params
        if p.get("preset") is not None:
            assert p["preset"] in presets, args
        if name == "reproduce" and p["experiment_id"] is not None:
            assert p["experiment_id"] in ids, args
            uvmsim.resolve(preset=ids[p["experiment_id"]].preset, set=list(p["sets"]))
        elif name in ("run", "config", "trace record"):
            uvmsim.resolve(preset=p["preset"], set=list(p["sets"]))
        elif name in ("presets", "workloads") and p.get("name"):
            assert p["name"] in (presets if name == "presets" else {w["name"] for w in uvmsim.workloads()}), args


def test_every_listing_of_the_driver_stages_names_them_all_in_order() -> None:
    # docs/experiments.md (batch-stages, the timeline) and timeline.py listed the stages without `push` (the
    # batches table's push_ns, drawn by both) after it was added.
    from uvmsim import timeline

    texts = {p: p.read_text(encoding="utf-8") for p in [*DOCS.glob("*.md"), Path(timeline.__file__)]}
    found = 0
    for path, text in texts.items():
        for m in re.finditer(r"fetch, block, fault, [a-z_, \n]*?replay", text):
            listed = [s.strip() for s in m.group(0).replace("\n", " ").split(",")]
            assert listed == list(timeline.STAGES), f"{path.name}: {m.group(0)!r}"
            found += 1
    assert found >= 3
