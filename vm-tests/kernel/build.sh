#!/bin/bash
# Builds the guest kernel with our XDP_GENERIC_XMIT_BATCH change (vm-tests/kernel/*.patch):
#   1. fetches Debian's kernel source (linux-source-X.Y, built from the `linux` source package,
#      Debian's patches applied) of the suite the "new" cloud kernel comes from (default sid)
#      through a private apt state under target/vm/apt/<suite>-src/ (the machine's /etc/apt and
#      /var/lib/apt are only read),
#   2. unpacks it and applies our patch,
#   3. configures a small guest kernel (tinyconfig + what vm-tests needs, see kernel/guest.config),
#   4. builds bzImage and records it in target/vm/kbuild/batch.json.
# Everything is cached under target/vm/kbuild/: a second run with the same source version and
# the same patch/config only rebuilds what changed (make is incremental).
#
# Usage: vm-tests/kernel/build.sh [--suite sid] [--jobs 2] [--mirror URL] [--no-patch]
# Result: target/vm/kbuild/bzImage-batch (or bzImage-stock with --no-patch); boot it with
#   cargo run --release -p vm-tests -- batch --kernel batch
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
suite=sid
jobs=2
mirror=
patch=1
while [ $# -gt 0 ]; do
    case "$1" in
        --suite) suite=$2; shift 2 ;;
        --jobs|-j) jobs=$2; shift 2 ;;
        --mirror) mirror=$2; shift 2 ;;
        --no-patch) patch=0; shift ;;
        -h|--help) sed -n "2,15p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

missing=()
for t in gcc make flex bison bc perl xz dpkg-deb apt-get; do
    command -v "$t" >/dev/null || missing+=("$t")
done
[ -e /usr/include/libelf.h ] || missing+=("libelf-dev")
[ -e /usr/include/openssl/ssl.h ] || missing+=("libssl-dev")
if [ ${#missing[@]} -gt 0 ]; then
    echo "build.sh: missing tools: ${missing[*]}" >&2
    echo "  apt-get install gcc make flex bison bc perl xz-utils dpkg-dev libelf-dev libssl-dev" >&2
    exit 1
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -e "$keyring" ] || { echo "build.sh: $keyring missing (debian-archive-keyring)" >&2; exit 1; }

if [ -z "$mirror" ]; then
    # The machine's Debian mirror (deb822 or one-line sources); only Debian's mirror is reachable.
    mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | grep -v '^[[:space:]]*#' | grep -E '^(URIs:|deb )' | grep -oE 'https?://[^ ]+/debian/?( |$)' \
        | head -1 | tr -d ' ' || true)
    mirror=${mirror:-http://deb.debian.org/debian}
fi

work=$repo/target/vm/kbuild
apt=$repo/target/vm/apt/$suite-src
mkdir -p "$work" "$apt"/{etc/sources.list.d,etc/preferences.d,state/lists/partial,cache/archives/partial}
touch "$apt/state/status"
# Debian's kernel source reaches us as the `linux-source-X.Y` package built from the `linux`
# source package (a tarball of the source with Debian's patches applied). `apt-get source linux`
# would be the same tree, but the mirror reachable here serves only some versions' .dsc/.orig
# (7.2.13's gave 404) while it serves every linux-source-X.Y .deb, so we take that.
echo "deb [signed-by=$keyring] $mirror $suite main" > "$apt/etc/sources.list"
aptopts=(-o "Dir::State=$apt/state" -o "Dir::State::status=$apt/state/status"
         -o "Dir::Cache=$apt/cache" -o "Dir::Etc::SourceList=$apt/etc/sources.list"
         -o "Dir::Etc::SourceParts=$apt/etc/sources.list.d" -o "Dir::Etc::Preferences=$apt/etc/preferences"
         -o "Dir::Etc::PreferencesParts=$apt/etc/preferences.d" -o "APT::Sandbox::User=root")

if ! ls "$apt"/state/lists/*_Packages* >/dev/null 2>&1; then
    echo "build.sh: apt-get update of a private apt state for $suite ($mirror)"
    apt-get "${aptopts[@]}" update -q
fi
# linux-source (metapackage) -> linux-source-X.Y, the generation of the suite's cloud kernel.
pkg=$(apt-cache "${aptopts[@]}" depends linux-source | sed -n 's/^ *Depends: \(linux-source-[0-9.]*\)$/\1/p' | head -n 1)
[ -n "$pkg" ] || { echo "build.sh: apt-cache depends linux-source names no linux-source-X.Y in $suite" >&2; exit 1; }
version=$(apt-cache "${aptopts[@]}" policy "$pkg" | sed -n 's/^ *Candidate: //p')
[ -n "$version" ] && [ "$version" != "(none)" ] || { echo "build.sh: no candidate for $pkg in $suite" >&2; exit 1; }
upstream=${version%-*}
src=$work/linux-$upstream
echo "build.sh: Debian $pkg $version ($suite)"

if [ ! -e "$work/src-$version.done" ]; then
    (cd "$work" && apt-get "${aptopts[@]}" download -q "$pkg=$version")
    deb=$(ls "$work/${pkg}_"*"${version}"_all.deb | head -n 1)
    rm -rf "$work/unpack" "$src"
    dpkg-deb -x "$deb" "$work/unpack"
    tarball=$(ls "$work"/unpack/usr/src/linux-source-*.tar.* | head -n 1)
    mkdir -p "$src"
    tar -xf "$tarball" -C "$src" --strip-components=1
    rm -rf "$work/unpack" "$deb"
    touch "$work/src-$version.done"
fi

# Patch state: keep a pristine copy of the files our patch touches, so a changed patch is
# re-applied on the original sources rather than on top of the previous version.
stamp=$work/patch-applied
want=none
[ "$patch" = 1 ] && want=$(sha256sum "$here/xdp-generic-xmit-batch.patch" | cut -c1-16)
have=$(cat "$stamp" 2>/dev/null || echo none)
if [ "$want" != "$have" ]; then
    if [ "$have" != none ] && [ -e "$work/patch-applied.patch" ]; then
        patch -d "$src" -p1 -R -s < "$work/patch-applied.patch"
    fi
    rm -f "$stamp" "$work/patch-applied.patch"
    if [ "$patch" = 1 ]; then
        patch -d "$src" -p1 -s --no-backup-if-mismatch < "$here/xdp-generic-xmit-batch.patch"
        cp "$here/xdp-generic-xmit-batch.patch" "$work/patch-applied.patch"
    fi
    echo "$want" > "$stamp"
fi

name=batch
[ "$patch" = 1 ] || name=stock
out=$work/obj-$name
mkdir -p "$out"
# tinyconfig, then our fragment, then olddefconfig fills the rest with defaults.
if [ ! -e "$out/.config" ] || [ "$here/guest.config" -nt "$out/.config" ]; then
    make -C "$src" O="$out" -s tinyconfig
    "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$here/guest.config" >/dev/null
    make -C "$src" O="$out" -s olddefconfig
    # Every option of the fragment must have survived (a missing dependency drops it silently).
    bad=0
    while IFS= read -r line; do
        case "$line" in CONFIG_*=*) ;; *) continue ;; esac
        grep -qx "$line" "$out/.config" || { echo "build.sh: $line did not stick in .config" >&2; bad=1; }
    done < "$here/guest.config"
    [ $bad = 0 ] || exit 1
fi
echo "build.sh: make -j$jobs bzImage in $out (slow: about 50 min here on 2 cores shared with other builds)"
nice -n 19 make -C "$src" O="$out" -j"$jobs" -s bzImage
cp "$out/arch/x86/boot/bzImage" "$work/bzImage-$name"
rel=$(cat "$out/include/config/kernel.release")
cat > "$work/$name.json" <<JSON
{"bzimage": "$work/bzImage-$name", "release": "$rel", "debian_source": "linux $version", "suite": "$suite", "patch": "$want", "config": "$out/.config"}
JSON
echo "build.sh: done: $work/bzImage-$name ($rel)"
