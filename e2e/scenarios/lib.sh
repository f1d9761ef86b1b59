# lib.sh — helpers of guest.sh and setup.sh inside the VM (as root). The scenarios themselves are
# Go (e2e/suite); guest.sh counts their PASS/FAIL lines in passed and failed.

passed=0 failed=0
demo=${E2E_DEMO:-0}

# heading TEXT: a seed's section title (demo only).
heading() {
	((demo)) || return 0
	printf '\n=== %s ===\n' "$*"
}

# note TEXT: a sentence for the person watching (demo only).
note() {
	((demo)) || return 0
	printf '# %s\n' "$*"
}

# node_lock NODE: the node lock of ipvsproxy on NODE. Every node of this topology is a network
# namespace of one kernel with one /run, where the real nodes are hosts of their own: each gets
# its own --lock-file (IPVSPROXY_LOCK_FILE), or node1's daemon would make node2's wait.
node_lock() { echo "/run/ipvsproxy-$1.lock"; }

# show WHERE CMD ANSWER: in demo mode, print a command as a person would type it where it ran,
# then the answer it gave.
show() {
	((demo)) || return 0
	printf '%s $ %s\n' "$(prompt "$1")" "$2"
	printf '%s\n' "${3:-<nothing>}" | sed 's/^/    /'
}

# prompt WHERE: how the demo names the place a command runs.
prompt() {
	case $1 in
	-) echo "vm" ;;
	node*) echo "$1" ;;
	client) echo "client(198.51.100.79)" ;;
	lb) echo "lb" ;;
	*) echo "pod $1($(pod_ip "$1"))" ;;
	esac
}

# wait_until SECONDS CMD...: poll CMD every 0.2 s until it succeeds; fail after SECONDS.
wait_until() {
	local limit=$1 start=$SECONDS
	shift
	until "$@" >/dev/null 2>&1; do
		((SECONDS - start < limit)) || return 1
		sleep 0.2
	done
}

# e2ectl as cluster admin (the guest's view of the API server).
kc() { "$E2E_BIN/e2ectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
