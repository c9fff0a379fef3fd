#!/usr/bin/env bash
# The Node.js side of the `http` tests (tests/http/CMakeLists.txt):
#   node.sh ci SOURCE_DIR DEST_DIR   npm ci of SOURCE_DIR's package.json and
#                                    package-lock.json into DEST_DIR (the build
#                                    tree: node_modules never lands in the
#                                    sources); skipped when the lock file is
#                                    unchanged since the last install
#   node.sh run MODULES_DIR SCRIPT ARGS...
#                                    node SCRIPT ARGS with MODULES_DIR/node_modules
#                                    on NODE_PATH
# Exit 77 (ctest: skipped) with the reason when node or npm is missing
# (deploy/install-deps.sh installs them) or the install did not happen.
set -euo pipefail

skip() {
  echo "SKIP: $*" >&2
  exit 77
}

command -v node >/dev/null 2>&1 || skip "node is not installed (bash deploy/install-deps.sh installs Node.js and npm)"

case "${1:-}" in
  ci)
    [[ $# -eq 3 ]] || { echo "usage: node.sh ci SOURCE_DIR DEST_DIR" >&2; exit 2; }
    command -v npm >/dev/null 2>&1 || skip "npm is not installed (bash deploy/install-deps.sh installs it)"
    src=$2 dest=$3
    mkdir -p "$dest"
    stamp="$dest/node_modules/.kls-lock-installed"
    if [[ -f "$stamp" ]] && cmp -s "$src/package-lock.json" "$stamp" &&
       cmp -s "$src/package.json" "$dest/package.json"; then
      echo "node.sh: $dest/node_modules is up to date with $src/package-lock.json"
      exit 0
    fi
    cp "$src/package.json" "$src/package-lock.json" "$dest/"
    cd "$dest"
    npm ci --no-audit --no-fund --loglevel=error
    cp package-lock.json "$stamp"
    count=$(node -e 'console.log(Object.keys(require("./package-lock.json").packages).length - 1)')
    echo "node.sh: installed $count packages into $dest/node_modules (node $(node --version), npm $(npm --version))"
    ;;
  run)
    [[ $# -ge 3 ]] || { echo "usage: node.sh run MODULES_DIR SCRIPT ARGS..." >&2; exit 2; }
    modules=$2/node_modules
    shift 2
    [[ -d "$modules" ]] || skip "$modules is missing: the http_npm_install test installs it (npm ci)"
    NODE_PATH="$modules" exec node "$@"
    ;;
  *)
    echo "usage: node.sh ci SOURCE_DIR DEST_DIR | node.sh run MODULES_DIR SCRIPT ARGS..." >&2
    exit 2
    ;;
esac
