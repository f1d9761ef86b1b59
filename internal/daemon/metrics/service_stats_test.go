package metrics

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestCountersAreSummedPerServicePort(t *testing.T) {
	f := ipvs.NewFake()
	cluster := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80}
	nodePort := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("198.51.100.1"), Port: 30080}
	foreign := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("192.0.2.80"), Port: 80}
	rs := ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080}
	for _, k := range []ipvs.VirtualServerKey{cluster, nodePort, foreign} {
		if err := f.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: k, Scheduler: "rr"}); err != nil {
			t.Fatal(err)
		}
		if err := f.AddRealServer(k, ipvs.RealServer{RealServerKey: rs, Weight: 1}); err != nil {
			t.Fatal(err)
		}
		if err := f.AddTraffic(k, rs, ipvs.Stats{Connections: 2, PacketsIn: 10, PacketsOut: 8, BytesIn: 700, BytesOut: 9000}); err != nil {
			t.Fatal(err)
		}
	}
	web := ipvsproxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}, Port: "http", Protocol: v1.ProtocolTCP}
	names := func() map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName {
		return map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName{cluster: web, nodePort: web}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewServiceStats(names, f))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			var l []string
			for _, lp := range m.GetLabel() {
				l = append(l, lp.GetName()+"="+lp.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			got = append(got, fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(l, ","), v))
		}
	}
	// The foreign virtual server's traffic is nobody's Service: not counted.
	want := []string{
		"ipvsproxy_service_bytes_total{direction=in,namespace=default,port=http,protocol=TCP,service=web} 1400",
		"ipvsproxy_service_bytes_total{direction=out,namespace=default,port=http,protocol=TCP,service=web} 18000",
		"ipvsproxy_service_connections_total{namespace=default,port=http,protocol=TCP,service=web} 4",
		"ipvsproxy_service_packets_total{direction=in,namespace=default,port=http,protocol=TCP,service=web} 20",
		"ipvsproxy_service_packets_total{direction=out,namespace=default,port=http,protocol=TCP,service=web} 16",
		"ipvsproxy_service_stats_read_errors{} 0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("metrics:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
