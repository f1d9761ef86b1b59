package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/events"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// EventAPIPermissionMissing is the reason of the Warning Event on this Node
// while the API server forbids a list or watch the daemon makes.
const EventAPIPermissionMissing = "APIPermissionMissing"

// apiAccess reports the lists the API server refuses: a 403 once per
// episode as a log line and a Warning Event on this Node naming the missing
// rule, and in ipvsproxy_api_permission_missing while it lasts; every
// failure of a required list on the health endpoints.
type apiAccess struct {
	health   *healthcheck.ProxyHealth
	missing  *prometheus.GaugeVec
	recorder events.Recorder
	node     *v1.ObjectReference

	mu sync.Mutex
	// forbidden holds the (resource, verb) pairs reported and not yet
	// served again.
	forbidden map[schema.GroupResource]string
}

func newAPIAccess(health *healthcheck.ProxyHealth, missing *prometheus.GaugeVec, recorder events.Recorder, nodeName string) *apiAccess {
	return &apiAccess{
		health: health, missing: missing, recorder: recorder,
		// Events about the node name it by name; kube-proxy uses the name as
		// the UID too, having no Node object at hand.
		node:      &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)},
		forbidden: map[schema.GroupResource]string{},
	}
}

// reportForbidden records a 403 on resource; consequence says what the
// daemon does without it. Only the first of an episode is logged at the
// default level and becomes an Event: the reflector retries every minute
// at most, forever.
func (a *apiAccess) reportForbidden(resource schema.GroupResource, err error, consequence string) {
	verb := forbiddenVerb(err)
	a.mu.Lock()
	_, reported := a.forbidden[resource]
	a.forbidden[resource] = verb
	a.mu.Unlock()
	if a.missing != nil {
		a.missing.WithLabelValues(resource.Group, resource.Resource, verb).Set(1)
	}
	if reported {
		klog.V(4).InfoS("Still forbidden", "resource", resource.String(), "err", err)
		return
	}
	rule := missingRule(resource)
	klog.ErrorS(err, "The API server forbids a list or watch; grant the missing rule in the ClusterRole (deploy/base/clusterrole.yaml, docs/rbac.md)",
		"missingRule", rule, "consequence", consequence)
	if a.recorder != nil {
		a.recorder.Eventf(a.node, v1.EventTypeWarning, EventAPIPermissionMissing,
			"ipvsproxy may not %s %s (missing rule: %s): %s", verb, resource.String(), rule, consequence)
	}
}

// reportPermitted records that resource was listed again after a 403.
func (a *apiAccess) reportPermitted(resource schema.GroupResource) {
	a.mu.Lock()
	verb, reported := a.forbidden[resource]
	delete(a.forbidden, resource)
	a.mu.Unlock()
	if !reported {
		return
	}
	if a.missing != nil {
		a.missing.WithLabelValues(resource.Group, resource.Resource, verb).Set(0)
	}
	klog.InfoS("The API server serves a resource it forbade before", "resource", resource.String())
}

// missingRule is the ClusterRole row a 403 on resource asks for, in the
// form of docs/rbac.md.
func missingRule(resource schema.GroupResource) string {
	group := resource.Group
	if group == "" {
		group = `""`
	}
	return "apiGroups: [" + group + "], resources: [" + resource.Resource + "], verbs: [list, watch]"
}

// forbiddenVerb is the verb a 403 names ("cannot watch resource ..."); list
// when it names none.
func forbiddenVerb(err error) string {
	if strings.Contains(err.Error(), "cannot watch") {
		return "watch"
	}
	return "list"
}

// normalWatchEnd is what the reflector reports when a watch ends as watches
// do (expired, closed): no failure.
func normalWatchEnd(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// requiredInformer is what watchRequiredList watches: a shared informer or
// a trackedInformer, before it runs.
type requiredInformer interface {
	SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error
	HasSynced() bool
	LastSyncResourceVersion() string
	RunWithContext(context.Context)
}

// recoveryPoll is how often a failing informer is checked for having listed
// again; a var so tests need not wait.
var recoveryPoll = time.Second

// watchRequiredList makes the failures of informer's list and watch show on
// the health endpoints within one retry of the reflector (the first is
// immediate), and clears them once it has listed again. Call it before the
// informer starts.
func watchRequiredList(ctx context.Context, informer requiredInformer, resource schema.GroupResource, access *apiAccess) error {
	var mu sync.Mutex
	failing := false
	var syncedAtFailure bool
	var versionAtFailure string
	err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		if normalWatchEnd(err) {
			return
		}
		access.health.ListFailing(resource.String(), err.Error())
		if apierrors.IsForbidden(err) {
			access.reportForbidden(resource, err, "this node programs no change until it is granted")
		}
		mu.Lock()
		failing, syncedAtFailure, versionAtFailure = true, informer.HasSynced(), informer.LastSyncResourceVersion()
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	// The reflector says nothing when a list succeeds: a first sync, or a
	// resource version that moved, is the sign it got past the failure.
	go wait.UntilWithContext(ctx, func(context.Context) {
		mu.Lock()
		recovered := failing && ((!syncedAtFailure && informer.HasSynced()) ||
			(informer.HasSynced() && informer.LastSyncResourceVersion() != versionAtFailure))
		if recovered {
			failing = false
		}
		mu.Unlock()
		if recovered {
			access.health.ListRecovered(resource.String())
			access.reportPermitted(resource)
		}
	}, recoveryPoll)
	return nil
}
