#!/usr/bin/env bash
# Generates the code berth checks in for consumers without Bazel.
#
#   generate.sh --protoc=P --grpc_cpp_plugin=G --grpc_python_plugin=Y --out=DIR \
#               -IPATH... IMPORT_PATH...
#
# Writes DIR/cpp, DIR/python and DIR/berth.txtpb (the API's FileDescriptorSet
# as text, source info stripped). Only the tools named on the command line are
# run: no protoc or plugin is looked up on PATH.
set -euo pipefail
protoc= grpc_cpp_plugin= grpc_python_plugin= out=
includes=()
files=()
for arg in "$@"; do
  case $arg in
    --protoc=*) protoc=${arg#*=} ;;
    --grpc_cpp_plugin=*) grpc_cpp_plugin=${arg#*=} ;;
    --grpc_python_plugin=*) grpc_python_plugin=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    -I*) includes+=("$arg") ;;
    *) files+=("$arg") ;;
  esac
done
for name in protoc grpc_cpp_plugin grpc_python_plugin out; do
  [[ -n ${!name} ]] || { echo "generate.sh: --$name is required" >&2; exit 2; }
done
((${#files[@]})) || { echo "generate.sh: no .proto files given" >&2; exit 2; }

# Plugins are given to protoc by absolute path: it runs them from its own cwd.
abs() { [[ $1 == /* ]] && echo "$1" || echo "$PWD/$1"; }
mkdir -p "$out/cpp" "$out/python"
"$protoc" "${includes[@]}" \
  --cpp_out="$out/cpp" \
  --plugin=protoc-gen-grpc="$(abs "$grpc_cpp_plugin")" --grpc_out="$out/cpp" \
  "${files[@]}"
"$protoc" "${includes[@]}" \
  --python_out="$out/python" \
  --plugin=protoc-gen-grpc_python="$(abs "$grpc_python_plugin")" --grpc_python_out="$out/python" \
  "${files[@]}"

descriptor_set=$(mktemp)
trap 'rm -f "$descriptor_set"' EXIT
"$protoc" "${includes[@]}" --descriptor_set_out="$descriptor_set" "${files[@]}"
{
  echo "# The whole berth API as a text FileDescriptorSet, source info stripped."
  echo "# Generated: bazel run //api:update_generated. Do not edit."
  "$protoc" "${includes[@]}" --decode=google.protobuf.FileDescriptorSet \
    google/protobuf/descriptor.proto <"$descriptor_set"
} >"$out/berth.txtpb"
