"""scripts/hyco_study.py input checks that are not in the shared bad-input table."""
from __future__ import annotations

import importlib.util

from conftest import ROOT


def _main():
    spec = importlib.util.spec_from_file_location("hyco_study_cli", ROOT / "scripts" / "hyco_study.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


def test_figure_without_a_suffix_is_a_one_line_error(tmp_path, capsys):
    """--figure X (no image suffix) used to end in a 20-line matplotlib traceback after the whole
    study ran; now it is refused before any work: one line, exit 2, nothing written."""
    rc = _main()(["--out", str(tmp_path / "h"), "--figure", str(tmp_path / "fig")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "Traceback" not in err
    assert err.startswith("error: --figure ") and ".png, .pdf, .svg" in err
    assert list(tmp_path.iterdir()) == []
