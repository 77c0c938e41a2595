"""``uvmsim reproduce --all``: the list of VALIDATION.md experiments, the report, and report.html in a real browser."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import Cli
from uvmsim import ConfigError, diff, report
from uvmsim import reproduce as rep

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # ignored by git
# A row of a VALIDATION.md table: `| apu-tlb-miss-latency (fit) | ...`.
_VALIDATION_ROW = re.compile(r"^\|\s*([a-z][a-z0-9-]+)(?:\s*\(fit\))?\s*\|")


def validation_md() -> Path | None:
    """shared/VALIDATION.md beside the checkout (or UVMSIM_VALIDATION_MD), if there is one."""
    env = os.environ.get("UVMSIM_VALIDATION_MD")
    if env:
        return Path(env)
    for parent in ROOT.parents:
        p = parent / "shared" / "VALIDATION.md"
        if p.is_file():
            return p
    return None


def test_validation_list_is_complete_and_consistent() -> None:
    groups, targets = report.load_validation()
    ids = [t.id for t in targets]
    assert len(ids) == len(set(ids))
    # Supported rows are exactly the registered experiments: adding one without listing it (or the reverse) fails.
    assert sorted(t.id for t in targets if t.supported) == sorted(rep.REGISTRY)
    assert all(t.reason for t in targets if not t.supported)
    assert {t.group for t in targets} == {g.id for g in groups}
    fits = {t.id for t in targets if t.fit}
    assert fits == {"apu-tlb-miss-latency", "apu-fault-latency", "allen-base-cost"}


def test_every_validation_md_row_is_listed() -> None:
    path = validation_md()
    if path is None:
        pytest.skip("shared/VALIDATION.md is not beside this checkout (set UVMSIM_VALIDATION_MD)")
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if (m := _VALIDATION_ROW.match(line)) and m.group(1) not in ("id",):
            rows.append(m.group(1))
    assert len(rows) >= 26, rows  # the tables of the four seeds
    _, targets = report.load_validation()
    listed = [t.id for t in targets]
    assert [i for i in listed if i in rows] == rows, "validation.toml must list VALIDATION.md's rows in its order"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('id = "x"\ngroup = "g"\nwhat = "w"\npublished = "p"\ntolerance = "t"\nstatus = "maybe"', "unknown status"),
        ('id = "x"\ngroup = "g"\nwhat = "w"\npublished = "p"\ntolerance = "t"\nstatus = "unsupported"', "reason"),
        ('id = "x"\ngroup = "g"\nwhat = "w"\npublished = "p"\ntolerance = "t"\nstatus = "supported"', "registered"),
        ('id = "x"\ngroup = "h"\nwhat = "w"\npublished = "p"\ntolerance = "t"\nstatus = "supported"', "unknown group"),
        ('id = "x"\ngroup = "g"\nwhat = "w"\npublished = "p"\ntolerance = "t"\nstatu = "supported"', "unknown key"),
    ],
)
def test_bad_validation_file_is_a_config_error(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "v.toml"
    p.write_text(f'[[groups]]\nid = "g"\ntitle = "G"\nsystem = "S"\n\n[[experiments]]\n{text}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        report.load_validation(p)


def row(published: float | str, simulated: float, tolerance: str) -> rep.Row:
    passed = rep.compare([rep.Check("m", published, "", tolerance, "")], {"m": simulated})[0].passed
    return rep.Row("m", published, simulated, "", tolerance, passed, "")


def test_reference_of_each_tolerance_kind() -> None:
    assert report.reference(row(582, 600.0, "10%")) == pytest.approx((582, 523.8, 640.2))
    assert report.reference(row(16, 16.0, "exact")) == (16, 16, 16)
    assert report.reference(row("400-600", 500.0, "400..600")) == (500, 400, 600)
    assert report.reference(row("x", 3.5, ">= 3")) == (3, 3, float("inf"))
    assert report.reference(row("x", 0.2, "< 0.05")) == (0.05, float("-inf"), 0.05)
    assert report.reference(row("grows", 5.0, "info")) is None
    ref = report.reference(row(166, 32.0, "info"))
    assert ref is not None and ref[0] == 166


def test_comparison_bars_draws_a_bar_pair_per_numeric_check() -> None:
    rows = [row(582, 600.0, "10%"), row("grows", 5.0, "info"), row("x", 0.2, "< 0.05")]
    fig = report.comparison_bars(rows)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["m", "m"]  # the textual info row is left out
    assert len(ax.patches) == 4  # published and simulated bars per plotted check
    with pytest.raises(ValueError, match="no check"):
        report.comparison_bars([row("grows", 5.0, "info")])


def test_markdown_row_of_an_info_only_experiment_says_nothing_was_checked() -> None:
    # modern-presets has no published number: its row must not read "pass (0 of 0 checks)".
    _, targets = report.load_validation()
    target = next(t for t in targets if t.id == "modern-presets")
    outcome = report.Outcome(
        "modern-presets", "PASS", 1.0, False, rows=[row("none", 3.3, "info")] * 3, finished="2026-11-23T00:00:00"
    )
    table = report.markdown_table_of({"modern-presets": outcome}, {})
    line = next(x for x in table.splitlines() if x.startswith("| `modern-presets`"))
    assert "3 informational values (below)" in line and "info only (3 values, none checked)" in line
    assert target.supported


def test_a_full_table_gives_the_experiments_durations_not_the_invocations_wall_time() -> None:
    # With --resume the invocation's wall time counts only the runs it simulated (280 s for 1.7 hours of runs).
    _, targets = report.load_validation()
    ids = [t.id for t in targets if t.supported]
    outcomes = {i: report.Outcome(i, "PASS", 60.0, False, rows=[row(1, 1.0, "exact")]) for i in ids}
    table = report.markdown_table_of(outcomes, {"elapsed_s": 5.0})
    assert f"durations add up to {len(ids)} min" in table
    del outcomes[ids[0]]
    assert "add up to" not in report.markdown_table_of(outcomes, {"elapsed_s": 5.0})
    # Updating one row keeps the total: the other rows' recorded durations count (here 2.5 min and 30 s).
    kept_row = next(line for line in table.splitlines() if line.startswith(f"| `{ids[0]}`"))
    previous = table.replace(kept_row, kept_row.replace("in 60 s", "in 2.5 min"))
    one = {ids[1]: report.Outcome(ids[1], "PASS", 30.0, False, rows=[row(1, 1.0, "exact")])}
    total_s = 150 + 30 + 60 * (len(ids) - 2)
    assert f"durations add up to {total_s / 60:.0f} min" in report.markdown_table_of(one, {}, previous)


def test_an_experiment_without_checks_is_info_not_pass() -> None:
    info = [row("none", 3.3, "info")] * 2
    assert report.status_of(info) == "INFO"
    assert report.status_of([*info, row(1, 1.0, "exact")]) == "PASS"
    assert report.status_of([*info, row(1, 2.0, "exact")]) == "FAIL"
    assert report.summary_counts([report.Outcome("modern-presets", "INFO", 1.0, False, rows=info)])["INFO"] == 1
    assert report._badge("INFO") == '<span class="badge INFO">info only</span>'


def test_a_failing_experiment_is_recorded_and_the_others_go_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: rep.Context) -> dict[str, float]:
        raise RuntimeError("analysis exploded")

    monkeypatch.setitem(rep.REGISTRY, "apu-tlb-miss-latency", broken)
    done = []
    outcomes = report.reproduce_all(
        tmp_path, quick=True, ids=["apu-tlb-miss-latency", "allen-vecadd-probe"], on_done=done.append
    )
    assert [(o.id, o.status) for o in outcomes] == [("apu-tlb-miss-latency", "ERROR"), ("allen-vecadd-probe", "PASS")]
    assert done == outcomes
    assert "RuntimeError: analysis exploded" in outcomes[0].error
    assert "analysis exploded" in (tmp_path / "apu-tlb-miss-latency" / report.ERROR_FILE).read_text()
    assert set(report.load_outcomes(tmp_path)) == {"apu-tlb-miss-latency", "allen-vecadd-probe"}
    page = (tmp_path / report.REPORT_FILE).read_text(encoding="utf-8")
    assert 'data-id="apu-tlb-miss-latency" data-status="ERROR"' in page
    assert "RuntimeError: analysis exploded" in page
    assert 'data-id="allen-vecadd-probe" data-status="PASS"' in page
    assert 'data-id="apu-divergence" data-status="NOTRUN"' in page  # supported, not in this run


def test_an_interrupted_run_keeps_what_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(ctx: rep.Context) -> dict[str, float]:
        raise KeyboardInterrupt

    monkeypatch.setitem(rep.REGISTRY, "allen-vecadd-probe", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report.reproduce_all(tmp_path, quick=True, ids=["apu-tlb-miss-latency", "allen-vecadd-probe"])
    assert (tmp_path / "apu-tlb-miss-latency" / "comparison.csv").is_file()
    assert set(report.load_outcomes(tmp_path)) == {"apu-tlb-miss-latency"}
    page = (tmp_path / report.REPORT_FILE).read_text(encoding="utf-8")
    assert 'data-id="apu-tlb-miss-latency" data-status="PASS"' in page
    assert 'data-id="allen-vecadd-probe" data-status="NOTRUN"' in page


def test_a_rerun_does_not_show_stale_results(tmp_path: Path) -> None:
    report.reproduce_all(tmp_path, quick=True, ids=["apu-tlb-miss-latency"])
    stale = tmp_path / "allen-vecadd-probe" / report.RESULT_FILE
    stale.parent.mkdir()
    stale.write_text((tmp_path / "apu-tlb-miss-latency" / report.RESULT_FILE).read_text().replace("apu-tlb", "x"))
    report.reproduce_all(tmp_path, quick=True, ids=["allen-vecadd-probe"])
    assert report.load_outcomes(tmp_path)["allen-vecadd-probe"].rows[0].metric == "first_batch_faults"


def test_update_markdown_replaces_only_the_marked_table(tmp_path: Path) -> None:
    doc = tmp_path / "v.md"
    doc.write_text(f"# V\n\nintro\n\n{report.MD_BEGIN} -->\nold\n{report.MD_END}\n\n## analysis\nkept\n")
    report.reproduce_all(tmp_path / "r", quick=True, ids=["apu-tlb-miss-latency"])
    report.update_markdown(doc, report.markdown_table(tmp_path / "r"))
    text = doc.read_text()
    assert text.startswith("# V\n\nintro\n\n<!-- BEGIN") and text.endswith("## analysis\nkept\n")
    assert "old" not in text
    _, targets = report.load_validation()
    for t in targets:
        assert f"| `{t.id}`" in text
    assert "| `apu-tlb-miss-latency` (fit) |" in text and "pass (1 of 1 checks)" in text
    assert "| `apu-divergence` |" in text and "| not run |" in text
    with pytest.raises(ConfigError, match="markers"):
        report.check_markdown_target(tmp_path / "r" / report.REPORT_FILE)


def test_markdown_keeps_the_rows_of_experiments_not_rerun(tmp_path: Path) -> None:
    report.reproduce_all(tmp_path / "a", quick=True, ids=["apu-tlb-miss-latency", "apu-fault-cpu-freq"])
    first = report.markdown_table(tmp_path / "a")
    assert first.count("; ran ") == 2 and "Rows with no date" not in first
    old = {line[3 : line.index("`", 3)]: line for line in first.splitlines() if line.startswith("| `")}
    doctored = first.replace(old["apu-fault-cpu-freq"], old["apu-fault-cpu-freq"].replace("; ran ", "; RAN "))
    report.reproduce_all(tmp_path / "b", quick=True, ids=["apu-tlb-miss-latency"])
    second = report.markdown_table(tmp_path / "b", doctored)
    rows = {line[3 : line.index("`", 3)]: line for line in second.splitlines() if line.startswith("| `")}
    # the re-run experiment's row is new, the other run one is kept verbatim, the rest stay "not run"
    assert rows["apu-tlb-miss-latency"].partition("; ran ")[0] == old["apu-tlb-miss-latency"].partition("; ran ")[0]
    assert "; RAN " in rows["apu-fault-cpu-freq"] and "Rows with no date" in second
    assert rows["apu-divergence"].endswith("| not run |")
    assert set(rows) == {t.id for t in report.load_validation()[1]}


def test_reproduce_one_id_updates_only_its_row(cli: Cli, tmp_path: Path) -> None:
    doc = tmp_path / "v.md"
    doc.write_text(f"# V\n\n{report.MD_BEGIN} -->\n| `apu-fault-cpu-freq` | kept |\n{report.MD_END}\ntail\n")
    p = cli("reproduce", "apu-tlb-miss-latency", "-o", str(tmp_path / "r"), "--markdown", str(doc))
    assert p.returncode == 0, p.stderr
    text = doc.read_text()
    assert "| `apu-fault-cpu-freq` | kept |" in text and text.endswith("tail\n")
    assert re.search(
        r"\| `apu-tlb-miss-latency` \(fit\) \|.*\| pass \(1 of 1 checks\); ran \d{4}-\d\d-\d\d in \d+ s \|", text
    )


def test_docs_validation_table_lists_every_experiment() -> None:
    text = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    table = text[text.index(report.MD_BEGIN) : text.index(report.MD_END)]
    _, targets = report.load_validation()
    for t in targets:
        assert f"| `{t.id}`{' (fit)' if t.fit else ''} |" in table, f"regenerate docs/validation.md: {t.id} missing"
    # Unsupported rows say so (modern-presets was the last one; none is left).
    assert ("not yet supported" in table) == any(not t.supported for t in targets)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reproduce", "--all", "apu-divergence"], "give no ID"),
        (["reproduce", "--markdown", "x.md"], "give an ID or --all"),
        (["reproduce", "apu-divergence", "--quick", "--markdown", "x.md"], "drop --quick"),
        (["reproduce", "apu-divergence", "-o", "r", "--markdown", "nomarkers.md"], "no summary markers"),
        (["reproduce", "--all", "--quick", "--markdown", "x.md"], "drop --quick"),
        (["reproduce", "--all", "-o", "r", "--markdown", "nomarkers.md"], "no summary markers"),
    ],
)
def test_reproduce_all_bad_options_exit_2(cli: Cli, tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "nomarkers.md").write_text("# nothing to replace\n")
    p = cli(*args)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr
    assert not (tmp_path / "r").exists()  # refused before running anything


# --- made-up results: the report's counts, text and escaping, without running an experiment ------------------

# Three experiments without a plot of their own (comparison_bars draws theirs), in validation.toml's order.
A, B, C = "apu-tlb-miss-latency", "apu-divergence", "apu-fault-latency"


def fake_experiments(monkeypatch: pytest.MonkeyPatch, results: dict[str, list[rep.Row] | BaseException]) -> list[str]:
    """Stand in for the experiments' analyses: each ID gives its rows (or raises) at once, with 100 s of reused
    runs; returns the IDs in the order they were run."""
    ran: list[str] = []

    def reproduce_context(id: str, out: Path, **kwargs: object) -> tuple[list[rep.Row], SimpleNamespace]:
        ran.append(id)
        result = results[id]
        if isinstance(result, BaseException):
            raise result
        return list(result), SimpleNamespace(reused_s=100.0)

    monkeypatch.setattr(rep, "reproduce_context", reproduce_context)
    return ran


def write_outcomes(out: Path, *outcomes: report.Outcome, meta: dict[str, object] | None = None) -> None:
    for o in outcomes:
        (out / o.id).mkdir(parents=True, exist_ok=True)
        (out / o.id / report.RESULT_FILE).write_text(json.dumps(o.to_json()), encoding="utf-8")
    if meta is not None:
        (out / report.RUN_FILE).write_text(json.dumps(meta), encoding="utf-8")


def summary_cell(page: str, id: str) -> str:
    """The Result cell of ``id``'s summary row."""
    m = re.search(rf'<tr data-id="{id}">.*<td>(<span class="badge [A-Z]+">.*?)</td></tr>', page)
    assert m is not None, id
    return m.group(1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('id = "x"\ngroup = "g"\nwhat = "w"\npublished = "p"\ntolerance = "t"', "missing key `status`"),
        (
            'id = "x"\ngroup = "g"\nwhat = "w"\npublished = "p"\ntolerance = "t"\nstatus = "unsupported"\nreason = "r"'
            '\n\n[[experiments]]\nid = "x"\ngroup = "g"\nwhat = "v"\npublished = "p"\ntolerance = "t"\n'
            'status = "unsupported"\nreason = "r"',
            "listed twice",
        ),
    ],
)
def test_validation_file_missing_key_or_repeated_id(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "v.toml"
    p.write_text(f'[[groups]]\nid = "g"\ntitle = "G"\nsystem = "S"\n\n[[experiments]]\n{text}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        report.load_validation(p)


def test_checks_count_passed_and_failed_rows_not_info_ones(tmp_path: Path) -> None:
    # One pass, one fail, one info: "1 of 2 checks", in the page's summary and in the markdown table.
    rows = [row(582, 600.0, "10%"), row(16, 17.0, "exact"), row("grows", 5.0, "info")]
    o = report.Outcome(A, report.status_of(rows), 3.0, False, rows=rows, finished="2026-01-02T03:04:05+00:00")
    assert (o.status, len(o.checked), o.passed) == ("FAIL", 2, 1)
    write_outcomes(tmp_path, o)
    assert summary_cell(report.render_report(tmp_path), A) == '<span class="badge FAIL">FAIL</span> 1 of 2 checks'
    line = next(x for x in report.markdown_table_of({A: o}, {}).splitlines() if x.startswith(f"| `{A}`"))
    assert line.endswith("| fail (1 of 2 checks); ran 2026-01-02 in 3 s |"), line


def test_result_json_is_strict_json_and_reads_back_nan_and_infinity() -> None:
    rows = [row(1, math.nan, "exact"), row(1, math.inf, "info"), row(1, -math.inf, "info")]
    o = report.Outcome(A, "FAIL", 1.0, True, rows=rows)
    text = json.dumps(o.to_json(), allow_nan=False)  # JSON has no NaN or Infinity: other readers refuse them
    back = report.Outcome.from_json(json.loads(text))
    assert math.isnan(back.rows[0].simulated) and [r.simulated for r in back.rows[1:]] == [math.inf, -math.inf]


def test_an_experiment_run_counts_reused_time_and_records_a_failed_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_experiments(monkeypatch, {A: [row(582, 600.0, "10%")], B: ValueError("x < y & z")})

    def no_plot(id: str, rows: object, out: Path) -> Path:
        raise RuntimeError("no ink <here>")

    monkeypatch.setattr(report, "write_plot", no_plot)
    a, b = report.reproduce_all(tmp_path, ids=[A, B])
    # A resumed experiment takes its reused runs' 100 s too (the fake ran in well under 60 s).
    assert 100 <= a.elapsed_s < 160
    assert (a.status, a.plot, a.plot_error) == ("PASS", "", "RuntimeError: no ink <here>")
    # An experiment that raised has no rows: no plot is attempted, so there is no plot error to show.
    assert (b.status, b.error, b.plot_error) == ("ERROR", "ValueError: x < y & z", "")
    page = (tmp_path / report.REPORT_FILE).read_text(encoding="utf-8")
    assert '<pre class="error">plot failed: RuntimeError: no ink &lt;here&gt;</pre>' in page
    assert '<pre class="error">ValueError: x &lt; y &amp; z</pre>' in page and page.count("plot failed") == 1
    assert summary_cell(page, B) == '<span class="badge ERROR">ERROR</span> '  # no "0 of 0 checks"


def test_reproduce_all_runs_in_validation_order_and_refuses_unknown_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = fake_experiments(monkeypatch, {i: [row(1, 1.0, "exact")] for i in (A, B, C)})
    monkeypatch.setattr(report, "write_plot", lambda id, rows, out: out / report.PLOT_FILE)
    outcomes = report.reproduce_all(tmp_path, quick=True, ids=[C, A])
    assert ran == [A, C] and [o.id for o in outcomes] == [A, C]
    meta = report.load_run_meta(tmp_path)
    assert meta["quick"] is True and meta["experiments"] == [A, C] and isinstance(meta["elapsed_s"], float)
    with pytest.raises(ConfigError, match="not a supported experiment: `apu-nope`"):
        report.reproduce_all(tmp_path, ids=[A, "apu-nope"])
    assert ran == [A, C]  # refused before running anything


def test_an_interrupted_rerun_does_not_keep_the_previous_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The previous run's result of the experiment being re-run is removed first: stopped before it finishes,
    # it is "not run", not the old PASS.
    write_outcomes(tmp_path, report.Outcome(A, "PASS", 1.0, False, rows=[row(1, 1.0, "exact")]))
    fake_experiments(monkeypatch, {A: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        report.reproduce_all(tmp_path, ids=[A])
    assert report.load_outcomes(tmp_path) == {}
    assert f'data-id="{A}" data-status="NOTRUN"' in (tmp_path / report.REPORT_FILE).read_text(encoding="utf-8")


def test_report_page_counts_escapes_and_sections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    groups = [report.Group("g1", "First & seed", "GPU <one>"), report.Group("g2", "Second", "GPU two")]
    targets = [
        report.Target(A, "g1", "latency < 1 us & more", "<582>", "< 10% & so", "supported", fit=True),
        report.Target(B, "g2", "b", "1", "exact", "supported"),
        report.Target(C, "g1", "c", "1", "exact", "supported"),
        report.Target("made-up", "g2", "m", "2", "exact", "unsupported", reason="needs <traces> & a GPU"),
    ]
    monkeypatch.setattr(report, "load_validation", lambda: (groups, targets))
    rows = [
        rep.Row("lat<ns>", 582, 600.0, "ns & more", "10%", True, "Fig. 2 <b>"),
        rep.Row("m2", "x", 0.2, "", "< 0.05", False, "src"),
    ]
    write_outcomes(
        tmp_path,
        report.Outcome(A, "FAIL", 12.34, True, rows=rows),
        report.Outcome(B, "ERROR", 1.0, False, error="boom"),
        report.Outcome(C, "FAIL", 2.0, False, rows=[row(1, 2.0, "exact")]),
        report.Outcome("made-up", "PASS", 1.0, False, rows=[row(1, 1.0, "exact")]),  # a stray result: not shown
        meta={"quick": False, "started": "S", "elapsed_s": 125.4, "cpus": 7, "version": "9.9"},
    )
    page = report.render_report(tmp_path)
    # Each count its own (2 fail, 1 error, 0 not run, 1 not yet supported); the run's CPUs, not this machine's.
    assert (
        '<p class="meta">uvmsim 9.9; full parameters; started S; all experiments in 125 s on 7 CPUs. '
        "Every experiment of <code>shared/VALIDATION.md</code>: 0 pass, 2 fail, 0 info only, 1 error, 0 not run, "
        "1 not yet supported.</p>"
    ) in page
    (tmp_path / report.RUN_FILE).write_text('{"quick": true, "version": "9.9"}', encoding="utf-8")
    assert '<p class="meta">uvmsim 9.9; quick parameters; started ?. ' in report.render_report(tmp_path)
    # The summary row and the section escape what the validation list says.
    assert (
        f'<tr data-id="{A}"><td><a href="#{A}"><code>{A}</code></a> (fit)</td><td>latency &lt; 1 us &amp; more</td>'
        '<td>&lt;582&gt;</td><td>&lt; 10% &amp; so</td><td><span class="badge FAIL">FAIL</span> 1 of 2 checks</td></tr>'
    ) in page
    assert page.count("latency &lt; 1 us &amp; more") == 2 and page.count("&lt; 10% &amp; so") == 2
    assert f"<h3><code>{A}</code> (fit) — " in page
    assert "<dt>Run</dt><dd>12.3 s, quick parameters</dd>" in page and "<dt>Run</dt><dd>1.0 s</dd>" in page
    # Each row's own result (the experiment FAILs, its first row passed), values in their columns, escaped.
    assert (
        '<tr><td><code>lat&lt;ns&gt;</code></td><td class="num">582</td><td class="num">600</td><td>ns &amp; more</td>'
        '<td>10%</td><td><span class="badge PASS">PASS</span></td><td>Fig. 2 &lt;b&gt;</td></tr>'
    ) in page
    assert '<td class="num">x</td><td class="num">0.2</td><td></td><td>&lt; 0.05</td>' in page
    assert 'data-id="made-up" data-status="UNSUPPORTED"' in page
    assert '<dd class="reason">not yet supported: needs &lt;traces&gt; &amp; a GPU</dd>' in page
    # Sections under their group's heading, in the list's order; the group's system below its title.
    sections = re.findall(r'<h2 id="group-(\w+)">|<section class="experiment" id="([\w-]+)"', page)
    assert [g or s for g, s in sections] == ["g1", A, C, "g2", B, "made-up"]
    assert '<h2 id="group-g1">First &amp; seed</h2><p class="system">GPU &lt;one&gt;</p>' in page


def test_markdown_rows_of_errors_and_many_checks_and_their_durations() -> None:
    _, targets = report.load_validation()
    ids = [t.id for t in targets]
    four = [row(i, float(i), "exact") for i in range(1, 5)]
    outcomes = {
        A: report.Outcome(A, "ERROR", 89.0, False, error="RuntimeError: a | b", finished="2026-01-02T00:00:00"),
        B: report.Outcome(B, "PASS", 90.0, False, rows=four, finished="2026-01-02T00:00:00"),
        C: report.Outcome(C, "PASS", 150.0, False, rows=[*four, row(5, 5.0, "exact")], finished="2026-01-02"),
    }
    lines = {
        x[3 : x.index("`", 3)]: x
        for x in report.markdown_table_of(outcomes, {"cpus": 7}).splitlines()
        if x[:3] == "| `"
    }
    # A `|` in an error would end the cell; 89 s is written in seconds, 90 s and more in minutes (to 0.1).
    assert "| error: RuntimeError: a \\| b |" in lines[A] and lines[A].endswith("| error; ran 2026-01-02 in 89 s |")
    # Up to four checks are listed, five or more counted.
    assert "| `m` = 1; `m` = 2; `m` = 3; `m` = 4 |" in lines[B] and lines[B].endswith("in 1.5 min |")
    assert "| 5 of 5 checks within tolerance (below) |" in lines[C] and lines[C].endswith("in 2.5 min |")
    assert "on a 7-CPU machine" in report.markdown_table_of(outcomes, {"cpus": 7})
    # A quick run's durations are not the experiments' own: no total, even with every experiment run.
    every = {i: report.Outcome(i, "PASS", 60.0, True, rows=[row(1, 1.0, "exact")]) for i in ids}
    assert "add up to" not in report.markdown_table_of(every, {"quick": True})
    # A re-run experiment's row replaces the one kept from the previous table.
    previous = f"{report.MD_BEGIN} -->\n| `{A}` | old row |\n| `{B}` | kept row |\n{report.MD_END}\n"
    again = report.markdown_table_of({A: outcomes[A]}, {}, previous)
    assert "| `apu-tlb-miss-latency` (fit) | " in again and "old row" not in again and f"| `{B}` | kept row |" in again
    # Text without the end marker has no previous rows to keep.
    assert "not run" in report.markdown_table_of({}, {}, f"{report.MD_BEGIN} -->\n| `{B}` | kept row |\n")


def test_update_markdown_leaves_one_end_marker_and_refuses_markers_out_of_order(tmp_path: Path) -> None:
    doc = tmp_path / "v.md"
    doc.write_text(f"# V\n{report.MD_BEGIN} -->\nold\n{report.MD_END}\ntail\n", encoding="utf-8")
    report.update_markdown(doc, f"{report.MD_BEGIN} -->\nnew\n{report.MD_END}")
    assert doc.read_text(encoding="utf-8") == f"# V\n{report.MD_BEGIN} -->\nnew\n{report.MD_END}\ntail\n"
    # The end marker before the begin one: refused before any experiment runs, not a crash after them all.
    doc.write_text(f"{report.MD_END}\n{report.MD_BEGIN} -->\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no summary markers"):
        report.check_markdown_target(doc)


def test_comparison_bars_cap_colour_and_order() -> None:
    from matplotlib.colors import to_rgba

    # 600 / 582 = 1.0309 (PASS, within 10%); 50 / 10 = 5, drawn at the cap 3 (FAIL); published 0 has no ratio.
    fig = report.comparison_bars([row(582, 600.0, "10%"), row(10, 50.0, "10%"), row(0, 0.0, "exact")])
    pub1, sim1, pub2, sim2 = fig.axes[0].patches
    assert sim1.get_width() == pytest.approx(600 / 582) and sim2.get_width() == 3.0
    assert sim1.get_facecolor() == to_rgba("#2e7d32") and sim2.get_facecolor() == to_rgba("#c62828")
    assert pub1.get_y() > pub2.get_y()  # the first check on top, as in the table
    # A negative published value: 10% either side of -50.
    assert report.reference(row(-50, -50.0, "10%")) == pytest.approx((-50, -55, -45))


def write_table(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path.parent


def test_batch_size_plot_is_relative_to_the_time_at_1024(tmp_path: Path) -> None:
    # 4, 3, 2, 2 ms over the 2 ms at batch size 1024.
    out = write_table(
        tmp_path / "batch_size.csv",
        "kernel,n,batch_size,kernel_ms\nsgemm,512,256,4.0\nsgemm,512,512,3.0\nsgemm,512,1024,2.0\nsgemm,512,2048,2.0\n",
    )
    line = report.batch_size_plot([], out).axes[0].lines[0]
    assert list(line.get_xdata()) == [256, 512, 1024, 2048] and list(line.get_ydata()) == [2.0, 1.5, 1.0, 1.0]


def test_oversubscription_plot_in_percent_of_the_footprint(tmp_path: Path) -> None:
    out = write_table(
        tmp_path / "slowdowns.csv", "workload,fraction_fits,slowdown_vs_copy\nnw,0.5,3.0\nnw,1.0,1.0\nnw,0.75,2.0\n"
    )
    line = report.zheng_oversub_plot([], out).axes[0].lines[0]
    assert list(line.get_xdata()) == [50.0, 75.0, 100.0] and list(line.get_ydata()) == [3.0, 2.0, 1.0]


def test_mpki_plot_stars_the_apps_not_counted(tmp_path: Path) -> None:
    out = write_table(
        tmp_path / "mpki.csv",
        "app,published_mpki,mpki,counted,published_class,class\nbfs,2.0,1.5,True,high,high\n"
        "fir,0.05,0.2,False,low,medium\n",
    )
    ax = report.mpki_plot([], out).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["bfs\nhigh/high", "fir*\nlow/medium"]
    assert [p.get_height() for p in ax.patches] == [2.0, 0.05, 1.5, 0.2]  # published, then simulated


def test_least_tlb_plot_draws_each_mix_and_its_weighted_speedup_ratio(tmp_path: Path) -> None:
    # The black bar: Least-TLB's weighted speedup over the baseline's, 2.3 / 2.0 = 1.15.
    out = write_table(
        tmp_path / "mixes.csv", "mix,app,normalized,least_ws,base_ws\nm1,a,1.2,2.3,2.0\nm1,b,0.9,2.3,2.0\n"
    )
    ax = report.least_tlb_plot([], out).axes[0]
    assert [p.get_height() for p in ax.patches] == pytest.approx([1.2, 0.9, 1.15])


# --- the whole quick run, and the page in a browser ------------------------------------------------------------


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``uvmsim reproduce --all --quick -o DIR`` (1-4 minutes on 2 cores): the directory and the finished process."""
    out = tmp_path_factory.mktemp("reproduce-all") / "r"
    p = subprocess.run(
        [sys.executable, "-m", "uvmsim", "reproduce", "--all", "--quick", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    return out, p


def traces_available() -> bool:
    try:
        rep.traces_dir()
    except ConfigError:
        return False
    return True


def check_returncode(p: subprocess.CompletedProcess[str]) -> None:
    """0, or, on a checkout without shared/traces beside it (a CI clone elsewhere), 1 with mgpusim-tlb the only
    ERROR: an experiment without its input data is reported as an error, never skipped silently."""
    if traces_available():
        assert p.returncode == 0, p.stderr
        return
    assert p.returncode == 1, p.stdout
    errors = re.findall(r"^  ERROR +(\S+)", p.stdout, re.M)
    assert errors == ["mgpusim-tlb"], p.stdout


def test_reproduce_all_quick_writes_every_experiment(quick_report: tuple[Path, subprocess.CompletedProcess]) -> None:
    out, p = quick_report
    check_returncode(p)
    _, targets = report.load_validation()
    supported = [t.id for t in targets if t.supported]
    for i in supported:
        if i == "mgpusim-tlb" and not traces_available():
            continue
        assert re.search(rf"^  (PASS|FAIL|INFO) +{re.escape(i)}  ", p.stdout, re.M), p.stdout
        assert (out / i / "comparison.csv").is_file() and (out / i / report.PLOT_FILE).is_file()
    assert f"{len(targets) - len(supported)} not yet supported" in p.stdout
    page = (out / report.REPORT_FILE).read_text(encoding="utf-8")
    # Self-contained: nothing is fetched (no external stylesheet, script, image or font).
    assert not re.search(r"<link|<script\s+src|src=\"(?!data:)|url\(", page)
    assert page.count('<img class="plot"') == len(supported) - (0 if traces_available() else 1)
    assert report.load_run_meta(out)["elapsed_s"] > 0


QUICK_REFERENCE = Path(__file__).parent / "data" / "reproduce-quick.json"


def test_the_quick_reproduction_matches_the_committed_fingerprint(
    quick_report: tuple[Path, subprocess.CompletedProcess],
) -> None:
    # tests/data/reproduce-quick.json is the fingerprint of `reproduce --all --quick` at the commit that last wrote
    # it (docs/experiments.md, "Which runs moved"). A commit that moves any run or checked value fails here until
    # it rewrites the file, so the commit shows which experiments moved: their rows of docs/validation.md are due
    # a full re-run. The file was written on another machine: this also checks determinism across machines.
    out, p = quick_report
    check_returncode(p)
    ref = diff.read_fingerprint(QUICK_REFERENCE)
    assert ref is not None
    new = diff.fingerprint(out, like=ref)
    if not traces_available():  # mgpusim-tlb needs ../shared/traces (check_returncode): compare the others

        def without_traces(fp: diff.Fingerprint) -> diff.Fingerprint:
            keep = lambda k: k.split("/", 1)[0] != "mgpusim-tlb"  # noqa: E731
            runs = {k: v for k, v in fp.runs.items() if keep(k)}
            return dataclasses.replace(fp, runs=runs, experiments={k: v for k, v in fp.experiments.items() if keep(k)})

        ref, new = without_traces(ref), without_traces(new)
    r = diff.compare_fingerprints(QUICK_REFERENCE, out, ref, new)
    assert len(r.runs) > 300  # all of reproduce --all's runs, each paired by its path
    if not r.same:
        refresh = (
            "If the move is intended: uvmsim reproduce --all --quick -j 2 -o /tmp/q && uvmsim fingerprint /tmp/q"
            f" -o tests/data/{QUICK_REFERENCE.name}; then re-run the moved experiments' rows of docs/validation.md"
            " at full size (uvmsim reproduce ID --markdown docs/validation.md)."
        )
        pytest.fail("\n".join(["the quick reproduction moved:", *diff.render(r, rows=0), "", refresh]))


def find_chromium() -> str | None:
    """A headless-capable Chromium: UVMSIM_CHROMIUM, else the first of the usual names on PATH."""
    env = os.environ.get("UVMSIM_CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    return None


def chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a throw-away profile (no sandbox: CI runs as root; the page is our own file)."""
    return subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--hide-scrollbars",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


class RenderedPage(HTMLParser):
    """What the test reads from the DOM Chromium rendered: summary rows, sections and plots by experiment."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.summary_rows: list[str] = []
        self.sections: dict[str, str] = {}
        self.plots: dict[str, str] = {}
        self._in_summary = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "table" and a.get("id") == "summary":
            self._in_summary = True
        elif tag == "tr" and self._in_summary and a.get("data-id"):
            self.summary_rows.append(str(a["data-id"]))
        elif tag == "section" and "experiment" in str(a.get("class")):
            self.sections[str(a["data-id"])] = str(a["data-status"])
        elif tag == "img" and a.get("class") == "plot":
            self.plots[str(a["data-id"])] = str(a.get("data-rendered"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_summary = False


@pytest.fixture(scope="module")
def chromium_binary() -> str:
    """The Chromium to test with; skips (fails when UVMSIM_REQUIRE_BROWSER is set, as in CI) without one."""
    binary = find_chromium()
    if binary is None:
        if os.environ.get("UVMSIM_REQUIRE_BROWSER"):
            pytest.fail("UVMSIM_REQUIRE_BROWSER is set but no chromium binary was found")
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium; or set UVMSIM_CHROMIUM)")
    return binary


def test_report_in_a_real_browser(
    chromium_binary: str, quick_report: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    binary = chromium_binary
    out, p = quick_report
    check_returncode(p)
    url = (out / report.REPORT_FILE).resolve().as_uri()
    # --virtual-time-budget lets the page finish loading (and its load handler run) before the DOM is dumped.
    dom = chromium(binary, tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr
    page = RenderedPage()
    page.feed(dom.stdout)
    assert page.body.get("data-loaded") == "yes", "the page's load handler did not run"
    _, targets = report.load_validation()
    ids = [t.id for t in targets]
    assert page.summary_rows == ids
    assert list(page.sections) == ids
    for t in targets:
        if t.id == "mgpusim-tlb" and not traces_available():
            assert page.sections[t.id] == "ERROR"
        elif t.supported:
            want = ("INFO",) if t.id == "modern-presets" else ("PASS", "FAIL")
            assert page.sections[t.id] in want, (t.id, page.sections[t.id])
            assert page.plots.get(t.id) == "yes", f"{t.id}: its plot did not render"
        else:
            assert page.sections[t.id] == "UNSUPPORTED" and t.id not in page.plots
    assert "not yet supported" in dom.stdout

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    s = chromium(binary, tmp_path / "profile", "--window-size=1280,3000", f"--screenshot={shot}", url)
    assert s.returncode == 0 and shot.is_file(), s.stderr
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1280, 3000)
        colours = im.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 50, "the screenshot is blank"
    print(f"\nscreenshot of report.html: {shot}")
