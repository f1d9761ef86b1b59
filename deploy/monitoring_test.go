package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/metrics"
)

// The monitoring shipped with a release (deploy/monitoring) is checked with
// Prometheus' own promtool, and against what a running daemon serves:
// testdata/metrics.prom is node1's /metrics page as e2e kube-proxy-metrics kept it
// (results/logs/metrics-node1.prom of an end-to-end run).
const (
	monitoringDir = "monitoring"
	recordedPage  = "monitoring/testdata/metrics.prom"
)

// The labels a scrape by podmonitor.yaml adds to every series.
var targetLabels = map[string]string{
	"job": "kube-system/ipvsproxy", "namespace": "kube-system", "pod": "ipvsproxy-x7k2p",
	"node": "node1", "instance": "node1",
}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found: Debian's prometheus package has it (e2e/install-deps.sh installs it): %v", err)
	}
	return p
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// recorded reads the daemon's /metrics page.
func recorded(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(recordedPage)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s: %v", recordedPage, err)
	}
	if len(families) < 20 || families["ipvsproxy_sync_full_total"] == nil {
		t.Fatalf("%s has %d families and no ipvsproxy_sync_full_total: not a daemon's page", recordedPage, len(families))
	}
	return families
}

// ruleGroups is prometheusrule.yaml's spec.groups, the rule file Prometheus reads.
func ruleGroups(t *testing.T) []any {
	t.Helper()
	objs, err := ReadObjects(filepath.Join(monitoringDir, "prometheusrule.yaml"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("prometheusrule.yaml: %d objects, %v", len(objs), err)
	}
	groups, ok := objs[0].Object["spec"].(map[string]any)["groups"].([]any)
	if !ok || len(groups) == 0 {
		t.Fatal("prometheusrule.yaml has no spec.groups")
	}
	return groups
}

func writeYAML(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rules lists each rule's expression by its alert (or record) name.
func rules(groups []any) map[string]string {
	out := map[string]string{}
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			m := r.(map[string]any)
			name, _ := m["alert"].(string)
			if name == "" {
				name, _ = m["record"].(string)
			}
			out[name], _ = m["expr"].(string)
		}
	}
	return out
}

// dashboardQueries are dashboard.json's PromQL expressions by panel, with
// Grafana's variables as a query of them would have them.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", targetLabels["job"], "$node", ".*")
	out := map[string]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			out[fmt.Sprintf("ipvsproxy_dashboard:panel%d_%s", p.ID, strings.ToLower(q.RefID))] = vars.Replace(q.Expr)
		}
	}
	if len(out) < 10 {
		t.Fatalf("dashboard.json has %d queries", len(out))
	}
	return out
}

// promtool check rules: the alerts parse, their templates too.
func TestAlertRulesPassPromtool(t *testing.T) {
	file := writeYAML(t, filepath.Join(t.TempDir(), "ipvsproxy.rules.yaml"), map[string]any{"groups": ruleGroups(t)})
	out := runPromtool(t, "check", "rules", file)
	if !strings.Contains(out, "SUCCESS: 6 rules found") {
		t.Errorf("promtool check rules: %s", out)
	}
}

// Every query of the dashboard is PromQL that Prometheus parses: checked
// by the same promtool as recording rules.
func TestDashboardQueriesPassPromtool(t *testing.T) {
	queries := dashboardQueries(t)
	var rs []any
	names := make([]string, 0, len(queries))
	for n := range queries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rs = append(rs, map[string]any{"record": n, "expr": queries[n]})
	}
	file := writeYAML(t, filepath.Join(t.TempDir(), "dashboard.rules.yaml"), map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rs}}})
	out := runPromtool(t, "check", "rules", file)
	if !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(rs))) {
		t.Errorf("promtool check rules: %s", out)
	}
}

var (
	metricName = regexp.MustCompile(`\b((?:ipvsproxy|kubeproxy|kubernetes|process|rest_client|go)_[a-zA-Z0-9_:]*)\b`)
	byClause   = regexp.MustCompile(`\bby \(([^)]*)\)`)
)

// registered are the daemon's metrics as its code registers them
// (metrics.New, with the REST client's): each name and its labels. A
// vector with no series yet (ipvsproxy_api_permission_missing on a healthy
// node) is on no /metrics page, but is here.
func registered(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := metrics.New()
	m.RegisterRESTClient()
	ch := make(chan *prometheus.Desc, 256)
	go func() { m.Registry.Describe(ch); close(ch) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	variable := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := map[string]map[string]bool{}
	for d := range ch {
		s := d.String()
		n := fqName.FindStringSubmatch(s)
		if n == nil {
			t.Fatalf("no name in %s", s)
		}
		ls := map[string]bool{}
		if v := variable.FindStringSubmatch(s); v != nil {
			for _, l := range strings.Split(v[1], ",") {
				if l = strings.TrimSpace(l); l != "" {
					ls[l] = true
				}
			}
		}
		out[n[1]] = ls
	}
	if len(out) < 20 {
		t.Fatalf("metrics.New registers %d metrics", len(out))
	}
	return out
}

// Every metric the alerts and the dashboard read is one the daemon
// registers, or serves on the recorded page (the Go runtime's, the
// process's), and every label they group by is one it has (or one the
// scrape adds): a renamed metric or label fails here instead of silencing
// an alert.
func TestMonitoringReadsTheDaemonsMetrics(t *testing.T) {
	families := recorded(t)
	code := registered(t)
	labelsOf := func(name string) (map[string]bool, bool) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && (families[b] != nil || code[b] != nil) {
				base = b
			}
		}
		ls := map[string]bool{"le": strings.HasSuffix(name, "_bucket")}
		fam, inCode := families[base], code[base]
		if fam == nil && inCode == nil {
			return nil, false
		}
		for l := range inCode {
			ls[l] = true
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = true
			}
		}
		return ls, true
	}
	exprs := rules(ruleGroups(t))
	for n, q := range dashboardQueries(t) {
		exprs[n] = q
	}
	for where, expr := range exprs {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s reads no metric of the daemon: %s", where, expr)
		}
		available := map[string]bool{}
		for k := range targetLabels {
			available[k] = true
		}
		for _, n := range names {
			ls, ok := labelsOf(n)
			if !ok {
				t.Errorf("%s reads %s, which the daemon neither registers nor serves", where, n)
				continue
			}
			for l, has := range ls {
				available[l] = available[l] || has
			}
		}
		for _, m := range byClause.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); !available[l] {
					t.Errorf("%s groups by %q, which neither %v nor the scrape has", where, l, names)
				}
			}
		}
	}
}

// series are the recorded page as promtool's input series: each sample as a
// series of its value, 1 minute apart for 90 minutes, with the scrape's
// labels; overrides replace (or add) series by their text.
func series(t *testing.T, families map[string]*dto.MetricFamily, overrides map[string]string) []any {
	t.Helper()
	out := map[string]string{}
	add := func(name string, labels []*dto.LabelPair, extra map[string]string, v float64) {
		ls := model.LabelSet{}
		for k, val := range targetLabels {
			ls[model.LabelName(k)] = model.LabelValue(val)
		}
		for _, l := range labels {
			ls[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
		}
		for k, val := range extra {
			ls[model.LabelName(k)] = model.LabelValue(val)
		}
		out[name+ls.String()] = strconv.FormatFloat(v, 'g', -1, 64) + "+0x90"
	}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetLabel(), nil, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.GetLabel(), nil, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m.GetLabel(), nil, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", m.GetLabel(), map[string]string{"le": strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)}, float64(b.GetCumulativeCount()))
				}
				add(name+"_bucket", m.GetLabel(), map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
				add(name+"_sum", m.GetLabel(), nil, h.GetSampleSum())
				add(name+"_count", m.GetLabel(), nil, float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, m.GetLabel(), map[string]string{"quantile": strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)}, q.GetValue())
				}
				add(name+"_sum", m.GetLabel(), nil, s.GetSampleSum())
				add(name+"_count", m.GetLabel(), nil, float64(s.GetSampleCount()))
			}
		}
	}
	// A healthy daemon's last sync is always now: at time t its timestamp is t.
	for s := range out {
		if strings.HasPrefix(s, "kubeproxy_sync_proxy_rules_last_timestamp_seconds{") {
			out[s] = "0+60x90"
		}
	}
	for s, v := range overrides {
		out[s] = v
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	list := make([]any, 0, len(keys))
	for _, k := range keys {
		list = append(list, map[string]any{"series": k, "values": out[k]})
	}
	return list
}

// seriesName writes a series with the scrape's labels and these.
func seriesName(name string, labels map[string]string) string {
	ls := model.LabelSet{}
	for k, v := range targetLabels {
		ls[model.LabelName(k)] = model.LabelValue(v)
	}
	for k, v := range labels {
		ls[model.LabelName(k)] = model.LabelValue(v)
	}
	return name + ls.String()
}

// The alerts on the recorded page: none fires for the healthy daemon, and
// each fires, with its labels and text, once its condition has held for its
// time (promtool test rules).
func TestAlertsOnTheRecordedDaemon(t *testing.T) {
	families := recorded(t)
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "ipvsproxy.rules.yaml"), map[string]any{"groups": ruleGroups(t)})
	alerts := []string{"IPVSProxyKernelObjectsFailing", "IPVSProxyDeletionsHeld", "IPVSProxyAPIPermissionMissing",
		"IPVSProxySchedulerFallback", "IPVSProxySyncStale", "IPVSProxyNetworkProgrammingLatencyHigh"}
	if got := rules(ruleGroups(t)); len(got) != len(alerts) {
		t.Fatalf("prometheusrule.yaml has %d rules, this test knows %d: give each a case", len(got), len(alerts))
	}
	at := map[string]string{"node": "node1", "namespace": "kube-system", "pod": "ipvsproxy-x7k2p"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range at {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	// The family of the daemon's sync timestamps, from the page (IPv4, and IPv6 on a dual-stack node).
	family := "IPv4"
	var tests []any
	quiet := func(evalTime string) []any {
		var ts []any
		for _, a := range alerts {
			ts = append(ts, map[string]any{"eval_time": evalTime, "alertname": a, "exp_alerts": []any{}})
		}
		return ts
	}
	tests = append(tests, map[string]any{"interval": "1m", "input_series": series(t, families, nil), "alert_rule_test": quiet("60m")})

	fires := func(overrides map[string]string, evalTime, alert string, labels, annotations map[string]string) {
		tests = append(tests, map[string]any{
			"interval":     "1m",
			"input_series": series(t, families, overrides),
			"alert_rule_test": []any{map[string]any{
				"eval_time": evalTime, "alertname": alert,
				"exp_alerts": []any{map[string]any{"exp_labels": labels, "exp_annotations": annotations}},
			}},
		})
	}
	fires(map[string]string{seriesName("ipvsproxy_kernel_objects_failing", map[string]string{"object": "ipvs"}): "3+0x90"},
		"20m", "IPVSProxyKernelObjectsFailing",
		with(map[string]string{"severity": "warning", "object": "ipvs"}),
		map[string]string{
			"summary":     "ipvsproxy on node1 cannot write 3 ipvs objects to the kernel",
			"description": "Writes of ipvs objects have been failing on kube-system/ipvsproxy-x7k2p for 15 minutes. `ipvsproxy inspect` on the node names each object and its error.",
		})
	fires(map[string]string{seriesName("ipvsproxy_deletions_held", nil): "1+0x90"},
		"15m", "IPVSProxyDeletionsHeld", with(map[string]string{"severity": "critical"}),
		map[string]string{
			"summary":     "ipvsproxy on node1 holds every deletion: the Service default/kubernetes is missing",
			"description": "kube-system/ipvsproxy-x7k2p has held deletions for 10 minutes (ipvsproxy_held_deletions counts the objects waiting). Check which API server and etcd the node reads.",
		})
	perm := map[string]string{"group": "discovery.k8s.io", "resource": "endpointslices", "verb": "watch"}
	fires(map[string]string{seriesName("ipvsproxy_api_permission_missing", perm): "1+0x90"},
		"10m", "IPVSProxyAPIPermissionMissing", with(map[string]string{"severity": "critical", "group": "discovery.k8s.io", "resource": "endpointslices", "verb": "watch"}),
		map[string]string{
			"summary":     "ipvsproxy on node1 may not watch endpointslices",
			"description": `The API server forbids watch on endpointslices (group "discovery.k8s.io") to kube-system/ipvsproxy-x7k2p: apply the ClusterRole of the installed version (docs/rbac.md).`,
		})
	fires(map[string]string{seriesName("ipvsproxy_scheduler_fallback", map[string]string{"scheduler": "twos"}): "1+0x90"},
		"40m", "IPVSProxySchedulerFallback", with(map[string]string{"severity": "info", "scheduler": "twos"}),
		map[string]string{
			"summary":     "ipvsproxy on node1 uses wrr: the kernel has no twos scheduler",
			"description": "Load the ip_vs_twos module on the node, or set --ipvs-scheduler (docs/scheduler.md).",
		})
	fires(map[string]string{seriesName("kubeproxy_sync_proxy_rules_last_timestamp_seconds", map[string]string{"ip_family": family}): "0+0x90"},
		"20m", "IPVSProxySyncStale", with(map[string]string{"severity": "critical", "ip_family": family}),
		map[string]string{
			"summary":     "ipvsproxy on node1 has not synced IPv4 for 20m 0s",
			"description": "No successful sync of kube-system/ipvsproxy-x7k2p since 20m 0s: changes to Services and endpoints are not reaching the node. See its logs and `ipvsproxy inspect`.",
		})
	// Every endpoint change of the last minutes took between 40 and 41 s to program: p99 40.99 s.
	slow := map[string]string{}
	fam := families["kubeproxy_network_programming_duration_seconds"]
	if fam == nil {
		t.Fatal("the recorded page has no kubeproxy_network_programming_duration_seconds")
	}
	for _, b := range fam.GetMetric()[0].GetHistogram().GetBucket() {
		le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
		v := "0+0x90"
		if b.GetUpperBound() >= 41 {
			v = "0+10x90"
		}
		slow[seriesName("kubeproxy_network_programming_duration_seconds_bucket", map[string]string{"ip_family": family, "le": le})] = v
	}
	slow[seriesName("kubeproxy_network_programming_duration_seconds_bucket", map[string]string{"ip_family": family, "le": "+Inf"})] = "0+10x90"
	fires(slow, "30m", "IPVSProxyNetworkProgrammingLatencyHigh", map[string]string{"severity": "warning", "ip_family": family},
		map[string]string{
			"summary":     "Network programming latency p99 40.99s (IPv4), over the 30 s objective",
			"description": "Endpoint changes take longer than 30 s to reach the nodes' kernels at the 99th percentile. Look at kubeproxy_sync_proxy_rules_duration_seconds and ipvsproxy_kernel_objects_failing per node.",
		})

	testFile := writeYAML(t, filepath.Join(dir, "ipvsproxy.rules_test.yaml"), map[string]any{
		"rule_files":          []string{"ipvsproxy.rules.yaml"},
		"evaluation_interval": "1m",
		"tests":               tests,
	})
	out := runPromtool(t, "test", "rules", testFile)
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules: %s", out)
	}
}
