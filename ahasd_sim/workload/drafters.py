"""Drafter kinds (``run.drafter``): a standalone model, an EAGLE-style head derived from the
target, or model-free lookup over the context.

A drafter is what the step costs and the PIM placement read: a model shape
(:class:`~ahasd_sim.workload.models.ModelSpec`: ``model`` and ``head``) or a
:class:`LookupDrafter`, which has no weights, only an n-gram index in the phone's DRAM.
"""
from __future__ import annotations

from dataclasses import dataclass

from .models import eagle_head, get_model

KINDS = ("model", "head", "lookup")

#: bytes of one n-gram index entry: a 64-bit key hash and a 32-bit position (open addressing)
INDEX_ENTRY_BYTES = 12


@dataclass(frozen=True)
class LookupDrafter:
    """Model-free drafter (prompt lookup / suffix match): no weights, no KV; its n-gram index
    holds one entry per context token and n-gram size."""

    max_ngram: int
    min_ngram: int
    kind: str = "lookup"

    @property
    def name(self) -> str:
        return f"lookup(n={self.min_ngram}..{self.max_ngram})"

    def weight_bytes(self) -> int:
        return 0

    def param_count(self) -> int:
        return 0

    def kv_bytes_per_token(self) -> float:
        """Index bytes added per context token (where a model would keep its KV)."""
        return float(INDEX_ENTRY_BYTES * (self.max_ngram - self.min_ngram + 1))

    def probes_per_token(self) -> int:
        """Hash probes per drafted token: one per n-gram size, longest first (worst case)."""
        return self.max_ngram - self.min_ngram + 1


def describe_acceptance(kind: str, recorded_drafter: str | None) -> str:
    """Where a run's acceptance comes from, in words: exact for the model drafter that recorded
    the trace and for lookup (replayed on the trace's target tokens), a what-if for a head."""
    recorded = recorded_drafter or "an unnamed drafter"
    if kind == "lookup":
        return ("exact: the lookup drafter replayed on the trace's target tokens (context: the generated "
                "tokens; the trace holds no prompt tokens)")
    if kind == "head":
        return (f"what-if: the trace's verdicts were recorded with a standalone drafter ({recorded}), "
                f"not an EAGLE head; the head's time and energy with that drafter's acceptance")
    return f"trace: recorded with the drafter {recorded}"


def resolve_kind(kind: str, family: str = "soc") -> str:
    """``run.drafter`` with ``auto`` resolved: ``model`` on the mobile SoC (and every family but
    MoE, whose own rule applies there)."""
    return "model" if kind == "auto" else kind


def make_drafter(kind: str, draft_model: str, target, lookup_cfg=None):
    """The drafter of ``kind`` (resolved) for ``target``: a model shape or a :class:`LookupDrafter`."""
    if kind == "model":
        return get_model(draft_model)
    if kind == "head":
        return eagle_head(target)
    if kind == "lookup":
        return LookupDrafter(int(lookup_cfg.max_ngram), int(lookup_cfg.min_ngram))
    raise ValueError(f"unknown drafter kind '{kind}'; valid: {', '.join(KINDS)}")
