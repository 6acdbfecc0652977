#!/usr/bin/env bash
# Sets everything up (idempotent, fast when nothing changed), then runs the demo or the test suite.
#   ./dev.sh demo            set up, then run the demo (the main job)
#   ./dev.sh test [ARGS...]  set up, then run pytest (ARGS go to pytest)
#   ./dev.sh test-spark35 [ARGS...]  the Spark tests again under PySpark 3.5 (its own .venv-spark35; CI runs it)
#   ./dev.sh test-airflow [ARGS...]  the Airflow helper against the real Airflow + OpenLineage provider (.venv-airflow)
#   ./dev.sh lint            ruff and mypy (CI runs it before the tests)
set -euo pipefail
cd "$(dirname "$0")"

die() { echo "dev.sh: $*" >&2; exit 2; }

# 1. Python 3.10+ (3.11 is what CI uses).
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in python3.11 python3 python; do
    if command -v "$candidate" >/dev/null 2>&1; then PY=$candidate; break; fi
  done
fi
[ -n "$PY" ] || die "Python 3.10+ is required (python3.11 recommended); none found on PATH"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || die "Python 3.10+ is required; $PY is $("$PY" -V 2>&1)"

# 2. Java 17+ for PySpark.
command -v java >/dev/null 2>&1 || die "Java 17+ is required by PySpark: install a JDK/JRE 17 (Debian: apt-get install openjdk-17-jre-headless) and put java on PATH"
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n1)
[ "${java_major:-0}" -ge 17 ] 2>/dev/null || die "Java 17+ is required by PySpark; found: $(java -version 2>&1 | head -n1)"

cmd=${1:-}
shift || true

# 3. System packages, for the tests only (the demo needs none): unixODBC (pyodbc needs libodbc.so.2), the SQLite
#    ODBC driver (live-path tests), and Chromium with its driver (the lineage page is tested in a real headless
#    browser). The tests also read ../shared beside the repository (OpenLineage's JSON schemas, expected events).
test_prerequisites() {
  [ -d ../shared/openlineage-spec ] || die "the tests read ../shared beside the repository (OpenLineage's JSON schemas in ../shared/openlineage-spec, the JVM integration's expected events, SQL and Extended Events cases): $(cd .. && pwd)/shared is missing"
  local missing=()
  ldconfig -p 2>/dev/null | grep -q 'libodbc\.so\.2' || missing+=(unixodbc)
  [ -e /usr/lib/x86_64-linux-gnu/odbc/libsqlite3odbc.so ] || ls /usr/lib/*/odbc/libsqlite3odbc.so >/dev/null 2>&1 || missing+=(libsqliteodbc)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
  [ ${#missing[@]} -gt 0 ] || return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "dev.sh: installing ${missing[*]} with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    die "missing system packages: ${missing[*]} (Debian/Ubuntu: sudo apt-get install -y ${missing[*]})"
  fi
}
case "$cmd" in test|test-spark35|test-airflow) test_prerequisites ;; esac

# 4. The virtual environment, reinstalled only when pyproject.toml changed.
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.setup-stamp
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "dev.sh: installing the package and its dependencies into .venv (log: .venv/pip-install.log)" >&2
  .venv/bin/python -m pip install --disable-pip-version-check -e '.[all,test,dev]' > .venv/pip-install.log 2>&1 ||
    { tail -n 30 .venv/pip-install.log >&2; die "pip install failed (full log: .venv/pip-install.log)"; }
  echo "$want" > "$stamp"
fi

# 5. PySpark 3.5 beside the newest (the plugin supports both): a second environment, for test-spark35 only.
spark35_env() {
  [ -x .venv-spark35/bin/python ] || "$PY" -m venv .venv-spark35
  local stamp35=.venv-spark35/.setup-stamp
  if [ "$(cat "$stamp35" 2>/dev/null)" != "$want" ]; then
    echo "dev.sh: installing the package with PySpark 3.5 into .venv-spark35 (log: .venv-spark35/pip-install.log)" >&2
    .venv-spark35/bin/python -m pip install --disable-pip-version-check -e '.[all,test,dev]' 'pyspark>=3.5,<3.6' \
      > .venv-spark35/pip-install.log 2>&1 ||
      { tail -n 30 .venv-spark35/pip-install.log >&2; die "pip install failed (full log: .venv-spark35/pip-install.log)"; }
    echo "$want" > "$stamp35"
  fi
}

case "$cmd" in
  demo) exec .venv/bin/lineage-capture demo "$@" ;;
  test) exec .venv/bin/python -m pytest "$@" ;;
  test-spark35) spark35_env; exec .venv-spark35/bin/python -m pytest tests/spark "$@" ;;
  # the test builds .venv-airflow itself (pinned Airflow and provider, this package editable) on first use
  test-airflow) LINEAGE_CAPTURE_AIRFLOW_PYTHON=install exec .venv/bin/python -m pytest tests/harvesters/core/test_airflow_tag.py "$@" ;;
  lint) .venv/bin/ruff check . && exec .venv/bin/mypy ;;
  *) die "usage: ./dev.sh demo | test [pytest args] | test-spark35 [pytest args] | test-airflow [pytest args] | lint" ;;
esac
