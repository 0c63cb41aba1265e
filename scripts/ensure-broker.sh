#!/usr/bin/env bash
# Make sure a local RabbitMQ runs with its management plugin, and wait until 5672 and 15672 answer.
# Installs it from Debian's packages when it is missing and we are root on Debian; otherwise says
# exactly what to do. Skipped when GRIDBUS_URL points at another broker.
set -euo pipefail

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [ -n "${GRIDBUS_URL:-}" ] && [[ "$GRIDBUS_URL" != *"127.0.0.1"* && "$GRIDBUS_URL" != *"localhost"* ]]; then
  exit 0
fi

# A broker that already answers with its management plugin is all we need, whoever runs us (a plain
# user may not have rabbitmq-server on PATH, nor the right to start it).
if answers 5672 && answers 15672; then
  exit 0
fi

PATH="$PATH:/usr/sbin:/usr/local/sbin"
if ! command -v rabbitmq-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "gridbus: installing RabbitMQ from the distribution's packages" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
  else
    echo "gridbus: RabbitMQ is not installed. Install it (Debian/Ubuntu: sudo apt-get install rabbitmq-server;" >&2
    echo "  macOS: brew install rabbitmq), or point GRIDBUS_URL at a broker you have." >&2
    exit 1
  fi
fi

if ! answers 5672; then
  echo "gridbus: starting RabbitMQ" >&2
  rabbitmq-server -detached >/dev/null 2>&1 || true
fi
for _ in $(seq 1 120); do answers 5672 && break; sleep 1; done
answers 5672 || { echo "gridbus: RabbitMQ did not come up on 127.0.0.1:5672" >&2; exit 1; }

if ! answers 15672; then
  rabbitmq-plugins enable rabbitmq_management >/dev/null
fi
for _ in $(seq 1 120); do answers 15672 && break; sleep 1; done
answers 15672 || { echo "gridbus: the management plugin did not come up on 127.0.0.1:15672" >&2; exit 1; }
