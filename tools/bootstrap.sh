#!/usr/bin/env bash
# Bootstrap the development environment: .venv with pinned ROS 2 Jazzy wheels, this package's
# generated interfaces (msg/, srv/) built with CMake into the venv, and the source checkout
# installed editable. Idempotent: each stage records a hash of its inputs in a stamp file in the
# venv and is skipped when nothing changed, so a warm run takes a few seconds.
#
# Usage: tools/bootstrap.sh            (from anywhere; `make setup` calls it)
# Environment: WMR_VENV (default <repo>/.venv), WMR_PYTHON (default python3.11 or python3),
#              WMR_FORCE=1 to ignore the stamps, WMR_ROS_EXTRA=DIR the ros-extra bundle
#              (default ../shared/ros-extra; "none" to leave launch/ros2 CLI out).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${WMR_VENV:-$ROOT/.venv}"
BUILD="$ROOT/build"
TOOLS="$ROOT/tools"
FORCE="${WMR_FORCE:-0}"

log() { printf 'bootstrap: %s\n' "$*" >&2; }
die() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

# Hash of files and strings given on the command line (missing files hash as their name).
inputs_hash() {
    local item
    for item in "$@"; do
        if [[ -f "$item" ]]; then
            printf '%s\n' "${item#"$ROOT"/}"
            cat "$item"
        else
            printf '%s\n' "$item"
        fi
    done | sha256sum | cut -d' ' -f1
}

stamp_ok() {  # stamp_ok NAME HASH
    [[ "$FORCE" != 1 && -f "$VENV/.stamp-$1" && "$(cat "$VENV/.stamp-$1")" == "$2" ]]
}
stamp_write() { printf '%s\n' "$2" >"$VENV/.stamp-$1"; }

# --- 1. virtualenv -------------------------------------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
    PY="${WMR_PYTHON:-}"
    if [[ -z "$PY" ]]; then
        if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
    fi
    log "creating $VENV with $PY"
    "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
PYVER="$("$VPY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# The ROS 2 wheels are built for CPython 3.11 only.
[[ "$PYVER" == 3.11 ]] || die "$VENV has Python $PYVER; the ROS 2 wheels need 3.11 (set WMR_PYTHON)"
PIP=("$VPY" -m pip --disable-pip-version-check --no-input)
# pip warns once per package about unreachable file:// indexes configured on some machines.
pip_quiet() { "${PIP[@]}" "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

# --- 2. pinned Python packages (build tools, ROS 2 wheels, core + test deps) ----------------
h_deps="$(inputs_hash "$TOOLS/requirements-build.txt" "$TOOLS/requirements-ros.txt" \
    "$TOOLS/requirements-dev.txt" "$TOOLS/requirements-cluster.txt" "$TOOLS/constraints.txt" \
    "$VENV")"
if ! stamp_ok deps "$h_deps" || [[ ! -d "$VENV/share/rosidl_default_generators" ]]; then
    log "installing pinned packages (ROS 2 Jazzy wheels + core deps)"
    pip_quiet install -q -c "$TOOLS/constraints.txt" -r "$TOOLS/requirements-build.txt"
    pip_quiet install -q -c "$TOOLS/constraints.txt" \
        -r "$TOOLS/requirements-ros.txt" -r "$TOOLS/requirements-dev.txt"
    # Ray (the optional "cluster" extra) so the runner's --workers tests run: wheels only
    pip_quiet install -q --only-binary=:all: -c "$TOOLS/constraints.txt" \
        -r "$TOOLS/requirements-cluster.txt"
    rm -f "$VENV/.stamp-cmake-paths"
    stamp_write deps "$h_deps"
fi

# --- 3. point the wheels' CMake exports at this interpreter ---------------------------------
# The wheels were built in a manylinux image; their CMake export files name that image's
# Python and NumPy include directories, which do not exist here ("includes non-existent path").
h_paths="$(inputs_hash "$h_deps" "$("$VPY" -c 'import sysconfig, numpy
print(sysconfig.get_paths()["include"], numpy.get_include())')")"
if ! stamp_ok cmake-paths "$h_paths"; then
    log "rewriting /opt/python include paths in $VENV/share"
    "$VPY" - "$VENV/share" <<'PYEOF'
import pathlib
import sys
import sysconfig

import numpy

share = pathlib.Path(sys.argv[1])
replacements = {
    "/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include": numpy.get_include(),
    "/opt/python/cp311-cp311/include/python3.11": sysconfig.get_paths()["include"],
}
changed = 0
for path in share.rglob("*.cmake"):
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    new = text
    for old, repl in replacements.items():
        new = new.replace(old, repl)
    if new != text:
        path.write_text(new, encoding="utf-8", errors="surrogateescape")
        changed += 1
print(f"bootstrap: rewrote include paths in {changed} CMake files", file=sys.stderr)
PYEOF
    stamp_write cmake-paths "$h_paths"
fi

# --- 4. generated interfaces: CMake build + install into the venv ---------------------------
SITE="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
GEN_MARK="$SITE/wmr_model/msg/_calibration_state.py"
# launch/, config/, urdf/ and scripts/ are installed into share/ and lib/wmr_model by the same
# CMake install, so an edit to any of them must redo it (the build dir makes that incremental).
mapfile -t SHARE_FILES < <(cd "$ROOT" && find launch config urdf scripts -type f \
    ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort)
h_cmake="$(inputs_hash "$h_paths" "$ROOT/CMakeLists.txt" "$ROOT/package.xml" \
    "$ROOT"/msg/*.msg "$ROOT"/srv/*.srv "${SHARE_FILES[@]/#/$ROOT/}")"
if ! stamp_ok interfaces "$h_cmake" || [[ ! -f "$GEN_MARK" ]]; then
    log "building msg/srv interfaces with CMake (build dir $BUILD)"
    # A build dir copied from another checkout or venv cannot be reused.
    if [[ -f "$BUILD/CMakeCache.txt" ]] && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$BUILD/CMakeCache.txt"; then
        rm -rf "$BUILD"
    fi
    if [[ -f "$BUILD/CMakeCache.txt" ]] && ! grep -qxF "CMAKE_INSTALL_PREFIX:PATH=$VENV" "$BUILD/CMakeCache.txt"; then
        rm -rf "$BUILD"
    fi
    mkdir -p "$BUILD"
    export AMENT_PREFIX_PATH="$VENV"
    cmake -S "$ROOT" -B "$BUILD" -Wno-dev --log-level=WARNING \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$VENV" \
        -DCMAKE_INSTALL_PREFIX="$VENV" \
        -DPython3_EXECUTABLE="$VPY" \
        -DBUILD_TESTING=OFF \
        -DWMR_INSTALL_PYTHON_SOURCES=OFF >"$BUILD/bootstrap-cmake.log" 2>&1 || { cat "$BUILD/bootstrap-cmake.log" >&2; die "cmake configure failed"; }
    cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" >>"$BUILD/bootstrap-cmake.log" 2>&1 \
        || { tail -n 80 "$BUILD/bootstrap-cmake.log" >&2; die "cmake build failed (full log: $BUILD/bootstrap-cmake.log)"; }
    # Files removed from the tree must not linger in the installed copy.
    rm -rf "$VENV/share/wmr_model/launch" "$VENV/share/wmr_model/config" \
        "$VENV/share/wmr_model/urdf" "$VENV/lib/wmr_model"
    cmake --install "$BUILD" >>"$BUILD/bootstrap-cmake.log" 2>&1 || { tail -n 40 "$BUILD/bootstrap-cmake.log" >&2; die "cmake install failed"; }
    # rosidl installs a generated wmr_model/__init__.py into site-packages. Removed, the
    # installed directory is only a portion that the source checkout's wmr_model/__init__.py
    # (pkgutil.extend_path) adds to its __path__: the checkout's modules win, msg/srv are found.
    rm -f "$SITE/wmr_model/__init__.py"
    rm -rf "$SITE/wmr_model/__pycache__"
    # ament_python_install_package also writes wmr_model-<version>-py3.11.egg-info. Left there,
    # pip takes it for an installed wmr_model distribution: `pip install -e .` then
    # "uninstalls" it, deleting the generated msg/srv with it.
    rm -rf "$SITE"/wmr_model-*.egg-info
    [[ -f "$GEN_MARK" ]] || die "interfaces built but $GEN_MARK is missing"
    stamp_write interfaces "$h_cmake"
fi

# --- 5. the source checkout, editable -------------------------------------------------------
# editable_mode=compat puts the checkout on sys.path through a .pth file (a plain path entry):
# with the default meta-path finder, the installed interface directory above would be found
# first as a namespace package and hide the checkout.
h_edit="$(inputs_hash "$h_deps" "$ROOT/setup.py" "$ROOT/pyproject.toml" "$ROOT")"
if ! stamp_ok editable "$h_edit" || ! compgen -G "$SITE/__editable__.wmr_model-*.pth" >/dev/null; then
    log "installing the source checkout (editable)"
    pip_quiet install -q --no-build-isolation -c "$TOOLS/constraints.txt" \
        --config-settings editable_mode=compat -e "$ROOT[test]"
    [[ -f "$GEN_MARK" ]] || die "the editable install removed $GEN_MARK"
    stamp_write editable "$h_edit"
fi

# --- 6. ROS 2 tooling PyPI lacks: launch, launch_testing, ros2 CLI, tf2_msgs (optional) -----
# From ../shared/ros-extra (or $WMR_ROS_EXTRA; WMR_ROS_EXTRA=none skips it). Without it the
# core, the nodes and the CLI work; the launch tests skip and say why. install.sh keeps its own
# stamps (~0.5 s when nothing changed).
EXTRA="${WMR_ROS_EXTRA:-$ROOT/../shared/ros-extra}"
if [[ "$EXTRA" != none && -x "$EXTRA/install.sh" ]]; then
    bash "$EXTRA/install.sh" "$VENV"
elif [[ "$EXTRA" != none ]]; then
    log "no ros-extra bundle at $EXTRA: ros2 launch/launch_testing not installed (launch tests will skip)"
fi

log "ready: $VENV (ROS 2 Jazzy, interfaces built; activate with: source $VENV/bin/activate)"
