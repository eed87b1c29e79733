#!/bin/sh
# Starts PostgreSQL as the postgres user, creating the cluster on first
# start: superuser postgres and role codeexec (owner of database
# codeexec) both get the password in $POSTGRES_PASSWORD_FILE, and every
# TCP client must give it (scram-sha-256).
set -eu
bin=/usr/lib/postgresql/15/bin
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_PASSWORD_FILE:?set POSTGRES_PASSWORD_FILE to a file holding the password}"
pw=$(cat "$POSTGRES_PASSWORD_FILE")
[ -n "$pw" ] || { echo "postgres: $POSTGRES_PASSWORD_FILE is empty" >&2; exit 1; }
case "$pw" in *"'"*) echo "postgres: the password must not contain a single quote" >&2; exit 1 ;; esac
mkdir -p "$PGDATA"
chown postgres:postgres "$PGDATA"
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  echo "postgres: creating the cluster in $PGDATA" >&2
  pwfile=$(mktemp)
  printf '%s\n' "$pw" >"$pwfile"
  chown postgres "$pwfile"
  runuser -u postgres -- "$bin/initdb" -D "$PGDATA" -U postgres --pwfile="$pwfile" \
    --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
  runuser -u postgres -- "$bin/postgres" --single -D "$PGDATA" postgres >/dev/null <<SQL
CREATE ROLE codeexec LOGIN PASSWORD '$pw';
CREATE DATABASE codeexec OWNER codeexec;
SQL
fi
mkdir -p /var/run/postgresql
chown postgres:postgres /var/run/postgresql
exec runuser -u postgres -- "$bin/postgres" -D "$PGDATA"
