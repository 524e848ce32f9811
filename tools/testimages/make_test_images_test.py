"""Checks the images make_test_images.py built (see BUILD.bazel).

Usage: make_test_images_test.py SCRIPT IMAGES_DIR
"""

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

SCRIPT = None
IMAGES = None

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


class LayoutError(Exception):
    pass


def check_layout(directory):
    """Raises LayoutError naming what does not match; returns the digests of
    the manifests reachable from index.json."""
    blob_dir = os.path.join(directory, "blobs", "sha256")
    blobs = {}
    for name in sorted(os.listdir(blob_dir)):
        with open(os.path.join(blob_dir, name), "rb") as f:
            data = f.read()
        actual = hashlib.sha256(data).hexdigest()
        if actual != name:
            raise LayoutError("%s: blob sha256:%s has digest sha256:%s" %
                              (directory, name, actual))
        blobs["sha256:" + name] = data
    with open(os.path.join(directory, "oci-layout")) as f:
        if json.load(f) != {"imageLayoutVersion": "1.0.0"}:
            raise LayoutError("%s: bad oci-layout" % directory)
    with open(os.path.join(directory, "index.json")) as f:
        index = json.load(f)

    used = set()
    manifests = []

    def blob(desc, media_type):
        digest = desc["digest"]
        if digest not in blobs:
            raise LayoutError("%s: %s is missing" % (directory, digest))
        data = blobs[digest]
        if len(data) != desc["size"]:
            raise LayoutError("%s: %s has %d bytes, its descriptor says %d" %
                              (directory, digest, len(data), desc["size"]))
        if desc["mediaType"] != media_type:
            raise LayoutError("%s: %s is %s, expected %s" %
                              (directory, digest, desc["mediaType"],
                               media_type))
        used.add(digest)
        return data

    def walk(desc):
        if desc["mediaType"] == MT_INDEX:
            nested = json.loads(blob(desc, MT_INDEX))
            if nested.get("mediaType") != MT_INDEX:
                raise LayoutError("%s: %s is not an index" %
                                  (directory, desc["digest"]))
            for d in nested["manifests"]:
                if "platform" not in d:
                    raise LayoutError("%s: an index entry has no platform" %
                                      directory)
                walk(d)
            return
        manifest = json.loads(blob(desc, MT_MANIFEST))
        if manifest.get("mediaType") != MT_MANIFEST:
            raise LayoutError("%s: %s is not a manifest" %
                              (directory, desc["digest"]))
        manifests.append(desc["digest"])
        config = json.loads(blob(manifest["config"], MT_CONFIG))
        diff_ids = config["rootfs"]["diff_ids"]
        if len(diff_ids) != len(manifest["layers"]):
            raise LayoutError("%s: %d layers, %d diff_ids" %
                              (directory, len(manifest["layers"]),
                               len(diff_ids)))
        for layer, diff_id in zip(manifest["layers"], diff_ids):
            tar = gzip.decompress(blob(layer, MT_LAYER_GZIP))
            actual = "sha256:" + hashlib.sha256(tar).hexdigest()
            if actual != diff_id:
                raise LayoutError("%s: layer %s has diff_id %s, config says %s"
                                  % (directory, layer["digest"], actual,
                                     diff_id))

    for desc in index["manifests"]:
        walk(desc)
    unused = set(blobs) - used
    if unused:
        raise LayoutError("%s: blobs nothing refers to: %s" %
                          (directory, sorted(unused)))
    return manifests


def skopeo_inspect(ref, raw=False):
    env = skopeo_env()
    args = ["/usr/bin/skopeo", "--insecure-policy", "--tmpdir", env["TMPDIR"],
            "inspect"]
    if raw:
        args.append("--raw")
    result = subprocess.run(args + [ref], capture_output=True, text=True,
                            env=env, timeout=60)
    if result.returncode != 0:
        raise AssertionError("skopeo inspect %s: %s" % (ref, result.stderr))
    return json.loads(result.stdout)


def skopeo_env():
    home = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home}


def layer_tar(layout, digest):
    path = os.path.join(IMAGES, layout, "blobs", "sha256", digest[7:])
    with open(path, "rb") as f:
        return tarfile.open(fileobj=io.BytesIO(gzip.decompress(f.read())))


class TestImagesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(IMAGES, "images.json")) as f:
            cls.summary = json.load(f)

    def test_layouts_match_their_digests(self):
        for name in ("busybox", "multilayer", "shared"):
            manifests = check_layout(os.path.join(IMAGES, name))
            self.assertEqual(manifests,
                             [self.summary[name]["manifest_digest"]], name)
        manifests = check_layout(os.path.join(IMAGES, "multiarch"))
        self.assertEqual(len(manifests), 2)

    def test_skopeo_reads_the_layouts(self):
        for name in ("busybox", "multilayer", "shared"):
            info = skopeo_inspect("oci:" + os.path.join(IMAGES, name))
            self.assertEqual(info["Digest"],
                             self.summary[name]["manifest_digest"], name)
            self.assertEqual(info["Os"], "linux")
            self.assertEqual(len(info["Layers"]),
                             len(self.summary[name]["layers"]), name)
        raw = skopeo_inspect("oci:" + os.path.join(IMAGES, "multiarch"),
                             raw=True)
        self.assertEqual(raw["mediaType"], MT_INDEX)
        self.assertEqual(sorted(m["platform"]["architecture"]
                                for m in raw["manifests"]),
                         ["amd64", "arm64"])

    def test_skopeo_reads_the_archives(self):
        for name in ("busybox", "multilayer"):
            info = skopeo_inspect("oci-archive:" +
                                  os.path.join(IMAGES, name + "-oci.tar"))
            self.assertEqual(info["Digest"],
                             self.summary[name]["manifest_digest"])
            info = skopeo_inspect("docker-archive:" +
                                  os.path.join(IMAGES, name + "-docker.tar"))
            self.assertEqual(info["Layers"] and len(info["Layers"]),
                             len(self.summary[name]["layers"]))
            self.assertEqual(info["Env"][0][:5], "PATH=")

    def test_shared_image_shares_the_busybox_layer(self):
        base = self.summary["busybox"]["layers"][0]["digest"]
        self.assertEqual(self.summary["shared"]["layers"][0]["digest"], base)
        self.assertEqual(self.summary["multilayer"]["layers"][0]["digest"],
                         base)
        self.assertEqual(len(self.summary["shared"]["layers"]), 2)

    def test_busybox_layer(self):
        tar = layer_tar("busybox",
                        self.summary["busybox"]["layers"][0]["digest"])
        members = {m.name: m for m in tar.getmembers()}
        self.assertTrue(members["bin/busybox"].isfile())
        self.assertEqual(members["bin/busybox"].mode, 0o755)
        self.assertEqual(members["bin/sh"].linkname, "busybox")
        self.assertEqual(members["tmp"].mode, 0o1777)
        passwd = tar.extractfile("etc/passwd").read().decode()
        self.assertIn("nobody:x:65534:65534:", passwd)
        self.assertEqual([m.name for m in tar.getmembers()],
                         sorted(m.name for m in tar.getmembers()))

    def test_multilayer_entries(self):
        layers = self.summary["multilayer"]["layers"]
        self.assertEqual(len(layers), 4)
        special = {m.name: m for m in
                   layer_tar("multilayer", layers[1]["digest"]).getmembers()}
        self.assertTrue(special["data/hardlink-b"].islnk())
        self.assertEqual(special["data/links/hardlink-c"].linkname,
                         "data/hardlink-a")
        self.assertTrue(special["data/symlink-absolute"].issym())
        self.assertTrue(special["data/fifo"].isfifo())
        null = special["data/null"]
        self.assertTrue(null.ischr())
        self.assertEqual((null.devmajor, null.devminor), (1, 3))
        self.assertEqual(special["data/setuid"].mode, 0o4755)
        self.assertEqual(special["data/xattr.txt"].pax_headers.get(
            "SCHILY.xattr.user.berth"), "1")
        self.assertEqual(special["data/owned-by-nobody"].uid, 65534)
        self.assertEqual(special["data/old-mtime"].mtime, 1000000000)
        changes = [m.name for m in
                   layer_tar("multilayer", layers[2]["digest"]).getmembers()]
        for name in ("data/.wh.remove-me.txt", "data/.wh.gone",
                     "data/opaque/.wh..wh..opq", "bin/.wh.wc"):
            self.assertIn(name, changes)
        config = skopeo_inspect(
            "oci:" + os.path.join(IMAGES, "multilayer"))
        self.assertEqual(config["Env"][1], "BERTH_IMAGE=multilayer")

    def test_same_bytes_on_a_second_run(self):
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        subprocess.run(["/usr/bin/python3", SCRIPT, "--out", out], check=True)
        for root, _, names in os.walk(IMAGES):
            for name in names:
                path = os.path.join(root, name)
                rel = os.path.relpath(path, IMAGES)
                with open(path, "rb") as a, \
                        open(os.path.join(out, rel), "rb") as b:
                    self.assertTrue(a.read() == b.read(), rel + " differs")
        self.assertEqual(sorted(os.listdir(out)), sorted(os.listdir(IMAGES)))

    def test_big_image(self):
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        subprocess.run(["/usr/bin/python3", SCRIPT, "--out", out, "--only=",
                        "--big-mb", "2"], check=True)
        self.assertEqual(sorted(os.listdir(out)), ["big", "images.json"])
        check_layout(os.path.join(out, "big"))
        with open(os.path.join(out, "images.json")) as f:
            layers = json.load(f)["big"]["layers"]
        self.assertEqual(len(layers), 6)
        # Incompressible: each part's blob is at least its data's size.
        self.assertGreater(sum(l["size"] for l in layers[1:]), 2 * 1024 * 1024)

    def test_corruption_is_caught(self):
        copy = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")),
                            "busybox")
        shutil.copytree(os.path.join(IMAGES, "busybox"), copy)
        layer = self.summary["busybox"]["layers"][0]["digest"][7:]
        path = os.path.join(copy, "blobs", "sha256", layer)
        os.chmod(path, 0o644)
        with open(path, "r+b") as f:
            f.seek(100)
            byte = f.read(1)
            f.seek(100)
            f.write(bytes([byte[0] ^ 0xFF]))
        with self.assertRaisesRegex(LayoutError, "blob sha256:" + layer):
            check_layout(copy)


if __name__ == "__main__":
    SCRIPT, IMAGES = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
