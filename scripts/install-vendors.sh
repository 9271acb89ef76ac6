#!/usr/bin/env bash
# Install the pinned Codex, Gemini CLI and OpenCode CLIs (idempotent), each into its own
# $REPO/.cache/<vendor>, and print one line per vendor: "<vendor> <path of the executable>".
# Needs node + npm and the npm registry only: Codex and OpenCode ship their native binaries as
# platform optionalDependencies of the npm package, Gemini CLI is a JavaScript bundle.
#
#   install-vendors.sh [codex|gemini|opencode ...]   (default: all three)
#   CODEX_VERSION / GEMINI_CLI_VERSION / OPENCODE_VERSION   override a pinned version
#   VENDORS_INSTALL_DIR                                     override the prefix (default .cache)
set -euo pipefail

CODEX_VERSION="${CODEX_VERSION:-0.171.0}"
GEMINI_CLI_VERSION="${GEMINI_CLI_VERSION:-0.61.0}"
OPENCODE_VERSION="${OPENCODE_VERSION:-1.18.33}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${VENDORS_INSTALL_DIR:-$REPO/.cache}"

# vendor -> "npm-package version executable"
spec() {
    case "$1" in
        codex) echo "@openai/codex $CODEX_VERSION codex" ;;
        gemini) echo "@google/gemini-cli $GEMINI_CLI_VERSION gemini" ;;
        opencode) echo "opencode-ai $OPENCODE_VERSION opencode" ;;
        *) echo "install-vendors.sh: unknown vendor '$1' (codex, gemini, opencode)" >&2; exit 2 ;;
    esac
}

installed_ok() {  # dir package version executable
    local pkg_json="$1/node_modules/$2/package.json" bin="$1/node_modules/.bin/$4" have
    [ -f "$pkg_json" ] && [ -x "$bin" ] || return 1
    have="$(sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pkg_json" | head -n1)"
    [ "$have" = "$3" ] || return 1
    # Proves the native binary (codex, opencode) or the bundle (gemini) is really there.
    "$bin" --version 2>/dev/null | grep -q "$3"
}

install_one() {
    local vendor="$1" pkg version exe dir
    read -r pkg version exe <<<"$(spec "$vendor")"
    dir="$PREFIX/$vendor"
    if ! installed_ok "$dir" "$pkg" "$version" "$exe"; then
        command -v npm >/dev/null || { echo "install-vendors.sh: npm not found (need node + npm)" >&2; exit 1; }
        mkdir -p "$dir"
        # A private package.json keeps npm from walking up into some other project.
        [ -f "$dir/package.json" ] \
            || printf '{"name":"agentmaild-%s-cache","private":true}\n' "$vendor" >"$dir/package.json"
        echo "install-vendors.sh: installing $pkg@$version into $dir" >&2
        npm install --prefix "$dir" --no-audit --no-fund --no-progress --no-save --loglevel=error \
            --include=optional --foreground-scripts "$pkg@$version" >&2
        installed_ok "$dir" "$pkg" "$version" "$exe" \
            || { echo "install-vendors.sh: $vendor $version did not install correctly" >&2; exit 1; }
    fi
    echo "$vendor $dir/node_modules/.bin/$exe"
}

[ "$#" -gt 0 ] || set -- codex gemini opencode
for vendor in "$@"; do
    install_one "$vendor"
done
