"""Faults: a sweep whose parent is killed (SIGKILL) or terminated (SIGTERM), and two runs
racing into one --out. No worker may outlive its sweep, results.csv must be a consistent
snapshot, and a run folder must only ever hold one run's files."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy.npz"
PAPER = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _slow_sweep(tmp_path: Path, n: int = 8) -> Path:
    """Points of about half a second each (operator_sync, 512 tokens, no cost caching)."""
    base = tmp_path / "base.yaml"
    base.write_text(f"extends: {PAPER}\nrun: {{mode: operator_sync, trace: {TRACE}, generated_tokens: 512, "
                    "timeline: false, kv_len_quantum_tokens: 1}\n")
    spec = tmp_path / "slow.yaml"
    spec.write_text(f"name: slow\nbase: base.yaml\nseeds: {list(range(n))}\n")
    return spec


def _start_sweep(spec: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ahasd_sim", "sweep", "--config", str(spec), "--out", str(out),
                             "--workers", "2", "--no-progress"], cwd=spec.parent, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _communicate(proc: subprocess.Popen, timeout_s: float) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``proc``, its pipes read while it runs (a wait() with
    unread pipes deadlocks once the child fills one); a process still running after
    ``timeout_s`` is killed and the test fails with what it had written."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running {timeout_s:g} s on; its stderr:\n{err[-4000:]}\nstdout:\n{out[-2000:]}")
    return proc.returncode, out, err


def _finish(proc: subprocess.Popen, timeout_s: float) -> tuple[int, str]:
    """(exit status, stderr) of ``proc``: see :func:`_communicate`."""
    rc, _out, err = _communicate(proc, timeout_s)
    return rc, err


def _wait_running(proc: subprocess.Popen, out: Path, timeout_s: float = 60.0) -> list[int]:
    """Wait until a worker is running a point; return the worker pids."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"sweep ended early: {proc.stderr.read()}")
        if any((out / "points").glob("*/.running")):
            kids = _children(proc.pid)
            if kids:
                return kids
        time.sleep(0.05)
    pytest.fail("no worker started")


def test_sigkill_of_the_parent_leaves_no_workers(tmp_path):
    out = tmp_path / "out"
    proc = _start_sweep(_slow_sweep(tmp_path, n=4), out)
    workers = _wait_running(proc, out)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert _wait_gone(workers) == [], "pool workers outlived their killed parent"
    # the folder is resumable: the next run finishes every point and reports them all
    res = subprocess.run([sys.executable, "-m", "ahasd_sim", "sweep", "--config", str(tmp_path / "slow.yaml"),
                          "--out", str(out), "--workers", "2", "--no-progress"], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    t = pd.read_csv(out / "results.csv")
    assert len(t) == 4 and (t["status"] == "ok").all()
    assert not list(out.glob("points/*/.running")) and not list(out.glob("points/*/.staging-*"))


def test_sigterm_writes_a_consistent_results_csv(tmp_path):
    out = tmp_path / "out"
    proc = _start_sweep(_slow_sweep(tmp_path, n=6), out)
    workers = _wait_running(proc, out)
    os.kill(proc.pid, signal.SIGTERM)
    rc, err = _finish(proc, 30)
    assert rc == 143, err
    assert "Traceback" not in err
    assert _wait_gone(workers) == []
    t = pd.read_csv(out / "results.csv")
    assert len(t) == 6 and set(t["status"]) <= {"ok", "pending"} and (t["status"] == "pending").any()
    for _, row in t.iterrows():   # every ok row has its complete point folder, and only those
        assert (out / "points" / row["point"] / "summary.json").is_file() == (row["status"] == "ok")
    assert not (out / ".lock").exists()


#: what a worker leaves in its result pipe when it is stopped, or dies, while it sends a large
#: result: a message's length (1 MiB) and its first 100 bytes
_HALF_MESSAGE = """
import concurrent.futures as cf, gc, multiprocessing.queues, os, struct, sys, time
from ahasd_sim.sweep.runner import _new_pool, _stop_workers

def write_half_message():
    (queue,) = [o for o in gc.get_objects() if isinstance(o, multiprocessing.queues.SimpleQueue)]
    os.write(queue._writer.fileno(), struct.pack("!i", 1 << 20) + bytes(100))
"""

_STOPPED_IN_MID_RESULT = _HALF_MESSAGE + """
def half_sent_result():
    write_half_message()
    time.sleep(120)   # still running when stopped

if __name__ == "__main__":
    pool = _new_pool(1)
    fut = pool.submit(half_sent_result)
    time.sleep(1.0)   # the pool's manager thread reads the message's length and waits for the rest
    if fut.done():    # the scene was not set (this Python's pool differs): say so, do not pass
        sys.exit(f"the worker did not stop in mid-message: {fut.exception()!r}")
    _stop_workers(pool)
    pool.shutdown(wait=True, cancel_futures=True)
    print("shut down")
"""

_DEAD_IN_MID_RESULT = _HALF_MESSAGE + """
def half_sent_then_dead():
    write_half_message()
    time.sleep(0.5)   # the pool's manager thread reads the message's length and waits for the rest
    os._exit(1)       # a crash (or a kill for memory) in mid-message

if __name__ == "__main__":
    pool = _new_pool(1)
    fut = pool.submit(half_sent_then_dead)
    t0 = time.monotonic()
    try:
        fut.result(timeout=45)
    except cf.process.BrokenProcessPool:
        pool.shutdown(wait=True)
        print("broken")
    except cf.TimeoutError:
        print(f"the unit never ended ({time.monotonic() - t0:.1f} s)")
        os._exit(3)
    except BaseException as exc:   # anything else: say what, for the test's message
        print(f"unexpected: {exc!r}")
        os._exit(4)
    else:
        print("the unit returned")
"""


def _run_script(tmp_path: Path, text: str, timeout_s: float) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``text`` run as a script with the simulator importable."""
    script = tmp_path / "script.py"
    script.write_text(text)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return _communicate(proc, timeout_s)


def test_a_pool_stopped_in_mid_result_shuts_down(tmp_path):
    """A worker stopped (Ctrl-C, SIGTERM) while it sends a unit's result leaves half a message;
    the pool's manager thread, reading it, used to wait for the rest forever, so the sweep never
    exited (the rare hang of test_sigterm_writes_a_consistent_results_csv). Fails by timing out
    if ``_stop_workers`` does not end that read."""
    rc, out, err = _run_script(tmp_path, _STOPPED_IN_MID_RESULT, 30)
    assert rc == 0 and out.strip() == "shut down", (rc, out, err[-4000:])


def test_a_worker_dead_in_mid_result_breaks_its_pool(tmp_path):
    """A worker that dies (a crash, a kill for memory) while it sends a result leaves half a
    message that the pool's manager thread waits on for ever: the pool never noticed the death
    and the sweep waited for the unit for ever. The pool's watcher breaks it, so the unit fails
    with BrokenProcessPool (which a sweep retries on a fresh pool). Fails without the watcher."""
    rc, out, err = _run_script(tmp_path, _DEAD_IN_MID_RESULT, 120)
    assert rc == 0 and out.strip() == "broken", (rc, out, err[-4000:])


def test_stopping_a_pool_already_shut_down_does_nothing():
    """The pool's watcher and a stop signal may both stop a pool, in either order: stopping one
    that is already shut down (its process table gone) is a no-op, not an error."""
    from ahasd_sim.sweep.runner import _new_pool, _stop_workers
    pool = _new_pool(1)
    assert pool.submit(int, "7").result() == 7
    pool.shutdown(wait=True)
    _stop_workers(pool)


def test_concurrent_runs_into_one_folder_never_mix(tmp_path):
    out = tmp_path / "run"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"extends: {PAPER}\nrun: {{trace: {TRACE}, generated_tokens: 128, kv_len_quantum_tokens: 1}}\n")
    procs = [subprocess.Popen([sys.executable, "-m", "ahasd_sim", "--config", str(cfg), "--out", str(out), "--quiet",
                               "--seed", str(seed)], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for seed in (11, 22)]
    results = [_finish(p, 300) for p in procs]
    for rc, err in results:
        assert rc == 0 or (rc == 2 and "in use by another ahasd_sim command" in err), err
    assert any(rc == 0 for rc, _ in results)
    # whichever run wrote last, every file in the folder is from that one run
    seed = json.loads((out / "summary.json").read_text())["seed"]
    assert yaml.safe_load((out / "config.resolved.yaml").read_text())["run"]["seed"] == seed
    meta = json.loads((out / "meta.json").read_text())
    from ahasd_sim.config import load_config
    from ahasd_sim.output import config_hash
    assert meta["config_sha256_12"] == config_hash(load_config(out / "config.resolved.yaml"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "run"]   # no staging folders or locks left
