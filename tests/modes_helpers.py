"""Helpers for mode tests: a synthetic replay trace and fixed task costs."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import simpy

from ahasd_sim.config import load_config
from ahasd_sim.metrics.collector import Collector
from ahasd_sim.modes import RunContext, get_mode
from ahasd_sim.modes.base import TaskCost
from ahasd_sim.modes.replay import TraceReplay
from ahasd_sim.policies import make_policy


def synthetic_trace(accept, entropy=0.5, rollout_len=8, rollout_entropy=2.0):
    """A minimal in-memory trace: accept flags, constant entropies, rollouts at every rejection."""
    accept = np.asarray(accept, dtype=bool)
    n = accept.size
    ro_len = np.where(accept, 0, rollout_len).astype(np.int64)
    ro_off = np.concatenate([[0], np.cumsum(ro_len)[:-1]]).astype(np.int64)
    m = int(ro_len.sum())
    return SimpleNamespace(
        accept=accept, prompt_len=np.full(n, 100), pos_in_response=np.arange(n),
        drf_H=np.full(n, entropy), drf_p_tok=np.full(n, 0.8), drf_p_top1=np.full(n, 0.8),
        topk_p=np.tile([0.8, 0.1, 0.05, 0.05], (n, 1)), rollout_offset=ro_off, rollout_len=ro_len,
        rollout_H=np.full(m, rollout_entropy), rollout_p=np.full(m, 0.3), tgt_tok=np.arange(n) + 1000,
        header={}, __len__=None,
    )


class _Len(SimpleNamespace):
    def __len__(self):
        return self.accept.size


def as_trace(ns):
    d = dict(vars(ns))
    d.pop("__len__", None)
    return _Len(**d)


class FixedCosts:
    """Constant task durations (seconds); energy 1 J per busy second on the busy device."""

    def __init__(self, draft_s=1.0, verify_s=5.0, preverify_per_token_s=1.0, switch_s=0.0,
                 verify_per_token_s=0.0):
        self.d, self.v, self.pv, self.sw, self.vt = draft_s, verify_s, preverify_per_token_s, switch_s, verify_per_token_s

    def _t(self, dev, dur):
        return TaskCost(dur, {dev: dur}, {dev: dur})

    def draft_token(self, kv_len):
        return self._t("pim", self.d)

    def verify(self, n_tokens, kv_len):
        return self._t("npu", self.v + self.vt * n_tokens)

    def preverify(self, n_tokens, kv_len):
        return self._t("pim", self.pv * n_tokens)

    def gts_switch(self):
        return self._t("pim", self.sw)

    host_share = 1.0   # no shared-rank contention
    draft_shares_ranks = False   # with contention: drafts on ranks of their own (only PV contends)

    def prefill(self, role, n_tokens):
        return self._t("npu", 0.0)     # scenarios check decode timelines

    def baseline_prefill(self, n_tokens):
        return self._t("gpu", 0.0)

    def gpu_prefill(self, role, n_tokens):
        return self._t("gpu", 0.0)

    def sharing_specs(self):
        """None without contention (host_share 1); else every task uses all of one group of ranks
        (weights host_share for the NPU, 1 - host_share for PIM): two tasks at once progress at
        host_share and 1 - host_share, a lone task at full rate."""
        if self.host_share >= 1.0:
            return None
        from ahasd_sim.hw.sharing import FlowSpec
        s = self.host_share
        draft_on = "ranks" if self.draft_shares_ranks else "draft_ranks"   # off: drafts never contend
        return {"verify": FlowSpec("verify", {"ranks": 1.0}, s), "draft": FlowSpec("draft", {draft_on: 1.0}, 1 - s),
                "preverify": FlowSpec("preverify", {"ranks": 1.0}, 1 - s)}

    def layer_split(self, task, n_tokens, kv_len):
        """Four equal layers, no head ops."""
        total = (self.verify(n_tokens, kv_len) if task == "verify" else self.preverify(n_tokens, kv_len)).duration_s
        return 4, total / 4, 0.0

    def gpu_draft_token(self, kv_len):
        return self._t("gpu", self.d)

    def gpu_verify(self, n_tokens, kv_len):
        return self._t("gpu", self.v + self.vt * n_tokens)

    def target_forward(self, n_tokens, kv_len):
        return self._t("gpu", self.v)

    def opsync_mapping(self, k):
        return {"draft": {}, "target": {}}

    def opsync_forward(self, role, n, kv, mapping):
        return self._t("npu", self.d if role == "draft" else self.v)


def run_mode(tmp_path, mode, accept, n_tokens, overrides=(), costs=None, entropy=0.5, rollout_len=8,
             rollout_entropy=2.0, seed=0):
    p = tmp_path / "cfg.yaml"
    p.write_text("{}\n")
    cfg = load_config(p, [f"run.mode={mode}", f"run.generated_tokens={n_tokens}", *overrides], seed=seed)
    trace = as_trace(synthetic_trace(accept, entropy, rollout_len, rollout_entropy))
    env = simpy.Environment()
    col = Collector(devices=["npu", "pim", "gpu"])
    rng = np.random.default_rng(seed)
    policy = make_policy(cfg.run.policy, cfg.policy, rng, None)
    ctx = RunContext(cfg=cfg, platform=None, costs=costs or FixedCosts(), replay=TraceReplay(trace, n_tokens),
                     policy=policy, collector=col, rng=rng, n_tokens=n_tokens)
    m = get_mode(mode)(env, ctx)
    done = m.start()
    env.run(until=simpy.AnyOf(env, [done, env.timeout(1e6)]))
    assert done.triggered, "mode did not finish"
    return m, col, env.now
