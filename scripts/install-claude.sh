#!/usr/bin/env bash
# Install the pinned Claude Code CLI into $REPO/.cache/claude (idempotent) and print the path of
# the `claude` executable. Needs node + npm and the npm registry; nothing else is downloaded: the
# npm package ships the native binary as a platform optionalDependency
# (@anthropic-ai/claude-code-<os>-<arch>) and its postinstall only copies/links it over
# bin/claude.exe (no network).
#
#   CLAUDE_CODE_VERSION  override the pinned version
#   CLAUDE_INSTALL_DIR   override the install prefix
set -euo pipefail

VERSION="${CLAUDE_CODE_VERSION:-2.1.332}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${CLAUDE_INSTALL_DIR:-$REPO/.cache/claude}"
PKG_JSON="$DIR/node_modules/@anthropic-ai/claude-code/package.json"
BIN="$DIR/node_modules/.bin/claude"

installed_ok() {
    [ -f "$PKG_JSON" ] && [ -x "$BIN" ] || return 1
    local have
    have="$(sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$PKG_JSON" | head -n1)"
    [ "$have" = "$VERSION" ] || return 1
    # The postinstall replaces the placeholder with the native binary; if it did not run (e.g.
    # --ignore-scripts) the placeholder prints an error instead of a version.
    "$BIN" --version 2>/dev/null | grep -q "^$VERSION "
}

if ! installed_ok; then
    command -v npm >/dev/null || { echo "install-claude.sh: npm not found (need node + npm)" >&2; exit 1; }
    mkdir -p "$DIR"
    # A private package.json keeps npm from walking up into some other project.
    [ -f "$DIR/package.json" ] || printf '{"name":"agentmaild-claude-cache","private":true}\n' >"$DIR/package.json"
    echo "install-claude.sh: installing @anthropic-ai/claude-code@$VERSION into $DIR" >&2
    npm install --prefix "$DIR" --no-audit --no-fund --no-progress --no-save --loglevel=error --include=optional \
        --foreground-scripts "@anthropic-ai/claude-code@$VERSION" >&2
    if ! installed_ok; then
        # npm versions that gate install scripts (allowScripts) may skip the postinstall; run it.
        (cd "$DIR/node_modules/@anthropic-ai/claude-code" && node install.cjs) >&2 || true
    fi
    installed_ok || { echo "install-claude.sh: claude $VERSION did not install correctly" >&2; exit 1; }
fi
echo "$BIN"
