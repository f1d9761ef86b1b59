//go:build e2e

package suite

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The address guard as deploy/base runs it: `ipvsproxy publish-node-addresses`
// under its own ServiceAccount, with the roles deploy/base grants it (the
// control plane's set-up applies them with the daemon's), and the daemons
// reading the slices it keeps (--node-addresses-from=endpointslices) instead
// of watching every Node.

// publisherName is the publisher's ServiceAccount, Deployment and namespace
// in deploy/base/node-addresses.yaml.
const publisherName = "ipvsproxy-node-addresses"

// The addresses of a Node that registers during the scenario, in no
// namespace of the VM.
const joinerName, joinerV4, joinerV6 = "node-joining", "203.0.113.193", "2001:db8:193::3"

func publishedRun() proxierRun {
	return proxierRun{extra: []string{"--node-addresses-from", "endpointslices", "--node-addresses-namespace", publisherName}}
}

// scenarioPublishedNodeAddresses: the publisher runs in node1's namespace
// with a token of its account; both daemons restarted to read its slices.
// The ServiceLB-shaped check holds as with the Node watch (each node refuses
// the other's addresses, both families, traffic through its own). Then the
// publisher stops and a Node registers with an IPv4 and an IPv6 address that
// a Service claims as external IPs: unpublished, the daemons serve them (they
// learn other Nodes' addresses from the slices alone); once the publisher is
// back they refuse both with Events and remove the virtual servers.
func scenarioPublishedNodeAddresses(s *S) {
	s.Step("published-node-addresses", "the daemons read the other Nodes' addresses from the slices ipvsproxy publish-node-addresses keeps (its own account and deploy/base's roles): a ServiceLB-shaped LoadBalancer on both nodes' addresses is refused by the other node and served by its own, both families; a Node that registers while the publisher is down is not guarded, and is once the publisher is back (Events, its addresses' virtual servers removed on both nodes)", func(v *V) {
		v.Heading("The address guard from the published Node addresses, as deploy/base runs it")
		kubeconfig := v.accountKubeconfig(publisherName)
		publish := "exec " + ipvsproxyBin() + " publish-node-addresses --kubeconfig " + kubeconfig + " --namespace " + publisherName
		v.removePublishedSlicesAtEnd()
		publisher := v.Background("node1", publish)
		v.Show("node1", "ipvsproxy publish-node-addresses --kubeconfig "+publisherName+".kubeconfig --namespace "+publisherName+" &  # its ServiceAccount's token", "")
		v.waitPublished(map[string][]string{
			"node1": {node1Addr, v6.node("node1")},
			"node2": {node2Addr, v6.node("node2")},
		})
		for _, n := range []string{"node1", "node2"} {
			v.RestartProxier(n, publishedRun())
		}
		v.checkServiceLBNodeAddresses("servicelb-published")

		publisher.Stop()
		v.Show("node1", "kill %ipvsproxy  # the publisher stops", "")
		v.JoinNode(joinerName, joinerV4, joinerV6)
		const port = 8080
		claim := v.ApplyService(service("{name: joiner-claim}", "ipFamilyPolicy: RequireDualStack",
			"externalIPs: ["+joinerV4+", "+joinerV6+"]", fmt.Sprintf("ports: [{port: %d, targetPort: 8080, protocol: TCP}]", port)))
		v.SetEndpoints(claim, "web@node1", v6.pod("web")+"@node1")
		v.Show("-", "e2ectl apply-service joiner-claim.yaml  # externalIPs ["+joinerV4+", "+joinerV6+"], :8080, endpoint web", "")
		joiner := map[ipFamily]string{4: joinerV4, 6: joinerV6}
		for _, n := range []string{"node1", "node2"} {
			for _, f := range families {
				v.WaitRealServers(n, ipvs.TCP, joiner[f], port, hostPort(f.pod("web"), 8080))
			}
		}
		v.Show("-", "# unpublished, "+joinerName+"'s addresses are served on both nodes", "")

		restarted := time.Now()
		v.Background("node1", publish)
		v.Show("node1", "ipvsproxy publish-node-addresses ... &  # the publisher is back", "")
		v.waitPublished(map[string][]string{joinerName: {joinerV4, joinerV6}})
		for _, a := range []string{joinerV4, joinerV6} {
			v.WaitEvent("joiner-claim", "ExternalIPRefused", "external IP "+a+" is an address of Node "+joinerName)
		}
		for _, n := range []string{"node1", "node2"} {
			var served []string
			var bound []netip.Addr
			v.WaitUntil(60*time.Second, n+" still serves or binds "+joinerName+"'s addresses", func() (bool, string) {
				var err, err2 error
				served, err = servedOn(n, joinerV4, joinerV6)
				bound, err2 = boundIn(n, hostPrefix(joinerV4), hostPrefix(joinerV6))
				return err == nil && err2 == nil && len(served) == 0 && len(bound) == 0, fmt.Sprint(served, bound, errText(err), errText(err2))
			})
			v.Show(n, "ipvsadm -Ln; ip -o addr show dev kube-ipvs0  # "+joinerName+"'s addresses, read with the ipvs and netif packages",
				fmt.Sprintf("%s%s (%s s after the publisher's restart)", strings.Join(served, " "), joined(bound), seconds(time.Since(restarted))))
		}
	})
}

// removePublishedSlicesAtEnd deletes the publisher's slices when the
// scenario ends: the other scenarios' daemons watch the Nodes.
func (v *V) removePublishedSlicesAtEnd() {
	t := v.s.t
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := guest.client.DiscoveryV1().EndpointSlices(publisherName).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("clean-up: delete the slices of %s: %v", publisherName, err)
		}
	})
}

// waitPublished waits up to 60 s until the publisher's slices give each
// node exactly its addresses.
func (v *V) waitPublished(want map[string][]string) {
	var got map[string][]string
	v.WaitUntil(60*time.Second, "the published slices do not hold every node's addresses", func() (bool, string) {
		ctx, cancel := v.s.ctx()
		defer cancel()
		list, err := guest.client.DiscoveryV1().EndpointSlices(publisherName).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = map[string][]string{}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.NodeName != nil {
					got[*e.NodeName] = append(got[*e.NodeName], e.Addresses...)
				}
			}
		}
		for node, addrs := range want {
			have := slices.Clone(got[node])
			slices.Sort(have)
			w := slices.Clone(addrs)
			slices.Sort(w)
			if !slices.Equal(have, w) {
				return false, fmt.Sprintf("%s: %v, want %v", node, have, w)
			}
		}
		return true, ""
	})
	var lines []string
	for node := range want {
		lines = append(lines, node+"="+strings.Join(got[node], ","))
	}
	slices.Sort(lines)
	v.Show("-", "kubectl get endpointslices -n "+publisherName+" -o jsonpath='{..endpoints}'  # by node", strings.Join(lines, " "))
}
