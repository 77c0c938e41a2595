"""Preset discovery, descriptions and lookup errors."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import uvmsim
from conftest import Cli
from uvmsim import presets
from uvmsim._names import nearest

MODERN = ("a100-pcie4", "h100-pcie5", "v100-nvlink2-p9", "gh200-c2c", "mi300a-apu")
SHIPPED = ("kaveri-apu", "gtx480-zheng", "r9nano", "titan-v", *MODERN)
# A small managed-memory workload (STREAM triad, 3 x 2 MiB, host-initialised) that runs in well under a second.
SMALL_MANAGED = {
    "workload.kind": "stream",
    "workload.managed": True,
    "workload.stream.elements": 262144,
    "workload.stream.threads": 16384,
    "uvm.baselines": True,
}


def test_header_takes_leading_comment_block_only() -> None:
    text = "\n# First line.\n#   second line\n#\n[gpu]\n# not part of the header\nsms = 1\n"
    assert presets.header(text) == "First line.\nsecond line"
    assert presets.header("[gpu]\nsms = 1\n") == ""


def test_header_ends_at_a_blank_line_and_strips_every_hash() -> None:
    assert presets.header("# Title.\n\n# A comment of the first table.\n[gpu]\n") == "Title."
    assert presets.header("## Big title\n#\n# more\n") == "Big title\n\nmore"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_preset_is_listed_with_a_summary(name: str) -> None:
    by_name = {p.name: p for p in presets.list_presets()}
    assert name in by_name
    assert by_name[name].summary, f"preset {name} needs a leading '# one-line summary' comment"


def test_every_listed_preset_resolves() -> None:
    for p in presets.list_presets():
        cfg = uvmsim.resolve(preset=p.name)
        assert cfg["workload"]["kind"], p.name


def test_unknown_preset_names_nearest_and_available() -> None:
    with pytest.raises(uvmsim.ConfigError) as e:
        presets.load_preset("kaveri")
    msg = str(e.value)
    assert "unknown preset `kaveri`" in msg
    assert "did you mean `kaveri-apu`" in msg
    assert "r9nano" in msg  # the list of what is available
    # A part two presets hold: the shorter one (`4gpu` is in li-4gpu-ats and li-4gpu-gmmu).
    with pytest.raises(uvmsim.ConfigError, match="did you mean `li-4gpu-ats`"):
        presets.load_preset("4GPU")
    # A part's ending counts too, as for the Rust side's variant hints: `nvlink2` ends `v100-nvlink2-p9`'s part.
    with pytest.raises(uvmsim.ConfigError, match="did you mean `v100-nvlink2-p9`"):
        presets.load_preset("link2")


def test_nearest_name_ranks_holding_parts_then_close_spellings() -> None:
    # Parts are split at `-`, `_` and `.`; from 3 letters a part that is the name or ends with it wins, the
    # shortest such choice first, ties by name (not by the order given).
    assert nearest("apu", ["mi300a-apu", "kaveri-apu", "titan-v"]) == "kaveri-apu"
    assert nearest("l1tlb", ["gpu.l1tlb.entries"]) == "gpu.l1tlb.entries"
    # A part that only starts with the name does not hold it: `walkers` is not preferred over `max_walk`.
    assert nearest("walk", ["walkers", "max_walk"]) == "max_walk"
    # Else difflib's measure, at its cut-off 0.6: `stram` is 0.55 from `stride`, too far to suggest.
    assert nearest("stram", ["stride"]) is None
    assert nearest("strde", ["stride", "stream"]) == "stride"


def test_preset_path_env_is_searched_first_and_shadows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kaveri-apu.toml").write_text("# My own Kaveri.\n[gpu]\nsms = 2\n")
    (tmp_path / "tiny.toml").write_text("# A tiny GPU.\n[gpu]\nsms = 1\n")
    monkeypatch.setenv(presets.PRESET_PATH_ENV, os.pathsep.join([str(tmp_path / "missing-dir"), str(tmp_path)]))
    by_name = {p.name: p for p in presets.list_presets()}
    assert by_name["kaveri-apu"].summary == "My own Kaveri."
    assert by_name["tiny"].path == tmp_path / "tiny.toml"
    assert presets.load_preset("tiny") == ("preset tiny", "# A tiny GPU.\n[gpu]\nsms = 1\n")
    assert uvmsim.resolve(preset="tiny")["gpu"]["sms"] == 1
    # The listing and the description say which shipped preset a user's one hides.
    assert by_name["kaveri-apu"].shadows == (presets.BUILTIN_DIR / "kaveri-apu.toml",) and by_name["tiny"].shadows == ()
    assert presets.describe("kaveri-apu").shadows == (presets.BUILTIN_DIR / "kaveri-apu.toml",)
    assert presets.describe("titan-v").shadows == ()


def test_a_preset_hides_only_the_files_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "titan-v.toml").write_text("# My own Titan V.\n[gpu]\nsms = 2\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "titan-v.toml").write_text("# Another.\n[gpu]\nsms = 3\n")
    monkeypatch.setenv(presets.PRESET_PATH_ENV, str(tmp_path / "mine"))
    shipped = presets.BUILTIN_DIR / "titan-v.toml"
    assert presets.describe("titan-v").shadows == (shipped,)
    # The shipped file, named by its path, hides nothing (the user's one hides it); nor does a file outside the
    # preset directories.
    assert presets.describe(shipped).shadows == ()
    assert presets.describe(tmp_path / "elsewhere" / "titan-v.toml").shadows == ()


def test_presets_are_listed_by_name_across_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "zz-last.toml").write_text("# Z.\n")
    (tmp_path / "aa-first.toml").write_text("# A.\n")
    monkeypatch.setenv(presets.PRESET_PATH_ENV, str(tmp_path))
    names = [p.name for p in presets.list_presets()]
    assert names == sorted(names) and {"aa-first", "zz-last", "titan-v"} <= set(names)


def test_presets_command_says_which_shipped_preset_is_hidden(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "titan-v.toml").write_text("# My own Titan V.\n[gpu]\nsms = 2\n")
    monkeypatch.setenv(presets.PRESET_PATH_ENV, str(tmp_path))
    p = cli("presets")
    line = next(x for x in p.stdout.splitlines() if x.startswith("titan-v"))
    assert "My own Titan V." in line and f"hides {presets.BUILTIN_DIR / 'titan-v.toml'}" in line, line
    assert "hides" not in next(x for x in p.stdout.splitlines() if x.startswith("kaveri-apu"))
    assert "hides" in cli("presets", "titan-v").stdout.splitlines()[0]


def test_preset_given_as_a_path(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text("[gpu]\nsms = 3\n")
    source, _ = presets.load_preset(str(f))
    assert source == str(f)
    assert uvmsim.resolve(preset=f)["gpu"]["sms"] == 3
    with pytest.raises(uvmsim.ConfigError, match="does not exist"):
        presets.load_preset(str(tmp_path / "absent.toml"))


def test_errors_in_a_preset_name_the_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken.toml").write_text("[gpu]\nsmz = 3\n")
    monkeypatch.setenv(presets.PRESET_PATH_ENV, str(tmp_path))
    with pytest.raises(uvmsim.ConfigError, match=r"preset broken.*gpu\.smz.*gpu\.sms"):
        uvmsim.resolve(preset="broken")


@pytest.mark.parametrize("name", MODERN)
def test_modern_preset_is_described_with_its_sources(cli: Cli, name: str) -> None:
    p = cli("presets", name)
    assert p.returncode == 0, p.stderr
    assert "not calibrated" in p.stdout.splitlines()[2]  # the summary line
    assert "Sources:" in p.stdout


@pytest.mark.parametrize("name", MODERN)
def test_every_modern_preset_parameter_carries_a_comment(name: str) -> None:
    # Each key names its source (or ASSUMPTION) on its line, or in a comment block opening its section.
    bare, section_commented, opening = [], False, False
    for line in presets.find_preset(name).read_text(encoding="utf-8").splitlines():
        s = line.strip()
        if s.startswith("["):
            section_commented, opening = False, True
        elif s.startswith("#"):
            section_commented |= opening
        elif s:
            opening = False
            if re.match(r"^[a-z_]+\s*=", s) and "#" not in s and not section_commented:
                bare.append(s)
    assert not bare, f"{name}: parameters without a source comment: {bare}"


WALL_CLOCK = uvmsim.WALL_CLOCK_METRICS


def _run(name: str, extra: dict[str, object] | None = None) -> dict[str, float]:
    m = uvmsim.run(preset=name, set={**SMALL_MANAGED, **(extra or {})}).metrics
    return {k: v for k, v in m.items() if k not in WALL_CLOCK}


@pytest.mark.parametrize("name", ["a100-pcie4", "h100-pcie5", "v100-nvlink2-p9"])
def test_discrete_modern_preset_runs_managed_memory_through_the_driver(name: str) -> None:
    m = _run(name)
    assert m["uvm.faults.fetched"] > 0 and m["uvm.batches"] > 0  # the UVM driver's fault batches
    assert m["uvm.prefetch.pages"] > 0  # the driver's default density prefetcher
    assert "iommu.ats_requests" not in m or m["iommu.ats_requests"] == 0
    assert m["baseline.slowdown_vs_copy"] > 1.0
    assert _run(name) == m  # deterministic


def test_v100_nvlink_keeps_the_driver_fault_path_with_access_counters_on() -> None:
    cfg = uvmsim.resolve(preset="v100-nvlink2-p9")
    assert cfg["translation"]["mode"] == "gmmu"  # managed memory goes through the UVM driver, not ATS
    assert cfg["uvm"]["access_counters"]["migrate"]  # the driver's default on an ATS system (POWER9)
    m = _run("v100-nvlink2-p9")
    # Without a hint every page migrates on its first fault: nothing is mapped remotely, so the counters stay idle.
    assert m["uvm.faults.fetched"] > 0 and m["uvm.remote.bytes"] == 0
    assert m["uvm.access_counters.notifications"] == 0
    # NVLink 2.0 (68 GB/s) shortens the explicit-copy baseline against titan-v's PCIe 3.0 (12 GB/s).
    assert m["baseline.copy_then_execute_ns"] < _run("titan-v")["baseline.copy_then_execute_ns"] / 4
    # With SetAccessedBy the pages are read over the link in place and the counters raise notifications, but this
    # 65 µs kernel ends before the driver's first migration copies anything (it allocates GPU memory first).
    hinted = _run("v100-nvlink2-p9", {"uvm.advise.policy": "accessed-by"})
    assert hinted["uvm.remote.bytes"] > 0 and hinted["uvm.access_counters.notifications"] > 0
    assert hinted["uvm.access_counters.pages"] == 0
    # A kernel that keeps gathering from a remotely mapped table runs long enough for them to migrate its hot parts.
    table = {"workload.kind": "gather", "workload.gather.table_entries": 131072, "workload.gather.lookups": 262144}
    gather = _run("v100-nvlink2-p9", {**table, "uvm.advise.policy": "accessed-by"})
    assert gather["uvm.access_counters.pages"] > 0 and gather["uvm.access_counters.time_ns"] > 0


def test_gh200_runs_managed_memory_over_ats_with_access_counters() -> None:
    m = _run("gh200-c2c")
    assert m["iommu.ats_requests"] > 0  # translations over ATS
    assert m["uvm.faults.fetched"] == 0 and m["apu.faults"] == 0  # CPU-resident pages are read in place, no fault
    assert m["uvm.remote.bytes"] > 0
    assert m["uvm.access_counters.notifications"] > 0 and m["uvm.access_counters.serviced"] > 0
    # The driver's first migration allocates GPU memory and unmaps the host first: its copies would start ~0.7 ms
    # in, long after this 23 µs kernel, so nothing has moved when the run ends (and nothing is counted).
    assert m["uvm.access_counters.pages"] == m["link.h2d.bytes"] == m["uvm.access_counters.time_ns"] == 0
    assert _run("gh200-c2c") == m
    # The random touch of 256 MiB runs 1.7 ms: the counters' migration has copied pages by its end.
    touch = _run("gh200-c2c", {"workload.kind": "random"})
    pages = touch["uvm.access_counters.pages"]
    assert pages > 0 and touch["link.h2d.bytes"] == touch["uvm.access_counters.bytes_h2d"] == pages * 4096


def test_gh200_leaves_out_what_its_fault_path_does_not_run() -> None:
    cfg = uvmsim.resolve(preset="gh200-c2c")
    assert cfg["translation"]["mode"] == "iommu" and cfg["uvm"]["prefetch"]["policy"] == "none"
    with pytest.raises(uvmsim.ConfigError, match=r"uvm\.prefetch\.policy.*page-request path"):
        uvmsim.resolve(preset="gh200-c2c", set={"uvm.prefetch.policy": "density"})


def test_a_preset_may_carry_what_the_users_mode_does_not_read() -> None:
    # li-4gpu-gmmu's [multi] and host MMU describe its machine: taken on one GPU; the user's own are refused.
    cfg = uvmsim.resolve(preset="li-4gpu-gmmu", set={"multi.gpus": 1})
    assert cfg["multi"]["migration"] == "access-counter" and cfg["multi"]["host_mmu"]["tlb_entries"] == 2048
    with pytest.raises(uvmsim.ConfigError, match=r"key `multi\.migration`: is not read in the single-GPU model"):
        uvmsim.resolve(preset="li-4gpu-gmmu", set={"multi.gpus": 1, "multi.migration": "on-touch"})
    with pytest.raises(uvmsim.ConfigError, match=r"<dict config>: key `iommu\.tlb_entries`: is not read in transl"):
        uvmsim.resolve({"iommu": {"tlb_entries": 64}}, preset="titan-v")


def test_mi300a_runs_managed_memory_on_the_apu_path() -> None:
    m = _run("mi300a-apu")
    pages = 3 * 262144 * 8 // 4096
    # amdgpu's granularity 9: one request per 2 MiB-aligned block, here one per 2 MiB array.
    assert m["apu.faults"] == 3 and m["apu.pages_mapped"] == pages
    assert m["apu.faults.merged"] > 0  # the block's other pages wait for its request
    assert m["uvm.faults.fetched"] == 0 and m["uvm.remote.bytes"] == 0
    assert m["iommu.ats_requests"] > 0
    assert _run("mi300a-apu") == m


def test_mi300a_one_page_requests_map_the_same_pages_with_more_faults() -> None:
    blocks = _run("mi300a-apu")
    pages = _run("mi300a-apu", {"iommu.ppr.pages_log2": 0})
    assert pages["apu.faults"] == pages["apu.pages_mapped"] == blocks["apu.pages_mapped"]
    # A fault now waits for its whole block (512 pages at page_us each), not for its page alone.
    assert blocks["apu.fault_latency_ns.mean"] > pages["apu.fault_latency_ns.mean"]
