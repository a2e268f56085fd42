"""The test servers of issue 35 work and leave nothing behind: real OCI registries (test/support/
registry_world.py) in each mode, filled with skopeo and read back with plain urllib; the package mirrors
(test/support/mirror_world.py) in their namespaces, read from the uplink namespace as the node gateway
would. No runtime is involved; these check the tools the image-pull and build tests stand on."""
from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, Iterator, Optional, Tuple

import pytest

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "test", "support"))
import mirror_world  # noqa: E402
import registry_world  # noqa: E402
import server_procs  # noqa: E402
from oci_layout import MT_INDEX, MT_LAYER, MT_MANIFEST, LayoutImage, write_oci_layout  # noqa: E402

TOOLS = ["/usr/bin/docker-registry", "skopeo", "htpasswd", "nginx", "apt-ftparchive", "dpkg-deb", "unshare",
         "nsenter", "ip", "curl"]
NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(autouse=True, scope="module")
def tools() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, skopeo's private mount namespace)")
    missing = [t for t in TOOLS if not shutil.which(t) and not os.path.exists(t)]
    if missing:
        pytest.skip(f"missing {missing}: run scripts/setup.sh (docker-registry, skopeo, apt-utils, apache2-utils)")


@pytest.fixture(scope="module")
def images() -> Iterator[Dict[str, LayoutImage]]:
    """One OCI layout holding a 2-layer image, a 2-platform index and a zstd image."""
    d = tempfile.mkdtemp(prefix="sandlet-layout.")
    layout = os.path.join(d, "layout")
    cfg = {"Env": ["PATH=/usr/bin:/bin", "GREETING=hi"], "WorkingDir": "/srv", "User": "1000:1000",
           "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo hi"]}
    base = {"etc/os-release": "ID=sandlet-test\n", "srv/data.txt": "x" * 100_000}
    app = {"usr/bin/app": "#!/bin/sh\necho app\n"}
    yield {
        "two": write_oci_layout(layout, [base, app], config=cfg, tag="two"),
        "multi": write_oci_layout(layout, [base], config=cfg, tag="multi", platform_marker=True,
                                  platforms=[("linux", "amd64"), ("linux", "arm64", "v8")]),
        "zstd": write_oci_layout(layout, [base, app], config=cfg, tag="zstd", compression="zstd"),
    }
    shutil.rmtree(d)


def get(url: str, headers: Optional[dict] = None, ctx: Optional[ssl.SSLContext] = None) -> Tuple[int, dict, bytes]:
    """(status, lower-case headers, body) of a GET with plain urllib; HTTP errors are answers too."""
    req = urllib.request.Request(url, headers=headers or {})
    opener = NO_PROXY_OPENER if ctx is None else urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
    try:
        with opener.open(req, timeout=10) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def basic(user: str, pw: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()}


def leftovers(pids, dirs) -> list:
    """Processes still alive, directories still there, mounts naming those directories."""
    with open("/proc/self/mountinfo") as f:
        mounts = f.read()
    return ([f"pid {p}" for p in pids if server_procs.alive(p)] + [f"dir {d}" for d in dirs if os.path.exists(d)]
            + [f"mount of {d}" for d in dirs if d in mounts])


@pytest.mark.parametrize("mode", ["http", "tls", "basic", "token"])
def test_registry_mode_push_and_fetch(mode: str, images: Dict[str, LayoutImage]) -> None:
    reg = registry_world.Registry.mode(mode)
    dirs = [reg.dir]
    with reg:
        pids = list(reg.pids)
        assert reg.push(images["two"], "sandlet/two", "v1") == images["two"].top.digest
        assert reg.push(images["multi"], "sandlet/multi", "v1") == images["multi"].top.digest
        ctx = ssl.create_default_context(cafile=reg.ca_file) if reg.tls else None
        creds: dict = {}
        if mode == "basic":
            assert get(f"{reg.url}/v2/")[0] == 401
            status, hdrs, _ = get(f"{reg.url}/v2/", basic(reg.user, "wrong-password"))
            assert status == 401 and hdrs["www-authenticate"].lower().startswith("basic ")
            assert get(f"{reg.url}/v2/", basic("nobody", reg.password))[0] == 401
            creds = basic(reg.user, reg.password)
        if mode == "tls":
            with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
                get(f"{reg.url}/v2/", ctx=ssl.create_default_context(cafile=None))  # the system CAs do not know it

        def fetch(path: str, accept: str = "") -> Tuple[int, dict, bytes]:
            headers = {**creds, **({"Accept": accept} if accept else {})}
            if mode != "token":
                return get(reg.url + path, headers, ctx)
            # the bearer flow by hand: 401 + challenge -> token from the realm -> the same request again
            status, hdrs, _ = get(reg.url + path, headers, ctx)
            assert status == 401, status
            scheme, params = registry_world.parse_challenge(hdrs["www-authenticate"])
            assert scheme == "bearer" and params["service"] == reg.service, hdrs["www-authenticate"]
            assert params["scope"].startswith("repository:sandlet/") and params["scope"].endswith(":pull")
            q = urllib.parse.urlencode({"service": params["service"], "scope": params["scope"]})
            assert get(f"{params['realm']}?{q}", basic(reg.user, "wrong-password"))[0] == 401
            anon = json.loads(get(f"{params['realm']}?{q}")[2])["token"]  # no credentials: a token granting nothing
            assert get(reg.url + path, {**headers, "Authorization": f"Bearer {anon}"}, ctx)[0] == 401
            status, _, body = get(f"{params['realm']}?{q}", basic(reg.user, reg.password))
            assert status == 200, body
            token = json.loads(body)["token"]
            claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
            assert claims["aud"] == reg.service and claims["access"][0]["actions"] == ["pull"]
            return get(reg.url + path, {**headers, "Authorization": f"Bearer {token}"}, ctx)

        two = images["two"]
        status, hdrs, body = fetch("/v2/sandlet/two/manifests/v1", MT_MANIFEST)
        assert status == 200, body
        assert hdrs["docker-content-digest"] == two.top.digest == sha(body)
        manifest = json.loads(body)
        assert manifest["mediaType"] == MT_MANIFEST and len(manifest["layers"]) == 2
        layer = manifest["layers"][1]
        status, _, blob = fetch(f"/v2/sandlet/two/blobs/{layer['digest']}")
        assert status == 200 and sha(blob) == layer["digest"] and len(blob) == layer["size"]
        status, _, cfg = fetch(f"/v2/sandlet/two/blobs/{manifest['config']['digest']}")
        assert json.loads(cfg)["config"]["WorkingDir"] == "/srv"

        status, hdrs, body = fetch("/v2/sandlet/multi/manifests/v1", MT_INDEX)
        assert status == 200 and hdrs["content-type"] == MT_INDEX and sha(body) == images["multi"].top.digest
        index = json.loads(body)
        assert [(m["platform"]["os"], m["platform"]["architecture"]) for m in index["manifests"]] == \
            [("linux", "amd64"), ("linux", "arm64")]
        assert index["manifests"][1]["platform"]["variant"] == "v8"
        if mode == "token":
            assert reg.token_server.issued and reg.token_server.refused >= 1
    assert leftovers(pids, dirs) == []


def test_zstd_and_docker_v2s2(images: Dict[str, LayoutImage]) -> None:
    with registry_world.Registry() as reg:
        reg.push(images["zstd"], "sandlet/zstd", "v1")
        m = reg.manifest("sandlet/zstd", "v1", MT_MANIFEST).json()
        assert {layer["mediaType"] for layer in m["layers"]} == {MT_LAYER["zstd"]}
        digest = reg.push(images["two"], "sandlet/docker", "v1", format="v2s2")
        r = reg.manifest("sandlet/docker", "v1")
        assert r.headers["content-type"] == registry_world.MT_DOCKER_MANIFEST and sha(r.body) == digest
        assert r.json()["layers"][0]["mediaType"] == "application/vnd.docker.image.rootfs.diff.tar.gzip"
        reg.push(images["multi"], "sandlet/docker-list", "v1", format="v2s2")
        assert reg.manifest("sandlet/docker-list", "v1").headers["content-type"] == registry_world.MT_DOCKER_LIST
        # an index entry by digest: arm64's manifest, whose last layer is its platform marker
        reg.push(images["multi"], "sandlet/multi", "v1")
        arm = images["multi"].manifests["linux/arm64/v8"]
        r = reg.manifest("sandlet/multi", arm.digest)
        assert r.status == 200 and sha(r.body) == arm.digest
        marker = reg.blob("sandlet/multi", r.json()["layers"][-1]["digest"]).body
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(marker))) as tf:
            assert tf.extractfile("etc/sandlet-platform").read() == b"linux/arm64/v8\n"


def cache_state() -> Optional[list]:
    """What /var/lib/containers (skopeo's blob-info cache as root) holds on the host, None when absent."""
    path = "/var/lib/containers"
    return sorted(os.path.join(d, n) for d, _, ns in os.walk(path) for n in ns) if os.path.exists(path) else None


def test_corrupt_restart_fault_proxy_and_mirror(images: Dict[str, LayoutImage]) -> None:
    cache_before = cache_state()
    two = images["two"]
    big = two.layers["linux/amd64"][0]
    with registry_world.Registry() as reg, registry_world.Registry(name="mirror") as mirror:
        reg.push(two, "sandlet/two", "v1")
        mirror.mirror_of(reg, ["sandlet/two:v1"])
        r = mirror.manifest("sandlet/two", "v1")
        assert r.status == 200 and sha(r.body) == two.top.digest
        assert sha(mirror.blob("sandlet/two", big.digest).body) == big.digest

        # dies mid-pull and comes back: same port, same storage
        port, pid = reg.port, reg.proc.pid
        reg.stop()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        reg.start()
        assert reg.port == port and reg.proc.pid != pid and not server_procs.alive(pid)
        assert reg.manifest("sandlet/two", "v1").status == 200

        # cut mid-body by the fault proxy, then whole again
        with reg.fault_proxy() as proxy:
            assert proxy.command("reset_next 1") == "ok"
            url = f"http://{proxy.host}/v2/sandlet/two/blobs/{big.digest}"
            with pytest.raises((ConnectionError, urllib.error.URLError, http.client.IncompleteRead)):
                get(url)
            status, _, body = get(url)
            assert status == 200 and sha(body) == big.digest
            assert proxy.stats()["resets"] == 1
            proxy_pid = proxy.proc.pid
        assert not server_procs.alive(proxy_pid)

        # wrong bytes under the right digest
        reg.corrupt_blob(big.digest)
        r = reg.blob("sandlet/two", big.digest)
        assert r.status == 200 and len(r.body) == big.size and sha(r.body) != big.digest
        assert sha(mirror.blob("sandlet/two", big.digest).body) == big.digest  # the mirror still holds good bytes
        pids, dirs = reg.pids + mirror.pids, [reg.dir, mirror.dir]
    assert leftovers(pids, dirs) == []
    assert cache_state() == cache_before  # skopeo's cache went to its private tmpfs, not the host's


def test_mirrors_in_namespaces() -> None:
    with mirror_world.mirror_world() as w:
        pids, dirs = list(w.pids), [w.dir]
        assert w.apt_source == "deb [trusted=yes] http://198.19.0.1/debian ./"
        # from the uplink namespace (a thread that did setns), as the gateway connects out
        packages = w.fetch("/debian/Packages").decode()
        assert "Package: sandlet-hello\n" in packages and "Depends: sandlet-hello" in packages
        assert b"Packages.gz" in w.fetch("/debian/Release")
        page = w.fetch("/simple/sandlet-hello/").decode()
        assert "sandlet_hello-1.0-py3-none-any.whl#sha256=" in page
        # and with nsenter + curl
        r = w.run_in_uplink(["curl", "-fsS", "--noproxy", "*", w.pip_index_url], capture_output=True, text=True)
        assert r.returncode == 0 and 'href="sandlet-hello/"' in r.stdout, r.stderr

        tmp = tempfile.mkdtemp(prefix="sandlet-mirror-client.")
        try:
            env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
            r = w.run_in_uplink([sys.executable, "-m", "pip", "--isolated", "download", "-q", "--no-deps",
                                 "--disable-pip-version-check", *w.pip_args, "-d", tmp, "sandlet-hello==1.0"],
                                capture_output=True, text=True, env=env)
            assert r.returncode == 0, r.stderr
            assert os.listdir(tmp) == ["sandlet_hello-1.0-py3-none-any.whl"]
            # the wheel and the .deb are well-formed: they install and print their lines
            r = subprocess.run([sys.executable, "-m", "pip", "--isolated", "install", "-q", "--no-index", "--no-deps",
                                "--target", f"{tmp}/site", f"{tmp}/sandlet_hello-1.0-py3-none-any.whl"],
                               capture_output=True, text=True, env=env)
            assert r.returncode == 0, r.stderr
            r = subprocess.run([sys.executable, "-c", "import sandlet_hello; sandlet_hello.main()"], capture_output=True,
                               text=True, env={**env, "PYTHONPATH": f"{tmp}/site"})
            assert r.stdout.strip() == mirror_world.PY_HELLO_LINE, r.stderr
            subprocess.run(["dpkg-deb", "-x", w.debs["sandlet-hello"], f"{tmp}/deb"], check=True)
            r = subprocess.run([f"{tmp}/deb/usr/bin/sandlet-hello"], capture_output=True, text=True)
            assert r.stdout.strip() == mirror_world.HELLO_LINE
            check_apt(w, tmp, env)
        finally:
            shutil.rmtree(tmp)

        with mirror_world.uplink_env(w) as path:
            assert os.environ["SANDLET_NET_UPLINK_NETNS"] == path == w.uplink_netns
        assert os.environ.get("SANDLET_NET_UPLINK_NETNS") != w.uplink_netns
    assert leftovers(pids, dirs) == []
    for p in pids:
        assert not os.path.exists(f"/proc/{p}/ns/net")


def check_apt(w: mirror_world.MirrorWorld, tmp: str, env: dict) -> None:
    """apt-get update against the mirror from the uplink, with every apt state dir in `tmp`."""
    for d in ("lists/partial", "cache/archives/partial", "parts"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    with open(os.path.join(tmp, "sources.list"), "w") as f:
        f.write(w.apt_source + "\n")
    opts = []
    for k, v in {"Dir::Etc::SourceList": f"{tmp}/sources.list", "Dir::Etc::SourceParts": f"{tmp}/parts",
                 "Dir::State::Lists": f"{tmp}/lists", "Dir::Cache": f"{tmp}/cache", "APT::Sandbox::User": "root",
                 "Debug::NoLocking": "1", "Acquire::http::Proxy": "DIRECT"}.items():
        opts += ["-o", f"{k}={v}"]
    r = w.run_in_uplink(["apt-get", "-q", *opts, "update"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "Err:" not in r.stdout, r.stdout + r.stderr
    r = w.run_in_uplink(["apt-cache", *opts, "show", "sandlet-hello-extra"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "Depends: sandlet-hello" in r.stdout, r.stdout + r.stderr
