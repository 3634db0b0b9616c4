"""The mobile-cloud modes around the shared engine (``engine.py``: link, cloud verifier, peers):
one import registers each."""
from . import cloud_autoregressive  # noqa: F401
from . import device_draft_cloud_verify  # noqa: F401
from . import hybrid  # noqa: F401
from . import device_only  # noqa: F401
