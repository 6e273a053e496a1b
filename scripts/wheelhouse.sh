#!/usr/bin/env bash
# An offline wheel bundle for GPU nodes without a package index: avo's runtime dependencies as wheels for one Python
# version and platform, minus what a CUDA/PyTorch image already has, plus avo's own wheel, plus DIR/install.sh.
#
#   bash scripts/wheelhouse.sh [--python 3.12] [--arch x86_64|aarch64] [--platform TAG]... [--out .whl]
#                              [--skip LIST] [--extras LIST]
#   then, on the GPU node:  bash .whl/install.sh        (pip install --no-index --find-links ...)
#
# --python    target Python version (default 3.12); the ABI is CPython's for that version.
# --arch      CPU of the target (default x86_64): picks manylinux_2_17 ... manylinux_2_28 platform tags.
# --platform  exact platform tag(s) instead (repeat the option), e.g. --platform manylinux_2_34_x86_64.
# --out       the bundle folder (default .whl); its old *.whl files are replaced.
# --skip      comma-separated distributions left out because the target image has them; shell-style patterns
#             allowed (default: torch,triton,nvidia-*-cu*,nvidia-cuda-nvrtc,numpy,typing-extensions; a CUDA torch
#             brings its own NVRTC). Use --skip '' to bundle all.
# --extras    avo extras to include as well: cuda13 or cuda12 (CuPy and cuda-bindings for the target's CUDA major,
#             the CUDA its torch is built for). `cuda`, the old name of cuda12, is refused here: say which CUDA.
#
# Dependencies come as binary wheels only (pip download --only-binary=:all:), so a bundle for another Python or
# platform can be made on any machine. Dependencies of the bundle that were skipped are listed in install.sh,
# which checks they are present before installing. avo's own wheel sits in DIR/project/, so DIR/*.whl holds only
# the dependencies.
set -euo pipefail

PYTHON=${PYTHON:-python3}
TARGET_PY=3.12
ARCH=x86_64
PLATFORMS=()
OUT=.whl
SKIP="torch,triton,nvidia-*-cu*,nvidia-cuda-nvrtc,numpy,typing-extensions"
EXTRAS=""

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "wheelhouse: error: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --python) [ $# -ge 2 ] || die "--python needs a version, e.g. 3.12"; TARGET_PY=$2; shift 2 ;;
    --arch) [ $# -ge 2 ] || die "--arch needs x86_64 or aarch64"; ARCH=$2; shift 2 ;;
    --platform) [ $# -ge 2 ] || die "--platform needs a tag"; PLATFORMS+=("$2"); shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; OUT=$2; shift 2 ;;
    --skip) [ $# -ge 2 ] || die "--skip needs a list (or '')"; SKIP=$2; shift 2 ;;
    --extras) [ $# -ge 2 ] || die "--extras needs a list"; EXTRAS=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see: bash $0 --help)" ;;
  esac
done

[[ "$TARGET_PY" =~ ^3\.[0-9]+$ ]] || die "--python takes a version like 3.12, not '$TARGET_PY'"
case "$ARCH" in x86_64|aarch64) ;; *) die "--arch takes x86_64 or aarch64, not '$ARCH'" ;; esac
case ",${EXTRAS// /}," in
  *,cuda,*) die "--extras cuda: name the target's CUDA major, cuda13 or cuda12 (the CUDA its torch is built for)" ;;
esac
if [ ${#PLATFORMS[@]} -eq 0 ]; then
  # pip does not widen a manylinux tag to older glibc versions by itself: name each one
  PLATFORMS=(manylinux2014_"$ARCH")
  for minor in $(seq 17 28); do PLATFORMS+=("manylinux_2_${minor}_$ARCH"); done
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -f "$ROOT/pyproject.toml" ] || die "no pyproject.toml in $ROOT"
ABI="cp${TARGET_PY/./}"

mkdir -p "$OUT/project"
OUT="$(cd "$OUT" && pwd)"
rm -f "$OUT"/*.whl "$OUT"/project/*.whl "$OUT/install.sh" "$OUT/requirements.txt"

echo "== avo's own wheel"
(cd "$ROOT" && "$PYTHON" -m pip wheel . --no-deps --quiet -w "$OUT/project") || die "building avo's wheel failed"
AVO_WHEEL=$(ls "$OUT"/project/avo-*.whl)

# Requirements, markers evaluated for the target, with skip patterns applied; also used for the closure check.
helper() {
  "$PYTHON" - "$@" <<'PY'
import fnmatch, re, sys, zipfile
from pathlib import Path
try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
except ImportError:  # pip always carries a copy
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.requirements import Requirement

mode, target_py, arch, skip, extras, *wheels = sys.argv[1:]
skip = [s.strip() for s in skip.split(",") if s.strip()]
extras = {e.strip() for e in extras.split(",") if e.strip()}
env = {"python_version": target_py, "python_full_version": target_py + ".0", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": arch, "os_name": "posix", "implementation_name": "cpython",
       "platform_python_implementation": "CPython"}
canon = lambda name: re.sub(r"[-_.]+", "-", name).lower()
skipped = lambda name: any(fnmatch.fnmatch(canon(name), canon(p)) for p in skip)

def requires(wheel, with_extras):
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in with_extras | {""}):
            yield req

def dist_name(wheel):
    return canon(Path(wheel).name.split("-")[0])

if mode == "check-extras":  # every extra asked for is one avo declares
    with zipfile.ZipFile(wheels[0]) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        provided = {line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines()
                    if line.startswith("Provides-Extra:")}
    unknown = sorted(extras - provided)
    if unknown:
        sys.exit(f"wheelhouse: error: avo has no extra {', '.join(unknown)} (it has: {', '.join(sorted(provided))})")
elif mode == "requirements":  # avo's direct requirements, minus the skipped ones
    for req in requires(wheels[0], extras):
        if not skipped(req.name):  # without its marker, already evaluated here (pip would read `extra` as unset)
            print(req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "") + str(req.specifier))
elif mode == "skipped-files":  # downloaded wheels that match a skip pattern (pulled in indirectly)
    for w in wheels:
        if skipped(dist_name(w)):
            print(w)
elif mode == "expected":  # what the bundle needs but does not hold: must be on the target already
    present = {dist_name(w) for w in wheels}
    needed = {}
    for w in wheels:
        for req in requires(w, extras if dist_name(w) == "avo" else set()):
            if canon(req.name) not in present:
                needed.setdefault(canon(req.name), set()).add(dist_name(w))
    missing = sorted(n for n in needed if not skipped(n))
    if missing:
        sys.exit("wheelhouse: error: the bundle lacks " + ", ".join(missing) + " (a download failed?)")
    for name in sorted(needed):
        print(name, ",".join(sorted(needed[name])))
PY
}

helper check-extras "$TARGET_PY" "$ARCH" "$SKIP" "$EXTRAS" "$AVO_WHEEL" || exit 2
echo "== dependencies for Python $TARGET_PY ($ABI) on ${PLATFORMS[0]} ... (skipping: ${SKIP:-nothing})"
helper requirements "$TARGET_PY" "$ARCH" "$SKIP" "$EXTRAS" "$AVO_WHEEL" > "$OUT/requirements.txt"
PLATFORM_ARGS=()
for p in "${PLATFORMS[@]}"; do PLATFORM_ARGS+=(--platform "$p"); done
"$PYTHON" -m pip download --quiet --only-binary=:all: --python-version "$TARGET_PY" --implementation cp \
  --abi "$ABI" "${PLATFORM_ARGS[@]}" -d "$OUT" -r "$OUT/requirements.txt" \
  || die "pip download failed: a dependency may have no wheel for Python $TARGET_PY on $ARCH"

# the skipped packages that came in as someone's dependency (numpy under matplotlib, ...)
helper skipped-files "$TARGET_PY" "$ARCH" "$SKIP" "$EXTRAS" "$OUT"/*.whl | while read -r wheel; do
  rm -f "$wheel"
done
EXPECTED=$(helper expected "$TARGET_PY" "$ARCH" "$SKIP" "$EXTRAS" "$OUT"/*.whl "$AVO_WHEEL") || exit 2
AVO_VERSION=$(basename "$AVO_WHEEL" | cut -d- -f2)

{
  echo '#!/usr/bin/env bash'
  echo "# Installs avo $AVO_VERSION from this folder without a package index."
  echo "# Built $(date -u +%Y-%m-%dT%H:%MZ) for Python $TARGET_PY on ${PLATFORMS[*]}."
  echo '# Expected on the machine already (left out of the bundle), with what needs them:'
  while read -r name users; do [ -n "$name" ] && echo "#   $name (for $users)"; done <<< "$EXPECTED"
  echo '# Extra pip options pass through, e.g.: bash install.sh --user'
  echo 'set -euo pipefail'
  echo 'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"'
  echo 'PYTHON=${PYTHON:-python3}'
  echo "\"\$PYTHON\" -c 'import sys; sys.exit(sys.version_info[:2] != (${TARGET_PY/./, }))' \\"
  echo "  || { echo \"install.sh: this bundle is for Python $TARGET_PY; \$PYTHON is \$(\"\$PYTHON\" -V 2>&1)\" >&2; exit 2; }"
  echo 'for name in '"$(echo "$EXPECTED" | awk '{print $1}' | tr '\n' ' ')"'; do'
  echo '  "$PYTHON" -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$name" 2>/dev/null \'
  echo '    || { echo "install.sh: $name is not installed, and this bundle leaves it to the image: install it first" >&2; exit 2; }'
  echo 'done'
  echo "exec \"\$PYTHON\" -m pip install --no-index --find-links \"\$HERE\" --find-links \"\$HERE/project\" \"\$@\" \"avo${EXTRAS:+[$EXTRAS]}==$AVO_VERSION\""
} > "$OUT/install.sh"
chmod +x "$OUT/install.sh"

COUNT=$(ls "$OUT"/*.whl 2>/dev/null | wc -l)
SIZE=$(du -sh "$OUT" | cut -f1)
echo "== $OUT: $COUNT dependency wheels + $(basename "$AVO_WHEEL") ($SIZE)"
echo "install on the target:  bash $OUT/install.sh"
echo "  which runs: python3 -m pip install --no-index --find-links $OUT --find-links $OUT/project avo${EXTRAS:+[$EXTRAS]}==$AVO_VERSION"
