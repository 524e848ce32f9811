"""Repository rules that stand Debian 12 packages in for downloaded dependencies.

Every C++ dependency of berth, and every code generator it runs, comes from a
Debian package. third_party/debian.lock names each package and the upstream
version it must have; these rules compare what is installed against it when a
repository is fetched, and fail with the package, the version found and the
version wanted. Nothing is downloaded.
"""

_LOCK = "//third_party:debian.lock"
_FIX = "run 'tools/dev test' (it installs what third_party/debian.lock names) or move the pin in third_party/debian.lock"

def _parse_lock(rctx):
    """Returns (packages, tools): name -> version, name -> struct(path, version)."""
    packages = {}
    tools = {}
    for number, line in enumerate(rctx.read(rctx.path(Label(_LOCK))).splitlines()):
        words = [w for w in line.split("#")[0].replace("\t", " ").split(" ") if w]
        if not words:
            continue
        if words[0] == "package" and len(words) == 3:
            packages[words[1]] = words[2]
        elif words[0] == "tool" and len(words) == 4:
            tools[words[1]] = struct(path = words[2], version = words[3])
        else:
            fail("third_party/debian.lock:%d: expected `package NAME VERSION` or `tool NAME PATH VERSION`, got %r" % (number + 1, line))
    return packages, tools

def _check_lock(rctx, packages, tools):
    """Fails the fetch unless packages and tools match third_party/debian.lock."""
    args = []
    for package in packages:
        args += ["package", package]
    for tool in tools:
        args += ["tool", tool]
    if not args:
        return
    result = rctx.execute(["bash", rctx.path(rctx.attr._check), rctx.path(rctx.attr._lock)] + args)
    if result.return_code != 0:
        fail("\n" + result.stderr + result.stdout)

def _pkg_config_libs(rctx, modules):
    if not modules:
        return []
    result = rctx.execute(["pkg-config", "--libs"] + modules)
    if result.return_code != 0:
        fail("pkg-config --libs %s failed: %s" % (" ".join(modules), result.stderr))
    return [w for w in result.stdout.strip().replace("\n", " ").split(" ") if w]

def _write_tool_wrapper(rctx, name, tool):
    # The wrapper runs the pinned binary by absolute path (never from PATH) and,
    # for protoc, checks its version again at every use: a package upgraded after
    # this repository was fetched still fails the build instead of generating
    # code with another compiler.
    check = ""
    if name == "protoc":
        check = """found="$({path} --version)"
if [ "$found" != "libprotoc {version}" ]; then
  echo "berth: {path} is '$found', but third_party/debian.lock pins protoc at {version}: {fix}" >&2
  exit 1
fi
""".format(path = tool.path, version = tool.version, fix = _FIX)
    rctx.file(
        "bin/%s.sh" % name,
        "#!/bin/sh\n# Generated from third_party/debian.lock by third_party/debian.bzl.\n%sexec %s \"$@\"\n" % (check, tool.path),
        executable = True,
    )

def _debian_library_impl(rctx):
    _check_lock(rctx, rctx.attr.packages, rctx.attr.tools)
    _, tools = _parse_lock(rctx)
    for name in rctx.attr.tools:
        _write_tool_wrapper(rctx, name, tools[name])
    substitutions = {}
    for placeholder, modules in rctx.attr.pkg_config.items():
        substitutions["%{" + placeholder + "}"] = repr(_pkg_config_libs(rctx, modules))
    for directory, pattern in rctx.attr.include_files.items():
        for path in rctx.path(directory).readdir():
            if path.basename.endswith(pattern):
                if not directory.startswith("/usr/include/"):
                    fail("include_files: %s is not under /usr/include" % directory)
                rctx.symlink(path, "include/%s/%s" % (directory[len("/usr/include/"):], path.basename))
    rctx.template("BUILD.bazel", rctx.attr.build_file_template, substitutions, executable = False)
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)

debian_library = repository_rule(
    implementation = _debian_library_impl,
    doc = "A library or tool from Debian packages, checked against third_party/debian.lock.",
    attrs = {
        "packages": attr.string_list(doc = "Debian packages this repository relies on."),
        "tools": attr.string_list(doc = "Tools from debian.lock to wrap as bin/NAME.sh."),
        "pkg_config": attr.string_list_dict(doc = "Template placeholder -> pkg-config modules whose --libs replace it."),
        "include_files": attr.string_dict(doc = "Absolute directory under /usr/include -> file suffix to link under include/."),
        "build_file_template": attr.label(mandatory = True, allow_single_file = True),
        "_lock": attr.label(default = _LOCK, allow_single_file = True),
        "_check": attr.label(default = "//third_party:check_debian_lock.sh", allow_single_file = True),
    },
    local = True,
)

def _files_repository_impl(rctx):
    for label, path in rctx.attr.files.items():
        rctx.symlink(rctx.path(label), path)
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)

files_repository = repository_rule(
    implementation = _files_repository_impl,
    doc = "A repository made of files kept in this tree (label -> path in the repository).",
    attrs = {"files": attr.label_keyed_string_dict(allow_files = True)},
)
