"""One real PostgreSQL server per test session (initdb + pg_ctl in a temporary folder).

The binaries are looked up in ``STREAMANON_PG_BIN``, ``/usr/lib/postgresql/*/bin`` and the
PATH (``./dev`` installs them where they are missing). initdb refuses to run as root, so
under root (CI) the server runs as the unprivileged user ``nobody`` (via ``runuser``). Tests
that need it skip, naming the reason, only when no binaries can be found.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from streamanon.net.cluster import free_ports


def _pg_bin() -> Path | None:
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
        pytest.skip("running as root without runuser: initdb refuses root")
    return [runuser, "-u", "nobody", "--", *args]


@pytest.fixture(scope="session")
def postgres_dsn():
    """A DSN of a fresh database on a private PostgreSQL server (password auth on loopback)."""
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found; ./dev installs "
                    "them (apt package postgresql-15)")
    base = Path(tempfile.mkdtemp(prefix="streamanon-pg-"))
    data = base / "data"
    password = secrets.token_hex(16)
    pwfile = base / "pw"
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chmod(base, 0o755)
        os.chown(base, nobody.pw_uid, nobody.pw_gid)
        os.chown(pwfile, nobody.pw_uid, nobody.pw_gid)
    os.chmod(pwfile, 0o600)
    (port,) = free_ports(1)
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run(_as_server_user([str(bin_dir / "initdb"), "-D", str(data), "-U", "ce",
                                    "--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8",
                                    "--no-sync"]),
                   check=True, capture_output=True, env=env, cwd=base)
    opts = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={base}"
    subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-l",
                                    str(base / "server.log"), "-o", opts, "-w", "-t", "60",
                                    "start"]), check=True, capture_output=True, env=env,
                   cwd=base)
    dsn = f"postgresql://ce:{password}@127.0.0.1:{port}/postgres"
    try:
        yield dsn
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m",
                                            "immediate", "-w", "stop"]), capture_output=True,
                           env=env, timeout=60, cwd=base)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_database(postgres_dsn):
    """A database of its own for one test (created on the session's server)."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
