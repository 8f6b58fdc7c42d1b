#!/usr/bin/env bash
# stage-docs.sh TARGET ROOT VERSION EPOCH MAINTAINER: run by the dist build (package phase, after stage-lib.sh and
# before the archive and the .deb), lays out TARGET/package-share as both install it (/usr/share of the .deb,
# share/ of the archive):
#   man/man1/*.1.gz                        the man pages asciidoctor made from picocli's ManPageGenerator output
#                                          (TARGET/man), gzip -9n as Debian policy wants them
#   bash-completion/completions/switchml   picocli's AutoComplete script (TARGET/switchml-completion.bash)
#   doc/switchml/changelog.gz              the Debian changelog of a native package: one entry for VERSION
#   doc/switchml/copyright                 packaging/deb/share/copyright, after checking that it names every
#                                          third-party jar of TARGET/package-lib
#   lintian/overrides/switchml             packaging/deb/share/lintian-overrides
# Every file gets the modification time EPOCH (reproducible archives). Fails when a man page or the completion
# script is missing, or a jar is not in the copyright file.
set -euo pipefail
target=$1 root=$2 version=$3 epoch=$4 maintainer=$5
share=$target/package-share
rm -rf "$share"
mkdir -p "$share/man/man1" "$share/bash-completion/completions" "$share/doc/switchml" "$share/lintian/overrides"

pages=("$target"/man/*.1)
[ -e "${pages[0]}" ] || { echo "stage-docs: no man pages in $target/man" >&2; exit 1; }
for page in "${pages[@]}"; do
  gzip -9n -c "$page" >"$share/man/man1/$(basename "$page").gz"
done
for required in switchml switchml-appliance switchml-worker switchml-ops; do
  [ -f "$share/man/man1/$required.1.gz" ] || { echo "stage-docs: no man page $required.1" >&2; exit 1; }
done

[ -s "$target/switchml-completion.bash" ] || { echo "stage-docs: no completion script $target/switchml-completion.bash" >&2; exit 1; }
# Sourced by bash-completion, not run: without picocli's #! line (Debian's policy for completion scripts).
sed '1{/^#!/d}' "$target/switchml-completion.bash" >"$share/bash-completion/completions/switchml"

# A native package's changelog: Debian's format, this version only (the project's history is its git log).
debian_version=${version/-SNAPSHOT/\~snapshot}
commit=$(git -C "$root" rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
{
  echo "switchml ($debian_version) unstable; urgency=medium"
  echo
  echo "  * Built from commit $commit of the switchml repository; its git log is"
  echo "    the history of changes."
  echo
  echo " -- $maintainer  $(LC_ALL=C date -u -R -d "@$epoch")"
} | gzip -9n >"$share/doc/switchml/changelog.gz"

# Every jar that is not one of ours (NAME-VERSION.jar of a module, switchml.jar) must match a Files pattern.
copyright=$root/packaging/deb/share/copyright
patterns=$(awk '/^Files:/ { sub(/^Files:[ ]*/, ""); files = 1 } /^[A-Z][A-Za-z-]*:/ && !/^Files:/ { files = 0 }
  files { for (i = 1; i <= NF; i++) if ($i != "*") print $i }' "$copyright")
unnamed=()
for jar in "$target"/package-lib/*.jar; do
  name=$(basename "$jar")
  [ "$name" = switchml.jar ] && continue
  [ -d "$root/${name%-"$version".jar}" ] && [ "$name" != "${name%-"$version".jar}" ] && continue
  matched=0
  while IFS= read -r pattern; do
    # shellcheck disable=SC2053
    if [[ "usr/lib/switchml/$name" == $pattern ]]; then matched=1; break; fi
  done <<<"$patterns"
  [ "$matched" = 1 ] || unnamed+=("$name")
done
if [ "${#unnamed[@]}" -gt 0 ]; then
  echo "stage-docs: packaging/deb/share/copyright names no Files paragraph for: ${unnamed[*]}" >&2
  echo "stage-docs: add each with its copyright holder and licence (see the jar's POM)" >&2
  exit 1
fi
cp "$copyright" "$share/doc/switchml/copyright"
cp "$root/packaging/deb/share/lintian-overrides" "$share/lintian/overrides/switchml"

find "$share" -exec touch -h -d "@$epoch" {} +
echo "[docs] $(ls "$share/man/man1" | wc -l) man pages, bash completion, changelog, copyright ($(ls "$target"/package-lib/*.jar | wc -l) jars named)"
