package main

import (
	"fmt"
	"slices"
	"strings"
)

const (
	ours      = "ipvsproxy"
	reference = "kube-proxy-nftables"
	baseline  = "no-proxy"
)

var sideOrder = []string{baseline, ours, reference, "kube-proxy-iptables", "kube-proxy-ipvs"}

func orderOf(side string) int {
	if i := slices.Index(sideOrder, side); i >= 0 {
		return i
	}
	return len(sideOrder)
}

func num(v *float64, prec int) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.*f", prec, *v)
}

func sizes(all map[key]round) []int {
	var ns []int
	for k := range all {
		if !slices.Contains(ns, k.services) {
			ns = append(ns, k.services)
		}
	}
	slices.Sort(ns)
	return ns
}

func rounds(all map[key]round, table string) []round {
	var rs []round
	for k, r := range all {
		if k.table == table {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b round) int {
		if a.Services != b.Services {
			return a.Services - b.Services
		}
		if d := orderOf(a.Side) - orderOf(b.Side); d != 0 {
			return d
		}
		return strings.Compare(a.Side, b.Side)
	})
	return rs
}

// markdown is the run's tables.
func markdown(all map[key]round) string {
	var b strings.Builder
	for _, table := range []string{"empty", "held"} {
		rs := rounds(all, table)
		if len(rs) == 0 {
			continue
		}
		if table == "empty" {
			b.WriteString("Connection tables empty (TCP connect p50 / p99 ms, each over its count of connections; the no-proxy row is pod → pod and outside → pod, no Service):\n\n")
		} else {
			b.WriteString("\nWith connections held through the side's own Service (conntrack and, for IPVS, its connection table near full):\n\n")
		}
		head := "| Services × 10 | side |"
		sep := "| --- | --- |"
		for _, p := range paths {
			head += " " + p.title + " |"
			sep += " --- |"
		}
		head += " new connections/s | guest CPU ms/connection | iperf3 Gbit/s | UDP exchanges/s |"
		sep += " --- | --- | --- | --- |"
		if table == "held" {
			head += " held / conntrack entries / IPVS connections |"
			sep += " --- |"
		}
		b.WriteString(head + "\n" + sep + "\n")
		for _, r := range rs {
			fmt.Fprintf(&b, "| %d | %s |", r.Services, r.Side)
			for _, p := range paths {
				c := r.Connect[p.key]
				if c == nil {
					b.WriteString(" — |")
					continue
				}
				cell := fmt.Sprintf(" %s / %s", num(c.P50, 3), num(c.P99, 3))
				if c.Failed > 0 || c.Over1s > 0 {
					cell += fmt.Sprintf(" (%d failed, %d over 1 s)", c.Failed, c.Over1s)
				}
				b.WriteString(cell + " |")
			}
			var cps, cpu, udps *float64
			if r.Rate != nil {
				cps, cpu = r.Rate.PerSecond, r.Rate.CPUPerConn
			}
			if r.UDP != nil {
				udps = r.UDP.PerSecond
			}
			var gbit *float64
			if r.IperfBits != nil {
				g := *r.IperfBits / 1e9
				gbit = &g
			}
			fmt.Fprintf(&b, " %s | %s | %s | %s |", num(cps, 0), num(cpu, 3), num(gbit, 2), num(udps, 0))
			if table == "held" {
				fmt.Fprintf(&b, " %s / %s / %s |", intOr(r.Held), intOr(r.Conntrack), intOr(r.IPVSConns))
			}
			b.WriteString("\n")
		}
	}
	if rows := ratioRows(all); len(rows) > 0 {
		b.WriteString("\nipvsproxy against kube-proxy's nftables mode, same boot (only same-boot ratios mean anything under emulation; the goal: every latency ≤ 1, every rate ≥ 1):\n\n")
		b.WriteString("| Services × 10 | table | figure | ipvsproxy | kube-proxy-nftables | ratio | goal met |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		b.WriteString(strings.Join(rows, ""))
	}
	if rows := slopeRows(all); len(rows) > 0 {
		ns := sizes(all)
		fmt.Fprintf(&b, "\nHow each figure moves from %d to %d Services: each divided by the no-proxy baseline of its own boot (so that boot-to-boot emulation speed cancels), the larger size's over the smaller's (1.00 is flat):\n\n", ns[0], ns[len(ns)-1])
		b.WriteString("| side | figure | at the smallest ÷ no proxy | at the largest ÷ no proxy | slope |\n| --- | --- | --- | --- | --- |\n")
		b.WriteString(strings.Join(rows, ""))
	}
	return b.String()
}

func intOr(v *int) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprint(*v)
}

func ratioRows(all map[key]round) []string {
	var rows []string
	for _, n := range sizes(all) {
		for _, table := range []string{"empty", "held"} {
			o, okO := all[key{ours, n, table}]
			t, okT := all[key{reference, n, table}]
			if !okO || !okT {
				continue
			}
			for _, f := range figures {
				a, b := f.value(o), f.value(t)
				if a == nil || b == nil || *b == 0 {
					continue
				}
				r := *a / *b
				met := r <= 1
				if f.higherIsBetter {
					met = r >= 1
				}
				rows = append(rows, fmt.Sprintf("| %d | %s | %s | %.3f | %.3f | %.2f | %s |\n", n, table, f.title, *a, *b, r, map[bool]string{true: "yes", false: "no"}[met]))
			}
		}
	}
	return rows
}

// slopeRows: the empty-table figures at the smallest and the largest size, each over the
// no-proxy baseline measured in the same boot.
func slopeRows(all map[key]round) []string {
	ns := sizes(all)
	if len(ns) < 2 {
		return nil
	}
	lo, hi := ns[0], ns[len(ns)-1]
	bLo, okLo := all[key{baseline, lo, "empty"}]
	bHi, okHi := all[key{baseline, hi, "empty"}]
	if !okLo || !okHi {
		return nil
	}
	var sides []string
	for k := range all {
		if k.side != baseline && !slices.Contains(sides, k.side) {
			sides = append(sides, k.side)
		}
	}
	slices.SortFunc(sides, func(a, b string) int { return orderOf(a) - orderOf(b) })
	var rows []string
	for _, side := range sides {
		rLo, ok1 := all[key{side, lo, "empty"}]
		rHi, ok2 := all[key{side, hi, "empty"}]
		if !ok1 || !ok2 {
			continue
		}
		for _, f := range figures {
			a, b, c, d := f.value(rLo), f.value(bLo), f.value(rHi), f.value(bHi)
			if a == nil || b == nil || c == nil || d == nil || *b == 0 || *d == 0 || *a == 0 {
				continue
			}
			nLo, nHi := *a / *b, *c / *d
			rows = append(rows, fmt.Sprintf("| %s | %s | %.2f | %.2f | %.2f |\n", side, f.title, nLo, nHi, nHi/nLo))
		}
	}
	return rows
}
