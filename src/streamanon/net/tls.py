"""Mutual-TLS contexts (standard ``ssl``), peer identities and the revocation list.

Both ends present a certificate of the deployment's CA and verify the other's against that
CA only (TLS 1.3, no system trust store). A client checks that the server is who it dialled by
hostname verification against the identity name (``gw3``, ``ce``) in the server certificate's
DNS name; a server reads the client's identity (role and name, :class:`~.pki.Identity`) from
the verified certificate. A peer without a certificate, or with one the CA did not sign (e.g.
self-signed), fails the handshake and never reaches the application.

Revocation: :class:`Revocations` holds the serials of the deployment's ``crl.pem`` (checked to
be signed by the CA) and re-reads the file when it changes, so a revocation takes effect
without a restart; every server and client checks the peer's serial right after the
handshake (:func:`check_peer`), before it reads or sends a record.
"""

from __future__ import annotations

import logging
import os
import ssl
from pathlib import Path

from streamanon.errors import ConfigError, CredentialError
from streamanon.net.pki import Identity, load_crl

log = logging.getLogger("streamanon.tls")


def _base(purpose: ssl.Purpose, ca: str | Path, cert: str | Path, key: str | Path
          ) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if purpose is ssl.Purpose.CLIENT_AUTH
                         else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(cafile=str(ca))
    ctx.load_cert_chain(certfile=str(cert), keyfile=str(key))
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def server_context(ca: str | Path, cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """For accepting connections: the client must present a certificate of the CA."""
    return _base(ssl.Purpose.CLIENT_AUTH, ca, cert, key)


def client_context(ca: str | Path, cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """For dialling a peer: presents our certificate, verifies the server's and its name."""
    ctx = _base(ssl.Purpose.SERVER_AUTH, ca, cert, key)
    ctx.check_hostname = True
    return ctx


def peer_identity(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> Identity | None:
    """Role, name and serial of the verified peer certificate, or None (no certificate, or
    one without a role: not issued by :func:`~.pki.init_pki`)."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    fields: dict[str, str] = {}
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            fields[str(key)] = str(value)
    role, name = fields.get("organizationalUnitName"), fields.get("commonName")
    serial = cert.get("serialNumber")
    if not role or not name or not isinstance(serial, str):
        return None
    return Identity(role, name, int(serial, 16))


def peer_name(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """The common name of the verified peer certificate, or None."""
    ident = peer_identity(ssl_object)
    return None if ident is None else ident.name


class Revocations:
    """The revoked serials of ``crl.pem``, re-read whenever the file changes.

    A CRL that cannot be read or is not signed by the CA is refused at start-up (ValueError);
    later, a bad replacement is logged and the last good list kept (fail closed: never fewer
    revocations than before). Without a CRL configured (``path`` None) nothing is revoked.
    """

    def __init__(self, path: str | Path | None, ca: str | Path) -> None:
        self.path = Path(path) if path is not None else None
        self.ca = Path(ca)
        self.serials: frozenset[int] = frozenset()
        self._stamp: tuple[int, int] | None = None
        if self.path is not None:
            self._reload(strict=True)

    def _reload(self, strict: bool = False) -> None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp == self._stamp:
                return
            serials = load_crl(self.path, self.ca)
        except (OSError, CredentialError) as exc:
            if strict:
                raise ConfigError(f"revocation list {self.path}: {exc}") from None
            log.error("revocation list %s unusable, keeping the previous one: %s", self.path,
                      exc)
            return
        if self._stamp is not None and serials != self.serials:
            log.info("revocation list reloaded: %d serials revoked", len(serials))
        self.serials, self._stamp = serials, stamp

    def is_revoked(self, serial: int) -> bool:
        if self.path is not None:
            self._reload()
        return serial in self.serials


def check_peer(ssl_object: ssl.SSLObject | ssl.SSLSocket | None, revocations: Revocations,
               roles: tuple[str, ...]) -> tuple[Identity | None, str | None]:
    """The peer's identity and None, or (identity or None) and why it must be refused: no
    usable certificate, a role not in ``roles``, or a revoked serial."""
    ident = peer_identity(ssl_object)
    if ident is None:
        return None, "no certificate with a role and a name"
    if ident.role not in roles:
        return ident, f"certificate of {ident.name!r} has role {ident.role!r}, not {roles}"
    if revocations.is_revoked(ident.serial):
        return ident, f"certificate of {ident.name!r} (serial {ident.serial:x}) is revoked"
    return ident, None


def split_address(text: str) -> tuple[str, int]:
    """``'127.0.0.1:7100' -> ('127.0.0.1', 7100)``; ``'[::1]:7100' -> ('::1', 7100)``.

    >>> split_address("[::1]:7100"), split_address("127.0.0.1:80")
    (('::1', 7100), ('127.0.0.1', 80))
    """
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"address {text!r} is not host:port")
    return host.strip("[]"), int(port)
