#!/usr/bin/env bash
# The repository stands alone: copy its tracked files into an empty folder with nothing beside
# it, and run the provider tests and the vectors-over-HTTP test there. A test that reads a file outside the repository
# (e.g. a sibling checkout) fails here even when the developer's machine happens to have it.
set -euo pipefail
cd "$(dirname "$0")/.."

outside="$(mktemp -d)"
trap 'rm -rf "$outside"' EXIT
copy="$outside/hookgate"
mkdir "$copy"
# Tracked files as they are in the work tree (so uncommitted edits are checked too).
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$copy"

# Code, tests and docs name no path outside the repository.
if grep -rnE '\.\./shared|shared/providers|DESIGN\.md' --include='*.rs' --include='*.sh' --include='*.toml' \
    --include='*.md' "$copy/crates" "$copy/scripts" "$copy/docs" "$copy/README.md" \
    "$copy/ARCHITECTURE.md" | grep -v 'scripts/standalone-check.sh'; then
  echo "error: the lines above refer to files outside the repository" >&2
  exit 1
fi

# Dependencies compiled for the real checkout are reused; the workspace crates rebuild.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
(cd "$copy" && cargo test --locked -p hookgate-providers && cargo test --locked -p hookgate --test it vectors::)
