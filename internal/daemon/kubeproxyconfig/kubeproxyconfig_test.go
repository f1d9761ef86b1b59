package kubeproxyconfig

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// Translate is the table applied with kube-proxy's defaulting: zero
// fields are left out, so kubeadm's file (every field written, most zero)
// sets almost nothing.
func TestTranslate(t *testing.T) {
	var masqBit int32 = 13
	var noTimeout metav1.Duration
	file := &kubeproxy.KubeProxyConfiguration{
		ClusterCIDR:        "10.244.0.0/16",
		MetricsBindAddress: "0.0.0.0", // a bare IP gets the default port
		HealthzBindAddress: "",        // the default of bindAddress's family
		BindAddress:        "::",      // ...which is IPv6
		Mode:               "ipvs",
		IPTables:           kubeproxy.KubeProxyIPTablesConfiguration{MasqueradeBit: &masqBit},
		IPVS:               kubeproxy.KubeProxyIPVSConfiguration{SyncPeriod: metav1.Duration{Duration: time.Minute}, ExcludeCIDRs: []string{"203.0.113.0/28", "2001:db8::/64"}},
		Conntrack:          kubeproxy.KubeProxyConntrackConfiguration{TCPCloseWaitTimeout: &noTimeout}, // an explicit 0 leaves the kernel's
		ConfigSyncPeriod:   metav1.Duration{Duration: 10 * time.Minute},
		FeatureGates:       map[string]bool{"B": false, "A": true},
	}
	var got []string
	for _, s := range Translate(file) {
		if s.Flag == "" {
			got = append(got, s.Path+"="+s.Value+" (not honoured)")
		} else {
			got = append(got, s.Path+"="+s.Value+" --"+s.Flag)
		}
	}
	want := []string{
		"featureGates=A=true,B=false (not honoured)",
		"healthzBindAddress=[::]:10256 --healthz-bind-address",
		"metricsBindAddress=0.0.0.0:10249 --metrics-bind-address",
		"mode=ipvs --proxy-mode",
		"iptables.masqueradeBit=13 --iptables-masquerade-bit",
		"ipvs.syncPeriod=1m0s --ipvs-sync-period",
		"ipvs.excludeCIDRs=203.0.113.0/28,2001:db8::/64 --ipvs-exclude-cidrs",
		"clusterCIDR=10.244.0.0/16 --cluster-cidr",
		"conntrack.tcpCloseWaitTimeout=0s --conntrack-tcp-timeout-close-wait",
		"configSyncPeriod=10m0s (not honoured)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := Translate(&kubeproxy.KubeProxyConfiguration{}); len(s) != 0 {
		t.Errorf("an empty file sets %+v", s)
	}
}

// Every field of KubeProxyConfiguration, found by walking its Go type, has
// exactly one line in Fields: a field kube-proxy adds makes this fail
// until someone decides what it means here.
func TestFieldsCoverKubeProxyConfiguration(t *testing.T) {
	var leaves []string
	walkFields(reflect.TypeOf(kubeproxy.KubeProxyConfiguration{}), "", &leaves)
	table := map[string]int{}
	for _, f := range Fields {
		table[f.Path]++
		if (f.Flag == "") == (f.Why == "") {
			t.Errorf("%s: want exactly one of a flag or a reason it is not honoured", f.Path)
		}
	}
	for _, l := range leaves {
		if table[l] != 1 {
			t.Errorf("field %s has %d lines in Fields, want 1", l, table[l])
		}
		delete(table, l)
	}
	for path := range table {
		t.Errorf("Fields has %s, which KubeProxyConfiguration lacks", path)
	}
}

func walkFields(t reflect.Type, prefix string, out *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || f.Type == reflect.TypeOf(metav1.TypeMeta{}):
			continue // apiVersion and kind are checked by the decoder
		case f.Anonymous && name == "":
			walkFields(f.Type, prefix, out) // inline
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Struct && !strings.HasSuffix(ft.Name(), "Duration") && ft.Name() != "QuantityValue" {
			walkFields(ft, prefix+name+".", out)
			continue
		}
		*out = append(*out, prefix+name)
	}
}

// docs/kube-proxy-config.md lists every field, so the operator's table and
// the code's cannot drift apart.
func TestKubeProxyConfigDocListsEveryField(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/kube-proxy-config.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range FlagsWithoutField {
		if !strings.Contains(string(doc), "`--"+name+"`") {
			t.Errorf("docs/kube-proxy-config.md does not name --%s among ipvsproxy's own flags", name)
		}
	}
	for _, f := range Fields {
		if !strings.Contains(string(doc), "`"+f.Path+"`") {
			t.Errorf("docs/kube-proxy-config.md does not list `%s`", f.Path)
		}
		if f.Flag != "" && !strings.Contains(string(doc), "`--"+f.Flag+"`") {
			t.Errorf("docs/kube-proxy-config.md does not name --%s for %s", f.Flag, f.Path)
		}
	}
}
