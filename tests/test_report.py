"""``uvmsim reproduce --all``: the list of VALIDATION.md experiments, the report, and report.html in a real browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import Cli
from uvmsim import ConfigError, report
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


# --- the whole quick run, and the page in a browser ------------------------------------------------------------


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``uvmsim reproduce --all --quick -o DIR`` (about 10 s): the directory and the finished process."""
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
