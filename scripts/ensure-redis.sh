#!/usr/bin/env bash
# Makes a Redis server answer on 127.0.0.1:6379 for the Redis Streams delivery tests
# (crates/hookgate/tests/it/redis_stream.rs, and crates/hookgate-relay's unit tests).
# Idempotent: does nothing when it already answers PING; otherwise installs Debian's
# `redis-server` package if missing and starts the service. Tests against another server: set
# HOOKGATE_TEST_REDIS_URL instead.
set -euo pipefail

host=127.0.0.1
port=6379

answers() {
    if command -v redis-cli >/dev/null 2>&1; then
        [ "$(redis-cli -h "$host" -p "$port" ping 2>/dev/null)" = "PONG" ]
    else
        # bash's /dev/tcp and the inline PING of the Redis protocol.
        { exec 3<>"/dev/tcp/$host/$port"; } 2>/dev/null || return 1
        printf 'PING\r\n' >&3
        local reply
        read -r -t 5 reply <&3 || reply=""
        exec 3>&-
        [ "${reply%$'\r'}" = "+PONG" ]
    fi
}

if [ -n "${HOOKGATE_TEST_REDIS_URL:-}" ]; then
    echo "ensure-redis: the tests use HOOKGATE_TEST_REDIS_URL"
    exit 0
fi
if answers; then
    echo "ensure-redis: Redis already answers on $host:$port"
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
fi
if ! command -v redis-server >/dev/null 2>&1; then
    # shellcheck source=lib/apt-install.sh
    . "$(dirname "$0")/lib/apt-install.sh"
    apt_install ensure-redis "install redis-server (5 or newer: streams) and start it on $host:$port" redis-server
fi

if ! answers; then
    echo "ensure-redis: starting redis-server"
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        $sudo systemctl start redis-server
    elif command -v service >/dev/null 2>&1 && [ -x /etc/init.d/redis-server ]; then
        $sudo service redis-server start
    else
        # No init system (a container): a daemon on loopback with the package's defaults.
        $sudo redis-server --bind "$host" --port "$port" --daemonize yes
    fi
    for _ in $(seq 1 30); do
        answers && break
        sleep 1
    done
fi

if answers; then
    echo "ensure-redis: Redis answers on $host:$port"
else
    echo "ensure-redis: redis-server did not answer on $host:$port within 30 s;" >&2
    echo "  see /var/log/redis/ (or set HOOKGATE_TEST_REDIS_URL to a server the tests may use)" >&2
    exit 1
fi
