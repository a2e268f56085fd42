"""Package mirrors a sandbox reaches through sandlet's network policy (issue 35: builds that install packages).

Sandboxes reach the outside through the node gateway, which connects out from $SANDLET_NET_UPLINK_NETNS.
The uplink's own addresses and loopback are protected ranges, so the servers cannot live there: as in
test/integration/security/gateway_world.hpp, the uplink is a network namespace of the test's own (10.255.255.1
on a veth, 198.18.0.1 on lo) and the servers live "elsewhere", a second namespace a veth pair away
(10.255.255.2), which has 198.19.0.1 on lo; the uplink routes 198.19.0.0/24 there. Each namespace is held by a
child `unshare -n sleep MAX` (its /proc/PID/ns/net is the namespace file); links are made inside the
namespaces, never in the host's. nginx (its own config, `daemon off`, pid/logs in the temp dir) serves from
"elsewhere":

  http://198.19.0.1/debian/   a flat APT repository of .deb packages built here with dpkg-deb and indexed
                              with apt-ftparchive: `deb [trusted=yes] http://198.19.0.1/debian ./` (unsigned)
  http://198.19.0.1/simple/   a PEP 503 "simple" index of pure-Python wheels built here (zip + METADATA,
                              WHEEL, RECORD, entry_points.txt): `pip install --index-url ... NAME`

Default packages: sandlet-hello (/usr/bin/sandlet-hello prints HELLO_LINE), sandlet-hello-extra (depends on
sandlet-hello); wheel sandlet-hello 1.0 (module sandlet_hello, console script sandlet-hello-py printing
PY_HELLO_LINE). A sandbox needs a network policy allowing 198.19.0.1 port 80. Everything ends by itself after
max_lifetime seconds and on close (processes killed; the namespaces and links go with them).
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from typing import Dict, Iterator, List, Optional, Sequence, Union

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_procs  # noqa: E402

UPLINK_ADDR, ELSEWHERE_LINK_ADDR, MIRROR_ADDR = "10.255.255.1", "10.255.255.2", "198.19.0.1"
UPLINK_OWN_ADDR = "198.18.0.1"
HELLO_LINE = "hello from sandlet-hello 1.0 (test APT mirror)"
PY_HELLO_LINE = "hello from sandlet-hello 1.0 (test PyPI mirror)"

# A .deb: {"name", "version", "files": {abs path: content}, "depends": "", "description": ""}
DEFAULT_DEBS = [
    {"name": "sandlet-hello", "version": "1.0",
     "files": {"/usr/bin/sandlet-hello": f"#!/bin/sh\necho '{HELLO_LINE}'\n"},
     "description": "prints a fixed line (sandlet test mirror)"},
    {"name": "sandlet-hello-extra", "version": "1.0", "depends": "sandlet-hello",
     "files": {"/usr/share/sandlet-hello-extra/README": "needs sandlet-hello\n"},
     "description": "depends on sandlet-hello (sandlet test mirror)"},
]
# A wheel: {"name", "version", "files": {path in the wheel: content}, "scripts": {name: "module:function"}}
DEFAULT_WHEELS = [
    {"name": "sandlet-hello", "version": "1.0",
     "files": {"sandlet_hello/__init__.py":
               f'LINE = "{PY_HELLO_LINE}"\n\n\ndef main():\n    print(LINE)\n'},
     "scripts": {"sandlet-hello-py": "sandlet_hello:main"}},
]


def _sh(cmd: str, netns: Optional[str] = None) -> None:
    argv = ["sh", "-ec", cmd]
    if netns:
        argv = ["nsenter", f"--net={netns}", "--", *argv]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd!r} failed ({p.returncode}): {p.stdout}")


def build_deb(spec: dict, out_dir: str, work: str) -> str:
    """A binary package (Architecture: all) made with dpkg-deb; returns the .deb's path."""
    name, version = spec["name"], spec["version"]
    root = os.path.join(work, f"{name}_{version}")
    os.makedirs(os.path.join(root, "DEBIAN"))
    for path, content in spec.get("files", {}).items():
        dest = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
        os.chmod(dest, 0o755 if "/bin/" in path else 0o644)
    control = [f"Package: {name}", f"Version: {version}", "Architecture: all", "Section: misc",
               "Priority: optional", "Maintainer: sandlet tests <tests@sandlet.invalid>"]
    if spec.get("depends"):
        control.append(f"Depends: {spec['depends']}")
    control.append(f"Description: {spec.get('description') or name}")
    with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
        f.write("\n".join(control) + "\n")
    deb = os.path.join(out_dir, f"{name}_{version}_all.deb")
    # gzip members: every dpkg reads them; --root-owner-group: files owned by root whoever builds
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, deb], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return deb


def index_apt_repo(repo_dir: str) -> None:
    """Packages, Packages.gz and Release of a flat repository (apt-ftparchive, package apt-utils)."""
    packages = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo_dir, check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    with open(os.path.join(repo_dir, "Packages"), "wb") as f:
        f.write(packages)
    subprocess.run(["gzip", "-9nkf", "Packages"], cwd=repo_dir, check=True)
    # Written aside first: apt-ftparchive would otherwise hash the half-written Release itself.
    release = subprocess.run(["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=sandlet-tests",
                              "-o", "APT::FTPArchive::Release::Suite=test", "release", "."], cwd=repo_dir,
                             check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    with open(os.path.join(repo_dir, "Release"), "wb") as f:
        f.write(release)


def normalize(name: str) -> str:
    """PEP 503 project name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


def build_wheel(spec: dict, out_dir: str) -> str:
    """A pure-Python wheel (py3-none-any) written as a zip by hand; returns its path."""
    name, version = spec["name"], spec["version"]
    dist = re.sub(r"[-_.]+", "_", name)
    info = f"{dist}-{version}.dist-info"
    files: Dict[str, bytes] = {p: (c.encode() if isinstance(c, str) else c) for p, c in spec["files"].items()}
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 f"Summary: sandlet test mirror package\n").encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: sandlet-mirror-world\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    if spec.get("scripts"):
        lines = "".join(f"{k} = {v}\n" for k, v in spec["scripts"].items())
        files[f"{info}/entry_points.txt"] = ("[console_scripts]\n" + lines).encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = os.path.join(out_dir, f"{dist}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p, data in files.items():  # fixed time: equal inputs give equal wheels
            z.writestr(zipfile.ZipInfo(p, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return path


def write_simple_index(www: str, wheels: Sequence[str]) -> None:
    """/simple/index.html and /simple/<project>/index.html (PEP 503) linking /packages/<wheel>#sha256=."""
    by_project: Dict[str, List[str]] = {}
    for w in wheels:
        by_project.setdefault(normalize(os.path.basename(w).split("-")[0]), []).append(w)
    simple = os.path.join(www, "simple")
    os.makedirs(simple, exist_ok=True)

    def page(title: str, links: List[str]) -> str:
        return (f"<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
                f"<title>{html.escape(title)}</title></head><body>\n" + "\n".join(links) + "\n</body></html>\n")

    for project, ws in by_project.items():
        os.makedirs(os.path.join(simple, project), exist_ok=True)
        links = []
        for w in ws:
            with open(w, "rb") as f:
                sha = hashlib.sha256(f.read()).hexdigest()
            base = os.path.basename(w)
            links.append(f'<a href="../../packages/{html.escape(base)}#sha256={sha}">{html.escape(base)}</a><br>')
        with open(os.path.join(simple, project, "index.html"), "w") as f:
            f.write(page(f"Links for {project}", links))
    with open(os.path.join(simple, "index.html"), "w") as f:
        f.write(page("Simple index", [f'<a href="{p}/">{p}</a><br>' for p in sorted(by_project)]))


NGINX_CONF = """\
# master as root, workers too: they read the test's 0700 temp tree
user root;
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log {dir}/access.log;
  client_body_temp_path {dir}/tmp/body;
  proxy_temp_path {dir}/tmp/proxy;
  fastcgi_temp_path {dir}/tmp/fastcgi;
  uwsgi_temp_path {dir}/tmp/uwsgi;
  scgi_temp_path {dir}/tmp/scgi;
  types {{ text/html html; text/plain txt; }}
  default_type application/octet-stream;
  # relative Location headers: a redirect (/simple/x -> /simple/x/) stays on the address the client used
  absolute_redirect off;
  server {{
    listen {addr}:{port};
    root {www};
    index index.html;
  }}
}}
"""


class MirrorWorld:
    """The uplink namespace, the "elsewhere" namespace and nginx serving the mirrors (see module docstring).
    Use `with MirrorWorld() as w:` (or mirror_world()); w.uplink_netns, w.address, w.apt_source,
    w.pip_index_url (w.pip_args: it and --trusted-host); w.www_dir is served live (files added there are served at once)."""

    def __init__(self, debs: Optional[Sequence[dict]] = None, wheels: Optional[Sequence[dict]] = None,
                 port: int = 80, max_lifetime: float = 300):
        self.max_lifetime, self.port = max_lifetime, port
        self.dir = tempfile.mkdtemp(prefix="sandlet-mirror.")
        self.www_dir = os.path.join(self.dir, "www")
        self.log_path = os.path.join(self.dir, "nginx.out")
        self.address = MIRROR_ADDR
        self.base_url = f"http://{MIRROR_ADDR}" + ("" if port == 80 else f":{port}")
        self.apt_source = f"deb [trusted=yes] {self.base_url}/debian ./"
        self.pip_index_url = f"{self.base_url}/simple/"
        # pip refuses a plain-HTTP index unless its host is trusted
        self.pip_args = ["--index-url", self.pip_index_url, "--trusted-host", MIRROR_ADDR]
        self.procs: List[subprocess.Popen] = []
        self.nginx: Optional[subprocess.Popen] = None
        self.debs: Dict[str, str] = {}
        self.wheels: Dict[str, str] = {}
        self._deb_specs = list(DEFAULT_DEBS if debs is None else debs)
        self._wheel_specs = list(DEFAULT_WHEELS if wheels is None else wheels)

    # ---- life cycle
    def start(self) -> "MirrorWorld":
        self._build_content()
        self._make_namespaces()
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(dir=self.dir, addr=MIRROR_ADDR, port=self.port, www=self.www_dir))
        # -e: the error log before the config is read (else /var/log/nginx); -p: the prefix for relative paths
        self.nginx = server_procs.spawn(["/usr/sbin/nginx", "-e", os.path.join(self.dir, "error.log"),
                                         "-p", self.dir, "-c", conf], self.log_path, self.max_lifetime,
                                        netns=self.elsewhere_netns)
        server_procs.wait_until(self._serving, 20, "nginx mirror", self.nginx, os.path.join(self.dir, "error.log"))
        return self

    def close(self) -> None:
        server_procs.stop(self.nginx)
        self.nginx = None
        for p in reversed(self.procs):
            server_procs.stop(p)
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "MirrorWorld":
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pids(self) -> List[int]:
        return [p.pid for p in self.procs] + ([self.nginx.pid] if self.nginx else [])

    # ---- namespaces
    def _holder(self) -> subprocess.Popen:
        """A child in a new network namespace, alive for max_lifetime (sleep ends by itself)."""
        p = server_procs.spawn(["unshare", "-n", "--", "sleep", str(int(self.max_lifetime))],
                               os.path.join(self.dir, "ns.log"), self.max_lifetime, wrap=False)
        self.procs.append(p)
        mine = os.readlink("/proc/self/ns/net")
        server_procs.wait_until(lambda: os.readlink(f"/proc/{p.pid}/ns/net") != mine, 10, "unshare -n", p)
        return p

    def _make_namespaces(self) -> None:
        elsewhere = self._holder()  # first: the uplink's veth end is moved into it by pid
        uplink = self._holder()
        self.uplink_netns = f"/proc/{uplink.pid}/ns/net"
        self.elsewhere_netns = f"/proc/{elsewhere.pid}/ns/net"
        _sh(f"ip link set lo up; ip addr add {UPLINK_OWN_ADDR}/32 dev lo; "
            f"ip link add mw0 type veth peer name mw1 netns {elsewhere.pid}; "
            f"ip addr add {UPLINK_ADDR}/30 dev mw0; ip link set mw0 up", self.uplink_netns)
        _sh(f"ip link set lo up; ip addr add {MIRROR_ADDR}/32 dev lo; "
            f"ip addr add {ELSEWHERE_LINK_ADDR}/30 dev mw1; ip link set mw1 up; "
            f"ip route add default via {UPLINK_ADDR}", self.elsewhere_netns)
        _sh(f"ip route add 198.19.0.0/24 via {ELSEWHERE_LINK_ADDR}", self.uplink_netns)

    def _serving(self) -> bool:
        def probe() -> bool:
            with socket.create_connection((MIRROR_ADDR, self.port), timeout=1):
                return True
        return bool(server_procs.run_in_netns(self.uplink_netns, probe))

    # ---- content
    def _build_content(self) -> None:
        work = os.path.join(self.dir, "build")
        apt = os.path.join(self.www_dir, "debian")
        pkgs = os.path.join(self.www_dir, "packages")
        for d in (work, apt, pkgs):
            os.makedirs(d, exist_ok=True)
        for spec in self._deb_specs:
            self.debs[spec["name"]] = build_deb(spec, apt, work)
        if self._deb_specs:
            index_apt_repo(apt)
        for spec in self._wheel_specs:
            self.wheels[spec["name"]] = build_wheel(spec, pkgs)
        write_simple_index(self.www_dir, list(self.wheels.values()))
        shutil.rmtree(work, ignore_errors=True)

    # ---- clients in the uplink (what the gateway sees)
    def in_uplink(self, fn):
        """Runs fn() on a thread inside the uplink namespace; returns its result."""
        return server_procs.run_in_netns(self.uplink_netns, fn)

    def run_in_uplink(self, argv: Sequence[str], **kw) -> subprocess.CompletedProcess:
        """subprocess.run(argv) inside the uplink namespace (nsenter)."""
        kw.setdefault("timeout", 60)
        return subprocess.run(["nsenter", f"--net={self.uplink_netns}", "--", *argv], **kw)

    def fetch(self, path: str, timeout: float = 10) -> bytes:
        """GET base_url + path from the uplink namespace (raises on a non-200 answer)."""
        import urllib.request

        def get() -> bytes:  # no proxy from the environment: the mirror is reached directly
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(self.base_url + path, timeout=timeout) as r:
                return r.read()
        return self.in_uplink(get)


@contextlib.contextmanager
def mirror_world(**kw) -> Iterator[MirrorWorld]:
    """with mirror_world() as w: ... (the arguments of MirrorWorld)."""
    with MirrorWorld(**kw) as w:
        yield w


@contextlib.contextmanager
def uplink_env(world: Union[MirrorWorld, str]) -> Iterator[str]:
    """Sets $SANDLET_NET_UPLINK_NETNS (read when a runtime starts its gateway) to the world's uplink for the
    runtimes opened inside the block; restores the previous value afterwards."""
    path = world if isinstance(world, str) else world.uplink_netns
    old = os.environ.get("SANDLET_NET_UPLINK_NETNS")
    os.environ["SANDLET_NET_UPLINK_NETNS"] = path
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("SANDLET_NET_UPLINK_NETNS", None)
        else:
            os.environ["SANDLET_NET_UPLINK_NETNS"] = old
