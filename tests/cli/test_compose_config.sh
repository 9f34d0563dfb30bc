#!/bin/sh
# docker-compose.yml is valid and has the services the README promises.
set -eu
cd "$ALTAR_SOURCE_DIR"
command -v docker-compose >/dev/null || { echo "docker-compose is not installed (scripts/install-deps.sh test)"; exit 1; }
docker-compose -f docker-compose.yml config -q
services="$(docker-compose -f docker-compose.yml config --services | sort | tr '\n' ' ')"
for s in kafka reconciler worker submit; do
  case " $services " in *" $s "*) ;; *) echo "missing service $s (have: $services)"; exit 1 ;; esac
done
# The worker must be scalable: no fixed container name or host port.
if docker-compose -f docker-compose.yml config | awk '/^  worker:/{w=1;next} /^  [a-z]/{w=0} w' | grep -Eq 'container_name|ports:'; then
  echo "worker has a container_name or ports: it would not scale"; exit 1
fi
echo "docker-compose.yml: valid; services: $services"
