"""Prink's evaluation: a run through the socket releases what an in-process run releases,
its two loss averages are those of the released clusters and tuples, and the grid's
aggregation reports mean and spread."""

from __future__ import annotations

import statistics

import pytest

from streamanon.castle import CastleAnonymizer, Released, RuleSet
from streamanon.data import ashrae
from streamanon.sim import prink

RULES = ashrae.paper_rules_toml()


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return list(ashrae.generate_paper(400, seed=2))


def in_process(rows, run: prink.PrinkRun) -> tuple[CastleAnonymizer, list]:
    op = CastleAnonymizer(RuleSet.from_toml(RULES), k=run.k, l=run.l, delta=run.delta,
                          beta=run.beta, mu=run.mu, zeta=run.zeta, split="prink")
    out = [o for r in rows for o in op.process(r)] + op.flush()
    return op, out


@pytest.mark.parametrize("l", [0, 2])
def test_a_socket_run_measures_what_the_operator_does(rows, l) -> None:  # noqa: E741
    run = prink.PrinkRun(k=4, delta=60, l=l, beta=len(rows))
    got = prink.run_one(rows, RULES, run, rate=None)
    op, out = in_process(rows, run)
    summary = op.summary()
    assert (got["read"], got["released"], got["suppressed"]) == (
        len(rows), summary["released"], summary["suppressed"])
    assert got["released"] + got["suppressed"] == len(rows)
    assert got["clusters"] == summary["clusters_released"]
    for a, v in summary["info_loss"].items():  # per tuple: as streamanon castle reports it
        assert got[f"loss_tuple_{a}"] == pytest.approx(v, abs=1e-6)
    # per cluster (the paper): every released cluster counts once, whatever its size
    by_cluster = {o.cluster: o.loss for o in out if isinstance(o, Released)}
    assert got["loss_cluster_mean"] == pytest.approx(
        statistics.mean(by_cluster.values()), abs=1e-5)
    assert got["best_selection_ms"] > 0 and got["delay_constraint_ms"] > 0
    assert got["wait_time_ms"] > 0 and got["latency_ms_mean"] > 0
    assert got["latency_ms_p50"] <= got["latency_ms_p95"]


def test_aggregate_gives_mean_and_spread_over_repeats() -> None:
    base = {"k": 5, "delta": 10, "l": 0, "beta": 9, "mu": 100, "zeta": 0, "n": 9, "rate": 0}
    rows = [{**base, "repeat": 1, "latency_ms_mean": 2.0},
            {**base, "repeat": 2, "latency_ms_mean": 4.0},
            {**base, "k": 10, "repeat": 1, "latency_ms_mean": 7.0}]
    agg = {r["k"]: r for r in prink.aggregate(rows)}
    assert agg[5]["latency_ms_mean"] == 3.0
    assert agg[5]["latency_ms_mean_sd"] == pytest.approx(statistics.stdev([2.0, 4.0]))
    assert (agg[5]["repeats"], agg[10]["repeats"], agg[10]["latency_ms_mean_sd"]) == (2, 1, 0.0)


def test_delta_below_k_is_warned(rows) -> None:
    with pytest.warns(UserWarning, match="requires δ >= k"):
        got = prink.run_grid(rows[:60], RULES, ks=[8], deltas=[4], ls=[0], repeat=1, rate=None)
    assert got[0]["beta"] == 60  # β defaults to the number of tuples, as Prink's evaluation


def test_the_server_serves_only_the_client_that_knows_the_runs_token() -> None:
    """A stranger on the machine that finds the server's port is closed unread: it cannot
    feed the operator; the run's own client, which sends the token first, is served."""
    import multiprocessing
    import socket

    parent, child = multiprocessing.Pipe()
    token = b"0123456789abcdef0123456789abcdef"
    run = {"k": 2, "delta": 10, "l": 1, "beta": 10, "mu": 100, "zeta": 0}
    proc = multiprocessing.get_context("fork").Process(
        target=prink._serve, args=(ashrae.rules_toml(), run, child, token), daemon=True)
    proc.start()
    try:
        port = parent.recv()
        with socket.create_connection(("127.0.0.1", port)) as stranger:
            stranger.sendall(b"wrong token\n0 {}\n")
            stranger.settimeout(10)
            assert stranger.recv(100) == b""  # closed, nothing answered
        rows = list(ashrae.generate(30, seed=2))
        with socket.create_connection(("127.0.0.1", port)) as own:
            own.sendall(token + b"\n")
            own.sendall(b"".join(b"%d %s\n" % (i, prink.json.dumps(dict(r)).encode())
                                 for i, r in enumerate(rows)))
            own.shutdown(socket.SHUT_WR)
            own.settimeout(30)
            got = b""
            while not got.endswith(b"end\n"):
                part = own.recv(65536)
                assert part, got
                got += part
        stats = parent.recv()
        assert stats["read"] == len(rows)
        assert stats["released"] + stats["suppressed"] == len(rows)
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
