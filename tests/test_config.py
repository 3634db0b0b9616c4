"""Config loader: extends, overrides, strict typing, helpful one-line errors."""
from __future__ import annotations

import textwrap

import pytest

from ahasd_sim.config import ConfigError, dump_config, load_config


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_defaults_load_and_round_trip(tmp_path):
    p = write(tmp_path, "a.yaml", "run: {mode: async}\n")
    cfg = load_config(p)
    assert cfg.run.mode == "async"
    again = write(tmp_path, "b.yaml", dump_config(cfg))
    assert dump_config(load_config(again)) == dump_config(cfg)


def test_extends_deep_merges(tmp_path):
    write(tmp_path, "base.yaml", "run: {mode: async, generated_tokens: 64}\nahasd: {edc: false}\n")
    child = write(tmp_path, "child.yaml", "extends: base.yaml\nrun: {generated_tokens: 32}\n")
    cfg = load_config(child)
    assert cfg.run.mode == "async" and cfg.run.generated_tokens == 32 and cfg.ahasd.edc is False


def test_override_types_and_seed(tmp_path):
    p = write(tmp_path, "a.yaml", "{}\n")
    cfg = load_config(p, ["run.generated_tokens=7", "ahasd.tvc=false", "run.mode=gpu_only"], seed=5)
    assert cfg.run.generated_tokens == 7 and cfg.ahasd.tvc is False and cfg.run.seed == 5
    assert cfg.run.mode == "gpu_only"


@pytest.mark.parametrize("text, key, fragment", [
    ("run: {modee: async}\n", "run.modee", "did you mean 'mode'"),
    ("runn: {mode: async}\n", "runn", "did you mean 'run'"),
    ("run: {generated_tokens: many}\n", "run.generated_tokens", "expected an integer"),
    ("run: {generated_tokens: 0}\n", "run.generated_tokens", "expected >= 1"),
    ("ahasd: {edc: 3}\n", "ahasd.edc", "expected true or false"),
    ("ahasd: {edc_config: {killed_batch_update: sometimes}}\n", "ahasd.edc_config.killed_batch_update", "expected one of"),
])
def test_bad_values_name_file_and_key(tmp_path, text, key, fragment):
    p = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert str(p) in msg and key in msg and fragment in msg
    assert "\n" not in msg


def test_error_in_parent_names_parent(tmp_path):
    write(tmp_path, "base.yaml", "run: {generated_tokens: -3}\n")
    child = write(tmp_path, "child.yaml", "extends: base.yaml\n")
    with pytest.raises(ConfigError, match="base.yaml: run.generated_tokens"):
        load_config(child)


def test_override_error_names_set(tmp_path):
    p = write(tmp_path, "a.yaml", "{}\n")
    with pytest.raises(ConfigError, match=r"--set: run.generated_tokens: expected an integer"):
        load_config(p, ["run.generated_tokens=abc"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(p, ["run.generated_tokens"])


def test_missing_file_and_cycle_and_yaml_error(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.yaml")
    write(tmp_path, "x.yaml", "extends: y.yaml\n")
    write(tmp_path, "y.yaml", "extends: x.yaml\n")
    with pytest.raises(ConfigError, match="circular extends"):
        load_config(tmp_path / "x.yaml")
    bad = write(tmp_path, "bad.yaml", "run: {mode: [\n")
    with pytest.raises(ConfigError, match="YAML parse error"):
        load_config(bad)
