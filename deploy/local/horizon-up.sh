#!/usr/bin/env bash
# Horizon with magnum-ui for the browser end-to-end test (test/e2e/horizon_test.go): Debian bookworm's
# openstack-dashboard and python3-magnum-ui under uwsgi on 127.0.0.1:8080 (no web server), run as
# www-data against the local stack's Keystone (region RegionOne: magnum-api 15), plus Debian's chromium
# and npm playwright-core (the pinned version, cached outside the work tree) to drive it headless.
#
# Idempotent and quick when everything is in place: packages are installed once, static files are
# collected and compressed again only when the packages or the settings change, and a running Horizon
# is restarted only when its settings, uwsgi ini or packages changed.
# PID file $MCB_RUN_DIR/horizon.pid, log $MCB_LOG_DIR/horizon.log; stopped by down.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_dirs
[ "$(id -u)" = 0 ] || { echo "horizon-up: run as root (it installs packages and starts a service)" >&2; exit 1; }
t0=$SECONDS
listen=${MCB_HORIZON_LISTEN:-127.0.0.1:8080}
keystone_url=${MCB_KEYSTONE_URL:-http://127.0.0.1:5000/v3}
dash=/usr/share/openstack-dashboard
static=/var/lib/openstack-dashboard/static
snippet=/etc/openstack-dashboard/local_settings.d/_90_magnum_capi_bridge.py
ini=$MCB_ETC_DIR/horizon-uwsgi.ini
cache=$MCB_CACHE/playwright-core-$PLAYWRIGHT_CORE_VERSION
tmp=$(mktemp -d)
policy_rc=0
cleanup() {
  rm -rf "$tmp"
  if [ "$policy_rc" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
}
trap cleanup EXIT

# --- packages. uwsgi-core, not Debian's `uwsgi`: that one adds an init script that would start
# every app in /etc/uwsgi; this script starts exactly one, on loopback.
packages=(openstack-dashboard python3-magnum-ui chromium uwsgi-core uwsgi-plugin-python3 curl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "horizon-up: installing ${missing[*]}"; t=$SECONDS
  # Maintainer scripts must not start services (openstack-dashboard's would reload an Apache).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# temporary, from deploy/local/horizon-up.sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    policy_rc=1
  fi
  apt_install() {
    DEBIAN_FRONTEND=noninteractive nice -n 19 apt-get -o DPkg::Lock::Timeout=900 install -y -q \
      --no-install-recommends -o Dpkg::Options::=--force-confold "${missing[@]}"
  }
  if ! apt_install; then
    log "horizon-up: install failed; refreshing the package lists once and retrying"
    apt-get -o DPkg::Lock::Timeout=900 update -q
    apt_install
  fi
  if [ "$policy_rc" = 1 ]; then rm -f /usr/sbin/policy-rc.d; policy_rc=0; fi
  log "horizon-up: packages installed in $((SECONDS - t))s"
fi
# apt serves only the newest update of a package, so versions.env pins the upstream versions and
# this checks them: a Debian upload of another Horizon or magnum-ui fails here, not in the test.
version_of() { dpkg-query -W -f='${Version}' "$1"; }
check_version() { # PACKAGE UPSTREAM
  local v; v=$(version_of "$1"); v=${v#*:}
  case $v in "$2"-*) ;; *) log "horizon-up: $1 is $v, versions.env pins upstream $2"; exit 1 ;; esac
}
check_version openstack-dashboard "$HORIZON_VERSION"
check_version python3-magnum-ui "$MAGNUM_UI_VERSION"
uwsgi=/usr/bin/uwsgi_python3
[ -x "$uwsgi" ] || uwsgi=/usr/bin/uwsgi-core

# --- settings: a snippet Horizon reads after local_settings.py (local_settings.d, sorted by name).
cat >"$tmp/settings.py" <<EOF
# Written by deploy/local/horizon-up.sh (magnum-capi-bridge local stack); changes are overwritten.
OPENSTACK_HOST = "127.0.0.1"
OPENSTACK_KEYSTONE_URL = "$keystone_url"
OPENSTACK_KEYSTONE_DEFAULT_ROLE = "member"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
# Debian's default cache (LocMemCache) is per process: with two uwsgi workers a session stored in
# one is unknown to the other. Signed cookies need no shared store.
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
# The catalog's RegionTwo holds only magnum-api 23 (openstack/newest-up.sh); Horizon talks to RegionOne.
DEFAULT_SERVICE_REGIONS = {"*": "RegionOne"}
EOF
changed=0
if ! cmp -s "$tmp/settings.py" "$snippet"; then
  install -D -m 0644 "$tmp/settings.py" "$snippet"; changed=1
fi

cat >"$tmp/uwsgi.ini" <<EOF
# Written by deploy/local/horizon-up.sh: Horizon on loopback, no web server in front.
[uwsgi]
http-socket = $listen
plugins = python3
master = true
lazy-apps = true
no-orphans = true
die-on-term = true
enable-threads = true
processes = 2
threads = 4
buffer-size = 65535
# uwsgi's http-socket does not keep connections alive.
add-header = Connection: close
uid = www-data
gid = www-data
chdir = $dash
wsgi-file = $dash/wsgi.py
static-map = /static=$static
logto = $MCB_LOG_DIR/horizon.log
name = horizon
EOF
if ! cmp -s "$tmp/uwsgi.ini" "$ini"; then
  install -D -m 0644 "$tmp/uwsgi.ini" "$ini"; changed=1
fi

# --- static files: the packages' postinst collects and compresses them, but only for what was
# installed at that moment and with the settings of that moment. Again when either changes.
stamp=/var/lib/openstack-dashboard/.magnum-capi-bridge-static
want=$( (for p in openstack-dashboard python3-django-horizon python3-magnum-ui; do echo "$p $(version_of "$p")"; done
  cat "$snippet") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "horizon-up: collectstatic + compress"; t=$SECONDS
  # /usr/bin/python3: a python3 earlier in PATH (pyenv) lacks Debian's Django.
  (cd "$dash" && nice -n 19 /usr/bin/python3 manage.py collectstatic --noinput -v0 &&
    nice -n 19 /usr/bin/python3 manage.py compress --force -v0) >>"$MCB_LOG_DIR/horizon-static.log" 2>&1 ||
    { tail -n 30 "$MCB_LOG_DIR/horizon-static.log" >&2; log "horizon-up: collectstatic/compress failed"; exit 1; }
  echo "$want" >"$stamp"; changed=1
  log "horizon-up: static files done in $((SECONDS - t))s"
fi
# manage.py run as root creates the secret key 0600 root; the workers run as www-data.
chown -R www-data:www-data /var/lib/openstack-dashboard/secret-key 2>/dev/null || true

# --- the browser driver: playwright-core only (no browser download: the test uses /usr/bin/chromium).
if [ ! -f "$cache/node_modules/playwright-core/package.json" ]; then
  command -v npm >/dev/null || { log "horizon-up: npm is missing (Node.js ships it)"; exit 1; }
  log "horizon-up: npm install playwright-core@$PLAYWRIGHT_CORE_VERSION into $cache"; t=$SECONDS
  rm -rf "$cache.tmp" && mkdir -p "$cache.tmp"
  (cd "$cache.tmp" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 nice -n 19 npm install --no-audit --no-fund \
    --no-package-lock --save-exact "playwright-core@$PLAYWRIGHT_CORE_VERSION" >/dev/null)
  rm -rf "$cache" && mv "$cache.tmp" "$cache"
  log "horizon-up: playwright-core installed in $((SECONDS - t))s"
fi

# --- start (or restart after a change).
horizon_running() { pid_alive horizon && tr '\0' ' ' <"/proc/$(cat "$MCB_RUN_DIR/horizon.pid")/cmdline" | grep -qF "$ini"; }
if horizon_running && [ "$changed" = 1 ]; then
  log "horizon-up: settings or packages changed; restarting Horizon"
  stop_pid horizon 30
fi
url=http://$listen/auth/login/
if horizon_running; then
  log "horizon-up: Horizon running (pid $(cat "$MCB_RUN_DIR/horizon.pid")) on http://$listen/"
else
  rm -f "$MCB_RUN_DIR/horizon.pid"
  if [ -n "$(ss -Hltn "( sport = :${listen##*:} )" 2>/dev/null)" ]; then
    log "horizon-up: port ${listen##*:} is in use by a process this script did not start"; exit 1
  fi
  touch "$MCB_LOG_DIR/horizon.log" && chown www-data:www-data "$MCB_LOG_DIR/horizon.log"
  start-stop-daemon --start --background --make-pidfile --pidfile "$MCB_RUN_DIR/horizon.pid" \
    --chdir "$dash" --exec "$uwsgi" -- --ini "$ini"
  # The first request loads Django and every dashboard (a few seconds on a loaded machine).
  if ! wait_for "Horizon on $url" 120 bash -c "[ \"\$(curl -s -o /dev/null -m 10 -w '%{http_code}' $url)\" = 200 ]"; then
    tail -n 30 "$MCB_LOG_DIR/horizon.log" >&2; exit 1
  fi
  log "horizon-up: Horizon started (pid $(cat "$MCB_RUN_DIR/horizon.pid")) on http://$listen/"
fi
log "horizon-up: done in $((SECONDS - t0))s (Horizon $(version_of openstack-dashboard), magnum-ui $(version_of python3-magnum-ui), chromium $(version_of chromium), playwright-core $PLAYWRIGHT_CORE_VERSION)"
