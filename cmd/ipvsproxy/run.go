package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/metrics"
	"github.com/ipvsproxy/ipvsproxy/internal/events"
	"github.com/ipvsproxy/ipvsproxy/internal/hostsetup"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Labels with which a Service or EndpointSlice opts out of this proxy, as
// kube-proxy honours them.
const (
	labelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	labelHeadless         = "service.kubernetes.io/headless"
)

func runAction(c *cli.Context) error {
	cfg, source, err := loadConfig(c)
	if err != nil {
		return err
	}
	if err := applyLogging(c); err != nil {
		return err
	}
	applyOOMScoreAdj(c.Int("oom-score-adj"))
	applyGCPercent(os.LookupEnv)
	applyMemProfileRate(c.Bool("profiling"))
	nodeName, err := nodeNameOf(c.String("hostname-override"))
	if err != nil {
		return err
	}
	nodeAddresses, err := parseNodeAddressSource(c.String("node-addresses-from"), c.String("node-addresses-namespace"))
	if err != nil {
		return err
	}
	client, informerClient, server, err := newClients(c.String("kubeconfig"), clientConnection(c))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg.APIServers = findAPIServers(ctx, server, client, lookupHost)
	if cfg.Families, err = familiesToProxy(ctx, c.String("ip-families"), client, nodeName, cfg.ServiceCIDRs, c.String("sysctl-root")); err != nil {
		return err
	}
	if strings.EqualFold(strings.TrimSpace(c.String("nodeport-addresses")), nodePortPrimary) {
		if cfg.NodePortAddresses, err = resolvePrimaryNodePortAddresses(ctx, client, nodeName, 2*time.Minute); err != nil {
			return err
		}
	}
	ctx, restart := context.WithCancelCause(ctx)
	watchConfigFile(ctx, source, configWatchInterval, func() { restart(errConfigChanged) })

	lock, err := takeNodeLock(ctx, c)
	if err != nil {
		return err
	}
	defer lock.Release()
	kernelOptions := adapters.Options{Families: cfg.Families, SysctlRoot: c.String("sysctl-root"), Fake: fakeKernel}
	k, closeKernel, err := adapters.Open(kernelOptions)
	if err != nil {
		return err
	}
	defer closeKernel()
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	release := unix.ByteSliceToString(uts.Release[:])
	prepared, err := hostsetup.Prepare(cfg, k, release)
	if err != nil {
		return err
	}
	cfg = prepared.Config
	allowedSchedulers(&cfg, hostsetup.KernelSchedulerSources(release))

	m := newDaemonMetrics()
	m.SetSchedulerFallback(prepared.Requested, prepared.SchedulerFellBack)

	recorder := events.New(client.Events(), kubeapi.Scheme(), v1.EventSource{Component: "ipvsproxy", Host: nodeName})
	defer recorder.Shutdown()

	health := healthcheck.NewProxyHealth(cfg.SyncPeriod, clock.RealClock{})
	health.SetIPFamilies(cfg.Families...)
	health.CountResponses(m.ProxyHealthzTotal, m.ProxyLivezTotal)
	serviceHealth := healthcheck.NewServiceHealthServer(cfg.NodePortAddresses, recorder, health, healthcheck.WithNodeName(nodeName))
	defer serviceHealth.Close()

	p, err := proxier.New(cfg, nodeName, k, recorder)
	if err != nil {
		return err
	}
	reader, closeReader, err := adapters.OpenReader(k, kernelOptions)
	if err != nil {
		return err
	}
	defer closeReader()
	p.ReadBeside(reader)
	observeProxier(p, m, health, serviceHealth, cfg.Families)

	informersSynced, err := startInformers(ctx, informerClient, nodeName, p.Tracker(), p.ClusterNodes(), nodeAddresses,
		newAPIAccess(health, m.APIPermissionMissing, recorder, nodeName))
	if err != nil {
		return err
	}

	status, err := statusAndInspectServers(c, m.Registry, p, k.IPVS)
	if err != nil {
		return err
	}
	// Room for every server's error: a hard failure never blocks.
	errs := make(chan error, len(status)+1)
	serveHealthAndMetrics(ctx, c, health, status, errs)

	// Wait until the tracker itself has seen every object, not only the
	// informers' caches: handlers run asynchronously, and a first full sync
	// that missed a Service would delete its virtual servers.
	klog.InfoS("Waiting for informers", "node", nodeName)
	if !cache.WaitForCacheSync(ctx.Done(), informersSynced...) {
		if errors.Is(context.Cause(ctx), errConfigChanged) {
			return errConfigChanged // changed before the first sync
		}
		return fmt.Errorf("informers did not sync before shutdown")
	}
	klog.InfoS("Proxier running", "node", nodeName, "families", cfg.Families, "scheduler", cfg.Scheduler)
	stopped := startSyncLoop(ctx, p)
	// Runs before closeKernel (deferred earlier): the sync in flight ends first.
	defer func() { stop(); <-stopped }()
	select {
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), errConfigChanged) {
			<-stopped // no sync is cut off half-way by the restart
			return errConfigChanged
		}
		klog.InfoS("Stopping; the kernel state stays so traffic keeps flowing")
		return nil
	case err := <-errs:
		return err
	}
}

// observeProxier connects the proxier's change and sync hooks to the metrics
// and health servers. Every metric with an ip_family label is set once per
// family the node proxies, each with its own value.
func observeProxier(p *proxier.Proxier, m *metrics.Metrics, health *healthcheck.ProxyHealth, serviceHealth *healthcheck.ServiceHealthServer, families []v1.IPFamily) {
	p.OnQueued = func() {
		health.QueuedUpdate()
		services, endpoints, _ := p.Tracker().Pending()
		m.ServiceChangesPending.Set(float64(services))
		m.EndpointChangesPending.Set(float64(endpoints))
		for _, f := range families {
			m.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(f)).SetToCurrentTime()
		}
	}
	p.OnSync = func(r proxier.SyncResult) { observeSync(m, health, serviceHealth, families, r) }
}

// observeSync feeds one sync's result to the metrics and health servers.
func observeSync(m *metrics.Metrics, health *healthcheck.ProxyHealth, services *healthcheck.ServiceHealthServer, families []v1.IPFamily, r proxier.SyncResult) {
	for _, family := range families {
		f := string(family)
		m.SyncProxyRulesLatency.WithLabelValues(f).Observe(r.Duration.Seconds())
		observeSyncKind(m, f, r)
		m.ConntrackEntriesDeletedTotal.WithLabelValues(f).Add(0)
	}
	m.ServiceChangesTotal.Add(float64(r.ServiceChanges))
	m.EndpointChangesTotal.Add(float64(r.EndpointChanges))
	for object, n := range r.WriteErrors {
		m.KernelWriteFailuresTotal.WithLabelValues(object).Add(float64(n))
	}
	observeByFamily(m, r)
	m.RealServersDraining.Set(float64(r.Draining))
	m.SetDeletionsHeld(r.DeletionsHeld, r.HeldDeletions)
	if r.Full {
		m.SyncFullTotal.Inc()
		m.FullReadVirtualServersTotal.WithLabelValues(metrics.ReadFromTable).Add(float64(r.RealServerReads.FromTable))
		m.FullReadVirtualServersTotal.WithLabelValues(metrics.ReadDumped).Add(float64(r.RealServerReads.Dumped))
	} else {
		m.SyncPartialTotal.Inc()
	}
	for _, f := range families {
		m.SetNoLocalEndpoints(f, r.NoLocalEndpoints[ipvsproxy.NoLocalKey{Family: f, Policy: "internal"}],
			r.NoLocalEndpoints[ipvsproxy.NoLocalKey{Family: f, Policy: "external"}])
	}
	markProgrammed(r, health.Programmed)
	// Health says the sync loop is alive and keeping up, as kube-proxy's
	// does: a sync that ran through counts even when single objects failed
	// (they are retried with backoff and reported per object).
	if r.Completed {
		health.Updated()
	}
	m.SetKernelObjectsFailing(r.FailingObjects)
	if r.Err() == nil {
		for _, f := range families {
			m.SyncProxyRulesLastTimestamp.WithLabelValues(string(f)).SetToCurrentTime()
			m.ObserveNetworkProgramming(f, r.TriggerTimes[f], r.Start.Add(r.Duration))
		}
	}
	if err := services.SyncServices(r.HealthCheckNodePorts); err != nil {
		klog.ErrorS(err, "Syncing health check node ports")
	}
	if err := services.SyncEndpoints(r.LocalReadyEndpoints); err != nil {
		klog.ErrorS(err, "Syncing health check endpoints")
	}
	m.ServiceChangesPending.Set(0)
	m.EndpointChangesPending.Set(0)
}

func asNode(obj any) *v1.Node {
	n, _ := obj.(*v1.Node)
	return n
}

func nodeNameOf(override string) (string, error) {
	if override = strings.TrimSpace(override); override != "" {
		return strings.ToLower(override), nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("no --hostname-override and no host name: %w", err)
	}
	return strings.ToLower(h), nil
}

// apiRequestTimeout bounds each one-shot API request of the daemon (the
// Node's addresses, discovery at start, Events) and of inspect. A var so
// tests need not wait.
var apiRequestTimeout = 30 * time.Second

// newClients makes the daemon's two API clients over one connection: one
// whose requests end after apiRequestTimeout, and one for the informers
// without it. The timeout is http.Client's, which also ends a response body
// being read: it cut every watch after 30 s (a new WATCH per informer twice
// a minute, where client-go asks for 5 to 10 minutes) and any list or
// streamed watch-list that takes longer. A dead connection still ends the
// informers' requests: client-go pings an HTTP/2 connection idle for 30 s
// and closes it after 15 s without an answer.
//
// server is the API server they dial (the kubeconfig's server, or the
// in-cluster host), for the address guard (apiserver.go).
func newClients(kubeconfig string, options ...func(*rest.Config)) (requests, informers kubeapi.Client, server string, err error) {
	restConfig, err := restConfigFor(kubeconfig, options...)
	if err != nil {
		return nil, nil, "", err
	}
	if requests, err = kubeapi.New(restConfig); err != nil {
		return nil, nil, "", err
	}
	noTimeout := func(rc *rest.Config) { rc.Timeout = 0 }
	if informers, err = newClient(kubeconfig, append(slices.Clone(options), noTimeout)...); err != nil {
		return nil, nil, "", err
	}
	return requests, informers, restConfig.Host, nil
}

func newClient(kubeconfig string, options ...func(*rest.Config)) (kubeapi.Client, error) {
	restConfig, err := restConfigFor(kubeconfig, options...)
	if err != nil {
		return nil, err
	}
	return kubeapi.New(restConfig)
}

func restConfigFor(kubeconfig string, options ...func(*rest.Config)) (*rest.Config, error) {
	var restConfig *rest.Config
	var err error
	if kubeconfig == "" {
		restConfig, err = rest.InClusterConfig()
	} else {
		restConfig, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("API server configuration: %w", err)
	}
	restConfig.UserAgent = "ipvsproxy/" + version
	restConfig.Timeout = apiRequestTimeout
	for _, o := range options {
		o(restConfig)
	}
	return restConfig, nil
}

// allowedSchedulers fills in the schedulers a Service may choose by
// annotation when the operator listed none: those the kernel has now,
// after Prepare's probe loaded the configured one. Read from the kernel's
// module lists, so that finding out loads nothing.
func allowedSchedulers(cfg *ipvsproxy.Config, src hostsetup.SchedulerSources) {
	if !cfg.AllowedSchedulersExplicit {
		available, err := hostsetup.AvailableSchedulers(src)
		if err != nil {
			klog.InfoS("Warning: could not read all of the kernel's module lists; a Service may choose only the schedulers found", "err", err)
		}
		cfg.AllowedSchedulers = available
	}
	klog.InfoS("Schedulers a Service may choose with the annotation "+ipvsproxy.AnnotationScheduler, "allowed", cfg.AllowedSchedulers,
		"configured", cfg.Scheduler, "fromFlag", cfg.AllowedSchedulersExplicit)
}

// newDaemonMetrics is the registry the daemon serves on /metrics (with
// --metrics-per-service, statusAndInspectServer adds metrics.ServiceStats);
// docs/metrics.md lists every metric and label in it, and a test holds the two
// equal.
func newDaemonMetrics() *metrics.Metrics {
	m := metrics.New()
	bi := readBuildInfo()
	m.SetBuildInfo(bi.Version, bi.Commit, bi.treeState(), bi.CommitTime)
	m.RegisterRESTClient()
	return m
}
