#!/usr/bin/env bash
# Builds the static, CGO-free ./dataservice binary with its version compiled in.
set -euo pipefail
cd "$(dirname "$0")"
VERSION="${VERSION:-4.9.0}"
VERSION_DATE="${VERSION_DATE:-2026-11-22}"
CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X dataservice/internal/cli.version=${VERSION} -X dataservice/internal/cli.versionDate=${VERSION_DATE}" \
  -o dataservice .
echo "built ./dataservice ${VERSION} (${VERSION_DATE})"
