"""Discoverable, honest CLI: --version, --help, list, config-reference SECTION, --dry-run,
output-folder replacement, umask-honouring sweep files, trace provenance in the summary."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from ahasd_sim.__main__ import SUBCOMMANDS, main

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
PAPER = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"


def cfg_file(tmp_path: Path, tokens: int = 24, timeline: bool = True) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(f"extends: {PAPER}\nrun: {{trace: {SMOKE}, generated_tokens: {tokens}, "
                 f"timeline: {str(timeline).lower()}}}\n")
    return p


def test_version(capsys):
    from ahasd_sim import __version__
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"ahasd_sim {__version__}"


def _assert_every_option_has_help(text: str, what: str) -> None:
    """argparse prints an option without help as a bare line; with help, the text follows on
    the same line or on the next, indented line."""
    import re
    lines = text.splitlines()
    seen = 0
    for i, line in enumerate(lines):
        if re.match(r"^\s{2}-{1,2}\w", line):
            seen += 1
            body = re.sub(r"^\s{2}(-{1,2}[\w-]+(?: [^ ,]+)?)(, -{1,2}[\w-]+(?: [^ ,]+)?)*", "", line)
            if not body.strip():
                assert i + 1 < len(lines) and lines[i + 1].startswith(" " * 6) and lines[i + 1].strip() \
                    and not lines[i + 1].lstrip().startswith("-"), f"{what}: {line.strip()} has no help"
    assert seen >= 1, what


@pytest.mark.parametrize("cmd", [c for c in SUBCOMMANDS if c != "traces"] + ["traces stats", "measure gpu",
                                                                             "measure moe"])
def test_every_subcommand_explains_its_options(cmd, capsys):
    assert main([*cmd.split(), "--help"]) == 0
    _assert_every_option_has_help(capsys.readouterr().out, cmd)


@pytest.mark.parametrize("script", ["plot_bars", "plot_sweep heatmap", "plot_sweep lines", "plot_timeline",
                                    "plot_distributions", "bench", "reproduce_paper", "hyco_study",
                                    "bench_study", "publish_study", "mobile_measured_aihub"])
def test_every_script_explains_its_options(script, capsys):
    import importlib.util
    name, *sub = script.split()
    spec = importlib.util.spec_from_file_location(f"_help_{name}", ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([*sub, "--help"]) == 0
    _assert_every_option_has_help(capsys.readouterr().out, script)


def test_list_shows_shipped_files(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("hw_configs/ahasd_mobile.yaml", "hw_configs/sweeps/smoke.yaml", "hw_configs/paper/reproduce.yaml",
                 "traces/qwc-0.5b-1.5b_greedy_smoke.npz", "validation/h200_measured.csv"):
        assert f"  {name}" in out, name
    # the experiment definition is not offered as a sweep
    sweeps = out.split("sweeps and studies:\n")[1].split(":\n")[0]     # up to the next heading
    assert "hw_configs/paper/reproduce.yaml" in sweeps and "experiments.yaml" not in sweeps
    assert "experiment definitions (scripts/reproduce_paper.py --experiments):\n  hw_configs/paper/experiments.yaml\n" in out


def test_config_reference_section_filters(capsys):
    assert main(["config-reference", "pim.aau"]) == 0
    keys = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()]
    assert keys and all(k.startswith("pim.aau.") for k in keys)
    assert main(["config-reference", "run"]) == 0
    keys = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()]
    assert "run.seed" in keys and all(k.startswith("run.") for k in keys)


def test_dry_run_validates_without_simulating(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["--config", str(cfg_file(tmp_path)), "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "OK" in text and "Qwen2.5-Coder" in text and "nothing was simulated" in text
    for figure in ("tok/s", "throughput", "makespan", " J"):   # no performance figures
        assert figure not in text
    assert not out.exists()
    # an error that only the hardware build finds is found by the dry run too
    assert main(["--config", str(cfg_file(tmp_path)), "--dry-run", "--set", "pim.ranks=2"]) == 2


def test_sweep_dry_run_counts_points_and_writes_nothing(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    cfg_file(tmp_path)
    spec.write_text("name: d\nbase: c.yaml\naxes: {pim.ranks: [16, 2]}\nseeds: [0, 1]\n")
    assert main(["sweep", "--config", str(spec), "--out", str(tmp_path / "sw"), "--dry-run"]) == 2
    text = capsys.readouterr().out
    assert "4 points, 4 distinct runs, 2 would fail" in text and "pim.ranks=2" in text
    assert not (tmp_path / "sw").exists()


def test_compare_dry_run(tmp_path, capsys):
    assert main(["compare", "--config", str(cfg_file(tmp_path)), "--modes", "ahasd,async", "--dry-run",
                 "--out", str(tmp_path / "cmp")]) == 0
    assert capsys.readouterr().out.count("OK") == 2 and not (tmp_path / "cmp").exists()


def test_reused_out_holds_only_the_new_run(tmp_path, capsys):
    """A stale file of an earlier run (timeline.json here) must not survive into the new one."""
    out = tmp_path / "o"
    assert main(["--config", str(cfg_file(tmp_path, timeline=True)), "--out", str(out), "--quiet"]) == 0
    assert (out / "timeline.json").is_file()
    assert main(["--config", str(cfg_file(tmp_path, timeline=False)), "--out", str(out), "--quiet",
                 "--set", "run.mode=async"]) == 0
    assert not (out / "timeline.json").exists()
    assert json.loads((out / "summary.json").read_text())["mode"] == "async"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "o"]   # no staging or lock left
    (tmp_path / ".o.staging-killed").mkdir()    # what a SIGKILLed run leaves behind
    assert main(["--config", str(cfg_file(tmp_path)), "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "o"]


def test_summary_names_the_trace_pair(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["--config", str(cfg_file(tmp_path)), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    s = json.loads((out / "summary.json").read_text())
    assert s["trace_models"]["drafter"].startswith("Qwen2.5-Coder-0.5B")
    assert s["trace_models"]["target"].startswith("Qwen2.5-Coder-1.5B")
    line = next(x for x in printed.splitlines() if "acceptance from trace" in x)
    assert "qwc-0.5b-1.5b_greedy_smoke.npz" in line and "Qwen2.5-Coder-1.5B" in line


def test_events_csv_sorted_by_time(tmp_path):
    out = tmp_path / "o"
    assert main(["--config", str(cfg_file(tmp_path, tokens=48)), "--out", str(out), "--quiet"]) == 0
    ev = pd.read_csv(out / "events.csv")
    assert len(ev) > 10 and ev["time_s"].is_monotonic_increasing


def test_sweep_files_honour_umask(tmp_path):
    from ahasd_sim.sweep import run_sweep
    cfg_file(tmp_path)
    spec = tmp_path / "s.yaml"
    spec.write_text("name: u\nbase: c.yaml\nseeds: [0]\n")
    old = os.umask(0o022)
    try:
        run_sweep(spec, tmp_path / "sw", workers=1, progress=False)
    finally:
        os.umask(old)
    for name in ("results.csv", "points.csv", "spec.yaml", "sweep.json"):
        assert stat.S_IMODE((tmp_path / "sw" / name).stat().st_mode) == 0o644, name
    assert not (tmp_path / "sw" / ".lock").exists()


def test_large_sweep_warns_before_resolving(tmp_path, capsys, monkeypatch):
    import io

    from ahasd_sim.sweep import runner
    from ahasd_sim.sweep.spec import count_points, load_sweep_spec
    cfg_file(tmp_path)
    spec = tmp_path / "s.yaml"
    spec.write_text("name: big\nbase: c.yaml\nseeds: [0, 1, 2]\naxes: {pim.ranks: [16, 15], run.policy: [adaedl, svip]}\n")
    s = load_sweep_spec(spec)
    assert count_points(s) == 12 == len(list(__import__("ahasd_sim.sweep.spec", fromlist=["x"]).iter_points(s)))
    monkeypatch.setattr(runner, "LARGE_SWEEP_POINTS", 10)
    buf = io.StringIO()
    runner.announce(s, count_points(s), stream=buf)
    assert "warning:" in buf.getvalue() and "12 points" in buf.getvalue()


def test_sweep_plot_says_what_it_averaged(tmp_path):
    """Axes that are neither shown nor fixed are averaged, and the figure says so."""
    import matplotlib
    matplotlib.use("Agg")
    from ahasd_sim.plots import sweep_plots
    df = pd.DataFrame({"point": list("abcdefgh"), "status": "ok", "model_pair": ["p", "q"] * 4,
                       "pim.ranks": [1, 1, 2, 2] * 2, "seed": [0] * 4 + [1] * 4, "error_type": None, "error": None,
                       "wall_time_s": 0.1, "throughput_tok_s": range(8)})
    assert sweep_plots.averaged_over(df, ["pim.ranks", None]) == {"model_pair": 2, "seed": 2}
    assert sweep_plots.averaged_over(df[df["seed"] == 0], ["pim.ranks", "model_pair"]) == {}
    captured = {}
    real = sweep_plots.save_figure

    def grab(fig, out):
        captured["text"] = " ".join(t.get_text() for t in fig.texts)
        return real(fig, out)
    import ahasd_sim.plots.sweep_plots as sp
    sp.save_figure = grab
    try:
        sweep_plots.lines(df, "pim.ranks", "throughput_tok_s", tmp_path / "f")
    finally:
        sp.save_figure = real
    assert "model_pair (2 values)" in captured["text"] and "seed (2 values)" in captured["text"]
    # no window samples given: no interval, said in the figure (never a min-max band)
    assert "no interval" in captured["text"] and "min-max" not in captured["text"]


def test_sweep_folder_in_use_is_refused(tmp_path, capsys):
    import fcntl
    cfg_file(tmp_path)
    spec = tmp_path / "s.yaml"
    spec.write_text("name: l\nbase: c.yaml\nseeds: [0]\n")
    out = tmp_path / "sw"
    out.mkdir()
    fd = os.open(out / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert main(["sweep", "--config", str(spec), "--out", str(out), "--no-progress"]) == 2
        assert "in use by another ahasd_sim command" in capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]
    finally:
        os.close(fd)


def test_installed_copy_finds_shipped_data(tmp_path, monkeypatch):
    """Outside a checkout, relative names resolve to the package's _data copy."""
    from ahasd_sim import paths
    data = tmp_path / "_data"
    (data / "hw_configs").mkdir(parents=True)
    (data / "hw_configs" / "x.yaml").write_text("run: {seed: 5}\n")
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path / "no-checkout")
    monkeypatch.setattr(paths, "INSTALLED_DATA", data)
    monkeypatch.chdir(tmp_path)
    assert paths.resolve_input_file("hw_configs/x.yaml") == data / "hw_configs" / "x.yaml"
    from ahasd_sim.config import load_config
    assert load_config("hw_configs/x.yaml").run.seed == 5
    assert paths.shipped_files()["configs"] == ["hw_configs/x.yaml"]


def test_build_ships_the_data_folders(tmp_path):
    """The wheel's build step copies hw_configs/, traces/ and validation/ into ahasd_sim/_data."""
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    data = tmp_path / "ahasd_sim" / "_data"
    for rel in ("hw_configs/ahasd_mobile.yaml", "hw_configs/sweeps/smoke.yaml", "traces/qwc-0.5b-1.5b_greedy.npz",
                "validation/h200_measured.csv"):
        assert (data / rel).read_bytes() == (ROOT / rel).read_bytes(), rel


def test_missing_dependency_is_one_line_not_a_traceback(monkeypatch, capsys):
    """A missing module must not re-raise while the handler imports the simulator (which needs
    pandas): the handler for it comes first and names the module."""
    import builtins

    from ahasd_sim.cli_common import EXIT_USAGE, run_guarded

    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("No module named 'pandas'", name="pandas")
        return real_import(name, *args, **kwargs)

    def body():
        import pandas  # noqa: F401 - stands for any command body that needs it
        return 0

    for mod in [m for m in list(__import__("sys").modules) if m == "ahasd_sim.simulation"]:
        monkeypatch.delitem(__import__("sys").modules, mod)   # force user_errors() to re-import it
    monkeypatch.setattr(builtins, "__import__", no_pandas)
    assert run_guarded(body) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'pandas' is not installed" in err[0]


def test_a_stop_signal_lost_inside_a_library_still_ends_the_command_with_its_exit_code():
    import signal

    from ahasd_sim import cli_common

    def body_that_loses(sig):
        def body():
            try:
                signal.raise_signal(sig)
            except KeyboardInterrupt:   # a __del__ or sqlite callback: "Exception ignored"
                pass
            return 0
        return body

    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert cli_common.run_guarded(body_that_loses(signal.SIGINT)) == cli_common.EXIT_INTERRUPTED
        assert cli_common.run_guarded(body_that_loses(signal.SIGTERM)) == cli_common.EXIT_TERMINATED
        assert cli_common.run_guarded(lambda: 0) == 0
        # a SIGINT ignored by the parent (a background job) stays ignored
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cli_common.install_signal_handlers()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if hasattr(signal, "SIGHUP"):
            signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_bench_study_states_a_target_only_where_an_issue_set_one(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("_bench_study", ROOT / "scripts" / "bench_study.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    shipped = str(ROOT / "hw_configs" / "studies" / "where_ahasd_wins.yaml")
    assert mod.target_s(shipped, 200, 2) == 600.0       # issue 17
    assert mod.target_s(shipped, 200, 16) == 30.0       # issue 30
    assert mod.target_s(shipped, 200, 8) is None
    assert mod.target_s(shipped, 40, 16) is None
    other = tmp_path / "mine.yaml"
    other.write_text(open(shipped).read())
    assert mod.target_s(str(other), 200, 2) is None
