package healthcheck

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveOK runs Serve with limits on a loopback listener until the test ends.
func serveOK(t *testing.T, limits ServerLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "served") })
	serveInBackground(t, func(ctx context.Context) error {
		return Serve(ctx, ln, handler, WithServerLimits(limits))
	})
	return ln.Addr().String()
}

func TestServeCapsHeaderSize(t *testing.T) {
	limits := DefaultServerLimits
	limits.MaxHeaderBytes = 1 << 10
	addr := serveOK(t, limits)

	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	// Go's server allows 4 KiB of slack over MaxHeaderBytes; go well past it.
	req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB header = %d, want 431", resp.StatusCode)
	}
	if got := get(t, "http://"+addr+"/"); got.code != http.StatusOK || got.body != "served" {
		t.Errorf("small request after the big one = %d %q", got.code, got.body)
	}
}
