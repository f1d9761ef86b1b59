package kubeproxyconfig

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func kubeadmFile(t *testing.T) string {
	b, err := os.ReadFile("../../../cmd/ipvsproxy/testdata/kubeadm-config.conf")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A field this build does not know is ignored and returned, with the known
// field of the same object it is closest to when that is two edits or
// fewer; the file's known fields are decoded as without it.
func TestDecodeReturnsUnknownFields(t *testing.T) {
	text := strings.Replace(kubeadmFile(t), "ipvs:\n", "ipvs:\n  tcpTimout: 5m\n  sctpTimeout: 1m\n", 1)
	text = strings.Replace(text, "  verbosity: 0\n", "  verbosity: 4\n  vmodule:\n  - filePattern: sync*\n    verbosity: 5\n    levle: 2\n", 1)
	text += "nodeProxyPolicy:\n  mode: Strict\n"
	f, err := Decode([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []UnknownField{
		// One insertion from tcpTimeout; reported, not refused: upstream's
		// own fields are as close to each other.
		{Path: "ipvs.sctpTimeout", Near: "ipvs.tcpTimeout"},
		{Path: "ipvs.tcpTimout", Near: "ipvs.tcpTimeout"},
		{Path: "logging.vmodule[0].levle"},
		{Path: "nodeProxyPolicy"},
	}
	if !reflect.DeepEqual(f.Unknown, want) {
		t.Errorf("unknown:\n got %+v\nwant %+v", f.Unknown, want)
	}
	if f.Config.Logging.Verbosity != 4 || len(f.Config.Logging.VModule) != 1 || f.Config.Logging.VModule[0].Verbosity != 5 || f.Config.ClusterCIDR != "10.244.0.0/16" {
		t.Errorf("known fields beside the unknown ones: %+v", f.Config.Logging)
	}
	if f.Config.IPVS.TCPTimeout.Duration != 0 {
		t.Errorf("the misspelt tcpTimout set tcpTimeout: %v", f.Config.IPVS.TCPTimeout)
	}
	if g := (UnknownField{Path: "ipvs.tcpTimout", Near: "ipvs.tcpTimeout"}).String(); g != "ipvs.tcpTimout (did you mean ipvs.tcpTimeout?)" {
		t.Errorf("String: %s", g)
	}

	plain, err := Decode([]byte(kubeadmFile(t)))
	if err != nil || len(plain.Unknown) != 0 {
		t.Errorf("kubeadm's file: unknown %v, err %v", plain.Unknown, err)
	}
}

// What can only be a mistake is refused, naming every one.
func TestDecodeRefusesWhatIsNotANewField(t *testing.T) {
	kubeadm := kubeadmFile(t)
	for _, c := range []struct{ name, text, want string }{
		{"case", strings.Replace(kubeadm, "  strictARP: false", "  strictArp: true", 1), `unknown field "ipvs.strictArp": field names are case-sensitive; did you mean "ipvs.strictARP"?`},
		{"separator", kubeadm + "bind-address-hard-fail: true\n", `did you mean "bindAddressHardFail"?`},
		{"nested case", strings.Replace(kubeadm, "  maxPerCore: null", "  MaxPerCore: 1", 1), `did you mean "conntrack.maxPerCore"?`},
		{"duplicate", kubeadm + "clusterCIDR: 10.0.0.0/8\n", `key "clusterCIDR" already set`},
		{"two at once", strings.Replace(kubeadm, "  strictARP: false", "  strictArp: true", 1) + "ClusterCidr: 10.0.0.0/8\n", `did you mean "clusterCIDR"?`},
		{"other version", strings.Replace(kubeadm, "v1alpha1", "v1beta1", 1), "v1beta1"},
		{"bad value", strings.Replace(kubeadm, "  tcpTimeout: 0s", "  tcpTimeout: often", 1), "often"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
			if c.name == "two at once" && !strings.Contains(err.Error(), `"ipvs.strictARP"`) {
				t.Errorf("the first of two refused fields is not named: %v", err)
			}
		})
	}
}

// Every object of the Go type has its field names, so a near miss deep in
// the file finds its neighbour.
func TestKnownFieldsFollowTheGoType(t *testing.T) {
	for parent, name := range map[string]string{
		"":                     "apiVersion",
		"ipvs":                 "tcpFinTimeout",
		"conntrack":            "udpStreamTimeout",
		"logging":              "vmodule",
		"logging.options.json": "infoBufferSize",
		"logging.vmodule":      "filePattern",
		"detectLocal":          "bridgeInterface",
	} {
		found := false
		for _, n := range knownFields[parent] {
			found = found || n == name
		}
		if !found {
			t.Errorf("knownFields[%q] = %q, want %s among them", parent, knownFields[parent], name)
		}
	}
	if _, ok := knownFields["ipvs.syncPeriod"]; ok {
		t.Error("a Duration is walked as an object")
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"tcptimeout", "tcptimout", 1}, {"tcptimeout", "udptimeout", 2}, {"syncperiod", "minsyncperiod", 3}, {"abc", "", 3}} {
		if d := editDistance(c.a, c.b); d != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}
