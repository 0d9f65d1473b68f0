#!/usr/bin/env bash
# Installs what schedweb needs on a fresh Debian machine, idempotently and quietly.
#   scripts/bootstrap.sh run    # runtime: redis-server, .venv with requirements.txt
#   scripts/bootstrap.sh dev    # + postgresql, chromium, requirements-dev.txt
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
PYTHON=${PYTHON:-python3.11}

need_pkgs=()
command -v redis-server >/dev/null || need_pkgs+=(redis-server)
if [[ $mode == dev ]]; then
  [[ -x /usr/lib/postgresql/15/bin/initdb ]] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkgs+=(postgresql)
  command -v chromium >/dev/null || need_pkgs+=(chromium)
  command -v go >/dev/null || need_pkgs+=(golang-go)   # only fetches the pinned Go (scripts/k8s-binaries.sh)
  command -v npm >/dev/null || need_pkgs+=(npm)        # only fetches axe-core (scripts/axe-core.sh)
fi
if ((${#need_pkgs[@]})); then
  echo "bootstrap: installing Debian packages: ${need_pkgs[*]}"
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

if [[ ! -x .venv/bin/python ]]; then
  command -v "$PYTHON" >/dev/null || PYTHON=python3
  "$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
    || { echo "bootstrap: Python 3.11 is required"; exit 1; }
  "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
req=requirements.txt; [[ $mode == dev ]] && req=requirements-dev.txt
stamp=.venv/.installed-$(cat requirements*.txt | sha256sum | cut -c1-16)-$mode
if [[ ! -f $stamp ]]; then
  echo "bootstrap: installing Python packages from $req"
  .venv/bin/pip install -q -r "$req"
  touch "$stamp"
fi
# dev: axe-core for the browser tests' accessibility checks (pinned, integrity-checked, cached)
[[ $mode == dev ]] && scripts/axe-core.sh
exit 0
