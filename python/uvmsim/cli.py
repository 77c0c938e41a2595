"""The ``uvmsim`` command line.

Every bad input ends as one line ``uvmsim: error: ...`` on stderr and exit
code 2 (a failed simulation, or an output that cannot be written: exit code
1), never a traceback: ``main`` maps the exceptions; the commands just raise.
Ctrl-C (SIGINT) and SIGTERM stop any command the same way: promptly (the binding
stops the Rust core within milliseconds), keeping every finished result, with one
line ``uvmsim: error: ... interrupted ...`` (naming the ``--resume`` command where
there is one) and exit code 128 + the signal's number: 130 or 143.
An input file that cannot be read is bad input: the readers raise
``InputError`` for it, so that ``main`` need not guess from an ``OSError``
whether it came from an input or an output.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import json
import os
import re
import shlex
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    import pandas as pd

import uvmsim
from uvmsim import ConfigError, InputError, SimulationError, presets
from uvmsim import bench as bench_mod
from uvmsim import reproduce as reproduce_mod
from uvmsim import sweep as sweep_mod
from uvmsim._files import (
    Inputs,
    atomic_write_json,
    check_output_dir,
    check_output_file,
    check_record_out,
    check_trace_name,
    inputs_of,
    read_input_text,
    refuse_input,
    refuse_input_in_dir,
)
from uvmsim._names import counted, nearest, plain_key
from uvmsim._signals import interrupted_by, signal_of, sigterm_as_interrupt

PROG = "uvmsim"
EXIT_SIM_FAILED = 1
EXIT_BAD_INPUT = 2
# Width of wrapped descriptions.
WRAP = 100

SET_OPTION = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one config value, e.g. --set gpu.l1tlb.entries=64 (repeatable; applied last).",
)


class PathArg(click.Path):
    """click's Path, refusing an empty string (exit code 2): `Path("")` is `.`, so `-o ''` used to write into the
    current directory and `trace info ''` to report `.` as the trace."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path (give a file or directory name)", param, ctx)
        return super().convert(value, param, ctx)


# A file or directory the command reads. click's own readability check is off: the reader that opens it reports
# a missing or unreadable input (InputError, exit code 2) naming what it is, the same message as the Python API.
INPUT_PATH = PathArg(readable=False, path_type=Path)
PRESET_OPTION = click.option(
    "--preset", "-p", metavar="NAME|FILE", help="System preset (see `uvmsim presets`) or a preset .toml file."
)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM (``signum``) stopped a command; the message says what is kept and how to go on (exit
    code 128 + ``signum``)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


@contextlib.contextmanager
def _resumable(what: str, command: str) -> Iterator[None]:
    """Turn Ctrl-C or SIGTERM in the block into ``Interrupted`` saying that ``command`` (with --resume) continues
    ``what``."""
    try:
        yield
    except KeyboardInterrupt as e:
        signum = signal_of(e)
        raise Interrupted(
            f"{what} {interrupted_by(signum)}; the runs that finished are kept: run `{command}` to continue it", signum
        ) from None


def _unknown(what: str, name: str, choices: Sequence[str]) -> NoReturn:
    near = nearest(name, choices)
    hint = f"did you mean `{near}`? " if near else ""
    raise click.UsageError(f"unknown {what} `{name}`; {hint}available: {', '.join(choices)}")


def _echo_rows(rows: Sequence[tuple[str, ...]], indent: str = "") -> None:
    if not rows:
        return
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)]
        click.echo((indent + "  ".join([*cells, r[-1]])).rstrip())


# The allocations table's columns the run summary prints, with their headings.
ALLOC_COLUMNS = (
    ("faults", "faults"),
    ("prefetched", "prefetched"),
    ("prefetch_used", "used"),
    ("pages_h2d", "pages in"),
    ("pages_evicted", "evicted"),
    ("host_fault_pages", "to host"),
)
ALLOC_ROWS_SHOWN = 8


def _echo_allocations(df: pd.DataFrame) -> None:
    """Which managed allocation the driver's work came from: the first rows of the allocations table."""
    if df.empty or int(df[[c for c, _ in ALLOC_COLUMNS]].to_numpy().sum()) == 0:
        return
    head = ["by allocation", *(h for _, h in ALLOC_COLUMNS)]
    body = [
        [f"{int(r['index'])} ({r['pages'] * 4096 / 2**20:,.1f} MiB)", *(f"{int(r[c]):,}" for c, _ in ALLOC_COLUMNS)]
        for _, r in df.head(ALLOC_ROWS_SHOWN).iterrows()
    ]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    for row in [head, *body]:
        cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        click.echo("  " + "  ".join(cells))
    if len(df) > ALLOC_ROWS_SHOWN:
        click.echo(f"  ... {len(df) - ALLOC_ROWS_SHOWN} more allocations in the allocations table")


def _value(v: Any) -> str:
    """A config value as it would be written in TOML."""
    try:
        return uvmsim.toml_value(v)
    except TypeError:
        return json.dumps(v)


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.version_option(uvmsim.__version__, prog_name=PROG)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """uvmsim: a fast simulator of GPU virtual memory (TLBs, page walks, IOMMU/ATS, demand paging)."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@cli.command()
@click.argument("config", required=False, type=INPUT_PATH)
@PRESET_OPTION
@click.option(
    "--trace",
    type=INPUT_PATH,
    metavar="FILE",
    help="Replay the trace FILE: a CSV (plain, gzip or zstd), a .uvmt (timed or warps) or an Accel-Sim kernelslist.g. "
    "Sets workload.kind and its path key by the format (docs/traces.md); an explicit --set still wins.",
)
@SET_OPTION
@click.option("-o", "--out", type=PathArg(path_type=Path), default=Path("uvmsim-out"), show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors (no progress, no summary).")
@click.option(
    "--timeline",
    type=PathArg(path_type=Path),  # a directory: an output that cannot be written (exit code 1), checked below
    metavar="FILE",
    help="Also write a Chrome/Perfetto trace-event timeline (kernels, UVM batches and their stages) to FILE; "
    "turns on uvm.records unless --set says otherwise.",
)
@click.option(
    "--timeline-max-batches",
    type=click.IntRange(min=1),
    default=20_000,
    show_default=True,
    metavar="N",
    help="Bound the timeline: beyond N batches keep every k-th.",
)
def run(
    config: Path | None,
    preset: str | None,
    trace: Path | None,
    sets: tuple[str, ...],
    out: Path,
    quiet: bool,
    timeline: Path | None,
    timeline_max_batches: int,
) -> None:
    """Simulate CONFIG (a TOML file, layered over --preset) or replay a --trace; write OUT/summary.json.

    The record tables the run keeps (uvm.records, ...) go to OUT/NAME.parquet.
    """
    overrides = list(sets)
    if timeline is not None:
        overrides.insert(0, "uvm.records=true")  # the batches table; an explicit --set still wins
    if not quiet and sys.stderr.isatty():
        # First, so that an explicit --set sim.progress_every_s=... still wins.
        overrides.insert(0, "sim.progress_every_s=2")
    if trace is not None:
        # Ahead of the user's --set (which still wins) and after CONFIG, whose workload it replaces.
        overrides[:0] = uvmsim.overrides(uvmsim.trace_workload(trace))
    if config is None and preset is None and trace is None:
        raise click.UsageError("give a CONFIG file, a --preset or a --trace (or several)")
    # Validate, then make OUT, before simulating: a bad config leaves no directory behind, and an
    # unwritable OUT fails in a millisecond rather than after a long run.
    cfg = uvmsim.resolve(config, preset=preset, set=overrides)
    _refuse_other_workloads_keys(sets, cfg)
    # No output may replace an input (the config, the preset's file, a trace): bad input, refused before any work.
    inputs = _inputs_of(config, preset, cfg, [trace] if trace is not None else [])
    _refuse_input_in_dir(out, inputs, lambda name: name == uvmsim.SUMMARY_FILE or name.endswith(".parquet"))
    if timeline is not None:
        _refuse_input(timeline, inputs, "'--timeline'")
        _check_timeline(timeline, out)
    check_output_dir(out)
    if timeline is not None:  # not after the run, when the results would be lost
        check_output_file(timeline, make_parents=True)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        result = uvmsim.run(config, preset=preset, set=overrides, out=out)
    except BaseException:
        # An input that fails only when opened (a missing trace) must not leave an empty OUT behind either.
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if still empty
        raise
    if timeline is not None:
        from uvmsim import timeline as timeline_mod

        timeline_mod.write(result, timeline, max_batches=timeline_max_batches)
    if quiet:
        return
    rows = [(name, uvmsim.format_metric(name, value)) for name, value in result.key_metrics()]
    _echo_rows(rows, indent="  ")
    if "allocations" in result.tables:
        _echo_allocations(result.tables["allocations"])
    tables = "".join(f", {out / uvmsim.table_file(name)}" for name in result.tables)
    click.echo(f"wrote {out / uvmsim.SUMMARY_FILE} ({len(result.metrics)} metrics){tables}")
    if timeline is not None:
        click.echo(f"wrote {timeline} (open it in https://ui.perfetto.dev)")


def _refuse_other_workloads_keys(sets: Sequence[str], cfg: Mapping[str, Any]) -> None:
    """A ``--set`` of another workload's parameter (``workload.<kind>.*`` of a kind the run does not run) would
    change nothing: each generator reads only its own section. Refused on this one run's command line, not by the
    resolver: sweeps, experiments and config files share one base of several workloads' parameters across runs of
    different kinds (a grid over ``workload.kind``), and each run reads its own."""
    # Each kind's section, from the parameters the core lists for it (`uvmsim workloads NAME`).
    sections = {p["key"].split(".")[1]: w["name"] for w in uvmsim.workloads() for p in w["params"]}
    multi = cfg["multi"]
    apps: list[str] = list(multi["apps"]) if multi["gpus"] > 1 or multi["model_one_gpu"] else []
    running = [cfg["workload"]["kind"], *apps]
    for item in sets:
        key = plain_key(item.split("=", 1)[0])
        parts = key.split(".")
        if len(parts) < 2 or parts[0] != "workload" or parts[1] not in sections:
            continue
        kind = sections[parts[1]]
        if kind in running:
            continue
        if apps:
            runs, fix = "multi.apps = [" + ", ".join(f'"{a}"' for a in apps) + "]", "add it to multi.apps"
        else:
            runs, fix = f'workload.kind = "{running[0]}"', f"add --set workload.kind={kind}"
        raise ConfigError(
            f"--set: key `{key}`: is a parameter of the `{kind}` workload, which this run does not run ({runs}): "
            f"each workload reads only its own workload.<kind> section; {fix} to run it, or leave the key out"
        )


@cli.command("presets")
@click.argument("name", required=False)
def presets_cmd(name: str | None) -> None:
    """List the system presets, or describe preset NAME."""
    if name is None:
        # A user's preset that hides a shipped one says so (UVMSIM_PRESET_PATH is searched first).
        _echo_rows(
            [
                (p.name, p.summary + (f" [{p.path}; hides {p.shadows[0]}]" if p.shadows else ""))
                for p in presets.list_presets()
            ]
        )
        return
    info = presets.describe(name)
    text = read_input_text(info.path, "preset file")
    body = text.split("\n")
    # The comment header is printed as prose; the settings follow it verbatim.
    start = next((i for i, line in enumerate(body) if line.strip() and not line.lstrip().startswith("#")), len(body))
    hides = "".join(f"; hides {p}" for p in info.shadows)
    click.echo(f"{info.name}  ({info.path}{hides})\n")
    click.echo(info.description)
    click.echo("\n" + "\n".join(body[start:]).rstrip())


@cli.command("workloads")
@click.argument("name", required=False)
def workloads_cmd(name: str | None) -> None:
    """List the workload generators, or describe workload NAME and its parameters."""
    all_w = uvmsim.workloads()
    if name is None:
        # Each name, then its whole description wrapped beside it (continuation lines indented).
        indent = " " * (max(len(w["name"]) for w in all_w) + 2)
        for w in all_w:
            head = w["name"].ljust(len(indent))
            text = textwrap.fill(
                w["description"],
                width=WRAP,
                initial_indent=head,
                subsequent_indent=indent,
                break_on_hyphens=False,
                break_long_words=False,
            )
            click.echo(text)
        return
    by_name = {w["name"]: w for w in all_w}
    if name not in by_name:
        _unknown("workload", name, list(by_name))
    w = by_name[name]
    click.echo(f"{w['name']}  (--set workload.kind={w['name']})\n")
    click.echo(textwrap.fill(w["description"], width=WRAP))
    click.echo("\nparameters:")
    _echo_rows([(p["key"], _value(p["default"]), p["doc"]) for p in w["params"]], indent="  ")


@cli.command("config")
@click.argument("config", required=False, type=INPUT_PATH)
@click.option("--resolved", is_flag=True, help="Print the resolved config of CONFIG/--preset/--set instead.")
@PRESET_OPTION
@SET_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--markdown", is_flag=True, help="Print the parameter reference as a Markdown document (docs/config.md).")
def config_cmd(
    config: Path | None, resolved: bool, preset: str | None, sets: tuple[str, ...], as_json: bool, markdown: bool
) -> None:
    """Print the parameter reference (key, default, doc), or with --resolved the config a run would use."""
    if markdown:
        if as_json or resolved or config is not None or preset is not None or sets:
            raise click.UsageError("--markdown prints the parameter reference only; it takes no other option")
        click.echo(config_markdown(uvmsim.config_reference(), uvmsim.config_sections()), nl=False)
        return
    if resolved or config is not None or preset is not None or sets:
        cfg = uvmsim.resolve(config, preset=preset, set=list(sets))
        if as_json:
            click.echo(json.dumps(cfg, indent=2))
        else:
            for key, value in uvmsim.flatten(cfg):
                click.echo(f"{key} = {_value(value)}")
        return
    ref = uvmsim.config_reference()
    if as_json:
        click.echo(json.dumps(ref, indent=2))
    else:
        _echo_rows([(p["key"], _value(p["default"]), p["doc"]) for p in ref])


CONFIG_MD_INTRO = """\
# Configuration reference

<!-- Generated by `uvmsim config --markdown`; do not edit by hand (tests/test_docs.py checks it). -->

Every parameter of a run, its default and what it means. The text comes from
the declarations in `crates/uvmsim/src/config/` (and the workload generators'
parameter sections), so this page cannot drift from the code.

- **Layering.** A run's configuration is the defaults below, then the preset
  (`--preset NAME`), then the user's TOML file, then each `--set key.path=value`
  in order; later layers win. `uvmsim config --resolved [CONFIG] [--preset NAME]
  [--set ...]` prints the configuration a run would use, and every
  `summary.json` records it under `"config"`. Either reruns the run as a
  preset file, `--preset FILE` (Python: `preset=path`, with
  `uvmsim.dict_to_toml(result.config)` written to it), with the same
  metrics; as the user's CONFIG it is refused in every mode (exit code 2),
  since it sets every key, those the mode does not read included ("Not read
  in ..." below: the other translation mode's hardware, and `[multi]` on one
  GPU or the single-GPU driver's keys on several; a preset may carry them).
- **Keys in a TOML file** may be written under their section (`[uvm]` then
  `batch_size = 64`), dotted (`uvm.batch_size = 64`) or quoted
  (`"uvm.batch_size" = 64`): all three are the same key, and one file giving
  a key twice, in any two forms, is an error. A `--set` key is read the same
  way (`--set '"uvm.batch_size"=64'` is `uvm.batch_size`).
- **Units are in the key names**: `_ns` nanoseconds, `_cycles` GPU core
  cycles, `_mhz` megahertz, `_gbps` GB/s (10^9 bytes per second), `_bytes`
  bytes, `_s` seconds. Give plain numbers: `latency_ns = 100`, not `"100ns"`.
- **Sizes** (`size_bytes`, `page_size`) take an integer number of bytes or a
  string with a binary unit: `"4KiB"`, `"2MiB"`, `"1GiB"` (B, KiB, MiB, GiB,
  TiB). Decimal units such as `"4KB"` are rejected as ambiguous; so are
  fractions (`"0.5GiB"`: give `"512MiB"`). A space before the unit and `_`
  between digits are accepted (`"4 KiB"`, `"4_096"`).
- **`--set` values are TOML values**: `--set gpu.sms=0x10` (TOML's hexadecimal,
  also `+16`, `1_000`) is 16; a string needs TOML quotes only where it could
  read as another type (`--set 'workload.kind="stream"'`, or plainly
  `workload.kind=stream`). TOML integers are signed 64-bit: larger values are
  out of range.
- **Unknown keys are errors**, naming the file or `--set` they came from and
  the nearest valid key; a misspelt choice (`workload.kind=regulr`) names the
  nearest one before the list of all. Out-of-range values are errors naming
  the key and the accepted range. All exit with code 2.
- **Keys a mode does not read** (marked "Not read in ..." below: the
  single-GPU driver's in the multi-GPU model, the multi-GPU model's on one
  GPU, one translation mode's hardware in the other) are errors too when the
  user's file, `--set` or Python's `set` gives them, saying why and what
  reads them; a preset may carry them (it describes its machine).
- **Another workload's parameters** (`workload.<kind>.*` of a kind the run
  does not run: each generator reads only its own section) are refused on the
  command line of `uvmsim run` and `uvmsim trace record` (`--set`). Config
  files, sweep and experiment bases and Python's `set` may carry several
  kinds' parameters, each run reading its own kind's.
"""


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_markdown(reference: Sequence[dict[str, Any]], section_docs: Sequence[dict[str, Any]] = ()) -> str:
    """The parameter reference as a Markdown document: an introduction, then one table per section."""
    about = {s["key"]: s["doc"] for s in section_docs}
    sections: dict[str, list[dict[str, Any]]] = {}
    for p in reference:
        section = p["key"].rpartition(".")[0]
        sections.setdefault(section, []).append(p)
    parts = [CONFIG_MD_INTRO]
    for section, params in sections.items():
        title = f"`[{section}]`" if section else "Top level"
        rows = [f"| `{p['key']}` | `{_md_cell(_value(p['default']))}` | {_md_cell(p['doc'])} |" for p in params]
        intro = f"{about[section]}\n\n" if section in about else ""
        parts.append(f"## {title}\n\n{intro}| Key | Default | Description |\n|---|---|---|\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)


@cli.command("reproduce")
@click.argument("experiment_id", metavar="ID", required=False)
@click.option("--list", "list_only", is_flag=True, help="List the experiments.")
@click.option("--all", "run_all", is_flag=True, help="Run every supported experiment and write OUT/report.html.")
@click.option(
    "-o",
    "--out",
    type=PathArg(path_type=Path),
    help="[default: uvmsim-out/ID, or with --all uvmsim-out/reproduce]",
)
@click.option("--quick", is_flag=True, help="Smaller runs (the spec's [quick] parameters): a smoke test.")
@click.option(
    "--resume",
    is_flag=True,
    help="Reuse the runs already in OUT whose stored configuration matches (an interrupted experiment goes on "
    "where it stopped). Do not use it across uvmsim versions.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Simulate an experiment's runs on this many processes first (the results are the same).",
)
@click.option(
    "--markdown",
    type=PathArg(dir_okay=False, readable=False, path_type=Path),
    metavar="FILE",
    help="Rewrite the summary table of FILE (docs/validation.md) between its markers: the row of ID, or with --all "
    "every row.",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one config value in every run of experiment ID (repeatable), e.g. --set gpu.l1tlb.mshrs=1 for a "
    "sensitivity run; the values the experiment varies itself stay varied, and runs whose mode does not read the key "
    "(an IOMMU preset among GMMU ones) go without it, with a note. Recorded in OUT/overrides.toml; not with --all "
    "or --markdown.",
)
def reproduce_cmd(
    experiment_id: str | None,
    list_only: bool,
    run_all: bool,
    out: Path | None,
    quick: bool,
    resume: bool,
    jobs: int,
    markdown: Path | None,
    sets: tuple[str, ...],
) -> int:
    """Re-run seed experiment ID and compare with the published numbers (OUT/comparison.csv, OUT/plot.png).

    With --all, run every experiment of the validation list (docs/validation.md) that uvmsim supports, each into
    OUT/ID as it finishes, and write OUT/report.html listing every experiment (unsupported ones with the reason).
    Exit code 1 if an experiment failed to run (it is recorded in the report and the others go on); checks outside
    their tolerance are results, not errors.
    """
    from uvmsim import report as report_mod  # matplotlib: only for this command

    if markdown is not None:
        if quick:
            raise click.UsageError("--markdown records the full experiments: drop --quick")
        if list_only or (experiment_id is None and not run_all):
            raise click.UsageError("--markdown records an experiment's result: give an ID or --all")
    if sets and (run_all or list_only or markdown is not None):
        raise click.UsageError(
            "--set runs one experiment with changed inputs: give an ID, and no --all, --list or --markdown (the "
            "summary table records the experiments as specified)"
        )
    if run_all:
        if experiment_id is not None or list_only:
            raise click.UsageError("--all runs every experiment: give no ID and no --list")
        if markdown is not None:
            report_mod.check_markdown_target(markdown)  # fail before the runs, not after
        outdir = out or Path("uvmsim-out") / "reproduce"
        check_output_dir(outdir)
        with _resumable("reproduce --all", _resume_command("--all", outdir, quick, jobs)):
            return _reproduce_all(outdir, quick, resume, jobs, markdown)
    if list_only or experiment_id is None:
        if experiment_id is not None:
            raise click.UsageError("give an experiment ID or --list, not both")
        _echo_rows([(s.id, s.title) for s in reproduce_mod.list_experiments()])
        return 0
    spec = reproduce_mod.load_spec(experiment_id)  # unknown IDs fail here, before any output
    if markdown is not None:
        report_mod.check_markdown_target(markdown)
    user_set = reproduce_mod.parse_sets(list(sets))
    if user_set:
        reproduce_mod.check_user_set(spec, user_set, quick)  # a bad key or value: exit code 2, before any output
    outdir = out if out is not None else Path("uvmsim-out") / spec.id
    check_output_dir(outdir)
    _refuse_another_experiments_dir(outdir, spec.id)
    with_set = f", with {' '.join(sets)}" if sets else ""
    click.echo(f"{spec.id}: {spec.title} (preset {spec.preset}{', quick' if quick else ''}{with_set})")
    planned, foreseen = reproduce_mod.expected_runs(spec, quick, user_set)
    # Keys the experiment varies itself: said before the runs (they may take minutes), from its plan.
    for key in sorted(foreseen):
        click.echo(f"note: {spec.id} sets {key} itself in some of its runs; --set {key} will not apply there", err=True)
    start = time.perf_counter()
    progress = _RunProgress(planned)
    with _resumable(f"reproduce {spec.id}", _resume_command(spec.id, outdir, quick, jobs, sets)):
        rows, ctx = reproduce_mod.reproduce_context(
            spec.id, outdir, quick=quick, resume=resume, jobs=jobs, set=user_set, on_run=progress
        )
    # With --resume, the reused runs' simulation time counts: --markdown records what the experiment takes.
    elapsed = time.perf_counter() - start + ctx.reused_s
    _echo_rows(
        [
            (
                r.status,
                r.metric,
                reproduce_mod.fmt_value(r.simulated),
                f"published {reproduce_mod.fmt_value(r.published)}",
                r.unit,
            )
            for r in rows
        ],
        indent="  ",
    )
    if user_set and not ctx.user_runs:
        click.echo(f"note: --set changed nothing: {spec.id} ran no simulation that takes config overrides", err=True)
    for key in sorted(ctx.shadowed - foreseen):
        click.echo(f"note: {spec.id} sets {key} itself in some of its runs; --set {key} did not apply there", err=True)
    for key, runs in sorted(ctx.left_out.items()):
        why = "; ".join(sorted(set(runs.values())))
        click.echo(
            f"note: --set {key} left out of {len(runs)} run(s) whose mode does not read it "
            f"({', '.join(sorted(runs))}): it {why}",
            err=True,
        )
    checked = [r for r in rows if r.passed is not None]
    plot = report_mod.write_plot(spec.id, rows, outdir)
    # The checked values as `--all` stores them (OUT/ID/result.json), so that `uvmsim diff` and `fingerprint`
    # compare this experiment's rows too, e.g. against a run of it with --set.
    outcome = report_mod.Outcome(spec.id, report_mod.status_of(rows), elapsed, quick, rows=list(rows), plot=plot.name)
    outcome.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    atomic_write_json(outdir / report_mod.RESULT_FILE, outcome.to_json())
    click.echo(
        f"{sum(bool(r.passed) for r in checked)}/{len(checked)} checks passed; "
        f"wrote {outdir / 'comparison.csv'}, {plot} and {outdir / report_mod.RESULT_FILE}"
    )
    if markdown is not None:
        previous = read_input_text(markdown, "markdown file")
        table = report_mod.markdown_table_of({spec.id: outcome}, {}, previous)
        report_mod.update_markdown(markdown, table)
        click.echo(f"updated the row of {spec.id} in {markdown}")
    return 0


def _refuse_another_experiments_dir(outdir: Path, experiment_id: str) -> None:
    """``ConfigError`` when ``outdir`` holds another experiment's results (its ``result.json``): its runs would stay
    beside this one's, and ``uvmsim diff`` and ``fingerprint`` would count them as this experiment's."""
    from uvmsim import report as report_mod

    try:
        stored = json.loads((outdir / report_mod.RESULT_FILE).read_text(encoding="utf-8")).get("id")
    except (OSError, ValueError, AttributeError):
        return  # none, or not one we can read: nothing to protect
    if isinstance(stored, str) and stored != experiment_id:
        raise ConfigError(
            f"`{outdir}` holds the results of experiment {stored}, not {experiment_id}: give another -o (or remove it)"
        )


class _RunProgress:
    """``reproduce ID``'s progress on stderr: a line per finished run, counted against the runs planned (an
    experiment that takes half an hour otherwise prints nothing until its table)."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.done = 0

    def __call__(self, name: str, wall_s: float | None) -> None:
        self.done += 1
        of = f"/{self.total}" if self.total is not None and self.done <= self.total else ""
        took = "stored, reused" if wall_s is None else f"{wall_s:.1f} s"
        click.echo(f"  run {self.done}{of}: {name} ({took})", err=True)


def _resume_command(target: str, out: Path, quick: bool, jobs: int, sets: Sequence[str] = ()) -> str:
    """The `uvmsim reproduce` command line that continues an interrupted ``target`` (an ID or --all)."""
    args = [PROG, "reproduce", target, "-o", str(out), *(["--quick"] if quick else []), "--resume"]
    return shlex.join([*args, *(["-j", str(jobs)] if jobs > 1 else []), *(a for s in sets for a in ("--set", s))])


def _reproduce_all(out: Path, quick: bool, resume: bool, jobs: int, markdown: Path | None) -> int:
    from uvmsim import report as report_mod

    def on_done(o: report_mod.Outcome) -> None:
        detail = f"{o.passed}/{len(o.checked)} checks" if o.rows else one_line(o.error)
        click.echo(f"  {o.status:5} {o.id}  {detail}  ({o.elapsed_s:.1f} s)")

    _, targets = report_mod.load_validation()
    unsupported = [t.id for t in targets if not t.supported]
    click.echo(
        f"reproducing {len(targets) - len(unsupported)} experiments{' (quick)' if quick else ''} into {out}; "
        f"{len(unsupported)} of the validation list are not yet supported"
    )
    outcomes = report_mod.reproduce_all(out, quick=quick, resume=resume, jobs=jobs, on_done=on_done)
    counts = report_mod.summary_counts(outcomes)
    elapsed = report_mod.load_run_meta(out).get("elapsed_s")
    click.echo(
        f"{counts['PASS']} pass, {counts['FAIL']} fail, {counts['INFO']} info only, {counts['ERROR']} error, "
        f"{len(unsupported)} not yet "
        f"supported in {elapsed} s; wrote {out / report_mod.REPORT_FILE}"
    )
    if markdown is not None:
        previous = read_input_text(markdown, "markdown file")
        report_mod.update_markdown(markdown, report_mod.markdown_table(out, previous))
        click.echo(f"updated the summary table of {markdown}")
    return EXIT_SIM_FAILED if counts["ERROR"] else 0


@cli.command("sweep")
@click.argument("spec_file", metavar="SPEC.toml", type=INPUT_PATH)
@click.option("-o", "--out", required=True, type=PathArg(path_type=Path), help="Sweep directory.")
@click.option("--resume", is_flag=True, help="Continue the sweep in OUT: skip its finished runs, redo failed ones.")
@click.option("--engine", type=click.Choice(sweep_mod.ENGINES), default="local", show_default=True)
@click.option(
    "--jobs", "-j", type=click.IntRange(min=1), help="Parallel runs: local workers, or CPUs of a local Ray instance."
)
@click.option("--address", metavar="ADDR", help="Ray cluster to join (--engine ray); default: start a local one.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary; failed runs are still listed.")
def sweep_cmd(
    spec_file: Path, out: Path, resume: bool, engine: str, jobs: int | None, address: str | None, quiet: bool
) -> int:
    """Run the grid or list of runs of SPEC.toml; store each run in OUT/runs/<id>.parquet as it finishes.

    Exit code 0 if every run succeeded, 1 if some failed (each is stored with its error), 2 for a bad spec.
    """
    if address is not None and engine != "ray":
        raise click.UsageError("--address is for --engine ray")
    spec = sweep_mod.load_spec(spec_file)
    inputs = [("the sweep spec", spec_file), *_inputs_of(spec.config, spec.preset, None)]
    _refuse_input_in_dir(out, inputs, lambda name: name == sweep_mod.SWEEP_FILE)
    check_output_dir(out)
    with contextlib.ExitStack() as stack:
        bar: Any = None

        def on_start(todo: int, skipped: int) -> None:
            nonlocal bar
            if quiet:
                return
            click.echo(
                f"{spec_file}: {counted(len(spec.runs), 'run')}, {skipped} already done, {todo} to run", err=True
            )
            if todo:
                bar = stack.enter_context(
                    click.progressbar(
                        length=todo, label=f"sweep ({engine})", show_eta=True, show_pos=True, file=sys.stderr
                    )
                )

        def on_result(row: dict[str, Any]) -> None:
            if bar is not None:
                bar.update(1)

        try:
            summary = sweep_mod.run_sweep(
                spec,
                out,
                resume=resume,
                engine=engine,
                jobs=jobs,
                address=address,
                on_start=on_start,
                on_result=on_result,
            )
        except sweep_mod.SweepInterrupted as e:
            stack.close()  # the progress bar's last line before the runs that failed
            _echo_failed(e.failed)  # stored before the signal: said now, not only by the --resume that reruns them
            raise
    _echo_failed(summary.failed)
    if not quiet:
        click.echo(
            f"{summary.ok} ok, {len(summary.failed)} failed, {summary.skipped} skipped (done before); "
            f"results in {out / sweep_mod.RUNS_DIR} (uvmsim.sweep.load_sweep)"
        )
    return EXIT_SIM_FAILED if summary.failed else 0


def _echo_failed(rows: Sequence[dict[str, Any]]) -> None:
    for row in rows:
        click.echo(f"failed {row['run_id']} ({sweep_mod.describe_overrides(row)}): {one_line(row['error'])}")


@cli.command("diff")
@click.argument("old", metavar="OLD", type=INPUT_PATH)
@click.argument("new", metavar="NEW", type=INPUT_PATH)
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Relative: a metric differs when |new - old| > TOLERANCE x max(|old|, |new|); 0 = any change.",
)
@click.option("--metric", "metrics", multiple=True, metavar="GLOB", help="Compare only these metrics (repeatable).")
@click.option(
    "--rows", type=click.IntRange(min=0), default=10, show_default=True, help="Metrics shown per run; 0: all."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def diff_cmd(old: Path, new: Path, tolerance: float, metrics: tuple[str, ...], rows: int, as_json: bool) -> int:
    """Compare the runs stored in OLD and NEW: which differ, in which metrics and settings.

    OLD and NEW are run, sweep or experiment directories, or directories holding such runs below them
    (reproduce --all's), or fingerprints of such (uvmsim fingerprint). Runs are paired by their path below OLD
    and NEW (a sweep's by run id); wall-clock metrics are not compared. Experiments' checked values are compared
    too. Exit code 0 if every run is on both sides with the same metrics and checked values, 1 if not (as diff),
    2 for bad input.
    """
    from uvmsim import diff as diff_mod

    if tolerance != tolerance:  # NaN passes FloatRange's bound
        raise click.BadParameter("must be a number >= 0, not nan", param_hint="'--tolerance'")
    try:
        report = diff_mod.compare(old, new, tolerance=tolerance, metrics=metrics)
    except diff_mod.MetricsOfFingerprintError as e:
        raise click.BadParameter(str(e), param_hint="'--metric'") from None
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2, ensure_ascii=False))
    else:
        for line in diff_mod.render(report, rows):
            click.echo(line)
    return 0 if report.same else EXIT_SIM_FAILED


@cli.command("fingerprint")
@click.argument("directory", metavar="DIR", type=INPUT_PATH)
@click.option(
    "-o",
    "--out",
    type=PathArg(dir_okay=False, path_type=Path),
    help="Write it to this file [default: print it].",
)
def fingerprint_cmd(directory: Path, out: Path | None) -> int:
    """Write a fingerprint of the runs and experiments stored in DIR, for uvmsim diff.

    A fingerprint holds a digest of each run's metrics (wall-clock ones left out; values to 9 significant
    digits) and each experiment's checked values: small enough to commit, it stands in for DIR on either side
    of uvmsim diff, which then says which runs and checked values moved, but not by how much.
    """
    from uvmsim import diff as diff_mod

    if out is not None:
        _refuse_input(out, diff_mod.input_files(directory), "'-o' / '--out'")  # e.g. DIR/summary.json: exit 2
        check_output_file(out)  # before reading DIR's runs
    doc = diff_mod.fingerprint_json(diff_mod.fingerprint(directory))
    if out is None:
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))  # the bytes -o writes
        return 0
    atomic_write_json(out, doc)
    runs, exps = counted(len(doc["runs"]), "run"), counted(len(doc["experiments"]), "experiment")
    click.echo(f"fingerprint of {runs} and {exps} written to {out}")
    return 0


@cli.command("plot")
@click.argument("kind", required=False)
@click.argument("directory", metavar="DIR", required=False, type=INPUT_PATH)
@click.option("--list", "list_only", is_flag=True, help="List the plot kinds and what each needs.")
@click.option("-o", "--out", type=PathArg(path_type=Path), help="[default: DIR/KIND.FORMAT]")
@click.option("--format", "fmt", type=click.Choice(["png", "svg"]), help="[default: from --out's suffix, else png]")
@click.option("--axis", metavar="KEY", help="The sweep axis to compare (runtime-bars) or plot against.")
@click.option("--metric", metavar="NAME", help="The metric to plot (runtime-bars, latency-concurrency).")
def plot_cmd(
    kind: str | None,
    directory: Path | None,
    list_only: bool,
    out: Path | None,
    fmt: str | None,
    axis: str | None,
    metric: str | None,
) -> None:
    """Draw plot KIND of the run or sweep in DIR (uvmsim plot --list shows the kinds)."""
    from uvmsim import plot as plot_mod  # matplotlib: only for this command

    if list_only or kind is None:
        if kind is not None:
            raise click.UsageError("give a plot KIND and DIR, or --list, not both")
        _echo_rows(
            [
                (k.name, k.source, k.description if k.needs == "" else f"{k.description}; needs {k.needs}")
                for k in plot_mod.KINDS.values()
            ]
        )
        return
    if kind not in plot_mod.KINDS:
        _unknown("plot kind", kind, list(plot_mod.KINDS))
    if directory is None:
        raise click.UsageError(f"give the run or sweep directory to plot: uvmsim plot {kind} DIR")
    path = plot_mod.render(kind, directory, out, fmt, axis=axis, metric=metric)
    click.echo(f"wrote {path}")


@cli.group("trace")
def trace_group() -> None:
    """Inspect, record and convert traces (formats: docs/traces.md).

    Replay one with `uvmsim run --trace FILE`: it sets workload.kind by the format, `trace` (timed CSV or
    .uvmt), `warp-trace` (a .uvmt of warp streams) or `accelsim` (an Accel-Sim kernelslist.g)."""


@trace_group.command("info")
@click.argument("file", type=INPUT_PATH)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def trace_info_cmd(file: Path, as_json: bool) -> None:
    """Accesses, warps, kernels, footprint, unique pages and page sizes of a trace FILE
    (CSV plain, gzip or zstd, .uvmt, or an Accel-Sim kernelslist.g)."""
    info = uvmsim.trace_info(file)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    rows = [("format", info["format"])]
    if info["source"]:
        rows.append(("source", textwrap.shorten(info["source"], width=100)))
    warps = info["format"] != "csv" and info["format"] != "uvmt-timed"
    if warps:
        rows += [
            ("kernels / warps", f"{info['kernels']:,} / {info['warps']:,}"),
            ("warp memory instructions", f"{info['mem_insts']:,}"),
            ("accesses (active lanes)", f"{info['accesses']:,}"),
            ("coalesced 64 B requests", f"{info['requests_64b']:,}"),
            ("reads / writes / prefetches (lanes)", f"{info['reads']:,} / {info['writes']:,} / {info['prefetches']:,}"),
        ]
    else:
        rows += [
            ("accesses", f"{info['accesses']:,}"),
            ("reads / writes / prefetches", f"{info['reads']:,} / {info['writes']:,} / {info['prefetches']:,}"),
            ("GPUs / CUs", f"{info['gpus']} / {info['cus']}"),
            ("wavefronts", f"{info['wavefronts']:,}"),
        ]
    rows += [
        ("unique 4 KiB pages", f"{info['unique_pages_4k']:,}"),
        ("unique 64 B lines", f"{info['unique_lines_64b']:,}"),
        ("footprint", f"{info['footprint_bytes'] / 2**20:.2f} MiB (4 KiB pages)"),
    ]
    if warps:
        pages = ", ".join(f"{_size(p)} pages: {b / 2**20:.2f} MiB" for p, b in info["page_sizes"])
        rows.append(("allocations", f"{pages or 'none'} ({info['managed_bytes'] / 2**20:.2f} MiB managed)"))
    else:
        rows.append(("time span", f"{info['first_ns']:,} - {info['last_ns']:,} ns"))
    rows.append(
        ("request sizes" if not warps else "bytes per lane", ", ".join(f"{b} B x {n:,}" for b, n in info["sizes"]))
    )
    click.echo(f"{file}")
    _echo_rows(rows, indent="  ")


def _size(b: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def _check_timeline(timeline: Path, out: Path) -> None:
    """Refuse (bad input, exit 2) a --timeline path that the run's own output takes: OUT or a directory above it
    (both made directories before the timeline is written), or a file the run writes into OUT."""
    t, o = timeline.resolve(), out.resolve()
    if t == o or t in o.parents:
        where = "is the run's output directory" if t == o else "is a directory above the run's output directory"
        raise click.BadParameter(
            f"`{timeline}` {where} (-o {out}); give a file, e.g. --timeline {out / 'timeline.json'}",
            param_hint="'--timeline'",
        )
    if t.parent == o and (t.name == uvmsim.SUMMARY_FILE or t.suffix == ".parquet"):
        raise click.BadParameter(f"`{timeline}` would replace the run's own {t.name}", param_hint="'--timeline'")


def _inputs_of(
    config: Path | None, preset: str | None, cfg: dict[str, Any] | None, traces: Sequence[Path] = ()
) -> list[tuple[str, Path]]:
    """The files a command reads, as ``(what, path)`` (``_files.inputs_of``, shared with the Python API)."""
    return inputs_of(config, preset, cfg, traces)


def _refuse_input(out: Path, inputs: Inputs, param_hint: str) -> None:
    """Refuse (bad input, exit code 2) an output file ``out`` that is one of the command's ``inputs``: writing it
    would destroy the input (as ``trace convert IN IN`` is refused)."""
    try:
        refuse_input(out, inputs)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint=param_hint) from None


def _refuse_input_in_dir(out: Path, inputs: Inputs, writes: Callable[[str], bool]) -> None:
    """Refuse (exit code 2) an output directory ``out`` that is one of ``inputs`` or holds one under a name the
    command writes there (``writes(name)``)."""
    try:
        refuse_input_in_dir(out, inputs, writes)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="'-o' / '--out'") from None


def _check_out_name(check: Callable[[], None]) -> None:
    """Run a check of a trace command's OUT name; its ``ConfigError`` is a bad OUT (exit code 2)."""
    try:
        check()
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="'OUT'") from None


def _check_record_out(out: Path, config: Path | None) -> None:
    """Refuse (exit code 2) an OUT of ``trace record`` that is a config file (by its .toml name or its content) or is
    named for CSV (record writes a binary .uvmt)."""
    example = f"uvmsim trace record {config or out} {Path(out.stem).with_suffix('.uvmt')}"
    _check_out_name(lambda: check_record_out(out, f"give the config first and then OUT: `{example}`"))


@trace_group.command("record")
@click.argument("files", nargs=-1, required=True, metavar="[CONFIG] OUT")
@PRESET_OPTION
@SET_OPTION
def trace_record_cmd(files: tuple[str, ...], preset: str | None, sets: tuple[str, ...]) -> None:
    """Write the warp instruction streams of the workload CONFIG/--preset/--set describe to the binary
    trace OUT (.uvmt), without simulating. `uvmsim run --trace OUT` replays it with the same metrics.

    OUT comes last: an OUT named .toml (or .csv) is refused, as is one of the command's inputs."""
    if len(files) > 2:
        raise click.UsageError("give at most a CONFIG file and OUT")
    if any(not f.strip() for f in files):
        raise click.UsageError("an empty path (give a file name)")
    config = Path(files[0]) if len(files) == 2 else None
    out = Path(files[-1])
    _refuse_input(out, _inputs_of(config, preset, None), "'OUT'")
    _check_record_out(out, config)
    if config is None and preset is None and not sets:
        raise click.UsageError("give a CONFIG file, a --preset or --set options describing the workload")
    cfg = uvmsim.resolve(config, preset=preset, set=list(sets))  # bad input first (exit 2), then the output (exit 1)
    _refuse_other_workloads_keys(sets, cfg)
    _refuse_input(out, _inputs_of(config, preset, cfg), "'OUT'")
    check_output_file(out)
    totals = uvmsim.trace_record(out, config, preset=preset, set=list(sets))
    click.echo(
        f"wrote {out}: {totals['warps']:,} warps, {totals['ops']:,} ops, {totals['mem_ops']:,} memory instructions, "
        f"{totals['lanes']:,} lane accesses, {out.stat().st_size / 2**20:.2f} MiB"
    )


@trace_group.command("convert")
@click.argument("src", metavar="IN", type=INPUT_PATH)
@click.argument("out", type=PathArg(path_type=Path))
@PRESET_OPTION
@SET_OPTION
def trace_convert_cmd(src: Path, out: Path, preset: str | None, sets: tuple[str, ...]) -> None:
    """Convert trace IN to OUT: CSV -> timed .uvmt, timed .uvmt -> CSV (gzip if OUT ends in .gz),
    Accel-Sim kernelslist.g -> warp .uvmt (allocated with --preset/--set's translation.page_size
    and workload.managed). The format follows IN: an OUT named for the other one (.uvmt, .csv) is refused."""
    writes = uvmsim._convert_writes(src)  # a missing or unreadable IN first (exit 2)
    _refuse_input(out, [("the input trace", src), *_inputs_of(None, preset, None, [src])], "'OUT'")
    if writes is not None:
        _check_out_name(lambda: check_trace_name(out, writes, f"`{src}` converts to {writes}"))
    check_output_file(out)
    r = uvmsim.trace_convert(src, out, preset=preset, set=list(sets))
    what = "warps" if r["to"] == "uvmt-warps" else "records"
    click.echo(f"wrote {out} ({r['from']} -> {r['to']}, {r['records']:,} {what})")


@cli.command("bench")
@click.option("--quick", is_flag=True, help="Smaller inputs (seconds, for smoke tests).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--repeat",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Runs of each workload; the median is reported (wall-clock time on a shared machine varies).",
)
@click.option("--only", "only", multiple=True, metavar="NAME", help="Only this workload (repeatable).")
def bench_cmd(quick: bool, as_json: bool, repeat: int, only: tuple[str, ...]) -> None:
    """Measure simulator throughput on fixed workloads."""
    names = [w.name for w in bench_mod.WORKLOADS]
    for name in only:
        if name not in names:
            _unknown("bench workload", name, names)
    rows = bench_mod.run_all(quick=quick, repeat=repeat, only=only)
    click.echo(json.dumps(bench_mod.as_dicts(rows), indent=2) if as_json else bench_mod.format_table(rows))


# Lines of a TOML parser's code frame ("  |", "1 | [gpu", "  |     ^"): useful on a terminal, noise in one line.
_CODE_FRAME = re.compile(r"^\s*\d*\s*\|")


def one_line(message: str) -> str:
    """An error message folded onto one line."""
    parts = [p.strip() for p in message.splitlines() if p.strip() and not _CODE_FRAME.match(p)]
    if not parts:
        return "unknown error"
    out = parts[0]
    for p in parts[1:]:
        out += (" " if out.endswith(":") else "; ") + p  # "waiting:" introduces what follows
    return out


# A value longer than this (a word without spaces: a --set value, a name, a path) is shown by its ends in an error
# message: the message stays one readable line whatever the user typed (a 5,000-character value was echoed whole).
_LONG_WORD = 200


def clip_long_words(message: str) -> str:
    """``message`` with each run of more than ``_LONG_WORD`` non-space characters cut to its first 100 and last 40,
    saying how many were left out."""

    def clip(m: re.Match[str]) -> str:
        w = m.group(0)
        return f"{w[:100]}…[{len(w) - 140:,} characters]…{w[-40:]}"

    return re.sub(rf"\S{{{_LONG_WORD + 1},}}", clip, message)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"{PROG}: error: {clip_long_words(one_line(message))}", err=True)
    sys.exit(code)


def _not_utf8(text: str) -> str:
    """The message for an argument, file name or value that is not UTF-8: Python keeps such bytes of the command
    line as lone surrogates, which the core (it takes UTF-8) cannot be given. Was an internal error (exit 1)."""
    try:
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no byte of the command line gives (from Python)
        shown = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return (
        f"`{shown}` is not UTF-8 text: uvmsim takes arguments, values and file names in UTF-8 "
        "(rename the file, or give the argument in UTF-8)"
    )


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of the ``uvmsim`` command: run the CLI, turn every error into one line and an exit code.

    SIGTERM is handled as Ctrl-C (``_signals``): a KeyboardInterrupt, exit code 143 instead of 130."""
    try:
        with sigterm_as_interrupt():
            rv = cli.main(args=list(argv) if argv is not None else None, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.Abort as e:  # click's form of Ctrl-C (KeyboardInterrupt, its __cause__) in a command
        signum = signal_of(e)
        _fail(interrupted_by(signum), 128 + signum)
    except Interrupted as e:
        _fail(str(e), 128 + e.signum)
    except sweep_mod.SweepInterrupted as e:
        _fail(f"sweep {e}; run it again with --resume to finish it", 128 + e.signum)
    except click.ClickException as e:
        _fail(e.format_message(), EXIT_BAD_INPUT)
    except (ConfigError, InputError) as e:
        _fail(str(e), EXIT_BAD_INPUT)
    except SimulationError as e:
        _fail(f"simulation failed: {e}", EXIT_SIM_FAILED)
    except OSError as e:  # not an input (those raise InputError): an output that cannot be written
        _fail(str(e), EXIT_SIM_FAILED)
    except KeyboardInterrupt as e:
        signum = signal_of(e)
        _fail(interrupted_by(signum), 128 + signum)
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # a bug (e.g. an experiment's analysis, or a panic of the core: pyo3's
        # PanicException is a BaseException): one line, not a traceback, unless asked for
        if isinstance(e, UnicodeEncodeError) and e.reason == "surrogates not allowed":
            _fail(_not_utf8(e.object), EXIT_BAD_INPUT)  # bad input, not a bug
        if os.environ.get("UVMSIM_TRACEBACK"):
            raise
        _fail(f"internal error: {type(e).__name__}: {e} (set UVMSIM_TRACEBACK=1 for the traceback)", EXIT_SIM_FAILED)
    sys.exit(rv if isinstance(rv, int) else 0)


def entry() -> NoReturn:
    """The ``uvmsim`` command and ``python -m uvmsim``: `main`, leaving without the interpreter's teardown once
    pyarrow is loaded (a run's tables, a sweep, a plot). pyarrow's thread pools can abort that teardown
    ("terminate called without an active exception", exit -6 instead of the command's code: apache/arrow#34314;
    seen in CI after `uvmsim plot` exited 2). The exit handlers still run (a sweep's Ray cluster shuts down)."""
    try:
        main()
    except SystemExit as e:
        if "pyarrow" not in sys.modules:
            raise
        code = e.code
    if not isinstance(code, int):  # sys.exit(message): Python prints it and exits 1
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(code)
