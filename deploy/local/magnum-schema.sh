#!/usr/bin/env bash
# Creates Magnum's real database schema by running Magnum's own alembic migrations
# (`magnum-db-manage upgrade`, Debian bookworm python3-magnum 15.0.1 = Zed) against an existing, empty or
# partly migrated database. The Go store's tests load the result, so they test against exactly the tables
# magnum-api reads, not a hand-written imitation.
#
# Usage: magnum-schema.sh <sqlalchemy-url> [alembic-revision]
#   url examples: mysql+pymysql://root@127.0.0.1:3306/mcb_schema_zed?charset=utf8
#                 postgresql+psycopg2://postgres@127.0.0.1:5432/mcb_schema_zed
#   revision defaults to "head" (15.0.1's head is 7da8489d6a68).
# Idempotent: installs the packages only when they are missing, and alembic skips applied revisions.
# The database itself must exist; this script does not create or drop databases.
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if [ $# -lt 1 ] || [ -z "$1" ]; then
  echo "usage: $0 <sqlalchemy-url> [alembic-revision]" >&2
  exit 2
fi
url=$1
revision=${2:-head}

# The URL may carry a password: never print it. Show scheme://user@host/db only.
redacted_url() { printf '%s' "$1" | sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#'; }

# Debian's interpreter, not whatever python3 comes first on PATH (pyenv and venvs lack the apt packages).
py=/usr/bin/python3
have_python_deps() { [ -x "$py" ] && "$py" -c 'import magnum.cmd.db_manage, pymysql, psycopg2' >/dev/null 2>&1 && command -v magnum-db-manage >/dev/null 2>&1; }

if ! have_python_deps; then
  echo "magnum-schema: installing python3-magnum python3-pymysql python3-psycopg2 (Debian bookworm)" >&2
  # apt lists may be missing on a fresh machine; refresh them only then.
  if ! apt-cache policy python3-magnum 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    apt-get -o DPkg::Lock::Timeout=900 update -q
  fi
  # These packages hold no service; noninteractive keeps debconf from prompting.
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends \
    python3-magnum python3-pymysql python3-psycopg2 >&2
  have_python_deps || { echo "magnum-schema: python3-magnum installed but 'import magnum' still fails" >&2; exit 1; }
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/magnum-schema.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
# A throwaway config holding only what the migrations read. use_stderr keeps oslo.log quiet on stdout.
cat >"$work/magnum.conf" <<EOF
[DEFAULT]
use_stderr = true
debug = false

[database]
connection = $url
EOF
chmod 600 "$work/magnum.conf"

echo "magnum-schema: upgrading $(redacted_url "$url") to $revision" >&2
t0=$SECONDS
case "$url" in
  postgresql*|postgres*)
    # Magnum's migrations are written for MySQL: two of them (95096e2334ee, c04e925e65c2) backfill
    # existing rows with MySQL-only "UPDATE a INNER JOIN b ... SET" statements, which PostgreSQL rejects.
    # On a database without rows those backfills change nothing, so run the very same migrations through
    # magnum-db-manage's entry point with just those statements skipped - and refuse if there are rows
    # they would have updated. Everything else (every CREATE/ALTER) is Magnum's own code, unchanged.
    (cd "$work" && "$py" - --config-file "$work/magnum.conf" upgrade "$revision" <<'PY'
import re
import sys

import sqlalchemy.engine.base as base

_execute = base.Connection.execute
_mysql_join_update = re.compile(r"^\s*UPDATE\s+(\w+)\s+INNER\s+JOIN\s", re.I)


def execute(self, statement, *args, **kwargs):
    m = _mysql_join_update.match(statement) if isinstance(statement, str) else None
    if m and self.dialect.name == "postgresql":
        table = m.group(1)
        rows = _execute(self, "SELECT count(*) FROM %s" % table).scalar()
        if rows:
            raise SystemExit("magnum-schema: migration backfill needs MySQL: table %s has %d rows" % (table, rows))
        print("magnum-schema: skipped MySQL-only backfill of empty table %s" % table, file=sys.stderr)
        return None
    return _execute(self, statement, *args, **kwargs)


base.Connection.execute = execute
from magnum.cmd.db_manage import main  # noqa: E402

sys.argv[0] = "magnum-db-manage"
sys.exit(main())
PY
    )
    ;;
  *)
    # magnum-db-manage (shipped by python3-magnum, shebang /usr/bin/python3) reads the URL from the config.
    (cd "$work" && magnum-db-manage --config-file "$work/magnum.conf" upgrade "$revision")
    ;;
esac
echo "magnum-schema: done in $((SECONDS - t0))s" >&2
