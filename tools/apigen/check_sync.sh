#!/usr/bin/env bash
# Compares freshly generated API code with what is checked in.
#
#   check_sync.sh GENERATED_DIR ROOT
#
# GENERATED_DIR is generate.sh's output (cpp/, python/, berth.txtpb); ROOT is a
# tree holding the checked-in api/gen/cpp, api/gen/python and api/berth.txtpb.
# Prints one line per stale, missing or extra file and the command that fixes
# them, and exits 1 if there is any.
set -u
generated=$1
root=$2
problems=()

compare() {  # compare GENERATED_FILE CHECKED_IN_PATH (relative to ROOT)
  if [[ ! -e $root/$2 ]]; then
    problems+=("missing: $2")
  elif ! cmp -s "$1" "$root/$2"; then
    problems+=("stale:   $2")
  fi
}

for kind in cpp python; do
  while IFS= read -r -d '' file; do
    compare "$generated/$kind/$file" "api/gen/$kind/$file"
  done < <(cd "$generated/$kind" && find -L . -type f -printf '%P\0' | sort -z)
  if [[ -d $root/api/gen/$kind ]]; then
    while IFS= read -r -d '' file; do
      [[ -e $generated/$kind/$file ]] || problems+=("extra:   api/gen/$kind/$file (no .proto generates it)")
    done < <(cd "$root/api/gen/$kind" && find -L . -type f -printf '%P\0' | sort -z)
  fi
done
compare "$generated/berth.txtpb" "api/berth.txtpb"

if ((${#problems[@]})); then
  echo "The checked-in API code is out of date with api/berth/**/*.proto:"
  printf '  %s\n' "${problems[@]}"
  echo "Fix: bazel run //api:update_generated   (then commit api/gen and api/berth.txtpb)"
  exit 1
fi
echo "api/gen and api/berth.txtpb match the .proto files ($(cd "$generated" && find -L cpp python -type f | wc -l) generated files)."
