#!/usr/bin/env bash
# Installs what `make test` needs and is missing: Debian packages (as root),
# the cue CLI (from the Go module proxy) and the Hadoop mini cluster's Maven
# artifacts. Prints one line per missing part it cannot install and fails,
# unless the developer opted out of that part (see docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# In CI nothing is skipped: an opt-out set there is a mistake, refused at
# once (the tests refuse it too, later).
if [ "${CI:-}" = true ]; then
  for v in $(compgen -e | grep '^CELOS_SKIP_' || true); do
    if [ "${!v}" = 1 ]; then
      echo "test-deps: $v=${!v} is not allowed in CI (CI=true): CI runs every test" >&2
      exit 1
    fi
  done
fi

need_apt=()
command -v git >/dev/null 2>&1 || need_apt+=(git)
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
{ command -v ssh-keygen >/dev/null 2>&1 && command -v sftp >/dev/null 2>&1; } || need_apt+=(openssh-client)
if [ "${CELOS_SKIP_BROWSER:-}" != 1 ]; then
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ "${CELOS_SKIP_POSTGRES:-}" != 1 ]; then
  # Debian's PostgreSQL server (internal/testenv/pgtest runs it from a
  # temporary data directory; the package's own cluster is not used).
  compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need_apt+=(postgresql)
fi
if [ "${CELOS_SKIP_KERBEROS:-}" != 1 ]; then
  # MIT Kerberos: a KDC of a temporary realm (internal/testenv/kdctest).
  { command -v krb5kdc >/dev/null 2>&1 || [ -x /usr/sbin/krb5kdc ]; } || need_apt+=(krb5-kdc)
  { command -v kadmin.local >/dev/null 2>&1 || [ -x /usr/sbin/kadmin.local ]; } || need_apt+=(krb5-admin-server)
  command -v kinit >/dev/null 2>&1 || need_apt+=(krb5-user)
fi
if [ "${CELOS_SKIP_HDFS:-}" != 1 ]; then
  # A JDK (javac) to build the mini cluster's main; java to run it.
  { command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; } || need_apt+=(openjdk-17-jdk-headless)
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
  # Into $(go env GOPATH)/bin, where the tests look, whatever GOBIN says.
  if ! GOBIN="$GOBIN_DIR" go install "cuelang.org/go/cmd/cue@$CUE_VERSION"; then
    echo "test-deps: could not install the cue CLI: run GOBIN=$GOBIN_DIR go install cuelang.org/go/cmd/cue@$CUE_VERSION (it needs the Go module proxy)" >&2
    exit 1
  fi
fi

# The Hadoop mini cluster (internal/testenv/hdfstest): Maven fetches the
# Hadoop jars into ~/.m2 once, copies them to testdata/minicluster/target/
# dependency/ and builds our small main into target/minicluster.jar; tests
# then start java with that classpath and no network. Rebuilt only when the
# pom or the Java source is newer than the last build.
mc=testdata/minicluster
if [ "${CELOS_SKIP_HDFS:-}" != 1 ] && [ -f $mc/pom.xml ]; then
  if [ ! -f $mc/target/.built ] || [ ! -f $mc/target/minicluster.jar ] ||
     [ -n "$(find $mc/pom.xml $mc/src -newer $mc/target/.built -print -quit)" ]; then
    echo "test-deps: building the Hadoop mini cluster (Maven; the first time fetches ~90 MB)"
    if ! out=$(cd $mc && mvn -q -B -Dstyle.color=never package dependency:copy-dependencies -DskipTests 2>&1); then
      printf '%s\n' "$out" >&2
      echo "test-deps: the Maven build of $mc failed (output above); it needs Maven Central or a filled ~/.m2" >&2
      exit 1
    fi
    touch $mc/target/.built
  fi
  # A class-data-sharing archive of one start-up makes every later JVM
  # start faster (hdfstest uses it when it is newer than the jar). Best
  # effort: without it the tests only start slower.
  if [ ! -f $mc/target/minicluster.jsa ] || [ $mc/target/minicluster.jar -nt $mc/target/minicluster.jsa ]; then
    t=$(mktemp -d)
    abs=$(pwd -P)/$mc
    if ! java @$abs/jvm.options -XX:ArchiveClassesAtExit=$abs/target/minicluster.jsa \
        -cp "$abs/target/minicluster.jar:$abs/target/dependency/*" celos.minicluster.Main \
        -dir "$t" -format -exit-when-ready </dev/null >"$t/out" 2>&1; then
      tail -5 "$t/out" >&2
      echo "test-deps: could not record the mini cluster's class-data-sharing archive (tests will start it more slowly)" >&2
      rm -f $mc/target/minicluster.jsa
    fi
    rm -rf "$t"
  fi
fi

# A real Apache Oozie 5.2.1 (internal/testenv/oozietest): Maven fetches
# Oozie's jars and the Hadoop 2.6 client jars it is built against into
# ~/.m2 once (about 60 MB), copies them to testdata/oozie/target/dependency/
# and builds our small main (Oozie's services and REST servlets in Jetty)
# into target/oozie.jar. Oozie needs HDFS: CELOS_SKIP_HDFS=1 skips it too.
oz=testdata/oozie
if [ "${CELOS_SKIP_HDFS:-}" != 1 ] && [ "${CELOS_SKIP_OOZIE:-}" != 1 ] && [ -f $oz/pom.xml ]; then
  if [ ! -f $oz/target/.built ] || [ ! -f $oz/target/oozie.jar ] ||
     [ -n "$(find $oz/pom.xml $oz/src -newer $oz/target/.built -print -quit)" ]; then
    echo "test-deps: building the Oozie test server (Maven; the first time fetches ~60 MB)"
    if ! out=$(cd $oz && rm -rf target/dependency && mvn -q -B -Dstyle.color=never package dependency:copy-dependencies -DskipTests 2>&1); then
      printf '%s\n' "$out" >&2
      echo "test-deps: the Maven build of $oz failed (output above); it needs Maven Central or a filled ~/.m2" >&2
      exit 1
    fi
    touch $oz/target/.built
  fi
  # A class-data-sharing archive of one start-up, as for the mini cluster
  # (oozietest uses it when it is newer than the jar): about 30 % off every
  # start. Recorded against a NameNode that refuses connections (Oozie
  # starts without HDFS); best effort.
  if [ ! -f $oz/target/oozie.jsa ] || [ $oz/target/oozie.jar -nt $oz/target/oozie.jsa ]; then
    t=$(mktemp -d)
    abs=$(pwd -P)/$oz
    mkdir -p "$t/hadoop"
    printf '%s\n' '<configuration><property><name>fs.defaultFS</name><value>hdfs://127.0.0.1:1</value></property></configuration>' >"$t/hadoop/core-site.xml"
    if ! java @$abs/jvm.options -XX:ArchiveClassesAtExit=$abs/target/oozie.jsa \
        -cp "$abs/target/oozie.jar:$abs/target/dependency/*" celos.oozie.Main \
        -dir "$t/oozie" -hadoop-conf "$t/hadoop" -exit-when-ready </dev/null >"$t/out" 2>&1; then
      tail -5 "$t/out" >&2
      echo "test-deps: could not record Oozie's class-data-sharing archive (tests will start it more slowly)" >&2
      rm -f $oz/target/oozie.jsa
    fi
    rm -rf "$t"
  fi
fi

# sshd (internal/testenv/sshtest) refuses to start without this directory.
if [ ! -d /run/sshd ] && [ "$(id -u)" = 0 ]; then
  install -d -m 0755 /run/sshd
fi
echo "test-deps: ok"
