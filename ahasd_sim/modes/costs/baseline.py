"""Step costs of the single-device autoregressive baselines: the target alone on the device
``baseline.device`` names (or the fastest one, ``auto``)."""
from __future__ import annotations

from ...config.errors import ConfigError
from ..base import TaskCost


class BaselineCosts:
    """Autoregressive-baseline step costs of :class:`~ahasd_sim.modes.costs.StepCosts`."""

    def baseline_devices(self) -> tuple[str, ...]:
        """Devices of this platform that can run the target autoregressively."""
        return tuple(d for d in ("gpu", "npu", "pim") if getattr(self.p, d, None) is not None)

    def _baseline_device(self) -> str:
        dev = self.cfg.baseline.device
        if dev == "auto":
            c = self._auto_device
            if c is None:
                devs = self.baseline_devices()
                if not devs:
                    raise ConfigError("", "baseline.device", "autoregressive decoding needs a GPU, an NPU or PIM")
                kv = self.cfg.baseline.auto_reference_kv_tokens
                # the fastest one-token forward; ties keep the order gpu, npu, pim
                c = self._auto_device = min(devs, key=lambda d: self._target_forward_on(d, 1, kv).duration_s)
            return c
        if getattr(self.p, dev, None) is None:
            raise ConfigError("", "baseline.device", f"is {dev}, but this platform has no {dev.upper()} "
                              f"({dev}.enabled is false); use auto or a device the platform has")
        return dev

    def target_forward(self, n_tokens: int, kv_len: int) -> TaskCost:
        """Autoregressive decoding step of the target on the baseline device."""
        return self._target_forward_on(self._baseline_device(), n_tokens, kv_len)

    def _target_forward_on(self, dev: str, n_tokens: int, kv_len: int) -> TaskCost:
        if dev == "gpu":
            return self._gpu_forward(self.target, n_tokens, kv_len, resident_other=0)
        if dev == "pim":
            return self.pim_target_forward(n_tokens, kv_len)
        if self.p.npu is None:
            raise ConfigError("", "baseline.device", "autoregressive decoding needs a GPU or an NPU")
        return self.verify(n_tokens, kv_len)

    def baseline_prefill(self, n_tokens: int) -> TaskCost:
        """Prefill of the target alone on the autoregressive baseline device."""
        dev = self._baseline_device()
        if dev == "gpu":
            return self._gpu_forward(self.target, max(1, n_tokens), 0, resident_other=0)
        if dev == "pim" and self.p.npu is None:
            return self.pim_target_forward(max(1, n_tokens), 0)
        # PIM decoding prefills on the NPU (a compute-bound GEMM over the prompt, as every mode does)
        return self.prefill("target", n_tokens)
