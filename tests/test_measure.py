"""``python -m ahasd_sim measure gpu|moe`` (ahasd_sim/measure/): the parts without torch (option
checks, what a run measures, the byte and FLOP columns, the CSV written row by row, the time
budget, the timing loops) always; a tiny CPU run of each measurement where torch is installed.

The committed H200 files are the reference for the planning and the counts: every decode/verify
row of validation/h200_measured.csv has the weight/KV bytes and FLOPs the formulas give, and the
MoE plan produces exactly the rows of validation/h200_moe_measured.csv.
"""
from __future__ import annotations

import csv
import math
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from ahasd_sim.__main__ import _parser, main
from ahasd_sim.errors import InputError
from ahasd_sim.measure import common, gpu, moe_gpu
from ahasd_sim.paths import REPO_ROOT

CPU = SimpleNamespace(type="cpu")   # what the timing loops read of a torch.device


def _gpu_plan(*argv):
    return gpu.plan_gpu(_parser().parse_args(["measure", "gpu", *argv]))


def _read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------------- options and plan
def test_smoke_plan_shrinks_the_run_and_keeps_the_full_defaults_otherwise():
    p = _gpu_plan("--smoke")
    assert p.catalog is gpu.SMOKE_MODELS and p.models == list(gpu.SMOKE_MODELS)
    assert p.kv_lens == [128, 512] and p.ks == [1, 2, 4, 8, 16]
    assert (p.reps, p.warmup) == (5, 2) and p.eager_models == ["tiny-opt"]
    assert p.int8 and p.int8_models == p.models and p.max_len == 512 + 16 + 8
    full = _gpu_plan()
    assert full.catalog is gpu.MODELS and full.models == list(gpu.MODELS)
    assert full.kv_lens == [128, 512, 1024, 2048, 4096] and (full.reps, full.warmup) == (30, 5)
    assert full.eager_models == ["llama2-7b", "qwen2.5-coder-0.5b"] and full.out == "validation/h200_measured.csv"
    assert (full.budget_s, full.max_config_s, full.h2d, full.ceilings, full.graph) == (480.0, 3.0, True, True, True)


def test_plan_follows_the_documented_command_lines():
    # validation/README.md, run 2
    p = _gpu_plan("--no-int8", "--eager-models", "--kernel-count", "--budget-s", "240")
    assert not p.int8 and p.eager_models == [] and p.kernel_count and p.kernel_count_kv == 1024
    p = _gpu_plan("--no-bf16", "--skip-h2d", "--skip-ceilings", "--models", "llama2-13b", "--kv", "4096",
                  "--k", "16", "--budget-s", "60")
    assert p.models == [] and p.int8_models == ["llama2-13b"] and not p.h2d and not p.ceilings
    assert (p.kv_lens, p.ks, p.max_len) == ([4096], [16], 4096 + 16 + 8)
    # --smoke keeps KV lengths <= 512, or 128 if none is
    assert _gpu_plan("--smoke", "--kv", "1024", "64", "512").kv_lens == [64, 512]
    assert _gpu_plan("--smoke", "--kv", "2048").kv_lens == [128]
    assert _gpu_plan("--smoke", "--reps", "3", "--eager-models", "tiny-qwen").reps == 3
    assert _gpu_plan("--smoke", "--eager-models", "tiny-qwen").eager_models == ["tiny-qwen"]
    assert _gpu_plan("--smoke", "--int8-models", "tiny-opt").int8_models == ["tiny-opt"]


@pytest.mark.parametrize("argv, message", [
    (["--models", "llama2-7"], "--models: unknown model 'llama2-7' (did you mean 'llama2-7b'?)"),
    (["--smoke", "--models", "llama2-7b"], "--models: unknown model 'llama2-7b'; choose from tiny-opt"),
    (["--int8-models", "opt"], "--int8-models: unknown model 'opt'"),
    (["--eager-models", "tiny-opt"], "--eager-models: unknown model 'tiny-opt'"),
    (["--kv"], "--kv: expected at least one KV length"),
    (["--k"], "--k: expected at least one verify width"),
    (["--kv", "128", "-1"], "--kv: expected KV lengths >= 0, got -1"),
    (["--k", "0"], "--k: expected verify widths >= 1, got 0"),
    (["--reps", "0"], "--reps: expected an integer >= 1, got 0"),
    (["--warmup", "-1"], "--warmup: expected an integer >= 0"),
    (["--budget-s", "0"], "--budget-s: expected a finite number of seconds > 0"),
    (["--budget-s", "nan"], "--budget-s: expected a finite number of seconds > 0, got nan"),
    (["--max-config-s", "inf"], "--max-config-s: expected a finite number"),
    (["--gemm-n", "0"], "--gemm-n: expected a matrix size >= 1"),
    (["--membw-bytes", "0"], "--membw-bytes: expected a size in bytes >= 1"),
    (["--smoke-fp32"], "--smoke-fp32 needs --smoke"),
    (["--device", "gpu0"], "--device: expected cpu, cuda or cuda:N, got 'gpu0'"),
])
def test_bad_options_are_one_line_errors_before_torch_is_needed(argv, message, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)   # the checks must not need torch
    assert main(["measure", "gpu", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: measure gpu: ") and message in err and "\n" not in err


def test_without_torch_a_run_says_how_to_install_it(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(InputError, match=r"measure moe: needs PyTorch: pip install 'ahasd_sim\[measure\]'"):
        common.require_torch("measure moe")
    assert main(["measure", "gpu", "--smoke", "--out", str(tmp_path / "x.csv")]) == 2
    assert capsys.readouterr().err.strip() == \
        "error: measure gpu: needs PyTorch: pip install 'ahasd_sim[measure]'"
    assert main(["measure", "moe", "--out", str(tmp_path / "y.csv")]) == 2
    assert "measure moe: needs PyTorch" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "y.csv").exists()


def test_measure_without_a_target_and_moe_option_errors(capsys):
    assert main(["measure"]) == 2
    assert "measure: expected a target: measure gpu" in capsys.readouterr().err
    assert main(["measure", "moe"]) == 2                     # --out is required
    assert "--out" in capsys.readouterr().err
    assert main(["measure", "moe", "--out", "x.csv", "--reps", "0"]) == 2
    assert "measure moe: --reps: expected an integer >= 1, got 0" in capsys.readouterr().err


def test_wrapper_scripts_run_the_subcommand():
    """scripts/measure_gpu.py and measure_moe_gpu.py forward to the package (a run without torch
    ends in the package's one-line error, so the wrappers really reach it)."""
    for script, target in (("measure_gpu.py", "gpu"), ("measure_moe_gpu.py", "moe")):
        code = ("import runpy, sys; sys.modules['torch'] = None; "
                f"sys.argv = ['{script}', '--smoke', '--out', 'never-written.csv']; "
                f"runpy.run_path('scripts/{script}', run_name='__main__')")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == f"error: measure {target}: needs PyTorch: pip install 'ahasd_sim[measure]'"
    assert not (REPO_ROOT / "never-written.csv").exists()


def test_graph_modes_and_step_points_in_measuring_order():
    assert gpu.graph_modes("llama2-7b", True, ["llama2-7b"]) == [False, True]
    assert gpu.graph_modes("opt-1.3b", True, ["llama2-7b"]) == [True]
    assert gpu.graph_modes("llama2-7b", False, ["llama2-7b"]) == [False]
    pts = gpu.step_points([128, 512], [1, 4], [False, True])
    assert pts[:6] == [("decode", 1, 128, False), ("decode", 1, 128, True), ("verify", 1, 128, False),
                       ("verify", 1, 128, True), ("verify", 4, 128, False), ("verify", 4, 128, True)]
    assert len(pts) == 2 * 3 * 2 and pts[-1] == ("verify", 4, 512, True)
    # the committed run: 6 models x 5 KV lengths x 6 steps, graphed; eager too for 2 models
    full = _gpu_plan()
    n = sum(len(gpu.step_points(full.kv_lens, full.ks, gpu.graph_modes(m, True, full.eager_models)))
            for m in full.models)
    assert n == 6 * 5 * 6 + 2 * 5 * 6


# ---------------------------------------------------------------- byte and FLOP columns
def test_counts_match_every_step_row_of_the_committed_h200_file():
    rows = [r for r in _read(REPO_ROOT / "validation" / "h200_measured.csv") if r["kind"] in ("decode", "verify")]
    assert len(rows) > 300
    for r in rows:
        shape, kv, k = gpu.MODELS[r["model"]], int(r["kv_len"]), int(r["k_tokens"])
        quant = "int8" if r["dtype"] == "int8wo" else "none"
        wb, kvb = gpu.weight_bytes(shape, quant, 2), gpu.kv_cache_bytes(shape, kv, k, 2)
        assert (wb, kvb, wb + kvb, gpu.step_flops(shape, kv, k)) == \
            (int(r["weight_bytes"]), int(r["kv_bytes"]), int(r["bytes"]), int(r["flops"])), r
    assert {r["dtype"] for r in rows} == {"bf16", "int8wo"}


def test_weight_bytes_by_hand_for_a_tiny_tied_model():
    s = gpu.Shape("t", "llama", 8, 1, 2, 1, 16, 10, qkv_bias=True, tied_embeddings=True)
    # qkv 8x16 + bias 16; o 8x8; gate_up 8x32; down 16x8; 2 norms; final norm; tied head 10x8
    per_param = 8 * 16 + 16 + 8 * 8 + 8 * 32 + 16 * 8 + 2 * 8
    assert gpu.weight_bytes(s, "none", 2) == 2 * (per_param + 8 + 10 * 8)
    # int8: 1-byte weights, a bf16 scale per output row, and an untied int8 LM head
    int8 = (8 * 16 + 2 * (16 + 16)) + (8 * 8 + 2 * 8) + (8 * 32 + 2 * 32) + (16 * 8 + 2 * 8) + 2 * 2 * 8 + 2 * 8 \
        + (10 * 8 + 2 * 10)
    assert gpu.weight_bytes(s, "int8", 2) == int8
    assert gpu.kv_cache_bytes(s, 5, 3, 2) == 1 * 2 * 1 * 4 * 8 * 2
    assert gpu.step_flops(s, 5, 3) == 2 * (8 * 16 + 8 * 8 + 8 * 32 + 16 * 8 + 10 * 8) * 3 + 2 * 2 * 2 * 4 * 3 * 8


def test_measured_shapes_are_the_simulators_models():
    """`validate` simulates each measured row with the simulator's model of the same name."""
    from ahasd_sim.workload.models import get_model
    for name, s in gpu.MODELS.items():
        m = get_model(name)
        assert (s.d_model, s.n_layers, s.n_heads, s.n_kv_heads, s.head_dim, s.d_ffn, s.vocab) == \
            (m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ffn, m.vocab_size), name
        assert s.tied_embeddings == m.tied_embeddings and s.qkv_bias == (m.qkv_bias or m.linear_bias), name
        assert (s.arch == "opt") == (m.norm_type == "layernorm"), name
    q3 = get_model("qwen3-30b-a3b")
    assert moe_gpu.SHAPES["qwen3-30b-a3b"] == (q3.d_model, q3.d_expert_ffn, q3.n_experts, q3.n_active_experts)


# ---------------------------------------------------------------- MoE plan
def test_moe_plan_produces_exactly_the_committed_rows():
    """The (model, kind, copies, tokens, distinct experts, bytes) keys of a full run, as the plan
    makes them, are those of validation/h200_moe_measured.csv, one row each."""
    planned = []
    for name, (d, f, e, k) in moe_gpu.SHAPES.items():
        for bpp, _precision in moe_gpu.COPY_PRECISIONS:
            for n in moe_gpu.expert_copy_counts(False):
                planned.append((name, "h2d_experts", str(n), "", "", str(n * moe_gpu.expert_bytes(d, f, bpp))))
    for name, (d, f, e, k) in moe_gpu.SHAPES.items():
        for n in moe_gpu.token_counts(False):
            for u in moe_gpu.distinct_expert_counts(n, k, e):
                b = str(moe_gpu.layer_weight_bytes(u, d, f, 2))
                planned += [(name, kind, "", str(n), str(u), b) for kind in ("moe_step_loop", "moe_step_fused")]
    rows = _read(REPO_ROOT / "validation" / "h200_moe_measured.csv")
    got = [(r["model"], r["kind"], r["n_experts_copied"], r["n_tokens"], r["distinct_experts"], r["bytes"])
           for r in rows]
    assert sorted(got) == sorted(planned) and len(got) == len(set(got)) == 64
    assert list(rows[0]) == moe_gpu.CSV_COLUMNS


def test_moe_routing_and_counts():
    assert moe_gpu.distinct_expert_counts(1, 8, 128) == [8]
    assert moe_gpu.distinct_expert_counts(4, 8, 128) == [8, 16, 32]
    assert moe_gpu.distinct_expert_counts(64, 8, 64) == [8, 64]
    for n, k, u in ((1, 8, 8), (4, 8, 20), (64, 8, 128), (4, 4, 16)):
        ids = moe_gpu.routing_expert_ids(n, k, u)
        assert len(ids) == n and all(len(set(t)) == k for t in ids)   # k different experts per token
        assert {i for t in ids for i in t} == set(range(u))
    with pytest.raises(ValueError, match="cannot be hit"):
        moe_gpu.routing_expert_ids(1, 8, 9)
    assert (moe_gpu.padded_ffn(140), moe_gpu.padded_ffn(768), moe_gpu.padded_ffn(16)) == (144, 768, 16)
    assert moe_gpu.expert_bytes(2048, 768, 0.5) == 2048 * 768 * 3 // 2
    assert moe_gpu.plan_moe(SimpleNamespace(out="x", smoke=True, reps=50)).reps == moe_gpu.SMOKE_REPS


# ---------------------------------------------------------------- CSV, budget, timing
def test_quantiles_interpolate_between_order_statistics():
    assert common.quantiles([5.0, 1.0, 3.0, 2.0, 4.0]) == pytest.approx((3.0, 1.4, 4.6))
    assert common.quantiles([7.0]) == (7.0, 7.0, 7.0)
    with pytest.raises(ValueError):
        common.quantiles([])


def test_measurement_csv_flushes_each_row_as_it_is_measured(tmp_path):
    path = tmp_path / "deep" / "m.csv"
    columns = ["gpu_name", "model", "k_tokens", "latency_s_median", "latency_s_p10", "latency_s_p90",
               "n_reps", "cuda_graph", "notes"]
    with common.MeasurementCsv(path, columns, {"gpu_name": "cpu"}) as out:
        assert path.read_text().splitlines() == [",".join(columns)]   # the header is there at once
        med = out.row([3e-3, 1e-3, 2e-3], model="m1", k_tokens=4, cuda_graph=True, notes="a, b")
        assert med == pytest.approx(2e-3)
        rows = _read(path)                                             # readable before close
        assert rows == [{"gpu_name": "cpu", "model": "m1", "k_tokens": "4", "latency_s_median": "0.002",
                         "latency_s_p10": "0.0012", "latency_s_p90": "0.0028", "n_reps": "3",
                         "cuda_graph": "True", "notes": "a, b"}]
        out.row([1.0], model="m2")
        assert _read(path)[1]["k_tokens"] == "" and out.n_rows == 2   # cells not given are empty
        with pytest.raises(ValueError):
            out.row([1.0], no_such_column=1)
    with pytest.raises(ValueError, match="not columns"):
        common.MeasurementCsv(tmp_path / "n.csv", ["a"], {"b": 1})


def test_budget_expires_after_its_seconds():
    now = [100.0]
    b = common.Budget(2.5, clock=lambda: now[0])
    assert not b.expired()
    now[0] = 102.5
    assert not b.expired()
    now[0] = 102.6
    assert b.expired()


def test_time_fn_caps_repetitions_but_not_below_the_floor():
    calls = []

    def step():
        calls.append(1)
        time.sleep(0.002)

    ts = common.time_fn(step, CPU, 2, 4)
    assert len(ts) == 4 and len(calls) == 6 and all(t >= 0.0015 for t in ts)
    ts = common.time_fn(step, CPU, 2, 200, max_total_s=0.02)   # ~2 ms each: about 10 fit
    assert common.MIN_REPS_UNDER_CAP <= len(ts) <= 11
    assert len(common.time_fn(step, CPU, 1, 200, max_total_s=1e-6)) == common.MIN_REPS_UNDER_CAP
    ts = common.time_wall(step, CPU, 1, 3)
    assert len(ts) == 3 and min(ts) >= 0.0015


# ---------------------------------------------------------------- layering and import cost
def test_measure_imports_only_the_foundation():
    from test_architecture import LAYER_OF, import_graph
    targets = {b for (a, b) in import_graph() if a == "measure"}
    assert targets and all(LAYER_OF[t] == 0 for t in targets), targets


def test_building_the_parser_or_planning_imports_no_torch():
    code = ("from ahasd_sim.__main__ import _parser; a = _parser().parse_args(['measure', 'gpu', '--smoke']); "
            "from ahasd_sim.measure.gpu import plan_gpu; plan_gpu(a); import ahasd_sim.measure.moe_gpu; "
            "import sys; print(' '.join(sorted(sys.modules)))")
    mods = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              cwd=REPO_ROOT).stdout.split())
    assert "ahasd_sim.measure.gpu" in mods
    assert not {"torch", "ahasd_sim.measure.gpu_torch", "ahasd_sim.measure.moe_torch", "pandas"} & mods


# ---------------------------------------------------------------- with torch: tiny CPU runs
def test_cpu_smoke_run_writes_the_columns_validate_reads(tmp_path, capsys):
    pytest.importorskip("torch")
    from ahasd_sim.validate import REQUIRED_COLUMNS, load_measured
    out = tmp_path / "smoke.csv"
    assert main(["measure", "gpu", "--smoke", "--device", "cpu", "--models", "tiny-llama", "tiny-qwen",
                 "--kv", "128", "--k", "1", "4", "--reps", "3", "--out", str(out)]) == 0
    rows = _read(out)
    assert list(rows[0]) == gpu.CSV_COLUMNS and set(REQUIRED_COLUMNS) <= set(gpu.CSV_COLUMNS)
    keys = [(r["model"], r["dtype"], r["kind"], r["k_tokens"], r["kv_len"]) for r in rows]
    assert len(keys) == len(set(keys))                                  # one row per measurement
    bf16 = {k for k in keys if k[1] == "bf16"}
    assert bf16 == {(m, "bf16", kind, k, "128") for m in ("tiny-llama", "tiny-qwen")
                    for kind, k in (("decode", "1"), ("verify", "1"), ("verify", "4"))}
    assert {k[1] for k in keys} <= {"bf16", "int8wo"}
    for r in rows:
        med, p10, p90 = (float(r[c]) for c in ("latency_s_median", "latency_s_p10", "latency_s_p90"))
        assert 0 < p10 <= med <= p90 < 1.0 and r["n_reps"] == "3" and r["cuda_graph"] == "False"
        assert (r["gpu_name"], r["driver"], r["cuda_version"]) == ("cpu", "none", "none")
        shape = gpu.SMOKE_MODELS[r["model"]]
        quant = "int8" if r["dtype"] == "int8wo" else "none"
        assert int(r["weight_bytes"]) == gpu.weight_bytes(shape, quant, 2)
        assert int(r["bytes"]) == int(r["weight_bytes"]) + int(r["kv_bytes"])
        assert "SELFTEST_FAIL" not in r["notes"] and "selftest_rel_err=" in r["notes"]
    assert len(load_measured(out)) == len(rows)
    assert f"wrote {len(rows)} rows to {out}" in capsys.readouterr().out


def test_spent_budget_skips_the_model_points_and_keeps_the_header(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "b.csv"
    assert main(["measure", "gpu", "--smoke", "--device", "cpu", "--models", "tiny-opt", "--no-int8",
                 "--kv", "128", "--k", "1", "--budget-s", "1e-9", "--out", str(out)]) == 0
    assert _read(out) == [] and out.read_text().startswith(",".join(gpu.CSV_COLUMNS))
    assert "time budget reached: skipping rest of tiny-opt bf16" in capsys.readouterr().out


def test_built_models_have_the_counted_bytes_and_flops():
    """The formulas of the CSV columns count what DecoderModel really allocates."""
    torch = pytest.importorskip("torch")
    from ahasd_sim.measure.gpu_torch import DecoderModel, Linear
    for shape in gpu.SMOKE_MODELS.values():
        for quant in ("none", "int8"):
            with torch.no_grad():
                m = DecoderModel(shape, torch.bfloat16, torch.device("cpu"), quant, 32)
            b = lin = 0
            for L in m.layers:
                for key, v in L.items():
                    if isinstance(v, Linear):
                        b += v.weight_bytes()
                        lin += v.weight.numel()
                    elif not key.endswith("_cache"):
                        b += v.numel() * v.element_size()
            b += m.lnf_w.numel() * m.lnf_w.element_size()
            b += m.lm_head.weight_bytes() if m.lm_head is not None else m.lm_head_w.numel() * 2
            assert gpu.weight_bytes(shape, quant, 2) == b, (shape.name, quant)
            attn = shape.n_layers * 4 * shape.n_heads * shape.head_dim * 3 * (9 + 3)
            assert gpu.step_flops(shape, 9, 3) == 2 * (lin + shape.vocab * shape.d_model) * 3 + attn
            assert m.kv_bytes(9, 3) == sum(L["k_cache"][:, :, :12].numel() * 4 for L in m.layers)


def test_cpu_moe_smoke_run(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "moe.csv"
    assert main(["measure", "moe", "--smoke", "--out", str(out)]) == 0
    rows = _read(out)
    assert list(rows[0]) == moe_gpu.CSV_COLUMNS and len(rows) == 24
    d, f, e, k = moe_gpu.SMOKE_LAYER
    steps = [r for r in rows if r["kind"].startswith("moe_step")]
    assert len(steps) == 2 * 2 * sum(len(moe_gpu.distinct_expert_counts(n, k, e)) for n in (1, 4))
    for r in rows:
        assert float(r["latency_s_median"]) > 0 and r["n_reps"] == "3" and r["dtype"] == "fp32"
    for r in steps:
        assert int(r["bytes"]) == moe_gpu.layer_weight_bytes(int(r["distinct_experts"]), d, f, 4)
        if r["kind"] == "moe_step_loop":   # the fused layer agrees with the loop
            assert float(r["notes"].split("max rel diff to fused ")[1].split(";")[0]) < 1e-5
    assert not any(math.isnan(float(r["latency_s_p90"])) for r in rows)


@pytest.mark.parametrize("target", ["gpu", "moe"])
def test_a_shipped_file_is_not_overwritten_without_force(target, capsys, monkeypatch):
    """measure's default --out (gpu) is the shipped H200 file: refused before torch is needed, and
    the file is untouched; --force passes the check (then the missing torch stops the run here)."""
    monkeypatch.setitem(sys.modules, "torch", None)
    shipped = REPO_ROOT / "validation" / "h200_measured.csv"
    before = shipped.read_bytes()
    argv = ["measure", target, "--out", str(shipped)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is a file shipped with ahasd_sim" in err and "--force" in err and "\n" not in err.strip()
    assert main([*argv, "--force"]) == 2
    assert "needs PyTorch" in capsys.readouterr().err
    assert shipped.read_bytes() == before
