package inspectserver

import (
	"encoding/json"
	"net/http"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
)

// SnapshotPath is where the Snapshot is served. The "v1" is the version of
// the JSON: a field is never removed nor changes meaning within it.
const SnapshotPath = "/inspect/v1/snapshot"

// Prefix is what to route to Handler on a mux.
const Prefix = "/inspect/"

// Handler serves snapshot() as JSON at SnapshotPath. Any other method than
// GET and HEAD is refused with 405, any other path under Prefix with 404.
func Handler(snapshot func() snapshot.Snapshot) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(SnapshotPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the inspect endpoint is read-only: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		body, err := json.Marshal(snapshot())
		if err != nil {
			http.Error(w, "encode snapshot: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			return
		}
		w.Write(append(body, '\n'))
	})
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such inspect resource; try "+SnapshotPath, http.StatusNotFound)
	})
	return mux
}
