"""Progress on standard error while Numba compiles the simulator's kernels.

Kernels are compiled when a program first uses them (the codelet kernels its compute sets call,
the step loop on a first compiled run, the placement and table builders at compile time), then
loaded from the kernel cache (ipu/kernel_cache.py) by every later process. A new install or a
changed ipu/ or codelets/ source compiles them once, which takes tens of seconds: rather than
leave a silent terminal, a compile that lasts more than a second shows what it is doing,

    compiling simulator kernels (once per install)... 7 done, 12.3 s, now reduce._reduce_kernel

(a rich status line on a terminal, one plain line otherwise), and one summary line when the burst
ends. Numba's compile events drive it ("numba:compile" fires only for a real compile, never for a
cache load); a daemon thread turns them into the display. `IPU_SIM_PROGRESS=0` turns it off.
"""
from __future__ import annotations

import atexit
import sys
import threading
import time

from numba.core import event
from rich.console import Console

from . import env

__all__ = ["install", "stats"]

SHOW_AFTER = 1.0  # seconds of compiling before anything is shown
IDLE_END = 0.5  # seconds without a compile that end a burst
TICK = 0.1
PACKAGES = ("ipu.", "codelets.", "popxl.", "popart.", "poptorch.", "popdist.", "profiler.")


def _name(dispatcher) -> str:
    f = getattr(dispatcher, "py_func", None)
    if f is None:
        return str(dispatcher)
    return f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', f.__name__)}"


def _ours(name: str) -> bool:
    return name.startswith(PACKAGES)


class _Watcher(event.Listener):
    def __init__(self):
        self.lock = threading.Lock()
        self.depth = 0
        self.burst_start = None  # when the current burst's first compile started
        self.last_end = 0.0
        self.done = 0  # the project's functions compiled in this burst
        self.top_start = 0.0  # when the outermost compile in progress started
        self.compiling = 0.0  # seconds of the burst spent compiling (outermost compiles)
        self.current = ""
        self.thread = None
        self.shown = False
        self.status = None
        self.width = 80  # the terminal's columns
        self.total_done = 0  # over the process (stats())
        self.total_seconds = 0.0

    # -- Numba's events (the compiling thread, under Numba's compiler lock)
    def on_start(self, ev):
        name = _name(ev.data.get("dispatcher"))
        with self.lock:
            now = time.perf_counter()
            if self.burst_start is None:
                self.burst_start = now
                self.done = 0
                self.compiling = 0.0
            if self.depth == 0:
                self.top_start = now
            self.depth += 1
            if _ours(name):
                self.current = ".".join(name.split(".")[-2:])  # module.function
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="ipu-sim compile progress", daemon=True)
                self.thread.start()

    def on_end(self, ev):
        name = _name(ev.data.get("dispatcher"))
        with self.lock:
            self.depth = max(self.depth - 1, 0)
            self.last_end = time.perf_counter()
            if self.depth == 0:
                self.compiling += self.last_end - self.top_start
            if _ours(name):
                self.done += 1
                self.total_done += 1

    # -- the display thread
    def _seconds(self, now: float) -> float:
        return self.compiling + (now - self.top_start if self.depth else 0.0)

    def _text(self, now: float) -> str:
        cur = f", now {self.current}" if self.current and self.depth else ""
        return (f"compiling simulator kernels (once per install)... {self.done} done, "
                f"{self._seconds(now):.1f} s{cur}")

    def _line(self, now: float) -> str:
        text = self._text(now)  # one line on a narrow terminal (the spinner takes 2 columns)
        return text if len(text) <= self.width - 3 else text[:max(self.width - 6, 10)] + "..."

    def _run(self):
        while True:
            time.sleep(TICK)
            now = time.perf_counter()
            with self.lock:
                if self.burst_start is None:
                    self.thread = None
                    return
                ended = self.depth == 0 and now - self.last_end > IDLE_END
                if not self.shown and not ended and now - self.burst_start > SHOW_AFTER:
                    self._show(now)
                elif self.shown and not ended and self.status is not None:
                    self._update(now)
                if ended:
                    self._end_burst(now)
                    self.thread = None
                    return

    def _end_burst(self, now):
        """(under the lock)"""
        self.total_seconds += self._seconds(now)
        if self.shown:
            self._finish(now)
        self.burst_start = None
        self.shown = False

    def at_exit(self):
        """The process ends during a burst (a script whose last run compiled): its summary line."""
        with self.lock:
            if self.burst_start is not None:
                self._end_burst(time.perf_counter())

    def _show(self, now):
        self.shown = True
        try:
            console = Console(file=sys.stderr)
            if console.is_terminal and not console.is_dumb_terminal:
                self.width = console.width
                self.status = console.status(self._line(now), spinner="dots")
                self.status.start()
                return
        except Exception:  # noqa: BLE001 - a display problem must never stop a compile
            self.status = None
        _write("compiling simulator kernels (once per install; later runs load them from the kernel cache)...")

    def _update(self, now):
        try:
            self.status.update(self._line(now))
        except Exception:  # noqa: BLE001
            pass

    def _finish(self, now):
        if self.status is not None:
            try:
                self.status.stop()
            except Exception:  # noqa: BLE001
                pass
            self.status = None
        _write(f"compiled {self.done} simulator kernels in {self._seconds(now):.1f} s "
               f"(once per install: later runs load them from the kernel cache)")


def _write(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


_watcher = None


def install() -> None:
    """Show progress for long kernel compiles (unless IPU_SIM_PROGRESS=0); idempotent."""
    global _watcher
    if _watcher is not None:
        return
    if not env.progress():
        return
    _watcher = _Watcher()
    event.register("numba:compile", _watcher)
    atexit.register(_watcher.at_exit)


def stats() -> tuple[int, float]:
    """(the project's functions Numba compiled in this process, seconds spent in finished bursts)."""
    if _watcher is None:
        return 0, 0.0
    with _watcher.lock:
        return _watcher.total_done, _watcher.total_seconds
