package main

import (
	"context"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/metrics"
	"github.com/ipvsproxy/ipvsproxy/internal/doctable"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// servedMetric is one metric family of the daemon's /metrics.
type servedMetric struct {
	kind   string // counter, gauge, histogram, summary
	labels []string
}

// servedMetrics walks the registry the daemon builds, with every labelled
// metric given one series so that the registry reports it: the label names
// come from each collector's own description, the families from Gather.
func servedMetrics(t *testing.T) map[string]servedMetric {
	t.Helper()
	m := newDaemonMetrics()
	// Every vector of the proxier's metrics gets one series.
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		c, ok := f.Interface().(prometheus.Collector)
		if !ok || f.IsNil() {
			continue
		}
		with := f.MethodByName("WithLabelValues")
		if !with.IsValid() {
			continue
		}
		labels := describedLabels(t, c)
		args := make([]reflect.Value, len(labels))
		for j := range args {
			args[j] = reflect.ValueOf("x")
		}
		with.Call(args)
	}
	// client-go's hooks, as a request through the REST client calls them.
	clientmetrics.RequestResult.Increment(context.Background(), "200", "GET", "api")
	clientmetrics.RequestLatency.Observe(context.Background(), "GET", url.URL{Host: "api"}, time.Millisecond)
	// --metrics-per-service registers metrics.ServiceStats on the same
	// registry (statusAndInspectServer); one named virtual server with
	// counters.
	key := ipvs.VirtualServerKey{Address: netip.MustParseAddr("10.96.0.10"), Port: 53, Protocol: ipvs.UDP}
	fake := ipvs.NewFake()
	if err := fake.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: key, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	names := func() map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName {
		return map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName{key: {NamespacedName: types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, Port: "dns", Protocol: "UDP"}}
	}
	m.Registry.MustRegister(metrics.NewServiceStats(names, fake))

	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]servedMetric{}
	for _, fam := range families {
		sm := servedMetric{kind: strings.ToLower(fam.GetType().String())}
		for _, metric := range fam.GetMetric() {
			for _, lp := range metric.GetLabel() {
				if !slices.Contains(sm.labels, lp.GetName()) {
					sm.labels = append(sm.labels, lp.GetName())
				}
			}
		}
		sort.Strings(sm.labels)
		out[fam.GetName()] = sm
	}
	return out
}

var descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)

// describedLabels reads the variable label names from the collector's Desc
// (its only public rendering is String).
func describedLabels(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 1)
	c.Describe(ch)
	d := <-ch
	m := descLabels.FindStringSubmatch(d.String())
	if m == nil {
		t.Fatalf("cannot read the labels of %s", d)
	}
	if m[1] == "" {
		return nil
	}
	return strings.Split(m[1], ",")
}

// documentedMetric is one row of docs/metrics.md.
type documentedMetric struct {
	kind   string
	labels []string
}

func documentedMetrics(t *testing.T) map[string]documentedMetric {
	t.Helper()
	rows, err := doctable.Read("../../docs/metrics.md", "metric", "type", "labels", "meaning")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]documentedMetric{}
	for _, row := range rows {
		names := doctable.Code(row["metric"])
		if len(names) != 1 {
			t.Fatalf("docs/metrics.md: row %q names %d metrics, want 1 in backticks", row["metric"], len(names))
		}
		if row["meaning"] == "" {
			t.Errorf("docs/metrics.md: %s has no meaning", names[0])
		}
		labels := doctable.Code(row["labels"])
		sort.Strings(labels)
		if _, dup := out[names[0]]; dup {
			t.Errorf("docs/metrics.md lists %s twice", names[0])
		}
		out[names[0]] = documentedMetric{kind: row["type"], labels: labels}
	}
	return out
}

// TestMetricsDocListsEveryServedMetric holds docs/metrics.md to the
// registry the daemon serves: every metric and label served is documented,
// with its type, and every documented one is served. A row ending in * (the
// Go runtime's and the process's collectors) stands for every metric it
// prefixes.
func TestMetricsDocListsEveryServedMetric(t *testing.T) {
	served := servedMetrics(t)
	documented := documentedMetrics(t)
	prefixUsed := map[string]bool{}
	for name, sm := range served {
		doc, ok := documented[name]
		if !ok {
			covered := false
			for prefix := range documented {
				if strings.HasSuffix(prefix, "*") && strings.HasPrefix(name, strings.TrimSuffix(prefix, "*")) {
					covered, prefixUsed[prefix] = true, true
				}
			}
			if !covered {
				t.Errorf("%s (%s, labels %q) is served but not in docs/metrics.md", name, sm.kind, sm.labels)
			}
			continue
		}
		if doc.kind != sm.kind {
			t.Errorf("docs/metrics.md: %s is a %s, the registry says %s", name, doc.kind, sm.kind)
		}
		if !slices.Equal(doc.labels, sm.labels) {
			t.Errorf("docs/metrics.md: %s has labels %q, the registry %q", name, doc.labels, sm.labels)
		}
	}
	for name := range documented {
		if strings.HasSuffix(name, "*") {
			if !prefixUsed[name] {
				t.Errorf("docs/metrics.md: no served metric starts with %s", name)
			}
			continue
		}
		if _, ok := served[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which the daemon does not serve", name)
		}
	}
	if len(served) < 30 {
		t.Fatalf("only %d metric families gathered: the walk missed the daemon's registry", len(served))
	}
}

// TestServedMetricKindsAreReadFromTheRegistry keeps the walk honest: a
// family the walk knows the type of is reported with it.
func TestServedMetricKindsAreReadFromTheRegistry(t *testing.T) {
	served := servedMetrics(t)
	for name, want := range map[string]servedMetric{
		"kubeproxy_sync_proxy_rules_duration_seconds": {kind: "histogram", labels: []string{"ip_family"}},
		"ipvsproxy_service_packets_total":             {kind: "counter", labels: []string{"direction", "namespace", "port", "protocol", "service"}},
		"rest_client_requests_total":                  {kind: "counter", labels: []string{"code", "host", "method"}},
		"ipvsproxy_real_servers_draining":             {kind: "gauge"},
	} {
		got := served[name]
		if got.kind != want.kind || !slices.Equal(got.labels, want.labels) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}
