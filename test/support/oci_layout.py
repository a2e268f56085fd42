"""A small OCI image-layout writer for tests (stdlib; zstd layers need the `zstandard` module).

write_oci_layout(dir, layers, config, compression, platforms, tag) writes (or adds a tag to) an OCI image
layout: `oci-layout`, `index.json` and `blobs/sha256/<hex>`. One platform gives an image manifest; several
give an image index (manifest list) whose entries share the layers and differ in their config (its
architecture/os) and, with platform_marker=True, in one extra layer holding /etc/sandlet-platform, so a test
can tell which platform a pull picked. Layer tars are deterministic (sorted names, owner 0:0, mtime 0, gzip
header without time), so equal inputs give equal digests. skopeo copies such a layout to a registry as is
(`oci:DIR:TAG`).
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import os
import tarfile
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = {
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
    "none": "application/vnd.oci.image.layer.v1.tar",
}
REF_NAME = "org.opencontainers.image.ref.name"
EPOCH = "1970-01-01T00:00:00Z"

# A layer: a directory (tarred), a tar file (plain, gzip or zstd), raw tar bytes, or {path: bytes|str}
# (regular files, mode 0644, or 0755 when the path is under a bin/ directory).
Layer = Union[str, bytes, Dict[str, Union[bytes, str]]]
Platform = Union[Tuple[str, str], Tuple[str, str, str]]


@dataclasses.dataclass
class Descriptor:
    media_type: str
    digest: str
    size: int

    def json(self, **extra) -> dict:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size, **extra}


@dataclasses.dataclass
class LayoutImage:
    """What write_oci_layout wrote: the top object for `tag` (an index when several platforms were asked
    for) and, per platform "os/arch[/variant]", its manifest, config and layers."""
    dir: str
    tag: str
    top: Descriptor
    manifests: Dict[str, Descriptor]
    configs: Dict[str, Descriptor]
    layers: Dict[str, List[Descriptor]]
    diff_ids: Dict[str, List[str]]

    @property
    def ref(self) -> str:
        """The skopeo source name: oci:DIR:TAG."""
        return f"oci:{self.dir}:{self.tag}"

    @property
    def is_index(self) -> bool:
        return self.top.media_type == MT_INDEX


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def tar_dir(src: str) -> bytes:
    """A deterministic tar of the directory's contents (names relative to it, no leading ./)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name in sorted(os.listdir(src)):
            tf.add(os.path.join(src, name), arcname=name, filter=_reset)  # recursion is sorted too
    return buf.getvalue()


def tar_files(files: Dict[str, Union[bytes, str]]) -> bytes:
    """A tar of regular files given by content; parent directories are added (mode 0755)."""
    buf = io.BytesIO()
    dirs = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for path in sorted(files):
            rel = path.strip("/")
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = _reset(tarfile.TarInfo(d))
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tf.addfile(info)
            data = files[path].encode() if isinstance(files[path], str) else files[path]
            info = _reset(tarfile.TarInfo(rel))
            info.size = len(data)
            info.mode = 0o755 if "bin" in parts else 0o644
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _uncompressed(data: bytes) -> bytes:
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def layer_tar(layer: Layer) -> bytes:
    """The uncompressed tar of one layer argument."""
    if isinstance(layer, dict):
        return tar_files(layer)
    if isinstance(layer, bytes):
        return _uncompressed(layer)
    if os.path.isdir(layer):
        return tar_dir(layer)
    with open(layer, "rb") as f:
        return _uncompressed(f.read())


def compress(data: bytes, compression: str) -> bytes:
    if compression == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    if compression == "zstd":
        import zstandard  # in .venv (system site packages); only zstd layers need it
        return zstandard.ZstdCompressor(level=3).compress(data)
    if compression == "none":
        return data
    raise ValueError(f"compression must be gzip, zstd or none, not {compression!r}")


class _Blobs:
    def __init__(self, root: str):
        self.dir = os.path.join(root, "blobs", "sha256")
        os.makedirs(self.dir, exist_ok=True)

    def put(self, data: bytes, media_type: str) -> Descriptor:
        digest = sha256(data)
        path = os.path.join(self.dir, digest.split(":", 1)[1])
        if not os.path.exists(path):
            with open(path + ".tmp", "wb") as f:
                f.write(data)
            os.rename(path + ".tmp", path)
        return Descriptor(media_type, digest, len(data))

    def put_json(self, obj: dict, media_type: str) -> Descriptor:
        return self.put(json.dumps(obj, separators=(",", ":")).encode(), media_type)


def platform_name(p: Platform) -> str:
    return "/".join(p)


def _platform_json(p: Platform) -> dict:
    out = {"architecture": p[1], "os": p[0]}
    if len(p) > 2 and p[2]:
        out["variant"] = p[2]
    return out


def write_oci_layout(dir: str, layers: Sequence[Layer], config: Optional[dict] = None,
                     compression: str = "gzip", platforms: Iterable[Platform] = (("linux", "amd64"),),
                     tag: str = "latest", platform_marker: bool = False,
                     annotations: Optional[Dict[str, str]] = None) -> LayoutImage:
    """Writes an image (or, for several platforms, an image index) into the OCI layout `dir` under `tag`.

    config: the image config's "config" object (Env, WorkingDir, User, Entrypoint, Cmd, Labels, ...).
    An existing layout keeps its other tags; `tag` is replaced."""
    platforms = [tuple(p) for p in platforms]
    if not platforms:
        raise ValueError("at least one platform")
    os.makedirs(dir, exist_ok=True)
    blobs = _Blobs(dir)
    media_type = MT_LAYER.get(compression)
    if media_type is None:
        raise ValueError(f"compression must be one of {sorted(MT_LAYER)}")
    tars = [layer_tar(layer) for layer in layers]
    shared = [(blobs.put(compress(t, compression), media_type), sha256(t)) for t in tars]
    info = LayoutImage(dir, tag, None, {}, {}, {}, {})  # type: ignore[arg-type]
    entries = []
    for p in platforms:
        name = platform_name(p)
        own = list(shared)
        if platform_marker:
            t = tar_files({"etc/sandlet-platform": name + "\n"})
            own.append((blobs.put(compress(t, compression), media_type), sha256(t)))
        cfg = {"created": EPOCH, **_platform_json(p), "config": dict(config or {}),
               "rootfs": {"type": "layers", "diff_ids": [d for _, d in own]},
               "history": [{"created": EPOCH, "created_by": f"sandlet test layer {i}"} for i in range(len(own))]}
        cdesc = blobs.put_json(cfg, MT_CONFIG)
        manifest = {"schemaVersion": 2, "mediaType": MT_MANIFEST, "config": cdesc.json(),
                    "layers": [d.json() for d, _ in own]}
        if annotations:
            manifest["annotations"] = dict(annotations)
        mdesc = blobs.put_json(manifest, MT_MANIFEST)
        info.manifests[name], info.configs[name] = mdesc, cdesc
        info.layers[name], info.diff_ids[name] = [d for d, _ in own], [d for _, d in own]
        entries.append(mdesc.json(platform=_platform_json(p)))
    if len(platforms) == 1:
        info.top = info.manifests[platform_name(platforms[0])]
        top_entry = dict(entries[0])
    else:
        index = {"schemaVersion": 2, "mediaType": MT_INDEX, "manifests": entries}
        info.top = blobs.put_json(index, MT_INDEX)
        top_entry = info.top.json()
    top_entry["annotations"] = {REF_NAME: tag}

    index_path = os.path.join(dir, "index.json")
    outer = {"schemaVersion": 2, "manifests": []}
    if os.path.exists(index_path):
        with open(index_path) as f:
            outer = json.load(f)
    outer["manifests"] = [m for m in outer.get("manifests", [])
                          if m.get("annotations", {}).get(REF_NAME) != tag] + [top_entry]
    with open(index_path + ".tmp", "w") as f:
        json.dump(outer, f)
    os.rename(index_path + ".tmp", index_path)
    with open(os.path.join(dir, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    return info
