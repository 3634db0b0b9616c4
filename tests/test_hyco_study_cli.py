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


def test_bad_capacity_search_options_are_one_line_errors(tmp_path, capsys):
    """--cap-tol 0 (the open-arrival search needs a tolerance) and --cap-max 0 are refused before
    any work: one line, exit 2, nothing written."""
    for args in (["--cap-tol", "0"], ["--cap-max", "0"], ["--cap-tokens", "8"]):
        rc = _main()(["--out", str(tmp_path / "h"), "--figure", str(tmp_path / "f.png"), *args])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "\n" not in err and err.startswith("error: --cap-windows ")
    assert list(tmp_path.iterdir()) == []
