"""Real OCI registries for the image-pull tests (issue 35), on 127.0.0.1 only.

Registry runs Debian's `docker-registry` (the CNCF distribution server 2.8) on a free loopback port with its
storage in a temp dir, in four modes (Registry.mode(NAME, ...) or the tls/auth arguments):

  "http"   plain HTTP, anonymous push and pull
  "tls"    HTTPS with a certificate of a throw-away test CA (TestCA; ca_file / cert_dir for clients)
  "basic"  htpasswd basic auth (bcrypt hashes made by `htpasswd -B`, package apache2-utils)
  "token"  the Docker token flow: 401 with `WWW-Authenticate: Bearer realm=,service=,scope=`; TokenServer
           (http.server on a thread) checks basic credentials and issues an RS256 JWT whose header carries
           the signing certificate (x5c), issued by the test CA, which the registry trusts through
           auth.token.rootcertbundle. Claims: iss, sub, aud (the service), exp, nbf, iat, jti, access.

Images go in with skopeo (`Registry.push(layout_image, repo, tag)`; layouts from oci_layout.write_oci_layout,
re-exported here); skopeo runs in a private mount namespace with a tmpfs on /var/lib, so its blob-info cache
(/var/lib/containers/cache as root) is never written to the host. Helpers: corrupt_blob (the registry then
serves wrong bytes for a digest), stop/start/restart on the same port and storage, FaultProxy
(test/support/fault_proxy.py in front of an HTTP registry: cut or fail responses), mirror_of (a second
registry holding the same repos). Every process ends by itself after max_lifetime seconds and on close().
"""
from __future__ import annotations

import base64
import datetime
import http.client
import http.server
import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from typing import Dict, Iterable, List, Optional, Tuple, Union

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_procs  # noqa: E402
from oci_layout import LayoutImage, write_oci_layout, tar_files, MT_INDEX, MT_MANIFEST  # noqa: E402,F401

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import padding, rsa  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402
import ipaddress  # noqa: E402

REGISTRY_BIN = "/usr/bin/docker-registry"
FAULT_PROXY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fault_proxy.py")
MT_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
ACCEPT_ALL = ", ".join([MT_INDEX, MT_MANIFEST, MT_DOCKER_LIST, MT_DOCKER_MANIFEST])
MODES = {"http": dict(tls=False, auth=None), "tls": dict(tls=True, auth=None),
         "basic": dict(tls=False, auth="basic"), "token": dict(tls=False, auth="token")}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TestCA:
    """A throw-away CA (RSA 2048, a day's validity) in `dir`; issues server and token-signing certificates."""
    __test__ = False  # not a pytest test class

    def __init__(self, dir: str):
        self.dir = dir
        os.makedirs(dir, exist_ok=True)
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sandlet test CA")])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(hours=1))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
                     .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
                     .sign(self.key, hashes.SHA256()))
        self.ca_file = os.path.join(dir, "ca.crt")
        with open(self.ca_file, "wb") as f:
            f.write(self.cert.public_bytes(serialization.Encoding.PEM))
        # skopeo/containers-image read every *.crt of a directory as a CA (--dest-cert-dir).
        self.cert_dir = os.path.join(dir, "certs.d")
        os.makedirs(self.cert_dir, exist_ok=True)
        shutil.copy(self.ca_file, os.path.join(self.cert_dir, "ca.crt"))

    def issue(self, name: str, ips: Iterable[str] = (), dns: Iterable[str] = (), signing: bool = False):
        """(cert_path, key_path, cert, key): a server certificate for ips/dns, or (signing=True) one for
        signing tokens."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        now = datetime.datetime.now(datetime.timezone.utc)
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
             .issuer_name(self.cert.subject).public_key(key.public_key())
             .serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False))
        if signing:
            b = b.add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        else:
            sans = [x509.IPAddress(ipaddress.ip_address(i)) for i in ips] + [x509.DNSName(d) for d in dns]
            b = (b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
                 .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
                 .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        cert = b.sign(self.key, hashes.SHA256())
        cert_path, key_path = os.path.join(self.dir, name + ".crt"), os.path.join(self.dir, name + ".key")
        with open(cert_path, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                      serialization.NoEncryption()))
        return cert_path, key_path, cert, key

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_file)


def parse_challenge(value: str) -> Tuple[str, Dict[str, str]]:
    """('bearer', {realm, service, scope}) from a WWW-Authenticate value."""
    scheme, _, rest = value.partition(" ")
    return scheme.lower(), dict(re.findall(r'(\w+)="([^"]*)"', rest))


class TokenServer:
    """The token endpoint of the Docker token flow: GET REALM?service=S&scope=T:NAME:ACTIONS (repeatable) with
    HTTP basic credentials. A known user gets every action asked for; no credentials get "pull" only when
    anonymous_pull; wrong credentials get 401. `issued` lists (account, access) of every token given."""

    def __init__(self, ca: TestCA, users: Dict[str, str], service: str, issuer: str = "sandlet-test-token-issuer",
                 anonymous_pull: bool = False, token_lifetime: int = 300, max_lifetime: float = 300):
        self.users, self.service, self.issuer = dict(users), service, issuer
        self.anonymous_pull, self.token_lifetime = anonymous_pull, token_lifetime
        _, _, cert, self.key = ca.issue("token-signer", signing=True)
        self.x5c = [base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode(),
                    base64.b64encode(ca.cert.public_bytes(serialization.Encoding.DER)).decode()]
        self.rootcertbundle = ca.ca_file
        self.issued: List[Tuple[str, list]] = []
        self.refused = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                owner._handle(self)

            def log_message(self, *args):  # quiet: tests read `issued`
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.realm = f"http://127.0.0.1:{self.port}/token"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="token-server", daemon=True)
        self._thread.start()
        self._timer = threading.Timer(max_lifetime, self.close)  # stops by itself, like the processes
        self._timer.daemon = True
        self._timer.start()

    def make_token(self, account: str, access: list, lifetime: Optional[int] = None,
                   audience: Optional[str] = None) -> str:
        """A signed token (tests may also forge expired or foreign-audience ones)."""
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": self.x5c}
        claims = {"iss": self.issuer, "sub": account, "aud": audience or self.service, "iat": now, "nbf": now - 1,
                  "exp": now + (self.token_lifetime if lifetime is None else lifetime),
                  "jti": secrets.token_hex(16), "access": access}
        signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        sig = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing_input + "." + b64url(sig)

    def _account(self, req) -> Optional[str]:
        """The user, "" when anonymous; None for wrong credentials."""
        auth = req.headers.get("Authorization", "")
        if not auth:
            return ""
        if not auth.lower().startswith("basic "):
            return None
        try:
            user, _, pw = base64.b64decode(auth[6:].strip()).decode().partition(":")
        except ValueError:
            return None
        return user if user in self.users and secrets.compare_digest(self.users[user], pw) else None

    def _handle(self, req) -> None:
        url = urllib.parse.urlsplit(req.path)
        q = urllib.parse.parse_qs(url.query)
        account = self._account(req)
        if url.path != "/token" or account is None or q.get("service", [""])[0] != self.service:
            self.refused += 1
            body = b'{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials or service"}]}'
            req.send_response(401)
            req.send_header("WWW-Authenticate", 'Basic realm="sandlet-test-token"')
            req.send_header("Content-Type", "application/json")
            req.send_header("Content-Length", str(len(body)))
            req.end_headers()
            req.wfile.write(body)
            return
        access = []
        for scope in q.get("scope", []):
            for one in scope.split(" "):  # some clients join scopes with spaces
                kind, _, rest = one.partition(":")
                name, _, actions = rest.rpartition(":")
                if not kind or not name:
                    continue
                asked = [a for a in actions.split(",") if a]
                granted = asked if account else (["pull"] if self.anonymous_pull and "pull" in asked else [])
                access.append({"type": kind, "name": name, "actions": granted})
        token = self.make_token(account or "anonymous", access)
        self.issued.append((account or "anonymous", access))
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = json.dumps({"token": token, "access_token": token, "expires_in": self.token_lifetime,
                           "issued_at": now}).encode()
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    def close(self) -> None:
        self._timer.cancel()
        if self._thread.is_alive():
            self.httpd.shutdown()
            self._thread.join()
        self.httpd.server_close()


class Response:
    def __init__(self, status: int, headers: Dict[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


class Registry:
    """One docker-registry process (see the module docstring). Use as a context manager, or start()/close()."""

    def __init__(self, tls: bool = False, auth: Optional[str] = None, users: Optional[Dict[str, str]] = None,
                 ca: Optional[TestCA] = None, anonymous_pull: bool = False, max_lifetime: float = 300,
                 name: str = "registry"):
        if auth not in (None, "basic", "token"):
            raise ValueError("auth is None, 'basic' or 'token'")
        self.tls, self.auth, self.max_lifetime = tls, auth, max_lifetime
        self.users = dict(users or ({"tester": "s3cret-pass"} if auth else {}))
        self.dir = tempfile.mkdtemp(prefix=f"sandlet-{name}.")
        self.storage = os.path.join(self.dir, "storage")
        self.log_path = os.path.join(self.dir, "registry.log")
        self._own_ca = ca is None and (tls or auth == "token")
        self.ca = ca or (TestCA(os.path.join(self.dir, "ca")) if self._own_ca else None)
        self.port = server_procs.free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.scheme = "https" if tls else "http"
        self.url = f"{self.scheme}://{self.host}"
        self.token_server: Optional[TokenServer] = None
        self.service = f"sandlet-test-registry-{self.port}"
        self.proc: Optional[subprocess.Popen] = None
        self._token_cache: Dict[str, str] = {}
        self._write_config(anonymous_pull)

    @classmethod
    def mode(cls, name: str, **kw) -> "Registry":
        """Registry.mode("http" | "tls" | "basic" | "token", ...)."""
        return cls(**MODES[name], **kw)

    # ---- what clients need
    @property
    def ca_file(self) -> Optional[str]:
        return self.ca.ca_file if self.ca and self.tls else None

    @property
    def cert_dir(self) -> Optional[str]:
        return self.ca.cert_dir if self.ca and self.tls else None

    @property
    def user(self) -> Optional[str]:
        return next(iter(self.users), None)

    @property
    def password(self) -> Optional[str]:
        return self.users.get(self.user) if self.user else None

    @property
    def creds(self) -> Optional[str]:
        """USER:PASSWORD for skopeo --creds, None without auth."""
        return f"{self.user}:{self.password}" if self.auth else None

    def ref(self, repo: str, tag: str = "latest") -> str:
        return f"{self.host}/{repo}:{tag}"

    # ---- process
    def _write_config(self, anonymous_pull: bool) -> None:
        http_cfg = {"addr": self.host, "secret": secrets.token_hex(16), "headers": {"X-Content-Type-Options": ["nosniff"]}}
        if self.tls:
            cert, key, _, _ = self.ca.issue("registry-server", ips=["127.0.0.1"], dns=["localhost"])
            http_cfg["tls"] = {"certificate": cert, "key": key}
        cfg = {"version": 0.1, "log": {"level": "info", "formatter": "text"},
               "storage": {"filesystem": {"rootdirectory": self.storage}, "delete": {"enabled": True},
                           "maintenance": {"uploadpurging": {"enabled": False}}},
               "http": http_cfg}
        if self.auth == "basic":
            htpasswd = os.path.join(self.dir, "htpasswd")
            for i, (u, p) in enumerate(self.users.items()):
                # -B: bcrypt, the only hash distribution's htpasswd accepts; -i reads the password from stdin
                subprocess.run(["htpasswd", "-iB" + ("c" if i == 0 else ""), htpasswd, u], input=p.encode(),
                               check=True, capture_output=True)
            cfg["auth"] = {"htpasswd": {"realm": "sandlet-test", "path": htpasswd}}
        elif self.auth == "token":
            self.token_server = TokenServer(self.ca, self.users, self.service, anonymous_pull=anonymous_pull,
                                            max_lifetime=self.max_lifetime)
            ts = self.token_server
            cfg["auth"] = {"token": {"realm": ts.realm, "service": ts.service, "issuer": ts.issuer,
                                     "rootcertbundle": ts.rootcertbundle}}
        self.config_path = os.path.join(self.dir, "config.yml")
        with open(self.config_path, "w") as f:
            json.dump(cfg, f, indent=1)  # JSON is YAML: the registry reads it as is

    def start(self) -> "Registry":
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.proc = server_procs.spawn([REGISTRY_BIN, "serve", self.config_path], self.log_path, self.max_lifetime)
        server_procs.wait_until(lambda: self._raw("GET", "/v2/").status in (200, 401), 20,
                                "docker-registry", self.proc, self.log_path)
        return self

    def stop(self) -> None:
        """Stops the process (storage and port stay for start())."""
        server_procs.stop(self.proc)
        self.proc = None

    def restart(self, down_for: float = 0.0) -> None:
        self.stop()
        time.sleep(down_for)
        self.start()

    def close(self) -> None:
        self.stop()
        if self.token_server:
            self.token_server.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Registry":
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pids(self) -> List[int]:
        return [self.proc.pid] if self.proc else []

    # ---- HTTP, with the auth of the mode done for the caller
    def _conn(self, timeout: float = 10) -> http.client.HTTPConnection:
        if self.tls:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                               context=self.ca.ssl_context())
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def _raw(self, method: str, path: str, headers: Optional[dict] = None, body: Optional[bytes] = None) -> Response:
        c = self._conn()
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        finally:
            c.close()

    def token(self, scope: str, user: Optional[str] = None, password: Optional[str] = None) -> str:
        """A token for one scope from the token server (with the first user's credentials by default)."""
        user, password = user or self.user, password or self.password
        q = urllib.parse.urlencode({"service": self.service, "scope": scope})
        c = http.client.HTTPConnection("127.0.0.1", self.token_server.port, timeout=10)
        try:
            basic = base64.b64encode(f"{user}:{password}".encode()).decode()
            c.request("GET", f"/token?{q}", headers={"Authorization": f"Basic {basic}"})
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                raise PermissionError(f"token server answered {r.status}: {body[:200]!r}")
            return json.loads(body)["token"]
        finally:
            c.close()

    def request(self, method: str, path: str, headers: Optional[dict] = None, body: Optional[bytes] = None) -> Response:
        """One request with the mode's credentials (basic, or the bearer flow on a 401)."""
        headers = dict(headers or {})
        if self.auth == "basic":
            headers["Authorization"] = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        r = self._raw(method, path, headers, body)
        if r.status == 401 and self.auth == "token":
            scheme, params = parse_challenge(r.headers.get("www-authenticate", ""))
            if scheme == "bearer" and params.get("scope"):
                headers["Authorization"] = "Bearer " + self.token(params["scope"])
                r = self._raw(method, path, headers, body)
        return r

    def manifest(self, repo: str, ref: str, accept: str = ACCEPT_ALL) -> Response:
        return self.request("GET", f"/v2/{repo}/manifests/{ref}", {"Accept": accept})

    def blob(self, repo: str, digest: str) -> Response:
        return self.request("GET", f"/v2/{repo}/blobs/{digest}")

    # ---- filling it
    def skopeo_dest_args(self) -> List[str]:
        args = ["--dest-cert-dir", self.cert_dir] if self.tls else ["--dest-tls-verify=false"]
        return args + (["--dest-creds", self.creds] if self.auth else [])

    def skopeo_src_args(self) -> List[str]:
        args = ["--src-cert-dir", self.cert_dir] if self.tls else ["--src-tls-verify=false"]
        return args + (["--src-creds", self.creds] if self.auth else [])

    def push(self, image: Union[LayoutImage, str], repo: str, tag: str = "latest", format: Optional[str] = None,
             all_platforms: bool = True, compress_format: Optional[str] = None, extra: Iterable[str] = ()) -> str:
        """Copies `image` (a LayoutImage or any skopeo source name) to REPO:TAG; returns the pushed digest.
        format: None (as the source), "oci" or "v2s2" (Docker schema 2; gzip layers only);
        compress_format: None (layers as they are) or "gzip"/"zstd" (skopeo recompresses)."""
        src = image.ref if isinstance(image, LayoutImage) else image
        args = ["--all"] if all_platforms else []
        if format:
            args += ["--format", format]
        if compress_format:
            args += ["--dest-compress", "--dest-compress-format", compress_format]
        return run_skopeo(src, f"docker://{self.ref(repo, tag)}", [*args, *self.skopeo_dest_args(), *extra])

    def mirror_of(self, source: "Registry", repos: Iterable[str]) -> None:
        """Copies each "REPO:TAG" of `source` here unchanged (digests kept): this registry then serves as a
        mirror of those repos."""
        for item in repos:
            repo, _, tag = item.partition(":")
            run_skopeo(f"docker://{source.ref(repo, tag or 'latest')}", f"docker://{self.ref(repo, tag or 'latest')}",
                       ["--all", "--preserve-digests", *source.skopeo_src_args(), *self.skopeo_dest_args()])

    # ---- faults
    def blob_path(self, digest: str) -> str:
        algo, _, hexd = digest.partition(":")
        return os.path.join(self.storage, "docker/registry/v2/blobs", algo, hexd[:2], hexd, "data")

    def corrupt_blob(self, digest: str, how: str = "flip") -> None:
        """Changes the stored bytes of `digest`: "flip" one byte in the middle (same size), "truncate" to
        half, or "garbage" (same size, random bytes). The registry serves them under the same digest."""
        path = self.blob_path(digest)
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            if how == "flip":
                data[len(data) // 2] ^= 0xFF
            elif how == "garbage":
                data = bytearray(os.urandom(len(data)))
            elif how == "truncate":
                data = data[: len(data) // 2]
            else:
                raise ValueError(how)
            f.seek(0)
            f.write(data)
            f.truncate()

    def fault_proxy(self, max_lifetime: Optional[float] = None) -> "FaultProxy":
        """test/support/fault_proxy.py in front of this (HTTP) registry; clients use proxy.host."""
        if self.tls:
            raise ValueError("fault_proxy.py speaks plain HTTP only: use an HTTP registry")
        return FaultProxy(self.host, max_lifetime or self.max_lifetime)


class FaultProxy:
    """fault_proxy.py (see its docstring for the commands: reset_next K, fail_next K, down, up, throttle N,
    corrupt PATTERN, stats, clear) on a free loopback port, forwarding to `target` (HOST:PORT)."""

    def __init__(self, target: str, max_lifetime: float = 300):
        self.dir = tempfile.mkdtemp(prefix="sandlet-fault-proxy.")
        ready, log = os.path.join(self.dir, "ready.json"), os.path.join(self.dir, "proxy.log")
        self.proc = server_procs.spawn([sys.executable, FAULT_PROXY, "--target", target, "--ready", ready,
                                        "--max-lifetime", str(int(max_lifetime))], log, max_lifetime + 5)
        try:
            server_procs.wait_until(lambda: os.path.exists(ready), 20, "fault_proxy", self.proc, log)
        except BaseException:
            self.close()
            raise
        with open(ready) as f:
            info = json.load(f)
        self.port, self.control_port = info["port"], info["control_port"]
        self.host = f"127.0.0.1:{self.port}"

    def command(self, line: str) -> str:
        """Sends one control command; returns its reply line."""
        import socket
        with socket.create_connection(("127.0.0.1", self.control_port), timeout=10) as s:
            s.sendall(line.encode() + b"\n")
            f = s.makefile("rb")
            return f.readline().decode().strip()

    def stats(self) -> dict:
        return json.loads(self.command("stats"))

    def close(self) -> None:
        server_procs.stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_skopeo(src: str, dest: str, args: Iterable[str] = (), timeout: float = 120) -> str:
    """`skopeo copy ARGS SRC DEST` in a private mount namespace (tmpfs on /var/lib: its blob-info cache never
    lands on the host) with temp files in a throw-away dir; returns the digest of what it wrote."""
    tmp = tempfile.mkdtemp(prefix="sandlet-skopeo.")
    try:
        policy = os.path.join(tmp, "policy.json")
        with open(policy, "w") as f:
            json.dump({"default": [{"type": "insecureAcceptAnything"}]}, f)
        digest_file = os.path.join(tmp, "digest")
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o size=64m sandlet-skopeo /var/lib && exec "$@"', "sh",
               "skopeo", "--policy", policy, "--tmpdir", tmp, "copy", "--quiet", "--digestfile", digest_file,
               *args, src, dest]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env={**os.environ, "REGISTRY_AUTH_FILE": os.path.join(tmp, "auth.json")})
        if p.returncode != 0:
            raise RuntimeError(f"skopeo copy {src} {dest} failed ({p.returncode}):\n{p.stderr[-3000:]}")
        with open(digest_file) as f:
            return f.read().strip()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
