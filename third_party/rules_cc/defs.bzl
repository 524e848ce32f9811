"""Stand-in for @rules_cc//cc:defs.bzl on Bazel 4.2.3.

Bazel's own tools/cpp/BUILD loads @rules_cc, which Bazel would download;
Debian's bazel-rules-cc is too new for 4.2.3. These names forward to the
native rules, which is all rules_cc did for this Bazel version.
"""

cc_binary = native.cc_binary
cc_import = native.cc_import
cc_library = native.cc_library
cc_proto_library = native.cc_proto_library
cc_test = native.cc_test
cc_toolchain = native.cc_toolchain
cc_toolchain_suite = native.cc_toolchain_suite
fdo_prefetch_hints = native.fdo_prefetch_hints
fdo_profile = native.fdo_profile
objc_import = native.objc_import
objc_library = native.objc_library
