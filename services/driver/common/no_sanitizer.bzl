"""Copts of what the static berth-task-init links."""

# Never instrumented, even under --config=asan/tsan: the init must stay a
# small static binary, and a sanitizer runtime's exit-time work (LeakSanitizer
# stops the world with a traced clone) cannot run inside a task's pid
# namespace. What the init shares with the drivers (:init_spec) is tested in
# its own tests.
NO_SANITIZER = ["-fno-sanitize=all"]

# NO_SANITIZER, except under `--config=fuzz` (tools/fuzz): a library the init
# shares with the drivers is then instrumented like the fuzz target that
# decodes with it (the static init is never built in that configuration).
NO_SANITIZER_UNLESS_FUZZING = select({
    "//tools/fuzz:fuzzing": [],
    "//conditions:default": NO_SANITIZER,
})
