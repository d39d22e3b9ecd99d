#!/usr/bin/env bash
# Resolves the pinned JVM artifacts of deploy/jvm/pom.xml (with their dependencies) into
# one classpath folder per component under $KAFKA_HEALTH_CACHE/jvm (default
# ~/.cache/kafka-health/jvm). Idempotent: skipped while the poms and the components asked
# for are unchanged.
# Usage: bash deploy/jvm/resolve.sh [COMPONENT...]   (default: every module of the pom;
#        the components: kafka jolokia jmx-exporter spark-kafka delta hadoop-aws)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${KAFKA_HEALTH_CACHE:-$HOME/.cache/kafka-health}/jvm"
components=("$@")
for component in "${components[@]}"; do
  if [ ! -f "$here/$component/pom.xml" ]; then
    echo "resolve.sh: no component $component (one of: $(cd "$here" && ls -d */ | tr -d / | tr '\n' ' '))" >&2
    exit 2
  fi
done
selection="${components[*]:-all}"
want="$(cat "$here"/pom.xml "$here"/*/pom.xml | sha1sum | cut -d' ' -f1) $selection"
stamp="$cache/.resolved"
present() {  # every component asked for has its folder (one removed by hand is resolved again)
  local pom
  for pom in "$here"/*/pom.xml; do
    local component; component="$(basename "$(dirname "$pom")")"
    if [ "${#components[@]}" -gt 0 ] && [[ " ${components[*]} " != *" $component "* ]]; then
      continue
    fi
    [ -d "$cache/$component" ] || return 1
  done
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && present; then
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "kafka-health needs Maven (mvn) to fetch its JVM artifacts; install Debian's 'maven' package" >&2
  exit 1
fi
echo "resolving JVM artifacts ($selection) with Maven into $cache (once)" >&2
projects=()
if [ "${#components[@]}" -gt 0 ]; then
  projects=(-pl "$(IFS=,; echo "${components[*]}")")
fi
rm -rf "$cache.partial"
mvn -q -B -f "$here/pom.xml" "${projects[@]}" dependency:copy-dependencies -Dkh.jars="$cache.partial" >&2
rm -rf "$cache"
mv "$cache.partial" "$cache"
echo "$want" > "$stamp"
