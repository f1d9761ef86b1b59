package ipvs

// Unavailable stands in for the IPVS table of a kernel without IPVS (module
// ip_vs absent): every call fails with ErrUnsupported and Close succeeds.
// `ipvsproxy cleanup` uses it so that a node whose IPVS module is gone still
// gets its ipsets, iptables chains and kube-ipvs0 removed.
type Unavailable struct{}

var _ Interface = Unavailable{}

func (Unavailable) VirtualServers() ([]VirtualServer, error)           { return nil, ErrUnsupported }
func (Unavailable) AddVirtualServer(VirtualServer) error               { return ErrUnsupported }
func (Unavailable) UpdateVirtualServer(VirtualServer) error            { return ErrUnsupported }
func (Unavailable) DeleteVirtualServer(VirtualServerKey) error         { return ErrUnsupported }
func (Unavailable) RealServers(VirtualServerKey) ([]RealServer, error) { return nil, ErrUnsupported }
func (Unavailable) ListedRealServers(VirtualServerKey, []RealServer) ([]RealServer, error) {
	return nil, ErrUnsupported
}
func (Unavailable) AddRealServer(VirtualServerKey, RealServer) error { return ErrUnsupported }
func (Unavailable) UpdateRealServer(VirtualServerKey, RealServer) error {
	return ErrUnsupported
}
func (Unavailable) DeleteRealServer(VirtualServerKey, RealServerKey) error { return ErrUnsupported }
func (Unavailable) SetTimeouts(Timeouts) error                             { return ErrUnsupported }
func (Unavailable) Close() error                                           { return nil }
