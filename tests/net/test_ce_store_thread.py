"""The CE's store calls run off its event loop: while one gateway's commit is held up (a slow
disk or database server), the CE goes on serving other gateways, the held batch is
acknowledged only after its commit returned, and commits keep the order they were asked in."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from streamanon.harness.ports import free_ports
from streamanon.net import framing
from streamanon.net.ce import CentralEntity
from streamanon.net.config import CEConfig
from streamanon.net.pki import init_pki
from streamanon.net.store import iter_rows
from streamanon.net.tls import client_context

INC = b"A" * 16


class HeldStore:
    """The CE's real store, whose ``store`` calls wait at a gate (on the store's thread)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.threads: set[str] = set()
        self.order: list[str] = []

    def store(self, gateway: str, incarnation: bytes, tuples: tuple) -> int:
        self.threads.add(threading.current_thread().name)
        self.order.append(gateway)
        if gateway == "gw0":
            self.entered.set()
            assert self.gate.wait(60), "the test never opened the gate"
        return self.inner.store(gateway, incarnation, tuples)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


async def _frame(reader: asyncio.StreamReader) -> framing.Frame:
    head = await reader.readexactly(4)
    return framing.decode_frame(await reader.readexactly(int.from_bytes(head, "big")))


def test_the_loop_serves_other_gateways_while_a_commit_blocks(tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    init_pki(pki, 2, ca_dir=tmp_path / "ca")
    (port,) = free_ports(1)
    store = tmp_path / "ce.sqlite"
    cfg = CEConfig(f"127.0.0.1:{port}", str(store), pki / "ca.crt", pki / "ce.crt",
                   pki / "ce.key", crl=pki / "crl.pem", domain=frozenset(range(200)),
                   data_period=900.0)

    async def scenario() -> None:
        ce = CentralEntity(cfg)
        held = HeldStore(ce.store)
        ce.store = held  # type: ignore[assignment]
        server = asyncio.create_task(ce.run())

        async def dial(gw: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            ctx = client_context(pki / "ca.crt", pki / f"gw{gw}.crt", pki / f"gw{gw}.key")
            for _ in range(200):
                try:
                    return await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                         server_hostname="ce")
                except OSError:
                    await asyncio.sleep(0.05)
            raise AssertionError("the CE does not listen")

        r0, w0 = await dial(0)
        w0.write(framing.encode_batch(INC, [framing.WireTuple(1, 3, 2700.0, "m1", 101)]))
        await w0.drain()
        assert await asyncio.to_thread(held.entered.wait, 30), "gw0's commit never started"
        # gw0's commit is held: a new connection is accepted (TLS handshake), its invalid
        # batch is refused and its valid one queued behind gw0's, all on the loop
        r1, w1 = await dial(1)
        w1.write(framing.encode_batch(INC, [framing.WireTuple(1, 3, 999.0, "x", 1)]))
        await w1.drain()
        reply = await asyncio.wait_for(_frame(r1), 30)
        assert isinstance(reply, framing.Refused), reply
        assert "not the time of cycle 3" in dict(reply.items)[1]
        w1.write(framing.encode_batch(INC, [framing.WireTuple(2, 3, 2700.0, "x2", 7)]))
        await w1.drain()
        ack1 = asyncio.create_task(_frame(r1))
        ack0 = asyncio.create_task(_frame(r0))
        await asyncio.sleep(0.2)  # the loop runs: neither is acknowledged before its commit
        assert not ack0.done() and not ack1.done()
        assert list(iter_rows(store)) == []
        held.gate.set()
        assert await asyncio.wait_for(ack0, 30) == framing.Ack(1)
        assert await asyncio.wait_for(ack1, 30) == framing.Ack(2)
        rows = sorted((r[0], r[2], r[5], r[6]) for r in iter_rows(store))
        assert rows == [("gw0", 1, "m1", "101"), ("gw1", 2, "x2", "7")]
        assert held.order == ["gw0", "gw1"]  # in the order asked, one at a time
        assert len(held.threads) == 1 and threading.current_thread().name not in held.threads
        for w in (w0, w1):
            w.close()
        ce.stopping.set()
        await asyncio.wait_for(server, 30)

    asyncio.run(scenario())
