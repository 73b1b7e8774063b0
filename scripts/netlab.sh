#!/usr/bin/env bash
# netlab.sh: a lab of ssh hosts on one machine, for scripts/lab.sh, the
# end-to-end lab test and the chaos suite (README "A lab on one machine").
#
#   scripts/netlab.sh up       make the lab (idempotent; a failure undoes it all)
#   scripts/netlab.sh down     remove everything up made (namespaces, links,
#                              processes, files); safe to run any time
#   scripts/netlab.sh status   say what exists; exit 0 only if the whole lab is up
#   scripts/netlab.sh env      print the lab's settings as shell assignments
#   scripts/netlab.sh exec N CMD...   run CMD inside lab host N's network
#
# Each lab host N (1..NETLAB_HOSTS) is a network namespace NAME<N> whose
# eth0 (a veth pair) is on the bridge NAMEbr with the address
# SUBNET.N/24. On it an sshd listens on port 22 (key authentication only,
# root, the lab's own key) in a mount namespace of its own where
# /root is the host's own home directory (DIR/hN/home) and /run a tmpfs:
# what a node started over ssh writes stays on its host. The bridge has
# SUBNET.254 on this machine's side, where the lab's store listens: a
# mariadbd of its own (datadir DIR/db, port NETLAB_DB_PORT), its root
# user opened over TCP from the lab's subnet with a password generated at
# up. Nothing routes out of the subnet: the lab hosts have no default
# route, and the bridge forwards nowhere.
#
# up writes, for lab.sh and ringchat:
#   DIR/ssh_config   lab.sh --ssh-opts "-F DIR/ssh_config" (user, key, known hosts)
#   DIR/nodes.csv    one node per host, the same ports on every host
#   DIR/db.dsn       the store's DSN (mode 0600): lab.sh --db-file DIR/db.dsn
#
# Settings (environment): NETLAB_NAME (default rclab: names of the
# namespaces, links and files; letters and digits, 1-8), NETLAB_DIR
# (default /tmp/ringchat-netlab-NAME), NETLAB_SUBNET (default 198.18.0: a
# /24 inside 198.18.0.0/15, the block reserved for benchmark networks),
# NETLAB_HOSTS (default 5, at most 20), NETLAB_DB_PORT (default 3307),
# NETLAB_COORD_PORT and NETLAB_CLIENT_PORT (the node list's ports, default
# 7001 and 8001). Two labs with different names and subnets can coexist.
#
# Needs root. Installs openssh-server, iproute2 and nftables with apt-get
# when missing (and MariaDB through scripts/mariadb.sh install).
set -euo pipefail

prog=netlab.sh
here=$(cd "$(dirname "$0")" && pwd)

NAME=${NETLAB_NAME:-rclab}
SUBNET=${NETLAB_SUBNET:-198.18.0}
HOSTS=${NETLAB_HOSTS:-5}
DB_PORT=${NETLAB_DB_PORT:-3307}
COORD_PORT=${NETLAB_COORD_PORT:-7001}
CLIENT_PORT=${NETLAB_CLIENT_PORT:-8001}
DIR=${NETLAB_DIR:-/tmp/ringchat-netlab-$NAME}

die() {
	printf '%s: %s\n' "$prog" "$*" >&2
	exit 1
}
say() { printf '%s: %s\n' "$prog" "$*" >&2; }

[[ $NAME =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "NETLAB_NAME \"$NAME\": want a lower-case letter, then up to 7 letters or digits"
if [[ ! $SUBNET =~ ^198\.1[89]\.([0-9]{1,3})$ ]] || ((BASH_REMATCH[1] > 255)); then
	die "NETLAB_SUBNET \"$SUBNET\": want 198.18.X or 198.19.X (a /24 of 198.18.0.0/15)"
fi
if [[ ! $HOSTS =~ ^[0-9]+$ ]] || ((HOSTS < 1 || HOSTS > 20)); then
	die "NETLAB_HOSTS \"$HOSTS\": want 1-20"
fi
for p in "$DB_PORT" "$COORD_PORT" "$CLIENT_PORT"; do
	if [[ ! $p =~ ^[0-9]+$ ]] || ((p < 1 || p > 65535)); then
		die "bad port \"$p\""
	fi
done
[[ $DIR == /* && $DIR =~ ^[A-Za-z0-9._/-]+$ && $DIR != / ]] || die "NETLAB_DIR \"$DIR\": want an absolute path of letters, digits and . _ / -"

BR=${NAME}br
STORE_IP=$SUBNET.254
ns() { printf '%s%d' "$NAME" "$1"; }
veth() { printf '%sv%d' "$NAME" "$1"; }
ip_of() { printf '%s.%d' "$SUBNET" "$1"; }

# ------------------------------------------------------------- helpers

need_root() {
	[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, an sshd per host)"
}

# install_missing: the tools up needs, with apt-get (as scripts/mariadb.sh).
install_missing() {
	local pkgs=()
	[[ -x /usr/sbin/sshd ]] && command -v ssh-keygen >/dev/null && command -v scp >/dev/null || pkgs+=(openssh-server openssh-client)
	command -v ip >/dev/null || pkgs+=(iproute2)
	command -v nft >/dev/null || pkgs+=(nftables)
	command -v unshare >/dev/null || pkgs+=(util-linux)
	if [[ ${#pkgs[@]} -gt 0 ]]; then
		say "installing ${pkgs[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq "${pkgs[@]}" >/dev/null
	fi
	bash "$here/mariadb.sh" install
}

ns_exists() { ip netns list 2>/dev/null | grep -qE "^$1( |$)"; }
link_exists() { ip link show "$1" >/dev/null 2>&1; }

# alive PID: the process runs and is not a zombie.
alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ -n $st && ${st#Z} == "$st" ]]
}

pid_in() { # pid_in FILE: the live pid in FILE, or fail
	local p
	[[ -f $1 ]] || return 1
	p=$(cat "$1" 2>/dev/null) || return 1
	[[ $p =~ ^[0-9]+$ ]] && alive "$p" && printf '%s' "$p"
}

# wait_gone PID...: up to 10 s for the processes to end, then SIGKILL.
wait_gone() {
	local p i left
	for i in $(seq 1 100); do
		left=0
		for p in "$@"; do
			if alive "$p"; then left=1; fi
		done
		[[ $left -eq 1 ]] || return 0
		sleep 0.1
	done
	for p in "$@"; do
		kill -KILL "$p" 2>/dev/null || true
	done
}

sshc() { # sshc N CMD: ssh to lab host N with the lab's config
	ssh -F "$DIR/ssh_config" "$(ip_of "$1")" "$2" </dev/null
}

db_sql() { # db_sql STATEMENTS: as root over the server's socket
	mariadb --socket="$DIR/db/mysqld.sock" -uroot -N -B -e "$1"
}

# ------------------------------------------------------------------ up

up_network() {
	if ! link_exists "$BR"; then
		ip link add "$BR" type bridge
	fi
	ip addr replace "$STORE_IP/24" dev "$BR"
	ip link set "$BR" up
	local i n
	for i in $(seq 1 "$HOSTS"); do
		n=$(ns "$i")
		ns_exists "$n" || ip netns add "$n"
		if ! link_exists "$(veth "$i")"; then
			ip link add "$(veth "$i")" type veth peer name eth0 netns "$n"
		fi
		ip link set "$(veth "$i")" master "$BR" up
		ip -n "$n" addr replace "$(ip_of "$i")/24" dev eth0
		ip -n "$n" link set lo up
		ip -n "$n" link set eth0 up
	done
}

up_keys() {
	mkdir -p "$DIR/ssh"
	chmod 700 "$DIR/ssh"
	[[ -f $DIR/ssh/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C "netlab-$NAME" -f "$DIR/ssh/id_ed25519"
	local i h kh=""
	for i in $(seq 1 "$HOSTS"); do
		h=$DIR/h$i
		mkdir -p "$h/home/.ssh"
		chmod 700 "$h" "$h/home" "$h/home/.ssh"
		[[ -f $h/ssh_host_ed25519_key ]] || ssh-keygen -q -t ed25519 -N '' -C "netlab-$NAME-h$i" -f "$h/ssh_host_ed25519_key"
		cp "$DIR/ssh/id_ed25519.pub" "$h/home/.ssh/authorized_keys"
		chmod 600 "$h/home/.ssh/authorized_keys"
		kh+="$(ip_of "$i") $(cut -d' ' -f1,2 "$h/ssh_host_ed25519_key.pub")"$'\n'
		cat >"$h/sshd_config" <<EOF
ListenAddress $(ip_of "$i"):22
HostKey $h/ssh_host_ed25519_key
PidFile $h/sshd.pid
AuthorizedKeysFile .ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PrintMotd no
MaxStartups 100:30:200
Subsystem sftp internal-sftp
EOF
	done
	printf '%s' "$kh" >"$DIR/ssh/known_hosts"
	cat >"$DIR/ssh_config" <<EOF
# ssh -F $DIR/ssh_config $(ip_of 1)   (lab.sh --ssh-opts "-F $DIR/ssh_config")
Host $SUBNET.*
	User root
	IdentityFile $DIR/ssh/id_ed25519
	IdentitiesOnly yes
	UserKnownHostsFile $DIR/ssh/known_hosts
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	BatchMode yes
	ConnectTimeout 5
	LogLevel ERROR
EOF
}

# up_sshd N: the host's sshd, in its network namespace and a mount
# namespace of its own (its home on /root, a private /run).
up_sshd() {
	local i=$1 h=$DIR/h$1
	if pid_in "$h/sshd.pid" >/dev/null; then
		return 0
	fi
	# shellcheck disable=SC2016
	ip netns exec "$(ns "$i")" unshare --mount --propagation private sh -c '
		mount --bind "$1" /root &&
		mount -t tmpfs -o mode=755 tmpfs /run &&
		mkdir -p /run/sshd &&
		exec /usr/sbin/sshd -f "$2" -E "$3"' sh "$h/home" "$h/sshd_config" "$h/sshd.log"
}

wait_ssh() {
	local i t
	for i in $(seq 1 "$HOSTS"); do
		for t in $(seq 1 100); do
			if sshc "$i" true 2>/dev/null; then
				continue 2
			fi
			sleep 0.1
		done
		die "the sshd of lab host $i ($(ip_of "$i")) does not let the lab's key in: $(tail -n 5 "$DIR/h$i/sshd.log" 2>/dev/null)"
	done
}

up_db() {
	local d=$DIR/db
	if pid_in "$d/mysqld.pid" >/dev/null && db_sql 'SELECT 1' >/dev/null 2>&1; then
		return 0
	fi
	mkdir -p "$d/data" "$d/tmp"
	chown -R mysql:mysql "$d"
	chmod 750 "$d"
	cat >"$d/my.cnf" <<EOF
[mysqld]
datadir=$d/data
tmpdir=$d/tmp
socket=$d/mysqld.sock
pid-file=$d/mysqld.pid
log-error=$d/error.log
port=$DB_PORT
bind-address=$STORE_IP
skip-name-resolve
skip-log-bin
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
max_connections=500
EOF
	if [[ ! -d $d/data/mysql ]]; then
		mariadb-install-db --defaults-file="$d/my.cnf" --user=mysql --datadir="$d/data" >"$d/install.log" 2>&1 ||
			die "mariadb-install-db failed: $(tail -n 5 "$d/install.log")"
	fi
	setsid /usr/sbin/mariadbd --defaults-file="$d/my.cnf" --user=mysql </dev/null >/dev/null 2>&1 &
	local t
	for t in $(seq 1 300); do
		if mariadb-admin --socket="$d/mysqld.sock" -uroot --connect-timeout=1 ping >/dev/null 2>&1; then
			break
		fi
		[[ $t -lt 300 ]] || die "the lab's mariadbd did not answer within 60 s: $(tail -n 5 "$d/error.log" 2>/dev/null)"
		sleep 0.2
	done
	local pw
	if [[ -f $DIR/db.password ]]; then
		pw=$(cat "$DIR/db.password")
	else
		pw=$(od -An -N18 -tx1 /dev/urandom | tr -d ' \n')
		(umask 077 && printf '%s\n' "$pw" >"$DIR/db.password")
	fi
	# root from the lab's subnet, with the password: a lab, not production.
	db_sql "CREATE USER IF NOT EXISTS 'root'@'$SUBNET.%' IDENTIFIED BY '$pw';
		ALTER USER 'root'@'$SUBNET.%' IDENTIFIED BY '$pw';
		GRANT ALL PRIVILEGES ON *.* TO 'root'@'$SUBNET.%' WITH GRANT OPTION;
		FLUSH PRIVILEGES;"
	(umask 077 && printf 'mysql://root:%s@%s:%d/ringchat\n' "$pw" "$STORE_IP" "$DB_PORT" >"$DIR/db.dsn")
}

write_nodes() {
	local i
	{
		echo "id,host,coordination_port,client_port"
		for i in $(seq 1 "$HOSTS"); do
			echo "$i,$(ip_of "$i"),$COORD_PORT,$CLIENT_PORT"
		done
	} >"$DIR/nodes.csv"
}

# undo_failed_up: up's exit trap; a failed up leaves nothing behind.
undo_failed_up() {
	local rc=$?
	if [[ $rc -ne 0 ]]; then
		say "up failed (exit $rc): removing the lab"
		do_down || true
	fi
}

do_up() {
	need_root
	install_missing
	# Anything that fails from here on undoes the whole lab.
	trap undo_failed_up EXIT
	trap 'exit 130' INT TERM
	mkdir -p "$DIR"
	chmod 755 "$DIR"
	printf '%s\n' "$NAME $SUBNET $HOSTS" >"$DIR/lab"
	up_network
	up_keys
	local i
	for i in $(seq 1 "$HOSTS"); do
		up_sshd "$i"
	done
	up_db
	write_nodes
	wait_ssh
	# The store answers from every host.
	for i in $(seq 1 "$HOSTS"); do
		ip netns exec "$(ns "$i")" mariadb-admin --protocol=tcp -h "$STORE_IP" -P "$DB_PORT" -uroot \
			-p"$(cat "$DIR/db.password")" --connect-timeout=3 ping >/dev/null ||
			die "lab host $i does not reach the store at $STORE_IP:$DB_PORT"
	done
	trap - EXIT
	say "lab $NAME up: $HOSTS hosts $(ip_of 1)-$(ip_of "$HOSTS"), store $STORE_IP:$DB_PORT"
	say "  ssh -F $DIR/ssh_config $(ip_of 1)"
	say "  scripts/lab.sh --nodes $DIR/nodes.csv --ssh-opts \"-F $DIR/ssh_config\" --db-file $DIR/db.dsn --copy-bin bin/ringnode up"
}

# ---------------------------------------------------------------- down

do_down() {
	need_root
	local i n pids=() p
	# Every process in a lab host's network: sshd, the sessions, the nodes.
	for i in $(seq 1 20); do
		n=$(ns "$i")
		ns_exists "$n" || continue
		for p in $(ip netns pids "$n" 2>/dev/null); do
			kill -TERM "$p" 2>/dev/null || true
			pids+=("$p")
		done
	done
	if p=$(pid_in "$DIR/db/mysqld.pid"); then
		kill -TERM "$p" 2>/dev/null || true
		pids+=("$p")
	fi
	if [[ ${#pids[@]} -gt 0 ]]; then
		wait_gone "${pids[@]}"
	fi
	# A server that died before its pid file: find it by its config.
	for p in $(pgrep -f -- "--defaults-file=$DIR/db/my.cnf" 2>/dev/null || true); do
		kill -KILL "$p" 2>/dev/null || true
	done
	# Deleting a namespace deletes its end of the veth pair, and so the
	# pair, a moment later: each step tolerates what is already gone.
	for i in $(seq 1 20); do
		n=$(ns "$i")
		if ns_exists "$n"; then
			ip netns del "$n" 2>/dev/null || true
		fi
		ip link del "$(veth "$i")" 2>/dev/null || true
	done
	ip link del "$BR" 2>/dev/null || true
	# nft tables a chaos run on this lab made and could not remove.
	local t
	for t in $(nft list tables 2>/dev/null | awk -v p="${NAME}_" '$3 ~ "^"p {print $2" "$3}' | tr ' ' ':'); do
		nft delete table "${t%%:*}" "${t#*:}" 2>/dev/null || true
	done
	rm -rf "$DIR"
	left_behind
}

# left_behind: fail, saying what, if anything of the lab is still here.
left_behind() {
	local what="" t
	for t in $(seq 1 50); do
		what=""
		what+=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NAME}[0-9]+$" | tr '\n' ' ' || true)
		what+=$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${NAME}(br|v[0-9]+)$" | tr '\n' ' ' || true)
		if [[ -e $DIR ]]; then what+="$DIR "; fi
		[[ -n $what ]] || return 0
		sleep 0.1
	done
	say "down left behind: $what"
	return 1
}

# -------------------------------------------------------------- status

do_status() {
	local ok=0 i n h p
	if [[ -d $DIR ]]; then echo "dir     $DIR"; else echo "dir     $DIR missing"; ok=1; fi
	if link_exists "$BR"; then
		echo "bridge  $BR $(ip -br addr show "$BR" | awk '{print $2, $3}')"
	else
		echo "bridge  $BR missing"
		ok=1
	fi
	for i in $(seq 1 "$HOSTS"); do
		n=$(ns "$i")
		h="host $i  $(ip_of "$i") netns $n"
		if ! ns_exists "$n"; then
			echo "$h missing"
			ok=1
			continue
		fi
		if p=$(pid_in "$DIR/h$i/sshd.pid"); then
			h+=" sshd $p"
		else
			h+=" sshd down"
			ok=1
		fi
		h+=" processes $(ip netns pids "$n" 2>/dev/null | wc -l)"
		echo "$h"
	done
	if p=$(pid_in "$DIR/db/mysqld.pid"); then
		echo "store   mariadbd $p at $STORE_IP:$DB_PORT (DSN in $DIR/db.dsn)"
	else
		echo "store   down"
		ok=1
	fi
	local extra
	extra=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NAME}[0-9]+$" | sed "s/^$NAME//" | awk -v h="$HOSTS" '$1 > h' | tr '\n' ' ')
	[[ -z $extra ]] || echo "extra   namespaces of hosts $extra(another NETLAB_HOSTS?)"
	return $ok
}

do_env() {
	printf 'NETLAB_NAME=%s\nNETLAB_DIR=%s\nNETLAB_SUBNET=%s\nNETLAB_HOSTS=%s\nNETLAB_STORE=%s:%s\n' \
		"$NAME" "$DIR" "$SUBNET" "$HOSTS" "$STORE_IP" "$DB_PORT"
	printf 'NETLAB_SSH_CONFIG=%s/ssh_config\nNETLAB_NODES=%s/nodes.csv\nNETLAB_DSN_FILE=%s/db.dsn\n' "$DIR" "$DIR" "$DIR"
	printf 'NETLAB_BRIDGE=%s\n' "$BR"
	local i
	for i in $(seq 1 "$HOSTS"); do
		printf 'NETLAB_HOST_%d=%s NETLAB_NETNS_%d=%s NETLAB_VETH_%d=%s\n' "$i" "$(ip_of "$i")" "$i" "$(ns "$i")" "$i" "$(veth "$i")"
	done
}

case ${1:-} in
up) do_up ;;
down) do_down ;;
status) do_status ;;
env) do_env ;;
exec)
	need_root
	if [[ ! ${2:-} =~ ^[0-9]+$ ]] || (($2 < 1 || $2 > HOSTS)); then
		die "exec: want a host number 1-$HOSTS"
	fi
	n=$(ns "$2")
	shift 2
	exec ip netns exec "$n" "$@"
	;;
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
*)
	echo "usage: scripts/netlab.sh up|down|status|env|exec N CMD..." >&2
	exit 2
	;;
esac
