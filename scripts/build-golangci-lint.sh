#!/usr/bin/env bash
# Builds golangci-lint into the cache (once per version) and prints its
# path. `go install pkg@version` builds it in its own module context, so
# our go.mod is untouched by its many dependencies.
set -euo pipefail
version="${GOLANGCI_LINT_VERSION:-v2.15.0}"
cache="${UPGRADELAB_CACHE:-$HOME/.cache/upgradelab}"
bin="$cache/bin/golangci-lint-$version/golangci-lint"
if [ ! -x "$bin" ]; then
	echo "building golangci-lint $version (cold: a few minutes)" >&2
	GOBIN="$(dirname "$bin")" GOFLAGS=-mod=mod go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version" >&2
fi
echo "$bin"
