package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// The daemon benchmark's objects: N Services of one TCP port, each with one EndpointSlice of
// remote endpoints. Addresses come from 10.244.0.0/16 in order, so Service i's endpoints are
// distinct from every other Service's as long as N*endpoints fits (65,536: a 50k run of 10
// endpoints wraps around, which the proxiers do not mind: each Service keeps its own set).
const (
	bulkPort         = 80
	bulkTargetPort   = 8080
	triggerTimeLabel = "endpoints.kubernetes.io/last-change-trigger-time"
)

// scaleCommands are the daemon benchmark's (e2e/bench-daemon.sh).
var scaleCommands = map[string]command{
	"bulk-services":       {"bulk-services [--from 0] [--count 1000] [--endpoints 10] [--nodeport-every 0] [--namespace bench] [--workers 8]", runBulkServices},
	"bench-probe-service": {"bench-probe-service NS/NAME IP:PORT   (prints CLUSTER_IP=)", runBenchProbeService},
	"add-bench-endpoint":  {"add-bench-endpoint NS/NAME IP   (prints the write's Unix time)", runAddBenchEndpoint},
}

func runBulkServices(ctx context.Context, args []string) error {
	fs := newFlags("bulk-services")
	from := fs.Int("from", 0, "first index (the Services below it exist already)")
	count := fs.Int("count", 1000, "Services svc-FROM to svc-(COUNT-1) are created")
	endpoints := fs.Int("endpoints", 10, "endpoints per Service")
	namespace := fs.String("namespace", "bench", "namespace (created if missing)")
	workers := fs.Int("workers", 8, "concurrent clients")
	nodePortEvery := fs.Int("nodeport-every", 0, "Service i is a NodePort when i is a multiple of it (0: none)")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	cs, cfg, err := client()
	if err != nil {
		return err
	}
	// Bulk writes would sit behind the client's rate limiter for minutes; the API server's own
	// limits (max-requests-inflight) still apply.
	cfg.QPS, cfg.Burst = -1, 0
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: *namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", *namespace, err)
	}
	start := time.Now()
	var next, done atomic.Int64
	next.Store(int64(*from))
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= *count || ctx.Err() != nil {
					return
				}
				nodePort := *nodePortEvery > 0 && i%*nodePortEvery == 0
				if err := createBulkService(ctx, cs, *namespace, i, *endpoints, nodePort); err != nil {
					errs <- err
					return
				}
				if n := done.Add(1); n%5000 == 0 {
					fmt.Fprintf(os.Stderr, "bulk-services: %d created after %.1fs\n", n, time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("created %d Services with %d endpoints each in %s in %.1fs\n", *count-*from, *endpoints, *namespace, time.Since(start).Seconds())
	return nil
}

// createBulkService creates Service i and its slice; one that already exists is kept, so that
// an interrupted run can be completed. A NodePort Service gets its port from the API server.
func createBulkService(ctx context.Context, cs kubernetes.Interface, namespace string, i, endpoints int, nodePort bool) error {
	name := fmt.Sprintf("svc-%d", i)
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench"}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": name},
			Ports:    []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: bulkPort, TargetPort: intstr.FromInt32(bulkTargetPort)}},
		},
	}
	if nodePort {
		svc.Spec.Type = v1.ServiceTypeNodePort
	}
	got, err := cs.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create service %s/%s: %w", namespace, name, err)
	}
	// What the EndpointSlice controller writes for pods of a Deployment spread over 100 nodes in
	// 3 zones: each endpoint names its pod, node and zone; the slice is owned by the Service and
	// carries its labels.
	eps := make([]discoveryv1.Endpoint, endpoints)
	for k := range eps {
		n := uint32(i*endpoints+k) % 65536
		addr := netip.AddrFrom4([4]byte{10, 244, byte(n >> 8), byte(n)})
		pod := fmt.Sprintf("%s-%08x-%05x", name, uint32(i)*2654435761, uint32(i*endpoints+k)*40503%0xfffff)
		eps[k] = discoveryv1.Endpoint{
			Addresses:  []string{addr.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true), Serving: ptrTo(true), Terminating: ptrTo(false)},
			NodeName:   ptrTo(fmt.Sprintf("node-%d", (i+k)%100)),
			Zone:       ptrTo(fmt.Sprintf("zone-%c", 'a'+(i+k)%3)),
			TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: pod,
				UID: types.UID(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i, k, i%4096, k%4096, i*endpoints+k))},
		}
	}
	slice := bulkSlice(namespace, name, eps)
	for k, v := range labels {
		slice.Labels[k] = v
	}
	slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: got.UID,
		Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}
	if _, err := cs.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create endpointslice %s/%s: %w", namespace, slice.Name, err)
	}
	return nil
}

func bulkSlice(namespace, service string, eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: service + "-bench", Namespace: namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Protocol: ptrTo(v1.ProtocolTCP), Port: ptrTo(int32(bulkTargetPort))}},
	}
}

// runAddBenchEndpoint appends one endpoint to a bulk Service's slice, stamped with the
// last-change-trigger-time both proxiers' network_programming_duration_seconds measure from,
// and prints the write's wall-clock time (Unix seconds) for the caller's own probe.
func runAddBenchEndpoint(ctx context.Context, args []string) error {
	ref, rest, err := serviceArgs("add-bench-endpoint", args, 2, 2)
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(rest[0])
	if err != nil || !addr.Is4() {
		return fmt.Errorf("%q is not an IPv4 address", rest[0])
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	written, err := addBenchEndpoint(ctx, cs, ref.Namespace, ref.Name, addr)
	if err != nil {
		return err
	}
	fmt.Printf("%.3f\n", unixSeconds(written))
	return nil
}

// addBenchEndpoint appends addr to the bulk Service's slice with the trigger-time annotation
// set to the time of the write, and returns that time.
func addBenchEndpoint(ctx context.Context, cs kubernetes.Interface, namespace, service string, addr netip.Addr) (time.Time, error) {
	slices := cs.DiscoveryV1().EndpointSlices(namespace)
	slice, err := slices.Get(ctx, service+"-bench", metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("get endpointslice of %s/%s: %w", namespace, service, err)
	}
	now := time.Now()
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true)}})
	if slice.Annotations == nil {
		slice.Annotations = map[string]string{}
	}
	slice.Annotations[triggerTimeLabel] = now.UTC().Format(time.RFC3339Nano)
	if _, err := slices.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		return time.Time{}, fmt.Errorf("update endpointslice %s/%s: %w", namespace, slice.Name, err)
	}
	return now, nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// runBenchProbeService creates the one Service the benchmark connects to: its endpoint is a
// real listener (ADDR:PORT) in the VM.
func runBenchProbeService(ctx context.Context, args []string) error {
	ref, rest, err := serviceArgs("bench-probe-service", args, 2, 2)
	if err != nil {
		return err
	}
	ap, err := netip.ParseAddrPort(rest[0])
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("%q is not IPv4ADDR:PORT", rest[0])
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ref.Namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ref.Namespace, err)
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace},
		Spec: v1.ServiceSpec{
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: bulkPort, TargetPort: intstr.FromInt32(int32(ap.Port()))}},
		},
	}
	got, err := cs.CoreV1().Services(ref.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create service %s: %w", ref, err)
	}
	slice := bulkSlice(ref.Namespace, ref.Name, []discoveryv1.Endpoint{{Addresses: []string{ap.Addr().String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true)}}})
	slice.Ports[0].Port = ptrTo(int32(ap.Port()))
	if _, err := cs.DiscoveryV1().EndpointSlices(ref.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create endpointslice %s/%s: %w", ref.Namespace, slice.Name, err)
	}
	fmt.Printf("CLUSTER_IP=%s\n", got.Spec.ClusterIP)
	return nil
}

func ptrTo[T any](v T) *T { return &v }
