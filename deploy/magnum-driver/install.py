#!/usr/bin/python3
"""Install (or remove) the magnum-capi-bridge driver without pip and without PyPI.

Copies the package and writes a .dist-info directory generated from pyproject.toml, which is what
magnum finds its drivers by (pkg_resources in magnum <= 17, importlib.metadata later, stevedore in
both). Idempotent: nothing is touched when the installed copy is already identical, so a running
magnum-api does not need a restart after a no-op run. Exit status 0 means "installed and current";
the last output line says whether anything changed.

Usage: install.py [--target DIR] [--uninstall]
Default target: the purelib directory of this interpreter (/usr/local/lib/python3.X/dist-packages on
Debian), which magnum-api under uwsgi also has on sys.path.
"""

import argparse
import base64
import hashlib
import os
import pathlib
import shutil
import sys
import sysconfig
import tomllib

HERE = pathlib.Path(__file__).resolve().parent


def dist_name(project_name):
    # Normalised as in the wheel spec, e.g. magnum-capi-bridge-driver -> magnum_capi_bridge_driver.
    return project_name.replace("-", "_").replace(".", "_")


def wanted_files(project):
    """Relative path -> bytes of everything that belongs in the target directory."""
    files = {}
    for package in project["tool"]["setuptools"]["packages"]:
        for src in sorted((HERE / package).rglob("*.py")):
            files[str(src.relative_to(HERE))] = src.read_bytes()

    meta = project["project"]
    info = "%s-%s.dist-info" % (dist_name(meta["name"]), meta["version"])
    metadata = [
        "Metadata-Version: 2.1",
        "Name: %s" % meta["name"],
        "Version: %s" % meta["version"],
        "Summary: %s" % meta.get("description", ""),
        "License: %s" % meta.get("license", {}).get("text", ""),
        "Requires-Python: %s" % meta.get("requires-python", ""),
    ]
    files[info + "/METADATA"] = ("\n".join(metadata) + "\n").encode()
    entry_points = []
    for group, points in sorted(meta.get("entry-points", {}).items()):
        entry_points.append("[%s]" % group)
        entry_points.extend("%s = %s" % item for item in sorted(points.items()))
        entry_points.append("")
    files[info + "/entry_points.txt"] = "\n".join(entry_points).encode()
    files[info + "/top_level.txt"] = (
        "\n".join(project["tool"]["setuptools"]["packages"]) + "\n").encode()
    files[info + "/INSTALLER"] = b"magnum-capi-bridge install.py\n"

    # RECORD lets `pip uninstall` remove the package cleanly later.
    record = []
    for path, data in sorted(files.items()):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (path, digest.decode(), len(data)))
    record.append("%s/RECORD,," % info)
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode()
    return info, files


def installed_dirs(target, project):
    """Our package directory and every dist-info of our project (any version) in target."""
    prefix = dist_name(project["project"]["name"]) + "-"
    dirs = [target / p for p in project["tool"]["setuptools"]["packages"]]
    dirs += sorted(p for p in target.glob(prefix + "*.dist-info") if p.is_dir())
    return [d for d in dirs if d.exists()]


def is_current(target, info, files, project):
    expected_dirs = {target / p for p in project["tool"]["setuptools"]["packages"]}
    expected_dirs.add(target / info)
    if set(installed_dirs(target, project)) != expected_dirs:
        return False
    for path, data in files.items():
        try:
            if (target / path).read_bytes() != data:
                return False
        except OSError:
            return False
    # Stray files (e.g. a removed module) also make the copy stale; __pycache__ is ours to ignore.
    for d in expected_dirs:
        for f in d.rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and \
                    str(f.relative_to(target)) not in files:
                return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=pathlib.Path,
                        default=pathlib.Path(sysconfig.get_path("purelib")))
    parser.add_argument("--uninstall", action="store_true")
    args = parser.parse_args()

    with open(HERE / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    target = args.target
    info, files = wanted_files(project)

    if args.uninstall:
        removed = installed_dirs(target, project)
        for d in removed:
            shutil.rmtree(d)
        print("removed" if removed else "not installed", "from", target)
        return 0

    if is_current(target, info, files, project):
        print("unchanged: %s in %s" % (info, target))
        return 0

    target.mkdir(parents=True, exist_ok=True)
    # Remove and recreate rather than overwrite: the directory's mtime changes, which is what
    # stevedore's entry-point cache (~/.cache/python-entrypoints) keys on.
    for d in installed_dirs(target, project):
        shutil.rmtree(d)
    for path, data in files.items():
        dest = target / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_bytes(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    print("installed: %s in %s" % (info, target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
