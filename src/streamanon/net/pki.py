"""A private certificate authority for a deZent deployment (library ``cryptography``).

Design: docs/design/dezent-network.md
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from streamanon.errors import ConfigError, CredentialError

CA_NAME = "streamanon deZent CA"
VALID_DAYS = 825
CRL_DAYS = 825  # the CRL's nextUpdate: OpenSSL tools refuse an expired CRL
ROLE_GATEWAY, ROLE_CE, ROLE_MONITOR, SENSOR_ROLE_PREFIX = "gateway", "ce", "monitor", "sensor@"
_SENSOR_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")


def gateway_name(index: int) -> str:
    """The identity of gateway ``index`` in certificates and frames.

    >>> gateway_name(3)
    'gw3'
    """
    return f"gw{int(index)}"


def parse_gateway_name(name: str) -> int | None:
    """``'gw3' -> 3``; None for anything else (e.g. ``'ce'``).

    >>> parse_gateway_name("gw12"), parse_gateway_name("ce"), parse_gateway_name("gw-1")
    (12, None, None)
    """
    if name.startswith("gw") and name[2:].isdigit():
        return int(name[2:])
    return None


def sensor_role(gateway: int) -> str:
    """The role of a sensor node registered to ``gateway``.

    >>> sensor_role(4)
    'sensor@gw4'
    """
    return SENSOR_ROLE_PREFIX + gateway_name(gateway)


_NUMBERED_SENSOR = re.compile(r"gw(\d+)-sn(\d+)\Z")


def sensor_name(gateway: int, index: int) -> str:
    """The ID of sensor node ``index`` of ``gateway`` (``pki init --sensors``, ``cluster init``
    and the simulated district all name sensors so).

    >>> sensor_name(3, 17)
    'gw003-sn017'
    """
    return f"gw{int(gateway):03d}-sn{int(index):03d}"


def canonical_sensor_id(sensor_id: str) -> str:
    """``sensor_id`` in the naming scheme of :func:`sensor_name`: the older unpadded names
    (``gw0-sn5``) name the same sensor as ``gw000-sn005``; any other ID is itself.

    >>> canonical_sensor_id("gw0-sn5"), canonical_sensor_id("gw000-sn005")
    ('gw000-sn005', 'gw000-sn005')
    >>> canonical_sensor_id("meter-17")
    'meter-17'
    """
    m = _NUMBERED_SENSOR.match(sensor_id)
    return sensor_name(int(m[1]), int(m[2])) if m else sensor_id


def same_sensor(a: str, b: str) -> bool:
    """Whether two IDs name one sensor (``gw0-sn5`` and ``gw000-sn005`` do).

    >>> same_sensor("gw0-sn5", "gw000-sn005"), same_sensor("gw0-sn5", "gw0-sn50")
    (True, False)
    """
    return a == b or canonical_sensor_id(a) == canonical_sensor_id(b)


def check_sensor_id(sensor_id: str) -> str:
    """A sensor ID usable as a certificate name, a file name and a CSV field, or ValueError.

    >>> check_sensor_id("gw000-sn017")
    'gw000-sn017'
    >>> check_sensor_id("a,b")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streamanon.errors.ConfigError: sensor ID 'a,b' must be 1-128 of A-Z a-z 0-9 . _ - (not ...)
    """
    if not _SENSOR_ID.match(sensor_id):
        raise ConfigError(f"sensor ID {sensor_id!r} must be 1-128 of A-Z a-z 0-9 . _ - "
                          "(not starting with . or -)")
    return sensor_id


@dataclass(frozen=True)
class Identity:
    """Who a verified certificate says its holder is."""

    role: str  # "gateway", "ce", "monitor" or "sensor@gw<i>"
    name: str  # "gw3", "ce" or the sensor ID
    serial: int

    @property
    def gateway(self) -> int | None:
        """The gateway's index for a gateway certificate, None otherwise."""
        return parse_gateway_name(self.name) if self.role == ROLE_GATEWAY else None

    @property
    def sensor_of(self) -> int | None:
        """For a sensor certificate, the index of the gateway it is bound to."""
        if self.role.startswith(SENSOR_ROLE_PREFIX):
            return parse_gateway_name(self.role[len(SENSOR_ROLE_PREFIX):])
        return None


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.chmod(path, 0o644)


def _private_dir(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    return d


def _name(cn: str, role: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "streamanon")]
    if role is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def make_ca(common_name: str = CA_NAME, days: int = VALID_DAYS
            ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA certificate (path length 0) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(_name(common_name)).issuer_name(_name(common_name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def make_leaf(name: str, ca_cert: x509.Certificate | None,
              ca_key: ec.EllipticCurvePrivateKey | None, days: int = VALID_DAYS, *,
              role: str | None = None
              ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate for entity ``name`` signed by the CA (self-signed when ``ca_key`` is None:
    what an outsider without the CA's key can make, used by the tests).

    ``role`` defaults to ``gateway`` for ``gw<N>`` and ``ce`` for ``ce``; a sensor's role is
    :func:`sensor_role`. Gateways get server and client authentication and a DNS name, the CE
    server authentication and a DNS name, sensors client authentication only.

    Args:
        name: the entity's name (``gw<N>``, ``ce``, ``monitor`` or a sensor's).
        ca_cert: the CA's certificate (``None``: self-signed).
        ca_key: the CA's private key (``None``: self-signed).
        days: days of validity.
        role: the entity's role (``None``: from the name).
    """
    if role is None:
        role = ROLE_CE if name == "ce" else ROLE_GATEWAY
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    issuer = ca_cert.subject if ca_cert is not None and ca_key is not None else _name(name, role)
    usages = {ROLE_GATEWAY: [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
              ROLE_CE: [ExtendedKeyUsageOID.SERVER_AUTH]}.get(
                  role, [ExtendedKeyUsageOID.CLIENT_AUTH])
    builder = (x509.CertificateBuilder()
               .subject_name(_name(name, role)).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
    if role in (ROLE_GATEWAY, ROLE_CE):
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]),
                                        critical=False)
    cert = builder.sign(ca_key if ca_key is not None else key, hashes.SHA256())
    return cert, key


def default_ca_dir(directory: str | Path) -> Path:
    """``site/pki -> site/pki-ca``: beside the deployment folder, never inside it."""
    d = Path(directory).resolve()
    return d.with_name(d.name + "-ca")


def _inside(a: Path, b: Path) -> bool:
    return a == b or b in a.parents


def sensor_paths(directory: str | Path, gateway: int, sensor_id: str) -> tuple[Path, Path]:
    """Certificate and key of a sensor node in the deployment folder."""
    d = Path(directory) / "sensors" / gateway_name(gateway)
    return d / f"{sensor_id}.crt", d / f"{sensor_id}.key"


def registry_path(directory: str | Path, gateway: int) -> Path:
    """The sensor registry of ``gateway``: the IDs registered to it, one per line."""
    return Path(directory) / "sensors" / f"{gateway_name(gateway)}.txt"


def init_pki(directory: str | Path, gateways: int, *,
             sensors: Mapping[str, int] | None = None, ca_dir: str | Path | None = None,
             force: bool = False) -> dict[str, str]:
    """Create the CA (in ``ca_dir``) and the certificates of ``gateways`` gateways, the CE and
    the ``sensors`` (sensor ID -> its gateway's index) in ``directory``.

    Refuses to overwrite an existing CA unless ``force``, and to put the CA's folder inside
    the deployment folder (or the other way round). Returns name -> certificate path (sensors
    are summarized as ``sensors`` -> their folder).

    Args:
        directory: the deployment folder.
        gateways: the number of gateways (at least 1).
        sensors: sensor ID -> the index of its gateway (``None``: no sensors).
        ca_dir: the CA's folder (``None``: the default next to the deployment folder).
        force: replace an existing CA.
    """
    if gateways < 1:
        raise ConfigError(f"gateways must be >= 1, got {gateways}")
    d = Path(directory).resolve()
    ca = Path(ca_dir).resolve() if ca_dir is not None else default_ca_dir(d)
    if _inside(ca, d) or _inside(d, ca):
        raise ConfigError(f"the CA folder {ca} must not be inside the deployment folder {d} "
                          "(or hold it): every host gets a copy of the deployment folder's "
                          "files, and the CA key can mint any identity")
    sensors = dict(sensors or {})
    spelled: dict[str, str] = {}
    for sid, g in sensors.items():
        check_sensor_id(sid)
        other = spelled.setdefault(canonical_sensor_id(sid), sid)
        if other != sid:
            raise ConfigError(f"sensors {other!r} and {sid!r} are one sensor in two spellings "
                              f"(name it {canonical_sensor_id(sid)!r})")
        if not 0 <= g < gateways:
            raise ConfigError(f"sensor {sid!r} is bound to gateway {g}, not one of "
                              f"0..{gateways - 1}")
    for existing in (ca / "ca.key", d / "ca.key"):
        if existing.exists() and not force:
            raise FileExistsError(f"{existing} exists (use --force to make a new CA)")
    _private_dir(d)
    _private_dir(ca)
    (d / "ca.key").unlink(missing_ok=True)  # an older layout kept it here
    if force and (d / "sensors").exists():
        shutil.rmtree(d / "sensors")
    ca_cert, ca_key = make_ca()
    _write_key(ca / "ca.key", ca_key)
    _write_cert(ca / "ca.crt", ca_cert)
    _write_cert(d / "ca.crt", ca_cert)
    (ca / "revoked.txt").write_text("")
    write_crl(d, ca)
    out = {"ca": str(d / "ca.crt"), "ca_key": str(ca / "ca.key"), "crl": str(d / "crl.pem")}
    for name in [gateway_name(i) for i in range(gateways)] + ["ce", "monitor"]:
        cert, key = make_leaf(name, ca_cert, ca_key,
                              role=ROLE_MONITOR if name == "monitor" else None)
        _write_key(d / f"{name}.key", key)
        _write_cert(d / f"{name}.crt", cert)
        out[name] = str(d / f"{name}.crt")
    if sensors:
        _private_dir(d / "sensors")
        by_gw: dict[int, list[str]] = {}
        for sid, g in sensors.items():
            by_gw.setdefault(g, []).append(sid)
        for g in range(gateways):
            ids = sorted(by_gw.get(g, []))
            _private_dir(d / "sensors" / gateway_name(g))
            for sid in ids:
                cert, key = make_leaf(sid, ca_cert, ca_key, role=sensor_role(g))
                crt_path, key_path = sensor_paths(d, g, sid)
                _write_key(key_path, key)
                _write_cert(crt_path, cert)
            registry_path(d, g).write_text("".join(f"{sid}\n" for sid in ids))
        out["sensors"] = str(d / "sensors")
    out["ce_mix_key"] = str(write_mix_keys(d, force=force))
    return out


def write_mix_keys(directory: str | Path, *, force: bool = False) -> Path:
    """The CE's mix key pair in ``directory`` (``ce-mix.key`` 0600, ``ce-mix.pub``); an existing
    pair is kept unless ``force``. Returns the public key's path."""
    from streamanon.dezent.mix import MixKeys

    d = Path(directory)
    private, public = d / "ce-mix.key", d / "ce-mix.pub"
    if private.exists() and public.exists() and not force:
        return public
    private.unlink(missing_ok=True)
    MixKeys.generate().save(private, public)
    return public


def _load_ca(ca_dir: str | Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca = Path(ca_dir)
    if not (ca / "ca.key").exists():
        raise FileNotFoundError(f"no CA key in {ca} (the CA folder that `pki init` wrote)")
    try:
        cert = x509.load_pem_x509_certificate((ca / "ca.crt").read_bytes())
    except ValueError as exc:  # cryptography's word for bytes that are not a certificate
        raise CredentialError(f"{ca / 'ca.crt'}: {exc}") from None
    try:
        key = serialization.load_pem_private_key((ca / "ca.key").read_bytes(), password=None)
    except ValueError as exc:
        raise CredentialError(f"{ca / 'ca.key'}: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CredentialError(f"{ca / 'ca.key'} is not an EC key")
    return cert, key


def issue(directory: str | Path, name: str, ca_dir: str | Path, *,
          sensor_of: int | None = None) -> Path:
    """(Re-)issue the certificate of ``name`` (``gw<i>``, ``ce`` or, with ``sensor_of``, a
    sensor ID): a new key and serial. The old certificate stays valid until :func:`revoke`
    is called on its serial (so a host can switch first). Returns the certificate's path.
    """
    ca_cert, ca_key = _load_ca(ca_dir)
    d = Path(directory)
    if sensor_of is not None:
        check_sensor_id(name)
        site = site_gateways(d)
        if sensor_of not in site:
            have = f"gw0..gw{max(site)}" if site else "none"
            raise ConfigError(f"--sensor-of {sensor_of}: {d} has no gateway gw{sensor_of} "
                              f"(its gateways: {have})")
        for g in site:
            reg = registry_path(d, g)
            if g != sensor_of and reg.exists() and name in reg.read_text().split():
                raise ConfigError(
                    f"sensor {name!r} is registered to {gateway_name(g)}: one identity counts "
                    f"at one gateway only (re-issue it with --sensor-of {g}, or revoke its "
                    f"certificate and remove it from {reg} before moving it)")
        crt_path, key_path = sensor_paths(d, sensor_of, name)
        _private_dir(crt_path.parent)
        cert, key = make_leaf(name, ca_cert, ca_key, role=sensor_role(sensor_of))
        reg = registry_path(d, sensor_of)
        ids = set(reg.read_text().split()) if reg.exists() else set()
        if name not in ids:
            reg.write_text("".join(f"{s}\n" for s in sorted(ids | {name})))
    else:
        if name != "ce" and parse_gateway_name(name) is None:
            raise ConfigError(f"{name!r} is neither gw<N> nor ce (give sensor_of for a sensor)")
        crt_path, key_path = d / f"{name}.crt", d / f"{name}.key"
        cert, key = make_leaf(name, ca_cert, ca_key)
    _write_key(key_path, key)
    _write_cert(crt_path, cert)
    return crt_path


def site_gateways(directory: str | Path) -> list[int]:
    """The gateways of a deployment folder: the indexes of its ``gw<i>.crt`` files."""
    found = (parse_gateway_name(p.stem) for p in Path(directory).glob("gw*.crt"))
    return sorted(g for g in found if g is not None)


def revoke(directory: str | Path, certificate: str | Path, ca_dir: str | Path) -> int:
    """Revoke ``certificate`` (a PEM file): its serial joins the CA's ``revoked.txt`` and the
    deployment folder gets a new ``crl.pem``. Returns the serial.

    Refuses (ValueError) the CA's own certificate (a CRL cannot revoke its issuer: make a new
    CA with ``pki init --force``) and a certificate this CA did not issue (its serial in this
    CRL would change nothing)."""
    try:
        cert = x509.load_pem_x509_certificate(Path(certificate).read_bytes())
    except ValueError:
        raise CredentialError(f"{certificate}: not a PEM certificate") from None
    ca = Path(ca_dir)
    ca_cert, _ = _load_ca(ca)
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if cert == ca_cert or is_ca:
        raise CredentialError(f"{certificate} is a CA certificate "
                              f"({cert.subject.rfc4514_string()}): a CRL cannot revoke it; "
                              "if the CA key is compromised, make a new CA (pki init --force) "
                              "and redistribute every certificate")
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        raise CredentialError(f"{certificate} was not issued by this CA ({ca / 'ca.crt'}; it is "
                              f"issued by {cert.issuer.rfc4514_string()}): revoking it here would "
                              "change nothing; revoke it with the CA that issued it") from None
    listed = _revoked_serials(ca)
    if cert.serial_number not in listed:
        with open(ca / "revoked.txt", "a", encoding="utf-8") as fh:
            fh.write(f"{cert.serial_number:x}\n")
    write_crl(directory, ca)
    return cert.serial_number


def _revoked_serials(ca_dir: Path) -> list[int]:
    path = ca_dir / "revoked.txt"
    if not path.exists():
        return []
    return [int(x, 16) for x in path.read_text().split()]


def write_crl(directory: str | Path, ca_dir: str | Path) -> Path:
    """Sign the CRL of every serial in the CA's ``revoked.txt`` into ``directory/crl.pem``."""
    ca_cert, ca_key = _load_ca(ca_dir)
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateRevocationListBuilder().issuer_name(ca_cert.subject)
               .last_update(now - dt.timedelta(minutes=5))
               .next_update(now + dt.timedelta(days=CRL_DAYS)))
    for serial in _revoked_serials(Path(ca_dir)):
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now).build())
    crl = builder.sign(ca_key, hashes.SHA256())
    out = Path(directory) / "crl.pem"
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    os.chmod(tmp, 0o644)
    tmp.replace(out)  # atomic: a daemon reloading it never reads half a file
    return out


def load_crl(crl_path: str | Path, ca_path: str | Path) -> frozenset[int]:
    """The revoked serials of a CRL, after checking that the CA signed it (CredentialError if
    not, or if a file is not PEM)."""
    try:
        crl = x509.load_pem_x509_crl(Path(crl_path).read_bytes())
    except ValueError as exc:  # cryptography's word for bytes that are not a CRL
        raise CredentialError(f"{crl_path}: {exc}") from None
    try:
        ca = x509.load_pem_x509_certificate(Path(ca_path).read_bytes())
    except ValueError as exc:
        raise CredentialError(f"{ca_path}: {exc}") from None
    pub = ca.public_key()
    if crl.issuer != ca.subject or not crl.is_signature_valid(pub):  # type: ignore[arg-type]
        raise CredentialError(f"{crl_path} is not signed by the CA in {ca_path}")
    return frozenset(r.serial_number for r in crl)


def write_self_signed(directory: str | Path, name: str, *, role: str | None = None
                      ) -> tuple[Path, Path]:
    """A self-signed certificate + key claiming to be ``name`` (not from the CA)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    cert, key = make_leaf(name, None, None, role=role)
    _write_key(d / f"{name}-selfsigned.key", key)
    _write_cert(d / f"{name}-selfsigned.crt", cert)
    return d / f"{name}-selfsigned.crt", d / f"{name}-selfsigned.key"
