"""Tree-selection policies (mode ``moe_offload``): which drafted nodes the target verifies.

A tree policy sees a :class:`~ahasd_sim.moe.tree.TreeView` after each draft level: the
drafter's tree (parents, draft probabilities), the routing *predicted* for its nodes (the
predictor model, ``moe.predictor_recall``), the expert cache's residency and the profiled
linear cost model -- never the target's verdicts or its recorded routing. It answers
``continue_drafting(view)`` after each level and finally ``select(view)``: an ancestor-closed
set of node ids (root excluded). Parameters: the ``tree_policy`` config section.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..config.errors import InputError
from .base import DraftPolicy


class TreePolicy(DraftPolicy):
    is_tree_policy: ClassVar[bool] = True
    drafts: ClassVar[bool] = True      # False: the mode runs no drafter forward (autoregressive)

    def __init__(self, config: Any, rng: np.random.Generator, fit_data: Any = None):
        super().__init__(config, rng, fit_data)
        self.params = None
        self.levels_drafted: list[int] = []

    def configure(self, tree_cfg) -> None:
        """Take this policy's parameters from the ``tree_policy`` section."""
        self.params = getattr(tree_cfg, self.name)

    def max_depth(self) -> int:
        return int(self.params.max_depth)

    def continue_drafting(self, view) -> bool:
        return view.drafted_depth < self.max_depth()

    def wants_draft(self, view) -> bool:
        """Before the first level (``view.drafted_depth == 0``): draft this round at all?"""
        return True

    def select(self, view) -> list[int]:  # pragma: no cover - abstract
        raise NotImplementedError

    def decide(self, view):
        raise InputError(f"policy '{self.name}' selects draft trees: use it with run.mode moe_offload")

    def on_tree_verified(self, n_selected: int, n_accepted: int, levels: int, verify_s: float = 0.0) -> None:
        """Aggregate outcome only (how many selected nodes were accepted, how long the pass took)."""
        self.round_lengths.append(n_selected)
        self.accepted_lengths.append(n_accepted)
        self.committed_lengths.append(n_accepted + 1)
        self.levels_drafted.append(levels)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out.pop("draft_length_histogram", None)
        out["mean_nodes_verified"] = out.pop("mean_draft_length")
        out["mean_levels_drafted"] = float(np.mean(self.levels_drafted)) if self.levels_drafted else 0.0
        return out


def top_by_confidence(view, nodes, n: int) -> list[int]:
    """The ``n`` nodes of highest cumulative draft confidence, ancestor-closed (parents first on ties)."""
    order = sorted((int(v) for v in nodes), key=lambda v: (-view.path_prob[v], view.depth[v], v))
    chosen: set[int] = set()
    for v in order:
        if len(chosen) >= n:
            break
        if int(view.parent[v]) == 0 or int(view.parent[v]) in chosen:
            chosen.add(v)
    return sorted(chosen)


def item_matrix(view, nodes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(own [n, I] bool: predicted items of each node not already required by the root, root [I]
    bool: the root's items, item_time [I]). Items: the L*E (layer, expert) pairs (c2, + fetch if
    not resident), then one per layer: "layer l copies something" (``first_fetch_extra``, the
    first copy of a layer meets an idle copy stream), required with any non-resident expert of l."""
    pred = view.predicted_experts
    L, E = view.resident.shape
    offs = (np.arange(L) * E)[:, None]
    miss = ~view.resident.ravel()
    layer_of = np.repeat(np.arange(L), E)
    root = np.zeros(L * E + L, dtype=bool)
    root[(pred[0] + offs).ravel()] = True
    root[L * E + np.unique(layer_of[root[:L * E] & miss])] = True
    idx = np.asarray(nodes, dtype=np.int64)
    own = np.zeros((len(idx), L * E + L), dtype=bool)
    if len(idx):
        flat = (pred[idx] + offs[None]).reshape(len(idx), -1)
        rows = np.repeat(np.arange(len(idx)), flat.shape[1])
        own[rows, flat.ravel()] = True
        missed = miss[flat.ravel()]
        own[rows[missed], L * E + layer_of[flat.ravel()[missed]]] = True
        own[:, root] = False
    m = view.costs
    # calibrated estimate (moe.calibration): a node's own items count union_scale true experts
    # each, every predicted copy miss_scale copies; the root's k experts per layer are exact
    us, ms = getattr(view, "union_scale", 1.0), getattr(view, "miss_scale", 1.0)
    c2 = np.where(root[:L * E], m.c2_s, m.c2_s * us)
    t = np.concatenate([np.where(miss, c2 + m.fetch_s * ms, c2),
                        np.full(L, getattr(m, "first_fetch_extra_s", 0.0))])
    return own, root, t
