#!/usr/bin/env bash
# Checks the commit convention (CONTRIBUTING.md, "Commits") on every
# commit since it was set: a subject "pkg: imperative subject" of at most
# 72 characters, and a body. Usage: scripts/check-commits.sh [REV]
# (default HEAD).
set -euo pipefail
cd "$(dirname "$0")/.."
since=bcc70ec133db86d94ef976bc6084de2605bec4fe # the last commit before the convention
head=${1:-HEAD}
if ! git cat-file -e "$since^{commit}" 2>/dev/null; then
	# (a shallow clone: nothing to check against; say so and pass)
	echo "check-commits: $since is not in this clone (shallow?): commits not checked; fetch the history to check them"
	exit 0
fi
bad=0
for c in $(git rev-list --no-merges "$since..$head"); do
	subject=$(git log -1 --format=%s "$c")
	body=$(git log -1 --format=%b "$c" | grep -v '^[[:space:]]*$' || true)
	problem=
	if ((${#subject} > 72)); then
		problem="subject of ${#subject} characters (at most 72)"
	elif ! [[ $subject =~ ^[a-zA-Z0-9][a-zA-Z0-9/._-]*(,\ [a-zA-Z0-9][a-zA-Z0-9/._-]*)*:\ [a-z] ]]; then
		problem="subject is not 'pkg: imperative subject' (a package or folder, a colon, then a lower-case verb)"
	elif [ -z "$body" ]; then
		problem="no body (say why, and the figures measured)"
	fi
	if [ -n "$problem" ]; then
		echo "commit $(git log -1 --format=%h "$c") \"$subject\": $problem"
		bad=1
	fi
done
exit "$bad"
