package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func line(side string, n int, table string, p50 float64, cps float64) string {
	c := `{"n":2000,"failed":0,"p50_ms":` + ftoa(p50) + `,"p99_ms":` + ftoa(p50*2) + `,"over_1s":0}`
	return `{"side":"` + side + `","services":` + strconv.Itoa(n) + `,"table":"` + table + `","connect":{"pod_clusterip_first":` + c + `,"pod_clusterip_last":` + c +
		`,"outside_nodeport_first":` + c + `,"outside_nodeport_last":` + c + `},"rate":{"per_s":` + ftoa(cps) + `,"guest_cpu_ms_per_conn":1},"iperf_bits_per_s":2e9,"udp":{"per_s":900,"lost":0}}` + "\n"
}

func TestMarkdownRatiosAndSlope(t *testing.T) {
	f := filepath.Join(t.TempDir(), "dp.json")
	os.WriteFile(f, []byte(
		line("no-proxy", 1000, "empty", 0.5, 2000)+
			line("ipvsproxy", 1000, "empty", 1.0, 1000)+
			line("kube-proxy-nftables", 1000, "empty", 2.0, 500)+
			line("no-proxy", 30000, "empty", 1.0, 1000)+ // a slower boot: everything twice as slow
			line("ipvsproxy", 30000, "empty", 2.0, 500)+
			line("kube-proxy-nftables", 30000, "empty", 8.0, 250)), 0o644)
	all := map[key]round{}
	if err := read(f, all); err != nil {
		t.Fatal(err)
	}
	md := markdown(all)
	for _, want := range []string{
		"| 1000 | empty | TCP connect p50, pod → ClusterIP, last Service | 1.000 | 2.000 | 0.50 | yes |",
		"| 1000 | empty | new connections per second, pod → ClusterIP | 1000.000 | 500.000 | 2.00 | yes |",
		// The slower boot cancels: ipvsproxy is 2x the baseline at both sizes.
		"| ipvsproxy | TCP connect p50, pod → ClusterIP, last Service | 2.00 | 2.00 | 1.00 |",
		"| kube-proxy-nftables | TCP connect p50, pod → ClusterIP, last Service | 4.00 | 8.00 | 2.00 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in:\n%s", want, md)
		}
	}
}

func TestALineWithoutTableStateIsAnError(t *testing.T) {
	f := filepath.Join(t.TempDir(), "dp.json")
	os.WriteFile(f, []byte(`{"side":"ipvsproxy","services":1000}`+"\n"), 0o644)
	if err := read(f, map[key]round{}); err == nil {
		t.Error("accepted")
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// The guest script runs under `set -u`, and the full run leaves the knobs
// that the smoke form sets (DP_REPEAT, DP_HOLD, ...) unset: a knob read
// without its default ends the guest before it writes a figure.
func TestGuestScriptReadsEveryKnobWithItsDefault(t *testing.T) {
	script, err := os.ReadFile("../../../../e2e/vm/bench-dataplane-guest.sh")
	if err != nil {
		t.Fatal(err)
	}
	knob := regexp.MustCompile(`\$\{DP_[A-Z_]+([^A-Z_])`)
	for i, line := range strings.Split(string(script), "\n") {
		for _, m := range knob.FindAllStringSubmatch(line, -1) {
			if m[1] != ":" {
				t.Errorf("bench-dataplane-guest.sh:%d reads %s} without a default: %s", i+1, strings.TrimSuffix(m[0], m[1]), strings.TrimSpace(line))
			}
		}
	}
}
