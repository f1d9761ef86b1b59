# lib.sh — helpers the scenarios share (sourced by guest.sh inside the VM, as root).
#
# A scenario is a function that runs commands through `ask` (which records the command line and
# its answer) and ends in `verdict N NAME CONDITION...`. In test mode each verdict is one line:
#   PASS 3 NodePort Local: client -> node1: `curl ... | grep client_address` -> client_address=198.51.100.79
# In demo mode (E2E_DEMO=1) every command is printed as a person would type it, then what it
# answered, as in the seed's transcript; the verdict follows.

passed=0 failed=0
demo=${E2E_DEMO:-0}
asked=() # "where $ command => answer" of the current scenario, for the verdict line

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

# ask WHERE CMD: run the shell command CMD in network namespace WHERE ("-" for the VM's root
# namespace) and set $answer to its output (stdout and stderr, trailing newline dropped) and
# $status to its exit status. A pipeline is fine: CMD runs under bash -c. An ipvsproxy that CMD
# starts takes WHERE's node lock.
ask() {
	local where=$1 cmd=$2
	if [[ $where == - ]]; then
		answer=$(bash -c "$cmd" 2>&1)
	else
		answer=$(IPVSPROXY_LOCK_FILE=$(node_lock "$where") ip netns exec "$where" bash -c "$cmd" 2>&1)
	fi
	status=$?
	local shown=${answer:-<nothing>}
	((status == 0)) || shown+=" (exit $status)"
	asked+=("${where/#-/vm} \$ $cmd => $(oneline "$shown")")
	if ((demo)); then
		printf '%s $ %s\n' "$(prompt "$where")" "$cmd"
		printf '%s\n' "$shown" | sed 's/^/    /'
	fi
	return 0
}

# show WHERE CMD ANSWER: record (and in demo mode print) a command that was run another way, with
# the answer it gave, e.g. e2ectl reading a manifest from a here-document.
show() {
	answer=$3 status=0
	asked+=("${1/#-/vm} \$ $2 => $(oneline "${3:-<nothing>}")")
	if ((demo)); then
		printf '%s $ %s\n' "$(prompt "$1")" "$2"
		printf '%s\n' "${3:-<nothing>}" | sed 's/^/    /'
	fi
	return 0
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

oneline() { tr '\n' ' ' <<<"$1" | sed 's/ *$//' | cut -c1-400; }

# verdict NUM NAME TEST...: PASS when the command TEST... succeeds. Prints the commands asked
# since the last verdict with their answers, and what TEST said when it failed.
verdict() {
	local num=$1 name=$2 why
	shift 2
	if why=$("$@" 2>&1); then
		passed=$((passed + 1))
		echo "PASS $num $name"
	else
		failed=$((failed + 1))
		echo "FAIL $num $name${why:+: $(oneline "$why")}"
		# The nodes' state now, before later scenarios change it.
		{ dump_node node1; dump_node node2; } >"$E2E_LOGS/scenario-$num-failure.txt" 2>&1
	fi
	if ! ((demo)); then
		local a
		for a in "${asked[@]}"; do printf '    %s\n' "$a"; done
	fi
	if [[ -e $E2E_LOGS/scenario-$num-failure.txt ]]; then
		echo "    ----- the nodes' state at the failure ($E2E_LOGS/scenario-$num-failure.txt)"
		sed 's/^/    /' "$E2E_LOGS/scenario-$num-failure.txt"
	fi
	asked=()
}

# no_failures MESSAGE...: a verdict test that passes when no failure was collected.
no_failures() {
	(($# == 0)) || { printf '%s; ' "$@"; return 1; }
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

# set_lb_ingress SVC IP [IPMODE]: write status.loadBalancer.ingress as a cloud controller would,
# with ipMode IPMODE (VIP or Proxy, KEP-1860) when given; without it the field is absent (VIP).
# e2ectl has no command for the status subresource, so this is the REST call with the admin
# certificate.
set_lb_ingress() {
	curl -sS --fail --max-time 20 --cacert "$E2E_PKI/ca.crt" --cert "$E2E_PKI/admin.crt" \
		--key "$E2E_PKI/admin.key" -X PATCH -H 'Content-Type: application/merge-patch+json' \
		--data "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"$2\"${3:+,\"ipMode\":\"$3\"}}]}}}" \
		"https://$E2E_HOST_ADDR:6443/api/v1/namespaces/default/services/$1/status" >/dev/null
}

# set_lb_ingresses SVC IP[=IPMODE]...: set_lb_ingress with several ingress entries (a dual-stack
# load balancer's, one IP of each family).
set_lb_ingresses() {
	local svc=$1 e items= sep=
	shift
	for e in "$@"; do
		items+="$sep{\"ip\":\"${e%%=*}\"$([[ $e == *=* ]] && echo ",\"ipMode\":\"${e#*=}\"")}"
		sep=,
	done
	curl -sS --fail --max-time 20 --cacert "$E2E_PKI/ca.crt" --cert "$E2E_PKI/admin.crt" \
		--key "$E2E_PKI/admin.key" -X PATCH -H 'Content-Type: application/merge-patch+json' \
		--data "{\"status\":{\"loadBalancer\":{\"ingress\":[$items]}}}" \
		"https://$E2E_HOST_ADDR:6443/api/v1/namespaces/default/services/$svc/status" >/dev/null
}

# real_servers NODE PROTO VIP:PORT: the real servers IPVS has for a virtual server in NODE.
real_servers() {
	ip netns exec "$1" ipvsadm -Ln "--$2-service" "$3" 2>/dev/null | awk '$1 == "->" && $2 != "RemoteAddress:Port" { print $2 }' | sort
}

# wait_real_servers NODE PROTO VIP:PORT WANT: wait until the real servers are exactly WANT
# (space-separated, sorted; empty means "the virtual server exists with none").
wait_real_servers() {
	local node=$1 proto=$2 vs=$3 want=$4
	wait_until 30 bash -c "
		ip netns exec $node ipvsadm -Ln --$proto-service $vs >/dev/null 2>&1 &&
		[[ \"\$(ip netns exec $node ipvsadm -Ln --$proto-service $vs | awk '\$1 == \"->\" && \$2 != \"RemoteAddress:Port\" { print \$2 }' | sort | tr '\n' ' ' | sed 's/ \$//')\" == '$want' ]]"
}

# now, since T: wall-clock seconds with a fraction, and the time elapsed since T ("1.3").
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# field NAME TEXT: the value of NAME= in TEXT (first match).
field() { sed -n "s/^$1=//p" <<<"$2" | head -n1; }

# kill_tree PID: stop a background pipeline started in a network namespace, descendants first
# (from /proc, so nothing beyond the kernel and bash is needed).
kill_tree() {
	local c
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		kill_tree "$c"
	done
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# vs_gone NODE IP: the node holds no virtual server on IP.
vs_gone() {
	! ip netns exec "$1" ipvsadm -Ln | grep -qF " $2:"
}
