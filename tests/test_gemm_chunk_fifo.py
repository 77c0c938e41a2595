"""The chunk-level model of blas-gemm past GPU memory (scripts/gemm_chunk_fifo.py) behind docs/validation.md's
allen-oversub analysis: hand-worked cases, and its agreement with the simulator's driver eviction."""

import subprocess
import sys

import pytest

import uvmsim
from conftest import SCRIPTS, load_script
from uvmsim.reproduce import _bytes

SCRIPT = SCRIPTS / "gemm_chunk_fifo.py"
fifo = load_script("gemm_chunk_fifo")


def test_hand_worked_waves() -> None:
    # n = 1024: each matrix 4 MiB = 2 chunks (A 0-1, B 2-3, C 4-5), a column 4 KiB, so N tiles 0-3 are in a
    # matrix's first chunk and 4-7 in its second; 8 x 8 CTAs, 16 at once: four waves of two N tiles each.
    # In 4 chunks: wave 0 brings B2, A0, A1, C4 (full); wave 1 hits them all. Wave 2 needs B3: FIFO evicts B2,
    # then C5 evicts A0; wave 3 needs A0 (evicts A1) and A1 (evicts C4): 4. LRU: wave 2's B3 evicts B2, A0
    # and A1 are hits, C5 evicts C4; wave 3 hits everything: 2.
    assert fifo.evictions(1024, memory_chunks=4, ctas=16, policy="fifo") == 4
    assert fifo.evictions(1024, memory_chunks=4, ctas=16, policy="lru") == 2
    # What fits evicts nothing; one chunk too few evicts.
    assert fifo.evictions(1024, memory_chunks=6, ctas=16) == 0
    assert fifo.evictions(1024, memory_chunks=5, ctas=16) > 0
    with pytest.raises(ValueError, match="policy"):
        fifo.evictions(1024, policy="random")


@pytest.mark.parametrize(("chunks", "expected"), [(14, 26), (16, 16), (18, 14)])
def test_the_simulators_driver_eviction_is_the_models_fifo(chunks: int, expected: int) -> None:
    # blas-gemm at n = 2048 on 10 SMs (2 CTAs each: 20 at once, 13 waves) in 14-18 chunks of GPU memory (A, B
    # and C 8 chunks each). The driver evicts the block resident longest: the chunk model's FIFO, chunk for
    # chunk, although the simulator also models pages, prefetching, timing and CTAs that finish apart.
    assert fifo.evictions(2048, memory_chunks=chunks, ctas=20) == expected
    r = uvmsim.run(
        preset="titan-v",
        set={
            "workload.kind": "blas-gemm",
            "workload.managed": True,
            "workload.blas_gemm.n": 2048,
            "gpu.sms": 10,
            "uvm.gpu_memory_bytes": chunks * 2 * 2**20,
        },
    )
    assert r.metrics["uvm.evictions"] == expected


def test_the_default_system_is_titan_v() -> None:
    # The script's defaults restate the preset (it runs without the simulator): keep them in step.
    cfg = uvmsim.resolve(preset="titan-v")
    assert fifo.TITAN_V_CHUNKS == _bytes(cfg["uvm"]["gpu_memory_bytes"]) // fifo.CHUNK
    assert fifo.TITAN_V_CTAS == cfg["gpu"]["sms"] * cfg["workload"]["blas_gemm"]["ctas_per_sm"]


def test_command_line() -> None:
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--memory-chunks", "4", "--ctas", "16", "1024"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert p.stdout == "n = 1024: 4 chunks evicted, 2,048 pages\n"
