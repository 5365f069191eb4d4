#!/usr/bin/env bash
# The quick start's first command on a fresh environment: a fresh clone of this checkout's HEAD,
# a new Python 3.11 venv, no pip cache; the README's first command (with the CI lock as
# constraints, so the figure is reproducible), then the demo. Writes results/quickstart_env.md:
# the venv's size, the install's and the demo's wall time, and the largest installed packages.
#
#   scripts/measure_quickstart.sh [PYTHON]      # PYTHON: a Python 3.11 interpreter (default python3.11)
#
# Needs the package index (pip) and nothing else; the demo runs its own embedded PostgreSQL under
# the work directory and stops it afterwards. The work directory (/tmp/ilr-quickstart.*) is kept
# for inspection and named in the results file.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${1:-python3.11}"
OUT="$ROOT/results/quickstart_env.md"
WORK="$(mktemp -d /tmp/ilr-quickstart.XXXXXX)"
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD)"

git clone --quiet --no-hardlinks "$ROOT" "$WORK/src"
git -C "$WORK/src" checkout --quiet "$COMMIT"
"$PYTHON" -m venv "$WORK/venv"
VENV_BARE_MB="$(du -sm "$WORK/venv" | cut -f1)"
PY="$WORK/venv/bin/python"

cd "$WORK/src"
INSTALL='pip install -c requirements/ci-lock.txt -e ".[demo]"'
t0=$(date +%s.%N)
PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$WORK/venv/bin/pip" install --quiet \
  -c requirements/ci-lock.txt -e ".[demo]"
t1=$(date +%s.%N)
VENV_MB="$(du -sm "$WORK/venv" | cut -f1)"
VENV_H="$(du -sh "$WORK/venv" | cut -f1)"

export ILR_DATA_DIR="$WORK/.data"
t2=$(date +%s.%N)
set +e
"$PY" manage.py demo >"$WORK/demo.log" 2>&1
DEMO_STATUS=$?
set -e
t3=$(date +%s.%N)
t4=$(date +%s.%N)
"$PY" manage.py demo >"$WORK/demo2.log" 2>&1 || DEMO_STATUS=$((DEMO_STATUS + 100))
t5=$(date +%s.%N)
"$PY" manage.py ilr_db stop >/dev/null 2>&1 || true

secs() { "$PY" -c "print(f'{$2 - $1:.1f}')"; }
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
{
  echo "# The quick start's environment"
  echo
  echo "Written by \`scripts/measure_quickstart.sh $PYTHON\` at commit $COMMIT on $(date -u +%Y-%m-%d)."
  echo "A fresh \`git clone\` of the commit and a new venv of $("$PY" --version 2>&1) (pip"
  echo "$("$WORK/venv/bin/pip" --version | cut -d' ' -f2), no pip cache: every package downloaded from the index) on"
  echo "$(uname -sm), $(nproc) cores. The install is the README's first command with the CI lock as"
  echo "constraints (the versions the suite passed with, so the figure is reproducible):"
  echo
  echo '```bash'
  echo "$INSTALL && python manage.py demo"
  echo '```'
  echo
  echo "| measure | value |"
  echo "|---|---|"
  echo "| venv size after the install (\`du -sh\`) | $VENV_H ($VENV_MB MB; the empty venv: $VENV_BARE_MB MB) |"
  echo "| install time (wall) | $(secs "$t0" "$t1") s |"
  echo "| \`python manage.py demo\`, first run (initdb, migrate, the demo) | $(secs "$t2" "$t3") s |"
  echo "| \`python manage.py demo\`, second run (the cluster already up) | $(secs "$t4" "$t5") s |"
  echo "| the demo's exit status (both runs) | $DEMO_STATUS |"
  echo "| target | a venv under 350 MB |"
  echo
  echo "The largest installed distributions (MB on disk, site-packages):"
  echo
  echo "| MB | path |"
  echo "|---|---|"
  du -sm "$SITE"/* 2>/dev/null | sort -rn | head -10 | while read -r mb path; do
    echo "| $mb | \`${path#"$SITE"/}\` |"
  done
  echo
  echo "The demo's last line: \`$(tail -n 1 "$WORK/demo.log")\`"
  echo
  echo "Work directory (the clone, the venv and the demo's logs): \`$WORK\`."
} >"$OUT"
cat "$OUT"
exit "$DEMO_STATUS"
