package inspect

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
)

// SnapshotPath is where the Snapshot is served. The "v1" is the version of
// the JSON: a field is never removed nor changes meaning within it.
const SnapshotPath = "/inspect/v1/snapshot"

// Prefix is what to route to Handler on a mux.
const Prefix = "/inspect/"

// Source is what the endpoint serves: the proxier's Snapshot and a number
// that changes whenever the Snapshot may (the proxier's count of syncs).
// Generation must not wait for a sync in progress.
type Source struct {
	Generation func() uint64
	Snapshot   func() snapshot.Snapshot
}

// Limits bound what the endpoint's clients can cost, whatever they do.
type Limits struct {
	// MaxInFlight is how many snapshot answers are written at once; a GET
	// beyond it is answered 503 with Retry-After at once. Each answer in
	// flight holds the encoding of the generation it started with, so the
	// encodings alive are at most MaxInFlight plus the current one.
	MaxInFlight int
	// WriteTimeout cuts an answer whose reader has not taken it all in
	// this time (a slow reader pins its encoding no longer).
	WriteTimeout time.Duration
}

// DefaultLimits serve `ipvsproxy inspect` and a few scripts; at 10,000
// Services the snapshot is 18 MB of JSON, 1 to 2 MB compressed.
var DefaultLimits = Limits{MaxInFlight: 4, WriteTimeout: 10 * time.Second}

// Handler serves src's Snapshot as JSON at SnapshotPath. Any other method
// than GET and HEAD is refused with 405, any other path under Prefix with
// 404. The JSON is encoded once per generation and kept compressed, and
// that one copy is written to every reader: as it is to those that accept
// gzip (Go's client, `ipvsproxy inspect`, `curl --compressed`), inflated as
// it is written to the others. HEAD never encodes.
func Handler(src Source, limits Limits) http.Handler {
	e := &endpoint{src: src, limits: limits}
	if limits.MaxInFlight > 0 {
		e.slots = make(chan struct{}, limits.MaxInFlight)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(SnapshotPath, e.serveSnapshot)
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such inspect resource; try "+SnapshotPath, http.StatusNotFound)
	})
	return mux
}

type endpoint struct {
	src    Source
	limits Limits
	// slots holds a token per answer in flight (nil: no bound).
	slots chan struct{}

	// current is the last encoding, read without a lock (HEAD and a
	// current GET never wait for one being made); making makes one at a
	// time.
	current atomic.Pointer[encoding]
	making  sync.Mutex
}

// encoding is one generation's Snapshot as gzipped JSON; gzipped is never
// written after it is made, so every reader shares it.
type encoding struct {
	generation uint64
	gzipped    []byte
}

func (e *endpoint) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the inspect endpoint is read-only: GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	gzipped := acceptsGzip(r)
	if r.Method == http.MethodHead {
		e.setHeaders(w, gzipped)
		// The length is known only of a current encoding, compressed;
		// HEAD never makes one.
		if c := e.current.Load(); gzipped && c != nil && c.generation == e.src.Generation() {
			w.Header().Set("Content-Length", strconv.Itoa(len(c.gzipped)))
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	if e.slots != nil {
		select {
		case e.slots <- struct{}{}:
			defer func() { <-e.slots }()
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the inspect endpoint is busy; retry in a second", http.StatusServiceUnavailable)
			return
		}
	}
	c, err := e.encoded()
	if err != nil {
		http.Error(w, "encode snapshot: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if e.limits.WriteTimeout > 0 {
		// Whatever the server's own write timeout (longer with
		// --profiling): this answer holds c until it is written.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(e.limits.WriteTimeout))
	}
	if gzipped {
		e.setHeaders(w, true)
		w.Header().Set("Content-Length", strconv.Itoa(len(c.gzipped)))
		w.WriteHeader(http.StatusOK)
		w.Write(c.gzipped)
		return
	}
	// Inflated as it is written: this answer holds the shared copy and a
	// reader's window, never a copy of its own.
	zr, err := gzip.NewReader(bytes.NewReader(c.gzipped))
	if err != nil {
		http.Error(w, "read the snapshot's encoding: "+err.Error(), http.StatusInternalServerError)
		return
	}
	e.setHeaders(w, false)
	w.WriteHeader(http.StatusOK)
	io.Copy(w, zr)
}

func (e *endpoint) setHeaders(w http.ResponseWriter, gzipped bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Vary", "Accept-Encoding")
	if gzipped {
		w.Header().Set("Content-Encoding", "gzip")
	}
}

// acceptsGzip: the request's Accept-Encoding lists gzip (with no q=0).
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(coding), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

// encoded is the current generation's encoding, made if need be. The
// generation is read before the Snapshot is made: a Snapshot newer than its
// label costs one more encoding later, never a stale answer.
func (e *endpoint) encoded() (*encoding, error) {
	if c := e.current.Load(); c != nil && c.generation == e.src.Generation() {
		return c, nil
	}
	e.making.Lock()
	defer e.making.Unlock()
	gen := e.src.Generation()
	if c := e.current.Load(); c != nil && c.generation == gen {
		return c, nil // made while this one waited
	}
	size := 0
	// The old encoding goes now, not after the new one is made: only the
	// answers still writing it keep it.
	if old := e.current.Swap(nil); old != nil {
		size = len(old.gzipped)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+size/8))
	zw, err := gzip.NewWriterLevel(buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if err := encodeByElement(zw, e.src.Snapshot()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	c := &encoding{generation: gen, gzipped: buf.Bytes()}
	e.current.Store(c)
	return c, nil
}
