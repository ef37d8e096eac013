#!/usr/bin/env bash
# Makes a RabbitMQ server answer on 127.0.0.1:5672 (guest/guest, loopback only) for the
# RabbitMQ delivery tests (crates/hookgate/tests/it/rabbitmq.rs, and crates/hookgate-relay's
# unit tests), and `rabbitmq-server` available for the broker-restart test, which starts a
# private node of its own (rabbitmq_restart.rs). Idempotent: does nothing when the port
# already answers; otherwise installs Debian's `rabbitmq-server` package if missing and starts
# the service. Tests against another server: set HOOKGATE_TEST_AMQP_URL instead.
set -euo pipefail

host=127.0.0.1
port=5672

answers() {
    # bash's /dev/tcp: no client tool needed to see the listener.
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

have_server() {
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null 2>&1
}

if [ -n "${HOOKGATE_TEST_AMQP_URL:-}" ] && have_server; then
    echo "ensure-rabbitmq: the tests use HOOKGATE_TEST_AMQP_URL; rabbitmq-server is installed (restart test)"
    exit 0
fi
if answers && have_server; then
    echo "ensure-rabbitmq: RabbitMQ already answers on $host:$port"
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
fi
if ! have_server; then
    # shellcheck source=lib/apt-install.sh
    . "$(dirname "$0")/lib/apt-install.sh"
    apt_install ensure-rabbitmq "install rabbitmq-server (3.9 or newer) and start it on $host:$port" rabbitmq-server
fi

if ! answers; then
    echo "ensure-rabbitmq: starting rabbitmq-server"
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        $sudo systemctl start rabbitmq-server
    elif command -v service >/dev/null 2>&1 && [ -x /etc/init.d/rabbitmq-server ]; then
        $sudo service rabbitmq-server start
    else
        # No init system (a container): run the node detached as the package's user.
        $sudo rabbitmq-server -detached
    fi
    for _ in $(seq 1 120); do
        answers && break
        sleep 1
    done
fi

if answers; then
    echo "ensure-rabbitmq: RabbitMQ answers on $host:$port"
else
    echo "ensure-rabbitmq: rabbitmq-server did not answer on $host:$port within 120 s;" >&2
    echo "  see /var/log/rabbitmq/ (or set HOOKGATE_TEST_AMQP_URL to a server the tests may use)" >&2
    exit 1
fi
