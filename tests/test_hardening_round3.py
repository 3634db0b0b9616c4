"""Issue 33, remaining classes: errors blame the place that set the key (``--set`` or FILE),
nonsense values are refused with their range's reason, ``--dry-run`` refuses exactly what the
run refuses, study folders are owned, staging is cleaned, shipped data is found from an
installed copy. Each bad input: exit 2, one line naming the source and key, no traceback,
nothing written."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest

from ahasd_sim.__main__ import main
from test_hw_helpers import one_line_error as _one_line_error

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "hw_configs" / "ahasd_mobile.yaml"
HYCO = ROOT / "hw_configs" / "hyco_mobile_cloud.yaml"
MOE = ROOT / "hw_configs" / "moe_offload.yaml"
NO_PIM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5.yaml"
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
PAPER_PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"


# ---------------------------------------------------------------- 1. blame the right place
ENTRY_POINTS = {
    "run": lambda cfg, out: ["--config", str(cfg), "--jobs", "1", "--out", str(out)],
    "run --dry-run": lambda cfg, out: ["--config", str(cfg), "--dry-run", "--out", str(out)],
    "compare --dry-run": lambda cfg, out: ["compare", "--config", str(cfg), "--modes", "ahasd,operator_sync",
                                           "--dry-run", "--out", str(out)],
}

BAD_SETS = [
    ("run.mode=ahsd", "run.mode", "unknown mode 'ahsd' (did you mean 'ahasd'?)"),
    ("pim.ranks=abc", "pim.ranks", "expected an integer, got 'abc'"),
    ("foo.bar=1", "foo", "unknown section"),
    ("run.trace_start_prompt=100000", "run.trace_start_prompt", "prompt 100000 is out of range"),
    ("run.generated_tokens=100000", "run.generated_tokens", "100000 tokens do not fit in the trace (11449 positions)"),
    ("run.generated_tokens=1e8", "run.generated_tokens", "expected <= 1048576.0, got 100000000 (a count above 2^20"),
    ("run.windows=100000", "run.windows", "at most 10; lower run.windows"),
    ("npu.freq_ghz=1e300", "npu.freq_ghz", "expected <= 5.0 GHz, got 1e+300 (mobile NPUs clock at 1-2 GHz"),
    ("memory.channels=1e8", "memory.channels", "expected <= 64, got 100000000 (phones have 2-8 x16 channels"),
    ("memory.background_mw_per_channel=1e9", "memory.background_mw_per_channel",
     "expected <= 1000.0 mW, got 1000000000.0 (1 W per channel"),
]


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("item, key, fragment", BAD_SETS, ids=[b[0] for b in BAD_SETS])
def test_a_key_set_with_set_is_blamed_on_set(tmp_path, capsys, entry, item, key, fragment):
    """The same bad value given with --set names --set (not the config file) and the key."""
    if entry.startswith("compare") and key == "run.mode":
        pytest.skip("compare --modes replaces run.mode")
    out = tmp_path / "o"
    rc = main([*ENTRY_POINTS[entry](MAIN, out), "--set", item])
    _one_line_error(capsys, rc, f"error: --set: {key}: ", fragment)
    assert not out.exists()


@pytest.mark.parametrize("text, key", [("run: {trace_start_prompt: 100000}", "run.trace_start_prompt"),
                                       ("run: {windows: 100000}", "run.windows"),
                                       ("memory: {channels: 100000000}", "memory.channels")])
def test_the_same_key_set_in_a_file_is_blamed_on_that_file(tmp_path, capsys, text, key):
    f = tmp_path / "mine.yaml"
    f.write_text(f"extends: {MAIN}\n{text}\n")
    rc = main(["--config", str(f), "--dry-run", "--out", str(tmp_path / "o")])
    _one_line_error(capsys, rc, f"error: {f}: {key}: ")


def test_loader_errors_name_the_key_that_chose_the_file(tmp_path, capsys):
    """A tree trace that is not one, and a cloud platform file with a bad value, name
    moe.tree_trace / cloud.platform_config and where that key was set."""
    bad = tmp_path / "notatrace.npz"
    bad.write_bytes(b"garbage")
    rc = main(["--config", str(MOE), "--dry-run", "--set", f"moe.tree_trace={bad}", "--out", str(tmp_path / "o")])
    _one_line_error(capsys, rc, str(bad), "(from moe.tree_trace in --set)")
    cloud = tmp_path / "cloud.yaml"
    cloud.write_text(f"extends: {ROOT / 'hw_configs' / 'platform_server_h200_pcie5.yaml'}\ngpu: {{mem_bw_gb_s: -1}}\n")
    rc = main(["--config", str(HYCO), "--dry-run", "--set", f"cloud.platform_config={cloud}",
               "--out", str(tmp_path / "o")])
    _one_line_error(capsys, rc, f"{cloud}: gpu.mem_bw_gb_s: expected > 0",
                    "(the cloud platform chosen by cloud.platform_config in --set)")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, fragment", [
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["version"], "unknown command 'version' (did you mean --version?)"),
    (["comapre"], "unknown command 'comapre' (did you mean 'compare'?)"),
    (["--config", ""], "--config: expected a file name, got an empty string"),
    (["sweep", "--config", ""], "--config: expected a file name, got an empty string"),
])
def test_unknown_commands_and_empty_config_names(capsys, argv, fragment):
    _one_line_error(capsys, main(argv), fragment)


# ---------------------------------------------------------------- 2. silent nonsense
def _fields(cls, prefix=""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            yield from _fields(tp, f"{prefix}{f.name}.")
        else:
            yield prefix + f.name, tp, dict(f.metadata)


def test_every_number_has_a_range_with_a_reason_and_every_list_a_length():
    """Schema invariant: no number is unbounded above (the bound has its reason), none is
    unbounded below, and every list has a length range."""
    from ahasd_sim.config.loader import _ensure_sections
    bad = []
    for name, cls in _ensure_sections().items():
        for key, tp, meta in _fields(cls, name + "."):
            args = set(typing.get_args(tp)) - {type(None)} or {tp}
            if meta.get("choices"):
                continue
            if typing.get_origin(tp) in (list, tuple):
                if meta.get("length") is None:
                    bad.append(f"{key}: list without a length range")
                if args & {int, float} and (meta.get("item_ge") is None or meta.get("item_le") is None):
                    bad.append(f"{key}: list of numbers without item bounds")
                continue
            if args & {int, float}:
                if meta.get("le") is None and meta.get("lt") is None:
                    bad.append(f"{key}: no upper bound")
                elif not meta.get("bound_reason"):
                    bad.append(f"{key}: upper bound without a reason")
                if all(meta.get(op) is None for op in ("ge", "gt")):
                    bad.append(f"{key}: no lower bound")
    assert not bad, bad


def test_a_unit_without_a_ceiling_is_a_schema_error():
    from ahasd_sim.config.fields import param
    with pytest.raises(ValueError, match="no ceiling"):
        param(1.0, doc="x", unit="furlongs")
    with pytest.raises(ValueError, match="length"):
        param([1], doc="x")


@pytest.mark.parametrize("argv, fragment", [
    (["--config", str(MAIN), "--jobs", "0", "--dry-run"], "argument --jobs: expected an integer >= 1, got 0"),
    (["--config", str(MAIN), "--jobs", "-1"], "argument --jobs: expected an integer >= 1, got -1"),
    (["sweep", "--config", str(ROOT / "hw_configs" / "sweeps" / "smoke.yaml"), "--workers", "0"],
     "argument --workers: expected an integer >= 1, got 0"),
    (["optimize", "--config", "x.yaml", "--workers", "-1"], "argument --workers: expected an integer >= 1, got -1"),
    (["optimize", "--config", "x.yaml", "--trials", "0"], "argument --trials: expected an integer >= 1, got 0"),
])
def test_process_and_trial_counts_below_one_are_refused(tmp_path, capsys, argv, fragment):
    _one_line_error(capsys, main([*argv, "--out", str(tmp_path / "o")]), fragment)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", ["", "# only a comment\n\n", "---\n"])
def test_empty_or_comment_only_config_is_an_error(tmp_path, capsys, text):
    f = tmp_path / "empty.yaml"
    f.write_text(text)
    rc = main(["--config", str(f), "--out", str(tmp_path / "o")])
    _one_line_error(capsys, rc, f"{f}: holds no settings (empty or only comments)")
    assert not (tmp_path / "o").exists()
    # `{}` says "every default" on purpose
    from ahasd_sim.config import load_config
    f.write_text("{}\n")
    assert load_config(f).run.generated_tokens == 1024


@pytest.mark.parametrize("cfg, item, fragment", [
    (MOE, "tree_policy.eagle_fixed.branching=[]", "--set: tree_policy.eagle_fixed.branching: expected a list of "
                                                  "1 to 64 items, got 0"),
    (MOE, "tree_policy.eagle_fixed.branching=[3, -1]", "--set: tree_policy.eagle_fixed.branching[1]: expected >= 1"),
    (HYCO, "hyco.options=[]", "--set: hyco.options: expected a list of 1 to 3 items, got 0"),
    (HYCO, "hyco.options=[split, foo]", "--set: hyco.options[1]: expected one of split, cloud_sd, cloud_ar"),
    (HYCO, "hyco.skip_max_entropy_nats=-5", "--set: hyco.skip_max_entropy_nats: expected >= -1.0 nats, got -5.0 "
                                            "(any value below 0 disables skipping"),
    (HYCO, "hyco.tpot_slo_ms=-1", "--set: hyco.tpot_slo_ms: expected > 0"),
    (HYCO, "policy.banditspec.arms=[]", "--set: policy.banditspec.arms: expected a list of 1 to 256 items"),
    (MAIN, "policy.adaedl.lambda0=-0.5", "--set: policy.adaedl.lambda0: expected >= 0.0"),
])
def test_empty_or_negative_tree_and_cloud_options(tmp_path, capsys, cfg, item, fragment):
    rc = main(["--config", str(cfg), "--dry-run", "--set", item, "--out", str(tmp_path / "o")])
    _one_line_error(capsys, rc, fragment)


@pytest.mark.parametrize("n, fragment", [(-4, "expected 0 or a power of two"), (3, "expected 0 or a power of two"),
                                         (1, "at least 2 samples"), (2 ** 17, "at most 65536 samples")])
def test_nonsense_sobol_settings(n, fragment):
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.dse.folders import check_sobol_samples
    with pytest.raises(InputError, match=fragment.replace("(", r"\(")):
        check_sobol_samples(n, 8, "--sobol-samples")
    for ok in (0, 2, 16, 2 ** 16):
        check_sobol_samples(ok, 8, "--sobol-samples")


def _trace_with_models(tmp_path, name, models):
    d = dict(np.load(SMOKE, allow_pickle=False))
    h = json.loads(str(d["header_json"]))
    h["models"] = models
    d["header_json"] = np.array(json.dumps(h))
    p = tmp_path / f"{name}.npz"
    np.savez(p, **d)
    return p, h


def test_a_trace_recorded_by_a_swapped_or_other_pair_warns(tmp_path, capsys):
    h = json.loads(str(np.load(SMOKE)["header_json"]))
    m = h["models"]
    swapped, _ = _trace_with_models(tmp_path, "swapped", {"drafter": m["target"], "target": m["drafter"]})
    rc = main(["--config", str(MAIN), "--dry-run", "--set", f"run.trace={swapped}", "--set", "run.windows=1",
               "--set", "run.generated_tokens=48", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 0 and "drafter and target swapped?" in err and "--set: run.trace" in err, err
    other = {"drafter": {**m["drafter"], "name": "X-0.1B", "sha256": "0" * 64},
             "target": {**m["target"], "name": "X-1B", "sha256": "1" * 64}}
    tune, _ = _trace_with_models(tmp_path, "other", other)
    rc = main(["--config", str(MAIN), "--dry-run", "--set", f"tuning.trace={tune}", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 0 and "the PIM placement is chosen on another pair's acceptance" in err, err
    # the shipped pair of traces warns about nothing
    rc = main(["--config", str(MAIN), "--dry-run", "--out", str(tmp_path / "o")])
    assert rc == 0 and "warning" not in capsys.readouterr().err


def test_models_that_do_not_fit_lpddr5_without_pim(tmp_path, capsys):
    """llama2-7b 6.3 GiB + llama2-13b 12.1 GiB of INT8 weights: the target alone (autoregressive)
    fits 13 GiB, both (a speculative mode) do not; 8 GiB holds neither."""
    rc = main(["--config", str(NO_PIM), "--dry-run", "--set", "memory.capacity_gib=8", "--out", str(tmp_path / "o")])
    _one_line_error(capsys, rc, "--set: memory.capacity_gib: the weights (llama2-13b 12.1 GiB) do not fit the 8 GiB")
    from ahasd_sim.config import load_config
    from ahasd_sim.config.errors import ConfigError
    from ahasd_sim.modes import MODES
    from ahasd_sim.simulation import build_platform, check_models_fit_memory, mode_and_models
    cfg = load_config(NO_PIM, ["memory.capacity_gib=13"])
    mode_cls, d, t = mode_and_models(cfg)
    platform = build_platform(cfg, mode_cls)
    check_models_fit_memory(cfg, platform, MODES["autoregressive"], d, t)      # 12.1 <= 13
    both = type("Both", (), {"name": "both"})
    with pytest.raises(ConfigError, match=r"llama2-7b 6.3 GiB \+ llama2-13b 12.1 GiB"):
        check_models_fit_memory(cfg, platform, both, d, t)                     # 18.4 > 13


# ---------------------------------------------------------------- 3. dry run == run
DRY_VS_RUN = [
    (HYCO, ["hyco.options=[]"], "hyco.options"),
    (HYCO, ["cloud.platform_config=nope.yaml"], "cloud.platform_config: platform file 'nope.yaml' not found"),
    (MOE, ["moe.tree_trace=nope.npz"], "moe.tree_trace: tree trace 'nope.npz' not found"),
    (MOE, ['moe.tree_trace=""'], "moe.tree_trace: mode moe_offload needs a tree trace file"),
    (MOE, ["moe.cache_capacity=1.5"], "moe.cache_capacity: a fraction must be <= 1"),
    (MAIN, ["run.windows=100000"], "run.windows"),
    (MAIN, ["run.policy=eagle_fixed"], "run.policy: policy 'eagle_fixed' selects draft trees"),
    (NO_PIM, ["memory.capacity_gib=8"], "memory.capacity_gib"),
]


@pytest.mark.parametrize("cfg, sets, fragment", DRY_VS_RUN, ids=[f"{c.stem}-{s[0]}" for c, s, _ in DRY_VS_RUN])
def test_dry_run_refuses_exactly_what_the_run_refuses(tmp_path, capsys, cfg, sets, fragment):
    argv = ["--config", str(cfg), *[x for s in sets for x in ("--set", s)], "--jobs", "1"]
    rc_dry = main([*argv, "--dry-run", "--out", str(tmp_path / "d")])
    dry = _one_line_error(capsys, rc_dry, f"--set: {fragment}")
    rc_run = main([*argv, "--out", str(tmp_path / "r")])
    run = _one_line_error(capsys, rc_run)
    assert run == dry
    assert not (tmp_path / "d").exists() and not (tmp_path / "r").exists()


# ---------------------------------------------------------------- 4. traces record
def test_traces_record_help_and_missing_arguments(capsys):
    assert main(["traces", "record", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--kind chain" in out and "--kind tree" in out
    for kind in ("chain", "tree"):
        _one_line_error(capsys, main(["traces", "record", "--kind", kind]), "required: --work-dir")
    _one_line_error(capsys, main(["traces", "record"]), "expected --kind chain or --kind tree")


# ---------------------------------------------------------------- 5. study folders
STUDY = f"""name: {{name}}
base:
  config: {PAPER_PLATFORM}
  set: {{{{run.trace: {SMOKE}, run.generated_tokens: 16, run.timeline: false, run.windows: 1}}}}
runs:
  ahasd: {{{{run.mode: ahasd}}}}
space:
  pim.ranks: {{{{choices: [{{ranks}}]}}}}
objectives:
  - {{{{name: tps, metric: throughput_tok_s, run: ahasd, direction: maximize}}}}
sampler: grid
trials: 1
"""


def _study(tmp_path, name="mine", ranks="16"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(STUDY.format(name=name, ranks=ranks))
    return p


def _listing(d: Path):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


@pytest.mark.parametrize("command", ["optimize", "sensitivity"])
@pytest.mark.parametrize("setup, fragment", [
    ("other-study", "holds study 'other', not 'mine'"),
    ("sweep", "is a sweep folder (it holds sweep.json)"),
    ("foreign", "holds files that are not a study's (notes.txt, thesis.tex)"),
])
def test_study_commands_refuse_folders_they_do_not_own(tmp_path, capsys, command, setup, fragment):
    pytest.importorskip("optuna")
    out = tmp_path / "folder"
    out.mkdir()
    if setup == "other-study":
        con = sqlite3.connect(out / "study.db")
        con.execute("CREATE TABLE studies (study_id INTEGER, study_name TEXT)")
        con.execute("INSERT INTO studies VALUES (1, 'other')")
        con.commit()
        con.close()
    elif setup == "sweep":
        (out / "sweep.json").write_text("{}")
        (out / "points").mkdir()
    else:
        (out / "notes.txt").write_text("mine")
        (out / "thesis.tex").write_text("mine")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    extra = ["--sobol-samples", "0"] if command == "sensitivity" else []
    rc = main([command, "--config", str(_study(tmp_path)), "--workers", "1", "--no-progress", "--out", str(out),
               *extra])
    _one_line_error(capsys, rc, f"--out {out}: {fragment}")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_trial_failing_at_evaluation_is_named_on_stderr(tmp_path, capsys, monkeypatch):
    """A trial whose run fails when simulated (injected: a design that does not fit memory is
    infeasible since issue 26, not a failure) is named on stderr, one line, and the exit is 1."""
    pytest.importorskip("optuna")
    import ahasd_sim.dse.evaluate as ev
    real = ev.finish

    def fail(study, pt, *a, **k):
        real(study, pt, *a, **k)
        pt.values, pt.error = None, "run 'ahasd' failed: injected pim.ranks fault"

    monkeypatch.setattr(ev, "finish", fail)
    rc = main(["optimize", "--config", str(_study(tmp_path, "fails")), "--workers", "1", "--no-progress",
               "--out", str(tmp_path / "st")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert len(err) == 1 and err[0].startswith("error: trial 0 failed: ") and "pim.ranks" in err[0], err


def test_a_design_that_does_not_fit_is_infeasible_not_failed(tmp_path, capsys):
    """pim.ranks 2 cannot hold llama2-7b + llama2-13b: the trial is infeasible (told to the sampler
    as a constraint), which is no failure."""
    pytest.importorskip("optuna")
    rc = main(["optimize", "--config", str(_study(tmp_path, "nofit", ranks="2")), "--workers", "1", "--no-progress",
               "--out", str(tmp_path / "st")])
    out = capsys.readouterr()
    assert rc == 0 and "infeasible" in out.out and not out.err.strip(), out


def test_stale_point_staging_is_cleaned_by_the_next_owner(tmp_path):
    from ahasd_sim.dse.folders import clean_stale_points
    pt = tmp_path / "points" / "abc123"
    (pt / ".staging-x1").mkdir(parents=True)
    (pt / ".staging-x1" / "summary.json").write_text("{}")
    (pt / ".running").write_text("")
    (pt / "summary.json").write_text("{}")
    clean_stale_points(tmp_path / "points")
    assert _listing(pt) == ["summary.json"]


# ---------------------------------------------------------------- 6. output folders
def test_symlinked_out_is_written_where_it_points_and_leaves_nothing_beside_the_link(tmp_path, smoke_cfg_file):
    target = tmp_path / "real"
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    for _ in range(2):   # a new folder, then replacing a run folder
        assert main(["--config", str(smoke_cfg_file), "--set", "run.windows=1", "--jobs", "1", "--quiet",
                     "--out", str(link)]) == 0
        assert link.is_symlink() and (target / "summary.json").is_file()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real", "smoke.yaml"]


def test_a_failed_write_names_the_folder_and_keeps_the_previous_content(tmp_path):
    import errno

    from ahasd_sim.config.errors import OutputError
    from ahasd_sim.outdir import OutputFolder
    out = tmp_path / "run"
    with OutputFolder(out, "run") as f:
        (f.stage / "summary.json").write_text("old")
        f.commit()
    with pytest.raises(OutputError, match=rf"--out {out}: cannot write the results: No space left on device"):
        with OutputFolder(out, "run") as f:
            (f.stage / "summary.json").write_text("new, half")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert (out / "summary.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


# ---------------------------------------------------------------- 7. installed copy
def test_shipped_data_lookup_prefers_the_checkout_then_the_installed_copy(tmp_path, monkeypatch):
    from ahasd_sim import paths
    data = tmp_path / "_data"
    (data / "validation" / "peers").mkdir(parents=True)
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path / "no-checkout")
    monkeypatch.setattr(paths, "INSTALLED_DATA", data)
    assert paths.data_file("validation/peers") == data / "validation" / "peers"
    assert paths.data_file("validation/none.csv") == data / "validation" / "none.csv"   # names the place


def test_validate_peers_from_another_folder_with_an_installed_copy(tmp_path):
    """The package copied alone (no checkout around it) with its data under ahasd_sim/_data, as
    `pip install .` lays it out, run from an unrelated folder."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "ahasd_sim", site / "ahasd_sim", ignore=shutil.ignore_patterns("__pycache__", "_data"))
    (site / "ahasd_sim" / "_data").mkdir()
    for d in ("hw_configs", "traces", "validation"):
        (site / "ahasd_sim" / "_data" / d).symlink_to(ROOT / d)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    res = subprocess.run([sys.executable, "-m", "ahasd_sim", "validate", "--peers"], cwd=elsewhere, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "SCALE-Sim" in res.stdout or "scalesim" in res.stdout.lower()


# ---------------------------------------------------------------- 8. time limit bottleneck
def test_time_limit_names_the_network_link_when_it_is_the_limit(tmp_path, capsys):
    """1 kbit/s each way: the cloud's verdicts take seconds; the GPU and the phone idle."""
    rc = main(["--config", str(HYCO), "--set", "run.mode=cloud_autoregressive", "--set", "network.uplink_mbps=0.001",
               "--set", "network.downlink_mbps=0.001", "--set", "run.max_sim_time_s=5", "--set", "run.windows=1",
               "--set", "run.generated_tokens=64", "--jobs", "1", "--out", str(tmp_path / "o")])
    _one_line_error(capsys, rc, "--set: run.max_sim_time_s:", "bottleneck: network link")
    assert not (tmp_path / "o").exists()


def test_network_in_flight_time_is_the_union_of_message_intervals():
    """Messages [0, 2] and [1, 3] overlap (3 s), [5, 6] adds 1 s; clipped at end 5.5 -> 3.5 s."""
    from ahasd_sim.hw.network import Delivery, NetworkSession
    s = NetworkSession.__new__(NetworkSession)
    s.deliveries = [Delivery("up", 1, 0.0, 0.0, 1.0, 2.0), Delivery("down", 1, 1.0, 1.0, 2.0, 3.0),
                    Delivery("up", 1, 5.0, 5.0, 5.5, 6.0)]
    assert s.in_flight_s(10.0) == pytest.approx(4.0)
    assert s.in_flight_s(5.5) == pytest.approx(3.5)
    assert s.in_flight_s(0.5) == pytest.approx(0.5)


# ---------------------------------------------------------------- 9. figures (artists)
def _capture(monkeypatch, module):
    figs = []
    monkeypatch.setattr(module, "save_figure", lambda fig, out: figs.append(fig) or [])
    return figs


def test_plot_sweep_ticks_sit_on_the_swept_values(monkeypatch, tmp_path):
    """x values 8, 16, 32 are ticked exactly there (they used to get 9, 12, ..., 33), linear and log."""
    import pandas as pd

    from ahasd_sim.plots import sweep_plots
    df = pd.DataFrame({"ahasd.max_verify_tokens": [8, 16, 32] * 2, "variant": ["a"] * 3 + ["b"] * 3,
                       "tokens_per_j": [1.0, 2.0, 3.0, 1.5, 2.5, 3.5], "status": ["ok"] * 6})
    figs = _capture(monkeypatch, sweep_plots)
    for logx in (False, True):
        sweep_plots.lines(df, "ahasd.max_verify_tokens", "tokens_per_j", tmp_path / "l", hue="variant", logx=logx)
        ax = figs[-1].axes[0]
        assert list(ax.get_xticks()) == [8.0, 16.0, 32.0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "32"]
        assert ax.get_xlabel() and ax.get_ylabel() == "Energy efficiency (tokens/J)"


def test_bar_value_labels_keep_three_significant_digits(monkeypatch, tmp_path):
    """ahasd / gpu_only = 1.02 and 12.34: the labels read 1.02 and 12.3 (not 1 and 12)."""
    import pandas as pd

    from ahasd_sim.plots import bars
    from ahasd_sim.plots.bars import bar_value_label
    assert [bar_value_label(v) for v in (1.02, 0.8734, 12.34, 153.2)] == ["1.02", "0.873", "12.3", "153"]
    # the rates as ratios of totals (metrics.stats.RATIOS): 100 tokens in 10 / 9.8039 s, 100 / 8.1037 J
    df = pd.DataFrame({"variant": ["gpu_only", "ahasd"], "model_pair": ["a/b", "a/b"], "run.policy": ["x", "x"],
                       "seed": [0, 0], "status": ["ok", "ok"], "throughput_tok_s": [10.0, 10.2],
                       "tokens_per_j": [1.0, 12.34], "generated_tokens": [100, 100],
                       "decode_makespan_s": [10.0, 100 / 10.2], "decode_energy_j": [100.0, 100 / 12.34]})
    figs = _capture(monkeypatch, bars)
    bars.normalised_bars(df, tmp_path / "b", bars=["gpu_only", "ahasd"])
    texts = {t.get_text() for ax in figs[-1].axes for t in ax.texts}
    assert {"1.02", "12.3"} <= texts and "1" not in texts, texts     # the baseline (1 by definition): no label


def test_sensitivity_marks_an_oat_point_that_does_not_fit_infeasible(tmp_path, capsys):
    """Base pim.ranks 16 runs; the OAT point pim.ranks 2 cannot hold the models: since issue 26 it
    is infeasible (decided before it runs, reason in oat.csv), not a failure; a point that fails
    when simulated exits 1 with one line each (tests/test_dse_sensitivity.py)."""
    pytest.importorskip("optuna")
    import pandas as pd
    rc = main(["sensitivity", "--config", str(_study(tmp_path, "sens", ranks="16, 2")), "--workers", "1",
               "--no-progress", "--sobol-samples", "0", "--out", str(tmp_path / "st")])
    capsys.readouterr()
    assert rc == 0
    oat = pd.read_csv(tmp_path / "st" / "sensitivity" / "oat.csv")
    row = oat[(oat["parameter"] == "pim.ranks") & (oat["value"] == 2)].iloc[0]
    assert row["status"] == "infeasible" and "pim_memory_fit" in row["error"]


def test_window_workers_die_quietly_with_a_killed_parent(tmp_path):
    """SIGKILL of a run while its forked window workers simulate: the workers exit with it and
    print nothing (they used to finish their window and print a BrokenPipeError traceback)."""
    import signal
    import time
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "ahasd_sim", "--config", str(MAIN), "--jobs", "2", "--set",
                          "pim.partition_policy=striped", "--out", str(tmp_path / "o")], stderr=subprocess.PIPE,
                         env=env, cwd=tmp_path)
    children = []
    t0 = time.time()
    while not children and time.time() - t0 < 60 and p.poll() is None:
        time.sleep(0.1)
        res = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True)
        children = [int(x) for x in res.stdout.split()]
    if not children:
        p.kill()
        pytest.skip("the run never forked window workers")
    time.sleep(0.5)
    p.send_signal(signal.SIGKILL)
    err = p.stderr.read().decode()
    p.wait()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    time.sleep(1.0)
    for c in children:
        assert not Path(f"/proc/{c}").exists() or "zombie" in Path(f"/proc/{c}/status").read_text().lower()


def _overlaps_text(fig, legend):
    """Texts of the figure (titles, tick and axis labels, value labels) whose drawn box overlaps
    the legend's."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    lb = legend.get_window_extent(r)
    texts = [t for ax in fig.axes for t in [ax.title, ax._left_title, ax.xaxis.label, ax.yaxis.label, *ax.texts,
                                              *ax.get_xticklabels(), *ax.get_yticklabels()]]
    if fig._suptitle is not None:
        texts.append(fig._suptitle)
    return [t.get_text() for t in texts if t.get_text() and t.get_visible() and t.get_window_extent(r).overlaps(lb)]


def test_bars_and_timeline_legends_overlap_no_text(monkeypatch, tmp_path):
    import pandas as pd

    from ahasd_sim.plots import bars, timeline
    # one legend row; the tallest bar (4x, "4") sits under the middle of the figure's top
    df = pd.DataFrame({"variant": ["gpu_only", "async", "ahasd"] * 2, "model_pair": ["a/b"] * 3 + ["c/d"] * 3,
                       "run.policy": ["x"] * 6, "seed": [0] * 6, "status": ["ok"] * 6,
                       "throughput_tok_s": [10.0, 20.0, 31.0, 10.0, 25.0, 40.0],
                       "tokens_per_j": [1.0, 2.0, 3.3, 1.0, 2.5, 4.0], "generated_tokens": [100] * 6,
                       "decode_makespan_s": [100 / v for v in (10.0, 20.0, 31.0, 10.0, 25.0, 40.0)],
                       "decode_energy_j": [100 / v for v in (1.0, 2.0, 3.3, 1.0, 2.5, 4.0)]})
    figs = _capture(monkeypatch, bars)
    bars.normalised_bars(df, tmp_path / "b", bars=["gpu_only", "async", "ahasd"])
    fig = figs[-1]
    assert len(fig.legends) == 1 and not _overlaps_text(fig, fig.legends[0])
    tl = pd.DataFrame({"device": ["npu", "pim", "npu", "pim"], "task": ["verify", "draft", "preverify", "draft"],
                       "start_s": [0.0, 0.0, 0.002, 0.003], "end_s": [0.002, 0.001, 0.003, 0.004]})
    figs = _capture(monkeypatch, timeline)
    for title in (None, "Device activity"):
        timeline.plot_gantt({"ahasd / adaedl": tl, "async / adaedl": tl}, tmp_path / "t", window_s=0.004,
                            start_s=0.0, title=title)
        fig = figs[-1]
        assert len(fig.legends) == 1 and not _overlaps_text(fig, fig.legends[0])
    fig = figs[-1]
    assert len(fig.legends) == 1 and not _overlaps_text(fig, fig.legends[0])
    assert [ax.get_title(loc="left") for ax in fig.axes] == ["ahasd / adaedl", "async / adaedl"]


def test_pareto_front_keeps_the_group_colours(monkeypatch, tmp_path):
    """Two model pairs, each with one front point: the front markers are drawn in the two
    pairs' colours (they were all black), with black rims."""
    import pandas as pd
    from matplotlib.colors import to_rgba

    from ahasd_sim.plots import pareto
    from ahasd_sim.plots.style import color
    df = pd.DataFrame({"speedup": [1.0, 2.0, 1.5, 3.0], "eff": [3.0, 1.0, 1.0, 0.5],
                       "pair": ["a/b", "a/b", "c/d", "c/d"]})
    figs = _capture(monkeypatch, pareto)
    pareto.pareto_2d(df, "speedup", "eff", "maximize", "maximize", tmp_path / "p", color_by="pair")
    ax = figs[-1].axes[0]
    front = [c for c in ax.collections if str(c.get_label()).startswith("2-D front")][0]
    got = {tuple(np.round(f, 3)) for f in front.get_facecolors()}
    want = {tuple(np.round(to_rgba(color(i)), 3)) for i in (0, 1)}
    assert got == want and all(tuple(e[:3]) == (0, 0, 0) for e in front.get_edgecolors())
