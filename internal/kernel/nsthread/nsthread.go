// Package nsthread runs a function on an OS thread inside another network
// namespace. setns(2) switches one thread: a child forked from it, or a
// /proc/thread-self/net file opened on it, belongs to that namespace. The
// goroutine keeps its thread locked, so no other goroutine runs there
// meanwhile.
package nsthread

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn on a thread inside target and returns once it has. The thread
// goes back to the runtime only if it could be set back to its own
// namespace; otherwise the runtime ends it.
func Do(target netns.NsHandle, fn func()) error {
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, e := netns.Get()
		if e != nil {
			err = fmt.Errorf("get current network namespace: %w", e)
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		if e := netns.Set(target); e != nil {
			err = fmt.Errorf("enter network namespace: %w", e)
			runtime.UnlockOSThread()
			return
		}
		fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
	return err
}
