"""Cloud verifier (section ``cloud``): a server GPU from a platform config, its queue and price.

The server GPU is the validated GPU model of another platform file (default: the H200
platform, ``hw_configs/platform_server_h200_pcie5.yaml``), so its step times are the
calibrated ones. A shared server adds a queueing wait before each call: a fixed
``queue_delay_ms`` plus, for ``utilization`` rho > 0, the M/M/1 waiting time of a request
whose service time is the call's own duration S (wait 0 with probability 1 - rho, else
Exponential with mean S / (1 - rho)), drawn from the run's seeded generator.

Price: ``usd_per_gpu_hour`` x GPU-seconds of our calls + ``usd_per_call`` per call +
``usd_per_1m_tokens`` per million tokens processed (inputs of the forwards).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import simpy

from ..config.fields import param
from ..config.registry import config_section


@config_section("cloud")
@dataclass
class CloudConfig:
    """The cloud server of mobile-cloud modes."""

    platform_config: str = param("hw_configs/platform_server_h200_pcie5.yaml",
                                 doc="platform file whose GPU is the cloud server (relative: to the current "
                                     "directory, the config file, then the repository)")
    usd_per_gpu_hour: float = param(3.50, doc="price of one server GPU-hour", unit="USD/GPU-h", ge=0,
                                    source="H200 on-demand from 3.50 USD/GPU-h, GPUaaS.com (May 2026), "
                                    "https://gpuaas.com/blog/h200-vs-h100-rental-decision-guide-2026 "
                                    "(other 2026 quotes: 2.0-4.5 USD/h)")
    usd_per_call: float = param(0.0, doc="price per server call (API-style pricing)", unit="USD", ge=0)
    usd_per_1m_tokens: float = param(0.0, doc="price per million tokens processed by the server", unit="USD", ge=0)
    utilization: float = param(0.0, doc="utilisation rho of a shared server (M/M/1 queueing wait; 0 = dedicated)",
                               ge=0, lt=1)
    queue_delay_ms: float = param(0.0, doc="fixed extra wait per call (admission, scheduling)", unit="ms", ge=0)


@dataclass
class CloudLedger:
    gpu_busy_s: float = 0.0
    queue_wait_s: float = 0.0
    calls: int = 0
    tokens_processed: int = 0
    energy_j: float = 0.0
    by_task_s: dict = field(default_factory=dict)


class CloudServer:
    """One server GPU in a SimPy environment: FIFO resource, queueing model, cost ledger."""

    device = "cloud_gpu"

    def __init__(self, env, cfg: CloudConfig, rng, collector=None):
        self.env = env
        self.cfg = cfg
        self.rng = rng
        self.col = collector
        self.gpu = simpy.Resource(env, capacity=1)
        self.ledger = CloudLedger()

    def queue_wait_s(self, service_s: float) -> float:
        wait = self.cfg.queue_delay_ms * 1e-3
        rho = self.cfg.utilization
        if rho > 0 and self.rng.random() < rho:
            wait += float(self.rng.exponential(service_s / (1.0 - rho)))
        return wait

    def run(self, cost, label: str, n_tokens: int, new_call: bool = True):
        """SimPy process body: wait in the shared queue, then run ``cost`` (a TaskCost) on the GPU.
        ``new_call``: this work starts a request (False for the later forwards of a streamed
        generation). Returns (start, end) of the GPU work."""
        wait = self.queue_wait_s(cost.duration_s)
        if wait > 0:
            yield self.env.timeout(wait)
        with self.gpu.request() as req:
            yield req
            start = self.env.now
            yield self.env.timeout(cost.duration_s)
        end = self.env.now
        led = self.ledger
        led.gpu_busy_s += cost.duration_s
        led.queue_wait_s += wait
        led.calls += int(new_call)
        led.tokens_processed += int(n_tokens)
        led.energy_j += sum(cost.energy_j.values())
        led.by_task_s[label] = led.by_task_s.get(label, 0.0) + cost.duration_s
        if self.col is not None:
            self.col.busy(self.device, start, end, label)
        return start, end

    def cost_usd(self) -> float:
        c, led = self.cfg, self.ledger
        return (led.gpu_busy_s * c.usd_per_gpu_hour / 3600.0 + led.calls * c.usd_per_call
                + led.tokens_processed * c.usd_per_1m_tokens * 1e-6)
