"""Start-up cost of the command line: building its parser must not import the heavy libraries
(pandas, the sweep and study machinery) that only some subcommands need."""
import subprocess
import sys

from ahasd_sim.paths import REPO_ROOT


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    return set(out.stdout.split())


def test_parser_does_not_import_pandas_or_the_study_machinery():
    mods = _modules_after("from ahasd_sim.__main__ import _parser; _parser()")
    assert "pandas" not in mods
    assert "ahasd_sim.dse.study" not in mods and "ahasd_sim.sweep" not in mods
    assert "ahasd_sim.dse.cli" in mods       # the optimize/sensitivity options were built


def test_dse_names_still_import_on_first_use():
    from ahasd_sim.dse import load_study, pareto_mask
    from ahasd_sim.dse.pareto import pareto_mask as direct
    from ahasd_sim.dse.study import load_study as direct_study
    assert pareto_mask is direct and load_study is direct_study
