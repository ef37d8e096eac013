# Sourced by the scripts/ensure-*.sh scripts: installs Debian packages the test suite needs.
#
#   apt_install NAME HINT PACKAGE...
#
# NAME prefixes every message (the calling script's name); HINT says what to install by hand
# where apt-get is not available. Runs as root, or through sudo; otherwise fails with a message
# (never silently: the tests that need the packages would fail later, less clearly). Sets
# `sudo` ("" or "sudo") for the caller's own follow-up commands.
apt_install() {
    local name="$1" hint="$2"
    shift 2
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "$name: $* not found and apt-get is not available;" >&2
        echo "  $hint" >&2
        return 1
    fi
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo="sudo"
        else
            echo "$name: need root (or sudo) to install $*" >&2
            return 1
        fi
    fi
    echo "$name: installing Debian's $* package(s)"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends "$@"
}
