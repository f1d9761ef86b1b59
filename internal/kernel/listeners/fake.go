package listeners

import "sync"

// Fake is a host whose listening sockets are set by the test.
type Fake struct {
	mu        sync.Mutex
	listeners []Listener
}

var _ Interface = (*Fake)(nil)

// NewFake returns a host listening on ls.
func NewFake(ls ...Listener) *Fake {
	return &Fake{listeners: normalize(append([]Listener(nil), ls...))}
}

// Set replaces the listening sockets.
func (f *Fake) Set(ls ...Listener) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listeners = normalize(append([]Listener(nil), ls...))
}

func (f *Fake) Listening() ([]Listener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Listener(nil), f.listeners...), nil
}
