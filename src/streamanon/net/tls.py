"""Mutual-TLS contexts (standard ``ssl``) and peer identities.

Both ends present a certificate of the deployment's CA and verify the other's against that
CA only (TLS 1.3, no system trust store). A client checks that the server is who it dialled by
hostname verification against the identity name (``gw3``, ``ce``) in the server certificate's
DNS name; a server reads the client's identity from the verified certificate's common name.
A peer without a certificate, or with one the CA did not sign (e.g. self-signed), fails the
handshake and never reaches the application.
"""

from __future__ import annotations

import ssl
from pathlib import Path


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


def peer_name(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """The common name of the verified peer certificate, or None."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def split_address(text: str) -> tuple[str, int]:
    """``'127.0.0.1:7100' -> ('127.0.0.1', 7100)``; ``'[::1]:7100' -> ('::1', 7100)``.

    >>> split_address("[::1]:7100"), split_address("127.0.0.1:80")
    (('::1', 7100), ('127.0.0.1', 80))
    """
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {text!r} is not host:port")
    return host.strip("[]"), int(port)
