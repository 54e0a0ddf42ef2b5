#!/usr/bin/env bash
# Re-create the vendored JavaScript that the HTML book serves itself, so that widgets render
# offline (no CDN): require.js and the ipywidgets HTML manager (@jupyter-widgets/html-manager,
# the version myst-nb's defaults name). The files are COMMITTED (book/_extra/_static/_vendor/, about
# 4.6 MB, 1.6 MB compressed in git): building the book then needs neither node nor a network.
# Run this only to change versions; it needs npm and the npm registry, then check the diff:
#   bash tests/vendor_js.sh && git diff --stat book/_extra
# `--check` verifies the committed files against SHA256SUMS instead (offline; tests do this too).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=book/_extra/_static/_vendor
if [ "${1:-}" = --check ]; then
    (cd "$dest" && sha256sum --quiet -c SHA256SUMS) && echo "vendored JS: checksums match"
    exit
fi
HTML_MANAGER=@jupyter-widgets/html-manager@1.0.6
REQUIREJS=requirejs@2.3.4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$HTML_MANAGER" "$REQUIREJS" >/dev/null)
mkdir -p "$tmp/hm" "$tmp/rq"
tar xzf "$tmp"/jupyter-widgets-html-manager-*.tgz -C "$tmp/hm"
tar xzf "$tmp"/requirejs-*.tgz -C "$tmp/rq"
rm -rf "$dest/html-manager" "$dest/requirejs"
mkdir -p "$dest/html-manager" "$dest/requirejs"
# The AMD bundle and the icon fonts it references. Only the woff2 fonts: every browser the theme
# supports picks woff2 first, and the other formats would double the size.
cp "$tmp/hm/package/dist/embed-amd.js" "$tmp"/hm/package/dist/*.woff2 "$tmp/hm/package/LICENSE" "$dest/html-manager/"
cp "$tmp/rq/package/require.js" "$dest/requirejs/"
sed -n '1,/\*\//p' "$tmp/rq/package/require.js" > "$dest/requirejs/LICENSE"  # its license header
printf '%s\n%s\n' "$HTML_MANAGER" "$REQUIREJS" > "$dest/VERSIONS"
(cd "$dest" && find html-manager requirejs VERSIONS widgets-config.js -type f | sort | xargs sha256sum > SHA256SUMS)
du -sh "$dest"
