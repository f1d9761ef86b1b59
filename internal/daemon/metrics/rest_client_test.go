package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A request through client-go shows in rest_client_* of the registry.
func TestRESTClientMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","items":[]}`))
	}))
	defer srv.Close()
	m := New()
	m.RegisterRESTClient()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rest_client_requests_total", "rest_client_request_duration_seconds"} {
		if n, err := testutil.GatherAndCount(m.Registry, name); err != nil || n == 0 {
			t.Errorf("%s: %d series, %v", name, n, err)
		}
	}
}
