#!/bin/sh
# The container's HEALTHCHECK: healthy while /v2/health/ready answers 200
# (not shutting down, a worker up, able to serve). Asks the address gpufaas
# listens on (GPUFAAS_LISTEN), 127.0.0.1 when it listens on every address.
listen=${GPUFAAS_LISTEN:-127.0.0.1:8080}
host=${listen%:*}
port=${listen##*:}
case $host in 0.0.0.0|'') host=127.0.0.1 ;; esac
exec curl -fsS -o /dev/null --max-time 2 "http://$host:$port/v2/health/ready"
