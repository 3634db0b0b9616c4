"""User-facing text speaks to users: no internal tracker numbers ("issue 23", "issues 9, 15",
"(issue 23)", "Issue #5") and no "GUIDE" source in README.md, docs/*.md, the study intros, or
anywhere in the package (docstrings, comments, help, error strings and config sources, which
docs/config-reference.md prints). A reference cites docs/references.md or a docs page instead."""
from __future__ import annotations

import re

import pytest

from conftest import ROOT

PATTERNS = [re.compile(r"\bissues?\s*#?\s*\d+", re.IGNORECASE), re.compile(r"\bGUIDE\b")]


def user_facing_files() -> list:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "docs" / "studies" / "intros").glob("*.md")),
             *sorted((ROOT / "ahasd_sim").rglob("*.py"))]
    return [f for f in files if f.is_file()]


def internal_references(text: str) -> list[tuple[int, str]]:
    return [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1)
            if any(p.search(line) for p in PATTERNS)]


def test_the_patterns_catch_each_form():
    text = ("see issue 23\n(issue 23)\nissues 23, 31\nIssue #5 says\nsource GUIDE statistics\n"
            "a guide for users\nissues with the trace\nthe tissue 5 sample\n")
    assert [i for i, _ in internal_references(text)] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("path", user_facing_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_internal_issue_numbers(path):
    hits = internal_references(path.read_text(encoding="utf-8"))
    assert not hits, f"{path.relative_to(ROOT)}: " + "; ".join(f"line {i}: {t[:90]}" for i, t in hits[:5])
