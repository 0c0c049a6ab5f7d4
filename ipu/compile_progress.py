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

A program's own compile (a Session's lowering, memory plan and step tables: tens of seconds for a
BERT-base stack) shows the same way, through `program()`:

    compiling the program... lowering ops 312/1207, 4.1 s (layer1/attention/matmul)

its phases reported by `phase()` and `tick()` (no-ops when no program compile is shown), then one
line, `compiled the program in 12.3 s (lowering 5.0 s, ...)`. While it is on screen, a kernel
compile in the middle of it joins its line instead of starting a second one.
"""
from __future__ import annotations

import atexit
import contextlib
import sys
import threading
import time
import types as pytypes

from numba.core import event
from rich.console import Console

from . import env

__all__ = ["install", "phase", "program", "stats", "tick", "waiting_for"]

SHOW_AFTER = 1.0  # seconds of compiling before anything is shown
IDLE_END = 0.5  # seconds without a compile that end a burst
TICK = 0.1
_screen = threading.Lock()  # one status line at a time: a kernel burst's or a program compile's
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
        self.line: _Line | None = None
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
                elif self.shown and not ended and self.line is not None:
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
        with _screen:
            if _program_on_screen():  # the program compile's line shows this burst (_Program._text)
                return
            self.line = _Line(self._text(now))
        if not self.line.live:
            _write("compiling simulator kernels (once per install; later runs load them from the kernel cache)...")

    def _update(self, now):
        if self.line is not None:
            self.line.update(self._text(now))

    def _finish(self, now):
        if self.line is not None:
            self.line.stop()
            self.line = None
        _write(f"compiled {self.done} simulator kernels in {self._seconds(now):.1f} s "
               f"(once per install: later runs load them from the kernel cache)")


class _Line:
    """A rich status line on standard error when it is a terminal (`live`), else nothing."""

    def __init__(self, text: str):
        self.status = None
        self.width = 80
        try:
            console = Console(file=sys.stderr)
            if console.is_terminal and not console.is_dumb_terminal:
                self.width = console.width
                self.status = console.status(self.fit(text), spinner="dots")
                self.status.start()
        except Exception:  # noqa: BLE001 - a display problem must never stop a compile
            self.status = None

    @property
    def live(self) -> bool:
        return self.status is not None

    def fit(self, text: str) -> str:
        """One line on a narrow terminal (the spinner takes 2 columns)."""
        return text if len(text) <= self.width - 3 else text[:max(self.width - 6, 10)] + "..."

    def update(self, text: str) -> None:
        if self.status is not None:
            try:
                self.status.update(self.fit(text))
            except Exception:  # noqa: BLE001
                pass

    def stop(self) -> None:
        if self.status is not None:
            try:
                self.status.stop()
            except Exception:  # noqa: BLE001
                pass
            self.status = None


def _write(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


class _Program:
    """The display of one program compile: its phases, the count within the current one, and a
    daemon thread that shows them once the compile has lasted SHOW_AFTER seconds."""

    def __init__(self, what: str):
        self.what = what
        self.lock = threading.Lock()
        self.start = time.perf_counter()
        self.phases: list = []  # [name, seconds] in order (a phase entered twice adds up)
        self.current = ""
        self.phase_start = self.start
        self.count = 0
        self.total = 0
        self.detail = ""
        self.line: _Line | None = None
        self.shown = False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ipu-sim program compile progress", daemon=True)
        self.thread.start()

    def phase(self, name: str, total: int = 0) -> None:
        with self.lock:
            now = time.perf_counter()
            self._close_phase(now)
            self.current, self.phase_start, self.count, self.total, self.detail = name, now, 0, int(total), ""

    def tick(self, detail: str = "") -> None:
        self.count += 1  # (the display reads it under no lock: a count one behind is harmless)
        if detail:
            self.detail = detail

    def _close_phase(self, now: float) -> None:
        if self.current:
            for p in self.phases:
                if p[0] == self.current:
                    p[1] += now - self.phase_start
                    break
            else:
                self.phases.append([self.current, now - self.phase_start])

    def _text(self, now: float) -> str:
        n = f" {self.count}/{self.total}" if 0 < self.total and self.count <= self.total else (
            f" {self.count}" if self.count else "")
        detail = f" ({self.detail})" if self.detail else ""
        kernels = ""
        w = _watcher
        if w is not None:
            with w.lock:
                if w.burst_start is not None and w.done + w.depth:
                    kernels = f"; kernels {w.done} compiled (once per install)"
        return f"compiling {self.what}... {self.current}{n}, {now - self.start:.1f} s{kernels}{detail}"

    def _run(self):
        while not self.done.wait(TICK):
            now = time.perf_counter()
            with self.lock:
                if self.line is None and now - self.start > SHOW_AFTER:
                    text = self._text(now)  # (takes the kernel watcher's lock: not under _screen)
                    with _screen:
                        if not _kernel_line_live():
                            self.line = _Line(text)
                            self.shown = True
                elif self.line is not None:
                    self.line.update(self._text(now))

    def close(self, ok: bool) -> None:
        self.done.set()
        self.thread.join()
        now = time.perf_counter()
        with self.lock:
            self._close_phase(now)
            if self.line is not None:
                self.line.stop()
                self.line = None
            seconds = now - self.start
            if ok and (self.shown or seconds > SHOW_AFTER):
                parts = ", ".join(f"{name} {t:.1f} s" for name, t in self.phases if t >= 0.05)
                _write(f"compiled {self.what} in {seconds:.1f} s"
                       + (f" ({parts})" if parts else ""))


_program_now: _Program | None = None


def _program_on_screen() -> bool:
    p = _program_now
    return p is not None and p.line is not None and p.line.live


def _kernel_line_live() -> bool:
    w = _watcher
    return w is not None and w.line is not None and w.line.live


@contextlib.contextmanager
def program(what: str = "the program"):
    """Progress of a program compile (see the module docstring); nested uses join the outer one."""
    global _program_now
    if _watcher is None or _program_now is not None:  # progress off (install), or already shown
        yield
        return
    _program_now = p = _Program(what)
    ok = False
    try:
        yield
        ok = True
    finally:
        _program_now = None
        p.close(ok)


@contextlib.contextmanager
def waiting_for(kernel):
    """This process waits while another compiles `kernel` for it (ipu/compile_ahead.py): shown as
    a compile of that kernel, so a long wait is not a silent terminal either."""
    w = _watcher
    if w is None:
        yield
        return
    ev = pytypes.SimpleNamespace(data={"dispatcher": kernel})
    w.on_start(ev)
    try:
        yield
    finally:
        w.on_end(ev)


def phase(name: str, total: int = 0) -> None:
    """The program compile enters phase `name` (of `total` items when known)."""
    p = _program_now
    if p is not None:
        p.phase(name, total)


def tick(detail: str = "") -> None:
    """One more item of the current phase (`detail`: what it is, e.g. the op's name)."""
    p = _program_now
    if p is not None:
        p.tick(detail)


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
