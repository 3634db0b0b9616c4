"""Trace format: loader/validator errors, Trace API, replay helpers (synthetic traces)."""

import json
import zipfile

import numpy as np
import pytest

from ahasd_sim.traces.format import (FORMAT_VERSION, Trace, TraceError, load_trace,
                                       replay_fixed_k, write_trace)


def make_columns(n_per_prompt=(12, 9, 15), K=4, L_max=3, seed=0):
    rng = np.random.default_rng(seed)
    n = sum(n_per_prompt)
    pid = np.concatenate([np.full(m, i) for i, m in enumerate(n_per_prompt)])
    pos = np.concatenate([np.arange(m) for m in n_per_prompt])
    tgt = rng.integers(0, 100, n)
    accept = rng.random(n) < 0.6
    drf_top1 = np.where(accept, tgt, (tgt + 1) % 100)
    topk = np.stack([drf_top1] + [(drf_top1 + j + 1) % 100 for j in range(K - 1)], axis=1)
    rl = np.where(accept, 0, rng.integers(1, L_max + 1, n))
    m = int(rl.sum())
    cols = dict(
        prompt_id=pid, category=pid % 2, pos_in_response=pos,
        prompt_len=np.full(n, 20), tgt_tok=tgt, tgt_p=rng.random(n), tgt_H=rng.random(n) * 3,
        drf_tok=drf_top1, drf_top1=drf_top1, drf_p_top1=rng.random(n), drf_p_tgt=rng.random(n),
        drf_p_tok=rng.random(n), tgt_p_drf=rng.random(n), drf_H=rng.random(n) * 4,
        match=accept, accept=accept, alpha=rng.random(n), u=np.full(n, np.nan),
        topk_ids=topk, topk_p=np.sort(rng.random((n, K)), axis=1)[:, ::-1] / K,
        rollout_offset=np.r_[0, np.cumsum(rl)[:-1]], rollout_len=rl,
        rollout_tok=rng.integers(0, 100, m), rollout_p=rng.random(m), rollout_H=rng.random(m) * 2,
    )
    header = dict(mode="greedy", categories=["a", "b"], top_k=K, L_max=L_max,
                  prompts=[{"id": f"p{i}", "category": ["a", "b"][i % 2]} for i in range(len(n_per_prompt))])
    return header, cols


@pytest.fixture
def good(tmp_path):
    header, cols = make_columns()
    path = tmp_path / "good.npz"
    write_trace(path, header, cols)
    return path, header, cols


def raw_write(path, header, cols):
    """Write without validation (to build broken files)."""
    hdr = dict(header)
    hdr.setdefault("format", "ahasd-trace")
    hdr.setdefault("format_version", FORMAT_VERSION)
    hdr.setdefault("n_positions", len(cols["tgt_tok"]))
    np.savez_compressed(path, header_json=np.array(json.dumps(hdr)), **cols)


def one_line(err):
    s = str(err.value)
    assert "\n" not in s
    assert isinstance(err.value, ValueError)
    return s


def test_roundtrip(good):
    path, header, cols = good
    tr = load_trace(path)
    assert len(tr) == 36 and tr.n_prompts == 3
    assert tr.header["format_version"] == FORMAT_VERSION
    np.testing.assert_array_equal(tr.accept, cols["accept"])
    assert tr.drf_H.dtype == np.float32 and tr.topk_ids.shape == (36, 4)
    assert tr["tgt_tok"] is tr.tgt_tok
    with pytest.raises(AttributeError):
        tr.no_such_column


def test_missing_file(tmp_path):
    with pytest.raises(TraceError) as e:
        load_trace(tmp_path / "nope.npz")
    assert "nope.npz" in one_line(e)


def test_garbage_file(tmp_path):
    p = tmp_path / "garbage.npz"
    p.write_bytes(b"this is not a zip archive at all" * 10)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert "garbage.npz" in one_line(e)


def test_truncated_file(good, tmp_path):
    path, _, _ = good
    data = path.read_bytes()
    p = tmp_path / "trunc.npz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError) as e:
        load_trace(p)
    s = one_line(e)
    assert "trunc.npz" in s and "truncated" in e.value.message


def test_truncated_column(good, tmp_path):
    _, header, cols = good
    cols = dict(cols)
    cols["drf_H"] = cols["drf_H"][:-5]
    p = tmp_path / "short.npz"
    raw_write(p, header, cols)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    s = one_line(e)
    assert "short.npz" in s and "'drf_H'" in s


def test_corrupt_column_bytes(good, tmp_path):
    path, _, _ = good
    data = bytearray(path.read_bytes())
    info = zipfile.ZipFile(path).getinfo("drf_H.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 8
    for i in range(start, start + 40):
        data[i] ^= 0x5A
    p = tmp_path / "corrupt.npz"
    p.write_bytes(bytes(data))
    with pytest.raises(TraceError) as e:
        load_trace(p)
    s = one_line(e)
    assert "corrupt.npz" in s and "'drf_H'" in s


def test_wrong_version(good, tmp_path):
    _, header, cols = good
    p = tmp_path / "v99.npz"
    raw_write(p, dict(header, format_version=99), cols)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    s = one_line(e)
    assert "v99.npz" in s and "format_version" in s and "99" in s


@pytest.mark.parametrize("col,val,what", [("tgt_p", 1.5, "[0, 1]"), ("alpha", -0.2, "[0, 1]"),
                                          ("topk_p", 2.0, "[0, 1]"), ("rollout_p", 1.1, "[0, 1]"),
                                          ("drf_H", -1.0, "entropies >= 0 nats")])
def test_out_of_range(good, tmp_path, col, val, what):
    _, header, cols = good
    cols = {k: v.copy() for k, v in cols.items()}
    cols[col].flat[3] = val
    p = tmp_path / f"bad_{col}.npz"
    raw_write(p, header, cols)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    s = one_line(e)
    assert f"bad_{col}.npz" in s and f"'{col}'" in s and what in s


def test_missing_column_and_bad_offsets(good, tmp_path):
    _, header, cols = good
    c2 = {k: v for k, v in cols.items() if k != "accept"}
    p = tmp_path / "noacc.npz"
    raw_write(p, header, c2)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert "'accept'" in one_line(e)
    c3 = {k: v.copy() for k, v in cols.items()}
    i = int(np.flatnonzero(c3["rollout_len"])[-1])
    c3["rollout_offset"][i] = 10_000
    p = tmp_path / "off.npz"
    raw_write(p, header, c3)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert "'rollout_offset'" in one_line(e)


def test_writer_refuses_invalid(tmp_path):
    header, cols = make_columns()
    cols["match"] = ~cols["match"]
    with pytest.raises(TraceError):
        write_trace(tmp_path / "x.npz", header, cols)
    assert not (tmp_path / "x.npz").exists()


def test_take_and_offpath(good):
    path, _, cols = good
    tr = load_trace(path)
    t1 = tr.take(20)
    assert len(t1) == 20 and isinstance(t1, Trace)
    np.testing.assert_array_equal(t1.tgt_tok, cols["tgt_tok"][:20])
    t2 = tr.take(10, start_prompt=1)  # prompt 1 starts at 12
    np.testing.assert_array_equal(t2.accept, cols["accept"][12:22])
    for t in range(10):  # rollouts re-based correctly
        for a, b in zip(t2.offpath(t), tr.offpath(12 + t)):
            np.testing.assert_array_equal(a, b)
    assert len(tr.take(36)) == 36 and len(tr.take(0)) == 0
    with pytest.raises(TraceError) as e:
        tr.take(37)
    assert "never looped" in one_line(e)
    with pytest.raises(TraceError):
        tr.take(25, start_prompt=1)
    rej = np.flatnonzero(~cols["accept"])[0]
    tok, p, H = tr.offpath(int(rej))
    assert 1 <= tok.size <= tr.L_max and tok.size == p.size == H.size
    acc = np.flatnonzero(cols["accept"])[0]
    assert tr.offpath(int(acc))[0].size == 0


def test_replay_fixed_k():
    acc = np.array([1, 1, 0, 1, 1, 1, 1, 0, 0, 1], bool)
    # k=2: t0: 2 acc -> 3; t3: 2 -> 3; t6: run 1 -> 2; t8: 0 -> 1; t9: run 1, cut at end -> 1
    assert replay_fixed_k(acc, 2).tolist() == [3, 3, 2, 1, 1]
    assert replay_fixed_k(acc, 8).tolist() == [3, 5, 1, 1]
    assert replay_fixed_k(acc, 1).tolist() == [2, 1, 2, 2, 1, 1, 1]
    assert sum(replay_fixed_k(acc, 3)) == acc.size


def test_stats_tables_and_run_stats(good, tmp_path, capsys):
    from ahasd_sim.traces.stats import compute_stats, run_stats
    path, _, cols = good
    st = compute_stats(path)
    assert {"per_category", "accept_len", "entropy_vs_accept", "offpath"} <= set(st)
    assert list(st["accept_len"].index) == list(range(1, 9))
    # every round commits between 1 and k+1 tokens and rounds cover all positions of each prompt
    for k, row in st["accept_len"].iterrows():
        probs = [row[f"P(len={j})"] for j in range(1, k + 2)]
        assert abs(sum(probs) - 1) < 1e-9
    assert abs(st["per_category"].loc["ALL", "accept_rate"] - cols["accept"].mean()) < 1e-12
    out = tmp_path / "stats"
    assert run_stats(path, str(out)) == 0
    assert (out / "good_stats.png").exists() and (out / "good_per_category.csv").exists()
    assert "per_category" in capsys.readouterr().out
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"nope")
    assert run_stats(bad) == 2


def test_runs_report_the_sha256_of_the_trace_file_they_read():
    # summary.json's trace_sha256 identifies the input; the shipped chain traces carry no hash
    # in their header, so it is the file's own SHA-256 (it was null before)
    import hashlib
    from pathlib import Path

    from ahasd_sim.config import load_config
    from ahasd_sim.simulation import load_run_trace, run_simulation
    root = Path(__file__).resolve().parent.parent
    trace = root / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
    want = hashlib.sha256(trace.read_bytes()).hexdigest()
    t = load_trace(trace)
    assert t.file_sha256 == want and t.take(16).file_sha256 == want
    cfg = load_config(root / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={trace}", "run.generated_tokens=32", "run.windows=2", "run.timeline=false"])
    assert run_simulation(cfg, load_run_trace(cfg)).summary["trace_sha256"] == want
    assert Trace(t.columns, t.header).file_sha256 is None     # built in memory: no file to name
