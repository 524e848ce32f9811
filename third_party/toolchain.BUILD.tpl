# @debian_toolchain: fetched only to check the build's own Debian packages
# (Bazel, g++, pkg-config, Python) against third_party/debian.lock.
package(default_visibility = ["//visibility:public"])

filegroup(
    name = "checked",
    srcs = [],
)
