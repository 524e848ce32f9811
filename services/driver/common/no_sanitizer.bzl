"""Copts of what the static berth-task-init links."""

# Never instrumented, even under --config=asan/tsan: the init must stay a
# small static binary, and a sanitizer runtime's exit-time work (LeakSanitizer
# stops the world with a traced clone) cannot run inside a task's pid
# namespace. What the init shares with the drivers (:init_spec) is tested in
# its own tests.
NO_SANITIZER = ["-fno-sanitize=all"]
