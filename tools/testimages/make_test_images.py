#!/usr/bin/python3
"""Builds berth's test images offline, byte for byte the same on every run.

The images are made of Debian's /bin/busybox (busybox-static) and a few
files written here; nothing is downloaded. Every tar entry has a fixed
owner and time, entries are written in sorted order and every gzip stream
has mtime 0 and no file name, so the same busybox binary always gives the
same digests.

Written under --out:

  busybox/     OCI layout: one layer (/bin/busybox, applet symlinks,
               /etc/passwd, /etc/group, /tmp 1777, /root), Cmd ["sh"].
  multilayer/  OCI layout: the busybox layer, then a layer of special
               entries (hard links, symbolic links, setuid, fifo, char
               device 1:3, an xattr, owners, an old mtime), a layer that
               deletes (whiteouts, an opaque directory), and a last one;
               Entrypoint, Cmd, Env, WorkingDir /work, User 65534:65534
               and a Healthcheck in its config.
  multiarch/   OCI layout whose index.json names an image index of
               linux/<this machine> (the busybox image) and a fake image
               for the other of amd64/arm64.
  shared/      OCI layout: the busybox layer plus one layer of its own.
  busybox-docker.tar, multilayer-docker.tar   `docker save` archives.
  busybox-oci.tar, multilayer-oci.tar         OCI archives (a layout, tarred).
  images.json  for tests: each image's manifest, config and layer digests.

With --big-mb N also big/: about N MB of incompressible data (the same on
every run) in 5 layers over the busybox layer, for benchmarks.

Usage: make_test_images.py --out DIR [--busybox /bin/busybox] [--big-mb N]
       [--only NAME,...]
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import sys
import tarfile

# 2023-11-14T22:13:20Z: every entry's mtime, and each config's "created".
MTIME = 1700000000
CREATED = "2023-11-14T22:13:20Z"
# One entry keeps an older time, so that unpacking is seen to keep times.
OLD_MTIME = 1000000000

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"

APPLETS = [
    "[", "awk", "basename", "cat", "chmod", "chown", "cp", "cut", "date",
    "dd", "df", "dirname", "du", "echo", "env", "expr", "false", "find",
    "grep", "head", "hostname", "id", "kill", "ln", "ls", "mkdir", "mkfifo",
    "mknod", "mount", "mv", "nproc", "printf", "ps", "pwd", "readlink",
    "realpath", "rm", "rmdir", "sed", "seq", "sh", "sleep", "sort", "stat",
    "sync", "tail", "tee", "test", "timeout", "touch", "tr", "true",
    "umount", "uname", "uniq", "wc", "which", "whoami", "xargs", "yes",
]

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
)
GROUP = "root:x:0:\nnobody:x:65534:\n"


def go_arch():
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def canonical_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


class Layer:
    """A layer's entries; tar() writes them sorted by name."""

    def __init__(self):
        self.entries = {}  # name -> (TarInfo, data or None)

    def _add(self, name, kind, mode, data=None, uid=0, gid=0,
             mtime=MTIME, linkname="", xattrs=None, dev=None):
        name = name.strip("/")
        if name in self.entries:
            raise ValueError("entry %s added twice" % name)
        info = tarfile.TarInfo(name)
        info.type = kind
        info.mode = mode
        info.uid = uid
        info.gid = gid
        info.uname = ""
        info.gname = ""
        info.mtime = mtime
        info.linkname = linkname
        if data is not None:
            info.size = len(data)
        if dev is not None:
            info.devmajor, info.devminor = dev
        if xattrs:
            info.pax_headers = {
                "SCHILY.xattr." + k: v for k, v in sorted(xattrs.items())}
        self.entries[name] = (info, data)

    def dir(self, name, mode=0o755, **kw):
        self._add(name, tarfile.DIRTYPE, mode, **kw)

    def file(self, name, data, mode=0o644, **kw):
        if isinstance(data, str):
            data = data.encode()
        self._add(name, tarfile.REGTYPE, mode, data=data, **kw)

    def symlink(self, name, target, **kw):
        self._add(name, tarfile.SYMTYPE, 0o777, linkname=target, **kw)

    def hardlink(self, name, target, **kw):
        self._add(name, tarfile.LNKTYPE, 0o644, linkname=target.strip("/"),
                  **kw)

    def fifo(self, name, mode=0o644, **kw):
        self._add(name, tarfile.FIFOTYPE, mode, **kw)

    def chardev(self, name, major, minor, mode=0o666, **kw):
        self._add(name, tarfile.CHRTYPE, mode, dev=(major, minor), **kw)

    def whiteout(self, path):
        """Deletes `path` of the layers below (an empty .wh. file)."""
        parent, base = os.path.split(path.strip("/"))
        self.file(os.path.join(parent, ".wh." + base), b"")

    def opaque(self, directory):
        """Hides what the layers below have in `directory`."""
        self.file(os.path.join(directory.strip("/"), ".wh..wh..opq"), b"")

    def tar(self):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT,
                          encoding="utf-8") as tar:
            written = set()
            for name in sorted(self.entries):
                info, data = self.entries[name]
                if info.type == tarfile.LNKTYPE and info.linkname not in written:
                    raise ValueError("hard link %s comes before its target %s" %
                                     (name, info.linkname))
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
                written.add(name)
        return out.getvalue()


def gzip_bytes(data, level=6):
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=level,
                       fileobj=out, mtime=0) as gz:
        gz.write(data)
    return out.getvalue()


class Blob:
    def __init__(self, media_type, data):
        self.media_type = media_type
        self.data = data
        self.digest = "sha256:" + sha256_hex(data)

    def descriptor(self, **extra):
        d = {"mediaType": self.media_type, "digest": self.digest,
             "size": len(self.data)}
        d.update(extra)
        return d


class BuiltLayer:
    def __init__(self, tar_bytes, level=6):
        self.tar = tar_bytes
        self.diff_id = "sha256:" + sha256_hex(tar_bytes)
        self.blob = Blob(MT_LAYER_GZIP, gzip_bytes(tar_bytes, level))


class Image:
    """A manifest, its config and its layers."""

    def __init__(self, layers, config, arch, comments):
        self.layers = layers
        self.arch = arch
        config = dict(config)
        config.update({
            "created": CREATED,
            "architecture": arch,
            "os": "linux",
            "rootfs": {"type": "layers",
                       "diff_ids": [l.diff_id for l in layers]},
            "history": [{"created": CREATED, "created_by": c}
                        for c in comments],
        })
        self.config = Blob(MT_CONFIG, canonical_json(config))
        manifest = {
            "schemaVersion": 2,
            "mediaType": MT_MANIFEST,
            "config": self.config.descriptor(),
            "layers": [l.blob.descriptor() for l in layers],
        }
        self.manifest = Blob(MT_MANIFEST, canonical_json(manifest))

    def blobs(self):
        return [self.manifest, self.config] + [l.blob for l in self.layers]

    def platform(self):
        return {"architecture": self.arch, "os": "linux"}

    def summary(self):
        return {
            "manifest_digest": self.manifest.digest,
            "manifest_size": len(self.manifest.data),
            "config_digest": self.config.digest,
            "architecture": self.arch,
            "layers": [{"digest": l.blob.digest, "size": len(l.blob.data),
                        "diff_id": l.diff_id} for l in self.layers],
        }


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


def write_layout(directory, blobs, top_descriptor):
    """An OCI image layout whose index.json names one descriptor."""
    os.makedirs(os.path.join(directory, "blobs", "sha256"), exist_ok=True)
    for blob in blobs:
        path = os.path.join(directory, "blobs", "sha256",
                            blob.digest.split(":", 1)[1])
        write_file(path, blob.data)
    write_file(os.path.join(directory, "oci-layout"),
               canonical_json({"imageLayoutVersion": "1.0.0"}))
    index = {"schemaVersion": 2, "mediaType": MT_INDEX,
             "manifests": [top_descriptor]}
    write_file(os.path.join(directory, "index.json"), canonical_json(index))


def image_layout(directory, image, ref="latest"):
    write_layout(directory, image.blobs(), image.manifest.descriptor(
        annotations={REF_NAME: ref}, platform=image.platform()))


def tar_of_files(files):
    """A tar of (name, data) pairs; names ending in "/" are directories."""
    layer = Layer()
    for name, data in files:
        if name.endswith("/"):
            layer.dir(name)
        else:
            layer.file(name, data)
    return layer.tar()


def layout_archive(directory):
    """An OCI archive: the layout `directory` as a tar."""
    files = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        rel = os.path.relpath(root, directory)
        if rel != ".":
            files.append((rel + "/", None))
        for name in sorted(names):
            with open(os.path.join(root, name), "rb") as f:
                files.append((os.path.normpath(os.path.join(rel, name)),
                              f.read()))
    return tar_of_files(files)


def docker_archive(image, repo_tag):
    """What `docker save` writes for one image."""
    repo, tag = repo_tag.rsplit(":", 1)
    config_name = image.config.digest.split(":", 1)[1] + ".json"
    files = [(config_name, image.config.data)]
    layer_paths = []
    parent = ""
    for layer in image.layers:
        layer_id = layer.diff_id.split(":", 1)[1]
        layer_paths.append(layer_id + "/layer.tar")
        v1 = {"id": layer_id, "created": CREATED, "os": "linux",
              "architecture": image.arch}
        if parent:
            v1["parent"] = parent
        files += [(layer_id + "/", None),
                  (layer_id + "/VERSION", b"1.0"),
                  (layer_id + "/json", canonical_json(v1)),
                  (layer_id + "/layer.tar", layer.tar)]
        parent = layer_id
    manifest = [{"Config": config_name, "RepoTags": [repo_tag],
                 "Layers": layer_paths}]
    files.append(("manifest.json", canonical_json(manifest)))
    files.append(("repositories", canonical_json({repo: {tag: parent}})))
    return tar_of_files(files)


# --- the images -------------------------------------------------------------


def busybox_layer(busybox_path):
    with open(busybox_path, "rb") as f:
        busybox = f.read()
    layer = Layer()
    layer.dir("bin")
    layer.file("bin/busybox", busybox, mode=0o755)
    for applet in APPLETS:
        layer.symlink("bin/" + applet, "busybox")
    layer.dir("etc")
    layer.file("etc/passwd", PASSWD)
    layer.file("etc/group", GROUP)
    layer.dir("root", mode=0o700)
    layer.dir("tmp", mode=0o1777)
    return BuiltLayer(layer.tar())


def busybox_image(base):
    config = {"config": {"Cmd": ["sh"], "Env": [PATH_ENV], "WorkingDir": "/"}}
    return Image([base], config, go_arch(),
                 ["berth make_test_images: busybox-static"])


def multilayer_image(base):
    # Layer 2: one of each kind of entry, and what layer 3 deletes.
    special = Layer()
    special.dir("data")
    special.file("data/keep.txt", "kept\n")
    special.file("data/remove-me.txt", "deleted by a whiteout above\n")
    special.dir("data/gone")
    special.file("data/gone/file.txt", "its directory is deleted above\n")
    special.dir("data/opaque")
    special.file("data/opaque/old.txt", "hidden by an opaque directory\n")
    special.dir("data/opaque/old-dir")
    special.file("data/opaque/old-dir/deep.txt", "hidden too\n")
    special.file("data/hardlink-a", "one inode, three names\n")
    special.hardlink("data/hardlink-b", "data/hardlink-a")
    special.dir("data/links")
    special.hardlink("data/links/hardlink-c", "data/hardlink-a")
    special.symlink("data/symlink-relative", "keep.txt")
    special.symlink("data/symlink-absolute", "/bin/busybox")
    special.symlink("data/symlink-dangling", "../nowhere/at/all")
    special.file("data/setuid", "#!/bin/sh\necho setuid\n", mode=0o4755)
    special.file("data/setgid", "setgid\n", mode=0o2755)
    special.fifo("data/fifo")
    special.chardev("data/null", 1, 3)
    special.file("data/xattr.txt", "has user.berth=1\n",
                 xattrs={"user.berth": "1"})
    special.file("data/owned-by-nobody", "65534:65534\n", uid=65534,
                 gid=65534, mode=0o600)
    special.file("data/old-mtime", "mtime 2001-09-09\n", mtime=OLD_MTIME)
    special.dir("data/private", mode=0o700)
    special.file("data/private/secret", "0600\n", mode=0o600)
    special_layer = BuiltLayer(special.tar())

    # Layer 3: deletes and replaces.
    changes = Layer()
    changes.dir("data")
    changes.whiteout("data/remove-me.txt")
    changes.whiteout("data/gone")
    changes.dir("data/opaque")
    changes.opaque("data/opaque")
    changes.file("data/opaque/new.txt", "the only file left here\n")
    changes.file("data/keep.txt", "kept, and changed in layer 3\n")
    changes.whiteout("bin/wc")
    changes_layer = BuiltLayer(changes.tar())

    # Layer 4: the working directory.
    last = Layer()
    last.dir("work", uid=65534, gid=65534)
    last.file("work/hello.txt", "hello from the top layer\n", uid=65534,
              gid=65534)
    last_layer = BuiltLayer(last.tar())

    config = {"config": {
        "Entrypoint": ["/bin/echo"],
        "Cmd": ["from", "image"],
        "Env": [PATH_ENV, "BERTH_IMAGE=multilayer", "EMPTY="],
        "WorkingDir": "/work",
        "User": "65534:65534",
        "Labels": {"org.berth.test": "multilayer"},
        "Healthcheck": {"Test": ["CMD", "/bin/true"],
                        "Interval": 30000000000, "Timeout": 5000000000,
                        "Retries": 3},
    }}
    return Image([base, special_layer, changes_layer, last_layer], config,
                 go_arch(), ["busybox-static", "special entries",
                             "whiteouts and an opaque directory", "/work"])


def fake_other_arch_image():
    arch = "arm64" if go_arch() != "arm64" else "amd64"
    layer = Layer()
    layer.dir("etc")
    layer.file("etc/arch", arch + "\n")
    config = {"config": {"Cmd": ["/bin/false"], "Env": [PATH_ENV]}}
    return Image([BuiltLayer(layer.tar())], config, arch,
                 ["a fake image for another platform"])


def shared_image(base):
    own = Layer()
    own.dir("etc")
    own.file("etc/shared-image", "this image shares busybox's layer\n")
    own.dir("srv")
    own.file("srv/data.bin", hashlib.shake_256(b"berth-shared").digest(65536))
    config = {"config": {"Cmd": ["cat", "/etc/shared-image"],
                         "Env": [PATH_ENV], "WorkingDir": "/"}}
    return Image([base, BuiltLayer(own.tar())], config, go_arch(),
                 ["busybox-static", "a layer of its own"])


def health_image(base):
    # What `berth run` takes from an image besides its command (issue 17):
    # a HEALTHCHECK with a short interval, healthy once /tmp/healthy exists,
    # a StopSignal and labels. busybox's sleep ends on SIGUSR1's default
    # action, so a stop shows which signal was sent.
    config = {"config": {
        "Cmd": ["sleep", "600"],
        "Env": [PATH_ENV],
        "WorkingDir": "/",
        "StopSignal": "SIGUSR1",
        "Labels": {"org.berth.test": "health"},
        "Healthcheck": {"Test": ["CMD-SHELL", "test -f /tmp/healthy"],
                        "Interval": 200000000, "Timeout": 2000000000,
                        "Retries": 2},
    }}
    return Image([base], config, go_arch(),
                 ["busybox-static"])


def big_image(base, megabytes, nlayers=5):
    total = megabytes * 1024 * 1024
    layers = [base]
    for i in range(nlayers):
        size = total // nlayers
        layer = Layer()
        layer.dir("big")
        # shake_256 gives any length at C speed: incompressible, and the
        # same on every run.
        layer.file("big/part-%d.bin" % i,
                   hashlib.shake_256(b"berth-big-%d" % i).digest(size))
        layer.file("big/part-%d.txt" % i, "part %d of %d\n" % (i, nlayers))
        layers.append(BuiltLayer(layer.tar(), level=1))
    config = {"config": {"Cmd": ["ls", "-l", "/big"], "Env": [PATH_ENV]}}
    return Image(layers, config, go_arch(),
                 ["busybox-static"] + ["big part %d" % i
                                       for i in range(nlayers)])


def write_oci_archive(out, name, image):
    """Writes <out>/<name>-oci.tar, an OCI layout of `image` as a tar."""
    layout = os.path.join(out, ".layout-" + name)
    image_layout(layout, image)
    write_file(os.path.join(out, name + "-oci.tar"), layout_archive(layout))
    for root, dirs, names in os.walk(layout, topdown=False):
        for n in names:
            os.unlink(os.path.join(root, n))
        for d in dirs:
            os.rmdir(os.path.join(root, d))
    os.rmdir(layout)


ALL = ["busybox", "multilayer", "multiarch", "shared", "archives", "health"]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--busybox", default="/bin/busybox")
    parser.add_argument("--big-mb", type=int, default=0)
    parser.add_argument("--only", default=",".join(ALL),
                        help="comma-separated, of: " + ", ".join(ALL))
    args = parser.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    unknown = only - set(ALL)
    if unknown:
        parser.error("unknown image(s): " + ", ".join(sorted(unknown)))
    os.makedirs(args.out, exist_ok=True)

    base = busybox_layer(args.busybox)
    busybox = busybox_image(base)
    multilayer = multilayer_image(base)
    summary = {}

    if "busybox" in only:
        image_layout(os.path.join(args.out, "busybox"), busybox)
        summary["busybox"] = busybox.summary()
    if "multilayer" in only:
        image_layout(os.path.join(args.out, "multilayer"), multilayer)
        summary["multilayer"] = multilayer.summary()
    if "multiarch" in only:
        other = fake_other_arch_image()
        images = sorted([busybox, other], key=lambda i: i.arch)
        index = Blob(MT_INDEX, canonical_json({
            "schemaVersion": 2, "mediaType": MT_INDEX,
            "manifests": [i.manifest.descriptor(platform=i.platform())
                          for i in images]}))
        blobs = [index] + [b for i in images for b in i.blobs()]
        write_layout(os.path.join(args.out, "multiarch"), blobs,
                     index.descriptor(annotations={REF_NAME: "latest"}))
        summary["multiarch"] = {
            "index_digest": index.digest, "index_size": len(index.data),
            "manifests": {i.arch: i.summary() for i in images}}
    if "shared" in only:
        shared = shared_image(base)
        image_layout(os.path.join(args.out, "shared"), shared)
        summary["shared"] = shared.summary()
    if "archives" in only:
        for name, image in (("busybox", busybox), ("multilayer", multilayer)):
            write_file(os.path.join(args.out, name + "-docker.tar"),
                       docker_archive(image, name + ":latest"))
            write_oci_archive(args.out, name, image)
    if "health" in only:
        health = health_image(base)
        write_oci_archive(args.out, "health", health)
        summary["health"] = health.summary()
    if args.big_mb > 0:
        big = big_image(base, args.big_mb)
        image_layout(os.path.join(args.out, "big"), big)
        summary["big"] = big.summary()

    write_file(os.path.join(args.out, "images.json"),
               json.dumps(summary, sort_keys=True, indent=2).encode() + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
