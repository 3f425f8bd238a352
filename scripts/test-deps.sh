#!/usr/bin/env bash
# Installs what `make test` needs and is missing: Debian packages (as root),
# the cue CLI (from the Go module proxy) and the Hadoop mini cluster's Maven
# artifacts. Prints one line per missing part it cannot install and fails,
# unless the developer opted out of that part (see docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need_apt+=(openssh-client)
command -v sftp >/dev/null 2>&1 || need_apt+=(openssh-client)
if [ "${CELOS_SKIP_BROWSER:-}" != 1 ]; then
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ "${CELOS_SKIP_HDFS:-}" != 1 ]; then
  command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test-deps: installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "test-deps: missing Debian packages: ${need_apt[*]} (run: sudo apt-get install ${need_apt[*]}; see docs/testing.md for CELOS_SKIP_* opt-outs)" >&2
    exit 1
  fi
fi

# The cue CLI, to check that plain `cue vet` works on a scaffolded project.
CUE_VERSION=$(go list -m -f '{{.Version}}' cuelang.org/go)
GOBIN_DIR=$(go env GOPATH)/bin
if ! "$GOBIN_DIR/cue" version 2>/dev/null | grep -q "$CUE_VERSION"; then
  echo "test-deps: installing cue $CUE_VERSION"
  go install "cuelang.org/go/cmd/cue@$CUE_VERSION"
fi

# The Hadoop mini cluster (Maven artifacts into ~/.m2, the jar under target/).
if [ "${CELOS_SKIP_HDFS:-}" != 1 ] && [ -f testdata/minicluster/pom.xml ]; then
  if [ ! -f testdata/minicluster/target/.built ] || [ testdata/minicluster/pom.xml -nt testdata/minicluster/target/.built ]; then
    echo "test-deps: building the Hadoop mini cluster (Maven)"
    (cd testdata/minicluster && mvn -q -B package dependency:copy-dependencies -DskipTests) >&2
    touch testdata/minicluster/target/.built
  fi
fi
echo "test-deps: ok"
