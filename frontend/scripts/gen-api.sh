#!/usr/bin/env bash
# The console's API contract, generated from the server: openapi.json (drf-spectacular) and
# src/shared/api/schema.d.ts (openapi-typescript, the types the typed client checks every call against).
#
#   scripts/gen-api.sh           regenerate both files in place (npm run gen:api)
#   scripts/gen-api.sh --check   generate into a temporary directory and fail when the committed files differ
#                                (npm run check:api; `make frontend-test` and so CI run it)
#
# The output must not depend on who runs it, so the server runs in a pinned environment: only PATH, HOME and
# PYTHONPATH pass through (no DEBUG, limits or .env values from the caller's shell), the settings module is
# fixed, and the database backend is PostgreSQL, as in production. The backend matters: Django bounds integer
# fields by the backend's column range (SQLite's are 64-bit, PostgreSQL's 16/32-bit), and those bounds are
# in the schema. Nothing connects to the database; the URL only picks the backend.
set -euo pipefail

mode=write
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

frontend="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$frontend/.." && pwd)"
python="${FLEET_PYTHON:-$root/.venv/bin/python}"
cd "$frontend"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

env -i PATH="$PATH" HOME="${HOME:-$tmp}" LANG=C.UTF-8 PYTHONPATH="${PYTHONPATH:-}" PYTHONHASHSEED=0 \
  DJANGO_SETTINGS_MODULE=config.settings.local \
  DATABASE_URL=postgres://schema@127.0.0.1:1/schema \
  FLEET_VAR_DIR="$tmp/var" \
  "$python" "$root/manage.py" spectacular --format openapi-json --file "$tmp/openapi.json"
"$frontend/node_modules/.bin/openapi-typescript" "$tmp/openapi.json" -o "$tmp/schema.d.ts" >/dev/null

committed=("$frontend/openapi.json" "$frontend/src/shared/api/schema.d.ts")
generated=("$tmp/openapi.json" "$tmp/schema.d.ts")

if [ "$mode" = write ]; then
  for i in 0 1; do cp "${generated[$i]}" "${committed[$i]}"; done
  echo "wrote ${committed[0]#"$root/"} and ${committed[1]#"$root/"}"
  exit 0
fi

stale=0
for i in 0 1; do
  if ! diff -u --label "${committed[$i]#"$root/"} (committed)" --label "generated from the server" \
      "${committed[$i]}" "${generated[$i]}" > "$tmp/diff"; then
    stale=1
    head -n 60 "$tmp/diff"
    lines=$(wc -l < "$tmp/diff")
    [ "$lines" -gt 60 ] && echo "… ($lines diff lines in all)"
  fi
done
if [ "$stale" -ne 0 ]; then
  echo "The committed API contract differs from what the server generates." >&2
  echo "Run 'npm run gen:api' in frontend/, then 'npm run build', and commit openapi.json and schema.d.ts." >&2
  exit 1
fi
echo "API contract up to date (openapi.json, src/shared/api/schema.d.ts)"
