#!/usr/bin/env bash
# heloom's entry point.
#   ./run.sh demo            the main job on embedded defaults
#   ./run.sh test            every check and test (what CI runs)
#   ./run.sh bench ntt ...   a benchmark (see `./run.sh bench --help`)
#   ./run.sh info            the CPU and the backends heloom will use
# Installs what is missing (a Rust toolchain >= 1.89 with rustfmt and clippy) before it runs.
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

ensure_components() {
  if command -v rustup >/dev/null 2>&1; then
    cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
    cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
  fi
}

cmd=${1:-demo}
shift || true
case "$cmd" in
  demo | info | bench)
    ensure_rust
    cargo build --release -q -p heloom-cli
    exec ./target/release/heloom "$cmd" "$@"
    ;;
  test)
    ensure_rust
    ensure_components
    echo "== cargo fmt --check"
    cargo fmt --all -- --check
    echo "== cargo clippy -D warnings"
    cargo clippy --workspace --all-targets --release -q -- -D warnings
    echo "== cargo test"
    cargo test --workspace --release
    echo "== heloom demo (smoke)"
    cargo run --release -q -p heloom-cli -- demo >/dev/null
    echo "all checks passed"
    ;;
  *)
    echo "usage: ./run.sh demo | test | info | bench ntt [--json] [--quick]" >&2
    exit 2
    ;;
esac
