# Sourced by the bench scripts that need a throw-away PostgreSQL:
#
#   source bench/scratch_postgres.sh
#   start_scratch_postgres      # sets WORK (a new temporary directory), PGBIN, URI
#
# initdb in $WORK/pg (trust authentication, user kls, durable settings as in
# production: fsync on), a free loopback port, database kls. An EXIT trap
# kills the PIDs listed in the PIDS array, stops PostgreSQL and removes $WORK.
PIDS=()
as_pg() { if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cleanup_scratch_postgres() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  as_pg "$PGBIN/pg_ctl" stop -D "$WORK/pg" -m immediate -w >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
start_scratch_postgres() {
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  WORK=$(mktemp -d /tmp/kls-pg-XXXXXX)
  trap cleanup_scratch_postgres EXIT
  [[ $(id -u) == 0 ]] && chown postgres "$WORK"
  PGPORT=$(free_port)
  as_pg "$PGBIN/initdb" -A trust -U kls -E UTF8 -D "$WORK/pg" >"$WORK/initdb.log"
  as_pg "$PGBIN/pg_ctl" start -w -D "$WORK/pg" -l "$WORK/pg.log" \
    -o "-p $PGPORT -c listen_addresses=127.0.0.1 -k $WORK -c max_connections=200" >/dev/null
  as_pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U kls kls
  URI="postgresql://kls@127.0.0.1:$PGPORT/kls"
}
