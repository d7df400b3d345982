"""Collusion: the chance that two colluders are the ring neighbours of an honest gateway.

Two colluding neighbours of an honest gateway see the structure before and after it and learn
its contribution (the secure sum is not collusion resistant). With ``c`` attackers among ``n``
gateways in a uniformly random ring, the two neighbours of a given honest gateway are a uniform
pair of the other ``n - 1``, so (paper Sec. V-D, Table I)
``p_att = c / (n - 1) * (c - 1) / (n - 2)``.

>>> [round(p_attack(round(s * 100), 100), 3) for s in (0.1, 0.2, 0.3, 0.4, 0.5)]
[0.009, 0.039, 0.09, 0.161, 0.253]

That is the exposure of one ring. A ring drawn again every ``N`` cycles gives the colluders
a new, independent chance at every draw: the probability that a given honest gateway is
flanked by two colluders in at least one of ``d`` draws is ``1 - (1 - p_att)^d``
(:func:`p_ever_flanked`; :func:`p_ever_flanked_monte_carlo` counts it over random rings).
With the ring fixed at setup (the paper, and the default) ``d = 1``.

>>> round(p_attack(5, 25), 4), round(p_ever_flanked(5, 25, 30), 3)
(0.0362, 0.669)
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


def p_ever_flanked(attackers: int, n: int, draws: int) -> float:
    """Probability that a given honest gateway is flanked by two of ``attackers`` colluders in
    at least one of ``draws`` independent ring draws: ``1 - (1 - p_att)^draws``."""
    if draws < 0:
        raise ConfigError(f"draws must be >= 0, got {draws}")
    return 1.0 - (1.0 - p_attack(attackers, n)) ** draws


def p_ever_flanked_monte_carlo(attackers: int, n: int, draws: int, trials: int,
                               rng: np.random.Generator) -> float:
    """The same by Monte Carlo: ``trials`` sequences of ``draws`` random rings each; a trial
    succeeds when gateway 0 (honest) has colluders ``1..attackers`` on both sides in some ring
    of its sequence.

    Args:
        attackers: the number of colluding gateways.
        n: the number of gateways in the ring.
        draws: the ring draws over the deployment's life (1: fixed at setup).
        trials: the Monte Carlo trials.
        rng: the random generator (seeded by the caller).
    """
    if trials < 1:
        raise ConfigError("trials must be >= 1")
    if draws < 0:
        raise ConfigError(f"draws must be >= 0, got {draws}")
    p_attack(attackers, n)  # validates
    ever = np.zeros(trials, dtype=bool)
    rows = np.arange(trials)
    for _ in range(draws):
        rings = rng.permuted(np.tile(np.arange(n), (trials, 1)), axis=1)
        where = np.argmax(rings == 0, axis=1)
        left = rings[rows, (where - 1) % n]
        right = rings[rows, (where + 1) % n]
        ever |= (left >= 1) & (left <= attackers) & (right >= 1) & (right <= attackers)
    return float(ever.mean())


def exposure_table(n: int, draws: int, shares: tuple[float, ...] = (0.1, 0.2, 0.3),
                   trials: int = 4_000, seed: int = 1) -> list[dict[str, float]]:
    """Per attacker share: the chance that a given honest gateway is ever flanked by two
    colluders over ``draws`` ring draws, by formula and Monte Carlo, and per draw.

    Args:
        n: the number of gateways in the ring.
        draws: the ring draws over the deployment's life (1: fixed at setup).
        shares: the shares of colluding gateways to tabulate.
        trials: the Monte Carlo trials per share.
        seed: the Monte Carlo seed (with ``draws``).
    """
    rng = np.random.default_rng([seed, draws])
    rows = []
    for share in shares:
        c = round(share * n)
        rows.append({"share": share, "attackers": c, "n": n, "draws": draws,
                     "p_per_draw": p_attack(c, n),
                     "p_formula": p_ever_flanked(c, n, draws),
                     "p_monte_carlo": p_ever_flanked_monte_carlo(c, n, draws, trials, rng)})
    return rows


def exposure_line(table: list[dict[str, float]], redraw: int | None) -> str:
    """One line for a command's output: what the ring placement exposes an honest gateway to."""
    if not table:
        return ""
    d = int(table[0]["draws"])
    how = ("ring fixed at setup (1 draw)" if redraw is None
           else f"ring redrawn every {redraw} cycles ({d} draws)")
    parts = ", ".join(f"{int(r['attackers'])} of {int(r['n'])}: {r['p_formula']:.3f} / "
                      f"{r['p_monte_carlo']:.3f}" for r in table)
    return (f"{how}: probability that a given honest gateway is ever flanked by two "
            f"colluders, formula / Monte Carlo: {parts}")


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
