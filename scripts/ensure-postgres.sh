#!/usr/bin/env bash
# Makes PostgreSQL's server binaries (initdb, pg_ctl) available, for the tests' throwaway
# clusters (crates/hookgate-testkit). Idempotent: does nothing when they are already on PATH
# or under /usr/lib/postgresql/*/bin; otherwise installs Debian's `postgresql` package.
# It does not start a server: the tests start and stop their own clusters.
set -euo pipefail

find_bin_dir() {
    local d
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"
        return 0
    fi
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

if dir=$(find_bin_dir); then
    echo "ensure-postgres: initdb and pg_ctl already available in $dir ($("$dir/pg_ctl" --version))"
    exit 0
fi

# shellcheck source=lib/apt-install.sh
. "$(dirname "$0")/lib/apt-install.sh"
apt_install ensure-postgres "install PostgreSQL's server binaries, or set DATABASE_URL for the tests" postgresql

if dir=$(find_bin_dir); then
    echo "ensure-postgres: installed; initdb and pg_ctl in $dir ($("$dir/pg_ctl" --version))"
else
    echo "ensure-postgres: postgresql installed but initdb/pg_ctl still not found" >&2
    exit 1
fi
