"""berth_fuzz_target: a libFuzzer target and the test replaying its seeds.

    load("//tools/fuzz:fuzz.bzl", "berth_fuzz_target")

    berth_fuzz_target(
        name = "init_spec_fuzzer",
        srcs = ["init_spec_fuzzer.cc"],
        deps = [":init_spec"],
        corpus = glob(["testdata/fuzz/init_spec/*"]),
    )

makes, in the calling package:

  <name>_corpus_test  a cc_test built like any other (g++, or whatever the
                      configuration says) that hands every seed of `corpus` to
                      LLVMFuzzerTestOneInput (tools/fuzz/replay_main.cc); it
                      fails if one crashes. Part of `bazel test //...`.
  <name>              the libFuzzer binary, tagged manual: built with
                      `bazel build --config=fuzz` (clang-14,
                      -fsanitize=fuzzer,address,undefined) and run by
                      `tools/dev fuzz <name> [SECONDS]`. Built without
                      --config=fuzz, it is the replay binary.
  <name>_corpus       a filegroup of the seeds; <name>_seeds.txt, next to
                      the binary, lists their paths (tools/dev fuzz copies
                      them into its working corpus).

srcs define `extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t)`
and no main. Every harness links //tools/fuzz:fuzz_util (Abseil and glog;
not to be listed in deps): it may include "tools/fuzz/fuzz_util.h" (AsText,
Require, QuietLogging). One that needs a temporary directory lists
//tools/fuzz:fuzz_files (fuzz_files.h). Every target is tagged
"fuzz_target": `tools/dev fuzz` lists them with
`bazel query 'attr(tags, fuzz_target, //...)'`.
"""

# What every harness shares (fuzz_util.h).
_FUZZ_UTIL = "//tools/fuzz:fuzz_util"

def berth_fuzz_target(name, srcs, deps = [], corpus = [], copts = [], tags = [], testonly = False, visibility = None, **kwargs):
    native.filegroup(
        name = name + "_corpus",
        srcs = corpus,
        testonly = testonly,
        visibility = visibility,
    )

    # The harness, compiled once for both binaries.
    native.cc_library(
        name = name + "_harness",
        srcs = srcs,
        deps = deps + [_FUZZ_UTIL],
        copts = copts,
        testonly = testonly,
        visibility = ["//visibility:private"],
        # LLVMFuzzerTestOneInput is referenced by libFuzzer's main or the
        # replay main, never by this library's users at link time.
        alwayslink = True,
        **kwargs
    )

    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        args = ["$(rootpaths :%s_corpus)" % name],
        data = [":" + name + "_corpus"],
        deps = [
            ":" + name + "_harness",
            "//tools/fuzz:replay_main",
        ],
        tags = tags + ["fuzz_corpus_test"],
    )

    # The seeds' paths (relative to the workspace), one a line, next to the
    # fuzz binary: what `tools/dev fuzz` copies into the working corpus.
    native.genrule(
        name = name + "_seed_list",
        srcs = corpus,
        outs = [name + "_seeds.txt"],
        cmd = "for f in $(SRCS); do echo \"$$f\"; done >$@",
        testonly = testonly,
        visibility = ["//visibility:private"],
    )

    native.cc_binary(
        name = name,
        data = [":" + name + "_seed_list"],
        deps = [":" + name + "_harness"] + select({
            "//tools/fuzz:fuzzing": [],
            "//conditions:default": ["//tools/fuzz:replay_main"],
        }),
        linkopts = select({
            "//tools/fuzz:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        testonly = testonly,
        tags = tags + ["manual", "fuzz_target"],
        visibility = visibility,
    )
