#!/usr/bin/env bash
# lab.sh: start, stop and inspect a ringnode ring spread over lab hosts via ssh.
#
# Usage: scripts/lab.sh [options] up|down|status|restart
# Run with --help for the options. Works with bash 3.2 and later.
set -euo pipefail

prog=lab.sh

usage() {
	cat <<'EOF'
Usage: scripts/lab.sh [options] up|down|status|restart

Starts (up), stops (down), inspects (status) or restarts one host at a
time (restart) one ringnode per row of the node list, over ssh to the
row's host.

Commands:
  up       copy the cluster key (WORKDIR/cluster.key, mode 0600) and, if a
           DSN is given, the DSN (WORKDIR/db.dsn, mode 0600) over ssh's
           standard input, and the node list (scp) into WORKDIR on every
           host, then start "BIN run --id ID --nodes FILE --election METHOD
           --cluster-key-file cluster.key [--db-file db.dsn]" in the
           background with nohup; output goes to WORKDIR/node-ID.log and the
           pid to WORKDIR/node-ID.pid (a node that is already running is left
           alone). No secret is ever on a command line.
  down     send SIGTERM to the pid in WORKDIR/node-ID.pid if it is alive,
           then remove the pid file
  status   print "ID HOST running PID" or "ID HOST stopped" per node
  restart  a rolling restart, one node at a time in the node list's order:
           copy the --copy-bin binary (if given) while the node still runs,
           stop the node (SIGTERM: it hands the token on and leaves the
           ring) and wait until its process has exited, start it again as
           up does, and wait until the store's ring holds it again and its
           client port answers ("BIN status --json" on its host) before
           the next node; the first node that does not come back within
           --wait seconds stops the restart (exit 1). Prints one line per
           node: "ID HOST restarted PID in-ring-after SECONDS"

Options (environment variable used when the option is not given):
  --nodes FILE               node list CSV (RINGNODE_NODES, default nodes.csv)
  --bin PATH                 ringnode binary on the remote host (LAB_BIN,
                             default ringnode; relative paths are relative to
                             WORKDIR, a leading ~/ means the remote home)
  --copy-bin PATH            copy this local ringnode binary (scp) to
                             WORKDIR/ringnode on every host (through a
                             temporary name and a rename, so a running node
                             is not disturbed) at up and restart, and run
                             it (LAB_COPY_BIN; not with --bin)
  --wait SECONDS             restart: how long a node may take to stop, and
                             to be back in the ring (LAB_WAIT, default 60)
  --db DSN                   the store DSN, copied to WORKDIR/db.dsn and
                             passed as --db-file (RINGCHAT_DB, default: none,
                             the node's default)
  --db-file PATH             read the DSN from this local file instead
                             (RINGNODE_DB_FILE)
  --election METHOD          passed as --election (RINGNODE_ELECTION, default
                             chang-roberts)
  --user USER                ssh as USER@HOST (LAB_SSH_USER)
  --ssh-opts "OPTS"          options for ssh and scp, split on white space
                             (LAB_SSH_OPTS, default
                             "-o BatchMode=yes -o ConnectTimeout=5"); use
                             "-o Port=N" rather than -p, which scp does not
                             understand
  --workdir DIR              remote directory for the node list, key, logs and
                             pid files, relative to the remote home (a leading
                             ~/ is allowed; LAB_WORKDIR, default ringchat)
  --cluster-key-file PATH    local file holding the cluster key, copied to
                             every host (RINGNODE_CLUSTER_KEY_FILE, default
                             .ringchat/lab-cluster.key, which up creates with
                             mode 0600 if it does not exist)
  --only ID[,ID...]          act only on these node ids
  --dry-run                  print the ssh/scp commands, one per line, and run
                             nothing
  -h, --help                 show this help

The node list has a header line naming the columns, either
"id,host,coordination_port,client_port" or the reference's
"nodeId, hostaddress, coordinationPort, clientport" (any order, case and
surrounding spaces ignored); blank lines and lines starting with # are
skipped. Quoted CSV fields are not supported.

A leading ~/ in a local path (--nodes, --cluster-key-file, --db-file) is
the local home, in --bin and --workdir the remote home.

Exit status: 0 on success, 2 on a usage error (bad option or command,
unreadable or invalid node list), 1 if ssh or scp failed for some node (the
other nodes are still handled).
EOF
}

die_usage() {
	printf '%s: %s\n' "$prog" "$*" >&2
	exit 2
}

# ---------------------------------------------------------------- options

nodes_file=${RINGNODE_NODES:-nodes.csv}
bin=${LAB_BIN:-ringnode}
bin_given=${LAB_BIN:+1}
copy_bin=${LAB_COPY_BIN:-}
wait_secs=${LAB_WAIT:-60}
db=${RINGCHAT_DB:-}
election=${RINGNODE_ELECTION:-chang-roberts}
user=${LAB_SSH_USER:-}
ssh_opts_str=${LAB_SSH_OPTS--o BatchMode=yes -o ConnectTimeout=5}
workdir=${LAB_WORKDIR:-ringchat}
cluster_key_file=${RINGNODE_CLUSTER_KEY_FILE:-}
db_file=${RINGNODE_DB_FILE:-}
only=
dry_run=0
command=

# need_arg OPTION NARGS: fail unless the option has a value.
need_arg() {
	if [[ $2 -lt 2 ]]; then
		die_usage "option $1 needs a value"
	fi
}

while [[ $# -gt 0 ]]; do
	opt=$1
	val=
	has_inline=0
	case $opt in
	--*=*)
		val=${opt#*=}
		opt=${opt%%=*}
		has_inline=1
		;;
	esac
	case $opt in
	--nodes | --bin | --copy-bin | --wait | --db | --db-file | --election | --user | --ssh-opts | --workdir | --cluster-key-file | --only)
		if [[ $has_inline -eq 0 ]]; then
			need_arg "$opt" $#
			val=$2
			shift
		fi
		case $opt in
		--nodes) nodes_file=$val ;;
		--bin)
			bin=$val
			bin_given=1
			;;
		--copy-bin) copy_bin=$val ;;
		--wait) wait_secs=$val ;;
		--db) db=$val ;;
		--db-file) db_file=$val ;;
		--election) election=$val ;;
		--user) user=$val ;;
		--ssh-opts) ssh_opts_str=$val ;;
		--workdir) workdir=$val ;;
		--cluster-key-file) cluster_key_file=$val ;;
		--only) only=$val ;;
		esac
		;;
	--dry-run | -h | --help)
		if [[ $has_inline -eq 1 ]]; then
			die_usage "option $opt takes no value"
		fi
		case $opt in
		--dry-run) dry_run=1 ;;
		*)
			usage
			exit 0
			;;
		esac
		;;
	--)
		shift
		break
		;;
	-*)
		die_usage "unknown option $opt (see --help)"
		;;
	*)
		if [[ -n $command ]]; then
			die_usage "unexpected argument $opt (command $command already given)"
		fi
		command=$opt
		;;
	esac
	shift
done
if [[ $# -gt 0 ]]; then
	if [[ -n $command || $# -gt 1 ]]; then
		die_usage "unexpected argument $1"
	fi
	command=$1
fi

case $command in
up | down | status | restart) ;;
"") die_usage "missing command: want up, down, status or restart (see --help)" ;;
*) die_usage "invalid command $command: want up, down, status or restart" ;;
esac

# ----------------------------------------------------------- validation

safe_path_re='^[A-Za-z0-9._+/-]+$'

# local_path PATH: PATH with a leading ~/ turned into the local home.
local_path() {
	# shellcheck disable=SC2088
	if [[ $1 == '~/'* ]]; then
		printf '%s/%s' "$HOME" "${1#\~/}"
	else
		printf '%s' "$1"
	fi
}
nodes_file=$(local_path "$nodes_file")
db_file=$(local_path "$db_file")
default_key=.ringchat/lab-cluster.key
cluster_key_file=$(local_path "${cluster_key_file:-$default_key}")
# The remote side starts in the home directory: ~/DIR is DIR.
# shellcheck disable=SC2088
if [[ $workdir == '~/'* ]]; then
	workdir=${workdir#\~/}
fi
if [[ -n $db && -n $db_file ]]; then
	die_usage "give the DSN as --db or --db-file, not both"
fi
if [[ -n $copy_bin ]]; then
	if [[ -n $bin_given ]]; then
		die_usage "give --bin (a binary already on the hosts) or --copy-bin (one to copy), not both"
	fi
	copy_bin=$(local_path "$copy_bin")
	bin=./ringnode
	if [[ $command == up || $command == restart ]] && [[ $dry_run -eq 0 ]] && [[ -d $copy_bin || ! -r $copy_bin ]]; then
		die_usage "cannot read --copy-bin $copy_bin"
	fi
fi
if [[ ! $wait_secs =~ ^[0-9]+$ ]] || ((10#$wait_secs < 1 || 10#$wait_secs > 86400)); then
	die_usage "invalid --wait \"$wait_secs\": want seconds, 1-86400"
fi
wait_secs=$((10#$wait_secs))
if [[ ( $command == up || $command == restart ) && $dry_run -eq 0 ]]; then
	if [[ -n $db_file && ( -d $db_file || ! -r $db_file ) ]]; then
		die_usage "cannot read --db-file $db_file"
	fi
	if [[ -e $cluster_key_file && ( -d $cluster_key_file || ! -r $cluster_key_file ) ]]; then
		die_usage "cannot read cluster key file $cluster_key_file"
	fi
fi
[[ -n $bin ]] || die_usage "empty --bin"
[[ -n $election ]] || die_usage "empty --election"
if [[ ! $workdir =~ $safe_path_re || $workdir == -* ]]; then
	die_usage "invalid --workdir \"$workdir\": use letters, digits and . _ + / - only"
fi
if [[ -n $user && ! $user =~ ^[A-Za-z0-9._][A-Za-z0-9._-]*$ ]]; then
	die_usage "invalid --user \"$user\""
fi
ssh_opts=()
if [[ -n $ssh_opts_str ]]; then
	read -r -a ssh_opts <<<"$ssh_opts_str"
fi

# Lets "${ssh_opts[@]}" be used under set -u on bash < 4.4 when empty.
ssh_opts_n=${#ssh_opts[@]}

nodes_name=${nodes_file##*/}
if [[ -z $nodes_name ]]; then
	die_usage "invalid --nodes \"$nodes_file\""
fi
if [[ ! $nodes_name =~ $safe_path_re || $nodes_name == -* ]]; then
	die_usage "node list file name \"$nodes_name\" must use letters, digits and . _ + - only"
fi
if [[ -d $nodes_file || ! -r $nodes_file ]]; then
	die_usage "cannot read node list $nodes_file"
fi

# --------------------------------------------------------- node list

# trim VAR: strip leading and trailing white space from variable VAR.
trim() {
	local s=${!1}
	s=${s#"${s%%[![:space:]]*}"}
	s=${s%"${s##*[![:space:]]}"}
	printf -v "$1" '%s' "$s"
}

# split LINE: set the array "fields" to the comma-separated, trimmed fields.
split() {
	local rest=$1 f
	fields=()
	while :; do
		f=${rest%%,*}
		trim f
		fields+=("$f")
		[[ $rest == *,* ]] || break
		rest=${rest#*,}
	done
}

# header_col NAME: print the column (id, host, coord, client) for a header
# name, or nothing if it is unknown.
header_col() {
	local n
	n=$(printf '%s' "$1" | tr '[:upper:]' '[:lower:]' | tr -d '_ -')
	case $n in
	id | nodeid | node) echo id ;;
	host | hostaddress | hostname | address | addr | ip) echo host ;;
	coordinationport | coordport) echo coord ;;
	clientport) echo client ;;
	esac
}

valid_port() {
	[[ $1 =~ ^[0-9]+$ ]] && [[ ${#1} -le 5 ]] && ((10#$1 >= 1 && 10#$1 <= 65535))
}

ids=()
hosts=()
ncols=0
col_id=-1 col_host=-1 col_coord=-1 col_client=-1
lineno=0
bad_row() {
	die_usage "$nodes_file:$lineno: $*"
}
while IFS= read -r line || [[ -n $line ]]; do
	lineno=$((lineno + 1))
	line=${line%$'\r'}
	if [[ $lineno -eq 1 ]]; then
		line=${line#$'\xef\xbb\xbf'}
	fi
	t=$line
	trim t
	if [[ -z ${t//,/} || $t == \#* ]]; then
		continue
	fi
	if [[ $line == *\"* ]]; then
		bad_row "quoted fields are not supported"
	fi
	split "$line"
	if [[ $ncols -eq 0 ]]; then
		ncols=${#fields[@]}
		for ((i = 0; i < ncols; i++)); do
			c=$(header_col "${fields[i]}")
			if [[ -z $c ]]; then
				bad_row "unknown column \"${fields[i]}\" in header"
			fi
			v=col_$c
			if [[ ${!v} -ge 0 ]]; then
				bad_row "duplicate column \"${fields[i]}\" in header"
			fi
			printf -v "$v" '%d' "$i"
		done
		for c in id:id host:host coord:coordination_port client:client_port; do
			v=col_${c%%:*}
			if [[ ${!v} -lt 0 ]]; then
				bad_row "header is missing column ${c#*:}"
			fi
		done
		continue
	fi
	if [[ ${#fields[@]} -gt $ncols ]]; then
		bad_row "too many fields (${#fields[@]}, header has $ncols)"
	fi
	if [[ ${#fields[@]} -lt $ncols ]]; then
		bad_row "missing fields (${#fields[@]}, header has $ncols)"
	fi
	id=${fields[col_id]}
	host=${fields[col_host]}
	coord=${fields[col_coord]}
	client=${fields[col_client]}
	if [[ ! $id =~ ^[0-9]+$ ]] || [[ ${#id} -gt 18 ]] || ((10#$id < 1)); then
		bad_row "id \"$id\" is not a positive integer"
	fi
	id=$((10#$id))
	if [[ $host == \[*\] ]]; then
		host=${host#[}
		host=${host%]}
	fi
	if [[ -z $host ]]; then
		bad_row "empty host"
	fi
	if [[ ! $host =~ ^[A-Za-z0-9._:%-]+$ || $host == -* ]]; then
		bad_row "invalid host \"$host\""
	fi
	valid_port "$coord" || bad_row "coordination_port \"$coord\" is not in range 1-65535"
	valid_port "$client" || bad_row "client_port \"$client\" is not in range 1-65535"
	for ((i = 0; i < ${#ids[@]}; i++)); do
		if [[ ${ids[i]} -eq $id ]]; then
			bad_row "duplicate id $id"
		fi
	done
	ids+=("$id")
	hosts+=("$host")
done <"$nodes_file"

if [[ $ncols -eq 0 ]]; then
	die_usage "$nodes_file: empty node list (no header)"
fi
if [[ ${#ids[@]} -eq 0 ]]; then
	die_usage "$nodes_file: header but no nodes"
fi

# Select the nodes to act on (indexes into ids/hosts), in file order.
only_ids=' '
if [[ -n $only ]]; then
	rest=$only
	while :; do
		want=${rest%%,*}
		trim want
		if [[ ! $want =~ ^[0-9]+$ ]] || [[ ${#want} -gt 18 ]] || ((10#$want < 1)); then
			die_usage "invalid id \"$want\" in --only"
		fi
		want=$((10#$want))
		found=0
		for ((i = 0; i < ${#ids[@]}; i++)); do
			[[ ${ids[i]} -ne $want ]] || found=1
		done
		if [[ $found -eq 0 ]]; then
			die_usage "id $want in --only is not in $nodes_file"
		fi
		only_ids+="$want "
		[[ $rest == *,* ]] || break
		rest=${rest#*,}
	done
fi
sel=()
for ((i = 0; i < ${#ids[@]}; i++)); do
	if [[ -z $only || $only_ids == *" ${ids[i]} "* ]]; then
		sel+=("$i")
	fi
done

# ------------------------------------------------------------ commands

# show ARG...: print a command line, quoting arguments that need it.
show() {
	local out='' a
	for a in "$@"; do
		if [[ ! $a =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
			a="'${a//\'/\'\\\'\'}'"
		fi
		out+="${out:+ }$a"
	done
	printf '%s\n' "$out"
}

# q VALUE: VALUE quoted for the remote shell.
q() {
	printf '%q' "$1"
}

ssh_target() {
	if [[ -n $user ]]; then
		printf '%s@%s' "$user" "$1"
	else
		printf '%s' "$1"
	fi
}

scp_target() {
	local h=$1
	if [[ $h == *:* ]]; then
		h="[$h]"
	fi
	if [[ -n $user ]]; then
		printf '%s@%s' "$user" "$h"
	else
		printf '%s' "$h"
	fi
}

# run_ssh HOST REMOTE_COMMAND: run (or, with --dry-run, print) ssh; the
# remote command's output is left in $out.
out=
run_ssh() {
	local cmd=(ssh)
	if [[ $ssh_opts_n -gt 0 ]]; then
		cmd+=("${ssh_opts[@]}")
	fi
	cmd+=("$(ssh_target "$1")" "$2")
	out=
	if [[ $dry_run -eq 1 ]]; then
		show "${cmd[@]}"
		return 0
	fi
	out=$("${cmd[@]}" </dev/null)
}

# run_ssh_in HOST REMOTE_COMMAND SHOWN: run_ssh with the caller's standard
# input (a secret: the key or the DSN); --dry-run prints SHOWN as where it
# comes from.
run_ssh_in() {
	local cmd=(ssh)
	if [[ $ssh_opts_n -gt 0 ]]; then
		cmd+=("${ssh_opts[@]}")
	fi
	cmd+=("$(ssh_target "$1")" "$2")
	out=
	if [[ $dry_run -eq 1 ]]; then
		printf '%s <%s\n' "$(show "${cmd[@]}")" "$(show "$3")"
		return 0
	fi
	out=$("${cmd[@]}")
}

# secret_cmd NAME: the remote command that stores its standard input as
# WORKDIR/NAME, readable by its owner only (an old copy is removed first,
# whatever its mode).
secret_cmd() {
	local f
	f=$(q "$workdir/$1")
	printf '%s' "umask 077 && mkdir -p $(q "$workdir") && rm -f $f && cat >$f"
}

# run_scp HOST: copy the node list into WORKDIR on HOST.
run_scp() {
	local cmd=(scp)
	if [[ $ssh_opts_n -gt 0 ]]; then
		cmd+=("${ssh_opts[@]}")
	fi
	cmd+=(-- "$nodes_file" "$(scp_target "$1"):$workdir/$nodes_name")
	if [[ $dry_run -eq 1 ]]; then
		show "${cmd[@]}"
		return 0
	fi
	"${cmd[@]}" </dev/null >/dev/null
}

# run_copy_bin HOST: copy --copy-bin to WORKDIR/ringnode on HOST, through
# a temporary name and a rename (a running node keeps its old file).
run_copy_bin() {
	local cmd=(scp)
	if [[ $ssh_opts_n -gt 0 ]]; then
		cmd+=("${ssh_opts[@]}")
	fi
	cmd+=(-- "$copy_bin" "$(scp_target "$1"):$workdir/.ringnode.new")
	if [[ $dry_run -eq 1 ]]; then
		show "${cmd[@]}"
	else
		"${cmd[@]}" </dev/null >/dev/null || return 1
	fi
	local f
	f=$(q "$workdir/.ringnode.new")
	run_ssh "$1" "chmod 755 $f && mv -f $f $(q "$workdir/ringnode")"
}

# remote_bin: the --bin value for the remote command line.
remote_bin() {
	# A literal leading ~/ is meant for the remote side: turn it into "$HOME"/.
	# shellcheck disable=SC2088
	if [[ $bin == '~/'* ]]; then
		# shellcheck disable=SC2016
		printf '"$HOME"/%s' "$(q "${bin#\~/}")"
	else
		q "$bin"
	fi
}

up_cmd() {
	local id=$1 pidf log args
	pidf=$(q "node-$id.pid")
	log=$(q "node-$id.log")
	args="$(remote_bin) run --id $(q "$id") --nodes $(q "$nodes_name") --election $(q "$election")"
	args+=" --cluster-key-file cluster.key"
	if [[ -n $db || -n $db_file ]]; then
		args+=" --db-file db.dsn"
	fi
	printf '%s' "mkdir -p $(q "$workdir") && cd $(q "$workdir") && if [ -f $pidf ] && kill -0 \"\$(cat $pidf)\" 2>/dev/null; then echo \"already running \$(cat $pidf)\"; else nohup $args >$log 2>&1 </dev/null & echo \$! >$pidf && echo \"started \$!\"; fi"
}

down_cmd() {
	local pidf
	pidf=$(q "$workdir/node-$1.pid")
	printf '%s' "if [ -f $pidf ]; then pid=\$(cat $pidf); if kill -0 \"\$pid\" 2>/dev/null; then kill -TERM \"\$pid\" && echo \"stopped \$pid\"; else echo \"not running\"; fi; rm -f $pidf; else echo \"not running\"; fi"
}

# stop_wait_cmd ID: stop the node and wait (up to --wait seconds) until
# its process has exited (a zombie has: only the reaping is left).
stop_wait_cmd() {
	local pidf
	pidf=$(q "$workdir/node-$1.pid")
	# shellcheck disable=SC2016
	printf 'alive() { st=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$st" ] && [ "${st#Z}" = "$st" ]; }; '
	# shellcheck disable=SC2016
	printf 'if [ -f %s ] && pid=$(cat %s) && alive "$pid"; then kill -TERM "$pid"; i=0; while alive "$pid"; do i=$((i+1)); if [ $i -gt %d ]; then echo "still running $pid after %ds"; exit 1; fi; sleep 0.1; done; echo "stopped $pid"; else echo "not running"; fi; rm -f %s' \
		"$pidf" "$pidf" $((wait_secs * 10)) "$wait_secs" "$pidf"
}

# in_ring_cmd ID: wait (up to --wait seconds) until the store's ring holds
# node ID and its client port answers, as "BIN status --json" on its host
# sees them.
in_ring_cmd() {
	local id=$1 args
	args="$(remote_bin) status --json --nodes $(q "$nodes_name") --log-level error"
	if [[ -n $db || -n $db_file ]]; then
		args+=" --db-file db.dsn"
	fi
	# shellcheck disable=SC2016
	printf 'cd %s && i=0; while :; do s=$(%s 2>/dev/null | tr -d %s); if printf %%s "$s" | grep -Eq %s; then echo in-ring; exit 0; fi; i=$((i+1)); if [ $i -gt %d ]; then echo "not in the ring after %ds"; exit 1; fi; sleep 0.2; done' \
		"$(q "$workdir")" "$args" "' \\t\\n'" "'\"id\":$id,[^}]*\"in_ring\":true[^}]*\"answers\":true'" $((wait_secs * 5)) "$wait_secs"
}

status_cmd() {
	local pidf
	pidf=$(q "$workdir/node-$1.pid")
	printf '%s' "if [ -f $pidf ] && pid=\$(cat $pidf) && kill -0 \"\$pid\" 2>/dev/null; then echo \"running \$pid\"; else echo stopped; fi"
}

failed=()
copy_failed=' '

# now_ms: milliseconds since the epoch (GNU date), or seconds * 1000.
now_ms() {
	local n
	n=$(date +%s%N 2>/dev/null)
	if [[ $n =~ ^[0-9]+$ && ${#n} -gt 12 ]]; then
		printf '%s' $((n / 1000000))
	else
		printf '%s' $(($(date +%s) * 1000))
	fi
}

# report ID HOST: print the remote command's one-line answer.
report() {
	if [[ $dry_run -eq 0 ]]; then
		printf '%s %s %s\n' "$1" "$2" "$out"
	fi
}

# copy_secrets HOST: copy the cluster key and the DSN (if any) to HOST,
# creating WORKDIR.
copy_secrets() {
	run_ssh_in "$1" "$(secret_cmd cluster.key)" "$cluster_key_file" <"$key_input" || return 1
	if [[ -n $db_file ]]; then
		run_ssh_in "$1" "$(secret_cmd db.dsn)" "$db_file" <"$db_file" || return 1
	elif [[ -n $db ]]; then
		run_ssh_in "$1" "$(secret_cmd db.dsn)" "(--db)" <<<"$db" || return 1
	fi
}

if [[ $command == up || $command == restart ]]; then
	key_input=$cluster_key_file
	if [[ ! -e $cluster_key_file ]]; then
		if [[ $dry_run -eq 1 ]]; then
			key_input=/dev/null
		else
			# A new random 256-bit key, as hex, readable by its owner only.
			(
				umask 077
				mkdir -p "$(dirname "$cluster_key_file")"
				od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$cluster_key_file"
				echo >>"$cluster_key_file"
			) || die_usage "cannot create cluster key file $cluster_key_file"
			printf '%s: created cluster key %s (mode 0600); every node gets a copy\n' "$prog" "$cluster_key_file" >&2
		fi
	fi
	# Copy the secrets and the node list once per distinct host.
	done_hosts=' '
	copy_failed=' '
	for i in "${sel[@]}"; do
		host=${hosts[i]}
		[[ $done_hosts != *" $host "* ]] || continue
		done_hosts+="$host "
		if ! copy_secrets "$host" || ! run_scp "$host"; then
			printf '%s: copying the key, DSN and %s to %s failed\n' "$prog" "$nodes_file" "$host" >&2
			copy_failed+="$host "
		elif [[ -n $copy_bin ]] && ! run_copy_bin "$host"; then
			printf '%s: copying %s to %s failed\n' "$prog" "$copy_bin" "$host" >&2
			copy_failed+="$host "
		fi
	done
fi

for i in "${sel[@]}"; do
	id=${ids[i]}
	host=${hosts[i]}
	case $command in
	up)
		if [[ $copy_failed == *" $host "* ]]; then
			failed+=("$id ($host)")
			continue
		fi
		rc=0
		run_ssh "$host" "$(up_cmd "$id")" || rc=$?
		;;
	down)
		rc=0
		run_ssh "$host" "$(down_cmd "$id")" || rc=$?
		;;
	status)
		rc=0
		run_ssh "$host" "$(status_cmd "$id")" || rc=$?
		;;
	restart)
		if [[ $copy_failed == *" $host "* ]]; then
			failed+=("$id ($host)")
			break
		fi
		rc=0
		t0=$(now_ms)
		run_ssh "$host" "$(stop_wait_cmd "$id")" || rc=$?
		stopped_out=$out
		if [[ $rc -eq 0 ]]; then
			run_ssh "$host" "$(up_cmd "$id")" || rc=$?
			started_out=$out
		fi
		if [[ $rc -eq 0 ]]; then
			run_ssh "$host" "$(in_ring_cmd "$id")" || rc=$?
		fi
		if [[ $rc -ne 0 ]]; then
			printf '%s: restart of node %s on %s failed (exit %d): %s\n' "$prog" "$id" "$host" "$rc" "$out" >&2
			failed+=("$id ($host)")
			# A rolling restart goes no further than a node that did not
			# come back: the ring keeps its other nodes.
			break
		fi
		if [[ $dry_run -eq 0 ]]; then
			ms=$(($(now_ms) - t0))
			printf '%s %s restarted %s in-ring-after %d.%03ds (%s)\n' "$id" "$host" "${started_out##* }" $((ms / 1000)) $((ms % 1000)) "$stopped_out"
		fi
		continue
		;;
	esac
	if [[ $rc -ne 0 ]]; then
		printf '%s: %s of node %s on %s failed (exit %d)\n' "$prog" "$command" "$id" "$host" "$rc" >&2
		failed+=("$id ($host)")
		continue
	fi
	report "$id" "$host"
done

if [[ ${#failed[@]} -gt 0 ]]; then
	msg=
	for f in "${failed[@]}"; do
		msg+="${msg:+, }$f"
	done
	printf '%s: %s failed for node(s) %s\n' "$prog" "$command" "$msg" >&2
	exit 1
fi
