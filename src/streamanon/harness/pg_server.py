"""A throw-away PostgreSQL server in a temporary folder (initdb + pg_ctl), for the tests and
the benchmark of the CE's PostgreSQL store.

The binaries are looked up in ``STREAMANON_PG_BIN``, ``/usr/lib/postgresql/*/bin`` and the
PATH (``./dev`` installs them where missing). initdb refuses to run as root, so under root
(CI) the server runs as the unprivileged user ``nobody`` (via ``runuser``). Password
authentication (SCRAM) on 127.0.0.1 only; the folder is removed on exit.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from streamanon.errors import NoServer


def server_binaries() -> Path | None:
    candidates = [os.environ.get("STREAMANON_PG_BIN", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).parent))
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    return None


def _as_server_user(args: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return args
    runuser = shutil.which("runuser")
    if runuser is None:
        raise NoServer("running as root without runuser: initdb refuses root")
    return [runuser, "-u", "nobody", "--", *args]


@contextlib.contextmanager
def temporary_server(port: int) -> Iterator[str]:
    """Start a server on ``127.0.0.1:port``; yields the DSN of its ``postgres`` database."""
    bin_dir = server_binaries()
    if bin_dir is None:
        raise NoServer("PostgreSQL server binaries (initdb, pg_ctl) not found; ./dev installs "
                       "them (apt package postgresql)")
    base = Path(tempfile.mkdtemp(prefix="streamanon-pg-"))
    data = base / "data"
    password = secrets.token_hex(16)
    pwfile = base / "pw"
    pwfile.write_text(password + "\n")
    os.chmod(pwfile, 0o600)
    if os.geteuid() == 0:
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chmod(base, 0o755)
        os.chown(base, nobody.pw_uid, nobody.pw_gid)
        os.chown(pwfile, nobody.pw_uid, nobody.pw_gid)
    env = {**os.environ, "LC_ALL": "C"}
    try:
        subprocess.run(_as_server_user([
            str(bin_dir / "initdb"), "-D", str(data), "-U", "ce", "--auth=scram-sha-256",
            f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"]),
            check=True, capture_output=True, env=env, cwd=base)
        opts = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={base}"
        subprocess.run(_as_server_user([
            str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-o",
            opts, "-w", "-t", "60", "start"]), check=True, capture_output=True, env=env,
            cwd=base)
        yield f"postgresql://ce:{password}@127.0.0.1:{port}/postgres"
    finally:
        with contextlib.suppress(subprocess.SubprocessError, NoServer):
            subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m",
                                            "immediate", "-w", "stop"]),
                           capture_output=True, env=env, timeout=60, cwd=base)
        shutil.rmtree(base, ignore_errors=True)
