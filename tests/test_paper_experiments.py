"""The paper's experiment definition (hw_configs/paper/experiments.yaml): the shipped file loads and
names only what its sweeps have, and a bad file is a one-line error naming the file and the key."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ahasd_sim.config.errors import ConfigError
from ahasd_sim.paper.experiments import DEFAULT_EXPERIMENTS, load_experiments
from ahasd_sim.sweep import load_sweep_spec

ROOT = Path(__file__).resolve().parent.parent
PAPER_DIR = ROOT / "hw_configs" / "paper"


@pytest.fixture(scope="module")
def exp():
    return load_experiments()


def test_shipped_file_is_the_checkouts():
    assert DEFAULT_EXPERIMENTS == PAPER_DIR / "experiments.yaml"


def test_shipped_experiments_match_the_sweeps(exp):
    main = load_sweep_spec(PAPER_DIR / "reproduce.yaml")
    regimes = load_sweep_spec(PAPER_DIR / "regimes.yaml")
    assert exp.main_sweep.source == main.source and exp.regimes_sweep.source == regimes.source
    variants = [v.name for v in main.variants]
    # every variant of the sweep is labelled, and nothing else is
    assert set(exp.labels) == set(exp.short) == set(variants)
    assert len(set(exp.short.values())) == len(exp.short)        # legends map back to one variant
    named = [*exp.sota, *exp.kv_variants.values(), *(v for lad in exp.ladders.values() for v in lad),
             *(v for c in exp.best_decoders.values() for v in c), *exp.reported["ladder_throughput"],
             *exp.reported["power_table"]]
    assert set(named) <= set(variants)
    assert list(exp.ladders) == ["draft_one_more", "idle_until_feedback"]
    assert exp.ladder == exp.ladders["draft_one_more"] and exp.ladder[0] == "gpu_only" and exp.ladder[-1] == "ahasd"
    assert all(lad[0] == "gpu_only" for lad in exp.ladders.values())
    assert set(exp.best_decoders) == {"best_soc", "best_gpu"}
    assert exp.match == ["model_pair", "run.policy", "seed"]
    # the regimes: two axes of the regimes sweep, decoders among its variants
    assert exp.regime_axes == [ax.name for ax in regimes.axes]
    assert set(exp.regime_decoders) <= {v.name for v in regimes.variants}
    # the paper's numbers, with their source (references.md#ahasd-results says 3.8x / 5.2x for AHASD)
    assert exp.reported_source == "references.md#ahasd-results"
    assert (exp.reported["ladder_throughput"]["ahasd"], exp.reported["ladder_energy_eff"]["ahasd"]) == (3.8, 5.2)
    assert "+TVC (AHASD) 3.8x / 5.2x" in (ROOT / "docs" / "references.md").read_text()
    assert exp.reported["power_table"]["plus_aau"] == {"lpddr5_power": 1.9, "npu_power": 1.1, "throughput": 2.2,
                                                       "energy_per_token": 0.64}
    assert len(exp.caveats) == 6 and all(isinstance(c, str) and "\n" not in c for c in exp.caveats)


# ---------------------------------------------------------------- bad files
def _shipped() -> dict:
    raw = yaml.safe_load((PAPER_DIR / "experiments.yaml").read_text())
    raw["sweeps"] = {k: str(PAPER_DIR / v) for k, v in raw["sweeps"].items()}   # the copy lives elsewhere
    return raw


def _write(tmp_path: Path, raw: dict) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


def _error(tmp_path: Path, edit, main_sweep=None) -> str:
    raw = _shipped()
    edit(raw)
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigError) as info:
        load_experiments(path, main_sweep)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}: "), msg
    return msg[len(f"{path}: "):]


def test_the_copy_of_the_shipped_file_loads(tmp_path):
    got = load_experiments(_write(tmp_path, _shipped()))
    assert got.labels == load_experiments().labels and got.reported == load_experiments().reported


def test_unknown_keys(tmp_path):
    assert _error(tmp_path, lambda r: r.update(caveat=[])).startswith("caveat: unknown key (did you mean 'caveats'?)")
    assert _error(tmp_path, lambda r: r["variants"]["gpu_only"].update(lable="x")).startswith(
        "variants.gpu_only.lable: unknown key (did you mean 'label'?)")
    assert _error(tmp_path, lambda r: r["paper_reported"].update(ahasd_vs_gpu_mean_throughput=3.0)).startswith(
        "paper_reported.ahasd_vs_gpu_mean_throughput: unknown key")
    assert _error(tmp_path, lambda r: r["paper_reported"]["power_table"]["ahasd"].update(gts_power=1.0)).startswith(
        "paper_reported.power_table.ahasd.gts_power: unknown key")


def test_missing_keys(tmp_path):
    assert _error(tmp_path, lambda r: r.pop("match")) == "match: required"
    assert _error(tmp_path, lambda r: r["paper_reported"].pop("ahasd_vs_npu_pim_throughput")) == \
        "paper_reported.ahasd_vs_npu_pim_throughput: required"
    assert _error(tmp_path, lambda r: r["paper_reported"]["ladder_energy_eff"].pop("plus_edc")) == \
        "paper_reported.ladder_energy_eff.plus_edc: required"


def test_wrong_types(tmp_path):
    assert _error(tmp_path, lambda r: r.update(sota="ahasd")) == "sota: expected a non-empty list"
    assert _error(tmp_path, lambda r: r["ladders"].update(draft_one_more=["gpu_only", 3])) == \
        "ladders.draft_one_more[1]: expected a name, got 3"
    assert _error(tmp_path, lambda r: r["paper_reported"]["ladder_throughput"].update(ahasd="3.8x")) == \
        "paper_reported.ladder_throughput.ahasd: expected a number, got '3.8x'"
    assert _error(tmp_path, lambda r: r["paper_reported"].update(ahasd_vs_gpu_max_throughput=True)) == \
        "paper_reported.ahasd_vs_gpu_max_throughput: expected a number, got True"
    assert _error(tmp_path, lambda r: r.update(variants=["gpu_only"])) == "variants: expected a mapping, got list"
    assert _error(tmp_path, lambda r: r["caveats"].append("")) == "caveats[6]: expected a non-empty string, got ''"


def test_names_the_sweep_does_not_have(tmp_path):
    assert _error(tmp_path, lambda r: r["ladders"]["draft_one_more"].__setitem__(3, "plus_edcc")).startswith(
        f"ladders.draft_one_more[3]: 'plus_edcc' is not a variant of the sweep {PAPER_DIR / 'reproduce.yaml'} "
        "(did you mean 'plus_edc'?)")
    assert "best_decoders.best_gpu[1]: 'gpu_arr' is not a variant" in _error(
        tmp_path, lambda r: r["best_decoders"]["best_gpu"].__setitem__(1, "gpu_arr"))
    assert "kv_variants.wait: 'ahasd_waits' is not a variant" in _error(
        tmp_path, lambda r: r["kv_variants"].update(wait="ahasd_waits"))
    assert _error(tmp_path, lambda r: r["variants"].update(extra={"label": "x", "short": "y"})).startswith(
        "variants.extra: 'extra' is not a variant of the sweep")
    assert "regimes.decoders[3]: 'asynch' is not a variant of the sweep" in _error(
        tmp_path, lambda r: r["regimes"]["decoders"].__setitem__(3, "asynch"))
    assert _error(tmp_path, lambda r: r["regimes"].update(contention_axis="pim.contention")).startswith(
        "regimes.contention_axis: 'pim.contention' is not an axis of the sweep")
    assert _error(tmp_path, lambda r: r["match"].append("run.mode")).startswith(
        "match[3]: 'run.mode' is not a results.csv column of the sweep")
    assert _error(tmp_path, lambda r: r.update(ladder="idle")).startswith(
        "ladder: 'idle' is not one of the ladders (draft_one_more, idle_until_feedback)")
    assert _error(tmp_path, lambda r: r["sota"].append("ahasd")) == "sota[5]: 'ahasd' appears twice"
    assert _error(tmp_path, lambda r: r["variants"]["plus_tvc"].update(short="+EDC")) == \
        "variants.plus_tvc.short: '+EDC' is also another variant's short label"


def test_every_sweep_variant_needs_a_label(tmp_path):
    assert _error(tmp_path, lambda r: r["variants"].pop("gpu_ar")).startswith(
        f"variants: the sweep {PAPER_DIR / 'reproduce.yaml'} has variant 'gpu_ar', which needs a label")


def test_checked_against_the_sweep_given_instead(tmp_path):
    """--spec replaces sweeps.main: a ladder rung that sweep lacks is an error naming both files."""
    text = (PAPER_DIR / "reproduce.yaml").read_text().replace("../", str(ROOT / "hw_configs") + "/")
    raw = yaml.safe_load(text)
    del raw["variants"]["plus_tvc"]
    sweep = tmp_path / "mine.yaml"
    sweep.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert _error(tmp_path, lambda r: None, sweep) == (f"ladders.draft_one_more[4]: 'plus_tvc' is not a variant of "
                                                       f"the sweep {sweep} (did you mean 'plus_tvc_idle'?)")


def test_sweep_files_must_exist(tmp_path):
    assert _error(tmp_path, lambda r: r["sweeps"].update(regimes="nope.yaml")).startswith(
        "sweeps.regimes: sweep file 'nope.yaml' not found")
