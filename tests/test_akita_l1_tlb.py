"""The tick model of MGPUSim's L1 vector TLB (scripts/akita_l1_tlb.py), a cross-check used in docs/validation.md."""

from argparse import Namespace
from pathlib import Path

from conftest import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "akita_l1_tlb.py"


def load():
    return load_script("akita_l1_tlb")


def args(**kw):
    a = dict(sets=4, ways=64, mshrs=64, round_trip=1, per_tick=32, lookups_per_tick=16, every=1, room=0)
    a.update(kw)
    return Namespace(**a)


def test_lookups_per_tick_cap_comes_from_the_post_pipeline_buffer():
    # 16 distinct pages and then page 0 again, all at tick 0; a miss's fill is parsed one tick later.
    rows = [(0, p, p * 64, False) for p in range(16)] + [(0, 0, 1, False)]
    m = load()
    # All 17 looked up in tick 0: the 17th finds page 0 pending, an MSHR hit.
    assert m.replay(rows, args(lookups_per_tick=32)) == (0, 16, 1)
    # 16 per tick (Akita's 16-entry buffer): the 17th is looked up in tick 1, after page 0's fill: a hit.
    assert m.replay(rows, args()) == (1, 16, 0)
