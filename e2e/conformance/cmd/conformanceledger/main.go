// Command conformanceledger splits the conformance run into shards and keeps its ledger
// (package ledger says how). run.sh and status.sh call it:
//
//	conformanceledger specs DRYRUN_JUNIT                  the selected specs, sorted, one a line
//	conformanceledger shard -shard K[,K...]/N [-focus] DRYRUN_JUNIT
//	                                                      the shard's specs, or its ginkgo focus
//	conformanceledger append -ledger F -date D -commit C -cluster X -nodes M -shard S JUNIT...
//	                                                      each report's results, its pass named by
//	                                                      the report's directory
//	conformanceledger cause -ledger F -cluster X -commit C -spec NAME -note TEXT
//	                                                      why the spec's earlier failures failed
//	conformanceledger status -ledger F -cluster X -selected FILE -commits FILE -version V
//	                                                      per spec its latest result; what has no
//	                                                      result at version V (a result counts when
//	                                                      its commit is in FILE); failures without cause
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/e2e/conformance/ledger"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "specs":
		err = specs(os.Args[2:])
	case "shard":
		err = shard(os.Args[2:])
	case "append":
		err = appendReports(os.Args[2:])
	case "cause":
		err = cause(os.Args[2:])
	case "status":
		err = status(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformanceledger %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: conformanceledger specs|shard|append|cause|status ... (see the package comment)")
	os.Exit(2)
}

func specs(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want one dry run's JUnit report")
	}
	names, err := ledger.Selected(args[0])
	if err != nil {
		return err
	}
	for _, n := range (ledger.Shard{K: 1, N: 1}).Specs(names) {
		fmt.Println(n)
	}
	return nil
}

func shard(args []string) error {
	fs := flag.NewFlagSet("shard", flag.ContinueOnError)
	which := fs.String("shard", "", "K/N, or K,K,.../N for several shards of one split")
	focus := fs.Bool("focus", false, "print the ginkgo focus regexp instead of the names")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one dry run's JUnit report")
	}
	shards, err := ledger.ParseShards(*which)
	if err != nil {
		return err
	}
	names, err := ledger.Selected(fs.Arg(0))
	if err != nil {
		return err
	}
	mine := ledger.SpecsOf(shards, names)
	if len(mine) == 0 {
		return fmt.Errorf("shard %s of %d selected specs is empty: choose N <= %d", *which, len(names), len(names))
	}
	if *focus {
		fmt.Println(ledger.Focus(mine))
		return nil
	}
	for _, n := range mine {
		fmt.Println(n)
	}
	return nil
}

func appendReports(args []string) error {
	fs := flag.NewFlagSet("append", flag.ContinueOnError)
	path := fs.String("ledger", "", "the ledger file")
	var run ledger.Run
	fs.StringVar(&run.Date, "date", "", "when the run began (RFC 3339, UTC)")
	fs.StringVar(&run.Commit, "commit", "", "the code's commit")
	fs.StringVar(&run.Cluster, "cluster", "ipv4", "the cluster: "+strings.Join(ledger.Clusters, ", "))
	fs.StringVar(&run.Nodes, "nodes", "2", "how many nodes the cluster had")
	fs.StringVar(&run.Shard, "shard", "all", "K/N, or all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || fs.NArg() == 0 {
		return fmt.Errorf("want -ledger and at least one JUnit report")
	}
	var lines []ledger.Line
	for _, report := range fs.Args() {
		results, err := ledger.ReadJUnit(report)
		if err != nil {
			return err
		}
		lines = append(lines, run.Lines(filepath.Base(filepath.Dir(report)), results)...)
	}
	added, err := ledger.Append(*path, lines)
	if err != nil {
		return err
	}
	fmt.Printf("ledger %s: %d line(s) appended\n", *path, added)
	return nil
}

func cause(args []string) error {
	fs := flag.NewFlagSet("cause", flag.ContinueOnError)
	path := fs.String("ledger", "", "the ledger file")
	l := ledger.Line{Nodes: "-", Shard: "-", Pass: "-", Outcome: ledger.Cause, Date: time.Now().UTC().Format(time.RFC3339)}
	fs.StringVar(&l.Cluster, "cluster", "ipv4", "the cluster the failures were on")
	fs.StringVar(&l.Commit, "commit", "", "the commit the cause is noted at (a fix's, or HEAD's)")
	fs.StringVar(&l.Spec, "spec", "", "the spec, as the ledger names it")
	fs.StringVar(&l.Note, "note", "", "the cause, one line: ours, the test bed's, or the spec's, and the fix or issue")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lines, err := ledger.Read(*path)
	if err != nil {
		return err
	}
	failed := false
	for _, x := range lines {
		failed = failed || (x.Spec == l.Spec && x.Cluster == l.Cluster && x.Outcome == ledger.Failed)
	}
	if !failed {
		return fmt.Errorf("the ledger has no failure of %q on %s to explain", l.Spec, l.Cluster)
	}
	_, err = ledger.Append(*path, []ledger.Line{l})
	return err
}

func status(args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	path := fs.String("ledger", "", "the ledger file")
	cluster := fs.String("cluster", "ipv4", "the cluster whose coverage is asked for")
	selectedFile := fs.String("selected", "", "the selected specs, one a line (conformanceledger specs)")
	commitsFile := fs.String("commits", "", "the commits of the current version, full hashes one a line (git rev-list)")
	version := fs.String("version", "the current version", "the current version's name, for the headings")
	notPassed := fs.Bool("not-passed", false, "print only the selected specs whose latest result at the current version is not a pass, one a line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lines, err := ledger.Read(*path)
	if err != nil {
		return err
	}
	selected, err := readLines(*selectedFile)
	if err != nil {
		return err
	}
	commits, err := readLines(*commitsFile)
	if err != nil {
		return err
	}
	st := ledger.Compute(lines, selected, *cluster, ledger.CommitIn(commits))
	if *notPassed {
		for _, n := range selected {
			if st.Current[n] != ledger.Passed {
				fmt.Println(n)
			}
		}
		return nil
	}
	st.Write(os.Stdout, *version)
	return nil
}

func readLines(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if t := strings.TrimSpace(s.Text()); t != "" {
			out = append(out, t)
		}
	}
	return out, s.Err()
}
