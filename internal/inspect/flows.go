package inspect

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// FlowList is `inspect conntrack -o json|yaml`.
type FlowList struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Flows      []ServiceFlow `json:"flows"`
}

// ServiceFlow is one conntrack entry of a virtual server.
type ServiceFlow struct {
	Service       string `json:"service,omitempty"`
	VirtualServer string `json:"virtualServer"`
	Protocol      string `json:"protocol"`
	// Original is the tuple the client sent, Reply the one the endpoint
	// answers with (after IPVS's DNAT, and SNAT when masqueraded).
	OriginalSource      string `json:"originalSource"`
	OriginalDestination string `json:"originalDestination"`
	ReplySource         string `json:"replySource"`
	ReplyDestination    string `json:"replyDestination"`
	State               string `json:"state"`
	TimeoutSeconds      int    `json:"timeoutSeconds"`
}

// ServiceFlows are the flows whose original destination is one of the
// report's virtual servers (after --service/--vip filtering).
func ServiceFlows(r Report, flows []conntrack.Flow) FlowList {
	out := FlowList{APIVersion: APIVersion, Kind: "FlowList", Flows: []ServiceFlow{}}
	byKey := map[ipvs.VirtualServerKey]VirtualServer{}
	for _, v := range r.VirtualServers {
		byKey[v.Key()] = v
	}
	for _, f := range flows {
		key := ipvs.VirtualServerKey{Protocol: ipvs.Protocol(f.Protocol), Address: f.OrigDst.Addr().Unmap(), Port: f.OrigDst.Port()}
		v, ok := byKey[key]
		if !ok {
			continue
		}
		service := v.Service
		if v.PortName != "" {
			service += ":" + v.PortName
		}
		out.Flows = append(out.Flows, ServiceFlow{
			Service: service, VirtualServer: key.String(), Protocol: key.Protocol.String(),
			OriginalSource: f.OrigSrc.String(), OriginalDestination: f.OrigDst.String(),
			ReplySource: f.ReplySrc.String(), ReplyDestination: f.ReplyDst.String(),
			State: f.State, TimeoutSeconds: int(f.Timeout.Seconds()),
		})
	}
	slices.SortFunc(out.Flows, func(a, b ServiceFlow) int {
		return strings.Compare(a.VirtualServer+" "+a.OriginalSource, b.VirtualServer+" "+b.OriginalSource)
	})
	return out
}

// WriteFlows renders the flows as a table.
func WriteFlows(w io.Writer, l FlowList) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tVIRTUAL SERVER\tORIGINAL\tREPLY\tSTATE\tTIMEOUT")
	for _, f := range l.Flows {
		fmt.Fprintf(tw, "%s\t%s\t%s -> %s\t%s -> %s\t%s\t%ds\n", dash(f.Service), f.VirtualServer,
			f.OriginalSource, f.OriginalDestination, f.ReplySource, f.ReplyDestination, dash(f.State), f.TimeoutSeconds)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d flows\n", len(l.Flows))
}
