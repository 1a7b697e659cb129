#!/usr/bin/env bash
# Applies each seeded bug (a patch in this folder) to a scratch copy of
# the tree and runs the record-path model tests against it: every bug
# must make them fail. Prints, per bug, whether it was caught, by which
# test, and after how long (a bug missed by a round of random checks
# gets up to two more). A patch may name the tests that must catch it in
# a line "# tests: <regexp>" before its diff (default: the tests below),
# and their packages in a line "# packages: <pkg> ..." (default: the
# record-path model's).
#
# With SEEDED_BUGS_BUDGET=<seconds> (CI, whose 30 minutes the whole suite
# shares) it starts no bug once the budget is spent, and starts the list
# at a place that moves with the commit (the number of commits), so
# successive commits check every bug in turn; it prints the bugs it left.
# Usage: scripts/seeded-bugs/run.sh [patch...]
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
patches=("$@")
if [ ${#patches[@]} -eq 0 ]; then
	patches=(scripts/seeded-bugs/*.patch)
fi
budget=${SEEDED_BUGS_BUDGET:-0}
if [ "$budget" -gt 0 ]; then
	# rotate: this commit starts where the previous one's budget ended, roughly
	n=${#patches[@]}
	first=$(( $(git rev-list --count HEAD) * 7 % n ))
	patches=("${patches[@]:first}" "${patches[@]:0:first}")
fi
began=$(date +%s)
left=()
tests='TestRecordPathStateMachine|TestCoordinatorStateMachine|TestSeedInterleavingAllOrders|TestRunnerKeepsThePromises'
scratch=$(mktemp -d)
trap 'git worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
git worktree add --detach "$scratch/tree" HEAD -q
missed=0
printf '| seeded bug | caught | by (time to fail, shrinking included) |\n|---|---|---|\n'
for p in "${patches[@]}"; do
	name=$(basename "$p" .patch)
	if [ "$budget" -gt 0 ] && [ $(($(date +%s) - began)) -ge "$budget" ]; then
		left+=("$name")
		continue
	fi
	git -C "$scratch/tree" checkout -q -- .
	git -C "$scratch/tree" clean -fdqx # no fail file of an earlier bug (testdata/rapid is ignored) is replayed
	git -C "$scratch/tree" apply "$root/$p"
	run=$(sed -n 's/^# tests: //p' "$p" | head -1)
	run=${run:-$tests}
	pkgs=$(sed -n 's/^# packages: //p' "$p" | head -1)
	pkgs=${pkgs:-./pipeline ./stages/stagetest}
	# A bug the model tests reach only in rare interleavings says how
	# many rapid checks a round gets ("# checks: N" above the diff).
	checks=$(sed -n 's/^# checks: //p' "$p" | head -1)
	checks=${checks:-2000}
	# (only the model tests' packages know rapid's flags)
	rflag=-rapid.checks=$checks
	if grep -q '^# packages: ' "$p" && ! grep -q '^# checks: ' "$p"; then
		rflag=
	fi
	start=$(date +%s)
	# The model tests draw random interleavings: a bug they reach rarely
	# can pass one round of checks, so a miss gets up to two more rounds (new
	# seeds) before it counts.
	caught=0
	for round in 1 2 3; do
		if ! out=$(cd "$scratch/tree" && go test -count=1 $pkgs -run "$run" $rflag 2>&1); then
			caught=$round
			break
		fi
	done
	if [ "$caught" = 0 ]; then
		printf '| %s | **no** | ran %ss, three rounds |\n' "$name" "$(($(date +%s) - start))"
		missed=$((missed + 1))
	else
		# every top-level test that failed, with its own time (no build)
		by=$(echo "$out" | grep -E -- '^--- FAIL: ' | sed -E 's/^--- FAIL: ([A-Za-z0-9_]+) \(([0-9.]+s)\)/\1 (\2)/' | paste -sd, - | sed 's/,/, /g')
		[ "$caught" -gt 1 ] && by="${by:-the build} (round $caught)"
		printf '| %s | yes | %s |\n' "$name" "${by:-the build}"
	fi
done
if [ ${#left[@]} -gt 0 ]; then
	printf '\n%d of %d seeded bugs not run (SEEDED_BUGS_BUDGET=%ss spent; the next commits start elsewhere): %s\n' \
		"${#left[@]}" "${#patches[@]}" "$budget" "${left[*]}"
fi
exit "$missed"
