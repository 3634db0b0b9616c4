"""``cloud_autoregressive``: every token from the target on the cloud GPU, streamed down.

The phone sends one request; the cloud decodes token by token and each token travels
down the link on its own (TPOT does not pay the RTT per token, only the link's capacity).
"""
from __future__ import annotations

from ..base import register_mode
from .engine import MobileCloudEngine


@register_mode("cloud_autoregressive")
class CloudAutoregressiveMode(MobileCloudEngine):
    """Cloud-only decoding (mobile-cloud baseline)."""

    options = ("cloud_ar",)

    def configure(self) -> None:
        self.session_tokens = self.n_tokens   # one request for the whole generation
