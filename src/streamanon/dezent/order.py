"""The publication order: where each publication pass starts and who hands the structure on.

>>> [turn_position(2, t, 5) for t in range(5)]
[2, 3, 4, 0, 1]
>>> [(sender_position(2, t, 5), receiver_position(2, t, 5)) for t in range(6)]
[(0, 2), (2, 3), (3, 4), (4, 0), (0, 1), (1, 0)]
>>> pass_messages(2, 5), pass_messages(1, 5), pass_messages(0, 5)
(6, 5, 5)

Design: docs/design/dezent.md
"""

from __future__ import annotations

from streamanon.errors import PublicationError

PAPER = "paper"
RANDOM = "random"
ORDERS = (PAPER, RANDOM)



def check_order(order: str) -> str:
    if order not in ORDERS:
        raise PublicationError(f"unknown publication order {order!r} (use "
                               f"{' or '.join(ORDERS)})")
    return order


def pass_start(order: str, n: int, draw: float) -> int:
    """The start position of a pass: 1 under ``paper`` (0 in a ring of one), under
    ``random`` ``floor(draw x n)`` for a uniform ``draw`` in [0, 1).

    >>> pass_start("paper", 5, 0.99), pass_start("random", 5, 0.99), pass_start("random", 5, 0.0)
    (1, 4, 0)
    """
    check_order(order)
    if n <= 1:
        return 0
    if order == PAPER:
        return 1
    if not 0.0 <= draw < 1.0:
        raise PublicationError(f"a publication-order draw must be in [0, 1), got {draw}")
    return min(n - 1, int(draw * n))


def turn_position(start: int, turns: int, n: int) -> int:
    """The position that takes turn number ``turns`` (0-based) of a pass started at ``start``."""
    return (start + turns) % n


def receiver_position(start: int, turns: int, n: int) -> int:
    """Where a pass message that has seen ``turns`` turns goes: the next turn, or the CCC."""
    return (start + turns) % n if turns < n else 0


def sender_position(start: int, turns: int, n: int) -> int:
    """Who sends a pass message that has seen ``turns`` turns: the CCC before the first turn,
    else the position that took the last one."""
    return 0 if turns == 0 else (start + turns - 1) % n


def pass_messages(start: int, n: int) -> int:
    """Ring messages of one pass: ``n``, plus one when the CCC must jump to the start and the
    last turn jump back (``start`` not 0 or 1); none in a ring of one."""
    if n <= 1:
        return 0
    return n if start in (0, 1) else n + 1
