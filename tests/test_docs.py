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
