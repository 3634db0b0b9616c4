"""``tree_sync`` / ``tree_pim``: draft trees on the mobile SoC, task-level synchronous.

Per round (one recorded tree of ``soc_tree.trace``): the drafter grows the tree level by level
on its PIM ranks, one forward per level over that level's expanded nodes
(:meth:`~ahasd_sim.modes.costs.tree.TreeCosts.draft_level`); after each level the tree policy
(``eagle_fixed``, ``eagle_dynamic``, ``hw_tree``) may stop; it then selects an ancestor-closed
subtree, which the target verifies in ONE pass with a tree attention mask: on the NPU
(``tree_sync``: the weights streamed once for all nodes) or on the target's PIM ranks
(``tree_pim``: ceil(nodes / k) weight passes on units holding k vectors). The round commits the
accepted path of the selected subtree plus the target's token; the KV of the accepted path is
kept, that of every other node discarded (:func:`kept_kv_nodes`).

Replay semantics (those of the tree trace and of ``moe_offload``): every round is evaluated at
its recorded root; a smaller subtree commits fewer tokens but the next round is the next
recorded one. The trace's verdicts come from its recorded drafter (the ``model`` kind); with
``run.drafter: head`` they are a what-if, as for chains; ``lookup`` drafts no trees.

AHASD's EDC/TVC do not carry over to these modes: EDC predicts whether a CHAIN's next token is
worth drafting from the entropy history of chain positions, and TVC pre-verifies a chain's
prefix on PIM while the NPU verifies; a tree round is verified in one pass after drafting
(nothing is left to pre-verify) and the per-level stop decision is the tree policy's
(``hw_tree``'s bound, or a fixed shape). Overlapping the next tree's drafting with this
tree's verification would need the next root, which is known only after verification.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...config.errors import ConfigError
from ...moe.tree import DraftTree, TreeView, accepted_length, is_ancestor_closed
from ...policies.tree_base import TreePolicy
from ...traces.format import TraceError
from ..base import Mode, register_mode
from ..moe.offload import load_tree_trace_cached, tree_of_round

#: tree policies whose view needs nothing but the drafter's tree and the pass's time
SOC_TREE_POLICIES = ("eagle_fixed", "eagle_dynamic", "hw_tree")


def kept_kv_nodes(tree: DraftTree, selected) -> list[int]:
    """Nodes whose KV is kept after verifying ``selected``: the root and the accepted path (each
    accepted node's parent is the previous one). Every other node's KV is discarded."""
    sel = set(int(v) for v in selected)
    path, cur = [0], 0
    while True:
        nxt = [v for v in sorted(sel) if int(tree.parent[v]) == cur and tree.correct[v]]
        if not nxt:
            return path
        cur = nxt[0]
        path.append(cur)


def tree_mask(parent: np.ndarray, rows: list[int]) -> np.ndarray:
    """Tree attention mask of a pass over ``rows`` (node ids, root first): row i may attend to
    column j iff node j is node i or one of its ancestors."""
    pos = {v: i for i, v in enumerate(rows)}
    m = np.zeros((len(rows), len(rows)), dtype=bool)
    for i, v in enumerate(rows):
        u = v
        while u >= 0:
            if u in pos:
                m[i, pos[u]] = True
            u = int(parent[u]) if u != 0 else -1
    return m


class _SocTreeCost:
    """What ``hw_tree`` sees of the hardware: the verification pass's time for n draft nodes."""

    def __init__(self, costs, kv_len: int, on: str, memo: dict):
        self._costs, self._kv, self._on, self._memo = costs, kv_len, on, memo

    def verify_s(self, n_nodes: int) -> float:
        return self._costs.tree_verify(n_nodes + 1, self._kv, self._on).duration_s

    def verify_s_upto(self, n_max: int) -> list[float]:
        """[verify_s(0), ..., verify_s(n_max)] (memoised per KV length)."""
        got = self._memo.get(self._kv)
        if got is None or len(got) <= n_max:
            got = self._memo[self._kv] = [self.verify_s(n) for n in range(max(n_max, 64) + 1)]
        return got


@register_mode("tree_sync")
class TreeSyncMode(Mode):
    """Tree drafting on PIM, one-pass tree verification on the NPU, nothing overlapped."""

    required_devices = ("npu", "pim")
    # placement is not tuned (pim.partition_policy auto means striped here): a tuning run would
    # replay the very tree trace whose rounds are reported, which holds no held-out part
    uses_pim_placement = False
    replays_own_windows = True     # one pass over the tree trace; windows = groups of prompts
    drafts_trees = True
    verify_on = "npu"

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        cfg = ctx.cfg
        name = cfg.run.policy
        if not isinstance(self.policy, TreePolicy) or name not in SOC_TREE_POLICIES:
            raise ConfigError(cfg.source_of("run.policy"), "run.policy",
                              f"mode {cfg.run.mode} needs a tree policy ({', '.join(SOC_TREE_POLICIES)}), got '{name}'")
        if cfg.run.drafter == "lookup":
            raise ConfigError(cfg.source_of("run.drafter"), "run.drafter",
                              f"mode {cfg.run.mode} drafts trees; the lookup drafter proposes one continuation "
                              "(use model or head)")
        self.policy.configure(cfg.soc_tree if name == "hw_tree" else cfg.tree_policy)
        from ...paths import resolve_data_path
        path = resolve_data_path(cfg.soc_tree.trace, cfg.source_file)
        if not path.is_file():
            raise ConfigError(cfg.source_of("soc_tree.trace"), "soc_tree.trace", f"tree trace '{cfg.soc_tree.trace}' not found")
        try:
            self.tt = load_tree_trace_cached(path)
        except TraceError as exc:
            from ...traces.load import chosen_by
            raise chosen_by(cfg, "soc_tree.trace", exc) from None
        self.rounds: list[dict] = []
        self.kv_kept_nodes = 0
        self.kv_discarded_nodes = 0
        self.static_w = sum(ctx.platform.devices().values())
        self._verify_memo: dict[int, list[float]] = {}

    def start(self):
        self.env.process(self._loop())
        return self.done

    def _level_tokens(self, tree: DraftTree, d: int) -> int:
        """Drafter tokens of the forward producing level d + 1: the expanded nodes at depth d."""
        exp = tree.extras.get("expanded")
        if exp is None:
            return int(len(np.unique(tree.parent[tree.depth == d + 1])))
        return int((exp & (tree.depth == d)).sum())

    def _view(self, tree, d, draft_s, nxt, kv):
        n = len(tree.parent)
        return TreeView(parent=tree.parent, q_prob=tree.q_prob, path_prob=tree.path_prob, depth=tree.depth,
                        drafted_depth=d, predicted_experts=np.zeros((n, 0, 0), dtype=np.int64),
                        resident=np.zeros((0, 0), dtype=bool),
                        costs=_SocTreeCost(self.costs, kv, self.verify_on, self._verify_memo),
                        draft_time_s=draft_s, next_level_draft_s=nxt, recorded_depth=tree.max_depth,
                        now_s=self.env.now)

    def _loop(self):
        tt, col, ctr, costs = self.tt, self.col, self.col.counters, self.costs
        prompts = tt.header.get("prompts", [])
        prev_prompt = None
        for r in range(len(tt)):
            tree = tree_of_round(tt, r)
            p = int(tt.round_prompt[r])
            if p != prev_prompt:        # a new prompt: its prefill (not in the decode figures)
                prev_prompt = p
                if self.ctx.cfg.run.prefill:
                    t0 = self.env.now
                    plen = int(prompts[p].get("prompt_len", 1)) if p < len(prompts) else 1
                    for label, cost in self.prefill_costs(plen):
                        yield from self.run_task(cost, label)
                    self.prefill_s += self.env.now - t0
                    self.prefills += 1
            kv = tree.kv_len
            round_start, energy0 = self.env.now, sum(col.dynamic_energy_j.values())
            draft_s, d = 0.0, 0
            view = self._view(tree, 0, 0.0, 0.0, kv)
            drafting = self.policy.drafts and self.policy.wants_draft(view)
            while drafting and d < tree.max_depth:
                cost = costs.draft_level(self._level_tokens(tree, d), kv + d)
                yield from self.run_task(cost, "draft")
                ctr.drafter_forwards += 1
                draft_s += cost.duration_s
                d += 1
                nxt = costs.draft_level(self._level_tokens(tree, d), kv + d).duration_s if d < tree.max_depth else 0.0
                view = self._view(tree, d, draft_s, nxt, kv)
                if not self.policy.continue_drafting(view):
                    break
            sel = [int(v) for v in self.policy.select(view)]
            if not is_ancestor_closed(tree.parent, sel) or any(tree.depth[v] > d for v in sel):
                raise RuntimeError(f"policy {self.policy.name} selected an invalid subtree {sel} (drafted depth {d})")
            t0 = yield from self.run_task(costs.tree_verify(len(sel) + 1, kv, self.verify_on), "verify")
            verify_s = self.env.now - t0
            acc = accepted_length(tree, sel)
            kept = kept_kv_nodes(tree, sel)
            if self.ctx.audit and len(kept) != acc + 1:
                raise AssertionError(f"round {r}: kept KV of {len(kept)} nodes for {acc} accepted tokens")
            self.kv_kept_nodes += len(kept) - 1
            self.kv_discarded_nodes += len(sel) - (len(kept) - 1)
            n_commit = min(acc + 1, tree.extras["n_commit_recorded"])
            ctr.verifications += 1
            ctr.drafted_tokens += len(sel)
            ctr.accepted_tokens += acc
            ctr.rejected_tokens += len(sel) - acc
            col.event(t0, "verify", position=self.committed, n_tokens=len(sel), accepted=acc,
                      duration_s=verify_s, round=r, levels=d)
            col.commit(range(self.committed, self.committed + n_commit))
            self.committed += n_commit
            self.frontier = self.committed
            self.policy.on_tree_verified(len(sel), acc, d, verify_s)
            dur = self.env.now - round_start
            self.rounds.append({"prompt": p, "tokens": n_commit, "time_s": dur, "round": r,
                                "energy_j": sum(col.dynamic_energy_j.values()) - energy0 + self.static_w * dur})
        self.done.succeed()

    # ------------------------------------------------------------------ reporting
    def summary_fields(self, summary: dict | None = None) -> dict[str, Any]:
        tm = self.tt.header.get("models", {})
        per = int(self.ctx.cfg.soc_tree.prompts_per_window)
        groups: dict[int, list[dict]] = {}
        order: list[int] = []
        for x in self.rounds:
            if x["prompt"] not in order:
                order.append(x["prompt"])
        for x in self.rounds:
            groups.setdefault(order.index(x["prompt"]) // per, []).append(x)
        w: dict[str, list] = {k: [] for k in ("generated_tokens", "decode_makespan_s", "decode_energy_j",
                                              "makespan_s", "prefill_s", "energy_j", "throughput_tok_s",
                                              "energy_per_token_j", "tokens_per_j")}
        for g in (groups[i] for i in sorted(groups)):
            t = float(sum(x["tokens"] for x in g))
            s = float(sum(x["time_s"] for x in g))
            e = float(sum(x["energy_j"] for x in g))
            for k, v in (("generated_tokens", t), ("decode_makespan_s", s), ("decode_energy_j", e),
                         ("makespan_s", s), ("prefill_s", 0.0), ("energy_j", e)):
                w[k].append(v)
            w["throughput_tok_s"].append(t / s if s > 0 else float("nan"))
            w["energy_per_token_j"].append(e / t if t > 0 else float("nan"))
            w["tokens_per_j"].append(t / e if e > 0 else float("nan"))
        from ...workload.drafters import describe_acceptance
        drafter = tm.get("drafter", {}).get("name")
        return {
            "trace": str(self.ctx.cfg.soc_tree.trace),   # acceptance comes from the tree trace
            "trace_models": {"drafter": drafter, "target": tm.get("target", {}).get("name")},
            "acceptance_source": describe_acceptance((summary or {}).get("drafter", "model"), drafter),
            "accepted_length_per_round": (self.col.counters.accepted_tokens / len(self.rounds)) if self.rounds else 0.0,
            "mode_windows": {"basis": f"groups of {per} consecutive prompts of the tree trace (decode only)",
                             "n": len(w["generated_tokens"]), **w},
        }

    def stats(self) -> dict[str, Any]:
        return {"tree_trace": str(self.ctx.cfg.soc_tree.trace), "rounds": len(self.rounds),
                "verify_on": self.verify_on, "kv_kept_nodes": self.kv_kept_nodes,
                "kv_discarded_nodes": self.kv_discarded_nodes,
                "tree_policy": self.ctx.cfg.run.policy}


@register_mode("tree_pim")
class TreePimMode(TreeSyncMode):
    """Tree drafting on the drafter's PIM ranks, one-pass tree verification on the target's PIM
    ranks (ceil(nodes / k) weight passes), nothing overlapped."""

    verify_on = "pim"
