"""A phone's temperature over minutes (section ``thermal``): a lumped RC network driven by the
simulated power, and a skin-temperature governor with DVFS states.

The network has three nodes in a chain to the ambient (docs/modeling.md 'Thermals over minutes'):
``package`` (the SoC die with its package-on-package LPDDR5: the DRAM sits on the SoC, so the
DRAM temperature is this node's), ``board`` (PCB, shield, battery, frame) and ``skin`` (back
glass and display), each a heat capacity, joined by thermal resistances. The decoder's power
(NPU, memory package, PIM, the rest of the SoC) enters the package node, the rest of the
phone's power (display, radios) the skin node. :class:`RcNetwork` steps it exactly for a
piecewise-constant power (matrix exponential), so a step of any length is exact.

:class:`Governor`: the skin temperature crossing ``skin_thresholds_c[i]`` moves the phone to
DVFS state ``i + 1`` (lower NPU clock and PIM rate); it steps back when the skin has cooled
``hysteresis_c`` below the threshold (the ladder of a phone thermal HAL, docs/references.md
'Phone memory and power envelope').
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config.fields import param
from ..config.registry import config_section

#: node names, from the heat source to the ambient
NODES = ("package", "board", "skin")


@config_section("thermal")
@dataclass
class ThermalConfig:
    """Lumped package -> board -> skin -> ambient RC network and the skin-temperature governor
    (used by runs of a duration: ``compare --duration-min``, scripts/sustained_study.py)."""

    ambient_c: float = param(25.0, doc="ambient air temperature", unit="C", ge=-40.0, le=60.0,
                             bound_reason="phones are specified for -20..45 C ambient; 60 C is past any use",
                             source="room temperature, the condition of published phone measurements")
    r_package_board_k_per_w: float = param(6.0, doc="thermal resistance SoC package (with its PoP DRAM) -> "
                                           "board", unit="K/W", gt=0, le=100.0,
                                           bound_reason="100 K/W would put a 1 W SoC 100 K above its board",
                                           source="package junction-to-board of a mobile PoP/flip-chip package "
                                           "with a graphite/vapour-chamber spreader: 5-10 K/W (grade C)")
    r_board_skin_k_per_w: float = param(2.0, doc="thermal resistance board -> skin (case)", unit="K/W", gt=0,
                                        le=100.0, bound_reason="as r_package_board_k_per_w",
                                        source="board to back glass through the spreader and air gaps: "
                                        "1-3 K/W (grade C)")
    r_skin_ambient_k_per_w: float = param(4.0, doc="thermal resistance skin -> ambient (natural convection "
                                          "and radiation)", unit="K/W", gt=0, le=100.0,
                                          bound_reason="as r_package_board_k_per_w",
                                          source="1 / (h A): h = 10.4 W/(m^2 K) (natural convection ~5 + "
                                          "radiation ~5.5 at 35-45 C) x A = 0.024 m^2 (two 15 x 7 cm faces + "
                                          "edges) (grade D); 4-5 W sustained at 45 C skin and 25 C ambient")
    c_package_j_per_k: float = param(3.0, doc="heat capacity of the SoC package with its PoP DRAM and the "
                                     "local spreader", unit="J/K", gt=0, le=10000.0,
                                     bound_reason="10 kJ/K is a 10 kg block of aluminium, not a phone",
                                     source="~4 g of silicon, mould and copper at ~0.7 J/(g K) (grade D)")
    c_board_j_per_k: float = param(70.0, doc="heat capacity of board, shield, battery and frame", unit="J/K",
                                   gt=0, le=10000.0, bound_reason="as c_package_j_per_k",
                                   source="~80 g (battery 50 g at ~1.0 J/(g K), PCB and frame) (grade D)")
    c_skin_j_per_k: float = param(90.0, doc="heat capacity of back glass, display and case", unit="J/K", gt=0,
                                  le=10000.0, bound_reason="as c_package_j_per_k",
                                  source="~110 g of glass and aluminium at ~0.8 J/(g K) (grade D); a 200 g "
                                  "phone holds ~160 J/K in all")
    other_power_w: float = param(0.8, doc="power the rest of the phone draws while the user reads the answer "
                                 "(display, radios idle), entering the skin node", unit="W", ge=0, le=20.0,
                                 bound_reason="20 W is four times a phone's sustained budget",
                                 source="a phone display at moderate brightness draws 0.5-1 W (grade C)")
    skin_thresholds_c: list[float] = param([39.0, 43.0, 45.0], doc="skin temperatures at which the governor "
                                           "steps down to the next DVFS state (ascending; one per state "
                                           "after the first)", unit="C", length=(1, 8), item_ge=20.0,
                                           item_le=60.0,
                                           source="Pixel-family VIRTUAL-SKIN throttling ladder 39 / 43 / 45 C "
                                           "(docs/references.md 'Phone memory and power envelope', grade C); "
                                           "45 C is the skin pain threshold (Therminator, ISLPED'14)")
    hysteresis_c: float = param(1.0, doc="the governor steps back up once the skin is this far below the "
                                "threshold that stepped it down", unit="C", ge=0, le=10.0,
                                bound_reason="a 10 C band would never release a throttled phone",
                                source="thermal HAL hysteresis of ~1 C (grade C)")
    npu_clock_fractions: list[float] = param([1.0, 0.8, 0.6, 0.4], doc="NPU clock of each DVFS state as a "
                                             "fraction of npu.freq_ghz (state 0 = full speed)",
                                             length=(2, 9), item_ge=0.05, item_le=1.0,
                                             source="assumption (grade C): phone DVFS ladders span ~0.35-1 of "
                                             "the top clock (Galaxy S24 Ultra's governor floors the Adreno "
                                             "750 at 231 of ~650 MHz = 0.36, arXiv 2603.23640)")
    pim_rate_fractions: list[float] = param([1.0, 0.8, 0.6, 0.4], doc="PIM command rate of each DVFS state "
                                            "as a fraction of the full rate (pim.dvfs_rate_fraction)",
                                            length=(2, 9), item_ge=0.05, item_le=1.0,
                                            source="assumption (grade C): as npu_clock_fractions")
    step_s: float = param(1.0, doc="governor period (the network itself is stepped exactly)", unit="s",
                          gt=0, le=60.0, bound_reason="a governor that looks once a minute is no governor",
                          source="thermal HALs poll skin sensors every 0.25-1 s (grade C)")

    def validate(self) -> None:
        t = self.skin_thresholds_c
        if any(b <= a for a, b in zip(t, t[1:])):
            raise ValueError(f"skin_thresholds_c must ascend, got {t}")
        if len(self.npu_clock_fractions) != len(self.pim_rate_fractions):
            raise ValueError("npu_clock_fractions and pim_rate_fractions need one entry per DVFS state each")
        if len(t) != len(self.npu_clock_fractions) - 1:
            raise ValueError(f"{len(self.npu_clock_fractions)} DVFS states need {len(self.npu_clock_fractions) - 1} "
                             f"skin_thresholds_c (one per step down), got {len(t)}")
        if self.npu_clock_fractions[0] != 1.0 or self.pim_rate_fractions[0] != 1.0:
            raise ValueError("DVFS state 0 is full speed: npu_clock_fractions[0] and pim_rate_fractions[0] must be 1")


class RcNetwork:
    """The chain package -> board -> skin -> ambient: C dT/dt = P - G (T - T_amb), with T the
    node temperatures, G the conductance matrix of the chain and its tie to the ambient."""

    def __init__(self, cfg: ThermalConfig):
        self.cfg = cfg
        g1, g2, g3 = 1.0 / cfg.r_package_board_k_per_w, 1.0 / cfg.r_board_skin_k_per_w, 1.0 / cfg.r_skin_ambient_k_per_w
        self.G = np.array([[g1, -g1, 0.0], [-g1, g1 + g2, -g2], [0.0, -g2, g2 + g3]])
        self.C = np.array([cfg.c_package_j_per_k, cfg.c_board_j_per_k, cfg.c_skin_j_per_k])
        self.A = -self.G / self.C[:, None]                   # dT/dt = A (T - T_amb) + P / C
        w, v = np.linalg.eig(self.A)
        self._w, self._v, self._vinv = w.real, v.real, np.linalg.inv(v.real)
        self._cache: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def time_constants_s(self) -> tuple[float, ...]:
        """The network's time constants (s), longest first."""
        return tuple(sorted((-1.0 / w for w in self._w), reverse=True))

    def steady_state_c(self, power_w) -> np.ndarray:
        """Node temperatures (C) a constant ``power_w`` (W per node) settles to."""
        return self.cfg.ambient_c + np.linalg.solve(self.G, np.asarray(power_w, dtype=float))

    def _propagators(self, dt: float) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(dt)
        if hit is None:
            e = np.exp(self._w * dt)
            phi = (self._v * e) @ self._vinv                  # exp(A dt)
            # the response to a constant input over dt: A^-1 (exp(A dt) - I) / C
            gam = np.linalg.solve(self.A, phi - np.eye(3)) / self.C[None, :]
            hit = self._cache[dt] = (phi, gam)
        return hit

    def step(self, temps_c: np.ndarray, power_w, dt_s: float) -> np.ndarray:
        """Node temperatures after ``dt_s`` of constant ``power_w`` (exact)."""
        phi, gam = self._propagators(float(dt_s))
        rise = np.asarray(temps_c, dtype=float) - self.cfg.ambient_c
        return self.cfg.ambient_c + phi @ rise + gam @ np.asarray(power_w, dtype=float)


class Governor:
    """Skin-temperature DVFS ladder: state i + 1 once the skin reaches ``skin_thresholds_c[i]``,
    back to state i once it is ``hysteresis_c`` below it."""

    def __init__(self, cfg: ThermalConfig):
        self.thresholds = tuple(cfg.skin_thresholds_c)
        self.hysteresis = cfg.hysteresis_c
        self.state = 0

    def update(self, skin_c: float) -> int:
        """The DVFS state for a skin temperature ``skin_c`` (from the current state)."""
        s = self.state
        while s < len(self.thresholds) and skin_c >= self.thresholds[s]:
            s += 1
        while s > 0 and skin_c < self.thresholds[s - 1] - self.hysteresis:
            s -= 1
        self.state = s
        return s
