package ipvs

import (
	"errors"
	"fmt"
	"sync"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// IP_VS_SVC_F_PERSISTENT. IP_VS_SVC_F_HASHED (0x2) is deliberately never
// sent: the kernel sets it itself, and kernels before the fix "ipvs: ignore
// IP_VS_SVC_F_HASHED flag when adding service" leave a service that arrives
// with it unhashed, i.e. unreachable. On reads it is masked away.
const flagPersistent = 0x1

// kernel is the IPVS table of one network namespace, reached over a single
// long-lived generic netlink socket.
type kernel struct {
	// mu serialises requests: moby/ipvs sends and then reads replies on one
	// socket, skipping replies with another sequence number, so two
	// goroutines sharing the socket would eat each other's answers.
	mu     sync.Mutex
	handle *mobyipvs.Handle
	// dump reads the table (dump.go) and writes real servers in batches
	// (batch.go); handle does the single writes.
	dump *dumper
	// table reads every real server at once (proctable.go); nil when
	// /proc/net/ip_vs could not be opened, and the reads go one virtual
	// server at a time; tableErr says why, for every read that falls
	// back (the proxier reports it).
	table    *procTable
	tableErr error
}

var (
	_ Interface        = (*kernel)(nil)
	_ RealServerWriter = (*kernel)(nil)
)

// New opens the IPVS table of the current network namespace. It fails with
// ErrUnsupported when the kernel has no IPVS (module ip_vs not loaded).
func New() (Interface, error) { return open(0) }

// NewInNamespace opens the IPVS table of the network namespace ns. The
// handle may be closed once NewInNamespace returns.
func NewInNamespace(ns netns.NsHandle) (Interface, error) {
	return open(int(ns))
}

// open opens the table of the namespace whose file descriptor is nsFD, or
// of the current one when nsFD is 0.
func open(nsFD int) (*kernel, error) {
	// Look the family up first: moby/ipvs resolves it once per process and,
	// when that fails, keeps family 0 and sends every later request as a
	// netlink no-op that the kernel acknowledges, so nothing would fail.
	family, err := ipvsFamily()
	if err != nil {
		return nil, err
	}
	routeLogrusToKlog()
	nsPath := ""
	if nsFD > 0 {
		nsPath = fmt.Sprintf("/proc/self/fd/%d", nsFD)
	}
	h, err := mobyipvs.New(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open IPVS netlink socket: %w", err)
	}
	d, err := dialDumper(nsFD, family)
	if err != nil {
		h.Close()
		return nil, err
	}
	// Once per adapter, at the default level: without the table a full
	// re-check at 10,000 Services takes twice as long, and an operator
	// should be able to see why (a container without /proc/net).
	table, tableErr := openProcTable(nsFD)
	if tableErr != nil {
		klog.InfoS("Real servers will be read one virtual server at a time", "err", tableErr)
	}
	return &kernel{handle: h, dump: d, table: table, tableErr: tableErr}, nil
}

// ipvsFamily is the number of the generic netlink family "IPVS", or
// ErrUnsupported when it is not registered (families are global, not per
// namespace).
func ipvsFamily() (uint16, error) {
	h, err := netlink.NewHandle(unix.NETLINK_GENERIC)
	if err != nil {
		return 0, fmt.Errorf("open generic netlink socket: %w", err)
	}
	defer h.Close()
	f, err := h.GenlFamilyGet("IPVS")
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, fmt.Errorf("generic netlink family IPVS not registered (is module ip_vs loaded?): %w", ErrUnsupported)
		}
		return 0, fmt.Errorf("look up generic netlink family IPVS: %w", err)
	}
	return f.ID, nil
}

var errClosed = errors.New("IPVS handle closed")

func (k *kernel) lock() (*mobyipvs.Handle, error) {
	k.mu.Lock()
	if k.handle == nil {
		k.mu.Unlock()
		return nil, errClosed
	}
	return k.handle, nil
}

func (k *kernel) VirtualServers() ([]VirtualServer, error) {
	if _, err := k.lock(); err != nil {
		return nil, err
	}
	defer k.mu.Unlock()
	out, err := k.dump.virtualServers()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	return out, nil
}

func (k *kernel) AddVirtualServer(vs VirtualServer) error {
	vs, err := checkVirtualServer(vs)
	if err != nil {
		return fmt.Errorf("add virtual server %s: %w", vs.VirtualServerKey, err)
	}
	h, err := k.lock()
	if err != nil {
		return err
	}
	defer k.mu.Unlock()
	if err := h.NewService(toService(vs)); err != nil {
		return fmt.Errorf("add virtual server %s: %w", vs.VirtualServerKey, serviceError(err))
	}
	return nil
}

func (k *kernel) UpdateVirtualServer(vs VirtualServer) error {
	vs, err := checkVirtualServer(vs)
	if err != nil {
		return fmt.Errorf("update virtual server %s: %w", vs.VirtualServerKey, err)
	}
	h, err := k.lock()
	if err != nil {
		return err
	}
	defer k.mu.Unlock()
	if err := h.UpdateService(toService(vs)); err != nil {
		return fmt.Errorf("update virtual server %s: %w", vs.VirtualServerKey, serviceError(err))
	}
	return nil
}

func (k *kernel) DeleteVirtualServer(key VirtualServerKey) error {
	key, err := key.canonical()
	if err != nil {
		return fmt.Errorf("delete virtual server %s: %w", key, err)
	}
	h, err := k.lock()
	if err != nil {
		return err
	}
	defer k.mu.Unlock()
	if err := h.DelService(toService(VirtualServer{VirtualServerKey: key})); err != nil {
		return fmt.Errorf("delete virtual server %s: %w", key, serviceError(err))
	}
	return nil
}

// RealServers asks for the virtual server first: the kernel's destination
// dump answers an unknown one with an empty list, not an error, and
// ErrNotFound must tell the two apart.
func (k *kernel) RealServers(key VirtualServerKey) ([]RealServer, error) {
	return k.listRealServers(key, true, nil)
}

// ListedRealServers is the destination dump alone: a virtual server that
// does not exist answers an empty list.
func (k *kernel) ListedRealServers(key VirtualServerKey, into []RealServer) ([]RealServer, error) {
	if into == nil {
		into = []RealServer{}
	}
	return k.listRealServers(key, false, into)
}

// listRealServers puts the list in into's room, or (into nil) in a new
// slice of its length.
func (k *kernel) listRealServers(key VirtualServerKey, askServiceFirst bool, into []RealServer) ([]RealServer, error) {
	key, err := key.canonical()
	if err != nil {
		return nil, fmt.Errorf("list real servers of %s: %w", key, err)
	}
	h, err := k.lock()
	if err != nil {
		return nil, err
	}
	defer k.mu.Unlock()
	if askServiceFirst {
		if _, err := h.GetService(toService(VirtualServer{VirtualServerKey: key})); err != nil {
			return nil, fmt.Errorf("list real servers of %s: %w", key, serviceError(err))
		}
	}
	out, err := k.dump.realServers(key, into)
	if err != nil {
		return nil, fmt.Errorf("list real servers of %s: %w", key, destinationError(err))
	}
	sortRealServers(out)
	return out, nil
}

func (k *kernel) AddRealServer(vs VirtualServerKey, rs RealServer) error {
	vs, rs, err := checkRealServer(vs, rs)
	if err != nil {
		return fmt.Errorf("add real server %s to %s: %w", rs.RealServerKey, vs, err)
	}
	h, err := k.lock()
	if err != nil {
		return err
	}
	defer k.mu.Unlock()
	if err := h.NewDestination(toService(VirtualServer{VirtualServerKey: vs}), toDestination(rs)); err != nil {
		return fmt.Errorf("add real server %s to %s: %w", rs.RealServerKey, vs, destinationError(err))
	}
	return nil
}

// UpdateRealServer changes only the weight. IPVS has no "change the address
// of a destination": a real server that moves is a delete plus an add.
func (k *kernel) UpdateRealServer(vs VirtualServerKey, rs RealServer) error {
	vs, rs, err := checkRealServer(vs, rs)
	if err != nil {
		return fmt.Errorf("update real server %s of %s: %w", rs.RealServerKey, vs, err)
	}
	h, err := k.lock()
	if err != nil {
		return err
	}
	defer k.mu.Unlock()
	if err := h.UpdateDestination(toService(VirtualServer{VirtualServerKey: vs}), toDestination(rs)); err != nil {
		return fmt.Errorf("update real server %s of %s: %w", rs.RealServerKey, vs, destinationError(err))
	}
	return nil
}

func (k *kernel) DeleteRealServer(vs VirtualServerKey, key RealServerKey) error {
	vs, key, err := checkRealServerKey(vs, key)
	if err != nil {
		return fmt.Errorf("delete real server %s of %s: %w", key, vs, err)
	}
	h, err := k.lock()
	if err != nil {
		return err
	}
	defer k.mu.Unlock()
	d := toDestination(RealServer{RealServerKey: key})
	if err := h.DelDestination(toService(VirtualServer{VirtualServerKey: vs}), d); err != nil {
		return fmt.Errorf("delete real server %s of %s: %w", key, vs, destinationError(err))
	}
	return nil
}

// SetTimeouts uses IPVS_CMD_SET_CONFIG, where the kernel treats a zero
// value as "leave unchanged", matching Timeouts' contract.
func (k *kernel) SetTimeouts(t Timeouts) error {
	if err := checkTimeouts(t); err != nil {
		return fmt.Errorf("set IPVS timeouts: %w", err)
	}
	h, err := k.lock()
	if err != nil {
		return err
	}
	defer k.mu.Unlock()
	c := &mobyipvs.Config{TimeoutTCP: t.TCP, TimeoutTCPFin: t.TCPFin, TimeoutUDP: t.UDP}
	if err := h.SetConfig(c); err != nil {
		return fmt.Errorf("set IPVS timeouts: %w", err)
	}
	return nil
}

// currentTimeouts reads the timeouts back (used by the adapter tests).
func (k *kernel) currentTimeouts() (Timeouts, error) {
	h, err := k.lock()
	if err != nil {
		return Timeouts{}, err
	}
	defer k.mu.Unlock()
	c, err := h.GetConfig()
	if err != nil {
		return Timeouts{}, fmt.Errorf("get IPVS timeouts: %w", err)
	}
	return Timeouts{TCP: c.TimeoutTCP, TCPFin: c.TimeoutTCPFin, UDP: c.TimeoutUDP}, nil
}

func (k *kernel) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.handle != nil {
		k.handle.Close()
		k.dump.Close()
		k.table.close()
		k.handle = nil
	}
	return nil
}

// serviceError maps the errno of a command naming a virtual server. In
// net/netfilter/ipvs/ip_vs_ctl.c: NEW_SERVICE on an existing one is EEXIST,
// any other command on a missing one ESRCH, and an unknown scheduler ENOENT
// (after request_module("ip_vs_<name>") failed).
func serviceError(err error) error {
	switch {
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("%w (%w)", ErrExists, err)
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("%w (%w)", ErrNotFound, err)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w (%w)", ErrNoScheduler, err)
	}
	return err
}

// destinationError maps the errno of a command naming a real server: ESRCH
// when its virtual server is missing, ENOENT when the real server is,
// EEXIST when adding one that is present.
func destinationError(err error) error {
	switch {
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("%w (%w)", ErrExists, err)
	case errors.Is(err, unix.ESRCH), errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w (%w)", ErrNotFound, err)
	}
	return err
}

// toService builds moby's service; vs must be canonical. The netmask is the
// whole address (IPv4 0xffffffff, IPv6 prefix length 128), as kube-proxy
// sends it; the kernel only uses it for persistence templates.
func toService(vs VirtualServer) *mobyipvs.Service {
	s := &mobyipvs.Service{
		Address:       vs.Address.AsSlice(),
		Protocol:      uint16(vs.Protocol),
		Port:          vs.Port,
		SchedName:     vs.Scheduler,
		AddressFamily: unix.AF_INET,
		Netmask:       0xffffffff,
	}
	if vs.Address.Is6() {
		s.AddressFamily = unix.AF_INET6
		s.Netmask = 128
	}
	if vs.PersistenceTimeout > 0 {
		s.Flags = flagPersistent
		s.Timeout = uint32(vs.PersistenceTimeout / time.Second)
	}
	s.Flags |= uint32(vs.SchedulerFlags & schedulerFlagMask)
	return s
}

// toDestination always asks for masquerading (NAT) forwarding.
func toDestination(rs RealServer) *mobyipvs.Destination {
	d := &mobyipvs.Destination{
		Address:         rs.Address.AsSlice(),
		Port:            rs.Port,
		Weight:          int(rs.Weight),
		ConnectionFlags: mobyipvs.ConnectionFlagMasq,
		AddressFamily:   unix.AF_INET,
	}
	if rs.Address.Is6() {
		d.AddressFamily = unix.AF_INET6
	}
	return d
}
