package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeWatchServer answers every watch with a bookmark each 50 ms until the
// client goes, and any other request after a second.
func fakeWatchServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "" {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Second):
				fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"node1"}}`)
			}
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for rv := 1; ; rv++ {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			fmt.Fprintf(w, `{"type":"BOOKMARK","object":{"kind":"Service","apiVersion":"v1","metadata":{"resourceVersion":"%d"}}}`+"\n", rv)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, server)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The informers' watches outlive the one-shot request timeout: http.Client's
// timeout also ends a body being read, and cut every watch of the daemon
// after 30 s. One-shot requests still end at the timeout.
func TestInformerClientWatchOutlivesRequestTimeout(t *testing.T) {
	old := apiRequestTimeout
	apiRequestTimeout = 300 * time.Millisecond
	t.Cleanup(func() { apiRequestTimeout = old })
	requests, informers, _, err := newClients(writeKubeconfig(t, fakeWatchServer(t).URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	timeout := int64(300)
	w, err := informers.Services().Watch(ctx, metav1.ListOptions{AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	events := 0
	for time.Since(start) < 4*apiRequestTimeout {
		if _, open := <-w.ResultChan(); !open {
			t.Fatalf("the informers' watch ended after %v (%d events), within the one-shot timeout's reach (%v)", time.Since(start).Round(time.Millisecond), events, apiRequestTimeout)
		}
		events++
	}

	start = time.Now()
	_, err = requests.Nodes().Get(ctx, "node1", metav1.GetOptions{})
	if err == nil || time.Since(start) > 800*time.Millisecond {
		t.Fatalf("a one-shot request answered in a second: err %v after %v, want its %v timeout", err, time.Since(start).Round(time.Millisecond), apiRequestTimeout)
	}
}
