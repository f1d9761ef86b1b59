package ipvsproxy

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lastChangeTriggerTime reads the endpoints.kubernetes.io/last-change-trigger-time
// annotation the EndpointSlice controller sets: when the Service or Pod change
// that produced this version of the slice happened. It returns the zero time
// when the annotation is absent, and an error naming the slice when it does
// not parse as RFC 3339. slice is an EndpointSlice's metadata (the API
// object, or what the compact slice keeps of it).
func lastChangeTriggerTime(slice metav1.Object) (time.Time, error) {
	value, ok := slice.GetAnnotations()[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse %s of EndpointSlice %s/%s: %w", v1.EndpointsLastChangeTriggerTime, slice.GetNamespace(), slice.GetName(), err)
	}
	return t, nil
}

// networkProgrammingTrigger is the trigger time to remember for a changed
// slice, for the network programming latency metric, with kube-proxy's
// rules: a deleted slice has none (its annotation dates from its last
// update, not from the deletion), nor has one without a readable
// annotation, nor one changed before trackerStart (when the proxier began
// watching), since a restart would otherwise report the age of every slice
// as latency. ok is false when nothing should be observed.
func networkProgrammingTrigger(slice metav1.Object, deleted bool, trackerStart time.Time) (t time.Time, ok bool, err error) {
	if deleted {
		return time.Time{}, false, nil
	}
	t, err = lastChangeTriggerTime(slice)
	if err != nil || t.IsZero() || !t.After(trackerStart) {
		return time.Time{}, false, err
	}
	return t, true, nil
}
