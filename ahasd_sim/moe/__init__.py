"""MoE expert offload over H2D: draft trees, expert cache, verification cost, predictor.

Modules: :mod:`.tree` (one round's draft tree and what verification reveals), :mod:`.predictor`
(the routing predictor policies see), :mod:`.cache` (GPU expert cache: LRU, LFU, static),
:mod:`.cost` (tree-verification cost: dense part + per-layer expert union + H2D copies),
:mod:`.closure` (max-weight closure by min-cut, for SpecFit), :mod:`.stats` (CIs over windows),
:mod:`.config` (the ``moe`` and ``tree_policy`` config sections).
"""
