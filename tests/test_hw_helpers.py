"""Shared helpers of the hardware-model tests: duck-typed operators and config builders."""
from __future__ import annotations

from dataclasses import dataclass

from ahasd_sim.config.loader import build_config


@dataclass(frozen=True)
class Op:
    """Same fields as ahasd_sim.workload.ops.Operator (duck typing)."""

    name: str = "op"
    kind: str = "gemv"
    layer_repeat: int = 1
    n_tokens: int = 1
    flops: float = 0.0
    macs: float = 0.0
    weight_bytes: float = 0.0
    act_bytes_in: float = 0.0
    act_bytes_out: float = 0.0
    kv_bytes: float = 0.0
    elements: int = 0
    nonlinear_class: str | None = None
    tier: int = 0


def linear(n: int, k: int, nout: int, repeat: int = 1, name: str = "linear") -> Op:
    """INT8 linear layer y = x W, W is k x nout."""
    macs = float(n * k * nout)
    return Op(name=name, kind="gemm" if n > 1 else "gemv", layer_repeat=repeat, n_tokens=n, flops=2 * macs,
              macs=macs, weight_bytes=float(k * nout), act_bytes_in=float(n * k), act_bytes_out=float(n * nout))


def elementwise(cls: str, elements: int, repeat: int = 1, n: int = 1) -> Op:
    return Op(name=cls, kind="reduction" if cls == "reduction" else "nonlinear", layer_repeat=repeat, n_tokens=n,
              act_bytes_in=float(elements), act_bytes_out=float(elements), elements=elements, nonlinear_class=cls)


def dense_decoder_ops(d: int = 1024, ffn: int = 4096, layers: int = 4, n: int = 1) -> list[Op]:
    """A small dense decoder forward: norm, qkv, o, norm, up, act, down per layer."""
    return [
        elementwise("layernorm", n * d, layers, n),
        linear(n, d, 3 * d, layers, "qkv"),
        linear(n, d, d, layers, "o"),
        elementwise("layernorm", n * d, layers, n),
        linear(n, d, ffn, layers, "up"),
        elementwise("gelu", n * ffn, layers, n),
        linear(n, ffn, d, layers, "down"),
    ]


def make_cfg(tree: dict | None = None):
    """A resolved SimConfig from a nested dict of overrides on the section defaults."""
    return build_config(tree or {}, {}, "test.yaml")


def one_line_error(capsys, rc, *fragments):
    """Exit 2 with one stderr line holding every fragment, no traceback."""
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for f in fragments:
        assert f in err, err
    return err
