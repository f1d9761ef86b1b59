//go:build e2e

package suite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	scenariosFlag = flag.String("scenarios", "", "run these scenarios in this order, space-separated (a verdict's number selects its scenario); empty: all")
	listFlag      = flag.Bool("list", false, "print `VERDICT SCENARIO` for every verdict, `VERDICT SCENARIO by-name` for those of the scenarios run by name only, and exit (no VM needed)")
)

// A scenario is one t.Run: it writes its own Services and prints one verdict
// line per step (scenario 2 has steps 2 and 3, on one Service).
type scenario struct {
	num      string   // what IPVSPROXY_E2E_SCENARIOS names; also its first verdict
	verdicts []string // every verdict it prints, num first
	name     string
	run      func(s *S)
}

// scenarios in their default order. Their numbers follow the bash files they
// replaced, so a selection reads the same.
var scenarios = []scenario{
	{"1", []string{"1"}, "clusterip", scenarioClusterIP},
	{"2", []string{"2", "3"}, "nodeport", scenarioNodePort},
	{"4", []string{"4", "5"}, "loadbalancer", scenarioLoadBalancer},
	{"6", []string{"6"}, "proxymode", scenarioProxyMode},
	{"7", []string{"7"}, "spread", scenarioSpread},
	{"8", []string{"8"}, "udp", scenarioUDP},
	{"9", []string{"9"}, "restart", scenarioRestart},
	{"10", []string{"10"}, "cleanup", scenarioCleanup},
	{"11", []string{"11"}, "local_no_endpoints", scenarioLocalNoEndpoints},
	{"12", []string{"12"}, "node_address", scenarioNodeAddress},
	{"13", []string{"13"}, "source_ranges_all", scenarioSourceRangesAll},
	{"14", []string{"14"}, "health_check_lb_ip", scenarioHealthCheckLBIP},
	{"15", []string{"15"}, "node_source_ranges", scenarioNodeSourceRanges},
	{"16", []string{"16"}, "host_firewall", scenarioHostFirewall},
	{"17", []string{"17"}, "local_detect", scenarioLocalDetect},
	{"18", []string{"18", "18v6"}, "internal_traffic_local", scenarioInternalTrafficLocal},
	{"19", []string{"19", "19v6"}, "traffic_distribution", scenarioTrafficDistribution},
	{"20", []string{"20"}, "exclude_cidrs", scenarioExcludeCIDRs},
	{"21", []string{"21"}, "external_ip_guard", scenarioExternalIPGuard},
	{"22", []string{"22"}, "scheduler_flag", scenarioSchedulerFlag},
	{"23", []string{"23", "23v6"}, "affinity_timeout", scenarioAffinityTimeout},
	{"25", []string{"25"}, "conflict_loser", scenarioConflictLoser},
	{"26", []string{"26"}, "foreign_virtual_server", scenarioForeignVirtualServer},
	{"27", []string{"27"}, "failing_object", scenarioFailingObject},
	{"30", []string{"30", "31", "32"}, "inspect", scenarioInspect},
	{"33", []string{"33"}, "inspect_local_nodeport", scenarioInspectLocalNodePort},
	{"34", []string{"34"}, "inspect_source_ranges", scenarioInspectSourceRanges},
	{"35", []string{"35"}, "conntrack_reconcile", scenarioConntrackReconcile},
	{"36", []string{"36", "36v6"}, "health_starvation", scenarioHealthStarvation},
	{"37", []string{"37"}, "conntrack_periodic", scenarioConntrackPeriodic},
	{"38", []string{"38", "38v6"}, "sctp", scenarioSCTP},
	{"39a", []string{"39a", "39av6"}, "ipmode_proxy", scenarioIPModeProxy},
	{"39b", []string{"39b", "39bv6"}, "masquerade_all", scenarioMasqueradeAll},
	{"40", []string{"40"}, "config_file", scenarioConfigFile},
	{"41", []string{"41"}, "scheduler_annotation", scenarioSchedulerAnnotation},
	{"42", []string{"42"}, "kube_proxy_metrics", scenarioKubeProxyMetrics},
	{"43", []string{"43"}, "migrate", scenarioMigrate},
	{"44", []string{"44", "44v6"}, "migrate_kube_proxy", scenarioMigrateKubeProxy},
	{"45", []string{"45"}, "service_cidr_route", scenarioServiceCIDRRoute},
	{"46", []string{"46"}, "resync_shares", scenarioResyncShares},
	{"47", []string{"47"}, "node_guard", scenarioNodeGuard},
	{"48", []string{"48"}, "ownership_record", scenarioOwnershipRecord},
	{"49", []string{"49"}, "older_clusterrole", scenarioOlderClusterRole},
	{"50", []string{"50"}, "ipv6_dual_stack_clusterip", scenarioDualStackClusterIP},
	{"51", []string{"51"}, "ipv6_prefer_dual_stack", scenarioPreferDualStack},
	{"52", []string{"52"}, "ipv6_nodeport", scenarioIPv6NodePort},
	{"53", []string{"53"}, "ipv6_loadbalancer", scenarioIPv6LoadBalancer},
	{"54", []string{"54"}, "ipv6_source_ranges", scenarioIPv6SourceRanges},
	{"55", []string{"55"}, "ipv6_external_ip", scenarioIPv6ExternalIP},
	{"56", []string{"56"}, "ipv6_udp", scenarioIPv6UDP},
	{"57", []string{"57"}, "ipv6_inspect", scenarioIPv6Inspect},
	{"58", []string{"58"}, "ipv6_table_read", scenarioIPv6TableRead},
	{"60", []string{"60"}, "terminating_endpoint", scenarioTerminatingEndpoint},
	{"61", []string{"61"}, "service_deletion_drains", scenarioServiceDeletionDrains},
	{"62", []string{"62", "62v6"}, "api_outage", scenarioAPIOutage},
	{"63", []string{"63"}, "second_service_cidr", scenarioSecondServiceCIDR},
	{"64", []string{"64"}, "servicelb_node_addresses", scenarioServiceLBNodeAddresses},
	{"65", []string{"65"}, "api_vip_claim", scenarioAPIVIPClaim},
	{"70", []string{"70", "70v6"}, "upgrade_downgrade", scenarioUpgradeDowngrade},
}

// byName are the scenarios left out of the default order, for time: a
// selection runs them when it names them (`make e2e-migrate`).
var byName = []scenario{
	{"44rollback", []string{"44rollback"}, "rollback_kube_proxy_ipvs", scenarioRollbackKubeProxyIPVS},
	{"44iptables", []string{"44iptables"}, "migrate_kube_proxy_iptables", scenarioMigrateKubeProxyMode("iptables")},
	{"44nftables", []string{"44nftables"}, "migrate_kube_proxy_nftables", scenarioMigrateKubeProxyMode("nftables")},
	{"44rbiptables", []string{"44rbiptables"}, "rollback_kube_proxy_iptables", scenarioRollbackKubeProxyMode("iptables")},
	{"44rbnftables", []string{"44rbnftables"}, "rollback_kube_proxy_nftables", scenarioRollbackKubeProxyMode("nftables")},
	{"hostile", []string{"hostile"}, "hostile_service", scenarioHostileService},
}

// guest is what guest.sh passes in the environment.
var guest struct {
	repo   string // the checkout (bin/ipvsproxy, e2e/topology/topology.sh)
	logs   string // E2E_LOGS: kept by the host
	demo   bool
	client kubernetes.Interface // the cluster admin
}

func TestMain(m *testing.M) {
	flag.Parse()
	if *listFlag {
		for _, sc := range scenarios {
			for _, v := range sc.verdicts {
				fmt.Println(v, sc.num)
			}
		}
		for _, sc := range byName {
			for _, v := range sc.verdicts {
				fmt.Println(v, sc.num, "by-name")
			}
		}
		os.Exit(0)
	}
	guest.repo, guest.logs = os.Getenv("E2E_REPO"), os.Getenv("E2E_LOGS")
	guest.demo = os.Getenv("E2E_DEMO") == "1"
	kubeconfig := os.Getenv("ADMIN_KUBECONFIG")
	if guest.repo == "" || guest.logs == "" || kubeconfig == "" || os.Getuid() != 0 {
		fmt.Fprintln(os.Stderr, "the e2e suite runs as root inside the VM, from e2e/scenarios/guest.sh (E2E_REPO, E2E_LOGS, ADMIN_KUBECONFIG)")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "admin kubeconfig:", err)
		os.Exit(2)
	}
	if guest.client, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "admin client:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// TestScenarios runs the selected scenarios one after the other.
func TestScenarios(t *testing.T) {
	selected, err := selectScenarios(*scenariosFlag)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range selected {
		t.Run(sc.num+"_"+sc.name, func(t *testing.T) {
			sc.run(&S{t: t, sc: sc})
		})
	}
}

// selectScenarios maps the numbers of a selection to scenarios, each once;
// an empty one is the default order (without byName).
func selectScenarios(list string) ([]scenario, error) {
	if strings.TrimSpace(list) == "" {
		return scenarios, nil
	}
	all := slices.Concat(scenarios, byName)
	var out []scenario
	for _, n := range strings.Fields(list) {
		i := slices.IndexFunc(all, func(sc scenario) bool { return slices.Contains(sc.verdicts, n) })
		if i < 0 {
			return nil, fmt.Errorf("no Go scenario has verdict %q", n)
		}
		if !slices.ContainsFunc(out, func(sc scenario) bool { return sc.num == all[i].num }) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// S is one running scenario: its steps run in order, and a step after a
// failed one is reported as not run (it would act on what the failed one
// left half done).
type S struct {
	t      *testing.T
	sc     scenario
	failed string                             // the first failed step's number
	owned  map[cluster.ServiceRef]*v1.Service // what each ApplyService stored; nil once deleted
}

// ctx bounds one API call.
func (s *S) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// Step runs one verdict: fn's commands are recorded, its Errorf and Fatalf
// fail it, and the PASS/FAIL line is printed when it returns.
func (s *S) Step(num, name string, fn func(v *V)) {
	s.t.Run(num, func(t *testing.T) {
		v := &V{t: t, s: s, num: num, name: name}
		defer v.report()
		if s.failed != "" {
			v.Fatalf("not run: step %s of this scenario failed", s.failed)
		}
		fn(v)
	})
}

// V is one step: a verdict being made.
type V struct {
	t         *testing.T
	s         *S
	num, name string
	asked     []string // "where $ command => answer", printed after the verdict in test mode
	why       []string
}

// Errorf fails the verdict with a reason and goes on.
func (v *V) Errorf(format string, args ...any) {
	v.why = append(v.why, fmt.Sprintf(format, args...))
	v.t.Fail()
}

// Fatalf fails the verdict with a reason and ends the step.
func (v *V) Fatalf(format string, args ...any) {
	v.Errorf(format, args...)
	v.t.FailNow()
}

// Must ends the step when err is not nil.
func (v *V) Must(err error) {
	if err != nil {
		v.Fatalf("%v", err)
	}
}

// report prints the verdict line as lib.sh's verdict does.
func (v *V) report() {
	dump := ""
	if v.t.Failed() {
		if v.s.failed == "" {
			v.s.failed = v.num
		}
		fmt.Printf("FAIL %s %s: %s\n", v.num, v.name, oneline(strings.Join(v.why, "; ")))
		dump = filepath.Join(guest.logs, "scenario-"+v.num+"-failure.txt")
		// Every reason (the line above keeps 400 characters of them), then the nodes' state
		// now, before the clean-up and later scenarios change it.
		reasons := "----- every reason\n" + strings.Join(v.why, "\n") + "\n"
		if err := os.WriteFile(dump, []byte(reasons+dumpNodes("node1", "node2")), 0o644); err != nil {
			fmt.Printf("    (could not write %s: %v)\n", dump, err)
			dump = ""
		}
	} else {
		fmt.Printf("PASS %s %s\n", v.num, v.name)
	}
	if !guest.demo {
		for _, a := range v.asked {
			fmt.Printf("    %s\n", a)
		}
	}
	if dump != "" {
		fmt.Printf("    ----- the nodes' state at the failure (%s)\n", dump)
		b, _ := os.ReadFile(dump)
		fmt.Print(indent(strings.TrimRight(string(b), "\n")))
	}
}

// Heading is a section title of the tutorial (demo only).
func (v *V) Heading(text string) {
	if guest.demo {
		fmt.Printf("\n=== %s ===\n", text)
	}
}

// Note is a sentence for the person watching (demo only).
func (v *V) Note(format string, args ...any) {
	if guest.demo {
		fmt.Printf("# %s\n", fmt.Sprintf(format, args...))
	}
}

// Answer is what a command printed (stdout and stderr, trailing newlines
// dropped) and its exit status.
type Answer struct {
	Out    string
	Status int
}

// Ask runs the shell command cmd in network namespace where ("-": the VM's
// root namespace) and records it with its answer, as lib.sh's ask does. An
// ipvsproxy that cmd starts takes the node's own lock.
func (v *V) Ask(where, cmd string) Answer {
	a := run(where, cmd)
	shown := a.Out
	if shown == "" {
		shown = "<nothing>"
	}
	if a.Status != 0 {
		shown += fmt.Sprintf(" (exit %d)", a.Status)
	}
	v.record(where, cmd, shown)
	return a
}

// Show records a step done another way than a shell command (an API call, a
// read through the project's kernel readers), with what it gave, as a person
// would type it.
func (v *V) Show(where, what, answer string) {
	if answer == "" {
		answer = "<nothing>"
	}
	v.record(where, what, answer)
}

func (v *V) record(where, cmd, answer string) {
	place := where
	if place == "-" {
		place = "vm"
	}
	v.asked = append(v.asked, place+" $ "+cmd+" => "+oneline(answer))
	if guest.demo {
		fmt.Printf("%s $ %s\n%s", prompt(where), cmd, indent(answer))
	}
}

// shell is cmd under bash in namespace where ("-": the VM's root
// namespace), with the node's lock file named as its daemon's, so an
// ipvsproxy command run there waits for the same lock.
func shell(where, cmd string) *exec.Cmd {
	if where == "-" {
		return exec.Command("bash", "-c", cmd)
	}
	c := exec.Command("ip", "netns", "exec", where, "bash", "-c", cmd)
	c.Env = append(os.Environ(), "IPVSPROXY_LOCK_FILE=/run/ipvsproxy-"+where+".lock")
	return c
}

// run runs cmd under bash in namespace where without recording it (waits,
// set-up the tutorial does not show).
func run(where, cmd string) Answer {
	c := shell(where, cmd)
	out, err := c.CombinedOutput()
	a := Answer{Out: strings.TrimRight(string(out), "\n")}
	if err != nil {
		a.Status = -1
		if ee, ok := err.(*exec.ExitError); ok {
			a.Status = ee.ExitCode()
		} else {
			a.Out = strings.TrimSpace(a.Out + " " + err.Error())
		}
	}
	return a
}

// topology runs e2e/topology/topology.sh with args (lb-add, lb-del ...).
func topology(args ...string) error {
	out, err := exec.Command(filepath.Join(guest.repo, "e2e/topology/topology.sh"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("topology.sh %s: %v: %s", strings.Join(args, " "), err, oneline(string(out)))
	}
	return nil
}

// prompt is how the transcript names the place a command runs.
func prompt(where string) string {
	switch {
	case where == "-":
		return "vm"
	case strings.HasPrefix(where, "node"), where == "lb":
		return where
	case where == "client":
		return "client(" + clientAddr + ")"
	}
	return "pod " + where + "(" + podIP(where) + ")"
}

func oneline(s string) string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\n", " "), " ")
	if len(s) > 400 {
		s = s[:400]
	}
	return s
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// WaitUntil polls cond every 0.2 s until it holds; after limit it fails the
// step with what cond last said.
func (v *V) WaitUntil(limit time.Duration, what string, cond func() (bool, string)) {
	if ok, last := waitUntil(limit, cond); !ok {
		v.Fatalf("after %s, %s: %s", limit, what, last)
	}
}

func waitUntil(limit time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(limit)
	for {
		ok, last := cond()
		if ok || time.Now().After(deadline) {
			return ok, last
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dumpNodes is what the proxiers wrote into the nodes, for a failure
// report: the same commands as lib.sh's dump_node.
func dumpNodes(nodes ...string) string {
	var b strings.Builder
	for _, n := range nodes {
		for _, c := range []struct{ title, cmd string }{
			{"ipvsadm -Ln", "ip netns exec " + n + " ipvsadm -Ln"},
			{"ip addr show kube-ipvs0", "ip -n " + n + " addr show kube-ipvs0; ip -n " + n + " route show table local dev kube-ipvs0"},
			{"ipset list", "ip netns exec " + n + " ipset list | head -n 80"},
			{"iptables-save", "ip netns exec " + n + " iptables-save"},
			{"conntrack -L", "ip netns exec " + n + " conntrack -L 2>&1 | head -n 40"},
			{"ipvsproxy log (last 60 lines)", "tail -n 60 " + filepath.Join(guest.logs, "ipvsproxy-"+n+".log")},
		} {
			fmt.Fprintf(&b, "----- %s: %s\n%s\n", n, c.title, run("-", c.cmd).Out)
		}
	}
	return b.String()
}
