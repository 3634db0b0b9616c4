"""Progress display for sweeps: tqdm when installed, else a plain line printer on stderr."""
from __future__ import annotations

import sys
import time
from typing import TextIO


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "--:--"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """Counts finished points and shows rate and ETA.

    ``total`` is the number of points still to compute (cached ones are not counted, so
    the rate and ETA describe real work). ``enabled=False`` shows nothing.
    """

    def __init__(self, total: int, enabled: bool = True, stream: TextIO | None = None, desc: str = "sweep",
                 use_tqdm: bool | None = None, min_interval_s: float = 1.0):
        self.total = total
        self.enabled = enabled and total > 0
        self.stream = stream if stream is not None else sys.stderr
        self.desc = desc
        self.done = 0
        self.failed = 0
        self.t0 = time.perf_counter()
        self._last = 0.0
        self.min_interval_s = min_interval_s
        self._bar = None
        if self.enabled and use_tqdm is not False:
            try:
                from tqdm import tqdm  # optional

                class _Bar(tqdm):
                    # no monitor thread (a bar's class attribute, not tqdm's, which other code
                    # in the process may use): a sweep or study forks its workers while the bar
                    # is up, and a thread running at a fork may leave the children a lock it
                    # held (Python 3.12 warns: "This process is multi-threaded, use of fork()")
                    monitor_interval = 0

                self._bar = _Bar(total=total, desc=desc, unit="pt", file=self.stream, dynamic_ncols=True)
            except ImportError:
                if use_tqdm:
                    raise
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    # ---------------------------------------------------------------- numbers
    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def rate(self) -> float | None:
        el = self.elapsed_s
        return self.done / el if self.done and el > 0 else None

    @property
    def eta_s(self) -> float | None:
        r = self.rate
        return (self.total - self.done) / r if r else None

    def line(self) -> str:
        pct = 100.0 * self.done / self.total if self.total else 100.0
        rate = self.rate
        rate_s = f"{rate:.2f} pt/s" if rate is not None else "-- pt/s"
        fail = f", {self.failed} failed" if self.failed else ""
        return (f"{self.desc}: {self.done}/{self.total} ({pct:3.0f}%){fail}  {rate_s}  "
                f"elapsed {fmt_duration(self.elapsed_s)}  ETA {fmt_duration(self.eta_s)}")

    # ---------------------------------------------------------------- updates
    def set_total(self, total: int) -> None:
        """The number of points to compute, once it is known (a sweep that resolves its points
        while it runs starts with an upper bound)."""
        if total == self.total:
            return
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def update(self, status: str) -> None:
        self.done += 1
        if status == "failed":
            self.failed += 1
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(1)
            if self.failed:
                self._bar.set_postfix(failed=self.failed)
            return
        now = time.perf_counter()
        if self.done == self.total or now - self._last >= self.min_interval_s:
            self._last = now
            if self._tty:
                self.stream.write("\r" + self.line() + "\033[K")
            else:
                self.stream.write(self.line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        elif self._tty:
            self.stream.write("\n")
            self.stream.flush()
