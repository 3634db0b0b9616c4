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


#: finished points before an ETA is shown: the first ones finish after the start-up (worker
#: processes, trace loading, placement tuning), which a rate from the start would count as
#: work (a study's first ETA said 41 minutes for a 66 s run)
ETA_AFTER = 3


class Progress:
    """Counts finished points and shows rate and ETA.

    ``total`` is the number of points still to compute (cached ones are not counted, so
    the rate and ETA describe real work); ``bound=True``: only an upper bound so far (points
    are still being resolved; duplicates may drop out), shown as ``<=N`` until
    :meth:`set_total`. The rate counts from the first finished point (the start-up is not
    work), and no ETA is shown before :data:`ETA_AFTER` points finished. ``enabled=False``
    shows nothing.
    """

    def __init__(self, total: int, enabled: bool = True, stream: TextIO | None = None, desc: str = "sweep",
                 use_tqdm: bool | None = None, min_interval_s: float = 1.0, bound: bool = False):
        self.total = total
        self.bound = bound
        self._t_first: float | None = None
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

                owner = self

                class _Bar(tqdm):
                    # no monitor thread (a bar's class attribute, not tqdm's, which other code
                    # in the process may use): a sweep or study forks its workers while the bar
                    # is up, and a thread running at a fork may leave the children a lock it
                    # held (Python 3.12 warns: "This process is multi-threaded, use of fork()")
                    monitor_interval = 0

                    @property
                    def format_dict(self):   # our total (a bound?) and ETA, not tqdm's rate from the start
                        d = super().format_dict
                        d.update(total_h=owner.total_text(), eta_h=fmt_duration(owner.eta_s),
                                 rate_h=owner.rate_text())
                        return d

                self._bar = _Bar(total=total, desc=desc, unit="pt", file=self.stream, dynamic_ncols=True,
                                 bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_h} "
                                            "[{elapsed}, ETA {eta_h}, {rate_h}{postfix}]")
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
        """Points per second since the first one finished (None before the second)."""
        if self._t_first is None or self.done < 2:
            return None
        el = time.perf_counter() - self._t_first
        return (self.done - 1) / el if el > 0 else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left at :attr:`rate`; None (shown ``--:--``) before :data:`ETA_AFTER` points
        finished, and while the total is only a bound."""
        r = self.rate
        if r is None or self.done < min(ETA_AFTER, self.total) or self.bound:
            return None
        return max(0.0, self.total - self.done) / r

    def total_text(self) -> str:
        return f"<={self.total}" if self.bound else str(self.total)

    def rate_text(self) -> str:
        r = self.rate
        return f"{r:.2f} pt/s" if r is not None else "-- pt/s"

    def line(self) -> str:
        pct = 100.0 * self.done / self.total if self.total else 100.0
        fail = f", {self.failed} failed" if self.failed else ""
        return (f"{self.desc}: {self.done}/{self.total_text()} ({pct:3.0f}%){fail}  {self.rate_text()}  "
                f"elapsed {fmt_duration(self.elapsed_s)}  ETA {fmt_duration(self.eta_s)}")

    # ---------------------------------------------------------------- updates
    def set_total(self, total: int) -> None:
        """The number of points to compute, once it is known (a sweep that resolves its points
        while it runs starts with an upper bound)."""
        if total == self.total and not self.bound:
            return
        self.total = total
        self.bound = False
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def update(self, status: str) -> None:
        self.done += 1
        if self._t_first is None:
            self._t_first = time.perf_counter()
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
