"""A private certificate authority for a deZent deployment (library ``cryptography``).

``init_pki(dir, gateways=N)`` writes ``ca.crt``/``ca.key``, ``gw<i>.crt``/``gw<i>.key`` for
``i = 0..N-1`` and ``ce.crt``/``ce.key``. Keys are ECDSA P-256, written with mode ``0600`` in a
directory of mode ``0700``; certificates are ``0644``. Every leaf certificate names its entity
twice: the subject's common name and a DNS subject alternative name (``gw3``, ``ce``), so a TLS
client checks the identity of the server it dialled with ordinary hostname verification
(``server_hostname="gw3"``), and a server reads the client's identity from its common name.
Leaves are valid for client and server authentication (every gateway is both).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME = "streamanon deZent CA"
VALID_DAYS = 825


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


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "streamanon"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


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
              ca_key: ec.EllipticCurvePrivateKey | None,
              days: int = VALID_DAYS) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate for entity ``name`` signed by the CA (self-signed when ``ca_key`` is None:
    what an outsider without the CA's key can make, used by the tests)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    issuer = ca_cert.subject if ca_cert is not None and ca_key is not None else _name(name)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(name)).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]),
                              critical=False))
    cert = builder.sign(ca_key if ca_key is not None else key, hashes.SHA256())
    return cert, key


def init_pki(directory: str | Path, gateways: int, *, force: bool = False) -> dict[str, str]:
    """Create the CA and the certificates of ``gateways`` gateways and the CE in ``directory``.

    Refuses to overwrite an existing CA unless ``force``. Returns name -> certificate path.
    """
    if gateways < 1:
        raise ValueError(f"gateways must be >= 1, got {gateways}")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    if (d / "ca.key").exists() and not force:
        raise FileExistsError(f"{d / 'ca.key'} exists (use --force to make a new CA)")
    ca_cert, ca_key = make_ca()
    _write_key(d / "ca.key", ca_key)
    _write_cert(d / "ca.crt", ca_cert)
    out = {"ca": str(d / "ca.crt")}
    for name in [gateway_name(i) for i in range(gateways)] + ["ce"]:
        cert, key = make_leaf(name, ca_cert, ca_key)
        _write_key(d / f"{name}.key", key)
        _write_cert(d / f"{name}.crt", cert)
        out[name] = str(d / f"{name}.crt")
    return out


def write_self_signed(directory: str | Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate + key claiming to be ``name`` (not from the CA)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    cert, key = make_leaf(name, None, None)
    _write_key(d / f"{name}-selfsigned.key", key)
    _write_cert(d / f"{name}-selfsigned.crt", cert)
    return d / f"{name}-selfsigned.crt", d / f"{name}-selfsigned.key"
