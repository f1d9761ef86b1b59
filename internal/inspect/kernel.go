package inspect

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"golang.org/x/sys/unix"
)

// IPVSReader is the read side of the IPVS adapter.
type IPVSReader interface {
	VirtualServers() ([]ipvs.VirtualServer, error)
	RealServers(vs ipvs.VirtualServerKey) ([]ipvs.RealServer, error)
	ipvs.StatsReader
}

// AddressReader is the read side of the netif adapter.
type AddressReader interface {
	DummyAddresses() ([]netip.Addr, error)
	HostAddresses() ([]netip.Addr, error)
	// ServiceRoutes are the Service CIDR routes the proxier added there.
	ServiceRoutes() ([]netip.Prefix, error)
}

// SetReader is the read side of the ipset adapter.
type SetReader interface {
	Sets() ([]ipset.Set, error)
	Entries(name string) ([]ipset.Entry, error)
}

// FlowReader is the read side of the conntrack adapter.
type FlowReader interface {
	Flows(family int) ([]conntrack.Flow, error)
}

// Kernel holds the readers; a nil one is reported as a warning and its
// part of the view stays empty (e.g. IPVS not loaded).
type Kernel struct {
	IPVS      IPVSReader
	Addresses AddressReader
	Sets      SetReader
	Flows     FlowReader
	// Warnings explain readers that could not be opened.
	Warnings []string
}

// KernelState is everything the kernel holds that inspect shows, owned by
// the proxier or not.
type KernelState struct {
	VirtualServers []KernelVirtualServer
	// DummyAddresses are bound on kube-ipvs0; DummyMissing when the link
	// does not exist.
	DummyAddresses []netip.Addr
	DummyMissing   bool
	HostAddresses  []netip.Addr
	// ServiceRoutes are the proxier's Service CIDR routes on kube-ipvs0
	// (proto 233; ipvsproxy/routes.go).
	ServiceRoutes []netip.Prefix
	// Sets are the KUBE-* ipsets with their members.
	Sets  map[string]KernelSet
	Flows []conntrack.Flow
	// Warnings are parts that could not be read, in plain sentences.
	Warnings []string
}

// KernelVirtualServer is one virtual server as read.
type KernelVirtualServer struct {
	ipvs.VirtualServer
	Stats       ipvs.Stats
	RealServers []KernelRealServer
}

// KernelRealServer is one real server as read.
type KernelRealServer struct {
	ipvs.RealServer
	Stats ipvs.Stats
}

// KernelSet is one ipset as read.
type KernelSet struct {
	Type    ipset.Type
	Entries []ipset.Entry
}

// ReadKernel reads every part; a part that fails is a warning, not an
// error, unless nothing at all could be read.
func ReadKernel(k Kernel) (KernelState, error) {
	st := KernelState{Sets: map[string]KernelSet{}, Warnings: slices.Clone(k.Warnings)}
	var failed []error
	warn := func(what string, err error) {
		err = Explain(what, err)
		failed = append(failed, err)
		st.Warnings = append(st.Warnings, err.Error())
	}
	if k.IPVS != nil {
		if err := st.readIPVS(k.IPVS); err != nil {
			warn("read the IPVS table", err)
		}
	}
	if k.Addresses != nil {
		addrs, err := k.Addresses.DummyAddresses()
		switch {
		case errors.Is(err, netif.ErrNotFound):
			st.DummyMissing = true
		case err != nil:
			warn("list the addresses of kube-ipvs0", err)
		}
		st.DummyAddresses = addrs
		if st.HostAddresses, err = k.Addresses.HostAddresses(); err != nil {
			warn("list the node's addresses", err)
		}
		if !st.DummyMissing {
			if st.ServiceRoutes, err = k.Addresses.ServiceRoutes(); err != nil && !errors.Is(err, netif.ErrNotFound) {
				warn("list the Service CIDR routes on kube-ipvs0", err)
			}
		}
	}
	if k.Sets != nil {
		if err := st.readSets(k.Sets); err != nil {
			warn("read the ipsets", err)
		}
	}
	if k.Flows != nil {
		for _, family := range []int{4, 6} {
			flows, err := k.Flows.Flows(family)
			if err != nil {
				warn(fmt.Sprintf("list the IPv%d conntrack flows", family), err)
				continue
			}
			st.Flows = append(st.Flows, flows...)
		}
	}
	if len(failed) > 0 && len(failed) == countNonNil(k) {
		return st, errors.Join(failed...)
	}
	return st, nil
}

func countNonNil(k Kernel) int {
	n := 0
	if k.IPVS != nil {
		n++
	}
	if k.Addresses != nil {
		n += 2
	}
	if k.Sets != nil {
		n++
	}
	if k.Flows != nil {
		n += 2
	}
	return n
}

func (st *KernelState) readIPVS(r IPVSReader) error {
	vss, err := r.VirtualServers()
	if err != nil {
		return err
	}
	stats, err := r.VirtualServerStats()
	if err != nil {
		return err
	}
	for _, vs := range vss {
		rss, err := r.RealServers(vs.VirtualServerKey)
		if errors.Is(err, ipvs.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		rstats, err := r.RealServerStats(vs.VirtualServerKey)
		if err != nil && !errors.Is(err, ipvs.ErrNotFound) {
			return err
		}
		kvs := KernelVirtualServer{VirtualServer: vs, Stats: stats[vs.VirtualServerKey]}
		for _, rs := range rss {
			kvs.RealServers = append(kvs.RealServers, KernelRealServer{RealServer: rs, Stats: rstats[rs.RealServerKey]})
		}
		st.VirtualServers = append(st.VirtualServers, kvs)
	}
	return nil
}

func (st *KernelState) readSets(r SetReader) error {
	sets, err := r.Sets()
	if err != nil {
		return err
	}
	for _, s := range sets {
		if !strings.HasPrefix(s.Name, "KUBE-") {
			continue
		}
		entries, err := r.Entries(s.Name)
		if errors.Is(err, ipset.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		st.Sets[s.Name] = KernelSet{Type: s.Type, Entries: entries}
	}
	return nil
}

// Explain turns an adapter error into a plain sentence that says what to do.
func Explain(what string, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("cannot %s: permission denied; inspect needs CAP_NET_ADMIN (run it as root on the node, or with kubectl exec in the ipvsproxy pod): %w", what, err)
	case errors.Is(err, ipvs.ErrUnsupported):
		return fmt.Errorf("cannot %s: IPVS is not loaded in this kernel (module ip_vs): %w", what, err)
	case errors.Is(err, conntrack.ErrUnsupported):
		return fmt.Errorf("cannot %s: conntrack netlink is not loaded (module nf_conntrack_netlink): %w", what, err)
	}
	return fmt.Errorf("cannot %s: %w", what, err)
}
