"""api_codegen: the generated code berth checks in, made inside the build.

Runs tools/apigen/generate.sh with the pinned protoc and gRPC plugins (by
label) over the direct sources of the given proto_library targets, into one
directory: cpp/ (.pb.h/.pb.cc/.grpc.pb.h/.grpc.pb.cc), python/ (_pb2.py,
_pb2_grpc.py) and berth.txtpb (the text FileDescriptorSet of the whole API,
without source info). //api:generated_in_sync_test compares it with api/gen/
and api/berth.txtpb; //api:update_generated copies it there.
"""

load("//tools/build_defs:cc_grpc_library.bzl", "import_path", "protoc_include_args")

def _api_codegen_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    imports = []
    include_args = []
    transitive_sources = []
    for proto in ctx.attr.protos:
        info = proto[ProtoInfo]
        imports += [import_path(src, info) for src in info.direct_sources]
        transitive_sources.append(info.transitive_sources)
        for arg in protoc_include_args(info):
            if arg not in include_args:
                include_args.append(arg)
    descriptor = ctx.attr._descriptor_proto[ProtoInfo]
    transitive_sources.append(descriptor.transitive_sources)
    for arg in protoc_include_args(descriptor):
        if arg not in include_args:
            include_args.append(arg)

    args = ctx.actions.args()
    args.add("--protoc=" + ctx.executable._protoc.path)
    args.add("--grpc_cpp_plugin=" + ctx.executable._grpc_cpp_plugin.path)
    args.add("--grpc_python_plugin=" + ctx.executable._grpc_python_plugin.path)
    args.add("--out=" + out.path)
    args.add_all(include_args)
    args.add_all(sorted(imports))
    ctx.actions.run(
        executable = ctx.executable._generate,
        arguments = [args],
        inputs = depset(transitive = transitive_sources),
        tools = [ctx.executable._protoc, ctx.executable._grpc_cpp_plugin, ctx.executable._grpc_python_plugin],
        outputs = [out],
        mnemonic = "ApiCodegen",
        progress_message = "Generating the checked-in API code",
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

api_codegen = rule(
    implementation = _api_codegen_impl,
    attrs = {
        "protos": attr.label_list(mandatory = True, providers = [ProtoInfo]),
        "_descriptor_proto": attr.label(default = "@com_google_protobuf//:descriptor_proto", providers = [ProtoInfo]),
        "_generate": attr.label(default = "//tools/apigen:generate", executable = True, cfg = "host"),
        "_protoc": attr.label(default = "@com_google_protobuf//:protoc", executable = True, cfg = "host"),
        "_grpc_cpp_plugin": attr.label(default = "@com_github_grpc_grpc//:grpc_cpp_plugin", executable = True, cfg = "host"),
        "_grpc_python_plugin": attr.label(default = "@com_github_grpc_grpc//:grpc_python_plugin", executable = True, cfg = "host"),
    },
)
