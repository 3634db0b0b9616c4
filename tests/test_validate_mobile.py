"""validate --mobile (issue 29): precisions, presets, CSV matching, the two-parameter fit."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ahasd_sim.config.errors import InputError
from ahasd_sim.validate_mobile import (
    COLUMNS, FIT_SOC, SocPreset, load_soc, predict_tok_s, row_work, validate_mobile)
from ahasd_sim.workload.models import MODELS
from ahasd_sim.workload.precision import PRECISIONS, apply_precision, get_precision

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "validation" / "mobile" / "measured.csv"


def _row(**kw):
    base = dict(source="test", year="2025", device="d", soc="Snapdragon 8 Elite QRD", unit="NPU", memory="",
                mem_gb_s="", model="Llama-3-8B-Instruct", params_b="8.03", precision="w4a16", phase="decode",
                context_or_prompt="4096", tok_s="12.9", j_per_tok="", power_w="", spec_decoding="no", notes="")
    base.update(kw)
    return base


def _write(tmp_path, rows, name="m.csv"):
    p = tmp_path / name
    pd.DataFrame(rows, columns=COLUMNS).to_csv(p, index=False)
    return p


def test_precision_byte_widths_and_aliases():
    """W4A16 on Llama-3-8B: 0.5 B/weight, 2 B per KV element; KV per token = 2 (K,V) x 32 layers
    x 8 KV heads x 128 x 2 B = 131072 B."""
    m = apply_precision(MODELS["llama3-8b"], "W4A16")
    assert m.weight_bytes() == round(MODELS["llama3-8b"].param_count() * 0.5)
    assert m.kv_bytes_per_token() == 131072
    assert get_precision("w4") is PRECISIONS["w4afp16"] and get_precision("W8-A8") is PRECISIONS["w8a8"]
    assert get_precision("w4a16").array_dtype == "int16" and not get_precision("w4a16").dequant
    assert get_precision("w4afp16").dequant
    with pytest.raises(KeyError):
        get_precision("w3a7")


def test_decode_bytes_are_weights_plus_the_whole_static_context():
    """A decode step of Llama-3-8B W4A16 in a 4096-position graph reads every weight but the
    embedding (8,030,261,248 - 128256 x 4096 = 7,504,924,672 params x 0.5 B... plus norms) and the KV of
    4096 positions: 4096 x 131072 = 536,870,912 B."""
    from ahasd_sim.workload.ops import forward_totals
    spec = apply_precision(MODELS["llama3-8b"], "w4a16")
    w = row_work(spec, "decode", 4096, 4096, 128)
    t = forward_totals(spec, 1, 4095)
    assert t.kv_bytes == pytest.approx(536_870_912)
    assert w["bytes"] == pytest.approx(t.weight_bytes + 536_870_912)
    emb = 128256 * 4096
    assert t.weight_bytes == pytest.approx((MODELS["llama3-8b"].param_count() - emb) * 0.5, rel=1e-9)
    p = row_work(spec, "prefill", 256, 4096, 128)
    assert p["steps"] == 2 and p["tokens"] == 256


def test_predict_decode_is_bytes_over_bandwidth():
    """4 x16 channels at 6400 MT/s = 51.2 GB/s; the LPDDR5 model's sequential-read efficiency is
    the all-bank refresh share 1 - tRFC/tREFI = 1 - 350/3900 = 0.910256. fraction 0.5: the NPU gets
    25.6 x 0.910256 = 23.30 GB/s, so 1 GB per token with negligible flops is 23.30 tok/s;
    port_cap 1000 GB/s leaves the DRAM's 46.605 GB/s; port_cap 20 GB/s gives exactly 20 tok/s."""
    soc = SocPreset("x", (), 6400, 4, 16, "LPDDR5", {"int16": 10.0})
    w = {"bytes": 1e9, "flops": 1.0, "tokens": 1, "steps": 1, "weights": 1}
    prec = get_precision("w4a16")
    eff = 1 - 350 / 3900
    assert predict_tok_s(w, soc, prec, 0.5, 1.0, "decode", "fraction") == pytest.approx(25.6 * eff, rel=1e-9)
    assert predict_tok_s(w, soc, prec, 1000.0, 1.0, "decode", "port_cap") == pytest.approx(51.2 * eff, rel=1e-9)
    assert predict_tok_s(w, soc, prec, 20.0, 1.0, "decode", "port_cap") == pytest.approx(20.0)
    # compute-bound prefill: 2e12 flops per call at 10 TOPS x util 0.5 = 0.4 s, 2 calls for 256 tokens
    wp = {"bytes": 1.0, "flops": 2e12, "tokens": 256, "steps": 2, "weights": 1}
    assert predict_tok_s(wp, soc, prec, 0.5, 0.5, "prefill") == pytest.approx(256 / 0.8)
    # decode ignores u_prefill: the same step at util 0.5 and 1.0
    assert predict_tok_s(wp, soc, prec, 0.5, 0.5, "decode") == predict_tok_s(wp, soc, prec, 0.5, 1.0, "decode")


def test_lm_head_in_w8_adds_its_bytes():
    """W4A16 keeps the LM head at 1 B/param: Llama-3.2-1B (tied, 128256 x 2048) streams
    128256 x 2048 x (1 - 0.5) = 131,334,144 B more per forward than at uniform W4."""
    from ahasd_sim.validate_mobile import head_extra_bytes
    spec = apply_precision(MODELS["llama3.2-1b"], "w4a16")
    assert head_extra_bytes(spec, get_precision("w4a16")) == 131_334_144
    assert head_extra_bytes(spec, get_precision("w4a8")) == 0
    a = row_work(spec, "decode", 4096, 4096, 1, get_precision("w4a16"))
    b = row_work(spec, "decode", 4096, 4096, 1, None)
    assert a["bytes"] - b["bytes"] == 131_334_144


def test_graph_shape_from_notes():
    from ahasd_sim.validate_mobile import graph_shape
    assert graph_shape("x; ar=128 graph_context=4096", 128, "prefill") == (4096, 128)
    assert graph_shape("", 300, "prefill") == (300, 300)           # one call over the prompt
    assert graph_shape("ar=128 graph_context=4096", 4096, "decode") == (4096, 1)
    assert graph_shape("ar=2048", 1024, "prefill") == (1024, 1024)  # a call never exceeds the graph


def test_unknown_soc_model_precision_are_skipped_with_reason(tmp_path):
    p = _write(tmp_path, [_row(), _row(soc="Exynos 9999"), _row(model="GPT-5"), _row(precision="w3a7"),
                          _row(phase="train"), _row(unit="CPU")])
    res = validate_mobile(str(p))
    assert len(res.points) == 1
    reasons = dict(res.skipped)
    assert "unknown SoC 'Exynos 9999'" in reasons[3]
    assert "unknown model 'GPT-5'" in reasons[4]
    assert "w3a7" in reasons[5]
    assert "phase" in reasons[6] and "unit" in reasons[7]


def test_names_match_case_and_punctuation_insensitively(tmp_path):
    p = _write(tmp_path, [_row(soc="snapdragon-8-ELITE", model="llama_v3_8b_instruct", precision="W4A16")])
    res = validate_mobile(str(p))
    assert list(res.points["soc"]) == [FIT_SOC] and list(res.points["model"]) == ["llama3-8b"]


def test_bad_csv_is_one_line_error(tmp_path):
    p = _write(tmp_path, [_row(tok_s="fast")])
    with pytest.raises(InputError, match=r"m\.csv: line 2: tok_s must be a positive number"):
        validate_mobile(str(p))
    q = tmp_path / "q.csv"
    q.write_text("soc,model\nx,y\n")
    with pytest.raises(InputError, match=r"q\.csv: missing column\(s\) source"):
        validate_mobile(str(q))


def test_fit_uses_only_the_fitting_soc(tmp_path):
    """Scaling every out-of-sample measurement by 10 leaves both fitted parameters unchanged;
    scaling the in-sample ones moves them."""
    df = pd.read_csv(MEASURED, dtype=str, keep_default_na=False)
    base = validate_mobile(str(MEASURED))
    from ahasd_sim.validate_mobile import squash, load_socs
    socs = load_socs()
    fit = df["soc"].map(lambda s: socs.get(squash(s)) is not None and socs[squash(s)].name == FIT_SOC)
    out = df.copy()
    out.loc[~fit, "tok_s"] = (out.loc[~fit, "tok_s"].astype(float) * 10).astype(str)
    r_out = validate_mobile(str(_write(tmp_path, out.to_dict("records"), "out.csv")))
    assert (r_out.eta_bw, r_out.u_prefill) == (base.eta_bw, base.u_prefill)
    inn = df.copy()
    inn.loc[fit, "tok_s"] = (inn.loc[fit, "tok_s"].astype(float) * 0.5).astype(str)
    r_in = validate_mobile(str(_write(tmp_path, inn.to_dict("records"), "in.csv")))
    assert r_in.eta_bw < base.eta_bw * 0.6
    assert set(base.points.loc[base.points["sample"] == "in", "soc"]) == {FIT_SOC}


def test_shipped_table_and_presets():
    """The shipped CSV: 3+ SoCs with modelled rows, decode and prefill, every row sourced."""
    df = pd.read_csv(MEASURED, dtype=str, keep_default_na=False)
    assert len(df) >= 25 and (df["source"].str.len() > 0).all()
    res = validate_mobile(str(MEASURED))
    assert res.points["soc"].nunique() >= 3 and set(res.points["phase"]) == {"decode", "prefill"}
    assert all(math.isfinite(x) and x > 0 for x in res.points["predicted_tok_s"])
    for f in (ROOT / "hw_configs" / "soc").glob("*.yaml"):
        p = load_soc(f)
        assert p.bus_peak_bytes_s > 0 and p.form_factor in ("phone", "laptop")
    assert {"Snapdragon 8 Gen 2", "Snapdragon 8 Gen 3", "Snapdragon 8 Elite"} <= set(res.points["soc"])


def test_preset_rejects_unknown_keys(tmp_path):
    src = ROOT / "hw_configs" / "soc" / "snapdragon_8_gen_3.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.read_text().replace("  channels: 4", "  channels: 4\n  chanels: 4"))
    with pytest.raises(InputError, match=r"bad\.yaml: memory\.chanels: unknown key"):
        load_soc(bad)
    neg = tmp_path / "neg.yaml"
    neg.write_text(src.read_text().replace("data_rate_mts: 9600", "data_rate_mts: -1"))
    with pytest.raises(InputError, match=r"memory\.data_rate_mts: expected a positive number"):
        load_soc(neg)


def test_cli_mobile(tmp_path, capsys):
    from ahasd_sim.__main__ import main
    assert main(["validate", "--mobile", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "out-sample decode" in out and "skipped:" in out and "default AHASD platform" in out
    assert (tmp_path / "o" / "mobile_errors.csv").is_file() and (tmp_path / "o" / "mobile_validation.png").is_file()
    bad = _write(tmp_path, [_row(tok_s="-3")])
    assert main(["validate", "--mobile", "--measured", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tok_s" in err[0]
    assert main(["validate", "--mobile", "--set", "npu.chips=4"]) == 2
    assert "do not apply" in capsys.readouterr().err
    assert main(["list"]) == 0
    assert "  hw_configs/soc/snapdragon_8_elite.yaml" in capsys.readouterr().out
