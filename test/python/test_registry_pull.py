"""Registry pulls (issue 35) against real registries the tests start (test/support/registry_world.py: Debian's
docker-registry on loopback, filled with skopeo from OCI layouts the tests write): by tag and by digest, a
multi-platform index, OCI and Docker schema 2 manifests, gzip and zstd layers, TLS with a test CA, basic and
token auth refused then accepted, a corrupted blob refused with nothing imported, a pull cut mid-blob that
resumes, a mirror tried first, a second pull that fetches no blob, and a sandbox whose spec names the image."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Iterator

import pytest

import sandlet
from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "test", "support"))
import registry_world  # noqa: E402
from registry_world import Registry, write_oci_layout  # noqa: E402

for tool in ("/usr/bin/docker-registry", "skopeo", "htpasswd"):
    if not (os.path.exists(tool) or any(os.access(os.path.join(d, tool), os.X_OK)
                                       for d in os.environ.get("PATH", "").split(":"))):
        pytest.skip(f"{tool} is missing (scripts/setup.sh installs it)", allow_module_level=True)

CONFIG = {"Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GREETING=from-the-image"], "WorkingDir": "/srv/app",
          "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo hi"]}


@pytest.fixture(scope="module")
def layouts(rootfs: str) -> Iterator[dict]:
    """OCI layouts: a two-layer image on the test rootfs (gzip), the same with zstd, and a two-platform index."""
    d = tempfile.mkdtemp(prefix="sandlet-layouts.")
    app = {"srv/app/hello.txt": "hello from the registry\n", "etc/motd": "v1\n"}
    out = {
        "gzip": write_oci_layout(os.path.join(d, "gzip"), [rootfs, app], config=CONFIG),
        "zstd": write_oci_layout(os.path.join(d, "zstd"), [rootfs, app], config=CONFIG, compression="zstd"),
        "multi": write_oci_layout(os.path.join(d, "multi"), [rootfs], config=CONFIG,
                                  platforms=[("linux", "arm64", "v8"), ("linux", "amd64")], platform_marker=True),
    }
    yield out
    import shutil
    shutil.rmtree(d, ignore_errors=True)


def registries(reg: Registry, **extra) -> str:
    cfg = {"retries": 6, "timeout_s": 10, **extra}
    if not reg.tls:
        cfg.setdefault("insecure", []).append(reg.host)
    else:
        cfg["ca_file"] = reg.ca_file
    return json.dumps(cfg)


def auth_file(dirpath: str, host: str, user: str, password: str) -> str:
    import base64
    path = os.path.join(dirpath, "auth.json")
    with open(path, "w") as f:
        json.dump({"auths": {host: {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}}}, f)
    return path


def test_pull_by_tag_then_by_digest_then_again(root_dir: str, layouts: dict) -> None:
    with Registry.mode("http") as reg:
        digest = reg.push(layouts["gzip"], "team/app", "v1")
        with sandlet.Runtime(root_dir, registries=registries(reg)) as rt:
            r = rt.image_pull(f"docker://{reg.ref('team/app', 'v1')}")
            assert r["reference"] == f"{reg.host}/team/app:v1"
            assert r["environment"] == r["reference"] and r["new_version"]
            assert r["blobs_fetched"] == 2 and len(r["layers"]) == 2
            assert r["manifest_digest"] == digest
            env = [e for e in rt.env_list() if e["name"] == r["environment"]][0]
            v = env["versions"][-1]
            assert v["workdir"] == "/srv/app" and v["env"]["GREETING"] == "from-the-image"
            assert v["image"]["entrypoint"] == ["/bin/sh", "-c"] and v["image"]["cmd"] == ["echo hi"]
            # A second pull: the manifest only, no blob, no new version.
            again = rt.image_pull(f"docker://{reg.ref('team/app', 'v1')}")
            assert not again["new_version"] and again["blobs_fetched"] == 0
            assert again["version"] == r["version"] and again["bytes_fetched"] < 4096
            # By digest: another environment name, its layers reused (nothing downloaded).
            by_digest = rt.image_pull(f"{reg.host}/team/app@{digest}")
            assert by_digest["environment"] == f"{reg.host}/team/app@{digest}"
            assert by_digest["blobs_fetched"] == 0 and by_digest["layers_reused"] == 2
            assert rt.image_pull(f"{reg.host}/team/app@{digest}")["bytes_fetched"] == 0  # nothing at all
            # A sandbox from the image: the config's env and workdir apply.
            with rt.create({"environment": r["environment"]}) as sb:
                res = sb.exec(["/bin/sh", "-c", "pwd; cat hello.txt; echo $GREETING"])
                assert res.stdout.decode().split("\n")[:3] == ["/srv/app", "hello from the registry", "from-the-image"]


def test_spec_and_name_resolution(root_dir: str, layouts: dict, rootfs: str) -> None:
    """A spec naming an image pulls it on first use; a local environment of the same name wins over it."""
    with Registry.mode("http") as reg:
        reg.push(layouts["gzip"], "team/app", "v1")
        ref = reg.ref("team/app", "v1")
        with sandlet.Runtime(root_dir, registries=registries(reg)) as rt:
            with rt.create({"environment": ref}) as sb:
                assert sb.exec(["cat", "/etc/motd"]).stdout == b"v1\n"
            assert any(e["name"] == ref for e in rt.env_list())
            local = os.path.join(root_dir, "local-layer")
            os.makedirs(os.path.join(local, "etc"))
            with open(os.path.join(local, "etc", "motd"), "w") as f:
                f.write("local\n")
            base = rt.layer_import(rootfs)["layers"][0]["digest"]
            top = rt.layer_import(local)["layers"][0]["digest"]
            rt.env_create("debian:bookworm", [base, top])
            # "debian:bookworm" is a local environment here: it wins over the default registry's image.
            with rt.create({"environment": "debian:bookworm"}) as sb:
                assert sb.exec(["cat", "/etc/motd"]).stdout == b"local\n"
        with sandlet.Runtime(root_dir, registries=registries(reg, pull="never")) as rt:
            with pytest.raises(sandlet.InvalidArgument, match="pull policy is 'never'"):
                rt.create({"environment": reg.ref("team/app", "v2")})


def test_index_platforms_and_formats(root_dir: str, layouts: dict) -> None:
    """The index entry of the configured platform; OCI with zstd layers and Docker schema 2 alike."""
    with Registry.mode("http") as reg:
        reg.push(layouts["multi"], "multi/app", "1")
        reg.push(layouts["zstd"], "z/app", "1")
        reg.push(layouts["gzip"], "v2/app", "1", format="v2s2")
        for platform, want in (("linux/amd64", b"linux/amd64\n"), ("linux/arm64", b"linux/arm64/v8\n")):
            path = os.path.join(root_dir, platform.replace("/", "-"))
            with sandlet.Runtime(path, registries=registries(reg, platform=platform)) as rt:
                r = rt.image_pull(reg.ref("multi/app", "1"))
                assert r["platform"] == platform
                with rt.create({"environment": r["environment"]}) as sb:
                    assert sb.exec(["cat", "/etc/sandlet-platform"]).stdout == want
        with sandlet.Runtime(os.path.join(root_dir, "s390x"), registries=registries(reg, platform="linux/s390x")) as rt:
            with pytest.raises(sandlet.NotFound, match="no image for linux/s390x.*linux/arm64/v8, linux/amd64"):
                rt.image_pull(reg.ref("multi/app", "1"))
        with sandlet.Runtime(os.path.join(root_dir, "formats"), registries=registries(reg)) as rt:
            for repo in ("z/app", "v2/app"):
                r = rt.image_pull(reg.ref(repo, "1"))
                with rt.create({"environment": r["environment"]}) as sb:
                    assert sb.exec(["cat", "/srv/app/hello.txt"]).stdout == b"hello from the registry\n"


@pytest.mark.parametrize("mode", ["tls", "basic", "token"])
def test_tls_and_auth(root_dir: str, layouts: dict, mode: str) -> None:
    with Registry.mode(mode) as reg:
        reg.push(layouts["gzip"], "private/app", "1")
        ref = f"docker://{reg.ref('private/app', '1')}"
        extra = {"auth_file": auth_file(root_dir, reg.host, reg.user, "wrong")} if reg.auth else {}
        if reg.tls:
            # Without the test CA the certificate is refused.
            with sandlet.Runtime(os.path.join(root_dir, "no-ca"), registries=json.dumps({"retries": 0})) as rt:
                with pytest.raises(sandlet.Error, match="certificate"):
                    rt.image_pull(ref)
        if reg.auth:
            with sandlet.Runtime(os.path.join(root_dir, "refused"), registries=registries(reg, **extra)) as rt:
                with pytest.raises(sandlet.PermissionDenied):
                    rt.image_pull(ref)
                assert not [e for e in rt.env_list() if "private" in e["name"]]
            extra = {"auth_file": auth_file(root_dir, reg.host, reg.user, reg.password)}
        with sandlet.Runtime(os.path.join(root_dir, "ok"), registries=registries(reg, **extra)) as rt:
            r = rt.image_pull(ref)
            assert r["blobs_fetched"] == 2
        if mode == "token":
            assert any(account == reg.user for account, _ in reg.token_server.issued)


def test_corrupted_blob_is_refused_and_nothing_imported(root_dir: str, layouts: dict) -> None:
    with Registry.mode("http") as reg:
        reg.push(layouts["gzip"], "bad/app", "1")
        image = layouts["gzip"]
        top_layer = image.layers[next(iter(image.layers))][-1].digest
        reg.corrupt_blob(top_layer)
        with sandlet.Runtime(root_dir, registries=registries(reg)) as rt:
            before = {l["digest"] for l in rt.layer_list()}
            with pytest.raises(sandlet.DataLoss, match="digest"):
                rt.image_pull(reg.ref("bad/app", "1"))
            assert not [e for e in rt.env_list() if "bad/app" in e["name"]]
            after = {l["digest"] for l in rt.layer_list()}
            # The intact lower layer may be imported; the corrupted one never is, and no tmp file stays.
            assert len(after - before) <= 1
            assert os.listdir(os.path.join(root_dir, "layers", "tmp")) == []


def test_pull_cut_mid_blob_resumes(root_dir: str, layouts: dict) -> None:
    with Registry.mode("http") as reg:
        reg.push(layouts["gzip"], "cut/app", "1")
        with reg.fault_proxy() as proxy:
            # Every blob's first response is cut half way: the pull resumes each from where it stopped.
            proxy.command("throttle 2000000")
            proxy.command("reset_next 3")
            cfg = json.dumps({"insecure": [proxy.host], "retries": 6, "timeout_s": 10})
            with sandlet.Runtime(root_dir, registries=cfg) as rt:
                r = rt.image_pull(f"{proxy.host}/cut/app:1")
                assert r["blobs_fetched"] == 2
                # Resumed, not restarted: well under twice the layers' bytes came over the wire.
                image = layouts["gzip"]
                blob_bytes = sum(d.size for d in image.layers[next(iter(image.layers))])
                assert blob_bytes <= r["bytes_fetched"] < 1.5 * blob_bytes + 65536
                with rt.create({"environment": r["environment"]}) as sb:
                    assert sb.exec(["cat", "/srv/app/hello.txt"]).stdout == b"hello from the registry\n"
            assert proxy.stats()["resets"] >= 1


def test_registry_down_then_back(root_dir: str, layouts: dict) -> None:
    """A registry that is down when the pull starts and comes back within the retries."""
    import threading
    with Registry.mode("http") as reg:
        reg.push(layouts["gzip"], "flaky/app", "1")
        reg.stop()
        t = threading.Timer(1.5, reg.start)
        t.start()
        try:
            with sandlet.Runtime(root_dir, registries=registries(reg)) as rt:
                assert rt.image_pull(reg.ref("flaky/app", "1"))["blobs_fetched"] == 2
        finally:
            t.join()


def test_mirror_is_tried_first(root_dir: str, layouts: dict) -> None:
    with Registry.mode("http") as origin, Registry(name="mirror") as mirror:
        origin.push(layouts["gzip"], "m/app", "1")
        mirror.mirror_of(origin, ["m/app:1"])
        cfg = registries(origin, mirrors={origin.host: [mirror.host]})
        cfg = json.loads(cfg)
        cfg["insecure"].append(mirror.host)
        with sandlet.Runtime(root_dir, registries=json.dumps(cfg)) as rt:
            r = rt.image_pull(origin.ref("m/app", "1"))
            assert r["endpoint"] == mirror.host
            # The mirror gone: the registry itself serves.
            mirror.stop()
            rt.env_remove(r["environment"])
            for l in reversed(r["layers"]):
                rt.layer_remove(l)
            r = rt.image_pull(origin.ref("m/app", "1"))
            assert r["endpoint"] == origin.host and r["blobs_fetched"] == 2
