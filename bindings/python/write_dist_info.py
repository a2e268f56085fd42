"""Writes the distribution metadata of the package assembled in the build tree (``sandlet-V.dist-info``:
METADATA and entry_points.txt, from pyproject.toml), so that code run from the build tree finds the entry
points an installed wheel declares (Inspect's provider, the console scripts).

Usage: write_dist_info.py PYPROJECT OUTDIR   (OUTDIR: the directory to create, named sandlet-V.dist-info)
"""
import os
import sys
import tomllib


def main() -> int:
    pyproject, out = sys.argv[1], sys.argv[2]
    with open(pyproject, "rb") as f:
        project = tomllib.load(f)["project"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = dict(project.get("entry-points", {}))
    if project.get("scripts"):
        groups["console_scripts"] = project["scripts"]
    with open(os.path.join(out, "entry_points.txt"), "w") as f:
        for group, entries in groups.items():
            f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
