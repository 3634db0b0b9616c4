"""The mobile SoC modes (NPU, GPU, LPDDR5-PIM): one import registers each."""
from . import autoregressive  # noqa: F401
from . import gpu_only  # noqa: F401
from . import npu_sync  # noqa: F401
from . import operator_sync  # noqa: F401
from . import task_sync  # noqa: F401
from . import async_  # noqa: F401
from . import ahasd  # noqa: F401
from . import tree_sync  # noqa: F401  (tree_sync, tree_pim)
