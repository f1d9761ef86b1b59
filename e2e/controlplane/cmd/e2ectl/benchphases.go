package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
)

// benchPhaseCommands are the daemon tier's later phases (e2e/vm/bench-daemon-guest.sh): a
// series of endpoint changes, the Service of 100,000 endpoints, and the data plane's Services.
var benchPhaseCommands = map[string]command{
	"endpoint-series":    {"endpoint-series NS/PREFIX --count 50 --addr IP [--first 1] [--seed 1] [--pause-min 2s] [--pause-max 10s]   (one write time a line)", runEndpointSeries},
	"big-service":        {"big-service NS/NAME [--endpoints 100000] [--per-slice 100] [--base 10.248.0.0] [--workers 8] [--touch NS/NAME=IP --touch-after 500]   (KEY=VALUE lines)", runBigService},
	"delete-big-service": {"delete-big-service NS/NAME   (the Service and every slice labelled for it)", runDeleteBigService},
	"dataplane-services": {"dataplane-services --pod IP [--namespace dataplane] [--hold-base 10.244.250.0]   (iperf, udp and hold)", runDataplaneServices},
}

// runEndpointSeries adds ADDR to PREFIX-FIRST ... PREFIX-(FIRST+COUNT-1), one Service each,
// after a pseudo-random pause before each (uniform between the two bounds, from the seed), so
// that the changes land at every point of the proxies' sync period. One process makes every
// write: a process per change would cost the VM's one vCPU a Go start and a TLS handshake each,
// in the middle of the sync being timed.
func runEndpointSeries(ctx context.Context, args []string) error {
	fs := newFlags("endpoint-series")
	count := fs.Int("count", 50, "changes")
	first := fs.Int("first", 1, "the first Service's index")
	addrFlag := fs.String("addr", "", "the IPv4 address added to each")
	seed := fs.Uint64("seed", 1, "seed of the pauses")
	pauseMin := fs.Duration("pause-min", 2*time.Second, "shortest pause before a change")
	pauseMax := fs.Duration("pause-max", 10*time.Second, "longest pause before a change")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	ns, prefix, ok := strings.Cut(pos[0], "/")
	if !ok || ns == "" || prefix == "" {
		return fmt.Errorf("%q is not NAMESPACE/PREFIX", pos[0])
	}
	addr, err := netip.ParseAddr(*addrFlag)
	if err != nil || !addr.Is4() {
		return fmt.Errorf("--addr %q is not an IPv4 address", *addrFlag)
	}
	if *pauseMax < *pauseMin || *pauseMin < 0 {
		return fmt.Errorf("--pause-min %s and --pause-max %s: want 0 <= min <= max", *pauseMin, *pauseMax)
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(*seed, 0))
	for i := *first; i < *first+*count; i++ {
		pause := *pauseMin + time.Duration(r.Int64N(int64(*pauseMax-*pauseMin)+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		written, err := addBenchEndpoint(ctx, cs, ns, fmt.Sprintf("%s-%d", prefix, i), addr)
		if err != nil {
			return err
		}
		fmt.Printf("%.3f\n", unixSeconds(written))
	}
	return nil
}

// bigServiceSlices are the slices of a Service of n endpoints, perSlice each, addresses in
// order from base: what the EndpointSlice controller writes for a Deployment of n pods.
func bigServiceSlices(namespace, service string, n, perSlice int, base netip.Addr) ([]*discoveryv1.EndpointSlice, error) {
	if n <= 0 || perSlice <= 0 || perSlice > 1000 {
		return nil, fmt.Errorf("want endpoints > 0 and 0 < per-slice <= 1000 (the API's limit), have %d and %d", n, perSlice)
	}
	b := base.As4()
	start := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	if uint64(start)+uint64(n) > 1<<32 {
		return nil, fmt.Errorf("%d addresses from %s run past 255.255.255.255", n, base)
	}
	var out []*discoveryv1.EndpointSlice
	for first := 0; first < n; first += perSlice {
		eps := make([]discoveryv1.Endpoint, 0, min(perSlice, n-first))
		for k := first; k < n && k < first+perSlice; k++ {
			a := start + uint32(k)
			addr := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
			eps = append(eps, discoveryv1.Endpoint{
				Addresses:  []string{addr.String()},
				Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true), Serving: ptrTo(true), Terminating: ptrTo(false)},
				NodeName:   ptrTo(fmt.Sprintf("node-%d", k%100)),
			})
		}
		s := bulkSlice(namespace, service, eps)
		s.Name = fmt.Sprintf("%s-%05d", service, first/perSlice)
		out = append(out, s)
	}
	return out, nil
}

// runBigService creates a ClusterIP Service and its slices, as fast as the API server takes
// them with the given writers; with --touch, after the --touch-after'th slice it adds one
// endpoint to another (small) bulk Service, stamped for the latency metric. It prints when the
// first and the last slice were written, when the touch was, and the Service's cluster IP.
func runBigService(ctx context.Context, args []string) error {
	fs := newFlags("big-service")
	n := fs.Int("endpoints", 100000, "endpoints")
	perSlice := fs.Int("per-slice", 100, "endpoints per slice")
	baseFlag := fs.String("base", "10.248.0.0", "the first endpoint's address")
	workers := fs.Int("workers", 8, "concurrent writers")
	touch := fs.String("touch", "", "NS/NAME=IP: a bulk Service to add IP to meanwhile")
	touchAfter := fs.Int("touch-after", 500, "slices written before the touch")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	ref, err := cluster.ParseServiceRef(pos[0])
	if err != nil {
		return err
	}
	base, err := netip.ParseAddr(*baseFlag)
	if err != nil || !base.Is4() {
		return fmt.Errorf("--base %q is not an IPv4 address", *baseFlag)
	}
	var touchNS, touchName string
	var touchAddr netip.Addr
	if *touch != "" {
		svc, ip, ok := strings.Cut(*touch, "=")
		touchNS, touchName, _ = strings.Cut(svc, "/")
		if touchAddr, err = netip.ParseAddr(ip); !ok || err != nil || touchName == "" {
			return fmt.Errorf("--touch %q is not NS/NAME=IP", *touch)
		}
	}
	slices, err := bigServiceSlices(ref.Namespace, ref.Name, *n, *perSlice, base)
	if err != nil {
		return err
	}
	cs, cfg, err := client()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: bulkPort, TargetPort: intstr.FromInt32(bulkTargetPort)}}},
	}
	got, err := cs.CoreV1().Services(ref.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create service %s: %w", ref, err)
	}
	// Printed now: the caller counts the Service's endpoints in the kernel while they are written.
	fmt.Printf("CLUSTER_IP=%s\n", got.Spec.ClusterIP)
	for _, s := range slices {
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: ref.Name, UID: got.UID, Controller: ptrTo(true)}}
	}
	var next, written atomic.Int64
	var firstAt, lastAt, touchedAt time.Time
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, *workers+1)
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(slices) || ctx.Err() != nil {
					return
				}
				t := time.Now()
				if _, err := cs.DiscoveryV1().EndpointSlices(ref.Namespace).Create(ctx, slices[i], metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create endpointslice %s/%s: %w", ref.Namespace, slices[i].Name, err)
					return
				}
				done := time.Now()
				mu.Lock()
				if firstAt.IsZero() || t.Before(firstAt) {
					firstAt = t
				}
				if done.After(lastAt) {
					lastAt = done
				}
				mu.Unlock()
				if written.Add(1) == int64(*touchAfter) && touchName != "" {
					at, err := addBenchEndpoint(ctx, cs, touchNS, touchName, touchAddr)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					touchedAt = at
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("SLICES=%d\nFIRST_WRITE=%.3f\nLAST_WRITE=%.3f\n", len(slices), unixSeconds(firstAt), unixSeconds(lastAt))
	if !touchedAt.IsZero() {
		fmt.Printf("TOUCH_WRITE=%.3f\n", unixSeconds(touchedAt))
	}
	return nil
}

// runDeleteBigService deletes a Service and its slices: no garbage collector runs here to
// follow the owner references.
func runDeleteBigService(ctx context.Context, args []string) error {
	ref, _, err := serviceArgs("delete-big-service", args, 1, 1)
	if err != nil {
		return err
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + ref.Name}
	if err := cs.DiscoveryV1().EndpointSlices(ref.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return fmt.Errorf("delete the slices of %s: %w", ref, err)
	}
	if err := cs.CoreV1().Services(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete service %s: %w", ref, err)
	}
	fmt.Fprintf(os.Stderr, "deleted %s and its slices\n", ref)
	return nil
}

// dataplaneService is one of the Services the data-plane tier sends traffic through besides
// the bulk ones: each names its port and its endpoints.
type dataplaneService struct {
	name        string
	proto       v1.Protocol
	port        int32
	target      int32
	endpoints   []netip.Addr
	description string
}

// runDataplaneServices creates the data plane's own Services: iperf (TCP 5201 to the pod's
// iperf3 server), udp (UDP 53 to the pod's datagram echo on 8081), and hold (TCP 80 to 9090 on
// ten addresses from --hold-base, where a listener that never accepts keeps the connections
// that fill the connection tables).
func runDataplaneServices(ctx context.Context, args []string) error {
	fs := newFlags("dataplane-services")
	namespace := fs.String("namespace", "dataplane", "namespace (created if missing)")
	podFlag := fs.String("pod", "", "the server pod's address")
	holdBase := fs.String("hold-base", "10.244.250.0", "the first of hold's ten endpoint addresses")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	pod, err := netip.ParseAddr(*podFlag)
	if err != nil || !pod.Is4() {
		return fmt.Errorf("--pod %q is not an IPv4 address", *podFlag)
	}
	hb, err := netip.ParseAddr(*holdBase)
	if err != nil || !hb.Is4() {
		return fmt.Errorf("--hold-base %q is not an IPv4 address", *holdBase)
	}
	var hold []netip.Addr
	for a, i := hb, 0; i < 10; a, i = a.Next(), i+1 {
		hold = append(hold, a)
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: *namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", *namespace, err)
	}
	for _, d := range []dataplaneService{
		{"iperf", v1.ProtocolTCP, 5201, 5201, []netip.Addr{pod}, "an established flow's throughput"},
		{"udp", v1.ProtocolUDP, 53, 8081, []netip.Addr{pod}, "UDP request/response"},
		{"hold", v1.ProtocolTCP, 80, 9090, hold, "the held connections"},
	} {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: *namespace, Annotations: map[string]string{"description": d.description}},
			Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "p", Protocol: d.proto, Port: d.port, TargetPort: intstr.FromInt32(d.target)}}},
		}
		if _, err := cs.CoreV1().Services(*namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service %s/%s: %w", *namespace, d.name, err)
		}
		eps := make([]discoveryv1.Endpoint, len(d.endpoints))
		for i, a := range d.endpoints {
			eps[i] = discoveryv1.Endpoint{Addresses: []string{a.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true)}}
		}
		slice := bulkSlice(*namespace, d.name, eps)
		slice.Ports = []discoveryv1.EndpointPort{{Name: ptrTo("p"), Protocol: ptrTo(d.proto), Port: ptrTo(d.target)}}
		if _, err := cs.DiscoveryV1().EndpointSlices(*namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create endpointslice %s/%s: %w", *namespace, slice.Name, err)
		}
	}
	return nil
}
