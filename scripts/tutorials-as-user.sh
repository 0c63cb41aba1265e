#!/usr/bin/env bash
# HTCondor's nine tutorials (tests/e2e/tutorials and the DAG tutorial) run as a plain Unix user, as
# HTCondor users run them: against that user's own personal pools, with that user's Python.
#
#   sudo TUTORIAL_USER=alice bash scripts/tutorials-as-user.sh
#
# The checkout at HEAD is copied to a directory the user owns and installed there (editable) in a
# venv of the system's python3 (the project's .venv may live where the user cannot reach), then
# pytest runs the tutorials as that user. The broker is the machine's (guest from localhost).
set -euo pipefail

user="${TUTORIAL_USER:-}"
if [ -z "$user" ] || ! id -u "$user" >/dev/null 2>&1; then
  echo "tutorials-as-user: set TUTORIAL_USER to a plain Unix account of this machine (not root)" >&2
  exit 2
fi
if [ "$(id -u "$user")" = 0 ]; then
  echo "tutorials-as-user: $user is root; the point is a plain user" >&2
  exit 2
fi
home="$(getent passwd "$user" | cut -d: -f6)"
as_user() { runuser -u "$user" -- env HOME="$home" PATH="/usr/bin:/bin" "$@"; }
# The system's python3 (root's own, e.g. under pyenv in /root, is out of the user's reach).
py="${TUTORIAL_PYTHON:-/usr/bin/python3}"
as_user "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "tutorials-as-user: $user cannot run $py, or it is older than 3.11 (set TUTORIAL_PYTHON)" >&2; exit 2; }
work="${TUTORIAL_DIR:-/tmp/gridbus-tutorials-$user}"
rm -rf "$work"
mkdir -p "$work/src"
git archive HEAD | tar -x -C "$work/src"
chown -R "$user" "$work"
as_user "$py" -m venv "$work/venv"
as_user bash -c "cd '$work/src' && '$work/venv/bin/pip' install -q -e '.[test]'"
as_user bash -c "cd '$work/src' && '$work/venv/bin/python' -m pytest -q -p no:cacheprovider \
  tests/e2e/tutorials tests/e2e/dagman/test_tutorial.py"
