package inspect

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/rules"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"sigs.k8s.io/yaml"
)

// Output formats of -o.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

// CheckFormat reports a plain error for an unknown -o value.
func CheckFormat(format string) error {
	switch format {
	case "", FormatTable, FormatJSON, FormatYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use table, json or yaml", format)
}

// Encode writes v as JSON or YAML (YAML is the JSON's conversion, so both
// carry the same field names).
func Encode(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the report: %w", err)
	}
	if format == FormatYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return fmt.Errorf("encode the report as YAML: %w", err)
		}
	} else {
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}

// TableOptions adjust the table.
type TableOptions struct {
	// Stats adds packet and byte counters.
	Stats bool
	// Rates, when set, are per-second connection rates by virtual server
	// and real server key text (--watch).
	Rates map[string]float64
}

// WriteTable renders the report the way kubectl would: one line per real
// server under its virtual server, then addresses, sets and sync status.
func WriteTable(w io.Writer, r Report, opt TableOptions) error {
	for _, warning := range r.Warnings {
		fmt.Fprintln(w, "warning:", warning)
	}
	if r.NamesFrom == "" {
		fmt.Fprintln(w, "note: unnamed kernel view (the daemon is not reachable and no --kubeconfig was given)")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "SERVICE\tTYPE\tVIRTUAL SERVER\tSCHED\tREAL SERVER\tWEIGHT\tACTIVE\tINACT\tCONNS\tFLOWS\tENDPOINT"
	if opt.Stats {
		head += "\tPKTS IN\tPKTS OUT\tBYTES IN\tBYTES OUT"
	}
	if opt.Rates != nil {
		head += "\tCONN/S"
	}
	fmt.Fprintln(tw, head)
	for _, v := range r.VirtualServers {
		service := v.Service
		if v.PortName != "" {
			service += ":" + v.PortName
		}
		if service == "" {
			service = "<" + v.Owner + ">"
		}
		typ := v.Type
		if v.LocalOnly {
			typ += ",Local"
		}
		if v.TopologyHints {
			typ += ",hints"
		}
		vsText := fmt.Sprintf("%s %s", v.Protocol, hostPort(v.Address, v.Port))
		sched := v.Scheduler
		if v.PersistenceSeconds > 0 {
			sched += fmt.Sprintf(" persist %ds", v.PersistenceSeconds)
		}
		state := presence(v.InKernel, v.Desired, r.NamesFrom != "" && v.Owner == "ipvsproxy")
		if state != "" {
			vsText += " " + state
		}
		first := true
		row := func(rs string, weight, active, inactive, conns, flows, endpoint string, st Stats, rate string) {
			if first {
				typ = dash(typ)
			}
			line := strings.Join([]string{service, typ, vsText, sched, rs, weight, active, inactive, conns, flows, endpoint}, "\t")
			if opt.Stats {
				line += fmt.Sprintf("\t%d\t%d\t%d\t%d", st.PacketsIn, st.PacketsOut, st.BytesIn, st.BytesOut)
			}
			if opt.Rates != nil {
				line += "\t" + rate
			}
			fmt.Fprintln(tw, line)
			service, typ, vsText, sched, first = "", "", "", "", false
		}
		if len(v.RealServers) == 0 {
			row("-", "", "", "", strconv.FormatUint(v.Stats.Connections, 10), strconv.Itoa(v.Flows), "no endpoint", v.Stats, rate(opt.Rates, vsText))
			continue
		}
		vsKey := vsText
		for _, rs := range v.RealServers {
			endpoint := rs.Condition
			if rs.Node != "" {
				endpoint += " on " + rs.Node
			}
			if !rs.DrainingUntil.IsZero() {
				endpoint += " until " + rs.DrainingUntil.UTC().Format(time.RFC3339)
			}
			if s := presence(rs.InKernel, rs.Desired, r.NamesFrom != "" && v.Owner == "ipvsproxy" && rs.Condition != snapshot.ConditionDraining); s != "" {
				endpoint += " " + s
			}
			weight := strconv.Itoa(rs.Weight)
			if rs.DesiredWeight != nil {
				weight += fmt.Sprintf(" (want %d)", *rs.DesiredWeight)
			}
			rsText := hostPort(rs.Address, rs.Port)
			row(rsText, weight, strconv.Itoa(rs.ActiveConnections), strconv.Itoa(rs.InactiveConnections),
				strconv.FormatUint(rs.Stats.Connections, 10), strconv.Itoa(rs.Flows), dash(strings.TrimSpace(endpoint)), rs.Stats, rate(opt.Rates, vsKey+" "+rsText))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	inKernel, desired := 0, 0
	for _, a := range r.Addresses {
		if a.InKernel {
			inKernel++
		}
		if a.Desired {
			desired++
		}
	}
	fmt.Fprintf(w, "\n%s: %d addresses bound", owned.DummyInterface, inKernel)
	if r.NamesFrom != "" {
		fmt.Fprintf(w, ", %d desired", desired)
	}
	if len(r.Routes) > 0 {
		var routes []string
		for _, rt := range r.Routes {
			text := rt.CIDR
			switch {
			case rt.InKernel && !rt.Desired && r.NamesFrom != "":
				text += " (not desired)"
			case !rt.InKernel:
				text += " (missing)"
			}
			routes = append(routes, text)
		}
		fmt.Fprintf(w, "; Service CIDRs routed local: %s", strings.Join(routes, ", "))
	}
	fmt.Fprintln(w)
	var sets []string
	for _, s := range r.Sets {
		text := fmt.Sprintf("%s %d", s.Name, s.Members)
		if s.DesiredMembers >= 0 && s.DesiredMembers != s.Members {
			text += fmt.Sprintf(" (want %d)", s.DesiredMembers)
		}
		sets = append(sets, text)
	}
	fmt.Fprintf(w, "ipsets: %s\n", dash(strings.Join(sets, ", ")))
	if st := r.Status; st != nil {
		fmt.Fprintf(w, "sync: last full %s, last partial %s, took %v; queued %d service and %d endpoint changes",
			ago(st.LastFullSync, r.Time), ago(st.LastPartialSync, r.Time), st.LastSyncDuration.Round(time.Millisecond), st.ServiceChangesQueued, st.EndpointChangesQueued)
		if st.NextSyncFull {
			fmt.Fprint(w, "; next sync is full")
		}
		fmt.Fprintln(w)
		if fr := st.LastFullRead; fr != nil {
			fmt.Fprintf(w, "last full read: real servers of %d virtual servers from /proc/net/ip_vs, %d one dump each", fr.FromTable, fr.Dumped)
			if fr.TableError != "" {
				fmt.Fprintf(w, " (the table: %s)", fr.TableError)
			}
			fmt.Fprintln(w)
		}
		if !st.DeletionsHeldSince.IsZero() {
			fmt.Fprintf(w, "deletions held since %s (%s): the Service default/kubernetes is absent, so the Service list is not believed; nothing is removed until it returns\n",
				st.DeletionsHeldSince.UTC().Format(time.RFC3339), ago(st.DeletionsHeldSince, r.Time))
		}
		for _, o := range st.Objects {
			if o.State == "done" {
				continue
			}
			line := fmt.Sprintf("%s %s", o.State, o.Object)
			if o.State == "error" && !o.Since.IsZero() {
				line += fmt.Sprintf(" since %s (%s)", o.Since.UTC().Format(time.RFC3339), ago(o.Since, r.Time))
			}
			if o.LastError != "" {
				line += ": " + o.LastError
			}
			if !o.NextRetry.IsZero() {
				line += "; next retry " + o.NextRetry.UTC().Format(time.RFC3339)
			}
			fmt.Fprintln(w, line)
		}
	}
	return nil
}

// WriteCheck renders --check's answer.
func WriteCheck(w io.Writer, c CheckResult) {
	for _, d := range c.Differences {
		fmt.Fprintln(w, d)
	}
	for _, d := range c.Foreign {
		fmt.Fprintf(w, "foreign %s (%s): not the proxier's, never touched\n", d.Object, d.Have)
	}
	if c.Agree {
		fmt.Fprintln(w, "the kernel agrees with the desired state")
	} else {
		fmt.Fprintf(w, "%d differences between the kernel and the desired state\n", len(c.Differences))
	}
}

// TraceReport is `inspect trace -o json|yaml`.
type TraceReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Packet     string `json:"packet"`
	rules.Trace
	// Kernel says whether the kernel holds what the trace relied on.
	Kernel []string `json:"kernel"`
}

// WriteTrace renders a trace as sentences.
func WriteTrace(w io.Writer, t TraceReport) {
	fmt.Fprintf(w, "packet: %s", t.Packet)
	if t.FromNode {
		fmt.Fprint(w, " (from this node)")
	}
	fmt.Fprintln(w)
	for i, s := range t.Steps {
		fmt.Fprintf(w, "%2d. %s: %s\n", i+1, s.Chain, s.Effect)
		if s.Rule != "" {
			fmt.Fprintf(w, "      %s\n", s.Rule)
		}
	}
	fmt.Fprintf(w, "verdict: %s: %s\n", t.Verdict, t.Reason)
	for _, rs := range t.RealServers {
		m := "not masqueraded"
		if rs.Masquerade {
			m = "masqueraded"
		}
		node := ""
		if rs.NodeName != "" {
			node = " on " + rs.NodeName
		}
		fmt.Fprintf(w, "  -> %s%s (%s): %s (%s)\n", rs.RealServerKey, node, rs.Condition, m, rs.MasqueradeReason)
	}
	for _, k := range t.Kernel {
		fmt.Fprintln(w, "kernel:", k)
	}
}

func rate(rates map[string]float64, key string) string {
	if rates == nil {
		return ""
	}
	return strconv.FormatFloat(rates[key], 'f', 1, 64)
}

// presence marks what only one side has, when names (the desired state)
// are known: "[missing]" from the kernel, "[extra]" in it.
func presence(inKernel, desired, named bool) string {
	switch {
	case !named:
		return ""
	case inKernel && !desired:
		return "[extra]"
	case !inKernel && desired:
		return "[missing]"
	}
	return ""
}

func hostPort(addr string, port uint16) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]:" + strconv.Itoa(int(port))
	}
	return addr + ":" + strconv.Itoa(int(port))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return now.Sub(t).Round(100*time.Millisecond).String() + " ago"
}
