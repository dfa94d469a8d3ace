#!/usr/bin/env bash
# kafka-run-class.sh of the stand-in: a Kafka main class on the jars in /opt/kafka/libs.
set -euo pipefail
# shellcheck disable=SC2086 # the *_OPTS variables are lists of JVM flags
exec java ${KAFKA_HEAP_OPTS:--Xmx256M} ${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC} \
  ${KAFKA_OPTS:-} -Djava.awt.headless=true \
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml \
  -cp '/opt/kafka/libs/*' "$@"
