package main

import (
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// errorLog is kube-proxy's logger in the benchmark: its informational lines
// are dropped (a line per Service would time the logger, not the proxier),
// its errors are kept, so that a run in which a sync failed is seen and not
// counted (discarding every line hid failed syncs among the timed ones).
type errorLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *errorLog) logger() logr.Logger { return logr.New(errorSink{l}) }

// Errors returns the errors kube-proxy logged so far.
func (l *errorLog) Errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

type errorSink struct{ log *errorLog }

func (errorSink) Init(logr.RuntimeInfo)            {}
func (errorSink) Enabled(int) bool                 { return false }
func (errorSink) Info(int, string, ...any)         {}
func (s errorSink) WithValues(...any) logr.LogSink { return s }
func (s errorSink) WithName(string) logr.LogSink   { return s }
func (s errorSink) Error(err error, msg string, kv ...any) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v", msg, err)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	s.log.mu.Lock()
	s.log.lines = append(s.log.lines, b.String())
	s.log.mu.Unlock()
}
