"""``device_draft_cloud_verify``: classic split speculative decoding, one round trip per round.

The phone drafts a window (drafting policy), uploads the ids (+ top-k probabilities),
waits while the cloud GPU verifies, and continues from the verdict. No pre-drafting, no
upload skipping (those are the ``hybrid`` mode's).
"""
from __future__ import annotations

from ..base import register_mode
from .engine import MobileCloudEngine


@register_mode("device_draft_cloud_verify")
class DeviceDraftCloudVerifyMode(MobileCloudEngine):
    """Split drafting: drafter on the phone, verifier in the cloud."""

    options = ("split",)
