#!/usr/bin/env python3
"""Packs files into a one-layer container image archive (the `docker save`
layout, which `ctr images import` reads), for a cluster with no image
registry.

    make_image.py --name NAME:TAG --out FILE [--entrypoint ARG]...
                  [--file SRC=DEST]... [--link DEST=TARGET]...
                  [--with-libraries]

--file copies a host file into the image (mode kept); --link makes a
symbolic link; --with-libraries adds the shared libraries `ldd` lists for
every --file that is a dynamic executable, and its loader. Entries are
written in sorted order with fixed times, so the same inputs give the same
image.
"""

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile


def libraries(path):
    """The absolute paths `ldd` resolves for `path`; none for a static one."""
    result = subprocess.run(["ldd", path], capture_output=True, text=True)
    if result.returncode != 0:
        return []
    found = []
    for line in result.stdout.splitlines():
        line = line.strip()
        if "=>" in line:
            target = line.split("=>", 1)[1].strip().split(" ")[0]
        else:
            target = line.split(" ")[0]
        if target.startswith("/"):
            found.append(target)
    return found


def layer(files, links):
    """A tar of the given files and links, with their parent directories."""
    buffer = io.BytesIO()
    entries = {}
    for dest, src in files.items():
        entries[dest] = ("file", src)
    for dest, target in links.items():
        if dest in entries:
            sys.exit(f"make_image.py: {dest} is both a file and a link")
        entries[dest] = ("link", target)
    directories = set()
    for dest in entries:
        parent = os.path.dirname(dest)
        while parent not in ("", "/"):
            directories.add(parent)
            parent = os.path.dirname(parent)
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in sorted(directories):
            info = tarfile.TarInfo(directory.lstrip("/"))
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for dest in sorted(entries):
            kind, what = entries[dest]
            info = tarfile.TarInfo(dest.lstrip("/"))
            if kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = what
                info.mode = 0o777
                tar.addfile(info)
                continue
            real = os.path.realpath(what)
            info.size = os.path.getsize(real)
            info.mode = os.stat(real).st_mode & 0o777
            with open(real, "rb") as data:
                tar.addfile(info, data)
    return buffer.getvalue()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--entrypoint", action="append", default=[])
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--link", action="append", default=[])
    parser.add_argument("--with-libraries", action="store_true")
    args = parser.parse_args()

    files = {}
    for item in args.file:
        src, _, dest = item.partition("=")
        if not dest or not os.path.isfile(src):
            sys.exit(f"make_image.py: --file {item}: no such file (SRC=DEST)")
        files[dest] = src
        if args.with_libraries:
            for library in libraries(src):
                files.setdefault(library, library)
    links = {}
    for item in args.link:
        dest, _, target = item.partition("=")
        if not target:
            sys.exit(f"make_image.py: --link {item}: DEST=TARGET")
        links[dest] = target

    data = layer(files, links)
    layer_digest = hashlib.sha256(data).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": args.entrypoint, "Env": ["PATH=/bin:/usr/bin"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer_digest]},
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_digest = hashlib.sha256(config_bytes).hexdigest()
    manifest = [
        {
            "Config": config_digest + ".json",
            "RepoTags": [args.name],
            "Layers": [layer_digest + "/layer.tar"],
        }
    ]
    with tarfile.open(args.out, "w") as out:
        for name, content in (
            (config_digest + ".json", config_bytes),
            (layer_digest + "/layer.tar", data),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = 0o644
            out.addfile(info, io.BytesIO(content))


if __name__ == "__main__":
    main()
