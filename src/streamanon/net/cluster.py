"""A whole local deployment on loopback: CA, central entity, gateways and a sensor replay, each
a separate process (``python -m streamanon ...``), for a try-out and for the tests.

``Cluster(spec, workdir)`` writes ``pki/``, ``ce.toml``, ``gw<i>.toml`` and ``cluster.toml``
(the replay's district and clock), starts the processes with their output in ``logs/``, and
``run()`` waits for the replayed cycles, lets the gateways stop by themselves (each flushes its
outbox to the CE), stops the CE and writes ``published.csv`` (what the CE holds) next to
``measurements.csv`` (what the sensors sent and the gateways acknowledged). Every child process
is terminated on the way out, also on Ctrl-C or an error.

The district is the simulation's (:class:`~streamanon.sim.district.District`, same seed),
the ring seed is the district's seed and the counting structure is sized like the
simulation's (:meth:`~streamanon.sim.scenarios.SimConfig.structure_spec`), so the CE's table
can be compared with :func:`~streamanon.sim.scenarios.simulate` on the same readings.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from streamanon.net.ce import export_csv
from streamanon.net.config import toml_dump
from streamanon.net.pki import gateway_name, init_pki
from streamanon.sim.district import District, DistrictConfig
from streamanon.sim.scenarios import SimConfig


@dataclass(frozen=True)
class ClusterSpec:
    gateways: int = 5
    period: float = 1.0
    cycles: int | None = 20  # None: until stopped (Ctrl-C), at most to the profiles' end
    z: int = 3
    max_sn: int = 20
    sn_sd: float = 2.0
    seed: int = 1
    start_cycle: int = 0
    delta_t: float = 7260.0
    p_pub: float = 0.5
    rule: str = "paper"
    structure: str = "exact"
    fp_rate: float = 0.05
    counter_bits: int = 20
    close: float = 0.5
    lead: float | None = None  # default: half a period before each cycle
    coin_seed: int | None = None

    def district(self) -> District:
        return District(DistrictConfig(gateways=self.gateways, max_sn=self.max_sn,
                                       seed=self.seed, sn_sd=self.sn_sd))

    def sim_config(self) -> SimConfig:
        return SimConfig(z=self.z, delta_t=self.delta_t, p_pub=self.p_pub, rule=self.rule,
                         structure=self.structure, fp_rate=self.fp_rate,
                         counter_bits=self.counter_bits)

    @property
    def last_cycle(self) -> int:
        """The last cycle to run; -1 when the cluster runs until stopped."""
        return -1 if self.cycles is None else self.start_cycle + self.cycles - 1

    def replay_cycles(self, district: District) -> int:
        if self.cycles is not None:
            return self.cycles
        return district.cycles_available - self.start_cycle


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1 (bound and released: a tiny race remains)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Cluster:
    def __init__(self, spec: ClusterSpec, workdir: str | Path) -> None:
        self.spec = spec
        self.dir = Path(workdir).resolve()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs = self.dir / "logs"
        self.district = spec.district()
        self.t0 = 0.0

    # -- setup ------------------------------------------------------------------------------
    def prepare(self) -> None:
        s = self.spec
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        if not (self.dir / "pki" / "ca.key").exists():
            init_pki(self.dir / "pki", s.gateways)
        ports = free_ports(2 * s.gateways + 1)
        self.ce_addr = f"127.0.0.1:{ports[0]}"
        self.ring_addrs = [f"127.0.0.1:{p}" for p in ports[1 : 1 + s.gateways]]
        self.sensor_addrs = [f"127.0.0.1:{p}" for p in ports[1 + s.gateways :]]
        for stale in (self.dir / "clock.t0", self.dir / "replay.ready"):
            stale.unlink(missing_ok=True)
        spec = s.sim_config().structure_spec(self.district)
        proto: dict[str, Any] = {
            "z": s.z, "delta_t": s.delta_t, "p_pub": s.p_pub, "rule": s.rule,
            "structure": spec.kind, "counter_bits": spec.bits,
            "sensors_total": self.district.sensors, "ring_seed": s.seed,
            "epoch_cycles": s.sim_config().epoch_cycles, "id_mode": "sensor",
            "data_period": 900.0, "data_t0": 0.0}
        if spec.kind == "exact":
            proto["domain_max_w"] = self.district.max_reading()
        else:
            proto.update(cbf_m=spec.m, cbf_k=spec.k)
        clock = {"t0_file": "clock.t0", "period": float(s.period), "close": s.close, "ahead": 2,
                 "first_cycle": s.start_cycle, "last_cycle": s.last_cycle}
        peers = {gateway_name(i): a for i, a in enumerate(self.ring_addrs)}
        (self.dir / "ce.toml").write_text(toml_dump({"ce": {
            "listen": self.ce_addr, "db": "ce.sqlite", "ca": "pki/ca.crt",
            "cert": "pki/ce.crt", "key": "pki/ce.key"}}))
        for i in range(s.gateways):
            gw = {"id": i, "listen": self.ring_addrs[i], "sensors": self.sensor_addrs[i],
                  "state_dir": f"state/gw{i}", "ca": "pki/ca.crt", "cert": f"pki/gw{i}.crt",
                  "key": f"pki/gw{i}.key", "ce": self.ce_addr, "coin_seed": s.coin_seed}
            (self.dir / f"gw{i}.toml").write_text(toml_dump(
                {"gateway": gw, "peers": peers, "protocol": proto, "clock": clock}))
        lead = s.lead if s.lead is not None else s.period / 2
        (self.dir / "cluster.toml").write_text(toml_dump({
            "district": {"gateways": s.gateways, "max_sn": s.max_sn, "sn_sd": s.sn_sd,
                         "seed": s.seed},
            "replay": {"start": s.start_cycle, "cycles": s.replay_cycles(self.district),
                       "t0_file": "clock.t0",
                       "ready_file": "replay.ready",
                       "period": float(s.period), "lead": lead, "data_period": 900.0,
                       "measurements": "measurements.csv", "gateways": self.sensor_addrs},
            "spec": {k: v for k, v in asdict(s).items() if v is not None}}))

    # -- processes --------------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115
        # a session of its own: Ctrl-C reaches the cluster only, which stops the children in
        # order (gateways flush their outboxes before the CE stops)
        proc = subprocess.Popen([sys.executable, "-m", "streamanon", *args], cwd=self.dir,
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        log.close()
        self.procs[name] = proc
        return proc

    def start_ce(self) -> None:
        self._spawn("ce", ["ce", "--config", str(self.dir / "ce.toml")])

    def start_gateway(self, i: int) -> None:
        self._spawn(f"gw{i}", ["gateway", "--config", str(self.dir / f"gw{i}.toml")])

    def start_replay(self) -> None:
        self._spawn("replay", ["sensors", "replay", "--cluster", str(self.dir / "cluster.toml")])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(sig)
            proc.wait(timeout=10)

    def wait_ready(self, deadline: float) -> bool:
        """True when every gateway reached all its peers and the replay reached every gateway
        before ``deadline`` (wall time)."""
        ready = [self.dir / "state" / f"gw{i}" / "ready" for i in range(self.spec.gateways)]
        ready.append(self.dir / "replay.ready")
        while time.time() < deadline:
            if all(p.exists() for p in ready):
                return True
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} at startup; "
                                       f"see {self.logs / (name + '.log')}")
            time.sleep(0.05)
        return False

    def wait(self, name: str, timeout: float) -> int | None:
        try:
            return self.procs[name].wait(timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            return None

    def stop_all(self) -> None:
        """SIGTERM every child still running, then SIGKILL what is left after 10 s."""
        running = [p for p in self.procs.values() if p.poll() is None]
        for p in running:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        end = time.time() + 10
        for p in running:
            try:
                p.wait(timeout=max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def start(self, ready_timeout: float = 120.0) -> None:
        """Prepare and start everything; once every gateway reached all its peers and the
        replay reached every gateway, set the clock (``clock.t0``) so that the first cycle
        begins about one period later."""
        s = self.spec
        self.prepare()
        self.start_ce()
        for i in range(s.gateways):
            self.start_gateway(i)
        self.start_replay()
        if not self.wait_ready(time.time() + ready_timeout):
            raise RuntimeError(f"the cluster was not up after {ready_timeout:g} s; see "
                               f"{self.logs}")
        lead = s.lead if s.lead is not None else s.period / 2
        self.t0 = time.time() + max(0.5, lead + 0.25) + s.period - s.start_cycle * s.period
        tmp = self.dir / "clock.t0.tmp"
        tmp.write_text(f"{self.t0!r}\n")
        tmp.replace(self.dir / "clock.t0")

    def finish(self) -> dict[str, Any]:
        """Wait for the run to end (or for Ctrl-C when it has no end), stop, export, summarize.
        """
        s = self.spec
        exits: dict[str, int | None] = {}
        if s.cycles is None:
            with contextlib.suppress(KeyboardInterrupt):
                while all(p.poll() is None for p in self.procs.values()):
                    time.sleep(0.2)
            exits = self._stop(["replay"] + [f"gw{i}" for i in range(s.gateways)])
        else:
            end = self.t0 + (s.last_cycle + 2) * s.period
            for name in ["replay"] + [f"gw{i}" for i in range(s.gateways)]:
                if name in self.procs:
                    exits[name] = self.wait(name, end + 20 - time.time())
        exits.update(self._stop(["ce"]))
        self.stop_all()
        published = export_csv(self.dir / "ce.sqlite", self.dir / "published.csv")
        return {"workdir": str(self.dir), "exit_codes": exits, "published": published,
                "measurements": str(self.dir / "measurements.csv"),
                "published_csv": str(self.dir / "published.csv"),
                "ce_db": str(self.dir / "ce.sqlite"), "logs": str(self.logs)}

    def _stop(self, names: list[str], timeout: float = 15.0) -> dict[str, int | None]:
        """SIGTERM (graceful: gateways flush their outboxes), then wait."""
        for name in names:
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        return {name: self.wait(name, timeout) for name in names if name in self.procs}

    def run(self) -> dict[str, Any]:
        try:
            self.start()
            return self.finish()
        finally:
            self.stop_all()


def read_stats(workdir: str | Path) -> list[dict[str, Any]]:
    """Every gateway's per-cycle stats rows (``state/gw*/stats.jsonl``)."""
    rows = []
    for path in sorted(Path(workdir).glob("state/gw*/stats.jsonl")):
        with open(path, encoding="utf-8") as fh:
            rows.extend(json.loads(line) for line in fh if line.strip())
    return rows


def check_run(workdir: str | Path, z: int, delta_t: float) -> dict[str, Any]:
    """The independent z checker (privacy only) on ``measurements.csv`` vs ``published.csv``."""
    from streamanon.io import read_records
    from streamanon.zanon.verify import check_z

    d = Path(workdir)
    inputs = list(read_records(str(d / "measurements.csv"), monotone=False))
    report = check_z(inputs, read_records(str(d / "published.csv"), monotone=False), z,
                     delta_t, exact=False)
    return {"ok": report.ok, "input_tuples": report.input_tuples,
            "output_tuples": report.output_tuples,
            "privacy_violations": report.privacy_violations, "unmatched": report.unmatched,
            "first_problem": report.first_problem}
