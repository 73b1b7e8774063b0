#!/usr/bin/env bash
# Makes sure a MariaDB server answers at 127.0.0.1:3306 for root with an
# empty password, as the tests expect (ENGINEERING.md, "MariaDB on a machine").
#
#   scripts/mariadb.sh install   install mariadb-server with apt-get if missing
#   scripts/mariadb.sh start     start the server if it is installed and down
#   scripts/mariadb.sh ensure    install, start, and open root over TCP
#   scripts/mariadb.sh ping      exit 0 if the server answers over TCP
set -euo pipefail

HOST=127.0.0.1
PORT=3306

ping_tcp() {
	mariadb-admin --protocol=tcp -h "$HOST" -P "$PORT" -uroot --connect-timeout=2 ping >/dev/null 2>&1
}

installed() {
	[ -x /usr/sbin/mariadbd ] && command -v mariadb-admin >/dev/null 2>&1
}

do_install() {
	if installed; then
		return 0
	fi
	echo "mariadb.sh: installing mariadb-server" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq mariadb-server mariadb-client >/dev/null
}

do_start() {
	if ping_tcp; then
		return 0
	fi
	if ! installed; then
		echo "mariadb.sh: MariaDB is not installed (run: scripts/mariadb.sh install)" >&2
		return 1
	fi
	echo "mariadb.sh: starting mariadbd" >&2
	mkdir -p /run/mysqld
	chown mysql:mysql /run/mysqld
	if [ ! -d /var/lib/mysql/mysql ]; then
		mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
	fi
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
	for _ in $(seq 1 300); do
		if mariadb-admin --connect-timeout=1 ping >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	echo "mariadb.sh: mariadbd did not answer within 60 s" >&2
	return 1
}

# open_root lets root in over TCP with an empty password, which a fresh
# Debian install refuses (root there logs in through the unix socket only).
open_root() {
	if ping_tcp && mariadb --protocol=tcp -h "$HOST" -P "$PORT" -uroot -e 'SELECT 1' >/dev/null 2>&1; then
		return 0
	fi
	echo "mariadb.sh: allowing root@127.0.0.1 with an empty password (test machine)" >&2
	mariadb -uroot <<'SQL'
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
FLUSH PRIVILEGES;
SQL
	mariadb --protocol=tcp -h "$HOST" -P "$PORT" -uroot -e 'SELECT 1' >/dev/null
}

case "${1:-}" in
install) do_install ;;
start) do_start ;;
ensure)
	do_install
	do_start
	open_root
	;;
ping) ping_tcp ;;
*)
	echo "usage: scripts/mariadb.sh install|start|ensure|ping" >&2
	exit 2
	;;
esac
