"""``hybrid``: our reconstruction of HyCo (hybrid drafting for mobile-cloud speculative decoding).

Only HyCo's title is public; this mode combines the published mechanisms its title names
(see :mod:`ahasd_sim.modes.mobile_cloud`): split rounds with pre-drafting during the round
trip and U-HLM-style upload skipping for confident tokens, cloud drafting and cloud
autoregressive decoding as fallbacks, chosen per round by predicted goodput per cost
(``hyco.tpot_slo_ms``) from what the phone has observed so far.
"""
from __future__ import annotations

from ...config.errors import ConfigError
from ..base import register_mode
from .engine import OPTIONS, MobileCloudEngine


@register_mode("hybrid")
class HybridMode(MobileCloudEngine):
    """HyCo reconstruction: per-round choice among split / cloud drafting / cloud AR."""

    def configure(self) -> None:
        hy = self.ctx.cfg.hyco
        bad = [o for o in hy.options if o not in OPTIONS]
        if bad or not hy.options:
            raise ConfigError(self.ctx.cfg.source_of("hyco.options"), "hyco.options",
                              f"expected a non-empty list of {', '.join(OPTIONS)}, got {hy.options}")
        self.options = tuple(dict.fromkeys(hy.options))
        self.predraft = {"always": True, "never": False}.get(hy.predraft, "auto")
        if len(self.options) == 1 and self.options[0] != "split":
            # nothing to decide between: one continuous stream, not sessions the phone renews
            # (a session boundary would idle the GPU for a round trip at long RTTs)
            self.session_tokens = self.n_tokens
        self.skip = hy.skip_max_entropy_nats >= 0
