"""Generated result blocks of README/docs (scripts/docs.py): the blocks are current at HEAD, and
the block machinery replaces exactly what is between its markers."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ahasd_sim.config.errors import InputError

ROOT = Path(__file__).resolve().parent.parent


def _docs():
    spec = importlib.util.spec_from_file_location("docs_script", ROOT / "scripts" / "docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_render_replaces_only_the_block_body():
    docs = _docs()
    docs.GENERATORS["t-one"] = lambda: "new body"
    try:
        text = "intro\n<!-- generated: t-one (cmd) -->\nold body\nstill old\n<!-- end generated: t-one -->\nafter"
        out, changed = docs.render(text, None, {})
        assert out == "intro\n<!-- generated: t-one (cmd) -->\nnew body\n<!-- end generated: t-one -->\nafter"
        assert changed == ["t-one"]
        again, changed2 = docs.render(out, None, {})
        assert again == out and changed2 == []
        untouched, ch3 = docs.render(text, {"other"}, {})
        assert untouched == text and ch3 == []
        with pytest.raises(InputError, match="no line '<!-- end generated: t-one -->'"):
            docs.render("<!-- generated: t-one (cmd) -->\nbody", None, {})
        with pytest.raises(InputError, match="unknown block 'nope'"):
            docs.render("<!-- generated: nope (cmd) -->\n<!-- end generated: nope -->", None, {})
    finally:
        del docs.GENERATORS["t-one"]


def test_every_generated_block_is_current_at_head(capsys):
    """README's numbers (default run, compare, headline from the committed reproduction) are what
    the code at HEAD computes: this fails whenever a change moves one of them."""
    docs = _docs()
    rc = docs.main(docs.parser().parse_args(["--check"]))
    assert rc == 0, capsys.readouterr().out


def test_a_stale_or_missing_fingerprint_stamp_or_a_planted_number_fails_the_check(tmp_path, monkeypatch):
    docs = _docs()
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "report.md"
    doc.write_text("<!-- fingerprint: 0123456789abcdef (make it) -->\n# r\n")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- generated: t-two (cmd) -->\n42\n<!-- end generated: t-two -->\n")
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    monkeypatch.setattr(docs, "DOC_FILES", [readme])
    monkeypatch.setattr(docs, "STAMPED", {"docs/report.md": "make it"})
    assert docs.stale_stamps("0123456789abcdef") == []
    assert docs.stale_stamps("fedcba9876543210") == [
        "docs/report.md: made at fingerprint 0123456789abcdef (rerun: make it)"]
    docs.stamp_file(doc, "fedcba9876543210", "again")
    assert doc.read_text() == "<!-- fingerprint: fedcba9876543210 (again) -->\n# r\n"
    doc.write_text("# r, regenerated without its stamp\n")      # a document that must carry one
    assert docs.stale_stamps("fedcba9876543210") == [
        'docs/report.md: no fingerprint stamp (rerun: make it; then python scripts/docs.py --stamp docs/report.md '
        '--made-by "make it")']
    docs.stamp_file(doc, "fedcba9876543210", "make it")
    assert docs.stale_stamps("fedcba9876543210") == []
    docs.GENERATORS["t-two"] = lambda: "42"
    try:
        assert docs.render(readme.read_text(), None, {})[1] == []
        readme.write_text(readme.read_text().replace("42", "43"))      # a hand-edited number
        assert docs.render(readme.read_text(), None, {})[1] == ["t-two"]
    finally:
        del docs.GENERATORS["t-two"]


def test_fingerprint_is_deterministic_and_sees_a_model_change():
    from ahasd_sim import fingerprint
    a, da = fingerprint.compute(["autoregressive_pim"])
    b, db = fingerprint.compute(["autoregressive_pim"])
    assert a == b and da == db
    import ahasd_sim.fingerprint as fpm
    name = "autoregressive_pim"
    cfg, over = fpm.CASES[name]
    fpm.CASES[name] = (cfg, [*over, "pim.bank_pj_per_bit=0.9"])     # a cost constant moves results
    try:
        c, _ = fingerprint.compute([name])
    finally:
        fpm.CASES[name] = (cfg, over)
    assert c != a
