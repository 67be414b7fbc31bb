#!/bin/sh
# start-test-cluster.sh starts a throwaway PostgreSQL cluster for the store tests
# and prints its URL on stdout (everything else goes to stderr), so that
#
#   export DATACHAT_TEST_POSTGRES_URL="$(internal/postgres/testdata/start-test-cluster.sh)"
#
# enables them. It is idempotent: an existing cluster in DIR is reused, a running
# one is left running.
#
# usage: start-test-cluster.sh [DIR] [PORT]
#   DIR   cluster directory (env PGTEST_DIR,  default /tmp/datachat-pgtest)
#   PORT  TCP port on 127.0.0.1 (env PGTEST_PORT, default 55432)
#
# initdb refuses to run as root: as root the cluster is run by the postgres user.
# When initdb is missing, PostgreSQL is installed with apt-get (root only).
# Stop the cluster with: pg_ctl -D DIR/data stop (as the same user).
set -eu

dir=${1:-${PGTEST_DIR:-/tmp/datachat-pgtest}}
port=${2:-${PGTEST_PORT:-55432}}

log() { echo "start-test-cluster: $*" >&2; }

find_bindir() {
	if command -v pg_config >/dev/null 2>&1; then
		d=$(pg_config --bindir 2>/dev/null || true)
		if [ -n "$d" ] && [ -x "$d/initdb" ]; then
			echo "$d"
			return 0
		fi
	fi
	# Debian keeps the server binaries out of PATH; take the newest version.
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n -r); do
		if [ -x "$d/initdb" ]; then
			echo "$d"
			return 0
		fi
	done
	if command -v initdb >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
		return 0
	fi
	return 1
}

bindir=$(find_bindir || true)
if [ -z "$bindir" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		log "initdb not found and not root: install PostgreSQL (e.g. apt-get install postgresql)"
		exit 1
	fi
	log "initdb not found: installing postgresql with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y --no-install-recommends postgresql >&2
	bindir=$(find_bindir || true)
	if [ -z "$bindir" ]; then
		log "initdb still not found after installing postgresql"
		exit 1
	fi
fi

# as_owner runs a command as the cluster's owner: postgres when we are root.
if [ "$(id -u)" -eq 0 ]; then
	owner=postgres
	as_owner() { runuser -u postgres -- "$@"; }
else
	owner=$(id -un)
	as_owner() { "$@"; }
fi

mkdir -p "$dir"
chown "$owner" "$dir"
chmod 700 "$dir"
data=$dir/data

if [ ! -f "$data/PG_VERSION" ]; then
	log "initdb $data"
	as_owner "$bindir/initdb" -D "$data" -A trust -U postgres >&2
fi

if as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
	log "cluster in $data already running"
else
	log "starting cluster in $data on 127.0.0.1:$port"
	as_owner "$bindir/pg_ctl" -D "$data" \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1" \
		-l "$dir/log" -w -t 60 start >&2 || {
		log "pg_ctl start failed; log follows"
		tail -n 50 "$dir/log" >&2 || true
		exit 1
	}
fi

i=0
until "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; do
	i=$((i + 1))
	if [ "$i" -ge 60 ]; then
		log "cluster not ready on 127.0.0.1:$port after 30s"
		tail -n 50 "$dir/log" >&2 || true
		exit 1
	fi
	sleep 0.5
done

echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
