"""cc_grpc_library: C++ gRPC stubs from a proto_library, with the pinned plugin.

Bazel 4 has no native rule for gRPC stubs. This one runs the pinned protoc
(@com_google_protobuf//:protoc) with the pinned grpc_cpp_plugin
(@com_github_grpc_grpc//:grpc_cpp_plugin), both by label, over the direct
sources of one proto_library, and wraps the output in a cc_library that depends
on the matching cc_proto_library.
"""

def import_path(src, proto_info):
    """The path protoc knows a source by ("berth/driver/v1/driver.proto")."""
    root = proto_info.proto_source_root
    if root and root != "." and src.path.startswith(root + "/"):
        return src.path[len(root) + 1:]
    if src.short_path.startswith("../"):  # a file of an external repository
        return src.short_path.split("/", 2)[2]
    return src.short_path

def protoc_include_args(proto_info):
    return ["-I" + path for path in proto_info.transitive_proto_path.to_list()] + ["-I."]

def _grpc_cc_sources_impl(ctx):
    proto_info = ctx.attr.proto[ProtoInfo]
    out_root = ctx.label.name
    headers = []
    sources = []
    imports = []
    for src in proto_info.direct_sources:
        path = import_path(src, proto_info)
        imports.append(path)
        stem = path[:-len(".proto")]
        headers.append(ctx.actions.declare_file("%s/%s.grpc.pb.h" % (out_root, stem)))
        sources.append(ctx.actions.declare_file("%s/%s.grpc.pb.cc" % (out_root, stem)))
    outputs = headers + sources
    out_dir = "%s/%s/%s" % (ctx.bin_dir.path, ctx.label.package, out_root)
    args = ctx.actions.args()
    args.add("--plugin=protoc-gen-grpc=" + ctx.executable._plugin.path)
    args.add("--grpc_out=" + out_dir)
    args.add_all(protoc_include_args(proto_info))
    args.add_all(imports)
    ctx.actions.run(
        executable = ctx.executable._protoc,
        arguments = [args],
        inputs = proto_info.transitive_sources,
        tools = [ctx.executable._plugin],
        outputs = outputs,
        mnemonic = "GrpcCppStubs",
        progress_message = "Generating C++ gRPC stubs for %s" % ctx.attr.proto.label,
    )
    return [
        DefaultInfo(files = depset(outputs)),
        OutputGroupInfo(headers = depset(headers), sources = depset(sources)),
    ]

_grpc_cc_sources = rule(
    implementation = _grpc_cc_sources_impl,
    attrs = {
        "proto": attr.label(mandatory = True, providers = [ProtoInfo]),
        "_protoc": attr.label(
            default = "@com_google_protobuf//:protoc",
            executable = True,
            cfg = "host",
        ),
        "_plugin": attr.label(
            default = "@com_github_grpc_grpc//:grpc_cpp_plugin",
            executable = True,
            cfg = "host",
        ),
    },
)

def cc_grpc_library(name, proto, cc_proto, visibility = None, **kwargs):
    """C++ gRPC stubs for `proto`, linked against its `cc_proto` library.

    Include them as "<import path without .proto>.grpc.pb.h".
    """
    generated = name + "_gen"
    _grpc_cc_sources(name = generated, proto = proto, visibility = ["//visibility:private"])
    for group in ["headers", "sources"]:
        native.filegroup(
            name = "%s_%s" % (name, group),
            srcs = [":" + generated],
            output_group = group,
            visibility = ["//visibility:private"],
        )
    native.cc_library(
        name = name,
        srcs = [":%s_sources" % name],
        hdrs = [":%s_headers" % name],
        includes = [generated],
        deps = [
            cc_proto,
            "@com_github_grpc_grpc//:grpc++",
        ],
        visibility = visibility,
        **kwargs
    )
