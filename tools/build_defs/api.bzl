"""berth_api_package: one macro for every proto directory of the API.

In api/berth/<concern>/v1/BUILD.bazel it emits, from the directory's .proto
files (imported as "berth/<concern>/v1/<file>.proto"):
  <concern>_proto     proto_library
  <concern>_proto_files  the .proto files themselves
  <concern>_cc_proto  cc_proto_library
  <concern>_cc_grpc   cc_grpc_library (C++ gRPC stubs)
"""

load("//tools/build_defs:cc_grpc_library.bzl", "cc_grpc_library")

_WELL_KNOWN = ["any", "duration", "empty", "field_mask", "struct", "timestamp", "wrappers"]

def api_proto_label(concern):
    """The proto_library of one API package: "stats" -> //api/berth/stats/v1:stats_proto."""
    return "//api/berth/%s/v1:%s_proto" % (concern, concern)

def berth_api_package(concern = None, api_deps = [], well_known = [], proto_deps = [], strip_import_prefix = "/api"):
    """Emits the proto, C++ proto and C++ gRPC targets of this directory.

    Args:
      concern: prefix of the target names; by default the directory above
        v1 ("driver" for api/berth/driver/v1).
      api_deps: other berth API packages imported, by concern ("stats").
      well_known: google/protobuf types imported, by file stem ("timestamp").
      proto_deps: any other proto_library labels imported.
      strip_import_prefix: the directory the import paths are relative to.
    """
    package = native.package_name()
    if concern == None:
        concern = package.split("/")[-2]
    for name in well_known:
        if name not in _WELL_KNOWN:
            fail("berth_api_package: unknown well-known type %r; expected one of %s" % (name, _WELL_KNOWN))
    native.proto_library(
        name = concern + "_proto",
        srcs = native.glob(["*.proto"]),
        strip_import_prefix = strip_import_prefix,
        deps = [api_proto_label(dep) for dep in api_deps] +
               ["@com_google_protobuf//:%s_proto" % name for name in well_known] +
               proto_deps,
        visibility = ["//visibility:public"],
    )
    native.filegroup(
        name = concern + "_proto_files",
        srcs = native.glob(["*.proto"]),
        visibility = ["//visibility:public"],
    )
    native.cc_proto_library(
        name = concern + "_cc_proto",
        deps = [":%s_proto" % concern],
        visibility = ["//visibility:public"],
    )
    cc_grpc_library(
        name = concern + "_cc_grpc",
        proto = ":%s_proto" % concern,
        cc_proto = ":%s_cc_proto" % concern,
        visibility = ["//visibility:public"],
    )
