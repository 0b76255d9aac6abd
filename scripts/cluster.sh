#!/usr/bin/env bash
# A local Hearth cluster on loopback: a redis-server (the shared KV tier), N `hearth serve` processes and HAProxy in
# front of them routing by prompt prefix (deploy/haproxy/). For tests, and for trying the set-up on one machine
# before spreading it over several (docs/cluster.md).
#
#   scripts/cluster.sh start [--servers 3] [--port 8080] [--redis-port 6380] [--redis on|off]
#                            [--policy prefix|roundrobin] [--prefix-chars 2048] [--dir DIR] [-- HEARTH SERVE ARGS...]
#   scripts/cluster.sh stop [--dir DIR]
#
# HAProxy listens on 127.0.0.1:PORT and the servers on PORT+1 ... PORT+N, each with its own disk tier under DIR
# (default /tmp/hearth-cluster). Everything after `--` goes to every `hearth serve` (the model, --kv-memory, ...).
# `start` returns once every server answers /health and HAProxy sees them all up; `stop` stops what `start` started
# (by the pid files in DIR) and waits for each process to exit. HEARTH_BIN overrides the binary.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${HEARTH_BIN:-$root/build/src/app/hearth}"

cmd="${1:-}"
[[ -n "$cmd" ]] && shift
servers=3 port=8080 redis_port=6380 redis=on policy=prefix prefix_chars=2048 dir=/tmp/hearth-cluster
hearth_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --servers) servers="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --redis-port) redis_port="$2"; shift 2 ;;
    --redis) redis="$2"; shift 2 ;;
    --policy) policy="$2"; shift 2 ;;
    --prefix-chars) prefix_chars="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --) shift; hearth_args=("$@"); break ;;
    *) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

die() { echo "cluster.sh: $*" >&2; exit 1; }

# Waits until `curl URL` succeeds, at most $2 seconds.
wait_http() {
  local url="$1" limit="$2" i
  for ((i = 0; i < limit * 10; i++)); do
    if curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

stop_pid_file() {
  local f="$1" pid i
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

case "$cmd" in
  start)
    [[ "$servers" =~ ^[0-9]+$ && "$servers" -ge 1 && "$servers" -le 64 ]] || die "--servers must be 1..64"
    [[ "$policy" == prefix || "$policy" == roundrobin ]] || die "--policy must be prefix or roundrobin"
    [[ "$prefix_chars" =~ ^[0-9]+$ && "$prefix_chars" -ge 1 ]] || die "--prefix-chars must be a positive number"
    [[ -x "$bin" ]] || die "no hearth binary at $bin (scripts/build.sh --target hearth)"
    command -v haproxy >/dev/null || die "haproxy is not installed (apt-get install haproxy)"
    mkdir -p "$dir"
    chmod 700 "$dir"
    redis_args=()
    if [[ "$redis" == on ]]; then
      command -v redis-server >/dev/null || die "redis-server is not installed (apt-get install redis-server)"
      redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
        --daemonize no --maxmemory 1gb --maxmemory-policy allkeys-lru >"$dir/redis.log" 2>&1 &
      echo $! >"$dir/redis.pid"
      for ((i = 0; i < 50; i++)); do
        redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
        sleep 0.1
      done
      redis-cli -p "$redis_port" ping >/dev/null 2>&1 || die "redis-server did not start (see $dir/redis.log)"
      redis_args=(--kv-redis "redis://127.0.0.1:$redis_port")
    fi
    for ((n = 1; n <= servers; n++)); do
      mkdir -p "$dir/disk$n"
      "$bin" serve --host 127.0.0.1 --port $((port + n)) --kv-disk "$dir/disk$n" "${redis_args[@]}" \
        "${hearth_args[@]}" >"$dir/hearth$n.log" 2>&1 &
      echo $! >"$dir/hearth$n.pid"
    done
    for ((n = 1; n <= servers; n++)); do
      wait_http "http://127.0.0.1:$((port + n))/health" 120 || die "hearth server $n did not start (see $dir/hearth$n.log)"
    done
    cfg="$dir/haproxy.cfg"
    {
      while IFS= read -r line; do
        case "$line" in
          *"# CLUSTER lua"*)
            echo "    lua-load $root/deploy/haproxy/hearth_prefix.lua"
            # The stats socket lets tests and operators see each server's state (show servers state).
            echo "    stats socket $dir/haproxy.sock mode 600 level admin"
            ;;
          *"setenv HEARTH_PREFIX_CHARS"*) echo "    setenv HEARTH_PREFIX_CHARS $prefix_chars" ;;
          *"# CLUSTER bind"*) echo "    bind 127.0.0.1:$port" ;;
          *"# CLUSTER server"*) ;;
          "    balance hash"*) [[ "$policy" == prefix ]] && echo "$line" || echo "    balance roundrobin" ;;
          "    hash-type consistent"*) [[ "$policy" == prefix ]] && echo "$line" ;;
          *) echo "$line" ;;
        esac
      done <"$root/deploy/haproxy/hearth.cfg"
      for ((n = 1; n <= servers; n++)); do echo "    server hearth$n 127.0.0.1:$((port + n))"; done
    } >"$cfg"
    haproxy -c -q -f "$cfg" || die "haproxy refused $cfg"
    haproxy -db -f "$cfg" >"$dir/haproxy.log" 2>&1 &
    echo $! >"$dir/haproxy.pid"
    wait_http "http://127.0.0.1:$port/health" 30 || die "haproxy did not start (see $dir/haproxy.log)"
    echo "cluster: http://127.0.0.1:$port ($servers servers on $((port + 1))..$((port + servers)), policy $policy, redis $redis, logs in $dir)"
    ;;
  stop)
    stop_pid_file "$dir/haproxy.pid"
    for f in "$dir"/hearth*.pid; do [[ -e "$f" ]] && stop_pid_file "$f"; done
    stop_pid_file "$dir/redis.pid"
    echo "cluster: stopped ($dir)"
    ;;
  *)
    echo "usage: scripts/cluster.sh start|stop [options] [-- hearth serve args]" >&2
    exit 2
    ;;
esac
