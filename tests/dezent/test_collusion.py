import itertools

import numpy as np
import pytest

from streamanon.dezent.collusion import (
    exposure_table,
    p_attack,
    p_ever_flanked,
    p_ever_flanked_monte_carlo,
)
from streamanon.errors import ConfigError


def test_one_draw_is_the_papers_table_one_exposure():
    for c, n in ((2, 25), (5, 25), (20, 100)):
        assert p_ever_flanked(c, n, 1) == pytest.approx(p_attack(c, n))
    assert p_ever_flanked(5, 25, 0) == 0.0


def test_exposure_grows_with_every_draw_as_independent_chances():
    p = 5 / 24 * 4 / 23  # 5 colluders among 25 gateways
    assert p_ever_flanked(5, 25, 30) == pytest.approx(1 - (1 - p) ** 30)
    assert round(p_ever_flanked(5, 25, 30), 2) == 0.67
    values = [p_ever_flanked(5, 25, d) for d in range(1, 50)]
    assert all(b > a for a, b in itertools.pairwise(values))
    assert p_ever_flanked(1, 25, 1000) == 0.0  # one colluder never flanks alone


@pytest.mark.parametrize(("c", "n", "draws"), [(5, 25, 1), (5, 25, 30), (3, 10, 4)])
def test_monte_carlo_agrees_with_the_formula(c, n, draws):
    trials = 20_000
    est = p_ever_flanked_monte_carlo(c, n, draws, trials, np.random.default_rng(7))
    p = p_ever_flanked(c, n, draws)
    assert abs(est - p) < 4 * np.sqrt(p * (1 - p) / trials) + 1e-9


def test_exposure_table_rows_and_validation():
    rows = exposure_table(25, 30, shares=(0.2,), trials=2_000)
    assert rows[0]["attackers"] == 5 and rows[0]["draws"] == 30
    assert rows[0]["p_formula"] == pytest.approx(p_ever_flanked(5, 25, 30))
    with pytest.raises(ConfigError):
        p_ever_flanked(5, 25, -1)
    with pytest.raises(ConfigError):
        p_ever_flanked_monte_carlo(5, 25, 1, 0, np.random.default_rng(1))
