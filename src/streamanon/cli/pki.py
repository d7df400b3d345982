"""``streamanon pki init|issue|revoke``: the private CA of a deZent deployment."""

from __future__ import annotations

from pathlib import Path

import typer

from streamanon.cli.app import app
from streamanon.cli.common import JSON_HELP, fail, print_summary
from streamanon.errors import CredentialError, StreamanonError

pki_app = typer.Typer(help="Certificates for the deZent daemons and sensor nodes (a private "
                      "CA whose key is kept apart from the deployment folder).",
                      no_args_is_help=True)
app.add_typer(pki_app, name="pki")

CA_DIR_HELP = ("The CA's folder (ca.key, revoked.txt). Default for init: DIRECTORY-ca beside "
               "the deployment folder; never inside it. Move it off the site's hosts after "
               "init: it is needed only to issue and revoke.")


def _sensor_list(path: Path, gateways: int) -> dict[str, int]:
    """``id,gateway`` per line (gateway as ``3`` or ``gw3``); ``#`` comments and blanks skipped.
    """
    from streamanon.net.pki import parse_gateway_name

    out: dict[str, int] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        fail(f"{path}: {exc.strerror}")
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        sid, sep, gw = (part.strip() for part in line.partition(","))
        g = int(gw) if gw.isdigit() else parse_gateway_name(gw)
        if not sep or g is None or not 0 <= g < gateways:
            fail(f"{path}:{n}: want 'sensor-id,gateway' with a gateway in 0..{gateways - 1}, "
                 f"got {raw!r}")
        if sid in out:
            fail(f"{path}:{n}: sensor {sid!r} listed twice (a sensor is bound to one gateway)")
        out[sid] = g
    return out


@pki_app.command("init")
def pki_init(
    directory: Path = typer.Argument(..., help="The deployment folder: ca.crt, crl.pem, the "
                                     "certificates and keys of the gateways, the CE, monitor "
                                     "and the sensor nodes, the sensor registries."),
    gateways: int = typer.Option(..., "--gateways", min=1, help="Gateways (gw0..gwN-1)."),
    sensors: int = typer.Option(0, "--sensors", min=0, help="Sensor nodes per gateway, named "
                                "gw<iii>-sn<jjj> (gw000-sn000, ...; j = 0..N-1), each bound to "
                                "its gateway."),
    sensor_list: Path = typer.Option(None, "--sensor-list", help="Instead of --sensors: a "
                                     "file of 'sensor-id,gateway' lines (gateway as 3 or "
                                     "gw3)."),
    ca_dir: Path = typer.Option(None, "--ca-dir", help=CA_DIR_HELP),
    force: bool = typer.Option(False, "--force", help="Replace an existing CA (every "
                               "certificate must then be redistributed)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Create the CA (in --ca-dir) and every certificate (keys 0600, folders 0700).

    Example: streamanon pki init site/pki --gateways 5 --sensors 20
    """
    from streamanon.net.pki import init_pki, sensor_name  # cryptography: only when used

    if sensors and sensor_list is not None:
        fail("give --sensors or --sensor-list, not both")
    bound = (_sensor_list(sensor_list, gateways) if sensor_list is not None
             else {sensor_name(g, j): g for g in range(gateways) for j in range(sensors)})
    try:
        files = init_pki(directory, gateways, sensors=bound, ca_dir=ca_dir, force=force)
    except (FileExistsError, StreamanonError) as exc:
        fail(str(exc))
    print_summary(f"PKI in {directory}", {
        "certificates": files, "sensor_nodes": len(bound),
        "next": f"move {Path(files['ca_key']).parent} off this host (needed only for pki "
                "issue/revoke)"}, as_json)


@pki_app.command("issue")
def pki_issue(
    directory: Path = typer.Argument(..., help="The deployment folder."),
    name: str = typer.Argument(..., help="gw<i>, ce, or a sensor ID (with --sensor-of)."),
    ca_dir: Path = typer.Option(..., "--ca-dir", help="The CA's folder (with ca.key)."),
    sensor_of: int = typer.Option(None, "--sensor-of", min=0, help="Issue a sensor node "
                                  "certificate bound to this gateway (added to its registry)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """(Re-)issue one certificate with a new key: rotation of a leaf, or a new sensor node.

    The old certificate stays valid until you revoke it (`pki revoke`), so the host can switch
    first. Example: streamanon pki issue site/pki gw3 --ca-dir /media/ca
    """
    from streamanon.net.pki import issue

    old = None
    try:
        if sensor_of is None and (directory / f"{name}.crt").exists():
            old = _serial(directory / f"{name}.crt")
        path = issue(directory, name, ca_dir, sensor_of=sensor_of)
    except (FileNotFoundError, StreamanonError) as exc:
        fail(str(exc))
    print_summary(f"issued {name}", {"certificate": str(path), "serial": f"{_serial(path):x}",
                                     "replaced_serial": f"{old:x}" if old else "-"}, as_json)


def _serial(path: Path) -> int:
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificate(path.read_bytes()).serial_number
    except ValueError as exc:  # cryptography's word for bytes that are not a certificate
        raise CredentialError(f"{path}: {exc}") from None


@pki_app.command("revoke")
def pki_revoke(
    directory: Path = typer.Argument(..., help="The deployment folder (its crl.pem is "
                                     "rewritten)."),
    certificate: Path = typer.Argument(..., help="The certificate to revoke (a PEM file, e.g. "
                                       "a copy of the old gw3.crt)."),
    ca_dir: Path = typer.Option(..., "--ca-dir", help="The CA's folder (with ca.key)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Revoke a certificate: its serial goes into crl.pem, signed by the CA. Copy crl.pem to
    every host: the CE and the gateways re-read it when it changes and refuse the certificate
    from the next connection on.
    """
    from streamanon.net.pki import revoke

    try:
        serial = revoke(directory, certificate, ca_dir)
    except (FileNotFoundError, StreamanonError) as exc:
        fail(str(exc))
    print_summary("revoked", {"certificate": str(certificate), "serial": f"{serial:x}",
                              "crl": str(directory / "crl.pem")}, as_json)
