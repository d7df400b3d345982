"""Collusion: the chance that two colluders are the ring neighbours of an honest gateway.

Two colluding neighbours of an honest gateway see the structure before and after it and learn
its contribution (the secure sum is not collusion resistant). With ``c`` attackers among ``n``
gateways in a uniformly random ring, the two neighbours of a given honest gateway are a uniform
pair of the other ``n - 1``, so (paper Sec. V-D, Table I)
``p_att = c / (n - 1) * (c - 1) / (n - 2)``.

>>> [round(p_attack(round(s * 100), 100), 3) for s in (0.1, 0.2, 0.3, 0.4, 0.5)]
[0.009, 0.039, 0.09, 0.161, 0.253]
"""

from __future__ import annotations

import numpy as np

from streamanon.errors import ConfigError


def p_attack(attackers: int, n: int) -> float:
    """Probability that both neighbours of an honest gateway are among ``attackers``."""
    if n < 3:
        raise ConfigError(f"a ring with two neighbours per gateway needs n >= 3, got {n}")
    if not 0 <= attackers <= n - 1:
        raise ConfigError(f"attackers must be in 0..n-1, got {attackers}")
    return attackers / (n - 1) * (attackers - 1) / (n - 2) if attackers >= 2 else 0.0


def p_attack_monte_carlo(attackers: int, n: int, trials: int,
                         rng: np.random.Generator) -> float:
    """The same probability estimated over ``trials`` random rings (uniform permutations).

    Gateway 0 is the honest target and gateways ``1..attackers`` collude (any labelling is
    equivalent because the ring is a uniform permutation); a trial succeeds when both ring
    neighbours of gateway 0 collude.
    """
    if trials < 1:
        raise ConfigError("trials must be >= 1")
    p_attack(attackers, n)  # validates
    rings = rng.permuted(np.tile(np.arange(n), (trials, 1)), axis=1)
    where = np.argmax(rings == 0, axis=1)
    rows = np.arange(trials)
    left = rings[rows, (where - 1) % n]
    right = rings[rows, (where + 1) % n]
    hit = (left >= 1) & (left <= attackers) & (right >= 1) & (right <= attackers)
    return float(hit.mean())


def collusion_table(n: int, shares: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5),
                    trials: int = 20_000, seed: int = 1) -> list[dict[str, float]]:
    """Table I: per attacker share, ``p_att`` by formula and by Monte Carlo."""
    rng = np.random.default_rng(seed)
    rows = []
    for share in shares:
        c = round(share * n)
        rows.append({"share": share, "attackers": c, "n": n, "p_formula": p_attack(c, n),
                     "p_monte_carlo": p_attack_monte_carlo(c, n, trials, rng)})
    return rows
