#!/usr/bin/env bash
# heloom's entry point.
#   ./run.sh demo            the main job on embedded defaults
#   ./run.sh test            every check and test (what CI runs)
#   ./run.sh bench ntt ...   a benchmark (see `./run.sh bench --help`)
#   ./run.sh info            the CPU and the backends heloom will use
#   ./run.sh schedule ...    schedule e^x job streams (see ./run.sh schedule --help)
#   ./run.sh profile ...     measure this machine's cost profile
#   ./run.sh offload ...     share AES / HE work among devices (see ./run.sh offload --help)
#   ./run.sh bench gpu ...   the CUDA backend against the CPU (needs an NVIDIA GPU; --emulator checks it anywhere)
#   ./run.sh mnist ...       CryptoNets on encrypted MNIST images (see ./run.sh mnist --help)
#   ./run.sh genome ...      private genome search: serve | query | demo (see ./run.sh genome --help)
#   ./run.sh python ...      run python (e.g. an example) with the heloom package installed
# Installs what is missing before it runs: a Rust toolchain >= 1.89 with rustfmt and clippy, a
# C++17 compiler (the GPU kernel emulator), and for the Python package a virtual environment in
# .venv with maturin, numpy, pytest, ruff, mypy (and TenSEAL when a benchmark asks for
# `--vs tenseal`); `test` also puts NVRTC (nvidia-cuda-nvrtc-cu12) there.
set -euo pipefail
cd "$(dirname "$0")"

MIN_RUST_MINOR=89

rust_ok() {
  command -v cargo >/dev/null 2>&1 || return 1
  local minor
  minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
  [ "${minor:-0}" -ge "$MIN_RUST_MINOR" ]
}

ensure_rust() {
  export PATH="$HOME/.cargo/bin:$PATH"
  ensure_cxx
  if rust_ok; then
    return
  fi
  echo "heloom: installing a Rust toolchain (>= 1.$MIN_RUST_MINOR needed)" >&2
  if command -v rustup >/dev/null 2>&1; then
    rustup toolchain install stable --profile minimal -c rustfmt,clippy && rustup default stable
  elif command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq cargo rustc rustfmt rust-clippy >/dev/null
  fi
  if ! rust_ok; then
    echo "heloom: needs Rust 1.$MIN_RUST_MINOR or newer (AVX-512 intrinsics); found: $(rustc --version 2>/dev/null || echo none)." >&2
    echo "Install it with rustup (https://rustup.rs) and run this again." >&2
    exit 1
  fi
}

# The GPU crate compiles its kernel emulator (the CUDA kernels built for the host) with C++17.
ensure_cxx() {
  if command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || command -v clang++ >/dev/null 2>&1; then
    return
  fi
  if command -v apt-get >/dev/null 2>&1; then
    echo "heloom: installing a C++ compiler (g++) for the GPU kernel emulator" >&2
    apt-get update -qq && apt-get install -y -qq g++ >/dev/null
  fi
  if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1; then
    echo "heloom: needs a C++17 compiler (g++ or clang++) to build; install one and run this again." >&2
    exit 1
  fi
}

ensure_components() {
  if command -v rustup >/dev/null 2>&1; then
    cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
    cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
  fi
}

PY_MIN_MINOR=10

ensure_python() {
  local py=${PYTHON:-python3}
  if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -c 'import sys, venv; sys.exit(sys.version_info < (3, '"$PY_MIN_MINOR"'))' 2>/dev/null; then
    if command -v apt-get >/dev/null 2>&1; then
      echo "heloom: installing Python 3 with venv" >&2
      apt-get update -qq && apt-get install -y -qq python3 python3-venv python3-dev >/dev/null
    fi
  fi
  if ! "$py" -c 'import sys, venv; sys.exit(sys.version_info < (3, '"$PY_MIN_MINOR"'))' 2>/dev/null; then
    echo "heloom: the Python package needs Python 3.$PY_MIN_MINOR+ with the venv module; found: $("$py" --version 2>/dev/null || echo none)." >&2
    exit 1
  fi
  if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check maturin numpy pytest ruff mypy
}

# NVRTC (CUDA's runtime compiler) from the PyPI wheel, so tests compile every GPU kernel for
# real GPU architectures even on a machine without a GPU; HELOOM_REQUIRE_NVRTC makes a missing
# or failing compiler an error instead of a skip.
ensure_nvrtc() {
  ensure_python
  local lib
  lib=$(ls .venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 2>/dev/null | head -1 || true)
  if [ -z "$lib" ]; then
    echo "heloom: installing NVRTC (nvidia-cuda-nvrtc-cu12) to compile-check the CUDA kernels" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check nvidia-cuda-nvrtc-cu12
    lib=$(ls .venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 | head -1)
  fi
  export HELOOM_NVRTC="$PWD/$lib"
  export HELOOM_REQUIRE_NVRTC=1
}

# Ray for `heloom serve --ray` (pip install heloom[ray]), so tests/python/test_ray.py runs a
# local multi-node cluster instead of skipping.
ensure_ray() {
  ensure_python
  if ! .venv/bin/python -c 'import ray' 2>/dev/null; then
    echo "heloom: installing Ray (ray[default]) for the heloom serve --ray tests" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check 'ray[default]>=2.9'
  fi
}

# Builds the heloom Python package (release, abi3) into .venv.
build_python() {
  ensure_python
  VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --release -q
}

cmd=${1:-demo}
shift || true
case "$cmd" in
  demo | info | bench | schedule | profile | offload | mnist | genome)
    ensure_rust
    cargo build --release -q -p heloom-cli
    if [ "$cmd" = bench ] && [[ " $* " == *" --vs "* ]]; then
      ensure_python
      .venv/bin/python -c 'import tenseal' 2>/dev/null || .venv/bin/python -m pip install -q tenseal
    fi
    exec ./target/release/heloom "$cmd" "$@"
    ;;
  python)
    ensure_rust
    build_python
    exec .venv/bin/python "$@"
    ;;
  test)
    ensure_rust
    ensure_components
    echo "== cargo fmt --check"
    cargo fmt --all -- --check
    echo "== cargo clippy -D warnings"
    cargo clippy --workspace --all-targets --release -q -- -D warnings
    echo "== cargo doc -D warnings (every public item documented, no broken links)"
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q
    echo "== cargo test (GPU kernels: bit-exact on the host emulator, compiled by NVRTC for sm_75..sm_90)"
    ensure_nvrtc
    cargo test --workspace --release
    echo "== Python package: build, ruff, pytest"
    build_python
    ensure_ray
    .venv/bin/ruff check python tests/python examples/python bench crates/heloom-apps/train
    .venv/bin/ruff format --check python tests/python examples/python bench crates/heloom-apps/train
    .venv/bin/python -m pytest tests/python -q
    echo "== Rust quickstart example"
    cargo run --release -q -p heloom-ckks --example quickstart >/dev/null
    echo "== heloom demo (smoke)"
    cargo run --release -q -p heloom-cli -- demo >/dev/null
    echo "all checks passed"
    ;;
  *)
    echo "usage: ./run.sh demo | test | info | bench ntt|ckks|gpu|matmul|cryptonets [--json] [--quick] | schedule ... | profile ... | offload ... | mnist ... | genome ... | python FILE" >&2
    exit 2
    ;;
esac
