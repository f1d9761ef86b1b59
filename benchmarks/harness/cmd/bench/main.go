// Command bench is the benchmark harness: it builds ipvsproxy-bench and
// kubeproxy-bench, runs them on each shape in alternating pairs (ours then
// theirs, theirs then ours, ...) so that machine noise hits both, each in a
// fresh network namespace (`unshare --net`), and writes the report:
// <out>/<date>-<host>.json, .md and one PNG per operation.
//
//	go run ./cmd/bench -services 1000,10000 -pairs 3 -out ../results
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/report"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
)

func main() {
	sizes := flag.String("services", "100", "comma-separated numbers of Services")
	endpoints := flag.Int("endpoints", 10, "endpoints per Service")
	pairs := flag.Int("pairs", 1, "ours/theirs process pairs per shape")
	repeats := flag.Int("repeats", 5, "repeats of each operation inside a process")
	anchor := flag.Bool("anchor", true, "also run kube-proxy's proxier (builds k8s.io/kubernetes: minutes when cold)")
	mix := flag.Bool("mix", false, "also run ipvsproxy on the mixed shape (10% UDP, 10% Local, dual-stack)")
	bound := flag.Bool("no-service-cidr", false, "also run the shape with ipvsproxy binding every cluster IP (no Service CIDR), beside kube-proxy: the like-for-like cold sync")
	fakeLink := flag.Bool("fake-link", false, "also run the bound shape with both sides' kube-ipvs0 on a fake (maps, no netlink): the proxier-only ratio")
	out := flag.String("out", "../results", "directory of the report")
	nice := flag.Int("nice", 0, "run the benchmark processes under nice -n N")
	tag := flag.String("tag", "", "suffix of the report's file names")
	merge := flag.String("merge", "", "comma-separated reports (.json) whose results join this one's (with -services \"\": only merge)")
	flag.Parse()

	bin, err := os.MkdirTemp("", "ipvsproxy-bench-")
	check(err)
	defer os.RemoveAll(bin)
	builds := []string{"ipvsproxy-bench"}
	if *anchor {
		builds = append(builds, "kubeproxy-bench")
	}
	if *sizes == "" {
		builds = nil
	}
	for _, b := range builds {
		t := time.Now()
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, b), "./cmd/"+b)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		check(cmd.Run())
		fmt.Fprintf(os.Stderr, "built %s in %.0fs\n", b, time.Since(t).Seconds())
	}

	host, _ := os.Hostname()
	rep := report.Report{Date: time.Now().UTC().Format(time.RFC3339), Host: host, CPUs: runtime.NumCPU(), Kernel: kernelRelease(),
		Pairs: *pairs, Repeats: *repeats}
	for _, f := range strings.Split(*merge, ",") {
		if f == "" {
			continue
		}
		var old report.Report
		b, err := os.ReadFile(f)
		check(err)
		check(json.Unmarshal(b, &old))
		rep.Results = append(rep.Results, old.Results...)
		rep.Pairs, rep.Repeats = max(rep.Pairs, old.Pairs), max(rep.Repeats, old.Repeats)
		rep.Notes = append(rep.Notes, fmt.Sprintf("results of %s (run %s, %d pair(s), %d repeats)", filepath.Base(f), old.Date, old.Pairs, old.Repeats))
	}
	var shapes []shape.Shape
	for _, f := range strings.Split(*sizes, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		check(err)
		shapes = append(shapes, shape.Shape{Services: n, Endpoints: *endpoints})
		if *mix {
			shapes = append(shapes, shape.Shape{Services: n, Endpoints: *endpoints, Mix: true})
		}
		if *bound {
			shapes = append(shapes, shape.Shape{Services: n, Endpoints: *endpoints, NoServiceCIDR: true})
		}
		if *fakeLink {
			shapes = append(shapes, shape.Shape{Services: n, Endpoints: *endpoints, NoServiceCIDR: true, FakeLink: true})
		}
	}
	check(os.MkdirAll(*out, 0o755))
	base := filepath.Join(*out, time.Now().UTC().Format("2006-01-02")+"-"+host+*tag)
	if len(shapes) == 0 {
		check(rep.Write(base))
	}
	for _, s := range shapes {
		t := time.Now()
		args := []string{"-services", strconv.Itoa(s.Services), "-endpoints", strconv.Itoa(s.Endpoints), "-repeats", strconv.Itoa(*repeats)}
		for i := 0; i < *pairs; i++ {
			sides := []string{"ipvsproxy-bench", "kubeproxy-bench"}
			if i%2 == 1 {
				sides[0], sides[1] = sides[1], sides[0]
			}
			for _, side := range sides {
				if side == "kubeproxy-bench" && (!*anchor || s.Mix) {
					continue // kube-proxy's single-stack proxier: base shape only
				}
				a := args
				if s.Mix {
					a = append(a, "-mix")
				}
				if s.NoServiceCIDR {
					a = append(a, "-no-service-cidr")
				}
				if s.FakeLink {
					a = append(a, "-fake-link")
				}
				r, err := runOne(filepath.Join(bin, side), a, *nice)
				check(err)
				rep.Results = append(rep.Results, r)
			}
		}
		fmt.Fprintf(os.Stderr, "%s: %s\n", s.Name(), rep.Progress(s.Name(), time.Since(t)))
		// After every shape, so a run stopped during a big shape keeps
		// the report of the smaller ones.
		check(rep.Write(base))
	}
	fmt.Fprintf(os.Stderr, "wrote %s.json, %s.md and the plots\n", base, base)
}

// runOne runs one benchmark process in a fresh network namespace.
func runOne(bin string, args []string, nice int) (shape.Result, error) {
	var r shape.Result
	argv := append([]string{"--net", "--", bin}, args...)
	name := "unshare"
	if nice != 0 {
		argv = append([]string{"-n", strconv.Itoa(nice), "unshare"}, argv...)
		name = "nice"
	}
	cmd := exec.Command(name, argv...)
	cmd.Env = append(os.Environ(), "IPVSPROXY_BENCH_NETNS=private")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("%s %v: %w", filepath.Base(bin), args, err)
	}
	return r, json.Unmarshal(stdout.Bytes(), &r)
}

func kernelRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
