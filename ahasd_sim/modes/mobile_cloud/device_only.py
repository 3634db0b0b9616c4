"""``device_only``: both models on the phone (drafter on PIM/NPU, target on the NPU), no cloud.

Synchronous draft-then-verify rounds on the mobile platform, reporting the same
mobile-cloud metrics (zero bytes, zero cloud cost) so it sits on the same plots. The
asynchronous AHASD execution of the same platform is the ``ahasd`` mode.
"""
from __future__ import annotations

from ..base import register_mode
from .engine import MobileCloudBase
from ..sync import SyncSpeculativeMode


@register_mode("device_only")
class DeviceOnlyMode(MobileCloudBase, SyncSpeculativeMode):
    """Co-located speculative decoding on the phone."""

    uses_cloud = False

    def draft_cost(self, kv_len):
        return self.dev_costs.draft(kv_len)

    def verify_cost(self, n_tokens, kv_len):
        return self.dev_costs.verify(n_tokens, kv_len)
