"""SIGTERM handled as Ctrl-C (SIGINT).

Python ends on SIGTERM at once by default: a simulation stopped mid-run, no message, no ``--resume`` hint, and
an empty output directory left behind. Inside ``sigterm_as_interrupt`` a SIGTERM raises
``KeyboardInterrupt(signal.SIGTERM)`` in the main thread instead, so it takes the path Ctrl-C takes: the binding,
which polls for signals while the Rust core works, stops the run or trace loop within milliseconds; worker
pools are stopped; every finished result stays; the CLI prints one line and exits with 128 + the signal's
number (130 for SIGINT, 143 for SIGTERM). ``signal_of`` tells the two apart afterwards.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Handler = Callable[[int, Any], Any] | int | None


@contextmanager
def _handled_by(handler: Callable[[int, Any], None], signums: tuple[int, ...]) -> Iterator[dict[int, Handler] | None]:
    """Install ``handler`` for ``signums`` while the block runs, then restore the previous handlers; yields them
    (None outside the main thread, where handlers cannot be set and signals are left alone)."""
    try:
        previous = {s: signal.signal(s, handler) for s in signums}
    except ValueError:  # not the main thread (it fails on the first signal: nothing to restore)
        yield None
        return
    try:
        yield previous
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into ``KeyboardInterrupt(signal.SIGTERM)`` while the block runs (main thread only: elsewhere
    signals are left alone)."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signum)

    with _handled_by(handler, (signal.SIGTERM,)):
        yield


def signal_of(e: BaseException | None) -> int:
    """The signal that raised ``e`` (a ``KeyboardInterrupt``, or an exception raised from one, e.g. click's
    ``Abort``): the number ``sigterm_as_interrupt``'s handler put in it, else SIGINT (Ctrl-C)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt):
            return e.args[0] if e.args and isinstance(e.args[0], int) else signal.SIGINT
        e = e.__cause__ or e.__context__
    return signal.SIGINT


def interrupted_by(signum: int) -> str:
    """``"interrupted"`` for Ctrl-C, ``"interrupted by SIGTERM"`` (...) for another signal."""
    return "interrupted" if signum == signal.SIGINT else f"interrupted by {signal.Signals(signum).name}"


@contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM (the signals that stop a sweep) while the block runs, and hand them to their
    handlers after it: a step that must finish whole (a run's file written *and* counted) is not cut between
    its parts. The handlers are swapped, not the signal mask: another thread (the core's, pyarrow's) would take
    a signal the main thread masks. Main thread only; elsewhere the block runs unguarded."""
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    previous: dict[int, Handler] | None = None
    try:
        with _handled_by(hold, (signal.SIGINT, signal.SIGTERM)) as previous:
            yield
    finally:
        if previous is not None and held:  # one stop is enough
            s = held[0]
            handler = previous[s]
            if callable(handler):
                handler(s, None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), s)
