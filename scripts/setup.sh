#!/usr/bin/env bash
# Set up mlfbuild on a Debian machine: install the Debian packages listed in docker/apt-packages.txt
# and docker/apt-packages-cxx.txt (and, with --test, docker/apt-packages-test.txt: what only the test suite needs) that are missing,
# then create .venv with mlfbuild and its test tools installed from this checkout.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

lists=(docker/apt-packages.txt docker/apt-packages-cxx.txt)
[ "${1:-}" = "--test" ] && lists+=(docker/apt-packages-test.txt)
packages=()
for list in "${lists[@]}"; do
  while read -r line; do
    line="${line%%#*}"
    for word in $line; do packages+=("$word"); done
  done < "$list"
done

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
python3 -c "import ensurepip" 2>/dev/null || missing+=("python3-venv")

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
echo "setup: ready ($(.venv/bin/mlfbuild --version), $(arm-none-eabi-gcc -dumpversion 2>/dev/null | sed 's/^/arm-none-eabi-gcc /'), $(qemu-system-arm --version | head -n1))"
