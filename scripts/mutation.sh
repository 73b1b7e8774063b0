#!/usr/bin/env bash
# Mutation testing of the protocol packages with gremlins (ENGINEERING.md,
# "Mutation testing"), each package's mutants run against every test under
# that package, simulations included (ring/ringsim, election/electsim).
#
#   scripts/mutation.sh                      token, ring, election and wire
#   scripts/mutation.sh internal/wire ...    only these packages
#
# gremlins alone runs a mutant against the mutated package's tests only, or
# with --integration against every test of the module (MariaDB and process
# tests included: far too slow). So this runs it with --integration and puts
# a shim named "go" first in PATH that turns gremlins' "go test ... ./..."
# into "go test ... ./internal/PKG/...", for the coverage run and for every
# mutant; -coverpkg counts the lines the simulations reach as covered.
# Everything else passes through to the real go. Mutants are taken from the
# package's own directory only: its subdirectories hold the simulations,
# test harness rather than product code (plain "gremlins unleash
# ./internal/PKG" would mutate them too).
#
# Ring takes an hour or more on two cores: this is not part of CI.
# WORKERS=n runs n mutants at once (default 1: the tests use the CPU).
# DIFF=rev mutates only the lines changed since the commit rev (gremlins
# --diff): the score of what changed, for a package whose full run takes
# hours; the lines left unchanged keep the score of the last full run.
# TIMEOUT_COEFFICIENT (default 10): a mutant's tests time out after that
# many times the coverage run, whose build is mostly cached while each
# mutant's is not (gremlins' own default of 3 marks sound mutants TIMED OUT
# on a busy machine).
set -euo pipefail

cd "$(dirname "$0")/.."

# Pinned, installed into a temporary directory: no go.mod change. (Not
# "go run": it puts GOROOT/bin first in the PATH of what it runs, so
# gremlins would find the real go instead of the shim below and run every
# test of the module.)
GREMLINS=github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
OPS=(--invert-logical --invert-loopctrl --remove-self-assignments --invert-assignments)
WORKERS=${WORKERS:-1}
TIMEOUT_COEFFICIENT=${TIMEOUT_COEFFICIENT:-10}
DIFF_ARGS=()
if [ -n "${DIFF:-}" ]; then
	git rev-parse --verify --quiet "$DIFF^{commit}" >/dev/null || { echo "mutation.sh: DIFF=$DIFF is not a commit" >&2; exit 1; }
	DIFF_ARGS=(--diff "$DIFF")
fi

pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
	pkgs=(internal/token internal/ring internal/election internal/wire)
fi

real_go=$(command -v go)
real_git=$(command -v git)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/shim"
cat >"$tmp/shim/go" <<'EOF'
#!/usr/bin/env bash
# gremlins' "go test ... ./..." becomes
# "go test -count=1 -failfast ... $MUTATION_TESTS".
# -count=1: a cached coverage run would set gremlins' per-mutant timeout
# (a multiple of that run's time) too short to compile a mutant.
# -failfast: a mutant is killed by its first failing test; the rest of the
# package's tests are not run for it (the score is the same, sooner).
if [ "${1-}" = test ]; then
	shift
	args=(test -count=1 -failfast)
	for a in "$@"; do
		if [ "$a" = ./... ]; then
			read -r -a more <<<"$MUTATION_TESTS"
			args+=("${more[@]}")
		else
			args+=("$a")
		fi
	done
	set -- "${args[@]}"
fi
exec "$MUTATION_GO" "$@"
EOF
chmod +x "$tmp/shim/go"
# With DIFF, gremlins asks "git diff --merge-base REF" and matches its
# file names against the mutants' names, which are relative to the
# package's directory, as whole hunks (with their context lines): the
# shim gives it the package's own diff, relative to that directory, with
# no context, so that exactly the added and changed lines count.
cat >"$tmp/shim/git" <<'EOF'
#!/usr/bin/env bash
if [ "${1-}" = diff ] && [ "${2-}" = --merge-base ] && [ -n "${MUTATION_REL-}" ]; then
	exec "$MUTATION_GIT" diff -U0 --relative="$MUTATION_REL" "$3" -- .
fi
exec "$MUTATION_GIT" "$@"
EOF
chmod +x "$tmp/shim/git"
if [ "$(PATH="$tmp/shim:$PATH" command -v go)" != "$tmp/shim/go" ]; then
	echo "mutation.sh: the go shim is not first in PATH" >&2
	exit 1
fi

GOBIN="$tmp/bin" "$real_go" install "$GREMLINS"

status=0
for p in "${pkgs[@]}"; do
	p=${p#./}
	p=${p%/}
	p=${p%/...}
	if [ ! -d "$p" ]; then
		echo "mutation.sh: no package directory $p" >&2
		status=1
		continue
	fi
	echo "== $p: mutants of ./$p/...${DIFF:+ (lines changed since $DIFF)}, tests go test ./$p/..."
	log="$tmp/$(echo "$p" | tr / _).log"
	if ! PATH="$tmp/shim:$PATH" MUTATION_GO="$real_go" MUTATION_TESTS="./$p/..." MUTATION_GIT="$real_git" MUTATION_REL="${DIFF:+$p/}" \
		"$tmp/bin/gremlins" unleash --integration --coverpkg "./$p/..." \
		--exclude-files / --workers "$WORKERS" --timeout-coefficient "$TIMEOUT_COEFFICIENT" "${DIFF_ARGS[@]}" "${OPS[@]}" --output-statuses lt "./$p" 2>&1 | tee "$log"; then
		status=1
	fi
	if ! grep -q 'Test efficacy' "$log"; then
		echo "mutation.sh: gremlins did not finish on $p" >&2
		status=1
	fi
done

echo
echo "== mutation scores (efficacy: killed / (killed + lived))"
for p in "${pkgs[@]}"; do
	p=${p#./}
	p=${p%/}
	p=${p%/...}
	log="$tmp/$(echo "$p" | tr / _).log"
	[ -f "$log" ] || continue
	eff=$(grep -o 'Test efficacy: [0-9.]*%' "$log" | tail -n 1 | sed 's/Test efficacy: //')
	counts=$(grep -o 'Killed: [0-9]*, Lived: [0-9]*' "$log" | tail -n 1)
	printf '%-22s %8s   %s\n' "$p" "${eff:-failed}" "$counts"
done
exit $status
