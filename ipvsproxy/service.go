package ipvsproxy

import (
	"math"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Service is what the proxier keeps of a v1.Service: the daemon's informer
// cache and the tracker hold these, not the API objects. Every node caches
// every Service of the cluster, and a decoded v1.Service held about 1 KB
// after trimming (a 592-byte struct, and an allocation per string, slice,
// map and pointer); this holds the fields every Service has in one struct,
// the cluster IPs parsed, the ports in one array, and what few Services
// have behind one pointer: 976 → 408 bytes in BenchmarkCachedServiceMemory.
// Nothing is lost
// that a reader uses: an address that is not in its canonical form is kept
// as written, so it is reported as before, and ToService gives back the API
// object's kept fields.
//
// It is never written after CompactService builds it: the cache and the
// tracker share it.
type Service struct {
	Namespace, Name string
	// identity holds the UID and the resource version the informer's store
	// reads.
	identity objectIdentity
	// clusterIPs are spec.clusterIPs (spec.clusterIP when the list is
	// empty), unless one is not kept as an address: then rare's texts.
	clusterIPs []netip.Addr
	Ports      []servicePort
	// rare holds what few Services have, nil when the Service has none of
	// it: one pointer instead of six fields in every Service.
	rare *rareService
	// created is metadata.creationTimestamp (Created).
	created             keptTime
	HealthCheckNodePort int32
	// The spec's fields of a few valid values, each as its index among
	// them (Type, ExternalTrafficPolicy, SessionAffinity,
	// internalTrafficPolicy): a byte where a string took 16.
	serviceType, externalPolicy, affinity, internalPolicy keptEnum
	// hasInternalTrafficPolicy says spec.internalTrafficPolicy is set.
	hasInternalTrafficPolicy bool
	// headless is spec.clusterIP "None"; noneListed says spec.clusterIPs
	// was ["None"] (kept as no address).
	headless, noneListed bool
}

// Type is spec.type as written, "" when unset.
func (s *Service) Type() v1.ServiceType {
	return v1.ServiceType(s.serviceType.text(serviceTypes, s.rare, enumServiceType))
}

// ExternalTrafficPolicy is spec.externalTrafficPolicy as written, "" when
// unset.
func (s *Service) ExternalTrafficPolicy() v1.ServiceExternalTrafficPolicy {
	return v1.ServiceExternalTrafficPolicy(s.externalPolicy.text(trafficPolicies, s.rare, enumExternalPolicy))
}

// SessionAffinity is spec.sessionAffinity as written, "" when unset.
func (s *Service) SessionAffinity() v1.ServiceAffinity {
	return v1.ServiceAffinity(s.affinity.text(affinities, s.rare, enumAffinity))
}

// internalTrafficPolicy is spec.internalTrafficPolicy when
// hasInternalTrafficPolicy.
func (s *Service) internalTrafficPolicy() v1.ServiceInternalTrafficPolicy {
	return v1.ServiceInternalTrafficPolicy(s.internalPolicy.text(trafficPolicies, s.rare, enumInternalPolicy))
}

// Created is metadata.creationTimestamp.
func (s *Service) Created() time.Time { return s.created.time() }

// keptEnum is a field of a few valid values: 0 for "", i+1 for the i-th
// valid one, keptOther for any other value, which rare keeps as written
// (rareService.otherEnums).
type keptEnum uint8

const keptOther keptEnum = 255

// The fields whose other values rareService.otherEnums keeps.
const (
	enumServiceType = iota
	enumExternalPolicy
	enumAffinity
	enumInternalPolicy
	enumFields
)

// keepEnum keeps field (an enum… index) of s as written, valid being its
// valid values.
func (s *Service) keepEnum(field int, text string, valid []string) keptEnum {
	if text == "" {
		return 0
	}
	if i := slices.Index(valid, text); i >= 0 {
		return keptEnum(i + 1)
	}
	r := s.rareParts()
	if r.otherEnums == nil {
		r.otherEnums = &[enumFields]string{}
	}
	r.otherEnums[field] = text
	return keptOther
}

func (e keptEnum) text(valid []string, r *rareService, field int) string {
	switch e {
	case 0:
		return ""
	case keptOther:
		return r.otherEnums[field]
	}
	return valid[e-1]
}

// keptTime is a time in Unix nanoseconds, in the local time zone as the
// API machinery decodes one; keptZero for the zero time. 8 bytes where a
// time.Time took 24.
type keptTime int64

const keptZero = keptTime(math.MinInt64)

func keepTime(t time.Time) keptTime {
	if t.IsZero() {
		return keptZero
	}
	return keptTime(t.UnixNano())
}

func (k keptTime) time() time.Time {
	if k == keptZero {
		return time.Time{}
	}
	return time.Unix(0, int64(k))
}

// servicePort is one port of a Service as written (no default applied: the
// builder reports a port without a protocol).
type servicePort struct {
	Name           string
	Protocol       v1.Protocol
	Port, NodePort int32
}

// rareService are the parts of a Service that few Services have.
type rareService struct {
	// clusterIPTexts are the cluster IPs as written when one of them is not
	// kept as an address (Service.clusterIPs is then nil).
	clusterIPTexts []string
	externalIPs    addressList
	sourceRanges   []string
	// ingress are the status's load balancer ingress points that have an
	// IP (the builder skips the rest).
	ingress []lbIngress
	// affinityTimeout is spec.sessionAffinityConfig.clientIP.timeoutSeconds
	// by how much of the path is set.
	affinityTimeout int32
	affinityConfig  affinityConfigForm
	// The scheduler annotations (scheduler_annotation.go), each set or not.
	scheduler, schedulerFlags       string
	hasScheduler, hasSchedulerFlags bool
	// otherEnums are the spec's fields of a few valid values that hold
	// another (keptEnum), as written.
	otherEnums *[enumFields]string
}

type lbIngress struct {
	IP     string
	IPMode *v1.LoadBalancerIPMode
}

// affinityConfigForm is how much of spec.sessionAffinityConfig's path to
// the ClientIP timeout is set.
type affinityConfigForm uint8

const (
	affinityConfigNone affinityConfigForm = iota
	affinityConfigEmpty
	affinityClientIPEmpty
	affinityTimeoutSet
)

func (s *Service) rareParts() *rareService {
	if s.rare == nil {
		s.rare = &rareService{}
	}
	return s.rare
}

// addressList is a list of addresses as written: parsed when every one is
// an IP address in its canonical form without a zone (so its text is
// a.String(), and a reader parsing it gets a back), else the texts.
type addressList struct {
	addrs []netip.Addr
	texts []string
}

func newAddressList(list []string) addressList {
	if len(list) == 0 {
		return addressList{}
	}
	addrs := make([]netip.Addr, len(list))
	for i, s := range list {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.String() != s {
			return addressList{texts: slices.Clone(list)}
		}
		addrs[i] = a
	}
	return addressList{addrs: addrs}
}

// strings is the list as written; nil when empty.
func (l addressList) strings() []string {
	if l.texts != nil {
		return slices.Clone(l.texts)
	}
	if len(l.addrs) == 0 {
		return nil
	}
	out := make([]string, len(l.addrs))
	for i, a := range l.addrs {
		out[i] = a.String()
	}
	return out
}

// parsed are the addresses that parse as IP addresses (netip.ParseAddr),
// unmapped, without repeats.
func (l addressList) parsed() []netip.Addr {
	var out []netip.Addr
	add := func(a netip.Addr) {
		if a = a.Unmap(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, a := range l.addrs {
		add(a)
	}
	for _, s := range l.texts {
		if a, err := netip.ParseAddr(s); err == nil {
			add(a)
		}
	}
	return out
}

// The Services' constant-valued strings: each Service shares these
// instead of holding its decoded copy.
var (
	serviceTypes           = []string{string(v1.ServiceTypeClusterIP), string(v1.ServiceTypeNodePort), string(v1.ServiceTypeLoadBalancer), string(v1.ServiceTypeExternalName)}
	trafficPolicies        = []string{string(v1.ServiceExternalTrafficPolicyCluster), string(v1.ServiceExternalTrafficPolicyLocal)}
	affinities             = []string{string(v1.ServiceAffinityNone), string(v1.ServiceAffinityClientIP)}
	protocols              = []string{string(v1.ProtocolTCP), string(v1.ProtocolUDP), string(v1.ProtocolSCTP)}
	ipModeVIP, ipModeProxy = v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy
)

// Port names repeat across the Services of a cluster (http, https, grpc,
// metrics): the Services share one copy of each, up to a bound.
var portNames = &interner{max: 10_000}

// CompactService keeps what the proxier reads of svc. It is the one
// conversion: the daemon's informer transform makes every cached Service
// with it, and the tracker converts Services handed to it as API objects
// (tests, inspect).
func CompactService(svc *v1.Service) *Service {
	spec := &svc.Spec
	out := &Service{
		Namespace:           namespaces.internString(svc.Namespace),
		Name:                svc.Name,
		identity:            newIdentity(svc.UID, svc.ResourceVersion),
		created:             keepTime(svc.CreationTimestamp.Time),
		HealthCheckNodePort: spec.HealthCheckNodePort,
		headless:            spec.ClusterIP == v1.ClusterIPNone,
	}
	out.serviceType = out.keepEnum(enumServiceType, string(spec.Type), serviceTypes)
	out.externalPolicy = out.keepEnum(enumExternalPolicy, string(spec.ExternalTrafficPolicy), trafficPolicies)
	out.affinity = out.keepEnum(enumAffinity, string(spec.SessionAffinity), affinities)
	if p := spec.InternalTrafficPolicy; p != nil {
		out.internalPolicy, out.hasInternalTrafficPolicy = out.keepEnum(enumInternalPolicy, string(*p), trafficPolicies), true
	}
	ips := spec.ClusterIPs
	if len(ips) == 0 && spec.ClusterIP != "" {
		ips = []string{spec.ClusterIP}
	}
	if out.headless && len(ips) == 1 && ips[0] == v1.ClusterIPNone {
		out.noneListed, ips = len(spec.ClusterIPs) == 1, nil
	}
	if l := newAddressList(ips); l.texts != nil {
		out.rareParts().clusterIPTexts = l.texts
	} else {
		out.clusterIPs = l.addrs
	}
	if len(spec.Ports) > 0 {
		out.Ports = make([]servicePort, len(spec.Ports))
		for i, p := range spec.Ports {
			out.Ports[i] = servicePort{Name: portNames.internString(p.Name), Protocol: v1.Protocol(knownString(string(p.Protocol), protocols...)), Port: p.Port, NodePort: p.NodePort}
		}
	}
	if len(spec.ExternalIPs) > 0 {
		out.rareParts().externalIPs = newAddressList(spec.ExternalIPs)
	}
	if len(spec.LoadBalancerSourceRanges) > 0 {
		out.rareParts().sourceRanges = slices.Clone(spec.LoadBalancerSourceRanges)
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue
		}
		kept := lbIngress{IP: ing.IP}
		switch {
		case ing.IPMode == nil:
		case *ing.IPMode == ipModeVIP:
			kept.IPMode = &ipModeVIP
		case *ing.IPMode == ipModeProxy:
			kept.IPMode = &ipModeProxy
		default:
			kept.IPMode = ptrTo(*ing.IPMode)
		}
		out.rareParts().ingress = append(out.rareParts().ingress, kept)
	}
	if c := spec.SessionAffinityConfig; c != nil {
		r := out.rareParts()
		switch {
		case c.ClientIP == nil:
			r.affinityConfig = affinityConfigEmpty
		case c.ClientIP.TimeoutSeconds == nil:
			r.affinityConfig = affinityClientIPEmpty
		default:
			r.affinityConfig, r.affinityTimeout = affinityTimeoutSet, *c.ClientIP.TimeoutSeconds
		}
	}
	if v, ok := svc.Annotations[AnnotationScheduler]; ok {
		out.rareParts().scheduler, out.rareParts().hasScheduler = keptAnnotation(v), true
	}
	if v, ok := svc.Annotations[AnnotationSchedulerFlags]; ok {
		out.rareParts().schedulerFlags, out.rareParts().hasSchedulerFlags = keptAnnotation(v), true
	}
	return out
}

// maxKeptAnnotation is how much of a scheduler annotation every node keeps:
// a valid value is a few dozen bytes, and the API lets one be 256 KiB.
const maxKeptAnnotation = 256

// keptAnnotation is v, or past maxKeptAnnotation bytes its start, "…" and
// its length, which no valid value contains: a value that long is refused
// (the Service gets the default scheduler and a problem quoting its start),
// and the 256 KiB are not kept. The result is a new string: the decoded
// object's buffer is not kept alive by it.
func keptAnnotation(v string) string {
	if len(v) <= maxKeptAnnotation {
		return v
	}
	return truncate(v, maxKeptAnnotation)
}

// clusterIPList is the Service's cluster IPs as kept.
func (s *Service) clusterIPList() addressList {
	if s.rare != nil && s.rare.clusterIPTexts != nil {
		return addressList{texts: s.rare.clusterIPTexts}
	}
	return addressList{addrs: s.clusterIPs}
}

// GetObjectMeta is the Service's identity as metadata, so that
// meta.Accessor, and the informer's key functions and store with it, take
// the Service: namespace, name, UID and resource version. The store asks
// for it several times per event, so it carries nothing else; changing the
// result changes nothing of the Service.
func (s *Service) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.identity.UID(), ResourceVersion: s.identity.ResourceVersion()}
}

// UID is the Service's metadata.uid.
func (s *Service) UID() types.UID { return s.identity.UID() }

// ToService gives back the API object with what the Service kept, for
// BuildService and for a person reading it: spec.clusterIPs is listed
// (spec.clusterIP is "None" for a headless Service, else the list's first),
// and every list and pointer is the result's own.
func (s *Service) ToService() *v1.Service {
	out := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.identity.UID(), ResourceVersion: s.identity.ResourceVersion(),
			CreationTimestamp: metav1.Time{Time: s.Created()}},
		Spec: v1.ServiceSpec{
			Type:                  s.Type(),
			ExternalTrafficPolicy: s.ExternalTrafficPolicy(),
			SessionAffinity:       s.SessionAffinity(),
			HealthCheckNodePort:   s.HealthCheckNodePort,
			ClusterIPs:            s.clusterIPList().strings(),
		},
	}
	spec := &out.Spec
	if s.hasInternalTrafficPolicy {
		spec.InternalTrafficPolicy = ptrTo(s.internalTrafficPolicy())
	}
	switch {
	case s.headless:
		spec.ClusterIP = v1.ClusterIPNone
		if s.noneListed {
			spec.ClusterIPs = []string{v1.ClusterIPNone}
		}
	case len(spec.ClusterIPs) > 0 && spec.ClusterIPs[0] != v1.ClusterIPNone:
		// "None" listed first of a Service that is not headless is a bad
		// cluster IP, not a headless Service.
		spec.ClusterIP = spec.ClusterIPs[0]
	}
	if len(s.Ports) > 0 {
		spec.Ports = make([]v1.ServicePort, len(s.Ports))
		for i, p := range s.Ports {
			spec.Ports[i] = v1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort}
		}
	}
	r := s.rare
	if r == nil {
		return out
	}
	spec.ExternalIPs = r.externalIPs.strings()
	spec.LoadBalancerSourceRanges = slices.Clone(r.sourceRanges)
	for _, ing := range r.ingress {
		kept := v1.LoadBalancerIngress{IP: ing.IP}
		if ing.IPMode != nil {
			kept.IPMode = ptrTo(*ing.IPMode)
		}
		out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, kept)
	}
	switch r.affinityConfig {
	case affinityConfigEmpty:
		spec.SessionAffinityConfig = &v1.SessionAffinityConfig{}
	case affinityClientIPEmpty:
		spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{}}
	case affinityTimeoutSet:
		spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptrTo(r.affinityTimeout)}}
	}
	if r.hasScheduler || r.hasSchedulerFlags {
		out.Annotations = map[string]string{}
		if r.hasScheduler {
			out.Annotations[AnnotationScheduler] = r.scheduler
		}
		if r.hasSchedulerFlags {
			out.Annotations[AnnotationSchedulerFlags] = r.schedulerFlags
		}
	}
	return out
}
