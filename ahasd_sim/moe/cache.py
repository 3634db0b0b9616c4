"""GPU expert cache: which (layer, expert) weights are resident, and since when.

Policies: ``lru``, ``lfu`` (frequency over every access since the start, ties broken by
recency), ``activation`` (activation-aware, MoE-Infinity style: the victim is the expert with the
lowest recent activation count, an exponentially decayed count of the verification passes that
used it, half-life ``activation_half_life_passes``; ties by recency) and ``static`` (the most popular experts of an offline profile, never replaced;
misses are streamed through a staging buffer and not kept). Scope ``global`` shares one
capacity among all layers; ``per_layer`` gives each layer capacity // L (the first
capacity % L layers one more).

Each resident entry carries ``ready_s``: the time its H2D copy ends. A verification may use an
expert only at or after that time (causality; tested). Entries used by the layer being
computed and by every later layer of the same pass are pinned (:class:`PassPins`): a miss
never evicts an expert the current verification pass still needs, as an offloading runtime
that knows the pass's routing layer by layer would not (MoE-Infinity, arXiv 2401.14361).

Own implementation rather than cachetools/libCacheSim: we need per-entry ready times, pinning
of the in-use set and insert-may-fail (streamed misses), which those libraries' eviction
hooks do not provide without re-implementing the policy.
"""
from __future__ import annotations

import heapq
from collections import OrderedDict

import numpy as np

POLICIES = ("lru", "lfu", "activation", "static")
SCOPES = ("global", "per_layer")


class ExpertCache:
    def __init__(self, n_layers: int, n_experts: int, capacity_experts: int, policy: str = "lru",
                 scope: str = "per_layer", popularity: np.ndarray | None = None, fill: bool = True,
                 activation_half_life_passes: float = 4.0):
        if policy not in POLICIES:
            raise ValueError(f"cache policy must be one of {POLICIES}, got {policy!r}")
        if scope not in SCOPES:
            raise ValueError(f"cache scope must be one of {SCOPES}, got {scope!r}")
        self.L, self.E = int(n_layers), int(n_experts)
        self.capacity = max(0, min(int(capacity_experts), self.L * self.E))
        self.policy, self.scope = policy, scope
        if scope == "per_layer":
            base, extra = divmod(self.capacity, self.L)
            self.layer_cap = [base + (1 if i < extra else 0) for i in range(self.L)]
        self._ready: dict[tuple[int, int], float] = {}
        # recency order per scope bucket (global: one bucket)
        self._lru: list[OrderedDict] = [OrderedDict() for _ in range(self.L if scope == "per_layer" else 1)]
        self._freq: dict[tuple[int, int], int] = {}
        self._heap: list[list] = [[] for _ in range(len(self._lru))]
        self._tick = 0
        self._pass = 0                # verification passes begun (activation policy's clock)
        self._decay = 0.5 ** (1.0 / max(float(activation_half_life_passes), 1e-9))
        self._act: dict[tuple[int, int], tuple[float, int]] = {}   # key -> (count, pass of count)
        self.hits = 0
        self.misses = 0
        self.late_hits = 0            # hits whose copy was still in flight (waited for it)
        self.evictions = 0
        self.streamed = 0             # misses not kept (no evictable room / static policy)
        self.resident_mask = np.zeros((self.L, self.E), dtype=bool)
        if fill or policy == "static":
            self._fill(popularity)

    # ------------------------------------------------------------------ setup
    def _fill(self, popularity: np.ndarray | None) -> None:
        """Initial contents: the most popular experts of the profile (ready at t = 0)."""
        if self.capacity == 0:
            return
        pop = np.zeros((self.L, self.E)) if popularity is None else np.asarray(popularity, dtype=float)
        if pop.shape != (self.L, self.E):
            raise ValueError(f"popularity must be [{self.L}, {self.E}], got {pop.shape}")
        if self.scope == "per_layer":
            chosen = []
            for layer in range(self.L):
                order = sorted(range(self.E), key=lambda e: (-pop[layer, e], e))
                chosen += [(layer, e) for e in order[:self.layer_cap[layer]]]
        else:
            flat = sorted(((layer, e) for layer in range(self.L) for e in range(self.E)),
                          key=lambda k: (-pop[k], k))
            chosen = flat[:self.capacity]
        for key in reversed(chosen):   # least popular first: it becomes the first LRU victim
            self._add(key, 0.0)

    def _bucket(self, layer: int) -> int:
        return layer if self.scope == "per_layer" else 0

    def _cap(self, layer: int) -> int:
        return self.layer_cap[layer] if self.scope == "per_layer" else self.capacity

    def _add(self, key, ready_s: float) -> None:
        self._ready[key] = ready_s
        self.resident_mask[key] = True
        b = self._bucket(key[0])
        self._tick += 1
        self._lru[b][key] = self._tick
        if self.policy == "lfu":
            heapq.heappush(self._heap[b], [self._freq.get(key, 0), self._tick, key])

    # ------------------------------------------------------------------ queries
    def __contains__(self, key) -> bool:
        return key in self._ready

    def __len__(self) -> int:
        return len(self._ready)

    def ready_s(self, key) -> float:
        return self._ready[key]

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0

    # ------------------------------------------------------------------ accesses
    def begin_pass(self) -> None:
        """A verification pass starts (the activation policy's counts decay once per pass)."""
        self._pass += 1

    def activation(self, key) -> float:
        """Decayed activation count of ``key`` at the current pass."""
        c, p = self._act.get(key, (0.0, self._pass))
        return c * self._decay ** (self._pass - p)

    def access(self, layer: int, expert: int) -> bool:
        """Record a use of (layer, expert) by a verification; True on a hit."""
        key = (layer, expert)
        self._freq[key] = self._freq.get(key, 0) + 1
        self._act[key] = (self.activation(key) + 1.0, self._pass)
        if key in self._ready:
            self.hits += 1
            b = self._bucket(layer)
            self._tick += 1
            self._lru[b][key] = self._tick
            self._lru[b].move_to_end(key)
            if self.policy == "lfu":
                heapq.heappush(self._heap[b], [self._freq[key], self._tick, key])
            return True
        self.misses += 1
        return False

    def insert(self, layer: int, expert: int, ready_s: float, pinned=frozenset()) -> bool:
        """Make (layer, expert) resident from ``ready_s`` (its copy's end). Evicts per policy,
        never an entry in ``pinned`` (keys). False if it could not be kept (streamed)."""
        key = (layer, expert)
        if key in self._ready:
            self._ready[key] = min(self._ready[key], ready_s)
            return True
        if self.policy == "static" or self._cap(layer) == 0:
            self.streamed += 1
            return False
        b = self._bucket(layer)
        while self._count(b) >= self._cap(layer):
            victim = self._victim(b, pinned)
            if victim is None:
                self.streamed += 1
                return False
            self._evict(victim)
        self._add(key, ready_s)
        return True

    def _count(self, b: int) -> int:
        return len(self._lru[b])

    def _victim(self, b: int, pinned):
        if self.policy == "activation":
            best, best_score = None, None
            for key, tick in self._lru[b].items():      # oldest first: recency breaks ties
                if key in pinned:
                    continue
                s = self.activation(key)
                if best_score is None or s < best_score:
                    best, best_score = key, s
            return best
        if self.policy == "lru":
            if isinstance(pinned, PassPins) and self.scope == "per_layer":
                # one layer per bucket: the pins are that layer's set (no per-key method call)
                if b < pinned.first_layer or b >= len(pinned.sets):
                    return next(iter(self._lru[b]), None)
                used = pinned.sets[b]
                for key in self._lru[b]:
                    if key[1] not in used:
                        return key
                return None
            for key in self._lru[b]:
                if key not in pinned:
                    return key
            return None
        heap, skipped, victim = self._heap[b], [], None
        while heap:
            f, t, key = heapq.heappop(heap)
            if key not in self._ready or self._lru[b].get(key) != t:
                continue                          # stale entry
            if key in pinned:
                skipped.append([f, t, key])
                continue
            victim = key
            break
        for item in skipped:
            heapq.heappush(heap, item)
        return victim

    def _evict(self, key) -> None:
        del self._ready[key]
        self.resident_mask[key] = False
        del self._lru[self._bucket(key[0])][key]
        self.evictions += 1

    def stats(self) -> dict:
        return {"policy": self.policy, "scope": self.scope, "capacity_experts": self.capacity,
                "hits": self.hits, "misses": self.misses, "late_hits": self.late_hits,
                "hit_rate": self.hit_rate, "evictions": self.evictions, "streamed_misses": self.streamed,
                "resident_at_end": len(self._ready)}


class PassPins:
    """The experts a verification pass still needs from layer ``first_layer`` on: ``key in pins``
    for (layer, expert). ``sets[l]``: the experts layer l of the pass routes to."""

    __slots__ = ("sets", "first_layer")

    def __init__(self, sets, first_layer: int = 0):
        self.sets, self.first_layer = sets, first_layer

    def __contains__(self, key) -> bool:
        layer = key[0]
        return layer >= self.first_layer and layer < len(self.sets) and key[1] in self.sets[layer]
