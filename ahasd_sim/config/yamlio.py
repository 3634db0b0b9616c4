"""Strict YAML reading shared by configs, sweep files and ``--set`` values.

On top of ``yaml.safe_load``: the file must be UTF-8 text, a mapping may not repeat a key
(PyYAML silently keeps the last one), nesting is bounded, and numbers in scientific notation
without a dot (``1e9``, ``2E-3``) are numbers, as in YAML 1.2 and JSON (YAML 1.1 reads them as
strings). Every problem is a :class:`ConfigError` naming the file and, where known, the key.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

#: deepest nesting of mappings/lists a config or sweep file may have (real files use < 6)
MAX_DEPTH = 32
#: largest config or sweep file read (real files are a few kB)
MAX_BYTES = 4 * 1024 * 1024

_FLOAT_RE = re.compile(r"""^[-+]?(?:
      [0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?
    | \.[0-9_]+(?:[eE][-+]?[0-9]+)?
    | \.(?:inf|Inf|INF)
    | \.(?:nan|NaN|NAN))$""", re.X)


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int):
        self.key, self.line = key, line


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys and reads ``1e9`` as a float."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue
                if key in seen:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1)
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


# Integers stay integers (the int resolver is tried first for plain digits); a plain scalar
# such as 1e9 or 2.5E-3 resolves to a float.
StrictLoader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_RE, list("-+0123456789."))
for _ch, _resolvers in StrictLoader.yaml_implicit_resolvers.items():
    # keep the int resolver ahead of ours so that "10" stays an int
    _resolvers.sort(key=lambda r: 0 if r[0] == "tag:yaml.org,2002:int" else 1)


#: most scalar/collection values a document may expand to through aliases (a real config has a few hundred)
MAX_EXPANDED_NODES = 200_000


def _expanded_size(root, limit: int) -> int:
    """Values the node graph expands to when every alias is copied (memoised per node, so a
    graph of aliases of aliases is measured in linear time); stops counting past ``limit``."""
    size: dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if nid in size:
            continue
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            size[nid] = 1
            continue
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in size)
            continue
        total = 1
        for c in children:
            total += size.get(id(c), 1)
            if total > limit:
                break
        size[nid] = min(total, limit + 1)
    return size[id(root)]


def _depth(obj: Any) -> int:
    """Nesting depth, iteratively (a recursive walk could itself overflow)."""
    best = 0
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            best = max(best, d)
            if d > MAX_DEPTH:
                return d
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            best = max(best, d)
            if d > MAX_DEPTH:
                return d
            stack.extend((v, d + 1) for v in o)
    return best


def _flow_depth_exceeds(text: str, limit: int) -> bool:
    """True if ``[``/``{`` flow collections nest deeper than ``limit`` (outside quotes and
    comments). Checked before parsing: PyYAML takes seconds on tens of thousands of brackets."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    quote = ""
    comment = False
    prev = "\n"
    for ch in text:
        if comment:
            comment = ch != "\n"
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth = max(0, depth - 1)
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and prev in " \t\n":
            comment = True
        prev = ch
    return False


def loads(text: str, source: str, key: str = "") -> Any:
    """Parse YAML ``text`` strictly; errors name ``source`` (a file or ``--set``) and ``key``."""
    if _flow_depth_exceeds(text, MAX_DEPTH):
        raise ConfigError(source, key, f"nested too deeply (more than {MAX_DEPTH} levels)")
    try:
        loader = StrictLoader(text)
        try:
            node = loader.get_single_node()
            # aliases are shared in the node graph but copied by everything that walks the data:
            # bound what the document expands to before building it ("billion laughs")
            if node is not None and _expanded_size(node, MAX_EXPANDED_NODES) > MAX_EXPANDED_NODES:
                raise ConfigError(source, key, f"expands to more than {MAX_EXPANDED_NODES} values through YAML "
                                  "aliases (&anchor / *alias): refused")
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except _DuplicateKey as exc:
        raise ConfigError(source, key or str(exc.key), f"duplicate key '{exc.key}' at line {exc.line} "
                          "(YAML would silently keep the last one)") from None
    except RecursionError:
        raise ConfigError(source, key, f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(source, key, f"YAML parse error{where}: {problem}") from None
    if _depth(data) > MAX_DEPTH:
        raise ConfigError(source, key, f"nested too deeply (more than {MAX_DEPTH} levels)")
    return data


def read_text(path: Path, what: str = "file") -> str:
    """The UTF-8 text of ``path``; a binary, UTF-16 or huge file is a ConfigError."""
    src = str(path)
    if not path.exists():
        if path.is_symlink():   # a link to nothing, or a loop of links (Python 3.13's resolve() and
            try:                # exists() pass over a loop silently: ask for the strict answer)
                path.resolve(strict=True)
            except FileNotFoundError:
                pass
            except (OSError, RuntimeError) as exc:   # ELOOP (RuntimeError before Python 3.13)
                raise ConfigError(src, "", f"cannot be opened: symlink loop ({exc})") from None
        raise ConfigError(src, "", f"{what} not found")
    if path.is_dir():
        raise ConfigError(src, "", f"expected a YAML {what}, got a folder")
    if not path.is_file():
        raise ConfigError(src, "", f"expected a YAML {what}, got a device or pipe")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(src, "", f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(src, "", f"too large for a YAML {what} (more than {MAX_BYTES} bytes)")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(src, "", f"expected UTF-8 text, got UTF-16 (save the {what} as UTF-8)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(src, "", f"expected UTF-8 text, got a byte 0x{raw[exc.start]:02x} at offset "
                          f"{exc.start} that is not UTF-8 (a binary file?)") from None
    if "\x00" in text:
        raise ConfigError(src, "", "expected text, got NUL bytes (a binary file?)")
    return text


def load_file(path: str | Path, what: str = "file") -> Any:
    p = Path(path)
    return loads(read_text(p, what), str(p))
