"""Preset discovery, descriptions and lookup errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import uvmsim
from uvmsim import presets

SHIPPED = ("kaveri-apu", "gtx480-zheng", "r9nano", "titan-v")


def test_header_takes_leading_comment_block_only() -> None:
    text = "\n# First line.\n#   second line\n#\n[gpu]\n# not part of the header\nsms = 1\n"
    assert presets.header(text) == "First line.\nsecond line"
    assert presets.header("[gpu]\nsms = 1\n") == ""


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


def test_preset_path_env_is_searched_first_and_shadows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kaveri-apu.toml").write_text("# My own Kaveri.\n[gpu]\nsms = 2\n")
    (tmp_path / "tiny.toml").write_text("# A tiny GPU.\n[gpu]\nsms = 1\n")
    monkeypatch.setenv(presets.PRESET_PATH_ENV, os.pathsep.join([str(tmp_path / "missing-dir"), str(tmp_path)]))
    by_name = {p.name: p for p in presets.list_presets()}
    assert by_name["kaveri-apu"].summary == "My own Kaveri."
    assert by_name["tiny"].path == tmp_path / "tiny.toml"
    assert presets.load_preset("tiny") == ("preset tiny", "# A tiny GPU.\n[gpu]\nsms = 1\n")
    assert uvmsim.resolve(preset="tiny")["gpu"]["sms"] == 1


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
