package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The Node fleet of the simulations (docs/performance.md, "What watching
// every Node costs"): N Nodes as kubelets register them on a cloud (labels,
// annotations, capacity, the four conditions, addresses, node info, 50 images
// as kubelet's nodeStatusMaxImages reports), and their status updates at
// kubelet's cadence: every --report-period (nodeStatusReportFrequency, 5 min)
// each Node's heartbeat, as a strategic merge patch of its status by the field
// manager "kubelet", spread evenly; and --condition-changes a minute over
// random Nodes, a condition flipping (MemoryPressure or DiskPressure, then back
// at the next one) with the heartbeat.
var nodeFleetCommands = map[string]command{
	"bulk-nodes":      {"bulk-nodes [--from 0] [--count 5000] [--workers 8]   (node-00000 ... with status)", runBulkNodes},
	"node-heartbeats": {"node-heartbeats [--count 5000] [--report-period 5m] [--condition-changes 50] [--duration 10m]   (prints the writes made as JSON)", runNodeHeartbeats},
}

func fleetNodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// fleetNodeIP is Node i's InternalIP, in 10.0.0.0/8 (the data of a simulation:
// no packet goes to it).
func fleetNodeIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(16 + i>>16), byte(i >> 8), byte(i)})
}

func hexOf(parts ...any) string {
	sum := sha256.Sum256(fmt.Appendln(nil, parts...))
	return hex.EncodeToString(sum[:])
}

// fleetImages are the images a node of the fleet reports: system and
// application images, each by digest and tag, with its size.
func fleetImages(i int) []v1.ContainerImage {
	repos := []string{"registry.k8s.io/kube-proxy", "registry.k8s.io/pause", "registry.k8s.io/coredns/coredns",
		"quay.io/cilium/cilium", "quay.io/prometheus/node-exporter", "docker.io/library/nginx", "docker.io/library/redis",
		"docker.io/library/postgres", "ghcr.io/example/api-server", "ghcr.io/example/web-frontend", "ghcr.io/example/worker",
		"ghcr.io/example/batch-importer", "public.ecr.aws/eks-distro/kubernetes/pause", "docker.io/grafana/promtail",
		"docker.io/fluent/fluent-bit", "registry.k8s.io/ingress-nginx/controller", "docker.io/bitnami/kafka",
		"docker.io/bitnami/zookeeper", "quay.io/jetstack/cert-manager-controller", "docker.io/library/busybox"}
	out := make([]v1.ContainerImage, 0, 50)
	for k := range 50 {
		repo := repos[(i+k)%len(repos)]
		tag := fmt.Sprintf("v%d.%d.%d", 1+k%3, (i+k)%20, k)
		out = append(out, v1.ContainerImage{
			Names:     []string{repo + "@sha256:" + hexOf(repo, tag), repo + ":" + tag},
			SizeBytes: int64(5_000_000 + (i*7919+k*104729)%400_000_000),
		})
	}
	return out
}

// fleetNode is Node i as its kubelet registers it.
func fleetNode(i int) *v1.Node {
	name := fleetNodeName(i)
	zone := fmt.Sprintf("us-east-1%c", 'a'+i%3)
	instance := "i-" + hexOf("instance", i)[:17]
	ip := fleetNodeIP(i)
	podCIDR := fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256)
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/instance-type": "m6i.2xlarge",
				"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"node.kubernetes.io/instance-type": "m6i.2xlarge", "topology.kubernetes.io/region": "us-east-1",
				"topology.kubernetes.io/zone": zone, "failure-domain.beta.kubernetes.io/region": "us-east-1",
				"failure-domain.beta.kubernetes.io/zone": zone, "topology.ebs.csi.aws.com/zone": zone,
				"node-role.kubernetes.io/worker": "", "nodegroup": fmt.Sprintf("workers-%d", i%8),
			},
			Annotations: map[string]string{
				"alpha.kubernetes.io/provided-node-ip":                   ip.String(),
				"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"ebs.csi.aws.com":%q}`, instance),
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: v1.NodeSpec{
			PodCIDR:    podCIDR,
			PodCIDRs:   []string{podCIDR},
			ProviderID: fmt.Sprintf("aws:///%s/%s", zone, instance),
		},
	}
}

// fleetStatus is Node i's status at a heartbeat at, with the condition
// pressure (if not empty) true.
func fleetStatus(i int, at time.Time, pressure v1.NodeConditionType) v1.NodeStatus {
	t := metav1.NewTime(at.Truncate(time.Second))
	since := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	cond := func(typ v1.NodeConditionType, okReason, okMessage, badReason, badMessage string) v1.NodeCondition {
		c := v1.NodeCondition{Type: typ, Status: v1.ConditionFalse, Reason: okReason, Message: okMessage, LastHeartbeatTime: t, LastTransitionTime: since}
		if typ == pressure {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = v1.ConditionTrue, badReason, badMessage, t
		}
		return c
	}
	q := resource.MustParse
	capacity := v1.ResourceList{v1.ResourceCPU: q("8"), v1.ResourceEphemeralStorage: q("104845292Ki"), "hugepages-1Gi": q("0"),
		"hugepages-2Mi": q("0"), v1.ResourceMemory: q("32386544Ki"), v1.ResourcePods: q("110")}
	allocatable := v1.ResourceList{v1.ResourceCPU: q("7910m"), v1.ResourceEphemeralStorage: q("95551679124"), "hugepages-1Gi": q("0"),
		"hugepages-2Mi": q("0"), v1.ResourceMemory: q("31369712Ki"), v1.ResourcePods: q("110")}
	return v1.NodeStatus{
		Capacity: capacity, Allocatable: allocatable,
		Conditions: []v1.NodeCondition{
			cond(v1.NodeMemoryPressure, "KubeletHasSufficientMemory", "kubelet has sufficient memory available", "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
			cond(v1.NodeDiskPressure, "KubeletHasNoDiskPressure", "kubelet has no disk pressure", "KubeletHasDiskPressure", "kubelet has disk pressure"),
			cond(v1.NodePIDPressure, "KubeletHasSufficientPID", "kubelet has sufficient PID available", "KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
			{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
				LastHeartbeatTime: t, LastTransitionTime: since},
		},
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fleetNodeIP(i).String()},
			{Type: v1.NodeInternalDNS, Address: "ip-" + fleetNodeIP(i).String() + ".ec2.internal"},
			{Type: v1.NodeHostName, Address: "ip-" + fleetNodeIP(i).String() + ".ec2.internal"}},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: 10250}},
		NodeInfo: v1.NodeSystemInfo{
			MachineID: hexOf("machine", i)[:32], SystemUUID: "ec2" + hexOf("uuid", i)[:29], BootID: hexOf("boot", i)[:36],
			KernelVersion: "6.1.0-28-cloud-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)",
			ContainerRuntimeVersion: "containerd://1.7.24", KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64",
		},
		Images:          fleetImages(i),
		RuntimeHandlers: []v1.NodeRuntimeHandler{{Name: "runc", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptrTo(true), UserNamespaces: ptrTo(true)}}, {Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptrTo(true), UserNamespaces: ptrTo(true)}}},
		Features:        &v1.NodeFeatures{SupplementalGroupsPolicy: ptrTo(true)},
	}
}

func runBulkNodes(ctx context.Context, args []string) error {
	fs := newFlags("bulk-nodes")
	from := fs.Int("from", 0, "first index (the Nodes below it exist already)")
	count := fs.Int("count", 5000, "Nodes node-FROM ... node-(COUNT-1) are registered")
	workers := fs.Int("workers", 8, "concurrent clients")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
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
	start := time.Now()
	var next atomic.Int64
	next.Store(int64(*from))
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= *count || ctx.Err() != nil {
					return
				}
				if err := registerFleetNode(ctx, cs, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("registered %d Nodes in %.1fs\n", *count-*from, time.Since(start).Seconds())
	return nil
}

// registerFleetNode creates Node i and sets its status, as a kubelet registers
// (the status through its subresource, by the field manager "kubelet").
func registerFleetNode(ctx context.Context, cs kubernetes.Interface, i int) error {
	n := fleetNode(i)
	_, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{FieldManager: "kubelet"})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	return patchFleetStatus(ctx, cs, i, time.Now(), "")
}

// patchFleetStatus sends Node i's status as kubelet does: a strategic merge
// patch of the status subresource.
func patchFleetStatus(ctx context.Context, cs kubernetes.Interface, i int, at time.Time, pressure v1.NodeConditionType) error {
	body, err := json.Marshal(map[string]any{"status": fleetStatus(i, at, pressure)})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, fleetNodeName(i), types.StrategicMergePatchType, body, metav1.PatchOptions{FieldManager: "kubelet"}, "status")
	if err != nil {
		return fmt.Errorf("patch status of node %s: %w", fleetNodeName(i), err)
	}
	return nil
}

func runNodeHeartbeats(ctx context.Context, args []string) error {
	fs := newFlags("node-heartbeats")
	count := fs.Int("count", 5000, "the Nodes node-00000 ... node-(COUNT-1)")
	period := fs.Duration("report-period", 5*time.Minute, "each Node's status is sent once a period (kubelet's nodeStatusReportFrequency)")
	changes := fs.Int("condition-changes", 50, "condition changes a minute over random Nodes")
	duration := fs.Duration("duration", 10*time.Minute, "how long to go on")
	seed := fs.Uint64("seed", 1, "seed of the condition changes")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
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
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	var (
		mu          sync.Mutex
		pressure    = map[int]v1.NodeConditionType{}
		heartbeats  atomic.Int64
		flips       atomic.Int64
		failures    atomic.Int64
		wg          sync.WaitGroup
		concurrency = make(chan struct{}, 16)
	)
	send := func(i int, counter *atomic.Int64) {
		mu.Lock()
		p := pressure[i]
		mu.Unlock()
		concurrency <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-concurrency; wg.Done() }()
			if err := patchFleetStatus(ctx, cs, i, time.Now(), p); err != nil {
				if ctx.Err() == nil {
					failures.Add(1)
				}
				return
			}
			counter.Add(1)
		}()
	}
	start := time.Now()
	// The heartbeats: Node i at i/N of each period.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(*period / time.Duration(*count))
		defer tick.Stop()
		for k := 0; ; k++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				send(k%*count, &heartbeats)
			}
		}
	}()
	// The condition changes.
	if *changes > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(*seed, 7))
			tick := time.NewTicker(time.Minute / time.Duration(*changes))
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				i := rng.IntN(*count)
				mu.Lock()
				switch {
				case pressure[i] != "":
					delete(pressure, i)
				case rng.IntN(2) == 0:
					pressure[i] = v1.NodeMemoryPressure
				default:
					pressure[i] = v1.NodeDiskPressure
				}
				mu.Unlock()
				send(i, &flips)
			}
		}()
	}
	<-ctx.Done()
	wg.Wait()
	out := map[string]any{"nodes": *count, "report_period_s": period.Seconds(), "condition_changes_per_min": *changes,
		"seconds": time.Since(start).Seconds(), "heartbeats": heartbeats.Load(), "condition_changes": flips.Load(), "failures": failures.Load()}
	return json.NewEncoder(os.Stdout).Encode(out)
}
