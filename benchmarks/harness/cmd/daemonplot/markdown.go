package main

import (
	"fmt"
	"slices"
	"strings"
)

// reference is the side the goals are ratios against: the mode upstream tells IPVS users to
// move to.
const reference = "kube-proxy-nftables"

// sideOrder puts ipvsproxy first and kube-proxy's modes after it, nftables first.
var sideOrder = []string{"ipvsproxy", "kube-proxy-nftables", "kube-proxy-iptables", "kube-proxy-ipvs", "kube-proxy"}

func orderOf(side string) int {
	if i := slices.Index(sideOrder, side); i >= 0 {
		return i
	}
	return len(sideOrder)
}

func sorted(all map[sample]figures) []figures {
	var fs []figures
	for _, f := range all {
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b figures) int {
		if a.Services != b.Services {
			return a.Services - b.Services
		}
		if d := orderOf(a.Side) - orderOf(b.Side); d != 0 {
			return d
		}
		return strings.Compare(a.Side, b.Side)
	})
	return fs
}

func num(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%g", *v)
}

// markdown is the run's tables: the figures, the big Service, and the ratios with their goals.
func markdown(all map[sample]figures) string {
	var b strings.Builder
	fs := sorted(all)
	b.WriteString("| Services × 10 | side | peak RSS MiB | ready s | first connection s | one endpoint change s (seen by) | its network programming s | cold sync s | periodic sync s (kind) | endpoint changes: n, p50 / p99 s (mean) | CPU s |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range fs {
		side := f.Side
		if !f.OK {
			side += fmt.Sprintf(" (not ready after %s s)", num(f.TimedOutAfter))
		}
		change := num(f.EndpointChange)
		if f.SeenBy != "" && f.EndpointChange != nil {
			change += " (" + f.SeenBy + ")"
		}
		periodic := num(f.FullCheck)
		if f.PeriodicKind != "" && f.FullCheck != nil {
			periodic += " (" + f.PeriodicKind + ")"
		}
		if f.RecheckTable != nil && f.RecheckDumped != nil {
			periodic += fmt.Sprintf(" [read: %d from the table, %d dumped]", *f.RecheckTable, *f.RecheckDumped)
		}
		ser := "—"
		if s := f.Series; s != nil {
			ser = fmt.Sprintf("%d, %s / %s (%s)", s.Count, num(s.P50), num(s.P99), num(s.Mean))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f.Services, side, num(f.PeakRSS), num(f.Ready), num(f.Connect),
			change, num(f.NetworkProgramming), num(f.ColdSync), periodic, ser, num(f.CPU))
	}
	var bigs []figures
	for _, f := range fs {
		if f.Big != nil {
			bigs = append(bigs, f)
		}
	}
	if len(bigs) > 0 {
		b.WriteString("\nOne more Service of many endpoints (slices of 100) written while each side ran beside the Services above; one endpoint added to bench/svc-0 when half the slices were written:\n\n")
		b.WriteString("| Services × 10 | side | endpoints | slices written in s | first write to all in the kernel s | after the last write s | the other Service's change s (kernel) | its network programming s | peak RSS MiB meanwhile | CPU s meanwhile |\n")
		b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, f := range bigs {
			g := f.Big
			if g.Skipped != "" {
				fmt.Fprintf(&b, "| %d | %s | — | %s | | | | | | |\n", f.Services, f.Side, g.Skipped)
				continue
			}
			programmed := num(g.Programmed)
			if g.Programmed == nil {
				programmed = fmt.Sprintf("not finished after %s (%d in the kernel)", num(g.NotProgrammedAfter), g.InKernel)
			}
			np := "—"
			if g.TouchNP != nil && g.TouchNP.Count > 0 {
				np = num(g.TouchNP.Mean)
			}
			fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", f.Services, f.Side, g.Endpoints, num(g.Writes), programmed,
				num(g.AfterLastWrite), num(g.Touch), np, num(g.PeakRSS), num(g.CPU))
		}
	}
	ratios := ratioRows(all)
	if len(ratios) > 0 {
		b.WriteString("\nipvsproxy against kube-proxy's nftables mode, same boot (only same-boot ratios mean anything under emulation):\n\n")
		b.WriteString("| Services × 10 | figure | ipvsproxy | kube-proxy-nftables | ratio | goal |\n| --- | --- | --- | --- | --- | --- |\n")
		b.WriteString(strings.Join(ratios, ""))
	}
	return b.String()
}

// ratioRows compares ipvsproxy with the reference at each size both measured.
func ratioRows(all map[sample]figures) []string {
	var sizes []int
	for s := range all {
		if s.side == "ipvsproxy" && !slices.Contains(sizes, s.services) {
			sizes = append(sizes, s.services)
		}
	}
	slices.Sort(sizes)
	var rows []string
	for _, n := range sizes {
		ours, okO := all[sample{"ipvsproxy", n}]
		theirs, okT := all[sample{reference, n}]
		if !okO || !okT {
			continue
		}
		add := func(name, goal string, o, t *float64) {
			if o == nil || t == nil || *t == 0 {
				return
			}
			rows = append(rows, fmt.Sprintf("| %d | %s | %g | %g | %.2f | %s |\n", n, name, *o, *t, *o / *t, goal))
		}
		if ours.OK && theirs.OK {
			add("ready s", "≤ 0.5", ours.Ready, theirs.Ready)
			add("cold sync s", "", ours.ColdSync, theirs.ColdSync)
		}
		add("peak RSS MiB", "≤ 0.5", ours.PeakRSS, theirs.PeakRSS)
		if ours.Series != nil && theirs.Series != nil {
			add("endpoint change p50 s (histogram)", "", ours.Series.P50, theirs.Series.P50)
			add("endpoint change p99 s (histogram)", "≤ 0.5, and ≤ 1 s", ours.Series.P99, theirs.Series.P99)
		}
		add("CPU s", "", ours.CPU, theirs.CPU)
		if ours.Big != nil && theirs.Big != nil {
			add("Service of 100,000 endpoints programmed s", "≤ 0.5", ours.Big.Programmed, theirs.Big.Programmed)
			add("peak RSS with it MiB", "", ours.Big.PeakRSS, theirs.Big.PeakRSS)
		}
	}
	return rows
}
