package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLaterFileReplacesTheSameSideAndSize(t *testing.T) {
	dir := t.TempDir()
	older := filepath.Join(dir, "older.json")
	newer := filepath.Join(dir, "newer.json")
	os.WriteFile(older, []byte(`{"side":"ipvsproxy","services":10000,"ok":true,"peak_rss_mib":139.0}
{"side":"ipvsproxy","services":1000,"ok":true,"peak_rss_mib":81.1}
`), 0o644)
	os.WriteFile(newer, []byte(`{"side":"ipvsproxy","services":10000,"ok":true,"peak_rss_mib":120.5}
`), 0o644)
	got := map[sample]figures{}
	for _, f := range []string{older, newer} {
		if err := read(f, got); err != nil {
			t.Fatal(err)
		}
	}
	if v := got[sample{"ipvsproxy", 10000}].PeakRSS; v == nil || *v != 120.5 {
		t.Errorf("10,000: peak %v, want the newer file's 120.5", v)
	}
	if v := got[sample{"ipvsproxy", 1000}].PeakRSS; v == nil || *v != 81.1 {
		t.Errorf("1,000: peak %v, want the older file's 81.1 (no newer one)", v)
	}
}

func TestMalformedLineIsAnError(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(f, []byte(`{"side":"ipvsproxy","services":10000}
{"peak_rss_mib":1}
`), 0o644)
	if err := read(f, map[sample]figures{}); err == nil {
		t.Error("a line without side and Services was accepted")
	}
}

func TestMarkdownRatiosAgainstNftablesMode(t *testing.T) {
	f := filepath.Join(t.TempDir(), "run.json")
	os.WriteFile(f, []byte(`{"side":"ipvsproxy","services":1000,"ok":true,"peak_rss_mib":40,"ready_s":5,"cold_sync_s":1,"endpoint_series":{"count":50,"p50":0.2,"p99":0.4,"mean":0.25},"big":{"endpoints":100000,"programmed_s":30,"peak_rss_mib":90}}
{"side":"kube-proxy-nftables","services":1000,"ok":true,"peak_rss_mib":80,"ready_s":20,"cold_sync_s":4,"endpoint_series":{"count":50,"p50":0.4,"p99":1.6,"mean":0.5},"big":{"endpoints":100000,"programmed_s":120,"peak_rss_mib":300}}
{"side":"kube-proxy-ipvs","services":1000,"ok":false,"timed_out_after_s":2400,"peak_rss_mib":200,"big":{"endpoints":100000,"in_kernel":400,"not_programmed_after_s":1800}}
`), 0o644)
	got := map[sample]figures{}
	if err := read(f, got); err != nil {
		t.Fatal(err)
	}
	md := markdown(got)
	for _, want := range []string{
		"| 1000 | ready s | 5 | 20 | 0.25 | ≤ 0.5 |",
		"| 1000 | peak RSS MiB | 40 | 80 | 0.50 | ≤ 0.5 |",
		"| 1000 | endpoint change p99 s (histogram) | 0.4 | 1.6 | 0.25 | ≤ 0.5, and ≤ 1 s |",
		"| 1000 | Service of 100,000 endpoints programmed s | 30 | 120 | 0.25 | ≤ 0.5 |",
		"kube-proxy-ipvs (not ready after 2400 s)",
		"not finished after 1800 (400 in the kernel)",
		"| 1000 | ipvsproxy | 40 | 5 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown has no %q:\n%s", want, md)
		}
	}
	// ipvsproxy's rows come before kube-proxy's.
	if strings.Index(md, "| 1000 | ipvsproxy |") > strings.Index(md, "| 1000 | kube-proxy-nftables |") {
		t.Error("kube-proxy's row before ipvsproxy's")
	}
}
