//go:build e2e

package suite

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	scenariosFlag = flag.String("scenarios", "", "run these scenarios in this order, space-separated (a verdict's name selects its scenario); empty: all but those run by name only")
	listFlag      = flag.Bool("list", false, "print `VERDICT SCENARIO` for every verdict in the default order, then `VERDICT SCENARIO by-name` for those of the scenarios run by name only, and exit (no VM needed)")
	resolveFlag   = flag.String("resolve", "", "print the scenarios this selection runs, in its order, each once, and exit: 1 when a word names no verdict (no VM needed)")
)

// guest is what guest.sh passes in the environment.
var guest struct {
	repo   string // the checkout (bin/ipvsproxy, e2e/topology/topology.sh)
	logs   string // E2E_LOGS: kept by the host
	demo   bool
	client kubernetes.Interface // the cluster admin
}

func TestMain(m *testing.M) {
	flag.Parse()
	switch {
	case *listFlag:
		for _, sc := range scenarios {
			for _, v := range sc.verdicts {
				fmt.Println(v, sc.name)
			}
		}
		for _, sc := range byName {
			for _, v := range sc.verdicts {
				fmt.Println(v, sc.name, "by-name")
			}
		}
		os.Exit(0)
	case *resolveFlag != "":
		selected, err := selectScenarios(*resolveFlag, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		names := make([]string, len(selected))
		for i, sc := range selected {
			names[i] = sc.name
		}
		fmt.Println(strings.Join(names, " "))
		os.Exit(0)
	}
	guest.repo, guest.logs = os.Getenv("E2E_REPO"), os.Getenv("E2E_LOGS")
	guest.demo = os.Getenv("E2E_DEMO") == "1"
	kubeconfig := os.Getenv("ADMIN_KUBECONFIG")
	// Without any of them this is a host: only the tests of the scenario
	// table run (TestScenarios fails, saying where it runs).
	if guest.repo != "" || guest.logs != "" || kubeconfig != "" {
		if guest.repo == "" || guest.logs == "" || kubeconfig == "" || os.Getuid() != 0 {
			fmt.Fprintln(os.Stderr, inGuestOnly)
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
	}
	os.Exit(m.Run())
}

const inGuestOnly = "the e2e scenarios run as root inside the VM, from e2e/scenarios/guest.sh (E2E_REPO, E2E_LOGS, ADMIN_KUBECONFIG)"

// TestScenarios runs the selected scenarios one after the other.
func TestScenarios(t *testing.T) {
	if guest.client == nil {
		t.Fatal(inGuestOnly)
	}
	selected, err := selectScenarios(*scenariosFlag, os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range selected {
		t.Run(sc.name, func(t *testing.T) {
			sc.run(&S{t: t, sc: sc})
		})
	}
}

// selectScenarios maps the verdicts a selection names to their scenarios,
// each once; an empty one is the default order (without byName). A former
// name is taken for its name now, which is written to notes.
func selectScenarios(list string, notes io.Writer) ([]scenario, error) {
	if strings.TrimSpace(list) == "" {
		return scenarios, nil
	}
	all := slices.Concat(scenarios, byName)
	var out []scenario
	for _, word := range strings.Fields(list) {
		name := word
		if now, ok := formerNames[word]; ok {
			name = now
			fmt.Fprintf(notes, "e2e: %s is named %s now (0.2.0 drops the former names)\n", word, now)
		}
		i := slices.IndexFunc(all, func(sc scenario) bool { return slices.Contains(sc.verdicts, name) })
		if i < 0 {
			return nil, fmt.Errorf("no e2e scenario has a verdict %q (e2e/suite/scenarios_test.go; docs/testing.md lists them)", word)
		}
		if !slices.ContainsFunc(out, func(sc scenario) bool { return sc.name == all[i].name }) {
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
	failed string                             // the first failed step's verdict
	owned  map[cluster.ServiceRef]*v1.Service // what each ApplyService stored; nil once deleted
}

// ctx bounds one API call.
func (s *S) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// Step runs the verdict name (one of the scenario's verdicts in the table),
// saying about what it checks: fn's commands are recorded, its Errorf and
// Fatalf fail it, and the PASS/FAIL line is printed when it returns.
func (s *S) Step(name, about string, fn func(v *V)) {
	s.t.Run(name, func(t *testing.T) {
		v := &V{t: t, s: s, name: name, about: about}
		defer v.report()
		if !slices.Contains(s.sc.verdicts, name) {
			v.Fatalf("%s is no verdict of scenario %s in e2e/suite/scenarios_test.go (%s)", name, s.sc.name, strings.Join(s.sc.verdicts, ", "))
		}
		if s.failed != "" {
			v.Fatalf("not run: %s failed before it", s.failed)
		}
		fn(v)
	})
}

// V is one step: a verdict being made.
type V struct {
	t     *testing.T
	s     *S
	name  string   // the verdict, named by the behaviour it checks
	about string   // what it checked, printed after the name; a step may add what it measured
	asked []string // "where $ command => answer", printed after the verdict in test mode
	why   []string
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

// report prints the verdict line guest.sh counts, `PASS name: about` or
// `FAIL name: about: why`, with the commands the step ran.
func (v *V) report() {
	dump := ""
	if v.t.Failed() {
		if v.s.failed == "" {
			v.s.failed = v.name
		}
		fmt.Printf("FAIL %s: %s: %s\n", v.name, v.about, oneline(strings.Join(v.why, "; ")))
		dump = filepath.Join(guest.logs, "scenario-"+v.name+"-failure.txt")
		// Every reason (the line above keeps 400 characters of them), then the nodes' state
		// now, before the clean-up and later scenarios change it.
		reasons := "----- every reason\n" + strings.Join(v.why, "\n") + "\n"
		if err := os.WriteFile(dump, []byte(reasons+dumpNodes("node1", "node2")), 0o644); err != nil {
			fmt.Printf("    (could not write %s: %v)\n", dump, err)
			dump = ""
		}
	} else {
		fmt.Printf("PASS %s: %s\n", v.name, v.about)
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
