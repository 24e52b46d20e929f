#!/usr/bin/env bash
# attnmt entry point. Every subcommand sets up what it needs first, so each works on a fresh machine.
#   ./launch.sh setup              create .venv, install attnmt and its test tools, the Bible modules, chromium
#   ./launch.sh test [ARGS]        lint and format check (ruff), then the test suite (extra ARGS go to pytest, e.g. -m 'not slow' for the quick loop; the 30 slowest tests listed at the end)
#   ./launch.sh main [FLAGS]       the default ablation on the Bible corpus: table, length plot, heatmaps
#   ./launch.sh train [FLAGS]      one training run       (experiments/train.py)
#   ./launch.sh sweep [FLAGS]      an ablation sweep      (experiments/sweep.py)
#   ./launch.sh analyze [FLAGS]    analyse checkpoints    (experiments/analyze.py)
#   ./launch.sh translate [FLAGS]  translate with a checkpoint (experiments/translate.py)
#   ./launch.sh bench [FLAGS]      the speed benchmark    (benchmarks/bench.py)
#   ./launch.sh ab [FLAGS]         paired A/B of the training step, with a control (tools/ab_step.py)
#   ./launch.sh profile [FLAGS]    the training step by part against its FLOPs (tools/profile_step.py)
#   ./launch.sh wheelhouse DIR     wheels and corpus files for an offline host (tools/wheelhouse.py); there:
#                                  ATTNMT_WHEELHOUSE=DIR ./launch.sh main   (no network used)
set -Eeuo pipefail
trap 'echo "launch.sh: line $LINENO failed (status $?); nothing after it ran" >&2' ERR
cd "$(dirname "$0")"
ROOT=$(pwd)
VENV=${ATTNMT_VENV:-$ROOT/.venv}
PY=$VENV/bin/python

die() { echo "launch.sh: $*" >&2; exit 1; }

# Debian packages: the two SWORD modules the embedded corpus is read from (see README, Data), and
# tcmalloc, which Python commands run with (see attnmt/training/host_memory.py). tcmalloc is optional: without
# it Python runs with the system malloc, slower. The set-up of `setup` and `test` also
# installs chromium and its WebDriver, which tests/analysis/test_html_report.py drives to check report.html;
# without them that test skips, unless launch.sh could install them (root or sudo): then it must run.
SWORD_PACKAGES="sword-text-web sword-text-sparv"
TCMALLOC_PACKAGE=libtcmalloc-minimal4
BROWSER_PACKAGES="chromium chromium-driver"

have_sword_modules() {
  local sword=${SWORD_PATH:-/usr/share/sword}
  { [ -d "$sword/modules/texts/ztext/engweb2015eb" ] || [ -d "$sword/modules/texts/ztext/engWEB2015eb" ]; } \
    && ls "$sword"/modules/texts/ztext/ | grep -i sparv >/dev/null   # not grep -q: see tcmalloc_library
}

# The reader of a pipe must read to the end: one that exits at its first match (awk's exit, grep -q)
# can kill the writer with SIGPIPE, and under pipefail the pipeline then fails (141) and set -e stops
# launch.sh without a word.
tcmalloc_library() {
  { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | awk '/libtcmalloc_minimal\.so\.4 / && !found++ {print $NF}'
}

have_browser() {
  command -v chromium >/dev/null && command -v chromedriver >/dev/null
}

# $1 = browser: also chromium and chromium-driver (the set-up of `setup` and `test`). Sets
# ATTNMT_REQUIRE_BROWSER=1 when the browser is there or launch.sh can install it (root or sudo).
install_debian_packages() {
  local need_sword=0 need_tcmalloc=0 need_browser=0 sudo=""
  have_sword_modules || need_sword=1
  [ -n "$(tcmalloc_library)" ] || ! tcmalloc_wanted || need_tcmalloc=1
  [ "${1:-}" != browser ] || have_browser || need_browser=1
  [ "${1:-}" != browser ] || [ $need_browser = 1 ] || export ATTNMT_REQUIRE_BROWSER=1
  [ $need_sword = 1 ] || [ $need_tcmalloc = 1 ] || [ $need_browser = 1 ] || return 0
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
      [ $need_sword = 0 ] || echo "launch.sh: the Bible corpus needs the SWORD modules; run: sudo apt-get update && sudo apt-get install -y $SWORD_PACKAGES" >&2
      [ $need_tcmalloc = 0 ] || echo "launch.sh: running with the system malloc (slower); for tcmalloc run: sudo apt-get install -y $TCMALLOC_PACKAGE" >&2
      [ $need_browser = 0 ] || echo "launch.sh: the browser test of report.html will skip; to run it: sudo apt-get install -y $BROWSER_PACKAGES" >&2
      return 0
    fi
  fi
  [ $need_browser = 0 ] || export ATTNMT_REQUIRE_BROWSER=1
  echo "launch.sh: installing Debian packages$([ $need_sword = 1 ] && echo " $SWORD_PACKAGES")$([ $need_tcmalloc = 1 ] && echo " $TCMALLOC_PACKAGE")$([ $need_browser = 1 ] && echo " $BROWSER_PACKAGES")" >&2
  if ! $sudo apt-get update -qq >/dev/null; then
    [ $need_sword = 0 ] || die "apt-get update failed; run: sudo apt-get update && sudo apt-get install -y $SWORD_PACKAGES $TCMALLOC_PACKAGE"
    [ $need_browser = 0 ] || die "apt-get update failed; run: sudo apt-get update && sudo apt-get install -y $BROWSER_PACKAGES"
    echo "launch.sh: apt-get update failed; running with the system malloc (slower)" >&2   # optional
    return 0
  fi
  if [ $need_sword = 1 ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $SWORD_PACKAGES >/dev/null \
      || die "could not install the SWORD modules; run: sudo apt-get install -y $SWORD_PACKAGES"
  fi
  if [ $need_tcmalloc = 1 ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $TCMALLOC_PACKAGE >/dev/null \
      || echo "launch.sh: could not install $TCMALLOC_PACKAGE; running with the system malloc (slower)" >&2
  fi
  if [ $need_browser = 1 ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $BROWSER_PACKAGES >/dev/null \
      || die "could not install $BROWSER_PACKAGES, which the browser test of report.html needs; run: sudo apt-get install -y $BROWSER_PACKAGES"
  fi
}

# Python runs with tcmalloc when it is installed (ATTNMT_TCMALLOC=0: the system malloc). XLA frees and
# reallocates its temporary buffers at every step; tcmalloc reuses them where glibc maps fresh pages.
tcmalloc_wanted() {  # ATTNMT_TCMALLOC: 1/true/yes/on (the default) or 0/false/no/off; anything else is refused
  case "$(printf '%s' "${ATTNMT_TCMALLOC:-1}" | tr '[:upper:]' '[:lower:]')" in
    1 | true | yes | on) return 0 ;;
    0 | false | no | off) return 1 ;;
    *) die "ATTNMT_TCMALLOC=$ATTNMT_TCMALLOC: give 1 (tcmalloc, the default) or 0 (the system malloc)" ;;
  esac
}

use_tcmalloc() {
  local lib entry entries kept=()
  if ! tcmalloc_wanted; then  # off: out of an LD_PRELOAD inherited from a shell that had it, too
    IFS=: read -ra entries <<< "${LD_PRELOAD:-}"
    for entry in "${entries[@]}"; do [[ $entry == *libtcmalloc* ]] || kept+=("$entry"); done
    LD_PRELOAD=$(IFS=:; echo "${kept[*]}")
    if [ -n "$LD_PRELOAD" ]; then export LD_PRELOAD; else unset LD_PRELOAD; fi
    return 0
  fi
  lib=$(tcmalloc_library)
  [ -n "$lib" ] || return 0
  case ":${LD_PRELOAD:-}:" in *":$lib:"*) return 0 ;; esac
  export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
  export TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD=${TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD:-1099511627776}
}

# Offline set-up (ATTNMT_WHEELHOUSE=DIR, a folder made by `./launch.sh wheelhouse DIR` on a machine with
# network): the environment sees the host Python's own packages (a GPU image's jax stays), pip installs the
# rest from DIR/wheels only (--no-index, no pip configuration), apt-get is never run, and the corpus comes
# from DIR/sword when the host has no SWORD modules. $1 = browser: the test tools too (a --dev wheelhouse).
setup_offline() {
  local house=$ATTNMT_WHEELHOUSE extra="" stamp=$VENV/.attnmt-installed sum log missing
  [ -d "$house/wheels" ] && [ -f "$house/attnmt-wheelhouse.json" ] \
    || die "ATTNMT_WHEELHOUSE=$house is not a wheelhouse (no wheels/ and attnmt-wheelhouse.json); make one on a machine with network: ./launch.sh wheelhouse $house"
  if [ "${cmd:-}" = test ]; then
    grep -q '"dev": true' "$house/attnmt-wheelhouse.json" \
      || die "the wheelhouse $house has no test tools; make it with: ./launch.sh wheelhouse $house --dev"
    extra="[dev]"
  fi
  if [ ! -x "$PY" ]; then
    # A host Python without ensurepip (some images) still makes one: pip then comes from the host's packages.
    python3 -m venv --system-site-packages "$VENV" 2>/dev/null || python3 -m venv --system-site-packages --without-pip "$VENV" \
      || die "could not create $VENV; install the venv module (apt-get install python3-venv)"
    # A host Python that is itself a virtual environment (a GPU image's /opt/.../.venv) keeps its packages
    # there, which --system-site-packages does not see: a .pth file adds its site directory.
    python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' \
      && python3 -c 'import sysconfig; print("import site; site.addsitedir(%r)" % sysconfig.get_paths()["purelib"])' \
        > "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/attnmt_host_python.pth"
  fi
  sum="$(sha256sum pyproject.toml | cut -d' ' -f1) $house$extra"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
    log=$(mktemp)
    if ! PIP_CONFIG_FILE=/dev/null "$PY" -m pip install -q --no-index --find-links "$house/wheels" "attnmt$extra" >"$log" 2>&1; then
      missing=$(sed -n 's/.*No matching distribution found for \([^ ]*\).*/\1/p' "$log" | head -n 1)
      [ -z "$missing" ] || { rm -f "$log"; die "the wheelhouse $house has no wheel for $missing, and this Python ($("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')) does not have it; on a machine with network run: ./launch.sh wheelhouse $house --python-version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])') (without $missing in --skip)"; }
      cat "$log" >&2; rm -f "$log"
      die "offline install from $house failed (above); nothing was fetched from the network"
    fi
    rm -f "$log"
    echo "$sum" > "$stamp"
  fi
  if ! have_sword_modules && [ -d "$house/sword/mods.d" ]; then
    export SWORD_PATH=$house/sword
  fi
  use_tcmalloc
}

# $1 = browser: the Debian packages include chromium (install_debian_packages).
setup() {
  command -v python3 >/dev/null || die "python3 not found; install Python 3.11 or newer"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "python3 is $(python3 -c 'import sys; print(sys.version.split()[0])'); attnmt needs 3.11 or newer (current jax, jaxlib and optax releases do): install it and put it first on PATH"
  if [ -n "${ATTNMT_WHEELHOUSE:-}" ]; then
    setup_offline "${1:-}"
    return
  fi
  if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV" || die "could not create $VENV; install the venv module (apt-get install python3-venv)"
  fi
  # Reinstall only when pyproject.toml changed since the last set-up. The test tools ([dev]) only for `setup` and
  # `test`: without them a fresh machine's first `main` installs in 30 s instead of 39; a set-up with them serves
  # every command.
  local stamp=$VENV/.attnmt-installed sum extra=""
  [ "${1:-}" != browser ] || extra="[dev]"
  sum=$(sha256sum pyproject.toml | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || { [ "$(cat "$stamp")" != "$sum$extra" ] && [ "$(cat "$stamp")" != "$sum[dev]" ]; }; then
    "$PY" -m pip install -q --upgrade pip >/dev/null
    "$PY" -m pip install -q -e ".$extra" || die "pip install failed (see above)"
    echo "$sum$extra" > "$stamp"
  fi
  install_debian_packages "${1:-}"
  use_tcmalloc
}

cmd=${1:-help}; shift || true
case "$cmd" in
  setup) setup browser ;;
  test)
    setup browser
    export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
    # One style, checked first: the linter and the formatter (configured in pyproject.toml).
    "$PY" -m ruff check --quiet . || die "ruff check found problems (above); fix them, or run: $PY -m ruff check --fix ."
    "$PY" -m ruff format --check --quiet . || die "files need formatting (above); run: $PY -m ruff format ."
    exec "$PY" -m pytest -n "${ATTNMT_TEST_WORKERS:-auto}" --dist loadgroup -q --durations=30 "$@" ;;
  train|sweep|analyze|translate)
    setup
    exec "$PY" -m "experiments.$cmd" "$@" ;;
  main)
    setup
    exec "$PY" -m experiments.sweep --config=experiments/configs/main_ablation.py --workdir=runs/main "$@" ;;
  bench)
    setup
    exec "$PY" -m benchmarks.bench "$@" ;;
  ab)
    setup
    exec "$PY" -m tools.ab_step "$@" ;;
  profile)
    setup
    exec "$PY" -m tools.profile_step "$@" ;;
  wheelhouse)
    [ -z "${ATTNMT_WHEELHOUSE:-}" ] || die "wheelhouse makes a folder on a machine with network; unset ATTNMT_WHEELHOUSE"
    setup
    exec "$PY" -m tools.wheelhouse "$@" ;;
  help|-h|--help) sed -n '2,14p' "$0" ;;
  *) die "unknown subcommand '$cmd'; valid: setup, test, main, train, sweep, analyze, translate, bench, ab, profile, wheelhouse, help" ;;
esac
