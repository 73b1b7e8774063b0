#!/usr/bin/env bash
# A local 3-server MariaDB Galera cluster on 127.0.0.1 for tests and demos
# (docs/ARCHITECTURE.md "The store on Galera").
#
#   scripts/galera.sh up            start the cluster (the first server bootstraps it)
#   scripts/galera.sh down          stop every server and remove the data
#   scripts/galera.sh status        one line per server: port, pid, state, cluster size
#   scripts/galera.sh kill N        kill -9 server N (1-3), as a crash would
#   scripts/galera.sh start N       start server N again: it rejoins (state transfer)
#   scripts/galera.sh dsn           print the ringnode --db value for the three servers
#
# Servers listen on 127.0.0.1 ports 3311-3313 (GALERA_PORT, default 3311, is
# the first), group communication on 4571-4573, incremental state transfer
# on 4581-4583 and rsync state transfer on 4591-4593. Data, sockets and logs
# live under GALERA_DIR (default: a directory under $TMPDIR or /tmp). root
# logs in over TCP with an empty password: for a test machine only.
set -euo pipefail

DIR=${GALERA_DIR:-${TMPDIR:-/tmp}/ringchat-galera}
PORT=${GALERA_PORT:-3311}
GCOMM=${GALERA_GCOMM_PORT:-4571}
PROVIDER=${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
N=3

port() { echo $((PORT + $1 - 1)); }
gport() { echo $((GCOMM + $1 - 1)); }
ist() { echo $((GCOMM + 10 + $1 - 1)); }
sst() { echo $((GCOMM + 20 + $1 - 1)); }

die() {
	echo "galera.sh: $*" >&2
	exit 1
}

check_installed() {
	[ -x /usr/sbin/mariadbd ] || die "mariadbd is not installed (scripts/mariadb.sh install)"
	[ -f "$PROVIDER" ] || die "the Galera provider $PROVIDER is missing (apt-get install galera-4)"
	command -v rsync >/dev/null || die "rsync is missing (apt-get install rsync): state transfer needs it"
}

sql() { # sql N STATEMENT: run on server N as root over TCP
	mariadb --protocol=tcp -h 127.0.0.1 -P "$(port "$1")" -uroot --connect-timeout=2 -N -B -e "$2"
}

# alive: the process runs (a killed one can stay a zombie for a second
# or so until init reaps it: that is not running).
alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "${st#Z}" = "$st" ]
}

pidof_server() {
	local f="$DIR/n$1/mysqld.pid" pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	alive "$pid" && echo "$pid"
}

# addrs FUNC: the servers' 127.0.0.1:PORT, PORT by FUNC (port or gport),
# separated by commas.
addrs() {
	local a="" i
	for i in $(seq 1 $N); do
		a="$a${a:+,}127.0.0.1:$("$1" "$i")"
	done
	echo "$a"
}

cluster_addr() { echo "gcomm://$(addrs gport)"; }

write_config() {
	local i=$1 d="$DIR/n$1"
	mkdir -p "$d/data" "$d/tmp"
	cat >"$d/my.cnf" <<EOF
[mysqld]
datadir=$d/data
tmpdir=$d/tmp
socket=$d/mysqld.sock
pid-file=$d/mysqld.pid
log-error=$d/error.log
port=$(port "$i")
bind-address=127.0.0.1
skip-name-resolve
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=128M
innodb_log_file_size=64M
innodb_flush_log_at_trx_commit=2
max_connections=500
wsrep_on=ON
wsrep_provider=$PROVIDER
wsrep_cluster_name=ringchat
wsrep_cluster_address=$(cluster_addr)
wsrep_node_name=n$i
wsrep_node_address=127.0.0.1:$(gport "$i")
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$(sst "$i")
wsrep_slave_threads=2
# A server that dies is dropped from the cluster within about a second, so
# the others commit again (defaults wait 5-15 s: made for wide networks).
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$(gport "$i");ist.recv_addr=127.0.0.1:$(ist "$i");evs.keepalive_period=PT0.2S;evs.inactive_check_period=PT0.2S;evs.suspect_timeout=PT0.7S;evs.join_retrans_period=PT0.1S;evs.inactive_timeout=PT15S;evs.install_timeout=PT7.5S;gcache.size=128M;pc.recovery=FALSE"
EOF
	chown -R mysql:mysql "$d" 2>/dev/null || true
}

wait_synced() { # wait_synced N SECONDS PID
	local i=$1 limit=$(($2 * 5)) pid=$3 s
	for _ in $(seq 1 "$limit"); do
		s=$(sql "$i" "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2 || true)
		if [ "$s" = "Synced" ]; then
			return 0
		fi
		if ! alive "$pid"; then
			tail -n 20 "$DIR/n$i/error.log" >&2 || true
			die "server $i exited while starting (log: $DIR/n$i/error.log)"
		fi
		sleep 0.2
	done
	tail -n 20 "$DIR/n$i/error.log" >&2 || true
	die "server $i is not synced after $2 s (log: $DIR/n$i/error.log)"
}

# recovered_position prints where a server that stopped (or was killed)
# left off, read from its InnoDB logs as galera_recovery does: with it, a
# rejoining server takes the writes it missed from another's cache (IST),
# which does not stop the donor, instead of a full copy (SST by rsync
# locks the donor's tables while it runs).
recovered_position() {
	local i=$1 d="$DIR/n$1"
	[ -f "$d/data/grastate.dat" ] || return 0
	/usr/sbin/mariadbd --defaults-file="$d/my.cnf" --user=mysql --wsrep-recover --disable-log-error \
		>"$d/recover.log" 2>&1 </dev/null || return 0
	sed -n 's/.*WSREP: Recovered position: *\([^ ]*\).*/\1/p' "$d/recover.log" | tail -n 1
}

start_server() { # start_server N [--wsrep-new-cluster]
	local i=$1 d="$DIR/n$1"
	shift
	if pidof_server "$i" >/dev/null; then
		return 0
	fi
	write_config "$i"
	local pos
	pos=$(recovered_position "$i")
	setsid /usr/sbin/mariadbd --defaults-file="$d/my.cnf" --user=mysql ${pos:+--wsrep-start-position="$pos"} "$@" \
		>>"$d/stdout.log" 2>&1 </dev/null &
	wait_synced "$i" 120 $!
}

do_up() {
	check_installed
	mkdir -p "$DIR"
	chmod 755 "$DIR"
	if [ ! -d "$DIR/n1/data/mysql" ]; then
		write_config 1
		mariadb-install-db --defaults-file="$DIR/n1/my.cnf" --user=mysql --auth-root-authentication-method=normal \
			--skip-test-db >"$DIR/n1/install.log" 2>&1 || {
			cat "$DIR/n1/install.log" >&2
			die "mariadb-install-db failed"
		}
	fi
	# The first server bootstraps the cluster unless another one runs.
	local running=0 i
	for i in $(seq 1 $N); do
		if pidof_server "$i" >/dev/null; then running=1; fi
	done
	if [ "$running" = 0 ]; then
		start_server 1 --wsrep-new-cluster
		sql 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" 2>/dev/null ||
			mariadb --socket="$DIR/n1/mysqld.sock" -uroot -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
	fi
	for i in $(seq 1 $N); do
		start_server "$i"
	done
	do_status
	echo "galera.sh: up; ringnode --db '$(dsn)'"
}

do_down() {
	local i pid
	for i in $(seq 1 $N); do
		pid=$(pidof_server "$i" || true)
		if [ -n "$pid" ]; then
			kill "$pid" 2>/dev/null || true
		fi
	done
	for i in $(seq 1 $N); do
		for _ in $(seq 1 150); do
			pidof_server "$i" >/dev/null || break
			sleep 0.2
		done
		pid=$(pidof_server "$i" || true)
		if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
	done
	rm -rf "$DIR"
	echo "galera.sh: down"
}

do_status() {
	local i pid state size
	for i in $(seq 1 $N); do
		pid=$(pidof_server "$i" || true)
		if [ -z "$pid" ]; then
			echo "server $i  127.0.0.1:$(port "$i")  down"
			continue
		fi
		state=$(sql "$i" "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2 || true)
		size=$(sql "$i" "SHOW STATUS LIKE 'wsrep_cluster_size'" 2>/dev/null | cut -f2 || true)
		echo "server $i  127.0.0.1:$(port "$i")  pid $pid  ${state:-not answering}  cluster size ${size:-?}"
	done
}

dsn() { echo "mysql://root@$(addrs port)/ringchat"; }

server_arg() {
	[[ "${1:-}" =~ ^[1-3]$ ]] || die "name a server: 1, 2 or 3"
}

case "${1:-}" in
up) do_up ;;
down) do_down ;;
status) do_status ;;
kill)
	server_arg "${2:-}"
	pid=$(pidof_server "$2") || die "server $2 is not running"
	kill -9 "$pid"
	for _ in $(seq 1 100); do
		alive "$pid" || break
		sleep 0.1
	done
	echo "galera.sh: killed server $2 (pid $pid)"
	;;
start)
	server_arg "${2:-}"
	check_installed
	start_server "$2"
	echo "galera.sh: server $2 synced"
	;;
dsn) dsn ;;
*)
	sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
