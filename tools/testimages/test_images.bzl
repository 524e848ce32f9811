"""test_images: the images make_test_images.py builds, as one directory."""

def _test_images_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    args = ctx.actions.args()
    args.add(ctx.file.script)
    args.add("--out", out.path)
    args.add("--busybox", "/bin/busybox")
    if ctx.attr.only:
        args.add("--only", ",".join(ctx.attr.only))
    if ctx.attr.big_mb:
        args.add("--big-mb", str(ctx.attr.big_mb))
    ctx.actions.run(
        # Debian's python3 and busybox-static, at their packages' paths (the
        # pins are checked by @debian_toolchain and @debian_image_test_tools).
        executable = "/usr/bin/python3",
        arguments = [args],
        inputs = [ctx.file.script] + ctx.files._pins,
        outputs = [out],
        mnemonic = "TestImages",
        progress_message = "Building test images %s" % out.short_path,
    )
    return [DefaultInfo(
        files = depset([out]),
        runfiles = ctx.runfiles(files = [out]),
    )]

test_images = rule(
    implementation = _test_images_impl,
    doc = "A directory of OCI layouts and archives made by make_test_images.py.",
    attrs = {
        "script": attr.label(
            default = ":make_test_images.py",
            allow_single_file = True,
        ),
        "only": attr.string_list(doc = "Images to make (--only); all when empty."),
        "big_mb": attr.int(doc = "Also a big image of about this many MB."),
        "_pins": attr.label(default = "@debian_image_test_tools//:tools"),
    },
)
