"""TOML configurations of the daemons (read with ``tomllib``; written by ``cluster up``).

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from streamanon.dezent.cbf import Key
from streamanon.dezent.mix import load_public_key
from streamanon.dezent.protocol import (
    DEFAULT_P_PUB,
    ProtocolConfig,
    StructureSpec,
    window_cycles,
)
from streamanon.dezent.ring import Ring
from streamanon.dezent.securesum import bits_for, max_true_count
from streamanon.errors import ConfigError, MixError, StreamanonError
from streamanon.net.framing import MAX_FRAME
from streamanon.net.pki import parse_gateway_name


@dataclass(frozen=True)
class ProtocolSection:
    z: int
    delta_t: float
    p_pub: float = DEFAULT_P_PUB
    rule: str = "paper"
    structure: str = "exact"
    domain_max_w: float | None = None
    domain: tuple[int, ...] = ()
    cbf_m: int = 0
    cbf_k: int = 0
    counter_bits: int | None = None  # None: from the bound (ProtocolConfig.min_counter_bits)
    sensors_total: int = 10_000
    ring_seed: int = 1
    epoch_cycles: int = 96
    id_mode: str = "sensor"
    data_period: float = 900.0
    data_t0: float = 0.0
    min_members: int = 3
    publication: str = "direct"
    publication_order: str = "paper"
    mix_padding: int = 64

    def _bits(self, kind: str, k: int) -> int:
        if self.counter_bits is not None:
            return self.counter_bits
        return bits_for(max_true_count(kind, k, self.sensors_total,
                                       window_cycles(self.delta_t, self.data_period)))

    def structure_spec(self) -> StructureSpec:
        if self.structure == "exact":
            if self.domain:
                dom: tuple[Key, ...] = tuple(int(v) for v in self.domain)
            elif self.domain_max_w is not None:
                from streamanon.dezent.grid import bucket_grid

                dom = tuple(int(v) for v in bucket_grid(float(self.domain_max_w)))
            else:
                raise ConfigError("protocol.structure = 'exact' needs domain or domain_max_w")
            return StructureSpec("exact", len(dom), 1, self._bits("exact", 1), dom)
        if self.structure == "cbf":
            if self.cbf_m < 1 or self.cbf_k < 1:
                raise ConfigError("protocol.structure = 'cbf' needs cbf_m >= 1 and cbf_k >= 1")
            return StructureSpec("cbf", self.cbf_m, self.cbf_k, self._bits("cbf", self.cbf_k))
        raise ConfigError(f"protocol.structure must be 'exact' or 'cbf', got {self.structure!r}")

    def protocol_config(self, mix_key: bytes | None = None) -> ProtocolConfig:
        """The core's configuration; ``mix_key``: the CE's public key (publication = mix)."""
        try:
            return ProtocolConfig(z=self.z, delta_t=self.delta_t,
                                  structure=self.structure_spec(),
                                  sensors_total=self.sensors_total, period=self.data_period,
                                  t0=self.data_t0, rule=self.rule, p_pub=self.p_pub,
                                  id_mode=self.id_mode, min_members=self.min_members,
                                  publication=self.publication,
                                  publication_order=self.publication_order,
                                  mix_key=mix_key, mix_padding=self.mix_padding)
        except (StreamanonError, OverflowError) as exc:
            raise ConfigError(f"[protocol]: {exc}") from None

    def ring(self, n: int) -> Ring:
        return Ring(n, self.ring_seed, self.epoch_cycles)


@dataclass(frozen=True)
class ClockSection:
    t0: float = 0.0
    period: float = 900.0
    close: float = 0.5
    ahead: int = 2
    first_cycle: int = 0
    last_cycle: int = -1
    t0_file: str | None = None

    def cycle_at(self, now: float) -> int:
        return math.floor((now - self.t0) / self.period)

    def start_of(self, cycle: int) -> float:
        return self.t0 + cycle * self.period

    def close_of(self, cycle: int) -> float:
        return self.t0 + (cycle + self.close) * self.period


@dataclass(frozen=True)
class SensorIntakeSection:
    registry: Path | None = None
    idle_timeout: float = 300.0
    max_connections: int = 256
    max_line: int = 4096
    insecure_plaintext_sensors: bool = False
    transport: str = "line"  # or "mqtt": the gateway's own broker (net/mqtt_broker.py)
    mosquitto: str | None = None  # the broker's binary (default: found on PATH, /usr/sbin)
    devices: tuple[Any, ...] = ()  # DeviceMapping (net/mqtt_intake.py), [[sensors.device]]

    def registered(self) -> frozenset[str]:
        """The sensor IDs of the registry file (blank lines and ``#`` comments ignored)."""
        if self.registry is None:
            return frozenset()
        try:
            text = Path(self.registry).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"sensor registry {self.registry}: {exc.strerror}") from None
        return frozenset(line.split("#", 1)[0].strip() for line in text.splitlines()
                         if line.split("#", 1)[0].strip())


@dataclass(frozen=True)
class GatewayConfig:
    id: int
    listen: str
    sensors: str
    state_dir: Path
    ca: Path
    cert: Path
    key: Path
    ce: str
    peers: dict[int, str]
    protocol: ProtocolSection
    clock: ClockSection = field(default_factory=ClockSection)
    intake: SensorIntakeSection = field(default_factory=SensorIntakeSection)
    max_frame: int = MAX_FRAME
    coin_seed: int | None = None
    crl: Path | None = None
    metrics: str | None = None
    ce_mix_key: Path | None = None

    @property
    def name(self) -> str:
        return f"gw{self.id}"

    def mix_key(self) -> bytes | None:
        """The CE's mix public key (publication = "mix"), or None."""
        if self.protocol.publication != "mix":
            return None
        if self.ce_mix_key is None:
            raise ConfigError("[protocol] publication = 'mix' needs [gateway] ce_mix_key (the "
                              "CE's public key, pki/ce-mix.pub)")
        try:
            return load_public_key(self.ce_mix_key)
        except OSError as exc:
            raise ConfigError(f"ce_mix_key {self.ce_mix_key}: {exc.strerror}") from None
        except (MixError, ValueError) as exc:
            raise ConfigError(f"ce_mix_key {self.ce_mix_key}: {exc}") from None

    def protocol_config(self) -> ProtocolConfig:
        return self.protocol.protocol_config(self.mix_key())

    def fingerprint(self) -> bytes:
        """SHA-256 of what every gateway of the ring must agree on (the CE's mix key too)."""
        key = self.mix_key()
        shared = {"protocol": asdict(self.protocol), "peers": sorted(self.peers),
                  "clock": {"t0": self.clock.t0 if self.clock.t0_file is None else "file",
                            "period": self.clock.period},
                  "mix_key": key.hex() if key is not None else None}
        return hashlib.sha256(json.dumps(shared, sort_keys=True, default=list)
                              .encode()).digest()


@dataclass(frozen=True)
class CEConfig:
    listen: str
    store: str  # a SQLite path or a postgresql:// DSN
    ca: Path
    cert: Path
    key: Path
    max_frame: int = MAX_FRAME
    crl: Path | None = None
    metrics: str | None = None
    domain: frozenset[Key] | None = None
    data_period: float | None = None
    data_t0: float = 0.0
    max_batch: int = 10_000
    max_id_length: int = 128
    mix_key: Path | None = None
    mix_padding: int = 64


def _load(path: str | Path) -> tuple[dict[str, Any], Path]:
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            return tomllib.load(fh), p.resolve().parent
    except OSError as exc:
        raise ConfigError(f"cannot read {p}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None


def _section(doc: dict[str, Any], name: str, path: str | Path) -> dict[str, Any]:
    sec = doc.get(name)
    if not isinstance(sec, dict):
        raise ConfigError(f"{path}: missing section [{name}]")
    return sec


def _rel(base: Path, value: Any) -> Path:
    p = Path(str(value))
    return p if p.is_absolute() else base / p


def _build(cls: type, values: dict[str, Any], where: str) -> Any:
    try:
        return cls(**values)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def load_gateway_config(path: str | Path) -> GatewayConfig:
    doc, base = _load(path)
    gw = dict(_section(doc, "gateway", path))
    peers_raw = _section(doc, "peers", path)
    peers: dict[int, str] = {}
    for name, addr in peers_raw.items():
        idx = parse_gateway_name(name)
        if idx is None:
            raise ConfigError(f"{path}: [peers] key {name!r} is not gw<N>")
        peers[idx] = str(addr)
    if sorted(peers) != list(range(len(peers))):
        raise ConfigError(f"{path}: [peers] must name gw0..gw{len(peers) - 1}, got "
                          f"{sorted(peers)}")
    proto = dict(_section(doc, "protocol", path))
    if "domain" in proto:
        proto["domain"] = tuple(int(v) for v in proto["domain"])
    protocol = _build(ProtocolSection, proto, f"{path} [protocol]")
    clock = _build(ClockSection, dict(doc.get("clock", {})), f"{path} [clock]")
    if clock.t0_file is not None:
        clock = replace(clock, t0_file=str(_rel(base, clock.t0_file)))
    try:
        cfg = GatewayConfig(
            id=int(gw.pop("id")), listen=str(gw.pop("listen")), sensors=str(gw.pop("sensors")),
            state_dir=_rel(base, gw.pop("state_dir")), ca=_rel(base, gw.pop("ca")),
            cert=_rel(base, gw.pop("cert")), key=_rel(base, gw.pop("key")),
            ce=str(gw.pop("ce")), peers=peers, protocol=protocol, clock=clock,
            max_frame=int(gw.pop("max_frame", MAX_FRAME)),
            coin_seed=gw.pop("coin_seed", None),
            crl=_rel(base, gw.pop("crl")) if "crl" in gw else None,
            metrics=str(gw.pop("metrics")) if "metrics" in gw else None,
            ce_mix_key=_rel(base, gw.pop("ce_mix_key")) if "ce_mix_key" in gw else None,
            intake=_intake(doc, base, path))
    except KeyError as exc:
        raise ConfigError(f"{path}: [gateway] needs {exc.args[0]}") from None
    if gw:
        raise ConfigError(f"{path}: unknown [gateway] keys {sorted(gw)}")
    if cfg.id not in peers:
        raise ConfigError(f"{path}: gateway id {cfg.id} is not in [peers]")
    if cfg.clock.period <= 0 or not 0 <= cfg.clock.close < 1:
        raise ConfigError(f"{path}: [clock] needs period > 0 and 0 <= close < 1")
    try:  # validate now, with the file's name in the message
        pcfg = cfg.protocol_config()
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if pcfg.publication == "mix":
        from streamanon.net.outbox import MIX_CARRY_MAX

        # a batch holds at most every sensor's tuple (dummies included) and each gateway's
        # carried tuples: it must fit a frame, on the ring and to the CE
        most = (protocol.sensors_total + len(peers) * MIX_CARRY_MAX) * pcfg.mix_item_bytes
        if most + pcfg.structure.nbytes + 1024 > cfg.max_frame:
            raise ConfigError(f"{path}: a mix batch may reach {most:,} bytes (sensors_total "
                              f"{protocol.sensors_total:,} and up to {MIX_CARRY_MAX} re-sent "
                              f"tuples per gateway, {pcfg.mix_item_bytes} bytes each), more than "
                              f"max_frame {cfg.max_frame:,}; raise max_frame")
    if cfg.intake.registry is None and not cfg.intake.insecure_plaintext_sensors:
        raise ConfigError(f"{path}: [sensors] needs registry (the sensor IDs of this "
                          "gateway), or insecure_plaintext_sensors = true")
    return cfg


def _intake(doc: dict[str, Any], base: Path, path: str | Path) -> SensorIntakeSection:
    from streamanon.net.mqtt_intake import parse_devices

    sec = dict(doc.get("sensors", {}))
    if "registry" in sec:
        sec["registry"] = _rel(base, sec["registry"])
    sec["devices"] = parse_devices(sec.pop("device", None), f"{path} [sensors]")
    intake = _build(SensorIntakeSection, sec, f"{path} [sensors]")
    if intake.transport not in ("line", "mqtt"):
        raise ConfigError(f"{path}: [sensors] transport must be 'line' or 'mqtt', got "
                          f"{intake.transport!r}")
    if intake.transport == "mqtt" and intake.insecure_plaintext_sensors:
        raise ConfigError(f"{path}: [sensors] transport = 'mqtt' has no plaintext mode (its "
                          "broker requires the sensors' certificates)")
    if intake.devices and intake.transport != "mqtt":
        raise ConfigError(f"{path}: [[sensors.device]] mappings need transport = 'mqtt'")
    if intake.idle_timeout <= 0 or intake.max_connections < 1 or intake.max_line < 64:
        raise ConfigError(f"{path}: [sensors] needs idle_timeout > 0, max_connections >= 1 "
                          "and max_line >= 64")
    return intake


def load_ce_config(path: str | Path) -> CEConfig:
    from streamanon.net.store.base import is_postgres

    doc, base = _load(path)
    ce = dict(_section(doc, "ce", path))
    if "db" in ce and "store" not in ce:  # the key's name before PostgreSQL came
        ce["store"] = ce.pop("db")
    domain: frozenset[Key] | None = None
    if "domain" in ce:
        domain = frozenset(int(v) if isinstance(v, int) else str(v) for v in ce.pop("domain"))
    elif "domain_max_w" in ce:
        from streamanon.dezent.grid import bucket_grid

        domain = frozenset(int(v) for v in bucket_grid(float(ce.pop("domain_max_w"))))
    try:
        store = str(ce.pop("store"))
        cfg = CEConfig(listen=str(ce.pop("listen")),
                       store=store if is_postgres(store) else str(_rel(base, store)),
                       ca=_rel(base, ce.pop("ca")), cert=_rel(base, ce.pop("cert")),
                       key=_rel(base, ce.pop("key")),
                       max_frame=int(ce.pop("max_frame", MAX_FRAME)),
                       crl=_rel(base, ce.pop("crl")) if "crl" in ce else None,
                       metrics=str(ce.pop("metrics")) if "metrics" in ce else None,
                       domain=domain,
                       data_period=(float(ce.pop("data_period")) if "data_period" in ce
                                    else None),
                       data_t0=float(ce.pop("data_t0", 0.0)),
                       max_batch=int(ce.pop("max_batch", 10_000)),
                       max_id_length=int(ce.pop("max_id_length", 128)),
                       mix_key=_rel(base, ce.pop("mix_key")) if "mix_key" in ce else None,
                       mix_padding=int(ce.pop("mix_padding", 64)))
    except KeyError as exc:
        raise ConfigError(f"{path}: [ce] needs {exc.args[0]}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: [ce]: {exc}") from None
    if ce:
        raise ConfigError(f"{path}: unknown [ce] keys {sorted(ce)}")
    return cfg


def toml_dump(doc: dict[str, dict[str, Any]]) -> str:
    """A small TOML writer for the flat sections these files use.

    >>> print(toml_dump({"a": {"x": 1, "y": "s", "z": [1, 2], "w": True}}), end="")
    [a]
    x = 1
    y = "s"
    z = [1, 2]
    w = true
    """
    lines = []
    for name, section in doc.items():
        lines.append(f"[{name}]")
        for k, v in section.items():
            if v is None:
                continue
            lines.append(f"{k} = {_toml_value(v)}")
        lines.append("")
    return "\n".join(lines[:-1]) + "\n"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))
