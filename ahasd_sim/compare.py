"""``compare``: several modes (or drafting policies) on the same config and trace windows, normalised to a baseline.

Every mode replays the same trace windows (``run.windows``), so ratios are paired: a row's ratio
to the baseline is the ratio of their ratio estimators (total / total over the same windows),
with a paired bootstrap 95% interval over whole windows (``metrics.stats``, the method of
summary.json).
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from .config.errors import ConfigError, InputError
from .metrics.stats import paired_metric_ci, pooled_rate
from .outdir import OutputFolder
from .output import atomic_write, default_out_dir, write_run
from .simulation import load_run_trace, load_run_windows, run_simulation

COLUMNS = ["mode", "windows", "throughput_tok_s", "throughput_tok_s_ci95_low", "throughput_tok_s_ci95_high",
           "energy_per_token_j", "tokens_per_j", "tokens_per_j_ci95_low", "tokens_per_j_ci95_high", "makespan_s",
           "energy_j", "acceptance_rate", "mean_accepted_per_verify", "drafted_tokens", "wasted_draft_tokens",
           "duplicate_drafter_forwards"]


def _parse_names(text: str | list[str], baseline: str | None, registry, flag: str,
                 noun: str, plural: str) -> tuple[list[str], str]:
    """(names in order, baseline) from a comma-separated option; unknown or repeated names are errors."""
    from .config.errors import did_you_mean
    valid = ", ".join(sorted(registry))
    names = [m.strip() for m in text.split(",")] if isinstance(text, str) else list(text)
    if not names or any(not m for m in names):
        raise InputError(f"{flag}: expected comma-separated {noun} names, got {text!r}; valid {plural}: {valid}")
    for m in names + ([baseline] if baseline else []):
        if m not in registry:
            raise InputError(f"{flag}: unknown {noun} '{m}'{did_you_mean(m, registry)}; valid {plural}: {valid}")
    dup = sorted({m for m in names if names.count(m) > 1})
    if dup:
        raise InputError(f"{flag}: {noun} '{dup[0]}' is listed more than once")
    base = baseline or names[0]
    if base not in names:
        names = [base, *names]
    return names, base


#: config keys of a run's error that mean its models do not fit the memory (``compare`` then
#: reports that decoder as a row that did not run)
CAPACITY_KEYS = ("pim.ranks", "pim.partition_policy", "memory.capacity_gib", "memory.reserved_gib",
                 "gpu.memory_gib")


def _soc_modes() -> tuple[str, ...]:
    from .modes.base import family_modes
    return family_modes("soc")


#: the SoC execution modes ``compare`` runs when no ``--modes`` is given (every registered mode of
#: the family, those the platform supports), in the family's order
DEFAULT_MODES = _soc_modes()
#: ``--baseline`` value that normalises against the platform's best decoder (the default)
BEST = "best"


def _mode_registry():
    """Mode names ``--modes`` accepts: the registry, plus ``autoregressive@DEVICE`` placements."""
    from .modes import MODES
    names = dict(MODES)
    for dev in ("gpu", "npu", "pim"):
        names[f"autoregressive@{dev}"] = MODES["autoregressive"]
    return names


def parse_modes(text: str | list[str] | None, baseline: str | None) -> tuple[list[str], str]:
    """(modes in order, baseline) from ``--modes``/``--baseline``; ``--baseline best`` (or none, with
    the default modes) normalises against the best decoder of the rows."""
    if text is None:
        text = list(DEFAULT_MODES)
    base = None if baseline in (None, BEST) else baseline
    names, first = _parse_names(text, base, _mode_registry(), "--modes", "mode", "modes")
    return names, (first if base else BEST)


def expand_modes(cfg, modes: list[str]) -> list[tuple[str, list[str]]]:
    """[(row label, config overrides)]: each mode the platform supports; ``autoregressive`` becomes
    one row per device that can decode on this platform (``autoregressive@gpu/npu/pim``)."""
    from .hw.platform import Platform
    from .modes import MODES
    have = set(Platform.build(cfg).busy_device_names())
    rows = []
    for m in modes:
        name, _, dev = m.partition("@")
        if name == "autoregressive" and not dev:
            for d in ("gpu", "npu", "pim"):
                if d in have:
                    rows.append((f"autoregressive@{d}", ["run.mode=autoregressive", f"baseline.device={d}"]))
            continue
        cls = MODES[name]
        if cls.drafts_trees and getattr(cls, "family", "") == "soc" and not dev:
            if cfg.run.drafter == "lookup":      # one continuation per round: no tree to draft
                if m in DEFAULT_MODES and modes == list(DEFAULT_MODES):
                    continue
                raise InputError(f"--modes: mode '{m}' drafts trees; run.drafter lookup proposes one continuation")
            if not all(d in have for d in cls.required_devices):
                if m in DEFAULT_MODES and modes == list(DEFAULT_MODES):
                    continue
                missing = [d for d in cls.required_devices if d not in have]
                raise InputError(f"--modes: mode '{m}' needs device(s) {', '.join(missing)}, which this platform "
                                 f"does not enable")
            # one row per tree policy (the config's, when it names one): tree variants are rows
            from .modes.soc.tree_sync import SOC_TREE_POLICIES
            pols = [cfg.run.policy] if cfg.run.policy in SOC_TREE_POLICIES else list(SOC_TREE_POLICIES)
            rows += [(f"{m}/{p}", [f"run.mode={m}", f"run.policy={p}"]) for p in pols]
            continue
        if dev:
            if dev not in have:
                raise InputError(f"--modes: {m}: this platform has no {dev.upper()} ({dev}.enabled is false)")
            rows.append((m, ["run.mode=autoregressive", f"baseline.device={dev}"]))
        elif all(d in have for d in cls.required_devices):
            rows.append((m, [f"run.mode={m}"]))
        elif m not in DEFAULT_MODES or modes != list(DEFAULT_MODES):
            missing = [d for d in cls.required_devices if d not in have]
            raise InputError(f"--modes: mode '{m}' needs device(s) {', '.join(missing)}, which this platform "
                             f"does not enable")
    return rows


def default_compare_dir(cfg) -> Path:
    d = default_out_dir(cfg)
    return d.with_name(d.name + "_compare")


def _paired_ratio(num, den, metric: str):
    """(ratio, low, high) of ``metric`` between two runs' windows tables (aligned by window);
    low and high NaN below the bootstrap's minimum window count (never a zero-width interval)."""
    num, den = num.align(den, join="inner", axis=0)
    m, ci = paired_metric_ci(num, den, metric)
    return m, (ci[0] if ci else float("nan")), (ci[1] if ci else float("nan"))


def run_compare(cfg, modes: list[str] | str | None, baseline: str | None, out: str | Path | None):
    """Run each mode (same trace windows, same seed); return (table, output dir). The output
    folder is checked and locked before the first simulation and filled in one swap.

    Every row gets its ratio to the **best decoder** of the table (max pooled throughput for the
    throughput ratio, max pooled tokens/J for the energy-efficiency ratio: every autoregressive
    placement and every speculative mode the platform supports: every competitor at its best), and to ``baseline``
    when one is named. The best is picked on the same windows the ratios are formed on, which
    can only favour the baseline."""
    modes, base_mode = parse_modes(modes, baseline)
    rows_spec = expand_modes(cfg, modes)
    if base_mode != BEST and base_mode not in [r for r, _ in rows_spec]:
        base_mode = next(r for r, _ in rows_spec if r.startswith(base_mode))
    out_dir = Path(out) if out else default_compare_dir(cfg)
    windows = load_run_windows(cfg)
    with OutputFolder(out_dir, "compare") as folder:
        rows, per_window, not_run, basis = [], {}, {}, {}
        for label, overrides in rows_spec:
            mcfg = cfg.replace(overrides, source="--modes")
            t0 = time.perf_counter()
            try:
                res = run_simulation(mcfg, windows)
            except ConfigError as exc:
                # a decoder whose models do not fit this memory is a row saying why, not the end of
                # the comparison (a phone holds fewer models than the paper's 64 GiB platform)
                if exc.key_path not in CAPACITY_KEYS or label == base_mode:
                    raise
                not_run[label] = exc
                rows.append({"mode": label, "not_run": f"does not fit: {exc.key_path}: {exc.message}"})
                continue
            write_run(res, mcfg, folder.stage / label.replace("@", "_").replace("/", "_"), time.perf_counter() - t0)
            row = {k: res.summary.get(k) for k in COLUMNS}
            row["mode"] = label
            basis[label] = res.summary.get("window_basis") or "run.windows"
            pl = res.summary.get("pim_placement") or {}
            row["pim_placement"] = pl.get("policy") if pl.get("chosen_by") in ("tuned", "pinned") else None
            row["not_run"] = None
            rows.append(row)
            per_window[label] = res.windows.set_index("window")
        if not per_window:
            raise next(iter(not_run.values()))
        table = pd.DataFrame(rows, columns=[*COLUMNS, "pim_placement", "not_run"])
        # rows are paired only with rows replaying the same windows: the tree modes replay the tree
        # trace's prompts, the others run.windows of run.trace; each group has its own best
        pooled_tput = {r: pooled_rate(w, "throughput_tok_s") for r, w in per_window.items()}
        pooled_eff = {r: pooled_rate(w, "tokens_per_j") for r, w in per_window.items()}
        best_t_of, best_e_of = {}, {}
        for b in dict.fromkeys(basis.values()):
            group = [r for r in per_window if basis[r] == b]
            best_t_of[b] = max(group, key=pooled_tput.get)
            best_e_of[b] = max(group, key=pooled_eff.get)
        first = basis[next(m for m in table["mode"] if m in basis)]
        best_t, best_e = best_t_of[first], best_e_of[first]
        refs = [("throughput_tok_s", "throughput", "best", best_t_of), ("tokens_per_j", "energy_efficiency", "best", best_e_of)]
        if base_mode != BEST:
            refs += [("throughput_tok_s", "throughput", base_mode, base_mode),
                     ("tokens_per_j", "energy_efficiency", base_mode, base_mode)]
        nan = (float("nan"),) * 3
        for metric, name, tag, ref_of in refs:
            col = f"{name}_vs_{tag}"
            vals = []
            for m in table["mode"]:
                if m not in per_window:
                    vals.append(nan)
                    continue
                ref_label = ref_of[basis[m]] if isinstance(ref_of, dict) else ref_of
                vals.append(_paired_ratio(per_window[m], per_window[ref_label], metric)
                            if basis[ref_label] == basis[m] else nan)
            table[col], table[col + "_ci95_low"], table[col + "_ci95_high"] = zip(*vals)
        table["best_throughput_decoder"] = [best_t_of.get(basis.get(m)) for m in table["mode"]]
        table["best_efficiency_decoder"] = [best_e_of.get(basis.get(m)) for m in table["mode"]]
        table["window_basis"] = [basis.get(m) for m in table["mode"]]
        atomic_write(folder.stage / "compare.csv", lambda fh: table.to_csv(fh, index=False))
        folder.commit()
    return table, out_dir


def text_table(rows: list[list]) -> list[str]:
    """``rows`` (the first the header) as left-aligned columns two spaces apart, right ends trimmed."""
    width = [max(len(str(x[i])) for x in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(x, width)).rstrip() for x in rows]


def format_compare(table: pd.DataFrame, base_mode: str) -> str:
    """The printed compare table: per mode, throughput and tokens/J with 95% CIs and the ratios
    to the best decoder (and to ``base_mode`` when one was named)."""
    from .metrics.stats import fmt_ci, too_few

    def cell(row, col):
        return fmt_ci(row[col], [row[col + "_ci95_low"], row[col + "_ci95_high"]],
                      why=too_few(int(row["windows"])) if row.get("windows") == row.get("windows") else None)
    head = ["mode", "placement", "tok/s [95% CI]", "tok/J [95% CI]", "tok/s vs best", "tok/J vs best"]
    extra = [] if base_mode == BEST else [f"tok/s vs {base_mode}", f"tok/J vs {base_mode}"]
    lines = []
    notes = []
    for _, r in table.iterrows():
        why = r.get("not_run")
        if isinstance(why, str):
            lines.append([r["mode"], "-", "not run", "not run", "-", "-"] + ["-"] * len(extra))
            notes.append(f"{r['mode']}: {why}")
            continue
        place = r["pim_placement"] if isinstance(r["pim_placement"], str) else "-"
        cells = [r["mode"], place, cell(r, "throughput_tok_s"), cell(r, "tokens_per_j"),
                 cell(r, "throughput_vs_best"), cell(r, "energy_efficiency_vs_best")]
        if extra:
            cells += [cell(r, f"throughput_vs_{base_mode}"), cell(r, f"energy_efficiency_vs_{base_mode}")]
        lines.append(cells)
    text = text_table([head + extra] + lines)
    b = table[table["windows"].notna()].iloc[0]
    text.extend(notes)
    text.append(f"best decoder: {b['best_throughput_decoder']} (throughput), {b['best_efficiency_decoder']} "
                f"(tokens/J); rates and ratios are ratios of totals over the same {int(b['windows'])} windows, 95% CIs by "
                f"paired bootstrap over whole windows")
    if "window_basis" in table and table["window_basis"].nunique() > 1:
        other = table[table["window_basis"] != table["window_basis"].iloc[0]]
        for basis, g in other.groupby("window_basis", sort=False):
            r = g.iloc[0]
            text.append(f"rows {', '.join(g['mode'])} replay other windows ({basis}; {int(r['windows'])} windows): "
                        f"their ratios are to their own best, {r['best_throughput_decoder']} (throughput), "
                        f"{r['best_efficiency_decoder']} (tokens/J), never to the rows above")
    return "\n".join(text)


#: extra columns reported when the runs have them (mode moe_offload)
MOE_COLUMNS = ["accepted_length_per_round", "expert_h2d_bytes", "expert_cache_hit_rate",
               "experts_touched_per_verify", "throughput_tok_s_ci95_low", "throughput_tok_s_ci95_high"]


def parse_policies(text: str | list[str], baseline: str | None) -> tuple[list[str], str]:
    """(policies in order, baseline) from ``--policies``/``--baseline``."""
    from .policies import POLICIES
    return _parse_names(text, baseline, POLICIES, "--policies", "policy", "policies")


def run_compare_policies(cfg, policies: list[str] | str, baseline: str | None, out: str | Path | None):
    """Run each drafting policy with the config's mode (same trace slice, cache, seed); return
    (table, output dir). Extra MoE columns (accepted length per round, H2D bytes, hit rate, CIs)
    appear when the runs report them."""
    policies, base = parse_policies(policies, baseline)
    out_dir = Path(out) if out else default_compare_dir(cfg)
    trace_parts = load_run_trace(cfg)
    with OutputFolder(out_dir, "compare") as folder:
        rows = []
        for pol in policies:
            pcfg = cfg.replace([f"run.policy={pol}"], source="--policies")
            t0 = time.perf_counter()
            res = run_simulation(pcfg, trace_parts)
            write_run(res, pcfg, folder.stage / pol, time.perf_counter() - t0)
            row = {"policy": pol, **{k: res.summary[k] for k in COLUMNS if k != "mode"}}
            row.update({k: res.summary[k] for k in MOE_COLUMNS if k in res.summary})
            rows.append(row)
        table = pd.DataFrame(rows)
        ref = table.set_index("policy").loc[base]
        table["throughput_vs_" + base] = table["throughput_tok_s"] / ref["throughput_tok_s"]
        table["energy_efficiency_vs_" + base] = table["tokens_per_j"] / ref["tokens_per_j"]
        atomic_write(folder.stage / "compare.csv", lambda fh: table.to_csv(fh, index=False))
        folder.commit()
    return table, out_dir


def run_compare_sustained(cfg, modes: list[str] | str | None, duration_s: float, out: str | Path | None):
    """Each mode for ``duration_s`` on the config's phone (section ``thermal``; repetitions through
    consecutive trace windows, one starting at each window, :func:`ahasd_sim.sustained.run_sustained`);
    return (table, output dir). Rows
    are ranked by sustained throughput, then by energy per token; a decoder whose models do not
    fit is a row saying why. Writes compare_sustained.csv (one row per mode: means and 95%
    Student-t half-widths over repetitions), series.csv (every repetition's time series) and
    windows.csv (every window each repetition decoded: when, and the temperatures at its ends)."""
    from .sustained import FIGURES, run_sustained
    modes, _base = parse_modes(modes, None)
    rows_spec = expand_modes(cfg, modes)
    out_dir = Path(out) if out else default_compare_dir(cfg).with_name(default_compare_dir(cfg).name + "_sustained")
    windows = load_run_windows(cfg)
    with OutputFolder(out_dir, "compare") as folder:
        rows, series, windows_rows = [], [], []
        for label, overrides in rows_spec:
            mcfg = cfg.replace(overrides, source="--modes")
            try:
                res = run_sustained(mcfg, duration_s, windows)
            except ConfigError as exc:
                if exc.key_path not in CAPACITY_KEYS:
                    raise
                rows.append({"mode": label, "not_run": f"does not fit: {exc.key_path}: {exc.message}"})
                continue
            rows.append({"mode": label, **res.summary(), "not_run": None})
            series.append(res.series.assign(mode=label))
            windows_rows.append(res.windows.assign(mode=label))
        if not series:
            raise InputError("compare --duration-min: no decoder's models fit this platform")
        cols = ["mode", "duration_s", "repetitions", *[c for f in FIGURES for c in (f, f + "_ci95_half")],
                "throttled_repetitions", "windows_per_repetition", "repetitions_share_windows", "not_run"]
        table = pd.DataFrame(rows, columns=cols)
        table = table.sort_values(["sustained_tok_s", "energy_per_token_j"], ascending=[False, True],
                                  na_position="last", kind="stable").reset_index(drop=True)
        table["rank_sustained"] = table["sustained_tok_s"].rank(ascending=False, method="min")
        table["rank_energy"] = table["energy_per_token_j"].rank(ascending=True, method="min")
        atomic_write(folder.stage / "compare_sustained.csv", lambda fh: table.to_csv(fh, index=False))
        allseries = pd.concat(series, ignore_index=True)
        atomic_write(folder.stage / "series.csv", lambda fh: allseries.to_csv(fh, index=False))
        allwindows = pd.concat(windows_rows, ignore_index=True)
        atomic_write(folder.stage / "windows.csv", lambda fh: allwindows.to_csv(fh, index=False))
        folder.commit()
    return table, out_dir


def format_compare_sustained(table: pd.DataFrame) -> str:
    """The printed table of :func:`run_compare_sustained`."""
    def cell(r, col, fmt="{:.2f}"):
        v, h = r[col], r[col + "_ci95_half"]
        if not isinstance(v, float) or v != v:
            return "-"
        return fmt.format(v) + ("" if h != h else " +/- " + fmt.format(h))
    head = ["mode", "burst tok/s", "sustained tok/s", "first throttle s", "max skin C", "max package C",
            "J/token", "rank tok/s", "rank J/token"]
    lines, notes = [], []
    for _, r in table.iterrows():
        if isinstance(r.get("not_run"), str):
            lines.append([r["mode"]] + ["not run"] * 2 + ["-"] * 6)
            notes.append(f"{r['mode']}: {r['not_run']}")
            continue
        ttf = cell(r, "time_to_first_throttle_s", "{:.0f}")
        lines.append([r["mode"], cell(r, "burst_tok_s"), cell(r, "sustained_tok_s"),
                      ttf if ttf != "-" else "never", cell(r, "max_skin_c", "{:.1f}"),
                      cell(r, "max_package_c", "{:.1f}"), cell(r, "energy_per_token_j", "{:.3f}"),
                      f"{int(r['rank_sustained'])}", f"{int(r['rank_energy'])}"])
    text = text_table([head] + lines)
    ran = table[table["repetitions"].notna()].iloc[0]
    text.extend(notes)
    shared = bool(table["repetitions_share_windows"].fillna(False).astype(bool).any())
    per = table["windows_per_repetition"].dropna()
    per_text = f"{per.min():.1f}" if per.min() == per.max() else f"{per.min():.1f}-{per.max():.1f}"
    text.append(f"{ran['duration_s'] / 60:g} minutes from the ambient, {int(ran['repetitions'])} repetitions, each "
                f"decoding consecutive trace windows from its own starting window ({per_text} windows each, "
                "the thermal state carried across them); +/- is the 95% Student-t half-width over "
                "repetitions; sustained = the mean rate over the last quarter of the run; first throttle over the "
                "repetitions that throttled"
                + ("; together the repetitions decode more windows than the run has, so they share windows: "
                   "the interval reflects where in the trace each starts, not fresh trace content" if shared else ""))
    return "\n".join(text)
