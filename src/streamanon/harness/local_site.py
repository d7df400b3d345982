"""A whole local deZent site on loopback: CA, central entity, gateways and a sensor replay,
each a separate process (``python -m streamanon ...``), for a try-out and for the tests
(``streamanon cluster up``).

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from streamanon.dezent.protocol import DEFAULT_P_PUB
from streamanon.errors import ConfigError, SiteStartError, WorkdirInUse
from streamanon.harness.ports import free_ports
from streamanon.net.config import toml_dump
from streamanon.net.pki import gateway_name, init_pki, write_mix_keys
from streamanon.net.store import clear_store, export_csv, is_postgres, stored_rows
from streamanon.sim.config import SimConfig
from streamanon.sim.district import District, DistrictConfig


@dataclass(frozen=True)
class LocalSiteSpec:
    gateways: int = 5
    period: float = 1.0
    cycles: int | None = 20  # None: until stopped (Ctrl-C), at most to the profiles' end
    z: int = 3
    max_sn: int = 20
    sn_sd: float = 2.0
    seed: int = 1
    start_cycle: int = 0
    delta_t: float = 7260.0
    p_pub: float = DEFAULT_P_PUB
    rule: str = "paper"
    structure: str = "exact"
    fp_rate: float = 0.05
    counter_bits: int | None = None  # None: the narrowest width for the largest true count
    publication: str = "direct"  # or "mix"
    publication_order: str = "paper"  # or "random"
    id_mode: str = "sensor"
    close: float = 0.5
    lead: float | None = None  # default: half a period before each cycle
    coin_seed: int | None = None
    min_members: int = 3
    store: str | None = None  # None: ce.sqlite in the workdir; or a postgresql:// DSN
    insecure_plaintext_sensors: bool = False
    sensor_transport: str = "line"  # or "mqtt": every gateway runs its own broker
    metrics: bool = True  # every daemon serves its metrics (for `cluster status`)

    def district(self) -> District:
        return District(DistrictConfig(gateways=self.gateways, max_sn=self.max_sn,
                                       seed=self.seed, sn_sd=self.sn_sd))

    def sim_config(self) -> SimConfig:
        return SimConfig(z=self.z, delta_t=self.delta_t, p_pub=self.p_pub, rule=self.rule,
                         structure=self.structure, fp_rate=self.fp_rate,
                         counter_bits=self.counter_bits, publication=self.publication,
                         publication_order=self.publication_order)

    @property
    def last_cycle(self) -> int:
        """The last cycle to run; -1 when the site runs until stopped."""
        return -1 if self.cycles is None else self.start_cycle + self.cycles - 1

    def replay_cycles(self, district: District) -> int:
        if self.cycles is not None:
            return self.cycles
        return district.cycles_available - self.start_cycle


# what a run leaves in its workdir (removed by mode="force"; nothing else is touched)
RUN_FILES = ("ce.sqlite", "ce.sqlite-wal", "ce.sqlite-shm", "measurements.csv",
             "published.csv", "run.json", "clock.t0", "clock.t0.tmp", "replay.ready",
             "ce.toml", "cluster.toml")
RUN_DIRS = ("state", "logs", "pki", "ca")
MODES = ("new", "force", "resume")
# what a resumed run must share with the earlier one (period, cycles and the store's address
# may change between runs)
RESUME_FIXED = ("gateways", "z", "max_sn", "sn_sd", "seed", "delta_t", "p_pub", "rule",
                "structure", "fp_rate", "counter_bits", "publication", "publication_order",
                "id_mode", "min_members", "insecure_plaintext_sensors")


class LocalSite:
    def __init__(self, spec: LocalSiteSpec, workdir: str | Path, mode: str = "new") -> None:
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
        self.dir = Path(workdir).resolve()
        self.mode = mode
        if mode == "resume":
            spec = replace(spec, start_cycle=self._resume_cycle(spec))
        self.spec = spec
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs = self.dir / "logs"
        self.district = spec.district()
        self.t0 = 0.0
        self.interrupted = False

    @property
    def store(self) -> str:
        return self.spec.store or str(self.dir / "ce.sqlite")

    def _resume_cycle(self, spec: LocalSiteSpec) -> int:
        """The cycle the earlier run stopped at; refuses a resume whose site or privacy
        parameters differ from the earlier run's (its CE rows and outboxes were made with
        those: another z or another ring would make the final check wrong, not the data)."""
        try:
            run = json.loads((self.dir / "run.json").read_text())
            cycle = int(run["next_cycle"])
        except (OSError, ValueError, KeyError) as exc:
            raise WorkdirInUse(f"nothing to resume in {self.dir}: no usable run.json "
                               f"({exc})") from None
        earlier = run.get("spec", {})
        now = asdict(spec)
        changed = [f"{k} {earlier[k]!r} -> {now[k]!r}" for k in RESUME_FIXED
                   if k in earlier and earlier[k] != now[k]]
        if changed:
            raise WorkdirInUse(f"--resume in {self.dir} with other parameters than its earlier "
                               f"run: {'; '.join(changed)}. Give the earlier values, or "
                               "--force to start a new run")
        return cycle

    def earlier_run(self) -> list[str]:
        """What of an earlier run the workdir holds (empty: none)."""
        found = []
        if self.spec.store and is_postgres(self.spec.store):
            n = stored_rows(self.spec.store)
            if n:
                found.append(f"{n} rows in the PostgreSQL store")
        found += [n for n in RUN_FILES + RUN_DIRS if (self.dir / n).exists()]
        found += [p.name for p in self.dir.glob("gw*.toml")]
        return found

    def _clear(self) -> None:
        for n in RUN_FILES:
            (self.dir / n).unlink(missing_ok=True)
        for p in self.dir.glob("gw*.toml"):
            p.unlink()
        for n in RUN_DIRS:
            if (self.dir / n).exists():
                shutil.rmtree(self.dir / n)
        if self.spec.store and is_postgres(self.spec.store):
            clear_store(self.spec.store)

    # -- setup ------------------------------------------------------------------------------
    def prepare(self) -> None:
        s = self.spec
        if self.mode != "resume":
            earlier = self.earlier_run()
            if earlier and self.mode == "new":
                raise WorkdirInUse(
                    f"{self.dir} holds an earlier run ({', '.join(earlier[:6])}); use "
                    "--force to clear it or --resume to continue it")
            if earlier:
                self._clear()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        pki = self.dir / "pki"
        if not (pki / "ca.crt").exists():
            sensors = dict(zip(self.district.sensor_ids,
                               self.district.sn_gateway.tolist(), strict=True))
            init_pki(pki, s.gateways, sensors=sensors, ca_dir=self.dir / "ca")
        write_mix_keys(pki)  # kept when there (a workdir of an older version has none)
        ports = free_ports(4 * s.gateways + 2)
        self.ce_addr = f"127.0.0.1:{ports[0]}"
        self.ring_addrs = [f"127.0.0.1:{p}" for p in ports[1 : 1 + s.gateways]]
        self.sensor_addrs = [f"127.0.0.1:{p}" for p in ports[1 + s.gateways :
                                                              1 + 2 * s.gateways]]
        self.metrics_addrs = {f"gw{i}": f"127.0.0.1:{p}" for i, p in
                              enumerate(ports[1 + 2 * s.gateways : 1 + 3 * s.gateways])}
        self.metrics_addrs["ce"] = f"127.0.0.1:{ports[1 + 3 * s.gateways]}"
        for stale in (self.dir / "clock.t0", self.dir / "replay.ready"):
            stale.unlink(missing_ok=True)
        spec = s.sim_config().structure_spec(self.district)
        proto: dict[str, Any] = {
            "z": s.z, "delta_t": s.delta_t, "p_pub": s.p_pub, "rule": s.rule,
            "structure": spec.kind, "counter_bits": spec.bits,
            "sensors_total": self.district.sensors, "ring_seed": s.seed,
            "epoch_cycles": s.sim_config().epoch_cycles, "id_mode": s.id_mode,
            "data_period": 900.0, "data_t0": 0.0, "min_members": s.min_members,
            "publication": s.publication, "publication_order": s.publication_order}
        if spec.kind == "exact":
            proto["domain_max_w"] = self.district.max_reading()
        else:
            proto.update(cbf_m=spec.m, cbf_k=spec.k)
        clock = {"t0_file": "clock.t0", "period": float(s.period), "close": s.close, "ahead": 2,
                 "first_cycle": s.start_cycle, "last_cycle": s.last_cycle}
        peers = {gateway_name(i): a for i, a in enumerate(self.ring_addrs)}
        ce: dict[str, Any] = {
            "listen": self.ce_addr, "store": s.store or "ce.sqlite", "ca": "pki/ca.crt",
            "cert": "pki/ce.crt", "key": "pki/ce.key", "crl": "pki/crl.pem",
            "data_period": 900.0, "data_t0": 0.0}
        if spec.kind == "exact":
            ce["domain_max_w"] = proto["domain_max_w"]
        if s.metrics:
            ce["metrics"] = self.metrics_addrs["ce"]
        if s.publication == "mix":
            ce["mix_key"] = "pki/ce-mix.key"
        (self.dir / "ce.toml").write_text(toml_dump({"ce": ce}))
        for i in range(s.gateways):
            gw = {"id": i, "listen": self.ring_addrs[i], "sensors": self.sensor_addrs[i],
                  "state_dir": f"state/gw{i}", "ca": "pki/ca.crt", "cert": f"pki/gw{i}.crt",
                  "key": f"pki/gw{i}.key", "crl": "pki/crl.pem", "ce": self.ce_addr,
                  "coin_seed": s.coin_seed}
            if s.publication == "mix":
                gw["ce_mix_key"] = "pki/ce-mix.pub"
            if s.metrics:
                gw["metrics"] = self.metrics_addrs[f"gw{i}"]
            intake: dict[str, Any] = {"registry": f"pki/sensors/gw{i}.txt"}
            if s.insecure_plaintext_sensors:
                intake["insecure_plaintext_sensors"] = True
            if s.sensor_transport != "line":
                intake["transport"] = s.sensor_transport
            (self.dir / f"gw{i}.toml").write_text(toml_dump(
                {"gateway": gw, "sensors": intake, "peers": peers, "protocol": proto,
                 "clock": clock}))
        lead = s.lead if s.lead is not None else s.period / 2
        (self.dir / "cluster.toml").write_text(toml_dump({
            "district": {"gateways": s.gateways, "max_sn": s.max_sn, "sn_sd": s.sn_sd,
                         "seed": s.seed},
            "replay": {"start": s.start_cycle, "cycles": s.replay_cycles(self.district),
                       "t0_file": "clock.t0",
                       "ready_file": "replay.ready",
                       "period": float(s.period), "lead": lead, "data_period": 900.0,
                       "measurements": "measurements.csv", "gateways": self.sensor_addrs,
                       **({} if s.insecure_plaintext_sensors else {"pki": "pki"}),
                       **({"append": True} if self.mode == "resume" else {}),
                       **({"transport": s.sensor_transport}
                          if s.sensor_transport != "line" else {})},
            "spec": {k: v for k, v in asdict(s).items() if v is not None}}))

    # -- processes --------------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None
               ) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115
        # a session of its own: Ctrl-C reaches the site only, which stops the children in
        # order (gateways flush their outboxes before the CE stops)
        proc = subprocess.Popen([sys.executable, "-m", "streamanon", *args], cwd=self.dir,
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True,
                                env={**os.environ, **env} if env else None)
        log.close()
        self.procs[name] = proc
        return proc

    def start_ce(self) -> None:
        self._spawn("ce", ["ce", "--config", str(self.dir / "ce.toml")])

    def start_gateway(self, i: int, env: dict[str, str] | None = None) -> None:
        """Start gateway ``i`` (``env``: extra environment, e.g. a test's failpoint)."""
        self._spawn(f"gw{i}", ["gateway", "--config", str(self.dir / f"gw{i}.toml")], env)

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
                    raise SiteStartError(f"{name} exited with {proc.returncode} at startup; "
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

    def start(self, ready_timeout: float = 120.0,
              gateway_env: dict[int, dict[str, str]] | None = None) -> None:
        """Prepare and start everything; once every gateway reached all its peers and the
        replay reached every gateway, set the clock (``clock.t0``) so that the first cycle
        begins about one period later. ``gateway_env``: extra environment per gateway."""
        s = self.spec
        self.prepare()
        self.start_ce()
        for i in range(s.gateways):
            self.start_gateway(i, (gateway_env or {}).get(i))
        self.start_replay()
        if not self.wait_ready(time.time() + ready_timeout):
            raise SiteStartError(f"the cluster was not up after {ready_timeout:g} s; see "
                                 f"{self.logs}")
        lead = s.lead if s.lead is not None else s.period / 2
        self.t0 = time.time() + max(0.5, lead + 0.25) + s.period - s.start_cycle * s.period
        tmp = self.dir / "clock.t0.tmp"
        tmp.write_text(f"{self.t0!r}\n")
        tmp.replace(self.dir / "clock.t0")

    def current_cycle(self) -> int:
        """The cycle the site's clock is in now."""
        return int((time.time() - self.t0) // self.spec.period)

    def finish(self, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Wait for the run to end (or for Ctrl-C when it has no end), stop, export, summarize.

        ``progress(cycle)`` is called about five times per period with the current cycle.
        On Ctrl-C the processes are stopped in order all the same (gateways first: they flush
        their outboxes), what the CE holds is exported and the summary says
        ``interrupted: true``.
        """
        s = self.spec
        exits: dict[str, int | None] = {}
        names = ["replay"] + [f"gw{i}" for i in range(s.gateways)]
        end = self.t0 + (s.last_cycle + 2) * s.period
        try:
            while any(self.procs[n].poll() is None for n in names if n in self.procs):
                if s.cycles is not None and time.time() > end + 20:
                    break
                if s.cycles is None and any(p.poll() is not None
                                            for p in self.procs.values()):
                    break  # a daemon died: stop the rest
                if progress is not None:
                    progress(self.current_cycle())
                time.sleep(min(0.2, s.period / 5))
        except KeyboardInterrupt:
            self.interrupted = True
        exits = self._stop(names)
        exits.update(self._stop(["ce"]))
        self.stop_all()
        published = export_csv(self.store, self.dir / "published.csv")
        last = min(self.current_cycle(), s.last_cycle) if s.cycles is not None \
            else self.current_cycle()
        (self.dir / "run.json").write_text(json.dumps({
            "first_cycle": s.start_cycle, "next_cycle": max(s.start_cycle, last + 1),
            "interrupted": self.interrupted, "exit_codes": exits,
            "spec": {k: getattr(s, k) for k in RESUME_FIXED}}) + "\n")
        return {"workdir": str(self.dir), "exit_codes": exits, "published": published,
                "interrupted": self.interrupted, "cycles": [s.start_cycle, last],
                "measurements": str(self.dir / "measurements.csv"),
                "published_csv": str(self.dir / "published.csv"),
                "ce_store": _redact_dsn(self.store), "logs": str(self.logs)}

    def _stop(self, names: list[str], timeout: float = 15.0) -> dict[str, int | None]:
        """SIGTERM (graceful: gateways flush their outboxes), then wait."""
        for name in names:
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        return {name: self.wait(name, timeout) for name in names if name in self.procs}

    def run(self, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        try:
            self.start()
            return self.finish(progress)
        finally:
            self.stop_all()


def _redact_dsn(store: str) -> str:
    from streamanon.net.ce import _redact

    return _redact(store)


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
    from streamanon.verify.z import check_z

    d = Path(workdir)
    inputs = list(read_records(str(d / "measurements.csv"), monotone=False))
    report = check_z(inputs, read_records(str(d / "published.csv"), monotone=False), z,
                     delta_t, exact=False)
    return {"ok": report.ok, "input_tuples": report.input_tuples,
            "output_tuples": report.output_tuples,
            "privacy_violations": report.privacy_violations, "unmatched": report.unmatched,
            "first_problem": report.first_problem}


def site_status(workdir: str | Path) -> list[dict[str, Any]]:
    """One row per daemon of the site in ``workdir`` (from its ``ce.toml``, ``gw*.toml`` and
    metrics endpoints, scraped with ``pki/monitor.crt``): reachable or not, and its figures."""
    from streamanon.net.config import load_ce_config, load_gateway_config
    from streamanon.net.metrics import scrape

    d = Path(workdir)
    pki = d / "pki"
    creds = {"ca": pki / "ca.crt", "cert": pki / "monitor.crt", "key": pki / "monitor.key"}
    targets: list[tuple[str, str | None]] = []
    if (d / "ce.toml").exists():
        targets.append(("ce", load_ce_config(d / "ce.toml").metrics))
    for path in sorted(d.glob("gw*.toml"), key=lambda p: int(p.stem[2:] or 0)
                       if p.stem[2:].isdigit() else 0):
        try:
            targets.append((path.stem, load_gateway_config(path).metrics))
        except ConfigError:
            continue
    rows = []
    for name, address in targets:
        row: dict[str, Any] = {"daemon": name, "metrics": address}
        if address is None:
            row["state"] = "no metrics address"
        else:
            try:
                m = scrape(address, name, **creds)
                row["state"] = "up"
                row.update(_summarize(name, m))
            except (OSError, ValueError) as exc:
                row["state"] = f"unreachable ({type(exc).__name__})"
        rows.append(row)
    return rows


def _summarize(name: str, m: dict[str, float]) -> dict[str, Any]:
    def total(prefix: str, skip: str | None = None) -> int:
        return int(sum(v for k, v in m.items() if k.startswith(prefix + "{")
                       and (skip is None or skip not in k)))

    if name == "ce":
        return {"rows": int(m.get("dezent_ce_rows", 0)),
                "stored": int(m.get("dezent_ce_tuples_stored", 0)),
                "refused": int(m.get("dezent_ce_tuples_refused", 0)),
                "batches": total("dezent_ce_batches"),
                "commit_ms": _mean_ms(m, "dezent_ce_commit_seconds")}
    return {"cycle": int(m.get("dezent_last_cycle", -1)),
            "ring": int(m.get("dezent_ring_size", 0)),
            "peers_up": int(m.get("dezent_peers_up", 0)),
            "completed": int(m.get("dezent_cycles_completed", 0)),
            "skipped": total("dezent_cycles_skipped"),
            "readings_ok": int(m.get("dezent_readings{outcome=ok}", 0)),
            "readings_refused": total("dezent_readings", skip="outcome=ok"),
            "published": int(m.get("dezent_tuples_published", 0)),
            "outbox": int(m.get("dezent_outbox_depth", 0)),
            "commit_ms": _mean_ms(m, "dezent_ce_commit_seconds")}


def _mean_ms(m: dict[str, float], hist: str) -> float | None:
    n = m.get(hist + "_count", 0.0)
    return round(1e3 * m.get(hist + "_sum", 0.0) / n, 2) if n else None
