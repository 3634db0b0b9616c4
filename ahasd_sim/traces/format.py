"""Real token-level speculative-decoding traces: format, loader, validator, replay helpers.

A trace is ONE ``.npz`` file (``np.savez_compressed``) holding

* ``header_json`` -- a 0-d (or 1-element) unicode array with a JSON object (provenance,
  category names, per-prompt table, format version, ...);
* one 1-D array per per-position column (length ``n`` = number of recorded positions);
* ``topk_ids`` / ``topk_p`` -- 2-D ``(n, K)`` drafter top-K;
* off-path rollouts in CSR form: ``rollout_offset`` / ``rollout_len`` (length ``n``) index the
  flat arrays ``rollout_tok`` / ``rollout_p`` / ``rollout_H`` (length ``m``).

The format is documented in ``traces/README.md``.  Only numpy is needed to read it.
Everything that goes wrong while reading or validating raises :class:`TraceError`, a
``ValueError`` whose ``str`` is a single line ``"<path>: <message>"``.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import reported_in_one_line

FORMAT_NAME = "ahasd-trace"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)

#: column name -> (kind, ndim, check); kind: "i" integer, "f" float, "b" bool
#: check: "prob" in [0,1]; "ent" finite >= 0 nats; "nonneg" >= 0; "u" in [0,1) or NaN; None
COLUMNS: Dict[str, Tuple[str, int, Optional[str]]] = {
    "prompt_id": ("i", 1, "nonneg"),
    "category": ("i", 1, "nonneg"),
    "pos_in_response": ("i", 1, "nonneg"),
    "prompt_len": ("i", 1, "nonneg"),
    "tgt_tok": ("i", 1, "nonneg"),
    "tgt_p": ("f", 1, "prob"),
    "tgt_H": ("f", 1, "ent"),
    "drf_tok": ("i", 1, "nonneg"),
    "drf_top1": ("i", 1, "nonneg"),
    "drf_p_top1": ("f", 1, "prob"),
    "drf_p_tgt": ("f", 1, "prob"),
    "drf_p_tok": ("f", 1, "prob"),
    "tgt_p_drf": ("f", 1, "prob"),
    "drf_H": ("f", 1, "ent"),
    "match": ("b", 1, None),
    "accept": ("b", 1, None),
    "alpha": ("f", 1, "prob"),
    "u": ("f", 1, "u"),
    "topk_ids": ("i", 2, "nonneg"),
    "topk_p": ("f", 2, "prob"),
    "rollout_offset": ("i", 1, "nonneg"),
    "rollout_len": ("i", 1, "nonneg"),
}
#: flat rollout arrays (length m = total rollout tokens)
ROLLOUT_COLUMNS: Dict[str, Tuple[str, int, Optional[str]]] = {
    "rollout_tok": ("i", 1, "nonneg"),
    "rollout_p": ("f", 1, "prob"),
    "rollout_H": ("f", 1, "ent"),
}
ALL_COLUMNS = {**COLUMNS, **ROLLOUT_COLUMNS}

#: on-disk dtypes used by :func:`write_trace`
DTYPES = {
    "prompt_id": np.int32, "category": np.int16, "pos_in_response": np.int32,
    "prompt_len": np.int32, "tgt_tok": np.int32, "drf_tok": np.int32, "drf_top1": np.int32,
    "match": np.bool_, "accept": np.bool_, "topk_ids": np.int32,
    "rollout_offset": np.int64, "rollout_len": np.int16, "rollout_tok": np.int32,
}

REQUIRED_HEADER_KEYS = ("format", "format_version", "mode", "categories", "prompts",
                        "top_k", "L_max", "n_positions")

_PROB_TOL = 1e-4  # float32 softmax round-off


@reported_in_one_line
class TraceError(ValueError):
    """A trace file is missing, unreadable or violates the schema.

    ``str(err)`` is one line: ``"<path>: <message>"``.
    """

    def __init__(self, path, message: str):
        self.path = str(path)
        self.message = " ".join(str(message).split())  # force one line
        super().__init__(path, message)   # re-creatable from args (SimPy re-raises that way), picklable

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


# ----------------------------------------------------------------------------------------
# Trace object
# ----------------------------------------------------------------------------------------
class Trace:
    """A validated trace: numpy columns + header dict.  Cheap (no per-position objects).

    Columns are attributes (``trace.accept``, ``trace.drf_H``, ``trace.topk_p``...) and are
    also available as ``trace.columns[name]`` / ``trace[name]``.
    """

    def __init__(self, columns: Dict[str, np.ndarray], header: dict, path: str = "<memory>",
                 file_sha256: Optional[str] = None):
        self.columns = columns
        self.header = header
        self.path = str(path)
        #: SHA-256 of the file it was read from (:func:`load_trace`; kept by slices), else None
        self.file_sha256 = file_sha256

    # -- container protocol ---------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.columns["tgt_tok"].shape[0])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __getattr__(self, name: str):
        cols = self.__dict__.get("columns")
        if cols is not None and name in cols:
            return cols[name]
        raise AttributeError(f"Trace has no attribute or column {name!r}")

    def __repr__(self) -> str:
        return (f"Trace({self.path!r}, mode={self.header.get('mode')!r}, positions={len(self)}, "
                f"prompts={self.n_prompts}, rollout_tokens={self.columns['rollout_tok'].size})")

    # -- metadata --------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self.header["mode"]

    @property
    def categories(self) -> List[str]:
        return list(self.header["categories"])

    @property
    def top_k(self) -> int:
        return int(self.columns["topk_ids"].shape[1])

    @property
    def L_max(self) -> int:
        return int(self.header["L_max"])

    @property
    def n_prompts(self) -> int:
        return int(len(self.prompt_bounds()))

    def category_names(self) -> np.ndarray:
        """Per-position category name (object array); use ``trace.category`` for codes."""
        return np.asarray(self.categories, dtype=object)[self.columns["category"]]

    def prompt_bounds(self) -> np.ndarray:
        """``(P, 2)`` array of ``[start, end)`` position ranges, one row per prompt, in order."""
        pid = self.columns["prompt_id"]
        if pid.size == 0:
            return np.zeros((0, 2), dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, pid[1:] != pid[:-1]])
        ends = np.r_[starts[1:], pid.size]
        return np.stack([starts, ends], axis=1).astype(np.int64)

    def iter_prompts(self) -> Iterator[Tuple[int, int, int]]:
        """Yield ``(prompt_id, start, end)`` for each prompt in order."""
        for s, e in self.prompt_bounds():
            yield int(self.columns["prompt_id"][s]), int(s), int(e)

    # -- off-path rollouts -----------------------------------------------------------------
    def offpath(self, t: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Drafter free-running continuation recorded after its rejected proposal at ``t``.

        Returns ``(tok, p, H)`` (possibly empty) views into the flat rollout arrays.
        """
        n = len(self)
        if not -n <= t < n:
            raise IndexError(f"position {t} out of range for trace with {n} positions")
        off = int(self.columns["rollout_offset"][t])
        ln = int(self.columns["rollout_len"][t])
        sl = slice(off, off + ln)
        return (self.columns["rollout_tok"][sl], self.columns["rollout_p"][sl],
                self.columns["rollout_H"][sl])

    # -- slicing / replay ------------------------------------------------------------------
    def slice_positions(self, start: int, stop: int) -> "Trace":
        """Contiguous sub-trace of positions ``[start, stop)`` (rollouts re-based)."""
        n = len(self)
        if not 0 <= start <= stop <= n:
            raise TraceError(self.path, f"position slice [{start}, {stop}) outside [0, {n}]")
        cols: Dict[str, np.ndarray] = {}
        for name, (_, _, _) in COLUMNS.items():
            cols[name] = self.columns[name][start:stop]
        for name in self.columns:
            if name not in ALL_COLUMNS and self.columns[name].shape[:1] == (n,):
                cols[name] = self.columns[name][start:stop]
        off = self.columns["rollout_offset"][start:stop]
        ln = self.columns["rollout_len"][start:stop].astype(np.int64)
        if stop > start:
            r0 = int(off[0])
            r1 = int((off + ln).max()) if ln.size else r0
            r0 = min(r0, int(off.min()))
        else:
            r0 = r1 = 0
        cols["rollout_offset"] = (off - r0).astype(np.int64)
        for name in ROLLOUT_COLUMNS:
            cols[name] = self.columns[name][r0:r1]
        hdr = dict(self.header)
        hdr["n_positions"] = int(stop - start)
        hdr["sliced_from"] = {"path": self.path, "start": int(start), "stop": int(stop)}
        return Trace(cols, hdr, self.path, self.file_sha256)

    def take(self, n_tokens: int, start_prompt: int = 0) -> "Trace":
        """Concatenate prompts in order from the ``start_prompt``-th prompt and cut at exactly
        ``n_tokens`` positions.  Never loops: raises :class:`TraceError` if the trace has fewer
        than ``n_tokens`` positions from that prompt on."""
        n_tokens = int(n_tokens)
        if n_tokens < 0:
            raise TraceError(self.path, f"take(): n_tokens must be >= 0, got {n_tokens}")
        bounds = self.prompt_bounds()
        if not 0 <= start_prompt < max(len(bounds), 1):
            raise TraceError(self.path, f"take(): start_prompt {start_prompt} out of range "
                                        f"(trace has {len(bounds)} prompts)")
        start = int(bounds[start_prompt, 0]) if len(bounds) else 0
        avail = len(self) - start
        if avail < n_tokens:
            raise TraceError(self.path, f"take(): requested {n_tokens} tokens but the trace has "
                                        f"only {avail} positions from prompt index {start_prompt} "
                                        f"on (traces are never looped)")
        return self.slice_positions(start, start + n_tokens)

    def accepted_lengths(self, k: int, per_prompt: bool = True) -> np.ndarray:
        """Committed tokens per round (bonus included) of greedy/fixed-k chain speculative
        decoding replayed from the ``accept`` flags; rounds restart at every prompt boundary
        (or run over the concatenation if ``per_prompt`` is False)."""
        acc = self.columns["accept"]
        if not per_prompt:
            return replay_fixed_k(acc, k)
        out = [replay_fixed_k(acc[s:e], k) for s, e in self.prompt_bounds()]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    # -- I/O -------------------------------------------------------------------------------
    @classmethod
    def load(cls, path, validate: bool = True) -> "Trace":
        return load_trace(path, validate=validate)

    def save(self, path) -> None:
        write_trace(path, self.header, self.columns)

    def to_frame(self):
        """Per-position pandas DataFrame of the 1-D columns (pandas imported lazily)."""
        import pandas as pd
        n = len(self)
        data = {k: v for k, v in self.columns.items() if v.ndim == 1 and v.shape[0] == n}
        df = pd.DataFrame(data)
        df["category_name"] = pd.Categorical.from_codes(self.columns["category"].astype(int),
                                                        categories=self.categories)
        return df


# ----------------------------------------------------------------------------------------
# replay helpers
# ----------------------------------------------------------------------------------------
def replay_fixed_k(accept: np.ndarray, k: int) -> np.ndarray:
    """Rounds of chain speculative decoding with a fixed draft budget ``k`` over one prompt.

    A round starting at ``t`` accepts the run of consecutive ``accept`` flags from ``t``
    (at most ``k``) and commits that many tokens plus one (correction or bonus); the final
    round is truncated at the end of the response.  Returns committed tokens per round.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    acc = np.asarray(accept, dtype=bool)
    n = acc.size
    # run[t] = number of consecutive True flags starting at t
    run = np.zeros(n + 1, dtype=np.int64)
    for t in range(n - 1, -1, -1):
        run[t] = run[t + 1] + 1 if acc[t] else 0
    out = []
    t = 0
    while t < n:
        c = min(int(run[t]), k) + 1
        c = min(c, n - t)
        out.append(c)
        t += c
    return np.asarray(out, dtype=np.int64)


# ----------------------------------------------------------------------------------------
# loading / validation
# ----------------------------------------------------------------------------------------
def read_npz(path: str, check_header, error: type[TraceError] = TraceError,
             what: str = "an ahasd trace file") -> tuple[dict, Dict[str, np.ndarray]]:
    """``(header, columns)`` of a trace archive (chain or tree). ``check_header(path, header)``
    runs before any column is read; every failure is one ``error`` line."""
    if not os.path.exists(path):
        raise error(path, "file not found")
    import stat
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        # a device (/dev/zero) or a pipe would be read until memory runs out
        raise error(path, "is a folder, not a trace file" if stat.S_ISDIR(mode) else
                    "is not a regular file (a device or a pipe); expected a trace .npz file")
    try:
        z = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise error(path, f"not a readable .npz archive, file corrupt or truncated ({type(exc).__name__}: {exc})")
    try:
        if not hasattr(z, "files"):
            raise error(path, "not an .npz archive (single .npy array)")
        if "header_json" not in z.files:
            raise error(path, f"missing 'header_json' entry (not {what})")
        try:
            raw = z["header_json"]
            header = json.loads(str(raw[()] if raw.ndim == 0 else raw.reshape(-1)[0]))
        except Exception as exc:  # corrupt member, bad JSON
            raise error(path, f"'header_json' unreadable ({type(exc).__name__}: {exc})")
        if not isinstance(header, dict):
            raise error(path, "'header_json' is not a JSON object")
        check_header(path, header)
        cols: Dict[str, np.ndarray] = {}
        for name in z.files:
            if name == "header_json":
                continue
            try:
                cols[name] = np.asarray(z[name])
            except Exception as exc:
                raise error(path, f"column {name!r} unreadable, file corrupt or truncated "
                                  f"({type(exc).__name__}: {exc})")
    finally:
        try:
            z.close()
        except Exception:
            pass
    return header, cols


#: traces read by this process, by (path, size, mtime, validate): a sweep point, its windows and
#: its placement-tuning runs all read the same files (decompressing and hashing one took ~0.1 s);
#: the cached columns are read-only, so no caller can change what the next one reads
_TRACE_CACHE: dict[tuple, Trace] = {}
_TRACE_CACHE_MAX = 8


def load_trace(path, validate: bool = True) -> Trace:
    """Read and (by default) validate a trace ``.npz``; raises :class:`TraceError`. A file read
    before by this process (same path, size and modification time) is not read again."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_size, st.st_mtime_ns, bool(validate))
    except OSError:
        key = None                              # read_npz names the problem
    hit = _TRACE_CACHE.get(key) if key is not None else None
    if hit is not None:
        return Trace(dict(hit.columns), dict(hit.header), path, hit.file_sha256)
    header, cols = read_npz(path, check_header)
    if validate:
        validate_columns(path, header, cols)
    for a in cols.values():
        a.setflags(write=False)
    trace = Trace(cols, header, path, sha256_file(path))
    if key is not None:
        if len(_TRACE_CACHE) >= _TRACE_CACHE_MAX:
            _TRACE_CACHE.clear()
        _TRACE_CACHE[key] = trace
    return trace


def sha256_file(path: str) -> str:
    """SHA-256 of a file (a trace: identifies the input in every run's summary.json; a model)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_header(path: str, header: dict) -> None:
    if header.get("format") == "ahasd-tree-trace":
        raise TraceError(path, "this is a draft-tree trace (format 'ahasd-tree-trace'): read it with "
                               "ahasd_sim.traces.tree.load_tree_trace; a chain trace is needed here")
    for key in REQUIRED_HEADER_KEYS:
        if key not in header:
            raise TraceError(path, f"header is missing key {key!r}")
    if header["format"] != FORMAT_NAME:
        raise TraceError(path, f"header format {header['format']!r} is not {FORMAT_NAME!r}")
    ver = header["format_version"]
    if ver not in SUPPORTED_VERSIONS:
        raise TraceError(path, f"header format_version {ver!r} is not supported "
                               f"(known: {list(SUPPORTED_VERSIONS)})")
    if header["mode"] not in ("greedy", "sample"):
        raise TraceError(path, f"header mode {header['mode']!r} is not 'greedy' or 'sample'")
    if not isinstance(header["categories"], list) or not header["categories"]:
        raise TraceError(path, "header 'categories' must be a non-empty list of names")
    if not isinstance(header["prompts"], list):
        raise TraceError(path, "header 'prompts' must be a list")
    # every field is checked for type and range before anything uses it
    for key, (types, what, ok) in _HEADER_FIELDS.items():
        if key not in header:
            continue
        v = header[key]
        if isinstance(v, bool) or not isinstance(v, types) or (ok is not None and not ok(v)):
            raise TraceError(path, f"header {key!r} is {json.dumps(v)[:60]}: expected {what}")
    if not all(isinstance(c, str) and c for c in header["categories"]):
        raise TraceError(path, "header 'categories' must be a non-empty list of names")
    if not all(isinstance(p, dict) for p in header["prompts"]):
        raise TraceError(path, "header 'prompts' must be a list of objects")
    if not header["prompts"]:
        # an empty list made every position one prompt of unknown origin (windows, categories and
        # prefill lengths all read it): no recorder writes one
        raise TraceError(path, "header 'prompts' is empty: expected one object per recorded prompt")
    models = header.get("models")
    if models is not None:
        for role in ("drafter", "target"):
            m = models.get(role)
            if m is not None and (not isinstance(m, dict) or not isinstance(m.get("name", ""), str)):
                raise TraceError(path, f"header 'models.{role}' must be an object with a 'name' string")


#: header fields with a type (and range) check: key -> (types, expectation, extra check)
_HEADER_FIELDS = {
    "n_positions": (int, "a positive integer (rows of the trace)", lambda v: v >= 1),
    "L_max": (int, "a positive integer (longest draft recorded)", lambda v: v >= 1),
    "format_version": (int, "an integer", None),
    "n_vocab": (int, "a positive integer", lambda v: v >= 1),
    "max_new": (int, "a positive integer", lambda v: v >= 1),
    "top_k": (int, "a non-negative integer", lambda v: v >= 0),
    "mode": (str, "'greedy' or 'sample'", None),
    "models": (dict, "an object {drafter: {...}, target: {...}}", None),
    "categories": (list, "a non-empty list of names", lambda v: len(v) > 0),
    "prompts": (list, "a list of objects", None),
}


def _check_values(path: str, name: str, a: np.ndarray, check: Optional[str]) -> None:
    if a.size == 0 or check is None:
        return
    if check == "prob":
        if np.isnan(a).any():
            raise TraceError(path, f"column {name!r} has NaN values (expected probabilities in [0, 1])")
        lo, hi = float(a.min()), float(a.max())
        if lo < -_PROB_TOL or hi > 1 + _PROB_TOL:
            raise TraceError(path, f"column {name!r} has values outside [0, 1] (min {lo:.6g}, "
                                   f"max {hi:.6g}; expected probabilities)")
    elif check == "ent":
        if not np.isfinite(a).all():
            raise TraceError(path, f"column {name!r} has non-finite values (expected entropies >= 0 nats)")
        if float(a.min()) < -1e-4:
            raise TraceError(path, f"column {name!r} has negative values (expected entropies >= 0 nats)")
    elif check == "nonneg":
        if int(a.min()) < 0:
            raise TraceError(path, f"column {name!r} has negative values (expected >= 0)")
    elif check == "u":
        fin = a[~np.isnan(a)]
        if fin.size and (float(fin.min()) < 0 or float(fin.max()) >= 1):
            raise TraceError(path, f"column {name!r} has values outside [0, 1) (expected uniform draws or NaN)")


def validate_columns(path: str, header: dict, cols: Dict[str, np.ndarray]) -> None:
    """Schema, dtype, shape, range and cross-column consistency checks."""
    for name, (kind, ndim, check) in ALL_COLUMNS.items():
        if name not in cols:
            raise TraceError(path, f"column {name!r} is missing")
        a = cols[name]
        if a.ndim != ndim:
            raise TraceError(path, f"column {name!r} has {a.ndim} dimensions, expected {ndim}")
        k = a.dtype.kind
        ok = (kind == "i" and k in "iu") or (kind == "f" and k == "f") or (kind == "b" and k in "b")
        if not ok:
            raise TraceError(path, f"column {name!r} has dtype {a.dtype}, expected "
                                   f"{ {'i': 'integer', 'f': 'float', 'b': 'bool'}[kind] }")
    n = cols["tgt_tok"].shape[0]
    for name in COLUMNS:
        if cols[name].shape[0] != n:
            raise TraceError(path, f"column {name!r} has length {cols[name].shape[0]}, expected {n} "
                                   f"(file truncated or inconsistent)")
    if int(header["n_positions"]) != n:
        raise TraceError(path, f"header n_positions {header['n_positions']} != {n} rows in columns")
    m = cols["rollout_tok"].shape[0]
    for name in ROLLOUT_COLUMNS:
        if cols[name].shape[0] != m:
            raise TraceError(path, f"column {name!r} has length {cols[name].shape[0]}, expected {m} "
                                   f"(same as 'rollout_tok')")
    K = cols["topk_ids"].shape[1]
    if K < 4 or cols["topk_p"].shape[1] != K:
        raise TraceError(path, f"columns 'topk_ids'/'topk_p' must both be (n, K) with K >= 4, got "
                               f"{cols['topk_ids'].shape} / {cols['topk_p'].shape}")
    for name, (_, _, check) in ALL_COLUMNS.items():
        _check_values(path, name, cols[name], check)
    # categories / prompts
    ncat = len(header["categories"])
    if n and int(cols["category"].max()) >= ncat:
        raise TraceError(path, f"column 'category' has codes >= {ncat} (header lists {ncat} categories)")
    vocab = header.get("n_vocab")
    if vocab and n:
        for name in ("tgt_tok", "drf_tok", "drf_top1", "topk_ids"):
            if int(cols[name].max()) >= int(vocab):
                raise TraceError(path, f"column {name!r} has token ids >= n_vocab {vocab}")
    if n:
        pid = cols["prompt_id"].astype(np.int64)
        if np.any(np.diff(pid) < 0):
            raise TraceError(path, "column 'prompt_id' is not non-decreasing (prompts must be stored in order)")
        pos = cols["pos_in_response"].astype(np.int64)
        new = np.r_[True, pid[1:] != pid[:-1]]
        expect = np.arange(n) - np.maximum.accumulate(np.where(new, np.arange(n), 0))
        if not np.array_equal(pos, expect):
            raise TraceError(path, "column 'pos_in_response' does not count 0,1,2,... within each prompt")
        npr = len(header["prompts"])
        if npr and int(pid.max()) >= npr:
            raise TraceError(path, f"column 'prompt_id' has ids >= {npr} (header lists {npr} prompts)")
    # rollouts (CSR)
    off = cols["rollout_offset"].astype(np.int64)
    ln = cols["rollout_len"].astype(np.int64)
    L = int(header["L_max"])
    if n and int(ln.max()) > L:
        raise TraceError(path, f"column 'rollout_len' has values > L_max {L}")
    if n and int((off + ln).max()) > m:
        raise TraceError(path, f"column 'rollout_offset' + 'rollout_len' points past the end of the "
                               f"rollout arrays ({m} tokens)")
    if n and int(ln.sum()) != m:
        raise TraceError(path, f"column 'rollout_len' sums to {int(ln.sum())}, expected {m} rollout tokens")
    if n and np.any(ln[cols["accept"].astype(bool)] > 0):
        raise TraceError(path, "column 'rollout_len' is > 0 at accepted positions (rollouts are only "
                               "recorded where the proposal is rejected)")
    # semantic consistency
    if n:
        if not np.array_equal(cols["match"].astype(bool), cols["drf_top1"] == cols["tgt_tok"]):
            raise TraceError(path, "column 'match' disagrees with drf_top1 == tgt_tok")
        if header["mode"] == "greedy":
            if not np.array_equal(cols["accept"].astype(bool), cols["match"].astype(bool)):
                raise TraceError(path, "column 'accept' must equal 'match' in a greedy trace")
            if not np.array_equal(cols["drf_tok"], cols["drf_top1"]):
                raise TraceError(path, "column 'drf_tok' must equal 'drf_top1' in a greedy trace")
        if not np.array_equal(cols["topk_ids"][:, 0], cols["drf_top1"]):
            raise TraceError(path, "column 'topk_ids'[:, 0] disagrees with 'drf_top1'")


# ----------------------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------------------
def write_trace(path, header: dict, columns: Dict[str, np.ndarray], validate: bool = True) -> None:
    """Validate and write a trace (``np.savez_compressed``), atomically via a temp file."""
    path = os.fspath(path)
    cols = {}
    for name, a in columns.items():
        a = np.asarray(a)
        if name in DTYPES:
            a = a.astype(DTYPES[name], copy=False)
        elif a.dtype.kind == "f":
            a = a.astype(np.float32, copy=False)
        cols[name] = a
    hdr = dict(header)
    hdr.setdefault("format", FORMAT_NAME)
    hdr.setdefault("format_version", FORMAT_VERSION)
    hdr["n_positions"] = int(cols["tgt_tok"].shape[0])
    if validate:
        check_header(path, hdr)
        validate_columns(path, hdr, cols)
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, header_json=np.array(json.dumps(hdr, sort_keys=True)), **cols)
    os.replace(tmp, path)


def concat_columns(parts: Sequence[Dict[str, np.ndarray]]) -> Dict[str, np.ndarray]:
    """Concatenate per-prompt column dicts (rollout offsets re-based)."""
    out: Dict[str, List[np.ndarray]] = {}
    base = 0
    for part in parts:
        for name, a in part.items():
            if name == "rollout_offset":
                a = np.asarray(a, dtype=np.int64) + base
            out.setdefault(name, []).append(np.asarray(a))
        base += int(np.asarray(part["rollout_tok"]).shape[0])
    return {k: np.concatenate(v, axis=0) for k, v in out.items()}


__all__ = ["TraceError", "Trace", "load_trace", "write_trace", "validate_columns",
           "check_header", "replay_fixed_k", "concat_columns", "COLUMNS", "ROLLOUT_COLUMNS",
           "FORMAT_NAME", "FORMAT_VERSION"]


def with_extra_context(trace: Trace, extra_tokens: int) -> Trace:
    """``trace`` with ``extra_tokens`` more tokens of context before every prompt (``prompt_len``
    grows by it; every other column is the same array): the KV length of every position and the
    prefill of every prompt grow by ``extra_tokens`` (``run.extra_context_tokens``). Memoised on
    the trace object per amount, so every replay of a window shares one copy."""
    memo = trace.__dict__.setdefault("_extra_context", {})
    got = memo.get(int(extra_tokens))
    if got is None:
        cols = dict(trace.columns)
        longer = np.asarray(trace.prompt_len, dtype=np.int64) + int(extra_tokens)
        longer.flags.writeable = False            # read-only like a file's columns (window caches rely on it)
        cols["prompt_len"] = longer
        got = memo[int(extra_tokens)] = Trace(cols, dict(trace.header), path=trace.path, file_sha256=trace.file_sha256)
    return got
