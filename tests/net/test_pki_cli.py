"""``streamanon pki issue`` and ``pki revoke`` refuse what would count one identity twice or
change nothing (real processes, real certificates): a sensor ID another gateway has, a gateway
the site does not have, the CA's own certificate, a certificate of another CA."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamanon.net.pki import registry_path, sensor_paths


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamanon", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("site")
    d, ca = root / "pki", root / "ca"
    lst = root / "sensors.txt"
    lst.write_text("meter-1,gw0\nmeter-2,gw1\n")
    res = _cli("pki", "init", str(d), "--gateways", "3", "--sensor-list", str(lst),
               "--ca-dir", str(ca))
    assert res.returncode == 0, res.stderr
    return d, ca


def _refused(res: subprocess.CompletedProcess[str], *words: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    text = res.stdout + res.stderr
    assert "Traceback" not in text and "revoked" not in res.stdout
    for w in words:
        assert w in text, text


def test_issue_refuses_a_sensor_id_another_gateway_has(site) -> None:
    d, ca = site
    before = registry_path(d, 2).read_text()
    _refused(_cli("pki", "issue", str(d), "meter-1", "--ca-dir", str(ca), "--sensor-of", "2"),
             "'meter-1' is registered to gw0")
    assert registry_path(d, 2).read_text() == before
    assert not sensor_paths(d, 2, "meter-1")[0].exists()
    # re-issuing at its own gateway (rotation) and a new ID are fine
    assert _cli("pki", "issue", str(d), "meter-1", "--ca-dir", str(ca),
                "--sensor-of", "0").returncode == 0
    assert _cli("pki", "issue", str(d), "meter-9", "--ca-dir", str(ca),
                "--sensor-of", "2").returncode == 0
    assert "meter-9" in registry_path(d, 2).read_text().split()


def test_issue_refuses_a_gateway_the_site_does_not_have(site) -> None:
    d, ca = site
    _refused(_cli("pki", "issue", str(d), "meter-7", "--ca-dir", str(ca), "--sensor-of", "7"),
             "no gateway gw7", "gw0..gw2")
    assert not registry_path(d, 7).exists()
    assert not sensor_paths(d, 7, "meter-7")[0].parent.exists()


def test_revoke_refuses_the_ca_certificate(site) -> None:
    d, ca = site
    crl = (d / "crl.pem").read_bytes()
    listed = (ca / "revoked.txt").read_text()
    for cert in (d / "ca.crt", ca / "ca.crt"):
        _refused(_cli("pki", "revoke", str(d), str(cert), "--ca-dir", str(ca)),
                 "is a CA certificate", "pki init --force")
    assert (ca / "revoked.txt").read_text() == listed and (d / "crl.pem").read_bytes() == crl


def test_revoke_refuses_certificates_of_another_ca(site, tmp_path) -> None:
    d, ca = site
    other = tmp_path / "other"
    assert _cli("pki", "init", str(other), "--gateways", "3", "--ca-dir",
                str(tmp_path / "other-ca")).returncode == 0
    listed = (ca / "revoked.txt").read_text()
    for cert in (other / "gw1.crt", other / "ca.crt"):
        _refused(_cli("pki", "revoke", str(d), str(cert), "--ca-dir", str(ca)))
    res = _cli("pki", "revoke", str(d), str(other / "gw1.crt"), "--ca-dir", str(ca))
    assert "not issued by this CA" in res.stderr + res.stdout
    assert (ca / "revoked.txt").read_text() == listed
    # a certificate of this CA is revoked as before
    res = _cli("pki", "revoke", str(d), str(d / "gw2.crt"), "--ca-dir", str(ca), "--json")
    assert res.returncode == 0, res.stderr
    assert (ca / "revoked.txt").read_text() != listed


def test_one_sensor_naming_scheme_and_the_old_names_still_work(tmp_path) -> None:
    from streamanon.errors import ConfigError
    from streamanon.harness.local_site import LocalSiteSpec
    from streamanon.net.pki import canonical_sensor_id, init_pki, sensor_name

    d = tmp_path / "pki"
    res = _cli("pki", "init", str(d), "--gateways", "2", "--sensors", "2", "--ca-dir",
               str(tmp_path / "ca"))
    assert res.returncode == 0, res.stderr
    for g in (0, 1):
        ids = [sensor_name(g, j) for j in (0, 1)]
        assert ids == [f"gw{g:03d}-sn000", f"gw{g:03d}-sn001"]
        assert registry_path(d, g).read_text().split() == ids
        assert all(p.exists() for sid in ids for p in sensor_paths(d, g, sid))
    # `cluster init` (the simulated district) names its sensors the same way
    district = LocalSiteSpec(gateways=3, max_sn=5).district()
    assert district.sensor_ids == [sensor_name(int(g), int(sid[-3:])) for g, sid in
                                   zip(district.sn_gateway, district.sensor_ids, strict=True)]
    # a site made with the older names keeps them; one sensor in two spellings is refused
    old = init_pki(tmp_path / "old", 1, sensors={"gw0-sn0": 0, "gw0-sn1": 0},
                   ca_dir=tmp_path / "old-ca")
    assert registry_path(tmp_path / "old", 0).read_text().split() == ["gw0-sn0", "gw0-sn1"]
    assert "sensors" in old
    assert canonical_sensor_id("gw0-sn1") == "gw000-sn001"
    with pytest.raises(ConfigError, match="one sensor in two spellings"):
        init_pki(tmp_path / "both", 1, sensors={"gw0-sn1": 0, "gw000-sn001": 0},
                 ca_dir=tmp_path / "both-ca")
