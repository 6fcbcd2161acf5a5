#!/usr/bin/env bash
# Builds the bridge's previous release into the cache (once per commit, from a git worktree of this
# repository) and prints the binary's path: the upgrade tests run it as the stack's bridge, then
# replace it with this tree's.
#
# Usage: previous-release.sh [REF]
#   REF  default: the newest release before HEAD: the newest tag vX.Y.Z, else the newest entry of
#        deploy/local/releases (kept in the tree: a clone need not carry tags) whose commit is an
#        ancestor of HEAD^; before the first release, FIRST_RELEASE_BASE, the commit of main
#        (2026-11-30) the first release's upgrade is tested from.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
FIRST_RELEASE_BASE=21bc133
# listed_release prints "<version> <commit>" of the newest listed release HEAD^ contains.
listed_release() {
  local version commit found=""
  while read -r version commit; do
    case $version in v[0-9]*) ;; *) continue ;; esac
    if git -C "$root" merge-base --is-ancestor "$commit" HEAD^ 2>/dev/null; then
      found="$version $commit"
    fi
  done < "$here/releases"
  [ -n "$found" ] && echo "$found"
}
release_version=""
if [ -n "${1:-}" ]; then
  ref=$1
elif ref=$(git -C "$root" describe --tags --abbrev=0 --match 'v[0-9]*' HEAD^ 2>/dev/null); then
  release_version=$ref
elif listed=$(listed_release); then
  release_version=${listed%% *} ref=${listed#* }
else
  ref=$FIRST_RELEASE_BASE
fi
commit=$(git -C "$root" rev-parse --short=12 "$ref^{commit}")
out=$MCB_CACHE/releases/$commit${release_version:+-$release_version}/magnum-capi-bridge
mkdir -p "$(dirname "$out")"
# The upgrade and churn tests ask at the same moment: one builds, the other waits for its binary.
exec 9>"$(dirname "$out")/.build.lock"
flock 9
if [ ! -x "$out" ]; then
  wt=$(mktemp -d "${TMPDIR:-/tmp}/mcb-release-XXXXXX")
  trap 'git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"' EXIT
  git -C "$root" worktree add --detach "$wt" "$commit" >/dev/null 2>&1
  version=${release_version:-$(git -C "$wt" describe --tags --match 'v[0-9]*' --always)}
  log "building the previous release $version ($commit) into $out" >&2
  (cd "$wt" && CGO_ENABLED=0 ${GO:-go} build -trimpath -ldflags "-X main.version=$version -X main.commit=$commit" \
    -o "$out.new" ./cmd/magnum-capi-bridge)
  mv "$out.new" "$out"
fi
echo "$out"
