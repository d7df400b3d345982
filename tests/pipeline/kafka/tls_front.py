"""A TLS front for the test broker: real certificates (the deployment CA code of
``streamanon.net.pki``) and a loopback proxy that speaks TLS 1.2+ to Kafka clients, requires a
client certificate of the CA, and forwards the bytes to the broker's plain port.

The vendored broker serves no TLS itself (docs/guides/kafka.md says why), so the clients'
side of a secured cluster (``security.protocol=SSL``, the CA, a client certificate and an
encrypted key with its password) is tested against this front; the broker advertises the
front's address (``localhost:PORT``, the name in the server certificate).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

#: the client key's password: the secret the tests look for in every printout
KEY_PASSWORD = "tls-key-s3cr3t-pw"


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of one test CA: its certificate, the front's pair, a client's pair."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path  # encrypted with KEY_PASSWORD
    client_keystore: Path  # the client's pair as PKCS#12, encrypted with KEY_PASSWORD


def make_tls_files(directory: Path) -> TlsFiles:
    """A CA, a server certificate for ``localhost`` and a client certificate, in ``directory``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    from streamanon.net.pki import ROLE_CE, make_ca, make_leaf

    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = make_ca("streamanon test Kafka CA")
    server_cert, server_key = make_leaf("localhost", ca_cert, ca_key, role=ROLE_CE)
    client_cert, client_key = make_leaf("kafka-client", ca_cert, ca_key, role="kafka-client")
    pem = serialization.Encoding.PEM
    files = TlsFiles(*(directory / n for n in ("ca.crt", "server.crt", "server.key",
                                                "client.crt", "client.key", "client.p12")))
    files.ca.write_bytes(ca_cert.public_bytes(pem))
    files.server_cert.write_bytes(server_cert.public_bytes(pem))
    files.server_key.write_bytes(server_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    files.client_cert.write_bytes(client_cert.public_bytes(pem))
    files.client_key.write_bytes(client_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode())))
    files.client_keystore.write_bytes(pkcs12.serialize_key_and_certificates(
        b"kafka-client", client_key, client_cert, None,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode())))
    for key in (files.server_key, files.client_key, files.client_keystore):
        key.chmod(0o600)
    return files


def client_properties(path: Path, files: TlsFiles, *, keystore: bool = False) -> Path:
    """A ``--kafka-config`` file for the front: SSL, the CA, the client's pair and password.

    The pair as PEM files with an encrypted key, or (``keystore``) as a PKCS#12 key store:
    Java 17's Kafka clients cannot decrypt a PEM key (PBES2), both clients read the store.
    """
    pair = (f"ssl.keystore.location={files.client_keystore}\n"
            f"ssl.keystore.password={KEY_PASSWORD}\n" if keystore else
            f"ssl.certificate.location={files.client_cert}\n"
            f"ssl.key.location={files.client_key}\n"
            f"ssl.key.password={KEY_PASSWORD}\n")
    path.write_text("# a TLS cluster with client certificates\n"
                    "security.protocol=SSL\n"
                    f"ssl.ca.location={files.ca}\n" + pair)
    return path


class TlsFront:
    """A TLS-terminating proxy on ``127.0.0.1:port`` in front of ``target`` (plain TCP).

    The port is bound at construction (so the broker can advertise it before it starts);
    :meth:`start` serves it from a daemon thread; ``connections`` counts accepted clients.
    """

    def __init__(self, files: TlsFiles) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.load_cert_chain(str(files.server_cert), str(files.server_key))
        self.context.load_verify_locations(cafile=str(files.ca))
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port: int = self.sock.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="kafka-tls-front")

    def start(self, target: tuple[str, int]) -> None:
        self.target = target
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._client, sock=self.sock,
                                                  ssl=self.context,
                                                  ssl_handshake_timeout=10)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        assert self.target is not None
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(1 << 16):
                    dst.write(data)
                    await dst.drain()
            except (OSError, ssl.SSLError):
                pass  # a peer went away: the other side is closed below
            finally:
                with contextlib.suppress(OSError, RuntimeError):
                    dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        if self._thread.is_alive():
            async def close() -> None:
                self._server.close()
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self.sock.close()
