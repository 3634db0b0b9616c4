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
    package_limit_c: float = param(95.0, doc="package (SoC junction / PoP DRAM) temperature at which the governor "
                                   "steps one DVFS state deeper every period while it stays there (beside the "
                                   "skin ladder; the deeper of the two states applies)", unit="C", ge=50.0,
                                   le=150.0, bound_reason="mobile SoCs are rated for junctions of 95-125 C; below "
                                   "50 C no phone would run",
                                   source="a Snapdragon 835 phone's Qualcomm thermal-engine configuration (dumped "
                                   "in a public boot log): step-wise GPU and PoP-memory mitigation at 95 C, cleared "
                                   "at 65 C, beside a 39 / 43 / 45 C skin ladder (docs/references.md 'Phone memory "
                                   "and power envelope', grade C)")
    package_clear_c: float = param(65.0, doc="package temperature below which the junction limit steps back "
                                   "one state per period", unit="C", ge=20.0, le=150.0,
                                   bound_reason="as package_limit_c",
                                   source="the same thermal-engine configuration: set_point_clr 65 C (grade C)")
    voltage_scaling: bool = param(False, doc="the NPU's energy per operation (MAC, vector op, scratchpad bit) "
                                  "scales with the square of its DVFS voltage (C V^2 per switching event) at each "
                                  "state's clock (vf_clock_fractions -> vf_voltage_v, linear in between, the lowest "
                                  "voltage below the lowest point); off: every state pays the full-speed energy "
                                  "per operation (conservative for throttled states). The PIM units' DRAM rails "
                                  "are fixed by JEDEC and never scale",
                                  source="off by default: the V-f table is a phone CPU's, not a published NPU's")
    vf_clock_fractions: list[float] = param([0.357, 0.536, 0.714, 0.857, 1.0], doc="clock fractions of the "
                                            "voltage-frequency table (ascending, the last 1 = the top clock)",
                                            length=(2, 16), item_ge=0.01, item_le=1.0,
                                            source="Arm Total Compute TC2 reference firmware, Cortex-X4 operating "
                                            "points 1088 / 1632 / 2176 / 2612 / 3047 MHz (ARM-software/"
                                            "SCP-firmware product/totalcompute/tc2/scp_ramfw/config_dvfs.c), "
                                            "as fractions of 3047 MHz (docs/references.md 'Phone memory and "
                                            "power envelope', grade A for the CPU, an assumption for the NPU)")
    vf_voltage_v: list[float] = param([0.55, 0.65, 0.75, 0.85, 0.95], doc="supply voltage at each "
                                      "vf_clock_fractions point", unit="V", length=(2, 16), item_ge=0.3,
                                      item_le=1.5, source="the same table: 550 / 650 / 750 / 850 / 950 mV")
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
        if self.package_clear_c >= self.package_limit_c:
            raise ValueError(f"package_clear_c ({self.package_clear_c:g} C) must lie below package_limit_c "
                             f"({self.package_limit_c:g} C)")
        f, v = self.vf_clock_fractions, self.vf_voltage_v
        if len(f) != len(v):
            raise ValueError(f"vf_clock_fractions and vf_voltage_v need one entry per point each, got {len(f)} "
                             f"and {len(v)}")
        if any(b <= a for a, b in zip(f, f[1:])) or f[-1] != 1.0:
            raise ValueError(f"vf_clock_fractions must ascend to 1 (the top clock), got {f}")
        if any(b < a for a, b in zip(v, v[1:])):
            raise ValueError(f"vf_voltage_v must not fall as the clock rises, got {v}")

    def voltage_v(self, clock_fraction: float) -> float:
        """Supply voltage at ``clock_fraction`` of the top clock (the V-f table, linear between its
        points; below the lowest point the voltage stays at its lowest: a regulator's floor)."""
        return float(np.interp(clock_fraction, self.vf_clock_fractions, self.vf_voltage_v))

    def energy_scale(self, state: int) -> float:
        """Energy per NPU operation at DVFS ``state`` relative to full speed: (V / V_top)^2 with
        ``voltage_scaling``, else 1."""
        if not self.voltage_scaling:
            return 1.0
        return (self.voltage_v(self.npu_clock_fractions[state]) / self.voltage_v(1.0)) ** 2


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
            hit = (phi, gam)
            if len(self._cache) < 64:   # the governor period and a few others; window ends fall anywhere
                self._cache[dt] = hit
        return hit

    def step(self, temps_c: np.ndarray, power_w, dt_s: float) -> np.ndarray:
        """Node temperatures after ``dt_s`` of constant ``power_w`` (exact)."""
        phi, gam = self._propagators(float(dt_s))
        rise = np.asarray(temps_c, dtype=float) - self.cfg.ambient_c
        return self.cfg.ambient_c + phi @ rise + gam @ np.asarray(power_w, dtype=float)


class Governor:
    """Skin-temperature DVFS ladder: state i + 1 once the skin reaches ``skin_thresholds_c[i]``,
    back to state i once it is ``hysteresis_c`` below it. Beside it a step-wise junction limit
    (a thermal engine's step-wise mitigation on a die sensor): while the package is at or above
    ``package_limit_c`` its state goes one deeper each period, below ``package_clear_c`` one back.
    The deeper of the two states applies."""

    def __init__(self, cfg: ThermalConfig):
        self.thresholds = tuple(cfg.skin_thresholds_c)
        self.hysteresis = cfg.hysteresis_c
        self.package_limit = cfg.package_limit_c
        self.package_clear = cfg.package_clear_c
        self.last = len(self.thresholds)
        self.skin_state = 0
        self.junction_state = 0
        self.state = 0

    def update(self, skin_c: float, package_c: float | None = None) -> int:
        """The DVFS state for a skin temperature ``skin_c`` and (optionally) a package temperature
        ``package_c``, from the current state."""
        s = self.skin_state
        while s < self.last and skin_c >= self.thresholds[s]:
            s += 1
        while s > 0 and skin_c < self.thresholds[s - 1] - self.hysteresis:
            s -= 1
        self.skin_state = s
        if package_c is not None:
            if package_c >= self.package_limit:
                self.junction_state = min(self.junction_state + 1, self.last)
            elif package_c < self.package_clear:
                self.junction_state = max(self.junction_state - 1, 0)
        self.state = max(self.skin_state, self.junction_state)
        return self.state

    @property
    def junction_bound(self) -> bool:
        """The junction limit sets the state (it is deeper than the skin ladder's)."""
        return self.junction_state > self.skin_state
