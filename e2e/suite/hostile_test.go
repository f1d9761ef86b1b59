//go:build e2e

package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// scenarioHostileService: a tenant's Service of 3,000 ports with a 250 KiB
// scheduler annotation, and 30 EndpointSlices of 100 of its ports and 1,000
// endpoints each (3 million endpoint ports), through the real API server to
// both nodes' daemons. These are near the largest objects the API accepts:
// etcd refuses a request over 1.5 MiB (a Service of 10,000 ports with its
// managed fields is beyond it), and an EndpointSlice holds at most 100 ports
// and 1,000 endpoints. It is refused, named in a ServiceTooLarge Event with
// the cap it is beyond, and what the nodes wrote of it before its slices
// arrived goes within 180 s of the Event; dual-stack Services made before
// it, while its virtual servers are being written (before its slices: the
// writer yields to the newer change) and after it answer c1 and c2 on both
// families (the one made meanwhile programmed within 60 s, the last within
// 30 s); node1's daemon's peak RSS stays within the DaemonSet's memory
// limit.
func scenarioHostileService(s *S) {
	s.Step("hostile-service", "a hostile Service (3,000 ports, 30 slices of 100 ports x 1,000 endpoints, a 250 KiB annotation) is refused naming its cap; Services made before it, while it is written and after it answer on both families; the daemon stays within its memory limit", func(v *V) {
		v.Heading("A hostile Service takes nothing from the others")
		before := v.v6Service("before-hostile", service("{name: before-hostile}", "ipFamilyPolicy: RequireDualStack", httpPort), podIP("web")+"@node1", v6.pod("web")+"@node1")
		for _, f := range families {
			v.WaitRealServers("node1", ipvs.TCP, f.clusterIP(before), 80, hostPort(f.pod("web"), 8080))
		}

		svc := &v1.Service{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: "default",
				Annotations: map[string]string{"ipvsproxy.io/scheduler": strings.Repeat("x", 250<<10)}},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP},
		}
		for i := range 3000 {
			svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "p" + strconv.Itoa(i), Port: int32(1 + i), Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)})
		}
		manifest, err := json.Marshal(svc)
		v.Must(err)
		hostile := v.ApplyService(string(manifest))
		// A Service made while the hostile one's 3,000 virtual servers are
		// being written: the writer yields to it after a second of writes
		// (on the fakes it waits 0.8 s of writes; here the time also holds
		// the builds of the hostile Service as its slices arrive, and
		// reached 25 s with two VMs on the host's two cores). Held behind
		// every write of the hostile Service, it waited over a minute.
		made := time.Now()
		during := v.v6Service("during-hostile", service("{name: during-hostile}", "ipFamilyPolicy: RequireDualStack", httpPort), podIP("s2")+"@node2", v6.pod("s2")+"@node2")
		for _, node := range []string{"node1", "node2"} {
			for _, f := range families {
				want := []string{hostPort(f.pod("s2"), 8080)}
				v.WaitUntil(60*time.Second, fmt.Sprintf("%s's TCP %s:80 has not exactly %v", node, f.clusterIP(during), want), hasRealServers(node, ipvs.TCP, f.clusterIP(during), 80, want))
			}
		}
		v.Show("node1+node2", "ipvsadm -Ln -t CLUSTER_IP:80  # during-hostile, on both nodes and families; read with the ipvs package",
			fmt.Sprintf("programmed %s s after it was made", seconds(time.Since(made))))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		slices := guest.client.DiscoveryV1().EndpointSlices("default")
		v.s.t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			slices.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=hostile"})
		})
		start := time.Now()
		tcp, ready := v1.ProtocolTCP, true
		for i := range 30 {
			sl := &discovery.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("hostile-%d", i), Labels: map[string]string{discovery.LabelServiceName: "hostile"}},
				AddressType: discovery.AddressTypeIPv4,
			}
			for p := range 100 {
				name, port := "p"+strconv.Itoa(100*i+p), int32(8080)
				sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: &name, Port: &port, Protocol: &tcp})
			}
			for e := range 1000 {
				sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.250.%d.%d", e/250, e%250+1)}, Conditions: discovery.EndpointConditions{Ready: &ready}})
			}
			_, err := slices.Create(ctx, sl, metav1.CreateOptions{})
			v.Must(err)
		}
		v.Show("-", "kubectl apply -f hostile.yaml  # 3,000 ports, a 250 KiB ipvsproxy.io/scheduler; 30 EndpointSlices of 100 ports x 1,000 endpoints",
			fmt.Sprintf("CLUSTER_IP=%s; slices written in %s s", hostile.Spec.ClusterIP, seconds(time.Since(start))))
		v.WaitEvent("hostile", "ServiceTooLarge", "--ipvs-max-real-servers-per-service")
		refused := time.Now()

		made = time.Now()
		after := v.v6Service("after-hostile", service("{name: after-hostile}", "ipFamilyPolicy: RequireDualStack", httpPort), podIP("s2")+"@node2", v6.pod("s2")+"@node2")
		for _, node := range []string{"node1", "node2"} {
			for _, f := range families {
				v.WaitRealServers(node, ipvs.TCP, f.clusterIP(after), 80, hostPort(f.pod("s2"), 8080))
			}
		}
		v.Show("node1+node2", "ipvsadm -Ln -t CLUSTER_IP:80  # after-hostile, on both nodes and families; read with the ipvs package",
			fmt.Sprintf("programmed %s s after it was made", seconds(time.Since(made))))
		// What the nodes wrote of it before its slices arrived goes, after
		// the Services made meanwhile.
		v.WaitUntil(180*time.Second, "the refused hostile Service's virtual servers are still there", func() (bool, string) {
			var left []string
			for _, node := range []string{"node1", "node2"} {
				vss, err := virtualServers(node)
				if err != nil {
					return false, err.Error()
				}
				n := 0
				for _, vs := range vss {
					if vs.Address.String() == hostile.Spec.ClusterIP {
						n++
					}
				}
				if n > 0 {
					left = append(left, fmt.Sprintf("%s %d", node, n))
				}
			}
			return len(left) == 0, "left: " + strings.Join(left, ", ")
		})
		v.Show("node1+node2", "ipvsadm -Ln | grep -c "+hostile.Spec.ClusterIP+"  # the hostile Service's virtual servers; read with the ipvs package",
			fmt.Sprintf("none on either node %s s after its ServiceTooLarge Event", seconds(time.Since(refused))))
		for _, c := range []string{"c1", "c2"} {
			for _, f := range families {
				v.ExpectServed(v.Curl(c, httpURL(f.clusterIP(before), 80)), "hostname=web", "client_address="+f.pod(c)+" ")
				v.ExpectServed(v.Curl(c, httpURL(f.clusterIP(during), 80)), "hostname=s2", "client_address="+f.pod(c)+" ")
				v.ExpectServed(v.Curl(c, httpURL(f.clusterIP(after), 80)), "hostname=s2", "client_address="+f.pod(c)+" ")
			}
		}

		// node1's daemon: the ipvsproxy process in its network namespace.
		peak := v.Ask("-", `for p in $(ip netns pids node1); do if tr '\0' ' ' </proc/$p/cmdline | grep -q '^[^ ]*ipvsproxy run'; then awk '/VmHWM/ {print $2}' /proc/$p/status; fi; done | sort -n | tail -1  # node1's daemon's peak RSS, KiB`).Out
		kib, err := strconv.Atoi(strings.TrimSpace(peak))
		if err != nil {
			v.Errorf("node1's daemon's VmHWM %q: %v", peak, err)
		} else if limit := 256 << 10; kib > limit {
			v.Errorf("node1's daemon peaked at %d KiB, beyond the DaemonSet's limit of %d KiB", kib, limit)
		}
	})
}
