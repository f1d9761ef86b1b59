//go:build e2e

package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// What an operator meets running the daemon: its scheduler flag, a
// Service's own scheduler, the metrics a kube-proxy dashboard reads.

// scenarioSchedulerFlag: a scheduler named by --ipvs-scheduler that the
// kernel lacks is a start-up error naming the flag (not a silent fallback to
// wrr and a daemon that runs on). The daemon starts in a namespace of its
// own, so nothing of the nodes changes. The running daemons' logs say which
// scheduler they use: twos, or on a kernel without it (Debian 12's 6.1) the
// documented fallback wrr, with the line that says so.
func scenarioSchedulerFlag(s *S) {
	s.Step("scheduler-flag-unknown", "--ipvs-scheduler=no-such-scheduler exits with an error naming the flag; the running daemons log twos (wrr with the fallback's line where the kernel has no twos)", func(v *V) {
		v.Heading("An explicit --ipvs-scheduler the kernel lacks stops the start-up")
		ns := fmt.Sprintf("e2e-sched-%d", os.Getpid())
		if a := run("-", "ip netns add "+ns+" && ip -n "+ns+" link set lo up"); a.Status != 0 {
			v.Fatalf("ip netns add %s: %s", ns, a.Out)
		}
		s.t.Cleanup(func() { run("-", "ip netns del "+ns) })
		start := fmt.Sprintf("timeout 30 ip netns exec %s %s run --kubeconfig %s --hostname-override node1 --lock-file /run/ipvsproxy-%s.lock --ip-families IPv4 --ipvs-scheduler no-such-scheduler",
			ns, ipvsproxyBin(), os.Getenv("PROXIER_KUBECONFIG"), ns)
		out := v.Ask("-", start+" 2>&1 | tail -n 3").Out
		if !strings.Contains(out, "--ipvs-scheduler=no-such-scheduler: the kernel has no such IPVS scheduler") {
			v.Errorf("output %q does not name the flag and the scheduler", out)
		}
		// 1 is the daemon's error; the timeout would give 124.
		if code := v.Ask("-", start+" >/dev/null 2>&1; echo exit=$?").Out; code != "exit=1" {
			v.Errorf("want exit=1, got %s", code)
		}
		log := filepath.Join(guest.logs, "ipvsproxy-node1.log")
		if !kernelHasTwos() {
			fellBack := v.Ask("-", "grep -h -o 'The kernel has no twos IPVS scheduler.*' "+log+" | tail -n 1").Out
			v.Show("node1", "grep 'no twos' ipvsproxy.log  # kernel "+os.Getenv("IPVSPROXY_VM_KERNEL"), fellBack)
			if !strings.Contains(fellBack, `fallback="wrr"`) {
				v.Errorf("node1's log does not name the fallback to wrr: %q", fellBack)
			}
			return
		}
		if used := v.Ask("-", "grep -h -o 'Using the IPVS scheduler.*' "+log+" | tail -n 1").Out; !strings.Contains(used, `scheduler="twos"`) {
			v.Errorf("node1's log does not say it uses twos: %q", used)
		}
	})
}

func ipvsproxyBin() string { return filepath.Join(guest.repo, "bin/ipvsproxy") }

// kernelHasTwos: the VM's kernel has the twos scheduler. Debian 12's 6.1
// kernels (IPVSPROXY_VM_KERNEL 6.1 and cloud) are built without
// CONFIG_IP_VS_TWOS; its 6.12 kernels have it. Decided by the kernel chosen,
// not by a probe, so that a 6.12 kernel that lost twos fails the suite.
func kernelHasTwos() bool {
	switch os.Getenv("IPVSPROXY_VM_KERNEL") {
	case "6.1", "cloud":
		return false
	}
	return true
}

// defaultScheduler is the scheduler the daemons use when none is named:
// twos, or its documented fallback wrr on a kernel without it.
func defaultScheduler() string {
	if kernelHasTwos() {
		return "twos"
	}
	return "wrr"
}

// scenarioSchedulerAnnotation: a Service chooses its IPVS scheduler and the
// scheduler's flags (kubernetes#75502, #118784), among those the operator
// allows. First with the suite's daemons, whose allowed list is what the
// kernel had at their start: a Service naming a scheduler whose module the
// kernel has on disk but not loaded gets a SchedulerNotAllowed Event naming
// the list, keeps the default scheduler, and the module stays unloaded (IPVS loads
// ip_vs_<name> for any virtual server that names it). Then node1 runs with
// --ipvs-allowed-schedulers mh: `ipvsproxy.io/scheduler: mh` with
// `ipvsproxy.io/scheduler-flags: mh-port,mh-fallback` becomes an mh virtual
// server with both flags in the kernel; a Service with a misspelt scheduler
// keeps the default and gets a Warning Event naming the annotation, and
// neither disturbs the other.
func scenarioSchedulerAnnotation(s *S) {
	s.Step("scheduler-annotation", "scheduler annotation: a scheduler not allowed loads no module and gets an Event; with mh allowed, mh with mh-port,mh-fallback in the kernel; a misspelt one keeps the default scheduler with an Event", func(v *V) {
		v.Heading("A scheduler a Service may not choose: no module loaded, an Event")
		notLoaded := v.unloadedScheduler()
		modulesBefore := v.Ask("-", "grep -o '^ip_vs[a-z_]*' /proc/modules | sort | tr '\\n' ' '  # the kernel's IPVS modules, before").Out
		tenant := v.ApplyService(service(fmt.Sprintf("{name: tenant41, annotations: {ipvsproxy.io/scheduler: %s}}", notLoaded), httpPort))
		v.Show("-", "e2ectl apply-service tenant41.yaml  # ipvsproxy.io/scheduler: "+notLoaded, "")
		v.SetEndpoints(tenant, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, tenant.Spec.ClusterIP, 80, podIP("web")+":8080")
		if vs, err := virtualServer("node1", ipvs.TCP, tenant.Spec.ClusterIP, 80); err != nil || vs.Scheduler != defaultScheduler() {
			v.Errorf("tenant41 on node1: scheduler %q (%v), want %s", vs.Scheduler, err, defaultScheduler())
		}
		v.WaitEvent("tenant41", "SchedulerNotAllowed", `ipvsproxy.io/scheduler="`+notLoaded+`"`, "a Service may choose", "using "+defaultScheduler())
		if code := v.Ask("c1", "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://"+tenant.Spec.ClusterIP+"/").Out; code != "200" {
			v.Errorf("tenant41 answered %q, want 200", code)
		}
		modulesAfter := v.Ask("-", "grep -o '^ip_vs[a-z_]*' /proc/modules | sort | tr '\\n' ' '  # after").Out
		if strings.Contains(" "+modulesAfter+" ", " ip_vs_"+notLoaded+" ") || modulesAfter != modulesBefore {
			v.Errorf("the kernel's IPVS modules changed: %q, then %q", modulesBefore, modulesAfter)
		}

		v.Heading("A Service's own scheduler: mh with mh-port and mh-fallback, allowed on node1")
		v.RestartProxier("node1", proxierRun{extra: []string{"--ipvs-allowed-schedulers", "mh"}})
		hashed := v.ApplyService(service(`{name: hashed41, annotations: {ipvsproxy.io/scheduler: mh, ipvsproxy.io/scheduler-flags: "mh-port,mh-fallback"}}`, httpPort))
		typo := v.ApplyService(service("{name: typo41, annotations: {ipvsproxy.io/scheduler: mhh}}", httpPort))
		v.Show("-", "e2ectl apply-service hashed41.yaml typo41.yaml  # scheduler mh with mh-port,mh-fallback; scheduler mhh", "")
		v.SetEndpoints(hashed, "web@node1", "s2@node2")
		v.SetEndpoints(typo, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, hashed.Spec.ClusterIP, 80, podIP("web")+":8080", podIP("s2")+":8080")
		v.WaitRealServers("node1", ipvs.TCP, typo.Spec.ClusterIP, 80, podIP("web")+":8080")
		for _, c := range []struct{ ip, scheduler, flags string }{
			{hashed.Spec.ClusterIP, "mh", "mh-fallback,mh-port"},
			{typo.Spec.ClusterIP, defaultScheduler(), ""},
		} {
			vs, err := virtualServer("node1", ipvs.TCP, c.ip, 80)
			v.Must(err)
			flags := vs.SchedulerFlags.For(vs.Scheduler)
			v.Show("node1", "ipvsadm -Ln -t "+c.ip+":80  # read with the ipvs package", strings.TrimSpace(vs.String()+" "+vs.Scheduler+" "+flags))
			if vs.Scheduler != c.scheduler || flags != c.flags {
				v.Errorf("%s: scheduler %s flags %q, want %s flags %q", vs.String(), vs.Scheduler, flags, c.scheduler, c.flags)
			}
		}
		if code := v.Ask("c1", "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://"+hashed.Spec.ClusterIP+"/").Out; code != "200" {
			v.Errorf("the mh Service answered %q, want 200", code)
		}
		v.WaitEvent("typo41", "InvalidService", "ipvsproxy.io/scheduler", "mhh")
		v.about = "scheduler annotation: " + notLoaded + " (on disk, not loaded) not allowed by default: " + defaultScheduler() + ", a SchedulerNotAllowed Event, no module loaded; with --ipvs-allowed-schedulers mh, mh with mh-port,mh-fallback in the kernel; a misspelt one keeps " + defaultScheduler() + " with an Event"
	})
}

// unloadedScheduler is a stock scheduler whose module the kernel has on
// disk (modinfo) but has not loaded (/proc/modules, /sys/module): one that
// a virtual server naming it would make the kernel load.
func (v *V) unloadedScheduler() string {
	for _, name := range []string{"lblcr", "lblc", "dh", "ovf", "fo", "nq", "sed", "lc"} {
		if run("-", "grep -q '^ip_vs_"+name+" ' /proc/modules || test -e /sys/module/ip_vs_"+name).Status == 0 {
			continue
		}
		if a := v.Ask("-", "modinfo -F filename ip_vs_"+name+"  # on disk, not loaded"); a.Status == 0 {
			return name
		}
	}
	v.Fatalf("every candidate scheduler is loaded or missing: nothing to show a module not loaded")
	return ""
}

// virtualServer reads one virtual server of the node with the ipvs package.
func virtualServer(node string, proto ipvs.Protocol, addr string, port uint16) (ipvs.VirtualServer, error) {
	vss, err := virtualServers(node)
	if err != nil {
		return ipvs.VirtualServer{}, err
	}
	for _, vs := range vss {
		if vs.Protocol == proto && vs.Address.String() == addr && vs.Port == port {
			return vs, nil
		}
	}
	return ipvs.VirtualServer{}, fmt.Errorf("%s has no virtual server %s %s:%d", node, proto, addr, port)
}

// scenarioKubeProxyMetrics: the metrics a kube-proxy dashboard reads, as a
// scraper sees them on a node: the full and partial sync histograms,
// kubernetes_build_info, client-go's rest_client_requests_total.
func scenarioKubeProxyMetrics(s *S) {
	s.Step("kube-proxy-metrics", "kube-proxy's metrics: build info, full and partial sync histograms, rest_client_requests_total", func(v *V) {
		v.Heading("kube-proxy's metrics on /metrics")
		// A change, so that a partial sync has happened whatever ran before.
		svc := v.ApplyService(service("{name: metrics42}", httpPort))
		v.SetEndpoints(svc, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, svc.Spec.ClusterIP, 80, podIP("web")+":8080")
		m := v.Ask("node1", "curl -s localhost:10249/metrics | grep -E '^(kubernetes_build_info|kubeproxy_sync_full_proxy_rules_duration_seconds_count|kubeproxy_sync_partial_proxy_rules_duration_seconds_count|rest_client_requests_total)' | sort").Out
		values := map[string]float64{}
		for _, l := range strings.Split(m, "\n") {
			if name, val, ok := strings.Cut(l, " "); ok {
				values[name], _ = strconv.ParseFloat(val, 64)
			}
		}
		for _, name := range []string{
			`kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}`,
			`kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv4"}`,
		} {
			if values[name] < 1 {
				v.Errorf("%s is %v, want at least 1", name, values[name])
			}
		}
		if !strings.Contains(m, "kubernetes_build_info{") {
			v.Errorf("no kubernetes_build_info on /metrics")
		}
		if !strings.Contains(m, `rest_client_requests_total{code="200"`) {
			v.Errorf(`no rest_client_requests_total{code="200",...} on /metrics`)
		}
		// The whole page, kept with the run's logs: deploy/monitoring's alert and dashboard
		// tests take their input series from it (deploy/monitoring/testdata/metrics.prom).
		page := run("node1", "curl -s localhost:10249/metrics")
		if page.Status != 0 || !strings.Contains(page.Out, "ipvsproxy_sync_full_total") {
			v.Errorf("/metrics of node1: %s", oneline(page.Out))
		} else if err := os.WriteFile(filepath.Join(guest.logs, "metrics-node1.prom"), []byte(page.Out+"\n"), 0o644); err != nil {
			v.Errorf("keep /metrics: %v", err)
		}
	})
}
