"""``moe_offload``: tree speculative decoding of a MoE target whose experts live in host memory.

Per round (one recorded tree of ``moe.tree_trace``): the drafter grows the tree level by level
(on the GPU, or on a mobile NPU / LPDDR5-PIM drafter: ``moe.drafter_device``); after each level
the tree policy (``run.policy``: eagle_fixed, eagle_dynamic, specfit, ecospec) may stop drafting;
it then selects an ancestor-closed subtree, which the GPU verifies in one pass
(:func:`ahasd_sim.moe.cost.schedule_verify`: dense part for all nodes, per layer the union of
their recorded experts, missing experts copied over H2D into the expert cache first).
The round commits the accepted path of the selected subtree plus one correction/bonus token.

Replay semantics (as the tree-trace format states): every round is evaluated at its recorded
root; a smaller subtree commits fewer tokens but the next round is the next recorded one (the
rounds a smaller tree would take from its own next root are not re-simulated). Routing is never
invented: the target's layer count, expert count and top-k must equal the trace's.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from ...config.errors import ConfigError
from ...moe import config as _moe_config  # noqa: F401  (registers the moe / tree_policy sections)
from ...moe.cache import ExpertCache
from ...moe.calibration import UnionCalibrator
from ...moe.cost import MoeCostModel, schedule_verify
from ...moe.drafter import eagle_head_spec, head_weight_bytes, resolve_kind
from ...moe.predictor import LearnedPredictor, RecallPredictor
from ...moe.stats import window_samples
from ...moe.synthetic import synthetic_trace
from ...moe.tree import (DraftTree, TreeView, accepted_length, accepted_path, expert_union, is_ancestor_closed,
                         reroot)
from ...policies.tree_base import TreePolicy
from ...workload.models import get_model, with_precision
from ...traces.format import TraceError
from ..base import Mode, TaskCost, register_mode

GIB = 2**30
_TRACE_CACHE: dict[tuple[str, float], Any] = {}


def load_tree_trace_cached(path: Path):
    from ...traces.tree import load_tree_trace
    key = (str(path.resolve()), path.stat().st_mtime)
    tt = _TRACE_CACHE.get(key)
    if tt is None:
        if len(_TRACE_CACHE) > 8:
            _TRACE_CACHE.clear()
        tt = _TRACE_CACHE[key] = load_tree_trace(path)
    return tt


def tree_of_round(tt, r: int) -> DraftTree:
    sl = tt.nodes(r)
    prompts = tt.header.get("prompts", [])
    p = int(tt.round_prompt[r])
    plen = int(prompts[p].get("prompt_len", 0)) if p < len(prompts) and isinstance(prompts[p], dict) else 0
    parent = tt.node_parent[sl].astype(np.int64)
    return DraftTree(parent=parent, q_prob=tt.node_q[sl].astype(float), correct=tt.node_accept[sl].astype(bool),
                     experts=tt.node_moe_ids[sl].astype(np.int64), kv_len=plen + int(tt.round_pos[r]), index=r,
                     extras={"expanded": tt.node_expanded[sl].astype(bool), "tok": tt.node_tok[sl].astype(np.int64),
                             "gid": np.arange(sl.start, sl.stop, dtype=np.int64),
                             "n_commit_recorded": int(tt.round_n_commit[r])},
                     recorded_accepted=int(tt.round_accept_len[r]))


@register_mode("moe_offload")
class MoeOffloadMode(Mode):
    replays_own_windows = True   # one pass over the tree trace; windows = blocks of rounds
    drafts_trees = True
    """Tree drafting + GPU tree verification with experts offloaded to host memory."""

    required_devices = ("gpu", "h2d")

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        cfg, mc = ctx.cfg, ctx.cfg.moe
        if not isinstance(self.policy, TreePolicy):
            from ...policies import POLICIES
            names = ", ".join(sorted(n for n, c in POLICIES.items() if getattr(c, "is_tree_policy", False)))
            raise ConfigError(cfg.source_of("run.policy"), "run.policy", f"mode moe_offload needs a tree policy ({names}), got "
                              f"'{cfg.run.policy}'")
        self.policy.configure(cfg.tree_policy)
        if not mc.tree_trace:
            raise ConfigError(cfg.source_of("moe.tree_trace"), "moe.tree_trace", "mode moe_offload needs a tree trace file")
        from ...paths import resolve_data_path
        path = resolve_data_path(mc.tree_trace, cfg.source_file)
        if not path.is_file():
            raise ConfigError(cfg.source_of("moe.tree_trace"), "moe.tree_trace", f"tree trace '{mc.tree_trace}' not found")
        try:
            self.tt = load_tree_trace_cached(path)
        except TraceError as exc:
            from ...traces.load import chosen_by
            raise chosen_by(cfg, "moe.tree_trace", exc) from None
        self.tree_trace_path = str(mc.tree_trace)
        target = get_model(cfg.run.target_model, cfg.source_file)
        if mc.routing == "synthetic":
            if not target.is_moe:
                raise ConfigError(cfg.source_of("run.target_model"), "run.target_model",
                                  f"'{target.name}' is dense; synthetic routing needs a MoE target")
            self.tt = synthetic_trace(self.tt, target.n_layers, target.n_experts, target.n_active_experts,
                                      mc.synthetic_locality, mc.synthetic_zipf_s, mc.synthetic_seed)
        tt = self.tt
        if not target.is_moe:
            raise ConfigError(cfg.source_of("run.target_model"), "run.target_model", f"'{target.name}' is dense; moe_offload needs a MoE "
                              f"target (the trace routes E={tt.n_experts} top-{tt.moe_k}, e.g. "
                              f"qwen2.5-coder-1.5b-moefied-e{tt.n_experts}k{tt.moe_k})")
        if (target.n_layers, target.n_experts, target.n_active_experts) != (tt.n_layers, tt.n_experts, tt.moe_k):
            raise ConfigError(cfg.source_of("run.target_model"), "run.target_model",
                              f"'{target.name}' has {target.n_layers} layers, {target.n_experts} experts, "
                              f"top-{target.n_active_experts} but the tree trace recorded {tt.n_layers} layers, "
                              f"{tt.n_experts} experts, top-{tt.moe_k}; refusing to invent routing")
        dev = mc.drafter_device
        if dev != "gpu" and getattr(ctx.platform, dev, None) is None:
            raise ConfigError(cfg.source_of("moe.drafter_device"), "moe.drafter_device", f"drafter on '{dev}' but the platform has no {dev} "
                              f"(set {dev}.enabled: true)")
        self.target = with_precision(target, mc.weight_bytes_per_param, mc.kv_bytes_per_elem)
        self.drafter_kind = resolve_kind(cfg.run.drafter, self.policy.drafts, dev)
        if self.drafter_kind == "lookup":
            raise ConfigError(cfg.source_of("run.drafter"), "run.drafter", "mode moe_offload replays a tree trace "
                              "whose acceptance was recorded with a model drafter; lookup drafting has no tree "
                              "trace here (use model or head)")
        if self.drafter_kind == "head":
            if dev != "gpu":
                raise ConfigError(cfg.source_of("moe.drafter_device"), "moe.drafter_device",
                                  f"an EAGLE head reads the target's features on the GPU; drafter on '{dev}' "
                                  f"needs run.drafter model")
            self.draft = eagle_head_spec(self.target, mc.head_ffn_width)
        else:
            self.draft = with_precision(get_model(cfg.run.draft_model, cfg.source_file), mc.weight_bytes_per_param,
                                        mc.kv_bytes_per_elem)
        self.cm = MoeCostModel(ctx.platform, self.target, self.draft, mc, cfg.run.kv_len_quantum_tokens,
                               cpu=cfg.host_cpu)
        L, E = tt.n_layers, tt.n_experts
        total = L * E
        if mc.cache_capacity_unit == "fraction":
            if mc.cache_capacity > 1:
                raise ConfigError(cfg.source_of("moe.cache_capacity"), "moe.cache_capacity", f"a fraction must be <= 1, got {mc.cache_capacity}")
            cap = int(round(mc.cache_capacity * total))
        elif mc.cache_capacity_unit == "experts":
            if not float(mc.cache_capacity).is_integer():
                raise ConfigError(cfg.source_of("moe.cache_capacity"), "moe.cache_capacity",
                                  f"expected a whole number of experts (moe.cache_capacity_unit experts), got "
                                  f"{mc.cache_capacity:g}")
            cap = int(mc.cache_capacity)
        elif mc.cache_capacity_unit == "gib":
            cap = int(mc.cache_capacity * GIB // self.cm.expert_bytes)
        else:      # auto: what the memory left after everything else holds
            cap = int(max(0.0, self._memory_left_bytes()) // self.cm.expert_bytes)
        if mc.cache_capacity_unit != "auto":
            # a size past the model or below one expert was clamped or floored without a word
            unit_text = {"fraction": "of all experts", "experts": "experts", "gib": "GiB"}[mc.cache_capacity_unit]
            if cap > total:
                most = {"fraction": "1", "experts": str(total),
                        "gib": f"{total * self.cm.expert_bytes / GIB:.4g}"}[mc.cache_capacity_unit]
                raise ConfigError(cfg.source_of("moe.cache_capacity"), "moe.cache_capacity",
                                  f"{mc.cache_capacity:g} {unit_text} is more than the model's {total} experts "
                                  f"({L} layers x {E}); at most {most}")
            if mc.cache_capacity > 0 and cap == 0:
                raise ConfigError(cfg.source_of("moe.cache_capacity"), "moe.cache_capacity",
                                  f"{mc.cache_capacity:g} {unit_text} holds no whole expert (one is "
                                  f"{self.cm.expert_bytes / 2**20:.3g} MiB, {1 / total:.3g} of all); give 0 for no "
                                  "cache or at least one expert")
        cap = min(cap, total)
        self.memory_split = self._memory_split(cap)
        self.start_round = int(mc.trace_start_round)
        if self.start_round >= len(tt):
            raise ConfigError(cfg.source_of("moe.trace_start_round"), "moe.trace_start_round", f"the tree trace has {len(tt)} rounds")
        self.end_round = int(mc.trace_end_round) or len(tt)
        if mc.trace_end_round and not self.start_round < self.end_round <= len(tt):
            raise ConfigError(cfg.source_of("moe.trace_end_round"), "moe.trace_end_round", f"expected moe.trace_start_round ({self.start_round}) < "
                              f"end <= {len(tt)} (the tree trace's rounds), got {mc.trace_end_round}")
        if mc.profile_start_round >= 0 and mc.profile_start_round + mc.profile_rounds > len(tt):
            raise ConfigError(cfg.source_of("moe.profile_start_round"), "moe.profile_start_round", f"profile rounds {mc.profile_start_round}.."
                              f"{mc.profile_start_round + mc.profile_rounds} exceed the trace's {len(tt)} rounds")
        pop, self.profile = self._popularity(mc.profile_rounds)
        self.cache = ExpertCache(L, E, cap, mc.cache_policy, mc.cache_scope, pop,
                                 fill=mc.cache_initial == "popular",
                                 activation_half_life_passes=mc.activation_half_life_passes)
        self.predictor = RecallPredictor(mc.predictor_recall, E, ctx.rng)
        self.learned = self._learned_predictor(mc.profile_rounds)
        if mc.predictor == "learned" and self.learned is None:
            raise ConfigError(cfg.source_of("moe.predictor"), "moe.predictor", "the learned predictor needs profile rounds "
                              "(moe.profile_rounds > 0) to learn from")
        self.calib = (UnionCalibrator(tt.moe_k, mc.calibration_half_life_passes)
                      if mc.cost_calibration == "online" else None)
        self.h2d_free_s = 0.0
        self.static_w = sum(ctx.platform.devices().values())
        # per-round records (CI windows) and totals
        self.rounds: list[dict] = []
        self.copied_demand = 0
        self.copied_prefetch = 0
        self.copy_stall_s = 0.0
        self.passes = 0
        self.cpu_expert_runs = 0
        self.pass_distinct: list[int] = []
        self.verified_nodes: set[int] = set()
        self.verify_model_error: list[float] = []
        self.wasted_guesses = 0
        self.keep_layer_log = bool(ctx.extras.get("keep_layer_log", False))
        self.layer_log: list = []

    # ------------------------------------------------------------------ setup helpers
    def _drafter_bytes(self) -> float:
        mc = self.ctx.cfg.moe
        if self.drafter_kind == "head":
            return head_weight_bytes(self.draft)
        return self.draft.weight_bytes() if mc.drafter_device == "gpu" and self.policy.drafts else 0.0

    def _memory_left_bytes(self) -> float:
        """GPU memory for the expert cache: usable - dense weights - drafter - KV reserve - workspace."""
        mc = self.ctx.cfg.moe
        return (self.ctx.platform.gpu.usable_memory_bytes - self.cm.dense_weight_bytes() - self._drafter_bytes()
                - self.target.kv_bytes_per_token() * mc.kv_reserve_tokens - mc.workspace_gib * GIB)

    def _memory_split(self, cap: int) -> dict:
        cfg = self.ctx.cfg
        gpu = self.ctx.platform.gpu
        mc = self.ctx.cfg.moe
        dense = self.cm.dense_weight_bytes()
        drafter = self._drafter_bytes()
        kv = self.target.kv_bytes_per_token() * mc.kv_reserve_tokens
        ws = mc.workspace_gib * GIB
        cache = cap * self.cm.expert_bytes
        usable = gpu.usable_memory_bytes
        if dense + drafter + kv + ws + cache > usable:
            raise ConfigError(cfg.source_of("moe.cache_capacity"), "moe.cache_capacity",
                              f"GPU memory: dense {dense / GIB:.2f} + drafter {drafter / GIB:.2f} + KV "
                              f"{kv / GIB:.2f} + workspace {ws / GIB:.2f} + expert cache {cache / GIB:.2f} GiB "
                              f"exceed the usable {usable / GIB:.2f} GiB of {gpu.cfg.name}")
        return {"dense_weights_gib": dense / GIB, "drafter_weights_gib": drafter / GIB, "kv_reserve_gib": kv / GIB,
                "workspace_gib": ws / GIB,
                "expert_cache_gib": cache / GIB, "usable_gib": usable / GIB, "all_experts_gib":
                self.cm.all_expert_bytes() / GIB, "expert_bytes": self.cm.expert_bytes,
                "cache_capacity_experts": cap, "total_experts": self.tt.n_layers * self.tt.n_experts}

    def _popularity(self, n_profile: int):
        """Expert popularity from the committed tokens' routing of profile rounds: those just before
        the replayed ones, else the trace's last rounds (flagged if the replay reaches them)."""
        tt = self.tt
        L, E = tt.n_layers, tt.n_experts
        pop = np.zeros((L, E))
        if n_profile <= 0:
            return pop, {"rounds": [0, 0], "tokens": 0, "overlaps_replay": False}
        if self.ctx.cfg.moe.profile_start_round >= 0:
            lo = self.ctx.cfg.moe.profile_start_round
            hi = lo + n_profile
        elif self.start_round > 0:
            lo, hi = max(0, self.start_round - n_profile), self.start_round
        else:
            lo, hi = max(0, len(tt) - n_profile), len(tt)
        c0 = int(tt.round_commit_offset[lo])
        c1 = int(tt.round_commit_offset[hi - 1] + tt.round_n_commit[hi - 1])
        cn = tt.commit_node[c0:c1]
        cn = cn[cn >= 0]
        ids = tt.node_moe_ids[cn].astype(np.int64)          # [n, L, k]
        for layer in range(L):
            pop[layer] += np.bincount(ids[:, layer, :].ravel(), minlength=E)[:E]
        return pop, {"rounds": [int(lo), int(hi)], "tokens": int(len(cn)), "overlaps_replay": False}

    def _learned_predictor(self, n_profile: int):
        """The learned routing predictor, trained on every node of the profile rounds."""
        lo, hi = self.profile["rounds"]
        if n_profile <= 0 or hi <= lo:
            return None
        tt = self.tt
        a, b = int(tt.round_node_offset[lo]), int(tt.round_node_offset[hi - 1] + tt.round_n_nodes[hi - 1])
        return LearnedPredictor(tt.node_tok[a:b], tt.node_moe_ids[a:b], tt.n_experts)

    def predict(self, tree: DraftTree) -> np.ndarray:
        """The routing the policy sees for every node of ``tree``: learned from the draft tokens (and
        verified history), or the recall model of the truth."""
        if self.ctx.cfg.moe.predictor == "learned":
            return self.learned.predict_tokens(tree.extras["tok"])
        return self.predictor.predict(tree.experts)

    # ------------------------------------------------------------------ run
    def start(self):
        self.env.process(self._loop())
        return self.done

    def _view(self, tree: DraftTree, pred, depth: int, draft_s: float, lm, next_s: float) -> TreeView:
        res = self.cache.resident_mask.copy()
        res.flags.writeable = False
        return TreeView(parent=tree.parent, q_prob=tree.q_prob, path_prob=tree.path_prob, depth=tree.depth,
                        drafted_depth=depth, predicted_experts=pred, resident=res, costs=lm,
                        draft_time_s=draft_s, next_level_draft_s=next_s, recorded_depth=tree.max_depth,
                        now_s=self.env.now, union_scale=self.calib.union_scale if self.calib else 1.0,
                        miss_scale=self.calib.miss_scale if self.calib else 1.0)

    def _level_tokens(self, tree: DraftTree, d: int) -> int:
        """Drafter tokens forwarded to produce level d+1: the expanded nodes at depth d."""
        exp = tree.extras.get("expanded")
        at = tree.depth == d
        if exp is None:
            return int(len(np.unique(tree.parent[tree.depth == d + 1])))
        return int((exp & at).sum())

    def _prefetch(self, tree: DraftTree, pred, d: int, budget: list) -> float:
        """Copy the predicted experts of the new level's nodes (FIFO copy stream); returns energy."""
        col = self.col
        nodes = np.flatnonzero(tree.depth == d)
        now = self.env.now
        n = 0
        for v in nodes:
            for layer in range(pred.shape[1]):
                for e in pred[v, layer]:
                    key = (layer, int(e))
                    if budget[0] <= 0 or key in self.cache:
                        continue
                    start, end = self.cm.copy_end_s(now, self.h2d_free_s)
                    if not self.cache.insert(layer, int(e), end):
                        continue
                    col.busy("h2d", start, end, "prefetch")
                    self.h2d_free_s = end
                    budget[0] -= 1
                    n += 1
        e_j = self.cm.copy_energy_j(n)
        col.energy("h2d", e_j, "prefetch")
        self.copied_prefetch += n
        return e_j

    def _loop(self):
        cfg, mc = self.ctx.cfg, self.ctx.cfg.moe
        tt, col, ctr = self.tt, self.col, self.col.counters
        r = self.start_round
        while not self.done.triggered:
            if r >= self.end_round and self.ctx.cfg.moe.trace_end_round:
                self.done.succeed()     # the round budget binds before the token budget
                break
            if r >= len(tt):
                raise ConfigError(cfg.source_of("run.generated_tokens"), "run.generated_tokens",
                                  f"{self.n_tokens} tokens need more rounds than the tree trace has "
                                  f"({len(tt) - self.start_round} from moe.trace_start_round "
                                  f"{self.start_round}; committed {self.committed})")
            if self.profile["rounds"][0] <= r < self.profile["rounds"][1]:
                self.profile["overlaps_replay"] = True
            full = tree_of_round(tt, r)
            path = accepted_path(full)
            n_rec = min(int(full.extras["n_commit_recorded"]), len(path) + 1)
            round_start, energy0 = self.env.now, sum(col.dynamic_energy_j.values())
            done_in_round = distinct = 0
            # every committed token of the recorded round is generated: a pass that commits fewer
            # tokens than recorded is followed by a pass from the last committed node (its subtree)
            while done_in_round < n_rec and self.committed < self.n_tokens:
                root = 0 if done_in_round == 0 else path[done_in_round - 1]
                n_commit, dist = yield from self._pass(reroot(full, root, done_in_round), r)
                done_in_round += n_commit
                distinct += dist
                self.passes += 1
            dur = self.env.now - round_start
            self.rounds.append({"tokens": done_in_round, "time_s": dur, "distinct": distinct, "round": r,
                                "energy_j": sum(col.dynamic_energy_j.values()) - energy0 + self.static_w * dur})
            r += 1
            if self.committed >= self.n_tokens:
                self.done.succeed()

    def _pass(self, tree: DraftTree, r: int):
        """One draft + verify pass over ``tree`` (a recorded round's tree or the subtree below its
        last committed node); returns (tokens committed, distinct experts touched)."""
        mc, col, ctr = self.ctx.cfg.moe, self.col, self.col.counters
        pred = self.predict(tree)
        lm = self.cm.linear_model(tree.kv_len)
        draft_s, d = 0.0, 0
        budget = [mc.prefetch_max_experts_per_round]
        view = self._view(tree, pred, 0, 0.0, lm, 0.0)
        drafting = self.policy.drafts and self.policy.wants_draft(view)
        while drafting and d < tree.max_depth:
            m = self._level_tokens(tree, d)
            dur, energy, busy = self.cm.draft_level_cost(m, tree.kv_len + d, self.costs)
            yield from self.run_task(TaskCost(dur, energy, busy), "draft")
            draft_s += dur
            d += 1
            ctr.discarded_draft_forwards += 0
            if mc.prefetch:
                self._prefetch(tree, pred, d, budget)
            nxt = 0.0
            if d < tree.max_depth:
                nxt = self.cm.draft_level_cost(self._level_tokens(tree, d), tree.kv_len + d, self.costs)[0]
            view = self._view(tree, pred, d, draft_s, lm, nxt)
            if not self.policy.continue_drafting(view):
                break
        sel = [int(v) for v in self.policy.select(view)]
        if not is_ancestor_closed(tree.parent, sel) or any(tree.depth[v] > d for v in sel):
            raise RuntimeError(f"policy {self.policy.name} selected an invalid subtree {sel} "
                               f"(drafted depth {d})")
        unions = expert_union(tree.experts, sel)
        t0 = self.env.now
        rows = [0, *sorted(sel)]
        guess = None
        if mc.overlap == "next_layer" and mc.next_layer_guess == "learned" and self.learned is not None:
            def guess(layer, _unions, _rows=tree.experts[rows]):   # layer-1's routing: computed in this pass
                return self.learned.next_layer_guess(_rows[:, layer - 1], layer - 1)
        counts = None
        if mc.expert_execution != "gpu":      # tokens per expert: the CPU's work grows with them
            sub = tree.experts[rows]
            counts = [dict(zip(*(x.tolist() for x in np.unique(sub[:, layer], return_counts=True))))
                      for layer in range(sub.shape[1])]
        res = schedule_verify(self.cm, self.cache, unions, len(sel) + 1, tree.kv_len, t0,
                              self.h2d_free_s, mc.overlap if mc.expert_execution == "gpu" else "none", guess,
                              mc.expert_execution, counts)
        for a, b in res.cpu_intervals or ():
            col.busy("cpu", a, b, "cpu_experts")
        if res.cpu_busy_s:
            col.energy("cpu", self.cm.cpu_energy_j(res.cpu_busy_s), "cpu_experts")
        self.cpu_expert_runs += res.cpu_experts
        self.wasted_guesses += res.wasted_prefetch
        if self.learned is not None:      # the pass revealed the routing of the root and the selected nodes
            if mc.predictor == "learned":
                self.learned.score(pred[rows], tree.experts[rows])
            self.learned.observe_verified(tree.experts[rows])
        if "gid" in tree.extras:          # trace nodes whose routing a pass revealed (tested: nothing else is read)
            self.verified_nodes.update(int(g) for g in tree.extras["gid"][rows])
        if self.calib is not None:        # verified tokens only: the root and the selected nodes
            self.calib.observe(pred[rows], tree.experts[rows], view.resident)
        self.h2d_free_s = res.h2d_free_s
        # the policy's cycle-time model on the true routing and the residency it was shown,
        # vs the simulated pass: they agree when the cache keeps what the pass needs
        model_s = lm.cycle_time(len(sel), unions, view.resident)
        self.verify_model_error.append(model_s / (res.end_s - t0) - 1.0)
        for a, b in res.copy_intervals:
            col.busy("h2d", a, b, "expert_copy")
        for rec in res.layers:
            col.busy("gpu", rec.dense_start_s, rec.dense_end_s, "verify")
            if rec.expert_end_s > rec.expert_start_s:
                col.busy("gpu", rec.expert_start_s, rec.expert_end_s, "verify_experts")
            self.copy_stall_s += rec.expert_start_s - rec.dense_end_s
        if res.end_s > res.layers[-1].expert_end_s:
            col.busy("gpu", res.layers[-1].expert_end_s, res.end_s, "verify")
        if self.keep_layer_log:
            self.layer_log.append(res)
        col.energy("gpu", self.cm.gpu_energy_j(res.gpu_busy_s), "verify")
        col.energy("h2d", self.cm.copy_energy_j(res.copied_experts), "expert_copy")
        self.copied_demand += res.copied_experts
        yield self.env.timeout(max(0.0, res.end_s - self.env.now))
        acc = accepted_length(tree, sel)
        n_commit = min(acc + 1, tree.extras["n_commit_recorded"], self.n_tokens - self.committed)
        ctr.verifications += 1
        ctr.drafted_tokens += len(sel)
        ctr.accepted_tokens += acc
        ctr.rejected_tokens += len(sel) - acc
        col.event(t0, "verify", position=self.committed, n_tokens=len(sel), accepted=acc,
                  duration_s=self.env.now - t0, round=r, levels=d,
                  experts_touched=res.distinct_total, expert_copies=res.copied_experts)
        col.commit(range(self.committed, self.committed + n_commit))
        self.committed += n_commit
        self.frontier = self.committed
        self.policy.on_tree_verified(len(sel), acc, d, res.end_s - t0)
        self.pass_distinct.append(res.distinct_total)
        return n_commit, res.distinct_total

    # ------------------------------------------------------------------ reporting
    def summary_fields(self, summary: dict | None = None) -> dict[str, Any]:
        rounds = self.rounds
        nb = self.cm.expert_bytes
        distinct = self.pass_distinct
        w = window_samples([x["tokens"] for x in rounds], [x["time_s"] for x in rounds],
                           [x["energy_j"] for x in rounds], self.ctx.cfg.moe.ci_windows)
        tm = self.tt.header.get("models", {})
        return {
            "trace": self.tree_trace_path,   # acceptance and routing come from the tree trace
            "trace_models": {"drafter": tm.get("drafter", {}).get("name"),
                             "target": tm.get("target", {}).get("name")},
            "expert_h2d_bytes": float((self.copied_demand + self.copied_prefetch) * nb),
            "expert_h2d_bytes_demand": float(self.copied_demand * nb),
            "expert_h2d_bytes_prefetch": float(self.copied_prefetch * nb),
            "expert_cache_hit_rate": self.cache.hit_rate,
            "experts_touched_per_verify": float(np.mean(distinct)) if distinct else 0.0,
            "experts_touched_per_layer_per_verify": (float(np.mean(distinct)) / self.tt.n_layers
                                                     if distinct else 0.0),
            # per verification pass (a recorded round may take several: every committed token is generated)
            "accepted_length_per_round": (self.col.counters.accepted_tokens / self.passes) if self.passes else 0.0,
            "verify_passes": self.passes,
            "expert_copy_stall_s": self.copy_stall_s,
            "cpu_expert_runs": self.cpu_expert_runs,
            # combined by simulation.combine_windows into the project-wide *_ci95 fields
            "mode_windows": {"basis": "contiguous blocks of verification rounds (moe.ci_windows)",
                             "n": len(w["throughput_tok_s"]), **w, **_window_totals(rounds, self.ctx.cfg.moe.ci_windows),
                             "tokens_per_j": [1.0 / e if e > 0 else float("nan") for e in w["energy_per_token_j"]]},
        }

    def stats(self) -> dict[str, Any]:
        tt = self.tt
        m = tt.header.get("moe", {})
        return {
            "tree_trace": self.tree_trace_path,
            "tree_trace_label": m.get("label", ""),
            "routing": ("synthetic" if self.ctx.cfg.moe.routing == "synthetic" else "recorded in the tree trace"),
            "tree_trace_constructed_example": bool(tt.header.get("constructed_example", False)),
            "tree_trace_sha256": _sha256(self.tt.path),
            "rounds": len(self.rounds),
            "first_round": self.start_round,
            "memory_split": self.memory_split,
            "cache": self.cache.stats(),
            "profile": self.profile,
            "predictor": (self.learned.stats() if self.ctx.cfg.moe.predictor == "learned"
                          else {"kind": "recall", "node_recall": self.predictor.recall}),
            "next_layer_wasted_copies": self.wasted_guesses,
            "cost_calibration": self.calib.stats() if self.calib else {"kind": "none"},
            "drafter": {"kind": self.drafter_kind, "model": self.draft.name},
            "overlap": self.ctx.cfg.moe.overlap,
            "expert_execution": self.ctx.cfg.moe.expert_execution,
            "moe_kernel": self.ctx.platform.gpu.cfg.moe_kernel,
            "drafter_device": self.ctx.cfg.moe.drafter_device,
            "verify_time_model_error": _err_stats(self.verify_model_error),
        }


def _window_totals(rounds: list[dict], n_windows: int) -> dict[str, list]:
    """Per window (the blocks of :func:`window_samples`): tokens, time, energy and the first round
    -- the totals ratio estimators pool."""
    k = max(1, min(int(n_windows), len(rounds)))
    out: dict[str, list] = {"generated_tokens": [], "makespan_s": [], "prefill_s": [], "energy_j": [],
                            "first_round": []}
    for idx in np.array_split(np.arange(len(rounds)), k):
        if idx.size == 0:
            continue
        out["generated_tokens"].append(int(sum(rounds[i]["tokens"] for i in idx)))
        out["makespan_s"].append(float(sum(rounds[i]["time_s"] for i in idx)))
        out["prefill_s"].append(0.0)
        out["energy_j"].append(float(sum(rounds[i]["energy_j"] for i in idx)))
        out["first_round"].append(int(rounds[idx[0]]["round"]))
    return out


def _err_stats(err: list[float]) -> dict:
    """Median and worst relative error of the policy's cycle-time model against the simulated
    verification time (true routing, the residency the policy saw)."""
    if not err:
        return {"median": 0.0, "worst": 0.0, "n": 0}
    a = np.asarray(err)
    return {"median": float(np.median(a)), "worst": float(a[np.argmax(np.abs(a))]), "n": int(a.size)}


def _sha256(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""
