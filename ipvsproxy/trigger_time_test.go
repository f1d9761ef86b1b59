package ipvsproxy

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func sliceWithTrigger(value string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abc12"}}
	if value != "" {
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: value}
	}
	return s
}

func TestLastChangeTriggerTime(t *testing.T) {
	got, err := lastChangeTriggerTime(sliceWithTrigger("2026-11-29T22:00:01.5Z"))
	if err != nil || !got.Equal(time.Date(2026, 11, 29, 22, 0, 1, 500000000, time.UTC)) {
		t.Errorf("parsed %v, %v", got, err)
	}
	got, err = lastChangeTriggerTime(sliceWithTrigger(""))
	if err != nil || !got.IsZero() {
		t.Errorf("no annotation: %v, %v; want zero time, nil", got, err)
	}
	_, err = lastChangeTriggerTime(sliceWithTrigger("yesterday"))
	if err == nil || !strings.Contains(err.Error(), "default/web-abc12") {
		t.Errorf("bad annotation: error %v, want one naming default/web-abc12", err)
	}
}

func TestNetworkProgrammingTrigger(t *testing.T) {
	trackerStart := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		value   string
		deleted bool
		wantOK  bool
		wantErr bool
	}{
		{"changed after start", "2026-11-29T22:00:01Z", false, true, false},
		{"deleted slice", "2026-11-29T22:00:01Z", true, false, false},
		{"changed before start", "2026-11-29T21:59:59Z", false, false, false},
		{"no annotation", "", false, false, false},
		{"unparsable", "soon", false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ok, err := networkProgrammingTrigger(sliceWithTrigger(tt.value), tt.deleted, trackerStart)
			if ok != tt.wantOK || (err != nil) != tt.wantErr {
				t.Errorf("ok %v, err %v; want ok %v, error %v", ok, err, tt.wantOK, tt.wantErr)
			}
		})
	}
}
