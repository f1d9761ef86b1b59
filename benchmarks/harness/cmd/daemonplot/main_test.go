package main

import (
	"os"
	"path/filepath"
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
