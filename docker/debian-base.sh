#!/usr/bin/env bash
# A Debian bookworm base image made from a Debian mirror, for machines that reach Debian's packages but
# not Docker Hub (a closed network, an air-gapped mirror):
#   sudo bash docker/debian-base.sh [TAG] [MIRROR]
#   docker build --build-arg BASE=TAG -f docker/Dockerfile -t mlfbuild .
# TAG defaults to mlfbuild-base:bookworm-slim, MIRROR to http://deb.debian.org/debian. The image is
# debootstrap's minbase variant with what Debian's -slim images leave out left out too: documentation
# (copyright notices kept), manual and info pages, translations. Needs root and debootstrap.
set -euo pipefail
tag="${1:-mlfbuild-base:bookworm-slim}"
mirror="${2:-http://deb.debian.org/debian}"
for tool in debootstrap docker tar; do
  command -v "$tool" >/dev/null || { echo "debian-base.sh: $tool is not installed" >&2; exit 2; }
done
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root/fs" "$mirror" >"$root/debootstrap.log" 2>&1 \
  || { tail -5 "$root/debootstrap.log" >&2; echo "debian-base.sh: debootstrap failed (above)" >&2; exit 3; }
cat > "$root/fs/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
# as Debian's -slim images: no documentation, manuals or translations in packages installed later
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
CFG
find "$root/fs/usr/share/doc" -mindepth 2 ! -name copyright -type f -delete
rm -rf "$root"/fs/usr/share/{man,info,locale}/* "$root"/fs/var/cache/apt/*.bin "$root"/fs/var/lib/apt/lists/*
tar -C "$root/fs" -c . | docker import --change 'CMD ["bash"]' - "$tag" >/dev/null
echo "$tag"
