"""The results schema describes every summary.json key: a short run of every execution-mode family
and of the policies with their own statistics is checked against it, and the generated
docs/results-schema.md / .json must be current. A key added to a summary without an entry in
``ahasd_sim/metrics/schema.py`` fails here."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ahasd_sim.metrics import schema

ROOT = Path(__file__).resolve().parent.parent


def _cases():
    from ahasd_sim.fingerprint import _SHORT, CASES
    cases = {k: (f, [*_SHORT, *ov]) for k, (f, ov) in CASES.items()}
    for p in ("svip", "fixed", "banditspec", "specdecpp"):
        cases[f"policy_{p}"] = ("hw_configs/ahasd_mobile.yaml", [*_SHORT, f"run.policy={p}"])
    return cases


@pytest.fixture(scope="module")
def summaries():
    from ahasd_sim.config import load_config
    from ahasd_sim.paths import shipped
    from ahasd_sim.simulation import run_simulation
    return {name: run_simulation(load_config(shipped(f), ov)).summary for name, (f, ov) in _cases().items()}


def test_every_summary_key_is_described(summaries):
    missing = {name: schema.undescribed(s) for name, s in summaries.items()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, ("summary keys without an entry in ahasd_sim/metrics/schema.py SUMMARY_KEYS "
                         f"(add one line each: type, unit, meaning): {missing}")


def test_a_new_key_without_a_description_is_caught(summaries):
    s = dict(summaries["ahasd"])
    s["brand_new_metric_s"] = 1.0
    s["mode_stats"] = {**s["mode_stats"], "new_counter": 3}
    assert schema.undescribed(s) == ["brand_new_metric_s", "mode_stats.new_counter"]


def test_types_match_the_values(summaries):
    py = {"number": (int, float), "integer": (int,), "string": (str,), "boolean": (bool,), "array": (list,)}
    for name, s in summaries.items():
        for k, v in schema.leaf_keys(json.loads(json.dumps(s, default=str))).items():
            if v is None or v == {}:
                continue
            t = schema.describe(k)[0]
            assert isinstance(v, py[t]) and (t in ("boolean",) or not isinstance(v, bool)), (name, k, t, v)


def test_every_entry_has_a_meaning_and_known_type():
    for k, (t, u, m) in {**schema.SUMMARY_KEYS, **schema.RESULTS_COLUMNS}.items():
        assert t in ("number", "integer", "string", "boolean", "array"), k
        assert m and len(m) > 5, k


def test_generated_documents_are_current():
    """Regenerate with: python -m ahasd_sim results-schema --markdown > docs/results-schema.md
    and --json > docs/results-schema.json."""
    assert (ROOT / "docs" / "results-schema.md").read_text() == schema.markdown()
    assert (ROOT / "docs" / "results-schema.json").read_text() == schema.json_schema()


def test_json_schema_validates_a_flattened_summary(summaries):
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads(schema.json_schema())
    flat = schema.leaf_keys(json.loads(json.dumps(summaries["ahasd"], default=str)))
    jsonschema.validate({k: v for k, v in flat.items() if v != {}}, doc)
