"""The package's layers (docs/architecture.md): no import circle between its top-level places
and no import from a lower layer up to a higher one.

A *place* is a subpackage (``modes``, ``sweep``) or a top-level module (``simulation``,
``paths``) of ``ahasd_sim``. Every import of an ``ahasd_sim`` name is counted, at module level
or inside a function (a deferred import is still a dependency: the circle of issue 32 went
through function-level imports), found by walking each file's syntax tree with :mod:`ast`.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import ahasd_sim

PACKAGE = Path(ahasd_sim.__file__).resolve().parent

#: bottom first; a place may import its own layer and the layers below it. The same order, with
#: what each layer holds, is in docs/architecture.md.
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"errors", "paths", "csvrows", "cli_common", "memo"}),
    ("config", {"config"}),
    ("models", {"workload", "hw", "metrics", "outdir", "traces", "moe"}),
    ("policies", {"policies"}),
    ("modes", {"modes"}),
    ("engine", {"simulation"}),
    ("runs", {"output", "checks", "fingerprint", "compare", "compare_moe", "sustained"}),
    ("plots", {"plots"}),
    ("studies", {"sweep", "validate", "validate_mobile", "validate_moe", "validate_peers", "validate_thermal",
                 "measure"}),
    ("experiments", {"paper"}),
    ("dse", {"dse"}),
    ("api", {"api"}),
    ("cli", {"__main__", "tools"}),
]
LAYER_OF = {place: i for i, (_name, places) in enumerate(LAYERS) for place in places}
ROOT_NAMES = {"__init__", "__version__"}   # ahasd_sim/__init__.py holds only the version


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Absolute names of the ``ahasd_sim`` modules (or module attributes) ``path`` imports."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)   # `from . import modes`
    return {m for m in out if m == "ahasd_sim" or m.startswith("ahasd_sim.")}


def place_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def import_graph() -> dict[tuple[str, str], list[str]]:
    """(importing place, imported place) -> the module-level lines that make the edge."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_data" in path.relative_to(PACKAGE).parts:
            continue
        src = place_of(module_name(path))
        for target in sorted(imported_modules(path)):
            dst = place_of(target)
            if dst != src and dst not in ROOT_NAMES:
                edges[(src, dst)].append(f"{module_name(path)} imports {target}")
    return edges


def find_cycle(edges) -> list[str] | None:
    """One import circle between places (as a path that ends where it starts), or None."""
    succ: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        succ[a].add(b)
    state: dict[str, int] = {}          # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v):
        state[v] = 1
        path.append(v)
        for w in sorted(succ[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(succ):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_every_place_has_a_layer():
    places = {place_of(module_name(p)) for p in PACKAGE.rglob("*.py")
              if "_data" not in p.relative_to(PACKAGE).parts} - ROOT_NAMES
    missing = sorted(places - set(LAYER_OF))
    assert not missing, (f"{missing}: new top-level place(s) without a layer; add each to LAYERS here "
                         "and to docs/architecture.md")


def test_no_import_circle_between_places():
    edges = import_graph()
    cycle = find_cycle(edges)
    if cycle:
        lines = [f"  {a} -> {b}: {edges[(a, b)][0]}" for a, b in zip(cycle, cycle[1:])]
        raise AssertionError("import circle " + " -> ".join(cycle) + "\n" + "\n".join(lines))


def test_no_import_from_a_lower_layer_up():
    upward = [f"{a} ({LAYERS[LAYER_OF[a]][0]}) -> {b} ({LAYERS[LAYER_OF[b]][0]}): {why[0]}"
              for (a, b), why in sorted(import_graph().items())
              if a in LAYER_OF and b in LAYER_OF and LAYER_OF[b] > LAYER_OF[a]]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_the_checks_find_what_they_look_for():
    """The walk sees function-level and relative imports, and a circle or an upward edge is
    reported (so a passing run above means there are none, not that nothing was looked at)."""
    edges = import_graph()
    # deferred import inside a function (cli_common.run_guarded's clause is gone, but this one stays)
    assert any("ahasd_sim.simulation imports ahasd_sim.modes" in w for w in edges[("simulation", "modes")])
    assert ("modes", "policies") in edges and ("dse", "sweep") in edges
    assert find_cycle({("a", "b"): [], ("b", "c"): [], ("c", "a"): [], ("c", "d"): []}) == ["a", "b", "c", "a"]
    assert find_cycle({("a", "b"): [], ("b", "c"): []}) is None
    assert LAYER_OF["plots"] < LAYER_OF["sweep"] < LAYER_OF["paper"] < LAYER_OF["dse"]
    assert ("paper", "sweep") in edges    # the paper's experiments run on the sweep engine, never the reverse
    assert LAYER_OF["paths"] < LAYER_OF["modes"] < LAYER_OF["simulation"]
