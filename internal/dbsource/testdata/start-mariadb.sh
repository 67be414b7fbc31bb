#!/bin/sh
# start-mariadb.sh starts a throwaway MariaDB server for the database-source
# tests and prints its URL on stdout (everything else goes to stderr), so that
#
#   export DATACHAT_TEST_MYSQL_URL="$(sh internal/dbsource/testdata/start-mariadb.sh)"
#
# enables them. It installs nothing: it needs Debian's mariadb-server
# (apt-get install mariadb-server; the package's own service is not used). It
# is idempotent: an existing server in DIR is reused, a running one is left
# running. The URL names an administrator, datachat_admin, that the tests use
# to create their databases and users; the server listens on 127.0.0.1 only.
#
# usage: start-mariadb.sh [DIR] [PORT]
#   DIR   server directory (env MARIADBTEST_DIR,  default /tmp/datachat-mariadbtest)
#   PORT  TCP port on 127.0.0.1 (env MARIADBTEST_PORT, default 55433)
#
# Stop it with: kill "$(cat DIR/mariadbd.pid)"
set -eu

dir=${1:-${MARIADBTEST_DIR:-/tmp/datachat-mariadbtest}}
port=${2:-${MARIADBTEST_PORT:-55433}}

log() { echo "start-mariadb: $*" >&2; }

for cmd in mariadbd mariadb-install-db mariadb-admin mariadb; do
	if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
		log "$cmd not found: install MariaDB (apt-get install mariadb-server)"
		exit 1
	fi
done
PATH=$PATH:/usr/sbin

# The server runs as mysql when we are root (mariadbd refuses root), else as us.
if [ "$(id -u)" -eq 0 ]; then
	owner=mysql
else
	owner=$(id -un)
fi

mkdir -p "$dir"
chown "$owner" "$dir"
chmod 700 "$dir"
data=$dir/data
sock=$dir/mariadbd.sock
pidfile=$dir/mariadbd.pid

if [ ! -d "$data/mysql" ]; then
	log "mariadb-install-db $data"
	mariadb-install-db --no-defaults --user="$owner" --datadir="$data" \
		--auth-root-authentication-method=socket --skip-test-db >&2
fi

if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
	log "server in $data already running"
else
	log "starting mariadbd in $data on 127.0.0.1:$port"
	# setsid: the server outlives this script and the shell that ran it.
	setsid mariadbd --no-defaults --user="$owner" --datadir="$data" \
		--port="$port" --bind-address=127.0.0.1 --socket="$sock" \
		--pid-file="$pidfile" --log-error="$dir/log" --tmpdir="$dir" \
		--innodb-buffer-pool-size=256M --skip-log-bin \
		--character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
		</dev/null >/dev/null 2>&1 &
fi

i=0
until mariadb-admin --no-defaults --socket="$sock" -u "$(id -un)" ping >/dev/null 2>&1; do
	i=$((i + 1))
	if [ "$i" -ge 120 ]; then
		log "server not ready on 127.0.0.1:$port after 60s; log follows"
		tail -n 50 "$dir/log" >&2 || true
		exit 1
	fi
	sleep 0.5
done

# As root, MariaDB's root@localhost authenticates by the socket's peer user.
mariadb --no-defaults --socket="$sock" -u "$(id -un)" >&2 <<SQL
CREATE USER IF NOT EXISTS 'datachat_admin'@'127.0.0.1' IDENTIFIED BY 'datachat';
GRANT ALL PRIVILEGES ON *.* TO 'datachat_admin'@'127.0.0.1' WITH GRANT OPTION;
SQL

echo "mysql://datachat_admin:datachat@127.0.0.1:$port/"
