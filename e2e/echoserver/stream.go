package main

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// maxStream bounds how long one /stream answer lasts, so a client that never
// hangs up does not hold a connection past any scenario.
const maxStream = 10 * time.Minute

// streamHandler answers /stream with a line every ?every= (default 100ms)
// until the client hangs up: "seq=N hostname=NAME". A scenario reads it from
// a connection through a Service and measures the largest gap between lines,
// which shows whether one established connection kept flowing while the
// proxier changed the endpoint behind it.
func streamHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		every := 100 * time.Millisecond
		if s := r.URL.Query().Get("every"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				http.Error(w, "every must be a positive duration, e.g. 100ms: "+strconv.Quote(s), http.StatusBadRequest)
				return
			}
			every = d
		}
		flusher, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming unsupported", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		tick := time.NewTicker(every)
		defer tick.Stop()
		end := time.After(maxStream)
		for seq := 0; ; seq++ {
			if _, err := fmt.Fprintf(w, "seq=%d hostname=%s\n", seq, name); err != nil {
				return
			}
			flusher.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-end:
				return
			case <-tick.C:
			}
		}
	})
}
